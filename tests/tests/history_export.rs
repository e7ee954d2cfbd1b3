//! `kairosctl history export` against a real `serve` that crawled a farm, on a compressed
//! clock: the trace it writes spans whole UTC days and is the farm's postings of those days
//! as published (every exported posting is one the farm published, within the second an
//! item's date keeps, and every posting the farm published in the span is there), and
//! `kairos-coordinator replay` reads it and scores Kairos and a peer on it.

mod common;

use common::add_feeds;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::scenario::{refs, Clock, Farm, FarmSpec, Worker};
use kairos_tests::{bin, coordinator, start_coordinator, TempDir};
use serde_json::Value;
use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

/// A simulated day per 10 wall seconds.
const SCALE: f64 = 8640.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_history_holds_the_farms_postings_and_replays() {
    let dir = TempDir::new("history-export");
    let sim = Clock::new(SCALE);
    let spec = FarmSpec {
        feeds: 12,
        hosts: 4,
        posts_per_day: 12.0,
        days: 5.0,
        ..FarmSpec::default()
    };
    let farm = Farm::start(dir.path(), &spec, &sim, &[]);
    let data = dir.path().join("data").display().to_string();
    let mut args: Vec<String> = [
        "--data-dir",
        &data,
        "--replan-interval",
        "1s",
        "--worker-lease",
        "3s",
        "--fetches-per-feed-per-day",
        "48",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(sim.args());
    let c = start_coordinator(&refs(&args), &dir.path().join("coordinator.log"));
    let mut admin = AdminClient::connect(c.url.clone()).await.unwrap();
    add_feeds(&mut admin, &farm.urls).await;
    let _worker = Worker::new("w1", &c.url, &sim).start(dir.path());
    while Clock::day_of(sim.now_ms()) < 4.3 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let trace = dir.path().join("trace");
    let ctl = |args: &[&str]| {
        Command::new(bin("kairosctl"))
            .args(["--coordinator", &c.url, "-o", "json", "history", "export"])
            .args(args)
            .output()
            .expect("run kairosctl")
    };
    let o = ctl(&[trace.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["feeds"], 12, "{j}");
    assert_eq!(j["feeds_watched"], 12, "{j}");
    // Whole days: from the first midnight watched (the farm's first, or the next when its
    // first fetch came after it) to the last midnight the feeds were nearly all fetched
    // after (day 4's, or day 3's when a busy feed's last fetch came before day 4).
    let (start, end) = (
        j["start_unix_ms"].as_i64().unwrap(),
        j["end_unix_ms"].as_i64().unwrap(),
    );
    assert!([0.0, 1.0].contains(&Clock::day_of(start)), "{j}");
    assert!([3.0, 4.0].contains(&Clock::day_of(end)), "{j}");
    assert!(j["postings_after_end"].as_u64().unwrap() > 0, "{j}");

    let mut exported: HashMap<String, Vec<i64>> = HashMap::new();
    let postings = std::fs::read_to_string(trace.join("postings.csv")).unwrap();
    for line in postings.lines().skip(1) {
        let (feed, ts) = line.split_once(',').unwrap();
        let ms = start + (ts.parse::<f64>().unwrap() * 1000.0).round() as i64;
        exported.entry(feed.to_string()).or_default().push(ms);
    }
    let near = |t: i64, among: &[i64]| among.iter().any(|&p| (p - t).abs() <= 1_000);
    let (mut found, mut due) = (0, 0);
    for (i, published) in &farm.published {
        let mine = exported.get(&format!("f{i}")).cloned().unwrap_or_default();
        for &t in &mine {
            assert!(
                near(t, published) && (start..end).contains(&t),
                "f{i}: exported posting at day {:.4} was never published in the span",
                Clock::day_of(t)
            );
        }
        for &p in published.iter().filter(|&&p| (start..end).contains(&p)) {
            due += 1;
            found += usize::from(near(p, &mine));
        }
    }
    assert!(due > 100, "the farm published enough to test ({due})");
    assert_eq!(
        found, due,
        "postings published in the span but not exported"
    );
    assert_eq!(
        j["postings"].as_u64().unwrap() as usize,
        exported.values().map(Vec::len).sum::<usize>(),
        "{j}"
    );

    // The folder now holds a trace: a second export into it is refused, locally.
    let again = ctl(&[trace.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a trace"));

    // `replay` reads the export and scores Kairos beside a peer tuned to the same budget.
    let out = dir.path().join("replay.json");
    let r = coordinator(&[
        "replay",
        "--trace",
        trace.to_str().unwrap(),
        "--fetches-per-feed-per-day",
        "4",
        "--peers",
        "commafeed",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let text = report.to_string();
    assert!(text.contains("commafeed"), "{text}");
}
