//! The SQLite I/O log, the process table and the program registry.
//!
//! One OS thread, `store-writer`, owns the write connection. Messages reach it
//! over a channel whose *bytes* are bounded by a semaphore
//! ([`STORE_BACKLOG_BYTES`]): an actor waits for room before handing over a
//! chunk, so when the disk falls behind the programs are slowed, never the
//! log dropped. The writer blocks for the first message, takes everything
//! else already queued (up to [`STORE_BATCH_BYTES`]) and commits it in one
//! transaction: when idle a single row is committed at once (WAL with
//! `synchronous=NORMAL`: no fsync per commit), which keeps write-to-read
//! latency low; while output streams in, it lingers up to [`LINGER`] for
//! more and merges chunks that continue each other into larger rows.
//! Replies (new ids, flush barriers) are sent after the commit. After each
//! commit it enforces retention ([`retention`]) and deletes a little of the
//! history that was forgotten ([`gc`]); checkpoints run on their own thread
//! ([`checkpoint`]). The thread ends when every [`Store`] is dropped;
//! [`StoreThread::join`] waits for the last commit.
//!
//! Reads open their own connections (WAL lets them run beside the writer),
//! pooled, and run in `spawn_blocking`. A read first passes a flush barrier
//! so that it sees every chunk handed to the store before it was asked.

mod checkpoint;
mod gc;
mod reserve;
pub(crate) mod retention;
pub(crate) mod schema;

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

pub(crate) use crate::config::Retention;
use crate::config::{MAX_RECORD_BYTES, STORE_BACKLOG_BYTES, STORE_BATCH_BYTES};
use crate::domain::{AgentState, Chunk, ProcId, Source, StreamId, Transition};
use checkpoint::Checkpointer;
use gc::Garbage;
use retention::Usage;

/// Messages queued to the writer (bounded in bytes by the semaphore, in count
/// only as a backstop).
const STORE_QUEUE_MESSAGES: usize = 16 * 1024;

/// Page cache of the writer connection: twice the largest batch.
const WRITER_CACHE_KIB: i64 = 8 << 10;

/// Page size of a new database. Output chunks are up to 64 KiB: in 4 KiB
/// pages each becomes a chain of 16 overflow pages, each its own WAL frame
/// and write, and SQLite tops out near 350 MB/s here; in 64 KiB pages (the
/// largest) it writes about 1.4 GB/s. Small rows pack into the same pages.
/// An existing database keeps the page size it was created with.
const PAGE_SIZE: i64 = 64 << 10;

/// Under load, deleting forgotten rows gets one part of the writer's time
/// for this many parts of committing.
const GC_SHARE: u32 = 8;

/// What is kept of the newest output when not even its last chunk fits on
/// a full disk: a screenful of its end, small enough to sit in a B-tree
/// leaf (no overflow pages), which the WAL may still have room for.
const NEWEST_KEPT_BYTES: usize = 4 << 10;

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

/// Read connections kept open for reuse; more are opened on demand.
const READ_POOL_SIZE: usize = 8;

/// What one step of deleting forgotten history adds to the WAL, roughly
/// (freelist and index pages): enough that a large cleanup is folded in and
/// the WAL emptied at the next idle moment.
const GC_STEP_WAL_BYTES: u64 = 1 << 20;

/// What went wrong in the store.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    /// SQLite failed.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The database could not be opened.
    #[error("cannot open database {}: {reason}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A schema migration failed.
    #[error("migrating the database to schema version {version} failed: {source}")]
    Migrate {
        /// Target version.
        version: usize,
        /// Cause.
        #[source]
        source: rusqlite::Error,
    },
    /// The writer thread is gone (shutting down).
    #[error("the store is closed")]
    Closed,
    /// Stored data is not what this version wrote.
    #[error("corrupt record: {0}")]
    Corrupt(String),
}

/// A process row as created at start.
#[derive(Clone, Debug)]
pub(crate) struct NewProc {
    /// Name.
    pub(crate) name: Option<String>,
    /// Program.
    pub(crate) command: String,
    /// Arguments.
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
}

/// A status change of a process row.
#[derive(Clone, Debug)]
pub(crate) struct StatusUpdate {
    /// Which.
    pub(crate) id: ProcId,
    /// OS pid.
    pub(crate) pid: u32,
    /// Status name.
    pub(crate) status: &'static str,
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
    /// Notes.
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

enum Msg {
    Chunk {
        chunk: Chunk,
        _permit: OwnedSemaphorePermit,
    },
    CreateProc {
        row: NewProc,
        reply: oneshot::Sender<Result<ProcId, StoreError>>,
    },
    Status(StatusUpdate),
    Transition(Transition),
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
    fn awaited(&self) -> bool {
        matches!(
            self,
            Self::CreateProc { .. } | Self::Program { .. } | Self::Flush { .. } | Self::Close
        )
    }

    fn bytes(&self) -> usize {
        match self {
            Self::Chunk { chunk, .. } => chunk.data.len(),
            _ => 64,
        }
    }
}

/// A cheap, cloneable handle to the store.
#[derive(Clone, Debug)]
pub(crate) struct Store {
    tx: mpsc::Sender<Msg>,
    budget: Arc<Semaphore>,
    pool: Arc<ReadPool>,
    shared: Arc<WriterShared>,
}

/// What the writer thread shares with the rest of the daemon: the live
/// processes whose history starts it moves when it trims, and the log's
/// health.
#[derive(Debug, Default)]
struct WriterShared {
    tracked: Mutex<HashMap<ProcId, Weak<dyn HistoryStarts>>>,
    retained: AtomicU64,
    trimmed: AtomicU64,
    dropped: AtomicU64,
    error: Mutex<Option<String>>,
    /// The database file was deleted or replaced under the daemon: shown
    /// until a restart (commits still succeed, into the old file).
    replaced: Mutex<Option<String>>,
}

impl WriterShared {
    fn tracked(&self) -> std::sync::MutexGuard<'_, HashMap<ProcId, Weak<dyn HistoryStarts>>> {
        self.tracked.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn error(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.error.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn publish_starts(&self, id: ProcId, starts: [u64; 3]) {
        if let Some(live) = self.tracked().get(&id).and_then(Weak::upgrade) {
            live.history_starts_at(starts);
        }
    }

    fn untrack(&self, id: ProcId) {
        self.tracked().remove(&id);
    }

    fn failed(&self, e: &StoreError, lost: u64) {
        self.dropped.fetch_add(lost, Ordering::Relaxed);
        *self.error() = Some(e.to_string());
    }

    fn succeeded(&self) {
        let mut error = self.error();
        if error.is_some() {
            tracing::info!("the database accepts writes again");
            *error = None;
        }
    }
}

/// How the log is doing, for `GetInfo`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LogHealth {
    /// Bytes retained.
    pub(crate) retained: u64,
    /// Bytes trimmed by retention (or to make room) since the daemon started.
    pub(crate) trimmed: u64,
    /// Bytes that could not be stored since the daemon started.
    pub(crate) dropped: u64,
    /// The last storage error, while writes fail.
    pub(crate) error: Option<String>,
}

/// What the live side of a process learns from the store: trims (retention,
/// room on a full disk) move where each stream's history begins.
pub(crate) trait HistoryStarts: Send + Sync {
    /// The history of each stream (stdin, stdout, stderr) now begins at or
    /// after `starts`; a start never moves back.
    fn history_starts_at(&self, starts: [u64; 3]);
}

/// The writer thread; join it after the last [`Store`] is dropped.
#[derive(Debug)]
pub(crate) struct StoreThread(std::thread::JoinHandle<()>);

impl StoreThread {
    /// Waits until everything queued is committed.
    pub(crate) fn join(self) {
        if self.0.join().is_err() {
            tracing::error!("the store writer thread panicked; the last batch may be lost");
        }
    }
}

/// Settings a new database file needs before its first table (they take
/// effect only while the file is still empty): 64 KiB pages, see
/// ARCHITECTURE.md. No auto-vacuum: its pointer-map pages cost every small
/// commit a page more (measured: a round trip 2× slower, pipe capture a
/// quarter slower); freed pages are reused instead.
pub(crate) fn prepare_new(conn: &Connection) -> Result<(), StoreError> {
    conn.pragma_update(None, "page_size", PAGE_SIZE)?;
    Ok(())
}

impl Store {
    /// Opens (creating if needed) the database and starts the writer.
    pub(crate) fn open(
        path: &Path,
        retention: Retention,
    ) -> Result<(Self, StoreThread), StoreError> {
        // SQLite says "disk full" for a write, but "disk I/O error" when the
        // shared-memory file cannot grow: ask the filesystem too.
        let full = |e: &StoreError| {
            is_full(e)
                || path
                    .parent()
                    .and_then(crate::sys::free_bytes)
                    .is_some_and(|free| free < NEARLY_FULL_BYTES)
        };
        let disk_full = || {
            StoreError::Open {
            path: path.to_path_buf(),
            reason: "the disk holding it is full; free some space (portald needs a few MiB) and start it again".into(),
        }
        };
        match Self::open_once(path, retention) {
            // A disk so full that not even opening works (the shared memory,
            // the lost-process update): the reserve is for exactly this.
            Err(e) if full(&e) && reserve::Reserve::new_released(path) => {
                tracing::warn!("the disk is full: released the reserve to start");
                Self::open_once(path, retention).map_err(|e| if full(&e) { disk_full() } else { e })
            }
            Err(e) if full(&e) => Err(disk_full()),
            other => other,
        }
    }

    fn open_once(path: &Path, retention: Retention) -> Result<(Self, StoreThread), StoreError> {
        let open_err = |reason: String| StoreError::Open { path: path.to_path_buf(), reason };
        let mut conn = Connection::open(path).map_err(|e| open_err(e.to_string()))?;
        prepare_new(&conn)?;
        schema::migrate(&mut conn).map_err(|e| open_err(e.to_string()))?;
        let page_size: i64 = conn.pragma_query_value(None, "page_size", |r| r.get(0))?;
        // A whole batch fits in the page cache, so a commit writes each
        // page once instead of spilling half-built pages mid-transaction.
        conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)?;
        let checkpoint = Checkpointer::start(&conn, path)?;
        let max_pages = retention
            .max_db_bytes
            .map(|max| (i64::try_from(max).unwrap_or(i64::MAX) / page_size.max(1)).max(1));
        if let Some(pages) = max_pages {
            conn.pragma_update(None, "max_page_count", pages)?;
        }
        // Processes that were running when a previous daemon died have no
        // owner now; their fate is unknown.
        conn.execute("UPDATE processes SET status = 'lost' WHERE status = 'running'", [])?;
        let procs = load_procs(&conn)?;
        let usage = Usage::new(&procs, retention);
        let shared = Arc::new(WriterShared::default());
        shared.retained.store(usage.total(), Ordering::Relaxed);
        let page_size = u64::try_from(page_size).unwrap_or(4096);
        let garbage = Garbage::find(&conn, &procs)?;
        let reserve = reserve::Reserve::new(path);
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let w = Writer {
            conn,
            usage,
            garbage,
            shared: Arc::clone(&shared),
            checkpoint,
            page_size,
            reserve,
            low_space: false,
            max_pages,
            dir: path.parent().map(Path::to_path_buf),
            wal: wal.into(),
            db_path: path.to_path_buf(),
            db_id: std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino())),
        };
        let (tx, rx) = mpsc::channel(STORE_QUEUE_MESSAGES);
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer(w, rx))
            .map_err(|e| open_err(format!("cannot start the writer thread: {e}")))?;
        let store = Self {
            tx,
            budget: Arc::new(Semaphore::new(STORE_BACKLOG_BYTES)),
            pool: Arc::new(ReadPool { path: path.to_path_buf(), idle: Mutex::new(Vec::new()) }),
            shared,
        };
        Ok((store, StoreThread(thread)))
    }

    /// Tells `live` whenever a trim moves where `id`'s history begins (the
    /// store keeps only a weak reference: a process forgotten by the live
    /// side is simply not told).
    pub(crate) fn track(&self, id: ProcId, live: Weak<dyn HistoryStarts>) {
        self.shared.tracked().insert(id, live);
    }

    /// How the log is doing.
    pub(crate) fn health(&self) -> LogHealth {
        LogHealth {
            retained: self.shared.retained.load(Ordering::Relaxed),
            trimmed: self.shared.trimmed.load(Ordering::Relaxed),
            dropped: self.shared.dropped.load(Ordering::Relaxed),
            error: self
                .shared
                .replaced
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
                .or_else(|| self.shared.error().clone()),
        }
    }

    async fn send(&self, msg: Msg) -> Result<(), StoreError> {
        self.tx.send(msg).await.map_err(|_| StoreError::Closed)
    }

    /// Appends a chunk, waiting while the store's byte budget is full.
    ///
    /// # Cancel safety
    /// Dropping the future before it completes drops the chunk; the actor
    /// never drops it (it awaits to completion).
    pub(crate) async fn append(&self, chunk: Chunk) -> Result<(), StoreError> {
        let want = u32::try_from(chunk.data.len().max(1)).unwrap_or(u32::MAX);
        let permit = Arc::clone(&self.budget)
            .acquire_many_owned(want)
            .await
            .map_err(|_| StoreError::Closed)?;
        self.send(Msg::Chunk { chunk, _permit: permit }).await
    }

    /// Inserts a process row and returns its new id.
    pub(crate) async fn create_proc(&self, row: NewProc) -> Result<ProcId, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Msg::CreateProc { row, reply }).await?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Records a status change (ordered after every chunk sent before it).
    pub(crate) async fn update_status(&self, update: StatusUpdate) -> Result<(), StoreError> {
        self.send(Msg::Status(update)).await
    }

    /// Deletes history before `starts` (per stream) and records the new starts.
    pub(crate) async fn clear(&self, id: ProcId, starts: [u64; 3]) -> Result<(), StoreError> {
        self.send(Msg::Clear { id, starts }).await
    }

    /// Deletes a process and its history.
    pub(crate) async fn delete(&self, id: ProcId) -> Result<(), StoreError> {
        self.send(Msg::Delete { id }).await
    }

    /// Records a program registry conclusion.
    pub(crate) async fn record_program(
        &self,
        rec: ProgramRecord,
    ) -> Result<ProgramRow, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Msg::Program { rec, reply }).await?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Waits until everything sent before this call is committed.
    pub(crate) async fn flush(&self) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Msg::Flush { reply }).await?;
        rx.await.map_err(|_| StoreError::Closed)
    }

    /// Appends an agent transition to the history (without waiting: the
    /// queue holds thousands; if it is ever full the loss is logged).
    pub(crate) fn record_transition(&self, t: Transition) {
        if let Err(e) = self.tx.try_send(Msg::Transition(t)) {
            tracing::warn!(error = %e, "agent history not recorded: the store queue is full");
        }
    }

    /// Asks the writer to commit everything queued and stop. Later sends fail
    /// with [`StoreError::Closed`].
    pub(crate) async fn close(&self) {
        // Already closed is fine.
        let _ = self.send(Msg::Close).await;
    }

    /// Runs `f` on a pooled read connection in a blocking task.
    pub(crate) async fn read<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
    {
        let pool = Arc::clone(&self.pool);
        tokio::task::spawn_blocking(move || pool.with(f)).await.map_err(|_| StoreError::Closed)?
    }

    /// Flushes, then reads.
    #[cfg(test)]
    pub(crate) async fn read_flushed<R, F>(&self, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
    {
        self.flush().await?;
        self.read(f).await
    }
}

#[derive(Debug)]
struct ReadPool {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl ReadPool {
    fn with<R>(
        &self,
        f: impl FnOnce(&Connection) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let pooled = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let conn = match pooled {
            Some(c) => c,
            None => {
                let c = Connection::open_with_flags(
                    &self.path,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                schema::configure(&c)?;
                c
            }
        };
        let result = f(&conn);
        let mut idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle.len() < READ_POOL_SIZE {
            idle.push(conn);
        }
        result
    }
}

/// What the writer thread owns besides its connection.
struct Writer {
    conn: Connection,
    usage: Usage,
    garbage: Garbage,
    shared: Arc<WriterShared>,
    checkpoint: Checkpointer,
    page_size: u64,
    /// Room set aside for a full disk.
    reserve: reserve::Reserve,
    /// The disk is nearly full: WAL kept small, freed pages kept.
    low_space: bool,
    /// The database's own size limit in pages (`--max-db-size`), if any.
    max_pages: Option<i64>,
    /// The database's directory and WAL file.
    dir: Option<std::path::PathBuf>,
    wal: std::path::PathBuf,
    /// The database file, and its device and inode when opened.
    db_path: std::path::PathBuf,
    db_id: Option<(u64, u64)>,
}

/// SQLite's own largest `max_page_count`: no limit but the disk.
const SQLITE_MAX_PAGES: i64 = 0xFFFF_FFFE;

/// Free disk space below which the writer keeps the log's files tight: the
/// reserve, a few WAL folds and margin.
const LOW_SPACE_BYTES: u64 = reserve::RESERVE_BYTES as u64 + 4 * TIGHT_WAL_BYTES;

/// Room a writer on a nearly full disk keeps for what comes next (free
/// pages in the file and free disk together), trimming the oldest history
/// when there is less: a few WAL folds' worth, so a checkpoint always has
/// room to copy the WAL and a delete room to commit.
const HEADROOM_BYTES: u64 = 4 * TIGHT_WAL_BYTES;

/// Free space below which a failure to open the database is taken for a
/// full disk.
const NEARLY_FULL_BYTES: u64 = 1 << 20;

/// WAL size at which a writer on a nearly full disk folds it in.
const TIGHT_WAL_BYTES: u64 = 4 << 20;

fn writer(mut w: Writer, mut rx: mpsc::Receiver<Msg>) {
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
    tracing::debug!("store writer finished");
}

/// Merges runs of chunks that continue each other (same process and
/// stream, contiguous offsets) into rows of up to [`MAX_RECORD_BYTES`]:
/// fewer rows to insert, index and read back. A merged row keeps the first
/// piece's timestamps (the time of its first byte).
fn merge_chunks(batch: &mut Vec<Msg>) {
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
fn is_full(e: &StoreError) -> bool {
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
        let tx = self.conn.transaction()?;
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
                        _ => {}
                    }
                }
            }
        }
    }

    /// Updates the accounting for a committed message.
    fn account(&mut self, msg: &Msg, chunks_committed: bool) {
        match msg {
            Msg::Chunk { chunk, .. } if chunks_committed => self.usage.appended(chunk),
            Msg::Clear { id, starts } => {
                self.usage.cleared(*id, *starts);
                self.garbage.add(*id, *starts);
            }
            Msg::Delete { id } => {
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
        if self.reserve.release() {
            self.hold_file_size(true);
        }
        self.fold_wal();
        while !self.garbage.is_empty() {
            self.collect_garbage();
        }
        self.trim_for_room(chunk_bytes.max(1 << 20) + self.usage.total() / 8);
        self.fold_wal();
        self.low_space = true;
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
        if self.wal_bytes() > TIGHT_WAL_BYTES {
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

    fn wal_bytes(&self) -> u64 {
        std::fs::metadata(&self.wal).map_or(0, |m| m.len())
    }

    /// Copies the WAL into the database and empties it.
    fn fold_wal(&self) {
        if let Err(e) = self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
            tracing::warn!(error = %e, "checkpoint failed");
        }
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
        _ => {}
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
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

/// Records where history begins (the rows below are deleted by the
/// garbage collector, or at once by [`delete_below`]).
fn set_starts(tx: &Transaction<'_>, id: ProcId, starts: [u64; 3]) -> Result<(), StoreError> {
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
                "INSERT INTO chunks (proc_id, stream, off, ts_ns, mono_ns, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            stmt.execute(params![
                to_i64(chunk.proc.0),
                chunk.stream as i64,
                to_i64(chunk.offset),
                chunk.ts_ns,
                chunk.mono_ns,
                &chunk.data[..]
            ])?;
        }
        Msg::CreateProc { row, .. } => {
            let args = serde_json::to_string(&row.args).unwrap_or_else(|_| "[]".into());
            tx.execute(
                "INSERT INTO processes (name, command, args, cwd, env, mode, rows, cols, timeout_ms, status, started_at_ns)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'running', ?10)",
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
                    row.started_at_ns
                ],
            )?;
            let id = u64::try_from(tx.last_insert_rowid()).unwrap_or(0);
            return Ok(Outcome::Created(ProcId(id)));
        }
        Msg::Status(u) => {
            tx.execute(
                "UPDATE processes SET pid = ?2, status = ?3, exit_code = ?4, exit_signal = ?5, ended_at_ns = ?6 WHERE id = ?1",
                params![to_i64(u.id.0), u.pid, u.status, u.exit_code, u.exit_signal, u.ended_at_ns],
            )?;
        }
        Msg::Clear { id, starts } => set_starts(tx, *id, *starts)?,
        Msg::Delete { id } => {
            // Its rows go to the garbage collector once this commits.
            tx.execute("DELETE FROM processes WHERE id = ?1", params![to_i64(id.0)])?;
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

/// Looks a program up.
pub(crate) fn load_program(
    conn: &Connection,
    program: &str,
) -> Result<Option<ProgramRow>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT needs_pty, notes, confirmed_count, last_confirmed_at_ns FROM programs WHERE program = ?1",
            params![program],
            |r| {
                Ok(ProgramRow {
                    program: program.to_owned(),
                    needs_pty: r.get(0)?,
                    notes: r.get(1)?,
                    confirmed_count: r.get(2)?,
                    last_confirmed_at_ns: r.get(3)?,
                })
            },
        )
        .optional()?)
}

/// A process row from an earlier daemon, with its stream counters.
#[derive(Clone, Debug)]
pub(crate) struct StoredProc {
    /// Id.
    pub(crate) id: ProcId,
    /// Name.
    pub(crate) name: Option<String>,
    /// Program.
    pub(crate) command: String,
    /// Arguments.
    pub(crate) args: Vec<String>,
    /// Working directory.
    pub(crate) cwd: String,
    /// Environment overrides.
    pub(crate) env: std::collections::BTreeMap<String, String>,
    /// PTY size, for PTY processes.
    pub(crate) size: Option<(u16, u16)>,
    /// Idle timeout.
    pub(crate) timeout_ms: u64,
    /// OS pid it had.
    pub(crate) pid: u32,
    /// Stored status name.
    pub(crate) status: String,
    /// Exit code.
    pub(crate) exit_code: Option<i32>,
    /// Exit signal.
    pub(crate) exit_signal: Option<i32>,
    /// Start, ns.
    pub(crate) started_at_ns: i64,
    /// End, ns.
    pub(crate) ended_at_ns: Option<i64>,
    /// Per stream: history start.
    pub(crate) starts: [u64; 3],
    /// Per stream: end offset.
    pub(crate) ends: [u64; 3],
    /// Per stream: chunks retained.
    pub(crate) chunks: [u64; 3],
}

/// Every process row, oldest first, with stream counters from the log.
pub(crate) fn load_procs(conn: &Connection) -> Result<Vec<StoredProc>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT id, name, command, args, cwd, env, mode, rows, cols, timeout_ms, pid, status, exit_code, exit_signal,
                started_at_ns, ended_at_ns, start_stdin, start_stdout, start_stderr FROM processes ORDER BY id",
    )?;
    let mut procs = Vec::new();
    let mut rows = stmt.query([])?;
    let u = |v: i64| u64::try_from(v).unwrap_or(0);
    while let Some(r) = rows.next()? {
        let mode: String = r.get(6)?;
        let rows_: Option<i64> = r.get(7)?;
        let cols: Option<i64> = r.get(8)?;
        let size = (mode == "pty").then(|| {
            let d =
                |v: Option<i64>, default| v.and_then(|v| u16::try_from(v).ok()).unwrap_or(default);
            (d(rows_, crate::config::DEFAULT_ROWS), d(cols, crate::config::DEFAULT_COLS))
        });
        procs.push(StoredProc {
            id: ProcId(u(r.get(0)?)),
            name: r.get(1)?,
            command: r.get(2)?,
            args: serde_json::from_str(&r.get::<_, String>(3)?).unwrap_or_default(),
            cwd: r.get(4)?,
            env: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or_default(),
            size,
            timeout_ms: u(r.get(9)?),
            pid: u32::try_from(r.get::<_, i64>(10)?).unwrap_or(0),
            status: r.get(11)?,
            exit_code: r.get(12)?,
            exit_signal: r.get(13)?,
            started_at_ns: r.get(14)?,
            ended_at_ns: r.get(15)?,
            starts: [u(r.get(16)?), u(r.get(17)?), u(r.get(18)?)],
            ends: [0; 3],
            chunks: [0; 3],
        });
    }
    let mut counters = conn.prepare_cached(
        "SELECT stream, max(off + length(data)), count(*) FROM chunks WHERE proc_id = ?1 GROUP BY stream",
    )?;
    for p in &mut procs {
        let mut rows = counters.query(params![to_i64(p.id.0)])?;
        while let Some(r) = rows.next()? {
            if let Some(s) = StreamId::ALL.get(usize::try_from(r.get::<_, i64>(0)?).unwrap_or(9)) {
                p.ends[s.index()] = u(r.get::<_, Option<i64>>(1)?.unwrap_or(0));
                p.chunks[s.index()] = u(r.get(2)?);
            }
        }
        for i in 0..3 {
            p.ends[i] = p.ends[i].max(p.starts[i]);
        }
    }
    Ok(procs)
}

/// The highest agent transition sequence number recorded.
pub(crate) fn last_agent_seq(conn: &Connection) -> Result<u64, StoreError> {
    let v: i64 =
        conn.query_row("SELECT coalesce(max(seq), 0) FROM agent_events", [], |r| r.get(0))?;
    Ok(u64::try_from(v).unwrap_or(0))
}

/// Recorded transitions after `since`, oldest first, at most `limit`.
pub(crate) fn agent_events_after(
    conn: &Connection,
    since: u64,
    limit: usize,
) -> Result<Vec<Transition>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, proc_id, at_ns, before, after, source, name, reason FROM agent_events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
    )?;
    let rows =
        stmt.query_map(params![to_i64(since), i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, Option<String>>(6)?,
                r.get::<_, Option<String>>(7)?,
            ))
        })?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, id, at_ns, before, after, source, name, reason) = row?;
        let state = |s: &str| {
            AgentState::parse(s).ok_or_else(|| StoreError::Corrupt(format!("agent state {s:?}")))
        };
        let source = match source.as_str() {
            "hook" => Source::Hook,
            "osc" => Source::Osc,
            "heuristic" => Source::Heuristic,
            _ => Source::Lifecycle,
        };
        out.push(Transition {
            seq: u64::try_from(seq).unwrap_or(0),
            id: ProcId(u64::try_from(id).unwrap_or(0)),
            before: state(&before)?,
            after: state(&after)?,
            source,
            name,
            reason,
            at_ns,
        });
    }
    Ok(out)
}

/// A piece of one stream read back from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    /// Row id: insertion order across streams.
    pub(crate) seq: i64,
    /// Stream.
    pub(crate) stream: StreamId,
    /// Offset of the first byte.
    pub(crate) offset: u64,
    /// Wall-clock ns of the chunk.
    pub(crate) ts_ns: i64,
    /// The bytes.
    pub(crate) data: Bytes,
}

impl Piece {
    /// Offset just past the last byte.
    pub(crate) fn end(&self) -> u64 {
        self.offset + self.data.len() as u64
    }
}

/// Which end a bounded read keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keep {
    /// The oldest bytes.
    Head,
    /// The newest bytes.
    Tail,
}

/// Reads at most `max_bytes` of `[from, to)` of one stream, as pieces in
/// offset order, trimmed to the range and the budget.
pub(crate) fn read_range(
    conn: &Connection,
    proc: ProcId,
    stream: StreamId,
    from: u64,
    to: u64,
    max_bytes: u64,
    keep: Keep,
) -> Result<Vec<Piece>, StoreError> {
    if to <= from || max_bytes == 0 {
        return Ok(Vec::new());
    }
    let sql = match keep {
        Keep::Head => {
            "SELECT id, off, ts_ns, data FROM chunks
             WHERE proc_id = ?1 AND stream = ?2 AND off < ?4
               AND off >= coalesce((SELECT max(off) FROM chunks WHERE proc_id = ?1 AND stream = ?2 AND off <= ?3), 0)
             ORDER BY off"
        }
        Keep::Tail => {
            "SELECT id, off, ts_ns, data FROM chunks
             WHERE proc_id = ?1 AND stream = ?2 AND off < ?4
               AND off >= coalesce((SELECT max(off) FROM chunks WHERE proc_id = ?1 AND stream = ?2 AND off <= ?3), 0)
             ORDER BY off DESC"
        }
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params![to_i64(proc.0), stream as i64, to_i64(from), to_i64(to)])?;
    let mut out = Vec::new();
    let mut total = 0u64;
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let off =
            u64::try_from(row.get::<_, i64>(1)?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let ts_ns: i64 = row.get(2)?;
        let blob = row.get_ref(3)?.as_blob().map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let end = off + blob.len() as u64;
        let lo = from.max(off);
        let hi = to.min(end);
        if hi <= lo {
            continue;
        }
        let (lo, hi) = match keep {
            Keep::Head => (lo, hi.min(lo + (max_bytes - total))),
            Keep::Tail => (lo.max(hi.saturating_sub(max_bytes - total)), hi),
        };
        let slice =
            &blob[usize::try_from(lo - off).unwrap_or(0)..usize::try_from(hi - off).unwrap_or(0)];
        total += hi - lo;
        out.push(Piece { seq, stream, offset: lo, ts_ns, data: Bytes::copy_from_slice(slice) });
        if total >= max_bytes {
            break;
        }
    }
    if keep == Keep::Tail {
        out.reverse();
    }
    Ok(out)
}

/// Offset of the first chunk of `stream` read at or after monotonic time
/// `since_mono_ns`, if any.
pub(crate) fn first_offset_since(
    conn: &Connection,
    proc: ProcId,
    stream: StreamId,
    since_mono_ns: i64,
) -> Result<Option<u64>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT off FROM chunks WHERE proc_id = ?1 AND stream = ?2 AND mono_ns >= ?3 ORDER BY mono_ns LIMIT 1",
    )?;
    let off: Option<i64> = stmt
        .query_row(params![to_i64(proc.0), stream as i64, since_mono_ns], |r| r.get(0))
        .optional()?;
    Ok(off.and_then(|o| u64::try_from(o).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(proc: u64, stream: StreamId, offset: u64, mono: i64, data: &'static [u8]) -> Chunk {
        Chunk {
            proc: ProcId(proc),
            stream,
            offset,
            ts_ns: mono,
            mono_ns: mono,
            data: Bytes::from_static(data),
        }
    }

    fn new_proc() -> NewProc {
        NewProc {
            name: None,
            command: "sh".into(),
            args: vec![],
            cwd: "/".into(),
            env_json: "{}".into(),
            mode: "pipes",
            size: None,
            timeout_ms: 0,
            started_at_ns: 1,
        }
    }

    #[tokio::test]
    async fn ranges_keep_head_or_tail_and_trim() {
        let dir = tempfile::tempdir().unwrap();
        let (store, thread) = Store::open(&dir.path().join("t.db"), Retention::UNLIMITED).unwrap();
        let id = store.create_proc(new_proc()).await.unwrap();
        for (i, part) in [b"aaaa", b"bbbb", b"cccc"].iter().enumerate() {
            let off = 4 * i as u64;
            // 20 ms apart: separate rows (merging stops at 10 ms).
            let mono = 20_000_000 * i as i64;
            store.append(chunk(id.0, StreamId::Stdout, off, mono, *part)).await.unwrap();
        }
        let all = store
            .read_flushed(move |c| read_range(c, id, StreamId::Stdout, 2, 12, 100, Keep::Head))
            .await
            .unwrap();
        let text: Vec<u8> = all.iter().flat_map(|p| p.data.to_vec()).collect();
        assert_eq!(text, b"aabbbbcccc");
        assert_eq!(all[0].offset, 2);
        let head = store
            .read(move |c| read_range(c, id, StreamId::Stdout, 2, 12, 5, Keep::Head))
            .await
            .unwrap();
        let text: Vec<u8> = head.iter().flat_map(|p| p.data.to_vec()).collect();
        assert_eq!(text, b"aabbb");
        let tail = store
            .read(move |c| read_range(c, id, StreamId::Stdout, 0, 12, 6, Keep::Tail))
            .await
            .unwrap();
        let text: Vec<u8> = tail.iter().flat_map(|p| p.data.to_vec()).collect();
        assert_eq!(text, b"bbcccc");
        assert_eq!(tail[0].offset, 6);
        let since = store
            .read(move |c| first_offset_since(c, id, StreamId::Stdout, 5_000_000))
            .await
            .unwrap();
        assert_eq!(since, Some(4));
        drop(store);
        thread.join();
    }

    #[tokio::test]
    async fn registry_counts_and_notes() {
        let dir = tempfile::tempdir().unwrap();
        let (store, thread) = Store::open(&dir.path().join("t.db"), Retention::UNLIMITED).unwrap();
        let rec = |needs_pty, notes: Option<&str>| ProgramRecord {
            program: "ssh".into(),
            needs_pty,
            notes: notes.map(str::to_owned),
            at_ns: 5,
        };
        let r = store.record_program(rec(true, Some("interactive"))).await.unwrap();
        assert_eq!((r.confirmed_count, r.notes.as_str()), (1, "interactive"));
        let r = store.record_program(rec(true, None)).await.unwrap();
        assert_eq!((r.confirmed_count, r.notes.as_str()), (2, "interactive"));
        let r = store.record_program(rec(false, None)).await.unwrap();
        assert_eq!((r.confirmed_count, r.needs_pty, r.notes.as_str()), (1, false, "interactive"));
        let r = store.record_program(rec(false, Some(""))).await.unwrap();
        assert_eq!((r.confirmed_count, r.notes.as_str()), (2, ""));
        let got = store.read(|c| load_program(c, "ssh")).await.unwrap().unwrap();
        assert_eq!(got, r);
        drop(store);
        thread.join();
    }

    #[tokio::test]
    async fn retention_trims_the_oldest_bytes_and_publishes_the_new_start() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Retention { per_process: 1000, total: u64::MAX, max_db_bytes: None };
        let (store, thread) = Store::open(&dir.path().join("t.db"), limits).unwrap();
        let id = store.create_proc(new_proc()).await.unwrap();
        let shared = Arc::new(crate::proc::Shared::default());
        let live: Arc<dyn HistoryStarts> = shared.clone();
        store.track(id, Arc::downgrade(&live));
        for i in 0..10u64 {
            let mono = 20_000_000 * i64::try_from(i).unwrap();
            let c = chunk(id.0, StreamId::Stdout, i * 200, mono, &[b'x'; 200]);
            store.append(c).await.unwrap();
        }
        store.flush().await.unwrap();
        // Once more: the rows below the new start are deleted after the
        // commit that trimmed them.
        store.flush().await.unwrap();
        // 2000 bytes over a 1000-byte limit: trimmed to at most 875, on a
        // chunk boundary, and the live start moved with it.
        let start = shared.start[StreamId::Stdout.index()].load(Ordering::Acquire);
        assert!(start >= 2000 - 875 && start % 200 == 0, "start {start}");
        let (rows, stored_start) = store
            .read(move |c| {
                let rows = read_range(c, id, StreamId::Stdout, 0, 2000, 10_000, Keep::Head)?;
                let p = load_procs(c)?;
                Ok((rows, p[0].starts[StreamId::Stdout.index()]))
            })
            .await
            .unwrap();
        assert_eq!(rows.first().map(|r| r.offset), Some(start));
        assert_eq!(rows.iter().map(|r| r.data.len() as u64).sum::<u64>(), 2000 - start);
        assert_eq!(stored_start, start);
        let h = store.health();
        assert_eq!((h.retained, h.trimmed), (2000 - start, start));
        drop(store);
        thread.join();
    }

    #[tokio::test]
    async fn a_full_database_keeps_control_records_and_recovers() {
        let dir = tempfile::tempdir().unwrap();
        // Room for the schema and a little more, not for a 64 KiB chunk.
        let limits =
            Retention { per_process: u64::MAX, total: u64::MAX, max_db_bytes: Some(48 << 10) };
        let path = dir.path().join("t.db");
        let (store, thread) = Store::open(&path, limits).unwrap();
        let id = store.create_proc(new_proc()).await.unwrap();
        static BIG: [u8; 64 << 10] = [b'y'; 64 << 10];
        store.append(chunk(id.0, StreamId::Stdout, 0, 0, &BIG)).await.unwrap();
        store
            .update_status(StatusUpdate {
                id,
                pid: 7,
                status: "exited",
                exit_code: Some(0),
                exit_signal: None,
                ended_at_ns: Some(2),
            })
            .await
            .unwrap();
        store.flush().await.unwrap();
        // The chunk does not fit; its newest 4 KiB do, and the status too.
        let h = store.health();
        assert_eq!(h.dropped, (64 << 10) - NEWEST_KEPT_BYTES as u64);
        store.append(chunk(id.0, StreamId::Stdout, 65536, 0, b"small")).await.unwrap();
        store.flush().await.unwrap();
        assert_eq!(store.health().error, None);
        let (procs, rows) = store
            .read(move |c| {
                Ok((
                    load_procs(c)?,
                    read_range(c, id, StreamId::Stdout, 0, 65541, 1 << 20, Keep::Head)?,
                ))
            })
            .await
            .unwrap();
        assert_eq!(procs[0].status, "exited");
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!((rows[0].offset, rows[0].data.len()), (61440, NEWEST_KEPT_BYTES));
        assert_eq!(&rows[1].data[..], b"small");
        drop(store);
        thread.join();
        let conn = Connection::open(&path).unwrap();
        let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(check, "ok");
    }

    #[test]
    fn contiguous_chunks_close_in_time_become_one_row() {
        let budget = Arc::new(Semaphore::new(1000));
        let msg = |proc, stream, offset, mono, data: &'static [u8]| Msg::Chunk {
            chunk: chunk(proc, stream, offset, mono, data),
            _permit: Arc::clone(&budget).try_acquire_many_owned(10).unwrap(),
        };
        let mut batch = vec![
            msg(1, StreamId::Stdout, 0, 0, b"ab"),
            msg(1, StreamId::Stdout, 2, 1_000_000, b"cd"),
            msg(1, StreamId::Stderr, 0, 1_000_000, b"e"),
            msg(1, StreamId::Stdout, 4, 2_000_000, b"fg"),
            msg(1, StreamId::Stdout, 6, 2_000_000, b"hi"),
            msg(1, StreamId::Stdout, 8, 50_000_000, b"late"),
        ];
        merge_chunks(&mut batch);
        let rows: Vec<(StreamId, u64, &[u8])> = batch
            .iter()
            .map(|m| match m {
                Msg::Chunk { chunk, .. } => (chunk.stream, chunk.offset, &chunk.data[..]),
                _ => unreachable!("only chunks"),
            })
            .collect();
        assert_eq!(
            rows,
            [
                (StreamId::Stdout, 0, &b"abcd"[..]),
                (StreamId::Stderr, 0, b"e"),
                (StreamId::Stdout, 4, b"fghi"),
                (StreamId::Stdout, 8, b"late"),
            ]
        );
        // Every permit is still held (by the merged rows) until they commit.
        assert_eq!(budget.available_permits(), 1000 - 60);
        drop(batch);
        assert_eq!(budget.available_permits(), 1000);
    }
}
