//! `kairos-coordinator replay`: the live hub on a recorded trace (see
//! [`crate::replay`]), reported day by day next to uniform polling and an
//! offline plan learned from the trace's first days, on the same postings.

use crate::baselines::{
    drain_days, fetches_before, fetches_in, parse_peers, pooled, run_peers, window, PeerBudget,
    PeerBudgetArg, PeerLog,
};
use crate::calibration::{day_calibration, DayCalibration};
use crate::replay::{run, ReplayConfig};
use anyhow::{bail, Context, Result};
use clap::Args;
use kairos_coordinator::control::models::DOCUMENT_FILL;
use kairos_coordinator::control::relearn::{
    parse_lost_posting_hours, Budget, LostPostingArg, PlannerSettings, DEFAULT_LOST_POSTING_HOURS,
};
use kairos_coordinator::learn::{learn, LearnConfig};
use kairos_coordinator::plan::alloc::{ceil_level, HostCaps};
use kairos_coordinator::plan::cost::Metric;
use kairos_coordinator::plan::floor::document_level;
use kairos_coordinator::plan::overflow::Document;
use kairos_coordinator::plan::pattern::Smoothing;
use kairos_coordinator::plan::planner::{
    drop_raised_floors_unless_they_fit, solve, PlanConfig, Policy, Scheduler,
};
use kairos_coordinator::simulate::{
    replay, replay_log, scrolled_off_log, scrolled_off_schedules, FeedSchedule, Realized,
};
use kairos_coordinator::time::DAY_S as DAY;
use kairos_coordinator::trace::Trace;
use std::path::PathBuf;
use std::time::Instant;

#[path = "replay_print.rs"]
mod print;
use print::{
    print_calibration, print_peers, print_priced, print_windows, write_fetch_log, PeerSettings,
};

/// Options of `replay`.
#[derive(Args)]
pub struct ReplayArgs {
    /// Trace folder.
    #[arg(long)]
    trace: PathBuf,
    /// Objective: delay, miss or access-delay.
    #[arg(long, default_value = "delay")]
    metric: Metric,
    /// Budget: average fetches per feed per day.
    #[arg(long, default_value_t = 4.0)]
    fetches_per_feed_per_day: f64,
    /// Minimum fetches per feed per day.
    #[arg(long, default_value_t = 1.0 / 7.0)]
    min_fetches_per_day: f64,
    /// Slots per day.
    #[arg(long, default_value_t = 1440)]
    slots: usize,
    /// Simulated time between replans.
    #[arg(long, default_value = "2h")]
    replan_every: humantime::Duration,
    /// Items a feed's document holds.
    #[arg(long, default_value_t = 20)]
    document_items: usize,
    /// Days to replay (default: the whole trace).
    #[arg(long)]
    days: Option<usize>,
    /// Days the offline reference plan learns from (the trace's first days); scoring starts
    /// after them [default: 14; on a replay of 14 days or fewer, its first half].
    #[arg(long)]
    train_days: Option<usize>,
    /// Pseudo-days of shrinkage of the live learner's posting models: `auto` (chosen on
    /// held-out days, as `serve` does) or a fixed number.
    #[arg(long, default_value = "auto")]
    shrinkage_days: String,
    /// Pseudo-postings of the pooled hourly shape each feed's hours take at least (0:
    /// pseudo-days only).
    #[arg(long, default_value_t = PlannerSettings::default().shape_pseudo_postings)]
    shape_pseudo_postings: f64,
    /// Base shapes of the mixture feeds' daily shapes are pooled in (each at any hourly
    /// shift; similar feeds share strength). 0: one pooled shape for every feed.
    #[arg(long, default_value_t = PlannerSettings::default().shape_mixture)]
    shape_mixture: usize,
    /// Budget, fetches per feed per day, below which the one pooled shape is used in place
    /// of the mixture (0: the mixture at any budget).
    #[arg(long, default_value_t = PlannerSettings::default().mixture_min_per_day)]
    mixture_min_per_day: f64,
    /// Pool each feed's rate and hours with its host's other feeds' as a level between the
    /// feed and everyone (strength chosen on held-out days; off by default, docs/PLANNER.md).
    #[arg(long)]
    host_level: bool,
    /// Re-solve a feed between rounds when a fetch finds postings its model did not expect
    /// (the default; docs/PLANNER.md). Kept so scripts that asked for it still run.
    #[arg(long, overrides_with = "no_quick_updates")]
    quick_updates: bool,
    /// Leave every feed to the next round, however much a fetch surprised its model.
    #[arg(long, overrides_with = "quick_updates")]
    no_quick_updates: bool,
    /// Leave each feed's rate as its window says, without the forward calibration (by what
    /// feeds forecast alike a week before went on to post; docs/PLANNER.md).
    #[arg(long)]
    no_rate_calibration: bool,
    /// Shrink each feed's rate by pseudo-days toward the typical feed's, as before the
    /// population's distribution of rates was fitted (docs/PLANNER.md, "Rates under the
    /// population's distribution").
    #[arg(long)]
    no_rate_prior: bool,
    /// Leave feeds whose postings land at one time of day (a feed on a timer) to their
    /// hourly bins, which spread that time over an hour or two, instead of giving them a
    /// peak there (docs/PLANNER.md, "Feeds on a timer").
    #[arg(long)]
    no_timer_peaks: bool,
    /// Hours of delay one posting lost to a document overflowing between fetches costs the
    /// plan, or `floors`: fetch often enough that no document is expected to overflow,
    /// where the budget allows (docs/PLANNER.md).
    #[arg(long, default_value_t = LostPostingArg(Some(DEFAULT_LOST_POSTING_HOURS)), value_parser = parse_lost_posting_hours)]
    lost_posting_hours: LostPostingArg,
    /// Feeds with fewer observed postings are fetched at least daily (0: no such floor).
    #[arg(long, default_value_t = PlannerSettings::default().explore_min_postings)]
    explore_min_postings: usize,
    /// Share of the budget above the minimums that exploring feeds may take.
    #[arg(long, default_value_t = kairos_coordinator::control::relearn::DEFAULT_EXPLORE_SHARE)]
    explore_share: f64,
    /// Days of observations the live models learn from.
    #[arg(long, default_value_t = PlannerSettings::default().window_days)]
    window_days: f64,
    /// Half-life of an observation's weight in the live models, days: `auto` (chosen on the
    /// last week's observations, as `serve` does) or a fixed number (0: none)
    #[arg(long, default_value = "auto")]
    half_life_days: String,
    /// Plan weekly (day-of-week factors) live.
    #[arg(long)]
    weekly: bool,
    /// Stop replanning after this many simulated days and keep the last plan: separates
    /// what the live system learned by then from what replanning while it runs costs.
    #[arg(long)]
    freeze_after_days: Option<f64>,
    /// Cap on the fetches per day of one host (the trace's `host` column), live and in the
    /// references: the host-limited case, where uniform polling runs at the rate the hosts
    /// allow.
    #[arg(long)]
    max_fetches_per_host_per_day: Option<f64>,
    /// Most planned fetches the cluster starts in any one minute of the plan's clock: a
    /// minute above it gives up the fetches that cost their feeds least to move, to nearby
    /// minutes with room (counted day by day: a feed fetched every k days where it is
    /// fetched). Planned fetches only: catch-ups and other fetches the workers add are not
    /// held. Default: uncapped.
    #[arg(long)]
    max_fetches_per_minute: Option<f64>,
    /// Plan the offline references without documents, neither priced nor floored (the
    /// papers' setting, where a document holds every posting): they then lose the postings
    /// that scroll off between their fetches, counted in the `scrolled_off` figures.
    #[arg(long)]
    references_ignore_documents: bool,
    /// Write the per-day figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write every fetch the live system made (feed_id,ts seconds from the trace start) here.
    #[arg(long)]
    fetch_log: Option<PathBuf>,
    /// Write each tuned peer's fetches to `DIR/<peer>.csv`, in `--fetch-log`'s format: to
    /// see, feed by feed, where a reader's scheduler gains or loses against Kairos.
    #[arg(long, value_name = "DIR")]
    peer_fetch_logs: Option<PathBuf>,
    /// Write every posting with its live plans' promise here (feed_id, published and found
    /// in seconds from the trace start, promised delay in seconds): what a day outside its
    /// calibration is made of.
    #[arg(long)]
    promise_log: Option<PathBuf>,
    /// The aggregators' schedulers to run beside it, each with its defaults and tuned to
    /// the live run's fetches: `all`, `none`, or a comma-separated list of
    /// miniflux-entry-frequency, miniflux-round-robin, commafeed, newsblur, freshrss,
    /// nutch, stormcrawler.
    #[arg(long, default_value = "all")]
    peers: String,
    /// What a tuned peer may spend: `scored`, the live run's fetches on the scored days;
    /// `both`, that and also no more than the live run's fetches from day 0 to the end of
    /// the scored days (a rule that fetches more while it learns, as StormCrawler's does
    /// from its shortest interval on empty documents, is held to the live run's first days
    /// too).
    #[arg(long, value_enum, default_value_t = PeerBudgetArg::Scored)]
    peer_budget: PeerBudgetArg,
    /// Draw the figure per day of every policy to this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
}

#[derive(serde::Serialize)]
struct DayRow {
    day: usize,
    postings: usize,
    live: Realized,
    live_undiscovered: usize,
    /// Fetches the live run's daily allowance held to the next day on this day.
    live_held: u64,
    /// Postings of the day no fetch saw (scrolled off the document first), per plan:
    /// live, uniform, offline (same history), offline-N.
    scrolled_off: ScrolledOff,
    uniform: Realized,
    /// The offline optimal plan learned on the days before this one (up to `train_days`):
    /// what a planner with the same history would fetch. `None` on day 0.
    offline_causal: Option<Realized>,
    /// The optimal plan made from the day's generating intensities (synthetic traces that
    /// carry them, `intensities.csv`): the limit of learning.
    #[serde(skip_serializing_if = "Option::is_none")]
    truth: Option<Realized>,
    /// The offline optimal plan learned on days 0 to `train_days − 1`: out of sample from
    /// day `train_days` on (the papers' setup), an oracle before.
    offline: Realized,
    /// Pseudo-days of shrinkage of the live models at the day's last replan.
    shrinkage_days: Option<f64>,
    /// Pseudo-postings of the host level in the live models at the day's last replan (0:
    /// the host left out).
    host_prior_postings: Option<f64>,
    /// Half-life of the live models' observations at the day's last replan, days (0: none).
    half_life_days: Option<f64>,
    /// Feeds whose current regime posts at least twice / at most half their window's rate
    /// at the day's last replan (`kairos_plan_regime_feeds`).
    regime_feeds: Option<RegimeFeeds>,
    /// The live plans' expected delay per posting over the day's replans (`delay` metric).
    expected_delay_min: Option<f64>,
    /// The plans' record at the day's last replan: delivered over promised delay, the
    /// factor on the model's figure in the promises ([`crate::control::promise`]).
    promise_ratio: Option<f64>,
    /// The same promise weighed by the postings that came: each of the day's postings
    /// counted at its feed's expected delay under the plan in force when it was published
    /// (`delay` metric). It differs from `expected_delay_min` by which feeds posted; what
    /// is left between it and the live delay is the plans' error for those feeds.
    expected_delay_min_given_postings: Option<f64>,
    /// The spread of the day's live delay around that promise that a calibrated plan
    /// would show: a standard error over independent draws, postings one fetch found or
    /// published at the same instant (see [`crate::calibration`]); None where not measured.
    given_postings_se_min: Option<f64>,
    /// The day's independent draws among its found, planned postings.
    given_postings_clusters: Option<usize>,
    /// The three fields above together, for the summary.
    #[serde(skip)]
    calibration: Option<DayCalibration>,
    /// The peers' schedulers on the same day, by label (`commafeed`, `commafeed (tuned)`).
    peers: Vec<(String, Realized)>,
    /// The day's postings each peer's fetches never saw (scrolled off first), in the
    /// order of `peers`.
    peers_scrolled_off: Vec<usize>,
}

/// Feeds whose regime changed, at a day's last replan (`control/regimes.rs`).
#[derive(serde::Serialize)]
struct RegimeFeeds {
    /// Its current regime posts at least twice its window's rate.
    rising: usize,
    /// At most half.
    falling: usize,
}

/// Postings lost to the document's size, per plan (see [`scrolled_off`]).
#[derive(serde::Serialize, Default, Clone, Copy)]
struct ScrolledOff {
    live: usize,
    uniform: usize,
    offline_causal: usize,
    offline: usize,
}

/// Runs the replay and prints the day-by-day table.
pub fn replay_cmd(a: ReplayArgs) -> Result<()> {
    let peer_list = parse_peers(&a.peers).map_err(anyhow::Error::msg)?;
    if a.peer_fetch_logs.is_some() && peer_list.is_empty() {
        bail!(
            "--peer-fetch-logs writes the peers' fetches, and --peers {} runs none",
            a.peers
        );
    }
    // Refused before the replay runs, not after it.
    if let Some(p) = &a.plot {
        if p.extension().and_then(|e| e.to_str()) != Some("svg") {
            bail!(
                "--plot writes SVG only: give a file name ending in .svg, not {}",
                p.display()
            );
        }
    }
    // More than one fetch per slot cannot be planned (a budget of 1e308 ran without end).
    if a.fetches_per_feed_per_day > a.slots as f64 {
        bail!(
            "--fetches-per-feed-per-day {} is more than one fetch per slot ({} slots a day)",
            a.fetches_per_feed_per_day,
            a.slots
        );
    }
    let fixed_shrinkage = match a.shrinkage_days.as_str() {
        "auto" => None,
        v => match v.parse::<f64>() {
            Ok(x) if x > 0.0 && x.is_finite() => Some(x),
            _ => bail!("--shrinkage-days must be `auto` or a positive number, got `{v}`"),
        },
    };
    let fixed_half_life = match a.half_life_days.as_str() {
        "auto" => None,
        v => match v.parse::<f64>() {
            Ok(x) if x >= 0.0 && x.is_finite() => Some(x),
            _ => bail!("--half-life-days must be `auto` or a non-negative number, got `{v}`"),
        },
    };
    let trace =
        Trace::load(&a.trace).with_context(|| format!("loading trace {}", a.trace.display()))?;
    let truth =
        kairos_coordinator::synth::load_truth(&a.trace, &trace).map_err(anyhow::Error::msg)?;
    let trace_days = (trace.end_ts / DAY).ceil() as usize;
    let days = a.days.unwrap_or(trace_days).min(trace_days);
    if days == 0 {
        bail!("the trace has no whole day to replay");
    }
    let train_days = match a.train_days {
        Some(d) if d == 0 || d > trace_days => {
            bail!("--train-days must be between 1 and the trace's {trace_days} days")
        }
        Some(d) => d,
        None => {
            let d = crate::cli::default_train_days(days as u32, true) as usize;
            if d != crate::cli::PAPERS_TRAIN_DAYS as usize {
                eprintln!(
                    "note: {days} days to replay; the offline plan learns on the first {d} and \
                     scoring starts after them (--train-days sets it)"
                );
            }
            d
        }
    };
    let n = trace.feeds.len();
    // Days `0..days` are scored; the run goes on past them so that every posting of the
    // last day is measured to the fetch that found it, not cut off at the trace's end.
    let scored_end = days as f64 * DAY;
    let planner = PlannerSettings {
        metric: a.metric,
        budget: Budget::PerFeedPerDay(a.fetches_per_feed_per_day),
        min_fetches_per_day: a.min_fetches_per_day,
        slots: a.slots,
        shrinkage: fixed_shrinkage.unwrap_or(PlannerSettings::default().shrinkage),
        tune_shrinkage: fixed_shrinkage.is_none(),
        shape_pseudo_postings: a.shape_pseudo_postings,
        shape_mixture: a.shape_mixture,
        mixture_min_per_day: a.mixture_min_per_day,
        host_level: a.host_level,
        // The pair overrides each other: at most one is set, the last given.
        quick_updates: a.quick_updates || !a.no_quick_updates,
        calibrate_rates: !a.no_rate_calibration,
        rate_prior: !a.no_rate_prior,
        timer_peaks: !a.no_timer_peaks,
        lost_posting_hours: a.lost_posting_hours.0,
        weekly: a.weekly,
        host_fetches_per_day: a.max_fetches_per_host_per_day,
        max_fetches_per_minute: a.max_fetches_per_minute,
        explore_min_postings: a.explore_min_postings,
        explore_share: a.explore_share,
        window_days: a.window_days,
        half_life_days: fixed_half_life.unwrap_or(PlannerSettings::default().half_life_days),
        tune_half_life: fixed_half_life.is_none(),
        ..PlannerSettings::default()
    };
    planner.validate().map_err(anyhow::Error::msg)?;
    let cfg = ReplayConfig {
        planner,
        replan_every: std::time::Duration::from(a.replan_every)
            .as_secs_f64()
            .max(60.0),
        document_items: a.document_items.max(1),
        duration: scored_end + drain_days(a.min_fetches_per_day) * DAY,
        freeze_after: a.freeze_after_days.map(|d| d.max(0.0) * DAY),
    };
    // The hub's warnings (budget it cannot place, throttling) on stderr, as in `serve`.
    kairos_runtime::process::init_tracing();
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let log = runtime.block_on(run(&trace, &cfg))?;
    let live_seconds = started.elapsed().as_secs_f64();

    // The references, at the same budget.
    let budget = a.fetches_per_feed_per_day * n as f64;
    // The offline references are optimal under the live planner's constraints: the floors
    // that keep each feed's document from overflowing between fetches (the live planner
    // learns the document's size from the fetches; here it is the replay's), unless told
    // to plan as the papers do.
    let items = cfg.document_items;
    let pc = |policy| PlanConfig {
        metric: a.metric,
        policy,
        scheduler: Scheduler::Exact,
        slots: a.slots,
        period_seconds: DAY,
        budget,
        host_caps: HostCaps::uniform(a.max_fetches_per_host_per_day),
        smoothing: Smoothing::Linear,
        day_prices: Default::default(),
        // The references are held to the live run's cap too.
        slot_capacity: a
            .max_fetches_per_minute
            .map(|m| m * DAY / a.slots as f64 / 60.0),
    };
    let floor_cfg = pc(Policy::Optimal);
    // As the live planner does, the document floors are dropped when together they need
    // more than the budget (at half a fetch a day, 500 feeds posting 3.4 a day into 20-item
    // documents may need more than the budget to never overflow): the references then plan
    // with the configured minimums rather than refusing to plan at all.
    let configured_min = ceil_level(a.min_fetches_per_day);
    let fit = |mut l: kairos_coordinator::learn::Learned| {
        drop_raised_floors_unless_they_fit(&mut l.models, configured_min, budget);
        l
    };
    // The truth plan's floors, from the generating intensities: half a document for every
    // feed (the live planner's margin for feeds that post in clumps).
    let with_floors = |mut l: kairos_coordinator::learn::Learned| {
        if !a.references_ignore_documents {
            for m in l.models.iter_mut() {
                if let Some(hours) = cfg.planner.lost_posting_hours {
                    // Priced as the live plans price them; the intensities know no clumps.
                    m.document = Some(Document {
                        items: items as f64,
                        clump: 1.0,
                        lost_cost: m.weight * hours * 3600.0,
                    });
                    continue;
                }
                let floor = document_level(m, &floor_cfg, DOCUMENT_FILL * items as f64, true);
                m.min_level = m.min_level.max(floor).min(m.max_level);
            }
        }
        fit(l)
    };
    // Days `from..to` of the trace as a learning window.
    let span = |from: usize, to: usize, shrinkage: f64| LearnConfig {
        period_seconds: DAY,
        bins: 24,
        train_start: from as f64 * DAY,
        train_end: to as f64 * DAY,
        shrinkage,
        explore_min_postings: 0,
        min_level: ceil_level(a.min_fetches_per_day),
        max_level: a.slots as i32,
    };
    let learn_plain = |from: usize, to: usize| learn(&trace, &span(from, to, 2.0));
    // The offline references learn with the live learner's rules (one learner everywhere),
    // as if every posting of those days had been seen by a fetch.
    // They carry the live floors (the document's size as a fetch would have seen it, the
    // live margins), fitted to the budget as the live planner fits them.
    let documents = (!a.references_ignore_documents).then_some(items as u32);
    let learn_days = |from: usize, to: usize| {
        let (learned, _) = kairos_coordinator::control::from_trace::learn_live(
            &trace,
            &span(from, to, 0.0),
            &cfg.planner,
            documents,
        );
        fit(learned)
    };
    let learned = learn_days(0, train_days);
    let schedules = |models: &[_], policy| -> Result<Vec<FeedSchedule>> {
        let c = pc(policy);
        Ok(FeedSchedule::from_plan(&solve(models, &c)?, &c))
    };
    // Uniform polling is the naive baseline: the same interval for every feed, whatever its
    // document holds.
    let uniform = schedules(&learn_plain(0, train_days).models, Policy::Uniform)?;
    let offline = schedules(&learned.models, Policy::Optimal)?;
    // The peers, online from the same empty start, tuned to the live run's fetches.
    let started = Instant::now();
    // The peers spend what the live run spent on the scored days, on those days.
    let scored_from = train_days as f64 * DAY;
    let scored_from = if scored_from < cfg.duration {
        scored_from
    } else {
        0.0
    };
    let live_scored = fetches_in(&log.fetches, scored_from, scored_end);
    let live_fetches = fetches_before(&log.fetches, scored_end);
    let peer_budget = a.peer_budget.budget(live_scored, live_fetches);
    let peer_logs = run_peers(
        &trace,
        &peer_list,
        cfg.duration,
        items,
        peer_budget,
        a.metric,
        (scored_from, scored_end),
    );
    let peer_seconds = started.elapsed().as_secs_f64();
    let rows: Vec<DayRow> = (0..days)
        .map(|d| -> Result<DayRow> {
            let (s, e) = (d as f64 * DAY, (d + 1) as f64 * DAY);
            let (live, undiscovered) = replay_log(&trace, &log.fetches, s, e);
            let calibration =
                day_calibration(&trace.postings, &log.expected_by_replan, &log.fetches, s, e);
            let mut lost = ScrolledOff {
                live: scrolled_off_log(&trace, &log.fetches, items, s, e),
                uniform: scrolled_off_schedules(&trace, &uniform, items, s, e),
                offline: scrolled_off_schedules(&trace, &offline, items, s, e),
                offline_causal: 0,
            };
            let truth = match &truth {
                Some(t) => {
                    let mut l = learn_plain(0, train_days);
                    for (f, m) in l.models.iter_mut().enumerate() {
                        // The generator's hours are the whole truth: no learned peak.
                        m.post_bins = t.day(f, d);
                        m.peaks.clear();
                    }
                    let plan = schedules(&with_floors(l).models, Policy::Optimal)?;
                    Some(replay(&trace, &plan, s, e))
                }
                None => None,
            };
            let offline_causal = if d == 0 {
                None
            } else {
                let history = learn_days(d.saturating_sub(train_days), d);
                let plan = schedules(&history.models, Policy::Optimal)?;
                lost.offline_causal = scrolled_off_schedules(&trace, &plan, items, s, e);
                Some(replay(&trace, &plan, s, e))
            };
            Ok(DayRow {
                day: d,
                postings: trace
                    .postings
                    .iter()
                    .map(|p| p.iter().filter(|&&t| t >= s && t < e).count())
                    .sum(),
                live,
                live_undiscovered: undiscovered,
                live_held: log.held_by_day.get(d).copied().unwrap_or(0),
                scrolled_off: lost,
                uniform: replay(&trace, &uniform, s, e),
                offline_causal,
                truth,
                offline: replay(&trace, &offline, s, e),
                shrinkage_days: log
                    .shrinkage_by_day
                    .get(d)
                    .copied()
                    .filter(|b| b.is_finite()),
                host_prior_postings: log
                    .host_prior_by_day
                    .get(d)
                    .copied()
                    .filter(|b| b.is_finite()),
                half_life_days: log
                    .half_life_by_day
                    .get(d)
                    .copied()
                    .filter(|b| b.is_finite()),
                regime_feeds: log
                    .regime_feeds_by_day
                    .get(d)
                    .copied()
                    .flatten()
                    .map(|(rising, falling)| RegimeFeeds { rising, falling }),
                promise_ratio: log
                    .promise_ratio_by_day
                    .get(d)
                    .copied()
                    .filter(|b| b.is_finite()),
                expected_delay_min: (a.metric == Metric::Delay)
                    .then(|| log.expected_delay_min_by_day.get(d).copied())
                    .flatten()
                    .filter(|v| v.is_finite()),
                expected_delay_min_given_postings: calibration.map(|c| c.expected_min),
                given_postings_se_min: calibration.map(|c| c.se_min).filter(|v| v.is_finite()),
                given_postings_clusters: calibration.map(|c| c.clusters),
                calibration,
                peers: peer_logs
                    .iter()
                    .map(|p| (p.label(), window(&trace, &p.log, s, e)))
                    .collect(),
                peers_scrolled_off: peer_logs
                    .iter()
                    .map(|p| scrolled_off_log(&trace, &p.log, items, s, e))
                    .collect(),
            })
        })
        .collect::<Result<_>>()?;
    println!(
        "replay of {} ({n} feeds, {days} days) through the live hub: {} fetches ({:.2} per feed per day, budget {}), {} replans, {:.1} s",
        a.trace.display(),
        live_fetches,
        live_fetches as f64 / n as f64 / days as f64,
        a.fetches_per_feed_per_day,
        log.replans,
        live_seconds
    );
    let held: u64 = log.held_by_day.iter().sum();
    println!(
        "fetches the daily allowance held to the next day: {held} ({:.1}% of the fetches; a fetch held twice counts twice)",
        100.0 * held as f64 / live_fetches.max(1) as f64
    );
    if cfg.planner.quick_updates {
        println!(
            "quick updates: {} feeds re-solved between rounds after a fetch surprised their model",
            log.respecs_between_rounds
        );
    }
    println!(
        "offline: the optimal plan learned on the days before each day (up to {}); offline-{}: learned on days 0-{} (an oracle on those days)",
        train_days,
        train_days,
        train_days - 1
    );
    let unit = match a.metric {
        Metric::Delay => "average delay per posting, minutes",
        Metric::Miss => "missed postings per access",
        Metric::AccessDelay => "access delay per access, minutes",
    };
    println!("\n{unit}");
    if a.metric == Metric::Delay {
        println!("(expected: the live plans' own expected delay per posting, averaged over the day's replans)");
    }
    let fixed = format!("offline-{}", train_days);
    println!(
        "{:>4} {:>8} {:>9} {:>9} {:>9} {:>11} {:>12} {:>12} {:>12} {:>9} {:>9}",
        "day",
        "postings",
        "live",
        "uniform",
        "offline",
        fixed,
        "live/uniform",
        "live/offline",
        "live/fixed",
        "shrinkage",
        "expected"
    );
    for r in &rows {
        let (l, u, o) = (
            r.live.objective(a.metric),
            r.uniform.objective(a.metric),
            r.offline.objective(a.metric),
        );
        let c = r
            .offline_causal
            .as_ref()
            .map_or(f64::NAN, |c| c.objective(a.metric));
        println!(
            "{:>4} {:>8} {:>9.2} {:>9.2} {:>9.2} {:>11.2} {:>12.3} {:>12.3} {:>12.3} {:>9} {:>9}",
            r.day,
            r.postings,
            l,
            u,
            c,
            o,
            l / u,
            l / c,
            l / o,
            r.shrinkage_days.map_or("-".into(), |b| format!("{b}")),
            r.expected_delay_min
                .map_or("-".into(), |v| format!("{v:.2}"))
        );
    }
    let undiscovered: usize = rows.iter().map(|r| r.live_undiscovered).sum();
    let lost = rows
        .iter()
        .fold(ScrolledOff::default(), |t, r| ScrolledOff {
            live: t.live + r.scrolled_off.live,
            uniform: t.uniform + r.scrolled_off.uniform,
            offline_causal: t.offline_causal + r.scrolled_off.offline_causal,
            offline: t.offline + r.scrolled_off.offline,
        });
    // What the live plans expected to lose on the days scored, beside what they lost.
    let scored = train_days.min(days.saturating_sub(1))..days;
    let expected_lost: f64 = log
        .expected_lost_by_day
        .get(scored.clone())
        .unwrap_or_default()
        .iter()
        .filter(|v| v.is_finite())
        .sum();
    let lost_scored: usize = rows[scored.clone()]
        .iter()
        .map(|r| r.scrolled_off.live)
        .sum();
    println!(
        "postings that scrolled off a {items}-item document before any fetch saw them: live {} (days {}+: {lost_scored}, the plans expected {expected_lost:.0}), uniform {}, offline {}, {fixed} {}{}",
        lost.live,
        scored.start,
        lost.uniform,
        lost.offline_causal,
        lost.offline,
        match (a.references_ignore_documents, cfg.planner.lost_posting_hours) {
            (true, _) => " (references planned without documents)".to_string(),
            (false, Some(h)) => format!(
                " (references planned with the live documents, a lost posting priced at {h} h)"
            ),
            (false, None) => " (references planned with the live document floors)".to_string(),
        }
    );
    println!(
        "\npostings ingested by the hub {}; undiscovered by the end {undiscovered}; the hub's own average delay over trusted postings {:.1} min",
        log.postings_ingested, log.hub_avg_delay_min
    );
    println!(
        "feeds overdue past the floor (unfetched a day past the longest gap their plan or --min-fetches-per-day allows): {}",
        match log.overdue_most {
            (0, _) => format!("none at any of {} rounds", log.replans),
            (n, t) => format!(
                "at {} of {} rounds, at most {n} (day {:.2})",
                log.overdue_rounds,
                log.replans,
                t as f64 / 86_400_000.0
            ),
        }
    );
    print::print_day_shares(&log.day_budget_shares);
    print::print_minutes(
        &log.fetches,
        &log.besides_plan,
        scored_from,
        scored_end,
        a.max_fetches_per_minute,
        log.deferred_by_minute_cap,
    );
    print_windows(
        &trace,
        &rows,
        &log.fetches,
        &peer_logs,
        a.metric,
        days,
        live_fetches,
    );
    print_calibration(&rows, train_days);
    if !peer_logs.is_empty() {
        let settings = PeerSettings {
            budget: peer_budget,
            budget_arg: a.peer_budget,
            live_scored,
            live_fetches,
            scored: (scored_from, scored_end),
            train_days,
            days,
            seconds: peer_seconds,
        };
        print_peers(&rows, &peer_logs, &settings);
        if a.metric == Metric::Delay {
            // The plans' own price of a lost posting; a day where they use floors or price
            // nothing, so the figure still says what the losses would cost a reader.
            let (hours, whose) = match cfg.planner.lost_posting_hours {
                Some(h) if h > 0.0 => (h, "the plans' price"),
                Some(_) => (
                    DEFAULT_LOST_POSTING_HOURS,
                    "the default price; these plans price none",
                ),
                None => (
                    DEFAULT_LOST_POSTING_HOURS,
                    "the default price; these plans use floors",
                ),
            };
            print_priced(&rows, &peer_logs, train_days.min(days), hours, whose);
        }
    }
    if let Some(path) = &a.plot {
        let series = |label: &str, values: Vec<f64>, emphasis: bool| crate::plot::Series {
            label: label.to_string(),
            values,
            emphasis,
        };
        let mut lines = vec![
            series(
                "Kairos (live)",
                rows.iter().map(|r| r.live.objective(a.metric)).collect(),
                true,
            ),
            series(
                "offline plan (same history)",
                rows.iter()
                    .map(|r| {
                        r.offline_causal
                            .as_ref()
                            .map_or(f64::NAN, |o| o.objective(a.metric))
                    })
                    .collect(),
                false,
            ),
            series(
                "uniform",
                rows.iter().map(|r| r.uniform.objective(a.metric)).collect(),
                false,
            ),
        ];
        for (i, p) in peer_logs.iter().enumerate().filter(|(_, p)| p.tuned) {
            lines.push(series(
                &p.label(),
                rows.iter()
                    .map(|r| r.peers[i].1.objective(a.metric))
                    .collect(),
                false,
            ));
        }
        crate::plot::per_day(
            path,
            &format!(
                "{} at {} fetches per feed per day",
                a.trace.display(),
                a.fetches_per_feed_per_day
            ),
            unit,
            &lines,
        )?;
    }
    if let Some(path) = &a.promise_log {
        crate::calibration::write_promises(path, &trace, &log.expected_by_replan, &log.fetches)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.fetch_log {
        write_fetch_log(path, &trace, &log.fetches)?;
    }
    if let Some(dir) = &a.peer_fetch_logs {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for p in peer_logs.iter().filter(|p| p.tuned) {
            write_fetch_log(&dir.join(format!("{}.csv", p.peer.name())), &trace, &p.log)?;
        }
    }
    if let Some(path) = &a.json {
        std::fs::write(path, serde_json::to_vec_pretty(&rows)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
