//! Expect-style runs: input written (and Enter), then a wait from the
//! cursor taken before the write, ended by the spec's conditions or by the
//! program asking for input again (in a bash started by Portal, by the
//! shell's "command finished" mark); the echo of the typed lines is taken
//! out of the result.

use std::time::Duration;

use bytes::Bytes;

use super::keys::text_bytes;
use super::spec::{Completion, WaitOutcome, WaitSpec};
use super::waiter::{Entry, MAX_PROMPT_CHARS, WaitContext, consumed, wait_with};
use crate::proc::{ProcError, ProcHandle};

/// Longest bare continuation prompt (`...`, `>`) taken for the echo of a
/// blank line typed inside a block.
const MAX_BARE_PROMPT_CHARS: usize = 4;

/// A shell with integration that never printed a mark this long after its
/// start has had it overridden (by its rc files, say): runs then fall back
/// to prompt detection.
const SHELL_STARTUP: Duration = Duration::from_secs(5);

fn started_recently(h: &ProcHandle) -> bool {
    let age_ns = crate::sys::wall_ns() - h.facts.started_at_ns;
    u64::try_from(age_ns).is_ok_and(|ns| Duration::from_nanos(ns) < SHELL_STARTUP)
}

/// How text was typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Typed {
    /// As keys, each line ended by Enter (or one line).
    Keys,
    /// As one bracketed paste, which a line editor may draw twice (as it
    /// arrives, then again as it redraws the edited lines).
    BracketedPaste,
}

/// Writes text, as a bracketed paste when it spans lines and the program
/// enabled bracketed paste (else, on a PTY, newlines become Enter).
async fn write_text(h: &ProcHandle, text: &str) -> Result<Typed, ProcError> {
    let snap =
        if text.contains('\n') && h.screen.is_some() { Some(h.snapshot().await?) } else { None };
    let typed = if snap.as_ref().is_some_and(|s| s.bracketed_paste) {
        Typed::BracketedPaste
    } else {
        Typed::Keys
    };
    h.write(text_bytes(text, snap.as_ref())).await?;
    Ok(typed)
}

/// Writes `input` (and Enter, as a separate write) and waits, from a cursor
/// taken before the write. Completion: the spec's conditions when it names
/// any; else the program waiting for input again (any prompt), or, in a bash
/// started by Portal, the shell's mark when that comes first. The "read new"
/// position moves past the result.
pub(crate) async fn run(
    h: &ProcHandle,
    cx: &WaitContext<'_>,
    mut spec: WaitSpec,
    input: &str,
    enter: bool,
) -> Result<WaitOutcome, ProcError> {
    // Subscribe before writing: the output of the input arrives live, and
    // the cursor is exactly where the input began.
    let attachment = h.attach().await?;
    spec.from = Some(attachment.ends.map(Some));
    let explicit = spec.has_conditions();
    let completion = if !explicit
        && h.facts.shell_integration
        && (attachment.prompt_marks > 0 || started_recently(h))
    {
        // A shell that has not shown its first prompt yet will print that
        // prompt's mark before running the input.
        Completion::ShellMark { skip: usize::from(attachment.prompt_marks == 0) }
    } else {
        Completion::Conditions
    };
    let typed = if input.is_empty() { Typed::Keys } else { write_text(h, input).await? };
    if enter {
        let key: &[u8] = if h.screen.is_some() { b"\r" } else { b"\n" };
        // With the text typed, "nothing was done" is no longer true.
        h.write(Bytes::from_static(key)).await.map_err(|e| match e {
            ProcError::ShuttingDown if !input.is_empty() => ProcError::Interrupted(h.id()),
            other => other,
        })?;
    }
    // Cut after the input went in: saying "retry" would type it twice.
    let mut out = wait_with(h, cx, spec, completion.clone(), Entry::AfterInput, Some(attachment))
        .await
        .map_err(|e| match e {
            ProcError::ShuttingDown => ProcError::Interrupted(h.id()),
            other => other,
        })?;
    if h.screen.is_some() && !out.output_is_screen {
        strip_echo(&mut out.output, input, typed);
    }
    consumed(h, &out);
    Ok(out)
}

/// Removes the echo of the typed lines from a run's output, keeping the
/// program's output, wherever the echo is: a REPL reads a paste line by
/// line, so the echo of each later line comes after the output of the one
/// before, behind the prompt (`>>> y = 2`, `... print(i)`, `sqlite> …`; a
/// blank line echoes as the bare prompt).
///
/// Each typed line is echoed at most twice, in order: plainly (by the
/// terminal, or by the program for the first line, whose prompt came before
/// the output), only before any output; and behind a prompt (by the
/// program, which shows its prompt again for each line it reads). Input
/// typed before the program reads it is echoed both ways (the terminal,
/// then the program; Enter as an empty line), so a few bare prompt lines
/// after it are echo too. A line editor given a bracketed paste draws it as
/// it arrives and again as it redraws the edited lines: before any output,
/// the whole paste may come twice.
fn strip_echo(output: &mut String, input: &str, typed: Typed) {
    // Every line typed, a trailing blank one included (it ends a block).
    let lines: Vec<&str> = input.split('\n').map(str::trim).collect();
    if lines.first().is_none_or(|l| l.is_empty()) {
        return;
    }
    let n = lines.len();
    // The next line whose plain echo, second drawing (a redrawn paste) or
    // echo behind a prompt is expected.
    let (mut plain, mut redrawn, mut prompted) = (0, 0, 0);
    // Still before the program's first line of output.
    let mut front = true;
    let mut spare_bare = n;
    let mut kept = String::with_capacity(output.len());
    for line in output.split_inclusive('\n') {
        let text = line.trim_end();
        let complete = line.ends_with('\n');
        let bare = is_bare_prompt(text);
        // The program's echo of the next line, or (the first line's was
        // plain) of the one after.
        let behind_prompt = (prompted..n.min(prompted + 2))
            .filter(|&k| k == prompted || (prompted == 0 && plain > 0))
            .find(|&k| complete && echoed_after_prompt(text, lines[k]));
        if let Some(k) = behind_prompt {
            prompted = k + 1;
            // The program has read these lines: the terminal no longer
            // echoes them.
            plain = plain.max(prompted);
        } else if front && complete && plain < n && plain_echo(text, lines[plain], bare) {
            plain += 1;
        } else if front
            && complete
            && typed == Typed::BracketedPaste
            && plain == n
            && redrawn < n
            && plain_echo(text, lines[redrawn], bare)
        {
            redrawn += 1;
        } else if front
            && complete
            && plain == n
            && bare
            && spare_bare > 0
            && (prompted > 0 || !text.trim().is_empty())
        {
            // After the whole input: a continuation prompt (`... `) is echo
            // whatever the order the terminal and the program echoed in; an
            // empty line is, only when the input was seen echoed twice.
            spare_bare -= 1;
        } else {
            front = false;
            kept.push_str(line);
        }
    }
    *output = kept;
}

/// Whether `line` is the plain echo of the typed line `want` (a blank
/// typed line echoes as nothing or a bare prompt).
fn plain_echo(line: &str, want: &str, bare: bool) -> bool {
    if want.is_empty() { bare } else { line.contains(want) }
}

/// Whether `line` is `want` echoed after a prompt (`>>> x`, `... x`,
/// `$ x`, `name? x`, `sqlite> x`; a blank typed line as the bare prompt),
/// as a program echoes each line it reads. A line that merely ends with the
/// input (`q=x` after `x` was typed, or `x` again from `cat`) is the
/// program's output.
fn echoed_after_prompt(line: &str, want: &str) -> bool {
    if want.is_empty() {
        return !line.trim().is_empty() && is_bare_prompt(line);
    }
    let Some(prompt) = line.trim_end().strip_suffix(want) else { return false };
    let shown = prompt.trim_end();
    if shown.is_empty() || shown.chars().count() > MAX_PROMPT_CHARS {
        return false;
    }
    let ends_like_a_prompt = shown.ends_with(['>', '$', '#', '%', ':', '?', ']', ')'])
        && prompt.ends_with(|c: char| c.is_whitespace() || "$#%>".contains(c));
    ends_like_a_prompt || (is_bare_prompt(shown) && prompt.ends_with(char::is_whitespace))
}

/// A line that is only a continuation prompt (`...`, `>`) or nothing: no
/// letters or digits, and short.
fn is_bare_prompt(line: &str) -> bool {
    let t = line.trim();
    t.chars().count() <= MAX_BARE_PROMPT_CHARS && !t.chars().any(char::is_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::{Typed, strip_echo};

    fn stripped(output: &str, input: &str) -> String {
        let mut out = output.to_owned();
        strip_echo(&mut out, input, Typed::Keys);
        out
    }

    fn stripped_paste(output: &str, input: &str) -> String {
        let mut out = output.to_owned();
        strip_echo(&mut out, input, Typed::BracketedPaste);
        out
    }

    #[test]
    fn a_pasted_block_loses_every_line_of_its_echo() {
        // A REPL reads a paste line by line: each later line's echo follows
        // the output of the line before, behind the prompt.
        let three = "print(1)\nprint(2)\nprint(3)";
        assert_eq!(stripped("print(1)\n1\n>>> print(2)\n2\n>>> print(3)\n3\n", three), "1\n2\n3\n");
        // Typed while the program was busy: the terminal echoed the lines
        // first, then the program again behind its prompt.
        assert_eq!(
            stripped("print(1)\nprint(2)\nprint(3)\n1\n>>> print(2)\n2\n>>> print(3)\n3\n", three),
            "1\n2\n3\n"
        );
        // A block (indented, ended by a blank line), then a statement.
        let block = "for i in range(2):\n    print(i)\n\nprint('done')";
        let echoed = "for i in range(2):\n...     print(i)\n... \n0\n1\n>>> print('done')\ndone\n";
        assert_eq!(stripped(echoed, block), "0\n1\ndone\n");
        // A line editor's bracketed paste: drawn as it arrived, then again
        // from the prompt's column as it redraws the lines.
        let sql = "CREATE TABLE t(a);\nINSERT INTO t VALUES(1);\nSELECT * FROM t;";
        let drawn = "CREATE TABLE t(a);\nINSERT INTO t VALUES(1);\nSELECT * FROM t;\n        CREATE TABLE t(a);\nINSERT INTO t VALUES(1);\nSELECT * FROM t;\n1\n";
        assert_eq!(stripped_paste(drawn, sql), "1\n");
        // The same text typed as keys into `cat` is output the second time.
        assert_eq!(stripped("a\nb\na\nb\n", "a\nb"), "a\nb\n");
        // After the first line of output, a later line without a prompt
        // before it is output.
        assert_eq!(stripped("x\nout\ny\n", "x\ny"), "out\ny\n");
    }

    #[test]
    fn the_echo_goes_and_the_output_stays() {
        assert_eq!(stripped("print(6*7)\n42\n", "print(6*7)"), "42\n");
        // An empty line of output is output, not echo.
        assert_eq!(stripped("print()\n\n", "print()"), "\n");
        // A block: each line echoed after a continuation prompt, the blank
        // line that ends it as the bare prompt.
        let block = "for i in range(3): print(i)\n";
        assert_eq!(stripped("for i in range(3): print(i)\n... \n0\n1\n2\n", block), "0\n1\n2\n");
        // Typed before the program read it: the terminal echoed it too,
        // Enter as an empty line.
        let early =
            "for i in range(3): print(i)\n>>> for i in range(3): print(i)\n\n... \n0\n1\n2\n";
        assert_eq!(stripped(early, block), "0\n1\n2\n");
        // Echoed by the terminal, Enter as an empty line, and the program's
        // continuation prompt after it (seen under load).
        let kernel_first = "for i in range(3): print(i)\n\n... \n0\n1\n2\n";
        assert_eq!(stripped(kernel_first, block), "0\n1\n2\n");
        // Output that happens to look like the input is not taken for echo.
        assert_eq!(stripped("echo hi\nhi\n", "echo hi"), "hi\n");
        // Output that ends with the input, or repeats it, is output: a
        // program that printed `q=hello` after `hello`, or `cat`.
        assert_eq!(stripped("hello\nq=hello\n", "hello"), "q=hello\n");
        assert_eq!(stripped("hello\nhello\n", "hello"), "hello\n");
        // A shell that echoed early input after its prompt.
        assert_eq!(stripped("ls\n$ ls\na b\n", "ls"), "a b\n");
        assert_eq!(stripped("1\nname? 1\nok\n", "1"), "ok\n");
    }
}
