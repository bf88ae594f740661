//! Who reads a result, and so what its text block carries.
//!
//! Every result has two blocks: the structured content and a text. Clients
//! differ in which one they hand their model: Claude Code and Codex give it
//! only the structured content, Gemini CLI only the text, and others both.
//! The structured content always carries everything a model needs (output,
//! prompt, cursor, hint). The text carries the output too, unless the client
//! is known to hand its model only the structured content: then the text is
//! a one-line summary for the person watching, and the output is paid for
//! once. A client that is not known gets the full text, because a model that
//! reads only the text would otherwise see no output at all.

use std::sync::atomic::{AtomicU8, Ordering};

/// Environment variable choosing the text form (same values as
/// `--result-text`).
pub(crate) const ENV_RESULT_TEXT: &str = "PORTAL_RESULT_TEXT";

/// What a result's text block carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TextForm {
    /// Full for clients whose model may read the text, short for the ones
    /// known to hand their model only the structured content.
    #[default]
    Auto,
    /// The output, the screen and the status line, always.
    Full,
    /// A one-line summary: the output is only in the structured content.
    Short,
}

/// Client names (their `clientInfo.name`, compared by prefix) whose model
/// reads only the structured content: Claude Code and Codex.
const STRUCTURED_ONLY: &[&str] = &["claude-code", "codex"];

/// The form chosen at start (`--result-text`).
static CHOSEN: AtomicU8 = AtomicU8::new(0);

/// Whether the client known so far reads only the structured content.
static STRUCTURED_CLIENT: AtomicU8 = AtomicU8::new(0);

impl TextForm {
    const fn to_u8(self) -> u8 {
        match self {
            Self::Auto => 0,
            Self::Full => 1,
            Self::Short => 2,
        }
    }
}

/// Sets the form for this shim's life.
pub(crate) fn choose(form: TextForm) {
    CHOSEN.store(form.to_u8(), Ordering::Relaxed);
}

/// Notes the client's name (from `initialize` or a request's `_meta`).
pub(crate) fn client_is(name: &str) {
    let structured = STRUCTURED_ONLY.iter().any(|p| name.starts_with(p));
    STRUCTURED_CLIENT.store(u8::from(structured), Ordering::Relaxed);
}

/// Whether results carry the short text (see the module doc).
pub(crate) fn short_text() -> bool {
    match CHOSEN.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => STRUCTURED_CLIENT.load(Ordering::Relaxed) == 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_and_codex_get_the_short_text_others_the_full_one() {
        choose(TextForm::Auto);
        for (name, short) in [
            ("claude-code", true),
            ("codex-mcp-client", true),
            ("gemini-cli-mcp-client", false),
            ("mcp", false),
            ("", false),
        ] {
            client_is(name);
            assert_eq!(short_text(), short, "{name}");
        }
        client_is("claude-code");
        choose(TextForm::Full);
        assert!(!short_text(), "--result-text full wins");
        client_is("gemini-cli-mcp-client");
        choose(TextForm::Short);
        assert!(short_text(), "--result-text short wins");
        choose(TextForm::Auto);
    }
}
