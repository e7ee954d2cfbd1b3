//! Cluster mode with real processes on a private etcd: two coordinators elect one leader;
//! the standby answers UNAVAILABLE naming the leader and reports NOT_SERVING; a paused
//! leader loses the lead once its lease runs out, its successor serves the same state, and
//! the old leader, resumed, finds itself deposed, steps down (counted) and stands by; a
//! leader stopped cleanly resigns, and the standby takes over without waiting for the lease.

mod common;

use common::{add, feed_ids, health, signal, wait_health};
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_proto::v1::worker_control_client::WorkerControlClient;
use kairos_tests::etcd::EtcdCluster;
use kairos_tests::{http_status, sample, scrape, spawn_until, start_coordinator, TempDir};
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;

/// Waits until `url` reports `want`; returns how long it took.
async fn await_health(url: &str, want: ServingStatus, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if health(url, "").await == want as i32 {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{url} did not report {want:?} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A call to a standby: UNAVAILABLE, naming where the leader is.
async fn standby_answer(url: &str) -> tonic::Status {
    let mut admin = AdminClient::connect(url.to_string()).await.unwrap();
    admin
        .list_feeds(kairos_proto::v1::ListFeedsRequest::default())
        .await
        .expect_err("a standby does not serve Admin")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_fenced_failover_and_a_clean_handover() {
    let dir = TempDir::new("election");
    let Some(etcd) = EtcdCluster::start(dir.path(), 1) else {
        return;
    };
    let endpoints = etcd.endpoints.join(",");
    let args = [
        "--store",
        "etcd",
        "--etcd-endpoints",
        &endpoints,
        "--etcd-prefix",
        "/election/",
        "--leader-lease-ttl",
        "3s",
        // WebSub's callback listener: only the leader answers hubs.
        "--push-listen",
        "127.0.0.1:0",
    ];
    // A is alone: it is elected and serves.
    let a = start_coordinator(&args, &dir.path().join("coordinator-a.log"));
    let a_addr = a.url.trim_start_matches("http://").to_string();
    let mut admin = AdminClient::connect(a.url.clone()).await.unwrap();
    admin.add_feed(add("before")).await.unwrap();
    let a_scrape = scrape(&a.metrics);
    assert_eq!(sample(&a_scrape, "kairos_leader"), Some(1.0));
    let epoch_a = sample(&a_scrape, "kairos_leader_epoch").unwrap();
    assert!(epoch_a > 0.0, "{a_scrape}");

    // B stands by: every call UNAVAILABLE with A's address, health NOT_SERVING.
    let mut b_args = vec![
        "serve",
        "--insecure-loopback",
        "--listen",
        "127.0.0.1:0",
        "--metrics-addr",
        "127.0.0.1:0",
    ];
    b_args.extend_from_slice(&args);
    let (b, found) = spawn_until(
        "kairos-coordinator",
        &b_args,
        &dir.path().join("coordinator-b.log"),
        &[
            "kairos-coordinator standby on ",
            "kairos-coordinator metrics on ",
            "kairos-coordinator standby push on ",
        ],
    );
    let (b_url, b_metrics) = (format!("http://{}", found[0]), found[1].clone());
    let b_push = found[2].clone();
    // Hubs calling the standby are told to come back (503); the leader answers them (a
    // request without hub.mode: 400).
    assert_eq!(http_status(&b_push, "/websub/abc"), Some(503));
    assert_eq!(
        http_status(a.push.as_deref().expect("A's push listener"), "/websub/abc"),
        Some(400)
    );
    wait_health(
        &b_url,
        "",
        ServingStatus::NotServing,
        Duration::from_secs(5),
        Duration::from_millis(100),
    )
    .await;
    assert_eq!(
        health(&b_url, "kairos.v1.Admin").await,
        ServingStatus::NotServing as i32
    );
    // Alive all the same: the liveness probe's service answers SERVING on both roles.
    assert_eq!(
        health(&b_url, "kairos.liveness").await,
        ServingStatus::Serving as i32
    );
    assert_eq!(
        health(&a.url, "kairos.liveness").await,
        ServingStatus::Serving as i32
    );
    // The plain HTTP probes on the metrics listeners (for deployments whose gRPC ports
    // speak TLS): both alive, only the leader ready.
    assert_eq!(http_status(&a.metrics, "/readyz"), Some(200));
    assert_eq!(http_status(&b_metrics, "/readyz"), Some(503));
    assert_eq!(http_status(&b_metrics, "/livez"), Some(200));
    // The standby learns the leader's address within its poll (a second).
    let start = Instant::now();
    let e = loop {
        let e = standby_answer(&b_url).await;
        if e.message().contains(&a_addr) || start.elapsed() > Duration::from_secs(5) {
            break e;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(e.code(), Code::Unavailable, "{e:?}");
    assert!(e.message().contains(&a_addr), "{e:?}");
    assert_eq!(sample(&scrape(&b_metrics), "kairos_leader"), Some(0.0));

    // A is paused past its lease: B is elected, on the same address, with A's state.
    signal(a.child.0.id(), "-STOP");
    let took = await_health(&b_url, ServingStatus::Serving, Duration::from_secs(30)).await;
    eprintln!("B took over {took:?} after A was paused (lease TTL 3 s)");
    // Ready once its listeners are up, a moment after its health turned SERVING.
    let ready_by = Instant::now() + Duration::from_secs(5);
    while http_status(&b_metrics, "/readyz") != Some(200) && Instant::now() < ready_by {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(http_status(&b_metrics, "/readyz"), Some(200));
    // B, leading now, answers hubs on the port it stood by on.
    assert_eq!(http_status(&b_push, "/websub/abc"), Some(400));
    let mut admin_b = AdminClient::connect(b_url.clone()).await.unwrap();
    assert_eq!(
        feed_ids(&mut admin_b, 100).await,
        vec!["before".to_string()]
    );
    admin_b.add_feed(add("after")).await.unwrap();
    let b_scrape = scrape(&b_metrics);
    assert_eq!(sample(&b_scrape, "kairos_leader"), Some(1.0));
    let epoch_b = sample(&b_scrape, "kairos_leader_epoch").unwrap();
    assert!(epoch_b > epoch_a, "{b_scrape}");
    // Workers carry the epoch: a session on B gets B's; a report stamped with A's epoch is
    // refused whole (the worker registers again and resends), one with B's is taken.
    let mut control = WorkerControlClient::connect(b_url.clone()).await.unwrap();
    let reg = control
        .register(pb::RegisterRequest {
            worker_name: "w1".into(),
            capacity_fetches_per_second: 1.0,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reg.epoch as f64, epoch_b);
    let report = |epoch: f64| pb::ReportMessage {
        worker_id: reg.worker_id.clone(),
        seq: 1,
        epoch: epoch as u64,
        body: Some(pb::report_message::Body::Accesses(
            pb::AccessBatch::default(),
        )),
    };
    let stale = control
        .report(tokio_stream::iter(vec![report(epoch_a)]))
        .await
        .unwrap()
        .into_inner()
        .message()
        .await
        .unwrap_err();
    assert_eq!(stale.code(), Code::FailedPrecondition, "{stale:?}");
    let ack = control
        .report(tokio_stream::iter(vec![report(epoch_b)]))
        .await
        .unwrap()
        .into_inner()
        .message()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ack.acked_seq, 1);
    assert_eq!(
        sample(&scrape(&b_metrics), "kairos_reports_stale_epoch_total"),
        Some(1.0)
    );

    // A resumes believing it leads: it finds out, steps down and stands by, pointing at B.
    signal(a.child.0.id(), "-CONT");
    let b_addr = b_url.trim_start_matches("http://").to_string();
    let start = Instant::now();
    loop {
        if health(&a.url, "").await == ServingStatus::NotServing as i32 {
            let e = standby_answer(&a.url).await;
            if e.code() == Code::Unavailable && e.message().contains(&b_addr) {
                break;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "A did not stand by after it was resumed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        sample(&scrape(&a.metrics), "kairos_leader_stepdowns_total"),
        Some(1.0)
    );
    let log_a = std::fs::read_to_string(dir.path().join("coordinator-a.log")).unwrap();
    assert!(log_a.contains("stepping down"), "{log_a}");
    // Nothing A did while deposed reached etcd: B's view is whole.
    assert_eq!(
        feed_ids(&mut admin_b, 100).await,
        vec!["after".to_string(), "before".to_string()]
    );

    // B stops cleanly: it resigns, and A leads again well before a lease could expire.
    drop(admin_b);
    signal(b.0.id(), "-TERM");
    let took = await_health(&a.url, ServingStatus::Serving, Duration::from_secs(20)).await;
    eprintln!("A took over {took:?} after B resigned");
    let mut admin = AdminClient::connect(a.url.clone()).await.unwrap();
    assert_eq!(feed_ids(&mut admin, 100).await.len(), 2);
    // Elected again after it was deposed, A writes (its new fence holds) and stays leader.
    admin.add_feed(add("third")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(feed_ids(&mut admin, 100).await.len(), 3);
    assert_eq!(
        sample(&scrape(&a.metrics), "kairos_leader_stepdowns_total"),
        Some(1.0)
    );
    let log_b = std::fs::read_to_string(dir.path().join("coordinator-b.log")).unwrap();
    assert!(log_b.contains("elected leader"), "{log_b}");
}
