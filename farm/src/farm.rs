//! A synthetic feed farm on loopback, for demos, integration tests and benchmarks.
//!
//! Feeds post as diurnal Poisson processes (log-normal daily rates, a handful of daily
//! shapes shifted by a few hours) on a [`SimClock`], and are served as real RSS 2.0 or Atom
//! 1.0 documents (the last `items_per_doc` postings with their publication dates), with
//! ETags and `304 Not Modified`. Feeds are spread over several hosts, each its own loopback
//! address (`127.0.0.1`, `127.0.0.2`, …), so politeness groups are real hosts. The farm
//! knows every posting it published, so tests can check that each one was found.
//!
//! For soak tests it can also misbehave on a schedule ([`Faults`]): each host goes through
//! bursts, in simulated time, during which it answers `503 Service Unavailable` or holds
//! requests without answering (past any sane fetch timeout) — what real hosts do under load
//! or in an outage. The documents keep their items meanwhile, so a crawler that retries
//! later loses nothing; `/farm/stats` on any host counts what was served.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use kairos_runtime::clock::SimClock;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Poisson};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Shape and size of a farm.
#[derive(Clone, Debug)]
pub struct FarmConfig {
    /// Feeds.
    pub feeds: usize,
    /// Hosts (loopback addresses) the feeds are spread over.
    pub hosts: usize,
    /// Mean postings per feed per day.
    pub mean_posts_per_day: f64,
    /// Days of postings generated after the clock's current time.
    pub days: f64,
    /// Days of postings already published before the clock's current time (history).
    pub history_days: f64,
    /// Items per served document.
    pub items_per_doc: usize,
    /// Filler bytes in each item's description (to set document size).
    pub pad_bytes: usize,
    /// Random seed.
    pub seed: u64,
    /// Misbehaviour on a schedule (none by default).
    pub faults: Faults,
}

/// Scheduled misbehaviour of the farm's hosts.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Bursts per host per simulated day (a Poisson process; 0 = none).
    pub bursts_per_host_per_day: f64,
    /// Length of a burst, simulated minutes.
    pub burst_minutes: f64,
    /// Share of bursts in which the host holds requests instead of answering 503.
    pub hang_share: f64,
    /// How long a held request is held (wall time) before the farm gives up and answers 503.
    pub hang: Duration,
}

/// One burst of a host: simulated Unix ms `[from, to)`, and whether it hangs.
#[derive(Clone, Copy, Debug)]
struct Burst {
    from: i64,
    to: i64,
    hang: bool,
}

/// What the farm served, for `/farm/stats`.
#[derive(Debug, Default)]
struct Served {
    documents: AtomicU64,
    not_modified: AtomicU64,
    unavailable: AtomicU64,
    held: AtomicU64,
}

/// Loopback address of host `h`: `127.0.0.1` … `127.0.0.250`, then `127.0.1.1` … and so on,
/// so a farm can have thousands of distinct hosts.
pub fn host_ip(h: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, ((h / 250) % 256) as u8, (h % 250 + 1) as u8)
}

impl Default for FarmConfig {
    fn default() -> Self {
        FarmConfig {
            feeds: 200,
            hosts: 8,
            mean_posts_per_day: 4.0,
            days: 30.0,
            history_days: 0.0,
            items_per_doc: 15,
            pad_bytes: 0,
            seed: 1,
            faults: Faults::default(),
        }
    }
}

/// One synthetic feed.
#[derive(Clone, Debug)]
pub struct FarmFeed {
    /// Index, also the path `/f/{index}`.
    pub index: usize,
    /// Host index (address [`host_ip`]).
    pub host: usize,
    /// Served as Atom (else RSS 2.0).
    pub atom: bool,
    /// Posting times, simulated Unix ms, ascending.
    pub postings: Vec<i64>,
}

/// A generated farm; serve it with [`Farm::serve`].
#[derive(Debug)]
pub struct Farm {
    cfg: FarmConfig,
    clock: SimClock,
    feeds: Vec<FarmFeed>,
    /// Each host's bursts, ascending.
    bursts: Vec<Vec<Burst>>,
    served: Served,
    /// Per feed: simulated time of the last 200 or 304 (0 = never), for `/farm/fetched`.
    last_ok: Vec<AtomicI64>,
    /// The WebSub hubs some feeds name, and which feeds ([`crate::hub`]).
    hub: std::sync::OnceLock<(Vec<String>, Vec<bool>)>,
}

/// Daily shapes: weight of each hour.
fn shape(kind: usize, hour: usize) -> f64 {
    let h = hour as f64;
    let bump = |c: f64, w: f64| {
        let d = ((h - c + 12.0).rem_euclid(24.0)) - 12.0;
        (-(d / w).powi(2) / 2.0).exp()
    };
    match kind % 6 {
        0 => 0.05 + bump(13.0, 3.0),
        1 => 0.05 + bump(20.0, 2.0),
        2 => 0.02 + bump(9.0, 1.0),
        3 => 1.0,
        4 => 0.05 + bump(9.0, 1.5) + bump(17.0, 1.5),
        _ => 0.05 + bump(3.0, 2.0),
    }
}

impl Farm {
    /// Generates every feed's postings from `cfg.history_days` before the clock's current
    /// time to `cfg.days` after it.
    pub fn generate(cfg: FarmConfig, clock: SimClock) -> Farm {
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        let sigma: f64 = 1.0;
        let rates = LogNormal::new(
            cfg.mean_posts_per_day.max(1e-6).ln() - sigma * sigma / 2.0,
            sigma,
        )
        .expect("valid log-normal");
        let start = clock.now_ms() - (cfg.history_days * 86_400_000.0) as i64;
        let hours = ((cfg.days + cfg.history_days) * 24.0).ceil() as usize;
        let feeds: Vec<FarmFeed> = (0..cfg.feeds)
            .map(|index| {
                let rate: f64 = rates.sample(&mut rng);
                let kind = rng.gen_range(0..6);
                let shift = rng.gen_range(0..7) as isize - 3;
                let w: Vec<f64> = (0..24)
                    .map(|h| shape(kind, (h as isize - shift).rem_euclid(24) as usize))
                    .collect();
                let total: f64 = w.iter().sum();
                // Hour boundaries follow the day of the simulated clock (UTC).
                let day_ms = 86_400_000i64;
                let first_hour = start.div_euclid(3_600_000);
                let mut postings = Vec::new();
                for k in 0..hours as i64 {
                    let hour_start = (first_hour + k) * 3_600_000;
                    let hour_of_day = ((hour_start.rem_euclid(day_ms)) / 3_600_000) as usize;
                    let lambda = rate * w[hour_of_day] / total;
                    if let Ok(p) = Poisson::new(lambda) {
                        for _ in 0..p.sample(&mut rng) as usize {
                            // Whole seconds: RSS dates carry no milliseconds.
                            let t = hour_start + rng.gen_range(0..3600) * 1000;
                            if t >= start {
                                postings.push(t);
                            }
                        }
                    }
                }
                postings.sort_unstable();
                FarmFeed {
                    index,
                    host: index % cfg.hosts.max(1),
                    atom: index % 3 == 2,
                    postings,
                }
            })
            .collect();
        let bursts = schedule_bursts(&cfg, start, &mut rng);
        let last_ok = (0..feeds.len()).map(|_| AtomicI64::new(0)).collect();
        Farm {
            cfg,
            clock,
            feeds,
            bursts,
            served: Served::default(),
            last_ok,
            hub: Default::default(),
        }
    }

    /// The burst host `h` is in at simulated time `t_ms`, if any.
    fn burst_at(&self, h: usize, t_ms: i64) -> Option<Burst> {
        let bursts = self.bursts.get(h)?;
        let i = bursts.partition_point(|b| b.from <= t_ms);
        (i > 0 && bursts[i - 1].to > t_ms).then(|| bursts[i - 1])
    }

    /// Simulated minutes of bursts scheduled in all, and how many there are.
    pub fn burst_totals(&self) -> (f64, usize) {
        let all = self.bursts.iter().flatten();
        let minutes = all.clone().map(|b| (b.to - b.from) as f64 / 60_000.0).sum();
        (minutes, all.count())
    }

    /// The clock the farm publishes on.
    pub fn clock(&self) -> &SimClock {
        &self.clock
    }

    /// The feeds.
    pub fn feeds(&self) -> &[FarmFeed] {
        &self.feeds
    }

    /// Postings of feed `i` published at or before simulated time `t_ms`.
    pub fn published_by(&self, i: usize, t_ms: i64) -> usize {
        self.feeds[i].postings.partition_point(|&p| p <= t_ms)
    }

    /// The served document of feed `i` at simulated time `now_ms`, and its ETag.
    pub fn document(&self, i: usize, now_ms: i64) -> (String, String) {
        let n = self.published_by(i, now_ms);
        let from = n.saturating_sub(self.cfg.items_per_doc);
        (self.document_of(i, from, n, now_ms), format!("\"{i}-{n}\""))
    }

    /// Names `hubs` (WebSub hubs' URLs, in that order) in the documents of the feeds
    /// `on_hub` lists.
    pub fn set_hub(&self, hubs: Vec<String>, on_hub: Vec<bool>) {
        let _ = self.hub.set((hubs, on_hub));
    }

    /// The hubs feed `i`'s documents name (none: empty).
    pub fn hub_of(&self, i: usize) -> &[String] {
        match self.hub.get() {
            Some((hubs, on)) if on.get(i).copied().unwrap_or(false) => hubs,
            _ => &[],
        }
    }

    /// Feed `i`'s document holding its postings `from..n` (newest first), as of `now_ms`.
    pub fn document_of(&self, i: usize, from: usize, n: usize, now_ms: i64) -> String {
        let f = &self.feeds[i];
        let n = n.min(f.postings.len());
        let from = from.min(n);
        let hub = self.hub_of(i);
        let pad = "x".repeat(self.cfg.pad_bytes);
        let mut doc = String::with_capacity(512 + (n - from) * (200 + pad.len()));
        let date = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
        if f.atom {
            doc.push_str(&format!(
                "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<feed xmlns=\"http://www.w3.org/2005/Atom\"><title>Farm feed {i}</title><id>urn:kairos-farm:{i}</id><updated>{}</updated>\n",
                date(now_ms).to_rfc3339()
            ));
            for h in hub {
                doc.push_str(&format!("<link rel=\"hub\" href=\"{h}\"/>\n"));
            }
            for k in (from..n).rev() {
                doc.push_str(&format!(
                    "<entry><id>urn:kairos-farm:{i}:{k}</id><title>Post {k} of feed {i}</title><link href=\"http://farm.invalid/f/{i}/{k}\"/><published>{}</published><updated>{}</updated><summary>{pad}</summary></entry>\n",
                    date(f.postings[k]).to_rfc3339(),
                    date(f.postings[k]).to_rfc3339()
                ));
            }
            doc.push_str("</feed>\n");
        } else {
            doc.push_str(&format!(
                "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<rss version=\"2.0\" xmlns:atom=\"http://www.w3.org/2005/Atom\"><channel><title>Farm feed {i}</title><link>http://farm.invalid/f/{i}</link><description>synthetic</description>\n"
            ));
            for h in hub {
                doc.push_str(&format!("<atom:link rel=\"hub\" href=\"{h}\"/>\n"));
            }
            for k in (from..n).rev() {
                doc.push_str(&format!(
                    "<item><guid isPermaLink=\"false\">kairos-farm-{i}-{k}</guid><title>Post {k} of feed {i}</title><link>http://farm.invalid/f/{i}/{k}</link><pubDate>{}</pubDate><description>{pad}</description></item>\n",
                    date(f.postings[k]).to_rfc2822()
                ));
            }
            doc.push_str("</channel></rss>\n");
        }
        doc
    }

    /// Binds one listener per host on [`host_ip`] (ephemeral ports) and serves until
    /// the returned handle is dropped.
    pub async fn serve(self: Arc<Self>) -> std::io::Result<RunningFarm> {
        let mut hosts = Vec::new();
        let mut tasks = Vec::new();
        for h in 0..self.cfg.hosts.max(1) {
            let listener = tokio::net::TcpListener::bind((host_ip(h), 0)).await?;
            hosts.push(listener.local_addr()?);
            let farm = self.clone();
            tasks.push(tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let farm = farm.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let farm = farm.clone();
                            async move {
                                Ok::<_, std::convert::Infallible>(farm.respond(&req).await)
                            }
                        });
                        // A client hanging up mid-response is its business, not the farm's.
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            }));
        }
        let urls = self
            .feeds
            .iter()
            .map(|f| format!("http://{}/f/{}", hosts[f.host], f.index))
            .collect();
        Ok(RunningFarm { urls, hosts, tasks })
    }

    async fn respond(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
        match req.uri().path() {
            "/farm/stats" => return self.stats(),
            "/farm/fetched" => return self.fetched(),
            _ => {}
        }
        let index = req
            .uri()
            .path()
            .strip_prefix("/f/")
            .and_then(|s| s.parse::<usize>().ok());
        let Some(i) = index.filter(|&i| i < self.feeds.len()) else {
            return status(StatusCode::NOT_FOUND);
        };
        let now = self.clock.now_ms();
        if let Some(burst) = self.burst_at(self.feeds[i].host, now) {
            if burst.hang {
                self.served.held.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(self.cfg.faults.hang).await;
            } else {
                self.served.unavailable.fetch_add(1, Ordering::Relaxed);
            }
            return status(StatusCode::SERVICE_UNAVAILABLE);
        }
        let (doc, etag) = self.document(i, now);
        // What the client holds after this answer: the document as of `now`.
        self.last_ok[i].fetch_max(now, Ordering::Relaxed);
        if req
            .headers()
            .get(hyper::header::IF_NONE_MATCH)
            .is_some_and(|v| v.as_bytes() == etag.as_bytes())
        {
            self.served.not_modified.fetch_add(1, Ordering::Relaxed);
            let mut r = status(StatusCode::NOT_MODIFIED);
            r.headers_mut()
                .insert(hyper::header::ETAG, etag.parse().expect("ascii etag"));
            return r;
        }
        self.served.documents.fetch_add(1, Ordering::Relaxed);
        let ctype = if self.feeds[i].atom {
            "application/atom+xml"
        } else {
            "application/rss+xml"
        };
        Response::builder()
            .header(hyper::header::CONTENT_TYPE, ctype)
            .header(hyper::header::ETAG, etag)
            .body(Full::new(Bytes::from(doc)))
            .expect("valid response")
    }
}

impl Farm {
    /// `/farm/fetched`: `index sim_ms` for every feed served (200 or 304) at least once, the
    /// last such time: every posting published by then was in a document a client held.
    fn fetched(&self) -> Response<Full<Bytes>> {
        let mut body = String::new();
        for (i, t) in self.last_ok.iter().enumerate() {
            let t = t.load(Ordering::Relaxed);
            if t > 0 {
                body.push_str(&format!("{i} {t}\n"));
            }
        }
        Response::new(Full::new(Bytes::from(body)))
    }

    /// `/farm/stats`: counts of what was served, one `name value` line each.
    fn stats(&self) -> Response<Full<Bytes>> {
        let s = &self.served;
        let body = format!(
            "documents {}\nnot_modified {}\nunavailable {}\nheld {}\n",
            s.documents.load(Ordering::Relaxed),
            s.not_modified.load(Ordering::Relaxed),
            s.unavailable.load(Ordering::Relaxed),
            s.held.load(Ordering::Relaxed),
        );
        Response::new(Full::new(Bytes::from(body)))
    }
}

/// Each host's bursts over the farm's span, from its own draws after the feeds' (so adding
/// faults leaves the postings of a seed unchanged).
fn schedule_bursts(cfg: &FarmConfig, start: i64, rng: &mut StdRng) -> Vec<Vec<Burst>> {
    let f = &cfg.faults;
    let span_days = cfg.days + cfg.history_days;
    if f.bursts_per_host_per_day <= 0.0 || f.burst_minutes <= 0.0 || span_days <= 0.0 {
        return Vec::new();
    }
    let len_ms = (f.burst_minutes * 60_000.0) as i64;
    (0..cfg.hosts.max(1))
        .map(|_| {
            let n = Poisson::new(f.bursts_per_host_per_day * span_days)
                .map(|p| p.sample(rng) as usize)
                .unwrap_or(0);
            let mut v: Vec<Burst> = (0..n)
                .map(|_| {
                    let from = start + (rng.gen::<f64>() * span_days * 86_400_000.0) as i64;
                    Burst {
                        from,
                        to: from + len_ms,
                        hang: rng.gen::<f64>() < f.hang_share,
                    }
                })
                .collect();
            v.sort_by_key(|b| b.from);
            // Overlapping bursts merge into one (the later one's kind gives way).
            let mut merged: Vec<Burst> = Vec::with_capacity(v.len());
            for b in v {
                match merged.last_mut() {
                    Some(last) if b.from <= last.to => last.to = last.to.max(b.to),
                    _ => merged.push(b),
                }
            }
            merged
        })
        .collect()
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::new()));
    *r.status_mut() = code;
    r
}

/// A serving farm; dropping it stops the listeners.
#[derive(Debug)]
pub struct RunningFarm {
    /// URL of each feed, by index.
    pub urls: Vec<String>,
    /// Address of each host.
    pub hosts: Vec<SocketAddr>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for RunningFarm {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn farm(faults: Faults) -> Farm {
        let cfg = FarmConfig {
            feeds: 40,
            hosts: 4,
            days: 10.0,
            faults,
            ..FarmConfig::default()
        };
        Farm::generate(cfg, SimClock::manual(1_700_000_000_000))
    }

    #[test]
    fn hosts_past_250_get_addresses_of_their_own() {
        assert_eq!(host_ip(0), Ipv4Addr::new(127, 0, 0, 1));
        assert_eq!(host_ip(249), Ipv4Addr::new(127, 0, 0, 250));
        assert_eq!(host_ip(250), Ipv4Addr::new(127, 0, 1, 1));
        assert_eq!(host_ip(499), Ipv4Addr::new(127, 0, 1, 250));
        let all: std::collections::HashSet<_> = (0..5000).map(host_ip).collect();
        assert_eq!(all.len(), 5000);
    }

    #[test]
    fn bursts_follow_their_rate_and_leave_the_postings_alone() {
        let quiet = farm(Faults::default());
        let faults = Faults {
            bursts_per_host_per_day: 3.0,
            burst_minutes: 20.0,
            hang_share: 0.5,
            hang: Duration::from_secs(1),
        };
        let noisy = farm(faults);
        for (a, b) in quiet.feeds().iter().zip(noisy.feeds()) {
            assert_eq!(a.postings, b.postings);
        }
        let (minutes, n) = noisy.burst_totals();
        // 4 hosts × 10 days × 3 a day = 120 expected (merging only lowers it).
        assert!((80..=150).contains(&n), "{n} bursts");
        // Each burst lasts 20 minutes, a merged one longer; merging is rare at this rate.
        assert!(
            minutes >= n as f64 * 20.0 - 1e-9 && minutes < n as f64 * 25.0,
            "{minutes}"
        );
        let hangs = noisy.bursts.iter().flatten().filter(|b| b.hang).count();
        assert!(hangs > n / 4 && hangs < 3 * n / 4, "{hangs} of {n}");
        // Inside a burst and just outside it.
        let b = noisy.bursts[1][0];
        assert!(noisy.burst_at(1, b.from).is_some());
        assert!(noisy.burst_at(1, b.to - 1).is_some());
        assert!(noisy.burst_at(1, b.to).is_none());
        assert!(noisy.burst_at(1, b.from - 1).is_none());
        assert_eq!(quiet.burst_totals(), (0.0, 0));
        assert!(quiet.burst_at(0, b.from).is_none());
    }
}
