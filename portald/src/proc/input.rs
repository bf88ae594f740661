//! Whether a program waits for input: the state every process reports, and
//! the one decision that derives it from the kernel's answer
//! ([`super::probe`]) and what the actor knows about recent input and output.
//!
//! The kernel decides first. A program that reads its input plainly waits
//! for it once it slept again after the last input. A program in an event
//! loop ([`Verdict::EventLoop`]: node, deno, bun, gdb) sleeps in the same
//! call while a timer or an await runs, so it waits for input only once it
//! has also drawn its prompt again: output came after the last input and
//! the cursor is after text on its line ([`InputSource::KernelPrompt`]). A
//! full-screen program has no prompt line; the kernel alone decides for it.
//! The text heuristic (output quiet, a prompt drawn) serves only where the
//! kernel cannot be asked, and says so ([`InputSource::Heuristic`]).

use std::time::Duration;

use super::probe::{Probe, Verdict};

/// Output must have been quiet this long before a program counts as waiting:
/// a prompt still being drawn is complete by then, and it is well below what
/// a person or an agent notices.
pub(crate) const QUIET: Duration = Duration::from_millis(15);

/// Input this old has reached the program even if it never woke for it (a
/// partial line in canonical mode only wakes the reader at Enter). Far above
/// the kernel's delivery latency, even on a loaded machine.
pub(crate) const DELIVERY: Duration = Duration::from_millis(250);

/// A program that printed this recently and now sleeps on something other
/// than input (a loop printing every second, a build between steps) is
/// still working, not idle.
pub(crate) const IDLE_QUIET: Duration = Duration::from_secs(2);

/// Where the kernel cannot be asked, output must be quiet this long with the
/// cursor after text before a program counts as waiting (a guess).
pub(crate) const HEURISTIC_QUIET: Duration = Duration::from_millis(500);

/// Whether a program waits for input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InputState {
    /// Working or printing, or not yet done with the input it was given.
    Running,
    /// Blocked reading its terminal or stdin, nothing pending.
    AwaitingInput,
    /// The same with echo off at a line prompt (a password).
    AwaitingSecret,
    /// Quiet and not reading input (a timer, the network, a child).
    Idle,
    /// The program ended: it waits for nothing any more.
    Exited,
}

impl InputState {
    /// True when the program waits for someone to type.
    pub(crate) const fn wants_input(self) -> bool {
        matches!(self, Self::AwaitingInput | Self::AwaitingSecret)
    }

    /// Stored form for [`super::Shared`].
    pub(crate) const fn to_u8(self) -> u8 {
        match self {
            Self::Running => 1,
            Self::AwaitingInput => 2,
            Self::AwaitingSecret => 3,
            Self::Idle => 4,
            Self::Exited => 5,
        }
    }

    /// From [`Self::to_u8`]; 0 (never decided) is `None`.
    pub(crate) const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(Self::Running),
            2 => Some(Self::AwaitingInput),
            3 => Some(Self::AwaitingSecret),
            4 => Some(Self::Idle),
            5 => Some(Self::Exited),
            _ => None,
        }
    }
}

/// What decided an input state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InputSource {
    /// The blocked system call and its file descriptors.
    Kernel,
    /// Output quiet with the cursor after text.
    Heuristic,
    /// The kernel saw an event loop watching the input, and the prompt
    /// drawn again after the last input (or its absence) decided.
    KernelPrompt,
}

/// What the program shows where a prompt would be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prompt {
    /// The cursor is after text on its line (on pipes: the last output
    /// does not end a line).
    Drawn,
    /// A full-screen program draws: it has no prompt line.
    FullScreen,
    /// The cursor starts a line: output, not a prompt.
    Absent,
}

/// An input state and what decided it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InputReport {
    /// The state.
    pub(crate) state: InputState,
    /// Its source.
    pub(crate) source: InputSource,
}

/// What the actor knows when it decides.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Facts {
    /// The kernel's answer (`None`: not asked).
    pub(crate) probe: Option<Probe>,
    /// The mark taken just before the last input was written (`None`: no
    /// input yet, or no mark could be taken).
    pub(crate) baseline: Option<u64>,
    /// Time since the last input was written (`None`: never).
    pub(crate) since_input: Option<Duration>,
    /// Input is queued but not written, or output is waiting to be read.
    pub(crate) pending: bool,
    /// Time since the last output.
    pub(crate) since_output: Duration,
    /// The terminal reads a line with echo off.
    pub(crate) secret: bool,
    /// What the program shows where a prompt would be.
    pub(crate) prompt: Prompt,
    /// Output arrived after the last input (or there was no input yet).
    pub(crate) output_since_input: bool,
}

impl Facts {
    /// A prompt was drawn after the last input, or the program is
    /// full-screen (its whole screen is what it asks with).
    fn prompt_again(&self) -> bool {
        match self.prompt {
            Prompt::FullScreen => true,
            Prompt::Drawn => self.output_since_input,
            Prompt::Absent => false,
        }
    }
}

/// The decision.
pub(crate) fn decide(f: &Facts) -> InputReport {
    let kernel = |state| InputReport { state, source: InputSource::Kernel };
    let waiting = if f.secret { InputState::AwaitingSecret } else { InputState::AwaitingInput };
    // It must have gone back to sleep after the last input reached it: a
    // changed mark says it ran since; old enough input has surely arrived.
    // Otherwise the input is still on its way.
    let settled = |mark: u64| {
        let consumed =
            f.since_input.is_none_or(|t| t >= DELIVERY) || f.baseline.is_none_or(|b| b != mark);
        consumed && !f.pending && f.since_output >= QUIET
    };
    match f.probe.map(|p| (p.verdict, p.mark)) {
        Some((Verdict::Running, _)) => kernel(InputState::Running),
        Some((Verdict::Input, mark)) => {
            kernel(if settled(mark) { waiting } else { InputState::Running })
        }
        Some((Verdict::EventLoop, mark)) => {
            let state = if !settled(mark) {
                InputState::Running
            } else if f.prompt == Prompt::FullScreen || f.secret {
                // Keys drive a full-screen program; a line read with echo
                // off is read by the terminal's line discipline.
                return kernel(waiting);
            } else if f.prompt_again() {
                waiting
            } else if f.since_output < IDLE_QUIET {
                // Busy awaiting something (a timer, a promise) it started
                // for the input: a run goes on.
                InputState::Running
            } else {
                InputState::Idle
            };
            InputReport { state, source: InputSource::KernelPrompt }
        }
        Some((Verdict::Other, _)) => {
            kernel(if f.since_output < IDLE_QUIET { InputState::Running } else { InputState::Idle })
        }
        Some((Verdict::Unknown, _)) | None => {
            let state = if f.pending || f.since_output < HEURISTIC_QUIET {
                InputState::Running
            } else if f.prompt_again() || f.secret {
                waiting
            } else if f.since_output < IDLE_QUIET {
                InputState::Running
            } else {
                InputState::Idle
            };
            InputReport { state, source: InputSource::Heuristic }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(verdict: Option<Verdict>) -> Facts {
        Facts {
            probe: verdict.map(|verdict| Probe { verdict, mark: 7 }),
            baseline: None,
            since_input: None,
            pending: false,
            since_output: Duration::from_secs(1),
            secret: false,
            prompt: Prompt::Drawn,
            output_since_input: true,
        }
    }

    #[test]
    fn the_kernel_decides_and_silence_alone_never_means_waiting() {
        assert_eq!(decide(&facts(Some(Verdict::Input))).state, InputState::AwaitingInput);
        let ticking = Facts { since_output: Duration::from_secs(1), ..facts(Some(Verdict::Other)) };
        assert_eq!(decide(&ticking).state, InputState::Running, "a loop printing every second");
        let quiet = Facts { since_output: IDLE_QUIET, ..facts(Some(Verdict::Other)) };
        assert_eq!(decide(&quiet).state, InputState::Idle);
        assert_eq!(decide(&facts(Some(Verdict::Running))).state, InputState::Running);
        let secret = Facts { secret: true, ..facts(Some(Verdict::Input)) };
        assert_eq!(decide(&secret).state, InputState::AwaitingSecret);
        let printing =
            Facts { since_output: Duration::from_millis(2), ..facts(Some(Verdict::Input)) };
        assert_eq!(decide(&printing).state, InputState::Running, "a prompt still being drawn");
        let pending = Facts { pending: true, ..facts(Some(Verdict::Input)) };
        assert_eq!(decide(&pending).state, InputState::Running, "input not yet written");
    }

    #[test]
    fn input_counts_only_once_the_program_slept_again_after_it() {
        let just_written = Facts {
            baseline: Some(7),
            since_input: Some(Duration::from_millis(20)),
            ..facts(Some(Verdict::Input))
        };
        assert_eq!(decide(&just_written).state, InputState::Running, "not woken yet");
        let woke = Facts { baseline: Some(6), ..just_written };
        assert_eq!(decide(&woke).state, InputState::AwaitingInput);
        let old = Facts { since_input: Some(DELIVERY), ..just_written };
        assert_eq!(decide(&old).state, InputState::AwaitingInput, "a partial line never wakes it");
    }

    #[test]
    fn an_event_loop_waits_only_once_its_prompt_is_drawn_again() {
        let by_prompt = |state| InputReport { state, source: InputSource::KernelPrompt };
        // Just after the input: woke (the mark moved), echoed the line, and
        // sleeps again while its timer runs.
        let awaiting = Facts {
            baseline: Some(6),
            since_input: Some(Duration::from_millis(20)),
            prompt: Prompt::Absent,
            since_output: Duration::from_millis(100),
            ..facts(Some(Verdict::EventLoop))
        };
        assert_eq!(decide(&awaiting), by_prompt(InputState::Running), "a busy await");
        let long = Facts { since_output: IDLE_QUIET, ..awaiting };
        assert_eq!(decide(&long), by_prompt(InputState::Idle), "never waiting without a prompt");
        let answered = Facts { prompt: Prompt::Drawn, ..awaiting };
        assert_eq!(decide(&answered), by_prompt(InputState::AwaitingInput));
        // The old prompt still on the screen, nothing printed since the input.
        let stale = Facts { output_since_input: false, ..answered };
        assert_eq!(decide(&stale), by_prompt(InputState::Running));
        // Keys drive a full-screen program: the kernel alone decides.
        let full = Facts { prompt: Prompt::FullScreen, output_since_input: false, ..awaiting };
        assert_eq!(
            decide(&full),
            InputReport { state: InputState::AwaitingInput, source: InputSource::Kernel }
        );
        // A plain read of the input needs no prompt.
        let plain = Facts { probe: Some(Probe { verdict: Verdict::Input, mark: 7 }), ..stale };
        assert_eq!(decide(&plain).state, InputState::AwaitingInput);
    }

    /// The README's table of input states says how long a quiet program
    /// stays `running` before it is `idle`.
    #[test]
    fn the_readme_says_when_a_quiet_program_is_idle() {
        let readme = include_str!("../../../README.md");
        let said = format!("| `idle` | quiet for {} s and not reading input", IDLE_QUIET.as_secs());
        assert!(readme.contains(&said), "README.md does not say {said:?}");
        let sleeping = Facts { since_output: IDLE_QUIET, ..facts(Some(Verdict::Other)) };
        assert_eq!(decide(&sleeping).state, InputState::Idle);
        let between_steps = Facts { since_output: IDLE_QUIET / 2, ..facts(Some(Verdict::Other)) };
        assert_eq!(decide(&between_steps).state, InputState::Running);
    }

    #[test]
    fn without_the_kernel_the_heuristic_says_so() {
        let r = decide(&facts(None));
        assert_eq!(
            r,
            InputReport { state: InputState::AwaitingInput, source: InputSource::Heuristic }
        );
        let line_done = Facts {
            prompt: Prompt::Absent,
            since_output: IDLE_QUIET,
            ..facts(Some(Verdict::Unknown))
        };
        assert_eq!(decide(&line_done).state, InputState::Idle);
        let recent = Facts { since_output: Duration::from_millis(100), ..facts(None) };
        assert_eq!(decide(&recent).state, InputState::Running);
    }
}
