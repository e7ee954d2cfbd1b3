//! One HTTP fetch of a feed, with every way it can end classified.
//!
//! Bounded in every dimension a hostile or broken server can stretch: connect and total
//! timeouts (a slow-drip body ends at the total timeout), a maximum body size counted
//! *after* decompression (an endless body or a gzip bomb ends at the limit), a redirect
//! limit with loop detection, and the [`crate::target`] address policy on the URL, every
//! redirect and every DNS answer. Conditional GET (ETag / Last-Modified) saves bodies, and
//! `429`/`503` with `Retry-After` and `Cache-Control: max-age` come back as server hints.

use crate::target::{ForbiddenTarget, GuardedResolver, TargetPolicy};
use reqwest::header::{
    HeaderMap, CACHE_CONTROL, ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, RETRY_AFTER,
};
use reqwest::{redirect, StatusCode, Url};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Limits and identity of the fetcher.
#[derive(Clone, Debug)]
pub struct FetchConfig {
    /// Time allowed to establish a connection.
    pub connect_timeout: Duration,
    /// Time allowed for the whole fetch, body included.
    pub total_timeout: Duration,
    /// Largest body accepted, after decompression.
    pub max_body_bytes: usize,
    /// Redirects followed at most.
    pub max_redirects: usize,
    /// `User-Agent` sent.
    pub user_agent: String,
    /// Which addresses may be contacted.
    pub policy: TargetPolicy,
    /// Forward proxy for every fetch (`--proxy`). The environment's `HTTP_PROXY`/`HTTPS_PROXY`
    /// are never read: a proxy resolves names itself, past the DNS guard, so with one the
    /// target's name is resolved and checked here before the request goes to the proxy.
    pub proxy: Option<String>,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            connect_timeout: Duration::from_secs(10),
            total_timeout: Duration::from_secs(30),
            max_body_bytes: 10 << 20,
            max_redirects: 5,
            user_agent: concat!("kairos/", env!("CARGO_PKG_VERSION"), " (feed crawler)")
                .to_string(),
            policy: TargetPolicy::default(),
            proxy: None,
        }
    }
}

/// HTTP cache validators of a feed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Validators {
    /// `ETag` of the last full response.
    pub etag: Option<String>,
    /// `Last-Modified` of the last full response.
    pub last_modified: Option<String>,
}

/// How a fetch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A 2xx response with its (decompressed) body.
    Ok { status: u16, body: Vec<u8> },
    /// 304: the validators matched.
    NotModified,
    /// 429 or 503; `retry_after` from the header when present.
    Throttled {
        status: u16,
        retry_after: Option<Duration>,
    },
    /// Other 4xx.
    ClientError { status: u16 },
    /// Other 5xx (and unexpected 1xx finals).
    ServerError { status: u16 },
    /// Connect or total timeout.
    Timeout,
    /// Body larger than the limit (after decompression).
    TooLarge,
    /// Too many redirects, or a redirect loop.
    RedirectLimit,
    /// The URL, a redirect or a DNS answer points at a refused address.
    ForbiddenTarget(String),
    /// Not an http(s) URL, or a redirect that cannot be followed.
    BadUrl(String),
    /// Connection, TLS or protocol failure.
    Network(String),
}

/// Result of one fetch.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// How it ended.
    pub outcome: Outcome,
    /// URL after redirects (the requested one if none).
    pub final_url: String,
    /// Validators to send next time (from this response when it had them).
    pub validators: Validators,
    /// Body bytes received after decompression.
    pub body_bytes: u64,
    /// Publisher's minimum interval (`Cache-Control: max-age`).
    pub max_age: Option<Duration>,
    /// Redirects led to `final_url` and every one was permanent (301/308): the feed moved.
    pub permanent_redirect: bool,
    /// Wall time spent.
    pub elapsed: Duration,
    /// The answer's `Link` header values (WebSub discovery, [`crate::websub`]), at most
    /// [`MAX_LINK_HEADERS`] of at most [`MAX_LINK_HEADER_BYTES`] each.
    pub link_headers: Vec<String>,
}

/// `Link` header values kept of one answer at most.
pub const MAX_LINK_HEADERS: usize = 32;
/// Longest `Link` header value kept.
pub const MAX_LINK_HEADER_BYTES: usize = 8192;

/// Why the fetcher could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct SetupError(String);

/// A reusable fetcher (one connection pool).
#[derive(Clone, Debug)]
pub struct Fetcher {
    client: reqwest::Client,
    cfg: Arc<FetchConfig>,
}

impl Fetcher {
    /// Builds the HTTP client (rustls on the ring provider, gzip and brotli).
    pub fn new(cfg: FetchConfig) -> Result<Fetcher, SetupError> {
        // Ignored when another part of the process installed a provider already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let cfg = Arc::new(cfg);
        let policy = Arc::new(cfg.policy.clone());
        let builder = match &cfg.proxy {
            Some(p) => reqwest::Client::builder().proxy(
                reqwest::Proxy::all(p.as_str())
                    .map_err(|e| SetupError(format!("proxy {p}: {e}")))?,
            ),
            None => reqwest::Client::builder().no_proxy(),
        };
        let client = builder
            .connect_timeout(cfg.connect_timeout)
            .timeout(cfg.total_timeout)
            .user_agent(cfg.user_agent.clone())
            .dns_resolver(GuardedResolver::new(policy))
            .connector_layer(crate::timing::ConnectTiming)
            // Redirects are followed by hand (`run`): each hop is checked against the
            // policy, and whether every hop was permanent decides if the feed moved.
            .redirect(redirect::Policy::none())
            .build()
            .map_err(|e| SetupError(e.to_string()))?;
        Ok(Fetcher { client, cfg })
    }

    /// Fetches `url` conditionally on `validators`. Never panics; always returns in about
    /// the total timeout at most.
    pub async fn fetch(&self, url: &str, validators: &Validators) -> Fetched {
        let started = Instant::now();
        let mut fetched = Fetched {
            outcome: Outcome::Network(String::new()),
            final_url: url.to_string(),
            validators: validators.clone(),
            body_bytes: 0,
            max_age: None,
            permanent_redirect: false,
            elapsed: Duration::ZERO,
            link_headers: Vec::new(),
        };
        // Backstop over reqwest's own timeout, in case a body read stalls between chunks.
        let limit = self.cfg.total_timeout + Duration::from_secs(1);
        fetched.outcome =
            match tokio::time::timeout(limit, self.run(url, validators, &mut fetched)).await {
                Ok(outcome) => outcome,
                Err(_) => Outcome::Timeout,
            };
        fetched.elapsed = started.elapsed();
        fetched
    }

    /// Sends a WebSub subscription request (`form`: `hub.mode`, `hub.topic`,
    /// `hub.callback`, …) to `hub` as a form POST (WebSub §5.1), under the same address
    /// policy, proxy and timeouts as a fetch. A 307 or 308 is followed with the same form
    /// (§5.1: a hub may move), at most [`FetchConfig::max_redirects`] times; any other
    /// redirect is an error. Returns the hub that accepted it (2xx) when it is not `hub`.
    pub async fn hub_request(
        &self,
        hub: &str,
        form: &[(&str, &str)],
    ) -> Result<Option<String>, String> {
        let mut current = match Url::parse(hub) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => u,
            Ok(u) => return Err(format!("hub scheme `{}` is not http or https", u.scheme())),
            Err(e) => return Err(format!("hub URL: {e}")),
        };
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        for _ in 0..=self.cfg.max_redirects {
            if let Some(ip) = literal_ip(&current) {
                if !self.cfg.policy.permits(ip) {
                    return Err(format!("hub address {ip} is not allowed"));
                }
            }
            if let Some(refused) = self.refused_behind_proxy(&current).await {
                return Err(format!("hub not allowed: {refused:?}"));
            }
            let resp = self
                .client
                .post(current.clone())
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .body(body.clone())
                .send()
                .await
                .map_err(|e| format!("{:?}", classify(&e)))?;
            let status = resp.status();
            if status.is_success() {
                return Ok((current.as_str() != hub).then(|| current.to_string()));
            }
            if matches!(status.as_u16(), 307 | 308) {
                let next = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|l| current.join(l).ok())
                    .filter(|u| matches!(u.scheme(), "http" | "https"))
                    .ok_or_else(|| format!("{status} without a usable Location"))?;
                current = next;
                continue;
            }
            // The hub's own words, bounded (it says why it refused).
            let mut why = resp.text().await.unwrap_or_default();
            kairos_proto::bounds::clip(&mut why, 200);
            return Err(format!("HTTP {}: {}", status.as_u16(), why.trim()));
        }
        Err("too many redirects".into())
    }

    /// With a proxy, the target name's addresses are checked here (the proxy resolves it
    /// again; a name that resolves to a refused address at all is refused).
    async fn refused_behind_proxy(&self, url: &Url) -> Option<Outcome> {
        self.cfg.proxy.as_ref()?;
        let Some(url::Host::Domain(name)) = url.host() else {
            return None; // IP literals are checked before and at every hop
        };
        let port = url.port_or_known_default().unwrap_or(80);
        let found: Vec<std::net::SocketAddr> = match tokio::net::lookup_host((name, port)).await {
            Ok(a) => a.collect(),
            Err(e) => return Some(Outcome::Network(format!("resolving {name}: {e}"))),
        };
        found
            .iter()
            .find(|a| !self.cfg.policy.permits(a.ip()))
            .map(|a| Outcome::ForbiddenTarget(format!("{name} ({})", a.ip())))
    }

    async fn run(&self, url: &str, validators: &Validators, out: &mut Fetched) -> Outcome {
        let parsed = match Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => u,
            Ok(u) => {
                return Outcome::BadUrl(format!("scheme `{}` is not http or https", u.scheme()))
            }
            Err(e) => return Outcome::BadUrl(e.to_string()),
        };
        if let Some(ip) = literal_ip(&parsed) {
            if !self.cfg.policy.permits(ip) {
                return Outcome::ForbiddenTarget(ip.to_string());
            }
        }
        let mut current = parsed;
        let mut visited = vec![current.clone()];
        let mut permanent = true;
        let mut resp = loop {
            if let Some(refused) = self.refused_behind_proxy(&current).await {
                return refused;
            }
            let mut req = self.client.get(current.clone());
            if let Some(etag) = &validators.etag {
                req = req.header(IF_NONE_MATCH, etag);
            }
            if let Some(lm) = &validators.last_modified {
                req = req.header(IF_MODIFIED_SINCE, lm);
            }
            let resp = match req.send().await {
                Ok(r) => r,
                Err(e) => return classify(&e),
            };
            let status = resp.status();
            if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
                break resp;
            }
            let Some(next) = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|loc| current.join(loc.trim()).ok())
            else {
                // No usable Location: reported as an unfollowable redirect below.
                break resp;
            };
            if !matches!(next.scheme(), "http" | "https") {
                return Outcome::BadUrl(format!("redirect to {next}"));
            }
            if visited.len() > self.cfg.max_redirects || visited.contains(&next) {
                return Outcome::RedirectLimit;
            }
            if let Some(ip) = literal_ip(&next) {
                if !self.cfg.policy.permits(ip) {
                    return Outcome::ForbiddenTarget(next.to_string());
                }
            }
            permanent &= matches!(status.as_u16(), 301 | 308);
            visited.push(next.clone());
            current = next;
        };
        out.permanent_redirect = visited.len() > 1 && permanent;
        out.final_url = resp.url().to_string();
        let status = resp.status();
        let headers = resp.headers().clone();
        out.max_age = max_age(&headers);
        if status == StatusCode::NOT_MODIFIED {
            return Outcome::NotModified;
        }
        if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
            return Outcome::Throttled {
                status: status.as_u16(),
                retry_after: retry_after(&headers),
            };
        }
        if status.is_redirection() {
            // A redirect the client did not follow: no or unusable Location (e.g. file://).
            let loc = headers
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("(none)");
            return Outcome::BadUrl(format!(
                "{} redirect to an unfollowable Location {loc}",
                status.as_u16()
            ));
        }
        if status.is_client_error() {
            return Outcome::ClientError {
                status: status.as_u16(),
            };
        }
        if !status.is_success() {
            return Outcome::ServerError {
                status: status.as_u16(),
            };
        }
        let max = self.cfg.max_body_bytes;
        let mut body = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > max {
                        out.body_bytes = (body.len() + chunk.len()) as u64;
                        return Outcome::TooLarge;
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return classify(&e),
            }
        }
        out.body_bytes = body.len() as u64;
        let header = |name| {
            headers
                .get(name)
                .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
                .map(str::to_string)
        };
        out.validators = Validators {
            etag: header(ETAG),
            last_modified: header(LAST_MODIFIED),
        };
        out.link_headers = headers
            .get_all(reqwest::header::LINK)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter(|v| v.len() <= MAX_LINK_HEADER_BYTES)
            .take(MAX_LINK_HEADERS)
            .map(str::to_string)
            .collect();
        Outcome::Ok {
            status: status.as_u16(),
            body,
        }
    }
}

fn literal_ip(url: &Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(_) => None,
    }
}

/// Maps a reqwest error to an outcome, looking through its cause chain for the DNS guard's
/// refusal.
fn classify(e: &reqwest::Error) -> Outcome {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(f) = s.downcast_ref::<ForbiddenTarget>() {
            return Outcome::ForbiddenTarget(f.0.clone());
        }
        source = s.source();
    }
    if e.is_timeout() {
        Outcome::Timeout
    } else if e.is_redirect() {
        Outcome::RedirectLimit
    } else {
        Outcome::Network(e.to_string())
    }
}

/// `Retry-After` as seconds or an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(
        when.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// `Cache-Control: max-age=N`.
fn max_age(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(CACHE_CONTROL)?.to_str().ok()?;
    v.split(',')
        .filter_map(|d| d.trim().strip_prefix("max-age="))
        .find_map(|n| n.trim_matches('"').parse::<u64>().ok())
        .map(Duration::from_secs)
}
