//! Cluster mode through a full etcd outage, with real processes on loopback: a one-member
//! etcd, one coordinator in cluster mode, two workers and a feed farm on one time-compressed
//! clock (one simulated day per 15 s). etcd is killed mid-crawl for longer than the leader's
//! lease: the coordinator cannot renew it, steps down (counted), and is elected again once
//! etcd returns; the workers find it again and resend what was not acknowledged. Every
//! posting the farm published is then in the Postings API exactly once.

mod common;

use common::{add_feeds, assert_every_posting_once, wait_for, workers};
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::etcd::EtcdCluster;
use kairos_tests::scenario::{refs, Clock, Farm, FarmSpec, Worker};
use kairos_tests::{sample, scrape, start_coordinator, unix_ms, TempDir};
use std::time::{Duration, Instant};

const SCALE: f64 = 5760.0;
const FEEDS: usize = 24;
/// Simulated days during which the farm posts.
const POSTING_DAYS: f64 = 1.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_etcd_outage_costs_leadership_for_a_while_and_loses_nothing() {
    let dir = TempDir::new("etcd-outage");
    let Some(mut etcd) = EtcdCluster::start(dir.path(), 1) else {
        return;
    };
    let endpoints = etcd.endpoints.join(",");
    let sim = Clock::new(SCALE);
    let clock = sim.args();
    let spec = FarmSpec {
        feeds: FEEDS,
        days: POSTING_DAYS,
        seed: 13,
        ..FarmSpec::default()
    };
    let farm = Farm::start(dir.path(), &spec, &sim, &[]);
    let total = farm.postings();
    assert!(total > 200, "the farm publishes enough to test ({total})");

    let mut coord_args: Vec<String> = [
        "--store",
        "etcd",
        "--etcd-endpoints",
        &endpoints,
        "--leader-lease-ttl",
        "3s",
        "--replan-interval",
        "1s",
        "--worker-lease",
        "3s",
        "--fetches-per-feed-per-day",
        "12",
        "--min-fetches-per-day",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    coord_args.extend(clock.iter().cloned());
    let a = start_coordinator(&refs(&coord_args), &dir.path().join("coordinator.log"));
    let mut admin = AdminClient::connect(a.url.clone()).await.unwrap();
    add_feeds(&mut admin, &farm.urls).await;
    let _running: Vec<_> = ["w1", "w2"]
        .iter()
        .map(|name| Worker::new(name, &a.url, &sim).start(dir.path()))
        .collect();
    wait_for(
        "two workers sharing the hosts",
        Duration::from_secs(30),
        || {
            let mut admin = admin.clone();
            async move {
                let w = workers(&mut admin).await;
                (w.len() == 2 && w.iter().map(|w| w.hosts).sum::<u32>() == 6).then_some(())
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = sample(&scrape(&a.metrics), "kairos_fetches_total{outcome=\"ok\"}");
    assert!(before.unwrap_or(0.0) > 0.0, "the workers fetched");

    // etcd goes away entirely, for longer than the leader's lease.
    let lost_at = (unix_ms() - sim.anchor_ms) as f64 * SCALE / 86_400_000.0;
    etcd.kill(0);
    wait_for("the leader steps down", Duration::from_secs(15), || {
        let m = a.metrics.clone();
        async move {
            let s = scrape(&m);
            (sample(&s, "kairos_leader") == Some(0.0)).then_some(())
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let back = Instant::now();
    etcd.restart(0);
    wait_for(
        "leader again, with both workers",
        Duration::from_secs(45),
        || {
            let (url, m) = (a.url.clone(), a.metrics.clone());
            async move {
                if sample(&scrape(&m), "kairos_leader") != Some(1.0) {
                    return None;
                }
                let mut c = AdminClient::connect(url).await.ok()?;
                let w = workers(&mut c).await;
                (w.len() == 2 && w.iter().map(|w| w.hosts).sum::<u32>() == 6).then_some(())
            }
        },
    )
    .await;
    let recovered = back.elapsed();
    let metrics = scrape(&a.metrics);
    assert!(
        sample(&metrics, "kairos_leader_stepdowns_total").unwrap_or(0.0) >= 1.0,
        "the lost lease is counted"
    );
    // The renewals that went unanswered before it are counted too, and warned of once per
    // spell (the alert KairosLeaderLeaseRenewalsFailing fires on them before a step-down).
    assert!(
        sample(&metrics, "kairos_leader_lease_renewal_failures_total").unwrap_or(0.0) >= 1.0,
        "unanswered renewals are counted"
    );
    let log = std::fs::read_to_string(dir.path().join("coordinator.log")).unwrap_or_default();
    assert!(
        log.contains("a renewal of the leader lease went unanswered"),
        "the unanswered renewals are in the log"
    );
    assert!(
        lost_at < POSTING_DAYS * 0.8,
        "etcd is lost while the farm publishes (day {lost_at:.2})"
    );

    // Run until the farm has been quiet for a simulated day, then count.
    let end = sim.anchor_ms + ((POSTING_DAYS + 1.1) * 86_400_000.0 / SCALE) as i64;
    tokio::time::sleep(Duration::from_millis((end - unix_ms()).max(0) as u64)).await;
    assert_every_posting_once(&a.url, &farm, dir.path()).await;
    eprintln!(
        "{total} postings, each exactly once, through an etcd outage from simulated day {lost_at:.2}; \
         leader and both workers back {:.1} s after etcd returned",
        recovered.as_secs_f64()
    );
}
