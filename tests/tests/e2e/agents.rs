//! The agent monitor with fake agents: small scripts that report through
//! OSC 3008, through `portal-cli emit` with hook-like JSON, ring bells, exit,
//! or run inside a shell that survives them.

use portal_proto::v1 as pb;
use portal_tests::*;

type Rpc = portal_proto::v1::portal_client::PortalClient<tonic::transport::Channel>;

fn osc(state: &str, name: &str) -> String {
    format!("printf '\\033]3008;portal=1;state={state};name={name}\\033\\\\'")
}

async fn agent(rpc: &mut Rpc, id: u64) -> Option<pb::Agent> {
    rpc.agent_list(pb::AgentListRequest::default())
        .await
        .unwrap()
        .into_inner()
        .agents
        .into_iter()
        .find(|a| a.id == id)
}

async fn wait_state(
    rpc: &mut Rpc,
    ids: &[u64],
    states: &[pb::AgentState],
    any: bool,
    timeout_ms: u64,
) -> pb::AgentWaitResponse {
    let req = pb::AgentWaitRequest {
        ids: ids.to_vec(),
        states: states.iter().map(|s| (*s).into()).collect(),
        mode: if any { pb::WaitMode::Any } else { pb::WaitMode::All }.into(),
        timeout_ms,
    };
    bounded("agent wait", rpc.agent_wait(req)).await.unwrap().into_inner()
}

async fn reach(rpc: &mut Rpc, id: u64, state: pb::AgentState) -> pb::Agent {
    let r = wait_state(rpc, &[id], &[state], false, 8000).await;
    let x = &r.results[0];
    assert_eq!(
        x.outcome(),
        pb::AgentWaitOutcome::Reached,
        "agent {id} did not reach {state:?}: {:?}",
        x.agent
    );
    x.agent.clone().unwrap()
}

#[tokio::test]
async fn osc_3008_reports_change_state_and_foreign_records_do_not() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let script = format!(
        "printf '\\033]3008;start=abc;user=root;type=shell\\033\\\\'; {}; read x; {}; read y",
        osc("running", "fake"),
        osc("done", "fake")
    );
    let p = start_pty(&mut rpc, "sh", &["-c", &script], 24, 80).await;
    let a = reach(&mut rpc, p.id, pb::AgentState::Running).await;
    assert_eq!((a.name.as_str(), a.source(), a.exact), ("fake", pb::AgentSource::Osc, true));
    write(&mut rpc, p.id, b"\r").await;
    let a = reach(&mut rpc, p.id, pb::AgentState::Done).await;
    assert_eq!(a.source(), pb::AgentSource::Osc);
    // A foreign OSC 3008 record alone never makes an agent.
    let q = start_pty(
        &mut rpc,
        "sh",
        &["-c", "printf '\\033]3008;start=x;type=shell\\033\\\\'; echo marker; read z"],
        24,
        80,
    )
    .await;
    wait_for_text(&mut rpc, q.id, pb::Stream::Stdout, "marker").await;
    assert!(agent(&mut rpc, q.id).await.is_none());
    d.stop().await;
}

fn emit_script(cli: &std::path::Path, state: &str, event: &str, payload: &str) -> String {
    format!(
        "printf '%s' '{payload}' | '{}' emit {state} --name claude --event {event}",
        cli.display()
    )
}

#[tokio::test]
async fn hook_reports_over_the_socket_with_the_reminder_guard() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let cli = sibling_binary("portal-cli");
    let script = format!(
        "{}; read a; {}; read b; {}; echo reminded; read c; {}; read d",
        emit_script(&cli, "running", "UserPromptSubmit", r#"{"session_id":"sess-1"}"#),
        emit_script(&cli, "done", "Stop", "{}"),
        emit_script(
            &cli,
            "awaiting_input",
            "Notification",
            r#"{"notification_type":"idle_prompt","message":"Claude is waiting"}"#
        ),
        emit_script(
            &cli,
            "awaiting_input",
            "Notification",
            r#"{"notification_type":"permission_prompt"}"#
        ),
    );
    let p = start_pty(&mut rpc, "sh", &["-c", &script], 24, 80).await;
    let a = reach(&mut rpc, p.id, pb::AgentState::Running).await;
    assert_eq!(
        (a.source(), a.session_id.as_str(), a.name.as_str()),
        (pb::AgentSource::Hook, "sess-1", "claude")
    );
    write(&mut rpc, p.id, b"\r").await;
    reach(&mut rpc, p.id, pb::AgentState::Done).await;
    // The idle reminder must not turn done into awaiting_input.
    write(&mut rpc, p.id, b"\r").await;
    // The reminder was reported before the script printed this.
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "reminded").await;
    let r = wait_state(&mut rpc, &[p.id], &[pb::AgentState::AwaitingInput], false, 700).await;
    assert_eq!(r.results[0].outcome(), pb::AgentWaitOutcome::Timeout);
    assert_eq!(r.results[0].agent.as_ref().unwrap().state(), pb::AgentState::Done);
    write(&mut rpc, p.id, b"\r").await;
    let a = reach(&mut rpc, p.id, pb::AgentState::AwaitingInput).await;
    assert_eq!(a.reason, "permission");
    d.stop().await;
}

#[tokio::test]
async fn a_wrong_token_is_rejected() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let mine =
        start_pty(&mut rpc, "sh", &["-c", "echo $PORTAL_SESSION_TOKEN; read x"], 24, 80).await;
    let other =
        start_pty(&mut rpc, "sh", &["-c", "echo $PORTAL_SESSION_TOKEN; read x"], 24, 80).await;
    let out = wait_for_text(&mut rpc, mine.id, pb::Stream::Stdout, "\n").await;
    let token = String::from_utf8_lossy(&out).trim().to_owned();
    assert_eq!(token.len(), 32, "{token:?}");
    let emit = |session: u64, token: &str| pb::EmitRequest {
        session,
        token: token.into(),
        state: pb::AgentState::Done.into(),
        ..Default::default()
    };
    let err = rpc.emit(emit(mine.id, "0".repeat(32).as_str())).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    // One process's token cannot speak for another.
    let err = rpc.emit(emit(other.id, &token)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::PermissionDenied);
    let ok = rpc.emit(emit(mine.id, &token)).await.unwrap().into_inner();
    assert_eq!(ok.agent.unwrap().state(), pb::AgentState::Done);
    d.stop().await;
}

#[tokio::test]
async fn heuristics_only_until_an_authoritative_source_speaks() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let script = format!(
        "printf '\\033]9;4;1;10\\007'; read a; printf '\\007'; read b; {}; read c; printf '\\007\\033]9;4;1;50\\007'; echo rang; read d",
        osc("done", "fake")
    );
    let p = start_pty(&mut rpc, "sh", &["-c", &script], 24, 80).await;
    let a = reach(&mut rpc, p.id, pb::AgentState::Running).await;
    assert_eq!((a.source(), a.exact), (pb::AgentSource::Heuristic, false));
    write(&mut rpc, p.id, b"\r").await;
    let a = reach(&mut rpc, p.id, pb::AgentState::AwaitingInput).await;
    assert_eq!((a.source(), a.exact), (pb::AgentSource::Heuristic, false));
    write(&mut rpc, p.id, b"\r").await;
    reach(&mut rpc, p.id, pb::AgentState::Done).await;
    write(&mut rpc, p.id, b"\r").await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "rang").await;
    let a = agent(&mut rpc, p.id).await.unwrap();
    assert_eq!(
        (a.state(), a.source()),
        (pb::AgentState::Done, pb::AgentSource::Osc),
        "a bell after a report changed the state"
    );
    d.stop().await;
}

#[tokio::test]
async fn child_exit_and_discovery_by_foreground_process() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    // A fake `claude` run from a shell Portal started.
    let dir = test_dir();
    let fake = dir.path().join("claude");
    std::fs::write(&fake, "#!/bin/sh\necho fake claude ready\nread answer\necho bye\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let shell = start_pty(&mut rpc, "sh", &["-i"], 24, 80).await;
    // The job holds the terminal before it becomes the agent (as every job
    // does between the shell's fork and its exec); here it waits there for
    // a line first, so the sweeps surely see it before the exec.
    let job = format!("sh -c 'read go; exec {}'\r", fake.display());
    write(&mut rpc, shell.id, job.as_bytes()).await;
    wait_until("the job to wait for its line", async || {
        let p =
            rpc.inspect(pb::InspectRequest { proc: by_id(shell.id) }).await.unwrap().into_inner();
        (p.input_state() == pb::InputState::AwaitingInput).then_some(())
    })
    .await;
    // A shell at rest is no agent, and an agent wait says so at once.
    let r = wait_state(&mut rpc, &[shell.id], &[pb::AgentState::Exited], true, 8000).await;
    assert_eq!(r.results[0].outcome(), pb::AgentWaitOutcome::NotAnAgent);
    // Foreground sweeps run every 500 ms: this window (a wait for text the
    // job never prints) holds at least two of them, all seeing the job
    // before its exec.
    let until = pb::WaitCondition {
        needle: "never printed".into(),
        timeout_ms: 1200,
        ..Default::default()
    };
    let req = pb::WaitRequest { proc: by_id(shell.id), until: Some(until), ..Default::default() };
    let w = bounded("the sweeps' window", rpc.wait(req)).await.unwrap().into_inner();
    assert_eq!(w.reason(), pb::WaitReason::Timeout);
    assert_eq!(agent(&mut rpc, shell.id).await, None, "not an agent yet");
    write(&mut rpc, shell.id, b"go\r").await;
    wait_for_text(&mut rpc, shell.id, pb::Stream::Stdout, "fake claude ready").await;
    let a = wait_until("discovery of the fake claude", async || {
        agent(&mut rpc, shell.id).await.filter(|a| a.name == "claude")
    })
    .await;
    assert_eq!(
        (a.state(), a.kind.as_str()),
        (pb::AgentState::Unknown, "claude"),
        "discovery sets identity, not a busy state"
    );
    write(&mut rpc, shell.id, b"ok\r").await;
    let a = reach(&mut rpc, shell.id, pb::AgentState::Exited).await;
    assert_eq!(a.process_status(), pb::Status::Running, "the shell lives on");
    // A process that is itself the agent exits with its code.
    let p =
        start_pty(&mut rpc, "sh", &["-c", &format!("{}; exit 3", osc("running", "fake"))], 24, 80)
            .await;
    let a = reach(&mut rpc, p.id, pb::AgentState::Exited).await;
    assert_eq!((a.source(), a.reason.as_str()), (pb::AgentSource::Lifecycle, "exit 3"));
    d.stop().await;
}

#[tokio::test]
async fn an_agent_started_directly_lives_until_it_exits() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let dir = test_dir();
    let fake = dir.path().join("claude");
    std::fs::write(&fake, "#!/bin/sh\necho ready\nread a\necho turn done\nread b\nexit 4\n")
        .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let p = start_pty(&mut rpc, &fake.display().to_string(), &[], 24, 80).await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "ready").await;
    let a = agent(&mut rpc, p.id).await.expect("a PTY process has an agent record");
    assert_eq!(a.kind, "claude", "known from its command line at start");
    // Several foreground sweeps pass in this window; none may end the agent.
    let r = wait_state(&mut rpc, &[p.id], &[pb::AgentState::Exited], true, 1000).await;
    assert_eq!(
        r.results[0].outcome(),
        pb::AgentWaitOutcome::Timeout,
        "the program in its own foreground group is not an agent that left: {:?}",
        agent(&mut rpc, p.id).await
    );
    write(&mut rpc, p.id, b"go\r").await;
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "turn done").await;
    assert_ne!(agent(&mut rpc, p.id).await.unwrap().state(), pb::AgentState::Exited);
    write(&mut rpc, p.id, b"end\r").await;
    let a = reach(&mut rpc, p.id, pb::AgentState::Exited).await;
    assert_eq!(a.reason, "exit 4", "it ends by exiting, with its code");
    d.stop().await;
}

#[tokio::test]
async fn fleet_waits_all_and_any_with_timeouts() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let quick =
        start_pty(&mut rpc, "sh", &["-c", &format!("{}; read x", osc("done", "a"))], 24, 80).await;
    let slow = start_pty(
        &mut rpc,
        "sh",
        &["-c", &format!("{}; read x; {}; read y", osc("running", "b"), osc("done", "b"))],
        24,
        80,
    )
    .await;
    reach(&mut rpc, slow.id, pb::AgentState::Running).await;
    let ids = [quick.id, slow.id];
    let r = wait_state(&mut rpc, &ids, &[pb::AgentState::Done], true, 8000).await;
    let outcomes: Vec<_> = r.results.iter().map(pb::AgentWaitResult::outcome).collect();
    assert_eq!(outcomes, vec![pb::AgentWaitOutcome::Reached, pb::AgentWaitOutcome::Timeout]);
    let r = wait_state(&mut rpc, &ids, &[pb::AgentState::Done], false, 300).await;
    let outcomes: Vec<_> = r.results.iter().map(pb::AgentWaitResult::outcome).collect();
    assert_eq!(outcomes, vec![pb::AgentWaitOutcome::Reached, pb::AgentWaitOutcome::Timeout]);
    write(&mut rpc, slow.id, b"\r").await;
    let r = wait_state(&mut rpc, &ids, &[pb::AgentState::Done], false, 8000).await;
    assert!(r.results.iter().all(|x| x.outcome() == pb::AgentWaitOutcome::Reached));
    let summary =
        rpc.agent_list(pb::AgentListRequest::default()).await.unwrap().into_inner().summary;
    assert_eq!(summary, "done:2");
    d.stop().await;
}

#[tokio::test]
async fn a_retried_send_is_not_typed_twice_and_sends_never_interleave() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    // A ready agent that echoes nothing back: `cat` in raw mode, echo off
    // (raw, so it is not taken for a password prompt).
    let p = start_pty(
        &mut rpc,
        "sh",
        &["-c", &format!("{}; stty raw -echo; cat > /dev/null", osc("done", "fake"))],
        24,
        80,
    )
    .await;
    reach(&mut rpc, p.id, pb::AgentState::Done).await;
    let send = |text: &str, key: &str| pb::AgentSendRequest {
        ids: vec![p.id],
        text: text.into(),
        wait_ready: Some(false),
        key: key.into(),
        ..Default::default()
    };
    let first = rpc.agent_send(send("hello agent", "k1")).await.unwrap().into_inner();
    assert!(first.results[0].sent && !first.results[0].deduplicated);
    let again = rpc.agent_send(send("hello agent", "k1")).await.unwrap().into_inner();
    assert!(again.results[0].sent && again.results[0].deduplicated);
    // Many clients at once, each its own connection.
    let mut tasks = Vec::new();
    for i in 0..12 {
        let client = portal_client::client::Client::connect(&d.socket()).await.unwrap();
        let text = format!("<message {i} {}>", "x".repeat(200 + i * 50));
        let req = send(&text, "");
        tasks.push(tokio::spawn(async move {
            client.rpc().agent_send(req).await.map(|r| r.into_inner())
        }));
    }
    for t in tasks {
        assert!(t.await.unwrap().unwrap().results[0].sent);
    }
    let input =
        String::from_utf8(read_all(&mut rpc, p.id, pb::Stream::Stdin, pb::Encoding::Raw).await)
            .unwrap();
    assert_eq!(input.matches("hello agent").count(), 1, "{input}");
    for i in 0..12 {
        let text = format!("<message {i} {}>\r", "x".repeat(200 + i * 50));
        assert!(input.contains(&text), "message {i} was interleaved or lost");
    }
    d.stop().await;
}

#[tokio::test]
async fn agent_history_survives_a_daemon_restart() {
    let dir = test_dir();
    let config = config_in(dir.path());
    let listener = portald::bind(&config).unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(portald::serve(listener, shutdown.clone()));
    let client = portal_client::client::Client::connect(&config.socket).await.unwrap();
    let mut rpc = client.rpc();
    let p = start_pty(&mut rpc, "sh", &["-c", &format!("{}; read x", osc("done", "kept"))], 24, 80)
        .await;
    reach(&mut rpc, p.id, pb::AgentState::Done).await;
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
    let listener = portald::bind(&config).unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(portald::serve(listener, shutdown.clone()));
    let client = portal_client::client::Client::connect(&config.socket).await.unwrap();
    let w = client
        .rpc()
        .agent_watch(pb::AgentWatchRequest {
            since: 0,
            timeout_ms: 100,
            ids: vec![p.id],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let afters: Vec<_> = w.transitions.iter().map(pb::AgentTransition::after).collect();
    assert!(
        afters.contains(&pb::AgentState::Done) && afters.contains(&pb::AgentState::Exited),
        "{afters:?}"
    );
    assert_eq!(w.transitions[0].name, "kept");
    shutdown.cancel();
    bounded("shutdown", task).await.unwrap().unwrap();
}

/// A stand-in for an agent that asks permission mid-turn the way Claude Code
/// draws it, takes one key, and then finishes its turn and reads a prompt
/// (which comes as a bracketed paste, turned on like Claude Code does).
const ASKS_PERMISSION: &str = r#"#!/bin/sh
printf '\033[?2004h'
printf '\033]3008;portal=1;state=running;name=claude\033\\'
printf '● Bash(touch out.txt)\r\n\r\n'
printf '╭──────────────────────────────────╮\r\n'
printf '│ Bash command                     │\r\n'
printf '│   touch out.txt                  │\r\n'
printf '│ Do you want to proceed?          │\r\n'
printf '│ ❯ 1. Yes                         │\r\n'
printf '│   2. No, tell Claude what to do  │\r\n'
printf '╰──────────────────────────────────╯\r\n'
stty raw -echo
key=$(dd bs=1 count=1 2>/dev/null)
stty sane
printf '\033[2J\033[Hanswered %s, working\r\n' "$key"
printf '\033]3008;portal=1;state=done;name=claude\033\\'
read prompt
echo "prompt: $(printf '%s' "$prompt" | tr -d '\033' | sed 's/\[20[01]~//g')"
read more
"#;

#[tokio::test]
async fn sends_never_type_into_a_dialog_and_an_answer_resumes_the_turn() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let dir = test_dir();
    let fake = dir.path().join("claude");
    std::fs::write(&fake, ASKS_PERMISSION).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let p = start_pty(&mut rpc, &fake.display().to_string(), &[], 24, 80).await;
    let a = wait_until("the permission dialog to be reported", async || {
        agent(&mut rpc, p.id).await.filter(|a| !a.dialog.is_empty())
    })
    .await;
    assert_eq!((a.state(), a.reason.as_str()), (pb::AgentState::AwaitingInput, "permission"));
    assert!(a.dialog.contains("Do you want to proceed?\n❯ 1. Yes"), "{}", a.dialog);
    // A prompt that starts with `1` would approve the tool: nothing is typed.
    let req = pb::AgentSendRequest {
        ids: vec![p.id],
        text: "1 more thing: update the docs".into(),
        ..Default::default()
    };
    let r = rpc.agent_send(req).await.unwrap().into_inner().results.remove(0);
    assert!(!r.sent, "{r:?}");
    assert!(r.dialog.contains("Do you want to proceed?"), "{r:?}");
    let typed = read_all(&mut rpc, p.id, pb::Stream::Stdin, pb::Encoding::Raw).await;
    assert!(typed.is_empty(), "typed into the dialog: {typed:?}");
    // Someone answers it: the turn goes on, then ends, and a send goes in.
    let keys = pb::SendKeysRequest {
        proc: by_id(p.id),
        keys: vec![pb::KeyInput { input: Some(pb::key_input::Input::Text("1".into())) }],
    };
    rpc.send_keys(keys).await.unwrap();
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "answered 1").await;
    reach(&mut rpc, p.id, pb::AgentState::Done).await;
    let req =
        pb::AgentSendRequest { ids: vec![p.id], text: "next step".into(), ..Default::default() };
    let r = rpc.agent_send(req).await.unwrap().into_inner().results.remove(0);
    assert!(r.sent, "{r:?}");
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "prompt: next step").await;
    d.stop().await;
}

#[tokio::test]
async fn an_answered_dialog_goes_back_to_running() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let dir = test_dir();
    let fake = dir.path().join("claude");
    // Like the one above, but the turn goes on after the answer.
    let script = ASKS_PERMISSION
        .replace("printf '\\033]3008;portal=1;state=done;name=claude\\033\\\\'\n", "read go\n");
    std::fs::write(&fake, script).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let p = start_pty(&mut rpc, &fake.display().to_string(), &[], 24, 80).await;
    reach(&mut rpc, p.id, pb::AgentState::AwaitingInput).await;
    write(&mut rpc, p.id, b"1").await;
    let a = reach(&mut rpc, p.id, pb::AgentState::Running).await;
    assert_eq!(a.reason, "", "back to the state before the dialog: {a:?}");
    assert_eq!(agent(&mut rpc, p.id).await.unwrap().dialog, "");
    d.stop().await;
}

#[tokio::test]
async fn a_full_screen_agent_gets_its_prompt_only_once_its_screen_is_up() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let dir = test_dir();
    let go = dir.path().join("go");
    let fake = dir.path().join("claude");
    // Says `idle` (as Claude Code's SessionStart hook does) before its
    // screen is up, which it shows by turning bracketed paste on.
    let script = format!(
        "#!/bin/sh\n{}\nwhile [ ! -e {go} ]; do sleep 0.05; done\nprintf '\\033[?2004h'\nread line\necho \"got $line\"\nread more\n",
        osc("idle", "claude"),
        go = go.display()
    );
    std::fs::write(&fake, script).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let p = start_pty(&mut rpc, &fake.display().to_string(), &[], 24, 80).await;
    reach(&mut rpc, p.id, pb::AgentState::Idle).await;
    let mut sender = rpc.clone();
    let sent = tokio::spawn(async move {
        let req =
            pb::AgentSendRequest { ids: vec![p.id], text: "hello".into(), ..Default::default() };
        sender.agent_send(req).await.unwrap().into_inner().results.remove(0)
    });
    // The send is held: nothing typed (a send marks the agent running).
    let r = wait_state(&mut rpc, &[p.id], &[pb::AgentState::Running], true, 600).await;
    assert_eq!(r.results[0].outcome(), pb::AgentWaitOutcome::Timeout, "typed before the screen");
    let typed = read_all(&mut rpc, p.id, pb::Stream::Stdin, pb::Encoding::Raw).await;
    assert!(typed.is_empty(), "{typed:?}");
    std::fs::write(&go, "").unwrap();
    let r = bounded("the held send", sent).await.unwrap();
    assert!(r.sent, "{r:?}");
    wait_for_text(&mut rpc, p.id, pb::Stream::Stdout, "got").await;
    d.stop().await;
}

#[tokio::test]
async fn a_send_is_never_typed_as_a_password() {
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    // An agent whose terminal now asks for a password (sudo in its shell).
    let p = start_pty(
        &mut rpc,
        "sh",
        &["-c", &format!("{}; stty -echo; read pw; echo got-it", osc("done", "fake"))],
        24,
        80,
    )
    .await;
    reach(&mut rpc, p.id, pb::AgentState::Done).await;
    wait_until("the password prompt", async || {
        let a = agent(&mut rpc, p.id).await?;
        a.awaiting_secret.then_some(())
    })
    .await;
    let req =
        pb::AgentSendRequest { ids: vec![p.id], text: "deploy it".into(), ..Default::default() };
    let r = rpc.agent_send(req).await.unwrap().into_inner().results.remove(0);
    assert!(!r.sent && r.detail.contains("secret"), "{r:?}");
    let typed = read_all(&mut rpc, p.id, pb::Stream::Stdin, pb::Encoding::Raw).await;
    assert!(typed.is_empty(), "{typed:?}");
    d.stop().await;
}
