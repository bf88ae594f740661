//! Folding the WAL back into the database, and keeping it bounded.
//!
//! A checkpoint copies committed pages from the WAL into the database file
//! and syncs both; run by the writer (SQLite's default), it stalls every
//! commit behind it, and under bulk output that halves capture throughput.
//! Here the writer only appends to the WAL, and a `store-checkpoint` thread
//! with its own connection runs PASSIVE checkpoints (which never block the
//! writer or readers) each time half of [`Retention::wal_fold_bytes`] more
//! was written, and when the writer goes idle after a burst.
//!
//! A checkpoint running beside a busy writer never catches up with the
//! WAL's end (readers such as the search indexer and followers pin it
//! further back), and SQLite only rewinds the WAL once one does: left to
//! the thread, a flood grew the WAL to gigabytes. So once the WAL holds more
//! than the fold size, the writer runs a RESTART checkpoint itself: it
//! copies what the thread has not yet copied (little) and waits for the
//! readers still in the WAL, and the next commit starts the WAL over. SQLite
//! refuses a second checkpoint at once without even calling the busy
//! handler, so every checkpoint holds [`Checkpointer::lock`]: below twice the
//! fold size the writer skips its turn while the thread is copying; past it
//! the writer waits (backpressure: programs wait, nothing is lost), so the
//! WAL never holds more than twice the fold size and one batch. Its size is
//! read from SQLite (`wal_checkpoint(NOOP)`), not from the file, which keeps
//! its length after a rewind.
//!
//! After a burst, [`Checkpointer::idle`] folds the rest in and, once the
//! writer has rested [`TRUNCATE_AFTER_REST`], empties the WAL file with a
//! TRUNCATE checkpoint: at rest, the data directory holds the database and
//! next to nothing else. While output streams, the WAL file is cut back to
//! the fold size each time it rewinds.
//!
//! On a nearly full disk the writer folds the WAL with RESTART, never
//! TRUNCATE: the rewound file keeps the disk it holds, which another program
//! filling the disk cannot take, and the next commits are written there.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};

use rusqlite::Connection;

use super::error::StoreError;
use super::schema;
use crate::config::Retention;

/// Written bytes after which a writer going idle asks for a checkpoint even
/// below the fold size: the end of a burst is folded in at once, so the WAL
/// rewinds before the next burst instead of growing across them.
pub(crate) const IDLE_CHECKPOINT_BYTES: u64 = 8 << 20;

/// Quiet writes (a few rows now and then) are folded in at most this often.
pub(crate) const IDLE_CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Bytes of one WAL frame besides its page: the frame header.
const FRAME_HEADER_BYTES: u64 = 24;

/// How long the writer must rest before the WAL is emptied: far longer than
/// the pause between two batches of streaming output.
const TRUNCATE_AFTER_REST: std::time::Duration = std::time::Duration::from_millis(250);

/// How long emptying the WAL waits for a reader to finish before it gives
/// up until the next try: a writer arriving meanwhile waits this long at
/// most.
const TRUNCATE_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// Tries to empty the WAL after one burst (one per rest): a minute of
/// readers that never pause.
const TRUNCATE_TRIES: usize = 240;

/// What a checkpoint is asked to do.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// Copy what it can without blocking anyone (while output streams).
    Passive,
    /// Copy everything and empty the WAL file (the writer is idle).
    Truncate,
}

/// The writer's side of background checkpointing.
#[derive(Debug)]
pub(crate) struct Checkpointer {
    nudge: Option<SyncSender<Mode>>,
    thread: Option<std::thread::JoinHandle<()>>,
    since: u64,
    last_nudge: std::time::Instant,
    /// Held by whichever thread runs a checkpoint (see the module doc).
    lock: Arc<Mutex<()>>,
    /// The WAL is to be emptied at the next rest. A flag beside the
    /// channel: a request that finds the channel full (a PASSIVE queued)
    /// must not be lost, or a WAL grown by a burst stays at its size until
    /// the next write.
    truncate: Arc<AtomicBool>,
    /// WAL bytes past which the writer rewinds it (see
    /// [`Retention::wal_fold_bytes`]).
    fold: u64,
    /// Bytes of one WAL frame.
    frame: u64,
}

impl Checkpointer {
    /// Configures the writer connection and starts the checkpoint thread.
    pub(crate) fn start(
        writer: &Connection,
        path: &Path,
        retention: &Retention,
    ) -> Result<Self, StoreError> {
        let fold = retention.wal_fold_bytes();
        let page: i64 = writer.pragma_query_value(None, "page_size", |r| r.get(0))?;
        writer.pragma_update(None, "wal_autocheckpoint", 0)?;
        // A rewound WAL file is cut back to the fold size.
        writer.pragma_update(
            None,
            "journal_size_limit",
            i64::try_from(fold).unwrap_or(i64::MAX),
        )?;
        let conn = Connection::open(path)?;
        schema::configure(&conn)?;
        let lock = Arc::new(Mutex::new(()));
        let truncate = Arc::new(AtomicBool::new(false));
        let (nudge, rx) = sync_channel::<Mode>(1);
        let thread = std::thread::Builder::new()
            .name("store-checkpoint".into())
            .spawn({
                let lock = Arc::clone(&lock);
                let truncate = Arc::clone(&truncate);
                move || background(&conn, &rx, &lock, &truncate)
            })
            .map_err(|e| StoreError::Corrupt(format!("cannot start the checkpoint thread: {e}")))?;
        Ok(Self {
            nudge: Some(nudge),
            thread: Some(thread),
            since: 0,
            last_nudge: std::time::Instant::now(),
            lock,
            truncate,
            fold,
            frame: u64::try_from(page).unwrap_or(4096) + FRAME_HEADER_BYTES,
        })
    }

    /// Called after each commit with the bytes it wrote (estimated): asks
    /// the thread to copy every half fold size, and rewinds the WAL on the
    /// writer once it holds more than the fold size (see the module doc).
    pub(crate) fn committed(&mut self, writer: &Connection, bytes: u64) {
        self.since += bytes;
        if self.since >= self.fold / 2 {
            self.request(Mode::Passive);
        }
        let wal = self.wal_bytes(writer);
        if wal <= self.fold {
            return;
        }
        let guard = if wal > 2 * self.fold {
            tracing::debug!(wal, "the WAL passed twice its fold size; waiting to rewind it");
            Some(self.lock.lock().unwrap_or_else(PoisonError::into_inner))
        } else {
            match self.lock.try_lock() {
                Ok(g) => Some(g),
                Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            }
        };
        if guard.is_some() {
            checkpoint(writer, "RESTART");
        }
    }

    /// Bytes the WAL holds now (frames since it last rewound), as SQLite
    /// counts them: the file keeps its length after a rewind.
    pub(crate) fn wal_bytes(&self, conn: &Connection) -> u64 {
        let frames =
            conn.query_row("PRAGMA wal_checkpoint(NOOP)", [], |r| r.get::<_, i64>(1)).unwrap_or(0);
        u64::try_from(frames).unwrap_or(0) * self.frame
    }

    /// Folds the WAL in on the writer and rewinds it: with RESTART, which
    /// keeps the file and the disk it holds (on a nearly full disk, where
    /// that room is what later commits fit in), or with TRUNCATE, which
    /// gives it back.
    pub(crate) fn fold(&self, writer: &Connection, keep_file: bool) {
        let _g = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        if keep_file {
            checkpoint(writer, "RESTART");
        } else {
            checkpoint(writer, "TRUNCATE");
        }
    }

    /// Called after housekeeping writes (deleting forgotten history) with
    /// the bytes they wrote (estimated), so the WAL they
    /// grew is emptied at the next idle moment too.
    pub(crate) fn housekeeping(&mut self, bytes: u64) {
        self.since += bytes;
    }

    /// Called when the writer has nothing queued.
    pub(crate) fn idle(&mut self) {
        if self.since >= IDLE_CHECKPOINT_BYTES
            || (self.since > 0 && self.last_nudge.elapsed() >= IDLE_CHECKPOINT_EVERY)
        {
            self.request(Mode::Truncate);
        }
    }

    fn request(&mut self, mode: Mode) {
        self.since = 0;
        self.last_nudge = std::time::Instant::now();
        if matches!(mode, Mode::Truncate) {
            self.truncate.store(true, Ordering::Release);
        }
        if let Some(nudge) = &self.nudge {
            match nudge.try_send(mode) {
                // Full: the thread wakes for what is queued, and finds the
                // flag.
                Ok(()) | Err(TrySendError::Full(_)) => {}
                Err(TrySendError::Disconnected(_)) => self.nudge = None,
            }
        }
    }

    /// Stops the thread (after its current checkpoint).
    pub(crate) fn stop(&mut self) {
        self.nudge = None;
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the checkpoint thread panicked");
        }
    }
}

/// Runs a checkpoint of `mode` on `conn`; whether it finished is for the
/// next look at the WAL's size to tell.
fn checkpoint(conn: &Connection, mode: &str) -> bool {
    match conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| r.get::<_, i64>(0)) {
        Ok(busy) => busy == 0,
        Err(e) => {
            tracing::warn!(error = %e, mode, "checkpoint failed");
            false
        }
    }
}

/// The `store-checkpoint` thread: PASSIVE checkpoints when asked, and after
/// a burst, once the writer has rested, a TRUNCATE that empties the WAL.
fn background(conn: &Connection, rx: &Receiver<Mode>, lock: &Mutex<()>, truncate: &AtomicBool) {
    let held = || lock.lock().unwrap_or_else(PoisonError::into_inner);
    // Emptying the WAL waits for readers still reading it (the search
    // indexer reads the log often), and a writer that starts meanwhile
    // waits behind it: it waits only briefly, and tries again after another
    // rest, until it succeeds or the writer is busy again.
    let truncated = || {
        let _g = held();
        let _ = conn.busy_timeout(TRUNCATE_WAIT);
        let busy = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0));
        let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
        match busy {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => {
                tracing::warn!(error = %e, "emptying the WAL failed");
                true
            }
        }
    };
    // Emptying is owed until it succeeds, whatever comes between.
    let mut owed = false;
    let mut next = rx.recv().ok();
    while let Some(mode) = next.take() {
        {
            let _g = held();
            checkpoint(conn, "PASSIVE");
        }
        owed |= matches!(mode, Mode::Truncate) | truncate.swap(false, Ordering::AcqRel);
        if owed {
            // Emptying the WAL blocks a writer that starts meanwhile: only
            // once the writer has rested. A writer between two batches of a
            // stream sends again within this time; then it is tried after
            // the next rest.
            for _ in 0..TRUNCATE_TRIES {
                match rx.recv_timeout(TRUNCATE_AFTER_REST) {
                    Ok(again) => {
                        next = Some(again);
                        break;
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        if truncated() {
                            owed = false;
                            break;
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        }
        if next.is_none() {
            next = rx.recv().ok();
        }
    }
}
