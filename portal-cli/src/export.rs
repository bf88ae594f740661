//! `export` and `replay`: a process's log as a recording. `export` writes
//! asciicast v2 (what `asciinema play` plays: output events `o`, input
//! events `i`, resizes `r`, a marker `m` naming who typed wherever the
//! typist changes, times from the log's timestamps) or a plain transcript with
//! the input interleaved; `replay` plays the output in this terminal at its
//! own pace.
//!
//! Everything comes from the log through `Read` (and the terminal's
//! resizes through `Resizes`), so an ended process, or one of an earlier
//! daemon, exports like a running one.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use portal_client::client::Client;
use portal_proto::v1 as pb;
use serde_json::json;

use crate::fmt;
use crate::{Outcome, proc_ref};

/// A page of history: large pages are fewer round trips.
const PAGE_BYTES: u64 = 1 << 20;

/// The size a recording of a process without a terminal says.
const PIPE_SIZE: pb::TermSize = pb::TermSize { rows: 24, cols: 80 };

/// What to export.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Format {
    /// asciicast v2, for `asciinema play` (and `portal-cli replay`).
    Asciicast,
    /// The output as text (escapes stripped), each input line marked
    /// `[input from WHO]`.
    Text,
}

/// Which part of the log.
#[derive(Debug, Args)]
pub(crate) struct Span {
    /// Only what happened in the last DURATION (10m, 2h).
    #[arg(long, value_parser = fmt::parse_duration)]
    since: Option<Duration>,
    /// Only what happened up to DURATION ago.
    #[arg(long, value_parser = fmt::parse_duration)]
    until: Option<Duration>,
}

/// Arguments of `export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// Process id or name.
    #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
    pub(crate) proc: String,
    /// The format.
    #[arg(long, value_enum, default_value = "asciicast")]
    format: Format,
    #[command(flatten)]
    span: Span,
    /// Write to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Arguments of `replay`.
#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// Process id or name.
    #[arg(add = clap_complete::ArgValueCompleter::new(crate::complete::procs))]
    pub(crate) proc: String,
    /// Play this many times as fast.
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Longest pause played, however long the program was quiet.
    #[arg(long, value_parser = fmt::parse_duration, default_value = "2s")]
    idle_limit: Duration,
    #[command(flatten)]
    span: Span,
}

/// What a recording is made of: the process, its records in the span in
/// the order they happened, and its terminal's resizes.
struct History {
    process: pb::Process,
    records: Vec<pb::Record>,
    resizes: Vec<pb::Resize>,
    /// The span's end, ns since the epoch.
    until_ns: i64,
}

/// The process and its records in the span, in the order they happened.
async fn history(
    client: &Client,
    proc: &str,
    span: &Span,
    encoding: pb::Encoding,
) -> anyhow::Result<History> {
    let mut rpc = client.rpc();
    let p = rpc.inspect(pb::InspectRequest { proc: proc_ref(proc) }).await?.into_inner();
    let now = wall_ns();
    let ago = |d: Duration| now.saturating_sub(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    let (from, to) = (span.since.map(ago), span.until.map(ago));
    let inside =
        |r: &pb::Record| from.is_none_or(|f| r.ts_ns >= f) && to.is_none_or(|t| r.ts_ns <= t);
    let streams = [pb::Stream::Stdout, pb::Stream::Stderr, pb::Stream::Stdin];
    let records = if encoding == pb::Encoding::Text && (from.is_some() || to.is_some()) {
        // A text record renders a run of output and carries the time of its
        // first byte, so a window cannot be cut from text records: find it
        // in the raw ones (one per read from the program), then read it as
        // text between those offsets.
        let raw = pages(&mut rpc, p.id, &streams, None, pb::Encoding::Raw, u64::MAX).await?;
        let mut bounds: Vec<(pb::Stream, u64, u64)> = Vec::new();
        for r in raw.iter().filter(|r| inside(r)) {
            let end = r.offset + r.length;
            match bounds.iter_mut().find(|(s, _, _)| *s == r.stream()) {
                Some((_, start, stop)) => {
                    (*start, *stop) = ((*start).min(r.offset), (*stop).max(end))
                }
                None => bounds.push((r.stream(), r.offset, end)),
            }
        }
        // Each stream's window is read on its own, to the byte, and the
        // streams are put back in the order their runs began.
        let mut text = Vec::new();
        for (stream, start, stop) in bounds {
            let from = pb::Cursor {
                offsets: vec![pb::StreamOffset { stream: stream.into(), offset: start }],
            };
            text.extend(
                pages(&mut rpc, p.id, &[stream], Some(from), encoding, stop - start).await?,
            );
        }
        text.sort_by_key(|r| r.ts_ns);
        text
    } else {
        let all = pages(&mut rpc, p.id, &streams, None, encoding, u64::MAX).await?;
        all.into_iter().filter(|r| inside(r)).collect()
    };
    // A daemon from before resizes were kept has none to give.
    let resizes = match rpc.resizes(pb::ResizesRequest { proc: proc_ref(proc) }).await {
        Ok(r) => r.into_inner().resizes,
        Err(s) if s.code() == tonic::Code::Unimplemented => Vec::new(),
        Err(s) => return Err(s.into()),
    };
    Ok(History { process: p, records, resizes, until_ns: to.unwrap_or(now) })
}

/// The records of `streams` from `from` (the first byte when `None`) to
/// the end of history or until `limit` bytes of it were read, in pages.
async fn pages(
    rpc: &mut portal_proto::v1::portal_client::PortalClient<tonic::transport::Channel>,
    id: u64,
    streams: &[pb::Stream],
    from: Option<pb::Cursor>,
    encoding: pb::Encoding,
    limit: u64,
) -> anyhow::Result<Vec<pb::Record>> {
    let mut records = Vec::new();
    let mut cursor = from;
    let mut left = limit;
    loop {
        let cursor_was = cursor.clone();
        let req = pb::ReadRequest {
            proc: Some(pb::ProcRef { target: Some(pb::proc_ref::Target::Id(id)) }),
            streams: streams.iter().map(|s| (*s).into()).collect(),
            from: cursor.take().map(pb::read_request::From::Cursor),
            max_bytes: PAGE_BYTES.min(left),
            encoding: encoding.into(),
            keep: pb::Keep::Head.into(),
        };
        let resp = rpc.read(req).await?.into_inner();
        // A text page may render to nothing (a stretch of redraws): only
        // the end of history, or a cursor that no longer moves, ends it.
        let done = resp.next == resp.end || resp.next.is_none() || resp.next == cursor_was;
        left = left.saturating_sub(resp.records.iter().map(|r| r.length).sum());
        records.extend(resp.records);
        if done || left == 0 {
            return Ok(records);
        }
        cursor = resp.next;
    }
}

fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Bytes of one stream as text, a chunk at a time: a UTF-8 sequence the
/// program's writes (or the log's chunks) split is carried to the next
/// chunk instead of becoming two replacement characters.
#[derive(Default)]
struct Utf8Carry {
    pending: Vec<u8>,
}

impl Utf8Carry {
    fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            // An incomplete sequence at the end waits for the next chunk.
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => self.pending.len(),
        };
        let text = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
        self.pending.drain(..valid);
        text
    }
}

/// One event of a recording: seconds from its start, its kind (`o` output,
/// `i` input, `r` resize, `m` marker), text.
struct Event {
    at: f64,
    kind: &'static str,
    text: String,
}

/// The asciicast header and events of a history.
fn cast(h: &History) -> (serde_json::Value, Vec<Event>) {
    let (p, records) = (&h.process, &h.records);
    let start = records.first().map_or(p.started_at_ns, |r| r.ts_ns);
    // The size when the recording starts: what the first later resize
    // changed, else the size now.
    let size = h
        .resizes
        .iter()
        .find(|r| r.ts_ns >= start)
        .and_then(|r| r.from)
        .or(p.size)
        .unwrap_or(PIPE_SIZE);
    let header = json!({
        "version": 2,
        "width": size.cols,
        "height": size.rows,
        "timestamp": start / 1_000_000_000,
        "title": fmt::command_line(p, 200),
    });
    // One carry per stream: a character split in stdout must not be
    // joined with stderr's bytes.
    let mut carries: [Utf8Carry; 3] = Default::default();
    // A terminal turns `\n` into `\r\n`; pipes do not, and a player would
    // draw their lines as a staircase.
    let pipes = p.mode() != pb::Mode::Pty;
    #[allow(clippy::cast_precision_loss, reason = "seconds of a recording, to the µs")]
    let seconds = |ts: i64| (ts - start).max(0) as f64 / 1e9;
    let mut last = 0.0;
    let mut typist = "";
    let mut events: Vec<Event> = Vec::with_capacity(records.len());
    for r in records {
        let (kind, slot) = match r.stream() {
            pb::Stream::Stdin => ("i", 0),
            pb::Stream::Stderr => ("o", 2),
            _ => ("o", 1),
        };
        let mut text = carries[slot].push(&r.data);
        if pipes && kind == "o" {
            text = text.replace("\r\n", "\n").replace('\n', "\r\n");
        }
        last = seconds(r.ts_ns);
        // Who typed the input: a marker (`m`, which players list and skip
        // to) wherever the typist changes.
        if kind == "i" && !r.origin.is_empty() && r.origin != typist {
            typist = &r.origin;
            events.push(Event { at: last, kind: "m", text: format!("input from {typist}") });
        }
        if !text.is_empty() {
            events.push(Event { at: last, kind, text });
        }
    }
    for r in h.resizes.iter().filter(|r| (start..=h.until_ns).contains(&r.ts_ns)) {
        if let Some(to) = r.to {
            let text = format!("{}x{}", to.cols, to.rows);
            events.push(Event { at: seconds(r.ts_ns), kind: "r", text });
        }
    }
    // In time order; a stable sort keeps output and input as they were.
    events.sort_by(|a, b| a.at.total_cmp(&b.at));
    // What an unfinished sequence held back at the end is played as it is.
    for (slot, carry) in carries.iter_mut().enumerate() {
        let rest = String::from_utf8_lossy(&carry.pending).into_owned();
        if !rest.is_empty() {
            events.push(Event { at: last, kind: if slot == 0 { "i" } else { "o" }, text: rest });
        }
    }
    (header, events)
}

/// `export`.
pub(crate) async fn export(client: &Client, a: ExportArgs) -> Outcome {
    let encoding = match a.format {
        Format::Asciicast => pb::Encoding::Raw,
        Format::Text => pb::Encoding::Text,
    };
    let h = history(client, &a.proc, &a.span, encoding).await?;
    let mut body = Vec::new();
    match a.format {
        Format::Asciicast => {
            let (header, events) = cast(&h);
            body.extend_from_slice(format!("{header}\n").as_bytes());
            for e in events {
                let line = json!([(e.at * 1e6).round() / 1e6, e.kind, e.text]);
                body.extend_from_slice(format!("{line}\n").as_bytes());
            }
        }
        Format::Text => {
            for r in &h.records {
                if r.stream() == pb::Stream::Stdin {
                    // Input on lines of its own, after a prompt it answers.
                    if body.last().is_some_and(|&b| b != b'\n') {
                        body.push(b'\n');
                    }
                    let who = if r.origin.is_empty() {
                        String::new()
                    } else {
                        format!(" from {}", r.origin)
                    };
                    for line in String::from_utf8_lossy(&r.data).lines() {
                        body.extend_from_slice(format!("[input{who}] {line}\n").as_bytes());
                    }
                } else {
                    body.extend_from_slice(&r.data);
                }
            }
        }
    }
    match a.output {
        Some(path) => {
            std::fs::write(&path, &body).with_context(|| format!("writing {}", path.display()))?
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(&body).and_then(|()| stdout.flush()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    return Err(anyhow::Error::from(e).context("writing to stdout").into());
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// `replay`: the output events at their pace (`--speed`, pauses cut to
/// `--idle-limit`).
pub(crate) async fn replay(client: &Client, a: ReplayArgs) -> Outcome {
    if !(a.speed > 0.0 && a.speed.is_finite()) {
        return Err(anyhow::anyhow!("--speed must be a positive number, not {}", a.speed).into());
    }
    let h = history(client, &a.proc, &a.span, pb::Encoding::Raw).await?;
    let (_, events) = cast(&h);
    let mut last = 0.0;
    let mut stdout = std::io::stdout();
    for e in events.iter().filter(|e| e.kind == "o") {
        let pause = Duration::try_from_secs_f64(((e.at - last) / a.speed).max(0.0))
            .unwrap_or(a.idle_limit)
            .min(a.idle_limit);
        last = e.at;
        // A recording plays at its own pace: this sleep is the product.
        tokio::time::sleep(pause).await;
        if stdout.write_all(e.text.as_bytes()).and_then(|()| stdout.flush()).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_utf8_sequence_is_carried_to_the_next_chunk() {
        let text = "héllo ✓ wörld";
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            let mut c = Utf8Carry::default();
            let joined = c.push(&bytes[..cut]) + &c.push(&bytes[cut..]);
            assert_eq!(joined, text, "cut at {cut}");
        }
        let mut c = Utf8Carry::default();
        assert_eq!(c.push(b"a\xffb"), "a\u{fffd}b", "invalid bytes are replaced, not held");
    }
}
