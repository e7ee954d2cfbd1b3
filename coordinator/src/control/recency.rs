//! How fast the live learner forgets: the half-life of an observation's weight, chosen on
//! the most recent days of the learner's own observations.
//!
//! Real populations drift: feeds wake up, go quiet, post in bursts. A model that weighs a
//! posting of four weeks ago like one of yesterday keeps fetching a feed that stopped and
//! is slow to follow one that started; one that forgets fast reads noise as change on a
//! steady feed. Which matters more depends on the population, so the half-life is chosen
//! the way a forecaster would choose it: each candidate learns every sampled feed's rate
//! from the window up to [`HELD_OUT_DAYS`] before now (weights counted back from that
//! moment), and the postings of those last days are scored under a Poisson model
//! (`k·ln(λx) − λx`, `k` postings in `x` watched days at rate `λ`). The best total wins, a
//! shorter memory only by more than one nat (ties keep the longer). Until some feed has been watched for the held-out days
//! plus [`MIN_TRAIN_DAYS`], nothing is held out and the configured value stands.

use super::feedstate::FeedState;
use crate::time::DAY_MS;

/// Half-lives tried, in days; 0 weighs every day of the window alike. Longest memory
/// first, so a tie keeps the steadier model. None shorter than three weeks: on
/// `real-commits` the last week's postings were forecast best with 7 days, but the plans
/// learned with it realized more delay (at one fetch a day, 373.6 min with 7 days, 366.3
/// with 14, 364.4 with 21, 372.9 with none): a week of a quiet feed's postings is mostly
/// noise to the allocation, which follows rates' square roots, not their forecasts.
/// Judged again on ten draws (docs/EXPERIMENTS.md, "A shorter memory, on ten draws"): 14 and 7
/// added, chosen by this likelihood or by the held-out week's square-root allocation cost,
/// won 2–3% on synthetic `quiet` draws and lost about 2% on `real-commits` at every budget.
pub const CANDIDATES: [f64; 3] = [0.0, 42.0, 21.0];

/// The most recent days held out to score the candidates.
pub const HELD_OUT_DAYS: f64 = 7.0;

/// Days a feed must have been watched before the held-out days to take part.
pub const MIN_TRAIN_DAYS: f64 = 7.0;

/// Feeds scored at most (a fixed stride over the population), as in [`super::shrink`].
const SAMPLE: usize = 20_000;

/// Pseudo-days of the typical feed's rate each candidate's rates are shrunk with, so a
/// feed with no training posting does not predict zero (an infinite loss for one posting).
const PSEUDO_DAYS: f64 = 1.0;

/// Weight of an observation `age_ms` old under half-life `half_life_days` (0: 1).
pub fn weight(age_ms: i64, half_life_days: f64) -> f64 {
    if half_life_days > 0.0 {
        0.5f64.powf(age_ms.max(0) as f64 / (half_life_days * DAY_MS as f64))
    } else {
        1.0
    }
}

/// The chosen half-life (days) and how many feeds' held-out days backed it; `None` when no
/// feed has been watched long enough.
pub fn choose(
    states: &[Option<&FeedState>],
    window_start: i64,
    now_ms: i64,
) -> Option<(f64, usize)> {
    let cut = now_ms - (HELD_OUT_DAYS * DAY_MS as f64) as i64;
    let stride = states.len().div_ceil(SAMPLE).max(1);
    // Each scored feed: training postings' ages at the cut, the training span, and the
    // held-out postings and watched days.
    struct Scored {
        ages: Vec<i64>,
        from: i64,
        held_out_postings: f64,
        held_out_days: f64,
        /// Training time not watched ([`FeedState::blind_ms`]), as ages at the cut.
        blind: Vec<(i64, i64)>,
    }
    impl Scored {
        /// Weighted days watched before the cut: the training span less its blind spans.
        fn watched_days(&self, cut: i64, h: f64) -> f64 {
            let blind: f64 = self
                .blind
                .iter()
                .map(|&(young, old)| weighted_days(old, h) - weighted_days(young, h))
                .sum();
            (weighted_days(cut - self.from, h) - blind).max(0.0)
        }
    }
    let mut scored = Vec::new();
    for st in states.iter().step_by(stride).flatten() {
        let (Some(since), Some(until)) = (st.observed_since_ms, st.observed_until_ms(now_ms))
        else {
            continue;
        };
        let from = since.max(window_start);
        if (cut - from) as f64 / (DAY_MS as f64) < MIN_TRAIN_DAYS || until <= cut {
            continue;
        }
        let mut ages = Vec::new();
        let mut held_out = 0.0;
        for &t in st.postings_ms.iter().filter(|&&t| t >= from && t < until) {
            if t < cut {
                ages.push(cut - t);
            } else {
                held_out += 1.0;
            }
        }
        // Undated postings count where their interval ends (the fetch that found them).
        for &(_, to) in st
            .spread_ms
            .iter()
            .filter(|&&(_, to)| to >= from && to <= until)
        {
            if to < cut {
                ages.push(cut - to);
            } else {
                held_out += 1.0;
            }
        }
        let blind_held_out: i64 = st.blind_within(cut, until).map(|(a, b)| b - a).sum();
        scored.push(Scored {
            ages,
            from,
            held_out_postings: held_out,
            held_out_days: (until - cut - blind_held_out) as f64 / DAY_MS as f64,
            blind: st
                .blind_within(from, cut)
                .map(|(a, b)| (cut - b, cut - a))
                .collect(),
        });
    }
    if scored.is_empty() {
        return None;
    }
    let mut best: Option<(f64, f64)> = None;
    for &h in &CANDIDATES {
        // Each feed's weighted days watched, once per candidate: the rates and the scores
        // both need them.
        let watched: Vec<f64> = scored.iter().map(|s| s.watched_days(cut, h)).collect();
        let rates: Vec<f64> = scored
            .iter()
            .zip(&watched)
            .map(|(s, &d)| s.ages.iter().map(|&a| weight(a, h)).sum::<f64>() / d.max(1e-9))
            .collect();
        let mut sorted = rates.clone();
        sorted.sort_by(f64::total_cmp);
        let typical = sorted[sorted.len() / 2].max(1e-3);
        let mut ll = 0.0;
        for ((s, r), &days) in scored.iter().zip(&rates).zip(&watched) {
            let lambda = ((r * days + PSEUDO_DAYS * typical) / (days + PSEUDO_DAYS)).max(1e-9);
            let x = s.held_out_days;
            ll += s.held_out_postings * (lambda * x).ln() - lambda * x;
        }
        // A shorter memory must earn its noise: at least one nat better than the longer.
        if best.is_none_or(|(_, b)| ll > b + 1.0) {
            best = Some((h, ll));
        }
    }
    best.map(|(h, _)| (h, scored.len()))
}

/// Weighted days of a span `span_ms` long that ends at the weights' origin:
/// `∫₀^span 2^(−a/h) da`, in days.
fn weighted_days(span_ms: i64, half_life_days: f64) -> f64 {
    let days = span_ms.max(0) as f64 / DAY_MS as f64;
    if half_life_days > 0.0 {
        let k = std::f64::consts::LN_2 / half_life_days;
        (1.0 - (-k * days).exp()) / k
    } else {
        days
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    fn feed(watched_days: i64, postings_days: &[f64]) -> FeedState {
        FeedState {
            observed_since_ms: Some(0),
            last_answered_ms: Some(watched_days * DAY_MS),
            postings_ms: postings_days
                .iter()
                .map(|d| (d * DAY_MS as f64) as i64)
                .collect::<VecDeque<_>>(),
            ..FeedState::default()
        }
    }

    #[test]
    fn weighted_days_integrate_the_weight() {
        assert!((weighted_days(10 * DAY_MS, 0.0) - 10.0).abs() < 1e-12);
        // One half-life: ∫₀^h 2^(−a/h) da = h / (2 ln 2).
        let h = 14.0;
        let want = h / (2.0 * std::f64::consts::LN_2);
        assert!((weighted_days(14 * DAY_MS, h) - want).abs() < 1e-9);
        // Numerically, for an odd span.
        let (span, n) = (9.5f64, 100_000);
        let num: f64 = (0..n)
            .map(|i| {
                weight(
                    ((i as f64 + 0.5) * span / n as f64 * DAY_MS as f64) as i64,
                    7.0,
                )
            })
            .sum::<f64>()
            * span
            / n as f64;
        assert!((weighted_days((span * DAY_MS as f64) as i64, 7.0) - num).abs() < 1e-6);
        assert_eq!(weight(0, 7.0), 1.0);
        assert!((weight(7 * DAY_MS, 7.0) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn nothing_is_held_out_before_the_feeds_are_watched_long_enough() {
        let st = feed(10, &[1.0, 5.0, 9.0]);
        assert_eq!(choose(&[Some(&st)], 0, 10 * DAY_MS), None);
        assert_eq!(choose(&[None], 0, 10 * DAY_MS), None);
    }

    #[test]
    fn steady_feeds_keep_a_long_memory_and_drifting_ones_forget() {
        // Steady: every feed posts once a day for 28 days; any candidate predicts the last
        // week about as well, and the tie goes to the longest memory.
        let steady: Vec<FeedState> = (0..40)
            .map(|i| {
                let days: Vec<f64> = (0..28).map(|d| d as f64 + 0.3 + i as f64 * 0.01).collect();
                feed(28, &days)
            })
            .collect();
        let refs: Vec<Option<&FeedState>> = steady.iter().map(Some).collect();
        let (h, n) = choose(&refs, 0, 28 * DAY_MS).unwrap();
        assert_eq!(n, 40);
        assert_eq!(h, 0.0, "a steady population forgets nothing");
        // Drifting: half the feeds post daily only in the first two weeks, the other half
        // only since day 14; what the last week holds follows the recent days.
        let drifting: Vec<FeedState> = (0..40)
            .map(|i| {
                let range = if i % 2 == 0 { 0..14 } else { 14..28 };
                let days: Vec<f64> = range.map(|d| d as f64 + 0.5).collect();
                feed(28, &days)
            })
            .collect();
        let refs: Vec<Option<&FeedState>> = drifting.iter().map(Some).collect();
        let (h, _) = choose(&refs, 0, 28 * DAY_MS).unwrap();
        assert_eq!(
            h, 21.0,
            "a population that changed last week forgets fastest"
        );
    }
}
