//! The blocking waits' results: [`Waited`] (`process_wait` on one process,
//! `process_run`, a start's `wait`), [`WaitedMany`] (a wait on several) and
//! [`WaitReply`], the one schema `process_wait` advertises for both; the
//! next step each suggests and the status line their text ends with.

use std::fmt::Write as _;

use portal_client::vocab;
use portal_client::waits::{self, Mode};
use portal_proto::v1 as pb;
use schemars::JsonSchema;
use serde::Serialize;

use super::reads::cursor_string;
use super::screen::written_rows;
use super::{is_kernel, secret_hint};

/// `process_wait` and `process_run` result. Fields marked
/// `#[schemars(skip)]` here and in [`Output`](super::Output) are returned
/// but left out of the output schema: `tools/list` is paid on every turn,
/// so it lists what a caller branches on.
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
    fn text(&self) -> String {
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
