//! The `/metrics` endpoint the coordinator and the worker both serve (with `/livez` and
//! `/readyz` beside it, plain HTTP probes for deployments whose gRPC ports speak TLS, which
//! kubelet's gRPC probes cannot), and the buckets their shared measures use. Latencies are histograms with buckets, so quantiles aggregate over
//! every replica with `histogram_quantile(q, sum by (le) (rate(..._bucket[5m])))`.

use anyhow::{Context, Result};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether this process should be sent traffic, as `GET /readyz` answers it (200 or 503).
/// It starts false; the program sets it (the coordinator: a leader whose store takes
/// writes, the same as gRPC health's "" service).
static READY: AtomicBool = AtomicBool::new(false);

/// Sets what `GET /readyz` answers.
pub fn set_ready(ready: bool) {
    READY.store(ready, Ordering::Relaxed);
}

/// Buckets of lateness: 1 ms to 5 min (the worker's fetch lateness and the coordinator's
/// lateness of reported fetches).
pub const LATENESS_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0,
];

/// How long a request's head may take to arrive on the metrics listener.
pub const HEADER_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Installs the Prometheus recorder (histograms named in `buckets` get those buckets; the
/// others stay summaries) and serves its text format on `GET /metrics` at `addr`, with
/// `GET /livez` (200 while the process's runtime answers) and `GET /readyz` ([`set_ready`]). The bound
/// address is printed as "`program` metrics on ADDR", so port 0 works.
pub async fn serve_metrics(
    addr: SocketAddr,
    program: &str,
    buckets: &[(&str, &[f64])],
) -> Result<tokio::task::JoinHandle<()>> {
    let mut builder = PrometheusBuilder::new();
    for (name, b) in buckets {
        builder = builder
            .set_buckets_for_metric(Matcher::Full(name.to_string()), b)
            .context("histogram buckets")?;
    }
    let handle = builder
        .install_recorder()
        .context("installing the metrics recorder")?;
    crate::listener::describe();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the metrics address {addr}"))?;
    println!("{program} metrics on {}", listener.local_addr()?);
    Ok(tokio::spawn(async move {
        use crate::listener::{accept, Class, Limits, Pool};
        let mut accepted = accept(listener, "metrics", Pool::of(Class::Probes), Limits::PROBES);
        while let Some(stream) = accepted.next().await {
            let handle = handle.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let handle = handle.clone();
                        async move {
                            let (status, body) = match req.uri().path() {
                                "/metrics" => (hyper::StatusCode::OK, handle.render()),
                                // Answered by the same runtime as everything else: a
                                // wedged runtime stops answering it.
                                "/livez" => (hyper::StatusCode::OK, "ok\n".to_string()),
                                "/readyz" if READY.load(Ordering::Relaxed) => {
                                    (hyper::StatusCode::OK, "ready\n".to_string())
                                }
                                "/readyz" => (
                                    hyper::StatusCode::SERVICE_UNAVAILABLE,
                                    "not ready\n".to_string(),
                                ),
                                _ => (hyper::StatusCode::NOT_FOUND, String::new()),
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
                // A request's head must arrive within a few seconds (slow senders hold a
                // slot no longer); silence between requests ends at the listener's limit.
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    }))
}
