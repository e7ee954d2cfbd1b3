//! `kairos-coordinator serve` as a real process: the Admin and Postings APIs with clear
//! statuses for bad input, gRPC health, and state that survives a restart.

use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_proto::v1::postings_client::PostingsClient;
use kairos_tests::{scrape, start_coordinator, TempDir};
use tonic::Code;

/// A client stream of the given messages.
fn tokio_stream_of<T: Send + 'static>(
    items: Vec<T>,
) -> impl tonic::codegen::tokio_stream::Stream<Item = T> + Send + 'static {
    tonic::codegen::tokio_stream::iter(items)
}

fn add_feed(id: &str, url: &str) -> pb::AddFeedRequest {
    pb::AddFeedRequest {
        feed_id: id.into(),
        url: url.into(),
        weight: 0.0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_api_answers_bad_input_with_clear_statuses_and_state_survives_restart() {
    let dir = TempDir::new("serve");
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let first = start_coordinator(
        &["--data-dir", data_arg],
        &dir.path().join("coordinator-1.log"),
    );
    let url = first.url.clone();
    let mut admin = AdminClient::connect(url.clone()).await.unwrap();

    // Health checking for probes.
    let channel = tonic::transport::Channel::from_shared(url.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let status = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: "kairos.v1.Admin".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(
        status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );

    let feed = admin
        .add_feed(add_feed("news", "https://news.example/feed.xml"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(feed.host, "news.example");
    let code = |r: Result<tonic::Response<pb::Feed>, tonic::Status>| r.unwrap_err().code();
    assert_eq!(
        code(
            admin
                .add_feed(add_feed("news", "https://other.example/"))
                .await
        ),
        Code::AlreadyExists
    );
    assert_eq!(
        code(admin.add_feed(add_feed("", "not a url")).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(admin.add_feed(add_feed("", "ftp://x.example/")).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            admin
                .get_feed(pb::GetFeedRequest {
                    feed_id: "nope".into()
                })
                .await
        ),
        Code::NotFound
    );
    admin
        .add_user(pb::AddUserRequest {
            user_id: "ann".into(),
            weight: 1.0,
        })
        .await
        .unwrap();
    let sub = |u: &str, f: &str| pb::SubscribeRequest {
        user_id: u.into(),
        feed_id: f.into(),
    };
    assert_eq!(
        admin
            .subscribe(sub("ann", "nope"))
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    admin.subscribe(sub("ann", "news")).await.unwrap();
    assert_eq!(
        admin
            .subscribe(sub("ann", "news"))
            .await
            .unwrap_err()
            .code(),
        Code::AlreadyExists
    );
    let empty = pb::ImportOpmlRequest {
        opml: "<opml version=\"2.0\"><body/></opml>".into(),
        user_id: String::new(),
    };
    assert_eq!(
        admin.import_opml(empty).await.unwrap_err().code(),
        Code::InvalidArgument
    );
    let opml = pb::ImportOpmlRequest {
        opml: r#"<opml version="2.0"><body><outline xmlUrl="https://a.example/rss"/><outline xmlUrl="https://b.example/atom"/></body></opml>"#.into(),
        user_id: "ann".into(),
    };
    let imported = admin.import_opml(opml).await.unwrap().into_inner();
    assert_eq!((imported.feeds_added, imported.subscriptions_added), (2, 2));
    let stats = admin
        .get_stats(pb::GetStatsRequest {})
        .await
        .unwrap()
        .into_inner();
    let listed = admin
        .list_feeds(pb::ListFeedsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .feeds
        .len();
    assert_eq!(stats.feeds as usize, listed);
    assert_eq!(stats.workers, 0);
    // Settings: a bad policy is refused and changes nothing; a good budget is kept.
    let before = admin
        .get_settings(pb::GetSettingsRequest {})
        .await
        .unwrap()
        .into_inner();
    let bad = pb::SettingsPatch {
        policy: Some("fastest".into()),
        ..Default::default()
    };
    assert_eq!(
        admin.update_settings(bad).await.unwrap_err().code(),
        Code::InvalidArgument
    );
    assert_eq!(
        admin
            .get_settings(pb::GetSettingsRequest {})
            .await
            .unwrap()
            .into_inner(),
        before
    );
    let set = admin
        .update_settings(pb::SettingsPatch {
            budget: Some(pb::settings_patch::Budget::FetchesPerDay(123.0)),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(set.budget_fetches_per_day, 123.0);
    assert_eq!(set.policy, before.policy);
    assert_eq!(
        admin
            .inspect_feed_plan(pb::InspectFeedPlanRequest {
                feed_id: "no-such-feed".into()
            })
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );

    let mut postings = PostingsClient::connect(url.clone()).await.unwrap();
    let req = |cursor: &str| pb::ListPostingsRequest {
        scope: Some(pb::list_postings_request::Scope::FeedId("news".into())),
        cursor: cursor.into(),
        limit: 10,
    };
    assert!(postings
        .list_postings(req(""))
        .await
        .unwrap()
        .into_inner()
        .postings
        .is_empty());
    assert_eq!(
        postings
            .list_postings(req("not-a-cursor"))
            .await
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );

    // Reader access events: a unary batch is all or nothing, a stream skips bad events.
    let mut ingest = kairos_proto::v1::ingest_client::IngestClient::connect(url.clone())
        .await
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let ev = |u: &str, f: &str| pb::AccessEvent {
        user_id: u.into(),
        feed_id: f.into(),
        unix_ms: now,
    };
    let good = pb::RecordAccessesRequest {
        events: vec![ev("ann", ""), ev("ann", "news")],
    };
    assert_eq!(
        ingest
            .record_accesses(good.clone())
            .await
            .unwrap()
            .into_inner()
            .accepted,
        2
    );
    let mixed = pb::RecordAccessesRequest {
        events: vec![ev("ann", ""), ev("ghost", ""), ev("ann", "nope")],
    };
    let refused = ingest.record_accesses(mixed.clone()).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused.message().contains("1 events from unknown users"),
        "{}",
        refused.message()
    );
    let streamed = ingest
        .stream_accesses(tokio_stream_of(vec![good, mixed]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(streamed.accepted, 3, "2 good + 1 good of the mixed batch");

    // Restart on the same data directory: the registry survives.
    // Prometheus metrics of what happened so far.
    // The registry gauges follow at the next replan (every 5 s by default): a single
    // scrape raced it, so the scrape is retried for a while.
    let lines = [
        "kairos_ingest_access_events_total{result=\"accepted\"} 5",
        "kairos_ingest_access_events_total{result=\"unknown_user\"} 2",
        "kairos_ingest_access_events_total{result=\"unknown_feed\"} 2",
        "kairos_registry_feeds 3",
        "kairos_registry_users 1",
    ];
    let started = std::time::Instant::now();
    loop {
        let text = scrape(&first.metrics);
        let missing: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|line| !text.lines().any(|l| l == *line))
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "missing {missing:?} in:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    drop(first);
    let second = start_coordinator(
        &["--data-dir", data_arg],
        &dir.path().join("coordinator-2.log"),
    );
    let url = second.url.clone();
    let url_after_restart = url.clone();
    let mut admin = AdminClient::connect(url).await.unwrap();
    let feeds = admin
        .list_feeds(pb::ListFeedsRequest {
            after_feed_id: String::new(),
            limit: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .feeds;
    assert_eq!(feeds.len(), 3);
    let subs = admin
        .list_subscriptions(pb::ListSubscriptionsRequest {
            scope: Some(pb::list_subscriptions_request::Scope::UserId("ann".into())),
        })
        .await
        .unwrap()
        .into_inner()
        .subscriptions;
    assert_eq!(subs.len(), 3);
    let settings = admin
        .get_settings(pb::GetSettingsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        settings.budget_fetches_per_day, 123.0,
        "settings set through the API survive a restart"
    );
    // Started with the default budget on the command line: the stored one wins, and the
    // difference is said once.
    let log = std::fs::read_to_string(dir.path().join("coordinator-2.log")).unwrap();
    assert_eq!(
        log.matches("differ from the command line's").count(),
        1,
        "{log}"
    );
    // The restarted server knows the registered users and feeds for access events too.
    let mut ingest = kairos_proto::v1::ingest_client::IngestClient::connect(url_after_restart)
        .await
        .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let batch = pb::RecordAccessesRequest {
        events: vec![pb::AccessEvent {
            user_id: "ann".into(),
            feed_id: "news".into(),
            unix_ms: now,
        }],
    };
    assert_eq!(
        ingest
            .record_accesses(batch)
            .await
            .unwrap()
            .into_inner()
            .accepted,
        1
    );
    let text = scrape(&second.metrics);
    assert!(
        text.lines().any(|l| l == "kairos_registry_feeds 3"),
        "gauges come back from the store:\n{text}"
    );
}

/// The inputs that used to crash or wedge the coordinator, sent to the real binary: each is
/// refused with `INVALID_ARGUMENT` naming what is wrong, nothing changes, and the process
/// keeps answering (and replanning) afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_that_crashed_or_wedged_the_coordinator_are_refused() {
    let dir = TempDir::new("serve-hostile");
    let c = start_coordinator(
        &["--replan-interval", "200ms"],
        &dir.path().join("coordinator.log"),
    );
    let mut admin = AdminClient::connect(c.url.clone()).await.unwrap();
    let invalid = |r: Result<tonic::Response<_>, tonic::Status>, what: &str| {
        let e = r.map(|_: tonic::Response<()>| ()).unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{what}: {e:?}");
        e.message().to_string()
    };
    let unit =
        |r: Result<tonic::Response<pb::Feed>, tonic::Status>| r.map(|_| tonic::Response::new(()));
    // A 3 MB URL (it made every assignment snapshot unsendable).
    let huge = format!("https://big.example/{}", "a".repeat(3 << 20));
    let msg = invalid(unit(admin.add_feed(add_feed("", &huge)).await), "3 MB url");
    assert!(msg.contains("longer than"), "{msg}");
    // A 3 MB feed id: refused at registration with its length, not quoted back whole; an
    // unknown one of that size is "not found" in a message a client still reads.
    let long_id = "i".repeat(3 << 20);
    let msg = invalid(
        unit(
            admin
                .add_feed(add_feed(&long_id, "https://long-id.example/feed"))
                .await,
        ),
        "3 MB feed id",
    );
    assert!(msg.contains(&format!("{} bytes", 3 << 20)), "{msg}");
    assert!(msg.len() < 200, "{} bytes", msg.len());
    let gone = admin
        .remove_feed(pb::RemoveFeedRequest { feed_id: long_id })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound, "{gone:?}");
    assert!(
        gone.message().len() < 1100,
        "{} bytes",
        gone.message().len()
    );
    // A feed weight of 1e304 (the plan allocated 28x the budget).
    let heavy = pb::AddFeedRequest {
        feed_id: "heavy".into(),
        url: "https://heavy.example/feed".into(),
        weight: 1e304,
    };
    let msg = invalid(unit(admin.add_feed(heavy).await), "feed weight");
    assert!(msg.contains("weight"), "{msg}");
    // A user weight of 1e38 (the miss metric's solver panicked and poisoned the hub).
    let user = admin
        .add_user(pb::AddUserRequest {
            user_id: "whale".into(),
            weight: 1e38,
        })
        .await
        .map(|_| tonic::Response::new(()));
    invalid(user, "user weight");
    // OPML nested 5,000 deep (a stack overflow aborted the process).
    let nested = format!(
        "<opml version=\"2.0\"><body>{}{}</body></opml>",
        "<outline text=\"x\">".repeat(5000),
        "</outline>".repeat(5000)
    );
    let opml = admin
        .import_opml(pb::ImportOpmlRequest {
            opml: nested,
            user_id: String::new(),
        })
        .await
        .map(|_| tonic::Response::new(()));
    let msg = invalid(opml, "nested OPML");
    assert!(msg.contains("deeper"), "{msg}");
    // Settings that would stop all replanning, or were silently cleared.
    let before = admin
        .get_settings(pb::GetSettingsRequest {})
        .await
        .unwrap()
        .into_inner();
    for (what, bad) in [
        (
            "min 1e308",
            pb::SettingsPatch {
                min_fetches_per_day: Some(1e308),
                ..Default::default()
            },
        ),
        (
            "max NaN",
            pb::SettingsPatch {
                max_fetches_per_day: Some(f64::NAN),
                ..Default::default()
            },
        ),
        (
            "max -5",
            pb::SettingsPatch {
                max_fetches_per_day: Some(-5.0),
                ..Default::default()
            },
        ),
        (
            "budget inf",
            pb::SettingsPatch {
                budget: Some(pb::settings_patch::Budget::FetchesPerDay(f64::INFINITY)),
                ..Default::default()
            },
        ),
    ] {
        let r = admin
            .update_settings(bad)
            .await
            .map(|_| tonic::Response::new(()));
        invalid(r, what);
    }
    assert_eq!(
        admin
            .get_settings(pb::GetSettingsRequest {})
            .await
            .unwrap()
            .into_inner(),
        before,
        "refused settings changed nothing"
    );
    // Still serving: a feed added now is planned by the next rounds.
    admin
        .add_feed(add_feed("after", "https://after.example/feed"))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let plan = admin
            .inspect_feed_plan(pb::InspectFeedPlanRequest {
                feed_id: "after".into(),
            })
            .await;
        if plan.is_ok_and(|p| !p.into_inner().fetch_offsets_seconds.is_empty()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new feed was never planned"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // A total budget below what the registered feeds' minimums need: refused, unchanged.
    let before = admin
        .get_settings(pb::GetSettingsRequest {})
        .await
        .unwrap()
        .into_inner();
    let starve = admin
        .update_settings(pb::SettingsPatch {
            budget: Some(pb::settings_patch::Budget::FetchesPerDay(0.01)),
            ..Default::default()
        })
        .await
        .map(|_| tonic::Response::new(()));
    let msg = invalid(starve, "budget below the floors");
    assert!(msg.contains("registered feeds"), "{msg}");
    assert_eq!(
        admin
            .get_settings(pb::GetSettingsRequest {})
            .await
            .unwrap()
            .into_inner(),
        before
    );
    let failures = kairos_tests::sample(&scrape(&c.metrics), "kairos_replan_failures_total");
    assert_eq!(failures, Some(0.0), "no replan failed");
}

/// Store flags that contradict each other are refused at start, naming the flag, before
/// anything listens.
#[test]
fn contradictory_store_flags_are_refused_at_start() {
    let dir = TempDir::new("store-flags");
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    for (args, says) in [
        (
            vec!["--store-cache-mib", "64"],
            "--store-cache-mib sizes the embedded store's page cache",
        ),
        (
            vec!["--store", "memory", "--data-dir", data],
            "--store memory keeps nothing on disk",
        ),
        (
            vec!["--store", "embedded"],
            "--store embedded needs --data-dir",
        ),
        (
            vec!["--etcd-endpoints", "127.0.0.1:1"],
            "--etcd-endpoints needs --store etcd",
        ),
        (
            vec!["--data-dir", data, "--store-cache-mib", "0"],
            "0 is not in 1..=1048576",
        ),
    ] {
        let mut all = vec![
            "serve",
            "--insecure-loopback",
            "--listen",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ];
        all.extend_from_slice(&args);
        let out = std::process::Command::new(kairos_tests::bin("kairos-coordinator"))
            .args(&all)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // A cache size with the embedded store is taken.
    let c = kairos_tests::start_coordinator(
        &["--data-dir", data, "--store-cache-mib", "16"],
        &dir.path().join("coordinator.log"),
    );
    assert!(kairos_tests::try_scrape(&c.metrics).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_urls_naming_private_or_metadata_addresses_are_refused_unless_allowed() {
    let dir = TempDir::new("serve-private");
    // Only 10.9.0.0/16 permitted (no loopback, unlike the other tests).
    let c = start_coordinator(
        &["--allow-private", "10.9.0.0/16"],
        &dir.path().join("coordinator.log"),
    );
    let mut admin = AdminClient::connect(c.url.clone()).await.unwrap();
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.1:9/feed",
        "http://[::1]/feed",
        "http://[::ffff:10.0.0.1]/feed",
        "http://192.168.1.1/rss",
        "http://100.64.0.1/rss",
        "http://224.0.0.1/rss",
    ] {
        let e = admin.add_feed(add_feed("", url)).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{url}: {e:?}");
        assert!(e.message().contains("--allow-private"), "{url}: {e:?}");
    }
    // The permitted network, and host names (left to the workers' DNS checks), are taken.
    admin
        .add_feed(add_feed("inside", "http://10.9.1.2/rss"))
        .await
        .unwrap();
    admin
        .add_feed(add_feed("named", "https://news.example/feed.xml"))
        .await
        .unwrap();
    // In an OPML import the refused outline is skipped with its reason; the rest land.
    let opml = pb::ImportOpmlRequest {
        opml: r#"<opml version="2.0"><body><outline xmlUrl="http://169.254.169.254/latest/meta-data/"/><outline xmlUrl="https://a.example/rss"/></body></opml>"#.into(),
        user_id: String::new(),
    };
    let got = admin.import_opml(opml).await.unwrap().into_inner();
    assert_eq!(got.feeds_added, 1);
    assert_eq!(got.skipped.len(), 1);
    assert!(
        got.skipped[0].contains("169.254.169.254"),
        "{:?}",
        got.skipped
    );
    // None of the refused URLs is listed.
    let listed = admin
        .list_feeds(pb::ListFeedsRequest::default())
        .await
        .unwrap()
        .into_inner();
    let urls: Vec<String> = listed.feeds.iter().map(|f| f.url.clone()).collect();
    assert_eq!(urls.len(), 3, "{urls:?}");
    assert!(urls.iter().all(|u| !u.contains("169.254")), "{urls:?}");
}

/// A removed feed takes its learned state with it: the restarted server loads only the
/// kept feed's, and finds nothing left over to clean up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_feed_takes_its_learned_state_with_it() {
    let dir = TempDir::new("serve-remove");
    let data = dir.path().join("data");
    let data_arg = data.to_str().unwrap();
    let first = start_coordinator(
        &["--data-dir", data_arg],
        &dir.path().join("coordinator-1.log"),
    );
    let mut admin = AdminClient::connect(first.url.clone()).await.unwrap();
    for id in ["kept", "gone"] {
        admin
            .add_feed(add_feed(id, &format!("https://{id}.example/feed.xml")))
            .await
            .unwrap();
        // ResumeFeed stores a learned state for the feed (a cleared one).
        admin
            .resume_feed(pb::ResumeFeedRequest { feed_id: id.into() })
            .await
            .unwrap();
    }
    admin
        .remove_feed(pb::RemoveFeedRequest {
            feed_id: "gone".into(),
        })
        .await
        .unwrap();
    drop(admin);
    drop(first);
    let log = dir.path().join("coordinator-2.log");
    let _second = start_coordinator(&["--data-dir", data_arg], &log);
    let started = std::time::Instant::now();
    let loaded = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.contains("state loaded")) {
            assert!(
                !text.contains("no longer registered"),
                "the removal left learned state behind:\n{text}"
            );
            break line.to_string();
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "no start line in:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(loaded.contains("learned=1"), "{loaded}");
}
