//! Commands that show output: `read` (history, then optionally live with
//! `-f`, continuing from exactly the offset where the history ended, so no
//! byte is lost or repeated) and `screen` (optionally redrawn live).

use std::io::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use portal_client::client::Client;
use portal_client::error::{ClientError, is_disconnect};
use portal_client::vocab;
use portal_proto::v1 as pb;
use serde_json::json;

use crate::fmt::{self, print_json};
use crate::{Failure, JsonFlag, Outcome, proc_ref};

/// Which stream `read` prints.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum StreamArg {
    /// Standard output (all terminal output for a PTY).
    Stdout,
    /// Standard error.
    Stderr,
    /// What was written to the program.
    Stdin,
    /// Standard output and standard error, in the order produced.
    All,
}

/// Arguments of `read`.
#[derive(Debug, Args)]
pub(crate) struct ReadArgs {
    /// Process id or name.
    #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
    pub(crate) proc: String,
    /// Only output from the last DURATION (500ms, 10s, 5m, 2h).
    #[arg(long, value_parser = fmt::parse_duration, conflicts_with = "tail")]
    since: Option<Duration>,
    /// Only the last N lines.
    #[arg(long, value_name = "N")]
    tail: Option<usize>,
    /// Which stream.
    #[arg(long, value_enum, default_value = "all")]
    stream: StreamArg,
    /// Print the bytes as the program wrote them (escape sequences included).
    #[arg(long)]
    raw: bool,
    /// Keep printing new output until the program ends (or Ctrl-C).
    #[arg(short, long)]
    follow: bool,
    /// With --stream stdin: begin each line with who typed it (the MCP
    /// client, the portal-cli command, an attached terminal, an agent send).
    #[arg(long)]
    who: bool,
    #[command(flatten)]
    out: JsonFlag,
}

/// A page size for history: large pages are fewer round trips.
const PAGE_BYTES: u64 = 1 << 20;

/// Largest tail read when looking for the last N lines.
const MAX_TAIL_BYTES: u64 = 4 << 20;

struct Printer {
    json: bool,
    color: bool,
    who: bool,
}

impl Printer {
    fn record(&self, r: &pb::Record) -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        if self.json {
            let stream = match r.stream() {
                pb::Stream::Stdin => "stdin",
                pb::Stream::Stderr => "stderr",
                _ => "stdout",
            };
            let mut v = json!({"stream": stream, "offset": r.offset, "length": r.length, "ts_ns": r.ts_ns, "data": String::from_utf8_lossy(&r.data)});
            if !r.origin.is_empty() {
                v["origin"] = json!(r.origin);
            }
            writeln!(out, "{v}")?;
        } else if self.who && r.stream() == pb::Stream::Stdin {
            let who = if r.origin.is_empty() { "unknown" } else { r.origin.as_str() };
            for line in String::from_utf8_lossy(&r.data).lines() {
                writeln!(out, "[{who}] {line}")?;
            }
        } else if self.color && r.stream() == pb::Stream::Stderr {
            let red = anstyle::AnsiColor::Red.on_default();
            write!(out, "{red}")?;
            out.write_all(&r.data)?;
            write!(out, "{red:#}")?;
        } else {
            out.write_all(&r.data)?;
        }
        out.flush()
    }
}

fn streams(s: StreamArg) -> Vec<i32> {
    match s {
        StreamArg::Stdout => vec![pb::Stream::Stdout.into()],
        StreamArg::Stderr => vec![pb::Stream::Stderr.into()],
        StreamArg::Stdin => vec![pb::Stream::Stdin.into()],
        StreamArg::All => vec![pb::Stream::Stdout.into(), pb::Stream::Stderr.into()],
    }
}

/// Treats a closed stdout (`| head`) as a normal end.
fn quiet_pipe(r: std::io::Result<()>) -> Result<bool, anyhow::Error> {
    match r {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e).context("writing to stdout"),
    }
}

/// `read`.
pub(crate) async fn read(client: &Client, a: ReadArgs) -> Outcome {
    let mut rpc = client.rpc();
    let printer = Printer { json: a.out.json, color: fmt::color() && !a.raw, who: a.who };
    let encoding = if a.raw { pb::Encoding::Raw } else { pb::Encoding::Text };
    let base = pb::ReadRequest {
        proc: proc_ref(&a.proc),
        streams: streams(a.stream),
        encoding: encoding.into(),
        max_bytes: PAGE_BYTES,
        ..Default::default()
    };
    let mut next: Option<pb::Cursor>;
    if let Some(n) = a.tail {
        // Grow the tail until it holds N lines or all history.
        let mut want = 64 << 10;
        loop {
            let req = pb::ReadRequest {
                from: Some(pb::read_request::From::Tail(true)),
                max_bytes: want,
                ..base.clone()
            };
            let resp = rpc.read(req).await?.into_inner();
            let text: Vec<u8> = resp.records.iter().flat_map(|r| r.data.iter().copied()).collect();
            let lines = text.iter().filter(|&&b| b == b'\n').count();
            if lines > n || resp.omitted_bytes == 0 || want >= MAX_TAIL_BYTES {
                let start = last_lines_start(&text, n);
                if a.out.json {
                    print_json(
                        &json!({"text": String::from_utf8_lossy(&text[start..]), "cursor": cursor_json(resp.next.as_ref())}),
                    );
                } else if !quiet_pipe(std::io::stdout().lock().write_all(&text[start..]))? {
                    return Ok(());
                }
                next = resp.next;
                break;
            }
            want = (want * 4).min(MAX_TAIL_BYTES);
        }
    } else {
        let mut from = a.since.map(|d| {
            pb::read_request::From::LastNs(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        });
        loop {
            let req =
                pb::ReadRequest { from: from.clone(), keep: pb::Keep::Head.into(), ..base.clone() };
            let resp = rpc.read(req).await?.into_inner();
            for r in &resp.records {
                if !quiet_pipe(printer.record(r))? {
                    return Ok(());
                }
            }
            let done = resp.records.is_empty() || resp.next == resp.end;
            next = resp.next.clone();
            if done {
                break;
            }
            from = resp.next.map(pb::read_request::From::Cursor);
        }
    }
    if !a.follow {
        return Ok(());
    }
    let mut from = next;
    let mut rpc = rpc;
    let remote = matches!(crate::TARGET.get(), Some(portal_client::hosts::Target::Remote(_)));
    loop {
        let req = pb::FollowRequest {
            proc: proc_ref(&a.proc),
            streams: streams(a.stream),
            from: from.clone(),
            from_start: false,
            encoding: encoding.into(),
        };
        let mut events = match rpc.follow(req).await {
            Ok(r) => r.into_inner(),
            Err(s) if is_disconnect(&s) => {
                rpc = reconnect().await?;
                continue;
            }
            Err(s) => return Err(s.into()),
        };
        loop {
            let ev = match events.message().await {
                Ok(Some(ev)) => ev,
                // The daemon stopped: the follow ends with it. Over ssh a
                // stream that ends without the process's exit is the
                // connection dropping: follow on (a daemon that really
                // stopped reports the process ended once reached again).
                Ok(None) if remote => break,
                Ok(None) => return Ok(()),
                // Upgraded in place or restarted after a crash: the program
                // runs on; continue exactly after the last byte shown.
                Err(s) if is_disconnect(&s) => break,
                Err(s) => return Err(s.into()),
            };
            match ev.event {
                Some(pb::follow_event::Event::Output(r)) => {
                    advance(&mut from, &r);
                    if !quiet_pipe(printer.record(&r))? {
                        return Ok(());
                    }
                }
                Some(pb::follow_event::Event::Gap(g)) => {
                    advance(&mut from, &g);
                    eprintln!("[{} bytes of history were cleared]", g.length);
                }
                Some(pb::follow_event::Event::Exited(p)) => {
                    if a.out.json {
                        print_json(&json!({"exited": fmt::process_json(&p)}));
                    } else {
                        eprintln!(
                            "[process {} {}: {}]",
                            p.id,
                            vocab::Status::from(p.status()).as_str(),
                            fmt::exit_text(&p)
                        );
                    }
                    return Ok(());
                }
                None => {}
            }
        }
        rpc = reconnect().await?;
    }
}

/// How long a follow keeps trying to reach portald again after its
/// connection broke (a live upgrade takes well under a second; a crashed
/// daemon is started again by the first attempt).
const RECONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// A fresh connection after the daemon went away (starting it if it is not
/// running, as every command does, unless `--no-autostart` was given).
pub(crate) async fn reconnect()
-> Result<pb::portal_client::PortalClient<tonic::transport::Channel>, Failure> {
    let deadline = tokio::time::Instant::now() + RECONNECT_TIMEOUT;
    // A daemon's upgrade is over in milliseconds; a broken ssh connection
    // may take seconds to make again, or not come back: say what happens
    // (`\r\n`: attach has the terminal in raw mode), and try less often,
    // each try being a login on that host.
    let remote = matches!(crate::TARGET.get(), Some(portal_client::hosts::Target::Remote(_)));
    if let Some(portal_client::hosts::Target::Remote(r)) = crate::TARGET.get() {
        eprint!(
            "[the connection to host {} broke; trying again for {}]\r\n",
            r.label,
            fmt::short_duration(u64::try_from(RECONNECT_TIMEOUT.as_millis()).unwrap_or(u64::MAX))
        );
    }
    let mut delay = if remote { REMOTE_RETRY_FIRST } else { Duration::from_millis(50) };
    loop {
        match crate::connect_target().await {
            Ok(client) => return Ok(client.rpc()),
            // Trying again cannot help: the message says what will.
            Err(
                e @ (ClientError::AuthRefused { .. }
                | ClientError::RemoteMissing { .. }
                | ClientError::VersionSkew { .. }),
            ) => return Err(Failure::Unreachable(e)),
            Err(e) if tokio::time::Instant::now() >= deadline => {
                return Err(Failure::Unreachable(e));
            }
            Err(_) => {
                tokio::time::sleep(delay).await;
                if remote {
                    delay = (delay * 2).min(REMOTE_RETRY_MAX);
                }
            }
        }
    }
}

/// The first pause between tries to reach a remote host again; it doubles
/// up to [`REMOTE_RETRY_MAX`] (each try is an ssh login there).
const REMOTE_RETRY_FIRST: Duration = Duration::from_millis(500);

/// The longest pause between tries to reach a remote host again.
const REMOTE_RETRY_MAX: Duration = Duration::from_secs(5);

/// Moves the follow's cursor past `r` (its source range).
fn advance(cursor: &mut Option<pb::Cursor>, r: &pb::Record) {
    let c = cursor.get_or_insert_with(pb::Cursor::default);
    let end = r.offset + r.length;
    match c.offsets.iter_mut().find(|o| o.stream == r.stream) {
        Some(o) => o.offset = o.offset.max(end),
        None => c.offsets.push(pb::StreamOffset { stream: r.stream, offset: end }),
    }
}

fn cursor_json(c: Option<&pb::Cursor>) -> serde_json::Value {
    json!(c.map(|c| {
        c.offsets
            .iter()
            .map(|o| json!({"stream": o.stream, "offset": o.offset}))
            .collect::<Vec<_>>()
    }))
}

/// Index where the last `n` lines of `text` begin (a final line without a
/// newline counts as a line).
fn last_lines_start(text: &[u8], n: usize) -> usize {
    if n == 0 {
        return text.len();
    }
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    let mut seen = 0;
    for (i, &b) in body.iter().enumerate().rev() {
        if b == b'\n' {
            seen += 1;
            if seen == n {
                return i + 1;
            }
        }
    }
    0
}

fn screen_json(s: &pb::ScreenSnapshot) -> serde_json::Value {
    let size = s.size.unwrap_or_default();
    json!({
        "id": s.id,
        "status": vocab::Status::from(s.status()).as_str(),
        "rows": size.rows,
        "cols": size.cols,
        "cursor": {"row": s.cursor_row, "col": s.cursor_col},
        "alternate_screen": s.alternate_screen,
        "title": s.title,
        "lines": s.lines,
    })
}

fn screen_text(s: &pb::ScreenSnapshot) -> String {
    let size = s.size.unwrap_or_default();
    let mut out = format!(
        "── process {} · {} · {}x{} · {} screen{} ──\n",
        s.id,
        vocab::Status::from(s.status()).as_str(),
        size.rows,
        size.cols,
        if s.alternate_screen { "alternate" } else { "main" },
        if s.title.is_empty() { String::new() } else { format!(" · {}", s.title) }
    );
    let last = s.lines.iter().rposition(|l| !l.is_empty()).map_or(0, |i| i + 1);
    for line in &s.lines[..last] {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Redraws no more often than this while watching: a program printing
/// thousands of chunks a second needs no thousands of redraws.
const WATCH_FRAME: Duration = Duration::from_millis(50);

/// `screen`.
pub(crate) async fn screen(
    client: &Client,
    proc: &str,
    watch: bool,
    size: Option<pb::TermSize>,
    out: JsonFlag,
) -> Outcome {
    let mut rpc = client.rpc();
    let snap = |mut rpc: pb::portal_client::PortalClient<tonic::transport::Channel>,
                resize: Option<pb::TermSize>| async move {
        rpc.screen(pb::ScreenRequest { proc: proc_ref(proc), resize })
            .await
            .map(tonic::Response::into_inner)
    };
    let show = |s: &pb::ScreenSnapshot, redraw: bool| {
        if out.json {
            print_json(&screen_json(s));
        } else {
            if redraw {
                crate::stdout::bytes(b"\x1b[H\x1b[2J");
            }
            crate::stdout::bytes(screen_text(s).as_bytes());
        }
    };
    // Resized once, by the first look; redraws keep the size.
    let first = snap(rpc.clone(), size).await?;
    if !watch {
        show(&first, false);
        return Ok(());
    }
    let redraw = !out.json && fmt::color();
    show(&first, redraw);
    let req = pb::FollowRequest {
        proc: proc_ref(proc),
        streams: vec![pb::Stream::Stdout.into()],
        ..Default::default()
    };
    let mut events = rpc.follow(req).await?.into_inner();
    let mut last_draw = tokio::time::Instant::now();
    let mut dirty = false;
    loop {
        let deadline = last_draw + WATCH_FRAME;
        let ev = if dirty {
            match tokio::time::timeout_at(deadline, events.message()).await {
                Ok(ev) => ev?,
                Err(_) => {
                    show(&snap(rpc.clone(), None).await?, redraw);
                    last_draw = tokio::time::Instant::now();
                    dirty = false;
                    continue;
                }
            }
        } else {
            events.message().await?
        };
        match ev.and_then(|e| e.event) {
            Some(pb::follow_event::Event::Exited(_)) | None => {
                show(&snap(rpc.clone(), None).await?, redraw);
                return Ok(());
            }
            Some(_) => dirty = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_lines() {
        let t = b"a\nb\nc\n";
        assert_eq!(&t[last_lines_start(t, 2)..], b"b\nc\n");
        assert_eq!(&t[last_lines_start(t, 9)..], b"a\nb\nc\n");
        let u = b"a\nb\nprompt$ ";
        assert_eq!(&u[last_lines_start(u, 1)..], b"prompt$ ");
        assert_eq!(last_lines_start(u, 0), u.len());
    }
}
