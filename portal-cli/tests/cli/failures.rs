//! How the CLI fails: exit codes that say what went wrong, a reader that
//! goes away, and a socket another user set up.

use portal_tests::*;

use crate::common::{CLI, cli, stdout};

#[tokio::test]
async fn exit_codes_say_what_went_wrong() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let o = cli(&s, &["inspect", "4242"]).await;
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no process with id 4242") && err.contains("hint:"), "{err}");
    // The hint comes from the daemon's typed kind, in the CLI's commands.
    let mut rpc = d.rpc();
    let ended = start_pipes(&mut rpc, "true", &[]).await;
    wait_exit(&mut rpc, ended.id).await;
    let o = cli(&s, &["write", &ended.id.to_string(), "x"]).await;
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is not running")
            && err.contains("hint: the process has ended: `portal-cli read`"),
        "{err}"
    );
    assert_eq!(cli(&s, &["no-such-command"]).await.status.code(), Some(2));
    assert_eq!(cli(&s, &["start"]).await.status.code(), Some(2));
    let o = cli(&s, &["signal", "1", "SIGFOO"]).await;
    assert_eq!(o.status.code(), Some(1));
    let dir = test_dir();
    let nowhere = dir.path().join("none.sock");
    let o = cli(&nowhere, &["ps"]).await;
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot reach portald"));
    let o = cli(&nowhere, &["daemon", "status"]).await;
    assert_eq!(o.status.code(), Some(3));
    assert!(stdout(&o).contains("not running"));
    d.stop().await;
}

#[tokio::test]
async fn a_closed_pipe_ends_the_cli_quietly() {
    use std::os::unix::process::ExitStatusExt as _;
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    for _ in 0..50 {
        start_pipes(&mut rpc, "sleep", &["60"]).await;
    }
    let shown = start_pty(&mut rpc, "sleep", &["60"], 24, 80).await.id;
    // Like `portal-cli ps | head -1`: the reader goes away. Each ends as a
    // pipeline expects, killed by SIGPIPE with nothing said, including
    // `screen --watch`, which would otherwise watch on forever.
    let shown = shown.to_string();
    for args in [&["ps", "--all"][..], &["screen", "--watch", &shown]] {
        let mut child = tokio::process::Command::new(CLI)
            .args(args)
            .env("PORTAL_SOCKET", &s)
            .env("PORTAL_NO_AUTOSTART", "1")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = bounded("portal-cli into a closed pipe", child.wait_with_output()).await.unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.signal(), Some(13), "{args:?}: {:?} {err}", out.status);
        assert!(err.is_empty(), "{args:?}: {err}");
    }
    d.stop().await;
}

#[tokio::test]
async fn clients_refuse_a_socket_another_user_set_up() {
    use std::os::unix::fs::PermissionsExt as _;
    let python = std::path::Path::new("/usr/bin/python3");
    if portal_client::user::current() != 0 || !python.exists() {
        eprintln!("skipped: needs root (to act as a second user) and /usr/bin/python3");
        return;
    }
    let dir = test_dir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // Another user created the directory first and serves a socket there
    // that records what it is sent.
    let trap = dir.path().join("trap");
    std::fs::create_dir(&trap).unwrap();
    std::os::unix::fs::chown(&trap, Some(65534), Some(65534)).unwrap();
    let socket = trap.join("portald.sock");
    let fake = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    data = b""
    while chunk := c.recv(65536):
        data += chunk
    print("received", len(data), flush=True)
"#;
    let mut server = tokio::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(python)
        .args(["-c", fake])
        .arg(&socket)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = {
        use tokio::io::AsyncBufReadExt as _;
        tokio::io::BufReader::new(server.stdout.take().unwrap()).lines()
    };
    assert_eq!(
        bounded("the fake server", lines.next_line()).await.unwrap().as_deref(),
        Some("ready")
    );
    let out = cli(&socket, &["write", "1", "my password"]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("refusing to talk to") && err.contains("belongs to uid 65534"), "{err}");
    assert!(err.contains("nothing was sent"), "{err}");
    // The directory and the socket now look like ours; the server is not.
    std::os::unix::fs::chown(&trap, Some(0), Some(0)).unwrap();
    std::os::unix::fs::chown(&socket, Some(0), Some(0)).unwrap();
    let out = cli(&socket, &["write", "1", "my password"]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("runs as uid 65534"), "{err}");
    // The one connection the peer check made carried nothing.
    let got = bounded("the fake server's report", lines.next_line()).await.unwrap();
    assert_eq!(got.as_deref(), Some("received 0"));
}
