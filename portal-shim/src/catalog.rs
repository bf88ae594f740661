//! The tool catalog: every tool's name, group, kind, description and
//! schemas, in the order agents see them. A tool is named once, here; the
//! handlers in `tools/` match on [`ToolId`], so a tool cannot be listed
//! without a handler or handled without being listed.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;

use crate::args::{
    AgentHooksArgs, AgentListArgs, AgentSendArgs, AgentWaitArgs, AgentWatchArgs, IdArgs, NoArgs,
    QueryArgs, ReadArgs, ReadNewArgs, RecordArgs, RunArgs, ScreenArgs, SearchArgs, SendKeysArgs,
    SignalArgs, StartArgs, Until, WaitArgs, WorkspaceArgs, WorkspaceRef, WriteArgs,
};
use crate::results::{
    AgentOutcomes, AgentsListed, AgentsWatched, Done, HooksReported, Inspected, KeysSent,
    KilledAll, Listed, Output, Program, Screen, Searched, Signalled, Started, WaitReply, Waited,
    WorkspaceReport, Written,
};
use crate::schema::{Side, portable};

/// A group of tools a server can be limited to (`--tools`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Group {
    /// Start, read, write, signal, list, inspect, kill, clean up; screens and keys.
    Process,
    /// Blocking waits: process_wait and process_run.
    Waits,
    /// The agent monitor: list, watch, wait for and send to coding agents.
    Agents,
    /// The shared registry of which programs need a PTY.
    Registry,
}

impl Group {
    /// Every group, in the order the README lists them.
    pub(crate) const ALL: [Group; 4] =
        [Group::Process, Group::Waits, Group::Agents, Group::Registry];

    /// The name used in flags and the environment.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Group::Process => "process",
            Group::Waits => "waits",
            Group::Agents => "agents",
            Group::Registry => "registry",
        }
    }
}

/// What a tool may change, which decides the tiers it appears in and the
/// hints clients use to decide what to auto-approve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Changes nothing; repeating it gives the same answer.
    ReadOnly,
    /// Changes nothing but a read cursor or a wait's position.
    Cursor,
    /// Runs or feeds arbitrary programs.
    OpenWorld,
    /// Ends programs or deletes what Portal keeps.
    Destructive,
    /// Records a fact or writes a settings file.
    Mutating,
}

/// Every tool, one row each, in the order of `tools/list`: its variant, the
/// name clients call it by (the original Portal's where it had one), its
/// group and kind, its handler with the argument and result types, and its
/// description. The catalog below and the dispatch in `tools/` are both
/// made from these rows (`tool_rows!(catalog)`, `tool_rows!(dispatch)`), so
/// a tool's schemas are always those of the types its handler takes and
/// returns, and no tool is listed without a handler.
macro_rules! tool_rows {
    ($then:ident) => {
        $then! {
            ProcessStart = "process_start", Process, OpenWorld, start(StartArgs) -> Started,
                "Start a program (exec'd, no shell) on a PTY or pipes; it outlives client restarts. Then process_run types commands.";
            ProcessRead = "process_read", Process, ReadOnly, read(ReadArgs) -> Output,
                "Output of the last `duration` (default 1 s), or forward from `cursor`, escapes removed, with the next cursor; windows keep the newest. Moves no cursor.";
            ProcessReadNew = "process_read_new", Process, Cursor, read_new(ReadNewArgs) -> Output,
                "Output since the last read_new, wait or run (or `cursor`), escapes removed; if cut, omitted_cursor pages the rest with process_read.";
            ProcessSearch = "process_search", Process, ReadOnly, search(SearchArgs) -> Searched,
                "Find lines by their words in all output and input ever logged, every process; newest first, 20 a page, each with a process_read cursor.";
            ProcessWrite = "process_write", Process, OpenWorld, write(WriteArgs) -> Written,
                "Write text verbatim to the program's input, no newline added. Prefer process_run to type a command and get its result.";
            ProcessSignal = "process_signal", Process, Destructive, signal(SignalArgs) -> Signalled,
                "Signal the program's process group. Writing \"\\u0003\" interrupts most PTY programs.";
            ProcessList = "process_list", Process, ReadOnly, list(NoArgs) -> Listed,
                "Every process, running and ended, with status and input_state (running, awaiting_input, awaiting_secret, idle).";
            ProcessInspect = "process_inspect", Process, ReadOnly, inspect(IdArgs) -> Inspected,
                "One process in full: command, args, cwd, env, status, input_state, exit, timeout, idle time, bytes.";
            ProcessKill = "process_kill", Process, Destructive, kill(IdArgs) -> Inspected,
                "SIGKILL the process and all it started; output and screen are kept.";
            ProcessKillAll = "process_kill_all", Process, Destructive, kill_all(NoArgs) -> KilledAll,
                "Kill every running process tree (output kept); returns their ids.";
            ProcessClear = "process_clear", Process, Destructive, clear(IdArgs) -> Done,
                "Delete a process's stored output and input; it may keep running.";
            ProcessCleanup = "process_cleanup", Process, Destructive, cleanup(IdArgs) -> Done,
                "Forget an ended process: record, output and screen.";
            ProcessScreen = "process_screen", Process, ReadOnly, screen(ScreenArgs) -> Screen,
                "A PTY program's terminal now: lines, cursor, and whether a TUI (vim, less) is on the alternate screen. Works after exit.";
            ProcessWait = "process_wait", Waits, Cursor, wait(WaitArgs) -> WaitReply,
                "Block until the first of: it waits for input (default; reason input_requested, `prompt`), `pattern` or `stop` appears, output settles, the screen is stable, it exits, or the timeout (call again). `ids` (mode any|all): `ended_by`, per-id `results`.";
            ProcessRun = "process_run", Waits, OpenWorld, run(RunArgs) -> Waited,
                "Type `input` and Enter, then wait as process_wait until the program asks for input again (`prompt`; awaiting_secret: a password) or exits, never early; output without echo or prompt. Portal's bash: command_exit_code. TUIs: their screen.";
            ProcessSendKeys = "process_send_keys", Process, OpenWorld, send_keys(SendKeysArgs) -> KeysSent,
                "Press keys and type text in order, like tmux send-keys: [\"Escape\", \":q!\", \"Enter\"]. Keys: Enter Tab Escape Backspace Up Down Left Right Home End PageUp PageDown F1-F12 C-c M-x; other strings are text ({\"text\": \"Enter\"}: the word).";
            AgentList = "agent_list", Agents, ReadOnly, agent_list(AgentListArgs) -> AgentsListed,
                "Coding agents (Claude Code, Codex...) in Portal's terminals, most urgent first: state, reason, source (hooks are exact), any dialog.";
            AgentWatch = "agent_watch", Agents, ReadOnly, agent_watch(AgentWatchArgs) -> AgentsWatched,
                "Block until an agent changes state after `cursor`; returns the changes and the next cursor.";
            AgentWait = "agent_wait", Agents, ReadOnly, agent_wait(AgentWaitArgs) -> AgentOutcomes,
                "Wait until agents reach a state (default awaiting_input, done or idle); per agent: reached, timeout (call again), exited, vanished, not_an_agent.";
            AgentSend = "agent_send", Agents, OpenWorld, agent_send(AgentSendArgs) -> AgentOutcomes,
                "Type a prompt into agents once each is ready, then Enter; never into a dialog (answer it with process_send_keys). With `key` a retry never types twice.";
            WorkspaceUp = "workspace_up", Agents, OpenWorld, workspace_up(WorkspaceArgs) -> WorkspaceReport,
                "Start what is not running of a workspace (portal.toml or spec), in depends_on order, each once ready (ready: a text, \"input\" or \"exit\"); `prompt`s typed once.";
            WorkspaceStatus = "workspace_status", Agents, ReadOnly, workspace_status(WorkspaceRef) -> WorkspaceReport,
                "Each member's id and states (as workspace_up).";
            WorkspaceDown = "workspace_down", Agents, Destructive, workspace_down(WorkspaceRef) -> WorkspaceReport,
                "Kill a workspace's running members, last first.";
            AgentHooks = "agent_hooks", Agents, Mutating, agent_hooks(AgentHooksArgs) -> HooksReported,
                "Report or install (idempotent) the hooks through which Claude Code and Codex report exact states (Codex asks to trust them in /hooks).";
            ProgramQuery = "program_query", Registry, ReadOnly, program_query(QueryArgs) -> Program,
                "Whether a program needs a PTY, and notes on driving it, from the shared registry (common ones built in).";
            ProgramRecord = "program_record", Registry, Mutating, program_record(RecordArgs) -> Program,
                "Record whether a program needs a PTY, with notes (negatives too).";
        }
    };
}
pub(crate) use tool_rows;

/// The [`ToolId`] enum and each tool's [`Spec`], from [`tool_rows`].
macro_rules! catalog {
    ($($id:ident = $name:literal, $group:ident, $kind:ident, $method:ident($args:ty) -> $result:ty, $desc:literal;)*) => {
        /// One tool. The order of [`ToolId::ALL`] is the order of `tools/list`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum ToolId {
            $($id,)*
        }

        impl ToolId {
            /// Every tool, in listing order.
            pub(crate) const ALL: [ToolId; [$(stringify!($id)),*].len()] = [$(ToolId::$id),*];

            fn spec(self) -> Spec {
                match self {
                    $(ToolId::$id => spec::<$args, $result>($name, Group::$group, Kind::$kind, $desc),)*
                }
            }
        }
    };
}
tool_rows!(catalog);

impl ToolId {
    /// The tool a client calls by `name`, if there is one.
    pub(crate) fn from_name(name: &str) -> Option<ToolId> {
        ToolId::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The name clients call it by (the original Portal's where it had one).
    pub(crate) fn name(self) -> &'static str {
        self.spec().name
    }

    /// Its group.
    pub(crate) fn group(self) -> Group {
        self.spec().group
    }

    /// What it may change.
    pub(crate) fn kind(self) -> Kind {
        self.spec().kind
    }

    /// The tool as `tools/list` shows it.
    /// Whether the tool acts on a host's programs, and so takes `host`
    /// when other hosts exist (the registry and the hook installer work on
    /// this machine only).
    pub(crate) fn names_a_host(self) -> bool {
        let s = self.spec();
        // The hook installer and the workspaces (files here, their paths
        // this machine's) work on this machine only.
        matches!(s.group, Group::Process | Group::Waits | Group::Agents)
            && !matches!(
                self,
                ToolId::AgentHooks
                    | ToolId::WorkspaceUp
                    | ToolId::WorkspaceStatus
                    | ToolId::WorkspaceDown
            )
    }

    pub(crate) fn tool(self) -> Tool {
        let s = self.spec();
        let input = (s.input)();
        // process_run shares its wait conditions with process_wait, which
        // describes them once (its description says so).
        let input = if self == ToolId::ProcessRun { described_elsewhere(&input) } else { input };
        Tool::new(s.name, s.description, input)
            .with_raw_output_schema((s.output)())
            .with_annotations(annotations(s.kind))
    }
}

/// What the catalog knows of one tool.
struct Spec {
    name: &'static str,
    group: Group,
    kind: Kind,
    description: &'static str,
    input: fn() -> Arc<JsonObject>,
    output: fn() -> Arc<JsonObject>,
}

fn spec<A: JsonSchema, R: JsonSchema>(
    name: &'static str,
    group: Group,
    kind: Kind,
    description: &'static str,
) -> Spec {
    Spec { name, group, kind, description, input: schema::<A, true>, output: schema::<R, false> }
}

fn schema<T: JsonSchema, const INPUT: bool>() -> Arc<JsonObject> {
    let side = if INPUT { Side::Input } else { Side::Output };
    match serde_json::to_value(schemars::schema_for!(T)) {
        Ok(serde_json::Value::Object(map)) => Arc::new(portable(map, side)),
        _ => Arc::new(JsonObject::new()),
    }
}

/// Wait conditions process_run describes after all, briefly: a model
/// reading only process_run must not take `max_bytes` for a limit that ends
/// the run.
const DESCRIBED_IN_RUN: &[(&str, &str)] = &[("max_bytes", "Page size, see process_wait.")];

/// An argument schema without the descriptions of the wait conditions
/// ([`Until`]), which process_wait describes.
fn described_elsewhere(input: &JsonObject) -> Arc<JsonObject> {
    let shared = schema::<Until, true>();
    let mut run = input.clone();
    let shared = shared.get("properties").and_then(|p| p.as_object());
    if let (Some(serde_json::Value::Object(props)), Some(shared)) =
        (run.get_mut("properties"), shared)
    {
        for (name, p) in props.iter_mut().filter(|(name, _)| shared.contains_key(*name)) {
            let Some(p) = p.as_object_mut() else { continue };
            match DESCRIBED_IN_RUN.iter().find(|(n, _)| n == name) {
                Some((_, brief)) => p.insert("description".into(), (*brief).into()),
                None => p.remove("description"),
            };
        }
    }
    Arc::new(run)
}

/// The MCP hints of a kind, only where they differ from the spec's defaults
/// (not read-only, destructive, not idempotent, open world): every byte of
/// `tools/list` is paid for on every turn.
fn annotations(kind: Kind) -> ToolAnnotations {
    let base = ToolAnnotations::new();
    match kind {
        Kind::ReadOnly => base.read_only(true).idempotent(true).open_world(false),
        Kind::Cursor => base.read_only(true).open_world(false),
        Kind::OpenWorld => base.destructive(false),
        Kind::Destructive => base.open_world(false),
        Kind::Mutating => base.destructive(false).open_world(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Most characters the default tool set may cost in `tools/list`
    /// (names, descriptions, schemas and annotations): about 5 K tokens,
    /// paid on every turn of every client. The result schemas list the
    /// values of every status, state and reason a model branches on (about
    /// 800 characters in all), so that a model knows them without a call.
    const BUDGET: usize = 21_000;

    fn listed(t: ToolId) -> String {
        serde_json::to_string(&t.tool()).unwrap_or_default()
    }

    #[test]
    fn the_default_set_fits_the_budget() {
        let sizes: Vec<(String, usize)> =
            ToolId::ALL.iter().map(|t| (t.name().to_owned(), listed(*t).len())).collect();
        let total: usize = sizes.iter().map(|(_, n)| n).sum();
        assert!(total <= BUDGET, "tools/list costs {total} characters: {sizes:?}");
    }

    #[test]
    fn schemas_are_plain_json_schema_every_sdk_validates() {
        for t in ToolId::ALL {
            let text = listed(t);
            // A `type` array is legal but less portable (Inspector --strict
            // flags it): one type per schema, `anyOf` for alternatives.
            for bad in ["\"format\"", "\"null\"", "$schema", "\"oneOf\"", "\"title\"", "\"type\":["]
            {
                assert!(!text.contains(bad), "{}: {bad} in {text}", t.name());
            }
        }
    }

    #[test]
    fn every_tool_has_schemas_and_annotations() {
        for t in ToolId::ALL.map(ToolId::tool) {
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

    #[test]
    fn every_tool_taking_max_bytes_describes_it_as_a_page_size() {
        let mut seen = 0;
        for t in ToolId::ALL.map(ToolId::tool) {
            let Some(p) = t.input_schema.get("properties").and_then(|p| p.get("max_bytes")) else {
                continue;
            };
            seen += 1;
            let d = p.get("description").and_then(|d| d.as_str()).unwrap_or_default();
            assert!(d.to_lowercase().contains("page size"), "{}: {d:?}", t.name);
        }
        assert!(seen >= 4, "max_bytes in {seen} tools");
    }

    #[test]
    fn names_are_unique_and_found_again() {
        for t in ToolId::ALL {
            assert_eq!(ToolId::from_name(t.name()), Some(t));
        }
        assert_eq!(ToolId::from_name("process_nope"), None);
    }

    /// The README is where a person counts the tools: it names each one and
    /// says how many there are in all.
    #[test]
    fn the_readme_names_every_tool_and_their_number() {
        let readme = include_str!("../../README.md");
        let in_all = format!("the shim offers {} tools in all", ToolId::ALL.len());
        assert!(readme.contains(&in_all), "README.md does not say {in_all:?}");
        for t in ToolId::ALL {
            assert!(
                readme.contains(&format!("`{}`", t.name())),
                "README.md never names {}",
                t.name()
            );
        }
    }

    #[test]
    fn every_group_has_tools() {
        for g in Group::ALL {
            assert!(ToolId::ALL.iter().any(|t| t.group() == g), "{}", g.name());
        }
    }
}
