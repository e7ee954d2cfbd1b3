//! The `Ingest` service: reader access events into the access statistics.
//!
//! A unary batch is all or nothing: it is checked first, and a batch with any unknown user
//! or feed, or a time outside the accepted window, is refused with `INVALID_ARGUMENT`
//! naming the counts, and records nothing. A stream is lenient, for firehoses: bad events
//! are counted and skipped, and the reply says how many were accepted.
//!
//! A token bound to users (`user:` in the token file) may send accesses only for them; an
//! event for any other user is answered exactly as one from an unknown user, so the
//! binding does not tell which user ids exist.

use crate::access::{AccessCounts, AccessEvent};
use crate::auth::{may_act_for, Identity};
use kairos_proto::v1 as pb;
use kairos_proto::v1::ingest_server::Ingest;
use std::sync::Arc;
use tonic::{Request, Response, Status, Streaming};

/// Where access events go: the live hub, which checks and records them in one step.
#[tonic::async_trait]
pub trait AccessRecorder: Send + Sync + 'static {
    /// Records every event or none; `Err` carries the counts of why not.
    async fn record_all_or_none(
        &self,
        events: Vec<AccessEvent>,
    ) -> Result<AccessCounts, AccessCounts>;
    /// Records the events that can be, counting and skipping the rest.
    async fn record_each(&self, events: Vec<AccessEvent>) -> AccessCounts;
}

#[tonic::async_trait]
impl<B: crate::store::KvBackend> AccessRecorder for crate::hub::Hub<B> {
    async fn record_all_or_none(
        &self,
        events: Vec<AccessEvent>,
    ) -> Result<AccessCounts, AccessCounts> {
        self.record_access_all_or_none(events).await
    }
    async fn record_each(&self, events: Vec<AccessEvent>) -> AccessCounts {
        self.record_access(events).await
    }
}

/// `Ingest` over a recorder.
pub struct IngestService {
    recorder: Arc<dyn AccessRecorder>,
}

impl IngestService {
    /// A service that records through `recorder`.
    pub fn new(recorder: Arc<dyn AccessRecorder>) -> Self {
        IngestService { recorder }
    }
}

/// The events the caller may send, and how many it may not (for users outside its binding).
fn events(identity: Option<&Identity>, batch: Vec<pb::AccessEvent>) -> (Vec<AccessEvent>, u64) {
    let total = batch.len();
    let allowed: Vec<AccessEvent> = batch
        .into_iter()
        .filter(|e| may_act_for(identity, &e.user_id))
        .map(|e| AccessEvent {
            user_id: e.user_id,
            feed_id: e.feed_id,
            unix_ms: e.unix_ms,
        })
        .collect();
    let forbidden = (total - allowed.len()) as u64;
    (allowed, forbidden)
}

#[tonic::async_trait]
impl Ingest for IngestService {
    async fn record_accesses(
        &self,
        r: Request<pb::RecordAccessesRequest>,
    ) -> Result<Response<pb::RecordAccessesResponse>, Status> {
        let identity = r.extensions().get::<Identity>().cloned();
        let (batch, forbidden) = events(identity.as_ref(), r.into_inner().events);
        let outcome = if forbidden > 0 {
            Err(AccessCounts::default())
        } else {
            self.recorder.record_all_or_none(batch).await
        };
        match outcome {
            Ok(recorded) => Ok(Response::new(pb::RecordAccessesResponse {
                accepted: recorded.accepted,
            })),
            Err(mut c) => {
                // The whole batch is refused: every event counts as skipped, by its reason.
                c.unknown_user += forbidden;
                crate::metrics::record_access(&AccessCounts { accepted: 0, ..c });
                let AccessCounts {
                    unknown_user,
                    unknown_feed,
                    out_of_window,
                    ..
                } = c;
                Err(Status::invalid_argument(format!(
                "batch refused: {unknown_user} events from unknown users, {unknown_feed} for unknown feeds, {out_of_window} outside the accepted time window"
            )))
            }
        }
    }

    async fn stream_accesses(
        &self,
        r: Request<Streaming<pb::RecordAccessesRequest>>,
    ) -> Result<Response<pb::RecordAccessesResponse>, Status> {
        let identity = r.extensions().get::<Identity>().cloned();
        let mut stream = r.into_inner();
        let mut accepted = 0;
        while let Some(msg) = stream.message().await? {
            let (batch, forbidden) = events(identity.as_ref(), msg.events);
            if forbidden > 0 {
                crate::metrics::record_access(&AccessCounts {
                    unknown_user: forbidden,
                    ..AccessCounts::default()
                });
            }
            accepted += self.recorder.record_each(batch).await.accepted;
        }
        Ok(Response::new(pb::RecordAccessesResponse { accepted }))
    }
}
