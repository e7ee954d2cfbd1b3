//! Reader access statistics kept across restarts: each user's histograms under
//! `access/USER`, written for the users with new accesses once a minute and at shutdown,
//! and the time collection began under `accesssince` (the histograms' exposure: without
//! it a restarted coordinator would read two weeks of accesses as one day's).

use super::actor::State;
use super::Hub;
use crate::access::{AccessCounts, AccessEvent, AccessStats, StoredAccess};
use crate::metrics as m;
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
    let mut orphans: Vec<Vec<u8>> = Vec::new();
    loop {
        let page = store.range(prefix.clone(), after.clone(), 1000).await?;
        let Some(last) = page.last() else { break };
        after = Some(last.0.clone());
        for (k, v) in &page {
            let user = String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
            match serde_json::from_slice::<StoredAccess>(v) {
                Ok(s) => {
                    if access.restore(&user, s) {
                        users += 1;
                    } else {
                        // A user no longer registered (removed while their histograms
                        // were being stored, or before removal took them along).
                        orphans.push(k.clone());
                    }
                }
                // Relearnable from new accesses: skip rather than refuse to start.
                Err(e) => tracing::warn!(%user, error = %e, "unreadable access statistics skipped"),
            }
        }
    }
    super::delete_leftovers(store, orphans, "access statistics of users").await;
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

/// Once per store: drops stored histograms of feeds their user does not subscribe to, and
/// stores the users affected again. Until feed numbers were made unique, a feed added after
/// a removal took a live feed's number, the two shared one histogram, and it was stored
/// under either name: one feed's reads could sit under another feed's name. Which feed a
/// user read cannot be told from the record; a histogram of a feed the user does not
/// subscribe to is the detectable case, and it weighs in no plan (a feed's access rate
/// sums its subscribers'), so it goes. The marker is written after the users, so a repair
/// cut short runs again. Returns the histograms dropped, `None` when already done.
pub(super) async fn repair_once<B: KvBackend>(
    store: &B,
    registry: &crate::registry::Registry<B>,
    access: &mut AccessStats,
) -> anyhow::Result<Option<usize>> {
    let marker = Key::AccessRepaired.encode()?;
    if store.get(marker.clone()).await?.is_some() {
        return Ok(None);
    }
    let subscribers = registry.all_subscribers().await?;
    let subscribed: std::collections::HashSet<(&str, &str)> = subscribers
        .iter()
        .flat_map(|(feed, users)| users.iter().map(move |u| (u.as_str(), feed.as_str())))
        .collect();
    let dropped = access.retain_feed_histograms(|user, feed| subscribed.contains(&(user, feed)));
    let dirty = access.take_dirty();
    for part in dirty.chunks(super::STORE_BATCH) {
        let mut ops = Vec::with_capacity(part.len());
        for (user, stored) in part {
            ops.push(Op::Put(
                Key::Access(user).encode()?,
                serde_json::to_vec(stored)?,
            ));
        }
        store.batch(ops).await?;
    }
    store.batch(vec![Op::Put(marker, b"1".to_vec())]).await?;
    if dropped > 0 {
        tracing::warn!(
            histograms = dropped,
            users = dirty.len(),
            "reader histograms of feeds their user does not subscribe to dropped (written before feed numbers were unique)"
        );
    }
    Ok(Some(dropped))
}

impl<B: KvBackend> Hub<B> {
    /// Stores the histograms of users with accesses since the last call; returns how many.
    /// On failure they stay marked, for the next call.
    pub async fn persist_access(&self) -> Result<usize, StoreError> {
        let dirty = self.actor.ask(super::messages::TakeDirtyAccess).await;
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
                self.actor
                    .ask(super::messages::MarkAccessDirty(users))
                    .await;
                Err(e)
            }
        }
    }
}

/// Reader accesses remembered per user for the missed-postings measure.
const ACCESSES_PER_USER: usize = 512;

impl State {
    /// Records the events that can be, remembering each user's latest accesses for the
    /// missed-postings measure.
    pub(super) fn record_access(&mut self, events: &[AccessEvent], now_ms: i64) -> AccessCounts {
        let mut seen: Vec<(&str, i64)> = Vec::new();
        let counts = self
            .access
            .record_each(events, now_ms, |e| seen.push((&e.user_id, e.unix_ms)));
        m::record_access(&counts);
        if !seen.is_empty() {
            for (user, t) in &seen {
                let q = self.recent_access.entry(user.to_string()).or_default();
                q.push_back(*t);
                if q.len() > ACCESSES_PER_USER {
                    q.pop_front();
                }
            }
            self.totals.accesses += seen.len() as u64;
            metrics::counter!(m::ACCESSES_TOTAL).increment(seen.len() as u64);
        }
        counts
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
        crate::hub::test_runtime().block_on(async {
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

    #[test]
    fn histograms_of_feeds_a_user_does_not_read_are_dropped_once_at_open() {
        use crate::access::StoredAccess;
        use crate::store::keys::Key;
        use crate::store::{KvBackend, Op};
        crate::hub::test_runtime().block_on(async {
            let store = Arc::new(MemoryBackend::new());
            let clock = SimClock::manual(1_772_409_600_000);
            let hub = open(&store, clock).await;
            for f in ["c", "d"] {
                hub.add_feed(Some(f), &format!("https://{f}.example/rss"), 1.0)
                    .await
                    .unwrap();
            }
            hub.add_user("u", 1.0).await.unwrap();
            hub.registry().subscribe("u", "c").await.unwrap();
            drop(hub);
            // A record as the old numbering could leave it: c's reads stored under d.
            let mut h = vec![0.0f32; 24];
            h[9] = 3.0;
            let record = |feeds: &[(&str, &Vec<f32>)]| StoredAccess {
                app: vec![0.0; 24],
                feeds: feeds
                    .iter()
                    .map(|(f, h)| (f.to_string(), (*h).clone()))
                    .collect(),
            };
            let put = |r: StoredAccess| {
                let store = store.clone();
                async move {
                    let key = Key::Access("u").encode().unwrap();
                    store
                        .batch(vec![Op::Put(key, serde_json::to_vec(&r).unwrap())])
                        .await
                        .unwrap();
                }
            };
            // The store predates the repair: no marker yet (the first open set it).
            store
                .batch(vec![Op::Delete(Key::AccessRepaired.encode().unwrap())])
                .await
                .unwrap();
            put(record(&[("c", &h), ("d", &h)])).await;
            let hub = open(&store, clock).await;
            let seen = |s: &mut crate::hub::actor::State| {
                (
                    s.access.feed_histogram("u", "c").map(|h| h.to_vec()),
                    s.access.feed_histogram("u", "d").map(|h| h.to_vec()),
                )
            };
            assert_eq!(hub.with_state(seen).await, (Some(h.clone()), None));
            let stored = store
                .get(Key::Access("u").encode().unwrap())
                .await
                .unwrap()
                .unwrap();
            let stored: StoredAccess = serde_json::from_slice(&stored).unwrap();
            assert_eq!(
                stored.feeds.keys().collect::<Vec<_>>(),
                ["c"],
                "stored repaired"
            );
            drop(hub);
            // Once only: a histogram written after the repair stays (readers of a feed
            // they later unsubscribed from are not scanned for at every start).
            put(record(&[("c", &h), ("d", &h)])).await;
            let hub = open(&store, clock).await;
            assert_eq!(hub.with_state(seen).await, (Some(h.clone()), Some(h)));
        });
    }
}
