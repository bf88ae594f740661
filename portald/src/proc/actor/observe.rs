//! What the actor learns about its program besides its output: the
//! in-band signals in that output (OSC records, bells, shell prompt marks),
//! the agent in the PTY's foreground job, a dialog on an agent's screen, a
//! secret prompt, and whether the program waits for input.
//!
//! The [`Observer`] is the actor's and runs on its task: the sweeps (every
//! [`crate::config::AGENT_SWEEP`]) and the asks of waits and inspects come
//! through it, and what it finds goes to the agent book and the process's
//! [`Shared`] counters. Probes that read `/proc` and screen snapshots that
//! would wait for the screen thread run on blocking threads.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use crate::agents::{AgentEvent, Agents, signals as agent_signals};
use crate::osc::{OscScanner, TermSignal};
use crate::proc::input::{self, Facts, InputReport, InputSource, InputState, Prompt};
use crate::proc::probe::{self, InputTarget, Scope, Verdict};
use crate::proc::spawn::InputWriter;
use crate::proc::{ProcId, Shared};
use crate::screen::Screen;
use crate::sys;

/// How old the shared scan of `/proc` may be for a sweep's probe (the list
/// shows the state; waits always probe afresh).
const SWEEP_SCAN_AGE: Duration = Duration::from_millis(250);

/// How old the shared scan of `/proc` may be when a wait or inspect asks: a
/// scan of every process costs milliseconds on a busy machine, and a wait
/// polls every 10 ms. A group the scan never saw is scanned for at once.
const WAIT_SCAN_AGE: Duration = Duration::from_millis(100);

/// A sweep re-probes a waiting or idle program that saw no input or output
/// only this often: nothing it does silently matters sooner.
const QUIET_REPROBE: Duration = Duration::from_secs(5);

/// A quiet running program is re-probed after this long, then after twice
/// as long each time nothing changed, up to [`QUIET_REPROBE`]: a program
/// that starts waiting for input without printing is seen within a second
/// at first, and a thousand quiet ones cost a few probes a second, not
/// thousands. Waits and inspects always probe afresh.
const QUIET_RUNNING_REPROBE_FIRST: Duration = Duration::from_millis(500);

/// The PTY's foreground process group, as agent discovery follows it.
#[derive(Default)]
struct Foreground {
    /// The group at the last sweep.
    pgrp: Option<u32>,
    /// Whether that group needs no more looking at: it is the program's own,
    /// or it was recognised as an agent.
    identified: bool,
    /// Monotonic time (ns) of the last sweep.
    last_sweep_ns: i64,
    /// Monotonic time (ns) of the last sweep before the group changed: the
    /// group has held the terminal since then at the earliest.
    since_ns: i64,
}

/// What the actor tracks to decide whether its program waits for input.
struct InputWatch {
    /// The program's input as the kernel names it (`None`: the kernel is
    /// not asked; the heuristic decides).
    target: Option<InputTarget>,
    /// The probe mark taken just before the last write.
    baseline: Option<u64>,
    /// When input was last written.
    last_input: Option<Instant>,
    /// When output last arrived.
    last_output: Instant,
    /// The last output does not end a line.
    unterminated: bool,
    /// When the last sweep decided, and what.
    last_probe: Option<(Instant, InputState)>,
    /// Sweeps in a row that found the program quiet and its state unchanged.
    quiet_probes: u32,
}

/// The actor's watch over what its program does.
pub(super) struct Observer {
    id: ProcId,
    pid: u32,
    /// The PTY's primary side (`None` on pipes). The actor owns it and
    /// outlives this.
    primary: Option<RawFd>,
    screen: Option<Arc<Screen>>,
    agents: Arc<Agents>,
    shared: Arc<Shared>,
    foreground: Foreground,
    input: InputWatch,
    /// Scans PTY output for OSC records and bells.
    osc: OscScanner,
    /// Shell-integration marks (OSC 133 `D`) seen so far.
    prompt_marks: u64,
    /// Sequence number of the last OSC 3008 record (replays are dropped).
    last_osc_seq: Option<u64>,
}

/// Who an [`Observer`] watches, and where it reports.
pub(super) struct Watched {
    pub(super) id: ProcId,
    pub(super) pid: u32,
    /// The PTY's primary side, owned by the actor.
    pub(super) primary: Option<RawFd>,
    pub(super) screen: Option<Arc<Screen>>,
    pub(super) agents: Arc<Agents>,
    pub(super) shared: Arc<Shared>,
    /// What the kernel is asked about (`None`: the heuristic decides).
    pub(super) input_target: Option<InputTarget>,
    /// Prompt marks and the last OSC 3008 sequence number an earlier daemon
    /// had seen.
    pub(super) carried_marks: (u64, Option<u64>),
}

impl Observer {
    pub(super) fn new(w: Watched) -> Self {
        Self {
            id: w.id,
            pid: w.pid,
            primary: w.primary,
            screen: w.screen,
            agents: w.agents,
            shared: w.shared,
            foreground: Foreground::default(),
            input: InputWatch {
                target: w.input_target,
                baseline: None,
                last_input: None,
                last_output: Instant::now(),
                unterminated: false,
                last_probe: None,
                quiet_probes: 0,
            },
            osc: OscScanner::default(),
            prompt_marks: w.carried_marks.0,
            last_osc_seq: w.carried_marks.1,
        }
    }

    /// Shell-integration marks seen so far (an attachment's starting count).
    pub(super) fn prompt_marks(&self) -> u64 {
        self.prompt_marks
    }

    /// Prompt marks and the last OSC 3008 sequence number, for the next
    /// daemon.
    pub(super) fn marks(&self) -> (u64, Option<u64>) {
        (self.prompt_marks, self.last_osc_seq)
    }

    /// Output arrived (any stream): the input state's clock and whether it
    /// ends a line.
    pub(super) fn saw_output(&mut self, data: &[u8]) {
        self.input.last_output = Instant::now();
        if let Some(&last) = data.last() {
            self.input.unterminated = last != b'\n';
        }
    }

    /// The in-band signals of a chunk the PTY's screen was fed.
    pub(super) fn scan(&mut self, data: &[u8]) {
        let mut signals = Vec::new();
        self.osc.scan(data, &mut signals);
        for signal in signals {
            self.on_term_signal(signal);
        }
    }

    fn on_term_signal(&mut self, signal: TermSignal) {
        let event = match signal {
            TermSignal::Bell => AgentEvent::Bell,
            TermSignal::Osc(body) => {
                if body.starts_with(b"133;D") {
                    self.prompt_marks += 1;
                    return;
                }
                let Some(report) = agent_signals::from_osc(&body) else { return };
                if let Some(seq) = report.seq {
                    if self.last_osc_seq.is_some_and(|last| seq <= last) {
                        return;
                    }
                    self.last_osc_seq = Some(seq);
                }
                report.event
            }
        };
        self.agents.apply(self.id, event);
    }

    /// One sweep of a running program: its foreground job and an agent's
    /// dialog (on a PTY), and its input state.
    pub(super) async fn sweep(&mut self, input: &InputWriter) {
        if self.primary.is_some() {
            self.sweep_foreground();
            self.sweep_dialog();
        }
        self.sweep_input(input).await;
    }

    /// Looks at the PTY's foreground process group: a recognised agent
    /// coming to the foreground is discovered; the program taking the
    /// terminal back ends it.
    fn sweep_foreground(&mut self) {
        let Some(fd) = self.primary else { return };
        self.check_secret_prompt();
        let own = self.pid;
        let pgrp = sys::foreground_pgrp(fd);
        let now = sys::monotonic_ns();
        let last_sweep = std::mem::replace(&mut self.foreground.last_sweep_ns, now);
        if pgrp != self.foreground.pgrp {
            // It changed at some point since the last sweep.
            self.foreground.since_ns = last_sweep;
            let previous = std::mem::replace(&mut self.foreground.pgrp, pgrp);
            self.foreground.identified = pgrp.is_none_or(|p| p == own);
            if pgrp == Some(own) && previous.is_some_and(|p| p != own) {
                self.agents.apply(self.id, AgentEvent::ForegroundLeft);
            }
        }
        if self.foreground.identified {
            return;
        }
        // A shell hands the terminal to a job between its fork and its exec,
        // so the job may still look like the shell: look again on every
        // sweep until it is recognised (or the foreground changes).
        let Some(job) = pgrp else { return };
        let Some((name, kind)) = sys::command_line(job)
            .and_then(|(argv, exe)| agent_signals::identify(&argv, exe.as_deref()))
        else {
            return;
        };
        self.foreground.identified = true;
        let since = Some(self.foreground.since_ns);
        self.agents.apply(self.id, AgentEvent::Discovered { name, kind, pid: job, job: since });
    }

    /// Looks at an agent's screen for a dialog (a permission request or
    /// another menu), which sends must never type into. Skipped when the
    /// screen is busy parsing: the next sweep looks again.
    fn sweep_dialog(&self) {
        let Some(screen) = &self.screen else { return };
        if !self.agents.is_agent(self.id) {
            return;
        }
        let Some(snap) = screen.view().try_snapshot() else { return };
        self.agents.apply(self.id, AgentEvent::Dialog(crate::agents::dialog::find(&snap.lines)));
    }

    /// Whether the terminal is at a secret prompt now (also published for
    /// inspect and agents).
    pub(super) fn check_secret_prompt(&self) -> bool {
        let secret = self.primary.and_then(sys::secret_prompt).unwrap_or(false);
        if self.shared.awaiting_secret.swap(secret, Ordering::AcqRel) != secret {
            self.shared.changes.changed();
        }
        secret
    }

    /// Where the program's input waits are looked for: the PTY's foreground
    /// process group, or the pipe child's session.
    fn input_scope(&self) -> Option<Scope> {
        match self.primary {
            Some(fd) => sys::foreground_pgrp(fd).map(Scope::Group),
            None => Some(Scope::Session(self.pid)),
        }
    }

    /// Whether the program waits for input now, asked afresh (a wait or an
    /// inspect), and published. `exited`: its exit has come.
    pub(super) async fn input_state(&mut self, exited: bool, input: &InputWriter) -> InputReport {
        self.input_report(exited, input, WAIT_SCAN_AGE).await
    }

    /// Decides whether the program waits for input now and publishes it.
    async fn input_report(
        &mut self,
        exited: bool,
        input: &InputWriter,
        scan_age: Duration,
    ) -> InputReport {
        if exited {
            let r = InputReport { state: InputState::Exited, source: InputSource::Kernel };
            self.shared.set_input(r);
            return r;
        }
        // Off the runtime's workers: a probe reads many `/proc` files, and
        // every 100 ms one of them rescans all of `/proc`.
        let probe = match (self.input.target, self.input_scope()) {
            (Some(target), Some(scope)) => {
                tokio::task::spawn_blocking(move || probe::probe(scope, target, scan_age))
                    .await
                    .ok()
            }
            _ => None,
        };
        let output_unread = self.primary.is_some_and(sys::readable_now);
        // The screen is looked at only when the kernel's answer leaves the
        // decision to the prompt.
        let prompt = match probe.map(|p| p.verdict) {
            Some(Verdict::Running | Verdict::Input | Verdict::Other) => Prompt::Absent,
            Some(Verdict::EventLoop | Verdict::Unknown) | None => self.prompt_view().await,
        };
        let w = &self.input;
        let facts = Facts {
            probe,
            baseline: w.baseline,
            since_input: w.last_input.map(|t| t.elapsed()),
            pending: input.pending() > 0 || output_unread,
            since_output: w.last_output.elapsed(),
            secret: self.check_secret_prompt(),
            prompt,
            output_since_input: w.last_input.is_none_or(|t| w.last_output > t),
        };
        let r = input::decide(&facts);
        self.shared.set_input(r);
        r
    }

    /// What the program shows where a prompt would be: on a PTY, from the
    /// screen (text before the cursor on its row; a full-screen program has
    /// no prompt line); on pipes, whether the last output ends a line.
    async fn prompt_view(&self) -> Prompt {
        let Some(screen) = &self.screen else {
            return if self.input.unterminated { Prompt::Drawn } else { Prompt::Absent };
        };
        let view = screen.view();
        let snap = match view.try_snapshot() {
            Some(snap) => snap,
            None => match tokio::task::spawn_blocking(move || view.snapshot()).await {
                Ok(snap) => snap,
                Err(_) => return Prompt::Absent,
            },
        };
        if snap.full_screen {
            return Prompt::FullScreen;
        }
        let row = snap.lines.get(usize::from(snap.cursor.0)).map_or("", String::as_str);
        let before: String = row.chars().take(usize::from(snap.cursor.1)).collect();
        if before.trim().is_empty() { Prompt::Absent } else { Prompt::Drawn }
    }

    /// The sweep's input state: re-decided when something happened since
    /// the last one, or while the program runs.
    async fn sweep_input(&mut self, input: &InputWriter) {
        let w = &self.input;
        let mut quiet = false;
        if let Some((at, state)) = w.last_probe {
            quiet = w.last_output <= at && w.last_input.is_none_or(|t| t <= at);
            // A quiet program that waits or idles does nothing that matters
            // sooner; one that runs quietly may start waiting without a
            // word, so it is looked at again soon, then less and less often
            // (a thousand quiet programs must not cost a core).
            let again = if state == InputState::Running {
                QUIET_RUNNING_REPROBE_FIRST
                    .saturating_mul(1 << w.quiet_probes.min(8))
                    .min(QUIET_REPROBE)
            } else {
                QUIET_REPROBE
            };
            if quiet && at.elapsed() < again {
                return;
            }
        }
        let before = w.last_probe.map(|(_, state)| state);
        // Sweeps run only while the program runs.
        let r = self.input_report(false, input, SWEEP_SCAN_AGE).await;
        let w = &mut self.input;
        w.quiet_probes = if quiet && before == Some(r.state) { w.quiet_probes + 1 } else { 0 };
        w.last_probe = Some((Instant::now(), r.state));
    }

    /// Takes the mark that later probes compare with, just before a write.
    pub(super) fn mark_before_input(&mut self) {
        let mark = match (self.input.target, self.input_scope()) {
            (Some(_), Some(scope)) => Some(probe::mark(scope)),
            _ => None,
        };
        self.input.baseline = mark;
        self.input.last_input = Some(Instant::now());
    }
}
