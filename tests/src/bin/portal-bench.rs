//! `portal-bench`: Portal measured against the physical limits of the machine
//! it runs on, in the same run.
//!
//! It starts its own `portald` (the binary beside it) on a private socket and
//! measures, each beside the raw figure of the same work without Portal:
//! 1. PTY capture: a child writing 200 MB of 70-character lines through a
//!    PTY, until every byte is committed and the screen rendered; raw and
//!    Portal alternate five times and the medians are compared (shared
//!    machines are noisy);
//! 2. pipe capture: the same through pipes;
//! 3. round trip: write a line to `cat` and see it come back, raw on a PTY,
//!    through gRPC (`Run`), and through the MCP shim (`process_run`);
//! 4. scale: idle PTY processes (start time, `List` latency, RSS each) and
//!    many processes printing at once (in a fresh daemon, for its peak RSS);
//! 5. memory: daemon peak RSS while capturing 1 GB, shim peak RSS while
//!    paging all of it back (the daemon keeps up to 2 GiB per process for
//!    this; retention has its own tests);
//! 6. cold start: shim start to its first `tools/list` answer, with the
//!    daemon running and with the daemon auto-started;
//! 7. cycles: in a fresh daemon, start many short PTY processes, let them
//!    end, clean them all up, twice; the daemon's RSS after each cycle
//!    against its RSS before (memory must come back);
//! 8. prompts: for python3, gdb and sqlite3 through the MCP shim, the time
//!    from the program printing its prompt (the log's timestamp of that
//!    output) to `process_run` returning with `input_requested`;
//! 9. spawn: in a fresh daemon, the median time of `Start` with 0, 100
//!    and 1000 idle PTY processes already running (programs are forked by
//!    the small portal-holder, so the daemon's size must not matter), and
//!    the pause of a live upgrade with them all running: from the
//!    `Upgrade` answer until the new daemon answers;
//! 10. tools: what `tools/list` costs a client, per tool and in all (it is
//!     sent to the model on every turn), and what one call costs through raw
//!     JSON-RPC on the shim's stdio (`process_list` of five processes beside
//!     `process_write`), with no client library in between.
//! 11. ssh: a remote host through a real sshd on loopback: the time to
//!     connect (ssh, the remote `portal-cli dial-stdio`, the handshake and
//!     `GetInfo`) beside `ssh host true`, and write→match through it
//!     (`Run` on the remote host's `cat`) beside a raw `ssh host cat` echo
//!     over one ssh connection, like Portal's.
//! 12. search: in a fresh daemon, a program printing 1 GB of varied log
//!     lines (timestamps, ids, paths, statuses; one rare word in the
//!     middle): capture throughput and, in the same run, indexing
//!     throughput (from the start until the index has every byte) and the
//!     index's size; then the latency of searches over it: the rare word,
//!     a word on every line (a page of the newest 20), a phrase, and a word
//!     with a regex filter.
//! 13. results: what a model reads of each result in a fixed scenario (a
//!     python3 REPL started and driven, its screen, a read, five processes
//!     listed, one inspected): the characters of the structured content
//!     (what Claude Code and Codex hand their model) and of the text block,
//!     full (for clients whose model reads the text) and short (for Claude
//!     Code and Codex).
//!
//! It prints one table (or `--json`) with PASS/MISS against Portal's
//! targets. `--smoke` runs every section at a tiny size (for CI: it proves
//! the benchmark works, not how fast anything is).

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use portal_client::client::Client;
use portal_proto::v1 as pb;
use portal_proto::v1::portal_client::PortalClient;
use portal_tests::sshd::Sshd;
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tonic::transport::Channel;

/// Measure Portal against the raw limits of this machine.
#[derive(Debug, Parser)]
#[command(about)]
struct Args {
    /// Tiny sizes: check that every section works (seconds, not figures).
    #[arg(long)]
    smoke: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Run only these sections (capture, or pty-capture / pipe-capture alone; rtt, scale, memory, cold, cycle, prompt, spawn, tools, ssh, search, results).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

/// Sizes of one run.
struct Sizes {
    capture_bytes: u64,
    capture_trials: usize,
    rtt_tries: usize,
    idle: usize,
    busy: usize,
    busy_bytes: u64,
    memory_bytes: u64,
    cold_tries: usize,
    prompt_tries: usize,
    cycle: usize,
    /// Running processes at which start time is measured.
    spawn_levels: &'static [usize],
    spawn_tries: usize,
    /// Bytes of log lines searched.
    search_bytes: u64,
    search_tries: usize,
}

impl Sizes {
    fn new(smoke: bool) -> Self {
        if smoke {
            Self {
                capture_bytes: 2 << 20,
                capture_trials: 1,
                rtt_tries: 20,
                idle: 10,
                busy: 4,
                busy_bytes: 256 << 10,
                memory_bytes: 4 << 20,
                cold_tries: 2,
                prompt_tries: 3,
                cycle: 20,
                spawn_levels: &[0, 5],
                spawn_tries: 3,
                search_bytes: 4 << 20,
                search_tries: 3,
            }
        } else {
            Self {
                capture_bytes: 200 << 20,
                capture_trials: 5,
                rtt_tries: 500,
                idle: 1000,
                busy: 100,
                busy_bytes: 2 << 20,
                memory_bytes: 1 << 30,
                cold_tries: 10,
                prompt_tries: 50,
                cycle: 2000,
                spawn_levels: &[0, 100, 1000],
                spawn_tries: 30,
                search_bytes: 1 << 30,
                search_tries: 20,
            }
        }
    }
}

/// One line of the report.
struct Row {
    name: String,
    portal: f64,
    raw: Option<f64>,
    unit: &'static str,
    target: Option<Target>,
    note: String,
}

/// A target and whether it was met.
#[derive(Clone, Copy)]
enum Target {
    /// portal ≥ ratio × raw.
    MinRatio(f64),
    /// portal ≤ raw + margin.
    MaxOverRaw(f64),
    /// portal ≤ limit.
    Max(f64),
}

impl Target {
    fn describe(self, unit: &str) -> String {
        match self {
            Self::MinRatio(r) => format!("≥ {r} × raw"),
            Self::MaxOverRaw(m) => format!("≤ raw + {m} {unit}"),
            Self::Max(l) => format!("≤ {l} {unit}"),
        }
    }

    fn met(self, portal: f64, raw: Option<f64>) -> bool {
        match (self, raw) {
            (Self::MinRatio(r), Some(raw)) => portal >= r * raw,
            (Self::MaxOverRaw(m), Some(raw)) => portal <= raw + m,
            (Self::Max(l), _) => portal <= l,
            _ => false,
        }
    }
}

fn row(
    name: impl Into<String>,
    portal: f64,
    raw: Option<f64>,
    unit: &'static str,
    target: Option<Target>,
) -> Row {
    Row { name: name.into(), portal, raw, unit, target, note: String::new() }
}

/// The daemon under test, in its own directory.
struct Daemon {
    child: Child,
    socket: PathBuf,
    dir: tempfile::TempDir,
    client: Client,
}

fn sibling(name: &str) -> anyhow::Result<PathBuf> {
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
    async fn start() -> anyhow::Result<Self> {
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

    fn rpc(&self) -> PortalClient<Channel> {
        self.client.rpc()
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        let _ = self.rpc().shutdown(pb::ShutdownRequest {}).await;
        let _ = tokio::task::spawn_blocking(move || self.child.wait()).await;
        drop(self.dir);
        Ok(())
    }
}

fn status_kb(pid: u32, field: &str) -> u64 {
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

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short list"
    )]
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[allow(clippy::cast_precision_loss, reason = "megabytes for display")]
fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_000_000.0
}

fn by_id(id: u64) -> Option<pb::ProcRef> {
    Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) })
}

/// A shell command writing `bytes` bytes of 70-character lines.
fn lines_command(bytes: u64) -> Vec<String> {
    let line = "x".repeat(69);
    vec!["sh".into(), "-c".into(), format!("yes {line} | head -c {bytes}")]
}

/// Reads a PTY child's output to EOF; returns bytes and elapsed time.
fn raw_pty(argv: &[String]) -> anyhow::Result<(u64, Duration)> {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    let pair = native_pty_system().openpty(PtySize {
        rows: 24,
        cols: 80,
        pixel_width: 0,
        pixel_height: 0,
    })?;
    let mut cmd = CommandBuilder::from_argv(argv.iter().map(Into::into).collect());
    cmd.cwd("/");
    let start = Instant::now();
    let mut child = pair.slave.spawn_command(cmd)?;
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader()?;
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0u64;
    loop {
        match reader.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n as u64,
        }
    }
    let elapsed = start.elapsed();
    child.wait()?;
    Ok((total, elapsed))
}

/// Reads a piped child's stdout to EOF.
fn raw_pipe(argv: &[String]) -> anyhow::Result<(u64, Duration)> {
    let start = Instant::now();
    let mut child = Command::new(&argv[0]).args(&argv[1..]).stdout(Stdio::piped()).spawn()?;
    let mut out = child.stdout.take().context("no stdout")?;
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0u64;
    loop {
        match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n as u64,
        }
    }
    let elapsed = start.elapsed();
    child.wait()?;
    Ok((total, elapsed))
}

fn start_request(argv: &[String], pty: bool) -> pb::StartRequest {
    pb::StartRequest {
        command: argv[0].clone(),
        args: argv[1..].to_vec(),
        cwd: "/".into(),
        mode: if pty { pb::Mode::Pty } else { pb::Mode::Pipes }.into(),
        ..Default::default()
    }
}

/// Waits for a process's end without streaming its output (a follow of its
/// input stream carries only the exit event).
async fn wait_end(rpc: &mut PortalClient<Channel>, id: u64) -> anyhow::Result<pb::Process> {
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

fn out_bytes(p: &pb::Process) -> u64 {
    p.streams.iter().filter(|s| s.stream() != pb::Stream::Stdin).map(|s| s.end_offset).sum()
}

/// One Portal capture of `argv`: start → exited, every byte committed and
/// (PTY) the screen rendered up to the end. Returns MB/s and any anomaly.
async fn portal_capture(
    d: &Daemon,
    argv: &[String],
    pty: bool,
    raw_bytes: u64,
) -> anyhow::Result<(f64, String)> {
    let mut rpc = d.rpc();
    let start = Instant::now();
    let p = rpc.start(start_request(argv, pty)).await?.into_inner();
    let end = wait_end(&mut rpc, p.id).await?;
    // Done means stored and shown: a read passes the store's flush barrier
    // (every byte committed), and a snapshot renders up to the end.
    let last = rpc
        .read(pb::ReadRequest {
            proc: by_id(p.id),
            from: Some(pb::read_request::From::Tail(true)),
            max_bytes: 1,
            encoding: pb::Encoding::Raw.into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    let snap = if pty {
        let req = pb::ScreenRequest { proc: by_id(p.id), resize: None };
        Some(rpc.screen(req).await?.into_inner())
    } else {
        None
    };
    let elapsed = start.elapsed();
    let stored = out_bytes(&end);
    let mut note = String::new();
    if stored != raw_bytes {
        note = format!("stored {stored} of {raw_bytes} bytes");
    }
    if last.records.is_empty() {
        note.push_str(" the log's last byte is missing");
    }
    if let Some(snap) = snap
        && snap.offset != stored
    {
        note.push_str(&format!(" screen at {} of {stored}", snap.offset));
    }
    rpc.cleanup(pb::CleanupRequest { proc: by_id(p.id) }).await?;
    Ok((mb(stored) / elapsed.as_secs_f64(), note))
}

/// Capture throughput: raw and Portal alternate `trials` times and the
/// medians are compared, so one noisy moment on a shared machine moves
/// neither side alone.
async fn capture(
    d: &Daemon,
    sizes: &Sizes,
    modes: &[bool],
    rows: &mut Vec<Row>,
) -> anyhow::Result<()> {
    let argv = lines_command(sizes.capture_bytes);
    for &pty in modes {
        let mut raw = Vec::new();
        let mut portal = Vec::new();
        let mut notes = Vec::new();
        for _ in 0..sizes.capture_trials {
            let (raw_bytes, raw_time) = if pty { raw_pty(&argv)? } else { raw_pipe(&argv)? };
            raw.push(mb(raw_bytes) / raw_time.as_secs_f64());
            let (rate, note) = portal_capture(d, &argv, pty, raw_bytes).await?;
            portal.push(rate);
            if !note.is_empty() {
                notes.push(note);
            }
        }
        raw.sort_by(f64::total_cmp);
        portal.sort_by(f64::total_cmp);
        let name = if pty { "PTY capture (70-char lines)" } else { "pipe capture (70-char lines)" };
        let target = if pty { Target::MinRatio(0.8) } else { Target::MinRatio(0.5) };
        let mut r =
            row(name, percentile(&portal, 0.5), Some(percentile(&raw, 0.5)), "MB/s", Some(target));
        r.note = if notes.is_empty() {
            format!("median of {} paired runs", sizes.capture_trials)
        } else {
            notes.join("; ")
        };
        rows.push(r);
    }
    Ok(())
}

/// Raw round trip: a line to `cat` on a PTY (echo off) and back.
fn raw_rtt(tries: usize) -> anyhow::Result<Vec<f64>> {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    let pair = native_pty_system().openpty(PtySize {
        rows: 24,
        cols: 80,
        pixel_width: 0,
        pixel_height: 0,
    })?;
    let mut cmd = CommandBuilder::new("sh");
    cmd.args(["-c", "stty -echo; echo ECHO-OFF; exec cat"]);
    cmd.cwd("/");
    let mut child = pair.slave.spawn_command(cmd)?;
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader()?;
    let mut writer = pair.master.take_writer()?;
    let mut buf = vec![0u8; 4096];
    let mut seen = String::new();
    // Until stty has run the terminal echoes lines itself (a kernel round
    // trip, not cat's): wait for the shell's word that echo is off.
    while !seen.contains("ECHO-OFF\r\n") {
        let n = reader.read(&mut buf)?;
        anyhow::ensure!(n > 0, "the shell ended");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let mut round = |line: &str, seen: &mut String| -> anyhow::Result<Duration> {
        seen.clear();
        let start = Instant::now();
        writer.write_all(format!("{line}\n").as_bytes())?;
        let want = format!("{line}\r\n");
        while !seen.contains(&want) {
            let n = reader.read(&mut buf)?;
            anyhow::ensure!(n > 0, "cat ended");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        Ok(start.elapsed())
    };
    for i in 0..20 {
        round(&format!("warm{i}"), &mut seen)?;
    }
    let mut times = Vec::with_capacity(tries);
    for i in 0..tries {
        times.push(ms(round(&format!("ping{i}"), &mut seen)?));
    }
    drop(writer);
    child.wait()?;
    Ok(times)
}

/// Starts `cat` on a PTY (echo off) and times `tries` runs that type a line
/// and wait for it back, after 20 to warm up; returns its id and the times.
async fn run_echo(
    rpc: &mut PortalClient<Channel>,
    tries: usize,
) -> anyhow::Result<(u64, Vec<f64>)> {
    let argv: Vec<String> =
        ["sh", "-c", "stty -echo; exec cat"].iter().map(|s| (*s).to_owned()).collect();
    let p = rpc.start(start_request(&argv, true)).await?.into_inner();
    let run = |input: String| pb::RunRequest {
        proc: by_id(p.id),
        input: input.clone(),
        no_enter: false,
        until: Some(pb::WaitCondition { needle: input, timeout_ms: 5000, ..Default::default() }),
    };
    for i in 0..20 {
        rpc.run(run(format!("warm{i}"))).await?;
    }
    let mut times = Vec::with_capacity(tries);
    for i in 0..tries {
        let start = Instant::now();
        let r = rpc.run(run(format!("ping{i}"))).await?.into_inner();
        anyhow::ensure!(
            r.reason() == pb::WaitReason::Matched,
            "run {i} ended with {:?}",
            r.reason()
        );
        times.push(ms(start.elapsed()));
    }
    Ok((p.id, times))
}

async fn rtt(d: &Daemon, sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let raw = tokio::task::spawn_blocking({
        let tries = sizes.rtt_tries;
        move || raw_rtt(tries)
    })
    .await??;
    let mut rpc = d.rpc();
    let (id, mut grpc) = run_echo(&mut rpc, sizes.rtt_tries).await?;
    let shim_times = shim_rtt(d, id, sizes.rtt_tries).await?;
    rpc.kill(pb::KillRequest { proc: by_id(id) }).await?;
    rpc.cleanup(pb::CleanupRequest { proc: by_id(id) }).await?;
    let mut raw = raw;
    raw.sort_by(f64::total_cmp);
    grpc.sort_by(f64::total_cmp);
    let mut shim = shim_times;
    shim.sort_by(f64::total_cmp);
    let (raw50, raw99) = (percentile(&raw, 0.5), percentile(&raw, 0.99));
    for (path, times, target) in [
        ("gRPC Run", &grpc, Target::MaxOverRaw(0.25)),
        ("MCP process_run", &shim, Target::Max(1.0)),
    ] {
        let median = percentile(times, 0.5);
        rows.push(row(
            format!("round trip via {path}, median"),
            median,
            Some(raw50),
            "ms",
            Some(target),
        ));
        let p99 = percentile(times, 0.99);
        rows.push(row(format!("round trip via {path}, p99"), p99, Some(raw99), "ms", None));
    }
    Ok(())
}

/// The raw figure for [`ssh`]: lines echoed by `cat` on the far side of
/// one ssh connection (the same options Portal gives ssh, the same server).
async fn raw_ssh_echo(sshd: &Sshd, tries: usize) -> anyhow::Result<Vec<f64>> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut child = tokio::process::Command::new("ssh")
        .arg("-F")
        .arg(&sshd.ssh_config)
        .args(["-T", "-o", "BatchMode=yes", "-p", &sshd.port.to_string(), "-l", &sshd.user])
        .args(["127.0.0.1", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut input = child.stdin.take().context("ssh stdin")?;
    let mut output = child.stdout.take().context("ssh stdout")?;
    let mut buf = vec![0u8; 4096];
    let mut times = Vec::with_capacity(tries);
    for i in 0..tries + 20 {
        let line = format!("ping{i}\n");
        let start = Instant::now();
        input.write_all(line.as_bytes()).await?;
        let mut seen = String::new();
        while !seen.contains(&line) {
            let n = output.read(&mut buf).await?;
            anyhow::ensure!(n > 0, "ssh cat ended");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        // The first rounds warm the connection up, as for Portal.
        if i >= 20 {
            times.push(ms(start.elapsed()));
        }
    }
    Ok(times)
}

async fn ssh(sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let sshd = match Sshd::start(&sibling("portal-cli")?).await {
        Ok(s) => s,
        Err(why) if std::env::var_os("CI").is_none() => {
            eprintln!("ssh: skipped ({why})");
            return Ok(());
        }
        Err(why) => anyhow::bail!("cannot start sshd: {why}"),
    };
    let hosts = portal_client::hosts::Hosts::parse(
        sshd.box_only.clone(),
        &std::fs::read_to_string(&sshd.box_only)?,
    )?;
    let portal_client::hosts::Target::Remote(remote) = hosts.resolve("box")? else {
        anyhow::bail!("box is not remote")
    };
    // Connecting: what every portal-cli command with --host pays once.
    let tries = sizes.cold_tries.max(3);
    let mut connect = Vec::with_capacity(tries);
    let mut raw_connect = Vec::with_capacity(tries);
    for _ in 0..tries {
        let start = Instant::now();
        let client = Client::connect_remote(&remote, true).await?;
        connect.push(ms(start.elapsed()));
        drop(client);
        let start = Instant::now();
        let status = tokio::process::Command::new("ssh")
            .arg("-F")
            .arg(&sshd.ssh_config)
            .args(["-T", "-o", "BatchMode=yes", "-p", &sshd.port.to_string(), "-l", &sshd.user])
            .args(["127.0.0.1", "true"])
            .status()
            .await?;
        anyhow::ensure!(status.success(), "ssh true failed");
        raw_connect.push(ms(start.elapsed()));
    }
    // The same through a connection shared by ssh's ControlMaster (set up
    // in the user's ssh configuration): the first makes the master.
    let mux = portal_client::hosts::Remote {
        ssh_args: vec!["-F".into(), sshd.mux_config.display().to_string()],
        ..remote.clone()
    };
    drop(Client::connect_remote(&mux, true).await?);
    let mut shared = Vec::with_capacity(tries);
    for _ in 0..tries {
        let start = Instant::now();
        drop(Client::connect_remote(&mux, true).await?);
        shared.push(ms(start.elapsed()));
    }
    for times in [&mut connect, &mut raw_connect, &mut shared] {
        times.sort_by(f64::total_cmp);
    }
    rows.push(row(
        "connect to a remote host (ssh, dial-stdio, handshake, GetInfo), median",
        percentile(&connect, 0.5),
        Some(percentile(&raw_connect, 0.5)),
        "ms",
        None,
    ));
    rows.push(row(
        "the same over a ControlMaster connection, median (raw: a new ssh)",
        percentile(&shared, 0.5),
        Some(percentile(&raw_connect, 0.5)),
        "ms",
        None,
    ));

    let client = Client::connect_remote(&remote, true).await?;
    let mut rpc = client.rpc();
    let (id, mut portal) = run_echo(&mut rpc, sizes.rtt_tries).await?;
    rpc.kill(pb::KillRequest { proc: by_id(id) }).await?;
    let mut raw = raw_ssh_echo(&sshd, sizes.rtt_tries).await?;
    raw.sort_by(f64::total_cmp);
    portal.sort_by(f64::total_cmp);
    for (what, p) in [("median", 0.5), ("p99", 0.99)] {
        rows.push(row(
            format!("round trip via gRPC Run over ssh, {what}"),
            percentile(&portal, p),
            Some(percentile(&raw, p)),
            "ms",
            None,
        ));
    }
    Ok(())
}

fn spawn_shim(socket: &Path, data: &Path) -> anyhow::Result<tokio::process::Child> {
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

type McpClient = rmcp::service::RunningService<rmcp::RoleClient, ()>;

async fn connect_shim(child: &mut tokio::process::Child) -> anyhow::Result<McpClient> {
    let stdout = child.stdout.take().context("shim stdout")?;
    let stdin = child.stdin.take().context("shim stdin")?;
    Ok(().serve((stdout, stdin)).await?)
}

async fn call(client: &McpClient, tool: &str, args: Value) -> anyhow::Result<Value> {
    let Value::Object(args) = args else { anyhow::bail!("arguments must be an object") };
    let r =
        client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args)).await?;
    anyhow::ensure!(r.is_error != Some(true), "{tool} failed: {:?}", r.content);
    Ok(r.structured_content.unwrap_or(Value::Null))
}

async fn shim_rtt(d: &Daemon, id: u64, tries: usize) -> anyhow::Result<Vec<f64>> {
    let mut child = spawn_shim(&d.socket, &d.dir.path().join("data"))?;
    let client = connect_shim(&mut child).await?;
    for i in 0..20 {
        call(
            &client,
            "process_run",
            json!({"id": id, "input": format!("mwarm{i}"), "pattern": format!("mwarm{i}")}),
        )
        .await?;
    }
    let mut times = Vec::with_capacity(tries);
    for i in 0..tries {
        let start = Instant::now();
        let r = call(
            &client,
            "process_run",
            json!({"id": id, "input": format!("mping{i}"), "pattern": format!("mping{i}")}),
        )
        .await?;
        anyhow::ensure!(r["reason"] == "matched", "process_run {i}: {r}");
        times.push(ms(start.elapsed()));
    }
    drop(client);
    Ok(times)
}

/// Start, end and clean up many processes, twice, in a fresh daemon: its
/// RSS must come back near where it started.
async fn cycles(sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let d = Daemon::start().await?;
    let mut rpc = d.rpc();
    let argv: Vec<String> = ["sh", "-c", "echo cycle"].iter().map(|s| (*s).to_owned()).collect();
    // One small process first, so the baseline includes a warm daemon.
    let warm = rpc.start(start_request(&argv, true)).await?.into_inner().id;
    wait_end(&mut rpc, warm).await?;
    rpc.cleanup(pb::CleanupRequest { proc: by_id(warm) }).await?;
    let before = status_kb(d.pid(), "VmRSS");
    let mut after = Vec::new();
    for _ in 0..2 {
        let mut ids = Vec::with_capacity(sizes.cycle);
        for _ in 0..sizes.cycle {
            ids.push(rpc.start(start_request(&argv, true)).await?.into_inner().id);
        }
        for id in &ids {
            wait_end(&mut rpc, *id).await?;
        }
        for id in ids {
            rpc.cleanup(pb::CleanupRequest { proc: by_id(id) }).await?;
        }
        // Returning memory happens in the background after cleanups.
        tokio::time::sleep(Duration::from_millis(500)).await;
        after.push(status_kb(d.pid(), "VmRSS"));
    }
    #[allow(clippy::cast_precision_loss, reason = "display")]
    let mib = |kb: u64| kb as f64 / 1024.0;
    for (i, kb) in after.iter().enumerate() {
        let mut r = row(
            format!(
                "daemon RSS after cycle {} of {} PTY processes, cleaned up",
                i + 1,
                sizes.cycle
            ),
            mib(*kb),
            Some(mib(before)),
            "MiB",
            // SQLite's page caches fill once and stay (8 MiB for the
            // writer, 1 MiB per pooled reader): bounded, not a leak.
            Some(Target::MaxOverRaw(24.0)),
        );
        r.note = "raw: the daemon's RSS before the cycles".into();
        rows.push(r);
    }
    d.stop().await
}

/// Prompt printed → `process_run` returns, through the shim, per program.
async fn prompts(d: &Daemon, sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let programs: [(&str, &[&str], &str); 3] = [
        ("python3", &["-q"], "print(1)"),
        ("gdb", &["-q", "-nx"], "print 1"),
        ("sqlite3", &[":memory:"], "select 1;"),
    ];
    let mut child = spawn_shim(&d.socket, &d.dir.path().join("data"))?;
    let client = connect_shim(&mut child).await?;
    let mut rpc = d.rpc();
    for (program, args, statement) in programs {
        let started = call(
            &client,
            "process_start",
            json!({"command": program, "args": args, "pty": true, "wait": "input"}),
        )
        .await?;
        anyhow::ensure!(
            started["wait"]["reason"] == "input_requested",
            "{program} did not reach its prompt: {started}"
        );
        let id = started["process"]["id"].as_u64().context("process id")?;
        let mut times = Vec::with_capacity(sizes.prompt_tries);
        for i in 0..sizes.prompt_tries {
            let r = call(&client, "process_run", json!({"id": id, "input": statement})).await?;
            let returned = wall_ns();
            anyhow::ensure!(r["reason"] == "input_requested", "{program} run {i}: {r}");
            // When the prompt was read from the program: the newest record.
            let tail = rpc
                .read(pb::ReadRequest {
                    proc: by_id(id),
                    from: Some(pb::read_request::From::Tail(true)),
                    max_bytes: 256,
                    encoding: pb::Encoding::Raw.into(),
                    ..Default::default()
                })
                .await?
                .into_inner();
            let printed = tail.records.last().context("no output")?.ts_ns;
            #[allow(clippy::cast_precision_loss, reason = "nanoseconds of a short interval")]
            times.push((returned - printed) as f64 / 1e6);
        }
        rpc.kill(pb::KillRequest { proc: by_id(id) }).await?;
        rpc.cleanup(pb::CleanupRequest { proc: by_id(id) }).await?;
        times.sort_by(f64::total_cmp);
        rows.push(row(
            format!("{program}: prompt printed → process_run returns, median"),
            percentile(&times, 0.5),
            None,
            "ms",
            Some(Target::Max(50.0)),
        ));
        rows.push(row(
            format!("{program}: prompt printed → process_run returns, p99"),
            percentile(&times, 0.99),
            None,
            "ms",
            None,
        ));
    }
    drop(client);
    Ok(())
}

/// Wall-clock time in ns since the Unix epoch (the log's `ts_ns` clock).
fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

async fn scale(d: &Daemon, sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let mut rpc = d.rpc();
    let before = status_kb(d.pid(), "VmRSS");
    let argv: Vec<String> = vec!["sleep".into(), "3600".into()];
    let start = Instant::now();
    let mut ids = Vec::with_capacity(sizes.idle);
    for _ in 0..sizes.idle {
        ids.push(rpc.start(start_request(&argv, true)).await?.into_inner().id);
    }
    let start_time = start.elapsed();
    let mut list = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        let l = rpc.list(pb::ListRequest {}).await?.into_inner();
        list.push(ms(t.elapsed()));
        anyhow::ensure!(
            l.processes.len() >= sizes.idle,
            "list has {} processes",
            l.processes.len()
        );
    }
    list.sort_by(f64::total_cmp);
    let after = status_kb(d.pid(), "VmRSS");
    #[allow(clippy::cast_precision_loss, reason = "display")]
    let per = (after.saturating_sub(before)) as f64 / 1024.0 / sizes.idle as f64;
    #[allow(clippy::cast_precision_loss, reason = "display")]
    let per_start = ms(start_time) / sizes.idle as f64;
    rows.push(row(
        format!("start {} idle PTY processes, each", sizes.idle),
        per_start,
        None,
        "ms",
        None,
    ));
    rows.push(row(
        format!("List with {} processes, median", sizes.idle),
        percentile(&list, 0.5),
        None,
        "ms",
        Some(Target::Max(20.0)),
    ));
    rows.push(row("daemon RSS per idle PTY process", per, None, "MiB", Some(Target::Max(1.0))));
    rpc.kill_all(pb::KillAllRequest {}).await?;
    for id in ids {
        rpc.cleanup(pb::CleanupRequest { proc: by_id(id) }).await?;
    }
    // Many printing at once, in a fresh daemon: its peak memory is theirs
    // alone, not what the idle ones left in the allocator.
    let d = Daemon::start().await?;
    let mut rpc = d.rpc();
    let argv = lines_command(sizes.busy_bytes);
    let start = Instant::now();
    let mut ids = Vec::new();
    for _ in 0..sizes.busy {
        ids.push(rpc.start(start_request(&argv, true)).await?.into_inner().id);
    }
    let pid = d.pid();
    let (total, peak) = peak_rss(pid, async {
        let mut total = 0;
        for id in &ids {
            total += out_bytes(&wait_end(&mut rpc, *id).await?);
        }
        anyhow::Ok(total)
    })
    .await;
    let total = total?;
    let elapsed = start.elapsed();
    for id in ids {
        rpc.cleanup(pb::CleanupRequest { proc: by_id(id) }).await?;
    }
    rows.push(row(
        format!("{} PTY processes printing at once, aggregate", sizes.busy),
        mb(total) / elapsed.as_secs_f64(),
        None,
        "MB/s",
        None,
    ));
    d.stop().await?;
    #[allow(clippy::cast_precision_loss, reason = "display")]
    let peak_mb = peak as f64 / 1024.0;
    rows.push(row(
        format!("daemon peak RSS with {} processes printing", sizes.busy),
        peak_mb,
        None,
        "MiB",
        Some(Target::Max(100.0)),
    ));
    Ok(())
}

/// Start time with many processes running, then a live upgrade's pause.
async fn spawn(sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let d = Daemon::start().await?;
    let mut rpc = d.rpc();
    let idle: Vec<String> = vec!["sleep".into(), "3600".into()];
    let mut running = Vec::new();
    for &level in sizes.spawn_levels {
        while running.len() < level {
            running.push(rpc.start(start_request(&idle, true)).await?.into_inner().id);
        }
        let mut times = Vec::with_capacity(sizes.spawn_tries);
        for _ in 0..sizes.spawn_tries {
            let t = Instant::now();
            let id = rpc.start(start_request(&idle, true)).await?.into_inner().id;
            times.push(ms(t.elapsed()));
            rpc.kill(pb::KillRequest { proc: by_id(id) }).await?;
            rpc.cleanup(pb::CleanupRequest { proc: by_id(id) }).await?;
        }
        times.sort_by(f64::total_cmp);
        let target = (level >= 1000).then_some(Target::Max(3.0));
        rows.push(row(
            format!("start a PTY process with {level} running, median"),
            percentile(&times, 0.5),
            None,
            "ms",
            target,
        ));
    }
    let before = rpc.get_info(pb::GetInfoRequest {}).await?.into_inner();
    rpc.upgrade(pb::UpgradeRequest { binary: String::new() }).await?;
    let answered = Instant::now();
    let deadline = answered + Duration::from_secs(60);
    let info = loop {
        anyhow::ensure!(Instant::now() < deadline, "the upgraded daemon did not answer");
        if let Ok(c) = Client::connect(&d.socket).await
            && c.info().started_at_ns != before.started_at_ns
        {
            break c.info().clone();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let pause = ms(answered.elapsed());
    anyhow::ensure!(info.pid == before.pid && info.upgrade_error.is_empty(), "{info:?}");
    anyhow::ensure!(
        info.running as usize >= running.len(),
        "{} of {} programs carried over",
        info.running,
        running.len()
    );
    rows.push(row(
        format!("live upgrade with {} running: clients waiting", running.len()),
        pause,
        None,
        "ms",
        None,
    ));
    let mut rpc = Client::connect(&d.socket).await?.rpc();
    rpc.kill_all(pb::KillAllRequest {}).await?;
    let d = Daemon { client: Client::connect(&d.socket).await?, ..d };
    d.stop().await
}

/// Runs `fut`, sampling `pid`'s resident memory every 20 ms; returns its
/// output and the peak in KiB.
async fn peak_rss<T>(pid: u32, fut: impl Future<Output = T>) -> (T, u64) {
    tokio::pin!(fut);
    let mut peak = status_kb(pid, "VmRSS");
    loop {
        tokio::select! {
            r = &mut fut => return (r, peak.max(status_kb(pid, "VmRSS"))),
            () = tokio::time::sleep(Duration::from_millis(20)) => peak = peak.max(status_kb(pid, "VmRSS")),
        }
    }
}

async fn memory(d: &Daemon, sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let mut rpc = d.rpc();
    let argv = lines_command(sizes.memory_bytes);
    let pid = d.pid();
    let p = rpc.start(start_request(&argv, true)).await?.into_inner();
    let (end, peak) = peak_rss(pid, wait_end(&mut rpc, p.id)).await;
    let end = end?;
    let stored = out_bytes(&end);
    #[allow(clippy::cast_precision_loss, reason = "display")]
    let peak_mb = peak as f64 / 1024.0;
    let mut r = row(
        format!("daemon peak RSS capturing {} MB on a PTY", stored / 1_000_000),
        peak_mb,
        None,
        "MiB",
        Some(Target::Max(100.0)),
    );
    r.note = format!("{stored} bytes captured and kept");
    rows.push(r);
    // Page it all back through a fresh shim.
    let mut child = spawn_shim(&d.socket, &d.dir.path().join("data"))?;
    let shim_pid = child.id().unwrap_or(0);
    let client = connect_shim(&mut child).await?;
    let mut cursor = "stdout:0".to_owned();
    let mut pages = 0;
    loop {
        let r = call(
            &client,
            "process_read",
            json!({"id": p.id, "cursor": cursor, "max_bytes": 1 << 20}),
        )
        .await?;
        pages += 1;
        let next = r["cursor"].as_str().unwrap_or_default().to_owned();
        if next == cursor || r["omitted_bytes"].as_u64() == Some(0) {
            break;
        }
        cursor = next;
    }
    let hwm = status_kb(shim_pid, "VmHWM");
    drop(client);
    #[allow(clippy::cast_precision_loss, reason = "display")]
    let hwm_mb = hwm as f64 / 1024.0;
    let mut r = row("shim peak RSS paging it back", hwm_mb, None, "MiB", Some(Target::Max(64.0)));
    r.note = format!("{pages} pages of at most 1 MiB");
    rows.push(r);
    // Disk per byte kept, once the writer rests (its WAL folded in).
    let data = d.dir.path().join("data");
    let on_disk = || -> u64 {
        ["portal.db", "portal.db-wal", "portal.db-shm"]
            .iter()
            .map(|f| std::fs::metadata(data.join(f)).map_or(0, |m| m.len()))
            .sum()
    };
    let wal = data.join("portal.db-wal");
    let rest = Instant::now();
    while std::fs::metadata(&wal).map_or(0, |m| m.len()) > 0
        && rest.elapsed() < Duration::from_secs(30)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kept = rpc.get_info(pb::GetInfoRequest {}).await?.into_inner().log_bytes;
    #[allow(clippy::cast_precision_loss, reason = "a ratio for display")]
    let ratio = on_disk() as f64 / kept.max(1) as f64;
    let mut r = row(
        "bytes on disk per byte of log kept, writer at rest",
        ratio,
        None,
        "×",
        Some(Target::Max(1.25)),
    );
    r.note = format!("{} on disk for {kept} kept", on_disk());
    rows.push(r);
    rpc.cleanup(pb::CleanupRequest { proc: by_id(p.id) }).await?;
    Ok(())
}

async fn cold(d: &Daemon, sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let mut warm = Vec::new();
    for _ in 0..sizes.cold_tries {
        let start = Instant::now();
        let mut child = spawn_shim(&d.socket, &d.dir.path().join("data"))?;
        let client = connect_shim(&mut child).await?;
        client.list_all_tools().await?;
        warm.push(ms(start.elapsed()));
        drop(client);
    }
    warm.sort_by(f64::total_cmp);
    rows.push(row(
        "shim start to tools/list (daemon running), median",
        percentile(&warm, 0.5),
        None,
        "ms",
        Some(Target::Max(50.0)),
    ));
    let mut autostart = Vec::new();
    for _ in 0..sizes.cold_tries.min(3) {
        let dir = tempfile::Builder::new().prefix("pc").tempdir_in("/tmp")?;
        let socket = dir.path().join("s").join("portald.sock");
        let start = Instant::now();
        let mut child = spawn_shim(&socket, &dir.path().join("data"))?;
        let client = connect_shim(&mut child).await?;
        client.list_all_tools().await?;
        call(&client, "process_list", json!({})).await?;
        autostart.push(ms(start.elapsed()));
        drop(client);
        let c = Client::connect(&socket).await?;
        c.rpc().shutdown(pb::ShutdownRequest {}).await?;
    }
    autostart.sort_by(f64::total_cmp);
    rows.push(row(
        "shim start to first tool answer (daemon auto-started), median",
        percentile(&autostart, 0.5),
        None,
        "ms",
        None,
    ));
    Ok(())
}

/// Most characters `tools/list` may cost for every tool (about 5 K tokens).
const TOOLS_BUDGET: f64 = 20_000.0;

/// The shim as a client without a library sees it: JSON-RPC lines.
struct RawShim {
    child: tokio::process::Child,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    next_id: u64,
}

impl RawShim {
    async fn start(d: &Daemon) -> anyhow::Result<Self> {
        Self::start_as(d, "portal-bench").await
    }

    /// A shim whose client says it is `client` (results differ by client).
    async fn start_as(d: &Daemon, client: &str) -> anyhow::Result<Self> {
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
    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<(Value, usize)> {
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

    async fn call(&mut self, tool: &str, args: Value) -> anyhow::Result<Value> {
        let (r, _) = self.request("tools/call", json!({"name": tool, "arguments": args})).await?;
        anyhow::ensure!(r["isError"] != true, "{tool}: {r}");
        Ok(r)
    }
}

/// `tools/list` per tool and in all; one call's cost through raw JSON-RPC.
async fn tools(d: &Daemon, sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let mut shim = RawShim::start(d).await?;
    let (list, _) = shim.request("tools/list", json!({})).await?;
    let listed = list["tools"].as_array().context("tools/list has no tools")?;
    let mut total = 0;
    for t in listed {
        let chars = t.to_string().chars().count();
        total += chars;
        #[allow(clippy::cast_precision_loss, reason = "a count for display")]
        rows.push(row(
            format!("tools/list: {}", t["name"].as_str().unwrap_or("?")),
            chars as f64,
            None,
            "chars",
            None,
        ));
    }
    #[allow(clippy::cast_precision_loss, reason = "a count for display")]
    let mut r =
        row("tools/list: every tool", total as f64, None, "chars", Some(Target::Max(TOOLS_BUDGET)));
    r.note = format!("{} tools", listed.len());
    rows.push(r);

    let mut ids = Vec::new();
    for i in 0..5 {
        let r = shim
            .call("process_start", json!({"command": "cat", "name": format!("bench-{i}")}))
            .await?;
        ids.push(r["structuredContent"]["process"]["id"].as_u64().context("no id")?);
    }
    let (mut list_ms, mut write_ms) = (Vec::new(), Vec::new());
    for _ in 0..sizes.rtt_tries.min(200) {
        let start = Instant::now();
        shim.call("process_list", json!({})).await?;
        list_ms.push(ms(start.elapsed()));
        let start = Instant::now();
        shim.call("process_write", json!({"id": ids[0], "content": "x\n"})).await?;
        write_ms.push(ms(start.elapsed()));
    }
    list_ms.sort_by(f64::total_cmp);
    write_ms.sort_by(f64::total_cmp);
    let mut r = row(
        "process_list of 5 through raw JSON-RPC, median",
        percentile(&list_ms, 0.5),
        None,
        "ms",
        None,
    );
    r.note = format!(
        "{:.2} × process_write (a client that validates results pays for the rest)",
        percentile(&list_ms, 0.5) / percentile(&write_ms, 0.5)
    );
    rows.push(r);
    rows.push(row(
        "process_write through raw JSON-RPC, median",
        percentile(&write_ms, 0.5),
        None,
        "ms",
        None,
    ));
    for id in ids {
        shim.call("process_kill", json!({"id": id})).await?;
        shim.call("process_cleanup", json!({"id": id})).await?;
    }
    Ok(())
}

/// One call of the results scenario: its structured content and its text.
async fn sized(
    shim: &mut RawShim,
    tool: &str,
    args: Value,
) -> anyhow::Result<(Value, usize, usize)> {
    let r = shim.call(tool, args).await?;
    let structured = r["structuredContent"].clone();
    let text: String = r["content"]
        .as_array()
        .map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect())
        .unwrap_or_default();
    Ok((structured.clone(), structured.to_string().chars().count(), text.chars().count()))
}

/// The results scenario (see the module doc) as `client`: per call, the
/// characters of structured content and of text.
async fn result_sizes(
    d: &Daemon,
    client: &str,
) -> anyhow::Result<Vec<(&'static str, usize, usize)>> {
    let mut shim = RawShim::start_as(d, client).await?;
    let mut out = Vec::new();
    let (started, s, t) = sized(
        &mut shim,
        "process_start",
        json!({"command": "python3", "args": ["-q"], "pty": true, "wait": "input", "cwd": "/tmp"}),
    )
    .await?;
    out.push(("process_start (wait: input)", s, t));
    let id = started["process"]["id"].as_u64().context("no id")?;
    let (_, s, t) =
        sized(&mut shim, "process_run", json!({"id": id, "input": "print(6*7)"})).await?;
    out.push(("process_run (one line)", s, t));
    let loop40 = "print('\\n'.join(f'line {i} of the loop' for i in range(40)))";
    let (_, s, t) = sized(&mut shim, "process_run", json!({"id": id, "input": loop40})).await?;
    out.push(("process_run (40 lines)", s, t));
    let (_, s, t) = sized(&mut shim, "process_screen", json!({"id": id})).await?;
    out.push(("process_screen (80x24)", s, t));
    let (_, s, t) = sized(&mut shim, "process_read", json!({"id": id, "duration": 60_000})).await?;
    out.push(("process_read (all of it)", s, t));
    let mut ids = vec![id];
    for argv in [["sleep", "600"], ["cat", "-"], ["sleep", "601"], ["sleep", "602"]] {
        let r = shim
            .call("process_start", json!({"command": argv[0], "args": [argv[1]], "cwd": "/tmp"}))
            .await?;
        ids.push(r["structuredContent"]["process"]["id"].as_u64().context("no id")?);
    }
    let (_, s, t) = sized(&mut shim, "process_list", json!({})).await?;
    out.push(("process_list (five processes)", s, t));
    let (_, s, t) = sized(&mut shim, "process_inspect", json!({"id": id})).await?;
    out.push(("process_inspect", s, t));
    for id in ids {
        shim.call("process_kill", json!({"id": id})).await?;
        shim.call("process_cleanup", json!({"id": id})).await?;
    }
    Ok(out)
}

/// What a model reads of each result, as Claude Code or Codex (structured
/// content) and as a client that reads the text.
async fn results(d: &Daemon, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let full = result_sizes(d, "portal-bench").await?;
    let short = result_sizes(d, "claude-code").await?;
    for ((what, structured, text), (_, _, short_text)) in full.into_iter().zip(short) {
        #[allow(clippy::cast_precision_loss, reason = "a count for display")]
        let mut r =
            row(format!("result: {what}, structured"), structured as f64, None, "chars", None);
        r.note = format!("text {text} chars (full), {short_text} (Claude Code, Codex)");
        rows.push(r);
    }
    Ok(())
}

fn print_table(rows: &[Row], machine: &str) {
    println!("portal-bench · {machine}");
    println!("{:<62} {:>12} {:>12} {:>7}  {:<22}", "measure", "portal", "raw", "ratio", "target");
    for r in rows {
        let raw = r.raw.map_or_else(|| "-".into(), |v| format!("{v:.3}"));
        let ratio = r
            .raw
            .filter(|v| *v > 0.0)
            .map_or_else(|| "-".into(), |v| format!("{:.2}", r.portal / v));
        let (target, verdict) = match r.target {
            Some(t) => (t.describe(r.unit), if t.met(r.portal, r.raw) { "PASS" } else { "MISS" }),
            None => (String::new(), ""),
        };
        println!(
            "{:<62} {:>12} {:>12} {:>7}  {:<22} {verdict} {}",
            format!("{} ({})", r.name, r.unit),
            if r.unit == "chars" { format!("{:.0}", r.portal) } else { format!("{:.3}", r.portal) },
            raw,
            ratio,
            target,
            r.note
        );
    }
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or_else(String::new, |kb| format!(", {} GiB", kb / 1024 / 1024));
    format!("{cpus} cores{mem}, {}", std::env::consts::ARCH)
}

/// A shell command printing `bytes` of log lines like a web service's
/// (about 90 bytes each: time, request id, user, method, path, status,
/// latency), with the word `needle` on one line in the middle.
fn log_lines_command(bytes: u64) -> Vec<String> {
    let lines = bytes / 90;
    let script = format!(
        "awk 'BEGIN {{ m = split(\"GET POST PUT DELETE\", verb, \" \"); \
          for (i = 0; ; i++) {{ \
            if (i == {half}) print \"2026-12-02T10:00:00Z fatal needle in the haystack at request\", i; \
            printf \"2026-12-02T10:%02d:%02dZ req=%08x user=u%d %s /api/items/%d status=%d took=%dms\\n\", \
              (i / 60) % 60, i % 60, i * 2654435761 % 4294967296, i % 9973, verb[i % m + 1], i % 100003, \
              (i % 97 == 0) ? 503 : 200, i % 250 }} }}' | head -c {bytes}",
        half = lines / 2,
    );
    vec!["sh".into(), "-c".into(), script]
}

/// Searches `query` until the index has every byte; returns the response.
async fn search_indexed(
    rpc: &mut PortalClient<Channel>,
    req: pb::SearchRequest,
) -> anyhow::Result<pb::SearchResponse> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let r = rpc.search(req.clone()).await?.into_inner();
        anyhow::ensure!(r.index_error.is_empty(), "indexing failed: {}", r.index_error);
        if r.unindexed_bytes == 0 {
            return Ok(r);
        }
        anyhow::ensure!(Instant::now() < deadline, "the index did not catch up in 10 minutes");
    }
}

async fn search(sizes: &Sizes, rows: &mut Vec<Row>) -> anyhow::Result<()> {
    let d = Daemon::start().await?;
    let mut rpc = d.rpc();
    let argv = log_lines_command(sizes.search_bytes);
    let start = Instant::now();
    let p = rpc.start(start_request(&argv, false)).await?.into_inner();
    let end = wait_end(&mut rpc, p.id).await?;
    // Every byte committed (a read passes the flush barrier).
    rpc.read(pb::ReadRequest {
        proc: by_id(p.id),
        from: Some(pb::read_request::From::Tail(true)),
        max_bytes: 1,
        ..Default::default()
    })
    .await?;
    let captured = start.elapsed();
    let stored = out_bytes(&end);
    let rare = pb::SearchRequest { query: "needle".into(), ..Default::default() };
    let found = search_indexed(&mut rpc, rare.clone()).await?;
    let indexed = start.elapsed();
    anyhow::ensure!(found.hits.len() == 1, "the rare word: {} hits", found.hits.len());
    let mut r = row(
        "search: capture of log lines (pipes)",
        mb(stored) / captured.as_secs_f64(),
        None,
        "MB/s",
        None,
    );
    r.note = format!("{} MB of ~90-byte lines, indexing alongside", stored / 1_000_000);
    rows.push(r);
    let mut r = row(
        "search: indexing, start to every byte indexed",
        mb(stored) / indexed.as_secs_f64(),
        None,
        "MB/s",
        None,
    );
    r.note = format!("{:.1} s after the capture ended", (indexed - captured).as_secs_f64());
    rows.push(r);
    let data = d.dir.path().join("data");
    let size = |names: &[&str]| -> u64 {
        names.iter().map(|f| std::fs::metadata(data.join(f)).map_or(0, |m| m.len())).sum()
    };
    let index = size(&["portal.search.db", "portal.search.db-wal"]);
    #[allow(clippy::cast_precision_loss, reason = "a ratio for display")]
    let mut r = row(
        "search: index size per byte of log",
        index as f64 / stored.max(1) as f64,
        None,
        "×",
        None,
    );
    r.note = format!("{index} bytes of index");
    rows.push(r);
    let cases = [
        ("search: a rare word over the log", rare),
        (
            "search: a word on every line, newest 20",
            pb::SearchRequest { query: "status".into(), limit: 20, ..Default::default() },
        ),
        (
            "search: a phrase, newest 20",
            pb::SearchRequest { query: "\"status 503\"".into(), limit: 20, ..Default::default() },
        ),
        (
            "search: a word and a regex, newest 20",
            pb::SearchRequest {
                query: "delete".into(),
                regex: r"took=24\dms".into(),
                limit: 20,
                ..Default::default()
            },
        ),
    ];
    for (name, req) in cases {
        let mut times = Vec::with_capacity(sizes.search_tries);
        let mut hits = 0;
        for _ in 0..sizes.search_tries {
            let t = Instant::now();
            let r = rpc.search(req.clone()).await?.into_inner();
            times.push(ms(t.elapsed()));
            hits = r.hits.len();
            anyhow::ensure!(hits > 0, "{name}: nothing found");
        }
        times.sort_by(f64::total_cmp);
        let mut r = row(name, percentile(&times, 0.5), None, "ms", Some(Target::Max(250.0)));
        r.note = format!(
            "median of {}; {hits} hits; p95 {:.1} ms",
            sizes.search_tries,
            percentile(&times, 0.95)
        );
        rows.push(r);
    }
    d.stop().await
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let sizes = Sizes::new(args.smoke);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let rows = runtime.block_on(async {
        let want = |s: &str| args.only.is_empty() || args.only.iter().any(|o| o == s);
        let d = Daemon::start().await?;
        let mut rows = Vec::new();
        let modes: Vec<bool> = [(true, "pty-capture"), (false, "pipe-capture")]
            .into_iter()
            .filter(|(_, name)| want("capture") || args.only.iter().any(|o| o == name))
            .map(|(pty, _)| pty)
            .collect();
        capture(&d, &sizes, &modes, &mut rows).await.context("capture")?;
        if want("rtt") {
            rtt(&d, &sizes, &mut rows).await.context("round trip")?;
        }
        if want("memory") {
            memory(&d, &sizes, &mut rows).await.context("memory")?;
        }
        if want("scale") {
            scale(&d, &sizes, &mut rows).await.context("scale")?;
        }
        if want("cold") {
            cold(&d, &sizes, &mut rows).await.context("cold start")?;
        }
        if want("cycle") {
            cycles(&sizes, &mut rows).await.context("cycles")?;
        }
        if want("prompt") {
            prompts(&d, &sizes, &mut rows).await.context("prompts")?;
        }
        if want("spawn") {
            spawn(&sizes, &mut rows).await.context("spawn")?;
        }
        if want("tools") {
            tools(&d, &sizes, &mut rows).await.context("tools")?;
        }
        if want("ssh") {
            ssh(&sizes, &mut rows).await.context("ssh")?;
        }
        if want("search") {
            search(&sizes, &mut rows).await.context("search")?;
        }
        if want("results") {
            results(&d, &mut rows).await.context("results")?;
        }
        d.stop().await?;
        anyhow::Ok(rows)
    })?;
    let machine = machine();
    if args.json {
        let v: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({
                    "measure": r.name,
                    "unit": r.unit,
                    "portal": r.portal,
                    "raw": r.raw,
                    "ratio": r.raw.filter(|v| *v > 0.0).map(|v| r.portal / v),
                    "target": r.target.map(|t| t.describe(r.unit)),
                    "pass": r.target.map(|t| t.met(r.portal, r.raw)),
                    "note": r.note,
                })
            })
            .collect();
        println!("{}", json!({"machine": machine, "smoke": args.smoke, "results": v}));
    } else {
        print_table(&rows, &machine);
    }
    runtime.shutdown_background();
    Ok(())
}
