//! The daemon's side of the holder: connect (starting a holder when none
//! answers), learn what it holds, spawn through it, and hear every exit.
//!
//! Requests are written under one lock; a reader thread takes every event
//! and answers the spawn waiting for it or hands an exit to the daemon's
//! callback. Spawns are one at a time (the holder forks them one at a time
//! anyway), so a spawn's answer is the next `Spawned`/`SpawnFailed`.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::wire::{self, Event, Exit, Held, Request, Spawn};

/// How long a daemon waits for a holder it started to listen.
const START_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the holder cannot be used.
#[derive(Debug)]
pub enum HolderError {
    /// Nothing answers and no holder could be started.
    Start(String),
    /// The holder speaks another protocol.
    Protocol {
        /// The holder's.
        holder: u32,
    },
    /// The holder turned this daemon away (another one is attached).
    Refused(String),
    /// The connection failed.
    Io(std::io::Error),
}

impl std::fmt::Display for HolderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Start(why) => write!(f, "cannot start portal-holder: {why}"),
            Self::Protocol { holder } => write!(
                f,
                "the running portal-holder speaks protocol {holder}, this portald {}: stop every program (portal-cli daemon stop) so that a new holder starts",
                wire::PROTOCOL
            ),
            Self::Refused(why) => write!(f, "portal-holder refused this portald: {why}"),
            Self::Io(e) => write!(f, "talking to portal-holder: {e}"),
        }
    }
}

impl std::error::Error for HolderError {}

impl From<std::io::Error> for HolderError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

/// A program the holder held when this daemon connected, with its
/// descriptors (the PTY primary, or input if open, output and error) and
/// the journal its spawn gave the holder.
#[derive(Debug)]
pub struct Adoptable {
    /// What the holder knows of it.
    pub held: Held,
    /// Its descriptors.
    pub fds: Vec<OwnedFd>,
    /// Its journal's descriptors, as its spawn carried them.
    pub journal: Vec<OwnedFd>,
}

/// What the holder reports on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    /// A program ended.
    Exited {
        /// Which program.
        proc_id: u64,
        /// How it ended: its exit code, or the signal that ended it.
        exit: Exit,
    },
    /// An orphan of a program's tree ended and was reaped.
    OrphanReaped {
        /// Its pid.
        pid: u32,
        /// How it ended: its exit code, or the signal that ended it.
        exit: Exit,
    },
    /// The connection ended: the holder died (every program it held was
    /// killed with it), or this client was dropped. Nothing more comes.
    Gone,
}

/// Called with everything the holder reports on its own.
pub type OnNotice = Box<dyn Fn(Notice) + Send + Sync>;

/// A spawn's answer, with the process it is for.
type SpawnAnswer = (u64, Result<(u32, Vec<OwnedFd>), String>);

/// A connection to the holder.
pub struct Client {
    sock: UnixStream,
    write: Mutex<()>,
    spawns: Mutex<()>,
    answers: Mutex<mpsc::Receiver<SpawnAnswer>>,
    pid: u32,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("holder_pid", &self.pid).finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to the holder at `socket`, starting `binary` when nothing
    /// answers; returns the client and what the holder held.
    ///
    /// # Errors
    /// When no holder can be reached or started, or it speaks another
    /// protocol.
    pub fn connect(
        socket: &Path,
        binary: &Path,
        on_notice: OnNotice,
    ) -> Result<(Arc<Self>, Vec<Adoptable>), HolderError> {
        let sock = match UnixStream::connect(socket) {
            Ok(s) => s,
            Err(_) => start(socket, binary)?,
        };
        sock.set_read_timeout(Some(wire::IO_TIMEOUT))?;
        wire::send(&sock, &Request::Hello { protocol: wire::PROTOCOL }, &[])?;
        let (protocol, pid, held) = match wire::recv::<Event>(&sock)? {
            Some((Event::Welcome { protocol, pid, held }, _)) => (protocol, pid, held),
            Some((Event::Refused { reason }, _)) => return Err(HolderError::Refused(reason)),
            _ => {
                return Err(HolderError::Io(std::io::Error::other(
                    "the holder did not welcome us",
                )));
            }
        };
        if protocol != wire::PROTOCOL {
            return Err(HolderError::Protocol { holder: protocol });
        }
        let wanted: usize = held.iter().map(fd_count).sum();
        let mut fds: Vec<OwnedFd> = Vec::with_capacity(wanted);
        while fds.len() < wanted {
            let Some((serde_json::Value::Null, batch)) = wire::recv::<serde_json::Value>(&sock)?
            else {
                return Err(HolderError::Io(std::io::Error::other(
                    "a welcome without its descriptors",
                )));
            };
            fds.extend(batch);
        }
        let mut fds = fds.into_iter();
        let adoptable = held
            .into_iter()
            .map(|h| {
                let n = fd_count(&h) - usize::from(h.journal);
                let io = fds.by_ref().take(n).collect();
                let journal = fds.by_ref().take(usize::from(h.journal)).collect();
                Adoptable { fds: io, journal, held: h }
            })
            .collect();
        // Events come when they come: the reader waits without a timeout.
        sock.set_read_timeout(None)?;
        sock.set_write_timeout(Some(wire::IO_TIMEOUT))?;
        let (answer_tx, answers) = mpsc::channel();
        let reader = sock.try_clone()?;
        std::thread::Builder::new().name("holder-events".into()).spawn(move || {
            events(&reader, &answer_tx, &on_notice);
        })?;
        let client = Arc::new(Self {
            sock,
            write: Mutex::new(()),
            spawns: Mutex::new(()),
            answers: Mutex::new(answers),
            pid,
        });
        Ok((client, adoptable))
    }

    /// The holder's pid: the parent of every program.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn send(&self, request: &Request) -> std::io::Result<()> {
        self.send_with(request, &[])
    }

    fn send_with(&self, request: &Request, fds: &[BorrowedFd<'_>]) -> std::io::Result<()> {
        let _write = self.write.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        wire::send(&self.sock, request, fds)
    }

    /// Starts a program; returns its pid and descriptors (the PTY primary,
    /// or input, output and error). Blocks until the holder answers. The
    /// holder keeps `journal` with the program and gives it back to the
    /// next daemon.
    ///
    /// # Errors
    /// The OS's reason when the program could not be started, or a lost
    /// connection.
    pub fn spawn(
        &self,
        spec: Spawn,
        journal: &[BorrowedFd<'_>],
    ) -> Result<(u32, Vec<OwnedFd>), String> {
        let _one = self.spawns.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let proc_id = spec.proc_id;
        self.send_with(&Request::Spawn(spec), journal)
            .map_err(|e| format!("portal-holder is gone: {e}"))?;
        let answers = self.answers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let deadline = Instant::now() + wire::IO_TIMEOUT * 2;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match answers.recv_timeout(left) {
                Ok((id, answer)) if id == proc_id => return answer,
                // The late answer of a spawn that already gave up.
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err("portal-holder is gone (its connection closed)".to_owned());
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err("portal-holder did not answer the spawn".to_owned());
                }
            }
        }
    }

    /// Replaces what the next daemon gets back for `proc_id`.
    ///
    /// # Errors
    /// When the holder is gone.
    pub fn set_meta(&self, proc_id: u64, meta: String) -> std::io::Result<()> {
        self.send(&Request::SetMeta { proc_id, meta })
    }

    /// Closes the holder's copy of a pipe program's input.
    ///
    /// # Errors
    /// When the holder is gone.
    pub fn close_input(&self, proc_id: u64) -> std::io::Result<()> {
        self.send(&Request::CloseInput { proc_id })
    }

    /// Forgets an ended program.
    ///
    /// # Errors
    /// When the holder is gone.
    pub fn release(&self, proc_id: u64) -> std::io::Result<()> {
        self.send(&Request::Release { proc_id })
    }
}

/// Ending the connection ends the reader thread too (it holds a clone of
/// the socket, which would otherwise keep the connection open).
impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }
}

fn fd_count(h: &Held) -> usize {
    let io = match (h.pty, h.input_open) {
        (true, _) => 1,
        (false, true) => 3,
        (false, false) => 2,
    };
    io + usize::from(h.journal)
}

/// The reader thread: answers spawns, reports exits, until the holder goes,
/// which it reports last.
fn events(sock: &UnixStream, answers: &mpsc::Sender<SpawnAnswer>, on_notice: &OnNotice) {
    while let Ok(Some((event, fds))) = wire::recv::<Event>(sock) {
        match event {
            Event::Spawned { proc_id, pid } => {
                let _ = answers.send((proc_id, Ok((pid, fds))));
            }
            Event::SpawnFailed { proc_id, error } => {
                let _ = answers.send((proc_id, Err(error)));
            }
            Event::Exited { proc_id, exit } => on_notice(Notice::Exited { proc_id, exit }),
            Event::Reaped { pid, exit } => on_notice(Notice::OrphanReaped { pid, exit }),
            Event::Welcome { .. } | Event::Refused { .. } => {}
        }
    }
    on_notice(Notice::Gone);
}

/// Starts a holder and connects to it once it listens.
fn start(socket: &Path, binary: &Path) -> Result<UnixStream, HolderError> {
    let status = std::process::Command::new(binary)
        .arg("--socket")
        .arg(socket)
        .stdin(std::process::Stdio::null())
        .status()
        .map_err(|e| HolderError::Start(format!("{}: {e}", binary.display())))?;
    if !status.success() {
        return Err(HolderError::Start(format!("{} exited with {status}", binary.display())));
    }
    // The holder listens before its launcher exits; a short retry covers a
    // racing daemon that removed a stale socket meanwhile.
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        match UnixStream::connect(socket) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() > deadline => {
                return Err(HolderError::Start(format!("{}: {e}", socket.display())));
            }
            Err(_) => {
                // Not a runtime worker: the daemon connects from a blocking thread.
                #[allow(
                    clippy::disallowed_methods,
                    reason = "a bounded retry on a blocking thread"
                )]
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Where the holder of the daemon at `daemon_socket` listens: beside it.
#[must_use]
pub fn socket_beside(daemon_socket: &Path) -> PathBuf {
    let mut name = daemon_socket.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".holder");
    daemon_socket.with_file_name(name)
}
