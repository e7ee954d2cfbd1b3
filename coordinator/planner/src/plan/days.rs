//! Even days for plans longer than a day: one price per day of the period.
//!
//! A weekly plan is solved against the week's budget, and the week's optimum spends it
//! where postings are: on a population that posts a tenth as much at weekends it asked
//! 2,468 / 2,432 / 1,013 / 820 / 2,344 / 2,496 / 2,427 fetches on the seven days of a
//! 2,000-a-day budget. The workers hold every UTC day to the day's budget, so live the
//! weekdays' excess was held over to the next day and the weekends' unasked fetches were
//! lost: weekly plans realized 1.16–1.48× the delay of daily ones (docs/EXPERIMENTS.md,
//! "Weekly plans against the day's budget").
//!
//! The budget is one constraint per day, so it has one price per day: a fetch on day `d`
//! pays `ν_d` on top of the budget's price, the exact solver places each feed's fetches at
//! those prices ([`super::cost::CostTable::new_priced`]), and the prices move until every
//! day asks its share. [`DayPrices::step`] moves each day's price by its excess over the
//! mean day, in units of the budget's price, with a step of its own that grows while the
//! day's excess keeps its sign and halves when it flips; the cheapest day stays at zero.
//! [`solve_even_days`] repeats solve and step until the days agree within a tolerance (the
//! offline plans); the live planner takes one step per round and keeps the prices between
//! rounds, as the weekly pattern they answer repeats.

use super::alloc::{level_rate, AllocError};
use super::planner::Policy;
use super::planner::{
    solve_optimal_with_state, DayPricing, FeedModel, Plan, PlanConfig, PlanState,
};

/// How far (relative) a day's planned fetches may be from the mean day's and the days
/// still count as even.
pub const EVEN_WITHIN: f64 = 0.02;

/// Solves [`solve_even_days`] makes at most.
pub const MAX_SOLVES: usize = 16;

/// Planned fetches per period on each day of `cfg`'s period: each fetch on the day its
/// slot falls in, a fetch every `k` periods as `1/k`.
pub fn fetches_per_day(plan: &Plan, cfg: &PlanConfig) -> Vec<f64> {
    let days = cfg.days_per_period();
    let n = cfg.slots.max(1);
    let mut out = vec![0.0; days];
    for p in &plan.feeds {
        // A fetch every k periods counts 1/k on its day.
        let each = level_rate(p.level) / p.slots.len().max(1) as f64;
        for &x in &p.slots {
            out[(x as usize * days / n).min(days - 1)] += each;
        }
    }
    out
}

/// Each day's planned fetches over the mean day's (1.0 for every day when nothing is
/// planned).
pub fn day_shares(per_day: &[f64]) -> Vec<f64> {
    let mean = per_day.iter().sum::<f64>() / per_day.len().max(1) as f64;
    per_day
        .iter()
        .map(|&d| if mean > 0.0 { d / mean } else { 1.0 })
        .collect()
}

/// The largest relative distance of a day from the mean day.
pub fn unevenness(per_day: &[f64]) -> f64 {
    day_shares(per_day)
        .iter()
        .fold(0.0f64, |m, &s| m.max((s - 1.0).abs()))
}

/// The days' prices and how far each moves at its next step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DayPrices {
    /// The prices (`ν_d`, weighted cost per period per fetch on day `d`, the cheapest 0)
    /// and the feeds' spread. Empty before the first step.
    pub pricing: DayPricing,
    /// Each day's step, in mean costs of a fetch per unit of relative excess.
    steps: Vec<f64>,
    /// Each day's last move of its price.
    moves: Vec<f64>,
    /// Whether the day has passed its balance once: its step grows more slowly.
    flipped: Vec<bool>,
}

/// First step, in mean costs of a fetch per unit of relative excess: a day 20% over its
/// share starts a fiftieth of a fetch's cost above one at its share. Quiet feeds cost
/// about the same on any day, and prices far above the spread between days moved all of
/// them at once (at one fetch a day the first step of half a fetch's price put 2,715 of a
/// week's 3,500 fetches on one day); busy feeds of a population quiet at weekends need
/// their weekdays priced a whole fetch's cost above the weekend. So steps start small and
/// grow while a day's excess keeps its sign; when it flips, the step is cut, half its last
/// move taken back, and it grows more slowly from then on (the two days of a weekend trade
/// fetches at small differences of price, and a step grown on the way up at the first rate
/// kept them swinging; without growth a day left short stalled).
const FIRST_STEP: f64 = 0.1;
const GROW: f64 = 1.5;
const REGROW: f64 = 1.2;
const CUT: f64 = 0.5;
/// Bounds of a day's step, and of a day's price, in mean costs of a fetch.
const MAX_STEP: f64 = 8.0;
const MAX_PRICE: f64 = 20.0;
/// The largest price or spread [`DayPrices::resumed`] takes up: far above any the steps
/// reach (at most 20 mean costs of a fetch; the largest seen, 950,000 in a unit test, came
/// from a round at a twentieth of its budget), and low enough that a cost table's sums
/// over a week's slots stay finite. A stored value beyond it was not written by a
/// coordinator.
pub const MAX_RESUMED: f64 = 1e15;

/// The feeds' spread of the days' prices ([`DayPricing::spread`]), in mean costs of a
/// fetch.
pub const SPREAD: f64 = 0.1;

impl DayPrices {
    /// Prices for a plan of `days` days, all zero, no spread.
    pub fn new(days: usize) -> Self {
        DayPrices {
            pricing: DayPricing {
                prices: vec![0.0; days],
                spread: 0.0,
            },
            steps: vec![FIRST_STEP; days],
            moves: vec![0.0; days],
            flipped: vec![false; days],
        }
    }

    /// Prices a plan was solved at before, taken up again (a new leader reads its
    /// predecessor's from the stored plan): without them a weekly plan starts unpriced and
    /// asks several days' worth of rounds with uneven days, whose excess the workers hold.
    /// They are near the balance, so steps start short and grow at the slower rate, as
    /// after a day's first flip. `None` for fewer than two days, or a price or spread that
    /// is negative, not finite or above [`MAX_RESUMED`].
    pub fn resumed(pricing: DayPricing) -> Option<Self> {
        let days = pricing.prices.len();
        let valid = |v: f64| (0.0..=MAX_RESUMED).contains(&v);
        if days < 2 || !pricing.prices.iter().all(|&p| valid(p)) || !valid(pricing.spread) {
            return None;
        }
        Some(DayPrices {
            pricing,
            steps: vec![FIRST_STEP; days],
            moves: vec![0.0; days],
            flipped: vec![true; days],
        })
    }

    /// Moves the prices from a plan that asked `per_day` fetches on its days, at a mean
    /// weighted cost of `unit` per fetch (the plan's expected cost over its fetches, the
    /// prices left out): the scale of what moving a fetch to another day costs, which the
    /// budget's price is not (it falls as the days' prices rise, and at a budget the
    /// minimums take whole it prices no fetch anyone would move). Returns whether a price
    /// moved: `false` when the days are already within [`EVEN_WITHIN`], when there is no
    /// unit to scale by, or when `per_day` does not fit.
    pub fn step(&mut self, per_day: &[f64], unit: f64) -> bool {
        let days = per_day.len();
        if days < 2
            || !unit.is_finite()
            || unit <= 0.0
            || per_day.iter().any(|d| !d.is_finite() || *d < 0.0)
            || unevenness(per_day) <= EVEN_WITHIN
        {
            return false;
        }
        if self.pricing.prices.len() != days {
            *self = DayPrices::new(days);
        }
        let prices = &mut self.pricing.prices;
        for (d, share) in day_shares(per_day).iter().enumerate() {
            let excess = share - 1.0;
            let last = self.moves[d];
            if last != 0.0 && (last > 0.0) != (excess > 0.0) {
                // Past the balance: take half the last move back and step shorter.
                self.steps[d] *= CUT;
                prices[d] -= 0.5 * last;
                self.flipped[d] = true;
            } else if last != 0.0 {
                let grow = if self.flipped[d] { REGROW } else { GROW };
                self.steps[d] = (self.steps[d] * grow).min(MAX_STEP);
            }
            let moved = self.steps[d] * unit * excess;
            prices[d] += moved;
            self.moves[d] = moved;
        }
        // Only differences between days move fetches; the cheapest day is free, so no
        // price is negative and none grows without bound.
        let low = prices.iter().fold(f64::INFINITY, |m, &p| m.min(p));
        for p in prices.iter_mut() {
            *p = (*p - low).clamp(0.0, MAX_PRICE * unit);
        }
        self.pricing.spread = SPREAD * unit;
        true
    }
}

/// The mean weighted cost of one of `plan`'s fetches, the scale of [`DayPrices::step`].
pub fn cost_per_fetch(plan: &Plan) -> f64 {
    if plan.fetches_per_period > 0.0 {
        plan.expected_cost / plan.fetches_per_period
    } else {
        0.0
    }
}

/// What [`solve_even_days`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct EvenDays {
    /// The prices the plan was solved at (empty for a one-day period).
    pub prices: Vec<f64>,
    /// The feeds' spread of them ([`DayPricing::spread`]).
    pub spread: f64,
    /// Solves made.
    pub solves: usize,
    /// Planned fetches per period on each day of the returned plan.
    pub per_day: Vec<f64>,
}

/// The optimal plan with its fetches spread evenly over the days of a period longer than
/// a day: solved, then solved again at stepped day prices until every day is within
/// [`EVEN_WITHIN`] of the mean day or [`MAX_SOLVES`] solves are made; the most even plan
/// is returned. `start` carries prices from an earlier plan of the same feeds (the live
/// planner's); a one-day period is solved once, unpriced.
pub fn solve_even_days(
    feeds: &[FeedModel],
    cfg: &PlanConfig,
    start: &mut DayPrices,
) -> Result<(PlanState, EvenDays), AllocError> {
    let days = cfg.days_per_period();
    let mut cfg = cfg.clone();
    if days < 2 {
        cfg.day_prices = DayPricing::default();
        let state = solve_optimal_with_state(feeds, &cfg)?;
        let per_day = fetches_per_day(state.plan(), &cfg);
        return Ok((
            state,
            EvenDays {
                prices: Vec::new(),
                spread: 0.0,
                solves: 1,
                per_day,
            },
        ));
    }
    if start.pricing.prices.len() != days {
        *start = DayPrices::new(days);
    }
    let mut best: Option<(f64, PlanState, EvenDays)> = None;
    let mut solves = 0;
    for solve in 1..=MAX_SOLVES {
        solves = solve;
        cfg.day_prices = start.pricing.clone();
        let state = solve_optimal_with_state(feeds, &cfg)?;
        let per_day = fetches_per_day(state.plan(), &cfg);
        let uneven = unevenness(&per_day);
        let price = cost_per_fetch(state.plan());
        let report = EvenDays {
            prices: cfg.day_prices.prices.clone(),
            spread: cfg.day_prices.spread,
            solves: solve,
            per_day: per_day.clone(),
        };
        if best.as_ref().is_none_or(|(u, _, _)| uneven < *u) {
            best = Some((uneven, state, report));
        }
        if uneven <= EVEN_WITHIN || !start.step(&per_day, price) {
            break;
        }
    }
    let (_, state, mut report) = best.expect("at least one solve");
    report.solves = solves;
    // The next plan starts from the prices of the one returned.
    start.pricing = DayPricing {
        prices: report.prices.clone(),
        spread: report.spread,
    };
    Ok((state, report))
}

/// The plan `plan` and `simulate` make: [`solve_even_days`] for an optimal plan of a period
/// longer than a day (with what it did), [`super::planner::solve`] otherwise.
pub fn solve_plan(
    feeds: &[FeedModel],
    cfg: &PlanConfig,
) -> Result<(Plan, Option<EvenDays>), AllocError> {
    if cfg.policy == Policy::Optimal && cfg.days_per_period() > 1 {
        let (state, report) = solve_even_days(feeds, cfg, &mut DayPrices::default())?;
        return Ok((state.plan().clone(), Some(report)));
    }
    Ok((super::planner::solve(feeds, cfg)?, None))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::cost::{CostTable, Metric};
    use crate::plan::pattern::Smoothing;
    use crate::plan::planner::{FeedPlan, PlanStats, Scheduler};

    const WEEK: f64 = 7.0 * 86_400.0;

    /// A feed posting `rate` a weekday and a tenth of it at the weekend (days 2 and 3 of the
    /// week, as on a trace starting on a Thursday), busiest at `hour`.
    fn weekday_feed(rate: f64, hour: usize, weight: f64) -> FeedModel {
        let post_bins = (0..168)
            .map(|b| {
                let (day, h) = (b / 24, b % 24);
                let d = (h as i64 - hour as i64)
                    .rem_euclid(24)
                    .min((hour as i64 - h as i64).rem_euclid(24));
                let shape = 0.2 + (-(d as f64 / 3.0).powi(2)).exp();
                let week = if day == 2 || day == 3 { 0.1 } else { 1.0 };
                (rate / 24.0 * shape * week) as f32
            })
            .collect();
        FeedModel {
            weight,
            post_bins,
            peaks: Vec::new(),
            access_bins: vec![0.0; 168],
            min_level: 1,
            max_level: 200,
            host: None,
            document: None,
        }
    }

    fn week_cfg(budget: f64) -> PlanConfig {
        PlanConfig {
            metric: Metric::Delay,
            policy: Policy::Optimal,
            scheduler: Scheduler::Exact,
            slots: 7 * 96,
            period_seconds: WEEK,
            budget,
            host_caps: Default::default(),
            smoothing: Smoothing::Step,
            day_prices: Default::default(),
            slot_capacity: None,
        }
    }

    fn population() -> Vec<FeedModel> {
        (0..40)
            .map(|i| weekday_feed(1.0 + (i % 7) as f64, (i * 5) % 24, 1.0 + (i % 3) as f64))
            .collect()
    }

    #[test]
    fn fetches_are_counted_on_the_day_of_their_slot() {
        let cfg = week_cfg(10.0);
        let n = cfg.slots as u32;
        let plan = Plan {
            feeds: vec![
                FeedPlan {
                    level: 3,
                    slots: vec![0, n / 7 - 1, n / 7],
                    period_multiple: 1,
                    phase_period: 0,
                    expected_cost: 0.0,
                },
                // Once every two weeks, on the last day.
                FeedPlan {
                    level: 0,
                    slots: vec![n - 1],
                    period_multiple: 2,
                    phase_period: 1,
                    expected_cost: 0.0,
                },
            ],
            expected_cost: 0.0,
            fetches_per_period: 3.5,
            stats: PlanStats::default(),
        };
        assert_eq!(
            fetches_per_day(&plan, &cfg),
            vec![2.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5]
        );
    }

    #[test]
    fn a_day_over_its_share_grows_dearer_and_even_days_move_nothing() {
        let mut prices = DayPrices::new(3);
        assert!(!prices.step(&[100.0, 101.0, 99.0], 10.0), "within 2%");
        assert!(!prices.pricing.any());
        assert!(!prices.step(&[150.0, 100.0, 50.0], f64::NAN));
        assert!(!prices.step(&[150.0, f64::INFINITY, 50.0], 10.0));
        assert!(prices.step(&[150.0, 100.0, 50.0], 10.0));
        let p = prices.pricing.prices.clone();
        assert!(p[0] > p[1] && p[1] > p[2], "{p:?}");
        assert_eq!(p[2], 0.0, "the cheapest day is free");
        // The unit is the mean cost of a fetch (10 here), the first step a tenth of a unit
        // per unit of excess: day 0, half over the mean, is a twentieth of a unit above the
        // mean day and day 2, half under, a twentieth below.
        assert!((p[0] - 1.0).abs() < 1e-9, "{p:?}");
        assert!((prices.pricing.spread - SPREAD * 10.0).abs() < 1e-9);
        // Still over: its step grows; then under: it is cut back.
        assert!(prices.step(&[120.0, 100.0, 80.0], 10.0));
        let q = prices.pricing.prices.clone();
        assert!(q[0] > p[0]);
        assert!(prices.step(&[80.0, 100.0, 120.0], 10.0));
        assert!(prices.pricing.prices[0] < q[0]);
        assert!(prices
            .pricing
            .prices
            .iter()
            .all(|&x| x >= 0.0 && x.is_finite()));
        assert!(prices.pricing.spread > 0.0 && prices.pricing.spread.is_finite());
    }

    #[test]
    fn a_weekly_plan_spreads_its_fetches_evenly_and_reports_its_cost_unpriced() {
        let feeds = population();
        let cfg = week_cfg(40.0 * 4.0 * 7.0);
        let unpriced = solve_optimal_with_state(&feeds, &cfg).unwrap();
        let before = fetches_per_day(unpriced.plan(), &cfg);
        assert!(
            unevenness(&before) > 0.2,
            "the week's optimum crowds the weekdays: {before:?}"
        );
        let mut prices = DayPrices::default();
        let (state, report) = solve_even_days(&feeds, &cfg, &mut prices).unwrap();
        let plan = state.plan();
        // 40 feeds: one feed's move is 2.5% of a weekend day's fetches, so the days are
        // held to 5% here; 500 feeds come within 2% (docs/EXPERIMENTS.md).
        assert!(
            unevenness(&report.per_day) <= 0.05,
            "{:?} after {} solves at {:?}",
            report.per_day,
            report.solves,
            report.prices
        );
        assert_eq!(report.per_day, fetches_per_day(plan, &cfg));
        assert_eq!(prices.pricing.prices, report.prices);
        assert!(report.prices.iter().any(|&p| p > 0.0));
        // The whole budget, and the weekend's prices the lowest.
        assert!((plan.fetches_per_period - cfg.budget).abs() < 1.0);
        let cheapest = (0..7)
            .min_by(|&a, &b| report.prices[a].total_cmp(&report.prices[b]))
            .unwrap();
        assert!(cheapest == 2 || cheapest == 3, "{:?}", report.prices);
        // Costs are the metric alone, and even days cost more of it than the week's optimum.
        for (f, p) in feeds.iter().zip(&plan.feeds) {
            let mut post = Vec::new();
            f.expand_posts(&cfg, &mut post);
            let table = CostTable::new(cfg.metric, &post, &[], WEEK / cfg.slots as f64);
            let want = f.weight * table.schedule_cost(&p.slots);
            assert!(
                (p.expected_cost - want).abs() <= 1e-6 * want.max(1.0),
                "{} against {want}",
                p.expected_cost
            );
        }
        assert!(plan.expected_cost > unpriced.plan().expected_cost);
        assert!(plan.expected_cost < 1.5 * unpriced.plan().expected_cost);
    }

    #[test]
    fn prices_taken_up_again_give_the_even_plan_at_once() {
        let feeds = population();
        let cfg = week_cfg(40.0 * 4.0 * 7.0);
        let mut first = DayPrices::default();
        let (_, settled) = solve_even_days(&feeds, &cfg, &mut first).unwrap();
        assert!(settled.solves > 1, "the prices had to move");
        // A next leader reads the prices, not the step state behind them.
        let mut resumed = DayPrices::resumed(first.pricing.clone()).unwrap();
        let at_them = PlanConfig {
            day_prices: resumed.pricing.clone(),
            ..cfg.clone()
        };
        let state = solve_optimal_with_state(&feeds, &at_them).unwrap();
        assert_eq!(fetches_per_day(state.plan(), &cfg), settled.per_day);
        // From there the steps are short (40 feeds: within 5%, see above), and never make
        // the days less even than they were.
        let (_, again) = solve_even_days(&feeds, &cfg, &mut resumed).unwrap();
        assert!(unevenness(&again.per_day) <= unevenness(&settled.per_day));
        assert!(unevenness(&again.per_day) <= 0.05, "{:?}", again.per_day);
        // Unusable prices are refused, not clamped into some other plan.
        let with =
            |prices: Vec<f64>, spread: f64| DayPrices::resumed(DayPricing { prices, spread });
        assert!(with(vec![0.0, 1.0], 0.1).is_some());
        assert!(with(vec![1.0], 0.1).is_none(), "one day");
        assert!(with(vec![0.0, -1.0], 0.1).is_none());
        assert!(with(vec![0.0, f64::NAN], 0.1).is_none());
        assert!(with(vec![0.0, 1.0], f64::INFINITY).is_none());
        assert!(with(vec![0.0, 1e308], 0.1).is_none());
        assert!(with(vec![0.0, 1.0], 1e308).is_none());
    }

    #[test]
    fn a_daily_plan_is_solved_once_and_unpriced() {
        let feeds: Vec<FeedModel> = population()
            .into_iter()
            .map(|mut f| {
                f.post_bins.truncate(24);
                f.access_bins.truncate(24);
                f
            })
            .collect();
        let cfg = PlanConfig {
            slots: 96,
            period_seconds: 86_400.0,
            budget: 160.0,
            ..week_cfg(0.0)
        };
        let (state, report) = solve_even_days(&feeds, &cfg, &mut DayPrices::default()).unwrap();
        assert_eq!(report.solves, 1);
        assert!(report.prices.is_empty());
        let plain = solve_optimal_with_state(&feeds, &cfg).unwrap();
        assert_eq!(state.plan().feeds, plain.plan().feeds);
    }
}
