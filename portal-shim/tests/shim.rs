//! The real `portal-shim` binary driven over stdio by an MCP client (rmcp's),
//! against a real `portald`: the tool surface, results and errors, cursors,
//! bounded output, auto-start, reconnection, and survival of a shim crash.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

use std::path::{Path, PathBuf};
use std::process::Stdio;

use portal_proto::v1 as pb;
use portal_tests::*;
use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::{Value, json};

/// An MCP client that records the progress notifications it receives.
#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

struct Shim {
    client: RunningService<RoleClient, Recorder>,
    recorder: Recorder,
    child: tokio::process::Child,
    /// What the shim logged on stderr so far.
    log: Arc<Mutex<String>>,
}

fn daemon_binary() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_portal-shim")).with_file_name("portald");
    assert!(
        path.exists(),
        "{} is missing: build the workspace (cargo build --workspace)",
        path.display()
    );
    path
}

async fn spawn_shim(socket: &Path, data_dir: &Path, autostart: bool) -> Shim {
    spawn_shim_with(socket, data_dir, autostart, &[], &[]).await
}

/// A shim started with extra flags and environment variables.
async fn spawn_shim_with(
    socket: &Path,
    data_dir: &Path,
    autostart: bool,
    args: &[&str],
    env: &[(&str, &str)],
) -> Shim {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_portal-shim"));
    cmd.env_remove("PORTAL_TOOLS")
        .env_remove("PORTAL_TIER")
        .env_remove("PORTAL_HOST")
        // No hosts file of the user's: only this machine, unless a test says.
        .env("PORTAL_HOSTS_FILE", "/nonexistent/portal-hosts.toml")
        .env_remove("PORTAL_NO_AUTOSTART")
        .env("PORTAL_SOCKET", socket)
        .env("PORTAL_DATA_DIR", data_dir)
        .env("PORTAL_DAEMON", daemon_binary())
        .env("PORTAL_LOG", "warn")
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if !autostart {
        cmd.env("PORTAL_NO_AUTOSTART", "1");
    }
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    // The shim's log goes on to the test's stderr and is kept for asserts.
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().unwrap();
    let kept = Arc::clone(&log);
    tokio::spawn(async move {
        use tokio::io::AsyncBufReadExt as _;
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("[shim] {line}");
            let mut kept = kept.lock().unwrap();
            kept.push_str(&line);
            kept.push('\n');
        }
    });
    let recorder = Recorder::default();
    let client = bounded("MCP initialize", recorder.clone().serve((stdout, stdin))).await.unwrap();
    Shim { client, recorder, child, log }
}

impl Shim {
    async fn call(&self, name: &str, args: Value) -> CallToolResult {
        let Value::Object(args) = args else { panic!("arguments must be an object") };
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args);
        bounded(name, self.client.call_tool(params)).await.unwrap()
    }

    /// Calls a tool that must succeed; returns (text, structured content).
    async fn ok(&self, name: &str, args: Value) -> (String, Value) {
        let r = self.call(name, args).await;
        let text = text(&r);
        assert_eq!(r.is_error, Some(false), "{name} failed: {text}");
        (text, r.structured_content.unwrap_or(Value::Null))
    }

    /// Calls a tool that must fail; returns its text.
    async fn err(&self, name: &str, args: Value) -> String {
        let r = self.call(name, args).await;
        assert_eq!(r.is_error, Some(true), "{name} should have failed: {}", text(&r));
        text(&r)
    }
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

async fn with_daemon() -> (TestDaemon, Shim) {
    let d = TestDaemon::start().await;
    let shim = spawn_shim(&d.socket(), &d.dir.path().join("data"), false).await;
    (d, shim)
}

#[tokio::test]
async fn lists_every_tool_with_schemas_and_annotations() {
    let (d, shim) = with_daemon().await;
    let info = shim.client.peer_info().unwrap();
    let instructions = info.instructions.clone().unwrap();
    assert!(instructions.len() < 2048 && instructions.contains("pty: true"));
    let tools = shim.client.list_all_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "agent_hooks",
            "agent_list",
            "agent_send",
            "agent_wait",
            "agent_watch",
            "process_cleanup",
            "process_clear",
            "process_inspect",
            "process_kill",
            "process_kill_all",
            "process_list",
            "process_read",
            "process_read_new",
            "process_run",
            "process_screen",
            "process_search",
            "process_send_keys",
            "process_signal",
            "process_start",
            "process_wait",
            "process_write",
            "program_query",
            "program_record",
            "workspace_down",
            "workspace_status",
            "workspace_up"
        ]
    );
    let get = |n: &str| tools.iter().find(|t| t.name == n).unwrap();
    let start = get("process_start");
    let props = start.input_schema.get("properties").unwrap();
    for arg in ["command", "args", "cwd", "env", "timeout_ms", "pty"] {
        assert!(props.get(arg).is_some(), "process_start lacks {arg}");
    }
    assert_eq!(start.input_schema.get("required").unwrap(), &json!(["command"]));
    let read = get("process_read").input_schema.get("properties").unwrap().clone();
    assert_eq!(read["duration"]["default"], json!(1000));
    assert_eq!(read["unit"]["default"], json!("ms"));
    assert_eq!(read["source"]["default"], json!("both"));
    // Defaults that go without saying are left out.
    assert_eq!(props["pty"].get("default"), None);
    assert_eq!(props["timeout_ms"].get("default"), None);
    for t in &tools {
        assert!(t.output_schema.is_some(), "{} has no outputSchema", t.name);
    }
    // Hints are sent only where they differ from the spec's defaults (not
    // read-only, destructive, open world).
    let ann = |n: &str| get(n).annotations.clone().unwrap();
    for ro in ["process_list", "process_inspect", "process_read", "process_screen", "program_query"]
    {
        assert_eq!(ann(ro).read_only_hint, Some(true), "{ro}");
    }
    for destructive in
        ["process_kill", "process_kill_all", "process_clear", "process_cleanup", "process_signal"]
    {
        let a = ann(destructive);
        assert!(
            a.read_only_hint != Some(true) && a.destructive_hint != Some(false),
            "{destructive}"
        );
    }
    for open in ["process_start", "process_write", "process_run", "process_send_keys"] {
        let a = ann(open);
        assert!(a.open_world_hint != Some(false) && a.destructive_hint == Some(false), "{open}");
    }
    d.stop().await;
}

#[tokio::test]
async fn python_repl_on_a_pty_answers() {
    let (d, shim) = with_daemon().await;
    let mut rpc = d.rpc();
    let (text, s) = shim
        .ok("process_start", json!({"command": "python3", "args": ["-q", "-i"], "pty": true}))
        .await;
    let id = s["process"]["id"].as_u64().unwrap();
    assert!(text.starts_with(&format!("Process started. ID={id}, OS_PID=")), "{text}");
    wait_for_text(&mut rpc, id, pb::Stream::Stdout, ">>> ").await;
    shim.ok("process_write", json!({"id": id, "content": "print(6*7)\r"})).await;
    wait_for_text(&mut rpc, id, pb::Stream::Stdout, "42\r\n>>> ").await;
    let (_, s) = shim.ok("process_read_new", json!({"id": id})).await;
    assert_eq!(s["output"], json!(">>> print(6*7)\n42\n>>> "));
    assert_eq!(s["cursor"], json!("stdout:24"));
    let (text, _) = shim.ok("process_read_new", json!({"id": id})).await;
    assert!(text.starts_with("No new output."), "{text}");
    // What the agent typed is recorded as its client's, through this shim.
    let (_, s) =
        shim.ok("process_read", json!({"id": id, "source": "stdin", "duration": 60000})).await;
    let who = s["typed_by"][0]["who"].as_str().unwrap_or_default().to_owned();
    let shim_pid = shim.child.id().unwrap();
    assert!(who.ends_with(&format!("via portal-shim (pid {shim_pid})")), "{s}");
    d.stop().await;
}

#[tokio::test]
async fn bash_in_pipe_mode_runs_a_command() {
    let (d, shim) = with_daemon().await;
    let mut rpc = d.rpc();
    let (_, s) = shim
        .ok("process_start", json!({"command": "bash", "args": ["--norc", "--noprofile"]}))
        .await;
    let id = s["process"]["id"].as_u64().unwrap();
    assert_eq!(s["process"].get("pty"), None, "pipes: no pty flag");
    shim.ok(
        "process_write",
        json!({"id": id, "content": "echo hello from bash; echo oops >&2; exit 3\n"}),
    )
    .await;
    wait_exit(&mut rpc, id).await;
    let (_, s) = shim.ok("process_read_new", json!({"id": id, "source": "stdout"})).await;
    assert_eq!(s["output"], json!("hello from bash\n"));
    let (_, s) = shim.ok("process_read_new", json!({"id": id, "source": "stderr"})).await;
    assert_eq!(s["output"], json!("oops\n"));
    let (text, s) = shim.ok("process_inspect", json!({"id": id})).await;
    assert_eq!(
        (s["process"]["status"].clone(), s["process"]["exit_code"].clone()),
        (json!("exited"), json!(3))
    );
    assert!(text.contains("Exit Code:  3"), "{text}");
    let (text, _) = shim
        .ok("process_read", json!({"id": id, "source": "stdin", "duration": 60, "unit": "s"}))
        .await;
    assert!(text.starts_with("echo hello from bash"), "{text}");
    d.stop().await;
}

#[tokio::test]
async fn less_screen_shows_the_alternate_buffer() {
    let (d, shim) = with_daemon().await;
    let mut rpc = d.rpc();
    let dir = test_dir();
    let file = dir.path().join("f.txt");
    std::fs::write(&file, "first line\nsecond line\n").unwrap();
    let args = json!({"command": "less", "args": [file.to_str().unwrap()], "pty": true, "rows": 10, "cols": 40});
    let (_, s) = shim.ok("process_start", args).await;
    let id = s["process"]["id"].as_u64().unwrap();
    wait_screen(&mut rpc, id, "less showing the file", |s| {
        s.lines.first().is_some_and(|l| l == "first line")
    })
    .await;
    let (text, s) = shim.ok("process_screen", json!({"id": id})).await;
    assert_eq!(s["buffer"], json!("alternate"));
    assert!(
        text.starts_with(&format!(
            "Process {id} (status=running, buffer=alternate, 40x10, cursor="
        )),
        "{text}"
    );
    assert!(text.contains("\nsecond line\n"), "{text}");
    let (_, s) = shim.ok("process_screen", json!({"id": id, "cols": 50})).await;
    assert_eq!((s["cols"].clone(), s["rows"].clone()), (json!(50), json!(10)));
    // Waiting on a full-screen program: its screen, no prompt line, and the
    // next step is keys, not process_run.
    let (text, s) = shim.ok("process_wait", json!({"id": id, "timeout_ms": 5000})).await;
    assert_eq!(s["reason"], json!("input_requested"), "{s}");
    assert_eq!(s.get("prompt"), None, "{s}");
    assert!(s["hint"].as_str().is_some_and(|h| h.contains("process_send_keys")), "{s}");
    assert!(text.contains("full-screen program waits for keys"), "{text}");
    shim.ok("process_write", json!({"id": id, "content": "q"})).await;
    wait_exit(&mut rpc, id).await;
    d.stop().await;
}

#[tokio::test]
async fn cursors_per_source_per_client_and_after_clear() {
    let (d, shim) = with_daemon().await;
    let mut rpc = d.rpc();
    let script = "while read l; do echo out-$l; echo err-$l >&2; done";
    let (_, s) = shim.ok("process_start", json!({"command": "sh", "args": ["-c", script]})).await;
    let id = s["process"]["id"].as_u64().unwrap();
    shim.ok("process_write", json!({"id": id, "content": "1\n"})).await;
    wait_for_text(&mut rpc, id, pb::Stream::Stderr, "err-1\n").await;
    wait_for_text(&mut rpc, id, pb::Stream::Stdout, "out-1\n").await;
    // A client-held cursor reads independently of the server-side one.
    let (_, mine) =
        shim.ok("process_read_new", json!({"id": id, "cursor": "stdout:0,stderr:0"})).await;
    assert!(mine["output"].as_str().unwrap().contains("out-1"));
    let my_cursor = mine["cursor"].as_str().unwrap().to_owned();
    let (_, s) = shim.ok("process_read_new", json!({"id": id, "source": "stdout"})).await;
    assert_eq!(s["output"], json!("out-1\n"));
    // process_read does not move the server cursors.
    shim.ok("process_read", json!({"id": id, "duration": 60000})).await;
    let (_, s) = shim.ok("process_read_new", json!({"id": id, "source": "stderr"})).await;
    assert_eq!(s["output"], json!("err-1\n"));
    shim.ok("process_write", json!({"id": id, "content": "2\n"})).await;
    wait_for_text(&mut rpc, id, pb::Stream::Stderr, "err-2\n").await;
    wait_for_text(&mut rpc, id, pb::Stream::Stdout, "out-2\n").await;
    let (_, s) = shim.ok("process_read_new", json!({"id": id, "cursor": my_cursor})).await;
    let out = s["output"].as_str().unwrap();
    assert!(out.contains("out-2") && out.contains("err-2") && !out.contains("-1"), "{out}");
    let (text, _) = shim.ok("process_clear", json!({"id": id})).await;
    assert_eq!(text, format!("Process {id} I/O records cleared."));
    shim.ok("process_write", json!({"id": id, "content": "3\n"})).await;
    wait_for_text(&mut rpc, id, pb::Stream::Stderr, "err-3\n").await;
    wait_for_text(&mut rpc, id, pb::Stream::Stdout, "out-3\n").await;
    let (_, s) = shim.ok("process_read_new", json!({"id": id})).await;
    let out = s["output"].as_str().unwrap();
    assert!(out.contains("out-3") && out.contains("err-3") && !out.contains("-2"), "{out}");
    d.stop().await;
}

#[tokio::test]
async fn big_output_is_bounded_and_pageable() {
    let (d, shim) = with_daemon().await;
    let mut rpc = d.rpc();
    let (_, s) =
        shim.ok("process_start", json!({"command": "seq", "args": ["1", "2000000"]})).await;
    let id = s["process"]["id"].as_u64().unwrap();
    wait_exit(&mut rpc, id).await;
    let (text, s) = shim.ok("process_read_new", json!({"id": id})).await;
    assert!(text.len() < 70 * 1024, "{} bytes of text", text.len());
    let out = s["output"].as_str().unwrap();
    assert!(out.ends_with("1999999\n2000000\n"));
    let omitted = s["omitted_bytes"].as_u64().unwrap();
    // seq prints no escapes: its text is its bytes.
    assert_eq!(omitted + out.len() as u64, 14_888_896);
    assert!(
        text.contains(&format!("[{omitted} earlier bytes not shown")),
        "{}",
        &text[text.len() - 300..]
    );
    let from = s["omitted_cursor"].as_str().unwrap();
    let (_, s) = shim.ok("process_read", json!({"id": id, "cursor": from, "max_bytes": 8})).await;
    assert_eq!(s["output"], json!("1\n2\n3\n4\n"));
    let err = shim.err("process_read", json!({"id": id, "max_bytes": 100_000_000})).await;
    assert!(err.contains("max_bytes"), "{err}");
    d.stop().await;
}

/// `max_bytes` is a page size in process_run as in process_read:
/// a command that prints more than it before its prompt returns still comes
/// back at the prompt, with the newest `max_bytes` and a cursor that pages
/// through all of it.
#[tokio::test]
async fn a_run_longer_than_max_bytes_returns_at_its_prompt() {
    let (d, shim) = with_daemon().await;
    let (_, s) = shim
        .ok(
            "process_start",
            json!({"command": "python3", "args": ["-q"], "pty": true, "wait": "input"}),
        )
        .await;
    let id = s["process"]["id"].as_u64().unwrap();
    let (text, s) = shim
        .ok(
            "process_run",
            json!({
                "id": id,
                "input": "print('\\n'.join(f'line {i:04}' for i in range(300)))",
                "max_bytes": 1000
            }),
        )
        .await;
    assert_eq!((&s["reason"], &s["prompt"]), (&json!("input_requested"), &json!(">>> ")), "{text}");
    let out = s["output"].as_str().unwrap();
    assert!(out.len() <= 1000 && out.ends_with("line 0298\nline 0299\n"), "{text}");
    let from = s["omitted_cursor"].as_str().unwrap();
    assert!(
        text.starts_with(&format!(
            "[earlier output cut to max_bytes: process_read with cursor=\"{from}\""
        )),
        "{text}"
    );
    let (_, s) =
        shim.ok("process_read", json!({"id": id, "cursor": from, "max_bytes": 1_000_000})).await;
    let all = s["output"].as_str().unwrap();
    assert!(all.contains("line 0000\n") && all.contains("line 0299\n"), "{all}");
    d.stop().await;
}

#[tokio::test]
async fn process_search_finds_the_line_and_its_cursor_reads_around_it() {
    let (d, shim) = with_daemon().await;
    let mut rpc = d.rpc();
    let script = "for i in 1 2 3 4 5; do echo step $i; done; echo 'FATAL: disk quota exceeded' >&2; echo after";
    let (_, s) = shim
        .ok("process_start", json!({"command": "sh", "args": ["-c", script], "name": "job"}))
        .await;
    let job = s["process"]["id"].as_u64().unwrap();
    let (_, s) =
        shim.ok("process_start", json!({"command": "sh", "args": ["-c", "echo quota fine"]})).await;
    let other = s["process"]["id"].as_u64().unwrap();
    wait_exit(&mut rpc, job).await;
    wait_exit(&mut rpc, other).await;
    let (text, s) = shim.ok("process_search", json!({"query": "quota exceeded"})).await;
    let hits = s["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{s}");
    assert_eq!(hits[0]["id"], json!(job));
    assert_eq!(hits[0]["name"], json!("job"));
    assert_eq!(hits[0]["source"], json!("stderr"));
    assert_eq!(hits[0]["line"], json!("FATAL: disk quota exceeded"));
    assert!(text.contains("process_read(id="), "{text}");
    // One word, two processes; one process asked for.
    let (_, s) = shim.ok("process_search", json!({"query": "quota", "id": "job"})).await;
    assert_eq!(s["hits"].as_array().unwrap().len(), 1, "{s}");
    let (_, s) = shim.ok("process_search", json!({"query": "step", "source": "stderr"})).await;
    assert!(s["hits"].as_array().unwrap().is_empty(), "{s}");
    // Newest first, and the cursor reads from a few lines before the hit.
    let (_, s) = shim.ok("process_search", json!({"query": "step"})).await;
    let hit = &s["hits"][0];
    assert_eq!(hit["line"], json!("step 5"), "{s}");
    let (_, r) = shim
        .ok("process_read", json!({"id": job, "source": hit["source"], "cursor": hit["cursor"]}))
        .await;
    assert_eq!(r["output"], json!("step 2\nstep 3\nstep 4\nstep 5\nafter\n"), "{r}");
    let e = shim.err("process_search", json!({"query": "::"})).await;
    assert!(e.contains("has no words"), "{e}");
    d.stop().await;
}

#[tokio::test]
async fn errors_are_tool_results_with_hints() {
    let (d, shim) = with_daemon().await;
    let mut rpc = d.rpc();
    let e = shim.err("process_inspect", json!({"id": 4242})).await;
    assert_eq!(e, "Error: Process 4242 not found\nCall process_list to see the ids that exist.");
    let (_, s) = shim.ok("process_start", json!({"command": "sh", "args": ["-c", "exit 0"]})).await;
    let id = s["process"]["id"].as_u64().unwrap();
    wait_exit(&mut rpc, id).await;
    let e = shim.err("process_write", json!({"id": id, "content": "x"})).await;
    assert!(e.starts_with(&format!("Error: process {id} is not running (status=exited)")), "{e}");
    assert!(e.contains("read its output"), "{e}");
    let (_, s) = shim.ok("process_start", json!({"command": "cat"})).await;
    let cat = s["process"]["id"].as_u64().unwrap();
    let e = shim.err("process_signal", json!({"id": cat, "signal": "SIGFOO"})).await;
    assert!(e.contains("unknown signal") && e.contains("Fix the argument"), "{e}");
    let e = shim.err("process_start", json!({"command": "no-such-program-xyz"})).await;
    assert!(e.contains("cannot execute"), "{e}");
    let e = shim.err("process_start", json!({"command": "sh", "pty": "yes"})).await;
    assert!(e.contains("invalid arguments for process_start: pty: invalid type"), "{e}");
    let e = shim.err("process_wait", json!({"id": cat, "timeout_ms": "5000"})).await;
    assert!(e.contains("timeout_ms: invalid type: string \"5000\", expected"), "{e}");
    let e = shim.err("process_send_keys", json!({"id": cat, "keys": ["a", {"txt": "b"}]})).await;
    assert!(e.contains("keys[1]"), "{e}");
    let e = shim.err("process_cleanup", json!({"id": cat})).await;
    assert!(e.contains("still running"), "{e}");
    let (text, _) = shim.ok("process_kill", json!({"id": cat})).await;
    assert!(text.starts_with(&format!("Process {cat} killed. Status: killed.")), "{text}");
    let (text, _) = shim.ok("process_kill", json!({"id": id})).await;
    assert!(text.contains("had already ended (status=exited, exit 0)"), "{text}");
    let (text, _) = shim.ok("process_cleanup", json!({"id": cat})).await;
    assert_eq!(text, format!("Process {cat} cleaned up."));
    // What the daemon rejects is named as the tool's argument, not its field.
    let (_, s) = shim.ok("process_start", json!({"command": "cat"})).await;
    let cat = s["process"]["id"].as_u64().unwrap();
    let e = shim.err("process_wait", json!({"id": cat, "pattern": "(", "regex": true})).await;
    assert!(e.starts_with("Error: invalid pattern: "), "{e}");
    let e = shim
        .err("process_run", json!({"id": cat, "input": "x", "stop": ["ok", "["], "regex": true}))
        .await;
    assert!(e.starts_with("Error: invalid stop[1]: "), "{e}");
    d.stop().await;
}

#[tokio::test]
async fn next_steps_are_in_the_structured_results_the_model_reads() {
    let (d, shim) = with_daemon().await;
    let (_, s) = shim.ok("process_start", json!({"command": "cat", "pty": true})).await;
    let hint = s["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("process_wait"), "{s}");
    // A password prompt: every view of the process says to hand it over.
    let (_, s) = shim
        .ok(
            "process_start",
            json!({"command": "sh", "args": ["-c", "stty -echo; printf 'Password: '; read p"],
                   "pty": true, "wait": "input"}),
        )
        .await;
    let id = s["process"]["id"].as_u64().unwrap();
    assert_eq!(s["wait"]["awaiting_secret"], json!(true), "{s}");
    let (_, s) = shim.ok("process_inspect", json!({"id": id})).await;
    let hint = s["process"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains(&format!("portal-cli secret {id}")), "{s}");
    let (_, s) = shim.ok("process_list", json!({})).await;
    let listed = s["processes"].as_array().unwrap();
    let mine = listed.iter().find(|p| p["id"] == json!(id)).unwrap();
    assert!(mine["hint"].as_str().is_some_and(|h| h.contains("never type it")), "{mine}");
    assert!(listed.iter().any(|p| p.get("hint").is_none()), "only where there is a next step");
    d.stop().await;
}

#[tokio::test]
async fn registry_tools_keep_the_original_wording() {
    let (d, shim) = with_daemon().await;
    let (t, _) = shim.ok("program_query", json!({"program": "frobnicate"})).await;
    assert_eq!(t, "frobnicate: not in registry — apply decision rules");
    // Common programs answer on first use, from Portal's built-in profiles.
    let (t, s) = shim.ok("program_query", json!({"program": "/usr/bin/psql"})).await;
    assert!(t.starts_with("psql: needs_pty=True, built-in profile — "), "{t}");
    assert_eq!((s["builtin"].clone(), s["known"].clone()), (json!(true), json!(true)));
    assert!(s["notes"].as_str().unwrap().contains("PAGER=cat"), "{s}");
    let (t, _) = shim
        .ok(
            "program_record",
            json!({"program": "/usr/bin/PSQL.exe", "needs_pty": true, "notes": "interactive"}),
        )
        .await;
    assert_eq!(t, "Recorded psql: needs_pty=True (confirmed x1).");
    let (t, s) = shim.ok("program_query", json!({"program": "psql"})).await;
    // What was recorded here wins over the profile.
    assert_eq!(t, "psql: needs_pty=True, confirmed x1 — interactive");
    assert_eq!((s["confirmed_count"].clone(), s["builtin"].clone()), (json!(1), json!(false)));
    d.stop().await;
}

#[tokio::test]
async fn programs_outlive_a_killed_shim() {
    let (d, mut first) = with_daemon().await;
    let mut rpc = d.rpc();
    let (_, s) = first.ok("process_start", json!({"command": "cat", "pty": true})).await;
    let id = s["process"]["id"].as_u64().unwrap();
    first.ok("process_write", json!({"id": id, "content": "before\r"})).await;
    wait_for_text(&mut rpc, id, pb::Stream::Stdout, "before\r\nbefore\r\n").await;
    first.child.kill().await.unwrap();
    let second = spawn_shim(&d.socket(), &d.dir.path().join("data"), false).await;
    let (_, s) = second.ok("process_read_new", json!({"id": id})).await;
    assert!(s["output"].as_str().unwrap().contains("before"));
    second.ok("process_write", json!({"id": id, "content": "after\r"})).await;
    wait_for_text(&mut rpc, id, pb::Stream::Stdout, "after\r\nafter\r\n").await;
    let (_, s) = second.ok("process_read_new", json!({"id": id})).await;
    assert_eq!(s["output"], json!("after\nafter\n"));
    d.stop().await;
}

async fn shutdown_daemon(socket: &Path) {
    let client = portal_client::client::Client::connect(socket).await.unwrap();
    client.rpc().shutdown(pb::ShutdownRequest {}).await.unwrap();
}

#[tokio::test]
async fn auto_starts_the_daemon_and_reconnects_after_it_dies() {
    let dir = test_dir();
    let socket = dir.path().join("run").join("portald.sock");
    let data = dir.path().join("data");
    let shim = spawn_shim(&socket, &data, true).await;
    let (t, _) = shim.ok("process_list", json!({})).await;
    assert_eq!(t, "No managed processes.");
    let client = portal_client::client::Client::connect(&socket).await.unwrap();
    let first_pid = client.info().pid;
    // The daemon dies under the shim: the next call starts a new one. (A
    // call that changes something, sent the moment after, could not tell a
    // daemon dead before it from one that died while carrying it out, and
    // says so instead of repeating it: see
    // input_in_flight_when_the_daemon_dies_is_never_typed_twice.)
    std::process::Command::new("kill").arg("-9").arg(first_pid.to_string()).status().unwrap();
    let (t, _) = shim.ok("process_list", json!({})).await;
    assert_eq!(t, "No managed processes.");
    let (_, s) = shim.ok("process_start", json!({"command": "true"})).await;
    assert!(s["process"]["id"].as_u64().unwrap() >= 1);
    let again = portal_client::client::Client::connect(&socket).await.unwrap();
    assert_ne!(again.info().pid, first_pid);
    shutdown_daemon(&socket).await;
}

#[tokio::test]
async fn a_session_carries_on_across_a_live_upgrade() {
    let dir = test_dir();
    let socket = dir.path().join("run").join("portald.sock");
    let data = dir.path().join("data");
    // The shim starts the real portald, which can replace itself.
    let shim = spawn_shim(&socket, &data, true).await;
    let (text, s) = shim
        .ok(
            "process_start",
            json!({"command": "python3", "args": ["-q"], "pty": true, "wait": "input"}),
        )
        .await;
    let id = s["process"]["id"].as_u64().unwrap();
    assert_eq!(s["wait"]["reason"], json!("input_requested"), "{text}");
    shim.ok("process_run", json!({"id": id, "input": "x = 41"})).await;
    let client = portal_client::client::Client::connect(&socket).await.unwrap();
    let before = client.info().clone();
    client.rpc().upgrade(pb::UpgradeRequest { binary: String::new() }).await.unwrap();
    drop(client);
    // The next call reaches the new daemon through the same shim, and the
    // REPL is the same one, with its state.
    let (text, s) = shim.ok("process_run", json!({"id": id, "input": "print(x + 1)"})).await;
    assert_eq!(
        (s["reason"].clone(), s["output"].clone()),
        (json!("input_requested"), json!("42\n")),
        "{text}"
    );
    let after = portal_client::client::Client::connect(&socket).await.unwrap();
    assert_eq!(after.info().pid, before.pid);
    assert_ne!(after.info().started_at_ns, before.started_at_ns, "a new daemon answered");
    assert_eq!(after.info().upgraded_from, before.daemon_version);
    // The new daemon knows who typed what came after, as the old one did.
    let (_, s) =
        shim.ok("process_read", json!({"id": id, "source": "stdin", "duration": 60000})).await;
    let typists: Vec<&str> =
        s["typed_by"].as_array().unwrap().iter().map(|t| t["who"].as_str().unwrap()).collect();
    let shim_pid = shim.child.id().unwrap();
    assert!(
        !typists.is_empty()
            && typists.iter().all(|w| w.ends_with(&format!("via portal-shim (pid {shim_pid})"))),
        "{s}"
    );
    shutdown_daemon(&socket).await;
}

#[tokio::test]
async fn input_in_flight_when_the_daemon_dies_is_never_typed_twice() {
    let dir = test_dir();
    let socket = dir.path().join("run").join("portald.sock");
    let shim = spawn_shim(&socket, &dir.path().join("data"), true).await;
    let (_, s) = shim.ok("process_start", json!({"command": "cat", "pty": true})).await;
    let id = s["process"]["id"].as_u64().unwrap();
    let client = portal_client::client::Client::connect(&socket).await.unwrap();
    let pid = client.info().pid;
    let mut rpc = client.rpc();
    // A run whose wait never ends by itself: the daemon dies under it once
    // its input has been typed.
    let run = shim.call(
        "process_run",
        json!({"id": id, "input": "typed-once", "pattern": "never-printed", "timeout_ms": 20000}),
    );
    let crash = async {
        wait_for_text(&mut rpc, id, pb::Stream::Stdout, "typed-once\r\ntyped-once\r\n").await;
        // Answered after a commit: what was shown live is in the log, and
        // survives the crash.
        rpc.inspect(pb::InspectRequest { proc: by_id(id) }).await.unwrap();
        std::process::Command::new("kill").arg("-9").arg(pid.to_string()).status().unwrap();
    };
    let (result, ()) = tokio::join!(run, crash);
    let said = text(&result);
    assert_eq!(result.is_error, Some(true), "{said}");
    assert!(said.contains("may or may not have taken effect"), "{said}");
    // The next call reaches a new daemon, which adopted cat: the input is
    // there once (echoed by the terminal, printed by cat), not twice.
    let (_, s) = shim.ok("process_read", json!({"id": id})).await;
    let output = s["output"].as_str().unwrap();
    assert_eq!(output.matches("typed-once").count(), 2, "{output:?}");
    shutdown_daemon(&socket).await;
}

#[tokio::test]
async fn two_shims_starting_at_once_share_one_daemon() {
    let dir = test_dir();
    let socket = dir.path().join("run").join("portald.sock");
    let data = dir.path().join("data");
    let (a, b) = tokio::join!(spawn_shim(&socket, &data, true), spawn_shim(&socket, &data, true));
    let (ra, rb) = tokio::join!(
        a.ok("process_start", json!({"command": "sleep", "args": ["60"]})),
        b.ok("process_start", json!({"command": "sleep", "args": ["60"]}))
    );
    let (ia, ib) =
        (ra.1["process"]["id"].as_u64().unwrap(), rb.1["process"]["id"].as_u64().unwrap());
    assert_ne!(ia, ib);
    // Both see both: one daemon.
    let (_, s) = a.ok("process_list", json!({})).await;
    assert_eq!(s["processes"].as_array().unwrap().len(), 2);
    shutdown_daemon(&socket).await;
}

#[tokio::test]
async fn run_wait_and_send_keys_tools() {
    let (d, shim) = with_daemon().await;
    // Start and wait for the first prompt in one call.
    let (text, s) = shim
        .ok(
            "process_start",
            json!({"command": "python3", "args": ["-q", "-i"], "pty": true, "wait": "input"}),
        )
        .await;
    let id = s["process"]["id"].as_u64().unwrap();
    assert_eq!(s["wait"]["reason"], json!("input_requested"), "{text}");
    assert_eq!(s["wait"]["prompt"], json!(">>> "), "{text}");
    // The wait's cursor continues, and its state is the process's now:
    // neither is said twice.
    assert_eq!(s.get("cursor"), None, "{s}");
    assert_eq!(s["wait"]["input_state"], json!("awaiting_input"), "{s}");
    assert_eq!(s["process"].get("input_state"), None, "{s}");
    let (text, s) = shim.ok("process_run", json!({"id": id, "input": "print(6*7)"})).await;
    assert_eq!(
        (s["reason"].clone(), s["output"].clone(), s["prompt"].clone()),
        (json!("input_requested"), json!("42\n"), json!(">>> "))
    );
    assert!(text.starts_with("42\n>>> \n[input_requested"), "{text}");
    // One consumption position: read_new has nothing the run returned.
    let (text, _) = shim.ok("process_read_new", json!({"id": id})).await;
    assert!(text.starts_with("No new output."), "{text}");
    let (_, s) = shim.ok("process_list", json!({})).await;
    assert_eq!(s["processes"][0]["input_state"], json!("awaiting_input"));
    let (_, s) = shim.ok("process_start", json!({"command": "cat", "pty": true})).await;
    let cat = s["process"]["id"].as_u64().unwrap();
    let (t, _) =
        shim.ok("process_send_keys", json!({"id": cat, "keys": [{"text": "abc"}, "Enter"]})).await;
    assert_eq!(t, format!("Sent 4 bytes of keys to process {cat}."));
    let (_, s) = shim
        .ok(
            "process_wait",
            json!({"id": cat, "cursor": "stdout:0", "pattern": "abc\\s+abc", "regex": true}),
        )
        .await;
    assert_eq!(s["reason"], json!("matched"));
    // As with tmux send-keys: not a key name, so typed as it is.
    shim.ok("process_send_keys", json!({"id": cat, "keys": ["Escape", ":q!", "Enter"]})).await;
    let (_, s) = shim.ok("process_wait", json!({"id": cat, "pattern": ":q!"})).await;
    assert_eq!(s["reason"], json!("matched"));
    d.stop().await;
}

/// Characters of structured content a result may take in this test's
/// scenario: half of what each took before results were made lean (list
/// 1,648, start 766, run 388, screen 204). The structured content is what
/// Claude Code and Codex hand their model, on every call.
const BUDGETS: [(&str, usize); 4] = [
    ("process_list (five processes)", 824),
    ("process_start (wait: input)", 383),
    ("process_run", 194),
    ("process_screen (80x24 REPL)", 102),
];

#[tokio::test]
async fn structured_results_stay_within_their_budgets() {
    let (d, shim) = with_daemon().await;
    // A fixed directory: the test's own would make the sizes depend on
    // where the repository was cloned.
    let start = |args: Value| {
        let mut a = args;
        a["cwd"] = json!("/tmp");
        a
    };
    let size = |v: &Value| serde_json::to_string(v).unwrap().len();
    let (_, started) = shim
        .ok(
            "process_start",
            start(json!({"command": "python3", "args": ["-q"], "pty": true, "wait": "input", "name": "repl"})),
        )
        .await;
    let id = started["process"]["id"].as_u64().unwrap();
    let (_, ran) = shim.ok("process_run", json!({"id": id, "input": "print(6*7)"})).await;
    assert_eq!(ran["output"], json!("42\n"), "{ran}");
    let (_, screen) = shim.ok("process_screen", json!({"id": id})).await;
    assert_eq!(screen["rows"], json!(24));
    assert_eq!(screen["lines"], json!([">>> print(6*7)", "42", ">>>"]), "blank rows left out");
    // Four more: a REPL, a pipes job, one that exited, one that was killed.
    shim.ok(
        "process_start",
        start(json!({"command": "python3", "args": ["-q"], "pty": true, "wait": "input"})),
    )
    .await;
    shim.ok("process_start", start(json!({"command": "sleep", "args": ["600"]}))).await;
    shim.ok(
        "process_start",
        start(json!({"command": "sh", "args": ["-c", "echo done; exit 3"], "wait": "exit"})),
    )
    .await;
    let (_, killed) =
        shim.ok("process_start", start(json!({"command": "sleep", "args": ["601"]}))).await;
    shim.ok("process_kill", json!({"id": killed["process"]["id"]})).await;
    let (_, listed) = shim.ok("process_list", json!({})).await;
    assert_eq!(listed["processes"].as_array().unwrap().len(), 5);
    let sizes = [size(&listed), size(&started), size(&ran), size(&screen)];
    for ((what, budget), (got, value)) in
        BUDGETS.iter().zip(sizes.iter().zip([&listed, &started, &ran, &screen]))
    {
        eprintln!("{what}: {got} characters of structured content (budget {budget})");
        assert!(got <= budget, "{what}: {got} characters > {budget}: {value}");
    }
    // Nothing at its default is sent: no empty maps or lists, no false.
    for v in [&listed, &started, &ran, &screen] {
        let text = v.to_string();
        for filler in ["{}", "[]", ":false", ":\"\""] {
            assert!(!text.contains(filler), "{filler} in {text}");
        }
    }
    d.stop().await;
}

#[tokio::test]
async fn the_text_block_leaves_the_output_to_the_structured_result_where_the_model_reads_only_that()
{
    let (d, shim) = with_daemon().await;
    let (_, s) = shim
        .ok(
            "process_start",
            json!({"command": "python3", "args": ["-q"], "pty": true, "wait": "input"}),
        )
        .await;
    let id = s["process"]["id"].as_u64().unwrap();
    let forty = "print('\\n'.join(f'line {i}' for i in range(40)))";
    // A client that may show its model the text gets the output there.
    let (full, s) = shim.ok("process_run", json!({"id": id, "input": forty})).await;
    assert!(full.starts_with("line 0\nline 1\n"), "{full}");
    assert!(s["output"].as_str().unwrap().ends_with("line 39\n"), "{s}");
    // Claude Code names itself in each request's `_meta` (2026-07-28): its
    // model reads only the structured content, so the text says where the
    // output is, and the input is attributed to it.
    let claude = spawn_shim(&d.socket(), &d.dir.path().join("data"), false).await;
    let mut meta = rmcp::model::RequestMetaObject::new();
    meta.set_client_info(rmcp::model::Implementation::new("claude-code", "2.1.332"));
    let Value::Object(args) = json!({"id": id, "input": forty}) else { unreachable!() };
    let mut params = CallToolRequestParams::new("process_run").with_arguments(args);
    params.meta = Some(meta);
    let r = bounded("process_run as claude-code", claude.client.call_tool(params)).await.unwrap();
    let short = text(&r);
    assert!(
        short.starts_with("(40 lines of output in the structured result)\n[input_requested"),
        "{short}"
    );
    let s = r.structured_content.unwrap();
    assert!(s["output"].as_str().unwrap().ends_with("line 39\n"), "{s}");
    let (_, s) =
        shim.ok("process_read", json!({"id": id, "source": "stdin", "duration": 60000})).await;
    let who: Vec<&str> =
        s["typed_by"].as_array().unwrap().iter().filter_map(|t| t["who"].as_str()).collect();
    assert!(who.iter().any(|w| w.starts_with("claude-code 2.1.332 via portal-shim")), "{s}");
    // --result-text short: the count for every client, short output kept.
    let short_shim = spawn_shim_with(
        &d.socket(),
        &d.dir.path().join("data"),
        false,
        &[],
        &[("PORTAL_RESULT_TEXT", "short")],
    )
    .await;
    let (t, _) = short_shim.ok("process_run", json!({"id": id, "input": forty})).await;
    assert!(t.starts_with("(40 lines of output in the structured result)"), "{t}");
    let (t, _) = short_shim.ok("process_run", json!({"id": id, "input": "6*7"})).await;
    assert!(t.starts_with("42\n>>> \n[input_requested"), "short output stays: {t}");
    d.stop().await;
}

#[tokio::test]
async fn programs_start_in_the_clients_environment() {
    let d = TestDaemon::start().await;
    // What an MCP client gives the shim it launches (an activated venv).
    let shim = spawn_shim_with(
        &d.socket(),
        &d.dir.path().join("data"),
        false,
        &[],
        &[("FOO", "from-agent"), ("VIRTUAL_ENV", "/x/venv")],
    )
    .await;
    let show =
        json!({"command": "sh", "args": ["-c", "echo FOO=$FOO VENV=$VIRTUAL_ENV"], "wait": "exit"});
    let (_, s) = shim.ok("process_start", show.clone()).await;
    assert_eq!(s["wait"]["output"], json!("FOO=from-agent VENV=/x/venv\n"), "{s}");
    let mut over = show.clone();
    over["env"] = json!({"FOO": "over"});
    let (_, s) = shim.ok("process_start", over).await;
    assert_eq!(s["wait"]["output"], json!("FOO=over VENV=/x/venv\n"), "{s}");
    // Only the overrides are ever shown.
    assert_eq!(s["process"]["env"], json!({"FOO": "over"}), "{s}");
    let mut daemon = show.clone();
    daemon["env_from"] = json!("daemon");
    let (_, s) = shim.ok("process_start", daemon).await;
    assert_eq!(s["wait"]["output"], json!("FOO= VENV=\n"), "portald's own: {s}");
    let mut clean = show;
    clean["env_from"] = json!("clean");
    clean["env"] = json!({"VIRTUAL_ENV": "/y"});
    let (_, s) = shim.ok("process_start", clean).await;
    assert_eq!(s["wait"]["output"], json!("FOO= VENV=/y\n"), "{s}");
    let e = shim.err("process_start", json!({"command": "true", "env_from": "mine"})).await;
    assert!(e.contains("env_from"), "{e}");
    d.stop().await;
}

#[tokio::test]
async fn a_client_that_closes_early_ends_the_shim_quietly() {
    let d = TestDaemon::start().await;
    // Nothing at all, and a 2026-07-28 client that only discovers.
    let discover = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{}}\n";
    for input in ["", discover] {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_portal-shim"))
            .env("PORTAL_SOCKET", d.socket())
            .env("PORTAL_NO_AUTOSTART", "1")
            .env_remove("PORTAL_LOG")
            .env_remove("RUST_BACKTRACE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut stdin, input.as_bytes()).await.unwrap();
        drop(stdin);
        let out = bounded("the shim ends", child.wait_with_output()).await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{input:?}: {:?} {stderr}", out.status);
        assert_eq!(stderr, "", "{input:?}: nothing to say");
    }
    d.stop().await;
}

#[tokio::test]
async fn a_wait_says_what_decided_the_program_waits_for_input() {
    let (d, shim) = with_daemon().await;
    // python's readline waits on the terminal alone: the kernel decides,
    // which goes without saying.
    let (_, s) = shim
        .ok(
            "process_start",
            json!({"command": "python3", "args": ["-q"], "pty": true, "wait": "input"}),
        )
        .await;
    assert_eq!(s["wait"]["reason"], json!("input_requested"), "{s}");
    assert_eq!(s["wait"].get("input_source"), None, "{s}");
    // node's event loop watches the terminal among other fds: its prompt
    // drawn again decides with the kernel.
    let (_, s) =
        shim.ok("process_start", json!({"command": "node", "pty": true, "wait": "input"})).await;
    assert_eq!(s["wait"]["reason"], json!("input_requested"), "{s}");
    assert_eq!(s["wait"]["input_source"], json!("kernel_prompt"), "{s}");
    d.stop().await;
}

#[tokio::test]
async fn waits_report_progress_and_cancelling_leaves_the_process_alone() {
    let (d, shim) = with_daemon().await;
    let mut rpc = d.rpc();
    let (_, s) = shim
        .ok(
            "process_start",
            json!({"command": "sh", "args": ["-c", "echo compiling unit 7; exec cat"]}),
        )
        .await;
    let id = s["process"]["id"].as_u64().unwrap();
    let (text, s) =
        shim.ok("process_wait", json!({"id": id, "pattern": "never", "timeout_ms": 2500})).await;
    assert_eq!(s["reason"], json!("timeout"));
    assert!(text.contains("call process_wait again"), "{text}");
    let notes = shim.recorder.progress.lock().unwrap().clone();
    assert!(!notes.is_empty(), "no progress notification during a 2.5 s wait");
    // Progress carries the newest output line.
    assert!(
        notes.iter().all(|n| n.message.as_deref().is_some_and(|m| m.contains("compiling unit 7"))),
        "{notes:?}"
    );
    // The client gives up on a long wait (dropping the call sends
    // notifications/cancelled): the call is cancelled, the process is not.
    let logged = spawn_shim_with(
        &d.socket(),
        &d.dir.path().join("data"),
        false,
        &[],
        &[("PORTAL_LOG", "info")],
    )
    .await;
    let params = CallToolRequestParams::new("process_wait").with_arguments(
        json!({"id": id, "pattern": "never", "timeout_ms": 40000}).as_object().unwrap().clone(),
    );
    let cancelled = tokio::time::timeout(
        std::time::Duration::from_millis(200),
        logged.client.call_tool(params),
    )
    .await;
    assert!(cancelled.is_err(), "the wait returned early");
    wait_until("the shim to see the cancellation", async || {
        logged.log.lock().unwrap().contains("call cancelled by the client").then_some(())
    })
    .await;
    let p = rpc.inspect(pb::InspectRequest { proc: by_id(id) }).await.unwrap().into_inner();
    assert_eq!(p.status(), pb::Status::Running);
    shim.ok("process_write", json!({"id": id, "content": "still here\n"})).await;
    wait_for_text(&mut rpc, id, pb::Stream::Stdout, "still here").await;
    d.stop().await;
}

#[tokio::test]
async fn agent_tools_list_wait_and_send() {
    let (d, shim) = with_daemon().await;
    let mut rpc = d.rpc();
    let script = "printf '\\033]3008;portal=1;state=done;name=fake\\033\\\\'; stty raw -echo; cat > /dev/null";
    let (_, s) = shim
        .ok("process_start", json!({"command": "sh", "args": ["-c", script], "pty": true}))
        .await;
    let id = s["process"]["id"].as_u64().unwrap();
    let (_, s) =
        shim.ok("agent_wait", json!({"ids": [id], "states": ["done"], "timeout_ms": 8000})).await;
    assert_eq!(s["results"][0]["outcome"], json!("reached"));
    let (text, s) = shim.ok("agent_list", json!({})).await;
    assert_eq!(s["summary"], json!("done:1"));
    assert!(text.contains("fake done (osc)"), "{text}");
    let (_, s) = shim.ok("agent_send", json!({"ids": [id], "text": "next task", "key": "k"})).await;
    assert_eq!(
        (s["results"][0]["sent"].clone(), s["results"][0]["deduplicated"].clone()),
        (json!(true), json!(false))
    );
    let (_, s) = shim.ok("agent_send", json!({"ids": [id], "text": "next task", "key": "k"})).await;
    assert_eq!(s["results"][0]["deduplicated"], json!(true));
    wait_for_text(&mut rpc, id, pb::Stream::Stdin, "next task\r").await;
    let (_, s) =
        shim.ok("agent_watch", json!({"cursor": 0, "ids": [id], "timeout_ms": 2000})).await;
    assert!(!s["changes"].as_array().unwrap().is_empty());
    let e = shim.err("agent_wait", json!({"ids": [9999]})).await;
    assert!(e.contains("no process with id 9999"), "{e}");
    d.stop().await;
}

#[tokio::test]
async fn every_line_on_stdin_gets_an_answer() {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let d = TestDaemon::start().await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_portal-shim"))
        .env("PORTAL_SOCKET", d.socket())
        .env("PORTAL_NO_AUTOSTART", "1")
        .env("PORTAL_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"x\",\"p\":\"{}\"}}",
        "a".repeat(17 << 20)
    );
    let bad: Vec<(Vec<u8>, i64)> = vec![
        (b"not json".to_vec(), -32700),
        (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/li".to_vec(), -32700),
        (b"".to_vec(), -32700),
        (b"\"\\ud800\"".to_vec(), -32700),
        (b"\xff\xfe".to_vec(), -32700),
        (deep.into_bytes(), -32700),
        (huge.into_bytes(), -32600),
        (b"{\"jsonrpc\":\"1.0\",\"id\":5,\"method\":\"ping\"}".to_vec(), -32600),
    ];
    for (line, want) in &bad {
        stdin.write_all(line).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        let answer =
            bounded("an answer to a malformed line", out.next_line()).await.unwrap().unwrap();
        let v: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(v["error"]["code"], json!(want), "{answer}");
    }
    // The session is undisturbed: a real client goes on, and an unknown
    // tool is an isError result like every other failure.
    for msg in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}}),
    ] {
        stdin.write_all(format!("{msg}\n").as_bytes()).await.unwrap();
    }
    let init: Value =
        serde_json::from_str(&bounded("initialize", out.next_line()).await.unwrap().unwrap())
            .unwrap();
    assert_eq!(init["id"], json!(1), "{init}");
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    let call: Value =
        serde_json::from_str(&bounded("tools/call", out.next_line()).await.unwrap().unwrap())
            .unwrap();
    assert_eq!(call["id"], json!(2), "{call}");
    assert_eq!(call["result"]["isError"], json!(true), "{call}");
    assert!(
        call["result"]["content"][0]["text"].as_str().unwrap().contains("process_start"),
        "{call}"
    );
    drop(stdin);
    d.stop().await;
}

#[tokio::test]
async fn every_tool_takes_a_name_where_it_takes_an_id() {
    let (d, shim) = with_daemon().await;
    shim.ok("process_start", json!({"command": "cat", "pty": true, "name": "repl"})).await;
    let (_, s) = shim.ok("process_inspect", json!({"id": "repl"})).await;
    assert_eq!(s["process"]["name"], json!("repl"));
    shim.ok("process_send_keys", json!({"id": "repl", "keys": ["hello", "Enter"]})).await;
    let (_, s) = shim.ok("process_wait", json!({"id": "repl", "pattern": "hello"})).await;
    assert_eq!(s["reason"], json!("matched"));
    // The next step is in the structured result too (some clients show the
    // model only that).
    let (_, s) =
        shim.ok("process_wait", json!({"id": "repl", "pattern": "never", "timeout_ms": 1})).await;
    assert!(s["hint"].as_str().is_some_and(|h| h.contains("call process_wait again")), "{s}");
    let (_, s) = shim
        .ok("agent_wait", json!({"ids": ["repl"], "states": ["done"], "timeout_ms": 8000}))
        .await;
    assert_eq!(s["results"][0]["outcome"], json!("not_an_agent"));
    let e = shim.err("process_inspect", json!({"id": "nobody"})).await;
    assert!(e.contains("id: no process is named \"nobody\""), "{e}");
    // The error lists what can be named, saving a process_list call.
    assert!(e.contains("running: \"repl\" = 1 (cat)"), "{e}");
    // Ended processes after the running ones, said to have ended.
    shim.ok("process_start", json!({"command": "true", "name": "gone", "wait": "exit"})).await;
    let e = shim.err("process_inspect", json!({"id": "nobody"})).await;
    assert!(
        e.contains(
            "running: \"repl\" = 1 (cat); ended (their output can be read): \"gone\" = 2 (true)."
        ),
        "{e}"
    );
    let e = shim.err("agent_send", json!({"ids": [1, "nobody"], "text": "x"})).await;
    assert!(e.contains("ids[1]: no process is named \"nobody\""), "{e}");
    d.stop().await;
}

#[tokio::test]
async fn tool_sets_and_tiers_limit_what_is_listed_and_called() {
    let d = TestDaemon::start().await;
    let data = d.dir.path().join("data");
    let names = |tools: &[rmcp::model::Tool]| -> Vec<String> {
        tools.iter().map(|t| t.name.to_string()).collect()
    };

    let shim = spawn_shim_with(
        &d.socket(),
        &data,
        false,
        &["--tools", "process,waits", "--tier", "no-kill"],
        &[],
    )
    .await;
    let listed = names(&shim.client.list_all_tools().await.unwrap());
    for shown in ["process_start", "process_run", "process_wait", "process_write", "process_list"] {
        assert!(listed.iter().any(|n| n == shown), "{shown} missing from {listed:?}");
    }
    for hidden in [
        "process_kill",
        "process_kill_all",
        "process_signal",
        "process_clear",
        "process_cleanup",
        "agent_list",
        "program_query",
    ] {
        assert!(!listed.iter().any(|n| n == hidden), "{hidden} listed: {listed:?}");
    }
    let instructions = shim.client.peer_info().unwrap().instructions.clone().unwrap();
    assert!(instructions.contains("groups: process, waits; tier: no-kill"), "{instructions}");
    let (_, s) = shim.ok("process_start", json!({"command": "cat", "name": "kept"})).await;
    let id = s["process"]["id"].as_u64().unwrap();
    let e = shim.err("process_kill", json!({"id": id})).await;
    assert!(e.contains("process_kill is not allowed") && e.contains("\"no-kill\""), "{e}");
    let e = shim.err("agent_list", json!({})).await;
    assert!(e.contains("group \"agents\" is not enabled"), "{e}");
    // Refused means untouched.
    let p = d
        .rpc()
        .inspect(pb::InspectRequest {
            proc: Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) }),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(p.status(), pb::Status::Running);

    // The environment chooses too: a read-only server lists only tools that change nothing.
    let ro = spawn_shim_with(&d.socket(), &data, false, &[], &[("PORTAL_TIER", "read-only")]).await;
    let tools = ro.client.list_all_tools().await.unwrap();
    assert!(tools.len() >= 8, "{:?}", names(&tools));
    for t in &tools {
        assert_eq!(t.annotations.as_ref().and_then(|a| a.read_only_hint), Some(true), "{}", t.name);
    }
    // ...and so do the groups.
    let reg =
        spawn_shim_with(&d.socket(), &data, false, &[], &[("PORTAL_TOOLS", "registry")]).await;
    let listed = names(&reg.client.list_all_tools().await.unwrap());
    assert_eq!(listed, ["program_query", "program_record"]);
    let e = reg.err("process_list", json!({})).await;
    assert!(e.contains("group \"process\" is not enabled"), "{e}");
    let (_, s) = ro.ok("process_read", json!({"id": "kept"})).await;
    assert_eq!(s["id"], json!(id));
    let e = ro.err("process_start", json!({"command": "true"})).await;
    assert!(e.contains("\"read-only\""), "{e}");

    // A misspelt group stops the shim at once, naming it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_portal-shim"))
        .args(["--tools", "process,agnets"])
        .env("PORTAL_SOCKET", d.socket())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("\"agnets\""), "{stderr}");
    d.stop().await;
}

#[tokio::test]
async fn tools_drive_programs_on_another_host_over_ssh() {
    let Some(sshd) = portal_tests::sshd::sshd_or_skip(&sibling_binary("portal-cli")).await else {
        return;
    };
    let d = TestDaemon::start().await;
    let hosts = sshd.box_only.display().to_string();
    // Autostart on: the remote side starts its own portald (this one runs).
    let shim = spawn_shim_with(
        &d.socket(),
        &d.dir.path().join("data"),
        true,
        &[],
        &[("PORTAL_HOSTS_FILE", hosts.as_str())],
    )
    .await;
    let tools = bounded("tools/list", shim.client.list_all_tools()).await.unwrap();
    let arg = |tool: &str| {
        let t = tools.iter().find(|t| t.name == tool).unwrap();
        t.input_schema.get("properties").and_then(|p| p.get("host")).cloned()
    };
    let start_host = arg("process_start").expect("process_start takes a host");
    assert!(start_host["description"].as_str().unwrap().contains("local, box"), "{start_host}");
    assert!(arg("process_list").unwrap()["description"].as_str().unwrap().contains("\"all\""));
    assert!(arg("program_query").is_none(), "the registry is this machine's");

    let (_, s) = shim
        .ok(
            "process_start",
            json!({"command": "python3", "args": ["-q"], "pty": true, "name": "py", "host": "box", "wait": "input"}),
        )
        .await;
    let py = s["process"]["id"].as_u64().unwrap();
    assert_eq!(s["host"], json!("box"), "a remote result says where: {s}");
    let (text, s) =
        shim.ok("process_run", json!({"id": "py", "host": "box", "input": "print(6*7)"})).await;
    assert!(s["output"].as_str().unwrap().contains("42"), "{s}");
    assert!(text.starts_with("[host box] "), "{text}");
    // An id that is not there: the error names the host.
    let err = shim.err("process_inspect", json!({"id": py + 1000, "host": "box"})).await;
    assert!(err.contains("on host box") && err.contains("ids are per host"), "{err}");
    // A password prompt there: the hint a person runs names the host.
    let (_, s) = shim
        .ok(
            "process_start",
            json!({"command": "sh", "args": ["-c", "stty -echo; printf 'Password: '; read p; echo ok"], "pty": true, "host": "box", "wait": "input"}),
        )
        .await;
    let secret = s["process"]["id"].as_u64().unwrap();
    assert!(
        s.to_string().contains(&format!("`portal-cli secret box:{secret}`")),
        "the hint names the host: {s}"
    );
    // Started with no cwd: the remote user's home, not the shim's directory.
    let passwd =
        std::process::Command::new("getent").args(["passwd", &sshd.user]).output().unwrap();
    let home = String::from_utf8_lossy(&passwd.stdout).split(':').nth(5).unwrap().to_owned();
    assert_eq!(s["process"]["cwd"], json!(home), "{s}");
    shim.ok("process_start", json!({"command": "sleep", "args": ["600"], "name": "here"})).await;

    let (text, s) = shim.ok("process_list", json!({"host": "all"})).await;
    let host_of = |name: &str| -> Vec<Value> {
        s["processes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["name"] == name)
            .map(|p| p["host"].clone())
            .collect()
    };
    assert_eq!(host_of("py"), [json!("box")], "{text}");
    assert_eq!(host_of("here"), [json!("local")], "{text}");
    assert!(text.starts_with("HOST | ID"), "{text}");
    assert!(
        s.to_string().contains(&format!("`portal-cli secret box:{secret}`")),
        "every host's hints name it: {s}"
    );
    // An agent may not send the shim's ssh anywhere it was not given.
    let err = shim.err("process_list", json!({"host": sshd.url()})).await;
    assert!(err.contains("only hosts the hosts file names"), "{err}");
    let (_, s) = shim.ok("process_list", json!({})).await;
    assert!(!s.to_string().contains("\"py\""), "the default host is this machine: {s}");

    // HOST:NAME as an id, as a person writes it.
    let (_, s) = shim.ok("process_inspect", json!({"id": "box:py"})).await;
    assert_eq!((s["process"]["id"].as_u64(), &s["host"]), (Some(py), &json!("box")), "{s}");
    // A name on another host, asked for here: the error says ids are per host.
    let err = shim.err("process_inspect", json!({"id": "py"})).await;
    assert!(err.contains("pass the `host`"), "{err}");
    let err = shim.err("process_list", json!({"host": "nowhere"})).await;
    assert!(err.contains("unknown host \"nowhere\"") && err.contains("local, box"), "{err}");
    let err = shim.err("program_query", json!({"program": "psql", "host": "box"})).await;
    assert!(err.contains("takes no host"), "{err}");
    let (_, s) = shim.ok("process_kill", json!({"id": "py", "host": "box"})).await;
    assert_eq!(s["process"]["status"], json!("killed"), "{s}");
    d.stop().await;
}

#[tokio::test]
async fn workspace_tools_bring_a_file_up_and_agree_with_the_cli() {
    let (d, shim) = with_daemon().await;
    let file = d.dir.path().join("portal.toml");
    let good = r#"[workspace.w]
[[workspace.w.member]]
name = "db"
command = "sh"
args = ["-c", "echo accepting connections; sleep 600"]
ready = "accepting connections"
[[workspace.w.member]]
name = "app"
command = "sleep"
args = ["600"]
depends_on = ["db"]
"#;
    std::fs::write(&file, good).unwrap();
    let path = file.display().to_string();
    let (text, up) = shim.ok("workspace_up", json!({ "file": path })).await;
    assert!(text.contains("db: ready after") && text.contains("app: started"), "{text}");
    assert_eq!(up["members"][0]["member"], "db");
    // Each step went out as a progress notification as it happened.
    let notes = shim.recorder.progress.lock().unwrap().clone();
    let steps: Vec<String> = notes.iter().filter_map(|n| n.message.clone()).collect();
    assert!(steps.iter().any(|m| m.starts_with("db: waiting for")), "{steps:?}");
    assert!(steps.iter().any(|m| m.starts_with("app: started")), "{steps:?}");
    let (_, status) = shim.ok("workspace_status", json!({ "file": path })).await;
    // The CLI reads the same file and says the same.
    let cli = sibling_binary("portal-cli");
    let out = tokio::process::Command::new(cli)
        .args(["status", "--json", "--file", &path])
        .env("PORTAL_SOCKET", d.socket())
        .env("PORTAL_NO_AUTOSTART", "1")
        .output();
    let out = bounded("portal-cli status", out).await.unwrap();
    let cli_status: Value = serde_json::from_slice(&out.stdout).unwrap();
    for (mcp, cli) in
        status["members"].as_array().unwrap().iter().zip(cli_status["members"].as_array().unwrap())
    {
        for key in ["member", "id", "status", "input_state", "restarts"] {
            assert_eq!(mcp[key], cli[key], "{key}: {mcp} vs {cli}");
        }
    }
    // A bad file is an error naming its line; nothing else changes.
    std::fs::write(
        &file,
        "[workspace.w]\n[[workspace.w.member]]\nname = \"db\"\ncomand = \"sh\"\n",
    )
    .unwrap();
    let err = shim.err("workspace_status", json!({ "file": path })).await;
    assert!(err.contains("line 4: unknown field `comand`"), "{err}");
    std::fs::write(&file, good).unwrap();
    let (text, down) = shim.ok("workspace_down", json!({ "file": path })).await;
    assert!(text.starts_with("app: stopped"), "last first: {text}");
    assert!(down["members"].as_array().unwrap().iter().all(|m| m["status"] == "killed"), "{down}");
    d.stop().await;
}

/// Starts a Python REPL on a PTY named `name` and returns its id once it
/// waits for input.
async fn repl(shim: &Shim, name: &str) -> u64 {
    let (_, s) = shim
        .ok(
            "process_start",
            json!({"command": "python3", "args": ["-q"], "pty": true, "name": name, "wait": "input"}),
        )
        .await;
    s["process"]["id"].as_u64().unwrap()
}

#[tokio::test]
async fn process_wait_on_several_says_which_ended_it_and_why() {
    let (d, shim) = with_daemon().await;
    let ids = [repl(&shim, "r1").await, repl(&shim, "r2").await, repl(&shim, "r3").await];
    // r1 is briefly busy, r2 and r3 for good.
    let busy = [
        "import time; time.sleep(0.3); print('r1 woke')",
        "import time; time.sleep(600)",
        "import time; time.sleep(600)",
    ];
    for (id, line) in ids.iter().zip(busy) {
        shim.ok("process_write", json!({"id": id, "content": format!("{line}\r")})).await;
    }
    // `any` is the default; names work as in every tool.
    let (text, s) = shim.ok("process_wait", json!({"ids": ["r1", "r2", "r3"]})).await;
    assert_eq!(s["ended_by"], json!(ids[0]), "{s}");
    let r = s["results"].as_array().unwrap();
    assert_eq!(r.len(), 3, "{s}");
    assert_eq!((&r[0]["name"], &r[0]["reason"]), (&json!("r1"), &json!("input_requested")));
    assert!(r[0]["output"].as_str().unwrap().contains("r1 woke"), "{s}");
    assert_eq!(r[0]["prompt"], json!(">>> "), "{s}");
    // The others are still waiting, and say only that.
    for (p, id) in r[1..].iter().zip(&ids[1..]) {
        assert_eq!(p, &json!({"id": id, "name": p["name"], "reason": "pending"}), "{s}");
    }
    assert!(text.starts_with(&format!("[ended by {} \"r1\": input_requested]", ids[0])), "{text}");
    assert!(text.contains("r1 woke"), "{text}");
    // `all` waits for each: r1 busy a little longer, r2 and r3 interrupted.
    shim.ok(
        "process_write",
        json!({"id": ids[0], "content": "time.sleep(0.5); print('r1 again')\r"}),
    )
    .await;
    for id in &ids[1..] {
        shim.ok("process_send_keys", json!({"id": id, "keys": ["C-c"]})).await;
    }
    let (text, s) =
        shim.ok("process_wait", json!({"ids": ids, "mode": "all", "timeout_ms": 20000})).await;
    assert!(s.get("ended_by").is_none(), "{s}");
    let r = s["results"].as_array().unwrap();
    assert!(r.iter().all(|p| p["reason"] == json!("input_requested")), "{s}");
    assert!(r[0]["output"].as_str().unwrap().contains("r1 again"), "{s}");
    for p in &r[1..] {
        assert!(p["output"].as_str().unwrap().contains("KeyboardInterrupt"), "{s}");
        // Lean: nothing at its usual value (running, no exit, no secret).
        for absent in ["status", "exit_code", "awaiting_secret", "alternate_screen", "hint"] {
            assert!(p.get(absent).is_none(), "{absent} in {p}");
        }
    }
    assert!(text.starts_with("[every wait ended]"), "{text}");
    // A process that exits ends an `any` wait with its exit code.
    let (_, s) = shim
        .ok(
            "process_start",
            json!({"command": "sh", "args": ["-c", "read x; exit 3"], "name": "quitter"}),
        )
        .await;
    let quitter = s["process"]["id"].as_u64().unwrap();
    shim.ok("process_write", json!({"id": quitter, "content": "go\n"})).await;
    let (_, s) = shim.ok("process_wait", json!({"ids": [ids[1], quitter], "mode": "any"})).await;
    assert_eq!(s["ended_by"], json!(quitter), "{s}");
    let q = &s["results"][1];
    assert_eq!(
        (&q["reason"], &q["status"], &q["exit_code"]),
        (&json!("exited"), &json!("exited"), &json!(3)),
        "{s}"
    );
    // One `id` keeps its result as it always was.
    let (_, s) = shim.ok("process_wait", json!({"id": "r1", "timeout_ms": 5000})).await;
    assert_eq!(s["reason"], json!("input_requested"), "{s}");
    assert!(s.get("results").is_none() && s.get("cursor").is_some(), "{s}");
    let e = shim.err("process_wait", json!({"ids": ids, "cursor": "0"})).await;
    assert!(e.contains("cursor"), "{e}");
    let e = shim.err("process_wait", json!({"ids": ["r1", "nobody"]})).await;
    assert!(e.contains("ids[1]: no process is named \"nobody\""), "{e}");
    d.stop().await;
}

#[tokio::test]
async fn agent_wait_on_a_program_that_is_no_agent_says_so_at_once() {
    let (d, shim) = with_daemon().await;
    let id = repl(&shim, "py").await;
    shim.ok("process_write", json!({"id": id, "content": "import time; time.sleep(600)\r"})).await;
    let began = std::time::Instant::now();
    let (text, s) = shim.ok("agent_wait", json!({"ids": ["py"], "timeout_ms": 30000})).await;
    let r = &s["results"][0];
    assert_eq!(r["outcome"], json!("not_an_agent"), "{s}");
    assert!(r["detail"].as_str().unwrap().contains("process_wait"), "{s}");
    assert!(text.contains("not_an_agent") && text.contains("process_wait"), "{text}");
    // Long before its timeout: at most the grace a program that just
    // started gets to announce itself as an agent.
    assert!(began.elapsed() < std::time::Duration::from_secs(10), "{:?}", began.elapsed());
    d.stop().await;
}
