//! Coordinator ingest throughput: reader access events into the statistics (in memory,
//! batched), and fetch reports with new postings into the embedded store (durable,
//! idempotent, batched).
//!
//! Run: `cargo bench -p kairos-coordinator --bench ingest`.

use kairos_coordinator::access::{AccessEvent, AccessStats};
use kairos_coordinator::ingest::{Ingestor, PostingRecord};
use kairos_coordinator::store::embedded::EmbeddedBackend;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let day = 86_400_000i64;
    let now = 1_000 * day;

    // Access events: 10,000 users, 100,000 feeds, 80% app-level, batches of 1,000.
    let mut stats = AccessStats::new(24, day);
    let users: Vec<String> = (0..10_000).map(|u| format!("u{u}")).collect();
    let feeds: Vec<String> = (0..100_000).map(|f| format!("f{f}")).collect();
    users.iter().for_each(|u| stats.set_user(u, 1.0));
    feeds.iter().for_each(|f| stats.set_feed(f));
    let batches: Vec<Vec<AccessEvent>> = (0..2_000)
        .map(|_| {
            (0..1_000)
                .map(|_| AccessEvent {
                    user_id: users[rng.gen_range(0..users.len())].clone(),
                    feed_id: if rng.gen_bool(0.2) {
                        feeds[rng.gen_range(0..feeds.len())].clone()
                    } else {
                        String::new()
                    },
                    unix_ms: now - rng.gen_range(0..day),
                })
                .collect()
        })
        .collect();
    let t0 = Instant::now();
    let mut accepted = 0;
    for b in &batches {
        accepted += stats.record(b, now).accepted;
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "access events: {accepted} in {secs:.3} s = {:.0} events/s (batches of 1,000, one thread)",
        accepted as f64 / secs
    );

    // Fetch reports: 20,000 feeds, each report 1 new posting + 14 already-known items
    // (a feed document holds its last 15), batches of 500 reports per durable write.
    let dir = std::env::temp_dir().join(format!("kairos-ingest-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    rt.block_on(async {
        let ing = Ingestor::new(Arc::new(EmbeddedBackend::open(&dir).unwrap()));
        let feed_ids: Vec<String> = (0..20_000).map(|f| format!("f{f}")).collect();
        let post = |id: u64| PostingRecord { item_id_hash: id, link: Some(format!("http://x.test/{id}")), title: Some("t".into()), published_unix_ms: Some(now), discovered_unix_ms: now };
        // Rounds: in round r every feed reports items r..r+15, of which only r+14 is new.
        let rounds = 6u64;
        let t0 = Instant::now();
        let (mut reports, mut new, mut dups) = (0u64, 0u64, 0u64);
        for r in 0..rounds {
            let docs: Vec<Vec<PostingRecord>> = feed_ids.iter().map(|_| (r..r + 15).map(post).collect()).collect();
            for chunk in feed_ids.iter().zip(&docs).collect::<Vec<_>>().chunks(500) {
                let batch: Vec<(&str, &[PostingRecord])> = chunk.iter().map(|(f, d)| (f.as_str(), d.as_slice())).collect();
                let c = ing.ingest_many(&batch).await.unwrap();
                reports += batch.len() as u64;
                new += c.new;
                dups += c.duplicates;
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        println!(
            "fetch reports: {reports} reports ({new} new postings, {dups} duplicates skipped) in {secs:.2} s = {:.0} reports/s",
            reports as f64 / secs
        );
    });
    let _ = std::fs::remove_dir_all(&dir);
}
