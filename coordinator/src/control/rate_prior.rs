//! The population's distribution of posting rates, fitted to the feeds' counts, and each
//! feed's rate as its posterior mean under it.
//!
//! Shrinking a feed's rate by pseudo-days toward the typical feed's, `(n + β·typical) /
//! (days + β)`, is the posterior mean under a gamma distribution of rates. One `β` cannot
//! fit a population whose rates spread over orders of magnitude: the held-out choice
//! ([`super::shrink`]) takes the `β` that suits the many feeds with postings, and a gamma
//! that wide puts much of its mass near zero, so a feed that posted nothing yet is read as
//! posting almost never. On the wall-clock farm (log-normal rates, σ = 1, mean 4 a day)
//! the 51 feeds of 600 that posted nothing on days 0–1 posted 49 times on day 2; the chosen
//! 0.25 pseudo-days put them at 0.27 a day, the log-normal's own posterior at 0.71, and the
//! plans of day 2 fetched them once after 02:00 (docs/EXPERIMENTS.md).
//!
//! So the distribution itself is fitted, without assuming its form: weights on a grid of
//! rates (log-spaced), fitted to the feeds' counts and days watched by expectation–
//! maximisation with a little smoothing between neighbouring rates after each step (the
//! smoothed EM of Silverman, Jones, Wilson and Nychka, 1990: the plain maximum-likelihood
//! weights sit on a few atoms and pull busy feeds' rates onto them). A feed's rate is then
//! `E[λ | n, days]` under those weights: a feed seen long enough keeps about its own rate,
//! a silent one gets what silent feeds of this population post.
//!
//! Counts and days are the recency-weighted ones of [`super::population::tally`] (not
//! whole numbers); the Poisson likelihood `λ^n e^{−λ·days}` takes them as they are.

use rayon::prelude::*;

/// Grid of rates, postings a day: from one in 10,000 days to 100,000 a day.
const LN_MIN: f64 = -9.210_340_371_976_182; // ln 1e-4
const LN_MAX: f64 = 11.512_925_464_970_229; // ln 1e5
/// Grid points (about a fifth of a unit of `ln λ` apart).
const POINTS: usize = 97;
/// Expectation–maximisation steps.
const STEPS: usize = 150;
/// Standard deviation of the smoothing between steps, in units of `ln λ`.
const SMOOTH_LN: f64 = 0.3;
/// Feeds the fit reads at most (evenly strided): the weights of a million feeds' counts
/// are known as well from twenty thousand of them.
const SAMPLE: usize = 20_000;
/// Feeds watched that the fit needs before it stands.
pub const MIN_FEEDS: usize = 20;
/// Days the median watched feed was watched before the fit stands. A rate is postings a
/// day, and counts from part of a day hold the hours that part covered: on the farm's day 0
/// a feed that posted in its first two hours was one whose busy hours those were, and under
/// the fitted distribution it was read at what a feed with a posting every two hours posts
/// (the day realized 1.313 of uniform polling against 1.256 with one pseudo-day,
/// docs/EXPERIMENTS.md). Until then the pseudo-days stand.
pub const MIN_TYPICAL_DAYS: f64 = 0.9;

/// Weights on a grid of rates.
#[derive(Clone, Debug, PartialEq)]
pub struct RatePrior {
    /// Grid rates, postings a day.
    rates: Vec<f64>,
    /// Their natural logarithms.
    ln_rates: Vec<f64>,
    /// Natural logarithms of the weights (sum of weights 1).
    ln_weights: Vec<f64>,
}

impl RatePrior {
    /// Fits the weights to feeds' `(postings, days watched)`; `None` with fewer than
    /// [`MIN_FEEDS`] feeds watched a positive time, or none with a finite count, or while
    /// the median feed has been watched less than [`MIN_TYPICAL_DAYS`].
    pub fn fit(watched: &[(f64, f64)]) -> Option<RatePrior> {
        let mut spans: Vec<f64> = watched.iter().map(|&(_, d)| d).collect();
        let middle = spans.len() / 2;
        let typical_span = if spans.is_empty() {
            0.0
        } else {
            *spans.select_nth_unstable_by(middle, f64::total_cmp).1
        };
        if typical_span < MIN_TYPICAL_DAYS {
            return None;
        }
        let usable: Vec<(f64, f64)> = watched
            .iter()
            .copied()
            .filter(|&(n, d)| n.is_finite() && n >= 0.0 && d.is_finite() && d > 0.0)
            .collect();
        if usable.len() < MIN_FEEDS {
            return None;
        }
        let stride = usable.len().div_ceil(SAMPLE).max(1);
        let sample: Vec<(f64, f64)> = usable.iter().step_by(stride).copied().collect();
        let ln_rates: Vec<f64> = (0..POINTS)
            .map(|k| LN_MIN + (LN_MAX - LN_MIN) * k as f64 / (POINTS - 1) as f64)
            .collect();
        let rates: Vec<f64> = ln_rates.iter().map(|x| x.exp()).collect();
        // Each sampled feed's likelihood on the grid, scaled by its largest (a feed's
        // scale cancels in its posterior).
        let likelihood: Vec<Vec<f64>> = sample
            .par_iter()
            .map(|&(n, d)| {
                let ll: Vec<f64> = ln_rates
                    .iter()
                    .zip(&rates)
                    .map(|(&x, &r)| n * x - r * d)
                    .collect();
                let top = ll.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                ll.iter().map(|l| (l - top).exp()).collect()
            })
            .collect();
        let kernel = smoothing_kernel((LN_MAX - LN_MIN) / (POINTS - 1) as f64);
        let mut weights = vec![1.0 / POINTS as f64; POINTS];
        for _ in 0..STEPS {
            let next = likelihood
                .par_iter()
                .fold(
                    || vec![0.0; POINTS],
                    |mut acc, l| {
                        let total: f64 = l.iter().zip(&weights).map(|(a, w)| a * w).sum();
                        if total > 0.0 {
                            for ((a, li), w) in acc.iter_mut().zip(l).zip(&weights) {
                                *a += li * w / total;
                            }
                        }
                        acc
                    },
                )
                .reduce(
                    || vec![0.0; POINTS],
                    |mut a, b| {
                        for (x, y) in a.iter_mut().zip(b) {
                            *x += y;
                        }
                        a
                    },
                );
            weights = smooth(&next, &kernel);
            let sum: f64 = weights.iter().sum();
            if !(sum > 0.0 && sum.is_finite()) {
                return None;
            }
            for w in weights.iter_mut() {
                *w /= sum;
            }
        }
        let ln_weights = weights
            .iter()
            .map(|&w| if w > 0.0 { w.ln() } else { f64::NEG_INFINITY })
            .collect();
        Some(RatePrior {
            rates,
            ln_rates,
            ln_weights,
        })
    }

    /// A feed's rate, postings a day: its posterior mean given `n` postings in `days`
    /// watched (both weighted; `days` 0 gives the population's mean). Always finite and
    /// within the grid.
    pub fn rate(&self, n: f64, days: f64) -> f64 {
        // Held below 1e12 so that `n·ln λ` stays finite (a count of 1e308 is read as very
        // many postings, not as none).
        let read = |v: f64| if v.is_nan() { 0.0 } else { v.clamp(0.0, 1e12) };
        let (n, days) = (read(n), read(days));
        // Two passes, nothing allocated: every feed of a million asks once a round.
        let log_post = |k: usize| self.ln_weights[k] + n * self.ln_rates[k] - self.rates[k] * days;
        let top = (0..POINTS).map(log_post).fold(f64::NEG_INFINITY, f64::max);
        if !top.is_finite() {
            return self.rates[POINTS / 2];
        }
        let (mut num, mut den) = (0.0, 0.0);
        for k in 0..POINTS {
            let p = (log_post(k) - top).exp();
            num += p * self.rates[k];
            den += p;
        }
        num / den
    }

    /// The population's mean rate under the weights.
    pub fn mean(&self) -> f64 {
        self.rate(0.0, 0.0)
    }
}

/// A Gaussian kernel over grid steps of `step` (units of `ln λ`), normalised.
fn smoothing_kernel(step: f64) -> Vec<f64> {
    let half = (3.0 * SMOOTH_LN / step).ceil() as i64;
    let k: Vec<f64> = (-half..=half)
        .map(|i| (-(i as f64 * step / SMOOTH_LN).powi(2) / 2.0).exp())
        .collect();
    let s: f64 = k.iter().sum();
    k.into_iter().map(|v| v / s).collect()
}

/// `w` convolved with the kernel, mass past the grid's ends folded back onto it.
fn smooth(w: &[f64], kernel: &[f64]) -> Vec<f64> {
    let half = (kernel.len() / 2) as i64;
    let last = w.len() as i64 - 1;
    let mut out = vec![0.0; w.len()];
    for (i, &wi) in w.iter().enumerate() {
        for (j, &kj) in kernel.iter().enumerate() {
            let to = (i as i64 + j as i64 - half).clamp(0, last) as usize;
            out[to] += wi * kj;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, LogNormal, Poisson};

    /// Feeds with log-normal rates (mean `mean` a day, σ `sigma`), each watched `days`.
    fn population(feeds: usize, mean: f64, sigma: f64, days: f64, seed: u64) -> Vec<(f64, f64)> {
        let mut rng = StdRng::seed_from_u64(seed);
        let rates = LogNormal::new(mean.ln() - sigma * sigma / 2.0, sigma).unwrap();
        (0..feeds)
            .map(|_| {
                let r: f64 = rates.sample(&mut rng);
                let n = Poisson::new(r * days).map_or(0.0, |p| p.sample(&mut rng));
                (n, days)
            })
            .collect()
    }

    /// The exact posterior mean under a log-normal prior, by quadrature over `ln λ`.
    fn lognormal_posterior(mean: f64, sigma: f64, n: f64, days: f64) -> f64 {
        let mu = mean.ln() - sigma * sigma / 2.0;
        let (mut num, mut den) = (0.0, 0.0);
        for i in 0..4001 {
            let x = mu - 8.0 * sigma + 16.0 * sigma * i as f64 / 4000.0;
            let l = -((x - mu) / sigma).powi(2) / 2.0 + n * x - x.exp() * days;
            let p = l.exp();
            num += p * x.exp();
            den += p;
        }
        num / den
    }

    #[test]
    fn a_silent_feed_gets_what_silent_feeds_of_a_log_normal_population_post() {
        // The farm's population: log-normal, σ = 1, mean 4 a day, two days watched.
        let watched = population(5_000, 4.0, 1.0, 2.0, 7);
        let prior = RatePrior::fit(&watched).expect("fitted");
        for n in [0.0, 1.0, 3.0, 8.0, 20.0] {
            let want = lognormal_posterior(4.0, 1.0, n, 2.0);
            let got = prior.rate(n, 2.0);
            assert!(
                (got / want - 1.0).abs() < 0.15,
                "{n} postings in 2 days: {got:.3} a day, the log-normal's posterior {want:.3}"
            );
        }
        // Linear shrinkage at the held-out choice of 0.25 pseudo-days toward the median
        // (2.43) reads a silent feed at 0.27 a day; the truth is about 0.71.
        assert!(prior.rate(0.0, 2.0) > 0.5, "{}", prior.rate(0.0, 2.0));
        // The mean of the fitted distribution is the population's.
        assert!((prior.mean() / 4.0 - 1.0).abs() < 0.1, "{}", prior.mean());
    }

    #[test]
    fn a_feed_watched_long_keeps_about_its_own_rate() {
        let watched = population(3_000, 1.0, 1.5, 28.0, 3);
        let prior = RatePrior::fit(&watched).expect("fitted");
        for (n, days) in [(280.0, 28.0), (28.0, 28.0), (2800.0, 28.0), (14.0, 28.0)] {
            let own = n / days;
            let got = prior.rate(n, days);
            assert!(
                (got / own - 1.0).abs() < 0.2,
                "{n} in {days} days: {got:.3} against its own {own:.3}"
            );
        }
        // Order is kept: more postings in the same days never give a lower rate.
        let mut last = 0.0;
        for n in 0..60 {
            let r = prior.rate(n as f64, 28.0);
            assert!(r >= last, "{n}: {r} < {last}");
            last = r;
        }
    }

    #[test]
    fn bad_input_gives_a_finite_rate_and_too_few_feeds_no_fit() {
        assert!(RatePrior::fit(&[(1.0, 1.0); 5]).is_none());
        assert!(RatePrior::fit(&[(f64::NAN, 1.0); 50]).is_none());
        // Most feeds watched a quarter of a day: no fit yet; most watched a day: a fit.
        let mut young: Vec<(f64, f64)> = vec![(1.0, 0.25); 30];
        young.extend([(1.0, 2.0); 29]);
        assert!(RatePrior::fit(&young).is_none());
        young.extend([(1.0, 2.0); 2]);
        assert!(RatePrior::fit(&young).is_some());
        let mut rng = StdRng::seed_from_u64(1);
        let mut watched: Vec<(f64, f64)> = (0..200)
            .map(|_| (rng.gen_range(0..5) as f64, 14.0))
            .collect();
        // A feed that posted 500 items in an hour, one with a year's silence, and junk.
        watched.extend([
            (500.0, 1.0 / 24.0),
            (0.0, 365.0),
            (f64::INFINITY, 3.0),
            (3.0, 0.0),
        ]);
        let prior = RatePrior::fit(&watched).expect("fitted");
        for (n, d) in [
            (500.0, 1.0 / 24.0),
            (0.0, 365.0),
            (1.0, 365.0),
            (f64::NAN, 2.0),
            (3.0, f64::INFINITY),
            (1e9, 1e-9),
        ] {
            let r = prior.rate(n, d);
            assert!(r.is_finite() && r > 0.0, "({n}, {d}): {r}");
            assert!(r <= 1e5 * 1.0001, "({n}, {d}): {r}");
        }
        // The burst's feed is read as busy, far above the others, without taking them along.
        assert!(prior.rate(500.0, 1.0 / 24.0) > 100.0);
        assert!(prior.rate(1e308, 1.0) > 1e4, "{}", prior.rate(1e308, 1.0));
        assert!(prior.rate(2.0, 14.0) < 1.0);
    }
}
