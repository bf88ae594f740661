//! Where a managed process is in its life, as its actor tracks it: one
//! state at a time, each with what only it has (the exit once it came, why
//! Portal ends the program, the deadline of the phase), so a combination
//! that cannot happen cannot be written down. The actor makes the
//! transitions; see its module for when each happens.

use tokio::time::Instant;

#[cfg(doc)]
use crate::config::{EXIT_ABANDON_GRACE, EXIT_DRAIN_GRACE};
use crate::proc::EndReason;
use crate::sys::ExitInfo;

/// Where the process is in its life. Each state carries what only it has
/// (the exit once it came, why Portal ends it, the deadline of the phase),
/// so a combination that cannot happen cannot be written down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Life {
    /// The program runs and nothing is ending it.
    Running,
    /// A kill is under way (a request, the idle timeout, every handle
    /// dropped): SIGKILL went to the tree, and the exit is awaited. The
    /// idle timeout stays armed.
    Killing {
        /// Why; the first reason stands.
        reason: EndReason,
    },
    /// The daemon stops: SIGHUP (PTY) or SIGTERM (pipes) went to the tree.
    Terminating {
        /// Why ([`EndReason::Stopped`], unless a kill was under way).
        reason: EndReason,
        /// When SIGKILL follows if the program still runs (`None` once sent).
        kill_at: Option<Instant>,
    },
    /// The program exited; its output is read until every stream ends.
    Exited {
        /// How it exited.
        exit: ExitInfo,
        /// Why, when Portal ended it (`None`: it exited by itself).
        reason: Option<EndReason>,
        /// What happens if streams stay open (`None`: none was open).
        drain: Option<Drain>,
    },
    /// The daemon hands its programs over (a live upgrade): the program
    /// keeps running, the readers stop at a chunk boundary, and the actor
    /// leaves its state with the holder instead of ending anything once
    /// every stream has stopped. Deadlines are the next daemon's.
    HandingOver {
        /// The exit, if it came meanwhile (the next daemon records it).
        exit: Option<ExitInfo>,
        /// A kill under way: finished here (SIGKILL was sent) and its end
        /// recorded, not handed over half done, or the next daemon would
        /// see a running program and never send the SIGKILL.
        kill: Option<EndReason>,
    },
    /// The end is recorded (or, when the daemon stopped before the disk
    /// took it, left to the holder and the next daemon). The actor serves
    /// reads and snapshots until every handle is dropped.
    Ended,
}

/// What happens to an exited program's streams that stay open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Drain {
    /// Background jobs may still print: at `until` the rest of the session
    /// is killed.
    Grace {
        /// The end of [`EXIT_DRAIN_GRACE`].
        until: Instant,
    },
    /// The rest of the session was killed: at `until` the streams still
    /// open (a descendant escaped with `setsid`) are abandoned.
    Abandon {
        /// The end of [`EXIT_ABANDON_GRACE`].
        until: Instant,
    },
}

impl Life {
    /// Whether the program's exit has come.
    pub(super) fn exited(self) -> bool {
        match self {
            Self::Running | Self::Killing { .. } | Self::Terminating { .. } => false,
            Self::Exited { .. } | Self::Ended => true,
            Self::HandingOver { exit, .. } => exit.is_some(),
        }
    }

    /// Why Portal ends the program, if it does.
    pub(super) fn reason(self) -> Option<EndReason> {
        match self {
            Self::Running | Self::Ended => None,
            Self::Killing { reason } | Self::Terminating { reason, .. } => Some(reason),
            Self::Exited { reason, .. } => reason,
            Self::HandingOver { kill, .. } => kill,
        }
    }
}
