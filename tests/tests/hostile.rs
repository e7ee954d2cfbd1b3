//! A worker against everything the feed world throws at it, end to end with real
//! processes: all of `../shared/feeds-corpus/` (well-formed and broken documents) plus a
//! slow drip, an endless body, a gzip bomb, redirect loops and chains, a redirect to a
//! private address, throttling and errors, all served by the farm's fixtures on loopback.
//! Every fetch must end in bounded time with a classified outcome, the worker must stay
//! up, and malformed feeds must be counted and visible in the coordinator's metrics.

use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::{sample, scrape, shared, spawn_until, start_coordinator, TempDir};
use std::time::{Duration, Instant};

/// Percent-encodes everything but unreserved characters and `/`.
fn encode_path(p: &str) -> String {
    p.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

const HOSTILE: [&str; 8] = [
    "/drip",
    "/endless",
    "/bomb",
    "/loop-a",
    "/hop/0",
    "/to-private",
    "/missing",
    "/broken",
];

fn total_fetches(text: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with("kairos_fetches_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_and_hostile_servers_end_classified_and_the_worker_survives() {
    let dir = TempDir::new("hostile");
    let corpus = shared().join("feeds-corpus");
    let manifest = std::fs::read_to_string(corpus.join("MANIFEST.tsv")).expect("corpus manifest");
    let paths: Vec<String> = manifest
        .lines()
        .skip(1)
        .filter_map(|l| l.split('\t').next().map(String::from))
        .collect();
    assert!(paths.len() > 1900, "corpus size {}", paths.len());
    let corpus_arg = corpus.display().to_string();
    let (_farm, found) = spawn_until(
        "kairos-farm",
        &["--feeds", "1", "--fixtures-dir", &corpus_arg],
        &dir.path().join("farm.log"),
        &["kairos-farm fixtures on ", "kairos-farm ready"],
    );
    let base = format!("http://{}", found[0]);

    let coordinator = start_coordinator(
        &["--replan-interval", "1s", "--fetches-per-feed-per-day", "4"],
        &dir.path().join("coordinator.log"),
    );
    let mut admin = AdminClient::connect(coordinator.url.clone()).await.unwrap();
    let mut urls: Vec<String> = paths
        .iter()
        .map(|p| format!("{base}/s/{}", encode_path(p)))
        .collect();
    urls.extend(HOSTILE.iter().map(|p| format!("{base}{p}")));
    // A 429 holds its whole host (as a real rate limit would), so the throttling server is
    // a host of its own: the corpus's first fetches must not wait out its Retry-After.
    let throttler = kairos_farm::fixtures::Fixtures::start(None).await.unwrap();
    urls.push(throttler.url("/throttle"));
    for (i, url) in urls.iter().enumerate() {
        admin
            .add_feed(pb::AddFeedRequest {
                feed_id: format!("c{i}"),
                url: url.clone(),
                weight: 1.0,
            })
            .await
            .unwrap_or_else(|e| panic!("adding {url}: {e}"));
    }
    let mut cmd = std::process::Command::new(kairos_tests::bin("kairos-worker"));
    cmd.args([
        "run",
        "--coordinator",
        &coordinator.url,
        "--name",
        "hostile",
        "--allow-private",
        "127.0.0.0/8",
        "--host-gap",
        "1ms",
        "--fetch-timeout",
        "2s",
        "--max-body-bytes",
        "1048576",
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::fs::File::create(dir.path().join("worker.log")).unwrap());
    let mut worker = kairos_tests::Child(cmd.spawn().unwrap());

    // Every feed is fetched once at first sight; wait for all those fetches to be reported.
    let started = Instant::now();
    let text = loop {
        let text = scrape(&coordinator.metrics);
        if total_fetches(&text) >= urls.len() as f64 {
            break text;
        }
        assert!(
            worker.0.try_wait().unwrap().is_none(),
            "the worker exited; see {}",
            dir.path().join("worker.log").display()
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "only {} of {} fetches reported in 120 s:\n{text}",
            total_fetches(&text),
            urls.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        worker.0.try_wait().unwrap().is_none(),
        "the worker is still up"
    );
    let count = |outcome: &str| {
        sample(
            &text,
            &format!("kairos_fetches_total{{outcome=\"{outcome}\"}}"),
        )
        .unwrap_or(0.0)
    };
    assert!(count("ok") >= 900.0, "{text}");
    assert!(
        // The corpus's broken documents (63 are still refused whole after the normalising
        // pass repairs what it can; worker/tests/corpus.rs) and the hostile servers' garbage.
        count("malformed") >= 60.0,
        "malformed feeds are counted:\n{text}"
    );
    assert!(count("timeout") >= 1.0, "slow drip:\n{text}");
    assert!(
        count("too_large") >= 2.0,
        "endless body and gzip bomb:\n{text}"
    );
    assert!(
        count("redirect_limit") >= 2.0,
        "redirect loop and chain:\n{text}"
    );
    assert!(
        count("forbidden_target") >= 1.0,
        "redirect to 10.0.0.1:\n{text}"
    );
    assert!(count("throttled") >= 1.0, "{text}");
    assert!(count("client_error") >= 1.0, "{text}");
    assert!(count("server_error") >= 1.0, "{text}");
    // Nothing was reported twice or lost between worker and coordinator.
    assert_eq!(
        sample(&text, "kairos_reports_rejected_total").unwrap_or(0.0),
        0.0
    );
}
