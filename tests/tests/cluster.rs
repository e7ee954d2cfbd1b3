//! The distributed runtime end to end, with real processes on loopback: a feed farm, a
//! coordinator (`serve` over an embedded store) and two workers (`kairos-worker run`), all
//! on one time-compressed clock (one simulated day per 15 s).
//!
//! * every posting the farm publishes appears exactly once through the Postings API, even
//!   though one worker is killed with SIGKILL halfway (its hosts move to the survivor), and
//!   a reader's postings page out by user exactly once;
//! * a coordinator killed and restarted on the same data dir still has the registry, the
//!   postings and the learned state.

mod common;

use common::{add_feeds, assert_every_posting_once, postings_of, wait_for, workers};
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_proto::v1::ingest_client::IngestClient;
use kairos_proto::v1::postings_client::PostingsClient;
use kairos_proto::v1::worker_control_client::WorkerControlClient;
use kairos_tests::scenario::{refs, Clock, Farm, FarmSpec, Worker};
use kairos_tests::{sample, scrape, start_coordinator, unix_ms, TempDir};
use std::time::{Duration, Instant};

const SCALE: f64 = 5760.0;
const FEEDS: usize = 24;
/// Simulated days during which the farm posts.
const POSTING_DAYS: f64 = 0.5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_posting_once_through_a_worker_kill_and_a_coordinator_restart() {
    let dir = TempDir::new("cluster");
    let sim = Clock::new(SCALE);
    let clock = sim.args();
    let spec = FarmSpec {
        feeds: FEEDS,
        days: POSTING_DAYS,
        ..FarmSpec::default()
    };
    let farm = Farm::start(dir.path(), &spec, &sim, &[]);
    let (urls, published, total) = (&farm.urls, &farm.published, farm.postings());
    assert!(total > 100, "the farm publishes enough to test ({total})");

    let data = dir.path().join("data");
    let data_arg = data.display().to_string();
    let mut coord_args: Vec<String> = [
        "--data-dir",
        &data_arg,
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
    let coordinator = start_coordinator(&refs(&coord_args), &dir.path().join("coordinator.log"));
    let mut admin = AdminClient::connect(coordinator.url.clone()).await.unwrap();
    add_feeds(&mut admin, urls).await;
    // A reader subscribed to the first six feeds.
    admin
        .add_user(pb::AddUserRequest {
            user_id: "ann".into(),
            weight: 1.0,
        })
        .await
        .unwrap();
    for i in 0..6 {
        admin
            .subscribe(pb::SubscribeRequest {
                user_id: "ann".into(),
                feed_id: format!("f{i}"),
            })
            .await
            .unwrap();
    }
    // w2 is given a dead address first (as a list of replicas): it must move on to the
    // live one.
    let w2_coordinators = format!("http://127.0.0.1:9,{}", coordinator.url);
    // w1 also takes reader access events at the edge and relays them.
    let (mut w1, found) = Worker::new("w1", &coordinator.url, &sim)
        .with(&["--ingest-listen", "127.0.0.1:0"])
        .start_until(dir.path(), &["kairos-worker ingest on "]);
    let w1_ingest = format!("http://{}", found[0]);
    let mut w2 = Worker::new("w2", &w2_coordinators, &sim).start(dir.path());

    // Both workers hold hosts once the feeds are planned.
    wait_for(
        "two workers sharing the hosts",
        Duration::from_secs(20),
        || {
            let mut admin = admin.clone();
            async move {
                let w = workers(&mut admin).await;
                (w.len() == 2
                    && w.iter().all(|w| w.hosts > 0)
                    && w.iter().map(|w| w.hosts).sum::<u32>() == 6)
                    .then_some(())
            }
        },
    )
    .await;
    // Let both fetch for a few simulated hours, then kill one without warning.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before_kill = scrape(&coordinator.metrics);
    assert!(sample(&before_kill, "kairos_fetches_total{outcome=\"ok\"}").unwrap_or(0.0) > 0.0);
    w2.0.kill().unwrap();
    let _ = w2.0.wait();
    wait_for(
        "the survivor to own every host",
        Duration::from_secs(20),
        || {
            let mut admin = admin.clone();
            async move {
                let w = workers(&mut admin).await;
                (w.len() == 1 && w[0].worker_name == "w1" && w[0].hosts == 6).then_some(())
            }
        },
    )
    .await;
    // The worker protocol refuses what it must: a bad registration, an unknown session, and
    // a report for a feed the reporting session does not own (refused in the ack, not stored).
    let mut control = WorkerControlClient::connect(coordinator.url.clone())
        .await
        .unwrap();
    let bad = control
        .register(pb::RegisterRequest {
            worker_name: "intruder".into(),
            capacity_fetches_per_second: 0.0,
            ingest_address: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    let unknown = control
        .heartbeat(pb::HeartbeatRequest {
            worker_id: "nobody#0".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    // A session with almost no capacity: it may or may not win a host, so report for a
    // feed on a host it does not hold.
    let intruder = control
        .register(pb::RegisterRequest {
            worker_name: "intruder".into(),
            capacity_fetches_per_second: 1e-9,
            ingest_address: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .worker_id;
    let views = workers(&mut admin).await;
    assert!(views.iter().any(|w| w.worker_id == intruder));
    let fake = pb::ReportMessage {
        worker_id: intruder.clone(),
        seq: 1,
        epoch: 0,
        body: Some(pb::report_message::Body::Fetch(pb::FetchReport {
            feed_id: "no-such-feed".into(),
            outcome: pb::FetchOutcome::Ok as i32,
            new_postings: vec![pb::Posting {
                item_id_hash: 42,
                discovered_unix_ms: 1,
                ..Default::default()
            }],
            ..Default::default()
        })),
    };
    let mut owned_elsewhere = fake.clone();
    owned_elsewhere.seq = 2;
    if let Some(pb::report_message::Body::Fetch(r)) = owned_elsewhere.body.as_mut() {
        r.feed_id = "f0".into();
    }
    let mut acks = control
        .report(tokio_stream::iter(vec![fake, owned_elsewhere]))
        .await
        .unwrap()
        .into_inner();
    let mut rejected = Vec::new();
    let mut acked = 0;
    while acked < 2 {
        let ack = acks.message().await.unwrap().expect("an acknowledgement");
        acked = ack.acked_seq;
        rejected.extend(ack.rejected);
    }
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert!(
        rejected[0].reason.contains("not in the plan"),
        "{rejected:?}"
    );
    assert!(
        rejected[1].reason.contains("not assigned to worker"),
        "{rejected:?}"
    );
    drop(acks);
    // Let the intruder's lease lapse so the survivor holds every host again.
    wait_for(
        "the intruder's lease to lapse",
        Duration::from_secs(20),
        || {
            let mut admin = admin.clone();
            async move {
                let w = workers(&mut admin).await;
                (w.len() == 1 && w[0].hosts == 6).then_some(())
            }
        },
    )
    .await;
    // Access events through the surviving worker's endpoint reach the coordinator, which
    // accepts the known reader's and counts the unknown one's.
    let sim_now = sim.now_ms();
    let ev = |user: &str| pb::AccessEvent {
        user_id: user.into(),
        feed_id: String::new(),
        unix_ms: sim_now,
    };
    let mut relay = IngestClient::connect(w1_ingest).await.unwrap();
    let queued = relay
        .record_accesses(pb::RecordAccessesRequest {
            events: vec![ev("ann"), ev("ann"), ev("ann"), ev("ghost")],
        })
        .await
        .unwrap()
        .into_inner()
        .accepted;
    assert_eq!(queued, 4);
    wait_for("relayed access events", Duration::from_secs(10), || {
        let text = scrape(&coordinator.metrics);
        async move {
            (sample(
                &text,
                "kairos_ingest_access_events_total{result=\"accepted\"}",
            ) == Some(3.0)
                && sample(
                    &text,
                    "kairos_ingest_access_events_total{result=\"unknown_user\"}",
                ) == Some(1.0))
            .then_some(())
        }
    })
    .await;
    // Run until the farm has been quiet for a simulated day: every feed is fetched at least
    // once a day (optimal schedules place those fetches where postings are expected, so a
    // quiet feed may wait most of a day), so each has been fetched since its last posting.
    let end = sim.anchor_ms + ((POSTING_DAYS + 1.1) * 86_400_000.0 / SCALE) as i64;
    let wait = (end - unix_ms()).max(0) as u64;
    tokio::time::sleep(Duration::from_millis(wait)).await;

    assert_every_posting_once(&coordinator.url, &farm, dir.path()).await;
    let mut postings = PostingsClient::connect(coordinator.url.clone())
        .await
        .unwrap();
    // Her postings, paged by user in discovery order: exactly those of her six feeds.
    let mut mine = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = postings
            .list_postings(pb::ListPostingsRequest {
                scope: Some(pb::list_postings_request::Scope::UserId("ann".into())),
                cursor: cursor.clone(),
                limit: 7,
            })
            .await
            .unwrap()
            .into_inner();
        mine.extend(page.postings);
        if page.next_cursor == cursor {
            break;
        }
        cursor = page.next_cursor;
    }
    let want: usize = (0..6).map(|i| published.get(&i).map_or(0, Vec::len)).sum();
    assert_eq!(mine.len(), want);
    assert!(mine
        .iter()
        .all(|p| ["f0", "f1", "f2", "f3", "f4", "f5"].contains(&p.feed_id.as_str())));
    let mut ids: Vec<(String, u64)> = mine
        .iter()
        .map(|p| (p.feed_id.clone(), p.posting.as_ref().unwrap().item_id_hash))
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), want, "no posting twice across pages");
    assert_eq!(
        postings
            .list_postings(pb::ListPostingsRequest {
                scope: Some(pb::list_postings_request::Scope::UserId("nobody".into())),
                cursor: String::new(),
                limit: 7,
            })
            .await
            .unwrap_err()
            .code(),
        tonic::Code::NotFound
    );
    let text = scrape(&coordinator.metrics);
    assert_eq!(sample(&text, "kairos_workers"), Some(1.0));
    assert!(
        sample(&text, "kairos_shard_moves_total").unwrap_or(0.0) >= 1.0,
        "{text}"
    );
    assert_eq!(
        sample(&text, "kairos_postings_ingested_total{result=\"new\"}"),
        Some(total as f64)
    );
    for name in [
        "kairos_fetch_lateness_seconds_count",
        "kairos_posting_delay_seconds_count",
        "kairos_plan_solve_seconds_count",
    ] {
        assert!(
            sample(&text, name).unwrap_or(0.0) > 0.0,
            "{name} in:\n{text}"
        );
    }
    let learned_before = admin
        .inspect_feed_plan(pb::InspectFeedPlanRequest {
            feed_id: "f0".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(learned_before.observed_postings > 0);

    // SIGTERM the surviving worker: it stops starting fetches, lets those in flight finish,
    // has every report acknowledged and exits cleanly within its drain timeout.
    let pid = w1.0.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let stopped = Instant::now();
    let status = loop {
        if let Some(status) = w1.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(30),
            "the worker did not stop after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = std::fs::read_to_string(dir.path().join("w1.log")).unwrap();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(log.contains("drained"), "{log}");
    let log = std::fs::read_to_string(dir.path().join("w2.log")).unwrap();
    assert!(
        log.contains("127.0.0.1:9") && log.contains("registered"),
        "w2 moved on from the dead address: {log}"
    );

    // Kill the coordinator outright and restart it on the same data dir.
    drop(admin);
    drop(postings);
    drop(coordinator);
    let restarted = start_coordinator(&refs(&coord_args), &dir.path().join("coordinator-2.log"));
    let mut admin = AdminClient::connect(restarted.url.clone()).await.unwrap();
    let view = wait_for(
        "the restarted coordinator's first plan",
        Duration::from_secs(10),
        || {
            let mut admin = admin.clone();
            async move {
                admin
                    .inspect_feed_plan(pb::InspectFeedPlanRequest {
                        feed_id: "f0".into(),
                    })
                    .await
                    .ok()
                    .map(|r| r.into_inner())
            }
        },
    )
    .await;
    assert!(
        view.observed_postings >= learned_before.observed_postings,
        "learned state survives: {} then {}",
        learned_before.observed_postings,
        view.observed_postings
    );
    let feeds = admin
        .list_feeds(pb::ListFeedsRequest::default())
        .await
        .unwrap()
        .into_inner()
        .feeds;
    assert_eq!(feeds.len(), FEEDS);
    let mut postings = PostingsClient::connect(restarted.url.clone())
        .await
        .unwrap();
    let mut after = 0;
    for i in published.keys() {
        after += postings_of(&mut postings, &format!("f{i}")).await.len();
    }
    assert_eq!(after, total, "postings survive the restart");
}
