//! What a round learns of the whole population, apart from any one feed: the pooled hourly
//! shape, the typical rate, the shrinkage chosen on held-out days, the mixture of daily
//! shapes and the observations' half-life. [`super::models`] computes it once per round and
//! learns every feed against it; [`super::quick`] keeps it until the next round to re-learn
//! one feed whose fetch surprised its model, with the same rules.

use super::calibrate::RateCalibration;
use super::feedstate::FeedState;
use super::models::hour_exposure;
use super::rate_prior::RatePrior;
use super::regimes;
use super::shapes::Mixture;
use super::shrink;
use crate::time::{DAY_MS, HOUR_MS};
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
    /// Where in the day the population's clumps land ([`tally_population`]; sums to 1): the
    /// hours a clump's excess is spread over.
    pub clump_hours: [f64; BINS],
    /// Whether models have a weekly period (168 bins).
    pub weekly: bool,
    /// The typical feed's rate, postings a day: what a feed's own rate is shrunk toward.
    pub typical: f64,
    /// Pseudo-days of the rate's shrinkage.
    pub beta: f64,
    /// The population's fitted distribution of rates ([`super::rate_prior`]): a watched
    /// feed's rate is its posterior mean under it, in place of the shrinkage by `beta`
    /// pseudo-days. `None`: the shrinkage.
    pub rate_prior: Option<Arc<RatePrior>>,
    /// The mixture of daily shapes, if one was in force.
    pub mixture: Option<Arc<Mixture>>,
    /// Pseudo-postings of the shape prior, when chosen apart from the rate's pseudo-days.
    pub shape_postings: Option<f64>,
    /// The configured floor on the shape prior's pseudo-postings.
    pub shape_pseudo_postings: f64,
    /// What feeds forecast at a rate went on to post ([`super::calibrate`]); `None`: as
    /// forecast.
    pub calibration: Option<Arc<RateCalibration>>,
}

/// What one feed's observations in the window add up to.
pub struct Tally {
    /// Weighted postings per hour of the day.
    pub counts: [f64; BINS],
    /// Weighted days each hour of the day was watched, divided by the current regime's
    /// level against the whole window's ([`regimes::level`]): counts over it give the
    /// feed's rate now, with its hours as all its days show them.
    pub exposure: [f64; BINS],
    /// Weighted postings in all.
    pub n: f64,
    /// Weighted days watched, divided by the regime's level as `exposure` is.
    pub span_days: f64,
    /// Whether some postings in the window were a clump's excess (see `clump_excess`).
    pub clumped: bool,
    /// The size of the lump a posting arrives in, averaged over postings (`Σ n_g² / Σ n_g`
    /// over the clock hours `g` whose postings hold a clump's excess, each other posting a
    /// lump of one): 1 for a feed that posts no clumps. Postings in lumps of this size, the
    /// lumps Poisson, vary between gaps as the feed's do ([`crate::plan::overflow`]).
    pub clump_size: f64,
    /// The level the exposure was divided by ([`regimes::level`]'s square root): 1 for a
    /// steady feed.
    pub level: f64,
}

/// A watched feed's postings and exposure in the window from `window_start`, each weighed
/// by `w` (recency). `None` for a feed never watched.
pub fn tally(
    st: &FeedState,
    window_start: i64,
    now_ms: i64,
    w: &dyn Fn(i64) -> f64,
    clump_hours: &[f64; BINS],
) -> Option<Tally> {
    tally_before(st, window_start, now_ms, w, i64::MAX, clump_hours)
}

/// An even day: the clump hours before any clump is seen, and where only the rate matters.
pub const EVEN_DAY: [f64; BINS] = [1.0 / BINS as f64; BINS];

/// Pseudo-clumps at each hour of the day in the clump hours ([`tally_population`]): with
/// few clumps seen, the hours they are spread over stay close to an even day.
pub const CLUMP_HOURS_PRIOR: f64 = 1.0;

/// Feeds a chunk of the population's clump pool holds: the pool is summed chunk by chunk in
/// feed order, so it does not depend on the thread count.
pub const CLUMP_CHUNK: usize = 4096;

/// Where in the day the population's clumps land: each clump (a clock hour of one day
/// whose postings hold an excess, `clump_excess`) counts once at its hour, weighed by
/// `w` of its first posting, over every watched feed's window; shrunk toward an even day
/// by [`CLUMP_HOURS_PRIOR`] pseudo-clumps an hour, summing to 1. A clump counts once
/// however many postings it holds, so one feed's flood does not move every feed's hours.
/// [`tally_population`] gets the same pool from its tallies' own read of each window; this
/// reads every window for the pool alone, and is what that is checked against.
#[cfg(test)]
pub fn clump_hours<'a, T: Sync>(
    feeds: &[T],
    state_of: impl Fn(&T) -> Option<&'a FeedState> + Sync,
    window_start: i64,
    now_ms: i64,
    w: &(dyn Fn(i64) -> f64 + Sync),
) -> [f64; BINS] {
    use rayon::prelude::*;
    let chunks: Vec<[f64; BINS]> = feeds
        .par_chunks(CLUMP_CHUNK)
        .map(|chunk| {
            let mut hours = [0.0f64; BINS];
            for st in chunk.iter().filter_map(&state_of) {
                if let Some((dated, start, until)) = window_of(st, window_start, now_ms, i64::MAX) {
                    let excess = clump_excess(&dated, start, until);
                    add_clumps(&dated, &excess, w, &mut hours);
                }
            }
            hours
        })
        .collect();
    pooled_clump_hours(&chunks)
}

/// The clump hours from each chunk's clumps, summed in chunk order onto
/// [`CLUMP_HOURS_PRIOR`] an hour, summing to 1.
fn pooled_clump_hours(chunks: &[[f64; BINS]]) -> [f64; BINS] {
    let mut hours = [CLUMP_HOURS_PRIOR; BINS];
    for c in chunks {
        for (h, x) in hours.iter_mut().zip(c) {
            *h += x;
        }
    }
    let total: f64 = hours.iter().sum();
    hours.map(|h| h / total)
}

/// Adds each clump among the sorted postings `dated` (`excess` marking a clump's excess)
/// once at its clock hour, weighed by `w` of the clump's first posting (the one kept at its
/// hour).
fn add_clumps(dated: &[i64], excess: &[bool], w: &dyn Fn(i64) -> f64, hours: &mut [f64; BINS]) {
    let mut last_cell = None;
    for (&t, &excess) in dated.iter().zip(excess) {
        let cell = t.div_euclid(HOUR_MS);
        if excess && last_cell != Some(cell) {
            last_cell = Some(cell);
            let first = dated.partition_point(|&x| x.div_euclid(HOUR_MS) < cell);
            hours[(t.rem_euclid(DAY_MS) / HOUR_MS) as usize] += w(dated[first]);
        }
    }
}

/// Adds a clump's `excess` (weighed postings) to `counts` where the population's clumps
/// land (`clump_hours`, summing to 1), after the feed's other postings: the last sum a
/// tally makes, so [`tally`] and [`tally_population`] add alike.
fn spread_excess(counts: &mut [f64; BINS], excess: f64, clump_hours: &[f64; BINS]) {
    for (c, share) in counts.iter_mut().zip(clump_hours) {
        *c += excess * share;
    }
}

/// Where [`tally_population`] writes each feed's tally, one entry per feed.
pub struct TallyOut<'a> {
    /// [`Tally::counts`].
    pub counts: &'a mut [[f64; BINS]],
    /// [`Tally::exposure`].
    pub exposure: &'a mut [[f64; BINS]],
    /// [`Tally::span_days`].
    pub span_days: &'a mut [f64],
    /// [`Tally::clump_size`].
    pub clump_size: &'a mut [f64],
}

/// Every feed's [`tally`] and the population's clump hours (where in the day its clumps
/// land, summing to 1: each clump once at its hour) from one read of each
/// window, on every core: each chunk of [`CLUMP_CHUNK`] feeds sums its feeds' clumps as it
/// tallies them, and once the pool is summed each feed's excess is spread over it. What it
/// writes to `out` is what [`tally`] with that pool gives, to the last bit. Returns each
/// feed's weighed postings per day watched and regime level (`None`: never watched), and
/// the pool. Entries of feeds never watched are left as they were.
pub fn tally_population<'a, T: Sync>(
    feeds: &[T],
    state_of: impl Fn(&T) -> Option<&'a FeedState> + Sync,
    window_start: i64,
    now_ms: i64,
    w: &(dyn Fn(i64) -> f64 + Sync),
    out: TallyOut,
) -> (Vec<Option<(f64, f64)>>, [f64; BINS]) {
    use rayon::prelude::*;
    let mut excess = vec![0.0f64; feeds.len()];
    // Written in place like the tallies: collecting each chunk's rates and then all of
    // them would hold them twice at the learner's peak.
    let mut rates: Vec<Option<(f64, f64)>> = vec![None; feeds.len()];
    let pools: Vec<[f64; BINS]> = out
        .counts
        .par_chunks_mut(CLUMP_CHUNK)
        .zip(out.exposure.par_chunks_mut(CLUMP_CHUNK))
        .zip(out.span_days.par_chunks_mut(CLUMP_CHUNK))
        .zip(out.clump_size.par_chunks_mut(CLUMP_CHUNK))
        .zip(excess.par_chunks_mut(CLUMP_CHUNK))
        .zip(rates.par_chunks_mut(CLUMP_CHUNK))
        .zip(feeds.par_chunks(CLUMP_CHUNK))
        .map(|((((((c, e), span), cl), ex), r), chunk)| {
            let mut pool = [0.0f64; BINS];
            for (i, feed) in chunk.iter().enumerate() {
                let Some((t, x)) = state_of(feed).and_then(|st| {
                    tally_inner(st, window_start, now_ms, w, i64::MAX, Some(&mut pool))
                }) else {
                    continue;
                };
                (c[i], e[i], span[i], cl[i], ex[i]) =
                    (t.counts, t.exposure, t.span_days, t.clump_size, x);
                r[i] = Some((t.n / t.span_days.max(1.0), t.level));
            }
            pool
        })
        .collect();
    let clump_hours = pooled_clump_hours(&pools);
    out.counts
        .par_iter_mut()
        .zip(&excess)
        .filter(|(_, &x)| x > 0.0)
        .for_each(|(c, &x)| spread_excess(c, x, &clump_hours));
    (rates, clump_hours)
}

/// The feed's dated postings in the window from `window_start` (before `cut`), and the
/// span it was watched over in it; `None` for a feed never watched.
fn window_of(
    st: &FeedState,
    window_start: i64,
    now_ms: i64,
    cut: i64,
) -> Option<(Vec<i64>, i64, i64)> {
    let since = st.observed_since_ms?;
    let until = st.observed_until_ms(now_ms).unwrap_or(since);
    let first = st.postings_ms.partition_point(|&t| t < window_start);
    let last = st.postings_ms.partition_point(|&t| t < cut);
    let dated: Vec<i64> = st
        .postings_ms
        .range(first..last.max(first))
        .copied()
        .collect();
    Some((dated, since.max(window_start), until))
}

/// [`tally`] as the feed looked before `cut`: postings dated from `cut` on, and spread ones
/// found from then, are left out ([`super::calibrate`] forecasts from such a past).
pub fn tally_before(
    st: &FeedState,
    window_start: i64,
    now_ms: i64,
    w: &dyn Fn(i64) -> f64,
    cut: i64,
    clump_hours: &[f64; BINS],
) -> Option<Tally> {
    let (mut t, excess) = tally_inner(st, window_start, now_ms, w, cut, None)?;
    spread_excess(&mut t.counts, excess, clump_hours);
    Some(t)
}

/// [`tally_before`] without its clump excess, which it returns (weighed postings) for the
/// caller to spread; the feed's clumps are added to `pool` when one is given.
fn tally_inner(
    st: &FeedState,
    window_start: i64,
    now_ms: i64,
    w: &dyn Fn(i64) -> f64,
    cut: i64,
    pool: Option<&mut [f64; BINS]>,
) -> Option<(Tally, f64)> {
    let bin_of = |t: i64| (t.rem_euclid(DAY_MS) / (DAY_MS / BINS as i64)) as usize;
    let mut counts = [0.0f64; BINS];
    let mut n = 0.0;
    let (dated, start, until) = window_of(st, window_start, now_ms, cut)?;
    // The feed's level now against its whole window's ([`regimes`]).
    let level = regime_level(st, &dated, start, until, w);
    let excess = clump_excess(&dated, start, until);
    let clump_size = lump_size(&dated, &excess);
    let mut excess_mass = 0.0;
    for (&t, &excess) in dated.iter().zip(&excess) {
        let wt = w(t);
        if excess {
            excess_mass += wt;
        } else {
            counts[bin_of(t)] += wt;
        }
        n += wt;
    }
    // A clump's excess says the feed posts more, not when: it goes to the hours where the
    // population's clumps land, so the feed's rate keeps every posting and its hours keep
    // only the clump's first. Not to the hours the feed posts at otherwise: on every trace
    // measured those foretold the hour of a feed's next clump worse than an even day, and
    // a feed whose clump was most of what it posted had its fetches drawn to one hour
    // (docs/PLANNER.md, "Clumps"). It is left out of the counts here and spread last, by
    // the caller (`spread_excess`), once the pool of clumps' hours is known.
    if let Some(pool) = pool {
        add_clumps(&dated, &excess, w, pool);
    }
    for &(from, to) in st
        .spread_ms
        .iter()
        .filter(|&&(_, to)| to >= window_start && to < cut)
    {
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
    let mut exposure = weighted_hour_exposure(start, until, w);
    // Time in which postings may have scrolled off unseen was not watched.
    for (a, b) in st.blind_within(start, until) {
        for (e, x) in exposure.iter_mut().zip(weighted_hour_exposure(a, b, w)) {
            *e = (*e - x).max(0.0);
        }
    }
    let span_days = exposure.iter().sum::<f64>() / BINS as f64;
    // The level follows the current regime; the hours keep the long memory (a feed's
    // hours are learned from all its days: a week of them is noise to its timing). Their
    // counts stay what they are (how sure the feed's own hours are), and the exposure
    // shrinks or grows to give the level.
    exposure.iter_mut().for_each(|e| *e /= level);
    let span_days = span_days / level;
    let tally = Tally {
        counts,
        exposure,
        n,
        span_days,
        clumped: excess_mass > 0.0,
        clump_size,
        level,
    };
    Some((tally, excess_mass))
}

/// [`Tally::clump_size`] of the sorted postings `dated`, with `excess` marking a clump's
/// excess among them.
fn lump_size(dated: &[i64], excess: &[bool]) -> f64 {
    let (mut squares, mut total) = (0.0f64, 0.0f64);
    let mut i = 0;
    while i < dated.len() {
        let hour = dated[i].div_euclid(HOUR_MS);
        let mut j = i;
        while j < dated.len() && dated[j].div_euclid(HOUR_MS) == hour {
            j += 1;
        }
        let n = (j - i) as f64;
        let lump = excess[i..j].iter().any(|&e| e);
        squares += if lump { n * n } else { n };
        total += n;
        i = j;
    }
    if total > 0.0 {
        squares / total
    } else {
        1.0
    }
}

/// The square root of the feed's level in its current regime against its whole window
/// ([`regimes::level`]), both weighed by recency `w` at each day's middle: the rate half-way,
/// in logarithms, between the two. Counts are distinct clock hours with dated postings,
/// or with an undated one's discovery, per UTC day from `start`'s to `until`'s, so a flood
/// in one hour moves neither the regimes nor the level.
fn regime_level(
    st: &FeedState,
    dated: &[i64],
    start: i64,
    until: i64,
    w: &dyn Fn(i64) -> f64,
) -> f64 {
    const HOUR: i64 = DAY_MS / BINS as i64;
    let first_day = start.div_euclid(DAY_MS);
    let days = (until.max(start).div_euclid(DAY_MS) - first_day + 1) as usize;
    let day_of = |t: i64| (t.div_euclid(DAY_MS) - first_day) as usize;
    let mut counts = vec![0.0f64; days];
    let mut hours: Vec<i64> = dated
        .iter()
        .copied()
        .chain(st.spread_ms.iter().map(|&(_, to)| to))
        .filter(|&t| t >= start && t < until)
        .map(|t| t.div_euclid(HOUR))
        .collect();
    hours.sort_unstable();
    hours.dedup();
    for h in hours {
        counts[day_of(h * HOUR)] += 1.0;
    }
    // Days watched per day: the span less its blind parts.
    let mut exposure = vec![0.0f64; days];
    for (a, b) in by_day(start, until) {
        exposure[day_of(a)] += (b - a) as f64 / DAY_MS as f64;
    }
    for (a, b) in st
        .blind_within(start, until)
        .flat_map(|(a, b)| by_day(a, b))
    {
        let e = &mut exposure[day_of(a)];
        *e = (*e - (b - a) as f64 / DAY_MS as f64).max(0.0);
    }
    let watched: f64 = exposure.iter().sum();
    let mean = counts.iter().sum::<f64>() / watched.max(1.0);
    let regime = regimes::weights(&counts, &exposure, mean, regimes::HAZARD);
    let (mut n, mut x, mut n_regime, mut x_regime) = (0.0, 0.0, 0.0, 0.0);
    for (d, ((c, e), r)) in counts.iter().zip(&exposure).zip(&regime).enumerate() {
        let recency = w((first_day + d as i64) * DAY_MS + DAY_MS / 2);
        n += recency * c;
        x += recency * e;
        n_regime += recency * r * c;
        x_regime += recency * r * e;
    }
    regimes::level(n, x, n_regime, x_regime).sqrt()
}

/// Probability under which a count in one hour of one day is too high to be the feed's
/// usual posting in that hour: beyond it the postings are a clump.
const CLUMP_TAIL: f64 = 1e-3;

/// Which of a feed's dated postings (ascending; the feed watched over `[from, until)`) are
/// a clump's excess: postings in one clock hour of one day beyond what the same hour on the
/// feed's other watched days makes plausible (a Poisson count at that hour's mean elsewhere, or the feed's hourly mean if
/// higher, exceeded with probability [`CLUMP_TAIL`]; one posting always counts). A burst of
/// ten at an hour the feed never posts at otherwise says the feed posts more, not that it
/// posts at that hour: counted at its hour, it would pull the feed's one fetch of a
/// multi-day period to a time where the next burst will not be. A feed that posts many at
/// the same hour day after day keeps them (its mean elsewhere is high), and so does a feed
/// watched for less than two days (nothing to compare with).
fn clump_excess(times: &[i64], from: i64, until: i64) -> Vec<bool> {
    const HOUR: i64 = DAY_MS / BINS as i64;
    let mut out = vec![false; times.len()];
    let days = (until - from) as f64 / DAY_MS as f64;
    if days < 2.0 || times.len() < 2 {
        return out;
    }
    let mut by_hour = [0u32; BINS];
    for &t in times {
        by_hour[(t.rem_euclid(DAY_MS) / HOUR) as usize] += 1;
    }
    let total = times.len() as u32;
    let others = days - 1.0;
    let mut start = 0;
    while start < times.len() {
        let cell = times[start].div_euclid(HOUR);
        let end = start + times[start..].partition_point(|&t| t.div_euclid(HOUR) == cell);
        let k = (end - start) as u32;
        let bin = (times[start].rem_euclid(DAY_MS) / HOUR) as usize;
        let mean = f64::max(
            f64::from(by_hour[bin] - k) / others,
            f64::from(total - k) / (BINS as f64 * others),
        );
        let allowed = poisson_upper(mean, CLUMP_TAIL).max(1);
        for e in out.iter_mut().take(end).skip(start + allowed as usize) {
            *e = true;
        }
        start = end;
    }
    out
}

/// The smallest count `c` with `P(X > c) < tail` for `X ~ Poisson(mean)`.
fn poisson_upper(mean: f64, tail: f64) -> u32 {
    if mean.is_nan() || mean <= 0.0 {
        return 0;
    }
    if mean > 50.0 {
        // Far from zero the normal tail is close enough, and exp(−mean) would underflow.
        return (mean + 4.0 * mean.sqrt() + 1.0).ceil() as u32;
    }
    let (mut p, mut c) = ((-mean).exp(), 0u32);
    let mut cdf = p;
    while 1.0 - cdf >= tail {
        c += 1;
        p *= mean / f64::from(c);
        cdf += p;
    }
    c
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
        let rate = match (&self.rate_prior, watched) {
            (Some(p), true) => p.rate(n, span_days),
            (None, true) => (n + beta * toward) / (span_days + beta),
            (_, false) => toward,
        };
        let shape = match (self.mixture.as_deref(), self.shape_postings) {
            (Some(_), Some(pp)) => pp.max(self.shape_pseudo_postings) / rate.max(1e-9),
            _ => shrink::shape_days(beta, self.shape_pseudo_postings, rate),
        };
        let own = self.mixture.as_deref().map(|m| m.prior_for(evidence));
        // The forward calibration scales the feed's level, not its hours.
        let factor = match &self.calibration {
            Some(c) if watched => c.factor(rate, n <= 0.0),
            _ => 1.0,
        };
        (0..BINS)
            .map(|b| {
                let prior = rate * own.map_or(self.shared[b], |o| o[b]);
                (factor * (counts[b] + shape * prior) / (exposure[b] + shape)) as f32
            })
            .collect()
    }
}

/// Weighted days of observation per hour of the day in `[from, to)`: each UTC day's part
/// weighs what `w` gives at its middle.
pub(super) fn weighted_hour_exposure(from: i64, to: i64, w: &dyn Fn(i64) -> f64) -> [f64; BINS] {
    let mut e = [0.0; BINS];
    for (t, end) in by_day(from, to) {
        let wt = w(t + (end - t) / 2);
        for (a, b) in e.iter_mut().zip(hour_exposure(t, end)) {
            *a += wt * b;
        }
    }
    e
}

/// `[from, to)` cut at UTC midnights, in order (nothing when empty).
fn by_day(from: i64, to: i64) -> impl Iterator<Item = (i64, i64)> {
    std::iter::successors((from < to).then_some(from), move |&t| {
        let next = (t.div_euclid(DAY_MS) + 1) * DAY_MS;
        (next < to).then_some(next)
    })
    .map(move |t| (t, ((t.div_euclid(DAY_MS) + 1) * DAY_MS).min(to)))
}

#[cfg(test)]
#[path = "population_tests.rs"]
mod tests;
