//! The MCP server: one function per tool that converts arguments, calls
//! `portald`, and renders the answer (the tools themselves are described in
//! `catalog.rs`). The shim holds no process state: everything lives in the
//! daemon, so a restarted shim sees it all.

use crate::catalog::ToolId;
use crate::schema::without_nulls;
use crate::surface::Surface;
use std::sync::Arc;

use bytes::Bytes;
use portal_proto::names;
use portal_proto::v1 as pb;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RequestContext};
use rmcp::{RoleServer, ServerHandler};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::args::{
    AgentHooksArgs, AgentListArgs, AgentSendArgs, AgentStateArg, AgentWaitArgs, AgentWatchArgs,
    HookActionArg, HookAgentArg, IdArgs, KeyArg, ModeArg, NewSource, NoArgs, QueryArgs, ReadArgs,
    ReadNewArgs, RecordArgs, RunArgs, ScreenArgs, SendKeysArgs, SignalArgs, Source, StartArgs,
    Unit, Until, WaitArgs, WriteArgs,
};
use crate::errors::error_text;
use crate::link::{CallError, DaemonLink};
use crate::results::{
    self, AgentChange, AgentInfo, AgentOutcome, AgentOutcomes, AgentsListed, AgentsWatched, Done,
    HookStatus, HooksReported, Inspected, KeysSent, KilledAll, Listed, Output, ProcessInfo,
    Program, Screen, Signalled, Started, Waited, Written,
};

/// Server instructions, kept under 2 KB (checked by a test).
pub(crate) const INSTRUCTIONS: &str = include_str!("instructions.md");

/// Default page of a read, in bytes of output: a screenful of logs many times
/// over, small enough for an agent's context.
const DEFAULT_READ_BYTES: u64 = 64 << 10;

/// Largest page an agent may ask for; beyond it, page with the cursor.
const MAX_READ_BYTES: u64 = 1 << 20;

/// How often a blocked wait tells the client it is alive (when the client
/// asked for progress): well inside clients' idle cut-offs.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Longest output line a progress notification carries: a status line in a
/// client's UI, not a log.
const PROGRESS_LINE_CHARS: usize = 160;

/// The MCP server.
#[derive(Clone)]
pub(crate) struct Shim {
    link: Arc<DaemonLink>,
    surface: Arc<Surface>,
    tools: Arc<Vec<Tool>>,
    cwd: String,
}

type ToolResult = Result<CallToolResult, String>;

/// Where to send progress notifications, if the client asked for them.
type Progress = Option<(Peer<RoleServer>, ProgressToken)>;

fn agent_state(s: AgentStateArg) -> pb::AgentState {
    s.0
}

fn condition(u: &Until) -> pb::WaitCondition {
    pb::WaitCondition {
        needle: u.pattern.clone().unwrap_or_default(),
        regex: u.regex,
        on_screen: u.on_screen,
        stop: u.stop.clone(),
        settle_ms: u.settle_ms.unwrap_or(0),
        screen_stable: u.screen_stable,
        max_bytes: u.max_bytes.unwrap_or(0),
        timeout_ms: u.timeout_ms.unwrap_or(0),
        snapshot: u.snapshot,
        input: u.on_input,
        raw_output: u.raw_output,
    }
}

fn by_id(id: u64) -> Option<pb::ProcRef> {
    Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) })
}

fn ok<T: Serialize>(text: String, value: &T) -> ToolResult {
    let structured =
        serde_json::to_value(value).map_err(|e| format!("Error: cannot encode the result: {e}"))?;
    let structured = without_nulls(structured);
    let mut result = CallToolResult::structured(structured);
    result.content = vec![ContentBlock::text(text)];
    Ok(result)
}

/// Reads a tool's arguments; an error names the argument (`timeout_ms:
/// invalid type: string "5000", expected u64`), not only the type.
fn parse<T: DeserializeOwned>(tool: &str, args: JsonObject) -> Result<T, String> {
    let culprits = args.clone();
    serde_path_to_error::deserialize(serde_json::Value::Object(args)).map_err(|e| {
        let path = e.path().to_string();
        let what = e.into_inner().to_string();
        // Arguments read through a flattened group lose their path: find the
        // argument by the value the message quotes.
        let path = if path == "." { culprit(&culprits, &what).unwrap_or(path) } else { path };
        let named = if path == "." { what } else { format!("{path}: {what}") };
        format!("Error: invalid arguments for {tool}: {named}\nFix that argument and call again.")
    })
}

/// The argument whose value a serde type error quotes (`invalid type:
/// string "5000", expected u64`), when exactly one argument has it.
fn culprit(args: &JsonObject, message: &str) -> Option<String> {
    let rest = message.strip_prefix("invalid type: ")?;
    let matches = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => rest.starts_with(&format!("string {s:?},")),
        serde_json::Value::Number(n) => {
            rest.starts_with(&format!("integer `{n}`,"))
                || rest.starts_with(&format!("floating point `{n}`,"))
        }
        serde_json::Value::Bool(b) => rest.starts_with(&format!("boolean `{b}`,")),
        _ => false,
    };
    let mut found = args.iter().filter(|(_, v)| matches(v)).map(|(k, _)| k.clone());
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

fn read_budget(max_bytes: Option<u64>) -> Result<u64, String> {
    match max_bytes {
        None | Some(0) => Ok(DEFAULT_READ_BYTES),
        Some(n) if n > MAX_READ_BYTES => Err(format!(
            "Error: max_bytes {n} is more than {MAX_READ_BYTES}\nPage through long output with the returned cursor instead."
        )),
        Some(n) => Ok(n),
    }
}

fn cursor_arg(c: &str) -> Result<pb::Cursor, String> {
    results::parse_cursor(c)
        .map_err(|e| format!("Error: {e}\nPass the cursor string exactly as a read returned it."))
}

impl Shim {
    /// A shim talking to the daemon through `link`, offering the tools of
    /// `surface`; `cwd` is the default working directory for started
    /// programs.
    pub(crate) fn new(link: Arc<DaemonLink>, surface: Surface, cwd: String) -> Self {
        let tools = surface.tools().map(ToolId::tool).collect();
        Self { link, surface: Arc::new(surface), tools: Arc::new(tools), cwd }
    }

    async fn call<T, F, Fut>(&self, id: Option<u64>, f: F) -> Result<T, String>
    where
        F: Fn(pb::portal_client::PortalClient<tonic::transport::Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        self.link.call(f).await.map_err(|e: CallError| error_text(&e, id))
    }

    /// Turns process names in `id` and `ids` into ids (every tool that
    /// names a process takes its name too); a name nobody has is an error
    /// that says so.
    async fn resolve_names(&self, args: &mut JsonObject) -> Result<(), String> {
        async fn one(shim: &Shim, v: &mut serde_json::Value, arg: &str) -> Result<(), String> {
            let Some(text) = v.as_str().map(str::to_owned) else { return Ok(()) };
            if let Ok(id) = text.trim().parse::<u64>() {
                *v = serde_json::Value::from(id);
                return Ok(());
            }
            let target = pb::ProcRef { target: Some(pb::proc_ref::Target::Name(text.clone())) };
            let found = shim
                .call(None, |mut c| {
                    let proc = Some(target.clone());
                    async move { c.inspect(pb::InspectRequest { proc }).await }
                })
                .await
                .map_err(|_| {
                    format!(
                        "Error: {arg}: no process is named {text:?}. Give an id or a name from process_list."
                    )
                })?;
            *v = serde_json::Value::from(found.id);
            Ok(())
        }
        if let Some(v) = args.get_mut("id") {
            one(self, v, "id").await?;
        }
        if let Some(serde_json::Value::Array(items)) = args.get_mut("ids") {
            for (i, v) in items.iter_mut().enumerate() {
                one(self, v, &format!("ids[{i}]")).await?;
            }
        }
        Ok(())
    }

    /// Runs the tool `name`; `None` when there is no such tool.
    async fn dispatch(
        &self,
        name: &str,
        mut args: JsonObject,
        progress: Progress,
    ) -> Option<ToolResult> {
        let tool = ToolId::from_name(name)?;
        if !self.surface.offers(tool) {
            return Some(Err(self.surface.refusal(tool)));
        }
        if let Err(e) = self.resolve_names(&mut args).await {
            return Some(Err(e));
        }
        macro_rules! run {
            ($method:ident) => {
                match parse(name, args) {
                    Ok(a) => self.$method(a).await,
                    Err(e) => Err(e),
                }
            };
            ($method:ident, progress) => {
                match parse(name, args) {
                    Ok(a) => self.$method(a, progress).await,
                    Err(e) => Err(e),
                }
            };
        }
        Some(match tool {
            ToolId::ProcessStart => run!(start, progress),
            ToolId::ProcessRead => run!(read),
            ToolId::ProcessReadNew => run!(read_new),
            ToolId::ProcessWrite => run!(write),
            ToolId::ProcessSignal => run!(signal),
            ToolId::ProcessList => run!(list),
            ToolId::ProcessInspect => run!(inspect),
            ToolId::ProcessKill => run!(kill),
            ToolId::ProcessKillAll => run!(kill_all),
            ToolId::ProcessClear => run!(clear),
            ToolId::ProcessCleanup => run!(cleanup),
            ToolId::ProcessScreen => run!(screen),
            ToolId::ProcessWait => run!(wait, progress),
            ToolId::ProcessRun => run!(run, progress),
            ToolId::ProcessSendKeys => run!(send_keys),
            ToolId::AgentList => run!(agent_list),
            ToolId::AgentWatch => run!(agent_watch, progress),
            ToolId::AgentWait => run!(agent_wait, progress),
            ToolId::AgentSend => run!(agent_send, progress),
            ToolId::AgentHooks => run!(agent_hooks),
            ToolId::ProgramQuery => run!(program_query),
            ToolId::ProgramRecord => run!(program_record),
        })
    }

    async fn start(&self, a: StartArgs, progress: Progress) -> ToolResult {
        if !a.pty && (a.rows.is_some() || a.cols.is_some()) {
            return Err(
                "Error: rows and cols apply only with pty: true\nDrop them or set pty: true."
                    .into(),
            );
        }
        let req = pb::StartRequest {
            command: a.command,
            args: a.args,
            cwd: a.cwd.unwrap_or_else(|| self.cwd.clone()),
            env: a.env.unwrap_or_default().into_iter().collect(),
            name: a.name.unwrap_or_default(),
            timeout_ms: a.timeout_ms,
            mode: if a.pty { pb::Mode::Pty } else { pb::Mode::Pipes }.into(),
            size: a
                .pty
                .then(|| pb::TermSize { rows: a.rows.unwrap_or(0), cols: a.cols.unwrap_or(0) }),
        };
        let p = self
            .call(None, |mut c| {
                let req = req.clone();
                async move { c.start(req).await }
            })
            .await?;
        let process = ProcessInfo::from(&p);
        let streams: &[pb::Stream] = if process.pty {
            &[pb::Stream::Stdout]
        } else {
            &[pb::Stream::Stdout, pb::Stream::Stderr]
        };
        let from = pb::Cursor {
            offsets: streams
                .iter()
                .map(|s| pb::StreamOffset { stream: (*s).into(), offset: 0 })
                .collect(),
        };
        let cursor = results::cursor_string(Some(&from));
        let Some(wait) = a.wait else {
            let text = format!(
                "Process started. ID={}, OS_PID={}, status={}{}",
                process.id,
                process.pid,
                process.status,
                if process.pty {
                    " (pty; read with process_read_new or process_screen)"
                } else {
                    ""
                }
            );
            return ok(text, &Started { process, cursor, wait: None });
        };
        let mut until = pb::WaitCondition {
            timeout_ms: a.wait_timeout_ms.unwrap_or(0),
            ..pb::WaitCondition::default()
        };
        match wait.as_str() {
            "input" => until.input = Some(true),
            "exit" => until.input = Some(false),
            "" => {
                return Err(
                    "Error: wait is empty\nUse \"input\", \"exit\" or a text to wait for.".into()
                );
            }
            pattern => until.needle = pattern.to_owned(),
        }
        let id = process.id;
        let req = pb::WaitRequest {
            proc: by_id(id),
            streams: streams.iter().map(|s| (*s).into()).collect(),
            // A new process's "read new" position is its first byte; waiting
            // from it also moves it, so process_read_new does not repeat this.
            from: None,
            until: Some(until),
        };
        let call = self.call(Some(id), |mut c| {
            let req = req.clone();
            async move { c.wait(req).await }
        });
        let r = self.with_progress(&progress, "waiting", Some(id), call).await?;
        let w = Waited::new(id, r, false);
        // The process as it is now, after the wait.
        let process = match self
            .call(Some(id), |mut c| async move {
                c.inspect(pb::InspectRequest { proc: by_id(id) }).await
            })
            .await
        {
            Ok(p) => ProcessInfo::from(&p),
            Err(_) => process,
        };
        let text =
            format!("Process started. ID={}, OS_PID={}\n{}", process.id, process.pid, w.text());
        ok(text, &Started { process, cursor, wait: Some(w) })
    }

    async fn read_output(&self, id: u64, req: pb::ReadRequest) -> Result<Output, String> {
        let resp = self
            .call(Some(id), |mut c| {
                let req = req.clone();
                async move { c.read(req).await }
            })
            .await?;
        Ok(results::output(id, &resp))
    }

    async fn read(&self, a: ReadArgs) -> ToolResult {
        let max_bytes = read_budget(a.max_bytes)?;
        let streams = match a.source {
            Source::Stdout => vec![pb::Stream::Stdout],
            Source::Stderr => vec![pb::Stream::Stderr],
            Source::Stdin => vec![pb::Stream::Stdin],
            Source::Both => vec![pb::Stream::Stdout, pb::Stream::Stderr],
        };
        let (from, paging) = if let Some(c) = &a.cursor {
            (pb::read_request::From::Cursor(cursor_arg(c)?), true)
        } else {
            let per_unit: u64 = match a.unit {
                Unit::Ns => 1,
                Unit::Us => 1_000,
                Unit::Ms => 1_000_000,
                Unit::S => 1_000_000_000,
            };
            if a.duration == 0 {
                return Err("Error: duration must be more than 0\nUse e.g. duration=10000 for the last 10 s.".into());
            }
            (pb::read_request::From::LastNs(a.duration.saturating_mul(per_unit)), false)
        };
        let req = pb::ReadRequest {
            proc: by_id(a.id),
            streams: streams.into_iter().map(Into::into).collect(),
            from: Some(from),
            max_bytes,
            encoding: pb::Encoding::Text.into(),
            keep: if paging { pb::Keep::Head } else { pb::Keep::Tail }.into(),
        };
        let out = self.read_output(a.id, req).await?;
        let empty = if paging {
            "No output after this cursor."
        } else {
            "No output records found in the specified time window."
        };
        ok(results::output_text(&out, empty, paging), &out)
    }

    async fn read_new(&self, a: ReadNewArgs) -> ToolResult {
        let max_bytes = read_budget(a.max_bytes)?;
        let streams = match a.source {
            NewSource::Stdout => vec![pb::Stream::Stdout],
            NewSource::Stderr => vec![pb::Stream::Stderr],
            NewSource::Both => vec![pb::Stream::Stdout, pb::Stream::Stderr],
        };
        let from = match &a.cursor {
            Some(c) => pb::read_request::From::Cursor(cursor_arg(c)?),
            None => pb::read_request::From::ServerCursor(true),
        };
        let req = pb::ReadRequest {
            proc: by_id(a.id),
            streams: streams.into_iter().map(Into::into).collect(),
            from: Some(from),
            max_bytes,
            encoding: pb::Encoding::Text.into(),
            keep: pb::Keep::Tail.into(),
        };
        let out = self.read_output(a.id, req).await?;
        ok(results::output_text(&out, "No new output.", false), &out)
    }

    async fn write(&self, a: WriteArgs) -> ToolResult {
        let data = Bytes::from(a.content.into_bytes());
        let written = data.len() as u64;
        self.call(Some(a.id), |mut c| {
            let req = pb::WriteRequest { proc: by_id(a.id), data: data.clone(), secret: false };
            async move { c.write(req).await }
        })
        .await?;
        ok(
            format!("Written {written} bytes to process {} stdin.", a.id),
            &Written { id: a.id, written },
        )
    }

    async fn signal(&self, a: SignalArgs) -> ToolResult {
        let r = self
            .call(Some(a.id), |mut c| {
                let req = pb::SignalRequest { proc: by_id(a.id), signal: a.signal.clone() };
                async move { c.signal(req).await }
            })
            .await?;
        let text = format!("Signal {} ({}) sent to process {}.", r.name, r.signal, a.id);
        ok(text, &Signalled { id: a.id, signal: r.signal, name: r.name })
    }

    async fn list(&self, _: NoArgs) -> ToolResult {
        let r = self.call(None, |mut c| async move { c.list(pb::ListRequest {}).await }).await?;
        let processes: Vec<ProcessInfo> = r.processes.iter().map(ProcessInfo::from).collect();
        ok(results::list_text(&processes), &Listed { processes })
    }

    async fn inspect(&self, a: IdArgs) -> ToolResult {
        let p = self
            .call(Some(a.id), |mut c| async move {
                c.inspect(pb::InspectRequest { proc: by_id(a.id) }).await
            })
            .await?;
        let process = ProcessInfo::from(&p);
        ok(results::inspect_text(&process), &Inspected { process })
    }

    async fn kill(&self, a: IdArgs) -> ToolResult {
        let p =
            self.call(Some(a.id), |mut c| async move {
                c.kill(pb::KillRequest { proc: by_id(a.id) }).await
            })
            .await?;
        let process = ProcessInfo::from(&p);
        let text = if process.status == "killed" {
            format!(
                "Process {} killed. Status: killed. Its output is kept; process_cleanup removes it.",
                a.id
            )
        } else {
            format!(
                "Process {} had already ended (status={}{}); nothing to kill.",
                a.id,
                process.status,
                match process.exit_text() {
                    t if t.is_empty() => t,
                    t => format!(", {t}"),
                }
            )
        };
        ok(text, &Inspected { process })
    }

    async fn kill_all(&self, _: NoArgs) -> ToolResult {
        let r =
            self.call(None, |mut c| async move { c.kill_all(pb::KillAllRequest {}).await }).await?;
        ok(format!("Killed {} process(es).", r.killed.len()), &KilledAll { killed: r.killed })
    }

    async fn clear(&self, a: IdArgs) -> ToolResult {
        self.call(Some(a.id), |mut c| async move {
            c.clear(pb::ClearRequest { proc: by_id(a.id) }).await
        })
        .await?;
        ok(format!("Process {} I/O records cleared.", a.id), &Done { id: a.id })
    }

    async fn cleanup(&self, a: IdArgs) -> ToolResult {
        self.call(Some(a.id), |mut c| async move {
            c.cleanup(pb::CleanupRequest { proc: by_id(a.id) }).await
        })
        .await?;
        ok(format!("Process {} cleaned up.", a.id), &Done { id: a.id })
    }

    async fn screen(&self, a: ScreenArgs) -> ToolResult {
        let resize = (a.cols.is_some() || a.rows.is_some())
            .then(|| pb::TermSize { rows: a.rows.unwrap_or(0), cols: a.cols.unwrap_or(0) });
        let s = self
            .call(Some(a.id), |mut c| async move {
                c.screen(pb::ScreenRequest { proc: by_id(a.id), resize }).await
            })
            .await?;
        let size = s.size.unwrap_or_default();
        let screen = Screen {
            id: s.id,
            status: names::status(s.status()).into(),
            buffer: if s.alternate_screen { "alternate" } else { "primary" }.into(),
            cols: size.cols,
            rows: size.rows,
            cursor_x: s.cursor_col,
            cursor_y: s.cursor_row,
            title: s.title,
            lines: s.lines,
        };
        ok(results::screen_text(&screen), &screen)
    }

    /// Runs a blocking call, telling the client it is alive every
    /// [`PROGRESS_EVERY`] when it asked for progress. With a process id, each
    /// notification carries the newest line the process printed, so a client
    /// shows what a long command is doing.
    async fn with_progress<T>(
        &self,
        progress: &Progress,
        what: &str,
        id: Option<u64>,
        call: impl Future<Output = T>,
    ) -> T {
        let Some((peer, token)) = progress else { return call.await };
        tokio::pin!(call);
        let started = tokio::time::Instant::now();
        let mut tick = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
        loop {
            tokio::select! {
                out = &mut call => return out,
                _ = tick.tick() => {
                    let secs = started.elapsed().as_secs_f64();
                    let mut message = format!("{what}: {secs:.0} s");
                    if let Some(line) = match id {
                        Some(id) => self.newest_line(id).await,
                        None => None,
                    } {
                        message.push_str(" · ");
                        message.push_str(&line);
                    }
                    let note = ProgressNotificationParam::new(token.clone(), secs).with_message(message);
                    if let Err(e) = peer.notify_progress(note).await {
                        tracing::debug!(error = %e, "progress notification not sent");
                    }
                }
            }
        }
    }

    /// The last non-blank line a process printed (from the newest output,
    /// without moving any cursor), cut to [`PROGRESS_LINE_CHARS`].
    async fn newest_line(&self, id: u64) -> Option<String> {
        let req = pb::ReadRequest {
            proc: by_id(id),
            from: Some(pb::read_request::From::Tail(true)),
            max_bytes: 1024,
            encoding: pb::Encoding::Text.into(),
            ..Default::default()
        };
        let resp = self
            .link
            .call(|mut c| {
                let req = req.clone();
                async move { c.read(req).await }
            })
            .await
            .ok()?;
        let text: String =
            resp.records.iter().map(|r| String::from_utf8_lossy(&r.data).into_owned()).collect();
        let line = text.lines().rev().find(|l| !l.trim().is_empty())?.trim_end();
        Some(line.chars().take(PROGRESS_LINE_CHARS).collect())
    }

    async fn wait(&self, a: WaitArgs, progress: Progress) -> ToolResult {
        let streams = match a.source {
            NewSource::Stdout => vec![pb::Stream::Stdout],
            NewSource::Stderr => vec![pb::Stream::Stderr],
            NewSource::Both => vec![pb::Stream::Stdout, pb::Stream::Stderr],
        };
        let from = a.cursor.as_deref().map(cursor_arg).transpose()?;
        let snapshot = a.until.snapshot;
        let req = pb::WaitRequest {
            proc: by_id(a.id),
            streams: streams.into_iter().map(Into::into).collect(),
            from,
            until: Some(condition(&a.until)),
        };
        let call = self.call(Some(a.id), |mut c| {
            let req = req.clone();
            async move { c.wait(req).await }
        });
        let r = self.with_progress(&progress, "waiting", Some(a.id), call).await?;
        let w = Waited::new(a.id, r, snapshot);
        ok(w.text(), &w)
    }

    async fn run(&self, a: RunArgs, progress: Progress) -> ToolResult {
        let snapshot = a.until.snapshot;
        let req = pb::RunRequest {
            proc: by_id(a.id),
            input: a.input,
            no_enter: !a.enter,
            until: Some(condition(&a.until)),
        };
        let call = self.call(Some(a.id), |mut c| {
            let req = req.clone();
            async move { c.run(req).await }
        });
        let r = self.with_progress(&progress, "running", Some(a.id), call).await?;
        let w = Waited::new(a.id, r, snapshot);
        ok(w.text(), &w)
    }

    async fn send_keys(&self, a: SendKeysArgs) -> ToolResult {
        let keys: Vec<pb::KeyInput> = a
            .keys
            .into_iter()
            .map(|k| pb::KeyInput {
                input: Some(match k {
                    KeyArg::Key(name) => pb::key_input::Input::Key(name),
                    KeyArg::Text { text } => pb::key_input::Input::Text(text),
                }),
            })
            .collect();
        let r = self
            .call(Some(a.id), |mut c| {
                let req = pb::SendKeysRequest { proc: by_id(a.id), keys: keys.clone() };
                async move { c.send_keys(req).await }
            })
            .await?;
        ok(
            format!("Sent {} bytes of keys to process {}.", r.written, a.id),
            &KeysSent { id: a.id, written: r.written },
        )
    }

    async fn agent_list(&self, a: AgentListArgs) -> ToolResult {
        let states: Vec<i32> = a.states.iter().map(|s| agent_state(*s).into()).collect();
        let r = self
            .call(None, |mut c| {
                let req = pb::AgentListRequest { states: states.clone() };
                async move { c.agent_list(req).await }
            })
            .await?;
        let agents: Vec<AgentInfo> = r.agents.iter().map(AgentInfo::from).collect();
        let mut text = if agents.is_empty() { "No agents.".to_owned() } else { String::new() };
        for x in &agents {
            text.push_str(&format!(
                "{} {} {} ({}{}) {}\n",
                x.id,
                if x.name.is_empty() { "agent" } else { &x.name },
                x.state,
                x.source,
                if x.exact { "" } else { ", a guess" },
                x.reason
            ));
            if let Some(d) = &x.dialog {
                text.push_str(&format!(
                    "  it shows a dialog (answer with process_send_keys):\n  {}\n",
                    d.replace('\n', "\n  ")
                ));
            }
        }
        if !r.summary.is_empty() {
            text.push_str(&r.summary);
        }
        ok(text, &AgentsListed { agents, summary: r.summary })
    }

    async fn agent_watch(&self, a: AgentWatchArgs, progress: Progress) -> ToolResult {
        let mut since = a.cursor;
        if since.is_none() {
            let now = self
                .call(None, |mut c| async move {
                    c.agent_watch(pb::AgentWatchRequest {
                        since: u64::MAX,
                        timeout_ms: 1,
                        ..Default::default()
                    })
                    .await
                })
                .await?;
            since = Some(now.cursor);
        }
        let req = pb::AgentWatchRequest {
            since: since.unwrap_or(0),
            timeout_ms: a.timeout_ms.unwrap_or(0),
            ids: a.ids,
            states: a.states.iter().map(|s| agent_state(*s).into()).collect(),
        };
        let call = self.call(None, |mut c| {
            let req = req.clone();
            async move { c.agent_watch(req).await }
        });
        let r = self.with_progress(&progress, "watching agents", None, call).await?;
        let changes: Vec<AgentChange> = r
            .transitions
            .iter()
            .map(|t| AgentChange {
                seq: t.seq,
                id: t.id,
                name: t.name.clone(),
                before: names::agent_state(t.before()).into(),
                after: names::agent_state(t.after()).into(),
                reason: t.reason.clone(),
            })
            .collect();
        let mut text: String = changes
            .iter()
            .map(|c| format!("{} {}: {} -> {} {}\n", c.id, c.name, c.before, c.after, c.reason))
            .collect();
        if changes.is_empty() {
            text.push_str("No changes before the timeout.\n");
        }
        text.push_str(&format!("[cursor={}]", r.cursor));
        ok(text, &AgentsWatched { changes, cursor: r.cursor })
    }

    async fn agent_wait(&self, a: AgentWaitArgs, progress: Progress) -> ToolResult {
        let req = pb::AgentWaitRequest {
            ids: a.ids,
            states: a.states.iter().map(|s| agent_state(*s).into()).collect(),
            mode: match a.mode {
                ModeArg::All => pb::WaitMode::All,
                ModeArg::Any => pb::WaitMode::Any,
            }
            .into(),
            timeout_ms: a.timeout_ms.unwrap_or(0),
        };
        let call = self.call(None, |mut c| {
            let req = req.clone();
            async move { c.agent_wait(req).await }
        });
        let r = self.with_progress(&progress, "waiting for agents", None, call).await?;
        let results: Vec<AgentOutcome> = r
            .results
            .iter()
            .map(|x| AgentOutcome {
                id: x.id,
                outcome: names::agent_wait_outcome(x.outcome()).into(),
                state: x.agent.as_ref().map_or("unknown", |g| names::agent_state(g.state())).into(),
                sent: None,
                deduplicated: None,
                detail: None,
                dialog: None,
            })
            .collect();
        let text = results
            .iter()
            .map(|x| format!("{}: {} ({})", x.id, x.outcome, x.state))
            .collect::<Vec<_>>()
            .join("\n");
        ok(text, &AgentOutcomes { results })
    }

    async fn agent_send(&self, a: AgentSendArgs, progress: Progress) -> ToolResult {
        let req = pb::AgentSendRequest {
            ids: a.ids,
            text: a.text,
            wait_ready: Some(a.wait_ready),
            ready_states: vec![],
            no_enter: !a.enter,
            key: a.key.unwrap_or_default(),
            timeout_ms: a.timeout_ms.unwrap_or(0),
        };
        let call = self.call(None, |mut c| {
            let req = req.clone();
            async move { c.agent_send(req).await }
        });
        let r = self.with_progress(&progress, "sending", None, call).await?;
        let results: Vec<AgentOutcome> = r
            .results
            .iter()
            .map(|x| AgentOutcome {
                id: x.id,
                outcome: names::agent_wait_outcome(x.outcome()).into(),
                state: String::new(),
                sent: Some(x.sent),
                deduplicated: Some(x.deduplicated),
                detail: (!x.detail.is_empty()).then(|| x.detail.clone()),
                dialog: (!x.dialog.is_empty()).then(|| x.dialog.clone()),
            })
            .collect();
        let text = results
            .iter()
            .map(|x| match (x.sent, x.deduplicated) {
                (Some(true), Some(true)) => format!("{}: already sent with this key", x.id),
                (Some(true), _) => format!("{}: sent", x.id),
                _ => match &x.dialog {
                    Some(d) => format!(
                        "{}: not sent: it shows a dialog a prompt would answer; answer it with process_send_keys (or leave it to a person), then send again:\n{d}",
                        x.id
                    ),
                    None => format!(
                        "{}: not sent ({}; {})",
                        x.id,
                        x.outcome,
                        x.detail.as_deref().unwrap_or("")
                    ),
                },
            })
            .collect::<Vec<_>>()
            .join("\n");
        ok(text, &AgentOutcomes { results })
    }

    async fn agent_hooks(&self, a: AgentHooksArgs) -> ToolResult {
        let emitter = std::env::current_exe()
            .ok()
            .and_then(|e| Some(e.parent()?.join("portal-cli")))
            .filter(|p| p.exists())
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let req = pb::AgentHooksRequest {
            action: match a.action {
                HookActionArg::Status => pb::HookAction::Status,
                HookActionArg::Install => pb::HookAction::Install,
            }
            .into(),
            agent: match a.agent {
                HookAgentArg::Claude => pb::HookAgent::Claude,
                HookAgentArg::Codex => pb::HookAgent::Codex,
                HookAgentArg::All => pb::HookAgent::All,
            }
            .into(),
            dry_run: a.dry_run,
            emitter,
            home: std::env::var("HOME").unwrap_or_default(),
        };
        let r = self
            .call(None, |mut c| {
                let req = req.clone();
                async move { c.agent_hooks(req).await }
            })
            .await?;
        let reports: Vec<HookStatus> = r
            .reports
            .into_iter()
            .map(|x| HookStatus {
                agent: x.agent,
                path: x.path,
                status: x.status,
                change: x.change,
                note: x.note,
            })
            .collect();
        let text = reports
            .iter()
            .map(|x| {
                format!(
                    "{}: {} ({}){}{}",
                    x.agent,
                    x.status,
                    x.path,
                    if x.change.is_empty() { String::new() } else { format!("; {}", x.change) },
                    if x.note.is_empty() { String::new() } else { format!("\n  {}", x.note) }
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        ok(text, &HooksReported { reports })
    }

    async fn program_query(&self, a: QueryArgs) -> ToolResult {
        let p = self
            .call(None, |mut c| {
                let req = pb::ProgramQueryRequest { program: a.program.clone() };
                async move { c.program_query(req).await }
            })
            .await?;
        let program = Program::from(p);
        ok(program.query_text(), &program)
    }

    async fn program_record(&self, a: RecordArgs) -> ToolResult {
        let p = self
            .call(None, |mut c| {
                let req = pb::ProgramRecordRequest {
                    program: a.program.clone(),
                    needs_pty: a.needs_pty,
                    notes: a.notes.clone(),
                };
                async move { c.program_record(req).await }
            })
            .await?;
        let program = Program::from(p);
        ok(program.record_text(), &program)
    }
}

impl ServerHandler for Shim {
    fn get_info(&self) -> ServerConfig {
        let instructions = match self.surface.note() {
            Some(note) => format!("{INSTRUCTIONS}\n{note}\n"),
            None => INSTRUCTIONS.to_owned(),
        };
        let mut info = InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions(instructions);
        info.server_info = Implementation::new("portal", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        let args = request.arguments.unwrap_or_default();
        let progress = context.meta.get_progress_token().map(|t| (context.peer.clone(), t));
        // A cancelled call stops waiting; dropping the daemon call never
        // touches the process.
        let outcome = tokio::select! {
            r = Box::pin(self.dispatch(&name, args, progress)) => r,
            () = context.ct.cancelled() => {
                tracing::info!(tool = %name, "call cancelled by the client; the process is left alone");
                Some(Err("Error: cancelled by the client; the process was not touched.".to_owned()))
            }
        };
        match outcome {
            Some(Ok(result)) => Ok(result.into()),
            Some(Err(text)) => Ok(CallToolResult::error(vec![ContentBlock::text(text)]).into()),
            None => {
                let names: Vec<&str> = self.tools.iter().map(|t| t.name.as_ref()).collect();
                let text =
                    format!("Error: unknown tool {name:?}\nUse one of: {}.", names.join(", "));
                Ok(CallToolResult::error(vec![ContentBlock::text(text)]).into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_are_compact() {
        assert!(INSTRUCTIONS.len() < 2048, "instructions are {} bytes", INSTRUCTIONS.len());
    }
}
