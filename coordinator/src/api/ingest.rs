//! The `Ingest` service: reader access events into the access statistics.
//!
//! A unary batch is all or nothing: it is checked first, and a batch with any unknown user
//! or feed, or a time outside the accepted window, is refused with `INVALID_ARGUMENT`
//! naming the counts, and records nothing. A stream is lenient, for firehoses: bad events
//! are counted and skipped, and the reply says how many were accepted.

use crate::access::{AccessCounts, AccessEvent, AccessStats};
use kairos_proto::v1 as pb;
use kairos_proto::v1::ingest_server::Ingest;
use kairos_runtime::clock::SimClock;
use std::sync::{Arc, Mutex};
use tonic::{Request, Response, Status, Streaming};

/// Access statistics shared by the services that see users and feeds come and go.
pub type SharedAccessStats = Arc<Mutex<AccessStats>>;

/// Where checked events go (the hub records them and feeds the miss measures).
pub type AccessSink = Arc<dyn Fn(&[AccessEvent]) -> AccessCounts + Send + Sync>;

/// `Ingest` over shared access statistics.
pub struct IngestService {
    stats: SharedAccessStats,
    sink: AccessSink,
    clock: SimClock,
}

impl IngestService {
    /// A service that checks against `stats` and records through `sink`, on `clock`'s time.
    pub fn new(stats: SharedAccessStats, sink: AccessSink, clock: SimClock) -> Self {
        IngestService { stats, sink, clock }
    }
}

fn events(batch: Vec<pb::AccessEvent>) -> Vec<AccessEvent> {
    batch
        .into_iter()
        .map(|e| AccessEvent {
            user_id: e.user_id,
            feed_id: e.feed_id,
            unix_ms: e.unix_ms,
        })
        .collect()
}

fn lock(stats: &SharedAccessStats) -> Result<std::sync::MutexGuard<'_, AccessStats>, Status> {
    stats
        .lock()
        .map_err(|_| Status::internal("access statistics poisoned by a panic"))
}

#[tonic::async_trait]
impl Ingest for IngestService {
    async fn record_accesses(
        &self,
        r: Request<pb::RecordAccessesRequest>,
    ) -> Result<Response<pb::RecordAccessesResponse>, Status> {
        let batch = events(r.into_inner().events);
        let now = self.clock.now_ms();
        let c = lock(&self.stats)?.check(&batch, now);
        if c.accepted as usize != batch.len() {
            // The whole batch is refused: every event counts as skipped, by its reason.
            crate::metrics::record_access(&AccessCounts { accepted: 0, ..c });
            let AccessCounts {
                unknown_user,
                unknown_feed,
                out_of_window,
                ..
            } = c;
            return Err(Status::invalid_argument(format!(
                "batch refused: {unknown_user} events from unknown users, {unknown_feed} for unknown feeds, {out_of_window} outside the accepted time window"
            )));
        }
        let recorded = (self.sink)(&batch);
        Ok(Response::new(pb::RecordAccessesResponse {
            accepted: recorded.accepted,
        }))
    }

    async fn stream_accesses(
        &self,
        r: Request<Streaming<pb::RecordAccessesRequest>>,
    ) -> Result<Response<pb::RecordAccessesResponse>, Status> {
        let mut stream = r.into_inner();
        let mut accepted = 0;
        while let Some(msg) = stream.message().await? {
            let batch = events(msg.events);
            accepted += (self.sink)(&batch).accepted;
        }
        Ok(Response::new(pb::RecordAccessesResponse { accepted }))
    }
}
