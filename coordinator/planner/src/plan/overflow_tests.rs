//! Lost postings priced into the plan: the curves carry them, the allocation is the optimum
//! of the priced curves (brute force over levels), and a higher price buys fewer losses.

use super::alloc::{level_rate, Level};
use super::cost::{CostTable, Metric};
use super::exact::ExactSolver;
use super::overflow::{by_tail, Document};
use super::pattern::{expand, Smoothing};
use super::planner::{
    expected_lost, level_costs, solve, FeedModel, Plan, PlanConfig, Policy, Scheduler,
};

const SLOTS: usize = 48;

fn cfg(budget: f64) -> PlanConfig {
    PlanConfig {
        metric: Metric::Delay,
        policy: Policy::Optimal,
        scheduler: Scheduler::Exact,
        slots: SLOTS,
        period_seconds: 86_400.0,
        budget,
        host_caps: Default::default(),
        smoothing: Smoothing::Step,
        day_prices: Default::default(),
        slot_capacity: None,
    }
}

/// A feed posting `per_day` with a morning peak, its document of `items`, a lost posting
/// at `hours` of delay.
fn feed(per_day: f32, items: f64, clump: f64, hours: f64) -> FeedModel {
    let mut bins: Vec<f32> = (0..24)
        .map(|h| if (7..11).contains(&h) { 4.0 } else { 1.0 })
        .collect();
    let sum: f32 = bins.iter().sum();
    bins.iter_mut().for_each(|b| *b *= per_day / sum);
    FeedModel {
        weight: 1.0,
        post_bins: bins,
        peaks: Vec::new(),
        access_bins: vec![0.0; 24],
        min_level: -5,
        max_level: 12,
        host: None,
        document: Some(Document {
            items,
            clump,
            lost_cost: hours * 3600.0,
        }),
    }
}

/// The priced cost of a feed at a whole-fetch level, built by hand: the delay-optimal
/// schedule's cost, plus the price times each gap's expected loss summed directly.
fn priced_by_hand(f: &FeedModel, level: Level) -> f64 {
    let doc = f.document.expect("a document");
    let mut post = Vec::new();
    expand(&f.post_bins, SLOTS, Smoothing::Step, &mut post);
    let table = CostTable::new(Metric::Delay, &post, &[], 86_400.0 / SLOTS as f64);
    let sch = ExactSolver::new().solve(&table, level as usize);
    let mut b: Vec<usize> = sch.slots.iter().map(|&x| x as usize).collect();
    b.sort_unstable();
    let lost: f64 = (0..b.len())
        .map(|i| {
            let to = if i + 1 < b.len() {
                b[i + 1]
            } else {
                b[0] + SLOTS
            };
            let mass: f64 = (b[i]..to).map(|j| post[j % SLOTS]).sum();
            doc.clump * by_tail(mass / doc.clump, doc.items / doc.clump)
        })
        .sum();
    f.weight * sch.cost + doc.lost_cost * lost
}

#[test]
fn a_feeds_curve_is_its_delay_plus_its_priced_losses() {
    for (per_day, items, clump, hours) in [
        (40.0, 20.0, 1.0, 24.0),
        (40.0, 10.0, 3.0, 6.0),
        (12.0, 5.0, 1.0, 72.0),
    ] {
        let f = feed(per_day, items, clump, hours);
        let levels: Vec<Level> = (1..=6).collect();
        for (l, got) in levels.iter().zip(level_costs(&f, &cfg(100.0), &levels)) {
            let want = priced_by_hand(&f, *l);
            assert!(
                (got - want).abs() <= 1e-6 * want,
                "{per_day}/day, {items} items, level {l}: {got} vs {want}"
            );
        }
        // A sub-period level: one gap of k periods, a k-th of its loss per period.
        let doc = f.document.unwrap();
        let at = level_costs(&f, &cfg(100.0), &[-1])[0];
        let unpriced = level_costs(
            &FeedModel {
                document: None,
                ..f.clone()
            },
            &cfg(100.0),
            &[-1],
        )[0];
        let lost = doc.clump * by_tail(3.0 * per_day as f64 / doc.clump, items / doc.clump);
        assert!(
            (at - unpriced - doc.lost_cost * lost / 3.0).abs() <= 1e-6 * at,
            "{at} vs {unpriced} + {lost}/3 priced"
        );
    }
}

/// Every level vector within the feeds' bounds and the budget, its priced cost summed.
fn brute(feeds: &[FeedModel], budget: f64) -> f64 {
    let costs: Vec<Vec<(Level, f64)>> = feeds
        .iter()
        .map(|f| {
            let levels: Vec<Level> = (f.min_level..=f.max_level).collect();
            levels
                .iter()
                .copied()
                .zip(level_costs(f, &cfg(budget), &levels))
                .collect()
        })
        .collect();
    fn rec(i: usize, costs: &[Vec<(Level, f64)>], left: f64) -> f64 {
        if i == costs.len() {
            return 0.0;
        }
        costs[i]
            .iter()
            .filter(|(l, _)| level_rate(*l) <= left + 1e-9)
            .map(|&(l, c)| c + rec(i + 1, costs, left - level_rate(l)))
            .fold(f64::INFINITY, f64::min)
    }
    rec(0, &costs, budget)
}

fn priced_total(feeds: &[FeedModel], plan: &Plan, budget: f64) -> f64 {
    feeds
        .iter()
        .zip(&plan.feeds)
        .map(|(f, p)| level_costs(f, &cfg(budget), &[p.level])[0])
        .sum()
}

#[test]
fn the_allocation_is_the_optimum_of_the_priced_curves() {
    for hours in [0.0, 6.0, 24.0, 240.0] {
        let mut feeds = vec![
            feed(40.0, 20.0, 1.0, hours),
            feed(25.0, 10.0, 2.0, hours),
            feed(3.0, 20.0, 1.0, hours),
            feed(0.5, 20.0, 1.0, hours),
        ];
        for f in feeds.iter_mut() {
            f.min_level = 1;
            f.max_level = 5;
        }
        for budget in [5.0, 8.0, 11.0] {
            let plan = solve(&feeds, &cfg(budget)).unwrap();
            assert!(plan.fetches_per_period <= budget + 1e-9);
            let (got, best) = (priced_total(&feeds, &plan, budget), brute(&feeds, budget));
            assert!(
                (got - best).abs() <= 1e-9 * best,
                "{hours} h, budget {budget}: plan {got} vs brute {best}"
            );
        }
    }
}

#[test]
fn a_higher_price_buys_fewer_losses_and_no_price_plans_as_if_unpriced() {
    let population = |hours: f64| {
        let mut feeds: Vec<FeedModel> = (0..12)
            .map(|i| feed(0.5 + 4.0 * i as f32, 20.0, 1.0, hours))
            .collect();
        feeds.push(feed(60.0, 20.0, 1.0, hours));
        feeds
    };
    let budget = 20.0;
    let lost = |hours: f64| -> (f64, Plan) {
        let feeds = population(hours);
        let plan = solve(&feeds, &cfg(budget)).unwrap();
        let lost = feeds
            .iter()
            .zip(&plan.feeds)
            .map(|(f, p)| expected_lost(f, &cfg(budget), p))
            .sum();
        (lost, plan)
    };
    let (free, free_plan) = lost(0.0);
    let unpriced: Vec<FeedModel> = population(0.0)
        .into_iter()
        .map(|f| FeedModel {
            document: None,
            ..f
        })
        .collect();
    let plain = solve(&unpriced, &cfg(budget)).unwrap();
    let levels = |p: &Plan| p.feeds.iter().map(|f| f.level).collect::<Vec<_>>();
    assert_eq!(levels(&free_plan), levels(&plain));
    let (day, day_plan) = lost(24.0);
    let (week, week_plan) = lost(168.0);
    assert!(free > 1.0, "the busiest feed overflows unpriced: {free}");
    assert!(day < free && week < day, "{free} > {day} > {week}");
    // The busiest feed takes the fetches that save it.
    let busiest = |p: &Plan| p.feeds[12].level;
    assert!(busiest(&week_plan) > busiest(&free_plan));
    assert!(busiest(&day_plan) >= busiest(&free_plan));
    // Delay alone is worse where losses are priced: the fetches came from elsewhere.
    assert!(week_plan.expected_cost > free_plan.expected_cost);
}
