//! The worker's public `Ingest` endpoint: reader access events accepted at the edge and
//! relayed to the coordinator over the worker's acknowledged report stream.
//!
//! A worker cannot tell a known user from an unknown one, so both calls are lenient here:
//! every well-formed event is queued, and the coordinator counts and skips the ones it
//! refuses (visible in `kairos_ingest_access_events_total{result}`). The reply's `accepted`
//! is the number queued. The queue is bounded: when the report buffer is full the call
//! waits (back-pressure to the client), and after 10 s it fails with `RESOURCE_EXHAUSTED`
//! rather than dropping events. Events with an empty user id or ids over
//! [`bounds::MAX_ID_BYTES`] are refused at the edge (`INVALID_ARGUMENT`), and a large batch
//! is split into report messages of at most [`bounds::MAX_ACCESS_EVENTS_PER_MESSAGE`].
//!
//! A token bound to users (`user:` in `--ingest-tokens`) sends accesses only for them. Events
//! for other users are dropped here and counted in
//! `kairos_worker_accesses_dropped_total{reason="user_binding"}`, and the reply counts them
//! as queued, exactly as it would an unknown user's, so the binding does not tell which user
//! ids exist.

use kairos_proto::bounds;
use kairos_proto::v1 as pb;
use kairos_proto::v1::ingest_server::Ingest;
use kairos_runtime::auth::{may_act_for, Identity};
use std::time::Duration;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status, Streaming};

/// Counter `reason`: access events the relay dropped (`user_binding`: for a user outside the
/// sending token's binding).
pub const ACCESSES_DROPPED_TOTAL: &str = "kairos_worker_accesses_dropped_total";

/// Batches handed from the endpoint to the worker's report buffer.
pub type RelaySender = mpsc::Sender<Vec<pb::AccessEvent>>;

/// `Ingest` that relays into the worker.
pub struct RelayService {
    tx: RelaySender,
}

impl RelayService {
    /// A service queueing into `tx`.
    pub fn new(tx: RelaySender) -> Self {
        RelayService { tx }
    }

    async fn queue(
        &self,
        identity: Option<&Identity>,
        mut events: Vec<pb::AccessEvent>,
    ) -> Result<u64, Status> {
        // Refused here, at the edge, whole: what the coordinator would refuse must not
        // travel. Large batches are split into report messages by the worker.
        if let Some(why) = events.iter().find_map(|e| bounds::check_access(e).err()) {
            return Err(Status::invalid_argument(why));
        }
        let n = events.len() as u64;
        events.retain(|e| may_act_for(identity, &e.user_id));
        let dropped = n - events.len() as u64;
        if dropped > 0 {
            metrics::counter!(ACCESSES_DROPPED_TOTAL, "reason" => "user_binding")
                .increment(dropped);
        }
        if events.is_empty() {
            return Ok(n);
        }
        match tokio::time::timeout(Duration::from_secs(10), self.tx.send(events)).await {
            Ok(Ok(())) => Ok(n),
            Ok(Err(_)) => Err(Status::unavailable("the worker is shutting down")),
            Err(_) => Err(Status::resource_exhausted(
                "the worker's report buffer is full; retry later",
            )),
        }
    }
}

#[tonic::async_trait]
impl Ingest for RelayService {
    async fn record_accesses(
        &self,
        r: Request<pb::RecordAccessesRequest>,
    ) -> Result<Response<pb::RecordAccessesResponse>, Status> {
        let identity = r.extensions().get::<Identity>().cloned();
        let accepted = self.queue(identity.as_ref(), r.into_inner().events).await?;
        Ok(Response::new(pb::RecordAccessesResponse { accepted }))
    }

    async fn stream_accesses(
        &self,
        r: Request<Streaming<pb::RecordAccessesRequest>>,
    ) -> Result<Response<pb::RecordAccessesResponse>, Status> {
        let identity = r.extensions().get::<Identity>().cloned();
        let mut stream = r.into_inner();
        let mut accepted = 0;
        while let Some(msg) = stream.message().await? {
            accepted += self.queue(identity.as_ref(), msg.events).await?;
        }
        Ok(Response::new(pb::RecordAccessesResponse { accepted }))
    }
}
