//! The whole planning step: allocation plus per-feed schedules for a set of feed models.
//!
//! `solve(&Problem) -> Plan` is pure and deterministic. Feeds are indexed densely
//! (`0..feeds.len()`); mapping to external ids is the caller's business.

use super::alloc::{
    drop_raised_minimums_unless_they_fit, floor_level, level_period_multiple, level_rate,
    AllocError, AllocFeed, AllocStats, Allocator, HostCaps, Level,
};
use super::cost::{CostTable, Metric, TableStorage};
use super::exact::ExactSolver;
use super::exchange::{CurveCache, CurvePoint};
use super::overflow::{gap_loss, prefix_sums, priced_loss, Document};
use super::pattern::{expand, expand_with_peaks, Peak, Smoothing};
use super::search::{condition_search, uniform_slots};
use rayon::prelude::*;

/// Which allocation and schedule a plan uses (the papers' policies and the exact one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Uniform allocation, evenly spaced fetches.
    Uniform,
    /// Uniform allocation, optimized fetch times.
    SchedOnly,
    /// Closed-form allocation, evenly spaced fetches.
    AllocOnly,
    /// Closed-form allocation, optimized fetch times (the papers' combined policy).
    Combined,
    /// Exact joint optimum of allocation and schedules.
    Optimal,
}

impl Policy {
    /// All policies in report order.
    pub const ALL: [Policy; 5] = [
        Policy::Uniform,
        Policy::SchedOnly,
        Policy::AllocOnly,
        Policy::Combined,
        Policy::Optimal,
    ];

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Uniform => "uniform",
            Policy::SchedOnly => "sched-only",
            Policy::AllocOnly => "alloc-only",
            Policy::Combined => "combined",
            Policy::Optimal => "optimal",
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown policy `{s}` (expected uniform, sched-only, alloc-only, combined or optimal)"))
    }
}

/// How optimized fetch times are found for the non-optimal policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Scheduler {
    /// The exact solver.
    Exact,
    /// The papers' optimality-condition search with this closure tolerance in slots;
    /// exact solver where no plan closes (counted in `PlanStats::search_fallbacks`).
    Paper { tol_slots: usize },
}

/// A feed as the planner sees it.
#[derive(Clone, Debug)]
pub struct FeedModel {
    /// Importance weight `w_f` multiplying the feed's cost.
    pub weight: f64,
    /// Expected postings per bin per period (hourly bins: 24 for a day, 168 for a week).
    pub post_bins: Vec<f32>,
    /// Times of day at which shares of those postings come (a feed on a timer; a morning
    /// and an evening digest are two): where in the day, not how many ([`Peak`]). Empty
    /// for most feeds.
    pub peaks: Vec<Peak>,
    /// Expected weighted reader accesses per bin per period (same bins).
    pub access_bins: Vec<f32>,
    /// Lowest allowed level (from the global minimum, or raised to explore a feed whose
    /// rate is not yet known).
    pub min_level: Level,
    /// Highest allowed level.
    pub max_level: Level,
    /// Politeness group.
    pub host: Option<u32>,
    /// The feed's document, when postings lost to it are priced into the plan
    /// ([`super::overflow`]); `None` prices nothing.
    pub document: Option<Document>,
}

impl FeedModel {
    /// The feed's expected postings per slot of `cfg`'s period: its bins spread onto the
    /// slots, with each peak's share moved into its window on each day.
    pub fn expand_posts(&self, cfg: &PlanConfig, out: &mut Vec<f64>) {
        let days = cfg.days_per_period();
        expand_with_peaks(
            &self.post_bins,
            &self.peaks,
            days,
            cfg.slots,
            cfg.smoothing,
            out,
        );
    }
}

/// Planner settings shared by all feeds.
#[derive(Clone, Debug)]
pub struct PlanConfig {
    /// Objective.
    pub metric: Metric,
    /// Policy.
    pub policy: Policy,
    /// Scheduler for the non-optimal policies.
    pub scheduler: Scheduler,
    /// Slots per period (`N`).
    pub slots: usize,
    /// Period length in seconds.
    pub period_seconds: f64,
    /// Fetch budget per period (`M`).
    pub budget: f64,
    /// Caps on the summed fetch rate of one host, per period.
    pub host_caps: HostCaps,
    /// How bins are spread onto slots.
    pub smoothing: Smoothing,
    /// The price of a fetch on each day of the period, on top of the budget's: what spreads
    /// a weekly plan's fetches evenly over its days ([`super::days`]). Schedules are placed
    /// at these prices; the allocation and every reported cost leave them out.
    pub day_prices: DayPricing,
    /// Most planned fetches one slot of the period may hold on any day, over all feeds (a
    /// feed fetched every `k` periods counted on the days it is fetched); `None` for no
    /// cap ([`super::crowd`]).
    pub slot_capacity: Option<f64>,
}

/// Prices of a fetch by day of the period, in weighted cost per period (see
/// [`PlanConfig::day_prices`]). The default prices nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DayPricing {
    /// `ν_d` for each day of the period; empty for none.
    pub prices: Vec<f64>,
    /// Each feed pays on each day up to this much more, its own share drawn from its index
    /// and the day. Feeds whose schedules cost about the same on any day
    /// (most quiet feeds in a weekly plan) would otherwise all move to the cheapest day at
    /// once, and no price between two days would share them: at one fetch a day the first
    /// step put 2,715 of a week's 3,500 fetches on one day. With the spread they are
    /// shared out by their draws; a feed whose days differ in value pays at most this for
    /// the tie-break, a second-order loss at its optimum.
    pub spread: f64,
}

impl DayPricing {
    /// Whether any fetch is priced.
    pub fn any(&self) -> bool {
        !self.prices.is_empty() && (self.spread > 0.0 || self.prices.iter().any(|&p| p > 0.0))
    }
}

impl PlanConfig {
    /// Whole days in the period (1 for a daily plan, 7 for a weekly one).
    pub fn days_per_period(&self) -> usize {
        (self.period_seconds / 86_400.0).round().max(1.0) as usize
    }
}

/// One feed's plan.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedPlan {
    /// Allocated level.
    pub level: Level,
    /// Fetch boundaries in `[0, N)` within the period (one for sub-period levels).
    pub slots: Vec<u32>,
    /// Period of the schedule in periods of the model (`k` for once every `k` periods).
    pub period_multiple: u32,
    /// Which period of the `k` carries the fetch (0 for `k = 1`); spreads quiet feeds' fetches
    /// over the days of their cycle.
    pub phase_period: u32,
    /// Expected weighted cost per period.
    pub expected_cost: f64,
}

/// What a plan cost to make.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PlanStats {
    /// Allocation search statistics (optimal policy only).
    pub alloc: AllocStats,
    /// Feeds where the papers' search closed no plan and the exact solver was used.
    pub search_fallbacks: usize,
    /// What levelling against the per-slot capacity did (`None` without a capacity).
    pub crowding: Option<super::crowd::CrowdStats>,
}

/// A complete plan.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Per feed, in input order.
    pub feeds: Vec<FeedPlan>,
    /// Σ expected weighted cost per period.
    pub expected_cost: f64,
    /// Σ fetches per period.
    pub fetches_per_period: f64,
    /// Statistics.
    pub stats: PlanStats,
}

/// Per-thread scratch: slot patterns, cost table inputs and the exact solver's buffers.
#[derive(Default)]
pub(super) struct Scratch {
    pub(super) post: Vec<f64>,
    access: Vec<f64>,
    /// Per-slot prices of the feed's fetches (empty when the plan prices no day).
    price: Vec<f64>,
    pub(super) solver: ExactSolver,
    /// The last table's buffers (callers give them back with [`Scratch::keep`]).
    tables: TableStorage,
}

impl Scratch {
    /// Keeps `table`'s buffers for the next [`table_for`].
    pub(super) fn keep_table(&mut self, table: CostTable) {
        self.tables = table.into_storage();
    }
}

/// Builds one feed's cost table at slot resolution, in the scratch's spare buffers.
///
/// With day prices, each feed's price of a day is the day's plus its own draw of the spread
/// ([`DayPricing::spread`]), from its `index` and the day.
pub(super) fn table_for(
    feed: &FeedModel,
    index: usize,
    cfg: &PlanConfig,
    s: &mut Scratch,
) -> CostTable {
    feed.expand_posts(cfg, &mut s.post);
    if cfg.metric.uses_access() {
        expand(&feed.access_bins, cfg.slots, cfg.smoothing, &mut s.access);
    } else {
        s.access.clear();
    }
    s.price.clear();
    // The day's price is in weighted cost; the table is the feed's unweighted. A feed of no
    // weight costs nothing anywhere, and is placed unpriced.
    let pricing = &cfg.day_prices;
    let days = pricing.prices.len();
    if days > 0 && feed.weight > 0.0 && pricing.any() {
        let n = cfg.slots;
        let own: Vec<f64> = (0..days)
            .map(|d| {
                const STEPS: usize = 1 << 16;
                let draw = phase(
                    index.wrapping_mul(7).wrapping_add(d).wrapping_mul(104_729),
                    STEPS,
                );
                let extra = pricing.spread * draw as f64 / STEPS as f64;
                ((pricing.prices[d] + extra) / feed.weight).max(0.0)
            })
            .collect();
        s.price
            .extend((0..n).map(|x| own[(x * days / n).min(days - 1)]));
    }
    CostTable::new_priced(
        std::mem::take(&mut s.tables),
        cfg.metric,
        &s.post,
        &s.access,
        cfg.period_seconds / cfg.slots as f64,
        &s.price,
    )
}

/// Points of a feed's exact cost curve `D_f(L)` at `levels`: weighted cost and optimal
/// slots. One table and one shared solver phase 1 serve all the levels.
pub(super) fn exact_points(
    feed: &FeedModel,
    index: usize,
    cfg: &PlanConfig,
    levels: &[Level],
    s: &mut Scratch,
) -> Vec<CurvePoint> {
    let table = table_for(feed, index, cfg, s);
    let counts: Vec<usize> = levels
        .iter()
        .filter(|&&l| l >= 1)
        .map(|&l| l as usize)
        .collect();
    let mut solved = s.solver.solve_levels(&table, &counts).into_iter();
    let prefix = feed.document.map(|_| prefix_sums(&s.post));
    let points = levels
        .iter()
        .map(|&l| {
            let (slots, cost, k) = if l >= 1 {
                let sch = solved.next().expect("a schedule per whole-fetch level");
                (sch.slots, sch.cost, 1)
            } else {
                let k = level_period_multiple(l);
                let (a, c) = table.best_multi_period(k);
                (vec![a as u32], c, k)
            };
            // Placed at the days' prices; the allocation and the plan see the metric alone.
            let delay = feed.weight * (cost - table.price_of(&slots, k)).max(0.0);
            let lost = match (&feed.document, &prefix) {
                (Some(doc), Some(prefix)) => priced_loss(doc, l, &slots, prefix),
                _ => 0.0,
            };
            CurvePoint {
                cost: delay + lost,
                delay,
                slots: slots.into_boxed_slice(),
            }
        })
        .collect();
    s.keep_table(table);
    points
}

/// A feed's exact weighted cost per period at each of `levels` (for checks and reports;
/// the allocation evaluates its curves lazily).
pub fn level_costs(feed: &FeedModel, cfg: &PlanConfig, levels: &[Level]) -> Vec<f64> {
    let mut s = Scratch::default();
    exact_points(feed, 0, cfg, levels, &mut s)
        .into_iter()
        .map(|p| p.cost)
        .collect()
}

/// Postings `plan` is expected to lose per period to the feed's document overflowing
/// between fetches (0 for a feed with no [`Document`]), whatever their price.
pub fn expected_lost(feed: &FeedModel, cfg: &PlanConfig, plan: &FeedPlan) -> f64 {
    let Some(doc) = feed.document else {
        return 0.0;
    };
    // No gap holds more than a whole cycle's postings: where even that loses nothing (most
    // feeds), the slots are not expanded (this runs for every feed every round).
    let cycle: f64 = feed
        .post_bins
        .iter()
        .map(|&b| b.max(0.0) as f64)
        .sum::<f64>()
        * f64::from(level_period_multiple(plan.level));
    if gap_loss(cycle, &doc) == 0.0 {
        return 0.0;
    }
    let mut s = Scratch::default();
    feed.expand_posts(cfg, &mut s.post);
    let counted = Document {
        lost_cost: 1.0,
        ..doc
    };
    priced_loss(&counted, plan.level, &plan.slots, &prefix_sums(&s.post))
}

/// [`drop_raised_minimums_unless_they_fit`] on the models' minimum levels: the live
/// planner's rule for floors the budget cannot carry, and the references' in `replay`.
pub fn drop_raised_floors_unless_they_fit(
    models: &mut [FeedModel],
    base: Level,
    budget: f64,
) -> usize {
    let mut mins: Vec<Level> = models.iter().map(|m| m.min_level).collect();
    let dropped = drop_raised_minimums_unless_they_fit(&mut mins, base, budget);
    for (m, l) in models.iter_mut().zip(mins) {
        m.min_level = l;
    }
    dropped
}

/// Optimal slots and unweighted cost at a level.
fn level_cost(table: &CostTable, level: Level, solver: &mut ExactSolver) -> (Vec<u32>, f64) {
    if level >= 1 {
        let s = solver.solve(table, level as usize);
        (s.slots, s.cost)
    } else {
        let (a, c) = table.best_multi_period(level_period_multiple(level));
        (vec![a as u32], c)
    }
}

/// A deterministic per-feed phase in `[0, span)`, so evenly spaced schedules of different
/// feeds do not all fetch at the same minute.
pub(super) fn phase(feed_index: usize, span: usize) -> usize {
    let mut x = feed_index as u64 ^ 0x9e37_79b9_7f4a_7c15;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x % span.max(1) as u64) as usize
}

/// Whether a feed's model is the same at every hour (posting and access rates, and no
/// peak): any rotation of its schedule costs the same.
pub(super) fn is_flat(feed: &FeedModel) -> bool {
    if !feed.peaks.is_empty() {
        return false;
    }
    let flat = |b: &[f32]| {
        let (lo, hi) = b
            .iter()
            .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &x| {
                (l.min(x), h.max(x))
            });
        b.is_empty() || hi - lo <= 1e-6 * hi.abs().max(1e-12)
    };
    flat(&feed.post_bins) && flat(&feed.access_bins)
}

/// Closed-form score of a feed for the metric (see [`super::alloc`]).
pub fn closed_form_score(feed: &FeedModel, metric: Metric) -> f64 {
    let lp: f64 = feed.post_bins.iter().map(|&b| b as f64).sum();
    let lc: f64 = feed.access_bins.iter().map(|&b| b as f64).sum();
    match metric {
        Metric::Delay => (feed.weight * lp).sqrt(),
        Metric::Miss => (feed.weight * lp * lc).sqrt(),
        Metric::AccessDelay => (feed.weight * lp * lc).cbrt(),
    }
}

/// The optimal allocator's starting score (rate ∝ score), where it differs from the closed
/// form: it only places the start of the price search and the exchange, which find the same
/// optimum from any start, but every level a feed's walk passes on the way is an exact solve.
///
/// For `delay`, `m` fetches spaced by `g(t)` cost about `∫ λ g / 2` under the rate profile
/// `λ(t)`; with `∫ 1/g = m` that is least at `g ∝ 1/√λ`, where it is `(∫ √λ)² / (2m)`. So
/// over feeds `m ∝ √w · ∫ √λ`, which is the closed form's `√(w Λ)` for a flat profile and
/// less for a peaked one (its fetches can crowd the peak). From the closed form, 40% of the
/// 20,000 feeds of a synthetic trace ended two or more levels away and were solved twice;
/// from this score the plan makes 10% fewer exact solves (100,000 feeds: 386,874 → 347,502)
/// and the same schedules. The other metrics keep the closed form.
pub(super) fn start_score(feed: &FeedModel, metric: Metric) -> f64 {
    match metric {
        Metric::Delay => {
            let root_sum: f64 = feed
                .post_bins
                .iter()
                .map(|&b| (b.max(0.0) as f64).sqrt())
                .sum();
            feed.weight.max(0.0).sqrt() * root_sum
        }
        _ => closed_form_score(feed, metric),
    }
}

/// Solves the planning problem.
pub fn solve(feeds: &[FeedModel], cfg: &PlanConfig) -> Result<Plan, AllocError> {
    if cfg.policy == Policy::Optimal {
        return Ok(solve_optimal_with_state(feeds, cfg)?.plan);
    }
    let alloc_feeds = alloc_inputs(feeds, cfg);
    let allocator = Allocator::new(&alloc_feeds, cfg.budget, cfg.host_caps.clone())?;
    let levels = match cfg.policy {
        Policy::Uniform | Policy::SchedOnly => allocator.uniform(),
        _ => allocator.closed_form(),
    };
    Ok(assemble(
        feeds,
        cfg,
        &levels,
        Reuse::Nothing,
        AllocStats::default(),
    ))
}

/// A feed's plan from its level, slots and weighted cost.
pub(super) fn feed_plan(
    index: usize,
    level: Level,
    slots: Vec<u32>,
    expected_cost: f64,
) -> FeedPlan {
    let k = level_period_multiple(level);
    // Quiet feeds fetched every k periods are spread over the k periods of their cycle.
    let phase_period = if k > 1 {
        phase(index.wrapping_mul(31), k as usize) as u32
    } else {
        0
    };
    FeedPlan {
        level,
        slots,
        period_multiple: k,
        phase_period,
        expected_cost,
    }
}

/// The schedule of one feed at its allocated level; the flag reports a search fallback.
fn schedule_feed(
    index: usize,
    feed: &FeedModel,
    level: Level,
    cfg: &PlanConfig,
    optimize_times: bool,
    s: &mut Scratch,
) -> (FeedPlan, bool) {
    let table = table_for(feed, index, cfg, s);
    let n = cfg.slots;
    let k = level_period_multiple(level);
    let mut fell_back = false;
    let (slots, cost) = if !optimize_times {
        if level >= 1 {
            let m = level as usize;
            let slots = uniform_slots(n, m, phase(index, n / m.min(n)));
            let c = table.schedule_cost(&slots);
            (slots, c)
        } else {
            let a = phase(index, n);
            (vec![a as u32], table.multi_period_cost(a, k))
        }
    } else {
        match (cfg.scheduler, level >= 1) {
            (Scheduler::Paper { tol_slots }, true) => {
                match condition_search(&table, &s.post, &s.access, level as usize, tol_slots)
                    .schedule
                {
                    Some(found) => (found.slots, found.cost),
                    None => {
                        fell_back = true;
                        level_cost(&table, level, &mut s.solver)
                    }
                }
            }
            _ => level_cost(&table, level, &mut s.solver),
        }
    };
    let unpriced = (cost - table.price_of(&slots, k)).max(0.0);
    s.keep_table(table);
    (
        feed_plan(index, level, slots, feed.weight * unpriced),
        fell_back,
    )
}

/// What an optimal plan keeps for the next replan: levels, the known points of every
/// feed's cost curve, and the per-feed plans.
#[derive(Clone, Debug)]
pub struct PlanState {
    levels: Vec<Level>,
    caches: Vec<CurveCache>,
    plan: Plan,
    prices: super::Prices,
}

impl PlanState {
    /// The current plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The prices of a fetch the last solve settled at: what [`super::single::resolve_one`]
    /// re-solves one feed with.
    pub fn prices(&self) -> &super::Prices {
        &self.prices
    }
}

/// Solves with the optimal policy and keeps the state for incremental replans.
pub fn solve_optimal_with_state(
    feeds: &[FeedModel],
    cfg: &PlanConfig,
) -> Result<PlanState, AllocError> {
    let cfg = PlanConfig {
        policy: Policy::Optimal,
        ..cfg.clone()
    };
    let alloc_feeds = alloc_inputs(feeds, &cfg);
    let allocator = Allocator::new(&alloc_feeds, cfg.budget, cfg.host_caps.clone())?;
    let start = allocator.closed_form();
    let mut caches: Vec<CurveCache> = (0..feeds.len()).map(|_| CurveCache::new()).collect();
    let result = allocator.solve_from(start, &mut caches, &curve_eval(feeds, &cfg));
    let plan = assemble(
        feeds,
        &cfg,
        &result.levels,
        Reuse::Curves(&caches),
        result.stats,
    );
    Ok(PlanState {
        levels: result.levels,
        caches,
        plan,
        prices: result.prices,
    })
}

/// Re-solves after the models of `changed` feeds changed (same feeds, same settings):
/// only their cost curves are recomputed, the exchange restarts from the previous
/// allocation, and only feeds whose model or level changed are rescheduled.
pub fn replan(
    feeds: &[FeedModel],
    cfg: &PlanConfig,
    state: &mut PlanState,
    changed: &[usize],
) -> Result<(), AllocError> {
    assert_eq!(
        feeds.len(),
        state.levels.len(),
        "replan needs the same feeds; solve afresh otherwise"
    );
    let cfg = PlanConfig {
        policy: Policy::Optimal,
        ..cfg.clone()
    };
    let alloc_feeds = alloc_inputs(feeds, &cfg);
    let allocator = Allocator::new(&alloc_feeds, cfg.budget, cfg.host_caps.clone())?;
    let mut dirty = vec![false; feeds.len()];
    for &i in changed {
        dirty[i] = true;
        state.caches[i] = CurveCache::new();
    }
    // A changed feed restarts where the proportional start puts it at the rate per unit of
    // score the unchanged feeds hold now: its old level can be many steps from its new
    // optimum, and every step the price's walks take toward it is an exact solve (1,000 of
    // 100,000 feeds given a busy hour walked eight levels each and the replan took 1.4 s).
    let (rate, score) = (0..feeds.len())
        .filter(|&i| !dirty[i])
        .fold((0.0, 0.0), |(r, s), i| {
            (
                r + level_rate(state.levels[i]),
                s + alloc_feeds[i].score.max(0.0),
            )
        });
    // With no unchanged feed holding score (every feed changed, as after a step of the
    // days' prices re-prices them all), there is no rate to read: each changed feed then
    // starts from its last level, which is where a re-priced plan mostly stays.
    let per_score = (score > 0.0).then(|| rate / score);
    for &i in changed {
        let (min, max) = (feeds[i].min_level, feeds[i].max_level);
        let estimate = per_score
            .map(|p| p * alloc_feeds[i].score.max(0.0))
            .filter(|e| e.is_finite());
        state.levels[i] = match estimate {
            Some(estimate) => floor_level(estimate, min),
            None => state.levels[i],
        }
        .clamp(min, max);
    }
    let result = allocator.solve_from(
        state.levels.clone(),
        &mut state.caches,
        &curve_eval(feeds, &cfg),
    );
    for (i, (&old, &new)) in state.levels.iter().zip(&result.levels).enumerate() {
        dirty[i] |= old != new;
    }
    let previous = std::mem::take(&mut state.plan.feeds);
    state.plan = assemble(
        feeds,
        &cfg,
        &result.levels,
        Reuse::Previous {
            plans: &previous,
            dirty: &dirty,
            curves: &state.caches,
        },
        result.stats,
    );
    state.levels = result.levels;
    state.prices = result.prices;
    Ok(())
}

fn alloc_inputs(feeds: &[FeedModel], cfg: &PlanConfig) -> Vec<AllocFeed> {
    feeds
        .iter()
        .map(|f| AllocFeed {
            score: if cfg.policy == Policy::Optimal {
                start_score(f, cfg.metric)
            } else {
                closed_form_score(f, cfg.metric)
            },
            min: f.min_level,
            max: f.max_level,
            host: f.host,
        })
        .collect()
}

fn curve_eval<'a>(
    feeds: &'a [FeedModel],
    cfg: &'a PlanConfig,
) -> impl Fn(usize, &[Level]) -> Vec<CurvePoint> + Sync + 'a {
    move |i: usize, levels: &[Level]| {
        thread_local! { static S: std::cell::RefCell<Scratch> = Default::default(); }
        S.with(|s| exact_points(&feeds[i], i, cfg, levels, &mut s.borrow_mut()))
    }
}

/// What `assemble` may reuse instead of scheduling a feed again.
#[derive(Clone, Copy)]
enum Reuse<'a> {
    /// Nothing: schedule every feed.
    Nothing,
    /// The exchange's curve points, which carry the optimal slots of each evaluated level.
    Curves(&'a [CurveCache]),
    /// A previous plan for clean feeds, curve points for the others.
    Previous {
        plans: &'a [FeedPlan],
        dirty: &'a [bool],
        curves: &'a [CurveCache],
    },
}

/// Schedules every feed (or, with `reuse`, only the dirty ones) and sums the plan up.
fn assemble(
    feeds: &[FeedModel],
    cfg: &PlanConfig,
    levels: &[Level],
    reuse: Reuse<'_>,
    alloc: AllocStats,
) -> Plan {
    let optimize_times = !matches!(cfg.policy, Policy::Uniform | Policy::AllocOnly);
    let results: Vec<(FeedPlan, bool)> = feeds
        .par_iter()
        .zip(levels.par_iter())
        .enumerate()
        .map_init(Scratch::default, |s, (i, (feed, &level))| {
            let curves = match reuse {
                Reuse::Previous { plans, dirty, .. } if !dirty[i] => {
                    return (plans[i].clone(), false)
                }
                Reuse::Previous { curves, .. } | Reuse::Curves(curves) => Some(curves),
                Reuse::Nothing => None,
            };
            let (plan, fell_back) = match curves.and_then(|c| c[i].get(level)) {
                Some(p) => {
                    if let Reuse::Previous { plans, .. } = reuse {
                        if let Some(kept) =
                            super::keep::keep_previous(&plans[i], feed, i, level, p, cfg, s)
                        {
                            return (kept, false);
                        }
                    }
                    (feed_plan(i, level, p.slots.to_vec(), p.delay), false)
                }
                None => schedule_feed(i, feed, level, cfg, optimize_times, s),
            };
            if optimize_times {
                (super::jitter::rotate(plan, feed, i, cfg, s), fell_back)
            } else {
                (plan, fell_back)
            }
        })
        .collect();
    let mut stats = PlanStats {
        alloc,
        search_fallbacks: 0,
        crowding: None,
    };
    let mut plans = Vec::with_capacity(results.len());
    for (p, fell_back) in results {
        stats.search_fallbacks += fell_back as usize;
        plans.push(p);
    }
    if let Reuse::Previous {
        plans: previous, ..
    } = reuse
    {
        // A feed still fetched every k periods keeps last round's day of the cycle, so
        // the balance below moves only the feeds it must.
        for (p, old) in plans.iter_mut().zip(previous) {
            if p.period_multiple > 1 && p.period_multiple == old.period_multiple {
                p.phase_period = old.phase_period;
            }
        }
    }
    super::phases::balance(&mut plans);
    if let Some(cap) = cfg.slot_capacity {
        stats.crowding = Some(super::crowd::level(&mut plans, feeds, cfg, cap));
    }
    let expected_cost = plans.iter().map(|p| p.expected_cost).sum();
    let fetches_per_period = plans.iter().map(|p| level_rate(p.level)).sum();
    Plan {
        feeds: plans,
        expected_cost,
        fetches_per_period,
        stats,
    }
}
