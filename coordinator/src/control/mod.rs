//! The coordinator's live control state: which workers exist, which hosts each owns, what
//! each should fetch and when, and what every feed's last fetches taught us.
//!
//! * [`cluster`] — worker sessions with leases, host ownership by rendezvous hashing, and
//!   each worker's versioned desired state, published on a watch channel per worker;
//! * [`feedstate`] — per-feed runtime state (cache validators, recent item ids, posting
//!   observations) that reports update and the relearn step reads;
//! * [`relearn`] — observations to planner models, and a plan to per-feed fetch times;
//! * [`readers`] — reader access rates with a cold-start prior.
//!
//! Everything here is synchronous and clock-explicit; the async service and loops in
//! [`crate::api::worker`] and [`crate::runtime`] wrap it.

pub mod cluster;
pub mod feedstate;
pub mod readers;
pub mod relearn;

/// What a worker should fetch for one feed: the schedule part of an assignment.
/// Validators and recent item ids are attached when the assignment is sent, so that a
/// fetch changing an ETag does not count as a change of the worker's desired state.
#[derive(Clone, Debug, PartialEq)]
pub struct FeedSpec {
    /// Feed id.
    pub id: String,
    /// Fetch URL.
    pub url: String,
    /// Politeness group (host and port).
    pub host: String,
    /// Fetch offsets within the period, seconds.
    pub offsets_seconds: Vec<f64>,
    /// Period, seconds.
    pub period_seconds: f64,
    /// Start of the period the offsets count from, Unix ms (simulated time).
    pub origin_unix_ms: i64,
}
