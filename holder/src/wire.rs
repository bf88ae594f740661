//! The holder's wire: the messages between `portald` and `portal-holder`,
//! and how they travel over a Unix stream socket with file descriptors.
//!
//! A message is a frame: its length (u32, little endian), how many
//! descriptors follow it (u8), then its JSON. Descriptors travel after the
//! frame in a one-byte message of their own (`SCM_RIGHTS`), so no read of
//! frame bytes ever touches the byte that carries them: the kernel never
//! merges a message with descriptors into a read of bytes sent before it.
//! Both sides read exactly the lengths they are told, never more.

use std::io::{IoSlice, IoSliceMut, Read as _, Write as _};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};

/// The protocol both sides speak. A daemon refuses a holder that speaks
/// another (and says which side to restart); it changes only when a message
/// changes meaning. 2: a hello may be refused ([`Event::Refused`]), and a
/// spawn may carry the program's journal, which the welcome gives back.
pub const PROTOCOL: u32 = 2;

/// Largest frame accepted: a spawn carries argv and environment, which Linux
/// bounds near 2 MiB together.
pub const MAX_FRAME_BYTES: usize = 8 << 20;

/// Most descriptors one message carries: a welcome sends a daemon every
/// program's in batches of this many (the kernel's limit is 253).
pub const MAX_FDS: usize = 64;

/// How long either side waits for the other to take or give a whole
/// message: the holder drops a daemon that stalls (its programs stay held
/// for the next one), and a daemon's call to a holder that stalls fails.
/// Both ends' timing, so it lives with their messages.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// How a program ended, as `waitpid` said.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exit {
    /// Exit code when it exited normally.
    pub code: Option<i32>,
    /// Signal number when a signal ended it.
    pub signal: Option<i32>,
}

/// What to start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spawn {
    /// The daemon's id for it.
    pub proc_id: u64,
    /// The executable, already resolved to a path.
    pub program: String,
    /// `argv[0]`.
    pub arg0: String,
    /// The rest of `argv`.
    pub args: Vec<String>,
    /// The whole environment.
    pub env: Vec<(String, String)>,
    /// Working directory.
    pub cwd: String,
    /// A terminal of this size (rows, columns), or pipes when `None`.
    pub pty: Option<(u16, u16)>,
    /// Whatever the daemon wants back when it adopts the program.
    pub meta: String,
}

/// From the daemon to the holder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    /// The first message: answered by [`Event::Welcome`] with everything held.
    Hello {
        /// The daemon's [`PROTOCOL`].
        protocol: u32,
    },
    /// Starts a program: answered by [`Event::Spawned`] (with its
    /// descriptors) or [`Event::SpawnFailed`]. The descriptors it
    /// carries are the program's journal (the daemon's record of what it
    /// read and accepted), kept for the next daemon.
    Spawn(Spawn),
    /// Replaces what the daemon gets back at adoption.
    SetMeta {
        /// Which program.
        proc_id: u64,
        /// The new value.
        meta: String,
    },
    /// Closes the holder's copy of a pipe program's input, so the program
    /// sees its end once the daemon closes its own.
    CloseInput {
        /// Which program.
        proc_id: u64,
    },
    /// Forgets a program the daemon has recorded as ended: its descriptors
    /// close.
    Release {
        /// Which program.
        proc_id: u64,
    },
}

/// One program the holder holds, as a new daemon learns of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// The daemon's id for it.
    pub proc_id: u64,
    /// Its pid.
    pub pid: u32,
    /// On a terminal (one descriptor: the primary) or on pipes (input if
    /// still open, then output and error).
    pub pty: bool,
    /// Whether the pipe to its input is still open (pipes only).
    pub input_open: bool,
    /// How it ended, if it did while no daemon was there to hear it.
    pub exit: Option<Exit>,
    /// What the daemon gave at spawn (or later).
    pub meta: String,
    /// How many descriptors of its journal follow its other ones.
    #[serde(default)]
    pub journal: u8,
}

/// From the holder to the daemon.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The answer to [`Request::Hello`]: every program held, whose
    /// descriptors follow in order.
    Welcome {
        /// The holder's [`PROTOCOL`].
        protocol: u32,
        /// The holder's pid (the parent of every program, and where their
        /// orphans are reparented).
        pid: u32,
        /// Every program held.
        held: Vec<Held>,
    },
    /// A program started; its descriptors follow (the PTY primary, or
    /// input, output and error).
    Spawned {
        /// Which program.
        proc_id: u64,
        /// Its pid.
        pid: u32,
    },
    /// A program could not be started.
    SpawnFailed {
        /// Which program.
        proc_id: u64,
        /// Why, as the OS said.
        error: String,
    },
    /// A program ended.
    Exited {
        /// Which program.
        proc_id: u64,
        /// How it ended: its exit code, or the signal that ended it.
        exit: Exit,
    },
    /// The answer to a [`Request::Hello`] the holder does not take: another
    /// daemon is attached and alive. The holder closes the connection after
    /// it; nothing changes for the attached daemon.
    Refused {
        /// Why, in words a daemon shows as they are.
        reason: String,
    },
    /// An orphan (a descendant of a program, reparented to the holder)
    /// ended and was reaped: it is no zombie.
    Reaped {
        /// Its pid.
        pid: u32,
        /// How it ended.
        exit: Exit,
    },
}

/// Writes one message and the descriptors that go with it.
///
/// # Errors
/// When the socket fails or the message cannot be encoded.
pub fn send<T: Serialize>(
    sock: &UnixStream,
    msg: &T,
    fds: &[BorrowedFd<'_>],
) -> std::io::Result<()> {
    let body = serde_json::to_vec(msg).map_err(std::io::Error::other)?;
    let len = u32::try_from(body.len()).map_err(std::io::Error::other)?;
    let count = u8::try_from(fds.len()).map_err(std::io::Error::other)?;
    let mut frame = Vec::with_capacity(5 + body.len());
    frame.extend_from_slice(&len.to_le_bytes());
    frame.push(count);
    frame.extend_from_slice(&body);
    (&*sock).write_all(&frame)?;
    if !fds.is_empty() {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(std::io::Error::other("too many descriptors for one message"));
        }
        let sent =
            rustix::net::sendmsg(sock, &[IoSlice::new(&[0])], &mut control, SendFlags::empty())?;
        if sent != 1 {
            return Err(std::io::Error::other("the descriptors' byte was not sent"));
        }
    }
    Ok(())
}

/// Reads one message and the descriptors that came with it. `Ok(None)` at a
/// clean end of the stream (between messages).
///
/// # Errors
/// When the socket fails, or a frame is too big, malformed or short of its
/// descriptors.
pub fn recv<T: for<'de> Deserialize<'de>>(
    sock: &UnixStream,
) -> std::io::Result<Option<(T, Vec<OwnedFd>)>> {
    let mut head = [0u8; 5];
    match (&*sock).read(&mut head[..1])? {
        0 => return Ok(None),
        _ => (&*sock).read_exact(&mut head[1..])?,
    }
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let count = usize::from(head[4]);
    if len > MAX_FRAME_BYTES || count > MAX_FDS {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes with {count} descriptors is too big"),
        ));
    }
    let mut body = vec![0u8; len];
    (&*sock).read_exact(&mut body)?;
    let msg = serde_json::from_slice(&body)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let mut fds = Vec::new();
    if count > 0 {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut byte = [0u8; 1];
        let got = rustix::net::recvmsg(
            sock.as_fd(),
            &mut [IoSliceMut::new(&mut byte)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        )?;
        if got.bytes != 1 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the stream ended before a message's descriptors",
            ));
        }
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = m {
                fds.extend(received);
            }
        }
        if fds.len() != count {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} descriptors arrived where {count} were announced", fds.len()),
            ));
        }
    }
    Ok(Some((msg, fds)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_descriptors_arrive_together_and_in_order() {
        let (a, b) = UnixStream::pair().unwrap();
        let file = tempfile::tempfile().unwrap();
        send(&a, &Request::Hello { protocol: PROTOCOL }, &[]).unwrap();
        let ev = Event::Spawned { proc_id: 7, pid: 42 };
        send(&a, &ev, &[file.as_fd(), file.as_fd()]).unwrap();
        send(&a, &Request::Release { proc_id: 7 }, &[]).unwrap();
        let (first, fds): (Request, _) = recv(&b).unwrap().unwrap();
        assert_eq!((first, fds.len()), (Request::Hello { protocol: PROTOCOL }, 0));
        let (second, fds): (Event, _) = recv(&b).unwrap().unwrap();
        assert_eq!((second, fds.len()), (ev, 2));
        let (third, fds): (Request, _) = recv(&b).unwrap().unwrap();
        assert_eq!((third, fds.len()), (Request::Release { proc_id: 7 }, 0));
        drop(a);
        assert!(recv::<Request>(&b).unwrap().is_none(), "a clean end between messages");
    }

    #[test]
    fn an_oversized_frame_is_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(&(u32::MAX).to_le_bytes()).unwrap();
        (&a).write_all(&[0]).unwrap();
        let err = recv::<Request>(&b).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
    }
}
