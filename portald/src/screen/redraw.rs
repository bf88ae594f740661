//! The escape sequences that make a real terminal show a [`Terminal`]'s
//! screen: for a terminal attaching mid-session (attach, the dashboard) and
//! for seeding the screen of a program adopted after a restart.
//!
//! Written from the model's cells, not replayed: the buffer in use, every
//! cell with its colours and attributes, the scroll region, the modes that
//! change what the next bytes do (autowrap, insert, origin, charsets), the
//! input modes (cursor keys, keypad, bracketed paste, mouse, focus), the
//! cursor with its attributes and visibility, and the title.

use std::fmt::Write as _;

use alacritty_terminal::grid::Dimensions;
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::TermMode;
use alacritty_terminal::term::cell::{Cell, Flags};
use alacritty_terminal::vte::ansi::{CharsetIndex, Color, NamedColor, StandardCharset};

use super::term::Terminal;

/// Sequences that reproduce `t` on a terminal of the same size.
pub(crate) fn redraw(t: &Terminal) -> Vec<u8> {
    let term = t.term();
    let grid = term.grid();
    let mode = *term.mode();
    let mut out = String::new();
    out.push_str(if mode.contains(TermMode::ALT_SCREEN) { "\x1b[?1049h" } else { "\x1b[?1049l" });
    // Plain state, whole-screen region, home, cleared: cells are written
    // with autowrap and insert off so that each lands where it belongs.
    out.push_str("\x1b[0m\x1b[r\x1b[?6l\x1b[4l\x1b[?7l\x1b(B\x1b)B\x0f\x1b[H\x1b[2J");
    let mut pen = String::from("0");
    for line in 0..grid.screen_lines() {
        let row = &grid[Line(i32::try_from(line).unwrap_or(i32::MAX))];
        // Blank default cells at the end of a row are already there.
        let end =
            (0..grid.columns()).rev().find(|&c| !is_blank(&row[Column(c)])).map_or(0, |c| c + 1);
        if end == 0 {
            continue;
        }
        let _ = write!(out, "\x1b[{};1H", line + 1);
        for col in 0..end {
            let cell = &row[Column(col)];
            if cell.flags.contains(Flags::WIDE_CHAR_SPACER) {
                continue;
            }
            let sgr = sgr(cell);
            if sgr != pen {
                let _ = write!(out, "\x1b[{sgr}m");
                pen = sgr;
            }
            out.push(if cell.c == '\t' { ' ' } else { cell.c });
            if let Some(extra) = cell.zerowidth() {
                out.extend(extra);
            }
        }
    }
    if let Some((top, bottom)) = t.region() {
        let _ = write!(out, "\x1b[{top};{bottom}r");
    }
    for (flag, on, off) in [
        (TermMode::LINE_WRAP, "\x1b[?7h", ""),
        (TermMode::INSERT, "\x1b[4h", ""),
        (TermMode::ORIGIN, "\x1b[?6h", ""),
        (TermMode::APP_CURSOR, "\x1b[?1h", "\x1b[?1l"),
        (TermMode::APP_KEYPAD, "\x1b=", "\x1b>"),
        (TermMode::BRACKETED_PASTE, "\x1b[?2004h", "\x1b[?2004l"),
        (TermMode::MOUSE_REPORT_CLICK, "\x1b[?1000h", "\x1b[?1000l"),
        (TermMode::MOUSE_DRAG, "\x1b[?1002h", "\x1b[?1002l"),
        (TermMode::MOUSE_MOTION, "\x1b[?1003h", "\x1b[?1003l"),
        (TermMode::SGR_MOUSE, "\x1b[?1006h", "\x1b[?1006l"),
        (TermMode::UTF8_MOUSE, "\x1b[?1005h", "\x1b[?1005l"),
        (TermMode::FOCUS_IN_OUT, "\x1b[?1004h", "\x1b[?1004l"),
        (TermMode::SHOW_CURSOR, "\x1b[?25h", "\x1b[?25l"),
    ] {
        out.push_str(if mode.contains(flag) { on } else { off });
    }
    let cursor = &grid.cursor;
    for (index, designate) in [(CharsetIndex::G0, '('), (CharsetIndex::G1, ')')] {
        if cursor.charsets[index] == StandardCharset::SpecialCharacterAndLineDrawing {
            let _ = write!(out, "\x1b{designate}0");
        }
    }
    if t.shifted() {
        out.push('\x0e');
    }
    let (row, col) = t.cursor();
    // In origin mode a position counts from the region's top.
    let top = if mode.contains(TermMode::ORIGIN) { t.region().map_or(1, |r| r.0) } else { 1 };
    let _ = write!(out, "\x1b[{};{}H", usize::from(row) + 2 - top, usize::from(col) + 1);
    let _ = write!(out, "\x1b[{}m", sgr(&cursor.template));
    let title = t.title();
    if !title.is_empty() {
        let _ = write!(out, "\x1b]0;{title}\x07");
    }
    out.into_bytes()
}

/// A cell a cleared screen already shows.
fn is_blank(cell: &Cell) -> bool {
    matches!(cell.c, ' ' | '\t')
        && cell.zerowidth().is_none()
        && cell.bg == Color::Named(NamedColor::Background)
        && !cell.flags.intersects(Flags::INVERSE | Flags::ALL_UNDERLINES | Flags::STRIKEOUT)
}

/// The SGR parameters (after a reset) that give a cell its look.
fn sgr(cell: &Cell) -> String {
    let mut p = String::from("0");
    for (flag, code) in [
        (Flags::BOLD, "1"),
        (Flags::DIM, "2"),
        (Flags::ITALIC, "3"),
        (Flags::UNDERLINE, "4"),
        (Flags::DOUBLE_UNDERLINE, "4:2"),
        (Flags::UNDERCURL, "4:3"),
        (Flags::DOTTED_UNDERLINE, "4:4"),
        (Flags::DASHED_UNDERLINE, "4:5"),
        (Flags::INVERSE, "7"),
        (Flags::HIDDEN, "8"),
        (Flags::STRIKEOUT, "9"),
    ] {
        if cell.flags.contains(flag) {
            p.push(';');
            p.push_str(code);
        }
    }
    colour(&mut p, cell.fg, 30);
    colour(&mut p, cell.bg, 40);
    p
}

/// Appends the parameters of a foreground (`base` 30) or background (40)
/// colour; nothing for the default.
fn colour(p: &mut String, c: Color, base: u16) {
    let _ = match c {
        Color::Named(n) => {
            let n = n as u16;
            match n {
                0..=7 => write!(p, ";{}", base + n),
                8..=15 => write!(p, ";{}", base + 60 + n - 8),
                _ => Ok(()),
            }
        }
        Color::Indexed(i) => write!(p, ";{};5;{i}", base + 8),
        Color::Spec(rgb) => write!(p, ";{};2;{};{};{}", base + 8, rgb.r, rgb.g, rgb.b),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::TermSize;

    fn model(size: TermSize, bytes: &[u8]) -> Terminal {
        let mut t = Terminal::new(size);
        t.advance(bytes);
        t
    }

    /// Feeding a screen's redraw to a blank model gives the same screen,
    /// cursor and modes: what an attaching terminal sees is what Portal has.
    #[test]
    fn a_redraw_reproduces_the_screen() {
        let size = TermSize { rows: 6, cols: 20 };
        let cases: &[&[u8]] = &[
            b"plain\r\ntext",
            b"\x1b[1;31mred bold\x1b[0m and \x1b[38;5;200mindexed\x1b[48;2;1;2;3m rgb",
            "wide 漢字 and e\u{301} and 👨\u{200d}👩\u{200d}👧|".as_bytes(),
            b"\x1b(0lqqk\x1b(B box \x1b)0\x0eqq\x0f",
            b"\x1b[?1049h\x1b[3;5Halt\x1b[?25l\x1b[?2004h\x1b[?1h",
            b"\x1b[2;5r\x1b[?6h\x1b[2;3Hin region\x1b[?7l\x1b[4h",
            b"\x1b]0;a title\x07\x1b[4mcursor pen",
        ];
        for bytes in cases {
            let t = model(size, bytes);
            let again = model(size, &redraw(&t));
            let what = String::from_utf8_lossy(bytes);
            assert_eq!(again.lines(), t.lines(), "{what}");
            assert_eq!(again.cursor(), t.cursor(), "{what}");
            assert_eq!(*again.term().mode(), *t.term().mode(), "{what}");
            assert_eq!(again.region(), t.region(), "{what}");
            assert_eq!(again.title(), t.title(), "{what}");
            assert_eq!(
                again.term().grid().cursor.template,
                t.term().grid().cursor.template,
                "{what}"
            );
            for line in 0..i32::from(size.rows) {
                for col in 0..usize::from(size.cols) {
                    let at = |m: &Terminal| {
                        let cell = m.term().grid()[Line(line)][Column(col)].clone();
                        (cell.fg, cell.bg, cell.flags - Flags::WRAPLINE)
                    };
                    assert_eq!(at(&again), at(&t), "{what}: cell {line},{col}");
                }
            }
        }
    }
}
