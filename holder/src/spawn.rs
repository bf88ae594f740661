//! Starting one program for the holder: a PTY (primary kept, the program's
//! controlling terminal the secondary) or three pipes, in a session of its
//! own, so that every program leads its own session and process group.
//!
//! Every program dies with the holder (`PR_SET_PDEATHSIG`, SIGKILL): a
//! program whose holder died has no parent that reaps it nor keeps its
//! descriptors, and no daemon would ever hear its exit, so it must not run
//! on unmanaged. The daemon sweeps what it left (its session and lineage)
//! and records why it ended.
#![allow(
    unsafe_code,
    reason = "Command::pre_exec is unsafe whatever it runs; each hook says why it is sound"
)]

use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};

use rustix::pty::OpenptFlags;

use crate::wire::Spawn;

/// A started program and the descriptors the holder keeps for it.
pub(crate) struct Started {
    /// Its pid.
    pub(crate) pid: u32,
    /// The PTY primary, or input, output and error.
    pub(crate) fds: Vec<OwnedFd>,
}

/// Starts `spec`'s program.
pub(crate) fn start(spec: &Spawn) -> std::io::Result<Started> {
    let mut cmd = Command::new(&spec.program);
    cmd.arg0(&spec.arg0)
        .args(&spec.args)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd);
    match spec.pty {
        Some((rows, cols)) => start_pty(cmd, rows, cols),
        None => start_pipes(cmd),
    }
}

fn start_pty(mut cmd: Command, rows: u16, cols: u16) -> std::io::Result<Started> {
    let primary =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&primary)?;
    rustix::pty::unlockpt(&primary)?;
    let name = rustix::pty::ptsname(&primary, Vec::new())?;
    let secondary: OwnedFd = rustix::fs::open(
        name.as_c_str(),
        rustix::fs::OFlags::RDWR | rustix::fs::OFlags::NOCTTY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let size = rustix::termios::Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
    rustix::termios::tcsetwinsize(&secondary, size)?;
    cmd.stdin(Stdio::from(secondary.try_clone()?))
        .stdout(Stdio::from(secondary.try_clone()?))
        .stderr(Stdio::from(secondary));
    let holder = rustix::process::getpid();
    // SAFETY: the hook runs in the forked child before exec and makes only
    // system calls (setsid, the TIOCSCTTY ioctl on its new stdin, prctl,
    // getppid), all async-signal-safe; it allocates nothing and touches no
    // lock.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::setsid()?;
            rustix::process::ioctl_tiocsctty(rustix::stdio::stdin())?;
            die_with(holder)
        });
    }
    let child = cmd.spawn()?;
    // The std Child is never waited on: the holder reaps every pid itself.
    Ok(Started { pid: child.id(), fds: vec![primary] })
}

fn start_pipes(mut cmd: Command) -> std::io::Result<Started> {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let holder = rustix::process::getpid();
    // SAFETY: the hook runs in the forked child before exec and only makes
    // system calls (setsid, prctl, getppid), which are async-signal-safe
    // and allocate nothing.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::setsid()?;
            die_with(holder)
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child.id();
    let (Some(input), Some(output), Some(error)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("the pipes were not created"));
    };
    Ok(Started { pid, fds: vec![input.into(), output.into(), error.into()] })
}

/// In the forked child: SIGKILL when the holder dies. The signal follows
/// the thread that forked, which is the holder's only one. A holder that
/// died between the fork and the prctl is seen as a new parent: the spawn
/// fails rather than start a program nobody holds.
fn die_with(holder: rustix::process::Pid) -> std::io::Result<()> {
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    if rustix::process::getppid() != Some(holder) {
        return Err(std::io::Error::other("portal-holder died while starting the program"));
    }
    Ok(())
}
