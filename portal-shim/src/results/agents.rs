//! The Agents group's results: the agent monitor's (`agent_list`,
//! `agent_watch`, `agent_wait`, `agent_send`, `agent_hooks`) and the
//! workspaces' (`workspace_up`, `workspace_status`, `workspace_down`).

use portal_client::vocab;
use portal_proto::v1 as pb;
use schemars::JsonSchema;
use serde::Serialize;

/// An agent as agents see it.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentInfo {
    /// Process id of its terminal.
    pub(crate) id: u64,
    /// Name (claude, codex...).
    pub(crate) name: String,
    /// running, awaiting_input, done, idle, exited or unknown.
    pub(crate) state: String,
    /// hook, osc, heuristic or lifecycle.
    pub(crate) source: String,
    /// False for heuristic guesses.
    pub(crate) exact: bool,
    /// Why (permission, question, an exit code...).
    pub(crate) reason: String,
    /// Milliseconds in this state.
    pub(crate) age_ms: u64,
    /// The agent's own session id, when its hooks sent it.
    pub(crate) session_id: String,
    /// The dialog it shows (a permission request or a menu): answer it with
    /// process_send_keys (or leave it to a person); agent_send never types
    /// into it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dialog: Option<String>,
}

impl From<&pb::Agent> for AgentInfo {
    fn from(a: &pb::Agent) -> Self {
        let source = vocab::AgentSource::from(a.source()).as_str();
        Self {
            id: a.id,
            name: a.name.clone(),
            state: vocab::AgentState::from(a.state()).as_str().into(),
            source: source.into(),
            exact: a.exact,
            reason: a.reason.clone(),
            age_ms: a.age_ms,
            session_id: a.session_id.clone(),
            dialog: (!a.dialog.is_empty()).then(|| a.dialog.clone()),
        }
    }
}

/// `agent_list` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentsListed {
    /// Most urgent first.
    pub(crate) agents: Vec<AgentInfo>,
    /// Tally such as "wait:1 done:2 run:3".
    pub(crate) summary: String,
}

/// One state change.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentChange {
    /// Sequence number.
    pub(crate) seq: u64,
    /// Process id.
    pub(crate) id: u64,
    /// Agent name.
    pub(crate) name: String,
    /// State before.
    pub(crate) before: String,
    /// State after.
    pub(crate) after: String,
    /// Why.
    pub(crate) reason: String,
}

/// `agent_watch` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentsWatched {
    /// Changes after the cursor (empty when the timeout passed first).
    pub(crate) changes: Vec<AgentChange>,
    /// Pass as `cursor` next time.
    pub(crate) cursor: u64,
}

/// One agent's outcome.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentOutcome {
    /// Process id.
    pub(crate) id: u64,
    /// reached, timeout, exited, vanished, stopped or not_an_agent.
    pub(crate) outcome: String,
    /// Its state when the call returned.
    pub(crate) state: String,
    /// For agent_send: the prompt was typed.
    pub(crate) sent: Option<bool>,
    /// For agent_send: an earlier call with the same key typed it.
    pub(crate) deduplicated: Option<bool>,
    /// Why not sent; for not_an_agent, what to do instead.
    pub(crate) detail: Option<String>,
    /// For agent_send: the dialog that stopped it (answer it with
    /// process_send_keys, then send again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dialog: Option<String>,
}

/// `agent_wait` and `agent_send` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct AgentOutcomes {
    /// One per id, in the order given.
    pub(crate) results: Vec<AgentOutcome>,
}

/// `agent_hooks` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct HooksReported {
    /// One per agent.
    pub(crate) reports: Vec<HookStatus>,
}

/// One agent's hooks.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct HookStatus {
    /// claude or codex.
    pub(crate) agent: String,
    /// The settings file.
    pub(crate) path: String,
    /// installed, outdated, absent or not_detected.
    pub(crate) status: String,
    /// What changed.
    pub(crate) change: String,
    /// What the user still has to do.
    pub(crate) note: String,
}

/// A `workspace_*` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WorkspaceReport {
    /// Its name.
    pub(crate) workspace: String,
    /// Its members in start order.
    pub(crate) members: Vec<MemberInfo>,
}

/// One member of a workspace.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct MemberInfo {
    /// Its name (its process's name).
    pub(crate) member: String,
    /// Its process, once started.
    pub(crate) id: Option<u64>,
    /// running, exited, killed... or not_started.
    pub(crate) status: String,
    /// Exit code, when it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) exit_code: Option<i32>,
    /// While running: running, awaiting_input, awaiting_secret, idle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) input_state: Option<String>,
    /// The agent in it, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) agent_state: Option<String>,
    /// Restarts after failures.
    pub(crate) restarts: u32,
}
