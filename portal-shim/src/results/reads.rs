//! Reading a process's output: [`Output`] (`process_read`,
//! `process_read_new`) and its text, the records joined with their streams
//! marked, who typed the input, and the cursor strings a read continues
//! from (starts and waits hand them out too).

use std::fmt::Write as _;

use portal_client::vocab;
use portal_proto::v1 as pb;
use schemars::JsonSchema;
use serde::Serialize;

use super::{SHORT_OUTPUT, is_zero};

/// Output read from a process.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Output {
    /// Process id (the caller may have named it).
    #[schemars(skip)]
    pub(crate) id: u64,
    /// Its status when read.
    pub(crate) status: vocab::Status,
    /// The output as text (terminal escapes removed, carriage-return
    /// overwrites applied). With several streams, runs are marked `[stderr]`.
    pub(crate) output: String,
    /// Pass as `cursor` to continue reading after this output.
    pub(crate) cursor: String,
    /// Bytes in the requested range that were left out (the page limit).
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) omitted_bytes: u64,
    /// Where the left-out bytes begin: `process_read` with this cursor pages
    /// through them. Absent when nothing was left out.
    pub(crate) omitted_cursor: Option<String>,
    /// True when some of the requested history was cleared before it could be read.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schemars(skip)]
    pub(crate) history_cleared: bool,
    /// Bytes inside this range that were never stored (a full disk); a
    /// marker line in `output` stands where they were.
    #[serde(skip_serializing_if = "is_zero")]
    #[schemars(skip)]
    pub(crate) lost_bytes: u64,
    /// Input only: who typed it, from which stdin offset on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) typed_by: Vec<TypedBy>,
}

/// Who typed the input from `offset` on (an MCP client through a shim, a
/// portal-cli command, an attached terminal, an agent send).
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct TypedBy {
    /// Offset in the stdin stream.
    pub(crate) offset: u64,
    /// Who.
    pub(crate) who: String,
}

/// Cursor strings: `stdout:<offset>[,stderr:<offset>][,stdin:<offset>]`.
pub(crate) fn cursor_string(c: Option<&pb::Cursor>) -> String {
    let Some(c) = c else { return String::new() };
    c.offsets
        .iter()
        .map(|o| {
            let name = match o.stream() {
                pb::Stream::Stdin => "stdin",
                pb::Stream::Stderr => "stderr",
                _ => "stdout",
            };
            format!("{name}:{}", o.offset)
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses a cursor string; a bare number is a stdout offset.
pub(crate) fn parse_cursor(s: &str) -> Result<pb::Cursor, String> {
    let bad = || {
        format!(
            "cursor {s:?} is not a cursor from an earlier result (like \"stdout:120,stderr:0\")"
        )
    };
    let mut cursor = pb::Cursor::default();
    if let Ok(n) = s.trim().parse::<u64>() {
        cursor.offsets.push(pb::StreamOffset { stream: pb::Stream::Stdout.into(), offset: n });
        return Ok(cursor);
    }
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, off) = part.split_once(':').ok_or_else(bad)?;
        let stream = match name {
            "stdout" => pb::Stream::Stdout,
            "stderr" => pb::Stream::Stderr,
            "stdin" => pb::Stream::Stdin,
            _ => return Err(bad()),
        };
        let offset = off.parse().map_err(|_| bad())?;
        cursor.offsets.push(pb::StreamOffset { stream: stream.into(), offset });
    }
    if cursor.offsets.is_empty() {
        return Err(bad());
    }
    Ok(cursor)
}

/// Joins records into text, marking stream changes when several streams
/// appear.
fn records_text(records: &[pb::Record]) -> String {
    let first = records.first().map(pb::Record::stream);
    let mixed = records.iter().any(|r| Some(r.stream()) != first);
    let mut out = String::new();
    let mut last = None;
    for r in records {
        if mixed && last != Some(r.stream()) {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(match r.stream() {
                pb::Stream::Stderr => "[stderr] ",
                pb::Stream::Stdin => "[stdin] ",
                _ => "[stdout] ",
            });
            last = Some(r.stream());
        }
        out.push_str(&String::from_utf8_lossy(&r.data));
    }
    out
}

/// Builds an [`Output`] from a read.
pub(crate) fn output(id: u64, resp: &pb::ReadResponse) -> Output {
    Output {
        id,
        status: resp.status().into(),
        output: records_text(&resp.records),
        cursor: cursor_string(resp.next.as_ref()),
        omitted_bytes: resp.omitted_bytes,
        omitted_cursor: (resp.omitted_bytes > 0).then(|| cursor_string(resp.omitted_from.as_ref())),
        history_cleared: resp.history_trimmed,
        lost_bytes: resp.lost.iter().map(|l| l.length).sum(),
        typed_by: typed_by(&resp.records),
    }
}

/// Who typed the input records, one entry where the typist changes.
fn typed_by(records: &[pb::Record]) -> Vec<TypedBy> {
    let mut out: Vec<TypedBy> = Vec::new();
    for r in records.iter().filter(|r| r.stream() == pb::Stream::Stdin && !r.origin.is_empty()) {
        if out.last().is_none_or(|t| t.who != r.origin) {
            out.push(TypedBy { offset: r.offset, who: r.origin.clone() });
        }
    }
    out
}

/// The text of a read result: the output, then what to do about anything
/// left out, then the cursor.
/// Where the client's model reads only the structured content
/// ([`crate::audience`]), the output is said in a word instead.
pub(crate) fn output_text(o: &Output, empty: &str, paging_forward: bool) -> String {
    let mut out = if o.output.is_empty() {
        empty.to_owned()
    } else if crate::audience::short_text() && o.output.len() > SHORT_OUTPUT {
        format!("({} lines of output in the structured result)", o.output.lines().count())
    } else {
        o.output.clone()
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if o.history_cleared {
        out.push_str("[some of this range was cleared before it could be read]\n");
    }
    if let Some(from) = &o.omitted_cursor {
        if paging_forward {
            let _ = writeln!(
                out,
                "[{} more bytes: call again with cursor=\"{}\"]",
                o.omitted_bytes, o.cursor
            );
        } else {
            let _ = writeln!(
                out,
                "[{} earlier bytes not shown: process_read with cursor=\"{from}\" pages through them]",
                o.omitted_bytes
            );
        }
    }
    let _ = write!(out, "[status={} cursor=\"{}\"]", o.status, o.cursor);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip() {
        let c = parse_cursor("stdout:12,stderr:3").unwrap();
        assert_eq!(cursor_string(Some(&c)), "stdout:12,stderr:3");
        assert_eq!(cursor_string(Some(&parse_cursor("42").unwrap())), "stdout:42");
        assert!(parse_cursor("bogus").is_err());
        assert!(parse_cursor("stdout:x").is_err());
        assert!(parse_cursor("").is_err());
    }

    #[test]
    fn mixed_streams_are_marked() {
        let rec = |s: pb::Stream, d: &str| pb::Record {
            stream: s.into(),
            data: d.to_owned().into(),
            ..Default::default()
        };
        let text = records_text(&[
            rec(pb::Stream::Stdout, "a\n"),
            rec(pb::Stream::Stderr, "oops"),
            rec(pb::Stream::Stdout, "b\n"),
        ]);
        assert_eq!(text, "[stdout] a\n[stderr] oops\n[stdout] b\n");
        assert_eq!(records_text(&[rec(pb::Stream::Stdout, "only")]), "only");
    }
}
