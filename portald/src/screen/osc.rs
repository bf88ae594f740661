//! The OSC strings in a PTY's output before the parser sees them: bodies
//! capped (the parser buffers one without bound until its terminator), and
//! the status probe OSC 7501 `?` found, which the model does not report.

use std::borrow::Cow;

/// Longest OSC body passed to the parser. Titles and notifications are far
/// shorter; past this, bytes are dropped until the terminator.
pub(super) const OSC_BODY_MAX: usize = 4096;

/// The body of the status probe (see [`OscGuard::probes`]).
const PROBE: &[u8] = b"7501;?";

/// Caps OSC bodies and finds status probes.
#[derive(Default)]
pub(super) struct OscGuard {
    pub(super) state: OscState,
    body: usize,
    /// The body so far matches the start of [`PROBE`].
    probe: bool,
    /// Where in the last [`OscGuard::filter`]'s output a status probe
    /// ended (the index after its terminator): a program asking whether
    /// the terminal takes its status reports (Claude Code asks, then
    /// follows with a DA query; an answer after the DA answer means "no").
    pub(super) probes: Vec<usize>,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum OscState {
    #[default]
    Ground,
    Esc,
    Osc,
}

impl OscGuard {
    pub(super) fn filter<'a>(&mut self, input: &'a [u8]) -> Cow<'a, [u8]> {
        self.probes.clear();
        if self.state == OscState::Ground && !input.contains(&0x1b) {
            return Cow::Borrowed(input);
        }
        let mut out: Option<Vec<u8>> = None;
        for (i, &b) in input.iter().enumerate() {
            let (keep, probe) = self.step(b);
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
            if probe {
                self.probes.push(out.as_ref().map_or(i + 1, Vec::len));
            }
        }
        out.map_or(Cow::Borrowed(input), Cow::Owned)
    }

    /// One byte: whether it is kept, and whether it ends a status probe.
    fn step(&mut self, b: u8) -> (bool, bool) {
        match self.state {
            OscState::Ground => {
                if b == 0x1b {
                    self.state = OscState::Esc;
                }
                (true, false)
            }
            OscState::Esc => {
                // ESC \ (ST) after a probe's body ends it.
                let probe = b == b'\\' && std::mem::take(&mut self.probe);
                self.probe = false;
                self.state = match b {
                    b']' => {
                        self.body = 0;
                        self.probe = true;
                        OscState::Osc
                    }
                    0x1b => OscState::Esc,
                    _ => OscState::Ground,
                };
                (true, probe)
            }
            OscState::Osc => match b {
                0x07 | 0x18 | 0x1a => {
                    self.state = OscState::Ground;
                    let probe = b == 0x07 && self.probe && self.body == PROBE.len();
                    self.probe = false;
                    (true, probe)
                }
                0x1b => {
                    self.state = OscState::Esc;
                    self.probe &= self.body == PROBE.len();
                    (true, false)
                }
                _ => {
                    self.probe &= PROBE.get(self.body) == Some(&b);
                    self.body += 1;
                    (self.body <= OSC_BODY_MAX, false)
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn status_probes_are_found_with_either_terminator_and_nothing_else_is() {
        let mut g = OscGuard::default();
        let out = g.filter(b"a\x1b]7501;?\x07b\x1b]7501;?\x1b\\c");
        assert_eq!(out.len(), 22);
        assert_eq!(g.probes, [10, 21]);
        for other in
            [&b"\x1b]7501;?x\x07"[..], b"\x1b]7501;\x07", b"\x1b]0;7501;?\x07", b"\x1b]7501;?\x18"]
        {
            g.filter(other);
            assert!(g.probes.is_empty(), "{:?}", String::from_utf8_lossy(other));
        }
        // Split across feeds.
        g.filter(b"\x1b]75");
        assert!(g.probes.is_empty());
        g.filter(b"01;?\x07");
        assert_eq!(g.probes, [5]);
    }
}
