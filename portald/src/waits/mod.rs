//! Server-side waits, expect-style runs and key sends: agents stop polling.
//!
//! A wait follows a process from a cursor (default: the daemon's "read new"
//! position, which it then moves) through a follow stream (history first,
//! then live, each byte once) and renders the output as text while it
//! watches for the first of: a needle (literal or regex; in the output, or
//! on the rendered screen), a stop pattern, output settling (no bytes for
//! `settle`), the screen staying unchanged for `settle`, the shell's "command
//! finished" mark (runs in a Portal bash), the program waiting for input
//! (asked of the actor, which asks the kernel: see [`crate::proc::input`]),
//! the process ending, or the timeout. Every outcome is data. `max_bytes`
//! is only the size of the returned text (its newest part, `truncated` and
//! where the wait began when cut): it never ends a wait, so a run always
//! comes back at its prompt.
//!
//! What a full-screen program draws on the alternate screen is its redraws,
//! not lines: the returned text leaves it out (the rendered screen stands
//! for it while the program is still on that screen), so a wait across an
//! editor's exit returns what was printed around it, never the redraw
//! stream as text.
//!
//! Waiting for input is checked once output has been quiet for
//! [`crate::proc::input::QUIET`], then polled (more slowly the longer
//! nothing happens), so a busy program that prints nothing is never
//! mistaken for a finished one: the kernel says it is not reading.
//!
//! Cancel safety: dropping a wait only drops its follow stream; the process
//! is never touched.
//!
//! Matching is incremental: each new piece of text is searched together with
//! the end of what came before it (the needle's length for literals,
//! [`spec::REGEX_LOOKBACK`] bytes for regular expressions), so a match
//! split across chunks is found without rescanning everything.
//!
//! Here: the plain wait. `spec.rs`: what a wait is asked and what it
//! answers; `text.rs`: the text a wait has seen; `waiter.rs`: one wait in
//! progress, from its follow stream to its outcome; `run.rs`: writing input
//! and waiting for its result; `keys.rs`: key sends.

mod keys;
mod run;
mod spec;
mod text;
mod waiter;

pub(crate) use keys::{KeyItem, send_keys};
pub(crate) use run::run;
pub(crate) use spec::{
    DEFAULT_SETTLE, DEFAULT_TIMEOUT, Matcher, WaitOutcome, WaitReason, WaitSpec,
};
pub(crate) use waiter::WaitContext;

use crate::proc::{ProcError, ProcHandle, StreamId};
use spec::Completion;
use waiter::{Entry, consumed, wait_with};

/// Waits. Without a cursor, from the "read new" position, which then moves
/// to where the wait ended.
pub(crate) async fn wait(
    h: &ProcHandle,
    cx: &WaitContext<'_>,
    mut spec: WaitSpec,
) -> Result<WaitOutcome, ProcError> {
    if spec.from.is_none() {
        spec.consume = true;
        let starts = h.shared.starts();
        let cursors = *h.shared.cursors();
        spec.from = Some(StreamId::ALL.map(|s| Some(cursors[s.index()].max(starts[s.index()]))));
    }
    let consume = spec.consume;
    let out = wait_with(h, cx, spec, Completion::Conditions, Entry::Before, None).await?;
    if consume {
        consumed(h, &out);
    }
    Ok(out)
}
