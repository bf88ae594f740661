//! The `portald` binary: arguments, logging, signals, then [`portald::run`].

use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use portal_client::launch::EXIT_ALREADY_RUNNING;
use portal_client::paths;
use tokio_util::sync::CancellationToken;

/// Portal's daemon: runs interactive programs on PTYs or pipes for agents and
/// people, logs all their I/O to SQLite and serves gRPC on a Unix socket.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Unix socket to listen on [default: $XDG_RUNTIME_DIR/portal/portald.sock, else /tmp/portal-$UID/portald.sock]
    #[arg(long, env = paths::ENV_SOCKET)]
    socket: Option<PathBuf>,
    /// Directory of the database and the daemon log [default: $XDG_STATE_HOME/portal]
    #[arg(long, env = paths::ENV_DATA_DIR)]
    data_dir: Option<PathBuf>,
    /// Log filter (tracing EnvFilter syntax, e.g. `info`, `portald=debug`)
    #[arg(long, env = paths::ENV_LOG, default_value = "info")]
    log: String,
    /// Append logs to this file instead of stderr (default with --detach: <data-dir>/portald.log)
    #[arg(long)]
    log_file: Option<PathBuf>,
    /// Leave the caller's session (for auto-start by clients); logs go to a file
    #[arg(long)]
    detach: bool,
    /// Most managed processes kept at once
    #[arg(long, default_value_t = portald::config::DEFAULT_MAX_PROCESSES)]
    max_processes: usize,
    /// Milliseconds between SIGHUP/SIGTERM and SIGKILL for processes at shutdown
    #[arg(long, default_value_t = 2000)]
    kill_grace_ms: u64,
    /// Most I/O log kept per process; the oldest is trimmed first (bytes, or with K/M/G suffix)
    #[arg(long, env = "PORTAL_MAX_LOG_PER_PROCESS", default_value = "512M", value_parser = parse_size)]
    max_log_per_process: u64,
    /// Most I/O log kept in total; the oldest processes' history is trimmed first
    #[arg(long, env = "PORTAL_MAX_LOG_TOTAL", default_value = "4G", value_parser = parse_size)]
    max_log_total: u64,
    /// Hard ceiling of the database file; reaching it is handled like a full disk
    #[arg(long, env = "PORTAL_MAX_DB_SIZE", value_parser = parse_size)]
    max_db_size: Option<u64>,
    /// Check the database instead of serving; when it is damaged, move it
    /// aside and salvage what can be read into a fresh one (portald must not
    /// be running)
    #[arg(long)]
    doctor: bool,
    /// Print what this binary needs to take over from a running portald
    /// (versions of its protocols and database schema) as JSON, and exit;
    /// a live upgrade runs it first
    #[arg(long = "check-upgrade")]
    check_upgrade: bool,
    /// Print this binary's man page (roff) and exit (`portal-cli man`
    /// collects it)
    #[arg(long, hide = true)]
    man: bool,
    /// Ring of each output stream in a program's journal: what was read
    /// but not yet logged when portald was killed is recovered up to this
    /// much per stream, the rest marked lost with its size (bytes, or with
    /// K/M/G suffix)
    #[arg(long, hide = true, env = "PORTAL_JOURNAL_RING", default_value = "256K", value_parser = parse_size)]
    journal_ring: u64,
}

/// Parses `1048576`, `64K`, `512M`, `4G` (powers of 1024).
fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 10),
        Some((i, 'm' | 'M')) => (&t[..i], 20),
        Some((i, 'g' | 'G')) => (&t[..i], 30),
        Some((i, 't' | 'T')) => (&t[..i], 40),
        _ => (t, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size: use bytes or a number with K, M, G or T"))?;
    let v = n.checked_mul(1 << shift).ok_or_else(|| format!("{s:?} is too large"))?;
    if v == 0 {
        return Err(format!("{s:?}: the size must be above zero"));
    }
    Ok(v)
}

fn init_logging(args: &Args, data_dir: &std::path::Path) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.log)
        .map_err(|e| anyhow::anyhow!("invalid log filter {:?}: {e}", args.log))?;
    let file = args
        .log_file
        .clone()
        .or_else(|| args.detach.then(|| data_dir.join(paths::DAEMON_LOG_FILE)));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match file {
        Some(path) => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            // Private whatever the umask: the log names what programs did.
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&path)
                .map_err(|e| anyhow::anyhow!("cannot open log file {}: {e}", path.display()))?;
            builder.with_ansi(false).with_writer(std::sync::Mutex::new(f)).init();
        }
        None => builder.with_writer(std::io::stderr).init(),
    }
    Ok(())
}

/// `--doctor`: the report goes to stdout, for the person who asked.
#[allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command's answer, not daemon output"
)]
fn doctor(config: &portald::Config) -> ExitCode {
    match portald::doctor::run(config) {
        Ok(report) => {
            print!("{report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("portald --doctor: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    // Before anything opens a descriptor: what a replaced daemon handed over.
    portald::upgrade::take_handover_env();
    let args = Args::parse();
    if args.man {
        let page = clap_mangen::Man::new(<Args as clap::CommandFactory>::command().name("portald"));
        return match page.render(&mut std::io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    if args.check_upgrade {
        // The check's answer, read by the running portald (not a log line).
        let answer = serde_json::to_string(&portald::upgrade::readiness()).unwrap_or_default();
        let mut stdout = std::io::stdout().lock();
        return match std::io::Write::write_all(&mut stdout, format!("{answer}\n").as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    let socket = args.socket.clone().unwrap_or_else(paths::socket_path);
    let data_dir = args.data_dir.clone().unwrap_or_else(paths::data_dir);
    if args.detach {
        // Fails when we lead a process group, as portal-client's launcher
        // makes us (so a Ctrl-C in the client's terminal never reaches us):
        // we then stay in that session, but in a group of our own with no
        // terminal, which the terminal's hangup does not reach either.
        let _ = portald::detach();
        let _ = std::env::set_current_dir("/");
    }
    if let Err(e) = init_logging(&args, &data_dir) {
        // No logger yet: stderr is the only place to say it.
        #[allow(clippy::print_stderr, reason = "logging is not set up")]
        {
            eprintln!("portald: {e:#}");
        }
        return ExitCode::FAILURE;
    }
    let mut config = portald::Config::new(socket, data_dir);
    if args.doctor {
        return doctor(&config);
    }
    config.max_processes = args.max_processes;
    config.self_exec = portald::config::SelfExec::current();
    config.kill_grace = Duration::from_millis(args.kill_grace_ms);
    config.journal_ring_bytes = args.journal_ring;
    config.retention = portald::Retention {
        per_process: args.max_log_per_process,
        total: args.max_log_total,
        max_db_bytes: args.max_db_size,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
            else {
                tracing::error!("cannot install SIGTERM/SIGINT handlers");
                return;
            };
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM"),
                _ = int.recv() => tracing::info!("SIGINT"),
            }
            token.cancel();
        });
        match portald::run(&config, shutdown).await {
            Ok(portald::Ended::Stopped) => ExitCode::SUCCESS,
            Ok(portald::Ended::Upgrade(handover)) => {
                // Returns only if neither the new binary nor this one again
                // could be exec'd; the programs stay with the holder and
                // the next client's auto-start adopts them.
                let err = portald::upgrade::exec(handover);
                tracing::error!(error = %err, "cannot exec any portald; the programs wait with portal-holder for the next start");
                ExitCode::FAILURE
            }
            Err(portald::StartError::AlreadyRunning { socket, why }) => {
                tracing::info!(socket = %socket.display(), "{why}; exiting");
                ExitCode::from(u8::try_from(EXIT_ALREADY_RUNNING).unwrap_or(1))
            }
            Err(e) => {
                tracing::error!("{e:#}");
                // Started by a live upgrade: go back to the binary it replaced.
                portald::upgrade::fall_back(&format!("{e:#}"));
                ExitCode::FAILURE
            }
        }
    })
}
