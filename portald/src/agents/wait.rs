//! Waiting for agents: one, or a fleet (every one, or the first), until a
//! target state, an exit, a cleanup, the daemon's stop or the timeout; a
//! terminal nothing ever recognised as an agent is said to be none.

use std::time::Duration;

use crate::agents::book::Agents;
use crate::agents::reducer::AgentRecord;
use crate::domain::{AgentState, ProcId};

/// How one agent's wait ended (the shared vocabulary): `NotAnAgent` once
/// nothing in the terminal reported or was recognised as a coding agent and
/// it has had its chance ([`NOT_AN_AGENT_GRACE`], or its program waits for
/// input), since a wait for an agent state would only time out.
pub(crate) use portal_client::vocab::AgentWaitOutcome as WaitOutcome;

/// How long a terminal nothing has recognised as an agent may still turn
/// out to be one before an agent wait says it is not: four sweeps of the
/// foreground job ([`crate::config::AGENT_SWEEP`]) and an agent's first
/// report, which comes as it starts; short enough that a wait on a REPL
/// answers at once in a person's terms rather than at its timeout.
pub(crate) const NOT_AN_AGENT_GRACE: Duration = Duration::from_secs(2);

/// Whether a terminal's program waits for input now (asked of its process
/// by the caller): a program at its prompt that never reported as an agent
/// is not one, grace or not.
pub(crate) type WaitsForInput<'a> = &'a (dyn Fn(ProcId) -> bool + Sync);

/// When the grace of a record that is not (yet) an agent ends.
fn grace_end(r: &AgentRecord) -> tokio::time::Instant {
    // A record nothing spoke for keeps the time it was made.
    let age_ns = crate::sys::monotonic_ns().saturating_sub(r.since_mono_ns);
    let age = Duration::from_nanos(u64::try_from(age_ns).unwrap_or(0));
    tokio::time::Instant::now() + NOT_AN_AGENT_GRACE.saturating_sub(age)
}

/// The level check of a wait, and when to look again even without a
/// change (the end of a non-agent's grace).
fn check(
    agents: &Agents,
    id: ProcId,
    states: &[AgentState],
    at_input: WaitsForInput<'_>,
) -> (Option<WaitOutcome>, Option<tokio::time::Instant>) {
    match agents.get(id) {
        None => (Some(WaitOutcome::Vanished), None),
        Some(r) if !r.is_agent => {
            let end = grace_end(&r);
            let ended = r.state == AgentState::Exited;
            if ended || end <= tokio::time::Instant::now() || at_input(id) {
                (Some(WaitOutcome::NotAnAgent), None)
            } else {
                (None, Some(end))
            }
        }
        Some(r) if states.contains(&r.state) => (Some(WaitOutcome::Reached), None),
        Some(r) if r.state == AgentState::Exited => (Some(WaitOutcome::Exited), None),
        Some(_) => (None, None),
    }
}

/// Waits for one agent: level check, then each change, until `deadline`.
pub(crate) async fn wait_one(
    agents: &Agents,
    id: ProcId,
    states: &[AgentState],
    deadline: tokio::time::Instant,
    cancel: &tokio_util::sync::CancellationToken,
    at_input: WaitsForInput<'_>,
) -> WaitOutcome {
    let mut rx = agents.subscribe();
    loop {
        let (outcome, again) = check(agents, id, states, at_input);
        if let Some(o) = outcome {
            return o;
        }
        let wake = again.map_or(deadline, |a| a.min(deadline));
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return WaitOutcome::Stopped },
            () = tokio::time::sleep_until(wake) => if wake == deadline { return WaitOutcome::Timeout },
            () = cancel.cancelled() => return WaitOutcome::Stopped,
        }
    }
}

/// Fleet mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Every one.
    All,
    /// The first.
    Any,
}

/// Waits for several agents; one outcome per id, in input order. In `Any`
/// mode the first `reached` ends the call (an early `exited` does not), and
/// the rest get a final level check.
pub(crate) async fn wait_fleet(
    agents: &Agents,
    ids: &[ProcId],
    states: &[AgentState],
    mode: Mode,
    timeout: Duration,
    cancel: &tokio_util::sync::CancellationToken,
    at_input: WaitsForInput<'_>,
) -> Vec<WaitOutcome> {
    let deadline = tokio::time::Instant::now() + timeout;
    match mode {
        Mode::All => {
            futures::future::join_all(
                ids.iter().map(|id| wait_one(agents, *id, states, deadline, cancel, at_input)),
            )
            .await
        }
        Mode::Any => {
            let mut rx = agents.subscribe();
            loop {
                let checked: Vec<_> =
                    ids.iter().map(|id| check(agents, *id, states, at_input)).collect();
                let any_reached = checked.iter().any(|(o, _)| *o == Some(WaitOutcome::Reached));
                let all_final = checked.iter().all(|(o, _)| o.is_some());
                if any_reached || all_final {
                    return checked
                        .into_iter()
                        .map(|(o, _)| o.unwrap_or(WaitOutcome::Timeout))
                        .collect();
                }
                let wake = checked.iter().filter_map(|(_, a)| *a).fold(deadline, std::cmp::min);
                let stop = tokio::select! {
                    changed = rx.changed() => changed.is_err().then_some(WaitOutcome::Stopped),
                    () = tokio::time::sleep_until(wake) => (wake == deadline).then_some(WaitOutcome::Timeout),
                    () = cancel.cancelled() => Some(WaitOutcome::Stopped),
                };
                if let Some(end) = stop {
                    return ids
                        .iter()
                        .map(|id| check(agents, *id, states, at_input).0.unwrap_or(end))
                        .collect();
                }
            }
        }
    }
}
