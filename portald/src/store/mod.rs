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
//! latency low; while output streams in, it lingers a little (`writer::LINGER`) for
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
//!
//! Here: the handle ([`Store`]) and the read pool; `msg.rs`: the messages
//! the handle queues and the state it shares with the writer; `writer.rs`:
//! the writer thread; `queries.rs`: what reads run; `error.rs`: the store's
//! error.

mod checkpoint;
mod error;
mod feed;
mod gc;
mod msg;
mod queries;
mod reserve;
pub(crate) mod retention;
pub(crate) mod schema;
mod writer;

pub(crate) use error::StoreError;
pub(crate) use feed::LogFeed;
pub(crate) use msg::{HistoryStarts, NewProc, ProgramRecord, ProgramRow, StatusUpdate};
use msg::{Msg, WriterShared};
pub(crate) use queries::*;
use writer::{NEARLY_FULL_BYTES, PAGE_SIZE, WRITER_CACHE_KIB, Writer, is_full};

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use rusqlite::Connection;
use tokio::sync::{Semaphore, mpsc, oneshot};

pub(crate) use crate::config::Retention;
use crate::config::STORE_BACKLOG_BYTES;
use crate::domain::{Chunk, ProcId, Resize, Transition};
use checkpoint::Checkpointer;
use gc::Garbage;
use retention::Usage;

/// Messages queued to the writer (bounded in bytes by the semaphore, in count
/// only as a backstop).
const STORE_QUEUE_MESSAGES: usize = 16 * 1024;

/// Read connections kept open for reuse; more are opened on demand.
const READ_POOL_SIZE: usize = 8;

/// A cheap, cloneable handle to the store.
#[derive(Clone, Debug)]
pub(crate) struct Store {
    tx: mpsc::Sender<Msg>,
    budget: Arc<Semaphore>,
    pool: Arc<ReadPool>,
    shared: Arc<WriterShared>,
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
        let checkpoint = Checkpointer::start(&conn, path, &retention)?;
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
            db_path: path.to_path_buf(),
            db_id: std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino())),
            grown: std::collections::BTreeMap::new(),
        };
        let (tx, rx) = mpsc::channel(STORE_QUEUE_MESSAGES);
        let thread = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || writer::run(w, rx))
            .map_err(|e| open_err(format!("cannot start the writer thread: {e}")))?;
        let store = Self {
            tx,
            budget: Arc::new(Semaphore::new(STORE_BACKLOG_BYTES)),
            pool: Arc::new(ReadPool::new(path.to_path_buf())),
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

    /// What each commit changes, for an observer that follows the log.
    pub(crate) fn feed(&self) -> Arc<LogFeed> {
        Arc::clone(&self.shared.feed)
    }

    /// Where the database is.
    pub(crate) fn path(&self) -> &Path {
        &self.pool.path
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

    /// Records a process's end and waits for its commit: `Ok` only once it
    /// is in the log, so an end is shown to nobody before a restart would
    /// find it. On a full disk the end commits without the output that
    /// could not be stored; an error means not even that was possible.
    ///
    /// # Cancel safety
    /// Dropping the future may leave the end queued, to commit or not.
    pub(crate) async fn record_end(&self, update: StatusUpdate) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Msg::End { update, reply }).await?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Records that `by` took the name of the ended `old` over.
    pub(crate) async fn replaced(&self, old: ProcId, by: ProcId) -> Result<(), StoreError> {
        self.send(Msg::Replaced { old, by }).await
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

    /// Records a terminal's resize (without waiting, like a transition: a
    /// resize lost to a full queue costs a recording its size, and is
    /// logged).
    pub(crate) fn record_resize(&self, r: Resize) {
        if let Err(e) = self.tx.try_send(Msg::Resize(r)) {
            tracing::warn!(error = %e, "resize not recorded: the store queue is full");
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

/// Read-only connections to one database, kept for reuse.
#[derive(Debug)]
pub(crate) struct ReadPool {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
}

impl ReadPool {
    /// A pool of connections to `path`, opened on demand.
    pub(crate) fn new(path: PathBuf) -> Self {
        Self { path, idle: Mutex::new(Vec::new()) }
    }

    /// Runs `f` on a pooled connection (in the calling thread).
    pub(crate) fn with<R>(
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

/// A process row for tests.
#[cfg(test)]
pub(crate) fn new_proc() -> NewProc {
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
        supervision: None,
    }
}

#[cfg(test)]
mod tests {
    use super::writer::{NEWEST_KEPT_BYTES, merge_chunks};
    use super::*;
    use crate::domain::{RowStatus, StreamId};
    use bytes::Bytes;

    fn chunk(proc: u64, stream: StreamId, offset: u64, mono: i64, data: &'static [u8]) -> Chunk {
        Chunk {
            proc: ProcId(proc),
            stream,
            offset,
            ts_ns: mono,
            mono_ns: mono,
            data: Bytes::from_static(data),
            origin: None,
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
                status: RowStatus::Ended(crate::domain::EndReason::Exited),
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
        assert_eq!(procs[0].status, RowStatus::Ended(crate::domain::EndReason::Exited));
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
