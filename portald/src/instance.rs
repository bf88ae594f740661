//! One daemon per database: the lock in the data directory, and the checks
//! that make what a predecessor handed over (`PORTAL_HANDOVER`) trustworthy.
//!
//! The lock sits beside the database it protects, not beside the socket: a
//! runtime directory wiped under a running daemon (a `tmpfs` cleaned, a
//! `rm -rf /run/user/…`) takes any file there with it, and a lock that can
//! vanish lets a second daemon open the same log. The data directory is
//! where the log is; whoever holds `portal.db.lock` owns it. The file is
//! never deleted (deleting a lock file lets one daemon lock the old inode
//! and another a new one); it holds the owner's pid, for the error a second
//! daemon prints.
//!
//! A handover names descriptors by number in an environment variable, which
//! anything may set or leak: a listener is used only if it is a listening
//! Unix socket bound to this daemon's socket path, and a lock only if it is
//! this data directory's lock file and its `flock` is held through it (a
//! lock the predecessor held through that same open file; taking it through
//! another fails while anyone holds it).

use std::fs::File;
use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use crate::sys;

/// The lock's name in the data directory, beside `portal.db`.
pub(crate) const LOCK_FILE: &str = "portal.db.lock";

/// How many times taking the lock is tried when the file is replaced
/// between opening and locking it (someone deleted it meanwhile): once is
/// the rule, a second time covers one deletion, a third a rare double.
const LOCK_ATTEMPTS: usize = 3;

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
    /// Another process holds it.
    #[error("another portald{} already runs on the database in {}: use it (portal-cli daemon status), or stop it first", holder.map(|p| format!(" (pid {p})")).unwrap_or_default(), dir.display())]
    Held {
        /// The data directory.
        dir: PathBuf,
        /// The pid the lock file names, when it names one.
        holder: Option<u32>,
    },
    /// The file could not be opened or locked.
    #[error("cannot lock {}: {source}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
}

/// The lock file of a data directory.
#[must_use]
pub(crate) fn lock_path(data_dir: &Path) -> PathBuf {
    data_dir.join(LOCK_FILE)
}

/// Takes the data directory's lock, writing this process's pid into it.
///
/// # Errors
/// [`LockError::Held`] when another process holds it; [`LockError::Io`].
pub(crate) fn take(data_dir: &Path) -> Result<File, LockError> {
    let path = lock_path(data_dir);
    let io = |source| LockError::Io { path: path.clone(), source };
    for _ in 0..LOCK_ATTEMPTS {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        if !sys::try_lock_exclusive(&file).map_err(io)? {
            let holder = std::fs::read_to_string(&path).ok().and_then(|s| s.trim().parse().ok());
            return Err(LockError::Held { dir: data_dir.to_path_buf(), holder });
        }
        // Locked, but maybe a file somebody deleted since it was opened: the
        // lock is only worth something on the file the path names.
        if !names_file(&path, &file) {
            continue;
        }
        file.set_len(0).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        return Ok(file);
    }
    Err(io(std::io::Error::other("the lock file keeps being replaced while it is locked")))
}

/// Whether `path` names the very file `file` has open.
fn names_file(path: &Path, file: &File) -> bool {
    match (std::fs::metadata(path), file.metadata()) {
        (Ok(p), Ok(f)) => (p.dev(), p.ino()) == (f.dev(), f.ino()),
        _ => false,
    }
}

/// Checks a handed-over lock: this data directory's lock file, held
/// through this descriptor.
///
/// # Errors
/// Why it is not, in words for the log.
pub(crate) fn verify_lock(fd: OwnedFd, data_dir: &Path) -> Result<File, String> {
    let file = File::from(fd);
    let path = lock_path(data_dir);
    if !names_file(&path, &file) {
        return Err(format!("it is not the lock file {}", path.display()));
    }
    match sys::try_lock_exclusive(&file) {
        Ok(true) => Ok(file),
        Ok(false) => Err(format!("another process holds the lock {}", path.display())),
        Err(e) => Err(format!("it cannot be locked: {e}")),
    }
}

/// Checks a handed-over listener: a listening Unix socket bound to
/// `socket`.
///
/// # Errors
/// Why it is not, in words for the log.
pub(crate) fn verify_listener(fd: &OwnedFd, socket: &Path) -> Result<(), String> {
    match sys::listening_unix_path(fd) {
        Some(path) if path == socket => Ok(()),
        Some(path) => Err(format!("it listens on {}, not {}", path.display(), socket.display())),
        None => Err("it is not a listening Unix socket".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd as _;

    use super::*;

    #[test]
    fn a_second_taker_is_refused_and_told_the_owners_pid() {
        let dir = tempfile::tempdir().unwrap();
        let _held = take(dir.path()).unwrap();
        match take(dir.path()) {
            Err(LockError::Held { holder, .. }) => assert_eq!(holder, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
    }

    #[test]
    fn a_handed_over_lock_must_be_this_directorys_and_held_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let held = take(dir.path()).unwrap();
        // The predecessor's own descriptor (a duplicate shares its lock).
        let dup = held.as_fd().try_clone_to_owned().unwrap();
        assert!(verify_lock(dup, dir.path()).is_ok());
        // Another open of the same file: the lock is not held through it.
        let other = File::open(lock_path(dir.path())).unwrap();
        let err = verify_lock(other.into(), dir.path()).unwrap_err();
        assert!(err.contains("another process holds"), "{err}");
        // Some other file altogether.
        let stray = File::create(dir.path().join("stray")).unwrap();
        let err = verify_lock(stray.into(), dir.path()).unwrap_err();
        assert!(err.contains("not the lock file"), "{err}");
    }

    #[test]
    fn a_handed_over_listener_must_listen_on_this_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let fd: OwnedFd = listener.into();
        assert_eq!(verify_listener(&fd, &path), Ok(()));
        let err = verify_listener(&fd, &dir.path().join("other.sock")).unwrap_err();
        assert!(err.contains("listens on"), "{err}");
        let file: OwnedFd = File::create(dir.path().join("f")).unwrap().into();
        assert!(verify_listener(&file, &path).is_err());
    }
}
