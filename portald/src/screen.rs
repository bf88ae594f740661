//! The rendered terminal screen of a PTY process: a vt100 model fed on its
//! own thread so that parsing never slows capture.
//!
//! The log is the history; the screen is a derived view of the *current*
//! state, so it keeps no scrollback (vt100 parses `seq` output five times
//! slower with 10k lines of it). The actor hands every output chunk to
//! [`Screen::feed`], which only appends to a pending buffer. The thread
//! `screen-<id>` parses whatever is pending in one go, so when output comes
//! faster than it parses, work coalesces instead of queueing. The thread
//! runs at a lower CPU priority than capture.
//!
//! Bulk output is mostly lines of text that scroll away before anyone could
//! see them. [`scrolled_away`] finds such runs exactly (plain text and colour
//! changes, followed by more than two screenfuls of newer lines) and they
//! are not parsed: the screen comes out the same, for a fraction of vt100's
//! cost. The thread does this for what it parses, and [`Screen::feed`] for
//! what waits when the thread is behind, so a busy screen holds a few
//! screenfuls, not megabytes. Output that cannot be elided exactly and still
//! piles up past [`SCREEN_BACKLOG_BYTES`] loses its oldest part at a line
//! boundary, counted in `skipped_bytes`: the newest output is always
//! rendered.
//!
//! Ordering: every consumer of pending bytes takes them while holding the
//! model lock and parses them before releasing it, so bytes are parsed in
//! order whether the thread or a snapshot consumes them, and a snapshot
//! always reflects every byte fed before it was asked for.
//!
//! Guards: sizes are clamped to at least 2×2; every `process` and resize runs
//! under `catch_unwind` and a panic rebuilds a blank parser (a vt100 bug must
//! never kill the process owner); unterminated OSC bodies are capped before
//! they reach vte, which would otherwise buffer them without bound.
//!
//! Full screen: a program that uses the alternate screen is full-screen; so
//! is one that takes the main screen over without it (top; curses programs
//! under a terminal type without an alternate screen). [`Takeover`] follows
//! that as the bytes are parsed: the program cleared the screen or homed the
//! cursor, then painted down to the last row without scrolling, and it either
//! hides the cursor or places it by absolute position (a repaint from the top
//! counts). Once it owns the screen, a clear is a new page of it (top's help
//! page). A shell after `clear` does none of this, and its first scroll ends
//! any doubt: scrolling, a reset or a switch of screens ends a takeover.
//!
//! The thread ends when the [`Screen`] is dropped (the actor ended).

use std::borrow::Cow;
use std::num::NonZeroU16;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::config::MIN_TERM_DIM;
use crate::domain::{ProcId, TermSize};

/// Pending bytes at which the oldest are dropped (output that could not be
/// elided exactly, say a flood of cursor movement). vt100 parses 50–90
/// MB/s, so 1 MiB is about 15 ms of work: the screen is never more than
/// that behind, and a hundred busy screens stay within 100 MiB.
pub(crate) const SCREEN_BACKLOG_BYTES: usize = 1 << 20;

/// Output replayed to rebuild the final screen of a process from an earlier
/// daemon: enough for any screen's worth of drawing after the last full
/// redraw, cheap to parse.
pub(crate) const REPLAY_BYTES: u64 = 1 << 20;

/// Longest OSC body passed to the parser. Titles and notifications are far
/// shorter; past this, bytes are dropped until the terminator.
const OSC_BODY_MAX: usize = 4096;

/// Where the screen sends its answers to terminal queries (DSR, DA):
/// into the program's input, as a terminal would.
pub(crate) type Replier = Box<dyn Fn(Vec<u8>) + Send>;

/// A rendered screen at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// Size.
    pub(crate) size: TermSize,
    /// Visible rows, trailing spaces trimmed.
    pub(crate) lines: Vec<String>,
    /// Cursor (row, col), 0-based.
    pub(crate) cursor: (u16, u16),
    /// Alternate screen in use.
    pub(crate) alternate: bool,
    /// A full-screen program draws: the alternate screen is in use, or a
    /// program took the main screen over (see [`Takeover`]).
    pub(crate) full_screen: bool,
    /// Window title.
    pub(crate) title: String,
    /// Bracketed paste enabled.
    pub(crate) bracketed_paste: bool,
    /// Application cursor keys enabled.
    pub(crate) application_cursor: bool,
    /// Cursor hidden.
    pub(crate) cursor_hidden: bool,
    /// Bytes dropped unrendered because the screen fell behind.
    pub(crate) skipped_bytes: u64,
    /// Output offset this snapshot is rendered up to.
    pub(crate) offset: u64,
}

#[derive(Default)]
struct Callbacks {
    title: String,
    /// Answers to terminal queries, to be written to the program.
    replies: Vec<u8>,
}

/// Primary device attributes: a VT100 with advanced video, the answer most
/// programs expect and accept.
const DA1_REPLY: &[u8] = b"\x1b[?1;2c";
/// Secondary device attributes: terminal type 0, firmware 10, ROM 1.
const DA2_REPLY: &[u8] = b"\x1b[>0;10;1c";

impl vt100::Callbacks for Callbacks {
    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.title = String::from_utf8_lossy(title).into_owned();
    }

    /// vt100 does not answer terminal queries; a headless PTY must, or TUIs
    /// and agent CLIs wait forever at startup.
    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        _i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        let first = params.first().and_then(|p| p.first()).copied().unwrap_or(0);
        match (c, i1, first) {
            ('n', None, 6) => {
                let (row, col) = screen.cursor_position();
                self.replies.extend_from_slice(format!("\x1b[{};{}R", row + 1, col + 1).as_bytes());
            }
            ('n', None, 5) => self.replies.extend_from_slice(b"\x1b[0n"),
            ('c', None, 0) => self.replies.extend_from_slice(DA1_REPLY),
            ('c', Some(b'>'), 0) => self.replies.extend_from_slice(DA2_REPLY),
            _ => {}
        }
    }

    /// OSC 7501 `?`: a program asking whether the terminal takes its status
    /// reports (Claude Code asks, then follows with a DA query; an answer
    /// that comes after the DA answer means "no"). Answered here, in order
    /// with the DA answer, by echoing the probe.
    fn unhandled_osc(&mut self, _: &mut vt100::Screen, params: &[&[u8]]) {
        if params == [b"7501".as_slice(), b"?".as_slice()] {
            self.replies.extend_from_slice(PROGRAM_STATUS_REPLY);
        }
    }
}

/// The answer to an OSC 7501 status probe: the probe echoed back.
const PROGRAM_STATUS_REPLY: &[u8] = b"\x1b]7501;?\x07";

/// Nice value of screen threads: below the readers and the log writer, so
/// parsing never takes CPU from capture; a busy screen coalesces instead.
const SCREEN_NICE: i32 = 10;

struct Pending {
    buf: Vec<u8>,
    skipped: u64,
    /// Bytes of `buf` already elided exactly (see [`scrolled_away`]): they
    /// count as rendered.
    elided: u64,
    closed: bool,
    /// Rows the pending bytes will be parsed at.
    rows: u16,
    /// No OSC is open where `buf` begins (the model is not mid-parse and
    /// ended outside one), so `buf` may be compacted.
    ground: bool,
}

impl Pending {
    fn new(rows: u16) -> Self {
        Self { buf: Vec::new(), skipped: 0, elided: 0, closed: false, rows, ground: true }
    }
}

struct Model {
    parser: vt100::Parser<Callbacks>,
    takeover: Takeover,
    replier: Option<Replier>,
    size: TermSize,
    osc: OscGuard,
    spare: Vec<u8>,
    rendered: u64,
    skipped: u64,
    id: ProcId,
}

struct Inner {
    pending: Mutex<Pending>,
    wake: Condvar,
    model: Mutex<Model>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding these locks is caught inside Model; the data is
    // consistent at every await-free step, so recover rather than cascade.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Clamps a size to what vt100 and programs handle.
pub(crate) fn clamp(size: TermSize) -> TermSize {
    TermSize { rows: size.rows.max(MIN_TERM_DIM), cols: size.cols.max(MIN_TERM_DIM) }
}

#[allow(clippy::disallowed_methods, reason = "this is the one sanctioned constructor")]
fn new_parser(size: TermSize, callbacks: Callbacks) -> vt100::Parser<Callbacks> {
    let size = clamp(size);
    let rows = NonZeroU16::new(size.rows).unwrap_or(NonZeroU16::MIN);
    let cols = NonZeroU16::new(size.cols).unwrap_or(NonZeroU16::MIN);
    vt100::Parser::new_with_callbacks(rows, cols, 0, callbacks)
}

impl Model {
    fn process(&mut self, bytes: &[u8]) {
        self.rendered += bytes.len() as u64;
        let filtered = self.osc.filter(bytes);
        // Parsed in pieces cut where the takeover needs to see the cursor:
        // before a line feed while the screen is taken over, after a
        // sequence that homes, clears, places or scrolls.
        let mut start = 0;
        // Where the sequence being scanned began (its ESC), when in this
        // piece: what came before it is parsed and settled first, so the
        // sequence sees the screen as painted up to it.
        let mut seq_start = 0;
        for (i, &b) in filtered.iter().enumerate() {
            if b == 0x1b {
                seq_start = i;
            }
            match self.takeover.scan(b) {
                None => {}
                Some(Event::Down) => {
                    self.parse_piece(&filtered[start..i]);
                    start = i;
                    self.takeover.before_down(self.parser.screen());
                }
                Some(event) => {
                    let from = seq_start.clamp(start, i);
                    self.parse_piece(&filtered[start..from]);
                    self.takeover.settle(self.parser.screen());
                    self.parse_piece(&filtered[from..=i]);
                    start = i + 1;
                    self.takeover.after(event, self.parser.screen());
                }
            }
        }
        self.parse_piece(&filtered[start..]);
        self.takeover.settle(self.parser.screen());
        let replies = std::mem::take(&mut self.parser.callbacks_mut().replies);
        if let (false, Some(r)) = (replies.is_empty(), &self.replier) {
            r(replies);
        }
    }

    /// Feeds bytes to vt100, rebuilding a blank screen if it panics.
    fn parse_piece(&mut self, piece: &[u8]) {
        if piece.is_empty() {
            return;
        }
        let parser = &mut self.parser;
        if catch_unwind(AssertUnwindSafe(|| parser.process(piece))).is_err() {
            self.rebuild("process");
        }
    }

    fn rebuild(&mut self, during: &str) {
        tracing::warn!(proc = %self.id, during, "vt100 panicked; rebuilding a blank screen (the log is intact)");
        let title = std::mem::take(&mut self.parser.callbacks_mut().title);
        self.parser = new_parser(self.size, Callbacks { title, replies: Vec::new() });
        self.takeover.paint = Paint::Off;
    }

    /// Parses everything pending. Must be called with the model lock held.
    fn drain(&mut self, pending: &Mutex<Pending>) -> usize {
        self.drain_then(pending, |_| {})
    }

    /// [`Model::drain`], running `f` on the pending state at the moment its
    /// bytes are taken (so that what is fed afterwards sees its effect).
    /// Returns how many bytes it took.
    fn drain_then(&mut self, pending: &Mutex<Pending>, f: impl FnOnce(&mut Pending)) -> usize {
        let taken;
        {
            let mut p = lock(pending);
            std::mem::swap(&mut p.buf, &mut self.spare);
            self.skipped += std::mem::take(&mut p.skipped);
            self.rendered += std::mem::take(&mut p.elided);
            taken = self.spare.len();
            f(&mut p);
            if !self.spare.is_empty() {
                // Unknown until these bytes are parsed.
                p.ground = false;
            }
        }
        if !self.spare.is_empty() {
            let bytes = std::mem::take(&mut self.spare);
            self.parse(&bytes);
            // A burst's buffer is not kept for an idle screen.
            if bytes.capacity() <= SPARE_KEEP_BYTES {
                self.spare = bytes;
                self.spare.clear();
            }
            lock(pending).ground = self.osc.state == OscState::Ground;
        }
        taken
    }

    /// Parses `bytes`, skipping lines that scroll away unseen.
    fn parse(&mut self, bytes: &[u8]) {
        let ground = self.osc.state == OscState::Ground;
        match scrolled_away(bytes, self.size.rows, ground) {
            Some(skip) => {
                self.process(&bytes[..skip.from]);
                // Only the colours the skipped lines set survive them.
                self.process(&skip.sgr);
                self.rendered += (skip.to - skip.from - skip.sgr.len()) as u64;
                self.process(&bytes[skip.to..]);
            }
            None => self.process(bytes),
        }
    }

    #[allow(clippy::disallowed_methods, reason = "the one sanctioned resize, clamped and guarded")]
    fn resize(&mut self, size: TermSize) {
        self.size = clamp(size);
        let rows = NonZeroU16::new(self.size.rows).unwrap_or(NonZeroU16::MIN);
        let cols = NonZeroU16::new(self.size.cols).unwrap_or(NonZeroU16::MIN);
        let parser = &mut self.parser;
        if catch_unwind(AssertUnwindSafe(|| parser.set_size(rows, cols))).is_err() {
            self.rebuild("resize");
        }
        // The painted screen was of the old size: it is full again once
        // repainted down to the new last row.
        if let Paint::On { bottom, .. } = &mut self.takeover.paint {
            *bottom = false;
        }
    }

    fn snapshot(&self) -> Snapshot {
        let s = self.parser.screen();
        let lines = s.rows(0, self.size.cols).map(|l| l.trim_end().to_owned()).collect();
        Snapshot {
            size: self.size,
            lines,
            cursor: s.cursor_position(),
            alternate: s.alternate_screen(),
            full_screen: s.alternate_screen() || self.takeover.full_screen(s),
            title: self.parser.callbacks().title.clone(),
            bracketed_paste: s.bracketed_paste(),
            application_cursor: s.application_cursor(),
            cursor_hidden: s.hide_cursor(),
            skipped_bytes: self.skipped,
            offset: self.rendered + self.skipped,
        }
    }
}

/// Renders a screen from `bytes` (output from offset `from`) without a
/// thread, for processes whose screen must be rebuilt from the log.
pub(crate) fn replay(id: ProcId, size: TermSize, bytes: &[u8], from: u64) -> Snapshot {
    let mut model = blank_model(id, size, from);
    model.parse(bytes);
    model.snapshot()
}

/// [`replay`] parsing every byte in pieces of `piece` bytes, with no skips:
/// the reference that skipping must match.
#[cfg(test)]
pub(crate) fn replay_every_byte(size: TermSize, bytes: &[u8], piece: usize) -> Snapshot {
    let mut model = blank_model(ProcId(0), size, 0);
    for p in bytes.chunks(piece.max(1)) {
        model.process(p);
    }
    model.snapshot()
}

/// Feeds `bytes` in pieces of `piece` bytes to a live screen whose thread is
/// held off, so every piece goes through [`Screen::feed`]'s elision, then
/// snapshots: the other path that must match [`replay_every_byte`].
#[cfg(test)]
pub(crate) fn replay_through_feed(size: TermSize, bytes: &[u8], piece: usize) -> Snapshot {
    let s = Screen::spawn(ProcId(0), size, None).expect("screen thread");
    let view = s.view();
    {
        let _hold = lock(&view.inner.model);
        for p in bytes.chunks(piece.max(1)) {
            s.feed(p);
        }
    }
    view.snapshot()
}

fn blank_model(id: ProcId, size: TermSize, from: u64) -> Model {
    let size = clamp(size);
    Model {
        parser: new_parser(size, Callbacks::default()),
        takeover: Takeover::default(),
        replier: None,
        size,
        osc: OscGuard::default(),
        spare: Vec::new(),
        rendered: 0,
        skipped: from,
        id,
    }
}

/// The actor's end: feeds and resizes. Dropping it stops the thread.
#[derive(Debug)]
pub(crate) struct Screen {
    view: ScreenView,
}

/// A cloneable read-only end for snapshots.
#[derive(Clone)]
pub(crate) struct ScreenView {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ScreenView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScreenView").finish_non_exhaustive()
    }
}

impl Screen {
    /// Creates the model and starts its thread. Terminal queries in the
    /// output are answered through `replier`.
    pub(crate) fn spawn(
        id: ProcId,
        size: TermSize,
        replier: Option<Replier>,
    ) -> std::io::Result<Self> {
        let size = clamp(size);
        let inner = Arc::new(Inner {
            pending: Mutex::new(Pending::new(size.rows)),
            wake: Condvar::new(),
            model: Mutex::new(Model {
                parser: new_parser(size, Callbacks::default()),
                takeover: Takeover::default(),
                replier,
                size,
                osc: OscGuard::default(),
                spare: Vec::new(),
                rendered: 0,
                skipped: 0,
                id,
            }),
        });
        let worker = Arc::clone(&inner);
        std::thread::Builder::new().name(format!("screen-{id}")).stack_size(256 << 10).spawn(
            move || {
                if let Err(e) = crate::sys::lower_thread_priority(SCREEN_NICE) {
                    tracing::debug!(error = %e, "cannot lower the screen thread's priority");
                }
                run(&worker);
            },
        )?;
        Ok(Self { view: ScreenView { inner } })
    }

    /// Seeds a fresh screen with what an earlier daemon's screen showed (its
    /// redraw, or the log's tail) as of output offset `offset`, answering no
    /// terminal query in it: those were answered when the program asked.
    /// Call before the first feed. Blocking (it parses).
    pub(crate) fn restore(&self, bytes: &[u8], offset: u64) {
        let mut m = lock(&self.view.inner.model);
        let replier = m.replier.take();
        m.parse(bytes);
        // Replies the seed produced are dropped with the callbacks' buffer.
        m.parser.callbacks_mut().replies.clear();
        m.replier = replier;
        m.rendered = 0;
        m.skipped = offset;
    }

    /// Appends output for the thread to parse. Never blocks on parsing.
    pub(crate) fn feed(&self, bytes: &[u8]) {
        let mut p = lock(&self.view.inner.pending);
        if p.buf.len() + bytes.len() > COMPACT_AT_BYTES {
            // The screen is behind: elide lines that will scroll away unseen
            // now, so a busy screen holds a few screenfuls, not megabytes.
            p.buf.extend_from_slice(bytes);
            if let Some(skip) = scrolled_away(&p.buf, p.rows, p.ground) {
                let gone = skip.to - skip.from - skip.sgr.len();
                p.buf.splice(skip.from..skip.to, skip.sgr);
                p.elided += gone as u64;
            }
            if p.buf.len() > SCREEN_BACKLOG_BYTES {
                let dropped = cut_point(&p.buf, p.buf.len() - SCREEN_BACKLOG_BYTES / 2);
                p.buf.drain(..dropped);
                p.skipped += dropped as u64;
            }
        } else if p.buf.len() + bytes.len() > SCREEN_BACKLOG_BYTES {
            p.buf.extend_from_slice(bytes);
            let dropped = cut_point(&p.buf, p.buf.len() - SCREEN_BACKLOG_BYTES / 2);
            p.buf.drain(..dropped);
            p.skipped += dropped as u64;
        } else {
            p.buf.extend_from_slice(bytes);
        }
        drop(p);
        self.view.inner.wake.notify_one();
    }

    /// Resizes the model after parsing everything fed so far. Blocking: call
    /// it from a blocking context.
    pub(crate) fn resize(&self, size: TermSize) {
        let mut m = lock(&self.view.inner.model);
        let rows = clamp(size).rows;
        m.drain_then(&self.view.inner.pending, |p| p.rows = rows);
        m.resize(size);
    }

    /// The read-only end.
    pub(crate) fn view(&self) -> ScreenView {
        self.view.clone()
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        lock(&self.view.inner.pending).closed = true;
        self.view.inner.wake.notify_one();
    }
}

impl ScreenView {
    /// A snapshot reflecting every byte fed so far. Blocking (it may parse):
    /// call it from a blocking context.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let mut m = lock(&self.inner.model);
        m.drain(&self.inner.pending);
        m.snapshot()
    }

    /// A snapshot taken right here when that is cheap: the model is free
    /// and little is pending. Saves async callers a blocking-pool hop on
    /// every wait; `None` means use [`ScreenView::snapshot`] off the runtime.
    pub(crate) fn try_snapshot(&self) -> Option<Snapshot> {
        let mut m = match self.inner.model.try_lock() {
            Ok(m) => m,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        if lock(&self.inner.pending).buf.len() > INLINE_PARSE_BYTES {
            return None;
        }
        m.drain(&self.inner.pending);
        Some(m.snapshot())
    }

    /// Escape sequences that make a real terminal show this screen (buffer,
    /// contents, attributes, cursor, input modes, title), and the output
    /// offset they reflect, for a terminal attaching mid-session. Blocking.
    pub(crate) fn redraw(&self) -> (Vec<u8>, u64) {
        let mut m = lock(&self.inner.model);
        m.drain(&self.inner.pending);
        let screen = m.parser.screen();
        let mut out = Vec::new();
        out.extend_from_slice(if screen.alternate_screen() {
            b"\x1b[?1049h"
        } else {
            b"\x1b[?1049l"
        });
        out.extend_from_slice(b"\x1b[H\x1b[2J");
        out.extend_from_slice(screen.state_formatted().as_bytes());
        let title = &m.parser.callbacks().title;
        if !title.is_empty() {
            out.extend_from_slice(format!("\x1b]0;{title}\x07").as_bytes());
        }
        (out, m.rendered + m.skipped)
    }
}

/// Most pending bytes an async caller parses itself for a snapshot (about
/// a tenth of a millisecond of vt100); more goes to the blocking pool.
const INLINE_PARSE_BYTES: usize = 8 << 10;

/// Pending bytes at which [`Screen::feed`] elides lines that will scroll
/// away (the screen thread is behind): half a millisecond of vt100, so a
/// hundred busy screens hold a few MiB between them.
const COMPACT_AT_BYTES: usize = 32 << 10;

/// How long the screen thread rests after parsing a bulk stretch.
const BULK_PACE: std::time::Duration = std::time::Duration::from_millis(10);

/// Largest buffer a screen keeps between bursts.
const SPARE_KEEP_BYTES: usize = 64 << 10;

/// Pending bytes from which [`scrolled_away`] looks for lines to skip:
/// below it parsing is cheap, and two screenfuls of lines must fit anyway.
const EXACT_SKIP_MIN_BYTES: usize = 8 << 10;

/// A run of lines in `bytes` that cannot change what the screen shows,
/// so parsing it (most of the cost of bulk output) can be skipped
/// exactly: the resulting screen is the same. Conditions:
/// - the run is whole lines of text, tabs, backspaces, bells and SGR
///   colour changes (whose net effect is replayed), nothing that moves
///   the cursor elsewhere, changes a mode or asks for a reply;
/// - it starts after the first line (which completes any sequence the
///   previous input left open) and both its boundaries are CR LF, so the
///   lines after it begin at column 0 either way;
/// - more than two screenfuls of lines follow it: the first brings the
///   cursor to the bottom wherever it was, the second scrolls in fresh
///   rows for everything that stays visible.
///
/// `None` when there is no such run.
fn scrolled_away(bytes: &[u8], rows: u16, ground: bool) -> Option<Skip> {
    if bytes.len() < EXACT_SKIP_MIN_BYTES || !ground {
        return None;
    }
    let from = memchr::memchr(b'\n', bytes)? + 1;
    let mut to = bytes.len();
    for _ in 0..2 * usize::from(rows) + 2 {
        to = memchr::memrchr(b'\n', &bytes[..to])?;
    }
    let to = to + 1;
    let crlf = |end: usize| end >= 2 && bytes[end - 2] == b'\r';
    if to <= from || !crlf(from) || !crlf(to) {
        return None;
    }
    let sgr = plain_text_sgr(&bytes[from..to])?;
    Some(Skip { from, to, sgr })
}

/// Lines that scroll away unseen (see [`scrolled_away`]).
struct Skip {
    from: usize,
    to: usize,
    /// The SGR sequences of the skipped lines, in order.
    sgr: Vec<u8>,
}

/// Most SGR bytes an elided run may leave behind: colour changes since the
/// last reset are replayed, and output that never resets is parsed instead.
const MAX_ELIDED_SGR_BYTES: usize = 4 << 10;

/// The SGR sequences (`ESC [ params m`) in `text` since its last reset, if
/// everything else in it is printable text, UTF-8, tab, CR, LF, backspace or
/// BEL; `None` otherwise.
fn plain_text_sgr(text: &[u8]) -> Option<Vec<u8>> {
    let mut sgr = Vec::new();
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            0x1b => {
                let params = text.get(i + 1).filter(|&&b| b == b'[').map(|_| i + 2)?;
                let end = params
                    + text[params..]
                        .iter()
                        .position(|b| !matches!(b, b'0'..=b'9' | b';' | b':'))?;
                if text[end] != b'm' {
                    return None;
                }
                if matches!(&text[params..end], b"" | b"0") {
                    // A reset: the colours set before it no longer matter.
                    sgr.clear();
                }
                sgr.extend_from_slice(&text[i..=end]);
                if sgr.len() > MAX_ELIDED_SGR_BYTES {
                    return None;
                }
                i = end + 1;
            }
            b'\t' | b'\n' | b'\r' | 0x08 | 0x07 | 0x20..=0x7e | 0x80..=0xff => i += 1,
            _ => return None,
        }
    }
    Some(sgr)
}

/// First index at or after `at` that follows a newline (or `at` if none), so
/// dropping a prefix keeps whole lines and never splits a UTF-8 character or
/// an escape sequence in the common case.
fn cut_point(buf: &[u8], at: usize) -> usize {
    buf[at..].iter().position(|&b| b == b'\n').map_or(at, |i| at + i + 1)
}

fn run(inner: &Inner) {
    loop {
        {
            let mut p = lock(&inner.pending);
            while p.buf.is_empty() && p.skipped == 0 && !p.closed {
                p = inner.wake.wait(p).unwrap_or_else(PoisonError::into_inner);
            }
            if p.closed {
                return;
            }
        }
        let taken = lock(&inner.model).drain(&inner.pending);
        if taken >= EXACT_SKIP_MIN_BYTES {
            // Bulk output: let the next stretch gather, so that most of it
            // scrolls away unparsed. Snapshots parse what is pending
            // themselves, so they are never stale.
            #[allow(
                clippy::disallowed_methods,
                reason = "the screen's own thread, pacing itself; nothing waits on it"
            )]
            std::thread::sleep(BULK_PACE);
        }
    }
}

/// Whether a program took the main screen over (see the module doc): a
/// scanner of the escape sequences that matter, run on every parsed byte,
/// and what they did to the cursor.
#[derive(Default)]
struct Takeover {
    /// Where the scanner is in an escape sequence.
    state: ScanState,
    /// The CSI being read has a private marker (`?`).
    private: bool,
    /// Its parameters (the first few: the rest never matter here).
    params: [u16; TAKEOVER_PARAMS],
    /// How many of `params` are in use (the one being read included).
    nparams: usize,
    /// What the program did to the main screen.
    paint: Paint,
}

/// CSI parameters kept by [`Takeover`]: modes come one or a few at a time
/// (`?1049`, `?1;1049`); a longer list is still read, its tail ignored.
const TAKEOVER_PARAMS: usize = 4;

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum ScanState {
    #[default]
    Ground,
    Esc,
    Csi,
    /// An OSC, DCS, SOS, PM or APC string, until BEL or ST.
    Str,
    /// ESC inside a string.
    StrEsc,
}

/// What the program did to the main screen.
#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
enum Paint {
    /// Nothing that takes it over (or it scrolled since).
    #[default]
    Off,
    /// It cleared the screen or homed the cursor and has not scrolled since.
    On {
        /// It painted down to the last row.
        bottom: bool,
        /// It behaved as the screen's owner since: placed the cursor by
        /// absolute position, repainted from the top, or hid the cursor over
        /// the painted screen. A clear keeps it: a new page of the program
        /// (top's help), not a shell's `clear`.
        owned: bool,
    },
}

/// A sequence [`Takeover`] acts on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Event {
    /// A line feed (LF, VT, FF, IND, NEL): scrolls at the last row.
    Down,
    /// CUP or HVP: homes the cursor or places it.
    Place,
    /// VPA: places the cursor on a row.
    Row,
    /// ED with its parameter.
    Erase(u16),
    /// SU: scrolls.
    Scroll,
    /// A switch between the main and the alternate screen, or a reset.
    Switch,
    /// The cursor shown or hidden, moved up, or restored: what was painted
    /// before it is settled first, so that no split of the bytes changes
    /// the outcome.
    Move,
}

impl Takeover {
    /// Scans one byte; returns the event it completes. Line feeds are
    /// events only while the screen is taken over (else they cannot matter,
    /// and bulk output is not cut into lines).
    fn scan(&mut self, b: u8) -> Option<Event> {
        match self.state {
            ScanState::Ground => match b {
                0x1b => self.state = ScanState::Esc,
                b'\n' | 0x0b | 0x0c if self.paint != Paint::Off => return Some(Event::Down),
                _ => {}
            },
            ScanState::Esc => {
                self.state = ScanState::Ground;
                match b {
                    b'[' => self.enter_csi(),
                    b']' | b'P' | b'X' | b'^' | b'_' => self.state = ScanState::Str,
                    b'D' | b'E' if self.paint != Paint::Off => return Some(Event::Down),
                    b'c' => return Some(Event::Switch),
                    b'M' | b'8' => return Some(Event::Move),
                    0x1b => self.state = ScanState::Esc,
                    _ => {}
                }
            }
            ScanState::Csi => match b {
                b'0'..=b'9' => {
                    let i = self.nparams.saturating_sub(1);
                    if let Some(p) = self.params.get_mut(i) {
                        *p = p.saturating_mul(10).saturating_add(u16::from(b - b'0'));
                    }
                }
                b';' | b':' => self.nparams += 1,
                b'?' | b'<' | b'=' | b'>' => self.private = true,
                0x20..=0x2f => {}
                0x40..=0x7e => {
                    self.state = ScanState::Ground;
                    return self.csi_final(b);
                }
                0x1b => self.state = ScanState::Esc,
                // A control character inside a CSI is executed by vt100 as
                // it would be outside; only line feeds matter here.
                b'\n' | 0x0b | 0x0c if self.paint != Paint::Off => return Some(Event::Down),
                _ => {}
            },
            ScanState::Str => match b {
                0x07 => self.state = ScanState::Ground,
                0x1b => self.state = ScanState::StrEsc,
                _ => {}
            },
            ScanState::StrEsc => {
                self.state = if b == b'\\' { ScanState::Ground } else { ScanState::Str };
            }
        }
        None
    }

    fn enter_csi(&mut self) {
        self.state = ScanState::Csi;
        self.private = false;
        self.params = [0; TAKEOVER_PARAMS];
        self.nparams = 1;
    }

    fn csi_final(&mut self, b: u8) -> Option<Event> {
        let used = &self.params[..self.nparams.min(TAKEOVER_PARAMS)];
        match (b, self.private) {
            (b'H' | b'f', false) => Some(Event::Place),
            (b'd', false) => Some(Event::Row),
            (b'J', false) => Some(Event::Erase(self.params[0])),
            (b'S', false) => Some(Event::Scroll),
            (b'A' | b'F' | b'r' | b'u', false) => Some(Event::Move),
            (b'h' | b'l', true) if used.iter().any(|p| matches!(p, 47 | 1047 | 1049)) => {
                Some(Event::Switch)
            }
            (b'h' | b'l', true) if used.contains(&25) => Some(Event::Move),
            _ => None,
        }
    }

    /// Before a line feed is parsed: at the last row it scrolls the screen,
    /// which a painted screen never does.
    fn before_down(&mut self, screen: &vt100::Screen) {
        if !screen.alternate_screen() && on_last_row(screen) {
            self.paint = Paint::Off;
        }
    }

    /// After a sequence that homes, clears, places, scrolls or switches.
    fn after(&mut self, event: Event, screen: &vt100::Screen) {
        if event == Event::Switch {
            self.paint = Paint::Off;
            return;
        }
        if screen.alternate_screen() {
            return;
        }
        let home = screen.cursor_position() == (0, 0);
        self.paint = match (self.paint, event) {
            (_, Event::Scroll) => Paint::Off,
            // A cleared screen starts a new painting; its owner stays one.
            (Paint::Off, Event::Erase(2)) => Paint::On { bottom: false, owned: false },
            (Paint::Off, Event::Erase(0) | Event::Place) if home => {
                Paint::On { bottom: false, owned: false }
            }
            (Paint::On { owned, .. }, Event::Erase(2)) => Paint::On { bottom: false, owned },
            (Paint::On { owned, .. }, Event::Erase(0)) if home => {
                Paint::On { bottom: false, owned }
            }
            // Back to the top of a screen painted to its end: a repaint.
            (Paint::On { bottom: true, .. }, Event::Place) if home => {
                Paint::On { bottom: true, owned: true }
            }
            (Paint::On { bottom, .. }, Event::Place | Event::Row) if !home => {
                Paint::On { bottom, owned: true }
            }
            (paint, _) => paint,
        };
        self.settle(screen);
    }

    /// After a piece is parsed: note a cursor on the last row, and a cursor
    /// hidden over the painted screen.
    fn settle(&mut self, screen: &vt100::Screen) {
        if let Paint::On { bottom, owned } = &mut self.paint
            && !screen.alternate_screen()
        {
            *bottom |= on_last_row(screen);
            *owned |= *bottom && screen.hide_cursor();
        }
    }

    /// The main screen is taken over now.
    fn full_screen(&self, screen: &vt100::Screen) -> bool {
        match self.paint {
            Paint::On { bottom, owned } => !screen.alternate_screen() && bottom && owned,
            Paint::Off => false,
        }
    }
}

/// The cursor is on the screen's last row.
fn on_last_row(screen: &vt100::Screen) -> bool {
    screen.cursor_position().0.saturating_add(1) >= screen.size().0.get()
}

/// Caps OSC bodies before vte sees them (vte buffers an OSC body without
/// bound until a terminator).
#[derive(Default)]
struct OscGuard {
    state: OscState,
    body: usize,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum OscState {
    #[default]
    Ground,
    Esc,
    Osc,
}

impl OscGuard {
    fn filter<'a>(&mut self, input: &'a [u8]) -> Cow<'a, [u8]> {
        if self.state == OscState::Ground && !input.contains(&0x1b) {
            return Cow::Borrowed(input);
        }
        let mut out: Option<Vec<u8>> = None;
        for (i, &b) in input.iter().enumerate() {
            let keep = self.step(b);
            match (&mut out, keep) {
                (None, true) => {}
                (None, false) => {
                    let mut v = Vec::with_capacity(input.len());
                    v.extend_from_slice(&input[..i]);
                    out = Some(v);
                }
                (Some(v), true) => v.push(b),
                (Some(_), false) => {}
            }
        }
        out.map_or(Cow::Borrowed(input), Cow::Owned)
    }

    fn step(&mut self, b: u8) -> bool {
        match self.state {
            OscState::Ground => {
                if b == 0x1b {
                    self.state = OscState::Esc;
                }
                true
            }
            OscState::Esc => {
                self.state = match b {
                    b']' => {
                        self.body = 0;
                        OscState::Osc
                    }
                    0x1b => OscState::Esc,
                    _ => OscState::Ground,
                };
                true
            }
            OscState::Osc => match b {
                0x07 | 0x18 | 0x1a => {
                    self.state = OscState::Ground;
                    true
                }
                0x1b => {
                    self.state = OscState::Esc;
                    true
                }
                _ => {
                    self.body += 1;
                    self.body <= OSC_BODY_MAX
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_plain_lines_are_skipped_and_anything_else_is_not() {
        let skip_of = |b: &[u8]| scrolled_away(b, 24, true);
        let lines: String =
            (0..1000).map(|i| format!("\x1b[3{}mline {i}\x1b[0m\r\n", i % 8)).collect();
        let skip = skip_of(lines.as_bytes()).expect("plain lines are skipped");
        assert!(skip.to - skip.from > lines.len() / 2);
        assert_eq!(skip.sgr, b"\x1b[0m");
        // A cursor move, a mode change or bare LFs keep every byte parsed.
        for odd in ["\x1b[H", "\x1b[?1049h", "\x1b[6n"] {
            let text = lines.replacen("line 500", &format!("line{odd}"), 1);
            assert!(skip_of(text.as_bytes()).is_none(), "{odd:?}");
        }
        assert!(skip_of(lines.replace("\r\n", "\n").as_bytes()).is_none());
        // Inside an open OSC nothing is plain text.
        assert!(scrolled_away(lines.as_bytes(), 24, false).is_none());
    }

    /// A screen of `rows` rows painted like top: home, clear, rows ended by
    /// CR LF but the last, which ends the screen.
    fn painted(rows: u16, hide: bool, frames: usize) -> Vec<u8> {
        let mut out = Vec::new();
        if hide {
            out.extend_from_slice(b"\x1b[?25l");
        }
        out.extend_from_slice(b"\x1b[H\x1b[2J");
        for frame in 0..frames {
            if frame > 0 {
                out.extend_from_slice(b"\x1b[H");
            }
            let rows: Vec<String> =
                (0..rows).map(|r| format!("row {r} of {frame}\x1b[K")).collect();
            out.extend_from_slice(rows.join("\r\n").as_bytes());
        }
        out
    }

    #[test]
    fn a_program_painting_the_main_screen_is_full_screen_until_it_scrolls() {
        let size = TermSize { rows: 6, cols: 20 };
        let full = |bytes: &[u8]| {
            let every = replay_every_byte(size, bytes, 1);
            let whole = replay(ProcId(0), size, bytes, 0);
            assert_eq!(every.full_screen, whole.full_screen, "any split gives the same");
            whole.full_screen
        };
        // top: home, clear, every row, the cursor hidden.
        let top = painted(6, true, 1);
        assert!(full(&top));
        assert!(!replay(ProcId(0), size, &top, 0).alternate);
        // Repainting from the top in place takes it over with a cursor too.
        assert!(!full(&painted(6, false, 1)), "one painting with the cursor shown");
        assert!(full(&painted(6, false, 2)), "a repaint");
        // Placing the cursor by position after a clear (curses without an
        // alternate screen).
        assert!(full(b"\x1b[H\x1b[2JEvery 1s\x1b[1;12Hnow\x1b[3;1Hout\x1b[6;20H"));
        // Another page after a clear, the cursor shown (top's help).
        let mut help = top.clone();
        help.extend_from_slice(b"\x1b[?25h\x1b[H\x1b[2J");
        help.extend_from_slice(b"Help\r\n\r\n\r\n\r\n\r\nType 'q' to continue \x1b[J");
        assert!(full(&help));
        // Quitting scrolls: no longer full-screen.
        let mut quit = top.clone();
        quit.extend_from_slice(b"\x1b[7;1H\r\n\x1b[?25h$ ");
        assert!(!full(&quit));
        // A shell after `clear` fills the screen line by line: never.
        let mut shell = b"\x1b[H\x1b[2J\x1b[3J$ ".to_vec();
        for i in 0..5 {
            shell.extend_from_slice(format!("ls\r\nfile{i}\r\n$ ").as_bytes());
        }
        assert!(!full(&shell));
        let mut cleared_again = painted(6, false, 1);
        cleared_again.extend_from_slice(b"\x1b[H\x1b[2J$ ");
        assert!(!full(&cleared_again), "a clear starts over");
        // The alternate screen is full-screen; leaving it is not.
        assert!(full(b"\x1b[?1049hvim"));
        let mut back = top;
        back.extend_from_slice(b"\x1b[?1049h\x1b[H\x1b[2Jless\x1b[?1049l");
        assert!(!full(&back), "a switch of screens ends a takeover");
    }

    fn screen(rows: u16, cols: u16) -> Screen {
        Screen::spawn(ProcId(1), TermSize { rows, cols }, None).unwrap()
    }

    #[test]
    fn renders_text_cursor_and_title() {
        let s = screen(4, 20);
        s.feed(b"hello\r\nwor");
        s.feed(b"ld\x1b]0;my title\x07");
        let snap = s.view().snapshot();
        assert_eq!(snap.lines, vec!["hello", "world", "", ""]);
        assert_eq!(snap.cursor, (1, 5));
        assert_eq!(snap.title, "my title");
        assert!(!snap.alternate);
        assert_eq!(snap.offset, 25);
    }

    #[test]
    fn alternate_screen_split_across_feeds() {
        let s = screen(5, 10);
        s.feed(b"\x1b[?10");
        s.feed(b"49h");
        assert!(s.view().snapshot().alternate);
        s.feed(b"\x1b[?1049l");
        assert!(!s.view().snapshot().alternate);
    }

    #[test]
    fn utf8_split_across_feeds() {
        let s = screen(3, 10);
        let e = "é".as_bytes();
        s.feed(&e[..1]);
        s.feed(&e[1..]);
        assert_eq!(s.view().snapshot().lines[0], "é");
    }

    #[test]
    fn tiny_sizes_are_clamped() {
        let s = screen(0, 1);
        s.feed("漢字テスト\r\nabc".as_bytes());
        let snap = s.view().snapshot();
        assert_eq!(snap.size, TermSize { rows: 2, cols: 2 });
        s.resize(TermSize { rows: 1, cols: 1 });
        assert_eq!(s.view().snapshot().size, TermSize { rows: 2, cols: 2 });
    }

    #[test]
    fn a_busy_screen_elides_plain_lines_exactly() {
        let s = screen(3, 20);
        let view = s.view();
        let guard = lock(&view.inner.model);
        let line = b"0123456789012345678\r\n";
        let n = 4 * COMPACT_AT_BYTES / line.len();
        for _ in 0..n {
            s.feed(line);
        }
        s.feed(b"last");
        assert!(lock(&view.inner.pending).buf.len() < COMPACT_AT_BYTES + line.len());
        drop(guard);
        let snap = view.snapshot();
        assert_eq!(snap.skipped_bytes, 0, "elided lines are not lost lines");
        assert_eq!(snap.lines, ["0123456789012345678", "0123456789012345678", "last"]);
        assert_eq!(snap.offset, (n * line.len()) as u64 + 4);
    }

    #[test]
    fn backlog_drops_oldest_whole_lines() {
        let s = screen(3, 20);
        // Hold the model lock so nothing is parsed while the backlog grows.
        let view = s.view();
        let guard = lock(&view.inner.model);
        // Erase-line sequences: not plain text, so nothing can be elided.
        let line = b"01234567890123\x1b[K\r\n";
        let n = SCREEN_BACKLOG_BYTES / line.len() + 10;
        for _ in 0..n {
            s.feed(line);
        }
        s.feed(b"last");
        drop(guard);
        let snap = view.snapshot();
        assert!(snap.skipped_bytes > 0);
        assert_eq!(snap.skipped_bytes % line.len() as u64, 0);
        assert_eq!(snap.lines[2], "last");
        assert_eq!(snap.offset, (n * line.len()) as u64 + 4);
    }

    #[test]
    fn unterminated_osc_is_capped() {
        let mut g = OscGuard::default();
        let mut total = 0;
        total += g.filter(b"ab\x1b]0;").len();
        for _ in 0..100 {
            total += g.filter(&[b'y'; 1000]).len();
        }
        assert!(total <= 6 + OSC_BODY_MAX, "{total}");
        assert_eq!(&*g.filter(b"\x07plain"), b"\x07plain");
    }

    #[test]
    fn random_bytes_never_escape_the_guard() {
        let s = screen(2, 2);
        let mut x: u32 = 12345;
        for round in 0..200 {
            let mut buf = Vec::new();
            for _ in 0..512 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                buf.push(x.to_le_bytes()[0]);
            }
            s.feed(&buf);
            if round % 20 == 0 {
                let dim = u16::try_from(x % 7).unwrap();
                s.resize(TermSize { rows: dim, cols: dim + 1 });
            }
        }
        let snap = s.view().snapshot();
        assert!(snap.size.rows >= 2 && snap.size.cols >= 2);
    }
}
