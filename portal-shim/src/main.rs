//! `portal-shim`: the MCP server (stdio) that agents launch. It maps tool
//! calls to `portald` and starts the daemon when needed; it keeps no state of
//! its own, so a restart loses nothing. stdout carries only MCP JSON-RPC;
//! logs go to stderr.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod args;
mod audience;
mod catalog;
mod errors;
mod framing;
mod hosts;
mod link;
mod results;
mod schema;
mod surface;
mod tools;

use std::path::PathBuf;
use std::sync::Arc;

use clap::Parser;
use portal_client::launch::LaunchOptions;
use portal_client::paths;
use rmcp::ServiceExt as _;

/// Portal's MCP server: exposes portald's process tools to an MCP client over stdio.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// portald's socket [default: $XDG_RUNTIME_DIR/portal/portald.sock, else ~/.local/state/portal/run/portald.sock]
    #[arg(long, env = paths::ENV_SOCKET)]
    socket: Option<PathBuf>,
    /// Data directory for a daemon this shim starts
    #[arg(long, env = paths::ENV_DATA_DIR)]
    data_dir: Option<PathBuf>,
    /// Never start portald; fail tool calls when it is not running
    #[arg(long, env = "PORTAL_NO_AUTOSTART", value_parser = clap::builder::BoolishValueParser::new())]
    no_autostart: bool,
    /// Tool groups to offer, comma-separated: process, waits, agents, registry, or all
    #[arg(long, env = surface::ENV_TOOLS, default_value = "all", value_name = "GROUPS")]
    tools: String,
    /// What the client may change: read-only (only tools that change nothing), no-kill (no tool that ends programs or deletes output), full
    #[arg(long, env = surface::ENV_TIER, value_enum, default_value_t = surface::Tier::Full)]
    tier: surface::Tier,
    /// The portald tool calls go to when they name no host: local, a name
    /// from the hosts file (~/.config/portal/hosts.toml), or ssh://[user@]host[:port]
    #[arg(long, env = portal_client::hosts::ENV_HOST, value_name = "HOST")]
    host: Option<String>,
    /// What each result's text block carries: auto (the output for clients
    /// whose model may read the text; a one-line summary for Claude Code and
    /// Codex, which hand their model only the structured content), full or
    /// short
    #[arg(long, env = audience::ENV_RESULT_TEXT, value_enum, default_value_t = audience::TextForm::Auto)]
    result_text: audience::TextForm,
    /// Log filter for stderr (tracing EnvFilter syntax)
    #[arg(long, env = paths::ENV_LOG, default_value = "info")]
    log: String,
    /// Print this binary's man page (roff) and exit (`portal-cli man`
    /// collects it)
    #[arg(long, hide = true)]
    man: bool,
}

/// How long answers still queued at the end of input get to reach stdout.
const FLUSH_AT_EXIT: std::time::Duration = std::time::Duration::from_secs(2);

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if cli.man {
        let page =
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command().name("portal-shim"));
        page.render(&mut std::io::stdout())?;
        return Ok(());
    }
    let surface = surface::Surface::new(&cli.tools, cli.tier)
        .map_err(|e| anyhow::anyhow!("--tools / {}: {e}", surface::ENV_TOOLS))?;
    let filter = tracing_subscriber::EnvFilter::try_new(&cli.log)
        .map_err(|e| anyhow::anyhow!("invalid log filter {:?}: {e}", cli.log))?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    let mut opts = LaunchOptions::from_env();
    if let Some(socket) = cli.socket {
        opts.socket = socket;
    }
    if cli.data_dir.is_some() {
        opts.data_dir = cli.data_dir;
    }
    opts.autostart = !cli.no_autostart;
    audience::choose(cli.result_text);
    let cwd = std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".into());
    let links = hosts::HostLinks::new(opts, cli.host.as_deref())
        .map_err(|e| anyhow::anyhow!("--host / {}: {e}", portal_client::hosts::ENV_HOST))?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let shim = tools::Shim::new(Arc::new(links), surface, cwd);
        let io = framing::guard(tokio::io::stdin(), tokio::io::stdout());
        let service = match shim.serve((io.input, io.output)).await {
            Ok(service) => service,
            // A client that closes before it initialized (it was probing,
            // or gave up) is an ending like any other, not a failure.
            Err(
                rmcp::service::ServerInitializeError::ConnectionClosed(_)
                | rmcp::service::ServerInitializeError::ExpectedInitializeRequest(None),
            ) => {
                tracing::debug!("client closed the connection before initializing");
                return anyhow::Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        service.waiting().await?;
        // The last answers may still be on their way to stdout.
        let _ = tokio::time::timeout(FLUSH_AT_EXIT, io.flushed).await;
        tracing::debug!("client closed the connection");
        anyhow::Ok(())
    })
}
