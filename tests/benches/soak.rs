//! Soak under faults, with the real binaries on loopback: a farm of N feeds over H hosts
//! (each its own loopback address) publishing on a compressed clock, one coordinator on its
//! embedded store, W workers, for a set wall time covering several simulated weeks.
//! Meanwhile workers are SIGKILLed and restarted, one is stopped with SIGTERM as a rollout
//! would and started again, and the farm's hosts go through scheduled bursts of 503s and of
//! requests held past the fetch timeout.
//!
//! Every 30 s it prints one line of samples: fetches per simulated day against what the plan
//! schedules, the workers' fetch lateness (p99 over the interval, from their histograms),
//! coordinator and worker RSS, and the store's size on disk. Every few simulated days (less
//! than the postings' retention) it reads every feed's postings through the Postings API;
//! at the end it compares them with every posting the farm published: lost (published before
//! the farm went quiet, never listed) and duplicated (one item listed as two postings).
//! The farm stops publishing some simulated days before the end, so every feed is fetched
//! again after its last posting.
//!
//! Run (docs/BENCHMARKS.md has the figures):
//! `cargo build --release --workspace --bins && cargo bench -p kairos-tests --bench soak -- \
//!   --feeds 100000 --hosts 500 --workers 4 --minutes 30 --sim-days 14`
//! The exit status is non-zero if anything was lost or duplicated.

mod soak_common;

use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::{spawn_until, start_coordinator, try_scrape, unix_ms, Child, TempDir};
use soak_common::args::Shape;
use soak_common::{
    buckets, dir_bytes, missing, quantile, rss_mb, sweep, total, Farm, FarmShape, Seen,
};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What this soak is told: the shared shape, its simulated days and how often it kills.
#[derive(clap::Parser, Clone, Debug)]
#[command(about = "Soak under faults: a farm, one coordinator, workers killed and restarted")]
struct Soak {
    #[command(flatten)]
    shape: Shape,
    /// Simulated days the run covers.
    #[arg(long, default_value_t = 14.0)]
    sim_days: f64,
    /// Simulated days at the end with nothing published.
    #[arg(long, default_value_t = 2.0)]
    quiet_days: f64,
    /// Wall minutes between worker kills.
    #[arg(long, default_value_t = 5.0)]
    kill_every: f64,
}

impl Soak {
    /// Simulated seconds per wall second.
    fn scale(&self) -> f64 {
        self.shape.scale(self.sim_days, self.quiet_days)
    }
}

/// One worker process and what it last exported.
struct Worker {
    name: String,
    child: Option<Child>,
    metrics: String,
    /// Lateness buckets at the previous sample (this incarnation).
    last: Vec<(f64, f64)>,
}

fn start_worker(name: &str, coordinator: &str, clock: &[String], dir: &Path) -> Worker {
    let mut args: Vec<String> = [
        "run",
        "--coordinator",
        coordinator,
        "--name",
        name,
        "--allow-private",
        "127.0.0.0/8",
        "--host-gap",
        "20ms",
        "--capacity",
        "600",
        "--max-in-flight",
        "128",
        "--fetch-timeout",
        "10s",
        "--drain-timeout",
        "5s",
        "--metrics-addr",
        "127.0.0.1:0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(clock.iter().cloned());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    // Each incarnation logs to its own file, so a kill leaves the evidence.
    let log = dir.join(format!("{name}-{}.log", unix_ms()));
    let (child, found) = spawn_until("kairos-worker", &refs, &log, &["kairos-worker metrics on "]);
    Worker {
        name: name.to_string(),
        child: Some(child),
        metrics: found[0].clone(),
        last: Vec::new(),
    }
}

fn signal(child: &Child, sig: &str) {
    let _ = std::process::Command::new("kill")
        .args([sig, &child.0.id().to_string()])
        .status();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let s = <Soak as clap::Parser>::parse();
    let scale = s.scale();
    println!("soak: {s:?}, {scale:.0}x simulated time");
    let dir = TempDir::new("soak");
    let anchor = unix_ms();
    let clock: Vec<String> = [
        "--time-scale".to_string(),
        scale.to_string(),
        "--clock-start".into(),
        "2026-03-02T00:00:00Z".into(),
        "--clock-anchor-unix-ms".into(),
        anchor.to_string(),
    ]
    .to_vec();
    let sim_day = move || (unix_ms() - anchor) as f64 * scale / 86_400_000.0;

    // The farm publishes until the quiet days; its hosts misbehave throughout.
    let farm = Farm::start(
        &FarmShape {
            feeds: s.shape.feeds,
            hosts: s.shape.hosts,
            posts_per_day: s.shape.posts_per_day,
            days: s.sim_days - s.quiet_days,
            bursts: s.shape.bursts,
            seed: s.shape.seed,
        },
        &clock,
        dir.path(),
    );
    let total_published = farm.total();

    let data = dir.path().join("data");
    let mut coord_args: Vec<String> = [
        "--data-dir",
        &data.display().to_string(),
        "--worker-lease",
        "10s",
        "--fetches-per-feed-per-day",
        &s.shape.fetches_per_feed_per_day.to_string(),
        "--min-fetches-per-day",
        "1",
        "--postings-retention",
        "7d",
        // The workers' politeness gap, so the plan caps hosts where the workers will.
        "--host-gap",
        "20ms",
        "--max-worker-capacity",
        "2000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    coord_args.extend(clock.iter().cloned());
    let refs: Vec<&str> = coord_args.iter().map(String::as_str).collect();
    let coordinator = start_coordinator(&refs, &dir.path().join("coordinator.log"));
    let cpid = coordinator.child.0.id();

    // Register the feeds, 16 calls in flight.
    let t = Instant::now();
    let admin = AdminClient::connect(coordinator.url.clone()).await.unwrap();
    let urls = Arc::new(farm.urls.clone());
    let mut adds = tokio::task::JoinSet::new();
    for lane in 0..16 {
        let (mut admin, urls) = (admin.clone(), urls.clone());
        adds.spawn(async move {
            for i in (lane..urls.len()).step_by(16) {
                admin
                    .add_feed(pb::AddFeedRequest {
                        feed_id: format!("f{i}"),
                        url: urls[i].clone(),
                        weight: 1.0,
                    })
                    .await
                    .unwrap_or_else(|e| panic!("add f{i}: {e}"));
            }
        });
    }
    while let Some(r) = adds.join_next().await {
        r.unwrap();
    }
    println!(
        "registered {} feeds in {:.1} s (simulated day {:.2})",
        s.shape.feeds,
        t.elapsed().as_secs_f64(),
        sim_day()
    );

    let mut workers: Vec<Worker> = (0..s.shape.workers())
        .map(|i| start_worker(&format!("w{i}"), &coordinator.url, &clock, dir.path()))
        .collect();

    let started = Instant::now();
    let run = Duration::from_secs_f64(s.shape.minutes * 60.0);
    let sample_every = Duration::from_secs(30);
    // Read the postings every 3 simulated days: well inside the 7-day retention.
    let sweep_every = Duration::from_secs_f64(3.0 * 86_400.0 / scale);
    let kill_every = Duration::from_secs_f64(s.kill_every * 60.0);
    let mut seen: Vec<Seen> = vec![HashMap::new(); s.shape.feeds];
    let mut duplicates = 0u64;
    let mut next_sample = started + sample_every;
    let mut next_sweep = started + sweep_every;
    let mut next_kill = started + kill_every;
    let mut kills = 0usize;
    let mut restart_at: Option<(usize, Instant)> = None;
    let mut last_fetches = (0.0f64, 0.0f64, Instant::now());
    let mut rows: Vec<String> = Vec::new();
    println!(
        "{:>6} {:>6} {:>9} {:>9} {:>7} {:>9} {:>8} {:>8} {:>8} {:>9} {:>8}",
        "wall_m",
        "sim_d",
        "fetch/d",
        "plan/d",
        "held",
        "late_p99",
        "coord_MB",
        "heap_MB",
        "work_MB",
        "store_MB",
        "postings"
    );
    while started.elapsed() < run {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = Instant::now();
        if let Some((w, at)) = restart_at {
            if now >= at {
                let name = workers[w].name.clone();
                workers[w] = start_worker(&name, &coordinator.url, &clock, dir.path());
                println!("  restarted {name}");
                restart_at = None;
            }
        }
        if now >= next_kill && restart_at.is_none() {
            let w = kills % workers.len();
            // Every third fault is a rollout's SIGTERM (drain, then exit); the rest SIGKILL.
            let sig = if kills % 3 == 2 { "-TERM" } else { "-KILL" };
            if let Some(child) = &workers[w].child {
                signal(child, sig);
            }
            println!(
                "  {sig} {} at simulated day {:.2}",
                workers[w].name,
                sim_day()
            );
            // Keep the process handle until it has exited, then start it again.
            restart_at = Some((w, now + Duration::from_secs(20)));
            kills += 1;
            next_kill = now + kill_every;
        }
        if now >= next_sweep {
            let (d, took) = sweep(&coordinator.url, None, s.shape.feeds, &mut seen, 5).await;
            duplicates += d;
            println!(
                "  postings read at simulated day {:.2}: {} items seen so far, {d} duplicated, {:.0} s",
                sim_day(),
                seen.iter().map(|m| m.len()).sum::<usize>(),
                took.as_secs_f64()
            );
            next_sweep = Instant::now() + sweep_every;
        }
        if now >= next_sample {
            next_sample = now + sample_every;
            let Some(cs) = try_scrape(&coordinator.metrics) else {
                println!("  coordinator metrics did not answer");
                continue;
            };
            let fetches = total(&cs, "kairos_fetches_total");
            let planned_hour = total(&cs, "kairos_plan_fetches_next_hour");
            let wall = now.duration_since(last_fetches.2).as_secs_f64();
            let per_day = (fetches - last_fetches.0) / (wall * scale / 86_400.0);
            let planned_day = (planned_hour + last_fetches.1) / 2.0 * 24.0;
            last_fetches = (fetches, planned_hour, now);
            // Lateness over the interval, summed over the workers' histograms.
            let mut merged: Vec<(f64, f64)> = Vec::new();
            let mut worker_mb = 0.0;
            for w in &mut workers {
                if let Some(child) = &w.child {
                    worker_mb += rss_mb(child.0.id());
                }
                let Some(ws) = try_scrape(&w.metrics) else {
                    continue;
                };
                let now_b = buckets(&ws, "kairos_worker_fetch_lateness_seconds");
                let delta: Vec<(f64, f64)> = now_b
                    .iter()
                    .map(|&(le, c)| {
                        let before = w.last.iter().find(|b| b.0 == le).map_or(0.0, |b| b.1);
                        (le, if c >= before { c - before } else { c })
                    })
                    .collect();
                w.last = now_b;
                for (le, c) in delta {
                    match merged.iter_mut().find(|b| b.0 == le) {
                        Some(b) => b.1 += c,
                        None => merged.push((le, c)),
                    }
                }
            }
            merged.sort_by(|a, b| a.0.total_cmp(&b.0));
            let p99 = quantile(&merged, 0.99).map_or("-".to_string(), |v| format!("{v}s"));
            let row = format!(
                "{:>6.1} {:>6.2} {:>9.0} {:>9.0} {:>7.3} {:>9} {:>8.0} {:>8.0} {:>8.0} {:>9.1} {:>8.0}",
                started.elapsed().as_secs_f64() / 60.0,
                sim_day(),
                per_day,
                planned_day,
                if planned_day > 0.0 {
                    per_day / planned_day
                } else {
                    0.0
                },
                p99,
                rss_mb(cpid),
                // The live heap, as the coordinator's allocator counts it: RSS above it is
                // the allocator's and the page cache's.
                total(&cs, "kairos_allocator_allocated_bytes") / 1e6,
                worker_mb,
                dir_bytes(&data) as f64 / 1e6,
                total(&cs, "kairos_postings_ingested_total"),
            );
            println!("{row}");
            rows.push(row);
        }
        // A killed worker's handle goes once it has exited.
        for w in &mut workers {
            if let Some(c) = &mut w.child {
                if matches!(c.0.try_wait(), Ok(Some(_))) {
                    w.child = None;
                }
            }
        }
    }
    let end_day = sim_day();
    // What the farm last served each feed, then a few seconds for reports in flight.
    let last_ok = farm.last_ok();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (d, took) = sweep(&coordinator.url, None, s.shape.feeds, &mut seen, 5).await;
    duplicates += d;
    println!(
        "  final read at simulated day {end_day:.2}: {:.0} s",
        took.as_secs_f64()
    );
    let soak_common::Missing {
        lost,
        unfetched,
        scrolled,
        lost_feeds,
    } = missing(&farm.published, &seen, &last_ok);
    let cs = try_scrape(&coordinator.metrics).unwrap_or_default();
    println!(
        "farm served: {}",
        farm.get("/farm/stats").replace('\n', " ")
    );
    println!(
        "coordinator: fetches by outcome {}",
        cs.lines()
            .filter(|l| l.starts_with("kairos_fetches_total{"))
            .map(|l| l.trim_start_matches("kairos_fetches_total"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "same-slot fetches {}, retention removed {}, reports rejected {}",
        total(&cs, "kairos_fetches_same_slot_total"),
        total(&cs, "kairos_retention_removed_total"),
        cs.lines()
            .filter(|l| l.starts_with("kairos_reports_rejected_total"))
            .map(|l| l.trim_start_matches("kairos_reports_rejected_total"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "published {total_published}, lost {lost}, duplicated {duplicates}; not fetched since \
         published {unfetched}, scrolled off between fetches {scrolled}; worker faults {kills}, \
         {:.1} simulated days in {:.1} wall minutes",
        end_day,
        started.elapsed().as_secs_f64() / 60.0
    );
    if !lost_feeds.is_empty() {
        println!("lost in: {}", lost_feeds.join("; "));
    }
    drop(workers);
    drop(coordinator);
    drop(farm);
    if lost > 0 || duplicates > 0 {
        println!("logs kept in {}", dir.path().display());
        std::mem::forget(dir);
        std::process::exit(1);
    }
}
