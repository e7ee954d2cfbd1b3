//! Reader tokens that mean what they say, against the real coordinator: a token bound to a
//! user (`user:ID` in the token file) reads only that user's postings and sends only their
//! accesses, and gets the same answer for another user whether or not that user exists; an
//! unbound reader token acts for every user (documented); a worker-only token's accesses in
//! its report stream are acknowledged and not recorded.

mod common;

use common::with_token;
use kairos_proto::v1 as pb;
use kairos_proto::v1::admin_client::AdminClient;
use kairos_proto::v1::ingest_client::IngestClient;
use kairos_proto::v1::postings_client::PostingsClient;
use kairos_proto::v1::worker_control_client::WorkerControlClient;
use kairos_tests::{sample, scrape, spawn_until, unix_ms, TempDir};
use std::time::Duration;
use tonic::Code;

const OPS: &str = "ops-0123456789abcdefghijklmnop";
const ALL: &str = "all-0123456789abcdefghijklmnop";
const ALICE: &str = "alice-0123456789abcdefghijklmn";
const W1: &str = "w1-0123456789abcdefghijklmnopq";

fn by_user(user: &str) -> pb::ListPostingsRequest {
    pb::ListPostingsRequest {
        scope: Some(pb::list_postings_request::Scope::UserId(user.into())),
        ..Default::default()
    }
}

fn access(user: &str) -> pb::RecordAccessesRequest {
    pb::RecordAccessesRequest {
        events: vec![pb::AccessEvent {
            user_id: user.into(),
            feed_id: "news".into(),
            unix_ms: unix_ms(),
        }],
    }
}

fn accepted(metrics: &str) -> f64 {
    sample(
        &scrape(metrics),
        "kairos_ingest_access_events_total{result=\"accepted\"}",
    )
    .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reader_tokens_act_only_for_their_users_and_worker_tokens_send_no_accesses() {
    let dir = TempDir::new("reader-scopes");
    dir.write(
        "tokens",
        &format!(
            "ops admin:read,admin:write {OPS}\nall ingest,postings {ALL}\nalice-app ingest,postings,user:alice {ALICE}\nw1 worker {W1}\n"
        ),
    );
    let tokens = dir.path().join("tokens");
    let (_child, found) = spawn_until(
        "kairos-coordinator",
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--tokens",
            tokens.to_str().unwrap(),
            "--allow-private",
            "127.0.0.0/8",
        ],
        &dir.path().join("coordinator.log"),
        &[
            "kairos-coordinator listening on ",
            "kairos-coordinator metrics on ",
        ],
    );
    let url = format!("http://{}", found[0]);
    let metrics = found[1].clone();
    let mut admin = AdminClient::connect(url.clone()).await.unwrap();
    admin
        .add_feed(with_token(
            pb::AddFeedRequest {
                feed_id: "news".into(),
                url: "http://127.0.0.1:9/news".into(),
                weight: 0.0,
            },
            OPS,
        ))
        .await
        .unwrap();
    for user in ["alice", "bob"] {
        admin
            .add_user(with_token(
                pb::AddUserRequest {
                    user_id: user.into(),
                    weight: 1.0,
                },
                OPS,
            ))
            .await
            .unwrap();
        admin
            .subscribe(with_token(
                pb::SubscribeRequest {
                    user_id: user.into(),
                    feed_id: "news".into(),
                },
                OPS,
            ))
            .await
            .unwrap();
    }

    // Postings: alice's token reads alice; bob (who exists) and nobody (who does not) get
    // the same answer; by feed it may not read.
    let mut postings = PostingsClient::connect(url.clone()).await.unwrap();
    postings
        .list_postings(with_token(by_user("alice"), ALICE))
        .await
        .expect("alice's own postings");
    let bob = postings
        .list_postings(with_token(by_user("bob"), ALICE))
        .await
        .unwrap_err();
    let nobody = postings
        .list_postings(with_token(by_user("nobody"), ALICE))
        .await
        .unwrap_err();
    assert_eq!(bob.code(), Code::PermissionDenied);
    assert_eq!(
        (bob.code(), bob.message()),
        (nobody.code(), nobody.message()),
        "an existing and a missing user answer alike"
    );
    let by_feed = pb::ListPostingsRequest {
        scope: Some(pb::list_postings_request::Scope::FeedId("news".into())),
        ..Default::default()
    };
    assert_eq!(
        postings
            .list_postings(with_token(by_feed.clone(), ALICE))
            .await
            .unwrap_err()
            .code(),
        Code::PermissionDenied
    );
    // The unbound token acts for every user (and so may tell who exists).
    postings
        .list_postings(with_token(by_user("bob"), ALL))
        .await
        .expect("an unbound token reads any user");
    postings
        .list_postings(with_token(by_feed, ALL))
        .await
        .expect("and any feed");
    assert_eq!(
        postings
            .list_postings(with_token(by_user("nobody"), ALL))
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );

    // Accesses: alice's token records alice's; bob's and nobody's are refused alike.
    let mut ingest = IngestClient::connect(url.clone()).await.unwrap();
    let before = accepted(&metrics);
    ingest
        .record_accesses(with_token(access("alice"), ALICE))
        .await
        .expect("alice's own access");
    let bob = ingest
        .record_accesses(with_token(access("bob"), ALICE))
        .await
        .unwrap_err();
    let nobody = ingest
        .record_accesses(with_token(access("nobody"), ALICE))
        .await
        .unwrap_err();
    assert_eq!(bob.code(), Code::InvalidArgument);
    assert_eq!(
        (bob.code(), bob.message()),
        (nobody.code(), nobody.message()),
        "an existing and a missing user answer alike"
    );
    // On a stream, bob's event is skipped like an unknown user's.
    let streamed = ingest
        .stream_accesses(with_token(
            tokio_stream::iter(vec![access("alice"), access("bob"), access("nobody")]),
            ALICE,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(streamed.accepted, 1);
    assert_eq!(
        accepted(&metrics) - before,
        2.0,
        "alice's two, nothing else"
    );

    // A worker-only token: accesses in its own report stream are acknowledged, not recorded.
    let mut control = WorkerControlClient::connect(url.clone()).await.unwrap();
    let worker_id = control
        .register(with_token(
            pb::RegisterRequest {
                worker_name: "w1".into(),
                capacity_fetches_per_second: 10.0,
                ingest_address: String::new(),
            },
            W1,
        ))
        .await
        .unwrap()
        .into_inner()
        .worker_id;
    let before = accepted(&metrics);
    let forged = pb::ReportMessage {
        worker_id: worker_id.clone(),
        seq: 1,
        epoch: 0,
        body: Some(pb::report_message::Body::Accesses(pb::AccessBatch {
            events: (0..50).map(|_| access("bob").events[0].clone()).collect(),
        })),
    };
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(forged).await.unwrap();
    let mut acks = control
        .report(with_token(
            tokio_stream::wrappers::ReceiverStream::new(rx),
            W1,
        ))
        .await
        .unwrap()
        .into_inner();
    let ack = tokio::time::timeout(Duration::from_secs(10), acks.message())
        .await
        .expect("an acknowledgement")
        .unwrap()
        .expect("the stream goes on");
    assert_eq!(ack.acked_seq, 1, "acknowledged, so the worker moves on");
    drop(tx);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(accepted(&metrics), before, "and not one access recorded");
}
