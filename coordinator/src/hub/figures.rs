//! What the live coordinator reports about itself: running totals, the last plan's
//! figures, the stored planner settings and a feed's view for `InspectFeedPlan`.

use super::actor::State;
use crate::control::health::HealthPolicy;
use crate::control::relearn::PlanOutcome;
use crate::metrics as m;
use crate::time::DAY_MS;
use std::collections::BTreeMap;

/// Running totals of what the system did, for summaries and `GetStats`.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Totals {
    /// Fetch reports accepted.
    pub fetches: u64,
    /// Accepted fetches by outcome.
    pub outcomes: BTreeMap<String, u64>,
    /// Accepted fetches per feed.
    pub fetches_per_feed: BTreeMap<String, u64>,
    /// Start of each feed's last answered fetch (200 or 304), simulated Unix ms.
    pub last_fetch_started: BTreeMap<String, i64>,
    /// Postings stored for the first time.
    pub postings_new: u64,
    /// Postings reported again and ignored.
    pub postings_duplicate: u64,
    /// Reports refused (not the owner, unknown feed).
    pub reports_rejected: u64,
    /// Planned slots fetched by a second worker.
    pub fetches_same_slot: u64,
    /// Sum and count of realized delays of trusted postings (ms).
    pub delay_sum_ms: f64,
    /// Trusted postings.
    pub delay_count: u64,
    /// Reader accesses seen.
    pub accesses: u64,
    /// Postings that were published but not yet discovered at a reader's access.
    pub missed: u64,
    /// Summed age of those postings at the accesses (ms): the user-access delay.
    pub access_delay_sum_ms: f64,
    /// Body bytes fetched.
    pub bytes: u64,
    /// Planning rounds.
    pub plans: u64,
    /// Fetches counted against the budget since this coordinator's first fetch.
    pub ledger: Ledger,
    /// Fetches started on the latest UTC day each worker name reported one: (day, count).
    pub worker_days: BTreeMap<String, (i64, u64)>,
    /// Fetches started per UTC day (days since the Unix epoch), the last
    /// `DAYS_KEPT` days.
    pub fetches_by_day: BTreeMap<i64, u64>,
    /// The last plan's figures.
    pub last_plan: Option<PlanFigures>,
}

/// UTC days whose fetches [`Totals::fetches_by_day`] keeps.
pub const DAYS_KEPT: usize = 90;

impl Totals {
    /// Counts a fetch of worker `name` started at `started_ms` against the budget: in the
    /// ledger, its day and the worker's day.
    pub fn count_fetch(&mut self, name: &str, started_ms: i64) {
        self.ledger.add(started_ms);
        let day = started_ms.div_euclid(DAY_MS);
        *self.fetches_by_day.entry(day).or_default() += 1;
        while self.fetches_by_day.len() > DAYS_KEPT {
            self.fetches_by_day.pop_first();
        }
        self.count_worker_fetch(name, started_ms);
    }

    fn count_worker_fetch(&mut self, name: &str, started_ms: i64) {
        let day = started_ms.div_euclid(DAY_MS);
        match self.worker_days.get_mut(name) {
            Some((d, n)) if *d == day => *n += 1,
            Some((d, n)) if *d < day => (*d, *n) = (day, 1),
            Some(_) => {} // A late report of a day gone.
            None => {
                self.worker_days.insert(name.to_string(), (day, 1));
            }
        }
    }

    /// Fetches each worker name started on the UTC day of `now_ms`.
    pub fn worker_counts_today(&self, now_ms: i64) -> BTreeMap<String, u64> {
        let today = now_ms.div_euclid(DAY_MS);
        self.worker_days
            .iter()
            .filter(|(_, (d, _))| *d == today)
            .map(|(name, (_, n))| (name.clone(), *n))
            .collect()
    }
}

/// Fetches made since the first one this coordinator counted: what the budget has paid
/// for so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Ledger {
    /// Start of the first fetch counted, Unix ms (`None` before any).
    pub since_ms: Option<i64>,
    /// Fetches counted.
    pub fetches: u64,
    /// The latest UTC day (days since the Unix epoch) a counted fetch started on.
    pub day: i64,
    /// Fetches started on `day`.
    pub day_fetches: u64,
}

impl Ledger {
    /// Counts a fetch started at `started_ms`.
    pub fn add(&mut self, started_ms: i64) {
        let since = self.since_ms.get_or_insert(started_ms);
        *since = (*since).min(started_ms);
        self.fetches += 1;
        let day = started_ms.div_euclid(DAY_MS);
        if day > self.day || self.day_fetches == 0 {
            self.day = day;
            self.day_fetches = 1;
        } else if day == self.day {
            self.day_fetches += 1;
        }
        // A late report of an earlier day: that day is closed.
    }

    /// Fetches started on the UTC day of `now_ms` so far.
    pub fn today(&self, now_ms: i64) -> u64 {
        if self.day == now_ms.div_euclid(DAY_MS) {
            self.day_fetches
        } else {
            0
        }
    }
}

/// The last plan, as reported.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PlanFigures {
    /// Planned fetches per day.
    pub fetches_per_day: f64,
    /// Budget per day.
    pub budget_per_day: f64,
    /// Expected weighted cost per day.
    pub expected_cost: f64,
    /// Expected delay per posting (s), for the `delay` metric: the model's figure
    /// recalibrated by the plans' record (`promise_ratio`).
    pub expected_delay_seconds: f64,
    /// Expected delay per posting (s) by the plans' own model, before recalibration.
    pub model_expected_delay_seconds: f64,
    /// Delivered over promised delay of the postings polls found lately
    /// ([`crate::control::promise`]; 1 until there is a record).
    pub promise_ratio: f64,
    /// Feeds re-solved.
    pub resolved: usize,
    /// Solve wall time (s).
    pub solve_seconds: f64,
    /// Fetches per day of the budget left unplaced.
    pub unspent_per_day: f64,
    /// Share of the daily budget the plan spends (see `kairos_plan_budget_share`).
    pub budget_share: f64,
    /// Hosts planned up to their cap.
    pub hosts_at_cap: usize,
    /// Fetches per day one host can take, if capped.
    pub host_cap_per_day: Option<f64>,
    /// Feeds whose minimum was raised so their document does not overflow.
    pub capacity_floors: usize,
    /// Fetches per day those raised minimums hold beyond the configured ones.
    pub capacity_floor_fetches_per_day: f64,
    /// Postings per day the plan expects to scroll off documents unseen.
    pub expected_lost_per_day: f64,
    /// Pseudo-days of shrinkage the models used.
    pub shrinkage_days: f64,
    /// Feed-days held out to choose `shrinkage_days` (0: the configured value, before two
    /// whole days are watched).
    pub shrinkage_held_out_days: usize,
    /// Base shapes of the mixture the models' hours were pooled in (0: one pooled shape).
    pub mixture_shapes: usize,
    /// Pseudo-postings of the shapes' prior, chosen with the shrinkage (0: pseudo-days).
    pub shape_prior_postings: f64,
    /// Pseudo-postings of a feed's host's other feeds in its shape's evidence, its rate
    /// shrunk toward theirs (0: the host level is left out).
    pub host_prior_postings: f64,
    /// Half-life of the models' observations, days (0: none).
    pub half_life_days: f64,
    /// Feeds whose last week chose `half_life_days` (0: the configured value).
    pub half_life_feeds: usize,
    /// Feeds whose current regime posts at least twice, and at most half, their window's
    /// rate (`control/regimes.rs`).
    pub regime_feeds: (usize, usize),
    /// Feeds the rates' forward calibration was fitted on (0: none in force), and the
    /// factor it gives feeds silent all their window (`control/calibrate.rs`).
    pub calibration: (usize, f64),
    /// Mean rate of the population's fitted distribution of rates (`control/rate_prior.rs`),
    /// postings a day; 0 when rates were shrunk by pseudo-days instead.
    pub rate_prior_mean: f64,
    /// Feeds found on a timer, planned with a peak at their window (`control/timer.rs`).
    pub timer_feeds: usize,
    /// Weekly plans: feeds per weekly shape (daily, pooled, weekday/weekend, day of week).
    pub week_shapes: Option<[usize; 4]>,
    /// Feeds whose last fetch, when the round began, was older than any plan allows them
    /// (`hub/overdue.rs`): 0 when every feed is within its floor.
    pub overdue_feeds: usize,
    /// The longest time since a fetch among those feeds (s; 0 when none), and its feed.
    pub overdue_longest_seconds: f64,
    /// The feed of `overdue_longest_seconds` (empty when none).
    pub overdue_longest_feed: String,
    /// The plan's fetches on the quietest and the busiest of the next seven whole UTC days,
    /// over the day's budget at the round's `budget_share`
    /// (`control::capacity::days_against_budget`; zeros without a budget). A busiest day
    /// above 1 asks more than the workers' allowances let it start.
    pub day_budget_shares: (f64, f64),
}

/// Exports what levelling against `--max-fetches-per-minute` did, and says at each replan
/// when the cap could not be held: the budget needs more minutes than the day has at the
/// cap (the plan is levelled to the even load instead), or fetches found no room within
/// their feed's reach.
pub(super) fn record_crowding(o: &PlanOutcome) {
    let Some(c) = &o.crowding else {
        metrics::gauge!(m::PLAN_CROWD_MOVED).set(0.0);
        metrics::gauge!(m::PLAN_CROWD_EXCESS).set(0.0);
        return;
    };
    metrics::gauge!(m::PLAN_CROWD_MOVED).set(c.moved as f64);
    metrics::gauge!(m::PLAN_CROWD_EXCESS).set(c.left_over);
    if c.infeasible {
        tracing::warn!(
            capacity_per_slot = c.capacity,
            busiest_slot = c.busiest_after,
            "the plan's fetches exceed --max-fetches-per-minute over the whole day: levelled \
             to the even load instead (a higher cap, more workers or a smaller budget)"
        );
    } else if c.left_over > 0.0 {
        tracing::warn!(
            excess = c.left_over,
            capacity_per_slot = c.capacity,
            "some minutes stay above --max-fetches-per-minute: their fetches found no room \
             between their feeds' neighbouring fetches"
        );
    }
}

/// Says at each replan when the plan leaves budget unplaced, and why: an operator who set a
/// budget the hosts cannot carry sees it at once instead of a delay that mysteriously lags.
pub(super) fn warn_unspent(f: &PlanFigures, o: &PlanOutcome) {
    let unspent = f.unspent_per_day;
    if unspent <= (0.01 * f.budget_per_day).max(1.0) {
        return;
    }
    let h = &o.host_limited;
    if h.hosts_at_cap > 0 {
        tracing::warn!(
            unspent_per_day = unspent,
            budget_per_day = f.budget_per_day,
            hosts_at_cap = h.hosts_at_cap,
            hosts = h.hosts,
            host_cap_per_day = f.host_cap_per_day.unwrap_or(0.0),
            feeds_below_minimum = h.floors_lowered,
            "the plan cannot spend the budget: hosts are at their politeness cap \
             (more hosts, a shorter --host-gap or a smaller budget)"
        );
    } else {
        tracing::warn!(
            unspent_per_day = unspent,
            budget_per_day = f.budget_per_day,
            "the plan leaves budget unspent: no further fetch lowers the expected cost \
             (no postings or reader accesses seen yet, or feeds at their maximum)"
        );
    }
}

/// A plan day asking more than this share of the day's budget is reported
/// (by `log_days_over_budget`): a daily plan's days sit at or just under 1.
pub const DAY_OVER_BUDGET: f64 = 1.05;

/// How long plans must keep every day within [`DAY_OVER_BUDGET`] before the log says the
/// days fit again: a weekly plan's prices settle by trading fetches between days, and its
/// busiest day crossed 1.05 back and forth every few rounds (26 lines in a replay's first
/// days at one fetch a day), which said nothing the metric does not.
pub const DAYS_FIT_AFTER_MS: i64 = crate::time::DAY_MS;

/// What the log said last of plans' days against the day's budget.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct DaysOver {
    /// Whether it warned and has not yet said the days fit again.
    warned: bool,
    /// Since when (Unix ms) every plan's days fit, while warned.
    fit_since_ms: Option<i64>,
}

/// A change worth a log line ([`DaysOver::update`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum DaysChange {
    /// A plan asks more of a day than its budget, the first since the days fit.
    Over,
    /// Every plan has kept its days within the budget for [`DAYS_FIT_AFTER_MS`].
    Fit,
}

impl DaysOver {
    /// Takes the plan of `now_ms`, whose busiest day asks `busiest` of its budget.
    pub(super) fn update(&mut self, busiest: f64, now_ms: i64) -> Option<DaysChange> {
        if busiest > DAY_OVER_BUDGET {
            self.fit_since_ms = None;
            if !self.warned {
                self.warned = true;
                return Some(DaysChange::Over);
            }
            return None;
        }
        if !self.warned {
            return None;
        }
        let since = *self.fit_since_ms.get_or_insert(now_ms);
        if now_ms - since >= DAYS_FIT_AFTER_MS {
            *self = DaysOver::default();
            return Some(DaysChange::Fit);
        }
        None
    }
}

/// Says when plans start asking more of a day than its budget, and when they have stopped
/// for a day ([`DaysOver`]), rather than at every round: the allowances hold what a day asks
/// beyond its budget to the next day, so the plan is not executed as made and its promise
/// does not hold.
pub(super) fn log_days_over_budget(state: &mut DaysOver, now_ms: i64, f: &PlanFigures) {
    let (quietest, busiest) = f.day_budget_shares;
    match state.update(busiest, now_ms) {
        Some(DaysChange::Over) => tracing::warn!(
            busiest_day_share = busiest,
            quietest_day_share = quietest,
            budget_per_day = f.budget_per_day,
            "the plan asks more of some days than the daily budget: the workers' allowances \
             hold the excess to the next day (a weekly plan's day prices step toward even \
             days each round; docs/OPERATIONS.md, \"Weekly plans and the day's budget\")"
        ),
        Some(DaysChange::Fit) => tracing::info!(
            busiest_day_share = busiest,
            "no planned day has asked more than its budget for a day"
        ),
        None => {}
    }
}

/// A feed's learned model and plan, for inspection.
#[derive(Clone, Debug)]
pub struct FeedView {
    /// Learned postings per hour of the day.
    pub posting_rate_per_hour: Vec<f64>,
    /// Learned weighted reader accesses per hour of the day.
    pub access_rate_per_hour: Vec<f64>,
    /// Allocated fetches per day.
    pub fetches_per_day: f64,
    /// Planned fetch offsets (s) within the period (s).
    pub offsets_seconds: Vec<f64>,
    /// Period (s).
    pub period_seconds: f64,
    /// Expected delay per posting (s) under the plan.
    pub expected_delay_seconds: f64,
    /// Postings observed in the learning window.
    pub observed_postings: usize,
    /// What bounds the plan beyond the budget (back-off, hints, a throttled host).
    pub constraints: Vec<String>,
    /// Highest fetches per day the bounds allow.
    pub max_fetches_per_day: Option<f64>,
    /// No fetch before this time, Unix ms (0 = none).
    pub not_before_unix_ms: i64,
    /// Fetch health.
    pub status: &'static str,
}

/// A feed's fetch health, as the Admin API shows it.
#[derive(Clone, Debug, Default)]
pub struct HealthView {
    /// `new`, `ok`, `failing`, `malformed` or `gone`.
    pub status: &'static str,
    /// Failed fetches in a row.
    pub consecutive_failures: u32,
    /// The last failure.
    pub last_error: String,
    /// What the feed's last parsed document said of itself.
    pub meta: crate::control::feedstate::FeedMeta,
    /// Its WebSub subscription's state and hub (empty: none), and the share of its
    /// postings its polls must find (1 without push delivering).
    pub push: (String, String, f64),
}

pub(super) use kairos_proto::outcome_label;

impl PlanFigures {
    /// The figures with the promise scaled by the plans' record's `ratio`.
    pub(super) fn recalibrated(self, ratio: f64) -> Self {
        Self {
            expected_delay_seconds: self.model_expected_delay_seconds * ratio,
            promise_ratio: ratio,
            ..self
        }
    }

    /// Sets the plan's gauges and records its solve time.
    pub(super) fn record(&self) {
        use metrics::{gauge, histogram};
        let p = self;
        histogram!(m::PLAN_SOLVE_SECONDS).record(p.solve_seconds);
        gauge!(m::PLAN_BUDGET_FETCHES).set(p.budget_per_day);
        gauge!(m::PLAN_ALLOCATED_FETCHES).set(p.fetches_per_day);
        gauge!(m::PLAN_EXPECTED_DELAY_SECONDS).set(p.expected_delay_seconds);
        gauge!(m::PLAN_MODEL_DELAY_SECONDS).set(p.model_expected_delay_seconds);
        gauge!(m::PLAN_PROMISE_RATIO).set(p.promise_ratio);
        gauge!(m::PLAN_FEEDS_RESOLVED).set(p.resolved as f64);
        gauge!(m::PLAN_UNSPENT_FETCHES).set(p.unspent_per_day);
        gauge!(m::PLAN_BUDGET_SHARE).set(p.budget_share);
        gauge!(m::PLAN_HOSTS_AT_CAP).set(p.hosts_at_cap as f64);
        gauge!(m::PLAN_HOST_CAP).set(p.host_cap_per_day.unwrap_or(0.0));
        gauge!(m::PLAN_CAPACITY_FLOOR_FEEDS).set(p.capacity_floors as f64);
        gauge!(m::PLAN_CAPACITY_FLOOR_FETCHES).set(p.capacity_floor_fetches_per_day);
        gauge!(m::PLAN_EXPECTED_LOST_POSTINGS).set(p.expected_lost_per_day);
        gauge!(m::PLAN_SHRINKAGE_DAYS).set(p.shrinkage_days);
        gauge!(m::PLAN_HALF_LIFE_DAYS).set(p.half_life_days);
        gauge!(m::PLAN_REGIME_FEEDS, "direction" => "rising").set(p.regime_feeds.0 as f64);
        gauge!(m::PLAN_REGIME_FEEDS, "direction" => "falling").set(p.regime_feeds.1 as f64);
        gauge!(m::PLAN_CALIBRATED_FEEDS).set(p.calibration.0 as f64);
        gauge!(m::PLAN_SILENT_RATE_FACTOR).set(p.calibration.1);
        gauge!(m::PLAN_RATE_PRIOR_MEAN).set(p.rate_prior_mean);
        gauge!(m::PLAN_TIMER_FEEDS).set(p.timer_feeds as f64);
        gauge!(m::PLAN_FEEDS_OVERDUE).set(p.overdue_feeds as f64);
        gauge!(m::PLAN_DAY_BUDGET_SHARE, "day" => "quietest").set(p.day_budget_shares.0);
        gauge!(m::PLAN_DAY_BUDGET_SHARE, "day" => "busiest").set(p.day_budget_shares.1);
        gauge!(m::PLAN_MIXTURE_SHAPES).set(p.mixture_shapes as f64);
        gauge!(m::PLAN_SHAPE_PRIOR_POSTINGS).set(p.shape_prior_postings);
        gauge!(m::PLAN_HOST_PRIOR_POSTINGS).set(p.host_prior_postings);
        if let Some(shapes) = p.week_shapes {
            for (name, n) in ["daily", "pooled", "weekday_weekend", "day_of_week"]
                .iter()
                .zip(shapes)
            {
                gauge!(m::PLAN_WEEK_SHAPE_FEEDS, "shape" => *name).set(n as f64);
            }
        }
    }
}

impl State {
    /// A feed's fetch health now.
    pub(super) fn feed_health(&self, feed: &str, now_ms: i64, policy: &HealthPolicy) -> HealthView {
        match self.feeds.get(feed) {
            Some(st) => HealthView {
                status: st
                    .health
                    .status(st.last_answered_ms.is_some(), now_ms, policy),
                consecutive_failures: st.health.consecutive_failures,
                last_error: st.health.last_error.clone(),
                meta: (*st.meta).clone(),
                push: self.push_view(feed, now_ms),
            },
            None => HealthView {
                status: "new",
                push: (String::new(), String::new(), 1.0),
                ..HealthView::default()
            },
        }
    }

    /// The expected delay per posting (seconds) of a feed's plan in force, by its own
    /// model; None when it is not planned or expects no postings.
    pub(super) fn model_delay_seconds(&self, feed: &str) -> Option<f64> {
        let (model, plan) = self.model_of(feed)?;
        let per_day: f64 = model.post_bins.iter().map(|&b| b as f64).sum();
        (per_day > 0.0 && model.weight > 0.0).then(|| plan.expected_cost / model.weight / per_day)
    }

    /// The delay per posting (seconds) a feed's plan in force is expected to deliver: its
    /// model's figure recalibrated by the plans' record ([`crate::control::promise`]).
    pub(super) fn expected_delay_seconds(&self, feed: &str) -> Option<f64> {
        Some(self.model_delay_seconds(feed)? * self.promises.ratio())
    }

    /// A feed's learned model and plan in force, as InspectFeedPlan shows it.
    pub(super) fn inspect(
        &self,
        feed: &str,
        now_ms: i64,
        policy: &HealthPolicy,
    ) -> Option<FeedView> {
        let spec = self.cluster.feeds().get(feed)?.clone();
        let observed = self
            .feeds
            .get(feed)
            .map(|st| st.observed_postings())
            .unwrap_or(0);
        let bounds = self.bounds.bounds.get(feed).cloned().unwrap_or_default();
        let (model, _) = self.model_of(feed)?;
        let fetches = spec.offsets_seconds.len() as f64 * 86_400.0 / spec.period_seconds;
        let mut constraints = bounds.reasons;
        constraints.extend(model.peaks.iter().copied().map(timer_constraint));
        let (push_state, hub, share) = self.push_view(feed, now_ms);
        if !push_state.is_empty() {
            constraints.push(if share < 1.0 {
                format!(
                    "websub push {push_state} at {hub}: polls are a check, planned for the {:.1}% of postings the hub is expected to miss",
                    share * 100.0
                )
            } else {
                format!("websub push {push_state} at {hub}: polled in full until it delivers")
            });
        }
        Some(FeedView {
            posting_rate_per_hour: model.post_bins.iter().map(|&b| b as f64).collect(),
            access_rate_per_hour: model.access_bins.iter().map(|&b| b as f64).collect(),
            fetches_per_day: fetches,
            expected_delay_seconds: self.expected_delay_seconds(feed).unwrap_or(0.0),
            offsets_seconds: spec.offsets_seconds,
            period_seconds: spec.period_seconds,
            observed_postings: observed,
            constraints,
            max_fetches_per_day: bounds.max_per_day,
            not_before_unix_ms: bounds.not_before_ms.unwrap_or(0),
            status: self.feed_health(feed, now_ms, policy).status,
        })
    }
}

/// What InspectFeedPlan says of a feed on a timer: the window its peak names, in UTC.
fn timer_constraint(p: crate::plan::pattern::Peak) -> String {
    // Minutes of the day from a share of a day; a window may end after midnight.
    let hm = |share: f32| {
        let m = (share.rem_euclid(1.0) * 1440.0).round() as u32 % 1440;
        format!("{:02}:{:02}", m / 60, m % 60)
    };
    format!(
        "on a timer: {:.0}% of its postings land between {} and {} UTC; its plan fetches just after",
        p.share * 100.0,
        hm(p.start),
        hm(p.start + p.width)
    )
}

#[cfg(test)]
mod tests {
    use super::timer_constraint;
    use crate::plan::pattern::Peak;

    #[test]
    fn a_timer_window_is_shown_in_utc_clock_time() {
        let peak = |start_min: f32, width_min: f32, share| Peak {
            start: start_min / 1440.0,
            width: width_min / 1440.0,
            share,
        };
        assert_eq!(
            timer_constraint(peak(255.0, 20.0, 0.9)),
            "on a timer: 90% of its postings land between 04:15 and 04:35 UTC; its plan fetches just after"
        );
        // Across midnight.
        assert!(timer_constraint(peak(1430.0, 20.0, 0.5)).contains("between 23:50 and 00:10 UTC"));
    }

    #[test]
    fn days_over_budget_are_said_once_and_their_end_after_a_day_of_fitting() {
        use super::{DaysChange, DaysOver, DAYS_FIT_AFTER_MS};
        let hour = 3_600_000;
        let mut s = DaysOver::default();
        assert_eq!(s.update(1.0, 0), None, "a daily plan's days");
        assert_eq!(s.update(1.2, hour), Some(DaysChange::Over));
        // A weekly plan's busiest day crossing the line back and forth: no more lines.
        let mut t = 2 * hour;
        for busiest in [1.02, 1.07, 1.01, 1.09, 1.03, 1.06] {
            assert_eq!(s.update(busiest, t), None, "{busiest}");
            t += hour;
        }
        // Fitting since `t`: said once a day later, not before.
        let since = t;
        while t < since + DAYS_FIT_AFTER_MS {
            assert_eq!(s.update(1.04, t), None);
            t += hour;
        }
        assert_eq!(s.update(1.0, t), Some(DaysChange::Fit));
        assert_eq!(s.update(1.0, t + hour), None);
        assert_eq!(s.update(1.1, t + 2 * hour), Some(DaysChange::Over));
        // Out of range values do not break it: NaN is not over.
        assert_eq!(s.update(f64::NAN, t + 3 * hour), None);
    }
}
