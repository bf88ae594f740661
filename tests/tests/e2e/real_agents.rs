//! The real Claude Code and Codex CLIs (npm, versions pinned in
//! `tests/agents/package.json`) in Portal PTYs, each against a fake model
//! server on loopback ([`portal_tests::fake_models`]): states through a turn,
//! a permission dialog that sends never type into, a send delivered exactly
//! once, agents started directly and from a shell, and kills that leave
//! nothing behind.
//!
//! Without the CLIs (`npm ci --prefix tests/agents`, which `.ci/run` runs)
//! each test says so and skips; under `CI=true` it fails instead, so CI
//! never passes without them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use portal_proto::v1 as pb;
use portal_tests::fake_models::{self, Api, FakeModel, Reply};
use portal_tests::*;

type Rpc = pb::portal_client::PortalClient<tonic::transport::Channel>;

/// The CLIs, or `None` (and why) outside CI.
fn clis() -> Option<fake_models::Installed> {
    let found = fake_models::installed();
    if found.missing.is_empty() {
        return Some(found);
    }
    assert!(std::env::var_os("CI").is_none(), "{} (CI must run them)", found.missing);
    eprintln!("skipping: {}", found.missing);
    None
}

/// An agent's home and working directory, and its environment.
struct Setup {
    _dir: tempfile::TempDir,
    home: PathBuf,
    work: PathBuf,
    env: std::collections::HashMap<String, String>,
}

/// [`fake_models::claude_home`] or [`fake_models::codex_home`].
type Prepare = fn(&Path, &Path, &str) -> std::io::Result<Vec<(String, String)>>;

fn setup(make: Prepare, server: &FakeModel) -> Setup {
    let dir = test_dir();
    let home = dir.path().join("home");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let env = make(&home, &work, &server.base_url()).unwrap().into_iter().collect();
    Setup { _dir: dir, home, work, env }
}

async fn start_agent(rpc: &mut Rpc, program: &Path, args: &[&str], s: &Setup) -> pb::Process {
    Start::pty(program.display().to_string())
        .args(args)
        .cwd(&s.work)
        .envs(&s.env)
        .size(40, 120)
        .run(rpc)
        .await
}

async fn agent(rpc: &mut Rpc, id: u64) -> Option<pb::Agent> {
    let r = rpc.agent_list(pb::AgentListRequest::default()).await.unwrap().into_inner();
    r.agents.into_iter().find(|a| a.id == id)
}

/// Waits until the agent is in `state` (and `check` holds), or fails
/// naming what it was.
async fn reach(rpc: &mut Rpc, id: u64, state: pb::AgentState, check: fn(&pb::Agent) -> bool) {
    let mut last = None;
    let found = tokio::time::timeout(AGENT_BOUND, async {
        loop {
            let r = pb::AgentWaitRequest {
                ids: vec![id],
                states: vec![state.into()],
                mode: pb::WaitMode::All.into(),
                timeout_ms: 1000,
            };
            let r = rpc.agent_wait(r).await.unwrap().into_inner().results.remove(0);
            if let Some(a) = r.agent.filter(|a| a.state() == state && check(a)) {
                return a;
            }
            last = agent(rpc, id).await;
        }
    })
    .await;
    if found.is_err() {
        let w = pb::AgentWatchRequest { since: 0, timeout_ms: 1, ..Default::default() };
        let w = rpc.agent_watch(w).await.unwrap().into_inner().transitions;
        let stdin = read_all(rpc, id, pb::Stream::Stdin, pb::Encoding::Raw).await;
        let out = read_all(rpc, id, pb::Stream::Stdout, pb::Encoding::Raw).await;
        let out = String::from_utf8_lossy(&out);
        let marks: Vec<(usize, String)> = out
            .match_indices("7501")
            .map(|(i, _)| (i, out[i.saturating_sub(2)..(i + 40).min(out.len())].to_owned()))
            .collect();
        eprintln!("7501 in output ({} bytes): {marks:?}", out.len());
        panic!(
            "agent {id} never reached {state:?}; last seen: {last:#?}\ntransitions: {w:#?}\n\
             typed: {:?}\nscreen: {:#?}",
            String::from_utf8_lossy(&stdin),
            screen(rpc, id).await.lines
        );
    }
}

/// Agents take a second or two to start on a loaded machine.
const AGENT_BOUND: Duration = Duration::from_secs(30);

async fn screen_shows(rpc: &mut Rpc, id: u64, text: &str) {
    let found = tokio::time::timeout(AGENT_BOUND, async {
        wait_screen(rpc, id, text, |s| s.lines.iter().any(|l| l.contains(text))).await
    })
    .await;
    assert!(found.is_ok(), "the screen never showed {text:?}: {:#?}", screen(rpc, id).await.lines);
}

async fn send(rpc: &mut Rpc, id: u64, text: &str) -> pb::AgentSendResult {
    let req = pb::AgentSendRequest {
        ids: vec![id],
        text: text.into(),
        timeout_ms: 20_000,
        ..Default::default()
    };
    rpc.agent_send(req).await.unwrap().into_inner().results.remove(0)
}

/// Presses a named key (`Enter`, `Esc`) or types one character (`y`).
async fn keys(rpc: &mut Rpc, id: u64, key: &str) {
    let input = if key.chars().count() == 1 {
        pb::key_input::Input::Text(key.into())
    } else {
        pb::key_input::Input::Key(key.into())
    };
    let req =
        pb::SendKeysRequest { proc: by_id(id), keys: vec![pb::KeyInput { input: Some(input) }] };
    rpc.send_keys(req).await.unwrap();
}

/// Answers the dialog with `key` until the agent takes it: Claude drops
/// keys that arrive within about 150 ms of its dialog appearing, and its
/// status report says `blocked` before the dialog is drawn.
async fn answer(rpc: &mut Rpc, id: u64, key: &str) {
    screen_shows(rpc, id, "1. Yes").await;
    for _ in 0..10 {
        keys(rpc, id, key).await;
        let gone = tokio::time::timeout(Duration::from_secs(1), async {
            loop {
                let s = screen(rpc, id).await;
                if !s.lines.iter().any(|l| l.contains("1. Yes")) {
                    return;
                }
                // From what the screen reflects, so no output falls between.
                let from = pb::Cursor {
                    offsets: vec![pb::StreamOffset {
                        stream: pb::Stream::Stdout.into(),
                        offset: s.offset,
                    }],
                };
                let follow =
                    pb::FollowRequest { proc: by_id(id), from: Some(from), ..Default::default() };
                let mut events = rpc.follow(follow).await.unwrap().into_inner();
                let _ = events.message().await;
            }
        })
        .await;
        if gone.is_ok() {
            return;
        }
    }
    panic!("the dialog never took {key}: {:#?}", screen(rpc, id).await.lines);
}

/// Every process below `pid`.
fn descendants(pid: u32) -> Vec<u32> {
    let table: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
            let ppid = stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()?;
            Some((p, ppid))
        })
        .collect();
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        out.extend(table.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    out
}

async fn kill_leaves_nothing(rpc: &mut Rpc, p: &pb::Process) {
    let tree = descendants(p.pid);
    rpc.kill(pb::KillRequest { proc: by_id(p.id) }).await.unwrap();
    for pid in tree {
        assert!(is_dead(pid), "{pid} (under {}) outlived the kill", p.pid);
    }
}

fn stdin_log(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn claude_with_hooks_through_a_turn_a_dialog_and_its_end() {
    let Some(clis) = clis() else { return };
    let claude = clis.claude.unwrap();
    let server = FakeModel::start(
        Api::Anthropic,
        [
            Reply::Text("Hello from the fake model.".into()),
            Reply::Shell("touch approved.txt".into()),
            Reply::Text("The command ran.".into()),
        ],
    )
    .await
    .unwrap();
    let s = setup(fake_models::claude_home, &server);
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let hooks = pb::AgentHooksRequest {
        action: pb::HookAction::Install.into(),
        agent: pb::HookAgent::Claude.into(),
        emitter: sibling_binary("portal-cli").display().to_string(),
        home: s.home.display().to_string(),
        dry_run: false,
    };
    rpc.agent_hooks(hooks).await.unwrap();
    let p = start_agent(&mut rpc, &claude, &[], &s).await;
    // What an orchestrator does: wait for a ready state, then send. Its
    // SessionStart hook says `idle` before it reads keys; the send waits
    // for its screen.
    reach(&mut rpc, p.id, pb::AgentState::Idle, |a| a.kind == "claude").await;
    // A send at the prompt is typed once and reaches the model once.
    let r = send(&mut rpc, p.id, "hello portal").await;
    assert!(r.sent, "{r:?}");
    server.wait_main_requests(1, AGENT_BOUND).await.unwrap();
    reach(&mut rpc, p.id, pb::AgentState::Done, |_| true).await;
    let prompts = server.user_prompts();
    assert_eq!(prompts.iter().filter(|x| *x == "hello portal").count(), 1, "{prompts:?}");
    // A tool that asks: the dialog is reported, and a send is not typed.
    assert!(send(&mut rpc, p.id, "please write the file").await.sent);
    reach(&mut rpc, p.id, pb::AgentState::AwaitingInput, |a| {
        a.reason == "permission" && a.dialog.contains("Do you want to proceed?")
    })
    .await;
    let before = read_all(&mut rpc, p.id, pb::Stream::Stdin, pb::Encoding::Raw).await;
    let r = send(&mut rpc, p.id, "1 more thing: update the docs").await;
    assert!(!r.sent && r.dialog.contains("1. Yes"), "{r:?}");
    let after = read_all(&mut rpc, p.id, pb::Stream::Stdin, pb::Encoding::Raw).await;
    assert_eq!(stdin_log(&after), stdin_log(&before), "typed into the dialog");
    // Approved: the tool runs, the turn ends.
    answer(&mut rpc, p.id, "Enter").await;
    reach(&mut rpc, p.id, pb::AgentState::Done, |a| a.dialog.is_empty()).await;
    assert!(s.work.join("approved.txt").exists(), "the approved command ran");
    kill_leaves_nothing(&mut rpc, &p).await;
    reach(&mut rpc, p.id, pb::AgentState::Exited, |_| true).await;
    d.stop().await;
}

#[tokio::test]
async fn claude_from_a_shell_without_hooks_and_a_rejected_tool() {
    let Some(clis) = clis() else { return };
    let claude = clis.claude.unwrap();
    let server = FakeModel::start(Api::Anthropic, [Reply::Shell("touch rejected.txt".into())])
        .await
        .unwrap();
    let s = setup(fake_models::claude_home, &server);
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let shell = start_agent(&mut rpc, Path::new("sh"), &["-i"], &s).await;
    write(&mut rpc, shell.id, format!("{}\r", claude.display()).as_bytes()).await;
    screen_shows(&mut rpc, shell.id, "? for shortcuts").await;
    // Discovered in the shell, and idle by its own status report.
    reach(&mut rpc, shell.id, pb::AgentState::Idle, |a| a.name == "claude").await;
    assert!(send(&mut rpc, shell.id, "please write the file").await.sent);
    reach(&mut rpc, shell.id, pb::AgentState::AwaitingInput, |a| {
        a.reason == "permission" && !a.dialog.is_empty()
    })
    .await;
    // Rejected: no hook would say so; its status says it waits again.
    answer(&mut rpc, shell.id, "Esc").await;
    reach(&mut rpc, shell.id, pb::AgentState::Idle, |a| a.dialog.is_empty()).await;
    assert!(!s.work.join("rejected.txt").exists());
    let r = send(&mut rpc, shell.id, "/exit").await;
    if !r.sent {
        let w = rpc
            .agent_watch(pb::AgentWatchRequest { since: 0, timeout_ms: 1, ..Default::default() })
            .await
            .unwrap()
            .into_inner();
        let log = read_all(&mut rpc, shell.id, pb::Stream::Stdin, pb::Encoding::Raw).await;
        panic!(
            "{r:?}\n{:#?}\n{:#?}\nstdin {:?}",
            screen(&mut rpc, shell.id).await.lines,
            w.transitions,
            String::from_utf8_lossy(&log)
        );
    }
    reach(&mut rpc, shell.id, pb::AgentState::Exited, |_| true).await;
    let p = rpc.inspect(pb::InspectRequest { proc: by_id(shell.id) }).await.unwrap();
    assert_eq!(p.into_inner().status(), pb::Status::Running, "the shell lives on");
    d.stop().await;
}

#[tokio::test]
async fn codex_through_a_turn_a_dialog_a_rejection_and_a_kill() {
    let Some(clis) = clis() else { return };
    let codex = clis.codex.unwrap();
    let server = FakeModel::start(
        Api::OpenAi,
        [
            Reply::Text("Hello from the fake model.".into()),
            Reply::Shell("touch approved.txt".into()),
            Reply::Text("Escalated done.".into()),
            Reply::Shell("touch rejected.txt".into()),
        ],
    )
    .await
    .unwrap();
    let s = setup(fake_models::codex_home, &server);
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let p = start_agent(&mut rpc, &codex, &[], &s).await;
    // Fresh, before any prompt: ready by its own status report (no hook
    // fires before the first prompt).
    reach(&mut rpc, p.id, pb::AgentState::Idle, |_| true).await;
    let r = send(&mut rpc, p.id, "hello portal").await;
    assert!(r.sent, "{r:?}");
    if let Err(e) = server.wait_main_requests(1, AGENT_BOUND).await {
        panic!("{e}: {:#?}", screen(&mut rpc, p.id).await.lines);
    }
    reach(&mut rpc, p.id, pb::AgentState::Done, |_| true).await;
    let prompts = server.user_prompts();
    assert_eq!(prompts.iter().filter(|x| *x == "hello portal").count(), 1, "{prompts:?}");
    // The approval dialog: reported, never typed into (`p` would approve
    // for good).
    assert!(send(&mut rpc, p.id, "touch it").await.sent);
    reach(&mut rpc, p.id, pb::AgentState::AwaitingInput, |a| {
        a.reason == "permission" && a.dialog.contains("Yes, proceed")
    })
    .await;
    let r = send(&mut rpc, p.id, "please also update the docs").await;
    assert!(!r.sent && r.dialog.contains("Would you like to run"), "{r:?}");
    answer(&mut rpc, p.id, "y").await;
    reach(&mut rpc, p.id, pb::AgentState::Done, |a| a.dialog.is_empty()).await;
    assert!(s.work.join("approved.txt").exists());
    // A rejected command: back to waiting for a prompt.
    assert!(send(&mut rpc, p.id, "touch another").await.sent);
    reach(&mut rpc, p.id, pb::AgentState::AwaitingInput, |a| {
        a.reason == "permission" && !a.dialog.is_empty()
    })
    .await;
    answer(&mut rpc, p.id, "Esc").await;
    reach(&mut rpc, p.id, pb::AgentState::Idle, |a| a.dialog.is_empty()).await;
    assert!(!s.work.join("rejected.txt").exists());
    kill_leaves_nothing(&mut rpc, &p).await;
    d.stop().await;
}

#[tokio::test]
async fn codex_from_a_shell_with_hooks_installed_around_its_own_records() {
    let Some(clis) = clis() else { return };
    let codex = clis.codex.unwrap();
    let server = FakeModel::start(Api::OpenAi, [Reply::Text("Hello.".into())]).await.unwrap();
    let s = setup(fake_models::codex_home, &server);
    let d = TestDaemon::start().await;
    let mut rpc = d.rpc();
    let hooks = |action: pb::HookAction| pb::AgentHooksRequest {
        action: action.into(),
        agent: pb::HookAgent::Codex.into(),
        emitter: sibling_binary("portal-cli").display().to_string(),
        home: s.home.display().to_string(),
        dry_run: false,
    };
    rpc.agent_hooks(hooks(pb::HookAction::Install)).await.unwrap();
    let config = s.home.join(".codex/config.toml");
    // What Codex writes when the user trusts the hooks in its /hooks view.
    let trusted = fake_models::codex_trust_hooks(&config).unwrap();
    assert!(trusted >= 6, "{trusted} hooks trusted");
    // Started from a shell this time.
    let p = start_agent(&mut rpc, Path::new("sh"), &["-i"], &s).await;
    write(&mut rpc, p.id, format!("{}\r", codex.display()).as_bytes()).await;
    reach(&mut rpc, p.id, pb::AgentState::Idle, |a| a.name == "codex").await;
    assert!(send(&mut rpc, p.id, "hello portal").await.sent);
    // The turn's end comes from a hook (as well as from its status).
    reach(&mut rpc, p.id, pb::AgentState::Done, |a| a.source() == pb::AgentSource::Hook).await;
    let status =
        |r: pb::AgentHooksResponse| (r.reports[0].status.clone(), r.reports[0].trust.clone());
    let r = rpc.agent_hooks(hooks(pb::HookAction::Status)).await.unwrap().into_inner();
    assert_eq!(status(r), ("installed".into(), "trusted".into()), "Codex's records are read");
    let r = rpc.agent_hooks(hooks(pb::HookAction::Install)).await.unwrap().into_inner();
    assert_eq!(r.reports[0].change, "nothing to change");
    rpc.agent_hooks(hooks(pb::HookAction::Uninstall)).await.unwrap();
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(!text.contains("portal-cli"), "{text}");
    // Every record was one of Portal's hooks': they went with them.
    assert!(!text.contains("trusted_hash") && text.contains("[model_providers.fake]"), "{text}");
    assert!(send(&mut rpc, p.id, "/quit").await.sent);
    reach(&mut rpc, p.id, pb::AgentState::Exited, |_| true).await;
    let shell = rpc.inspect(pb::InspectRequest { proc: by_id(p.id) }).await.unwrap();
    assert_eq!(shell.into_inner().status(), pb::Status::Running, "the shell lives on");
    // Its SessionEnd hook may still be reporting; this test daemon is no
    // subreaper, so what Codex leaves behind is not Portal's to find.
    wait_until("Codex and its hooks to end", async || {
        (descendants(p.pid).len() == 1).then_some(())
    })
    .await;
    kill_leaves_nothing(&mut rpc, &p).await;
    d.stop().await;
}
