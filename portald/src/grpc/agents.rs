//! The agent rpcs: conversions and the thin glue from requests to
//! [`crate::agents`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use portal_proto::v1 as pb;
use tonic::Status;

use super::convert::{InvalidRequest, status_pb};
use crate::agents::hooks::{self, HookAction, HookAgent};
use crate::agents::{
    AgentEvent, AgentRecord, AgentState, Mode, Source, Transition, WaitOutcome, signals,
};
use crate::daemon::Daemon;
use crate::error::DaemonError;
use crate::proc::{ProcError, ProcId};
use crate::registry::ProcTarget;
use crate::sends::SendSpec;

fn invalid(field: &str, reason: String) -> InvalidRequest {
    InvalidRequest { field: field.to_owned(), reason }
}

/// Wire state → domain (strict: an unset or unknown value is refused).
pub(crate) fn state(field: &str, v: i32) -> Result<AgentState, InvalidRequest> {
    match pb::AgentState::try_from(v) {
        Ok(pb::AgentState::Unspecified) | Err(_) => {
            Err(invalid(field, format!("{v} is not an agent state")))
        }
        Ok(w) => Ok(AgentState::from(w)),
    }
}

fn states(
    field: &str,
    list: &[i32],
    default: &[AgentState],
) -> Result<Vec<AgentState>, InvalidRequest> {
    if list.is_empty() {
        return Ok(default.to_vec());
    }
    list.iter().map(|v| state(field, *v)).collect()
}

fn agent_pb(d: &Daemon, r: AgentRecord) -> pb::Agent {
    let age = crate::sys::monotonic_ns() - r.since_mono_ns;
    let handle = d.lookup(&ProcTarget::Id(r.id.0)).ok();
    let process_status =
        handle.as_ref().map_or(pb::Status::Unspecified, |h| status_pb(h.status()).0);
    let awaiting_secret = handle
        .as_ref()
        .is_some_and(|h| h.shared.awaiting_secret.load(std::sync::atomic::Ordering::Acquire));
    let process_name = handle.and_then(|h| h.facts.spec.name.clone()).unwrap_or_default();
    pb::Agent {
        id: r.id.0,
        name: r.name.unwrap_or_default(),
        kind: r.kind.unwrap_or_default(),
        state: pb::AgentState::from(r.state).into(),
        source: pb::AgentSource::from(r.source).into(),
        exact: r.exact,
        reason: r.reason.unwrap_or_default(),
        since_ns: r.since_ns,
        age_ms: u64::try_from(age / 1_000_000).unwrap_or(0),
        session_id: r.session_id.unwrap_or_default(),
        pid: r.pid.unwrap_or(0),
        event: r.event.unwrap_or_default(),
        process_status: process_status.into(),
        awaiting_secret,
        dialog: r.dialog.unwrap_or_default(),
        process_name,
    }
}

fn transition_pb(t: Transition) -> pb::AgentTransition {
    pb::AgentTransition {
        seq: t.seq,
        id: t.id.0,
        before: pb::AgentState::from(t.before).into(),
        after: pb::AgentState::from(t.after).into(),
        source: pb::AgentSource::from(t.source).into(),
        name: t.name.unwrap_or_default(),
        reason: t.reason.unwrap_or_default(),
        at_ns: t.at_ns,
    }
}

fn timeout(d: &Daemon, ms: u64) -> Duration {
    let requested = if ms == 0 { crate::waits::DEFAULT_TIMEOUT } else { Duration::from_millis(ms) };
    requested.min(d.wait_ceiling())
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Every id must name an existing PTY process.
fn check_ids(d: &Daemon, ids: &[u64]) -> Result<Vec<ProcId>, Status> {
    if ids.is_empty() {
        return Err(invalid("ids", "is empty: name the agents' process ids".into()).into());
    }
    ids.iter()
        .map(|id| {
            let h = d.get(&ProcTarget::Id(*id))?;
            if h.screen.is_none() {
                return Err(ProcError::NotPty(h.id()).into());
            }
            Ok(h.id())
        })
        .collect()
}

/// AgentList: the records that look like agents, most urgent first, with the per-state tally.
pub(crate) fn list(
    d: &Daemon,
    req: &pb::AgentListRequest,
) -> Result<pb::AgentListResponse, Status> {
    let filter = states("states", &req.states, &[])?;
    let all = d.agents().list();
    let summary = crate::agents::summary(&all);
    let agents = all
        .into_iter()
        .filter(|r| filter.is_empty() || filter.contains(&r.state))
        .map(|r| agent_pb(d, r))
        .collect();
    Ok(pb::AgentListResponse { agents, summary })
}

/// Transitions recorded after the ring's reach, from the database.
const WATCH_DB_PAGE: usize = 1000;

/// AgentWatch: a long poll on the transition log.
pub(crate) async fn watch(
    d: &Daemon,
    req: pb::AgentWatchRequest,
) -> Result<pb::AgentWatchResponse, Status> {
    let filter = states("states", &req.states, &[])?;
    let effective = timeout(d, req.timeout_ms);
    let deadline = tokio::time::Instant::now() + effective;
    let mut rx = d.agents().subscribe();
    let mut cursor = req.since;
    loop {
        let (scanned, complete) = d.agent_transitions_after(cursor, WATCH_DB_PAGE).await?;
        if let Some(last) = scanned.last() {
            cursor = cursor.max(last.seq);
        }
        let matching: Vec<pb::AgentTransition> = scanned
            .into_iter()
            .filter(|t| req.ids.is_empty() || req.ids.contains(&t.id.0))
            .filter(|t| filter.is_empty() || filter.contains(&t.after))
            .map(transition_pb)
            .collect();
        if !matching.is_empty() {
            return Ok(pb::AgentWatchResponse {
                transitions: matching,
                cursor,
                effective_timeout_ms: ms(effective),
            });
        }
        if !complete {
            continue;
        }
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { break },
            () = tokio::time::sleep_until(deadline) => break,
            () = d.stopped() => break,
        }
    }
    // A cursor from the future (another database, or "now" asked as the
    // largest number) comes back as the latest sequence number.
    let cursor = cursor.min(d.agents().last_seq());
    Ok(pb::AgentWatchResponse {
        transitions: Vec::new(),
        cursor,
        effective_timeout_ms: ms(effective),
    })
}

/// AgentWait: waits until the agents reach a ready state (every one, or the first).
pub(crate) async fn wait(
    d: &Daemon,
    req: pb::AgentWaitRequest,
) -> Result<pb::AgentWaitResponse, Status> {
    let ids = check_ids(d, &req.ids)?;
    let targets = states("states", &req.states, &AgentState::READY)?;
    let mode = match pb::WaitMode::try_from(req.mode) {
        Ok(pb::WaitMode::Any) => Mode::Any,
        Ok(pb::WaitMode::All | pb::WaitMode::Unspecified) => Mode::All,
        Err(_) => return Err(invalid("mode", format!("{} is not a wait mode", req.mode)).into()),
    };
    let effective = timeout(d, req.timeout_ms);
    let at_input = |id: ProcId| d.get(&ProcTarget::Id(id.0)).is_ok_and(|h| h.waits_for_input());
    let outcomes = d.wait_agents(&ids, &targets, mode, effective, &at_input).await;
    let results = ids
        .iter()
        .zip(outcomes)
        .map(|(id, o)| pb::AgentWaitResult {
            id: id.0,
            outcome: pb::AgentWaitOutcome::from(o).into(),
            agent: d.agents().get(*id).map(|r| agent_pb(d, r)),
        })
        .collect();
    Ok(pb::AgentWaitResponse { results, effective_timeout_ms: ms(effective) })
}

/// AgentSend: types a prompt into each agent once it is ready, deduplicated by key.
pub(crate) async fn send(
    d: &Arc<Daemon>,
    req: pb::AgentSendRequest,
    origin: Option<crate::proc::Origin>,
) -> Result<pb::AgentSendResponse, Status> {
    let ids = check_ids(d, &req.ids)?;
    if req.text.contains('\0') {
        return Err(invalid("text", "contains a NUL byte".into()).into());
    }
    let spec = SendSpec {
        text: req.text,
        wait_ready: req.wait_ready.unwrap_or(true),
        ready_states: states("ready_states", &req.ready_states, &AgentState::READY)?,
        enter: !req.no_enter,
        key: (!req.key.is_empty()).then_some(req.key),
        timeout: timeout(d, req.timeout_ms),
    };
    // Run in a tracked task: a client going away mid-send must not leave a
    // reserved key behind.
    let this = Arc::clone(d);
    // Recorded as the client's agent send, with its key.
    let origin = origin.map(|o| match &spec.key {
        Some(k) => super::clients::clean(&format!("{o} agent send (key {k})")),
        None => super::clients::clean(&format!("{o} agent send")),
    });
    let task = d.spawn(crate::proc::INPUT_ORIGIN.scope(origin, async move {
        let sends = ids.iter().map(|id| {
            let this = Arc::clone(&this);
            let spec = spec.clone();
            async move {
                match this.get(&ProcTarget::Id(id.0)) {
                    Ok(h) => this.send_to_agent(&h, &spec).await,
                    Err(e) => crate::sends::SendResult {
                        sent: false,
                        deduplicated: false,
                        outcome: WaitOutcome::Vanished,
                        detail: Some(e.to_string()),
                        dialog: None,
                    },
                }
            }
        });
        let results = futures::future::join_all(sends).await;
        ids.iter()
            .zip(results)
            .map(|(id, r)| pb::AgentSendResult {
                id: id.0,
                sent: r.sent,
                deduplicated: r.deduplicated,
                outcome: pb::AgentWaitOutcome::from(r.outcome).into(),
                detail: r.detail.unwrap_or_default(),
                dialog: r.dialog.unwrap_or_default(),
            })
            .collect::<Vec<_>>()
    }));
    let results = task.await.map_err(|e| DaemonError::task("sending to agents", &e))?;
    Ok(pb::AgentSendResponse { results })
}

/// Compares two secrets in time independent of where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    use subtle::ConstantTimeEq as _;
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Emit: a hook report, authenticated by the process's token.
pub(crate) fn emit(d: &Daemon, req: pb::EmitRequest) -> Result<pb::EmitResponse, Status> {
    let st = state("state", req.state)?;
    let h = d.get(&ProcTarget::Id(req.session))?;
    if !same_secret(&req.token, &h.facts.token) {
        return Err(DaemonError::BadToken(h.id()).into());
    }
    if h.screen.is_none() {
        return Err(ProcError::NotPty(h.id()).into());
    }
    let nonempty = |s: String| (!s.is_empty()).then_some(s);
    let (session_id, reason) =
        signals::from_hook_payload(&req.payload_json, &req.event, nonempty(req.reason));
    let event = AgentEvent::Report {
        source: Source::Hook,
        state: st,
        reason,
        name: nonempty(req.name),
        event: nonempty(req.event),
        session_id,
    };
    let record = d.agents().apply(h.id(), event).ok_or(ProcError::Gone(h.id()))?;
    Ok(pb::EmitResponse { agent: Some(agent_pb(d, record)) })
}

/// AgentHooks: installs, removes or reports Portal's hooks in the agents' settings.
pub(crate) fn hooks(req: &pb::AgentHooksRequest) -> Result<pb::AgentHooksResponse, Status> {
    let action = match pb::HookAction::try_from(req.action) {
        Ok(pb::HookAction::Install) => HookAction::Install,
        Ok(pb::HookAction::Uninstall) => HookAction::Uninstall,
        Ok(pb::HookAction::Status | pb::HookAction::Unspecified) => HookAction::Status,
        Err(_) => {
            return Err(invalid("action", format!("{} is not a hook action", req.action)).into());
        }
    };
    let agents: &[HookAgent] = match pb::HookAgent::try_from(req.agent) {
        Ok(pb::HookAgent::Claude) => &[HookAgent::Claude],
        Ok(pb::HookAgent::Codex) => &[HookAgent::Codex],
        Ok(pb::HookAgent::All | pb::HookAgent::Unspecified) => {
            &[HookAgent::Claude, HookAgent::Codex]
        }
        Err(_) => return Err(invalid("agent", format!("{} is not a hook agent", req.agent)).into()),
    };
    let home = if req.home.is_empty() {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .ok_or_else(|| invalid("home", "is empty and portald has no HOME".into()))?
    } else {
        PathBuf::from(&req.home)
    };
    let emitter = if req.emitter.is_empty() {
        std::env::current_exe().ok().and_then(|e| Some(e.parent()?.join("portal-cli"))).filter(|p| p.exists()).ok_or_else(|| {
            invalid("emitter", "is empty and no portal-cli is beside portald; pass the emitter's absolute path".into())
        })?
    } else {
        PathBuf::from(&req.emitter)
    };
    if !emitter.is_absolute() {
        return Err(invalid(
            "emitter",
            format!("{} is not absolute: hooks run from anywhere", emitter.display()),
        )
        .into());
    }
    let mut reports = Vec::new();
    for agent in agents {
        let all = agents.len() > 1;
        let r = hooks::run(*agent, HookAction::Status, true, &home, &emitter)
            .map_err(DaemonError::from)?;
        // With `all`, agents that are not on this machine are only reported.
        let r = if all
            && r.status == portal_client::vocab::HookStatus::NotDetected
            && action != HookAction::Status
        {
            r
        } else {
            hooks::run(*agent, action, req.dry_run, &home, &emitter).map_err(DaemonError::from)?
        };
        reports.push(pb::HookReport {
            agent: r.agent.into(),
            path: r.path.to_string_lossy().into_owned(),
            status: r.status.as_str().into(),
            change: r.change,
            note: r.note,
            preview: r.preview,
            trust: r.trust.map_or("", portal_client::vocab::HookTrust::as_str).into(),
        });
    }
    Ok(pb::AgentHooksResponse { reports })
}
