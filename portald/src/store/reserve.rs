//! Room kept back for a full disk.
//!
//! On a really full filesystem SQLite cannot even delete: a delete writes
//! pages to the WAL too, so trimming the oldest history to make room fails
//! with the same SQLITE_FULL as the insert it was meant to help. A file of
//! [`RESERVE_BYTES`] beside the database is that room: the writer deletes it
//! when a commit meets a full disk, folds the WAL in, trims, and commits;
//! once there is space again it makes the file anew.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::DISK_RESERVE_BYTES;

/// Room set aside (see [`DISK_RESERVE_BYTES`]).
#[expect(clippy::cast_possible_truncation, reason = "16 MiB")]
pub(crate) const RESERVE_BYTES: usize = DISK_RESERVE_BYTES as usize;

/// How often a missing reserve is made anew while the disk stays full.
const RESTORE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// The reserve file.
#[derive(Debug)]
pub(crate) struct Reserve {
    path: PathBuf,
    /// The file is there, whole.
    held: Arc<AtomicBool>,
    /// A thread is writing it.
    making: Arc<AtomicBool>,
    last_try: Option<std::time::Instant>,
}

impl Reserve {
    /// The reserve beside `database`, made now if it is missing and there
    /// is room (output may fill the disk the moment the daemon starts).
    pub(crate) fn new(database: &Path) -> Self {
        let mut name = database.as_os_str().to_owned();
        name.push(".reserve");
        let path = PathBuf::from(name);
        let mut held = path.metadata().is_ok_and(|m| m.len() >= RESERVE_BYTES as u64);
        if !held {
            match make(&path) {
                Ok(()) => held = true,
                Err(e) => {
                    let _ = std::fs::remove_file(&path);
                    tracing::warn!(path = %path.display(), error = %e, "no room for the reserve");
                }
            }
        }
        Self {
            path,
            held: Arc::new(AtomicBool::new(held)),
            making: Arc::new(AtomicBool::new(false)),
            last_try: None,
        }
    }

    /// Deletes the reserve beside `database` without opening anything; true
    /// when there was one (room for a daemon starting on a full disk).
    pub(crate) fn new_released(database: &Path) -> bool {
        let mut name = database.as_os_str().to_owned();
        name.push(".reserve");
        std::fs::remove_file(PathBuf::from(name)).is_ok()
    }

    /// Whether the room is set aside now.
    pub(crate) fn held(&self) -> bool {
        self.held.load(Ordering::Acquire)
    }

    /// Gives the room back to the filesystem. True when it was held.
    pub(crate) fn release(&mut self) -> bool {
        if !self.held.swap(false, Ordering::AcqRel) {
            return false;
        }
        match std::fs::remove_file(&self.path) {
            Ok(()) => {
                tracing::warn!(path = %self.path.display(), "the disk is full: released the reserve");
                true
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot release the reserve");
                false
            }
        }
    }

    /// Makes the reserve anew if it is missing, at most every
    /// [`RESTORE_EVERY`], on a thread of its own (16 MiB written and synced
    /// is no work for the writer); a disk still too full leaves no partial
    /// file.
    pub(crate) fn restore(&mut self) {
        if self.held() || self.making.load(Ordering::Acquire) {
            return;
        }
        if self.last_try.is_some_and(|t| t.elapsed() < RESTORE_EVERY) {
            return;
        }
        self.last_try = Some(std::time::Instant::now());
        self.making.store(true, Ordering::Release);
        let (path, held, making) =
            (self.path.clone(), Arc::clone(&self.held), Arc::clone(&self.making));
        let spawned = std::thread::Builder::new().name("store-reserve".into()).spawn(move || {
            match make(&path) {
                Ok(()) => held.store(true, Ordering::Release),
                Err(e) => {
                    let _ = std::fs::remove_file(&path);
                    tracing::debug!(error = %e, "no room for the reserve yet");
                }
            }
            making.store(false, Ordering::Release);
        });
        if spawned.is_err() {
            self.making.store(false, Ordering::Release);
        }
    }
}

impl Reserve {
    /// Makes the reserve anew if it is missing, now, on this thread: at
    /// close, after the WAL was emptied, the last chance to set room aside
    /// for the next start, which may meet a disk that filled meanwhile.
    pub(crate) fn restore_now(&mut self) {
        if self.held() || self.making.load(Ordering::Acquire) {
            return;
        }
        match make(&self.path) {
            Ok(()) => self.held.store(true, Ordering::Release),
            Err(e) => {
                let _ = std::fs::remove_file(&self.path);
                tracing::warn!(path = %self.path.display(), error = %e, "no room for the reserve at close");
            }
        }
    }
}

/// Writes the reserve file: written, not just sized, since a sparse file
/// would set nothing aside. Not synced: filesystems count written blocks as
/// used at once (tmpfs allocates them, ext4 and xfs reserve them), and a
/// sync would cost the daemon's first start tens of milliseconds.
fn make(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)?;
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..RESERVE_BYTES / zeros.len() {
        f.write_all(&zeros)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_made_released_and_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("portal.db");
        let mut r = Reserve::new(&db);
        let file = dir.path().join("portal.db.reserve");
        assert!(r.held());
        assert_eq!(file.metadata().unwrap().len(), RESERVE_BYTES as u64);
        assert!(r.release());
        assert!(!file.exists());
        assert!(!r.release(), "nothing left to release");
        r.last_try = None;
        r.restore();
        while r.making.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        assert!(r.held() && file.exists());
    }
}
