//! A WebSub hub for the farm's feeds (W3C WebSub, 2018), on loopback, with the failures
//! real hubs show: it takes subscription requests at `POST /hub`, verifies intent with a
//! `GET` to the callback (challenge and lease), and pushes each new posting of a subscribed
//! feed to its callbacks, signed with the subscription's `hub.secret` (`X-Hub-Signature:
//! sha256=…`) and naming the hub and topic in `Link` headers. What it can be told to do
//! wrong ([`HubFaults`]): fall silent at a simulated time, deliver late, grant short leases,
//! deny every subscription, refuse requests with 503, sign wrongly, name another topic,
//! push only the new items instead of the whole document, or be named second in the
//! documents after a hub that is down (`/down`, which answers every request 503).
//! `GET /hub/stats` counts what it did.

use crate::farm::Farm;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the hub does wrong, and how.
#[derive(Clone, Debug, Default)]
pub struct HubFaults {
    /// Deliver nothing at or after this simulated time (Unix ms).
    pub silent_from_ms: Option<i64>,
    /// Deliver each posting this long (simulated ms) after it was published.
    pub lag_ms: i64,
    /// Grant this lease whatever was asked (seconds).
    pub lease_seconds: Option<u64>,
    /// Deny every subscription (`hub.mode=denied` to the callback).
    pub deny: bool,
    /// Answer this share of subscription requests 503.
    pub unavailable_share: f64,
    /// Sign with a wrong key.
    pub bad_signature: bool,
    /// Name another topic in the delivery's `Link` header.
    pub wrong_topic: bool,
    /// Push only the new items (else the whole document, as most hubs do).
    pub partial: bool,
    /// The documents name a hub that is down (`/down`: 503 to every request) before this
    /// one.
    pub down_first: bool,
}

/// One verified subscription.
#[derive(Clone, Debug)]
struct Sub {
    feed: usize,
    topic: String,
    secret: String,
    until_ms: i64,
    /// Postings of the feed delivered (or published before the subscription).
    delivered: usize,
}

/// Counts of what the hub did.
#[derive(Debug, Default)]
pub struct HubStats {
    pub requests: AtomicU64,
    pub verified: AtomicU64,
    pub verification_refused: AtomicU64,
    pub denied: AtomicU64,
    pub unsubscribed: AtomicU64,
    pub deliveries: AtomicU64,
    pub delivered_postings: AtomicU64,
    pub delivery_failures: AtomicU64,
    pub gone: AtomicU64,
    /// Requests to the hub that is down.
    pub down_requests: AtomicU64,
}

/// The hub; start it with [`TestHub::start`].
pub struct TestHub {
    farm: Arc<Farm>,
    faults: HubFaults,
    url: String,
    /// By callback URL.
    subs: Mutex<HashMap<String, Sub>>,
    /// Feed index by topic URL.
    topics: HashMap<String, usize>,
    /// Counts.
    pub stats: HubStats,
    draws: AtomicU64,
}

/// A running hub; dropping it stops it.
pub struct RunningHub {
    /// The hub's URL (`http://127.0.0.1:PORT/hub`).
    pub url: String,
    /// The hub itself.
    pub hub: Arc<TestHub>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for RunningHub {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl TestHub {
    /// Serves a hub for `farm`'s feeds at `urls` (by index), on a loopback port: the
    /// feeds `on_hub` lists name it in their documents from then on.
    pub async fn start(
        farm: Arc<Farm>,
        urls: &[String],
        on_hub: Vec<bool>,
        faults: HubFaults,
    ) -> std::io::Result<RunningHub> {
        let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let url = format!("http://{addr}/hub");
        let topics = urls
            .iter()
            .enumerate()
            .filter(|(i, _)| on_hub.get(*i).copied().unwrap_or(false))
            .map(|(i, u)| (u.clone(), i))
            .collect();
        let named = if faults.down_first {
            vec![format!("http://{addr}/down"), url.clone()]
        } else {
            vec![url.clone()]
        };
        farm.set_hub(named, on_hub);
        let hub = Arc::new(TestHub {
            farm,
            faults,
            url: url.clone(),
            subs: Mutex::new(HashMap::new()),
            topics,
            stats: HubStats::default(),
            draws: AtomicU64::new(0),
        });
        let serving = {
            let hub = hub.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let hub = hub.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let hub = hub.clone();
                            async move { Ok::<_, std::convert::Infallible>(hub.respond(req).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            })
        };
        let delivering = tokio::spawn(hub.clone().deliver_loop());
        Ok(RunningHub {
            url,
            hub,
            tasks: vec![serving, delivering],
        })
    }

    /// Subscriptions verified and not expired now.
    pub fn subscriptions(&self) -> usize {
        self.subs.lock().expect("hub subscriptions").len()
    }

    async fn respond(self: Arc<Self>, req: Request<Incoming>) -> Response<Full<Bytes>> {
        if req.method() == Method::GET && req.uri().path() == "/hub/stats" {
            return text(StatusCode::OK, self.stats_text());
        }
        if req.uri().path() == "/down" {
            self.stats.down_requests.fetch_add(1, Ordering::Relaxed);
            return text(StatusCode::SERVICE_UNAVAILABLE, "down".into());
        }
        if req.method() != Method::POST || req.uri().path() != "/hub" {
            return text(StatusCode::NOT_FOUND, String::new());
        }
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let Ok(body) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
            return text(StatusCode::BAD_REQUEST, "unreadable body".into());
        };
        let form: HashMap<String, String> =
            url::form_urlencoded::parse(&body).into_owned().collect();
        let (Some(mode), Some(topic), Some(callback)) = (
            form.get("hub.mode"),
            form.get("hub.topic"),
            form.get("hub.callback"),
        ) else {
            return text(
                StatusCode::BAD_REQUEST,
                "hub.mode, hub.topic and hub.callback are required".into(),
            );
        };
        let Some(&feed) = self.topics.get(topic) else {
            return text(StatusCode::BAD_REQUEST, "unknown topic".into());
        };
        if self.faults.unavailable_share > 0.0 && self.draw() < self.faults.unavailable_share {
            return text(StatusCode::SERVICE_UNAVAILABLE, "busy".into());
        }
        let (mode, topic, callback) = (mode.clone(), topic.clone(), callback.clone());
        let secret = form.get("hub.secret").cloned().unwrap_or_default();
        let asked: Option<u64> = form.get("hub.lease_seconds").and_then(|l| l.parse().ok());
        // Verified after the answer, as hubs do (§5.3).
        tokio::spawn(async move {
            self.verify(feed, mode, topic, callback, secret, asked)
                .await;
        });
        text(StatusCode::ACCEPTED, String::new())
    }

    async fn verify(
        &self,
        feed: usize,
        mode: String,
        topic: String,
        callback: String,
        secret: String,
        asked: Option<u64>,
    ) {
        if mode == "subscribe" && self.faults.deny {
            let q = query(&[
                ("hub.mode", "denied"),
                ("hub.topic", &topic),
                ("hub.reason", "this hub takes no subscriptions"),
            ]);
            let _ = http(
                Method::GET,
                &format!("{callback}{}{q}", sep(&callback)),
                &[],
                Bytes::new(),
            )
            .await;
            self.stats.denied.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let challenge = format!(
            "c{}",
            self.draws.fetch_add(1, Ordering::Relaxed) * 7919 + 17
        );
        let lease = self.faults.lease_seconds.or(asked).unwrap_or(86_400);
        let lease_s = lease.to_string();
        let mut pairs = vec![
            ("hub.mode", mode.as_str()),
            ("hub.topic", topic.as_str()),
            ("hub.challenge", challenge.as_str()),
        ];
        if mode == "subscribe" {
            pairs.push(("hub.lease_seconds", lease_s.as_str()));
        }
        let target = format!("{callback}{}{}", sep(&callback), query(&pairs));
        let confirmed = matches!(
            http(Method::GET, &target, &[], Bytes::new()).await,
            Ok((s, body)) if s.is_success() && body == challenge.as_bytes()
        );
        if !confirmed {
            self.stats
                .verification_refused
                .fetch_add(1, Ordering::Relaxed);
            return;
        }
        let now = self.farm.clock().now_ms();
        let mut subs = self.subs.lock().expect("hub subscriptions");
        if mode == "subscribe" {
            let delivered = subs
                .get(&callback)
                .map(|s| s.delivered)
                .unwrap_or_else(|| self.farm.published_by(feed, now - self.faults.lag_ms));
            subs.insert(
                callback,
                Sub {
                    feed,
                    topic,
                    secret,
                    until_ms: now.saturating_add((lease.min(i64::MAX as u64 / 1000) as i64) * 1000),
                    delivered,
                },
            );
            self.stats.verified.fetch_add(1, Ordering::Relaxed);
        } else {
            subs.remove(&callback);
            self.stats.unsubscribed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Pushes what each subscription has not had yet, every 20 ms of wall time.
    async fn deliver_loop(self: Arc<Self>) {
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let now = self.farm.clock().now_ms();
            if self.faults.silent_from_ms.is_some_and(|t| now >= t) {
                continue;
            }
            let due: Vec<(String, Sub, usize)> = {
                let mut subs = self.subs.lock().expect("hub subscriptions");
                subs.retain(|_, s| s.until_ms > now);
                subs.iter()
                    .filter_map(|(cb, s)| {
                        let n = self.farm.published_by(s.feed, now - self.faults.lag_ms);
                        (n > s.delivered).then(|| (cb.clone(), s.clone(), n))
                    })
                    .collect()
            };
            for (callback, s, n) in due {
                let at = now - self.faults.lag_ms;
                let body = if self.faults.partial {
                    self.farm.document_of(s.feed, s.delivered, n, at)
                } else {
                    self.farm.document(s.feed, at).0
                };
                let key = if self.faults.bad_signature {
                    format!("{}-not", s.secret)
                } else {
                    s.secret.clone()
                };
                let topic = if self.faults.wrong_topic {
                    format!("{}-elsewhere", s.topic)
                } else {
                    s.topic.clone()
                };
                let link = format!("<{}>; rel=\"hub\", <{topic}>; rel=\"self\"", self.url);
                let mut headers = vec![
                    ("content-type", "application/xml".to_string()),
                    ("link", link),
                ];
                if !s.secret.is_empty() {
                    headers.push(("x-hub-signature", sign(key.as_bytes(), body.as_bytes())));
                }
                let answer = http(Method::POST, &callback, &headers, Bytes::from(body)).await;
                match answer {
                    Ok((status, _)) if status.is_success() => {
                        self.stats.deliveries.fetch_add(1, Ordering::Relaxed);
                        self.stats
                            .delivered_postings
                            .fetch_add((n - s.delivered) as u64, Ordering::Relaxed);
                        if let Some(live) = self
                            .subs
                            .lock()
                            .expect("hub subscriptions")
                            .get_mut(&callback)
                        {
                            live.delivered = live.delivered.max(n);
                        }
                    }
                    Ok((StatusCode::GONE, _)) => {
                        // The subscriber does not know this callback: drop it (§7).
                        self.stats.gone.fetch_add(1, Ordering::Relaxed);
                        self.subs
                            .lock()
                            .expect("hub subscriptions")
                            .remove(&callback);
                    }
                    _ => {
                        self.stats.delivery_failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }

    /// A uniform draw in [0, 1), deterministic in the order of draws.
    fn draw(&self) -> f64 {
        let k = self.draws.fetch_add(1, Ordering::Relaxed);
        let x = k.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17) ^ 0xD1B5_4A32_D192_ED03;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    fn stats_text(&self) -> String {
        let s = &self.stats;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "requests {}\nverified {}\nverification_refused {}\ndenied {}\nunsubscribed {}\ndeliveries {}\ndelivered_postings {}\ndelivery_failures {}\ngone {}\nsubscriptions {}\ndown_requests {}\n",
            l(&s.requests),
            l(&s.verified),
            l(&s.verification_refused),
            l(&s.denied),
            l(&s.unsubscribed),
            l(&s.deliveries),
            l(&s.delivered_postings),
            l(&s.delivery_failures),
            l(&s.gone),
            self.subscriptions(),
            l(&s.down_requests),
        )
    }
}

fn sep(url: &str) -> &'static str {
    if url.contains('?') {
        "&"
    } else {
        "?"
    }
}

fn query(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// `sha256=HEX` of `body` under `key` (WebSub §8).
fn sign(key: &[u8], body: &[u8]) -> String {
    let tag = ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key), body);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r
}

/// One HTTP/1.1 request to a loopback `http://` URL, with a 10 s limit; the status and body.
async fn http(
    method: Method,
    url: &str,
    headers: &[(&str, String)],
    body: Bytes,
) -> Result<(StatusCode, Bytes), String> {
    let u = url::Url::parse(url).map_err(|e| e.to_string())?;
    let addr: SocketAddr = format!(
        "{}:{}",
        u.host_str().ok_or("no host")?,
        u.port_or_known_default().ok_or("no port")?
    )
    .parse()
    .map_err(|e: std::net::AddrParseError| e.to_string())?;
    let path = match u.query() {
        Some(q) => format!("{}?{q}", u.path()),
        None => u.path().to_string(),
    };
    let work = async {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, addr.to_string());
        for (k, v) in headers {
            req = req.header(*k, v.as_str());
        }
        let req = req.body(Full::new(body)).map_err(|e| e.to_string())?;
        let resp = send.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<_, String>((status, body))
    };
    tokio::time::timeout(Duration::from_secs(10), work)
        .await
        .map_err(|_| "timed out".to_string())?
}

/// Which of `feeds` feeds name the hub: each with probability `share`, drawn from `seed`
/// (the same feeds for the same seed).
pub fn pick(feeds: usize, share: f64, seed: u64) -> Vec<bool> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5EB5_0B00);
    (0..feeds).map(|_| rng.gen::<f64>() < share).collect()
}
