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
