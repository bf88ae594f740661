//! Commands that manage processes: ps, start, write, signal, kill, kill-all,
//! clear, rm, inspect, the program registry, and the demo.

use std::io::Read as _;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use clap::Args;
use portal_client::client::Client;
use portal_client::vocab;
use portal_proto::v1 as pb;
use serde_json::json;

use crate::Failure;
use crate::fmt::{self, print_json};
use crate::{JsonFlag, Outcome, proc_ref};

/// Arguments of `start`.
#[derive(Debug, Args)]
pub(crate) struct StartArgs {
    /// Run on a pseudo-terminal (for anything interactive).
    #[arg(long)]
    pty: bool,
    /// A unique name to refer to it by.
    #[arg(long)]
    name: Option<String>,
    /// Working directory [default: the current one].
    #[arg(long)]
    cwd: Option<std::path::PathBuf>,
    /// Environment variable to set (repeatable), over the environment
    /// --env-from names.
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// Where the program's environment starts: caller (this command's own,
    /// so it runs in your world: your PATH, venv, credentials), daemon
    /// (portald's), or clean (only --env and a default PATH) [default:
    /// caller; daemon with --host, which never gets this machine's]
    #[arg(long, value_name = "caller|daemon|clean")]
    env_from: Option<portal_client::environ::EnvFrom>,
    /// Idle timeout: kill it when nobody has named it for this long (500ms, 30s, 5m).
    #[arg(long, value_parser = fmt::parse_duration)]
    timeout: Option<Duration>,
    /// Terminal size, rows x columns (with --pty) [default: 24x80].
    #[arg(long, value_parser = fmt::parse_size)]
    size: Option<pb::TermSize>,
    /// Start it again when it fails (exits non-zero or dies of a signal;
    /// not when killed through Portal), at most this many times; needs
    /// --name (each run takes the name over).
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "5")]
    restart_on_failure: Option<u32>,
    /// Take the name over from an ended process of that name (its record
    /// and log stay, under its id).
    #[arg(long)]
    replace: bool,
    /// Then wait, from its first byte: `input` (until it waits for input),
    /// `exit` (a one-shot command: print its output, exit with its status),
    /// or a text to wait for.
    #[arg(long, value_name = "input|exit|TEXT")]
    wait: Option<String>,
    /// Timeout of --wait [default: 30s].
    #[arg(long, value_parser = fmt::parse_duration, requires = "wait")]
    wait_timeout: Option<Duration>,
    #[command(flatten)]
    out: JsonFlag,
    /// The program and its arguments, after `--`.
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<String>,
}

/// `ps`.
pub(crate) async fn ps(client: &Client, all: bool, out: JsonFlag) -> Outcome {
    let list = client.rpc().list(pb::ListRequest {}).await?.into_inner();
    // Another host's processes are shown with it.
    let rows: Vec<(Option<&str>, &pb::Process)> =
        list.processes.iter().map(|p| (client.host(), p)).collect();
    print_ps(&rows, all, out);
    Ok(())
}

/// `ps --all-hosts`: this machine and every host of the hosts file, one
/// connection each, in turn. A host that cannot be reached is said on
/// stderr (exit 1) and the others are still listed.
pub(crate) async fn ps_every_host(all: bool, out: JsonFlag) -> Outcome {
    let hosts = portal_client::hosts::Hosts::load().map_err(anyhow::Error::from)?;
    let mut opts = portal_client::launch::LaunchOptions::from_env();
    opts.autostart = !crate::NO_AUTOSTART.load(std::sync::atomic::Ordering::Relaxed);
    let targets: Vec<portal_client::hosts::Target> =
        std::iter::once(portal_client::hosts::Target::Local)
            .chain(hosts.remotes().cloned().map(portal_client::hosts::Target::Remote))
            .collect();
    // All at once: a host that is down costs its timeout once, not in turn.
    let lists = futures::future::join_all(targets.iter().map(|target| {
        let opts = opts.clone();
        async move {
            match Client::connect_to(target, &opts).await {
                Ok(c) => c
                    .rpc()
                    .list(pb::ListRequest {})
                    .await
                    .map(|l| (target.label().to_owned(), l.into_inner().processes))
                    .map_err(|s| format!("host {}: {}", target.label(), s.message())),
                // Every connection error names its host already.
                Err(e) => Err(e.to_string()),
            }
        }
    }))
    .await;
    let mut listed = Vec::new();
    let mut failed = false;
    for list in lists {
        match list {
            Ok(l) => listed.push(l),
            Err(e) => {
                eprintln!("{e}");
                failed = true;
            }
        }
    }
    let rows: Vec<(Option<&str>, &pb::Process)> = listed
        .iter()
        .flat_map(|(host, procs)| procs.iter().map(move |p| (Some(host.as_str()), p)))
        .collect();
    print_ps(&rows, all, out);
    if failed { Err(Failure::Silent) } else { Ok(()) }
}

/// Prints `ps` rows, each with its host when it has one.
fn print_ps(rows: &[(Option<&str>, &pb::Process)], all: bool, out: JsonFlag) {
    let shown: Vec<&(Option<&str>, &pb::Process)> =
        rows.iter().filter(|(_, p)| all || p.status() == pb::Status::Running).collect();
    if out.json {
        print_json(&json!(
            shown
                .iter()
                .map(|(host, p)| {
                    let mut j = fmt::process_json(p);
                    if let (Some(h), Some(obj)) = (host, j.as_object_mut()) {
                        obj.insert("host".into(), json!(h));
                    }
                    j
                })
                .collect::<Vec<_>>()
        ));
        return;
    }
    if shown.is_empty() {
        let hidden = rows.len();
        if hidden > 0 && !all {
            outln!("No running processes ({hidden} ended; --all shows them).");
        } else {
            outln!("No managed processes.");
        }
        return;
    }
    let with_hosts = rows.iter().any(|(h, _)| h.is_some());
    let host_cell = |h: Option<&str>| {
        if with_hosts {
            format!("{:<12} ", h.unwrap_or("-").chars().take(12).collect::<String>())
        } else {
            String::new()
        }
    };
    // Fixed, hand-padded columns, not a table crate: the rows print one per
    // line with no borders (what `ps | awk` expects), and comfy-table's width
    // detection alone would bring crossterm in.
    // On a terminal the command column takes what the others leave, so a
    // row never wraps; piped, it keeps a fixed width.
    let before_command = host_cell(None).chars().count() + PS_FIXED_COLUMNS;
    let command_width = fmt::terminal_columns()
        .map_or(PS_PIPED_COMMAND, |cols| cols.saturating_sub(before_command).max(PS_MIN_COMMAND));
    outln!(
        "{}{:>4}  {:<12} {:>7}  {:<5}  {:<9}  {:<15}  {:<7}  {:>5}  {:>7}  COMMAND",
        host_cell(Some("HOST")),
        "ID",
        "NAME",
        "PID",
        "MODE",
        "STATUS",
        "STATE",
        "EXIT",
        "IDLE",
        "BYTES"
    );
    for (host, p) in shown {
        let name =
            if p.name.is_empty() { "-".to_owned() } else { p.name.chars().take(12).collect() };
        let mode = if p.mode() == pb::Mode::Pty { "pty" } else { "pipes" };
        // A heuristic state is a guess: marked with `?`.
        let mut state = vocab::InputState::from(p.input_state()).as_str().to_owned();
        if p.input_source() == pb::InputSource::Heuristic {
            state.push('?');
        }
        outln!(
            "{}{:>4}  {:<12} {:>7}  {:<5}  {}  {:<15}  {:<7}  {:>5}  {:>7}  {}",
            host_cell(*host),
            p.id,
            name,
            p.pid,
            mode,
            fmt::status_cell(p, 9),
            state,
            fmt::exit_text(p),
            fmt::short_duration(p.idle_ms),
            fmt::short_bytes(fmt::output_bytes(p)),
            fmt::command_line(p, command_width)
        );
    }
}

/// Characters of a `ps` row before the command (without a host column).
const PS_FIXED_COLUMNS: usize =
    4 + 2 + 12 + 1 + 7 + 2 + 5 + 2 + 9 + 2 + 15 + 2 + 7 + 2 + 5 + 2 + 7 + 2;

/// The command column when stdout is not a terminal.
const PS_PIPED_COMMAND: usize = 60;

/// The command column is never narrower than this (a terminal narrower
/// than the other columns wraps anyway).
const PS_MIN_COMMAND: usize = 12;

/// A start refused because `name` is taken, with the next step for the
/// process that holds it: running, it must end first; ended, `--replace`
/// takes the name over (or `rm` frees it).
async fn name_taken(client: &Client, name: &str, refused: &tonic::Status) -> Failure {
    let host = client.host().map(|h| format!("--host {h} ")).unwrap_or_default();
    let holder = client
        .rpc()
        .inspect(pb::InspectRequest { proc: proc_ref(name) })
        .await
        .map(tonic::Response::into_inner);
    let hint = match holder {
        Ok(p) if p.status() == pb::Status::Running => format!(
            "process {id} holds the name {name:?} and is running: pick another --name, or end it \
             (`portal-cli {host}kill {id}`), then start again with --replace (or `portal-cli {host}rm {id}` first)",
            id = p.id
        ),
        Ok(p) => format!(
            "process {id} held the name {name:?} and has ended ({status}): start again with \
             --replace to take the name over (its log stays), pick another --name, or \
             `portal-cli {host}rm {id}` to forget it",
            id = p.id,
            status = fmt::exit_text(&p)
        ),
        // Started or forgotten in between: the generic next steps.
        Err(_) => "pick another --name, start with --replace if the process holding it \
                   ended, or kill (and rm) the one that runs"
            .to_owned(),
    };
    anyhow::anyhow!("{}\nhint: {hint}", refused.message()).into()
}

/// `start`.
pub(crate) async fn start(client: &Client, a: StartArgs) -> Outcome {
    let (command, args) = a.command.split_first().context("no command given after --")?;
    let mut env = std::collections::HashMap::new();
    for kv in &a.env {
        let (k, v) =
            kv.split_once('=').with_context(|| format!("--env {kv:?} is not KEY=VALUE"))?;
        env.insert(k.to_owned(), v.to_owned());
    }
    if a.size.is_some() && !a.pty {
        return Err(anyhow::anyhow!("--size applies only with --pty").into());
    }
    let cwd = match (a.cwd, client.host()) {
        // This machine's directories mean nothing on another: the remote
        // daemon takes the path as given (absolute), or the user's home.
        (Some(dir), Some(host)) if !dir.is_absolute() => {
            return Err(anyhow::anyhow!(
                "--cwd {} is relative; give an absolute directory on host {host}",
                dir.display()
            )
            .into());
        }
        (Some(dir), Some(_)) => dir,
        (None, Some(_)) => std::path::PathBuf::new(),
        (Some(dir), None) => {
            std::path::absolute(&dir).with_context(|| format!("resolving {}", dir.display()))?
        }
        (None, None) => std::env::current_dir().context("reading the current directory")?,
    };
    let remote = client.host().is_some();
    let env_from = a.env_from.unwrap_or(if remote {
        portal_client::environ::EnvFrom::Daemon
    } else {
        portal_client::environ::EnvFrom::Caller
    });
    let mut req = pb::StartRequest {
        command: command.clone(),
        args: args.to_vec(),
        cwd: cwd.to_string_lossy().into_owned(),
        env,
        name: a.name.unwrap_or_default(),
        timeout_ms: a.timeout.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        mode: if a.pty { pb::Mode::Pty } else { pb::Mode::Pipes }.into(),
        size: a.size,
        restart: a.restart_on_failure.map(|max_restarts| pb::RestartPolicy {
            on_failure: true,
            max_restarts,
            backoff_ms: 0,
        }),
        replace_ended: a.replace,
        ..Default::default()
    };
    portal_client::environ::apply(&mut req, env_from, remote)
        .map_err(|e| anyhow::anyhow!("--env-from caller: {e}"))?;
    if a.wait.as_deref() == Some("") {
        return Err(anyhow::anyhow!("--wait is empty: give input, exit or a text").into());
    }
    let name = req.name.clone();
    let p = match client.rpc().start(req).await {
        Ok(p) => p.into_inner(),
        Err(s) if s.code() == tonic::Code::AlreadyExists && !name.is_empty() => {
            return Err(name_taken(client, &name, &s).await);
        }
        Err(s) => return Err(s.into()),
    };
    let started = format!("started {} (pid {}): {}", p.id, p.pid, fmt::command_line(&p, 80));
    match (a.out.json, &a.wait) {
        (true, None) => print_json(&fmt::process_json(&p)),
        (false, None) => outln!("{started}"),
        // The wait's output goes to stdout: keep it clean.
        (_, Some(_)) => eprintln!("{started}"),
    }
    let Some(wait) = a.wait else { return Ok(()) };
    let mut until = pb::WaitCondition {
        timeout_ms: a.wait_timeout.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        ..pb::WaitCondition::default()
    };
    match wait.as_str() {
        "input" => until.input = Some(true),
        "exit" => until.input = Some(false),
        text => until.needle = text.to_owned(),
    }
    // Nobody has read the new process: a wait without a cursor starts at
    // its first byte.
    let req = pb::WaitRequest {
        proc: proc_ref(&p.id.to_string()),
        until: Some(until),
        ..Default::default()
    };
    let r = client.rpc().wait(req).await?.into_inner();
    let wanted_match = !matches!(wait.as_str(), "input" | "exit");
    let outcome = crate::waits::report(&r, a.out, wanted_match);
    if wait == "exit" && r.reason() == pb::WaitReason::Exited && r.exit_code != Some(0) {
        return Err(crate::Failure::Silent);
    }
    outcome
}

async fn inspect_proc(client: &Client, proc: &str) -> Result<pb::Process, tonic::Status> {
    Ok(client.rpc().inspect(pb::InspectRequest { proc: proc_ref(proc) }).await?.into_inner())
}

/// `write`.
pub(crate) async fn write(
    client: &Client,
    proc: &str,
    text: Option<String>,
    enter: bool,
    stdin: bool,
) -> Outcome {
    let mut data = if stdin {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf).context("reading standard input")?;
        buf
    } else {
        text.unwrap_or_default().into_bytes()
    };
    if enter {
        let p = inspect_proc(client, proc).await?;
        data.push(if p.mode() == pb::Mode::Pty { b'\r' } else { b'\n' });
    }
    if data.is_empty() {
        return Err(anyhow::anyhow!("nothing to write: give TEXT, --enter or --stdin").into());
    }
    let n = data.len();
    client
        .rpc()
        .write(pb::WriteRequest { proc: proc_ref(proc), data: Bytes::from(data), secret: false })
        .await?;
    eprintln!("wrote {n} bytes");
    Ok(())
}

/// `secret`: a person types a secret (password, passphrase) straight into
/// a program: read here with echo off, sent once with Enter, logged by
/// portald as its length only, never seen by an agent.
pub(crate) async fn secret(client: &Client, proc: &str, anyway: bool) -> Outcome {
    let p = inspect_proc(client, proc).await?;
    if !p.awaiting_secret {
        // Only a PTY reading a line with echo off keeps a secret out of the
        // output: anything else prints it back, into the log.
        let why = if p.mode() == pb::Mode::Pty {
            "its terminal echoes what is typed"
        } else {
            "it reads from a pipe, which cannot turn echo off"
        };
        if !anyway {
            return Err(anyhow::anyhow!(
                "process {} does not wait for a secret ({why}): the secret would be printed back and kept in its log. Wait for its password prompt, or pass --anyway",
                p.id
            )
            .into());
        }
        eprintln!(
            "warning: process {} does not wait for a secret ({why}); the echo will be in its log",
            p.id
        );
    }
    let line = read_secret_line(&format!(
        "secret for process {}{} ({}): ",
        p.id,
        client.host().map(|h| format!(" on host {h}")).unwrap_or_default(),
        fmt::command_line(&p, 40)
    ))
    .context("reading the secret")?;
    let enter = if p.mode() == pb::Mode::Pty { "\r" } else { "\n" };
    let data = Bytes::from(format!("{line}{enter}"));
    let n = line.chars().count();
    client.rpc().write(pb::WriteRequest { proc: proc_ref(proc), data, secret: true }).await?;
    eprintln!("sent {n} characters to process {}; the log keeps only their length", p.id);
    Ok(())
}

/// Reads one line from the terminal without echo (from stdin, when it is
/// not a terminal, for scripts).
fn read_secret_line(prompt: &str) -> anyhow::Result<String> {
    use rustix::termios::{self, LocalModes, OptionalActions};
    use std::io::{BufRead as _, IsTerminal as _, Write as _};
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        return Ok(line.trim_end_matches(['\n', '\r']).to_owned());
    }
    eprint!("{prompt}");
    std::io::stderr().flush()?;
    let fd = rustix::stdio::stdin();
    let saved = termios::tcgetattr(fd)?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    termios::tcsetattr(fd, OptionalActions::Flush, &quiet)?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    termios::tcsetattr(fd, OptionalActions::Flush, &saved)?;
    eprintln!();
    read?;
    Ok(line.trim_end_matches(['\n', '\r']).to_owned())
}

/// `signal`.
pub(crate) async fn signal(client: &Client, proc: &str, signal: String) -> Outcome {
    let r =
        client.rpc().signal(pb::SignalRequest { proc: proc_ref(proc), signal }).await?.into_inner();
    outln!("sent {} ({}) to {proc}", r.name, r.signal);
    Ok(())
}

/// `kill`.
pub(crate) async fn kill(client: &Client, proc: &str) -> Outcome {
    let p = client.rpc().kill(pb::KillRequest { proc: proc_ref(proc) }).await?.into_inner();
    if p.status() == pb::Status::Killed {
        outln!("killed {} ({})", p.id, fmt::exit_text(&p));
    } else {
        outln!(
            "{} had already ended ({}, {})",
            p.id,
            vocab::Status::from(p.status()).as_str(),
            fmt::exit_text(&p)
        );
    }
    Ok(())
}

/// `kill-all`.
pub(crate) async fn kill_all(client: &Client) -> Outcome {
    let r = client.rpc().kill_all(pb::KillAllRequest {}).await?.into_inner();
    outln!(
        "killed {} process(es){}",
        r.killed.len(),
        if r.killed.is_empty() { String::new() } else { format!(": {:?}", r.killed) }
    );
    Ok(())
}

/// `clear`.
pub(crate) async fn clear(client: &Client, proc: &str) -> Outcome {
    client.rpc().clear(pb::ClearRequest { proc: proc_ref(proc) }).await?;
    outln!("cleared the output of {proc}");
    Ok(())
}

/// `rm`.
pub(crate) async fn rm(client: &Client, proc: &str) -> Outcome {
    let r = client.rpc().cleanup(pb::CleanupRequest { proc: proc_ref(proc) }).await?.into_inner();
    outln!("removed {}", r.id);
    Ok(())
}

/// `inspect`.
pub(crate) async fn inspect(client: &Client, proc: &str, out: JsonFlag) -> Outcome {
    let p = inspect_proc(client, proc).await?;
    let typed = typed_by(client, p.id).await?;
    if out.json {
        let mut j = fmt::process_json(&p);
        if let (Some(h), Some(o)) = (client.host(), j.as_object_mut()) {
            o.insert("host".into(), json!(h));
        }
        j["typed_by"] =
            json!(typed.iter().map(|(who, n)| json!({"who": who, "bytes": n})).collect::<Vec<_>>());
        print_json(&j);
        return Ok(());
    }
    outln!(
        "process {}{}{}",
        p.id,
        if p.name.is_empty() { String::new() } else { format!(" ({})", p.name) },
        client.host().map(|h| format!(" on host {h}")).unwrap_or_default()
    );
    outln!("  status   {} {}", fmt::status_cell(&p, 0), fmt::exit_text(&p));
    outln!("  pid      {}", p.pid);
    match p.size {
        Some(s) => outln!("  mode     pty {}x{}", s.rows, s.cols),
        None => outln!("  mode     pipes"),
    }
    outln!("  command  {}", fmt::command_line(&p, usize::MAX));
    outln!("  cwd      {}", p.cwd);
    if !typed.is_empty() {
        let who: Vec<String> =
            typed.iter().map(|(w, n)| format!("{w} ({})", fmt::short_bytes(*n))).collect();
        outln!("  typed by {}", who.join(", "));
    }
    for (k, v) in &p.env {
        outln!("  env      {k}={v}");
    }
    if p.timeout_ms > 0 {
        outln!("  timeout  {}", fmt::short_duration(p.timeout_ms));
    }
    outln!("  idle     {}", fmt::short_duration(p.idle_ms));
    if let Some(r) = p.restart {
        outln!(
            "  restart  on failure, at most {} times ({} so far{})",
            r.max_restarts,
            p.restarts,
            if p.restart_of > 0 {
                format!("; this run restarted {}", p.restart_of)
            } else {
                String::new()
            }
        );
    }
    if p.replaced_by > 0 {
        outln!("  replaced by {} (it has the name now)", p.replaced_by);
    }
    for s in &p.streams {
        let name = match s.stream() {
            pb::Stream::Stdin => "stdin",
            pb::Stream::Stderr => "stderr",
            _ => "stdout",
        };
        let kept = if s.start_offset > 0 {
            format!(", history from byte {}", s.start_offset)
        } else {
            String::new()
        };
        let lost = if s.lost_bytes > 0 {
            format!(", {} bytes lost (reads mark where)", s.lost_bytes)
        } else {
            String::new()
        };
        outln!("  {name:<8} {} bytes in {} chunks{kept}{lost}", s.end_offset, s.chunks);
    }
    Ok(())
}

/// How much input the newest stretch of the log holds from whom (at most
/// [`TYPED_BY_BYTES`] of it), most first.
async fn typed_by(client: &Client, id: u64) -> Result<Vec<(String, u64)>, Failure> {
    let req = pb::ReadRequest {
        proc: Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) }),
        streams: vec![pb::Stream::Stdin.into()],
        from: Some(pb::read_request::From::Tail(true)),
        max_bytes: TYPED_BY_BYTES,
        encoding: pb::Encoding::Raw.into(),
        ..Default::default()
    };
    let resp = client.rpc().read(req).await?.into_inner();
    let mut tally: Vec<(String, u64)> = Vec::new();
    for r in &resp.records {
        let who = if r.origin.is_empty() { "unknown".to_owned() } else { r.origin.clone() };
        match tally.iter_mut().find(|(w, _)| *w == who) {
            Some((_, n)) => *n += r.length,
            None => tally.push((who, r.length)),
        }
    }
    tally.sort_by_key(|t| std::cmp::Reverse(t.1));
    Ok(tally)
}

/// How much of the newest input `inspect` looks at for who typed it: a
/// summary, not an audit (`read --stream stdin --who` has it all).
const TYPED_BY_BYTES: u64 = 64 << 10;

/// `programs query`.
pub(crate) async fn program_query(client: &Client, program: String, out: JsonFlag) -> Outcome {
    let p = client.rpc().program_query(pb::ProgramQueryRequest { program }).await?.into_inner();
    if out.json {
        print_json(
            &json!({"program": p.program, "known": p.known, "needs_pty": p.known.then_some(p.needs_pty), "notes": p.known.then_some(&p.notes), "confirmed_count": p.known.then_some(p.confirmed_count), "builtin": p.builtin}),
        );
    } else if p.known {
        let notes = if p.notes.is_empty() { String::new() } else { format!(" — {}", p.notes) };
        let how = if p.builtin {
            "built-in profile".to_owned()
        } else {
            format!("confirmed x{}", p.confirmed_count)
        };
        outln!(
            "{}: needs a PTY: {}, {how}{notes}",
            p.program,
            if p.needs_pty { "yes" } else { "no" }
        );
    } else {
        outln!("{}: not in the registry", p.program);
    }
    Ok(())
}

/// `programs record`.
pub(crate) async fn program_record(
    client: &Client,
    program: String,
    needs_pty: bool,
    notes: Option<String>,
) -> Outcome {
    let p = client
        .rpc()
        .program_record(pb::ProgramRecordRequest { program, needs_pty, notes })
        .await?
        .into_inner();
    outln!(
        "recorded {}: needs a PTY: {} (confirmed x{})",
        p.program,
        if p.needs_pty { "yes" } else { "no" },
        p.confirmed_count
    );
    Ok(())
}

/// How long the demo waits for each step (generous: a cold machine).
const DEMO_STEP: Duration = Duration::from_secs(20);

/// Follows a process's output until `needle` has appeared.
async fn wait_for(client: &Client, id: u64, needle: &str) -> anyhow::Result<()> {
    let mut rpc = client.rpc();
    let req = pb::FollowRequest {
        proc: crate::proc_ref(&id.to_string()),
        from_start: true,
        ..Default::default()
    };
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
        Ok(Ok(true)) => Ok(()),
        Ok(Ok(false)) => anyhow::bail!("process {id} ended before printing {needle:?}"),
        Ok(Err(status)) => Err(status.into()),
        Err(_) => anyhow::bail!("process {id} did not print {needle:?} within {DEMO_STEP:?}"),
    }
}

/// `demo`.
pub(crate) async fn demo(client: &Client) -> Outcome {
    let mut rpc = client.rpc();
    let info = client.info();
    outln!("portald {} (pid {}) on {}", info.daemon_version, info.pid, info.socket);
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
    outln!("started python3 on a PTY: id {} pid {}", p.id, p.pid);
    let by_id = || crate::proc_ref(&p.id.to_string());
    let result = async {
        wait_for(client, p.id, ">>> ").await?;
        outln!("typing: print(6*7)");
        let data = Bytes::from_static(b"print(6*7)\r");
        rpc.write(pb::WriteRequest { proc: by_id(), data, secret: false }).await?;
        wait_for(client, p.id, "42\r\n>>> ").await?;
        let screen =
            rpc.screen(pb::ScreenRequest { proc: by_id(), resize: None }).await?.into_inner();
        outln!("its screen:");
        outln!("  ┌{}┐", "─".repeat(60));
        for line in &screen.lines {
            outln!("  │{line:<60}│");
        }
        outln!("  └{}┘", "─".repeat(60));
        let log =
            rpc.read(pb::ReadRequest { proc: by_id(), ..Default::default() }).await?.into_inner();
        let bytes: usize = log.records.iter().map(|r| r.data.len()).sum();
        outln!(
            "the log holds {bytes} bytes of output (escapes stripped), kept across client restarts"
        );
        anyhow::Ok(())
    }
    .await;
    rpc.kill(pb::KillRequest { proc: by_id() }).await?;
    rpc.cleanup(pb::CleanupRequest { proc: by_id() }).await?;
    outln!("killed and cleaned up process {}", p.id);
    Ok(result?)
}
