//! The live planner's settings ([`PlannerSettings`]) and how its budget is given
//! ([`Budget`]): what `serve`, `standalone`, `replay` and the stored settings configure, and
//! the plan configuration a round derives from them.

use crate::plan::alloc::{ceil_level, floor_level, HostCaps, Level};
use crate::plan::cost::Metric;
use crate::plan::pattern::Smoothing;
use crate::plan::planner::{PlanConfig, Policy, Scheduler};

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
    /// and on `sample-500` 82.1 against 85.7 (docs/EXPERIMENTS.md); each feed keeps its dated
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
    /// Each watched feed's rate as its posterior mean under the population's fitted
    /// distribution of rates ([`super::rate_prior`]) rather than shrunk by pseudo-days
    /// toward the typical feed's (off with the host level, which shrinks toward the host's).
    pub rate_prior: bool,
    /// Feeds whose postings land at one time of day get that window as a peak of their
    /// model ([`super::timer`]). On by default: where no feed is on a timer the test finds
    /// almost none and plans are as without it; a population with some gains (docs/PLANNER.md,
    /// "Feeds on a timer").
    pub timer_peaks: bool,
    /// Fetches per day one host can take (from the workers' politeness gap, with headroom);
    /// `None` leaves hosts uncapped. A constraint of the allocation: budget that no host
    /// can carry is left unspent and reported ([`super::relearn::PlanOutcome::host_limited`]).
    pub host_fetches_per_day: Option<f64>,
    /// Most planned fetches the cluster starts in any one minute of the plan's clock
    /// (`--max-fetches-per-minute`); `None` leaves minutes uncapped. A constraint on the
    /// fetch times ([`crate::plan::crowd`]): a minute above it gives up the fetches that
    /// cost least to move.
    pub max_fetches_per_minute: Option<f64>,
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
    /// (docs/EXPERIMENTS.md, "A feed's host").
    pub host_level: bool,
    /// Re-solve a feed between rounds when a fetch finds postings its model did not expect
    /// ([`super::quick`]; on by default, `--no-quick-updates` turns it off).
    pub quick_updates: bool,
    /// What one posting lost to a document overflowing between two fetches costs, in hours
    /// of delay (`delay` metric only): the allocation prices each feed's expected losses
    /// ([`crate::plan::overflow`]) in place of the document floors of
    /// [`super::models::DOCUMENT_FILL`] ([`DEFAULT_LOST_POSTING_HOURS`]). `None` keeps the
    /// floors.
    pub lost_posting_hours: Option<f64>,
    /// Plan over a week instead of a day: feeds learn day-of-week factors
    /// ([`crate::weekly`]) and schedules repeat weekly (`slots` per day, seven days).
    pub weekly: bool,
}

/// [`PlannerSettings::lost_posting_hours`]'s default: a posting lost to a document that
/// overflowed costs what a day's delay costs. Live `replay` (docs/EXPERIMENTS.md, "Lost postings
/// priced in place of the document floors"): at half a fetch a day it takes `steady` from
/// 985.5 min to 840.0 and `startstop` from 811.7 to 756.5 (the floors held there), and
/// `bursts` and `mixed` from 2,427 and 2,497 postings lost on days 14–27 to 1,582 and 1,783
/// (their floors did not fit the budget and were dropped) for 1–3% more delay.
pub const DEFAULT_LOST_POSTING_HOURS: f64 = 24.0;

/// The highest [`PlannerSettings::lost_posting_hours`]: a century of delay is already no
/// posting lost at any price, and a larger figure times a feed's weight leaves the finite
/// range (1e308 hours became an infinite cost).
pub const MAX_LOST_POSTING_HOURS: f64 = 1e6;

/// How a command line gives [`PlannerSettings::lost_posting_hours`]: hours, or `floors`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LostPostingArg(pub Option<f64>);

impl std::fmt::Display for LostPostingArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(h) => write!(f, "{h}"),
            None => f.write_str("floors"),
        }
    }
}

/// Parses `--lost-posting-hours`: a finite number of hours of at least 0, or `floors` for
/// the document floors instead of a price.
pub fn parse_lost_posting_hours(s: &str) -> Result<LostPostingArg, String> {
    if s == "floors" {
        return Ok(LostPostingArg(None));
    }
    match s.parse::<f64>() {
        Ok(h) if (0.0..=MAX_LOST_POSTING_HOURS).contains(&h) => Ok(LostPostingArg(Some(h))),
        _ => Err(format!(
            "`{s}`: hours of delay a lost posting costs (a number from 0 to {MAX_LOST_POSTING_HOURS}), or `floors`"
        )),
    }
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
/// (docs/EXPERIMENTS.md). More shapes fitted no better there (`plan` under the true
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
            rate_prior: true,
            timer_peaks: true,
            shape_mixture: DEFAULT_SHAPE_MIXTURE,
            mixture_min_per_day: DEFAULT_MIXTURE_MIN_PER_DAY,
            host_level: false,
            quick_updates: true,
            lost_posting_hours: Some(DEFAULT_LOST_POSTING_HOURS),
            host_fetches_per_day: None,
            max_fetches_per_minute: None,
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
        if let Some(h) = self.lost_posting_hours {
            if !(0.0..=MAX_LOST_POSTING_HOURS).contains(&h) {
                return Err(format!(
                    "the hours a lost posting costs must be a number from 0 to {MAX_LOST_POSTING_HOURS}, got {h}"
                ));
            }
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
        if let Some(m) = self.max_fetches_per_minute {
            if !(m > 0.0 && m.is_finite()) {
                return Err("the fetches per minute must be a positive number".into());
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
            day_prices: Default::default(),
            // Per slot: the minute's cap times the slot's minutes.
            slot_capacity: self
                .max_fetches_per_minute
                .map(|m| m * 86_400.0 * d / self.period_slots() as f64 / 60.0),
        }
    }
}
