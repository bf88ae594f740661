//! Tool results: the structured content (with its JSON schema, advertised as
//! each tool's `outputSchema`) and the short text an agent reads.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use portal_client::vocab;
use portal_client::waits::{self, Mode};
use portal_proto::v1 as pb;
use schemars::JsonSchema;
use serde::Serialize;

/// A managed process as agents see it. Fields at their default (false, 0,
/// empty) are left out of the structured result: it is what Claude Code and
/// Codex hand their model, and every character is paid on every turn.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ProcessInfo {
    /// The host it runs on, when it is not this machine (or every host was
    /// listed).
    pub(crate) host: Option<String>,
    /// Process id.
    pub(crate) id: u64,
    /// Unique name, if one was given.
    pub(crate) name: Option<String>,
    /// OS pid.
    pub(crate) pid: u32,
    /// How it stands; left out beside a wait's outcome, which says it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<vocab::Status>,
    /// Started on a PTY (absent: pipes).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) pty: bool,
    /// Program.
    pub(crate) command: String,
    /// Arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) args: Vec<String>,
    /// Working directory (left out of lists: process_inspect says it).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) cwd: String,
    /// Environment overrides given at start.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) env: BTreeMap<String, String>,
    /// Exit code, once it exited normally.
    pub(crate) exit_code: Option<i32>,
    /// Signal number that ended it.
    pub(crate) exit_signal: Option<i32>,
    /// Idle timeout (absent: none).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) timeout_ms: u64,
    /// Milliseconds since a tool call last named it.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) inactive_ms: u64,
    /// Terminal rows (PTY).
    pub(crate) rows: Option<u32>,
    /// Terminal columns (PTY).
    pub(crate) cols: Option<u32>,
    /// Bytes of standard output (all terminal output for a PTY).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) stdout_bytes: u64,
    /// Bytes of standard error.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) stderr_bytes: u64,
    /// Bytes written to its input.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) stdin_bytes: u64,
    /// Bytes its log lost (reads mark where).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) lost_bytes: u64,
    /// Records in its log (chunks of input and output): for the text only.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) io_count: u64,
    /// It waits for a password or passphrase (echo off). Do not type it:
    /// ask the person to run `portal-cli secret <id>`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) awaiting_secret: bool,
    /// awaiting_input: blocked reading its input (type the next command);
    /// idle: quiet, not reading input (a timer, the network). Left out once
    /// it ended and beside a wait's outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) input_state: Option<vocab::InputState>,
    /// What decided input_state when it was a guess (heuristic); absent
    /// when the kernel said.
    #[serde(skip_serializing_if = "is_kernel")]
    pub(crate) input_source: Option<vocab::InputSource>,
    /// The next step, when the process needs one of a person.
    pub(crate) hint: Option<String>,
}

/// For `skip_serializing_if`: the input state came from the kernel (the
/// usual case, not worth a field).
#[allow(clippy::ref_option, reason = "serde's skip_serializing_if passes a reference")]
fn is_kernel(source: &Option<vocab::InputSource>) -> bool {
    matches!(source, None | Some(vocab::InputSource::Kernel))
}

impl ProcessInfo {
    /// This process beside a wait's outcome: its status and input state
    /// (and what decided it) are the wait's, said once.
    pub(crate) fn beside_wait(self) -> Self {
        Self { status: None, input_state: None, input_source: None, ..self }
    }

    /// This process as a list shows it: without its working directory.
    pub(crate) fn listed(self) -> Self {
        Self { cwd: String::new(), ..self }
    }

    /// The status for the text tables (none beside a wait's outcome).
    pub(crate) fn status_text(&self) -> &'static str {
        self.status.map_or("", vocab::Status::as_str)
    }

    /// What decided the input state, for the text tables.
    fn input_source_text(&self) -> &'static str {
        self.input_source.map_or(vocab::InputSource::None.as_str(), vocab::InputSource::as_str)
    }

    /// The input state for the text tables: an ended process's is "exited".
    fn input_state_text(&self) -> &'static str {
        self.input_state.map_or(vocab::InputState::Exited.as_str(), vocab::InputState::as_str)
    }
}

impl From<&pb::Process> for ProcessInfo {
    fn from(p: &pb::Process) -> Self {
        let bytes =
            |s: pb::Stream| p.streams.iter().find(|x| x.stream() == s).map_or(0, |x| x.end_offset);
        Self {
            host: None,
            id: p.id,
            name: (!p.name.is_empty()).then(|| p.name.clone()),
            pid: p.pid,
            status: Some(p.status().into()),
            pty: p.mode() == pb::Mode::Pty,
            command: p.command.clone(),
            args: p.args.clone(),
            cwd: p.cwd.clone(),
            env: p.env.clone().into_iter().collect(),
            exit_code: p.exit_code,
            exit_signal: p.exit_signal,
            timeout_ms: p.timeout_ms,
            inactive_ms: p.idle_ms,
            rows: p.size.map(|s| s.rows),
            cols: p.size.map(|s| s.cols),
            stdout_bytes: bytes(pb::Stream::Stdout),
            stderr_bytes: bytes(pb::Stream::Stderr),
            stdin_bytes: bytes(pb::Stream::Stdin),
            lost_bytes: p.streams.iter().map(|s| s.lost_bytes).sum(),
            io_count: p.streams.iter().map(|s| s.chunks).sum(),
            awaiting_secret: p.awaiting_secret,
            input_state: if p.status() == pb::Status::Running {
                Some(p.input_state().into())
            } else {
                None
            },
            input_source: Some(p.input_source().into()),
            hint: p.awaiting_secret.then(|| secret_hint(p.id)),
        }
    }
}

/// What to do about a password prompt: hand it to a person.
/// The command names the call's host: run as `portal-cli secret 12` it
/// would type a password into this machine's process 12.
pub(crate) fn secret_hint(id: u64) -> String {
    format!(
        "it waits for a password: ask the person to run `{}`; never type it yourself",
        secret_command(id)
    )
}

/// `portal-cli secret ID` for the call's host.
fn secret_command(id: u64) -> String {
    portal_client::hosts::secret_command(crate::hosts::call_host().as_deref(), &id.to_string())
}

impl ProcessInfo {
    /// "exit 3", "signal 9", or "" while running.
    pub(crate) fn exit_text(&self) -> String {
        match (self.exit_code, self.exit_signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("signal {s}"),
            (None, None) => String::new(),
        }
    }
}

/// `process_start` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Started {
    /// The new process.
    pub(crate) process: ProcessInfo,
    /// Where its output begins (a cursor for process_read); absent after a
    /// `wait`, whose `cursor` continues.
    pub(crate) cursor: Option<String>,
    /// The outcome of `wait`, when one was asked for.
    pub(crate) wait: Option<Waited>,
    /// The next step, when no `wait` was asked for.
    pub(crate) hint: Option<String>,
}

/// `process_list` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Listed {
    /// Every managed process, by id.
    pub(crate) processes: Vec<ProcessInfo>,
    /// Hosts that could not be listed, each with why (`host: "all"`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) unreachable: Vec<String>,
}

/// `process_inspect`, `process_kill` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Inspected {
    /// The process.
    pub(crate) process: ProcessInfo,
}

/// Output read from a process.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Output {
    /// Process id (the caller may have named it).
    #[schemars(skip)]
    pub(crate) id: u64,
    /// Its status when read.
    pub(crate) status: vocab::Status,
    /// The output as text (terminal escapes removed, carriage-return
    /// overwrites applied). With several streams, runs are marked `[stderr]`.
    pub(crate) output: String,
    /// Pass as `cursor` to continue reading after this output.
    pub(crate) cursor: String,
    /// Bytes in the requested range that were left out (the page limit).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) omitted_bytes: u64,
    /// Where the left-out bytes begin: `process_read` with this cursor pages
    /// through them. Absent when nothing was left out.
    pub(crate) omitted_cursor: Option<String>,
    /// True when some of the requested history was cleared before it could be read.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schemars(skip)]
    pub(crate) history_cleared: bool,
    /// Bytes inside this range that were never stored (a full disk); a
    /// marker line in `output` stands where they were.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(skip)]
    pub(crate) lost_bytes: u64,
    /// Input only: who typed it, from which stdin offset on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) typed_by: Vec<TypedBy>,
}

/// `process_search` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Searched {
    /// Matching lines, newest first.
    pub(crate) hits: Vec<SearchHit>,
    /// Pass as `page` for more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_page: Option<String>,
    /// Output not indexed yet, so not searched.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) unindexed_bytes: u64,
    /// Stopped at its time budget: next_page continues.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) out_of_time: bool,
    /// Why the index is behind, when it is not being kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub(crate) index_error: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A matching line.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SearchHit {
    /// Process id.
    pub(crate) id: u64,
    /// Its name, if it has one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) name: String,
    /// stdout, stderr or stdin.
    pub(crate) source: String,
    /// When it was printed (UTC).
    pub(crate) time: String,
    /// The line.
    pub(crate) line: String,
    /// process_read with this cursor and source reads from a few lines before it.
    pub(crate) cursor: String,
}

/// Who typed the input from `offset` on (an MCP client through a shim, a
/// portal-cli command, an attached terminal, an agent send).
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TypedBy {
    /// Offset in the stdin stream.
    pub(crate) offset: u64,
    /// Who.
    pub(crate) who: String,
}

/// `process_write` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Written {
    /// Process id.
    pub(crate) id: u64,
    /// Bytes written (UTF-8 length).
    pub(crate) written: u64,
}

/// `process_signal` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Signalled {
    /// Process id.
    pub(crate) id: u64,
    /// Signal number delivered.
    pub(crate) signal: i32,
    /// Its name.
    pub(crate) name: String,
}

/// `process_kill_all` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct KilledAll {
    /// Ids of the processes that were running and were killed.
    pub(crate) killed: Vec<u64>,
}

/// `process_clear`, `process_cleanup` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Done {
    /// Process id.
    pub(crate) id: u64,
}

/// `process_screen` result. Blank rows below the last written one are left
/// out (`rows` says how many the screen has).
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Screen {
    /// Process id: for the text only.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) id: u64,
    /// Its status, once it is not running.
    #[serde(skip_serializing_if = "is_running")]
    pub(crate) status: vocab::Status,
    /// "alternate" while a full-screen program (vim, less) draws on the
    /// alternate screen; absent on the primary one.
    #[serde(skip_serializing_if = "is_primary")]
    pub(crate) buffer: String,
    /// Columns.
    pub(crate) cols: u32,
    /// Rows.
    pub(crate) rows: u32,
    /// Cursor column, 0-based.
    pub(crate) cursor_x: u32,
    /// Cursor row, 0-based.
    pub(crate) cursor_y: u32,
    /// Window title set by the program.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) title: String,
    /// The visible rows from the top, trailing spaces removed, down to the
    /// last row with text.
    pub(crate) lines: Vec<String>,
}

/// A running program, which goes without saying on its screen.
#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_running(status: &vocab::Status) -> bool {
    *status == vocab::Status::Running
}

/// The primary screen, which goes without saying.
fn is_primary(buffer: &str) -> bool {
    buffer == "primary"
}

/// A screen's rows without the blank ones below the last written row.
pub(crate) fn written_rows(mut lines: Vec<String>) -> Vec<String> {
    let keep = lines.iter().rposition(|l| !l.trim_end().is_empty()).map_or(0, |i| i + 1);
    lines.truncate(keep);
    lines
}

/// `program_query`, `program_record` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Program {
    /// Canonical program name.
    pub(crate) program: String,
    /// Whether the registry knows it.
    pub(crate) known: bool,
    /// Whether it needs a PTY (when known).
    pub(crate) needs_pty: Option<bool>,
    /// Notes (when known).
    pub(crate) notes: Option<String>,
    /// Consecutive confirmations: 2 or more is settled, 1 should be re-verified.
    pub(crate) confirmed_count: Option<u32>,
    /// The answer is Portal's built-in profile (nothing recorded yet).
    #[schemars(skip)]
    pub(crate) builtin: bool,
}

impl From<pb::Program> for Program {
    fn from(p: pb::Program) -> Self {
        Self {
            known: p.known,
            needs_pty: p.known.then_some(p.needs_pty),
            notes: p.known.then_some(p.notes),
            confirmed_count: p.known.then_some(p.confirmed_count),
            builtin: p.builtin,
            program: p.program,
        }
    }
}

/// Python-style booleans, as the original printed them.
fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

impl Program {
    /// The original's query wording.
    pub(crate) fn query_text(&self) -> String {
        match (self.needs_pty, self.confirmed_count) {
            (Some(pty), Some(n)) => {
                let how = if self.builtin {
                    "built-in profile".into()
                } else {
                    format!("confirmed x{n}")
                };
                let mut s = format!("{}: needs_pty={}, {how}", self.program, py_bool(pty));
                if let Some(notes) = self.notes.as_deref().filter(|n| !n.is_empty()) {
                    let _ = write!(s, " — {notes}");
                }
                s
            }
            _ => format!("{}: not in registry — apply decision rules", self.program),
        }
    }

    /// The original's record wording.
    pub(crate) fn record_text(&self) -> String {
        format!(
            "Recorded {}: needs_pty={} (confirmed x{}).",
            self.program,
            py_bool(self.needs_pty.unwrap_or(false)),
            self.confirmed_count.unwrap_or(0)
        )
    }
}

/// A table of processes.
pub(crate) fn list_text(list: &[ProcessInfo]) -> String {
    if list.is_empty() {
        return "No managed processes.".into();
    }
    let hosts = list.iter().any(|p| p.host.is_some());
    let mut out = String::from(if hosts { "HOST | " } else { "" });
    out.push_str(
        "ID | OS_PID | STATUS    | STATE           | EXIT      | MODE  | TIMEOUT_MS | INACTIVE_MS | BYTES    | COMMAND\n",
    );
    for p in list {
        if hosts {
            let _ = write!(out, "{} | ", p.host.as_deref().unwrap_or("local"));
        }
        let mode = if p.pty { "pty" } else { "pipes" };
        let mut command = std::iter::once(p.command.as_str())
            .chain(p.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        if command.chars().count() > 60 {
            command = command.chars().take(57).collect::<String>() + "...";
        }
        if let Some(name) = &p.name {
            command = format!("[{name}] {command}");
        }
        let _ = writeln!(
            out,
            "{:>2} | {:>6} | {:<9} | {:<15} | {:<9} | {:<5} | {:>10} | {:>11} | {:>8} | {command}",
            p.id,
            p.pid,
            p.status_text(),
            p.input_state_text(),
            p.exit_text(),
            mode,
            p.timeout_ms,
            p.inactive_ms,
            p.stdout_bytes + p.stderr_bytes
        );
    }
    out
}

/// The inspect block.
pub(crate) fn inspect_text(p: &ProcessInfo) -> String {
    let mut out = format!("Process {}:\n", p.id);
    if let Some(name) = &p.name {
        let _ = writeln!(out, "  Name:       {name}");
    }
    let _ = writeln!(out, "  OS PID:     {}", p.pid);
    let _ = writeln!(out, "  Status:     {}", p.status_text());
    let _ = writeln!(
        out,
        "  State:      {} (from the {})",
        p.input_state_text(),
        p.input_source_text()
    );
    let _ = writeln!(
        out,
        "  Mode:       {}",
        if p.pty {
            format!("pty {}x{}", p.cols.unwrap_or(0), p.rows.unwrap_or(0))
        } else {
            "pipes".into()
        }
    );
    let _ = writeln!(out, "  Command:    {}", p.command);
    let _ = writeln!(out, "  Args:       {}", json(&p.args));
    let _ = writeln!(out, "  CWD:        {}", p.cwd);
    let _ = writeln!(out, "  Env:        {}", json(&p.env));
    let _ = writeln!(out, "  Timeout:    {} ms", p.timeout_ms);
    let _ = writeln!(out, "  Inactive:   {} ms", p.inactive_ms);
    let code = p.exit_code.map_or_else(|| "None".to_owned(), |c| c.to_string());
    let _ = writeln!(out, "  Exit Code:  {code}");
    if p.awaiting_secret {
        let _ = writeln!(
            out,
            "  Waiting:    for a password (echo off); ask the person to run `{}`",
            secret_command(p.id)
        );
    }
    if let Some(sig) = p.exit_signal {
        let _ = writeln!(out, "  Signal:     {sig}");
    }
    let _ = write!(
        out,
        "  Output:     stdout={} bytes, stderr={} bytes, stdin={} bytes ({} records)",
        p.stdout_bytes, p.stderr_bytes, p.stdin_bytes, p.io_count
    );
    if p.lost_bytes > 0 {
        let _ = write!(out, "; {} bytes lost (reads mark where)", p.lost_bytes);
    }
    out
}

/// One-line JSON of a small value, for text output.
fn json<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The screen block, as the original printed it; where the client's model
/// reads only the structured content ([`crate::audience`]), its header line.
pub(crate) fn screen_text(s: &Screen) -> String {
    let mut out = format!(
        "Process {} (status={}, buffer={}, {}x{}, cursor=({},{})):",
        s.id, s.status, s.buffer, s.cols, s.rows, s.cursor_x, s.cursor_y
    );
    if !s.title.is_empty() {
        let _ = write!(out, " title={:?}", s.title);
    }
    if crate::audience::short_text()
        && s.lines.iter().map(String::len).sum::<usize>() > SHORT_OUTPUT
    {
        let _ = write!(out, " ({} rows in the structured result)", s.lines.len());
        return out;
    }
    for line in &s.lines {
        out.push('\n');
        out.push_str(line);
    }
    let shown = u32::try_from(s.lines.len()).unwrap_or(u32::MAX);
    if shown < s.rows {
        let _ = write!(out, "\n[{} blank rows below]", s.rows - shown);
    }
    out
}

/// Cursor strings: `stdout:<offset>[,stderr:<offset>][,stdin:<offset>]`.
pub(crate) fn cursor_string(c: Option<&pb::Cursor>) -> String {
    let Some(c) = c else { return String::new() };
    c.offsets
        .iter()
        .map(|o| {
            let name = match o.stream() {
                pb::Stream::Stdin => "stdin",
                pb::Stream::Stderr => "stderr",
                _ => "stdout",
            };
            format!("{name}:{}", o.offset)
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A search's answer as text: a line per hit, then how to go on.
pub(crate) fn search_text(s: &Searched, query: &str) -> String {
    let mut out = String::new();
    if s.hits.is_empty() {
        if s.out_of_time {
            out.push_str(&format!("No line matches {query:?} in the part searched so far.\n"));
        } else {
            out.push_str(&format!("No line matches {query:?}.\n"));
        }
    }
    for h in &s.hits {
        let name = if h.name.is_empty() { String::new() } else { format!(" ({})", h.name) };
        out.push_str(&format!(
            "{}{name} {} {} [{}] {}\n",
            h.id, h.source, h.time, h.cursor, h.line
        ));
    }
    if let Some(h) = s.hits.first() {
        out.push_str(&format!(
            "Read around a hit: process_read(id={}, source=\"{}\", cursor=\"{}\").\n",
            h.id, h.source, h.cursor
        ));
    }
    match (&s.next_page, s.out_of_time) {
        (Some(p), true) => out.push_str(&format!(
            "The search stopped at its time budget: the same search with page=\"{p}\" goes on.\n"
        )),
        (Some(p), false) => {
            out.push_str(&format!("More (older) hits: the same search with page=\"{p}\".\n"));
        }
        (None, _) => {}
    }
    match (&s.index_error, s.unindexed_bytes) {
        (Some(e), n) => out.push_str(&format!(
            "The search index is behind ({e}); {n} bytes of output were not searched.\n"
        )),
        (None, 0) => {}
        (None, n) => out.push_str(&format!(
            "Not searched yet: {n} bytes of output the index is still catching up with; search again shortly.\n"
        )),
    }
    out
}

/// Parses a cursor string; a bare number is a stdout offset.
pub(crate) fn parse_cursor(s: &str) -> Result<pb::Cursor, String> {
    let bad = || {
        format!(
            "cursor {s:?} is not a cursor from an earlier result (like \"stdout:120,stderr:0\")"
        )
    };
    let mut cursor = pb::Cursor::default();
    if let Ok(n) = s.trim().parse::<u64>() {
        cursor.offsets.push(pb::StreamOffset { stream: pb::Stream::Stdout.into(), offset: n });
        return Ok(cursor);
    }
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, off) = part.split_once(':').ok_or_else(bad)?;
        let stream = match name {
            "stdout" => pb::Stream::Stdout,
            "stderr" => pb::Stream::Stderr,
            "stdin" => pb::Stream::Stdin,
            _ => return Err(bad()),
        };
        let offset = off.parse().map_err(|_| bad())?;
        cursor.offsets.push(pb::StreamOffset { stream: stream.into(), offset });
    }
    if cursor.offsets.is_empty() {
        return Err(bad());
    }
    Ok(cursor)
}

/// Joins records into text, marking stream changes when several streams
/// appear.
pub(crate) fn records_text(records: &[pb::Record]) -> String {
    let first = records.first().map(pb::Record::stream);
    let mixed = records.iter().any(|r| Some(r.stream()) != first);
    let mut out = String::new();
    let mut last = None;
    for r in records {
        if mixed && last != Some(r.stream()) {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(match r.stream() {
                pb::Stream::Stderr => "[stderr] ",
                pb::Stream::Stdin => "[stdin] ",
                _ => "[stdout] ",
            });
            last = Some(r.stream());
        }
        out.push_str(&String::from_utf8_lossy(&r.data));
    }
    out
}

/// Builds an [`Output`] from a read.
pub(crate) fn output(id: u64, resp: &pb::ReadResponse) -> Output {
    Output {
        id,
        status: resp.status().into(),
        output: records_text(&resp.records),
        cursor: cursor_string(resp.next.as_ref()),
        omitted_bytes: resp.omitted_bytes,
        omitted_cursor: (resp.omitted_bytes > 0).then(|| cursor_string(resp.omitted_from.as_ref())),
        history_cleared: resp.history_trimmed,
        lost_bytes: resp.lost.iter().map(|l| l.length).sum(),
        typed_by: typed_by(&resp.records),
    }
}

/// Who typed the input records, one entry where the typist changes.
fn typed_by(records: &[pb::Record]) -> Vec<TypedBy> {
    let mut out: Vec<TypedBy> = Vec::new();
    for r in records.iter().filter(|r| r.stream() == pb::Stream::Stdin && !r.origin.is_empty()) {
        if out.last().is_none_or(|t| t.who != r.origin) {
            out.push(TypedBy { offset: r.offset, who: r.origin.clone() });
        }
    }
    out
}

/// The text of a read result: the output, then what to do about anything
/// left out, then the cursor.
/// Output up to this long stays in a short text block: saying where it is
/// would take as many characters.
const SHORT_OUTPUT: usize = 64;

/// Where the client's model reads only the structured content
/// ([`crate::audience`]), the output is said in a word instead.
pub(crate) fn output_text(o: &Output, empty: &str, paging_forward: bool) -> String {
    let mut out = if o.output.is_empty() {
        empty.to_owned()
    } else if crate::audience::short_text() && o.output.len() > SHORT_OUTPUT {
        format!("({} lines of output in the structured result)", o.output.lines().count())
    } else {
        o.output.clone()
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if o.history_cleared {
        out.push_str("[some of this range was cleared before it could be read]\n");
    }
    if let Some(from) = &o.omitted_cursor {
        if paging_forward {
            let _ = writeln!(
                out,
                "[{} more bytes: call again with cursor=\"{}\"]",
                o.omitted_bytes, o.cursor
            );
        } else {
            let _ = writeln!(
                out,
                "[{} earlier bytes not shown: process_read with cursor=\"{from}\" pages through them]",
                o.omitted_bytes
            );
        }
    }
    let _ = write!(out, "[status={} cursor=\"{}\"]", o.status, o.cursor);
    out
}

/// process_wait's result: one process's ([`Waited`], as it always was), or
/// several processes' ([`WaitedMany`]). Its schema is `Waited`'s fields and
/// `WaitedMany`'s side by side (result schemas require nothing).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum WaitReply {
    One(Box<Waited>),
    Many(WaitedMany),
}

impl JsonSchema for WaitReply {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WaitReply".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut one = Waited::json_schema(generator);
        let many = WaitedMany::json_schema(generator);
        let more = many.get("properties").and_then(|p| p.as_object()).cloned().unwrap_or_default();
        if let Some(serde_json::Value::Object(props)) = one.get_mut("properties") {
            // Only process_run reports a command's exit status.
            props.remove("command_exit_code");
            props.extend(more);
            // Its items are described by the tool.
            props.insert("results".into(), serde_json::json!({"type": "array"}));
        }
        one
    }
}

/// process_wait's result on several processes.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WaitedMany {
    /// The process whose wait ended the call (mode any); absent when every
    /// wait ran to its timeout, and with mode all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) ended_by: Option<u64>,
    /// One per process, in the order given.
    pub(crate) results: Vec<WaitedProcess>,
}

/// One process's part of a wait on several: what the wait on it alone
/// would say, without the fields at their usual value.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WaitedProcess {
    /// Process id.
    pub(crate) id: u64,
    /// Its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) name: Option<String>,
    /// Why its wait ended (as process_wait's `reason`), or pending: it was
    /// still waiting when another one ended the call (its output stays for
    /// the next read_new or wait).
    pub(crate) reason: String,
    /// The line it shows while it waits for input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) prompt: Option<String>,
    /// The text that matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) matched: Option<String>,
    /// Its new output.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) output: String,
    /// Its status, when it no longer runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<vocab::Status>,
    /// Exit code, if it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) exit_code: Option<i32>,
    /// Terminating signal, if one ended it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) exit_signal: Option<i32>,
    /// It waits for a password: hand it over, never type it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) awaiting_secret: bool,
    /// A full-screen program is drawing (use process_screen).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) alternate_screen: bool,
    /// The screen, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) screen: Option<Vec<String>>,
    /// What to do next, when it is not obvious.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hint: Option<String>,
    /// The wait on it alone, for the text.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) waited: Option<Waited>,
}

/// The `reason` of a process still waiting when the call returned.
const PENDING: &str = "pending";

impl WaitedMany {
    pub(crate) fn new(r: waits::WaitedMany, snapshot: bool) -> Self {
        let ended_by = r.ended_by.and_then(|i| r.results.get(i)).map(|w| w.id);
        let results =
            r.results
                .into_iter()
                .map(|p| {
                    let name = (!p.name.is_empty()).then_some(p.name);
                    let Some(resp) = p.response else {
                        return WaitedProcess {
                            id: p.id,
                            name,
                            reason: PENDING.into(),
                            prompt: None,
                            matched: None,
                            output: String::new(),
                            status: None,
                            exit_code: None,
                            exit_signal: None,
                            awaiting_secret: false,
                            alternate_screen: false,
                            screen: None,
                            hint: None,
                            waited: None,
                        };
                    };
                    let w = Waited::new(p.id, resp, snapshot);
                    WaitedProcess {
                        id: p.id,
                        name,
                        reason: w.reason.as_str().into(),
                        prompt: w.prompt.clone(),
                        matched: w.matched.clone(),
                        output: w.output.clone(),
                        status: (w.status != vocab::Status::Running).then_some(w.status),
                        exit_code: w.exit_code,
                        exit_signal: w.exit_signal,
                        awaiting_secret: w.awaiting_secret,
                        alternate_screen: w.alternate_screen,
                        screen: w.screen.clone(),
                        // Only the hints a reason does not say already: a
                        // password to hand over, a full-screen program. (A
                        // timeout's names a cursor, which several processes do
                        // not take: the text says to call again.)
                        hint: w.hint.clone().filter(|_| {
                            w.awaiting_secret || w.alternate_screen || w.output_is_screen
                        }),
                        waited: Some(w),
                    }
                })
                .collect();
        Self { ended_by, results }
    }

    /// The text an agent reads: which process ended the wait and why, then
    /// each process's part as a wait on it alone would show it.
    pub(crate) fn text(&self, mode: Mode) -> String {
        let label = |p: &WaitedProcess| match &p.name {
            Some(n) => format!("{} {n:?}", p.id),
            None => p.id.to_string(),
        };
        let mut out = match (mode, self.ended_by) {
            (Mode::Any, Some(id)) => {
                let p = self.results.iter().find(|p| p.id == id);
                let why = p.map_or(String::new(), |p| p.reason.clone());
                let who = p.map_or(id.to_string(), label);
                format!("[ended by {who}: {why}]\n")
            }
            (Mode::All, _) => "[every wait ended]\n".to_owned(),
            (Mode::Any, None) => {
                "[every wait timed out; call process_wait again to keep waiting]\n".to_owned()
            }
        };
        for p in &self.results {
            let _ = writeln!(out, "--- {} ---", label(p));
            match &p.waited {
                Some(w) => {
                    out.push_str(&w.text());
                    out.push('\n');
                }
                None => out.push_str(
                    "[pending: still waiting when the call returned; its output stays for process_read_new]\n",
                ),
            }
        }
        out.truncate(out.trim_end().len());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip() {
        let c = parse_cursor("stdout:12,stderr:3").unwrap();
        assert_eq!(cursor_string(Some(&c)), "stdout:12,stderr:3");
        assert_eq!(cursor_string(Some(&parse_cursor("42").unwrap())), "stdout:42");
        assert!(parse_cursor("bogus").is_err());
        assert!(parse_cursor("stdout:x").is_err());
        assert!(parse_cursor("").is_err());
    }

    #[test]
    fn mixed_streams_are_marked() {
        let rec = |s: pb::Stream, d: &str| pb::Record {
            stream: s.into(),
            data: d.to_owned().into(),
            ..Default::default()
        };
        let text = records_text(&[
            rec(pb::Stream::Stdout, "a\n"),
            rec(pb::Stream::Stderr, "oops"),
            rec(pb::Stream::Stdout, "b\n"),
        ]);
        assert_eq!(text, "[stdout] a\n[stderr] oops\n[stdout] b\n");
        assert_eq!(records_text(&[rec(pb::Stream::Stdout, "only")]), "only");
    }

    #[test]
    fn registry_wording_matches_the_original() {
        let p = Program {
            program: "ssh".into(),
            known: true,
            needs_pty: Some(true),
            notes: Some("interactive".into()),
            confirmed_count: Some(2),
            builtin: false,
        };
        assert_eq!(p.query_text(), "ssh: needs_pty=True, confirmed x2 — interactive");
        assert_eq!(p.record_text(), "Recorded ssh: needs_pty=True (confirmed x2).");
        let miss = Program {
            program: "ssh".into(),
            known: false,
            needs_pty: None,
            notes: None,
            confirmed_count: None,
            builtin: false,
        };
        assert_eq!(miss.query_text(), "ssh: not in registry — apply decision rules");
        let profile = Program { builtin: true, confirmed_count: Some(0), ..p };
        assert_eq!(profile.query_text(), "ssh: needs_pty=True, built-in profile — interactive");
    }
}

/// `process_wait` and `process_run` result. Fields marked
/// `#[schemars(skip)]` here and in [`Output`] are returned but left out of
/// the output schema: `tools/list` is paid on every turn, so it lists what
/// a caller branches on.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Waited {
    /// Process id (the caller may have named it).
    #[schemars(skip)]
    pub(crate) id: u64,
    /// Why the wait ended. input_requested: it waits for input (`prompt`
    /// shows what it asks); awaiting_secret: a password, hand over; prompt:
    /// a Portal bash finished the command. A timeout is not a failure: call
    /// again with `cursor`.
    pub(crate) reason: vocab::WaitReason,
    /// The line the program shows while it waits for input (">>> ",
    /// "name? ", "(y or n) "), not part of `output`.
    pub(crate) prompt: Option<String>,
    /// The program's state at the end.
    pub(crate) input_state: vocab::InputState,
    /// What decided input_state, when it was not the kernel alone:
    /// kernel_prompt (an event loop, once its prompt was drawn again) or
    /// heuristic (the text; a guess).
    #[serde(skip_serializing_if = "is_kernel")]
    #[schemars(skip)]
    pub(crate) input_source: Option<vocab::InputSource>,
    /// The text that matched the pattern or stop pattern (left out of the
    /// schema: `reason` says a pattern matched).
    #[schemars(skip)]
    pub(crate) matched: Option<String>,
    /// New output as text (for process_run: without the echoed input; never
    /// with the prompt; absent when there was none). On a full-screen
    /// program (vim, less): its rendered screen instead (`output_is_screen`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) output: String,
    /// `output` is the rendered screen of a full-screen program.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schemars(skip)]
    pub(crate) output_is_screen: bool,
    /// Bytes of raw output seen: for the text only.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) bytes: u64,
    /// The output was cut to its newest part (max_bytes).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schemars(skip)]
    pub(crate) truncated: bool,
    /// When cut: `process_read` with this cursor pages through all of it.
    #[schemars(skip)]
    pub(crate) omitted_cursor: Option<String>,
    /// Where to continue waiting or reading from.
    pub(crate) cursor: String,
    /// Process status.
    pub(crate) status: vocab::Status,
    /// Exit code, if it exited.
    pub(crate) exit_code: Option<i32>,
    /// Terminating signal, if one ended it (rare: left out of the schema).
    #[schemars(skip)]
    pub(crate) exit_signal: Option<i32>,
    /// The command's exit status (process_run in a bash Portal started).
    pub(crate) command_exit_code: Option<i32>,
    /// A full-screen program is drawing (the alternate screen, or the main
    /// screen taken over as top does): use process_screen.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) alternate_screen: bool,
    /// The screen, when asked for, down to its last written row.
    pub(crate) screen: Option<Vec<String>>,
    /// The pattern was already on the screen when the wait began.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schemars(skip)]
    pub(crate) matched_at_entry: bool,
    /// The timeout used, in ms: for the hint and the text.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) effective_timeout_ms: u64,
    /// The requested timeout was above the server's ceiling and was lowered.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schemars(skip)]
    pub(crate) timeout_clamped: bool,
    /// The program now waits for a password (echo off): ask the person to
    /// run `portal-cli secret <id>`; never type it yourself. Left out of
    /// the schema: `reason` and `hint` say it too.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schemars(skip)]
    pub(crate) awaiting_secret: bool,
    /// What to do next, when it is not obvious.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) hint: Option<String>,
}

impl Waited {
    /// The next step, for the result's `hint` and its text.
    fn next_step(&self) -> Option<String> {
        if self.awaiting_secret {
            return Some(secret_hint(self.id));
        }
        match self.reason {
            vocab::WaitReason::Timeout => {
                let mut h = format!(
                    "no condition met within {} ms{}; call process_wait again with this cursor to keep waiting",
                    self.effective_timeout_ms,
                    if self.timeout_clamped { " (the server's ceiling)" } else { "" }
                );
                if self.input_state == vocab::InputState::Idle && self.bytes == 0 {
                    h.push_str("; it printed nothing and is idle: not reading input (a server, a sleep): wait for a pattern it will print, or settle_ms");
                }
                Some(h)
            }
            vocab::WaitReason::InputRequested if self.full_screen() => Some(
                "a full-screen program waits for keys: drive it with process_send_keys, read it with process_screen".into(),
            ),
            vocab::WaitReason::InputRequested => Some("answer with process_run".into()),
            _ if self.alternate_screen && !self.output_is_screen => {
                Some("a full-screen program is drawing: use process_screen".into())
            }
            _ => None,
        }
    }

    /// A full-screen program (vim, less, htop): keys and screens, not lines.
    fn full_screen(&self) -> bool {
        self.alternate_screen || self.output_is_screen
    }

    /// From the daemon's answer. A full-screen program has no prompt line
    /// (the cursor's row is a row of its screen), and a prompt is a line's
    /// end, not a screenful.
    pub(crate) fn new(id: u64, r: pb::WaitResponse, snapshot: bool) -> Self {
        let full_screen = r.alternate_screen || r.full_screen || r.output_is_screen;
        let prompt = (!r.prompt.is_empty() && !full_screen).then(|| {
            let chars: Vec<char> = r.prompt.chars().collect();
            chars[chars.len().saturating_sub(PROMPT_CHARS)..].iter().collect()
        });
        Self {
            id,
            reason: r.reason().into(),
            prompt,
            input_state: r.input_state().into(),
            input_source: match r.input_source() {
                pb::InputSource::Unspecified => None,
                source => Some(source.into()),
            },
            output_is_screen: r.output_is_screen,
            matched: (!r.matched.is_empty()).then(|| r.matched.clone()),
            bytes: r.bytes,
            truncated: r.truncated,
            omitted_cursor: r.truncated.then(|| cursor_string(r.began.as_ref())),
            cursor: cursor_string(r.next.as_ref()),
            status: r.status().into(),
            exit_code: r.exit_code,
            exit_signal: r.exit_signal,
            command_exit_code: r.command_exit_code,
            alternate_screen: full_screen,
            screen: snapshot.then(|| written_rows(r.screen)),
            matched_at_entry: r.matched_at_entry,
            effective_timeout_ms: r.effective_timeout_ms,
            timeout_clamped: r.timeout_clamped,
            awaiting_secret: r.awaiting_secret,
            output: r.output,
            hint: None,
        }
        .with_hint()
    }

    fn with_hint(mut self) -> Self {
        self.hint = self.next_step();
        self
    }

    /// The text block: the full text, or the short one where the client's
    /// model reads only the structured content ([`crate::audience`]).
    pub(crate) fn text_block(&self) -> String {
        let full = self.text();
        if !crate::audience::short_text() {
            return full;
        }
        let short = self.short_text();
        if short.len() < full.len() { short } else { full }
    }

    /// The short text: how much output there was and the status line (the
    /// output itself is in the structured content).
    fn short_text(&self) -> String {
        let what = if self.output_is_screen { "screen rows" } else { "lines of output" };
        format!(
            "({} {what} in the structured result)\n{}",
            self.output.lines().count(),
            self.status_line()
        )
    }

    /// The text an agent reads: the output, then one status line.
    pub(crate) fn text(&self) -> String {
        let mut out = self.output.clone();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        if let Some(from) = &self.omitted_cursor {
            out.insert_str(
                0,
                &format!(
                    "[earlier output cut to max_bytes: process_read with cursor=\"{from}\" pages through all of it]\n"
                ),
            );
        }
        if let Some(screen) = &self.screen {
            out.push_str("--- screen ---\n");
            for line in screen {
                out.push_str(line);
                out.push('\n');
            }
        }
        if self.output_is_screen {
            out.insert_str(0, "--- screen (full-screen program) ---\n");
        }
        if let Some(p) = self.prompt.as_ref().filter(|_| !self.output_is_screen) {
            let _ = writeln!(out, "{p}");
        }
        out.push_str(&self.status_line());
        out
    }

    /// The status line (`[reason · status · cursor]`), and the hint when the
    /// next step is not obvious.
    fn status_line(&self) -> String {
        let mut status = format!("[{}", self.reason);
        if let Some(m) = &self.matched {
            let _ = write!(status, " {m:?}");
        }
        if self.reason == vocab::WaitReason::InputRequested && self.full_screen() {
            status.push_str(": a full-screen program waits for keys; process_send_keys");
        } else if self.reason == vocab::WaitReason::InputRequested {
            status.push_str(": it waits for input; answer with process_run");
            if self.input_source == Some(vocab::InputSource::Heuristic) {
                status.push_str(" (a guess from its screen)");
            }
            if self.bytes == 0 {
                status.push_str(" · no new output");
            }
        }
        if let Some(code) = self.command_exit_code {
            let _ = write!(status, " · command exit {code}");
        }
        let _ = write!(status, " · status={}", self.status);
        match (self.exit_code, self.exit_signal) {
            (Some(c), _) => {
                let _ = write!(status, " exit {c}");
            }
            (None, Some(s)) => {
                let _ = write!(status, " signal {s}");
            }
            _ => {}
        }
        if self.alternate_screen && !self.output_is_screen {
            status.push_str(" · full-screen program: use process_screen");
        }
        let _ = write!(status, " · cursor=\"{}\"]", self.cursor);
        if (self.reason == vocab::WaitReason::Timeout || self.awaiting_secret)
            && let Some(h) = &self.hint
        {
            let _ = write!(status, "\n[{h}]");
        }
        status
    }
}

/// Longest prompt a result carries: a prompt is the end of a line
/// (">>> ", "Password: ", "Overwrite? [y/N] "), not a screen row.
const PROMPT_CHARS: usize = 200;

/// `process_send_keys` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct KeysSent {
    /// Process id.
    pub(crate) id: u64,
    /// Bytes written.
    pub(crate) written: u64,
}

/// An agent as agents see it.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentInfo {
    /// Process id of its terminal.
    pub(crate) id: u64,
    /// Name (claude, codex...).
    pub(crate) name: String,
    /// running, awaiting_input, done, idle, exited or unknown.
    pub(crate) state: String,
    /// hook, osc, heuristic or lifecycle.
    pub(crate) source: String,
    /// False for heuristic guesses.
    pub(crate) exact: bool,
    /// Why (permission, question, an exit code...).
    pub(crate) reason: String,
    /// Milliseconds in this state.
    pub(crate) age_ms: u64,
    /// The agent's own session id, when its hooks sent it.
    pub(crate) session_id: String,
    /// The dialog it shows (a permission request or a menu): answer it with
    /// process_send_keys (or leave it to a person); agent_send never types
    /// into it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dialog: Option<String>,
}

impl From<&pb::Agent> for AgentInfo {
    fn from(a: &pb::Agent) -> Self {
        let source = vocab::AgentSource::from(a.source()).as_str();
        Self {
            id: a.id,
            name: a.name.clone(),
            state: vocab::AgentState::from(a.state()).as_str().into(),
            source: source.into(),
            exact: a.exact,
            reason: a.reason.clone(),
            age_ms: a.age_ms,
            session_id: a.session_id.clone(),
            dialog: (!a.dialog.is_empty()).then(|| a.dialog.clone()),
        }
    }
}

/// `agent_list` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentsListed {
    /// Most urgent first.
    pub(crate) agents: Vec<AgentInfo>,
    /// Tally such as "wait:1 done:2 run:3".
    pub(crate) summary: String,
}

/// A `workspace_*` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WorkspaceReport {
    /// Its name.
    pub(crate) workspace: String,
    /// Its members in start order.
    pub(crate) members: Vec<MemberInfo>,
}

/// One member of a workspace.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MemberInfo {
    /// Its name (its process's name).
    pub(crate) member: String,
    /// Its process, once started.
    pub(crate) id: Option<u64>,
    /// running, exited, killed... or not_started.
    pub(crate) status: String,
    /// Exit code, when it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) exit_code: Option<i32>,
    /// While running: running, awaiting_input, awaiting_secret, idle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) input_state: Option<String>,
    /// The agent in it, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) agent_state: Option<String>,
    /// Restarts after failures.
    pub(crate) restarts: u32,
}

/// One state change.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentChange {
    /// Sequence number.
    pub(crate) seq: u64,
    /// Process id.
    pub(crate) id: u64,
    /// Agent name.
    pub(crate) name: String,
    /// State before.
    pub(crate) before: String,
    /// State after.
    pub(crate) after: String,
    /// Why.
    pub(crate) reason: String,
}

/// `agent_watch` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentsWatched {
    /// Changes after the cursor (empty when the timeout passed first).
    pub(crate) changes: Vec<AgentChange>,
    /// Pass as `cursor` next time.
    pub(crate) cursor: u64,
}

/// One agent's outcome.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentOutcome {
    /// Process id.
    pub(crate) id: u64,
    /// reached, timeout, exited, vanished, stopped or not_an_agent.
    pub(crate) outcome: String,
    /// Its state when the call returned.
    pub(crate) state: String,
    /// For agent_send: the prompt was typed.
    pub(crate) sent: Option<bool>,
    /// For agent_send: an earlier call with the same key typed it.
    pub(crate) deduplicated: Option<bool>,
    /// Why not sent; for not_an_agent, what to do instead.
    pub(crate) detail: Option<String>,
    /// For agent_send: the dialog that stopped it (answer it with
    /// process_send_keys, then send again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dialog: Option<String>,
}

/// `agent_wait` and `agent_send` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentOutcomes {
    /// One per id, in the order given.
    pub(crate) results: Vec<AgentOutcome>,
}

/// `agent_hooks` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct HooksReported {
    /// One per agent.
    pub(crate) reports: Vec<HookStatus>,
}

/// One agent's hooks.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct HookStatus {
    /// claude or codex.
    pub(crate) agent: String,
    /// The settings file.
    pub(crate) path: String,
    /// installed, outdated, absent or not_detected.
    pub(crate) status: String,
    /// What changed.
    pub(crate) change: String,
    /// What the user still has to do.
    pub(crate) note: String,
}
