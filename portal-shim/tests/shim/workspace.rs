//! The workspace tools: a `portal.toml` brought up, its status the same as
//! the CLI's, and brought down.

use portal_tests::*;
use serde_json::{Value, json};

use crate::common::with_daemon;

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
