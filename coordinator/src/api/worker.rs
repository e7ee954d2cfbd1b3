//! The `WorkerControl` service: registration, the assignment stream, the report stream
//! and heartbeats, over the [`Hub`].
//!
//! * The assignment stream sends the session's desired state as a snapshot, then the
//!   difference between each new version and the last one sent, as deltas. A slow stream
//!   skips versions (the watch channel keeps only the latest), which is safe because a
//!   delta is computed against what this stream actually sent. When the session ends (lease
//!   expired, or replaced by a newer registration of the same name) the stream ends with
//!   `NOT_FOUND`, telling the worker to register again.
//! * Reports are read in small batches (what arrived within a few milliseconds, at most
//!   512) and acknowledged once the batch is durable: the ack carries the highest sequence
//!   number of the batch and the reports refused, with reasons.

use super::streams::{LiveStreams, Opened};
use crate::auth::{own_session, Identity, Scope};
use crate::control::cluster::{ClusterError, Desired};
use crate::control::FeedSpec;
use crate::hub::Hub;
use crate::store::KvBackend;
use kairos_proto::v1 as pb;
use kairos_proto::v1::worker_control_server::WorkerControl;
use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

/// `WorkerControl` over a hub.
pub struct WorkerControlService<B> {
    hub: Arc<Hub<B>>,
    max_capacity: f64,
    require_certs: bool,
    streams: Arc<LiveStreams>,
}

impl<B> WorkerControlService<B> {
    /// A service over `hub`; a worker claiming more than `max_capacity` fetches per second
    /// is registered at `max_capacity` (a rogue claim of 1e308 would take every host).
    pub fn new(hub: Arc<Hub<B>>, max_capacity: f64) -> Self {
        WorkerControlService {
            hub,
            max_capacity,
            require_certs: false,
            streams: Arc::default(),
        }
    }

    /// With mutual TLS: a worker registers only under a name its client certificate
    /// carries (subject CN or DNS SAN).
    pub fn require_certs(mut self, on: bool) -> Self {
        self.require_certs = on;
        self
    }
}

/// The names the connection's client certificate vouches for.
fn cert_names<T>(r: &Request<T>) -> Vec<String> {
    r.peer_certs()
        .and_then(|certs| certs.first().map(|c| crate::tls::cert_names(c)))
        .unwrap_or_default()
}

impl From<ClusterError> for Status {
    fn from(e: ClusterError) -> Status {
        match e {
            ClusterError::UnknownWorker(_) => Status::not_found(e.to_string()),
            ClusterError::InvalidArgument(_) => Status::invalid_argument(e.to_string()),
        }
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// Encoded size an assignment message part stays under (the worker's default limit on a
/// message is 4 MB; a feed's assignment, with its recent item ids, is up to a few KB, so a
/// snapshot of a few thousand feeds would not fit in one message).
const PART_BYTES: usize = 1 << 20;

/// Splits an update into parts of at most about `limit` encoded bytes, each flagged `more`
/// but the last. One oversized feed still goes alone in its part.
fn split(
    update: pb::assignment_update::Update,
    limit: usize,
) -> Vec<pb::assignment_update::Update> {
    use pb::assignment_update::Update;
    use prost::Message;
    fn chunks<T>(items: Vec<T>, size: impl Fn(&T) -> usize, limit: usize) -> Vec<Vec<T>> {
        let mut out: Vec<Vec<T>> = vec![Vec::new()];
        let mut bytes = 0;
        for item in items {
            let n = size(&item) + 8;
            if bytes + n > limit && !out.last().is_some_and(Vec::is_empty) {
                out.push(Vec::new());
                bytes = 0;
            }
            bytes += n;
            out.last_mut().expect("one part").push(item);
        }
        out
    }
    let mut parts = match update {
        Update::Snapshot(s) => chunks(s.feeds, |f| f.encoded_len(), limit)
            .into_iter()
            .map(|feeds| Update::Snapshot(pb::AssignmentSnapshot { feeds, more: true }))
            .collect::<Vec<_>>(),
        Update::Delta(d) => {
            let mut parts: Vec<Update> = chunks(d.upserts, |f| f.encoded_len(), limit)
                .into_iter()
                .filter(|c| !c.is_empty())
                .map(|upserts| {
                    Update::Delta(pb::AssignmentDelta {
                        upserts,
                        removed_feed_ids: Vec::new(),
                        more: true,
                    })
                })
                .collect();
            for removed in chunks(d.removed_feed_ids, String::len, limit) {
                if !removed.is_empty() || parts.is_empty() {
                    parts.push(Update::Delta(pb::AssignmentDelta {
                        upserts: Vec::new(),
                        removed_feed_ids: removed,
                        more: true,
                    }));
                }
            }
            parts
        }
    };
    match parts.last_mut() {
        Some(Update::Snapshot(s)) => s.more = false,
        Some(Update::Delta(d)) => d.more = false,
        None => {}
    }
    parts
}

/// The update that takes a worker from `sent` to `now`.
async fn delta<B: KvBackend>(
    hub: &Hub<B>,
    sent: &BTreeMap<String, FeedSpec>,
    now: &BTreeMap<String, FeedSpec>,
) -> pb::AssignmentDelta {
    let changed = now
        .iter()
        .filter(|(id, spec)| sent.get(*id) != Some(*spec))
        .map(|(_, spec)| spec.clone())
        .collect();
    pb::AssignmentDelta {
        upserts: hub.assignments(changed).await,
        removed_feed_ids: sent
            .keys()
            .filter(|id| !now.contains_key(*id))
            .cloned()
            .collect(),
        more: false,
    }
}

#[tonic::async_trait]
impl<B: KvBackend> WorkerControl for WorkerControlService<B> {
    async fn register(
        &self,
        r: Request<pb::RegisterRequest>,
    ) -> Result<Response<pb::RegisterResponse>, Status> {
        // A worker token registers only under its own name.
        if let Some(id) = r.extensions().get::<Identity>() {
            if !id.may_act_as(&r.get_ref().worker_name) {
                return Err(Status::permission_denied(format!(
                    "the token of worker `{}` may not register another name",
                    id.name
                )));
            }
        }
        if self.require_certs {
            let names = cert_names(&r);
            if !names.contains(&r.get_ref().worker_name) {
                return Err(Status::permission_denied(format!(
                    "the client certificate names {names:?}, not worker `{}`",
                    r.get_ref().worker_name
                )));
            }
        }
        let r = r.into_inner();
        let capacity = if r.capacity_fetches_per_second > self.max_capacity {
            tracing::warn!(worker = %r.worker_name, claimed = r.capacity_fetches_per_second, cap = self.max_capacity, "worker capacity capped");
            self.max_capacity
        } else {
            r.capacity_fetches_per_second
        };
        let (worker_id, epoch) = self.hub.register(&r.worker_name, capacity).await?;
        let c = &self.hub.config().cluster;
        Ok(Response::new(pb::RegisterResponse {
            worker_id,
            heartbeat_interval_ms: c.heartbeat.as_millis() as i64,
            lease_ms: c.lease.as_millis() as i64,
            epoch,
        }))
    }

    type AssignmentsStream = BoxStream<pb::AssignmentUpdate>;

    async fn assignments(
        &self,
        r: Request<pb::AssignmentsRequest>,
    ) -> Result<Response<Self::AssignmentsStream>, Status> {
        own_session(r.extensions().get::<Identity>(), &r.get_ref().worker_id)?;
        let r = r.into_inner();
        let (epoch, mut rx) = self.hub.subscribe(&r.worker_id).await?;
        let Opened {
            tx,
            superseded,
            close,
            outbox,
        } = self.streams.open(&r.worker_id, 4);
        let hub = self.hub.clone();
        let worker = r.worker_id;
        tokio::spawn(async move {
            let produce = async move {
                let mut sent: Option<Desired> = None;
                loop {
                    let now = rx.borrow_and_update().clone();
                    let update = match &sent {
                        _ if now.version == 0 => None,
                        None => Some(pb::assignment_update::Update::Snapshot(
                            pb::AssignmentSnapshot {
                                feeds: hub.assignments(now.feeds.values().cloned().collect()).await,
                                more: false,
                            },
                        )),
                        Some(prev) if prev.version != now.version => {
                            Some(pb::assignment_update::Update::Delta(
                                delta(&hub, &prev.feeds, &now.feeds).await,
                            ))
                        }
                        Some(_) => None,
                    };
                    if let Some(update) = update {
                        let parts = split(update, PART_BYTES);
                        let last = parts.len().saturating_sub(1);
                        for (i, part) in parts.into_iter().enumerate() {
                            let msg = pb::AssignmentUpdate {
                                epoch,
                                version: now.version,
                                update: Some(part),
                                // With the last part, which is when the update applies.
                                allowance: now.allowance.filter(|_| i == last).map(|a| {
                                    pb::DayAllowance {
                                        day: a.day,
                                        fetches: a.fetches,
                                        later_days: a.later_days,
                                        counted: a.counted,
                                        per_minute: a.per_minute.unwrap_or(0),
                                    }
                                }),
                            };
                            if tx.send(Ok(msg)).await.is_err() {
                                return; // The worker hung up.
                            }
                        }
                        sent = Some(now);
                    }
                    if rx.changed().await.is_err() {
                        // The session is gone: tell the worker to register again.
                        let _ = tx
                            .send(Err(Status::not_found(format!(
                                "worker session `{worker}` ended; register again"
                            ))))
                            .await;
                        return;
                    }
                }
            };
            tokio::select! {
                _ = superseded => close.superseded(),
                _ = produce => drop(close),
            }
        });
        Ok(Response::new(Box::pin(outbox)))
    }

    type TasksStream = BoxStream<pb::WorkerTask>;

    async fn tasks(
        &self,
        r: Request<pb::TasksRequest>,
    ) -> Result<Response<Self::TasksStream>, Status> {
        own_session(r.extensions().get::<Identity>(), &r.get_ref().worker_id)?;
        let id = r.into_inner().worker_id;
        let rx = self.hub.open_tasks(&id).await.ok_or_else(|| {
            Status::not_found(format!("worker session `{id}` is unknown or expired"))
        })?;
        let stream = ReceiverStream::new(rx).map(Ok::<_, Status>);
        Ok(Response::new(Box::pin(stream)))
    }

    type ReportStream = BoxStream<pb::ReportAck>;

    async fn report(
        &self,
        r: Request<Streaming<pb::ReportMessage>>,
    ) -> Result<Response<Self::ReportStream>, Status> {
        let identity = r.extensions().get::<Identity>().cloned();
        let input = r.into_inner();
        let (tx, out) = tokio::sync::mpsc::channel(16);
        let hub = self.hub.clone();
        tokio::spawn(async move {
            let batches = input.chunks_timeout(512, Duration::from_millis(5));
            tokio::pin!(batches);
            let mut worker: Option<String> = None;
            while let Some(batch) = batches.next().await {
                let mut msgs = Vec::with_capacity(batch.len());
                let mut failed = None;
                for m in batch {
                    match m {
                        Ok(m) => msgs.push(m),
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                if let Some(first) = msgs.first() {
                    let w = worker.get_or_insert_with(|| first.worker_id.clone());
                    if let Err(e) = own_session(identity.as_ref(), w) {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                    // A report made under another leader's assignment (its session is
                    // gone with that leader): refused whole, so the worker registers here
                    // and sends it again on a session of this epoch. Nothing is lost.
                    let epoch = hub.epoch();
                    if let Some(m) = msgs.iter().find(|m| m.epoch != 0 && m.epoch != epoch) {
                        metrics::counter!(crate::metrics::STALE_EPOCH_REPORTS_TOTAL).increment(1);
                        let _ = tx
                            .send(Err(Status::failed_precondition(format!(
                                "report of epoch {} on a coordinator of epoch {epoch}; register again",
                                m.epoch
                            ))))
                            .await;
                        return;
                    }
                    if msgs.iter().any(|m| &m.worker_id != w) {
                        let _ = tx
                            .send(Err(Status::invalid_argument(
                                "every message of a report stream must carry the same worker_id",
                            )))
                            .await;
                        return;
                    }
                    // Reader accesses in a report stream are the relay's: only a token
                    // that also holds `ingest` may send them (a stolen worker token reaches
                    // its hosts' assignments and reports, not readers' histories).
                    let may_relay = identity.as_ref().is_none_or(|id| id.has(Scope::Ingest));
                    let (msgs, refused) = refuse_accesses_unless(may_relay, msgs);
                    let handled = if msgs.is_empty() {
                        Ok(pb::ReportAck::default())
                    } else {
                        hub.handle_reports(w, msgs).await
                    };
                    let ack = match handled {
                        Ok(mut ack) => {
                            if !refused.is_empty() {
                                tracing::warn!(worker = %w, messages = refused.len(), "reader accesses from a worker token without the ingest scope refused");
                                metrics::counter!(crate::metrics::REPORTS_REJECTED_TOTAL)
                                    .increment(refused.len() as u64);
                            }
                            for r in refused {
                                ack.acked_seq = ack.acked_seq.max(r.seq);
                                ack.rejected.push(r);
                            }
                            Ok(ack)
                        }
                        Err(e) => {
                            // Not acknowledged: the worker resends after reconnecting.
                            tracing::error!(error = %e, "report ingest failed");
                            Err(Status::from(e))
                        }
                    };
                    let stop = ack.is_err();
                    if tx.send(ack).await.is_err() || stop {
                        return;
                    }
                }
                if let Some(e) = failed {
                    // The worker's side broke off (it reconnects and resends), or a message
                    // could not be decoded (over the size limit, garbage): say which, once
                    // per stream, since the worker only sees its stream end.
                    if e.code() == tonic::Code::Cancelled || e.code() == tonic::Code::Unknown {
                        tracing::debug!(worker = ?worker, error = %e, "report stream ended");
                    } else {
                        metrics::counter!(crate::metrics::REPORT_STREAMS_BROKEN_TOTAL).increment(1);
                        tracing::warn!(worker = ?worker, code = ?e.code(), error = %e, "report stream broken by an unreadable message");
                    }
                    return;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out))))
    }

    async fn heartbeat(
        &self,
        r: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        own_session(r.extensions().get::<Identity>(), &r.get_ref().worker_id)?;
        let r = r.into_inner();
        let now = self.hub.clock().now_ms();
        if r.leaving {
            // Its last word: the session ends here, whatever else the beat says.
            if !self.hub.leave(&r.worker_id).await {
                return Err(Status::not_found(format!(
                    "worker session `{}` is unknown or expired",
                    r.worker_id
                )));
            }
            return Ok(Response::new(pb::HeartbeatResponse {
                epoch: 0,
                version: 0,
                coordinator_unix_ms: now,
            }));
        }
        let (epoch, version) = self
            .hub
            .heartbeat_observed(
                &r.worker_id,
                crate::control::cluster::Observed {
                    report_backlog: r.report_backlog,
                    in_flight: r.in_flight,
                    applied_version: r.applied_version,
                    clock_offset_ms: (r.sent_unix_ms != 0)
                        .then(|| r.sent_unix_ms.saturating_sub(now)),
                },
            )
            .await?;
        Ok(Response::new(pb::HeartbeatResponse {
            epoch,
            version,
            coordinator_unix_ms: self.hub.clock().now_ms(),
        }))
    }
}

/// Splits off the access batches of a report batch when the sender may not relay them:
/// each is refused (acknowledged, not recorded) with the reason.
fn refuse_accesses_unless(
    may_relay: bool,
    msgs: Vec<pb::ReportMessage>,
) -> (Vec<pb::ReportMessage>, Vec<pb::RejectedReport>) {
    if may_relay {
        return (msgs, Vec::new());
    }
    let mut refused = Vec::new();
    let kept = msgs
        .into_iter()
        .filter(|m| {
            let access = matches!(m.body, Some(pb::report_message::Body::Accesses(_)));
            if access {
                refused.push(pb::RejectedReport {
                    seq: m.seq,
                    reason: "reader accesses need a token with the ingest scope".into(),
                });
            }
            !access
        })
        .collect();
    (kept, refused)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pb::assignment_update::Update;
    use prost::Message;

    fn feed(i: usize) -> pb::FeedAssignment {
        pb::FeedAssignment {
            feed_id: format!("f{i}"),
            url: format!("https://h{i}.example/{}", "x".repeat(4000)),
            recent_item_id_hashes: (0..256).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn accesses_in_reports_need_the_ingest_scope() {
        let msg = |seq, access: bool| pb::ReportMessage {
            seq,
            body: Some(if access {
                pb::report_message::Body::Accesses(pb::AccessBatch::default())
            } else {
                pb::report_message::Body::Fetch(pb::FetchReport::default())
            }),
            ..Default::default()
        };
        let batch = || vec![msg(1, false), msg(2, true), msg(3, false), msg(4, true)];
        let (kept, refused) = refuse_accesses_unless(false, batch());
        assert_eq!(kept.iter().map(|m| m.seq).collect::<Vec<_>>(), [1, 3]);
        assert_eq!(refused.iter().map(|r| r.seq).collect::<Vec<_>>(), [2, 4]);
        assert!(refused[0].reason.contains("ingest scope"));
        let (kept, refused) = refuse_accesses_unless(true, batch());
        assert_eq!(kept.len(), 4);
        assert!(refused.is_empty());
    }

    #[test]
    fn large_updates_go_in_parts_under_the_limit_and_lose_nothing() {
        let feeds: Vec<pb::FeedAssignment> = (0..3000).map(feed).collect();
        let whole = pb::AssignmentSnapshot {
            feeds: feeds.clone(),
            more: false,
        };
        assert!(
            whole.encoded_len() > 4 << 20,
            "the case that broke: one message over 4 MB"
        );
        let parts = split(Update::Snapshot(whole), PART_BYTES);
        assert!(parts.len() >= 10);
        let mut got = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            let Update::Snapshot(s) = p else {
                panic!("a snapshot splits into snapshots")
            };
            assert!(
                s.encoded_len() <= PART_BYTES + 16,
                "part {i}: {}",
                s.encoded_len()
            );
            assert_eq!(s.more, i + 1 < parts.len());
            got.extend(s.feeds.iter().cloned());
        }
        assert_eq!(got, feeds);

        let removed: Vec<String> = (0..200_000).map(|i| format!("feed-{i:012}")).collect();
        let parts = split(
            Update::Delta(pb::AssignmentDelta {
                upserts: feeds.clone(),
                removed_feed_ids: removed.clone(),
                more: false,
            }),
            PART_BYTES,
        );
        let (mut up, mut rm) = (Vec::new(), Vec::new());
        for (i, p) in parts.iter().enumerate() {
            let Update::Delta(d) = p else {
                panic!("a delta splits into deltas")
            };
            assert!(d.encoded_len() <= PART_BYTES + 16);
            assert_eq!(d.more, i + 1 < parts.len());
            up.extend(d.upserts.iter().cloned());
            rm.extend(d.removed_feed_ids.iter().cloned());
        }
        assert_eq!((up, rm), (feeds, removed));

        // Small and empty updates stay one message.
        let one = split(
            Update::Snapshot(pb::AssignmentSnapshot::default()),
            PART_BYTES,
        );
        assert_eq!(one.len(), 1);
        let one = split(Update::Delta(pb::AssignmentDelta::default()), PART_BYTES);
        assert!(matches!(&one[..], [Update::Delta(d)] if !d.more));
    }
}
