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
//!
//! Here: starting the actor and its loop, output, requests and writes, and
//! the transitions of the process's life. Beside it: the states of that
//! life (`life.rs`), what the actor learns about its program besides its
//! output (`observe.rs`) and what happens when it panics (`panicked.rs`).

mod life;
mod observe;
mod panicked;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::life::{Drain, Life};
use self::observe::{Observer, Watched};
use self::panicked::Supervisor;
use super::holding::{self, Holding};
use super::input::{InputReport, InputSource, InputState};
use super::spawn::{InputWriter, OutputEvent, Primary, Spawned};
use super::{
    Attachment, Chunk, EndReason, LiveEvent, Origin, ProcError, ProcFacts, ProcHandle, ProcRequest,
    ProcStatus, Published, Shared, Stdio, StreamId, TermSize,
};
use crate::agents::{AgentEvent, Agents};
use crate::config::{
    AGENT_SWEEP, BROADCAST_CHUNKS, EXIT_ABANDON_GRACE, EXIT_DRAIN_GRACE, MAX_RECORD_BYTES,
    REQUEST_QUEUE, STDIN_BACKLOG_BYTES, UNREAD_INPUT_TOTAL_BYTES,
};
use crate::screen::Screen;
use crate::store::{StatusUpdate, Store};
use crate::sys::{self, ExitInfo};

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
    let size = facts.spec.stdio.size();
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
    let supervisor = Supervisor {
        id,
        pid: facts.pid,
        lineage: lineage.clone(),
        state: Arc::clone(&state_tx),
        store: store.clone(),
        holding: Arc::clone(&holding),
    };
    let observer = Observer::new(Watched {
        id,
        pid: facts.pid,
        primary: primary.as_ref().and_then(Primary::as_raw_fd),
        screen: screen.clone(),
        agents: Arc::clone(&agents),
        shared: Arc::clone(&shared),
        input_target: input_target.filter(|_| kernel_input_state),
        carried_marks,
    });
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
        agents,
        lineage,
        clock_base: (Instant::now(), sys::monotonic_ns()),
        observer,
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
            supervisor.actor_panicked(e.into_panic()).await;
        }
    });
    Ok(handle)
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
    agents: Arc<Agents>,
    /// What the program's descendants carry, to find them all at kill time.
    lineage: sys::Lineage,
    /// A tokio instant and the monotonic clock reading taken together, to turn
    /// stored monotonic times into timer deadlines.
    clock_base: (Instant, i64),
    /// Its watch over the program: in-band signals, the foreground job,
    /// dialogs, secret prompts, the input state.
    observer: Observer,
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
                _ = sweep.tick(), if !self.life.exited() => self.observer.sweep(&self.input).await,
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
        self.observer.saw_output(&data);
        if stream == StreamId::Stdout
            && let Some(screen) = &self.screen
        {
            screen.feed(&data);
            self.observer.scan(&data);
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
        self.holding.released(self.id()).await;
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
        let (prompt_marks, last_osc_seq) = self.observer.marks();
        let carried = super::handover::Carried {
            token: Some(self.facts.token.clone()),
            handed_over: true,
            cursors: Some(*self.shared.cursors()),
            agent: self.agents.get(id),
            prompt_marks,
            last_osc_seq,
        };
        self.holding.set_meta(id, carried.to_meta()).await;
        tracing::info!(proc = %id, "handed over to the next daemon");
    }

    fn status(&self) -> ProcStatus {
        self.state.borrow().status
    }

    fn not_running(&self) -> ProcError {
        ProcError::NotRunning { id: self.id(), status: self.status() }
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
                let exited = self.life.exited();
                let _ = reply.send(self.observer.input_state(exited, &self.input).await);
            }
            ProcRequest::SecretPrompt { reply } => {
                let _ = reply.send(!self.life.exited() && self.observer.check_secret_prompt());
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
                    prompt_marks: self.observer.prompt_marks(),
                });
            }
        }
    }

    async fn write(&mut self, data: Bytes, origin: Option<Origin>) -> Result<u64, ProcError> {
        #[cfg(feature = "fault-injection")]
        assert!(
            !(self.fault_injection && data.as_ref() == crate::config::FAULT_PANIC_TRIGGER),
            "fault injection: process {} handler panics",
            self.id()
        );
        if self.observer.check_secret_prompt() {
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
        self.observer.mark_before_input();
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
