//! The Kairos planner and its offline toolkit: pure and synchronous, with no async runtime,
//! no network and no store. Time is an input everywhere, so the same code plans a recorded
//! trace, a simulation and the live coordinator's next round (which wraps it).
//!
//! * [`trace`] — loading a trace folder (`DESIGN.md` §6) with errors that name file and line;
//! * [`learn`] — per-feed counts and access patterns from a trace window (the posting models
//!   of `plan`, `simulate`, `replay` and `serve` are the live learner's, in the coordinator's
//!   `control::models`; this one is the papers' reproduction, kept for the scale benchmark
//!   and as the reader-access counter of a trace);
//! * [`weekly`] — day-of-week factors, shrunk toward 1 and chosen on held-out weeks;
//! * [`plan`] — exact schedules, the papers' baselines and the joint budget allocation;
//! * [`simulate`] — replaying a trace against a plan: realized next to expected;
//! * [`peers`] — the schedulers of Miniflux, CommaFeed, NewsBlur, FreshRSS, Nutch and
//!   StormCrawler, simulated online on a trace as baselines;
//! * [`synth`] — synthetic traces with known patterns, for tests and scale runs.

pub mod learn;
pub mod peers;
pub mod plan;
pub mod simulate;
pub mod synth;
pub mod time;
pub mod trace;
pub mod weekly;
