//! Portal's Codex hooks as the real Codex (npm, pinned in
//! `tests/agents/package.json`) sees them: the trust keys its app server
//! lists for Portal's handlers are the ones `hooks status` reads and
//! `hooks uninstall` removes, and the user's own record survives.
//!
//! Without the CLI (`npm ci --prefix tests/agents`) the test says so and
//! skips; under `CI=true` it fails instead.

use std::path::Path;

use portal_proto::v1 as pb;
use portal_tests::fake_models;
use portal_tests::*;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

/// What Codex's app server lists as the hooks of `home`'s Codex config,
/// each with its trust key, hash and status.
async fn codex_hooks(codex: &Path, home: &Path) -> Vec<Value> {
    let mut child = tokio::process::Command::new(codex)
        .arg("app-server")
        .env("CODEX_HOME", home.join(".codex"))
        .env("HOME", home)
        .current_dir(home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let list = serde_json::json!({
        "jsonrpc": "2.0", "id": 2, "method": "hooks/list",
        "params": {"cwds": [home.display().to_string()]},
    });
    let requests = format!(
        "{}\n{}\n{list}\n",
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"portal-test","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"initialized"}"#,
    );
    stdin.write_all(requests.as_bytes()).await.unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let reply = bounded("codex app-server to list its hooks", async {
        loop {
            let line = lines.next_line().await.unwrap().expect("codex app-server answers");
            let v: Value = serde_json::from_str(&line).unwrap_or_default();
            if v["id"] == 2 {
                return v;
            }
        }
    })
    .await;
    drop(stdin);
    let _ = child.kill().await;
    reply["result"]["data"][0]["hooks"].as_array().cloned().unwrap_or_default()
}

fn is_portals(hook: &Value) -> bool {
    hook["command"].as_str().is_some_and(|c| c.contains("portal-cli") && c.contains(" emit "))
}

async fn hooks(d: &TestDaemon, action: pb::HookAction, home: &Path) -> pb::HookReport {
    let req = pb::AgentHooksRequest {
        action: action.into(),
        agent: pb::HookAgent::Codex.into(),
        emitter: std::fs::canonicalize(sibling_binary("portal-cli")).unwrap().display().to_string(),
        home: home.display().to_string(),
        ..Default::default()
    };
    d.rpc().agent_hooks(req).await.unwrap().into_inner().reports.remove(0)
}

/// What Codex's `/hooks` view writes when a hook is approved.
fn approval(hook: &Value) -> String {
    format!(
        "\n[hooks.state.\"{}\"]\ntrusted_hash = \"{}\"\n",
        hook["key"].as_str().unwrap(),
        hook["currentHash"].as_str().unwrap()
    )
}

#[tokio::test]
async fn codex_trusts_portals_hooks_by_the_keys_status_and_uninstall_use() {
    let found = fake_models::installed();
    let Some(codex) = found.codex_native else {
        assert!(std::env::var_os("CI").is_none(), "{} (CI must run it)", found.missing);
        eprintln!("skipping: {}", found.missing);
        return;
    };
    let d = TestDaemon::start().await;
    let dir = test_dir();
    let home = dir.path();
    let config = home.join(".codex/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let original = "model = \"o4\"\n\n[[hooks.Stop]]\n[[hooks.Stop.hooks]]\ntype = \"command\"\n\
                    command = \"notify-send done\"\n";
    std::fs::write(&config, original).unwrap();
    let r = hooks(&d, pb::HookAction::Install, home).await;
    assert_eq!((r.status.as_str(), r.trust.as_str()), ("installed", "untrusted"));

    let listed = codex_hooks(&codex, home).await;
    let (portals, users): (Vec<_>, Vec<_>) = listed.into_iter().partition(is_portals);
    assert_eq!(portals.len(), 7, "one handler per event: {portals:#?}");
    assert_eq!(users.len(), 1, "{users:#?}");
    assert!(portals.iter().all(|h| h["trustStatus"] == "untrusted"), "{portals:#?}");
    // The person approves the user's own hook, then Portal's, in /hooks.
    let mut text = std::fs::read_to_string(&config).unwrap();
    let users_record = approval(&users[0]);
    text.push_str(&users_record);
    text.extend(portals.iter().map(approval));
    std::fs::write(&config, &text).unwrap();
    let listed = codex_hooks(&codex, home).await;
    assert!(listed.iter().all(|h| h["trustStatus"] == "trusted"), "{listed:#?}");
    let r = hooks(&d, pb::HookAction::Status, home).await;
    assert_eq!((r.status.as_str(), r.trust.as_str()), ("installed", "trusted"));

    // Uninstall takes Portal's hooks and the records Codex keeps for them;
    // the user's hook and its record stay byte for byte, still trusted.
    hooks(&d, pb::HookAction::Uninstall, home).await;
    assert_eq!(std::fs::read_to_string(&config).unwrap(), format!("{original}{users_record}"));
    let listed = codex_hooks(&codex, home).await;
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0]["trustStatus"], "trusted", "{listed:#?}");
    d.stop().await;
}
