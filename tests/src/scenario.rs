//! The set-up the end-to-end tests and soaks share: one time-compressed clock for every
//! process, a feed farm whose URLs and publication times the test reads back, and worker
//! command lines. A test says what differs (the farm's size and seed, the coordinator's
//! store and flags, each worker's extras) and the rest is the same everywhere:
//!
//! ```no_run
//! # use kairos_tests::{scenario::{Clock, Farm, FarmSpec, Worker}, TempDir};
//! let dir = TempDir::new("example");
//! let clock = Clock::new(5760.0);
//! let farm = Farm::start(dir.path(), &FarmSpec { feeds: 24, seed: 11, ..FarmSpec::default() }, &clock, &[]);
//! let _w1 = Worker::new("w1", "http://127.0.0.1:50051", &clock).start(dir.path());
//! # let _ = farm.urls;
//! ```

use crate::{spawn_until, unix_ms, Child};
use std::collections::BTreeMap;
use std::path::Path;

/// The simulated start every scenario's clock begins at: 2026-03-02T00:00:00Z (a Monday).
pub const CLOCK_START: &str = "2026-03-02T00:00:00Z";
const CLOCK_START_MS: i64 = 1_772_409_600_000;

/// One compressed clock shared by every process of a scenario: simulated time runs `scale`
/// times faster than wall time from [`CLOCK_START`], anchored at the wall time it was made.
#[derive(Clone, Debug)]
pub struct Clock {
    /// Simulated seconds per wall second.
    pub scale: f64,
    /// The wall time (Unix ms) the simulated start is anchored at.
    pub anchor_ms: i64,
}

impl Clock {
    /// A clock anchored now.
    pub fn new(scale: f64) -> Self {
        Clock {
            scale,
            anchor_ms: unix_ms(),
        }
    }

    /// The flags that put a binary on this clock.
    pub fn args(&self) -> Vec<String> {
        [
            "--time-scale",
            &self.scale.to_string(),
            "--clock-start",
            CLOCK_START,
            "--clock-anchor-unix-ms",
            &self.anchor_ms.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// Simulated time now, Unix ms.
    pub fn now_ms(&self) -> i64 {
        CLOCK_START_MS + ((unix_ms() - self.anchor_ms) as f64 * self.scale) as i64
    }

    /// The simulated day (from [`CLOCK_START`], fractional) of simulated time `sim_ms`.
    pub fn day_of(sim_ms: i64) -> f64 {
        (sim_ms - CLOCK_START_MS) as f64 / 86_400_000.0
    }
}

/// What a scenario's farm serves.
#[derive(Clone, Debug)]
pub struct FarmSpec {
    /// Feeds served.
    pub feeds: usize,
    /// Hosts they are spread over.
    pub hosts: usize,
    /// Postings a feed a day.
    pub posts_per_day: f64,
    /// Simulated days during which the feeds post.
    pub days: f64,
    /// Items a document carries at most.
    pub items_per_doc: usize,
    /// The draw's seed.
    pub seed: u64,
}

impl Default for FarmSpec {
    /// The small farm of the end-to-end tests: 24 feeds on 6 hosts, a posting an hour for
    /// half a simulated day, documents long enough that nothing scrolls off.
    fn default() -> Self {
        FarmSpec {
            feeds: 24,
            hosts: 6,
            posts_per_day: 24.0,
            days: 0.5,
            items_per_doc: 500,
            seed: 11,
        }
    }
}

/// A running farm and what it will publish.
pub struct Farm {
    /// The process (killed on drop).
    pub child: Child,
    /// Each feed's URL, feed `i` at index `i`.
    pub urls: Vec<String>,
    /// Each feed's publication times (simulated Unix ms), by feed index.
    pub published: BTreeMap<usize, Vec<i64>>,
    /// The URL of its WebSub hub, when `--hub-share` was among the extra flags.
    pub hub: Option<String>,
}

impl Farm {
    /// Starts `kairos-farm` on `clock` with `spec` and `extra` flags (its log in `dir`) and
    /// reads back its URLs and publication times.
    pub fn start(dir: &Path, spec: &FarmSpec, clock: &Clock, extra: &[&str]) -> Farm {
        let urls_file = dir.join("urls.txt");
        let postings_file = dir.join("postings.csv");
        let mut args: Vec<String> = vec![
            "--feeds".into(),
            spec.feeds.to_string(),
            "--hosts".into(),
            spec.hosts.to_string(),
            "--posts-per-day".into(),
            spec.posts_per_day.to_string(),
            "--days".into(),
            spec.days.to_string(),
            "--items-per-doc".into(),
            spec.items_per_doc.to_string(),
            "--seed".into(),
            spec.seed.to_string(),
            "--urls-out".into(),
            urls_file.display().to_string(),
            "--postings-out".into(),
            postings_file.display().to_string(),
        ];
        args.extend(clock.args());
        args.extend(extra.iter().map(|s| s.to_string()));
        let with_hub = extra.contains(&"--hub-share");
        let wait: &[&str] = if with_hub {
            &["kairos-farm ready", "kairos-farm hub on "]
        } else {
            &["kairos-farm ready"]
        };
        let (child, found) = spawn_until("kairos-farm", &refs(&args), &dir.join("farm.log"), wait);
        let hub = found.get(1).cloned();
        let urls: Vec<String> = std::fs::read_to_string(&urls_file)
            .expect("the farm wrote its URLs")
            .lines()
            .map(String::from)
            .collect();
        assert_eq!(urls.len(), spec.feeds, "the farm serves every feed asked");
        let mut published: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
        for line in std::fs::read_to_string(&postings_file)
            .expect("the farm wrote its postings")
            .lines()
        {
            let (f, t) = line.split_once(',').expect("feed,time");
            published
                .entry(f.parse().expect("a feed index"))
                .or_default()
                .push(t.parse().expect("a time"));
        }
        Farm {
            child,
            urls,
            published,
            hub,
        }
    }

    /// Postings the farm publishes in all.
    pub fn postings(&self) -> usize {
        self.published.values().map(Vec::len).sum()
    }

    /// When the farm last answered each feed with a document or a 304 (simulated Unix ms,
    /// by feed index; feeds never answered are absent), from its `/farm/fetched`: every
    /// posting published by then was in a document a worker held. Empty when the farm
    /// does not answer.
    pub fn last_served(&self) -> BTreeMap<usize, i64> {
        let Some(host) = self
            .urls
            .first()
            .and_then(|u| u.strip_prefix("http://"))
            .and_then(|u| u.split('/').next())
        else {
            return BTreeMap::new();
        };
        let answer = crate::http_get(host, "/farm/fetched").unwrap_or_default();
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
        body.lines()
            .filter_map(|l| {
                let (i, t) = l.split_once(' ')?;
                Some((i.parse().ok()?, t.parse().ok()?))
            })
            .collect()
    }
}

/// A worker's command line: `kairos-worker run` against one or more coordinator
/// addresses (comma-separated), on the scenario's clock, allowed to fetch the farm on
/// loopback, with a short host gap so a test's few hosts do not pace it.
#[derive(Clone, Debug)]
pub struct Worker {
    /// Its name (and log file's).
    pub name: String,
    /// The whole command line after the binary.
    pub args: Vec<String>,
}

impl Worker {
    /// The usual worker.
    pub fn new(name: &str, coordinators: &str, clock: &Clock) -> Self {
        let mut args: Vec<String> = [
            "run",
            "--coordinator",
            coordinators,
            "--name",
            name,
            "--allow-private",
            "127.0.0.0/8",
            "--host-gap",
            "5ms",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(clock.args());
        Worker {
            name: name.into(),
            args,
        }
    }

    /// The same with `extra` flags added.
    pub fn with(mut self, extra: &[&str]) -> Self {
        self.args.extend(extra.iter().map(|s| s.to_string()));
        self
    }

    /// Starts it, its stderr to `dir/NAME.log`, without waiting for anything.
    pub fn start(&self, dir: &Path) -> Child {
        let mut cmd = std::process::Command::new(crate::bin("kairos-worker"));
        cmd.args(&self.args)
            .stdout(std::process::Stdio::null())
            .stderr(
                std::fs::File::create(dir.join(format!("{}.log", self.name)))
                    .expect("worker log file"),
            );
        Child(cmd.spawn().expect("start kairos-worker"))
    }

    /// Starts it and waits for a line of its stdout starting with each of `wait_for`
    /// ([`spawn_until`]).
    pub fn start_until(&self, dir: &Path, wait_for: &[&str]) -> (Child, Vec<String>) {
        spawn_until(
            "kairos-worker",
            &refs(&self.args),
            &dir.join(format!("{}.log", self.name)),
            wait_for,
        )
    }
}

/// `&str`s of owned arguments.
pub fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}
