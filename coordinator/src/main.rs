//! `kairos-coordinator`: the Kairos control plane's command line.
//!
//! Offline subcommands for capacity planning: `plan` (trace in, schedule out) and
//! `simulate` (train on the first days of a trace, replay the rest, compare policies);
//! `synth` writes synthetic traces; `replay` drives the live hub with a trace on a virtual
//! clock; `serve` runs the gRPC API and `standalone` adds in-process workers (the default
//! `standalone` feature; the container image is built without it, so the control plane it
//! ships links no fetcher).

mod cli;
mod live;
mod replay_cmd;
#[cfg(feature = "standalone")]
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
