//! Postings retention: the store keeps a bounded window of postings, so it does not grow
//! for ever (and, on etcd, stays inside its quota).
//!
//! Two horizons, both measured on a posting's discovery time:
//!
//! * after `postings` the posting goes: its record (`post/FEED/SEQ`) and its global
//!   discovery entry (`disc/N`);
//! * after `markers` (at least `postings`) the item's idempotency marker goes. The marker
//!   outlives the posting because a feed's document keeps showing an item for a while after
//!   it was published: with the marker gone, an item still in the document would be stored
//!   again as new. Markers live in each feed's ingest record and leave it when ingest
//!   rewrites the record ([`crate::ingest::records`]); this pass only removes the markers of
//!   stores written before the record, each kept with a tombstone (`FEED/SEQ/ITEM/MS`) in
//!   place of its discovery entry.
//!
//! Both passes walk the discovery index from its oldest entry, which is in discovery order,
//! in bounded batches: a pass stops at the first entry inside its horizon or when its budget
//! of entries is spent, and the next pass goes on from there.

use crate::ingest::records::{decode_posting, DEFAULT_MARKER_RETENTION, MAX_MARKERS};
use crate::ingest::{IngestError, Ingestor};
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
            postings: Some(Duration::from_secs(3 * 86_400)),
            markers: Some(DEFAULT_MARKER_RETENTION),
            every: Duration::from_secs(60),
            compact_every: Duration::from_secs(3600),
        }
    }
}

/// etcd's own database size per record, its history compacted and the file defragmented
/// (`benches/leader_start.rs --window`, docs/STATE.md): a feed's registry entry and learned
/// state at one posting a day (28 days, 40 item ids remembered); a retained posting (its
/// `post/` record and `disc/` entry); a marker in its feed's ingest record; and what each
/// posting adds to its feed's learned state while it is inside the 28-day learning window.
const FEED_BYTES: f64 = 1_663.0;
const POSTING_BYTES: f64 = 376.0;
const MARKER_BYTES: f64 = 16.0;
const LEARNED_BYTES_PER_POSTING: f64 = 6.0;
const LEARNING_DAYS: f64 = 28.0;

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
        // A feed keeps at most its cap of markers, so markers kept for ever are bounded.
        let per_feed = (m * per_day / feeds.max(1) as f64).min(MAX_MARKERS as f64);
        let markers = feeds.max(1) as f64 * per_feed * MARKER_BYTES;
        state + markers + per_day * (p * POSTING_BYTES + LEARNING_DAYS * LEARNED_BYTES_PER_POSTING)
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

/// Where the postings pass goes on from: the last discovery key it removed or found to be an
/// older store's tombstone (kept in memory; after a restart the pass walks those tombstones
/// once more).
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
                    let (item, discovered, legacy) = match &record {
                        Some(v) => {
                            let p = decode_posting(v)?;
                            // Written as JSON: ingested before the ingest record, so its
                            // marker is an `item/` key that its tombstone will expire.
                            (
                                p.item_id_hash,
                                p.discovered_unix_ms,
                                v.first() == Some(&b'{'),
                            )
                        }
                        // No posting behind the entry (never written whole): expire it at once.
                        None => (0, i64::MIN, false),
                    };
                    if discovered >= cutoff {
                        stop = true;
                        break;
                    }
                    ops.push(Op::Delete(key));
                    if legacy {
                        ops.push(Op::Put(
                            disc.clone(),
                            format!("{feed}/{seq}/{item:016x}/{discovered}").into_bytes(),
                        ));
                    } else {
                        ops.push(Op::Delete(disc.clone()));
                    }
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
    use crate::ingest::PostingRecord;
    use crate::store::memory::MemoryBackend;
    use std::sync::Arc;

    const DAY: i64 = 86_400_000;

    #[test]
    fn the_window_is_sized_as_docs_state_says() {
        // A million feeds at one posting a day, 3 days of postings, 30 of markers: 1,663 B
        // a feed, 3 × 376 B of postings, 30 × 16 B of markers and 28 × 6 B of learned
        // times per posting a day, about 3.4 GB: within half of an 8 GiB quota.
        let r = Retention::default();
        let b = r.window_bytes(1_000_000, 1_000_000.0);
        assert!((b - 3.439e9).abs() < 1e6, "{b}");
        assert!(b < 4.0 * 1024.0 * 1024.0 * 1024.0);
        assert_eq!(r.window_bytes(0, 0.0), 0.0);
        let markers_kept = Retention {
            markers: None,
            ..Retention::default()
        };
        let capped = markers_kept.window_bytes(1, 1e6);
        assert!(
            capped.is_finite() && capped < b,
            "a feed's markers are capped"
        );
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
    async fn postings_expire_in_discovery_order_within_the_budget_and_markers_with_ingest() {
        let store = Arc::new(MemoryBackend::new());
        let keep = Retention {
            postings: Some(Duration::from_secs(7 * 86_400)),
            markers: Some(Duration::from_secs(14 * 86_400)),
            ..Retention::default()
        };
        let ing = Ingestor::new(store.clone()).with_marker_retention(keep.markers);
        // 30 postings of two feeds, one a day over 30 days (day 0 oldest).
        for d in 0..30u64 {
            let feed = if d % 2 == 0 { "a" } else { "b" };
            let p = posting(1000 + d, d as i64 * DAY);
            ing.ingest(feed, &[p]).await.unwrap();
        }
        let now = 30 * DAY;
        let mut cursor = Cursor::default();
        // A budget of 10 entries: the pass stops part way and goes on next time.
        let first = ing.prune(now, keep, &mut cursor, 10).await.unwrap();
        assert_eq!(first.postings, 10);
        assert_eq!(first.markers, 0, "no markers of an older store");
        let mut total = first;
        for _ in 0..5 {
            let p = ing.prune(now, keep, &mut cursor, 10).await.unwrap();
            total.postings += p.postings;
            total.markers += p.markers;
        }
        // Days 0-22 are older than 7 days (discovered before day 23).
        assert_eq!(total.postings, 23);
        assert_eq!(count(&store, b"post/").await, 7);
        assert_eq!(count(&store, b"disc/").await, 7, "no tombstones");
        assert_eq!(count(&store, b"item/").await, 0);
        assert_eq!(count(&store, b"seen/").await, 2, "one record a feed");
        // Nothing more to do: a pass at the same time removes nothing.
        let again = ing.prune(now, keep, &mut cursor, 100).await.unwrap();
        assert_eq!(again, Pruned::default());
        // The postings by user list the 7 kept postings.
        let feeds: std::collections::HashSet<String> =
            ["a".to_string(), "b".to_string()].into_iter().collect();
        let (page, _) = ing.list_for(&feeds, "", 100, 1000).await.unwrap();
        assert_eq!(page.len(), 7);
        assert!(page
            .iter()
            .all(|(_, p, _)| p.discovered_unix_ms >= 23 * DAY));
        // An item within 14 days of its feed's newest discovery (day 28 for feed a) is a
        // duplicate; one past it is new again.
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

    /// A store written before the ingest record: `item/` markers, a `postseq/` counter,
    /// JSON postings and tombstones in the discovery index.
    #[tokio::test]
    async fn a_store_of_the_older_layout_keeps_its_markers_and_sequence() {
        let store = Arc::new(MemoryBackend::new());
        let json = |item: u64, day: i64| serde_json::to_vec(&posting(item, day * DAY)).unwrap();
        let key = |k: Key| k.encode().unwrap();
        store
            .batch(vec![
                // Items 1 and 2 (days 0 and 1) already past their postings' retention.
                Op::Put(key(Key::Item("a", 1)), b"0".to_vec()),
                Op::Put(key(Key::Item("a", 2)), b"1".to_vec()),
                Op::Put(
                    key(Key::Discovery(0)),
                    format!("a/0/{:016x}/{}", 1, 0).into_bytes(),
                ),
                Op::Put(
                    key(Key::Discovery(1)),
                    format!("a/1/{:016x}/{}", 2, DAY).into_bytes(),
                ),
                // Item 3 (day 20) still live.
                Op::Put(key(Key::Item("a", 3)), b"2".to_vec()),
                Op::Put(key(Key::Posting("a", 2)), json(3, 20)),
                Op::Put(key(Key::Discovery(2)), b"a/2".to_vec()),
                Op::Put(key(Key::PostingSeq("a")), b"3".to_vec()),
                Op::Put(key(Key::DiscoverySeq), b"3".to_vec()),
            ])
            .await
            .unwrap();
        let ing = Ingestor::new(store.clone());
        let c = ing
            .ingest(
                "a",
                &[posting(2, DAY), posting(3, 20 * DAY), posting(4, 39 * DAY)],
            )
            .await
            .unwrap();
        assert_eq!((c.new, c.duplicates), (1, 2), "old markers still count");
        let page = ing.list("a", "", 10).await.unwrap();
        let items: Vec<u64> = page.postings.iter().map(|p| p.item_id_hash).collect();
        assert_eq!(items, [3, 4], "the JSON posting and the new one, in order");
        assert_eq!(page.cursors, [format!("{:016x}", 2), format!("{:016x}", 3)]);
        assert_eq!(count(&store, b"postseq/").await, 0, "the counter moved");
        // Day 40: item 3's posting goes and leaves a tombstone for its old marker; the
        // markers of items 1 and 2 are past 30 days and go with their tombstones.
        let mut cursor = Cursor::default();
        let p = ing
            .prune(40 * DAY, Retention::default(), &mut cursor, 100)
            .await
            .unwrap();
        assert_eq!((p.postings, p.markers), (1, 2));
        assert_eq!(count(&store, b"item/").await, 1);
        let c = ing
            .ingest("a", &[posting(3, 20 * DAY), posting(1, 0)])
            .await
            .unwrap();
        assert_eq!(
            (c.new, c.duplicates),
            (1, 1),
            "3 is still marked, 1 no more"
        );
        // Day 51: the last old marker goes too.
        let p = ing
            .prune(51 * DAY, Retention::default(), &mut cursor, 100)
            .await
            .unwrap();
        assert_eq!(p.markers, 1);
        assert_eq!(count(&store, b"item/").await, 0);
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
