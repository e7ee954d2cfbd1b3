//! `kairos-coordinator serve`: the gRPC server over the embedded (or in-memory) store.
//!
//! Serves `Admin`, `Postings` and `Ingest`, Prometheus metrics on `/metrics`, gRPC health checking (so Kubernetes probes and grpcurl
//! work) and server reflection. Stops on SIGINT/SIGTERM: it stops accepting, lets
//! in-flight calls finish, then exits.

use anyhow::{Context, Result};
use kairos_coordinator::access::AccessStats;
use kairos_coordinator::api::admin::AdminService;
use kairos_coordinator::api::ingest::IngestService;
use kairos_coordinator::api::postings::PostingsService;
use kairos_coordinator::ingest::Ingestor;
use kairos_coordinator::registry::Registry;
use kairos_coordinator::store::embedded::EmbeddedBackend;
use kairos_coordinator::store::memory::MemoryBackend;
use kairos_coordinator::store::KvBackend;
use kairos_proto::v1::admin_server::AdminServer;
use kairos_proto::v1::ingest_server::IngestServer;
use kairos_proto::v1::postings_server::PostingsServer;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

/// Runs the server until a shutdown signal.
pub fn serve(
    listen: SocketAddr,
    data_dir: Option<PathBuf>,
    metrics_addr: SocketAddr,
) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        match data_dir {
            Some(dir) => {
                run(
                    Arc::new(
                        EmbeddedBackend::open(&dir)
                            .with_context(|| format!("opening the store in {}", dir.display()))?,
                    ),
                    listen,
                    metrics_addr,
                )
                .await
            }
            None => run(Arc::new(MemoryBackend::new()), listen, metrics_addr).await,
        }
    })
}

async fn run<B: KvBackend>(
    store: Arc<B>,
    listen: SocketAddr,
    metrics_addr: SocketAddr,
) -> Result<()> {
    let metrics = serve_metrics(metrics_addr).await?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("binding {listen}"))?;
    let bound = listener.local_addr()?;
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<AdminServer<AdminService<B>>>().await;
    health
        .set_serving::<PostingsServer<PostingsService<B>>>()
        .await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(kairos_proto::v1::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .context("building the reflection service")?;
    // The access statistics start from the registry's users and feeds.
    let registry = Registry::new(store.clone());
    let mut access = AccessStats::new(24, 86_400_000);
    let (users, feeds) = (registry.all_users().await?, registry.all_feeds().await?);
    for u in &users {
        access.set_user(&u.id, u.weight as f32);
    }
    for f in &feeds {
        access.set_feed(&f.id);
    }
    metrics::gauge!(kairos_coordinator::metrics::REGISTRY_USERS).set(users.len() as f64);
    metrics::gauge!(kairos_coordinator::metrics::REGISTRY_FEEDS).set(feeds.len() as f64);
    let access = Arc::new(std::sync::Mutex::new(access));
    health.set_serving::<IngestServer<IngestService>>().await;
    let ingest = IngestService::new(access.clone());
    let admin = AdminService::new(registry, access);
    let postings = PostingsService::new(Arc::new(Ingestor::new(store)));
    // Printed for operators and for tests that asked for port 0.
    println!("kairos-coordinator listening on {bound}");
    tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(reflection)
        .add_service(AdminServer::new(admin))
        .add_service(PostingsServer::new(postings))
        .add_service(IngestServer::new(ingest))
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener),
            shutdown_signal(),
        )
        .await
        .context("serving gRPC")?;
    metrics.abort();
    eprintln!("kairos-coordinator: shut down");
    Ok(())
}

/// Installs the Prometheus recorder and serves its text format on `GET /metrics` at
/// `addr` (printed once bound, so port 0 works).
async fn serve_metrics(addr: SocketAddr) -> Result<tokio::task::JoinHandle<()>> {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .context("installing the metrics recorder")?;
    kairos_coordinator::metrics::describe();
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

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
