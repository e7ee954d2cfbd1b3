//! `kairos-coordinator standalone`, the README's main job, as a user runs it: the demo's
//! summary (every field the issue names, nothing lost or doubled, the budget kept, better
//! than uniform polling), and `--feeds FILE` crawling a recorded-time server (the farm
//! process on its own shared, time-compressed clock).

use kairos_tests::{coordinator, spawn_until, unix_ms, TempDir};

fn summary(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("summary written")).unwrap()
}

#[test]
fn demo_summary_has_every_field_and_beats_uniform_polling() {
    let dir = TempDir::new("standalone-demo");
    let out = dir.path().join("summary.json");
    let run = coordinator(&[
        "standalone",
        "--demo",
        "--run-for",
        "25s",
        "--time-scale",
        "5760",
        // A fixed simulated start: the farm's postings (and so the scroll-offs counted
        // below) depend on the day and hour the run starts, not only on the seed.
        "--clock-start",
        "2026-05-04T00:00:00Z",
        "--metrics-addr",
        "127.0.0.1:0",
        "--summary-json",
        out.to_str().unwrap(),
    ]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        stdout.contains("] feeds 300 | workers 2/2"),
        "hourly lines:\n{stdout}"
    );
    let s = summary(&out);
    for field in [
        "feeds",
        "workers",
        "fetches",
        "budget_fetches",
        "postings_published",
        "postings_ingested",
        "duplicates_ingested",
        "avg_delay_seconds",
        "uniform_avg_delay_seconds",
        "missed_per_access",
        "simulated_days",
    ] {
        assert!(s.get(field).is_some(), "summary lacks `{field}`: {s}");
    }
    let num = |f: &str| s[f].as_f64().unwrap();
    assert_eq!(num("feeds"), 300.0);
    assert_eq!(num("workers"), 2.0);
    assert!(num("simulated_days") > 1.5, "{s}");
    assert!(num("postings_published") > 1000.0, "{s}");
    // Every published posting is ingested once, except those that scrolled off a very
    // bursty feed's document between two fetches (counted, and rare).
    assert_eq!(
        num("postings_ingested") + num("postings_missing"),
        num("postings_published"),
        "{s}"
    );
    assert!(
        num("postings_missing") <= 0.02 * num("postings_published"),
        "{s}"
    );
    assert_eq!(num("duplicates_ingested"), 0.0);
    // The budget, plus every feed's first fetch at sight, plus what replans of fast-changing
    // early models add (a re-solved feed may be fetched sooner than its old plan said; about
    // 10% at this compression, where a replan interval is eight simulated hours).
    assert!(num("fetches") <= num("budget_fetches") * 1.2 + 300.0, "{s}");
    assert!(num("fetches") >= num("budget_fetches") * 0.8, "{s}");
    // Every UTC day within its budget, first sights and catch-ups included: the two
    // workers' allowances add up to it. The first day is a whole one (the clock starts at
    // midnight) and spends most of it (0.89 when this was written: at this compression a
    // replan comes every eight simulated hours, and the first plan is a cold one).
    let budget = num("budget_per_day");
    let days = s["fetches_by_day"].as_array().expect("fetches_by_day");
    assert!(days.len() >= 2, "{s}");
    for d in days {
        let n = d["fetches"].as_f64().unwrap();
        assert!(n <= budget, "day {} spent {n} of {budget}: {s}", d["day"]);
    }
    let first = days[0]["fetches"].as_f64().unwrap();
    assert!(
        first >= 0.8 * budget,
        "the first day spent {first} of {budget}: {s}"
    );
    assert!(num("missed_per_access") > 0.0);
    assert!(
        num("avg_delay_seconds") > 0.0
            && num("avg_delay_seconds") < num("uniform_avg_delay_seconds"),
        "{s}"
    );
}

#[test]
fn feeds_file_mode_crawls_a_recorded_time_server() {
    let dir = TempDir::new("standalone-feeds");
    let anchor = unix_ms().to_string();
    let clock = [
        "--time-scale",
        "5760",
        "--clock-start",
        "2026-05-04T00:00:00Z",
        "--clock-anchor-unix-ms",
        &anchor,
    ];
    let urls = dir.path().join("urls.txt");
    let mut farm_args = vec![
        "--feeds",
        "12",
        "--hosts",
        "3",
        "--posts-per-day",
        "12",
        "--history-days",
        "1",
        "--urls-out",
        urls.to_str().unwrap(),
    ];
    farm_args.extend_from_slice(&clock);
    let (_farm, _) = spawn_until(
        "kairos-farm",
        &farm_args,
        &dir.path().join("farm.log"),
        &["kairos-farm ready"],
    );
    // A comment and a bad line are skipped with a log line, not fatal.
    let mut list = std::fs::read_to_string(&urls).unwrap();
    list.push_str("# a comment\nnot a url\n");
    std::fs::write(&urls, list).unwrap();
    let out = dir.path().join("summary.json");
    let mut args = vec![
        "standalone",
        "--feeds",
        urls.to_str().unwrap(),
        "--allow-private",
        "127.0.0.0/8",
        "--run-for",
        "12s",
        "--metrics-addr",
        "127.0.0.1:0",
        "--replan-interval",
        "1s",
        // Postings go 3 simulated hours after discovery (about 2 s here); markers stay, so
        // items still in the documents are not stored again.
        "--postings-retention",
        "3h",
        "--item-marker-retention",
        "forever",
        "--retention-interval",
        "1s",
        "--summary-json",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(&clock);
    let run = coordinator(&args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("feeds: 12 added, 1 lines skipped"),
        "{}",
        String::from_utf8_lossy(&run.stdout)
    );
    let s = summary(&out);
    assert_eq!(s["feeds"].as_f64(), Some(12.0));
    assert!(
        s.get("postings_published").is_none(),
        "farm-only fields: {s}"
    );
    assert!(s.get("uniform_avg_delay_seconds").is_none(), "{s}");
    let per_feed = s["fetches_per_feed"]
        .as_object()
        .expect("per-feed fetch counts");
    assert_eq!(per_feed.len(), 12, "{s}");
    assert!(per_feed.values().all(|v| v.as_u64().unwrap_or(0) >= 1));
    assert!(s["postings_ingested"].as_f64().unwrap() > 12.0, "{s}");
    assert_eq!(s["duplicates_ingested"].as_f64(), Some(0.0));
    assert!(s["avg_delay_seconds"].as_f64().unwrap() > 0.0, "{s}");
    let log = String::from_utf8_lossy(&run.stderr);
    assert!(log.contains("retention: old postings removed"), "{log}");
    // Without the allow-list the same loopback URLs are refused as they are read (as
    // AddFeed refuses them): skipped with the reason, never registered, never fetched.
    let denied = dir.path().join("denied.json");
    let mut args = vec![
        "standalone",
        "--feeds",
        urls.to_str().unwrap(),
        "--run-for",
        "4s",
        "--metrics-addr",
        "127.0.0.1:0",
        "--summary-json",
        denied.to_str().unwrap(),
    ];
    args.extend_from_slice(&clock);
    let run = coordinator(&args);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("feeds: 0 added, 13 lines skipped"),
        "{}",
        String::from_utf8_lossy(&run.stdout)
    );
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("not a public address"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let d = summary(&denied);
    assert_eq!(d["feeds"].as_f64(), Some(0.0), "{d}");
    assert_eq!(d["fetches"].as_f64(), Some(0.0), "{d}");
    assert_eq!(d["postings_ingested"].as_f64(), Some(0.0));
}
