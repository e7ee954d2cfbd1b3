//! Scaling the workers while they crawl, with real processes on loopback: one coordinator,
//! a feed farm on 12 hosts and a time-compressed clock (one simulated day per 15 s). Three
//! workers become five, then three of them are stopped with SIGTERM as a scale-down would,
//! leaving two; each says it leaves once drained, so its hosts move before its lease ends.
//! After each step the hosts are dealt again; at the end every posting the farm published
//! is in the Postings API exactly once and no planned slot of any feed was fetched by two
//! workers (`kairos_fetches_same_slot_total`, from the coordinator's own record of each
//! feed's last slot).

mod common;

use common::{add_feeds, assert_every_posting_once, wait_for, workers};
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::scenario::{refs, Clock, Farm, FarmSpec, Worker};
use kairos_tests::{sample, scrape, start_coordinator, unix_ms, Child, TempDir};
use std::path::Path;
use std::time::{Duration, Instant};

const SCALE: f64 = 5760.0;
const FEEDS: usize = 36;
const HOSTS: u32 = 12;
/// Simulated days during which the farm posts.
const POSTING_DAYS: f64 = 1.0;

/// Starts a worker; returns it and the address of its metrics endpoint.
fn start_worker(name: &str, coordinator: &str, clock: &Clock, dir: &Path) -> (Child, String) {
    let (child, found) = Worker::new(name, coordinator, clock)
        .with(&["--drain-timeout", "5s", "--metrics-addr", "127.0.0.1:0"])
        .start_until(dir, &["kairos-worker metrics on "]);
    (child, found[0].clone())
}

/// Waits until exactly `n` workers are registered and hold every host between them, and at
/// least `min` of the workers named in `holding` have a host; returns how long that took.
///
/// Not every worker need hold a host: with 12 hosts, rendezvous hashing leaves one of five
/// workers without any in about a quarter of host namings (the farm's ports change each run),
/// as it would in production with as few hosts.
async fn dealt(
    admin: &AdminClient<tonic::transport::Channel>,
    n: usize,
    holding: &[&str],
    min: usize,
) -> Duration {
    let started = Instant::now();
    wait_for(
        &format!("{n} workers sharing the {HOSTS} hosts, {min} of {holding:?} among them"),
        Duration::from_secs(30),
        || {
            let mut admin = admin.clone();
            async move {
                let w = workers(&mut admin).await;
                (w.len() == n
                    && holding
                        .iter()
                        .filter(|h| w.iter().any(|w| w.worker_name == **h && w.hosts > 0))
                        .count()
                        >= min
                    && w.iter().map(|w| w.hosts).sum::<u32>() == HOSTS)
                    .then_some(())
            }
        },
    )
    .await;
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_to_five_to_two_workers_lose_nothing_and_fetch_no_slot_twice() {
    let dir = TempDir::new("scaling");
    let sim = Clock::new(SCALE);
    let clock = sim.args();
    let sim_day = |ms: i64| (ms - sim.anchor_ms) as f64 * SCALE / 86_400_000.0;
    let spec = FarmSpec {
        feeds: FEEDS,
        hosts: HOSTS as usize,
        days: POSTING_DAYS,
        seed: 21,
        ..FarmSpec::default()
    };
    let farm = Farm::start(dir.path(), &spec, &sim, &[]);
    let total = farm.postings();
    assert!(total > 300, "the farm publishes enough to test ({total})");

    let data = dir.path().join("data").display().to_string();
    let mut coord_args: Vec<String> = [
        "--data-dir",
        &data,
        "--replan-interval",
        "1s",
        "--worker-lease",
        "3s",
        "--fetches-per-feed-per-day",
        "24",
        "--min-fetches-per-day",
        "2",
        // Far above the plan's 0.6 a minute: it moves nothing, and each worker's share of
        // it comes with its allowance.
        "--max-fetches-per-minute",
        "60",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    coord_args.extend(clock.iter().cloned());
    let coordinator = start_coordinator(&refs(&coord_args), &dir.path().join("coordinator.log"));
    let admin = AdminClient::connect(coordinator.url.clone()).await.unwrap();
    add_feeds(&mut admin.clone(), &farm.urls).await;

    let mut running: Vec<(Child, String)> = ["w1", "w2", "w3"]
        .iter()
        .map(|n| start_worker(n, &coordinator.url, &sim, dir.path()))
        .collect();
    let first = dealt(&admin, 3, &[], 0).await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Scale up: two more workers take a share of the hosts.
    let up_at = sim_day(unix_ms());
    for n in ["w4", "w5"] {
        running.push(start_worker(n, &coordinator.url, &sim, dir.path()));
    }
    // The newcomers take hosts (one of them may stay without: see `dealt`).
    let up = dealt(&admin, 5, &["w4", "w5"], 1).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Scale down to two: the first three are stopped as Kubernetes stops pods.
    let down_at = sim_day(unix_ms());
    let leaving: Vec<Child> = running.drain(..3).map(|(c, _)| c).collect();
    for w in &leaving {
        assert!(std::process::Command::new("kill")
            .args(["-TERM", &w.0.id().to_string()])
            .status()
            .unwrap()
            .success());
    }
    let down = dealt(&admin, 2, &["w4", "w5"], 2).await;
    assert!(
        down_at < POSTING_DAYS * 0.8,
        "the scale-down comes while the farm publishes (day {down_at:.2})"
    );
    let mut leaving = leaving;
    for w in &mut leaving {
        let status = w.0.wait().unwrap();
        assert!(
            status.success(),
            "a stopped worker exits cleanly: {status:?}"
        );
    }
    // Each drained worker said it was leaving, so its hosts moved without waiting for
    // its lease to run out.
    for name in ["w1", "w2", "w3"] {
        let log = std::fs::read_to_string(dir.path().join(format!("{name}.log"))).unwrap();
        assert!(
            log.contains("left: the coordinator deals its hosts"),
            "{name} says it leaves:\n{log}"
        );
    }
    let log = std::fs::read_to_string(dir.path().join("coordinator.log")).unwrap();
    assert_eq!(
        log.matches("worker left after draining").count(),
        3,
        "the coordinator let each of the three go:\n{log}"
    );

    // Run until the farm has been quiet for a simulated day, then count.
    let end = sim.anchor_ms + ((POSTING_DAYS + 1.1) * 86_400_000.0 / SCALE) as i64;
    tokio::time::sleep(Duration::from_millis((end - unix_ms()).max(0) as u64)).await;
    assert_every_posting_once(&coordinator.url, &farm, dir.path()).await;
    let metrics = scrape(&coordinator.metrics);
    let moves = sample(&metrics, "kairos_shard_moves_total").unwrap_or(0.0);
    assert!(moves >= 10.0, "the hosts moved at each step ({moves})");
    assert_eq!(
        sample(&metrics, "kairos_fetches_same_slot_total"),
        Some(0.0),
        "a planned slot was fetched by two workers"
    );
    let stats = admin
        .clone()
        .get_stats(pb::GetStatsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.fetches_same_slot, 0);

    // The workers' own metrics, and their observed state as the coordinator shows it.
    let mut shares = Vec::new();
    for (_, addr) in &running {
        let m = scrape(addr);
        // The cap dealt over the workers with their allowances, at least one a minute each.
        let share = sample(&m, "kairos_worker_minute_share").unwrap_or(-1.0);
        assert!((1.0..=60.0).contains(&share), "share {share}:\n{m}");
        shares.push(share);
        let ok = sample(&m, "kairos_worker_fetches_total{outcome=\"ok\"}").unwrap_or(0.0);
        assert!(ok > 0.0, "a worker counts its fetches:\n{m}");
        assert!(
            sample(
                &m,
                "kairos_worker_fetch_lateness_seconds_bucket{le=\"+Inf\"}"
            )
            .unwrap_or(0.0)
                > 0.0,
            "lateness is a histogram with buckets:\n{m}"
        );
        assert!(sample(&m, "kairos_worker_fetch_duration_seconds_count").unwrap_or(0.0) > 0.0);
        assert!(sample(&m, "kairos_worker_assignment_version").unwrap_or(0.0) >= 1.0);
        assert!(sample(&m, "kairos_worker_feeds").unwrap_or(0.0) >= 1.0);
    }
    let dealt: f64 = shares.iter().sum();
    assert!(
        (60.0..=60.0 + shares.len() as f64).contains(&dealt),
        "the shares add up to the cap: {shares:?}"
    );
    let views = wait_for(
        "every worker at its desired assignment",
        Duration::from_secs(10),
        || {
            let mut admin = admin.clone();
            async move {
                let w = workers(&mut admin).await;
                w.iter()
                    .all(|w| w.applied_version == w.desired_version && w.applied_version > 0)
                    .then_some(w)
            }
        },
    )
    .await;
    assert_eq!(views.len(), 2);
    eprintln!(
        "{total} postings, each exactly once; hosts dealt to 3 workers in {:.1} s, to 5 in {:.1} s \
         (scale-up at day {up_at:.2}), to 2 in {:.1} s after SIGTERM to three (day {down_at:.2}); \
         {moves} host moves, no slot fetched twice",
        first.as_secs_f64(),
        up.as_secs_f64(),
        down.as_secs_f64()
    );
}
