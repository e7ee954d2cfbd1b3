//! The gRPC contract of Kairos (package `kairos.v1`).
//!
//! The `.proto` files and their tonic/prost bindings arrive with the distributed runtime
//! (coordinator service and workers). The planner, which is all that exists so far, is
//! offline and needs no wire format, so this crate deliberately exports nothing yet.
