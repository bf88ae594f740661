//! Repository hygiene: every source file starts with a `//!` doc saying what
//! it owns, and no debugging leftovers are committed.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_source_file_has_a_module_doc_and_no_leftovers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for dir in [
        "proto/src",
        "portald/src",
        "portal-shim/src",
        "portal-cli/src",
        "tests/src",
        "tests/tests",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 20, "found only {} files", files.len());
    let mut problems = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        if !text.starts_with("//!") {
            problems.push(format!("{rel}: does not start with a //! module doc"));
        }
        for (i, line) in text.lines().enumerate() {
            if line.contains(concat!("dbg", "!(")) {
                problems.push(format!("{rel}:{}: dbg!", i + 1));
            }
            if line.ends_with(' ') || line.ends_with('\t') {
                problems.push(format!("{rel}:{}: trailing whitespace", i + 1));
            }
            let in_daemon_or_shim =
                rel.starts_with("portald/src") || rel.starts_with("portal-shim/src");
            if in_daemon_or_shim && line.trim_start().starts_with("println!(") {
                problems.push(format!("{rel}:{}: println! (stdout is not for logs)", i + 1));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The top-level module of the daemon a source file belongs to
/// (`proc/actor.rs` → `proc`, `screen.rs` → `screen`).
fn daemon_module(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_owned()
}

/// The daemon's modules that `text` (non-test code) names as `crate::x`.
fn imported_modules(text: &str) -> std::collections::BTreeSet<String> {
    // Unit tests may reach anywhere; the rule is about the daemon's code.
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    code.match_indices("crate::")
        .filter_map(|(i, _)| {
            let rest = &code[i + "crate::".len()..];
            let name: String =
                rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            (!name.is_empty() && name.chars().next().is_some_and(|c| c.is_ascii_lowercase()))
                .then_some(name)
        })
        .collect()
}

/// The daemon's modules by layer, from the bottom (ARCHITECTURE.md's code
/// map lists them in this order).
const DAEMON_LAYERS: &[&[&str]] = &[
    &["domain", "config", "sys", "ansi", "osc", "profiles", "marks"],
    &["screen", "store", "instance"],
    &["agents", "doctor", "search", "upgrade"],
    &["proc"],
    &["error", "reads", "registry", "sends"],
    &["waits"],
    &["daemon"],
    &["changes"],
    &["grpc", "endpoint"],
    &["server"],
];

#[test]
fn no_module_of_the_daemon_imports_one_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("portald/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut uses: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        std::collections::BTreeMap::new();
    for f in &files {
        let module = daemon_module(&src, f);
        // The crate root and the binary sit above everything; the fuzz
        // properties are tests.
        if ["lib", "main", "fuzz"].contains(&module.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let entry = uses.entry(module.clone()).or_default();
        entry.extend(imported_modules(&text).into_iter().filter(|m| *m != module));
    }
    assert!(uses.contains_key("domain") && uses.contains_key("store"), "{:?}", uses.keys());
    assert!(uses["domain"].is_empty(), "domain must import nothing: {:?}", uses["domain"]);
    // The layers ARCHITECTURE.md's code map lists, from the bottom: a
    // module imports only modules of layers below its own.
    let layer = |m: &str| DAEMON_LAYERS.iter().position(|l| l.contains(&m));
    for (module, imports) in &uses {
        let Some(mine) = layer(module) else {
            panic!("{module} is in no layer of DAEMON_LAYERS (and of ARCHITECTURE.md's code map)")
        };
        for m in imports {
            let theirs = layer(m).unwrap_or(usize::MAX);
            assert!(theirs < mine, "{module} (layer {mine}) imports {m} (layer {theirs})");
        }
    }
    // Every path of imports from a module must never lead back to it.
    for start in uses.keys() {
        let mut stack: Vec<Vec<String>> = vec![vec![start.clone()]];
        let mut seen = std::collections::BTreeSet::new();
        while let Some(path) = stack.pop() {
            let last = path.last().unwrap();
            for next in uses.get(last).into_iter().flatten() {
                assert!(next != start, "an import circle: {} -> {next}", path.join(" -> "));
                if seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push(longer);
                }
            }
        }
    }
}
