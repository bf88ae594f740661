//! The MCP server: the dispatch from a tool call to its handler, and what
//! every handler shares (the daemon call, argument parsing, results,
//! progress). The handlers, one function per tool that converts arguments,
//! calls `portald` and renders the answer, are by area: `process`, `waits`,
//! `search`, `agents`, `registry`, `workspace`; the tools themselves are described in `catalog.rs`. The shim holds no process state: everything lives in the
//! daemon, so a restarted shim sees it all.

use crate::args::{
    AgentHooksArgs, AgentListArgs, AgentSendArgs, AgentWaitArgs, AgentWatchArgs, IdArgs, NoArgs,
    QueryArgs, ReadArgs, ReadNewArgs, RecordArgs, RunArgs, ScreenArgs, SearchArgs, SendKeysArgs,
    SignalArgs, StartArgs, WaitArgs, WorkspaceArgs, WorkspaceRef, WriteArgs,
};
use crate::catalog::{ToolId, tool_rows};
use crate::results::{
    AgentOutcomes, AgentsListed, AgentsWatched, Done, HooksReported, Inspected, KeysSent,
    KilledAll, Listed, Output, Program, Screen, Searched, Signalled, Started, WaitReply, Waited,
    WorkspaceReport, Written,
};
use crate::schema::without_nulls;
use crate::surface::Surface;
use std::sync::Arc;

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

mod agents;
mod process;
mod registry;
mod search;
mod waits;
mod workspace;

use crate::errors::{error_text, in_tool_terms};
use crate::hosts::{HOST_ARG, HostLinks};
use crate::link::{CallError, DaemonLink};

/// Server instructions, kept under 2 KB (checked by a test).
pub(crate) const INSTRUCTIONS: &str = include_str!("../instructions.md");

/// How often a blocked wait tells the client it is alive (when the client
/// asked for progress): well inside clients' idle cut-offs.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Longest output line a progress notification carries: a status line in a
/// client's UI, not a log.
const PROGRESS_LINE_CHARS: usize = 160;

/// The MCP server.
#[derive(Clone)]
pub(crate) struct Shim {
    /// The link of the host this call goes to.
    link: Arc<DaemonLink>,
    /// That host, when it is not this machine (for labels).
    host: Option<String>,
    hosts: Arc<HostLinks>,
    surface: Arc<Surface>,
    tools: Arc<Vec<Tool>>,
    cwd: String,
}

type ToolResult = Result<CallToolResult, String>;

/// What a handler answers: the text an agent reads and the structured
/// result (of the type its row in the catalog names), or the error text.
type Reply<R> = Result<(String, R), String>;

/// The dispatch from a tool to its handler, made from the catalog's rows:
/// the arguments are parsed into the row's type, and the handler's result is
/// the row's result type, whose schema `tools/list` shows.
macro_rules! dispatch {
    ($($id:ident = $name:literal, $group:ident, $kind:ident, $method:ident($args:ty) -> $result:ty, $desc:literal;)*) => {
        impl Shim {
            async fn handle(
                &self,
                tool: ToolId,
                name: &str,
                args: JsonObject,
                progress: Progress,
            ) -> ToolResult {
                match tool {
                    $(ToolId::$id => {
                        let a: $args = parse(name, args)?;
                        let (text, result): (String, $result) = self.$method(a, progress).await?;
                        ok(text, &result)
                    })*
                }
            }
        }
    };
}
tool_rows!(dispatch);

/// How many processes an unknown-name error lists (newest first): enough to
/// find the one meant, few enough for one line.
const KNOWN_NAMES_SHOWN: usize = 8;

/// Where to send progress notifications, if the client asked for them.
type Progress = Option<(Peer<RoleServer>, ProgressToken)>;

fn by_id(id: u64) -> Option<pb::ProcRef> {
    Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) })
}

/// Labels a result from another host, in its text and as `host` in its
/// structured content: ids are per host, and an agent that drops the host
/// in its next call would reach another machine's process of that id.
fn on_host(mut result: CallToolResult, host: &str) -> CallToolResult {
    if let Some(serde_json::Value::Object(o)) = result.structured_content.as_mut() {
        o.insert("host".into(), serde_json::Value::from(host));
    }
    if let Some(text) = result.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()) {
        result.content[0] = ContentBlock::text(format!("[host {host}] {text}"));
    }
    result
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

impl Shim {
    /// A shim talking to the daemon through `link`, offering the tools of
    /// `surface`; `cwd` is the default working directory for started
    /// programs.
    pub(crate) fn new(hosts: Arc<HostLinks>, surface: Surface, cwd: String) -> Self {
        let tools = surface
            .tools()
            .map(|id| {
                let mut tool = id.tool();
                if hosts.offered() && id.names_a_host() {
                    hosts.add_host_arg(&mut tool, id == ToolId::ProcessList);
                }
                tool
            })
            .collect();
        let Ok((link, target)) = hosts.link(None) else {
            unreachable!("the default host was resolved when the links were made")
        };
        let host = (!target.is_local()).then(|| target.label().to_owned());
        Self { link, host, hosts, surface: Arc::new(surface), tools: Arc::new(tools), cwd }
    }

    /// This shim, its calls going to `host` (the default when `None`).
    fn on_host(&self, host: Option<&str>) -> Result<Self, String> {
        let (link, target) = self.hosts.link(host)?;
        let host = (!target.is_local()).then(|| target.label().to_owned());
        Ok(Self { link, host, ..self.clone() })
    }

    /// `process_list` with `host: "all"`: every host at once, each entry
    /// with its host; a host that cannot be reached is said, the rest
    /// listed.
    async fn list_everywhere(&self) -> ToolResult {
        let lists = futures::future::join_all(self.hosts.every().into_iter().map(
            |(link, target)| async move {
                let remote = (!target.is_local()).then(|| target.label().to_owned());
                let shim = Self { link, host: remote.clone(), ..self.clone() };
                let label = target.label().to_owned();
                // Each host's entries are made in its scope: their hints
                // name the host.
                crate::hosts::CALL_HOST
                    .scope(remote, async move {
                        let (_, listed) = shim.list(NoArgs::default(), None).await?;
                        Ok::<_, String>(
                            listed
                                .processes
                                .into_iter()
                                .map(|p| crate::results::ProcessInfo {
                                    host: Some(label.clone()),
                                    ..p
                                })
                                .collect::<Vec<_>>(),
                        )
                    })
                    .await
                    .map_err(|e| format!("{}: {}", target.label(), e.trim_start_matches("Error: ")))
            },
        ))
        .await;
        let mut processes = Vec::new();
        let mut unreachable = Vec::new();
        for listed in lists {
            match listed {
                Ok(l) => processes.extend(l),
                Err(e) => unreachable.push(e),
            }
        }
        let mut text = crate::results::list_text(&processes);
        for u in &unreachable {
            text.push_str(&format!("\nUnreachable host {u}"));
        }
        ok(text, &Listed { processes, unreachable })
    }

    async fn call<T, F, Fut>(&self, id: Option<u64>, f: F) -> Result<T, String>
    where
        F: Fn(pb::portal_client::PortalClient<tonic::transport::Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        self.link.call(f).await.map_err(|e: CallError| error_text(&e, id, self.host.as_deref()))
    }

    /// [`Shim::call`] for a call that changes something: never repeated
    /// once it may have reached the daemon (see [`DaemonLink::call_once`]).
    async fn call_once<T, F, Fut>(&self, id: Option<u64>, f: F) -> Result<T, String>
    where
        F: Fn(pb::portal_client::PortalClient<tonic::transport::Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        self.link
            .call_once(f)
            .await
            .map_err(|e: CallError| error_text(&e, id, self.host.as_deref()))
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
                .link
                .call(|mut c| {
                    let proc = Some(target.clone());
                    async move { c.inspect(pb::InspectRequest { proc }).await }
                })
                .await;
            let found = match found {
                Ok(f) => f,
                Err(CallError::Status(s)) if s.code() == tonic::Code::NotFound => {
                    return Err(format!(
                        "Error: {arg}: no process is named {text:?}. {}",
                        shim.known_names().await
                    ));
                }
                // A host that cannot be reached is not a missing process:
                // an agent told so might start a second one.
                Err(e) => return Err(error_text(&e, None, shim.host.as_deref())),
            };
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

    /// The processes an agent can name, for an error that saves it a
    /// process_list call.
    async fn known_names(&self) -> String {
        let listed = self.call(None, |mut c| async move { c.list(pb::ListRequest {}).await }).await;
        let Ok(listed) = listed else {
            return "Give an id or a name from process_list.".into();
        };
        let shown = |p: &pb::Process| {
            let what = std::iter::once(p.command.as_str())
                .chain(p.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ");
            let what: String = what.chars().take(40).collect();
            if p.name.is_empty() {
                format!("{} ({what})", p.id)
            } else {
                format!("{:?} = {} ({what})", p.name, p.id)
            }
        };
        // Running ones first: an ended process reads, but takes no input
        // and no signal, so it is seldom the one meant.
        let (running, ended): (Vec<&pb::Process>, Vec<&pb::Process>) =
            listed.processes.iter().rev().partition(|p| p.status() == pb::Status::Running);
        let running: Vec<String> = running.into_iter().take(KNOWN_NAMES_SHOWN).map(shown).collect();
        let ended: Vec<String> = ended
            .into_iter()
            .take(KNOWN_NAMES_SHOWN.saturating_sub(running.len()))
            .map(shown)
            .collect();
        let here = self.host.as_deref().map(|h| format!(" on host {h}")).unwrap_or_default();
        let mut text = match (running.is_empty(), ended.is_empty()) {
            (true, true) => format!("No process exists{here}; start one with process_start."),
            (false, true) => {
                format!("Give an id or a name; running{here}: {}.", running.join(", "))
            }
            (true, false) => format!(
                "Give an id or a name; none runs{here}; ended (their output can be read): {}.",
                ended.join(", ")
            ),
            (false, false) => format!(
                "Give an id or a name; running{here}: {}; ended (their output can be read): {}.",
                running.join(", "),
                ended.join(", ")
            ),
        };
        if self.hosts.offered() {
            text.push_str(
                " Ids and names are per host: pass the `host` it was started on (process_list with host \"all\" lists every host).",
            );
        }
        text
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
        let host = match args.remove(HOST_ARG) {
            None => None,
            Some(serde_json::Value::String(h)) if tool.names_a_host() => Some(h),
            Some(_) if tool.names_a_host() => {
                return Some(Err("Error: host: expected a host name (a string).".into()));
            }
            Some(_) => {
                return Some(Err(format!(
                    "Error: {name} takes no host: it works on this machine's Portal."
                )));
            }
        };
        // `HOST:ID`, as a person writes it (and the CLI takes it).
        let host = match (host, args.get("id").and_then(|v| v.as_str())) {
            (h, Some(id)) if tool.names_a_host() => match self.hosts.split_proc(id) {
                Some((on, rest)) if h.as_deref().is_none_or(|h| h == on) => {
                    args.insert("id".into(), serde_json::Value::from(rest));
                    Some(on)
                }
                _ => h,
            },
            (h, _) => h,
        };
        if tool == ToolId::ProcessList && host.as_deref() == Some(portal_client::hosts::ALL) {
            return Some(self.list_everywhere().await);
        }
        let shim = match self.on_host(host.as_deref()) {
            Ok(s) => s,
            Err(e) => return Some(Err(e)),
        };
        if let Err(e) = shim.resolve_names(&mut args).await {
            return Some(Err(e));
        }
        let result = crate::hosts::CALL_HOST
            .scope(shim.host.clone(), shim.handle(tool, name, args, progress))
            .await;
        let result = match &shim.host {
            Some(h) => result.map(|r| on_host(r, h)),
            None => result,
        };
        Some(result.map_err(|e| in_tool_terms(tool, e)))
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
}

impl ServerHandler for Shim {
    fn get_info(&self) -> ServerConfig {
        let mut instructions = match self.surface.note() {
            Some(note) => format!("{INSTRUCTIONS}\n{note}\n"),
            None => INSTRUCTIONS.to_owned(),
        };
        if self.hosts.offered() {
            instructions.push_str(
                "Other machines: tools take `host` (see its description); ids and names are per host, so keep passing the host a process was started on. process_list with host \"all\" lists every host.\n",
            );
        }
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
        // The client says who it is in `initialize`, or (from the 2026-07-28
        // revision on, which has no `initialize`) in each request's `_meta`.
        let client = context
            .meta
            .client_info()
            .or_else(|| context.peer.peer_info().map(|info| info.client_info.clone()));
        if let Some(c) = client {
            crate::audience::client_is(&c.name);
            portal_client::identity::set_identity(format!(
                "{} {} via portal-shim (pid {})",
                c.name,
                c.version,
                std::process::id()
            ));
        }
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
