//! A standby's servers: every listener bound, gRPC health NOT_SERVING, every other call
//! answered `UNAVAILABLE` with the leader's address ([`super::super::election`] decides who
//! leads; this is what a replica that does not lead serves meanwhile).

use crate::election::LeaderAddr;
use anyhow::Result;
use std::net::SocketAddr;
use std::task::{Context as TaskContext, Poll};
use tokio::sync::watch;

/// The tower layer in front of a standby's listeners: gRPC health passes (NOT_SERVING),
/// every other call is answered `UNAVAILABLE` with the leader's address.
#[derive(Clone, Debug)]
pub struct StandbyGate(pub LeaderAddr);

impl<S> tower_layer::Layer<S> for StandbyGate {
    type Service = StandbyService<S>;
    fn layer(&self, inner: S) -> StandbyService<S> {
        StandbyService {
            inner,
            leader: self.0.clone(),
        }
    }
}

/// See [`StandbyGate`].
#[derive(Clone, Debug)]
pub struct StandbyService<S> {
    inner: S,
    leader: LeaderAddr,
}

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl<S, ReqBody, ResBody> tower_service::Service<http::Request<ReqBody>> for StandbyService<S>
where
    S: tower_service::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    ResBody: Default + Send + 'static,
{
    type Response = http::Response<ResBody>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        if req.uri().path().starts_with("/grpc.health.v1.Health/") {
            return Box::pin(self.inner.call(req));
        }
        let status = tonic::Status::unavailable(self.leader.message());
        Box::pin(async move { Ok(status.into_http()) })
    }
}

/// A standby's servers: health (NOT_SERVING for every service) behind [`StandbyGate`] on
/// each listener, TLS as configured.
pub struct Standby {
    stop: watch::Sender<bool>,
    servers: Vec<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>>,
    /// The addresses bound (main, admin, public), to be bound again by the leader.
    pub bound: (SocketAddr, Option<SocketAddr>, Option<SocketAddr>),
    /// The WebSub callback listener's address (it answers hubs 503), if push is on.
    pub push_bound: Option<SocketAddr>,
    push: Option<tokio::task::JoinHandle<()>>,
}

impl Standby {
    /// Binds `o`'s listeners and serves as a standby.
    pub async fn start(o: &super::ServerOptions, leader: LeaderAddr) -> Result<Standby> {
        use kairos_proto::v1::{
            admin_server, ingest_server, postings_server, worker_control_server,
        };
        use tonic_health::ServingStatus;
        let (health, health_service) = tonic_health::server::health_reporter();
        for service in [
            "",
            admin_server::SERVICE_NAME,
            postings_server::SERVICE_NAME,
            ingest_server::SERVICE_NAME,
            worker_control_server::SERVICE_NAME,
        ] {
            health
                .set_service_status(service, ServingStatus::NotServing)
                .await;
        }
        health
            .set_service_status(super::LIVENESS_SERVICE, ServingStatus::Serving)
            .await;
        kairos_runtime::telemetry::set_ready(false);
        let certs = match &o.tls {
            Some(files) => Some(crate::tls::CertStore::open(files.clone())?),
            None => None,
        };
        let client_certs = o.tls.as_ref().is_some_and(|t| t.client_ca.is_some());
        let (stop, stop_rx) = watch::channel(false);
        let mut servers = Vec::new();
        let mut serve = |listener: tokio::net::TcpListener,
                         name: &'static str,
                         client_auth: bool|
         -> Result<SocketAddr> {
            let bound = listener.local_addr()?;
            let server = kairos_runtime::listener::grpc_server()
                .layer(StandbyGate(leader.clone()))
                .add_service(health_service.clone());
            let mut server_stop = stop_rx.clone();
            let stopped = async move {
                let _ = server_stop.wait_for(|s| *s).await;
            };
            let accepted = kairos_runtime::listener::accept_grpc(listener, name);
            servers.push(match &certs {
                Some(c) => {
                    let incoming = crate::tls::incoming(accepted, c.server_config(client_auth)?);
                    tokio::spawn(server.serve_with_incoming_shutdown(incoming, stopped))
                }
                None => tokio::spawn(server.serve_with_incoming_shutdown(accepted, stopped)),
            });
            Ok(bound)
        };
        let main = serve(super::bind_again(o.listen).await?, "grpc", client_certs)?;
        let admin = match o.admin_listen {
            Some(a) => Some(serve(super::bind_again(a).await?, "admin", false)?),
            None => None,
        };
        let public = match o.public_listen {
            Some(a) => Some(serve(super::bind_again(a).await?, "public", false)?),
            None => None,
        };
        let (push_bound, push) = match &o.push {
            Some(p) => {
                let listener = super::bind_again(p.listen).await?;
                let bound = listener.local_addr()?;
                println!("kairos-coordinator standby push on {bound}");
                let task = tokio::spawn(crate::push::listener::serve(
                    listener,
                    std::sync::Arc::new(crate::hub::push::NotLeading),
                    p.listener.clone(),
                    stop_rx.clone(),
                ));
                (Some(bound), Some(task))
            }
            None => (None, None),
        };
        Ok(Standby {
            stop,
            servers,
            bound: (main, admin, public),
            push_bound,
            push,
        })
    }

    /// Stops serving and releases the ports.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for s in self.servers {
            let _ = s.await;
        }
        if let Some(p) = self.push {
            let _ = p.await;
        }
    }
}
