//! The daemon's domain facade: what the gRPC layer calls.
//!
//! [`Daemon`] holds the registry, the store, the search index, the agent
//! book, the holder and the shutdown token, all private: callers say what
//! they do (start, kill, read, follow, wait, search...) and the facade
//! brings the parts together. Multi-step mutations (start, kill, cleanup)
//! run in tracked tasks that the caller awaits, so a client that goes away
//! mid-call never leaves half-applied state (a started process that is not
//! registered, a cleanup that removed the entry but not the data).
//!
//! Here: the facade and starting, killing and forgetting processes.
//! `daemon/adopt.rs`: taking over what an earlier daemon left;
//! `daemon/supervise.rs`: restarting a failed run under its policy.

mod adopt;
mod supervise;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};
use tokio_util::task::TaskTracker;

use crate::agents::{AgentEvent, AgentState, Agents, Mode, WaitOutcome, WaitsForInput, signals};
use crate::config::Config;
use crate::domain::{Resize, RowStatus, StreamId, Transition};
use crate::error::DaemonError;
use crate::marks::Follower;
use crate::proc::actor::{self, ActorParts};
use crate::proc::holding::Holding;
use crate::proc::spawn::{self, Spawned};
use crate::proc::{
    EndReason, ProcError, ProcFacts, ProcHandle, ProcId, ProcSpec, ProcStatus, Run, Shared, Stdio,
    Supervision,
};
use crate::reads::{FollowFrom, FollowItem, ReadResult, ReadSpec};
use crate::registry::{ProcTarget, Registry};
use crate::search::{Answer, Search, SearchIndex};
use crate::sends::{Ledger, SendResult, SendSpec};
use crate::store::{
    LogHealth, NewProc, ProgramRecord, ProgramRow, StatusUpdate, Store, StoreError,
};
use crate::sys;
use crate::waits::{self, WaitContext, WaitSpec};

/// The daemon's state.
pub(crate) struct Daemon {
    config: Config,
    /// The log.
    store: Store,
    /// The log's full-text index.
    search: SearchIndex,
    /// Managed processes.
    registry: Registry,
    /// The holder: every program's parent, which outlives the daemon.
    holding: Arc<Holding>,
    /// Every task the daemon starts.
    tracker: TaskTracker,
    /// Cancelling it shuts the daemon down.
    shutdown: CancellationToken,
    /// Agent state.
    agents: Arc<Agents>,
    /// Remembered agent sends.
    ledger: Ledger,
    /// Wall-clock start, ns.
    started_at_ns: i64,
    /// Monotonic start.
    started: std::time::Instant,
    /// A release of free memory is scheduled (after cleanups).
    trim_scheduled: std::sync::atomic::AtomicBool,
    /// A checked live upgrade, carried out once serving has stopped.
    upgrade: std::sync::Mutex<Option<crate::upgrade::Plan>>,
}

/// The parts a daemon is made of, as `serve` prepared them.
pub(crate) struct Parts {
    pub(crate) config: Config,
    /// The log.
    pub(crate) store: Store,
    /// The log's full-text index.
    pub(crate) search: SearchIndex,
    /// The holder, connected.
    pub(crate) holding: Arc<Holding>,
    /// Where every task the daemon starts is tracked.
    pub(crate) tracker: TaskTracker,
    /// Cancelling it shuts the daemon down.
    pub(crate) shutdown: CancellationToken,
    /// The last agent transition's sequence number in the log.
    pub(crate) last_agent_seq: u64,
}

/// What GetInfo says about the daemon.
#[derive(Debug)]
pub(crate) struct DaemonInfo {
    /// The socket it serves.
    pub(crate) socket: PathBuf,
    /// Its database file.
    pub(crate) database: PathBuf,
    /// When it started (wall clock, ns).
    pub(crate) started_at_ns: i64,
    /// How long it has run.
    pub(crate) uptime: Duration,
    /// Processes it lists, running or ended.
    pub(crate) processes: usize,
    /// Of those, the running ones.
    pub(crate) running: usize,
    /// How the log is doing.
    pub(crate) log: LogHealth,
    /// The log kept per process and in total (bytes).
    pub(crate) log_limits: (u64, u64),
}

/// What an accepted upgrade tells the caller.
#[derive(Debug)]
pub(crate) struct UpgradeAccepted {
    /// The new binary's version.
    pub(crate) to_version: String,
    /// The new binary.
    pub(crate) binary: PathBuf,
    /// Programs running, all carried over.
    pub(crate) running: usize,
}

/// How long after a cleanup free memory is given back: cleanups come in
/// runs (an agent cleaning up a fleet), and one release after the run costs
/// a fraction of one per process.
const TRIM_DELAY: std::time::Duration = std::time::Duration::from_millis(250);

impl Daemon {
    /// A daemon of `parts`, with no process yet (see `load_dormant`).
    pub(crate) fn new(parts: Parts) -> Self {
        let Parts { config, store, search, holding, tracker, shutdown, last_agent_seq } = parts;
        Self {
            agents: Arc::new(Agents::new(store.clone(), last_agent_seq)),
            ledger: Ledger::default(),
            config,
            store,
            search,
            registry: Registry::default(),
            holding,
            tracker,
            shutdown,
            started_at_ns: sys::wall_ns(),
            started: std::time::Instant::now(),
            trim_scheduled: std::sync::atomic::AtomicBool::new(false),
            upgrade: std::sync::Mutex::new(None),
        }
    }

    /// Runs `f` to completion in a tracked task, even if the caller goes away.
    async fn detached<T, F>(self: &Arc<Self>, what: &'static str, f: F) -> Result<T, DaemonError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, ProcError>> + Send + 'static,
    {
        match self.tracker.spawn(f).await {
            Ok(done) => Ok(done?),
            Err(e) => {
                tracing::error!(what, error = %e, "a daemon task failed");
                Err(DaemonError::task(what, &e))
            }
        }
    }

    /// Checks `binary` (default: the one this daemon was started from) and,
    /// if it can take over, begins the handover: serving stops, every
    /// program is left with the holder, and `main` execs the new binary.
    /// Returns the plan's facts; on a refusal nothing changes.
    pub(crate) async fn upgrade(
        &self,
        binary: Option<PathBuf>,
    ) -> Result<UpgradeAccepted, DaemonError> {
        use crate::upgrade::Refused;
        let this = self.config.self_exec.clone().ok_or(Refused::NotSelfHosted)?;
        if self.lock_upgrade().is_some() || self.shutdown.is_cancelled() {
            return Err(Refused::Busy.into());
        }
        let plan =
            tokio::task::spawn_blocking(move || crate::upgrade::check(&this, binary.as_deref()))
                .await
                .map_err(|e| DaemonError::task("checking the new binary", &e))??;
        let mut slot = self.lock_upgrade();
        if slot.is_some() || self.shutdown.is_cancelled() {
            return Err(Refused::Busy.into());
        }
        let accepted = UpgradeAccepted {
            to_version: plan.readiness.version.clone(),
            binary: plan.binary.clone(),
            running: self.counts().1,
        };
        tracing::info!(
            binary = %plan.binary.display(),
            version = %plan.readiness.version,
            running = accepted.running,
            "upgrading in place: handing every program over"
        );
        *slot = Some(plan);
        drop(slot);
        // Readers stop first (at a chunk boundary), then serving ends and
        // every actor hands its program over instead of ending it.
        self.holding.detach_all();
        self.shutdown.cancel();
        Ok(accepted)
    }

    fn lock_upgrade(&self) -> std::sync::MutexGuard<'_, Option<crate::upgrade::Plan>> {
        self.upgrade.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The upgrade to carry out, once serving has stopped.
    pub(crate) fn take_upgrade(&self) -> Option<crate::upgrade::Plan> {
        self.lock_upgrade().take()
    }

    /// Records that `id` runs as `pid` (a start, or an adoption).
    async fn record_running(&self, id: crate::proc::ProcId, pid: u32) {
        let update = StatusUpdate {
            id,
            pid,
            status: RowStatus::Running,
            exit_code: None,
            exit_signal: None,
            ended_at_ns: None,
        };
        if let Err(e) = self.store.update_status(update).await {
            tracing::warn!(proc = %id, error = %e, "cannot record the pid");
        }
    }

    /// Stops the daemon: serving ends, then every program (the Shutdown rpc).
    pub(crate) fn stop(&self) {
        self.shutdown.cancel();
    }

    /// Resolves once the daemon stops (or hands over).
    pub(crate) fn stopped(&self) -> WaitForCancellationFuture<'_> {
        self.shutdown.cancelled()
    }

    /// Whether the daemon hands its programs over (a live upgrade).
    pub(crate) fn is_handing_over(&self) -> bool {
        self.holding.is_detaching()
    }

    /// Runs `task` as one of the daemon's own: shutdown waits for it.
    pub(crate) fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(task)
    }

    /// The agent book.
    pub(crate) fn agents(&self) -> &Agents {
        &self.agents
    }

    /// Longest a single wait may block (see [`Config::wait_ceiling`]).
    pub(crate) fn wait_ceiling(&self) -> Duration {
        self.config.wait_ceiling
    }

    /// What GetInfo says about the daemon.
    pub(crate) fn info(&self) -> DaemonInfo {
        let (processes, running) = self.counts();
        DaemonInfo {
            socket: self.config.socket.clone(),
            database: self.config.database(),
            started_at_ns: self.started_at_ns,
            uptime: self.started.elapsed(),
            processes,
            running,
            log: self.store.health(),
            log_limits: (self.config.retention.per_process, self.config.retention.total),
        }
    }

    /// Every process, running or ended.
    pub(crate) fn list(&self) -> Vec<ProcHandle> {
        self.registry.list()
    }

    /// Looks a process up without counting it as client activity (a name a
    /// search resolves, the process beside an agent's record).
    pub(crate) fn lookup(&self, target: &ProcTarget) -> Result<ProcHandle, ProcError> {
        self.registry.get(target)
    }

    /// Wakes a follower whenever a process changes (see `changes`).
    pub(crate) fn follow_changes(&self) -> Follower {
        self.registry.changes().follow()
    }

    /// A paged read of a process's log.
    pub(crate) async fn read(
        &self,
        h: &ProcHandle,
        spec: ReadSpec,
    ) -> Result<ReadResult, ProcError> {
        crate::reads::read(h, &self.store, spec).await
    }

    /// Follows a process's output from `from`: history, then live, each
    /// byte once, until it ends or the daemon stops.
    pub(crate) fn follow(
        &self,
        h: ProcHandle,
        streams: Vec<StreamId>,
        from: FollowFrom,
    ) -> mpsc::Receiver<Result<FollowItem, ProcError>> {
        crate::reads::follow(
            h,
            self.store.clone(),
            streams,
            from,
            self.shutdown.clone(),
            &self.tracker,
        )
    }

    /// Searches the log.
    pub(crate) async fn search(&self, spec: Search) -> Result<Answer, StoreError> {
        self.search.search(&self.store, spec).await
    }

    /// For each of a process's `(stream, start)` spans: the bytes the log
    /// keeps of it, and where its stored part ends.
    pub(crate) async fn stored_bytes(
        &self,
        id: ProcId,
        spans: Vec<(StreamId, u64)>,
    ) -> Result<Vec<(u64, u64)>, StoreError> {
        self.store.read(move |c| crate::store::stored_bytes(c, id, &spans)).await
    }

    /// A PTY process's resizes, oldest first.
    pub(crate) async fn resizes(&self, id: ProcId) -> Result<Vec<Resize>, StoreError> {
        self.store.read(move |c| crate::store::resizes(c, id)).await
    }

    /// Agent transitions after `cursor`: every one the book's ring still
    /// holds, or else up to `page` of them from the log; `true` when they
    /// are every one there is.
    pub(crate) async fn agent_transitions_after(
        &self,
        cursor: u64,
        page: usize,
    ) -> Result<(Vec<Transition>, bool), StoreError> {
        let (ring, complete) = self.agents.transitions_after(cursor);
        if complete {
            return Ok((ring, true));
        }
        let logged =
            self.store.read(move |c| crate::store::agent_events_after(c, cursor, page)).await?;
        Ok((logged, false))
    }

    /// The context a wait runs in: the log, the daemon's stop, its tasks.
    fn wait_context(&self) -> WaitContext<'_> {
        WaitContext { store: &self.store, cancel: &self.shutdown, tracker: &self.tracker }
    }

    /// Waits on one process (see `waits`).
    pub(crate) async fn wait(
        &self,
        h: &ProcHandle,
        spec: WaitSpec,
    ) -> Result<waits::WaitOutcome, ProcError> {
        waits::wait(h, &self.wait_context(), spec).await
    }

    /// Writes `input` (and Enter) to one process and waits for its result.
    pub(crate) async fn run(
        &self,
        h: &ProcHandle,
        spec: WaitSpec,
        input: &str,
        enter: bool,
    ) -> Result<waits::WaitOutcome, ProcError> {
        waits::run(h, &self.wait_context(), spec, input, enter).await
    }

    /// Waits for agents to reach one of `states` (every one, or the first).
    pub(crate) async fn wait_agents(
        &self,
        ids: &[ProcId],
        states: &[AgentState],
        mode: Mode,
        timeout: Duration,
        at_input: WaitsForInput<'_>,
    ) -> Vec<WaitOutcome> {
        let agents = &self.agents;
        crate::agents::wait_fleet(agents, ids, states, mode, timeout, &self.shutdown, at_input)
            .await
    }

    /// Sends a prompt to one agent once it is ready (see `sends`).
    pub(crate) async fn send_to_agent(&self, h: &ProcHandle, spec: &SendSpec) -> SendResult {
        crate::sends::send_one(&self.agents, &self.ledger, h, spec, &self.shutdown).await
    }

    /// Waits until everything recorded so far is committed, so what a
    /// client is shown next (byte counts, statuses, exit codes) survives a
    /// crash. A store that cannot commit is logged, not fatal: the answer is
    /// still worth giving.
    pub(crate) async fn durable(&self) {
        if let Err(e) = self.store.flush().await {
            tracing::debug!(error = %e, "the store did not confirm a commit");
        }
    }

    /// Looks a process up and records client activity on it.
    pub(crate) fn get(&self, target: &ProcTarget) -> Result<ProcHandle, ProcError> {
        let handle = self.registry.get(target)?;
        handle.shared.touch();
        Ok(handle)
    }

    /// Starts a process.
    pub(crate) async fn start(
        self: &Arc<Self>,
        spec: ProcSpec,
        replace_ended: bool,
    ) -> Result<ProcHandle, DaemonError> {
        let this = Arc::clone(self);
        let handle = self
            .detached("starting the process", async move {
                this.start_inner(spec, replace_ended, Run::default()).await
            })
            .await?;
        self.supervise(&handle);
        Ok(handle)
    }

    async fn start_inner(
        &self,
        spec: ProcSpec,
        replace_ended: bool,
        run: Run,
    ) -> Result<ProcHandle, ProcError> {
        if self.shutdown.is_cancelled() {
            return Err(ProcError::ShuttingDown);
        }
        let reservation = self.registry.reserve(
            spec.name.as_deref(),
            self.config.max_processes,
            replace_ended,
        )?;
        let (mode, size) = match spec.stdio {
            Stdio::Pty(s) => ("pty", Some((s.rows, s.cols))),
            Stdio::Pipes => ("pipes", None),
        };
        let env_json = serde_json::to_string(&spec.env).unwrap_or_else(|_| "{}".into());
        let started_at_ns = sys::wall_ns();
        let row = NewProc {
            name: spec.name.clone(),
            command: spec.command.clone(),
            args: spec.args.clone(),
            cwd: spec.cwd.to_string_lossy().into_owned(),
            env_json,
            mode,
            size,
            timeout_ms: spec
                .idle_timeout
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            started_at_ns,
            supervision: (spec.restart.is_some() || run != Run::default()).then(|| {
                serde_json::to_string(&Supervision { policy: spec.restart, run })
                    .unwrap_or_default()
            }),
        };
        let began = std::time::Instant::now();
        let id = self.store.create_proc(row).await?;
        let created = began.elapsed();
        let token = sys::random_hex(16).map_err(|source| ProcError::Io {
            id,
            op: "generating a session token",
            source,
        })?;
        let env = spawn::child_env(&spec, id, &token, &self.config.socket);
        let holding = Arc::clone(&self.holding);
        let spawn_spec = spec.clone();
        let spawned =
            tokio::task::spawn_blocking(move || spawn::spawn(id, &spawn_spec, &env, &holding))
                .await
                .map_err(|e| ProcError::Io {
                    id,
                    op: "spawn",
                    source: std::io::Error::other(e.to_string()),
                })
                .and_then(|r| r);
        let spawned = match spawned {
            Ok(s) => s,
            Err(e) => {
                // A failed start leaves nothing: no row, no process, no name.
                if let Err(del) = self.store.delete(id).await {
                    tracing::warn!(proc = %id, error = %del, "cannot remove the row of a failed start");
                }
                return Err(e);
            }
        };
        let pid = spawned.pid;
        let spawned_at = began.elapsed();
        self.record_running(id, pid).await;
        let recorded = began.elapsed();
        let facts = ProcFacts {
            id,
            shell_integration: spawn::wants_shell_integration(&spec),
            token,
            spec,
            pid,
            started_at_ns,
            run,
        };
        let shared = Shared::new(self.registry.changes().clone());
        let parts = self.actor_parts(facts, spawned, shared, None, (0, None));
        let is_pty = matches!(parts.facts.spec.stdio, Stdio::Pty(_));
        let agent = is_pty
            .then(|| {
                signals::identify(
                    &std::iter::once(parts.facts.spec.command.clone())
                        .chain(parts.facts.spec.args.iter().cloned())
                        .collect::<Vec<_>>(),
                    None,
                )
            })
            .flatten();
        if is_pty {
            self.agents.register(id);
        }
        let handle = actor::start(parts, &self.tracker)?;
        self.store.track(handle.id(), handle.history_starts());
        if let Some((name, kind)) = agent {
            // The program itself is an agent: known from the start.
            self.agents.apply(id, AgentEvent::Discovered { name, kind, pid, job: None });
        }
        if let Some(old) = reservation.fill(handle.clone()) {
            // The ended run keeps its record; its name now names this one.
            old.shared.replaced_by.store(id.0, std::sync::atomic::Ordering::Release);
            old.shared.changes.changed();
            if let Err(e) = self.store.replaced(old.id(), id).await {
                tracing::warn!(proc = %old.id(), error = %e, "cannot record that its name was taken over");
            }
        }
        // Where a start's time goes, for the benchmark's start-time row.
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        tracing::info!(
            proc = %id,
            pid,
            command = %handle.facts.spec.command,
            row_ms = ms(created),
            spawn_ms = ms(spawned_at - created),
            record_ms = ms(recorded - spawned_at),
            total_ms = ms(began.elapsed()),
            "process started"
        );
        Ok(handle)
    }

    /// What an actor starts from: the process's facts, its started program,
    /// its counters, and what an earlier daemon left of its screen and marks;
    /// the rest is the daemon's.
    fn actor_parts(
        &self,
        facts: ProcFacts,
        spawned: Spawned,
        shared: Shared,
        screen_seed: Option<(Vec<u8>, u64)>,
        carried_marks: (u64, Option<u64>),
    ) -> ActorParts {
        ActorParts {
            facts,
            spawned,
            store: self.store.clone(),
            cancel: self.shutdown.child_token(),
            kill_grace: self.config.kill_grace,
            #[cfg(feature = "fault-injection")]
            fault_injection: self.config.fault_injection,
            agents: Arc::clone(&self.agents),
            kernel_input_state: self.config.kernel_input_state,
            shared,
            screen_seed,
            carried_marks,
        }
    }

    /// Kills a process tree and waits until it ended.
    pub(crate) async fn kill(
        self: &Arc<Self>,
        target: &ProcTarget,
    ) -> Result<ProcHandle, DaemonError> {
        let handle = self.get(target)?;
        // A failed run waiting for its restart: the kill is of the restart.
        if !handle.status().is_running()
            && handle.facts.spec.restart.is_some()
            && handle.shared.replaced_by.load(std::sync::atomic::Ordering::Acquire) == 0
        {
            handle.shared.no_restart.store(true, std::sync::atomic::Ordering::Release);
            handle.shared.restart_due_ns.store(0, std::sync::atomic::Ordering::Release);
            handle.shared.changes.changed();
            return Ok(handle);
        }
        let h = handle.clone();
        self.detached("killing the process", async move { h.kill(EndReason::Killed).await })
            .await?;
        Ok(handle)
    }

    /// Kills every running process; returns their ids.
    pub(crate) async fn kill_all(self: &Arc<Self>) -> Result<Vec<ProcId>, DaemonError> {
        let running: Vec<ProcHandle> =
            self.registry.list().into_iter().filter(|h| h.status().is_running()).collect();
        self.detached("killing every process", async move {
            let kills = running.iter().map(|h| h.kill(EndReason::Killed));
            let results = futures::future::join_all(kills).await;
            let mut ids = Vec::new();
            for (h, r) in running.iter().zip(results) {
                match r {
                    Ok(ProcStatus::Ended { reason: EndReason::Killed, .. }) => ids.push(h.id()),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(proc = %h.id(), error = %e, "kill failed"),
                }
            }
            Ok(ids)
        })
        .await
    }

    /// Forgets a finished process: registry entry, log and screen.
    pub(crate) async fn cleanup(
        self: &Arc<Self>,
        target: &ProcTarget,
    ) -> Result<ProcId, DaemonError> {
        let handle = self.registry.get(target)?;
        if handle.status().is_running() {
            return Err(ProcError::StillRunning(handle.id()).into());
        }
        let id = handle.id();
        let this = Arc::clone(self);
        self.detached("cleaning up the process", async move {
            this.registry.remove(id);
            this.agents.remove(id);
            this.store.delete(id).await?;
            this.schedule_trim();
            Ok(id)
        })
        .await
    }

    /// Gives free memory back to the kernel shortly after a run of cleanups
    /// (the process's actor, threads and buffers are gone by then).
    fn schedule_trim(self: &Arc<Self>) {
        use std::sync::atomic::Ordering;
        if self.trim_scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = Arc::clone(self);
        self.tracker.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(TRIM_DELAY) => {}
                () = this.shutdown.cancelled() => return,
            }
            this.trim_scheduled.store(false, Ordering::Release);
            let _ = tokio::task::spawn_blocking(sys::release_free_memory).await;
        });
    }

    /// Looks a program up in the registry.
    pub(crate) async fn program_query(
        &self,
        program: String,
    ) -> Result<Option<ProgramRow>, ProcError> {
        Ok(self.store.read(move |c| crate::store::load_program(c, &program)).await?)
    }

    /// Records a registry conclusion.
    pub(crate) async fn program_record(
        self: &Arc<Self>,
        program: String,
        needs_pty: bool,
        notes: Option<String>,
    ) -> Result<ProgramRow, DaemonError> {
        let store = self.store.clone();
        let rec = ProgramRecord { program, needs_pty, notes, at_ns: sys::wall_ns() };
        self.detached("recording the program", async move { Ok(store.record_program(rec).await?) })
            .await
    }

    /// Counts of processes: (all, running).
    pub(crate) fn counts(&self) -> (usize, usize) {
        let all = self.registry.list();
        let running = all.iter().filter(|h| h.status().is_running()).count();
        (all.len(), running)
    }
}
