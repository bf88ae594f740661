//! Bad input gets a clear error that names the thing, and leaves nothing
//! half-made.

use portal_proto::v1 as pb;
use portal_tests::*;
use tonic::Code;

#[tokio::test]
async fn unknown_ids_and_names_are_not_found() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let err = rpc.inspect(pb::InspectRequest { proc: by_id(999) }).await.unwrap_err();
    assert_eq!((err.code(), err.message()), (Code::NotFound, "no process with id 999"));
    // The typed detail crosses the wire with the status: clients branch on
    // it, not on the words.
    let detail = portal_proto::detail(&err);
    assert_eq!((detail.kind(), detail.nothing_done), (pb::ErrorKind::NoSuchProcess, false));
    let name = Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Name("nope".into())) });
    let err = rpc
        .write(pb::WriteRequest { proc: name, data: "x".into(), secret: false })
        .await
        .unwrap_err();
    assert_eq!((err.code(), err.message()), (Code::NotFound, "no process named \"nope\""));
    let err = rpc.inspect(pb::InspectRequest { proc: None }).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("proc"), "{}", err.message());
    assert_eq!(portal_proto::detail(&err).kind(), pb::ErrorKind::BadRequest);
    d.stop().await;
}

#[tokio::test]
async fn missing_programs_and_bad_directories_leave_nothing_behind() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    for pty in [false, true] {
        let start = if pty { Start::pty } else { Start::pipes };
        let err = rpc.start(start("no-such-program-xyz").request()).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message().contains("cannot execute \"no-such-program-xyz\""),
            "{}",
            err.message()
        );
    }
    let err = rpc.start(Start::new("sh").cwd("/no/such/dir").request()).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("/no/such/dir"), "{}", err.message());
    let list = rpc.list(pb::ListRequest {}).await.unwrap().into_inner();
    assert!(list.processes.is_empty(), "a failed start left {:?}", list.processes);
    d.stop().await;
}

#[tokio::test]
async fn bad_signals_sizes_and_writes_are_refused() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pty(&mut rpc, "cat", &[], 24, 80).await;
    for bad in ["SIGFOO", "0", "99", ""] {
        let err = rpc
            .signal(pb::SignalRequest { proc: by_id(p.id), signal: bad.into() })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{bad}");
        assert!(err.message().contains("signal"), "{}", err.message());
    }
    let req =
        pb::ScreenRequest { proc: by_id(p.id), resize: Some(pb::TermSize { rows: 1, cols: 80 }) };
    let err = rpc.screen(req).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("resize.rows"), "{}", err.message());
    let err = rpc.start(Start::pty("sh").size(24, 100_000).request()).await.unwrap_err();
    assert!(err.message().contains("size.cols"), "{}", err.message());
    rpc.kill(pb::KillRequest { proc: by_id(p.id) }).await.unwrap();
    let err = rpc
        .write(pb::WriteRequest { proc: by_id(p.id), data: "x".into(), secret: false })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("is not running (status=killed)"), "{}", err.message());
    let err = rpc
        .signal(pb::SignalRequest { proc: by_id(p.id), signal: "TERM".into() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    d.stop().await;
}

#[tokio::test]
async fn a_program_that_never_reads_cannot_make_input_grow_without_bound() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "sleep", &["300"]).await;
    let other = start_pipes(&mut rpc, "cat", &[]).await;
    let big = vec![b'x'; 10 << 20];
    // The first 10 MB are accepted (bounded backlog), the next ones refused.
    let mut refused = None;
    for _ in 0..4 {
        let req = pb::WriteRequest { proc: by_id(p.id), data: big.clone().into(), secret: false };
        if let Err(e) = rpc.write(req).await {
            refused = Some(e);
            break;
        }
    }
    let err = refused.expect("the backlog bound was never hit");
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert!(err.message().contains("not reading its input"), "{}", err.message());
    // Other processes are not blocked.
    write(&mut rpc, other.id, b"still fine\n").await;
    wait_for_text(&mut rpc, other.id, pb::Stream::Stdout, "still fine").await;
    let too_big = vec![b'x'; portal_proto::MAX_WRITE_BYTES + 1];
    let err = rpc
        .write(pb::WriteRequest { proc: by_id(other.id), data: too_big.into(), secret: false })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    d.stop().await;
}

#[tokio::test]
async fn unread_input_is_bounded_across_all_processes() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let big = vec![b'x'; 10 << 20];
    let mut sleepers = Vec::new();
    let mut refused = None;
    'fill: for _ in 0..6 {
        let p = start_pipes(&mut rpc, "sleep", &["300"]).await;
        sleepers.push(p.id);
        // 30 MB each: under the per-process bound, so only the total stops it.
        for _ in 0..3 {
            let req =
                pb::WriteRequest { proc: by_id(p.id), data: big.clone().into(), secret: false };
            if let Err(e) = rpc.write(req).await {
                refused = Some(e);
                break 'fill;
            }
        }
    }
    let err = refused.expect("the total bound was never hit");
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert!(err.message().contains("across all processes"), "{}", err.message());
    assert_eq!(portal_proto::detail(&err).kind(), pb::ErrorKind::InputPilingUp);
    assert!(sleepers.len() >= 4, "refused too early: {}", err.message());
    // Killing a program that never read gives its backlog back.
    rpc.kill(pb::KillRequest { proc: by_id(sleepers[0]) }).await.unwrap();
    let last = *sleepers.last().unwrap();
    wait_until("the killed program's input to be released", async || {
        let req = pb::WriteRequest { proc: by_id(last), data: big.clone().into(), secret: false };
        rpc.write(req).await.ok()
    })
    .await;
    d.stop().await;
}

/// A StartRequest as the wire sees it, with `command` as raw bytes: what a
/// client in a language without UTF-8 strings could send.
#[derive(Clone, PartialEq, prost::Message)]
struct RawStart {
    #[prost(bytes = "vec", tag = "1")]
    command: Vec<u8>,
}

#[tokio::test]
async fn text_that_is_not_utf8_is_invalid_argument_naming_the_field() {
    let d = TestDaemon::start().await;
    let channel =
        tonic::transport::Endpoint::from_shared(format!("unix://{}", d.socket().display()))
            .unwrap()
            .connect()
            .await
            .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let err = grpc
        .unary::<RawStart, pb::Process, _>(
            tonic::Request::new(RawStart { command: b"ca\xfft".to_vec() }),
            tonic::codegen::http::uri::PathAndQuery::from_static("/portal.v1.Portal/Start"),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("StartRequest.command must be UTF-8"), "{}", err.message());
    // The daemon is unharmed.
    let mut rpc = d.rpc();
    assert!(rpc.list(pb::ListRequest {}).await.unwrap().into_inner().processes.is_empty());
    d.stop().await;
}
