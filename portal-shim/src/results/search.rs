//! `process_search`'s result: the matching lines, newest first, and the
//! text that says how to read around a hit or search on.

use schemars::JsonSchema;
use serde::Serialize;

use super::is_zero;

/// `process_search` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Searched {
    /// Matching lines, newest first.
    pub(crate) hits: Vec<SearchHit>,
    /// Pass as `page` for more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) next_page: Option<String>,
    /// Output not indexed yet, so not searched.
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) unindexed_bytes: u64,
    /// Stopped at its time budget: next_page continues.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) out_of_time: bool,
    /// Why the index is behind, when it is not being kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub(crate) index_error: Option<String>,
}

/// A matching line.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct SearchHit {
    /// Process id.
    pub(crate) id: u64,
    /// Its name, if it has one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) name: String,
    /// stdout, stderr or stdin.
    pub(crate) source: String,
    /// When it was printed (UTC).
    pub(crate) time: String,
    /// The line.
    pub(crate) line: String,
    /// process_read with this cursor and source reads from a few lines before it.
    pub(crate) cursor: String,
}

/// A search's answer as text: a line per hit, then how to go on.
pub(crate) fn search_text(s: &Searched, query: &str) -> String {
    let mut out = String::new();
    if s.hits.is_empty() {
        if s.out_of_time {
            out.push_str(&format!("No line matches {query:?} in the part searched so far.\n"));
        } else {
            out.push_str(&format!("No line matches {query:?}.\n"));
        }
    }
    for h in &s.hits {
        let name = if h.name.is_empty() { String::new() } else { format!(" ({})", h.name) };
        out.push_str(&format!(
            "{}{name} {} {} [{}] {}\n",
            h.id, h.source, h.time, h.cursor, h.line
        ));
    }
    if let Some(h) = s.hits.first() {
        out.push_str(&format!(
            "Read around a hit: process_read(id={}, source=\"{}\", cursor=\"{}\").\n",
            h.id, h.source, h.cursor
        ));
    }
    match (&s.next_page, s.out_of_time) {
        (Some(p), true) => out.push_str(&format!(
            "The search stopped at its time budget: the same search with page=\"{p}\" goes on.\n"
        )),
        (Some(p), false) => {
            out.push_str(&format!("More (older) hits: the same search with page=\"{p}\".\n"));
        }
        (None, _) => {}
    }
    match (&s.index_error, s.unindexed_bytes) {
        (Some(e), n) => out.push_str(&format!(
            "The search index is behind ({e}); {n} bytes of output were not searched.\n"
        )),
        (None, 0) => {}
        (None, n) => out.push_str(&format!(
            "Not searched yet: {n} bytes of output the index is still catching up with; search again shortly.\n"
        )),
    }
    out
}
