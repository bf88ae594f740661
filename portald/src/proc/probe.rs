//! What the kernel says about a program waiting for input (Linux `/proc`).
//!
//! A program waits for input when a task of the PTY's foreground process
//! group (or of the pipe child's session) sleeps in `read` on its terminal or
//! stdin, or in `select`/`pselect6`/`poll`/`ppoll`/`epoll_wait` whose set
//! includes it, and no task of the group is runnable. Which file descriptors
//! a sleeping call watches is read from the call's arguments
//! (`/proc/<pid>/task/<tid>/syscall`): `select` sets and `poll` arrays from
//! the program's memory (`/proc/<pid>/mem`, allowed because portald is the
//! program's ancestor), `epoll` sets from `/proc/<pid>/fdinfo/<epfd>`.
//!
//! Two kinds of input wait are told apart. A plain one reads the input, or
//! watches it alone (readline's `pselect6` on fd 0, `read`): the program
//! has nothing else to wait for. An event loop watches the input among
//! other fds (node's epoll set holds the terminal, an eventfd and a pipe;
//! its timers are the call's timeout), and sleeps there just the same while
//! a timer or an await runs: [`Verdict::EventLoop`], on which the kernel
//! alone cannot say that the program waits for someone to type.
//!
//! A probe also returns a *mark*: the group, and its leader's main thread
//! with how many times it has left a CPU. The actor takes a mark before
//! each write ([`mark`]: a few small reads, no scan); a later probe with
//! another mark saw the program wake (and sleep again) after that input,
//! which is how "it waits for input *again*" is told apart from "the input
//! has not reached it yet".
//!
//! Everything here is plain file reading; nothing is `unsafe`. Where the
//! kernel cannot be asked (no `/proc`, permission denied), the verdict is
//! [`Verdict::Unknown`] and callers fall back to the text heuristic.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sys;

/// What counts as the program's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InputTarget {
    /// The PTY's secondary side (its device number); `/dev/tty` counts too.
    Tty {
        /// `st_rdev` of the terminal device.
        rdev: u64,
    },
    /// The read end of the stdin pipe (its inode).
    Pipe {
        /// `st_ino` of the pipe.
        ino: u64,
    },
}

/// Which processes are asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Members of this process group (the PTY's foreground group).
    Group(u32),
    /// Members of the session this process leads (a pipe child's tree).
    Session(u32),
}

/// The kernel's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Some task is runnable, or the group is changing under the probe.
    Running,
    /// A task sleeps reading the input, or watching it alone, and none is
    /// runnable.
    Input,
    /// A task sleeps in an event loop that watches the input among other
    /// fds (timers, wake-up fds, pipes), none reads it plainly and none is
    /// runnable: it may be awaiting a timer or a promise just as well.
    EventLoop,
    /// Every task sleeps on something else (a timer, the network, a child).
    Other,
    /// The kernel could not be asked, or the program relays its input to
    /// a socket (ssh): the program that matters runs elsewhere.
    Unknown,
}

/// One probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Probe {
    /// The answer.
    pub(crate) verdict: Verdict,
    /// Hash of the group and its leader's context switches ([`mark`]).
    pub(crate) mark: u64,
}

/// `/dev/tty`'s device number (major 5, minor 0): a program that opened its
/// controlling terminal by that name reads the same PTY.
const DEV_TTY_RDEV: u64 = 5 << 8;

/// Most entries of a `poll` array read from a program's memory.
const MAX_POLL_FDS: usize = 4096;

/// Highest `nfds` of a `select` set read from a program's memory (FD_SETSIZE).
const MAX_SELECT_FDS: u64 = 1024;

/// System call numbers of the calls that can wait for input.
#[cfg(target_arch = "x86_64")]
mod nr {
    pub(super) const READS: &[u64] = &[0, 17, 19]; // read, pread64, readv
    pub(super) const SELECTS: &[u64] = &[23, 270]; // select, pselect6
    pub(super) const POLLS: &[u64] = &[7, 271]; // poll, ppoll
    pub(super) const EPOLLS: &[u64] = &[232, 281, 441]; // epoll_wait, epoll_pwait, epoll_pwait2
}

/// System call numbers of the calls that can wait for input.
#[cfg(target_arch = "aarch64")]
mod nr {
    pub(super) const READS: &[u64] = &[63, 65, 67]; // read, readv, pread64
    pub(super) const SELECTS: &[u64] = &[72]; // pselect6
    pub(super) const POLLS: &[u64] = &[73]; // ppoll
    pub(super) const EPOLLS: &[u64] = &[22, 441]; // epoll_pwait, epoll_pwait2
}

/// System call numbers of the calls that can wait for input.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod nr {
    pub(super) const READS: &[u64] = &[];
    pub(super) const SELECTS: &[u64] = &[];
    pub(super) const POLLS: &[u64] = &[];
    pub(super) const EPOLLS: &[u64] = &[];
}

/// A parsed `/proc/<pid>/task/<tid>/syscall`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Syscall {
    /// The task is on a CPU (or about to be).
    Running,
    /// Blocked in this call with these arguments.
    Blocked {
        /// The call's number.
        nr: u64,
        /// Its six arguments.
        args: [u64; 6],
    },
    /// Blocked outside any call (stopped, say).
    NotInCall,
}

/// Parses the `syscall` file: `running`, `-1 sp pc`, or the number and six
/// arguments in hex, then the stack and instruction pointers.
pub(crate) fn parse_syscall(text: &str) -> Option<Syscall> {
    let text = text.trim();
    if text == "running" {
        return Some(Syscall::Running);
    }
    let mut fields = text.split_ascii_whitespace();
    let first = fields.next()?;
    if first.starts_with('-') {
        return Some(Syscall::NotInCall);
    }
    let nr = first.parse().ok()?;
    let mut args = [0u64; 6];
    for a in &mut args {
        let f = fields.next()?;
        *a = u64::from_str_radix(f.trim_start_matches("0x"), 16).ok()?;
    }
    Some(Syscall::Blocked { nr, args })
}

/// The target fds of an epoll set, from `/proc/<pid>/fdinfo/<epfd>`
/// (`tfd:        0 events: ...` lines).
pub(crate) fn parse_epoll_fds(fdinfo: &str) -> Vec<i64> {
    fdinfo
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("tfd:"))
        .filter_map(|rest| rest.split_ascii_whitespace().next()?.parse().ok())
        .collect()
}

/// The fds of a `poll` array (8 bytes each: fd, events, revents) that wait
/// for reading.
pub(crate) fn parse_pollfds(raw: &[u8]) -> Vec<i64> {
    const POLLIN: i16 = 0x1;
    const POLLPRI: i16 = 0x2;
    raw.chunks_exact(8)
        .filter_map(|e| {
            let fd = i32::from_ne_bytes([e[0], e[1], e[2], e[3]]);
            let events = i16::from_ne_bytes([e[4], e[5]]);
            (fd >= 0 && events & (POLLIN | POLLPRI) != 0).then_some(i64::from(fd))
        })
        .collect()
}

/// The fds set in a `select` bit set of `nfds` bits.
pub(crate) fn parse_fdset(raw: &[u8], nfds: u64) -> Vec<i64> {
    (0..nfds.min(raw.len() as u64 * 8))
        .filter(|fd| raw[(fd / 8) as usize] & (1 << (fd % 8)) != 0)
        .filter_map(|fd| i64::try_from(fd).ok())
        .collect()
}

/// Asks the kernel whether the processes in `scope` wait for `target`.
/// Group membership comes from a scan of `/proc` at most `max_age` old
/// (shared by every probe: a daemon with many processes scans once per
/// sweep, not once per process).
pub(crate) fn probe(scope: Scope, target: InputTarget, max_age: Duration) -> Probe {
    let members = members(scope, max_age);
    let mark = mark(scope);
    if members.is_empty() {
        // The group is changing hands (a job starting or ending).
        return Probe { verdict: Verdict::Running, mark };
    }
    let mut running = false;
    let mut input = false;
    let mut event_loop = false;
    let mut unknown = false;
    let mut relay = false;
    for pid in members {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for tid in tasks.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
            let base = format!("/proc/{pid}/task/{tid}");
            let Some(stat) = std::fs::read_to_string(format!("{base}/stat"))
                .ok()
                .and_then(|t| sys::parse_stat(&t))
            else {
                continue;
            };
            match stat.state {
                'R' => running = true,
                'Z' | 'X' | 'x' => continue,
                _ => {}
            }
            match std::fs::read_to_string(format!("{base}/syscall")).map(|t| parse_syscall(&t)) {
                Ok(Some(Syscall::Running)) => running = true,
                Ok(Some(Syscall::Blocked { nr, args })) => {
                    match watches_input(pid, tid, nr, args, target) {
                        Waits::Input => input = true,
                        Waits::EventLoop => event_loop = true,
                        Waits::Relay => relay = true,
                        Waits::Other => {}
                    }
                }
                Ok(Some(Syscall::NotInCall)) => {}
                Ok(None) | Err(_) => unknown = true,
            }
        }
    }
    let verdict = if running {
        Verdict::Running
    } else if input {
        Verdict::Input
    } else if event_loop {
        Verdict::EventLoop
    } else if unknown || relay {
        Verdict::Unknown
    } else {
        Verdict::Other
    };
    Probe { verdict, mark }
}

/// The scope and its leader's main thread with its context switches:
/// changes when the leader ran and slept again, or when another group took
/// the terminal. One small
/// read, taken before every write: REPLs, shells and debuggers read their
/// input on the main thread.
pub(crate) fn mark(scope: Scope) -> u64 {
    let mut hasher = DefaultHasher::new();
    let leader = match scope {
        Scope::Group(pgrp) => {
            (0u8, pgrp).hash(&mut hasher);
            pgrp
        }
        Scope::Session(leader) => {
            (1u8, leader).hash(&mut hasher);
            leader
        }
    };
    schedule_count(&format!("/proc/{leader}")).hash(&mut hasher);
    hasher.finish()
}

/// How many times the task has gone off a CPU (voluntary and involuntary
/// context switches from `status`; 0 when unavailable, which only weakens
/// the mark). Counting switches *off* the CPU matters: a mark taken while
/// the program still runs (busy with the previous write) must change when
/// it finally sleeps, even if it never slept in between.
fn schedule_count(task: &str) -> u64 {
    let Ok(status) = std::fs::read_to_string(format!("{task}/status")) else { return 0 };
    status
        .lines()
        .filter(|l| {
            l.starts_with("voluntary_ctxt_switches:")
                || l.starts_with("nonvoluntary_ctxt_switches:")
        })
        .filter_map(|l| l.split_ascii_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// Every process's group and session, as of `at`.
struct Table {
    at: Instant,
    rows: Vec<(u32, u32, u32)>,
}

/// The last scan of `/proc`, shared by all probes.
static TABLE: Mutex<Option<Table>> = Mutex::new(None);

/// The pids in `scope`, from a scan at most `max_age` old.
fn members(scope: Scope, max_age: Duration) -> Vec<u32> {
    let mut table = TABLE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let key = match scope {
        Scope::Group(g) => g,
        Scope::Session(leader) => leader,
    };
    // A scope the last scan never saw (a new job) is scanned for at once.
    let fresh = table
        .as_ref()
        .is_some_and(|t| t.at.elapsed() <= max_age && t.rows.iter().any(|(pid, ..)| *pid == key));
    if !fresh {
        let rows = sys::all_pids()
            .into_iter()
            .filter_map(|pid| sys::proc_stat(pid).map(|s| (pid, s.pgrp, s.session)))
            .collect();
        *table = Some(Table { at: Instant::now(), rows });
    }
    table
        .as_ref()
        .map(|t| {
            t.rows
                .iter()
                .filter(|(pid, pgrp, session)| match scope {
                    Scope::Group(g) => *pgrp == g,
                    Scope::Session(leader) => *session == leader || *pid == leader,
                })
                .map(|(pid, ..)| *pid)
                .collect()
        })
        .unwrap_or_default()
}

/// What a blocked task waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waits {
    /// Not the input.
    Other,
    /// The input alone (or a read of it).
    Input,
    /// The input among other fds that are not sockets: an event loop.
    EventLoop,
    /// The input and a socket at once: a relay (ssh, `docker exec`) whose
    /// real program is elsewhere, so the kernel cannot say whether *that*
    /// program waits.
    Relay,
}

/// What a task blocked in call `nr` waits to read.
fn watches_input(pid: u32, tid: u32, nr: u64, args: [u64; 6], target: InputTarget) -> Waits {
    let fds: Vec<i64> = if nr::READS.contains(&nr) {
        vec![i64::try_from(args[0]).unwrap_or(-1)]
    } else if nr::SELECTS.contains(&nr) {
        let nfds = args[0].min(MAX_SELECT_FDS);
        let len = usize::try_from(nfds.div_ceil(8)).unwrap_or(0);
        match read_memory(pid, tid, args[1], len) {
            Some(raw) => parse_fdset(&raw, nfds),
            // Unreadable set: any fd below nfds may be watched.
            None => (0..i64::try_from(nfds).unwrap_or(0)).collect(),
        }
    } else if nr::POLLS.contains(&nr) {
        let n = usize::try_from(args[1]).unwrap_or(0).min(MAX_POLL_FDS);
        match read_memory(pid, tid, args[0], n * 8) {
            Some(raw) => parse_pollfds(&raw),
            None => open_fds(pid),
        }
    } else if nr::EPOLLS.contains(&nr) {
        std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", args[0]))
            .map(|t| parse_epoll_fds(&t))
            .unwrap_or_default()
    } else {
        return Waits::Other;
    };
    let mut input = false;
    let mut socket = false;
    let mut other = false;
    for fd in fds {
        match fd_kind(pid, fd, target) {
            FdKind::Input => input = true,
            FdKind::Socket => socket = true,
            FdKind::Other => other = true,
            FdKind::Gone => {}
        }
    }
    match (input, socket, other) {
        (true, true, _) => Waits::Relay,
        (true, false, true) => Waits::EventLoop,
        (true, false, false) => Waits::Input,
        (false, ..) => Waits::Other,
    }
}

/// Bytes of a task's memory, if the kernel lets portald read them.
fn read_memory(pid: u32, tid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    if addr == 0 || len == 0 {
        return None;
    }
    let file = std::fs::File::open(format!("/proc/{pid}/task/{tid}/mem")).ok()?;
    let mut buf = vec![0u8; len];
    file.read_exact_at(&mut buf, addr).ok()?;
    Some(buf)
}

fn open_fds(pid: u32) -> Vec<i64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// What an fd of a waiting task is.
enum FdKind {
    /// The program's input.
    Input,
    /// A socket (network or local).
    Socket,
    /// Anything else (a timer, an eventfd, another pipe).
    Other,
    /// Not open (closed since the call began): it watches nothing.
    Gone,
}

/// What fd `fd` of `pid` is.
fn fd_kind(pid: u32, fd: i64, target: InputTarget) -> FdKind {
    if fd < 0 {
        return FdKind::Gone;
    }
    let Ok(meta) = std::fs::metadata(format!("/proc/{pid}/fd/{fd}")) else {
        return FdKind::Gone;
    };
    let ty = meta.file_type();
    let input = match target {
        InputTarget::Tty { rdev } => {
            ty.is_char_device() && (meta.rdev() == rdev || meta.rdev() == DEV_TTY_RDEV)
        }
        InputTarget::Pipe { ino } => ty.is_fifo() && meta.ino() == ino,
    };
    if input {
        FdKind::Input
    } else if ty.is_socket() {
        FdKind::Socket
    } else {
        FdKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_lines_parse() {
        assert_eq!(parse_syscall("running\n"), Some(Syscall::Running));
        assert_eq!(parse_syscall("-1 0x7ffd 0x7f00\n"), Some(Syscall::NotInCall));
        assert_eq!(
            parse_syscall("270 0x1 0x7ffc 0x0 0x0 0x0 0x8 0x7ffc 0x7f01\n"),
            Some(Syscall::Blocked { nr: 270, args: [1, 0x7ffc, 0, 0, 0, 8] })
        );
        assert_eq!(parse_syscall("7 0x5 0x2\n"), None, "a short line is not trusted");
    }

    #[test]
    fn fd_sets_poll_arrays_and_epoll_info_decode() {
        assert_eq!(parse_fdset(&[0b0000_0101], 3), vec![0, 2]);
        assert_eq!(parse_fdset(&[0xff], 2), vec![0, 1], "only nfds bits count");
        let mut poll = Vec::new();
        for (fd, events) in [(0i32, 1i16), (5, 4), (-1, 1), (7, 2)] {
            poll.extend_from_slice(&fd.to_ne_bytes());
            poll.extend_from_slice(&events.to_ne_bytes());
            poll.extend_from_slice(&0i16.to_ne_bytes());
        }
        assert_eq!(parse_pollfds(&poll), vec![0, 7], "POLLOUT-only and negative fds are not reads");
        let info = "pos:\t0\nflags:\t02\nmnt_id:\t15\ntfd:        0 events:       19 data: 0 pos:0 ino:5 sdev:18\ntfd:       12 events: 19 data: c\n";
        assert_eq!(parse_epoll_fds(info), vec![0, 12]);
    }

    /// A real child blocked in `read` on a pipe is seen as waiting for that
    /// pipe; the same child in `sleep` is not.
    #[test]
    fn a_child_reading_its_stdin_pipe_waits_for_input() {
        use std::os::fd::AsFd as _;
        // Its own session (setsid(1) execs it as the session's leader, not
        // being a group leader itself), so the probe sees it and not this
        // test process.
        let mut cmd = std::process::Command::new("setsid");
        cmd.args(["sh", "-c", "read x; sleep 30"]).stdin(std::process::Stdio::piped());
        let mut child = cmd.spawn().expect("sh runs");
        let stdin = child.stdin.take().expect("piped");
        let ino = std::fs::File::from(stdin.as_fd().try_clone_to_owned().expect("dup"))
            .metadata()
            .expect("fstat")
            .ino();
        let pid = child.id();
        let target = InputTarget::Pipe { ino };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let probe_pid = |want: Verdict| loop {
            let p = probe(Scope::Session(pid), target, Duration::ZERO);
            if p.verdict == want {
                return p;
            }
            assert!(std::time::Instant::now() < deadline, "never saw {want:?}, last {p:?}");
            std::thread::yield_now();
        };
        let first = probe_pid(Verdict::Input);
        drop(stdin);
        // EOF ends the read; `sh` waiting for `sleep` is not an input wait.
        let later = probe_pid(Verdict::Other);
        assert_ne!(first.mark, later.mark, "the mark moves when the program runs");
        let _ = child.kill();
        let _ = child.wait();
    }
}
