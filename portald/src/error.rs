//! The daemon-wide error: what a request can fail with, whichever part of
//! the daemon it reached. [`ProcError`] stays the narrow error of one
//! process's operations (and of looking processes up); the rest (agent hook
//! files, a hook report with the wrong token, a daemon task that failed)
//! are errors of the daemon, not of a process. `grpc/status.rs` maps every
//! variant to a code in one table.

use crate::agents::hooks::HookError;
use crate::domain::ProcId;
use crate::proc::ProcError;
use crate::store::StoreError;

/// What went wrong with a request.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DaemonError {
    /// About one process, or finding it.
    #[error(transparent)]
    Proc(#[from] ProcError),
    /// A hooks file could not be read or edited.
    #[error(transparent)]
    Hooks(#[from] HookError),
    /// A hook report for a process with a token that is not its own.
    #[error(
        "the token does not match process {0}; reports must come from inside it (PORTAL_SESSION_TOKEN)"
    )]
    BadToken(ProcId),
    /// A live upgrade was refused; the daemon keeps serving.
    #[error("upgrade refused: {0}")]
    Upgrade(#[from] crate::upgrade::Refused),
    /// A task the daemon ran for the request failed (it panicked or was
    /// cancelled): a bug, logged.
    #[error("{what} failed inside portald: {reason}")]
    Task {
        /// What the task was doing.
        what: &'static str,
        /// Why it failed.
        reason: String,
    },
}

impl From<StoreError> for DaemonError {
    fn from(e: StoreError) -> Self {
        Self::Proc(ProcError::Store(e))
    }
}

impl DaemonError {
    /// A task of the daemon's that did not finish (`JoinError`).
    pub(crate) fn task(what: &'static str, e: &tokio::task::JoinError) -> Self {
        Self::Task { what, reason: e.to_string() }
    }
}
