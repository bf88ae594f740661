//! Programs and their output: a Python REPL on a PTY, bash on pipes, less's
//! alternate screen, the client's environment, cursors, bounded and pageable
//! output, and `process_search`.

use portal_proto::v1 as pb;
use portal_tests::*;
use serde_json::json;

use crate::common::{spawn_shim_with, with_daemon};

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
