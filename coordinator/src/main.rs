//! `kairos-coordinator`: the Kairos control plane's command line.
//!
//! Offline subcommands for capacity planning: `plan` (trace in, schedule out) and
//! `simulate` (train on the first days of a trace, replay the rest, compare policies);
//! `serve` runs the gRPC API.

mod cli;
mod live;
mod standalone;

use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
