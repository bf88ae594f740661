//! Disk bounds of the I/O log: what each process retains, and trimming.
//!
//! The writer thread owns a [`Usage`]: per process and stream, the span of
//! offsets whose bytes are retained (`start..end`). It is loaded from the
//! database at open (an indexed lookup per process, no scan of the log) and
//! kept current as chunks, clears and deletes commit, so checking the limits
//! after a commit costs a few additions.
//!
//! Two limits ([`Retention`]): bytes per process and bytes in total. Over
//! either, the oldest bytes go first: within a process, every stream is cut
//! from its start in proportion to its size; over the total, the oldest
//! processes (lowest ids) are cut first. A trim goes below the limit by an
//! eighth of it, so trimming runs once per eighth of the limit written rather
//! than after every commit. Cuts fall on chunk boundaries; the new start of
//! each stream is recorded in `processes` (as a clear does) and published to
//! the live handles, so reads report exactly where history begins.
//!
//! The same cut serves a full disk: when a commit fails because the database
//! cannot grow, the writer trims the oldest history to make room and retries
//! (see `commit_batch` in `writer.rs`).

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::{OptionalExtension, Transaction, params};

use super::error::StoreError;
use super::queries::StoredProc;
use super::schema::to_i64;
use crate::config::Retention;
use crate::domain::{Chunk, ProcId, StreamId};

/// Retained offsets of one stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span {
    start: u64,
    end: u64,
    /// Bytes inside `start..end` that were never stored (a full disk).
    holes: u64,
    /// Every hole lies below this offset: once `start` passes it, they are
    /// all trimmed away.
    holes_end: u64,
}

impl Span {
    /// Bytes actually stored. A hole partly trimmed away still counts whole
    /// (its position inside the range is not kept): the figure errs low,
    /// never high.
    fn len(self) -> u64 {
        let range = self.end.saturating_sub(self.start);
        if self.start >= self.holes_end { range } else { range.saturating_sub(self.holes) }
    }
}

/// Bytes retained per process and in total, and the limits.
#[derive(Debug)]
pub(crate) struct Usage {
    procs: BTreeMap<ProcId, [Span; 3]>,
    total: u64,
    limits: Retention,
    /// Processes appended to since the last check of the per-process limit.
    dirty: BTreeSet<ProcId>,
}

/// A cut: how many of its oldest bytes a process loses.
type Cut = (ProcId, u64);

impl Usage {
    /// The retained spans of the processes stored at open.
    pub(crate) fn new(procs: &[StoredProc], limits: Retention) -> Self {
        let mut usage = Self { procs: BTreeMap::new(), total: 0, limits, dirty: BTreeSet::new() };
        for p in procs {
            let spans =
                [0, 1, 2].map(|i| Span { start: p.starts[i], end: p.ends[i], ..Span::default() });
            usage.total += spans.iter().map(|s| s.len()).sum::<u64>();
            usage.procs.insert(p.id, spans);
            usage.dirty.insert(p.id);
        }
        usage
    }

    /// Bytes retained in total.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// A chunk was committed.
    pub(crate) fn appended(&mut self, chunk: &Chunk) {
        let spans = self.procs.entry(chunk.proc).or_default();
        let span = &mut spans[chunk.stream.index()];
        let before = span.len();
        if chunk.offset > span.end {
            // Output between the stored end and this chunk was lost.
            span.holes += chunk.offset - span.end;
            span.holes_end = chunk.offset;
        }
        span.end = span.end.max(chunk.end());
        self.total = (self.total + span.len()).saturating_sub(before);
        self.dirty.insert(chunk.proc);
    }

    /// History before `starts` was deleted.
    pub(crate) fn cleared(&mut self, id: ProcId, starts: [u64; 3]) {
        let Some(spans) = self.procs.get_mut(&id) else { return };
        for (span, start) in spans.iter_mut().zip(starts) {
            let before = span.len();
            span.start = span.start.max(start);
            span.end = span.end.max(span.start);
            if span.start >= span.holes_end {
                span.holes = 0;
            }
            self.total = (self.total + span.len()).saturating_sub(before);
        }
    }

    /// A process and its history were deleted.
    pub(crate) fn removed(&mut self, id: ProcId) {
        if let Some(spans) = self.procs.remove(&id) {
            self.total = self.total.saturating_sub(spans.iter().map(|s| s.len()).sum::<u64>());
        }
        self.dirty.remove(&id);
    }

    fn retained(&self, id: ProcId) -> u64 {
        self.procs.get(&id).map_or(0, |s| s.iter().map(|s| s.len()).sum())
    }

    /// The cuts that bring every process and the total back under the
    /// limits (empty when within them). Clears the dirty set.
    pub(crate) fn plan(&mut self) -> Vec<Cut> {
        let mut cuts = BTreeMap::new();
        let per = self.limits.per_process;
        for id in std::mem::take(&mut self.dirty) {
            let have = self.retained(id);
            if have > per {
                cuts.insert(id, have - (per - per / 8));
            }
        }
        let total = self.total.saturating_sub(cuts.values().sum::<u64>());
        if total > self.limits.total {
            let want = total - (self.limits.total - self.limits.total / 8);
            self.oldest_first(want, &mut cuts);
        }
        cuts.into_iter().collect()
    }

    /// Cuts of at least `want` bytes from the oldest history, for a full disk.
    pub(crate) fn plan_room(&self, want: u64) -> Vec<Cut> {
        let mut cuts = BTreeMap::new();
        self.oldest_first(want, &mut cuts);
        cuts.into_iter().collect()
    }

    /// Adds cuts of `want` more bytes, oldest processes first, to `cuts`.
    fn oldest_first(&self, mut want: u64, cuts: &mut BTreeMap<ProcId, u64>) {
        for (id, spans) in &self.procs {
            if want == 0 {
                break;
            }
            let taken = cuts.get(id).copied().unwrap_or(0);
            let have = spans.iter().map(|s| s.len()).sum::<u64>().saturating_sub(taken);
            let cut = have.min(want);
            if cut > 0 {
                cuts.insert(*id, taken + cut);
                want -= cut;
            }
        }
    }

    /// Applies one cut in `tx`; returns the new starts of the process.
    /// [`Usage::cleared`] must follow once the transaction commits.
    pub(crate) fn trim(
        &self,
        tx: &Transaction<'_>,
        (id, cut): Cut,
    ) -> Result<[u64; 3], StoreError> {
        let Some(spans) = self.procs.get(&id) else { return Ok([0; 3]) };
        let have: u64 = spans.iter().map(|s| s.len()).sum();
        let mut starts = spans.map(|s| s.start);
        if have == 0 {
            return Ok(starts);
        }
        let mut next_chunk = tx.prepare_cached(
            "SELECT off FROM chunks WHERE proc_id = ?1 AND stream = ?2 AND off >= ?3 ORDER BY off LIMIT 1",
        )?;
        for s in StreamId::ALL {
            let span = spans[s.index()];
            if span.len() == 0 {
                continue;
            }
            // This stream's share of the cut, rounded up so the sum is not short.
            let share = u64::try_from(
                (u128::from(cut.min(have)) * u128::from(span.len())).div_ceil(u128::from(have)),
            )
            .unwrap_or(u64::MAX);
            if share == 0 {
                continue;
            }
            let target = span.start.saturating_add(share);
            // A chunk straddling the target goes too: starts stay on chunk
            // boundaries so every retained row is whole.
            let next: Option<i64> = next_chunk
                .query_row(params![to_i64(id.0), s as i64, to_i64(target)], |r| r.get(0))
                .optional()?;
            starts[s.index()] =
                next.and_then(|o| u64::try_from(o).ok()).unwrap_or(span.end).min(span.end);
        }
        set_starts(tx, id, starts)?;
        Ok(starts)
    }
}

/// Records where history begins (the rows below are deleted by the
/// garbage collector, or at once by the writer's `delete_below`).
pub(super) fn set_starts(
    tx: &Transaction<'_>,
    id: ProcId,
    starts: [u64; 3],
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "UPDATE processes SET start_stdin = ?2, start_stdout = ?3, start_stderr = ?4 WHERE id = ?1",
    )?
    .execute(params![
        to_i64(id.0),
        to_i64(starts[0]),
        to_i64(starts[1]),
        to_i64(starts[2])
    ])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(per_process: u64, total: u64) -> Usage {
        Usage {
            procs: BTreeMap::new(),
            total: 0,
            limits: Retention { per_process, total, max_db_bytes: None },
            dirty: BTreeSet::new(),
        }
    }

    fn chunk(proc: u64, stream: StreamId, offset: u64, len: usize) -> Chunk {
        Chunk {
            proc: ProcId(proc),
            stream,
            offset,
            ts_ns: 0,
            mono_ns: 0,
            data: bytes::Bytes::from(vec![b'x'; len]),
            origin: None,
        }
    }

    #[test]
    fn within_limits_plans_nothing() {
        let mut u = usage(100, 1000);
        u.appended(&chunk(1, StreamId::Stdout, 0, 100));
        assert!(u.plan().is_empty());
        assert_eq!(u.total(), 100);
    }

    #[test]
    fn per_process_cut_goes_below_the_limit_by_an_eighth() {
        let mut u = usage(80, 1000);
        u.appended(&chunk(1, StreamId::Stdout, 0, 90));
        // 90 retained, target 70: cut 20.
        assert_eq!(u.plan(), vec![(ProcId(1), 20)]);
        // Not dirty any more: no plan until more is appended.
        assert!(u.plan().is_empty());
    }

    #[test]
    fn total_cuts_oldest_processes_first() {
        let mut u = usage(u64::MAX, 160);
        u.appended(&chunk(1, StreamId::Stdout, 0, 50));
        u.appended(&chunk(2, StreamId::Stdout, 0, 50));
        u.appended(&chunk(3, StreamId::Stdout, 0, 70));
        // 170 retained, target 140: 30 from process 1 only.
        assert_eq!(u.plan(), vec![(ProcId(1), 30)]);
        assert_eq!(u.plan_room(60), vec![(ProcId(1), 50), (ProcId(2), 10)]);
    }

    #[test]
    fn output_that_was_never_stored_is_not_counted_as_kept() {
        let mut u = usage(u64::MAX, u64::MAX);
        u.appended(&chunk(1, StreamId::Stdout, 0, 100));
        // 900 bytes could not be stored (a full disk); the next 100 could.
        u.appended(&chunk(1, StreamId::Stdout, 1000, 100));
        assert_eq!(u.total(), 200, "the hole counted as kept");
        // Trimming past the hole forgets it; the rest counts exactly.
        u.cleared(ProcId(1), [0, 1050, 0]);
        assert_eq!(u.total(), 50);
    }

    #[test]
    fn clears_and_removals_keep_the_total() {
        let mut u = usage(u64::MAX, u64::MAX);
        u.appended(&chunk(1, StreamId::Stdout, 0, 50));
        u.appended(&chunk(1, StreamId::Stdin, 0, 10));
        u.appended(&chunk(2, StreamId::Stdout, 0, 30));
        u.cleared(ProcId(1), [5, 20, 0]);
        assert_eq!(u.total(), 5 + 30 + 30);
        u.removed(ProcId(2));
        assert_eq!(u.total(), 35);
        // A clear past the end moves the end too (no negative spans).
        u.cleared(ProcId(1), [99, 99, 99]);
        assert_eq!(u.total(), 0);
    }
}
