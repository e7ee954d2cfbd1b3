//! `kairos-coordinator serve`: the gRPC server over the embedded (or in-memory) store.
//!
//! Serves `Admin`, `Postings`, `Ingest` and `WorkerControl`, Prometheus metrics on
//! `/metrics`, gRPC health checking (so Kubernetes probes and grpcurl work) and server
//! reflection, and runs the hub's relearn/replan and lease loops. `standalone` starts the
//! same server in-process with its workers. Stops on SIGINT/SIGTERM: it stops accepting, lets
//! in-flight calls finish, then exits.

use crate::access::AccessEvent;
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
use kairos_worker::clock::SimClock;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// What a coordinator server needs besides its store.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// gRPC address (port 0 picks one; printed once bound).
    pub listen: SocketAddr,
    /// Metrics address, if metrics are served (port 0 picks one; printed).
    pub metrics_addr: Option<SocketAddr>,
    /// Hub settings.
    pub hub: HubConfig,
    /// The clock of the whole system.
    pub clock: SimClock,
}

/// A running coordinator: the hub, its loops and its gRPC server.
pub struct Running<B> {
    /// The live state.
    pub hub: Arc<Hub<B>>,
    /// Bound gRPC address.
    pub addr: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    server: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    loops: tokio::task::JoinHandle<()>,
    metrics: Option<tokio::task::JoinHandle<()>>,
}

impl<B: KvBackend> Running<B> {
    /// Stops accepting, lets in-flight calls finish, stops the loops.
    pub async fn shutdown(self) -> Result<()> {
        let _ = self.stop.send(true);
        let served = self.server.await.context("server task")?;
        let _ = self.loops.await;
        if let Some(m) = self.metrics {
            m.abort();
        }
        served.context("serving gRPC")
    }
}

/// Opens the hub over `store`, plans once, and starts the gRPC server and the loops.
pub async fn start<B: KvBackend>(store: Arc<B>, o: ServerOptions) -> Result<Running<B>> {
    let metrics = match o.metrics_addr {
        Some(a) => Some(serve_metrics(a).await?),
        None => None,
    };
    let hub = Arc::new(Hub::open(store.clone(), o.clock, o.hub.clone()).await?);
    // A first plan before workers connect, so they get fetch times at once.
    if let Err(e) = hub.replan().await {
        tracing::error!(error = %e, "initial plan failed; retrying on the replan interval");
    }
    let listener = tokio::net::TcpListener::bind(o.listen)
        .await
        .with_context(|| format!("binding {}", o.listen))?;
    let addr = listener.local_addr()?;
    let (health, health_service) = tonic_health::server::health_reporter();
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
    let sink_hub = hub.clone();
    let ingest = IngestService::new(
        hub.access.clone(),
        Arc::new(move |events: &[AccessEvent]| sink_hub.record_access(events)),
        o.clock,
    );
    let admin = AdminService::new(Registry::new(store.clone()), hub.clone());
    let postings = PostingsService::new(hub.ingestor.clone(), Registry::new(store.clone()));
    let control = WorkerControlService::new(hub.clone());
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let mut server_stop = stop_rx.clone();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(reflection)
            .add_service(AdminServer::new(admin))
            .add_service(PostingsServer::new(postings))
            .add_service(IngestServer::new(ingest))
            .add_service(WorkerControlServer::new(control))
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(listener),
                async move {
                    let _ = server_stop.wait_for(|s| *s).await;
                },
            ),
    );
    let loops = tokio::spawn(hub.clone().run_loops(stop_rx));
    // Printed for operators and for tests that asked for port 0.
    println!("kairos-coordinator listening on {addr}");
    Ok(Running {
        hub,
        addr,
        stop,
        server,
        loops,
        metrics,
    })
}

/// `serve`: runs the coordinator until SIGINT/SIGTERM.
pub fn serve(data_dir: Option<PathBuf>, o: ServerOptions) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        match data_dir {
            Some(dir) => {
                let store = EmbeddedBackend::open(&dir)
                    .with_context(|| format!("opening the store in {}", dir.display()))?;
                serve_until_signal(Arc::new(store), o).await
            }
            None => serve_until_signal(Arc::new(MemoryBackend::new()), o).await,
        }
    })
}

async fn serve_until_signal<B: KvBackend>(store: Arc<B>, o: ServerOptions) -> Result<()> {
    let running = start(store, o).await?;
    kairos_worker::process::shutdown_signal().await;
    running.shutdown().await?;
    eprintln!("kairos-coordinator: shut down");
    Ok(())
}

/// Installs the Prometheus recorder and serves its text format on `GET /metrics` at
/// `addr` (printed once bound, so port 0 works).
pub async fn serve_metrics(addr: SocketAddr) -> Result<tokio::task::JoinHandle<()>> {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .context("installing the metrics recorder")?;
    crate::metrics::describe();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the metrics address {addr}"))?;
    println!("kairos-coordinator metrics on {}", listener.local_addr()?);
    Ok(tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let handle = handle.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let handle = handle.clone();
                        async move {
                            let (status, body) = if req.uri().path() == "/metrics" {
                                (hyper::StatusCode::OK, handle.render())
                            } else {
                                (hyper::StatusCode::NOT_FOUND, String::new())
                            };
                            let mut resp = hyper::Response::new(http_body_util::Full::new(
                                bytes::Bytes::from(body),
                            ));
                            *resp.status_mut() = status;
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    },
                );
                // A scraper hanging up is not an error of ours.
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    }))
}
