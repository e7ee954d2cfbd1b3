//! What a round learns of the whole population, apart from any one feed: the pooled hourly
//! shape, the typical rate, the shrinkage chosen on held-out days, the mixture of daily
//! shapes and the observations' half-life. [`super::models`] computes it once per round and
//! learns every feed against it; [`super::quick`] keeps it until the next round to re-learn
//! one feed whose fetch surprised its model, with the same rules.

use super::feedstate::FeedState;
use super::models::hour_exposure;
use super::shapes::Mixture;
use super::shrink;
use crate::time::DAY_MS;
use std::sync::Arc;

const BINS: usize = 24;

/// The population's part of every feed's model at one round.
#[derive(Clone, Debug)]
pub struct Population {
    /// Half-life of an observation's weight, days (0: none).
    pub half_life_days: f64,
    /// Days of observations a model learns from.
    pub window_days: f64,
    /// The pooled hourly shape (sums to 1).
    pub shared: Vec<f64>,
    /// Whether models have a weekly period (168 bins).
    pub weekly: bool,
    /// The typical feed's rate, postings a day: what a feed's own rate is shrunk toward.
    pub typical: f64,
    /// Pseudo-days of the rate's shrinkage.
    pub beta: f64,
    /// The mixture of daily shapes, if one was in force.
    pub mixture: Option<Arc<Mixture>>,
    /// Pseudo-postings of the shape prior, when chosen apart from the rate's pseudo-days.
    pub shape_postings: Option<f64>,
    /// The configured floor on the shape prior's pseudo-postings.
    pub shape_pseudo_postings: f64,
}

/// What one feed's observations in the window add up to.
pub struct Tally {
    /// Weighted postings per hour of the day.
    pub counts: [f64; BINS],
    /// Weighted days each hour of the day was watched.
    pub exposure: [f64; BINS],
    /// Weighted postings in all.
    pub n: f64,
    /// Weighted days watched.
    pub span_days: f64,
}

/// A watched feed's postings and exposure in the window from `window_start`, each weighed
/// by `w` (recency). `None` for a feed never watched.
pub fn tally(
    st: &FeedState,
    window_start: i64,
    now_ms: i64,
    w: &dyn Fn(i64) -> f64,
) -> Option<Tally> {
    let since = st.observed_since_ms?;
    let bin_of = |t: i64| (t.rem_euclid(DAY_MS) / (DAY_MS / BINS as i64)) as usize;
    let mut counts = [0.0f64; BINS];
    let mut n = 0.0;
    for &t in st.postings_ms.iter().filter(|&&t| t >= window_start) {
        let wt = w(t);
        counts[bin_of(t)] += wt;
        n += wt;
    }
    for &(from, to) in st.spread_ms.iter().filter(|&&(_, to)| to >= window_start) {
        // One posting's mass spread evenly over the hours of its interval.
        let share = hour_exposure(from.max(window_start), to);
        let total: f64 = share.iter().sum();
        if total <= 0.0 {
            continue;
        }
        let wt = w(to);
        for (b, e) in share.iter().enumerate() {
            counts[b] += wt * e / total;
        }
        n += wt;
    }
    let until = st.observed_until_ms(now_ms).unwrap_or(since);
    let exposure = weighted_hour_exposure(since.max(window_start), until, w);
    let span_days = exposure.iter().sum::<f64>() / BINS as f64;
    Some(Tally {
        counts,
        exposure,
        n,
        span_days,
    })
}

impl Population {
    /// A feed's posting rate per hour of the day: its own counts over its exposure, each
    /// hour shrunk toward its prior. The rate is shrunk toward `toward` (the typical feed's,
    /// or its host's) by the pseudo-days, so a feed seen a day or two with one posting is
    /// not taken for a quiet one (the allocator would starve it on noise, and its real
    /// postings would wait); a feed never `watched` takes `toward` alone. The hours' prior
    /// is the feed's posterior shape under the mixture given `evidence` (its own hours, or
    /// its own and its siblings'), or the pooled shape; it weighs at least the configured
    /// pseudo-postings' worth of days.
    pub fn hours(
        &self,
        counts: &[f64; BINS],
        exposure: &[f64; BINS],
        span_days: f64,
        watched: bool,
        toward: f64,
        evidence: &[f64; BINS],
    ) -> Vec<f32> {
        let n: f64 = counts.iter().sum();
        let beta = self.beta;
        let rate = if watched {
            (n + beta * toward) / (span_days + beta)
        } else {
            toward
        };
        let shape = match (self.mixture.as_deref(), self.shape_postings) {
            (Some(_), Some(pp)) => pp.max(self.shape_pseudo_postings) / rate.max(1e-9),
            _ => shrink::shape_days(beta, self.shape_pseudo_postings, rate),
        };
        let own = self.mixture.as_deref().map(|m| m.prior_for(evidence));
        (0..BINS)
            .map(|b| {
                let prior = rate * own.map_or(self.shared[b], |o| o[b]);
                ((counts[b] + shape * prior) / (exposure[b] + shape)) as f32
            })
            .collect()
    }
}

/// Weighted days of observation per hour of the day in `[from, to)`: each UTC day's part
/// weighs what `w` gives at its middle.
pub(super) fn weighted_hour_exposure(from: i64, to: i64, w: &dyn Fn(i64) -> f64) -> [f64; BINS] {
    let mut e = [0.0; BINS];
    let mut t = from;
    while t < to {
        let end = ((t.div_euclid(DAY_MS) + 1) * DAY_MS).min(to);
        let wt = w(t + (end - t) / 2);
        for (a, b) in e.iter_mut().zip(hour_exposure(t, end)) {
            *a += wt * b;
        }
        t = end;
    }
    e
}
