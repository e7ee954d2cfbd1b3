//! The `simulate` command: train on the first days of a trace, replay the rest, and compare
//! the policies' plans with the expected figures, the aggregators' schedulers beside them.

use crate::cli::{learn_models, plan_config, setup, Common};
use anyhow::{bail, Context, Result};
use clap::Args;
use kairos_coordinator::plan::cost::Metric;
use kairos_coordinator::plan::days::solve_plan;
use kairos_coordinator::plan::planner::{PlanConfig, Policy};
use kairos_coordinator::simulate::{
    accesses_per_period, expected, replay, Expected, FeedSchedule, Realized,
};
use kairos_coordinator::time::DAY_S as DAY;
use std::time::{Duration, Instant};

/// Options of `simulate`.
#[derive(Args)]
pub struct SimulateArgs {
    #[command(flatten)]
    common: Common,
    /// Comma-separated policies.
    #[arg(
        long,
        default_value = "uniform,sched-only,alloc-only,combined,optimal",
        value_delimiter = ','
    )]
    policies: Vec<Policy>,
    /// Comma-separated average fetch intervals per feed (budgets), e.g. 6h,8h,12h,24h.
    #[arg(long, default_value = "6h,8h,12h,24h", value_delimiter = ',')]
    intervals: Vec<String>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// The aggregators' schedulers to run beside the plans, online from the trace's first
    /// day, each with its defaults and tuned to the same budget: `all`, `none`, or a
    /// comma-separated list (see `replay --help`).
    #[arg(long, default_value = "all")]
    peers: String,
    /// What a tuned peer may spend: `scored`, the plan's budget on the replayed days;
    /// `both`, that and also no more than the budget from day 0 to their end (see `replay
    /// --help`).
    #[arg(long, value_enum, default_value_t = crate::baselines::PeerBudgetArg::Scored)]
    peer_budget: crate::baselines::PeerBudgetArg,
    /// Items a feed's document holds, for the peers (they see only the documents).
    #[arg(long, default_value_t = 20)]
    document_items: usize,
}

#[derive(serde::Serialize)]
struct SimRow {
    interval: String,
    fetches_per_feed_per_day: f64,
    policy: &'static str,
    expected: Expected,
    realized: Realized,
    budget_fetches: f64,
    nonconvex_feeds: usize,
    search_fallbacks: usize,
    solve_seconds: f64,
}

#[derive(serde::Serialize)]
struct SimReport {
    trace: String,
    metric: Metric,
    slots: usize,
    train_days: u32,
    test_days: f64,
    /// Pseudo-days of shrinkage per interval (chosen on held-out days or fixed).
    shrinkage: Vec<(String, f64)>,
    /// Weekly periods: feeds with no weekly effect, pooled factors, weekday/weekend, day of
    /// week.
    week_shapes: [usize; 4],
    rows: Vec<SimRow>,
    /// The peers' schedulers, online from day 0, measured on the replayed days.
    peers: Vec<PeerRow>,
}

#[derive(serde::Serialize)]
struct PeerRow {
    interval: String,
    peer: String,
    realized: Realized,
    /// Fetches per feed per day over the whole run (learning days included).
    fetches_per_feed_per_day: f64,
}

pub fn simulate(a: SimulateArgs) -> Result<()> {
    let c = &a.common;
    let s = setup(c, true)?;
    if s.train_end >= s.test_end {
        bail!(
            "--train-days {} leaves no days to replay (the trace has {} days)",
            s.train_days,
            s.test_end / DAY
        );
    }
    if a.policies.is_empty() || a.intervals.is_empty() {
        bail!("--policies and --intervals need at least one value each");
    }
    let n = s.trace.feeds.len();
    let peer_list = crate::baselines::parse_peers(&a.peers).map_err(anyhow::Error::msg)?;
    let mut report = SimReport {
        trace: c.trace.display().to_string(),
        metric: c.metric,
        slots: c.slots,
        train_days: s.train_days,
        test_days: (s.test_end - s.train_end) / DAY,
        shrinkage: Vec::new(),
        week_shapes: [0; 4],
        rows: Vec::new(),
        peers: Vec::new(),
    };
    let apd = accesses_per_period(&s.trace, 0.0, s.train_end, s.period);
    for iv in &a.intervals {
        let d: Duration = humantime::parse_duration(iv.trim())
            .with_context(|| format!("bad interval `{iv}` (e.g. 6h, 90m, 1d)"))?;
        if d.as_secs_f64() <= 0.0 {
            bail!("interval `{iv}` must be positive");
        }
        let per_feed_day = DAY / d.as_secs_f64();
        let budget = per_feed_day * n as f64 * s.days_per_period;
        let base = plan_config(c, &s, Policy::Optimal, budget);
        let (learned, shrinkage) = learn_models(c, &s)?;
        report.shrinkage.push((iv.clone(), shrinkage));
        report.week_shapes = learned.week_shapes;
        for &policy in &a.policies {
            let pc = PlanConfig {
                policy,
                ..base.clone()
            };
            let t0 = Instant::now();
            let (plan, _) = solve_plan(&learned.models, &pc)
                .with_context(|| format!("planning {} at {iv}", policy.name()))?;
            let solve_seconds = t0.elapsed().as_secs_f64();
            let sched = FeedSchedule::from_plan(&plan, &pc);
            let realized = replay(&s.trace, &sched, s.train_end, s.test_end);
            report.rows.push(SimRow {
                interval: iv.clone(),
                fetches_per_feed_per_day: per_feed_day,
                policy: policy.name(),
                expected: expected(&learned.models, &plan, &pc, apd),
                realized,
                budget_fetches: budget / s.days_per_period * report.test_days,
                nonconvex_feeds: plan.stats.alloc.nonconvex_feeds,
                search_fallbacks: plan.stats.search_fallbacks,
                solve_seconds,
            });
        }
        // The peers fetch from day 0 (they learn while they fetch); they spend the plan's
        // daily budget on the replayed days (and with `--peer-budget both` no more than it
        // from day 0 to their end) and are measured there.
        let target = (per_feed_day * n as f64 * (s.test_end - s.train_end) / DAY).floor() as u64;
        // They run past the replayed days so the last postings are all found (the plans'
        // cyclic schedules have no end to be cut off at).
        for p in crate::baselines::run_peers(
            &s.trace,
            &peer_list,
            s.test_end + crate::baselines::drain_days(c.min_fetches_per_day) * DAY,
            a.document_items.max(1),
            a.peer_budget.budget(
                target,
                (per_feed_day * n as f64 * s.test_end / DAY).floor() as u64,
            ),
            c.metric,
            (s.train_end, s.test_end),
        ) {
            report.peers.push(PeerRow {
                interval: iv.clone(),
                peer: p.label(),
                realized: crate::baselines::window(&s.trace, &p.log, s.train_end, s.test_end),
                fetches_per_feed_per_day: crate::baselines::fetches_before(&p.log, s.test_end)
                    as f64
                    / n as f64
                    / (s.test_end / DAY),
            });
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_tables(&report, &a);
    }
    Ok(())
}

fn print_tables(r: &SimReport, a: &SimulateArgs) {
    println!(
        "trace {}  metric {}  slots {}  train {} d  replay {} d",
        r.trace, r.metric, r.slots, r.train_days, r.test_days
    );
    let figure = |title: &str, f: &dyn Fn(&SimRow) -> f64, prec: usize| {
        println!("\n{title}");
        print!("{:<12}", "policy");
        for iv in &a.intervals {
            print!("{:>12}", iv);
        }
        println!();
        for p in &a.policies {
            print!("{:<12}", p.name());
            for iv in &a.intervals {
                match r
                    .rows
                    .iter()
                    .find(|x| x.policy == p.name() && &x.interval == iv)
                {
                    Some(row) => print!("{:>12.prec$}", f(row)),
                    None => print!("{:>12}", "-"),
                }
            }
            println!();
        }
    };
    figure(
        "average delay per posting, minutes (realized)",
        &|x| x.realized.avg_delay_min,
        1,
    );
    figure(
        "average delay per posting, minutes (expected by the model)",
        &|x| x.expected.avg_delay_min,
        1,
    );
    figure(
        "p99 delay per posting, minutes",
        &|x| x.realized.p99_delay_min,
        0,
    );
    figure(
        "max delay per posting, minutes",
        &|x| x.realized.max_delay_min,
        0,
    );
    figure(
        "missed postings per access (realized)",
        &|x| x.realized.missed_per_access,
        3,
    );
    figure(
        "missed postings per access (expected)",
        &|x| x.expected.missed_per_access,
        3,
    );
    figure(
        "access delay per access, minutes (realized)",
        &|x| x.realized.access_delay_min_per_access,
        1,
    );
    figure(
        "access delay per access, minutes (expected)",
        &|x| x.expected.access_delay_min_per_access,
        1,
    );
    figure(
        "fetches in the replay / budget",
        &|x| x.realized.fetches as f64 / x.budget_fetches,
        3,
    );
    println!();
    for (iv, sh) in &r.shrinkage {
        let how = if a.common.shrinkage == "auto" {
            "chosen on held-out days"
        } else {
            "fixed"
        };
        println!("{iv}: shrinkage {sh} pseudo-days ({how})");
    }
    if r.week_shapes.iter().sum::<usize>() > 0 {
        let [d, p, ww, dow] = r.week_shapes;
        println!(
            "weekly shapes: {d} feeds daily, {p} pooled, {ww} weekday/weekend, {dow} day of week"
        );
    }
    if !r.peers.is_empty() {
        println!("\npeers, online from day 0 ({} on the replayed days; fetches per feed per day over all days)", r.metric);
        print!("{:<36}", "peer");
        for iv in &a.intervals {
            print!("{:>12}{:>8}", iv, "f/f/d");
        }
        println!();
        let mut labels: Vec<&str> = Vec::new();
        for p in &r.peers {
            if !labels.contains(&p.peer.as_str()) {
                labels.push(&p.peer);
            }
        }
        for label in labels {
            print!("{label:<36}");
            for iv in &a.intervals {
                match r
                    .peers
                    .iter()
                    .find(|p| p.peer == label && &p.interval == iv)
                {
                    // No posting of the replayed days was ever fetched.
                    Some(p) if p.realized.postings == 0 => {
                        print!("{:>12}{:>8.2}", "never", p.fetches_per_feed_per_day)
                    }
                    Some(p) => print!(
                        "{:>12.1}{:>8.2}",
                        p.realized.objective(r.metric),
                        p.fetches_per_feed_per_day
                    ),
                    None => print!("{:>12}{:>8}", "-", "-"),
                }
            }
            println!();
        }
    }
    let fallbacks: usize = r.rows.iter().map(|x| x.search_fallbacks).sum();
    let nonconvex: usize = r.rows.iter().map(|x| x.nonconvex_feeds).sum();
    println!("non-convex curves seen: {nonconvex}; papers' search fallbacks: {fallbacks}");
}
