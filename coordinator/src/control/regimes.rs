//! Which of a feed's days belong to its current regime: a per-feed memory that is long
//! while the feed posts as it did and short once it changes.
//!
//! One half-life for the whole population ([`super::recency`]) is a compromise: a feed
//! that woke up on day 20 of a 28-day window is learned at a third of its rate, and a feed
//! that stopped keeps its old rate for weeks, while a shorter memory reads noise as change
//! on every steady feed (on `real-commits` a week's half-life cost 3% at one fetch a day).
//! So each feed's days are weighed by the chance that they belong to the regime the feed
//! is in now: Bayesian online change-point detection (Adams and MacKay, 2007) over the
//! feed's watched days, with postings per day Poisson at a rate that is constant within a
//! regime and drawn afresh (Gamma) when a regime starts, and a new regime starting on any
//! day with chance [`HAZARD`]. The posterior over the current regime's age gives each
//! day's weight: the chance that the regime covers it. A steady feed's weights fall about
//! as the hazard's prior does (slowly); a feed whose postings changed level has the days
//! before the change weigh near zero.
//!
//! Only the feed's level follows its regime, and only half-way (in logarithms: the square
//! root of the regime's rate over the window's, [`level`]): its hours are still learned
//! from all its days, since a week of a quiet feed's postings is noise to its timing, and
//! on real feeds a regime often ends as it came (a repository busy for a week, then
//! quiet), so the whole window's rate still says something of tomorrow. Live `replay
//! --peers none`, days 14 to the end, hazard 1/30 (docs/EXPERIMENTS.md, 2026-11-30):
//!
//! | what follows the regime | `quiet` 4 a day | `real-commits` 0.5 / 1 a day |
//! |---|---|---|
//! | nothing (before) | 145.6 min | 766.4 / 369.7 |
//! | the level and the hours | 139.3 | – / 376.5 |
//! | the level | 139.6 | 783.4 / 372.0 |
//! | the level, half-way | 141.0 | 765.6 / 368.5 |
//!
//! Counts are distinct clock hours with postings, not postings: a burst of ten within an
//! hour is one draw of the feed's timing (a clump, see `population::clump_excess`), and
//! read as ten it would look like a new regime every time.

/// Chance that a new regime starts on a given day: its prior memory alone is a half-life
/// of about `ln 2 / HAZARD` days (21, the configured half-life's default). With the whole
/// level following the regime, 1/30 / 1/20 / 1/10 gave `quiet` at 4 a day 139.6 / 141.4 /
/// 143.0 min and `real-commits` at one a day 372.0 / 377.8 / 381.0.
pub const HAZARD: f64 = 1.0 / 30.0;

/// Shape of the Gamma prior of a new regime's rate: weak (half a posting's worth), so a
/// regime's own days decide its rate after a posting or two.
const PRIOR_SHAPE: f64 = 0.5;

/// A feed whose applied level (the square root of [`level`]) is at least this, or at most
/// its inverse, counts as rising or falling on `kairos_plan_regime_feeds`: its current
/// regime's rate is at least twice, or at most half, its window's.
pub const SHOWN_LEVEL: f64 = std::f64::consts::SQRT_2;

/// Days the recursion runs over at most (its cost grows with their square): older days of
/// a longer window weigh what the oldest of these does.
pub const MAX_DAYS: usize = 64;

/// Each day's chance of belonging to the feed's current regime, oldest day first, given
/// `counts[d]` (distinct hours with postings) and `exposure[d]` (days watched, 0–1) per
/// day, and `mean_rate` (postings a day over all of them: a new regime's prior mean).
/// The newest day weighs 1; a day nothing watched weighs what the day after it does.
pub fn weights(counts: &[f64], exposure: &[f64], mean_rate: f64, hazard: f64) -> Vec<f64> {
    let all = counts.len().min(exposure.len());
    if all > MAX_DAYS {
        let cut = all - MAX_DAYS;
        let recent = weights(&counts[cut..all], &exposure[cut..all], mean_rate, hazard);
        let mut out = vec![recent[0]; cut];
        out.extend(recent);
        return out;
    }
    let days = all;
    if days == 0 {
        return Vec::new();
    }
    let (a0, b0) = prior(mean_rate);
    /// One run length's probability and its regime's counts and exposure so far (the
    /// prior is added when scoring).
    struct Run {
        p: f64,
        n: f64,
        x: f64,
    }
    // Run lengths 0..=d after day d, by index.
    let mut runs = vec![Run {
        p: 1.0,
        n: 0.0,
        x: 0.0,
    }];
    for (&c, &e) in counts.iter().zip(exposure).take(days) {
        let (c, e) = (c.max(0.0), e.clamp(0.0, 1.0));
        // Each run length scores the day (negative binomial) and either goes on, adding
        // the day, or ends with a change at the day's end.
        let mut change = 0.0;
        for run in &mut runs {
            let q = run.p * neg_binomial(c, a0 + run.n, b0 + run.x, e);
            change += q * hazard;
            *run = Run {
                p: q * (1.0 - hazard),
                n: run.n + c,
                x: run.x + e,
            };
        }
        // A new regime starts counting the day after its change: run length 0.
        runs.insert(
            0,
            Run {
                p: change,
                n: 0.0,
                x: 0.0,
            },
        );
        let total: f64 = runs.iter().map(|r| r.p).sum();
        if total > 0.0 && total.is_finite() {
            runs.iter_mut().for_each(|r| r.p /= total);
        } else {
            // Every run length gives the day no chance (underflow): start afresh.
            runs.iter_mut().for_each(|r| r.p = 0.0);
            runs[0].p = 1.0;
        }
    }
    // Run length r after the last day covers the last r days: day d (of `days`) is
    // covered when r ≥ days − d. The newest day is covered unless a change came at the
    // very end (r = 0), which says nothing about the days watched: it weighs 1.
    let mut covered = vec![0.0f64; days + 1];
    let mut acc = 0.0;
    for r in (1..runs.len()).rev() {
        acc += runs[r].p;
        covered[r] = acc;
    }
    let mass = covered[1].max(f64::MIN_POSITIVE);
    (0..days).map(|d| covered[days - d] / mass).collect()
}

/// The current regime's rate against the whole window's: `n` postings over `days` watched,
/// `n_regime` and `regime_days` the same weighed by [`weights`], each rate with the weak
/// prior of a new regime (so a feed with no posting, or a regime with none, is defined).
/// 1 for a steady feed; above 1 for one that woke up; below for one that stopped.
/// The learner takes its square root: the rate half-way, in logarithms, between the
/// feed's regime and its whole window, since on real feeds a regime often ends as it came
/// (a repository busy for a week, then quiet): see the module's figures.
pub fn level(n: f64, days: f64, n_regime: f64, regime_days: f64) -> f64 {
    let (a0, b0) = prior(n / days.max(1.0));
    let level = ((n_regime + a0) / (regime_days + b0)) / ((n + a0) / (days + b0));
    if level.is_finite() && level > 0.0 {
        level
    } else {
        1.0
    }
}

/// A new regime's Gamma prior (shape, rate) around `mean_rate` postings a day: weak, and
/// defined for a feed with none.
fn prior(mean_rate: f64) -> (f64, f64) {
    (PRIOR_SHAPE, PRIOR_SHAPE / mean_rate.max(0.02))
}

/// `P(C = c)` for a count over `e` days at a rate with a Gamma(`a`, `b`) posterior.
fn neg_binomial(c: f64, a: f64, b: f64, e: f64) -> f64 {
    if e <= 0.0 {
        return if c > 0.0 { 1e-12 } else { 1.0 };
    }
    let k = c.round().min(1e4) as u32;
    // Γ(a+k)/(Γ(a) k!) built up in turn (k is small: hours with postings in a day).
    let mut coef = 1.0f64;
    for j in 0..k {
        coef *= (a + f64::from(j)) / f64::from(j + 1);
    }
    coef * (b / (b + e)).powf(a) * (e / (b + e)).powi(k as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Whatever the days hold: one finite weight per day in [0, 1], never rising with
        /// age, the newest at 1; a finite positive level.
        #[test]
        fn weights_are_chances_that_fall_with_age(
            days in proptest::collection::vec((0.0f64..30.0, 0.0f64..1.0), 0..90),
            mean in prop_oneof![Just(f64::NAN), Just(0.0), 0.0f64..50.0],
            hazard in 0.0f64..0.5,
        ) {
            let (counts, exposure): (Vec<f64>, Vec<f64>) = days.iter().copied().unzip();
            let w = weights(&counts, &exposure, mean, hazard);
            prop_assert_eq!(w.len(), days.len());
            for v in &w {
                prop_assert!(v.is_finite() && (0.0..=1.0 + 1e-9).contains(v), "{:?}", w);
            }
            for p in w.windows(2) {
                prop_assert!(p[0] <= p[1] + 1e-9, "{:?}", w);
            }
            if let Some(last) = w.last() {
                prop_assert!((last - 1.0).abs() < 1e-9, "{:?}", w);
            }
            let n: f64 = counts.iter().sum();
            let x: f64 = exposure.iter().sum();
            let nr: f64 = counts.iter().zip(&w).map(|(c, r)| c * r).sum();
            let xr: f64 = exposure.iter().zip(&w).map(|(e, r)| e * r).sum();
            let l = level(n, x, nr, xr);
            prop_assert!(l.is_finite() && l > 0.0, "{}", l);
        }
    }

    #[test]
    fn a_feed_that_woke_up_forgets_its_silence() {
        // Silent 20 days, then about two postings a day for 8.
        let counts: Vec<f64> = (0..28).map(|d| if d < 20 { 0.0 } else { 2.0 }).collect();
        let w = weights(&counts, &[1.0; 28], 16.0 / 28.0, HAZARD);
        assert!(w[27] > 0.99, "{w:?}");
        assert!(w[21] > 0.9, "{w:?}");
        assert!(w[10] < 0.05, "{w:?}");
    }

    #[test]
    fn a_steady_feed_keeps_a_long_memory() {
        let counts: Vec<f64> = (0..28).map(|d| [0.0, 1.0, 0.0, 1.0][d % 4]).collect();
        let w = weights(&counts, &[1.0; 28], 0.5, HAZARD);
        assert!(w[0] > 0.5, "{w:?}");
        assert!(w.windows(2).all(|p| p[0] <= p[1] + 1e-12), "{w:?}");
    }

    #[test]
    fn a_feed_that_stopped_forgets_its_busy_days() {
        let counts: Vec<f64> = (0..28).map(|d| if d < 14 { 3.0 } else { 0.0 }).collect();
        let w = weights(&counts, &[1.0; 28], 1.5, HAZARD);
        assert!(w[5] < 0.05, "{w:?}");
    }

    #[test]
    fn the_level_is_one_for_a_steady_feed_and_follows_a_change() {
        assert!((level(14.0, 28.0, 7.0, 14.0) - 1.0).abs() < 1e-9);
        // Woke up: 16 postings in the last 8 of 28 days.
        let up = level(16.0, 28.0, 16.0, 8.5);
        assert!(up > 2.5 && up < 28.0 / 8.5 + 1e-9, "{up}");
        let down = level(16.0, 28.0, 0.1, 10.0);
        assert!(down < 0.2, "{down}");
        assert_eq!(level(0.0, 0.0, 0.0, 0.0), 1.0);
        assert_eq!(level(f64::NAN, 1.0, 1.0, 1.0), 1.0);
    }

    #[test]
    fn unwatched_days_and_nothing_at_all_are_defined() {
        assert!(weights(&[], &[], 0.0, HAZARD).is_empty());
        let w = weights(&[0.0; 5], &[0.0; 5], 0.0, HAZARD);
        assert!(w.iter().all(|v| v.is_finite() && *v > 0.0), "{w:?}");
        let w = weights(&[1e9, 0.0], &[1.0, 1.0], f64::NAN, HAZARD);
        assert!(w.iter().all(|v| v.is_finite()), "{w:?}");
        // A window longer than the recursion runs over: the older days weigh as its first.
        let w = weights(&[1.0; 200], &[1.0; 200], 1.0, HAZARD);
        assert_eq!(w.len(), 200);
        assert!(w[..=200 - MAX_DAYS].iter().all(|&v| v == w[200 - MAX_DAYS]));
    }
}
