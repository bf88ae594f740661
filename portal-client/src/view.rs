//! One managed process as every client shows it: the view the MCP
//! shim's results carry (field names the original tools used) and the
//! CLI's `--json` prints, so a fact has one name (`pty`, `inactive_ms`,
//! `rows`) wherever a model or a script reads it.

use std::collections::BTreeMap;

use portal_proto::v1 as pb;
use schemars::JsonSchema;
use serde::Serialize;

use crate::vocab;

/// A managed process as agents see it. Fields at their default (false, 0,
/// empty) are left out of the structured result: it is what Claude Code and
/// Codex hand their model, and every character is paid on every turn.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ProcessView {
    /// The host it runs on, when it is not this machine (or every host was
    /// listed).
    pub host: Option<String>,
    /// Process id.
    pub id: u64,
    /// Unique name, if one was given.
    pub name: Option<String>,
    /// OS pid.
    pub pid: u32,
    /// How it stands; left out beside a wait's outcome, which says it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<vocab::Status>,
    /// Started on a PTY (absent: pipes).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub pty: bool,
    /// Program.
    pub command: String,
    /// Arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Working directory (left out of lists: process_inspect says it).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cwd: String,
    /// Environment overrides given at start.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Exit code, once it exited normally.
    pub exit_code: Option<i32>,
    /// Signal number that ended it.
    pub exit_signal: Option<i32>,
    /// Idle timeout (absent: none).
    #[serde(skip_serializing_if = "is_zero")]
    pub timeout_ms: u64,
    /// Milliseconds since a tool call last named it.
    #[serde(skip_serializing_if = "is_zero")]
    pub inactive_ms: u64,
    /// Terminal rows (PTY).
    pub rows: Option<u32>,
    /// Terminal columns (PTY).
    pub cols: Option<u32>,
    /// Bytes of standard output (all terminal output for a PTY).
    #[serde(skip_serializing_if = "is_zero")]
    pub stdout_bytes: u64,
    /// Bytes of standard error.
    #[serde(skip_serializing_if = "is_zero")]
    pub stderr_bytes: u64,
    /// Bytes written to its input.
    #[serde(skip_serializing_if = "is_zero")]
    pub stdin_bytes: u64,
    /// Bytes its log lost (reads mark where).
    #[serde(skip_serializing_if = "is_zero")]
    pub lost_bytes: u64,
    /// Records in its log (chunks of input and output): for the text only.
    #[serde(skip)]
    #[schemars(skip)]
    pub io_count: u64,
    /// It waits for a password or passphrase (echo off). Do not type it:
    /// ask the person to run `portal-cli secret <id>`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub awaiting_secret: bool,
    /// awaiting_input: blocked reading its input (type the next command);
    /// idle: quiet, not reading input (a timer, the network). Left out once
    /// it ended and beside a wait's outcome.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_state: Option<vocab::InputState>,
    /// What decided input_state when it was a guess (heuristic); absent
    /// when the kernel said.
    #[serde(skip_serializing_if = "is_kernel")]
    pub input_source: Option<vocab::InputSource>,
    /// The next step, when the process needs one of a person.
    pub hint: Option<String>,
}

/// For `skip_serializing_if`: the input state came from the kernel (the
/// usual case, not worth a field).
#[allow(clippy::ref_option, reason = "serde's skip_serializing_if passes a reference")]
fn is_kernel(source: &Option<vocab::InputSource>) -> bool {
    matches!(source, None | Some(vocab::InputSource::Kernel))
}

impl ProcessView {
    /// This process beside a wait's outcome: its status and input state
    /// (and what decided it) are the wait's, said once.
    #[must_use]
    pub fn beside_wait(self) -> Self {
        Self { status: None, input_state: None, input_source: None, ..self }
    }

    /// This process as a list shows it: without its working directory.
    #[must_use]
    pub fn listed(self) -> Self {
        Self { cwd: String::new(), ..self }
    }

    /// The status for the text tables (none beside a wait's outcome).
    #[must_use]
    pub fn status_text(&self) -> &'static str {
        self.status.map_or("", vocab::Status::as_str)
    }

    /// What decided the input state, for the text tables.
    #[must_use]
    pub fn input_source_text(&self) -> &'static str {
        self.input_source.map_or(vocab::InputSource::None.as_str(), vocab::InputSource::as_str)
    }

    /// The input state for the text tables: an ended process's is "exited".
    #[must_use]
    pub fn input_state_text(&self) -> &'static str {
        self.input_state.map_or(vocab::InputState::Exited.as_str(), vocab::InputState::as_str)
    }
}

impl ProcessView {
    /// The view of `p`, a process of `host` (`None`: this machine's): the
    /// host names it in the commands the view tells a person to run.
    #[must_use]
    pub fn of(p: &pb::Process, host: Option<&str>) -> Self {
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
            hint: p.awaiting_secret.then(|| secret_hint(host, p.id)),
        }
    }
}

impl ProcessView {
    /// "exit 3", "signal 9", or "" while running.
    #[must_use]
    pub fn exit_text(&self) -> String {
        match (self.exit_code, self.exit_signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("signal {s}"),
            (None, None) => String::new(),
        }
    }
}

/// What to do about a password prompt: hand it to a person, with the
/// command for the process's host (run as `portal-cli secret 12`, it would
/// type into this machine's process 12).
#[must_use]
pub fn secret_hint(host: Option<&str>, id: u64) -> String {
    format!(
        "it waits for a password: ask the person to run `{}`; never type it yourself",
        crate::hosts::secret_command(host, &id.to_string())
    )
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}
