//! What the binary-level tests share: a real `portald` child with its log
//! as lines, bounded waits on what it reports, and small RPC helpers.
#![allow(dead_code, reason = "each test file uses a part")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use portal_client::client::Client;
use portal_proto::v1 as pb;

/// The test kit's start builder, included by path: this crate cannot
/// depend on `portal-tests`, which depends on it.
#[path = "../../../tests/src/start.rs"]
#[allow(unreachable_pub, reason = "written public for the test kit's library")]
mod start;
pub(crate) use start::Start;

pub(crate) const BOUND: Duration = Duration::from_secs(10);

pub(crate) fn dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("pd").tempdir_in("/tmp").unwrap()
}

/// A `portald` child and the lines of its log, so tests wait on what the
/// daemon reports ("listening", "reaped orphans") instead of polling.
pub(crate) struct Daemon {
    pub(crate) child: Child,
    pub(crate) socket: PathBuf,
    pub(crate) log: tokio::sync::mpsc::UnboundedReceiver<String>,
}

pub(crate) fn spawn_daemon(dir: &Path) -> Daemon {
    spawn_daemon_from(dir, Path::new(env!("CARGO_BIN_EXE_portald")))
}

/// The `portal-holder` built with this `portald`.
pub(crate) fn holder_binary() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_portald")).with_file_name("portal-holder")
}

/// The `portal-cli` built with this `portald`.
pub(crate) fn cli_binary() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_portald")).with_file_name("portal-cli")
}

/// As [`spawn_daemon`], running `binary` (a copy of `portald` elsewhere).
pub(crate) fn spawn_daemon_from(dir: &Path, binary: &Path) -> Daemon {
    spawn_daemon_with(dir, binary, &[])
}

/// As [`spawn_daemon_from`], with `envs` in the daemon's environment.
pub(crate) fn spawn_daemon_with(dir: &Path, binary: &Path, envs: &[(&str, &str)]) -> Daemon {
    let socket = dir.join("s").join("portald.sock");
    let child = Command::new(binary)
        .envs(envs.iter().copied())
        .env("PORTAL_HOLDER", holder_binary())
        .arg("--socket")
        .arg(&socket)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--kill-grace-ms")
        .arg("500")
        .arg("--log")
        .arg("info,portald::server=debug,portald::proc::holding=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    watched(child, socket)
}

/// A daemon whose stderr is piped: its log is drained to the end (so it
/// never blocks on it), shown in the test's output, and handed to the test
/// line by line (see [`Daemon::wait_log`]).
pub(crate) fn watched(mut child: Child, socket: PathBuf) -> Daemon {
    let (tx, log) = tokio::sync::mpsc::unbounded_channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            let _ = tx.send(line);
        }
    });
    Daemon { child, socket, log }
}

impl Daemon {
    /// Waits, bounded, for a log line that satisfies `found`.
    pub(crate) async fn wait_log(&mut self, what: &str, found: impl Fn(&str) -> bool) {
        let seen = tokio::time::timeout(BOUND, async {
            while let Some(line) = self.log.recv().await {
                if found(&line) {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(seen, Ok(true), "portald never logged {what}");
    }

    /// Connects once the daemon reports that it listens (connections made
    /// before it serves wait in the socket's backlog).
    pub(crate) async fn connect(&mut self) -> Client {
        // Its own INFO line, not a warning that names a listening socket.
        self.wait_log("that it listens", |l| l.contains("INFO") && l.contains(" listening ")).await;
        Client::connect(&self.socket).await.unwrap()
    }
}

/// Waits for the daemon to exit without blocking the test's runtime (its
/// client connections must keep running for a graceful shutdown).
pub(crate) async fn wait_child(mut child: Child) -> std::process::ExitStatus {
    let waited = tokio::task::spawn_blocking(move || child.wait());
    tokio::time::timeout(BOUND, waited)
        .await
        .expect("portald exits within the bound")
        .unwrap()
        .unwrap()
}

pub(crate) fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
        }
    }
}

/// Waits (bounded) until `pid` is dead: SIGKILL is queued by `kill(2)`,
/// and the process dies when it is next scheduled, which on a busy machine
/// is after the call that sent it has returned. A pidfd becomes readable
/// when its process ends.
pub(crate) async fn dies(pid: u32) -> bool {
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let Some(fd) = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok())
    else {
        return true; // gone already
    };
    tokio::task::spawn_blocking(move || {
        let mut fds = [rustix::event::PollFd::new(&fd, rustix::event::PollFlags::IN)];
        let bound = rustix::event::Timespec { tv_sec: 5, tv_nsec: 0 };
        rustix::event::poll(&mut fds, Some(&bound)).is_ok_and(|n| n == 1) || is_dead(pid)
    })
    .await
    .unwrap_or(false)
}

/// Sends a signal with the `kill` utility (keeps `unsafe` out of tests).
pub(crate) fn unsafe_free_kill(pid: u32, sig: &str) -> bool {
    Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status().unwrap().success()
}

/// Follows a process's output from its start until `needle` appeared.
pub(crate) async fn follow_bytes_text(rpc: &mut Rpc, id: u64, needle: &str) {
    let req = pb::FollowRequest {
        proc: Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) }),
        from_start: true,
        ..Default::default()
    };
    let mut events = rpc.follow(req).await.unwrap().into_inner();
    let mut seen = Vec::new();
    tokio::time::timeout(BOUND, async {
        while !String::from_utf8_lossy(&seen).contains(needle) {
            match events.message().await.unwrap().and_then(|e| e.event) {
                Some(pb::follow_event::Event::Output(r)) => seen.extend_from_slice(&r.data),
                Some(_) => {}
                None => panic!("the stream ended before {needle:?}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{needle:?} not printed within {BOUND:?}"));
}

/// Waits, bounded, until a process has ended; returns it.
pub(crate) async fn wait_end(rpc: &mut Rpc, id: u64) -> pb::Process {
    let by_id = Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) });
    let req = pb::FollowRequest { proc: by_id.clone(), from_start: true, ..Default::default() };
    let mut events = rpc.follow(req).await.unwrap().into_inner();
    tokio::time::timeout(BOUND, async {
        loop {
            let p =
                rpc.inspect(pb::InspectRequest { proc: by_id.clone() }).await.unwrap().into_inner();
            if p.status() != pb::Status::Running {
                return p;
            }
            if events.message().await.unwrap().is_none() {
                let p = rpc.inspect(pb::InspectRequest { proc: by_id.clone() }).await.unwrap();
                return p.into_inner();
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("process {id} did not end within {BOUND:?}"))
}

pub(crate) type Rpc = pb::portal_client::PortalClient<tonic::transport::Channel>;
