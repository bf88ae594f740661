//! `portal-cli`: Portal for people. Talks to `portald` over its socket,
//! starting it when nothing answers.
//!
//! Exit codes: 0 ok, 1 the operation failed, 2 usage, 3 the daemon is
//! unreachable (or speaks another protocol version).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use clap::{Parser, Subcommand};
use portal_proto::client::{Client, ClientError};
use portal_proto::launch::{LaunchOptions, connect_or_start};
use portal_proto::v1 as pb;

/// Portal: run and drive interactive terminal programs through portald.
#[derive(Debug, Parser)]
#[command(
    version,
    about,
    after_help = "Exit codes: 0 ok, 1 operation failed, 2 usage, 3 daemon unreachable."
)]
struct Cli {
    /// Do not start portald when it is not running.
    #[arg(long, global = true, env = "PORTAL_NO_AUTOSTART", value_parser = clap::builder::BoolishValueParser::new())]
    no_autostart: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show Portal at work: start a Python REPL on a PTY, type into it, wait
    /// for the answer, print its screen, clean up.
    Demo,
}

/// How long the demo waits for each step (generous: a cold machine).
const DEMO_STEP: Duration = Duration::from_secs(20);

fn by_id(id: u64) -> Option<pb::ProcRef> {
    Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) })
}

/// Follows a process's output until `needle` has appeared.
async fn wait_for(client: &Client, id: u64, needle: &str) -> anyhow::Result<String> {
    let mut rpc = client.rpc();
    let req = pb::FollowRequest { proc: by_id(id), from_start: true, ..Default::default() };
    let mut events = rpc.follow(req).await?.into_inner();
    let mut seen = Vec::new();
    let found = tokio::time::timeout(DEMO_STEP, async {
        while let Some(ev) = events.message().await? {
            match ev.event {
                Some(pb::follow_event::Event::Output(r)) => {
                    seen.extend_from_slice(&r.data);
                    if String::from_utf8_lossy(&seen).contains(needle) {
                        return Ok(true);
                    }
                }
                Some(pb::follow_event::Event::Exited(_)) => return Ok(false),
                _ => {}
            }
        }
        Ok::<_, tonic::Status>(false)
    })
    .await;
    match found {
        Ok(Ok(true)) => Ok(String::from_utf8_lossy(&seen).into_owned()),
        Ok(Ok(false)) => anyhow::bail!("process {id} ended before printing {needle:?}"),
        Ok(Err(status)) => Err(status.into()),
        Err(_) => anyhow::bail!("process {id} did not print {needle:?} within {DEMO_STEP:?}"),
    }
}

async fn demo(client: &Client) -> anyhow::Result<()> {
    let mut rpc = client.rpc();
    let info = client.info();
    println!("portald {} (pid {}) on {}", info.daemon_version, info.pid, info.socket);
    let cwd = std::env::current_dir().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let start = pb::StartRequest {
        command: "python3".into(),
        args: vec!["-q".into(), "-i".into()],
        mode: pb::Mode::Pty.into(),
        size: Some(pb::TermSize { rows: 8, cols: 60 }),
        cwd,
        ..Default::default()
    };
    let p = rpc.start(start).await.context("starting python3 on a PTY")?.into_inner();
    println!("started python3 on a PTY: id {} pid {}", p.id, p.pid);
    let result = async {
        wait_for(client, p.id, ">>> ").await?;
        println!("typing: print(6*7)");
        let data = Bytes::from_static(b"print(6*7)\r");
        rpc.write(pb::WriteRequest { proc: by_id(p.id), data }).await?;
        wait_for(client, p.id, "42\r\n>>> ").await?;
        let screen =
            rpc.screen(pb::ScreenRequest { proc: by_id(p.id), resize: None }).await?.into_inner();
        println!("its screen:");
        println!("  ┌{}┐", "─".repeat(60));
        for line in &screen.lines {
            println!("  │{line:<60}│");
        }
        println!("  └{}┘", "─".repeat(60));
        let read = pb::ReadRequest { proc: by_id(p.id), ..Default::default() };
        let log = rpc.read(read).await?.into_inner();
        let bytes: usize = log.records.iter().map(|r| r.data.len()).sum();
        println!(
            "the log holds {bytes} bytes of output (escapes stripped), kept across client restarts"
        );
        anyhow::Ok(())
    }
    .await;
    rpc.kill(pb::KillRequest { proc: by_id(p.id) }).await?;
    rpc.cleanup(pb::CleanupRequest { proc: by_id(p.id) }).await?;
    println!("killed and cleaned up process {}", p.id);
    result
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let mut opts = LaunchOptions::from_env();
        opts.autostart = !cli.no_autostart;
        let client = match connect_or_start(&opts).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                if matches!(e, ClientError::Unavailable { .. }) && cli.no_autostart {
                    eprintln!("hint: start it with `portald` or drop --no-autostart");
                }
                return ExitCode::from(3);
            }
        };
        let result = match cli.command {
            Command::Demo => demo(&client).await,
        };
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        }
    })
}
