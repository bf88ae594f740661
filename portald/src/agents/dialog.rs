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

/// Lines after the last option that may be its hint (`Esc to cancel`).
const HINT_LINES: usize = 2;

/// What transcript lines and input prompts start with: the dialog's text
/// stops above them.
const TRANSCRIPT_MARKERS: &[char] = &['•', '●', '◦', '›', '❯', '>', '⎿', '✔', '✗'];

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
    // The question: the lines above the options, up to the transcript
    // (a line starting with a marker such as `•`), the third rule, or
    // CONTEXT_LINES; blank lines and rules are left out of the text.
    let mut top = first;
    let mut rules = 0;
    while top > 0 && first - top < CONTEXT_LINES {
        let line = unframed(&lines[top - 1]);
        if line.starts_with(TRANSCRIPT_MARKERS) {
            break;
        }
        if line.is_empty() && !lines[top - 1].trim().is_empty() {
            rules += 1;
            if rules == 3 {
                break;
            }
        }
        top -= 1;
    }
    // The hint after the options (which keys answer it).
    let mut bottom = last;
    while bottom + 1 < lines.len()
        && bottom - last < HINT_LINES
        && !unframed(&lines[bottom + 1]).is_empty()
    {
        bottom += 1;
    }
    let text: Vec<&str> =
        lines[top..=bottom].iter().map(|l| unframed(l)).filter(|l| !l.is_empty()).collect();
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
        // Claude Code 2.1.332, as a Portal PTY rendered it.
        let s = screen(
            "❯ please write the file\n\
             ● Running echo portal-tool-ran > /tmp/ch/work/out.txt\n\
             \x20 ⎿  $ echo portal-tool-ran > /tmp/ch/work/out.txt\n\
             ────────────────────────────────────────────────\n\
             \x20Bash command\n\
             \x20Run echo portal-tool-ran > /tmp/ch/work/out.txt\n\
             ╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌\n\
             \x20echo portal-tool-ran > /tmp/ch/work/out.txt\n\
             ╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌╌\n\
             \x20Do you want to proceed?\n\
             \x20❯ 1. Yes\n\
             \x20  2. Yes, and always allow access to /tmp/ch/work from this project\n\
             \x20  3. Yes, and switch to auto mode · auto mode handles these prompts for you\n\
             \x20  4. No\n\
             \x20Esc to cancel · Tab to amend\n",
        );
        let d = find(&s).expect("a dialog");
        assert_eq!(d.kind, DialogKind::Permission);
        assert_eq!(
            d.text,
            "Bash command\nRun echo portal-tool-ran > /tmp/ch/work/out.txt\n\
             echo portal-tool-ran > /tmp/ch/work/out.txt\nDo you want to proceed?\n❯ 1. Yes\n\
             2. Yes, and always allow access to /tmp/ch/work from this project\n\
             3. Yes, and switch to auto mode · auto mode handles these prompts for you\n\
             4. No\nEsc to cancel · Tab to amend"
        );
    }

    #[test]
    fn codex_asks_to_run_a_command() {
        // Codex 0.171.0, as a Portal PTY rendered it.
        let s = screen(
            "› touch escalated\n\
             \n\
             • Running touch /tmp/x2/work/escalated\n\
             \n\
             \x20 Would you like to run the following command?\n\
             \n\
             \x20 Environment: local\n\
             \n\
             \x20 Reason: Run touch /tmp/x2/work/escalated?\n\
             \n\
             \x20 $ touch /tmp/x2/work/escalated\n\
             \n\
             › 1. Yes, proceed (y)\n\
             \x20 2. Yes, and don't ask again for commands that start with `touch` (p)\n\
             \x20 3. No, and tell Codex what to do differently (esc)\n\
             \n\
             \x20 Press enter to confirm or esc to cancel",
        );
        let d = find(&s).expect("a dialog");
        assert_eq!(d.kind, DialogKind::Permission);
        assert!(d.text.starts_with("Would you like to run the following command?\n"), "{}", d.text);
        assert!(
            d.text.contains("$ touch /tmp/x2/work/escalated\n› 1. Yes, proceed (y)"),
            "{}",
            d.text
        );
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
