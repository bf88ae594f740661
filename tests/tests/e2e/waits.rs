//! Server-side waits, runs and keys: needles across chunks, settle, screen
//! stability, exits, page sizes, clamped timeouts, expect-style runs with
//! shell integration, named keys, and terminal query replies.

use portal_proto::v1 as pb;
use portal_tests::*;

fn until(f: impl FnOnce(&mut pb::WaitCondition)) -> Option<pb::WaitCondition> {
    let mut c = pb::WaitCondition::default();
    f(&mut c);
    Some(c)
}

fn from_start(streams: &[pb::Stream]) -> Option<pb::Cursor> {
    Some(pb::Cursor {
        offsets: streams
            .iter()
            .map(|s| pb::StreamOffset { stream: (*s).into(), offset: 0 })
            .collect(),
    })
}

async fn wait(rpc: &mut Rpc, id: u64, cond: Option<pb::WaitCondition>) -> pb::WaitResponse {
    let req = pb::WaitRequest {
        proc: by_id(id),
        streams: vec![],
        from: from_start(&[pb::Stream::Stdout, pb::Stream::Stderr]),
        until: cond,
    };
    bounded("wait", rpc.wait(req)).await.unwrap().into_inner()
}

type Rpc = portal_proto::v1::portal_client::PortalClient<tonic::transport::Channel>;

#[tokio::test]
async fn needles_literal_and_regex_match_across_chunks() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let script = "printf hel; sleep 0.05; printf 'lo wor'; sleep 0.05; printf 'ld\\n'; sleep 30";
    for regex in [false, true] {
        let p = start_pipes(&mut rpc, "sh", &["-c", script]).await;
        let needle = if regex { r"hel+o\s+w.rld" } else { "hello world" };
        let r = wait(
            &mut rpc,
            p.id,
            until(|c| {
                c.needle = needle.into();
                c.regex = regex;
            }),
        )
        .await;
        assert_eq!(r.reason(), pb::WaitReason::Matched, "{r:?}");
        assert_eq!(r.matched, "hello world");
        assert_eq!(r.output, "hello world\n");
        let p2 = rpc.inspect(pb::InspectRequest { proc: by_id(p.id) }).await.unwrap().into_inner();
        assert!(
            p2.streams.iter().find(|s| s.stream() == pb::Stream::Stdout).unwrap().chunks >= 3,
            "the needle did not span chunks"
        );
        rpc.kill(pb::KillRequest { proc: by_id(p.id) }).await.unwrap();
    }
    d.stop().await;
}

#[tokio::test]
async fn stop_patterns_fail_fast() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "sh", &["-c", "echo building; echo 'error: boom' >&2; sleep 30"])
        .await;
    let r = wait(
        &mut rpc,
        p.id,
        until(|c| {
            c.needle = "build finished".into();
            c.stop = vec!["error:".into()];
        }),
    )
    .await;
    assert_eq!(r.reason(), pb::WaitReason::Stopped);
    assert_eq!((r.matched.as_str(), r.match_stream()), ("error:", pb::Stream::Stderr));
    d.stop().await;
}

#[tokio::test]
async fn settle_waits_for_quiet() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "sh", &["-c", "echo a; sleep 0.1; echo b; sleep 30"]).await;
    let r = wait(&mut rpc, p.id, until(|c| c.settle_ms = 400)).await;
    assert_eq!(r.reason(), pb::WaitReason::Settled);
    assert_eq!(r.output, "a\nb\n");
    assert!(r.elapsed_ms >= 400);
    // The returned cursor continues exactly after what was seen.
    let req = pb::WaitRequest {
        proc: by_id(p.id),
        from: r.next,
        until: until(|c| c.settle_ms = 100),
        ..Default::default()
    };
    let again = rpc.wait(req).await.unwrap().into_inner();
    assert_eq!((again.reason(), again.output.as_str()), (pb::WaitReason::Settled, ""));
    d.stop().await;
}

#[tokio::test]
async fn screen_stable_sees_through_a_spinner() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    // Bytes keep coming, the rendered screen does not change.
    let script = "printf 'working'; while :; do printf '\\033[1;1Hworking'; sleep 0.02; done";
    let p = start_pty(&mut rpc, "sh", &["-c", script], 5, 20).await;
    let r = wait(
        &mut rpc,
        p.id,
        until(|c| {
            c.settle_ms = 300;
            c.timeout_ms = 1500;
        }),
    )
    .await;
    assert_eq!(
        r.reason(),
        pb::WaitReason::Timeout,
        "byte settle never happens while a spinner writes"
    );
    let r = wait(
        &mut rpc,
        p.id,
        until(|c| {
            c.settle_ms = 300;
            c.screen_stable = true;
            c.snapshot = true;
        }),
    )
    .await;
    assert_eq!(r.reason(), pb::WaitReason::ScreenStable);
    assert_eq!(r.screen[0], "working");
    d.stop().await;
}

#[tokio::test]
async fn exit_page_size_and_clamped_timeouts_are_results() {
    let d =
        TestDaemon::start_with(|c| c.wait_ceiling = std::time::Duration::from_millis(300)).await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "sh", &["-c", "echo bye; exit 7"]).await;
    let r = wait(&mut rpc, p.id, until(|c| c.needle = "never".into())).await;
    assert_eq!(
        (r.reason(), r.exit_code, r.status()),
        (pb::WaitReason::Exited, Some(7), pb::Status::Exited)
    );
    assert_eq!(r.output, "bye\n");
    // max_bytes is a page size: the wait runs to its condition (here the
    // exit) and keeps the newest text, saying where the rest begins.
    let p = start_pipes(&mut rpc, "seq", &["1", "100000"]).await;
    let r = wait(
        &mut rpc,
        p.id,
        until(|c| {
            c.needle = "never".into();
            c.max_bytes = 1000;
        }),
    )
    .await;
    assert_eq!(r.reason(), pb::WaitReason::Exited, "{}", r.output);
    assert!(
        r.bytes == 588_895 && r.output.len() <= 1000 && r.truncated,
        "{} bytes, {} output",
        r.bytes,
        r.output.len()
    );
    assert!(r.output.ends_with("99999\n100000\n"), "{}", r.output);
    let began = r.began.as_ref().map(|c| c.offsets.iter().map(|o| o.offset).collect::<Vec<_>>());
    assert_eq!(began, Some(vec![0, 0]), "{r:?}");
    let p = start_pipes(&mut rpc, "sleep", &["30"]).await;
    let r = wait(
        &mut rpc,
        p.id,
        until(|c| {
            c.needle = "never".into();
            c.timeout_ms = 600_000;
        }),
    )
    .await;
    assert_eq!(r.reason(), pb::WaitReason::Timeout);
    assert_eq!((r.effective_timeout_ms, r.timeout_clamped), (300, true));
    let err = rpc
        .wait(pb::WaitRequest {
            proc: by_id(p.id),
            until: until(|c| {
                c.needle = "(".into();
                c.regex = true;
            }),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(err.message().contains("until.needle"), "{}", err.message());
    d.stop().await;
}

#[tokio::test]
async fn needles_on_the_screen_and_already_there() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pty(
        &mut rpc,
        "sh",
        &["-c", "printf 'ready>'; read x; printf '\\033[2J\\033[Hdone'; read y"],
        5,
        30,
    )
    .await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "ready>").await;
    let r = wait(
        &mut rpc,
        p.id,
        until(|c| {
            c.needle = "ready>".into();
            c.on_screen = true;
        }),
    )
    .await;
    assert!(r.matched_at_entry && r.reason() == pb::WaitReason::Matched);
    // Expect-style: press Enter and wait for the screen to say done.
    let req = pb::RunRequest {
        proc: by_id(p.id),
        input: String::new(),
        no_enter: false,
        until: until(|c| {
            c.needle = "^done$".into();
            c.regex = true;
            c.on_screen = true;
        }),
    };
    let r = rpc.run(req).await.unwrap().into_inner();
    assert_eq!((r.reason(), r.matched.as_str()), (pb::WaitReason::Matched, "done"));
    assert!(!r.matched_at_entry);
    d.stop().await;
}

#[tokio::test]
async fn run_on_a_python_repl_returns_exactly_the_statements_output() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pty(&mut rpc, "python3", &["-q", "-i"], 24, 80).await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, ">>> ").await;
    let run = |input: &str| pb::RunRequest {
        proc: by_id(p.id),
        input: input.into(),
        ..Default::default()
    };
    let r = rpc.run(run("print(6*7)")).await.unwrap().into_inner();
    assert_eq!((r.reason(), r.output.as_str()), (pb::WaitReason::InputRequested, "42\n"));
    let r = rpc.run(run("for i in range(3): print(i)\n")).await.unwrap().into_inner();
    assert_eq!(r.reason(), pb::WaitReason::InputRequested, "{r:?}");
    assert_eq!(r.output, "0\n1\n2\n", "the echo of every line of the block is gone");
    d.stop().await;
}

#[tokio::test]
async fn run_in_a_portal_bash_returns_the_commands_exit_status() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pty(&mut rpc, "bash", &["--norc", "--noprofile"], 24, 80).await;
    let run = |input: &str| pb::RunRequest {
        proc: by_id(p.id),
        input: input.into(),
        ..Default::default()
    };
    // No waiting for the first prompt: the run must not take the startup
    // prompt's mark for its command's.
    let r = rpc.run(run("echo hi there")).await.unwrap().into_inner();
    assert_eq!(r.reason(), pb::WaitReason::Prompt);
    assert_eq!((r.output.as_str(), r.command_exit_code), ("hi there\n", Some(0)));
    let r = rpc.run(run("ls /no/such/path")).await.unwrap().into_inner();
    assert_eq!(r.command_exit_code, Some(2));
    assert!(r.output.contains("No such file"), "{:?}", r.output);
    let r = rpc.run(run("(exit 42)")).await.unwrap().into_inner();
    assert_eq!((r.command_exit_code, r.output.as_str()), (Some(42), ""));
    // The marks never reach readers of text.
    let text =
        String::from_utf8(read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Text).await)
            .unwrap();
    assert!(!text.contains("133;"), "{text}");
    d.stop().await;
}

fn key(name: &str) -> pb::KeyInput {
    pb::KeyInput { input: Some(pb::key_input::Input::Key(name.into())) }
}

fn text(t: &str) -> pb::KeyInput {
    pb::KeyInput { input: Some(pb::key_input::Input::Text(t.into())) }
}

#[tokio::test]
async fn keys_reach_vim() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pty(&mut rpc, "vim", &["-u", "NONE", "-N", "-n"], 10, 40).await;
    wait_screen(&mut rpc, p.id, "vim to start", |s| {
        s.alternate_screen && s.lines.iter().any(|l| l.starts_with('~'))
    })
    .await;
    // As with tmux send-keys, what is not a key name is typed as it is;
    // `text` types even a key name.
    let req = pb::SendKeysRequest {
        proc: by_id(p.id),
        keys: vec![key("i"), key("hello vim, "), text("Enter"), key("Escape")],
    };
    rpc.send_keys(req).await.unwrap();
    wait_screen(&mut rpc, p.id, "typed text", |s| s.lines[0] == "hello vim, Enter").await;
    let req = pb::SendKeysRequest { proc: by_id(p.id), keys: vec![key(":q!"), key("Enter")] };
    rpc.send_keys(req).await.unwrap();
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.exit_code, Some(0));
    d.stop().await;
}

#[tokio::test]
async fn arrows_follow_application_cursor_mode() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let script = "printf '\\033[?1h'; stty raw -echo; printf ready; dd bs=1 count=6 2>/dev/null | od -An -tx1; stty sane";
    let p = start_pty(&mut rpc, "sh", &["-c", script], 5, 60).await;
    wait_screen(&mut rpc, p.id, "application cursor mode", |s| {
        s.application_cursor && s.lines[0].contains("ready")
    })
    .await;
    let req = pb::SendKeysRequest { proc: by_id(p.id), keys: vec![key("Up"), key("Left")] };
    assert_eq!(rpc.send_keys(req).await.unwrap().into_inner().written, 6);
    let out = wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "1b 4f 44").await;
    assert!(
        String::from_utf8_lossy(&out).contains("1b 4f 41 1b 4f 44"),
        "{:?}",
        String::from_utf8_lossy(&out)
    );
    d.stop().await;
}

#[tokio::test]
async fn terminal_queries_are_answered() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let script = r#"printf 'abc\e[6n'; read -rs -d R pos; printf '\e[c'; read -rs -d c da; echo; echo "pos=${pos#*[} da=${da#*[}""#;
    let p = start_pty(&mut rpc, "bash", &["--norc", "--noprofile", "-c", script], 24, 80).await;
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.exit_code, Some(0));
    let out =
        String::from_utf8(read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Text).await)
            .unwrap();
    assert!(out.contains("pos=1;4 da=?1;2"), "{out:?}");
    d.stop().await;
}

/// Claude Code's probe: OSC 7501 `?` then a DA query. A terminal that takes
/// status reports echoes the probe before the DA answer; after it means no.
#[tokio::test]
async fn the_status_probe_is_answered_before_the_device_attributes() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let script = r#"printf '\e]7501;?\a\e[c'; read -rs -d c got; echo; echo "got=$(printf %s "$got" | tr '\033\007' EB)""#;
    let p = start_pty(&mut rpc, "bash", &["--norc", "--noprofile", "-c", script], 24, 80).await;
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.exit_code, Some(0));
    let out =
        String::from_utf8(read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Text).await)
            .unwrap();
    assert!(out.contains("got=E]7501;?BE[?1;2"), "{out:?}");
    d.stop().await;
}

#[tokio::test]
async fn keys_in_one_call_arrive_one_at_a_time() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    // One read, as a program that takes its input in bursts does.
    let script = "stty raw -echo; printf ready; dd bs=64 count=1 2>/dev/null | od -An -tx1; printf done; stty sane; cat >/dev/null";
    let p = start_pty(&mut rpc, "sh", &["-c", script], 5, 60).await;
    wait_screen(&mut rpc, p.id, "the reader", |s| s.lines[0].contains("ready")).await;
    let req =
        pb::SendKeysRequest { proc: by_id(p.id), keys: vec![key("Up"), key("Up"), key("Enter")] };
    rpc.send_keys(req).await.unwrap();
    let out = wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "done").await;
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.contains(" 1b 5b 41\r\n") || out.contains(" 1b 5b 41\n"),
        "the first read held more than the first key: {out:?}"
    );
    d.stop().await;
}
