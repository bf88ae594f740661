//! The one mapping from domain errors to gRPC statuses.
//!
//! Codes are chosen by what the client should do next: `UNAVAILABLE` = retry
//! (the daemon is going away), `FAILED_PRECONDITION` = not until the state
//! changes, `INVALID_ARGUMENT` = change the request. Every status also
//! carries a typed [`pb::ErrorDetail`] in its details: the finer kind, and
//! whether nothing was done (so a client may repeat the call as it was).
//! Clients decide from those, never from the message's words. The match has
//! no wildcard, so a new error variant forces a decision here.

use portal_proto::v1::{self as pb, ErrorKind};
use tonic::{Code, Status};

use super::convert::InvalidRequest;
use crate::agents::hooks::HookError;
use crate::error::DaemonError;
use crate::proc::ProcError;
use crate::store::StoreError;

/// The code and kind of each error of the daemon.
pub(crate) fn class(err: &DaemonError) -> (Code, ErrorKind) {
    match err {
        DaemonError::Proc(e) => proc_class(e),
        DaemonError::Hooks(HookError::Malformed { .. }) => {
            (Code::FailedPrecondition, ErrorKind::HooksFileMalformed)
        }
        DaemonError::Hooks(HookError::Io { .. }) | DaemonError::Task { .. } => {
            (Code::Internal, ErrorKind::Internal)
        }
        DaemonError::BadToken(_) => (Code::PermissionDenied, ErrorKind::BadToken),
        DaemonError::Upgrade(_) => (Code::FailedPrecondition, ErrorKind::UpgradeRefused),
    }
}

/// The code and kind of each error of a process's operations.
fn proc_class(err: &ProcError) -> (Code, ErrorKind) {
    match err {
        ProcError::NotFound(_) | ProcError::NameNotFound(_) => {
            (Code::NotFound, ErrorKind::NoSuchProcess)
        }
        ProcError::NameTaken(_) => (Code::AlreadyExists, ErrorKind::NameTaken),
        ProcError::Spawn { .. } => (Code::InvalidArgument, ErrorKind::CannotStart),
        ProcError::BadKey(_) => (Code::InvalidArgument, ErrorKind::BadRequest),
        ProcError::NotRunning { .. } => (Code::FailedPrecondition, ErrorKind::Ended),
        ProcError::StillRunning(_) => (Code::FailedPrecondition, ErrorKind::StillRunning),
        ProcError::NotPty(_) => (Code::FailedPrecondition, ErrorKind::NotATerminal),
        ProcError::StdinClosed(_) => (Code::FailedPrecondition, ErrorKind::InputClosed),
        ProcError::OffsetPastEnd { .. } => (Code::OutOfRange, ErrorKind::PastEnd),
        ProcError::TooMany { .. } => (Code::ResourceExhausted, ErrorKind::Limit),
        ProcError::InputBacklog { .. } => (Code::ResourceExhausted, ErrorKind::InputNotRead),
        ProcError::UnreadInputTotal { .. } => (Code::ResourceExhausted, ErrorKind::InputPilingUp),
        ProcError::ShuttingDown => (Code::Unavailable, ErrorKind::GoingAway),
        ProcError::Interrupted(_) => (Code::Unavailable, ErrorKind::ResultPending),
        ProcError::Gone(_) | ProcError::Io { .. } | ProcError::Store(_) => {
            (Code::Internal, ErrorKind::Internal)
        }
    }
}

/// Whether the daemon carried out nothing of a call that failed with `err`
/// (it refused it as it went away): the client may repeat the call as it was.
const fn nothing_done(err: &DaemonError) -> bool {
    matches!(err, DaemonError::Proc(ProcError::ShuttingDown))
}

/// A status of `code` and `kind` saying `message`, with its typed detail.
pub(crate) fn status(code: Code, kind: ErrorKind, message: impl Into<String>) -> Status {
    let detail = pb::ErrorDetail { nothing_done: false, kind: kind.into() };
    portal_proto::status(code, message, &detail)
}

impl From<ProcError> for Status {
    fn from(err: ProcError) -> Self {
        DaemonError::Proc(err).into()
    }
}

impl From<DaemonError> for Status {
    fn from(err: DaemonError) -> Self {
        let (code, kind) = class(&err);
        let mut msg = portal_client::error::error_chain(&err);
        if code == Code::Internal {
            tracing::error!(error = %msg, "internal error");
            msg.push_str(" (see the portald log)");
        }
        let detail = pb::ErrorDetail { nothing_done: nothing_done(&err), kind: kind.into() };
        portal_proto::status(code, msg, &detail)
    }
}

impl From<InvalidRequest> for Status {
    fn from(err: InvalidRequest) -> Self {
        status(Code::InvalidArgument, ErrorKind::BadRequest, err.to_string())
    }
}

impl From<StoreError> for Status {
    fn from(err: StoreError) -> Self {
        ProcError::Store(err).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::ProcId;

    #[test]
    fn every_variant_has_the_intended_code() {
        let io = || std::io::Error::other("x");
        let procs: Vec<(ProcError, Code)> = vec![
            (ProcError::NotFound(3), Code::NotFound),
            (ProcError::NameNotFound("a".into()), Code::NotFound),
            (ProcError::NameTaken("a".into()), Code::AlreadyExists),
            (
                ProcError::NotRunning { id: ProcId(1), status: crate::proc::ProcStatus::Lost },
                Code::FailedPrecondition,
            ),
            (ProcError::StillRunning(ProcId(1)), Code::FailedPrecondition),
            (ProcError::NotPty(ProcId(1)), Code::FailedPrecondition),
            (ProcError::StdinClosed(ProcId(1)), Code::FailedPrecondition),
            (
                ProcError::Spawn {
                    program: "x".into(),
                    reason: crate::proc::SpawnFailure::Holder("y".into()),
                },
                Code::InvalidArgument,
            ),
            (ProcError::TooMany { limit: 1 }, Code::ResourceExhausted),
            (
                ProcError::InputBacklog { id: ProcId(1), pending: 1, limit: 1 },
                Code::ResourceExhausted,
            ),
            (
                ProcError::UnreadInputTotal { id: ProcId(1), pending: 1, limit: 1 },
                Code::ResourceExhausted,
            ),
            (
                ProcError::OffsetPastEnd { id: ProcId(1), stream: "stdout", offset: 9, end: 1 },
                Code::OutOfRange,
            ),
            (ProcError::ShuttingDown, Code::Unavailable),
            (ProcError::Interrupted(ProcId(1)), Code::Unavailable),
            (
                ProcError::BadKey(crate::proc::keys::UnknownKey("Entr".into())),
                Code::InvalidArgument,
            ),
            (ProcError::Gone(ProcId(1)), Code::Internal),
            (ProcError::Io { id: ProcId(1), op: "x", source: io() }, Code::Internal),
            (ProcError::Store(StoreError::Closed), Code::Internal),
        ];
        let daemon: Vec<(DaemonError, Code)> = vec![
            (DaemonError::BadToken(ProcId(1)), Code::PermissionDenied),
            (DaemonError::Task { what: "x", reason: "panicked".into() }, Code::Internal),
            (DaemonError::Upgrade(crate::upgrade::Refused::Busy), Code::FailedPrecondition),
            (
                DaemonError::Hooks(HookError::Malformed {
                    path: "/h/settings.json".into(),
                    kind: "JSON",
                    reason: "line 1".into(),
                }),
                Code::FailedPrecondition,
            ),
            (
                DaemonError::Hooks(HookError::Io {
                    op: "writing",
                    path: "/h/settings.json".into(),
                    source: io(),
                }),
                Code::Internal,
            ),
        ];
        // Every variant has a row: `variant` matches without a wildcard, so a
        // new variant does not compile until it is named there, and then this
        // fails until the table has its row.
        let rows: std::collections::BTreeSet<&str> = procs
            .iter()
            .map(|(e, _)| proc_variant(e))
            .chain(daemon.iter().map(|(e, _)| variant(e)))
            .collect();
        assert_eq!(rows.len(), VARIANTS, "a variant without a row: {rows:?}");
        let cases = procs.into_iter().map(|(e, c)| (DaemonError::from(e), c)).chain(daemon);
        for (err, want) in cases {
            let msg = err.to_string();
            let going_away = matches!(err, DaemonError::Proc(ProcError::ShuttingDown));
            let status = Status::from(err);
            assert_eq!(status.code(), want, "{msg}");
            assert!(status.message().starts_with(&msg), "{}", status.message());
            // The typed detail travels with every status: a kind, and
            // "nothing done" exactly when the daemon refused as it went away.
            let detail = portal_proto::detail(&status);
            assert_ne!(detail.kind(), ErrorKind::Unspecified, "{msg}");
            assert_eq!(detail.nothing_done, going_away, "{msg}");
        }
    }

    /// How many variants [`variant`] names.
    const VARIANTS: usize = 23;

    /// A process error's variant.
    fn proc_variant(e: &ProcError) -> &'static str {
        match e {
            ProcError::NotFound(_) => "NotFound",
            ProcError::NameNotFound(_) => "NameNotFound",
            ProcError::NameTaken(_) => "NameTaken",
            ProcError::NotRunning { .. } => "NotRunning",
            ProcError::StillRunning(_) => "StillRunning",
            ProcError::NotPty(_) => "NotPty",
            ProcError::StdinClosed(_) => "StdinClosed",
            ProcError::Spawn { .. } => "Spawn",
            ProcError::TooMany { .. } => "TooMany",
            ProcError::InputBacklog { .. } => "InputBacklog",
            ProcError::UnreadInputTotal { .. } => "UnreadInputTotal",
            ProcError::BadKey(_) => "BadKey",
            ProcError::OffsetPastEnd { .. } => "OffsetPastEnd",
            ProcError::ShuttingDown => "ShuttingDown",
            ProcError::Interrupted(_) => "Interrupted",
            ProcError::Gone(_) => "Gone",
            ProcError::Io { .. } => "Io",
            ProcError::Store(_) => "Store",
        }
    }

    /// A daemon error's variant (hook errors by their own variants).
    fn variant(e: &DaemonError) -> &'static str {
        match e {
            DaemonError::Proc(p) => proc_variant(p),
            DaemonError::Hooks(HookError::Malformed { .. }) => "Hooks::Malformed",
            DaemonError::Hooks(HookError::Io { .. }) => "Hooks::Io",
            DaemonError::BadToken(_) => "BadToken",
            DaemonError::Task { .. } => "Task",
            DaemonError::Upgrade(_) => "Upgrade",
        }
    }

    #[test]
    fn messages_name_the_thing() {
        assert_eq!(Status::from(ProcError::NotFound(12)).message(), "no process with id 12");
        // A program that exited a moment ago is not called what it is not.
        let just =
            ProcError::NotRunning { id: ProcId(4), status: crate::proc::ProcStatus::Running };
        assert_eq!(
            Status::from(just).message(),
            "process 4 is not running (its program has just exited)"
        );
        let missing =
            crate::proc::SpawnFailure::from(std::io::Error::from(std::io::ErrorKind::NotFound));
        let spawn = ProcError::Spawn { program: "./x".into(), reason: missing };
        assert!(
            matches!(&spawn, ProcError::Spawn { reason: crate::proc::SpawnFailure::Io(e), .. } if e.kind() == std::io::ErrorKind::NotFound)
        );
        assert!(Status::from(spawn).message().starts_with("cannot execute \"./x\": "));
        let s = Status::from(InvalidRequest { field: "cwd".into(), reason: "is relative".into() });
        assert_eq!((s.code(), s.message()), (Code::InvalidArgument, "invalid cwd: is relative"));
    }
}
