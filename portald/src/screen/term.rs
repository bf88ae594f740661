//! The terminal model: alacritty_terminal's `Term`, fed through a handler
//! that corrects where it differs from a real terminal, and the only code
//! that touches the crate's parser and grid.
//!
//! Why alacritty_terminal (figures in ARCHITECTURE.md): it does charsets
//! with line drawing, autowrap off, insert mode, tab stops, both forms of
//! save/restore cursor, IND/NEL/RI and DECALN, which vt100 did not, and it
//! parses about twice as fast in less memory. What it still gets wrong is
//! corrected in [`Corrected`], each with tmux 3.3a as the reference:
//! - `?47` and `?1047` are ignored by it: here they switch screens, clearing
//!   the alternate one on entry and leaving the cursor where it is.
//! - A ZWJ sequence (`👨‍👩‍👧`) would take one wide cell per part: here the
//!   character after a ZWJ joins the cell before it, as terminals draw it.
//! - DECALN leaves the cursor and margins alone: here it homes the cursor
//!   and resets the margins.
//! - DA answers are Portal's (a VT100 with advanced video, the answer most
//!   programs expect), not alacritty's.
//!
//! Synchronized output (`?2026`) is not held back: a snapshot reflects every
//! byte fed, whatever a program's frame boundaries.

use std::sync::{Arc, Mutex, PoisonError};

use alacritty_terminal::event::{Event, EventListener};
use alacritty_terminal::grid::{Dimensions, Grid};
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::cell::{Cell, Flags};
use alacritty_terminal::term::{Config, Term, TermMode};
use alacritty_terminal::vte::ansi::{
    self, CharsetIndex, Handler, NamedPrivateMode, PrivateMode, Processor, StandardCharset, Timeout,
};

use crate::domain::TermSize;

/// Primary device attributes: a VT100 with advanced video, the answer most
/// programs expect and accept.
const DA1_REPLY: &str = "\x1b[?1;2c";
/// Secondary device attributes: terminal type 0, firmware 10, ROM 1.
const DA2_REPLY: &str = "\x1b[>0;10;1c";

/// Zero-width joiner: the character after it joins the one before.
const ZWJ: char = '\u{200d}';

/// What the model tells the rest of Portal as it parses: answers to
/// terminal queries and the title. Shared with the `Term`, which reports
/// through `&self`.
#[derive(Default)]
struct Inbox {
    replies: Vec<u8>,
    title: String,
}

/// The `Term`'s event sink.
#[derive(Clone, Default)]
pub(super) struct Events(Arc<Mutex<Inbox>>);

impl Events {
    fn inbox(&self) -> std::sync::MutexGuard<'_, Inbox> {
        // Only this model's thread locks it, never across a panic point
        // that leaves it inconsistent.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl EventListener for Events {
    fn send_event(&self, event: Event) {
        match event {
            Event::PtyWrite(text) => self.inbox().replies.extend_from_slice(text.as_bytes()),
            Event::Title(title) => self.inbox().title = title,
            Event::ResetTitle => self.inbox().title.clear(),
            _ => {}
        }
    }
}

/// Synchronized output never holds bytes back (see the module doc).
#[derive(Default)]
struct NoSync;

impl Timeout for NoSync {
    fn set_timeout(&mut self, _: std::time::Duration) {}
    fn clear_timeout(&mut self) {}
    fn pending_timeout(&self) -> bool {
        false
    }
}

/// A size in the form the crate takes.
struct Dims(TermSize);

impl Dimensions for Dims {
    fn total_lines(&self) -> usize {
        usize::from(self.0.rows)
    }
    fn screen_lines(&self) -> usize {
        usize::from(self.0.rows)
    }
    fn columns(&self) -> usize {
        usize::from(self.0.cols)
    }
}

/// State of Portal's corrections that the `Term` does not keep.
#[derive(Default)]
struct Fixes {
    /// The last character was a ZWJ: the next one joins its cell.
    joining: bool,
    /// The primary screen's saved cursor (DECSC) while `?47`/`?1047` show
    /// the alternate one: entering through the crate's swap overwrites it.
    primary_saved: Option<alacritty_terminal::grid::Cursor<Cell>>,
    /// The scroll region (top, bottom; 1-based) when it is not the whole
    /// screen.
    region: Option<(usize, usize)>,
    /// G1 or another set is shifted in (SO) instead of G0.
    shifted: bool,
}

/// One terminal screen: the model, its parser and Portal's corrections.
pub(crate) struct Terminal {
    term: Term<Events>,
    parser: Processor<NoSync>,
    events: Events,
    fixes: Fixes,
}

impl Terminal {
    /// A blank screen of `size` (already clamped), keeping no scrollback:
    /// history is the log's job.
    #[allow(clippy::disallowed_methods, reason = "the one sanctioned constructor")]
    pub(crate) fn new(size: TermSize) -> Self {
        let events = Events::default();
        let config = Config { scrolling_history: 0, ..Config::default() };
        let term = Term::new(config, &Dims(size), events.clone());
        Self { term, parser: Processor::new(), events, fixes: Fixes::default() }
    }

    /// Parses `bytes`.
    pub(crate) fn advance(&mut self, bytes: &[u8]) {
        let mut handler =
            Corrected { term: &mut self.term, fixes: &mut self.fixes, events: &self.events };
        self.parser.advance(&mut handler, bytes);
    }

    /// Resizes (already clamped). Text reflows to the new width, as in tmux.
    #[allow(clippy::disallowed_methods, reason = "the one sanctioned resize")]
    pub(crate) fn resize(&mut self, size: TermSize) {
        self.term.resize(Dims(size));
        // The crate resets the scroll region on resize.
        self.fixes.region = None;
    }

    /// Takes the answers to terminal queries produced so far.
    pub(crate) fn take_replies(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.events.inbox().replies)
    }

    /// Queues an answer Portal gives itself (after what was parsed so far).
    pub(crate) fn reply(&mut self, bytes: &[u8]) {
        self.events.inbox().replies.extend_from_slice(bytes);
    }

    /// The window title.
    pub(crate) fn title(&self) -> String {
        self.events.inbox().title.clone()
    }

    /// Sets the title (a model rebuilt after a panic keeps it).
    pub(crate) fn set_title(&mut self, title: String) {
        self.events.inbox().title = title;
    }

    /// Rows on screen.
    pub(crate) fn rows(&self) -> u16 {
        u16::try_from(self.term.screen_lines()).unwrap_or(u16::MAX)
    }

    /// Cursor (row, col), 0-based, on the cell where a terminal draws it:
    /// after the last column is written, that column (tmux reports one
    /// past it until the next character wraps).
    pub(crate) fn cursor(&self) -> (u16, u16) {
        let p = self.term.grid().cursor.point;
        let row = u16::try_from(p.line.0.max(0)).unwrap_or(u16::MAX);
        let col = u16::try_from(p.column.0).unwrap_or(u16::MAX);
        (row, col)
    }

    fn mode(&self, mode: TermMode) -> bool {
        self.term.mode().contains(mode)
    }

    /// The alternate screen is shown.
    pub(crate) fn alternate(&self) -> bool {
        self.mode(TermMode::ALT_SCREEN)
    }

    /// The cursor is hidden.
    pub(crate) fn cursor_hidden(&self) -> bool {
        !self.mode(TermMode::SHOW_CURSOR)
    }

    /// Bracketed paste is on.
    pub(crate) fn bracketed_paste(&self) -> bool {
        self.mode(TermMode::BRACKETED_PASTE)
    }

    /// Cursor keys send application sequences.
    pub(crate) fn application_cursor(&self) -> bool {
        self.mode(TermMode::APP_CURSOR)
    }

    /// The terminal is in the state plain lines of text are elided in
    /// (see `elide`): autowrap on, insert and origin modes off, no scroll
    /// region, ASCII shown, no ZWJ waiting for its next character.
    pub(crate) fn plain(&self) -> bool {
        let charset = self.term.grid().cursor.charsets[CharsetIndex::G0];
        self.mode(TermMode::LINE_WRAP)
            && !self.mode(TermMode::INSERT)
            && !self.mode(TermMode::ORIGIN)
            && self.fixes.region.is_none()
            && !self.fixes.shifted
            && !self.fixes.joining
            && charset == StandardCharset::Ascii
    }

    /// The visible rows as text, trailing spaces trimmed: a wide character
    /// once, combining and joined characters with their base.
    pub(crate) fn lines(&self) -> Vec<String> {
        let grid = self.term.grid();
        (0..grid.screen_lines()).map(|line| row_text(grid, line)).collect()
    }

    /// The model, for the redraw.
    pub(super) fn term(&self) -> &Term<Events> {
        &self.term
    }

    /// The scroll region (top, bottom; 1-based) when it is not the whole
    /// screen.
    pub(super) fn region(&self) -> Option<(usize, usize)> {
        self.fixes.region
    }

    /// A set other than G0 is shifted in (SO).
    pub(super) fn shifted(&self) -> bool {
        self.fixes.shifted
    }
}

/// The text of screen row `line`.
fn row_text(grid: &Grid<Cell>, line: usize) -> String {
    let row = &grid[Line(i32::try_from(line).unwrap_or(i32::MAX))];
    let mut text = String::with_capacity(grid.columns());
    for col in 0..grid.columns() {
        let cell = &row[Column(col)];
        if cell.flags.contains(Flags::WIDE_CHAR_SPACER) {
            continue;
        }
        // The crate keeps a tab in the cell it jumped from, for copying.
        text.push(if cell.c == '\t' { ' ' } else { cell.c });
        if let Some(extra) = cell.zerowidth() {
            text.extend(extra);
        }
    }
    text.truncate(text.trim_end_matches(' ').len());
    text
}

/// The crate's handler with Portal's corrections (see the module doc).
struct Corrected<'a> {
    term: &'a mut Term<Events>,
    fixes: &'a mut Fixes,
    events: &'a Events,
}

impl Corrected<'_> {
    /// The cell a zero-width character joins: the last one written.
    fn join_last(&mut self, c: char) {
        let grid = self.term.grid_mut();
        let line = grid.cursor.point.line;
        let mut col = grid.cursor.point.column.0;
        if !grid.cursor.input_needs_wrap {
            col = col.saturating_sub(1);
        }
        if grid[line][Column(col)].flags.contains(Flags::WIDE_CHAR_SPACER) {
            col = col.saturating_sub(1);
        }
        grid[line][Column(col)].push_zerowidth(c);
    }

    /// `?47h` / `?1047h`: the alternate screen, cleared, the cursor where it
    /// was, the primary screen's saved cursor kept.
    fn enter_alternate(&mut self) {
        if self.term.mode().contains(TermMode::ALT_SCREEN) {
            return;
        }
        self.fixes.primary_saved = Some(self.term.grid().saved_cursor.clone());
        self.term.swap_alt();
    }

    /// `?47l` / `?1047l`: back to the primary screen, the cursor where it is.
    fn leave_alternate(&mut self) {
        if !self.term.mode().contains(TermMode::ALT_SCREEN) {
            return;
        }
        let cursor = self.term.grid().cursor.clone();
        self.term.swap_alt();
        let grid = self.term.grid_mut();
        grid.cursor = cursor;
        if let Some(saved) = self.fixes.primary_saved.take() {
            grid.saved_cursor = saved;
        }
    }

    fn is_47(mode: &PrivateMode) -> bool {
        matches!(mode, PrivateMode::Unknown(47 | 1047))
    }
}

/// Forwards handler methods to the `Term` unchanged.
macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            fn $name(&mut self, $($arg: $ty),*) {
                self.term.$name($($arg),*);
            }
        )*
    };
}

impl Handler for Corrected<'_> {
    fn input(&mut self, c: char) {
        if std::mem::take(&mut self.fixes.joining) {
            self.join_last(c);
            self.fixes.joining = c == ZWJ;
            return;
        }
        self.fixes.joining = c == ZWJ;
        self.term.input(c);
    }

    fn identify_terminal(&mut self, intermediate: Option<char>) {
        let answer = match intermediate {
            None => DA1_REPLY,
            Some('>') => DA2_REPLY,
            Some(_) => return,
        };
        // The same sink as the crate's answers: in order with them.
        self.events.inbox().replies.extend_from_slice(answer.as_bytes());
    }

    fn set_private_mode(&mut self, mode: PrivateMode) {
        if Self::is_47(&mode) {
            self.enter_alternate();
        } else {
            self.term.set_private_mode(mode);
        }
    }

    fn unset_private_mode(&mut self, mode: PrivateMode) {
        if Self::is_47(&mode) {
            self.leave_alternate();
        } else {
            // Leaving 1049 also ends a 47/1047 session's saved slot.
            if matches!(mode, PrivateMode::Named(NamedPrivateMode::SwapScreenAndSetRestoreCursor)) {
                self.fixes.primary_saved = None;
            }
            self.term.unset_private_mode(mode);
        }
    }

    fn decaln(&mut self) {
        self.term.decaln();
        self.set_scrolling_region(1, None);
    }

    fn set_scrolling_region(&mut self, top: usize, bottom: Option<usize>) {
        let lines = self.term.screen_lines();
        let end = bottom.unwrap_or(lines);
        // The crate's rule: valid when top < bottom, then clamped.
        if top < end {
            let whole = top <= 1 && end >= lines;
            self.fixes.region = (!whole).then_some((top.clamp(1, lines), end.min(lines)));
        }
        self.term.set_scrolling_region(top, bottom);
    }

    fn set_active_charset(&mut self, index: CharsetIndex) {
        self.fixes.shifted = index != CharsetIndex::G0;
        self.term.set_active_charset(index);
    }

    fn reset_state(&mut self) {
        *self.fixes = Fixes::default();
        self.term.reset_state();
    }

    forward! {
        set_title(title: Option<String>);
        set_cursor_style(style: Option<ansi::CursorStyle>);
        set_cursor_shape(shape: ansi::CursorShape);
        goto(line: i32, col: usize);
        goto_line(line: i32);
        goto_col(col: usize);
        insert_blank(count: usize);
        move_up(count: usize);
        move_down(count: usize);
        device_status(arg: usize);
        move_forward(col: usize);
        move_backward(col: usize);
        move_down_and_cr(row: usize);
        move_up_and_cr(row: usize);
        put_tab(count: u16);
        backspace();
        carriage_return();
        linefeed();
        bell();
        substitute();
        newline();
        set_horizontal_tabstop();
        scroll_up(count: usize);
        scroll_down(count: usize);
        insert_blank_lines(count: usize);
        delete_lines(count: usize);
        erase_chars(count: usize);
        delete_chars(count: usize);
        move_backward_tabs(count: u16);
        move_forward_tabs(count: u16);
        save_cursor_position();
        restore_cursor_position();
        clear_line(mode: ansi::LineClearMode);
        clear_screen(mode: ansi::ClearMode);
        clear_tabs(mode: ansi::TabulationClearMode);
        set_tabs(interval: u16);
        reverse_index();
        terminal_attribute(attr: ansi::Attr);
        set_mode(mode: ansi::Mode);
        unset_mode(mode: ansi::Mode);
        report_mode(mode: ansi::Mode);
        report_private_mode(mode: PrivateMode);
        set_keypad_application_mode();
        unset_keypad_application_mode();
        configure_charset(index: CharsetIndex, charset: StandardCharset);
        set_color(index: usize, color: ansi::Rgb);
        dynamic_color_sequence(prefix: String, index: usize, terminator: &str);
        reset_color(index: usize);
        clipboard_store(clipboard: u8, data: &[u8]);
        clipboard_load(clipboard: u8, terminator: &str);
        push_title();
        pop_title();
        text_area_size_pixels();
        text_area_size_chars();
        set_hyperlink(link: Option<ansi::Hyperlink>);
        set_mouse_cursor_icon(icon: ansi::cursor_icon::CursorIcon);
        report_keyboard_mode();
        push_keyboard_mode(mode: ansi::KeyboardModes);
        pop_keyboard_modes(count: u16);
        set_keyboard_mode(mode: ansi::KeyboardModes, behavior: ansi::KeyboardModesApplyBehavior);
        set_modify_other_keys(mode: ansi::ModifyOtherKeys);
        report_modify_other_keys();
        set_scp(path: ansi::ScpCharPath, update: ansi::ScpUpdateMode);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rows: u16, cols: u16, bytes: &str) -> Terminal {
        let mut t = Terminal::new(TermSize { rows, cols });
        t.advance(bytes.as_bytes());
        t
    }

    fn first(t: &Terminal, n: usize) -> Vec<String> {
        t.lines().into_iter().take(n).collect()
    }

    /// The cases vt100 got wrong, each as tmux 3.3a shows it (the
    /// differential test in tests/e2e/screen_diff.rs compares with tmux
    /// itself).
    #[test]
    fn the_corrected_cases_render_as_a_terminal_shows_them() {
        let t = run(4, 20, "\x1b(0lqqk\r\nx  x\r\nmqqj\x1b(B ok");
        assert_eq!(first(&t, 3), ["┌──┐", "│  │", "└──┘ ok"]);
        let t = run(2, 20, "\x1b)0a\x0eqq\x0fq");
        assert_eq!(first(&t, 1), ["a──q"]);
        let t = run(3, 10, &format!("\x1b[?7l{}", "a".repeat(15)));
        assert_eq!(first(&t, 2), ["a".repeat(10), String::new()]);
        assert_eq!(t.cursor(), (0, 9));
        let t = run(2, 20, "abcdef\r\x1b[4hXY");
        assert_eq!(first(&t, 1), ["XYabcdef"]);
        assert_eq!(t.cursor(), (0, 2));
        let t = run(2, 20, "\x1b[3g\x1b[5G\x1bH\x1b[1G\tX");
        assert_eq!(first(&t, 1), ["    X"]);
        let t = run(4, 20, "ab\x1b[s\x1b[3;5Hzz\x1b[uc");
        assert_eq!(first(&t, 3), ["abc", "", "    zz"]);
        let t = run(3, 20, "a\x1bDb\x1bEc");
        assert_eq!(first(&t, 3), ["a", " b", "c"]);
        let t = run(3, 4, "\x1b[2;3r\x1b[3;3H\x1b#8");
        assert_eq!(t.lines(), ["EEEE"; 3]);
        assert_eq!((t.cursor(), t.region()), ((0, 0), None));
        // 47 and 1047: a cleared alternate screen, the cursor left where it is.
        for mode in ["47", "1047"] {
            let t = run(3, 20, &format!("main\x1b[?{mode}halt\x1b[?{mode}l"));
            assert_eq!(
                (first(&t, 1), t.cursor(), t.alternate()),
                (vec!["main".into()], (0, 7), false)
            );
            let t = run(3, 20, &format!("main\x1b[?{mode}h\x1b[?{mode}l\x1b[?{mode}h"));
            assert_eq!((first(&t, 1), t.alternate()), (vec![String::new()], true), "{mode}");
        }
        // DECSC survives a 47 session.
        let t = run(3, 20, "\x1b[2;3H\x1b7\x1b[?47h\x1b[3;9H\x1b[?47l\x1b8");
        assert_eq!(t.cursor(), (1, 2));
        // A ZWJ family takes one wide cell; VS16 does not widen.
        let t = run(2, 20, "👨\u{200d}👩\u{200d}👧|");
        assert_eq!((first(&t, 1), t.cursor()), (vec!["👨\u{200d}👩\u{200d}👧|".into()], (0, 3)));
        let t = run(2, 20, "❤\u{fe0f}|");
        assert_eq!((first(&t, 1), t.cursor()), (vec!["❤\u{fe0f}|".into()], (0, 2)));
    }

    #[test]
    fn queries_are_answered_in_order_with_portals_device_attributes() {
        let mut t = run(3, 20, "ab\x1b[6n\x1b[c\x1b[>c\x1b[5n");
        assert_eq!(t.take_replies(), b"\x1b[1;3R\x1b[?1;2c\x1b[>0;10;1c\x1b[0n");
        assert!(t.take_replies().is_empty());
    }

    #[test]
    fn synchronized_output_is_not_held_back() {
        let t = run(2, 20, "\x1b[?2026hframe");
        assert_eq!(first(&t, 1), ["frame"]);
    }

    #[test]
    fn the_plain_state_is_left_by_any_mode_that_changes_where_text_lands() {
        assert!(run(3, 20, "text\x1b[1mbold").plain());
        for odd in
            ["\x1b[?7l", "\x1b[4h", "\x1b[?6h", "\x1b[1;2r", "\x1b(0", "\x1b)0\x0e", "a\u{200d}"]
        {
            assert!(!run(3, 20, odd).plain(), "{odd:?}");
        }
        assert!(run(3, 20, "\x1b[1;2r\x1b[r\x1b(0\x1b(B").plain());
    }
}
