//! The holder's one loop: accept a daemon, answer its requests, watch every
//! program's pidfd, reap whatever ends (its own programs and the orphans a
//! child subreaper receives), and tell the daemon. One thread, no runtime,
//! nothing that can block for long: a daemon that stops reading is dropped
//! after [`IO_TIMEOUT`] and the next one hears everything.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, PidfdFlags, WaitOptions};

use crate::spawn;
use crate::wire::{self, Event, Exit, Held, Request};

/// A daemon that does not take or give a whole message within this long is
/// dropped (its programs stay held for the next one).
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

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
    daemon: Option<UnixStream>,
    /// The daemon has been welcomed: events may go to it. Before that, an
    /// exit is only recorded (the welcome carries it): an event ahead of the
    /// welcome would be read as the welcome.
    welcomed: bool,
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
            daemon: None,
            welcomed: false,
            programs: BTreeMap::new(),
            ever_connected: false,
            born: Instant::now(),
        })
    }

    /// Serves until there is nothing left to hold and no daemon to serve.
    pub fn run(mut self) {
        let mut children_moved = true;
        let mut last_reap = Instant::now();
        loop {
            // `waitpid(-1)` walks every child in the kernel: only when a
            // program ended, or once a tick (orphans have no pidfd), never
            // for every request.
            if children_moved || last_reap.elapsed() >= TICK {
                self.reap();
                last_reap = Instant::now();
            }
            if self.programs.is_empty()
                && self.daemon.is_none()
                && (self.ever_connected || self.born.elapsed() > FIRST_CONNECT)
            {
                return;
            }
            let (listener_ready, daemon_ready, moved) = self.wait();
            children_moved = moved;
            if daemon_ready {
                self.serve_one();
            }
            if listener_ready {
                self.accept();
            }
        }
    }

    /// Waits for a connection, a request or a program's end; says which
    /// came (the last: a program ended, or the tick passed with nothing).
    fn wait(&self) -> (bool, bool, bool) {
        let mut fds: Vec<PollFd<'_>> = vec![PollFd::new(&self.listener, PollFlags::IN)];
        if let Some(d) = &self.daemon {
            fds.push(PollFd::new(d, PollFlags::IN));
        }
        fds.extend(
            self.programs
                .values()
                .filter(|p| p.exit.is_none())
                .filter_map(|p| p.pidfd.as_ref())
                .map(|fd| PollFd::new(fd, PollFlags::IN)),
        );
        let tick = Timespec { tv_sec: 0, tv_nsec: i64::try_from(TICK.as_nanos()).unwrap_or(0) };
        let Ok(n) = rustix::event::poll(&mut fds, Some(&tick)) else {
            return (false, false, true);
        };
        let ready = |f: &PollFd<'_>| !f.revents().is_empty();
        let listener = ready(&fds[0]);
        let daemon = self.daemon.is_some() && ready(&fds[1]);
        let first_pidfd = 1 + usize::from(self.daemon.is_some());
        let children = n == 0 || fds[first_pidfd..].iter().any(ready);
        (listener, daemon, children)
    }

    /// Takes a new daemon, dropping the last one: only one daemon runs at a
    /// time (it holds a lock), so a new one means the old one is gone.
    fn accept(&mut self) {
        let Ok((stream, _)) = self.listener.accept() else { return };
        if !same_user(&stream)
            || stream.set_nonblocking(false).is_err()
            || stream.set_read_timeout(Some(IO_TIMEOUT)).is_err()
            || stream.set_write_timeout(Some(IO_TIMEOUT)).is_err()
        {
            return;
        }
        self.drop_daemon();
        self.daemon = Some(stream);
        self.welcomed = false;
        self.ever_connected = true;
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
            Request::Hello { .. } => {
                // The daemon decides whether it can speak this protocol.
                let held = self.programs.iter().map(|(id, p)| p.held(*id)).collect();
                let fds: Vec<BorrowedFd<'_>> = self
                    .programs
                    .values()
                    .flat_map(|p| p.fds.iter().chain(&p.journal).map(AsFd::as_fd))
                    .collect();
                let welcome =
                    Event::Welcome { protocol: wire::PROTOCOL, pid: std::process::id(), held };
                // Descriptors go a few at a time: one message carries at most MAX_FDS.
                wire::send(daemon, &welcome, &[])?;
                for chunk in fds.chunks(wire::MAX_FDS) {
                    wire::send(daemon, &FdBatch, chunk)?;
                }
                self.welcomed = true;
                Ok(())
            }
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
                    if let Some(d) = self.daemon.as_ref().filter(|_| self.welcomed)
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

/// Whether the peer runs as this user (the socket is private too; this is
/// the second lock on the door).
fn same_user(stream: &UnixStream) -> bool {
    rustix::net::sockopt::socket_peercred(stream).is_ok_and(|c| c.uid == rustix::process::getuid())
}
