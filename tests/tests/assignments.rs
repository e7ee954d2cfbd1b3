//! A worker that owns thousands of feeds with long URLs gets its whole assignment: the
//! snapshot (about 8 MB here, twice gRPC's default 4 MB message limit) goes in parts,
//! and the real worker fetches every feed. Before, the worker's session failed on every
//! snapshot and it fetched nothing, silently.

use kairos_farm::fixtures::Fixtures;
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::{scrape, start_coordinator, Child, TempDir};
use std::time::{Duration, Instant};

const FEEDS: usize = 2000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_larger_than_a_message_reaches_the_worker() {
    let dir = TempDir::new("assignments");
    let c = start_coordinator(
        &["--replan-interval", "2s"],
        &dir.path().join("coordinator.log"),
    );
    let mut admin = AdminClient::connect(c.url.clone()).await.unwrap();
    // A loopback server that answers every path (404 here), so each fetch ends at once and
    // is reported; the URLs are near the 4 KB limit. (Not a port where nothing listens:
    // a host that refuses connections is held whole after a few failures, and whether
    // the worker started every fetch before the hold reached it was a race.)
    let server = Fixtures::start(None).await.unwrap();
    let pad = "p".repeat(3880);
    let started = Instant::now();
    for i in 0..FEEDS {
        admin
            .add_feed(pb::AddFeedRequest {
                feed_id: format!("f{i}"),
                url: server.url(&format!("/{i}/{pad}")),
                weight: 0.0,
            })
            .await
            .unwrap();
    }
    eprintln!("{FEEDS} feeds added in {:?}", started.elapsed());
    let mut cmd = std::process::Command::new(kairos_tests::bin("kairos-worker"));
    cmd.args([
        "run",
        "--coordinator",
        &c.url,
        "--name",
        "big",
        "--allow-private",
        "127.0.0.0/8",
        "--host-gap",
        "0s",
        "--max-in-flight",
        "128",
    ]);
    cmd.stdout(std::process::Stdio::null());
    cmd.stderr(std::fs::File::create(dir.path().join("worker.log")).unwrap());
    let _worker = Child(cmd.spawn().unwrap());

    let worker_started = Instant::now();
    let deadline = worker_started + Duration::from_secs(60);
    loop {
        let metrics = scrape(&c.metrics);
        let fetched: f64 = metrics
            .lines()
            .filter(|l| l.starts_with("kairos_fetches_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        if fetched >= FEEDS as f64 {
            eprintln!(
                "all fetched {:?} after the worker started",
                worker_started.elapsed()
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{fetched} of {FEEDS} feeds fetched; see {}",
            dir.path().display()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
