//! Tool arguments. Names and defaults are those of the original Portal's 14
//! tools; doc comments become the JSON schema descriptions the model reads.
//! Unknown fields are refused, so a misspelt argument is an error, not a
//! silently ignored default.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `process_start`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StartArgs {
    /// Program to run (a name looked up on PATH, or a path). No shell is
    /// implied: for pipes or globbing run `sh` with args `["-c", "..."]`.
    pub(crate) command: String,
    /// Arguments.
    #[serde(default = "default_args")]
    pub(crate) args: Vec<String>,
    /// Absolute working directory. Default: the directory the MCP client started Portal in.
    #[serde(default)]
    pub(crate) cwd: Option<String>,
    /// Environment variables to add or override.
    #[serde(default)]
    pub(crate) env: Option<BTreeMap<String, String>>,
    /// Idle timeout in ms: the process tree is killed when no tool call names
    /// it for this long (its output is kept). 0 = none.
    #[serde(default = "default_zero")]
    pub(crate) timeout_ms: u64,
    /// Run on a pseudo-terminal. The default (false) is NOT a recommendation:
    /// use true for anything interactive (REPLs, ssh, psql, gdb, TUIs, prompts).
    #[serde(default = "default_false")]
    pub(crate) pty: bool,
    /// Optional unique name to refer to the process by (instead of its id).
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// PTY rows (default 24).
    #[serde(default)]
    pub(crate) rows: Option<u32>,
    /// PTY columns (default 80).
    #[serde(default)]
    pub(crate) cols: Option<u32>,
    /// Wait in the same call: "input" (until it waits for input, e.g. a
    /// REPL's first prompt), "exit" (a one-shot command: its output and exit
    /// code), or a text to wait for. The output is returned from its first
    /// byte.
    #[serde(default)]
    pub(crate) wait: Option<String>,
    /// Timeout of `wait` in ms (default 30000, at most about 50 s).
    #[serde(default)]
    pub(crate) wait_timeout_ms: Option<u64>,
}

/// Which output to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Source {
    /// Standard output (everything, for a PTY).
    Stdout,
    /// Standard error (pipe mode).
    Stderr,
    /// What was written to the program.
    Stdin,
    /// Standard output and standard error, in the order produced.
    Both,
}

/// Which output to read for `process_read_new` (input is never "new output").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NewSource {
    /// Standard output (everything, for a PTY).
    Stdout,
    /// Standard error (pipe mode).
    Stderr,
    /// Both, in the order produced.
    Both,
}

/// Unit of `duration`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Unit {
    /// Nanoseconds.
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
}

fn default_duration() -> u64 {
    1000
}

// Named default functions make schemars put each default in the schema the
// model reads.
fn default_source() -> Source {
    Source::Both
}

fn default_new_source() -> NewSource {
    NewSource::Both
}

fn default_unit() -> Unit {
    Unit::Ms
}

fn default_false() -> bool {
    false
}

fn default_zero() -> u64 {
    0
}

/// A process as arguments name it: its id, or its name (`process_start`'s
/// `name`). Names are turned into ids before the arguments are read.
fn proc_ref(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["integer", "string"],
        "description": "Process id, or the name given at start."
    })
}

/// Several processes, each by id or name.
fn proc_refs(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": proc_ref(g),
        "description": "Processes, by id or name."
    })
}

fn default_args() -> Vec<String> {
    Vec::new()
}

/// Arguments of `process_read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    /// Process id.
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// Which output.
    #[serde(default = "default_source")]
    pub(crate) source: Source,
    /// Time window: output produced in the last `duration` units. Ignored
    /// when `cursor` is given.
    #[serde(default = "default_duration")]
    pub(crate) duration: u64,
    /// Unit of `duration`.
    #[serde(default = "default_unit")]
    pub(crate) unit: Unit,
    /// Read forward from this cursor (from an earlier result) instead of a
    /// time window; page through long output with the returned cursor.
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    /// Most bytes of output to return (default 65536, at most 1048576).
    #[serde(default)]
    pub(crate) max_bytes: Option<u64>,
}

/// Arguments of `process_read_new`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadNewArgs {
    /// Process id.
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// Which output.
    #[serde(default = "default_new_source")]
    pub(crate) source: NewSource,
    /// Your own cursor from an earlier result: reads what came after it and
    /// leaves the shared server-side cursor alone (use it when several agents
    /// follow one process). Without it, the server-side cursor is used and moved.
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    /// Most bytes of output to return (default 65536, at most 1048576); the
    /// newest part is kept.
    #[serde(default)]
    pub(crate) max_bytes: Option<u64>,
}

/// Arguments of `process_write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// Process id.
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// Text to write, verbatim (no newline is added). Control characters as
    /// JSON escapes: "\r" Enter on a PTY, "\n" newline on pipes, "\u0003" Ctrl-C.
    pub(crate) content: String,
}

/// Arguments of `process_signal`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignalArgs {
    /// Process id.
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// Signal name ("SIGINT", "TERM", "usr1") or number ("2"). Delivered
    /// exactly, to the process group.
    pub(crate) signal: String,
}

/// Arguments naming one process.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct IdArgs {
    /// Process id (from process_start or process_list).
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
}

/// Arguments of tools without any.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

/// Arguments of `process_screen`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScreenArgs {
    /// Process id (PTY mode).
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// Resize the terminal to this many columns first (the program gets SIGWINCH).
    #[serde(default)]
    pub(crate) cols: Option<u32>,
    /// Resize the terminal to this many rows first.
    #[serde(default)]
    pub(crate) rows: Option<u32>,
}

/// Arguments of `program_query`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryArgs {
    /// Program name or path ("ssh", "/usr/bin/psql", "GDB.EXE").
    pub(crate) program: String,
}

/// Arguments of `program_record`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordArgs {
    /// Program name or path.
    pub(crate) program: String,
    /// Whether it needs a PTY.
    pub(crate) needs_pty: bool,
    /// Notes, e.g. flag-dependent caveats. Replaces stored notes when given
    /// (even ""); kept when omitted.
    #[serde(default)]
    pub(crate) notes: Option<String>,
}

fn default_true() -> bool {
    true
}

/// What a wait or run waits for (shared arguments).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Until {
    /// Text to wait for in the output (escapes stripped); with `regex`, a
    /// regular expression (`^`/`$` match at line ends).
    #[serde(default)]
    pub(crate) pattern: Option<String>,
    /// `pattern` and `stop` are regular expressions.
    #[serde(default = "default_false")]
    pub(crate) regex: bool,
    /// Look for `pattern` on the rendered screen instead (PTY; for TUIs).
    #[serde(default = "default_false")]
    pub(crate) on_screen: bool,
    /// Patterns that end the wait early as a failure, e.g. ["error:", "Password:"].
    #[serde(default)]
    pub(crate) stop: Vec<String>,
    /// End once no output arrived for this many ms. "Stopped printing", not
    /// "succeeded": a busy program can be quiet.
    #[serde(default)]
    pub(crate) settle_ms: Option<u32>,
    /// End once the rendered screen stayed unchanged for settle_ms (TUIs
    /// whose spinners keep printing).
    #[serde(default = "default_false")]
    pub(crate) screen_stable: bool,
    /// Give up after this many ms (default 30000). Values above the server's
    /// ceiling (about 50 s) are lowered; the result says so. Call again with
    /// the returned cursor to keep waiting.
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
    /// End after this many bytes of output; also bounds the returned output
    /// (default 131072, newest kept).
    #[serde(default)]
    pub(crate) max_bytes: Option<u64>,
    /// Include the rendered screen in the result.
    #[serde(default = "default_false")]
    pub(crate) snapshot: bool,
    /// Also end when the program waits for input (input_requested). Default:
    /// true when no pattern, settle_ms or screen_stable is given; false with
    /// nothing else waits for the exit.
    #[serde(default)]
    pub(crate) on_input: Option<bool>,
    /// On a full-screen program, return the output stream instead of the
    /// rendered screen.
    #[serde(default = "default_false")]
    pub(crate) raw_output: bool,
}

/// Arguments of `process_wait`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WaitArgs {
    /// Process id.
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// Start from this cursor (from an earlier read or wait); default: where
    /// the last process_read_new, process_wait or process_run stopped (the
    /// start of output if nothing was read yet), which this call then moves.
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    /// Which output to watch.
    #[serde(default = "default_new_source")]
    pub(crate) source: NewSource,
    /// The conditions.
    #[serde(flatten)]
    pub(crate) until: Until,
}

/// Arguments of `process_run`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunArgs {
    /// Process id.
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// The command or statement to type (multi-line text goes as one paste
    /// when the program supports it).
    pub(crate) input: String,
    /// Press Enter after the input.
    #[serde(default = "default_true")]
    pub(crate) enter: bool,
    /// Conditions. Without pattern/settle_ms/screen_stable: a bash started
    /// by Portal reports exactly when the command finished and its exit
    /// status; a REPL is done when its prompt comes back; else output settles.
    #[serde(flatten)]
    pub(crate) until: Until,
}

/// One item of `process_send_keys`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum KeyArg {
    /// A key name (Enter, Tab, Esc, Up, F5, C-c, M-x…); anything else is
    /// typed as it is.
    Key(String),
    /// Literal text to type.
    Text {
        /// The text.
        text: String,
    },
}

/// Arguments of `process_send_keys`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendKeysArgs {
    /// Process id.
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// Keys and text, in order, e.g. ["Escape", ":wq", "Enter"] or ["C-c"].
    pub(crate) keys: Vec<KeyArg>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_arguments_flatten_and_still_refuse_typos() {
        let a: WaitArgs =
            serde_json::from_value(serde_json::json!({"id": 1, "pattern": "x", "timeout_ms": 5}))
                .unwrap();
        assert_eq!((a.until.pattern.as_deref(), a.until.timeout_ms), (Some("x"), Some(5)));
        let err = serde_json::from_value::<WaitArgs>(serde_json::json!({"id": 1, "patern": "x"}))
            .unwrap_err();
        assert!(err.to_string().contains("patern"), "{err}");
        let r: RunArgs =
            serde_json::from_value(serde_json::json!({"id": 1, "input": "ls"})).unwrap();
        assert!(r.enter);
        let k: SendKeysArgs = serde_json::from_value(
            serde_json::json!({"id": 1, "keys": ["Esc", {"text": ":q"}, "Enter"]}),
        )
        .unwrap();
        assert!(matches!(&k.keys[1], KeyArg::Text { text } if text == ":q"));
    }
}

/// An agent state name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AgentStateArg {
    /// Working on a turn.
    Running,
    /// Needs a person or orchestrator.
    AwaitingInput,
    /// Finished its turn.
    Done,
    /// Alive with no task.
    Idle,
    /// Gone.
    Exited,
    /// No signal yet.
    Unknown,
}

/// Arguments of `agent_list`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentListArgs {
    /// Only agents in these states.
    #[serde(default)]
    pub(crate) states: Vec<AgentStateArg>,
}

/// Arguments of `agent_watch`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentWatchArgs {
    /// Cursor from the previous agent_watch; omit to get only changes from now.
    #[serde(default)]
    pub(crate) cursor: Option<u64>,
    /// How long to wait for a change, ms (default 30000, at most about 50000).
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
    /// Only these agents (process ids).
    #[serde(default)]
    #[schemars(schema_with = "proc_refs")]
    pub(crate) ids: Vec<u64>,
    /// Only changes into these states.
    #[serde(default)]
    pub(crate) states: Vec<AgentStateArg>,
}

/// `all` or `any`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ModeArg {
    /// Every agent.
    All,
    /// The first one.
    Any,
}

fn default_mode() -> ModeArg {
    ModeArg::All
}

/// Arguments of `agent_wait`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentWaitArgs {
    /// The agents' process ids.
    #[schemars(schema_with = "proc_refs")]
    pub(crate) ids: Vec<u64>,
    /// Target states (default: awaiting_input, done, idle).
    #[serde(default)]
    pub(crate) states: Vec<AgentStateArg>,
    /// Wait for all of them, or return when any gets there.
    #[serde(default = "default_mode")]
    pub(crate) mode: ModeArg,
    /// How long, ms (default 30000, at most about 50000; call again to keep waiting).
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
}

/// Arguments of `agent_send`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentSendArgs {
    /// The agents' process ids.
    #[schemars(schema_with = "proc_refs")]
    pub(crate) ids: Vec<u64>,
    /// The prompt (multi-line text goes as one paste).
    pub(crate) text: String,
    /// Wait until each agent is ready (awaiting_input, done or idle) before typing.
    #[serde(default = "default_true")]
    pub(crate) wait_ready: bool,
    /// Press Enter after the text.
    #[serde(default = "default_true")]
    pub(crate) enter: bool,
    /// Idempotency key: retrying with the same key never types the prompt twice.
    #[serde(default)]
    pub(crate) key: Option<String>,
    /// How long to wait for readiness, ms.
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
}

/// What `agent_hooks` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum HookActionArg {
    /// Report what is installed.
    Status,
    /// Install Portal's hooks (idempotent).
    Install,
}

fn default_hook_action() -> HookActionArg {
    HookActionArg::Status
}

/// Which agent's hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum HookAgentArg {
    /// Claude Code.
    Claude,
    /// Codex.
    Codex,
    /// Both.
    All,
}

fn default_hook_agent() -> HookAgentArg {
    HookAgentArg::All
}

/// Arguments of `agent_hooks`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentHooksArgs {
    /// status or install.
    #[serde(default = "default_hook_action")]
    pub(crate) action: HookActionArg,
    /// claude, codex or all.
    #[serde(default = "default_hook_agent")]
    pub(crate) agent: HookAgentArg,
    /// Show the change without writing.
    #[serde(default = "default_false")]
    pub(crate) dry_run: bool,
}
