//! `kairos-worker`: the data plane of Kairos.
//!
//! The fetch worker (registration, assignment stream, timer wheel, HTTP fetching, feed
//! parsing and reporting) is not built yet; until it is, the binary says so and exits with
//! a non-zero status instead of pretending to run.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "kairos-worker: the fetch worker is not implemented in this version; \
         use `kairos-coordinator plan` / `simulate` for offline planning"
    );
    ExitCode::from(2)
}
