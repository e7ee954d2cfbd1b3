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

use kairos_proto::bounds;
use kairos_proto::v1 as pb;
use kairos_proto::v1::ingest_server::Ingest;
use std::time::Duration;
use tokio::sync::mpsc;
use tonic::{Request, Response, Status, Streaming};

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

    async fn queue(&self, events: Vec<pb::AccessEvent>) -> Result<u64, Status> {
        // Refused here, at the edge, whole: what the coordinator would refuse must not
        // travel. Large batches are split into report messages by the worker.
        if let Some(why) = events.iter().find_map(|e| bounds::check_access(e).err()) {
            return Err(Status::invalid_argument(why));
        }
        let n = events.len() as u64;
        if n == 0 {
            return Ok(0);
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
        let accepted = self.queue(r.into_inner().events).await?;
        Ok(Response::new(pb::RecordAccessesResponse { accepted }))
    }

    async fn stream_accesses(
        &self,
        r: Request<Streaming<pb::RecordAccessesRequest>>,
    ) -> Result<Response<pb::RecordAccessesResponse>, Status> {
        let mut stream = r.into_inner();
        let mut accepted = 0;
        while let Some(msg) = stream.message().await? {
            accepted += self.queue(msg.events).await?;
        }
        Ok(Response::new(pb::RecordAccessesResponse { accepted }))
    }
}
