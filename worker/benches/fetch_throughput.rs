//! Fetch + parse throughput of the worker's fetcher and parser against the loopback feed
//! farm: `concurrency` tasks fetch feed URLs round-robin (no validators, so every fetch is a
//! full 200 with a ~10 KB body) and parse every body, for a fixed wall time.
//!
//! Run: `cargo bench -p kairos-worker --bench fetch_throughput` (args: seconds, concurrency).
//! The farm's server runs in the same process and on the same two cores, so the figure is
//! a lower bound on what a worker achieves against remote hosts.

mod common;

use kairos_worker::fetch::{Outcome, Validators};
use kairos_worker::parse::parse;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().filter(|a| !a.starts_with("--")).collect();
    let seconds: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    let concurrency: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(64);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let (_farm, running) = common::farm().await;
        let urls = Arc::new(running.urls.clone());
        let fetcher = common::loopback_fetcher();
        let (next, done, bytes, failed) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let started = Instant::now();
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                let (fetcher, urls, next, done, bytes, failed) =
                    (fetcher.clone(), urls.clone(), next.clone(), done.clone(), bytes.clone(), failed.clone());
                tokio::spawn(async move {
                    while Instant::now() < deadline {
                        let i = next.fetch_add(1, Ordering::Relaxed) % urls.len();
                        let got = fetcher.fetch(&urls[i], &Validators::default()).await;
                        match got.outcome {
                            Outcome::Ok { body, .. } if parse(&body).is_ok() => {
                                bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                                done.fetch_add(1, Ordering::Relaxed);
                            }
                            _ => {
                                failed.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let secs = started.elapsed().as_secs_f64();
        let n = done.load(Ordering::Relaxed);
        println!(
            "{seconds} s, {concurrency} concurrent: {n} fetches+parses ({:.0}/s), mean body {:.1} KB, {} failed",
            n as f64 / secs,
            bytes.load(Ordering::Relaxed) as f64 / n.max(1) as f64 / 1024.0,
            failed.load(Ordering::Relaxed)
        );
    });
}
