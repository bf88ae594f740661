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

use portal_client::vocab::Status;
/// What an agent is doing, and where that came from: the one vocabulary
/// the daemon, the shim and the CLI share.
pub(crate) use portal_client::vocab::{AgentSource as Source, AgentState};

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
    /// The status in the vocabulary the daemon, the shim and the CLI share.
    pub(crate) const fn name(self) -> Status {
        match self {
            Self::Running => Status::Running,
            Self::Ended(EndReason::Exited) => Status::Exited,
            Self::Ended(EndReason::Killed) => Status::Killed,
            Self::Ended(EndReason::TimedOut) => Status::TimedOut,
            Self::Ended(EndReason::Stopped) => Status::Stopped,
            Self::Ended(EndReason::HolderLost) => Status::HolderLost,
            Self::Lost => Status::Lost,
        }
    }

    /// Stored name.
    pub(crate) const fn as_str(self) -> &'static str {
        self.name().as_str()
    }

    /// Strict parse of a stored name.
    pub(crate) fn parse(s: &str) -> Option<Self> {
        Some(match Status::parse(s)? {
            Status::Running => Self::Running,
            Status::Exited => Self::Ended(EndReason::Exited),
            Status::Killed => Self::Ended(EndReason::Killed),
            Status::TimedOut => Self::Ended(EndReason::TimedOut),
            Status::Stopped => Self::Ended(EndReason::Stopped),
            Status::HolderLost => Self::Ended(EndReason::HolderLost),
            Status::Lost => Self::Lost,
            // Never stored: only a client says it, of an older daemon.
            Status::Unknown => return None,
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
