//! Whether a program waits for input: the state every process reports, and
//! the one decision that derives it from the kernel's answer
//! ([`super::probe`]) and what the actor knows about recent input and output.
//!
//! The kernel decides first. The text heuristic (output quiet, the last line
//! unterminated) serves only where the kernel cannot be asked, and says so
//! ([`InputSource::Heuristic`]).

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
    /// Ended.
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
    /// The last output does not end a line (the cursor is after text).
    pub(crate) unterminated: bool,
}

/// The decision.
pub(crate) fn decide(f: &Facts) -> InputReport {
    let kernel = |state| InputReport { state, source: InputSource::Kernel };
    let waiting = if f.secret { InputState::AwaitingSecret } else { InputState::AwaitingInput };
    match f.probe.map(|p| (p.verdict, p.mark)) {
        Some((Verdict::Running, _)) => kernel(InputState::Running),
        Some((Verdict::Input, mark)) => {
            // It must have gone back to sleep after the last input reached
            // it: a changed mark says it ran since; old enough input has
            // surely arrived. Otherwise the input is still on its way.
            let consumed =
                f.since_input.is_none_or(|t| t >= DELIVERY) || f.baseline.is_none_or(|b| b != mark);
            if f.pending || f.since_output < QUIET || !consumed {
                kernel(InputState::Running)
            } else {
                kernel(waiting)
            }
        }
        Some((Verdict::Other, _)) => {
            kernel(if f.since_output < IDLE_QUIET { InputState::Running } else { InputState::Idle })
        }
        Some((Verdict::Unknown, _)) | None => {
            let state = if f.pending || f.since_output < HEURISTIC_QUIET {
                InputState::Running
            } else if f.unterminated || f.secret {
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
            unterminated: true,
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
    fn without_the_kernel_the_heuristic_says_so() {
        let r = decide(&facts(None));
        assert_eq!(
            r,
            InputReport { state: InputState::AwaitingInput, source: InputSource::Heuristic }
        );
        let line_done = Facts {
            unterminated: false,
            since_output: IDLE_QUIET,
            ..facts(Some(Verdict::Unknown))
        };
        assert_eq!(decide(&line_done).state, InputState::Idle);
        let recent = Facts { since_output: Duration::from_millis(100), ..facts(None) };
        assert_eq!(decide(&recent).state, InputState::Running);
    }
}
