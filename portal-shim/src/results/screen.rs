//! Driving a full-screen program: `process_screen`'s result (the visible
//! rows down to the last written one) and its text, and
//! `process_send_keys`'s.

use std::fmt::Write as _;

use portal_client::vocab;
use schemars::JsonSchema;
use serde::Serialize;

use super::SHORT_OUTPUT;

/// `process_screen` result. Blank rows below the last written one are left
/// out (`rows` says how many the screen has).
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Screen {
    /// Process id: for the text only.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) id: u64,
    /// Its status, once it is not running.
    #[serde(skip_serializing_if = "is_running")]
    pub(crate) status: vocab::Status,
    /// "alternate" while a full-screen program (vim, less) draws on the
    /// alternate screen; absent on the primary one.
    #[serde(skip_serializing_if = "is_primary")]
    pub(crate) buffer: String,
    /// Columns.
    pub(crate) cols: u32,
    /// Rows.
    pub(crate) rows: u32,
    /// Cursor column, 0-based.
    pub(crate) cursor_x: u32,
    /// Cursor row, 0-based.
    pub(crate) cursor_y: u32,
    /// Window title set by the program.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub(crate) title: String,
    /// The visible rows from the top, trailing spaces removed, down to the
    /// last row with text.
    pub(crate) lines: Vec<String>,
}

/// A running program, which goes without saying on its screen.
#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if passes a reference"
)]
fn is_running(status: &vocab::Status) -> bool {
    *status == vocab::Status::Running
}

/// The primary screen, which goes without saying.
fn is_primary(buffer: &str) -> bool {
    buffer == "primary"
}

/// A screen's rows without the blank ones below the last written row.
pub(crate) fn written_rows(mut lines: Vec<String>) -> Vec<String> {
    let keep = lines.iter().rposition(|l| !l.trim_end().is_empty()).map_or(0, |i| i + 1);
    lines.truncate(keep);
    lines
}

/// The screen block, as the original printed it; where the client's model
/// reads only the structured content ([`crate::audience`]), its header line.
pub(crate) fn screen_text(s: &Screen) -> String {
    let mut out = format!(
        "Process {} (status={}, buffer={}, {}x{}, cursor=({},{})):",
        s.id, s.status, s.buffer, s.cols, s.rows, s.cursor_x, s.cursor_y
    );
    if !s.title.is_empty() {
        let _ = write!(out, " title={:?}", s.title);
    }
    if crate::audience::short_text()
        && s.lines.iter().map(String::len).sum::<usize>() > SHORT_OUTPUT
    {
        let _ = write!(out, " ({} rows in the structured result)", s.lines.len());
        return out;
    }
    for line in &s.lines {
        out.push('\n');
        out.push_str(line);
    }
    let shown = u32::try_from(s.lines.len()).unwrap_or(u32::MAX);
    if shown < s.rows {
        let _ = write!(out, "\n[{} blank rows below]", s.rows - shown);
    }
    out
}

/// `process_send_keys` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct KeysSent {
    /// Process id.
    pub(crate) id: u64,
    /// Bytes written.
    pub(crate) written: u64,
}
