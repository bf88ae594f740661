//! The rendered terminal screen of a PTY process: a terminal model
//! ([`term`]) fed on its own thread so that parsing never slows capture.
//!
//! The log is the history; the screen is a derived view of the *current*
//! state, so it keeps no scrollback. The actor hands every output chunk to
//! [`Screen::feed`], which only appends to a pending buffer. The thread
//! `screen-<id>` parses whatever is pending in one go, so when output comes
//! faster than it parses, work coalesces instead of queueing. The thread
//! runs at a lower CPU priority than capture.
//!
//! Bulk output is mostly lines of text that scroll away before anyone could
//! see them. [`scrolled_away`] finds such runs exactly (plain text and colour
//! changes, followed by more than two screenfuls of newer lines) and they
//! are not parsed: the screen comes out the same, for a fraction of the
//! model's cost. The thread does this for what it parses, and [`Screen::feed`] for
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
//! under `catch_unwind` and a panic rebuilds a blank model (a bug in it must
//! never kill the process owner); unterminated OSC bodies are capped before
//! they reach the parser, which would otherwise buffer them without bound.
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

mod elide;
mod osc;
mod redraw;
mod takeover;
mod term;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::config::MIN_TERM_DIM;
use crate::domain::{ProcId, TermSize};

use elide::{EXACT_SKIP_MIN_BYTES, cut_point, scrolled_away};
use osc::{OscGuard, OscState};
use takeover::{Event, Paint, Takeover};
use term::Terminal;

/// Pending bytes at which the oldest are dropped (output that could not be
/// elided exactly, say a flood of cursor movement). The model parses 60–120
/// MB/s, so 1 MiB is about 10 ms of work: the screen is never more than
/// that behind, and a hundred busy screens stay within 100 MiB.
pub(crate) const SCREEN_BACKLOG_BYTES: usize = 1 << 20;

/// Output replayed to rebuild the final screen of a process from an earlier
/// daemon: enough for any screen's worth of drawing after the last full
/// redraw, cheap to parse.
pub(crate) const REPLAY_BYTES: u64 = 1 << 20;

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
    /// Plain lines may be elided from where `buf` begins: the model ended
    /// outside any sequence, in its plain state (see [`Model::plain`]).
    plain: bool,
}

impl Pending {
    fn new(rows: u16) -> Self {
        Self { buf: Vec::new(), skipped: 0, elided: 0, closed: false, rows, plain: true }
    }
}

struct Model {
    term: Terminal,
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

/// Clamps a size to what the model and programs handle.
pub(crate) fn clamp(size: TermSize) -> TermSize {
    TermSize { rows: size.rows.max(MIN_TERM_DIM), cols: size.cols.max(MIN_TERM_DIM) }
}

impl Model {
    fn process(&mut self, bytes: &[u8]) {
        self.rendered += bytes.len() as u64;
        let filtered = self.osc.filter(bytes);
        let mut probes = std::mem::take(&mut self.osc.probes);
        probes.reverse();
        // Parsed in pieces cut where the takeover needs to see the cursor:
        // before a line feed while the screen is taken over, after a
        // sequence that homes, clears, places or scrolls; and after a status
        // probe, answered in order with what the model answers.
        let mut start = 0;
        // Where the sequence being scanned began (its ESC), when in this
        // piece: what came before it is parsed and settled first, so the
        // sequence sees the screen as painted up to it.
        let mut seq_start = 0;
        for (i, &b) in filtered.iter().enumerate() {
            if probes.last() == Some(&i) {
                probes.pop();
                self.parse_piece(&filtered[start..i]);
                start = i;
                self.term.reply(PROGRAM_STATUS_REPLY);
            }
            if b == 0x1b {
                seq_start = i;
            }
            match self.takeover.scan(b) {
                None => {}
                Some(Event::Down) => {
                    self.parse_piece(&filtered[start..i]);
                    start = i;
                    self.takeover.before_down(&self.term);
                }
                Some(event) => {
                    let from = seq_start.clamp(start, i);
                    self.parse_piece(&filtered[start..from]);
                    self.takeover.settle(&self.term);
                    self.parse_piece(&filtered[from..=i]);
                    start = i + 1;
                    self.takeover.after(event, &self.term);
                }
            }
        }
        self.parse_piece(&filtered[start..]);
        if probes.pop() == Some(filtered.len()) {
            self.term.reply(PROGRAM_STATUS_REPLY);
        }
        self.takeover.settle(&self.term);
        let replies = self.term.take_replies();
        if let (false, Some(r)) = (replies.is_empty(), &self.replier) {
            r(replies);
        }
    }

    /// Feeds bytes to the model, rebuilding a blank screen if it panics.
    fn parse_piece(&mut self, piece: &[u8]) {
        if piece.is_empty() {
            return;
        }
        let term = &mut self.term;
        if catch_unwind(AssertUnwindSafe(|| term.advance(piece))).is_err() {
            self.rebuild("process");
        }
    }

    fn rebuild(&mut self, during: &str) {
        tracing::warn!(proc = %self.id, during, "the terminal model panicked; rebuilding a blank screen (the log is intact)");
        let title = self.term.title();
        self.term = Terminal::new(self.size);
        self.term.set_title(title);
        self.takeover.paint = Paint::Off;
    }

    /// Plain lines may be elided from here (see [`elide::scrolled_away`]):
    /// no sequence or string is open and the terminal is in its plain state.
    fn plain(&self) -> bool {
        self.osc.state == OscState::Ground && self.takeover.at_ground() && self.term.plain()
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
                p.plain = false;
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
            lock(pending).plain = self.plain();
        }
        taken
    }

    /// Parses `bytes`, skipping lines that scroll away unseen.
    fn parse(&mut self, bytes: &[u8]) {
        match scrolled_away(bytes, self.size.rows, self.plain()) {
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

    fn resize(&mut self, size: TermSize) {
        self.size = clamp(size);
        let (term, to) = (&mut self.term, self.size);
        if catch_unwind(AssertUnwindSafe(|| term.resize(to))).is_err() {
            self.rebuild("resize");
        }
        // The painted screen was of the old size: it is full again once
        // repainted down to the new last row.
        if let Paint::On { bottom, .. } = &mut self.takeover.paint {
            *bottom = false;
        }
    }

    fn snapshot(&self) -> Snapshot {
        let t = &self.term;
        Snapshot {
            size: self.size,
            lines: t.lines(),
            cursor: t.cursor(),
            alternate: t.alternate(),
            full_screen: t.alternate() || self.takeover.full_screen(t),
            title: t.title(),
            bracketed_paste: t.bracketed_paste(),
            application_cursor: t.application_cursor(),
            cursor_hidden: t.cursor_hidden(),
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
        term: Terminal::new(size),
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
                term: Terminal::new(size),
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
        // Answers to queries in the seed were given when the program asked.
        m.term.take_replies();
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
            if let Some(skip) = scrolled_away(&p.buf, p.rows, p.plain) {
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
        let out = redraw::redraw(&m.term);
        (out, m.rendered + m.skipped)
    }
}

/// Most pending bytes an async caller parses itself for a snapshot (about
/// a tenth of a millisecond of parsing); more goes to the blocking pool.
const INLINE_PARSE_BYTES: usize = 8 << 10;

/// Pending bytes at which [`Screen::feed`] elides lines that will scroll
/// away (the screen thread is behind): half a millisecond of parsing, so a
/// hundred busy screens hold a few MiB between them.
const COMPACT_AT_BYTES: usize = 32 << 10;

/// How long the screen thread rests after parsing a bulk stretch.
const BULK_PACE: std::time::Duration = std::time::Duration::from_millis(10);

/// Largest buffer a screen keeps between bursts.
const SPARE_KEEP_BYTES: usize = 64 << 10;

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
