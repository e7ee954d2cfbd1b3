//! A synthetic feed farm on loopback, for demos, integration tests and benchmarks.
//!
//! Feeds post as diurnal Poisson processes (log-normal daily rates, a handful of daily
//! shapes shifted by a few hours) on a [`SimClock`], and are served as real RSS 2.0 or Atom
//! 1.0 documents (the last `items_per_doc` postings with their publication dates), with
//! ETags and `304 Not Modified`. Feeds are spread over several hosts, each its own loopback
//! address (`127.0.0.1`, `127.0.0.2`, …), so politeness groups are real hosts. The farm
//! knows every posting it published, so tests can check that each one was found.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use kairos_runtime::clock::SimClock;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Poisson};
use std::net::SocketAddr;
use std::sync::Arc;

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
        }
    }
}

/// One synthetic feed.
#[derive(Clone, Debug)]
pub struct FarmFeed {
    /// Index, also the path `/f/{index}`.
    pub index: usize,
    /// Host index (address `127.0.0.{host+1}`).
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
        let feeds = (0..cfg.feeds)
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
        Farm { cfg, clock, feeds }
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
        let f = &self.feeds[i];
        let n = self.published_by(i, now_ms);
        let from = n.saturating_sub(self.cfg.items_per_doc);
        let pad = "x".repeat(self.cfg.pad_bytes);
        let mut doc = String::with_capacity(512 + (n - from) * (200 + pad.len()));
        let date = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
        if f.atom {
            doc.push_str(&format!(
                "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<feed xmlns=\"http://www.w3.org/2005/Atom\"><title>Farm feed {i}</title><id>urn:kairos-farm:{i}</id><updated>{}</updated>\n",
                date(now_ms).to_rfc3339()
            ));
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
                "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<rss version=\"2.0\"><channel><title>Farm feed {i}</title><link>http://farm.invalid/f/{i}</link><description>synthetic</description>\n"
            ));
            for k in (from..n).rev() {
                doc.push_str(&format!(
                    "<item><guid isPermaLink=\"false\">kairos-farm-{i}-{k}</guid><title>Post {k} of feed {i}</title><link>http://farm.invalid/f/{i}/{k}</link><pubDate>{}</pubDate><description>{pad}</description></item>\n",
                    date(f.postings[k]).to_rfc2822()
                ));
            }
            doc.push_str("</channel></rss>\n");
        }
        (doc, format!("\"{i}-{n}\""))
    }

    /// Binds one listener per host on `127.0.0.{h+1}` (ephemeral ports) and serves until
    /// the returned handle is dropped.
    pub async fn serve(self: Arc<Self>) -> std::io::Result<RunningFarm> {
        let mut hosts = Vec::new();
        let mut tasks = Vec::new();
        for h in 0..self.cfg.hosts.max(1) {
            let ip = std::net::Ipv4Addr::new(127, 0, 0, (h + 1).min(254) as u8);
            let listener = tokio::net::TcpListener::bind((ip, 0)).await?;
            hosts.push(listener.local_addr()?);
            let farm = self.clone();
            tasks.push(tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let farm = farm.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let farm = farm.clone();
                            async move { Ok::<_, std::convert::Infallible>(farm.respond(&req)) }
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

    fn respond(&self, req: &Request<Incoming>) -> Response<Full<Bytes>> {
        let index = req
            .uri()
            .path()
            .strip_prefix("/f/")
            .and_then(|s| s.parse::<usize>().ok());
        let Some(i) = index.filter(|&i| i < self.feeds.len()) else {
            return status(StatusCode::NOT_FOUND);
        };
        let (doc, etag) = self.document(i, self.clock.now_ms());
        if req
            .headers()
            .get(hyper::header::IF_NONE_MATCH)
            .is_some_and(|v| v.as_bytes() == etag.as_bytes())
        {
            let mut r = status(StatusCode::NOT_MODIFIED);
            r.headers_mut()
                .insert(hyper::header::ETAG, etag.parse().expect("ascii etag"));
            return r;
        }
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
