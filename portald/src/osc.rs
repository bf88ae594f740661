//! A small streaming scanner for the terminal signals Portal acts on, run on
//! every PTY output chunk by the process's actor (not by the screen thread,
//! which may skip bytes under bulk output): OSC bodies (`ESC ] … BEL` or
//! `ESC ] … ESC \`) and standalone bells.
//!
//! It is cheap on the capture path: a chunk without ESC or BEL is skipped
//! with one SIMD search, and bodies longer than [`MAX_OSC_BODY`] are dropped
//! unread (Portal's own records are short).

/// Longest OSC body kept; longer ones (images, clipboard) are skipped.
pub(crate) const MAX_OSC_BODY: usize = 1024;

/// A signal found in the output.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TermSignal {
    /// A complete OSC body (between `ESC ]` and its terminator).
    Osc(Vec<u8>),
    /// A bell outside any OSC.
    Bell,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Ground,
    Esc,
    Osc,
    OscEsc,
}

/// Scanner state carried across chunks.
#[derive(Debug, Default)]
pub(crate) struct OscScanner {
    state: State,
    body: Vec<u8>,
    too_long: bool,
}

impl OscScanner {
    /// Scans one chunk, appending what it finds to `out`.
    pub(crate) fn scan(&mut self, bytes: &[u8], out: &mut Vec<TermSignal>) {
        let mut i = 0;
        while i < bytes.len() {
            if self.state == State::Ground {
                match memchr::memchr2(0x1b, 0x07, &bytes[i..]) {
                    None => return,
                    Some(j) => i += j,
                }
            }
            let b = bytes[i];
            i += 1;
            match self.state {
                State::Ground => match b {
                    0x1b => self.state = State::Esc,
                    0x07 => out.push(TermSignal::Bell),
                    _ => {}
                },
                State::Esc => {
                    self.state = match b {
                        b']' => {
                            self.body.clear();
                            self.too_long = false;
                            State::Osc
                        }
                        0x1b => State::Esc,
                        _ => State::Ground,
                    }
                }
                State::Osc => match b {
                    0x07 => self.finish(out),
                    0x1b => self.state = State::OscEsc,
                    0x18 | 0x1a => self.state = State::Ground,
                    _ => {
                        if self.body.len() < MAX_OSC_BODY {
                            self.body.push(b);
                        } else {
                            self.too_long = true;
                        }
                    }
                },
                State::OscEsc => {
                    if b == b'\\' {
                        self.finish(out);
                    } else {
                        // ESC ended the OSC (as vte does) and starts anew.
                        self.finish(out);
                        self.state = if b == b']' {
                            self.body.clear();
                            self.too_long = false;
                            State::Osc
                        } else if b == 0x1b {
                            State::Esc
                        } else {
                            State::Ground
                        };
                    }
                }
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<TermSignal>) {
        self.state = State::Ground;
        if !self.too_long {
            out.push(TermSignal::Osc(std::mem::take(&mut self.body)));
        }
        self.body.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(parts: &[&[u8]]) -> Vec<TermSignal> {
        let mut s = OscScanner::default();
        let mut out = Vec::new();
        for p in parts {
            s.scan(p, &mut out);
        }
        out
    }

    #[test]
    fn finds_oscs_and_bells_split_anywhere() {
        let input: &[u8] = b"a\x07b\x1b]3008;portal=1;state=done\x1b\\c\x1b]133;D;0\x07d";
        let want = vec![
            TermSignal::Bell,
            TermSignal::Osc(b"3008;portal=1;state=done".to_vec()),
            TermSignal::Osc(b"133;D;0".to_vec()),
        ];
        assert_eq!(scan_all(&[input]), want);
        for split in 0..input.len() {
            assert_eq!(scan_all(&[&input[..split], &input[split..]]), want, "split at {split}");
        }
    }

    #[test]
    fn an_osc_terminating_bel_is_not_a_bell_and_long_bodies_are_skipped() {
        assert_eq!(scan_all(&[b"\x1b]0;title\x07"]), vec![TermSignal::Osc(b"0;title".to_vec())]);
        let mut long = b"\x1b]1337;File=".to_vec();
        long.extend(std::iter::repeat_n(b'A', MAX_OSC_BODY * 2));
        long.extend_from_slice(b"\x07\x07");
        assert_eq!(scan_all(&[&long]), vec![TermSignal::Bell]);
    }
}
