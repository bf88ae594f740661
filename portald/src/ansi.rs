//! Turns raw terminal output into the text a person would read.
//!
//! A streaming state machine (fed any split of the bytes, keeping escape and
//! UTF-8 state across pushes) that:
//! - drops every escape sequence a terminal would not print: CSI (including
//!   private modes like `ESC[?2004h` and `>`/`=`/space intermediates), OSC
//!   (ended by BEL or ST), DCS/SOS/PM/APC strings, charset and keypad escapes
//!   (`ESC(B`, `ESC=`), and C1 controls (as UTF-8 code points U+0080–U+009F,
//!   `U+009B` starting a CSI);
//! - renders line editing like a terminal would on one line: `\r` returns to
//!   column 0 and later text overwrites (`50%\r100%` reads `100%`), backspace
//!   moves left, `ESC[K` erases to the end of the line, `ESC[nC`/`ESC[nD`/
//!   `ESC[nG` move the column; `\r\n` and `\n` end a line;
//! - never draws over text it already handed out: after a cursor-up
//!   (`ESC[nA`, `ESC[nF`), as readline sends to redraw a multi-line paste,
//!   what is drawn next starts a line of its own (the redraw reads as a copy
//!   of the lines, not as one line written over another);
//! - decodes UTF-8 over the whole stream (never per chunk), invalid bytes
//!   becoming U+FFFD;
//! - drops other control characters except tab.
//!
//! The raw bytes stay in the log; this is only a view.
//!
//! Shell-integration marks (OSC 133 `D;<exit>`, "command finished") are
//! reported through [`TextRenderer::take_marks`] with their position in the
//! rendered text, and never appear in it. So are switches to and from the
//! alternate screen (`ESC[?1049h`/`l`, and the older 47 and 1047), through
//! [`TextRenderer::take_alt_switches`], so that a wait can tell a
//! full-screen program's redraws from the text printed around them.

/// Most parameters of a CSI kept (the rest are ignored, as terminals do).
const MAX_CSI_PARAMS: usize = 16;

/// Bytes of an OSC body kept to recognise shell-integration marks; the marks
/// are short (`133;D;255`), anything longer is not one.
const OSC_CAPTURE_BYTES: usize = 32;

/// The private modes that switch to the alternate screen and back (xterm's
/// 1049 with the cursor saved, the older 1047 and 47).
const ALT_SCREEN_MODES: [u16; 3] = [1049, 1047, 47];

/// A switch to or from the alternate screen seen in the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AltSwitch {
    /// True when entering the alternate screen, false when leaving it.
    pub(crate) enter: bool,
    /// Position in the rendered text, as for [`CommandDone::at`].
    pub(crate) at: usize,
}

/// A shell-integration mark seen in the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CommandDone {
    /// The command's exit status, when the shell reported one.
    pub(crate) exit_code: Option<i32>,
    /// Position in the rendered text (bytes of everything returned by
    /// `flush_line` so far plus the pending text) where the mark was.
    pub(crate) at: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Ground,
    Esc,
    /// `ESC` followed by intermediates (0x20–0x2F), waiting for a final byte.
    EscIntermediate,
    Csi,
    /// OSC/DCS/SOS/PM/APC body, until BEL (OSC only) or ST.
    Str {
        bel_ends: bool,
    },
    /// ESC inside a string: `\` ends it.
    StrEsc {
        bel_ends: bool,
    },
}

/// Streaming renderer. Push bytes, then [`TextRenderer::finish`].
#[derive(Debug)]
pub(crate) struct TextRenderer {
    state: State,
    params: Vec<u16>,
    param: Option<u16>,
    private: bool,
    utf8: [u8; 4],
    utf8_len: usize,
    utf8_need: usize,
    line: Vec<char>,
    col: usize,
    out: String,
    /// Bytes of rendered text already handed out by `flush_line`.
    flushed: usize,
    osc: Vec<u8>,
    marks: Vec<CommandDone>,
    alt_switches: Vec<AltSwitch>,
    /// Something was drawn since the last line break (handed out or not).
    drawn: bool,
}

impl Default for TextRenderer {
    fn default() -> Self {
        Self::new()
    }
}

impl TextRenderer {
    /// A renderer in the ground state.
    pub(crate) fn new() -> Self {
        Self {
            state: State::Ground,
            params: Vec::new(),
            param: None,
            private: false,
            utf8: [0; 4],
            utf8_len: 0,
            utf8_need: 0,
            line: Vec::new(),
            col: 0,
            out: String::new(),
            flushed: 0,
            osc: Vec::new(),
            marks: Vec::new(),
            alt_switches: Vec::new(),
            drawn: false,
        }
    }

    /// Switches to and from the alternate screen seen since the last call.
    pub(crate) fn take_alt_switches(&mut self) -> Vec<AltSwitch> {
        std::mem::take(&mut self.alt_switches)
    }

    /// Shell-integration marks seen since the last call.
    pub(crate) fn take_marks(&mut self) -> Vec<CommandDone> {
        std::mem::take(&mut self.marks)
    }

    fn end_osc(&mut self) {
        let body = std::mem::take(&mut self.osc);
        let Some(rest) = body.strip_prefix(b"133;D") else { return };
        let exit_code =
            rest.strip_prefix(b";").and_then(|c| std::str::from_utf8(c).ok()?.trim().parse().ok());
        // The mark ends the command's output: what follows is the prompt.
        self.commit_line(false);
        self.marks.push(CommandDone { exit_code, at: self.flushed + self.out.len() });
    }

    /// Feeds bytes.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.byte(b);
        }
    }

    /// Everything rendered so far, including the current partial line,
    /// taken out of the renderer. Escape and UTF-8 state carry over to the
    /// next push; the partial line is not revisited by later carriage returns.
    pub(crate) fn flush_line(&mut self) -> String {
        self.commit_line(false);
        self.flushed += self.out.len();
        std::mem::take(&mut self.out)
    }

    /// Flushes an incomplete character and the current line, returning all text.
    pub(crate) fn finish(mut self) -> String {
        if self.utf8_len > 0 {
            self.utf8_len = 0;
            self.utf8_need = 0;
            self.put('\u{FFFD}');
        }
        self.commit_line(false);
        self.out
    }

    fn byte(&mut self, b: u8) {
        if self.utf8_need > 0 {
            if b & 0xC0 == 0x80 {
                self.utf8[self.utf8_len] = b;
                self.utf8_len += 1;
                if self.utf8_len == self.utf8_need {
                    let c = std::str::from_utf8(&self.utf8[..self.utf8_len])
                        .ok()
                        .and_then(|s| s.chars().next())
                        .unwrap_or('\u{FFFD}');
                    self.utf8_len = 0;
                    self.utf8_need = 0;
                    self.char(c);
                }
                return;
            }
            // Truncated sequence: replace it, then handle `b` afresh.
            self.utf8_len = 0;
            self.utf8_need = 0;
            self.char('\u{FFFD}');
        }
        match b {
            0x00..=0x7F => self.char(char::from(b)),
            0xC2..=0xDF => self.start_utf8(b, 2),
            0xE0..=0xEF => self.start_utf8(b, 3),
            0xF0..=0xF4 => self.start_utf8(b, 4),
            _ => self.char('\u{FFFD}'),
        }
    }

    fn start_utf8(&mut self, b: u8, need: usize) {
        self.utf8[0] = b;
        self.utf8_len = 1;
        self.utf8_need = need;
    }

    fn char(&mut self, c: char) {
        match self.state {
            State::Ground => self.ground(c),
            State::Esc => self.esc(c),
            State::EscIntermediate => {
                if !('\u{20}'..='\u{2F}').contains(&c) {
                    self.state = State::Ground;
                }
            }
            State::Csi => self.csi(c),
            State::Str { bel_ends } => match c {
                '\u{07}' if bel_ends => {
                    self.state = State::Ground;
                    self.end_osc();
                }
                '\u{1B}' => self.state = State::StrEsc { bel_ends },
                '\u{9C}' | '\u{18}' | '\u{1A}' => {
                    self.state = State::Ground;
                    if bel_ends {
                        self.end_osc();
                    }
                }
                c => {
                    if bel_ends && self.osc.len() < OSC_CAPTURE_BYTES {
                        let mut buf = [0u8; 4];
                        self.osc.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    }
                }
            },
            State::StrEsc { bel_ends } => {
                self.state = if c == '\u{1B}' { State::StrEsc { bel_ends } } else { State::Ground };
                if c == '\\' && bel_ends {
                    self.end_osc();
                }
                if c != '\\' && c != '\u{1B}' {
                    // ESC followed by something else: it started a new sequence.
                    self.state = State::Esc;
                    self.esc(c);
                }
            }
        }
    }

    fn ground(&mut self, c: char) {
        match c {
            '\u{1B}' => self.state = State::Esc,
            '\n' => self.commit_line(true),
            '\r' => self.col = 0,
            '\u{08}' => self.col = self.col.saturating_sub(1),
            '\t' => self.put('\t'),
            '\u{9B}' => self.enter_csi(),
            '\u{90}' | '\u{98}' | '\u{9E}' | '\u{9F}' => {
                self.state = State::Str { bel_ends: false }
            }
            '\u{9D}' => {
                self.osc.clear();
                self.state = State::Str { bel_ends: true };
            }
            c if c.is_control() => {}
            c => self.put(c),
        }
    }

    fn esc(&mut self, c: char) {
        match c {
            '[' => self.enter_csi(),
            ']' => {
                self.osc.clear();
                self.state = State::Str { bel_ends: true };
            }
            'P' | 'X' | '^' | '_' => self.state = State::Str { bel_ends: false },
            '\u{1B}' => self.state = State::Esc,
            '\u{20}'..='\u{2F}' => self.state = State::EscIntermediate,
            _ => self.state = State::Ground,
        }
    }

    fn enter_csi(&mut self) {
        self.state = State::Csi;
        self.params.clear();
        self.param = None;
        self.private = false;
    }

    fn csi(&mut self, c: char) {
        match c {
            '0'..='9' => {
                let d = u16::try_from(u32::from(c) - u32::from('0')).unwrap_or(0);
                self.param = Some(self.param.unwrap_or(0).saturating_mul(10).saturating_add(d));
            }
            ';' | ':' => {
                if self.params.len() < MAX_CSI_PARAMS {
                    self.params.push(self.param.unwrap_or(0));
                }
                self.param = None;
            }
            '<' | '=' | '>' | '?' => self.private = true,
            '\u{20}'..='\u{2F}' => {}
            '\u{40}'..='\u{7E}' => {
                if let Some(p) = self.param.take()
                    && self.params.len() < MAX_CSI_PARAMS
                {
                    self.params.push(p);
                }
                self.state = State::Ground;
                if !self.private {
                    self.csi_final(c);
                } else if matches!(c, 'h' | 'l')
                    && self.params.iter().any(|p| ALT_SCREEN_MODES.contains(p))
                {
                    // What follows is drawn on the other screen.
                    self.commit_line(false);
                    let at = self.flushed + self.out.len();
                    self.alt_switches.push(AltSwitch { enter: c == 'h', at });
                }
            }
            '\u{1B}' => self.state = State::Esc,
            // Anything else aborts the sequence, as in a real terminal.
            _ => self.state = State::Ground,
        }
    }

    fn csi_final(&mut self, c: char) {
        let first = self.params.first().copied().unwrap_or(0);
        let n = usize::from(first.max(1));
        match c {
            'K' => match first {
                0 => self.line.truncate(self.col),
                1 => {
                    let end = self.col.min(self.line.len().saturating_sub(1));
                    for ch in self.line.iter_mut().take(end + 1) {
                        *ch = ' ';
                    }
                }
                _ => {
                    self.line.clear();
                }
            },
            'C' => self.col += n,
            'D' => self.col = self.col.saturating_sub(n),
            'G' => self.col = n - 1,
            // Up into lines already rendered: what follows goes on a line of
            // its own, at the same column ('A') or the first ('F').
            'A' | 'F' => {
                let col = if c == 'A' { self.col } else { 0 };
                if self.drawn {
                    self.commit_line(true);
                }
                self.col = col;
            }
            _ => {}
        }
    }

    fn put(&mut self, c: char) {
        if self.col < self.line.len() {
            self.line[self.col] = c;
        } else {
            while self.line.len() < self.col {
                self.line.push(' ');
            }
            self.line.push(c);
        }
        self.col += 1;
        self.drawn = true;
    }

    fn commit_line(&mut self, newline: bool) {
        self.out.extend(self.line.drain(..));
        if newline {
            self.out.push('\n');
            self.drawn = false;
        }
        self.col = 0;
    }
}

/// Renders a complete byte string to text.
pub(crate) fn render(bytes: &[u8]) -> String {
    let mut r = TextRenderer::new();
    r.push(bytes);
    r.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_every_kind_of_escape() {
        let cases: &[(&[u8], &str)] = &[
            (b"\x1b[31mred\x1b[0m", "red"),
            (b"\x1b[?2004hprompt$ \x1b[?2004l", "prompt$ "),
            (b"\x1b]0;title\x07text", "text"),
            (b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
            (b"\x1b(Bplain\x1b=\x1b>", "plain"),
            (b"\x1b[>4;1mx\x1b[ q", "x"),
            (b"\x1bP+q544e\x1b\\after", "after"),
            ("\u{9b}31mc1\u{9c}".as_bytes(), "c1"),
            (b"bell\x07 nul\x00", "bell nul"),
            (b"tab\there", "tab\there"),
        ];
        for (input, want) in cases {
            assert_eq!(render(input), *want, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn carriage_return_overwrites_like_a_terminal() {
        assert_eq!(render(b"a\rb\r\n"), "b\n");
        assert_eq!(render(b"50%\r100%\n"), "100%\n");
        assert_eq!(render(b"abcdef\rXY\n"), "XYcdef\n");
        assert_eq!(render(b"long line\r\x1b[Kshort\n"), "short\n");
        assert_eq!(render(b"ab\x08c"), "ac");
        assert_eq!(render(b"line1\r\nline2\r\n"), "line1\nline2\n");
    }

    #[test]
    fn sequences_and_utf8_split_anywhere() {
        let input = "é\x1b[1;32m漢字\x1b]0;t\x07ok\r\n".as_bytes();
        let whole = render(input);
        assert_eq!(whole, "é漢字ok\n");
        for split in 0..input.len() {
            let mut r = TextRenderer::new();
            r.push(&input[..split]);
            r.push(&input[split..]);
            assert_eq!(r.finish(), whole, "split at {split}");
        }
    }

    #[test]
    fn shell_integration_marks_are_reported_not_shown() {
        let mut r = TextRenderer::new();
        r.push(b"ls\r\nfile\r\n\x1b]133;D;2\x07\x1b]133;A\x07$ ");
        let marks = r.take_marks();
        assert_eq!(marks, vec![CommandDone { exit_code: Some(2), at: 8 }]);
        assert_eq!(r.flush_line(), "ls\nfile\n$ ");
        let mut r = TextRenderer::new();
        r.push(b"x\x1b]133;D\x1b\\");
        assert_eq!(r.take_marks(), vec![CommandDone { exit_code: None, at: 1 }]);
        let mut r = TextRenderer::new();
        r.push(b"\x1b]0;133;D;1\x07");
        assert!(r.take_marks().is_empty());
    }

    #[test]
    fn a_redraw_after_cursor_up_is_a_copy_not_an_overwrite() {
        // readline after a bracketed paste into `sqlite> `: the pasted
        // lines, then up two lines and right past the prompt, and the lines
        // drawn again.
        let paste =
            b"a;\r\n\rbb;\r\n\rSELECT 1;\x1b[A\x1b[A\r\x1b[8Ca;\r\n\rbb;\r\n\rSELECT 1;\r\n";
        assert_eq!(render(paste), "a;\nbb;\nSELECT 1;\n        a;\nbb;\nSELECT 1;\n");
        // The same when the line before the cursor-up was handed out (its
        // column is not known any more).
        let mut r = TextRenderer::new();
        r.push(b"one");
        let mut text = r.flush_line();
        r.push(b"\x1b[Atwo\r\n");
        text.push_str(&r.finish());
        assert_eq!(text, "one\ntwo\n");
        // Up from an empty line adds no empty line.
        assert_eq!(render(b"x\r\n\x1b[A\x1b[Ay\n"), "x\ny\n");
    }

    #[test]
    fn alternate_screen_switches_are_reported_where_they_are() {
        let mut r = TextRenderer::new();
        r.push(b"$ vim\r\n\x1b[?1049h\x1b[Hredraw\x1b[?1049l$ ");
        assert_eq!(
            r.take_alt_switches(),
            vec![AltSwitch { enter: true, at: 6 }, AltSwitch { enter: false, at: 12 }]
        );
        assert_eq!(r.flush_line(), "$ vim\nredraw$ ");
        r.push(b"\x1b[?2004h\x1b[?47h");
        assert_eq!(r.take_alt_switches(), vec![AltSwitch { enter: true, at: 14 }]);
    }

    #[test]
    fn invalid_utf8_becomes_replacement() {
        assert_eq!(render(b"a\xffb"), "a\u{FFFD}b");
        assert_eq!(render(b"a\xc3"), "a\u{FFFD}");
        assert_eq!(render(b"\xe6\x97z"), "\u{FFFD}z");
    }

    #[test]
    fn random_input_never_panics() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..2000 {
            let mut buf = Vec::new();
            for _ in 0..64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf.push(x.to_le_bytes()[0]);
            }
            let _ = render(&buf);
        }
    }
}
