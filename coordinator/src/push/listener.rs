//! The WebSub callback listener (`--push-listen`): what hubs call. One path per
//! subscription, `/websub/<callback>`, with the callback id the leader drew for it:
//!
//! * `GET` with `hub.mode=subscribe|unsubscribe`, `hub.topic`, `hub.challenge` (and
//!   `hub.lease_seconds`): the hub's verification of intent (WebSub §5.3). 200 with the
//!   challenge echoed when the leader asked for exactly that; 404 otherwise.
//! * `GET` with `hub.mode=denied`, `hub.topic`, `hub.reason`: the hub refused the
//!   subscription (§5.2). 200 when it is about one of ours, 404 otherwise.
//! * `POST`: content distribution (§7). The body is read up to a bound (413 past it), and
//!   handed over with its `X-Hub-Signature`, `Content-Type` and `Link` headers; 202 when
//!   taken or ignored (a delivery with a bad signature is ignored, as §8 says, and
//!   acknowledged, so a forger learns nothing), 410 for a callback that is not ours (the hub
//!   should drop it).
//!
//! Anything else is 404 or 405. A replica that is not the leader answers 503 with a
//! `Retry-After`: only the leader knows the secrets. One source address may send at most
//! [`ListenerConfig::per_source_per_second`] requests a second (429 past it); connections
//! draw on a pool of their own and are closed when silent.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request, Response, StatusCode};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a hub's verification or denial asks of the leader.
#[derive(Clone, Debug, PartialEq)]
pub enum Intent {
    /// `hub.mode=subscribe|unsubscribe`.
    Verify {
        mode: String,
        topic: String,
        lease_seconds: Option<u64>,
    },
    /// `hub.mode=denied`.
    Denied { topic: String, reason: String },
}

/// A content delivery, as received.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// The callback it came to.
    pub callback: String,
    /// `X-Hub-Signature`, if sent.
    pub signature: Option<String>,
    /// `Content-Type`, if sent.
    pub content_type: Option<String>,
    /// The `Link` header values (the hub names itself and the topic there).
    pub links: Vec<String>,
    /// The body.
    pub body: Bytes,
    /// Who sent it.
    pub from: IpAddr,
}

/// What became of a delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Taken in (202).
    Accepted,
    /// Refused and counted, acknowledged anyway (202): a bad signature, a lapsed lease.
    Ignored(&'static str),
    /// Not one of our callbacks (410).
    Unknown,
}

/// The leader's side of the listener.
pub trait PushEndpoint: Send + Sync + 'static {
    /// Whether this replica leads now (only the leader answers hubs).
    fn leading(&self) -> bool;
    /// A verification of intent or a denial for `callback`: true to confirm (200), false to
    /// refuse (404).
    fn intent(
        &self,
        callback: &str,
        intent: Intent,
    ) -> impl std::future::Future<Output = bool> + Send;
    /// A content delivery.
    fn deliver(&self, delivery: Delivery) -> impl std::future::Future<Output = Taken> + Send;
}

/// Bounds of the listener.
#[derive(Clone, Debug)]
pub struct ListenerConfig {
    /// Largest body taken, bytes (as for fetched documents).
    pub max_body_bytes: usize,
    /// Requests one source address may send a second, on average (twice that at once).
    pub per_source_per_second: f64,
    /// Connections open at most.
    pub max_connections: usize,
    /// Time a request's body may take to arrive.
    pub body_timeout: Duration,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            // What the leader hands a worker at most: a larger body could not be parsed.
            max_body_bytes: kairos_proto::bounds::MAX_PUSHED_BODY_BYTES,
            per_source_per_second: 50.0,
            max_connections: 512,
            body_timeout: Duration::from_secs(30),
        }
    }
}

/// Longest `hub.challenge` echoed (the spec sets none; a challenge is a nonce).
const MAX_CHALLENGE: usize = 1024;
/// Longest callback id taken from a path.
const MAX_CALLBACK: usize = 64;
/// Source addresses remembered by the rate limit at most (then it starts afresh).
const MAX_SOURCES: usize = 10_000;

/// Serves hubs on `listener` until `stop` fires.
pub async fn serve<E: PushEndpoint>(
    listener: tokio::net::TcpListener,
    endpoint: Arc<E>,
    cfg: ListenerConfig,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use kairos_runtime::listener::{accept, Limits, Pool};
    let limits = Limits {
        first_byte: Duration::from_secs(10),
        idle: Duration::from_secs(30),
    };
    let mut accepted = accept(listener, "push", Pool::new(cfg.max_connections), limits);
    let cfg = Arc::new(cfg);
    let rates = Arc::new(Mutex::new(Rates::default()));
    loop {
        let stream = tokio::select! {
            s = accepted.next() => match s {
                Some(s) => s,
                None => return,
            },
            _ = stop.wait_for(|s| *s) => return,
        };
        let peer = stream
            .get_ref()
            .peer_addr()
            .map(|a| a.ip())
            .unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let (endpoint, cfg, rates) = (endpoint.clone(), cfg.clone(), rates.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let (endpoint, cfg, rates) = (endpoint.clone(), cfg.clone(), rates.clone());
                async move {
                    Ok::<_, std::convert::Infallible>(
                        handle(req, peer, endpoint.as_ref(), &cfg, &rates).await,
                    )
                }
            });
            // A hub hanging up is not an error of ours.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Binds `addr` and serves it on a task of its own; returns the bound address.
pub async fn spawn<E: PushEndpoint>(
    addr: SocketAddr,
    endpoint: Arc<E>,
    cfg: ListenerConfig,
    stop: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    Ok((bound, tokio::spawn(serve(listener, endpoint, cfg, stop))))
}

async fn handle<E: PushEndpoint + ?Sized>(
    req: Request<hyper::body::Incoming>,
    peer: IpAddr,
    endpoint: &E,
    cfg: &ListenerConfig,
    rates: &Mutex<Rates>,
) -> Response<Full<Bytes>> {
    let answer = |status: StatusCode, body: &str| {
        let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
        *r.status_mut() = status;
        r
    };
    if !rates.lock().expect("push rate limits").allow(
        peer,
        Instant::now(),
        cfg.per_source_per_second,
    ) {
        super::record("rate_limited");
        return answer(StatusCode::TOO_MANY_REQUESTS, "");
    }
    let Some(callback) = req
        .uri()
        .path()
        .strip_prefix("/websub/")
        .filter(|c| !c.is_empty() && c.len() <= MAX_CALLBACK)
        .filter(|c| {
            c.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
        .map(str::to_string)
    else {
        return answer(StatusCode::NOT_FOUND, "");
    };
    if !endpoint.leading() {
        let mut r = answer(StatusCode::SERVICE_UNAVAILABLE, "not the leader\n");
        r.headers_mut().insert(
            hyper::header::RETRY_AFTER,
            hyper::header::HeaderValue::from_static("5"),
        );
        return r;
    }
    match *req.method() {
        Method::GET => {
            let query: HashMap<String, String> =
                url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
                    .into_owned()
                    .collect();
            let (Some(mode), Some(topic)) = (query.get("hub.mode"), query.get("hub.topic")) else {
                return answer(
                    StatusCode::BAD_REQUEST,
                    "hub.mode and hub.topic are required\n",
                );
            };
            if mode == "denied" {
                let intent = Intent::Denied {
                    topic: topic.clone(),
                    reason: query.get("hub.reason").cloned().unwrap_or_default(),
                };
                return if endpoint.intent(&callback, intent).await {
                    answer(StatusCode::OK, "")
                } else {
                    answer(StatusCode::NOT_FOUND, "")
                };
            }
            let Some(challenge) = query
                .get("hub.challenge")
                .filter(|c| !c.is_empty() && c.len() <= MAX_CHALLENGE)
            else {
                return answer(StatusCode::BAD_REQUEST, "hub.challenge is required\n");
            };
            let intent = Intent::Verify {
                mode: mode.clone(),
                topic: topic.clone(),
                lease_seconds: query.get("hub.lease_seconds").and_then(|l| l.parse().ok()),
            };
            if endpoint.intent(&callback, intent).await {
                super::record("verified");
                answer(StatusCode::OK, challenge)
            } else {
                super::record("verification_refused");
                answer(StatusCode::NOT_FOUND, "")
            }
        }
        Method::POST => {
            let header = |name: hyper::header::HeaderName| {
                req.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            let signature = header(hyper::header::HeaderName::from_static("x-hub-signature"));
            let content_type = header(hyper::header::CONTENT_TYPE);
            let links: Vec<String> = req
                .headers()
                .get_all(hyper::header::LINK)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .take(32)
                .map(str::to_string)
                .collect();
            let declared = req
                .headers()
                .get(hyper::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            if declared.is_some_and(|n| n > cfg.max_body_bytes as u64) {
                super::record("too_large");
                return answer(StatusCode::PAYLOAD_TOO_LARGE, "");
            }
            let body = Limited::new(req.into_body(), cfg.max_body_bytes);
            let body = match tokio::time::timeout(cfg.body_timeout, body.collect()).await {
                Ok(Ok(b)) => b.to_bytes(),
                Ok(Err(_)) => {
                    // Over the bound (a body without a length), or the connection failed.
                    super::record("too_large");
                    return answer(StatusCode::PAYLOAD_TOO_LARGE, "");
                }
                Err(_) => {
                    super::record("timed_out");
                    return answer(StatusCode::REQUEST_TIMEOUT, "");
                }
            };
            let delivery = Delivery {
                callback,
                signature,
                content_type,
                links,
                body,
                from: peer,
            };
            match endpoint.deliver(delivery).await {
                Taken::Accepted => {
                    super::record("accepted");
                    answer(StatusCode::ACCEPTED, "")
                }
                Taken::Ignored(why) => {
                    super::record(why);
                    answer(StatusCode::ACCEPTED, "")
                }
                Taken::Unknown => {
                    super::record("unknown_callback");
                    answer(StatusCode::GONE, "")
                }
            }
        }
        _ => answer(StatusCode::METHOD_NOT_ALLOWED, ""),
    }
}

/// A token bucket per source address.
#[derive(Default)]
struct Rates {
    buckets: HashMap<IpAddr, (f64, Instant)>,
}

impl Rates {
    fn allow(&mut self, from: IpAddr, now: Instant, per_second: f64) -> bool {
        if self.buckets.len() >= MAX_SOURCES && !self.buckets.contains_key(&from) {
            // Forgetting everyone at once is generous to all and bounds the memory.
            self.buckets.clear();
        }
        let burst = (2.0 * per_second).max(1.0);
        let (tokens, at) = self.buckets.entry(from).or_insert((burst, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * per_second).min(burst);
        *at = now;
        if *tokens < 1.0 {
            return false;
        }
        *tokens -= 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A leader that knows one callback, `cb1`, for topic `https://a/feed`, and records
    /// what it was given.
    #[derive(Default)]
    struct Fake {
        standby: bool,
        delivered: Mutex<Vec<Delivery>>,
        intents: Mutex<Vec<(String, Intent)>>,
    }

    impl PushEndpoint for Fake {
        fn leading(&self) -> bool {
            !self.standby
        }
        async fn intent(&self, callback: &str, intent: Intent) -> bool {
            self.intents
                .lock()
                .unwrap()
                .push((callback.to_string(), intent.clone()));
            let topic = match &intent {
                Intent::Verify { topic, mode, .. } if mode == "subscribe" => topic,
                Intent::Denied { topic, .. } => topic,
                Intent::Verify { .. } => return false,
            };
            callback == "cb1" && topic == "https://a/feed"
        }
        async fn deliver(&self, d: Delivery) -> Taken {
            let known = d.callback == "cb1";
            let signed = d.signature.is_some();
            self.delivered.lock().unwrap().push(d);
            match (known, signed) {
                (false, _) => Taken::Unknown,
                (true, false) => Taken::Ignored("signature_missing"),
                (true, true) => Taken::Accepted,
            }
        }
    }

    async fn start(fake: Arc<Fake>, cfg: ListenerConfig) -> SocketAddr {
        let (tx, stop) = tokio::sync::watch::channel(false);
        // Kept for the test's life: a dropped sender would stop the listener.
        std::mem::forget(tx);
        let (addr, _task) = spawn("127.0.0.1:0".parse().unwrap(), fake, cfg, stop)
            .await
            .unwrap();
        addr
    }

    /// One HTTP/1.1 request; returns the status and the body.
    async fn send(addr: SocketAddr, raw: &[u8]) -> (u16, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        // A refusal before the body is read may close the connection under the write.
        let _ = s.write_all(raw).await;
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
        let text = String::from_utf8_lossy(&out).to_string();
        let status = text
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
        (status, body)
    }

    fn get(path: &str) -> Vec<u8> {
        format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").into_bytes()
    }

    fn post(path: &str, headers: &str, body: &[u8]) -> Vec<u8> {
        let mut r = format!(
            "POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: {}\r\n{headers}\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    }

    #[tokio::test]
    async fn verification_denial_and_delivery() {
        let fake = Arc::new(Fake::default());
        let addr = start(fake.clone(), ListenerConfig::default()).await;
        let topic = "https%3A%2F%2Fa%2Ffeed";
        let (status, body) = send(
            addr,
            &get(&format!(
                "/websub/cb1?hub.mode=subscribe&hub.topic={topic}&hub.challenge=n0nce&hub.lease_seconds=86400"
            )),
        )
        .await;
        assert_eq!((status, body.as_str()), (200, "n0nce"));
        assert_eq!(
            fake.intents.lock().unwrap()[0],
            (
                "cb1".to_string(),
                Intent::Verify {
                    mode: "subscribe".into(),
                    topic: "https://a/feed".into(),
                    lease_seconds: Some(86_400)
                }
            )
        );
        // Another topic, another callback, an unsubscription never asked: 404.
        for q in [
            "/websub/cb1?hub.mode=subscribe&hub.topic=https%3A%2F%2Fevil&hub.challenge=x",
            "/websub/cb2?hub.mode=subscribe&hub.topic=https%3A%2F%2Fa%2Ffeed&hub.challenge=x",
            "/websub/cb1?hub.mode=unsubscribe&hub.topic=https%3A%2F%2Fa%2Ffeed&hub.challenge=x",
        ] {
            assert_eq!(send(addr, &get(q)).await.0, 404, "{q}");
        }
        // Malformed: no challenge, no mode; a path that is not a callback.
        assert_eq!(
            send(
                addr,
                &get(&format!("/websub/cb1?hub.mode=subscribe&hub.topic={topic}"))
            )
            .await
            .0,
            400
        );
        assert_eq!(send(addr, &get("/websub/cb1?hub.topic=x")).await.0, 400);
        assert_eq!(send(addr, &get("/websub/../../etc/passwd")).await.0, 404);
        assert_eq!(send(addr, &get("/other")).await.0, 404);
        // A denial of ours is taken.
        assert_eq!(
            send(
                addr,
                &get(&format!(
                    "/websub/cb1?hub.mode=denied&hub.topic={topic}&hub.reason=no"
                ))
            )
            .await
            .0,
            200
        );
        // Deliveries: signed and known 202; unsigned 202 but ignored; unknown callback 410.
        let doc = b"<feed xmlns=\"http://www.w3.org/2005/Atom\"/>";
        let (s, _) = send(
            addr,
            &post(
                "/websub/cb1",
                "x-hub-signature: sha256=00\r\ncontent-type: application/atom+xml\r\nlink: <https://hub/>; rel=hub\r\n",
                doc,
            ),
        )
        .await;
        assert_eq!(s, 202);
        assert_eq!(send(addr, &post("/websub/cb1", "", doc)).await.0, 202);
        assert_eq!(send(addr, &post("/websub/zzz", "", doc)).await.0, 410);
        let delivered = fake.delivered.lock().unwrap();
        assert_eq!(delivered[0].body.as_ref(), doc);
        assert_eq!(delivered[0].signature.as_deref(), Some("sha256=00"));
        assert_eq!(
            delivered[0].content_type.as_deref(),
            Some("application/atom+xml")
        );
        assert_eq!(
            delivered[0].links,
            vec!["<https://hub/>; rel=hub".to_string()]
        );
        assert_eq!(delivered.len(), 3);
    }

    #[tokio::test]
    async fn bounds_standby_and_rate() {
        let fake = Arc::new(Fake::default());
        let cfg = ListenerConfig {
            max_body_bytes: 1000,
            ..ListenerConfig::default()
        };
        let addr = start(fake.clone(), cfg).await;
        // A declared length over the bound is refused before its body is read; a chunked
        // body over it is refused when it passes the bound.
        assert_eq!(
            send(addr, &post("/websub/cb1", "", &[b'x'; 2000])).await.0,
            413
        );
        let mut chunked = b"POST /websub/cb1 HTTP/1.1\r\nhost: x\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..3 {
            chunked.extend_from_slice(b"1f4\r\n");
            chunked.extend_from_slice(&[b'y'; 500]);
            chunked.extend_from_slice(b"\r\n");
        }
        chunked.extend_from_slice(b"0\r\n\r\n");
        assert_eq!(send(addr, &chunked).await.0, 413);
        assert!(
            fake.delivered.lock().unwrap().is_empty(),
            "nothing over the bound delivered"
        );
        // One request per five seconds from one address (a burst of one): the second in a
        // row is refused, whatever it asks.
        let slow = ListenerConfig {
            per_source_per_second: 0.2,
            ..ListenerConfig::default()
        };
        let addr = start(fake.clone(), slow).await;
        assert_eq!(send(addr, &get("/other")).await.0, 404);
        assert_eq!(send(addr, &get("/websub/cb1?x")).await.0, 429);
        // A standby answers 503 to everything for a callback.
        let standby = Arc::new(Fake {
            standby: true,
            ..Fake::default()
        });
        let addr = start(standby, ListenerConfig::default()).await;
        assert_eq!(send(addr, &post("/websub/cb1", "", b"x")).await.0, 503);
    }
}
