//! Process lifecycle: kill reaches the whole tree, signals are delivered as
//! asked, exits are recorded (code and signal) and never overwritten, idle
//! timeouts keep data, cleanup only after the end, ids are never reused, and a
//! panic in one process's handler stays with that process.

use portal_proto::v1 as pb;
use portal_tests::*;

fn pid_from(out: &[u8]) -> u32 {
    String::from_utf8_lossy(out)
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("a pid line")
}

async fn kill_reaps_grandchild(pty: bool) {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let script = "sleep 300 & echo $!; wait";
    let p = if pty {
        start_pty(&mut rpc, "sh", &["-c", script], 24, 80).await
    } else {
        start_pipes(&mut rpc, "sh", &["-c", script]).await
    };
    let out = wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "\n").await;
    let grandchild = pid_from(&out);
    assert!(!is_dead(grandchild));
    let killed = rpc.kill(pb::KillRequest { proc: by_id(p.id) }).await.unwrap().into_inner();
    assert_eq!(killed.status(), pb::Status::Killed);
    assert_eq!(killed.exit_signal, Some(9));
    // Kill returns once the output reached EOF, which the grandchild held open.
    assert!(is_dead(grandchild), "grandchild {grandchild} survived the kill");
    assert!(is_dead(p.pid));
    d.stop().await;
}

#[tokio::test]
async fn kill_reaps_a_grandchild_pty() {
    kill_reaps_grandchild(true).await;
}

#[tokio::test]
async fn kill_reaps_a_grandchild_pipes() {
    kill_reaps_grandchild(false).await;
}

#[tokio::test]
async fn kill_reaches_jobs_in_their_own_process_groups() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    // An interactive shell puts each job in its own process group.
    let p = start_pty(&mut rpc, "sh", &["-i"], 24, 80).await;
    // `E""ND` in the typed line prints as `END`, so the echo of the input
    // cannot satisfy the wait.
    write(&mut rpc, p.id, b"sleep 301 & echo job=$!; echo E\"\"ND\r").await;
    let out = wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "END").await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let job: u32 = text
        .split("job=")
        .skip(1)
        .find_map(|rest| {
            rest.chars().take_while(char::is_ascii_digit).collect::<String>().parse().ok()
        })
        .expect("the job's pid");
    assert!(!is_dead(job));
    rpc.kill(pb::KillRequest { proc: by_id(p.id) }).await.unwrap();
    assert!(is_dead(job), "background job {job} survived the kill");
    d.stop().await;
}

#[tokio::test]
async fn signals_are_delivered_by_name_and_number() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let script = "trap 'echo got-usr1' USR1; trap 'echo got-int; exit 4' INT; echo ready; while :; do sleep 0.05; done";
    let p = start_pipes(&mut rpc, "sh", &["-c", script]).await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "ready").await;
    let r = rpc
        .signal(pb::SignalRequest { proc: by_id(p.id), signal: "usr1".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.signal, r.name.as_str()), (10, "SIGUSR1"));
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "got-usr1").await;
    rpc.signal(pb::SignalRequest { proc: by_id(p.id), signal: "2".into() }).await.unwrap();
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.exit_code, Some(4));
    assert_eq!(end.status(), pb::Status::Exited);
    d.stop().await;
}

#[tokio::test]
async fn pty_exit_code_and_terminating_signal_are_recorded() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pty(&mut rpc, "sh", &["-c", "exit 7"], 24, 80).await;
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!((end.exit_code, end.exit_signal), (Some(7), None));
    let p = start_pty(&mut rpc, "sh", &["-c", "kill -TERM $$"], 24, 80).await;
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!((end.exit_code, end.exit_signal), (None, Some(15)));
    assert_eq!(end.status(), pb::Status::Exited);
    d.stop().await;
}

#[tokio::test]
async fn kill_never_overwrites_a_recorded_exit() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "sh", &["-c", "exit 5"]).await;
    wait_exit(&mut rpc, p.id).await;
    let after = rpc.kill(pb::KillRequest { proc: by_id(p.id) }).await.unwrap().into_inner();
    assert_eq!(after.status(), pb::Status::Exited);
    assert_eq!(after.exit_code, Some(5));
    let all = rpc.kill_all(pb::KillAllRequest {}).await.unwrap().into_inner();
    assert!(all.killed.is_empty());
    d.stop().await;
}

#[tokio::test]
async fn kill_all_kills_only_running_processes() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let a = start_pipes(&mut rpc, "sleep", &["300"]).await;
    let b = start_pty(&mut rpc, "sleep", &["300"], 24, 80).await;
    let done = start_pipes(&mut rpc, "true", &[]).await;
    wait_exit(&mut rpc, done.id).await;
    let mut killed = rpc.kill_all(pb::KillAllRequest {}).await.unwrap().into_inner().killed;
    killed.sort_unstable();
    assert_eq!(killed, vec![a.id, b.id]);
    for id in [a.id, b.id] {
        let p = rpc.inspect(pb::InspectRequest { proc: by_id(id) }).await.unwrap().into_inner();
        assert_eq!(p.status(), pb::Status::Killed);
    }
    d.stop().await;
}

#[tokio::test]
async fn idle_timeout_kills_but_keeps_the_data() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = Start::new("sh").args(["-c", "echo hi; sleep 300"]).timeout_ms(300).run(&mut rpc).await;
    let end = wait_exit(&mut rpc, p.id).await;
    assert_eq!(end.status(), pb::Status::TimedOut);
    assert_eq!(end.exit_signal, Some(9));
    assert_eq!(end.timeout_ms, 300);
    assert_eq!(read_all(&mut rpc, p.id, pb::Stream::Stdout, pb::Encoding::Text).await, b"hi\n");
    d.stop().await;
}

#[tokio::test]
async fn cleanup_only_after_the_end_and_ids_are_never_reused() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_pipes(&mut rpc, "cat", &[]).await;
    let err = rpc.cleanup(pb::CleanupRequest { proc: by_id(p.id) }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(err.message().contains("still running"), "{}", err.message());
    rpc.kill(pb::KillRequest { proc: by_id(p.id) }).await.unwrap();
    rpc.cleanup(pb::CleanupRequest { proc: by_id(p.id) }).await.unwrap();
    let err = rpc.inspect(pb::InspectRequest { proc: by_id(p.id) }).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    let q = start_pipes(&mut rpc, "true", &[]).await;
    assert!(q.id > p.id);
    d.stop().await;
}

#[tokio::test]
async fn names_identify_processes_and_are_unique() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let editor = || Start::new("cat").name("editor");
    let p = editor().run(&mut rpc).await;
    let err = rpc.start(editor().request()).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::AlreadyExists);
    let by_name = Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Name("editor".into())) });
    let got = rpc.inspect(pb::InspectRequest { proc: by_name.clone() }).await.unwrap().into_inner();
    assert_eq!(got.id, p.id);
    rpc.kill(pb::KillRequest { proc: by_name.clone() }).await.unwrap();
    rpc.cleanup(pb::CleanupRequest { proc: by_name }).await.unwrap();
    editor().run(&mut rpc).await;
    d.stop().await;
}

#[tokio::test]
async fn shutdown_stops_every_managed_process() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let a = start_pty(&mut rpc, "sh", &["-c", "trap '' HUP; sleep 300"], 24, 80).await;
    let b = start_pipes(&mut rpc, "sleep", &["300"]).await;
    d.stop().await;
    assert!(is_dead(a.pid), "PTY process ignoring SIGHUP survived shutdown");
    assert!(is_dead(b.pid));
}

#[tokio::test]
async fn a_panic_in_one_process_handler_leaves_the_daemon_and_the_others_running() {
    let d = TestDaemon::start_with(|c| c.fault_injection = true).await;
    let mut rpc = d.rpc();
    let victim = start_pipes(&mut rpc, "sh", &["-c", "echo before; exec cat"]).await;
    let other = start_pipes(&mut rpc, "cat", &[]).await;
    wait_for_text(&mut rpc, victim.id, pb::Stream::Stdout, "before").await;
    let trigger = pb::WriteRequest {
        proc: by_id(victim.id),
        data: portald::config::FAULT_PANIC_TRIGGER.to_vec().into(),
        secret: false,
    };
    let err = rpc.write(trigger).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Internal);
    assert!(err.message().contains("handler failed"), "{}", err.message());
    // The victim is reported lost, its program killed, its log kept.
    wait_until("the victim to be reported lost", async || {
        let p = rpc.inspect(pb::InspectRequest { proc: by_id(victim.id) }).await.unwrap();
        (p.into_inner().status() == pb::Status::Lost).then_some(())
    })
    .await;
    wait_until("the victim's program to be killed", async || is_dead(victim.pid).then_some(()))
        .await;
    let log = read_all(&mut rpc, victim.id, pb::Stream::Stdout, pb::Encoding::Raw).await;
    assert_eq!(log, b"before\n");
    // Later requests to it fail at once with the same clear error.
    let req = pb::WriteRequest { proc: by_id(victim.id), data: "x".into(), secret: false };
    let err = rpc.write(req).await.unwrap_err();
    assert!(err.message().contains("handler failed"), "{}", err.message());
    // Everything else carries on.
    write(&mut rpc, other.id, b"still here\n").await;
    wait_for_text(&mut rpc, other.id, pb::Stream::Stdout, "still here").await;
    rpc.get_info(pb::GetInfoRequest {}).await.unwrap();
    d.stop().await;
}
