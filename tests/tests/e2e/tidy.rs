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
