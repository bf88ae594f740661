//! The blocking tools: process_wait (one process, or several at once) and
//! process_run, and the result of a wait on several processes.

use std::fmt::Write as _;

use portal_client::waits::{self, Mode};
use portal_proto::v1 as pb;
use schemars::JsonSchema;
use serde::Serialize;

use super::process::{cursor_arg, read_budget};
use super::{Progress, Reply, Shim, by_id};
use crate::args::{ModeArg, NewSource, RunArgs, Until, WaitArgs};
use crate::results::Waited;

fn condition(u: &Until) -> Result<pb::WaitCondition, String> {
    Ok(pb::WaitCondition {
        needle: u.pattern.clone().unwrap_or_default(),
        regex: u.regex,
        on_screen: u.on_screen,
        stop: u.stop.clone(),
        settle_ms: u.settle_ms.unwrap_or(0),
        screen_stable: u.screen_stable,
        max_bytes: read_budget(u.max_bytes)?,
        timeout_ms: u.timeout_ms.unwrap_or(0),
        snapshot: u.snapshot,
        input: u.on_input,
        raw_output: u.raw_output,
    })
}

impl Shim {
    pub(super) async fn wait(&self, a: WaitArgs, progress: Progress) -> Reply<WaitReply> {
        let streams = match a.source {
            NewSource::Stdout => vec![pb::Stream::Stdout],
            NewSource::Stderr => vec![pb::Stream::Stderr],
            NewSource::Both => vec![pb::Stream::Stdout, pb::Stream::Stderr],
        };
        let id = match (a.id, a.ids.is_empty()) {
            (Some(id), true) if a.mode.is_none() => id,
            (None, false) if a.cursor.is_none() => {
                return self.wait_many(a, streams, progress).await;
            }
            (None, false) => {
                return Err("Error: cursor: a cursor belongs to one process; with ids each wait starts where its process's last read_new, wait or run stopped.".into());
            }
            (Some(_), true) => {
                return Err(
                    "Error: mode: it chooses between several processes: give them as ids.".into()
                );
            }
            (Some(_), false) => return Err("Error: give id or ids, not both.".into()),
            (None, true) => return Err("Error: id: name the process (or several as ids).".into()),
        };
        let from = a.cursor.as_deref().map(cursor_arg).transpose()?;
        let snapshot = a.until.snapshot;
        let req = pb::WaitRequest {
            proc: by_id(id),
            streams: streams.into_iter().map(Into::into).collect(),
            from,
            until: Some(condition(&a.until)?),
        };
        let call = self.call(Some(id), |mut c| {
            let req = req.clone();
            async move { c.wait(req).await }
        });
        let r = self.with_progress(&progress, "waiting", Some(id), call).await?;
        let w = Waited::new(id, r, snapshot);
        Ok((w.text_block(), WaitReply::One(Box::new(w))))
    }

    /// process_wait on several processes (see [`portal_client::waits`]).
    async fn wait_many(
        &self,
        a: WaitArgs,
        streams: Vec<pb::Stream>,
        progress: Progress,
    ) -> Reply<WaitReply> {
        let mode = match a.mode {
            Some(ModeArg::All) => Mode::All,
            Some(ModeArg::Any) | None => Mode::Any,
        };
        let procs: Vec<pb::ProcRef> = a.ids.iter().filter_map(|id| by_id(*id)).collect();
        let until = condition(&a.until)?;
        let call = self.call(None, |c| {
            let (procs, streams, until) = (procs.clone(), streams.clone(), until.clone());
            async move {
                waits::wait_many(&c, &procs, &streams, &until, mode).await.map(tonic::Response::new)
            }
        });
        let r = self.with_progress(&progress, "waiting", None, call).await?;
        let many = WaitedMany::new(r, a.until.snapshot);
        Ok((many.text(mode), WaitReply::Many(many)))
    }

    pub(super) async fn run(&self, a: RunArgs, progress: Progress) -> Reply<Waited> {
        let snapshot = a.until.snapshot;
        let req = pb::RunRequest {
            proc: by_id(a.id),
            input: a.input,
            no_enter: !a.enter,
            until: Some(condition(&a.until)?),
        };
        let call = self.call_once(Some(a.id), |mut c| {
            let req = req.clone();
            async move { c.run(req).await }
        });
        let r = self.with_progress(&progress, "running", Some(a.id), call).await?;
        let w = Waited::new(a.id, r, snapshot);
        Ok((w.text_block(), w))
    }
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
    pub(crate) status: Option<String>,
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
    fn new(r: waits::WaitedMany, snapshot: bool) -> Self {
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
                        reason: w.reason.clone(),
                        prompt: w.prompt.clone(),
                        matched: w.matched.clone(),
                        output: w.output.clone(),
                        status: (w.status != "running").then(|| w.status.clone()),
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
    fn text(&self, mode: Mode) -> String {
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
