//! Per-slot capacity: no slot of the period holds more planned fetches than the cluster
//! can start in it.
//!
//! The rotation of `jitter` spreads feeds whose times are nearly free, but a feed whose
//! times matter keeps them, so feeds that truly want one minute (a popular timer, a
//! thousand feeds of one publisher) still pile there, and a pile larger than the workers
//! can start in a slot runs late by however long the workers take to clear it: every
//! fetch in it pays, in an order nobody chose. This pass decides who pays instead. In
//! each slot above the capacity, the fetches whose cheapest move costs least leave until
//! the slot is within capacity; then the one among them that costs most to move takes
//! its best slot with room first, and so on down. A fetch's cost of moving is its feed's
//! weighted cost under the feed's own model (the exact solver's table, day prices
//! included), so a feed with a sharp busy hour stays and a flat or quiet one moves, and
//! of two feeds of one model the heavier keeps the nearer slot. It is a greedy, not the
//! optimal assignment: on small random crowds against every placement (the tests) it
//! finds the optimum in most cases and at worst adds under twice the optimum's cost,
//! because a fetch moves alone where the optimum would shift its feed's other fetches too.
//!
//! A slot's count is taken day by day ([`super::occupancy`]): a feed fetched once every
//! `k` days is counted on the days of its cycle it is fetched, so feeds of one cycle that
//! share a minute and a phase are seen as the pile they are on that day, not as a `k`-th
//! of it.
//!
//! Reach: a fetch moves only between its feed's neighbouring fetches (the schedule's
//! order and level stay), and at most half a period either way. Moves only go to slots
//! with room, so a slot once within capacity stays within it; slots are cleared from the
//! most crowded down. When the plan's fetches exceed the capacity of the whole period
//! there is no placement within it: the plan is levelled to the even load instead and
//! the shortfall reported, so the caller can refuse or show it.

use super::occupancy::Occupancy;
use super::planner::{table_for, FeedModel, FeedPlan, PlanConfig, Scratch};
use rayon::prelude::*;
use std::collections::HashMap;

/// Candidate slots kept per fetch between rescans of its reach.
const KEEP: usize = 16;

/// What levelling a plan against a per-slot capacity did.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CrowdStats {
    /// The capacity applied, fetches per slot (the configured one, or the even load when
    /// the configured one cannot hold the plan).
    pub capacity: f64,
    /// Slots above the capacity before the pass.
    pub crowded_slots: usize,
    /// The most fetches any slot held on any day, before and after.
    pub busiest_before: f64,
    /// See `busiest_before`.
    pub busiest_after: f64,
    /// Fetches moved to another slot.
    pub moved: usize,
    /// Fetches still above the capacity after the pass, summed over the slots' busiest
    /// days (none could move within reach).
    pub left_over: f64,
    /// Whether the plan holds more fetches a day than the capacity times the slots.
    pub infeasible: bool,
    /// Weighted expected cost the moves added, per period.
    pub added_cost: f64,
}

/// One fetch in a crowded slot: feed `feed`'s boundary at `slot`.
#[derive(Clone, Debug)]
struct Entry {
    feed: usize,
    slot: u32,
    /// Its cycle (`k`) and the day of it the fetch is made.
    k: u32,
    phase: u32,
    /// Best moves `(weighted added cost, target slot)`, cheapest first.
    moves: Vec<(f64, u32)>,
}

/// Slack for sums of counts.
const EPS: f64 = 1e-6;

/// Whether slot `t` has room, on every day it is made, for a fetch of cycle `k` at `phase`.
fn room(occ: &Occupancy, t: u32, k: u32, phase: u32, cap: f64) -> bool {
    occ.on_days(t as usize, k, phase) + 1.0 <= cap + EPS
}

/// Levels `plans` so that no slot holds more than `capacity` fetches on any day, moving the
/// fetches that cost least; their expected costs are updated (without the days' prices, as
/// the plan reports them).
pub(super) fn level(
    plans: &mut [FeedPlan],
    feeds: &[FeedModel],
    cfg: &PlanConfig,
    capacity: f64,
) -> CrowdStats {
    let n = cfg.slots;
    let mut occ = Occupancy::of(plans, n);
    let busiest_before = occ.busiest_slot();
    let mean = occ.mean_per_day();
    let infeasible = mean > capacity * n as f64 + EPS;
    // The even load in whole fetches: a fraction of a fetch cannot be placed.
    let cap = if infeasible {
        (mean / n as f64 - EPS).ceil()
    } else {
        capacity
    };
    let mut stats = CrowdStats {
        capacity: cap,
        busiest_before,
        busiest_after: busiest_before,
        infeasible,
        ..Default::default()
    };
    let mut crowded: Vec<usize> = (0..n).filter(|&x| occ.busiest(x) > cap + EPS).collect();
    stats.crowded_slots = crowded.len();
    if crowded.is_empty() || n < 2 {
        return stats;
    }
    // Most crowded first; ties by slot.
    crowded.sort_by(|&a, &b| occ.busiest(b).total_cmp(&occ.busiest(a)).then(a.cmp(&b)));
    let mut at: HashMap<u32, Vec<usize>> = crowded.iter().map(|&x| (x as u32, vec![])).collect();
    for (i, p) in plans.iter().enumerate() {
        for &x in &p.slots {
            if let Some(v) = at.get_mut(&x) {
                v.push(i);
            }
        }
    }
    let mut moved_feeds = Vec::new();
    let mut scratch = Scratch::default();
    for &slot in &crowded {
        let s = slot as u32;
        let feeds_here = at.remove(&s).unwrap_or_default();
        let snapshot = &occ;
        let mut entries: Vec<Entry> = feeds_here
            .par_iter()
            .map_init(Scratch::default, |scratch, &i| {
                let (k, phase) = (plans[i].period_multiple.max(1), plans[i].phase_period);
                let moves = best_moves(&plans[i], &feeds[i], i, s, cfg, scratch, |t| {
                    room(snapshot, t, k, phase, cap)
                });
                Entry {
                    feed: i,
                    slot: s,
                    k,
                    phase,
                    moves,
                }
            })
            .collect();
        // Who moves: the fetches whose best move costs least per unit of room (a fetch
        // every k days frees a k-th of what a daily one does), each only while it is made
        // on a day the slot is over, until the slot is within capacity on every day.
        let key = |en: &Entry| {
            en.moves
                .first()
                .map_or(f64::INFINITY, |m| m.0 * f64::from(en.k))
        };
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_by(|&a, &b| {
            key(&entries[a])
                .total_cmp(&key(&entries[b]))
                .then(entries[a].feed.cmp(&entries[b].feed))
        });
        let over = |occ: &Occupancy, en: &Entry| occ.on_days(slot, en.k, en.phase) > cap + EPS;
        let mut movers = Vec::new();
        let mut next = 0;
        while next < order.len() && occ.busiest(slot) > cap + EPS {
            let en = &entries[order[next]];
            next += 1;
            if over(&occ, en) {
                occ.add(slot, en.k, en.phase, -1.0);
                movers.push(order[next - 1]);
            }
        }
        for &e in &movers {
            occ.add(slot, entries[e].k, entries[e].phase, 1.0);
        }
        // Where: the mover that costs most to move chooses first. Cheapest first would
        // hand the best free slot to the fetch that needs it least (two feeds of one
        // model, one heavy and one light, would go the heavy one far and the light one
        // near). A mover that finds no room stays, and the next cheapest is taken.
        movers.reverse();
        let mut queue: std::collections::VecDeque<usize> = movers.into();
        while occ.busiest(slot) > cap + EPS {
            let e = match queue.pop_front() {
                Some(e) => e,
                None if next < order.len() => {
                    next += 1;
                    order[next - 1]
                }
                None => break,
            };
            let en = &mut entries[e];
            if !over(&occ, en) {
                continue;
            }
            let mut target = en
                .moves
                .iter()
                .find(|&&(_, t)| room(&occ, t, en.k, en.phase, cap))
                .map(|&(_, t)| t);
            if target.is_none() {
                // Every kept candidate filled since: scan the reach again.
                let snapshot = &occ;
                let (k, phase) = (en.k, en.phase);
                en.moves = best_moves(
                    &plans[en.feed],
                    &feeds[en.feed],
                    en.feed,
                    en.slot,
                    cfg,
                    &mut scratch,
                    |t| room(snapshot, t, k, phase, cap),
                );
                target = en.moves.first().map(|&(_, t)| t);
            }
            let Some(t) = target else { continue };
            let p = &mut plans[en.feed];
            if let Some(x) = p.slots.iter_mut().find(|x| **x == en.slot) {
                *x = t;
            }
            p.slots.sort_unstable();
            occ.add(slot, en.k, en.phase, -1.0);
            occ.add(t as usize, en.k, en.phase, 1.0);
            stats.moved += 1;
            moved_feeds.push(en.feed);
        }
        stats.left_over += (occ.busiest(slot) - cap).max(0.0);
    }
    moved_feeds.sort_unstable();
    moved_feeds.dedup();
    for i in moved_feeds {
        let before = plans[i].expected_cost;
        let after = unpriced_cost(&plans[i], &feeds[i], i, cfg, &mut scratch);
        plans[i].expected_cost = after;
        stats.added_cost += after - before;
    }
    stats.busiest_after = occ.busiest_slot();
    stats
}

/// Fits one re-solved feed's `plan` (an update between rounds) into `occupancy`, every
/// other feed's fetches per slot: each of its fetches in a slot without room for it moves
/// to the slot within reach that has room and costs the feed least (it stays where none
/// has). Returns the fetches moved; the plan's expected cost is updated when any moved.
pub fn fit_one(
    plan: &mut FeedPlan,
    feed: &FeedModel,
    index: usize,
    cfg: &PlanConfig,
    occupancy: &Occupancy,
    capacity: f64,
) -> usize {
    if occupancy.slots() != cfg.slots || cfg.slots < 2 {
        return 0;
    }
    let (k, phase) = (plan.period_multiple.max(1), plan.phase_period);
    let mut s = Scratch::default();
    let mut moved = 0;
    for x in plan.slots.clone() {
        if room(occupancy, x, k, phase, capacity) {
            continue;
        }
        let moves = best_moves(plan, feed, index, x, cfg, &mut s, |t| {
            room(occupancy, t, k, phase, capacity)
        });
        if let Some(&(_, t)) = moves.first() {
            if let Some(v) = plan.slots.iter_mut().find(|v| **v == x) {
                *v = t;
            }
            plan.slots.sort_unstable();
            moved += 1;
        }
    }
    if moved > 0 {
        plan.expected_cost = unpriced_cost(plan, feed, index, cfg, &mut s);
    }
    moved
}

/// The feed's weighted cost per period of `plan` under its model, without the days'
/// prices.
fn unpriced_cost(
    plan: &FeedPlan,
    feed: &FeedModel,
    index: usize,
    cfg: &PlanConfig,
    s: &mut Scratch,
) -> f64 {
    let table = table_for(feed, index, cfg, s);
    let k = plan.period_multiple.max(1);
    let priced = if k > 1 || plan.slots.len() == 1 {
        table.multi_period_cost(plan.slots[0] as usize, k)
    } else {
        table.schedule_cost(&plan.slots)
    };
    let out = feed.weight * (priced - table.price_of(&plan.slots, k)).max(0.0);
    s.keep_table(table);
    out
}

/// The [`KEEP`] cheapest slots within reach that `room` accepts for the fetch of `plan`
/// at `slot`, with the weighted cost each adds, cheapest first (ties: nearest, then
/// earliest).
fn best_moves(
    plan: &FeedPlan,
    feed: &FeedModel,
    index: usize,
    slot: u32,
    cfg: &PlanConfig,
    s: &mut Scratch,
    room: impl Fn(u32) -> bool,
) -> Vec<(f64, u32)> {
    let n = cfg.slots as i64;
    let m = plan.slots.len();
    let k = plan.period_multiple.max(1);
    let Some(j) = plan.slots.iter().position(|&x| x == slot) else {
        return Vec::new();
    };
    let table = table_for(feed, index, cfg, s);
    let wrap = |x: i64| x.rem_euclid(n) as usize;
    // Cost of the interval (a, b] in unwrapped slots, a < b <= a + n.
    let span = |a: i64, b: i64| table.cost(wrap(a), wrap(a) + (b - a) as usize);
    let x = slot as i64;
    let mut out: Vec<(f64, i64, u32)> = Vec::new();
    if m == 1 {
        let here = table.multi_period_cost(slot as usize, k);
        for r in 1..=n / 2 {
            for t in [x - r, x + r] {
                let tw = wrap(t) as u32;
                if tw == slot || !room(tw) {
                    continue;
                }
                let d = table.multi_period_cost(tw as usize, k) - here;
                out.push((feed.weight * d, r, tw));
            }
        }
    } else {
        // Neighbours in unwrapped slots around x: prev < x < next.
        let prev = plan.slots[(j + m - 1) % m] as i64;
        let next = plan.slots[(j + 1) % m] as i64;
        let prev = if prev < x { prev } else { prev - n };
        let next = if next > x { next } else { next + n };
        let here = span(prev, x) + span(x, next);
        let reach = n / 2;
        for t in (prev + 1).max(x - reach)..=(next - 1).min(x + reach) {
            if t == x {
                continue;
            }
            let tw = wrap(t) as u32;
            if !room(tw) {
                continue;
            }
            let d = span(prev, t) + span(t, next) - here;
            out.push((feed.weight * d, (t - x).abs(), tw));
        }
    }
    s.keep_table(table);
    let by = |a: &(f64, i64, u32), b: &(f64, i64, u32)| {
        a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2))
    };
    if out.len() > KEEP {
        out.select_nth_unstable_by(KEEP - 1, by);
        out.truncate(KEEP);
    }
    out.sort_by(by);
    out.into_iter().map(|(c, _, t)| (c, t)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::alloc::Level;
    use crate::plan::fixtures::{delay_cfg, hourly_feed};
    use crate::plan::pattern::Smoothing;
    use crate::plan::planner::{replan, solve_optimal_with_state};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn cfg(slots: usize, capacity: Option<f64>) -> PlanConfig {
        PlanConfig {
            slot_capacity: capacity,
            ..delay_cfg(slots, Smoothing::Step)
        }
    }

    fn feed(bins: Vec<f32>, weight: f64) -> FeedModel {
        hourly_feed(bins, weight)
    }

    /// A busy hour at `hour` over a quiet day.
    fn peaked(hour: usize, weight: f64) -> FeedModel {
        let mut bins = vec![0.05f32; 24];
        bins[hour] = 4.0;
        feed(bins, weight)
    }

    /// The feed's optimal schedule of `m` fetches a period (or one every `-m`).
    fn best(f: &FeedModel, i: usize, cfg: &PlanConfig, m: Level) -> FeedPlan {
        let mut s = Scratch::default();
        let table = table_for(f, i, cfg, &mut s);
        if m >= 1 {
            let sch = s.solver.solve(&table, m as usize);
            FeedPlan {
                level: m,
                slots: sch.slots,
                period_multiple: 1,
                phase_period: 0,
                expected_cost: f.weight * sch.cost,
            }
        } else {
            let k = (-m) as u32;
            let (a, c) = table.best_multi_period(k);
            FeedPlan {
                level: m,
                slots: vec![a as u32],
                period_multiple: k,
                phase_period: 0,
                expected_cost: f.weight * c,
            }
        }
    }

    /// Each slot's planned fetches, a `k`-period feed's counting `1/k`: the mean over days.
    fn occupancy(plans: &[FeedPlan], n: usize) -> Vec<f64> {
        let mut occ = vec![0.0; n];
        for p in plans {
            let share = 1.0 / f64::from(p.period_multiple.max(1));
            for &x in &p.slots {
                if let Some(o) = occ.get_mut(x as usize) {
                    *o += share;
                }
            }
        }
        occ
    }

    /// Every feed's optimal schedule of `m` fetches a period (or one every `-m`).
    fn best_all(feeds: &[FeedModel], cfg: &PlanConfig, m: Level) -> Vec<FeedPlan> {
        feeds
            .iter()
            .enumerate()
            .map(|(i, f)| best(f, i, cfg, m))
            .collect()
    }

    fn cost_of(plans: &[FeedPlan], feeds: &[FeedModel], cfg: &PlanConfig) -> f64 {
        let mut s = Scratch::default();
        plans
            .iter()
            .enumerate()
            .map(|(i, p)| unpriced_cost(p, &feeds[i], i, cfg, &mut s))
            .sum()
    }

    #[test]
    fn a_pile_is_levelled_to_the_capacity_and_costs_are_kept_true() {
        let cfg = cfg(288, None);
        // 300 feeds of one sharp model (all due right after the busy hour), 40 flat ones.
        let mut feeds: Vec<FeedModel> = (0..300).map(|i| peaked(9, 1.0 + (i % 7) as f64)).collect();
        feeds.extend((0..40).map(|_| feed(vec![1.0; 24], 1.0)));
        let mut plans = best_all(&feeds, &cfg, 2);
        let before = cost_of(&plans, &feeds, &cfg);
        let pile = occupancy(&plans, cfg.slots).into_iter().fold(0.0, f64::max);
        assert!(pile >= 300.0, "{pile}");
        let stats = level(&mut plans, &feeds, &cfg, 12.0);
        let occ = occupancy(&plans, cfg.slots);
        assert!(occ.iter().all(|&o| o <= 12.0 + 1e-9), "{:?}", stats);
        assert!(!stats.infeasible && stats.left_over == 0.0);
        assert_eq!(stats.busiest_before, pile);
        assert!(stats.busiest_after <= 12.0 + 1e-9);
        assert!(stats.moved >= 288, "{stats:?}");
        // Every plan keeps its level, its count and its order; the reported costs are the
        // moved schedules' own, and the added cost is their sum's change.
        let mut s = Scratch::default();
        for (i, p) in plans.iter().enumerate() {
            assert_eq!(p.slots.len(), 2);
            assert!(p.slots[0] < p.slots[1]);
            let c = unpriced_cost(p, &feeds[i], i, &cfg, &mut s);
            assert!((c - p.expected_cost).abs() <= 1e-9 * c.max(1.0), "{i}");
        }
        let after = cost_of(&plans, &feeds, &cfg);
        assert!((after - before - stats.added_cost).abs() <= 1e-6 * after);
        assert!(stats.added_cost > 0.0);
    }

    #[test]
    fn heavier_feeds_keep_the_better_slots() {
        // One model, weights 1 to 6, one fetch a day each, room for one fetch a slot: the
        // best assignment gives the heaviest feed the best slot, the next heaviest the
        // next best, and so on; any other order costs more.
        let cfg = cfg(24, None);
        let feeds: Vec<FeedModel> = (0..6).map(|i| peaked(9, 1.0 + i as f64)).collect();
        let mut plans = best_all(&feeds, &cfg, 1);
        level(&mut plans, &feeds, &cfg, 1.0);
        let got = cost_of(&plans, &feeds, &cfg);
        let opt = brute_force(&feeds, &cfg, 1.0, &[1; 6]);
        assert!((got - opt).abs() <= 1e-9 * opt, "{got} against {opt}");
    }

    /// The least total cost of `m[i]` fetches a period for each feed with no slot above
    /// `cap`, over every placement.
    fn brute_force(feeds: &[FeedModel], cfg: &PlanConfig, cap: f64, m: &[usize]) -> f64 {
        let n = cfg.slots;
        let mut s = Scratch::default();
        // Each feed's every schedule: (slots, weighted cost).
        let options: Vec<Vec<(Vec<u32>, f64)>> = feeds
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let table = table_for(f, i, cfg, &mut s);
                let mut out = Vec::new();
                let mut pick = vec![0u32; m[i]];
                fn rec(at: usize, from: u32, n: u32, pick: &mut Vec<u32>, out: &mut Vec<Vec<u32>>) {
                    if at == pick.len() {
                        out.push(pick.clone());
                        return;
                    }
                    for x in from..n {
                        pick[at] = x;
                        rec(at + 1, x + 1, n, pick, out);
                    }
                }
                let mut all = Vec::new();
                rec(0, 0, n as u32, &mut pick, &mut all);
                for sl in all {
                    let c = f.weight * table.schedule_cost(&sl);
                    out.push((sl, c));
                }
                s.keep_table(table);
                out
            })
            .collect();
        let mut occ = vec![0.0; n];
        let mut best = f64::INFINITY;
        fn go(
            i: usize,
            acc: f64,
            options: &[Vec<(Vec<u32>, f64)>],
            occ: &mut Vec<f64>,
            cap: f64,
            best: &mut f64,
        ) {
            if acc >= *best {
                return;
            }
            if i == options.len() {
                *best = acc;
                return;
            }
            for (sl, c) in &options[i] {
                if sl.iter().any(|&x| occ[x as usize] + 1.0 > cap + 1e-9) {
                    continue;
                }
                for &x in sl {
                    occ[x as usize] += 1.0;
                }
                go(i + 1, acc + c, options, occ, cap, best);
                for &x in sl {
                    occ[x as usize] -= 1.0;
                }
            }
        }
        go(0, 0.0, &options, &mut occ, cap, &mut best);
        best
    }

    #[test]
    fn random_small_crowds_against_brute_force() {
        // Feeds with busy hours drawn near one another, one or two fetches a day, on 12
        // slots with room for one or two fetches each; the pass against the best of every
        // placement.
        let mut rng = StdRng::seed_from_u64(7);
        let mut ratios = Vec::new();
        for case in 0..40 {
            let cfg = PlanConfig {
                period_seconds: 86_400.0,
                ..cfg(12, None)
            };
            let feeds_n = rng.gen_range(3..=4);
            let m: Vec<usize> = (0..feeds_n).map(|_| rng.gen_range(1..=2)).collect();
            let cap = if m.iter().sum::<usize>() > 6 {
                2.0
            } else {
                1.0
            };
            let feeds: Vec<FeedModel> = (0..feeds_n)
                .map(|_| {
                    let mut bins: Vec<f32> = (0..24).map(|_| rng.gen_range(0.0..0.3)).collect();
                    bins[rng.gen_range(8..11)] += rng.gen_range(1.0..5.0);
                    bins[rng.gen_range(18..20)] += rng.gen_range(0.0..3.0);
                    feed(bins, rng.gen_range(0.5..4.0))
                })
                .collect();
            let mut plans: Vec<FeedPlan> = feeds
                .iter()
                .enumerate()
                .map(|(i, f)| best(f, i, &cfg, m[i] as Level))
                .collect();
            let free = cost_of(&plans, &feeds, &cfg);
            let stats = level(&mut plans, &feeds, &cfg, cap);
            let occ = occupancy(&plans, cfg.slots);
            assert!(
                occ.iter().all(|&o| o <= cap + 1e-9),
                "case {case}: {stats:?}"
            );
            let got = cost_of(&plans, &feeds, &cfg);
            let opt = brute_force(&feeds, &cfg, cap, &m);
            assert!(got >= opt - 1e-9 * opt, "case {case}: below the optimum");
            if opt > free + 1e-9 {
                // What the capacity costs, the pass's over the optimum's.
                ratios.push((got - free) / (opt - free));
            } else {
                assert!((got - opt).abs() <= 1e-9 * opt, "case {case}");
            }
        }
        ratios.sort_by(f64::total_cmp);
        assert!(ratios.len() >= 10, "{ratios:?}");
        let median = ratios[ratios.len() / 2];
        let worst = ratios[ratios.len() - 1];
        // Seed 7 gives 35 crowded cases: 20 at the optimum, the worst at 1.77 times its
        // added cost (a feed whose two fetches would both move is moved by one).
        assert!(
            median <= 1.05 && worst <= 2.0,
            "median {median}, worst {worst}: {ratios:?}"
        );
    }

    #[test]
    fn more_fetches_than_the_period_holds_are_evened_and_reported() {
        let cfg = cfg(12, None);
        let feeds: Vec<FeedModel> = (0..12).map(|i| peaked(9, 1.0 + i as f64)).collect();
        let mut plans = best_all(&feeds, &cfg, 2);
        // 24 fetches on 12 slots at one a slot cannot be placed: two a slot can.
        let stats = level(&mut plans, &feeds, &cfg, 1.0);
        assert!(stats.infeasible);
        assert_eq!(stats.capacity, 2.0);
        assert!(occupancy(&plans, 12).iter().all(|&o| o <= 2.0 + 1e-9));
    }

    #[test]
    fn quiet_feeds_are_counted_on_the_days_they_are_fetched() {
        let cfg = cfg(96, None);
        // 30 feeds fetched every 3 days at one time, on the three days of the cycle in
        // turn: 10 fetches a day at that slot, 6 of each day's to move for a cap of 4.
        let feeds: Vec<FeedModel> = (0..30).map(|i| peaked(9, 1.0 + (i % 3) as f64)).collect();
        let spread = |i: usize, mut p: FeedPlan| {
            p.phase_period = (i % 3) as u32;
            p
        };
        let mut plans: Vec<FeedPlan> = feeds
            .iter()
            .enumerate()
            .map(|(i, f)| spread(i, best(f, i, &cfg, -3)))
            .collect();
        let mean = occupancy(&plans, 96).into_iter().fold(0.0, f64::max);
        assert!((mean - 10.0).abs() < 1e-9);
        assert_eq!(Occupancy::of(&plans, 96).busiest_slot(), 10.0);
        let stats = level(&mut plans, &feeds, &cfg, 4.0);
        assert!(
            Occupancy::of(&plans, 96).busiest_slot() <= 4.0 + 1e-9,
            "{stats:?}"
        );
        assert!(plans
            .iter()
            .all(|p| p.slots.len() == 1 && p.period_multiple == 3));
        assert_eq!(stats.moved, 18);
        // On one day of the cycle all 30 are fetched: 26 move, though the mean is 10.
        let mut same = best_all(&feeds, &cfg, -3);
        let stats = level(&mut same, &feeds, &cfg, 4.0);
        assert_eq!(stats.busiest_before, 30.0);
        assert!(
            Occupancy::of(&same, 96).busiest_slot() <= 4.0 + 1e-9,
            "{stats:?}"
        );
        assert_eq!(stats.moved, 26);
    }

    #[test]
    fn solves_and_replans_hold_the_capacity() {
        let cap = 6.0;
        let cfg = PlanConfig {
            budget: 200.0 * 3.0,
            ..cfg(288, Some(cap))
        };
        let mut feeds: Vec<FeedModel> = (0..200).map(|i| peaked(9 + i % 2, 1.0)).collect();
        let mut state = solve_optimal_with_state(&feeds, &cfg).unwrap();
        let check = |plan: &crate::plan::planner::Plan| {
            let occ = occupancy(&plan.feeds, cfg.slots);
            assert!(occ.iter().all(|&o| o <= cap + 1e-9));
            let c = plan.stats.crowding.as_ref().expect("levelled");
            assert!(c.busiest_after <= cap + 1e-9 && c.left_over == 0.0);
            let sum: f64 = plan.feeds.iter().map(|p| p.expected_cost).sum();
            assert!((sum - plan.expected_cost).abs() <= 1e-9 * sum);
        };
        check(state.plan());
        assert!(state.plan().stats.crowding.as_ref().unwrap().crowded_slots > 0);
        // Twenty feeds move their busy hour; the replan keeps the rest and stays within.
        for f in feeds.iter_mut().take(20) {
            *f = peaked(15, 1.0);
        }
        let changed: Vec<usize> = (0..20).collect();
        replan(&feeds, &cfg, &mut state, &changed).unwrap();
        check(state.plan());
    }

    #[test]
    fn one_updated_feed_fits_around_the_others() {
        let cfg = cfg(96, None);
        let f = peaked(9, 1.0);
        let mut plan = best(&f, 0, &cfg, 2);
        let free = plan.clone();
        // Every other feed fills the slots this feed wants and their neighbours but two.
        let mut occ = Occupancy::of(&[], 96);
        for x in 0..96 {
            occ.add(x, 1, 0, 1.0);
        }
        for &x in &free.slots {
            for d in -2i64..=2 {
                let at = (x as i64 + d).rem_euclid(96) as usize;
                occ.add(at, 1, 0, 2.0);
            }
        }
        let moved = fit_one(&mut plan, &f, 0, &cfg, &occ, 3.0);
        assert_eq!(moved, 2);
        for (&a, &b) in plan.slots.iter().zip(&free.slots) {
            assert!(occ.busiest(a as usize) + 1.0 <= 3.0 + 1e-9);
            // The nearest room is three slots away, on the side that costs less.
            assert_eq!((a as i64 - b as i64).abs(), 3, "{a} from {b}");
        }
        let mut s = Scratch::default();
        assert!((plan.expected_cost - unpriced_cost(&plan, &f, 0, &cfg, &mut s)).abs() < 1e-9);
        assert!(plan.expected_cost > free.expected_cost);
        // With room where it wants to be, nothing moves.
        let mut again = free.clone();
        let mut ones = Occupancy::of(&[], 96);
        for x in 0..96 {
            ones.add(x, 1, 0, 1.0);
        }
        assert_eq!(fit_one(&mut again, &f, 0, &cfg, &ones, 3.0), 0);
        assert_eq!(again, free);
    }
}
