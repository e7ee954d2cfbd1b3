//! What the two soaks share: the farm they crawl and the published postings it reports,
//! samples read off Prometheus scrapes and `/proc`, the sweep of every feed's postings
//! through the Postings API, and the final count of postings lost and duplicated.
#![allow(dead_code)]

pub mod args;
pub mod history;
pub mod net;

use kairos_proto::v1 as pb;
use kairos_proto::v1::postings_client::PostingsClient;
use kairos_tests::{spawn_until, Child};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;

/// Items in each served document.
pub const ITEMS_PER_DOC: usize = 40;

/// Resident set size of process `pid`, MB (0 once it is gone).
pub fn rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Bytes of every file under `dir`.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Sum of every sample of `name` (all label sets) in a scrape.
pub fn total(scrape: &str, name: &str) -> f64 {
    scrape
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with(' ') || r.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Cumulative bucket counts of histogram `name` in a scrape, by upper bound.
pub fn buckets(scrape: &str, name: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{name}_bucket{{");
    let mut v: Vec<(f64, f64)> = scrape
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&prefix)?;
            let le = rest.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, l.rsplit(' ').next()?.parse().ok()?))
        })
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// Quantile `q` of a histogram given by cumulative counts: the first bucket bound holding
/// it (as `histogram_quantile` would, without interpolation).
pub fn quantile(cum: &[(f64, f64)], q: f64) -> Option<f64> {
    let n = cum.last()?.1;
    if n <= 0.0 {
        return None;
    }
    cum.iter().find(|(_, c)| *c >= q * n).map(|(le, _)| *le)
}

/// A bearer token on every call, or none (a coordinator serving on loopback without
/// credentials).
#[derive(Clone)]
pub struct Bearer(Option<MetadataValue<Ascii>>);

impl Bearer {
    /// `token`, or no header at all.
    pub fn new(token: Option<&str>) -> Bearer {
        Bearer(token.map(|t| format!("Bearer {t}").parse().expect("ASCII token")))
    }
}

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut r: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(v) = &self.0 {
            r.metadata_mut().insert("authorization", v.clone());
        }
        Ok(r)
    }
}

/// The farm the soak crawls, and what it published.
pub struct Farm {
    pub child: Child,
    /// Each feed's URL, by index.
    pub urls: Vec<String>,
    /// Every posting's time, by feed.
    pub published: Vec<Vec<i64>>,
    /// `host:port` of one of its hosts, for `/farm/stats` and `/farm/fetched`.
    host: String,
}

/// Farm settings the soaks choose.
pub struct FarmShape {
    pub feeds: usize,
    pub hosts: usize,
    pub posts_per_day: f64,
    /// Simulated days it publishes.
    pub days: f64,
    pub bursts: f64,
    pub seed: u64,
}

impl Farm {
    /// Starts the farm on the soak's clock; its hosts misbehave throughout (bursts of 503s
    /// and of requests held past the fetch timeout).
    pub fn start(shape: &FarmShape, clock: &[String], dir: &Path) -> Farm {
        let urls_file = dir.join("urls.txt");
        let postings_file = dir.join("postings.csv");
        let mut args: Vec<String> = [
            "--feeds",
            &shape.feeds.to_string(),
            "--hosts",
            &shape.hosts.to_string(),
            "--posts-per-day",
            &shape.posts_per_day.to_string(),
            "--days",
            &shape.days.to_string(),
            "--items-per-doc",
            &ITEMS_PER_DOC.to_string(),
            "--seed",
            &shape.seed.to_string(),
            "--urls-out",
            &urls_file.display().to_string(),
            "--postings-out",
            &postings_file.display().to_string(),
            "--fault-bursts-per-host-per-day",
            &shape.bursts.to_string(),
            "--fault-burst-minutes",
            "60",
            "--fault-hang-share",
            "0.3",
            "--fault-hang",
            "15s",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(clock.iter().cloned());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (child, ready) = spawn_until(
            "kairos-farm",
            &refs,
            &dir.join("farm.log"),
            &["kairos-farm ready: "],
        );
        println!("farm: {}", ready[0]);
        let urls: Vec<String> = std::fs::read_to_string(&urls_file)
            .unwrap()
            .lines()
            .map(String::from)
            .collect();
        // The farm writes them in order.
        let mut published: Vec<Vec<i64>> = vec![Vec::new(); shape.feeds];
        for line in std::fs::read_to_string(&postings_file).unwrap().lines() {
            let (f, t) = line.split_once(',').unwrap();
            published[f.parse::<usize>().unwrap()].push(t.parse().unwrap());
        }
        let host = urls[0]
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap()
            .to_string();
        Farm {
            child,
            urls,
            published,
            host,
        }
    }

    /// The body the farm answers `path` with ("" if it does not answer).
    pub fn get(&self, path: &str) -> String {
        use std::io::{Read, Write};
        let Ok(mut c) = std::net::TcpStream::connect(&self.host) else {
            return String::new();
        };
        let _ = c.set_read_timeout(Some(Duration::from_secs(30)));
        let _ = c.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes());
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        out.split("\r\n\r\n").nth(1).unwrap_or("").to_string()
    }

    /// Requests the farm has answered so far, whatever the answer.
    pub fn served(&self) -> f64 {
        self.get("/farm/stats")
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
            .sum()
    }

    /// Per feed, the simulated time of its last 200 or 304 (0 = never).
    pub fn last_ok(&self) -> Vec<i64> {
        let mut last_ok = vec![0i64; self.published.len()];
        for line in self.get("/farm/fetched").lines() {
            if let Some((i, t)) = line.split_once(' ') {
                last_ok[i.parse::<usize>().unwrap()] = t.parse().unwrap();
            }
        }
        last_ok
    }

    /// Postings published in all.
    pub fn total(&self) -> usize {
        self.published.iter().map(Vec::len).sum()
    }
}

/// What one feed's postings looked like: item index → first discovery time.
pub type Seen = HashMap<u32, i64>;

/// Reads every feed's postings from `url` and folds them into `seen`; returns duplicates
/// found (an item listed twice in one read, or again with another discovery time) and the
/// time it took. A page that fails is asked again, up to `tries` times a second apart.
pub async fn sweep(
    url: &str,
    token: Option<&str>,
    feeds: usize,
    seen: &mut [Seen],
    tries: u32,
) -> (u64, Duration) {
    let started = Instant::now();
    let channel = Channel::from_shared(url.to_string())
        .unwrap()
        .connect()
        .await
        .expect("connect for postings");
    let lanes = 16;
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..lanes {
        let mut client = PostingsClient::with_interceptor(channel.clone(), Bearer::new(token));
        tasks.spawn(async move {
            let mut out: Vec<(usize, Vec<(u32, i64)>)> = Vec::new();
            for i in (lane..feeds).step_by(lanes) {
                let mut items = Vec::new();
                let mut cursor = String::new();
                loop {
                    let mut failed = 0;
                    let page = loop {
                        match client
                            .list_postings(pb::ListPostingsRequest {
                                scope: Some(pb::list_postings_request::Scope::FeedId(format!(
                                    "f{i}"
                                ))),
                                cursor: cursor.clone(),
                                limit: 1000,
                            })
                            .await
                        {
                            Ok(p) => break p.into_inner(),
                            Err(e) if failed < tries => {
                                failed += 1;
                                eprintln!("postings of f{i}: {e}; again");
                                tokio::time::sleep(Duration::from_secs(1)).await;
                            }
                            Err(e) => panic!("postings of f{i}: {e}"),
                        }
                    };
                    if page.postings.is_empty() {
                        break;
                    }
                    for p in page.postings.into_iter().filter_map(|p| p.posting) {
                        // Titles are "Post K of feed I".
                        let k = p
                            .title
                            .strip_prefix("Post ")
                            .and_then(|r| r.split(' ').next())
                            .and_then(|k| k.parse().ok())
                            .unwrap_or_else(|| panic!("f{i}: unexpected title {:?}", p.title));
                        items.push((k, p.discovered_unix_ms));
                    }
                    cursor = page.next_cursor;
                }
                out.push((i, items));
            }
            out
        });
    }
    let mut duplicates = 0;
    while let Some(done) = tasks.join_next().await {
        for (i, items) in done.expect("sweep lane") {
            let mut this_read: HashMap<u32, i64> = HashMap::new();
            for (k, at) in items {
                if this_read.insert(k, at).is_some() {
                    duplicates += 1;
                }
                match seen[i].get(&k) {
                    Some(&first) if first != at => duplicates += 1,
                    Some(_) => {}
                    None => {
                        seen[i].insert(k, at);
                    }
                }
            }
        }
    }
    (duplicates, started.elapsed())
}

/// Postings the soak did not find, by why.
#[derive(Debug, Default)]
pub struct Missing {
    /// A client was served a document holding it (published by the feed's last 200/304 and
    /// among that document's items), yet it is not listed.
    pub lost: u64,
    /// Published after the feed's last fetch.
    pub unfetched: u64,
    /// Scrolled off the document between two fetches.
    pub scrolled: u64,
    /// The first few feeds with lost postings.
    pub lost_feeds: Vec<String>,
}

/// Compares every published posting with what the sweeps saw.
pub fn missing(published: &[Vec<i64>], seen: &[Seen], last_ok: &[i64]) -> Missing {
    let mut m = Missing::default();
    for (i, times) in published.iter().enumerate() {
        let held = times.partition_point(|&t| t <= last_ok[i]);
        let oldest_in_doc = held.saturating_sub(ITEMS_PER_DOC);
        let mut gone = 0;
        for (k, &t) in times.iter().enumerate() {
            if seen[i].contains_key(&(k as u32)) {
                continue;
            }
            if t > last_ok[i] {
                m.unfetched += 1;
            } else if k < oldest_in_doc {
                m.scrolled += 1;
            } else {
                gone += 1;
            }
        }
        if gone > 0 {
            m.lost += gone;
            if m.lost_feeds.len() < 10 {
                m.lost_feeds
                    .push(format!("f{i}: {gone} of {}", times.len()));
            }
        }
    }
    m
}
