//! Workspaces end to end: the real `portal-cli up/down/status` against a
//! real `portald`, with a workspace of a Python HTTP server (ready on its
//! "Serving" line), a client that depends on it, and a stand-in agent with
//! a first prompt.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::Path;
use std::process::Output;

use portal_proto::v1 as pb;
use portal_tests::*;
use serde_json::Value;

const CLI: &str = env!("CARGO_BIN_EXE_portal-cli");

async fn cli(socket: &Path, dir: &Path, args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new(CLI);
    cmd.args(args)
        .current_dir(dir)
        .env("PORTAL_SOCKET", socket)
        .env("PORTAL_NO_AUTOSTART", "1")
        .env("NO_COLOR", "1");
    bounded(&format!("portal-cli {args:?}"), cmd.output()).await.unwrap()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "failed ({:?}): {}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

const PROMPT: &str = "run the tests and fix what fails";

fn workspace_file(port: u16) -> String {
    format!(
        r#"# A dev server, a client of it, and an agent to fix what fails.
[workspace.dev]

[[workspace.dev.member]]
name = "fixer"
command = "sh"
args = ["-c", "printf '\\033]3008;portal=1;state=awaiting_input;name=claude\\033\\\\'; read line; echo \"got: $line\"; printf '\\033]3008;portal=1;state=running;name=claude\\033\\\\'; sleep 600"]
pty = true
depends_on = ["client"]
ready = "input"
prompt = "{PROMPT}"

[[workspace.dev.member]]
name = "server"
command = "python3"
args = ["-m", "http.server", "{port}", "--bind", "127.0.0.1"]
ready = "Serving"
restart = "on-failure"

[[workspace.dev.member]]
name = "client"
command = "python3"
args = ["-c", "import urllib.request, time; print('status', urllib.request.urlopen('http://127.0.0.1:{port}/').status, flush=True); time.sleep(600)"]
depends_on = ["server"]
ready = "status 200"
"#
    )
}

fn members(status_json: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(status_json).unwrap();
    v["members"].as_array().unwrap().clone()
}

fn member<'a>(members: &'a [Value], name: &str) -> &'a Value {
    members.iter().find(|m| m["member"] == name).unwrap()
}

#[tokio::test]
async fn up_brings_a_fleet_up_in_order_once_and_down_stops_it() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let dir = test_dir();
    std::fs::write(dir.path().join("portal.toml"), workspace_file(free_port())).unwrap();

    let up = cli(&s, dir.path(), &["up", "--json"]).await;
    let first = members(&ok(&up));
    // In dependency order, each started once the one before was ready.
    let steps = stderr(&up);
    let at = |line: &str| steps.find(line).unwrap_or_else(|| panic!("no {line:?} in:\n{steps}"));
    assert!(at("server: ready") < at("client: started"), "{steps}");
    assert!(at("client: ready") < at("fixer: started"), "{steps}");
    assert!(at("fixer: ready") < at("fixer: first prompt sent"), "{steps}");
    for m in &first {
        assert_eq!(m["status"], "running", "{m}");
    }
    let fixer = member(&first, "fixer")["id"].as_u64().unwrap();
    wait_for_text(&mut rpc, fixer, pb::Stream::Stdout, &format!("got: {PROMPT}")).await;

    // A second `up` starts nothing and types nothing, and does not wait
    // for the agent, busy with its prompt, to wait for input again.
    let again = cli(&s, dir.path(), &["up", "--json"]).await;
    let second = members(&ok(&again));
    assert!(!stderr(&again).contains("started"), "{}", stderr(&again));
    assert!(!stderr(&again).contains("prompt sent"), "{}", stderr(&again));
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a["id"], b["id"]);
    }
    let typed = rpc
        .read(pb::ReadRequest {
            proc: by_id(fixer),
            streams: vec![pb::Stream::Stdin.into()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let typed: Vec<u8> = typed.records.into_iter().flat_map(|r| r.data).collect();
    assert_eq!(
        String::from_utf8_lossy(&typed).matches(PROMPT).count(),
        1,
        "the prompt arrives once"
    );

    // The status line counts what `agents` lists.
    let agents: Value =
        serde_json::from_str(&ok(&cli(&s, dir.path(), &["agents", "--json"]).await)).unwrap();
    let line = ok(&cli(&s, dir.path(), &["agents", "statusline"]).await);
    assert_eq!(line.trim(), agents["summary"].as_str().unwrap());
    assert_eq!(line.trim(), "run:1", "the agent works on its prompt");

    // The server dies (not through Portal): its policy brings it back.
    let server = member(&second, "server");
    let pid = rpc
        .inspect(pb::InspectRequest { proc: by_id(server["id"].as_u64().unwrap()) })
        .await
        .unwrap()
        .into_inner()
        .pid;
    let killed =
        std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    assert!(killed.success());
    let back = wait_until("the server restarted", async || {
        let st = members(&ok(&cli(&s, dir.path(), &["status", "--json"]).await));
        let m = member(&st, "server").clone();
        (m["restarts"] == 1 && m["status"] == "running").then_some(m)
    })
    .await;
    assert_ne!(back["id"], server["id"]);

    // `down` leaves nothing running.
    let down = cli(&s, dir.path(), &["down", "--json"]).await;
    for m in members(&ok(&down)) {
        assert_ne!(m["status"], "running", "{m}");
    }
    let list = rpc.list(pb::ListRequest {}).await.unwrap().into_inner().processes;
    assert!(list.iter().all(|p| p.status() != pb::Status::Running), "{list:?}");
    // And `up` after `down` starts each again under its name.
    let third = members(&ok(&cli(&s, dir.path(), &["up", "--json"]).await));
    assert!(third.iter().all(|m| m["status"] == "running"), "{third:?}");
    ok(&cli(&s, dir.path(), &["down"]).await);
    d.stop().await;
}

#[tokio::test]
async fn a_bad_file_names_its_line_and_a_member_that_fails_stops_up() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let dir = test_dir();
    let file = dir.path().join("portal.toml");
    std::fs::write(
        &file,
        "[workspace.w]\n[[workspace.w.member]]\nname = \"a\"\ncommand = \"true\"\nport = 8080\n",
    )
    .unwrap();
    let bad = cli(&s, dir.path(), &["up"]).await;
    assert_eq!(bad.status.code(), Some(1));
    assert!(stderr(&bad).contains("portal.toml line 5: unknown field `port`"), "{}", stderr(&bad));
    std::fs::write(
        &file,
        "[workspace.w]\n[[workspace.w.member]]\nname = \"a\"\ncommand = \"sh\"\nargs = [\"-c\", \"echo booting; exit 4\"]\nready = \"listening\"\n[[workspace.w.member]]\nname = \"b\"\ncommand = \"true\"\ndepends_on = [\"a\"]\n",
    )
    .unwrap();
    let failed = cli(&s, dir.path(), &["up"]).await;
    assert_eq!(failed.status.code(), Some(1));
    let err = stderr(&failed);
    assert!(
        err.contains("error: a (process")
            && err.contains("ended (exit status 4) before it was ready"),
        "{err}"
    );
    assert!(err.contains("  booting"), "its last output is shown: {err}");
    let st = members(&ok(&cli(&s, dir.path(), &["status", "--json"]).await));
    assert_eq!(member(&st, "b")["status"], "not_started");
    let missing = cli(&s, dir.path(), &["up", "--file", "nope.toml"]).await;
    assert!(stderr(&missing).contains("nope.toml: not found"), "{}", stderr(&missing));
    d.stop().await;
}

#[tokio::test]
async fn up_follows_a_restart_and_says_when_a_running_member_is_not_the_files() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let dir = test_dir();
    // Fails its first run, is ready on its second: `up` waits for the
    // restart its policy makes instead of giving up.
    std::fs::write(
        dir.path().join("portal.toml"),
        r#"[workspace.w]
[[workspace.w.member]]
name = "flaky"
command = "sh"
args = ["-c", "if [ -e ran-once ]; then echo ready; sleep 600; else touch ran-once; exit 1; fi"]
ready = "ready"
restart = "on-failure"
[[workspace.w.member]]
name = "other"
command = "sleep"
args = ["600"]
"#,
    )
    .unwrap();
    // Someone started `other` by hand with another command.
    ok(&cli(&s, dir.path(), &["start", "--name", "other", "--", "sleep", "601"]).await);
    let up = cli(&s, dir.path(), &["up", "--json"]).await;
    let states = members(&ok(&up));
    let steps = stderr(&up);
    assert!(steps.contains("flaky: failed before it was ready"), "{steps}");
    assert_eq!(member(&states, "flaky")["restarts"], 1, "{states:?}");
    assert_eq!(member(&states, "flaky")["status"], "running");
    assert!(
        steps.contains("other: running already") && steps.contains("it runs `sleep 601`"),
        "{steps}"
    );
    ok(&cli(&s, dir.path(), &["down"]).await);
    d.stop().await;
}

/// Two Python REPLs, each with first commands: the second ready as soon as
/// it runs, so `up` itself waits for its prompt before typing.
const REPLS: &str = r#"[workspace.repl]

[[workspace.repl.member]]
name = "r1"
command = "python3"
args = ["-q"]
pty = true
ready = "input"
prompt = "x = 6 * 7; print('r1 says', x)"

[[workspace.repl.member]]
name = "r2"
command = "python3"
args = ["-q"]
pty = true
depends_on = ["r1"]
prompt = "print('r2 says', sum(range(5)))"
"#;

#[tokio::test]
async fn a_first_prompt_is_typed_into_any_program_once_it_waits_for_input() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let mut rpc = d.rpc();
    let dir = test_dir();
    std::fs::write(dir.path().join("portal.toml"), REPLS).unwrap();
    let up = cli(&s, dir.path(), &["up", "--json"]).await;
    let states = members(&ok(&up));
    let steps = stderr(&up);
    for name in ["r1", "r2"] {
        assert!(
            steps.contains(&format!("{name}: first prompt sent; it waits for input again")),
            "{steps}"
        );
    }
    let r1 = member(&states, "r1")["id"].as_u64().unwrap();
    let r2 = member(&states, "r2")["id"].as_u64().unwrap();
    wait_for_text(&mut rpc, r1, pb::Stream::Stdout, "r1 says 42").await;
    wait_for_text(&mut rpc, r2, pb::Stream::Stdout, "r2 says 10").await;
    // Typed once: a second `up` types nothing.
    let again = cli(&s, dir.path(), &["up"]).await;
    ok(&again);
    assert!(!stderr(&again).contains("prompt sent"), "{}", stderr(&again));
    ok(&cli(&s, dir.path(), &["down"]).await);
    d.stop().await;
}

#[tokio::test]
async fn a_prompt_that_cannot_be_typed_is_said_in_time_and_the_rest_still_start() {
    let d = TestDaemon::start().await;
    let s = d.socket();
    let dir = test_dir();
    // `busy` never waits for input; `r2` depends on it.
    let file = REPLS.replace(
        "[[workspace.repl.member]]\nname = \"r2\"",
        "[[workspace.repl.member]]\nname = \"busy\"\ncommand = \"sleep\"\nargs = [\"600\"]\npty = true\nready_timeout = \"1s\"\nprompt = \"hello\"\n\n[[workspace.repl.member]]\nname = \"r2\"",
    );
    let file = file.replace("depends_on = [\"r1\"]", "depends_on = [\"busy\"]");
    std::fs::write(dir.path().join("portal.toml"), file).unwrap();
    let began = std::time::Instant::now();
    let up = cli(&s, dir.path(), &["up", "--json"]).await;
    assert_eq!(up.status.code(), Some(1), "{}", stderr(&up));
    let steps = stderr(&up);
    let at = |line: &str| steps.find(line).unwrap_or_else(|| panic!("no {line:?} in:\n{steps}"));
    let said = "busy: its first prompt was not typed: it did not wait for input within its ready_timeout (1 s)";
    assert!(at(said) < at("r2: started"), "{steps}");
    assert!(at("r2: first prompt sent") > at(said), "{steps}");
    // Said at its ready timeout, not at the daemon's wait ceiling.
    assert!(began.elapsed() < std::time::Duration::from_secs(30), "{:?}", began.elapsed());
    let states = members(&String::from_utf8_lossy(&up.stdout));
    assert!(states.iter().all(|m| m["status"] == "running"), "{states:?}");
    ok(&cli(&s, dir.path(), &["down"]).await);
    d.stop().await;
}

#[tokio::test]
async fn members_start_in_the_environment_of_whoever_runs_up() {
    let d = TestDaemon::start().await;
    let dir = test_dir();
    std::fs::write(
        dir.path().join("portal.toml"),
        r#"[workspace.env]

[[workspace.env.member]]
name = "shows"
command = "sh"
args = ["-c", "echo \"FOO=$FOO BAR=$BAR\""]
env = { BAR = "from-file" }
ready = "exit"
"#,
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(CLI);
    cmd.args(["up"])
        .current_dir(dir.path())
        .env("PORTAL_SOCKET", d.socket())
        .env("PORTAL_NO_AUTOSTART", "1")
        .env("FOO", "from-caller")
        .env("BAR", "from-caller");
    ok(&bounded("portal-cli up", cmd.output()).await.unwrap());
    let out = ok(&cli(&d.socket(), dir.path(), &["read", "shows"]).await);
    assert_eq!(out.trim_end(), "FOO=from-caller BAR=from-file", "the file's env wins");
    d.stop().await;
}
