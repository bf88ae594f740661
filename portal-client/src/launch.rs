//! Auto-starting `portald` for clients (`portal-shim`, `portal-cli`).
//!
//! [`connect_or_start`] connects to the socket; when nothing answers it starts
//! the daemon binary ([`crate::paths::daemon_binary`]) detached (`--detach`: its
//! own session, surviving the client) and waits, bounded, until it answers. Two
//! clients racing end with one daemon: the loser's daemon finds the lock taken
//! and exits with [`EXIT_ALREADY_RUNNING`], and both clients connect to the winner.
//!
//! [`Client::connect_to`], the connection every client command makes, is
//! here rather than beside the rest of [`Client`]: for this machine it is
//! [`connect_or_start`], and `client` sits below this module.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::error::ClientError;
use crate::hosts::Target;

/// Exit code of `portald` when another daemon already holds the socket's lock
/// (EX_TEMPFAIL from sysexits.h: "try again later" is exactly what a racing
/// client should do, by connecting).
pub const EXIT_ALREADY_RUNNING: i32 = 75;

/// How long a client waits for a daemon it started to answer. Startup is
/// opening a database and binding a socket (milliseconds); 10 s covers a
/// cold disk and a loaded machine without hanging an agent forever.
pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(10);

/// How to reach (and if need be start) the daemon.
#[derive(Clone, Debug)]
pub struct LaunchOptions {
    /// Socket to connect to.
    pub socket: PathBuf,
    /// Data directory passed to a daemon this client starts (`None` = its default).
    pub data_dir: Option<PathBuf>,
    /// Whether to start a daemon when none answers.
    pub autostart: bool,
    /// How long to wait for a started daemon.
    pub timeout: Duration,
}

impl LaunchOptions {
    /// Options from the environment: `PORTAL_SOCKET`, `PORTAL_DATA_DIR` (or
    /// the client's `--socket` and `--data-dir`, see [`crate::paths::set_socket`]).
    #[must_use]
    pub fn from_env() -> Self {
        Self {
            socket: crate::paths::socket_path(),
            data_dir: crate::paths::data_dir_given(),
            autostart: true,
            timeout: DEFAULT_START_TIMEOUT,
        }
    }
}

/// Connects to the daemon, starting it first when nothing answers and
/// `autostart` is set.
///
/// # Errors
/// [`ClientError::Unavailable`] when nothing answers (and autostart is off or
/// the started daemon never answered), [`ClientError::Launch`] when no daemon
/// binary exists or it failed, [`ClientError::VersionMismatch`].
pub async fn connect_or_start(opts: &LaunchOptions) -> Result<Client, ClientError> {
    match Client::connect(&opts.socket).await {
        Err(ClientError::Unavailable { .. }) if opts.autostart => {}
        other => return other,
    }
    let mut child = spawn_daemon(opts)?;
    let deadline = Instant::now() + opts.timeout;
    let mut delay = Duration::from_millis(5);
    let mut exited_with = None;
    loop {
        match Client::connect(&opts.socket).await {
            Ok(client) => {
                reap_in_background(child);
                return Ok(client);
            }
            Err(ClientError::Unavailable { reason, .. }) => {
                if exited_with.is_none()
                    && let Ok(Some(status)) = child.try_wait()
                {
                    exited_with = Some(status);
                    if status.code() != Some(EXIT_ALREADY_RUNNING) {
                        return Err(ClientError::Launch(format!(
                            "portald exited with {status} before answering on {}; see its log {}",
                            opts.socket.display(),
                            daemon_log(opts).display()
                        )));
                    }
                }
                if Instant::now() >= deadline {
                    reap_in_background(child);
                    return Err(ClientError::Unavailable {
                        socket: opts.socket.clone(),
                        reason: format!(
                            "started portald but it did not answer within {:?} ({reason}); see {}",
                            opts.timeout,
                            daemon_log(opts).display()
                        ),
                    });
                }
            }
            Err(other) => {
                reap_in_background(child);
                return Err(other);
            }
        }
        // Polling is the one way to learn that another process started
        // listening; the backoff keeps it cheap and bounded by the deadline.
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(50));
    }
}

impl Client {
    /// Connects to `target`: this machine's daemon (started when
    /// `opts.autostart` and nothing answers), or a remote one over SSH.
    ///
    /// # Errors
    /// As [`connect_or_start`] or [`Client::connect_remote`].
    pub async fn connect_to(target: &Target, opts: &LaunchOptions) -> Result<Self, ClientError> {
        match target {
            Target::Local => connect_or_start(opts).await,
            Target::Remote(r) => Self::connect_remote(r, opts.autostart).await,
        }
    }
}

fn daemon_log(opts: &LaunchOptions) -> PathBuf {
    opts.data_dir.clone().unwrap_or_else(crate::paths::data_dir).join(crate::paths::DAEMON_LOG_FILE)
}

fn spawn_daemon(opts: &LaunchOptions) -> Result<Child, ClientError> {
    let daemon = crate::paths::daemon_binary().ok_or_else(|| {
        ClientError::Launch(format!(
            "no portald binary beside {} or on PATH; install it or set {}",
            std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
            crate::paths::ENV_DAEMON
        ))
    })?;
    let mut cmd = Command::new(&daemon);
    cmd.arg("--detach").arg("--socket").arg(&opts.socket);
    // Only a daemon handing itself over sets this; one leaked into a
    // client's environment must not reach a daemon it starts.
    cmd.env_remove(crate::environ::HANDOVER_ENV);
    if let Some(dir) = &opts.data_dir {
        cmd.arg("--data-dir").arg(dir);
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    detach(&mut cmd);
    tracing::info!(daemon = %daemon.display(), socket = %opts.socket.display(), "starting portald");
    let spawned = cmd.spawn();
    #[cfg(windows)]
    let spawned = spawned.or_else(|e| inside_a_job(&mut cmd, &e));
    spawned.map_err(|e| ClientError::Launch(format!("cannot execute {}: {e}", daemon.display())))
}

/// Its own process group: a Ctrl-C aimed at the client must not reach it.
/// The daemon then calls setsid() itself to leave the client's session.
#[cfg(unix)]
fn detach(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    cmd.process_group(0);
}

/// `DETACHED_PROCESS`: no console (so no window, and no Ctrl+C from the
/// client's); its own process group; and out of the client's job, so that
/// an MCP host that kills its job on exit does not take the daemon and its
/// programs with it.
#[cfg(windows)]
const DETACHED: u32 = 0x0000_0008 | 0x0000_0200 | 0x0100_0000;

/// The same without `CREATE_BREAKAWAY_FROM_JOB`.
#[cfg(windows)]
const DETACHED_IN_JOB: u32 = 0x0000_0008 | 0x0000_0200;

#[cfg(windows)]
fn detach(cmd: &mut Command) {
    use std::os::windows::process::CommandExt as _;
    cmd.creation_flags(DETACHED);
}

/// A job that forbids breaking away refuses `CREATE_BREAKAWAY_FROM_JOB`
/// (access denied): the daemon starts inside it then, and says it will end
/// with its client's job.
#[cfg(windows)]
fn inside_a_job(cmd: &mut Command, e: &std::io::Error) -> std::io::Result<Child> {
    use std::os::windows::process::CommandExt as _;
    if e.kind() != std::io::ErrorKind::PermissionDenied {
        return Err(std::io::Error::new(e.kind(), e.to_string()));
    }
    tracing::warn!(
        "this client's job does not let portald break away: portald starts inside it and ends \
         when the job does (start portald yourself, or register it with `portal-cli service \
         install`, to keep it)"
    );
    cmd.creation_flags(DETACHED_IN_JOB).spawn()
}

/// Waits for the daemon child on a thread so it never lingers as a zombie of
/// the client; if the client exits first the daemon is simply reparented.
fn reap_in_background(mut child: Child) {
    let spawned = std::thread::Builder::new().name("portald-reaper".into()).spawn(move || {
        let _status = child.wait();
    });
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "cannot start a reaper thread for portald");
    }
}
