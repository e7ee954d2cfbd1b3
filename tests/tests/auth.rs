//! Credentials, as an attacker on the network would try them, against the real binaries:
//! `serve` refuses to start open on a network, every role's calls need a token with the
//! right scope (`UNAUTHENTICATED` / `PERMISSION_DENIED`, nothing changed), roles can be split
//! over listeners, a worker token registers only its own name at a capped capacity and
//! touches only its own sessions, and a rotated token file takes effect without a restart.

mod common;

use common::with_token;
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_proto::v1::postings_client::PostingsClient;
use kairos_proto::v1::worker_control_client::WorkerControlClient;
use kairos_tests::{coordinator, scrape, spawn_until, TempDir};
use std::time::{Duration, Instant};
use tonic::Code;

const OPS: &str = "ops-0123456789abcdefghijklmnop";
const DASH: &str = "dash-0123456789abcdefghijklmno";
const READER: &str = "reader-0123456789abcdefghijklm";
const W1: &str = "w1-0123456789abcdefghijklmnopq";

#[test]
fn serve_refuses_to_start_open_on_a_network() {
    let dir = TempDir::new("auth-start");
    let base = ["serve", "--metrics-addr", "127.0.0.1:0"];
    let run = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let o = coordinator(&args);
        assert!(!o.status.success(), "{extra:?} started");
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let err = run(&["--listen", "127.0.0.1:0"]);
    assert!(err.contains("no credentials configured"), "{err}");
    let err = run(&["--listen", "0.0.0.0:0", "--insecure-loopback"]);
    assert!(err.contains("not loopback"), "{err}");
    let err = run(&[
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "0.0.0.0:0",
        "--insecure-loopback",
    ]);
    assert!(err.contains("not loopback"), "{err}");
    dir.write("short", "ops admin:read short\n");
    let short = dir.path().join("short");
    let err = run(&[
        "--listen",
        "127.0.0.1:0",
        "--tokens",
        short.to_str().unwrap(),
    ]);
    assert!(err.contains("line 1"), "{err}");
    let err = run(&["--listen", "127.0.0.1:0", "--tokens", "/nonexistent/tokens"]);
    assert!(err.contains("token file"), "{err}");
    // The README's main job stays open, and therefore on loopback.
    let o = coordinator(&["standalone", "--demo", "--listen", "0.0.0.0:0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("loopback only"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_needs_a_token_with_its_scope() {
    let dir = TempDir::new("auth-roles");
    dir.write(
        "tokens",
        &format!(
            "# name scopes token\nops admin:read,admin:write {OPS}\ndash admin:read {DASH}\nreader ingest,postings {READER}\nw1 worker {W1}\n"
        ),
    );
    let tokens = dir.path().join("tokens");
    let (_child, found) = spawn_until(
        "kairos-coordinator",
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--public-listen",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--tokens",
            tokens.to_str().unwrap(),
            "--max-worker-capacity",
            "50",
        ],
        &dir.path().join("coordinator.log"),
        &[
            "kairos-coordinator admin on ",
            "kairos-coordinator public on ",
            "kairos-coordinator listening on ",
            "kairos-coordinator metrics on ",
        ],
    );
    let (admin_url, public_url, worker_url) = (
        format!("http://{}", found[0]),
        format!("http://{}", found[1]),
        format!("http://{}", found[2]),
    );
    let mut admin = AdminClient::connect(admin_url.clone()).await.unwrap();
    let list = || pb::ListFeedsRequest::default();
    let add = || pb::AddFeedRequest {
        feed_id: "news".into(),
        url: "https://news.example/feed.xml".into(),
        weight: 0.0,
    };

    // Health is open on every listener (probes carry no credentials).
    for url in [&admin_url, &public_url, &worker_url] {
        let channel = tonic::transport::Channel::from_shared(url.clone())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
        health
            .check(tonic_health::pb::HealthCheckRequest::default())
            .await
            .unwrap_or_else(|e| panic!("health on {url}: {e}"));
    }

    // Admin: no token, an unknown token, a read token writing; nothing is stored.
    let code = |r: Result<tonic::Response<pb::Feed>, tonic::Status>| r.unwrap_err().code();
    assert_eq!(code(admin.add_feed(add()).await), Code::Unauthenticated);
    assert_eq!(
        code(
            admin
                .add_feed(with_token(add(), "not-a-token-0123456789abcdef"))
                .await
        ),
        Code::Unauthenticated
    );
    assert_eq!(
        code(admin.add_feed(with_token(add(), DASH)).await),
        Code::PermissionDenied
    );
    assert_eq!(
        code(admin.add_feed(with_token(add(), READER)).await),
        Code::PermissionDenied
    );
    let feeds = admin.list_feeds(with_token(list(), DASH)).await.unwrap();
    assert!(
        feeds.into_inner().feeds.is_empty(),
        "a refused call stored nothing"
    );
    admin.add_feed(with_token(add(), OPS)).await.unwrap();
    assert_eq!(
        admin
            .list_feeds(with_token(list(), DASH))
            .await
            .unwrap()
            .into_inner()
            .feeds
            .len(),
        1
    );

    // Roles live on their own listeners: no Admin on the worker port or the public one.
    for url in [&worker_url, &public_url] {
        let mut elsewhere = AdminClient::connect(url.clone()).await.unwrap();
        assert_eq!(
            elsewhere
                .list_feeds(with_token(list(), OPS))
                .await
                .unwrap_err()
                .code(),
            Code::Unimplemented,
            "{url}"
        );
    }

    // Postings: the reader's token, not an admin's.
    let mut postings = PostingsClient::connect(public_url.clone()).await.unwrap();
    let by_feed = || pb::ListPostingsRequest {
        scope: Some(pb::list_postings_request::Scope::FeedId("news".into())),
        ..Default::default()
    };
    assert_eq!(
        postings.list_postings(by_feed()).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    assert_eq!(
        postings
            .list_postings(with_token(by_feed(), OPS))
            .await
            .unwrap_err()
            .code(),
        Code::PermissionDenied
    );
    postings
        .list_postings(with_token(by_feed(), READER))
        .await
        .unwrap();

    // Workers: a worker token registers its own name only, at a capped capacity, and may
    // not heartbeat another worker's session; other tokens cannot register at all.
    let mut control = WorkerControlClient::connect(worker_url.clone())
        .await
        .unwrap();
    let register = |name: &str, capacity: f64| pb::RegisterRequest {
        worker_name: name.into(),
        capacity_fetches_per_second: capacity,
        ingest_address: String::new(),
    };
    assert_eq!(
        control
            .register(register("w1", 1.0))
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    assert_eq!(
        control
            .register(with_token(register("w1", 1.0), OPS))
            .await
            .unwrap_err()
            .code(),
        Code::PermissionDenied
    );
    assert_eq!(
        control
            .register(with_token(register("real-worker", 1.0), W1))
            .await
            .unwrap_err()
            .code(),
        Code::PermissionDenied
    );
    let reg = control
        .register(with_token(register("w1", 1e308), W1))
        .await
        .unwrap()
        .into_inner();
    let workers = admin
        .list_workers(with_token(pb::ListWorkersRequest::default(), DASH))
        .await
        .unwrap()
        .into_inner()
        .workers;
    assert_eq!(workers.len(), 1);
    assert_eq!(workers[0].capacity_fetches_per_second, 50.0, "capped");
    let beat = |id: &str| pb::HeartbeatRequest {
        worker_id: id.into(),
        ..Default::default()
    };
    control
        .heartbeat(with_token(beat(&reg.worker_id), W1))
        .await
        .unwrap();
    assert_eq!(
        control
            .heartbeat(with_token(beat("real-worker#1"), W1))
            .await
            .unwrap_err()
            .code(),
        Code::PermissionDenied
    );

    // The real worker binary with its token file registers; with another's name it cannot.
    dir.write("w1.token", &format!("{W1}\n"));
    let token_file = dir.path().join("w1.token");
    let worker = |name: &str, log: &str| {
        let mut cmd = std::process::Command::new(kairos_tests::bin("kairos-worker"));
        cmd.args([
            "run",
            "--coordinator",
            &worker_url,
            "--name",
            name,
            "--token-file",
            token_file.to_str().unwrap(),
        ]);
        cmd.stdout(std::process::Stdio::null());
        cmd.stderr(std::fs::File::create(dir.path().join(log)).unwrap());
        kairos_tests::Child(cmd.spawn().unwrap())
    };
    let _impostor = worker("impostor", "impostor.log");
    let _w1 = worker("w1", "w1.log");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let workers = admin
            .list_workers(with_token(pb::ListWorkersRequest::default(), DASH))
            .await
            .unwrap()
            .into_inner()
            .workers;
        // The test's own w1 session was replaced by the real worker's (same name).
        if workers
            .iter()
            .any(|w| w.worker_name == "w1" && w.worker_id != reg.worker_id)
        {
            assert!(
                workers.iter().all(|w| w.worker_name != "impostor"),
                "{workers:?}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the worker did not register: {workers:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // The worker's public ingest endpoint takes the same tokens: a reader app's `ingest`
    // token, not nothing and not a worker's.
    let (_ingest_worker, ingest) = spawn_until(
        "kairos-worker",
        &[
            "run",
            "--coordinator",
            &worker_url,
            "--name",
            "w1",
            "--token-file",
            token_file.to_str().unwrap(),
            "--ingest-listen",
            "127.0.0.1:0",
            "--ingest-tokens",
            tokens.to_str().unwrap(),
        ],
        &dir.path().join("ingest-worker.log"),
        &["kairos-worker ingest on "],
    );
    let mut relay =
        kairos_proto::v1::ingest_client::IngestClient::connect(format!("http://{}", ingest[0]))
            .await
            .unwrap();
    let events = || pb::RecordAccessesRequest {
        events: vec![pb::AccessEvent {
            user_id: "u".into(),
            feed_id: String::new(),
            unix_ms: 0,
        }],
    };
    assert_eq!(
        relay.record_accesses(events()).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    assert_eq!(
        relay
            .record_accesses(with_token(events(), W1))
            .await
            .unwrap_err()
            .code(),
        Code::PermissionDenied
    );
    relay
        .record_accesses(with_token(events(), READER))
        .await
        .unwrap();
    // Open to the network without tokens: refused at start.
    let o = std::process::Command::new(kairos_tests::bin("kairos-worker"))
        .args([
            "run",
            "--coordinator",
            &worker_url,
            "--ingest-listen",
            "0.0.0.0:0",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--ingest-tokens"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Rotation: the dashboard's token gains write access, without a restart.
    dir.write(
        "tokens",
        &format!(
            "ops admin:read,admin:write {OPS}\ndash admin:read,admin:write {DASH}\nreader ingest,postings {READER}\nw1 worker {W1}\n# rotated\n"
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let second = || pb::AddFeedRequest {
        feed_id: "second".into(),
        url: "https://second.example/feed.xml".into(),
        weight: 0.0,
    };
    while let Err(e) = admin.add_feed(with_token(second(), DASH)).await {
        assert_eq!(e.code(), Code::PermissionDenied);
        assert!(Instant::now() < deadline, "the token file was not reloaded");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Refusals are counted.
    let metrics = scrape(&found[3]);
    let refused = kairos_tests::sample(
        &metrics,
        "kairos_auth_refusals_total{reason=\"permission_denied\"}",
    )
    .unwrap_or(0.0);
    assert!(refused >= 5.0, "{refused}");
}
