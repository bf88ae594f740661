//! Repository hygiene: every source file starts with a `//!` doc saying what
//! it owns, no debugging leftovers are committed, in no crate does a module
//! import one that imports it back, the daemon's and portal-client's modules
//! keep their layers, and the docs' links and code map stay true.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
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
        "portal-client/src",
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
/// map lists them in this order: `the_code_map_lists_the_daemons_layers`).
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

// Every crate's modules, from its source: which module imports which.
// Read from the tokens (not from rustc, which would need a nightly or a
// build), so it knows what Rust's paths say and no more: `use` trees,
// paths written in place (`crate::x::f()`, `super::y::Z`, `child::f()`),
// never a comment, a string or test-only code.

/// Module path (`["store", "writer"]`; the crate root is `[]`).
type Module = Vec<String>;

/// Each module and the modules it imports.
type Graph = BTreeMap<Module, BTreeSet<Module>>;

/// `text` with its comments, strings and character literals taken out, so
/// that a path named in a doc comment or a message is not an import.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            // Block comments nest.
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == '"' || string_prefix(&chars, i).is_some() {
            i = string_end(&chars, i);
            out.push_str("\"\"");
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\'', '\u{7f}'); a lifetime
            // ('a) stays. Past the quote and the first character (or the
            // backslash and the character it escapes), then to the close.
            i += if next == Some('\\') { 3 } else { 2 };
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else if c.is_alphanumeric() || c == '_' {
            // A whole word, so that the `r` ending `for"` is no raw prefix.
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                out.push(chars[i]);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// At `i`, a raw or byte string's prefix (`r"`, `r#"`, `b"`, `br#"`):
/// whether it is raw, and its number of `#`s.
pub(crate) fn string_prefix(chars: &[char], i: usize) -> Option<(bool, usize)> {
    let mut j = i;
    if chars.get(j) == Some(&'b') {
        j += 1;
    }
    let raw = chars.get(j) == Some(&'r');
    if raw {
        j += 1;
    }
    let mut hashes = 0;
    while raw && chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (j > i && chars.get(j) == Some(&'"')).then_some((raw, hashes))
}

/// The index just past the string literal that starts at `i`.
pub(crate) fn string_end(chars: &[char], i: usize) -> usize {
    let (raw, hashes) = string_prefix(chars, i).unwrap_or((false, 0));
    let mut j = i;
    while chars[j] != '"' {
        j += 1;
    }
    j += 1;
    while j < chars.len() {
        if !raw && chars[j] == '\\' {
            j += 2;
        } else if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
            return j + 1 + hashes;
        } else {
            j += 1;
        }
    }
    j
}

/// A token of code: a word (an identifier or keyword), `::`, or any other
/// character.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Word(String),
    PathSep,
    Punct(char),
}

/// The tokens of `file`'s code, without its test-only items.
fn code_tokens(file: &Path) -> Vec<Tok> {
    let code = code_only(&std::fs::read_to_string(file).unwrap());
    let chars: Vec<char> = code.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            toks.push(Tok::Word(chars[start..i].iter().collect()));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            toks.push(Tok::PathSep);
            i += 2;
        } else {
            if !c.is_whitespace() {
                toks.push(Tok::Punct(c));
            }
            i += 1;
        }
    }
    without_tests(&toks)
}

fn word(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Word(w)) => Some(w),
        _ => None,
    }
}

/// `toks` without the items under `#[cfg(test)]` (or `#[cfg(all(test, …))]`):
/// unit tests may reach anywhere; the rule is about the code.
fn without_tests(toks: &[Tok]) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i] == Tok::Punct('#') && toks.get(i + 1) == Some(&Tok::Punct('[')) {
            let end = matching(toks, i + 1);
            let attr = &toks[i + 2..end];
            let has = |w: &str| attr.contains(&Tok::Word(w.into()));
            if word(attr.first()) == Some("cfg") && has("test") && !has("not") {
                i = item_end(toks, end + 1);
                continue;
            }
        }
        out.push(toks[i].clone());
        i += 1;
    }
    out
}

/// The index of the bracket that closes the one at `open`.
fn matching(toks: &[Tok], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, t) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    toks.len() - 1
}

/// The index just past the item that starts at `start`: past its `;`, or
/// past its `{ … }` body.
fn item_end(toks: &[Tok], start: usize) -> usize {
    let mut j = start;
    while j < toks.len() {
        match &toks[j] {
            Tok::Punct(';') => return j + 1,
            Tok::Punct('{') => return matching(toks, j) + 1,
            Tok::Punct('(' | '[') => j = matching(toks, j) + 1,
            _ => j += 1,
        }
    }
    j
}

/// The paths of the `use` tree at `i` (just after `use`), each with
/// `prefix` before it, into `out`; returns the index past the tree.
fn use_paths(toks: &[Tok], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(i) {
            // `x as y`: the path is x's.
            Some(Tok::Word(w)) if w == "as" => i += 2,
            Some(Tok::Word(w)) => {
                path.push(w.clone());
                i += 1;
            }
            Some(Tok::PathSep | Tok::Punct('*')) => i += 1,
            Some(Tok::Punct('{')) => {
                i += 1;
                while i < toks.len() && toks[i] != Tok::Punct('}') {
                    i = use_paths(toks, i, &path, out);
                    if toks.get(i) == Some(&Tok::Punct(',')) {
                        i += 1;
                    }
                }
                return i + 1;
            }
            _ => {
                if path.len() > prefix.len() {
                    out.push(path);
                }
                return i;
            }
        }
    }
}

/// A crate's modules (one per file) and their files, from its root file.
struct Tree {
    files: BTreeMap<Module, PathBuf>,
}

impl Tree {
    /// Follows the `mod x;` declarations from `root` (`x.rs`, or
    /// `x/mod.rs`, beside a root or a `mod.rs`, else in a directory named
    /// after the file). Inline `mod x { … }` blocks are part of their file;
    /// a module with a `#[path]` is another crate's file, read with it.
    fn read(root: &Path) -> Self {
        let mut files = BTreeMap::new();
        let mut todo = vec![(Module::new(), root.to_path_buf())];
        while let Some((module, file)) = todo.pop() {
            let toks = code_tokens(&file);
            let dir = if module.is_empty() || file.ends_with("mod.rs") {
                file.parent().unwrap().to_path_buf()
            } else {
                file.with_extension("")
            };
            // Whether the next module declared has a `#[path]`.
            let mut by_path = false;
            for w in toks.windows(3) {
                match w {
                    [Tok::Punct('#'), Tok::Punct('['), Tok::Word(attr)] if attr == "path" => {
                        by_path = true;
                    }
                    [Tok::Word(kw), Tok::Word(name), end] if kw == "mod" => {
                        if std::mem::take(&mut by_path) || *end != Tok::Punct(';') {
                            continue;
                        }
                        let flat = dir.join(format!("{name}.rs"));
                        let child =
                            if flat.exists() { flat } else { dir.join(name).join("mod.rs") };
                        let mut path = module.clone();
                        path.push(name.clone());
                        todo.push((path, child));
                    }
                    _ => {}
                }
            }
            files.insert(module, file);
        }
        Self { files }
    }

    /// The module of this crate that `path`, written in module `from`,
    /// names (the deepest one it goes through), or `None` when it names
    /// something outside the crate (another crate, `std`, a local name).
    fn resolve(&self, from: &[String], path: &[String]) -> Option<Module> {
        let (mut module, rest) = match path.first().map(String::as_str)? {
            "crate" => (Module::new(), &path[1..]),
            "self" => (from.to_vec(), &path[1..]),
            "super" => {
                let supers = path.iter().take_while(|s| *s == "super").count();
                (from[..from.len().saturating_sub(supers)].to_vec(), &path[supers..])
            }
            // `use child::x` (or `child::f()`) names the module's own child.
            first => {
                let mut child = from.to_vec();
                child.push(first.to_owned());
                if !self.files.contains_key(&child) {
                    return None;
                }
                (from.to_vec(), path)
            }
        };
        for seg in rest {
            module.push(seg.clone());
            if !self.files.contains_key(&module) {
                module.pop();
                break;
            }
        }
        Some(module)
    }

    /// Each module and the other modules its code names: in `use` trees
    /// and in paths written in place.
    fn imports(&self) -> Graph {
        let mut graph = Graph::new();
        for (module, file) in &self.files {
            let toks = code_tokens(file);
            let mut paths = Vec::new();
            let mut i = 0;
            while i < toks.len() {
                if word(toks.get(i)) == Some("use") {
                    i = use_paths(&toks, i + 1, &[], &mut paths);
                    continue;
                }
                let path_starts = word(toks.get(i)).is_some()
                    && toks.get(i + 1) == Some(&Tok::PathSep)
                    && (i == 0 || toks[i - 1] != Tok::PathSep);
                if path_starts {
                    let mut path = Vec::new();
                    while let Some(w) = word(toks.get(i)) {
                        path.push(w.to_owned());
                        if toks.get(i + 1) != Some(&Tok::PathSep) {
                            break;
                        }
                        i += 2;
                    }
                    paths.push(path);
                }
                i += 1;
            }
            let named = paths.iter().filter_map(|p| self.resolve(module, p));
            graph.insert(module.clone(), named.filter(|m| m != module).collect());
        }
        graph
    }
}

/// The imports between sibling modules: anything inside `a` importing
/// anything inside its sibling `b` is `a -> b`. A module and its
/// submodules are one thing to the modules around it: a parent uses its
/// children and a child its parent's items, so an import between a module
/// and its own ancestor is no edge (it is Rust's nesting, not a circle).
fn sibling_graph(imports: &Graph) -> Graph {
    let mut graph = Graph::new();
    for (from, targets) in imports {
        graph.entry(from.clone()).or_default();
        for to in targets {
            let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
            if common < from.len() && common < to.len() {
                graph.entry(from[..=common].to_vec()).or_default().insert(to[..=common].to_vec());
            }
        }
    }
    graph
}

/// The modules `start` leads to, through any number of imports.
fn reachable(graph: &Graph, start: &Module) -> BTreeSet<Module> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![start];
    while let Some(m) = todo.pop() {
        for next in graph.get(m).into_iter().flatten() {
            if seen.insert(next.clone()) {
                todo.push(next);
            }
        }
    }
    seen
}

/// The import circles of `graph`: each group of modules that all lead to
/// one another, with a shortest circle through them.
fn circles(graph: &Graph) -> Vec<(BTreeSet<Module>, Vec<Module>)> {
    let reach: BTreeMap<&Module, BTreeSet<Module>> =
        graph.keys().map(|m| (m, reachable(graph, m))).collect();
    let mut found: Vec<(BTreeSet<Module>, Vec<Module>)> = Vec::new();
    for (m, from_m) in &reach {
        if !from_m.contains(*m) || found.iter().any(|(group, _)| group.contains(*m)) {
            continue;
        }
        let group: BTreeSet<Module> =
            from_m.iter().filter(|other| reach[other].contains(*m)).cloned().collect();
        let shortest = group.iter().map(|start| circle_through(graph, &group, start));
        found.push((group.clone(), shortest.min_by_key(Vec::len).unwrap()));
    }
    found
}

/// A shortest circle from `start` back to it, inside `group`.
fn circle_through(graph: &Graph, group: &BTreeSet<Module>, start: &Module) -> Vec<Module> {
    let mut queue = VecDeque::from([vec![start.clone()]]);
    let mut seen = BTreeSet::new();
    loop {
        let path = queue.pop_front().unwrap();
        let next = graph[path.last().unwrap()].iter().filter(|n| group.contains(*n));
        if let Some(back) = next.clone().find(|n| *n == start) {
            return [path, vec![back.clone()]].concat();
        }
        for n in next {
            if seen.insert(n.clone()) {
                queue.push_back([path.clone(), vec![n.clone()]].concat());
            }
        }
    }
}

fn module_name(m: &Module) -> String {
    if m.is_empty() { "the crate root".to_owned() } else { m.join("::") }
}

/// Every crate of the workspace (its package name) and the root files of
/// its targets: `src/lib.rs`, `src/main.rs`, `src/bin/*.rs`, `tests/*.rs`
/// and `tests/*/main.rs`.
fn workspace_crates(root: &Path) -> Vec<(String, Vec<PathBuf>)> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = manifest.lines().find_map(|l| l.strip_prefix("members = ")).unwrap();
    members
        .trim_matches(['[', ']'])
        .split(',')
        .map(|m| root.join(m.trim().trim_matches('"')))
        .map(|dir| {
            let toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            let name = toml.lines().find_map(|l| l.strip_prefix("name = ")).unwrap();
            let mut roots: Vec<PathBuf> = ["src/lib.rs", "src/main.rs"]
                .iter()
                .map(|r| dir.join(r))
                .filter(|r| r.exists())
                .collect();
            for sub in ["src/bin", "tests"] {
                let Ok(entries) = std::fs::read_dir(dir.join(sub)) else { continue };
                for entry in entries {
                    let path = entry.unwrap().path();
                    if path.extension().is_some_and(|e| e == "rs") {
                        roots.push(path);
                    } else if path.join("main.rs").exists() {
                        roots.push(path.join("main.rs"));
                    }
                }
            }
            roots.sort();
            (name.trim_matches('"').to_owned(), roots)
        })
        .collect()
}

#[test]
fn no_module_of_any_crate_imports_one_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let crates = workspace_crates(root);
    let names: BTreeSet<&str> = crates.iter().map(|(n, _)| n.as_str()).collect();
    for expected in [
        "portald",
        "portal-holder",
        "portal-proto",
        "portal-client",
        "portal-shim",
        "portal-cli",
        "portal-tests",
    ] {
        assert!(names.contains(expected), "{expected} is not among the crates read: {names:?}");
    }
    let mut problems = Vec::new();
    for (name, roots) in &crates {
        assert!(!roots.is_empty(), "{name}: no target root found");
        for target in roots {
            let tree = Tree::read(target);
            let rel = target.strip_prefix(root).unwrap().display();
            for (_, circle) in circles(&sibling_graph(&tree.imports())) {
                let circle: Vec<String> = circle.iter().map(module_name).collect();
                problems.push(format!("{name} ({rel}): an import circle: {}", circle.join(" -> ")));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// portal-client's layers as its `lib.rs` lists them, from the bottom:
/// the numbered lines of its doc (`//! 0. [`paths`], [`hosts`]`), each
/// naming its layer's modules as links.
fn client_layers(lib_rs: &str) -> Vec<Vec<String>> {
    let mut layers = Vec::new();
    for line in lib_rs.lines().map_while(|l| l.strip_prefix("//!")) {
        let Some((n, rest)) = line.trim_start().split_once(". ") else { continue };
        let Ok(n) = n.parse::<usize>() else { continue };
        assert_eq!(n, layers.len(), "portal-client's layers are numbered 0, 1, 2…: {line}");
        let modules = rest.split("[`").skip(1).filter_map(|l| l.split_once("`]")).map(|(m, _)| m);
        layers.push(modules.map(str::to_owned).collect());
    }
    layers
}

#[test]
fn portal_client_modules_keep_the_layers_its_lib_rs_lists() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("portal-client/src");
    let layers = client_layers(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    assert!(layers.len() > 3, "portal-client's lib.rs lists no layers: {layers:?}");
    let layer = |m: &str| layers.iter().position(|l| l.iter().any(|x| x == m));
    let graph = sibling_graph(&Tree::read(&src.join("lib.rs")).imports());
    let top: Vec<&Module> = graph.keys().filter(|m| m.len() == 1).collect();
    assert!(top.len() > 10, "{top:?}");
    for listed in layers.iter().flatten() {
        assert!(top.iter().any(|m| m[0] == *listed), "lib.rs lists {listed}, no module");
    }
    let mut problems = Vec::new();
    for module in top {
        let name = &module[0];
        let Some(mine) = layer(name) else {
            problems.push(format!("{name} is in no layer of portal-client's lib.rs"));
            continue;
        };
        for import in &graph[module] {
            let theirs = layer(&import[0]).unwrap_or(usize::MAX);
            if theirs >= mine {
                problems
                    .push(format!("{name} (layer {mine}) imports {} (layer {theirs})", import[0]));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The checks above must see what they are there to see: a circle made of
/// each kind of import, and nothing in what is no import.
#[test]
fn the_import_reader_finds_a_circle_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    // g, named by a `#[path]`, is another crate's file (here, none at all).
    write("lib.rs", "mod a;\nmod b;\nmod c;\npub mod d;\n#[path = \"../x/g.rs\"]\nmod g;\n");
    // a -> b through a use tree, b -> c through a path in place, c -> a
    // through `super::`.
    write("a.rs", "//! [`crate::c`]\nuse crate::{x::Y, b::{self, Z as W}};\n");
    write("b.rs", "fn f() { let _ = crate::c::g(); }\n");
    write("c.rs", "use super::a::*;\n");
    // d's children: e and f import each other (a circle inside d), and
    // both import d itself (their parent: no circle).
    write("d/mod.rs", "mod e;\nmod f;\npub use e::E;\npub struct D;\n");
    write("d/e.rs", "use super::D;\npub struct E;\nfn g() { super::f::h() }\n");
    write("d/f.rs", "use super::{D, e::E};\npub fn h() {}\n");
    let tree = Tree::read(&dir.path().join("lib.rs"));
    let imports = tree.imports();
    let m = |s: &str| -> Module { s.split("::").map(str::to_owned).collect() };
    assert!(tree.files.contains_key(&m("d::f")) && !tree.files.contains_key(&m("g")));
    let siblings = sibling_graph(&imports);
    assert_eq!(siblings[&m("a")], BTreeSet::from([m("b")]), "{siblings:?}");
    let found: Vec<Vec<String>> =
        circles(&siblings).into_iter().map(|(_, c)| c.iter().map(module_name).collect()).collect();
    assert_eq!(found, [vec!["a", "b", "c", "a"], vec!["d::e", "d::f", "d::e"]], "{found:?}");

    // What is no import: a comment, a string, test code, another crate's
    // path of the same name, a lifetime beside a path.
    write("a.rs", "// crate::b\nfn f<'a>(x: &'a str) -> &'a str { let _ = \"crate::b\"; x }\n");
    write(
        "b.rs",
        "#[cfg(test)]\nmod tests {\n    use crate::c;\n}\nfn f() { let _ = r#\"super::c\"#; let _ = ('\"', '\\'', '\\u{22}', \"crate::c\"); other::c::f(); }\n",
    );
    let siblings = sibling_graph(&Tree::read(&dir.path().join("lib.rs")).imports());
    assert!(siblings[&m("a")].is_empty() && siblings[&m("b")].is_empty(), "{siblings:?}");
}

/// ARCHITECTURE.md's code map lists the daemon's layers as a numbered list
/// from the bottom (``0. `domain`, `config`, …``), the same as `DAEMON_LAYERS`.
#[test]
fn the_code_map_lists_the_daemons_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let listed: Vec<(usize, Vec<String>)> = text
        .lines()
        .filter_map(|line| {
            let (number, rest) = line.split_once(". ")?;
            let number: usize = number.parse().ok()?;
            let modules = rest.split(", ").map(|m| m.trim_matches('`').to_owned()).collect();
            rest.starts_with('`').then_some((number, modules))
        })
        .collect();
    let layers: Vec<(usize, Vec<String>)> = DAEMON_LAYERS
        .iter()
        .enumerate()
        .map(|(i, l)| (i, l.iter().map(|m| (*m).to_owned()).collect()))
        .collect();
    assert_eq!(listed, layers, "ARCHITECTURE.md's code map and DAEMON_LAYERS differ");
}

/// The Markdown a person reads: the README, ARCHITECTURE.md and `docs/`.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    files.extend(docs);
    files
}

/// The lines of `text` outside fenced code blocks, each without its inline
/// code, so that what remains of a link is a link.
fn prose(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push(line.split('`').step_by(2).collect());
        }
    }
    out
}

/// The anchors GitHub gives the headings of `text`: lowercase, punctuation
/// dropped, spaces as hyphens, a repeated one numbered.
fn anchors(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if fenced || !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let anchor: String = line[hashes..]
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(*c, '-' | '_' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let seen = out.iter().filter(|a| **a == anchor).count();
        out.push(if seen == 0 { anchor } else { format!("{anchor}-{seen}") });
    }
    out
}

/// Every relative link in the docs names a file that exists, and every
/// `#anchor` a heading of the file it points into.
#[test]
fn every_link_between_the_docs_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let files = markdown_files(root);
    assert!(files.len() > 5, "found only {} Markdown files", files.len());
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let rel = file.strip_prefix(root).unwrap().display().to_string();
        for line in prose(&text) {
            for rest in line.split("](").skip(1) {
                let target = rest.split(')').next().unwrap_or_default();
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
                let dest =
                    if path.is_empty() { file.clone() } else { file.parent().unwrap().join(path) };
                if !dest.exists() {
                    problems.push(format!("{rel}: {target}: no such file"));
                    continue;
                }
                if fragment.is_empty() {
                    continue;
                }
                let found = dest.extension().is_some_and(|e| e == "md")
                    && anchors(&std::fs::read_to_string(&dest).unwrap())
                        .iter()
                        .any(|a| a == fragment);
                if !found {
                    problems.push(format!("{rel}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The two files a newcomer reads first stay short, in short lines; the
/// rest lives under `docs/`.
#[test]
fn the_readme_and_the_architecture_stay_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    for (name, limit) in [("README.md", 20_000), ("ARCHITECTURE.md", 30_000)] {
        let text = std::fs::read_to_string(root.join(name)).unwrap();
        assert!(
            text.len() <= limit,
            "{name}: {} bytes, over {limit}: move a topic to docs/",
            text.len()
        );
        for (i, line) in text.lines().enumerate() {
            let width = line.chars().count();
            let table_row = line.trim_start().starts_with('|');
            assert!(table_row || width <= 200, "{name}:{}: a line of {width} characters", i + 1);
        }
    }
}
