//! Checks on what a worker reports, before any of it reaches state or arithmetic.

use kairos_proto::v1 as pb;

/// Latest time a report may carry, Unix ms (about the year 5100): a worker's clock or a
/// feed's dates beyond it are garbage, and arithmetic on them would overflow.
pub(super) const MAX_REPORT_MS: i64 = 100_000_000_000_000;

/// Refuses a fetch report whose own times are out of range (they feed delay arithmetic),
/// and forgets posting dates out of range (a feed claiming year 9999 is undated, not an
/// error of the worker's).
pub(super) fn check_times(r: &mut pb::FetchReport) -> Result<(), String> {
    let ok = |t: i64| (0..=MAX_REPORT_MS).contains(&t);
    for (name, t) in [
        ("scheduled_unix_ms", r.scheduled_unix_ms),
        ("started_unix_ms", r.started_unix_ms),
        ("finished_unix_ms", r.finished_unix_ms),
    ] {
        // A zero schedule means "not scheduled" (a first-sight fetch).
        if !ok(t) {
            return Err(format!("{name} {t} is outside 0..={MAX_REPORT_MS}"));
        }
    }
    for p in &mut r.new_postings {
        if !ok(p.discovered_unix_ms) {
            return Err(format!(
                "a posting's discovered_unix_ms {} is outside 0..={MAX_REPORT_MS}",
                p.discovered_unix_ms
            ));
        }
        if p.published_unix_ms.is_some_and(|t| !ok(t)) {
            p.published_unix_ms = None;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryBackend;
    use kairos_runtime::clock::SimClock;
    use std::sync::Arc;

    fn fetch(feed: &str, bytes: u64) -> pb::FetchReport {
        pb::FetchReport {
            feed_id: feed.into(),
            finished_unix_ms: 1_700_000_000_000,
            started_unix_ms: 1_700_000_000_000,
            body_bytes: bytes,
            new_postings: vec![pb::Posting {
                item_id_hash: bytes,
                discovered_unix_ms: 1_700_000_000_000,
                published_unix_ms: Some(253_402_300_799_000), // 9999-12-31
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn times_out_of_range_are_refused_and_far_posting_dates_forgotten() {
        let mut r = fetch("f", 1);
        assert_eq!(check_times(&mut r), Ok(()));
        assert_eq!(
            r.new_postings[0].published_unix_ms, None,
            "year 9999 is no date"
        );
        for bad in [i64::MIN, -1, MAX_REPORT_MS + 1, i64::MAX] {
            let mut r = fetch("f", 1);
            r.started_unix_ms = bad;
            assert!(check_times(&mut r).unwrap_err().contains("started_unix_ms"));
            let mut r = fetch("f", 1);
            r.new_postings[0].discovered_unix_ms = bad;
            assert!(check_times(&mut r).is_err());
        }
    }

    /// The fuzzer's finding: `body_bytes` near `u64::MAX` overflowed the byte total (a
    /// panic with overflow checks, a wrapped figure without).
    #[test]
    fn hostile_reports_are_rejected_or_counted_without_overflow() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let hub = crate::hub::open_for_tests(
                Arc::new(MemoryBackend::new()),
                SimClock::manual(1_700_000_000_000),
            )
            .await;
            hub.registry()
                .add_feed(Some("f"), "http://h.invalid/f", 1.0)
                .await
                .unwrap();
            let (w, _) = hub.register("w", 1.0).await.unwrap();
            hub.heartbeat(&w, 0).await.unwrap();
            hub.replan().await.unwrap();
            let msg = |seq: u64, r: pb::FetchReport| pb::ReportMessage {
                worker_id: w.clone(),
                seq,
                body: Some(pb::report_message::Body::Fetch(r)),
                ..Default::default()
            };
            let mut late = fetch("f", 5);
            late.finished_unix_ms = i64::MAX;
            let ack = hub
                .handle_reports(
                    &w,
                    vec![
                        msg(1, fetch("f", u64::MAX)),
                        msg(2, fetch("f", 7)),
                        msg(3, late),
                    ],
                )
                .await
                .unwrap();
            assert_eq!(ack.acked_seq, 3);
            assert_eq!(ack.rejected.len(), 1);
            assert!(
                ack.rejected[0].reason.contains("finished_unix_ms"),
                "{:?}",
                ack.rejected
            );
            let t = hub.totals().await;
            assert_eq!(t.fetches, 2);
            assert_eq!(t.bytes, u64::MAX, "saturated, not wrapped");
        });
    }

    /// A slot reported by the feed's old owner and then by its new one (the old owner's
    /// lease ran out in between) is counted once; the new owner reporting it again is not.
    #[test]
    fn a_slot_fetched_by_two_workers_is_counted() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let hub = crate::hub::Hub::open(
                Arc::new(MemoryBackend::new()),
                SimClock::manual(1_700_000_000_000),
                crate::hub::HubConfig {
                    cluster: crate::control::cluster::ClusterConfig {
                        lease: std::time::Duration::from_millis(50),
                        ..Default::default()
                    },
                    planner: Default::default(),
                    replan_interval: std::time::Duration::from_secs(3600),
                    health: Default::default(),
                    retention: Default::default(),
                    plan_snapshot_every: None,
                    private_allowed: Vec::new(),
                },
            )
            .await
            .unwrap();
            hub.registry()
                .add_feed(Some("f"), "http://h.invalid/f", 1.0)
                .await
                .unwrap();
            let slot = |worker: &str, seq: u64, item: u64| pb::ReportMessage {
                worker_id: worker.into(),
                seq,
                body: Some(pb::report_message::Body::Fetch(pb::FetchReport {
                    scheduled_unix_ms: 1_699_999_990_000,
                    outcome: pb::FetchOutcome::Ok as i32,
                    http_status: 200,
                    ..fetch("f", item)
                })),
                ..Default::default()
            };
            let (a, _) = hub.register("a", 1.0).await.unwrap();
            hub.replan().await.unwrap();
            let ack = hub.handle_reports(&a, vec![slot(&a, 1, 1)]).await.unwrap();
            assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
            std::thread::sleep(std::time::Duration::from_millis(120));
            hub.expire_leases().await;
            let (b, _) = hub.register("b", 1.0).await.unwrap();
            // The new owner learns of a's fetch, and that it was the feed's first sight,
            // so it spaces its own first fetch from it.
            async fn handed(hub: &crate::hub::Hub<MemoryBackend>, b: &str) -> (i64, bool) {
                let (_, rx) = hub.subscribe(b).await.unwrap();
                let specs: Vec<_> = rx.borrow().feeds.values().cloned().collect();
                let got = hub.assignments(specs).await;
                assert_eq!(got.len(), 1);
                (got[0].last_fetch_unix_ms, got[0].last_fetch_first_sight)
            }
            assert_eq!(handed(&hub, &b).await, (1_700_000_000_000, true));
            let ack = hub.handle_reports(&b, vec![slot(&b, 1, 2)]).await.unwrap();
            assert!(ack.rejected.is_empty(), "{:?}", ack.rejected);
            assert_eq!(hub.totals().await.fetches_same_slot, 1);
            assert_eq!(
                handed(&hub, &b).await,
                (1_700_000_000_000, false),
                "a second answered fetch is no first sight"
            );
            hub.handle_reports(&b, vec![slot(&b, 2, 3)]).await.unwrap();
            assert_eq!(
                hub.totals().await.fetches_same_slot,
                1,
                "b again: one fetch of b's"
            );
        });
    }
}
