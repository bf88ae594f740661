//! The rendered terminal screen of a PTY process: a vt100 model fed on its
//! own thread so that parsing never slows capture.
//!
//! The log is the history; the screen is a derived view of the *current*
//! state, so it keeps no scrollback (vt100 parses `seq` output five times
//! slower with 10k lines of it). The actor hands every output chunk to
//! [`Screen::feed`], which only appends to a pending buffer. The thread
//! `screen-<id>` parses whatever is pending in one go, so when output comes
//! faster than it parses, work coalesces instead of queueing. If the pending
//! buffer still exceeds [`SCREEN_BACKLOG_BYTES`] (bulk output far faster than
//! vt100), its oldest part is dropped at a line boundary and counted in
//! `skipped_bytes`: the newest output, which is what the screen shows after
//! plain scrolling, is always rendered.
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
//! The thread ends when the [`Screen`] is dropped (the actor ended).

use std::borrow::Cow;
use std::num::NonZeroU16;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::config::MIN_TERM_DIM;
use crate::proc::spawn::Replier;
use crate::proc::{ProcId, TermSize};

/// Pending bytes at which the oldest are dropped. vt100 parses 50–90 MB/s,
/// so 4 MiB is tens of milliseconds of work: the screen is never more than
/// that behind, and memory per process stays bounded.
pub(crate) const SCREEN_BACKLOG_BYTES: usize = 4 << 20;

/// Output replayed to rebuild the final screen of a process from an earlier
/// daemon: enough for any screen's worth of drawing after the last full
/// redraw, cheap to parse.
pub(crate) const REPLAY_BYTES: u64 = 1 << 20;

/// Longest OSC body passed to the parser. Titles and notifications are far
/// shorter; past this, bytes are dropped until the terminator.
const OSC_BODY_MAX: usize = 4096;

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
}

#[derive(Default)]
struct Pending {
    buf: Vec<u8>,
    skipped: u64,
    closed: bool,
}

struct Model {
    parser: vt100::Parser<Callbacks>,
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
        let parser = &mut self.parser;
        if catch_unwind(AssertUnwindSafe(|| parser.process(&filtered))).is_err() {
            self.rebuild("process");
        }
        let replies = std::mem::take(&mut self.parser.callbacks_mut().replies);
        if let (false, Some(r)) = (replies.is_empty(), &self.replier) {
            r.send(replies);
        }
    }

    fn rebuild(&mut self, during: &str) {
        tracing::warn!(proc = %self.id, during, "vt100 panicked; rebuilding a blank screen (the log is intact)");
        let title = std::mem::take(&mut self.parser.callbacks_mut().title);
        self.parser = new_parser(self.size, Callbacks { title, replies: Vec::new() });
    }

    /// Parses everything pending. Must be called with the model lock held.
    fn drain(&mut self, pending: &Mutex<Pending>) {
        {
            let mut p = lock(pending);
            std::mem::swap(&mut p.buf, &mut self.spare);
            self.skipped += std::mem::take(&mut p.skipped);
        }
        if !self.spare.is_empty() {
            let bytes = std::mem::take(&mut self.spare);
            self.process(&bytes);
            self.spare = bytes;
            self.spare.clear();
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
    }

    fn snapshot(&self) -> Snapshot {
        let s = self.parser.screen();
        let lines = s.rows(0, self.size.cols).map(|l| l.trim_end().to_owned()).collect();
        Snapshot {
            size: self.size,
            lines,
            cursor: s.cursor_position(),
            alternate: s.alternate_screen(),
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
    let size = clamp(size);
    let mut model = Model {
        parser: new_parser(size, Callbacks::default()),
        replier: None,
        size,
        osc: OscGuard::default(),
        spare: Vec::new(),
        rendered: 0,
        skipped: from,
        id,
    };
    model.process(bytes);
    model.snapshot()
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
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
            model: Mutex::new(Model {
                parser: new_parser(size, Callbacks::default()),
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
        std::thread::Builder::new()
            .name(format!("screen-{id}"))
            .stack_size(256 << 10)
            .spawn(move || run(&worker))?;
        Ok(Self { view: ScreenView { inner } })
    }

    /// Appends output for the thread to parse. Never blocks on parsing.
    pub(crate) fn feed(&self, bytes: &[u8]) {
        let mut p = lock(&self.view.inner.pending);
        if p.buf.len() + bytes.len() > SCREEN_BACKLOG_BYTES {
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
        m.drain(&self.view.inner.pending);
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
        lock(&inner.model).drain(&inner.pending);
    }
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
    fn backlog_drops_oldest_whole_lines() {
        let s = screen(3, 20);
        // Hold the model lock so nothing is parsed while the backlog grows.
        let view = s.view();
        let guard = lock(&view.inner.model);
        let line = b"0123456789012345678\r\n";
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
