//! WebSub push through the real binaries: `kairos-farm` serves feeds of which about half
//! name its hub, `serve --push-listen` subscribes them through the worker, the hub verifies
//! and pushes, and pushed postings must reach the store within a few simulated minutes
//! while the feeds' polls turn into a check. A hub that signs with the wrong key must have
//! every delivery ignored, and lose nothing: the polls find those postings. A feed whose
//! first hub is down must move on to the next hub its document names.

mod common;

use common::{add_feeds, postings_of, wait_for};
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_proto::v1::postings_client::PostingsClient;
use kairos_tests::scenario::{Clock, Farm, FarmSpec, Worker};
use kairos_tests::{http_get, sample, scrape, start_coordinator, TempDir};
use std::time::Duration;
use tonic::transport::Channel;

/// One simulated day in a minute of wall time.
const SCALE: f64 = 1440.0;
const SEED: u64 = 11;
const FEEDS: usize = 16;

/// The hub's counter `name` from `/hub/stats`.
fn hub_stat(hub: &str, name: &str) -> u64 {
    let addr = hub
        .trim_start_matches("http://")
        .trim_end_matches("/hub")
        .to_string();
    let answer = http_get(&addr, "/hub/stats").unwrap_or_default();
    answer
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0)
}

/// Waits until the hub's counter `name` reaches `at_least`, for `what`.
async fn hub_reaches(hub: &str, name: &'static str, at_least: u64, what: &str, secs: u64) {
    wait_for(what, Duration::from_secs(secs), || {
        let hub = hub.to_string();
        async move { (hub_stat(&hub, name) >= at_least).then_some(()) }
    })
    .await;
}

async fn feed(admin: &mut AdminClient<Channel>, id: &str) -> pb::Feed {
    admin
        .get_feed(pb::GetFeedRequest { feed_id: id.into() })
        .await
        .unwrap()
        .into_inner()
}

struct Setup {
    _dir: TempDir,
    farm: Farm,
    coordinator: kairos_tests::Coordinator,
    _worker: kairos_tests::Child,
    on_hub: Vec<bool>,
    hub: String,
    admin: AdminClient<Channel>,
    clock: Clock,
}

impl Setup {
    /// The feeds naming the hub.
    fn hubbed(&self) -> Vec<usize> {
        (0..FEEDS).filter(|&i| self.on_hub[i]).collect()
    }

    /// The feeds naming the hub, once the hub has verified a subscription for each.
    async fn subscribed(&self) -> Vec<usize> {
        let hubbed = self.hubbed();
        let n = hubbed.len() as u64;
        hub_reaches(
            &self.hub,
            "verified",
            n,
            "every hubbed feed's subscription",
            60,
        )
        .await;
        hubbed
    }
}

async fn setup(name: &str, hub_flags: &[&str]) -> Setup {
    let dir = TempDir::new(name);
    let clock = Clock::new(SCALE);
    let spec = FarmSpec {
        feeds: FEEDS,
        hosts: 4,
        posts_per_day: 24.0,
        days: 2.0,
        seed: SEED,
        ..FarmSpec::default()
    };
    let mut extra = vec!["--hub-share", "0.5"];
    extra.extend_from_slice(hub_flags);
    let farm = Farm::start(dir.path(), &spec, &clock, &extra);
    let hub = farm.hub.clone().expect("the farm serves a hub");
    let on_hub = kairos_farm::hub::pick(FEEDS, 0.5, SEED);
    assert!(
        on_hub.iter().filter(|&&h| h).count() >= 3 && on_hub.iter().any(|&h| !h),
        "the draw puts some feeds on the hub and some off it: {on_hub:?}"
    );
    let mut args: Vec<String> = [
        "--data-dir",
        dir.path().join("data").to_str().unwrap(),
        "--fetches-per-feed-per-day",
        "4",
        "--replan-interval",
        "500ms",
        "--push-listen",
        "127.0.0.1:0",
    ]
    .map(String::from)
    .to_vec();
    args.extend(clock.args());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let coordinator = start_coordinator(&refs, &dir.path().join("coordinator.log"));
    let mut admin = AdminClient::connect(coordinator.url.clone()).await.unwrap();
    add_feeds(&mut admin, &farm.urls).await;
    let worker = Worker::new("w1", &coordinator.url, &clock).start(dir.path());
    Setup {
        _dir: dir,
        farm,
        coordinator,
        _worker: worker,
        on_hub,
        hub,
        admin,
        clock,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushed_postings_arrive_within_minutes_and_the_polls_become_a_check() {
    let mut s = setup("websub-push", &[]).await;
    // Every feed naming the hub is subscribed and verified through the worker.
    let hubbed = s.subscribed().await;
    wait_for(
        "the subscriptions shown active",
        Duration::from_secs(30),
        || {
            let mut admin = s.admin.clone();
            let hubbed = hubbed.clone();
            async move {
                for &i in &hubbed {
                    let f = feed(&mut admin, &format!("f{i}")).await;
                    if f.push_state != "active" {
                        return None;
                    }
                    assert_eq!(
                        f.push_hub, f.websub_hubs[0],
                        "subscribed at the hub the feed names"
                    );
                }
                Some(())
            }
        },
    )
    .await;
    // Postings published from ten simulated minutes after this are judged.
    let since_sim = s.clock.now_ms() + 10 * 60_000;
    // Feeds off the hub have no subscription.
    for i in (0..FEEDS).filter(|&i| !s.on_hub[i]) {
        let f = feed(&mut s.admin, &format!("f{i}")).await;
        assert_eq!(f.push_state, "", "f{i} names no hub");
        assert_eq!(f.push_poll_share, 1.0);
    }
    // Half a simulated day of deliveries.
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(hub_stat(&s.hub, "deliveries") > 0, "the hub delivered");
    let metrics = scrape(&s.coordinator.metrics);
    assert!(
        sample(&metrics, "kairos_push_requests_total{result=\"accepted\"}").unwrap_or(0.0) > 0.0,
        "deliveries accepted"
    );
    // Pushed postings: published after the subscriptions were active, in the store within
    // a few simulated minutes (the hub checks every 20 ms of wall time: 29 s simulated).
    let mut postings = PostingsClient::connect(s.coordinator.url.clone())
        .await
        .unwrap();
    let (mut pushed_delays, mut polled_delays) = (Vec::new(), Vec::new());
    for i in 0..FEEDS {
        for p in postings_of(&mut postings, &format!("f{i}")).await {
            let Some(published) = p.published_unix_ms else {
                continue;
            };
            if published < since_sim {
                continue;
            }
            let delay = p.discovered_unix_ms - published;
            if s.on_hub[i] {
                pushed_delays.push(delay);
            } else {
                polled_delays.push(delay);
            }
        }
    }
    pushed_delays.sort_unstable();
    assert!(
        pushed_delays.len() >= 5,
        "enough postings pushed to judge: {}",
        pushed_delays.len()
    );
    let p95 = pushed_delays[pushed_delays.len() * 95 / 100];
    assert!(
        p95 <= 5 * 60_000,
        "pushed postings reach the store within 5 simulated minutes at p95 (got {} s; all: {pushed_delays:?})",
        p95 / 1000
    );
    let mean = |v: &[i64]| v.iter().sum::<i64>() as f64 / v.len().max(1) as f64;
    assert!(
        mean(&polled_delays) > 10.0 * mean(&pushed_delays).max(1000.0),
        "polled postings wait far longer than pushed ones ({} s against {} s)",
        mean(&polled_delays) / 1000.0,
        mean(&pushed_delays) / 1000.0
    );
    // The hub delivers: its feeds' polls are planned for a small share of their postings,
    // and InspectFeedPlan says so.
    let i = hubbed[0];
    let f = feed(&mut s.admin, &format!("f{i}")).await;
    assert!(
        f.push_poll_share < 0.2,
        "a hub that delivers leaves its feeds' polls a check (poll share {})",
        f.push_poll_share
    );
    let view = s
        .admin
        .inspect_feed_plan(pb::InspectFeedPlanRequest {
            feed_id: format!("f{i}"),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        view.constraints
            .iter()
            .any(|c| c.starts_with("websub push active") && c.contains("polls are a check")),
        "InspectFeedPlan shows push: {:?}",
        view.constraints
    );
    let metrics = scrape(&s.coordinator.metrics);
    assert!(
        sample(&metrics, "kairos_push_subscriptions{state=\"active\"}").unwrap_or(0.0)
            >= hubbed.len() as f64
    );
    assert!(s.farm.postings() > 0);
    // A feed removed is unsubscribed at its hub, which verifies it with us and stops.
    let gone = hubbed[1];
    s.admin
        .remove_feed(pb::RemoveFeedRequest {
            feed_id: format!("f{gone}"),
        })
        .await
        .unwrap();
    hub_reaches(
        &s.hub,
        "unsubscribed",
        1,
        "the removed feed's unsubscription",
        30,
    )
    .await;
    assert_eq!(
        hub_stat(&s.hub, "subscriptions"),
        hubbed.len() as u64 - 1,
        "the hub holds the others' subscriptions only"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_signed_with_the_wrong_key_are_ignored_and_the_polls_lose_nothing() {
    let mut s = setup("websub-bad-signature", &["--hub-bad-signature"]).await;
    let hubbed = s.subscribed().await;
    hub_reaches(&s.hub, "deliveries", 3, "deliveries", 60).await;
    let metrics = scrape(&s.coordinator.metrics);
    assert_eq!(
        sample(&metrics, "kairos_push_requests_total{result=\"accepted\"}"),
        None,
        "no delivery with a wrong signature is taken"
    );
    assert!(
        sample(
            &metrics,
            "kairos_push_requests_total{result=\"signature_mismatch\"}"
        )
        .unwrap_or(0.0)
            >= 3.0,
        "each is counted as a mismatch"
    );
    // The polls still find every posting of the hubbed feeds: what was published half a
    // simulated day ago is all in the store.
    let mut postings = PostingsClient::connect(s.coordinator.url.clone())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(20)).await;
    // Every posting the hubbed feeds published before their last poll is in the store:
    // the polls found what the refused deliveries carried.
    let fetched = s.clock.now_ms() - 86_400_000 / 2;
    for &i in &hubbed {
        let stored = postings_of(&mut postings, &format!("f{i}")).await.len();
        let due = s
            .farm
            .published
            .get(&i)
            .map_or(0, |p| p.iter().filter(|&&t| t <= fetched).count());
        assert!(
            stored >= due,
            "f{i}: {stored} postings stored, {due} published half a simulated day ago"
        );
    }
    // The hub earns no credit: what the polls found first counts against it (a posting
    // the hub should have delivered: one at least the delivery grace older than the poll).
    // Which poll is the first to find such a posting depends on where each feed's times
    // fall, and a hubbed feed is polled about twice a day: a whole gap after its last fetch
    // at the latest (a simulated day is 60 s here), so the wait is bounded by that.
    let host = url_host(&s.hub);
    let by_poll = format!("kairos_push_first_seen_total{{by=\"poll\",hub=\"{host}\"}}");
    wait_for(
        "a posting the hub should have delivered first seen by a poll",
        Duration::from_secs(60),
        || {
            let metrics = scrape(&s.coordinator.metrics);
            let by_poll = by_poll.clone();
            async move { (sample(&metrics, &by_poll).unwrap_or(0.0) > 0.0).then_some(()) }
        },
    )
    .await;
    // Nothing was first seen pushed, and its feeds' polls are planned for more than the
    // prior's half.
    let metrics = scrape(&s.coordinator.metrics);
    assert_eq!(
        sample(
            &metrics,
            &format!("kairos_push_first_seen_total{{by=\"push\",hub=\"{host}\"}}")
        ),
        None
    );
    let f = feed(&mut s.admin, &format!("f{}", hubbed[0])).await;
    assert!(
        f.push_poll_share > 0.5,
        "a hub whose deliveries are all refused earns no credit (poll share {})",
        f.push_poll_share
    );
}

/// The host of a URL `http://HOST:PORT/...`.
fn url_host(url: &str) -> String {
    url.trim_start_matches("http://")
        .split([':', '/'])
        .next()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_that_denies_leaves_its_feeds_denied_and_polled_in_full() {
    let s = setup("websub-deny", &["--hub-deny"]).await;
    let hubbed = s.hubbed();
    hub_reaches(&s.hub, "denied", hubbed.len() as u64, "every denial", 60).await;
    wait_for("the denials shown", Duration::from_secs(30), || {
        let mut admin = s.admin.clone();
        let hubbed = hubbed.clone();
        async move {
            for &i in &hubbed {
                let f = feed(&mut admin, &format!("f{i}")).await;
                if f.push_state != "denied" {
                    return None;
                }
                assert_eq!(f.push_poll_share, 1.0, "a denied feed is polled in full");
            }
            Some(())
        }
    })
    .await;
    assert_eq!(hub_stat(&s.hub, "verified"), 0);
    // The gauge follows at the next tick of the subscriptions.
    wait_for(
        "the gauge of denied subscriptions",
        Duration::from_secs(10),
        || {
            let metrics = scrape(&s.coordinator.metrics);
            let n = hubbed.len() as f64;
            async move {
                (sample(&metrics, "kairos_push_subscriptions{state=\"denied\"}").unwrap_or(0.0)
                    >= n)
                    .then_some(())
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_that_is_down_is_left_for_the_next_hub_the_documents_name() {
    // The documents name a hub that answers every request 503 before the working one.
    let s = setup("websub-down-first", &["--hub-down-first"]).await;
    let hubbed = s.subscribed().await;
    let n = hubbed.len() as u64;
    let down = hub_stat(&s.hub, "down_requests");
    assert!(
        down >= 3 * n,
        "each feed tried the first hub three times before moving on ({down} requests for {n} feeds)"
    );
    let mut admin = s.admin.clone();
    for &i in &hubbed {
        let f = feed(&mut admin, &format!("f{i}")).await;
        assert_eq!(f.websub_hubs.len(), 2, "f{i} names both hubs");
        assert_eq!(
            (f.push_hub.as_str(), f.push_state.as_str()),
            (s.hub.as_str(), "active"),
            "f{i}"
        );
    }
    let metrics = scrape(&s.coordinator.metrics);
    assert_eq!(
        sample(&metrics, "kairos_push_hub_fallbacks_total"),
        Some(n as f64),
        "one move per feed, and none after the verification"
    );
    // The hub it moved to pushes.
    hub_reaches(
        &s.hub,
        "deliveries",
        1,
        "a delivery from the second hub",
        60,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_for_another_topic_are_ignored() {
    let s = setup("websub-wrong-topic", &["--hub-wrong-topic"]).await;
    hub_reaches(&s.hub, "deliveries", 3, "deliveries", 90).await;
    let metrics = scrape(&s.coordinator.metrics);
    assert!(
        sample(
            &metrics,
            "kairos_push_requests_total{result=\"wrong_topic\"}"
        )
        .unwrap_or(0.0)
            >= 3.0
    );
    assert_eq!(
        sample(&metrics, "kairos_push_requests_total{result=\"accepted\"}"),
        None,
        "content for another topic is never taken"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_leases_are_renewed_and_a_busy_hub_is_asked_again() {
    // Leases of two simulated hours (5 s of wall time), renewed when one is left; a third
    // of the requests answered 503 and retried after the back-off.
    let mut s = setup(
        "websub-leases",
        &[
            "--hub-lease-seconds",
            "7200",
            "--hub-unavailable-share",
            "0.3",
        ],
    )
    .await;
    let hubbed = s.hubbed();
    let n = hubbed.len() as u64;
    hub_reaches(&s.hub, "verified", 3 * n, "renewals", 90).await;
    let metrics = scrape(&s.coordinator.metrics);
    assert!(
        sample(
            &metrics,
            "kairos_push_hub_answers_total{answer=\"refused\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "some requests met a 503"
    );
    // Every hubbed feed is delivering: active, or renewing within its lease.
    for &i in &hubbed {
        let f = feed(&mut s.admin, &format!("f{i}")).await;
        assert!(
            matches!(f.push_state.as_str(), "active" | "renewing" | "failed"),
            "f{i}: {}",
            f.push_state
        );
    }
    assert!(
        hub_stat(&s.hub, "subscriptions") >= n - 1,
        "the hub holds live leases"
    );
}

/// The status of one raw HTTP/1.1 request to `addr` (0 when no status line came back).
fn raw(addr: &str, request: &str) -> u16 {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return 0;
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(request.as_bytes());
    let mut head = [0u8; 64];
    let n = s.read(&mut head).unwrap_or(0);
    std::str::from_utf8(&head[..n])
        .ok()
        .and_then(|h| h.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_to_the_callback_listener_are_refused_counted_and_store_nothing() {
    let dir = TempDir::new("websub-hostile");
    let coordinator = start_coordinator(
        &[
            "--data-dir",
            dir.path().join("data").to_str().unwrap(),
            "--push-listen",
            "127.0.0.1:0",
        ],
        &dir.path().join("coordinator.log"),
    );
    let push = coordinator
        .push
        .clone()
        .expect("the push listener's address");
    // Content for a callback nobody was given: 410, so a hub drops it.
    let body = "<feed/>";
    assert_eq!(
        raw(
            &push,
            &format!(
                "POST /websub/nobody HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nX-Hub-Signature: sha256=00\r\n\r\n{body}",
                body.len()
            )
        ),
        410
    );
    // A 100 MB body is refused from its declared length, before any of it is read.
    assert_eq!(
        raw(
            &push,
            "POST /websub/nobody HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n"
        ),
        413
    );
    // A verification of intent for a subscription never asked for: 404, the challenge not
    // echoed.
    assert_eq!(
        raw(
            &push,
            "GET /websub/abc?hub.mode=subscribe&hub.topic=https%3A%2F%2Fa.example%2F&hub.challenge=zz HTTP/1.1\r\nHost: x\r\n\r\n"
        ),
        404
    );
    // Nor an unsubscription nobody asked for, nor a path outside /websub/<id>.
    assert_eq!(
        raw(
            &push,
            "GET /websub/abc?hub.mode=unsubscribe&hub.topic=https%3A%2F%2Fa.example%2F&hub.challenge=zz HTTP/1.1\r\nHost: x\r\n\r\n"
        ),
        404
    );
    assert_eq!(
        raw(
            &push,
            "GET /websub/../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n"
        ),
        404
    );
    // A flood from one address: past its rate, 429.
    let mut limited = 0;
    for _ in 0..400 {
        if raw(
            &push,
            "POST /websub/nobody HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
        ) == 429
        {
            limited += 1;
        }
    }
    assert!(
        limited > 100,
        "a flood from one address is limited ({limited} of 400)"
    );
    let metrics = scrape(&coordinator.metrics);
    for (result, at_least) in [
        ("unknown_callback", 1.0),
        ("too_large", 1.0),
        ("verification_refused", 2.0),
        ("rate_limited", 100.0),
    ] {
        let n = sample(
            &metrics,
            &format!("kairos_push_requests_total{{result=\"{result}\"}}"),
        )
        .unwrap_or(0.0);
        assert!(n >= at_least, "{result}: {n}");
    }
    // Nothing was subscribed or stored.
    for state in [
        "requested",
        "active",
        "renewing",
        "expired",
        "denied",
        "failed",
    ] {
        assert_eq!(
            sample(
                &metrics,
                &format!("kairos_push_subscriptions{{state=\"{state}\"}}")
            )
            .unwrap_or(0.0),
            0.0,
            "{state}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_partial_deliveries_are_taken_once_and_dated_by_their_postings() {
    // The hub pushes only the new items, twenty simulated minutes after their publication.
    let s = setup(
        "websub-late-partial",
        &["--hub-partial", "--hub-lag-minutes", "20"],
    )
    .await;
    let hubbed = s.subscribed().await;
    let since = s.clock.now_ms() + 10 * 60_000;
    hub_reaches(&s.hub, "delivered_postings", 10, "deliveries", 60).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mut postings = PostingsClient::connect(s.coordinator.url.clone())
        .await
        .unwrap();
    let mut delays = Vec::new();
    for &i in &hubbed {
        let stored = postings_of(&mut postings, &format!("f{i}")).await;
        let mut ids: Vec<u64> = stored.iter().map(|p| p.item_id_hash).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), stored.len(), "f{i}: each posting stored once");
        for p in &stored {
            if let Some(t) = p.published_unix_ms.filter(|&t| t >= since) {
                delays.push(p.discovered_unix_ms - t);
            }
        }
    }
    assert!(
        delays.len() >= 5,
        "enough late deliveries to judge: {}",
        delays.len()
    );
    let pushed = delays
        .iter()
        .filter(|&&d| (20 * 60_000..=30 * 60_000).contains(&d))
        .count();
    assert!(
        pushed * 2 >= delays.len(),
        "most postings come with the late push, 20 to 30 simulated minutes after publication: {delays:?}"
    );
    let metrics = scrape(&s.coordinator.metrics);
    assert!(
        sample(&metrics, "kairos_push_requests_total{result=\"accepted\"}").unwrap_or(0.0) >= 1.0
    );
}
