//! The daemon's domain facade: what the gRPC layer calls.
//!
//! [`Daemon`] holds the registry, the store, the spawn bookkeeping and the
//! shutdown tokens. Multi-step mutations (start, kill, cleanup) run in tracked
//! tasks that the caller awaits, so a client that goes away mid-call never
//! leaves half-applied state (a started process that is not registered, a
//! cleanup that removed the entry but not the data).

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agents::{AgentEvent, signals};
use crate::config::Config;
use crate::domain::RowStatus;
use crate::error::DaemonError;
use crate::marks::ChangeHub;
use crate::proc::actor::{self, ActorParts};
use crate::proc::handover::Carried;
use crate::proc::holding::Holding;
use crate::proc::spawn;
use crate::proc::{
    EndReason, ProcError, ProcFacts, ProcHandle, ProcId, ProcSpec, ProcStatus, Run, Stdio,
    Supervision,
};
use crate::registry::{ProcTarget, Registry};
use crate::store::{NewProc, ProgramRecord, ProgramRow, StatusUpdate, Store};
use crate::sys;

/// The daemon's state.
pub(crate) struct Daemon {
    /// Settings.
    pub(crate) config: Config,
    /// The log.
    pub(crate) store: Store,
    /// The log's full-text index.
    pub(crate) search: crate::search::SearchIndex,
    /// Managed processes.
    pub(crate) registry: Registry,
    /// Pids spawned and not yet reaped.
    pub(crate) holding: Arc<Holding>,
    /// Every task the daemon starts.
    pub(crate) tracker: TaskTracker,
    /// Cancelling it shuts the daemon down.
    pub(crate) shutdown: CancellationToken,
    /// Agent state.
    pub(crate) agents: Arc<crate::agents::Agents>,
    /// Remembered agent sends.
    pub(crate) ledger: crate::sends::Ledger,
    /// Wall-clock start, ns.
    pub(crate) started_at_ns: i64,
    /// Monotonic start.
    pub(crate) started: std::time::Instant,
    /// A release of free memory is scheduled (after cleanups).
    pub(crate) trim_scheduled: std::sync::atomic::AtomicBool,
    /// A checked live upgrade, carried out once serving has stopped.
    pub(crate) upgrade: std::sync::Mutex<Option<crate::upgrade::Plan>>,
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

/// Adoptions at once when a daemon starts: enough to keep both cores and
/// the store busy, few enough that their threads and log reads do not
/// crowd each other out.
const ADOPT_CONCURRENCY: usize = 16;

/// How much of a PTY program's log rebuilds its screen when it is adopted
/// after a crash: a few screenfuls of a busy TUI, parsed in milliseconds
/// (lines that scroll away unseen are skipped), for each program adopted.
const ADOPT_SCREEN_BYTES: u64 = 256 << 10;

/// How long after a cleanup free memory is given back: cleanups come in
/// runs (an agent cleaning up a fleet), and one release after the run costs
/// a fraction of one per process.
const TRIM_DELAY: std::time::Duration = std::time::Duration::from_millis(250);

impl Daemon {
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

    /// Registers the processes an earlier daemon left in the database. Those
    /// it was running that the holder still holds (`held`) are adopted: an
    /// actor takes them over where their log ends. The others it was running
    /// are `lost`; all keep their logs and ids. What the holder holds that
    /// the database does not know as running is stopped and let go.
    /// Returns (processes listed, processes adopted).
    pub(crate) async fn load_dormant(
        &self,
        held: Vec<portal_holder::client::Adoptable>,
    ) -> Result<(usize, usize), ProcError> {
        let mut held: std::collections::HashMap<u64, _> =
            held.into_iter().map(|a| (a.held.proc_id, a)).collect();
        let rows = self.store.read(crate::store::load_procs).await?;
        let n = rows.len();
        // The store marks what was running `lost` when it opens; the holder
        // still holding it proves otherwise. Adoptions run a few at a time
        // (each starts threads and reads the log): a daemon replaced with a
        // thousand programs serves again in a fraction of the time.
        let mut dormant = Vec::new();
        let mut to_adopt = Vec::new();
        for r in rows {
            let running = matches!(r.status, RowStatus::Running | RowStatus::Lost);
            match held.remove(&r.id.0) {
                Some(a) if running => to_adopt.push((r, a)),
                Some(a) => {
                    held.insert(r.id.0, a);
                    dormant.push(r);
                }
                None => dormant.push(r),
            }
        }
        let adoptions =
            futures::StreamExt::collect::<Vec<_>>(futures::StreamExt::buffer_unordered(
                futures::stream::iter(to_adopt.into_iter().map(|(r, a)| async move {
                    let adopted = self.adopt(&r, a).await;
                    (r, adopted)
                })),
                ADOPT_CONCURRENCY,
            ))
            .await;
        // Running when the last daemon went, and not held: their holder
        // died, and them with it. What they left (their session, their
        // lineage, reparented to init) is killed, and they are recorded as
        // ended by that, never listed as if they might still run.
        let orphaned: Vec<(crate::proc::ProcId, u32)> = dormant
            .iter()
            .filter(|r| {
                matches!(r.status, RowStatus::Running | RowStatus::Lost) && r.ended_at_ns.is_none()
            })
            .map(|r| (r.id, r.pid))
            .collect();
        let lineages: Vec<sys::Lineage> = orphaned
            .iter()
            .map(|(id, _)| sys::Lineage::of_process(&self.config.socket, id.0))
            .collect();
        if !lineages.is_empty() {
            let killed = tokio::task::spawn_blocking(move || sys::kill_carriers(&lineages))
                .await
                .unwrap_or(0);
            tracing::warn!(
                programs = orphaned.len(),
                killed,
                "programs whose portal-holder died: what they left was killed"
            );
        }
        let now = sys::wall_ns();
        let orphaned_ids: std::collections::HashSet<_> =
            orphaned.iter().map(|(id, _)| *id).collect();
        for &(id, pid) in &orphaned {
            let update = StatusUpdate {
                id,
                pid,
                status: RowStatus::Ended(EndReason::HolderLost),
                exit_code: None,
                exit_signal: None,
                ended_at_ns: Some(now),
            };
            if let Err(e) = self.store.update_status(update).await {
                tracing::warn!(proc = %id, error = %e, "cannot record that the holder died");
            }
        }
        let mut adopted = 0;
        for (r, result) in adoptions {
            match result {
                Ok(()) => adopted += 1,
                Err(e) => {
                    tracing::warn!(proc = %r.id, error = %e, "cannot adopt the process; it is lost");
                    dormant.push(r);
                }
            }
        }
        for r in dormant {
            let status = match r.status {
                RowStatus::Ended(reason) => ProcStatus::Ended {
                    reason,
                    exit: sys::ExitInfo { code: r.exit_code, signal: r.exit_signal },
                    at_ns: r.ended_at_ns.unwrap_or(r.started_at_ns),
                },
                RowStatus::Running | RowStatus::Lost if orphaned_ids.contains(&r.id) => {
                    ProcStatus::Ended {
                        reason: EndReason::HolderLost,
                        exit: sys::ExitInfo { code: None, signal: None },
                        at_ns: now,
                    }
                }
                // Running when the last daemon wrote it, then its actor
                // panicked or its adoption failed: its fate is unknown.
                RowStatus::Running | RowStatus::Lost => ProcStatus::Lost,
            };
            let shared = shared_of(&r, self.registry.changes());
            let size = r.size.map(|(rows, cols)| crate::proc::TermSize { rows, cols });
            let supervision = supervision_of(&r);
            let spec = ProcSpec {
                command: r.command,
                args: r.args,
                cwd: PathBuf::from(r.cwd),
                env: r.env,
                // Never stored: a program started by an earlier daemon
                // restarts in this daemon's environment plus its `env`.
                env_from: crate::proc::EnvFrom::Daemon,
                name: r.name,
                idle_timeout: (r.timeout_ms > 0)
                    .then(|| std::time::Duration::from_millis(r.timeout_ms)),
                stdio: size.map_or(Stdio::Pipes, Stdio::Pty),
                restart: supervision.policy,
            };
            let facts = ProcFacts {
                id: r.id,
                spec,
                pid: r.pid,
                started_at_ns: r.started_at_ns,
                shell_integration: false,
                token: String::new(),
                run: supervision.run,
            };
            shared.touch();
            let handle = ProcHandle::dormant(facts, shared, status, size, self.store.clone());
            self.store.track(handle.id(), handle.history_starts());
            self.registry.insert_dormant(handle);
        }
        for (id, left) in held {
            let id = crate::proc::ProcId(id);
            if left.held.exit.is_none() {
                let lineage = sys::Lineage::daemon(&self.config.socket, self.holding.holder_pid());
                let pid = left.held.pid;
                let _ = tokio::task::spawn_blocking(move || {
                    sys::kill_tree(pid, Some(&lineage), libc::SIGKILL)
                })
                .await;
            }
            self.holding.release(id);
            tracing::info!(proc = %id, "stopped a held program the database does not know as running");
        }
        Ok((n, adopted))
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

    /// Takes over a program an earlier daemon was running: its row's spec
    /// and counters, the holder's descriptors, a fresh actor.
    async fn adopt(
        &self,
        r: &crate::store::StoredProc,
        a: portal_holder::client::Adoptable,
    ) -> Result<(), ProcError> {
        let size = r.size.map(|(rows, cols)| crate::proc::TermSize { rows, cols });
        let supervision = supervision_of(r);
        let spec = ProcSpec {
            command: r.command.clone(),
            args: r.args.clone(),
            cwd: PathBuf::from(&r.cwd),
            env: r.env.clone(),
            env_from: crate::proc::EnvFrom::Daemon,
            name: r.name.clone(),
            idle_timeout: (r.timeout_ms > 0)
                .then(|| std::time::Duration::from_millis(r.timeout_ms)),
            stdio: size.map_or(Stdio::Pipes, Stdio::Pty),
            restart: supervision.policy,
        };
        let carried = Carried::parse(&a.held.meta);
        let token = carried.token.clone().unwrap_or_default();
        let pid = a.held.pid;
        let id = r.id;
        let (socket, holding) = (self.config.socket.clone(), Arc::clone(&self.holding));
        let ends = r.ends;
        let mut spawned =
            tokio::task::spawn_blocking(move || spawn::adopt(id, a, &socket, &holding, ends))
                .await
                .map_err(|e| ProcError::Io {
                    id,
                    op: "adopt",
                    source: std::io::Error::other(e.to_string()),
                })??;
        // The log ends where the last daemon committed; its journal says
        // where the program really is. What lies between is logged from
        // the journal (or marked lost with its size) before new output.
        let shared = shared_of(r, self.registry.changes());
        if let Some(snap) = spawned.recovered.take()
            && crate::proc::journal::continue_log(id, &snap, &shared, &self.store).await
            && let Err(e) = self.store.flush().await
        {
            tracing::warn!(proc = %id, error = %e, "cannot commit what the last daemon read");
        }
        let is_pty = matches!(spec.stdio, Stdio::Pty(_));
        if let Some(cursors) = carried.cursors {
            let ends = shared.ends();
            let mut mine = shared.cursors();
            for i in 0..3 {
                mine[i] = cursors[i].min(ends[i]);
            }
        }
        // The screen is rebuilt from the log's tail (a crash carries none,
        // and an upgrade does not carry it: see `handover.rs`).
        let screen_seed = if is_pty { self.log_tail(id, &shared).await } else { None };
        if let Some(size) = size {
            // Before it serves: `agents`, sends and waits see it at once.
            let argv = std::iter::once(spec.command.clone()).chain(spec.args.iter().cloned());
            let adopted = crate::agents::rebuild::Adopted {
                id,
                pid,
                argv: argv.collect(),
                size,
                carried: carried.agent.clone(),
                screen: screen_seed.clone(),
            };
            self.agents.rebuild(adopted).await;
        }
        let parts = ActorParts {
            facts: ProcFacts {
                id,
                shell_integration: spawn::wants_shell_integration(&spec),
                token,
                spec,
                pid,
                started_at_ns: r.started_at_ns,
                run: supervision.run,
            },
            agents: Arc::clone(&self.agents),
            spawned,
            store: self.store.clone(),
            cancel: self.shutdown.child_token(),
            kill_grace: self.config.kill_grace,
            #[cfg(feature = "fault-injection")]
            fault_injection: self.config.fault_injection,
            kernel_input_state: self.config.kernel_input_state,
            shared,
            screen_seed,
            carried_marks: (carried.prompt_marks, carried.last_osc_seq),
        };
        let handle = actor::start(parts, &self.tracker)?;
        self.store.track(handle.id(), handle.history_starts());
        self.registry.insert_dormant(handle);
        self.record_running(id, pid).await;
        tracing::info!(proc = %id, pid, "adopted a process an earlier daemon was running");
        Ok(())
    }

    /// The last [`ADOPT_SCREEN_BYTES`] of a PTY program's output and the
    /// offset where they end (what a screen fed with them reflects), to
    /// rebuild its screen when it is adopted.
    async fn log_tail(
        &self,
        id: crate::proc::ProcId,
        shared: &crate::proc::Shared,
    ) -> Option<(Vec<u8>, u64)> {
        let tail = crate::proc::output_tail(&self.store, id, shared, ADOPT_SCREEN_BYTES).await;
        tail.ok().map(|(bytes, _, end)| (bytes, end))
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

    /// Watches a process with a restart policy, and each run that follows
    /// it: a failed run is started again under its name after the policy's
    /// backoff, until the policy's limit. A kill, an idle timeout or the
    /// daemon stopping ends the watch; so does the name being taken over
    /// meanwhile.
    pub(crate) fn supervise(self: &Arc<Self>, handle: &ProcHandle) {
        let Some(policy) = handle.facts.spec.restart else { return };
        let this = Arc::clone(self);
        let mut current = handle.clone();
        self.tracker.spawn(async move {
            loop {
                let mut state = current.state.clone();
                let ended = tokio::select! {
                    s = state.wait_for(|p| !matches!(p.status, ProcStatus::Running)) => match s {
                        Ok(p) => p.status,
                        Err(_) => return,
                    },
                    () = this.shutdown.cancelled() => return,
                };
                let run = current.facts.run;
                match restart_after(ended, run, policy) {
                    Restart::No => return,
                    Restart::LimitReached => {
                        tracing::warn!(proc = %current.id(), restarts = run.restarts, "failed again; its restart limit is reached");
                        return;
                    }
                    Restart::Yes => {}
                }
                if current.shared.no_restart.load(std::sync::atomic::Ordering::Acquire) {
                    return;
                }
                let wait = policy.backoff(run.restarts);
                let due = sys::monotonic_ns()
                    .saturating_add(i64::try_from(wait.as_nanos()).unwrap_or(i64::MAX));
                current.shared.restart_due_ns.store(due, std::sync::atomic::Ordering::Release);
                current.shared.changes.changed();
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = this.shutdown.cancelled() => return,
                }
                current.shared.restart_due_ns.store(0, std::sync::atomic::Ordering::Release);
                // Someone took the name over meanwhile (an `up`, a start):
                // theirs wins; or a kill (`down`) cancelled the restart.
                if current.shared.replaced_by.load(std::sync::atomic::Ordering::Acquire) != 0
                    || current.shared.no_restart.load(std::sync::atomic::Ordering::Acquire)
                {
                    return;
                }
                let next = Run { restarts: run.restarts + 1, restart_of: Some(current.id().0) };
                match this.start_inner(current.facts.spec.clone(), true, next).await {
                    Ok(h) => {
                        tracing::info!(proc = %h.id(), of = %current.id(), restarts = next.restarts, "restarted after a failure");
                        current = h;
                    }
                    Err(e) => {
                        tracing::warn!(proc = %current.id(), error = %e, "cannot restart it");
                        return;
                    }
                }
            }
        });
    }

    /// Supervises again what an earlier daemon supervised (after
    /// `load_dormant`).
    pub(crate) fn supervise_adopted(self: &Arc<Self>) {
        for h in self.registry.list() {
            if matches!(h.published().status, ProcStatus::Running) {
                self.supervise(&h);
            }
        }
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
        let parts = ActorParts {
            facts: ProcFacts {
                id,
                shell_integration: spawn::wants_shell_integration(&spec),
                token,
                spec,
                pid,
                started_at_ns,
                run,
            },
            agents: Arc::clone(&self.agents),
            spawned,
            store: self.store.clone(),
            cancel: self.shutdown.child_token(),
            kill_grace: self.config.kill_grace,
            #[cfg(feature = "fault-injection")]
            fault_injection: self.config.fault_injection,
            kernel_input_state: self.config.kernel_input_state,
            shared: crate::proc::Shared::new(self.registry.changes().clone()),
            screen_seed: None,
            carried_marks: (0, None),
        };
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

    /// Socket path.
    pub(crate) fn socket(&self) -> PathBuf {
        self.config.socket.clone()
    }

    /// Counts of processes: (all, running).
    pub(crate) fn counts(&self) -> (usize, usize) {
        let all = self.registry.list();
        let running = all.iter().filter(|h| h.status().is_running()).count();
        (all.len(), running)
    }
}

/// Whether a run that ended so is started again.
#[derive(Debug, PartialEq, Eq)]
enum Restart {
    Yes,
    No,
    LimitReached,
}

/// The restart decision: only a failure (an exit status other than 0, or
/// a signal, the program's own doing) counts; a kill through Portal, an
/// idle timeout, a shutdown or a loss does not.
fn restart_after(ended: ProcStatus, run: Run, policy: crate::proc::RestartPolicy) -> Restart {
    let ProcStatus::Ended { reason: EndReason::Exited, exit, .. } = ended else {
        return Restart::No;
    };
    if exit.code == Some(0) && exit.signal.is_none() {
        return Restart::No;
    }
    if run.restarts >= policy.max_restarts { Restart::LimitReached } else { Restart::Yes }
}

/// A row's supervision (none for a row without one, or unreadable).
fn supervision_of(r: &crate::store::StoredProc) -> Supervision {
    r.supervision.as_deref().and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default()
}

/// A process's counters and offsets as its row stored them; its "read new"
/// positions at the ends (what came before is not new to anyone now).
fn shared_of(r: &crate::store::StoredProc, changes: &ChangeHub) -> crate::proc::Shared {
    let shared = crate::proc::Shared::new(changes.clone());
    if let Some(by) = r.replaced_by {
        shared.replaced_by.store(by.0, std::sync::atomic::Ordering::Release);
    }
    for i in 0..3 {
        shared.end[i].store(r.ends[i], std::sync::atomic::Ordering::Release);
        shared.start[i].store(r.starts[i], std::sync::atomic::Ordering::Release);
        shared.chunks[i].store(r.chunks[i], std::sync::atomic::Ordering::Release);
    }
    *shared.cursors() = r.ends;
    shared
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proc::RestartPolicy;

    #[test]
    fn only_a_failure_under_the_limit_restarts() {
        let policy = RestartPolicy { max_restarts: 2, backoff_ms: 10 };
        let ended = |reason, code, signal| ProcStatus::Ended {
            reason,
            exit: sys::ExitInfo { code, signal },
            at_ns: 0,
        };
        let first = Run::default();
        assert_eq!(
            restart_after(ended(EndReason::Exited, Some(3), None), first, policy),
            Restart::Yes
        );
        assert_eq!(
            restart_after(ended(EndReason::Exited, None, Some(11)), first, policy),
            Restart::Yes
        );
        assert_eq!(
            restart_after(ended(EndReason::Exited, Some(0), None), first, policy),
            Restart::No
        );
        for reason in
            [EndReason::Killed, EndReason::TimedOut, EndReason::Stopped, EndReason::HolderLost]
        {
            assert_eq!(restart_after(ended(reason, None, Some(9)), first, policy), Restart::No);
        }
        assert_eq!(restart_after(ProcStatus::Lost, first, policy), Restart::No);
        let last = Run { restarts: 2, restart_of: Some(4) };
        assert_eq!(
            restart_after(ended(EndReason::Exited, Some(1), None), last, policy),
            Restart::LimitReached
        );
        assert_eq!(policy.backoff(0), std::time::Duration::from_millis(10));
        assert_eq!(policy.backoff(3), std::time::Duration::from_millis(80));
        assert_eq!(policy.backoff(30), crate::proc::MAX_BACKOFF);
    }
}
