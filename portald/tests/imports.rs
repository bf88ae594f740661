//! The daemon's source files import each other without circles.
//!
//! An edge `a → b`: file `a` names an item through `crate::…`, `super::…`,
//! `self::…` or a child module's name (in a `use`, or inline) that lives in
//! file `b` (the longest module path that is a file). A module's `mod x;`
//! declaration is not an edge, and test modules are left out. A circle
//! means two files each need the other: one of them holds something that
//! belongs to neither.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module, as its path from the crate root (`["proc", "actor"]`).
type Module = Vec<String>;

/// Every source file of the library, by module (`main.rs` is the binary).
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Module =
                rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            match module.last().map(String::as_str) {
                Some("main") if module.len() == 1 => continue,
                Some("lib") if module.len() == 1 => module.clear(),
                Some("mod") => drop(module.pop()),
                _ => {}
            }
            out.insert(module, path);
        }
    }
    out
}

/// The code without comments, string and character literals, and test
/// modules (roughly, but enough for paths and braces).
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                out.push('"');
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => drop(chars.next()),
                        '"' => break,
                        _ => {}
                    }
                }
                out.push('"');
            }
            '\'' => {
                // A character literal (`'{'`, `'\n'`, `'\u{7f}'`), not a
                // lifetime: how many characters follow up to its end.
                let rest: Vec<char> = chars.clone().take(12).collect();
                let len = match rest.as_slice() {
                    ['\\', _, tail @ ..] => {
                        tail.iter().position(|c| *c == '\'').map_or(0, |p| p + 2)
                    }
                    [_, '\'', ..] => 1,
                    _ => 0,
                };
                if len > 0 {
                    for _ in 0..=len {
                        chars.next();
                    }
                    out.push_str("' '");
                } else {
                    out.push('\'');
                }
            }
            _ => out.push(c),
        }
    }
    without_tests(&out)
}

/// `code` without its `#[cfg(test)] mod … { … }` blocks.
fn without_tests(code: &str) -> String {
    let mut out = code.to_owned();
    while let Some(at) = out.find("#[cfg(test)]") {
        let after = &out[at..];
        let Some(open) = after.find('{') else { break };
        if !after[..open].contains("mod ") {
            // `#[cfg(test)]` on something else: keep it, look past it.
            out.replace_range(at..at + "#[cfg(test)]".len(), "");
            continue;
        }
        let mut depth = 0;
        let mut end = after.len();
        for (i, c) in after.char_indices().skip(open) {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.replace_range(at..at + end, "");
    }
    out
}

/// The paths a `use` tree names: `a::{b::c, d}` is `a::b::c` and `a::d`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![path.to_owned()];
    };
    let prefix = tree[..open].trim().trim_end_matches("::");
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let (mut items, mut item, mut depth) = (Vec::new(), String::new(), 0);
    for c in inner.chars() {
        match c {
            ',' if depth == 0 => items.push(std::mem::take(&mut item)),
            '{' | '}' => {
                depth += if c == '{' { 1 } else { -1 };
                item.push(c);
            }
            _ => item.push(c),
        }
    }
    items.push(item);
    let mut out = Vec::new();
    for item in items.iter().map(|i| i.trim()).filter(|i| !i.is_empty()) {
        for sub in expand(item) {
            out.push(match (prefix.is_empty(), sub.as_str()) {
                (_, "self") => prefix.to_owned(),
                (true, _) => sub,
                (false, _) => format!("{prefix}::{sub}"),
            });
        }
    }
    out
}

/// The file a path named in module `from` leads to, if it is in the crate.
fn resolve(from: &[String], path: &str, files: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    let segments: Vec<&str> = path.split("::").map(str::trim).filter(|s| !s.is_empty()).collect();
    let (mut base, mut rest): (Module, &[&str]) = (from.to_vec(), &segments);
    match segments.first().copied()? {
        "crate" => (base, rest) = (Vec::new(), &segments[1..]),
        "super" | "self" => {
            while let Some(&first) = rest.first().filter(|s| **s == "super" || **s == "self") {
                if first == "super" {
                    base.pop();
                }
                rest = &rest[1..];
            }
        }
        child => {
            // A child module, named relative to this one.
            let mut module = from.to_vec();
            module.push(child.to_owned());
            if !files.contains_key(&module) {
                return None;
            }
        }
    }
    let full: Module = base.into_iter().chain(rest.iter().map(|s| (*s).to_owned())).collect();
    (0..=full.len()).rev().map(|n| full[..n].to_vec()).find(|m| files.contains_key(m))
}

/// Each file's imports of other files.
fn edges(files: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeSet<Module>> {
    let uses = regex::Regex::new(r"\buse\s+([^;]+);").unwrap();
    let inline = regex::Regex::new(r"(?:^|[^\w:])((?:[a-z_][a-z0-9_]*)(?:::\w+)+)").unwrap();
    let mut out = BTreeMap::new();
    for (module, path) in files {
        let code = code(&std::fs::read_to_string(path).unwrap());
        let mut paths: Vec<String> =
            uses.captures_iter(&code).flat_map(|c| expand(&c[1])).collect();
        let rest = uses.replace_all(&code, "");
        paths.extend(inline.captures_iter(&rest).map(|c| c[1].to_owned()));
        let targets = paths
            .iter()
            .filter_map(|p| resolve(module, p, files))
            .filter(|t| t != module)
            .collect();
        out.insert(module.clone(), targets);
    }
    out
}

/// The strongly connected components with more than one file (Tarjan).
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        found: Vec<Vec<Module>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a Module) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            for w in &self.edges[v] {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.stack.contains(&w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let at = self.stack.iter().position(|m| *m == v).unwrap();
                let component: Vec<Module> = self.stack.drain(at..).cloned().collect();
                if component.len() > 1 {
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn no_source_files_import_each_other_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = modules(&src);
    let edges = edges(&files);
    // The walk sees the imports it should: a sanity check of the parsing.
    let actor = vec!["proc".to_owned(), "actor".to_owned()];
    assert!(edges[&actor].contains(&vec!["proc".to_owned()]), "{:?}", edges[&actor]);
    let found = circles(&edges);
    let name = |m: &Module| files[m].strip_prefix(&src).unwrap().display().to_string();
    let described: Vec<String> = found
        .iter()
        .map(|c| {
            let inside: BTreeSet<&Module> = c.iter().collect();
            c.iter()
                .flat_map(|a| {
                    edges[a]
                        .iter()
                        .filter(|b| inside.contains(b))
                        .map(|b| format!("{} → {}", name(a), name(b)))
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    assert!(described.is_empty(), "source files that import each other: {described:#?}");
}

#[test]
fn a_circle_is_found() {
    let m = |s: &str| s.split('/').map(str::to_owned).collect::<Module>();
    let edges: BTreeMap<Module, BTreeSet<Module>> = [
        (m("a"), [m("b")].into()),
        (m("b"), [m("c")].into()),
        (m("c"), [m("a")].into()),
        (m("d"), [m("a")].into()),
    ]
    .into();
    let found = circles(&edges);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].iter().collect::<BTreeSet<_>>(), [m("a"), m("b"), m("c")].iter().collect());
}
