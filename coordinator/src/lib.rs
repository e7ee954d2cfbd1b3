//! Kairos coordinator library: learning, planning, offline simulation, and the live
//! coordinator.
//!
//! The planner ([`plan`]), the host-to-worker sharding ([`shard`]) and the control state
//! ([`control`]) are pure and synchronous; everything async wraps them: the live hub
//! ([`hub`]: relearn and replan loops, report ingest), the gRPC services ([`api`]), storage
//! ([`store`]) and the server that assembles them ([`server`]).

pub mod access;
pub mod api;
/// Bearer tokens and scopes, shared with the worker's ingest endpoint.
pub use kairos_worker::auth;
pub mod control;
pub mod demo;
pub mod election;
pub mod host_limits;
pub mod hub;
pub mod ingest;
pub mod learn;
pub mod metrics;
pub mod plan;
pub mod registry;
pub mod replay;
pub mod retention;
pub mod server;
pub mod shard;
pub mod simulate;
pub mod store;
pub mod synth;
pub mod tls;
pub mod trace;
pub mod tune;
pub mod weekly;
