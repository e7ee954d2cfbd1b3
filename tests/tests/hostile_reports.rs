//! One hostile feed must never stop a worker, end to end with the real binaries: a feed of
//! 8 items with 1 MiB titles (markup, control characters and script links), one of 300,000
//! tiny items, one of 80,000 unclosed RSS 1.0 items, and a 4 MB access batch sent to the
//! worker's relay. Before the report bounds, each of these put the worker into a loop of
//! resending a report the coordinator refused whole, and feeds added afterwards never got a
//! posting stored. Here the worker keeps its session, what the hostile feeds said arrives
//! clipped and safe, and healthy feeds added afterwards are fetched and stored.

use kairos_farm::fixtures::Fixtures;
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_proto::v1::ingest_client::IngestClient;
use kairos_proto::v1::postings_client::PostingsClient;
use kairos_tests::{sample, scrape, spawn_until, start_coordinator, TempDir};
use std::time::{Duration, Instant};

mod common;
use common::postings_of;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_documents_and_floods_do_not_stop_the_worker() {
    let dir = TempDir::new("hostile-reports");
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    for i in 0..5 {
        std::fs::write(
            docs.join(format!("ok{i}.xml")),
            format!("<rss version=\"2.0\"><channel><title>ok</title><item><guid>ok{i}</guid><title>fine</title><link>https://example.org/{i}</link></item></channel></rss>"),
        )
        .unwrap();
    }
    let farm = Fixtures::start(Some(docs)).await.unwrap();
    let coordinator = start_coordinator(
        &["--replan-interval", "1s", "--fetches-per-feed-per-day", "4"],
        &dir.path().join("coordinator.log"),
    );
    let mut admin = AdminClient::connect(coordinator.url.clone()).await.unwrap();
    let hostile = ["/huge-titles", "/many-items", "/unclosed-rdf"];
    for (i, p) in hostile.iter().enumerate() {
        admin
            .add_feed(pb::AddFeedRequest {
                feed_id: format!("hostile{i}"),
                url: farm.url(p),
                weight: 1.0,
            })
            .await
            .unwrap();
    }
    let worker_log = dir.path().join("worker.log");
    let (mut worker, found) = spawn_until(
        "kairos-worker",
        &[
            "run",
            "--coordinator",
            &coordinator.url,
            "--name",
            "w",
            "--allow-private",
            "127.0.0.0/8",
            "--host-gap",
            "1ms",
            "--ingest-listen",
            "127.0.0.1:0",
        ],
        &worker_log,
        &["kairos-worker ingest on "],
    );
    let fetches = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with("kairos_fetches_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let started = Instant::now();
    while fetches(&scrape(&coordinator.metrics)) < hostile.len() as f64 {
        assert!(worker.0.try_wait().unwrap().is_none(), "worker exited");
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the hostile feeds' first fetches were not all reported; see {}",
            worker_log.display()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // A 4 MB batch to the relay: accepted and split, not a report refused forever.
    let mut relay = IngestClient::connect(format!("http://{}", found[0]))
        .await
        .unwrap();
    let events: Vec<pb::AccessEvent> = (0..55_000)
        .map(|i| pb::AccessEvent {
            user_id: format!("reader-{i:040}"),
            feed_id: "hostile0".into(),
            unix_ms: 1_700_000_000_000,
        })
        .collect();
    let accepted = relay
        .record_accesses(pb::RecordAccessesRequest { events })
        .await
        .expect("a large batch is taken and split")
        .into_inner()
        .accepted;
    assert_eq!(accepted, 55_000);
    // Ids longer than the bound are refused at the edge.
    let refused = relay
        .record_accesses(pb::RecordAccessesRequest {
            events: vec![pb::AccessEvent {
                user_id: "u".repeat(10_000),
                feed_id: "f".into(),
                unix_ms: 1,
            }],
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);

    // Healthy feeds added after all that are fetched and their postings stored.
    for i in 0..5 {
        admin
            .add_feed(pb::AddFeedRequest {
                feed_id: format!("ok{i}"),
                url: farm.url(&format!("/s/ok{i}.xml")),
                weight: 1.0,
            })
            .await
            .unwrap();
    }
    let mut postings = PostingsClient::connect(coordinator.url.clone())
        .await
        .unwrap();
    let started = Instant::now();
    for i in 0..5 {
        loop {
            let got = postings_of(&mut postings, &format!("ok{i}")).await;
            if got.len() == 1 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(90),
                "healthy feed ok{i} has no posting stored; see {}",
                worker_log.display()
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    assert!(worker.0.try_wait().unwrap().is_none(), "worker still up");

    // What the hostile feeds said, as served: clipped titles without control characters,
    // only http(s) links, every page readable by a default client.
    let huge = postings_of(&mut postings, "hostile0").await;
    assert_eq!(huge.len(), 8);
    for p in &huge {
        assert!(p.title.len() <= 1024, "title of {} bytes", p.title.len());
        assert!(
            p.title.starts_with("<script>alert("),
            "titles are data: {}",
            &p.title[..40]
        );
        assert!(!p.title.chars().any(char::is_control));
        assert!(
            p.link.is_empty() || p.link == "https://example.org/ok",
            "{}",
            p.link
        );
    }
    assert_eq!(huge.iter().filter(|p| !p.link.is_empty()).count(), 1);
    let many = postings_of(&mut postings, "hostile1").await;
    assert!(
        many.len() >= kairos_proto::bounds::MAX_POSTINGS_PER_FETCH,
        "one fetch reports {} of 300,000 items",
        many.len()
    );
    let text = scrape(&coordinator.metrics);
    assert_eq!(
        sample(&text, "kairos_reports_refused_bounds_total").unwrap_or(0.0),
        0.0,
        "the worker's reports fit their bounds"
    );
    assert!(sample(&text, "kairos_postings_sanitized_total{what=\"link\"}").unwrap_or(0.0) >= 4.0);
    // The worker kept one session through it all (a lost lease would open a second).
    let log = std::fs::read_to_string(&worker_log).unwrap();
    assert!(
        !log.contains("session ended"),
        "the worker lost its session:\n{log}"
    );
}
