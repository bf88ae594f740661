//! What every section drives: the daemon under test (its own `portald` on a
//! private socket), the gRPC calls the sections share, and the MCP shim as
//! a client sees it, through rmcp or as raw JSON-RPC lines.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use portal_client::client::Client;
use portal_proto::v1 as pb;
use portal_proto::v1::portal_client::PortalClient;
use portal_tests::Start;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tonic::transport::Channel;

/// The daemon under test, in its own directory.
pub(super) struct Daemon {
    pub(super) child: Child,
    pub(super) socket: PathBuf,
    pub(super) dir: tempfile::TempDir,
    pub(super) client: Client,
}

pub(super) fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe.with_file_name(name);
    anyhow::ensure!(
        path.exists(),
        "{} is missing: build it with `cargo build --release --bins`",
        path.display()
    );
    Ok(path)
}

impl Daemon {
    pub(super) async fn start() -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new().prefix("pb").tempdir_in("/tmp")?;
        let socket = dir.path().join("s").join("portald.sock");
        let child = Command::new(sibling("portald")?)
            .arg("--socket")
            .arg(&socket)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("--log")
            .arg("warn")
            // Keep the whole 1 GB of the memory section, so it is all paged
            // back; retention has its own tests.
            .arg("--max-log-per-process")
            .arg("2G")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting portald")?;
        let opts = portal_client::launch::LaunchOptions {
            socket: socket.clone(),
            data_dir: None,
            autostart: false,
            timeout: Duration::from_secs(10),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        let client = loop {
            match portal_client::launch::connect_or_start(&opts).await {
                Ok(c) => break c,
                Err(e) if Instant::now() > deadline => return Err(e.into()),
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        };
        Ok(Self { child, socket, dir, client })
    }

    pub(super) fn rpc(&self) -> PortalClient<Channel> {
        self.client.rpc()
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(super) async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.rpc().shutdown(pb::ShutdownRequest {}).await;
        let _ = tokio::task::spawn_blocking(move || self.child.wait()).await;
        drop(self.dir);
        Ok(())
    }
}

pub(super) fn status_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

pub(super) fn by_id(id: u64) -> Option<pb::ProcRef> {
    Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) })
}

pub(super) fn start_request(argv: &[String], pty: bool) -> pb::StartRequest {
    let start = if pty { Start::pty } else { Start::pipes };
    start(&argv[0]).args(&argv[1..]).cwd("/").request()
}

/// Waits for a process's end without streaming its output (a follow of its
/// input stream carries only the exit event).
pub(super) async fn wait_end(
    rpc: &mut PortalClient<Channel>,
    id: u64,
) -> anyhow::Result<pb::Process> {
    let req = pb::FollowRequest {
        proc: by_id(id),
        streams: vec![pb::Stream::Stdin.into()],
        ..Default::default()
    };
    let mut events = rpc.follow(req).await?.into_inner();
    while let Some(ev) = events.message().await? {
        if let Some(pb::follow_event::Event::Exited(p)) = ev.event {
            return Ok(p);
        }
    }
    anyhow::bail!("process {id} vanished")
}

pub(super) fn out_bytes(p: &pb::Process) -> u64 {
    p.streams.iter().filter(|s| s.stream() != pb::Stream::Stdin).map(|s| s.end_offset).sum()
}

pub(super) fn spawn_shim(socket: &Path, data: &Path) -> anyhow::Result<tokio::process::Child> {
    Ok(tokio::process::Command::new(sibling("portal-shim")?)
        .env("PORTAL_SOCKET", socket)
        .env("PORTAL_DATA_DIR", data)
        .env("PORTAL_DAEMON", sibling("portald")?)
        .env("PORTAL_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?)
}

pub(super) type McpClient = rmcp::service::RunningService<rmcp::RoleClient, ()>;

pub(super) async fn connect_shim(child: &mut tokio::process::Child) -> anyhow::Result<McpClient> {
    let stdout = child.stdout.take().context("shim stdout")?;
    let stdin = child.stdin.take().context("shim stdin")?;
    Ok(().serve((stdout, stdin)).await?)
}

pub(super) async fn call(client: &McpClient, tool: &str, args: Value) -> anyhow::Result<Value> {
    let Value::Object(args) = args else { anyhow::bail!("arguments must be an object") };
    let r =
        client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args)).await?;
    anyhow::ensure!(r.is_error != Some(true), "{tool} failed: {:?}", r.content);
    Ok(r.structured_content.unwrap_or(Value::Null))
}

/// The shim as a client without a library sees it: JSON-RPC lines.
pub(super) struct RawShim {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
}

impl RawShim {
    pub(super) async fn start(d: &Daemon) -> anyhow::Result<Self> {
        Self::start_as(d, "portal-bench").await
    }

    /// A shim whose client says it is `client` (results differ by client).
    pub(super) async fn start_as(d: &Daemon, client: &str) -> anyhow::Result<Self> {
        let mut child = spawn_shim(&d.socket, &d.dir.path().join("data"))?;
        let stdout = child.stdout.take().context("shim stdout")?;
        let lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
        let mut shim = Self { child, lines, next_id: 0 };
        let hello = json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": client, "version": "1"}});
        shim.request("initialize", hello).await?;
        shim.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await?;
        Ok(shim)
    }

    async fn send(&mut self, msg: &Value) -> anyhow::Result<()> {
        use tokio::io::AsyncWriteExt as _;
        let stdin = self.child.stdin.as_mut().context("shim stdin")?;
        stdin.write_all(format!("{msg}\n").as_bytes()).await?;
        Ok(stdin.flush().await?)
    }

    /// One request; its `result`, and the raw line's length.
    pub(super) async fn request(
        &mut self,
        method: &str,
        params: Value,
    ) -> anyhow::Result<(Value, usize)> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await?;
        loop {
            let line = self.lines.next_line().await?.context("the shim closed stdout")?;
            let v: Value = serde_json::from_str(&line)?;
            if v["id"] == id {
                anyhow::ensure!(v.get("error").is_none(), "{method}: {v}");
                return Ok((v["result"].clone(), line.len()));
            }
        }
    }

    pub(super) async fn call(&mut self, tool: &str, args: Value) -> anyhow::Result<Value> {
        let (r, _) = self.request("tools/call", json!({"name": tool, "arguments": args})).await?;
        anyhow::ensure!(r["isError"] != true, "{tool}: {r}");
        Ok(r)
    }
}
