//! Plumbing shared by the coordinator and the worker, and nothing else: it links neither the
//! planner nor the fetcher, so each binary takes only what it runs.
//!
//! * [`address`] — which IP addresses are public (a fetch's target, a feed's URL);
//! * [`allowance`] — the most fetches a worker may start on a UTC day (the hard part of
//!   the budget);
//! * [`auth`] — bearer tokens with scopes in front of every gRPC service;
//! * [`credentials`] — how a client reaches the coordinator (TLS, bearer token): the
//!   worker's sessions and `kairosctl`;
//! * [`clock`] — the (possibly time-compressed) clock all timing goes through;
//! * [`feed_times`] — one feed's assigned fetch times (offsets in a period);
//! * [`schedule`] — which feed to fetch when, from a versioned assignment (the worker's timer
//!   heap, which the coordinator's `replay` drives on a virtual clock);
//! * [`minute_gate`] — a worker's share of the cluster's per-minute fetch cap, which holds
//!   its fetches besides the plan;
//! * [`listener`] — accepting connections under limits (pools, silence, accept errors);
//! * [`process`] — logging set-up, shutdown signals, periodic reloads;
//! * [`telemetry`] — the `/metrics` endpoint both binaries serve.

pub mod address;
pub mod allowance;
pub mod auth;
pub mod clock;
pub mod credentials;
pub mod feed_times;
pub mod listener;
pub mod minute_gate;
pub mod process;
pub mod schedule;
pub mod telemetry;
