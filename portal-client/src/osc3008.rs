//! Portal's OSC 3008 agent-state record: the in-band wire format that the
//! emitter writes to a terminal when the socket is out of reach (over SSH,
//! in a container) and that portald reads from a PTY's output.
//!
//! `ESC ] 3008 ; portal=1 ; state=<v> [; name=<v>] [; event=<v>] [; reason=<v>] ESC \`
//!
//! `portal=1` is a required namespace: OSC 3008 is also used by systemd's
//! context records. Values are percent-encoded with an empty safe set (only
//! RFC 3986 unreserved characters stay literal), so a name like
//! `x;state=idle` cannot forge a field or end the sequence.

/// Encodes everything but RFC 3986 unreserved characters as `%XX`.
#[must_use]
pub fn percent_encode(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Decodes `%XX` escapes (hex in either case); `None` if malformed.
#[must_use]
pub fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The record for `state` (a snake_case agent state) with optional fields
/// (empty values are left out), ST-terminated.
#[must_use]
pub fn encode(state: &str, fields: &[(&str, &str)]) -> String {
    let mut body = format!("3008;portal=1;state={}", percent_encode(state));
    for (k, v) in fields {
        if !v.is_empty() {
            body.push(';');
            body.push_str(k);
            body.push('=');
            body.push_str(&percent_encode(v));
        }
    }
    format!("\x1b]{body}\x1b\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips_and_cannot_forge_fields() {
        let osc = encode("done", &[("name", "x;state=idle"), ("event", "Stop"), ("reason", "")]);
        assert_eq!(osc, "\x1b]3008;portal=1;state=done;name=x%3Bstate%3Didle;event=Stop\x1b\\");
        assert_eq!(percent_decode("x%3Bstate%3Didle").as_deref(), Some("x;state=idle"));
        assert_eq!(percent_decode("a%2fb"), Some("a/b".into()));
        assert_eq!(percent_decode("%zz"), None);
    }
}
