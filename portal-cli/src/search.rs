//! `grep`: find lines by their words in everything the log holds, every
//! process's output and input, printed like grep with the process, stream
//! and time in front of each line. Pages through the daemon's `Search`
//! until the hits (or `--limit`) run out.

use std::time::{Duration, SystemTime};

use clap::{Args, ValueEnum};
use portal_client::client::Client;
use portal_proto::v1 as pb;
use serde_json::json;

use crate::{Failure, JsonFlag, Outcome, fmt, proc_ref};

/// Hits asked for per round trip.
const PAGE_HITS: u32 = 500;

/// Which streams to search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Streams {
    /// Output and input.
    All,
    /// Standard output and standard error (a terminal's output is stdout).
    Output,
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
    /// What was typed or written into programs.
    Stdin,
}

/// Arguments of `grep`.
#[derive(Debug, Args)]
pub(crate) struct GrepArgs {
    /// Words every matching line contains; "a phrase" for consecutive
    /// words, pre* for a prefix. Case-insensitive.
    pub(crate) pattern: String,
    /// Only lines that also match this regex (Rust syntax, on the text).
    #[arg(short = 'e', long, value_name = "REGEX")]
    regex: Option<String>,
    /// Only this process (id or name); repeat for several.
    #[arg(short, long = "proc", value_name = "PROC", add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
    pub(crate) procs: Vec<String>,
    /// Which streams.
    #[arg(long, value_enum, default_value = "all")]
    stream: Streams,
    /// Only lines printed in the last DURATION (10m, 2h).
    #[arg(long, value_parser = fmt::parse_duration)]
    since: Option<Duration>,
    /// Only lines printed up to DURATION ago.
    #[arg(long, value_parser = fmt::parse_duration)]
    until: Option<Duration>,
    /// Lines of context before and after each match (at most 20).
    #[arg(short = 'C', long, default_value_t = 0, value_name = "N")]
    context: u32,
    /// Stop after N matches.
    #[arg(short = 'm', long = "max-count", value_name = "N")]
    limit: Option<u64>,
    /// Newest first (default: oldest first, as printed).
    #[arg(long)]
    newest: bool,
    #[command(flatten)]
    out: JsonFlag,
}

fn streams(s: Streams) -> Vec<i32> {
    let list: &[pb::Stream] = match s {
        Streams::All => &[],
        Streams::Output => &[pb::Stream::Stdout, pb::Stream::Stderr],
        Streams::Stdout => &[pb::Stream::Stdout],
        Streams::Stderr => &[pb::Stream::Stderr],
        Streams::Stdin => &[pb::Stream::Stdin],
    };
    list.iter().map(|s| (*s).into()).collect()
}

fn ago(d: Duration) -> i64 {
    let at = SystemTime::now().checked_sub(d).unwrap_or(SystemTime::UNIX_EPOCH);
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(1, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX).max(1))
}

fn time(ts_ns: i64) -> String {
    let at = SystemTime::UNIX_EPOCH + Duration::from_nanos(u64::try_from(ts_ns).unwrap_or(0));
    humantime::format_rfc3339_seconds(at).to_string()
}

/// `portal-cli grep`.
pub(crate) async fn grep(client: &Client, a: GrepArgs) -> Outcome {
    let mut rpc = client.rpc();
    let mut req = pb::SearchRequest {
        query: a.pattern.clone(),
        regex: a.regex.clone().unwrap_or_default(),
        procs: a.procs.iter().filter_map(|p| proc_ref(p)).collect(),
        streams: streams(a.stream),
        since_ns: a.since.map_or(0, ago),
        until_ns: a.until.map_or(0, ago),
        limit: PAGE_HITS,
        context: a.context,
        oldest_first: !a.newest,
        page: String::new(),
    };
    if a.limit == Some(0) {
        // As grep: no match asked for, none printed.
        return Err(Failure::Silent);
    }
    let mut printed = 0u64;
    let mut warned = false;
    let mut stdout = std::io::stdout().lock();
    loop {
        if let Some(max) = a.limit {
            req.limit = u32::try_from(max - printed).unwrap_or(u32::MAX).min(PAGE_HITS);
        }
        let resp = match rpc.search(req.clone()).await {
            Ok(r) => r.into_inner(),
            Err(s) if s.code() == tonic::Code::Unimplemented => {
                return Err(anyhow::anyhow!(
                    "this portald is older than portal-cli and cannot search; `portal-cli daemon upgrade` replaces it, every program kept"
                )
                .into());
            }
            Err(s) => return Err(s.into()),
        };
        if !warned {
            warned = true;
            if !resp.index_error.is_empty() {
                eprintln!("portal-cli: the search index is not being kept: {}", resp.index_error);
            }
            if resp.out_of_time {
                eprintln!("portal-cli: the search took its time budget per page; going on");
            }
            if resp.unindexed_bytes > 0 {
                eprintln!(
                    "portal-cli: {} of output is not indexed yet and was not searched (the index is catching up)",
                    fmt::short_bytes(resp.unindexed_bytes)
                );
            }
        }
        for h in &resp.hits {
            let written = if a.out.json {
                print_json(&mut stdout, h)
            } else {
                // As grep: a `--` between groups of context, none after the last.
                print_hit(&mut stdout, h, a.context > 0 && printed > 0)
            };
            if written.is_err() {
                // A closed pipe (`| head`): stop quietly, as grep does.
                return Ok(());
            }
            printed += 1;
        }
        let full = a.limit.is_some_and(|max| printed >= max);
        if resp.next_page.is_empty() || full {
            break;
        }
        req.page = resp.next_page;
    }
    if printed == 0 { Err(Failure::Silent) } else { Ok(()) }
}

fn print_hit(
    out: &mut impl std::io::Write,
    h: &pb::SearchHit,
    separate: bool,
) -> std::io::Result<()> {
    if separate {
        writeln!(out, "--")?;
    }
    let label = if h.proc_name.is_empty() {
        h.proc_id.to_string()
    } else {
        format!("{}:{}", h.proc_id, h.proc_name)
    };
    let head = format!(
        "{label} {} {}",
        portal_client::vocab::Stream::of(h.stream).as_str(),
        time(h.ts_ns)
    );
    for line in &h.before {
        writeln!(out, "{head}- {line}")?;
    }
    let head_hit =
        if fmt::color() { fmt::paint(anstyle::Style::new().bold(), &head) } else { head.clone() };
    writeln!(out, "{head_hit}: {}", h.line)?;
    for line in &h.after {
        writeln!(out, "{head}- {line}")?;
    }
    Ok(())
}

fn print_json(out: &mut impl std::io::Write, h: &pb::SearchHit) -> std::io::Result<()> {
    let v = json!({
        "proc": h.proc_id,
        "name": h.proc_name,
        "stream": portal_client::vocab::Stream::of(h.stream).as_str(),
        "offset": h.offset,
        "length": h.length,
        "ts_ns": h.ts_ns,
        "line": h.line,
        "before": h.before,
        "after": h.after,
        "read_from": h.read_from,
    });
    writeln!(out, "{v}")
}
