//! What the store holds per feed, user, subscription and posting, measured through the real
//! write paths (registry, report ingest, learning) rather than estimated: the figures in
//! `docs/STATE.md` come from `cargo test --release -p kairos-coordinator --lib
//! record_sizes -- --nocapture`, and the bounds below fail if a record grows past them.

use super::memory::MemoryBackend;
use super::KvBackend;
use crate::time::DAY_MS;
use kairos_proto::v1 as pb;
use kairos_runtime::clock::SimClock;
use std::collections::BTreeMap;
use std::sync::Arc;

const FEEDS: usize = 20;
const DAYS: i64 = 14;

#[test]
fn record_sizes() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let by_family = rt.block_on(async {
        let store = Arc::new(MemoryBackend::new());
        let start = 1_772_409_600_000; // 2026-03-02T00:00:00Z
        let clock = SimClock::manual(start);
        let hub = crate::hub::open_for_tests(store.clone(), clock).await;
        for f in 0..FEEDS {
            hub.add_feed(
                None,
                &format!("https://blog{f}.example-publisher.com/feeds/posts/default.xml"),
                1.0,
            )
            .await
            .unwrap();
        }
        let feeds: Vec<String> = hub
            .registry()
            .all_feeds()
            .await
            .unwrap()
            .into_iter()
            .map(|f| f.id)
            .collect();
        hub.add_user("reader-0001", 1.0).await.unwrap();
        for f in &feeds {
            hub.registry().subscribe("reader-0001", f).await.unwrap();
        }
        let (w, _) = hub.register("w", 1.0).await.unwrap();
        hub.heartbeat(&w, 0).await.unwrap();
        hub.replan().await.unwrap();
        // Every feed fetched every two hours for two weeks; four new postings every twelve
        // hours (eight a day per feed).
        let mut seq = 0u64;
        let mut item = 0u64;
        for step in 0..DAYS * 12 {
            let now = start + step * DAY_MS / 12;
            clock.set_ms(now);
            hub.heartbeat(&w, 0).await.unwrap();
            let mut msgs = Vec::new();
            for f in &feeds {
                let postings: Vec<pb::Posting> = (0..i64::from(step % 6 == 0) * 4)
                    .map(|_| {
                        item += 1;
                        pb::Posting {
                            item_id_hash: item.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                            link: format!("https://blog.example-publisher.com/2026/03/a-post-title-of-typical-length-{item}"),
                            title: format!("A post title of typical length, number {item}"),
                            published_unix_ms: Some(now - 1_800_000),
                            discovered_unix_ms: now,
                        }
                    })
                    .collect();
                seq += 1;
                msgs.push(pb::ReportMessage {
                    worker_id: w.clone(),
                    seq,
                    body: Some(pb::report_message::Body::Fetch(pb::FetchReport {
                        feed_id: f.clone(),
                        outcome: pb::FetchOutcome::Ok as i32,
                        http_status: 200,
                        scheduled_unix_ms: now,
                        started_unix_ms: now,
                        finished_unix_ms: now,
                        body_bytes: 40_000,
                        new_postings: postings,
                        etag: "\"5f3c-1a2b3c4d\"".into(),
                        last_modified: "Mon, 02 Mar 2026 00:00:00 GMT".into(),
                        items_in_document: 25,
                        ..Default::default()
                    })),
                    ..Default::default()
                });
            }
            hub.handle_reports(&w, msgs).await.unwrap();
            if step % 12 == 11 {
                hub.replan().await.unwrap();
            }
        }
        // The reader read the app and each feed at several hours.
        let now = clock.now_ms();
        let mut events = Vec::new();
        for h in 0..8 {
            for f in feeds.iter().map(String::as_str).chain([""]) {
                events.push(crate::access::AccessEvent {
                    user_id: "reader-0001".into(),
                    feed_id: f.into(),
                    unix_ms: now - h * 3 * 3_600_000,
                });
            }
        }
        let n = events.len();
        assert_eq!(hub.record_access(events).await.accepted as usize, n);
        assert_eq!(hub.persist_access().await.unwrap(), 1);
        let mut by_family: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        let all = store.range(Vec::new(), None, usize::MAX).await.unwrap();
        for (k, v) in all {
            let family = match k.iter().position(|&c| c == b'/') {
                Some(i) => String::from_utf8_lossy(&k[..i]).into_owned(),
                None => String::from_utf8_lossy(&k).into_owned(),
            };
            let e = by_family.entry(family).or_default();
            e.0 += 1;
            e.1 += k.len() + v.len();
        }
        (by_family, item)
    });
    let (by_family, postings) = by_family;
    println!("| family | records | bytes (key + value) | per record |");
    println!("|---|---|---|---|");
    for (family, (n, bytes)) in &by_family {
        println!("| `{family}` | {n} | {bytes} | {} |", bytes / n);
    }
    let per = |family: &str| by_family.get(family).map_or(0, |(n, b)| b / n);
    // Bounds that would catch a record doubling.
    assert!(per("feed") < 400, "feed record {} B", per("feed"));
    assert!(
        per("learned") < 16_384,
        "learned state {} B per feed",
        per("learned")
    );
    assert!(per("post") < 250, "posting {} B", per("post"));
    assert!(per("disc") < 100);
    assert!(
        !by_family.contains_key("item") && !by_family.contains_key("postseq"),
        "markers and sequence numbers live in the ingest record"
    );
    // 14 days at 8 a day: 112 markers of about 10 B each, under the 30-day retention.
    assert_eq!(by_family["seen"].0, FEEDS);
    assert!(per("seen") < 1_400, "ingest record {} B", per("seen"));
    assert!(
        per("access") < 300 * (FEEDS + 1),
        "access record {} B",
        per("access")
    );
    assert_eq!(
        by_family["post"].0 as u64, postings,
        "every posting stored once"
    );
    let per_posting = per("post") + per("disc");
    let per_feed_day = 8;
    println!(
        "per posting (post + discovery index): {per_posting} B; per marker (ingest record over its markers): {} B",
        per("seen") / (per_feed_day * DAYS as usize)
    );
}
