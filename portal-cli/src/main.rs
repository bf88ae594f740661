//! `portal-cli`: Portal for people. See what portald runs, read logs and
//! screens, type into programs (a password the agent must never see, say),
//! attach like `tmux attach`, and manage the daemon and its service.
//!
//! Every command talks to `portald` over its socket and starts it when
//! nothing answers (except `daemon status`, `daemon stop` and `service`);
//! with `--host` (or `host:` before a process), to the portald of another
//! machine over SSH (`dial-stdio` is that connection's remote end).
//! Exit codes: 0 ok, 1 the operation failed, 2 usage, 3 the daemon is
//! unreachable (or speaks another protocol version), and for a remote
//! host: 4 unreachable, 5 login refused, 6 Portal not installed there,
//! 7 the two sides speak different protocol versions.

#![warn(
    clippy::print_stdout,
    reason = "stdout::outln! ends quietly on a closed pipe; println! panics"
)]

#[macro_use]
mod stdout;
mod agents;
mod attach;
mod complete;
mod daemonctl;
mod dash;
mod docs;
mod export;
mod fmt;
mod install;
mod notify;
mod output;
mod procs;
mod register;
mod search;
mod service;
mod waits;
mod workspace;

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use portal_client::client::Client;
use portal_client::error::ClientError;
use portal_client::hosts::{self, Hosts, Target};
use portal_client::launch::LaunchOptions;
use portal_client::{paths, user};
use portal_proto::v1 as pb;

/// Portal: run and drive interactive terminal programs through portald.
#[derive(Debug, Parser)]
#[command(
    version,
    about,
    after_help = "Processes are named by id or by the name given at start, on another host \
                  as HOST:ID or HOST:NAME (HOST from the hosts file).\n\
                  Exit codes: 0 ok, 1 operation failed, 2 usage, 3 daemon unreachable; \
                  on a remote host: 4 host unreachable, 5 login refused, 6 Portal not \
                  installed there, 7 protocol versions differ."
)]
pub(crate) struct Cli {
    /// The portald to talk to: `local`, a name from the hosts file
    /// (~/.config/portal/hosts.toml), or ssh://[user@]host[:port].
    #[arg(long, global = true, env = hosts::ENV_HOST, value_name = "HOST")]
    host: Option<String>,
    /// portald's socket [default: $XDG_RUNTIME_DIR/portal/portald.sock, else
    /// ~/.local/state/portal/run/portald.sock].
    #[arg(long, global = true, env = paths::ENV_SOCKET, value_name = "PATH")]
    socket: Option<std::path::PathBuf>,
    /// Directory of the database and the daemon log, for a portald this
    /// command starts [default: $XDG_STATE_HOME/portal, ~/.local/state/portal].
    #[arg(long, global = true, env = paths::ENV_DATA_DIR, value_name = "DIR")]
    data_dir: Option<std::path::PathBuf>,
    /// Do not start portald when it is not running.
    #[arg(long, global = true, env = "PORTAL_NO_AUTOSTART", value_parser = clap::builder::BoolishValueParser::new())]
    no_autostart: bool,
    #[command(subcommand)]
    command: Command,
}

/// Output format of read-style commands.
#[derive(Debug, Args, Clone, Copy)]
pub(crate) struct JsonFlag {
    /// Print JSON (one object, or one per line for streams) instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List managed processes (running ones; --all for ended ones too).
    Ps {
        /// Include ended processes.
        #[arg(short, long)]
        all: bool,
        /// List this machine and every host of the hosts file, each row
        /// with its host (--host is then moot).
        #[arg(long)]
        all_hosts: bool,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Start a program: portal-cli start [--pty] -- CMD ARGS...
    Start(procs::StartArgs),
    /// Print a process's output (all of it by default).
    Read(output::ReadArgs),
    /// Print a PTY process's screen.
    Screen {
        /// Process id or name.
        #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
        proc: String,
        /// Redraw whenever the screen changes, until the program ends or Ctrl-C.
        #[arg(short, long)]
        watch: bool,
        /// Resize the terminal first, rows x columns (e.g. 40x120); the
        /// program is told (SIGWINCH) and the screen shown is the new one.
        #[arg(long, value_name = "ROWSxCOLS", value_parser = fmt::parse_size)]
        size: Option<pb::TermSize>,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Type text into a process.
    Write {
        /// Process id or name.
        #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
        proc: String,
        /// Text to write (escapes are not interpreted).
        text: Option<String>,
        /// Press Enter after the text (\r on a PTY, \n on pipes).
        #[arg(short, long)]
        enter: bool,
        /// Read the text from standard input instead.
        #[arg(long, conflicts_with = "text")]
        stdin: bool,
    },
    /// Type a secret (password, passphrase) into a program without echo; it
    /// never reaches the log or an agent.
    Secret {
        /// Process id or name.
        #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
        proc: String,
        /// Send even though the terminal echoes: the echo (the secret) is
        /// then in the program's output and its log.
        #[arg(long)]
        anyway: bool,
    },
    /// Send a signal (name or number) to a process's group.
    Signal {
        /// Process id or name.
        #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
        proc: String,
        /// SIGINT, INT, int, 2...
        signal: String,
    },
    /// Kill a process tree (its output is kept).
    Kill {
        /// Process id or name.
        #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
        proc: String,
    },
    /// Kill every running process.
    KillAll,
    /// Delete a process's stored output (it may keep running).
    Clear {
        /// Process id or name.
        #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
        proc: String,
    },
    /// Forget an ended process: record, output and screen.
    Rm {
        /// Process id or name.
        #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
        proc: String,
    },
    /// Show everything about a process.
    Inspect {
        /// Process id or name.
        #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
        proc: String,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Wait until output matches, settles, the screen is stable, or the process ends;
    /// given several processes, until the first of them does (--all: each).
    Wait(waits::WaitArgs),
    /// Type a command and wait for its result: portal-cli run P -- INPUT
    Run(waits::RunArgs),
    /// Press keys and type text, like tmux send-keys: key names (Enter, C-c,
    /// Up, F5, M-x) are keys, anything else is typed; `text:...` types even a
    /// key name. A name that reads as a key but is none (F13, C-ab) is
    /// refused, and nothing is typed.
    SendKeys {
        /// Process id or name.
        #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
        proc: String,
        /// Keys and text in order, e.g. Escape :wq Enter.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Coding agents in Portal's terminals, most urgent first; wait for them
    /// or send them prompts.
    Agents(agents::AgentsArgs),
    /// Install, remove or check the hooks that let Claude Code and Codex
    /// report their state.
    #[command(subcommand)]
    Hooks(agents::HooksCommand),
    /// Report an agent's state (what the hooks run; reads the hook's JSON
    /// from stdin).
    Emit(agents::EmitArgs),
    /// Start a workspace's members that are not running (portal.toml), in
    /// dependency order, each once it is ready; agents get their first
    /// prompt once.
    Up(workspace::WorkspaceArgs),
    /// Stop a workspace's running members, in reverse order.
    Down(workspace::WorkspaceArgs),
    /// A workspace's members: process, input and agent states.
    Status(workspace::WorkspaceArgs),
    /// Every program and agent on one live screen, whoever needs you first;
    /// Enter attaches, Ctrl-] comes back (`?` lists the keys).
    Dash(dash::DashArgs),
    /// Connect this terminal to a PTY process; Ctrl-] detaches (it keeps running).
    Attach {
        /// Process id or name.
        #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
        proc: String,
    },
    /// Query or record the "does it need a PTY" registry.
    #[command(subcommand)]
    Programs(ProgramsCommand),
    /// Start, stop or check the daemon.
    #[command(subcommand)]
    Daemon(DaemonCommand),
    /// Install portald as a systemd user service or a launchd agent.
    #[command(subcommand)]
    Service(service::ServiceCommand),
    /// Show Portal at work: start a Python REPL on a PTY, type into it, wait
    /// for the answer, print its screen, clean up.
    Demo,
    /// Write a process's log as a recording: asciicast v2 (for `asciinema
    /// play`) or a text transcript with the input interleaved.
    Export(export::ExportArgs),
    /// Play a process's output in this terminal at the pace it was printed.
    Replay(export::ReplayArgs),
    /// Find lines by their words in every process's output and input, with
    /// the process, stream and time of each (exit 1 when none match).
    Grep(search::GrepArgs),
    /// This portal-cli's version and the running portald's; warns when
    /// they differ.
    Version {
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Print portal-cli's completion script for a shell: `source <(portal-cli
    /// completions bash)`, or save it where the shell loads completions.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Put the four binaries from beside this portal-cli on your PATH
    /// (PREFIX/bin), with man pages and bash, zsh and fish completions, and
    /// say how to load those and register portal-shim with MCP clients.
    Install {
        /// Where to install [default: ~/.local].
        #[arg(long)]
        prefix: Option<std::path::PathBuf>,
        /// Say what would be written, write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Register the installed portal-shim with Claude Code (user scope)
        /// and Codex, through their CLIs when they are on PATH; without it
        /// the commands are printed.
        #[arg(long)]
        register: bool,
    },
    /// Write the man pages of portal-cli (and each subcommand), portald and
    /// portal-shim into a directory (e.g. ~/.local/share/man/man1).
    Man {
        /// Where to write them.
        #[arg(long, default_value = ".")]
        dir: std::path::PathBuf,
    },
    /// Connect standard input and output to portald, starting it if needed:
    /// the remote end of `--host ssh://…` (clients run it over ssh).
    DialStdio {
        /// Who the client on the other end is (for the log's record of who
        /// typed what).
        #[arg(long = "as", value_name = "WHO")]
        serving: Option<String>,
    },
}

impl Command {
    /// The process the command names, for a `host:` prefix.
    fn proc_mut(&mut self) -> Option<&mut String> {
        match self {
            Command::Screen { proc, .. }
            | Command::Write { proc, .. }
            | Command::Secret { proc, .. }
            | Command::Signal { proc, .. }
            | Command::Kill { proc }
            | Command::Clear { proc }
            | Command::Rm { proc }
            | Command::Inspect { proc, .. }
            | Command::Attach { proc }
            | Command::SendKeys { proc, .. } => Some(proc),
            Command::Read(a) => Some(&mut a.proc),
            // A host prefix on the first process names the host of all.
            Command::Wait(a) => a.procs.first_mut(),
            Command::Run(a) => Some(&mut a.proc),
            Command::Export(a) => Some(&mut a.proc),
            Command::Replay(a) => Some(&mut a.proc),
            _ => None,
        }
    }
}

#[derive(Debug, Subcommand)]
enum ProgramsCommand {
    /// Look a program up.
    Query {
        /// Program name or path.
        program: String,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Record whether a program needs a PTY.
    Record {
        /// Program name or path.
        program: String,
        /// Whether it needs a PTY.
        #[arg(long, value_enum)]
        pty: YesNo,
        /// Notes (replace the stored ones).
        #[arg(long)]
        notes: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum YesNo {
    Yes,
    No,
}

#[derive(Debug, Subcommand)]
enum DaemonCommand {
    /// Version, pid, socket, database, process count, uptime.
    Status {
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Start portald if it is not running.
    Start,
    /// Stop portald and end every program it runs, with its whole process
    /// tree (SIGHUP or SIGTERM, then SIGKILL after the grace). To replace
    /// portald with a new version while every program keeps running, use
    /// `daemon upgrade`.
    Stop,
    /// Replace the running portald with the binary now on disk, keeping
    /// every program running: PTYs, pipes, screens, agent states, ids,
    /// offsets and read cursors carry over, and clients reconnect by
    /// themselves. The new binary is checked first; if it cannot take over,
    /// the running portald keeps serving and this says why.
    Upgrade {
        /// The new portald [default: the path the running one was started from]
        #[arg(long)]
        binary: Option<std::path::PathBuf>,
        #[command(flatten)]
        out: JsonFlag,
    },
    /// Check the database; when it is damaged, move it aside and salvage
    /// what can be read into a fresh one (stop portald first).
    Doctor,
}

/// A failure with its exit code.
pub(crate) enum Failure {
    /// The operation failed (exit 1).
    Failed(anyhow::Error),
    /// The daemon is unreachable (exit 3, or 4 to 7 for what went wrong
    /// reaching a remote host).
    Unreachable(ClientError),
    /// The daemon is not running and that was already said (exit 3).
    NotRunning,
    /// The condition was not reached; the output already says so (exit 1).
    Silent,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Failed(e) => write!(f, "{e:#}"),
            Self::Unreachable(e) => write!(f, "{e}"),
            Self::NotRunning => f.write_str("portald is not running"),
            Self::Silent => f.write_str("not reached"),
        }
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Self::Failed(e)
    }
}

impl From<tonic::Status> for Failure {
    fn from(s: tonic::Status) -> Self {
        if portal_client::error::is_disconnect(&s) {
            if let Some(Target::Remote(r)) = TARGET.get() {
                return Self::Failed(anyhow::anyhow!(
                    "lost the connection to host {} (ssh ended: {}); its programs keep running there: run the command again",
                    r.label,
                    s.message()
                ));
            }
            return Self::Failed(anyhow::anyhow!(
                "lost the connection to portald: {}",
                s.message()
            ));
        }
        match TARGET.get() {
            Some(Target::Remote(r)) => Self::Failed(anyhow::anyhow!(
                "{} (on host {})\nhint: {}",
                s.message(),
                r.label,
                hint(&s, &format!("--host {} ", r.label))
            )),
            _ => Self::Failed(anyhow::anyhow!("{}\nhint: {}", s.message(), hint(&s, ""))),
        }
    }
}

/// What to do about a refusal; `host` is the `--host NAME ` the commands
/// it names need.
fn hint(s: &tonic::Status, host: &str) -> String {
    match portal_proto::detail(s).kind() {
        // The refusal says why and what to do; the old daemon serves on.
        pb::ErrorKind::UpgradeRefused => {
            return "portald keeps serving, every program untouched".into();
        }
        pb::ErrorKind::Ended => {
            return format!(
                "the process has ended: `portal-cli {host}read` shows its output, `portal-cli {host}inspect` its exit"
            );
        }
        pb::ErrorKind::InputPilingUp => {
            return format!(
                "`portal-cli {host}ps` lists the programs; signal or kill those that do not read"
            );
        }
        pb::ErrorKind::ResultPending => {
            return format!("`portal-cli {host}wait` on the process once portald is back");
        }
        _ => {}
    }
    match s.code() {
        tonic::Code::NotFound => {
            let there = if host.is_empty() { "" } else { " there" };
            format!("`portal-cli {host}ps --all` lists the processes that exist{there}")
        }
        tonic::Code::InvalidArgument => "fix the argument the message names".into(),
        tonic::Code::AlreadyExists => format!(
            "pick another name, start with --replace if the process holding it ended, or end the running one (`portal-cli {host}kill`, then `rm`)"
        ),
        tonic::Code::FailedPrecondition => {
            format!("`portal-cli {host}inspect` shows the process's state")
        }
        _ => "portald refused".into(),
    }
}

/// The result of a command.
pub(crate) type Outcome = Result<(), Failure>;

/// Parses a process reference: digits are an id, anything else a name.
pub(crate) fn proc_ref(s: &str) -> Option<pb::ProcRef> {
    let target = match s.parse::<u64>() {
        Ok(id) => pb::proc_ref::Target::Id(id),
        Err(_) => pb::proc_ref::Target::Name(s.to_owned()),
    };
    Some(pb::ProcRef { target: Some(target) })
}

/// `--no-autostart` as given, for commands that connect again later (a
/// follow or an attachment reconnecting after the daemon went away).
pub(crate) static NO_AUTOSTART: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The portald every connection of this run goes to, for commands that
/// connect again later.
pub(crate) static TARGET: std::sync::OnceLock<Target> = std::sync::OnceLock::new();

/// Connects to [`TARGET`] (this machine when unset), starting portald when
/// nothing answers unless `--no-autostart` was given.
pub(crate) async fn connect_target() -> Result<Client, ClientError> {
    let mut opts = LaunchOptions::from_env();
    opts.autostart = !NO_AUTOSTART.load(std::sync::atomic::Ordering::Relaxed);
    Client::connect_to(TARGET.get().unwrap_or(&Target::Local), &opts).await
}

/// This command, for the log's record of who typed what: `portal-cli
/// write (ada@laptop)`.
fn who_am_i(command: &str) -> String {
    // The uid only for a user with no name at all (a container's uid
    // without a passwd entry).
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(user::name)
        .unwrap_or_else(|| format!("uid {}", user::current()));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::env::var("COMPUTERNAME"))
        .unwrap_or_default();
    format!("portal-cli {command} ({user}@{})", host.trim())
}

impl Command {
    /// The name a person typed, for the log.
    fn name(&self) -> &'static str {
        match self {
            Command::Write { .. } => "write",
            Command::Secret { .. } => "secret",
            Command::Run(_) => "run",
            Command::SendKeys { .. } => "send-keys",
            Command::Attach { .. } => "attach",
            Command::Dash(_) => "dash",
            Command::Up(_) => "up",
            Command::Agents(_) => "agents",
            Command::Start(_) => "start",
            Command::Demo => "demo",
            _ => "command",
        }
    }
}

/// Which portald the command talks to: the host before a process's
/// `host:` prefix (which is taken off, and wins: it names that process's
/// host), else `--host`/`PORTAL_HOST`, else this machine.
fn choose_target(host: Option<&str>, command: &mut Command) -> Result<Target, Failure> {
    // A broken hosts file matters only to a command that names a host.
    let loaded = Hosts::load();
    let prefixed = match (&loaded, command.proc_mut()) {
        (Ok(hosts), Some(proc)) => match hosts.split_proc(proc) {
            (Some(h), rest) => {
                let h = h.to_owned();
                *proc = rest.to_owned();
                Some(h)
            }
            // Names hold no ':' (the daemon refuses them): `x:7` with an
            // unknown `x` is a host name mistyped or missing from the file.
            (None, p) if p.contains(':') => {
                let host = p.split(':').next().unwrap_or_default();
                return Err(Failure::Failed(hosts.resolve(host).err().map_or_else(
                    || anyhow::anyhow!("{p:?} names no process"),
                    anyhow::Error::from,
                )));
            }
            (None, _) => None,
        },
        // `HOST:ID` cannot be told from a name while the file is broken.
        (Err(e), Some(proc)) if proc.contains(':') => {
            return Err(anyhow::anyhow!("{e}").into());
        }
        _ => None,
    };
    let spec = match (prefixed, host) {
        (Some(p), _) => p,
        (None, Some(h)) => h.to_owned(),
        (None, None) => return Ok(Target::Local),
    };
    if spec.is_empty() || spec == hosts::LOCAL {
        return Ok(Target::Local);
    }
    let hosts = loaded.map_err(|e| Failure::Failed(e.into()))?;
    hosts.resolve(&spec).map_err(|e| Failure::Failed(e.into()))
}

async fn run(mut cli: Cli) -> Outcome {
    NO_AUTOSTART.store(cli.no_autostart, std::sync::atomic::Ordering::Relaxed);
    // The log records the input this command writes as typed by it (by
    // whom it serves, for the remote end of a connection).
    match &cli.command {
        Command::DialStdio { serving: Some(who), .. } => {
            portal_client::identity::set_identity(who.clone())
        }
        command => portal_client::identity::set_identity(who_am_i(command.name())),
    }
    // The plumbing of this machine's own daemon (what hooks and remote
    // clients run) never goes elsewhere, whatever PORTAL_HOST a login
    // environment sets.
    let plumbing = matches!(cli.command, Command::Emit(_) | Command::DialStdio { .. });
    let host = if plumbing { None } else { cli.host.as_deref() };
    let target = choose_target(host, &mut cli.command)?;
    if !target.is_local() {
        let here_only = match &cli.command {
            Command::Service(_) => Some("service"),
            Command::Install { .. } => Some("install"),
            Command::Hooks(_) => Some("hooks"),
            Command::Daemon(DaemonCommand::Stop) => Some("daemon stop"),
            Command::Daemon(DaemonCommand::Upgrade { .. }) => Some("daemon upgrade"),
            Command::Daemon(DaemonCommand::Doctor) => Some("daemon doctor"),
            _ => None,
        };
        if let Some(cmd) = here_only {
            let Target::Remote(r) = &target else { unreachable!("checked above") };
            return Err(anyhow::anyhow!(
                "`{cmd}` works on this machine only (the host comes from --host or PORTAL_HOST); run it on {} itself: {} {}",
                r.label,
                r.ssh_command(),
                // Quoted twice: once for this shell, once for the remote
                // shell that ssh hands the command line to.
                portal_client::hosts::shell_quote(&format!(
                    "{} {}",
                    portal_client::hosts::shell_quote(&r.portal),
                    this_command_here()
                ))
            )
            .into());
        }
    }
    let _ = TARGET.set(target);
    match cli.command {
        Command::Service(cmd) => return service::run(cmd).map_err(Failure::Failed),
        Command::Completions { shell } => return complete::completions(shell),
        Command::Man { dir } => return docs::man(&dir),
        Command::Install { prefix, dry_run, register } => {
            let register =
                if register { register::Register::Perform } else { register::Register::Print };
            return install::install(prefix, dry_run, register).await;
        }
        Command::Version { out } if TARGET.get().is_some_and(Target::is_local) => {
            return daemonctl::version(out).await;
        }
        Command::Daemon(DaemonCommand::Status { out })
            if TARGET.get().is_some_and(Target::is_local) =>
        {
            return daemonctl::status(out).await;
        }
        // Status looks; it never starts a daemon, there either.
        Command::Daemon(DaemonCommand::Status { .. }) => {
            NO_AUTOSTART.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Command::Daemon(DaemonCommand::Stop) => return daemonctl::stop().await,
        Command::Daemon(DaemonCommand::Upgrade { binary, out }) => {
            return daemonctl::upgrade(binary, out).await;
        }
        Command::Daemon(DaemonCommand::Doctor) => return daemonctl::doctor(),
        Command::Emit(args) => return agents::emit(args).await,
        Command::DialStdio { .. } => {
            let mut opts = LaunchOptions::from_env();
            opts.autostart = !cli.no_autostart;
            return portal_client::dial::serve_stdio(&opts).await.map_err(Failure::Unreachable);
        }
        Command::Ps { all, out, all_hosts: true } => return procs::ps_every_host(all, out).await,
        // A status bar asks every few seconds: it never starts a daemon.
        Command::Agents(args) if args.statusline().is_some() => {
            return match args.statusline() {
                Some(s) => agents::statusline(s).await,
                None => Ok(()),
            };
        }
        _ => {}
    }
    let client = connect_target().await.map_err(Failure::Unreachable)?;
    match cli.command {
        Command::Ps { all, out, .. } => procs::ps(&client, all, out).await,
        Command::Start(args) => procs::start(&client, args).await,
        Command::Read(args) => output::read(&client, args).await,
        Command::Screen { proc, watch, size, out } => {
            output::screen(&client, &proc, watch, size, out).await
        }
        Command::Write { proc, text, enter, stdin } => {
            procs::write(&client, &proc, text, enter, stdin).await
        }
        Command::Signal { proc, signal } => procs::signal(&client, &proc, signal).await,
        Command::Secret { proc, anyway } => procs::secret(&client, &proc, anyway).await,
        Command::Kill { proc } => procs::kill(&client, &proc).await,
        Command::KillAll => procs::kill_all(&client).await,
        Command::Clear { proc } => procs::clear(&client, &proc).await,
        Command::Rm { proc } => procs::rm(&client, &proc).await,
        Command::Inspect { proc, out } => procs::inspect(&client, &proc, out).await,
        Command::Attach { proc } => attach::attach(&client, &proc).await,
        Command::Dash(args) => dash::dash(&client, args).await,
        Command::Up(args) => workspace::up(&client, args).await,
        Command::Down(args) => workspace::down(&client, args).await,
        Command::Status(args) => workspace::status(&client, args).await,
        Command::Wait(args) => waits::wait(&client, args).await,
        Command::Agents(args) => agents::agents(&client, args).await,
        Command::Hooks(cmd) => agents::hooks(&client, cmd).await,
        Command::Run(args) => waits::run(&client, args).await,
        Command::SendKeys { proc, keys } => waits::send_keys(&client, &proc, keys).await,
        Command::Programs(ProgramsCommand::Query { program, out }) => {
            procs::program_query(&client, program, out).await
        }
        Command::Programs(ProgramsCommand::Record { program, pty, notes }) => {
            procs::program_record(&client, program, matches!(pty, YesNo::Yes), notes).await
        }
        Command::Daemon(DaemonCommand::Start | DaemonCommand::Status { .. }) => {
            daemonctl::started(&client)
        }
        Command::Demo => procs::demo(&client).await,
        Command::Export(args) => export::export(&client, args).await,
        Command::Replay(args) => export::replay(&client, args).await,
        Command::Grep(args) => search::grep(&client, args).await,
        Command::Version { out } => daemonctl::version_there(&client, out),
        Command::Service(_)
        | Command::Daemon(_)
        | Command::Emit(_)
        | Command::DialStdio { .. }
        | Command::Completions { .. }
        | Command::Install { .. }
        | Command::Man { .. } => Ok(()),
    }
}

/// This command's arguments without `--host`, quoted for a shell: what to
/// run on the host itself.
fn this_command_here() -> String {
    let mut words = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--host" {
            args.next();
        } else if !a.starts_with("--host=") {
            words.push(portal_client::hosts::shell_quote(&a));
        }
    }
    words.join(" ")
}

/// The exit code of a connection failure (see the module docs).
fn exit_code(e: &ClientError) -> u8 {
    match e {
        ClientError::HostUnreachable { .. } => 4,
        ClientError::AuthRefused { .. } => 5,
        ClientError::RemoteMissing { .. } => 6,
        ClientError::VersionSkew { .. } => 7,
        _ => 3,
    }
}

fn main() -> ExitCode {
    // A Tab in a shell runs portal-cli with PORTAL_COMPLETE set: answered
    // here, before anything else is printed.
    complete::answer_if_asked();
    let cli = Cli::parse();
    // Every connection and every daemon this command starts uses them.
    if let Some(socket) = cli.socket.clone().filter(|p| !p.as_os_str().is_empty()) {
        paths::set_socket(socket);
    }
    if let Some(dir) = cli.data_dir.clone().filter(|p| !p.as_os_str().is_empty()) {
        paths::set_data_dir(dir);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let no_autostart = cli.no_autostart;
    let code = match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Failed(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
        Err(Failure::NotRunning) => ExitCode::from(3),
        Err(Failure::Silent) => ExitCode::FAILURE,
        Err(Failure::Unreachable(e)) => {
            eprintln!("error: {e}");
            let code = exit_code(&e);
            if matches!(e, ClientError::Unavailable { .. }) {
                eprintln!(
                    "hint: {}",
                    if no_autostart {
                        "start it with `portal-cli daemon start`"
                    } else {
                        "see the daemon log in the data directory"
                    }
                );
            }
            ExitCode::from(code)
        }
    };
    // Do not wait for a blocking stdin read (attach, write --stdin) to return.
    runtime.shutdown_background();
    code
}
