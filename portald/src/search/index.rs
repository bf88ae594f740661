//! The search index: a second SQLite file beside the log, kept by its own
//! thread (`search-indexer`) that follows the log through the writer's
//! [`LogFeed`], so capture never waits for it.
//!
//! The log is cut into *segments*: runs of whole lines of one stream, about
//! [`SEGMENT_BYTES`] of raw bytes each, recorded by offset range and time
//! (`segments`) and indexed as text in an FTS5 table (`lines`, contentless,
//! keeping which words each segment has but not where: phrases are checked
//! on the lines, and positions would make the index 1.7 times as large and
//! a fifth slower to build, measured on log lines; its rowid the segment's
//! id, with a `tag` column `p<id> s<stream>` so a
//! search restricted to processes or streams is answered by the index). A
//! stream's unfinished last line is indexed too, as a *partial* segment that
//! is replaced once the line grows, so a prompt is findable while it waits.
//!
//! Per stream, `progress` says how far the index reaches; it is written in
//! the same transaction as the segments, so an index is never ahead of or
//! behind what it says (a crash loses at most an uncommitted step, which is
//! indexed again). The index describes one log: it records the log's
//! `log_id` and its own schema version, and is deleted and rebuilt from the
//! log when either differs, or when it cannot be opened. Rebuilding is the
//! same work as following: every stream is indexed from its history start.
//!
//! Forgetting: when the writer reports a clear, cleanup or trim, the indexer
//! deletes the segments that now lie wholly before a history start or
//! belong to no process. Searches do not depend on it: every candidate is
//! read back from the log itself (see `query.rs`), so forgotten output is
//! never reported even before its segments are gone.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension, params};

use super::text;
use crate::domain::{ProcId, StreamId};
use crate::store::{Keep, LogFeed, Piece, StoreError};

/// Version of the index's own schema; an index of another version is
/// rebuilt.
const INDEX_VERSION: i64 = 3;

const SCHEMA: &str = r"
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE progress (
    proc_id     INTEGER NOT NULL,
    stream      INTEGER NOT NULL,
    off         INTEGER NOT NULL,        -- indexed up to here
    partial_id  INTEGER,                 -- the segment of an unfinished line
    partial_off INTEGER,                 -- where that line starts
    PRIMARY KEY (proc_id, stream)
) WITHOUT ROWID;
CREATE TABLE segments (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: pages name them
    proc_id  INTEGER NOT NULL,
    stream   INTEGER NOT NULL,
    off      INTEGER NOT NULL,
    end_off  INTEGER NOT NULL,
    ts_first INTEGER NOT NULL,           -- wall clock of its first byte
    ts_last  INTEGER NOT NULL            -- and of its last
);
CREATE INDEX segments_by_stream ON segments (proc_id, stream, end_off);
CREATE INDEX segments_by_time ON segments (ts_first, id);
CREATE VIRTUAL TABLE lines USING fts5(
    text, tag, content = '', contentless_delete = 1, detail = column,
    tokenize = 'unicode61 remove_diacritics 0'
);
";

/// Raw bytes per segment: a candidate is checked by reading it back, so a
/// segment is small enough to read and render in well under a millisecond,
/// and large enough that a gigabyte of log is tens of thousands of rows.
pub(crate) const SEGMENT_BYTES: usize = 16 << 10;

/// Raw bytes indexed per transaction: a step takes a fraction of a second
/// (a search waiting for the index, or a shutdown, is never held long), and
/// fewer, larger commits leave the index less to merge (measured: 1 MiB
/// steps index a quarter slower than 4 MiB).
const STEP_BYTES: u64 = 4 << 20;

/// Longest time one segment spans: searches order segments by the time of
/// their first byte, so a segment of a slow program rebuilt in one piece
/// must not cover hours (newest-first would put an hour-old line before a
/// minute-old one).
const SEGMENT_SPAN_NS: i64 = 60_000_000_000;

/// A line this long is cut: a program that never prints a line break
/// still gets indexed, in pieces.
const LONGEST_LINE: usize = 64 << 10;

/// Segments deleted per transaction when history is forgotten.
const FORGET_BATCH: i64 = 1024;

/// How long the indexer waits for news before looking again (a feed that
/// never closes must not keep it asleep at shutdown).
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// How long news that finds the indexer idle waits for more before it is
/// indexed: a program typing a line at a time would otherwise cost an index
/// transaction per line, on the core the round trip needs (measured: a
/// write→match round trip 0.3 ms slower). A search waits at most this much
/// longer for what was just printed.
const LINGER: Duration = Duration::from_millis(50);

/// After a failed step (a full disk), how long before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(5);

/// Free disk below which indexing pauses: the log comes first, and it
/// starts keeping its own files tight at 32 MiB free; the index (about a
/// quarter of the log's size) stops at twice that, so it never takes the
/// room the log needs.
const PAUSE_BELOW_FREE_BYTES: u64 = 64 << 20;

/// Where the index of the log at `db` lives: beside it.
pub(crate) fn index_path(db: &Path) -> PathBuf {
    db.with_extension("search.db")
}

/// What the indexer publishes for searches.
#[derive(Debug)]
pub(crate) struct IndexState {
    /// The feed generation whose changes are all indexed; `None` until the
    /// indexer has caught up with the log once.
    indexed: tokio::sync::watch::Sender<Option<u64>>,
    /// The index file is open and final (until then it may be rebuilt, and
    /// searches do not read it).
    opened: std::sync::atomic::AtomicBool,
    /// Bytes of log known to the indexer and not indexed yet.
    pending: AtomicU64,
    /// Why the last step failed, until one succeeds.
    error: Mutex<Option<String>>,
}

impl Default for IndexState {
    fn default() -> Self {
        Self {
            indexed: tokio::sync::watch::Sender::new(None),
            opened: std::sync::atomic::AtomicBool::new(false),
            pending: AtomicU64::new(0),
            error: Mutex::new(None),
        }
    }
}

impl IndexState {
    /// Waits until every change of `generation` is indexed, or `timeout`;
    /// true when it was.
    pub(crate) async fn caught_up(&self, generation: u64, timeout: Duration) -> bool {
        let mut rx = self.indexed.subscribe();
        tokio::time::timeout(timeout, rx.wait_for(|g| g.is_some_and(|g| g >= generation)))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The index file is open and final (searches may read it).
    pub(crate) fn opened(&self) -> bool {
        self.opened.load(Ordering::Acquire)
    }

    /// Bytes not indexed yet.
    pub(crate) fn pending(&self) -> u64 {
        self.pending.load(Ordering::Relaxed)
    }

    /// The last indexing error, while indexing fails.
    pub(crate) fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn set_error(&self, e: Option<String>) {
        *self.error.lock().unwrap_or_else(PoisonError::into_inner) = e;
    }
}

/// Opens (creating, or rebuilding when it describes something else) the
/// index of the log whose identity is `log_id`.
pub(crate) fn open(path: &Path, log_id: &str) -> Result<Connection, StoreError> {
    match open_once(path, log_id) {
        Ok(Some(conn)) => Ok(conn),
        Ok(None) => {
            tracing::info!(index = %path.display(), "the search index is of another log or version: rebuilding it");
            remove(path);
            open_once(path, log_id)?
                .ok_or_else(|| StoreError::Corrupt("index rebuilt twice".into()))
        }
        Err(e) => {
            tracing::warn!(index = %path.display(), error = %e, "the search index cannot be opened: rebuilding it");
            remove(path);
            open_once(path, log_id)?
                .ok_or_else(|| StoreError::Corrupt("index rebuilt twice".into()))
        }
    }
}

/// Deletes the index and its WAL files.
fn remove(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        if let Err(e) = std::fs::remove_file(&name)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(file = ?name, error = %e, "cannot remove");
        }
    }
}

/// `None` when the file is an index of another log or version.
fn open_once(path: &Path, log_id: &str) -> Result<Option<Connection>, StoreError> {
    if !path.exists() {
        use std::os::unix::fs::OpenOptionsExt as _;
        // Private like the log it copies words from.
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| StoreError::Open { path: path.to_path_buf(), reason: e.to_string() })?;
    }
    let mut conn = Connection::open(path)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    crate::store::schema::configure(&conn)?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version == 0 {
        let tx = conn.transaction()?;
        tx.execute_batch(SCHEMA)?;
        tx.execute("INSERT INTO meta (key, value) VALUES ('log_id', ?1)", params![log_id])?;
        tx.pragma_update(None, "user_version", INDEX_VERSION)?;
        tx.commit()?;
        return Ok(Some(conn));
    }
    if version != INDEX_VERSION {
        return Ok(None);
    }
    let theirs: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = 'log_id'", [], |r| r.get(0))
        .optional()?;
    Ok((theirs.as_deref() == Some(log_id)).then_some(conn))
}

/// How far one stream is indexed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Progress {
    /// Indexed up to here.
    off: u64,
    /// The segment holding an unfinished last line, and where it starts.
    partial: Option<(i64, u64)>,
}

impl Progress {
    /// Where indexing resumes: an unfinished line is indexed again whole.
    fn resume(self) -> u64 {
        self.partial.map_or(self.off, |(_, at)| at)
    }
}

type Key = (ProcId, StreamId);

/// The indexer thread's state.
pub(crate) struct Indexer {
    index: Connection,
    log: Connection,
    progress: HashMap<Key, Progress>,
    /// Streams to index, with the end to reach.
    want: BTreeMap<Key, u64>,
    /// The stream indexed last (the next step takes the one after it).
    last: Option<Key>,
    state: Arc<IndexState>,
}

fn u(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn i(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn stream_of(v: i64) -> Option<StreamId> {
    StreamId::ALL.get(usize::try_from(v).ok()?).copied()
}

impl Indexer {
    /// Opens the index of the log at `db` and finds what is left to index.
    pub(crate) fn open(db: &Path, state: Arc<IndexState>) -> Result<Self, StoreError> {
        let log = Connection::open_with_flags(
            db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        crate::store::schema::configure(&log)?;
        let log_id = crate::store::log_id(&log)?;
        let index = open(&index_path(db), &log_id)?;
        let mut progress = HashMap::new();
        {
            let mut stmt = index
                .prepare("SELECT proc_id, stream, off, partial_id, partial_off FROM progress")?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let Some(stream) = stream_of(r.get(1)?) else { continue };
                let partial = match (r.get::<_, Option<i64>>(3)?, r.get::<_, Option<i64>>(4)?) {
                    (Some(id), Some(at)) => Some((id, u(at))),
                    _ => None,
                };
                progress.insert(
                    (ProcId(u(r.get(0)?)), stream),
                    Progress { off: u(r.get(2)?), partial },
                );
            }
        }
        let mut me = Self { index, log, progress, want: BTreeMap::new(), last: None, state };
        me.forget()?;
        for p in crate::store::load_procs(&me.log)? {
            for s in StreamId::ALL {
                me.grew((p.id, s), p.ends[s.index()]);
            }
        }
        Ok(me)
    }

    fn grew(&mut self, key: Key, end: u64) {
        let done = self.progress.get(&key).map_or(0, |p| p.off);
        if end > done {
            let e = self.want.entry(key).or_default();
            *e = (*e).max(end);
        }
    }

    fn publish_pending(&self) {
        let pending: u64 = self
            .want
            .iter()
            .map(|(k, end)| end.saturating_sub(self.progress.get(k).map_or(0, |p| p.off)))
            .sum();
        self.state.pending.store(pending, Ordering::Relaxed);
    }

    /// Deletes the segments of history that is gone: processes cleaned up,
    /// output cleared or trimmed.
    fn forget(&mut self) -> Result<(), StoreError> {
        let starts = crate::store::history_starts(&self.log)?;
        let keys: Vec<Key> = self.progress.keys().copied().collect();
        for key in keys {
            let start = starts.get(&key.0).map(|s| s[key.1.index()]);
            let below = start.unwrap_or(u64::MAX);
            loop {
                let tx = self.index.transaction()?;
                let ids: Vec<i64> = tx
                    .prepare_cached(
                        "SELECT id FROM segments WHERE proc_id = ?1 AND stream = ?2 AND end_off <= ?3 LIMIT ?4",
                    )?
                    .query_map(params![i(key.0.0), key.1 as i64, i(below), FORGET_BATCH], |r| {
                        r.get(0)
                    })?
                    .collect::<Result<_, _>>()?;
                for id in &ids {
                    tx.prepare_cached("DELETE FROM lines WHERE rowid = ?1")?.execute([id])?;
                    tx.prepare_cached("DELETE FROM segments WHERE id = ?1")?.execute([id])?;
                }
                let p = self.progress.get(&key).copied().unwrap_or_default();
                let mut next = p;
                if p.partial.is_some_and(|(id, _)| ids.contains(&id)) {
                    next.partial = None;
                }
                let done = i64::try_from(ids.len()).unwrap_or(i64::MAX) < FORGET_BATCH;
                if done && start.is_none() {
                    tx.execute(
                        "DELETE FROM progress WHERE proc_id = ?1 AND stream = ?2",
                        params![i(key.0.0), key.1 as i64],
                    )?;
                } else if next != p {
                    write_progress(&tx, key, next)?;
                }
                tx.commit()?;
                if done && start.is_none() {
                    self.progress.remove(&key);
                    self.want.remove(&key);
                } else {
                    self.progress.insert(key, next);
                }
                if done {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Indexes up to [`STEP_BYTES`] of the next stream that has news.
    fn step(&mut self) -> Result<(), StoreError> {
        let key = match self.last {
            Some(last) => self
                .want
                .range((Bound::Excluded(last), Bound::Unbounded))
                .next()
                .or_else(|| self.want.iter().next()),
            None => self.want.iter().next(),
        };
        let Some((&key, &target)) = key else { return Ok(()) };
        self.last = Some(key);
        let starts = crate::store::history_starts_of(&self.log, key.0)?;
        let Some(starts) = starts else {
            // Cleaned up; the forget pass that follows deletes what it had.
            self.want.remove(&key);
            return Ok(());
        };
        let p = self.progress.get(&key).copied().unwrap_or_default();
        let from = p.resume().max(starts[key.1.index()]);
        let to = target.min(from + STEP_BYTES);
        let pieces = if to > from {
            crate::store::read_range(&self.log, key.0, key.1, from, to, to - from, Keep::Head)?
        } else {
            Vec::new()
        };
        let reached = pieces.last().map_or(from, Piece::end);
        let at_end = to >= target;
        let tx = self.index.transaction()?;
        if let Some((id, _)) = p.partial {
            tx.prepare_cached("DELETE FROM lines WHERE rowid = ?1")?.execute([id])?;
            tx.prepare_cached("DELETE FROM segments WHERE id = ?1")?.execute([id])?;
        }
        // Nothing stored in the range (lost, or trimmed meanwhile): skip it.
        let mut next =
            Progress { off: if pieces.is_empty() { to.max(from) } else { reached }, partial: None };
        let runs = runs(&pieces);
        let last = runs.len().saturating_sub(1);
        for (n, run) in runs.iter().enumerate() {
            let tail = if n < last || run.end < to {
                // Nothing is stored after it up to a committed end: output
                // was lost there, and the line ended with it.
                Tail::Ended
            } else if at_end {
                Tail::Partial
            } else {
                Tail::Wait
            };
            let cut = cut_segments(run, tail);
            for seg in &cut.segments {
                let id = insert_segment(&tx, key, run, seg)?;
                if seg.partial {
                    next.partial = Some((id, seg.start));
                }
            }
            if cut.indexed_to < run.end {
                next.off = cut.indexed_to;
            }
        }
        // Every step moves on (a line never outgrows a step: it is cut).
        debug_assert!(pieces.is_empty() || next.off > from, "a step that moves nothing");
        if !pieces.is_empty() && next.off <= from {
            next.off = reached;
        }
        write_progress(&tx, key, next)?;
        tx.commit()?;
        self.progress.insert(key, next);
        if at_end && next.off >= target {
            self.want.remove(&key);
        }
        Ok(())
    }
}

fn write_progress(tx: &rusqlite::Transaction<'_>, key: Key, p: Progress) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO progress (proc_id, stream, off, partial_id, partial_off) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        i(key.0.0),
        key.1 as i64,
        i(p.off),
        p.partial.map(|(id, _)| id),
        p.partial.map(|(_, at)| i(at)),
    ])?;
    Ok(())
}

/// Contiguous bytes of one stream, with the time of each piece.
pub(super) struct Run {
    pub(super) start: u64,
    end: u64,
    pub(super) data: Vec<u8>,
    /// (offset, wall-clock ns) of each piece, in order.
    times: Vec<(u64, i64)>,
}

impl Run {
    /// Wall-clock time of the byte at `off`.
    pub(super) fn ts_at(&self, off: u64) -> i64 {
        let i = self.times.partition_point(|(o, _)| *o <= off);
        self.times[i.saturating_sub(1)].1
    }
}

/// Joins pieces into contiguous runs (a gap is output that was never
/// stored; lines do not continue across it).
pub(super) fn runs(pieces: &[Piece]) -> Vec<Run> {
    let mut out: Vec<Run> = Vec::new();
    for p in pieces {
        match out.last_mut() {
            Some(r) if r.end == p.offset => {
                r.data.extend_from_slice(&p.data);
                r.end = p.end();
                r.times.push((p.offset, p.ts_ns));
            }
            _ => out.push(Run {
                start: p.offset,
                end: p.end(),
                data: p.data.to_vec(),
                times: vec![(p.offset, p.ts_ns)],
            }),
        }
    }
    out
}

/// A segment cut from a run: offsets in the stream.
struct Segment {
    start: u64,
    end: u64,
    partial: bool,
}

struct Cut {
    segments: Vec<Segment>,
    /// Everything before this offset is in a segment.
    indexed_to: u64,
}

/// What becomes of a run's unfinished last line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tail {
    /// Output is missing after it: the line ended there.
    Ended,
    /// It is the end of the stream so far: a partial segment, replaced
    /// when the line grows.
    Partial,
    /// More of the stream is to be read: left for the next step.
    Wait,
}

/// Cuts a run into segments of whole lines (a line longer than any may be
/// is cut too); its unfinished last line goes as `tail` says.
fn cut_segments(run: &Run, tail: Tail) -> Cut {
    let mut segments = Vec::new();
    let mut seg_start = 0usize;
    let mut line_start = 0usize;
    for (i, &b) in run.data.iter().enumerate() {
        let breaks = b == b'\n' || b == b'\r';
        if breaks {
            line_start = i + 1;
        } else if i + 1 - line_start > LONGEST_LINE {
            line_start = i;
        } else {
            continue;
        }
        let long = line_start - seg_start >= SEGMENT_BYTES;
        let spans_long = || {
            let at = |i: usize| run.ts_at(run.start + i as u64);
            line_start > seg_start && at(line_start) - at(seg_start) > SEGMENT_SPAN_NS
        };
        if long || spans_long() {
            segments.push(Segment {
                start: run.start + seg_start as u64,
                end: run.start + line_start as u64,
                partial: false,
            });
            seg_start = line_start;
        }
    }
    if line_start > seg_start {
        segments.push(Segment {
            start: run.start + seg_start as u64,
            end: run.start + line_start as u64,
            partial: false,
        });
    }
    let mut indexed_to = run.start + line_start as u64;
    if line_start < run.data.len() && tail != Tail::Wait {
        segments.push(Segment { start: indexed_to, end: run.end, partial: tail == Tail::Partial });
        indexed_to = run.end;
    }
    Cut { segments, indexed_to }
}

fn insert_segment(
    tx: &rusqlite::Transaction<'_>,
    key: Key,
    run: &Run,
    seg: &Segment,
) -> Result<i64, StoreError> {
    let lo = usize::try_from(seg.start - run.start).unwrap_or(0);
    let hi = usize::try_from(seg.end - run.start).unwrap_or(0);
    let mut body = String::new();
    text::lines(&run.data[lo..hi], |_, _, line| {
        body.push_str(&line);
        body.push('\n');
    });
    tx.prepare_cached(
        "INSERT INTO segments (proc_id, stream, off, end_off, ts_first, ts_last) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        i(key.0.0),
        key.1 as i64,
        i(seg.start),
        i(seg.end),
        run.ts_at(seg.start),
        run.ts_at(seg.end.saturating_sub(1).max(seg.start)),
    ])?;
    let id = tx.last_insert_rowid();
    if !body.is_empty() {
        tx.prepare_cached("INSERT INTO lines (rowid, text, tag) VALUES (?1, ?2, ?3)")?
            .execute(params![id, body, format!("p{} s{}", key.0.0, key.1 as i64)])?;
    }
    Ok(id)
}

/// The indexer thread; join it after the store's writer has stopped.
#[derive(Debug)]
pub(crate) struct IndexThread(Option<std::thread::JoinHandle<()>>);

impl IndexThread {
    /// Waits for the indexer to finish its step and stop.
    pub(crate) fn join(self) {
        if let Some(t) = self.0
            && t.join().is_err()
        {
            tracing::error!("the search indexer panicked");
        }
    }
}

/// Starts the indexer for the log at `db`, following `feed`.
pub(crate) fn start(db: PathBuf, feed: Arc<LogFeed>, state: Arc<IndexState>) -> IndexThread {
    let spawned = std::thread::Builder::new()
        .name("search-indexer".into())
        .spawn(move || run(&db, &feed, &state));
    match spawned {
        Ok(t) => IndexThread(Some(t)),
        Err(e) => {
            tracing::error!(error = %e, "cannot start the search indexer; search finds nothing new");
            IndexThread(None)
        }
    }
}

/// Why indexing waits on a nearly full disk.
fn paused(free: u64) -> String {
    format!(
        "indexing is paused while the disk is nearly full ({} MiB free; it resumes above {} MiB)",
        free >> 20,
        PAUSE_BELOW_FREE_BYTES >> 20
    )
}

fn run(db: &Path, feed: &LogFeed, state: &Arc<IndexState>) {
    let dir = db.parent();
    // Changes committed from here on are taken from the feed; what came
    // before is found by comparing the log with the index.
    let mut generation = feed.generation();
    let mut me = loop {
        // Not even the index's first pages on a nearly full disk: the log
        // may need them to start.
        let why = match dir.and_then(crate::sys::free_bytes) {
            Some(free) if free < PAUSE_BELOW_FREE_BYTES => Some(paused(free)),
            _ => match Indexer::open(db, Arc::clone(state)) {
                Ok(me) => break me,
                Err(e) => {
                    tracing::error!(error = %e, "cannot open the search index; trying again");
                    Some(format!("the search index cannot be opened: {e}"))
                }
            },
        };
        state.set_error(why);
        match feed.take(generation, RETRY_AFTER) {
            Some(c) if c.closed => return,
            Some(c) => generation = c.generation,
            None => {}
        }
    };
    me.publish_pending();
    state.opened.store(true, Ordering::Release);
    // No step before this: a retry after a failure.
    let mut not_before: Option<Instant> = None;
    loop {
        let idle = me.want.is_empty();
        let wait = match (idle, not_before) {
            (true, _) => IDLE_WAIT,
            (false, Some(t)) => t.saturating_duration_since(Instant::now()),
            (false, None) => Duration::ZERO,
        };
        if let Some(c) = feed.take(generation, wait) {
            if c.closed {
                break;
            }
            generation = c.generation;
            for (key, end) in c.grown {
                me.grew(key, end);
            }
            if c.forgot
                && let Err(e) = me.forget()
            {
                tracing::warn!(error = %e, "the search index could not forget what the log forgot");
            }
            if idle && !me.want.is_empty() && not_before.is_none() {
                // Let more gather without waking for each commit.
                std::thread::park_timeout(LINGER);
                continue;
            }
        }
        if me.want.is_empty() {
            state.indexed.send_replace(Some(generation));
            continue;
        }
        if not_before.is_some_and(|t| Instant::now() < t) {
            continue;
        }
        not_before = None;
        if let Some(free) = dir.and_then(crate::sys::free_bytes)
            && free < PAUSE_BELOW_FREE_BYTES
        {
            state.set_error(Some(paused(free)));
            not_before = Some(Instant::now() + RETRY_AFTER);
            me.publish_pending();
            continue;
        }
        if let Err(e) = me.step() {
            tracing::warn!(error = %e, "indexing failed; trying again in {RETRY_AFTER:?}");
            state.set_error(Some(format!("indexing failed: {e}")));
            not_before = Some(Instant::now() + RETRY_AFTER);
        } else if state.error().is_some() {
            state.set_error(None);
        }
        me.publish_pending();
        if me.want.is_empty() {
            state.indexed.send_replace(Some(generation));
        }
    }
    tracing::debug!("search indexer finished");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_of(data: &[u8]) -> Run {
        Run { start: 100, end: 100 + data.len() as u64, data: data.to_vec(), times: vec![(100, 7)] }
    }

    #[test]
    fn segments_are_whole_lines_and_an_unfinished_one_is_partial() {
        let cut = cut_segments(&run_of(b"one\ntwo\nthr"), Tail::Partial);
        let got: Vec<_> = cut.segments.iter().map(|s| (s.start, s.end, s.partial)).collect();
        assert_eq!(got, [(100, 108, false), (108, 111, true)]);
        assert_eq!(cut.indexed_to, 111);
        let cut = cut_segments(&run_of(b"one\ntwo\nthr"), Tail::Ended);
        assert_eq!(cut.segments.last().map(|s| (s.end, s.partial)), Some((111, false)));
        let cut = cut_segments(&run_of(b"one\ntwo\nthr"), Tail::Wait);
        assert_eq!(cut.segments.len(), 1);
        assert_eq!(cut.indexed_to, 108, "the unfinished line waits");
    }

    #[test]
    fn a_segment_spans_at_most_a_minute_of_output() {
        let mut run = run_of(b"one\ntwo\nthree\n");
        // "two" came two minutes after "one", "three" just after.
        run.times = vec![(100, 0), (104, 120_000_000_000), (108, 120_000_000_001)];
        let cut = cut_segments(&run, Tail::Partial);
        let got: Vec<_> = cut.segments.iter().map(|s| (s.start, s.end)).collect();
        assert_eq!(got, [(100, 104), (104, 114)]);
    }

    #[test]
    fn long_output_is_cut_near_the_segment_size_on_line_breaks() {
        let line = [b"x".repeat(99), b"\n".to_vec()].concat();
        let data = line.repeat(1000);
        let cut = cut_segments(&run_of(&data), Tail::Partial);
        assert!(cut.segments.iter().all(|s| (s.end - s.start) % 100 == 0));
        assert!(cut.segments.iter().all(|s| s.end - s.start <= SEGMENT_BYTES as u64 + 100));
        assert_eq!(cut.segments.last().map(|s| s.end), Some(100 + 100_000));
        let endless = vec![b'y'; 3 * LONGEST_LINE];
        let cut = cut_segments(&run_of(&endless), Tail::Wait);
        assert!(cut.indexed_to > 100, "a line without end is still indexed, in pieces");
    }
}
