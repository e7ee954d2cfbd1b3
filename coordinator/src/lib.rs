//! Kairos coordinator library: learning, planning and offline simulation.
//!
//! The planner ([`plan`]) is pure and synchronous; everything async (later: gRPC services,
//! storage, the relearn loop) wraps it.

pub mod plan;
