//! Learning per-feed posting and access patterns from a trace window.
//!
//! * Postings are counted in hourly bins of the period (24 for a day, 168 for a week) over
//!   the training window.
//! * Sparse feeds are shrunk toward the shared pattern: a feed's shape is
//!   `(c_b + α·g_b) / (n + α)`, with `g` the pooled shape of all feeds and `α` pseudo-postings
//!   (the papers cluster shapes with k-means; one shared shape is the K = 1 case). `α` and
//!   the smoothing onto slots are chosen on held-out days by [`crate::simulate::tune`].
//! * A feed's rate is its count over the window; a feed with no posting at all gets half a
//!   posting per window, a guess that keeps it in the plan without betting budget on it.
//! * A feed with fewer than `explore_min_postings` postings is *exploring*: its minimum is
//!   raised to once a period, so the planner cannot starve it on a guess before its rate is
//!   known.
//! * Reader access rate of a feed: `Σ_{subscribers s} w_s · (app-level accesses of s +
//!   accesses of s to the feed)` per bin per period; an app-level access counts for every
//!   subscription of its user.

use crate::plan::alloc::Level;
use crate::plan::planner::FeedModel;
use crate::trace::Trace;

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
    /// Feeds whose minimum was raised for exploration.
    pub exploring: usize,
    /// Postings inside the training window.
    pub training_postings: usize,
}

/// Learns every feed's model from the trace's training window.
pub fn learn(trace: &Trace, cfg: &LearnConfig) -> Learned {
    let bins = cfg.bins;
    let bin_len = cfg.period_seconds / bins as f64;
    let periods = ((cfg.train_end - cfg.train_start) / cfg.period_seconds).max(1e-9);
    let bin_of = |ts: f64| ((ts.rem_euclid(cfg.period_seconds) / bin_len) as usize).min(bins - 1);
    let in_window = |ts: f64| ts >= cfg.train_start && ts < cfg.train_end;

    let mut counts = vec![vec![0u32; bins]; trace.feeds.len()];
    let mut pooled = vec![0.0f64; bins];
    let mut training_postings = 0;
    for (f, posts) in trace.postings.iter().enumerate() {
        for &ts in posts.iter().filter(|&&t| in_window(t)) {
            let b = bin_of(ts);
            counts[f][b] += 1;
            pooled[b] += 1.0;
            training_postings += 1;
        }
    }
    let pooled_total: f64 = pooled.iter().sum();
    let shared: Vec<f64> = if pooled_total > 0.0 {
        pooled.iter().map(|c| c / pooled_total).collect()
    } else {
        vec![1.0 / bins as f64; bins]
    };

    // Access rates per feed: app-level accesses per user, then spread over subscriptions.
    let users = trace.users.len();
    let mut app = vec![vec![0.0f64; bins]; users];
    let mut access = vec![vec![0.0f64; bins]; trace.feeds.len()];
    for a in trace.accesses.iter().filter(|a| in_window(a.ts)) {
        let w = trace.users[a.user as usize].1;
        match a.feed {
            None => app[a.user as usize][bin_of(a.ts)] += w,
            Some(f) => access[f as usize][bin_of(a.ts)] += w,
        }
    }
    for (u, subs) in trace.subscriptions.iter().enumerate() {
        for &f in subs {
            for b in 0..bins {
                access[f as usize][b] += app[u][b];
            }
        }
    }

    let mut hosts: std::collections::HashMap<&str, u32> = Default::default();
    let mut exploring = 0;
    let models = trace
        .feeds
        .iter()
        .enumerate()
        .map(|(f, row)| {
            let n: f64 = counts[f].iter().map(|&c| c as f64).sum();
            let alpha = cfg.shrinkage.max(0.0);
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
            let access_bins: Vec<f32> = access[f].iter().map(|&a| (a / periods) as f32).collect();
            let mut min_level = cfg.min_level;
            if (n as usize) < cfg.explore_min_postings && min_level < 1 {
                min_level = 1;
                exploring += 1;
            }
            FeedModel {
                weight: row.weight,
                post_bins,
                access_bins,
                min_level,
                max_level: cfg.max_level.max(min_level),
                host: row.host.as_deref().map(|h| {
                    let next = hosts.len() as u32;
                    *hosts.entry(h).or_insert(next)
                }),
            }
        })
        .collect();
    Learned {
        models,
        exploring,
        training_postings,
    }
}
