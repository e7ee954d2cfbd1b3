//! Kairos' parser next to a mainstream reader library over the whole shared corpus
//! (`../shared/feeds-corpus/`): Python's `feedparser` (installed by .ci/run) reads every
//! document, and wherever it reads one cleanly (no `bozo` flag) Kairos must find at least as
//! many items, unless the document is listed in `tests/reference/exceptions.tsv` with the
//! reason. A listed document Kairos now reads in full fails the test too, so the list only
//! shrinks. Skipped without python3 and feedparser, except under CI.

use kairos_worker::parse::parse;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// feedparser's reading of each document: (clean, entries).
fn reference(corpus: &Path) -> Option<BTreeMap<String, (bool, usize)>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/feedparser_counts.py");
    let out = Command::new("python3").arg(script).arg(corpus).output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        other => {
            assert!(
                std::env::var_os("CI").is_none(),
                "python3 with feedparser is needed (.ci/run installs it): {other:?}"
            );
            eprintln!("skipped: python3 with feedparser is not installed ({other:?})");
            return None;
        }
    };
    let text = String::from_utf8(out.stdout).expect("utf-8 paths");
    Some(
        text.lines()
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                assert_eq!(f.len(), 3, "reference line {l:?}");
                (f[0].to_string(), (f[1] == "1", f[2].parse().unwrap()))
            })
            .collect(),
    )
}

/// Listed documents and why Kairos reads fewer items from them.
fn exceptions() -> BTreeMap<String, String> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/exceptions.tsv");
    std::fs::read_to_string(file)
        .expect("tests/reference/exceptions.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (path, reason) = l.split_once('\t').expect("path<TAB>reason");
            assert!(!reason.trim().is_empty(), "{path}: give the reason");
            (path.to_string(), reason.to_string())
        })
        .collect()
}

#[test]
fn kairos_reads_every_item_the_reference_reads_cleanly() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/feeds-corpus");
    let Some(reference) = reference(&corpus) else {
        return;
    };
    assert_eq!(reference.len(), 1930, "every corpus document was read");
    let listed = exceptions();
    let (mut compared, mut agree, mut more) = (0, 0, 0);
    let mut fewer = Vec::new();
    let mut stale = Vec::new();
    for (path, &(clean, want)) in &reference {
        if !clean || want == 0 {
            continue;
        }
        compared += 1;
        let body = std::fs::read(corpus.join(path)).unwrap();
        let got = parse(&body).map_or(0, |f| f.items.len());
        match (got.cmp(&want), listed.contains_key(path)) {
            (std::cmp::Ordering::Less, false) => fewer.push(format!("{path}: {got} of {want}")),
            (std::cmp::Ordering::Less, true) => {}
            (_, true) => stale.push(path.clone()),
            (std::cmp::Ordering::Equal, false) => agree += 1,
            (std::cmp::Ordering::Greater, false) => more += 1,
        }
    }
    eprintln!(
        "{compared} documents the reference reads cleanly with items: {agree} same count, \
         {more} more in Kairos, {} fewer (listed: {}), {} unlisted",
        listed.len() + fewer.len(),
        listed.len(),
        fewer.len()
    );
    assert!(compared > 800, "only {compared} documents compared");
    assert!(
        fewer.is_empty(),
        "Kairos reads fewer items than the reference from {} documents: {fewer:#?}",
        fewer.len()
    );
    assert!(
        stale.is_empty(),
        "listed as exceptions but now read in full (remove them): {stale:#?}"
    );
    // Every listed document is one the reference reads cleanly.
    for path in listed.keys() {
        assert!(
            reference.get(path).is_some_and(|&(c, n)| c && n > 0),
            "{path} is listed but the reference does not read it cleanly"
        );
    }
}
