//! Kairos coordinator library: learning, planning and offline simulation.
//!
//! The planner ([`plan`]) and the host-to-worker sharding ([`shard`]) are pure and
//! synchronous; everything async (later: gRPC services,
//! storage, the relearn loop) wraps it.

pub mod access;
pub mod api;
pub mod control;
pub mod demo;
pub mod hub;
pub mod ingest;
pub mod learn;
pub mod metrics;
pub mod plan;
pub mod registry;
pub mod shard;
pub mod simulate;
pub mod store;
pub mod synth;
pub mod trace;
