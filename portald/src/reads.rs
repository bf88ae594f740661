//! Paged reads of a process's history, and live follow streams.
//!
//! A read turns its request into one offset range per stream (from a cursor,
//! a time window, the server-side "read new" cursors, or the tail), passes
//! the store's flush barrier, reads at most `max_bytes` keeping the head or
//! the tail, merges streams in the order the bytes were produced and, for
//! text, renders them (escapes stripped, carriage returns applied, UTF-8
//! decoded over whole runs). It reports where to continue, what was left out
//! and where history begins, so nothing is silently lost.
//!
//! A follow stream attaches to the actor (getting the end offsets and a live
//! subscription in one step), replays history up to those offsets from the
//! store, then forwards live chunks. A subscriber that lags (the broadcast
//! dropped chunks for it) refills the gap from the store by offset, so each
//! byte is delivered exactly once and a slow client never grows the daemon's
//! memory.

use bytes::Bytes;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use crate::ansi::TextRenderer;
use crate::config::MAX_READ_BYTES;
use crate::proc::{Attachment, LiveEvent, ProcError, ProcHandle, ProcStatus, Stdio, StreamId};
use crate::store::{self, Keep, Piece, Store};

/// Where a read starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReadFrom {
    /// The start of retained history.
    Start,
    /// Client-held offsets (unset streams start at history start).
    Cursor([Option<u64>; 3]),
    /// The last this many nanoseconds.
    LastNs(u64),
    /// The server-side per-stream cursors, advanced by the read.
    ServerCursor,
    /// The newest `max_bytes`.
    Tail,
}

/// A validated read.
#[derive(Clone, Debug)]
pub(crate) struct ReadSpec {
    /// Streams, in any order, no duplicates.
    pub(crate) streams: Vec<StreamId>,
    /// Where the read starts.
    pub(crate) from: ReadFrom,
    /// Data budget.
    pub(crate) max_bytes: u64,
    /// Which end to keep; `None` = default for `from`.
    pub(crate) keep: Option<Keep>,
    /// Render as text.
    pub(crate) text: bool,
}

/// One record of a read result.
#[derive(Clone, Debug)]
pub(crate) struct OutRecord {
    pub(crate) stream: StreamId,
    /// Offset of the source range.
    pub(crate) offset: u64,
    /// Length of the source range.
    pub(crate) length: u64,
    /// Wall-clock ns of the first byte.
    pub(crate) ts_ns: i64,
    /// Raw bytes, or UTF-8 text.
    pub(crate) data: Bytes,
    /// Who typed it (input only).
    pub(crate) origin: Option<std::sync::Arc<str>>,
}

/// A read's outcome.
#[derive(Clone, Debug)]
pub(crate) struct ReadResult {
    /// The streams read (a PTY has no stderr, so it is dropped).
    pub(crate) streams: Vec<StreamId>,
    /// Records in production order.
    pub(crate) records: Vec<OutRecord>,
    /// Continue forward from here.
    pub(crate) next: [u64; 3],
    /// Stream ends at read time.
    pub(crate) end: [u64; 3],
    /// History starts.
    pub(crate) history_start: [u64; 3],
    /// Bytes of the selected range not returned.
    pub(crate) omitted: u64,
    /// Where the omitted range begins.
    pub(crate) omitted_from: [u64; 3],
    /// The selected range started before retained history.
    pub(crate) trimmed: bool,
    /// Status at read time.
    pub(crate) status: ProcStatus,
    /// Ranges inside the read that were never stored (stream, offset, length).
    pub(crate) lost: Vec<(StreamId, u64, u64)>,
}

/// Reads history.
pub(crate) async fn read(
    h: &ProcHandle,
    store: &Store,
    mut spec: ReadSpec,
) -> Result<ReadResult, ProcError> {
    let id = h.id();
    if matches!(h.facts.spec.stdio, Stdio::Pty(_)) && spec.streams.len() > 1 {
        spec.streams.retain(|s| *s != StreamId::Stderr);
    }
    let status = h.status();
    let max = spec.max_bytes.min(MAX_READ_BYTES);
    let end = h.shared.ends();
    let keep = spec.keep.unwrap_or(match spec.from {
        ReadFrom::Start | ReadFrom::Cursor(_) => Keep::Head,
        ReadFrom::LastNs(_) | ReadFrom::ServerCursor | ReadFrom::Tail => Keep::Tail,
    });
    // Everything up to `end` is committed after the barrier, and any trim
    // that commit caused has moved the starts: read them only now.
    store.flush().await?;
    let start = h.shared.starts();
    let mut trimmed = false;
    let mut from = start;
    match &spec.from {
        ReadFrom::Start => {}
        ReadFrom::Cursor(c) => {
            for s in &spec.streams {
                let i = s.index();
                if let Some(off) = c[i] {
                    if off > end[i] {
                        return Err(ProcError::OffsetPastEnd {
                            id,
                            stream: s.name(),
                            offset: off,
                            end: end[i],
                        });
                    }
                    if off < start[i] {
                        trimmed = true;
                    }
                    from[i] = off.max(start[i]);
                }
            }
        }
        ReadFrom::LastNs(ns) => {
            let cutoff =
                crate::sys::monotonic_ns().saturating_sub(i64::try_from(*ns).unwrap_or(i64::MAX));
            let streams = spec.streams.clone();
            let found = store
                .read(move |c| {
                    streams
                        .iter()
                        .map(|s| Ok((*s, store::first_offset_since(c, id, *s, cutoff)?)))
                        .collect::<Result<Vec<_>, store::StoreError>>()
                })
                .await?;
            for (s, off) in found {
                let i = s.index();
                from[i] = off.unwrap_or(end[i]).max(start[i]);
            }
        }
        ReadFrom::ServerCursor => {
            let mut cursors = h.shared.cursors();
            for s in &spec.streams {
                let i = s.index();
                from[i] = cursors[i].max(start[i]);
                cursors[i] = end[i];
            }
        }
        ReadFrom::Tail => {
            for s in &spec.streams {
                let i = s.index();
                from[i] = end[i].saturating_sub(max).max(start[i]);
            }
        }
    }
    let streams = spec.streams.clone();
    let pieces = store
        .read(move |c| {
            let mut all = Vec::new();
            for s in &streams {
                let i = s.index();
                all.extend(store::read_range(c, id, *s, from[i], end[i], max, keep)?);
            }
            Ok(all)
        })
        .await?;
    let pieces = budget(pieces, max, keep);
    let total: u64 =
        spec.streams.iter().map(|s| end[s.index()].saturating_sub(from[s.index()])).sum();
    let cut = pieces.iter().map(|p| p.data.len() as u64).sum::<u64>() < total
        || (matches!(spec.from, ReadFrom::Tail)
            && spec.streams.iter().any(|s| from[s.index()] > start[s.index()]));
    let pieces = if spec.text && cut { line_aligned(pieces, keep) } else { pieces };
    let mut next = from;
    for p in &pieces {
        let i = p.stream.index();
        next[i] = next[i].max(p.end());
    }
    let returned: u64 = pieces.iter().map(|p| p.data.len() as u64).sum();
    let mut omitted_from = next;
    if keep == Keep::Tail {
        for s in &spec.streams {
            let i = s.index();
            next[i] = end[i];
            omitted_from[i] = from[i];
        }
    }
    let lost = holes(&pieces, &spec.streams, from, end, keep, cut);
    let lost_bytes: u64 = lost.iter().map(|(_, _, len)| len).sum();
    let mut records = if spec.text { render_text(&pieces, keep) } else { raw_records(pieces) };
    if spec.text {
        mark_holes(&mut records, &lost);
    }
    Ok(ReadResult {
        lost,
        streams: spec.streams,
        records,
        next,
        end,
        history_start: start,
        // Lost bytes are not waiting to be paged to: they are gone.
        omitted: total.saturating_sub(returned).saturating_sub(lost_bytes),
        omitted_from,
        trimmed,
        status,
    })
}

/// Merges pieces of several streams in production order and cuts the total
/// to `max` bytes, keeping the head or the tail.
fn budget(mut pieces: Vec<Piece>, max: u64, keep: Keep) -> Vec<Piece> {
    pieces.sort_by_key(|p| (p.seq, p.offset));
    let mut total = 0u64;
    let mut out = Vec::with_capacity(pieces.len());
    match keep {
        Keep::Head => {
            for mut p in pieces {
                if total >= max {
                    break;
                }
                let room = max - total;
                if p.data.len() as u64 > room {
                    p.data.truncate(usize::try_from(room).unwrap_or(usize::MAX));
                }
                total += p.data.len() as u64;
                out.push(p);
            }
        }
        Keep::Tail => {
            for mut p in pieces.into_iter().rev() {
                if total >= max {
                    break;
                }
                let room = max - total;
                let len = p.data.len() as u64;
                if len > room {
                    let cut = usize::try_from(len - room).unwrap_or(0);
                    p.data = p.data.slice(cut..);
                    p.offset += len - room;
                }
                total += p.data.len() as u64;
                out.push(p);
            }
            out.reverse();
        }
    }
    out
}

/// A page that had to be cut ends (head) or begins (tail) on a line
/// boundary when one is inside it, so no line is split between two pages;
/// the cursor still continues exactly, from the cut. A single line longer
/// than the page is still cut.
fn line_aligned(mut pieces: Vec<Piece>, keep: Keep) -> Vec<Piece> {
    match keep {
        Keep::Head => {
            let Some((i, nl)) = pieces
                .iter()
                .enumerate()
                .rev()
                .find_map(|(i, p)| p.data.iter().rposition(|b| *b == b'\n').map(|nl| (i, nl)))
            else {
                return pieces;
            };
            pieces.truncate(i + 1);
            pieces[i].data.truncate(nl + 1);
        }
        Keep::Tail => {
            let Some((i, nl)) = pieces
                .iter()
                .enumerate()
                .find_map(|(i, p)| p.data.iter().position(|b| *b == b'\n').map(|nl| (i, nl)))
            else {
                return pieces;
            };
            pieces.drain(..i);
            let first = &mut pieces[0];
            first.data = first.data.slice(nl + 1..);
            first.offset += nl as u64 + 1;
            if first.data.is_empty() {
                pieces.remove(0);
            }
        }
    }
    pieces
}

/// Ranges inside a read whose bytes are not in the log although they are
/// inside retained history: output that could not be stored (a full disk
/// with nothing left to trim). Offsets make them visible: stored rows of a
/// stream are contiguous otherwise. A page cut by its byte budget has no
/// end hole (the rest is omitted, not lost), nor does a tail read at its
/// start.
fn holes(
    pieces: &[Piece],
    streams: &[StreamId],
    from: [u64; 3],
    end: [u64; 3],
    keep: Keep,
    cut: bool,
) -> Vec<(StreamId, u64, u64)> {
    let mut lost = Vec::new();
    for s in streams {
        let mut mine: Vec<&Piece> = pieces.iter().filter(|p| p.stream == *s).collect();
        mine.sort_by_key(|p| p.offset);
        // Not before the first row: history may have been trimmed between
        // reading where it starts and reading the rows, and a trim is not a
        // loss. Between rows and after the last one, only a loss leaves a
        // gap (trims and clears cut from the start).
        let mut expected = mine.first().map_or(from[s.index()], |first| first.offset);
        for p in &mine {
            if p.offset > expected {
                lost.push((*s, expected, p.offset - expected));
            }
            expected = expected.max(p.end());
        }
        let to_end = match keep {
            Keep::Head => !cut,
            Keep::Tail => true,
        };
        if to_end && !mine.is_empty() && expected < end[s.index()] {
            lost.push((*s, expected, end[s.index()] - expected));
        }
    }
    lost
}

/// Puts a marker line where each hole was, before the first record of its
/// stream that comes after it.
fn mark_holes(records: &mut Vec<OutRecord>, lost: &[(StreamId, u64, u64)]) {
    for (stream, offset, length) in lost {
        let marker = OutRecord {
            stream: *stream,
            offset: *offset,
            length: 0,
            ts_ns: 0,
            data: Bytes::from(format!(
                "[{length} bytes of output lost here: they never reached the log (a full disk, or portald killed)]\n"
            )),
            origin: None,
        };
        let at = records
            .iter()
            .position(|r| r.stream == *stream && r.length > 0 && r.offset >= offset + length)
            .unwrap_or(records.len());
        records.insert(at, marker);
    }
}

/// What was typed, made readable: Enter (CR, or CR LF) ends a line, so CR
/// does not overwrite the line typed before it.
pub(crate) fn input_lines(data: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !data.contains(&b'\r') {
        return std::borrow::Cow::Borrowed(data);
    }
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        match data[i] {
            b'\r' if data.get(i + 1) == Some(&b'\n') => {}
            b'\r' => out.push(b'\n'),
            b => out.push(b),
        }
        i += 1;
    }
    std::borrow::Cow::Owned(out)
}

fn raw_records(pieces: Vec<Piece>) -> Vec<OutRecord> {
    pieces
        .into_iter()
        .map(|p| OutRecord {
            stream: p.stream,
            offset: p.offset,
            length: p.data.len() as u64,
            ts_ns: p.ts_ns,
            data: p.data,
            origin: p.origin,
        })
        .collect()
}

/// Renders runs of consecutive same-stream pieces as text. Each stream keeps
/// its own escape and UTF-8 state across runs.
fn render_text(pieces: &[Piece], keep: Keep) -> Vec<OutRecord> {
    let mut renderers: [Option<TextRenderer>; 3] = [None, None, None];
    let mut out: Vec<OutRecord> = Vec::new();
    let mut i = 0;
    while i < pieces.len() {
        let stream = pieces[i].stream;
        let mut j = i;
        let r = renderers[stream.index()].get_or_insert_with(TextRenderer::new);
        let mut length = 0u64;
        // A run ends where the stream is not contiguous (output that was
        // never stored), so the hole's marker can stand between runs.
        // It ends too where another client's input begins: each record
        // says who typed it.
        while j < pieces.len()
            && pieces[j].stream == stream
            && pieces[j].origin == pieces[i].origin
            && (j == i || pieces[j].offset == pieces[j - 1].end())
        {
            let mut data = &pieces[j].data[..];
            if keep == Keep::Tail && j == i && length == 0 && out.iter().all(|o| o.stream != stream)
            {
                // A tail cut may land inside a UTF-8 character: skip its
                // continuation bytes rather than render U+FFFD.
                let skip = data.iter().take(3).take_while(|b| (0x80..0xC0).contains(*b)).count();
                data = &data[skip..];
            }
            if stream == StreamId::Stdin {
                r.push(&input_lines(data));
            } else {
                r.push(data);
            }
            length += pieces[j].data.len() as u64;
            j += 1;
        }
        let text = r.flush_line();
        if !text.is_empty() {
            out.push(OutRecord {
                stream,
                offset: pieces[i].offset,
                length,
                ts_ns: pieces[i].ts_ns,
                data: Bytes::from(text),
                origin: pieces[i].origin.clone(),
            });
        }
        i = j;
    }
    out
}

/// Renders follow records as text, keeping escape and UTF-8 state per
/// stream across records.
#[derive(Default)]
pub(crate) struct TextFollow {
    renderers: [Option<TextRenderer>; 3],
}

impl TextFollow {
    /// Renders one raw record in place.
    pub(crate) fn render(&mut self, mut rec: OutRecord) -> OutRecord {
        let r = self.renderers[rec.stream.index()].get_or_insert_with(TextRenderer::new);
        if rec.stream == StreamId::Stdin {
            r.push(&input_lines(&rec.data));
        } else {
            r.push(&rec.data);
        }
        rec.data = Bytes::from(r.flush_line());
        rec
    }
}

/// One item of a follow stream.
#[derive(Clone, Debug)]
pub(crate) enum FollowItem {
    /// Raw output.
    Output(OutRecord),
    /// History before `offset` of `stream` is gone (`length` bytes skipped).
    Gap {
        stream: StreamId,
        /// Where the requested range began.
        offset: u64,
        /// Bytes that no longer exist.
        length: u64,
    },
    /// The process ended and its output is drained.
    Ended,
}

/// Where a follow stream starts.
#[derive(Clone, Debug)]
pub(crate) enum FollowFrom {
    /// Only new output.
    End,
    /// From the start of retained history.
    Start,
    /// From offsets (unset streams: only new output).
    Cursor([Option<u64>; 3]),
}

/// Page size for history replay in follow streams.
const FOLLOW_PAGE_BYTES: u64 = 1 << 20;

/// Items buffered per follow stream before the task waits for the client.
const FOLLOW_QUEUE: usize = 32;

/// Starts a follow stream; items arrive on the returned receiver, which ends
/// after `Ended`, on error, when the daemon shuts down, or when dropped.
pub(crate) fn follow(
    h: ProcHandle,
    store: Store,
    streams: Vec<StreamId>,
    from: FollowFrom,
    cancel: CancellationToken,
    tracker: &tokio_util::task::TaskTracker,
) -> mpsc::Receiver<Result<FollowItem, ProcError>> {
    follow_attached(h, store, streams, from, None, cancel, tracker)
}

/// As [`follow`], with a subscription the caller took earlier (a run takes
/// it before writing, so its output arrives live and never needs the store).
#[allow(
    clippy::too_many_arguments,
    reason = "the parts of one follow; a struct would only rename them"
)]
pub(crate) fn follow_attached(
    h: ProcHandle,
    store: Store,
    streams: Vec<StreamId>,
    from: FollowFrom,
    attachment: Option<Attachment>,
    cancel: CancellationToken,
    tracker: &tokio_util::task::TaskTracker,
) -> mpsc::Receiver<Result<FollowItem, ProcError>> {
    let (tx, rx) = mpsc::channel(FOLLOW_QUEUE);
    tracker.spawn(async move {
        let run = follow_task(&h, &store, &streams, from, attachment, &tx);
        tokio::select! {
            res = run => {
                if let Err(e) = res {
                    // The client may be gone; nothing else to do.
                    let _ = tx.send(Err(e)).await;
                }
            }
            () = cancel.cancelled() => {}
            () = tx.closed() => {}
        }
    });
    rx
}

async fn follow_task(
    h: &ProcHandle,
    store: &Store,
    streams: &[StreamId],
    from: FollowFrom,
    attachment: Option<Attachment>,
    tx: &mpsc::Sender<Result<FollowItem, ProcError>>,
) -> Result<(), ProcError> {
    let att = match attachment {
        Some(a) => a,
        None => h.attach().await?,
    };
    let starts = h.shared.starts();
    let mut pos = att.ends;
    match from {
        FollowFrom::End => {}
        FollowFrom::Start => pos = starts,
        FollowFrom::Cursor(c) => {
            for s in streams {
                let i = s.index();
                if let Some(off) = c[i] {
                    pos[i] = off.min(att.ends[i]);
                }
            }
        }
    }
    let send = |item: FollowItem| async { tx.send(Ok(item)).await.is_ok() };
    // History up to the attachment point.
    if !catch_up(h, store, streams, &mut pos, att.ends, tx).await? {
        return Ok(());
    }
    if att.ended {
        send(FollowItem::Ended).await;
        return Ok(());
    }
    let mut events = att.events;
    loop {
        match events.recv().await {
            Ok(LiveEvent::Chunk(c)) => {
                if !streams.contains(&c.stream) {
                    continue;
                }
                let i = c.stream.index();
                if c.offset > pos[i] {
                    let mut upto = pos;
                    upto[i] = c.offset;
                    if !catch_up(h, store, &[c.stream], &mut pos, upto, tx).await? {
                        return Ok(());
                    }
                }
                if c.end() <= pos[i] {
                    continue;
                }
                let skip = usize::try_from(pos[i] - c.offset).unwrap_or(0);
                let data = c.data.slice(skip..);
                let rec = OutRecord {
                    stream: c.stream,
                    offset: pos[i],
                    length: data.len() as u64,
                    ts_ns: c.ts_ns,
                    data,
                    origin: c.origin.clone(),
                };
                pos[i] = c.end();
                if !send(FollowItem::Output(rec)).await {
                    return Ok(());
                }
            }
            Ok(LiveEvent::Ended) => {
                let ends = h.shared.ends();
                if catch_up(h, store, streams, &mut pos, ends, tx).await? {
                    send(FollowItem::Ended).await;
                }
                return Ok(());
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::debug!(proc = %h.id(), missed = n, "follower lagged; refilling from the store");
            }
            Err(broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}

/// Replays history from `pos` up to `upto` for `streams` in production
/// order. Returns false when the client went away.
async fn catch_up(
    h: &ProcHandle,
    store: &Store,
    streams: &[StreamId],
    pos: &mut [u64; 3],
    upto: [u64; 3],
    tx: &mpsc::Sender<Result<FollowItem, ProcError>>,
) -> Result<bool, ProcError> {
    let id = h.id();
    let mut flushed = false;
    loop {
        let starts = h.shared.starts();
        let mut pending = false;
        for s in streams {
            let i = s.index();
            if pos[i] < starts[i] {
                let gap =
                    FollowItem::Gap { stream: *s, offset: pos[i], length: starts[i] - pos[i] };
                if tx.send(Ok(gap)).await.is_err() {
                    return Ok(false);
                }
                pos[i] = starts[i];
            }
            pending |= pos[i] < upto[i];
        }
        if !pending {
            return Ok(true);
        }
        if !flushed {
            store.flush().await?;
            flushed = true;
        }
        let from = *pos;
        let list = streams.to_vec();
        let pieces = store
            .read(move |c| {
                let mut all = Vec::new();
                for s in &list {
                    let i = s.index();
                    all.extend(store::read_range(
                        c,
                        id,
                        *s,
                        from[i],
                        upto[i],
                        FOLLOW_PAGE_BYTES,
                        Keep::Head,
                    )?);
                }
                Ok(all)
            })
            .await?;
        let pieces = budget(pieces, FOLLOW_PAGE_BYTES, Keep::Head);
        if pieces.is_empty() {
            // The rows are gone (cleared or trimmed concurrently): report the
            // rest of the range as a gap rather than loop.
            for s in streams {
                let i = s.index();
                if pos[i] < upto[i] {
                    let gap =
                        FollowItem::Gap { stream: *s, offset: pos[i], length: upto[i] - pos[i] };
                    if tx.send(Ok(gap)).await.is_err() {
                        return Ok(false);
                    }
                    pos[i] = upto[i];
                }
            }
            return Ok(true);
        }
        for p in pieces {
            let i = p.stream.index();
            if p.offset > pos[i] {
                let gap =
                    FollowItem::Gap { stream: p.stream, offset: pos[i], length: p.offset - pos[i] };
                if tx.send(Ok(gap)).await.is_err() {
                    return Ok(false);
                }
            }
            pos[i] = p.end();
            let rec = OutRecord {
                stream: p.stream,
                offset: p.offset,
                length: p.data.len() as u64,
                ts_ns: p.ts_ns,
                data: p.data,
                origin: p.origin,
            };
            if tx.send(Ok(FollowItem::Output(rec))).await.is_err() {
                return Ok(false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(seq: i64, stream: StreamId, offset: u64, data: &'static [u8]) -> Piece {
        Piece { seq, stream, offset, ts_ns: 0, data: Bytes::from_static(data), origin: None }
    }

    #[test]
    fn budget_merges_by_production_order() {
        let pieces = vec![
            piece(1, StreamId::Stdout, 0, b"out1"),
            piece(3, StreamId::Stdout, 4, b"out2"),
            piece(2, StreamId::Stderr, 0, b"err1"),
        ];
        let head = budget(pieces.clone(), 10, Keep::Head);
        let got: Vec<_> = head.iter().map(|p| (p.seq, p.data.clone())).collect();
        assert_eq!(
            got,
            vec![
                (1, Bytes::from_static(b"out1")),
                (2, Bytes::from_static(b"err1")),
                (3, Bytes::from_static(b"ou"))
            ]
        );
        let tail = budget(pieces, 6, Keep::Tail);
        let got: Vec<_> = tail.iter().map(|p| (p.seq, p.offset, p.data.clone())).collect();
        assert_eq!(
            got,
            vec![(2, 2, Bytes::from_static(b"r1")), (3, 4, Bytes::from_static(b"out2"))]
        );
    }

    #[test]
    fn output_that_was_never_stored_is_marked_where_it_was() {
        let pieces = vec![
            piece(1, StreamId::Stdout, 0, b"before\n"),
            piece(2, StreamId::Stdout, 107, b"after\n"),
        ];
        let ends = [0, 113, 0];
        let lost = holes(&pieces, &[StreamId::Stdout], [0; 3], ends, Keep::Head, false);
        assert_eq!(lost, vec![(StreamId::Stdout, 7, 100)]);
        let mut records = render_text(&pieces, Keep::Head);
        mark_holes(&mut records, &lost);
        let text: String =
            records.iter().map(|r| String::from_utf8_lossy(&r.data).into_owned()).collect();
        assert_eq!(
            text,
            "before\n[100 bytes of output lost here: they never reached the log (a full disk, or portald killed)]\nafter\n"
        );
        // Lost at the end too; a page cut by its budget is not a hole.
        let lost = holes(&pieces, &[StreamId::Stdout], [0; 3], [0, 150, 0], Keep::Head, false);
        assert_eq!(lost.last(), Some(&(StreamId::Stdout, 113, 37)));
        let lost = holes(&pieces[..1], &[StreamId::Stdout], [0; 3], ends, Keep::Head, true);
        assert!(lost.is_empty(), "{lost:?}");
        // Contiguous rows: nothing lost.
        let whole =
            vec![piece(1, StreamId::Stdout, 0, b"ab"), piece(2, StreamId::Stdout, 2, b"cd")];
        assert!(
            holes(&whole, &[StreamId::Stdout], [0; 3], [0, 4, 0], Keep::Tail, false).is_empty()
        );
    }

    #[test]
    fn text_runs_keep_state_per_stream() {
        let pieces = vec![
            piece(1, StreamId::Stdout, 0, b"\x1b[3"),
            piece(2, StreamId::Stdout, 3, b"1mred\x1b[0m\r\n"),
            piece(3, StreamId::Stderr, 0, b"oops\n"),
        ];
        let recs = render_text(&pieces, Keep::Head);
        assert_eq!(recs.len(), 2);
        assert_eq!(&recs[0].data[..], b"red\n");
        assert_eq!(recs[0].length, 14);
        assert_eq!(&recs[1].data[..], b"oops\n");
    }
}
