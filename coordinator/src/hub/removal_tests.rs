//! What removing a feed or a user leaves in the store: nothing of theirs that only they
//! would read, and a hub's start clears what an earlier removal (or a race with one) left.

use crate::access::AccessEvent;
use crate::store::keys::Key;
use crate::store::memory::MemoryBackend;
use crate::store::{KvBackend, Op};
use kairos_proto::v1 as pb;
use kairos_runtime::clock::SimClock;
use std::sync::Arc;

async fn stored(store: &MemoryBackend, key: Key<'_>) -> bool {
    store.get(key.encode().unwrap()).await.unwrap().is_some()
}

/// The tests' clock reading.
const T0: i64 = 1_772_409_600_000;

/// A hub over an empty in-memory store (kept beside it for inspection), with feeds `kept`
/// and `gone` registered.
async fn hub_with_two_feeds() -> (Arc<MemoryBackend>, super::Hub<Arc<MemoryBackend>>) {
    let store = Arc::new(MemoryBackend::new());
    let hub = super::open_for_tests(Arc::new(store.clone()), SimClock::manual(T0)).await;
    for f in ["kept", "gone"] {
        hub.add_feed(Some(f), &format!("https://{f}.example/rss"), 1.0)
            .await
            .unwrap();
    }
    (store, hub)
}

#[test]
fn removal_deletes_learned_state_and_histograms_and_a_start_clears_leftovers() {
    super::test_runtime().block_on(async {
        let (store, hub) = hub_with_two_feeds().await;
        let (t0, clock) = (T0, SimClock::manual(T0));
        for f in ["kept", "gone"] {
            // ResumeFeed stores a (cleared) learned state.
            hub.resume_feed(f).await.unwrap();
        }
        for u in ["stays", "leaves"] {
            hub.add_user(u, 1.0).await.unwrap();
            let c = hub
                .record_access(vec![AccessEvent {
                    user_id: u.into(),
                    feed_id: "kept".into(),
                    unix_ms: t0 - 3_600_000,
                }])
                .await;
            assert_eq!(c.accepted, 1);
        }
        assert_eq!(hub.persist_access().await.unwrap(), 2);
        assert!(stored(&store, Key::Learned("gone")).await);
        assert!(stored(&store, Key::Access("leaves")).await);

        hub.remove_feed("gone").await.unwrap();
        hub.remove_user("leaves").await.unwrap();
        assert!(!stored(&store, Key::Learned("gone")).await);
        assert!(!stored(&store, Key::Access("leaves")).await);
        assert!(stored(&store, Key::Learned("kept")).await);
        assert!(stored(&store, Key::Access("stays")).await);
        let in_memory = hub
            .with_state(|s| (s.feeds.contains_key("gone"), s.feeds.contains_key("kept")))
            .await;
        assert_eq!(in_memory, (false, true));
        drop(hub);

        // Left over by a store from before, or by a write racing a removal.
        let copy = |from: Key<'_>| {
            let store = store.clone();
            let from = from.encode().unwrap();
            async move { store.get(from).await.unwrap().unwrap() }
        };
        let (learned, access) = (
            copy(Key::Learned("kept")).await,
            copy(Key::Access("stays")).await,
        );
        store
            .batch(vec![
                Op::Put(Key::Learned("ghost").encode().unwrap(), learned),
                Op::Put(Key::Access("phantom").encode().unwrap(), access),
            ])
            .await
            .unwrap();
        let hub = super::open_for_tests(Arc::new(store.clone()), clock).await;
        assert!(!stored(&store, Key::Learned("ghost")).await);
        assert!(!stored(&store, Key::Access("phantom")).await);
        assert!(stored(&store, Key::Learned("kept")).await);
        assert!(stored(&store, Key::Access("stays")).await);
        let in_memory = hub.with_state(|s| s.feeds.len()).await;
        assert_eq!(in_memory, 1, "only the registered feed's state loads");
    });
}

/// A report of a feed: answered at `at_ms`, finding item `item`.
fn report(worker: &str, seq: u64, feed: &str, item: u64, at_ms: i64) -> pb::ReportMessage {
    pb::ReportMessage {
        worker_id: worker.into(),
        seq,
        body: Some(pb::report_message::Body::Fetch(pb::FetchReport {
            feed_id: feed.into(),
            started_unix_ms: at_ms - 1_000,
            finished_unix_ms: at_ms,
            outcome: pb::FetchOutcome::Ok as i32,
            http_status: 200,
            new_postings: vec![pb::Posting {
                item_id_hash: item,
                discovered_unix_ms: at_ms,
                published_unix_ms: Some(at_ms - 60_000),
                ..Default::default()
            }],
            ..Default::default()
        })),
        ..Default::default()
    }
}

async fn keys_under(store: &MemoryBackend, prefix: Vec<u8>) -> Vec<Vec<u8>> {
    let rows = store.range(prefix, None, 1000).await.unwrap();
    rows.into_iter().map(|(k, _)| k).collect()
}

/// Removal deletes the feed's stored postings and item markers, keeping only its posting
/// number; a report checked before the removal but written after it writes nothing back;
/// the id registered again is a new feed whose postings take new numbers.
#[test]
fn removal_takes_postings_and_markers_and_a_report_in_flight_writes_nothing_back() {
    super::test_runtime().block_on(async {
        let (store, hub) = hub_with_two_feeds().await;
        let t0 = T0;
        let (w, _) = hub.register("w", 1.0).await.unwrap();
        hub.heartbeat(&w, 0).await.unwrap();
        hub.replan().await.unwrap();
        let mut seq = 0;
        for (i, f) in ["kept", "gone", "gone"].iter().enumerate() {
            seq += 1;
            let ack = hub
                .handle_reports(&w, vec![report(&w, seq, f, 10 + i as u64, t0 + 1_000)])
                .await
                .unwrap();
            assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
        }
        let gone_posts = Key::Posting("gone", 0).prefix().unwrap();
        assert_eq!(keys_under(&store, gone_posts.clone()).await.len(), 2);
        let seen = |store: Arc<MemoryBackend>, f: &'static str| async move {
            let v = store.get(Key::Seen(f).encode().unwrap()).await.unwrap();
            v.map(|b| crate::ingest::records::Seen::decode(&b).unwrap())
        };
        assert_eq!(seen(store.clone(), "gone").await.unwrap().markers.len(), 2);

        hub.remove_feed("gone").await.unwrap();
        assert!(keys_under(&store, gone_posts.clone()).await.is_empty());
        let left = seen(store.clone(), "gone")
            .await
            .expect("the number is kept");
        assert_eq!((left.next_seq, left.markers.len()), (2, 0));
        assert_eq!(
            keys_under(&store, Key::Posting("kept", 0).prefix().unwrap())
                .await
                .len(),
            1,
            "another feed's postings stay"
        );

        // Still in the plan the worker holds: the report passes the ownership check, as
        // one checked just before the removal would, and is dropped after it.
        seq += 1;
        let ack = hub
            .handle_reports(&w, vec![report(&w, seq, "gone", 99, t0 + 2_000)])
            .await
            .unwrap();
        assert_eq!(ack.acked_seq, seq);
        assert!(keys_under(&store, gone_posts.clone()).await.is_empty());
        assert!(!stored(&store, Key::Learned("gone")).await);
        assert_eq!(seen(store.clone(), "gone").await.unwrap().markers.len(), 0);
        assert!(!hub.with_state(|s| s.feeds.contains_key("gone")).await);

        // Registered again, the id is a new feed: its reports count, and its first posting
        // takes the number after the old ones, never one an old index entry names.
        hub.add_feed(Some("gone"), "https://gone.example/rss", 1.0)
            .await
            .unwrap();
        hub.replan().await.unwrap();
        seq += 1;
        let ack = hub
            .handle_reports(&w, vec![report(&w, seq, "gone", 10, t0 + 3_000)])
            .await
            .unwrap();
        assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
        assert_eq!(
            keys_under(&store, gone_posts).await,
            vec![Key::Posting("gone", 2).encode().unwrap()],
            "the old item is new to the new feed, numbered after the old postings"
        );
        assert!(stored(&store, Key::Learned("gone")).await);
    });
}
