//! From what fetches observed to what workers should fetch: per-feed models, the plan, and
//! the plan as fetch times.
//!
//! The rules are the offline learner's ([`crate::learn`]) applied to live observations,
//! where each feed has its own observed span instead of one training window:
//! * hourly posting counts of the learning window over the days each hour was actually
//!   watched, shrunk toward the pooled shape of all feeds by pseudo-days (so an hour not
//!   yet watched is not read as a quiet one), chosen on held-out days ([`super::shrink`]);
//!   a clump (more postings in one hour of one day than that hour on the feed's other days
//!   makes plausible) counts at its hour only up to that, and its excess at the feed's
//!   usual hours ([`super::population::tally`]);
//! * rate = (postings + pseudo-days × the typical rate) / (observed days + pseudo-days), so a
//!   feed seen briefly is neither read as posting every hour nor starved as a quiet one; a
//!   feed never answered gets the typical (median) rate;
//! * a feed with fewer than `explore_min_postings` observed postings is fetched at least
//!   once a day until its rate is known;
//! * reader access rates come from the access statistics, shrunk toward a pooled prior
//!   while they are young ([`super::readers`]), so reader metrics work from a cold start.
//!
//! [`Replanner`] keeps the optimal policy's state between rounds, so a round where only a
//! few feeds' models changed re-solves only those feeds ([`crate::plan::planner::replan`]).

#[cfg(test)]
use super::feedstate::FeedState;
pub(crate) use super::models::hour_exposure;
pub use super::models::{models, ModelCounts};
use super::FeedSpec;
use crate::plan::alloc::{floor_level, level_rate, AllocError, Level};
use crate::plan::cost::Metric;
use crate::plan::days::{cost_per_fetch, fetches_per_day, DayPrices};
use crate::plan::pattern::Peak;
use crate::plan::planner::{
    self, drop_raised_floors_unless_they_fit, DayPricing, FeedModel, FeedPlan, PlanConfig,
    PlanState, Policy,
};
use crate::registry::FeedRecord;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

#[cfg(test)]
use crate::time::DAY_MS;
#[cfg(test)]
const BINS: usize = 24;

pub use super::settings::{
    parse_lost_posting_hours, Budget, LostPostingArg, PlannerSettings, DEFAULT_EXPLORE_SHARE,
    DEFAULT_LOST_POSTING_HOURS, DEFAULT_MIXTURE_MIN_PER_DAY, DEFAULT_SHAPE_MIXTURE,
    DEFAULT_SHAPE_PSEUDO_POSTINGS, MAX_SHAPE_MIXTURE, MAX_SHAPE_PSEUDO_POSTINGS,
};

/// What one planning round produced.
#[derive(Clone, Debug)]
pub struct PlanOutcome {
    /// Fetch times per feed id.
    pub specs: BTreeMap<String, FeedSpec>,
    /// The model's expected weighted cost per day (seconds of delay for `delay`).
    pub expected_cost: f64,
    /// The model's expected weighted postings per day (Σ weight × rate over the planned
    /// feeds): what `expected_cost` is spread over, so that their ratio is the delay per
    /// posting the plan expects under its own rates.
    pub expected_postings_per_day: f64,
    /// Postings the plan expects to scroll off its feeds' documents unseen per day, under its
    /// own rates ([`crate::plan::overflow`]; feeds whose document size is known).
    pub expected_lost_per_day: f64,
    /// Planned fetches per day.
    pub fetches_per_day: f64,
    /// Budget per day, as configured.
    pub budget_per_day: f64,
    /// Share of it this round planned with (below 1 when the day's fetches so far spent
    /// the rest).
    pub budget_share: f64,
    /// Feeds whose model changed and were re-solved (all of them on a fresh solve).
    pub resolved: usize,
    /// Whether this round solved from scratch.
    pub fresh: bool,
    /// Budget the hosts could not carry, if their caps bound.
    pub host_limited: HostLimited,
    /// What levelling against the per-slot capacity did (`None` without one).
    pub crowding: Option<crate::plan::crowd::CrowdStats>,
    /// The days' prices the plan was solved at (none for a daily plan): stored with it, so
    /// that a next leader plans at them from its first round ([`Replanner::resume_day_prices`]).
    pub day_prices: DayPricing,
}

/// How far host capacity held the plan below its budget.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostLimited {
    /// Hosts planned within one fetch a day of their cap.
    pub hosts_at_cap: usize,
    /// Hosts with feeds.
    pub hosts: usize,
    /// Fetches per day of the budget left unplanned (0 when the budget is spent).
    pub unspent_per_day: f64,
    /// Feeds whose minimum (or exploration floor) was lowered because their host cannot
    /// carry the minimums of all its feeds.
    pub floors_lowered: usize,
}

/// Lowers the minimum levels of the feeds of hosts whose cap cannot carry them: first the
/// exploration floors (down to the configured minimum), then the minimum itself, to the
/// even share of the cap. A host holding more feeds than its politeness allows to be
/// fetched daily is then planned with what it can take rather than failing the whole plan.
/// Returns the feeds lowered.
fn fit_host_minimums(models: &mut [FeedModel], cfg: &PlanConfig, configured_min: Level) -> usize {
    let mut by_host: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, m) in models.iter().enumerate() {
        if let Some(h) = m.host {
            by_host.entry(h).or_default().push(i);
        }
    }
    let mut lowered = vec![false; models.len()];
    for (h, members) in by_host {
        let Some(cap) = cfg.host_caps.cap(h) else {
            continue;
        };
        let need = |models: &[FeedModel]| -> f64 {
            members
                .iter()
                .map(|&i| level_rate(models[i].min_level))
                .sum()
        };
        if need(models) <= cap + 1e-9 {
            continue;
        }
        for &i in &members {
            if models[i].min_level > configured_min {
                models[i].min_level = configured_min;
                lowered[i] = true;
            }
        }
        if need(models) <= cap + 1e-9 {
            continue;
        }
        // Once every k days with k the smallest whole number that fits all of them.
        let share = floor_level(cap / members.len() as f64, Level::MIN / 4);
        for &i in &members {
            if models[i].min_level > share {
                models[i].min_level = share;
                lowered[i] = true;
            }
        }
    }
    lowered.iter().filter(|&&l| l).count()
}

struct Last {
    ids: Vec<String>,
    models: Vec<FeedModel>,
    state: PlanState,
    caps: HashMap<u32, f64>,
    /// The budget (fetches per period) it was planned with.
    budget: f64,
    /// The days' prices it was planned at (none for a daily plan).
    day_prices: DayPricing,
    /// The per-slot capacity it was levelled to.
    slot_capacity: Option<f64>,
}

/// Plans round after round, re-solving only what changed under the optimal policy.
pub struct Replanner {
    settings: PlannerSettings,
    last: Option<Last>,
    /// Shared with readers (Admin's plan inspection) without copying or locking the
    /// replanner: a round publishes a new map, readers keep the one they took.
    view: Arc<HashMap<String, (FeedModel, FeedPlan)>>,
    /// Share of the configured budget the next round plans with ([`Self::set_budget_share`]).
    budget_share: f64,
    /// The days' prices of a plan longer than a day, kept between rounds.
    day_prices: DayPrices,
    /// The population's mixture of daily shapes, refitted daily ([`Self::models`]).
    shapes: super::shapes::ShapeCache,
    /// What the last [`Self::models`] learned of the whole population.
    population: Option<super::population::Population>,
}

/// The smallest share of its budget a round plans with, however far ahead the fetches
/// made have run.
pub const MIN_BUDGET_SHARE: f64 = 0.02;

/// The largest share: what a day that holds first sights has left, re-dealt over the rest
/// of it, when the plan's fetches so far fell short of an even spread (`hub::pacing`).
pub const MAX_BUDGET_SHARE: f64 = 1.5;

/// Fetches a day the plan leaves under the workers' daily allowance, which is the day's
/// budget rounded down (`hub::allowances`): a plan that asks on average what the allowance
/// gives fills it on every day its quiet feeds' cycles ask one more, and the fetches held
/// from those days open the next ones, a backlog that never shrinks (`plan::phases`).
pub const ALLOWANCE_HEADROOM: f64 = 0.25;

/// At most this share of a small day's budget is left as [`ALLOWANCE_HEADROOM`].
pub const ALLOWANCE_HEADROOM_SHARE: f64 = 0.01;

/// The budget per period a plan may ask for: the whole days' allowances, less
/// [`ALLOWANCE_HEADROOM`] each (at most [`ALLOWANCE_HEADROOM_SHARE`] of the day's budget)
/// when some feeds are fetched less than daily (`cycles`): only their days can ask more than
/// the average, and a plan of whole fetches a day would lose a fetch to the headroom.
fn held_budget(configured: f64, days_per_period: f64, cycles: bool) -> f64 {
    let per_day = configured / days_per_period;
    let headroom = if cycles {
        ALLOWANCE_HEADROOM.min(ALLOWANCE_HEADROOM_SHARE * per_day)
    } else {
        0.0
    };
    ((per_day.floor() - headroom).max(0.0) * days_per_period).min(configured)
}

/// Relative L1 change of a rate histogram below which a model counts as unchanged.
const MODEL_TOLERANCE: f64 = 0.1;

/// Steps of the days' prices, each followed by a solve at the new prices, one round makes
/// at most for a plan longer than a day: a weekly plan of 500 feeds at four a day came
/// within 2% of even days in five steps from unpriced (`plan --period week`), and once the
/// prices hold, rounds make none. The rest of a step's work waits for the next round.
///
/// The solve after a step is a replan of every feed (`planner::replan`), not a fresh solve:
/// each feed's cost curve is recomputed at the new prices, the allocation starts from the
/// last one, and a feed whose times cost at most 0.1% more than its new optimum keeps them.
/// The days of a live plan are never within 2% for long (each round's models and budget
/// share move them a few percent), so most rounds step; solved afresh, each step moved
/// feeds' fetches between days and hours where their times had served. At one fetch a day
/// on a population posting a tenth as much at weekends (`replay --weekly`, 500 feeds) the
/// weekly plan realized 379.56 min on days 14–27 with fresh solves and 357.76 replanned
/// (the daily plan 349.09), the allowance holding 10.3% of its fetches instead of 13.6%;
/// the same plan frozen after day 14 beat the daily one on the weekdays by 5%
/// (docs/EXPERIMENTS.md, "Weekly day prices: a step replans").
const DAY_PRICE_STEPS_PER_ROUND: usize = 3;

/// Budget shares ([`Replanner::set_budget_share`]) of the rounds whose plans step the
/// days' prices. The prices answer how the configured budget spreads over the week; a
/// round that refills the rest of a day (share up to 1.5) or pays back fetches made ahead
/// (down to 0.02) plans at another budget, whose balance is not the budget's: at a share of
/// 0.036 a weekly plan of 500 feeds asked 71 fetches a day, a handful per day of the week,
/// and the steps taken on them left the next rounds at the whole budget asking 4.2 times a
/// day's budget of one day and 3% of another, for a day of rounds until the prices came
/// back. Such rounds plan at the prices as they stand.
const DAY_PRICE_SHARES: std::ops::RangeInclusive<f64> = 0.8..=1.25;

fn close(a: &[f32], b: &[f32]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff: f64 = a.iter().zip(b).map(|(x, y)| (x - y).abs() as f64).sum();
    let size: f64 = b.iter().map(|y| y.abs() as f64).sum();
    diff <= MODEL_TOLERANCE * size.max(1e-6)
}

/// Whether two feeds' peaks would place fetches alike: as many windows, each within a
/// minute of its counterpart and with a share within the model tolerance.
fn close_peaks(a: &[Peak], b: &[Peak]) -> bool {
    const MINUTE: f32 = 1.0 / 1440.0;
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            (a.start - b.start).abs() <= MINUTE
                && ((a.start + a.width) - (b.start + b.width)).abs() <= MINUTE
                && f64::from((a.share - b.share).abs()) <= MODEL_TOLERANCE
        })
}

/// Whether a new model differs enough from the one planned with to re-solve the feed.
/// Observed spans grow and the pooled shape drifts a little every round, so exact
/// comparison would re-solve every feed every round.
fn same_model(new: &FeedModel, old: &FeedModel) -> bool {
    new.weight == old.weight
        && new.min_level == old.min_level
        && new.max_level == old.max_level
        && new.host == old.host
        && close(&new.post_bins, &old.post_bins)
        && close_peaks(&new.peaks, &old.peaks)
        && close(&new.access_bins, &old.access_bins)
}

impl Replanner {
    /// A replanner with fixed settings.
    pub fn new(settings: PlannerSettings) -> Self {
        Replanner {
            settings,
            shapes: super::shapes::ShapeCache::default(),
            population: None,
            last: None,
            view: Arc::default(),
            budget_share: 1.0,
            day_prices: DayPrices::default(),
        }
    }

    /// Plans the next rounds with `share` (clamped to [[`MIN_BUDGET_SHARE`],
    /// [`MAX_BUDGET_SHARE`]], and never below what the minimums need) of the configured
    /// budget: what is left after paying back fetches made ahead of it, or above 1 what a
    /// day with first sights has left over the rest of it (`hub::pacing`). The outcome
    /// still reports the configured budget.
    pub fn set_budget_share(&mut self, share: f64) {
        self.budget_share = if share.is_finite() {
            share.clamp(MIN_BUDGET_SHARE, MAX_BUDGET_SHARE)
        } else {
            1.0
        };
    }

    /// Replaces the settings; the next round solves afresh.
    pub fn set_settings(&mut self, settings: PlannerSettings) {
        self.settings = settings;
        self.last = None;
    }

    /// The days' prices the next round starts from (none for a daily plan, or before a
    /// weekly plan's first step).
    pub fn day_prices(&self) -> &DayPricing {
        &self.day_prices.pricing
    }

    /// Takes up prices a plan of these settings' period was solved at before (a
    /// predecessor's, read from the stored plan), so that a weekly plan is not unpriced
    /// again for its first rounds: those would ask the weekdays more than their allowances
    /// and the workers would hold the excess. Refused (`false`, nothing changes) when they
    /// are for another number of days, or negative or not finite.
    pub fn resume_day_prices(&mut self, pricing: DayPricing) -> bool {
        if pricing.prices.len() as f64 != self.settings.days_per_period() {
            return false;
        }
        match DayPrices::resumed(pricing) {
            Some(p) => {
                self.day_prices = p;
                true
            }
            None => false,
        }
    }

    /// A feed's model and plan from the last round.
    pub fn inspect(&self, feed: &str) -> Option<&(FeedModel, FeedPlan)> {
        self.view.get(feed)
    }

    /// Every feed's model and plan from the last round.
    pub fn view(&self) -> Arc<HashMap<String, (FeedModel, FeedPlan)>> {
        self.view.clone()
    }

    /// The settings.
    pub fn settings(&self) -> &PlannerSettings {
        &self.settings
    }

    /// Every feed's model under these settings ([`models`]), with the population's mixture
    /// of daily shapes kept between rounds.
    pub fn models<S: std::borrow::Borrow<super::feedstate::FeedState> + Sync>(
        &mut self,
        feeds: &[FeedRecord],
        states: &HashMap<String, S>,
        access_bins: &(dyn Fn(&str) -> Vec<f32> + Sync),
        now_ms: i64,
    ) -> (Vec<FeedModel>, ModelCounts) {
        let (models, counts, population) = super::models::learn(
            feeds,
            states,
            access_bins,
            now_ms,
            &self.settings,
            &mut self.shapes,
        );
        self.population = Some(population);
        (models, counts)
    }

    /// What one feed is re-solved with between rounds ([`super::quick`]): the population
    /// of the last [`Self::models`] and the prices of the last optimal plan. `None` before
    /// both, and under the other policies (they have no price).
    pub fn quick_basis(&self) -> Option<super::quick::Basis> {
        let last = self.last.as_ref()?;
        if self.settings.policy != Policy::Optimal || last.state.prices().budget.is_none() {
            return None;
        }
        let cfg = self.settings.plan_config(last.ids.len());
        let occupancy = cfg
            .slot_capacity
            .map(|_| crate::plan::occupancy::Occupancy::of(&last.state.plan().feeds, cfg.slots));
        Some(super::quick::Basis {
            population: self.population.clone()?,
            prices: last.state.prices().clone(),
            cfg,
            occupancy,
        })
    }

    /// Plans `feeds` with `models` (same order). Pure computation: call it off the async
    /// threads.
    pub fn plan(
        &mut self,
        feeds: &[FeedRecord],
        models: Vec<FeedModel>,
    ) -> Result<PlanOutcome, AllocError> {
        self.plan_with_caps(feeds, models, HashMap::new())
    }

    /// [`Replanner::plan`] with per-host caps (fetches per day, by the models' host index)
    /// below the settings' default: hosts that throttled us. A change of these caps solves
    /// afresh.
    pub fn plan_with_caps(
        &mut self,
        feeds: &[FeedRecord],
        models: Vec<FeedModel>,
        host_caps: HashMap<u32, f64>,
    ) -> Result<PlanOutcome, AllocError> {
        let mut cfg = self.settings.plan_config(feeds.len());
        let configured_budget = cfg.budget;
        // Never below what the configured minimums need: that plan could not be made.
        let minimums = feeds.len() as f64 * level_rate(self.settings.levels().0);
        let days = self.settings.days_per_period();
        // Whether the last plan fetched some feeds less than daily (see `held_budget`).
        let cycles = self.view.values().any(|(_, p)| p.period_multiple > 1);
        let above = self.budget_share.max(1.0);
        cfg.budget = (configured_budget * self.budget_share)
            .min(held_budget(configured_budget, days, cycles) * above)
            .max(minimums)
            .min(configured_budget * above);
        let share = cfg.budget / configured_budget;
        for (h, cap) in &host_caps {
            let cap = cap * days;
            let cap = cfg.host_caps.default.map_or(cap, |d| d.min(cap));
            cfg.host_caps.per_host.insert(*h, cap);
        }
        let ids: Vec<String> = feeds.iter().map(|f| f.id.clone()).collect();
        let mut models = models;
        let configured_min = self.settings.levels().0;
        let floors_lowered = fit_host_minimums(&mut models, &cfg, configured_min)
            // Raised floors (exploration, document capacity) the budget cannot carry together go
            // back to the configured minimum, all of them.
            + drop_raised_floors_unless_they_fit(&mut models, configured_min, cfg.budget);
        let hosts: Vec<Option<u32>> = models.iter().map(|m| m.host).collect();
        let days_priced = self.settings.policy == Policy::Optimal && cfg.days_per_period() > 1;
        if days_priced {
            if self.day_prices.pricing.prices.len() != cfg.days_per_period() {
                self.day_prices = DayPrices::new(cfg.days_per_period());
            }
            cfg.day_prices.clone_from(&self.day_prices.pricing);
        }
        let (mut plan, mut resolved, fresh) = if self.settings.policy != Policy::Optimal {
            let plan = planner::solve(&models, &cfg)?;
            self.view = Arc::new(
                ids.iter()
                    .cloned()
                    .zip(models.into_iter().zip(plan.feeds.iter().cloned()))
                    .collect(),
            );
            (plan, feeds.len(), true)
        } else {
            match self.last.take() {
                Some(mut last)
                    if last.ids == ids
                        && last.caps == host_caps
                        && last.day_prices == cfg.day_prices
                        && last.slot_capacity == cfg.slot_capacity =>
                {
                    let changed: Vec<usize> = (0..models.len())
                        .filter(|&i| !same_model(&models[i], &last.models[i]))
                        .collect();
                    // Unchanged feeds keep the model they were planned with, so small drifts
                    // add up until they matter instead of being lost.
                    let mut models = models;
                    for (i, m) in models.iter_mut().enumerate() {
                        if changed.binary_search(&i).is_err() {
                            *m = last.models[i].clone();
                        }
                    }
                    // A budget share that moved re-runs the allocation even when no model did.
                    if !changed.is_empty() || last.budget != cfg.budget {
                        planner::replan(&models, &cfg, &mut last.state, &changed)?;
                    }
                    let plan = last.state.plan().clone();
                    let n = changed.len();
                    self.last = Some(Last {
                        ids: ids.clone(),
                        models,
                        state: last.state,
                        caps: host_caps,
                        budget: cfg.budget,
                        day_prices: cfg.day_prices.clone(),
                        slot_capacity: cfg.slot_capacity,
                    });
                    (plan, n, false)
                }
                _ => {
                    let state = planner::solve_optimal_with_state(&models, &cfg)?;
                    let plan = state.plan().clone();
                    self.last = Some(Last {
                        ids: ids.clone(),
                        models,
                        state,
                        caps: host_caps,
                        budget: cfg.budget,
                        day_prices: cfg.day_prices.clone(),
                        slot_capacity: cfg.slot_capacity,
                    });
                    (plan, feeds.len(), true)
                }
            }
        };
        // A plan longer than a day must ask each day its share: the workers hold every UTC
        // day to the day's budget. Prices step toward even days and the plan is solved
        // again at them, a few times a round at most; they are kept for the next round, as
        // the weekly pattern they answer repeats (`plan::days`).
        let steps = days_priced && DAY_PRICE_SHARES.contains(&share);
        if let (true, Some(last)) = (steps, self.last.as_mut()) {
            for _ in 0..DAY_PRICE_STEPS_PER_ROUND {
                let per_day = fetches_per_day(&plan, &cfg);
                if !self.day_prices.step(&per_day, cost_per_fetch(&plan)) {
                    break;
                }
                cfg.day_prices.clone_from(&self.day_prices.pricing);
                // Every feed's curve is priced anew; with none left unchanged, `replan`
                // starts each from its last level ([`DAY_PRICE_STEPS_PER_ROUND`]).
                let every: Vec<usize> = (0..last.models.len()).collect();
                planner::replan(&last.models, &cfg, &mut last.state, &every)?;
                last.day_prices.clone_from(&cfg.day_prices);
                plan = last.state.plan().clone();
                resolved = feeds.len();
            }
        }
        if let Some(last) = &self.last {
            self.view = Arc::new(
                ids.iter()
                    .cloned()
                    .zip(last.models.iter().cloned().zip(plan.feeds.iter().cloned()))
                    .collect(),
            );
        }
        let mut host_limited = host_limited(&plan.feeds, &hosts, &cfg);
        host_limited.floors_lowered = floors_lowered;
        let specs = feeds
            .iter()
            .zip(&plan.feeds)
            .map(|(f, p)| {
                let model = self.view.get(&f.id).map(|(m, _)| m);
                let flat_model = model.is_some_and(|m| flat(m, cfg.metric));
                let timed = model.is_some_and(|m| !m.peaks.is_empty());
                let (offsets, period) = fetch_times(&f.id, p, flat_model, &cfg);
                let spec = FeedSpec {
                    id: f.id.clone(),
                    url: f.url.clone(),
                    host: f.host.clone(),
                    offsets_seconds: offsets,
                    period_seconds: period,
                    // Unix epoch: midnight UTC, and a fixed origin for multi-day periods.
                    origin_unix_ms: 0,
                    timed,
                    ..Default::default()
                };
                (f.id.clone(), spec)
            })
            .collect();
        host_limited.unspent_per_day /= days;
        // What the plan expects its feeds' documents to lose (priced or not).
        let expected_lost: f64 = self
            .view
            .values()
            .map(|(m, p)| planner::expected_lost(m, &cfg, p))
            .sum();
        let expected_postings: f64 = self
            .view
            .values()
            .map(|(m, _)| m.weight * m.post_bins.iter().map(|&b| b as f64).sum::<f64>())
            .sum();
        Ok(PlanOutcome {
            specs,
            expected_cost: plan.expected_cost / days,
            expected_postings_per_day: expected_postings / days,
            expected_lost_per_day: expected_lost / days,
            fetches_per_day: plan.fetches_per_period / days,
            budget_per_day: configured_budget / days,
            budget_share: share,
            resolved,
            fresh,
            host_limited,
            crowding: plan.stats.crowding.clone(),
            day_prices: cfg.day_prices,
        })
    }
}

/// A feed's plan as fetch times: offsets (seconds, ascending) within a period of the
/// returned length, from midnight UTC. A `flat` model's times are turned by a share of
/// their gap of its own ([`spread_turn`]).
pub(crate) fn fetch_times(id: &str, p: &FeedPlan, flat: bool, cfg: &PlanConfig) -> (Vec<f64>, f64) {
    let slot = cfg.period_seconds / cfg.slots as f64;
    let base = p.phase_period as f64 * cfg.period_seconds;
    // A plan levelled against a per-slot capacity already placed every fetch, flat ones
    // spread by the rotation; turning them here would undo the levelling.
    let turn = if flat && cfg.slot_capacity.is_none() {
        spread_turn(id, p.slots.len(), cfg.slots)
    } else {
        0
    };
    let mut offsets: Vec<f64> = p
        .slots
        .iter()
        .map(|&s| base + ((s as usize + turn) % cfg.slots) as f64 * slot)
        .collect();
    offsets.sort_by(f64::total_cmp);
    (offsets, p.period_multiple as f64 * cfg.period_seconds)
}

/// Whether a model's cost is the same at every rotation of its schedule: postings alike in
/// every hour (a population before its first posting), and for the reader metrics readers
/// alike too. The solver's choice (from midnight) would then be every such feed's.
pub(crate) fn flat(m: &FeedModel, metric: Metric) -> bool {
    let alike = |v: &[f32]| {
        v.windows(2)
            .all(|w| (w[0] - w[1]).abs() <= 1e-6 * w[0].abs().max(1e-9))
    };
    alike(&m.post_bins) && (metric == Metric::Delay || alike(&m.access_bins))
}

/// Slots a flat model's schedule of `fetches` a period is turned by: a fixed pseudo-random
/// share of its gap, from its id, so a new population's feeds are not all fetched at
/// midnight and a feed keeps its turn from round to round.
fn spread_turn(id: &str, fetches: usize, slots: usize) -> usize {
    let gap = slots / fetches.max(1);
    if gap <= 1 {
        return 0;
    }
    // FNV-1a: stable across builds and platforms, unlike the std hasher.
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    (h % gap as u64) as usize
}

/// Which hosts the plan filled to their cap, and what budget it could not place.
fn host_limited(plans: &[FeedPlan], hosts: &[Option<u32>], cfg: &PlanConfig) -> HostLimited {
    let planned: f64 = plans.iter().map(|p| level_rate(p.level)).sum();
    let mut per_host: HashMap<u32, f64> = HashMap::new();
    for (p, h) in plans.iter().zip(hosts) {
        if let Some(h) = h {
            *per_host.entry(*h).or_default() += level_rate(p.level);
        }
    }
    let hosts_at_cap = per_host
        .iter()
        .filter(|(h, &u)| cfg.host_caps.cap(**h).is_some_and(|cap| u > cap - 1.0))
        .count();
    HostLimited {
        hosts_at_cap,
        hosts: per_host.len(),
        unspent_per_day: (cfg.budget - planned).max(0.0),
        floors_lowered: 0,
    }
}

#[cfg(test)]
#[path = "relearn_tests.rs"]
mod tests;
