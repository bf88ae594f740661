//! What results say: errors as tool results with hints, next steps in the
//! structured results, their size budgets, and the text block beside them.

use portal_tests::*;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::common::{spawn_shim, spawn_shim_with, text, with_daemon};

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
