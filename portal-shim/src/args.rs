//! Tool arguments. Names and defaults are those of the original Portal's 14
//! tools; doc comments become the JSON schema descriptions the model reads.
//! Unknown fields are refused, so a misspelt argument is an error, not a
//! silently ignored default.

use std::collections::BTreeMap;

use portal_client::vocab;
use portal_proto::v1 as pb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Arguments of `process_start`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StartArgs {
    /// Program (on PATH, or a path). No shell: for pipes or globs run `sh`
    /// with args ["-c", "..."].
    pub(crate) command: String,
    #[serde(default = "default_args")]
    pub(crate) args: Vec<String>,
    /// Absolute working directory (default: the client's).
    #[serde(default)]
    pub(crate) cwd: Option<String>,
    /// Variables to add or override.
    #[serde(default)]
    pub(crate) env: Option<BTreeMap<String, String>>,
    /// Base under env: caller (the client's; default), daemon or clean.
    #[serde(default)]
    pub(crate) env_from: Option<EnvFromArg>,
    /// Kill it when no call names it for this many ms.
    #[serde(default = "default_zero")]
    pub(crate) timeout_ms: u64,
    /// Run on a terminal: true for anything interactive (REPLs, ssh, psql,
    /// gdb, TUIs, prompts). Default false: pipes, stderr apart.
    #[serde(default = "default_false")]
    pub(crate) pty: bool,
    /// Unique name, usable wherever an id is.
    #[serde(default)]
    pub(crate) name: Option<String>,
    /// Terminal rows (default 24).
    #[serde(default)]
    pub(crate) rows: Option<u32>,
    /// Terminal columns (default 80).
    #[serde(default)]
    pub(crate) cols: Option<u32>,
    /// Wait here for "input" (its first prompt), "exit" (a one-shot's output
    /// and exit code) or a text.
    #[serde(default)]
    pub(crate) wait: Option<String>,
    /// Timeout of wait, ms (default 30000, at most ~50000).
    #[serde(default)]
    pub(crate) wait_timeout_ms: Option<u64>,
}

/// Where a program's environment starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EnvFromArg {
    Caller,
    Daemon,
    Clean,
}

impl From<EnvFromArg> for portal_client::environ::EnvFrom {
    fn from(e: EnvFromArg) -> Self {
        match e {
            EnvFromArg::Caller => Self::Caller,
            EnvFromArg::Daemon => Self::Daemon,
            EnvFromArg::Clean => Self::Clean,
        }
    }
}

/// Which output to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Source {
    Stdout,
    Stderr,
    Stdin,
    Both,
}

// Which output to read for `process_read_new` (input is never "new output").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NewSource {
    Stdout,
    Stderr,
    Both,
}

/// Unit of `duration`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Unit {
    Ns,
    Us,
    Ms,
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
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "description": "Id or name."
    })
}

/// Several processes, each by id or name.
fn proc_refs(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "description": "Process ids or names."
    })
}

/// Several processes, described by the tool (each an id or a name).
fn any_array(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array"})
}

/// `any` or `all`, described by the tool.
fn mode_values(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": ["any", "all"]})
}

fn default_args() -> Vec<String> {
    Vec::new()
}

/// Arguments of `process_read`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// stdin is what was typed; both keeps output order.
    #[serde(default = "default_source")]
    pub(crate) source: Source,
    /// Window: the last `duration` units.
    #[serde(default = "default_duration")]
    pub(crate) duration: u64,
    #[serde(default = "default_unit")]
    pub(crate) unit: Unit,
    /// Read forward from this cursor (from any result) instead of a window.
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    /// Page size (default 65536, max 1048576).
    #[serde(default)]
    pub(crate) max_bytes: Option<u64>,
}

/// Which streams a search looks in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SearchSource {
    All,
    Output,
    Stdout,
    Stderr,
    Stdin,
}

fn default_search_source() -> SearchSource {
    SearchSource::All
}

/// Arguments of `process_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchArgs {
    /// Words on one line (any case); "a phrase", prefix*.
    pub(crate) query: String,
    /// Regex the line must match too.
    #[serde(default)]
    pub(crate) regex: Option<String>,
    /// Only this process.
    #[serde(default)]
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: Option<u64>,
    /// output: stdout+stderr; stdin: typed input.
    #[serde(default = "default_search_source")]
    pub(crate) source: SearchSource,
    /// Only the last N seconds.
    #[serde(default)]
    pub(crate) since_s: Option<u64>,
    /// next_page of a previous call.
    #[serde(default)]
    pub(crate) page: Option<String>,
}

/// Arguments of `process_read_new`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadNewArgs {
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// Which output; both keeps their order.
    #[serde(default = "default_new_source")]
    pub(crate) source: NewSource,
    /// Your own cursor: read after it, the shared one untouched.
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    /// Page size (default 65536; newest kept).
    #[serde(default)]
    pub(crate) max_bytes: Option<u64>,
}

/// Arguments of `process_write`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// Verbatim: "\r" is Enter on a PTY (which echoes it), "\n" on pipes,
    /// "\u0003" Ctrl-C.
    pub(crate) content: String,
}

/// Arguments of `process_signal`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignalArgs {
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// Name ("SIGINT", "TERM") or number ("2").
    pub(crate) signal: String,
}

/// Arguments naming one process.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct IdArgs {
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
}

/// Arguments of tools without any.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoArgs {}

/// Arguments of `workspace_up`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkspaceArgs {
    #[serde(default)]
    pub(crate) workspace: Option<String>,
    #[serde(default)]
    pub(crate) file: Option<String>,
    /// Instead of a file: {"member": [{name, command, args, pty, ready, depends_on, prompt}]}.
    #[serde(default)]
    #[schemars(schema_with = "any_object")]
    pub(crate) spec: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Arguments of `workspace_status` and `workspace_down`: those of
/// `workspace_up` (described there).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkspaceRef {
    #[serde(default)]
    pub(crate) workspace: Option<String>,
    #[serde(default)]
    pub(crate) file: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "any_object")]
    pub(crate) spec: Option<serde_json::Map<String, serde_json::Value>>,
}

impl From<WorkspaceRef> for WorkspaceArgs {
    fn from(r: WorkspaceRef) -> Self {
        Self { workspace: r.workspace, file: r.file, spec: r.spec }
    }
}

fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "object" })
}

/// Arguments of `process_screen`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScreenArgs {
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// Resize first.
    #[serde(default)]
    pub(crate) cols: Option<u32>,
    /// Resize first.
    #[serde(default)]
    pub(crate) rows: Option<u32>,
}

/// Arguments of `program_query`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueryArgs {
    /// Name or path ("ssh", "/usr/bin/psql").
    pub(crate) program: String,
}

/// Arguments of `program_record`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordArgs {
    pub(crate) program: String,
    pub(crate) needs_pty: bool,
    /// Replaces the stored notes when given.
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
    /// Text to wait for (escapes stripped).
    #[serde(default)]
    pub(crate) pattern: Option<String>,
    /// pattern and stop are regexes (^/$ match at line ends).
    #[serde(default = "default_false")]
    pub(crate) regex: bool,
    /// Match pattern on the rendered screen (TUIs).
    #[serde(default = "default_false")]
    pub(crate) on_screen: bool,
    /// Patterns that end it as a failure, e.g. ["error:"].
    #[serde(default)]
    pub(crate) stop: Vec<String>,
    /// End after this many quiet ms (quiet is not success).
    #[serde(default)]
    pub(crate) settle_ms: Option<u32>,
    /// End once the screen is unchanged for settle_ms (spinners).
    #[serde(default = "default_false")]
    pub(crate) screen_stable: bool,
    /// Default 30000, at most ~50000.
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
    /// Page size (default 65536, newest kept); never ends it.
    #[serde(default)]
    pub(crate) max_bytes: Option<u64>,
    /// Include the rendered screen.
    #[serde(default = "default_false")]
    pub(crate) snapshot: bool,
    /// End when it waits for input (default without pattern, settle_ms,
    /// screen_stable).
    #[serde(default)]
    pub(crate) on_input: Option<bool>,
    /// Full-screen programs: the output stream, not the screen.
    #[serde(default = "default_false")]
    pub(crate) raw_output: bool,
}

/// Arguments of `process_wait`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WaitArgs {
    #[serde(default)]
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: Option<u64>,
    #[serde(default)]
    #[schemars(schema_with = "any_array")]
    pub(crate) ids: Vec<u64>,
    #[serde(default)]
    #[schemars(schema_with = "mode_values")]
    pub(crate) mode: Option<ModeArg>,
    /// Start here (default: where the last read_new, wait or run stopped;
    /// this call moves it).
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    /// Which output; both keeps their order.
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
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
    /// The command to type (several lines go as one paste where supported).
    pub(crate) input: String,
    #[serde(default = "default_true")]
    pub(crate) enter: bool,
    /// The conditions, as in process_wait.
    #[serde(flatten)]
    pub(crate) until: Until,
}

// One item of `process_send_keys`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum KeyArg {
    /// A key name, or text to type.
    Key(String),
    /// Text typed even if it is a key name.
    Text { text: String },
}

/// Arguments of `process_send_keys`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SendKeysArgs {
    #[schemars(schema_with = "proc_ref")]
    pub(crate) id: u64,
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
        assert_eq!(a.id, Some(1));
        let m: WaitArgs =
            serde_json::from_value(serde_json::json!({"ids": [1, 2], "mode": "all"})).unwrap();
        assert_eq!((m.ids, m.mode), (vec![1, 2], Some(ModeArg::All)));
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

/// An agent state, by the name every client shows ([`names::agent_state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AgentStateArg(pub(crate) pb::AgentState);

impl<'de> Deserialize<'de> for AgentStateArg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        vocab::AgentState::parse(&name).map(pb::AgentState::from).map(Self).ok_or_else(|| {
            let all: Vec<&str> = vocab::AgentState::ATTENTION.iter().map(|s| s.as_str()).collect();
            serde::de::Error::custom(format!(
                "unknown agent state {name:?}, expected one of {}",
                all.join(", ")
            ))
        })
    }
}

impl JsonSchema for AgentStateArg {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "AgentState".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let all: Vec<&str> = vocab::AgentState::ATTENTION.iter().map(|s| s.as_str()).collect();
        schemars::json_schema!({"type": "string", "enum": all})
    }
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
    /// From the last agent_watch (default: from now).
    #[serde(default)]
    pub(crate) cursor: Option<u64>,
    /// Default 30000, at most ~50000.
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
    /// Only these agents.
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
    All,
    Any,
}

fn default_mode() -> ModeArg {
    ModeArg::All
}

/// Arguments of `agent_wait`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentWaitArgs {
    #[schemars(schema_with = "proc_refs")]
    pub(crate) ids: Vec<u64>,
    #[serde(default)]
    pub(crate) states: Vec<AgentStateArg>,
    /// Wait for all (default) or the first.
    #[serde(default = "default_mode")]
    pub(crate) mode: ModeArg,
    /// Default 30000, at most ~50000.
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
}

/// Arguments of `agent_send`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentSendArgs {
    #[schemars(schema_with = "proc_refs")]
    pub(crate) ids: Vec<u64>,
    /// The prompt.
    pub(crate) text: String,
    /// Wait until each is awaiting_input, done or idle.
    #[serde(default = "default_true")]
    pub(crate) wait_ready: bool,
    #[serde(default = "default_true")]
    pub(crate) enter: bool,
    /// Idempotency key.
    #[serde(default)]
    pub(crate) key: Option<String>,
    /// For readiness, ms.
    #[serde(default)]
    pub(crate) timeout_ms: Option<u64>,
}

/// What `agent_hooks` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum HookActionArg {
    Status,
    Install,
}

fn default_hook_action() -> HookActionArg {
    HookActionArg::Status
}

/// Which agent's hooks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum HookAgentArg {
    Claude,
    Codex,
    All,
}

fn default_hook_agent() -> HookAgentArg {
    HookAgentArg::All
}

/// Arguments of `agent_hooks`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentHooksArgs {
    /// Default status.
    #[serde(default = "default_hook_action")]
    pub(crate) action: HookActionArg,
    /// Default all.
    #[serde(default = "default_hook_agent")]
    pub(crate) agent: HookAgentArg,
    /// Show the change, write nothing.
    #[serde(default = "default_false")]
    pub(crate) dry_run: bool,
}
