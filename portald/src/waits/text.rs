//! The text a wait has seen: each watched stream rendered as text, kept
//! within the wait's bound (its tail), with the spans a full-screen program
//! drew on the alternate screen marked so the result can leave them out.

use bytes::Bytes;

use crate::ansi::TextRenderer;
use crate::proc::StreamId;

/// Mutable state of one wait.
pub(super) struct Watch {
    pub(super) renderers: [Option<TextRenderer>; 3],
    pub(super) hay: String,
    /// Bytes of `hay` dropped from its front to stay within the bound.
    pub(super) dropped: usize,
    pub(super) bytes: u64,
    pub(super) pos: [u64; 3],
    /// Spans of `hay` (absolute positions, the end open while the program
    /// is still there) drawn on the alternate screen.
    pub(super) alt: Vec<(usize, Option<usize>)>,
    /// Whether the alternate screen is in use, once a switch was seen.
    pub(super) alt_known: Option<bool>,
}

impl Watch {
    pub(super) fn feed(
        &mut self,
        stream: StreamId,
        data: &Bytes,
    ) -> (usize, Vec<crate::ansi::CommandDone>) {
        let r = self.renderers[stream.index()].get_or_insert_with(TextRenderer::new);
        r.push(data);
        let text = r.flush_line();
        let marks = r.take_marks();
        let switches = r.take_alt_switches();
        let before = self.dropped + self.hay.len();
        self.hay.push_str(&text);
        self.bytes += data.len() as u64;
        if stream == StreamId::Stdout {
            // Positions are the renderer's, which are the hay's while only
            // stdout is watched: the alternate screen exists only on a PTY.
            for sw in switches {
                self.alt_switch(sw);
            }
        }
        (before, marks)
    }

    /// Opens or closes a span of alternate-screen text. Leaving it without
    /// having seen it entered means the wait began inside it: everything
    /// before was drawn there.
    fn alt_switch(&mut self, sw: crate::ansi::AltSwitch) {
        match (sw.enter, self.alt_known) {
            (true, Some(true)) | (false, Some(false)) => {}
            (true, _) => self.alt.push((sw.at, None)),
            (false, None) => self.alt.push((0, Some(sw.at))),
            (false, Some(true)) => {
                if let Some(last) = self.alt.last_mut() {
                    last.1 = Some(sw.at);
                }
            }
        }
        self.alt_known = Some(sw.enter);
    }

    /// `text` (the first `text.len()` bytes of the hay as it is now)
    /// without what was drawn on the alternate screen.
    pub(super) fn without_alt(&self, text: &mut String) {
        for &(from, to) in self.alt.iter().rev() {
            let end = to.map_or(text.len(), |t| self.local(t).min(text.len()));
            let start = self.local(from).min(end);
            if start < end && text.is_char_boundary(start) && text.is_char_boundary(end) {
                text.replace_range(start..end, "");
            }
        }
    }

    /// Keeps the text within `bound` bytes (its tail), on a char boundary.
    pub(super) fn bound(&mut self, bound: usize) {
        if self.hay.len() > bound.saturating_mul(2) {
            let mut cut = self.hay.len() - bound;
            while !self.hay.is_char_boundary(cut) {
                cut += 1;
            }
            self.hay.drain(..cut);
            self.dropped += cut;
        }
    }

    pub(super) fn local(&self, absolute: usize) -> usize {
        absolute.saturating_sub(self.dropped)
    }
}
