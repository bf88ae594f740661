//! The lowercase names clients show for the wire's enums (`timed_out`,
//! `awaiting_input`, `screen_stable`…), the same in the CLI's tables and
//! JSON and in the MCP shim's results.

use portal_proto::v1 as pb;

/// A process status.
#[must_use]
pub fn status(s: pb::Status) -> &'static str {
    match s {
        pb::Status::Running => "running",
        pb::Status::Exited => "exited",
        pb::Status::Killed => "killed",
        pb::Status::TimedOut => "timed_out",
        pb::Status::Stopped => "stopped",
        pb::Status::Lost => "lost",
        pb::Status::HolderLost => "holder_lost",
        pb::Status::Unspecified => "unknown",
    }
}

/// A stream (unset reads as stdout, a terminal's one output).
#[must_use]
pub fn stream(v: i32) -> &'static str {
    match pb::Stream::try_from(v) {
        Ok(pb::Stream::Stdin) => "stdin",
        Ok(pb::Stream::Stderr) => "stderr",
        _ => "stdout",
    }
}

/// Why a wait ended.
#[must_use]
pub fn wait_reason(r: pb::WaitReason) -> &'static str {
    match r {
        pb::WaitReason::Matched => "matched",
        pb::WaitReason::Stopped => "stopped",
        pb::WaitReason::Settled => "settled",
        pb::WaitReason::ScreenStable => "screen_stable",
        pb::WaitReason::Prompt => "prompt",
        pb::WaitReason::Exited => "exited",
        pb::WaitReason::Timeout => "timeout",
        pb::WaitReason::InputRequested => "input_requested",
        pb::WaitReason::AwaitingSecret => "awaiting_secret",
        pb::WaitReason::Unspecified => "unknown",
    }
}

/// Whether a program waits for input.
#[must_use]
pub fn input_state(s: pb::InputState) -> &'static str {
    match s {
        pb::InputState::Running => "running",
        pb::InputState::AwaitingInput => "awaiting_input",
        pb::InputState::AwaitingSecret => "awaiting_secret",
        pb::InputState::Idle => "idle",
        pb::InputState::Exited => "exited",
        pb::InputState::Unspecified => "unknown",
    }
}

/// What decided an input state.
#[must_use]
pub fn input_source(s: pb::InputSource) -> &'static str {
    match s {
        pb::InputSource::Kernel => "kernel",
        pb::InputSource::Heuristic => "heuristic",
        pb::InputSource::KernelPrompt => "kernel_prompt",
        pb::InputSource::Unspecified => "none",
    }
}

/// An agent state.
#[must_use]
pub fn agent_state(s: pb::AgentState) -> &'static str {
    match s {
        pb::AgentState::Running => "running",
        pb::AgentState::AwaitingInput => "awaiting_input",
        pb::AgentState::Done => "done",
        pb::AgentState::Idle => "idle",
        pb::AgentState::Exited => "exited",
        pb::AgentState::Unknown | pb::AgentState::Unspecified => "unknown",
    }
}

/// An agent state's short label in tallies ("wait:1 done:2 run:3"), as
/// the daemon's `summary` writes them.
#[must_use]
pub fn agent_state_label(s: pb::AgentState) -> &'static str {
    match s {
        pb::AgentState::AwaitingInput => "wait",
        pb::AgentState::Done => "done",
        pb::AgentState::Running => "run",
        pb::AgentState::Idle => "idle",
        pb::AgentState::Exited => "exit",
        pb::AgentState::Unknown | pb::AgentState::Unspecified => "?",
    }
}

/// Every agent state a client may name, most urgent first.
pub const AGENT_STATES: [pb::AgentState; 6] = [
    pb::AgentState::AwaitingInput,
    pb::AgentState::Done,
    pb::AgentState::Running,
    pb::AgentState::Idle,
    pb::AgentState::Unknown,
    pb::AgentState::Exited,
];

/// The agent state [`agent_state`] names `name`; `None` for any other text.
#[must_use]
pub fn agent_state_named(name: &str) -> Option<pb::AgentState> {
    AGENT_STATES.into_iter().find(|s| agent_state(*s) == name)
}

/// Where an agent state came from.
#[must_use]
pub fn agent_source(s: pb::AgentSource) -> &'static str {
    match s {
        pb::AgentSource::Hook => "hook",
        pb::AgentSource::Osc => "osc",
        pb::AgentSource::Heuristic => "heuristic",
        pb::AgentSource::Lifecycle | pb::AgentSource::Unspecified => "lifecycle",
    }
}

/// How one agent's wait ended.
#[must_use]
pub fn agent_wait_outcome(o: pb::AgentWaitOutcome) -> &'static str {
    match o {
        pb::AgentWaitOutcome::Reached => "reached",
        pb::AgentWaitOutcome::Timeout => "timeout",
        pb::AgentWaitOutcome::Exited => "exited",
        pb::AgentWaitOutcome::Vanished => "vanished",
        pb::AgentWaitOutcome::NotAnAgent => "not_an_agent",
        pb::AgentWaitOutcome::Stopped | pb::AgentWaitOutcome::Unspecified => "stopped",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_state_names_round_trip() {
        for s in AGENT_STATES {
            assert_eq!(agent_state_named(agent_state(s)), Some(s));
        }
        assert_eq!(agent_state_named("waiting"), None);
    }
}
