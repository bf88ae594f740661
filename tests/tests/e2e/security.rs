//! Secrets and limits: a password prompt is reported and what is typed at it
//! is never logged; the process limit is a clear RESOURCE_EXHAUSTED.

use portal_proto::v1 as pb;
use portal_tests::*;

#[tokio::test]
async fn echo_off_prompts_are_reported_and_input_at_them_is_redacted() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let script = "printf 'Password: '; stty -echo; read x; stty echo; echo; echo len=${#x}; read y";
    let p = start_pty(&mut rpc, "sh", &["-c", script], 24, 80).await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "Password: ").await;
    wait_until("the echo-off prompt to be reported", async || {
        let info =
            rpc.inspect(pb::InspectRequest { proc: by_id(p.id) }).await.unwrap().into_inner();
        info.awaiting_secret.then_some(())
    })
    .await;
    write(&mut rpc, p.id, b"hunter2\r").await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "len=7").await;
    let input =
        String::from_utf8(read_all(&mut rpc, p.id, pb::Stream::Stdin, pb::Encoding::Raw).await)
            .unwrap();
    assert_eq!(input, "********", "the secret reached the log");
    let all =
        String::from_utf8(read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Raw).await)
            .unwrap();
    assert!(!all.contains("hunter2"));
    // Echo is back on: the prompt is over and input is logged again.
    let r = rpc
        .run(pb::RunRequest { proc: by_id(p.id), input: "visible".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert!(!r.awaiting_secret);
    let input =
        String::from_utf8(read_all(&mut rpc, p.id, pb::Stream::Stdin, pb::Encoding::Raw).await)
            .unwrap();
    assert!(input.ends_with("visible\r"), "{input:?}");
    d.stop().await;
}

#[tokio::test]
async fn a_secret_write_is_logged_by_length_only() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "sh", &["-c", "read x; echo got=$x"]).await;
    let req = pb::WriteRequest { proc: by_id(p.id), data: "s3cret\n".into(), secret: true };
    rpc.write(req).await.unwrap();
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "got=s3cret").await;
    let input = read_all(&mut rpc, p.id, pb::Stream::Stdin, pb::Encoding::Raw).await;
    assert_eq!(input, b"*******");
    d.stop().await;
}

#[tokio::test]
async fn the_process_limit_is_a_clear_error() {
    let d = TestDaemon::start_with(|c| c.max_processes = 2).await;
    let mut rpc = d.rpc();
    start_pipes(&mut rpc, "sleep", &["60"]).await;
    let done = start_pipes(&mut rpc, "true", &[]).await;
    let err = rpc.start(Start::new("true").request()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted);
    assert!(err.message().contains("process limit reached (2)"), "{}", err.message());
    // Cleaning up an ended process makes room.
    wait_exit(&mut rpc, done.id).await;
    rpc.cleanup(pb::CleanupRequest { proc: by_id(done.id) }).await.unwrap();
    Start::new("true").run(&mut rpc).await;
    d.stop().await;
}

/// The modes of a file or directory, without the type bits.
fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path).unwrap().mode() & 0o7777
}

#[tokio::test]
async fn the_log_is_private_at_rest_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt as _;
    // An older install, made with umask 022: everything readable by all.
    let d = TestDaemon::start_with(|c| {
        std::fs::create_dir_all(&c.data_dir).unwrap();
        std::fs::set_permissions(&c.data_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = c.data_dir.join(portal_client::paths::DAEMON_LOG_FILE);
        std::fs::write(&log, b"old log\n").unwrap();
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
    })
    .await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "sh", &["-c", "echo api-key-12345"]).await;
    wait_exit(&mut rpc, p.id).await;
    let data = d.dir.path().join("data");
    assert_eq!(mode(&data), 0o700, "data directory");
    for name in ["portal.db", "portal.db-wal", "portal.db-shm", "portald.log"] {
        let path = data.join(name);
        assert!(path.exists(), "{name} missing");
        assert_eq!(mode(&path), 0o600, "{name}");
    }
    if portal_client::user::current() == 0 {
        // Another user cannot read any of it, even with the path.
        std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for name in ["", "portal.db", "portal.db-wal", "portald.log"] {
            let out = std::process::Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "cat"])
                .arg(data.join(name))
                .output()
                .unwrap();
            assert!(!out.status.success(), "another user read {name:?}");
            assert!(!String::from_utf8_lossy(&out.stdout).contains("api-key"));
        }
    } else {
        eprintln!("skipped the second-user read: needs root for setpriv");
    }
}
