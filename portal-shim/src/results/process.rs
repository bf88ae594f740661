//! The process view: [`ProcessInfo`], a managed process as agents see it,
//! and the results of the tools that start, list, inspect, write to,
//! signal, kill and clean up processes, with the table and the inspect
//! block their text shows.

use std::fmt::Write as _;

use portal_proto::v1 as pb;
use schemars::JsonSchema;
use serde::Serialize;

use super::secret_command;
use super::waits::Waited;

/// A managed process as agents see it: the view the CLI's `--json` shares.
pub(crate) use portal_client::view::ProcessView as ProcessInfo;

/// The view of `p` for this call's host (its hints name the host).
pub(crate) fn process_info(p: &pb::Process) -> ProcessInfo {
    ProcessInfo::of(p, crate::hosts::call_host().as_deref())
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
