//! Every stored fuzz input — the seeds in `fuzz/corpus/TARGET/`, past findings in
//! `fuzz/regressions/TARGET/`, and for `feed_items` all of `../shared/feeds-corpus/` — through
//! its harness on stable, so a fixed crash stays fixed without a nightly toolchain.

use kairos_proto::v1 as pb;
use prost::Message;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The inputs stored for `target`.
fn inputs(target: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    files_under(&root().join("corpus").join(target), &mut out);
    files_under(&root().join("regressions").join(target), &mut out);
    out.sort();
    out
}

fn replay(target: &str) -> usize {
    let files = inputs(target);
    for f in &files {
        let data = std::fs::read(f).unwrap();
        // A panic names the input that caused it.
        let r = std::panic::catch_unwind(|| kairos_fuzz::run(target, &data));
        assert!(r.is_ok(), "{target} panicked on {}", f.display());
    }
    files.len()
}

#[test]
fn feed_documents_from_the_shared_corpus_and_the_seeds() {
    let n = replay("feed_items");
    let mut shared = Vec::new();
    files_under(&root().join("../../shared/feeds-corpus"), &mut shared);
    assert!(
        shared.len() > 1_800,
        "../shared/feeds-corpus beside the project ({} files found)",
        shared.len()
    );
    for f in &shared {
        kairos_fuzz::feed_items(&std::fs::read(f).unwrap());
    }
    assert!(n + shared.len() > 1_800);
}

#[test]
fn report_split_seeds_and_findings() {
    assert!(replay("report_split") >= 3);
}

#[test]
fn opml_seeds_and_findings() {
    assert!(replay("opml_import") >= 3);
}

#[test]
fn trace_seeds_and_findings() {
    assert!(replay("trace_csv") >= 3);
}

/// Report streams the seeds are made of: fetches of owned and unowned feeds, postings with
/// and without dates, accesses, an empty message.
fn report_seeds() -> Vec<(&'static str, Vec<pb::ReportMessage>)> {
    let posting = |h: u64, title: &str| pb::Posting {
        item_id_hash: h,
        link: format!("https://h0.fuzz.invalid/p/{h}"),
        title: title.into(),
        published_unix_ms: h.is_multiple_of(2).then_some(1_700_000_000_000),
        discovered_unix_ms: 1_700_000_060_000,
    };
    let fetch = |seq: u64, feed: &str, postings: Vec<pb::Posting>| pb::ReportMessage {
        worker_id: "w".into(),
        seq,
        body: Some(pb::report_message::Body::Fetch(pb::FetchReport {
            feed_id: feed.into(),
            finished_unix_ms: 1_700_000_060_000,
            new_postings: postings,
            etag: "\"v1\"".into(),
            ..Default::default()
        })),
        ..Default::default()
    };
    let access = |seq: u64| pb::ReportMessage {
        worker_id: "w".into(),
        seq,
        body: Some(pb::report_message::Body::Accesses(pb::AccessBatch {
            events: vec![
                pb::AccessEvent {
                    user_id: "u".into(),
                    feed_id: "f0".into(),
                    unix_ms: 1_700_000_100_000,
                },
                pb::AccessEvent {
                    user_id: "u".into(),
                    feed_id: String::new(),
                    unix_ms: 1_700_000_200_000,
                },
            ],
        })),
        ..Default::default()
    };
    vec![
        (
            "fetch-owned",
            vec![fetch(1, "f0", vec![posting(1, "one"), posting(2, "two")])],
        ),
        (
            "fetch-mixed",
            vec![
                fetch(2, "f1", vec![posting(3, "")]),
                fetch(3, "nobody", vec![posting(4, "x")]),
                fetch(4, "f2", vec![]),
            ],
        ),
        (
            "accesses",
            vec![access(5), fetch(6, "f0", vec![posting(1, "again")])],
        ),
        (
            "empty-message",
            vec![pb::ReportMessage {
                worker_id: "w".into(),
                seq: 7,
                ..Default::default()
            }],
        ),
    ]
}

fn encode(msgs: &[pb::ReportMessage]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in msgs {
        m.encode_length_delimited(&mut out).unwrap();
    }
    out
}

/// The committed report seeds are the encodings of [`report_seeds`] (so a proto change that
/// would leave the fuzzer starting from stale bytes fails here). `KAIROS_BLESS=1` rewrites
/// them.
#[test]
fn report_seeds_are_current_and_replay() {
    let dir = root().join("corpus/report_ingest");
    for (name, msgs) in report_seeds() {
        let bytes = encode(&msgs);
        let path = dir.join(name);
        if std::env::var_os("KAIROS_BLESS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let stored = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with KAIROS_BLESS=1)", path.display()));
        assert_eq!(
            stored,
            bytes,
            "{} is stale (run with KAIROS_BLESS=1)",
            path.display()
        );
    }
    assert!(replay("report_ingest") >= 4);
}
