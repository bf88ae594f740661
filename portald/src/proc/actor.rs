//! The actor that owns one managed process.
//!
//! A [`ProcActor`] is the only code that touches its child, its PTY or pipes,
//! its I/O threads' channels, its screen (feeding and resizing), its output
//! offsets and its status. Other code talks to it through a [`ProcHandle`],
//! and reads counters through [`Shared`] without a round trip.
//!
//! For every chunk of output, in this order: the screen is fed (never
//! blocking), the chunk is handed to the store (waiting while the store's
//! byte budget is full: backpressure to the program), the end offset is
//! published, and subscribers are told. Because an `Attach` is answered
//! between two chunks, a subscriber's starting offsets and its first live
//! event always meet exactly.
//!
//! Exit is final only after the output is drained: when `waitpid` reports the
//! program's end, the actor keeps reading until every stream reaches EOF. If
//! background jobs keep the terminal or pipes open past [`EXIT_DRAIN_GRACE`],
//! the rest of the session is killed; if a stream is still open
//! [`EXIT_ABANDON_GRACE`] later (a descendant escaped with `setsid`), it is
//! abandoned and the process is reported ended anyway. A recorded end is
//! never overwritten.
//!
//! At daemon shutdown (the token fires) the actor sends SIGHUP (PTY) or
//! SIGTERM (pipes) to the tree, escalates to SIGKILL after the kill grace,
//! drains, records the end and returns. After a natural exit it keeps
//! serving reads and snapshots until the process is cleaned up (every handle
//! dropped).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::holding::{self, Holding};
use super::input::{self, Facts, InputReport, InputSource, InputState, Prompt};
use super::probe::{self, InputTarget, Scope, Verdict};
use super::spawn::{InputWriter, OutputEvent, Primary, Spawned};
use super::{
    Attachment, Chunk, EndReason, LiveEvent, Origin, ProcError, ProcFacts, ProcHandle, ProcRequest,
    ProcStatus, Published, RowStatus, Shared, Stdio, StreamId, TermSize,
};
use crate::agents::{AgentEvent, Agents, signals as agent_signals};
use crate::config::{
    AGENT_SWEEP, BROADCAST_CHUNKS, EXIT_ABANDON_GRACE, EXIT_DRAIN_GRACE, MAX_RECORD_BYTES,
    REQUEST_QUEUE, STDIN_BACKLOG_BYTES, UNREAD_INPUT_TOTAL_BYTES,
};
use crate::osc::TermSignal;
use crate::screen::Screen;
use crate::store::{StatusUpdate, Store};
use crate::sys::{self, ExitInfo};

/// Where the process is in its life. Each state carries what only it has
/// (the exit once it came, why Portal ends it, the deadline of the phase),
/// so a combination that cannot happen cannot be written down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    /// The program runs and nothing is ending it.
    Running,
    /// A kill is under way (a request, the idle timeout, every handle
    /// dropped): SIGKILL went to the tree, and the exit is awaited. The
    /// idle timeout stays armed.
    Killing {
        /// Why; the first reason stands.
        reason: EndReason,
    },
    /// The daemon stops: SIGHUP (PTY) or SIGTERM (pipes) went to the tree.
    Terminating {
        /// Why ([`EndReason::Stopped`], unless a kill was under way).
        reason: EndReason,
        /// When SIGKILL follows if the program still runs (`None` once sent).
        kill_at: Option<Instant>,
    },
    /// The program exited; its output is read until every stream ends.
    Exited {
        /// How it exited.
        exit: ExitInfo,
        /// Why, when Portal ended it (`None`: it exited by itself).
        reason: Option<EndReason>,
        /// What happens if streams stay open (`None`: none was open).
        drain: Option<Drain>,
    },
    /// The daemon hands its programs over (a live upgrade): the program
    /// keeps running, the readers stop at a chunk boundary, and the actor
    /// leaves its state with the holder instead of ending anything once
    /// every stream has stopped. Deadlines are the next daemon's.
    HandingOver {
        /// The exit, if it came meanwhile (the next daemon records it).
        exit: Option<ExitInfo>,
        /// A kill under way: finished here (SIGKILL was sent) and its end
        /// recorded, not handed over half done, or the next daemon would
        /// see a running program and never send the SIGKILL.
        kill: Option<EndReason>,
    },
    /// The end is recorded (or, when the daemon stopped before the disk
    /// took it, left to the holder and the next daemon). The actor serves
    /// reads and snapshots until every handle is dropped.
    Ended,
}

/// What happens to an exited program's streams that stay open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Drain {
    /// Background jobs may still print: at `until` the rest of the session
    /// is killed.
    Grace {
        /// The end of [`EXIT_DRAIN_GRACE`].
        until: Instant,
    },
    /// The rest of the session was killed: at `until` the streams still
    /// open (a descendant escaped with `setsid`) are abandoned.
    Abandon {
        /// The end of [`EXIT_ABANDON_GRACE`].
        until: Instant,
    },
}

impl Life {
    /// Whether the program's exit has come.
    fn exited(self) -> bool {
        match self {
            Self::Running | Self::Killing { .. } | Self::Terminating { .. } => false,
            Self::Exited { .. } | Self::Ended => true,
            Self::HandingOver { exit, .. } => exit.is_some(),
        }
    }

    /// Why Portal ends the program, if it does.
    fn reason(self) -> Option<EndReason> {
        match self {
            Self::Running | Self::Ended => None,
            Self::Killing { reason } | Self::Terminating { reason, .. } => Some(reason),
            Self::Exited { reason, .. } => reason,
            Self::HandingOver { kill, .. } => kill,
        }
    }
}

/// Everything an actor needs to start.
pub(crate) struct ActorParts {
    /// Fixed facts.
    pub(crate) facts: ProcFacts,
    /// The started program.
    pub(crate) spawned: Spawned,
    /// The log.
    pub(crate) store: Store,
    /// Fires at daemon shutdown.
    pub(crate) cancel: CancellationToken,
    /// Grace between the polite signal and SIGKILL at shutdown.
    pub(crate) kill_grace: Duration,
    /// Test hook: a write of exactly [`crate::config::FAULT_PANIC_TRIGGER`] panics the actor.
    #[cfg(feature = "fault-injection")]
    pub(crate) fault_injection: bool,
    /// Agent state, fed with this process's signals.
    pub(crate) agents: Arc<Agents>,
    /// Ask the kernel whether the program waits for input.
    pub(crate) kernel_input_state: bool,
    /// Counters and offsets: fresh for a new program, the log's for one
    /// adopted from an earlier daemon (its output continues where it was).
    pub(crate) shared: Shared,
    /// What an earlier daemon's screen showed, as bytes to parse, and the
    /// output offset they reflect (an adopted PTY program).
    pub(crate) screen_seed: Option<(Vec<u8>, u64)>,
    /// Prompt marks and the last OSC 3008 sequence number an earlier daemon
    /// had seen.
    pub(crate) carried_marks: (u64, Option<u64>),
}

/// Starts the actor on `tracker` and returns the handle.
pub(crate) fn start(parts: ActorParts, tracker: &TaskTracker) -> Result<ProcHandle, ProcError> {
    let ActorParts {
        facts,
        spawned,
        store,
        cancel,
        kill_grace,
        #[cfg(feature = "fault-injection")]
        fault_injection,
        agents,
        kernel_input_state,
        shared,
        screen_seed,
        carried_marks,
    } = parts;
    let id = facts.id;
    let size = match facts.spec.stdio {
        Stdio::Pty(size) => Some(size),
        Stdio::Pipes => None,
    };
    let screen =
        match size {
            Some(size) => Some(Arc::new(
                Screen::spawn(id, size, spawned.input.replier())
                    .map_err(|source| ProcError::Io { id, op: "start screen thread", source })?,
            )),
            None => None,
        };
    if let (Some(screen), Some((bytes, offset))) = (&screen, screen_seed) {
        screen.restore(&bytes, offset);
    }
    let shared = Arc::new(shared);
    shared.touch();
    let (state_tx, state_rx) =
        watch::channel(Published { status: ProcStatus::Running, size, handing_over: false });
    let state_tx = Arc::new(state_tx);
    let (req_tx, req_rx) = mpsc::channel(REQUEST_QUEUE);
    let (events, _) = broadcast::channel(BROADCAST_CHUNKS);
    let facts = Arc::new(facts);
    let idle_timeout = facts.spec.idle_timeout;
    let Spawned { output, streams, input, exit, primary, input_target, lineage, holding, .. } =
        spawned;
    let handle = ProcHandle {
        facts: Arc::clone(&facts),
        shared: Arc::clone(&shared),
        state: state_rx,
        screen: screen.as_ref().map(|s| s.view()),
        requests: Some(req_tx),
        dormant: None,
    };
    let supervision = Supervision {
        id,
        pid: facts.pid,
        lineage: lineage.clone(),
        state: Arc::clone(&state_tx),
        store: store.clone(),
        holding: Arc::clone(&holding),
    };
    let actor = ProcActor {
        facts,
        shared,
        state: state_tx,
        input,
        primary,
        screen,
        store,
        holding,
        events,
        cancel,
        kill_grace,
        #[cfg(feature = "fault-injection")]
        fault_injection,
        idle_timeout,
        life: Life::Running,
        kill_waiters: Vec::new(),
        open_streams: streams,
        warned_store: false,
        osc: crate::osc::OscScanner::default(),
        prompt_marks: carried_marks.0,
        agents,
        foreground: Foreground::default(),
        lineage,
        last_osc_seq: carried_marks.1,
        clock_base: (Instant::now(), sys::monotonic_ns()),
        input_watch: InputWatch {
            target: input_target.filter(|_| kernel_input_state),
            baseline: None,
            last_input: None,
            last_output: Instant::now(),
            unterminated: false,
            last_probe: None,
            quiet_probes: 0,
        },
    };
    // The actor runs in its own task so that a panic in it (a bug) is
    // contained: the supervisor sees it, kills the program's tree (nobody
    // would read its output any more) and marks the process lost. Every
    // other process and the daemon carry on; this one's log stays readable.
    let actor = tokio::spawn(actor.run(req_rx, output, exit));
    tracker.spawn(async move {
        if let Err(e) = actor.await
            && e.is_panic()
        {
            supervision.actor_panicked(e.into_panic()).await;
        }
    });
    Ok(handle)
}

/// What the supervisor of an actor needs if the actor panics.
struct Supervision {
    id: super::ProcId,
    pid: u32,
    lineage: sys::Lineage,
    state: Arc<watch::Sender<Published>>,
    store: Store,
    holding: Arc<Holding>,
}

impl Supervision {
    async fn actor_panicked(self, panic: Box<dyn std::any::Any + Send>) {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        tracing::error!(proc = %self.id, panic = what, "the process's handler panicked; killing the process, its log is kept");
        let (pid, lineage) = (self.pid, self.lineage.clone());
        let killed =
            tokio::task::spawn_blocking(move || sys::kill_tree(pid, Some(&lineage), libc::SIGKILL))
                .await;
        if let Ok(Err(e)) = killed {
            tracing::warn!(proc = %self.id, error = %e, "cannot kill the process tree");
        }
        let update = StatusUpdate {
            id: self.id,
            pid: self.pid,
            status: RowStatus::Lost,
            exit_code: None,
            exit_signal: None,
            ended_at_ns: Some(sys::wall_ns()),
        };
        if let Err(e) = self.store.update_status(update).await {
            tracing::warn!(proc = %self.id, error = %e, "cannot record the loss in the store");
        }
        self.holding.release(self.id);
        self.state.send_modify(|p| p.status = ProcStatus::Lost);
    }
}

/// The owner of one managed process.
pub(crate) struct ProcActor {
    facts: Arc<ProcFacts>,
    shared: Arc<Shared>,
    state: Arc<watch::Sender<Published>>,
    input: InputWriter,
    primary: Option<Primary>,
    /// The holder of the program, told once its end is recorded.
    holding: Arc<Holding>,
    screen: Option<Arc<Screen>>,
    store: Store,
    events: broadcast::Sender<LiveEvent>,
    cancel: CancellationToken,
    kill_grace: Duration,
    #[cfg(feature = "fault-injection")]
    fault_injection: bool,
    idle_timeout: Option<Duration>,
    /// Where the process is in its life.
    life: Life,
    kill_waiters: Vec<oneshot::Sender<ProcStatus>>,
    /// Output streams whose reader has not ended yet.
    open_streams: usize,
    warned_store: bool,
    /// Scans PTY output for OSC records and bells.
    osc: crate::osc::OscScanner,
    /// Shell-integration marks (OSC 133 `D`) seen so far.
    prompt_marks: u64,
    agents: Arc<Agents>,
    /// The PTY's foreground process group as the last sweep found it.
    foreground: Foreground,
    /// What the program's descendants carry, to find them all at kill time.
    lineage: sys::Lineage,
    /// Sequence number of the last OSC 3008 record (replays are dropped).
    last_osc_seq: Option<u64>,
    /// A tokio instant and the monotonic clock reading taken together, to turn
    /// stored monotonic times into timer deadlines.
    clock_base: (Instant, i64),
    /// What the input state is decided from.
    input_watch: InputWatch,
}

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

/// First pause before an end the disk refused is committed again: a
/// trim or a checkpoint usually makes room within milliseconds.
const END_RETRY_FIRST: Duration = Duration::from_millis(50);

/// Longest pause between tries: a disk someone else keeps full is asked
/// about twice a second, which costs nothing.
const END_RETRY_MAX: Duration = Duration::from_millis(500);

/// How long a handover waits for a program to read the input queued for
/// it: a program that reads nothing must not hold an upgrade up.
const HANDOVER_INPUT_GRACE: Duration = Duration::from_secs(2);

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

impl ProcActor {
    fn id(&self) -> super::ProcId {
        self.facts.id
    }

    fn pid(&self) -> u32 {
        self.facts.pid
    }

    async fn run(
        mut self,
        mut requests: mpsc::Receiver<ProcRequest>,
        mut output: mpsc::Receiver<OutputEvent>,
        mut exit_rx: oneshot::Receiver<std::io::Result<ExitInfo>>,
    ) {
        let mut requests_open = true;
        let mut stopping = false;
        let timer = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(timer);
        let mut armed: Option<Instant> = None;
        let mut sweep = tokio::time::interval(AGENT_SWEEP);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let next = self.next_deadline();
            if next != armed {
                if let Some(at) = next {
                    timer.as_mut().reset(at);
                }
                armed = next;
            }
            tokio::select! {
                biased;
                ev = output.recv(), if self.open_streams > 0 => match ev {
                    Some(OutputEvent::Data(stream, data)) => self.on_output(stream, data).await,
                    Some(OutputEvent::Eof) => self.open_streams -= 1,
                    Some(OutputEvent::Detached) => {
                        self.begin_handover().await;
                        self.open_streams -= 1;
                    }
                    None => self.open_streams = 0,
                },
                res = &mut exit_rx, if !self.life.exited() => {
                    let res = res.unwrap_or_else(|_| Err(std::io::Error::other("the waiter thread vanished")));
                    self.on_exit(res).await;
                }
                req = requests.recv(), if requests_open => match req {
                    Some(req) => self.on_request(req).await,
                    None => {
                        requests_open = false;
                        self.on_abandoned().await;
                    }
                },
                () = &mut timer, if armed.is_some() => {
                    armed = None;
                    self.on_deadline().await;
                }
                _ = sweep.tick(), if !self.life.exited() => {
                    if self.primary.is_some() {
                        self.sweep_foreground();
                        self.sweep_dialog();
                    }
                    self.sweep_input().await;
                }
                () = self.cancel.cancelled(), if !stopping => {
                    stopping = true;
                    if self.holding.is_detaching() {
                        self.begin_handover().await;
                    } else {
                        self.on_shutdown().await;
                    }
                }
            }
            // Every stream has ended (or was abandoned): the process ends,
            // or is handed over.
            let drained = self.open_streams == 0;
            match self.life {
                Life::HandingOver { kill: None, .. } if drained => {
                    self.hand_over().await;
                    return;
                }
                // The kill under way, finished (see `Life::HandingOver`).
                Life::HandingOver { exit: Some(exit), kill: Some(reason) } if drained => {
                    self.finalize(exit, Some(reason)).await;
                    return;
                }
                Life::Exited { exit, reason, .. } if drained => self.finalize(exit, reason).await,
                _ => {}
            }
            if self.life == Life::Ended && (stopping || !requests_open) {
                return;
            }
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        match self.life {
            Life::Terminating { kill_at, .. } => kill_at,
            Life::Exited {
                drain: Some(Drain::Grace { until } | Drain::Abandon { until }), ..
            } => Some(until),
            Life::Running | Life::Killing { .. } => {
                let timeout = self.idle_timeout?;
                // Derived from the absolute time of the last activity, so the
                // deadline only moves (and the timer is only re-armed) when a
                // client names the process, not on every loop turn.
                let last = self.shared.last_activity_ns.load(Ordering::Acquire);
                let since_base = u64::try_from(last - self.clock_base.1).unwrap_or(0);
                Some(self.clock_base.0 + Duration::from_nanos(since_base) + timeout)
            }
            Life::Exited { drain: None, .. } | Life::HandingOver { .. } | Life::Ended => None,
        }
    }

    async fn on_output(&mut self, stream: StreamId, data: Bytes) {
        self.input_watch.last_output = Instant::now();
        if let Some(&last) = data.last() {
            self.input_watch.unterminated = last != b'\n';
        }
        if stream == StreamId::Stdout
            && let Some(screen) = &self.screen
        {
            screen.feed(&data);
            let mut signals = Vec::new();
            self.osc.scan(&data, &mut signals);
            for signal in signals {
                self.on_term_signal(signal);
            }
        }
        self.record(stream, data, None).await;
    }

    /// Stores a chunk, publishes its end offset and tells subscribers.
    async fn record(&mut self, stream: StreamId, data: Bytes, origin: Option<Origin>) -> u64 {
        let i = stream.index();
        let offset = self.shared.end[i].load(Ordering::Acquire);
        let len = data.len() as u64;
        let chunk = Chunk {
            proc: self.id(),
            stream,
            offset,
            ts_ns: sys::wall_ns(),
            mono_ns: sys::monotonic_ns(),
            data,
            origin,
        };
        if let Err(e) = self.store.append(chunk.clone()).await
            && !self.warned_store
        {
            self.warned_store = true;
            tracing::error!(proc = %self.id(), error = %e, "cannot store output; it stays visible live but is not logged");
        }
        self.shared.end[i].store(offset + len, Ordering::Release);
        self.shared.chunks[i].fetch_add(1, Ordering::AcqRel);
        if stream != StreamId::Stdin {
            self.shared.last_output_ns.store(chunk.mono_ns, Ordering::Release);
        }
        self.shared.changes.changed();
        // No subscribers is fine.
        let _ = self.events.send(LiveEvent::Chunk(chunk));
        offset
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
        self.agents.apply(self.id(), event);
    }

    /// Looks at the PTY's foreground process group: a recognised agent
    /// coming to the foreground is discovered; the program taking the
    /// terminal back ends it.
    fn sweep_foreground(&mut self) {
        let Some(fd) = self.primary.as_ref().and_then(|p| p.as_raw_fd()) else { return };
        self.check_secret_prompt();
        let own = self.pid();
        let pgrp = sys::foreground_pgrp(fd);
        let now = sys::monotonic_ns();
        let last_sweep = std::mem::replace(&mut self.foreground.last_sweep_ns, now);
        if pgrp != self.foreground.pgrp {
            // It changed at some point since the last sweep.
            self.foreground.since_ns = last_sweep;
            let previous = std::mem::replace(&mut self.foreground.pgrp, pgrp);
            self.foreground.identified = pgrp.is_none_or(|p| p == own);
            if pgrp == Some(own) && previous.is_some_and(|p| p != own) {
                self.agents.apply(self.id(), AgentEvent::ForegroundLeft);
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
        self.agents.apply(self.id(), AgentEvent::Discovered { name, kind, pid: job, job: since });
    }

    /// Looks at an agent's screen for a dialog (a permission request or
    /// another menu), which sends must never type into. Skipped when the
    /// screen is busy parsing: the next sweep looks again.
    fn sweep_dialog(&self) {
        let Some(screen) = &self.screen else { return };
        if !self.agents.is_agent(self.id()) {
            return;
        }
        let Some(snap) = screen.view().try_snapshot() else { return };
        self.agents.apply(self.id(), AgentEvent::Dialog(crate::agents::dialog::find(&snap.lines)));
    }

    /// Where the program's input waits are looked for: the PTY's foreground
    /// process group, or the pipe child's session.
    fn input_scope(&self) -> Option<Scope> {
        match &self.primary {
            Some(p) => p.as_raw_fd().and_then(sys::foreground_pgrp).map(Scope::Group),
            None => Some(Scope::Session(self.pid())),
        }
    }

    /// Decides whether the program waits for input now and publishes it.
    async fn input_report(&mut self, scan_age: Duration) -> InputReport {
        if self.life.exited() {
            let r = InputReport { state: InputState::Exited, source: InputSource::Kernel };
            self.shared.set_input(r);
            return r;
        }
        // Off the runtime's workers: a probe reads many `/proc` files, and
        // every 100 ms one of them rescans all of `/proc`.
        let probe = match (self.input_watch.target, self.input_scope()) {
            (Some(target), Some(scope)) => {
                tokio::task::spawn_blocking(move || probe::probe(scope, target, scan_age))
                    .await
                    .ok()
            }
            _ => None,
        };
        let output_unread =
            self.primary.as_ref().and_then(|p| p.as_raw_fd()).is_some_and(sys::readable_now);
        // The screen is looked at only when the kernel's answer leaves the
        // decision to the prompt.
        let prompt = match probe.map(|p| p.verdict) {
            Some(Verdict::Running | Verdict::Input | Verdict::Other) => Prompt::Absent,
            Some(Verdict::EventLoop | Verdict::Unknown) | None => self.prompt_view().await,
        };
        let w = &self.input_watch;
        let facts = Facts {
            probe,
            baseline: w.baseline,
            since_input: w.last_input.map(|t| t.elapsed()),
            pending: self.input.pending() > 0 || output_unread,
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
            return if self.input_watch.unterminated { Prompt::Drawn } else { Prompt::Absent };
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
    async fn sweep_input(&mut self) {
        let w = &self.input_watch;
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
        let r = self.input_report(SWEEP_SCAN_AGE).await;
        let w = &mut self.input_watch;
        w.quiet_probes = if quiet && before == Some(r.state) { w.quiet_probes + 1 } else { 0 };
        w.last_probe = Some((Instant::now(), r.state));
    }

    /// Takes the mark that later probes compare with, just before a write.
    fn mark_before_input(&mut self) {
        let mark = match (self.input_watch.target, self.input_scope()) {
            (Some(_), Some(scope)) => Some(probe::mark(scope)),
            _ => None,
        };
        self.input_watch.baseline = mark;
        self.input_watch.last_input = Some(Instant::now());
    }

    async fn on_exit(&mut self, res: std::io::Result<ExitInfo>) {
        let mut holder_lost = false;
        let exit = match res {
            Ok(exit) => exit,
            Err(e) if holding::is_holder_lost(&e) => {
                // Killed with its holder; what it left in its session (and
                // its lineage) must not run on unmanaged either.
                tracing::warn!(proc = %self.id(), error = %e, "the program's holder died");
                holder_lost = true;
                self.signal_tree(libc::SIGKILL).await;
                self.kill_leftovers().await;
                ExitInfo { code: None, signal: None }
            }
            Err(e) => {
                tracing::warn!(proc = %self.id(), error = %e, "waitpid failed; exit status unknown");
                ExitInfo { code: None, signal: None }
            }
        };
        tracing::info!(proc = %self.id(), code = ?exit.code, signal = ?exit.signal, "program exited");
        // Killed with its holder, whatever else was ending it.
        let reason = if holder_lost { Some(EndReason::HolderLost) } else { self.life.reason() };
        self.input.close();
        self.life = match self.life {
            Life::HandingOver { .. } => Life::HandingOver { exit: Some(exit), kill: reason },
            _ => {
                let drain = (self.open_streams > 0)
                    .then(|| Drain::Grace { until: Instant::now() + EXIT_DRAIN_GRACE });
                Life::Exited { exit, reason, drain }
            }
        };
    }

    async fn on_deadline(&mut self) {
        match self.life {
            Life::Running | Life::Killing { .. } => {
                let Some(timeout) = self.idle_timeout else { return };
                if Duration::from_millis(self.shared.idle_ms()) >= timeout {
                    tracing::info!(proc = %self.id(), ?timeout, "idle timeout: killing the process tree");
                    self.kill_tree(EndReason::TimedOut).await;
                }
            }
            Life::Terminating { reason, kill_at: Some(_) } => {
                tracing::info!(proc = %self.id(), "still running after the kill grace; sending SIGKILL");
                self.signal_tree(libc::SIGKILL).await;
                self.life = Life::Terminating { reason, kill_at: None };
            }
            Life::Exited { exit, reason, drain: Some(Drain::Grace { .. }) } => {
                tracing::info!(proc = %self.id(), "output still open after exit; killing the rest of the session");
                self.signal_tree(libc::SIGKILL).await;
                let drain = Some(Drain::Abandon { until: Instant::now() + EXIT_ABANDON_GRACE });
                self.life = Life::Exited { exit, reason, drain };
            }
            Life::Exited { exit, reason, drain: Some(Drain::Abandon { .. }) } => {
                tracing::warn!(proc = %self.id(), "a descendant keeps the output open; abandoning the stream");
                self.open_streams = 0;
                self.life = Life::Exited { exit, reason, drain: None };
            }
            // No deadline (a handover leaves them to the next daemon).
            Life::Terminating { kill_at: None, .. }
            | Life::Exited { drain: None, .. }
            | Life::HandingOver { .. }
            | Life::Ended => {}
        }
    }

    async fn on_shutdown(&mut self) {
        let reason = match self.life {
            Life::Running => EndReason::Stopped,
            Life::Killing { reason } | Life::Terminating { reason, .. } => reason,
            // Exited (it ends as it drains), or the next daemon's.
            Life::Exited { .. } | Life::HandingOver { .. } | Life::Ended => return,
        };
        let polite = match self.facts.spec.stdio {
            Stdio::Pty(_) => libc::SIGHUP,
            Stdio::Pipes => libc::SIGTERM,
        };
        self.signal_tree(polite).await;
        self.life = Life::Terminating { reason, kill_at: Some(Instant::now() + self.kill_grace) };
    }

    async fn on_abandoned(&mut self) {
        if matches!(self.life, Life::Running | Life::Killing { .. } | Life::Terminating { .. }) {
            tracing::warn!(proc = %self.id(), "every handle dropped while running; killing the tree");
            self.kill_tree(EndReason::Killed).await;
        }
    }

    /// Signals the whole tree. Finding it reads `/proc` (milliseconds with
    /// thousands of processes), so it runs on a blocking thread while the
    /// actor waits for it, never on the runtime's workers.
    fn signal_tree(&self, sig: i32) -> impl Future<Output = ()> + Send + 'static {
        let (id, pid, lineage) = (self.id(), self.pid(), self.lineage.clone());
        async move {
            let done =
                tokio::task::spawn_blocking(move || sys::kill_tree(pid, Some(&lineage), sig)).await;
            if let Ok(Err(e)) = done {
                tracing::warn!(proc = %id, sig, error = %e, "signalling the process tree failed");
            }
        }
    }

    /// Kills what the program left behind after it exited: its pid may be
    /// reused by now, so only processes reparented to the daemon that carry
    /// its lineage, and their descendants. On a blocking thread, like
    /// [`Self::signal_tree`].
    fn kill_leftovers(&self) -> impl Future<Output = ()> + Send + 'static {
        let (id, lineage) = (self.id(), self.lineage.clone());
        async move {
            let killed = tokio::task::spawn_blocking(move || sys::kill_leftovers(&lineage)).await;
            if let Ok(killed @ 1..) = killed {
                tracing::info!(proc = %id, killed, "killed what the program left behind");
            }
        }
    }

    /// Kills the program's tree and whatever it left behind. The program
    /// may have exited a moment ago with its exit not yet seen here: what it
    /// left then hangs off the daemon, not its tree, so leftovers are
    /// killed in both cases.
    async fn kill_tree(&mut self, reason: EndReason) {
        let killing = match self.life {
            Life::Running => Some(Life::Killing { reason }),
            Life::Killing { .. } | Life::Terminating { .. } => Some(self.life),
            Life::HandingOver { exit: None, kill } => {
                Some(Life::HandingOver { exit: None, kill: Some(kill.unwrap_or(reason)) })
            }
            Life::Exited { .. } | Life::HandingOver { exit: Some(_), .. } | Life::Ended => None,
        };
        if let Some(life) = killing {
            self.life = life;
            self.signal_tree(libc::SIGKILL).await;
        }
        self.kill_leftovers().await;
    }

    /// Records the end of a program that exited with `exit` and whose
    /// streams all ended, then tells everyone.
    async fn finalize(&mut self, exit: ExitInfo, reason: Option<EndReason>) {
        if self.primary.is_some() {
            // Only now, with the output drained: an agent's last in-band
            // report (printed just before it exited) must not land after
            // its exit and bring it back to life.
            self.agents
                .apply(self.id(), AgentEvent::ChildExited { code: exit.code, signal: exit.signal });
        }
        let reason = reason.unwrap_or(EndReason::Exited);
        let status = ProcStatus::Ended { reason, exit, at_ns: sys::wall_ns() };
        self.life = Life::Ended;
        let update = StatusUpdate {
            id: self.id(),
            pid: self.pid(),
            status: status.into(),
            exit_code: exit.code,
            exit_signal: exit.signal,
            ended_at_ns: Some(sys::wall_ns()),
        };
        // Durable before visible: nobody is told of an end (or shown its
        // exit code) that a crash or a restart could still take back.
        if !self.commit_end(update).await {
            // Shutting down with the end not in the log: the holder keeps
            // the exit, and the next daemon records it.
            return;
        }
        // Recorded: the holder can let it go (its descriptors close).
        self.holding.release(self.id());
        self.shared
            .set_input(InputReport { state: InputState::Exited, source: InputSource::Kernel });
        self.state.send_modify(|p| p.status = status);
        self.shared.changes.changed();
        let _ = self.events.send(LiveEvent::Ended);
        for w in self.kill_waiters.drain(..) {
            // The caller may have gone away (client cancelled); that is fine.
            let _ = w.send(status);
        }
        tracing::info!(proc = %self.id(), status = status.as_str(), "process ended");
    }

    /// Commits the end, trying again while the disk refuses it (another
    /// program may be filling it; trimming and the reserve make room in
    /// time). False only when the daemon stops first.
    async fn commit_end(&self, update: StatusUpdate) -> bool {
        let mut pause = END_RETRY_FIRST;
        loop {
            match self.store.record_end(update.clone()).await {
                Ok(()) => return true,
                Err(e) => {
                    tracing::warn!(proc = %self.id(), error = %e, "cannot commit the end yet; trying again");
                }
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = self.cancel.cancelled() => return false,
            }
            pause = (pause * 2).min(END_RETRY_MAX);
        }
    }

    /// Stops taking requests: from here on they are refused with nothing
    /// done, and the next daemon serves them. A kill under way is finished
    /// with SIGKILL (see [`Life::HandingOver`]).
    async fn begin_handover(&mut self) {
        self.state.send_if_modified(|p| !std::mem::replace(&mut p.handing_over, true));
        let (exit, kill) = match self.life {
            Life::Running => (None, None),
            Life::Killing { reason } | Life::Terminating { reason, .. } => (None, Some(reason)),
            Life::Exited { exit, reason, .. } => (Some(exit), reason),
            // Already handing over; or ended and recorded: nothing to carry.
            Life::HandingOver { .. } | Life::Ended => return,
        };
        self.life = Life::HandingOver { exit, kill };
        if kill.is_some() {
            self.signal_tree(libc::SIGKILL).await;
        }
    }

    /// Leaves the program with the holder for the next daemon: the input
    /// queued so far is written (for a bounded time), and the state that
    /// lives only in memory is left as the program's holder meta. Nothing
    /// is signalled, released or recorded as ended.
    async fn hand_over(&mut self) {
        let id = self.id();
        if let Some(written) = self.input.detach()
            && tokio::time::timeout(HANDOVER_INPUT_GRACE, written).await.is_err()
        {
            tracing::warn!(
                proc = %id,
                unwritten = self.input.pending(),
                "the program did not read its input during the handover; the next daemon writes what the journal keeps of it"
            );
        }
        // The screen is not carried: the holder's welcome to the next daemon
        // is one bounded message for every program, and screens would
        // overflow it with a large fleet. The log's tail rebuilds it.
        let carried = super::handover::Carried {
            token: Some(self.facts.token.clone()),
            handed_over: true,
            cursors: Some(*self.shared.cursors()),
            agent: self.agents.get(id),
            prompt_marks: self.prompt_marks,
            last_osc_seq: self.last_osc_seq,
        };
        self.holding.set_meta(id, carried.to_meta());
        tracing::info!(proc = %id, "handed over to the next daemon");
    }

    fn status(&self) -> ProcStatus {
        self.state.borrow().status
    }

    fn not_running(&self) -> ProcError {
        let status = match self.status() {
            ProcStatus::Running => "exited",
            other @ (ProcStatus::Ended { .. } | ProcStatus::Lost) => other.as_str(),
        };
        ProcError::NotRunning { id: self.id(), status }
    }

    async fn on_request(&mut self, req: ProcRequest) {
        match req {
            ProcRequest::Write { data, secret, origin, reply } => {
                let res = if secret {
                    self.write_redacted(data, origin).await
                } else {
                    self.write(data, origin).await
                };
                let _ = reply.send(res);
            }
            ProcRequest::WriteParts { parts, gap, origin, reply } => {
                let mut res = Ok(());
                for (i, part) in parts.into_iter().enumerate() {
                    if i > 0 {
                        self.input.gap(gap);
                    }
                    if let Err(e) = self.write(part, origin.clone()).await {
                        res = Err(e);
                        break;
                    }
                }
                let _ = reply.send(res);
            }
            ProcRequest::InputState { reply } => {
                let _ = reply.send(self.input_report(WAIT_SCAN_AGE).await);
            }
            ProcRequest::SecretPrompt { reply } => {
                let _ = reply.send(!self.life.exited() && self.check_secret_prompt());
            }
            ProcRequest::CloseStdin { reply } => {
                let res = self.close_stdin().await;
                let _ = reply.send(res);
            }
            ProcRequest::Signal { signal, reply } => {
                let res = if self.life.exited() {
                    Err(self.not_running())
                } else {
                    sys::killpg(self.pid(), signal).map_err(|source| ProcError::Io {
                        id: self.id(),
                        op: "killpg",
                        source,
                    })
                };
                let _ = reply.send(res);
            }
            ProcRequest::Kill { reason, reply } => {
                if self.life == Life::Ended {
                    self.kill_leftovers().await;
                    let _ = reply.send(self.status());
                } else {
                    self.kill_tree(reason).await;
                    self.kill_waiters.push(reply);
                }
            }
            ProcRequest::Resize { size, reply } => {
                let res = self.resize(size).await;
                let _ = reply.send(res);
            }
            ProcRequest::Clear { reply } => {
                let res = self.clear().await;
                let _ = reply.send(res);
            }
            ProcRequest::Attach { reply } => {
                let _ = reply.send(Attachment {
                    ends: self.shared.ends(),
                    events: self.events.subscribe(),
                    ended: self.life == Life::Ended,
                    prompt_marks: self.prompt_marks,
                });
            }
        }
    }

    /// Whether the terminal is at a secret prompt now (also published for
    /// inspect and agents).
    fn check_secret_prompt(&self) -> bool {
        let secret = self
            .primary
            .as_ref()
            .and_then(|p| p.as_raw_fd())
            .and_then(sys::secret_prompt)
            .unwrap_or(false);
        if self.shared.awaiting_secret.swap(secret, Ordering::AcqRel) != secret {
            self.shared.changes.changed();
        }
        secret
    }

    async fn write(&mut self, data: Bytes, origin: Option<Origin>) -> Result<u64, ProcError> {
        #[cfg(feature = "fault-injection")]
        assert!(
            !(self.fault_injection && data.as_ref() == crate::config::FAULT_PANIC_TRIGGER),
            "fault injection: process {} handler panics",
            self.id()
        );
        if self.check_secret_prompt() {
            return self.write_redacted(data, origin).await;
        }
        self.write_logged(data, false, origin).await
    }

    /// Writes input whose log record keeps only its length (`*` per byte, so
    /// offsets stay contiguous).
    async fn write_redacted(
        &mut self,
        data: Bytes,
        origin: Option<Origin>,
    ) -> Result<u64, ProcError> {
        self.write_logged(data, true, origin).await
    }

    async fn write_logged(
        &mut self,
        data: Bytes,
        redact: bool,
        origin: Option<Origin>,
    ) -> Result<u64, ProcError> {
        if self.life.exited() {
            return Err(self.not_running());
        }
        if self.input.is_closed() {
            return Err(ProcError::StdinClosed(self.id()));
        }
        let pending = self.input.pending();
        if pending + data.len() > STDIN_BACKLOG_BYTES {
            return Err(ProcError::InputBacklog {
                id: self.id(),
                pending,
                limit: STDIN_BACKLOG_BYTES,
            });
        }
        let total = super::spawn::unread_input_total();
        if total + data.len() > UNREAD_INPUT_TOTAL_BYTES {
            return Err(ProcError::UnreadInputTotal {
                id: self.id(),
                pending: total,
                limit: UNREAD_INPUT_TOTAL_BYTES,
            });
        }
        let offset = self.shared.end[StreamId::Stdin.index()].load(Ordering::Acquire);
        self.mark_before_input();
        let logged = if redact { Bytes::from(vec![b'*'; data.len()]) } else { data.clone() };
        // In the journal before the rpc answers: accepted input is written
        // to the program even if this daemon dies before it is.
        if !self.input.accept(data, &logged, redact) {
            return Err(self.not_running());
        }
        let mut rest = logged;
        while !rest.is_empty() {
            let piece = rest.split_to(rest.len().min(MAX_RECORD_BYTES));
            self.record(StreamId::Stdin, piece, origin.clone()).await;
        }
        Ok(offset)
    }

    /// Pipes: closes the program's stdin. PTY: sends the terminal's EOF
    /// character (Ctrl-D), which a program reading a line at its start sees
    /// as end of input; further writes are refused either way.
    async fn close_stdin(&mut self) -> Result<(), ProcError> {
        if self.life.exited() {
            return Err(self.not_running());
        }
        if self.input.is_closed() {
            return Ok(());
        }
        if matches!(self.facts.spec.stdio, Stdio::Pty(_)) {
            let eof = Bytes::from_static(b"\x04");
            if self.input.accept(eof.clone(), &eof, false) {
                self.record(StreamId::Stdin, eof, None).await;
            }
        }
        self.input.close();
        self.shared.stdin_closed.store(true, Ordering::Release);
        self.shared.changes.changed();
        Ok(())
    }

    async fn resize(&mut self, size: TermSize) -> Result<(), ProcError> {
        let id = self.id();
        let (Some(primary), Some(screen)) = (&self.primary, &self.screen) else {
            return Err(ProcError::NotPty(id));
        };
        if !self.life.exited() {
            primary.resize(size).map_err(|source| ProcError::Io {
                id,
                op: "resize PTY",
                source,
            })?;
        }
        let screen = Arc::clone(screen);
        tokio::task::spawn_blocking(move || screen.resize(size))
            .await
            .map_err(|_| ProcError::Gone(id))?;
        let to = crate::screen::clamp(size);
        let from = self.state.borrow().size;
        self.state.send_modify(|p| p.size = Some(to));
        self.shared.changes.changed();
        // Kept for recordings (asciicast `r` events).
        if let Some(from) = from.filter(|f| *f != to) {
            self.store.record_resize(crate::domain::Resize { id, at_ns: sys::wall_ns(), from, to });
        }
        Ok(())
    }

    async fn clear(&mut self) -> Result<[u64; 3], ProcError> {
        super::clear_history(self.id(), &self.shared, &self.store).await
    }
}
