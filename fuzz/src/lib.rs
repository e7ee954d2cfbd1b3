//! Harnesses over the inputs strangers control: a feed document a worker fetched, an OPML
//! file a user uploads, a trace folder an operator loads, and the report stream a worker
//! sends. Each takes raw bytes, must never panic or hang, and checks the invariants that
//! are cheap to state (an OPML import is all or nothing; an ack never claims more than was
//! sent; a split report keeps every posting, in order, within the message bounds).
//!
//! The libFuzzer binaries in `fuzz_targets/` call these (`cargo +nightly fuzz run
//! --features libfuzzer TARGET`); on stable, `tests/replay.rs` runs them over every stored
//! seed and past finding, so a regression fails the ordinary test suite.

use kairos_coordinator::control::cluster::ClusterConfig;
use kairos_coordinator::hub::{Hub, HubConfig};
use kairos_coordinator::registry::Registry;
use kairos_coordinator::store::memory::MemoryBackend;
use kairos_coordinator::trace::Trace;
use kairos_proto::v1 as pb;
use kairos_runtime::clock::SimClock;
use prost::Message;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The names of the harnesses, as `fuzz_targets/NAME.rs` and `corpus/NAME/`.
pub const TARGETS: [&str; 5] = [
    "feed_items",
    "opml_import",
    "trace_csv",
    "report_ingest",
    "report_split",
];

/// Runs the harness called `name` on `data`.
pub fn run(name: &str, data: &[u8]) {
    match name {
        "feed_items" => feed_items(data),
        "opml_import" => opml_import(data),
        "trace_csv" => trace_csv(data),
        "report_ingest" => report_ingest(data),
        "report_split" => report_split(data),
        other => panic!("no harness named {other}"),
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime")
    })
}

/// A fetched body through the worker's parser (format sniffing, encodings, RSS/Atom/JSON,
/// item identity and dates).
pub fn feed_items(data: &[u8]) {
    let first = kairos_worker::parse::parse(data);
    if let Ok(feed) = &first {
        // Item identity is what dedupe rests on: the same bytes give the same ids, once each.
        let again = kairos_worker::parse::parse(data).expect("parsed once, parses again");
        let ids: Vec<u64> = feed.items.iter().map(|i| i.id_hash).collect();
        assert_eq!(
            ids,
            again.items.iter().map(|i| i.id_hash).collect::<Vec<_>>()
        );
        let mut unique = ids.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "an item id appears twice");
    }
}

/// An uploaded OPML document, imported for a user into a fresh registry: either it is
/// refused and nothing is stored, or what it reports added is what the registry holds.
pub fn opml_import(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    runtime().block_on(async {
        let registry = Registry::new(Arc::new(MemoryBackend::new()));
        registry
            .add_user("u", 1.0)
            .await
            .expect("a fresh registry takes a user");
        match registry.import_opml(&text, Some("u")).await {
            Ok(out) => {
                let feeds = registry.all_feeds().await.expect("feeds readable");
                assert_eq!(feeds.len(), out.feeds_added as usize);
                assert_eq!(out.added_ids.len(), out.feeds_added as usize);
                let subs = registry.subscriptions("u").await.expect("subs readable");
                assert_eq!(subs.len(), out.subscriptions_added as usize);
            }
            Err(_) => {
                let feeds = registry.all_feeds().await.expect("feeds readable");
                assert!(
                    feeds.is_empty(),
                    "a refused import stored {} feeds",
                    feeds.len()
                );
            }
        }
    });
}

/// The files of a trace folder, in the order a fuzz input carries them (NUL-separated).
const TRACE_FILES: [&str; 5] = [
    "feeds.csv",
    "postings.csv",
    "users.csv",
    "subscriptions.csv",
    "accesses.csv",
];

/// What a fuzz process's scratch trace folder is named, before its process id.
const SCRATCH_PREFIX: &str = "kairos-fuzz-trace-";

/// Removes the scratch folders of fuzz processes that are gone: a fuzzer ends with
/// `exit`, which runs no destructor, so each process's folder stays behind. On Linux a
/// process is alive while `/proc/PID` is there; elsewhere nothing is removed.
fn remove_dead_scratch(tmp: &std::path::Path) {
    if !cfg!(target_os = "linux") {
        return;
    }
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(SCRATCH_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A trace folder: the input's NUL-separated parts become `feeds.csv`, `postings.csv`,
/// `users.csv`, `subscriptions.csv` and `accesses.csv` (missing parts, missing files).
pub fn trace_csv(data: &[u8]) {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        remove_dead_scratch(&std::env::temp_dir());
        let d = std::env::temp_dir().join(format!("{SCRATCH_PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("fuzz scratch directory");
        d
    });
    let mut parts = data.split(|&b| b == 0);
    for name in TRACE_FILES {
        let path = dir.join(name);
        match parts.next() {
            Some(p) => std::fs::write(&path, p).expect("scratch write"),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    if let Ok(t) = Trace::load(dir) {
        // What loaded is self-consistent: postings per loaded feed, times finite and in
        // order, accesses naming loaded users and feeds.
        assert_eq!(t.postings.len(), t.feeds.len());
        for times in &t.postings {
            assert!(times.iter().all(|ts| ts.is_finite() && *ts >= 0.0));
            assert!(times.windows(2).all(|w| w[0] <= w[1]));
        }
        assert_eq!(t.subscriptions.len(), t.users.len());
        for a in &t.accesses {
            assert!((a.user as usize) < t.users.len());
            assert!(a.feed.is_none_or(|f| (f as usize) < t.feeds.len()));
            assert!(a.ts.is_finite());
        }
        // Rows come in any order; what loaded is in time order, and ends at its latest time.
        assert!(t.accesses.windows(2).all(|w| w[0].ts <= w[1].ts));
        let latest = t
            .postings
            .iter()
            .flatten()
            .chain(t.accesses.iter().map(|a| &a.ts))
            .fold(0.0f64, |m, &x| m.max(x));
        assert_eq!(t.end_ts, latest);
        assert!(
            t.end_ts < kairos_coordinator::trace::MAX_TRACE_DAYS * kairos_coordinator::time::DAY_S
        );
    }
}

/// One coordinator hub, shared by every `report_ingest` input (as the live one is shared
/// by every worker's stream): feeds `f0`–`f2` owned by worker `w`, user `u` on `f0`.
fn hub() -> &'static (Hub<MemoryBackend>, String) {
    static HUB: OnceLock<(Hub<MemoryBackend>, String)> = OnceLock::new();
    HUB.get_or_init(|| {
        runtime().block_on(async {
            let hub = Hub::open(
                Arc::new(MemoryBackend::new()),
                SimClock::manual(1_700_000_000_000),
                HubConfig {
                    cluster: ClusterConfig {
                        lease: Duration::from_secs(1 << 30),
                        heartbeat: Duration::from_secs(60),
                        ..ClusterConfig::default()
                    },
                    planner: Default::default(),
                    replan_interval: Duration::from_secs(3600),
                    health: Default::default(),
                    retention: Default::default(),
                    plan_snapshot_every: None,
                    private_allowed: Vec::new(),
                },
            )
            .await
            .expect("hub opens on an empty store");
            for f in 0..3 {
                hub.registry()
                    .add_feed(
                        Some(&format!("f{f}")),
                        &format!("http://h{f}.fuzz.invalid/feed"),
                        1.0,
                    )
                    .await
                    .expect("feed added");
            }
            hub.registry().add_user("u", 1.0).await.expect("user added");
            hub.registry()
                .subscribe("u", "f0")
                .await
                .expect("subscribed");
            let (worker, _) = hub.register("w", 1.0).await.expect("worker registers");
            hub.heartbeat(&worker, 0).await.expect("heartbeat");
            hub.replan().await.expect("first plan");
            (hub, worker)
        })
    })
}

/// Report messages as a worker's stream would carry them (each length-delimited protobuf),
/// handed to the hub under the session that owns the feeds.
pub fn report_ingest(data: &[u8]) {
    let mut buf = data;
    let mut msgs = Vec::new();
    while !buf.is_empty() && msgs.len() < 512 {
        match pb::ReportMessage::decode_length_delimited(&mut buf) {
            Ok(m) => msgs.push(m),
            Err(_) => break, // the gRPC layer refuses an undecodable frame
        }
    }
    if msgs.is_empty() {
        return;
    }
    let max_seq = msgs.iter().map(|m| m.seq).max().unwrap_or(0);
    let sent = msgs.len();
    let (hub, worker) = hub();
    runtime().block_on(async {
        if let Ok(ack) = hub.handle_reports(worker, msgs).await {
            assert_eq!(ack.acked_seq, max_seq);
            assert!(ack.rejected.len() <= sent);
        }
    });
}

/// A worker's fetch report through the splitting that keeps report messages within their
/// bounds: the input is a `FetchReport` when it decodes as one, else lines taken as postings'
/// titles and links (repeated to reach many postings). Every part must pass the
/// coordinator's check, stay under the message size, and together carry every posting once,
/// in order; only the first part is the fetch.
pub fn report_split(data: &[u8]) {
    use kairos_proto::bounds;
    let report = pb::FetchReport::decode(data).unwrap_or_else(|_| {
        let lines: Vec<String> = data
            .split(|&b| b == b'\n')
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        let copies = data.first().map_or(1, |&b| 1 + b as usize * 8);
        pb::FetchReport {
            feed_id: "f".into(),
            new_postings: (0..copies * lines.len())
                .map(|i| pb::Posting {
                    item_id_hash: i as u64,
                    title: lines[i % lines.len()].repeat(1 + i % 7),
                    link: lines[(i + 1) % lines.len()].clone(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    });
    let ids: Vec<u64> = report.new_postings.iter().map(|p| p.item_id_hash).collect();
    let parts = bounds::split_fetch(report);
    assert!(!parts.is_empty());
    let mut got = Vec::with_capacity(ids.len());
    for (i, p) in parts.iter().enumerate() {
        assert_eq!(p.continuation, i > 0, "only the first part is the fetch");
        assert!(
            p.encoded_len() <= bounds::MAX_MESSAGE_BYTES + 64,
            "part {i} too large"
        );
        let body = pb::report_message::Body::Fetch(p.clone());
        assert_eq!(bounds::check_message(&body), Ok(()), "part {i} refused");
        got.extend(p.new_postings.iter().map(|p| p.item_id_hash));
    }
    assert_eq!(got, ids, "postings lost or reordered");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn scratch_folders_of_gone_processes_are_removed_and_live_ones_kept() {
        let tmp =
            std::env::temp_dir().join(format!("kairos-fuzz-scratch-test-{}", std::process::id()));
        // Above any pid Linux hands out (pid_max is at most 2^22).
        let gone = tmp.join(format!("{SCRATCH_PREFIX}{}", (1u32 << 22) + 17));
        let live = tmp.join(format!("{SCRATCH_PREFIX}{}", std::process::id()));
        let other = tmp.join("kairos-fuzz-trace-notapid");
        for d in [&gone, &live, &other] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("feeds.csv"), "x").unwrap();
        }
        remove_dead_scratch(&tmp);
        let kept = (live.exists(), other.exists(), gone.exists());
        std::fs::remove_dir_all(&tmp).unwrap();
        assert_eq!(kept, (true, true, false));
    }
}
