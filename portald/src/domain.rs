//! Portal's domain types: what a process, a stream, a chunk of output and
//! an agent's state are. The bottom of the daemon: every other module may
//! use it, and it uses none of them, so the store, the screen, the process
//! actors and the agent monitor share these types without importing each
//! other.

use bytes::Bytes;

/// A managed process's id: unique for the life of the database, never reused.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub(crate) struct ProcId(pub(crate) u64);

impl std::fmt::Display for ProcId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One stream of a process. The discriminants are the stored values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum StreamId {
    /// What was written to the program.
    Stdin = 0,
    /// Standard output, or everything a PTY printed.
    Stdout = 1,
    /// Standard error (pipe mode).
    Stderr = 2,
}

impl StreamId {
    /// Every stream, in index order.
    pub(crate) const ALL: [Self; 3] = [Self::Stdin, Self::Stdout, Self::Stderr];

    /// Index into per-stream arrays.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// Lowercase name used in messages.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Self::Stdin => "stdin",
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// A terminal size, already validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TermSize {
    pub(crate) rows: u16,
    pub(crate) cols: u16,
}

/// One chunk of a stream, as recorded.
#[derive(Clone, Debug)]
pub(crate) struct Chunk {
    /// Which process.
    pub(crate) proc: ProcId,
    /// Which stream.
    pub(crate) stream: StreamId,
    /// Offset of the first byte in its stream.
    pub(crate) offset: u64,
    /// Wall-clock ns when read from the program.
    pub(crate) ts_ns: i64,
    /// Monotonic ns when read from the program.
    pub(crate) mono_ns: i64,
    /// The bytes.
    pub(crate) data: Bytes,
    /// Who typed it, for input (the client that wrote it); `None` for
    /// output.
    pub(crate) origin: Option<std::sync::Arc<str>>,
}

impl Chunk {
    /// Offset just past the last byte.
    pub(crate) fn end(&self) -> u64 {
        self.offset + self.data.len() as u64
    }
}

/// What an agent is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub(crate) enum AgentState {
    /// Working on a turn.
    Running,
    /// Needs a person or orchestrator.
    AwaitingInput,
    /// Finished its turn.
    Done,
    /// Alive with no task.
    Idle,
    /// Its program (or the foreground job it ran as) ended.
    Exited,
    /// No usable signal yet.
    Unknown,
}

impl AgentState {
    /// Every state, in attention order (most urgent first).
    pub(crate) const ATTENTION: [Self; 6] =
        [Self::AwaitingInput, Self::Done, Self::Running, Self::Idle, Self::Unknown, Self::Exited];

    /// States in which a send is allowed by default.
    pub(crate) const READY: [Self; 3] = [Self::AwaitingInput, Self::Done, Self::Idle];

    /// Higher is more urgent.
    pub(crate) fn attention(self) -> usize {
        Self::ATTENTION.len()
            - Self::ATTENTION.iter().position(|s| *s == self).unwrap_or(Self::ATTENTION.len())
    }

    /// snake_case name.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::AwaitingInput => "awaiting_input",
            Self::Done => "done",
            Self::Idle => "idle",
            Self::Exited => "exited",
            Self::Unknown => "unknown",
        }
    }

    /// Strict parse of a snake_case name.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => Self::Running,
            "awaiting_input" => Self::AwaitingInput,
            "done" => Self::Done,
            "idle" => Self::Idle,
            "exited" => Self::Exited,
            "unknown" => Self::Unknown,
            _ => return None,
        })
    }

    /// Short label for summaries.
    pub(crate) const fn label(self) -> &'static str {
        match self {
            Self::AwaitingInput => "wait",
            Self::Done => "done",
            Self::Running => "run",
            Self::Idle => "idle",
            Self::Unknown => "?",
            Self::Exited => "exit",
        }
    }
}

/// Where a state came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Source {
    /// A hook report over the socket.
    Hook,
    /// An OSC 3008 record in the output.
    Osc,
    /// A guess from bells and notifications.
    Heuristic,
    /// Exact process facts.
    Lifecycle,
}

impl Source {
    /// The wire and log name (`hook`, `osc`, `heuristic`, `lifecycle`).
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Hook => "hook",
            Self::Osc => "osc",
            Self::Heuristic => "heuristic",
            Self::Lifecycle => "lifecycle",
        }
    }

    /// Strict parse of a name.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        [Self::Hook, Self::Osc, Self::Heuristic, Self::Lifecycle]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

/// A terminal's resize, as the log keeps it (for recordings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Resize {
    /// The process whose terminal it was.
    pub(crate) id: ProcId,
    /// Wall-clock ns.
    pub(crate) at_ns: i64,
    /// The size before.
    pub(crate) from: TermSize,
    /// The size after.
    pub(crate) to: TermSize,
}

/// A recorded transition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Transition {
    /// Global sequence number.
    pub(crate) seq: u64,
    /// The process the agent runs in.
    pub(crate) id: ProcId,
    /// The state it left.
    pub(crate) before: AgentState,
    /// The state it entered.
    pub(crate) after: AgentState,
    /// What said so.
    pub(crate) source: Source,
    /// The agent's name at the time, if known.
    pub(crate) name: Option<String>,
    /// Why, as the record had it (a dialog's kind, `exit 1`).
    pub(crate) reason: Option<String>,
    /// Wall clock, ns.
    pub(crate) at_ns: i64,
}

/// Why a process that ended ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EndReason {
    /// By itself.
    Exited,
    /// Killed on request (Kill, KillAll).
    Killed,
    /// Killed by its idle timeout.
    TimedOut,
    /// Killed because the daemon shut down.
    Stopped,
    /// Killed because portal-holder, its parent, died.
    HolderLost,
}

impl EndReason {
    /// Stored name.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Exited => "exited",
            Self::Killed => "killed",
            Self::TimedOut => "timed_out",
            Self::Stopped => "stopped",
            Self::HolderLost => "holder_lost",
        }
    }
}

/// A process's status as the process table stores it: by name, so the
/// database reads back without the daemon's live state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowStatus {
    /// Running when last written.
    Running,
    /// Ended, and why.
    Ended(EndReason),
    /// Was running when a daemon died; its fate is unknown.
    Lost,
}

impl RowStatus {
    /// Stored name.
    pub(crate) const fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Ended(reason) => reason.as_str(),
            Self::Lost => "lost",
        }
    }

    /// Strict parse of a stored name.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => Self::Running,
            "exited" => Self::Ended(EndReason::Exited),
            "killed" => Self::Ended(EndReason::Killed),
            "timed_out" => Self::Ended(EndReason::TimedOut),
            "stopped" => Self::Ended(EndReason::Stopped),
            "holder_lost" => Self::Ended(EndReason::HolderLost),
            "lost" => Self::Lost,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_names_read_back() {
        for s in [
            RowStatus::Running,
            RowStatus::Lost,
            RowStatus::Ended(EndReason::Exited),
            RowStatus::Ended(EndReason::Killed),
            RowStatus::Ended(EndReason::TimedOut),
            RowStatus::Ended(EndReason::Stopped),
            RowStatus::Ended(EndReason::HolderLost),
        ] {
            assert_eq!(RowStatus::parse(s.as_str()), Some(s));
        }
        for s in [Source::Hook, Source::Osc, Source::Heuristic, Source::Lifecycle] {
            assert_eq!(Source::parse(s.as_str()), Some(s));
        }
        let states = [
            AgentState::Running,
            AgentState::AwaitingInput,
            AgentState::Done,
            AgentState::Idle,
            AgentState::Exited,
            AgentState::Unknown,
        ];
        for s in states {
            assert_eq!(AgentState::parse(s.as_str()), Some(s));
        }
        assert_eq!((RowStatus::parse("Exited"), Source::parse("")), (None, None));
    }
}
