//! One wait in progress: a follow stream from the wait's cursor (history
//! first, then live), the conditions checked as output, timers and screen
//! ticks come, and the outcome built once one of them ends it.

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::spec::{Completion, Match, WaitOutcome, WaitReason, WaitSpec};
use super::text::Watch;
use crate::proc::input::{self, InputReport, InputState};
use crate::proc::{ProcError, ProcHandle, Stdio, StreamId};
use crate::reads::{self, FollowFrom, FollowItem};
use crate::store::Store;

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

/// Longest prompt recognised for runs.
pub(super) const MAX_PROMPT_CHARS: usize = 64;

/// The context a wait needs from the daemon.
pub(crate) struct WaitContext<'a> {
    /// The log.
    pub(crate) store: &'a Store,
    /// Daemon shutdown.
    pub(crate) cancel: &'a CancellationToken,
    /// Where follow tasks run.
    pub(crate) tracker: &'a TaskTracker,
}

/// Moves the "read new" position past what a wait returned, so a later
/// read of new output never repeats it.
pub(super) fn consumed(h: &ProcHandle, out: &WaitOutcome) {
    let mut cursors = h.shared.cursors();
    for s in &out.streams {
        let i = s.index();
        cursors[i] = cursors[i].max(out.next[i]);
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

/// Whether a screen match found as the wait begins predates the call.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Entry {
    /// A plain wait: it was there before anything happened.
    Before,
    /// A run: the input was already written, so it may be its result.
    AfterInput,
}

pub(super) async fn wait_with(
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
