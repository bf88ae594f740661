//! Output capture: nothing lost at exit, no line-length limit, UTF-8 intact,
//! partial lines visible at once, streams kept apart, input logged.

use portal_proto::v1 as pb;
use portal_tests::*;

#[tokio::test]
async fn short_lived_output_and_exit_code_pty() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pty(&mut rpc, "sh", &["-c", "printf 'a\\nb\\n'; exit 3"], 24, 80).await;
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.status(), pb::Status::Exited);
    assert_eq!(end.exit_code, Some(3));
    assert_eq!(end.exit_signal, None);
    let raw = read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Raw).await;
    assert_eq!(raw, b"a\r\nb\r\n");
    let text = read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Text).await;
    assert_eq!(text, b"a\nb\n");
    d.stop().await;
}

#[tokio::test]
async fn short_lived_output_and_exit_code_pipes() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p =
        start_pipes(&mut rpc, "sh", &["-c", "printf 'a\\nb\\n'; printf oops >&2; exit 3"]).await;
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.exit_code, Some(3));
    assert_eq!(read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Raw).await, b"a\nb\n");
    assert_eq!(read_all(&mut rpc, p.id, pb::Stream::Stderr, pb::Encoding::Raw).await, b"oops");
    d.stop().await;
}

async fn seq_is_complete(pty: bool) {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = if pty {
        start_pty(&mut rpc, "seq", &["1", "200000"], 24, 80).await
    } else {
        start_pipes(&mut rpc, "seq", &["1", "200000"]).await
    };
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.exit_code, Some(0));
    let text = read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Text).await;
    let text = String::from_utf8(text).expect("utf-8");
    let mut n = 0u32;
    for (i, line) in text.lines().enumerate() {
        n += 1;
        assert_eq!(line, (i + 1).to_string(), "line {}", i + 1);
    }
    assert_eq!(n, 200_000);
    d.stop().await;
}

#[tokio::test]
async fn seq_200000_complete_pty() {
    seq_is_complete(true).await;
}

#[tokio::test]
async fn seq_200000_complete_pipes() {
    seq_is_complete(false).await;
}

#[tokio::test]
async fn a_100_kb_line_is_kept_whole() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let script = "head -c 100000 /dev/zero | tr '\\0' x; echo; echo after";
    let p = start_pipes(&mut rpc, "sh", &["-c", script]).await;
    wait_exit(&mut rpc, p.id).await;
    let raw = read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Raw).await;
    assert_eq!(raw.len(), 100_001 + 6);
    assert!(raw[..100_000].iter().all(|&b| b == b'x'));
    assert!(raw.ends_with(b"\nafter\n"));
    d.stop().await;
}

#[tokio::test]
async fn utf8_split_across_reads_is_intact() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    // Valid text written in pieces of 1..40 bytes, flushed one by one, so the
    // daemon's reads split multi-byte characters.
    let script = "import sys\ndata = ('漢é' * 60000).encode()\ni = n = 0\nwhile i < len(data):\n    k = 1 + n % 40\n    sys.stdout.buffer.write(data[i:i + k]); sys.stdout.buffer.flush()\n    i += k; n += 1\n";
    for pty in [false, true] {
        let p = if pty {
            start_pty(&mut rpc, "python3", &["-c", script], 24, 80).await
        } else {
            start_pipes(&mut rpc, "python3", &["-c", script]).await
        };
        let end = wait_exit(&mut rpc, p.id).await;
        assert_eq!(end.exit_code, Some(0));
        let text = String::from_utf8(
            read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Text).await,
        )
        .unwrap();
        assert_eq!(text, "漢é".repeat(60000), "pty={pty}");
        let chunks = end.streams.iter().find(|s| s.stream() == pb::Stream::Stdout).unwrap().chunks;
        assert!(chunks > 1, "output arrived in {chunks} chunk(s); the split was not exercised");
    }
    d.stop().await;
}

#[tokio::test]
async fn prompt_without_newline_is_visible_in_pipe_mode() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "sh", &["-c", "printf 'Password: '; read x; echo got-$x"]).await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "Password: ").await;
    write(&mut rpc, p.id, b"hunter2\n").await;
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.exit_code, Some(0));
    let out = read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Text).await;
    assert_eq!(out, b"Password: got-hunter2\n");
    let input = read_all(&mut rpc, p.id, pb::Stream::Stdin, pb::Encoding::Raw).await;
    assert_eq!(input, b"hunter2\n");
    d.stop().await;
}

#[tokio::test]
async fn python_repl_on_a_pty_answers() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pty(&mut rpc, "python3", &["-i", "-q"], 24, 80).await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, ">>> ").await;
    write(&mut rpc, p.id, b"print(6*7)\r").await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "42\r\n").await;
    write(&mut rpc, p.id, b"exit()\r").await;
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.exit_code, Some(0));
    d.stop().await;
}

#[tokio::test]
async fn close_stdin_sends_eof_to_a_pipe_program() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "cat", &[]).await;
    write(&mut rpc, p.id, b"one\ntwo\n").await;
    rpc.close_stdin(pb::CloseStdinRequest { proc: by_id(p.id) }).await.unwrap();
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.exit_code, Some(0));
    assert!(end.stdin_closed);
    assert_eq!(
        read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Raw).await,
        b"one\ntwo\n"
    );
    d.stop().await;
}

#[tokio::test]
async fn close_stdin_sends_eof_on_a_pty() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pty(&mut rpc, "cat", &[], 24, 80).await;
    write(&mut rpc, p.id, b"typed\r").await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "typed\r\ntyped\r\n").await;
    rpc.close_stdin(pb::CloseStdinRequest { proc: by_id(p.id) }).await.unwrap();
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.exit_code, Some(0));
    let err = rpc
        .write(pb::WriteRequest { proc: by_id(p.id), data: "x".into(), secret: false })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    d.stop().await;
}

#[tokio::test]
async fn pty_children_get_xterm_256color_and_overrides() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = Start::pty("sh")
        .args(["-c", "echo $TERM/$FOO/$PORTAL_SESSION_ID; pwd"])
        .env("FOO", "bar")
        .cwd("/tmp")
        .run(&mut rpc)
        .await;
    wait_exit(&mut rpc, p.id).await;
    let out =
        String::from_utf8(read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Text).await)
            .unwrap();
    assert_eq!(out, format!("xterm-256color/bar/{}\n/tmp\n", p.id));
    d.stop().await;
}
