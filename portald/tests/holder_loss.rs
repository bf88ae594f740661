//! The real `portald` when its `portal-holder` is disturbed: a stranger at
//! the holder's socket, the holder killed while the daemon runs, and the
//! holder killed while no daemon runs. The daemon answers every call within
//! a bound, no program runs on unmanaged (checked by pid and by session),
//! and each is listed with why it ended.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::io::Write as _;

use portal_proto::v1 as pb;

mod common;
use common::*;

fn by_id(id: u64) -> Option<pb::ProcRef> {
    Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) })
}

/// A program that leaves a child in its session (a background job) and
/// says so.
fn with_a_job(pty: bool) -> Start {
    let start = if pty { Start::pty } else { Start::pipes };
    start("sh").args(["-c", "sleep 300 & echo up; wait"])
}

/// Every live process of session `sid` (a program leads its own).
fn session(sid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some((_, rest)) = stat.rsplit_once(')') else { continue };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 3 && f[3] == sid.to_string() && !matches!(f[0], "Z" | "X") {
            out.push(pid);
        }
    }
    out
}

/// The parent of `pid`: for a program, its holder.
fn parent(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    rest.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Calls `f` within the bound: a call that hangs fails the test.
async fn answers<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(BOUND, f).await.unwrap_or_else(|_| panic!("{what} hung"))
}

/// The daemon still starts programs, hears their exits, kills, and stops.
async fn still_works(rpc: &mut Rpc, daemon: Daemon) {
    let p = answers("a start", Start::new("sh").args(["-c", "exit 3"]).run(rpc)).await;
    let ended = wait_end(rpc, p.id).await;
    assert_eq!((ended.status(), ended.exit_code), (pb::Status::Exited, Some(3)));
    let p = answers("a start", Start::new("sleep").args(["300"]).run(rpc)).await;
    answers("a kill", rpc.kill(pb::KillRequest { proc: by_id(p.id) })).await.unwrap();
    assert_eq!(wait_end(rpc, p.id).await.status(), pb::Status::Killed);
    assert!(dies(p.pid).await);
    answers("daemon stop", rpc.shutdown(pb::ShutdownRequest {})).await.unwrap();
    assert!(wait_child(daemon.child).await.success());
}

#[tokio::test]
async fn strangers_at_the_holders_socket_change_nothing_for_the_daemon() {
    let d = dir();
    let mut daemon = spawn_daemon(d.path());
    let mut rpc = daemon.connect().await.rpc();
    let holder = portal_holder::client::socket_beside(&daemon.socket);
    // One says nothing, one sends garbage, one says a hello of its own.
    let _silent = std::os::unix::net::UnixStream::connect(&holder).unwrap();
    let mut garbage = std::os::unix::net::UnixStream::connect(&holder).unwrap();
    garbage.write_all(b"\x05\x00\x00\x00\x00hello").unwrap();
    let hello = portal_holder::client::Client::connect(&holder, &holder_binary(), Box::new(|_| {}));
    let err = hello.unwrap_err().to_string();
    assert!(err.contains("another portald"), "{err}");
    still_works(&mut rpc, daemon).await;
}

#[tokio::test]
async fn a_killed_holder_takes_its_programs_and_the_daemon_carries_on() {
    let d = dir();
    let mut daemon = spawn_daemon(d.path());
    let mut rpc = daemon.connect().await.rpc();
    let pty = with_a_job(true).run(&mut rpc).await;
    let pipes = with_a_job(false).run(&mut rpc).await;
    follow_bytes_text(&mut rpc, pty.id, "up").await;
    follow_bytes_text(&mut rpc, pipes.id, "up").await;
    let members: Vec<u32> = [pty.pid, pipes.pid].into_iter().flat_map(session).collect();
    assert!(members.len() >= 4, "each program and its job: {members:?}");
    let holder = parent(pty.pid);
    assert!(unsafe_free_kill(holder, "KILL"));
    // Both are recorded as ended by the holder's death, and nothing of
    // them runs on.
    for p in [&pty, &pipes] {
        let ended = wait_end(&mut rpc, p.id).await;
        assert_eq!(ended.status(), pb::Status::HolderLost, "{ended:?}");
    }
    for pid in &members {
        assert!(dies(*pid).await, "{pid} of a dead holder's program still runs");
    }
    let list = answers("list", rpc.list(pb::ListRequest {})).await.unwrap().into_inner();
    assert_eq!(list.processes.len(), 2);
    // A new holder serves the next programs.
    still_works(&mut rpc, daemon).await;
}

#[tokio::test]
async fn a_holder_killed_while_no_daemon_runs_leaves_nothing_running() {
    let d = dir();
    let mut daemon = spawn_daemon(d.path());
    let mut rpc = daemon.connect().await.rpc();
    let pty = with_a_job(true).run(&mut rpc).await;
    let pipes = with_a_job(false).run(&mut rpc).await;
    follow_bytes_text(&mut rpc, pty.id, "up").await;
    follow_bytes_text(&mut rpc, pipes.id, "up").await;
    let members: Vec<u32> = [pty.pid, pipes.pid].into_iter().flat_map(session).collect();
    assert!(members.len() >= 4, "each program and its job: {members:?}");
    let holder = parent(pty.pid);
    assert!(unsafe_free_kill(daemon.child.id(), "KILL"));
    wait_child(daemon.child).await;
    assert!(unsafe_free_kill(holder, "KILL"));
    assert!(dies(holder).await);

    let mut daemon = spawn_daemon(d.path());
    let mut rpc = daemon.connect().await.rpc();
    let list = rpc.list(pb::ListRequest {}).await.unwrap().into_inner();
    let statuses: Vec<_> = list.processes.iter().map(|p| (p.id, p.status())).collect();
    assert_eq!(
        statuses,
        [(pty.id, pb::Status::HolderLost), (pipes.id, pb::Status::HolderLost)],
        "listed with why they ended"
    );
    for pid in &members {
        assert!(dies(*pid).await, "{pid} of a dead holder's program still runs");
    }
    assert!(session(pty.pid).is_empty() && session(pipes.pid).is_empty());
    still_works(&mut rpc, daemon).await;
}
