//! Folding the WAL back into the database, off the writer's path.
//!
//! A checkpoint copies committed pages from the WAL into the database file
//! and syncs both; run by the writer (SQLite's default), it stalls every
//! commit behind it, and under bulk output that halves capture throughput.
//! Here the writer only appends to the WAL, and a `store-checkpoint` thread
//! with its own connection runs PASSIVE checkpoints (which never block the
//! writer or readers) each time [`CHECKPOINT_EVERY_BYTES`] more were written,
//! and when the writer goes idle after a burst.
//!
//! A checkpoint running beside a busy writer may never catch up with the
//! WAL's end, and SQLite only rewinds the WAL once it does; if the WAL file
//! passes [`WAL_LIMIT_BYTES`] the writer tries a RESTART checkpoint itself
//! (which rewinds the WAL), at most once per [`CHECKPOINT_EVERY_BYTES`]; it
//! returns at once when the background one holds the checkpoint lock. After
//! a burst, [`Checkpointer::idle`] folds the rest in and, once the writer
//! has rested [`TRUNCATE_AFTER_REST`], empties the WAL file with a TRUNCATE
//! checkpoint: at rest, the data directory holds the database and next to
//! nothing else. While output
//! streams, the WAL file is cut back to [`WAL_KEEP_BYTES`] each time it
//! rewinds.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};

use rusqlite::Connection;

use super::{StoreError, schema};

/// Written bytes (estimated) between two checkpoints: a few hundred
/// milliseconds of bulk output, and a WAL small enough to fold quickly.
pub(crate) const CHECKPOINT_EVERY_BYTES: u64 = 64 << 20;

/// Written bytes after which a writer going idle asks for a checkpoint even
/// below [`CHECKPOINT_EVERY_BYTES`]: the end of a burst is folded in at once,
/// so the WAL rewinds before the next burst instead of growing across them.
pub(crate) const IDLE_CHECKPOINT_BYTES: u64 = 8 << 20;

/// Quiet writes (a few rows now and then) are folded in at most this often.
pub(crate) const IDLE_CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// WAL size at which the writer checkpoints itself.
pub(crate) const WAL_LIMIT_BYTES: u64 = 512 << 20;

/// What the WAL file is cut back to after it rewinds while output streams:
/// one checkpoint interval, so a steady stream reuses the file instead of
/// regrowing it, and the disk holds at most that much beyond the log.
pub(crate) const WAL_KEEP_BYTES: i64 = 64 << 20;

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
    wal: PathBuf,
    since: u64,
    last_nudge: std::time::Instant,
}

impl Checkpointer {
    /// Configures the writer connection and starts the checkpoint thread.
    pub(crate) fn start(writer: &Connection, path: &Path) -> Result<Self, StoreError> {
        writer.pragma_update(None, "wal_autocheckpoint", 0)?;
        writer.pragma_update(None, "journal_size_limit", WAL_KEEP_BYTES)?;
        let conn = Connection::open(path)?;
        schema::configure(&conn)?;
        let (nudge, rx) = sync_channel::<Mode>(1);
        let thread = std::thread::Builder::new()
            .name("store-checkpoint".into())
            .spawn(move || {
                let run = |sql: &str| {
                    if let Err(e) = conn.query_row(sql, [], |_| Ok(())) {
                        tracing::warn!(error = %e, sql, "background checkpoint failed");
                    }
                };
                // Emptying the WAL waits for readers still reading it (the
                // search indexer reads the log often), and a writer that
                // starts meanwhile waits behind it: it waits only briefly,
                // and tries again after another rest, until it succeeds or
                // the writer is busy again.
                let truncated = || {
                    let _ = conn.busy_timeout(TRUNCATE_WAIT);
                    let busy = conn
                        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0));
                    let _ = conn.busy_timeout(std::time::Duration::from_secs(5));
                    match busy {
                        Ok(busy) => busy == 0,
                        Err(e) => {
                            tracing::warn!(error = %e, "emptying the WAL failed");
                            true
                        }
                    }
                };
                let mut next = rx.recv().ok();
                while let Some(mode) = next.take() {
                    run("PRAGMA wal_checkpoint(PASSIVE)");
                    if matches!(mode, Mode::Truncate) {
                        // Emptying the WAL blocks a writer that starts
                        // meanwhile: only once the writer has rested. A
                        // writer between two batches of a stream asks again
                        // within this time; then this one is skipped.
                        for _ in 0..TRUNCATE_TRIES {
                            match rx.recv_timeout(TRUNCATE_AFTER_REST) {
                                Ok(again) => {
                                    next = Some(again);
                                    break;
                                }
                                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                                    if truncated() {
                                        break;
                                    }
                                }
                                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                            }
                        }
                    }
                    if next.is_none() {
                        next = rx.recv().ok();
                    }
                }
            })
            .map_err(|e| StoreError::Corrupt(format!("cannot start the checkpoint thread: {e}")))?;
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        Ok(Self {
            nudge: Some(nudge),
            thread: Some(thread),
            wal: wal.into(),
            since: 0,
            last_nudge: std::time::Instant::now(),
        })
    }

    /// Called after each commit with the bytes it wrote (estimated).
    pub(crate) fn committed(&mut self, writer: &Connection, bytes: u64) {
        self.since += bytes;
        if self.since < CHECKPOINT_EVERY_BYTES {
            return;
        }
        self.request(Mode::Passive);
        let wal = std::fs::metadata(&self.wal).map_or(0, |m| m.len());
        if wal > WAL_LIMIT_BYTES {
            tracing::debug!(wal, "the WAL outgrew its limit; checkpointing on the writer");
            if let Err(e) = writer.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(())) {
                tracing::warn!(error = %e, "checkpoint failed");
            }
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
        if let Some(nudge) = &self.nudge {
            match nudge.try_send(mode) {
                // Full: a checkpoint is already due; the next idle one
                // empties the WAL.
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
