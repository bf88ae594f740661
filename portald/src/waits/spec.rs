//! What a wait is asked ([`WaitSpec`]: its conditions, streams, bounds)
//! and what it answers ([`WaitOutcome`]: why it ended, the text, where to
//! continue, the state of the program).

use std::time::Duration;

use crate::proc::input::InputReport;
use crate::proc::{ProcStatus, StreamId};

/// How far back a regular expression may reach into text it already saw
/// when new text arrives.
pub(crate) const REGEX_LOOKBACK: usize = 4096;

/// Settle window when a wait names no condition at all: long enough for a
/// program between two bursts of output, short enough for an agent.
pub(crate) const DEFAULT_SETTLE: Duration = Duration::from_millis(750);

/// Timeout when none is given.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A needle.
#[derive(Clone, Debug)]
pub(crate) enum Matcher {
    /// Literal text.
    Literal(String),
    /// A regular expression.
    Regex(regex::Regex),
}

impl Matcher {
    pub(super) fn lookback(&self) -> usize {
        match self {
            Self::Literal(s) => s.len(),
            Self::Regex(_) => REGEX_LOOKBACK,
        }
    }

    /// The first match at or after `from` (a byte index, moved back to a
    /// character boundary).
    pub(super) fn find(&self, hay: &str, from: usize) -> Option<String> {
        let mut from = from.min(hay.len());
        while !hay.is_char_boundary(from) {
            from -= 1;
        }
        match self {
            Self::Literal(s) => hay[from..].find(s.as_str()).map(|_| s.clone()),
            Self::Regex(re) => re.find(&hay[from..]).map(|m| m.as_str().to_owned()),
        }
    }
}

/// What to wait for.
#[derive(Clone, Debug)]
pub(crate) struct WaitSpec {
    /// Output streams watched.
    pub(crate) streams: Vec<StreamId>,
    /// Start offsets; `None` = now.
    pub(crate) from: Option<[Option<u64>; 3]>,
    /// The needle.
    pub(crate) needle: Option<Matcher>,
    /// Match the needle on the rendered screen.
    pub(crate) on_screen: bool,
    /// Stop patterns.
    pub(crate) stop: Vec<Matcher>,
    /// Settle window.
    pub(crate) settle: Option<Duration>,
    /// Settle on the screen instead of bytes.
    pub(crate) screen_stable: bool,
    /// Most bytes of text returned (the newest kept); never ends the wait.
    pub(crate) max_bytes: u64,
    /// Effective timeout.
    pub(crate) timeout: Duration,
    /// The requested timeout was lowered to the ceiling.
    pub(crate) clamped: bool,
    /// Include the screen in the outcome.
    pub(crate) snapshot: bool,
    /// Also end when the program waits for input.
    pub(crate) input: bool,
    /// With a full-screen program drawing at the end, return the byte
    /// stream as text rather than the rendered screen.
    pub(crate) raw_output: bool,
    /// No cursor was given: start at the "read new" position and move it to
    /// where the wait ends.
    pub(crate) consume: bool,
}

impl WaitSpec {
    /// True when the request named no condition of its own.
    pub(crate) fn has_conditions(&self) -> bool {
        self.needle.is_some() || self.settle.is_some() || self.screen_stable
    }
}

/// Why a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitReason {
    /// The needle appeared.
    Matched,
    /// A stop pattern appeared.
    Stopped,
    /// No output for the settle window.
    Settled,
    /// The screen did not change for the settle window.
    ScreenStable,
    /// The shell's "command finished" mark (runs in a Portal bash).
    Prompt,
    /// The program waits for input.
    InputRequested,
    /// The program waits for a secret.
    AwaitingSecret,
    /// The process ended.
    Exited,
    /// The timeout passed.
    Timeout,
}

/// How a run recognises that its command finished.
#[derive(Clone, Debug)]
pub(crate) enum Completion {
    /// Only the conditions in the spec.
    Conditions,
    /// The shell's OSC 133 "command finished" mark (bash started by Portal),
    /// after skipping this many (the first prompt, when the shell had not
    /// shown one yet).
    ShellMark {
        /// Marks to skip.
        skip: usize,
    },
}

/// A match: its text, its stream, and the offset after the chunk it
/// completed in.
pub(crate) type Match = (String, StreamId, u64);

/// The outcome of a wait.
#[derive(Clone, Debug)]
pub(crate) struct WaitOutcome {
    /// Why it ended.
    pub(crate) reason: WaitReason,
    /// The matched text, its stream and the offset after its chunk.
    pub(crate) matched: Option<Match>,
    /// Output text, tail kept.
    pub(crate) output: String,
    /// Raw bytes seen.
    pub(crate) bytes: u64,
    /// Output was cut to its tail.
    pub(crate) truncated: bool,
    /// Where the wait began: a paged read from it goes through everything
    /// the output covers, the part cut off included.
    pub(crate) began: [u64; 3],
    /// Where to continue.
    pub(crate) next: [u64; 3],
    /// Streams watched (for the cursor).
    pub(crate) streams: Vec<StreamId>,
    /// Timeout used.
    pub(crate) timeout: Duration,
    /// The timeout was clamped.
    pub(crate) clamped: bool,
    /// Time waited.
    pub(crate) elapsed: Duration,
    /// Status at the end.
    pub(crate) status: ProcStatus,
    /// Alternate screen in use (PTY).
    pub(crate) alternate: bool,
    /// The command's exit status from shell integration.
    pub(crate) command_exit: Option<i32>,
    /// The screen, when asked for.
    pub(crate) screen: Vec<String>,
    /// The needle was on the screen when the wait began.
    pub(crate) matched_at_entry: bool,
    /// The program now waits for a secret.
    pub(crate) awaiting_secret: bool,
    /// The line the program shows while it waits for input.
    pub(crate) prompt: String,
    /// The input state at the end (`None` for a process of an earlier daemon).
    pub(crate) input: Option<InputReport>,
    /// `output` is the rendered screen of a full-screen program.
    pub(crate) output_is_screen: bool,
    /// A full-screen program draws at the end (the alternate screen, or the
    /// main screen taken over): it has no prompt line.
    pub(crate) full_screen: bool,
}
