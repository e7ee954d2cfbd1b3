//! Planner benchmarks that need whole plans rather than micro-loops:
//!
//! 1. per-feed exact solve time for the allocation mix of the sample trace (N = 288, 1440);
//! 2. the papers' condition search vs the exact solver at equal N, time and cost;
//! 3. a full `plan` (learn + allocate + schedule) on 100,000 synthetic feeds and 10,000 users
//!    at N = 1440, with peak memory;
//! 4. an incremental replan after 1% of the feeds changed;
//! 5. what pricing lost postings costs: the plan of (3) with every feed's 20-item document
//!    priced at a day of delay per lost posting, beside the same models without, at 4 and 2
//!    fetches per feed per day, and the expected-loss count a live round makes after it.
//!
//! Run: `cargo bench -p kairos-coordinator --bench plan_scale` (add `-- quick` for a smaller
//! synthetic instance). Prints medians and ratios measured side by side in this one run.

use kairos_coordinator::learn::{learn, LearnConfig};
use kairos_coordinator::plan::alloc::level_period_multiple;
use kairos_coordinator::plan::cost::{CostTable, Metric};
use kairos_coordinator::plan::exact::ExactSolver;
use kairos_coordinator::plan::overflow::Document;
use kairos_coordinator::plan::pattern::{expand, Smoothing};
use kairos_coordinator::plan::planner::{
    expected_lost, replan, solve, solve_optimal_with_state, FeedModel, PlanConfig, Policy,
    Scheduler,
};
use kairos_coordinator::plan::search::condition_search;
use kairos_coordinator::synth::{generate, SynthConfig};
use kairos_coordinator::trace::Trace;
use std::path::Path;
use std::time::Instant;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Memory figures from /proc/self/status, in KiB.
fn mem(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn learn_cfg(days: f64) -> LearnConfig {
    LearnConfig {
        period_seconds: 86_400.0,
        bins: 24,
        train_start: 0.0,
        train_end: days * 86_400.0,
        shrinkage: 2.0,
        explore_min_postings: 3,
        min_level: 1,
        max_level: 1440,
    }
}

fn plan_cfg(slots: usize, budget: f64) -> PlanConfig {
    PlanConfig {
        metric: Metric::Delay,
        policy: Policy::Optimal,
        scheduler: Scheduler::Exact,
        slots,
        period_seconds: 86_400.0,
        budget,
        host_caps: Default::default(),
        smoothing: Smoothing::Linear,
        day_prices: Default::default(),
        slot_capacity: None,
    }
}

fn table(feed: &FeedModel, slots: usize, metric: Metric) -> (CostTable, Vec<f64>, Vec<f64>) {
    let (mut p, mut q) = (Vec::new(), Vec::new());
    expand(&feed.post_bins, slots, Smoothing::Linear, &mut p);
    expand(&feed.access_bins, slots, Smoothing::Linear, &mut q);
    (
        CostTable::new(metric, &p, &q, 86_400.0 / slots as f64),
        p,
        q,
    )
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces/sample-500");
    let trace = Trace::load(&sample).expect("sample trace");
    let learned = learn(&trace, &learn_cfg(14.0));
    let n_feeds = learned.models.len();

    println!("## 1. Exact solve per feed, allocation mix of sample-500 (optimal plan, 4 fetches/feed/day)");
    for slots in [288usize, 1440] {
        let plan = solve(&learned.models, &plan_cfg(slots, 4.0 * n_feeds as f64)).expect("plan");
        let mut solver = ExactSolver::new();
        let mut times = Vec::new();
        let mut ms = Vec::new();
        for (feed, fp) in learned.models.iter().zip(&plan.feeds) {
            if level_period_multiple(fp.level) > 1 {
                continue;
            }
            let (t, _, _) = table(feed, slots, Metric::Delay);
            let m = fp.level as usize;
            let mut best = f64::INFINITY;
            for _ in 0..5 {
                let t0 = Instant::now();
                std::hint::black_box(solver.solve(&t, m));
                best = best.min(t0.elapsed().as_secs_f64());
            }
            times.push(best * 1e3);
            ms.push(m as f64);
        }
        println!(
            "N={slots}: feeds {} | m median {} p90 {} max {} | solve ms median {:.4} p90 {:.4} max {:.4}",
            times.len(),
            median(&mut ms.clone()),
            pct(&mut ms.clone(), 0.9),
            pct(&mut ms, 1.0),
            median(&mut times.clone()),
            pct(&mut times.clone(), 0.9),
            pct(&mut times, 1.0)
        );
    }

    println!("\n## 2. Papers' condition search vs exact solver, same feeds, same m, N = 288");
    let plan = solve(&learned.models, &plan_cfg(288, 4.0 * n_feeds as f64)).expect("plan");
    for tol in [1usize, 3] {
        let (mut ratio_t, mut excess) = (Vec::new(), Vec::new());
        let (mut none, mut worse) = (0, 0);
        let mut solver = ExactSolver::new();
        for (feed, fp) in learned
            .models
            .iter()
            .zip(&plan.feeds)
            .filter(|(_, p)| p.level >= 2)
            .take(if quick { 10 } else { 40 })
        {
            let (t, p, q) = table(feed, 288, Metric::Delay);
            let m = fp.level as usize;
            let t0 = Instant::now();
            let exact = solver.solve(&t, m);
            let te = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            let found = condition_search(&t, &p, &q, m, tol);
            let ts = t1.elapsed().as_secs_f64();
            ratio_t.push(ts / te);
            match found.schedule {
                Some(s) => {
                    let e = s.cost / exact.cost - 1.0;
                    if e > 1e-9 {
                        worse += 1;
                    }
                    excess.push(e * 100.0);
                }
                None => none += 1,
            }
        }
        let k = ratio_t.len();
        println!(
            "tol {tol} slot(s): {k} feeds | search/exact time median {:.0}x min {:.0}x | search cost above exact: median {:.2}% max {:.2}%, worse on {worse}, no closing plan on {none}",
            median(&mut ratio_t.clone()),
            pct(&mut ratio_t, 0.0),
            if excess.is_empty() { f64::NAN } else { median(&mut excess.clone()) },
            if excess.is_empty() { f64::NAN } else { pct(&mut excess, 1.0) },
        );
    }

    println!(
        "\n## 3. Full plan on a synthetic trace, N = 1440, optimal policy, 4 fetches/feed/day"
    );
    let (feeds, users) = if quick {
        (10_000, 1_000)
    } else {
        (100_000, 10_000)
    };
    let rss0 = mem("VmRSS:");
    let synth = generate(&SynthConfig {
        feeds,
        users,
        days: 14,
        mean_posts_per_day: 3.4,
        subs_per_user: 30,
        accesses_per_user_per_day: 20.0,
        weekend_factor: 0.5,
        hosts: 0,
        seed: 7,
        dynamics: Default::default(),
    });
    let postings: usize = synth.postings.iter().map(Vec::len).sum();
    let rss_trace = mem("VmRSS:");
    println!(
        "trace: {feeds} feeds, {users} users, {postings} postings, {} accesses; trace RSS {} MiB",
        synth.accesses.len(),
        (rss_trace.saturating_sub(rss0)) / 1024
    );
    let threads = rayon::current_num_threads();
    let t0 = Instant::now();
    let models = learn(&synth, &learn_cfg(14.0)).models;
    let t_learn = t0.elapsed();
    let cfg = plan_cfg(1440, 4.0 * feeds as f64);
    let t1 = Instant::now();
    let state = solve_optimal_with_state(&models, &cfg).expect("plan");
    let t_plan = t1.elapsed();
    let hwm = mem("VmHWM:");
    let stats = &state.plan().stats.alloc;
    println!(
        "learn {:.2}s + allocate & schedule {:.2}s = {:.2}s wall on {threads} threads; {} exact solves, {} exchanges, {} non-convex feeds",
        t_learn.as_secs_f64(),
        t_plan.as_secs_f64(),
        (t_learn + t_plan).as_secs_f64(),
        stats.evaluations,
        stats.exchanges,
        stats.nonconvex_feeds
    );
    println!(
        "peak RSS {} MiB; beyond the trace: {} MiB = {:.0} bytes per feed",
        hwm / 1024,
        hwm.saturating_sub(rss_trace) / 1024,
        hwm.saturating_sub(rss_trace) as f64 * 1024.0 / feeds as f64
    );

    println!("\n## 4. Incremental replan after 1% of feeds changed");
    let original = models.clone();
    let mut models = models;
    let changed: Vec<usize> = (0..feeds).step_by(100).collect();
    for &i in &changed {
        let h = i % 24;
        models[i].post_bins[h] += 3.0 * models[i].post_bins.iter().sum::<f32>().max(0.1);
    }
    // Each replan starts from its own copy of the state (a replan changes it), five times:
    // one run of a second or so moves with what else the machine does.
    let mut times = Vec::new();
    let mut replanned = None;
    for _ in 0..5 {
        let mut copy = state.clone();
        let t2 = Instant::now();
        replan(&models, &cfg, &mut copy, &changed).expect("replan");
        times.push(t2.elapsed().as_secs_f64());
        replanned = Some(copy);
    }
    let state = replanned.expect("replanned");
    let t_re = median(&mut times); // sorts them
    let (lo, hi) = (times[0], times[times.len() - 1]);
    let fresh_t = Instant::now();
    let fresh = solve(&models, &cfg).expect("fresh plan");
    let t_fresh = fresh_t.elapsed();
    println!(
        "{} feeds changed: replan median {:.3}s of 5 ({:.3}-{:.3}, {} exact solves) vs fresh solve {:.2}s ({:.0}x); expected cost replan {:.6e} vs fresh {:.6e}",
        changed.len(),
        t_re,
        lo,
        hi,
        state.plan().stats.alloc.evaluations,
        t_fresh.as_secs_f64(),
        t_fresh.as_secs_f64() / t_re,
        state.plan().expected_cost,
        fresh.expected_cost
    );
    drop((state, fresh, models));
    priced_documents(&original, feeds);
}

/// Section 5: the same models planned without documents and with every feed's 20-item
/// document priced at a day of delay per lost posting (the live default), one after the
/// other at each budget, then the round's count of expected losses over the priced plan.
fn priced_documents(models: &[FeedModel], feeds: usize) {
    println!("\n## 5. Lost postings priced: 20-item documents at a day of delay each, N = 1440");
    let mut priced = models.to_vec();
    for m in &mut priced {
        m.document = Some(Document {
            items: 20.0,
            clump: 1.0,
            lost_cost: m.weight * 24.0 * 3600.0,
        });
    }
    for per_feed in [4.0, 2.0] {
        let cfg = plan_cfg(1440, per_feed * feeds as f64);
        let t0 = Instant::now();
        let plain = solve(models, &cfg).expect("plan");
        let t_plain = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let with = solve(&priced, &cfg).expect("priced plan");
        let t_priced = t1.elapsed().as_secs_f64();
        let t2 = Instant::now();
        let lost = |plan: &kairos_coordinator::plan::planner::Plan| -> f64 {
            priced
                .iter()
                .zip(&plan.feeds)
                .map(|(m, p)| expected_lost(m, &cfg, p))
                .sum()
        };
        let lost_priced = lost(&with);
        let t_count = t2.elapsed().as_secs_f64();
        let lost_plain = lost(&plain);
        println!(
            "{per_feed}/feed/day: without documents {t_plain:.2}s ({} exact solves), priced {t_priced:.2}s ({} exact solves), {:.2}x; expected lost a day {lost_plain:.0} -> {lost_priced:.0}; the round's loss count {t_count:.2}s",
            plain.stats.alloc.evaluations,
            with.stats.alloc.evaluations,
            t_priced / t_plain,
        );
    }
}
