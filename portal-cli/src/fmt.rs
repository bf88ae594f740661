//! Formatting shared by the commands: status names and colours, durations,
//! sizes, and the JSON shape of a process.

use std::io::IsTerminal as _;
use std::time::Duration;

use portal_client::vocab;
use portal_proto::v1 as pb;
use serde_json::{Value, json};

/// Whether to colour stdout: a terminal, and `NO_COLOR` unset.
pub(crate) fn color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// Columns of the terminal stdout is, if it is one.
pub(crate) fn terminal_columns() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let ws = rustix::termios::tcgetwinsize(rustix::stdio::stdout()).ok()?;
    (ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

/// A status, coloured for a terminal (padded to `width` first).
pub(crate) fn status_cell(p: &pb::Process, width: usize) -> String {
    let name = format!("{:<width$}", vocab::Status::from(p.status()).as_str());
    if !color() {
        return name;
    }
    let style = match p.status() {
        pb::Status::Running => anstyle::AnsiColor::Green.on_default(),
        pb::Status::Exited if p.exit_code == Some(0) => anstyle::Style::new().dimmed(),
        _ => anstyle::AnsiColor::Red.on_default(),
    };
    paint(style, &name)
}

/// `text` in `style` (callers decide whether to colour at all: [`color`]).
pub(crate) fn paint(style: anstyle::Style, text: &str) -> String {
    format!("{style}{text}{style:#}")
}

/// "exit 3", "sig 9" or "-".
pub(crate) fn exit_text(p: &pb::Process) -> String {
    match (p.exit_code, p.exit_signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("sig {s}"),
        _ => "-".into(),
    }
}

/// A short human duration: 850ms, 12s, 3m, 5h, 2d. Hand-written: a table
/// column wants one unit, and humantime prints every unit (`3m 12s 850ms`).
pub(crate) fn short_duration(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{}s", ms / 1_000),
        60_000..3_600_000 => format!("{}m", ms / 60_000),
        3_600_000..86_400_000 => format!("{}h", ms / 3_600_000),
        _ => format!("{}d", ms / 86_400_000),
    }
}

/// Byte counts: 512B, 3.4K, 12M. Hand-written: bytesize prints `3.4 KiB`,
/// twice the width of the column.
pub(crate) fn short_bytes(n: u64) -> String {
    #[allow(clippy::cast_precision_loss, reason = "display rounding")]
    let f = n as f64;
    match n {
        0..1024 => format!("{n}B"),
        1024..1_048_576 => format!("{:.1}K", f / 1024.0),
        1_048_576..1_073_741_824 => format!("{:.1}M", f / 1_048_576.0),
        _ => format!("{:.1}G", f / 1_073_741_824.0),
    }
}

/// Parses "250ms", "10s", "5m", "2h", "1h 30m", or "0"; any other bare
/// number is refused with the units to choose from.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    // A bare number is ambiguous (`--timeout 5`: seconds or milliseconds?)
    // and a wrong guess kills a program or waits for hours: ask.
    match s.parse::<u64>() {
        Ok(0) => return Ok(Duration::ZERO),
        Ok(n) => return Err(format!("{s:?} has no unit: write {n}s, {n}ms, {n}m or {n}h")),
        Err(_) => {}
    }
    humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration like 500ms, 10s, 5m or 1h 30m ({e})"))
}

/// Parses "24x80" (rows x columns).
pub(crate) fn parse_size(s: &str) -> Result<pb::TermSize, String> {
    let (r, c) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("{s:?} is not a size like 24x80 (rows x columns)"))?;
    let rows = r.trim().parse().map_err(|_| format!("{s:?}: rows must be a number"))?;
    let cols = c.trim().parse().map_err(|_| format!("{s:?}: columns must be a number"))?;
    Ok(pb::TermSize { rows, cols })
}

/// The command line of a process, shortened to `max` characters.
pub(crate) fn command_line(p: &pb::Process, max: usize) -> String {
    let full = std::iter::once(p.command.as_str())
        .chain(p.args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    if full.chars().count() > max {
        full.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
    } else {
        full
    }
}

/// Bytes of output (stdout + stderr).
pub(crate) fn output_bytes(p: &pb::Process) -> u64 {
    p.streams.iter().filter(|s| s.stream() != pb::Stream::Stdin).map(|s| s.end_offset).sum()
}

/// A process in `--json`: the view every client shares (the MCP shim's
/// results carry the same one), and besides it the lifecycle and history
/// details a script may want.
#[derive(serde::Serialize)]
struct ProcessJson {
    #[serde(flatten)]
    view: portal_client::view::ProcessView,
    /// Wall-clock start, ns since the epoch.
    started_at_ns: i64,
    /// Wall-clock end, once it ended.
    ended_at_ns: Option<i64>,
    /// Its input was closed.
    stdin_closed: bool,
    /// Its restart policy, when it has one.
    restart: Option<Value>,
    /// How many times its policy restarted it.
    restarts: u32,
    /// The run this one restarted.
    restart_of: Option<u64>,
    /// The process that took its name over after it ended.
    replaced_by: Option<u64>,
    /// Per stream: bytes, where history starts, chunks, bytes lost.
    streams: serde_json::Map<String, Value>,
}

/// `p` as `--json` prints it (see [`ProcessJson`]).
pub(crate) fn process_json(p: &pb::Process) -> Value {
    let host = match crate::TARGET.get() {
        Some(portal_client::hosts::Target::Remote(r)) => Some(r.label.clone()),
        _ => None,
    };
    let mut view = portal_client::view::ProcessView::of(p, host.as_deref());
    view.host = host;
    let streams = p
        .streams
        .iter()
        .map(|s| {
            (
                vocab::Stream::of(s.stream).as_str().to_owned(),
                json!({"bytes": s.end_offset, "history_start": s.start_offset, "chunks": s.chunks, "lost_bytes": s.lost_bytes}),
            )
        })
        .collect();
    let j = ProcessJson {
        view,
        started_at_ns: p.started_at_ns,
        ended_at_ns: p.ended_at_ns,
        stdin_closed: p.stdin_closed,
        restart: p
            .restart
            .map(|r| json!({"max_restarts": r.max_restarts, "backoff_ms": r.backoff_ms})),
        restarts: p.restarts,
        restart_of: (p.restart_of > 0).then_some(p.restart_of),
        replaced_by: (p.replaced_by > 0).then_some(p.replaced_by),
        streams,
    };
    serde_json::to_value(j).unwrap_or(Value::Null)
}

/// Prints JSON on one line.
pub(crate) fn print_json(v: &Value) {
    outln!("{v}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        let bare = parse_duration("5").unwrap_err();
        assert!(bare.contains("5s, 5ms"), "{bare}");
        assert_eq!(parse_duration("1h 30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("ten").is_err() && parse_duration("5q").is_err());
        assert_eq!(parse_size("40x120"), Ok(pb::TermSize { rows: 40, cols: 120 }));
        assert!(parse_size("40").is_err());
        assert_eq!(short_duration(61_000), "1m");
        assert_eq!(short_bytes(2048), "2.0K");
    }
}
