//! Failing feeds and server hints through the real binaries: `serve` and one `kairos-worker`
//! fetch misbehaving loopback servers on a fast shared clock, and the Admin API and the
//! metrics must show a back-off that frees budget, a 410 that stops a feed, permanent
//! redirects that move or merge feeds, web pages followed to the feed they announce
//! (discovery, moving or merging the same way), publisher hints and a throttling host as
//! bounds on the plan.

mod common;

use common::wait_for;
use kairos_farm::fixtures::Fixtures;
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_tests::scenario::{Clock, Worker};
use kairos_tests::{sample, scrape, start_coordinator, TempDir};
use std::time::Duration;
use tonic::transport::Channel;
use tonic::Code;

const SCALE: f64 = 5760.0;

/// A feed with a six-hour `<ttl>` that asks not to be fetched from midnight to 05:59 UTC,
/// and names a WebSub hub (relative, resolved against the feed's URL) and its topic.
const HINTED: &str = r#"<?xml version="1.0"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel><title>h</title><ttl>360</ttl>
<atom:link rel="hub" href="/hub"/><atom:link rel="self" href="https://topic.example/h.xml"/>
<skipHours><hour>0</hour><hour>1</hour><hour>2</hour><hour>3</hour><hour>4</hour><hour>5</hour></skipHours>
<item><guid>h1</guid><title>one</title></item></channel></rss>"#;

/// A feed in a namespace nothing knows: its root parses, its two entries are not read.
/// Kairos must not call it a quiet feed.
const UNREADABLE: &str = r#"<?xml version="1.0"?><feed xmlns="http://example.org/not-a-feed-format">
<title>odd</title><entry><title>a</title><id>tag:a</id></entry><entry><title>b</title><id>tag:b</id></entry></feed>"#;

async fn get(admin: &mut AdminClient<Channel>, id: &str) -> Result<pb::Feed, tonic::Status> {
    admin
        .get_feed(pb::GetFeedRequest { feed_id: id.into() })
        .await
        .map(|r| r.into_inner())
}

async fn inspect(admin: &mut AdminClient<Channel>, id: &str) -> Result<pb::FeedPlanView, Code> {
    admin
        .inspect_feed_plan(pb::InspectFeedPlanRequest { feed_id: id.into() })
        .await
        .map(|r| r.into_inner())
        .map_err(|s| s.code())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_feeds_back_off_gone_stops_moves_follow_and_hints_bound_the_plan() {
    let dir = TempDir::new("feed-health");
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("hinted.xml"), HINTED).unwrap();
    std::fs::write(docs.join("unreadable.xml"), UNREADABLE).unwrap();
    std::fs::write(docs.join("announced.xml"), HINTED.replace("h1", "a1")).unwrap();
    // Web pages where feeds were registered: one announces a feed nobody registered, one
    // announces the feed registered as `ok` (relative and absolute links).
    std::fs::write(
        docs.join("blog.html"),
        r#"<!DOCTYPE html><html><head><link rel="stylesheet" href="/s.css">
<link rel="alternate" type="application/rss+xml" title="Posts" href="announced.xml"></head><body>blog</body></html>"#,
    )
    .unwrap();
    std::fs::write(
        docs.join("home.html"),
        r#"<html><head><link rel=alternate type=application/atom+xml href=/feed></head></html>"#,
    )
    .unwrap();
    // Two hosts: one with every kind of trouble but throttling, one that throttles.
    let a = Fixtures::start(Some(docs)).await.unwrap();
    let b = Fixtures::start(None).await.unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let sim = Clock::new(SCALE);
    let clock = sim.args();
    let mut args: Vec<String> = [
        "--data-dir",
        dir.path().join("data").to_str().unwrap(),
        "--fetches-per-feed-per-day",
        "48",
        "--replan-interval",
        "300ms",
        // The worker's gap: hosts are not the bottleneck here.
        "--host-gap",
        "5ms",
    ]
    .map(String::from)
    .to_vec();
    args.extend(clock.iter().cloned());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let coordinator = start_coordinator(&refs, &dir.path().join("coordinator.log"));
    let mut admin = AdminClient::connect(coordinator.url.clone()).await.unwrap();
    let feeds = [
        ("ok", a.url("/feed")),
        ("hinted", a.url("/s/hinted.xml")),
        ("unreadable", a.url("/s/unreadable.xml")),
        ("broken", a.url("/broken")),
        ("gone", a.url("/gone")),
        ("dup", a.url("/moved")),
        ("relocated", a.url("/old-home")),
        ("detour", a.url("/moved-then-temp")),
        ("blog", a.url("/s/blog.html")),
        ("home", a.url("/s/home.html")),
        ("throttler", b.url("/throttle")),
        ("b-ok", b.url("/feed")),
        // A third host that is down: nothing listens on its port.
        ("down-1", format!("http://{closed}/f1")),
        ("down-2", format!("http://{closed}/f2")),
        ("down-3", format!("http://{closed}/f3")),
    ];
    for (id, url) in &feeds {
        admin
            .add_feed(pb::AddFeedRequest {
                feed_id: id.to_string(),
                url: url.clone(),
                weight: 0.0,
            })
            .await
            .unwrap();
    }
    admin
        .add_user(pb::AddUserRequest {
            user_id: "ann".into(),
            weight: 1.0,
        })
        .await
        .unwrap();
    admin
        .subscribe(pb::SubscribeRequest {
            user_id: "ann".into(),
            feed_id: "dup".into(),
        })
        .await
        .unwrap();
    let _worker = Worker::new("w1", &coordinator.url, &sim).start(dir.path());

    // The duplicate (301 → 308 onto the registered `ok`) is merged into it: gone from the
    // registry, its subscriber now on `ok`.
    wait_for("the duplicate merged", Duration::from_secs(30), || {
        let mut admin = admin.clone();
        async move { (get(&mut admin, "dup").await.err()?.code() == Code::NotFound).then_some(()) }
    })
    .await;
    let subs = admin
        .list_subscriptions(pb::ListSubscriptionsRequest {
            scope: Some(pb::list_subscriptions_request::Scope::UserId("ann".into())),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        subs.subscriptions.iter().any(|s| s.feed_id == "ok"),
        "{subs:?}"
    );
    // A 308 to an unregistered URL moves the feed; a chain with a temporary hop does not.
    let moved = wait_for("the relocated feed's URL", Duration::from_secs(20), || {
        let mut admin = admin.clone();
        async move {
            let f = get(&mut admin, "relocated").await.ok()?;
            f.url.ends_with("/new-home").then_some(f)
        }
    })
    .await;
    assert_eq!(moved.status, "ok");
    // Discovery: the blog page's feed replaces its URL; the home page announces a feed that
    // is registered already, so it merges into it.
    let blog = wait_for("the blog page's feed", Duration::from_secs(20), || {
        let mut admin = admin.clone();
        async move {
            let f = get(&mut admin, "blog").await.ok()?;
            (f.url.ends_with("/s/announced.xml") && !f.format.is_empty()).then_some(f)
        }
    })
    .await;
    assert_eq!(blog.status, "ok");
    // What the feed says of itself, from its document.
    assert_eq!(
        (blog.title.as_str(), blog.format.as_str()),
        ("h", "rss-2.0")
    );
    wait_for("the home page merged", Duration::from_secs(20), || {
        let mut admin = admin.clone();
        async move { (get(&mut admin, "home").await.err()?.code() == Code::NotFound).then_some(()) }
    })
    .await;
    assert!(get(&mut admin, "detour")
        .await
        .unwrap()
        .url
        .ends_with("/moved-then-temp"));

    // 410: stopped, shown, no longer planned.
    let gone = wait_for("the 410 feed gone", Duration::from_secs(20), || {
        let mut admin = admin.clone();
        async move {
            get(&mut admin, "gone")
                .await
                .ok()
                .filter(|f| f.status == "gone")
        }
    })
    .await;
    assert!(gone.last_error.contains("410"), "{gone:?}");
    assert_eq!(
        inspect(&mut admin, "gone").await.unwrap_err(),
        Code::FailedPrecondition
    );

    // Let about a simulated half day pass (7.5 s), then bound the failures by the back-off
    // steps that fit in the simulated time actually elapsed (a slow machine stretches it).
    tokio::time::sleep(Duration::from_millis(7_500)).await;
    // Three tries (at 0, 1 and 3 h of back-off) come well within that on an idle machine;
    // a loaded one may start the feed's first fetch late, so wait for them (20 s more is
    // another 32 simulated hours) before bounding the count by the time that passed.
    let broken = wait_for(
        "three failures of the broken feed",
        Duration::from_secs(20),
        || {
            let mut admin = admin.clone();
            async move {
                get(&mut admin, "broken")
                    .await
                    .ok()
                    .filter(|f| f.consecutive_failures >= 3)
            }
        },
    )
    .await;
    let elapsed_h = (kairos_tests::unix_ms() - sim.anchor_ms) as f64 * SCALE / 3.6e6;
    let (mut at, mut gap, mut allowed) = (0.0, 1.0, 0u32);
    while at <= elapsed_h {
        allowed += 1;
        at += gap;
        gap = f64::min(gap * 2.0, 24.0);
    }
    assert_eq!(broken.status, "failing", "{broken:?}");
    // At 48 a day with a back-off from one hour doubling: tries at 0, 1, 3, 7, 15 h …, where
    // a healthy feed is fetched every half hour.
    let plan = inspect(&mut admin, "broken").await.unwrap();
    assert!(
        plan.constraints
            .iter()
            .any(|c| c.starts_with("back-off after")),
        "{plan:?}"
    );
    assert!(
        plan.max_fetches_per_day > 0.0 && plan.max_fetches_per_day <= 12.0,
        "{plan:?}"
    );
    assert!(
        broken.consecutive_failures >= 3 && broken.consecutive_failures <= allowed + 1,
        "{broken:?} after {elapsed_h:.1} simulated hours ({allowed} back-off steps)"
    );
    let metrics = scrape(&coordinator.metrics);
    let server_errors = sample(&metrics, "kairos_fetches_total{outcome=\"server_error\"}").unwrap();
    assert!(
        server_errors <= 7.0,
        "the back-off holds the broken feed: {server_errors}"
    );
    assert_eq!(sample(&metrics, "kairos_feeds{status=\"gone\"}"), Some(1.0));
    // `broken`, `unreadable` (whose items the parser cannot read: not an `ok` with no
    // items, but its own outcome, counted, backing off like a malformed feed) and the
    // down host's three.
    assert_eq!(
        sample(&metrics, "kairos_feeds{status=\"failing\"}"),
        Some(5.0)
    );
    assert!(
        sample(
            &metrics,
            "kairos_fetches_total{outcome=\"empty_unrecognized\"}"
        )
        .unwrap()
            >= 1.0
    );
    assert!(sample(&metrics, "kairos_items_unread_total").unwrap() >= 2.0);
    let unreadable = get(&mut admin, "unreadable").await.unwrap();
    assert!(
        unreadable
            .last_error
            .contains("2 item-like elements but no item read"),
        "{unreadable:?}"
    );
    assert_eq!(
        sample(&metrics, "kairos_feed_redirects_total{result=\"merged\"}"),
        Some(2.0)
    );
    assert_eq!(
        sample(&metrics, "kairos_feed_redirects_total{result=\"moved\"}"),
        Some(2.0)
    );
    assert!(
        sample(&metrics, "kairos_fetches_total{outcome=\"ok\"}").unwrap()
            + sample(&metrics, "kairos_fetches_total{outcome=\"not_modified\"}").unwrap_or(0.0)
            >= 30.0
    );
    // The gone feed was fetched once or twice (a fetch may have been under way).
    assert!(sample(&metrics, "kairos_fetches_total{outcome=\"client_error\"}").unwrap() <= 2.0);

    // Hints: ttl of 6 h bounds the feed to 4 a day; its fetches avoid 00:00-05:59.
    let hinted = inspect(&mut admin, "hinted").await.unwrap();
    assert_eq!(hinted.max_fetches_per_day, 4.0, "{hinted:?}");
    assert!(hinted.fetches_per_day <= 4.0 + 1e-9, "{hinted:?}");
    assert!(
        hinted.constraints.iter().any(|c| c.starts_with("ttl 6 h")),
        "{hinted:?}"
    );
    assert!(hinted
        .constraints
        .iter()
        .any(|c| c == "skipHours 0,1,2,3,4,5"));
    assert!(!hinted.fetch_offsets_seconds.is_empty());
    for t in &hinted.fetch_offsets_seconds {
        assert!(t.rem_euclid(86_400.0) >= 6.0 * 3600.0, "{hinted:?}");
    }
    // WebSub discovery: the hub and topic its document names, as an operator reads them.
    let h = get(&mut admin, "hinted").await.unwrap();
    assert_eq!(h.websub_hubs, vec![a.url("/hub")], "{h:?}");
    assert_eq!(h.websub_topic, "https://topic.example/h.xml");
    assert!(get(&mut admin, "ok").await.unwrap().websub_hubs.is_empty());
    let ok = inspect(&mut admin, "ok").await.unwrap();
    assert!(
        ok.constraints
            .iter()
            .any(|c| c.starts_with("Cache-Control max-age 10 min")),
        "{ok:?}"
    );
    // The throttling host is planned at a reduced share, and said so for its other feed.
    let b_ok = inspect(&mut admin, "b-ok").await.unwrap();
    assert!(
        b_ok.constraints.iter().any(|c| c.contains("throttled us")),
        "{b_ok:?}"
    );
    assert!(sample(&metrics, "kairos_hosts_throttled").unwrap() >= 1.0);
    assert_eq!(
        get(&mut admin, "throttler").await.unwrap().status,
        "new",
        "a throttle is the host's, not a feed failure"
    );

    // The host that refuses connections trips its breaker: all its feeds are held, and
    // the plan says why. At 5,760× the first hold (5 simulated minutes) lasts 52 ms of
    // wall time, so both are polled until a round falls inside a hold (each failed probe
    // doubles it).
    wait_for("the down host held", Duration::from_secs(30), || {
        let url = coordinator.metrics.clone();
        async move { (sample(&scrape(&url), "kairos_hosts_down")? >= 1.0).then_some(()) }
    })
    .await;
    wait_for(
        "the plan saying the host does not answer",
        Duration::from_secs(30),
        || {
            let mut admin = admin.clone();
            async move {
                let down = inspect(&mut admin, "down-2").await.ok()?;
                down.constraints
                    .iter()
                    .any(|c| c.contains("does not answer") && c.contains("network_error"))
                    .then_some(())
            }
        },
    )
    .await;
    let metrics = scrape(&coordinator.metrics);
    assert!(sample(&metrics, "kairos_host_breaker_events_total{event=\"down\"}").unwrap() >= 1.0);
    assert!(
        !ok.constraints.iter().any(|c| c.contains("does not answer")),
        "{ok:?}"
    );

    // An operator brings the gone feed back; it is planned (and soon gone again).
    let resumed = admin
        .resume_feed(pb::ResumeFeedRequest {
            feed_id: "gone".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(resumed.status, "gone");
    assert_eq!(
        admin
            .resume_feed(pb::ResumeFeedRequest {
                feed_id: "nope".into()
            })
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
}
