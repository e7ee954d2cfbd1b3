//! Admin calls while a large replan runs. The coordinator's server (hub, gRPC on loopback)
//! holds N feeds with a day of learned postings; a settings change makes the next round solve
//! every feed afresh, and while that round runs a client calls `GetSettings` and
//! `InspectFeedPlan` back to back over gRPC. Prints each call's latency quantiles while idle
//! and during the solve, and how long the round took.
//!
//! Run: `cargo bench -p kairos-coordinator --bench admin_latency -- [FEEDS]` (default 100,000).

use kairos_coordinator::control::cluster::ClusterConfig;
use kairos_coordinator::control::relearn::{Budget, PlannerSettings};
use kairos_coordinator::hub::{HubConfig, SettingsRecord};
use kairos_coordinator::registry::Registry;
use kairos_coordinator::server::{self, ServerOptions};
use kairos_coordinator::store::memory::MemoryBackend;
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_worker::clock::SimClock;
use std::sync::Arc;
use std::time::{Duration, Instant};

const DAY_MS: i64 = 86_400_000;
/// Report rounds over the learned day (every two hours).
const ROUNDS: i64 = 12;

/// Quantile `q` of `v` (sorted in place), milliseconds.
fn q_ms(v: &mut [Duration], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort();
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i].as_secs_f64() * 1000.0
}

fn line(what: &str, v: &mut [Duration]) {
    println!(
        "  {what:<16} {:>6} calls  p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms",
        v.len(),
        q_ms(v, 0.5),
        q_ms(v, 0.99),
        q_ms(v, 1.0)
    );
}

/// Calls GetSettings and InspectFeedPlan alternately until `done` says stop (or `limit`
/// calls of each were made); returns their latencies.
async fn hammer(
    client: &mut AdminClient<tonic::transport::Channel>,
    feeds: usize,
    done: impl Fn() -> bool,
    limit: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let (mut get, mut inspect) = (Vec::new(), Vec::new());
    let mut i = 0usize;
    while !done() && get.len() < limit {
        let t = Instant::now();
        client
            .get_settings(pb::GetSettingsRequest {})
            .await
            .expect("GetSettings");
        get.push(t.elapsed());
        let t = Instant::now();
        client
            .inspect_feed_plan(pb::InspectFeedPlanRequest {
                feed_id: format!("f{}", (i * 7919) % feeds),
            })
            .await
            .expect("InspectFeedPlan");
        inspect.push(t.elapsed());
        i += 1;
    }
    (get, inspect)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let feeds: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let start = 1_780_000_000_000 - 1_780_000_000_000 % DAY_MS;
        let clock = SimClock::manual(start);
        let store = Arc::new(MemoryBackend::new());
        let registry = Registry::new(store.clone());
        for i in 0..feeds {
            registry
                .add_feed(Some(&format!("f{i}")), &format!("http://127.0.0.1:9/f{i}"), 1.0)
                .await
                .unwrap();
        }
        let running = server::start(
            store,
            ServerOptions {
                listen: "127.0.0.1:0".parse().unwrap(),
                admin_listen: None,
                public_listen: None,
                guard: Default::default(),
                max_worker_capacity: f64::MAX,
                tls: None,
                metrics_addr: None,
                hub: HubConfig {
                    cluster: ClusterConfig {
                        lease: Duration::from_secs(1 << 30),
                        ..ClusterConfig::default()
                    },
                    health: Default::default(),
                    retention: Default::default(),
                    planner: PlannerSettings {
                        budget: Budget::PerFeedPerDay(4.0),
                        ..PlannerSettings::default()
                    },
                    // Only the rounds this bench starts.
                    replan_interval: Duration::from_secs(1 << 20),
                },
                clock,
            },
        )
        .await
        .unwrap();
        let hub = running.hub.clone();
        // A worker that owns every feed, reporting a day of fetches every two hours: each
        // feed posts at its own hours, so the models differ and the solve is a real one.
        let (w, _) = hub.register("bench", 1e9).unwrap();
        hub.heartbeat(&w, 0).unwrap();
        hub.replan().await.unwrap();
        let t_learn = Instant::now();
        let (mut seq, mut item) = (0u64, 0u64);
        for round in 1..=ROUNDS {
            let now = start + round * DAY_MS / ROUNDS;
            clock.set_ms(now);
            hub.heartbeat(&w, 0).unwrap();
            let mut msgs = Vec::with_capacity(1000);
            for f in 0..feeds {
                let peak = (f % 24) as i64;
                let hour = (now - start) / 3_600_000;
                // Two postings per round within three hours of the feed's peak hour, none
                // otherwise.
                let near = (hour - peak).rem_euclid(24) <= 3 || (peak - hour).rem_euclid(24) <= 1;
                let postings: Vec<pb::Posting> = (0..if near { 2 } else { 0 })
                    .map(|k| {
                        item += 1;
                        pb::Posting {
                            item_id_hash: item.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                            link: format!("http://127.0.0.1:9/p{item}"),
                            title: format!("posting {item}"),
                            published_unix_ms: Some(now - 1_800_000 * (k + 1)),
                            discovered_unix_ms: now,
                        }
                    })
                    .collect();
                seq += 1;
                msgs.push(pb::ReportMessage {
                    worker_id: w.clone(),
                    seq,
                    body: Some(pb::report_message::Body::Fetch(pb::FetchReport {
                        feed_id: format!("f{f}"),
                        outcome: pb::FetchOutcome::Ok as i32,
                        http_status: 200,
                        scheduled_unix_ms: now,
                        started_unix_ms: now,
                        finished_unix_ms: now,
                        body_bytes: 20_000,
                        new_postings: postings,
                        items_in_document: 20,
                        ..Default::default()
                    })),
                    ..Default::default()
                });
                if msgs.len() == 1000 {
                    hub.handle_reports(&w, std::mem::take(&mut msgs))
                        .await
                        .unwrap();
                }
            }
            hub.handle_reports(&w, msgs).await.unwrap();
        }
        let learn_s = t_learn.elapsed().as_secs_f64();
        let warm = Instant::now();
        hub.replan().await.unwrap();
        let warm_s = warm.elapsed().as_secs_f64();

        let mut client = AdminClient::connect(format!("http://{}", running.addr))
            .await
            .unwrap();
        let (mut idle_get, mut idle_inspect) = hammer(&mut client, feeds, || false, 2000).await;

        // A budget change: the next round re-solves every feed.
        let mut rec = SettingsRecord::of(&hub.settings());
        rec.budget = 5.0;
        hub.update_settings(&rec).await.unwrap();
        let finished = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let t_solve = Instant::now();
        let round = {
            let (hub, finished) = (hub.clone(), finished.clone());
            tokio::spawn(async move {
                let out = hub.replan().await;
                finished.store(true, std::sync::atomic::Ordering::SeqCst);
                out
            })
        };
        let (mut busy_get, mut busy_inspect) = hammer(
            &mut client,
            feeds,
            || finished.load(std::sync::atomic::Ordering::SeqCst),
            usize::MAX,
        )
        .await;
        let outcome = round.await.unwrap().unwrap();
        let solve_s = t_solve.elapsed().as_secs_f64();

        println!(
            "admin_latency: {feeds} feeds, {item} postings over one learned day (reports {learn_s:.1} s); \
             incremental round {warm_s:.2} s; full round after a settings change {solve_s:.2} s \
             ({} feeds solved, {:.0} fetches/day)",
            outcome.resolved, outcome.fetches_per_day
        );
        println!("idle:");
        line("GetSettings", &mut idle_get);
        line("InspectFeedPlan", &mut idle_inspect);
        println!("during the full round:");
        line("GetSettings", &mut busy_get);
        line("InspectFeedPlan", &mut busy_inspect);
        running.shutdown().await.unwrap();
    });
}
