//! Every system call the daemon makes outside std, each behind a safe
//! function: process signalling (`kill`, `killpg` and the tree sweep that
//! reaches everything a managed process started, whatever groups or
//! sessions it made, and what was reparented to the holder), `setsid`,
//! `flock`, polls, terminal modes, a listening socket's address, free disk
//! space and the monotonic clock (reaping is the holder's). Parsing of
//! `/proc/<pid>/stat` lives here too because the sweep depends on it.
//!
//! The calls go through `rustix`'s safe wrappers. What rustix cannot do
//! stays on `libc`, each in an `unsafe` block with its SAFETY note: `kill`
//! and `killpg` of a real-time signal only (rustix's `Signal` names every
//! other signal, but no real-time one, which Portal delivers when asked),
//! glibc's `malloc_trim` (no wrapper exists), taking an inherited
//! descriptor by number, and the borrow of a raw descriptor the PTY
//! library hands out.
#![allow(unsafe_code, reason = "what rustix does not cover; each block has a SAFETY note")]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;

/// How a child ended, as `waitpid` reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExitInfo {
    /// Exit code when it exited normally.
    pub(crate) code: Option<i32>,
    /// Signal number when a signal ended it.
    pub(crate) signal: Option<i32>,
}

/// `pid` as rustix takes it: positive, so it never addresses the caller's
/// own group (0) or every process (-1).
fn pid_of(pid: u32) -> io::Result<rustix::process::Pid> {
    i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("invalid pid {pid}")))
}

/// Sends `sig` to one process. A process that is already gone is not an error.
pub(crate) fn kill(pid: u32, sig: i32) -> io::Result<()> {
    let pid = pid_of(pid)?;
    let sent = match rustix::process::Signal::from_named_raw(sig) {
        Some(sig) => rustix::process::kill_process(pid, sig).map_err(io::Error::from),
        None if sig == 0 => rustix::process::test_kill_process(pid).map_err(io::Error::from),
        None => {
            // SAFETY: kill has no memory-safety preconditions; the pid is
            // positive, so it never addresses a process group or every
            // process. Only a real-time signal comes here (rustix names
            // every other one).
            let rc = unsafe { libc::kill(pid.as_raw_nonzero().get(), sig) };
            if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
        }
    };
    gone_is_fine(sent)
}

/// Sends `sig` to a process group. A group that is already gone is not an error.
pub(crate) fn killpg(pgid: u32, sig: i32) -> io::Result<()> {
    let pgid = pid_of(pgid)?;
    let sent = match rustix::process::Signal::from_named_raw(sig) {
        Some(sig) => rustix::process::kill_process_group(pgid, sig).map_err(io::Error::from),
        None if sig == 0 => rustix::process::test_kill_process_group(pgid).map_err(io::Error::from),
        None => {
            // SAFETY: killpg has no memory-safety preconditions; the group
            // id is positive. Only a real-time signal comes here.
            let rc = unsafe { libc::killpg(pgid.as_raw_nonzero().get(), sig) };
            if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
        }
    };
    gone_is_fine(sent)
}

/// A signal to a process or group that no longer exists (ESRCH) reached
/// everything it could: not an error.
fn gone_is_fine(sent: io::Result<()>) -> io::Result<()> {
    match sent {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        other => other,
    }
}

/// What every process a managed process started carries in its environment,
/// unless it cleared it: the daemon's socket and the managed process's id.
/// It names leftovers that were reparented to the daemon (the child
/// subreaper) after their parents ended, when the tree no longer does.
#[derive(Clone, Default)]
pub(crate) struct Lineage {
    /// `PORTAL_SOCKET=<path>`: started under this daemon.
    socket: Vec<u8>,
    /// `PORTAL_SESSION_ID=<id>`: started under this managed process; `None`
    /// accepts any managed process of the daemon.
    process: Option<Vec<u8>>,
    /// Whether a pid is a managed process itself: those are the daemon's
    /// children too, and never leftovers, so their environment is not read
    /// (with thousands running, that read was most of a kill's cost).
    managed: Option<std::sync::Arc<dyn Fn(u32) -> bool + Send + Sync>>,
    /// Where orphans of the process's descendants are reparented: the
    /// holder (their subreaper); this process when `None`.
    parent: Option<u32>,
}

impl std::fmt::Debug for Lineage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lineage")
            .field("socket", &String::from_utf8_lossy(&self.socket))
            .field("process", &self.process.as_deref().map(String::from_utf8_lossy))
            .finish_non_exhaustive()
    }
}

/// The environment variable naming the managed process a program runs under.
const PROCESS_VAR: &[u8] = b"PORTAL_SESSION_ID=";

impl Lineage {
    /// The lineage written into a child's environment.
    pub(crate) fn of_env(env: &BTreeMap<OsString, OsString>) -> Self {
        let entry = |key: &str| {
            env.get(OsStr::new(key)).map(|v| [key.as_bytes(), b"=", v.as_bytes()].concat())
        };
        Self {
            socket: entry("PORTAL_SOCKET").unwrap_or_default(),
            process: entry("PORTAL_SESSION_ID"),
            managed: None,
            parent: None,
        }
    }

    /// The same lineage, told which pids are managed processes themselves
    /// (whose environment need not be read).
    pub(crate) fn with_managed(
        self,
        managed: std::sync::Arc<dyn Fn(u32) -> bool + Send + Sync>,
    ) -> Self {
        Self { managed: Some(managed), ..self }
    }

    /// The same lineage, whose orphans are reparented to `parent` (the
    /// holder, the subreaper of every program).
    pub(crate) fn with_parent(self, parent: u32) -> Self {
        Self { parent: Some(parent), ..self }
    }

    /// Every managed process of the daemon whose socket is `socket`, whose
    /// orphans go to `parent`.
    pub(crate) fn daemon(socket: &std::path::Path, parent: u32) -> Self {
        Self {
            socket: [b"PORTAL_SOCKET=", socket.as_os_str().as_bytes()].concat(),
            process: None,
            managed: None,
            parent: Some(parent),
        }
    }

    /// What carries the managed process `id` of the daemon whose socket is
    /// `socket`, wherever it was reparented.
    pub(crate) fn of_process(socket: &std::path::Path, id: u64) -> Self {
        Self {
            socket: [b"PORTAL_SOCKET=", socket.as_os_str().as_bytes()].concat(),
            process: Some([PROCESS_VAR, id.to_string().as_bytes()].concat()),
            managed: None,
            parent: None,
        }
    }

    /// Where orphans are reparented.
    fn parent(&self) -> u32 {
        self.parent.unwrap_or_else(std::process::id)
    }

    /// Whether `environ` (NUL-separated, as in `/proc/<pid>/environ`)
    /// carries this lineage.
    fn matches(&self, environ: &[u8]) -> bool {
        let has = |want: &dyn Fn(&[u8]) -> bool| environ.split(|b| *b == 0).any(want);
        !self.socket.is_empty()
            && has(&|e| e == self.socket)
            && match &self.process {
                Some(p) => has(&|e| e == p),
                None => has(&|e| e.starts_with(PROCESS_VAR)),
            }
    }

    /// Whether the process `pid` carries this lineage (a managed process
    /// itself never counts: it is its own tree).
    fn carried_by(&self, pid: u32) -> bool {
        if self.managed.as_ref().is_some_and(|m| m(pid)) {
            return false;
        }
        std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| self.matches(&env))
    }
}

/// One scan of `/proc`: every process with its stat fields.
fn process_table() -> Vec<(u32, ProcStat)> {
    all_pids().into_iter().filter_map(|pid| Some((pid, proc_stat(pid)?))).collect()
}

/// Everything a managed process started, as far as the kernel can tell: its
/// session and process group (jobs an interactive shell moved into groups of
/// their own), every descendant whatever session or group it made
/// (`setsid` children such as Codex's app servers), and orphans reparented to
/// the daemon that carry the process's [`Lineage`] (daemons that double
/// forked away from it), with their descendants. The leader is included.
fn tree_members(leader: u32, lineage: Option<&Lineage>, table: &[(u32, ProcStat)]) -> Vec<u32> {
    let mut roots: Vec<u32> = vec![leader];
    roots.extend(
        table.iter().filter(|(_, s)| s.session == leader || s.pgrp == leader).map(|(p, _)| *p),
    );
    if let Some(lineage) = lineage {
        roots.extend(
            table
                .iter()
                .filter(|(p, s)| {
                    s.ppid == lineage.parent() && *p != leader && lineage.carried_by(*p)
                })
                .map(|(p, _)| *p),
        );
    }
    descendants_of(roots, table)
}

/// `roots` and all their descendants, each once, never the daemon itself.
fn descendants_of(roots: Vec<u32>, table: &[(u32, ProcStat)]) -> Vec<u32> {
    let me = std::process::id();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (pid, s) in table {
        children.entry(s.ppid).or_default().push(*pid);
    }
    let mut seen: HashSet<u32> = HashSet::new();
    let mut queue = roots;
    let mut out = Vec::new();
    while let Some(pid) = queue.pop() {
        if pid == me || pid <= 1 || !seen.insert(pid) {
            continue;
        }
        out.push(pid);
        queue.extend(children.get(&pid).into_iter().flatten().copied());
    }
    out
}

/// How many times a SIGKILL sweep looks again for processes forked between
/// its scan and its signals: a killed process forks no more, so each round
/// can only find children of the round before.
const KILL_ROUNDS: usize = 4;

/// Signals a whole process tree started by Portal: see [`tree_members`].
///
/// Portal starts every child as a session leader (`setsid`), so its pid is
/// both its session id and its process group id; `killpg` reaches the group
/// at once, the sweep over `/proc` the rest. SIGKILL sweeps repeat (up to
/// [`KILL_ROUNDS`]) until a scan finds nothing new alive.
pub(crate) fn kill_tree(leader: u32, lineage: Option<&Lineage>, sig: i32) -> io::Result<()> {
    // The tree is read before anything is signalled: once the leader dies,
    // its children are reparented and the tree no longer leads to them.
    let mut fresh = tree_members(leader, lineage, &process_table());
    let group = killpg(leader, sig);
    let mut signalled: HashSet<u32> = HashSet::new();
    for _ in 0..KILL_ROUNDS {
        fresh.retain(|p| signalled.insert(*p));
        if fresh.is_empty() {
            break;
        }
        for pid in &fresh {
            // A member may exit between the scan and the signal; kill
            // ignores ESRCH.
            let _ = kill(*pid, sig);
        }
        if sig != libc::SIGKILL {
            break;
        }
        fresh = tree_members(leader, lineage, &process_table());
    }
    group
}

/// Kills what is left of every managed process: orphans reparented to the
/// daemon that carry its socket in their lineage, and their descendants.
/// Run at shutdown, after every managed process ended. Returns how many
/// processes were killed.
pub(crate) fn kill_leftovers(lineage: &Lineage) -> usize {
    let parent = lineage.parent();
    let mut killed = 0;
    for _ in 0..KILL_ROUNDS {
        let table = process_table();
        let roots: Vec<u32> = table
            .iter()
            .filter(|(p, s)| s.ppid == parent && s.state != 'Z' && lineage.carried_by(*p))
            .map(|(p, _)| *p)
            .collect();
        let alive: Vec<u32> = descendants_of(roots, &table)
            .into_iter()
            .filter(|p| proc_stat(*p).is_some_and(|s| s.state != 'Z'))
            .collect();
        if alive.is_empty() {
            break;
        }
        for pid in &alive {
            let _ = kill(*pid, libc::SIGKILL);
        }
        killed += alive.len();
    }
    killed
}

/// Kills every process that carries one of `lineages`, wherever it was
/// reparented, with its descendants: what is left of programs whose holder
/// died (their leaders died with it; the rest went to init). Every
/// process's environment is read, once a round: run only at start, for
/// programs no holder holds. Returns how many processes were killed.
pub(crate) fn kill_carriers(lineages: &[Lineage]) -> usize {
    if lineages.is_empty() {
        return 0;
    }
    let mut killed = 0;
    for _ in 0..KILL_ROUNDS {
        let table = process_table();
        let roots: Vec<u32> = table
            .iter()
            .filter(|(_, s)| s.state != 'Z')
            .filter(|(p, _)| {
                std::fs::read(format!("/proc/{p}/environ"))
                    .is_ok_and(|env| lineages.iter().any(|l| l.matches(&env)))
            })
            .map(|(p, _)| *p)
            .collect();
        let alive: Vec<u32> = descendants_of(roots, &table)
            .into_iter()
            .filter(|p| proc_stat(*p).is_some_and(|s| s.state != 'Z'))
            .collect();
        if alive.is_empty() {
            break;
        }
        for pid in &alive {
            let _ = kill(*pid, libc::SIGKILL);
        }
        killed += alive.len();
    }
    killed
}

/// Fields of `/proc/<pid>/stat` that Portal uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// One-letter state (`R`, `S`, `Z`…).
    pub(crate) state: char,
    /// Parent pid.
    pub(crate) ppid: u32,
    /// Process group id.
    pub(crate) pgrp: u32,
    /// Session id.
    pub(crate) session: u32,
}

/// Parses `/proc/<pid>/stat`. The command name is in parentheses and may itself
/// contain spaces and parentheses, so fields are read after the **last** `)`.
pub(crate) fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some(ProcStat { state, ppid, pgrp, session })
}

/// Reads and parses `/proc/<pid>/stat`.
pub(crate) fn proc_stat(pid: u32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every pid in `/proc`.
pub(crate) fn all_pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect()
}

/// Whether `fd` has input ready right now (a zero-timeout poll).
pub(crate) fn readable_now(fd: std::os::fd::RawFd) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec};
    with_fd(fd, |fd| {
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        let now = Timespec { tv_sec: 0, tv_nsec: 0 };
        rustix::event::poll(&mut fds, Some(&now)).is_ok_and(|n| n == 1)
            && fds[0].revents().contains(PollFlags::IN)
    })
}

/// Takes ownership of a descriptor this process inherited across `exec`
/// by number (a live upgrade names them in the environment). `None` when
/// no such descriptor is open.
pub(crate) fn take_inherited_fd(fd: std::os::fd::RawFd) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd as _;
    // SAFETY: F_GETFD only reads the descriptor's flags; an fd that is not
    // open fails with EBADF and nothing else happens.
    if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: the descriptor is open, was passed across exec for this
    // process to own, and is taken once, at startup, before anything else
    // could have claimed its number.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Blocks until `fd` has something to read (or has hung up) or `stop` is
/// readable. Returns true when `stop` is: the caller must not read on. A
/// poll that fails for another reason returns false, and the caller's
/// blocking read reports what is wrong.
pub(crate) fn wait_readable_or(
    fd: std::os::fd::BorrowedFd<'_>,
    stop: std::os::fd::BorrowedFd<'_>,
) -> bool {
    use rustix::event::{PollFd, PollFlags};
    loop {
        let mut fds = [PollFd::new(&stop, PollFlags::IN), PollFd::new(&fd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) => return fds[0].revents().contains(PollFlags::IN),
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

/// Lowers the calling thread's CPU priority (Linux nice values are per
/// thread). Used by screen threads: under bulk output the program, the
/// reader and the log come first, and the screen coalesces what it missed.
pub(crate) fn lower_thread_priority(nice: i32) -> io::Result<()> {
    // `None` is "the caller": on Linux, the calling thread.
    #[cfg(target_os = "linux")]
    rustix::process::setpriority_process(None, nice)?;
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
    Ok(())
}

/// Starts a new session for this process (detaching from the terminal and
/// session of whoever started it).
pub(crate) fn setsid() -> io::Result<()> {
    rustix::process::setsid()?;
    Ok(())
}

/// Takes an exclusive, non-blocking `flock` on `file`. `Ok(false)` when another
/// process holds it. The lock lives as long as the file stays open.
pub(crate) fn try_lock_exclusive(file: &std::fs::File) -> io::Result<bool> {
    match rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The path a listening Unix socket is bound to; `None` when `fd` is not
/// a listening Unix socket bound to a path.
pub(crate) fn listening_unix_path(fd: &impl std::os::fd::AsFd) -> Option<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    if rustix::net::sockopt::socket_domain(fd).ok()? != rustix::net::AddressFamily::UNIX
        || !rustix::net::sockopt::socket_acceptconn(fd).ok()?
    {
        return None;
    }
    let addr = rustix::net::SocketAddrUnix::try_from(rustix::net::getsockname(fd).ok()?).ok()?;
    let path = addr.path()?;
    Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(path.to_bytes())))
}

/// Runs `f` on a descriptor the caller keeps open for the call (the borrow
/// cannot outlive `f`).
fn with_fd<T>(fd: std::os::fd::RawFd, f: impl FnOnce(std::os::fd::BorrowedFd<'_>) -> T) -> T {
    // SAFETY: every caller passes a descriptor it owns (a PTY primary it
    // holds) for at least this call, and the borrow ends with `f`.
    f(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) })
}

/// The foreground process group of the terminal whose primary side is `fd`.
pub(crate) fn foreground_pgrp(fd: std::os::fd::RawFd) -> Option<u32> {
    let pgrp = with_fd(fd, |b| rustix::termios::tcgetpgrp(b)).ok()?;
    u32::try_from(pgrp.as_raw_nonzero().get()).ok()
}

/// Whether the terminal whose primary side is `fd` reads a line with echo
/// off (canonical mode without `ECHO`): how sudo, ssh and `read -s` ask for
/// secrets. Raw-mode programs (editors, TUIs) turn echo off too, but leave
/// canonical mode, so they do not count. `None` when it cannot be queried
/// (Linux reports the secondary side's modes on the primary).
pub(crate) fn secret_prompt(fd: std::os::fd::RawFd) -> Option<bool> {
    use rustix::termios::LocalModes;
    let modes = with_fd(fd, |b| rustix::termios::tcgetattr(b)).ok()?.local_modes;
    Some(!modes.contains(LocalModes::ECHO) && modes.contains(LocalModes::ICANON))
}

/// Bytes free for an unprivileged writer on the filesystem holding `path`
/// (`None` when it cannot be asked).
pub(crate) fn free_bytes(path: &std::path::Path) -> Option<u64> {
    let st = rustix::fs::statvfs(path).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Gives memory the allocator holds free back to the kernel (glibc keeps
/// freed memory in per-thread arenas; after thousands of processes and their
/// threads came and went, that is hundreds of MiB). A no-op elsewhere.
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists and
    // returns whole free pages to the kernel; it takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// `n` random bytes from the kernel's CSPRNG, as lowercase hex.
pub(crate) fn random_hex(n: usize) -> io::Result<String> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).map_err(io::Error::other)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// The command line of a process (`/proc/<pid>/cmdline`) and its
/// executable's path, for recognising agents.
pub(crate) fn command_line(pid: u32) -> Option<(Vec<String>, Option<String>)> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let argv: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    Some((argv, exe))
}

/// `CLOCK_MONOTONIC` in nanoseconds: system-wide (comparable across daemon
/// restarts within one boot) and immune to wall-clock jumps, so it orders
/// chunks and bounds time-window reads.
pub(crate) fn monotonic_ns() -> i64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec.saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec)
}

/// Wall-clock time in nanoseconds since the Unix epoch (for display only).
pub(crate) fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parsing_survives_parentheses_in_names() {
        let s = "1234 (a (weird) name) S 1 1234 1234 34816 1234 4194560 0 0";
        assert_eq!(
            parse_stat(s),
            Some(ProcStat { state: 'S', ppid: 1, pgrp: 1234, session: 1234 })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn own_stat_is_readable() {
        let st = proc_stat(std::process::id()).expect("own stat");
        assert!(matches!(st.state, 'R' | 'S'), "{st:?}");
        assert!(st.pgrp > 0);
    }

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a && a > 0);
    }

    #[test]
    fn kill_of_a_missing_process_is_not_an_error() {
        // Pid numbers near the maximum are not in use on a test machine.
        assert!(kill(4_194_000, 0).is_ok());
        assert!(kill(4_194_000, libc::SIGTERM).is_ok());
        assert!(kill(4_194_000, libc::SIGRTMIN() + 3).is_ok());
        assert!(killpg(4_194_000, libc::SIGRTMIN()).is_ok());
        assert!(kill(0, 0).is_err());
    }

    #[test]
    fn named_and_real_time_signals_both_arrive() {
        use std::os::unix::process::ExitStatusExt as _;
        for sig in [libc::SIGTERM, libc::SIGRTMIN() + 1] {
            let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
            kill(child.id(), sig).expect("kill");
            assert_eq!(child.wait().expect("wait").signal(), Some(sig));
        }
    }
}
