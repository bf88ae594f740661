//! What search sees of the log: lines of text, the words in them, and the
//! queries that match lines.
//!
//! One function, [`lines`], turns raw bytes into lines, both when a segment
//! is indexed and when a candidate is checked, so the index and the check
//! always agree on what a line says. A line ends at `\n` or `\r` (a PTY's
//! input ends its lines with `\r`, and a progress bar's overwritten text
//! stays findable) and is rendered as a person reads it: escapes removed,
//! backspaces applied, invalid UTF-8 as U+FFFD.
//!
//! Words are what the index's tokenizer (`unicode61`, no diacritic folding)
//! calls tokens: runs of letters, numbers and private-use characters (by
//! Unicode general category, as it does), compared without case. A query
//! is words that must all be on one line; `"a b"` is a phrase (consecutive
//! words), `pre*` a prefix. A regex, if any, then filters the lines.

use std::borrow::Cow;

use regex::Regex;

/// Shortest prefix accepted: a one-letter prefix names most of the index's
/// words, and looking them all up takes seconds on a large log.
const MIN_PREFIX_CHARS: usize = 2;

/// Longest regex accepted, compiled (bytes of the automaton): enough for
/// any hand-written pattern, small enough that a hostile one cannot stall
/// the daemon.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Splits `raw` into lines and calls `each(start, end, text)` for every one
/// that has text, with its byte range in `raw` (the line break excluded).
pub(crate) fn lines(raw: &[u8], mut each: impl FnMut(usize, usize, Cow<'_, str>)) {
    let mut start = 0;
    for (i, &b) in raw.iter().enumerate() {
        if b == b'\n' || b == b'\r' {
            if i > start {
                let text = render(&raw[start..i]);
                if !text.trim().is_empty() {
                    each(start, i, text);
                }
            }
            start = i + 1;
        }
    }
    if start < raw.len() {
        let text = render(&raw[start..]);
        if !text.trim().is_empty() {
            each(start, raw.len(), text);
        }
    }
}

/// One line's text: borrowed when it is plain printable UTF-8 (most output),
/// else rendered as the terminal would.
fn render(raw: &[u8]) -> Cow<'_, str> {
    let plain = raw.iter().all(|&b| (b >= 0x20 && b != 0x7f) || b == b'\t');
    if plain && let Ok(s) = std::str::from_utf8(raw) {
        // C1 controls (U+0080–U+009F) are escapes to the renderer.
        if !s.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c)) {
            return Cow::Borrowed(s);
        }
    }
    Cow::Owned(crate::ansi::render(raw))
}

/// Whether `c` is part of a word as the index's tokenizer sees it
/// (`unicode61`: letters, numbers and private-use characters; a combining
/// mark, say, separates words there, and so here).
fn is_word_char(c: char) -> bool {
    use unicode_general_category::GeneralCategory as G;
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    matches!(
        unicode_general_category::get_general_category(c),
        G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter
            | G::DecimalNumber
            | G::LetterNumber
            | G::OtherNumber
            | G::PrivateUse
    )
}

/// The words of `text`, lowercased.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !is_word_char(c))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Why a query cannot run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum QueryError {
    /// Nothing to look up in the index.
    #[error(
        "the query {0:?} has no words: search finds lines by their words (letters and digits); give a word the line contains, and add a regex for punctuation (e.g. \"failed\" with the regex \"failed: [0-9]+\")"
    )]
    NoWords(String),
    /// A prefix too short to look up quickly.
    #[error(
        "the prefix {0:?}* is too short: a prefix needs at least {MIN_PREFIX_CHARS} letters or digits"
    )]
    ShortPrefix(String),
    /// A quote was opened and never closed.
    #[error("the query {0:?} opens a phrase with \" and never closes it")]
    OpenQuote(String),
    /// The regex does not compile.
    #[error("the regex {pattern:?} is not valid: {reason}")]
    BadRegex {
        /// As given.
        pattern: String,
        /// The regex crate's message.
        reason: String,
    },
}

/// One thing a matching line must contain.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Term {
    /// Consecutive words, lowercased.
    words: Vec<String>,
    /// The last word is a prefix.
    prefix: bool,
}

impl Term {
    fn found_in(&self, line: &[String]) -> bool {
        let n = self.words.len();
        if n == 0 || line.len() < n {
            return false;
        }
        line.windows(n).any(|w| {
            w.iter().zip(&self.words).enumerate().all(|(i, (have, want))| {
                if self.prefix && i == n - 1 {
                    have.starts_with(want.as_str())
                } else {
                    have == want
                }
            })
        })
    }

    /// Its words for the index, which keeps no positions: each word must be
    /// in the segment; [`Term::found_in`] checks the order on the line.
    fn fts(&self) -> impl Iterator<Item = String> + '_ {
        let last = self.words.len() - 1;
        self.words.iter().enumerate().map(move |(i, w)| {
            if self.prefix && i == last { format!("\"{w}\" *") } else { format!("\"{w}\"") }
        })
    }
}

/// A parsed search: words, phrases and prefixes all on one line, and an
/// optional regex the line must also match.
#[derive(Clone, Debug)]
pub(crate) struct Query {
    terms: Vec<Term>,
    regex: Option<Regex>,
}

impl Query {
    /// Parses `text` (words, `"phrases"`, `prefix*`) and compiles `regex`.
    ///
    /// # Errors
    /// No words, an unclosed quote, or a regex that does not compile.
    pub(crate) fn parse(text: &str, regex: Option<&str>) -> Result<Self, QueryError> {
        let mut terms = Vec::new();
        let mut rest = text;
        loop {
            rest = rest.trim_start();
            let Some(c) = rest.chars().next() else { break };
            let (piece, quoted, after) = if c == '"' {
                let body = &rest[1..];
                let end = body.find('"').ok_or_else(|| QueryError::OpenQuote(text.to_owned()))?;
                (&body[..end], true, &body[end + 1..])
            } else {
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                (&rest[..end], false, &rest[end..])
            };
            // `"a b"*` and `pre*` are prefixes.
            let (after, star_after_quote) = match after.strip_prefix('*') {
                Some(a) if quoted => (a, true),
                _ => (after, false),
            };
            let prefix = star_after_quote || (!quoted && piece.ends_with('*'));
            let words = words(piece);
            if let Some(last) =
                words.last().filter(|w| prefix && w.chars().count() < MIN_PREFIX_CHARS)
            {
                return Err(QueryError::ShortPrefix(last.clone()));
            }
            if !words.is_empty() {
                terms.push(Term { words, prefix });
            }
            rest = after;
        }
        if terms.is_empty() {
            return Err(QueryError::NoWords(text.to_owned()));
        }
        let regex = regex
            .filter(|r| !r.is_empty())
            .map(|r| {
                regex::RegexBuilder::new(r).size_limit(REGEX_SIZE_LIMIT).build().map_err(|e| {
                    QueryError::BadRegex { pattern: r.to_owned(), reason: e.to_string() }
                })
            })
            .transpose()?;
        Ok(Self { terms, regex })
    }

    /// The FTS5 expression that finds the segments holding every word (not
    /// necessarily on one line, nor in order: [`Query::matches`] checks
    /// each line).
    pub(crate) fn fts(&self) -> String {
        let words: Vec<String> = self.terms.iter().flat_map(Term::fts).collect();
        format!("text : ({})", words.join(" AND "))
    }

    /// Whether one line (as [`lines`] gives it) matches.
    pub(crate) fn matches(&self, line: &str) -> bool {
        let words = words(line);
        self.terms.iter().all(|t| t.found_in(&words))
            && self.regex.as_ref().is_none_or(|r| r.is_match(line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_lines(raw: &[u8]) -> Vec<(usize, usize, String)> {
        let mut out = Vec::new();
        lines(raw, |s, e, t| out.push((s, e, t.into_owned())));
        out
    }

    #[test]
    fn lines_end_at_either_break_and_are_rendered() {
        let raw = b"one\r\n\x1b[31mtwo\x1b[0m\nls -l\r50%\r100%\n   \nlast";
        assert_eq!(
            all_lines(raw),
            [
                (0, 3, "one".to_owned()),
                (5, 17, "two".to_owned()),
                (18, 23, "ls -l".to_owned()),
                (24, 27, "50%".to_owned()),
                (28, 32, "100%".to_owned()),
                (37, 41, "last".to_owned()),
            ]
        );
    }

    #[test]
    fn words_phrases_and_prefixes_match_on_one_line() {
        let q = Query::parse("connection \"refused by\" serv*", None).unwrap();
        assert_eq!(q.fts(), "text : (\"connection\" AND \"refused\" AND \"by\" AND \"serv\" *)");
        assert!(q.matches("Connection REFUSED by server 10.0.0.1"));
        assert!(!q.matches("connection refused it by server"), "a phrase is consecutive words");
        assert!(!q.matches("refused by server"), "every term must be there");
        assert!(!q.matches("connection refused by the observer"), "a prefix starts a word");
    }

    #[test]
    fn punctuation_splits_words_as_the_index_does() {
        let q = Query::parse("foo_bar.baz", None).unwrap();
        assert_eq!(q.fts(), "text : (\"foo\" AND \"bar\" AND \"baz\")");
        assert!(q.matches("call foo_bar.baz()"));
        assert!(q.matches("FOO-BAR baz"));
        assert!(Query::parse("\"exit code\"*", None).unwrap().matches("exit codes: 3"));
    }

    #[test]
    fn a_regex_filters_the_lines_the_words_found() {
        let q = Query::parse("error", Some(r"error \d+$")).unwrap();
        assert!(q.matches("fatal error 42"));
        assert!(!q.matches("error: none"));
    }

    #[test]
    fn bad_queries_say_what_is_wrong() {
        assert_eq!(
            Query::parse(" -> !! ", None).unwrap_err(),
            QueryError::NoWords(" -> !! ".into())
        );
        assert_eq!(
            Query::parse("\"never closed", None).unwrap_err(),
            QueryError::OpenQuote("\"never closed".into())
        );
        assert!(matches!(Query::parse("x", Some("(unclosed")), Err(QueryError::BadRegex { .. })));
        assert_eq!(Query::parse("e*", None).unwrap_err(), QueryError::ShortPrefix("e".into()));
    }

    #[test]
    fn words_split_where_the_tokenizer_splits_them() {
        // A vowel sign (a combining mark) separates words in unicode61.
        let q = Query::parse("किया", None).unwrap();
        assert_eq!(q.fts(), "text : (\"क\" AND \"य\")");
        assert!(q.matches("काम किया गया"));
        // Private-use glyphs (icon fonts) are word characters there.
        assert!(Query::parse("\u{e0a0}main", None).unwrap().matches("on \u{e0a0}main"));
        assert!(Query::parse("Ünïcode", None).unwrap().matches("ÜNÏCODE text"));
    }
}
