//! The coordinator's live control state: which workers exist, which hosts each owns, what
//! each should fetch and when, and what every feed's last fetches taught us.
//!
//! * [`capacity`] — the next hour's planned fetches against the workers' capacity;
//! * [`cluster`] — worker sessions with leases, host ownership by rendezvous hashing, and
//!   each worker's versioned desired state, published on a watch channel per worker;
//! * [`feedstate`] — per-feed runtime state (cache validators, recent item ids, posting
//!   observations) that reports update and the relearn step reads;
//! * [`cold`] — the parts of it most feeds leave at their default, boxed only once set;
//! * [`relearn`] — observations to planner models, and a plan to per-feed fetch times;
//! * [`shrink`] — the learner's shrinkage, chosen on held-out days;
//! * [`calibrate`] — feeds' rates scaled by what feeds forecast alike went on to post;
//! * [`rate_prior`] — the population's distribution of rates, each feed's rate under it;
//! * [`regimes`] — which of a feed's days belong to its current regime (change points);
//! * [`shapes`] — daily shapes pooled across feeds, the prior of each feed's hours;
//! * [`siblings`] — a feed's host's other feeds, a level between its own counts and
//!   everyone's;
//! * [`from_trace`] — the live rules applied to a recorded trace, for `plan` and `simulate`;
//! * [`readers`] — reader access rates with a cold-start prior;
//! * [`health`] — per-feed failures, back-off and publisher hints as bounds on the plan;
//! * [`hosts`] — hosts that throttled us (429/503), held and planned at a reduced share;
//! * [`outages`] — hosts that stopped answering (refused, TLS, DNS, timeouts): a breaker each;
//! * [`promise`] — the plans' promised delay against what polls delivered, to recalibrate it;
//! * [`timer`] — feeds whose postings land at one time of day, and that window.
//!
//! Everything here is synchronous and clock-explicit; the async service and loops in
//! [`crate::api::worker`] and [`crate::hub`] wrap it.

pub mod calibrate;
pub mod capacity;
pub mod cluster;
pub mod cold;
pub mod feedstate;
pub mod from_trace;
pub mod health;
pub mod hosts;
pub mod models;
pub mod outages;
pub mod packed;
pub mod population;
pub mod promise;
pub mod push;
pub mod quick;
pub mod rate_prior;
pub mod readers;
pub mod recency;
pub mod regimes;
pub mod relearn;
pub mod reliability;
pub mod settings;
pub mod shapes;
pub mod shrink;
pub mod siblings;
pub mod timer;

/// What a worker should fetch for one feed: the schedule part of an assignment.
/// Validators and recent item ids are attached when the assignment is sent, so that a
/// fetch changing an ETag does not count as a change of the worker's desired state.
#[derive(Clone, Debug, Default, PartialEq)]
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
    /// No fetch before this time, Unix ms (0 = none): back-off or the host's Retry-After.
    pub not_before_unix_ms: i64,
    /// A feed never fetched: when its first fetch is due, Unix ms (0 = at once). The hub
    /// paces first sights within each day's budget (`hub::pacing`).
    pub first_fetch_unix_ms: i64,
    /// Hours (bit h, UTC) the publisher asked not to be fetched in.
    pub skip_hours: u32,
    /// Days (bit 0 = Monday) the publisher asked not to be fetched on.
    pub skip_days: u32,
    /// The feed's model has timer windows (`control::timer`): its fetches sit just after
    /// them, and workers do not move them earlier to fill a day.
    pub timed: bool,
}
