//! Idempotent ingest of the postings workers report, and paging through them.
//!
//! Delivery from workers is at least once (a report is retried until acknowledged, and a
//! host that moves to another worker may be fetched twice), so ingest is keyed on
//! (feed, item id): the first report of an item stores it under the feed's next sequence
//! number, every later one is counted as a duplicate and changes nothing. A feed's markers
//! and next sequence number live in one ingest record (`seen/FEED`, [`records::Seen`]),
//! written in one atomic batch with the postings, so a crash never leaves an item marked
//! seen without its posting.

pub mod records;

use crate::store::keys::{BadId, Key};
use crate::store::{KvBackend, Op, StoreError};
use records::Seen;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// Records deleted per batch when a feed is forgotten: below etcd's 128 operations a
/// request, so each batch is one transaction.
const FORGET_BATCH: usize = 100;

/// A feed's next posting number as a store from before the ingest record keeps it
/// (`postseq/FEED`, decimal text).
fn legacy_seq(feed: &str, stored: &[u8]) -> Result<u64, StoreError> {
    std::str::from_utf8(stored)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| StoreError(format!("corrupt sequence of feed `{feed}`")))
}

/// A stored posting.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PostingRecord {
    /// Hash of the item's stable id.
    pub item_id_hash: u64,
    /// Item link.
    pub link: Option<String>,
    /// Item title.
    pub title: Option<String>,
    /// Publication time claimed by the feed (Unix ms).
    pub published_unix_ms: Option<i64>,
    /// When the discovering fetch finished (Unix ms).
    pub discovered_unix_ms: i64,
}

/// What one ingest call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IngestCounts {
    /// Postings stored.
    pub new: u64,
    /// Postings already stored (or repeated within the call), ignored.
    pub duplicates: u64,
}

/// Why an ingest or listing request failed.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// Bad feed id or cursor (`INVALID_ARGUMENT`).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<BadId> for IngestError {
    fn from(e: BadId) -> Self {
        IngestError::InvalidArgument(e.to_string())
    }
}

/// Postings of a feed after a cursor.
#[derive(Clone, Debug, PartialEq)]
pub struct Page {
    /// Postings in discovery order.
    pub postings: Vec<PostingRecord>,
    /// The cursor just after each posting (to cut a page short and resume right after).
    pub cursors: Vec<String>,
    /// Cursor to pass for the next page (the last posting's position; the given cursor
    /// again if the page is empty).
    pub next_cursor: String,
}

/// What ingest keeps between calls, behind one lock that also serializes the
/// check-then-write of concurrent reports for the same items.
#[derive(Default)]
struct Counters {
    /// Next global discovery number (loaded on first use).
    next_global: Option<u64>,
    /// Whether the store holds markers or sequence numbers of the layout before the ingest
    /// record (`item/`, `postseq/` keys), looked up on first use: they are then read beside
    /// the records until retention has removed them.
    legacy: Option<bool>,
}

/// Posting ingest over a store.
pub struct Ingestor<B> {
    pub(crate) store: Arc<B>,
    counters: tokio::sync::Mutex<Counters>,
    /// How long a marker is kept, from its feed's newest discovery (`None`: until the cap).
    markers: Option<Duration>,
}

impl<B: KvBackend> Ingestor<B> {
    /// An ingestor over `store`, keeping markers as long as the default retention does.
    pub fn new(store: Arc<B>) -> Self {
        Ingestor {
            store,
            counters: Default::default(),
            markers: Some(records::DEFAULT_MARKER_RETENTION),
        }
    }

    /// The same, keeping each feed's markers for `keep` after its newest discovery
    /// (`None`: up to [`records::MAX_MARKERS`] a feed, however old).
    pub fn with_marker_retention(mut self, keep: Option<Duration>) -> Self {
        self.markers = keep;
        self
    }

    /// Stores the postings of `feed` not seen before.
    pub async fn ingest(
        &self,
        feed: &str,
        postings: &[PostingRecord],
    ) -> Result<IngestCounts, IngestError> {
        self.ingest_many(&[(feed, postings)]).await
    }

    /// Stores the unseen postings of several feeds' reports with one snapshot read and one
    /// atomic write, which is what makes report ingest fast on a durable store.
    pub async fn ingest_many(
        &self,
        reports: &[(&str, &[PostingRecord])],
    ) -> Result<IngestCounts, IngestError> {
        let (counts, _) = self.ingest_many_with(reports, |_| Ok(Vec::new())).await?;
        Ok(counts)
    }

    /// Whether keys of the layout before the ingest record are in the store.
    async fn legacy(&self, counters: &mut Counters) -> Result<bool, IngestError> {
        if let Some(l) = counters.legacy {
            return Ok(l);
        }
        let mut found = false;
        for prefix in [
            Key::Item("", 0).prefix_of_kind(),
            Key::PostingSeq("").prefix_of_kind(),
        ] {
            found |= !self.store.range(prefix, None, 1).await?.is_empty();
        }
        counters.legacy = Some(found);
        Ok(found)
    }

    /// Like [`Ingestor::ingest_many`], and also writes the operations `extra` derives from
    /// which postings were new (`fresh[r][p]` for posting `p` of report `r`) in the same
    /// atomic batch, so state learned from new postings never disagrees with the postings
    /// stored. Returns the counts and the `fresh` flags.
    pub async fn ingest_many_with(
        &self,
        reports: &[(&str, &[PostingRecord])],
        extra: impl FnOnce(&[Vec<bool>]) -> Result<Vec<Op>, IngestError>,
    ) -> Result<(IngestCounts, Vec<Vec<bool>>), IngestError> {
        let mut counters = self.counters.lock().await;
        let global_start = match counters.next_global {
            Some(n) => n,
            None => match self.store.get(Key::DiscoverySeq.encode()?).await? {
                Some(b) => std::str::from_utf8(&b)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| StoreError("corrupt discovery sequence".into()))?,
                None => 0,
            },
        };
        let mut global = global_start;
        // The ingest records of the feeds that reported postings, in one read.
        let mut feeds: Vec<&str> = reports
            .iter()
            .filter(|(_, p)| !p.is_empty())
            .map(|(f, _)| *f)
            .collect();
        feeds.sort_unstable();
        feeds.dedup();
        let keys = feeds
            .iter()
            .map(|f| Key::Seen(f).encode())
            .collect::<Result<Vec<_>, _>>()?;
        let mut seen: HashMap<&str, Seen> = HashMap::with_capacity(feeds.len());
        let mut unrecorded = Vec::new();
        for (f, v) in feeds.iter().zip(self.store.get_many(keys).await?) {
            match v {
                Some(b) => {
                    seen.insert(f, Seen::decode(&b)?);
                }
                None => unrecorded.push(*f),
            }
        }
        // Stores from before the ingest record: sequence numbers of feeds without a record
        // and the old markers of the reported items, in two reads.
        let legacy = self.legacy(&mut counters).await?;
        let mut old_markers = HashSet::new();
        let mut moved_seq = Vec::new();
        if legacy {
            let keys = unrecorded
                .iter()
                .map(|f| Key::PostingSeq(f).encode())
                .collect::<Result<Vec<_>, _>>()?;
            for (f, v) in unrecorded.iter().zip(self.store.get_many(keys).await?) {
                let next_seq = match v {
                    Some(b) => {
                        moved_seq.push(*f);
                        legacy_seq(f, &b)?
                    }
                    None => 0,
                };
                seen.insert(
                    f,
                    Seen {
                        next_seq,
                        ..Seen::default()
                    },
                );
            }
            let mut asked = Vec::new();
            let mut keys = Vec::new();
            for (feed, postings) in reports {
                for p in postings.iter() {
                    asked.push((*feed, p.item_id_hash));
                    keys.push(Key::Item(feed, p.item_id_hash).encode()?);
                }
            }
            for (k, v) in asked.into_iter().zip(self.store.get_many(keys).await?) {
                if v.is_some() {
                    old_markers.insert(k);
                }
            }
        } else {
            for f in unrecorded {
                seen.insert(f, Seen::default());
            }
        }
        let mut counts = IngestCounts::default();
        let mut ops = Vec::new();
        let mut in_call = HashSet::new();
        let mut changed: HashSet<&str> = HashSet::new();
        let mut fresh: Vec<Vec<bool>> = Vec::with_capacity(reports.len());
        for (feed, postings) in reports {
            let mut flags = Vec::with_capacity(postings.len());
            for p in postings.iter() {
                let record = seen
                    .get_mut(feed)
                    .expect("every reporting feed has a record");
                let new = !record.contains(p.item_id_hash)
                    && !old_markers.contains(&(*feed, p.item_id_hash))
                    && in_call.insert((*feed, p.item_id_hash));
                flags.push(new);
                if !new {
                    counts.duplicates += 1;
                    continue;
                }
                let seq = record.next_seq;
                record.next_seq += 1;
                record.push(p.item_id_hash, p.discovered_unix_ms);
                changed.insert(feed);
                ops.push(Op::Put(
                    Key::Posting(feed, seq).encode()?,
                    records::encode_posting(p),
                ));
                ops.push(Op::Put(
                    Key::Discovery(global).encode()?,
                    format!("{feed}/{seq}").into_bytes(),
                ));
                global += 1;
                counts.new += 1;
            }
            fresh.push(flags);
        }
        let mut expired = 0;
        for feed in &changed {
            let record = seen.get_mut(feed).expect("changed feeds have records");
            expired += record.prune(self.markers) as u64;
            ops.push(Op::Put(Key::Seen(feed).encode()?, record.encode()));
        }
        // The old counter is now in the record.
        for feed in moved_seq {
            if changed.contains(feed) {
                ops.push(Op::Delete(Key::PostingSeq(feed).encode()?));
            }
        }
        if global != global_start {
            ops.push(Op::Put(
                Key::DiscoverySeq.encode()?,
                global.to_string().into_bytes(),
            ));
        }
        ops.extend(extra(&fresh)?);
        if !ops.is_empty() {
            self.store.batch(ops).await?;
        }
        counters.next_global = Some(global);
        crate::metrics::record_pruned(0, expired);
        Ok((counts, fresh))
    }

    /// Forgets a removed feed's postings and item markers: its posting records (`post/`)
    /// and legacy markers (`item/`) are deleted, in batches, and its ingest record keeps
    /// only the next posting number (markers dropped). The number stays because the
    /// discovery index may still name the feed's old postings until retention reaches
    /// them: a feed registered again under the id must not write a posting where an old
    /// entry points (retention would read it as the old one, inside its horizon, and stop
    /// there). Returns how many records went.
    pub async fn forget_feed(&self, feed: &str) -> Result<u64, IngestError> {
        // Ingest's check-then-write of this feed's record cannot interleave.
        let _counters = self.counters.lock().await;
        let mut deleted = 0u64;
        for prefix in [
            Key::Posting(feed, 0).prefix()?,
            Key::Item(feed, 0).prefix()?,
        ] {
            // Paged from after the last key deleted: progress does not rest on the store
            // having dropped the page before.
            let mut after = None;
            loop {
                let page = self
                    .store
                    .range(prefix.clone(), after, FORGET_BATCH)
                    .await?;
                let Some((last, _)) = page.last() else { break };
                after = Some(last.clone());
                deleted += page.len() as u64;
                let ops = page.into_iter().map(|(k, _)| Op::Delete(k)).collect();
                self.store.batch(ops).await?;
            }
        }
        let seen_key = Key::Seen(feed).encode()?;
        let seq_key = Key::PostingSeq(feed).encode()?;
        let next_seq = match self.store.get(seen_key.clone()).await? {
            Some(b) => Some(Seen::decode(&b)?.next_seq),
            // A store from before the ingest record keeps the number in its own key.
            None => match self.store.get(seq_key.clone()).await? {
                Some(b) => Some(legacy_seq(feed, &b)?),
                None => None,
            },
        };
        if let Some(next_seq) = next_seq {
            let kept = Seen {
                next_seq,
                markers: Vec::new(),
            };
            self.store
                .batch(vec![Op::Put(seen_key, kept.encode()), Op::Delete(seq_key)])
                .await?;
        }
        Ok(deleted)
    }

    /// Up to `limit` postings of any of `feeds` discovered after `cursor` (empty = from the
    /// first), in global discovery order. At most `scan` index entries are read per call,
    /// so a page may come back short (even empty) with an advanced cursor: keep paging
    /// until the cursor stops moving.
    pub async fn list_for(
        &self,
        feeds: &HashSet<String>,
        cursor: &str,
        limit: usize,
        scan: usize,
    ) -> Result<(Vec<(String, PostingRecord, String)>, String), IngestError> {
        let after = if cursor.is_empty() {
            None
        } else {
            let n = u64::from_str_radix(cursor, 16).map_err(|_| {
                IngestError::InvalidArgument(format!(
                    "cursor `{cursor}` is not one this server issued"
                ))
            })?;
            Some(Key::Discovery(n).encode()?)
        };
        let prefix = Key::Discovery(0).prefix()?;
        // Feed, posting number, and the cursor just after it.
        let mut wanted: Vec<(String, u64, String)> = Vec::new();
        let mut last = after.clone();
        let mut scanned = 0;
        while wanted.len() < limit && scanned < scan {
            let rows = self
                .store
                .range(prefix.clone(), last.clone(), (scan - scanned).min(1000))
                .await?;
            let Some((k, _)) = rows.last() else { break };
            last = Some(k.clone());
            scanned += rows.len();
            for (k, v) in &rows {
                let text = String::from_utf8_lossy(v);
                let mut parts = text.split('/');
                let (Some(feed), Some(seq)) = (parts.next(), parts.next()) else {
                    return Err(StoreError(format!("corrupt discovery entry {text}")).into());
                };
                // Four parts: the posting is gone (retention), its entry waits to expire.
                let pruned = parts.next().is_some();
                if !pruned && feeds.contains(feed) {
                    let seq = seq
                        .parse()
                        .map_err(|_| StoreError(format!("corrupt discovery entry {text}")))?;
                    let after = String::from_utf8_lossy(&k[k.len() - 16..]).into_owned();
                    wanted.push((feed.to_string(), seq, after));
                    if wanted.len() == limit {
                        last = Some(k.clone());
                        break;
                    }
                }
            }
        }
        let keys = wanted
            .iter()
            .map(|(f, s, _)| Key::Posting(f, *s).encode())
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = Vec::with_capacity(wanted.len());
        for ((feed, _, after), v) in wanted.into_iter().zip(self.store.get_many(keys).await?) {
            // A feed removed since keeps its postings; a missing one is skipped.
            if let Some(v) = v {
                out.push((feed, records::decode_posting(&v)?, after));
            }
        }
        let next = match last {
            Some(k) if Some(&k) != after.as_ref() => {
                String::from_utf8_lossy(&k[k.len() - 16..]).into_owned()
            }
            _ => cursor.to_string(),
        };
        Ok((out, next))
    }

    /// Up to `limit` postings of `feed` after `cursor` (empty = from the first).
    pub async fn list(&self, feed: &str, cursor: &str, limit: usize) -> Result<Page, IngestError> {
        let after = if cursor.is_empty() {
            None
        } else {
            let seq = u64::from_str_radix(cursor, 16).map_err(|_| {
                IngestError::InvalidArgument(format!(
                    "cursor `{cursor}` is not one this server issued"
                ))
            })?;
            Some(Key::Posting(feed, seq).encode()?)
        };
        let rows = self
            .store
            .range(Key::Posting(feed, 0).prefix()?, after, limit)
            .await?;
        let mut postings = Vec::with_capacity(rows.len());
        let mut cursors = Vec::with_capacity(rows.len());
        for (k, v) in &rows {
            postings.push(records::decode_posting(v)?);
            cursors.push(String::from_utf8_lossy(&k[k.len() - 16..]).into_owned());
        }
        let next_cursor = match rows.last() {
            Some((k, _)) => String::from_utf8_lossy(&k[k.len() - 16..]).into_owned(),
            None => cursor.to_string(),
        };
        Ok(Page {
            postings,
            cursors,
            next_cursor,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryBackend;

    fn p(id: u64) -> PostingRecord {
        PostingRecord {
            item_id_hash: id,
            link: None,
            title: Some(format!("t{id}")),
            published_unix_ms: None,
            discovered_unix_ms: id as i64,
        }
    }

    /// A feed forgotten from a store of the layout before the ingest record: its postings
    /// (more than one batch of them) and `item/` markers go, and its `postseq/` counter
    /// moves into a record of its own with no markers; another feed is untouched.
    #[test]
    fn a_forgotten_feed_keeps_its_next_number_and_nothing_else() {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async {
                let store = Arc::new(MemoryBackend::new());
                let mut ops = Vec::new();
                for seq in 0..(FORGET_BATCH as u64 + 20) {
                    ops.push(Op::Put(
                        Key::Posting("old", seq).encode().unwrap(),
                        records::encode_posting(&p(seq)),
                    ));
                    ops.push(Op::Put(
                        Key::Item("old", seq).encode().unwrap(),
                        b"1".to_vec(),
                    ));
                }
                let next = FORGET_BATCH as u64 + 20;
                ops.push(Op::Put(
                    Key::PostingSeq("old").encode().unwrap(),
                    next.to_string().into_bytes(),
                ));
                store.batch(ops).await.unwrap();
                let ing = Ingestor::new(store.clone());
                ing.ingest("other", &[p(1)]).await.unwrap();
                let deleted = ing.forget_feed("old").await.unwrap();
                assert_eq!(deleted, 2 * next);
                for prefix in [
                    Key::Posting("old", 0).prefix().unwrap(),
                    Key::Item("old", 0).prefix().unwrap(),
                ] {
                    assert!(store.range(prefix, None, 10).await.unwrap().is_empty());
                }
                let key = |k: Key<'_>| k.encode().unwrap();
                assert_eq!(store.get(key(Key::PostingSeq("old"))).await.unwrap(), None);
                let kept = Seen::decode(&store.get(key(Key::Seen("old"))).await.unwrap().unwrap())
                    .unwrap();
                assert_eq!(
                    kept,
                    Seen {
                        next_seq: next,
                        markers: Vec::new()
                    }
                );
                assert!(store
                    .get(key(Key::Posting("other", 0)))
                    .await
                    .unwrap()
                    .is_some());
                // A feed never ingested leaves no record behind.
                assert_eq!(ing.forget_feed("never").await.unwrap(), 0);
                assert_eq!(store.get(key(Key::Seen("never"))).await.unwrap(), None);
            });
    }

    #[test]
    fn postings_of_a_set_of_feeds_page_in_discovery_order_with_short_scans() {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async {
                let ing = Ingestor::new(Arc::new(MemoryBackend::new()));
                // Interleaved discoveries over three feeds; the user reads a and c.
                for round in 0..10u64 {
                    for f in ["a", "b", "c"] {
                        ing.ingest(f, &[p(round)]).await.unwrap();
                    }
                }
                // A repeat adds nothing to the index.
                ing.ingest("a", &[p(3)]).await.unwrap();
                let feeds: HashSet<String> = ["a", "c"].iter().map(|s| s.to_string()).collect();
                let mut cursor = String::new();
                let mut seen = Vec::new();
                for _ in 0..100 {
                    let (page, next) = ing.list_for(&feeds, &cursor, 3, 4).await.unwrap();
                    assert!(page.len() <= 3);
                    seen.extend(page.into_iter().map(|(f, p, _)| (f, p.item_id_hash)));
                    if next == cursor {
                        break;
                    }
                    cursor = next;
                }
                let want: Vec<(String, u64)> = (0..10u64)
                    .flat_map(|r| [("a".to_string(), r), ("c".to_string(), r)])
                    .collect();
                assert_eq!(seen, want);
                // New postings continue from the last cursor.
                ing.ingest("c", &[p(99)]).await.unwrap();
                let (page, _) = ing.list_for(&feeds, &cursor, 10, 100).await.unwrap();
                assert_eq!(page.len(), 1);
                assert_eq!(page[0].1.item_id_hash, 99);
                assert!(ing.list_for(&feeds, "zz", 1, 1).await.is_err());
            });
    }

    #[test]
    fn at_least_once_delivery_stores_each_item_once() {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async {
                let store = Arc::new(MemoryBackend::new());
                let ing = Ingestor::new(store.clone());
                assert_eq!(
                    ing.ingest("f", &[p(1), p(2), p(2)]).await.unwrap(),
                    IngestCounts {
                        new: 2,
                        duplicates: 1
                    }
                );
                // The same report again (a retry), then an overlapping one.
                assert_eq!(
                    ing.ingest("f", &[p(1), p(2)]).await.unwrap(),
                    IngestCounts {
                        new: 0,
                        duplicates: 2
                    }
                );
                assert_eq!(
                    ing.ingest("f", &[p(2), p(3)]).await.unwrap(),
                    IngestCounts {
                        new: 1,
                        duplicates: 1
                    }
                );
                // A restarted coordinator (fresh ingestor, same store) keeps both the dedupe and the sequence.
                let again = Ingestor::new(store);
                assert_eq!(
                    again.ingest("f", &[p(3), p(4)]).await.unwrap(),
                    IngestCounts {
                        new: 1,
                        duplicates: 1
                    }
                );
                let mut cursor = String::new();
                let mut titles = Vec::new();
                loop {
                    let page = again.list("f", &cursor, 2).await.unwrap();
                    if page.postings.is_empty() {
                        break;
                    }
                    titles.extend(page.postings.iter().map(|p| p.title.clone().unwrap()));
                    cursor = page.next_cursor;
                }
                assert_eq!(
                    titles,
                    ["t1", "t2", "t3", "t4"],
                    "each item once, in discovery order"
                );
                assert!(matches!(
                    again.list("f", "zz", 2).await,
                    Err(IngestError::InvalidArgument(_))
                ));
                assert!(matches!(
                    again.ingest("a/b", &[p(1)]).await,
                    Err(IngestError::InvalidArgument(_))
                ));
            });
    }

    #[test]
    fn many_feeds_in_one_call_dedupe_per_feed() {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async {
                let ing = Ingestor::new(Arc::new(MemoryBackend::new()));
                let (a, b) = (vec![p(1), p(2)], vec![p(1), p(1)]);
                let got = ing
                    .ingest_many(&[("fa", &a), ("fb", &b), ("fa", &a)])
                    .await
                    .unwrap();
                // Item 1 in feed fb is a different item from item 1 in feed fa.
                assert_eq!(
                    got,
                    IngestCounts {
                        new: 3,
                        duplicates: 3
                    }
                );
                assert_eq!(ing.list("fb", "", 10).await.unwrap().postings.len(), 1);
                assert_eq!(ing.list("fa", "", 10).await.unwrap().postings.len(), 2);
            });
    }
}
