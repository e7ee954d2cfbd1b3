//! Kairos worker library: the data plane's pieces, usable and testable on their own.
//!
//! * [`agent`] — the running worker: coordinator session and fetch loop;
//! * [`clock`] — the (possibly time-compressed) clock all timing goes through;
//! * [`farm`] — a synthetic feed farm on loopback for demos, tests and benchmarks;
//! * [`fetch`] — one bounded, classified HTTP fetch;
//! * [`fixtures`] — misbehaving servers and fixed documents on loopback;
//! * [`parse`] — feed documents (RSS 0.9x/1.0/2.0, Atom 0.3/1.0, JSON Feed) to postings;
//! * [`process`] — logging set-up and shutdown signals of the binaries;
//! * [`relay`] — the public access-event endpoint relayed to the coordinator;
//! * [`reports`] — the bounded, acknowledged report buffer;
//! * [`schedule`] — which feed to fetch when, from the versioned assignment;
//! * [`target`] — which addresses a feed URL may reach.

pub mod agent;
pub mod auth;
pub mod clock;
pub mod credentials;
pub mod farm;
pub mod fetch;
pub mod fixtures;
pub mod hints;
pub mod parse;
pub mod process;
pub mod relay;
pub mod reports;
pub mod schedule;
pub mod target;
pub mod telemetry;
