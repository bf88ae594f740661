//! Whether a program took the main screen over without the alternate
//! screen (top; curses programs under a terminal type without one): a
//! scanner of the escape sequences that matter, run on every parsed byte,
//! and what they did to the cursor. See the `screen` module doc.

use super::term::Terminal;

/// Whether a program took the main screen over (see the module doc): a
/// scanner of the escape sequences that matter, run on every parsed byte,
/// and what they did to the cursor.
#[derive(Default)]
pub(super) struct Takeover {
    /// Where the scanner is in an escape sequence.
    state: ScanState,
    /// The CSI being read has a private marker (`?`).
    private: bool,
    /// Its parameters (the first few: the rest never matter here).
    params: [u16; TAKEOVER_PARAMS],
    /// How many of `params` are in use (the one being read included).
    nparams: usize,
    /// What the program did to the main screen.
    pub(super) paint: Paint,
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
pub(super) enum Paint {
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
pub(super) enum Event {
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
    /// The scanner is outside any escape sequence or string.
    pub(super) fn at_ground(&self) -> bool {
        self.state == ScanState::Ground
    }

    /// Scans one byte; returns the event it completes. Line feeds are
    /// events only while the screen is taken over (else they cannot matter,
    /// and bulk output is not cut into lines).
    pub(super) fn scan(&mut self, b: u8) -> Option<Event> {
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
                // A control character inside a CSI is executed by the parser as
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
    pub(super) fn before_down(&mut self, screen: &Terminal) {
        if !screen.alternate() && on_last_row(screen) {
            self.paint = Paint::Off;
        }
    }

    /// After a sequence that homes, clears, places, scrolls or switches.
    pub(super) fn after(&mut self, event: Event, screen: &Terminal) {
        if event == Event::Switch {
            self.paint = Paint::Off;
            return;
        }
        if screen.alternate() {
            return;
        }
        let home = screen.cursor() == (0, 0);
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
    pub(super) fn settle(&mut self, screen: &Terminal) {
        if let Paint::On { bottom, owned } = &mut self.paint
            && !screen.alternate()
        {
            *bottom |= on_last_row(screen);
            *owned |= *bottom && screen.cursor_hidden();
        }
    }

    /// The main screen is taken over now.
    pub(super) fn full_screen(&self, screen: &Terminal) -> bool {
        match self.paint {
            Paint::On { bottom, owned } => !screen.alternate() && bottom && owned,
            Paint::Off => false,
        }
    }
}

/// The cursor is on the screen's last row.
fn on_last_row(screen: &Terminal) -> bool {
    screen.cursor().0.saturating_add(1) >= screen.rows()
}
