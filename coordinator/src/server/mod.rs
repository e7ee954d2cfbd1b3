//! `kairos-coordinator serve`: the gRPC server over the embedded (or in-memory) store.
//!
//! Serves `Admin`, `Postings`, `Ingest` and `WorkerControl`, Prometheus metrics on
//! `/metrics`, gRPC health checking (so Kubernetes probes and grpcurl work) and server
//! reflection, and runs the hub's relearn/replan and lease loops. Each role can have its own
//! listener (worker control on `listen`, Admin and reflection on `admin_listen`, Ingest and
//! Postings on `public_listen`), so a NetworkPolicy can keep workers' and readers' networks
//! apart; every listener checks bearer tokens ([`crate::auth`]) when they are configured. `standalone` starts the
//! same server in-process with its workers. Stops on SIGINT/SIGTERM: it stops accepting, lets
//! in-flight calls finish, then exits.

mod standby;

use crate::api::admin::AdminService;
use crate::api::ingest::IngestService;
use crate::api::postings::PostingsService;
use crate::api::worker::WorkerControlService;
use crate::hub::{Hub, HubConfig};
use crate::registry::Registry;
use crate::store::embedded::EmbeddedBackend;
use crate::store::memory::MemoryBackend;
use crate::store::KvBackend;
use anyhow::{Context, Result};
use kairos_proto::v1::admin_server::AdminServer;
use kairos_proto::v1::ingest_server::IngestServer;
use kairos_proto::v1::postings_server::PostingsServer;
use kairos_proto::v1::worker_control_server::WorkerControlServer;
use kairos_runtime::clock::SimClock;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// What a coordinator server needs besides its store.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// gRPC address (port 0 picks one; printed once bound): worker control, and every role
    /// not given its own listener.
    pub listen: SocketAddr,
    /// Admin and reflection on their own address, if given (printed once bound).
    pub admin_listen: Option<SocketAddr>,
    /// Ingest and Postings on their own address, if given (printed once bound).
    pub public_listen: Option<SocketAddr>,
    /// The token check in front of every listener (open without tokens).
    pub guard: crate::auth::Guard,
    /// Capacity a worker may claim at most, fetches per second (a larger claim is capped).
    pub max_worker_capacity: f64,
    /// TLS on every listener (and client certificates on worker control), if configured.
    pub tls: Option<crate::tls::TlsFiles>,
    /// Metrics address, if metrics are served (port 0 picks one; printed).
    pub metrics_addr: Option<SocketAddr>,
    /// Buckets of histograms recorded in this process besides the coordinator's own (the
    /// in-process workers of `standalone`); empty otherwise.
    pub extra_buckets: Vec<(&'static str, &'static [f64])>,
    /// Hub settings.
    pub hub: HubConfig,
    /// The clock of the whole system.
    pub clock: SimClock,
    /// WebSub push: the callback listener and how hubs reach it; `None`: no push.
    pub push: Option<PushOptions>,
}

/// WebSub push's listener (docs/WEBSUB.md).
#[derive(Clone, Debug)]
pub struct PushOptions {
    /// Where the callback listener listens (plain HTTP/1.1: TLS ends in front of it).
    pub listen: SocketAddr,
    /// The URL of its `/websub` path as hubs reach it (the Ingress's); `None`:
    /// `http://ADDRESS/websub` of the address bound.
    pub public_url: Option<String>,
    /// The listener's bounds.
    pub listener: crate::push::listener::ListenerConfig,
    /// Subscription timing and the hubs' reliability.
    pub policy: crate::control::push::PushPolicy,
}

impl PushOptions {
    /// The callback base hubs are given, for a listener bound at `bound`.
    pub fn callback_base(&self, bound: SocketAddr) -> String {
        self.public_url
            .clone()
            .unwrap_or_else(|| format!("http://{bound}/websub"))
    }
}

/// A running coordinator: the hub, its loops and its gRPC server.
pub struct Running<B> {
    /// The live state.
    pub hub: Arc<Hub<B>>,
    /// Bound gRPC address.
    pub addr: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    servers: Vec<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>>,
    loops: tokio::task::JoinHandle<()>,
    /// The certificate, token-file and store watchers: they end on the stop signal.
    watchers: Vec<tokio::task::JoinHandle<()>>,
    metrics: Option<tokio::task::JoinHandle<()>>,
}

impl<B: KvBackend> Running<B> {
    /// Stops accepting, lets in-flight calls finish, stops the loops.
    pub async fn shutdown(self) -> Result<()> {
        kairos_runtime::telemetry::set_ready(false);
        let _ = self.stop.send(true);
        let mut served = Ok(());
        for server in self.servers {
            let r = server.await.context("server task")?;
            if served.is_ok() {
                served = r;
            }
        }
        let _ = self.loops.await;
        for w in self.watchers {
            let _ = w.await;
        }
        if let Some(m) = self.metrics {
            m.abort();
        }
        served.context("serving gRPC")
    }

    /// Stops as [`Running::shutdown`] does, for a deposed leader: it waits at most `limit`
    /// for the gRPC connections to close. A leader cut off from its workers cannot close
    /// theirs (nothing answers until HTTP/2 keep-alive gives up, up to 50 s), and its
    /// listeners closed when the stop came, so those connections close in the background
    /// while the replica stands by on the same ports. `false` when the loops did not stop
    /// within `limit` either.
    pub async fn stop_within(self, limit: std::time::Duration) -> bool {
        kairos_runtime::telemetry::set_ready(false);
        let _ = self.stop.send(true);
        if let Some(m) = &self.metrics {
            m.abort();
        }
        let deadline = tokio::time::Instant::now() + limit;
        let open = self.servers.len();
        for (i, server) in self.servers.into_iter().enumerate() {
            match tokio::time::timeout_at(deadline, server).await {
                Ok(Ok(Err(e))) => {
                    tracing::warn!(error = %e, "a gRPC server of the deposed term failed while stopping")
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "a gRPC server task of the deposed term ended abnormally")
                }
                Ok(Ok(Ok(()))) => {}
                Err(_) => {
                    // Dropping the handle leaves the task running to its end.
                    tracing::warn!(
                        servers = open - i,
                        waited = ?limit,
                        "connections of the deposed term are still closing (peers unreachable); they close in the background"
                    );
                    break;
                }
            }
        }
        let stopped = tokio::time::timeout_at(deadline + limit, self.loops)
            .await
            .is_ok();
        // The watchers end on the stop signal; one still waiting on a store that does not
        // answer is cut off rather than waited for (it holds nothing of the term).
        for w in self.watchers {
            let abort = w.abort_handle();
            if tokio::time::timeout_at(deadline + limit, w).await.is_err() {
                abort.abort();
                tracing::debug!("a watcher of the deposed term was cut off");
            }
        }
        stopped
    }
}

/// Binds `a` for a server, with address reuse, waiting up to 2 s while the port is still
/// held. In cluster mode a replica changing roles binds the ports its previous role just
/// released, and a released listener is closed by its accept task a moment after the
/// server stops: binding at once could find it still open and fail the whole process.
pub(crate) async fn bind_again(a: SocketAddr) -> Result<tokio::net::TcpListener> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let socket = if a.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(a).and_then(|()| socket.listen(1024)) {
            Ok(listener) => return Ok(listener),
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e).with_context(|| format!("binding {a}")),
        }
    }
}

/// Opens the hub over `store`, plans once unless it serves a stored plan, and starts the
/// gRPC server and the loops.
pub async fn start<B: KvBackend>(store: Arc<B>, o: ServerOptions) -> Result<Running<B>> {
    let metrics = match o.metrics_addr {
        Some(a) => Some(serve_metrics(a, &o.extra_buckets).await?),
        None => None,
    };
    let hub = Arc::new(Hub::open(store.clone(), o.clock, o.hub.clone()).await?);
    // Workers get fetch times at once: from the plan stored by the last leader, whose
    // first round then runs on the replan loop after serving starts, or else from a first
    // plan made before serving.
    if hub.started_on_stored_plan().is_none() {
        if let Err(e) = hub.replan().await {
            tracing::error!(error = %e, "initial plan failed; retrying on the replan interval");
        }
    }
    let bind = bind_again;
    let listener = bind(o.listen).await?;
    let addr = listener.local_addr()?;
    let admin_listener = match o.admin_listen {
        Some(a) => Some(bind(a).await?),
        None => None,
    };
    let public_listener = match o.public_listen {
        Some(a) => Some(bind(a).await?),
        None => None,
    };
    let (health, health_service) = tonic_health::server::health_reporter();
    // Liveness (the process answers) is apart from readiness: a standby or a leader whose
    // store is failing is alive, and restarting it would not help.
    health
        .set_service_status(LIVENESS_SERVICE, tonic_health::ServingStatus::Serving)
        .await;
    health.set_serving::<AdminServer<AdminService<B>>>().await;
    health
        .set_serving::<PostingsServer<PostingsService<B>>>()
        .await;
    health.set_serving::<IngestServer<IngestService>>().await;
    health
        .set_serving::<WorkerControlServer<WorkerControlService<B>>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(kairos_proto::v1::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .context("building the reflection service")?;
    let ingest = IngestService::new(hub.clone());
    let admin = AdminService::new(Registry::new(store.clone()), hub.clone());
    let postings = PostingsService::new(hub.ingestor().clone(), Registry::new(store.clone()));
    let client_certs = o.tls.as_ref().is_some_and(|t| t.client_ca.is_some());
    if client_certs && (admin_listener.is_none() || public_listener.is_none()) {
        anyhow::bail!("--client-ca needs --admin-listen and --public-listen: client certificates are asked of workers only");
    }
    let control =
        WorkerControlService::new(hub.clone(), o.max_worker_capacity).require_certs(client_certs);
    let certs = match &o.tls {
        Some(files) => Some(crate::tls::CertStore::open(files.clone())?),
        None => None,
    };
    let (stop, stop_rx) = tokio::sync::watch::channel(false);

    // Each listener gets health checks and the roles assigned to it; roles without their
    // own listener share the main one.
    use tonic::service::RoutesBuilder;
    let mut main = RoutesBuilder::default();
    main.add_service(health_service.clone()).add_service(
        // Stated, not left to the default: the worker's report bounds are set from it.
        WorkerControlServer::new(control)
            .max_decoding_message_size(kairos_proto::bounds::MAX_DECODE_BYTES),
    );
    let mut admin_routes = RoutesBuilder::default();
    let mut public_routes = RoutesBuilder::default();
    {
        let r = if admin_listener.is_some() {
            admin_routes.add_service(health_service.clone());
            &mut admin_routes
        } else {
            &mut main
        };
        r.add_service(reflection)
            .add_service(AdminServer::new(admin));
    }
    {
        let r = if public_listener.is_some() {
            public_routes.add_service(health_service);
            &mut public_routes
        } else {
            &mut main
        };
        r.add_service(PostingsServer::new(postings))
            .add_service(IngestServer::new(ingest));
    }
    let mut servers = Vec::new();
    let mut serve_on = |routes: RoutesBuilder,
                        listener: tokio::net::TcpListener,
                        name: &'static str,
                        client_auth: bool|
     -> Result<()> {
        let server = kairos_runtime::listener::grpc_server()
            .layer(crate::auth::AuthLayer(o.guard.clone()))
            .add_routes(routes.routes());
        let mut server_stop = stop_rx.clone();
        let stopped = async move {
            let _ = server_stop.wait_for(|s| *s).await;
        };
        // Connections come with TCP_NODELAY (without it a unary call waits out the peer's
        // delayed ACK: 44 ms per AddFeed on loopback instead of well under one).
        let accepted = kairos_runtime::listener::accept_grpc(listener, name);
        servers.push(match &certs {
            Some(c) => {
                let incoming = crate::tls::incoming(accepted, c.server_config(client_auth)?);
                tokio::spawn(server.serve_with_incoming_shutdown(incoming, stopped))
            }
            None => tokio::spawn(server.serve_with_incoming_shutdown(accepted, stopped)),
        });
        Ok(())
    };
    if let Some(l) = admin_listener {
        println!("kairos-coordinator admin on {}", l.local_addr()?);
        serve_on(admin_routes, l, "admin", false)?;
    }
    if let Some(l) = public_listener {
        println!("kairos-coordinator public on {}", l.local_addr()?);
        serve_on(public_routes, l, "public", false)?;
    }
    serve_on(main, listener, "grpc", client_certs)?;
    let mut watchers = Vec::new();
    if let Some(c) = certs {
        watchers.push(tokio::spawn(
            c.watch(std::time::Duration::from_secs(2), stop_rx.clone()),
        ));
    }
    if let Some(file) = o.guard.token_file() {
        watchers.push(tokio::spawn(
            file.watch(std::time::Duration::from_secs(2), stop_rx.clone()),
        ));
    }
    watchers.push(tokio::spawn(watch_store(
        store.clone(),
        health.clone(),
        std::time::Duration::from_secs(1),
        stop_rx.clone(),
    )));
    if let Some(p) = &o.push {
        let listener = bind(p.listen).await?;
        let bound = listener.local_addr()?;
        hub.enable_push(crate::hub::push::PushConfig {
            callback_base: p.callback_base(bound),
            policy: p.policy.clone(),
        })
        .await?;
        println!("kairos-coordinator push on {bound}");
        watchers.push(tokio::spawn(crate::push::listener::serve(
            listener,
            Arc::new(crate::hub::push::LeaderPush::new(hub.clone())),
            p.listener.clone(),
            stop_rx.clone(),
        )));
    }
    let loops = tokio::spawn(hub.clone().run_loops(stop_rx));
    kairos_runtime::telemetry::set_ready(store.writable());
    // Printed for operators and for tests that asked for port 0.
    println!("kairos-coordinator listening on {addr}");
    Ok(Running {
        hub,
        addr,
        stop,
        servers,
        loops,
        watchers,
        metrics,
    })
}

/// Sets every service's health from the store's: NOT_SERVING while writes fail (so a load
/// balancer or the Kubernetes probe stops sending work that would be refused), and a
/// recovery attempt each `every` until the store is writable again.
async fn watch_store<B: KvBackend>(
    store: Arc<B>,
    health: tonic_health::server::HealthReporter,
    every: std::time::Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use tonic_health::ServingStatus;
    let mut serving = true;
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        // A check of a store that does not answer (etcd cut off) can take its whole
        // request timeout; the stop does not wait for it.
        let checked = async {
            if store.writable() {
                // Logged by the store when it flips.
                let _ = store.check().await;
            }
            let mut ok = store.writable();
            if !ok {
                // The failure itself was logged where it happened; a retry that fails again
                // is routine until space returns.
                if let Err(e) = store.recover().await {
                    tracing::debug!(error = %e, "store not writable yet");
                }
                ok = store.writable();
            }
            ok
        };
        let ok = tokio::select! {
            ok = checked => ok,
            _ = stop.wait_for(|s| *s) => return,
        };
        if ok == serving {
            continue;
        }
        serving = ok;
        metrics::gauge!(crate::metrics::STORE_WRITABLE).set(if ok { 1.0 } else { 0.0 });
        kairos_runtime::telemetry::set_ready(ok);
        let status = if ok {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        for service in [
            "",
            <AdminServer<AdminService<B>> as tonic::server::NamedService>::NAME,
            <PostingsServer<PostingsService<B>> as tonic::server::NamedService>::NAME,
            <IngestServer<IngestService> as tonic::server::NamedService>::NAME,
            <WorkerControlServer<WorkerControlService<B>> as tonic::server::NamedService>::NAME,
        ] {
            health.set_service_status(service, status).await;
        }
    }
}

/// The gRPC health service name that answers SERVING whenever the process runs, leader or
/// standby (Kubernetes liveness probes ask for it; readiness asks for "").
pub const LIVENESS_SERVICE: &str = "kairos.liveness";

/// Where `serve` keeps its state.
#[derive(Clone, Debug)]
pub enum StoreChoice {
    /// In memory, lost on exit.
    Memory,
    /// One redb file in this directory, with a page cache of this many bytes.
    Embedded(PathBuf, usize),
    /// An etcd cluster, with replicas electing a leader.
    Etcd(
        crate::store::etcd::EtcdConfig,
        crate::election::ElectionConfig,
    ),
}

/// `serve`: runs the coordinator until SIGINT/SIGTERM.
pub fn serve(store: StoreChoice, o: ServerOptions) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let store: Arc<dyn KvBackend> = match store {
            StoreChoice::Memory => Arc::new(MemoryBackend::new()),
            StoreChoice::Embedded(dir, cache) => Arc::new(
                EmbeddedBackend::open_with_cache(&dir, cache)
                    .with_context(|| format!("opening the store in {}", dir.display()))?,
            ),
            StoreChoice::Etcd(cfg, election) => {
                let b = crate::store::etcd::EtcdBackend::connect(&cfg).await?;
                tracing::info!(endpoints = %cfg.endpoints.join(","), prefix = %cfg.prefix, "store: etcd");
                return serve_elected(b, o, election).await;
            }
        };
        serve_until_signal(Arc::new(store), o).await
    })
}

/// Cluster mode: stand by and campaign; once elected, serve as the leader with every write
/// fenced on the leadership, until a signal (resign and exit) or until the leadership is
/// lost (step down, stand by, campaign again).
async fn serve_elected(
    store: crate::store::etcd::EtcdBackend,
    mut o: ServerOptions,
    election: crate::election::ElectionConfig,
) -> Result<()> {
    use crate::election::{campaign, LeaderAddr};
    use crate::metrics as m;
    use standby::Standby;
    let _metrics = match o.metrics_addr.take() {
        Some(a) => Some(serve_metrics(a, &o.extra_buckets).await?),
        None => None,
    };
    let signal = kairos_runtime::process::shutdown_signal();
    tokio::pin!(signal);
    // Shown from the start in cluster mode, so alerts on their increase see the first one.
    metrics::counter!(m::LEADER_STEPDOWNS_TOTAL).increment(0);
    metrics::counter!(m::LEADER_LEASE_RENEWAL_FAILURES_TOTAL).increment(0);
    loop {
        metrics::gauge!(m::LEADER).set(0.0);
        metrics::gauge!(m::LEADER_EPOCH).set(0.0);
        let leader = LeaderAddr::default();
        let standby = Standby::start(&o, leader.clone()).await?;
        // The leader binds the same ports (port 0 resolved once).
        (o.listen, o.admin_listen, o.public_listen) = standby.bound;
        if let (Some(p), Some(b)) = (o.push.as_mut(), standby.push_bound) {
            p.listen = b;
        }
        println!("kairos-coordinator standby on {}", o.listen);
        let advertise = election
            .advertise
            .clone()
            .unwrap_or_else(|| o.listen.to_string());
        let leadership = tokio::select! {
            r = campaign(&store, &election, advertise, leader) => r,
            _ = &mut signal => {
                standby.stop().await;
                eprintln!("kairos-coordinator: shut down (standby)");
                return Ok(());
            }
        };
        standby.stop().await;
        let leadership = match leadership {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "campaign failed; standing by and campaigning again");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        let epoch = leadership.epoch;
        // This term's handle: its writes are fenced on this election, and only on it.
        let term = store.fenced(leadership.key(), epoch);
        metrics::gauge!(m::LEADER).set(1.0);
        metrics::gauge!(m::LEADER_EPOCH).set(epoch as f64);
        tracing::info!(epoch, "elected leader");
        println!("kairos-coordinator elected leader (epoch {epoch})");
        let dynstore: Arc<dyn KvBackend> = Arc::new(term.clone());
        // Workers carry the epoch: reports and assignments of another leader's are refused.
        let mut lead = o.clone();
        lead.hub.cluster.epoch = Some(epoch as u64);
        let running = match start(Arc::new(dynstore), lead).await {
            Ok(r) => r,
            Err(e) => {
                // etcd hiccuping while the state loads, most often: hand the lead on and
                // stand by again rather than exit.
                tracing::error!(error = %format!("{e:#}"), "could not start as leader; resigning and standing by");
                leadership.resign().await;
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                continue;
            }
        };
        if election.quota_bytes > 0 {
            if let Err(e) = check_quota(&running.hub, &o, election.quota_bytes).await {
                let _ = running.shutdown().await;
                leadership.resign().await;
                return Err(e);
            }
        }
        let mut lost = leadership.lost.clone();
        let mut deposed = term.deposed();
        let why = tokio::select! {
            _ = &mut signal => {
                running.shutdown().await?;
                leadership.resign().await;
                eprintln!("kairos-coordinator: shut down");
                return Ok(());
            }
            _ = lost.wait_for(|l| *l) => "its lease was not renewed in time",
            _ = deposed.wait_for(|d| *d) => "another coordinator was elected (a write was fenced off)",
        };
        metrics::counter!(m::LEADER_STEPDOWNS_TOTAL).increment(1);
        tracing::error!(
            epoch,
            reason = why,
            "stepping down: no longer the leader; standing by"
        );
        leadership.abandon().await;
        // Writes are fenced already; stop answering as leader promptly (connections to
        // unreachable workers close in the background), or, if the loops hold on, exit and
        // let the supervisor restart us as a standby.
        if !running.stop_within(std::time::Duration::from_secs(5)).await {
            tracing::error!("the deposed leader's loops did not stop within 10 s; exiting");
            std::process::exit(75);
        }
    }
}

/// Refuses to lead when the retention window cannot fit in half of etcd's quota (the other
/// half holds the history kept between compactions and the slack etcd needs).
async fn check_quota<B: KvBackend>(hub: &Hub<B>, o: &ServerOptions, quota: u64) -> Result<()> {
    let (feeds, per_day) = hub.posting_volume().await;
    let r = &o.hub.retention;
    let need = r.window_bytes(feeds, per_day);
    metrics::gauge!(crate::metrics::STORE_WINDOW_BYTES).set(if need.is_finite() {
        need
    } else {
        -1.0
    });
    metrics::gauge!(crate::metrics::STORE_QUOTA_BYTES).set(quota as f64);
    let shown = |d: Option<std::time::Duration>| {
        d.map_or("for ever".to_string(), |d| {
            humantime::format_duration(d).to_string()
        })
    };
    tracing::info!(
        feeds,
        postings_per_day = per_day,
        window_bytes = need,
        quota,
        "retention window against the etcd quota"
    );
    if need > quota as f64 / 2.0 {
        anyhow::bail!(
            "the retention window needs about {} MB in etcd ({feeds} feeds, {per_day:.0} postings a day, postings kept {}, item markers {}), more than half of the {} MB etcd quota (--etcd-quota-bytes). Shorten --postings-retention or --item-marker-retention, or raise etcd's --quota-backend-bytes and this flag with it",
            (need / 1e6).ceil(),
            shown(r.postings),
            shown(r.markers),
            quota / 1_000_000
        );
    }
    Ok(())
}

async fn serve_until_signal<B: KvBackend>(store: Arc<B>, o: ServerOptions) -> Result<()> {
    let running = start(store, o).await?;
    kairos_runtime::process::shutdown_signal().await;
    running.shutdown().await?;
    eprintln!("kairos-coordinator: shut down");
    Ok(())
}

/// Installs the Prometheus recorder and serves its text format on `GET /metrics` at
/// `addr` (printed once bound, so port 0 works); histograms named in `extra` get those
/// buckets besides the coordinator's own.
pub async fn serve_metrics(
    addr: SocketAddr,
    extra: &[(&'static str, &'static [f64])],
) -> Result<tokio::task::JoinHandle<()>> {
    let mut buckets = crate::metrics::buckets();
    buckets.extend_from_slice(extra);
    let served =
        kairos_runtime::telemetry::serve_metrics(addr, "kairos-coordinator", &buckets).await?;
    crate::metrics::describe();
    crate::api::streams::describe();
    Ok(served)
}
