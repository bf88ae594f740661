//! What the writer tells an observer of the log after each commit: which
//! streams grew (and to where) and whether history was forgotten. The
//! search indexer follows the log through it, off the capture path: the
//! writer only records a few numbers under a lock nobody holds for long.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::domain::{ProcId, StreamId};

/// Changes since the observer last took them.
#[derive(Debug, Default)]
pub(crate) struct Changes {
    /// Streams that grew, with their committed end.
    pub(crate) grown: BTreeMap<(ProcId, StreamId), u64>,
    /// A clear, a cleanup or a trim moved where some history begins.
    pub(crate) forgot: bool,
    /// The commit generation these changes bring the observer up to.
    pub(crate) generation: u64,
    /// The writer has stopped: nothing more will come.
    pub(crate) closed: bool,
}

#[derive(Debug, Default)]
struct State {
    pending: Changes,
    /// Something was noted since the last commit.
    dirty: bool,
}

/// The writer's side and the observer's side of the changes.
#[derive(Debug, Default)]
pub(crate) struct LogFeed {
    state: Mutex<State>,
    changed: Condvar,
}

impl LogFeed {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Committed chunks end at these offsets in their streams (the
    /// writer gathers a commit's and hands them over at once: one lock per
    /// commit, not per chunk).
    pub(super) fn grew(&self, ends: &mut BTreeMap<(ProcId, StreamId), u64>) {
        if ends.is_empty() {
            return;
        }
        let mut s = self.state();
        for (key, end) in std::mem::take(ends) {
            let e = s.pending.grown.entry(key).or_default();
            *e = (*e).max(end);
        }
        s.dirty = true;
    }

    /// History was forgotten.
    pub(super) fn forgot(&self) {
        let mut s = self.state();
        s.pending.forgot = true;
        s.dirty = true;
    }

    /// A commit that noted changes is done: a new generation.
    pub(super) fn committed(&self) {
        let mut s = self.state();
        if std::mem::take(&mut s.dirty) {
            s.pending.generation += 1;
            drop(s);
            self.changed.notify_all();
        }
    }

    /// The writer stopped.
    pub(super) fn close(&self) {
        self.state().pending.closed = true;
        self.changed.notify_all();
    }

    /// The newest commit generation (every change committed before this call
    /// belongs to it or an earlier one).
    pub(crate) fn generation(&self) -> u64 {
        self.state().pending.generation
    }

    /// Takes the changes, waiting up to `timeout` for some; `None` on a
    /// timeout with nothing new.
    pub(crate) fn take(&self, since: u64, timeout: Duration) -> Option<Changes> {
        let s = self.state();
        let (mut s, _) = self
            .changed
            .wait_timeout_while(s, timeout, |s| s.pending.generation == since && !s.pending.closed)
            .unwrap_or_else(PoisonError::into_inner);
        if s.pending.generation == since && !s.pending.closed {
            return None;
        }
        let generation = s.pending.generation;
        let closed = s.pending.closed;
        let taken = std::mem::take(&mut s.pending);
        s.pending.generation = generation;
        s.pending.closed = closed;
        Some(taken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_are_taken_once_per_generation() {
        let feed = LogFeed::default();
        assert!(feed.take(0, Duration::ZERO).is_none());
        feed.grew(&mut BTreeMap::from([((ProcId(1), StreamId::Stdout), 10)]));
        feed.grew(&mut BTreeMap::from([((ProcId(1), StreamId::Stdout), 4)]));
        assert!(feed.take(0, Duration::ZERO).is_none(), "nothing committed yet");
        feed.committed();
        let c = feed.take(0, Duration::ZERO).unwrap();
        assert_eq!((c.generation, c.grown.get(&(ProcId(1), StreamId::Stdout))), (1, Some(&10)));
        assert!(!c.forgot);
        feed.committed();
        assert_eq!(feed.generation(), 1, "a commit that noted nothing is no generation");
        feed.forgot();
        feed.committed();
        let c = feed.take(1, Duration::ZERO).unwrap();
        assert!(c.forgot && c.grown.is_empty());
        feed.close();
        assert!(feed.take(2, Duration::from_secs(5)).unwrap().closed);
    }
}
