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

    // The live path: report messages from a worker through the hub (ownership check, idempotent
    // ingest, feed state and learned record written in the same durable batch, measures).
    // 20,000 feeds on 200 hosts owned by one worker; each report carries what a worker
    // sends after its own dedupe: one new posting. Batches of 500 messages, as the
    // coordinator's report stream reads them.
    let dir = std::env::temp_dir().join(format!("kairos-hub-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    rt.block_on(async {
        use kairos_coordinator::control::cluster::ClusterConfig;
        use kairos_coordinator::control::relearn::PlannerSettings;
        use kairos_coordinator::hub::{Hub, HubConfig};
        use kairos_proto::v1 as pb;
        let store = Arc::new(EmbeddedBackend::open(&dir).unwrap());
        let registry = kairos_coordinator::registry::Registry::new(store.clone());
        let feeds = 20_000;
        for f in 0..feeds {
            registry
                .add_feed(Some(&format!("f{f}")), &format!("http://h{}.example/f{f}", f % 200), 1.0)
                .await
                .unwrap();
        }
        let clock = kairos_runtime::clock::SimClock::new(now, 1.0);
        let hub = Hub::open(
            store,
            clock,
            HubConfig {
                cluster: ClusterConfig::default(),
                planner: PlannerSettings::default(),
                replan_interval: std::time::Duration::from_secs(60),
                health: Default::default(),
                retention: Default::default(),
                plan_snapshot_every: None,
                private_allowed: Vec::new(),
            },
        )
        .await
        .unwrap();
        let (worker, _) = hub.register("bench", 1.0).await.unwrap();
        hub.replan().await.unwrap();
        let rounds = 5u64;
        let mut seq = 0u64;
        let t0 = Instant::now();
        let mut reports = 0u64;
        for r in 0..rounds {
            let msgs: Vec<pb::ReportMessage> = (0..feeds)
                .map(|f| {
                    seq += 1;
                    pb::ReportMessage {
                        worker_id: worker.clone(),
                        seq,
                        epoch: 1,
                        body: Some(pb::report_message::Body::Fetch(pb::FetchReport {
                            feed_id: format!("f{f}"),
                            outcome: pb::FetchOutcome::Ok as i32,
                            http_status: 200,
                            scheduled_unix_ms: now,
                            started_unix_ms: now,
                            finished_unix_ms: now + r as i64 * 1000,
                            body_bytes: 10_000,
                            new_postings: vec![pb::Posting {
                                item_id_hash: r,
                                link: format!("http://x.test/{f}/{r}"),
                                title: "t".into(),
                                published_unix_ms: Some(now),
                                discovered_unix_ms: now,
                            }],
                            etag: format!("\"{r}\""),
                            ..Default::default()
                        })),
                    }
                })
                .collect();
            for chunk in msgs.chunks(500) {
                let ack = hub.handle_reports(&worker, chunk.to_vec()).await.unwrap();
                assert!(ack.rejected.is_empty());
                reports += chunk.len() as u64;
            }
        }
        let secs = t0.elapsed().as_secs_f64();
        let t = hub.totals().await;
        assert_eq!(t.postings_new, reports);
        println!(
            "hub report ingest: {reports} reports (1 new posting each, learned state persisted) in {secs:.2} s = {:.0} reports/s",
            reports as f64 / secs
        );
    });
    let _ = std::fs::remove_dir_all(&dir);
}
