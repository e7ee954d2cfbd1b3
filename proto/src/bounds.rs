//! What one message of the worker's report stream may carry, and how a worker keeps every
//! fetch's report under it.
//!
//! A fetch report is built from a document a stranger wrote: a feed can serve 1 MiB titles
//! or 300,000 tiny items. The coordinator refuses gRPC messages over its decoding limit
//! whole, and a refused message breaks the stream, so a worker that sent one would resend it
//! forever. Instead, nothing leaves a worker over these bounds:
//!
//! * every field a feed controls is clipped at a stated length ([`clip_posting`]);
//! * one fetch reports at most [`MAX_POSTINGS_PER_FETCH`] new postings (the rest stay unseen
//!   on the worker and come with a later fetch, counted in `postings_withheld`);
//! * a report holding more than [`MAX_POSTINGS_PER_MESSAGE`] postings, or more than
//!   [`MAX_MESSAGE_BYTES`] encoded, is split ([`split_fetch`]): the first part carries the
//!   outcome and the first postings, each further part (`continuation`) only more postings
//!   of the same fetch, and is not counted as a fetch;
//! * relayed access batches are split at [`MAX_ACCESS_EVENTS_PER_MESSAGE`] events
//!   ([`split_accesses`]), with ids no longer than [`MAX_ID_BYTES`].
//!
//! The coordinator checks each message against the same bounds ([`check_message`]) and
//! refuses a message that breaks them alone, with a reason, acknowledging the rest.

use crate::v1 as pb;
use prost::Message;

/// Longest posting title kept, in bytes (cut at a character boundary).
pub const MAX_TITLE_BYTES: usize = 1024;
/// Longest posting link kept, in bytes; a longer link is dropped, not cut (a cut URL
/// points somewhere else).
pub const MAX_LINK_BYTES: usize = 2048;
/// Longest feed title a report carries.
pub const MAX_FEED_TITLE_BYTES: usize = 512;
/// Longest site URL a report carries (dropped when longer).
pub const MAX_SITE_URL_BYTES: usize = 2048;
/// WebSub hubs a report names at most, and the longest hub or topic URL it carries
/// (dropped when longer).
pub const MAX_WEBSUB_HUBS: usize = 4;
pub const MAX_WEBSUB_URL_BYTES: usize = 2048;
/// Longest error text a report carries.
pub const MAX_ERROR_BYTES: usize = 1024;
/// Longest validator (`ETag`, `Last-Modified`) a report carries (dropped when longer).
pub const MAX_VALIDATOR_BYTES: usize = 1024;
/// Longest redirect target a report carries (dropped when longer).
pub const MAX_REDIRECT_BYTES: usize = 4096;
/// Longest user or feed id in an access event.
pub const MAX_ID_BYTES: usize = 256;
/// New postings one fetch reports at most.
pub const MAX_POSTINGS_PER_FETCH: usize = 5_000;
/// Postings one report message carries at most.
pub const MAX_POSTINGS_PER_MESSAGE: usize = 500;
/// Access events one report message carries at most.
pub const MAX_ACCESS_EVENTS_PER_MESSAGE: usize = 2_000;
/// Encoded size a worker keeps each report message under. The coordinator's decoding limit
/// on the report stream is [`MAX_DECODE_BYTES`], four times this, so a message at these
/// bounds is never refused for its size.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;
/// The coordinator's decoding limit on WorkerControl messages.
pub const MAX_DECODE_BYTES: usize = 4 << 20;
/// Largest pushed document (WebSub content) the coordinator takes and hands to a worker:
/// under the worker's decoding limit on its task stream ([`MAX_DECODE_BYTES`]) with room
/// for the task's other fields.
pub const MAX_PUSHED_BODY_BYTES: usize = 3 << 20;

/// The longest prefix of `s` of at most `max` bytes that ends at a character boundary
/// (for a message that quotes the head of a long value without copying all of it).
pub fn prefix(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `s` cut to at most `max` bytes at a character boundary.
pub fn clip(s: &mut String, max: usize) -> bool {
    let end = prefix(s, max).len();
    let cut = end < s.len();
    s.truncate(end);
    cut
}

/// `s` emptied when longer than `max` (for values a cut would falsify: URLs, validators).
fn drop_if_longer(s: &mut String, max: usize) -> bool {
    if s.len() <= max {
        return false;
    }
    s.clear();
    true
}

/// Clips a posting's feed-controlled fields to the bounds; true when anything changed.
pub fn clip_posting(p: &mut pb::Posting) -> bool {
    let t = clip(&mut p.title, MAX_TITLE_BYTES);
    let l = drop_if_longer(&mut p.link, MAX_LINK_BYTES);
    t | l
}

/// Clips a fetch report's own fields (not its postings); true when anything changed.
pub fn clip_fetch_fields(r: &mut pb::FetchReport) -> bool {
    let mut changed = clip(&mut r.feed_title, MAX_FEED_TITLE_BYTES);
    changed |= drop_if_longer(&mut r.site_url, MAX_SITE_URL_BYTES);
    changed |= clip(&mut r.error, MAX_ERROR_BYTES);
    changed |= drop_if_longer(&mut r.etag, MAX_VALIDATOR_BYTES);
    changed |= drop_if_longer(&mut r.last_modified, MAX_VALIDATOR_BYTES);
    changed |= drop_if_longer(&mut r.redirected_to, MAX_REDIRECT_BYTES);
    changed |= clip(&mut r.format, 32);
    changed |= drop_if_longer(&mut r.websub_topic, MAX_WEBSUB_URL_BYTES);
    let hubs = r.websub_hubs.len();
    r.websub_hubs
        .retain(|h| h.len() <= MAX_WEBSUB_URL_BYTES && !h.is_empty());
    r.websub_hubs.truncate(MAX_WEBSUB_HUBS);
    changed |= r.websub_hubs.len() != hubs;
    changed
}

/// One fetch's report as messages within the bounds: the first part is the report with its
/// first postings; each further part is a `continuation` with the same feed and times and
/// only postings. Fields are clipped first. Postings are never lost or reordered.
pub fn split_fetch(mut r: pb::FetchReport) -> Vec<pb::FetchReport> {
    clip_fetch_fields(&mut r);
    for p in &mut r.new_postings {
        clip_posting(p);
    }
    let postings = std::mem::take(&mut r.new_postings);
    // Room for postings once the report's own fields are counted.
    let budget = MAX_MESSAGE_BYTES.saturating_sub(r.encoded_len() + 64);
    let mut parts: Vec<pb::FetchReport> = Vec::new();
    let mut current: Vec<pb::Posting> = Vec::new();
    let mut bytes = 0usize;
    for p in postings {
        // A clipped posting is at most about 3.1 KB, far below the budget.
        let size = p.encoded_len() + 4;
        if !current.is_empty()
            && (current.len() == MAX_POSTINGS_PER_MESSAGE || bytes + size > budget)
        {
            parts.push(part_of(&r, std::mem::take(&mut current), parts.is_empty()));
            bytes = 0;
        }
        bytes += size;
        current.push(p);
    }
    parts.push(part_of(&r, current, parts.is_empty()));
    parts
}

fn part_of(head: &pb::FetchReport, postings: Vec<pb::Posting>, first: bool) -> pb::FetchReport {
    if first {
        let mut r = head.clone();
        r.new_postings = postings;
        return r;
    }
    pb::FetchReport {
        feed_id: head.feed_id.clone(),
        outcome: head.outcome,
        scheduled_unix_ms: head.scheduled_unix_ms,
        started_unix_ms: head.started_unix_ms,
        finished_unix_ms: head.finished_unix_ms,
        new_postings: postings,
        continuation: true,
        ..Default::default()
    }
}

/// Why an access event is refused at the edge, if it is.
pub fn check_access(e: &pb::AccessEvent) -> Result<(), String> {
    if e.user_id.is_empty() {
        return Err("every event needs a user_id".into());
    }
    if e.user_id.len() > MAX_ID_BYTES || e.feed_id.len() > MAX_ID_BYTES {
        return Err(format!(
            "user and feed ids are at most {MAX_ID_BYTES} bytes"
        ));
    }
    Ok(())
}

/// Access events in batches of at most [`MAX_ACCESS_EVENTS_PER_MESSAGE`], order kept.
pub fn split_accesses(events: Vec<pb::AccessEvent>) -> Vec<Vec<pb::AccessEvent>> {
    let mut out = Vec::with_capacity(events.len().div_ceil(MAX_ACCESS_EVENTS_PER_MESSAGE));
    let mut it = events.into_iter().peekable();
    while it.peek().is_some() {
        out.push(it.by_ref().take(MAX_ACCESS_EVENTS_PER_MESSAGE).collect());
    }
    out
}

/// Why the coordinator refuses one report message, if it does: more postings or events
/// than a message may carry, or a field over its bound.
pub fn check_message(body: &pb::report_message::Body) -> Result<(), String> {
    match body {
        pb::report_message::Body::Fetch(r) => {
            if r.new_postings.len() > MAX_POSTINGS_PER_MESSAGE {
                return Err(format!(
                    "{} postings in one message (at most {MAX_POSTINGS_PER_MESSAGE}; split the report)",
                    r.new_postings.len()
                ));
            }
            for p in &r.new_postings {
                if p.title.len() > MAX_TITLE_BYTES || p.link.len() > MAX_LINK_BYTES {
                    return Err(format!(
                        "a posting's title or link is over its bound ({MAX_TITLE_BYTES} / {MAX_LINK_BYTES} bytes)"
                    ));
                }
            }
            let fields = [
                (r.feed_title.len(), MAX_FEED_TITLE_BYTES),
                (r.site_url.len(), MAX_SITE_URL_BYTES),
                (r.error.len(), MAX_ERROR_BYTES),
                (r.etag.len(), MAX_VALIDATOR_BYTES),
                (r.last_modified.len(), MAX_VALIDATOR_BYTES),
                (r.redirected_to.len(), MAX_REDIRECT_BYTES),
                (r.format.len(), 32),
                (r.websub_topic.len(), MAX_WEBSUB_URL_BYTES),
                (r.websub_hubs.len(), MAX_WEBSUB_HUBS),
            ];
            if fields.iter().any(|&(n, max)| n > max)
                || r.websub_hubs.iter().any(|h| h.len() > MAX_WEBSUB_URL_BYTES)
            {
                return Err("a report field is over its bound".into());
            }
            Ok(())
        }
        pb::report_message::Body::Accesses(b) => {
            if b.events.len() > MAX_ACCESS_EVENTS_PER_MESSAGE {
                return Err(format!(
                    "{} access events in one message (at most {MAX_ACCESS_EVENTS_PER_MESSAGE})",
                    b.events.len()
                ));
            }
            b.events.iter().try_for_each(check_access)
        }
        pb::report_message::Body::HubAnswer(a) => {
            let fields = [
                (a.feed_id.len(), MAX_ID_BYTES),
                (a.mode.len(), 16),
                (a.hub.len(), MAX_WEBSUB_URL_BYTES),
                (a.accepted_by.len(), MAX_WEBSUB_URL_BYTES),
                (a.error.len(), MAX_ERROR_BYTES),
            ];
            if fields.iter().any(|&(n, max)| n > max) {
                return Err("a hub answer's field is over its bound".into());
            }
            Ok(())
        }
    }
}

/// A hub's answer cut to the bounds [`check_message`] holds it to (a URL over its bound is
/// dropped, text is cut).
pub fn clip_hub_answer(a: &mut pb::HubAnswer) {
    clip(&mut a.feed_id, MAX_ID_BYTES);
    clip(&mut a.mode, 16);
    drop_if_longer(&mut a.hub, MAX_WEBSUB_URL_BYTES);
    drop_if_longer(&mut a.accepted_by, MAX_WEBSUB_URL_BYTES);
    clip(&mut a.error, MAX_ERROR_BYTES);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn posting(i: u64, title: usize) -> pb::Posting {
        pb::Posting {
            item_id_hash: i,
            title: "é".repeat(title),
            link: format!("https://example.org/{i}"),
            published_unix_ms: Some(1_700_000_000_000),
            discovered_unix_ms: 1_700_000_000_000,
        }
    }

    fn report(postings: Vec<pb::Posting>) -> pb::FetchReport {
        pb::FetchReport {
            feed_id: "f".into(),
            outcome: pb::FetchOutcome::Ok as i32,
            finished_unix_ms: 1_700_000_000_000,
            items_in_document: postings.len() as u32,
            new_postings: postings,
            feed_title: "t".repeat(10_000),
            ..Default::default()
        }
    }

    #[test]
    fn prefixes_and_clips_end_on_a_character_boundary() {
        // "é" is two bytes: 5 bytes of "ééé" end inside the third.
        assert_eq!(prefix("ééé", 5), "éé");
        assert_eq!(prefix("ééé", 6), "ééé");
        assert_eq!(prefix("ééé", 100), "ééé");
        assert_eq!(prefix("é", 1), "");
        let mut s = "ééé".to_string();
        assert!(clip(&mut s, 5));
        assert_eq!(s, "éé");
        assert!(!clip(&mut s, 4));
        assert_eq!(s, "éé");
    }

    #[test]
    fn huge_titles_are_clipped_and_parts_stay_under_the_bounds() {
        // The case that looped a worker: eight items with 1 MiB titles.
        let parts = split_fetch(report((0..8).map(|i| posting(i, 1 << 19)).collect()));
        assert_eq!(parts.len(), 1, "eight clipped postings fit one message");
        let p = &parts[0];
        assert_eq!(p.new_postings.len(), 8);
        assert!(p
            .new_postings
            .iter()
            .all(|p| p.title.len() <= MAX_TITLE_BYTES));
        assert_eq!(
            p.new_postings[0].title.len(),
            MAX_TITLE_BYTES,
            "é is 2 bytes"
        );
        assert_eq!(p.feed_title.len(), MAX_FEED_TITLE_BYTES);
        assert!(check_message(&pb::report_message::Body::Fetch(p.clone())).is_ok());
    }

    #[test]
    fn many_postings_split_in_order_and_only_the_first_part_counts_as_the_fetch() {
        let all: Vec<pb::Posting> = (0..1_234).map(|i| posting(i, 600)).collect();
        let parts = split_fetch(report(all.clone()));
        assert!(parts.len() >= 3, "{} parts", parts.len());
        assert!(!parts[0].continuation);
        assert_eq!(parts[0].items_in_document, 1_234);
        let mut got = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            assert_eq!(p.continuation, i > 0);
            assert_eq!(p.feed_id, "f");
            assert_eq!(p.finished_unix_ms, 1_700_000_000_000);
            assert!(p.encoded_len() <= MAX_MESSAGE_BYTES, "part {i}");
            assert!(p.new_postings.len() <= MAX_POSTINGS_PER_MESSAGE);
            assert!(check_message(&pb::report_message::Body::Fetch(p.clone())).is_ok());
            if i > 0 {
                assert_eq!(
                    p.items_in_document, 0,
                    "a continuation is no second document"
                );
            }
            got.extend(p.new_postings.iter().map(|p| p.item_id_hash));
        }
        assert_eq!(got, (0..1_234).collect::<Vec<_>>());
        // No postings: one part, the report itself.
        assert_eq!(split_fetch(report(Vec::new())).len(), 1);
    }

    #[test]
    fn the_coordinator_check_refuses_what_a_worker_would_have_split_or_clipped() {
        let over = report((0..501).map(|i| posting(i, 1)).collect());
        let mut over = over;
        over.feed_title.clear();
        assert!(check_message(&pb::report_message::Body::Fetch(over)).is_err());
        let mut long = report(vec![posting(1, 2_000)]);
        long.feed_title.clear();
        assert!(check_message(&pb::report_message::Body::Fetch(long)).is_err());
        let event = |u: &str| pb::AccessEvent {
            user_id: u.into(),
            feed_id: "f".into(),
            unix_ms: 1,
        };
        let many = pb::AccessBatch {
            events: vec![event("u"); MAX_ACCESS_EVENTS_PER_MESSAGE + 1],
        };
        assert!(check_message(&pb::report_message::Body::Accesses(many)).is_err());
        let long_id = pb::AccessBatch {
            events: vec![event(&"u".repeat(MAX_ID_BYTES + 1))],
        };
        assert!(check_message(&pb::report_message::Body::Accesses(long_id)).is_err());
        let batches = split_accesses(vec![event("u"); 4_001]);
        assert_eq!(
            batches.iter().map(Vec::len).collect::<Vec<_>>(),
            [2_000, 2_000, 1]
        );
    }

    #[test]
    fn long_urls_are_dropped_not_cut() {
        let mut p = posting(1, 1);
        p.link = format!("https://example.org/{}", "a".repeat(3_000));
        assert!(clip_posting(&mut p));
        assert!(p.link.is_empty());
    }
}
