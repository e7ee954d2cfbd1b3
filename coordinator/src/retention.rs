//! Postings retention: the store keeps a bounded window of postings, so it does not grow
//! for ever (and, on etcd, stays inside its quota).
//!
//! Two horizons, both measured on a posting's discovery time:
//!
//! * after `postings` the posting itself goes (`post/FEED/SEQ`); its global discovery entry
//!   (`disc/N`) stays as a small tombstone `FEED/SEQ/ITEM/DISCOVERED_MS`, which the
//!   postings-by-user pages skip;
//! * after `markers` (at least `postings`) the tombstone and the item's idempotency marker
//!   (`item/FEED/ITEM`) go too. The marker outlives the posting because a feed's document
//!   keeps showing an item for a while after it was published: with the marker gone, an item
//!   still in the document would be stored again as new.
//!
//! Both passes walk the discovery index from its oldest entry, which is in discovery order,
//! in bounded batches: a pass stops at the first entry inside its horizon or when its budget
//! of entries is spent, and the next pass goes on from there.

use crate::ingest::{IngestError, Ingestor, PostingRecord};
use crate::store::keys::Key;
use crate::store::{KvBackend, Op, StoreError};
use std::time::Duration;

/// How long postings and their item markers are kept (`None`: for ever).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Postings, from their discovery.
    pub postings: Option<Duration>,
    /// Item markers (and the discovery index entries), from the posting's discovery.
    pub markers: Option<Duration>,
    /// Wall time between two passes.
    pub every: Duration,
    /// Wall time between two compactions of the store's history (etcd; others keep none).
    pub compact_every: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            postings: Some(Duration::from_secs(7 * 86_400)),
            markers: Some(Duration::from_secs(30 * 86_400)),
            every: Duration::from_secs(60),
            compact_every: Duration::from_secs(3600),
        }
    }
}

/// Bytes per feed of registry and learned state, per retained posting (its `post/`
/// record, `disc/` entry and `item/` marker) and per marker kept past its posting (marker
/// and tombstone). The feed's is the raw size at 8 postings a day (docs/STATE.md; 2.4 KB
/// in etcd at one a day); the others are etcd's own database size per record, compacted
/// and defragmented (`benches/leader_start.rs --window`, docs/BENCHMARKS.md): about 1.6
/// and 2.3 times the raw key and value bytes (364 and 100), which is etcd's per-key cost.
const FEED_BYTES: f64 = 4_500.0;
const POSTING_BYTES: f64 = 593.0;
const MARKER_BYTES: f64 = 234.0;

impl Retention {
    /// Bytes the store holds in steady state for `feeds` feeds posting `per_day` postings a
    /// day in all; infinite when postings are kept for ever.
    pub fn window_bytes(&self, feeds: usize, per_day: f64) -> f64 {
        let days = |d: Option<Duration>| d.map_or(f64::INFINITY, |d| d.as_secs_f64() / 86_400.0);
        let (p, m) = (days(self.postings), days(self.markers));
        let state = feeds as f64 * FEED_BYTES;
        if per_day.is_nan() || per_day <= 0.0 {
            return state;
        }
        let markers = if m > p { (m - p) * MARKER_BYTES } else { 0.0 };
        state + per_day * (p * POSTING_BYTES + markers)
    }

    /// Refuses a marker horizon shorter than the postings' (markers of stored postings would
    /// go, and a re-reported item would be stored twice) or keeping postings for ever while
    /// markers expire.
    pub fn validate(&self) -> Result<(), String> {
        match (self.postings, self.markers) {
            (Some(p), Some(m)) if m < p => Err(format!(
                "item markers must be kept at least as long as postings ({} < {})",
                humantime::format_duration(m),
                humantime::format_duration(p)
            )),
            (None, Some(_)) => {
                Err("item markers cannot expire while postings are kept for ever".into())
            }
            _ => Ok(()),
        }
    }
}

/// What one pass removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Postings removed.
    pub postings: u64,
    /// Item markers (with their discovery entries) removed.
    pub markers: u64,
}

/// Where the postings pass goes on from: the last discovery key it turned into a tombstone
/// (kept in memory; after a restart the pass walks the tombstones once more).
#[derive(Debug, Default)]
pub struct Cursor(Option<Vec<u8>>);

/// Entries read per store call.
const BATCH: usize = 256;

enum Entry {
    Live {
        feed: String,
        seq: u64,
    },
    Tombstone {
        feed: String,
        item: u64,
        discovered_ms: i64,
    },
}

fn parse(v: &[u8]) -> Result<Entry, IngestError> {
    let text = String::from_utf8_lossy(v);
    let corrupt = || StoreError(format!("corrupt discovery entry {text}"));
    let parts: Vec<&str> = text.split('/').collect();
    let num = |s: &str| s.parse::<u64>().map_err(|_| corrupt());
    Ok(match parts.as_slice() {
        [feed, seq] => Entry::Live {
            feed: feed.to_string(),
            seq: num(seq)?,
        },
        [feed, _seq, item, ms] => Entry::Tombstone {
            feed: feed.to_string(),
            item: u64::from_str_radix(item, 16).map_err(|_| corrupt())?,
            discovered_ms: ms.parse().map_err(|_| corrupt())?,
        },
        _ => return Err(corrupt().into()),
    })
}

impl<B: KvBackend> Ingestor<B> {
    /// One retention pass at `now_ms`, reading at most `budget` discovery entries per
    /// horizon.
    pub async fn prune(
        &self,
        now_ms: i64,
        retention: Retention,
        cursor: &mut Cursor,
        budget: usize,
    ) -> Result<Pruned, IngestError> {
        let mut out = Pruned::default();
        let prefix = Key::Discovery(0).prefix()?;
        let ms = |d: Duration| now_ms.saturating_sub(d.as_millis().min(i64::MAX as u128) as i64);
        if let Some(keep) = retention.postings {
            let cutoff = ms(keep);
            let mut read = 0;
            'postings: while read < budget {
                let rows = self
                    .store
                    .range(prefix.clone(), cursor.0.clone(), BATCH.min(budget - read))
                    .await?;
                if rows.is_empty() {
                    break;
                }
                read += rows.len();
                // The live entries of this batch, with their postings in one read.
                let mut live = Vec::new();
                for (k, v) in &rows {
                    match parse(v)? {
                        Entry::Live { feed, seq } => live.push((k.clone(), feed, seq)),
                        Entry::Tombstone { .. } => {
                            if live.is_empty() {
                                cursor.0 = Some(k.clone());
                            }
                        }
                    }
                }
                let keys = live
                    .iter()
                    .map(|(_, f, s)| Key::Posting(f, *s).encode())
                    .collect::<Result<Vec<_>, _>>()?;
                let records = self.store.get_many(keys.clone()).await?;
                let mut ops = Vec::new();
                let mut last = None;
                let mut stop = false;
                for (((disc, feed, seq), key), record) in live.iter().zip(keys).zip(records) {
                    let (item, discovered) = match record {
                        Some(v) => {
                            let p: PostingRecord = serde_json::from_slice(&v)
                                .map_err(|e| StoreError(format!("corrupt posting: {e}")))?;
                            (p.item_id_hash, p.discovered_unix_ms)
                        }
                        // No posting behind the entry (never written whole): expire it at once.
                        None => (0, i64::MIN),
                    };
                    if discovered >= cutoff {
                        stop = true;
                        break;
                    }
                    ops.push(Op::Delete(key));
                    ops.push(Op::Put(
                        disc.clone(),
                        format!("{feed}/{seq}/{item:016x}/{discovered}").into_bytes(),
                    ));
                    out.postings += 1;
                    last = Some(disc.clone());
                }
                if !ops.is_empty() {
                    self.store.batch(ops).await?;
                }
                if let Some(k) = last {
                    cursor.0 = Some(k);
                }
                if stop {
                    break 'postings;
                }
                if live.is_empty() {
                    // A batch of tombstones only: the cursor moved past them.
                    cursor.0 = rows.last().map(|(k, _)| k.clone());
                }
            }
        }
        if let Some(keep) = retention.markers {
            let cutoff = ms(keep);
            let mut read = 0;
            'markers: while read < budget {
                let rows = self
                    .store
                    .range(prefix.clone(), None, BATCH.min(budget - read))
                    .await?;
                if rows.is_empty() {
                    break;
                }
                read += rows.len();
                let mut ops = Vec::new();
                let mut stop = false;
                for (k, v) in &rows {
                    match parse(v)? {
                        Entry::Tombstone {
                            feed,
                            item,
                            discovered_ms,
                        } if discovered_ms < cutoff => {
                            ops.push(Op::Delete(k.clone()));
                            ops.push(Op::Delete(Key::Item(&feed, item).encode()?));
                            out.markers += 1;
                        }
                        _ => {
                            stop = true;
                            break;
                        }
                    }
                }
                if !ops.is_empty() {
                    self.store.batch(ops).await?;
                }
                if stop {
                    break 'markers;
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryBackend;
    use std::sync::Arc;

    const DAY: i64 = 86_400_000;

    #[test]
    fn the_window_is_sized_as_docs_state_says() {
        // 10,000 feeds at 10 postings a day, 7 days of postings, 30 of markers: 45 MB of
        // feed state, 7 × 100,000 × 593 B of postings, 23 × 100,000 × 234 B of markers.
        let r = Retention::default();
        let b = r.window_bytes(10_000, 100_000.0);
        assert!((b - 998.3e6).abs() < 1e3, "{b}");
        assert_eq!(r.window_bytes(0, 0.0), 0.0);
        let forever = Retention {
            postings: None,
            markers: None,
            ..Retention::default()
        };
        assert!(forever.window_bytes(1, 1.0).is_infinite());
        assert!(
            forever.window_bytes(1, 0.0).is_finite(),
            "nothing posted, nothing kept"
        );
    }

    fn posting(item: u64, at: i64) -> PostingRecord {
        PostingRecord {
            item_id_hash: item,
            link: None,
            title: None,
            published_unix_ms: Some(at),
            discovered_unix_ms: at,
        }
    }

    async fn count(store: &MemoryBackend, prefix: &[u8]) -> usize {
        store
            .range(prefix.to_vec(), None, 1 << 20)
            .await
            .unwrap()
            .len()
    }

    #[tokio::test]
    async fn postings_then_markers_expire_in_discovery_order_within_the_budget() {
        let store = Arc::new(MemoryBackend::new());
        let ing = Ingestor::new(store.clone());
        // 30 postings of two feeds, one a day over 30 days (day 0 oldest).
        for d in 0..30u64 {
            let feed = if d % 2 == 0 { "a" } else { "b" };
            let p = posting(1000 + d, d as i64 * DAY);
            ing.ingest(feed, &[p]).await.unwrap();
        }
        let now = 30 * DAY;
        let keep = Retention {
            postings: Some(Duration::from_secs(7 * 86_400)),
            markers: Some(Duration::from_secs(14 * 86_400)),
            ..Retention::default()
        };
        let mut cursor = Cursor::default();
        // A budget of 10 entries: the pass stops part way and goes on next time.
        let first = ing.prune(now, keep, &mut cursor, 10).await.unwrap();
        assert_eq!(first.postings, 10);
        assert_eq!(
            first.markers, 10,
            "tombstones of days 0-9 are past 14 days too"
        );
        let mut total = first;
        for _ in 0..5 {
            let p = ing.prune(now, keep, &mut cursor, 10).await.unwrap();
            total.postings += p.postings;
            total.markers += p.markers;
        }
        // Days 0-22 are older than 7 days (discovered before day 23); days 0-15 older than 14.
        assert_eq!(total.postings, 23);
        assert_eq!(total.markers, 16);
        assert_eq!(count(&store, b"post/").await, 7);
        assert_eq!(count(&store, b"item/").await, 14);
        assert_eq!(count(&store, b"disc/").await, 14);
        // Nothing more to do: a pass at the same time removes nothing.
        let again = ing.prune(now, keep, &mut cursor, 100).await.unwrap();
        assert_eq!(again, Pruned::default());
        // The postings by user skip the tombstones and list the 7 kept postings.
        let feeds: std::collections::HashSet<String> =
            ["a".to_string(), "b".to_string()].into_iter().collect();
        let (page, _) = ing.list_for(&feeds, "", 100, 1000).await.unwrap();
        assert_eq!(page.len(), 7);
        assert!(page
            .iter()
            .all(|(_, p, _)| p.discovered_unix_ms >= 23 * DAY));
        // An item whose marker is still kept is a duplicate; one past it is new again.
        let c = ing
            .ingest("a", &[posting(1000 + 20, 20 * DAY)])
            .await
            .unwrap();
        assert_eq!((c.new, c.duplicates), (0, 1));
        let c = ing
            .ingest("a", &[posting(1000 + 2, 2 * DAY)])
            .await
            .unwrap();
        assert_eq!(c.new, 1);
    }

    #[test]
    fn markers_must_outlive_postings() {
        let d = |days: u64| Some(Duration::from_secs(days * 86_400));
        assert!(Retention::default().validate().is_ok());
        let r = Retention {
            postings: d(7),
            markers: d(3),
            ..Retention::default()
        };
        assert!(r.validate().unwrap_err().contains("at least as long"));
        let r = Retention {
            postings: None,
            markers: d(3),
            ..Retention::default()
        };
        assert!(r.validate().is_err());
        let r = Retention {
            postings: None,
            markers: None,
            ..Retention::default()
        };
        assert!(r.validate().is_ok());
    }
}
