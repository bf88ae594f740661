//! The daemon's side of `portal-holder`: every program is spawned through
//! it, and its exit comes back from it, so the programs' descriptors and
//! parenthood live in a process that outlives this daemon.
//!
//! The holder reports exits by process id; they are handed to the actor
//! waiting for them, or kept until one asks (an exit can arrive before the
//! actor that wants it exists). The pids of running programs are known here
//! too, so tree sweeps need not read their environments.
//!
//! A holder that dies takes its programs with it (they die with their
//! parent): every exit still awaited is answered then with
//! [`holder_lost`], so no kill, wait or shutdown waits for an exit that
//! cannot come, and the next spawn starts a new holder.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use portal_holder::client::{Adoptable, Client, HolderError, Notice};
use portal_holder::wire::{self, Exit};
use tokio::sync::oneshot;

use crate::domain::ProcId;
use crate::sys::ExitInfo;

/// Exits by process, and the pids of running programs.
#[derive(Default)]
struct Book {
    waiting: HashMap<ProcId, oneshot::Sender<std::io::Result<ExitInfo>>>,
    early: HashMap<ProcId, ExitInfo>,
    pids: HashMap<ProcId, u32>,
    running: HashSet<u32>,
    /// Programs of a holder that died: their exits never come.
    orphaned: HashSet<ProcId>,
    /// Which connection is the current one: a notice of an older one is
    /// stale.
    generation: u64,
    /// The current connection ended (the holder died).
    gone: bool,
    /// The daemon hands its programs over: the connection's end is the
    /// exec's, and the holder keeps them for the next daemon.
    handing_over: bool,
}

/// What an awaited exit is answered with when the holder died: the program
/// was killed with it (its parent), and how it ended is nobody's to know.
pub(crate) fn holder_lost() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "portal-holder, the program's parent, died; the program was killed with it",
    )
}

/// Whether an exit's error is [`holder_lost`].
pub(crate) fn is_holder_lost(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::ConnectionAborted
}

/// The connection to the holder, with the exits it reports.
pub(crate) struct Holding {
    /// The current connection; replaced when the holder died. Locked only
    /// to clone or swap it: actors read it on the runtime.
    client: Mutex<Arc<Client>>,
    /// One reconnection at a time (it may take seconds: a holder starting).
    reconnecting: Mutex<()>,
    socket: PathBuf,
    binary: PathBuf,
    book: Arc<Mutex<Book>>,
    /// Readable once the daemon hands its programs over (a live upgrade):
    /// every reader thread polls it beside its stream and stops at a chunk
    /// boundary, leaving what it has not read in the kernel for the next
    /// daemon.
    detach: OwnedFd,
    detaching: AtomicBool,
    /// Ring size of each new program's journal (output streams).
    journal_ring: u64,
}

impl std::fmt::Debug for Holding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Holding").field("holder_pid", &self.holder_pid()).finish_non_exhaustive()
    }
}

fn lock(book: &Mutex<Book>) -> MutexGuard<'_, Book> {
    book.lock().unwrap_or_else(PoisonError::into_inner)
}

impl From<Exit> for ExitInfo {
    fn from(e: Exit) -> Self {
        Self { code: e.code, signal: e.signal }
    }
}

/// What the holder reports on its own, into `book`, for the connection of
/// `generation`.
fn hearer(book: Arc<Mutex<Book>>, generation: u64) -> portal_holder::client::OnNotice {
    Box::new(move |notice: Notice| {
        let (id, exit) = match notice {
            Notice::Exited { proc_id, exit } => (ProcId(proc_id), exit),
            Notice::OrphanReaped { pid, exit } => {
                tracing::debug!(pid, code = ?exit.code, signal = ?exit.signal, "portal-holder reaped an orphan");
                return;
            }
            Notice::Gone => return holder_gone(&book, generation),
        };
        let mut b = lock(&book);
        if let Some(pid) = b.pids.remove(&id) {
            b.running.remove(&pid);
        }
        match b.waiting.remove(&id) {
            // The actor may be gone already (a failed start).
            Some(tx) => drop(tx.send(Ok(exit.into()))),
            None => drop(b.early.insert(id, exit.into())),
        }
    })
}

/// The holder of `generation` is gone: every program it held died with it.
fn holder_gone(book: &Mutex<Book>, generation: u64) {
    let mut b = lock(book);
    // Each connection ends once; an older one's end is stale. At a
    // handover it is this daemon that lets go, not the holder that died.
    if b.generation != generation || b.handing_over {
        return;
    }
    b.gone = true;
    let running: Vec<ProcId> = b.pids.keys().copied().collect();
    b.pids.clear();
    b.running.clear();
    let waiting: Vec<_> = b.waiting.drain().collect();
    let count = running.len().max(waiting.len());
    b.orphaned.extend(running);
    for (id, tx) in waiting {
        b.orphaned.insert(id);
        drop(tx.send(Err(holder_lost())));
    }
    if count > 0 {
        tracing::error!(
            programs = count,
            "portal-holder died: its programs died with it; the next start starts a new holder"
        );
    }
}

impl Holding {
    /// Connects to the holder at `socket` (starting `binary` when none
    /// answers) and returns what it held. Blocking.
    pub(crate) fn connect(
        socket: &Path,
        binary: &Path,
        journal_ring: u64,
    ) -> Result<(Arc<Self>, Vec<Adoptable>), HolderError> {
        let book = Arc::new(Mutex::new(Book::default()));
        let (client, held) = Client::connect(socket, binary, hearer(Arc::clone(&book), 0))?;
        let detach = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC)
            .map_err(|e| HolderError::Io(std::io::Error::from(e)))?;
        let detaching = AtomicBool::new(false);
        let holding = Self {
            client: Mutex::new(client),
            reconnecting: Mutex::new(()),
            socket: socket.to_owned(),
            binary: binary.to_owned(),
            book,
            detach,
            detaching,
            journal_ring,
        };
        Ok((Arc::new(holding), held))
    }

    /// The current connection.
    fn client(&self) -> Arc<Client> {
        Arc::clone(&self.client.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The current connection, a new holder's when the last one died.
    fn live_client(&self) -> Result<Arc<Client>, String> {
        let _one = self.reconnecting.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = {
            let mut b = lock(&self.book);
            if !b.gone {
                return Ok(self.client());
            }
            // Notices of the dead connection are stale from here on; the
            // new one's end, whenever it comes, marks it gone again.
            b.generation += 1;
            b.gone = false;
            b.generation
        };
        let hear = hearer(Arc::clone(&self.book), generation);
        let (fresh, held) = Client::connect(&self.socket, &self.binary, hear).map_err(|e| {
            lock(&self.book).gone = true;
            format!("portal-holder died and no new one could be reached or started: {e}")
        })?;
        if !held.is_empty() {
            // Not this daemon's: it never spawned through this holder.
            tracing::warn!(
                programs = held.len(),
                "a new portal-holder held programs already; left alone"
            );
        }
        tracing::info!(holder_pid = fresh.pid(), "connected to a new portal-holder");
        *self.client.lock().unwrap_or_else(PoisonError::into_inner) = Arc::clone(&fresh);
        Ok(fresh)
    }

    /// The holder's pid: the parent of every program, where their orphans go.
    pub(crate) fn holder_pid(&self) -> u32 {
        self.client().pid()
    }

    /// Ring size of each new program's journal (output streams).
    pub(crate) fn journal_ring(&self) -> u64 {
        self.journal_ring
    }

    /// Starts a program (blocking until the holder answered), through a new
    /// holder if the last one died; the holder keeps `journal` with it.
    pub(crate) fn spawn(
        &self,
        spec: wire::Spawn,
        journal: &[BorrowedFd<'_>],
    ) -> Result<(u32, Vec<OwnedFd>), String> {
        let id = ProcId(spec.proc_id);
        let (pid, fds) = self.live_client()?.spawn(spec, journal)?;
        let mut b = lock(&self.book);
        if !b.early.contains_key(&id) {
            b.pids.insert(id, pid);
            b.running.insert(pid);
        }
        Ok((pid, fds))
    }

    /// Records a program taken over from an earlier daemon: running, or
    /// ended with `exit` while no daemon ran.
    pub(crate) fn adopted(&self, id: ProcId, pid: u32, exit: Option<ExitInfo>) {
        let mut b = lock(&self.book);
        match exit {
            Some(exit) => drop(b.early.insert(id, exit)),
            None => {
                b.pids.insert(id, pid);
                b.running.insert(pid);
            }
        }
    }

    /// The exit of `id`, once it comes (at once when it already came).
    pub(crate) fn exit_of(&self, id: ProcId) -> oneshot::Receiver<std::io::Result<ExitInfo>> {
        let (tx, rx) = oneshot::channel();
        let mut b = lock(&self.book);
        match b.early.remove(&id) {
            Some(exit) => drop(tx.send(Ok(exit))),
            None if b.orphaned.contains(&id) => drop(tx.send(Err(holder_lost()))),
            None => drop(b.waiting.insert(id, tx)),
        }
        rx
    }

    /// Whether `pid` is a running managed program (its own tree, never a
    /// leftover).
    pub(crate) fn is_managed(&self, pid: u32) -> bool {
        lock(&self.book).running.contains(&pid)
    }

    /// What reader threads poll to learn that the daemon hands over.
    pub(crate) fn detach_signal(&self) -> BorrowedFd<'_> {
        self.detach.as_fd()
    }

    /// Starts the handover: every reader stops at its next chunk boundary,
    /// and closing input no longer closes the holder's copy.
    pub(crate) fn detach_all(&self) {
        self.detaching.store(true, Ordering::Release);
        lock(&self.book).handing_over = true;
        if let Err(e) = rustix::io::write(&self.detach, &1u64.to_ne_bytes()) {
            tracing::error!(error = %e, "cannot signal the reader threads to detach");
        }
    }

    /// Whether the daemon is handing its programs over.
    pub(crate) fn is_detaching(&self) -> bool {
        self.detaching.load(Ordering::Acquire)
    }

    /// Leaves `meta` with the holder for the program `id`: what the next
    /// daemon needs to continue it exactly (cursors, agent state, screen).
    /// Off the runtime's workers, like [`Self::released`].
    pub(crate) async fn set_meta(self: &Arc<Self>, id: ProcId, meta: String) {
        let this = Arc::clone(self);
        let sent = tokio::task::spawn_blocking(move || this.client().set_meta(id.0, meta)).await;
        if let Ok(Err(e)) = sent {
            tracing::warn!(proc = %id, error = %e, "cannot leave the handover state with portal-holder");
        }
    }

    /// Tells the holder a pipe program's input is closed.
    pub(crate) fn close_input(&self, id: ProcId) {
        if let Err(e) = self.client().close_input(id.0) {
            tracing::warn!(proc = %id, error = %e, "cannot tell portal-holder that input closed");
        }
    }

    /// [`Self::release`] from async code. A request to the holder is a
    /// blocking write to its socket (for up to its write timeout when the
    /// holder stops reading), so it runs on a blocking thread, never on a
    /// runtime worker; the caller goes on once it is written.
    pub(crate) async fn released(self: &Arc<Self>, id: ProcId) {
        let this = Arc::clone(self);
        let _ = tokio::task::spawn_blocking(move || this.release(id)).await;
    }

    /// Tells the holder an ended program is recorded: it lets it go.
    /// Blocking (see [`Self::released`]).
    pub(crate) fn release(&self, id: ProcId) {
        {
            let mut b = lock(&self.book);
            b.early.remove(&id);
            // A dead holder's program: nothing to let go.
            if b.orphaned.remove(&id) {
                return;
            }
        }
        if let Err(e) = self.client().release(id.0) {
            tracing::warn!(proc = %id, error = %e, "cannot tell portal-holder to let a program go");
        }
    }
}
