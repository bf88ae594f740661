//! Source files stay small enough to hold one job each: none over 900
//! lines, but for the few listed that may only shrink until they are split.

use std::path::Path;

use crate::tidy::rust_files;

/// Most lines a source file may have: past this, one job per file no
/// longer holds.
const MAX_FILE_LINES: usize = 900;

/// Files still over [`MAX_FILE_LINES`], each with the size it may not grow
/// past, until it is split.
const OVERSIZE_FILES: &[(&str, usize)] = &[];

#[test]
fn no_source_file_is_over_900_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for dir in [
        "proto",
        "portal-client",
        "holder",
        "portald",
        "portal-shim",
        "portal-cli",
        "tests/src",
        "tests/tests",
    ] {
        for sub in ["src", "tests", ""] {
            let d = root.join(dir).join(sub);
            if d.is_dir() && (sub.is_empty() == dir.starts_with("tests/")) {
                rust_files(&d, &mut files);
            }
        }
    }
    assert!(files.len() > 100, "too few files found: {}", files.len());
    let mut problems = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().into_owned();
        let lines = std::fs::read_to_string(f).unwrap().lines().count();
        let cap =
            OVERSIZE_FILES.iter().find(|(p, _)| *p == rel).map_or(MAX_FILE_LINES, |(_, n)| *n);
        if lines > cap {
            problems.push(format!("{rel}: {lines} lines, over {cap}: split it by job"));
        }
        if cap > MAX_FILE_LINES && lines <= MAX_FILE_LINES {
            problems.push(format!("{rel}: {lines} lines now: take it off OVERSIZE_FILES"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
