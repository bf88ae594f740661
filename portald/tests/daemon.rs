//! Binary-level tests of `portald`: signals, exit codes, files left behind,
//! single instance, orphan reaping. They run the real binary, so process-wide
//! settings (the child subreaper flag) apply to it, not to the test process.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::process::Command;

use portal_client::client::Client;
use portal_proto::v1 as pb;

mod common;
use common::*;

#[tokio::test]
async fn sigterm_stops_children_and_removes_the_socket() {
    let d = dir();
    let mut daemon = spawn_daemon(d.path());
    let client = daemon.connect().await;
    let (child, socket) = (daemon.child, daemon.socket.clone());
    let mut rpc = client.rpc();
    let p = Start::new("sleep").args(["300"]).run(&mut rpc).await;
    let stubborn = Start::pty("sh").args(["-c", "trap '' HUP TERM; sleep 300"]).run(&mut rpc).await;
    let rc = unsafe_free_kill(child.id(), "TERM");
    assert!(rc);
    let status = wait_child(child).await;
    assert!(status.success(), "portald exited with {status}");
    assert!(is_dead(p.pid) && is_dead(stubborn.pid));
    assert!(!socket.exists(), "socket left behind");
    // The database's lock is released (its file stays, by design).
    let lock = std::fs::File::open(d.path().join("data").join("portal.db.lock")).unwrap();
    lock.try_lock().expect("the database's lock is released");
}

#[tokio::test]
async fn a_second_instance_exits_with_already_running() {
    let d = dir();
    let mut first = spawn_daemon(d.path());
    first.connect().await;
    let second = spawn_daemon(d.path());
    let status = wait_child(second.child).await;
    assert_eq!(status.code(), Some(portal_client::launch::EXIT_ALREADY_RUNNING));
    // The first one still answers.
    Client::connect(&first.socket).await.unwrap();
    assert!(unsafe_free_kill(first.child.id(), "INT"));
    assert!(wait_child(first.child).await.success());
}

#[tokio::test]
async fn orphans_of_managed_processes_are_reaped() {
    let d = dir();
    let mut daemon = spawn_daemon(d.path());
    let client = daemon.connect().await;
    let mut rpc = client.rpc();
    // The middle shell exits at once; its child is orphaned, reparented to
    // portal-holder (a subreaper) and must not stay a zombie when it exits.
    let orphaning = "sh -c 'sleep 0.2; echo orphan-done' & echo $!";
    let p = Start::new("sh").args(["-c", orphaning]).run(&mut rpc).await;
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
    // The orphan held stdout, so EOF (and the exit event) came after it ended.
    // It was reparented to portal-holder (the programs' subreaper), which
    // reaps it within its tick and says so: it does not stay a zombie.
    let pid = orphan.to_string();
    daemon
        .wait_log("that the orphan was reaped", |l| {
            l.contains("reaped an orphan") && l.contains(&pid)
        })
        .await;
    assert!(std::fs::metadata(format!("/proc/{orphan}")).is_err(), "orphan {orphan} is a zombie");
    assert!(text.contains("orphan-done"));
    assert!(unsafe_free_kill(daemon.child.id(), "TERM"));
    assert!(wait_child(daemon.child).await.success());
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
async fn kill_9_mid_stream_leaves_a_consistent_prefix_and_every_program_adopted() {
    let d = dir();
    let mut daemon = spawn_daemon(d.path());
    let client = daemon.connect().await;
    let child = daemon.child;
    let mut rpc = client.rpc();
    let flood = Start::pipes("seq").args(["1", "50000000"]).run(&mut rpc).await;
    let ticking =
        "trap 'echo during-gap' USR1; printf 'screen survives\\n'; while :; do sleep 0.05; done";
    let screen = Start::pty("sh").args(["-c", ticking]).run(&mut rpc).await;
    let ending = "trap 'exit 7' USR2; echo ready; while :; do sleep 0.05; done";
    let ends = Start::pipes("sh").args(["-c", ending]).run(&mut rpc).await;
    follow_bytes(&mut rpc, screen.id, 16).await;
    follow_bytes(&mut rpc, ends.id, 6).await;
    follow_bytes(&mut rpc, flood.id, 2 << 20).await;
    assert!(unsafe_free_kill(child.id(), "KILL"));
    let status = wait_child(child).await;
    assert_eq!(status.code(), None, "killed by a signal");
    // While no daemon runs: one program prints, another ends.
    assert!(unsafe_free_kill(screen.pid, "USR1"));
    assert!(unsafe_free_kill(ends.pid, "USR2"));
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
    // A new daemon adopts every program the holder kept: still running,
    // same pids, output printed meanwhile in the log, an exit that came
    // meanwhile recorded with its code.
    let mut daemon = spawn_daemon(d.path());
    let client = daemon.connect().await;
    let child = daemon.child;
    let mut rpc = client.rpc();
    let list = rpc.list(pb::ListRequest {}).await.unwrap().into_inner();
    let statuses: Vec<_> = list.processes.iter().map(|p| (p.id, p.pid, p.status())).collect();
    assert_eq!(
        &statuses[..2],
        &[(flood.id, flood.pid, pb::Status::Running), (screen.id, screen.pid, pb::Status::Running)]
    );
    let ended = wait_end(&mut rpc, ends.id).await;
    assert_eq!((ended.status(), ended.exit_code), (pb::Status::Exited, Some(7)));
    follow_bytes_text(&mut rpc, screen.id, "during-gap").await;
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
    // The adopted terminal takes input again.
    rpc.write(pb::WriteRequest { proc: by_id(screen.id), data: "x".into(), secret: false })
        .await
        .unwrap();
    for id in [flood.id, screen.id] {
        rpc.kill(pb::KillRequest { proc: by_id(id) }).await.unwrap();
    }
    // Ids are never reused.
    let next = Start::pipes("true").run(&mut rpc).await;
    assert!(next.id > screen.id);
    rpc.cleanup(pb::CleanupRequest { proc: by_id(flood.id) }).await.unwrap();
    assert!(unsafe_free_kill(child.id(), "TERM"));
    assert!(wait_child(child).await.success());
}

#[tokio::test]
async fn another_user_is_refused_and_nothing_listens_on_the_network() {
    use std::os::unix::fs::PermissionsExt;
    let d = dir();
    let mut daemon = spawn_daemon(d.path());
    daemon.connect().await;
    let (child, socket) = (daemon.child, daemon.socket.clone());
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
    if portal_client::user::current() == 0 {
        // Let another user reach the socket file, so the daemon's own check
        // is what refuses them.
        for p in [d.path(), socket.parent().unwrap()] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o711)).unwrap();
        }
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
        // Portal's own clients refuse first (the socket is not theirs)...
        let cli = std::path::Path::new(env!("CARGO_BIN_EXE_portald")).with_file_name("portal-cli");
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&cli)
            .args(["--no-autostart", "ps"])
            .env("PORTAL_SOCKET", &socket)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("refusing to talk to") && err.contains("uid 0"), "{err}");
        // ...so a plain gRPC client (this test binary, re-run as the other
        // user) shows that the daemon refuses on its own.
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", "plain_client_as_another_user", "--nocapture"])
            .env(PLAIN_CLIENT_SOCKET, &socket)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("PermissionDenied") && said.contains("peer uid 65534"), "{said}");
    }
    assert!(unsafe_free_kill(child.id(), "TERM"));
    assert!(wait_child(child).await.success());
}

#[tokio::test]
async fn an_exit_once_reported_survives_kill_9() {
    let d = dir();
    let by_id = |id: u64| Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) });
    for run in 0..20 {
        let mut daemon = spawn_daemon(d.path());
        let client = daemon.connect().await;
        let mut rpc = client.rpc();
        let p = Start::pipes("sh").args(["-c", "echo out; exit 7"]).run(&mut rpc).await;
        let until = pb::WaitCondition { input: Some(false), ..Default::default() };
        let r = rpc
            .wait(pb::WaitRequest { proc: by_id(p.id), until: Some(until), ..Default::default() })
            .await
            .unwrap()
            .into_inner();
        assert_eq!((r.reason(), r.exit_code), (pb::WaitReason::Exited, Some(7)), "run {run}");
        // Reported: now it must survive the daemon's sudden death.
        assert!(unsafe_free_kill(daemon.child.id(), "KILL"));
        wait_child(daemon.child).await;
        let mut daemon = spawn_daemon(d.path());
        let client = daemon.connect().await;
        let mut rpc = client.rpc();
        let back =
            rpc.inspect(pb::InspectRequest { proc: by_id(p.id) }).await.unwrap().into_inner();
        assert_eq!((back.status(), back.exit_code), (pb::Status::Exited, Some(7)), "run {run}");
        let read = rpc
            .read(pb::ReadRequest { proc: by_id(p.id), ..Default::default() })
            .await
            .unwrap()
            .into_inner();
        let text: String =
            read.records.iter().map(|r| String::from_utf8_lossy(&r.data).into_owned()).collect();
        assert_eq!(text, "out\n", "run {run}");
        assert!(unsafe_free_kill(daemon.child.id(), "TERM"));
        assert!(wait_child(daemon.child).await.success());
    }
}

/// Set by `another_user_is_refused_…` when it re-runs this binary as
/// another user: the socket to call.
const PLAIN_CLIENT_SOCKET: &str = "PORTAL_TEST_PLAIN_CLIENT_SOCKET";

/// A gRPC client without Portal's client-side checks. Does nothing unless
/// [`PLAIN_CLIENT_SOCKET`] is set; then calls GetInfo and prints the result.
#[tokio::test]
async fn plain_client_as_another_user() {
    let Some(socket) = std::env::var_os(PLAIN_CLIENT_SOCKET) else { return };
    let endpoint =
        tonic::transport::Endpoint::from_shared(format!("unix://{}", socket.to_string_lossy()))
            .unwrap();
    let channel = endpoint.connect().await.unwrap();
    let mut rpc = pb::portal_client::PortalClient::new(channel);
    match rpc.get_info(pb::GetInfoRequest {}).await {
        Ok(r) => println!("answered: {:?}", r.into_inner()),
        Err(s) => println!("{:?}: {}", s.code(), s.message()),
    }
}

/// Follows a process's output until it printed `name=<pid>` for every name.
async fn pids_printed(rpc: &mut Rpc, id: u64, names: &[&str]) -> Vec<u32> {
    let follow = pb::FollowRequest {
        proc: Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) }),
        from_start: true,
        ..Default::default()
    };
    let mut events = rpc.follow(follow).await.unwrap().into_inner();
    let mut out = Vec::new();
    tokio::time::timeout(BOUND, async {
        while let Some(ev) = events.message().await.unwrap() {
            if let Some(pb::follow_event::Event::Output(r)) = ev.event {
                out.extend_from_slice(&r.data);
            }
            let text = String::from_utf8_lossy(&out);
            let found: Vec<u32> = names
                .iter()
                .filter_map(|n| {
                    text.lines().find_map(|l| l.strip_prefix(&format!("{n}="))?.trim().parse().ok())
                })
                .collect();
            if found.len() == names.len() {
                return found;
            }
        }
        panic!("the output ended before {names:?} were printed");
    })
    .await
    .expect("the program printed the pids within the bound")
}

/// A script that starts a process in a session of its own with an
/// environment of its own (so only the process tree leads to it while its
/// parent lives), and a daemon that double forks away (reparented to
/// portald), and prints their pids.
const ESCAPES: &str = "env -i PATH=\"$PATH\" setsid sleep 301 & echo own_session=$!; \
     sh -c 'setsid sleep 302 </dev/null >/dev/null 2>&1 & echo daemonized=$!'; ";

/// The same escapes left behind by a program that exits at once: they keep
/// Portal's environment, the one thing that still ties them to it.
const LEFT_BEHIND: &str = "setsid sleep 303 </dev/null >/dev/null 2>&1 & echo own_session=$!; \
     sh -c 'setsid sleep 304 </dev/null >/dev/null 2>&1 & echo daemonized=$!'; exit 0";

#[tokio::test]
async fn kill_and_stop_reach_every_descendant_whatever_session_it_made() {
    let d = dir();
    let mut daemon = spawn_daemon(d.path());
    let client = daemon.connect().await;
    let mut rpc = client.rpc();
    let sh = |script: &str| Start::new("sh").args(["-c", script]);
    // Killed while running.
    let running = sh(&format!("{ESCAPES} exec sleep 300")).run(&mut rpc).await;
    let escaped = pids_printed(&mut rpc, running.id, &["own_session", "daemonized"]).await;
    assert!(escaped.iter().all(|p| !is_dead(*p)), "{escaped:?} started");
    let by_id = |id| Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) });
    rpc.kill(pb::KillRequest { proc: by_id(running.id) }).await.unwrap();
    for pid in &escaped {
        assert!(dies(*pid).await, "{pid} survived the kill of what started it");
    }
    // Ended by itself, leaving a daemon behind: a kill still takes it.
    let ended = sh(LEFT_BEHIND).run(&mut rpc).await;
    let left = pids_printed(&mut rpc, ended.id, &["daemonized"]).await;
    // It printed its last line just before `exit 0`: see it end first.
    let until = pb::WaitCondition { input: Some(false), ..Default::default() };
    let waited = rpc
        .wait(pb::WaitRequest { proc: by_id(ended.id), until: Some(until), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(waited.exit_code, Some(0), "{waited:?}");
    let r = rpc.kill(pb::KillRequest { proc: by_id(ended.id) }).await.unwrap().into_inner();
    assert_eq!(r.exit_code, Some(0), "the recorded exit stays");
    assert!(dies(left[0]).await, "{} outlived the kill", left[0]);
    // Ended by itself, and then the daemon stops: nothing is left.
    let ended = sh(LEFT_BEHIND).run(&mut rpc).await;
    let left = pids_printed(&mut rpc, ended.id, &["own_session", "daemonized"]).await;
    let child = daemon.child;
    assert!(unsafe_free_kill(child.id(), "TERM"));
    assert!(wait_child(child).await.success());
    for pid in &left {
        assert!(dies(*pid).await, "{pid} outlived portald");
    }
}
