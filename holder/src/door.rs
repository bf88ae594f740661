//! The holder's door: its socket's path, kept bound, and the connections
//! that have not yet proved themselves a daemon.
//!
//! A connection is only a newcomer until it sends a complete hello of the
//! holder's protocol within [`HELLO_TIMEOUT`]: it is read without blocking,
//! a few bytes at a time, so a stranger that connects and says nothing, or
//! says something else, never stalls the loop nor touches the daemon that is
//! attached. Whether a hello is let in is the loop's decision (`serve.rs`).

use std::io::{ErrorKind, Read as _};
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::wire::{self, Event, Request};

/// A newcomer that has not said a complete hello within this long is closed:
/// a daemon says it the moment it connects.
pub const HELLO_TIMEOUT: Duration = wire::IO_TIMEOUT;

/// A hello is a few dozen bytes; anything longer before it is complete is
/// not a daemon.
const MAX_HELLO_BYTES: usize = 4096;

/// Newcomers waiting at once: a daemon starting, perhaps a second one
/// racing it; beyond this a connection is closed at once, so a flood of
/// silent connections costs the holder a bounded poll set.
pub const MAX_NEWCOMERS: usize = 8;

/// What a newcomer said so far.
pub enum Heard {
    /// Nothing complete yet.
    Waiting,
    /// A hello of this protocol.
    Hello(u32),
    /// Not a daemon (closed, too long, not a hello): why.
    Bad(&'static str),
}

/// A connection that has not yet said hello.
pub struct Newcomer {
    pub(crate) stream: UnixStream,
    /// Its process, as the kernel says (for a refusal's message).
    pub(crate) pid: u32,
    buf: Vec<u8>,
    since: Instant,
}

impl Newcomer {
    /// Takes an accepted connection: only this user's, read without blocking.
    pub fn new(stream: UnixStream) -> Option<Self> {
        let cred = rustix::net::sockopt::socket_peercred(&stream).ok()?;
        // The socket is private too; this is the second lock on the door.
        if cred.uid != rustix::process::getuid() || stream.set_nonblocking(true).is_err() {
            return None;
        }
        let pid = u32::try_from(cred.pid.as_raw_nonzero().get()).unwrap_or(0);
        Some(Self { stream, pid, buf: Vec::new(), since: Instant::now() })
    }

    /// Whether it has had its time to say hello.
    pub fn expired(&self) -> bool {
        self.since.elapsed() > HELLO_TIMEOUT
    }

    /// Reads what has arrived, without blocking.
    pub fn read(&mut self) -> Heard {
        let mut chunk = [0u8; 512];
        loop {
            match (&self.stream).read(&mut chunk) {
                Ok(0) => return Heard::Bad("closed before its hello"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Heard::Bad("the connection failed"),
            }
            if self.buf.len() > MAX_HELLO_BYTES {
                return Heard::Bad("too long for a hello");
            }
        }
        let Some(head) = self.buf.get(..5) else { return Heard::Waiting };
        let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
        if head[4] != 0 || len > MAX_HELLO_BYTES {
            return Heard::Bad("not a hello frame");
        }
        let Some(body) = self.buf.get(5..5 + len) else { return Heard::Waiting };
        if self.buf.len() > 5 + len {
            // A daemon sends nothing more until it is welcomed.
            return Heard::Bad("more than a hello before the welcome");
        }
        match serde_json::from_slice::<Request>(body) {
            Ok(Request::Hello { protocol }) => Heard::Hello(protocol),
            _ => Heard::Bad("the first message was not a hello"),
        }
    }

    /// Turns it away with `reason`, which a daemon shows as it is.
    /// Best effort: a few hundred bytes always fit the socket's buffer.
    pub fn refuse(self, reason: String) {
        let _ = wire::send(&self.stream, &Event::Refused { reason }, &[]);
    }

    /// The connection, blocking again with the holder's timeouts, for the
    /// daemon it proved to be.
    pub fn into_daemon(self) -> Option<UnixStream> {
        let s = self.stream;
        (s.set_nonblocking(false).is_ok()
            && s.set_read_timeout(Some(wire::IO_TIMEOUT)).is_ok()
            && s.set_write_timeout(Some(wire::IO_TIMEOUT)).is_ok())
        .then_some(s)
    }
}

/// Where the holder listens, and the lock that makes it the only holder
/// there: when the path is deleted (someone wiped the runtime directory),
/// the holder binds it again, so the next daemon finds the programs it holds
/// instead of starting an empty holder beside it.
pub struct Address {
    socket: PathBuf,
    lock_path: PathBuf,
    /// Held for the holder's life; a lock taken again is added, never
    /// swapped, so no moment passes without one.
    locks: Vec<std::fs::File>,
    /// The socket file as bound: another file at the path is not ours.
    inode: (u64, u64),
}

impl Address {
    /// The path `listener` was bound at, with the lock (at `lock_path`)
    /// already taken.
    ///
    /// # Errors
    /// When the socket file cannot be read back.
    pub fn new(socket: &Path, lock_path: &Path, lock: std::fs::File) -> std::io::Result<Self> {
        let meta = std::fs::symlink_metadata(socket)?;
        Ok(Self {
            socket: socket.to_owned(),
            lock_path: lock_path.to_owned(),
            locks: vec![lock],
            inode: (meta.dev(), meta.ino()),
        })
    }

    /// The socket's path.
    #[must_use]
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// A new listener when the socket file is gone and could be bound again;
    /// `None` while it is in place (or another file took its place: then
    /// someone else serves there, and the holder does not fight it).
    pub fn rebind_if_gone(&mut self) -> Option<UnixListener> {
        match std::fs::symlink_metadata(&self.socket) {
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            _ => return None,
        }
        self.bind_again().ok()
    }

    fn bind_again(&mut self) -> std::io::Result<UnixListener> {
        if let Some(dir) = self.socket.parent() {
            // A wiped runtime directory is made again, private as before.
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        }
        // The lock file went with the directory: taken again first, so a
        // holder started meanwhile cannot take it too.
        if std::fs::symlink_metadata(&self.lock_path).is_err() {
            let lock = take_lock(&self.lock_path)?
                .ok_or_else(|| std::io::Error::other("another holder took the lock"))?;
            self.locks.push(lock);
        }
        let listener = UnixListener::bind(&self.socket)?;
        std::fs::set_permissions(&self.socket, std::fs::Permissions::from_mode(0o600))?;
        listener.set_nonblocking(true)?;
        let meta = std::fs::symlink_metadata(&self.socket)?;
        self.inode = (meta.dev(), meta.ino());
        Ok(listener)
    }

    /// Removes the socket file, if it is still the one this holder bound.
    pub fn remove(&self) {
        if std::fs::symlink_metadata(&self.socket).is_ok_and(|m| (m.dev(), m.ino()) == self.inode) {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

/// Opens and locks the holder's lock file; `None` when another holder has
/// it.
///
/// # Errors
/// When the file cannot be opened.
pub fn take_lock(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    match rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(Some(lock)),
        Err(_) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn a_hello_is_heard_whole_and_anything_else_is_not_a_daemon() {
        let (a, b) = UnixStream::pair().unwrap();
        let mut n = Newcomer::new(b).unwrap();
        assert!(matches!(n.read(), Heard::Waiting));
        wire::send(&a, &Request::Hello { protocol: 9 }, &[]).unwrap();
        assert!(matches!(n.read(), Heard::Hello(9)));
        // A frame that is not a hello, and one too long to be one.
        let (mut c, d) = UnixStream::pair().unwrap();
        c.write_all(b"\x02\x00\x00\x00\x00{}").unwrap();
        assert!(matches!(Newcomer::new(d).unwrap().read(), Heard::Bad(_)));
        let (mut e, f) = UnixStream::pair().unwrap();
        e.write_all(&u32::MAX.to_le_bytes()).unwrap();
        e.write_all(&[0]).unwrap();
        assert!(matches!(Newcomer::new(f).unwrap().read(), Heard::Bad(_)));
    }
}
