//! The writer thread: batches of chunks and control records committed in
//! one transaction each, lingering while output streams; retention and
//! garbage collection between commits; and everything a full disk or
//! database needs (making room, keeping the newest output, the reserve, a
//! file that may not grow).

use std::os::unix::fs::MetadataExt as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rusqlite::{Connection, Transaction, params};
use tokio::sync::mpsc;

use super::checkpoint::Checkpointer;
use super::error::StoreError;
use super::gc::Garbage;
use super::msg::{Msg, ProgramRecord, ProgramRow, WriterShared};
use super::queries::load_program;
use super::reserve;
use super::retention::{Usage, set_starts};
use super::schema::to_i64;
use crate::config::DISK_RESERVE_BYTES;
use crate::config::{MAX_RECORD_BYTES, STORE_BATCH_BYTES};
use crate::domain::{Chunk, ProcId, StreamId};
use bytes::Bytes;
use tokio::sync::OwnedSemaphorePermit;

/// Page cache of the writer connection: twice the largest batch.
pub(super) const WRITER_CACHE_KIB: i64 = 8 << 10;

/// Page size of a new database. Output chunks are up to 64 KiB: in 4 KiB
/// pages each becomes a chain of 16 overflow pages, each its own WAL frame
/// and write, and SQLite tops out near 350 MB/s here; in 64 KiB pages (the
/// largest) it writes about 1.4 GB/s. Small rows pack into the same pages.
/// An existing database keeps the page size it was created with.
pub(super) const PAGE_SIZE: i64 = 64 << 10;

/// Under load, deleting forgotten rows gets one part of the writer's time
/// for this many parts of committing.
const GC_SHARE: u32 = 8;

/// What is kept of the newest output when not even its last chunk fits on
/// a full disk: a screenful of its end, small enough to sit in a B-tree
/// leaf (no overflow pages), which the WAL may still have room for.
pub(super) const NEWEST_KEPT_BYTES: usize = 4 << 10;

/// A commit this soon after the previous one means output is streaming.
const BUSY_WINDOW: std::time::Duration = std::time::Duration::from_millis(1);

/// Longest a busy writer waits for more chunks before committing. Each
/// commit rewrites the B-tree pages it touches (64 KiB each), so committing
/// every 4 KiB PTY read would write many times the data itself; 2 ms
/// gathers a hundred kilobytes at PTY speed. Nothing waits on such a batch
/// (a flush barrier or a reply ends the pause), so no caller sees it.
const LINGER: std::time::Duration = std::time::Duration::from_millis(2);

/// A lingering batch commits once it holds this much.
const LINGER_BYTES: usize = 512 << 10;

/// How often a lingering writer looks for more.
const LINGER_POLL: std::time::Duration = std::time::Duration::from_micros(200);

/// What one step of deleting forgotten history adds to the WAL, roughly
/// (freelist and index pages): enough that a large cleanup is folded in and
/// the WAL emptied at the next idle moment.
const GC_STEP_WAL_BYTES: u64 = 1 << 20;

/// What the writer thread owns besides its connection.
pub(super) struct Writer {
    pub(super) conn: Connection,
    pub(super) usage: Usage,
    pub(super) garbage: Garbage,
    pub(super) shared: Arc<WriterShared>,
    pub(super) checkpoint: Checkpointer,
    pub(super) page_size: u64,
    /// Room set aside for a full disk.
    pub(super) reserve: reserve::Reserve,
    /// The disk is nearly full: WAL kept small, freed pages kept.
    pub(super) low_space: bool,
    /// The database's own size limit in pages (`--max-db-size`), if any.
    pub(super) max_pages: Option<i64>,
    /// The database's directory.
    pub(super) dir: Option<std::path::PathBuf>,
    /// The database file, and its device and inode when opened.
    pub(super) db_path: std::path::PathBuf,
    pub(super) db_id: Option<(u64, u64)>,
    /// Where this commit's chunks end, per stream, for the feed.
    pub(super) grown: std::collections::BTreeMap<(ProcId, crate::domain::StreamId), u64>,
}

/// SQLite's own largest `max_page_count`: no limit but the disk.
const SQLITE_MAX_PAGES: i64 = 0xFFFF_FFFE;

/// Free disk space below which the writer keeps the log's files tight: the
/// reserve, a few WAL folds and margin.
const LOW_SPACE_BYTES: u64 = DISK_RESERVE_BYTES + 4 * TIGHT_WAL_BYTES;

/// Room a writer on a nearly full disk keeps for what comes next (free
/// pages in the file and free disk together), trimming the oldest history
/// when there is less: a few WAL folds' worth, so a checkpoint always has
/// room to copy the WAL and a delete room to commit.
const HEADROOM_BYTES: u64 = 4 * TIGHT_WAL_BYTES;

/// Free space below which a failure to open the database is taken for a
/// full disk.
pub(super) const NEARLY_FULL_BYTES: u64 = 1 << 20;

/// WAL size at which a writer on a nearly full disk folds it in.
const TIGHT_WAL_BYTES: u64 = 4 << 20;

pub(super) fn run(mut w: Writer, mut rx: mpsc::Receiver<Msg>) {
    let mut batch = Vec::new();
    let mut closing = false;
    let mut last_commit = std::time::Instant::now();
    let mut gc_allowance = std::time::Duration::ZERO;
    while let Some(first) = rx.blocking_recv() {
        let mut bytes = first.bytes();
        closing |= matches!(first, Msg::Close);
        let mut awaited = first.awaited();
        batch.push(first);
        // Output is streaming in when the last commit was just now: then,
        // while nobody waits on the batch, let more arrive so one commit
        // carries many chunks instead of a few.
        let linger_until =
            (last_commit.elapsed() < BUSY_WINDOW).then(|| std::time::Instant::now() + LINGER);
        while bytes < STORE_BATCH_BYTES && !closing {
            match rx.try_recv() {
                Ok(m) => {
                    bytes += m.bytes();
                    closing |= matches!(m, Msg::Close);
                    awaited |= m.awaited();
                    batch.push(m);
                }
                Err(_)
                    if bytes < LINGER_BYTES
                        && !awaited
                        && linger_until.is_some_and(|t| std::time::Instant::now() < t) =>
                {
                    #[allow(
                        clippy::disallowed_methods,
                        reason = "a bounded pause of the writer thread, not of async code"
                    )]
                    std::thread::sleep(LINGER_POLL);
                }
                Err(_) => break,
            }
        }
        merge_chunks(&mut batch);
        let started = std::time::Instant::now();
        w.commit_batch(&mut batch);
        last_commit = std::time::Instant::now();
        // History forgotten by cleanup, clear or retention: while output
        // streams in, steps take at most a ninth of the writer's time (an
        // eighth of what commits took); when nothing is queued, as many
        // steps as fit.
        gc_allowance += (last_commit - started) / GC_SHARE;
        while !w.garbage.is_empty() && (rx.is_empty() || !gc_allowance.is_zero()) {
            let step = std::time::Instant::now();
            w.collect_garbage();
            gc_allowance = gc_allowance.saturating_sub(step.elapsed());
        }
        if w.garbage.is_empty() {
            gc_allowance = std::time::Duration::ZERO;
            // Freed pages go back to the filesystem, a step at a time, only
            // while nothing is queued.
        }
        if rx.is_empty() {
            w.checkpoint.idle();
        }
        if closing {
            break;
        }
    }
    // Fold the WAL back into the database so the file is self-contained.
    w.checkpoint.stop();
    if let Err(e) = w.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
        tracing::debug!(error = %e, "final checkpoint failed");
    }
    w.reserve.restore_now();
    w.shared.feed.close();
    tracing::debug!("store writer finished");
}

/// Merges runs of chunks that continue each other (same process and
/// stream, contiguous offsets) into rows of up to [`MAX_RECORD_BYTES`]:
/// fewer rows to insert, index and read back. A merged row keeps the first
/// piece's timestamps (the time of its first byte).
pub(super) fn merge_chunks(batch: &mut Vec<Msg>) {
    let mut out = Vec::with_capacity(batch.len());
    let mut run: Option<Run> = None;
    for msg in batch.drain(..) {
        match msg {
            Msg::Chunk { chunk, _permit } => {
                if let Some(r) = &mut run
                    && r.continues(&chunk)
                {
                    r.push(chunk, _permit);
                    continue;
                }
                out.extend(run.take().map(Run::finish));
                run = Some(Run { first: chunk, permit: _permit, rest: Vec::new(), len: 0 });
            }
            other => {
                out.extend(run.take().map(Run::finish));
                out.push(other);
            }
        }
    }
    out.extend(run.take().map(Run::finish));
    *batch = out;
}

/// Longest time one merged row may span: time-window reads ("the last
/// 500 ms") find rows by their first byte's time, so this is their
/// precision.
const MERGE_WINDOW_NS: i64 = 10_000_000;

/// Chunks being merged into one row.
struct Run {
    first: Chunk,
    permit: OwnedSemaphorePermit,
    rest: Vec<Bytes>,
    /// Total bytes, `first` included, once `rest` is not empty.
    len: usize,
}

impl Run {
    fn total(&self) -> usize {
        if self.rest.is_empty() { self.first.data.len() } else { self.len }
    }

    fn continues(&self, next: &Chunk) -> bool {
        next.proc == self.first.proc
            && next.stream == self.first.stream
            // Input typed by two clients stays two rows, each with its own.
            && next.origin == self.first.origin
            && next.mono_ns - self.first.mono_ns <= MERGE_WINDOW_NS
            && next.offset == self.first.offset + self.total() as u64
            && self.total() + next.data.len() <= MAX_RECORD_BYTES
    }

    fn push(&mut self, next: Chunk, permit: OwnedSemaphorePermit) {
        self.len = self.total() + next.data.len();
        self.rest.push(next.data);
        self.permit.merge(permit);
    }

    fn finish(self) -> Msg {
        let Self { mut first, permit, rest, len } = self;
        if !rest.is_empty() {
            let mut data = bytes::BytesMut::with_capacity(len);
            data.extend_from_slice(&first.data);
            for piece in rest {
                data.extend_from_slice(&piece);
            }
            first.data = data.freeze();
        }
        Msg::Chunk { chunk: first, _permit: permit }
    }
}

/// What a committed message yields for its requester.
enum Outcome {
    None,
    Created(ProcId),
    Program(ProgramRow),
}

/// True when SQLite failed because the database cannot grow (disk full, or
/// the configured page ceiling reached).
pub(super) fn is_full(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::DiskFull
    )
}

impl Writer {
    /// Applies `batch` in one transaction, leaving out its first `skip`
    /// output chunks (the oldest).
    fn run(&mut self, batch: &[Msg], skip: usize) -> Result<Vec<Outcome>, StoreError> {
        // Immediate: the write lock is taken (waiting for a checkpoint that
        // holds it) before anything is read; a deferred transaction that
        // read first would fail at once, without waiting, when it writes.
        let tx = self.conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut chunks = 0;
        for msg in batch {
            let is_chunk = matches!(msg, Msg::Chunk { .. });
            chunks += usize::from(is_chunk);
            if is_chunk && chunks <= skip {
                outcomes.push(Outcome::None);
            } else {
                outcomes.push(apply(&tx, msg)?);
            }
        }
        tx.commit()?;
        Ok(outcomes)
    }

    /// Commits a batch. If the database is full, the oldest history is
    /// trimmed to make room and the batch retried; if it still does not fit,
    /// its oldest output chunks are left out, half of them at a time, so the
    /// newest output is what is kept; in the end the control records
    /// (process rows, statuses, registry) commit without any chunk. What is
    /// left out is counted and reported. Replies go out only after the
    /// outcome is final.
    fn commit_batch(&mut self, batch: &mut Vec<Msg>) {
        let sizes: Vec<u64> = batch
            .iter()
            .filter_map(|m| {
                if let Msg::Chunk { chunk, .. } = m { Some(chunk.data.len() as u64) } else { None }
            })
            .collect();
        let chunk_bytes: u64 = sizes.iter().sum();
        let mut skip = 0;
        let mut cut = 0;
        let mut result = self.run(batch, skip);
        if let Err(e) = &result
            && is_full(e)
        {
            tracing::warn!(error = %e, "the disk or database is full; making room");
            self.make_room(chunk_bytes);
            result = self.run(batch, skip);
            while matches!(&result, Err(e) if is_full(e)) && skip < sizes.len() {
                skip += (sizes.len() - skip).div_ceil(2);
                if skip == sizes.len() && cut == 0 {
                    // Not even the newest chunk fits whole: its end may.
                    cut = keep_only_the_end(batch, NEWEST_KEPT_BYTES);
                    if cut > 0 {
                        skip -= 1;
                    }
                }
                result = self.run(batch, skip);
            }
        }
        let lost: u64 =
            sizes[..skip].iter().sum::<u64>() + if skip < sizes.len() { cut } else { 0 };
        if result.is_ok() {
            // Pages of the touched B-tree leaves besides the blobs themselves.
            self.checkpoint.committed(&self.conn, chunk_bytes - lost + 4 * self.page_size);
        }
        if let Err(e) = &result {
            tracing::error!(error = %e, lost_bytes = chunk_bytes, "cannot store output; keeping the control records");
            self.shared.failed(e, chunk_bytes);
            skip = sizes.len();
            result = self.run(batch, skip);
        } else if skip > 0 && skip == sizes.len() {
            // Only the control records fit: no output is being stored.
            tracing::error!(
                lost_bytes = lost,
                "the disk or database is full: output is not stored"
            );
            let full = StoreError::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                Some("the disk or database is full".into()),
            ));
            self.shared.failed(&full, lost);
        } else {
            if lost > 0 {
                tracing::error!(
                    lost_bytes = lost,
                    "the database is full: the oldest output of a burst was not stored"
                );
                self.shared.dropped.fetch_add(lost, Ordering::Relaxed);
            }
            self.shared.succeeded();
        }
        match result {
            Ok(outcomes) => {
                let mut chunks = 0;
                for msg in batch.iter() {
                    let is_chunk = matches!(msg, Msg::Chunk { .. });
                    chunks += usize::from(is_chunk);
                    self.account(msg, !is_chunk || chunks > skip);
                }
                // Trim before answering, so a flush barrier sees the log
                // within its limits; after accounting, so a trim here sees
                // this batch's clears.
                self.enforce_retention();
                if skip < sizes.len() {
                    self.watch_space();
                    self.watch_file();
                }
                self.shared.retained.store(self.usage.total(), Ordering::Relaxed);
                // Before the answers: a flush barrier's caller may then wait
                // for the indexer to reach this generation.
                self.shared.feed.grew(&mut self.grown);
                self.shared.feed.committed();
                for (msg, outcome) in batch.drain(..).zip(outcomes) {
                    answer(msg, outcome);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "store transaction failed; its records are lost");
                for msg in batch.drain(..) {
                    let err = || StoreError::Corrupt(format!("commit failed: {e}"));
                    // Requesters may have gone away (cancelled); that is fine.
                    match msg {
                        Msg::CreateProc { reply, .. } => {
                            let _ = reply.send(Err(err()));
                        }
                        Msg::Program { reply, .. } => {
                            let _ = reply.send(Err(err()));
                        }
                        Msg::Flush { reply } => {
                            let _ = reply.send(());
                        }
                        Msg::End { reply, .. } => {
                            let _ = reply.send(Err(err()));
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    /// Updates the accounting for a committed message.
    fn account(&mut self, msg: &Msg, chunks_committed: bool) {
        match msg {
            Msg::Chunk { chunk, .. } if chunks_committed => {
                self.usage.appended(chunk);
                let end = self.grown.entry((chunk.proc, chunk.stream)).or_default();
                *end = (*end).max(chunk.end());
            }
            Msg::Clear { id, starts } => {
                self.usage.cleared(*id, *starts);
                self.garbage.add(*id, *starts);
                self.shared.feed.forgot();
            }
            Msg::Delete { id } => {
                self.shared.feed.forgot();
                self.usage.removed(*id);
                self.shared.untrack(*id);
                self.garbage.add(*id, [u64::MAX; 3]);
            }
            _ => {}
        }
    }

    /// One step of deleting forgotten rows.
    /// Makes room on a full disk or database, in the order that works when
    /// not even a delete has room: give the reserve back and fold the WAL in
    /// (small, since a low disk keeps it small); delete what was already
    /// forgotten; trim the oldest history (room for this batch and an eighth
    /// of the log, so the next batches do not each hit the wall); fold the
    /// WAL in again. The trimmed pages stay in the file for new output.
    fn make_room(&mut self, chunk_bytes: u64) {
        // From here the WAL is rewound, never emptied: the disk it holds is
        // room no other program can take.
        self.low_space = true;
        if self.reserve.release() {
            self.hold_file_size(true);
        }
        self.fold_wal();
        while !self.garbage.is_empty() {
            self.collect_garbage();
        }
        self.trim_for_room(chunk_bytes.max(1 << 20) + self.usage.total() / 8);
        self.fold_wal();
    }

    /// While the reserve is given back, the database file may not grow:
    /// the room is for the WAL, and for the reserve once the WAL is folded
    /// in, so that the next start finds one even on a full disk. New output
    /// reuses the pages trims free (and trims more when there are none).
    /// Released again when the reserve is back.
    fn hold_file_size(&mut self, hold: bool) {
        let pages = if hold {
            self.conn.pragma_query_value(None, "page_count", |r| r.get::<_, i64>(0)).ok()
        } else {
            Some(self.max_pages.unwrap_or(SQLITE_MAX_PAGES))
        };
        if let Some(pages) = pages
            && let Err(e) = self.conn.pragma_update(None, "max_page_count", pages)
        {
            tracing::warn!(error = %e, "cannot set the database's page limit");
        }
    }

    fn trim_for_room(&mut self, want: u64) {
        let cuts = self.usage.plan_room(want);
        tracing::info!(trimming = want, "trimming the oldest history for room on the disk");
        self.apply_cuts(&cuts, true);
    }

    /// Notices the database file deleted or replaced under the daemon
    /// (one `stat` per commit): from then on the log goes to a file nobody
    /// can open again, which only a restart cures; say so where
    /// `daemon status` and `GetInfo` show it.
    fn watch_file(&mut self) {
        let now = std::fs::metadata(&self.db_path).ok().map(|m| (m.dev(), m.ino()));
        if now == self.db_id {
            return;
        }
        let mut replaced =
            self.shared.replaced.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if replaced.is_none() {
            let what = if now.is_none() { "deleted" } else { "replaced" };
            let msg = format!(
                "the database {} was {what} while portald ran: what it logs now cannot be read after a restart; restart portald (portal-cli daemon stop) to start a new log",
                self.db_path.display()
            );
            tracing::error!("{msg}");
            *replaced = Some(msg);
        }
    }

    /// After every commit (one `statvfs`, a microsecond): on a disk running
    /// out of room, keep the WAL small
    /// (checkpoints need room to copy it, which a full disk does not have),
    /// and once the file has no free pages left for new output, trim the
    /// oldest history before the disk fills; give the reserve back to the
    /// filesystem's use only in an emergency. Leaves that mode when the disk
    /// has room again (and makes the reserve anew).
    fn watch_space(&mut self) {
        let Some(free) = self.dir.as_deref().and_then(crate::sys::free_bytes) else { return };
        let low = free < LOW_SPACE_BYTES;
        if low && !self.low_space {
            tracing::warn!(free, "the disk is running out of room: keeping the log's files tight");
        }
        if !low && self.low_space {
            self.reserve.restore();
            if self.reserve.held() {
                tracing::info!(free, "the disk has room again");
                self.low_space = false;
                self.hold_file_size(false);
            }
            return;
        }
        self.low_space |= low;
        if !self.low_space {
            return;
        }
        if self.checkpoint.wal_bytes(&self.conn) > TIGHT_WAL_BYTES {
            self.fold_wal();
        }
        // Room for what comes next: free pages in the file (new output and
        // checkpoints reuse them) plus free disk (the WAL grows into it).
        let free_pages: i64 =
            self.conn.pragma_query_value(None, "freelist_count", |r| r.get(0)).unwrap_or(0);
        let room = free + u64::try_from(free_pages).unwrap_or(0) * self.page_size;
        // Trim only when the log can make the room, and at most half of it
        // at once: when other files fill the disk, deleting the whole log at
        // every commit would only lose what was just written.
        let short = HEADROOM_BYTES.saturating_sub(room);
        if short > 0 && self.usage.total() > short {
            self.trim_for_room((short + self.usage.total() / 8).min(self.usage.total() / 2));
            self.fold_wal();
        }
    }

    /// Copies the WAL into the database and rewinds it; on a nearly full
    /// disk the file keeps its room (see `checkpoint.rs`).
    fn fold_wal(&self) {
        self.checkpoint.fold(&self.conn, self.low_space);
    }

    fn collect_garbage(&mut self) {
        if self.garbage.is_empty() {
            return;
        }
        if let Err(e) = self.garbage.step(&mut self.conn) {
            // The rows are invisible already; the next open finds them again.
            tracing::warn!(error = %e, "deleting forgotten history failed; will retry at the next start");
            self.garbage = Garbage::default();
        }
        self.checkpoint.housekeeping(GC_STEP_WAL_BYTES);
    }

    /// Trims what is over the retention limits.
    fn enforce_retention(&mut self) {
        let cuts = self.usage.plan();
        if !cuts.is_empty() {
            self.apply_cuts(&cuts, false);
        }
    }

    /// Applies cuts in one transaction, then publishes the new starts. The
    /// rows go `now` (to make room on a full disk) or to the garbage
    /// collector. Returns whether anything was trimmed.
    fn apply_cuts(&mut self, cuts: &[(ProcId, u64)], now: bool) -> bool {
        let before = self.usage.total();
        let result = (|| -> Result<Vec<(ProcId, [u64; 3])>, StoreError> {
            let tx = self.conn.transaction()?;
            let mut starts = Vec::with_capacity(cuts.len());
            for cut in cuts {
                let s = self.usage.trim(&tx, *cut)?;
                if now {
                    delete_below(&tx, cut.0, s)?;
                }
                starts.push((cut.0, s));
            }
            tx.commit()?;
            Ok(starts)
        })();
        match result {
            Ok(starts) => {
                self.shared.feed.forgot();
                for (id, s) in starts {
                    self.usage.cleared(id, s);
                    self.shared.publish_starts(id, s);
                    if !now {
                        self.garbage.add(id, s);
                    }
                }
                let trimmed = before.saturating_sub(self.usage.total());
                self.shared.trimmed.fetch_add(trimmed, Ordering::Relaxed);
                self.shared.retained.store(self.usage.total(), Ordering::Relaxed);
                tracing::debug!(
                    trimmed,
                    retained = self.usage.total(),
                    "trimmed the oldest history"
                );
                trimmed > 0
            }
            Err(e) => {
                tracing::error!(error = %e, "trimming the log failed");
                false
            }
        }
    }
}

/// Answers the requester of a committed message.
fn answer(msg: Msg, outcome: Outcome) {
    // Requesters may have gone away (cancelled); that is fine.
    match (msg, outcome) {
        (Msg::CreateProc { reply, .. }, Outcome::Created(id)) => {
            let _ = reply.send(Ok(id));
        }
        (Msg::Program { reply, .. }, Outcome::Program(row)) => {
            let _ = reply.send(Ok(row));
        }
        (Msg::Flush { reply }, _) => {
            let _ = reply.send(());
        }
        (Msg::End { reply, .. }, _) => {
            let _ = reply.send(Ok(()));
        }
        _ => {}
    }
}

/// Deletes history before `starts` (per stream) and records the new starts.
fn delete_below(tx: &Transaction<'_>, id: ProcId, starts: [u64; 3]) -> Result<(), StoreError> {
    let mut delete =
        tx.prepare_cached("DELETE FROM chunks WHERE proc_id = ?1 AND stream = ?2 AND off < ?3")?;
    for s in StreamId::ALL {
        delete.execute(params![to_i64(id.0), s as i64, to_i64(starts[s.index()])])?;
    }
    Ok(())
}

/// Cuts the batch's newest chunk down to its last `keep` bytes (a page or
/// so of the WAL, which a full disk may still have when a whole chunk does
/// not fit); returns how many bytes were cut off, 0 if it was no longer.
fn keep_only_the_end(batch: &mut [Msg], keep: usize) -> u64 {
    let newest = batch.iter_mut().rev().find_map(|m| match m {
        Msg::Chunk { chunk, .. } => Some(chunk),
        _ => None,
    });
    let Some(chunk) = newest else { return 0 };
    let Some(cut) = chunk.data.len().checked_sub(keep).filter(|c| *c > 0) else { return 0 };
    chunk.data = chunk.data.slice(cut..);
    chunk.offset += cut as u64;
    cut as u64
}

fn apply(tx: &Transaction<'_>, msg: &Msg) -> Result<Outcome, StoreError> {
    match msg {
        Msg::Chunk { chunk, .. } => {
            let mut stmt = tx.prepare_cached(
                "INSERT INTO chunks (proc_id, stream, off, ts_ns, mono_ns, data, origin) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            stmt.execute(params![
                to_i64(chunk.proc.0),
                chunk.stream as i64,
                to_i64(chunk.offset),
                chunk.ts_ns,
                chunk.mono_ns,
                &chunk.data[..],
                chunk.origin.as_deref()
            ])?;
        }
        Msg::CreateProc { row, .. } => {
            let args = serde_json::to_string(&row.args).unwrap_or_else(|_| "[]".into());
            tx.execute(
                "INSERT INTO processes (name, command, args, cwd, env, mode, rows, cols, timeout_ms, status, started_at_ns, supervision)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'running', ?10, ?11)",
                params![
                    row.name,
                    row.command,
                    args,
                    row.cwd,
                    row.env_json,
                    row.mode,
                    row.size.map(|s| s.0),
                    row.size.map(|s| s.1),
                    to_i64(row.timeout_ms),
                    row.started_at_ns,
                    row.supervision
                ],
            )?;
            let id = u64::try_from(tx.last_insert_rowid()).unwrap_or(0);
            return Ok(Outcome::Created(ProcId(id)));
        }
        Msg::Status(u) | Msg::End { update: u, .. } => {
            tx.execute(
                "UPDATE processes SET pid = ?2, status = ?3, exit_code = ?4, exit_signal = ?5, ended_at_ns = ?6 WHERE id = ?1",
                params![to_i64(u.id.0), u.pid, u.status.as_str(), u.exit_code, u.exit_signal, u.ended_at_ns],
            )?;
        }
        Msg::Replaced { old, by } => {
            tx.execute(
                "UPDATE processes SET replaced_by = ?2 WHERE id = ?1",
                params![to_i64(old.0), to_i64(by.0)],
            )?;
        }
        Msg::Clear { id, starts } => set_starts(tx, *id, *starts)?,
        Msg::Delete { id } => {
            // Its rows go to the garbage collector once this commits.
            tx.execute("DELETE FROM processes WHERE id = ?1", params![to_i64(id.0)])?;
            tx.execute("DELETE FROM resizes WHERE proc_id = ?1", params![to_i64(id.0)])?;
        }
        Msg::Resize(r) => {
            tx.prepare_cached(
                "INSERT INTO resizes (proc_id, at_ns, from_rows, from_cols, to_rows, to_cols) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                to_i64(r.id.0),
                r.at_ns,
                r.from.rows,
                r.from.cols,
                r.to.rows,
                r.to.cols
            ])?;
        }
        Msg::Program { rec, .. } => return Ok(Outcome::Program(record_program(tx, rec.clone())?)),
        Msg::Flush { .. } | Msg::Close => {}
        Msg::Transition(t) => {
            tx.prepare_cached(
                "INSERT OR REPLACE INTO agent_events (seq, proc_id, at_ns, before, after, source, name, reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?
            .execute(params![
                to_i64(t.seq),
                to_i64(t.id.0),
                t.at_ns,
                t.before.as_str(),
                t.after.as_str(),
                t.source.as_str(),
                t.name,
                t.reason
            ])?;
        }
    }
    Ok(Outcome::None)
}

/// The registry's rules: a new entry counts 1; the same conclusion again
/// counts +1; a flip of `needs_pty` resets the count to 1 (a correction is not
/// a confirmation). Notes are replaced whenever given (even empty) and kept
/// otherwise, including across a flip.
fn record_program(
    tx: &rusqlite::Transaction<'_>,
    rec: ProgramRecord,
) -> Result<ProgramRow, StoreError> {
    let existing = load_program(tx, &rec.program)?;
    let (count, notes) = match existing {
        None => (1, rec.notes.unwrap_or_default()),
        Some(old) => {
            let count = if old.needs_pty == rec.needs_pty {
                old.confirmed_count.saturating_add(1)
            } else {
                1
            };
            (count, rec.notes.unwrap_or(old.notes))
        }
    };
    tx.execute(
        "INSERT INTO programs (program, needs_pty, notes, confirmed_count, last_confirmed_at_ns)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (program) DO UPDATE SET needs_pty = ?2, notes = ?3, confirmed_count = ?4, last_confirmed_at_ns = ?5",
        params![rec.program, rec.needs_pty, notes, count, rec.at_ns],
    )?;
    Ok(ProgramRow {
        program: rec.program,
        needs_pty: rec.needs_pty,
        notes,
        confirmed_count: count,
        last_confirmed_at_ns: rec.at_ns,
    })
}
