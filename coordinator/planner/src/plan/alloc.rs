//! Splitting a budget of `M` fetches per period across feeds.
//!
//! A feed's fetch frequency is a [`Level`]: `L ≥ 1` is `L` fetches per period, `L ≤ 0` is one
//! fetch every `2 − L` periods (so quiet feeds can drop below once a period, down to a
//! floor). Three allocators:
//!
//! * [`Allocator::uniform`] — every feed the same rate;
//! * [`Allocator::closed_form`] — rate ∝ a per-feed score: `√(w λ)` for `delay` (TKDE
//!   Theorem 1), `√(w λ_p λ_c)` for `miss`, `∛(w λ_p λ_c)` for `access-delay` (He & Parker);
//!   each is the optimum when rates are constant over the period;
//! * [`Allocator::optimal`] — the exact joint optimum on the feeds' exact cost curves
//!   `D_f(L)`, by greedy exchange from the proportional start of the feeds' scores (the
//!   planner gives it a start score for `delay` that accounts for the rate profile): move one
//!   step of budget from the feed that loses least to the feed that gains most while that
//!   lowers the total.
//!
//! For curves convex in the rate, a state where no single exchange helps is the global
//! optimum of the separable problem (the classic marginal-allocation argument), and with
//! whole-fetch levels the allocation sums to exactly `M`. Convexity is checked on every
//! pair of neighbouring steps the search evaluates; feeds where it fails are counted in
//! [`AllocStats::nonconvex_feeds`], and the result is then a local optimum (no single
//! exchange improves it), reported as such rather than claimed optimal. Sub-period levels
//! have unequal steps (½ − ⅓ ≠ 1); with them the final leftover can be less than one step,
//! so the allocation then sums to at most `M`.
//!
//! Constraints: per-feed minimum and maximum level, and an optional cap on the summed rate
//! of the feeds of one host (politeness).

use super::exchange::{CurveCache, CurvePoint};
use std::cmp::Ordering;

/// A fetch frequency: `L ≥ 1` fetches per period, or one fetch every `2 − L` periods.
pub type Level = i32;

/// Fetches per period at a level.
pub fn level_rate(l: Level) -> f64 {
    if l >= 1 {
        l as f64
    } else {
        1.0 / (2 - l) as f64
    }
}

/// Periods between fetches for a sub-period level (`1` for `L ≥ 1`).
pub fn level_period_multiple(l: Level) -> u32 {
    if l >= 1 {
        1
    } else {
        (2 - l) as u32
    }
}

/// The largest level whose rate is at most `rate` (+ a tolerance), never below `floor`.
pub fn floor_level(rate: f64, floor: Level) -> Level {
    let eps = 1e-9;
    let l = if rate >= 1.0 - eps {
        (rate + eps).floor() as Level
    } else if rate <= 0.0 {
        floor
    } else {
        // 1/k ≤ rate  ⇔  k ≥ 1/rate.
        let k = (1.0 / rate - eps).ceil() as Level;
        2 - k
    };
    l.max(floor)
}

/// The smallest level whose rate is at least `rate`.
pub fn ceil_level(rate: f64) -> Level {
    let eps = 1e-9;
    if rate > 1.0 + eps {
        (rate - eps).ceil() as Level
    } else if rate > eps {
        let k = (1.0 / rate + eps).floor() as Level;
        2 - k.max(1)
    } else {
        Level::MIN / 2
    }
}

/// Drops every raised minimum (those above `base`) to `base` when all minimums together
/// need more than `budget` fetches per period; returns how many were dropped.
///
/// All or none: lowering every raised minimum by the same share until they fit was
/// measured (docs/EXPERIMENTS.md, "The offline reference's document floors, and floors that
/// do not fit", 2026-12-01) and not kept.
/// It keeps more postings from scrolling off but pins the whole budget to the floors: at
/// half a fetch a day it cost `bursts`, `drift` and `mixed` 21–53% of their delay.
pub fn drop_raised_minimums_unless_they_fit(mins: &mut [Level], base: Level, budget: f64) -> usize {
    let total: f64 = mins.iter().map(|&l| level_rate(l)).sum();
    if total <= budget + 1e-9 {
        return 0;
    }
    let mut dropped = 0;
    for l in mins.iter_mut().filter(|l| **l > base) {
        *l = base;
        dropped += 1;
    }
    dropped
}

/// Per-feed inputs of the allocation.
#[derive(Clone, Debug)]
pub struct AllocFeed {
    /// Closed-form score (rate ∝ score); ignored by the uniform allocator.
    pub score: f64,
    /// Lowest allowed level.
    pub min: Level,
    /// Highest allowed level (≥ `min`).
    pub max: Level,
    /// Politeness group, for the per-host cap.
    pub host: Option<u32>,
}

/// A feed's distance below its continuous target, ordered largest first (ties: lower
/// feed index first).
struct Shortfall {
    gap: f64,
    feed: usize,
}

impl PartialEq for Shortfall {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Shortfall {}
impl PartialOrd for Shortfall {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Shortfall {
    fn cmp(&self, other: &Self) -> Ordering {
        self.gap
            .total_cmp(&other.gap)
            .then_with(|| other.feed.cmp(&self.feed))
    }
}

/// Why an allocation cannot be made.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum AllocError {
    /// The minimum levels alone need more than the budget.
    #[error(
        "budget of {budget} fetches per period is below the {needed:.3} the per-feed minimums need"
    )]
    BudgetBelowMinimums { budget: f64, needed: f64 },
    /// A host's minimum levels alone exceed the host cap.
    #[error("host {host}: the per-feed minimums need {needed:.3} fetches per period, above the host cap {cap}")]
    HostCapBelowMinimums { host: u32, needed: f64, cap: f64 },
}

/// What the optimal allocator saw.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct AllocStats {
    /// Cost-curve evaluations (exact solves) made.
    pub evaluations: usize,
    /// Budget moves made by the exchange after the closed-form start.
    pub exchanges: usize,
    /// Feeds whose evaluated curve is not convex somewhere.
    pub nonconvex_feeds: usize,
}

/// Caps on the summed fetch rate per period of the feeds of one host: a default for every
/// host and overrides for some (a host that asked us to slow down, an operator's setting).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostCaps {
    /// Cap of hosts without an override; `None` leaves them uncapped.
    pub default: Option<f64>,
    /// Per-host caps, by politeness group.
    pub per_host: std::collections::HashMap<u32, f64>,
}

impl HostCaps {
    /// One cap for every host.
    pub fn uniform(cap: Option<f64>) -> Self {
        HostCaps {
            default: cap,
            per_host: Default::default(),
        }
    }

    /// The cap of `host`, if any.
    pub fn cap(&self, host: u32) -> Option<f64> {
        self.per_host.get(&host).copied().or(self.default)
    }
}

/// Allocation problem: feeds, a budget in fetches per period, per-host caps.
pub struct Allocator<'a> {
    pub(crate) feeds: &'a [AllocFeed],
    pub(crate) budget: f64,
    pub(crate) host_caps: HostCaps,
}

/// Tolerance on rates and relative cost comparisons.
pub(crate) const EPS: f64 = 1e-9;

impl<'a> Allocator<'a> {
    /// Checks feasibility of the minimums against the budget and the host caps.
    pub fn new(
        feeds: &'a [AllocFeed],
        budget: f64,
        host_caps: HostCaps,
    ) -> Result<Self, AllocError> {
        let needed: f64 = feeds.iter().map(|f| level_rate(f.min)).sum();
        if needed > budget + EPS {
            return Err(AllocError::BudgetBelowMinimums { budget, needed });
        }
        let mut per_host: std::collections::BTreeMap<u32, f64> = Default::default();
        for f in feeds {
            if let Some(h) = f.host {
                *per_host.entry(h).or_default() += level_rate(f.min);
            }
        }
        for (&host, &needed) in &per_host {
            if let Some(cap) = host_caps.cap(host) {
                if needed > cap + EPS {
                    return Err(AllocError::HostCapBelowMinimums { host, needed, cap });
                }
            }
        }
        Ok(Allocator {
            feeds,
            budget,
            host_caps,
        })
    }

    /// Every feed the same rate (as far as bounds, caps and rounding allow).
    pub fn uniform(&self) -> Vec<Level> {
        let scores = vec![1.0; self.feeds.len()];
        self.proportional(&scores)
    }

    /// Whether `levels` spend at most the budget and each host's cap.
    pub(crate) fn fits(&self, levels: &[Level]) -> bool {
        let used: f64 = levels.iter().map(|&l| level_rate(l)).sum();
        used <= self.budget + EPS
            && self
                .host_usage(levels)
                .iter()
                .all(|(&h, &r)| self.host_caps.cap(h).is_none_or(|c| r <= c + EPS))
    }

    /// Rate proportional to each feed's `score`.
    pub fn closed_form(&self) -> Vec<Level> {
        let scores: Vec<f64> = self.feeds.iter().map(|f| f.score.max(0.0)).collect();
        self.proportional(&scores)
    }

    /// Continuous water-filling `x_f = clamp(k·s_f, min_f, max_f)` with `Σ x_f = M`, then
    /// rounded down to levels and topped up by largest shortfall.
    fn proportional(&self, scores: &[f64]) -> Vec<Level> {
        let lo: Vec<f64> = self.feeds.iter().map(|f| level_rate(f.min)).collect();
        let hi: Vec<f64> = self.feeds.iter().map(|f| level_rate(f.max)).collect();
        let total = |k: f64| -> f64 {
            (0..self.feeds.len())
                .map(|i| (k * scores[i]).clamp(lo[i], hi[i]))
                .sum()
        };
        let (mut a, mut b) = (0.0f64, 1.0f64);
        while total(b) < self.budget && b < 1e300 {
            b *= 2.0;
        }
        for _ in 0..200 {
            let mid = (a + b) / 2.0;
            if total(mid) < self.budget {
                a = mid;
            } else {
                b = mid;
            }
        }
        let target: Vec<f64> = (0..self.feeds.len())
            .map(|i| (b * scores[i]).clamp(lo[i], hi[i]))
            .collect();
        let mut levels: Vec<Level> = self
            .feeds
            .iter()
            .zip(&target)
            .map(|(f, &x)| floor_level(x, f.min).min(f.max))
            .collect();
        self.enforce_host_cap(&mut levels, |i| target[i]);
        // Top up: feeds furthest below their target first, while the step fits. A step that
        // does not fit now never will (usage only grows), so such a feed leaves the heap.
        let mut used: f64 = levels.iter().map(|&l| level_rate(l)).sum();
        let mut host_used = self.host_usage(&levels);
        let shortfall = |i: usize, l: Level| Shortfall {
            gap: target[i] - level_rate(l),
            feed: i,
        };
        let mut heap: std::collections::BinaryHeap<Shortfall> = (0..levels.len())
            .filter(|&i| levels[i] < self.feeds[i].max)
            .map(|i| shortfall(i, levels[i]))
            .collect();
        while let Some(Shortfall { feed: i, .. }) = heap.pop() {
            let l = levels[i];
            let step = level_rate(l + 1) - level_rate(l);
            if used + step > self.budget + EPS || !self.host_fits(&host_used, i, step) {
                continue;
            }
            levels[i] = l + 1;
            used += step;
            if let Some(h) = self.feeds[i].host {
                *host_used.entry(h).or_default() += step;
            }
            if l + 1 < self.feeds[i].max {
                heap.push(shortfall(i, l + 1));
            }
        }
        levels
    }

    pub(crate) fn host_usage(&self, levels: &[Level]) -> std::collections::HashMap<u32, f64> {
        let mut m = std::collections::HashMap::new();
        for (f, &l) in self.feeds.iter().zip(levels) {
            if let Some(h) = f.host {
                *m.entry(h).or_insert(0.0) += level_rate(l);
            }
        }
        m
    }

    pub(crate) fn host_fits(
        &self,
        used: &std::collections::HashMap<u32, f64>,
        i: usize,
        step: f64,
    ) -> bool {
        match self.feeds[i]
            .host
            .and_then(|h| Some((h, self.host_caps.cap(h)?)))
        {
            Some((h, cap)) => used.get(&h).copied().unwrap_or(0.0) + step <= cap + EPS,
            None => true,
        }
    }

    /// Lowers levels on hosts above the cap, taking first from the feed whose level is
    /// furthest above `want(i)`. Feasible by the check in [`Allocator::new`].
    fn enforce_host_cap(&self, levels: &mut [Level], want: impl Fn(usize) -> f64) {
        let mut by_host: std::collections::BTreeMap<u32, Vec<usize>> = Default::default();
        for (i, f) in self.feeds.iter().enumerate() {
            if let Some(h) = f.host {
                by_host.entry(h).or_default().push(i);
            }
        }
        for (&h, members) in &by_host {
            let Some(cap) = self.host_caps.cap(h) else {
                continue;
            };
            let mut used: f64 = members.iter().map(|&i| level_rate(levels[i])).sum();
            while used > cap + EPS {
                let pick = members
                    .iter()
                    .copied()
                    .filter(|&i| levels[i] > self.feeds[i].min)
                    .max_by(|&i, &j| {
                        let ei = level_rate(levels[i]) - want(i);
                        let ej = level_rate(levels[j]) - want(j);
                        ei.partial_cmp(&ej).unwrap_or(Ordering::Equal)
                    })
                    .expect("minimums fit under the cap");
                used -= level_rate(levels[pick]) - level_rate(levels[pick] - 1);
                levels[pick] -= 1;
            }
        }
    }

    /// The exact joint optimum on cost curves (`eval(feed, levels)` gives the weighted cost
    /// per period at each level): priced from the proportional start of the scores (`price`), then
    /// polished by the exchange ([`super::exchange`]).
    pub fn optimal<E>(&self, eval: E) -> (Vec<Level>, Vec<CurveCache>, AllocStats)
    where
        E: Fn(usize, &[Level]) -> Vec<CurvePoint> + Sync,
    {
        let start = self.closed_form();
        let mut caches: Vec<CurveCache> = (0..start.len()).map(|_| CurveCache::new()).collect();
        let result = self.solve_from(start, &mut caches, &eval);
        (result.levels, caches, result.stats)
    }

    /// The budget price's levels from `start`, then the exchange; `caches` keep (and gain)
    /// the known curve points, so incremental replans start from the previous allocation.
    ///
    /// The price finds the global optimum of convex curves across unequal sub-period steps
    /// that one-step exchanges cannot cross; on a curve that is not convex its walk can stop
    /// at a local minimum that an exchange from `start` passes. So when any evaluated curve
    /// shows a non-convex step, the exchange from `start` runs too and the cheaper wins. A
    /// start that does not fit the budget or a host's cap (a replan's previous plan, made
    /// for a budget since lowered) is replaced there by the proportional start: the
    /// exchange only moves budget between feeds, so from an overspending start it would end
    /// overspending, and its lower cost would win.
    pub fn solve_from<E>(
        &self,
        start: Vec<Level>,
        caches: &mut [CurveCache],
        eval: &E,
    ) -> super::exchange::ExchangeResult
    where
        E: Fn(usize, &[Level]) -> Vec<CurvePoint> + Sync,
    {
        let mut priced = self.priced(start.clone(), caches, eval);
        let mut best = self.exchange(std::mem::take(&mut priced.levels), caches, eval);
        best.stats.evaluations += priced.evaluations;
        let nonconvex = caches
            .iter_mut()
            .fold(false, |any, c| c.check_convex() | any);
        if nonconvex {
            let start = if self.fits(&start) {
                start
            } else {
                self.closed_form()
            };
            let from_start = self.exchange(start, caches, eval);
            let total = |levels: &[Level], caches: &[CurveCache]| -> f64 {
                levels
                    .iter()
                    .enumerate()
                    .map(|(i, &l)| caches[i].get(l).map_or(f64::INFINITY, |p| p.cost))
                    .sum()
            };
            let evaluations = best.stats.evaluations + from_start.stats.evaluations;
            if total(&from_start.levels, caches) < total(&best.levels, caches) {
                best = from_start;
            }
            best.stats.evaluations = evaluations;
        }
        best.stats.nonconvex_feeds = caches.iter().filter(|c| c.nonconvex).count();
        best.prices = priced.prices;
        best
    }
}
