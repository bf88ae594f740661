//! What the [`Store`](super::Store) handle and the writer thread share: the
//! messages the handle queues, the records they carry, and the state both
//! see (the live processes whose history starts the writer moves, the log's
//! health, the search feed).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::error::StoreError;
use super::feed::LogFeed;
use crate::domain::{Chunk, ProcId, Resize, RowStatus, Transition};

/// A process row as created at start.
#[derive(Clone, Debug)]
pub(crate) struct NewProc {
    /// Its name, if it was given one.
    pub(crate) name: Option<String>,
    /// The program as the caller named it.
    pub(crate) command: String,
    pub(crate) args: Vec<String>,
    /// Working directory.
    pub(crate) cwd: String,
    /// Environment overrides as JSON.
    pub(crate) env_json: String,
    /// `pty` or `pipes`.
    pub(crate) mode: &'static str,
    /// Rows and cols for PTYs.
    pub(crate) size: Option<(u16, u16)>,
    /// Idle timeout.
    pub(crate) timeout_ms: u64,
    /// Wall-clock start.
    pub(crate) started_at_ns: i64,
    /// Restart policy and run, as JSON (none without a policy or a run).
    pub(crate) supervision: Option<String>,
}

/// A status change of a process row.
#[derive(Clone, Debug)]
pub(crate) struct StatusUpdate {
    /// The process whose row changes.
    pub(crate) id: ProcId,
    /// OS pid.
    pub(crate) pid: u32,
    /// Its status now (running, ended and why, or lost).
    pub(crate) status: RowStatus,
    /// Exit code.
    pub(crate) exit_code: Option<i32>,
    /// Exit signal.
    pub(crate) exit_signal: Option<i32>,
    /// End time.
    pub(crate) ended_at_ns: Option<i64>,
}

/// A program registry entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProgramRow {
    /// Canonical name.
    pub(crate) program: String,
    /// Needs a PTY.
    pub(crate) needs_pty: bool,
    /// The notes recorded with it (empty: none).
    pub(crate) notes: String,
    /// Consecutive confirmations.
    pub(crate) confirmed_count: u32,
    /// Last record time.
    pub(crate) last_confirmed_at_ns: i64,
}

/// A program registry record request.
#[derive(Clone, Debug)]
pub(crate) struct ProgramRecord {
    /// Canonical name.
    pub(crate) program: String,
    /// Needs a PTY.
    pub(crate) needs_pty: bool,
    /// Notes to store; `None` keeps the stored ones.
    pub(crate) notes: Option<String>,
    /// Time of the record.
    pub(crate) at_ns: i64,
}

/// A message to the writer thread.
pub(super) enum Msg {
    Chunk {
        chunk: Chunk,
        _permit: OwnedSemaphorePermit,
    },
    CreateProc {
        row: NewProc,
        reply: oneshot::Sender<Result<ProcId, StoreError>>,
    },
    Status(StatusUpdate),
    /// A process's end, answered once committed (or not).
    End {
        update: StatusUpdate,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    Replaced {
        old: ProcId,
        by: ProcId,
    },
    Transition(Transition),
    Resize(Resize),
    Clear {
        id: ProcId,
        starts: [u64; 3],
    },
    Delete {
        id: ProcId,
    },
    Program {
        rec: ProgramRecord,
        reply: oneshot::Sender<Result<ProgramRow, StoreError>>,
    },
    Flush {
        reply: oneshot::Sender<()>,
    },
    /// Commit what is queued and stop.
    Close,
}

impl Msg {
    /// Someone waits for this message's commit (a reply or a barrier).
    pub(super) fn awaited(&self) -> bool {
        matches!(
            self,
            Self::CreateProc { .. }
                | Self::Program { .. }
                | Self::End { .. }
                | Self::Flush { .. }
                | Self::Close
        )
    }

    /// What the message counts against the store's byte budget.
    pub(super) fn bytes(&self) -> usize {
        match self {
            Self::Chunk { chunk, .. } => chunk.data.len(),
            _ => 64,
        }
    }
}

/// What the writer thread shares with the rest of the daemon: the live
/// processes whose history starts it moves when it trims, and the log's
/// health.
#[derive(Debug, Default)]
pub(super) struct WriterShared {
    pub(super) tracked: Mutex<HashMap<ProcId, Weak<dyn HistoryStarts>>>,
    pub(super) retained: AtomicU64,
    pub(super) trimmed: AtomicU64,
    pub(super) dropped: AtomicU64,
    pub(super) error: Mutex<Option<String>>,
    /// The database file was deleted or replaced under the daemon: shown
    /// until a restart (commits still succeed, into the old file).
    pub(super) replaced: Mutex<Option<String>>,
    /// What each commit changed, for the search indexer.
    pub(super) feed: Arc<LogFeed>,
}

impl WriterShared {
    pub(super) fn tracked(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<ProcId, Weak<dyn HistoryStarts>>> {
        self.tracked.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn error(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.error.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn publish_starts(&self, id: ProcId, starts: [u64; 3]) {
        if let Some(live) = self.tracked().get(&id).and_then(Weak::upgrade) {
            live.history_starts_at(starts);
        }
    }

    pub(super) fn untrack(&self, id: ProcId) {
        self.tracked().remove(&id);
    }

    pub(super) fn failed(&self, e: &StoreError, lost: u64) {
        self.dropped.fetch_add(lost, Ordering::Relaxed);
        *self.error() = Some(e.to_string());
    }

    pub(super) fn succeeded(&self) {
        let mut error = self.error();
        if error.is_some() {
            tracing::info!("the database accepts writes again");
            *error = None;
        }
    }
}

/// What the live side of a process learns from the store: trims (retention,
/// room on a full disk) move where each stream's history begins.
pub(crate) trait HistoryStarts: Send + Sync {
    /// The history of each stream (stdin, stdout, stderr) now begins at or
    /// after `starts`; a start never moves back.
    fn history_starts_at(&self, starts: [u64; 3]);
}
