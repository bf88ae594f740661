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
//! [`input::QUIET`], then polled (more slowly the longer nothing happens), so
//! a busy program that prints nothing is never mistaken for a finished one:
//! the kernel says it is not reading.
//!
//! Cancel safety: dropping a wait only drops its follow stream; the process
//! is never touched.
//!
//! Matching is incremental: each new piece of text is searched together with
//! the end of what came before it (the needle's length for literals,
//! [`REGEX_LOOKBACK`] bytes for regular expressions), so a match split across
//! chunks is found without rescanning everything.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::ansi::TextRenderer;
use crate::proc::input::{self, InputReport, InputState};
use crate::proc::keys::{self, CursorMode};
use crate::proc::{ProcError, ProcHandle, ProcStatus, Stdio, StreamId};
use crate::reads::{self, FollowFrom, FollowItem};
use crate::store::Store;

/// How far back a regular expression may reach into text it already saw
/// when new text arrives.
pub(crate) const REGEX_LOOKBACK: usize = 4096;

/// Settle window when a wait names no condition at all: long enough for a
/// program between two bursts of output, short enough for an agent.
pub(crate) const DEFAULT_SETTLE: Duration = Duration::from_millis(750);

/// Timeout when none is given.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the screen is re-rendered for screen conditions.
const SCREEN_POLL: Duration = Duration::from_millis(25);

/// How often waiting for input is re-checked while nothing happens: often
/// at first (a prompt answers within milliseconds), then less, so a long
/// silent command costs next to nothing.
fn input_poll(since_activity: Duration) -> Duration {
    if since_activity < Duration::from_secs(1) {
        Duration::from_millis(10)
    } else if since_activity < Duration::from_secs(10) {
        Duration::from_millis(50)
    } else {
        Duration::from_millis(250)
    }
}

/// After a Portal bash's "command finished" mark, how long a run waits for
/// the shell to read again (its prompt drawn): PROMPT_COMMAND and PS1 take
/// milliseconds; a slow rc hook does not hold the result back longer.
const SHELL_PROMPT_GRACE: Duration = Duration::from_millis(500);

/// Longest bare continuation prompt (`...`, `>`) taken for the echo of a
/// blank line typed inside a block.
const MAX_BARE_PROMPT_CHARS: usize = 4;

/// Longest prompt recognised for runs.
const MAX_PROMPT_CHARS: usize = 64;

/// A needle.
#[derive(Clone, Debug)]
pub(crate) enum Matcher {
    /// Literal text.
    Literal(String),
    /// A regular expression.
    Regex(regex::Regex),
}

impl Matcher {
    fn lookback(&self) -> usize {
        match self {
            Self::Literal(s) => s.len(),
            Self::Regex(_) => REGEX_LOOKBACK,
        }
    }

    /// The first match at or after `from` (a byte index, moved back to a
    /// character boundary).
    fn find(&self, hay: &str, from: usize) -> Option<String> {
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

/// Mutable state of one wait.
struct Watch {
    renderers: [Option<TextRenderer>; 3],
    hay: String,
    /// Bytes of `hay` dropped from its front to stay within the bound.
    dropped: usize,
    bytes: u64,
    pos: [u64; 3],
    /// Spans of `hay` (absolute positions, the end open while the program
    /// is still there) drawn on the alternate screen.
    alt: Vec<(usize, Option<usize>)>,
    /// Whether the alternate screen is in use, once a switch was seen.
    alt_known: Option<bool>,
}

impl Watch {
    fn feed(&mut self, stream: StreamId, data: &Bytes) -> (usize, Vec<crate::ansi::CommandDone>) {
        let r = self.renderers[stream.index()].get_or_insert_with(TextRenderer::new);
        r.push(data);
        let text = r.flush_line();
        let marks = r.take_marks();
        let switches = r.take_alt_switches();
        let before = self.dropped + self.hay.len();
        self.hay.push_str(&text);
        self.bytes += data.len() as u64;
        if stream == StreamId::Stdout {
            // Positions are the renderer's, which are the hay's while only
            // stdout is watched: the alternate screen exists only on a PTY.
            for sw in switches {
                self.alt_switch(sw);
            }
        }
        (before, marks)
    }

    /// Opens or closes a span of alternate-screen text. Leaving it without
    /// having seen it entered means the wait began inside it: everything
    /// before was drawn there.
    fn alt_switch(&mut self, sw: crate::ansi::AltSwitch) {
        match (sw.enter, self.alt_known) {
            (true, Some(true)) | (false, Some(false)) => {}
            (true, _) => self.alt.push((sw.at, None)),
            (false, None) => self.alt.push((0, Some(sw.at))),
            (false, Some(true)) => {
                if let Some(last) = self.alt.last_mut() {
                    last.1 = Some(sw.at);
                }
            }
        }
        self.alt_known = Some(sw.enter);
    }

    /// `text` (the first `text.len()` bytes of the hay as it is now)
    /// without what was drawn on the alternate screen.
    fn without_alt(&self, text: &mut String) {
        for &(from, to) in self.alt.iter().rev() {
            let end = to.map_or(text.len(), |t| self.local(t).min(text.len()));
            let start = self.local(from).min(end);
            if start < end && text.is_char_boundary(start) && text.is_char_boundary(end) {
                text.replace_range(start..end, "");
            }
        }
    }

    /// Keeps the text within `bound` bytes (its tail), on a char boundary.
    fn bound(&mut self, bound: usize) {
        if self.hay.len() > bound.saturating_mul(2) {
            let mut cut = self.hay.len() - bound;
            while !self.hay.is_char_boundary(cut) {
                cut += 1;
            }
            self.hay.drain(..cut);
            self.dropped += cut;
        }
    }

    fn local(&self, absolute: usize) -> usize {
        absolute.saturating_sub(self.dropped)
    }
}

fn screen_hash(lines: &[String], cursor: (u16, u16), alt: bool) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    lines.hash(&mut h);
    cursor.hash(&mut h);
    alt.hash(&mut h);
    h.finish()
}

/// The context a wait needs from the daemon.
pub(crate) struct WaitContext<'a> {
    /// The log.
    pub(crate) store: &'a Store,
    /// Daemon shutdown.
    pub(crate) cancel: &'a CancellationToken,
    /// Where follow tasks run.
    pub(crate) tracker: &'a TaskTracker,
}

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

/// Moves the "read new" position past what a wait returned, so a later
/// read of new output never repeats it.
fn consumed(h: &ProcHandle, out: &WaitOutcome) {
    let mut cursors = h.shared.cursors();
    for s in &out.streams {
        let i = s.index();
        cursors[i] = cursors[i].max(out.next[i]);
    }
}

/// Whether a screen match found as the wait begins predates the call.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Entry {
    /// A plain wait: it was there before anything happened.
    Before,
    /// A run: the input was already written, so it may be its result.
    AfterInput,
}

async fn wait_with(
    h: &ProcHandle,
    cx: &WaitContext<'_>,
    mut spec: WaitSpec,
    completion: Completion,
    entry: Entry,
    attachment: Option<crate::proc::Attachment>,
) -> Result<WaitOutcome, ProcError> {
    if matches!(h.facts.spec.stdio, Stdio::Pty(_)) {
        spec.streams.retain(|s| *s != StreamId::Stderr);
    }
    let ends = attachment.as_ref().map_or_else(|| h.shared.ends(), |a| a.ends);
    let from = spec.from.unwrap_or([Some(ends[0]), Some(ends[1]), Some(ends[2])]);
    let mut pos = [0u64; 3];
    for s in StreamId::ALL {
        pos[s.index()] = from[s.index()].unwrap_or(ends[s.index()]).min(ends[s.index()]);
    }
    let mut rx = reads::follow(
        h.clone(),
        cx.store.clone(),
        spec.streams.clone(),
        FollowFrom::Cursor(pos.map(Some)),
        cx.cancel.clone(),
        cx.tracker,
    );
    let mut waiter = Waiter::new(h, spec, completion, pos);
    let mut screen_tick = tokio::time::interval(SCREEN_POLL);
    screen_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    waiter.match_screen_at_entry(entry).await?;
    while waiter.result.is_none() {
        let (next_timer, settle_at) = waiter.next_timer();
        tokio::select! {
            biased;
            item = rx.recv() => match item {
                Some(Ok(FollowItem::Output(rec))) => waiter.on_output(&rec),
                Some(Ok(FollowItem::Gap { .. })) => {}
                Some(Ok(FollowItem::Ended)) => waiter.result = Some((WaitReason::Exited, None)),
                Some(Err(e)) => return Err(e),
                None => {
                    if cx.cancel.is_cancelled() {
                        return Err(ProcError::ShuttingDown);
                    }
                    waiter.result = Some((WaitReason::Exited, None));
                }
            },
            () = tokio::time::sleep_until(next_timer) => waiter.on_timer(settle_at).await,
            _ = screen_tick.tick(), if waiter.screen_dirty || waiter.spec.screen_stable => {
                waiter.on_screen_tick().await?;
            }
        }
    }
    waiter.finish().await
}

/// One wait in progress: what it has seen, and which condition ended it.
/// `wait_with` feeds it output, timers and screen ticks; each step may set
/// `result`, which ends the wait; `finish` turns it into the outcome.
struct Waiter<'a> {
    h: &'a ProcHandle,
    spec: WaitSpec,
    completion: Completion,
    start: Instant,
    deadline: Instant,
    is_pty: bool,
    /// The screen must be looked at (on_screen or screen_stable, on a PTY).
    screen_needed: bool,
    /// Most bytes of text kept for the result.
    bound: usize,
    w: Watch,
    last_output: Instant,
    last_screen_change: Instant,
    screen_seen: Option<u64>,
    screen_dirty: bool,
    /// When to ask the kernel next whether the program waits for input.
    input_check: Option<Instant>,
    input_seen: Option<InputReport>,
    /// A Portal bash finished the command: by then its prompt is drawn.
    shell_done_at: Option<Instant>,
    matched_at_entry: bool,
    result: Option<(WaitReason, Option<Match>)>,
    command_exit: Option<i32>,
    /// Where the output ends and the shell's prompt begins (its mark).
    cut_at: Option<usize>,
    marks_skipped: usize,
    /// Where the wait began.
    began: [u64; 3],
}

impl<'a> Waiter<'a> {
    fn new(h: &'a ProcHandle, spec: WaitSpec, completion: Completion, pos: [u64; 3]) -> Self {
        let start = Instant::now();
        let is_pty = h.screen.is_some();
        let screen_needed = is_pty && (spec.on_screen || spec.screen_stable);
        Self {
            h,
            deadline: start + spec.timeout,
            is_pty,
            screen_needed,
            bound: usize::try_from(spec.max_bytes).unwrap_or(usize::MAX),
            w: Watch {
                renderers: [None, None, None],
                hay: String::new(),
                dropped: 0,
                bytes: 0,
                pos,
                alt: Vec::new(),
                alt_known: None,
            },
            began: pos,
            last_output: start,
            last_screen_change: start,
            screen_seen: None,
            screen_dirty: screen_needed,
            input_check: spec.input.then(|| start + input::QUIET),
            input_seen: None,
            shell_done_at: None,
            matched_at_entry: false,
            result: None,
            command_exit: None,
            cut_at: None,
            marks_skipped: 0,
            start,
            spec,
            completion,
        }
    }

    /// A screen pattern that is already showing matches at once.
    async fn match_screen_at_entry(&mut self, entry: Entry) -> Result<(), ProcError> {
        if !(self.spec.on_screen && self.is_pty) {
            return Ok(());
        }
        let Some(needle) = &self.spec.needle else { return Ok(()) };
        let snap = self.h.snapshot().await?;
        if let Some(m) = needle.find(&snap.lines.join("\n"), 0) {
            self.matched_at_entry = entry == Entry::Before;
            let at = self.w.pos[StreamId::Stdout.index()];
            self.result = Some((WaitReason::Matched, Some((m, StreamId::Stdout, at))));
        }
        Ok(())
    }

    /// The next instant a timer condition can fire, and the settle instant.
    fn next_timer(&self) -> (Instant, Option<Instant>) {
        let settle_at =
            self.spec.settle.filter(|_| !self.spec.screen_stable).map(|s| self.last_output + s);
        let next = [Some(self.deadline), settle_at, self.input_check, self.shell_done_at]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(self.deadline);
        (next, settle_at)
    }

    /// New output: stop patterns, the pattern, the shell's marks.
    fn on_output(&mut self, rec: &reads::OutRecord) {
        let i = rec.stream.index();
        self.w.pos[i] = rec.offset + rec.length;
        self.last_output = Instant::now();
        if self.spec.input || self.shell_done_at.is_some() {
            self.input_check = Some(self.last_output + input::QUIET);
        }
        self.screen_dirty = self.screen_needed;
        let (before, marks) = self.w.feed(rec.stream, &rec.data);
        let after_chunk = self.w.pos[i];
        for stop in &self.spec.stop {
            let from = self.w.local(before.saturating_sub(stop.lookback()));
            if let Some(m) = stop.find(&self.w.hay, from) {
                self.result = Some((WaitReason::Stopped, Some((m, rec.stream, after_chunk))));
                break;
            }
        }
        if self.result.is_none()
            && !self.spec.on_screen
            && let Some(needle) = &self.spec.needle
        {
            let from = self.w.local(before.saturating_sub(needle.lookback()));
            if let Some(m) = needle.find(&self.w.hay, from) {
                self.result = Some((WaitReason::Matched, Some((m, rec.stream, after_chunk))));
            }
        }
        if self.result.is_none()
            && let Completion::ShellMark { skip } = &self.completion
        {
            for mark in marks {
                if self.marks_skipped < *skip {
                    self.marks_skipped += 1;
                    continue;
                }
                self.command_exit = mark.exit_code;
                self.cut_at = Some(mark.at);
                // The command finished; the shell now draws its prompt.
                // Wait (briefly) until it reads again, so the result
                // carries the prompt and a true input state.
                let now = Instant::now();
                self.shell_done_at = Some(now + SHELL_PROMPT_GRACE);
                self.input_check = Some(now + input::QUIET);
                break;
            }
        }
        self.w.bound(self.bound);
    }

    /// A timer fired: the deadline, the shell's prompt grace, the settle
    /// time, or a check of whether the program waits for input.
    async fn on_timer(&mut self, settle_at: Option<Instant>) {
        let now = Instant::now();
        if now >= self.deadline {
            self.result = Some((WaitReason::Timeout, None));
        } else if self.shell_done_at.is_some_and(|t| now >= t) {
            self.result = Some((WaitReason::Prompt, None));
        } else if settle_at.is_some_and(|t| now >= t) {
            self.result = Some((WaitReason::Settled, None));
        } else if self.input_check.is_some_and(|t| now >= t) {
            match self.h.input_state().await {
                // Only once every byte printed before the answer is in
                // hand: the prompt belongs in this result.
                Some(r)
                    if r.state.wants_input()
                        && caught_up(self.h, &self.spec.streams, &self.w.pos) =>
                {
                    self.input_seen = Some(r);
                    let reason = if self.shell_done_at.is_some() {
                        WaitReason::Prompt
                    } else if r.state == InputState::AwaitingSecret {
                        WaitReason::AwaitingSecret
                    } else {
                        WaitReason::InputRequested
                    };
                    self.result = Some((reason, None));
                }
                Some(_) => {
                    let quiet = now.duration_since(self.last_output.max(self.start));
                    self.input_check = Some(now + input_poll(quiet));
                }
                None => self.input_check = None,
            }
        }
    }

    /// A look at the screen: a screen pattern, or a screen that stopped
    /// changing.
    async fn on_screen_tick(&mut self) -> Result<(), ProcError> {
        self.screen_dirty = false;
        let snap = self.h.snapshot().await?;
        if self.spec.on_screen
            && let Some(needle) = &self.spec.needle
            && let Some(m) = needle.find(&snap.lines.join("\n"), 0)
        {
            let at = self.w.pos[StreamId::Stdout.index()];
            self.result = Some((WaitReason::Matched, Some((m, StreamId::Stdout, at))));
        }
        if self.spec.screen_stable && self.result.is_none() {
            let hash = screen_hash(&snap.lines, snap.cursor, snap.alternate);
            if self.screen_seen != Some(hash) {
                self.screen_seen = Some(hash);
                self.last_screen_change = Instant::now();
            }
            if let Some(settle) = self.spec.settle
                && self.last_screen_change.elapsed() >= settle
            {
                self.result = Some((WaitReason::ScreenStable, None));
            }
        }
        Ok(())
    }

    /// The outcome: the output (without what was drawn on the alternate
    /// screen, cut to its bound, without the prompt), the prompt, the screen
    /// of a full-screen program, the input state.
    async fn finish(mut self) -> Result<WaitOutcome, ProcError> {
        let h = self.h;
        let spec = self.spec;
        let w = &mut self.w;
        let (reason, matched) = self.result.unwrap_or((WaitReason::Timeout, None));
        let bound = self.bound;
        let cut_at = self.cut_at;
        let is_pty = self.is_pty;
        let mut output = std::mem::take(&mut w.hay);
        let mut after_mark = String::new();
        if let Some(at) = cut_at {
            let mut at = w.local(at).min(output.len());
            while !output.is_char_boundary(at) {
                at -= 1;
            }
            after_mark = output.split_off(at);
        }
        if !spec.raw_output {
            w.without_alt(&mut output);
        }
        let mut truncated = w.dropped > 0;
        if output.len() > bound {
            let mut cut = output.len() - bound;
            while !output.is_char_boundary(cut) {
                cut += 1;
            }
            output.drain(..cut);
            truncated = true;
        }
        let snap = if is_pty { Some(h.snapshot().await?) } else { None };
        let full_screen = snap.as_ref().is_some_and(|s| s.full_screen);
        // A full-screen program has no prompt line: its cursor's row is a row
        // of its screen (a process row of top).
        let prompt = if full_screen {
            String::new()
        } else if reason == WaitReason::Prompt {
            // The shell's prompt, drawn after its "command finished" mark.
            take_prompt(&mut after_mark)
        } else if matches!(reason, WaitReason::InputRequested | WaitReason::AwaitingSecret) {
            match take_prompt(&mut output) {
                p if p.is_empty() => current_prompt(h).await?.unwrap_or_default(),
                p => p,
            }
        } else {
            String::new()
        };
        let mut output_is_screen = false;
        let (alternate, screen) = match snap {
            Some(snap) => {
                if snap.full_screen && !spec.raw_output {
                    // A full-screen program redraws: its byte stream is many
                    // copies of the same screen. What it shows is the answer.
                    output = screen_text(&snap.lines);
                    output_is_screen = true;
                }
                (snap.alternate, if spec.snapshot { snap.lines } else { Vec::new() })
            }
            None => (false, Vec::new()),
        };
        let input = match self.input_seen {
            Some(r) => Some(r),
            None => h.input_state().await,
        };
        let awaiting_secret = h.secret_prompt().await;
        Ok(WaitOutcome {
            prompt,
            input,
            output_is_screen,
            full_screen,
            awaiting_secret,
            reason,
            matched,
            output,
            bytes: w.bytes,
            truncated,
            began: self.began,
            next: w.pos,
            streams: spec.streams,
            timeout: spec.timeout,
            clamped: spec.clamped,
            elapsed: self.start.elapsed(),
            status: h.status(),
            alternate,
            command_exit: self.command_exit,
            screen,
            matched_at_entry: self.matched_at_entry,
        })
    }
}

/// True when the wait has seen every byte the watched streams have produced.
fn caught_up(h: &ProcHandle, streams: &[StreamId], pos: &[u64; 3]) -> bool {
    let ends = h.shared.ends();
    streams.iter().all(|s| pos[s.index()] >= ends[s.index()])
}

/// Splits the prompt (the unterminated last line) off the output.
fn take_prompt(output: &mut String) -> String {
    let start = output.rfind('\n').map_or(0, |nl| nl + 1);
    if output[start..].trim().is_empty() {
        return String::new();
    }
    let prompt = output[start..].to_owned();
    output.truncate(start);
    prompt
}

/// A screen as text: its rows, without the blank ones at the bottom.
fn screen_text(lines: &[String]) -> String {
    let used = lines.iter().rposition(|l| !l.trim().is_empty()).map_or(0, |i| i + 1);
    lines[..used].join("\n")
}

/// The prompt on the cursor's line, if the program shows one (text before
/// the cursor, short, not blank).
async fn current_prompt(h: &ProcHandle) -> Result<Option<String>, ProcError> {
    if h.screen.is_none() {
        return Ok(None);
    }
    let snap = h.snapshot().await?;
    // Snapshot lines are trimmed; the prompt's trailing space is before the
    // cursor, so pad back to the cursor's column.
    let line = snap.lines.get(usize::from(snap.cursor.0)).cloned().unwrap_or_default();
    let col = usize::from(snap.cursor.1);
    let before: String = line.chars().chain(std::iter::repeat(' ')).take(col).collect();
    let prompt = if before.trim().is_empty() || before.chars().count() > MAX_PROMPT_CHARS {
        None
    } else {
        Some(before)
    };
    Ok(prompt)
}

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
    let (data, typed) = if text.contains('\n') && h.screen.is_some() {
        let snap = h.snapshot().await?;
        if snap.bracketed_paste {
            (format!("\x1b[200~{text}\x1b[201~").into_bytes(), Typed::BracketedPaste)
        } else {
            (text.replace("\r\n", "\r").replace('\n', "\r").into_bytes(), Typed::Keys)
        }
    } else {
        (text.as_bytes().to_vec(), Typed::Keys)
    };
    h.write(Bytes::from(data)).await?;
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

/// One item of a key send.
#[derive(Clone, Debug)]
pub(crate) enum KeyItem {
    /// Literal text.
    Text(String),
    /// A key name; anything that is not one is typed as it is.
    Key(String),
}

/// Gap between the items of one key send. Applications that read their
/// input in bursts must see `Up Up Enter` as three keys: Claude Code's
/// selection dialogs took one read of them for something else and picked
/// the wrong option.
pub(crate) const KEY_GAP: Duration = Duration::from_millis(25);

/// The bytes of literal text: multi-line text as a bracketed paste when the
/// program enabled it, else with newlines as Enter on a PTY.
fn text_bytes(text: &str, snap: Option<&crate::screen::Snapshot>) -> Bytes {
    Bytes::from(match snap {
        Some(s) if text.contains('\n') && s.bracketed_paste => format!("\x1b[200~{text}\x1b[201~"),
        Some(_) if text.contains('\n') => text.replace("\r\n", "\r").replace('\n', "\r"),
        _ => text.to_owned(),
    })
}

/// Sends text and keys in order, each as its own write, [`KEY_GAP`] apart,
/// as one request to the process (nothing else is typed in between). As
/// `tmux send-keys` does, a name in the key grammar is that key (cursor keys
/// follow the screen's application-cursor mode) and anything else is typed
/// as it is (`["Escape", ":q!", "Enter"]`); `Text` items are always literal.
///
/// # Errors
/// [`ProcError::BadKey`] for a name outside the grammar that reads as a key
/// ([`keys::looks_like_a_key`]: `F13`, `C-ab`), before anything is typed.
pub(crate) async fn send_keys(h: &ProcHandle, items: &[KeyItem]) -> Result<u64, ProcError> {
    let snap = match &h.screen {
        Some(_) => Some(h.snapshot().await?),
        None => None,
    };
    let mode = if snap.as_ref().is_some_and(|s| s.application_cursor) {
        CursorMode::Application
    } else {
        CursorMode::Normal
    };
    // Every item is checked before anything is typed: a refused name
    // leaves the program untouched.
    let mut parts: Vec<Bytes> = Vec::with_capacity(items.len());
    for item in items {
        let bytes = match item {
            KeyItem::Text(t) => text_bytes(t, snap.as_ref()),
            KeyItem::Key(k) => match keys::parse(k, mode) {
                Ok(bytes) => Bytes::from(bytes),
                Err(e) if keys::looks_like_a_key(k) => return Err(ProcError::BadKey(e)),
                Err(_) => text_bytes(k, snap.as_ref()),
            },
        };
        if !bytes.is_empty() {
            parts.push(bytes);
        }
    }
    let written = parts.iter().map(|b| b.len() as u64).sum();
    h.write_parts(parts, KEY_GAP).await?;
    Ok(written)
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
