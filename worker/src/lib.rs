//! Kairos worker library: the data plane's pieces, usable and testable on their own.
//!
//! * [`agent`] — the running worker: coordinator session and fetch loop;
//! * [`leader`] — which coordinator replica leads, asked of all at once;
//! * [`document`] — a fetched body read off the async runtime, under a budget;
//! * [`fetch`] — one bounded, classified HTTP fetch;
//! * [`normalise`] — older and mislabelled formats rewritten for the parser;
//! * [`parse`] — feed documents (RSS 0.9x/1.0/2.0, Atom 0.3/1.0, JSON Feed) to postings;
//! * [`relay`] — the public access-event endpoint relayed to the coordinator;
//! * [`reports`] — the bounded, acknowledged report buffer;
//! * [`target`] — which addresses a feed URL may reach;
//! * [`telemetry`] — the worker's metrics;
//! * [`timing`] — DNS and connection-establishment timings.
//!
//! The clock, the fetch schedule, auth and process plumbing are shared with the coordinator
//! in `kairos-runtime`; the loopback feed farm and hostile fixtures are `kairos-farm`, which
//! this library does not link.

pub mod agent;
pub use kairos_runtime::credentials;
pub mod decode;
pub mod discover;
pub mod document;
pub mod fetch;
pub mod hints;
pub mod leader;
pub mod normalise;
pub mod parse;
pub mod relay;
pub mod reports;
pub mod target;
pub mod telemetry;
pub mod timing;
pub mod websub;
