//! The shim's connections: to `portald` (programs outlive a killed shim,
//! auto-start, reconnection, a live upgrade, input in flight when the daemon
//! dies, two shims sharing one daemon) and to its client on stdio (every
//! line answered, an early close).

use std::path::Path;
use std::process::Stdio;

use portal_proto::v1 as pb;
use portal_tests::*;
use serde_json::{Value, json};

use crate::common::{spawn_shim, text, with_daemon};

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
