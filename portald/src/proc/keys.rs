//! Key names → the bytes a terminal sends for them.
//!
//! Grammar (case-insensitive names, exact modifiers):
//! - named keys: `Enter` (`Return`), `Tab`, `Esc` (`Escape`), `Backspace`
//!   (`BSpace`), `Space`, `Up`, `Down`, `Left`, `Right`, `Home`, `End`,
//!   `PageUp` (`PgUp`, `PPage`), `PageDown` (`PgDn`, `NPage`), `Insert`
//!   (`IC`), `Delete` (`Del`, `DC`), `F1`–`F12`, `BTab` (shift-tab);
//! - `C-x`: Control with a letter or one of `@ [ \ ] ^ _ ?` (`C-c` is 0x03,
//!   `C-?` is DEL);
//! - `M-x`: Meta (ESC prefix) with any single character or named key
//!   (`M-x`, `M-Enter`, `M-C-a`);
//! - the spellings people and models use for those, any case: `Ctrl-c`,
//!   `Ctrl+C`, `Control-c` and `^C` are `C-c`; `Alt-x`, `Alt+x` and
//!   `Meta-x` are `M-x`; `Shift-Tab` is `BTab`.
//!
//! Cursor keys and Home/End follow the screen's application-cursor mode
//! (`ESC O A` instead of `ESC [ A`), as a real terminal does.

/// A key name that is not in the grammar.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown key {0:?}: the keys are Enter, Tab, BTab, Esc, Backspace, Space, Up, Down, Left, Right, Home, End, PageUp, PageDown, Insert, Delete, F1 to F12, C- with a letter or one of @[\\]^_? (C-c), and M- with a key or a character (M-x); to type these characters, send them as text"
)]
pub(crate) struct UnknownKey(pub(crate) String);

/// Longest run of digits after `F` that reads as a function key (`F13`,
/// `F24`, `F100`): longer is a word, typed as it is.
const MAX_FUNCTION_KEY_DIGITS: usize = 3;

/// Whether a name outside the grammar still reads as a key (`F13`, `C-ab`,
/// `Ctrl-1`, `Alt-`, `S-Up`): typing it would put its letters where a
/// keypress was meant, so a send refuses it. Anything else (`Entr`, `:q!`,
/// `hello`) is text.
pub(crate) fn looks_like_a_key(name: &str) -> bool {
    const MODIFIERS: [&str; 13] = [
        "c-", "m-", "s-", "ctrl-", "ctrl+", "control-", "control+", "alt-", "alt+", "meta-",
        "meta+", "shift-", "shift+",
    ];
    if name.is_empty() || name.len() > MAX_KEY_NAME || name.contains(char::is_whitespace) {
        return false;
    }
    let lower = name.to_ascii_lowercase();
    if let Some(digits) = lower.strip_prefix('f') {
        return !digits.is_empty()
            && digits.len() <= MAX_FUNCTION_KEY_DIGITS
            && digits.bytes().all(|b| b.is_ascii_digit());
    }
    if MODIFIERS.iter().any(|m| lower.starts_with(m)) {
        // `C-`, `M-` and `S-` are tmux's, case and all; the spelt-out
        // modifiers are any case.
        let tmux = ["C-", "M-", "S-"].iter().any(|m| name.starts_with(m));
        return tmux || !["c-", "m-", "s-"].iter().any(|m| lower.starts_with(m));
    }
    let mut chars = name.chars();
    matches!((chars.next(), chars.next(), chars.next()), (Some('^'), Some(_), None))
}

/// Whether cursor keys use application mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CursorMode {
    /// `ESC [ A` (normal).
    Normal,
    /// `ESC O A` (set by `ESC[?1h`, used by vim, less, readline in some modes).
    Application,
}

fn cursor(mode: CursorMode, final_byte: u8) -> Vec<u8> {
    match mode {
        CursorMode::Normal => vec![0x1b, b'[', final_byte],
        CursorMode::Application => vec![0x1b, b'O', final_byte],
    }
}

fn named(name: &str, mode: CursorMode) -> Option<Vec<u8>> {
    let lower = name.to_ascii_lowercase();
    let bytes: Vec<u8> = match lower.as_str() {
        "enter" | "return" | "cr" => b"\r".to_vec(),
        "tab" => b"\t".to_vec(),
        "btab" | "s-tab" => b"\x1b[Z".to_vec(),
        "esc" | "escape" => b"\x1b".to_vec(),
        "backspace" | "bspace" | "bs" => b"\x7f".to_vec(),
        "space" => b" ".to_vec(),
        "up" => cursor(mode, b'A'),
        "down" => cursor(mode, b'B'),
        "right" => cursor(mode, b'C'),
        "left" => cursor(mode, b'D'),
        "home" => cursor(mode, b'H'),
        "end" => cursor(mode, b'F'),
        "pageup" | "pgup" | "ppage" => b"\x1b[5~".to_vec(),
        "pagedown" | "pgdn" | "npage" => b"\x1b[6~".to_vec(),
        "insert" | "ic" => b"\x1b[2~".to_vec(),
        "delete" | "del" | "dc" => b"\x1b[3~".to_vec(),
        "f1" => b"\x1bOP".to_vec(),
        "f2" => b"\x1bOQ".to_vec(),
        "f3" => b"\x1bOR".to_vec(),
        "f4" => b"\x1bOS".to_vec(),
        "f5" => b"\x1b[15~".to_vec(),
        "f6" => b"\x1b[17~".to_vec(),
        "f7" => b"\x1b[18~".to_vec(),
        "f8" => b"\x1b[19~".to_vec(),
        "f9" => b"\x1b[20~".to_vec(),
        "f10" => b"\x1b[21~".to_vec(),
        "f11" => b"\x1b[23~".to_vec(),
        "f12" => b"\x1b[24~".to_vec(),
        _ => return None,
    };
    Some(bytes)
}

fn control(c: char) -> Option<u8> {
    match c {
        'a'..='z' | 'A'..='Z' => u8::try_from(c.to_ascii_lowercase()).ok().map(|b| b - b'a' + 1),
        '@' | ' ' => Some(0),
        '[' => Some(0x1b),
        '\\' => Some(0x1c),
        ']' => Some(0x1d),
        '^' => Some(0x1e),
        '_' => Some(0x1f),
        '?' => Some(0x7f),
        _ => None,
    }
}

/// Longest key name accepted: the longest real one (`M-Backspace`) is 11
/// bytes; the bound also caps the recursion over `M-` prefixes.
const MAX_KEY_NAME: usize = 32;

/// A modifier spelt another common way, in the grammar's terms: `Ctrl-c`
/// → `C-c`, `Alt+x` → `M-x`, `^C` → `C-C`, `Shift-Tab` → `BTab`.
fn respelt(name: &str) -> Option<String> {
    const CONTROL: [&str; 4] = ["ctrl-", "ctrl+", "control-", "control+"];
    const META: [&str; 4] = ["alt-", "alt+", "meta-", "meta+"];
    let lower = name.to_ascii_lowercase();
    if lower == "shift-tab" || lower == "shift+tab" {
        return Some("BTab".into());
    }
    let after = |prefixes: &[&str]| {
        prefixes.iter().find(|p| lower.starts_with(**p)).map(|p| &name[p.len()..])
    };
    if let Some(rest) = after(&CONTROL) {
        return Some(format!("C-{rest}"));
    }
    if let Some(rest) = after(&META) {
        return Some(format!("M-{rest}"));
    }
    let mut chars = name.chars();
    match (chars.next(), chars.next(), chars.next()) {
        (Some('^'), Some(c), None) => Some(format!("C-{c}")),
        _ => None,
    }
}

/// The bytes for one key name.
pub(crate) fn parse(name: &str, mode: CursorMode) -> Result<Vec<u8>, UnknownKey> {
    if name.len() > MAX_KEY_NAME {
        let mut shown: String = name.chars().take(MAX_KEY_NAME).collect();
        shown.push('…');
        return Err(UnknownKey(shown));
    }
    let unknown = || UnknownKey(name.to_owned());
    if let Some(tmux) = respelt(name) {
        return parse(&tmux, mode).map_err(|_| unknown());
    }
    if let Some(rest) = name.strip_prefix("M-") {
        if rest.is_empty() {
            return Err(unknown());
        }
        let mut inner = parse(rest, mode).or_else(|_| {
            let mut chars = rest.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Ok(c.to_string().into_bytes()),
                _ => Err(unknown()),
            }
        })?;
        inner.insert(0, 0x1b);
        return Ok(inner);
    }
    if let Some(rest) = name.strip_prefix("C-") {
        let mut chars = rest.chars();
        return match (chars.next(), chars.next()) {
            (Some(c), None) => control(c).map(|b| vec![b]).ok_or_else(unknown),
            _ => Err(unknown()),
        };
    }
    named(name, mode).ok_or_else(unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_table_in_both_cursor_modes() {
        let n = CursorMode::Normal;
        let a = CursorMode::Application;
        let cases: &[(&str, &[u8], &[u8])] = &[
            ("Enter", b"\r", b"\r"),
            ("enter", b"\r", b"\r"),
            ("Tab", b"\t", b"\t"),
            ("Esc", b"\x1b", b"\x1b"),
            ("Backspace", b"\x7f", b"\x7f"),
            ("Up", b"\x1b[A", b"\x1bOA"),
            ("Down", b"\x1b[B", b"\x1bOB"),
            ("Right", b"\x1b[C", b"\x1bOC"),
            ("Left", b"\x1b[D", b"\x1bOD"),
            ("Home", b"\x1b[H", b"\x1bOH"),
            ("End", b"\x1b[F", b"\x1bOF"),
            ("PageUp", b"\x1b[5~", b"\x1b[5~"),
            ("PageDown", b"\x1b[6~", b"\x1b[6~"),
            ("Delete", b"\x1b[3~", b"\x1b[3~"),
            ("F1", b"\x1bOP", b"\x1bOP"),
            ("F5", b"\x1b[15~", b"\x1b[15~"),
            ("F12", b"\x1b[24~", b"\x1b[24~"),
            ("C-a", b"\x01", b"\x01"),
            ("C-c", b"\x03", b"\x03"),
            ("C-z", b"\x1a", b"\x1a"),
            ("C-[", b"\x1b", b"\x1b"),
            ("C-?", b"\x7f", b"\x7f"),
            ("M-x", b"\x1bx", b"\x1bx"),
            ("M-Enter", b"\x1b\r", b"\x1b\r"),
            ("M-C-a", b"\x1b\x01", b"\x1b\x01"),
            ("M-Up", b"\x1b\x1b[A", b"\x1b\x1bOA"),
        ];
        for (name, normal, app) in cases {
            assert_eq!(parse(name, n).as_deref(), Ok(*normal), "{name} normal");
            assert_eq!(parse(name, a).as_deref(), Ok(*app), "{name} application");
        }
    }

    #[test]
    fn common_spellings_of_modifiers_are_keys() {
        for (alias, tmux) in [
            ("Ctrl-C", "C-c"),
            ("ctrl+c", "C-c"),
            ("Control-a", "C-a"),
            ("^C", "C-c"),
            ("Alt-x", "M-x"),
            ("alt+Enter", "M-Enter"),
            ("Meta-x", "M-x"),
            ("Alt-Ctrl-a", "M-C-a"),
            ("Shift-Tab", "BTab"),
        ] {
            let want = parse(tmux, CursorMode::Normal).unwrap();
            assert_eq!(parse(alias, CursorMode::Normal), Ok(want), "{alias}");
        }
    }

    #[test]
    fn names_outside_the_grammar_that_read_as_keys() {
        for key in
            ["F13", "F24", "f99", "F0", "C-ab", "C-1", "M-xy", "Ctrl-1", "alt+", "S-Up", "^1"]
        {
            assert!(parse(key, CursorMode::Normal).is_err(), "{key:?} parses");
            assert!(looks_like_a_key(key), "{key:?} reads as text");
        }
        for text in ["Entr", ":q!", "hello", "F", "Foo", "F1234", "c-3po", "x", "^", "a b", "-"] {
            assert!(!looks_like_a_key(text), "{text:?} reads as a key");
        }
        let said = UnknownKey("F13".into()).to_string();
        for known in ["Enter", "PageDown", "F1 to F12", "C-c", "M-x", "as text"] {
            assert!(said.contains(known), "{said}");
        }
    }

    #[test]
    fn unknown_names_are_rejected() {
        for bad in
            ["", "Entr", "C-", "C-ab", "C-1", "M-", "M-xy", "F13", "ctrl-1", "Alt-", "^", "x"]
        {
            assert!(parse(bad, CursorMode::Normal).is_err(), "{bad:?}");
        }
        // A long chain of Meta prefixes is refused, not recursed into.
        let deep = "M-".repeat(100_000) + "x";
        let err = parse(&deep, CursorMode::Normal).unwrap_err();
        assert!(err.0.len() < 64, "the error echoes a bounded prefix");
    }
}
