//! Day-of-week effects, learned per feed and shrunk toward the feed's daily model.
//!
//! A feed's weekly model is its daily model (hourly shape × daily rate) scaled per day of
//! the week by a factor `f_d`: posting rate on day `d` over the feed's mean daily rate. Four
//! shapes compete, per feed:
//! * **daily** — `f_d = 1` (no weekly effect);
//! * **weekday/weekend** — one factor for Monday–Friday, one for Saturday–Sunday;
//! * **day of week** — seven factors.
//!
//! * **pooled** — the population's day-of-week factors ([`pooled`]), fitted to nothing of
//!   the feed's own: most feeds of a service share their weekend, and a feed with too few
//!   postings to show its own can still lean on everyone's.
//!
//! A group's factor is shrunk toward the pooled factors' mean over the group by `β`
//! pseudo-days: `f_g = (C_g / r̄ + β·p_g) / (E_g + β)`, with `C_g` the group's postings, `E_g`
//! its observed days and `r̄` the mean daily rate, so a feed seen for two weekends does not
//! read one quiet Sunday as a rule. The shape and `β` are chosen per feed by
//! leave-one-week-out cross-validation of the Poisson log-likelihood of the day counts: a
//! feed leaves the daily model only when held-out weeks say the factors predict better.
//!
//! Day 0 of the week is whatever the caller's clock makes it (the trace's first day
//! offline, Thursday 1970-01-01 live); only consistency between learning and planning
//! matters. Pure and synchronous, shared by `plan`/`simulate` and the live relearner.

/// Which weekly shape a feed uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeekShape {
    /// No weekly effect.
    Daily,
    /// The population's day-of-week factors, unchanged.
    Pooled,
    /// Days 0–4 and days 5–6 (Monday–Friday and the weekend when day 0 is a Monday).
    WeekdayWeekend,
    /// One factor per day of the week.
    DayOfWeek,
}

/// Shrinkage strengths tried, in pseudo-days.
const BETAS: [f64; 2] = [2.0, 8.0];
/// Nats of held-out log-likelihood a shape must gain over the best simpler one to be
/// chosen: selection among several candidates on two or three held-out weeks is optimistic,
/// so each shape pays about a nat per factor it fits to the feed (none for the pooled
/// factors, one ratio for weekday/weekend, six for day of week).
const POOLED_MARGIN: f64 = 1.0;
const WEEKEND_MARGIN: f64 = 2.0;
const DAY_OF_WEEK_MARGIN: f64 = 6.0;

/// One observed day of a feed: day of the week (0–6), postings, and how much of the day was
/// observed (0–1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Day {
    /// Day of the week, 0–6.
    pub weekday: usize,
    /// Postings seen that day (fractions for postings spread over an interval).
    pub count: f64,
    /// Share of the day observed.
    pub exposure: f64,
}

/// A feed's learned weekly factors.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WeekFactors {
    /// The shape chosen.
    pub shape: WeekShape,
    /// Rate on each day of the week over the mean daily rate.
    pub factors: [f64; 7],
}

impl WeekFactors {
    /// No weekly effect.
    pub const DAILY: WeekFactors = WeekFactors {
        shape: WeekShape::Daily,
        factors: [1.0; 7],
    };
}

fn group(shape: WeekShape, weekday: usize) -> usize {
    match shape {
        WeekShape::Daily | WeekShape::Pooled => 0,
        WeekShape::WeekdayWeekend => usize::from(weekday >= 5),
        WeekShape::DayOfWeek => weekday,
    }
}

/// Factors of `shape` fitted on `days`, each group shrunk by `beta` pseudo-days toward the
/// group's mean of `prior`.
pub fn fit(days: &[Day], shape: WeekShape, beta: f64, prior: &[f64; 7]) -> [f64; 7] {
    let (c, e): (f64, f64) = days
        .iter()
        .fold((0.0, 0.0), |(c, e), d| (c + d.count, e + d.exposure));
    match shape {
        WeekShape::Daily => return [1.0; 7],
        WeekShape::Pooled => return *prior,
        _ if c <= 0.0 || e <= 0.0 => return *prior,
        _ => {}
    }
    let mean = c / e;
    let mut gc = [0.0f64; 7];
    let mut ge = [0.0f64; 7];
    for d in days {
        let g = group(shape, d.weekday % 7);
        gc[g] += d.count;
        ge[g] += d.exposure;
    }
    let mut pg = [0.0f64; 7];
    let mut pn = [0.0f64; 7];
    for (wd, p) in prior.iter().enumerate() {
        pg[group(shape, wd)] += p;
        pn[group(shape, wd)] += 1.0;
    }
    let mut f = [1.0; 7];
    for (wd, v) in f.iter_mut().enumerate() {
        let g = group(shape, wd);
        let p = pg[g] / pn[g];
        *v = (gc[g] / mean + beta * p) / (ge[g] + beta);
    }
    f
}

/// The population's day-of-week factors: postings on each day of the week per observed day,
/// over the mean, summed over feeds (busy feeds weigh more, as their postings do in the
/// delay). Ones when nothing was observed.
pub fn pooled(feeds: &[Vec<Day>]) -> [f64; 7] {
    let mut c = [0.0f64; 7];
    let mut e = [0.0f64; 7];
    for d in feeds.iter().flatten() {
        c[d.weekday % 7] += d.count;
        e[d.weekday % 7] += d.exposure;
    }
    let (tc, te): (f64, f64) = (c.iter().sum(), e.iter().sum());
    if tc <= 0.0 || te <= 0.0 || e.iter().any(|&x| x <= 0.0) {
        return [1.0; 7];
    }
    let mean = tc / te;
    let mut f = [1.0; 7];
    for (d, v) in f.iter_mut().enumerate() {
        *v = c[d] / e[d] / mean;
    }
    f
}

/// Poisson log-likelihood of `days` under a mean daily rate and factors (constant terms
/// dropped).
fn log_likelihood(days: &[Day], mean: f64, f: &[f64; 7]) -> f64 {
    days.iter()
        .map(|d| {
            let lambda = (mean * f[d.weekday % 7] * d.exposure).max(1e-9);
            d.count * lambda.ln() - lambda
        })
        .sum()
}

/// Chooses a feed's weekly shape and factors from its observed days, by leave-one-week-out
/// cross-validation over `week_of(day index)` folds. Needs at least two folds with
/// postings; otherwise the daily model.
pub fn choose(days: &[Day], week_of: &dyn Fn(usize) -> usize, prior: &[f64; 7]) -> WeekFactors {
    let weeks: Vec<usize> = {
        let mut w: Vec<usize> = (0..days.len()).map(week_of).collect();
        w.sort_unstable();
        w.dedup();
        w
    };
    let total: f64 = days.iter().map(|d| d.count).sum();
    if weeks.len() < 2 || total < 1.0 {
        return WeekFactors::DAILY;
    }
    let score = |shape: WeekShape, beta: f64| -> f64 {
        let mut ll = 0.0;
        for &k in &weeks {
            let train: Vec<Day> = days
                .iter()
                .enumerate()
                .filter(|(i, _)| week_of(*i) != k)
                .map(|(_, d)| *d)
                .collect();
            let test: Vec<Day> = days
                .iter()
                .enumerate()
                .filter(|(i, _)| week_of(*i) == k)
                .map(|(_, d)| *d)
                .collect();
            let (c, e) = train
                .iter()
                .fold((0.0, 0.0), |(c, e), d| (c + d.count, e + d.exposure));
            // Half a posting over the training days when it saw none, as the daily learner.
            let mean = if c > 0.0 {
                c / e.max(1e-9)
            } else {
                0.5 / e.max(1.0)
            };
            ll += log_likelihood(&test, mean, &fit(&train, shape, beta, prior));
        }
        ll
    };
    let mut best = (WeekShape::Daily, 0.0, score(WeekShape::Daily, 0.0));
    // The pooled factors cost no parameter of the feed's own: a smaller margin.
    let pooled = score(WeekShape::Pooled, 0.0);
    if pooled > best.2 + POOLED_MARGIN {
        best = (WeekShape::Pooled, 0.0, pooled);
    }
    for (shape, margin) in [
        (WeekShape::WeekdayWeekend, WEEKEND_MARGIN),
        (WeekShape::DayOfWeek, DAY_OF_WEEK_MARGIN),
    ] {
        for beta in BETAS {
            let s = score(shape, beta);
            if s > best.2 + margin {
                best = (shape, beta, s);
            }
        }
    }
    WeekFactors {
        shape: best.0,
        factors: fit(days, best.0, best.1, prior),
    }
}

/// A weekly model's bins (168, day-major) from a daily model's 24 bins and the factors.
pub fn weekly_bins(daily: &[f32], f: &[f64; 7]) -> Vec<f32> {
    f.iter()
        .flat_map(|&x| daily.iter().map(move |&b| (b as f64 * x) as f32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Poisson};

    fn days(rate: f64, weekend: f64, n: usize, seed: u64) -> Vec<Day> {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                let wd = i % 7;
                let lambda = rate * if wd >= 5 { weekend } else { 1.0 };
                Day {
                    weekday: wd,
                    count: Poisson::new(lambda).unwrap().sample(&mut rng),
                    exposure: 1.0,
                }
            })
            .collect()
    }

    #[test]
    fn fit_shrinks_toward_one() {
        // 5 weekdays at 10, 2 weekend days at 2: mean 54/7.
        let d: Vec<Day> = (0..7)
            .map(|i| Day {
                weekday: i,
                count: if i >= 5 { 2.0 } else { 10.0 },
                exposure: 1.0,
            })
            .collect();
        let mean = 54.0 / 7.0;
        let one = [1.0; 7];
        let f = fit(&d, WeekShape::WeekdayWeekend, 0.0, &one);
        assert!((f[0] - 10.0 / mean).abs() < 1e-12 && (f[6] - 2.0 / mean).abs() < 1e-12);
        let g = fit(&d, WeekShape::WeekdayWeekend, 2.0, &one);
        assert!(g[6] > f[6] && g[6] < 1.0, "shrunk toward 1: {g:?}");
        assert!((g[6] - (4.0 / mean + 2.0) / 4.0).abs() < 1e-12);
        // Toward a prior with a quiet weekend instead: the group's mean of the prior.
        let prior = [1.2, 1.2, 1.2, 1.2, 1.2, 0.6, 0.4];
        let h = fit(&d, WeekShape::WeekdayWeekend, 2.0, &prior);
        assert!((h[6] - (4.0 / mean + 2.0 * 0.5) / 4.0).abs() < 1e-12);
        assert_eq!(fit(&d, WeekShape::Daily, 0.0, &prior), one);
        assert_eq!(fit(&d, WeekShape::Pooled, 0.0, &prior), prior);
        assert_eq!(fit(&[], WeekShape::DayOfWeek, 1.0, &prior), prior);
    }

    #[test]
    fn busy_feeds_with_quiet_weekends_choose_a_weekly_shape_and_flat_ones_do_not() {
        let week = |i: usize| i / 7;
        let one = [1.0; 7];
        let mut weekly = 0;
        let mut flat_weekly = 0;
        for seed in 0..50 {
            let c = choose(&days(8.0, 0.3, 14, seed), &week, &one);
            if c.shape != WeekShape::Daily {
                weekly += 1;
                assert!(c.factors[6] < 0.8 && c.factors[0] > 1.0, "{c:?}");
            }
            if choose(&days(8.0, 1.0, 14, 100 + seed), &week, &one).shape != WeekShape::Daily {
                flat_weekly += 1;
            }
        }
        assert!(
            weekly >= 45,
            "{weekly} of 50 busy weekday feeds found their weekend"
        );
        assert!(
            flat_weekly <= 5,
            "{flat_weekly} of 50 flat feeds took a weekly shape"
        );
        // Sparse feeds and single weeks keep the daily model.
        assert_eq!(
            choose(&days(0.2, 0.3, 14, 1), &week, &one).shape,
            WeekShape::Daily
        );
        assert_eq!(
            choose(&days(8.0, 0.3, 7, 1), &week, &one).shape,
            WeekShape::Daily
        );
    }

    #[test]
    fn the_population_weekend_carries_feeds_too_sparse_for_their_own() {
        let week = |i: usize| i / 7;
        let feeds: Vec<Vec<Day>> = (0..400).map(|s| days(2.0, 0.5, 14, 1000 + s)).collect();
        let prior = pooled(&feeds);
        let weekend = (prior[5] + prior[6]) / 2.0;
        let weekday = prior[..5].iter().sum::<f64>() / 5.0;
        assert!((weekend / weekday - 0.5).abs() < 0.06, "{prior:?}");
        let pooled_or_own = feeds
            .iter()
            .filter(|d| choose(d, &week, &prior).shape != WeekShape::Daily)
            .count();
        assert!(pooled_or_own >= 200, "{pooled_or_own} of 400");
        // Flat feeds with a flat population: pooled factors near one, nothing to gain.
        let flat: Vec<Vec<Day>> = (0..400).map(|s| days(2.0, 1.0, 14, 5000 + s)).collect();
        let p = pooled(&flat);
        assert!(p.iter().all(|f| (f - 1.0).abs() < 0.1), "{p:?}");
        assert_eq!(pooled(&[]), [1.0; 7]);
    }

    #[test]
    fn weekly_bins_scale_each_day() {
        let daily = vec![1.0f32; 24];
        let mut f = [1.0; 7];
        f[6] = 0.5;
        let w = weekly_bins(&daily, &f);
        assert_eq!(w.len(), 168);
        assert_eq!(w[0], 1.0);
        assert_eq!(w[6 * 24 + 3], 0.5);
    }
}
