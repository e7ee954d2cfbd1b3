//! `kairos-coordinator`: the Kairos control plane's command line.
//!
//! Offline subcommands for capacity planning: `plan` (trace in, schedule out) and
//! `simulate` (train on the first days of a trace, replay the rest, compare policies);
//! `synth` writes synthetic traces; `replay` drives the live hub with a trace on a virtual
//! clock; `serve` runs the gRPC API and `standalone` adds in-process workers (the default
//! `standalone` feature; the container image is built without it, so the control plane it
//! ships links no fetcher).

mod allocator;
mod baselines;
mod calibration;
mod cli;
#[cfg(feature = "standalone")]
mod demo;
mod demo_push;
mod live;
mod plot;
mod replay;
mod replay_cmd;
mod simulate_cmd;
#[cfg(feature = "standalone")]
mod standalone;

use std::process::ExitCode;

/// jemalloc, not glibc's malloc. A 100k-feed soak under glibc held 2.9 GB resident for a
/// heap that never passed 0.9 GB (heaptrack; docs/BENCHMARKS.md): the solver's and the
/// store's bursts of short-lived buffers on many threads left glibc's per-thread arenas
/// fragmented and never given back. jemalloc returns freed pages on a timer.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    allocator::start();
    match cli::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
