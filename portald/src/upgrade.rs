//! Live upgrade: replacing the running portald with the binary now on disk
//! while every program keeps running.
//!
//! The programs never notice, because `portal-holder`, not the daemon, is
//! their parent and keeps a copy of their descriptors. An upgrade is:
//! 1. [`check`]: the new binary runs `portald --check-upgrade`, which prints
//!    its [`Readiness`]; a binary that does not start, or speaks another
//!    holder protocol, or knows an older database schema, is refused and the
//!    old daemon keeps serving (the caller is told why).
//! 2. The handover (in `server::serve` and the actors): the gRPC server
//!    drains, every reader thread stops at a chunk boundary (what it did not
//!    read waits in the kernel), every actor leaves its in-memory state with
//!    the holder, and the store commits and closes.
//! 3. [`exec`]: the same process execs the new binary with the listening
//!    socket and the single-instance lock inherited (clients that connect
//!    meanwhile wait in the backlog; the pid, which a service manager
//!    tracks, stays), and a descriptor of the old binary to fall back to.
//! 4. The new daemon binds on the inherited socket and adopts every program
//!    from the holder, exactly as after a crash, but with the carried state.
//!    If it fails before serving, it execs the old binary
//!    ([`fall_back`]), which adopts them in turn and reports the failure.

use std::ffi::OsString;
use std::os::fd::{AsRawFd as _, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The flag that makes `portald` print its [`Readiness`] and exit.
pub const CHECK_FLAG: &str = "--check-upgrade";

/// The environment variable that carries a handover into the new binary:
/// `listen=FD,lock=FD,fallback=FD,from=VERSION[,failed=REASON]`.
pub const HANDOVER_ENV: &str = portal_client::environ::HANDOVER_ENV;

/// How long the new binary's self-check may take: it only prints constants.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// What a binary says about itself when asked whether it can take over.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Readiness {
    /// Its crate version.
    pub version: String,
    /// The holder protocol it speaks (the running holder is not replaced).
    pub holder_protocol: u32,
    /// The newest database schema it knows.
    pub schema: usize,
    /// Its client wire protocol.
    pub protocol: u32,
}

/// This binary's readiness.
#[must_use]
pub fn readiness() -> Readiness {
    Readiness {
        version: env!("CARGO_PKG_VERSION").into(),
        holder_protocol: portal_holder::wire::PROTOCOL,
        schema: crate::store::schema::VERSION,
        protocol: portal_proto::PROTOCOL_VERSION,
    }
}

/// Why an upgrade was refused before anything was handed over.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    /// This daemon runs inside another program (tests), not as `portald`.
    #[error("this portald runs inside another program and cannot replace itself")]
    NotSelfHosted,
    /// An upgrade is already under way.
    #[error("an upgrade is already under way")]
    Busy,
    /// The new binary could not be run or did not answer.
    #[error("the new binary {} did not start: {why}", binary.display())]
    DidNotStart {
        /// The binary.
        binary: PathBuf,
        /// What happened.
        why: String,
    },
    /// The new binary cannot take over these programs.
    #[error("the new binary {} (portald {version}) cannot take over: {why}", binary.display())]
    Incompatible {
        /// The binary.
        binary: PathBuf,
        /// Its version.
        version: String,
        /// Why, and what to do.
        why: String,
    },
}

/// A checked upgrade, waiting for the handover to finish.
#[derive(Debug)]
pub struct Plan {
    /// The binary to exec.
    pub(crate) binary: PathBuf,
    /// Its arguments.
    pub(crate) args: Vec<OsString>,
    /// What it said about itself.
    pub(crate) readiness: Readiness,
}

/// Runs `binary --check-upgrade` and decides whether it can take over from
/// this daemon. Blocking.
pub(crate) fn check(
    this: &crate::config::SelfExec,
    binary: Option<&Path>,
) -> Result<Plan, Refused> {
    let binary = binary.map_or_else(|| this.binary.clone(), Path::to_path_buf);
    let did_not_start = |why: String| Refused::DidNotStart { binary: binary.clone(), why };
    // With the daemon's own arguments: a binary that no longer takes one of
    // them is refused here, not after the handover.
    let mut child = std::process::Command::new(&binary)
        .args(&this.args)
        .arg(CHECK_FLAG)
        .env_remove(HANDOVER_ENV)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| did_not_start(e.to_string()))?;
    let deadline = std::time::Instant::now() + CHECK_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                #[allow(
                    clippy::disallowed_methods,
                    reason = "a blocking thread waiting for a child with a deadline"
                )]
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(did_not_start(format!(
                    "`{} {CHECK_FLAG}` did not answer within {CHECK_TIMEOUT:?}",
                    binary.display()
                )));
            }
            Err(e) => return Err(did_not_start(e.to_string())),
        }
    };
    let output = child.wait_with_output().map_err(|e| did_not_start(e.to_string()))?;
    if !status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr.trim().lines().last().unwrap_or("").chars().take(400).collect();
        return Err(did_not_start(format!(
            "`{} {CHECK_FLAG}` failed ({status}){}",
            binary.display(),
            if tail.is_empty() { String::new() } else { format!(": {tail}") }
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let readiness: Readiness = serde_json::from_str(stdout.trim()).map_err(|_| {
        did_not_start(format!(
            "it did not answer {CHECK_FLAG} (is it a portald older than live upgrades?)"
        ))
    })?;
    let ours = self::readiness();
    let incompatible = |why: String| Refused::Incompatible {
        binary: binary.clone(),
        version: readiness.version.clone(),
        why,
    };
    if readiness.holder_protocol != ours.holder_protocol {
        return Err(incompatible(format!(
            "it speaks holder protocol {}, the running portal-holder {}; upgrade with \
             `portal-cli daemon stop` (which ends every program) and start it again",
            readiness.holder_protocol, ours.holder_protocol
        )));
    }
    if readiness.schema < ours.schema {
        return Err(incompatible(format!(
            "it knows database schema {}, the database is at {}; a downgrade needs \
             `portal-cli daemon stop` and a fresh database",
            readiness.schema, ours.schema
        )));
    }
    Ok(Plan { binary, args: this.args.clone(), readiness })
}

/// What a daemon was handed by the one it replaced.
#[derive(Debug)]
pub struct Inherited {
    /// The listening socket.
    pub(crate) listener: Option<OwnedFd>,
    /// The single-instance lock, still locked.
    pub(crate) lock: Option<OwnedFd>,
    /// The binary it replaced, to go back to if this one fails.
    fallback: Option<OwnedFd>,
    /// That binary's version.
    pub(crate) from: Option<String>,
    /// Set when this is the old binary again: why its successor failed.
    pub(crate) failed: Option<String>,
}

/// What this process inherited, taken once by `bind`.
static INHERITED: Mutex<Option<Inherited>> = Mutex::new(None);

/// Facts about the upgrade that started this daemon, for `GetInfo`.
static LAST_UPGRADE: Mutex<(Option<String>, Option<String>)> = Mutex::new((None, None));

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reads [`HANDOVER_ENV`] at startup; call once from `main` before anything
/// else opens descriptors. Does nothing when this is no handover.
pub fn take_handover_env() {
    let Some(value) = std::env::var_os(HANDOVER_ENV) else { return };
    let value = value.to_string_lossy().into_owned();
    let mut inherited =
        Inherited { listener: None, lock: None, fallback: None, from: None, failed: None };
    for part in value.split(',') {
        let Some((key, val)) = part.split_once('=') else { continue };
        let fd = || val.parse::<RawFd>().ok().and_then(owned_inherited);
        match key {
            "listen" => inherited.listener = fd(),
            "lock" => inherited.lock = fd(),
            "fallback" => inherited.fallback = fd(),
            "from" => inherited.from = Some(val.to_owned()),
            "failed" => inherited.failed = Some(val.replace('\u{1f}', ",")),
            _ => {}
        }
    }
    *lock(&LAST_UPGRADE) = (inherited.from.clone(), inherited.failed.clone());
    *lock(&INHERITED) = Some(inherited);
}

/// Takes ownership of an inherited descriptor and marks it close-on-exec
/// again (programs must not inherit the daemon's socket). An fd number the
/// variable names that is not open here is ignored.
fn owned_inherited(fd: RawFd) -> Option<OwnedFd> {
    let owned = crate::sys::take_inherited_fd(fd)?;
    let _ = rustix::io::fcntl_setfd(&owned, rustix::io::FdFlags::CLOEXEC);
    Some(owned)
}

/// The listener and lock a predecessor handed over, if any (taken once).
pub(crate) fn take_inherited() -> Option<Inherited> {
    lock(&INHERITED).take()
}

/// The version this daemon was upgraded from, and why the upgrade failed
/// when this is the old binary serving again.
pub(crate) fn last_upgrade() -> (Option<String>, Option<String>) {
    lock(&LAST_UPGRADE).clone()
}

/// What `serve` hands back when it ended for an upgrade.
#[derive(Debug)]
pub struct Handover {
    pub(crate) plan: Plan,
    pub(crate) listener: OwnedFd,
    pub(crate) lock: OwnedFd,
}

fn inheritable(fd: &OwnedFd) -> std::io::Result<RawFd> {
    rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
    Ok(fd.as_raw_fd())
}

/// Execs the new binary with the socket, the lock and a way back. Returns
/// only if that failed, after trying to exec this binary again instead
/// (which adopts the programs, as the new one would have).
pub fn exec(handover: Handover) -> std::io::Error {
    use std::os::unix::process::CommandExt as _;
    let Handover { plan, listener, lock, .. } = handover;
    let fallback = std::fs::File::open("/proc/self/exe").map(OwnedFd::from);
    let fds = (|| -> std::io::Result<String> {
        let mut env = format!("listen={},lock={}", inheritable(&listener)?, inheritable(&lock)?);
        if let Ok(f) = &fallback {
            env.push_str(&format!(",fallback={}", inheritable(f)?));
        }
        env.push_str(&format!(",from={}", env!("CARGO_PKG_VERSION")));
        Ok(env)
    })();
    let err = match fds {
        Ok(env) => {
            tracing::info!(binary = %plan.binary.display(), version = %plan.readiness.version, "exec'ing the new portald");
            std::process::Command::new(&plan.binary).args(&plan.args).env(HANDOVER_ENV, env).exec()
        }
        Err(e) => e,
    };
    tracing::error!(binary = %plan.binary.display(), error = %err, "cannot exec the new portald; starting this one again");
    let Ok(fallback) = fallback else { return err };
    // The old binary is exec'd through this descriptor and does not know
    // it: it must not stay open in it (ELF binaries exec fine with it
    // close-on-exec).
    let _ = rustix::io::fcntl_setfd(&fallback, rustix::io::FdFlags::CLOEXEC);
    let reason = format!("cannot exec {}: {err}", plan.binary.display());
    let env = match (inheritable(&listener), inheritable(&lock)) {
        (Ok(l), Ok(k)) => format!("listen={l},lock={k},failed={}", escape(&reason)),
        _ => format!("failed={}", escape(&reason)),
    };
    let path = format!("/proc/self/fd/{}", fallback.as_raw_fd());
    std::process::Command::new(path).args(&plan.args).env(HANDOVER_ENV, env).exec()
}

/// Commas separate the handover's fields.
fn escape(reason: &str) -> String {
    reason.replace(',', "\u{1f}")
}

/// Called by a new binary that failed before it could serve: if it was
/// started by an upgrade, execs the binary it replaced (which adopts the
/// programs and reports `reason`). Returns if there is nothing to go back to.
pub fn fall_back(reason: &str) {
    use std::os::unix::process::CommandExt as _;
    let Some(fallback) = lock(&INHERITED).as_mut().and_then(|i| i.fallback.take()).or_else(|| {
        // `bind` took the rest; the way back is kept apart.
        lock(&FALLBACK).take()
    }) else {
        return;
    };
    let Ok(raw) = inheritable(&fallback) else { return };
    tracing::error!(
        reason,
        "the upgraded portald failed to start; going back to the one it replaced"
    );
    // The socket and the lock go back too: clients waiting in the backlog
    // are served by the old binary, and no other daemon slips in.
    let mut env = format!("failed={}", escape(reason));
    let socket = lock(&FALLBACK_SOCKET).take().or_else(|| {
        // Failed before `bind` took them.
        let mut inherited = lock(&INHERITED);
        let i = inherited.as_mut()?;
        Some((i.listener.take()?, i.lock.take()?))
    });
    if let Some((listener, held)) = &socket
        && let (Ok(l), Ok(k)) = (inheritable(listener), inheritable(held))
    {
        env = format!("listen={l},lock={k},{env}");
    }
    let path = format!("/proc/self/fd/{raw}");
    let err = std::process::Command::new(path)
        .args(std::env::args_os().skip(1))
        .env(HANDOVER_ENV, env)
        .exec();
    drop(socket);
    tracing::error!(error = %err, "cannot go back to the old portald either");
}

/// The way back, kept once `bind` has taken the listener and lock.
static FALLBACK: Mutex<Option<OwnedFd>> = Mutex::new(None);

/// Copies of the inherited listener and lock, for the way back.
static FALLBACK_SOCKET: Mutex<Option<(OwnedFd, OwnedFd)>> = Mutex::new(None);

/// Keeps the way back apart from what `bind` consumes: the old binary's
/// descriptor, and copies of the listening socket and the lock (the lock is
/// held while any copy is open).
pub(crate) fn keep_fallback(inherited: &mut Inherited) {
    if let Some(f) = inherited.fallback.take() {
        *lock(&FALLBACK) = Some(f);
        if let (Some(listener), Some(held)) = (&inherited.listener, &inherited.lock)
            && let (Ok(l), Ok(k)) = (listener.try_clone(), held.try_clone())
        {
            *lock(&FALLBACK_SOCKET) = Some((l, k));
        }
    }
}

/// Forgets the way back once the new daemon serves: from here on a failure
/// is a crash like any other, and the next start adopts the programs.
pub(crate) fn served() {
    lock(&FALLBACK).take();
    lock(&FALLBACK_SOCKET).take();
    if let Some(i) = lock(&INHERITED).as_mut() {
        i.fallback.take();
    }
}
