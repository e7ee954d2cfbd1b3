//! At which minute, among nearly equal ones, each feed is fetched.
//!
//! The exact solver gives feeds with the same model the same times: every feed that has
//! posted nothing yet is planned from one prior, so on `real-commits` at four fetches a
//! day 284 of 922 feeds were all due at 01:01 and 16:46, 290 fetches in one minute where
//! the plan's mean is 2.6 (docs/PLANNER.md, "Feeds due at the same minute"). At a million
//! feeds such a pile is hundreds of thousands of fetches at once: workers fall behind, the
//! pile's fetches run late, and hosts see the crowd. Feeds with a model of their own pile
//! up less, but hourly bins put many optima at the same minutes too.
//!
//! A schedule's cost moves little when the whole schedule is rotated by a few minutes near
//! its optimum (its first order is zero there), so each feed's schedule is rotated by an
//! offset drawn from its index within the rotations that cost at most [`WITHIN`] more than
//! the optimum under its own model (for a feed fetched every few days, more than the part
//! of its cost its time of day decides). A flat model (the same at every hour) costs the same at
//! every rotation and is spread over its whole gap. A feed whose times matter (a peak, a
//! narrow busy hour, a feed on a timer) has a narrow range and keeps its times within a
//! slot or two. The offset depends only on the feed's index and its model, so replans move
//! a feed only when its model moves it.

use super::cost::CostTable;
use super::planner::{is_flat, phase, table_for, FeedModel, FeedPlan, PlanConfig, Scratch};

/// The most a rotation may add to a feed's expected cost under its model, as a share of
/// its optimum.
pub const WITHIN: f64 = 0.002;

/// The cost of `slots` (sorted, in `[0, n)`) rotated by `r` slots (either way), or of its
/// single boundary fetched once every `k` periods.
fn rotated_cost(table: &CostTable, slots: &[u32], k: u32, r: i64) -> f64 {
    let n = table.n() as i64;
    let at = |s: u32| (s as i64 + r).rem_euclid(n) as usize;
    if k > 1 {
        return table.multi_period_cost(at(slots[0]), k);
    }
    within_period(table, slots, r)
}

/// The cost of one period of `slots` rotated by `r`: for a feed fetched every `k > 1`
/// periods, the part of its cost its time of day decides (the rest, the whole periods its
/// postings wait, is the same at every time), so its bound is not loosened by that rest
/// (a fetch every three days could otherwise move by hours).
fn within_period(table: &CostTable, slots: &[u32], r: i64) -> f64 {
    let n = table.n() as i64;
    let at = |s: u32| (s as i64 + r).rem_euclid(n) as usize;
    let m = slots.len();
    (0..m)
        .map(|i| {
            let a = slots[i];
            let len = if i + 1 < m {
                (slots[i + 1] - a) as usize
            } else {
                (slots[0] as i64 + n - a as i64) as usize
            };
            let from = at(a);
            table.cost(from, from + len)
        })
        .sum()
}

/// The rotations `[-down, up]` (slots) whose cost over one period is within [`WITHIN`] of
/// the unrotated optimum's, searched outward up to `reach` slots each way.
fn range(table: &CostTable, slots: &[u32], reach: i64) -> (i64, i64) {
    let best = within_period(table, slots, 0);
    let bound = best * (1.0 + WITHIN) + 1e-12 * best.abs().max(1.0);
    let outward = |step: i64| {
        (1..=reach)
            .take_while(|&r| within_period(table, slots, step * r) <= bound)
            .last()
            .unwrap_or(0)
    };
    (outward(-1), outward(1))
}

/// The feed's place in `[0, 1)` within its range, from its index.
fn share(index: usize) -> f64 {
    const STEPS: usize = 1 << 20;
    phase(index.wrapping_mul(7919), STEPS) as f64 / STEPS as f64
}

/// `plan` (the feed's optimal schedule under `feed`) rotated by the feed's offset within
/// its range; its expected cost is the rotated schedule's.
pub(super) fn rotate(
    plan: FeedPlan,
    feed: &FeedModel,
    index: usize,
    cfg: &PlanConfig,
    s: &mut Scratch,
) -> FeedPlan {
    let n = cfg.slots;
    let m = plan.slots.len();
    if m == 0 || n == 0 || m >= n {
        return plan;
    }
    // Half the mean gap each way: past it the schedule would be another one's rotation.
    let reach = (n / (2 * m)) as i64;
    if is_flat(feed) {
        let r = (share(index) * (2 * reach) as f64).round() as i64 - reach;
        return shifted(plan, r, n, None);
    }
    let table = table_for(feed, index, cfg, s);
    let (down, up) = range(&table, &plan.slots, reach);
    let out = if down + up == 0 {
        plan
    } else {
        // The same share of the range from one replan to the next: a range that grows or
        // shrinks by a slot moves the feed by a slot, not anywhere in it.
        let r = (share(index) * (down + up) as f64).round() as i64 - down;
        let cost = rotated_cost(&table, &plan.slots, plan.period_multiple, r);
        let k = plan.period_multiple;
        let rotated: Vec<u32> = plan
            .slots
            .iter()
            .map(|&x| (x as i64 + r).rem_euclid(n as i64) as u32)
            .collect();
        // Rotated within the priced optimum; reported without the days' prices.
        let unpriced = (cost - table.price_of(&rotated, k)).max(0.0);
        shifted(plan, r, n, Some(feed.weight * unpriced))
    };
    s.keep_table(table);
    out
}

/// `plan` rotated by `r` slots, with its expected cost replaced when given.
fn shifted(mut plan: FeedPlan, r: i64, n: usize, cost: Option<f64>) -> FeedPlan {
    for x in plan.slots.iter_mut() {
        *x = (*x as i64 + r).rem_euclid(n as i64) as u32;
    }
    plan.slots.sort_unstable();
    if let Some(c) = cost {
        plan.expected_cost = c;
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::alloc::Level;
    use crate::plan::fixtures::{delay_cfg, hourly_feed};
    use crate::plan::pattern::Smoothing;

    fn cfg(smoothing: Smoothing) -> PlanConfig {
        delay_cfg(288, smoothing)
    }

    fn feed(bins: Vec<f32>) -> FeedModel {
        hourly_feed(bins, 1.0)
    }

    fn best_plan(f: &FeedModel, cfg: &PlanConfig, m: usize, s: &mut Scratch) -> FeedPlan {
        let table = table_for(f, 0, cfg, s);
        let sch = s.solver.solve(&table, m);
        FeedPlan {
            level: m as Level,
            slots: sch.slots,
            period_multiple: 1,
            phase_period: 0,
            expected_cost: f.weight * sch.cost,
        }
    }

    #[test]
    fn same_models_spread_within_the_bound() {
        let cfg = cfg(Smoothing::Linear);
        // A smooth day, busier in the afternoon: many rotations cost nearly the optimum.
        let bins: Vec<f32> = (0..24)
            .map(|h| 1.0 + 0.5 * (std::f32::consts::TAU * (h as f32 - 15.0) / 24.0).cos())
            .collect();
        let f = feed(bins);
        let mut s = Scratch::default();
        let best = best_plan(&f, &cfg, 2, &mut s);
        let mut firsts = std::collections::BTreeSet::new();
        for i in 0..200 {
            let p = rotate(best.clone(), &f, i, &cfg, &mut s);
            let table = table_for(&f, 0, &cfg, &mut s);
            let cost = table.schedule_cost(&p.slots);
            assert!(
                cost <= best.expected_cost * (1.0 + WITHIN) + 1e-9,
                "{i}: {cost}"
            );
            assert!((p.expected_cost - cost).abs() <= 1e-9 * cost);
            assert_eq!(p.slots.len(), 2);
            firsts.insert(p.slots[0]);
        }
        // Two hundred feeds of one model no longer share one slot.
        assert!(firsts.len() >= 5, "{firsts:?}");
    }

    #[test]
    fn a_sharp_peak_keeps_its_times() {
        let cfg = cfg(Smoothing::Step);
        let mut bins = vec![0.01f32; 24];
        bins[9] = 20.0;
        let f = feed(bins);
        let mut s = Scratch::default();
        let best = best_plan(&f, &cfg, 1, &mut s);
        for i in 0..50 {
            let p = rotate(best.clone(), &f, i, &cfg, &mut s);
            // Right after the busy hour: a slot later costs 5 minutes of its postings.
            assert_eq!(p.slots, best.slots, "{i}");
        }
    }

    #[test]
    fn a_feed_fetched_every_few_days_is_held_to_its_time_of_day() {
        let cfg = cfg(Smoothing::Linear);
        let bins: Vec<f32> = (0..24)
            .map(|h| {
                0.05 + 0.1
                    * (std::f32::consts::TAU * (h as f32 - 9.0) / 24.0)
                        .cos()
                        .max(0.0)
            })
            .collect();
        let f = feed(bins);
        let mut s = Scratch::default();
        let table = table_for(&f, 0, &cfg, &mut s);
        let (a, cost) = table.best_multi_period(3);
        let best = FeedPlan {
            level: -3,
            slots: vec![a as u32],
            period_multiple: 3,
            phase_period: 0,
            expected_cost: cost,
        };
        let one_period = table.cost(a, a + cfg.slots);
        let mut moved = 0;
        for i in 0..100 {
            let p = rotate(best.clone(), &f, i, &cfg, &mut s);
            let table = table_for(&f, 0, &cfg, &mut s);
            let b = p.slots[0] as usize;
            // Bounded by the part its time of day decides, not by three days' waiting.
            assert!(table.cost(b, b + cfg.slots) <= one_period * (1.0 + WITHIN) + 1e-9);
            assert!((p.expected_cost - table.multi_period_cost(b, 3)).abs() <= 1e-9 * cost);
            moved += usize::from(b != a);
        }
        assert!(moved > 0);
    }

    #[test]
    fn flat_models_spread_over_the_gap() {
        let cfg = cfg(Smoothing::Linear);
        let f = feed(vec![1.0; 24]);
        let mut s = Scratch::default();
        let best = best_plan(&f, &cfg, 4, &mut s);
        let firsts: std::collections::BTreeSet<u32> = (0..300)
            .map(|i| rotate(best.clone(), &f, i, &cfg, &mut s).slots[0])
            .collect();
        assert!(firsts.len() > 40, "{}", firsts.len());
    }
}
