//! Managed processes: their domain types, errors and the handle other code
//! uses to talk to a process's actor.
//!
//! - [`actor`]: the task that owns one process (child, I/O threads, screen,
//!   offsets, status).
//! - [`spawn`]: starting a program on a PTY or on pipes, and the I/O threads.
//! - [`signal`]: signal names and numbers.
//! - [`input`] and [`probe`]: whether the program waits for input, from the
//!   kernel first.

pub(crate) mod actor;
pub(crate) mod handover;
pub(crate) mod holding;
pub(crate) mod input;
pub(crate) mod journal;
pub(crate) mod keys;
pub(crate) mod probe;
pub(crate) mod signal;
pub(crate) mod spawn;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use self::input::{InputReport, InputSource, InputState};
use crate::screen::{ScreenView, Snapshot};
use crate::store::Store;
use crate::store::StoreError;
use crate::sys::ExitInfo;

pub(crate) use crate::domain::{Chunk, EndReason, ProcId, RowStatus, StreamId, TermSize};

/// How the program's standard streams are connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stdio {
    /// A pseudo-terminal of this size.
    Pty(TermSize),
    /// Three pipes.
    Pipes,
}

impl Stdio {
    /// The terminal's size (`None`: pipes).
    pub(crate) fn size(self) -> Option<TermSize> {
        match self {
            Self::Pty(size) => Some(size),
            Self::Pipes => None,
        }
    }
}

/// Where a program's environment starts, before the caller's overrides.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) enum EnvFrom {
    /// The daemon's own environment.
    #[default]
    Daemon,
    /// The caller's environment (a shim's, which is its MCP client's;
    /// portal-cli's). Held in memory for this program and its restarts,
    /// never stored or shown.
    Caller(std::sync::Arc<BTreeMap<String, String>>),
    /// Nothing but the overrides (and a default `PATH`).
    Clean,
}

/// Says where, never what: a caller's environment holds its secrets.
impl std::fmt::Debug for EnvFrom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Daemon => f.write_str("Daemon"),
            Self::Caller(vars) => write!(f, "Caller({} variables)", vars.len()),
            Self::Clean => f.write_str("Clean"),
        }
    }
}

/// A validated description of a process to start.
#[derive(Clone, Debug)]
pub(crate) struct ProcSpec {
    /// The program as the caller named it.
    pub(crate) command: String,
    pub(crate) args: Vec<String>,
    /// Absolute working directory (already checked to exist).
    pub(crate) cwd: PathBuf,
    /// Caller's environment overrides.
    pub(crate) env: BTreeMap<String, String>,
    /// Where the environment starts before `env` is merged over it.
    pub(crate) env_from: EnvFrom,
    /// Optional unique name.
    pub(crate) name: Option<String>,
    /// Idle timeout.
    pub(crate) idle_timeout: Option<Duration>,
    /// PTY or pipes.
    pub(crate) stdio: Stdio,
    /// Start it again when it fails.
    pub(crate) restart: Option<RestartPolicy>,
}

/// When portald starts a program again: after a failure (a non-zero exit
/// status or a signal), never after a kill, a timeout or a shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct RestartPolicy {
    /// Restarts at most.
    pub(crate) max_restarts: u32,
    /// The wait before the first restart (doubling, at most [`MAX_BACKOFF`]).
    pub(crate) backoff_ms: u64,
}

/// The longest wait between two restarts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);

impl RestartPolicy {
    /// The wait before restart number `n + 1`.
    pub(crate) fn backoff(&self, n: u32) -> Duration {
        let ms = self.backoff_ms.saturating_mul(1u64 << n.min(20));
        Duration::from_millis(ms).min(MAX_BACKOFF)
    }
}

/// Which run of a restarted program a process is (stored with its row).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Run {
    /// Restarts before this run (0 for the first).
    pub(crate) restarts: u32,
    /// The run it restarted.
    pub(crate) restart_of: Option<u64>,
}

/// A process's supervision as its row keeps it (JSON): the policy and
/// which run this is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Supervision {
    /// The policy.
    pub(crate) policy: Option<RestartPolicy>,
    /// The run.
    pub(crate) run: Run,
}

/// The one published status of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcStatus {
    /// Running (possibly exited but its output still draining).
    Running,
    /// Ended; a recorded end is never overwritten.
    Ended {
        /// Why it ended (by itself, a kill, the idle timeout...).
        reason: EndReason,
        /// What `waitpid` said (both `None` when the child was never reaped).
        exit: ExitInfo,
        /// Wall-clock end time, ns.
        at_ns: i64,
    },
    /// Was running when a previous daemon died; its fate is unknown.
    Lost,
}

impl From<ProcStatus> for RowStatus {
    fn from(s: ProcStatus) -> Self {
        match s {
            ProcStatus::Running => Self::Running,
            ProcStatus::Ended { reason, .. } => Self::Ended(reason),
            ProcStatus::Lost => Self::Lost,
        }
    }
}

impl ProcStatus {
    /// True while the program runs.
    pub(crate) const fn is_running(self) -> bool {
        matches!(self, Self::Running)
    }

    /// Stored and displayed name.
    pub(crate) fn as_str(self) -> &'static str {
        RowStatus::from(self).as_str()
    }
}

/// What went wrong with a request about a process.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProcError {
    /// No process has this id.
    #[error("no process with id {0}")]
    NotFound(u64),
    /// No process has this name.
    #[error("no process named {0:?}")]
    NameNotFound(String),
    /// The name is in use by another process.
    #[error("the name {0:?} is already used by another process; pick another or clean that one up")]
    NameTaken(String),
    /// The request needs a running process.
    #[error("process {id} is not running ({})", ended_text(*status))]
    NotRunning {
        id: ProcId,
        /// Its status when asked (still `Running` in the moment between its
        /// program's exit and the end being recorded).
        status: ProcStatus,
    },
    /// Cleanup of a process that still runs.
    #[error("process {0} is still running; kill it before cleanup")]
    StillRunning(ProcId),
    /// A screen request for a pipe-mode process.
    #[error(
        "process {0} runs on pipes, not a PTY: it has no screen to show or attach to; read its output (read, follow) and type with write"
    )]
    NotPty(ProcId),
    /// Input was closed with CloseStdin.
    #[error("the input of process {0} was closed")]
    StdinClosed(ProcId),
    /// The program cannot be executed.
    #[error("cannot execute {program:?}: {reason}")]
    Spawn {
        /// The program as named.
        program: String,
        /// Why not.
        reason: SpawnFailure,
    },
    /// Too many managed processes.
    #[error("process limit reached ({limit}); clean up finished processes with Cleanup")]
    TooMany {
        /// The limit.
        limit: usize,
    },
    /// The program is not reading its input and the backlog is full.
    #[error(
        "process {id} is not reading its input: {pending} bytes are still waiting (limit {limit}); try again later or signal it"
    )]
    InputBacklog {
        id: ProcId,
        /// Bytes waiting.
        pending: usize,
        /// The limit.
        limit: usize,
    },
    /// Input waiting for programs that do not read it, across every process,
    /// is at the daemon's limit.
    #[error(
        "input is piling up: {pending} bytes written to programs are not read yet across all processes (limit {limit}); process {id} was not written to. Find the programs that do not read and signal or kill them"
    )]
    UnreadInputTotal {
        /// The process the write was for.
        id: ProcId,
        /// Bytes waiting in total.
        pending: usize,
        /// The limit.
        limit: usize,
    },
    /// A key name outside the grammar.
    #[error(transparent)]
    BadKey(#[from] keys::UnknownKey),
    /// A read cursor beyond what the stream has produced.
    #[error(
        "offset {offset} of {stream} of process {id} is past its end ({end}); continue from the cursor a read returned"
    )]
    OffsetPastEnd {
        id: ProcId,
        /// Stream name.
        stream: &'static str,
        /// Requested offset.
        offset: u64,
        /// Current end.
        end: u64,
    },
    /// The daemon is shutting down or handing over (a live upgrade); the
    /// request was not carried out.
    #[error("portald is shutting down or being upgraded; nothing was done: try again")]
    ShuttingDown,
    /// The daemon went away after a run had typed its input, before the
    /// wait for its result ended.
    #[error(
        "portald is being upgraded or shut down; the input of process {0} was sent and its result is still to come: wait for the process again once portald is back"
    )]
    Interrupted(ProcId),
    /// The actor of the process is gone (a bug; see the daemon log).
    #[error(
        "process {0} is no longer managed: its handler failed (see the daemon log); its log is kept and readable"
    )]
    Gone(ProcId),
    /// A system call failed.
    #[error("{op} failed for process {id}: {source}")]
    Io {
        id: ProcId,
        /// The operation.
        op: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How [`ProcError::NotRunning`] names the state of a process that does
/// not run.
fn ended_text(status: ProcStatus) -> String {
    match status {
        // Its program exited; the end is being recorded.
        ProcStatus::Running => "its program has just exited".to_owned(),
        ProcStatus::Ended { .. } | ProcStatus::Lost => format!("status={}", status.as_str()),
    }
}

/// Why a program could not be started.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpawnFailure {
    /// The program's file could not be looked at.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The path names a directory.
    #[error("it is a directory")]
    Directory,
    /// The file may not be executed.
    #[error("permission denied (not executable)")]
    NotExecutable,
    /// No directory of the child's `PATH` (given) holds it.
    #[error("not found on PATH ({0})")]
    NotOnPath(String),
    /// What portal-holder, which starts programs, said (its errno's text:
    /// it crossed the holder's socket).
    #[error("{0}")]
    Holder(String),
}

/// What subscribers receive, in order.
#[derive(Clone, Debug)]
pub(crate) enum LiveEvent {
    /// New output or input.
    Chunk(Chunk),
    /// The process ended and every stream is drained.
    Ended,
}

/// The last `max` bytes of a process's stdout from the log: the bytes, the
/// offset where they start and the one where they end (what a screen fed
/// with them reflects).
pub(crate) async fn output_tail(
    store: &Store,
    id: ProcId,
    shared: &Shared,
    max: u64,
) -> Result<(Vec<u8>, u64, u64), ProcError> {
    let i = StreamId::Stdout.index();
    let end = shared.end[i].load(Ordering::Acquire);
    let from = end.saturating_sub(max).max(shared.start[i].load(Ordering::Acquire));
    let pieces = store
        .read(move |c| {
            crate::store::read_range(
                c,
                id,
                StreamId::Stdout,
                from,
                end,
                max,
                crate::store::Keep::Tail,
            )
        })
        .await?;
    let bytes = pieces.iter().flat_map(|p| p.data.iter().copied()).collect();
    Ok((bytes, from, end))
}

/// Counters and cursors that readers use without a round trip to the actor.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Per stream: offset of the next byte (total bytes ever).
    pub(crate) end: [AtomicU64; 3],
    /// Per stream: where retained history begins.
    pub(crate) start: [AtomicU64; 3],
    /// Per stream: chunks ever recorded.
    pub(crate) chunks: [AtomicU64; 3],
    /// Monotonic ns of the last client activity naming the process.
    pub(crate) last_activity_ns: AtomicI64,
    /// True once input was closed.
    pub(crate) stdin_closed: AtomicBool,
    /// The terminal reads a line with echo off (a secret prompt).
    pub(crate) awaiting_secret: AtomicBool,
    /// Per stream "read new" cursors of the server-side reader.
    pub(crate) read_cursors: Mutex<[u64; 3]>,
    /// The last decided input state ([`InputState::to_u8`]; 0 = never).
    pub(crate) input_state: AtomicU8,
    /// Its source: 1 kernel, 2 heuristic, 3 kernel and prompt.
    pub(crate) input_source: AtomicU8,
    /// Monotonic ns of the last output (0 = none since this daemon has it).
    pub(crate) last_output_ns: AtomicI64,
    /// Bumped whenever something a process list shows changes.
    pub(crate) changes: crate::marks::ChangeMark,
    /// The process that took its name over after it ended (0 = none).
    pub(crate) replaced_by: AtomicU64,
    /// A kill came while it waited for its restart: there is none.
    pub(crate) no_restart: AtomicBool,
    /// Monotonic ns at which its restart is due (0 = none pending).
    pub(crate) restart_due_ns: AtomicI64,
}

impl crate::store::HistoryStarts for Shared {
    fn history_starts_at(&self, starts: [u64; 3]) {
        for (slot, start) in self.start.iter().zip(starts) {
            slot.fetch_max(start, Ordering::AcqRel);
        }
    }
}

impl Shared {
    /// End offsets of every stream.
    pub(crate) fn ends(&self) -> [u64; 3] {
        StreamId::ALL.map(|s| self.end[s.index()].load(Ordering::Acquire))
    }

    /// History starts of every stream.
    pub(crate) fn starts(&self) -> [u64; 3] {
        StreamId::ALL.map(|s| self.start[s.index()].load(Ordering::Acquire))
    }

    /// Records client activity now.
    pub(crate) fn touch(&self) {
        self.last_activity_ns.store(crate::sys::monotonic_ns(), Ordering::Release);
    }

    /// Milliseconds since the last client activity.
    pub(crate) fn idle_ms(&self) -> u64 {
        let idle = crate::sys::monotonic_ns() - self.last_activity_ns.load(Ordering::Acquire);
        u64::try_from(idle / 1_000_000).unwrap_or(0)
    }

    /// The last input state the actor decided (at most one sweep old).
    pub(crate) fn input(&self) -> Option<InputReport> {
        let state = InputState::from_u8(self.input_state.load(Ordering::Acquire))?;
        let source = match self.input_source.load(Ordering::Acquire) {
            2 => InputSource::Heuristic,
            3 => InputSource::KernelPrompt,
            _ => InputSource::Kernel,
        };
        Some(InputReport { state, source })
    }

    /// Counters for a process whose changes wake the followers of `hub`.
    pub(crate) fn new(hub: crate::marks::ChangeHub) -> Self {
        Self { changes: crate::marks::ChangeMark::new(hub), ..Self::default() }
    }

    /// Publishes an input state (a change is marked; the same one again is
    /// not).
    pub(crate) fn set_input(&self, r: InputReport) {
        let old = self.input_state.swap(r.state.to_u8(), Ordering::AcqRel);
        let source = match r.source {
            InputSource::Kernel => 1,
            InputSource::Heuristic => 2,
            InputSource::KernelPrompt => 3,
        };
        let old_source = self.input_source.swap(source, Ordering::AcqRel);
        if old != r.state.to_u8() || old_source != source {
            self.changes.changed();
        }
    }

    /// Milliseconds since the program last printed, if it has while this
    /// daemon held it.
    pub(crate) fn output_quiet_ms(&self) -> Option<u64> {
        let at = self.last_output_ns.load(Ordering::Acquire);
        (at > 0).then(|| u64::try_from((crate::sys::monotonic_ns() - at) / 1_000_000).unwrap_or(0))
    }

    /// Locks the read cursors (recovering from a poisoned lock: the data is
    /// three integers and always consistent).
    pub(crate) fn cursors(&self) -> std::sync::MutexGuard<'_, [u64; 3]> {
        self.read_cursors.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Clears a process's history: it now begins at the end of every stream,
/// for readers (starts), the server-side cursors and the log. The actor
/// does it for a running process; a dormant handle for one of an earlier
/// daemon.
pub(crate) async fn clear_history(
    id: ProcId,
    shared: &Shared,
    store: &Store,
) -> Result<[u64; 3], ProcError> {
    let ends = shared.ends();
    for s in StreamId::ALL {
        shared.start[s.index()].store(ends[s.index()], Ordering::Release);
    }
    *shared.cursors() = ends;
    store.clear(id, ends).await?;
    Ok(ends)
}

/// Immutable facts about a process fixed at start.
#[derive(Debug)]
pub(crate) struct ProcFacts {
    pub(crate) id: ProcId,
    /// The spec it was started with.
    pub(crate) spec: ProcSpec,
    /// OS pid.
    pub(crate) pid: u32,
    /// Wall-clock start, ns.
    pub(crate) started_at_ns: i64,
    /// Portal injected shell integration (OSC 133 marks) into this shell.
    pub(crate) shell_integration: bool,
    /// Secret in the child's environment that authenticates its hook reports.
    pub(crate) token: String,
    /// Which run of a restarted program it is.
    pub(crate) run: Run,
}

/// The state the actor publishes on every change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Published {
    /// Running, ended (how and when) or lost.
    pub(crate) status: ProcStatus,
    /// Current terminal size (PTY).
    pub(crate) size: Option<TermSize>,
    /// The actor is handing the program over to the next daemon (a live
    /// upgrade): requests are refused with nothing done.
    pub(crate) handing_over: bool,
}

tokio::task_local! {
    /// Who the input written in the current call comes from (the gRPC
    /// layer sets it from the calling client), recorded with it in the log.
    pub(crate) static INPUT_ORIGIN: Option<Origin>;
}

/// Who typed a piece of input, for people (`portal-cli write (ada@laptop)`).
pub(crate) type Origin = std::sync::Arc<str>;

/// [`INPUT_ORIGIN`] of the current call, if any.
fn input_origin() -> Option<Origin> {
    INPUT_ORIGIN.try_with(Clone::clone).ok().flatten()
}

/// Messages to a process's actor.
#[derive(Debug)]
pub(crate) enum ProcRequest {
    /// Write input.
    Write {
        /// The input, as it is written to the program.
        data: Bytes,
        /// Typed by a person as a secret: log only its length.
        secret: bool,
        /// Who typed it.
        origin: Option<Origin>,
        /// Offset of the bytes in the stdin stream.
        reply: oneshot::Sender<Result<u64, ProcError>>,
    },
    /// Write several parts in order, nothing else between them, with a
    /// pause between parts (a prompt, then its Enter).
    WriteParts {
        /// The parts.
        parts: Vec<Bytes>,
        /// Pause between parts.
        gap: Duration,
        /// Who sent them.
        origin: Option<Origin>,
        /// Answered once every part is accepted (or with the first refusal).
        reply: oneshot::Sender<Result<(), ProcError>>,
    },
    /// Whether the program waits for input right now (a fresh probe).
    InputState {
        /// The answer.
        reply: oneshot::Sender<InputReport>,
    },
    /// Whether the terminal is at a secret prompt right now.
    SecretPrompt {
        /// The answer.
        reply: oneshot::Sender<bool>,
    },
    /// Close input.
    CloseStdin {
        /// Answered once input is closed.
        reply: oneshot::Sender<Result<(), ProcError>>,
    },
    /// Send a signal to the process group.
    Signal {
        /// Signal number.
        signal: i32,
        /// Answered once the signal is sent.
        reply: oneshot::Sender<Result<(), ProcError>>,
    },
    /// Kill the tree; replies once the process has ended and drained.
    Kill {
        /// Why (Killed or TimedOut).
        reason: EndReason,
        /// The final status.
        reply: oneshot::Sender<ProcStatus>,
    },
    /// Resize the PTY and the screen.
    Resize {
        /// New size.
        size: TermSize,
        /// Answered once the terminal and the screen have the new size.
        reply: oneshot::Sender<Result<(), ProcError>>,
    },
    /// Delete stored history; new reads start at the current end.
    Clear {
        /// The new history starts.
        reply: oneshot::Sender<Result<[u64; 3], ProcError>>,
    },
    /// Subscribe to live events from exactly the current end offsets.
    Attach {
        /// End offsets at subscription time, the receiver, and whether the
        /// process already ended (then no event will come).
        reply: oneshot::Sender<Attachment>,
    },
}

/// A subscription taken atomically with the offsets it starts at.
#[derive(Debug)]
pub(crate) struct Attachment {
    /// End offsets at the moment of subscribing.
    pub(crate) ends: [u64; 3],
    /// Live events after those offsets.
    pub(crate) events: broadcast::Receiver<LiveEvent>,
    /// True when the process had already ended and drained.
    pub(crate) ended: bool,
    /// Shell-integration "command finished" marks seen before `ends`.
    pub(crate) prompt_marks: u64,
}

/// The cloneable API of one managed process.
///
/// # Cancel safety
/// Every method is cancel-safe: once a request is queued the actor completes
/// it even if the caller goes away, and dropping the caller never leaves a
/// half-applied change.
#[derive(Clone, Debug)]
pub(crate) struct ProcHandle {
    /// Fixed facts.
    pub(crate) facts: Arc<ProcFacts>,
    /// Counters and cursors.
    pub(crate) shared: Arc<Shared>,
    /// Published state.
    pub(crate) state: watch::Receiver<Published>,
    /// The screen (PTY mode, while an actor owns the process).
    pub(crate) screen: Option<ScreenView>,
    requests: Option<mpsc::Sender<ProcRequest>>,
    /// For a process from an earlier daemon (no actor): its log, to read
    /// from and to rebuild its final screen.
    dormant: Option<Store>,
}

impl ProcHandle {
    /// Where the store tells this process that trims moved its history's
    /// start.
    pub(crate) fn history_starts(&self) -> std::sync::Weak<dyn crate::store::HistoryStarts> {
        let live: Arc<dyn crate::store::HistoryStarts> = self.shared.clone();
        Arc::downgrade(&live)
    }

    pub(crate) fn id(&self) -> ProcId {
        self.facts.id
    }

    /// Whether the kernel says the program waits for input now (a guess
    /// from the screen does not count).
    pub(crate) fn waits_for_input(&self) -> bool {
        self.shared
            .input()
            .is_some_and(|r| r.state.wants_input() && r.source == InputSource::Kernel)
    }

    /// Current published state.
    pub(crate) fn published(&self) -> Published {
        *self.state.borrow()
    }

    /// Current status.
    pub(crate) fn status(&self) -> ProcStatus {
        self.published().status
    }

    /// A handle for a process an earlier daemon started: no actor, no
    /// program; its log and counters come from the store.
    pub(crate) fn dormant(
        facts: ProcFacts,
        shared: Shared,
        status: ProcStatus,
        size: Option<TermSize>,
        store: Store,
    ) -> Self {
        let (_, state) = watch::channel(Published { status, size, handing_over: false });
        Self {
            facts: Arc::new(facts),
            shared: Arc::new(shared),
            state,
            screen: None,
            requests: None,
            dormant: Some(store),
        }
    }

    /// True for a process of an earlier daemon.
    pub(crate) fn is_dormant(&self) -> bool {
        self.dormant.is_some()
    }

    fn not_running(&self) -> ProcError {
        ProcError::NotRunning { id: self.id(), status: self.status() }
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> ProcRequest,
    ) -> Result<T, ProcError> {
        let Some(requests) = &self.requests else { return Err(self.not_running()) };
        // An actor that hands its program over does nothing more; one that
        // is gone after a handover is no failure of its own.
        let gone = || {
            if self.state.borrow().handing_over {
                ProcError::ShuttingDown
            } else {
                ProcError::Gone(self.id())
            }
        };
        if self.state.borrow().handing_over {
            return Err(ProcError::ShuttingDown);
        }
        let (tx, rx) = oneshot::channel();
        requests.send(make(tx)).await.map_err(|_| gone())?;
        rx.await.map_err(|_| gone())
    }

    /// Writes input; returns its offset in the stdin stream.
    pub(crate) async fn write(&self, data: Bytes) -> Result<u64, ProcError> {
        let origin = input_origin();
        self.ask(|reply| ProcRequest::Write { data, secret: false, origin, reply }).await?
    }

    /// Writes a secret a person typed: the log keeps only its length.
    pub(crate) async fn write_secret(&self, data: Bytes) -> Result<u64, ProcError> {
        let origin = input_origin();
        self.ask(|reply| ProcRequest::Write { data, secret: true, origin, reply }).await?
    }

    /// Writes parts in order with `gap` between them, atomically with
    /// respect to every other write.
    pub(crate) async fn write_parts(
        &self,
        parts: Vec<Bytes>,
        gap: Duration,
    ) -> Result<(), ProcError> {
        let origin = input_origin();
        self.ask(|reply| ProcRequest::WriteParts { parts, gap, origin, reply }).await?
    }

    /// Whether the program waits for a secret right now (a line read with
    /// echo off).
    pub(crate) async fn secret_prompt(&self) -> bool {
        if self.screen.is_none() {
            return false;
        }
        self.ask(|reply| ProcRequest::SecretPrompt { reply }).await.unwrap_or(false)
    }

    /// Whether the program waits for input now, asked afresh. A process of
    /// an earlier daemon has no answer.
    pub(crate) async fn input_state(&self) -> Option<InputReport> {
        if self.is_dormant() {
            return None;
        }
        match self.ask(|reply| ProcRequest::InputState { reply }).await {
            Ok(r) => Some(r),
            Err(_) => (!self.status().is_running())
                .then_some(InputReport { state: InputState::Exited, source: InputSource::Kernel }),
        }
    }

    /// Closes input.
    pub(crate) async fn close_stdin(&self) -> Result<(), ProcError> {
        self.ask(|reply| ProcRequest::CloseStdin { reply }).await?
    }

    /// Signals the process group.
    pub(crate) async fn signal(&self, signal: i32) -> Result<(), ProcError> {
        self.ask(|reply| ProcRequest::Signal { signal, reply }).await?
    }

    /// Kills the tree and waits until the process ended and its output drained.
    pub(crate) async fn kill(&self, reason: EndReason) -> Result<ProcStatus, ProcError> {
        if self.is_dormant() {
            return Ok(self.status());
        }
        self.ask(|reply| ProcRequest::Kill { reason, reply }).await
    }

    /// Resizes PTY and screen.
    pub(crate) async fn resize(&self, size: TermSize) -> Result<(), ProcError> {
        self.ask(|reply| ProcRequest::Resize { size, reply }).await?
    }

    /// Clears history.
    pub(crate) async fn clear(&self) -> Result<[u64; 3], ProcError> {
        if let Some(store) = &self.dormant {
            return clear_history(self.id(), &self.shared, store).await;
        }
        self.ask(|reply| ProcRequest::Clear { reply }).await?
    }

    /// Subscribes to live events.
    pub(crate) async fn attach(&self) -> Result<Attachment, ProcError> {
        if self.is_dormant() {
            // Nothing will ever happen live: a closed subscription.
            let (_, events) = broadcast::channel(1);
            return Ok(Attachment {
                ends: self.shared.ends(),
                events,
                ended: true,
                prompt_marks: 0,
            });
        }
        self.ask(|reply| ProcRequest::Attach { reply }).await
    }

    /// A snapshot of the screen, rendered up to everything output so far.
    /// For a process of an earlier daemon the final screen is rebuilt by
    /// replaying the end of its log.
    pub(crate) async fn snapshot(&self) -> Result<Snapshot, ProcError> {
        let id = self.id();
        if let Some(screen) = self.screen.clone() {
            if let Some(snap) = screen.try_snapshot() {
                return Ok(snap);
            }
            return tokio::task::spawn_blocking(move || screen.snapshot())
                .await
                .map_err(|_| ProcError::Gone(id));
        }
        let (Some(store), Stdio::Pty(size)) = (&self.dormant, self.facts.spec.stdio) else {
            return Err(ProcError::NotPty(id));
        };
        let size = self.published().size.unwrap_or(size);
        let (bytes, from, _) =
            output_tail(store, id, &self.shared, crate::screen::REPLAY_BYTES).await?;
        tokio::task::spawn_blocking(move || crate::screen::replay(id, size, &bytes, from))
            .await
            .map_err(|_| ProcError::Gone(id))
    }
}
