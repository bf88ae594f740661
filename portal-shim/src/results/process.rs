//! The process view: [`ProcessInfo`], a managed process as agents see it,
//! and the results of the tools that start, list, inspect, write to,
//! signal, kill and clean up processes, with the table and the inspect
//! block their text shows.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use portal_client::vocab;
use portal_proto::v1 as pb;
use schemars::JsonSchema;
use serde::Serialize;

use super::waits::Waited;
use super::{is_kernel, is_zero, secret_command, secret_hint};

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
