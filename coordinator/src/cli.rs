//! Argument parsing, the options `plan` and `simulate` share, and the `plan` and `synth`
//! commands (`simulate` is in `simulate_cmd.rs`, `replay` in `replay_cmd.rs`).

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use kairos_coordinator::learn::{host_names, LearnConfig, Learned};
use kairos_coordinator::plan::alloc::{
    ceil_level, floor_level, level_rate, AllocError, HostCaps, Level,
};
use kairos_coordinator::plan::cost::Metric;
use kairos_coordinator::plan::days::{day_shares, solve_plan, EvenDays, EVEN_WITHIN};
use kairos_coordinator::plan::pattern::Smoothing;
use kairos_coordinator::plan::planner::{Plan, PlanConfig, Policy, Scheduler};
use kairos_coordinator::simulate::{accesses_per_period, expected, FeedSchedule};
use kairos_coordinator::time::DAY_S as DAY;
use kairos_coordinator::trace::Trace;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "kairos-coordinator",
    version,
    about = "Kairos feed-crawl coordinator: learn when feeds post and readers read, and plan when to fetch"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Learn from a trace and write a fetch schedule for a budget.
    Plan(PlanArgs),
    /// Train on the first days of a trace, replay the rest, and compare policies.
    Simulate(crate::simulate_cmd::SimulateArgs),
    /// Run the coordinator: gRPC API, worker control, relearn and replan loops, metrics.
    Serve(Box<crate::live::ServeArgs>),
    /// Run the coordinator with in-process workers; `--demo` adds a feed farm and readers.
    #[cfg(feature = "standalone")]
    Standalone(Box<crate::live::StandaloneArgs>),
    /// Write a synthetic trace (for benchmarks and what-if runs).
    Synth(SynthArgs),
    /// Drive the live hub with a recorded trace on a virtual clock; report each day next to
    /// uniform polling and an offline plan.
    Replay(crate::replay_cmd::ReplayArgs),
}

/// Options of `synth`.
#[derive(clap::Args)]
struct SynthArgs {
    /// Folder to write the trace into (created).
    #[arg(long)]
    out: PathBuf,
    /// Feeds.
    #[arg(long, default_value_t = 1000)]
    feeds: usize,
    /// Users.
    #[arg(long, default_value_t = 300)]
    users: usize,
    /// Days (day 0 is a Monday).
    #[arg(long, default_value_t = 28)]
    days: usize,
    /// Mean postings per feed per day (log-normally spread over feeds).
    #[arg(long, default_value_t = 3.4)]
    posts_per_day: f64,
    /// Subscriptions per user.
    #[arg(long, default_value_t = 30)]
    subs_per_user: usize,
    /// Accesses per user per day.
    #[arg(long, default_value_t = 20.0)]
    accesses_per_user_per_day: f64,
    /// Weekend posting rate relative to weekdays (1 = no weekly effect).
    #[arg(long, default_value_t = 0.5)]
    weekend_factor: f64,
    /// Hosts the feeds share, round robin (0 = no host column).
    #[arg(long, default_value_t = 0)]
    hosts: usize,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Drift: standard deviation of each feed's daily log-rate step (0: steady rates).
    #[arg(long, default_value_t = 0.0)]
    drift: f64,
    /// Bursts per feed per week, each `--burst-postings` postings within an hour.
    #[arg(long, default_value_t = 0.0)]
    bursts_per_week: f64,
    /// Mean postings of one burst.
    #[arg(long, default_value_t = 10.0)]
    burst_postings: f64,
    /// Share of feeds that start late or stop early (half each).
    #[arg(long, default_value_t = 0.0)]
    start_stop: f64,
    /// Share of feeds on a timer: each posts its day's postings within ten minutes after a
    /// clock time of its own (a nightly job, a scheduled post).
    #[arg(long, default_value_t = 0.0)]
    timer_share: f64,
    /// Clock times each timer feed posts at, 1 to 4 (2: a morning and an evening digest);
    /// each posting goes to one of them at random.
    #[arg(long, default_value_t = 1)]
    timer_windows: usize,
}

fn synth(a: SynthArgs) -> Result<()> {
    if !(a.weekend_factor >= 0.0 && a.weekend_factor.is_finite()) {
        bail!("--weekend-factor must be a non-negative number");
    }
    if !(a.posts_per_day > 0.0 && a.posts_per_day.is_finite()) || a.feeds == 0 || a.days == 0 {
        bail!("--feeds, --days and --posts-per-day must be positive");
    }
    // The trace is built in memory: bounds that keep it there (a rate of 1e308 would never
    // finish drawing postings).
    if a.posts_per_day > 10_000.0
        || !(0.0..=10_000.0).contains(&a.accesses_per_user_per_day)
        || a.feeds > 10_000_000
        || a.users > 10_000_000
        || a.days > 3_650
    {
        bail!(
            "synth takes at most 10,000 postings per feed and accesses per user a day, \
             10,000,000 feeds or users and 3,650 days"
        );
    }
    let within = |x: f64, hi: f64| (0.0..=hi).contains(&x);
    if !(within(a.drift, 2.0)
        && within(a.bursts_per_week, 1_000.0)
        && within(a.burst_postings, 10_000.0)
        && within(a.start_stop, 1.0)
        && within(a.timer_share, 1.0)
        && (1..=4).contains(&a.timer_windows))
    {
        bail!(
            "--drift takes 0 to 2, --bursts-per-week 0 to 1,000, --burst-postings 0 to \
             10,000, --start-stop and --timer-share a share from 0 to 1, and --timer-windows 1 to 4"
        );
    }
    let (t, truth) =
        kairos_coordinator::synth::generate_with_truth(&kairos_coordinator::synth::SynthConfig {
            feeds: a.feeds,
            users: a.users,
            days: a.days,
            mean_posts_per_day: a.posts_per_day,
            subs_per_user: a.subs_per_user,
            accesses_per_user_per_day: a.accesses_per_user_per_day,
            weekend_factor: a.weekend_factor,
            hosts: a.hosts,
            seed: a.seed,
            dynamics: kairos_coordinator::synth::Dynamics {
                drift: a.drift,
                bursts_per_week: a.bursts_per_week,
                burst_postings: a.burst_postings,
                start_stop: a.start_stop,
                timer_share: a.timer_share,
                timer_windows: a.timer_windows,
            },
        });
    kairos_coordinator::synth::write(&t, &a.out)
        .and_then(|()| kairos_coordinator::synth::write_truth(&t, &truth, &a.out))
        .with_context(|| format!("writing {}", a.out.display()))?;
    let postings: usize = t.postings.iter().map(Vec::len).sum();
    println!(
        "wrote {}: {} feeds, {} users, {} days, {postings} postings, {} accesses",
        a.out.display(),
        a.feeds,
        a.users,
        a.days,
        t.accesses.len()
    );
    Ok(())
}

#[derive(Clone, Copy, ValueEnum)]
enum PeriodArg {
    Day,
    Week,
}

#[derive(Clone, Copy, ValueEnum)]
enum SchedulerArg {
    /// The exact solver.
    Exact,
    /// The papers' optimality-condition search (O(N²·m) per feed).
    Paper,
}

/// Options shared by `plan` and `simulate`.
#[derive(Args, Clone)]
pub(crate) struct Common {
    /// Trace folder (feeds.csv, postings.csv, users.csv, subscriptions.csv, accesses.csv).
    #[arg(long)]
    pub(crate) trace: PathBuf,
    /// Objective: delay, miss or access-delay.
    #[arg(long, default_value = "delay")]
    pub(crate) metric: Metric,
    /// Minimum fetches per day per feed; a fraction such as 0.142857 means once a week.
    #[arg(long, default_value_t = 1.0)]
    pub(crate) min_fetches_per_day: f64,
    /// Maximum fetches per day per feed.
    #[arg(long)]
    max_fetches_per_day: Option<f64>,
    /// Cap on the summed fetches per day of the feeds of one host (feeds.csv `host` column).
    #[arg(long)]
    max_fetches_per_host_per_day: Option<f64>,
    /// Most planned fetches the cluster starts in any one minute of the plan's clock: a
    /// minute above it gives up the fetches that cost their feeds least to move, to nearby
    /// minutes with room (counted day by day: a feed fetched every k days where it is
    /// fetched). Planned fetches only: catch-ups and other fetches the workers add are not
    /// held. Default: uncapped.
    #[arg(long)]
    max_fetches_per_minute: Option<f64>,
    /// Days at the start of the trace to learn from [default: 14; on a trace of 14 days or
    /// fewer, all of it for `plan` and its first half for `simulate`, which needs days left
    /// to score].
    #[arg(long)]
    pub(crate) train_days: Option<u32>,
    /// Slots per period.
    #[arg(long, default_value_t = 1440)]
    pub(crate) slots: usize,
    /// Period of the learned patterns and schedules.
    #[arg(long, value_enum, default_value = "day")]
    period: PeriodArg,
    /// How the non-optimal policies place fetches.
    #[arg(long, value_enum, default_value = "exact")]
    scheduler: SchedulerArg,
    /// Closure tolerance of the papers' search, in slots.
    #[arg(long, default_value_t = 1)]
    search_tol_slots: usize,
    /// Pseudo-days of the pooled pattern each feed's hourly counts are shrunk toward
    /// (the live learner's rule), or `auto`: chosen on held-out days, as `serve` does.
    #[arg(long, default_value = "auto")]
    pub(crate) shrinkage: String,
    /// Feeds with fewer training postings are candidates to be fetched at least daily.
    #[arg(long, default_value_t = 3)]
    explore_min_postings: usize,
    /// Share of the budget above the minimums that exploring candidates may take (the
    /// most recently active first); 0 turns exploration off.
    #[arg(long, default_value_t = kairos_coordinator::control::relearn::DEFAULT_EXPLORE_SHARE)]
    explore_share: f64,
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
    /// Base shapes of the mixture feeds' daily shapes are pooled in (each at any hourly
    /// shift; similar feeds share strength). 0: one pooled shape for every feed.
    #[arg(long, default_value_t = kairos_coordinator::control::relearn::PlannerSettings::default().shape_mixture)]
    shape_mixture: usize,
    /// Budget, fetches per feed per day, below which the one pooled shape is used in place
    /// of the mixture (0: the mixture at any budget).
    #[arg(long, default_value_t = kairos_coordinator::control::relearn::DEFAULT_MIXTURE_MIN_PER_DAY)]
    mixture_min_per_day: f64,
    /// Pool each feed's rate and hours with its host's other feeds' as a level between the
    /// feed and everyone (strength chosen on held-out days; off by default, docs/PLANNER.md).
    #[arg(long)]
    host_level: bool,
}

#[derive(Args)]
struct PlanArgs {
    #[command(flatten)]
    common: Common,
    /// Policy.
    #[arg(long, default_value = "optimal")]
    policy: Policy,
    /// Budget as average fetches per feed per day.
    #[arg(long, conflicts_with = "budget", required_unless_present = "budget")]
    fetches_per_feed_per_day: Option<f64>,
    /// Budget as total fetches per day.
    #[arg(long)]
    budget: Option<f64>,
    /// Schedule file to write.
    #[arg(long)]
    out: PathBuf,
}

/// Entry point of the binary.
pub fn run() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Plan(a) => plan(a),
        Command::Simulate(a) => crate::simulate_cmd::simulate(a),
        Command::Serve(a) => crate::live::serve(*a),
        #[cfg(feature = "standalone")]
        Command::Standalone(a) => crate::standalone::run(*a),
        Command::Synth(a) => synth(a),
        Command::Replay(a) => crate::replay_cmd::replay_cmd(a),
    }
}

/// Settings derived from the common options for one trace.
pub(crate) struct Setup {
    pub(crate) trace: Trace,
    pub(crate) period: f64,
    pub(crate) days_per_period: f64,
    bins: usize,
    /// Days learned from: `--train-days`, or the default for this trace's length.
    pub(crate) train_days: u32,
    pub(crate) train_end: f64,
    pub(crate) test_end: f64,
    min_level: Level,
    max_level: Level,
}

/// The papers' training window, days: what `--train-days` is when the trace is longer.
pub(crate) const PAPERS_TRAIN_DAYS: u32 = 14;

/// Days learned from when `--train-days` is not given: the papers' 14, or on a trace of at
/// most 14 days all of it (`held_out` false: a plan for the days after the trace) or its first
/// half (`held_out` true: the rest is scored). A trace of a few days is what a user trying
/// Kairos on their own export is likely to bring first; refusing it for want of a flag
/// would send them away with nothing.
pub(crate) fn default_train_days(trace_days: u32, held_out: bool) -> u32 {
    if trace_days > PAPERS_TRAIN_DAYS {
        PAPERS_TRAIN_DAYS
    } else if held_out {
        (trace_days / 2).max(1)
    } else {
        trace_days.max(1)
    }
}

/// Loads the trace and checks the options `plan` and `simulate` share; `held_out` says
/// whether the command scores days after the training window (it sets the default
/// `--train-days` on a short trace).
pub(crate) fn setup(c: &Common, held_out: bool) -> Result<Setup> {
    if !(c.min_fetches_per_day > 0.0 && c.min_fetches_per_day.is_finite()) {
        bail!("--min-fetches-per-day must be a positive number (a fraction such as 0.142857 means once a week)");
    }
    if c.slots < 2 || c.slots > 100_000 {
        bail!("--slots must be between 2 and 100000");
    }
    if c.train_days == Some(0) {
        bail!("--train-days must be at least 1");
    }
    if !(0.0..=1.0).contains(&c.explore_share) {
        bail!(
            "--explore-share must be between 0 and 1, got {}",
            c.explore_share
        );
    }
    if let Some(m) = c.max_fetches_per_minute {
        if !(m > 0.0 && m.is_finite()) {
            bail!("--max-fetches-per-minute must be a positive number, got {m}");
        }
    }
    if let Some(h) = c.max_fetches_per_host_per_day {
        if !(h > 0.0 && h.is_finite()) {
            bail!("--max-fetches-per-host-per-day must be a positive number, got {h}");
        }
    }
    let trace =
        Trace::load(&c.trace).with_context(|| format!("loading trace {}", c.trace.display()))?;
    let (period, days_per_period, bins) = match c.period {
        PeriodArg::Day => (DAY, 1.0, 24),
        PeriodArg::Week => (7.0 * DAY, 7.0, 168),
    };
    let test_end = (trace.end_ts / DAY).floor() * DAY + DAY;
    let trace_days = (test_end / DAY) as u32;
    let train_days = match c.train_days {
        Some(d) => d,
        None => {
            let d = default_train_days(trace_days, held_out);
            if d != PAPERS_TRAIN_DAYS {
                eprintln!(
                    "note: the trace has {trace_days} days; learning on the first {d} \
                     (--train-days sets it)"
                );
            }
            d
        }
    };
    let train_end = train_days as f64 * DAY;
    // A plan learned from days that hold no posting is a plan learned from nothing; said
    // once, here, since the run itself goes on (a cold start is a plan an operator may want).
    let first = trace
        .postings
        .iter()
        .filter_map(|p| p.first().copied())
        .fold(f64::INFINITY, f64::min);
    if first >= train_end {
        eprintln!(
            "warning: the {} training days hold no posting (the trace's first is on day {:.0}): \
             every feed is planned as unknown",
            train_days,
            (first / DAY).floor()
        );
    }
    let min_rate = c.min_fetches_per_day * days_per_period;
    let min_level = ceil_level(min_rate);
    let max_level = match c.max_fetches_per_day {
        Some(b) if b < c.min_fetches_per_day => bail!(
            "--max-fetches-per-day {b} is below --min-fetches-per-day {}",
            c.min_fetches_per_day
        ),
        Some(b) => floor_level(b * days_per_period, min_level),
        None => c.slots as Level,
    }
    .min(c.slots as Level);
    Ok(Setup {
        trace,
        period,
        days_per_period,
        bins,
        train_days,
        train_end,
        test_end,
        min_level,
        max_level,
    })
}

fn learn_config(c: &Common, s: &Setup, shrinkage: f64) -> LearnConfig {
    LearnConfig {
        period_seconds: s.period,
        bins: s.bins,
        train_start: 0.0,
        train_end: s.train_end,
        shrinkage,
        explore_min_postings: c.explore_min_postings,
        min_level: s.min_level,
        max_level: s.max_level,
    }
}

pub(crate) fn plan_config(c: &Common, s: &Setup, policy: Policy, budget: f64) -> PlanConfig {
    PlanConfig {
        metric: c.metric,
        policy,
        scheduler: match c.scheduler {
            SchedulerArg::Exact => Scheduler::Exact,
            SchedulerArg::Paper => Scheduler::Paper {
                tol_slots: c.search_tol_slots,
            },
        },
        slots: c.slots,
        period_seconds: s.period,
        budget,
        host_caps: HostCaps::uniform(
            c.max_fetches_per_host_per_day
                .map(|h| h * s.days_per_period),
        ),
        smoothing: Smoothing::Linear,
        day_prices: Default::default(),
        slot_capacity: c
            .max_fetches_per_minute
            .map(|m| m * s.period / c.slots as f64 / 60.0),
    }
}

/// Learns every feed's model with the live learner's rules, as `serve` and `replay` learn
/// (one learner everywhere): shrinkage in pseudo-days, chosen on held-out days unless
/// fixed; hours spread onto slots piecewise-linearly. Returns the pseudo-days used.
pub(crate) fn learn_models(c: &Common, s: &Setup) -> Result<(Learned, f64)> {
    let settings = learner_settings(c, s)?;
    Ok(kairos_coordinator::control::from_trace::learn_live(
        &s.trace,
        &learn_config(c, s, 0.0),
        &settings,
        None,
    ))
}

/// [`learn_models`], taking the trace's postings (its `postings` are left empty): `plan`
/// needs nothing of them after learning, and the learner then holds them once instead of
/// beside the trace's copy.
fn learn_models_taking_postings(c: &Common, s: &mut Setup) -> Result<(Learned, f64)> {
    let settings = learner_settings(c, s)?;
    let cfg = learn_config(c, s, 0.0);
    Ok(
        kairos_coordinator::control::from_trace::learn_live_taking_postings(
            &mut s.trace,
            &cfg,
            &settings,
        ),
    )
}

/// The learner's settings from the command line.
fn learner_settings(
    c: &Common,
    s: &Setup,
) -> Result<kairos_coordinator::control::relearn::PlannerSettings> {
    let fixed_shrinkage = match c.shrinkage.as_str() {
        "auto" => None,
        other => match other.parse::<f64>() {
            Ok(v) if v >= 0.0 && v.is_finite() => Some(v),
            _ => bail!("--shrinkage must be `auto` or a non-negative number, got `{other}`"),
        },
    };
    if !(c.mixture_min_per_day >= 0.0 && c.mixture_min_per_day.is_finite()) {
        bail!(
            "--mixture-min-per-day must be a finite number of at least 0, got {}",
            c.mixture_min_per_day
        );
    }
    let settings = kairos_coordinator::control::relearn::PlannerSettings {
        metric: c.metric,
        min_fetches_per_day: c.min_fetches_per_day,
        max_fetches_per_day: c.max_fetches_per_day,
        slots: (c.slots as f64 / s.days_per_period).round().max(2.0) as usize,
        shrinkage: fixed_shrinkage.unwrap_or(1.0),
        tune_shrinkage: fixed_shrinkage.is_none(),
        explore_min_postings: c.explore_min_postings,
        explore_share: c.explore_share,
        shape_mixture: c.shape_mixture,
        mixture_min_per_day: c.mixture_min_per_day,
        host_level: c.host_level,
        host_fetches_per_day: c.max_fetches_per_host_per_day,
        max_fetches_per_minute: c.max_fetches_per_minute,
        calibrate_rates: !c.no_rate_calibration,
        rate_prior: !c.no_rate_prior,
        timer_peaks: !c.no_timer_peaks,
        ..Default::default()
    };
    Ok(settings)
}

fn plan(a: PlanArgs) -> Result<()> {
    let started = Instant::now();
    let c = &a.common;
    let mut s = setup(c, false)?;
    let loaded_at = started.elapsed();
    let rss_loaded = memory_kib("VmRSS");
    if s.train_end > s.test_end {
        bail!(
            "--train-days {} is longer than the trace ({} days)",
            s.train_days,
            s.test_end / DAY
        );
    }
    let n = s.trace.feeds.len();
    let per_day = match (a.fetches_per_feed_per_day, a.budget) {
        (Some(x), _) => x * n as f64,
        (_, Some(m)) => m,
        _ => unreachable!("clap requires one budget option"),
    };
    if !(per_day > 0.0 && per_day.is_finite()) {
        bail!("the budget must be a positive number of fetches");
    }
    let budget = per_day * s.days_per_period;
    let floor = level_rate(s.min_level) * s.trace.feeds.len() as f64;
    if budget + 1e-9 < floor {
        bail!(
            "a budget of {per_day} fetches a day is below what --min-fetches-per-day {} needs for {} feeds ({:.1} a day): lower --min-fetches-per-day (0.142857 is once a week) or raise the budget",
            c.min_fetches_per_day,
            s.trace.feeds.len(),
            floor / s.days_per_period
        );
    }
    let pc = plan_config(c, &s, a.policy, budget);
    let (learned, shrinkage) = learn_models_taking_postings(c, &mut s)?;
    let learned_at = started.elapsed();
    // The high-water mark as each phase ends: which phase holds the peak.
    let hwm_learned = memory_kib("VmHWM");
    let (plan, even_days) = solve_plan(&learned.models, &pc).map_err(|e| match e {
        AllocError::HostCapBelowMinimums { host, needed, cap } => {
            let name = host_names(&s.trace)
                .get(host as usize)
                .map_or_else(|| host.to_string(), |h| h.to_string());
            let feeds = learned.models.iter().filter(|m| m.host == Some(host)).count();
            anyhow::anyhow!(
                "host {name} ({feeds} feeds): their minimum fetches need {:.3} a day, above --max-fetches-per-host-per-day {:.3}; raise the cap or lower --min-fetches-per-day",
                needed / s.days_per_period,
                cap / s.days_per_period
            )
        }
        other => anyhow::Error::new(other).context("allocating the budget"),
    })?;
    let solved_at = started.elapsed();
    let hwm_solved = memory_kib("VmHWM");
    write_schedule(&a.out, &s.trace, &plan, &pc)?;
    let written_at = started.elapsed();
    let exp = expected(
        &learned.models,
        &plan,
        &pc,
        accesses_per_period(&s.trace, 0.0, s.train_end, s.period),
    );
    println!("feeds                 {n}");
    println!(
        "budget                {:.3} fetches per day ({:.3} allocated)",
        per_day,
        plan.fetches_per_period / s.days_per_period
    );
    let unspent = (budget - plan.fetches_per_period) / s.days_per_period;
    if let Some(cap) = c
        .max_fetches_per_host_per_day
        .filter(|_| unspent > 1e-6 * per_day)
    {
        let mut per_host: std::collections::HashMap<u32, f64> = Default::default();
        for (m, f) in learned.models.iter().zip(&plan.feeds) {
            if let Some(h) = m.host {
                *per_host.entry(h).or_default() += level_rate(f.level) / s.days_per_period;
            }
        }
        let full = per_host.values().filter(|&&r| r >= cap - 1e-6).count();
        eprintln!(
            "warning: {unspent:.3} fetches per day of the budget cannot be spent: {full} of {} hosts are at --max-fetches-per-host-per-day {cap} and the feeds without a full host are at their maximum",
            per_host.len()
        );
    }
    println!("policy / metric       {} / {}", a.policy.name(), c.metric);
    println!("smoothing / slots     {:?} / {}", pc.smoothing, pc.slots);
    println!(
        "shrinkage             {shrinkage} pseudo-days ({})",
        if c.shrinkage == "auto" {
            "chosen on held-out days"
        } else {
            "fixed"
        }
    );
    println!("exploring feeds       {}", learned.exploring);
    let timed = learned.models.iter().filter(|m| !m.peaks.is_empty());
    println!(
        "feeds on a timer      {} ({} windows)",
        timed.clone().count(),
        timed.map(|m| m.peaks.len()).sum::<usize>()
    );
    if learned.week_shapes.iter().sum::<usize>() > 0 {
        let [d, p, ww, dow] = learned.week_shapes;
        println!(
            "weekly shapes         {d} daily, {p} pooled, {ww} weekday/weekend, {dow} day of week"
        );
    }
    if let Some(even) = &even_days {
        print_even_days(even, plan.fetches_per_period / s.days_per_period);
    }
    println!(
        "expected cost         {:.6e} per period ({})",
        plan.expected_cost, c.metric
    );
    println!(
        "expected delay        {:.2} min per posting",
        exp.avg_delay_min
    );
    println!(
        "expected misses       {:.4} per access",
        exp.missed_per_access
    );
    println!(
        "expected access delay {:.2} min per access",
        exp.access_delay_min_per_access
    );
    if a.policy == Policy::Optimal {
        println!(
            "allocation            {} exact solves, {} exchanges, {} non-convex feeds",
            plan.stats.alloc.evaluations,
            plan.stats.alloc.exchanges,
            plan.stats.alloc.nonconvex_feeds
        );
    }
    if let Some(c) = &plan.stats.crowding {
        println!(
            "per-minute cap        {:.3} fetches a slot: {} crowded slots, busiest {:.2} -> {:.2}, {} fetches moved, {:.2} left above{}",
            c.capacity,
            c.crowded_slots,
            c.busiest_before,
            c.busiest_after,
            c.moved,
            c.left_over,
            if c.infeasible {
                " (the budget needs more than the cap allows over the period: levelled to the even load)"
            } else {
                ""
            }
        );
    }
    if plan.stats.search_fallbacks > 0 {
        println!(
            "search fallbacks      {} feeds (no closing plan; exact solver used)",
            plan.stats.search_fallbacks
        );
    }
    let done = started.elapsed();
    println!(
        "time                  {:.2}s (load {:.2}s, learn {:.2}s, solve {:.2}s, write {:.2}s, evaluate {:.2}s; {} threads)",
        done.as_secs_f64(),
        loaded_at.as_secs_f64(),
        (learned_at - loaded_at).as_secs_f64(),
        (solved_at - learned_at).as_secs_f64(),
        (written_at - solved_at).as_secs_f64(),
        (done - written_at).as_secs_f64(),
        rayon::current_num_threads()
    );
    if let (Some(loaded), Some(peak)) = (rss_loaded, memory_kib("VmHWM")) {
        println!(
            "memory                {} MiB resident after loading, peak {} MiB: {:.0} bytes per feed beyond the loaded trace",
            loaded / 1024,
            peak / 1024,
            (peak.saturating_sub(loaded) * 1024) as f64 / n as f64
        );
        if let (Some(l), Some(s)) = (hwm_learned, hwm_solved) {
            println!(
                "peak by phase         {} MiB by the end of learning, {} by the end of solving, {} in all",
                l / 1024,
                s / 1024,
                peak / 1024
            );
        }
    }
    println!("schedule              {}", a.out.display());
    Ok(())
}

/// A memory figure of this process from `/proc/self/status` (Linux), in KiB.
fn memory_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn write_schedule(path: &Path, trace: &Trace, plan: &Plan, pc: &PlanConfig) -> Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = std::io::BufWriter::new(file);
    writeln!(w, "feed_id,fetch_offset_seconds,period_seconds")?;
    for (sched, row) in FeedSchedule::from_plan(plan, pc).iter().zip(&trace.feeds) {
        for &o in &sched.offsets {
            writeln!(w, "{},{},{}", row.id, fmt_secs(o), fmt_secs(sched.period))?;
        }
    }
    w.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

fn fmt_secs(v: f64) -> String {
    if (v - v.round()).abs() < 1e-6 {
        format!("{}", v.round() as i64)
    } else {
        format!("{v:.3}")
    }
}

/// The line on how evenly a plan longer than a day spreads its fetches over its days, and
/// the prices that spread them ([`kairos_coordinator::plan::days`]).
pub(crate) fn print_even_days(even: &EvenDays, mean_per_day: f64) {
    let shares = day_shares(&even.per_day);
    let (lo, hi) = shares
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
    let per_day: Vec<String> = even.per_day.iter().map(|d| format!("{d:.0}")).collect();
    println!(
        "days                  {} fetches (mean {mean_per_day:.0}); busiest {hi:.3}, quietest {lo:.3} of the mean day after {} solve{}{}",
        per_day.join(" / "),
        even.solves,
        if even.solves == 1 { "" } else { "s" },
        if hi - 1.0 > EVEN_WITHIN || 1.0 - lo > EVEN_WITHIN {
            " (not within the 2% the day prices aim at)"
        } else {
            ""
        }
    );
}
