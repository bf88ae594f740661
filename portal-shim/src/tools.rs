//! The MCP server: the tool table (names, descriptions, input and output
//! schemas, annotations) and one function per tool that converts arguments,
//! calls `portald`, and renders the answer. The shim holds no process state:
//! everything lives in the daemon, so a restarted shim sees it all.

use crate::schema::{Side, portable, without_nulls};
use std::sync::Arc;

use bytes::Bytes;
use portal_proto::names;
use portal_proto::v1 as pb;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RequestContext};
use rmcp::{RoleServer, ServerHandler};
use schemars::JsonSchema;
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
    tools: Arc<Vec<Tool>>,
    cwd: String,
}

type ToolResult = Result<CallToolResult, String>;

/// Where to send progress notifications, if the client asked for them.
type Progress = Option<(Peer<RoleServer>, ProgressToken)>;

fn agent_state(s: AgentStateArg) -> pb::AgentState {
    match s {
        AgentStateArg::Running => pb::AgentState::Running,
        AgentStateArg::AwaitingInput => pb::AgentState::AwaitingInput,
        AgentStateArg::Done => pb::AgentState::Done,
        AgentStateArg::Idle => pb::AgentState::Idle,
        AgentStateArg::Exited => pb::AgentState::Exited,
        AgentStateArg::Unknown => pb::AgentState::Unknown,
    }
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

fn schema<T: JsonSchema>(side: Side) -> Arc<JsonObject> {
    match serde_json::to_value(schemars::schema_for!(T)) {
        Ok(serde_json::Value::Object(map)) => Arc::new(portable(map, side)),
        _ => Arc::new(JsonObject::new()),
    }
}

/// How a tool behaves, for clients deciding what to auto-approve.
#[derive(Clone, Copy)]
enum Kind {
    /// Reads only; repeating it changes nothing.
    ReadOnly,
    /// Moves a read cursor only.
    Cursor,
    /// Runs or feeds arbitrary programs.
    OpenWorld,
    /// Kills or deletes.
    Destructive,
    /// Records a fact.
    Mutating,
}

fn tool<A: JsonSchema, R: JsonSchema>(
    name: &'static str,
    title: &str,
    kind: Kind,
    description: &'static str,
) -> Tool {
    let base = ToolAnnotations::with_title(title);
    let annotations = match kind {
        Kind::ReadOnly => {
            base.read_only(true).destructive(false).idempotent(true).open_world(false)
        }
        Kind::Cursor => base.read_only(true).destructive(false).idempotent(false).open_world(false),
        Kind::OpenWorld => {
            base.read_only(false).destructive(false).idempotent(false).open_world(true)
        }
        Kind::Destructive => {
            base.read_only(false).destructive(true).idempotent(false).open_world(false)
        }
        Kind::Mutating => {
            base.read_only(false).destructive(false).idempotent(false).open_world(false)
        }
    };
    Tool::new(name, description, schema::<A>(Side::Input))
        .with_raw_output_schema(schema::<R>(Side::Output))
        .with_annotations(annotations)
}

/// Every tool, in the order agents see them.
pub(crate) fn tool_table() -> Vec<Tool> {
    vec![
        tool::<StartArgs, Started>(
            "process_start",
            "Start a process",
            Kind::OpenWorld,
            "Start a program (exec'd directly, no shell) on a PTY or on pipes; it keeps running in portald across client restarts. Call program_query first. With wait: \"input\" returns at its first prompt, \"exit\" returns a one-shot command's output and exit code, or a text to wait for (output from the first byte). Returns the id, pid, status and a cursor; then process_run to type commands.",
        ),
        tool::<ReadArgs, Output>(
            "process_read",
            "Read output by time or cursor",
            Kind::ReadOnly,
            "Read output from the last `duration` (default 1000 ms), or forward from a `cursor`. Does not move the process_read_new cursors. Returns text with escapes removed, a cursor to continue, and how many bytes were left out (the newest part is kept for windows; cursor reads page forward). Use duration=10000 for a hang check.",
        ),
        tool::<ReadNewArgs, Output>(
            "process_read_new",
            "Read new output",
            Kind::Cursor,
            "Read the output produced since the last process_read_new (per source), or since your own `cursor`. Returns text with escapes removed, the next cursor, and (when the page limit cut it) how many earlier bytes were left out and a cursor to page through them with process_read. Then write more with process_write or call again.",
        ),
        tool::<WriteArgs, Written>(
            "process_write",
            "Write to a process",
            Kind::OpenWorld,
            "Write text verbatim to the program's input (no newline added). On a PTY, Enter is \"\\r\" and what you type is echoed back; one \"\\u0003\" is Ctrl-C. Returns the bytes written; then read the answer with process_read_new.",
        ),
        tool::<SignalArgs, Signalled>(
            "process_signal",
            "Signal a process",
            Kind::OpenWorld,
            "Send a signal (name or number) to the program's process group, exactly as asked, in both modes. Returns the signal number delivered. To interrupt a PTY program a process_write of \"\\u0003\" usually suffices.",
        ),
        tool::<NoArgs, Listed>(
            "process_list",
            "List processes",
            Kind::ReadOnly,
            "List every managed process (running and ended, until cleanup) with status, input_state (running, awaiting_input, awaiting_secret, idle, exited), exit, idle time and output bytes. Use it to find ids; process_inspect gives details.",
        ),
        tool::<IdArgs, Inspected>(
            "process_inspect",
            "Inspect a process",
            Kind::ReadOnly,
            "Show one process: command, args, cwd, env overrides, status, input_state (asked of the kernel now), exit code or signal, timeout, idle time and byte counts.",
        ),
        tool::<IdArgs, Inspected>(
            "process_kill",
            "Kill a process tree",
            Kind::Destructive,
            "Kill the process and everything it started (SIGKILL to its whole tree). Its output and final screen are kept; an exit already recorded is never overwritten. Returns the final status; process_cleanup removes it.",
        ),
        tool::<NoArgs, KilledAll>(
            "process_kill_all",
            "Kill every process",
            Kind::Destructive,
            "Kill every running process tree; output is kept. Returns the ids killed.",
        ),
        tool::<IdArgs, Done>(
            "process_clear",
            "Clear stored output",
            Kind::Destructive,
            "Delete the stored output (and input) of a process, which may keep running; process_read_new then returns only what comes after.",
        ),
        tool::<IdArgs, Done>(
            "process_cleanup",
            "Remove an ended process",
            Kind::Destructive,
            "Forget an ended process: its record, output and screen. Refused while it runs (process_kill first).",
        ),
        tool::<ScreenArgs, Screen>(
            "process_screen",
            "Show the terminal screen",
            Kind::ReadOnly,
            "Show what a PTY program's terminal displays now (rows, cursor, and whether the alternate screen of vim/less/htop is in use); use it for TUIs instead of reading raw output. Optional cols/rows resize the terminal first. Works after exit too.",
        ),
        tool::<WaitArgs, Waited>(
            "process_wait",
            "Wait for output, quiet, a screen or the exit",
            Kind::ReadOnly,
            "Block until the first of: the program waits for input (default; reason input_requested with the `prompt`), `pattern` appears (or a `stop` pattern: fast failure), output settles (settle_ms), the screen stops changing (screen_stable), the process exits, the byte cap, or the timeout (default 30 s, at most about 50 s per call). Without a cursor it starts where the last read_new/wait/run stopped. Returns the reason, the new output and a cursor; a timeout is a result: call again. Wait, don't poll.",
        ),
        tool::<RunArgs, Waited>(
            "process_run",
            "Type a command and wait for its result",
            Kind::OpenWorld,
            "Type `input` (then Enter) and wait for the result in one call, with no output missed. Returns when the program waits for input again, on any prompt (reason input_requested, the `prompt` it shows, the output without echo or prompt; awaiting_secret for passwords), or exits; a busy program never ends it early. In a bash started by Portal: when the command finished, with command_exit_code. Full-screen programs return their screen. Add pattern/stop/settle_ms to decide yourself. Prefer it over process_write + reads.",
        ),
        tool::<SendKeysArgs, KeysSent>(
            "process_send_keys",
            "Press keys",
            Kind::OpenWorld,
            "Press keys and type text in order, one at a time, like tmux send-keys: [\"Escape\", \":q!\", \"Enter\"], [\"C-c\"], [\"Up\", \"Enter\"]. Key names: Enter, Tab, Esc, Backspace, Space, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete, F1-F12, C-a..C-z, M-x; anything else is typed as it is ({\"text\": \"Enter\"} types the word). Then check with process_screen or process_wait.",
        ),
        tool::<AgentListArgs, AgentsListed>(
            "agent_list",
            "List coding agents",
            Kind::ReadOnly,
            "List the coding agents (Claude Code, Codex...) running in Portal's terminals, most urgent first: awaiting_input, done, running, idle, unknown, exited; with where each state came from (hooks are exact, heuristics are guesses). Then agent_wait or agent_send.",
        ),
        tool::<AgentWatchArgs, AgentsWatched>(
            "agent_watch",
            "Watch agent state changes",
            Kind::ReadOnly,
            "Block until some agent changes state (after `cursor`), then return the changes and a new cursor; empty at the timeout. Call it in a loop to follow a fleet without polling.",
        ),
        tool::<AgentWaitArgs, AgentOutcomes>(
            "agent_wait",
            "Wait for agents",
            Kind::ReadOnly,
            "Wait until one agent, or all/any of several, reach a state (default: awaiting_input, done or idle). Returns per agent: reached, timeout, exited or vanished, with its state. A timeout is a result: call again.",
        ),
        tool::<AgentSendArgs, AgentOutcomes>(
            "agent_send",
            "Send a prompt to agents",
            Kind::OpenWorld,
            "Type a prompt into agents once each is ready, then Enter (separately, as their TUIs need). With `key`, a retried call never types it twice. Returns per agent whether it was sent. Then agent_wait for done.",
        ),
        tool::<AgentHooksArgs, HooksReported>(
            "agent_hooks",
            "Agent hooks status and install",
            Kind::Mutating,
            "Report or install the hooks that make Claude Code and Codex report their exact state to Portal (done, awaiting permission...). Install is idempotent and leaves the rest of the settings untouched; Codex also needs the user to trust the hooks in its /hooks view.",
        ),
        tool::<QueryArgs, Program>(
            "program_query",
            "Does a program need a PTY?",
            Kind::ReadOnly,
            "Look a program up in the shared registry of whether it needs a PTY. A hit decides (read its notes); confirmed x2 or more is settled; a miss means apply the rules in the instructions.",
        ),
        tool::<RecordArgs, Program>(
            "program_record",
            "Record whether a program needs a PTY",
            Kind::Mutating,
            "Record what you learned about a program (negatives too). The same conclusion again raises its count; a different one resets it to 1. Notes replace the stored ones when given.",
        ),
    ]
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
    /// A shim talking to the daemon through `link`; `cwd` is the default
    /// working directory for started programs.
    pub(crate) fn new(link: Arc<DaemonLink>, cwd: String) -> Self {
        Self { link, tools: Arc::new(tool_table()), cwd }
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

    async fn dispatch(
        &self,
        name: &str,
        mut args: JsonObject,
        progress: Progress,
    ) -> Option<ToolResult> {
        if self.tools.iter().any(|t| t.name == name)
            && let Err(e) = self.resolve_names(&mut args).await
        {
            return Some(Err(e));
        }
        macro_rules! run {
            ($method:ident) => {
                match parse(name, args) {
                    Ok(a) => self.$method(a).await,
                    Err(e) => Err(e),
                }
            };
        }
        Some(match name {
            "process_start" => match parse(name, args) {
                Ok(a) => self.start(a, progress).await,
                Err(e) => Err(e),
            },
            "process_read" => run!(read),
            "process_read_new" => run!(read_new),
            "process_write" => run!(write),
            "process_signal" => run!(signal),
            "process_list" => run!(list),
            "process_inspect" => run!(inspect),
            "process_kill" => run!(kill),
            "process_kill_all" => run!(kill_all),
            "process_clear" => run!(clear),
            "process_cleanup" => run!(cleanup),
            "process_screen" => run!(screen),
            "process_wait" => match parse(name, args) {
                Ok(a) => self.wait(a, progress).await,
                Err(e) => Err(e),
            },
            "process_run" => match parse(name, args) {
                Ok(a) => self.run(a, progress).await,
                Err(e) => Err(e),
            },
            "process_send_keys" => run!(send_keys),
            "agent_list" => run!(agent_list),
            "agent_watch" => match parse(name, args) {
                Ok(a) => self.agent_watch(a, progress).await,
                Err(e) => Err(e),
            },
            "agent_wait" => match parse(name, args) {
                Ok(a) => self.agent_wait(a, progress).await,
                Err(e) => Err(e),
            },
            "agent_send" => match parse(name, args) {
                Ok(a) => self.agent_send(a, progress).await,
                Err(e) => Err(e),
            },
            "agent_hooks" => run!(agent_hooks),
            "program_query" => run!(program_query),
            "program_record" => run!(program_record),
            _ => return None,
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
        let mut info = InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions(INSTRUCTIONS);
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
                tracing::debug!(tool = %name, "call cancelled by the client");
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

    #[test]
    fn schemas_are_plain_json_schema_every_sdk_validates() {
        for t in tool_table() {
            let text = format!(
                "{}{}",
                serde_json::Value::Object((*t.input_schema).clone()),
                t.output_schema
                    .as_ref()
                    .map_or(String::new(), |o| serde_json::Value::Object((**o).clone())
                        .to_string())
            );
            for bad in ["\"format\"", "\"null\"", "$schema", "\"oneOf\""] {
                assert!(!text.contains(bad), "{}: {bad} in {text}", t.name);
            }
        }
    }

    #[test]
    fn every_tool_has_schemas_and_annotations() {
        let tools = tool_table();
        assert_eq!(tools.len(), 22);
        for t in &tools {
            assert_eq!(
                t.input_schema.get("type").and_then(|v| v.as_str()),
                Some("object"),
                "{}",
                t.name
            );
            assert!(t.output_schema.is_some(), "{}", t.name);
            assert!(t.annotations.is_some(), "{}", t.name);
            assert!(t.description.as_ref().is_some_and(|d| d.len() > 40), "{}", t.name);
        }
    }
}
