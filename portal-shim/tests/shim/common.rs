//! What every test of the shim shares: a shim started on a daemon's socket
//! with an MCP client (rmcp's) that records progress, and its calls.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use portal_tests::{TestDaemon, bounded};
use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::{Value, json};

/// An MCP client that records the progress notifications it receives.
#[derive(Clone, Default)]
pub(crate) struct Recorder {
    pub(crate) progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
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

pub(crate) struct Shim {
    pub(crate) client: RunningService<RoleClient, Recorder>,
    pub(crate) recorder: Recorder,
    pub(crate) child: tokio::process::Child,
    /// What the shim logged on stderr so far.
    pub(crate) log: Arc<Mutex<String>>,
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

pub(crate) async fn spawn_shim(socket: &Path, data_dir: &Path, autostart: bool) -> Shim {
    spawn_shim_with(socket, data_dir, autostart, &[], &[]).await
}

/// A shim started with extra flags and environment variables.
pub(crate) async fn spawn_shim_with(
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
    pub(crate) async fn call(&self, name: &str, args: Value) -> CallToolResult {
        let Value::Object(args) = args else { panic!("arguments must be an object") };
        let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args);
        bounded(name, self.client.call_tool(params)).await.unwrap()
    }

    /// Calls a tool that must succeed; returns (text, structured content).
    pub(crate) async fn ok(&self, name: &str, args: Value) -> (String, Value) {
        let r = self.call(name, args).await;
        let text = text(&r);
        assert_eq!(r.is_error, Some(false), "{name} failed: {text}");
        (text, r.structured_content.unwrap_or(Value::Null))
    }

    /// Calls a tool that must fail; returns its text.
    pub(crate) async fn err(&self, name: &str, args: Value) -> String {
        let r = self.call(name, args).await;
        assert_eq!(r.is_error, Some(true), "{name} should have failed: {}", text(&r));
        text(&r)
    }
}

pub(crate) fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

pub(crate) async fn with_daemon() -> (TestDaemon, Shim) {
    let d = TestDaemon::start().await;
    let shim = spawn_shim(&d.socket(), &d.dir.path().join("data"), false).await;
    (d, shim)
}

/// Starts a Python REPL on a PTY named `name` and returns its id once it
/// waits for input.
pub(crate) async fn repl(shim: &Shim, name: &str) -> u64 {
    let (_, s) = shim
        .ok(
            "process_start",
            json!({"command": "python3", "args": ["-q"], "pty": true, "name": name, "wait": "input"}),
        )
        .await;
    s["process"]["id"].as_u64().unwrap()
}
