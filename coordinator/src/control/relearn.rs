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
use crate::plan::alloc::{ceil_level, floor_level, level_rate, AllocError, HostCaps, Level};
use crate::plan::cost::Metric;
use crate::plan::pattern::Smoothing;
use crate::plan::planner::{self, FeedModel, FeedPlan, PlanConfig, PlanState, Policy, Scheduler};
use crate::registry::FeedRecord;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

#[cfg(test)]
use crate::time::DAY_MS;
#[cfg(test)]
const BINS: usize = 24;

/// How the fetch budget is given.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// Average fetches per feed per day (scales with the number of feeds).
    PerFeedPerDay(f64),
    /// Total fetches per day.
    PerDay(f64),
}

impl Budget {
    /// Fetches per day for `feeds` feeds.
    pub fn per_day(self, feeds: usize) -> f64 {
        match self {
            Budget::PerFeedPerDay(x) => x * feeds as f64,
            Budget::PerDay(m) => m,
        }
    }
}

/// Planner settings of the live system.
#[derive(Clone, Debug)]
pub struct PlannerSettings {
    /// Objective.
    pub metric: Metric,
    /// Policy.
    pub policy: Policy,
    /// Budget.
    pub budget: Budget,
    /// Minimum fetches per feed per day (fractions: once every few days).
    pub min_fetches_per_day: f64,
    /// Maximum fetches per feed per day.
    pub max_fetches_per_day: Option<f64>,
    /// Slots per day.
    pub slots: usize,
    /// Learning window, days. 28 by default: on `real-commits` (most feeds quiet) a
    /// 28-day window realized 372 min at one fetch a day against 385 with 14 and 420 with 7,
    /// and on `sample-500` 82.1 against 85.7 (docs/RESULTS.md); each feed keeps its dated
    /// postings of the window.
    pub window_days: f64,
    /// Half-life of an observation's weight, days (0: every day of the window weighs
    /// alike). Recent postings and watched hours count more, so a feed that woke up or went
    /// quiet moves its rate within days while a long window still backs the quiet feeds.
    /// With `tune_half_life` it is chosen on the last week's observations
    /// ([`super::recency`]) and this value stands only until there are enough.
    pub half_life_days: f64,
    /// Choose the half-life on held-out recent days instead of using `half_life_days`.
    pub tune_half_life: bool,
    /// Pseudo-days of the pooled hourly pattern (at the feed's own rate) added to every
    /// hour's observations: sparse feeds and hours not yet watched lean on it.
    pub shrinkage: f64,
    /// Pseudo-postings of the pooled hourly shape each feed's hours take at least
    /// ([`super::shrink::shape_days`]): a quiet feed's few postings do not decide its
    /// fetch times alone. [`DEFAULT_SHAPE_PSEUDO_POSTINGS`] by default; 0: pseudo-days only.
    pub shape_pseudo_postings: f64,
    /// Choose the posting shrinkage on held-out days of the live observations
    /// ([`super::shrink`]) instead of using `shrinkage`, which then stands only until two
    /// whole days are watched, and for reader access rates.
    pub tune_shrinkage: bool,
    /// Feeds with fewer observed postings are candidates to be fetched at least daily.
    pub explore_min_postings: usize,
    /// Share of the budget above the minimums that exploration may take: candidates are
    /// raised to daily fetches, the most recently active first, until it is spent
    /// ([`crate::learn::explore_within`]). 0 turns exploration off.
    pub explore_share: f64,
    /// Scale each feed's rate by what feeds forecast alike a week ago went on to post
    /// ([`super::calibrate`]).
    pub calibrate_rates: bool,
    /// Fetches per day one host can take (from the workers' politeness gap, with headroom);
    /// `None` leaves hosts uncapped. A constraint of the allocation: budget that no host
    /// can carry is left unspent and reported ([`PlanOutcome::host_limited`]).
    pub host_fetches_per_day: Option<f64>,
    /// Base shapes of the mixture each feed's hours are shrunk toward
    /// ([`super::shapes`]): feeds with similar days, at any shift, share strength. 0: one
    /// pooled shape for every feed. [`DEFAULT_SHAPE_MIXTURE`] by default.
    pub shape_mixture: usize,
    /// Budget, fetches per feed per day, below which the one pooled shape is used in place
    /// of the mixture ([`DEFAULT_MIXTURE_MIN_PER_DAY`]); 0 keeps the mixture at any budget.
    pub mixture_min_per_day: f64,
    /// A level between a feed and everyone: its host's other feeds' rate and hours
    /// ([`super::siblings`]), at a strength chosen on held-out days (which may be none).
    /// Off by default: on `real-commits` with each repository as a host it cost 1–2%
    /// (docs/RESULTS.md, "A feed's host").
    pub host_level: bool,
    /// Re-solve a feed between rounds when a fetch finds postings its model did not expect
    /// ([`super::quick`]; off by default).
    pub quick_updates: bool,
    /// Plan over a week instead of a day: feeds learn day-of-week factors
    /// ([`crate::weekly`]) and schedules repeat weekly (`slots` per day, seven days).
    pub weekly: bool,
}

/// [`PlannerSettings::explore_share`]'s default. On `real-commits` at half a fetch a day
/// (live `replay`, days 14–55) 0, 2%, 5% and 15% realized 763.1, 764.1, 773.4 and 797.6 min;
/// at one and four a day the share made no difference (382.5 against 382.8; 93.95 against
/// 93.89). Exploration pays least where the budget is smallest, so it keeps a small share.
pub const DEFAULT_EXPLORE_SHARE: f64 = 0.02;

/// [`PlannerSettings::shape_pseudo_postings`]'s default. On `real-commits` (live `replay`,
/// days 14–55) the plans' promised delay over what they realized was 1.17 at two and four
/// fetches a day with pseudo-days alone, 1.07 at four a day with 4 pseudo-postings (94.3 min
/// against 94.2), 0.99 with 10 (95.2 min); 4 costs 1% at one a day (367.8 against 364.3).
pub const DEFAULT_SHAPE_PSEUDO_POSTINGS: f64 = 4.0;

/// [`PlannerSettings::shape_mixture`]'s default. On the synthetic `steady` trace at four
/// fetches a day (live `replay`, days 14–27) one pooled shape realized 91.8 min against 82.3
/// for the plans made from the generating intensities; eight shifted shapes 86.35
/// (docs/RESULTS.md). More shapes fitted no better there (`plan` under the true
/// intensities: 88.0 with 8 and with 12).
pub const DEFAULT_SHAPE_MIXTURE: usize = 8;

/// [`PlannerSettings::mixture_min_per_day`]'s default. Live `replay`, days 14 to the end, the
/// mixture of eight shapes against the one pooled shape: `steady` 878.2 against 845.9 min at
/// half a fetch per feed a day, 333.4 against 342.3 at one, 161.4 against 170.4 at two and
/// 86.3 against 91.8 at four; `bursts` 1,199.8 against 1,174.1 at half; `real-commits`
/// 763.3 against 766.4 at half and 364.1 against 367.4 at one. Below a daily fetch a feed's
/// one fetch in several days lands after its posterior peak, and a confident wrong peak
/// costs more than a right one saves.
pub const DEFAULT_MIXTURE_MIN_PER_DAY: f64 = 1.0;

/// The most base shapes a mixture may have: each adds 24 shifted shapes to every feed's
/// posterior.
pub const MAX_SHAPE_MIXTURE: usize = 64;

/// The most pseudo-postings a shape may take: a million is already every feed on the
/// pooled shape, and a larger number over a quiet feed's rate leaves the finite range.
pub const MAX_SHAPE_PSEUDO_POSTINGS: f64 = 1e6;

impl Default for PlannerSettings {
    fn default() -> Self {
        PlannerSettings {
            metric: Metric::Delay,
            policy: Policy::Optimal,
            budget: Budget::PerFeedPerDay(4.0),
            min_fetches_per_day: 1.0 / 7.0,
            max_fetches_per_day: None,
            slots: 1440,
            window_days: 28.0,
            half_life_days: 21.0,
            tune_half_life: true,
            shrinkage: 1.0,
            shape_pseudo_postings: DEFAULT_SHAPE_PSEUDO_POSTINGS,
            tune_shrinkage: true,
            explore_min_postings: 3,
            explore_share: DEFAULT_EXPLORE_SHARE,
            calibrate_rates: true,
            shape_mixture: DEFAULT_SHAPE_MIXTURE,
            mixture_min_per_day: DEFAULT_MIXTURE_MIN_PER_DAY,
            host_level: false,
            quick_updates: false,
            host_fetches_per_day: None,
            weekly: false,
        }
    }
}

impl PlannerSettings {
    /// Checks the settings, with a message naming the bad one.
    pub fn validate(&self) -> Result<(), String> {
        let per_day = match self.budget {
            Budget::PerFeedPerDay(x) | Budget::PerDay(x) => x,
        };
        if !(per_day > 0.0 && per_day.is_finite()) {
            return Err("the budget must be a positive number".into());
        }
        if !(self.min_fetches_per_day > 0.0 && self.min_fetches_per_day.is_finite()) {
            return Err("the minimum fetches per day must be positive".into());
        }
        if !(0.0..=1.0).contains(&self.explore_share) {
            return Err(format!(
                "the exploration share must be between 0 and 1, got {}",
                self.explore_share
            ));
        }
        // A minimum above one fetch per slot, or above the per-feed budget, can never be
        // planned: every replan would fail while the setting stayed in force.
        if self.min_fetches_per_day > self.slots as f64 {
            return Err(format!(
                "the minimum of {} fetches per day is more than one per slot ({} slots a day)",
                self.min_fetches_per_day, self.slots
            ));
        }
        if let Budget::PerFeedPerDay(x) = self.budget {
            // A feed takes at most one fetch per slot (a budget of 1e308 ran without end).
            if x > self.slots as f64 {
                // Written as 1e308, not as its 309 digits.
                let shown = if x < 1e15 {
                    format!("{x}")
                } else {
                    format!("{x:e}")
                };
                return Err(format!(
                    "a budget of {shown} fetches per feed per day is more than one fetch per slot ({} slots a day)",
                    self.slots
                ));
            }
            if self.min_fetches_per_day > x {
                return Err(format!(
                    "the minimum of {} fetches per feed per day is above the budget of {x}",
                    self.min_fetches_per_day
                ));
            }
        }
        if self.slots < 2 || self.slots > 100_000 {
            return Err("slots must be between 2 and 100000".into());
        }
        if self.weekly && self.slots > 2880 {
            return Err("a weekly plan takes at most 2880 slots a day (30 s)".into());
        }
        if !(self.shrinkage >= 0.0 && self.shrinkage.is_finite()) {
            return Err("the shrinkage must be a non-negative number of days".into());
        }
        if !(0.0..=MAX_SHAPE_PSEUDO_POSTINGS).contains(&self.shape_pseudo_postings) {
            return Err(format!(
                "the shape's pseudo-postings must be a number from 0 to {MAX_SHAPE_PSEUDO_POSTINGS}"
            ));
        }
        if self.shape_mixture > MAX_SHAPE_MIXTURE {
            return Err(format!(
                "the shape mixture takes at most {MAX_SHAPE_MIXTURE} base shapes, got {}",
                self.shape_mixture
            ));
        }
        if !(self.mixture_min_per_day >= 0.0 && self.mixture_min_per_day.is_finite()) {
            return Err(format!(
                "the budget below which shapes are pooled into one must be a finite number of at least 0, got {}",
                self.mixture_min_per_day
            ));
        }
        if !(self.window_days >= 1.0 && self.window_days.is_finite()) {
            return Err("the learning window must be at least one day".into());
        }
        if !(self.half_life_days >= 0.0 && self.half_life_days.is_finite()) {
            return Err("the half-life must be a non-negative number of days (0: none)".into());
        }
        if let Some(h) = self.host_fetches_per_day {
            if !(h > 0.0 && h.is_finite()) {
                return Err("the fetches per host per day must be a positive number".into());
            }
            if h < self.min_fetches_per_day {
                return Err(format!(
                    "one host can take {h:.3} fetches a day, below the per-feed minimum of {}",
                    self.min_fetches_per_day
                ));
            }
        }
        if let Some(m) = self.max_fetches_per_day {
            if !(m > 0.0 && m.is_finite()) {
                return Err("the maximum fetches per day must be a positive number".into());
            }
            if m < self.min_fetches_per_day {
                return Err("the maximum fetches per day is below the minimum".into());
            }
        }
        Ok(())
    }

    /// Days in the planning period: 7 for a weekly plan, else 1. Levels, budgets and caps
    /// inside the planner count per period; everything shown to operators counts per day.
    pub fn days_per_period(&self) -> f64 {
        if self.weekly {
            7.0
        } else {
            1.0
        }
    }

    /// Slots of the planning period.
    pub fn period_slots(&self) -> usize {
        self.slots * self.days_per_period() as usize
    }

    /// The lowest and highest level (fetches per period).
    pub(crate) fn levels(&self) -> (Level, Level) {
        let d = self.days_per_period();
        let slots = self.period_slots() as Level;
        let min = ceil_level(self.min_fetches_per_day * d);
        let max = match self.max_fetches_per_day {
            Some(b) => floor_level(b * d, min),
            None => slots,
        }
        .min(slots);
        (min, max)
    }

    pub(crate) fn plan_config(&self, feeds: usize) -> PlanConfig {
        let d = self.days_per_period();
        PlanConfig {
            metric: self.metric,
            policy: self.policy,
            scheduler: Scheduler::Exact,
            slots: self.period_slots(),
            period_seconds: 86_400.0 * d,
            // A budget above one fetch per slot for every feed cannot be placed: what no
            // feed can take is not planned for (a total budget is not per feed).
            budget: self
                .budget
                .per_day(feeds)
                // No feed yet: the configured figure, as reported.
                .min(if feeds > 0 {
                    feeds as f64 * self.slots as f64
                } else {
                    f64::INFINITY
                })
                * d,
            host_caps: HostCaps::uniform(self.host_fetches_per_day.map(|h| h * d)),
            smoothing: Smoothing::Linear,
        }
    }
}

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

/// Drops the raised floors (exploration, document capacity) back to the configured minimum
/// when together they need more than the budget; returns the feeds lowered.
fn fit_budget_minimums(models: &mut [FeedModel], cfg: &PlanConfig, configured_min: Level) -> usize {
    let need: f64 = models.iter().map(|m| level_rate(m.min_level)).sum();
    if need <= cfg.budget + 1e-9 {
        return 0;
    }
    let mut lowered = 0;
    for m in models.iter_mut().filter(|m| m.min_level > configured_min) {
        m.min_level = configured_min;
        lowered += 1;
    }
    lowered
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
    /// The population's mixture of daily shapes, refitted daily ([`Self::models`]).
    shapes: super::shapes::ShapeCache,
    /// What the last [`Self::models`] learned of the whole population.
    population: Option<super::population::Population>,
}

/// The smallest share of its budget a round plans with, however far ahead the fetches
/// made have run.
pub const MIN_BUDGET_SHARE: f64 = 0.02;

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

fn close(a: &[f32], b: &[f32]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff: f64 = a.iter().zip(b).map(|(x, y)| (x - y).abs() as f64).sum();
    let size: f64 = b.iter().map(|y| y.abs() as f64).sum();
    diff <= MODEL_TOLERANCE * size.max(1e-6)
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
        }
    }

    /// Plans the next rounds with `share` (clamped to [[`MIN_BUDGET_SHARE`], 1], and never
    /// below what the minimums need) of the configured budget: what is left after paying
    /// back fetches made ahead of it (`hub::rounds::budget_share`). The outcome still
    /// reports the configured budget.
    pub fn set_budget_share(&mut self, share: f64) {
        self.budget_share = if share.is_finite() {
            share.clamp(MIN_BUDGET_SHARE, 1.0)
        } else {
            1.0
        };
    }

    /// Replaces the settings; the next round solves afresh.
    pub fn set_settings(&mut self, settings: PlannerSettings) {
        self.settings = settings;
        self.last = None;
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
        Some(super::quick::Basis {
            population: self.population.clone()?,
            prices: last.state.prices().clone(),
            cfg: self.settings.plan_config(last.ids.len()),
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
        cfg.budget = (configured_budget * self.budget_share)
            .min(held_budget(configured_budget, days, cycles))
            .max(minimums)
            .min(configured_budget);
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
            + fit_budget_minimums(&mut models, &cfg, configured_min);
        let hosts: Vec<Option<u32>> = models.iter().map(|m| m.host).collect();
        let (plan, resolved, fresh) = if self.settings.policy != Policy::Optimal {
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
                Some(mut last) if last.ids == ids && last.caps == host_caps => {
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
                    });
                    (plan, feeds.len(), true)
                }
            }
        };
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
                let flat_model = self
                    .view
                    .get(&f.id)
                    .is_some_and(|(m, _)| flat(m, cfg.metric));
                let (offsets, period) = fetch_times(&f.id, p, flat_model, &cfg);
                let spec = FeedSpec {
                    id: f.id.clone(),
                    url: f.url.clone(),
                    host: f.host.clone(),
                    offsets_seconds: offsets,
                    period_seconds: period,
                    // Unix epoch: midnight UTC, and a fixed origin for multi-day periods.
                    origin_unix_ms: 0,
                    ..Default::default()
                };
                (f.id.clone(), spec)
            })
            .collect();
        host_limited.unspent_per_day /= days;
        let expected_postings: f64 = self
            .view
            .values()
            .map(|(m, _)| m.weight * m.post_bins.iter().map(|&b| b as f64).sum::<f64>())
            .sum();
        Ok(PlanOutcome {
            specs,
            expected_cost: plan.expected_cost / days,
            expected_postings_per_day: expected_postings / days,
            fetches_per_day: plan.fetches_per_period / days,
            budget_per_day: configured_budget / days,
            budget_share: share,
            resolved,
            fresh,
            host_limited,
        })
    }
}

/// A feed's plan as fetch times: offsets (seconds, ascending) within a period of the
/// returned length, from midnight UTC. A `flat` model's times are turned by a share of
/// their gap of its own ([`spread_turn`]).
pub(crate) fn fetch_times(id: &str, p: &FeedPlan, flat: bool, cfg: &PlanConfig) -> (Vec<f64>, f64) {
    let slot = cfg.period_seconds / cfg.slots as f64;
    let base = p.phase_period as f64 * cfg.period_seconds;
    let turn = if flat {
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
