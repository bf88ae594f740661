//! Exact elision: runs of bulk output that cannot change what the screen
//! shows, found so that parsing them (most of the cost of bulk output) can
//! be skipped with the same screen as the result.

/// Pending bytes from which [`scrolled_away`] looks for lines to skip:
/// below it parsing is cheap, and two screenfuls of lines must fit anyway.
pub(super) const EXACT_SKIP_MIN_BYTES: usize = 8 << 10;

/// A run of lines in `bytes` that cannot change what the screen shows,
/// so parsing it (most of the cost of bulk output) can be skipped
/// exactly: the resulting screen is the same. Conditions:
/// - the run is whole lines of text, tabs, backspaces, bells and SGR
///   colour changes (whose net effect is replayed), nothing that moves
///   the cursor elsewhere, changes a mode or asks for a reply;
/// - `plain`: the terminal is in its plain state (autowrap on, no insert
///   or origin mode, no scroll region, ASCII shown) outside any escape
///   sequence, and the first line is plain text too, so nothing before the
///   run changes how it would land;
/// - it starts after that first line and both its boundaries are CR LF, so
///   the lines after it begin at column 0 either way;
/// - more than two screenfuls of lines follow it: the first brings the
///   cursor to the bottom wherever it was, the second scrolls in fresh
///   rows for everything that stays visible.
///
/// `None` when there is no such run.
pub(super) fn scrolled_away(bytes: &[u8], rows: u16, plain: bool) -> Option<Skip> {
    if bytes.len() < EXACT_SKIP_MIN_BYTES || !plain {
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
    plain_text_sgr(&bytes[..from])?;
    let sgr = plain_text_sgr(&bytes[from..to])?;
    Some(Skip { from, to, sgr })
}

/// Lines that scroll away unseen (see [`scrolled_away`]).
pub(super) struct Skip {
    pub(super) from: usize,
    pub(super) to: usize,
    /// The SGR sequences of the skipped lines, in order.
    pub(super) sgr: Vec<u8>,
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
pub(super) fn cut_point(buf: &[u8], at: usize) -> usize {
    buf[at..].iter().position(|&b| b == b'\n').map_or(at, |i| at + i + 1)
}
