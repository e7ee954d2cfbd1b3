//! Fetch reports into postings and learned state, in three steps around the actor: the
//! actor checks each report (times, the sender owns the feed) and records relayed reader
//! accesses; the caller writes the new postings and the feeds' next learned state in one
//! atomic batch; the actor then installs the state and moves the measures. Only once the
//! batch is durable does anything in memory change, so a failed write leaves no trace.

use super::actor::State;
use super::figures::outcome_label;
use super::messages as msg;
use super::{checks, health, Hub, DAY_MS};
use crate::access::AccessEvent;
use crate::control::feedstate::{FeedState, FetchObservation};
use crate::control::health::Change;
use crate::ingest::{IngestError, PostingRecord};
use crate::metrics as m;
use crate::store::keys::Key;
use crate::store::{KvBackend, Op};
use kairos_proto::v1 as pb;
use std::collections::HashMap;
use std::sync::Arc;

/// One fetch report after the ownership check.
pub(super) struct Accepted {
    pub report: pb::FetchReport,
    pub postings: Vec<PostingRecord>,
}

/// What one accepted report changed, once durable.
pub(super) struct Learned {
    feed: String,
    state: Arc<FeedState>,
    delays_ms: Vec<i64>,
    overflowed: bool,
    change: Change,
    /// The publication dates of the postings this report saw first (not ingested before).
    fresh: Vec<Option<i64>>,
}

/// Whether a report is a hub's delivery rather than a fetch.
fn pushed(r: &pb::FetchReport) -> bool {
    r.outcome == pb::FetchOutcome::Pushed as i32
}

impl<B: KvBackend> Hub<B> {
    /// Ingests a batch of report messages from session `worker`; answers with the ack.
    pub async fn handle_reports(
        &self,
        worker: &str,
        msgs: Vec<pb::ReportMessage>,
    ) -> Result<pb::ReportAck, IngestError> {
        let now = self.clock.now_ms();
        let (ack, accepted) = self
            .actor
            .ask(msg::CheckReports {
                session: worker.to_string(),
                msgs,
                now_ms: now,
            })
            .await;
        if accepted.is_empty() {
            return Ok(ack);
        }
        let _writer = self.learned_writes.lock().await;
        let mut ids: Vec<String> = accepted.iter().map(|a| a.report.feed_id.clone()).collect();
        ids.sort();
        ids.dedup();
        let (base, removed) = self.actor.ask(msg::LearnedStates(ids)).await;
        // Checked before a removal that held the lock: nothing of theirs is written back.
        let accepted: Vec<Accepted> = if removed.is_empty() {
            accepted
        } else {
            let before = accepted.len();
            let kept: Vec<Accepted> = accepted
                .into_iter()
                .filter(|a| !removed.contains(&a.report.feed_id))
                .collect();
            let dropped = before - kept.len();
            metrics::counter!(m::REPORTS_REJECTED_TOTAL).increment(dropped as u64);
            tracing::debug!(worker, reports = dropped, feeds = ?removed, "reports of feeds removed while they were in flight dropped");
            kept
        };
        if accepted.is_empty() {
            return Ok(ack);
        }
        let window_ms = (self.cfg.planner.window_days * DAY_MS as f64) as i64;
        let refs: Vec<(&str, &[PostingRecord])> = accepted
            .iter()
            .map(|a| (a.report.feed_id.as_str(), a.postings.as_slice()))
            .collect();
        let mut learned: Vec<Learned> = Vec::with_capacity(accepted.len());
        let mut same_slot: Vec<(String, i64)> = Vec::new();
        let mut found: Vec<super::quick::Found> = Vec::new();
        let (counts, _) = self
            .ingestor
            .ingest_many_with(&refs, |fresh| {
                let mut next: HashMap<&str, FeedState> = HashMap::new();
                let mut steps = Vec::with_capacity(accepted.len());
                for (a, flags) in accepted.iter().zip(fresh) {
                    let feed = a.report.feed_id.as_str();
                    let st = next.entry(feed).or_insert_with(|| {
                        base.get(feed)
                            .map(|s| FeedState::clone(s))
                            .unwrap_or_default()
                    });
                    // The dates of the postings this report saw first (what a hub's
                    // reliability is measured on).
                    let fresh_n: Vec<Option<i64>> = a
                        .postings
                        .iter()
                        .zip(flags)
                        .filter(|(_, &f)| f)
                        .map(|(p, _)| p.published_unix_ms)
                        .collect();
                    let o = FetchObservation {
                        finished_ms: a.report.finished_unix_ms,
                        answered: matches!(outcome_label(a.report.outcome), "ok" | "not_modified"),
                        etag: Some(a.report.etag.clone()).filter(|s| !s.is_empty()),
                        last_modified: Some(a.report.last_modified.clone())
                            .filter(|s| !s.is_empty()),
                        new_items: a
                            .postings
                            .iter()
                            .zip(flags)
                            .filter(|(_, &f)| f)
                            .map(|(p, _)| (p.item_id_hash, p.published_unix_ms))
                            .collect(),
                        items_in_document: a.report.items_in_document as usize,
                    };
                    if pushed(&a.report) || a.report.continuation {
                        // A hub's delivery (postings, no fetch, nothing of the feed's
                        // health), or more postings of a fetch already folded in.
                        let observed = if pushed(&a.report) {
                            st.observe_pushed(&o, window_ms)
                        } else {
                            st.observe_more(&o, window_ms)
                        };
                        steps.push((
                            feed,
                            observed.trusted_delays_ms,
                            false,
                            Change::default(),
                            fresh_n,
                        ));
                        continue;
                    }
                    if st.record_slot(a.report.scheduled_unix_ms, worker) {
                        same_slot.push((feed.to_string(), a.report.scheduled_unix_ms));
                    }
                    let since = st.last_answered_ms;
                    let observed = st.observe(&o, window_ms);
                    let postings = o.new_items.len().saturating_sub(observed.backdated_ignored);
                    if let (true, Some(since_ms), true) = (o.answered, since, postings > 0) {
                        found.push(super::quick::Found {
                            feed: feed.to_string(),
                            since_ms,
                            until_ms: o.finished_ms,
                            postings,
                        });
                    }
                    if let Some(meta) = crate::control::feedstate::FeedMeta::of_report(&a.report) {
                        st.meta = meta.into();
                    }
                    let change = st.health.record(
                        health::answer_of(&a.report),
                        a.report.finished_unix_ms,
                        &health::error_of(&a.report),
                        health::hints_of(&a.report),
                    );
                    st.health.settle();
                    steps.push((
                        feed,
                        observed.trusted_delays_ms,
                        observed.overflowed,
                        change,
                        fresh_n,
                    ));
                }
                let mut ops = Vec::with_capacity(next.len());
                for (feed, st) in &next {
                    ops.push(Op::Put(
                        Key::Learned(feed).encode()?,
                        serde_json::to_vec(st).expect("feed state serializes"),
                    ));
                }
                // Every report of a feed in this batch ends at the feed's last state.
                let finals: HashMap<&str, Arc<FeedState>> =
                    next.into_iter().map(|(f, st)| (f, Arc::new(st))).collect();
                for (feed, delays_ms, overflowed, change, fresh) in steps {
                    learned.push(Learned {
                        feed: feed.to_string(),
                        state: finals[feed].clone(),
                        delays_ms,
                        overflowed,
                        change,
                        fresh,
                    });
                }
                Ok(ops)
            })
            .await?;
        // Durable: now the in-memory state and the measures may move.
        if !same_slot.is_empty() {
            tracing::debug!(worker, slots = ?same_slot, "planned slots fetched by a second worker");
        }
        let moves = self
            .actor
            .ask(msg::InstallReports {
                worker_name: crate::control::cluster::name_of(worker).to_string(),
                accepted,
                learned,
                counts,
                same_slot: same_slot.len(),
            })
            .await;
        drop(_writer);
        for (feed, to) in moves {
            self.follow_move(&feed, &to).await;
        }
        self.quick_updates(found).await;
        Ok(ack)
    }
}

impl State {
    /// Checks each message of a batch: fetch reports must be in range and from the feed's
    /// owner; relayed accesses are recorded here and now.
    pub(super) fn check_reports(
        &mut self,
        worker: &str,
        msgs: Vec<pb::ReportMessage>,
        now_ms: i64,
    ) -> (pb::ReportAck, Vec<Accepted>) {
        let mut ack = pb::ReportAck::default();
        let mut accepted = Vec::new();
        let mut accesses = Vec::new();
        let mut refused_for_bounds: Option<String> = None;
        for msg in msgs {
            ack.acked_seq = ack.acked_seq.max(msg.seq);
            if let Some(body) = &msg.body {
                if let Err(reason) = kairos_proto::bounds::check_message(body) {
                    // Refused alone: the rest of the stream goes on. A fetch's own report
                    // still tells the feed's health that its document could not be reported
                    // (flagged like a malformed one); its postings are not taken.
                    if let pb::report_message::Body::Fetch(r) = body {
                        let mut kept = refused_fetch(r, &reason);
                        let ok = checks::check_times(&mut kept)
                            .and_then(|()| self.cluster.check_owner(worker, &r.feed_id));
                        if !r.continuation && ok.is_ok() {
                            accepted.push(Accepted {
                                report: kept,
                                postings: Vec::new(),
                            });
                        }
                    }
                    metrics::counter!(m::REPORTS_REFUSED_BOUNDS_TOTAL).increment(1);
                    refused_for_bounds.get_or_insert_with(|| reason.clone());
                    ack.rejected.push(pb::RejectedReport {
                        seq: msg.seq,
                        reason,
                    });
                    continue;
                }
            }
            match msg.body {
                Some(pb::report_message::Body::Fetch(mut r)) => {
                    match checks::check_times(&mut r)
                        .and_then(|()| self.cluster.check_owner(worker, &r.feed_id))
                    {
                        Ok(()) => {
                            let postings = r.new_postings.iter().map(safe_posting).collect();
                            accepted.push(Accepted {
                                report: r,
                                postings,
                            });
                        }
                        Err(reason) => ack.rejected.push(pb::RejectedReport {
                            seq: msg.seq,
                            reason,
                        }),
                    }
                }
                Some(pb::report_message::Body::Accesses(b)) => {
                    accesses.extend(b.events.into_iter().map(|e| AccessEvent {
                        user_id: e.user_id,
                        feed_id: e.feed_id,
                        unix_ms: e.unix_ms,
                    }))
                }
                Some(pb::report_message::Body::HubAnswer(a)) => self.hub_answered(a, now_ms),
                None => ack.rejected.push(pb::RejectedReport {
                    seq: msg.seq,
                    reason: "empty report message".into(),
                }),
            }
        }
        if !accesses.is_empty() {
            self.record_access(&accesses, now_ms);
        }
        if let Some(reason) = refused_for_bounds {
            tracing::warn!(worker, %reason, "report messages over their bounds refused (the worker logs each)");
        }
        if !ack.rejected.is_empty() {
            tracing::debug!(worker, rejected = ack.rejected.len(), "reports rejected");
            metrics::counter!(m::REPORTS_REJECTED_TOTAL).increment(ack.rejected.len() as u64);
            self.totals.reports_rejected += ack.rejected.len() as u64;
        }
        (ack, accepted)
    }

    /// Installs the learned state of durable reports and moves the measures; returns the
    /// permanent redirects to follow in the registry.
    pub(super) fn install_reports(
        &mut self,
        worker_name: &str,
        accepted: Vec<Accepted>,
        learned: Vec<Learned>,
        counts: crate::ingest::IngestCounts,
        same_slot: usize,
    ) -> Vec<(String, String)> {
        if same_slot > 0 {
            metrics::counter!(m::FETCHES_SAME_SLOT_TOTAL).increment(same_slot as u64);
            self.totals.fetches_same_slot += same_slot as u64;
        }
        for l in &learned {
            self.feeds.insert(l.feed.clone(), l.state.clone());
        }
        let mut misses: Vec<(String, i64, i64)> = Vec::new();
        for (a, l) in accepted.iter().zip(&learned) {
            let r = &a.report;
            for &d in &l.delays_ms {
                metrics::histogram!(m::POSTING_DELAY_SECONDS).record(d as f64 / 1000.0);
                misses.push((
                    r.feed_id.clone(),
                    r.finished_unix_ms - d,
                    r.finished_unix_ms,
                ));
            }
            if pushed(r) {
                for &d in &l.delays_ms {
                    metrics::histogram!(m::PUSH_LAG_SECONDS).record(d as f64 / 1000.0);
                }
            } else if !l.delays_ms.is_empty() {
                // The plans' record: what polls delivered against what the feed's plan in
                // force promised (pushed postings were never the polls' to find).
                let promised = self.model_delay_seconds(&r.feed_id).unwrap_or(f64::NAN);
                self.promises
                    .add(r.finished_unix_ms, &l.delays_ms, promised);
            }
            // What saw the postings first, for the hub's reliability (a continuation's
            // postings are a poll's).
            self.push_first_seen(&r.feed_id, &l.fresh, pushed(r), r.finished_unix_ms);
            if r.continuation || pushed(r) {
                continue; // More postings of a fetch counted with its first part, or no fetch.
            }
            if l.overflowed {
                m::record_document_overflow();
            }
            m::record_fetch(
                outcome_label(r.outcome),
                r.body_bytes,
                (r.started_unix_ms - r.scheduled_unix_ms) as f64 / 1000.0,
            );
            if r.items_unread > 0 {
                metrics::counter!(m::ITEMS_UNREAD_TOTAL).increment(r.items_unread as u64);
            }
        }
        let (missed, missed_age_ms) = self.charge_misses(&misses);
        let t = &mut self.totals;
        for (a, l) in accepted.iter().zip(&learned) {
            let r = &a.report;
            t.delay_count += l.delays_ms.len() as u64;
            t.delay_sum_ms += l.delays_ms.iter().map(|&d| d as f64).sum::<f64>();
            if r.continuation || pushed(r) {
                continue;
            }
            let label = outcome_label(r.outcome);
            t.fetches += 1;
            t.count_fetch(worker_name, r.started_unix_ms);
            *t.outcomes.entry(label.to_string()).or_default() += 1;
            *t.fetches_per_feed.entry(r.feed_id.clone()).or_default() += 1;
            if matches!(label, "ok" | "not_modified") {
                t.last_fetch_started
                    .insert(r.feed_id.clone(), r.started_unix_ms);
            }
            t.bytes = t.bytes.saturating_add(r.body_bytes);
        }
        t.postings_new += counts.new;
        t.postings_duplicate += counts.duplicates;
        t.missed += missed;
        t.access_delay_sum_ms += missed_age_ms;
        m::record_postings(counts.new, counts.duplicates, missed, missed_age_ms);
        let done: Vec<_> = accepted
            .iter()
            .map(|a| &a.report)
            .zip(learned.iter().map(|l| l.change))
            .filter(|(r, _)| !r.continuation && !pushed(r))
            .collect();
        self.after_fetches(&done)
    }

    /// For postings published at `p` and discovered at `d`, every access of a subscriber in
    /// `[p, d)` missed them: returns (missed postings, summed age at those accesses in ms).
    fn charge_misses(&self, postings: &[(String, i64, i64)]) -> (u64, f64) {
        let (mut n, mut age) = (0u64, 0.0f64);
        for (feed, p, d) in postings {
            for user in self.subscribers.get(feed).into_iter().flatten() {
                for &t in self.recent_access.get(user).into_iter().flatten() {
                    if t >= *p && t < *d {
                        n += 1;
                        age += (t - p) as f64;
                    }
                }
            }
        }
        (n, age)
    }
}

/// What is kept of a fetch report refused for its bounds: its outcome becomes malformed,
/// with the reason as its error, so the feed's health shows and backs off a feed whose
/// documents keep failing this way; nothing the document said is taken.
fn refused_fetch(r: &pb::FetchReport, reason: &str) -> pb::FetchReport {
    pb::FetchReport {
        feed_id: r.feed_id.clone(),
        outcome: pb::FetchOutcome::Malformed as i32,
        http_status: r.http_status,
        scheduled_unix_ms: r.scheduled_unix_ms,
        started_unix_ms: r.started_unix_ms,
        finished_unix_ms: r.finished_unix_ms,
        body_bytes: r.body_bytes,
        error: format!("report refused: {reason}"),
        ..Default::default()
    }
}

/// A reported posting as stored: its title and link through [`crate::sanitize`] (what was
/// changed is counted).
fn safe_posting(p: &pb::Posting) -> PostingRecord {
    let title = crate::sanitize::title(&p.title);
    if title != p.title {
        metrics::counter!(m::POSTINGS_SANITIZED_TOTAL, "what" => "title").increment(1);
    }
    let link = crate::sanitize::link(&p.link);
    if link.is_none() && !p.link.is_empty() {
        metrics::counter!(m::POSTINGS_SANITIZED_TOTAL, "what" => "link").increment(1);
    }
    PostingRecord {
        item_id_hash: p.item_id_hash,
        link,
        title: Some(title).filter(|s| !s.is_empty()),
        published_unix_ms: p.published_unix_ms,
        discovered_unix_ms: p.discovered_unix_ms,
    }
}
