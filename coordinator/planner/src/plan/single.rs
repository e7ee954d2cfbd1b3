//! One feed re-solved between full solves, at the prices of the last one.
//!
//! The full allocation is separable once priced (`price`): at the budget's price
//! `μ` (and its host's own price `π_h` where a host cap bound) every feed takes the level
//! minimizing `D_f(L) + max(μ, π_h) · rate(L)` on its own. So when one feed's model changes
//! — a fetch found a burst, a quiet feed woke up — its new level at the same prices is the
//! level the next full solve would give it, up to how far one feed moves the prices (a
//! millionth of the budget at a million feeds). The other feeds keep their plans; what the
//! change adds to or frees from the budget is settled by the next full solve.
//!
//! The walk is the pricing's walk on exact curve points, evaluated as it goes: a changed
//! feed's curve is not known at all, and only the few levels around its new optimum are
//! solved.

use super::alloc::{level_rate, Level};
use super::exchange::CurveCache;
use super::planner::{exact_points, feed_plan, FeedModel, FeedPlan, PlanConfig, Scratch};
use super::price::walk;

/// Levels one walk may solve before it stops where it is: a feed's optimum moves a few
/// levels when its model changes, never hundreds, and the cap bounds the work of a
/// pathological curve.
const MAX_EVALUATIONS: usize = 96;

/// What [`resolve_one`] chose.
#[derive(Clone, Debug, PartialEq)]
pub struct Single {
    /// The feed's new plan (level, times, expected cost).
    pub plan: FeedPlan,
    /// Levels whose exact schedule the walk solved.
    pub evaluations: usize,
}

/// Re-solves one feed at `price` (the budget's, or its host's where higher), walking from
/// its previous level `from` within `[feed.min_level, top]` (`top` ≤ `feed.max_level`:
/// the host cap's bound on one feed, where one applies). `index` spreads a flat model's
/// times as the full solve does for the feed in that position.
pub fn resolve_one(
    feed: &FeedModel,
    cfg: &PlanConfig,
    price: f64,
    from: Level,
    top: Level,
    index: usize,
) -> Single {
    let min = feed.min_level;
    let top = top.min(feed.max_level).max(min);
    let mut cache = CurveCache::new();
    let mut s = Scratch::default();
    let mut evaluations = 0;
    let mut at = from.clamp(min, top);
    let level = loop {
        let (level, stopped) = walk(&cache, min, top, at, price);
        at = level;
        let Some(l) = stopped else { break level };
        if evaluations >= MAX_EVALUATIONS {
            break level;
        }
        let want: Vec<Level> = [l - 1, l, l + 1]
            .into_iter()
            .filter(|&x| x >= min && x <= top && cache.get(x).is_none())
            .collect();
        evaluations += want.len();
        for (x, p) in want
            .iter()
            .zip(exact_points(feed, index, cfg, &want, &mut s))
        {
            cache.set(*x, p);
        }
    };
    let plan = match cache.get(level) {
        Some(p) => feed_plan(index, level, p.slots.to_vec(), p.delay),
        None => {
            evaluations += 1;
            let p = exact_points(feed, index, cfg, &[level], &mut s)
                .pop()
                .expect("one point per level asked");
            feed_plan(index, level, p.slots.to_vec(), p.delay)
        }
    };
    let plan = super::jitter::rotate(plan, feed, index, cfg, &mut s);
    Single { plan, evaluations }
}

/// The change in fetches per period from `from` to `to`.
pub fn rate_change(from: Level, to: Level) -> f64 {
    level_rate(to) - level_rate(from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::alloc::{ceil_level, HostCaps};
    use crate::plan::cost::Metric;
    use crate::plan::pattern::Smoothing;
    use crate::plan::planner::{level_costs, solve_optimal_with_state, Policy, Scheduler};

    fn cfg(budget: f64) -> PlanConfig {
        PlanConfig {
            metric: Metric::Delay,
            policy: Policy::Optimal,
            scheduler: Scheduler::Exact,
            slots: 96,
            period_seconds: 86_400.0,
            budget,
            host_caps: HostCaps::uniform(None),
            smoothing: Smoothing::Linear,
            day_prices: Default::default(),
            slot_capacity: None,
        }
    }

    /// A feed posting `rate` a day, peaked around `peak` o'clock.
    fn feed(rate: f64, peak: usize) -> FeedModel {
        let w: Vec<f64> = (0..24)
            .map(|h| {
                let d = (h as i64 - peak as i64)
                    .rem_euclid(24)
                    .min((peak as i64 - h as i64).rem_euclid(24));
                (-(d * d) as f64 / 8.0).exp() + 0.05
            })
            .collect();
        let sum: f64 = w.iter().sum();
        FeedModel {
            weight: 1.0,
            post_bins: w.iter().map(|x| (rate * x / sum) as f32).collect(),
            peaks: Vec::new(),
            access_bins: vec![0.0; 24],
            min_level: ceil_level(1.0 / 7.0),
            max_level: 96,
            host: None,
            document: None,
        }
    }

    fn population() -> Vec<FeedModel> {
        (0..40)
            .map(|i| feed(0.05 + (i as f64 * 0.37) % 6.0, (i * 5) % 24))
            .collect()
    }

    #[test]
    fn an_unchanged_feed_keeps_the_level_the_full_solve_gave_it() {
        let feeds = population();
        let cfg = cfg(80.0);
        let state = solve_optimal_with_state(&feeds, &cfg).unwrap();
        let price = state.prices().for_host(None).expect("a priced plan");
        let mut same = 0;
        for (i, f) in feeds.iter().enumerate() {
            let old = &state.plan().feeds[i];
            // From a level away from its own, so the walk has to find it.
            let start = (old.level + 3).min(f.max_level);
            let one = resolve_one(f, &cfg, price, start, f.max_level, i);
            same += (one.plan.level == old.level) as usize;
            assert!(
                (one.plan.level - old.level).abs() <= 1,
                "feed {i}: {} against {}",
                one.plan.level,
                old.level
            );
        }
        // The exchange polishes after the pricing, so a few feeds sit one step away.
        assert!(same >= 36, "{same} of 40 at the full solve's level");
    }

    #[test]
    fn the_level_minimizes_cost_plus_price_over_every_level_by_brute_force() {
        let cfg = cfg(80.0);
        for (rate, price) in [(0.3, 400.0), (3.0, 400.0), (3.0, 40.0), (12.0, 4_000.0)] {
            let f = feed(rate, 9);
            let levels: Vec<Level> = (f.min_level..=f.max_level).collect();
            let costs = level_costs(&f, &cfg, &levels);
            let best = levels
                .iter()
                .zip(&costs)
                .map(|(&l, &c)| (l, c + price * level_rate(l)))
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap();
            for from in [f.min_level, 4, 40] {
                let one = resolve_one(&f, &cfg, price, from, f.max_level, 0);
                let got = costs[(one.plan.level - f.min_level) as usize]
                    + price * level_rate(one.plan.level);
                assert!(
                    got <= best.1 * (1.0 + 1e-9),
                    "rate {rate}, price {price}, from {from}: level {} ({got}) against {} ({})",
                    one.plan.level,
                    best.0,
                    best.1
                );
                assert!(
                    one.evaluations <= MAX_EVALUATIONS,
                    "{} solves",
                    one.evaluations
                );
            }
            // From its optimum, the walk only checks the neighbours.
            let near = resolve_one(&f, &cfg, price, best.0, f.max_level, 0);
            assert_eq!(near.plan.level, best.0);
            assert!(near.evaluations <= 3, "{} solves", near.evaluations);
        }
    }

    #[test]
    fn a_busier_model_at_the_same_price_takes_more_fetches_and_the_cap_bounds_it() {
        let feeds = population();
        let cfg = cfg(80.0);
        let state = solve_optimal_with_state(&feeds, &cfg).unwrap();
        let price = state.prices().for_host(None).unwrap();
        let i = 3;
        let old = state.plan().feeds[i].level;
        let mut busy = feeds[i].clone();
        for b in busy.post_bins.iter_mut() {
            *b *= 8.0;
        }
        let up = resolve_one(&busy, &cfg, price, old, busy.max_level, i);
        assert!(up.plan.level > old, "{} against {old}", up.plan.level);
        let capped = resolve_one(&busy, &cfg, price, old, old, i);
        assert_eq!(capped.plan.level, old);
        assert!(rate_change(old, up.plan.level) > 0.0);
    }
}
