//! The PTY registry's result (`program_query`, `program_record`) and its
//! text, in the original server's wording.

use std::fmt::Write as _;

use portal_proto::v1 as pb;
use schemars::JsonSchema;
use serde::Serialize;

/// `program_query`, `program_record` result.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct Program {
    /// Canonical program name.
    pub(crate) program: String,
    /// Whether the registry knows it.
    pub(crate) known: bool,
    /// Whether it needs a PTY (when known).
    pub(crate) needs_pty: Option<bool>,
    /// Notes (when known).
    pub(crate) notes: Option<String>,
    /// Consecutive confirmations: 2 or more is settled, 1 should be re-verified.
    pub(crate) confirmed_count: Option<u32>,
    /// The answer is Portal's built-in profile (nothing recorded yet).
    #[schemars(skip)]
    pub(crate) builtin: bool,
}

impl From<pb::Program> for Program {
    fn from(p: pb::Program) -> Self {
        Self {
            known: p.known,
            needs_pty: p.known.then_some(p.needs_pty),
            notes: p.known.then_some(p.notes),
            confirmed_count: p.known.then_some(p.confirmed_count),
            builtin: p.builtin,
            program: p.program,
        }
    }
}

/// Python-style booleans, as the original printed them.
fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

impl Program {
    /// The original's query wording.
    pub(crate) fn query_text(&self) -> String {
        match (self.needs_pty, self.confirmed_count) {
            (Some(pty), Some(n)) => {
                let how = if self.builtin {
                    "built-in profile".into()
                } else {
                    format!("confirmed x{n}")
                };
                let mut s = format!("{}: needs_pty={}, {how}", self.program, py_bool(pty));
                if let Some(notes) = self.notes.as_deref().filter(|n| !n.is_empty()) {
                    let _ = write!(s, " — {notes}");
                }
                s
            }
            _ => format!("{}: not in registry — apply decision rules", self.program),
        }
    }

    /// The original's record wording.
    pub(crate) fn record_text(&self) -> String {
        format!(
            "Recorded {}: needs_pty={} (confirmed x{}).",
            self.program,
            py_bool(self.needs_pty.unwrap_or(false)),
            self.confirmed_count.unwrap_or(0)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_wording_matches_the_original() {
        let p = Program {
            program: "ssh".into(),
            known: true,
            needs_pty: Some(true),
            notes: Some("interactive".into()),
            confirmed_count: Some(2),
            builtin: false,
        };
        assert_eq!(p.query_text(), "ssh: needs_pty=True, confirmed x2 — interactive");
        assert_eq!(p.record_text(), "Recorded ssh: needs_pty=True (confirmed x2).");
        let miss = Program {
            program: "ssh".into(),
            known: false,
            needs_pty: None,
            notes: None,
            confirmed_count: None,
            builtin: false,
        };
        assert_eq!(miss.query_text(), "ssh: not in registry — apply decision rules");
        let profile = Program { builtin: true, confirmed_count: Some(0), ..p };
        assert_eq!(profile.query_text(), "ssh: needs_pty=True, built-in profile — interactive");
    }
}
