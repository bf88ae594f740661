//! The terminal screen: rendering, resize reaching the child and the model,
//! the alternate screen, persistence after exit.

use portal_proto::v1 as pb;
use portal_tests::*;

#[tokio::test]
async fn resize_reaches_the_child_and_the_screen() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let script = "trap 'echo size=$(stty size)' WINCH; echo ready; while :; do sleep 0.05; done";
    let p = start_pty(&mut rpc, "sh", &["-c", script], 24, 80).await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "ready").await;
    let req =
        pb::ScreenRequest { proc: by_id(p.id), resize: Some(pb::TermSize { rows: 30, cols: 100 }) };
    let snap = rpc.screen(req).await.unwrap().into_inner();
    assert_eq!(snap.size, Some(pb::TermSize { rows: 30, cols: 100 }));
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "size=30 100").await;
    // A missing dimension keeps its value.
    let req =
        pb::ScreenRequest { proc: by_id(p.id), resize: Some(pb::TermSize { rows: 40, cols: 0 }) };
    let snap = rpc.screen(req).await.unwrap().into_inner();
    assert_eq!(snap.size, Some(pb::TermSize { rows: 40, cols: 100 }));
    assert_eq!(snap.lines.len(), 40);
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "size=40 100").await;
    let info = rpc.inspect(pb::InspectRequest { proc: by_id(p.id) }).await.unwrap().into_inner();
    assert_eq!(info.size, Some(pb::TermSize { rows: 40, cols: 100 }));
    d.stop().await;
}

#[tokio::test]
async fn less_uses_the_alternate_screen() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let dir = test_dir();
    let file = dir.path().join("text.txt");
    std::fs::write(&file, (1..=100).map(|i| format!("line number {i}\n")).collect::<String>())
        .unwrap();
    let p = start_pty(&mut rpc, "less", &[file.to_str().unwrap()], 10, 40).await;
    let snap = wait_screen(&mut rpc, p.id, "less to show the file", |s| {
        s.lines.first().is_some_and(|l| l == "line number 1")
    })
    .await;
    assert!(snap.alternate_screen, "{:#?}", snap.lines);
    assert_eq!(snap.lines[8], "line number 9");
    write(&mut rpc, p.id, b"q").await;
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.exit_code, Some(0));
    // The final screen stays readable after exit, back on the primary screen.
    let after = screen(&mut rpc, p.id).await;
    assert!(!after.alternate_screen);
    assert_eq!(after.status(), pb::Status::Exited);
    d.stop().await;
}

#[tokio::test]
async fn escape_sequences_split_across_writes_switch_screens() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let script =
        "printf '\\033[?10'; sleep 0.05; printf '49h\\033]0;my-title\\007hello'; echo; read x";
    let p = start_pty(&mut rpc, "sh", &["-c", script], 10, 40).await;
    let snap = wait_screen(&mut rpc, p.id, "hello on the alternate screen", |s| {
        s.alternate_screen && s.lines.first().is_some_and(|l| l == "hello") && s.cursor_row == 1
    })
    .await;
    assert_eq!(snap.title, "my-title");
    assert_eq!((snap.cursor_row, snap.cursor_col), (1, 0));
    write(&mut rpc, p.id, b"\r").await;
    wait_exit(&mut rpc, p.id).await;
    d.stop().await;
}

#[tokio::test]
async fn pipe_processes_have_no_screen() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "cat", &[]).await;
    let err = rpc.screen(pb::ScreenRequest { proc: by_id(p.id), resize: None }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(err.message().contains("runs on pipes, not a PTY"), "{}", err.message());
    d.stop().await;
}

#[tokio::test]
async fn top_paints_the_main_screen_and_is_full_screen() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    // top clears and paints the main screen (no alternate screen), hides the
    // cursor and repaints from the top: a full-screen program all the same.
    let p = start_pty(&mut rpc, "top", &["-d", "1"], 24, 80).await;
    let req = pb::WaitRequest { proc: by_id(p.id), ..Default::default() };
    let r = bounded("top's first screen", rpc.wait(req)).await.unwrap().into_inner();
    assert_eq!(r.reason(), pb::WaitReason::InputRequested, "{r:?}");
    assert!(!r.alternate_screen, "{r:?}");
    assert!(r.full_screen, "{r:?}");
    assert!(r.output_is_screen, "the answer is its screen: {r:?}");
    assert!(r.output.starts_with("top - "), "{r:?}");
    assert!(r.output.lines().count() <= 24, "one screen, not every repaint: {r:?}");
    assert_eq!(r.prompt, "", "a process row is not a prompt: {r:?}");
    // A key: the answer is the screen it drew.
    let req = pb::RunRequest {
        proc: by_id(p.id),
        input: "h".into(),
        no_enter: true,
        ..Default::default()
    };
    let r = bounded("top's help", rpc.run(req)).await.unwrap().into_inner();
    assert_eq!(r.reason(), pb::WaitReason::InputRequested, "{r:?}");
    assert!(r.output_is_screen, "{r:?}");
    assert!(r.output.contains("Help for Interactive Commands"), "{r:?}");
    assert_eq!(r.prompt, "", "{r:?}");
    write(&mut rpc, p.id, b"q").await;
    wait_screen(&mut rpc, p.id, "top back from its help", |s| {
        s.lines.first().is_some_and(|l| l.starts_with("top - "))
    })
    .await;
    assert!(screen(&mut rpc, p.id).await.full_screen);
    write(&mut rpc, p.id, b"q").await;
    wait_exit(&mut rpc, p.id).await;
    // Leaving, it scrolls past its last row: the screen is a terminal's again.
    let after = screen(&mut rpc, p.id).await;
    assert!(!after.full_screen, "{:#?}", after.lines);
    d.stop().await;
}
