//! One daemon per database, whatever happens to the runtime directory and
//! whatever `PORTAL_HANDOVER` says: the real `portald`, `portal-holder` and
//! `portal-cli` binaries.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod common;

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use portal_client::client::Client;
use portal_proto::v1 as pb;

/// `portald` for `dir` (socket in `dir/s`, data in `dir/data`) started
/// through `sh -c SCRIPT`, which ends by exec'ing it with `"$@"`; its log
/// is watched as [`spawn_daemon`]'s is.
fn spawn_through_sh(dir: &Path, script: &str, env: &[(&str, &str)]) -> Daemon {
    let socket = dir.join("s").join("portald.sock");
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_portald"))
        .arg("--socket")
        .arg(&socket)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--log")
        .arg("info")
        .env("PORTAL_HOLDER", holder_binary())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    watched(cmd.spawn().unwrap(), socket)
}

async fn pid_of(socket: &Path) -> u32 {
    let mut rpc = Client::connect(socket).await.unwrap().rpc();
    rpc.get_info(pb::GetInfoRequest {}).await.unwrap().into_inner().pid
}

#[tokio::test]
async fn a_wiped_runtime_directory_leaves_one_daemon_and_it_is_reached_again() {
    let d = dir();
    let mut daemon = spawn_daemon(d.path());
    let client = daemon.connect().await;
    let mut rpc = client.rpc();
    Start::new("sleep").args(["300"]).name("survivor").run(&mut rpc).await;
    let first = daemon.child.id();
    std::fs::remove_dir_all(daemon.socket.parent().unwrap()).unwrap();
    // A client that finds no socket starts a daemon, as every client does;
    // that one finds the database taken and exits, and the client reaches
    // the daemon that owns it once it has bound its socket again.
    let out = tokio::task::spawn_blocking({
        let (socket, data) = (daemon.socket.clone(), d.path().join("data"));
        move || {
            Command::new(cli_binary())
                .args(["--socket".as_ref(), socket.as_os_str(), "--data-dir".as_ref()])
                .arg(data)
                .arg("ps")
                .env("PORTAL_DAEMON", env!("CARGO_BIN_EXE_portald"))
                .env("PORTAL_HOLDER", holder_binary())
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ps failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("survivor") && stdout.contains("running"), "{stdout}");
    assert_eq!(pid_of(&daemon.socket).await, first, "the daemon that owns the database answers");
    assert!(!is_dead(first));
    assert!(unsafe_free_kill(first, "TERM"));
    assert!(wait_child(daemon.child).await.success());
    assert!(!daemon.socket.exists(), "its own socket is removed at shutdown");
}

#[tokio::test]
async fn shutdown_leaves_a_socket_that_is_not_its_own() {
    let d = dir();
    let mut daemon = spawn_daemon(d.path());
    daemon.connect().await;
    // Someone replaces the socket with one of their own (the daemon binds
    // the path again within a second when it finds it empty, so try until
    // the replacement wins the path).
    let foreign = loop {
        std::fs::remove_file(&daemon.socket).ok();
        match UnixListener::bind(&daemon.socket) {
            Ok(l) => break l,
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(e) => panic!("binding the replacement: {e}"),
        }
    };
    assert!(unsafe_free_kill(daemon.child.id(), "TERM"));
    assert!(wait_child(daemon.child).await.success());
    assert!(daemon.socket.exists(), "the replacement socket was deleted");
    UnixStream::connect(&daemon.socket).expect("the replacement still answers");
    drop(foreign);
}

#[tokio::test]
async fn a_leaked_handover_variable_is_ignored() {
    let d = dir();
    // Descriptors 3 and 4 are open, but they are not a listener and a lock.
    let mut daemon = spawn_through_sh(
        d.path(),
        r#"exec "$0" "$@" 3</dev/null 4</dev/null"#,
        &[("PORTAL_HANDOVER", "listen=3,lock=4,from=0.0.1")],
    );
    let client = daemon.connect().await;
    let info = client.rpc().get_info(pb::GetInfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.pid, daemon.child.id(), "it started as a daemon of its own");
    assert!(unsafe_free_kill(daemon.child.id(), "TERM"));
    assert!(wait_child(daemon.child).await.success());
}

#[tokio::test]
async fn a_crafted_handover_cannot_open_a_second_daemon_on_the_database() {
    let d = dir();
    let mut first = spawn_daemon(d.path());
    first.connect().await;
    // A second daemon on another socket, handed a listener bound there and
    // a descriptor of the first one's lock file, opened anew.
    let other = d.path().join("t");
    std::fs::create_dir(&other).unwrap();
    std::fs::set_permissions(&other, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let script = r#"
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(8)
lock = os.open(sys.argv[2], os.O_RDWR | os.O_CREAT, 0o600)
for fd in (s.fileno(), lock):
    os.set_inheritable(fd, True)
os.environ["PORTAL_HANDOVER"] = "listen=%d,lock=%d" % (s.fileno(), lock)
os.execv(sys.argv[3], sys.argv[3:])
"#;
    let second_socket = other.join("second.sock");
    let second = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&second_socket)
        .arg(d.path().join("data").join("portal.db.lock"))
        .arg(env!("CARGO_BIN_EXE_portald"))
        .arg("--socket")
        .arg(&second_socket)
        .arg("--data-dir")
        .arg(d.path().join("data"))
        .env("PORTAL_HOLDER", holder_binary())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let status = wait_child(second).await;
    assert_eq!(
        status.code(),
        Some(portal_client::launch::EXIT_ALREADY_RUNNING),
        "a second daemon must not serve the same database"
    );
    // The first is undisturbed.
    Client::connect(&first.socket).await.unwrap();
    assert!(unsafe_free_kill(first.child.id(), "TERM"));
    assert!(wait_child(first.child).await.success());
}
