//! Where a fetch's time goes before the first byte: DNS resolution (timed in the guarded
//! resolver) and connection establishment (a layer around reqwest's connector, so TCP and
//! the TLS handshake, DNS included, of each new connection). Reused pooled connections are
//! not counted: the histograms describe the connections actually opened.

use crate::telemetry;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

/// Times every connection the client opens into [`telemetry::CONNECT_SECONDS`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnectTiming;

impl<S> tower_layer::Layer<S> for ConnectTiming {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Timed<S> {
        Timed { inner }
    }
}

/// A connector whose connections are timed.
#[derive(Clone, Debug)]
pub struct Timed<S> {
    inner: S,
}

impl<S, R> tower_service::Service<R> for Timed<S>
where
    S: tower_service::Service<R>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let started = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let out = fut.await;
            let result = if out.is_ok() { "ok" } else { "error" };
            metrics::histogram!(telemetry::CONNECT_SECONDS, "result" => result)
                .record(started.elapsed().as_secs_f64());
            out
        })
    }
}
