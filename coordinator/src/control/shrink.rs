//! The live learner's shrinkage, chosen on held-out days of its own observations.
//!
//! How many pseudo-days of the pooled pattern a feed's hourly counts need depends on the
//! population: a few postings a day over two weeks leave most hours with one or two
//! counts, and the plan that trusts those counts fetches after noise. One fixed value was
//! measurably wrong in both directions (on `sample-500`, one pseudo-day left the `miss` plan
//! 15% above the offline optimum, four pseudo-days were better later and worse on the first
//! days). So the value is chosen the way a smoothing parameter is: by leave-one-day-out
//! predictive likelihood. For each whole day a feed was watched, its model is rebuilt
//! from its other days with each candidate, and the day's postings are scored under a
//! Poisson model per hour (`Σ k·ln(λx) − λx`, `k` postings in an hour watched `x` days at
//! rate `λ`). The candidate with the best total over a bounded sample of feeds wins.
//!
//! With shapes pooled by similarity ([`super::shapes`]) the shape's prior is each feed's
//! posterior mean under the mixture, given its other days, and its weight (pseudo-postings)
//! is chosen together with the rate's pseudo-days: the pair that scores best wins.
//!
//! The pooled shape and the typical rate come from all days (they pool every feed, so one
//! held-out day of one feed barely moves them). Until some feed has two whole days watched
//! there is nothing to hold out, and the configured value stands.

use super::feedstate::FeedState;
use super::models::hour_exposure;
use super::siblings::{self, Siblings};
use crate::time::{DAY_MS, HOUR_MS};
use rayon::prelude::*;
use std::collections::HashMap;

const BINS: usize = 24;

/// Pseudo-days tried, smallest first (ties go to the smaller).
pub const CANDIDATES: [f64; 7] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0];

/// Pseudo-postings tried for a shape prior drawn from the mixture of shapes, smallest
/// first. The mixture's prior already fits the feed's own hours, so it is weighed in
/// postings, not days: a busy feed's own counts keep their say, where pseudo-days at its
/// rate would drown them. On `steady` the largest wins: the prior alone is the better
/// guess for most feeds.
pub const SHAPE_CANDIDATES: [f64; 9] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Feeds scored at most: the choice is one number for the population, and a fixed-stride
/// sample of this size pins it down at a bounded cost however many feeds there are.
const SAMPLE: usize = 20_000;

/// A day counts as held-out material when at least this share of it was watched.
const MIN_DAY_SHARE: f64 = 0.9;

/// What the population prior is: the pooled hourly shape (sums to 1) and the typical
/// feed's postings per day.
pub struct Prior<'a> {
    /// Pooled shape over the hours of the day.
    pub shared: &'a [f64],
    /// The typical (median) feed's postings per day.
    pub typical: f64,
    /// Shapes pooled by similarity: each held-out case's prior is its posterior mean
    /// shape given the feed's other days (in place of `shared`).
    pub mixture: Option<&'a super::shapes::Mixture>,
    /// Feeds' host groups ([`super::siblings`]), in `states` order: the host's rate and
    /// hours as a level between the feed's own and everyone's.
    pub siblings: Option<&'a Siblings>,
}

/// One feed's postings and exposure per watched day and hour.
struct Days {
    /// The first day's index (UTC days since the Unix epoch).
    first: i64,
    counts: Vec<[f64; BINS]>,
    exposure: Vec<[f64; BINS]>,
}

/// What [`choose`] decided.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Chosen {
    /// Pseudo-days of the pooled pattern at the feed's rate.
    pub days: f64,
    /// Pseudo-postings of the shape prior, chosen apart from the rate's pseudo-days when
    /// shapes are pooled by similarity (a mixture); `None` otherwise.
    pub shape_postings: Option<f64>,
    /// Pseudo-postings of the host's other feeds' hours in each feed's evidence, with its
    /// rate shrunk toward theirs ([`super::siblings`]); 0: the host is left out.
    pub sibling_postings: f64,
    /// Held-out feed-days that backed the choice.
    pub held_out: usize,
}

/// Pseudo-days of the shape prior for a feed of `rate` postings a day: at least `days`,
/// and at least `postings` pseudo-postings' worth. Pseudo-days alone give a feed with four
/// postings in two weeks the same trust in its own hours as one with four hundred; a quiet
/// feed's hours are mostly noise, and a plan that fetches after that noise promises
/// delays it does not deliver.
pub fn shape_days(days: f64, postings: f64, rate: f64) -> f64 {
    if postings > 0.0 {
        // Bounded, so a feed that never posted stays finite whatever the setting.
        days.max(postings / rate.max(1e-9)).min(1e12)
    } else {
        days
    }
}

/// The chosen pseudo-days; `None` when no feed has two whole days watched in
/// `[window_start, until)`. They are scored with pseudo-days alone, though the models then
/// give quiet feeds' shapes at least `shape_pseudo_postings` ([`shape_days`]): scored with
/// those too, the first weeks of `real-commits` chose fewer pseudo-days and realized more
/// delay at half a fetch a day (775.5 min against 765.5).
///
/// The pseudo-postings are not chosen here either: on `real-commits` this likelihood prefers the
/// most pooled shapes tried (32 pseudo-postings, with 16 pseudo-days), and the plans made
/// with them realized more delay (370.5 min at one fetch a day against 364.3; 96.7 against
/// 94.2 at four): the held-out postings are forecast best by the pool, but the fetch times
/// gain from what each feed's own hours say.
///
/// `previous`, the choice in force, stays unless the best pair beats it by more than
/// [`KEEP_SE`] standard errors of the feeds' summed differences: held-out scores of
/// adjacent candidates often differ by noise, and every change of choice moves every
/// feed's plan at once (on `real-commits` at four fetches a day the days the choice flipped
/// between 2 and 4 pseudo-days spent 0.93–0.97 of their budget: fetches moved earlier than
/// a replan's catch-up allows are lost).
pub fn choose(
    states: &[Option<&FeedState>],
    window_start: i64,
    now_ms: i64,
    prior: &Prior,
    previous: Option<Chosen>,
) -> Option<Chosen> {
    let stride = states.len().div_ceil(SAMPLE).max(1);
    let mut held_out = 0usize;
    const N: usize = CANDIDATES.len();
    const M: usize = SHAPE_CANDIDATES.len();
    const H: usize = siblings::CANDIDATES.len();
    let at = |i: usize, j: usize, h: usize| (i * M + j) * H + h;
    // Rate's candidate by shape's by the host's: the rate-shape diagonal alone without a
    // mixture (the shape takes the rate's pseudo-days), and the host's strength 0 alone
    // without host groups.
    let mut score = vec![0.0f64; N * M * H];
    let split = prior.mixture.is_some();
    let hosted = prior.siblings.is_some();
    let allowed = |i: usize, j: usize, h: usize| (split || i == j) && (hosted || h == 0);
    // The choice in force as grid indices, when it is one of this grid's.
    let kept = previous.and_then(|p| index_of(p, split));
    // Per candidate, over feeds: the sum and the sum of squares of each feed's summed
    // score difference from the choice in force (feeds, not feed-days, are the independent
    // units: one feed's days share its counts).
    let mut diff = vec![0.0f64; N * M * H];
    let mut diff_sq = vec![0.0f64; N * M * H];
    let mut feeds = 0usize;
    // The sampled feeds' host groups, tallied per day, so a held-out day's siblings'
    // postings are held out with it (a repository's commit lands in several of its feeds
    // at once: left in, they would forecast the day they are part of).
    let group_days = prior
        .siblings
        .map(|s| tally_groups(states, s, stride, window_start, now_ms))
        .unwrap_or_default();
    // One sampled feed's scores per candidate, and its held-out days.
    let score_feed = |f: usize| -> Option<(Vec<f64>, usize)> {
        {
            let st = states[f]?;
            let days = tally(st, window_start, now_ms)?;
            let whole: Vec<usize> = (0..days.counts.len())
                .filter(|&d| days.exposure[d].iter().sum::<f64>() >= MIN_DAY_SHARE * BINS as f64)
                .collect();
            if whole.len() < 2 {
                return None;
            }
            let mut total_c = [0.0f64; BINS];
            let mut total_e = [0.0f64; BINS];
            for d in 0..days.counts.len() {
                for b in 0..BINS {
                    total_c[b] += days.counts[d][b];
                    total_e[b] += days.exposure[d][b];
                }
            }
            let group = prior
                .siblings
                .and_then(|s| s.group(f))
                .and_then(|g| group_days.get(&g));
            let host_rate = prior
                .siblings
                .map_or(prior.typical, |s| s.rate(f, prior.typical));
            let mut feed_score = vec![0.0f64; N * M * H];
            for &d in &whole {
                let mut case = Case {
                    c: [0.0; BINS],
                    e: [0.0; BINS],
                    k: days.counts[d],
                    x: days.exposure[d],
                };
                for b in 0..BINS {
                    case.c[b] = total_c[b] - days.counts[d][b];
                    case.e[b] = (total_e[b] - days.exposure[d][b]).max(0.0);
                }
                // The siblings' other days.
                let sib = group.map(|g| {
                    let day = usize::try_from(days.first + d as i64 - g.first).ok();
                    let mut out = [0.0f64; BINS];
                    for b in 0..BINS {
                        let on_day = day.and_then(|k| g.days.get(k)).map_or(0.0, |v| v[b]);
                        out[b] =
                            ((g.total[b] - total_c[b]) - (on_day - days.counts[d][b])).max(0.0);
                    }
                    out
                });
                for (h, &pp_sib) in siblings::CANDIDATES.iter().enumerate() {
                    if !hosted && h > 0 {
                        break;
                    }
                    let evidence = match (&sib, h) {
                        (Some(s), h) if h > 0 => siblings::evidence(&case.c, s, pp_sib),
                        _ => case.c,
                    };
                    let typical = if h > 0 { host_rate } else { prior.typical };
                    let own = prior.mixture.map(|m| m.prior_for(&evidence));
                    let shared = own.as_ref().map_or(prior.shared, |o| &o[..]);
                    for (i, &beta) in CANDIDATES.iter().enumerate() {
                        if split {
                            for (j, &pp) in SHAPE_CANDIDATES.iter().enumerate() {
                                feed_score[at(i, j, h)] +=
                                    case.score(shared, typical, beta, Shape::Postings(pp));
                            }
                        } else {
                            feed_score[at(i, i, h)] +=
                                case.score(shared, typical, beta, Shape::Days(beta));
                        }
                    }
                }
            }
            Some((feed_score, whole.len()))
        }
    };
    // The sample's feeds scored on every core in fixed chunks, each summed in order and the
    // chunks summed in order, so the choice does not depend on the number of threads and
    // no more than a chunk's scores are held at once.
    let sampled: Vec<usize> = (0..states.len()).step_by(stride).collect();
    let parts: Vec<Sums> = sampled
        .par_chunks(SCORE_CHUNK)
        .map(|chunk| {
            let mut sums = Sums::new(N * M * H);
            for feed_score in chunk.iter().filter_map(|&f| score_feed(f)) {
                let (feed_score, days) = feed_score;
                sums.held_out += days;
                sums.feeds += 1;
                for (k, v) in feed_score.iter().enumerate() {
                    sums.score[k] += v;
                    if let Some((pi, pj, ph)) = kept {
                        let d = v - feed_score[at(pi, pj, ph)];
                        sums.diff[k] += d;
                        sums.diff_sq[k] += d * d;
                    }
                }
            }
            sums
        })
        .collect();
    for p in parts {
        held_out += p.held_out;
        feeds += p.feeds;
        for k in 0..N * M * H {
            score[k] += p.score[k];
            diff[k] += p.diff[k];
            diff_sq[k] += p.diff_sq[k];
        }
    }
    if held_out == 0 {
        return None;
    }
    let mut best = (0, 0, 0);
    for i in 0..N {
        for j in 0..M {
            for h in 0..H {
                if allowed(i, j, h) && score[at(i, j, h)] > score[at(best.0, best.1, best.2)] {
                    best = (i, j, h);
                }
            }
        }
    }
    if let Some(k) = kept.filter(|k| allowed(k.0, k.1, k.2)) {
        let b = at(best.0, best.1, best.2);
        if !clearly_better(diff[b], diff_sq[b], feeds) {
            best = k;
        }
    }
    Some(Chosen {
        days: CANDIDATES[best.0],
        shape_postings: split.then_some(SHAPE_CANDIDATES[best.1]),
        sibling_postings: siblings::CANDIDATES[best.2],
        held_out,
    })
}

/// Sampled feeds scored per task of [`choose`].
const SCORE_CHUNK: usize = 256;

/// A chunk's summed scores, differences from the choice in force and their squares (per
/// candidate), held-out days and feeds.
struct Sums {
    score: Vec<f64>,
    diff: Vec<f64>,
    diff_sq: Vec<f64>,
    held_out: usize,
    feeds: usize,
}

impl Sums {
    fn new(n: usize) -> Self {
        Sums {
            score: vec![0.0; n],
            diff: vec![0.0; n],
            diff_sq: vec![0.0; n],
            held_out: 0,
            feeds: 0,
        }
    }
}

/// One host group's postings per UTC day and hour, from its first day on, and in all.
#[derive(Default)]
struct GroupDays {
    first: i64,
    days: Vec<[f64; BINS]>,
    total: [f64; BINS],
}

/// The day tallies of every group that holds a feed of the sample (every `stride`-th).
fn tally_groups(
    states: &[Option<&FeedState>],
    siblings: &Siblings,
    stride: usize,
    window_start: i64,
    now_ms: i64,
) -> HashMap<u32, GroupDays> {
    let first = window_start.div_euclid(DAY_MS);
    let n = ((now_ms - 1).div_euclid(DAY_MS) - first + 1).max(0) as usize;
    let mut groups: HashMap<u32, GroupDays> = (0..states.len())
        .step_by(stride)
        .filter_map(|f| siblings.group(f))
        .map(|g| {
            let days = GroupDays {
                first,
                days: vec![[0.0; BINS]; n],
                total: [0.0; BINS],
            };
            (g, days)
        })
        .collect();
    for (f, st) in states.iter().enumerate() {
        let (Some(st), Some(g)) = (st, siblings.group(f)) else {
            continue;
        };
        let Some(into) = groups.get_mut(&g) else {
            continue;
        };
        let Some(days) = tally(st, window_start, now_ms) else {
            continue;
        };
        for (d, c) in days.counts.iter().enumerate() {
            let Some(slot) = usize::try_from(days.first + d as i64 - first)
                .ok()
                .and_then(|k| into.days.get_mut(k))
            else {
                continue;
            };
            for b in 0..BINS {
                slot[b] += c[b];
                into.total[b] += c[b];
            }
        }
    }
    groups
}

/// Standard errors by which a new choice must beat the one in force.
pub const KEEP_SE: f64 = 2.0;

/// Whether `n` feeds whose score differences sum to `sum` (squares to `sum_sq`) favour
/// the new choice by more than [`KEEP_SE`] standard errors of that sum.
fn clearly_better(sum: f64, sum_sq: f64, n: usize) -> bool {
    if n == 0 {
        return false;
    }
    let n = n as f64;
    let var = (sum_sq / n - (sum / n).powi(2)).max(0.0);
    sum > KEEP_SE * (n * var).sqrt()
}

/// Grid indices of a choice (rate's, shape's, host's), if it is one of the grid's for
/// this mode (`split`: with a mixture, the shape in pseudo-postings).
fn index_of(c: Chosen, split: bool) -> Option<(usize, usize, usize)> {
    let i = CANDIDATES.iter().position(|&v| v == c.days)?;
    let h = siblings::CANDIDATES
        .iter()
        .position(|&v| v == c.sibling_postings)?;
    match (split, c.shape_postings) {
        (true, Some(pp)) => Some((i, SHAPE_CANDIDATES.iter().position(|&v| v == pp)?, h)),
        (false, None) => Some((i, i, h)),
        _ => None,
    }
}

/// The weight of a held-out case's shape prior.
#[derive(Clone, Copy)]
enum Shape {
    /// Pseudo-days at the feed's rate (the rate's own, without a mixture).
    Days(f64),
    /// Pseudo-postings.
    Postings(f64),
}

/// One held-out feed-day: its hours' postings and exposure (`k`, `x`), and the feed's
/// other days' (`c`, `e`).
struct Case {
    c: [f64; BINS],
    e: [f64; BINS],
    k: [f64; BINS],
    x: [f64; BINS],
}

impl Case {
    /// Poisson log-likelihood of the held-out day under the model the other days give
    /// with `beta` pseudo-days for the rate and `shape` for the hours.
    fn score(&self, shared: &[f64], typical: f64, beta: f64, shape: Shape) -> f64 {
        let n: f64 = self.c.iter().sum();
        let watched = self.e.iter().sum::<f64>() / BINS as f64;
        let rate = (n + beta * typical) / (watched + beta);
        let gamma = match shape {
            Shape::Days(d) => d,
            Shape::Postings(p) => p / rate.max(1e-9),
        };
        let mut ll = 0.0;
        for b in 0..BINS {
            let x = self.x[b];
            if x <= 0.0 {
                continue;
            }
            let share = shared.get(b).copied().unwrap_or(1.0 / BINS as f64);
            let lambda = ((self.c[b] + gamma * rate * share) / (self.e[b] + gamma)).max(1e-9);
            // Most held-out hours have no posting, and their term is `−λx` alone: the
            // logarithm is taken only where it is weighed (it was a twelfth of a
            // 100,000-feed plan's learning).
            if self.k[b] > 0.0 {
                ll += self.k[b] * (lambda * x).ln() - lambda * x;
            } else {
                ll -= lambda * x;
            }
        }
        ll
    }
}

/// A feed's postings and exposure per UTC day and hour within `[window_start, until)`,
/// `until` being the end of what it has observed. Spread postings (undated) share their
/// mass over the hours of their interval, as in the models.
fn tally(st: &FeedState, window_start: i64, now_ms: i64) -> Option<Days> {
    let since = st.observed_since_ms?.max(window_start);
    let until = st.observed_until_ms(now_ms)?;
    if until <= since {
        return None;
    }
    let first = since.div_euclid(DAY_MS);
    let last = (until - 1).div_euclid(DAY_MS);
    let n = (last - first + 1) as usize;
    let mut days = Days {
        first,
        counts: vec![[0.0; BINS]; n],
        exposure: vec![[0.0; BINS]; n],
    };
    for (i, e) in days.exposure.iter_mut().enumerate() {
        let start = (first + i as i64) * DAY_MS;
        *e = hour_exposure(since.max(start), until.min(start + DAY_MS));
    }
    // Time in which postings may have scrolled off unseen was not watched (as in the models).
    for (a, b) in st.blind_within(since, until) {
        let mut t = a;
        while t < b {
            let end = ((t.div_euclid(DAY_MS) + 1) * DAY_MS).min(b);
            let d = (t.div_euclid(DAY_MS) - first) as usize;
            for (e, x) in days.exposure[d].iter_mut().zip(hour_exposure(t, end)) {
                *e = (*e - x).max(0.0);
            }
            t = end;
        }
    }
    let cell = |t: i64| {
        (
            (t.div_euclid(DAY_MS) - first) as usize,
            (t.rem_euclid(DAY_MS) / HOUR_MS) as usize,
        )
    };
    for &t in st.postings_ms.iter().filter(|&&t| t >= since && t < until) {
        let (d, b) = cell(t);
        days.counts[d][b] += 1.0;
    }
    for &(from, to) in &st.spread_ms {
        let (lo, hi) = (from.max(since), to.min(until));
        if hi <= lo || to <= from {
            continue;
        }
        // The whole interval's length, so a posting partly outside the window counts only
        // for its share inside.
        let mass = 1.0 / (to - from) as f64;
        let mut t = lo;
        while t < hi {
            let end = ((t.div_euclid(HOUR_MS) + 1) * HOUR_MS).min(hi);
            let (d, b) = cell(t);
            days.counts[d][b] += (end - t) as f64 * mass;
            t = end;
        }
    }
    Some(days)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A feed watched for `days` days that posts at the given hours every day.
    fn feed(days: i64, hours: &[i64]) -> FeedState {
        let mut st = FeedState {
            observed_since_ms: Some(0),
            last_answered_ms: Some(days * DAY_MS),
            ..FeedState::default()
        };
        st.postings_ms = (0..days)
            .flat_map(|d| hours.iter().map(move |h| d * DAY_MS + h * HOUR_MS + 60_000))
            .collect::<VecDeque<_>>();
        st
    }

    /// Fifty feeds posting at 08, 12 and 18 every day for ten days.
    fn regular_feeds() -> Vec<FeedState> {
        (0..50).map(|_| feed(10, &[8, 12, 18])).collect()
    }

    fn flat() -> Vec<f64> {
        vec![1.0 / BINS as f64; BINS]
    }

    #[test]
    fn shape_days_are_at_least_the_pseudo_postings_worth() {
        // A feed of half a posting a day needs 8 days to hold 4 pseudo-postings.
        assert_eq!(shape_days(1.0, 4.0, 0.5), 8.0);
        // A busy feed keeps the pseudo-days.
        assert_eq!(shape_days(1.0, 4.0, 10.0), 1.0);
        assert_eq!(shape_days(2.0, 0.0, 0.01), 2.0);
        // A feed that never posted: finite, and all pool.
        assert!(shape_days(1.0, 4.0, 0.0).is_finite());
    }

    #[test]
    fn nothing_to_hold_out_before_two_whole_days() {
        let st = feed(1, &[9]);
        let prior = Prior {
            shared: &flat(),
            typical: 1.0,
            mixture: None,
            siblings: None,
        };
        assert_eq!(choose(&[Some(&st)], 0, DAY_MS, &prior, None), None);
        assert_eq!(choose(&[None], 0, DAY_MS, &prior, None), None);
    }

    #[test]
    fn regular_feeds_trust_their_own_hours_and_noisy_ones_lean_on_the_pool() {
        // Every feed posts at exactly the same hours each day: its own counts predict the
        // held-out day best, so the least shrinkage wins against a flat pool.
        let regular = regular_feeds();
        let refs: Vec<Option<&FeedState>> = regular.iter().map(Some).collect();
        let prior = Prior {
            shared: &flat(),
            typical: 3.0,
            mixture: None,
            siblings: None,
        };
        let Chosen {
            days: beta,
            held_out: days,
            ..
        } = choose(&refs, 0, 10 * DAY_MS, &prior, None).expect("held-out days");
        assert_eq!(beta, CANDIDATES[0]);
        assert_eq!(days, 500);

        // Feeds posting three times a day at hours drawn afresh every day from the same
        // flat pattern: any hour's own count is noise, and the flat pool predicts better.
        let mut x: u64 = 7;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 24) as i64
        };
        let noisy: Vec<FeedState> = (0..50)
            .map(|_| {
                let mut st = feed(10, &[]);
                st.postings_ms = (0..10)
                    .flat_map(|d| {
                        let hours = [next(), next(), next()];
                        hours.map(|h| d * DAY_MS + h * HOUR_MS + 60_000)
                    })
                    .collect();
                st
            })
            .collect();
        let refs: Vec<Option<&FeedState>> = noisy.iter().map(Some).collect();
        let beta = choose(&refs, 0, 10 * DAY_MS, &prior, None)
            .expect("held-out days")
            .days;
        assert_eq!(
            beta,
            *CANDIDATES.last().unwrap(),
            "pure noise wants the pool"
        );
    }

    #[test]
    fn the_choice_in_force_stays_unless_clearly_beaten() {
        // Feeds split both ways by about as much as they gain: noise, keep.
        let d = [5.0, -4.0, 6.0, -5.0];
        let (sum, sq) = (d.iter().sum(), d.iter().map(|x| x * x).sum());
        assert!(!clearly_better(sum, sq, d.len()));
        // Every feed gains: switch.
        assert!(clearly_better(4.0, 4.0, 4));
        // Nothing gained, or no feeds: keep.
        assert!(!clearly_better(0.0, 0.0, 4));
        assert!(!clearly_better(0.0, 0.0, 0));

        // Regular feeds prefer the least shrinkage with one voice: a choice in force at
        // the most shrinkage gives way.
        let regular = regular_feeds();
        let refs: Vec<Option<&FeedState>> = regular.iter().map(Some).collect();
        let prior = Prior {
            shared: &flat(),
            typical: 3.0,
            mixture: None,
            siblings: None,
        };
        let most = Chosen {
            days: *CANDIDATES.last().unwrap(),
            shape_postings: None,
            sibling_postings: 0.0,
            held_out: 0,
        };
        let c = choose(&refs, 0, 10 * DAY_MS, &prior, Some(most)).expect("held-out days");
        assert_eq!(c.days, CANDIDATES[0]);
        // A regular feed and one posting at a new hour every day pull opposite ways: with
        // two feeds that disagree, the summed gain is within two standard errors (for two
        // feeds, d1 + d2 <= sqrt(2)·|d1 - d2| whenever their signs differ).
        let mut other = feed(10, &[]);
        other.postings_ms = (0..10).map(|d| d * DAY_MS + (d % 24) * HOUR_MS).collect();
        let mixed = [Some(&regular[0]), Some(&other)];
        let free = choose(&mixed, 0, 10 * DAY_MS, &prior, None).expect("held-out days");
        let held = choose(&mixed, 0, 10 * DAY_MS, &prior, Some(most)).expect("held-out days");
        assert_ne!(free.days, most.days, "the free choice differs");
        assert_eq!(held.days, most.days, "two feeds are not enough to move it");
    }

    #[test]
    fn a_part_watched_day_is_not_held_out_and_spread_postings_keep_their_mass() {
        // Watched from noon of day 0 to noon of day 3: days 1 and 2 are whole.
        let mut st = feed(0, &[]);
        st.observed_since_ms = Some(12 * HOUR_MS);
        st.last_answered_ms = Some(3 * DAY_MS + 12 * HOUR_MS);
        st.spread_ms = VecDeque::from([(DAY_MS - 2 * HOUR_MS, DAY_MS + 2 * HOUR_MS)]);
        let days = tally(&st, 0, 4 * DAY_MS).expect("watched");
        assert_eq!(days.counts.len(), 4);
        let total: f64 = days.counts.iter().flatten().sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
        assert!((days.counts[0][22] - 0.25).abs() < 1e-9);
        assert!((days.counts[1][1] - 0.25).abs() < 1e-9);
        assert!((days.exposure[0].iter().sum::<f64>() - 12.0).abs() < 1e-9);
        let prior = Prior {
            shared: &flat(),
            typical: 1.0,
            mixture: None,
            siblings: None,
        };
        let held_out = choose(&[Some(&st)], 0, 4 * DAY_MS, &prior, None)
            .expect("two days")
            .held_out;
        assert_eq!(held_out, 2);
    }

    /// 400 quiet feeds, ten to a group, each group posting at its own hour (a group's
    /// hour is `3 * (g % 8)`): a feed posts on about one day in four, within an hour of its
    /// group's, 14 days. `host_of(f)` names each feed's host.
    fn grouped_quiet_feeds(host_of: &dyn Fn(usize) -> String) -> (Vec<FeedState>, Vec<String>) {
        let mut x: u64 = 0x2545_f491;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n) as i64
        };
        let feeds: Vec<FeedState> = (0..400)
            .map(|f| {
                let hour = 3 * ((f / 10) % 8) as i64;
                let mut st = feed(14, &[]);
                for d in 0..14 {
                    if next(4) == 0 {
                        let at = d * DAY_MS + (hour + next(2)) * HOUR_MS + 60_000;
                        st.postings_ms.push_back(at);
                    }
                }
                st
            })
            .collect();
        (feeds, (0..400).map(host_of).collect())
    }

    /// What [`choose`] takes for the host level on `feeds`, with a mixture fitted to them.
    fn host_level(feeds: &[FeedState], hosts: &[String]) -> f64 {
        let counts: Vec<[f64; BINS]> = feeds
            .iter()
            .map(|st| {
                let mut c = [0.0; BINS];
                for &t in &st.postings_ms {
                    c[(t.rem_euclid(DAY_MS) / HOUR_MS) as usize] += 1.0;
                }
                c
            })
            .collect();
        let cfg = crate::control::shapes::MixtureConfig {
            shapes: 2,
            min_total: 100.0,
            ..Default::default()
        };
        let mixture = crate::control::shapes::Mixture::fit(&counts, &cfg).expect("a fit");
        let names: Vec<&str> = hosts.iter().map(String::as_str).collect();
        let rates: Vec<Option<f64>> = counts
            .iter()
            .map(|c| Some((c.iter().sum::<f64>() + 0.25) / 15.0))
            .collect();
        let siblings = Siblings::new(&names, &counts, &rates).expect("groups");
        let prior = Prior {
            shared: &flat(),
            typical: 0.25,
            mixture: Some(&mixture),
            siblings: Some(&siblings),
        };
        let refs: Vec<Option<&FeedState>> = feeds.iter().map(Some).collect();
        choose(&refs, 0, 14 * DAY_MS, &prior, None)
            .expect("held-out days")
            .sibling_postings
    }

    #[test]
    fn a_host_whose_feeds_share_their_hours_is_taken_and_a_politeness_group_is_not() {
        // Hosts that are the groups: a quiet feed's three postings leave its hour in doubt,
        // its siblings' settle it.
        let (feeds, hosts) = grouped_quiet_feeds(&|f| format!("g{}", f / 10));
        assert!(host_level(&feeds, &hosts) > 0.0, "the host level is taken");
        // Hosts dealt round robin over the groups: a host's feeds post at eight different
        // hours, and pooling them would blur each feed's own.
        let (feeds, hosts) = grouped_quiet_feeds(&|f| format!("h{}", f % 40));
        assert_eq!(
            host_level(&feeds, &hosts),
            0.0,
            "the host level is declined"
        );
    }
}
