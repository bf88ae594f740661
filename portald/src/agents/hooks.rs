//! Installing Portal's hooks into Claude Code and Codex, so agents report
//! their own state through `portal-cli emit`.
//!
//! Both installers edit text surgically, so everything outside Portal's
//! entries stays byte for byte as the user wrote it, and install followed by
//! uninstall gives back the original file:
//! - Claude Code (`~/.claude/settings.json`): a small JSON parser records
//!   where every object member and array element starts and ends; install
//!   first removes Portal's entries (recognised by a command running
//!   `portal-cli … emit`), then appends one group per event, in the file's
//!   own indentation; uninstall removes them with their separators and
//!   prunes event arrays and a `hooks` object left empty.
//! - Codex (`~/.codex/config.toml`): a marker-bounded block appended at the
//!   end. Codex runs hooks only once the user trusts them in its `/hooks`
//!   view, and only with `[features] hooks = true`; Portal never writes
//!   either, and says so.
//!
//! A file that does not parse is never overwritten. Writes are atomic
//! (temp file, fsync, rename).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Which agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HookAgent {
    /// Claude Code.
    Claude,
    /// Codex.
    Codex,
}

/// What to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HookAction {
    /// Report.
    Status,
    /// Install.
    Install,
    /// Remove.
    Uninstall,
}

/// One agent's report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Report {
    /// claude or codex.
    pub(crate) agent: &'static str,
    /// The file.
    pub(crate) path: PathBuf,
    /// installed, outdated, absent, not_detected.
    pub(crate) status: &'static str,
    /// What changed.
    pub(crate) change: String,
    /// What the user still has to do.
    pub(crate) note: String,
    /// The file as it would be (dry run).
    pub(crate) preview: String,
}

/// A hooks file that cannot be edited safely.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HookError {
    /// It does not parse; it is left alone.
    #[error("{} is not valid {kind}: {reason}; fix it by hand, Portal will not overwrite it", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// JSON or TOML.
        kind: &'static str,
        /// Where and why.
        reason: String,
    },
    /// Reading or writing failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was attempted.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Claude Code events and the state each reports.
const CLAUDE_EVENTS: &[(&str, Option<&str>, &str, Option<&str>)] = &[
    ("UserPromptSubmit", None, "running", None),
    ("Notification", Some("permission_prompt"), "awaiting_input", Some("permission")),
    ("Notification", Some("idle_prompt"), "awaiting_input", Some("idle_reminder")),
    ("Stop", None, "done", None),
    ("SessionStart", None, "idle", None),
    ("SessionEnd", None, "exited", None),
];

/// Codex events and the state each reports.
const CODEX_EVENTS: &[(&str, &str, Option<&str>)] = &[
    ("UserPromptSubmit", "running", None),
    ("PermissionRequest", "awaiting_input", Some("permission")),
    ("Stop", "done", None),
    ("SessionStart", "idle", None),
];

const CODEX_BEGIN: &str = "# >>> portal-agent-hooks >>>";
const CODEX_END: &str = "# <<< portal-agent-hooks <<<";

fn quote(path: &Path) -> String {
    let s = path.to_string_lossy();
    if s.contains(|c: char| c.is_whitespace() || "'\"\\$`".contains(c)) {
        format!("'{}'", s.replace('\'', r"'\''"))
    } else {
        s.into_owned()
    }
}

/// The hook command for one event.
fn command(emitter: &Path, agent: &str, state: &str, event: &str, reason: Option<&str>) -> String {
    let mut c = format!("{} emit {state} --name {agent} --event {event}", quote(emitter));
    if let Some(r) = reason {
        let _ = write!(c, " --reason {r}");
    }
    c
}

/// Whether a hook command is one of Portal's.
fn is_portal_command(c: &str) -> bool {
    c.contains("portal-cli") && c.contains(" emit ")
}

/// Runs one action for one agent under `home`.
pub(crate) fn run(
    agent: HookAgent,
    action: HookAction,
    dry_run: bool,
    home: &Path,
    emitter: &Path,
) -> Result<Report, HookError> {
    match agent {
        HookAgent::Claude => claude(action, dry_run, home, emitter),
        HookAgent::Codex => codex(action, dry_run, home, emitter),
    }
}

fn read(path: &Path) -> Result<Option<String>, HookError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(HookError::Io { op: "reading", path: path.to_path_buf(), source }),
    }
}

fn write_atomic(path: &Path, text: &str) -> Result<(), HookError> {
    let io = |op, source| HookError::Io { op, path: path.to_path_buf(), source };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io("creating the directory of", e))?;
    let tmp =
        dir.join(format!(".{}.portal-tmp", path.file_name().unwrap_or_default().to_string_lossy()));
    {
        use std::io::Write as _;
        let mut f = std::fs::File::create(&tmp).map_err(|e| io("creating a temp file for", e))?;
        f.write_all(text.as_bytes()).map_err(|e| io("writing", e))?;
        f.sync_all().map_err(|e| io("syncing", e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| io("replacing", e))
}

fn finish(
    mut report: Report,
    path: &Path,
    before: &str,
    after: String,
    exists: bool,
    dry_run: bool,
) -> Result<Report, HookError> {
    if after == before {
        report.change = "nothing to change".into();
    } else {
        report.change =
            format!("{} {}", if exists { "updated" } else { "created" }, path.display());
        if dry_run {
            report.change = format!("would have {}", report.change);
        } else {
            write_atomic(path, &after)?;
        }
    }
    if dry_run {
        report.preview = after;
    }
    Ok(report)
}

// ---------------------------------------------------------------- Claude --

fn claude(
    action: HookAction,
    dry_run: bool,
    home: &Path,
    emitter: &Path,
) -> Result<Report, HookError> {
    let dir = home.join(".claude");
    let path = dir.join("settings.json");
    let mut report = Report { agent: "claude", path: path.clone(), ..Report::default() };
    let existing = read(&path)?;
    let text = existing.clone().unwrap_or_default();
    let malformed =
        |reason: String| HookError::Malformed { path: path.clone(), kind: "JSON", reason };
    let stripped = if text.trim().is_empty() {
        String::new()
    } else {
        strip_claude(&text).map_err(malformed)?
    };
    let installed = claude_install_text(&stripped, emitter).map_err(malformed)?;
    report.status = if text.trim().is_empty() || stripped == text {
        if dir.exists() { "absent" } else { "not_detected" }
    } else if installed == text {
        "installed"
    } else {
        "outdated"
    };
    match action {
        HookAction::Status => Ok(report),
        HookAction::Install => {
            report.note =
                "Claude Code reads the hooks at its next start (or /hooks to review them).".into();
            let r = finish(report, &path, &text, installed, existing.is_some(), dry_run)?;
            Ok(Report { status: "installed", ..r })
        }
        HookAction::Uninstall => {
            let r = finish(report, &path, &text, stripped, existing.is_some(), dry_run)?;
            Ok(Report { status: "absent", ..r })
        }
    }
}

fn claude_group(
    emitter: &Path,
    matcher: Option<&str>,
    state: &str,
    event: &str,
    reason: Option<&str>,
) -> serde_json::Value {
    let handler = serde_json::json!({"type": "command", "command": command(emitter, "claude", state, event, reason)});
    match matcher {
        Some(m) => serde_json::json!({"matcher": m, "hooks": [handler]}),
        None => serde_json::json!({"hooks": [handler]}),
    }
}

/// Removes Portal's groups (and then-empty event arrays and hooks object).
fn strip_claude(text: &str) -> Result<String, String> {
    let root = json::parse(text)?;
    let json::Value::Object(members) = &root.value else {
        return Err("the top level is not an object".into());
    };
    let Some(hooks) = members.iter().position(|m| m.key == "hooks") else {
        return Ok(text.to_owned());
    };
    let json::Value::Object(events) = &members[hooks].value.value else {
        return Ok(text.to_owned());
    };
    let mut ranges = Vec::new();
    let mut emptied = Vec::new();
    for (ei, ev) in events.iter().enumerate() {
        let json::Value::Array(groups) = &ev.value.value else { continue };
        let ours: Vec<usize> = (0..groups.len()).filter(|g| is_portal_group(&groups[*g])).collect();
        if ours.is_empty() {
            continue;
        }
        if ours.len() == groups.len() {
            emptied.push(ei);
        } else {
            let spans: Vec<(usize, usize)> = groups.iter().map(|n| (n.start, n.end)).collect();
            ranges.extend(json::removal_ranges(&spans, &ours));
        }
    }
    if !events.is_empty() && emptied.len() == events.len() {
        let spans: Vec<(usize, usize)> = members.iter().map(|m| (m.start, m.value.end)).collect();
        ranges = json::removal_ranges(&spans, &[hooks]);
    } else {
        let spans: Vec<(usize, usize)> = events.iter().map(|m| (m.start, m.value.end)).collect();
        ranges.extend(json::removal_ranges(&spans, &emptied));
    }
    ranges.sort_unstable();
    let mut out = text.to_owned();
    for (a, b) in ranges.into_iter().rev() {
        out.replace_range(a..b, "");
    }
    Ok(out)
}

fn is_portal_group(group: &json::Node) -> bool {
    let json::Value::Object(fields) = &group.value else { return false };
    fields.iter().filter(|f| f.key == "hooks").any(|f| match &f.value.value {
        json::Value::Array(handlers) => handlers.iter().any(|h| match &h.value {
            json::Value::Object(hf) => hf.iter().any(|x| {
                x.key == "command"
                    && matches!(&x.value.value, json::Value::String(c) if is_portal_command(c))
            }),
            _ => false,
        }),
        _ => false,
    })
}

/// Adds Portal's groups to a file that has none.
fn claude_install_text(text: &str, emitter: &Path) -> Result<String, String> {
    let base = if text.trim().is_empty() { "{}\n".to_owned() } else { text.to_owned() };
    let root = json::parse(&base)?;
    let json::Value::Object(members) = &root.value else {
        return Err("the top level is not an object".into());
    };
    let unit = json::indent_unit(&base);
    // Portal's groups per event, in order.
    let mut wanted: Vec<(&str, Vec<serde_json::Value>)> = Vec::new();
    for (event, matcher, state, reason) in CLAUDE_EVENTS {
        let group = claude_group(emitter, *matcher, state, event, *reason);
        match wanted.iter_mut().find(|(e, _)| e == event) {
            Some((_, groups)) => groups.push(group),
            None => wanted.push((event, vec![group])),
        }
    }
    let mut inserts: Vec<(usize, String)> = Vec::new();
    match members.iter().find(|m| m.key == "hooks") {
        None => {
            let hooks: serde_json::Map<String, serde_json::Value> = wanted
                .into_iter()
                .map(|(e, g)| (e.to_owned(), serde_json::Value::Array(g)))
                .collect();
            let member =
                format!("\"hooks\": {}", json::pretty(&serde_json::Value::Object(hooks), &unit, 1));
            inserts.push(json::insert_entries(&base, &root, &[member], &unit, 1));
        }
        Some(h) => {
            let json::Value::Object(events) = &h.value.value else {
                return Err("\"hooks\" is not an object".into());
            };
            let mut new_members = Vec::new();
            for (event, groups) in wanted {
                let rendered: Vec<String> =
                    groups.iter().map(|g| json::pretty(g, &unit, 3)).collect();
                match events.iter().find(|e| e.key == event) {
                    Some(e) => {
                        let json::Value::Array(_) = &e.value.value else {
                            return Err(format!("hooks.{event} is not an array"));
                        };
                        inserts.push(json::insert_entries(&base, &e.value, &rendered, &unit, 3));
                    }
                    None => new_members.push(format!(
                        "\"{event}\": {}",
                        json::pretty(&serde_json::Value::Array(groups), &unit, 2)
                    )),
                }
            }
            if !new_members.is_empty() {
                inserts.push(json::insert_entries(&base, &h.value, &new_members, &unit, 2));
            }
        }
    }
    // Apply from the end so earlier offsets stay valid.
    inserts.sort_by_key(|(pos, _)| std::cmp::Reverse(*pos));
    let mut out = base;
    for (pos, s) in inserts {
        out.insert_str(pos, &s);
    }
    Ok(out)
}

// ----------------------------------------------------------------- Codex --

fn codex_block(emitter: &Path) -> String {
    let mut b = format!(
        "{CODEX_BEGIN}\n# Written by `portal-cli hooks install`; `portal-cli hooks uninstall` removes it.\n"
    );
    for (event, state, reason) in CODEX_EVENTS {
        let _ = write!(
            b,
            "[[hooks.{event}]]\n[[hooks.{event}.hooks]]\ntype = \"command\"\ncommand = \"{}\"\n",
            command(emitter, "codex", state, event, *reason)
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
        );
    }
    b.push_str(CODEX_END);
    b.push('\n');
    b
}

/// Removes every Portal block with the blank line before it.
fn strip_codex(text: &str) -> String {
    let mut out = text.to_owned();
    while let Some(start) = out.find(CODEX_BEGIN) {
        let Some(end_rel) = out[start..].find(CODEX_END) else { break };
        let mut end = start + end_rel + CODEX_END.len();
        if out[end..].starts_with('\n') {
            end += 1;
        }
        let start = if out[..start].ends_with("\n\n") { start - 1 } else { start };
        out.replace_range(start..end, "");
    }
    out
}

fn codex(
    action: HookAction,
    dry_run: bool,
    home: &Path,
    emitter: &Path,
) -> Result<Report, HookError> {
    let dir = home.join(".codex");
    let path = dir.join("config.toml");
    let mut report = Report { agent: "codex", path: path.clone(), ..Report::default() };
    let existing = read(&path)?;
    let text = existing.clone().unwrap_or_default();
    let stripped = strip_codex(&text);
    let installed = {
        let mut t = stripped.clone();
        if !t.is_empty() {
            if !t.ends_with('\n') {
                t.push('\n');
            }
            t.push('\n');
        }
        t.push_str(&codex_block(emitter));
        t
    };
    report.status = if stripped == text {
        if dir.exists() { "absent" } else { "not_detected" }
    } else if installed == text {
        "installed"
    } else {
        "outdated"
    };
    let features_on = text.lines().any(|l| {
        let l = l.trim().replace(' ', "");
        l == "hooks=true" || l == "codex_hooks=true"
    });
    let mut note =
        String::from("Codex runs these hooks only after you trust them in its /hooks view.");
    if !features_on {
        note.push_str(" Also turn hooks on: add `hooks = true` under `[features]` in config.toml.");
    }
    match action {
        HookAction::Status => Ok(Report { note, ..report }),
        HookAction::Install => {
            report.note = note;
            let r = finish(report, &path, &text, installed, existing.is_some(), dry_run)?;
            Ok(Report { status: "installed", ..r })
        }
        HookAction::Uninstall => {
            let r = finish(report, &path, &text, stripped, existing.is_some(), dry_run)?;
            Ok(Report { status: "absent", ..r })
        }
    }
}

/// A JSON parser that keeps the byte span of every value, member and
/// element, and the small text edits built on those spans.
pub(crate) mod json {
    /// A value with its span.
    #[derive(Debug)]
    pub(crate) struct Node {
        /// First byte.
        pub(crate) start: usize,
        /// One past the last byte.
        pub(crate) end: usize,
        /// The value.
        pub(crate) value: Value,
    }

    /// An object member: `start` is where its key begins.
    #[derive(Debug)]
    pub(crate) struct Member {
        /// Where the key's quote is.
        pub(crate) start: usize,
        /// The key.
        pub(crate) key: String,
        /// The value.
        pub(crate) value: Node,
    }

    /// JSON values (numbers and literals are not needed as such).
    #[derive(Debug)]
    pub(crate) enum Value {
        /// An object.
        Object(Vec<Member>),
        /// An array.
        Array(Vec<Node>),
        /// A string.
        String(String),
        /// Anything else.
        Scalar,
    }

    struct P<'a> {
        s: &'a [u8],
        i: usize,
        depth: usize,
    }

    /// Parses a whole document.
    pub(crate) fn parse(text: &str) -> Result<Node, String> {
        let mut p = P { s: text.as_bytes(), i: 0, depth: 0 };
        let node = p.value()?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("unexpected text at byte {}", p.i));
        }
        Ok(node)
    }

    /// Nesting limit, far above any settings file.
    const MAX_DEPTH: usize = 128;

    impl P<'_> {
        fn ws(&mut self) {
            while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
                self.i += 1;
            }
        }

        fn err<T>(&self, what: &str) -> Result<T, String> {
            Err(format!("{what} at byte {}", self.i))
        }

        fn value(&mut self) -> Result<Node, String> {
            self.ws();
            let start = self.i;
            let value = match self.s.get(self.i) {
                Some(b'{') => {
                    self.depth += 1;
                    if self.depth > MAX_DEPTH {
                        return self.err("nested too deeply");
                    }
                    self.i += 1;
                    let mut members = Vec::new();
                    self.ws();
                    if self.s.get(self.i) == Some(&b'}') {
                        self.i += 1;
                    } else {
                        loop {
                            self.ws();
                            let kstart = self.i;
                            let Value::String(key) = self.string()? else {
                                return self.err("expected a key");
                            };
                            self.ws();
                            if self.s.get(self.i) != Some(&b':') {
                                return self.err("expected ':'");
                            }
                            self.i += 1;
                            let value = self.value()?;
                            members.push(Member { start: kstart, key, value });
                            self.ws();
                            match self.s.get(self.i) {
                                Some(b',') => self.i += 1,
                                Some(b'}') => {
                                    self.i += 1;
                                    break;
                                }
                                _ => return self.err("expected ',' or '}'"),
                            }
                        }
                    }
                    self.depth -= 1;
                    Value::Object(members)
                }
                Some(b'[') => {
                    self.depth += 1;
                    if self.depth > MAX_DEPTH {
                        return self.err("nested too deeply");
                    }
                    self.i += 1;
                    let mut items = Vec::new();
                    self.ws();
                    if self.s.get(self.i) == Some(&b']') {
                        self.i += 1;
                    } else {
                        loop {
                            items.push(self.value()?);
                            self.ws();
                            match self.s.get(self.i) {
                                Some(b',') => self.i += 1,
                                Some(b']') => {
                                    self.i += 1;
                                    break;
                                }
                                _ => return self.err("expected ',' or ']'"),
                            }
                        }
                    }
                    self.depth -= 1;
                    Value::Array(items)
                }
                Some(b'"') => self.string()?,
                Some(c) if c.is_ascii_digit() || *c == b'-' => {
                    while self.i < self.s.len()
                        && matches!(self.s[self.i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                    {
                        self.i += 1;
                    }
                    Value::Scalar
                }
                Some(_) => {
                    for lit in [&b"true"[..], b"false", b"null"] {
                        if self.s[self.i..].starts_with(lit) {
                            self.i += lit.len();
                            return Ok(Node { start, end: self.i, value: Value::Scalar });
                        }
                    }
                    return self.err("unexpected character");
                }
                None => return self.err("unexpected end"),
            };
            Ok(Node { start, end: self.i, value })
        }

        fn string(&mut self) -> Result<Value, String> {
            if self.s.get(self.i) != Some(&b'"') {
                return self.err("expected a string");
            }
            let start = self.i;
            self.i += 1;
            while self.i < self.s.len() {
                match self.s[self.i] {
                    b'\\' => self.i += 2,
                    b'"' => {
                        self.i += 1;
                        let raw = std::str::from_utf8(&self.s[start..self.i])
                            .map_err(|e| e.to_string())?;
                        return serde_json::from_str::<String>(raw)
                            .map(Value::String)
                            .map_err(|e| format!("{e} at byte {start}"));
                    }
                    _ => self.i += 1,
                }
            }
            self.err("unterminated string")
        }
    }

    /// The file's indentation unit (two spaces when it has none).
    pub(crate) fn indent_unit(text: &str) -> String {
        text.lines()
            .find_map(|l| {
                let ws: String = l.chars().take_while(|c| *c == ' ' || *c == '\t').collect();
                (!ws.is_empty() && ws.len() < l.len()).then_some(ws)
            })
            .unwrap_or_else(|| "  ".to_owned())
    }

    /// Pretty JSON whose nested lines are indented for `depth`.
    pub(crate) fn pretty(v: &serde_json::Value, unit: &str, depth: usize) -> String {
        let text = serde_json::to_string_pretty(v).unwrap_or_default();
        let prefix = unit.repeat(depth);
        text.lines()
            .enumerate()
            .map(|(i, l)| {
                let spaces = l.len() - l.trim_start().len();
                let body = format!("{}{}", unit.repeat(spaces / 2), l.trim_start());
                if i == 0 { body } else { format!("{prefix}{body}") }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Inserting `entries` (rendered members or elements) after the last
    /// entry of container `node` (an object or array) at `depth`.
    pub(crate) fn insert_entries(
        text: &str,
        node: &Node,
        entries: &[String],
        unit: &str,
        depth: usize,
    ) -> (usize, String) {
        let indent = unit.repeat(depth);
        let last_end = match &node.value {
            Value::Object(members) => members.last().map(|m| m.value.end),
            Value::Array(items) => items.last().map(|n| n.end),
            _ => return (node.end, String::new()),
        };
        match last_end {
            Some(end) => (end, entries.iter().map(|e| format!(",\n{indent}{e}")).collect()),
            None => {
                // `{}` or `[]`, possibly with whitespace: the entries go on
                // their own lines after the opening bracket.
                let between = &text[node.start + 1..node.end - 1];
                let tail = if between.contains('\n') {
                    String::new()
                } else {
                    format!("\n{}", unit.repeat(depth.saturating_sub(1)))
                };
                let body =
                    entries.iter().map(|e| format!("{indent}{e}")).collect::<Vec<_>>().join(",\n");
                (node.start + 1, format!("\n{body}{tail}"))
            }
        }
    }

    /// Text ranges that remove the entries at `removed` (indices into the
    /// entries with spans `spans`) with their separators: a run of removed
    /// entries after a kept one goes from the kept entry's end (taking the
    /// commas before them); a run at the start goes up to the next kept
    /// entry's start; a container losing everything keeps only its brackets'
    /// surrounding whitespace. Appended entries thus come out exactly as
    /// they went in.
    pub(crate) fn removal_ranges(
        spans: &[(usize, usize)],
        removed: &[usize],
    ) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < spans.len() {
            if !removed.contains(&i) {
                i += 1;
                continue;
            }
            let a = i;
            while i + 1 < spans.len() && removed.contains(&(i + 1)) {
                i += 1;
            }
            let b = i;
            if a > 0 {
                out.push((spans[a - 1].1, spans[b].1));
            } else if let Some(next) = spans.get(b + 1) {
                out.push((spans[a].0, next.0));
            } else {
                out.push((spans[a].0, spans[b].1));
            }
            i += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMITTER: &str = "/opt/portal/portal-cli";

    const SETTINGS: &str = r#"{
  "model": "opus",
  "permissions": {
    "allow": ["Bash(ls:*)"]
  },
  "hooks": {
    "Stop": [
      {
        "hooks": [
          { "type": "command", "command": "say done" }
        ]
      }
    ],
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [{ "type": "command", "command": "/usr/local/bin/audit" }]
      }
    ]
  },
  "env": { "FOO": "bar" }
}
"#;

    fn home_with(claude: Option<&str>, codex: Option<&str>) -> tempfile::TempDir {
        let home = tempfile::tempdir().unwrap();
        if let Some(c) = claude {
            std::fs::create_dir_all(home.path().join(".claude")).unwrap();
            std::fs::write(home.path().join(".claude/settings.json"), c).unwrap();
        }
        if let Some(c) = codex {
            std::fs::create_dir_all(home.path().join(".codex")).unwrap();
            std::fs::write(home.path().join(".codex/config.toml"), c).unwrap();
        }
        home
    }

    fn round_trip(agent: HookAgent, file: &Path, original: &str) {
        let home = file.ancestors().nth(2).unwrap();
        let emitter = Path::new(EMITTER);
        assert_eq!(run(agent, HookAction::Status, false, home, emitter).unwrap().status, "absent");
        run(agent, HookAction::Install, false, home, emitter).unwrap();
        let installed = std::fs::read_to_string(file).unwrap();
        assert_ne!(installed, original);
        assert_eq!(
            run(agent, HookAction::Status, false, home, emitter).unwrap().status,
            "installed"
        );
        // Idempotent.
        let again = run(agent, HookAction::Install, false, home, emitter).unwrap();
        assert_eq!(again.change, "nothing to change");
        assert_eq!(std::fs::read_to_string(file).unwrap(), installed);
        // A moved emitter is outdated, and reinstalling replaces, not adds.
        let moved = Path::new("/new/place/portal-cli");
        assert_eq!(run(agent, HookAction::Status, false, home, moved).unwrap().status, "outdated");
        run(agent, HookAction::Install, false, home, moved).unwrap();
        assert_eq!(
            std::fs::read_to_string(file).unwrap().matches("portal-cli emit").count(),
            installed.matches("portal-cli emit").count()
        );
        run(agent, HookAction::Uninstall, false, home, moved).unwrap();
        assert_eq!(
            std::fs::read_to_string(file).unwrap(),
            original,
            "uninstall must restore the file byte for byte"
        );
    }

    #[test]
    fn claude_round_trips_byte_for_byte() {
        let home = home_with(Some(SETTINGS), None);
        let file = home.path().join(".claude/settings.json");
        round_trip(HookAgent::Claude, &file, SETTINGS);
        run(HookAgent::Claude, HookAction::Install, false, home.path(), Path::new(EMITTER))
            .unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(v["model"], "opus");
        assert_eq!(v["hooks"]["Stop"][0]["hooks"][0]["command"], "say done");
        assert_eq!(
            v["hooks"]["Stop"][1]["hooks"][0]["command"],
            "/opt/portal/portal-cli emit done --name claude --event Stop"
        );
        assert_eq!(v["hooks"]["Notification"][0]["matcher"], "permission_prompt");
        assert_eq!(
            v["hooks"]["Notification"][1]["hooks"][0]["command"],
            "/opt/portal/portal-cli emit awaiting_input --name claude --event Notification --reason idle_reminder"
        );
        assert_eq!(v["hooks"]["PreToolUse"][0]["matcher"], "Bash");
    }

    #[test]
    fn claude_files_without_hooks_and_empty_files() {
        for original in ["{\n  \"theme\": \"dark\"\n}\n", "{}", "{\n}\n", "{\"a\":1,\"hooks\":{}}"]
        {
            let home = home_with(Some(original), None);
            let file = home.path().join(".claude/settings.json");
            let emitter = Path::new(EMITTER);
            run(HookAgent::Claude, HookAction::Install, false, home.path(), emitter).unwrap();
            let text = std::fs::read_to_string(&file).unwrap();
            let v: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
            assert_eq!(
                v["hooks"]["SessionEnd"][0]["hooks"][0]["command"],
                "/opt/portal/portal-cli emit exited --name claude --event SessionEnd"
            );
            run(HookAgent::Claude, HookAction::Uninstall, false, home.path(), emitter).unwrap();
            let after = std::fs::read_to_string(&file).unwrap();
            if original.starts_with("{\n  \"theme\"") {
                assert_eq!(after, original);
            } else {
                // Degenerate files (no members, or an empty hooks object,
                // which is pruned with ours) come back valid and clean.
                let v: serde_json::Value =
                    serde_json::from_str(&after).unwrap_or_else(|e| panic!("{e}: {after}"));
                assert!(v.get("hooks").is_none() && !after.contains("portal-cli"), "{after}");
            }
        }
    }

    #[test]
    fn installed_groups_follow_the_files_indentation() {
        let home = home_with(Some(SETTINGS), None);
        run(HookAgent::Claude, HookAction::Install, false, home.path(), Path::new(EMITTER))
            .unwrap();
        let text = std::fs::read_to_string(home.path().join(".claude/settings.json")).unwrap();
        assert!(text.contains("    \"Stop\": [\n      {\n        \"hooks\": [\n          { \"type\": \"command\", \"command\": \"say done\" }\n        ]\n      },\n      {\n        \"hooks\": [\n          {\n"), "{text}");
    }

    #[test]
    fn malformed_files_are_left_alone() {
        let home = home_with(Some("{ \"a\": 1,, }"), None);
        let err =
            run(HookAgent::Claude, HookAction::Install, false, home.path(), Path::new(EMITTER))
                .unwrap_err();
        assert!(err.to_string().contains("not valid JSON"), "{err}");
        assert_eq!(
            std::fs::read_to_string(home.path().join(".claude/settings.json")).unwrap(),
            "{ \"a\": 1,, }"
        );
    }

    #[test]
    fn dry_run_writes_nothing() {
        let home = home_with(Some(SETTINGS), None);
        let r = run(HookAgent::Claude, HookAction::Install, true, home.path(), Path::new(EMITTER))
            .unwrap();
        assert!(r.change.starts_with("would have"));
        assert!(r.preview.contains("portal-cli emit done"));
        assert_eq!(
            std::fs::read_to_string(home.path().join(".claude/settings.json")).unwrap(),
            SETTINGS
        );
    }

    #[test]
    fn codex_round_trips_byte_for_byte() {
        let original = "model = \"o4\"\n\n[features]\nweb = true\n\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\ncommand = \"notify-send done\"\n";
        let home = home_with(None, Some(original));
        let file = home.path().join(".codex/config.toml");
        round_trip(HookAgent::Codex, &file, original);
        let r = run(HookAgent::Codex, HookAction::Status, false, home.path(), Path::new(EMITTER))
            .unwrap();
        assert!(r.note.contains("trust") && r.note.contains("hooks = true"), "{}", r.note);
    }

    #[test]
    fn undetected_agents_are_reported() {
        let home = tempfile::tempdir().unwrap();
        let r = run(HookAgent::Codex, HookAction::Status, false, home.path(), Path::new(EMITTER))
            .unwrap();
        assert_eq!(r.status, "not_detected");
    }
}
