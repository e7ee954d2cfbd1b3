//! Daily shapes pooled across feeds: a mixture of a few base shapes, each at any of the
//! day's 24 hourly shifts, fitted by EM to the feeds' hourly counts.
//!
//! One pooled shape is the wrong prior for a population whose feeds keep office hours in
//! different time zones, post in the evening, or at one fixed minute: it pulls every feed
//! toward the population's average day, and two weeks of a feed's own counts (two or three
//! postings a day) cannot pull it back. On a synthetic trace of the papers' shape the plan
//! made from each feed's true shape and a learned rate was within 1% of the plan made from
//! the generating intensities, and the plan from the learned shapes 12% above it: the
//! shapes, not the rates, hold the gap. Here each feed's prior is the posterior mean of its
//! shape under the mixture: a feed whose counts fit one base shape at one shift borrows
//! that shape's detail from every feed like it, and a feed with a posting or two gets a
//! blend close to the population's.
//!
//! A shift is a rotation by whole hours; the base shapes are learned with every feed's
//! counts aligned by its posterior over shifts, so a shape seen in three time zones is one
//! shape with three times the evidence. The likelihood of a feed's counts under a shifted
//! shape is multinomial over the hours (postings treated as independent given the feed's
//! daily total; exposure is taken as even over the hours, which holds for every whole day
//! watched).

use super::shrink::Chosen;
use crate::time::DAY_MS;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use std::sync::Arc;

const BINS: usize = 24;
/// Feeds per task of the E-step: fixed, so the sums do not depend on the thread count.
const E_STEP_CHUNK: usize = 128;

/// Settings of the mixture.
#[derive(Clone, Copy, Debug)]
pub struct MixtureConfig {
    /// Base shapes.
    pub shapes: usize,
    /// EM iterations.
    pub iterations: usize,
    /// Feeds fitted at most (by a fixed stride over those with enough postings).
    pub sample: usize,
    /// Feeds need at least this many (weighted) postings to take part in the fit.
    pub min_postings: f64,
    /// The fit is skipped (no mixture) below this many postings in the sample in all.
    pub min_total: f64,
    /// EM runs from different starts; the most likely fit is kept.
    pub restarts: usize,
}

impl Default for MixtureConfig {
    fn default() -> Self {
        MixtureConfig {
            shapes: 8,
            iterations: 40,
            sample: 4_000,
            min_postings: 3.0,
            min_total: 400.0,
            restarts: 4,
        }
    }
}

/// A fitted mixture of shifted daily shapes.
#[derive(Clone, Debug)]
pub struct Mixture {
    /// Base shapes (each sums to 1).
    shapes: Vec<[f64; BINS]>,
    /// Their logarithms, laid out by [`log_by_shift`].
    log_shapes: Vec<[f64; 2 * BINS]>,
    /// Log prior weight of (shape, shift), `shape * BINS + shift`.
    log_weight: Vec<f64>,
}

/// Hour `b` of shape `g` shifted later by `s` hours.
fn at(g: &[f64; BINS], s: usize, b: usize) -> f64 {
    g[(b + BINS - s) % BINS]
}

/// A shape's logarithms reversed and repeated, so that hour `b` of the shape shifted by
/// `s` hours is element `BINS − 1 − b + s`: one hour's term for all 24 shifts is then one
/// run of 24 neighbours, which the posterior adds as a vector (the posterior is most of a
/// large plan's learning, and the remainder per term was most of the posterior).
fn log_by_shift(g: &[f64; BINS]) -> [f64; 2 * BINS] {
    let mut out = [0.0; 2 * BINS];
    for (i, v) in out.iter_mut().enumerate() {
        *v = g[(2 * BINS - 1 - i) % BINS].ln();
    }
    out
}

impl Mixture {
    /// Fits the mixture to feeds' hourly counts; `None` when too few postings back it.
    /// EM finds a local optimum that depends on its start: it runs from `restarts` starts
    /// and keeps the fit with the highest likelihood.
    pub fn fit(counts: &[[f64; BINS]], cfg: &MixtureConfig) -> Option<Mixture> {
        let k = cfg.shapes.max(1);
        let eligible: Vec<usize> = (0..counts.len())
            .filter(|&f| counts[f].iter().sum::<f64>() >= cfg.min_postings)
            .collect();
        let stride = eligible.len().div_ceil(cfg.sample.max(1)).max(1);
        let sample: Vec<&[f64; BINS]> = eligible
            .iter()
            .step_by(stride)
            .map(|&f| &counts[f])
            .collect();
        let total: f64 = sample.iter().map(|c| c.iter().sum::<f64>()).sum();
        if total < cfg.min_total || sample.len() < k {
            return None;
        }
        let mut rng = StdRng::seed_from_u64(0x005b_a9e5);
        let mut best: Option<(f64, Mixture)> = None;
        for _ in 0..cfg.restarts.max(1) {
            let mut mix = Mixture::seed(&sample, k, &mut rng);
            let ll = mix.em(&sample, cfg.iterations);
            if best.as_ref().is_none_or(|(b, _)| ll > *b) {
                best = Some((ll, mix));
            }
        }
        best.map(|(_, m)| m)
    }

    /// `iterations` EM steps; the log-likelihood of the sample under the last E-step.
    /// The E-step runs on every core in fixed chunks of the sample, summed in order, so
    /// the fit does not depend on the number of threads.
    fn em(&mut self, sample: &[&[f64; BINS]], iterations: usize) -> f64 {
        let k = self.shapes.len();
        let mut ll = f64::NEG_INFINITY;
        for _ in 0..iterations {
            let parts: Vec<(Vec<[f64; BINS]>, Vec<f64>, f64)> = sample
                .par_chunks(E_STEP_CHUNK)
                .map(|chunk| {
                    let mut post = vec![0.0f64; k * BINS];
                    let mut aligned = vec![[0.0f64; BINS]; k];
                    let mut mass = vec![0.0f64; k * BINS];
                    let mut ll = 0.0;
                    for c in chunk {
                        ll += self.posterior(c, &mut post);
                        for (ks, &r) in post.iter().enumerate() {
                            if r < 1e-6 {
                                continue;
                            }
                            mass[ks] += r;
                            let (shape, s) = (ks / BINS, ks % BINS);
                            // Undo the shift: hour j of the base shape is hour j + s of the feed.
                            for (j, a) in aligned[shape].iter_mut().enumerate() {
                                *a += r * c[(j + s) % BINS];
                            }
                        }
                    }
                    (aligned, mass, ll)
                })
                .collect();
            let mut aligned = vec![[0.0f64; BINS]; k];
            let mut mass = vec![0.0f64; k * BINS];
            ll = 0.0;
            for (a, m, l) in parts {
                ll += l;
                for (into, from) in aligned.iter_mut().zip(&a) {
                    for (x, y) in into.iter_mut().zip(from) {
                        *x += y;
                    }
                }
                for (x, y) in mass.iter_mut().zip(&m) {
                    *x += y;
                }
            }
            for (shape, a) in aligned.iter().enumerate() {
                // A pseudo-posting per hour keeps every hour possible.
                let sum: f64 = a.iter().sum::<f64>() + BINS as f64;
                for (j, v) in a.iter().enumerate() {
                    self.shapes[shape][j] = (v + 1.0) / sum;
                }
                self.log_shapes[shape] = log_by_shift(&self.shapes[shape]);
            }
            let n = sample.len() as f64;
            for (ks, m) in mass.iter().enumerate() {
                self.log_weight[ks] = ((m + 0.5) / (n + 0.5 * (k * BINS) as f64)).ln();
            }
        }
        ll
    }

    /// A k-means++ start among the busiest feeds: a random one's smoothed shape, then each
    /// next one drawn with odds its divergence from the nearest shape so far (any shift).
    /// Divergence, not likelihood: a flat feed explains itself poorly under any shape, yet
    /// a flat shape already covers it.
    fn seed(sample: &[&[f64; BINS]], k: usize, rng: &mut StdRng) -> Mixture {
        let mut order: Vec<usize> = (0..sample.len()).collect();
        let n_of = |i: usize| sample[i].iter().sum::<f64>();
        order.sort_by(|&a, &b| n_of(b).total_cmp(&n_of(a)).then(a.cmp(&b)));
        order.truncate(200.max(4 * k));
        let smooth = |c: &[f64; BINS]| {
            let n: f64 = c.iter().sum();
            let mut g = [0.0; BINS];
            for j in 0..BINS {
                g[j] = (c[j] + 0.5) / (n + 0.5 * BINS as f64);
            }
            g
        };
        let first = order[rng.gen_range(0..order.len())];
        let mut shapes = vec![smooth(sample[first])];
        while shapes.len() < k {
            // Each candidate's divergence on every core (collected in order: the draw
            // below does not depend on the thread count); on one core this was most of a
            // large plan's learning that did not scale.
            let gap: Vec<f64> = order
                .par_iter()
                .map(|&i| {
                    let c = sample[i];
                    let own = smooth(c);
                    let n: f64 = c.iter().sum::<f64>().max(1e-9);
                    let mut nearest = f64::INFINITY;
                    for g in &shapes {
                        for s in 0..BINS {
                            let kl: f64 = (0..BINS)
                                .filter(|&b| c[b] > 0.0)
                                .map(|b| c[b] / n * (own[b] / at(g, s, b)).ln())
                                .sum();
                            nearest = nearest.min(kl);
                        }
                    }
                    nearest.max(0.0)
                })
                .collect();
            let sum: f64 = gap.iter().sum();
            let pick = if sum > 0.0 {
                let mut x = rng.gen::<f64>() * sum;
                let mut at_ = order.len() - 1;
                for (i, g) in gap.iter().enumerate() {
                    if x < *g {
                        at_ = i;
                        break;
                    }
                    x -= g;
                }
                order[at_]
            } else {
                order[rng.gen_range(0..order.len())]
            };
            shapes.push(smooth(sample[pick]));
        }
        let log_shapes = shapes.iter().map(log_by_shift).collect();
        Mixture {
            shapes,
            log_shapes,
            log_weight: vec![-((k * BINS) as f64).ln(); k * BINS],
        }
    }

    /// Posterior over (shape, shift) of a feed with hourly counts `c`, into `out`.
    fn posterior(&self, c: &[f64; BINS], out: &mut [f64]) -> f64 {
        let mut hours = [(0usize, 0.0f64); BINS];
        let mut busy = 0;
        for (b, &w) in c.iter().enumerate() {
            if w > 0.0 {
                hours[busy] = (b, w);
                busy += 1;
            }
        }
        let mut top = f64::NEG_INFINITY;
        for (shape, lg) in self.log_shapes.iter().enumerate() {
            // Each shift's log-likelihood, the hours added in order for every shift at once.
            let mut by_shift = [0.0f64; BINS];
            for &(b, w) in &hours[..busy] {
                let run = &lg[BINS - 1 - b..2 * BINS - 1 - b];
                for (acc, &l) in by_shift.iter_mut().zip(run) {
                    *acc += w * l;
                }
            }
            for (s, &sum) in by_shift.iter().enumerate() {
                let ks = shape * BINS + s;
                let ll = self.log_weight[ks] + sum;
                out[ks] = ll;
                top = top.max(ll);
            }
        }
        let mut sum = 0.0;
        for v in out.iter_mut() {
            *v = (*v - top).exp();
            sum += *v;
        }
        for v in out.iter_mut() {
            *v /= sum;
        }
        top + sum.ln()
    }

    /// The prior shape (sums to 1) of a feed with hourly counts `c`: its shape's
    /// posterior mean. With no counts, the mixture's own average day.
    pub fn prior_for(&self, c: &[f64; BINS]) -> [f64; BINS] {
        let mut post = vec![0.0f64; self.log_weight.len()];
        self.posterior(c, &mut post);
        let mut m = [0.0f64; BINS];
        for (ks, &r) in post.iter().enumerate() {
            if r < 1e-9 {
                continue;
            }
            let (shape, s) = (ks / BINS, ks % BINS);
            // Hour b of the shape shifted by s, as two runs: hours s.. take the shape's
            // first hours, hours ..s its last.
            let g = &self.shapes[shape];
            for (v, &x) in m[s..].iter_mut().zip(&g[..BINS - s]) {
                *v += r * x;
            }
            for (v, &x) in m[..s].iter_mut().zip(&g[BINS - s..]) {
                *v += r * x;
            }
        }
        let sum: f64 = m.iter().sum();
        for v in m.iter_mut() {
            *v /= sum;
        }
        m
    }
}

/// The population's mixture between refits. Refitting at every replan moved every feed's
/// prior a little each time, and the schedules with it: on the synthetic `steady` trace at
/// four fetches a day the live plans realized 91.5 min refitted every two hours and 86.8
/// refitted daily (the offline plans 89.4 and 87.3). A population's shapes change over
/// weeks, so the fit is kept a day, or until the postings behind it have doubled (the first
/// days, when every day adds most of what is known).
#[derive(Clone, Debug, Default)]
pub struct ShapeCache {
    fitted_at_ms: Option<i64>,
    fitted_postings: f64,
    shapes: usize,
    mixture: Option<Arc<Mixture>>,
    /// The shrinkage chosen on held-out days against this fit ([`super::shrink::choose`]):
    /// with a mixture each held-out day needs its own posterior, which makes the choice
    /// the costliest part of a round, so it is made once per fit.
    chosen: Option<Chosen>,
    /// The last shrinkage chosen, with or without a fit: the next choice keeps it unless
    /// the held-out days clearly prefer another.
    last_chosen: Option<Chosen>,
}

impl ShapeCache {
    /// The mixture for feeds' hourly `counts` at `now_ms`: the kept one, or a new fit when
    /// it is a day old, its postings have doubled, the clock went back, or the settings
    /// changed. `None` while too few postings back a fit, or with `cfg.shapes` 0.
    pub fn mixture(
        &mut self,
        counts: &[[f64; BINS]],
        now_ms: i64,
        cfg: &MixtureConfig,
    ) -> Option<Arc<Mixture>> {
        if cfg.shapes == 0 {
            self.mixture = None;
            self.chosen = None;
            self.fitted_at_ms = None;
            return None;
        }
        let total: f64 = counts.iter().flatten().sum();
        let stale = match self.fitted_at_ms {
            None => true,
            Some(t) => {
                now_ms - t >= DAY_MS
                    || now_ms < t
                    || total > 2.0 * self.fitted_postings
                    || self.shapes != cfg.shapes
            }
        };
        if stale {
            self.mixture = Mixture::fit(counts, cfg).map(Arc::new);
            self.chosen = None;
            self.fitted_at_ms = Some(now_ms);
            self.fitted_postings = total;
            self.shapes = cfg.shapes;
        }
        self.mixture.clone()
    }

    /// Base shapes of the fit in force (0: none, the one pooled shape stands).
    pub fn shapes_in_force(&self) -> usize {
        self.mixture.as_ref().map_or(0, |_| self.shapes)
    }

    /// The shrinkage chosen last, against this fit or an earlier one.
    pub fn previous_choice(&self) -> Option<Chosen> {
        self.last_chosen
    }

    /// The shrinkage chosen against the current fit, if one was kept.
    pub fn chosen(&self) -> Option<Chosen> {
        self.chosen
    }

    /// Keeps the shrinkage chosen against the current fit until the next refit.
    pub fn keep_chosen(&mut self, chosen: Chosen) {
        self.last_chosen = Some(chosen);
        if self.mixture.is_some() {
            self.chosen = Some(chosen);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Three daily shapes, sharp enough that two weeks of a feed's own counts leave its
    /// peak noisy: a morning window, an evening one and office hours.
    fn truth(kind: usize, shift: usize) -> [f64; BINS] {
        let bump = |h: f64, c: f64, w: f64| (-((h - c) / w).powi(2) / 2.0).exp();
        let mut g = [0.0; BINS];
        for (b, v) in g.iter_mut().enumerate() {
            let h = ((b + BINS - shift) % BINS) as f64;
            *v = match kind {
                0 => 0.02 + bump(h, 9.0, 0.8),
                1 => 0.02 + bump(h, 20.0, 1.0),
                _ => 0.05 + bump(h, 13.0, 3.0),
            };
        }
        let sum: f64 = g.iter().sum();
        g.map(|v| v / sum)
    }

    /// `feeds` feeds with `postings` each, drawn from the three shapes at random shifts.
    fn population(
        feeds: usize,
        postings: usize,
        seed: u64,
    ) -> (Vec<[f64; BINS]>, Vec<[f64; BINS]>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut counts = Vec::new();
        let mut shapes = Vec::new();
        for _ in 0..feeds {
            let g = truth(rng.gen_range(0..3), rng.gen_range(0..BINS));
            let mut c = [0.0; BINS];
            for _ in 0..postings {
                let mut x = rng.gen::<f64>();
                let mut b = 0;
                while b < BINS - 1 && x >= g[b] {
                    x -= g[b];
                    b += 1;
                }
                c[b] += 1.0;
            }
            counts.push(c);
            shapes.push(g);
        }
        (counts, shapes)
    }

    fn l1(a: &[f64; BINS], b: &[f64; BINS]) -> f64 {
        a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum()
    }

    #[test]
    fn shapes_shared_across_shifts_beat_each_feed_alone_and_the_pooled_shape() {
        let (counts, truths) = population(300, 20, 1);
        let cfg = MixtureConfig {
            shapes: 3,
            ..MixtureConfig::default()
        };
        let mix = Mixture::fit(&counts, &cfg).expect("6,000 postings fit");
        let mut pooled = [0.0; BINS];
        for c in &counts {
            for b in 0..BINS {
                pooled[b] += c[b];
            }
        }
        let total: f64 = pooled.iter().sum();
        let pooled = pooled.map(|v| v / total);
        let (mut own, mut pool, mut mixed) = (0.0, 0.0, 0.0);
        for (c, g) in counts.iter().zip(&truths) {
            // Each feed's own hours, lightly smoothed toward the pool (as without a mixture).
            let n: f64 = c.iter().sum();
            let mut est = [0.0; BINS];
            for b in 0..BINS {
                est[b] = (c[b] + 4.0 * pooled[b]) / (n + 4.0);
            }
            own += l1(&est, g);
            pool += l1(&pooled, g);
            mixed += l1(&mix.prior_for(c), g);
        }
        let n = counts.len() as f64;
        let (own, pool, mixed) = (own / n, pool / n, mixed / n);
        // Measured: own 0.56, pooled 1.2, mixture about 0.2.
        assert!(mixed < 0.5 * own, "mixture {mixed:.3} against own {own:.3}");
        assert!(
            mixed < 0.3 * pool,
            "mixture {mixed:.3} against pooled {pool:.3}"
        );
    }

    #[test]
    fn the_posterior_is_its_definition_over_every_shape_and_shift() {
        let (counts, _) = population(200, 12, 5);
        let mix = Mixture::fit(&counts, &MixtureConfig::default()).expect("fits");
        let k = mix.shapes.len();
        let mut post = vec![0.0; k * BINS];
        for c in counts.iter().take(20).chain([&[0.0; BINS]]) {
            let ll = mix.posterior(c, &mut post);
            // Written out: each (shape, shift)'s weight times the product over hours of
            // the shifted shape's share to the power of the hour's count.
            let direct: Vec<f64> = (0..k * BINS)
                .map(|ks| {
                    let (g, s) = (&mix.shapes[ks / BINS], ks % BINS);
                    mix.log_weight[ks] + (0..BINS).map(|b| c[b] * at(g, s, b).ln()).sum::<f64>()
                })
                .collect();
            let top = direct.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = direct.iter().map(|v| (v - top).exp()).sum();
            assert!((ll - (top + sum.ln())).abs() < 1e-9, "{ll} against {top}");
            for (p, d) in post.iter().zip(&direct) {
                assert!((p - (d - top).exp() / sum).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn too_few_postings_fit_nothing_and_no_counts_get_the_average_day() {
        let (counts, _) = population(10, 5, 2);
        assert!(Mixture::fit(&counts, &MixtureConfig::default()).is_none());
        let (counts, _) = population(200, 10, 3);
        let mix = Mixture::fit(&counts, &MixtureConfig::default()).expect("fits");
        let blank = mix.prior_for(&[0.0; BINS]);
        assert!((blank.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        // Shifts are spread over the day: the average day is nearly flat.
        let (lo, hi) = blank
            .iter()
            .fold((1.0f64, 0.0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        assert!(hi < 2.5 * lo, "{lo} {hi}");
    }

    #[test]
    fn a_fit_is_deterministic_and_extreme_counts_stay_finite() {
        let (mut counts, _) = population(200, 10, 4);
        let a = Mixture::fit(&counts, &MixtureConfig::default()).unwrap();
        let b = Mixture::fit(&counts, &MixtureConfig::default()).unwrap();
        let c = [0.0, 3.0, 0.0, 1.0]
            .iter()
            .cycle()
            .take(BINS)
            .copied()
            .collect::<Vec<_>>();
        let c: [f64; BINS] = c.try_into().unwrap();
        assert_eq!(a.prior_for(&c), b.prior_for(&c));
        // A feed that posted 500 items in one hour, and one with a billion.
        counts[0] = [0.0; BINS];
        counts[0][7] = 500.0;
        counts[1] = [0.0; BINS];
        counts[1][3] = 1e9;
        let m = Mixture::fit(&counts, &MixtureConfig::default()).unwrap();
        for c in &counts[..2] {
            let p = m.prior_for(c);
            assert!(p.iter().all(|v| v.is_finite() && *v > 0.0));
            assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn the_cache_refits_after_a_day_or_when_postings_double() {
        let (counts, _) = population(200, 10, 5);
        let cfg = MixtureConfig::default();
        let mut cache = ShapeCache::default();
        assert!(cache.mixture(&counts, 0, &cfg).is_some());
        let first = cache.fitted_at_ms;
        // An hour later, same data: kept.
        cache.mixture(&counts, 3_600_000, &cfg);
        assert_eq!(cache.fitted_at_ms, first);
        // Twice the postings: refitted.
        let doubled: Vec<_> = counts.iter().map(|c| c.map(|v| v * 2.5)).collect();
        cache.mixture(&doubled, 7_200_000, &cfg);
        assert_eq!(cache.fitted_at_ms, Some(7_200_000));
        // A day later: refitted.
        cache.mixture(&doubled, 7_200_000 + DAY_MS, &cfg);
        assert_eq!(cache.fitted_at_ms, Some(7_200_000 + DAY_MS));
        // Turned off: nothing.
        let off = MixtureConfig { shapes: 0, ..cfg };
        assert!(cache.mixture(&doubled, 8_000_000 + DAY_MS, &off).is_none());
    }
}
