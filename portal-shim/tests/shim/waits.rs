//! Waiting and typing: `process_run`, `process_wait` and
//! `process_send_keys`, what decided a program waits for input, progress
//! and cancelling, and waits on several processes.

use portal_proto::v1 as pb;
use portal_tests::*;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

use crate::common::{repl, spawn_shim_with, with_daemon};

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
