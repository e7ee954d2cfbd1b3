//! Reader access statistics kept across restarts: each user's histograms under
//! `access/USER`, written for the users with new accesses once a minute and at shutdown,
//! and the time collection began under `accesssince` (the histograms' exposure: without
//! it a restarted coordinator would read two weeks of accesses as one day's).

use super::Hub;
use crate::access::{AccessStats, StoredAccess};
use crate::store::keys::Key;
use crate::store::{KvBackend, Op, StoreError};

/// Loads every stored user's histograms into `access` (users must be registered) and
/// returns since when they were collected, storing `now_ms` on a first start.
pub(super) async fn load<B: KvBackend>(
    store: &B,
    access: &mut AccessStats,
    now_ms: i64,
) -> anyhow::Result<i64> {
    let prefix = Key::Access("").prefix()?;
    let (mut after, mut users) = (None, 0usize);
    loop {
        let page = store.range(prefix.clone(), after.clone(), 1000).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.0.clone());
        for (k, v) in &page {
            let user = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
            match serde_json::from_slice::<StoredAccess>(v) {
                Ok(s) => users += usize::from(access.restore(&user, s)),
                // Relearnable from new accesses: skip rather than refuse to start.
                Err(e) => tracing::warn!(%user, error = %e, "unreadable access statistics skipped"),
            }
        }
    }
    let key = Key::AccessSince.encode()?;
    let since = match store.get(key.clone()).await? {
        Some(v) => serde_json::from_slice::<i64>(&v).unwrap_or(now_ms),
        None => {
            store
                .batch(vec![Op::Put(key, serde_json::to_vec(&now_ms)?)])
                .await?;
            now_ms
        }
    };
    tracing::info!(users, since_ms = since, "reader access statistics loaded");
    Ok(since)
}

impl<B: KvBackend> Hub<B> {
    /// Stores the histograms of users with accesses since the last call; returns how many.
    /// On failure they stay marked, for the next call.
    pub async fn persist_access(&self) -> Result<usize, StoreError> {
        let dirty = self.actor.call(|s| s.access.take_dirty()).await;
        if dirty.is_empty() {
            return Ok(0);
        }
        let mut ops = Vec::with_capacity(dirty.len());
        for (user, stored) in &dirty {
            let key = Key::Access(user)
                .encode()
                .map_err(|e| StoreError(e.to_string()))?;
            ops.push(Op::Put(
                key,
                serde_json::to_vec(stored).expect("access statistics serialize"),
            ));
        }
        match self.store.batch(ops).await {
            Ok(()) => Ok(dirty.len()),
            Err(e) => {
                let users: Vec<String> = dirty.into_iter().map(|(u, _)| u).collect();
                self.actor.call(move |s| s.access.mark_dirty(users)).await;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::access::AccessEvent;
    use crate::hub::Hub;
    use crate::store::memory::MemoryBackend;
    use kairos_runtime::clock::SimClock;
    use std::sync::Arc;

    async fn open(store: &Arc<MemoryBackend>, clock: SimClock) -> Hub<Arc<MemoryBackend>> {
        crate::hub::open_for_tests(Arc::new(store.clone()), clock).await
    }

    #[test]
    fn access_statistics_and_their_start_survive_a_restart() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let store = Arc::new(MemoryBackend::new());
            let t0 = 1_772_409_600_000;
            let clock = SimClock::manual(t0);
            let hub = open(&store, clock).await;
            hub.add_feed(Some("f"), "https://f.example/rss", 1.0)
                .await
                .unwrap();
            hub.add_user("u", 2.0).await.unwrap();
            clock.set_ms(t0 + 10 * 86_400_000);
            let ev = |feed: &str, h: i64| AccessEvent {
                user_id: "u".into(),
                feed_id: feed.into(),
                unix_ms: t0 + 10 * 86_400_000 - h * 3_600_000,
            };
            let c = hub
                .record_access(vec![ev("f", 2), ev("", 5), ev("", 5)])
                .await;
            assert_eq!(c.accepted, 3);
            assert_eq!(hub.persist_access().await.unwrap(), 1);
            assert_eq!(hub.persist_access().await.unwrap(), 0, "nothing new");
            let histograms = |s: &mut crate::hub::actor::State| {
                (
                    s.access.app_histogram("u").unwrap().to_vec(),
                    s.access.feed_histogram("u", "f").unwrap().to_vec(),
                )
            };
            let (app, per_feed) = hub.with_state(histograms).await;
            assert_eq!(app.iter().sum::<f32>(), 4.0);
            drop(hub);
            // Restarted ten days later in simulated time: the same histograms, and the
            // exposure still counts from the first start.
            let again = open(&store, clock).await;
            assert_eq!(again.with_state(histograms).await, (app, per_feed));
            assert_eq!(again.access_since_ms, t0);
        });
    }
}
