//! Binary-level tests of `portald`: signals, exit codes, files left behind,
//! single instance, orphan reaping. They run the real binary, so process-wide
//! settings (the child subreaper flag) apply to it, not to the test process.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use portal_proto::client::Client;
use portal_proto::v1 as pb;

const BOUND: Duration = Duration::from_secs(10);

fn dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("pd").tempdir_in("/tmp").unwrap()
}

fn spawn_daemon(dir: &Path) -> (Child, PathBuf) {
    let socket = dir.join("s").join("portald.sock");
    let child = Command::new(env!("CARGO_BIN_EXE_portald"))
        .arg("--socket")
        .arg(&socket)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--kill-grace-ms")
        .arg("500")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    (child, socket)
}

/// Connects, retrying while the daemon starts (the binary binds asynchronously
/// from the test's point of view; this is the same bounded poll clients use).
async fn connect(socket: &Path) -> Client {
    let opts = portal_proto::launch::LaunchOptions {
        socket: socket.to_path_buf(),
        data_dir: None,
        autostart: false,
        timeout: BOUND,
    };
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        match portal_proto::launch::connect_or_start(&opts).await {
            Ok(c) => return c,
            Err(e) if tokio::time::Instant::now() > deadline => {
                panic!("daemon never answered: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Waits for the daemon to exit without blocking the test's runtime (its
/// client connections must keep running for a graceful shutdown).
async fn wait_child(mut child: Child) -> std::process::ExitStatus {
    let waited = tokio::task::spawn_blocking(move || child.wait());
    tokio::time::timeout(BOUND, waited)
        .await
        .expect("portald exits within the bound")
        .unwrap()
        .unwrap()
}

fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
        }
    }
}

#[tokio::test]
async fn sigterm_stops_children_and_removes_the_socket() {
    let d = dir();
    let (child, socket) = spawn_daemon(d.path());
    let client = connect(&socket).await;
    let mut rpc = client.rpc();
    let req = pb::StartRequest {
        command: "sleep".into(),
        args: vec!["300".into()],
        ..Default::default()
    };
    let p = rpc.start(req).await.unwrap().into_inner();
    let req = pb::StartRequest {
        command: "sh".into(),
        args: vec!["-c".into(), "trap '' HUP TERM; sleep 300".into()],
        mode: pb::Mode::Pty.into(),
        ..Default::default()
    };
    let stubborn = rpc.start(req).await.unwrap().into_inner();
    let rc = unsafe_free_kill(child.id(), "TERM");
    assert!(rc);
    let status = wait_child(child).await;
    assert!(status.success(), "portald exited with {status}");
    assert!(is_dead(p.pid) && is_dead(stubborn.pid));
    assert!(!socket.exists(), "socket left behind");
    assert!(!socket.with_file_name("portald.sock.lock").exists(), "lock file left behind");
}

/// Sends a signal with the `kill` utility (keeps `unsafe` out of tests).
fn unsafe_free_kill(pid: u32, sig: &str) -> bool {
    Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status().unwrap().success()
}

#[tokio::test]
async fn a_second_instance_exits_with_already_running() {
    let d = dir();
    let (first, socket) = spawn_daemon(d.path());
    connect(&socket).await;
    let (second, _) = spawn_daemon(d.path());
    let status = wait_child(second).await;
    assert_eq!(status.code(), Some(portal_proto::launch::EXIT_ALREADY_RUNNING));
    // The first one still answers.
    connect(&socket).await;
    assert!(unsafe_free_kill(first.id(), "INT"));
    assert!(wait_child(first).await.success());
}

#[tokio::test]
async fn orphans_of_managed_processes_are_reaped() {
    let d = dir();
    let (child, socket) = spawn_daemon(d.path());
    let client = connect(&socket).await;
    let mut rpc = client.rpc();
    // The middle shell exits at once; its child is orphaned, reparented to
    // portald (a subreaper) and must not stay a zombie when it exits.
    let req = pb::StartRequest {
        command: "sh".into(),
        args: vec!["-c".into(), "sh -c 'sleep 0.2; echo orphan-done' & echo $!".into()],
        ..Default::default()
    };
    let p = rpc.start(req).await.unwrap().into_inner();
    let follow = pb::FollowRequest {
        proc: Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(p.id)) }),
        from_start: true,
        ..Default::default()
    };
    let mut out = Vec::new();
    let mut events = rpc.follow(follow).await.unwrap().into_inner();
    let exited = tokio::time::timeout(BOUND, async {
        while let Some(ev) = events.message().await.unwrap() {
            match ev.event {
                Some(pb::follow_event::Event::Output(r)) => out.extend_from_slice(&r.data),
                Some(pb::follow_event::Event::Exited(p)) => return p,
                _ => {}
            }
        }
        panic!("no exit event");
    })
    .await
    .expect("exit within the bound");
    assert_eq!(exited.exit_code, Some(0));
    let text = String::from_utf8_lossy(&out);
    let orphan: u32 = text.lines().next().unwrap().trim().parse().unwrap();
    // The orphan held stdout, so EOF (and the exit event) came after it ended;
    // reaping happens on its SIGCHLD, right after.
    let deadline = std::time::Instant::now() + BOUND;
    while std::fs::metadata(format!("/proc/{orphan}")).is_ok() {
        assert!(std::time::Instant::now() < deadline, "orphan {orphan} was never reaped");
        // Nothing Portal exposes reports a reaped orphan: poll /proc, bounded.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(text.contains("orphan-done"));
    assert!(unsafe_free_kill(child.id(), "TERM"));
    assert!(wait_child(child).await.success());
}

async fn follow_bytes(
    rpc: &mut portal_proto::v1::portal_client::PortalClient<tonic::transport::Channel>,
    id: u64,
    at_least: usize,
) {
    let req = pb::FollowRequest {
        proc: Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) }),
        from_start: true,
        ..Default::default()
    };
    let mut events = rpc.follow(req).await.unwrap().into_inner();
    let mut n = 0;
    tokio::time::timeout(BOUND, async {
        while let Some(ev) = events.message().await.unwrap() {
            if let Some(pb::follow_event::Event::Output(r)) = ev.event {
                n += r.data.len();
                if n >= at_least {
                    return;
                }
            }
        }
    })
    .await
    .expect("output within the bound");
}

#[tokio::test]
async fn kill_9_mid_stream_leaves_a_consistent_prefix_and_lost_processes() {
    let d = dir();
    let (child, socket) = spawn_daemon(d.path());
    let client = connect(&socket).await;
    let mut rpc = client.rpc();
    let start = |command: &str, args: &[&str], pty: bool| pb::StartRequest {
        command: command.into(),
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        mode: if pty { pb::Mode::Pty } else { pb::Mode::Pipes }.into(),
        ..Default::default()
    };
    let flood = rpc.start(start("seq", &["1", "50000000"], false)).await.unwrap().into_inner();
    let screen = rpc
        .start(start("sh", &["-c", "printf 'screen survives\\n'; exec sleep 300"], true))
        .await
        .unwrap()
        .into_inner();
    follow_bytes(&mut rpc, screen.id, 16).await;
    follow_bytes(&mut rpc, flood.id, 2 << 20).await;
    assert!(unsafe_free_kill(child.id(), "KILL"));
    let status = wait_child(child).await;
    assert_eq!(status.code(), None, "killed by a signal");
    // The database is consistent and every stream is a gap-free prefix.
    let db = rusqlite::Connection::open(d.path().join("data").join("portal.db")).unwrap();
    let check: String = db.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    let mut stmt = db
        .prepare(
            "SELECT off, length(data) FROM chunks WHERE proc_id = ?1 AND stream = 1 ORDER BY off",
        )
        .unwrap();
    let spans: Vec<(i64, i64)> = stmt
        .query_map([flood.id as i64], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(!spans.is_empty());
    let mut expect = 0;
    for (off, len) in &spans {
        assert_eq!(*off, expect, "gap in the stored stream");
        expect += len;
    }
    drop(stmt);
    drop(db);
    // A new daemon lists both as lost, with logs and the final screen.
    let (child, socket) = spawn_daemon(d.path());
    let client = connect(&socket).await;
    let mut rpc = client.rpc();
    let list = rpc.list(pb::ListRequest {}).await.unwrap().into_inner();
    let statuses: Vec<_> = list.processes.iter().map(|p| (p.id, p.status())).collect();
    assert_eq!(statuses, vec![(flood.id, pb::Status::Lost), (screen.id, pb::Status::Lost)]);
    let by_id = |id: u64| Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) });
    let read = rpc
        .read(pb::ReadRequest { proc: by_id(flood.id), max_bytes: 1 << 20, ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    let text: String =
        read.records.iter().map(|r| String::from_utf8_lossy(&r.data).into_owned()).collect();
    let want: String = (1..=1000).map(|i| format!("{i}\n")).collect();
    assert!(text.starts_with(&want));
    let snap = rpc
        .screen(pb::ScreenRequest { proc: by_id(screen.id), resize: None })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(snap.lines[0], "screen survives");
    let err = rpc
        .write(pb::WriteRequest { proc: by_id(screen.id), data: "x".into(), secret: false })
        .await
        .unwrap_err();
    assert!(err.message().contains("status=lost"), "{}", err.message());
    // Ids are never reused.
    let next = rpc.start(start("true", &[], false)).await.unwrap().into_inner();
    assert!(next.id > screen.id);
    rpc.cleanup(pb::CleanupRequest { proc: by_id(flood.id) }).await.unwrap();
    assert!(unsafe_free_kill(child.id(), "TERM"));
    assert!(wait_child(child).await.success());
}

#[tokio::test]
async fn another_user_is_refused_and_nothing_listens_on_the_network() {
    use std::os::unix::fs::PermissionsExt;
    let d = dir();
    let (child, socket) = spawn_daemon(d.path());
    connect(&socket).await;
    // No TCP or UDP sockets: every socket the daemon has open is a Unix one.
    let mut inet = Vec::new();
    for table in ["tcp", "tcp6", "udp", "udp6"] {
        let text = std::fs::read_to_string(format!("/proc/{}/net/{table}", child.id()))
            .unwrap_or_default();
        inet.extend(
            text.lines().skip(1).filter_map(|l| l.split_whitespace().nth(9).map(str::to_owned)),
        );
    }
    for fd in std::fs::read_dir(format!("/proc/{}/fd", child.id())).unwrap() {
        let target = std::fs::read_link(fd.unwrap().path()).unwrap_or_default();
        let t = target.to_string_lossy();
        if let Some(inode) = t.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
            assert!(!inet.iter().any(|i| i == inode), "portald has a network socket open");
        }
    }
    if portal_proto::paths::uid() == 0 {
        // Let another user reach the socket file, so the daemon's own check
        // is what refuses them.
        for p in [d.path(), socket.parent().unwrap()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o711)).unwrap();
        }
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
        let cli = std::path::Path::new(env!("CARGO_BIN_EXE_portald")).with_file_name("portal-cli");
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&cli)
            .args(["--no-autostart", "ps"])
            .env("PORTAL_SOCKET", &socket)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains("refused this client") && err.contains("peer uid 65534"), "{err}");
    }
    assert!(unsafe_free_kill(child.id(), "TERM"));
    assert!(wait_child(child).await.success());
}
