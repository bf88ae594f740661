//! Running a search: the index names candidate segments, in time order;
//! each is read back from the log (from where its history begins now) and
//! checked line by line, so a hit is always a line the log holds, with its
//! exact offset and time, and forgotten output is never reported.

use std::collections::HashMap;
use std::time::Instant;

use rusqlite::{Connection, params};

use super::index::{Run, runs};
use super::text::{self, Query};
use crate::domain::{ProcId, StreamId};
use crate::store::{Keep, StoreError};

/// Characters of a hit's line returned: enough for any log line a person
/// reads; a minified blob does not flood the answer.
const LINE_CHARS: usize = 400;

/// Raw bytes read before and after a hit for its context lines.
const CONTEXT_WINDOW: u64 = 16 << 10;

/// Raw bytes read before a hit for its read cursor alone (no context asked).
const LEAD_WINDOW: u64 = 2 << 10;

/// Lines before a hit where the read cursor of a hit starts, so that a read
/// from it shows how the hit came about.
const LEAD_LINES: usize = 3;

/// Which hits come first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    /// Oldest first (a transcript).
    Oldest,
    /// Newest first (what happened last).
    Newest,
}

/// Where the next page of a search begins: the segment (by time and id)
/// and, when a page ended inside one, the last hit returned (its stream's
/// later or earlier lines are what remains: a segment replaced meanwhile,
/// an unfinished line that grew, is not searched twice).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Page {
    ts: i64,
    seg: i64,
    /// `None`: the whole segment is still to be searched.
    after: Option<Last>,
}

/// The last hit of a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Last {
    proc: ProcId,
    stream: StreamId,
    offset: u64,
}

impl Page {
    /// The token a client passes back.
    pub(crate) fn token(self) -> String {
        match self.after {
            Some(l) => {
                format!("{}.{}.{}.{}.{}", self.ts, self.seg, l.proc.0, l.stream as u8, l.offset)
            }
            None => format!("{}.{}", self.ts, self.seg),
        }
    }

    /// Parses a token from [`Page::token`].
    pub(crate) fn parse(token: &str) -> Option<Self> {
        let parts: Vec<&str> = token.split('.').collect();
        let (ts, seg) = (parts.first()?.parse().ok()?, parts.get(1)?.parse().ok()?);
        let after = match parts.len() {
            2 => None,
            5 => Some(Last {
                proc: ProcId(parts[2].parse().ok()?),
                stream: *StreamId::ALL.get(parts[3].parse::<usize>().ok()?)?,
                offset: parts[4].parse().ok()?,
            }),
            _ => return None,
        };
        Some(Self { ts, seg, after })
    }
}

/// A search, validated.
#[derive(Clone, Debug)]
pub(crate) struct Search {
    /// What lines must contain.
    pub(crate) query: Query,
    /// Only these processes (empty: all).
    pub(crate) procs: Vec<ProcId>,
    /// Only these streams (empty: all).
    pub(crate) streams: Vec<StreamId>,
    /// Lines from this wall-clock time on, ns.
    pub(crate) since_ns: Option<i64>,
    /// Lines up to this wall-clock time, ns.
    pub(crate) until_ns: Option<i64>,
    /// Most hits returned.
    pub(crate) limit: usize,
    /// Lines of context before and after each hit.
    pub(crate) context: usize,
    /// Which come first.
    pub(crate) order: Order,
    /// Where to resume.
    pub(crate) page: Option<Page>,
}

/// A matching line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hit {
    /// The process whose log holds the line.
    pub(crate) proc: ProcId,
    pub(crate) stream: StreamId,
    /// Offset of the line's first byte.
    pub(crate) offset: u64,
    /// Offset just past its last byte (the line break excluded).
    pub(crate) end: u64,
    /// Wall-clock time of its first byte, ns.
    pub(crate) ts_ns: i64,
    /// The line as text (cut at [`LINE_CHARS`]).
    pub(crate) text: String,
    /// Lines before it, oldest first.
    pub(crate) before: Vec<String>,
    /// Lines after it.
    pub(crate) after: Vec<String>,
    /// Where a read that shows the hit with a few lines before it starts.
    pub(crate) read_from: u64,
    /// Where a search resumes after this hit.
    resume: Page,
}

/// What a search found.
#[derive(Clone, Debug, Default)]
pub(crate) struct Found {
    /// The hits, in the order asked for.
    pub(crate) hits: Vec<Hit>,
    /// Where the next page begins, when there may be more.
    pub(crate) next: Option<Page>,
    /// Candidate segments read back and checked.
    pub(crate) checked: u64,
    /// The time budget ran out before the page was full.
    pub(crate) out_of_time: bool,
}

/// A candidate segment.
struct Candidate {
    id: i64,
    proc: ProcId,
    stream: StreamId,
    off: u64,
    end: u64,
    ts_first: i64,
}

/// The FTS5 expression for `s`: its words, and its processes and streams
/// as tags.
fn match_expr(s: &Search) -> String {
    let mut expr = s.query.fts();
    if !s.procs.is_empty() {
        let tags: Vec<String> = s.procs.iter().map(|p| format!("p{}", p.0)).collect();
        expr.push_str(&format!(" AND tag : ({})", tags.join(" OR ")));
    }
    if !s.streams.is_empty() {
        let tags: Vec<String> = s.streams.iter().map(|st| format!("s{}", *st as u8)).collect();
        expr.push_str(&format!(" AND tag : ({})", tags.join(" OR ")));
    }
    expr
}

/// Runs `s` over the index `index` of the log `log`, stopping at `deadline`.
pub(crate) fn run(
    index: &Connection,
    log: &Connection,
    s: &Search,
    deadline: Instant,
) -> Result<Found, StoreError> {
    let (cmp, dir) = match s.order {
        Order::Newest => ("<=", "DESC"),
        Order::Oldest => (">=", "ASC"),
    };
    // CROSS JOIN: the index drives (a word's segments), never a scan of
    // every segment probing the index.
    let sql = format!(
        "SELECT s.id, s.proc_id, s.stream, s.off, s.end_off, s.ts_first
         FROM lines CROSS JOIN segments s ON s.id = lines.rowid
         WHERE lines MATCH ?1 AND s.ts_last >= ?2 AND s.ts_first <= ?3
           AND (s.ts_first, s.id) {cmp} (?4, ?5)
         ORDER BY s.ts_first {dir}, s.id {dir}"
    );
    let (page_ts, page_seg) = match (s.page, s.order) {
        (Some(p), _) => (p.ts, p.seg),
        (None, Order::Newest) => (i64::MAX, i64::MAX),
        (None, Order::Oldest) => (i64::MIN, i64::MIN),
    };
    let mut stmt = index.prepare_cached(&sql)?;
    let mut rows = stmt.query(params![
        match_expr(s),
        s.since_ns.unwrap_or(i64::MIN),
        s.until_ns.unwrap_or(i64::MAX),
        page_ts,
        page_seg,
    ])?;
    let mut found = Found::default();
    let mut starts: HashMap<ProcId, Option<[u64; 3]>> = HashMap::new();
    let want = s.limit.max(1);
    while let Some(r) = rows.next()? {
        let Some(stream) = StreamId::ALL.get(usize::try_from(r.get::<_, i64>(2)?).unwrap_or(9))
        else {
            continue;
        };
        let u = |v: i64| u64::try_from(v).unwrap_or(0);
        let c = Candidate {
            id: r.get(0)?,
            proc: ProcId(u(r.get(1)?)),
            stream: *stream,
            off: u(r.get(3)?),
            end: u(r.get(4)?),
            ts_first: r.get(5)?,
        };
        if Instant::now() >= deadline && found.checked > 0 {
            found.out_of_time = true;
            found.next = Some(Page { ts: c.ts_first, seg: c.id, after: None });
            break;
        }
        let start = match starts.get(&c.proc) {
            Some(s) => *s,
            None => {
                let got = crate::store::history_starts_of(log, c.proc)?;
                starts.insert(c.proc, got);
                got
            }
        };
        // Cleaned up: the indexer has not deleted its segments yet.
        let Some(start) = start.map(|st| st[c.stream.index()]) else { continue };
        found.checked += 1;
        let mut hits = check(log, s, &c, start)?;
        if s.order == Order::Newest {
            hits.reverse();
        }
        if let Some(last) = s.page.and_then(|p| p.after)
            && (last.proc, last.stream) == (c.proc, c.stream)
        {
            hits.retain(|h| match s.order {
                Order::Newest => h.offset < last.offset,
                Order::Oldest => h.offset > last.offset,
            });
        }
        for h in hits {
            if found.hits.len() == want {
                // One more exists: the next page resumes after the last one.
                found.next = found.hits.last().map(|l| l.resume);
                return with_context(log, s, found);
            }
            found.hits.push(h);
        }
    }
    with_context(log, s, found)
}

/// The matching lines of one candidate, oldest first.
fn check(log: &Connection, s: &Search, c: &Candidate, start: u64) -> Result<Vec<Hit>, StoreError> {
    let from = c.off.max(start);
    if from >= c.end {
        return Ok(Vec::new());
    }
    let pieces =
        crate::store::read_range(log, c.proc, c.stream, from, c.end, c.end - from, Keep::Head)?;
    let mut hits = Vec::new();
    for run in runs(&pieces) {
        text::lines(&run.data, |lo, hi, line| {
            let offset = run.start + lo as u64;
            let ts_ns = run.ts_at(offset);
            if s.since_ns.is_some_and(|t| ts_ns < t) || s.until_ns.is_some_and(|t| ts_ns > t) {
                return;
            }
            if s.query.matches(&line) {
                hits.push(Hit {
                    proc: c.proc,
                    stream: c.stream,
                    offset,
                    end: run.start + hi as u64,
                    ts_ns,
                    text: cut(&line),
                    before: Vec::new(),
                    after: Vec::new(),
                    read_from: offset,
                    resume: Page {
                        ts: c.ts_first,
                        seg: c.id,
                        after: Some(Last { proc: c.proc, stream: c.stream, offset }),
                    },
                });
            }
        });
    }
    Ok(hits)
}

fn cut(line: &str) -> String {
    match line.char_indices().nth(LINE_CHARS) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_owned(),
    }
}

/// Fills in each hit's context lines and read cursor.
fn with_context(log: &Connection, s: &Search, mut found: Found) -> Result<Found, StoreError> {
    for h in &mut found.hits {
        let start = crate::store::history_starts_of(log, h.proc)?
            .map_or(h.offset, |st| st[h.stream.index()]);
        let window = if s.context == 0 { LEAD_WINDOW } else { CONTEXT_WINDOW };
        let lo = h.offset.saturating_sub(window).max(start);
        let before = lines_in(log, h, lo, h.offset, Keep::Tail)?;
        // A line cut by the window's start is not a whole line.
        let whole = before
            .iter()
            .skip(usize::from(lo > start && before.first().is_some_and(|l| l.0 == lo)));
        let before: Vec<(u64, String)> = whole.cloned().collect();
        let lead = before.len().saturating_sub(LEAD_LINES);
        h.read_from = before.get(lead).map_or(h.offset, |l| l.0);
        let keep = before.len().saturating_sub(s.context);
        h.before = before.into_iter().skip(keep).map(|l| cut(&l.1)).collect();
        if s.context > 0 {
            let after = lines_in(log, h, h.end, h.end + CONTEXT_WINDOW, Keep::Head)?;
            h.after = after.into_iter().take(s.context).map(|l| cut(&l.1)).collect();
        }
    }
    Ok(found)
}

/// The lines of `[from, to)` of a hit's stream, with their offsets.
fn lines_in(
    log: &Connection,
    h: &Hit,
    from: u64,
    to: u64,
    keep: Keep,
) -> Result<Vec<(u64, String)>, StoreError> {
    if to <= from {
        return Ok(Vec::new());
    }
    let pieces = crate::store::read_range(log, h.proc, h.stream, from, to, to - from, keep)?;
    let mut out = Vec::new();
    for run in runs(&pieces) {
        let Run { start, data, .. } = &run;
        text::lines(data, |lo, _, line| out.push((start + lo as u64, line.into_owned())));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_round_trip_and_junk_is_refused() {
        let last = Last { proc: ProcId(3), stream: StreamId::Stderr, offset: 7 };
        for p in [
            Page { ts: 1_700_000_000_000_000_000, seg: 42, after: Some(last) },
            Page { ts: -5, seg: 1, after: None },
        ] {
            assert_eq!(Page::parse(&p.token()), Some(p));
        }
        assert_eq!(Page::parse("x.1.2"), None);
        assert_eq!(Page::parse("1"), None);
        assert_eq!(Page::parse("1.2.3.9.4"), None, "no stream 9");
    }
}
