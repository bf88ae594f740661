//! The holder's one loop: let a daemon in, answer its requests, watch every
//! program's pidfd, reap whatever ends (its own programs and the orphans a
//! child subreaper receives), and tell the daemon. One thread, no runtime,
//! nothing that can block for long: a daemon that stops reading is dropped
//! after [`wire::IO_TIMEOUT`] and the next one hears everything.
//!
//! A connection becomes the daemon only by a complete hello of this
//! protocol (`door.rs` reads it); while a daemon is attached and its
//! connection open, a hello is refused and the attached daemon keeps
//! everything. One whose connection closed (a crash, or the exec of a live
//! upgrade, which closes it before the new binary connects) is let go first.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, PidfdFlags, WaitOptions};

use crate::door::{Address, Heard, MAX_NEWCOMERS, Newcomer};
use crate::spawn;
use crate::wire::{self, Event, Exit, Held, Request};

/// How long a holder nobody has connected to waits for its first daemon.
const FIRST_CONNECT: Duration = Duration::from_secs(10);

/// How often the loop wakes with nothing to do, to reap orphans (they have
/// no pidfd of ours) and programs whose pidfd could not be opened.
const TICK: Duration = Duration::from_millis(250);

/// One program held.
struct Program {
    pid: u32,
    /// Readable once the program ended; `None` on kernels without pidfds
    /// (then [`TICK`] notices the end).
    pidfd: Option<OwnedFd>,
    pty: bool,
    /// The PTY primary, or input (until closed), output and error.
    fds: Vec<OwnedFd>,
    input_open: bool,
    exit: Option<Exit>,
    meta: String,
    /// The daemon's journal of what it read and accepted: it outlives a
    /// daemon killed with SIGKILL here.
    journal: Vec<OwnedFd>,
}

impl Program {
    fn held(&self, proc_id: u64) -> Held {
        Held {
            proc_id,
            pid: self.pid,
            pty: self.pty,
            input_open: self.input_open,
            exit: self.exit,
            meta: self.meta.clone(),
            journal: u8::try_from(self.journal.len()).unwrap_or(u8::MAX),
        }
    }
}

/// The holder's state.
pub struct Holder {
    listener: UnixListener,
    /// Where it listens, bound again when deleted; `None` when the holder
    /// was handed a listener alone.
    address: Option<Address>,
    /// The daemon, welcomed (its welcome went before any event), and its pid.
    daemon: Option<UnixStream>,
    daemon_pid: u32,
    /// Connections that have not said hello yet.
    newcomers: Vec<Newcomer>,
    programs: BTreeMap<u64, Program>,
    ever_connected: bool,
    born: Instant,
}

impl Holder {
    /// A holder serving `listener` (already bound, private to its user).
    ///
    /// # Errors
    /// When the process cannot become a child subreaper.
    pub fn new(listener: UnixListener) -> std::io::Result<Self> {
        // Orphans of the programs' descendants come here to be reaped, not
        // to init, which in containers often reaps nothing.
        rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
        listener.set_nonblocking(true)?;
        Ok(Self {
            listener,
            address: None,
            daemon: None,
            daemon_pid: 0,
            newcomers: Vec::new(),
            programs: BTreeMap::new(),
            ever_connected: false,
            born: Instant::now(),
        })
    }

    /// The same holder, which binds `address` again whenever its socket file
    /// is deleted.
    #[must_use]
    pub fn at(self, address: Address) -> Self {
        Self { address: Some(address), ..self }
    }

    /// Serves until there is nothing left to hold and no daemon to serve.
    /// Returns where it listened, for its socket file to be removed.
    pub fn run(mut self) -> Option<Address> {
        let mut children_moved = true;
        let mut last_reap = Instant::now();
        loop {
            // `waitpid(-1)` walks every child in the kernel: only when a
            // program ended, or once a tick (orphans have no pidfd), never
            // for every request.
            if children_moved || last_reap.elapsed() >= TICK {
                self.reap();
                self.keep_address();
                self.newcomers.retain(|n| !n.expired());
                last_reap = Instant::now();
            }
            if self.programs.is_empty()
                && self.daemon.is_none()
                && self.newcomers.is_empty()
                && (self.ever_connected || self.born.elapsed() > FIRST_CONNECT)
            {
                return self.address;
            }
            let ready = self.wait();
            children_moved = ready.children;
            if ready.daemon {
                self.serve_one();
            }
            for i in ready.newcomers.into_iter().rev() {
                self.hear(i);
            }
            if ready.listener {
                self.accept();
            }
        }
    }

    /// Binds the socket again if someone deleted it.
    fn keep_address(&mut self) {
        if let Some(listener) = self.address.as_mut().and_then(Address::rebind_if_gone) {
            self.listener = listener;
        }
    }

    /// Waits for a connection, a request, a hello or a program's end; says
    /// which came.
    fn wait(&self) -> Ready {
        let mut fds: Vec<PollFd<'_>> = vec![PollFd::new(&self.listener, PollFlags::IN)];
        if let Some(d) = &self.daemon {
            fds.push(PollFd::new(d, PollFlags::IN));
        }
        fds.extend(self.newcomers.iter().map(|n| PollFd::new(&n.stream, PollFlags::IN)));
        fds.extend(
            self.programs
                .values()
                .filter(|p| p.exit.is_none())
                .filter_map(|p| p.pidfd.as_ref())
                .map(|fd| PollFd::new(fd, PollFlags::IN)),
        );
        let tick = Timespec { tv_sec: 0, tv_nsec: i64::try_from(TICK.as_nanos()).unwrap_or(0) };
        let Ok(n) = rustix::event::poll(&mut fds, Some(&tick)) else {
            return Ready { children: true, ..Ready::default() };
        };
        let ready = |f: &PollFd<'_>| !f.revents().is_empty();
        let first_newcomer = 1 + usize::from(self.daemon.is_some());
        let first_pidfd = first_newcomer + self.newcomers.len();
        Ready {
            listener: ready(&fds[0]),
            daemon: self.daemon.is_some() && ready(&fds[1]),
            newcomers: (0..self.newcomers.len())
                .filter(|i| ready(&fds[first_newcomer + i]))
                .collect(),
            children: n == 0 || fds[first_pidfd..].iter().any(ready),
        }
    }

    /// Takes every waiting connection as a newcomer: nothing changes until
    /// one says hello.
    fn accept(&mut self) {
        while let Ok((stream, _)) = self.listener.accept() {
            if self.newcomers.len() >= MAX_NEWCOMERS {
                continue;
            }
            if let Some(n) = Newcomer::new(stream) {
                self.newcomers.push(n);
            }
        }
    }

    /// Reads what newcomer `i` sent; lets it in, refuses it or closes it.
    fn hear(&mut self, i: usize) {
        match self.newcomers[i].read() {
            Heard::Waiting => {}
            Heard::Bad(_why) => drop(self.newcomers.swap_remove(i)),
            Heard::Hello(protocol) => {
                let newcomer = self.newcomers.swap_remove(i);
                self.admit(newcomer, protocol);
            }
        }
    }

    /// A complete hello: of another protocol, it learns the holder's and
    /// goes (the daemon says which side to restart); while a live daemon is
    /// attached, it is refused; else it becomes the daemon and is welcomed.
    fn admit(&mut self, newcomer: Newcomer, protocol: u32) {
        if protocol != wire::PROTOCOL {
            // A welcome of nothing: every protocol's daemon reads the
            // holder's protocol there and refuses it without adopting.
            let welcome =
                Event::Welcome { protocol: wire::PROTOCOL, pid: std::process::id(), held: vec![] };
            let _ = wire::send(&newcomer.stream, &welcome, &[]);
            return;
        }
        self.settle_daemon();
        if self.daemon.is_some() {
            newcomer.refuse(format!(
                "another portald (pid {}) is attached to this holder and alive; stop it first (portal-cli daemon stop) or let it run",
                self.daemon_pid
            ));
            return;
        }
        let pid = newcomer.pid;
        let Some(stream) = newcomer.into_daemon() else { return };
        if self.welcome(&stream).is_ok() {
            self.daemon = Some(stream);
            self.daemon_pid = pid;
            self.ever_connected = true;
        }
    }

    /// Carries out what the attached daemon sent and not yet handled; if
    /// its connection closed (a crash, the exec of a live upgrade) it is let
    /// go. A live daemon that sent nothing is left as it is.
    fn settle_daemon(&mut self) {
        while let Some(d) = &self.daemon {
            let mut fd = [PollFd::new(d, PollFlags::IN)];
            let now = Timespec { tv_sec: 0, tv_nsec: 0 };
            if !matches!(rustix::event::poll(&mut fd, Some(&now)), Ok(1..)) {
                return;
            }
            self.serve_one();
        }
    }

    /// Sends `daemon` everything held: the welcome, then the descriptors.
    fn welcome(&self, daemon: &UnixStream) -> std::io::Result<()> {
        let held = self.programs.iter().map(|(id, p)| p.held(*id)).collect();
        let fds: Vec<BorrowedFd<'_>> = self
            .programs
            .values()
            .flat_map(|p| p.fds.iter().chain(&p.journal).map(AsFd::as_fd))
            .collect();
        let welcome = Event::Welcome { protocol: wire::PROTOCOL, pid: std::process::id(), held };
        // Descriptors go a few at a time: one message carries at most MAX_FDS.
        wire::send(daemon, &welcome, &[])?;
        for chunk in fds.chunks(wire::MAX_FDS) {
            wire::send(daemon, &FdBatch, chunk)?;
        }
        Ok(())
    }

    /// Lets the daemon go, after carrying out what it sent before it went
    /// (metadata, releases): nothing it asked for is lost.
    fn drop_daemon(&mut self) {
        if let Some(old) = self.daemon.take()
            && old.set_nonblocking(true).is_ok()
        {
            while let Ok(Some((request, fds))) = wire::recv::<Request>(&old) {
                if let Err(_gone) = self.answer(&old, request, fds) {
                    // Answers cannot reach it any more; requests still count.
                }
            }
        }
    }

    /// Reads and answers one request; drops the daemon on any failure.
    fn serve_one(&mut self) {
        let Some(daemon) = self.daemon.take() else { return };
        let Ok(Some((request, fds))) = wire::recv::<Request>(&daemon) else { return };
        if self.answer(&daemon, request, fds).is_ok() {
            self.daemon = Some(daemon);
        }
    }

    fn answer(
        &mut self,
        daemon: &UnixStream,
        request: Request,
        received: Vec<OwnedFd>,
    ) -> std::io::Result<()> {
        match request {
            // The attached daemon saying hello again: everything again.
            Request::Hello { .. } => self.welcome(daemon),
            Request::Spawn(spec) => {
                let proc_id = spec.proc_id;
                match spawn::start(&spec) {
                    Ok(started) => {
                        let fds: Vec<BorrowedFd<'_>> =
                            started.fds.iter().map(AsFd::as_fd).collect();
                        wire::send(daemon, &Event::Spawned { proc_id, pid: started.pid }, &fds)?;
                        let pidfd = Pid::from_raw(i32::try_from(started.pid).unwrap_or(0))
                            .and_then(|pid| {
                                rustix::process::pidfd_open(pid, PidfdFlags::empty()).ok()
                            });
                        self.programs.insert(
                            proc_id,
                            Program {
                                pid: started.pid,
                                pidfd,
                                pty: spec.pty.is_some(),
                                fds: started.fds,
                                input_open: spec.pty.is_none(),
                                exit: None,
                                meta: spec.meta,
                                journal: received,
                            },
                        );
                        Ok(())
                    }
                    Err(e) => wire::send(
                        daemon,
                        &Event::SpawnFailed { proc_id, error: e.to_string() },
                        &[],
                    ),
                }
            }
            Request::SetMeta { proc_id, meta } => {
                if let Some(p) = self.programs.get_mut(&proc_id) {
                    p.meta = meta;
                }
                Ok(())
            }
            Request::CloseInput { proc_id } => {
                if let Some(p) = self.programs.get_mut(&proc_id)
                    && !p.pty
                    && p.input_open
                {
                    p.fds.remove(0);
                    p.input_open = false;
                }
                Ok(())
            }
            Request::Release { proc_id } => {
                self.programs.remove(&proc_id);
                Ok(())
            }
        }
    }

    /// Reaps everything that ended: records the exits of programs and tells
    /// the daemon; orphans are reaped and forgotten.
    fn reap(&mut self) {
        loop {
            // `wait` is waitpid(-1): any child (waitpid(None) is only our group).
            match rustix::process::wait(WaitOptions::NOHANG) {
                Ok(Some((pid, status))) => {
                    let pid = u32::try_from(pid.as_raw_nonzero().get()).unwrap_or(0);
                    let exit =
                        Exit { code: status.exit_status(), signal: status.terminating_signal() };
                    let event = match self
                        .programs
                        .iter_mut()
                        .find(|(_, p)| p.pid == pid && p.exit.is_none())
                    {
                        Some((proc_id, p)) => {
                            p.exit = Some(exit);
                            p.pidfd = None;
                            Event::Exited { proc_id: *proc_id, exit }
                        }
                        // An orphan: reaped, forgotten, and reported.
                        None => Event::Reaped { pid, exit },
                    };
                    if let Some(d) = self.daemon.as_ref()
                        && wire::send(d, &event, &[]).is_err()
                    {
                        self.drop_daemon();
                    }
                }
                Ok(None) | Err(_) => return,
            }
        }
    }
}

/// The frame that carries a batch of a [`Event::Welcome`]'s descriptors.
#[derive(serde::Serialize)]
struct FdBatch;

/// What one wait saw.
#[derive(Default)]
struct Ready {
    listener: bool,
    daemon: bool,
    /// Newcomers that sent something (or closed), by index, ascending.
    newcomers: Vec<usize>,
    /// A program ended, or the tick passed with nothing.
    children: bool,
}
