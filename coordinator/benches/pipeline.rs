//! The assembled pipeline on loopback: the coordinator's server (hub, gRPC) and one worker
//! process's agent fetching a synthetic farm at the planned moments, parsing, deduping and
//! reporting every fetch over the acknowledged report stream. Measures the fetches the
//! coordinator ingested per second and the fetch lateness (start − planned) the worker
//! reported, at a planned rate set by the budget and the clock scale.
//!
//! Run: `cargo bench -p kairos-coordinator --bench pipeline -- [SECONDS] [PLANNED_PER_SECOND]`
//! (defaults 20 and 2,500). The farm, the coordinator and the worker share the machine's
//! cores, so the figures are lower bounds for a worker alone.

use kairos_coordinator::control::cluster::ClusterConfig;
use kairos_coordinator::control::relearn::{Budget, PlannerSettings};
use kairos_coordinator::hub::HubConfig;
use kairos_coordinator::plan::planner::Policy;
use kairos_coordinator::registry::Registry;
use kairos_coordinator::server::{self, ServerOptions};
use kairos_coordinator::store::memory::MemoryBackend;
use kairos_farm::farm::{Farm, FarmConfig};
use kairos_runtime::clock::SimClock;
use kairos_worker::agent::{self, AgentConfig, AgentStats};
use kairos_worker::fetch::FetchConfig;
use kairos_worker::target::TargetPolicy;
use std::sync::Arc;
use std::time::{Duration, Instant};

const FEEDS: usize = 2_000;
const PER_FEED_PER_DAY: f64 = 48.0;

fn quantile(text: &str, metric: &str, q: &str) -> f64 {
    let prefix = format!("{metric}{{quantile=\"{q}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let secs: f64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(20.0);
    let rate: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(2_500.0);
    // Planned fetches per wall second = feeds × per-feed-per-day × scale / 86,400.
    let scale = rate * 86_400.0 / (FEEDS as f64 * PER_FEED_PER_DAY);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .expect("metrics recorder");
    rt.block_on(async move {
        let clock = SimClock::new(1_780_000_000_000, scale);
        let farm = Arc::new(Farm::generate(
            FarmConfig {
                feeds: FEEDS,
                hosts: 8,
                mean_posts_per_day: 24.0,
                days: (secs + 10.0) * scale / 86_400.0 + 1.0,
                history_days: 0.5,
                items_per_doc: 15,
                pad_bytes: 600,
                seed: 1,
                faults: Default::default(),
            },
            clock,
        ));
        let serving = farm.clone().serve().await.unwrap();
        let store = Arc::new(MemoryBackend::new());
        // Its feeds are on loopback, as `serve --allow-private 127.0.0.0/8` would take them.
        let registry = Registry::new(store.clone())
            .with_private_allowed(vec!["127.0.0.0/8".parse().unwrap()]);
        for (i, url) in serving.urls.iter().enumerate() {
            registry.add_feed(Some(&format!("f{i}")), url, 1.0).await.unwrap();
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
                    cluster: ClusterConfig::default(),
                    health: Default::default(),
                    retention: Default::default(),
                    plan_snapshot_every: None,
                    private_allowed: Vec::new(),
                    planner: PlannerSettings {
                        // Evenly spaced fetches: a steady planned rate, not the optimal
                        // plan's bursts at shared peaks.
                        policy: Policy::Uniform,
                        budget: Budget::PerFeedPerDay(PER_FEED_PER_DAY),
                        min_fetches_per_day: 1.0,
                        ..PlannerSettings::default()
                    },
                    replan_interval: Duration::from_secs(3600),
                },
                clock,
            },
        )
        .await
        .unwrap();
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let stats = Arc::new(AgentStats::default());
        let worker = tokio::spawn(agent::run(
            AgentConfig {
                coordinator: format!("http://{}", running.addr),
                name: "bench".into(),
                capacity: 10_000.0,
                max_in_flight: 256,
                host_gap: Duration::ZERO,
                fetch: FetchConfig {
                    policy: TargetPolicy::allowing(vec!["127.0.0.0/8".parse().unwrap()]),
                    ..FetchConfig::default()
                },
                report_buffer: 100_000,
                drain_timeout: Duration::ZERO,
                clock,
                ingest_address: String::new(),
                credentials: Default::default(),
                parse_threads: kairos_worker::document::Reader::default_threads(),
                parse_budget: kairos_worker::document::DEFAULT_BUDGET,
            },
            stats.clone(),
            None,
            stop_rx,
        ));
        // Past the first fetch of every feed (done at once on assignment).
        tokio::time::sleep(Duration::from_secs(3)).await;
        let f0 = running.hub.totals().await.fetches;
        let t0 = Instant::now();
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        let t = running.hub.totals().await;
        let wall = t0.elapsed().as_secs_f64();
        let _ = stop.send(true);
        let _ = worker.await;
        let text = handle.render();
        let ms = |q: &str| quantile(&text, "kairos_fetch_lateness_seconds", q) / scale * 1000.0;
        println!(
            "pipeline: planned {rate:.0}/s ({FEEDS} feeds x {PER_FEED_PER_DAY}/day, clock x{scale:.0}), \
             ingested {:.0} fetches/s over {wall:.1} s ({} ok, {} not modified, {} postings, {} duplicates), \
             lateness p50 {:.0} ms, p99 {:.0} ms (wall)",
            (t.fetches - f0) as f64 / wall,
            t.outcomes.get("ok").copied().unwrap_or(0),
            t.outcomes.get("not_modified").copied().unwrap_or(0),
            t.postings_new,
            t.postings_duplicate,
            ms("0.5"),
            ms("0.99"),
        );
        running.shutdown().await.unwrap();
    });
}
