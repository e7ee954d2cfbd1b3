//! `kairosctl`: the coordinator's Admin API from a shell.
//!
//! Human tables by default, `--output json` for scripts. Exit codes say who is at fault, so
//! scripts can tell a typo from an outage:
//!
//! * 0 — done;
//! * 1 — the coordinator refused the request (bad argument, missing scope, conflict);
//! * 2 — no coordinator could be reached or asked (down, wrong address, TLS, timeout, a
//!   standby that is not the leader), or the command line or a local file was unusable;
//! * 3 — what was asked for does not exist.

mod commands;
mod history;
mod opml;
mod output;

use clap::{Parser, Subcommand};
use kairos_runtime::credentials::{Bearer, Credentials};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Admin command line for a Kairos coordinator.
#[derive(Parser, Debug)]
#[command(name = "kairosctl", version, about)]
pub struct Cli {
    /// The coordinator's Admin endpoint (`--admin-listen`, or `--listen` when that is not
    /// set); `https://` means TLS.
    #[arg(
        long,
        env = "KAIROS_COORDINATOR",
        default_value = "http://127.0.0.1:7700",
        global = true
    )]
    coordinator: String,
    /// File holding a bearer token with `admin:read` (and `admin:write` for changes).
    #[arg(long, env = "KAIROS_TOKEN_FILE", global = true)]
    token_file: Option<PathBuf>,
    /// CA certificate(s), PEM, the coordinator's certificate must chain to (https only).
    #[arg(long, global = true)]
    tls_ca: Option<PathBuf>,
    /// Client certificate, PEM, for mutual TLS.
    #[arg(long, requires = "tls_key", global = true)]
    tls_cert: Option<PathBuf>,
    /// Key, PEM, of `--tls-cert`.
    #[arg(long, requires = "tls_cert", global = true)]
    tls_key: Option<PathBuf>,
    /// `table` for people, `json` for scripts.
    #[arg(long, short = 'o', value_enum, default_value = "table", global = true)]
    output: output::Format,
    /// Longest time one call may take.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration, global = true)]
    timeout: Duration,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Feeds: list, show, add, remove, resume, and inspect a feed's plan.
    #[command(subcommand)]
    Feeds(commands::Feeds),
    /// Users (readers) and their weights.
    #[command(subcommand)]
    Users(commands::Users),
    /// Which user reads which feed.
    #[command(subcommand)]
    Subs(commands::Subs),
    /// OPML import and export.
    #[command(subcommand)]
    Opml(commands::Opml),
    /// The learned posting history, exported as a trace for `kairos-coordinator replay`.
    #[command(subcommand)]
    History(history::History),
    /// Budget and planner settings.
    #[command(subcommand)]
    Settings(commands::Settings),
    /// Per-host fetch limits.
    #[command(subcommand)]
    Hosts(commands::Hosts),
    /// Totals: feeds, users, budget, fetches, postings, delay.
    Stats,
    /// The workers and what they carry.
    Workers,
}

/// Why a command failed, and so its exit code.
#[derive(Debug)]
pub enum Failure {
    /// The coordinator answered and said no.
    Refused(String),
    /// No answer: down, unreachable, not the leader, timed out.
    Unreachable(String),
    /// Not found.
    Missing(String),
    /// The command line or a local file.
    Local(String),
}

impl Failure {
    fn code(&self) -> u8 {
        match self {
            Failure::Refused(_) => 1,
            Failure::Unreachable(_) | Failure::Local(_) => 2,
            Failure::Missing(_) => 3,
        }
    }

    fn message(&self) -> &str {
        match self {
            Failure::Refused(m)
            | Failure::Unreachable(m)
            | Failure::Missing(m)
            | Failure::Local(m) => m,
        }
    }

    /// Classifies a gRPC status of a call to `what`.
    pub fn from_status(what: &str, s: tonic::Status) -> Failure {
        use tonic::Code;
        let msg = s.message().trim();
        match s.code() {
            Code::NotFound => Failure::Missing(format!("{what}: {msg}")),
            Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown => {
                Failure::Unreachable(format!(
                    "{what}: not available now, try again ({}: {})",
                    code_name(s.code()),
                    if msg.is_empty() { "no detail" } else { msg }
                ))
            }
            c => Failure::Refused(format!("{what}: {} ({})", msg, code_name(c))),
        }
    }
}

fn code_name(c: tonic::Code) -> String {
    format!("{c:?}")
        .chars()
        .flat_map(|ch| {
            let lower = ch.to_ascii_lowercase();
            if ch.is_ascii_uppercase() {
                vec!['_', lower]
            } else {
                vec![lower]
            }
        })
        .collect::<String>()
        .trim_start_matches('_')
        .to_uppercase()
}

/// The error and its causes on one line (tonic's transport errors keep the useful part in
/// the source chain).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// A connected Admin client.
pub type Admin = kairos_proto::v1::admin_client::AdminClient<
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, Bearer>,
>;

async fn connect(cli: &Cli) -> Result<Admin, Failure> {
    let creds = Credentials {
        token_file: cli.token_file.clone(),
        tls_ca: cli.tls_ca.clone(),
        tls_cert: cli.tls_cert.clone(),
        tls_key: cli.tls_key.clone(),
    };
    let bearer = creds.bearer().map_err(Failure::Local)?;
    let endpoint = creds
        .endpoint(&cli.coordinator)
        .map_err(|e| Failure::Local(format!("--coordinator {}: {e}", cli.coordinator)))?
        .connect_timeout(Duration::from_secs(5).min(cli.timeout))
        .timeout(cli.timeout);
    let channel = endpoint.connect().await.map_err(|e| {
        Failure::Unreachable(format!(
            "cannot reach the coordinator at {}: {}",
            cli.coordinator,
            chain(&e)
        ))
    })?;
    Ok(
        kairos_proto::v1::admin_client::AdminClient::with_interceptor(channel, Bearer(bearer))
            // Large OPML documents and feed lists.
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20),
    )
}

async fn run(cli: Cli) -> Result<(), Failure> {
    // Local inputs are checked before any connection, so a typo is not reported as an
    // outage.
    if let Command::Opml(commands::Opml::Import { file, .. }) = &cli.command {
        if !file.is_file() && file.as_os_str() != "-" {
            return Err(Failure::Local(format!("{}: no such file", file.display())));
        }
    }
    let mut admin = connect(&cli).await?;
    let out = cli.output;
    match cli.command {
        Command::Feeds(c) => commands::feeds(&mut admin, out, c).await,
        Command::Users(c) => commands::users(&mut admin, out, c).await,
        Command::Subs(c) => commands::subs(&mut admin, out, c).await,
        Command::Opml(c) => opml::run(&mut admin, out, c).await,
        Command::History(c) => history::run(&mut admin, out, c).await,
        Command::Settings(c) => commands::settings(&mut admin, out, c).await,
        Command::Hosts(c) => commands::hosts(&mut admin, out, c).await,
        Command::Stats => commands::stats(&mut admin, out).await,
        Command::Workers => commands::workers(&mut admin, out).await,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kairosctl: cannot start: {e}");
            return ExitCode::from(2);
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("kairosctl: {}", f.message());
            ExitCode::from(f.code())
        }
    }
}
