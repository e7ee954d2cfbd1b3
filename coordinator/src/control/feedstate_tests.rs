//! Tests of `feedstate.rs`.

#[test]
fn a_split_report_teaches_what_the_whole_one_would() {
    use super::*;
    let day = 86_400_000i64;
    let items = |from: u64, n: u64, at: i64| -> Vec<(u64, Option<i64>)> {
        (from..from + n)
            .map(|i| {
                (
                    i,
                    if i % 3 == 0 {
                        None
                    } else {
                        Some(at - i as i64 * 60_000)
                    },
                )
            })
            .collect()
    };
    let fetch = |t: i64, new_items: Vec<(u64, Option<i64>)>| FetchObservation {
        finished_ms: t,
        answered: true,
        etag: Some(format!("e{t}")),
        new_items,
        items_in_document: 40,
        ..Default::default()
    };
    for first_split in [false, true] {
        let (t1, t2) = (10 * day, 10 * day + 3_600_000);
        let mut whole = FeedState::default();
        let mut split = FeedState::default();
        let mut delays_whole = Vec::new();
        let mut delays_split = Vec::new();
        delays_whole.extend(
            whole
                .observe(&fetch(t1, items(100, 30, t1)), 14 * day)
                .trusted_delays_ms,
        );
        if first_split {
            delays_split.extend(
                split
                    .observe(&fetch(t1, items(100, 10, t1)), 14 * day)
                    .trusted_delays_ms,
            );
            delays_split.extend(
                split
                    .observe_more(&fetch(t1, items(110, 20, t1)), 14 * day)
                    .trusted_delays_ms,
            );
        } else {
            delays_split.extend(
                split
                    .observe(&fetch(t1, items(100, 30, t1)), 14 * day)
                    .trusted_delays_ms,
            );
        }
        // The second fetch finds 12 items from the last 50 minutes: trusted delays.
        delays_whole.extend(
            whole
                .observe(&fetch(t2, items(0, 12, t2)), 14 * day)
                .trusted_delays_ms,
        );
        delays_split.extend(
            split
                .observe(&fetch(t2, items(0, 5, t2)), 14 * day)
                .trusted_delays_ms,
        );
        delays_split.extend(
            split
                .observe_more(&fetch(t2, items(5, 7, t2)), 14 * day)
                .trusted_delays_ms,
        );
        assert!(!delays_whole.is_empty());
        assert_eq!(delays_split, delays_whole);
        let mut a = split.postings_ms.clone();
        a.make_contiguous().sort_unstable();
        assert_eq!(a, whole.postings_ms);
        assert_eq!(split.spread_ms, whole.spread_ms);
        assert_eq!(split.fetches, 2, "parts are not fetches");
        assert_eq!(split.last_answered_ms, Some(t2));
        assert_eq!(split.observed_since_ms, whole.observed_since_ms);
        assert_eq!(split.etag, whole.etag);
        let (mut x, mut y): (Vec<u64>, Vec<u64>) = (
            split.recent_items.iter().copied().collect(),
            whole.recent_items.iter().copied().collect(),
        );
        x.sort_unstable();
        y.sort_unstable();
        assert_eq!(x, y);
    }
}

#[test]
fn a_slot_counts_twice_only_when_another_worker_reports_it() {
    let mut st = FeedState::default();
    assert!(!st.record_slot(1_000, "w1#1"));
    // The same worker again (a resent report, a later session): not a second fetch.
    assert!(!st.record_slot(1_000, "w1#2"));
    assert!(st.record_slot(1_000, "w2#1"), "w2 fetched w1's slot");
    assert!(
        !st.record_slot(2_000, "w1#2"),
        "the next slot, by the old owner"
    );
    assert!(!st.record_slot(0, "w2#1"), "no planned time: not a slot");
    assert!(st.record_slot(2_000, "w2#1"));
}

use super::*;

const H: i64 = 3_600_000;

fn fetch(at: i64, items: &[(u64, Option<i64>)]) -> FetchObservation {
    FetchObservation {
        finished_ms: at,
        answered: true,
        etag: Some(format!("e{at}")),
        last_modified: None,
        new_items: items.to_vec(),
        items_in_document: 0,
    }
}

#[test]
fn first_document_gives_history_later_ones_give_trusted_delays() {
    let mut s = FeedState::default();
    let day = 24 * H;
    let now = 100 * day;
    // First fetch: three dated items over the last two days, one older than the window.
    let o = s.observe(
        &fetch(
            now,
            &[
                (1, Some(now - 2 * day)),
                (2, Some(now - H)),
                (3, Some(now - 30 * day)),
            ],
        ),
        14 * day,
    );
    assert!(o.trusted_delays_ms.is_empty(), "nothing was watched yet");
    assert!(o.model_changed);
    assert_eq!(s.postings_ms, vec![now - 2 * day, now - H]);
    assert_eq!(s.observed_since_ms, Some(now - 14 * day));
    assert_eq!(s.etag, format!("e{now}"));
    // Next fetch: one item posted in between (trusted), one back-dated, one undated.
    let t = now + 2 * H;
    let o = s.observe(
        &fetch(t, &[(4, Some(now + H)), (5, Some(now - 5 * H)), (6, None)]),
        14 * day,
    );
    assert_eq!(o.trusted_delays_ms, vec![H]);
    assert_eq!(s.postings_ms, vec![now - 2 * day, now - H, now + H]);
    assert_eq!(
        s.spread_ms,
        vec![(now, t), (now, t)],
        "untrusted and undated items are spread between the fetches"
    );
    assert_eq!(s.observed_postings(), 5);
    assert_eq!(s.recent_items.len(), 6);
    // A failed fetch changes nothing.
    let before = s.clone();
    let mut failed = fetch(t + H, &[(7, None)]);
    failed.answered = false;
    assert_eq!(s.observe(&failed, 14 * day), Observed::default());
    assert_eq!(s, before);
}

#[test]
fn window_slides_and_bounds_hold() {
    let mut s = FeedState::default();
    let day = 24 * H;
    let items: Vec<(u64, Option<i64>)> = (0..300).map(|i| (i, Some(i as i64 * H))).collect();
    s.observe(&fetch(301 * H, &items), 10 * day);
    assert_eq!(s.recent_items.len(), RECENT_ITEMS);
    assert_eq!(s.postings_ms.len(), 239, "only the last ten days count");
    assert!(s.spread_ms.is_empty());
    assert_eq!(s.observed_since_ms, Some(61 * H));
    let o = s.observe(&fetch(320 * H, &[]), 10 * day);
    assert!(o.model_changed, "old postings left the window");
    assert_eq!(s.postings_ms.front(), Some(&(80 * H)));
    assert_eq!(s.observed_span_ms(320 * H), 240 * H);
    assert_eq!(
        s.observed_span_ms(330 * H),
        240 * H,
        "nothing after the last fetch has been observed"
    );
}

#[test]
fn a_document_of_only_new_items_after_a_fetch_is_an_overflow() {
    const DAY: i64 = 86_400_000;
    let mut st = FeedState::default();
    let fetch = |at: i64, ids: std::ops::Range<u64>, held: usize| FetchObservation {
        finished_ms: at,
        answered: true,
        new_items: ids.map(|i| (i, None)).collect(),
        items_in_document: held,
        ..Default::default()
    };
    // The first document is all new by nature: not an overflow.
    assert!(!st.observe(&fetch(1_000, 0..20, 20), DAY).overflowed);
    assert_eq!(st.doc_capacity, 20);
    // Five new items among twenty: fine.
    assert!(!st.observe(&fetch(2_000, 20..25, 20), DAY).overflowed);
    // Twenty new of twenty: some may have scrolled off in between.
    assert!(st.observe(&fetch(3_000, 25..45, 20), DAY).overflowed);
    assert_eq!(st.overflows, 1);
    // A 304 (nothing held) says nothing.
    assert!(!st.observe(&fetch(4_000, 0..0, 0), DAY).overflowed);
    // Undated items: how far back the document reached is unknown, so no span is left
    // out of what was watched.
    assert!(st.blind_ms.is_empty());
}

#[test]
fn an_overflowed_document_leaves_the_time_before_its_oldest_item_unwatched() {
    const H: i64 = 3_600_000;
    const WINDOW: i64 = 10 * 24 * H;
    let mut st = FeedState::default();
    let dated = |at: i64, ids: std::ops::Range<u64>, first_ms: i64| FetchObservation {
        finished_ms: at,
        answered: true,
        // One item an hour from `first_ms`, ten to a document.
        new_items: ids
            .enumerate()
            .map(|(k, i)| (i, Some(first_ms + k as i64 * H)))
            .collect(),
        items_in_document: 10,
        ..Default::default()
    };
    st.observe(&dated(100 * H, 0..10, 90 * H), WINDOW);
    // Ten new of ten, the oldest posted at 140 h: what came in (100 h, 140 h) may have
    // scrolled off.
    let o = st.observe(&dated(150 * H, 10..20, 140 * H), WINDOW);
    assert!(o.overflowed && o.model_changed);
    assert_eq!(st.blind_ms, VecDeque::from([(100 * H, 140 * H)]));
    assert_eq!(
        st.blind_within(120 * H, 200 * H).collect::<Vec<_>>(),
        vec![(120 * H, 140 * H)]
    );
    // A full document whose oldest item is older than the previous fetch reached back
    // past it: nothing was lost.
    let mut reaching = dated(160 * H, 20..30, 145 * H);
    reaching.new_items[0].1 = Some(149 * H);
    reaching.new_items[1].1 = Some(120 * H);
    assert!(st.observe(&reaching, WINDOW).overflowed);
    assert_eq!(st.blind_ms.len(), 1);
    // An undated item leaves the document's reach unknown: no span either.
    let mut undated = dated(170 * H, 30..40, 160 * H + 1);
    undated.new_items[3].1 = None;
    assert!(st.observe(&undated, WINDOW).overflowed);
    assert_eq!(st.blind_ms.len(), 1);
    // The span leaves with the window.
    st.observe(&dated(345 * H, 40..41, 344 * H), WINDOW);
    assert_eq!(st.blind_ms, VecDeque::from([(105 * H, 140 * H)]));
    st.observe(&dated(381 * H, 41..42, 380 * H), WINDOW);
    assert!(st.blind_ms.is_empty());
}

#[test]
fn the_stored_state_is_compact_round_trips_and_reads_older_json() {
    use super::*;
    let now = 1_795_000_000_000i64;
    let mut st = FeedState {
        etag: "\"5f3c-1a2b\"".into(),
        last_modified: "Wed, 25 Nov 2026 10:00:00 GMT".into(),
        recent_items: (0..40u64)
            .map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .collect(),
        observed_since_ms: Some(now - 28 * 86_400_000),
        last_answered_ms: Some(now),
        answered_before_ms: Some(now - 6 * 3_600_000),
        postings_ms: (0..28).map(|i| now - (27 - i) * 86_400_000).collect(),
        fetches: 112,
        usual_new: 0.25,
        doc_capacity: 40,
        last_slot: Some((now, "worker-1".into())),
        meta: FeedMeta {
            title: "A feed".into(),
            site_url: "https://example.org/".into(),
            format: "rss-2.0".into(),
            ..FeedMeta::default()
        }
        .into(),
        ..FeedState::default()
    };
    let quiet = serde_json::to_vec(&st).unwrap();
    assert_eq!(serde_json::from_slice::<FeedState>(&quiet).unwrap(), st);
    // A healthy feed stores no health, spread or overflow fields: 28 days of a posting
    // a day and 40 item ids take under 1,000 bytes (1,862 as plain JSON).
    let text = String::from_utf8_lossy(&quiet);
    assert!(
        !text.contains("health") && !text.contains("spread"),
        "{text}"
    );
    assert!(quiet.len() < 1_000, "{} B: {text}", quiet.len());
    st.health.consecutive_failures = 3;
    st.health.last_error = "timeout".into();
    st.spread_ms.push_back((now - 1000, now));
    st.overflows = 2;
    let busy = serde_json::to_vec(&st).unwrap();
    assert_eq!(serde_json::from_slice::<FeedState>(&busy).unwrap(), st);
    // As versions before the packed lists wrote it.
    let old = r#"{"etag":"e","last_modified":"","recent_items":[1,2],
        "observed_since_ms":10,"last_answered_ms":20,"postings_ms":[11,15],
        "spread_ms":[[12,20]],"fetches":3,"health":{"consecutive_failures":1,
        "last_error":"x","last_failure_ms":null,"malformed_since_ms":null,
        "gone_since_ms":null,"hints":{"max_age_s":0,"ttl_s":0,"update_period_s":0,
        "skip_hours":0,"skip_days":0}}}"#;
    let old: FeedState = serde_json::from_str(old).unwrap();
    assert_eq!(old.recent_items, [1, 2]);
    assert_eq!(old.postings_ms, [11, 15]);
    assert_eq!(old.spread_ms, [(12, 20)]);
    assert_eq!(old.health.consecutive_failures, 1);
}

/// A plan over a million feeds holds every state at once while it learns: the state stays
/// in the allocator's 320-byte class, and a healthy feed without hints or a document's
/// description holds no box beside it (`control::cold`).
#[test]
fn a_healthy_state_is_small_and_boxes_nothing() {
    use super::*;
    use crate::control::health::{Answer, Hints};
    assert!(
        std::mem::size_of::<FeedState>() <= 320,
        "{} bytes: a field added inline moves every state to a larger class",
        std::mem::size_of::<FeedState>()
    );
    let mut st = FeedState::default();
    let answered = |st: &mut FeedState, answer, hints| {
        st.health.record(answer, 1_000, "", hints);
        st.health.settle();
    };
    answered(&mut st, Answer::Answered, Hints::default());
    assert!(!st.health.is_boxed() && !st.meta.is_boxed());
    answered(&mut st, Answer::Failed, Hints::default());
    assert!(st.health.is_boxed(), "a failure is kept");
    assert_eq!(st.health.consecutive_failures, 1);
    answered(&mut st, Answer::Answered, Hints::default());
    assert!(!st.health.is_boxed(), "recovered: freed");
    let hinted = Hints {
        ttl_s: 3_600,
        ..Hints::default()
    };
    answered(&mut st, Answer::Answered, hinted.clone());
    assert_eq!(st.health.hints, hinted, "hints are kept");
}
