//! Learning per-feed posting and access patterns from a trace window.
//!
//! * Postings are counted in hourly bins of the period (24 for a day, 168 for a week) over
//!   the training window.
//! * Sparse feeds are shrunk toward the shared pattern: a feed's shape is
//!   `(c_b + α·g_b) / (n + α)`, with `g` the pooled shape of all feeds and `α` pseudo-postings
//!   (the papers cluster shapes with k-means; one shared shape is the K = 1 case), `α`
//!   given by the caller.
//!
//! These are the papers' rules, kept for the scale benchmark (`benches/plan_scale.rs`) and
//! as the counter of a trace's reader accesses. `plan`, `simulate`, `replay` and `serve`
//! learn posting models with one learner, the live one (`control::models` in the
//! coordinator; `control::from_trace` applies it to a trace).
//! * A feed's rate is its count over the window; a feed with no posting at all gets half a
//!   posting per window, a guess that keeps it in the plan without betting budget on it.
//! * A feed with fewer than `explore_min_postings` postings is an exploration candidate:
//!   [`explore_within`] raises the minimum of the most recently active ones to once a day,
//!   within a stated share of the budget left above the minimums, so exploring can never
//!   make a budget infeasible nor take more than that share. Silence is evidence: a feed
//!   whose last posting is older comes later in line.
//! * Reader access rate of a feed: `Σ_{subscribers s} w_s · (app-level accesses of s +
//!   accesses of s to the feed)` per bin per period; an app-level access counts for every
//!   subscription of its user.
//! * A **weekly** period (168 bins) is not learned as 168 free bins — two weeks of training
//!   leave two postings' worth of evidence per bin for a typical feed. It is the daily model
//!   scaled per day of the week by factors shrunk toward 1, each feed choosing between no
//!   weekly effect, weekday/weekend and day-of-week on held-out weeks ([`crate::weekly`]).

use crate::plan::alloc::Level;
use crate::plan::planner::FeedModel;
use crate::trace::Trace;
use crate::weekly;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU32, Ordering};

/// Learning settings.
#[derive(Clone, Debug)]
pub struct LearnConfig {
    /// Period in seconds (a day or a week).
    pub period_seconds: f64,
    /// Bins per period (24 for a day, 168 for a week).
    pub bins: usize,
    /// Training window start (seconds from trace start, inclusive).
    pub train_start: f64,
    /// Training window end (exclusive).
    pub train_end: f64,
    /// Shrinkage strength toward the shared pattern, in pseudo-postings.
    pub shrinkage: f64,
    /// Feeds with fewer training postings than this are fetched at least once a period.
    pub explore_min_postings: usize,
    /// Global minimum level.
    pub min_level: Level,
    /// Global maximum level.
    pub max_level: Level,
}

/// Learned models plus what learning saw.
#[derive(Clone, Debug)]
pub struct Learned {
    /// One model per trace feed, in trace order.
    pub models: Vec<FeedModel>,
    /// Feeds whose minimum was raised for exploration (0 until [`Learned::explore`]).
    pub exploring: usize,
    /// Exploration candidates: (feed, time of its last training posting or, with none,
    /// the window's start), for [`explore_within`].
    pub explore_candidates: Vec<(usize, f64)>,
    /// Postings inside the training window.
    pub training_postings: usize,
    /// Weekly periods: feeds that chose no weekly effect, the pooled factors,
    /// weekday/weekend and day of week ([`weekly::WeekShape`] order).
    pub week_shapes: [usize; 4],
}

pub use crate::time::DAY_S as DAY;

/// Whether `cfg` asks for a weekly model.
pub fn is_weekly(cfg: &LearnConfig) -> bool {
    cfg.bins == 168 && (cfg.period_seconds - 7.0 * DAY).abs() < 1.0
}

/// `cfg` with a daily period of hourly bins.
pub fn daily_config(cfg: &LearnConfig) -> LearnConfig {
    LearnConfig {
        period_seconds: DAY,
        bins: 24,
        ..cfg.clone()
    }
}

/// The weekly model: the daily one, scaled per day of the week (see the module docs).
fn learn_weekly(trace: &Trace, cfg: &LearnConfig) -> Learned {
    let daily = learn(trace, &daily_config(cfg));
    let first = (cfg.train_start / DAY).ceil() as usize;
    let last = (cfg.train_end / DAY).floor() as usize;
    let mut shapes = [0usize; 4];
    let per_feed: Vec<Vec<weekly::Day>> = trace
        .postings
        .iter()
        .map(|posts| {
            let mut days: Vec<weekly::Day> = (first..last)
                .map(|i| weekly::Day {
                    weekday: i % 7,
                    count: 0.0,
                    exposure: 1.0,
                })
                .collect();
            for &t in posts {
                let i = (t / DAY).floor();
                if i >= first as f64 && i < last as f64 {
                    days[i as usize - first].count += 1.0;
                }
            }
            days
        })
        .collect();
    let prior = weekly::pooled(&per_feed);
    let models = daily
        .models
        .into_iter()
        .zip(&per_feed)
        .map(|(m, days)| {
            let f = weekly::choose(days, &|k| (k + first) / 7, &prior);
            shapes[f.shape as usize] += 1;
            let min_level = cfg.min_level;
            FeedModel {
                post_bins: weekly::weekly_bins(&m.post_bins, &f.factors),
                access_bins: weekly::weekly_bins(&m.access_bins, &[1.0; 7]),
                min_level,
                max_level: cfg.max_level.max(min_level),
                ..m
            }
        })
        .collect();
    Learned {
        models,
        exploring: 0,
        explore_candidates: daily.explore_candidates,
        training_postings: daily.training_postings,
        week_shapes: shapes,
    }
}

impl Learned {
    /// Raises exploring feeds' minimums to once a day within `share` of the budget
    /// (fetches per period) left above the minimums; see [`explore_within`].
    pub fn explore(&mut self, budget: f64, share: f64, days_per_period: f64) {
        self.exploring = explore_within(
            &mut self.models,
            &self.explore_candidates,
            crate::plan::alloc::ceil_level(days_per_period),
            budget,
            share,
        );
    }
}

/// Raises the minimum of exploration `candidates` — (feed, time of its latest evidence) —
/// to `level`, the most recent first, while the fetches added stay within `share` of what
/// `budget` (fetches per period) leaves above every model's minimum. Returns how many were
/// raised (a feed already at or above `level` costs nothing and is not counted).
pub fn explore_within(
    models: &mut [FeedModel],
    candidates: &[(usize, f64)],
    level: Level,
    budget: f64,
    share: f64,
) -> usize {
    use crate::plan::alloc::level_rate;
    let floors: f64 = models.iter().map(|m| level_rate(m.min_level)).sum();
    let mut room = share.clamp(0.0, 1.0) * (budget - floors).max(0.0);
    let mut order: Vec<(usize, f64)> = candidates
        .iter()
        .copied()
        .filter(|&(f, _)| f < models.len())
        .collect();
    // Most recent evidence first; ties by feed for a stable order.
    order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut raised = 0;
    for (f, _) in order {
        let m = &mut models[f];
        let target = level.min(m.max_level);
        if m.min_level >= target {
            continue;
        }
        let extra = level_rate(target) - level_rate(m.min_level);
        if extra > room {
            break;
        }
        room -= extra;
        m.min_level = target;
        raised += 1;
    }
    raised
}

/// The trace's hosts in order of first appearance: host `i` of the models is `names[i]`.
pub fn host_names(trace: &Trace) -> Vec<&str> {
    let mut seen = std::collections::HashSet::new();
    trace
        .feeds
        .iter()
        .filter_map(|row| row.host.as_deref())
        .filter(|h| seen.insert(*h))
        .collect()
}

/// Every feed's reader accesses per bin per period over the training window, weighted by
/// user weight: its subscribers' app-level accesses plus the accesses to it. The live
/// learner (`control::from_trace`) takes these and nothing else from this module.
pub fn access_bins(trace: &Trace, cfg: &LearnConfig) -> Vec<Vec<f32>> {
    let bins = cfg.bins;
    let bin_len = cfg.period_seconds / bins as f64;
    let periods = ((cfg.train_end - cfg.train_start) / cfg.period_seconds).max(1e-9);
    let bin_of = |ts: f64| ((ts.rem_euclid(cfg.period_seconds) / bin_len) as usize).min(bins - 1);
    let in_window = |ts: f64| ts >= cfg.train_start && ts < cfg.train_end;
    // Access rates per feed: app-level accesses per user, then spread over subscriptions.
    // App-level accesses are counted per user and bin on every core (integer counts: the
    // same whatever the order), then weighted by the user's weight.
    let users = trace.users.len();
    let app_counts: Vec<AtomicU32> = (0..users * bins).map(|_| AtomicU32::new(0)).collect();
    trace
        .accesses
        .par_iter()
        .filter(|a| a.feed.is_none() && in_window(a.ts))
        .for_each(|a| {
            app_counts[a.user as usize * bins + bin_of(a.ts)].fetch_add(1, Ordering::Relaxed);
        });
    let app: Vec<f64> = app_counts
        .into_par_iter()
        .enumerate()
        .map(|(i, c)| trace.users[i / bins].1 * c.into_inner() as f64)
        .collect();
    // Accesses to one feed, in file order (order kept by the parallel filter).
    let direct: Vec<(u32, usize, f64)> = trace
        .accesses
        .par_iter()
        .filter(|a| a.feed.is_some() && in_window(a.ts))
        .map(|a| {
            let f = a.feed.unwrap_or_default();
            (f, bin_of(a.ts), trace.users[a.user as usize].1)
        })
        .collect();
    let mut direct_of: Vec<Vec<(usize, f64)>> = vec![Vec::new(); trace.feeds.len()];
    for (f, b, w) in direct {
        direct_of[f as usize].push((b, w));
    }
    // Subscribers per feed, in ascending user order (so each feed's sum has a fixed order),
    // as one flat array with offsets.
    let nf = trace.feeds.len();
    let mut start = vec![0usize; nf + 1];
    for subs in &trace.subscriptions {
        for &f in subs {
            start[f as usize + 1] += 1;
        }
    }
    for f in 0..nf {
        start[f + 1] += start[f];
    }
    let mut cursor = start.clone();
    let mut subscribers = vec![0u32; start[nf]];
    for (u, subs) in trace.subscriptions.iter().enumerate() {
        for &f in subs {
            subscribers[cursor[f as usize]] = u as u32;
            cursor[f as usize] += 1;
        }
    }
    drop(cursor);

    (0..nf)
        .into_par_iter()
        .map(|f| {
            let mut access = vec![0.0f64; bins];
            for &(b, w) in &direct_of[f] {
                access[b] += w;
            }
            for &u in &subscribers[start[f]..start[f + 1]] {
                let row = &app[u as usize * bins..(u as usize + 1) * bins];
                for (a, x) in access.iter_mut().zip(row) {
                    *a += x;
                }
            }
            access.iter().map(|&a| (a / periods) as f32).collect()
        })
        .collect()
}

/// Learns every feed's model from the trace's training window.
pub fn learn(trace: &Trace, cfg: &LearnConfig) -> Learned {
    if is_weekly(cfg) {
        return learn_weekly(trace, cfg);
    }
    let bins = cfg.bins;
    let bin_len = cfg.period_seconds / bins as f64;
    let periods = ((cfg.train_end - cfg.train_start) / cfg.period_seconds).max(1e-9);
    let bin_of = |ts: f64| ((ts.rem_euclid(cfg.period_seconds) / bin_len) as usize).min(bins - 1);
    let in_window = |ts: f64| ts >= cfg.train_start && ts < cfg.train_end;

    // Per feed, in parallel: its hourly counts. Integer counts, so the pooled sums below do
    // not depend on the thread count.
    let counts: Vec<Vec<u32>> = trace
        .postings
        .par_iter()
        .map(|posts| {
            let mut c = vec![0u32; bins];
            for &ts in posts.iter().filter(|&&t| in_window(t)) {
                c[bin_of(ts)] += 1;
            }
            c
        })
        .collect();
    let mut pooled_counts = vec![0u64; bins];
    for c in &counts {
        for (p, &x) in pooled_counts.iter_mut().zip(c) {
            *p += x as u64;
        }
    }
    let training_postings = pooled_counts.iter().sum::<u64>() as usize;
    let pooled_total = training_postings as f64;
    let shared: Vec<f64> = if pooled_total > 0.0 {
        pooled_counts
            .iter()
            .map(|&c| c as f64 / pooled_total)
            .collect()
    } else {
        vec![1.0 / bins as f64; bins]
    };

    let access = access_bins(trace, cfg);
    let names = host_names(trace);
    let hosts: std::collections::HashMap<&str, u32> = names
        .iter()
        .enumerate()
        .map(|(i, &h)| (h, i as u32))
        .collect();
    let alpha = cfg.shrinkage.max(0.0);
    let models: Vec<FeedModel> = trace
        .feeds
        .par_iter()
        .enumerate()
        .map(|(f, row)| {
            let n: f64 = counts[f].iter().map(|&c| c as f64).sum();
            let rate = if n > 0.0 { n / periods } else { 0.5 / periods };
            let denom = n + alpha;
            let post_bins: Vec<f32> = (0..bins)
                .map(|b| {
                    let shape = if denom > 0.0 {
                        (counts[f][b] as f64 + alpha * shared[b]) / denom
                    } else {
                        shared[b]
                    };
                    (rate * shape) as f32
                })
                .collect();
            let min_level = cfg.min_level;
            FeedModel {
                weight: row.weight,
                post_bins,
                peaks: Vec::new(),
                access_bins: access[f].clone(),
                min_level,
                max_level: cfg.max_level.max(min_level),
                host: row.host.as_deref().map(|h| hosts[h]),
                document: None,
            }
        })
        .collect();
    let explore_candidates: Vec<(usize, f64)> = trace
        .postings
        .iter()
        .enumerate()
        .filter_map(|(f, posts)| {
            let lo = posts.partition_point(|&t| t < cfg.train_start);
            let hi = posts.partition_point(|&t| t < cfg.train_end);
            (hi - lo < cfg.explore_min_postings).then(|| {
                (
                    f,
                    if hi > lo {
                        posts[hi - 1]
                    } else {
                        cfg.train_start
                    },
                )
            })
        })
        .collect();
    Learned {
        models,
        exploring: 0,
        explore_candidates,
        training_postings,
        week_shapes: [0; 4],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Access, FeedRow};

    fn flat(min_level: Level) -> FeedModel {
        FeedModel {
            weight: 1.0,
            post_bins: vec![0.01; 24],
            peaks: Vec::new(),
            access_bins: vec![0.0; 24],
            min_level,
            max_level: 1440,
            host: None,
            document: None,
        }
    }

    #[test]
    fn exploration_stays_within_its_share_most_recent_first() {
        use crate::plan::alloc::{ceil_level, level_rate};
        let weekly = ceil_level(1.0 / 7.0);
        // 100 feeds at once a week; 100 fetches a day leave 85.7 above the minimums.
        let mut models: Vec<FeedModel> = (0..100).map(|_| flat(weekly)).collect();
        let candidates: Vec<(usize, f64)> = (0..100).map(|f| (f, f as f64)).collect();
        let raised = explore_within(&mut models, &candidates, 1, 100.0, 0.105);
        // 10.5% of 85.7 (9.0) pays for 10 raises of 6/7 each, not 11.
        assert_eq!(raised, 10);
        let floors: f64 = models.iter().map(|m| level_rate(m.min_level)).sum();
        assert!(floors <= 100.0 / 7.0 + 0.105 * (100.0 - 100.0 / 7.0) + 1e-9);
        // The ten with the latest evidence.
        assert!(models[90..].iter().all(|m| m.min_level == 1));
        assert!(models[..90].iter().all(|m| m.min_level == weekly));
        // A budget at the minimums: nothing to explore with, still feasible.
        let mut models: Vec<FeedModel> = (0..100).map(|_| flat(weekly)).collect();
        assert_eq!(
            explore_within(&mut models, &candidates, 1, 100.0 / 7.0, 0.5),
            0
        );
        // Share 0: off.
        let mut models: Vec<FeedModel> = (0..100).map(|_| flat(weekly)).collect();
        assert_eq!(explore_within(&mut models, &candidates, 1, 400.0, 0.0), 0);
    }

    fn trace() -> Trace {
        let day = 86_400.0;
        let at = |d: usize, h: f64| d as f64 * day + h * 3600.0 + 60.0;
        let feed = |id: &str| FeedRow {
            id: id.into(),
            weight: 1.0,
            host: None,
        };
        Trace {
            feeds: vec![feed("morning"), feed("silent"), feed("afternoon")],
            // Two postings a day at 09:01 for f0 and at 15:01 for f2, over 14 days.
            postings: vec![
                (0..14).flat_map(|d| [at(d, 9.0), at(d, 9.0)]).collect(),
                vec![],
                (0..14).flat_map(|d| [at(d, 15.0), at(d, 15.0)]).collect(),
            ],
            users: vec![("u".into(), 2.0)],
            subscriptions: vec![vec![0]],
            accesses: vec![
                Access {
                    user: 0,
                    feed: None,
                    ts: at(0, 8.0),
                },
                Access {
                    user: 0,
                    feed: Some(1),
                    ts: at(0, 10.0),
                },
            ],
            end_ts: 14.0 * day,
        }
    }

    fn config(shrinkage: f64) -> LearnConfig {
        LearnConfig {
            period_seconds: 86_400.0,
            bins: 24,
            train_start: 0.0,
            train_end: 14.0 * 86_400.0,
            shrinkage,
            explore_min_postings: 3,
            min_level: -5,
            max_level: 100,
        }
    }

    #[test]
    fn rates_shapes_and_exploration() {
        let mut l = learn(&trace(), &config(0.0));
        assert_eq!(
            l.exploring, 0,
            "nothing is raised before the budget is known"
        );
        assert_eq!(l.models[1].min_level, -5);
        // Two feeds at 4 a day: half of what the minimums leave is plenty.
        l.explore(8.0, 0.5, 1.0);
        let f0 = &l.models[0];
        assert!(
            (f0.post_bins[9] - 2.0).abs() < 1e-6,
            "two postings a day at 9 h"
        );
        assert!(f0
            .post_bins
            .iter()
            .enumerate()
            .all(|(b, &v)| b == 9 || v == 0.0));
        assert_eq!(f0.min_level, -5, "a known feed may drop below once a day");
        // The silent feed: half a posting per window, shaped like the pooled pattern
        // (half at 9 h, half at 15 h), and raised to once a day to explore it.
        let f1 = &l.models[1];
        let total: f32 = f1.post_bins.iter().sum();
        assert!((total - 0.5 / 14.0).abs() < 1e-6);
        assert!((f1.post_bins[9] - f1.post_bins[15]).abs() < 1e-7 && f1.post_bins[9] > 0.0);
        assert_eq!(f1.min_level, 1);
        assert_eq!(l.exploring, 1);
        assert_eq!(l.training_postings, 56);
    }

    #[test]
    fn shrinkage_pulls_toward_the_pooled_shape() {
        // α = 28 pseudo-postings against 28 real ones: half the shape is the pooled one.
        let f0 = &learn(&trace(), &config(28.0)).models[0];
        assert!((f0.post_bins[9] - 1.5).abs() < 1e-6, "{}", f0.post_bins[9]);
        assert!(
            (f0.post_bins[15] - 0.5).abs() < 1e-6,
            "{}",
            f0.post_bins[15]
        );
    }

    #[test]
    fn access_rates_count_app_level_accesses_for_every_subscription() {
        let l = learn(&trace(), &config(0.0));
        // User weight 2, one app-level access at 8 h (subscribed to f0 only) and one direct
        // access to f1 at 10 h, over 14 days.
        assert!((l.models[0].access_bins[8] - 2.0 / 14.0).abs() < 1e-6);
        assert!((l.models[1].access_bins[10] - 2.0 / 14.0).abs() < 1e-6);
        assert_eq!(l.models[2].access_bins.iter().sum::<f32>(), 0.0);
        assert_eq!(l.models[1].access_bins[8], 0.0, "f1 is not subscribed");
    }
}
