//! How ingest's records are stored: compact binary forms, because on etcd every byte of a
//! posting is paid once per posting and every key costs about a hundred bytes more
//! (docs/STATE.md).
//!
//! * A posting (`post/FEED/SEQ`) is a protobuf message behind a format byte. Stores written
//!   before 2026-11-27 hold JSON, which starts with `{` and is still read.
//! * A feed's ingest record (`seen/FEED`) holds the feed's next posting sequence number and
//!   the items ingested lately with their discovery times: the idempotency markers of the
//!   whole feed in one key, where there was one `item/` key per item (and a `postseq/` key)
//!   before. Markers leave the record once they are older than the marker retention,
//!   measured from the feed's newest discovery (so no clock is needed and a quiet feed keeps
//!   its few markers), and the record never holds more than [`MAX_MARKERS`].

use super::PostingRecord;
use crate::store::StoreError;
use prost::Message;

/// The format byte of a binary posting.
const POSTING_V1: u8 = 1;
/// The format byte of a binary ingest record.
const SEEN_V1: u8 = 1;

/// How long a marker is kept by default (`--item-marker-retention`): a feed's document
/// rarely shows an item for longer.
pub const DEFAULT_MARKER_RETENTION: std::time::Duration =
    std::time::Duration::from_secs(30 * 86_400);

/// Most markers one feed keeps. A document shows at most a few hundred items, so an item
/// still shown has been ingested among the feed's last few thousand; a feed that posts more
/// than this within the marker retention (a flood) keeps only its newest.
pub const MAX_MARKERS: usize = 4096;

#[derive(Clone, PartialEq, Message)]
struct PostingV1 {
    #[prost(fixed64, tag = "1")]
    item_id_hash: u64,
    #[prost(string, optional, tag = "2")]
    link: Option<String>,
    #[prost(string, optional, tag = "3")]
    title: Option<String>,
    #[prost(int64, optional, tag = "4")]
    published_unix_ms: Option<i64>,
    #[prost(int64, tag = "5")]
    discovered_unix_ms: i64,
}

/// A posting as stored.
pub fn encode_posting(p: &PostingRecord) -> Vec<u8> {
    let m = PostingV1 {
        item_id_hash: p.item_id_hash,
        link: p.link.clone(),
        title: p.title.clone(),
        published_unix_ms: p.published_unix_ms,
        discovered_unix_ms: p.discovered_unix_ms,
    };
    let mut out = Vec::with_capacity(1 + m.encoded_len());
    out.push(POSTING_V1);
    m.encode(&mut out).expect("a Vec grows");
    out
}

/// A stored posting, binary or (written before the binary form) JSON.
pub fn decode_posting(v: &[u8]) -> Result<PostingRecord, StoreError> {
    match v.first() {
        Some(&POSTING_V1) => {
            let m = PostingV1::decode(&v[1..])
                .map_err(|e| StoreError(format!("corrupt posting: {e}")))?;
            Ok(PostingRecord {
                item_id_hash: m.item_id_hash,
                link: m.link,
                title: m.title,
                published_unix_ms: m.published_unix_ms,
                discovered_unix_ms: m.discovered_unix_ms,
            })
        }
        Some(b'{') => {
            serde_json::from_slice(v).map_err(|e| StoreError(format!("corrupt posting: {e}")))
        }
        _ => Err(StoreError("corrupt posting: unknown format".into())),
    }
}

#[derive(Clone, PartialEq, Message)]
struct SeenV1 {
    #[prost(uint64, tag = "1")]
    next_seq: u64,
    #[prost(fixed64, repeated, tag = "2")]
    items: Vec<u64>,
    /// Discovery times in seconds, each as the difference from the one before (the first
    /// from zero): a feed's discoveries are close together, so most take two or three bytes.
    #[prost(sint64, repeated, tag = "3")]
    discovered_delta_s: Vec<i64>,
}

/// A feed's ingest record: its next posting number and its markers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// The sequence number the feed's next new posting takes.
    pub next_seq: u64,
    /// Items ingested, with their discovery times in Unix seconds, oldest first.
    pub markers: Vec<(u64, i64)>,
}

impl Seen {
    /// Whether `item` was ingested (and its marker is still kept).
    pub fn contains(&self, item: u64) -> bool {
        self.markers.iter().any(|&(i, _)| i == item)
    }

    /// Records an item discovered at `discovered_ms`.
    pub fn push(&mut self, item: u64, discovered_ms: i64) {
        self.markers.push((item, discovered_ms.div_euclid(1000)));
    }

    /// Drops the markers older than `keep` before the newest one, then the oldest past
    /// [`MAX_MARKERS`]; returns how many went. `keep` of `None` keeps markers for ever
    /// (within the cap).
    pub fn prune(&mut self, keep: Option<std::time::Duration>) -> usize {
        let before = self.markers.len();
        if let Some(keep) = keep {
            if let Some(newest) = self.markers.iter().map(|m| m.1).max() {
                let cutoff = newest.saturating_sub(keep.as_secs().min(i64::MAX as u64) as i64);
                self.markers.retain(|m| m.1 >= cutoff);
            }
        }
        if self.markers.len() > MAX_MARKERS {
            let over = self.markers.len() - MAX_MARKERS;
            self.markers.drain(..over);
        }
        before - self.markers.len()
    }

    /// The record as stored.
    pub fn encode(&self) -> Vec<u8> {
        let mut last = 0i64;
        let m = SeenV1 {
            next_seq: self.next_seq,
            items: self.markers.iter().map(|m| m.0).collect(),
            discovered_delta_s: self
                .markers
                .iter()
                .map(|m| {
                    let d = m.1.wrapping_sub(last);
                    last = m.1;
                    d
                })
                .collect(),
        };
        let mut out = Vec::with_capacity(1 + m.encoded_len());
        out.push(SEEN_V1);
        m.encode(&mut out).expect("a Vec grows");
        out
    }

    /// A stored record.
    pub fn decode(v: &[u8]) -> Result<Seen, StoreError> {
        let corrupt = |why: &str| StoreError(format!("corrupt ingest record: {why}"));
        if v.first() != Some(&SEEN_V1) {
            return Err(corrupt("unknown format"));
        }
        let m = SeenV1::decode(&v[1..]).map_err(|e| corrupt(&e.to_string()))?;
        if m.items.len() != m.discovered_delta_s.len() {
            return Err(corrupt("items and times differ in number"));
        }
        let mut at = 0i64;
        let markers = m
            .items
            .into_iter()
            .zip(m.discovered_delta_s)
            .map(|(i, d)| {
                at = at.wrapping_add(d);
                (i, at)
            })
            .collect();
        Ok(Seen {
            next_seq: m.next_seq,
            markers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn posting() -> PostingRecord {
        PostingRecord {
            item_id_hash: 0xdead_beef_0000_0001,
            link: Some("http://127.0.0.1/blog/2026/11/a-posting.html".into()),
            title: Some("A posting, titled at some length".into()),
            published_unix_ms: Some(1_795_000_000_000),
            discovered_unix_ms: 1_795_000_060_000,
        }
    }

    #[test]
    fn postings_round_trip_and_json_of_older_stores_still_reads() {
        let p = posting();
        let bin = encode_posting(&p);
        let json = serde_json::to_vec(&p).unwrap();
        assert_eq!(decode_posting(&bin).unwrap(), p);
        assert_eq!(decode_posting(&json).unwrap(), p);
        assert!(
            bin.len() + 60 < json.len(),
            "binary {} against JSON {}",
            bin.len(),
            json.len()
        );
        let bare = PostingRecord {
            link: None,
            title: None,
            published_unix_ms: None,
            item_id_hash: 0,
            discovered_unix_ms: -5,
        };
        assert_eq!(decode_posting(&encode_posting(&bare)).unwrap(), bare);
        assert!(decode_posting(b"").is_err());
        assert!(decode_posting(&[9, 1, 2]).is_err());
        assert!(decode_posting(&[POSTING_V1, 0xff, 0xff]).is_err());
    }

    #[test]
    fn markers_round_trip_expire_from_the_newest_and_are_capped() {
        let mut s = Seen {
            next_seq: 41,
            ..Seen::default()
        };
        let day = 86_400_000i64;
        for d in 0..40i64 {
            s.push(1000 + d as u64, 1_795_000_000_000 + d * day);
        }
        let bin = s.encode();
        assert_eq!(Seen::decode(&bin).unwrap(), s);
        // 8 bytes an item and a few for its time: far under the 100-odd a key costs.
        assert!(bin.len() < 40 * 13, "{}", bin.len());
        assert!(s.contains(1000) && !s.contains(999));
        assert_eq!(s.prune(Some(Duration::from_secs(30 * 86_400))), 9);
        assert_eq!(
            s.markers.len(),
            31,
            "days 9 to 39: within 30 days of day 39"
        );
        assert!(!s.contains(1008) && s.contains(1009));
        // Out-of-order discovery times (a report retried late) still round-trip.
        s.push(7, 1_000);
        assert_eq!(Seen::decode(&s.encode()).unwrap(), s);
        let mut flood = Seen::default();
        for i in 0..(MAX_MARKERS as u64 + 10) {
            flood.push(i, 5_000);
        }
        assert_eq!(flood.prune(None), 10);
        assert_eq!(flood.markers.len(), MAX_MARKERS);
        assert!(
            !flood.contains(9) && flood.contains(10),
            "the oldest go first"
        );
        assert!(Seen::decode(b"{}").is_err());
        assert!(Seen::decode(&[SEEN_V1, 0x12, 0x01, 0x00]).is_err());
    }
}
