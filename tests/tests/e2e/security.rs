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
    let err = rpc
        .start(pb::StartRequest { command: "true".into(), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::ResourceExhausted);
    assert!(err.message().contains("process limit reached (2)"), "{}", err.message());
    // Cleaning up an ended process makes room.
    wait_exit(&mut rpc, done.id).await;
    rpc.cleanup(pb::CleanupRequest { proc: by_id(done.id) }).await.unwrap();
    rpc.start(pb::StartRequest { command: "true".into(), ..Default::default() }).await.unwrap();
    d.stop().await;
}
