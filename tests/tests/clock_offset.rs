//! A worker whose clock is an hour ahead of the coordinator's (a clock jump, a host without
//! NTP), with real processes on loopback: fetch times come from the coordinator, so such a
//! worker fetches an hour off the plan. It is shown, not silent: the coordinator's worker
//! list gives each worker's offset, the largest is a metric, and both sides say it once in
//! their logs. A worker whose clock agrees shows none.

use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::{sample, scrape, start_coordinator, unix_ms, Child, TempDir};
use std::time::{Duration, Instant};

/// RFC 3339 for Unix seconds, from `date`.
fn rfc3339(unix_s: i64) -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{unix_s}"), "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_an_hour_off_is_shown_and_said() {
    let dir = TempDir::new("clock-offset");
    let c = start_coordinator(&[], &dir.path().join("coordinator.log"));
    let worker = |name: &str, extra: &[String]| {
        let mut cmd = std::process::Command::new(kairos_tests::bin("kairos-worker"));
        cmd.args(["run", "--coordinator", &c.url, "--name", name])
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join(format!("{name}.log"))).unwrap());
        Child(cmd.spawn().unwrap())
    };
    let now = unix_ms();
    // Its clock reads an hour later than the wall clock, at the wall clock's pace.
    let _ahead = worker(
        "ahead",
        &[
            "--clock-start".into(),
            rfc3339(now / 1000 + 3600),
            "--clock-anchor-unix-ms".into(),
            ((now / 1000) * 1000).to_string(),
        ],
    );
    let _right = worker("right", &[]);

    let mut admin = AdminClient::connect(c.url.clone()).await.unwrap();
    let start = Instant::now();
    let mut settled = false;
    let offsets = loop {
        let workers = admin
            .list_workers(pb::ListWorkersRequest {})
            .await
            .unwrap()
            .into_inner()
            .workers;
        let of = |name: &str| {
            workers
                .iter()
                .find(|w| w.worker_name == name)
                .map(|w| w.clock_offset_ms)
        };
        // A registration alone says nothing of the clock: wait for the first heartbeat of
        // the worker ahead, then for a few more of both.
        if let (Some(a), Some(_)) = (of("ahead"), of("right")) {
            if a != 0 {
                if settled {
                    break (a, of("right").unwrap());
                }
                settled = true;
                tokio::time::sleep(Duration::from_secs(3)).await;
                continue;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no heartbeat with a clock from both workers: {workers:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    eprintln!("offsets: ahead {} ms, right {} ms", offsets.0, offsets.1);
    assert!(
        (offsets.0 - 3_600_000).abs() < 5_000,
        "an hour ahead: {}",
        offsets.0
    );
    assert!(offsets.1.abs() < 5_000, "agrees: {}", offsets.1);
    let largest = sample(
        &scrape(&c.metrics),
        "kairos_worker_clock_offset_max_seconds",
    )
    .unwrap();
    assert!((largest - 3600.0).abs() < 5.0, "{largest}");
    // Both sides say it, once.
    let said = |file: &str, what: &str| {
        std::fs::read_to_string(dir.path().join(file))
            .unwrap()
            .matches(what)
            .count()
    };
    let start = Instant::now();
    while said("ahead.log", "this worker's clock differs") == 0
        && start.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(said("ahead.log", "this worker's clock differs"), 1);
    assert_eq!(said("right.log", "clock differs"), 0);
    let log = std::fs::read_to_string(dir.path().join("coordinator.log")).unwrap();
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("a worker's clock differs"))
        .collect();
    assert_eq!(warned.len(), 1, "{log}");
    assert!(warned[0].contains("ahead"), "{}", warned[0]);
}
