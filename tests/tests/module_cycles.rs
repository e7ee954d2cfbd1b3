//! The coordinator library's top-level modules form no cycle: read from its sources, an
//! edge `a → b` for every `crate::b` that non-test code of module `a` names. A cycle
//! (`election` ↔ `server`, `metrics` → `hub` → `metrics`) means neither module can be read,
//! tested or moved without the other; this test fails on the first one added.
//!
//! Test code is left out (inline `mod tests` blocks and files declared under
//! `#[cfg(test)]`), and so are the binary's own modules (`main.rs` and what it declares).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../coordinator/src")
}

/// Module names `text` declares (`mod x;` / `pub mod x;`), with whether each is under
/// `#[cfg(test)]`.
fn declared(text: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut test_attr = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("#[cfg(test)]") {
            test_attr = true;
            continue;
        }
        if l.starts_with("#[") {
            continue;
        }
        let decl = l
            .strip_prefix("pub mod ")
            .or_else(|| l.strip_prefix("pub(crate) mod "))
            .or_else(|| l.strip_prefix("mod "));
        if let Some(rest) = decl.and_then(|r| r.strip_suffix(';')) {
            out.push((rest.trim().to_string(), test_attr));
        }
        test_attr = false;
    }
    out
}

/// Non-test code of a file: up to its inline test module, comments dropped.
fn code(text: &str) -> String {
    let cut = text.find("#[cfg(test)]\nmod tests").unwrap_or(text.len());
    text[..cut]
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The files of module `name` declared in `dir` (a file or a folder with `mod.rs`), and
/// of the modules they declare, test-only ones left out.
fn files_of(dir: &Path, name: &str, out: &mut Vec<PathBuf>) {
    let (file, sub) = {
        let f = dir.join(format!("{name}.rs"));
        if f.exists() {
            (f, dir.join(name))
        } else {
            (dir.join(name).join("mod.rs"), dir.join(name))
        }
    };
    let Ok(text) = std::fs::read_to_string(&file) else {
        return;
    };
    out.push(file);
    for (child, test_only) in declared(&text) {
        if !test_only {
            files_of(&sub, &child, out);
        }
    }
}

#[test]
fn the_coordinators_modules_form_no_cycle() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("read lib.rs");
    let modules: Vec<String> = declared(&lib)
        .into_iter()
        .filter(|(_, t)| !t)
        .map(|(m, _)| m)
        .collect();
    assert!(modules.len() > 10, "{modules:?}");
    let names: BTreeSet<&str> = modules.iter().map(String::as_str).collect();
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for m in &modules {
        let mut files = Vec::new();
        files_of(&src(), m, &mut files);
        assert!(!files.is_empty(), "no source for module {m}");
        for f in files {
            let text = code(&std::fs::read_to_string(&f).unwrap());
            for (i, _) in text.match_indices("crate::") {
                let used: String = text[i + 7..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if let Some(&u) = names.get(used.as_str()) {
                    if u != m {
                        edges.entry(m.as_str()).or_default().insert(u);
                    }
                }
            }
        }
    }
    // A cycle is a module that reaches itself; report each one found with its path.
    let mut cycles = Vec::new();
    for &start in &names {
        let mut stack = vec![(start, vec![start])];
        let mut seen = BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for &next in edges.get(at).into_iter().flatten() {
                if next == start {
                    cycles.push(format!("{} → {start}", path.join(" → ")));
                } else if seen.insert(next) {
                    let mut p = path.clone();
                    p.push(next);
                    stack.push((next, p));
                }
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "import cycles between the coordinator's modules:\n{}",
        cycles.join("\n")
    );
    // The check sees real edges (a reader that found none would pass anything).
    assert!(edges.get("hub").is_some_and(|e| e.contains("store")));
}

#[test]
fn declarations_under_cfg_test_are_left_out() {
    let d = declared("pub mod a;\n#[cfg(test)]\nmod b;\nmod c;\n");
    assert_eq!(
        d,
        vec![("a".into(), false), ("b".into(), true), ("c".into(), false)]
    );
    assert_eq!(
        code("use crate::x; // crate::y\n#[cfg(test)]\nmod tests { crate::z }"),
        "use crate::x; "
    );
}
