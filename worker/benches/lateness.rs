//! Fetch lateness (started − planned) of the worker's schedule + fetcher + parser at a
//! fixed planned rate against the loopback farm.
//!
//! 1,000 feeds on 8 hosts, each with `rate/1000` fetch offsets per one-second period, so
//! fetches are planned at `rate` per second; a loop sleeps until the next due fetch, pops
//! what is due and starts each fetch (bounded concurrency), recording how late it started.
//!
//! Run: `cargo bench -p kairos-worker --bench lateness -- SECONDS RATE` (defaults 10, 6000:
//! half the fetch + parse throughput measured by `fetch_throughput`).

mod common;

use kairos_runtime::clock::SimClock;
use kairos_runtime::schedule::{FeedTimes, Schedule};
use kairos_worker::fetch::{Outcome, Validators};
use kairos_worker::parse::parse;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

fn main() {
    let args: Vec<String> = std::env::args().filter(|a| !a.starts_with("--")).collect();
    let seconds: i64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    let rate: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(6000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let (_farm, running) = common::farm().await;
        let fetcher = common::loopback_fetcher();
        let clock = SimClock::real();
        let start = clock.now_ms() + 200;
        let per_feed = (rate / 1000).max(1);
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let feeds: Vec<FeedTimes> = (0..1000)
            .map(|i| FeedTimes {
                feed_id: i.to_string(),
                host: running.hosts[i % 8].to_string(),
                offsets_ms: (0..per_feed).map(|_| rng.gen_range(0..1000)).collect(),
                period_ms: 1000,
                origin_ms: start,
                timed: false,
            })
            .collect();
        let urls = Arc::new(running.urls.clone());
        let mut schedule = Schedule::new(0);
        schedule.apply_snapshot(1, feeds, start).unwrap();
        let permits = Arc::new(Semaphore::new(256));
        let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut lateness: Vec<i64> = Vec::new();
        let end = start + seconds * 1000;
        let mut tasks = Vec::new();
        while clock.now_ms() < end {
            let now = clock.now_ms();
            for due in schedule.pop_due(now) {
                if due.planned_ms >= end {
                    continue;
                }
                let permit = permits.clone().acquire_owned().await.expect("semaphore open");
                lateness.push(clock.now_ms() - due.planned_ms);
                let (fetcher, urls, ok, failed) = (fetcher.clone(), urls.clone(), ok.clone(), failed.clone());
                let i: usize = due.feed_id.parse().unwrap();
                tasks.push(tokio::spawn(async move {
                    let got = fetcher.fetch(&urls[i], &Validators::default()).await;
                    match got.outcome {
                        Outcome::Ok { body, .. } if parse(&body).is_ok() => ok.fetch_add(1, Ordering::Relaxed),
                        _ => failed.fetch_add(1, Ordering::Relaxed),
                    };
                    drop(permit);
                }));
            }
            let wait = schedule.next_due().map(|t| clock.wall_until(t)).unwrap_or(Duration::from_millis(1));
            tokio::time::sleep(wait.min(Duration::from_millis(50))).await;
        }
        for t in tasks {
            let _ = t.await;
        }
        lateness.sort_unstable();
        let q = |p: f64| lateness[((lateness.len() - 1) as f64 * p) as usize];
        println!(
            "{seconds} s at {} planned/s: {} started ({} ok, {} failed); lateness ms p50 {} p99 {} max {}",
            per_feed * 1000,
            lateness.len(),
            ok.load(Ordering::Relaxed),
            failed.load(Ordering::Relaxed),
            q(0.5),
            q(0.99),
            q(1.0)
        );
    });
}
