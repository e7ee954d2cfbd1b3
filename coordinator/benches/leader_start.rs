//! A new leader's start at scale, on a private etcd: N feeds registered, each with a learned
//! state of `--window-days` of postings at `--posts-per-day` (what a leader of a running
//! service finds), written straight into the store. Then, as leaders would:
//!
//! 1. a leader opens the hub with no stored plan (it must plan before it serves) and runs
//!    its first round;
//! 2. it writes the plan to the store (`hub::stored_plan`);
//! 3. a second leader opens the hub on the same store: the time it takes is the time from
//!    winning the election to serving, with every feed's fetch times from the stored plan.
//!
//! It prints each phase's wall time, the process's resident memory after each open, and
//! etcd's own database size in use (its `Status`) with bytes per feed. With `--window` it then
//! also stores, through the real ingest path, `--posts-per-day` postings a feed a day over
//! the default item-marker retention (30 days; 75-character links, 45-character titles),
//! runs the retention passes (postings older than 7 days go, their markers stay in each
//! feed's ingest record), compacts
//! and defragments etcd, and prints the bytes the steady-state window takes in etcd. Run (docs/BENCHMARKS.md has
//! the figures; needs `etcd` on `PATH` or `ETCD_BIN`):
//! `cargo bench -p kairos-coordinator --bench leader_start -- --feeds 100000`
//! (`--plan-written` skips step 1 and writes a plan of even fetch times instead).

use kairos_coordinator::control::cluster::ClusterConfig;
use kairos_coordinator::control::feedstate::{FeedMeta, FeedState};
use kairos_coordinator::control::relearn::{Budget, PlannerSettings};
use kairos_coordinator::control::FeedSpec;
use kairos_coordinator::hub::{stored_plan, Hub, HubConfig};
use kairos_coordinator::registry::Registry;
use kairos_coordinator::store::etcd::{EtcdBackend, EtcdConfig};
use kairos_coordinator::store::keys::Key;
use kairos_coordinator::store::{KvBackend, Op};
use kairos_coordinator::time::DAY_MS;
use kairos_runtime::clock::SimClock;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Args {
    feeds: usize,
    hosts: usize,
    posts_per_day: f64,
    window_days: f64,
    /// Items in each feed's document (the item ids a state remembers).
    items: usize,
    quota_gib: u64,
    /// Also store the postings of the retention window and measure them (`--window`).
    window: bool,
    /// Write a stored plan of even fetch times straight into the store instead of having a
    /// first leader solve one (`--plan-written`): at a million feeds that round takes longer
    /// than the start this measures, and the next leader reads a plan the same either way.
    plan_written: bool,
}

fn args() -> Args {
    let mut a = Args {
        feeds: 100_000,
        hosts: 500,
        posts_per_day: 1.0,
        window_days: PlannerSettings::default().window_days,
        items: 40,
        quota_gib: 8,
        window: false,
        plan_written: false,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        let num = || -> f64 {
            v.get(i + 1)
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("{} needs a number", v[i]))
        };
        match v[i].as_str() {
            "--feeds" => a.feeds = num() as usize,
            "--hosts" => a.hosts = num() as usize,
            "--posts-per-day" => a.posts_per_day = num(),
            "--window-days" => a.window_days = num(),
            "--items" => a.items = num() as usize,
            "--quota-gib" => a.quota_gib = num() as u64,
            "--window" => {
                a.window = true;
                i += 1;
                continue;
            }
            "--plan-written" => {
                a.plan_written = true;
                i += 1;
                continue;
            }
            // `cargo bench` passes `--bench`.
            "--bench" => {
                i += 1;
                continue;
            }
            other => panic!("unknown argument {other}"),
        }
        i += 2;
    }
    a
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// A small deterministic generator (the figures must not depend on a seed's luck).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 ^ (self.0 >> 29)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// What a feed's learned state holds after `window_days` of fetches at 4 a day.
fn state(i: usize, now: i64, a: &Args, rng: &mut Lcg) -> FeedState {
    let window = (a.window_days * DAY_MS as f64) as i64;
    let n = (a.posts_per_day * a.window_days).round() as usize;
    let mut postings: Vec<i64> = (0..n)
        .map(|_| now - (rng.unit() * window as f64) as i64)
        .collect();
    postings.sort_unstable();
    FeedState {
        etag: format!("\"{:x}-{:x}\"", rng.next() >> 32, rng.next() >> 48),
        last_modified: "Wed, 25 Nov 2026 10:00:00 GMT".into(),
        recent_items: (0..a.items).map(|_| rng.next()).collect(),
        observed_since_ms: Some(now - window),
        last_answered_ms: Some(now - 3 * 3_600_000),
        answered_before_ms: Some(now - 9 * 3_600_000),
        postings_ms: VecDeque::from(postings),
        fetches: (4.0 * a.window_days) as u64,
        usual_new: 0.25,
        doc_capacity: a.items as u32,
        last_slot: Some((now - 3 * 3_600_000, format!("worker-{}", i % 4))),
        meta: FeedMeta {
            title: format!("Feed number {i} of the leader-start bench"),
            site_url: format!("http://127.0.0.1/site/{i}"),
            format: "rss-2.0".into(),
            ..FeedMeta::default()
        }
        .into(),
        ..FeedState::default()
    }
}

fn hub_config() -> HubConfig {
    HubConfig {
        cluster: ClusterConfig::default(),
        planner: PlannerSettings {
            budget: Budget::PerFeedPerDay(4.0),
            ..PlannerSettings::default()
        },
        replan_interval: Duration::from_secs(3600),
        health: Default::default(),
        retention: Default::default(),
        plan_snapshot_every: None,
        private_allowed: vec!["127.0.0.0/8".parse().unwrap()],
    }
}

/// Stores the retention window's postings through the ingest path, prunes them as the
/// retention passes would, and prints what the window takes in etcd once its history is
/// compacted and the database defragmented.
async fn window(a: &Args, store: Arc<EtcdBackend>, endpoint: &str, now: i64, before: i64) {
    use kairos_coordinator::ingest::{Ingestor, PostingRecord};
    use kairos_coordinator::retention::{Cursor, Retention};
    let retention = Retention::default();
    let days = retention.markers.unwrap().as_secs_f64() / 86_400.0;
    let per_feed = (a.posts_per_day * days).round() as usize;
    let t = Instant::now();
    let ingestor = Arc::new(Ingestor::new(store.clone()));
    let mut rng = Lcg(11);
    // Discovery in time order across feeds, as a running service ingests: one report of
    // 64 feeds' postings per step.
    let total = per_feed * a.feeds;
    let mut postings: Vec<(usize, i64)> = (0..total)
        .map(|k| {
            let at = now - ((days * DAY_MS as f64) * (1.0 - k as f64 / total as f64)) as i64;
            (rng.next() as usize % a.feeds, at)
        })
        .collect();
    postings.sort_by_key(|p| p.1);
    for step in postings.chunks(64) {
        let mut by_feed: std::collections::BTreeMap<String, Vec<PostingRecord>> =
            Default::default();
        for &(f, at) in step {
            let item = rng.next();
            by_feed
                .entry(format!("f{f:07}"))
                .or_default()
                .push(PostingRecord {
                    item_id_hash: item,
                    link: Some(format!(
                        "http://127.0.0.1/blog/2026/11/a-posting-about-something-{item:016x}.html"
                    )),
                    title: Some(format!("A posting of feed {f:07}, titled at length")),
                    published_unix_ms: Some(at - 60_000),
                    discovered_unix_ms: at,
                });
        }
        let reports: Vec<(&str, &[PostingRecord])> = by_feed
            .iter()
            .map(|(f, p)| (f.as_str(), p.as_slice()))
            .collect();
        ingestor.ingest_many(&reports).await.expect("ingest");
    }
    let ingested = t.elapsed();
    let all_live = compacted_size(endpoint).await;
    let t = Instant::now();
    let mut cursor = Cursor::default();
    let (mut removed, mut markers) = (0, 0);
    loop {
        let p = ingestor
            .prune(now, retention, &mut cursor, 5_000)
            .await
            .expect("prune");
        removed += p.postings;
        markers += p.markers;
        if p.postings < 5_000 && p.markers < 5_000 {
            break;
        }
    }
    let pruned = t.elapsed();
    let full = db_size(endpoint).await;
    let live = compacted_size(endpoint).await;
    let kept = total as u64 - removed;
    let per_day = a.posts_per_day * a.feeds as f64;
    // Every posting live, then `kept` live: the difference is `removed` postings' records
    // and discovery entries; what is left beyond the kept postings is the feeds' ingest
    // records (next number, markers of the last 30 days).
    let posting = (all_live - live) as f64 / removed.max(1) as f64;
    let records = (live - before) as f64 - kept as f64 * posting;
    println!(
        "window: {total} postings ingested in {:.1} s, {removed} past 7 days pruned in {:.1} s ({markers} markers of an older layout); {kept} postings kept",
        ingested.as_secs_f64(),
        pruned.as_secs_f64()
    );
    println!(
        "etcd db size: every posting live {:.1} MiB; after the retention passes {:.1} MiB before compaction, {:.1} MiB compacted and defragmented: {posting:.0} B per posting (record, discovery entry), {:.0} B per feed of ingest record ({:.0} B per marker)",
        all_live as f64 / 1048576.0,
        full as f64 / 1048576.0,
        live as f64 / 1048576.0,
        records / a.feeds as f64,
        records / total as f64,
    );
    println!(
        "the window takes {:.1} MiB = {:.0} B per posting a day (7 days of postings, 30 of markers)",
        (live - before) as f64 / 1048576.0,
        (live - before) as f64 / per_day
    );
}

/// etcd's database size once its history is compacted away and the file defragmented:
/// the live data alone.
async fn compacted_size(endpoint: &str) -> i64 {
    let mut c = etcd_client::Client::connect([endpoint], None)
        .await
        .expect("etcd client");
    let rev = c.get("x", None).await.unwrap().header().unwrap().revision();
    c.compact(
        rev,
        Some(etcd_client::CompactionOptions::new().with_physical()),
    )
    .await
    .expect("compact");
    c.defragment().await.expect("defragment");
    db_size(endpoint).await
}

/// A leader's hub opened on `store`, and how long opening took.
async fn open(store: &Arc<EtcdBackend>) -> (Hub<EtcdBackend>, Duration) {
    let t = Instant::now();
    let hub = Hub::open(store.clone(), SimClock::real(), hub_config())
        .await
        .expect("open");
    let took = t.elapsed();
    let phases: Vec<String> = hub
        .open_times()
        .phases()
        .iter()
        .map(|(name, d)| format!("{name} {:.2} s", d.as_secs_f64()))
        .collect();
    println!("  open by phase: {}", phases.join(", "));
    (hub, took)
}

async fn db_size(endpoint: &str) -> i64 {
    status(endpoint).await.0
}

/// etcd's database in use (its pages that hold data, `dbSizeInUse`) and the file's size
/// (which grows in 16 MiB steps, too coarse for bytes per record at 10,000 feeds).
async fn status(endpoint: &str) -> (i64, i64) {
    let mut c = etcd_client::Client::connect([endpoint], None)
        .await
        .expect("etcd client");
    let s = c.status().await.expect("etcd status");
    (s.raft_used_db_size(), s.db_size())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let a = args();
    let Some(bin) = kairos_tests::etcd::etcd_binary() else {
        eprintln!("no etcd binary (install etcd-server or set ETCD_BIN)");
        std::process::exit(2);
    };
    let dir = std::env::temp_dir().join(format!("kairos-leader-start-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let etcd = kairos_tests::etcd::EtcdCluster::start_with_quota(&dir, a.quota_gib << 30)
        .expect("etcd starts");
    let endpoint = etcd.endpoints[0].clone();
    println!(
        "etcd {} on {endpoint}; {} feeds over {} hosts, {} postings a feed a day over {} days, {} items a document",
        bin.display(),
        a.feeds,
        a.hosts,
        a.posts_per_day,
        a.window_days,
        a.items
    );
    let store = Arc::new(
        EtcdBackend::connect(&EtcdConfig {
            endpoints: vec![endpoint.clone()],
            ..EtcdConfig::default()
        })
        .await
        .expect("connect"),
    );
    let empty = db_size(&endpoint).await;

    // The registry, through the registry's own checks, 32 feeds in flight.
    let t = Instant::now();
    let registry = Arc::new(
        Registry::new(store.clone()).with_private_allowed(vec!["127.0.0.0/8".parse().unwrap()]),
    );
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (registry, next, hosts, feeds) = (registry.clone(), next.clone(), a.hosts, a.feeds);
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= feeds {
                    break;
                }
                let h = i % hosts;
                let url = format!(
                    "http://127.{}.{}.{}:8080/feed/{i}.xml",
                    1 + h / 62_500,
                    (h / 250) % 250,
                    h % 250 + 1
                );
                registry
                    .add_feed(Some(&format!("f{i:07}")), &url, 1.0)
                    .await
                    .expect("add feed");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let registered = t.elapsed();
    let after_registry = db_size(&endpoint).await;

    // The learned state, in batches of 64 feeds, 8 batches in flight.
    let t = Instant::now();
    let now = SimClock::real().now_ms();
    let mut rng = Lcg(7);
    let mut state_bytes = 0usize;
    let mut batches = Vec::new();
    let mut ops = Vec::new();
    for i in 0..a.feeds {
        let v = serde_json::to_vec(&state(i, now, &a, &mut rng)).unwrap();
        state_bytes += v.len();
        ops.push(Op::Put(
            Key::Learned(&format!("f{i:07}")).encode().unwrap(),
            v,
        ));
        if ops.len() == 64 || i + 1 == a.feeds {
            batches.push(std::mem::take(&mut ops));
        }
    }
    let batches = Arc::new(std::sync::Mutex::new(batches));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (store, batches) = (store.clone(), batches.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let Some(b) = batches.lock().unwrap().pop() else {
                    break;
                };
                store.batch(b).await.expect("write learned state");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let learned = t.elapsed();
    let after_learned = compacted_size(&endpoint).await;
    let per_feed = |b: i64| b as f64 / a.feeds as f64;
    println!(
        "written: registry in {:.1} s, learned state in {:.1} s ({:.0} B per feed as stored)",
        registered.as_secs_f64(),
        learned.as_secs_f64(),
        state_bytes as f64 / a.feeds as f64
    );
    println!(
        "etcd db size: empty {:.1} MiB, with the registry {:.1} MiB ({:.0} B per feed), with the learned state {:.1} MiB ({:.0} B per feed in all)",
        empty as f64 / 1048576.0,
        after_registry as f64 / 1048576.0,
        per_feed(after_registry - empty),
        after_learned as f64 / 1048576.0,
        per_feed(after_learned - empty)
    );

    if a.window {
        window(&a, store.clone(), &endpoint, now, after_learned).await;
    }

    let (specs, per_day) = if a.plan_written {
        // Four fetches a day at even times, each feed shifted by its number.
        let origin = now - now.rem_euclid(DAY_MS);
        let specs: std::collections::BTreeMap<String, FeedSpec> = (0..a.feeds)
            .map(|i| {
                let id = format!("f{i:07}");
                let shift = (i % 21_600) as f64;
                let spec = FeedSpec {
                    id: id.clone(),
                    offsets_seconds: (0..4).map(|k| k as f64 * 21_600.0 + shift).collect(),
                    period_seconds: 86_400.0,
                    origin_unix_ms: origin,
                    ..FeedSpec::default()
                };
                (id, spec)
            })
            .collect();
        (specs, 4.0 * a.feeds as f64)
    } else {
        // A leader with no stored plan: open, then the first round before it may serve.
        let rss0 = rss_mib();
        let (hub, opened) = open(&store).await;
        let rss1 = rss_mib();
        let t = Instant::now();
        let outcome = hub.replan().await.expect("first round");
        let round = t.elapsed();
        let rss2 = rss_mib();
        println!(
            "leader without a stored plan: open {:.1} s (RSS {rss0:.0} -> {rss1:.0} MiB), first round {:.1} s (RSS {rss2:.0} MiB): serves after {:.1} s",
            opened.as_secs_f64(),
            round.as_secs_f64(),
            (opened + round).as_secs_f64()
        );
        drop(hub);
        (outcome.specs, outcome.budget_per_day)
    };

    let t = Instant::now();
    let chunks = stored_plan::encode(&specs);
    let bytes: usize = chunks.iter().map(Vec::len).sum();
    let meta = stored_plan::write(
        store.as_ref(),
        chunks,
        specs.len(),
        per_day,
        now,
        Default::default(),
        &Default::default(),
    )
    .await
    .expect("store the plan");
    println!(
        "plan stored{}: {} feeds, {} chunks, {:.1} MiB ({:.0} B per feed) in {:.1} s",
        if a.plan_written {
            " (written straight, even times)"
        } else {
            ""
        },
        meta.feeds,
        meta.chunks,
        bytes as f64 / 1048576.0,
        bytes as f64 / a.feeds as f64,
        t.elapsed().as_secs_f64()
    );
    drop(specs);
    tokio::time::sleep(Duration::from_millis(500)).await;

    // The next leader: it serves the stored plan as soon as it has opened.
    let rss3 = rss_mib();
    let (hub, opened) = open(&store).await;
    let served = hub.started_on_stored_plan().map_or(0, |s| s.0);
    println!(
        "next leader: open {:.1} s with {served} feeds' fetch times from the stored plan (RSS {rss3:.0} -> {:.0} MiB)",
        opened.as_secs_f64(),
        rss_mib()
    );
    let (in_use, file) = status(&endpoint).await;
    println!(
        "etcd at the end: {:.1} MiB in use, the file {:.1} MiB",
        in_use as f64 / 1048576.0,
        file as f64 / 1048576.0
    );
    assert_eq!(served, a.feeds, "every feed is served from the stored plan");
    drop(hub);
    drop(etcd);
    let _ = std::fs::remove_dir_all(&dir);
}
