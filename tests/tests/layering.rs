//! The crate layering holds: the planner has no async runtime, the control plane built for
//! its container image links neither the fetcher nor the demo farm, and the production
//! worker does not carry the farm. Read from `cargo tree` over normal (non-dev) edges, so a
//! dependency added in the wrong place fails here rather than in a code review.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Names of the packages `package` links (normal edges), with `extra` cargo arguments.
fn linked(package: &str, extra: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "--locked",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .args(["--format", "{p}", "--manifest-path"])
        .arg(&manifest)
        .args(["-p", package])
        .args(extra)
        .output()
        .expect("run cargo tree");
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(
        names.contains(package),
        "{package} not in its own tree: {names:?}"
    );
    names
}

fn assert_absent(package: &str, names: &BTreeSet<String>, forbidden: &[&str]) {
    let found: Vec<&&str> = forbidden.iter().filter(|f| names.contains(**f)).collect();
    assert!(found.is_empty(), "{package} links {found:?}");
}

#[test]
fn planner_is_pure() {
    let names = linked("kairos-planner", &[]);
    assert_absent(
        "kairos-planner",
        &names,
        &[
            "tokio",
            "tonic",
            "hyper",
            "reqwest",
            "kairos-runtime",
            "kairos-proto",
        ],
    );
}

#[test]
fn control_plane_links_no_fetcher_or_farm() {
    let names = linked("kairos-coordinator", &["--no-default-features"]);
    assert_absent(
        "kairos-coordinator (no standalone)",
        &names,
        &["reqwest", "feed-rs", "kairos-worker", "kairos-farm"],
    );
    // The check itself can fail: with the default features the same tree has them.
    let full = linked("kairos-coordinator", &[]);
    assert!(full.contains("kairos-worker") && full.contains("kairos-farm"));
}

#[test]
fn production_worker_has_no_farm() {
    let names = linked("kairos-worker", &[]);
    assert_absent(
        "kairos-worker",
        &names,
        &["kairos-farm", "kairos-coordinator"],
    );
    assert!(names.contains("reqwest"));
}
