//! `kairos-worker`: the data plane of Kairos.
//!
//! * `run` — a fetch worker: registers with the coordinator, fetches its assigned feeds at
//!   the planned moments and reports what it found.
//!
//! The loopback feed farm for demos and tests is a binary of its own (`kairos-farm`).

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use kairos_proto::v1::ingest_server::IngestServer;
use kairos_runtime::auth::{AuthLayer, Guard, TokenFile};
use kairos_runtime::clock::ClockArgs;
use kairos_runtime::process::shutdown_signal;
use kairos_worker::agent::{self, AgentConfig, AgentStats};
use kairos_worker::credentials::Credentials;
use kairos_worker::fetch::FetchConfig;
use kairos_worker::relay::RelayService;
use kairos_worker::target::TargetPolicy;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "kairos-worker", version, about = "Kairos fetch worker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Fetch the feeds the coordinator assigns, at the planned moments.
    Run(Box<RunArgs>),
}

#[derive(Args)]
struct RunArgs {
    /// Coordinator gRPC URL, or several separated by commas (replicas, tried in turn when a
    /// session cannot be opened or ends).
    #[arg(long, default_value = "http://127.0.0.1:7700")]
    coordinator: String,
    /// Stable worker name (e.g. the pod name); defaults to the host name.
    #[arg(long)]
    name: Option<String>,
    /// Fetches per second this worker can sustain (weights its share of hosts).
    #[arg(long, default_value_t = 100.0)]
    capacity: f64,
    /// Fetches in flight at most.
    #[arg(long, default_value_t = 64)]
    max_in_flight: usize,
    /// On SIGTERM: how long to let the fetches in flight finish and the reports be
    /// acknowledged before exiting (keep the pod's termination grace period longer).
    #[arg(long, default_value = "20s")]
    drain_timeout: humantime::Duration,
    /// Wall time between two fetches of one host (politeness).
    #[arg(long, default_value = "1s")]
    host_gap: humantime::Duration,
    /// Largest body accepted, after decompression (bytes).
    #[arg(long, default_value_t = 10 << 20)]
    max_body_bytes: usize,
    /// Total time allowed for one fetch.
    #[arg(long, default_value = "30s")]
    fetch_timeout: humantime::Duration,
    /// Permit fetching from this private/loopback network (repeatable), e.g. 127.0.0.0/8.
    #[arg(long)]
    allow_private: Vec<ipnet::IpNet>,
    /// Fetch through this forward proxy (`http://host:port`). HTTP_PROXY and HTTPS_PROXY in
    /// the environment are ignored; targets are checked against the address policy before
    /// they go to the proxy.
    #[arg(long)]
    proxy: Option<String>,
    /// Threads that read fetched documents (parse, hints, discovery) at most; default: all
    /// cores but one, at least one. Parsing never runs on the async threads that carry
    /// heartbeats and reports.
    #[arg(long)]
    parse_threads: Option<usize>,
    /// Wall time one document's reading may take; a document past it is reported malformed.
    #[arg(long, default_value = "10s")]
    parse_budget: humantime::Duration,
    /// Unacknowledged reports kept at most (fetching pauses when full).
    #[arg(long, default_value_t = 10_000)]
    report_buffer: usize,
    /// File holding the bearer token (scope `worker`, issued for this worker's name); read
    /// again at each reconnect.
    #[arg(long)]
    token_file: Option<std::path::PathBuf>,
    /// CA certificate (PEM) the coordinator's certificate must chain to; an `https://`
    /// coordinator URL without it is verified against the system's roots.
    #[arg(long)]
    tls_ca: Option<std::path::PathBuf>,
    /// Client certificate (PEM) for mutual TLS.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<std::path::PathBuf>,
    /// Key (PEM) of `--tls-cert`.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<std::path::PathBuf>,
    /// Bearer tokens for the public `Ingest` endpoint (`name scopes token` lines; callers
    /// need the `ingest` scope; re-read on change). Required when `--ingest-listen` is not
    /// a loopback address: otherwise anyone who reaches it could forge reader accesses.
    #[arg(long)]
    ingest_tokens: Option<std::path::PathBuf>,
    /// Serve the public `Ingest` endpoint (reader access events, relayed to the
    /// coordinator) here; port 0 picks one (printed).
    #[arg(long)]
    ingest_listen: Option<std::net::SocketAddr>,
    /// Serve Prometheus metrics on `GET /metrics` here; port 0 picks one (printed).
    #[arg(long)]
    metrics_addr: Option<std::net::SocketAddr>,
    #[command(flatten)]
    clock: ClockArgs,
}

fn main() -> ExitCode {
    kairos_runtime::process::init_tracing();
    kairos_runtime::listener::raise_open_file_limit();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = rt.block_on(async move {
        match cli.command {
            Command::Run(a) => run(*a).await,
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn run(a: RunArgs) -> Result<()> {
    let name = match a.name {
        Some(n) => n,
        None => std::env::var("HOSTNAME").unwrap_or_else(|_| "kairos-worker".into()),
    };
    let cfg = AgentConfig {
        coordinator: a.coordinator,
        name,
        capacity: a.capacity,
        max_in_flight: a.max_in_flight.max(1),
        host_gap: a.host_gap.into(),
        fetch: FetchConfig {
            total_timeout: a.fetch_timeout.into(),
            max_body_bytes: a.max_body_bytes,
            policy: TargetPolicy::allowing(a.allow_private),
            proxy: a.proxy,
            ..FetchConfig::default()
        },
        report_buffer: a.report_buffer.max(1),
        drain_timeout: a.drain_timeout.into(),
        clock: a.clock.clock()?,
        ingest_address: String::new(),
        credentials: Credentials {
            token_file: a.token_file,
            tls_ca: a.tls_ca,
            tls_cert: a.tls_cert,
            tls_key: a.tls_key,
        },
        parse_threads: a
            .parse_threads
            .unwrap_or_else(kairos_worker::document::Reader::default_threads),
        parse_budget: a.parse_budget.into(),
    };
    // Settings that cannot work are refused at start, not retried forever.
    agent::coordinator_endpoints(&cfg.credentials, &cfg.coordinator)
        .map_err(|e| anyhow::anyhow!("--coordinator: {e}"))?;
    cfg.credentials.bearer().map_err(anyhow::Error::msg)?;
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let mut cfg = cfg;
    let (relay, server) = match a.ingest_listen {
        Some(addr) => {
            let guard = match &a.ingest_tokens {
                Some(path) => Guard::new(Some(TokenFile::open(path)?)),
                None if addr.ip().is_loopback() => Guard::new(None),
                None => anyhow::bail!(
                    "--ingest-listen {addr} is not loopback: give --ingest-tokens FILE so only reader apps with an `ingest` token can send access events"
                ),
            };
            if let Some(file) = guard.token_file() {
                tokio::spawn(file.watch(std::time::Duration::from_secs(2), stop_rx.clone()));
            }
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding the ingest address {addr}"))?;
            let bound = listener.local_addr()?;
            cfg.ingest_address = bound.to_string();
            let (tx, rx) = tokio::sync::mpsc::channel(64);
            let (health, health_service) = tonic_health::server::health_reporter();
            health.set_serving::<IngestServer<RelayService>>().await;
            let reflection = tonic_reflection::server::Builder::configure()
                .register_encoded_file_descriptor_set(kairos_proto::v1::FILE_DESCRIPTOR_SET)
                .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
                .build_v1()
                .context("building the reflection service")?;
            let mut server_stop = stop_rx.clone();
            let server = tokio::spawn(
                kairos_runtime::listener::grpc_server()
                    .layer(AuthLayer(guard))
                    .add_service(health_service)
                    .add_service(reflection)
                    .add_service(IngestServer::new(RelayService::new(tx)))
                    .serve_with_incoming_shutdown(
                        kairos_runtime::listener::accept_grpc(listener, "ingest"),
                        async move {
                            let _ = server_stop.wait_for(|s| *s).await;
                        },
                    ),
            );
            println!("kairos-worker ingest on {bound}");
            (Some(rx), Some(server))
        }
        None => (None, None),
    };
    let _metrics = match a.metrics_addr {
        Some(addr) => {
            let served = kairos_runtime::telemetry::serve_metrics(
                addr,
                "kairos-worker",
                &kairos_worker::telemetry::buckets(),
            )
            .await?;
            kairos_worker::telemetry::describe();
            Some(served)
        }
        None => None,
    };
    let stats = Arc::new(AgentStats::default());
    let worker = tokio::spawn(agent::run(cfg, stats.clone(), relay, stop_rx));
    // Ready from the start (a worker registers and reconnects on its own); not while it
    // drains, so no new ingest traffic is sent its way.
    kairos_runtime::telemetry::set_ready(true);
    shutdown_signal().await;
    kairos_runtime::telemetry::set_ready(false);
    let _ = stop.send(true);
    if let Some(s) = server {
        s.await
            .context("ingest server task")?
            .context("serving ingest")?;
    }
    worker.await.context("worker task")??;
    eprintln!(
        "kairos-worker: stopped after {} fetches",
        stats.fetches.load(std::sync::atomic::Ordering::Relaxed)
    );
    Ok(())
}
