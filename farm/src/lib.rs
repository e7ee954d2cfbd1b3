//! Feed servers on loopback for demos, end-to-end tests and benchmarks — never linked into
//! the production worker:
//!
//! * [`farm`] — a synthetic feed farm: feeds with learnable daily posting patterns, spread
//!   over loopback hosts, on the shared (possibly compressed) clock;
//! * [`fixtures`] — misbehaving servers (slow, endless, throttling, redirect loops …) and a
//!   folder of fixed documents;
//! * [`hub`] — a WebSub hub for the farm's feeds, with the failures real hubs show.

pub mod farm;
pub mod fixtures;
pub mod hub;
