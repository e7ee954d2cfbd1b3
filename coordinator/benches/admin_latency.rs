//! Admin calls while a large replan runs. The coordinator's server (hub, gRPC on loopback)
//! holds N feeds with a day of learned postings; a settings change makes the next round solve
//! every feed afresh, and while that round runs a client calls `GetSettings` and
//! `InspectFeedPlan` over gRPC, 100 of each a second. Prints each call's latency quantiles while idle
//! and during the solve, and how long the round took.
//!
//! Run: `cargo bench -p kairos-coordinator --bench admin_latency -- [FEEDS]` (default 100,000).

use kairos_coordinator::control::cluster::ClusterConfig;
use kairos_coordinator::control::relearn::{Budget, PlannerSettings};
use kairos_coordinator::hub::HubConfig;
use kairos_coordinator::registry::Registry;
use kairos_coordinator::server::{self, ServerOptions};
use kairos_coordinator::settings::SettingsPatch;
use kairos_coordinator::store::memory::MemoryBackend;
use kairos_coordinator::time::DAY_MS;
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_runtime::clock::SimClock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// One line of figures; a failed call counts with the time it took to fail.
fn line(what: &str, calls: &[(Duration, bool)]) {
    let failed = calls.iter().filter(|c| !c.1).count();
    let mut v: Vec<Duration> = calls.iter().map(|c| c.0).collect();
    println!(
        "  {what:<16} {:>6} calls  p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms  failed {failed}",
        v.len(),
        q_ms(&mut v, 0.5),
        q_ms(&mut v, 0.99),
        q_ms(&mut v, 1.0)
    );
}

/// Each call's latency and whether it succeeded.
type Calls = Vec<(Duration, bool)>;

/// Calls per second of each kind: an open loop, so a call that hangs does not stop the
/// next one from being made (a closed loop would make one call during a stall and report
/// a fine p99).
const RATE: f64 = 100.0;

/// [`hammer`] on a runtime of its own thread: the client's timer and tasks must not share
/// the server's runtime threads, or a server stall would also stop the calls being made.
async fn hammer_apart(
    addr: std::net::SocketAddr,
    feeds: usize,
    done: Arc<AtomicBool>,
    limit: Duration,
) -> (Calls, Calls) {
    let client = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(hammer(addr, feeds, done, limit))
    });
    tokio::task::spawn_blocking(move || client.join().unwrap())
        .await
        .unwrap()
}

/// Calls GetSettings and InspectFeedPlan at [`RATE`] each, every call in its own task,
/// until `done` is set or `limit` elapsed; returns their latencies once all have answered.
async fn hammer(
    addr: std::net::SocketAddr,
    feeds: usize,
    done: Arc<AtomicBool>,
    limit: Duration,
) -> (Calls, Calls) {
    let client = AdminClient::connect(format!("http://{addr}"))
        .await
        .expect("admin connects");
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / RATE));
    let (mut get, mut inspect) = (Vec::new(), Vec::new());
    let started = Instant::now();
    let mut i = 0usize;
    while !done.load(Ordering::SeqCst) && started.elapsed() < limit {
        tick.tick().await;
        let mut c = client.clone();
        get.push(tokio::spawn(async move {
            let t = Instant::now();
            let ok = c.get_settings(pb::GetSettingsRequest {}).await.is_ok();
            (t.elapsed(), ok)
        }));
        let mut c = client.clone();
        let feed_id = format!("f{}", (i * 7919) % feeds);
        inspect.push(tokio::spawn(async move {
            let t = Instant::now();
            let ok = c
                .inspect_feed_plan(pb::InspectFeedPlanRequest { feed_id })
                .await
                .is_ok();
            (t.elapsed(), ok)
        }));
        i += 1;
    }
    let mut out = (Vec::new(), Vec::new());
    for h in get {
        out.0.push(h.await.unwrap());
    }
    for h in inspect {
        out.1.push(h.await.unwrap());
    }
    out
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
        // Its feeds are on loopback, as `serve --allow-private 127.0.0.0/8` would take them.
        let registry = Registry::new(store.clone())
            .with_private_allowed(vec!["127.0.0.0/8".parse().unwrap()]);
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
                extra_buckets: Vec::new(),
                push: None,
                hub: HubConfig {
                    cluster: ClusterConfig {
                        lease: Duration::from_secs(1 << 30),
                        ..ClusterConfig::default()
                    },
                    health: Default::default(),
                    retention: Default::default(),
                    plan_snapshot_every: None,
                    private_allowed: Vec::new(),
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
        let (w, _) = hub.register("bench", 1e9).await.unwrap();
        hub.heartbeat(&w, 0).await.unwrap();
        hub.replan().await.unwrap();
        let t_learn = Instant::now();
        let (mut seq, mut item) = (0u64, 0u64);
        for round in 1..=ROUNDS {
            let now = start + round * DAY_MS / ROUNDS;
            clock.set_ms(now);
            hub.heartbeat(&w, 0).await.unwrap();
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
        let first = hub.replan().await.unwrap();
        let warm_s = warm.elapsed().as_secs_f64();

        let addr = running.addr;
        let (idle_get, idle_inspect) =
            hammer_apart(addr, feeds, Arc::new(AtomicBool::new(false)), Duration::from_secs(5)).await;

        // A budget change: the next round re-solves every feed.
        let per_feed = matches!(hub.settings().await.budget, Budget::PerFeedPerDay(_));
        let patch = SettingsPatch {
            budget: Some(if per_feed {
                Budget::PerFeedPerDay(5.0)
            } else {
                Budget::PerDay(5.0)
            }),
            ..Default::default()
        };
        hub.update_settings(&patch).await.unwrap();
        let finished = Arc::new(AtomicBool::new(false));
        let t_solve = Instant::now();
        let round = {
            let (hub, finished) = (hub.clone(), finished.clone());
            tokio::spawn(async move {
                let out = hub.replan().await;
                finished.store(true, Ordering::SeqCst);
                out
            })
        };
        let (busy_get, busy_inspect) = hammer_apart(addr, feeds, finished, Duration::MAX).await;
        let outcome = round.await.unwrap().unwrap();
        let solve_s = t_solve.elapsed().as_secs_f64();

        println!(
            "admin_latency: {feeds} feeds, {item} postings over one learned day (reports {learn_s:.1} s); \
             first round after learning {warm_s:.2} s ({} feeds solved); full round after a settings change {solve_s:.2} s \
             ({} feeds solved, {:.0} fetches/day)",
            first.resolved, outcome.resolved, outcome.fetches_per_day
        );
        println!("idle:");
        line("GetSettings", &idle_get);
        line("InspectFeedPlan", &idle_inspect);
        println!("during the full round:");
        line("GetSettings", &busy_get);
        line("InspectFeedPlan", &busy_inspect);
        running.shutdown().await.unwrap();
    });
}
