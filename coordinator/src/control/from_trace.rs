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
/// Also returns the pseudo-days of shrinkage used (chosen on held-out days of the training
/// window when `settings.tune_shrinkage`).
pub fn learn_live(trace: &Trace, cfg: &LearnConfig, settings: &PlannerSettings) -> (Learned, f64) {
    let ms = |t: f64| TRACE_ORIGIN_MS + (t * 1000.0) as i64;
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
        .zip(&trace.postings)
        .map(|(f, posts)| {
            // Exactly as long as the postings: collected from a filter, the queue grew by
            // doubling and held a quarter more than it used (about 100 MB at a million feeds,
            // at the learner's peak).
            let mut seen: Vec<i64> = posts
                .iter()
                .filter(|&&t| t >= cfg.train_start && t < cfg.train_end)
                .map(|&t| ms(t))
                .collect();
            seen.shrink_to_fit();
            let seen = std::collections::VecDeque::from(seen);
            let st = FeedState {
                observed_since_ms: Some(ms(cfg.train_start)),
                last_answered_ms: Some(ms(cfg.train_end)),
                postings_ms: seen,
                fetches: 1,
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
