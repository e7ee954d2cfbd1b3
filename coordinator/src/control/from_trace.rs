//! The live relearner's rules applied to a recorded trace: `plan`, `simulate` and
//! `replay`'s offline references learn with them, so every tool plans with the one learner
//! `serve` uses ([`kairos_planner::learn`] only counts the trace's reader accesses here).

use super::feedstate::FeedState;
use super::relearn::PlannerSettings;
use crate::registry::FeedRecord;
use kairos_planner::learn::{access_bins, daily_config, is_weekly, LearnConfig, Learned, DAY};
use kairos_planner::trace::{Trace, TRACE_ORIGIN_MS};
use rayon::prelude::*;

/// Learns every feed's model with the **live** relearner's rules
/// ([`crate::control::models::models`]), as if every training posting had been seen, dated, by
/// a fetch: so `plan` and `simulate` can show what the live system would plan from the same
/// history. Posting models follow the live rules (shrinkage in pseudo-days, chosen on held-out days or fixed,
/// rates shrunk toward the typical feed's, exploration and weekly factors); reader access
/// rates are the offline learner's counts, since the live access statistics are kept per
/// user and hour rather than per event. Time 0 of the trace maps to
/// [`TRACE_ORIGIN_MS`], as in `replay`.
///
/// With `document_items`, each feed's document is taken to hold that many items (or the
/// postings it has had so far, if fewer, as a fetch would have seen it), and the models
/// carry the live floors that keep it from overflowing between fetches.
///
/// Also returns the pseudo-days of shrinkage used (chosen on held-out days of the training
/// window when `settings.tune_shrinkage`).
pub fn learn_live(
    trace: &Trace,
    cfg: &LearnConfig,
    settings: &PlannerSettings,
    document_items: Option<u32>,
) -> (Learned, f64) {
    let windows: Vec<Window> = trace
        .postings
        .par_iter()
        .map(|posts| {
            // Exactly as long as the postings: collected from a filter, the queue grew by
            // doubling and held a quarter more than it used (about 100 MB at a million
            // feeds, at the learner's peak).
            let mut seen: Vec<i64> = posts
                .iter()
                .filter(|&&t| t >= cfg.train_start && t < cfg.train_end)
                .map(|&t| trace_ms(t))
                .collect();
            seen.shrink_to_fit();
            Window {
                seen,
                shown: posts.partition_point(|&t| t < cfg.train_end),
            }
        })
        .collect();
    learn_windows(trace, windows, cfg, settings, document_items)
}

/// [`learn_live`] for a caller that needs nothing of the trace's postings after learning
/// (`plan`): it takes them (`trace.postings` is left empty) and each feed's training
/// postings become its state's in the same memory, so they are held once rather than twice
/// at the learner's peak (at a million feeds posting about three times a day over 14 days,
/// some 350 bytes a feed).
pub fn learn_live_taking_postings(
    trace: &mut Trace,
    cfg: &LearnConfig,
    settings: &PlannerSettings,
) -> (Learned, f64) {
    let postings = std::mem::take(&mut trace.postings);
    let windows: Vec<Window> = postings
        .into_par_iter()
        .map(|mut posts| {
            let shown = posts.partition_point(|&t| t < cfg.train_end);
            posts.retain(|&t| t >= cfg.train_start && t < cfg.train_end);
            // Same size and alignment: the seconds become milliseconds in their own buffer.
            let mut seen: Vec<i64> = posts.into_iter().map(trace_ms).collect();
            seen.shrink_to_fit();
            Window { seen, shown }
        })
        .collect();
    learn_windows(trace, windows, cfg, settings, None)
}

/// Trace seconds as the live system's milliseconds (time 0 at [`TRACE_ORIGIN_MS`]).
fn trace_ms(t: f64) -> i64 {
    TRACE_ORIGIN_MS + (t * 1000.0) as i64
}

/// Turns a weekly model's hourly bins, whose week starts on a Thursday (the live learner
/// counts days from the Unix epoch, as `serve`'s plans do with origin 0), to start on the
/// trace's day 0 (a Monday at [`TRACE_ORIGIN_MS`]): `plan` and `simulate` place a plan's
/// slots from the trace's start (`kairos_planner::simulate::FeedSchedule`), and without the
/// turn a weekly plan was scored, and written, three days off its model: on a trace with
/// quiet weekends it realized 593.8 minutes at one fetch a day where it expected 400.7.
/// Bins of any other length are left alone.
fn week_from_trace_start(post_bins: &mut [f32], access_bins: &mut [f32]) {
    let days_in = (TRACE_ORIGIN_MS.div_euclid(crate::time::DAY_MS)).rem_euclid(7) as usize;
    for bins in [post_bins, access_bins] {
        if bins.len() == 168 {
            bins.rotate_left(days_in * 24);
        }
    }
}

/// A feed's postings in the training window, in ms, and how many of its postings precede
/// the window's end (what its document could show).
struct Window {
    seen: Vec<i64>,
    shown: usize,
}

fn learn_windows(
    trace: &Trace,
    windows: Vec<Window>,
    cfg: &LearnConfig,
    settings: &PlannerSettings,
    document_items: Option<u32>,
) -> (Learned, f64) {
    let ms = trace_ms;
    let access = access_bins(trace, &daily_config(cfg));
    let feeds: Vec<FeedRecord> = trace
        .feeds
        .iter()
        .enumerate()
        .map(|(f, row)| FeedRecord {
            id: row.id.clone(),
            url: String::new(),
            host: row.host.clone().unwrap_or_else(|| format!("h{f}")),
            weight: row.weight,
        })
        .collect();
    // Each feed's state on every core; the table is filled after, in feed order.
    // Boxed: a table of a million entries has two million buckets, and a bucket holding
    // the whole state doubled its cost (a 1M-feed `plan` peaked 2.4 KB per feed above the
    // trace while learning).
    let built: Vec<(String, Box<FeedState>)> = feeds
        .par_iter()
        .zip(windows)
        .map(|(f, Window { seen, shown })| {
            let doc_capacity = document_items.map_or(0, |n| n.min(shown as u32));
            let st = FeedState {
                observed_since_ms: Some(ms(cfg.train_start)),
                last_answered_ms: Some(ms(cfg.train_end)),
                postings_ms: std::collections::VecDeque::from(seen),
                fetches: 1,
                doc_capacity,
                ..FeedState::default()
            };
            (f.id.clone(), Box::new(st))
        })
        .collect();
    let training_postings = built.iter().map(|(_, st)| st.postings_ms.len()).sum();
    let states: std::collections::HashMap<String, Box<FeedState>> = built.into_iter().collect();
    // Each feed's access bins move into its model (the learner asks once per feed, from
    // every core): a copy would stay here until the end. One lock per feed, so the cores
    // do not wait on each other.
    let index: std::collections::HashMap<&str, usize> = feeds
        .iter()
        .enumerate()
        .map(|(i, f)| (f.id.as_str(), i))
        .collect();
    let access: Vec<std::sync::Mutex<Vec<f32>>> =
        access.into_iter().map(std::sync::Mutex::new).collect();
    let settings = PlannerSettings {
        window_days: ((cfg.train_end - cfg.train_start) / DAY).max(1.0),
        weekly: is_weekly(cfg),
        ..settings.clone()
    };
    let (models, counts) = super::models::models(
        &feeds,
        &states,
        &|id| {
            index
                .get(id)
                .and_then(|&i| access[i].lock().ok().map(|mut a| std::mem::take(&mut *a)))
                .unwrap_or_default()
        },
        ms(cfg.train_end),
        &settings,
        &mut super::shapes::ShapeCache::default(),
    );
    // A million boxed states with their postings freed on every core, not one.
    states.into_par_iter().for_each(drop);
    let mut models = models;
    if settings.weekly {
        models
            .par_iter_mut()
            .for_each(|m| week_from_trace_start(&mut m.post_bins, &mut m.access_bins));
    }
    let learned = Learned {
        models,
        exploring: counts.exploring,
        // The live rules explored already, within the settings' share.
        explore_candidates: Vec::new(),
        training_postings,
        week_shapes: counts.week_shapes,
    };
    (learned, counts.shrinkage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::relearn::Budget;
    use crate::trace::FeedRow;

    const DAY_S: f64 = 86_400.0;

    /// One feed posting 40 times a day, evenly; one that posted 5 times, on day 0; and
    /// twenty posting twice a day.
    fn trace() -> Trace {
        let every = |per_day: usize, days: usize| -> Vec<f64> {
            (0..per_day * days)
                .map(|i| (i as f64 + 0.5) * DAY_S / per_day as f64)
                .collect()
        };
        let mut postings = vec![every(40, 14), every(5, 1)];
        postings.extend((0..20).map(|_| every(2, 14)));
        Trace {
            feeds: (0..postings.len())
                .map(|f| FeedRow {
                    id: format!("f{f}"),
                    weight: 1.0,
                    host: None,
                })
                .collect(),
            postings,
            users: Vec::new(),
            subscriptions: Vec::new(),
            accesses: Vec::new(),
            end_ts: 14.0 * DAY_S,
        }
    }

    fn learned(documents: Option<u32>) -> Learned {
        learned_with(documents, None)
    }

    /// Hourly bins of a daily period, learning on days `from` to `to` of the trace.
    fn config(from: f64, to: f64) -> LearnConfig {
        LearnConfig {
            period_seconds: DAY_S,
            bins: 24,
            train_start: from * DAY_S,
            train_end: to * DAY_S,
            shrinkage: 0.0,
            explore_min_postings: 0,
            min_level: -5,
            max_level: 96,
        }
    }

    /// Four fetches a feed a day over 96 slots, at least one a week, no exploration floor.
    fn settings(lost_posting_hours: Option<f64>) -> PlannerSettings {
        PlannerSettings {
            budget: Budget::PerFeedPerDay(4.0),
            slots: 96,
            min_fetches_per_day: 1.0 / 7.0,
            explore_min_postings: 0,
            lost_posting_hours,
            ..PlannerSettings::default()
        }
    }

    fn learned_with(documents: Option<u32>, lost_posting_hours: Option<f64>) -> Learned {
        let (cfg, settings) = (config(0.0, 14.0), settings(lost_posting_hours));
        learn_live(&trace(), &cfg, &settings, documents).0
    }

    /// A weekly model's days are the trace's days of the week, counted from its day 0, as
    /// `simulate` and `plan` place the plan's slots: feeds that never post on days 5 and 6 of
    /// the trace are quiet there in their models (three days off before the turn).
    #[test]
    fn a_weekly_model_counts_its_days_from_the_traces_start() {
        let weekdays: Vec<f64> = (0..21)
            .filter(|d| d % 7 < 5)
            .flat_map(|d| (0..6).map(move |k| d as f64 * DAY_S + (k as f64 + 0.5) * 4.0 * 3600.0))
            .collect();
        let mut t = trace();
        t.postings = vec![weekdays; 20];
        t.feeds.truncate(20);
        t.end_ts = 21.0 * DAY_S;
        let cfg = LearnConfig {
            period_seconds: 7.0 * DAY_S,
            bins: 168,
            ..config(0.0, 21.0)
        };
        let (learned, _) = learn_live(&t, &cfg, &settings(None), None);
        assert_eq!(learned.models.len(), 20);
        for m in &learned.models {
            assert_eq!(m.post_bins.len(), 168);
            let day = |d: usize| m.post_bins[d * 24..(d + 1) * 24].iter().sum::<f32>();
            let (weekend, monday) = (day(5) + day(6), day(0));
            assert!(
                weekend < 0.2 * monday,
                "{:?}",
                (0..7).map(day).collect::<Vec<_>>()
            );
            for d in 1..5 {
                assert!(
                    day(d) > 0.5 * monday,
                    "{:?}",
                    (0..7).map(day).collect::<Vec<_>>()
                );
            }
        }
    }

    #[test]
    fn a_document_size_gives_the_models_the_live_floors() {
        let without = learned(None);
        let with = learned(Some(20));
        // Forty a day into twenty items, at most 70% full between fetches (not in clumps):
        // at least three fetches a day, more where the model's hours (pooled with the
        // other feeds' two) peak, and never near the slots' cap.
        assert!(
            with.models[0].min_level >= 3,
            "busy feed's floor {}",
            with.models[0].min_level
        );
        assert!(
            with.models[0].min_level <= 12,
            "{}",
            with.models[0].min_level
        );
        assert!(
            without.models[0].min_level < 3,
            "no document, no floor: {}",
            without.models[0].min_level
        );
        // Feeds whose documents never filled have nothing to lose: their floors are the
        // configured minimum's, as without a document.
        for f in 1..with.models.len() {
            assert_eq!(
                with.models[f].min_level, without.models[f].min_level,
                "feed {f}"
            );
        }
    }

    #[test]
    fn a_document_size_gives_the_models_their_document_priced() {
        let without = learned_with(None, Some(24.0));
        let with = learned_with(Some(20), Some(24.0));
        let doc = with.models[0].document.expect("the busy feed's document");
        assert_eq!(doc.items, 20.0);
        assert!((doc.lost_cost - with.models[0].weight * 24.0 * 3600.0).abs() < 1e-6);
        assert!(doc.clump >= 1.0);
        assert!(without.models.iter().all(|m| m.document.is_none()));
        // Priced, not floored: every minimum is the configured one.
        for f in 0..with.models.len() {
            assert_eq!(
                with.models[f].min_level, without.models[f].min_level,
                "feed {f}"
            );
        }
    }

    #[test]
    fn taking_the_postings_learns_the_same_models_and_leaves_the_trace_without_them() {
        // A window inside the trace, so postings before and after it are left out.
        let (cfg, settings) = (config(2.0, 10.0), settings(None));
        let mut t = trace();
        // Times that are not whole milliseconds convert the same way on both paths.
        for p in &mut t.postings {
            for x in p.iter_mut() {
                *x += 0.000_7;
            }
        }
        let (borrowed, shrink_b) = learn_live(&t, &cfg, &settings, None);
        let (taken, shrink_t) = learn_live_taking_postings(&mut t, &cfg, &settings);
        assert_eq!(
            format!("{:?}", borrowed.models),
            format!("{:?}", taken.models)
        );
        assert_eq!(borrowed.training_postings, taken.training_postings);
        assert_eq!(borrowed.training_postings, 40 * 8 + 20 * 2 * 8);
        assert_eq!(shrink_b, shrink_t);
        assert!(t.postings.is_empty());
        assert_eq!(t.feeds.len(), 22, "the rest of the trace stays");
    }
}
