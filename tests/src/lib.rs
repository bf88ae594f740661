//! The test kit: a real `portald` in the test process on a private socket,
//! and helpers that wait on what Portal exposes (follow streams, exit
//! events), each bounded by a named timeout so a hung test fails fast.
//!
//! `PORTAL_TEST_TIMEOUT_MS` sets the bound of every wait (default 10 s).
//! `PORTAL_KEEP_TEST_DIRS=1` keeps each test's directory (socket, database)
//! and prints its path.

pub mod fake_models;
pub mod sshd;
mod start;
pub mod tmux;

pub use start::Start;

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use portal_client::client::Client;
use portal_proto::v1 as pb;
use portal_proto::v1::portal_client::PortalClient;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

/// The bound of every wait in tests.
#[must_use]
pub fn timeout() -> Duration {
    let ms =
        std::env::var("PORTAL_TEST_TIMEOUT_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    Duration::from_millis(ms)
}

/// Runs `fut`, failing the test with `what` if it takes longer than [`timeout`].
///
/// # Panics
/// When the bound passes.
pub async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(timeout(), fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {:?} waiting for {what}", timeout()),
    }
}

/// A private directory under /tmp (short: socket paths are limited to 108 bytes).
#[must_use]
pub fn test_dir() -> tempfile::TempDir {
    let keep = std::env::var_os("PORTAL_KEEP_TEST_DIRS").is_some();
    let dir = tempfile::Builder::new()
        .prefix("pt")
        .disable_cleanup(keep)
        .tempdir_in("/tmp")
        .expect("create a temp dir");
    if keep {
        eprintln!("keeping test dir {}", dir.path().display());
    }
    dir
}

/// A daemon running in this test process on a private socket and database.
/// Dropping it cancels it; [`TestDaemon::stop`] also waits for it.
pub struct TestDaemon {
    /// Connected client.
    pub client: Client,
    /// Private directory (socket in `s/`, database in `data/`).
    pub dir: tempfile::TempDir,
    /// Cancels the daemon.
    pub shutdown: CancellationToken,
    task: Option<JoinHandle<Result<portald::Ended, portald::StartError>>>,
}

impl TestDaemon {
    /// Starts a daemon with default test settings.
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// Starts a daemon after `tune` adjusts its configuration.
    pub async fn start_with(tune: impl FnOnce(&mut portald::Config)) -> Self {
        let dir = test_dir();
        let mut config = config_in(dir.path());
        tune(&mut config);
        let listener = portald::bind(&config).expect("bind the test daemon");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(portald::serve(listener, shutdown.clone()));
        let client = Client::connect(&config.socket).await.expect("connect to the test daemon");
        Self { client, dir, shutdown, task: Some(task) }
    }

    /// The gRPC stub.
    #[must_use]
    pub fn rpc(&self) -> PortalClient<Channel> {
        self.client.rpc()
    }

    /// The socket path.
    #[must_use]
    pub fn socket(&self) -> PathBuf {
        self.client.socket().to_path_buf()
    }

    /// Cancels the daemon and waits until it has shut down.
    ///
    /// # Panics
    /// When shutdown fails or takes longer than the bound.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            bounded("daemon shutdown", task).await.expect("daemon task").expect("daemon shutdown");
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.shutdown.cancel();
        // A test that ends without `stop` ends its runtime, and the daemon
        // with it, before it has stopped its programs: they live on with
        // the holder, as they would after a crash. Nothing a test started
        // may outlive it.
        if self.task.is_some() {
            kill_what_outlives(&self.socket());
        }
    }
}

/// Kills, with SIGKILL, every process that carries `socket` as its
/// `PORTAL_SOCKET` (the programs of that daemon and their descendants) and
/// the portal-holder serving beside it.
pub fn kill_what_outlives(socket: &Path) {
    let mut needle = b"PORTAL_SOCKET=".to_vec();
    needle.extend_from_slice(socket.as_os_str().as_encoded_bytes());
    needle.push(0);
    let holder = format!("{}.holder", socket.display());
    let me = std::process::id().to_string();
    let Ok(entries) = std::fs::read_dir("/proc") else { return };
    let pids: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()) && *pid != me)
        .filter(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            environ.windows(needle.len()).any(|w| w == needle.as_slice())
                || String::from_utf8_lossy(&cmdline).contains(&holder)
        })
        .collect();
    if !pids.is_empty() {
        // Some may have ended meanwhile; kill says so and that is fine.
        let _ = std::process::Command::new("kill")
            .arg("-9")
            .args(&pids)
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// Binds and serves a daemon with `config` in this process, for tests that
/// stop and start daemons on one data directory; cancel the token and await
/// the task to stop it.
///
/// # Panics
/// When the daemon cannot bind.
pub fn serve_in(
    config: &portald::Config,
) -> (JoinHandle<Result<portald::Ended, portald::StartError>>, CancellationToken) {
    let listener = portald::bind(config).expect("bind the test daemon");
    let shutdown = CancellationToken::new();
    (tokio::spawn(portald::serve(listener, shutdown.clone())), shutdown)
}

/// A test configuration in `dir`: socket `dir/s/portald.sock`, data in
/// `dir/data` (each test daemon starts its own holder beside its socket),
/// short kill grace.
#[must_use]
pub fn config_in(dir: &Path) -> portald::Config {
    let mut config = portald::Config::new(dir.join("s").join("portald.sock"), dir.join("data"));
    config.kill_grace = Duration::from_millis(500);
    config
}

/// A process reference by id.
#[must_use]
pub fn by_id(id: u64) -> Option<pb::ProcRef> {
    Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) })
}

/// Starts `command args…` in pipe mode: [`Start::pipes`] with arguments.
pub async fn start_pipes(
    rpc: &mut PortalClient<Channel>,
    command: &str,
    args: &[&str],
) -> pb::Process {
    Start::pipes(command).args(args).run(rpc).await
}

/// Starts `command args…` on a PTY of `rows`×`cols`: [`Start::pty`] with
/// arguments and a size.
pub async fn start_pty(
    rpc: &mut PortalClient<Channel>,
    command: &str,
    args: &[&str],
    rows: u32,
    cols: u32,
) -> pb::Process {
    Start::pty(command).args(args).size(rows, cols).run(rpc).await
}

/// Follows a process from the start of its history until `done` returns
/// true for the bytes of `stream` seen so far, or the process ends. Returns
/// the bytes and, if it ended, the final process record.
pub async fn follow_until(
    rpc: &mut PortalClient<Channel>,
    id: u64,
    stream: pb::Stream,
    what: &str,
    mut done: impl FnMut(&[u8]) -> bool,
) -> (Vec<u8>, Option<pb::Process>) {
    let req = pb::FollowRequest {
        proc: by_id(id),
        streams: vec![stream.into()],
        from_start: true,
        ..Default::default()
    };
    bounded(what, async {
        let mut events = rpc.follow(req).await.expect("follow").into_inner();
        let mut seen = Vec::new();
        while let Some(ev) = events.message().await.expect("follow stream") {
            match ev.event {
                Some(pb::follow_event::Event::Output(r)) => {
                    seen.extend_from_slice(&r.data);
                    if done(&seen) {
                        return (seen, None);
                    }
                }
                Some(pb::follow_event::Event::Exited(p)) => return (seen, Some(p)),
                _ => {}
            }
        }
        (seen, None)
    })
    .await
}

/// Waits until the output of `stream` contains `needle`.
///
/// # Panics
/// When the process ends or its stream closes first, or the bound passes.
pub async fn wait_for_text(
    rpc: &mut PortalClient<Channel>,
    id: u64,
    stream: pb::Stream,
    needle: &str,
) -> Vec<u8> {
    let what = format!("{needle:?} in the output of process {id}");
    let (seen, ended) =
        follow_until(rpc, id, stream, &what, |b| String::from_utf8_lossy(b).contains(needle)).await;
    assert!(
        String::from_utf8_lossy(&seen).contains(needle),
        "process {id} {} before printing {needle:?}; output: {:?}",
        if ended.is_some() { "ended" } else { "'s output stream closed" },
        String::from_utf8_lossy(&seen)
    );
    seen
}

/// Waits until the process has ended and its output is drained.
pub async fn wait_exit(rpc: &mut PortalClient<Channel>, id: u64) -> pb::Process {
    let (_, ended) =
        follow_until(rpc, id, pb::Stream::Stdout, &format!("exit of process {id}"), |_| false)
            .await;
    ended.expect("the follow stream ended without an exit event")
}

/// Reads a whole stream by paging forward with the returned cursor.
pub async fn read_all(
    rpc: &mut PortalClient<Channel>,
    id: u64,
    stream: pb::Stream,
    encoding: pb::Encoding,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut cursor: Option<pb::Cursor> = None;
    loop {
        let req = pb::ReadRequest {
            proc: by_id(id),
            streams: vec![stream.into()],
            from: cursor.clone().map(pb::read_request::From::Cursor),
            max_bytes: 1 << 20,
            encoding: encoding.into(),
            ..Default::default()
        };
        let resp = rpc.read(req).await.expect("read").into_inner();
        for r in &resp.records {
            out.extend_from_slice(&r.data);
        }
        let next = resp.next.clone().expect("next cursor");
        if next == resp.end.clone().expect("end cursor") || resp.records.is_empty() {
            return out;
        }
        cursor = Some(next);
    }
}

/// Takes screen snapshots after each output chunk until `done` accepts one.
pub async fn wait_screen(
    rpc: &mut PortalClient<Channel>,
    id: u64,
    what: &str,
    mut done: impl FnMut(&pb::ScreenSnapshot) -> bool,
) -> pb::ScreenSnapshot {
    let snap = screen(rpc, id).await;
    if done(&snap) {
        return snap;
    }
    // Follow from exactly what the snapshot reflects: "from the current end"
    // is taken when the actor gets to the request, and output it handled
    // before then would be in neither.
    let from = pb::Cursor {
        offsets: vec![pb::StreamOffset { stream: pb::Stream::Stdout.into(), offset: snap.offset }],
    };
    let req = pb::FollowRequest {
        proc: by_id(id),
        streams: vec![pb::Stream::Stdout.into()],
        from: Some(from),
        ..Default::default()
    };
    let mut follower = rpc.clone();
    let mut seen = rpc.clone();
    let waited = tokio::time::timeout(timeout(), async {
        let mut events = follower.follow(req).await.expect("follow").into_inner();
        while let Some(ev) = events.message().await.expect("follow stream") {
            let snap = screen(rpc, id).await;
            if done(&snap) {
                return snap;
            }
            if matches!(ev.event, Some(pb::follow_event::Event::Exited(_))) {
                panic!("process {id} ended before {what}; screen: {:#?}", snap.lines);
            }
        }
        panic!("follow stream of {id} ended before {what}");
    })
    .await;
    match waited {
        Ok(snap) => snap,
        Err(_) => {
            let last = screen(&mut seen, id).await;
            panic!(
                "timed out after {:?} waiting for {what}; the screen shows: {:#?}",
                timeout(),
                last.lines
            )
        }
    }
}

/// A screen snapshot.
pub async fn screen(rpc: &mut PortalClient<Channel>, id: u64) -> pb::ScreenSnapshot {
    rpc.screen(pb::ScreenRequest { proc: by_id(id), resize: None })
        .await
        .expect("screen")
        .into_inner()
}

/// Writes bytes to a process.
pub async fn write(rpc: &mut PortalClient<Channel>, id: u64, data: &[u8]) {
    let req =
        pb::WriteRequest { proc: by_id(id), data: Bytes::copy_from_slice(data), secret: false };
    rpc.write(req).await.expect("write");
}

/// Whether `pid` is dead (gone, or a zombie nobody reaped yet).
#[must_use]
pub fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
        }
    }
}

/// A binary built beside the test binaries (`portal-cli`, `portald`).
///
/// # Panics
/// When it was not built.
#[must_use]
pub fn sibling_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().expect("exe dir");
    let candidates = [dir.join(name), dir.parent().map(|p| p.join(name)).unwrap_or_default()];
    candidates.into_iter().find(|p| p.is_file()).unwrap_or_else(|| {
        panic!("{name} is not built beside {}; run `cargo build --workspace`", exe.display())
    })
}

/// Polls `check` until it returns `Some`, bounded by [`timeout`]. Only for
/// facts Portal exposes no event for (a process found by a periodic sweep).
pub async fn wait_until<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    bounded(what, async {
        loop {
            if let Some(v) = check().await {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}
