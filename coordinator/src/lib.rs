//! Kairos coordinator library: learning, planning, offline simulation, and the live
//! coordinator.
//!
//! The planner and the offline toolkit are the `kairos-planner` crate (no async runtime),
//! re-exported here under their old paths ([`plan`], [`learn`], [`trace`], [`simulate`],
//! [`synth`], [`weekly`], [`peers`]). The host-to-worker sharding ([`shard`]) and the control
//! state ([`control`]) are pure and synchronous too; everything async wraps them: the live hub
//! ([`hub`]: relearn and replan loops, report ingest), the gRPC services ([`api`]), storage
//! ([`store`]) and the server that assembles them ([`server`]).

pub mod access;
pub mod api;
/// Bearer tokens and scopes, shared with the worker's ingest endpoint.
pub use kairos_runtime::auth;
pub mod control;
pub mod election;
pub mod host_limits;
pub mod hub;
pub mod ingest;
pub mod metrics;
pub mod push;
pub mod registry;
pub mod retention;
pub mod sanitize;
pub mod server;
pub mod settings;
pub mod shard;
pub mod store;
pub mod tls;
pub use kairos_planner::{learn, peers, plan, simulate, synth, time, trace, weekly};
