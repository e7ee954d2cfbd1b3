//! What removing a feed or a user leaves in the store: nothing of theirs that only they
//! would read, and a hub's start clears what an earlier removal (or a race with one) left.

use crate::access::AccessEvent;
use crate::store::keys::Key;
use crate::store::memory::MemoryBackend;
use crate::store::{KvBackend, Op};
use kairos_runtime::clock::SimClock;
use std::sync::Arc;

async fn stored(store: &MemoryBackend, key: Key<'_>) -> bool {
    store.get(key.encode().unwrap()).await.unwrap().is_some()
}

#[test]
fn removal_deletes_learned_state_and_histograms_and_a_start_clears_leftovers() {
    super::test_runtime().block_on(async {
        let store = Arc::new(MemoryBackend::new());
        let t0 = 1_772_409_600_000;
        let clock = SimClock::manual(t0);
        let hub = super::open_for_tests(Arc::new(store.clone()), clock).await;
        for f in ["kept", "gone"] {
            hub.add_feed(Some(f), &format!("https://{f}.example/rss"), 1.0)
                .await
                .unwrap();
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
