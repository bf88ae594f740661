//! The tool surface: every tool listed with its schemas and annotations,
//! the registry tools' wording, a name wherever an id goes, and the tool
//! sets and tiers that limit what is listed and called.

use std::process::Stdio;

use portal_proto::v1 as pb;
use portal_tests::*;
use serde_json::json;

use crate::common::{spawn_shim_with, with_daemon};

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
