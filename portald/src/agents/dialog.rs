//! Dialogs an agent shows on its screen: a permission request or another
//! choice menu. A prompt typed into one answers it (a `1` approves a tool, a
//! `p` approves it for good), so sends are never typed while one is open,
//! and the agent is reported waiting on it, with its text.
//!
//! Claude Code and Codex both draw their dialogs as numbered options with a
//! pointer on the selected one (`❯ 1. Yes`, `› 1. Yes, proceed (y)`); that
//! shape, not any one wording, is what is looked for, so it survives
//! rewording between versions. Answers in the agents' own transcripts are
//! plain text: a numbered list there carries no pointer.

/// What kind of dialog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DialogKind {
    /// The agent asks to run a tool, edit a file, or fetch something.
    Permission,
    /// Any other menu (a model picker, a question with options).
    Choice,
}

impl DialogKind {
    /// The agent-state reason it is reported with.
    pub(crate) const fn reason(self) -> &'static str {
        match self {
            Self::Permission => "permission",
            Self::Choice => "choice",
        }
    }
}

/// A dialog found on the screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dialog {
    /// Permission or choice.
    pub(crate) kind: DialogKind,
    /// Its lines as shown (box borders removed), question and options.
    pub(crate) text: String,
}

/// Lines above the first option that may belong to the dialog (its
/// question, the command or file it is about).
const CONTEXT_LINES: usize = 12;

/// The farthest the second option may be from the first (options can wrap).
const OPTION_SPAN: usize = 4;

/// Words that make a menu a permission request, lower case.
const PERMISSION_WORDS: &[&str] = &[
    "do you want to",
    "would you like to",
    "allow",
    "approve",
    "permission",
    "proceed",
    "run the following",
];

/// Pointers Ink-style select inputs draw before the selected option.
const POINTERS: &[char] = &['❯', '›', '>', '▶', '→'];

/// Box-drawing characters that frame dialogs and input boxes.
fn is_frame(c: char) -> bool {
    ('\u{2500}'..='\u{257f}').contains(&c) || c == '|'
}

/// A line with its frame removed, trimmed.
fn unframed(line: &str) -> &str {
    line.trim().trim_matches(is_frame).trim()
}

/// The option number a line starts with (`1. Yes`, `2) No`), after an
/// optional pointer; and whether the pointer was there.
fn option(line: &str) -> Option<(u32, bool)> {
    let s = unframed(line);
    let (pointed, s) = match s.strip_prefix(POINTERS) {
        Some(rest) => (true, rest.trim_start()),
        None => (false, s),
    };
    let digits = s.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || digits > 2 {
        return None;
    }
    let rest = &s[digits..];
    let rest = rest.strip_prefix(['.', ')'])?;
    if !rest.starts_with(' ') || rest.trim().is_empty() {
        return None;
    }
    Some((s[..digits].parse().ok()?, pointed))
}

/// The farthest option from line `i` in one direction (`up` or down):
/// options may be separated by wrapped lines, never by an empty one.
fn extent(lines: &[String], i: usize, up: bool) -> usize {
    let (mut far, mut gap, mut j) = (i, 0, i);
    loop {
        j = match (up, j) {
            (true, 0) => return far,
            (true, _) => j - 1,
            (false, _) if j + 1 >= lines.len() => return far,
            (false, _) => j + 1,
        };
        if option(&lines[j]).is_some() {
            (far, gap) = (j, 0);
        } else {
            gap += 1;
            if gap > OPTION_SPAN || unframed(&lines[j]).is_empty() {
                return far;
            }
        }
    }
}

/// Finds a dialog on a screen (its visible lines, top to bottom).
pub(crate) fn find(lines: &[String]) -> Option<Dialog> {
    // The selected option: a pointer before a number, with another
    // numbered option close by (a pointer alone is a prompt: `> `).
    let (first, last) = lines.iter().enumerate().find_map(|(i, l)| {
        if !option(l)?.1 {
            return None;
        }
        let (first, last) = (extent(lines, i, true), extent(lines, i, false));
        let options = (first..=last).filter(|k| option(&lines[*k]).is_some()).count();
        (options >= 2).then_some((first, last))
    })?;
    // The question: the non-empty lines right above the options.
    let mut top = first;
    while top > 0 && first - top < CONTEXT_LINES && !unframed(&lines[top - 1]).is_empty() {
        top -= 1;
    }
    let text: Vec<&str> =
        lines[top..=last].iter().map(|l| unframed(l)).filter(|l| !l.is_empty()).collect();
    let text = text.join("\n");
    let lower = text.to_lowercase();
    let kind = if PERMISSION_WORDS.iter().any(|w| lower.contains(w)) {
        DialogKind::Permission
    } else {
        DialogKind::Choice
    };
    Some(Dialog { kind, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn claude_asks_to_run_a_command() {
        let s = screen(
            "● Bash(echo hi > out.txt)\n\
             \n\
             ╭──────────────────────────────────────────╮\n\
             │ Bash command                             │\n\
             │                                          │\n\
             │   echo hi > out.txt                      │\n\
             │   Write a file                           │\n\
             │                                          │\n\
             │ Do you want to proceed?                  │\n\
             │ ❯ 1. Yes                                 │\n\
             │   2. Yes, and don't ask again for echo   │\n\
             │   3. No, and tell Claude what to do      │\n\
             │      differently (esc)                   │\n\
             ╰──────────────────────────────────────────╯",
        );
        let d = find(&s).expect("a dialog");
        assert_eq!(d.kind, DialogKind::Permission);
        assert!(d.text.starts_with("Do you want to proceed?\n❯ 1. Yes"), "{}", d.text);
        assert!(d.text.contains("3. No, and tell Claude"), "{}", d.text);
    }

    #[test]
    fn codex_asks_to_run_a_command() {
        let s = screen(
            "Would you like to run the following command?\n\
             \n\
             $ touch portal-was-here\n\
             \n\
             › 1. Yes, proceed (y)\n\
             \x20 2. Yes, and don't ask again for this command (p)\n\
             \x20 3. No, and tell Codex what to do differently (esc)\n\
             \n\
             Press enter to confirm or esc to cancel",
        );
        let d = find(&s).expect("a dialog");
        assert_eq!(d.kind, DialogKind::Permission);
        assert!(d.text.contains("› 1. Yes, proceed (y)"), "{}", d.text);
    }

    #[test]
    fn a_picker_is_a_choice() {
        let s = screen(
            " Select model\n Switch between models.\n\n ❯ 1. Default (recommended)  ✔\n   2. Opus\n   3. Haiku\n",
        );
        assert_eq!(find(&s).map(|d| d.kind), Some(DialogKind::Choice));
    }

    #[test]
    fn prompts_and_plain_lists_are_not_dialogs() {
        for text in [
            "╭────────────╮\n│ > hello    │\n╰────────────╯",
            "● Here is the plan:\n  1. Read the file\n  2. Fix the bug\n  3. Run the tests\n\n> ",
            ">>> 1 + 1\n2\n>>> ",
            "› 1. only one option\n\nsome text",
            "",
        ] {
            assert_eq!(find(&screen(text)), None, "{text:?}");
        }
    }
}
