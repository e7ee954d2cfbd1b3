//! The planner: pure, synchronous and deterministic. No I/O, no clock: time is an input.
//!
//! * [`cost`] — interval costs of the three metrics in O(1) from prefix sums;
//! * [`exact`] — the exact cyclic m-fetch schedule (Monge DP + anchor interleaving);
//! * [`search`] — the papers' baselines: uniform spacing and the optimality-condition search;
//! * [`alloc`] — splitting a fetch budget across feeds (uniform, closed forms, exact joint);
//! * [`days`] — a weekly plan's fetches spread evenly over its days by a price per day;
//! * [`overflow`] — postings that scroll off a document between fetches, priced;
//! * [`floor`] — the fewest fetches whose optimal schedule holds a feed's document;
//! * [`crowd`] — no slot holds more fetches than the cluster can start in it;
//! * [`occupancy`] — planned fetches per slot, day by day;
//! * `jitter` — which of nearly equal minutes each feed is fetched at;
//! * `keep` — which of a re-planned feed's previous times are kept;
//! * [`phases`] — which day of its cycle a feed fetched every few days is fetched on;
//! * [`brute`] — exhaustive reference solver for tests and benchmarks.
//!
//! The algorithm is written down in `docs/PLANNER.md`.

pub mod alloc;
pub mod brute;
pub mod cost;
pub mod crowd;
pub mod days;
pub mod exact;
pub mod exchange;
pub mod floor;
mod jitter;
mod keep;
pub mod occupancy;
pub mod overflow;
pub mod pattern;
pub mod phases;
pub mod planner;
mod price;
pub mod search;
pub mod single;

pub use cost::{CostTable, Metric};
pub use exact::{solve_exact, ExactSolver, SlotSchedule};
pub use price::Prices;

#[cfg(test)]
mod alloc_tests;
#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod overflow_tests;
#[cfg(test)]
mod tests;
