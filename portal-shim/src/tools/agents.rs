//! The agent monitor's tools: list, watch, wait, send and hooks.

use portal_client::vocab;
use portal_proto::v1 as pb;

use super::{Progress, Reply, Shim};
use crate::args::{
    AgentHooksArgs, AgentListArgs, AgentSendArgs, AgentStateArg, AgentWaitArgs, AgentWatchArgs,
    HookActionArg, HookAgentArg, ModeArg,
};
use crate::results::{
    AgentChange, AgentInfo, AgentOutcome, AgentOutcomes, AgentsListed, AgentsWatched, HookStatus,
    HooksReported,
};

/// What an agent wait says of a terminal that holds no agent.
const NOT_AN_AGENT: &str = "no coding agent runs in it (nothing reported or was recognised as one), so its agent state never changes: wait for the program with process_wait";

/// What agent_send says of a process that is not an agent.
const NOT_AN_AGENT_SEND: &str = "no coding agent runs in it (nothing reported or was recognised as one): type into it with process_run";

fn agent_state(s: AgentStateArg) -> pb::AgentState {
    s.0
}

impl Shim {
    pub(super) async fn agent_list(&self, a: AgentListArgs, _: Progress) -> Reply<AgentsListed> {
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
        Ok((text, AgentsListed { agents, summary: r.summary }))
    }

    pub(super) async fn agent_watch(
        &self,
        a: AgentWatchArgs,
        progress: Progress,
    ) -> Reply<AgentsWatched> {
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
                before: vocab::AgentState::from(t.before()).as_str().into(),
                after: vocab::AgentState::from(t.after()).as_str().into(),
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
        Ok((text, AgentsWatched { changes, cursor: r.cursor }))
    }

    pub(super) async fn agent_wait(
        &self,
        a: AgentWaitArgs,
        progress: Progress,
    ) -> Reply<AgentOutcomes> {
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
                outcome: vocab::AgentWaitOutcome::from(x.outcome()).as_str().into(),
                state: x
                    .agent
                    .as_ref()
                    .map_or("unknown", |g| vocab::AgentState::from(g.state()).as_str())
                    .into(),
                sent: None,
                deduplicated: None,
                detail: (x.outcome() == pb::AgentWaitOutcome::NotAnAgent)
                    .then(|| NOT_AN_AGENT.to_owned()),
                dialog: None,
            })
            .collect();
        let text = results
            .iter()
            .map(|x| match &x.detail {
                Some(d) => format!("{}: {}: {d}", x.id, x.outcome),
                None => format!("{}: {} ({})", x.id, x.outcome, x.state),
            })
            .collect::<Vec<_>>()
            .join("\n");
        Ok((text, AgentOutcomes { results }))
    }

    pub(super) async fn agent_send(
        &self,
        a: AgentSendArgs,
        progress: Progress,
    ) -> Reply<AgentOutcomes> {
        let req = pb::AgentSendRequest {
            ids: a.ids,
            text: a.text,
            wait_ready: Some(a.wait_ready),
            ready_states: vec![],
            no_enter: !a.enter,
            key: a.key.unwrap_or_default(),
            timeout_ms: a.timeout_ms.unwrap_or(0),
        };
        let call = self.call_once(None, |mut c| {
            let req = req.clone();
            async move { c.agent_send(req).await }
        });
        let r = self.with_progress(&progress, "sending", None, call).await?;
        let results: Vec<AgentOutcome> = r
            .results
            .iter()
            .map(|x| AgentOutcome {
                id: x.id,
                outcome: vocab::AgentWaitOutcome::from(x.outcome()).as_str().into(),
                state: String::new(),
                sent: Some(x.sent),
                deduplicated: Some(x.deduplicated),
                detail: if x.outcome() == pb::AgentWaitOutcome::NotAnAgent {
                    Some(NOT_AN_AGENT_SEND.to_owned())
                } else {
                    (!x.detail.is_empty()).then(|| x.detail.clone())
                },
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
        Ok((text, AgentOutcomes { results }))
    }

    pub(super) async fn agent_hooks(&self, a: AgentHooksArgs, _: Progress) -> Reply<HooksReported> {
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
        Ok((text, HooksReported { reports }))
    }
}
