//! Taking over what an earlier daemon left: its processes in the database
//! are listed again, and the programs the holder still holds are adopted
//! (a fresh actor continues each where its log ends); the others are
//! recorded as ended or lost, their logs kept.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::Daemon;
use crate::domain::RowStatus;
use crate::marks::ChangeHub;
use crate::proc::actor;
use crate::proc::handover::Carried;
use crate::proc::spawn;
use crate::proc::{
    EndReason, EnvFrom, ProcError, ProcFacts, ProcHandle, ProcSpec, ProcStatus, Run, Shared, Stdio,
    Supervision, TermSize,
};
use crate::store::{StatusUpdate, StoredProc};
use crate::sys;

/// Adoptions at once when a daemon starts: enough to keep both cores and
/// the store busy, few enough that their threads and log reads do not
/// crowd each other out.
const ADOPT_CONCURRENCY: usize = 16;

/// How much of a PTY program's log rebuilds its screen when it is adopted
/// after a crash: a few screenfuls of a busy TUI, parsed in milliseconds
/// (lines that scroll away unseen are skipped), for each program adopted.
const ADOPT_SCREEN_BYTES: u64 = 256 << 10;

impl Daemon {
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
            let (spec, run) = spec_of(&r);
            let size = spec.stdio.size();
            let facts = ProcFacts {
                id: r.id,
                spec,
                pid: r.pid,
                started_at_ns: r.started_at_ns,
                shell_integration: false,
                token: String::new(),
                run,
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
            self.holding.released(id).await;
            tracing::info!(proc = %id, "stopped a held program the database does not know as running");
        }
        Ok((n, adopted))
    }

    /// Takes over a program an earlier daemon was running: its row's spec
    /// and counters, the holder's descriptors, a fresh actor.
    async fn adopt(
        &self,
        r: &StoredProc,
        a: portal_holder::client::Adoptable,
    ) -> Result<(), ProcError> {
        let (spec, run) = spec_of(r);
        let size = spec.stdio.size();
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
        let facts = ProcFacts {
            id,
            shell_integration: spawn::wants_shell_integration(&spec),
            token,
            spec,
            pid,
            started_at_ns: r.started_at_ns,
            run,
        };
        let marks = (carried.prompt_marks, carried.last_osc_seq);
        let parts = self.actor_parts(facts, spawned, shared, screen_seed, marks);
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
}

/// A row's spec as the process was started, and which run of it this is.
/// The environment it started from was never stored: a program started by
/// an earlier daemon restarts in this daemon's environment plus its `env`.
fn spec_of(r: &StoredProc) -> (ProcSpec, Run) {
    let supervision = supervision_of(r);
    let size = r.size.map(|(rows, cols)| TermSize { rows, cols });
    let spec = ProcSpec {
        command: r.command.clone(),
        args: r.args.clone(),
        cwd: PathBuf::from(&r.cwd),
        env: r.env.clone(),
        env_from: EnvFrom::Daemon,
        name: r.name.clone(),
        idle_timeout: (r.timeout_ms > 0).then(|| Duration::from_millis(r.timeout_ms)),
        stdio: size.map_or(Stdio::Pipes, Stdio::Pty),
        restart: supervision.policy,
    };
    (spec, supervision.run)
}

/// A row's supervision (none for a row without one, or unreadable).
fn supervision_of(r: &StoredProc) -> Supervision {
    r.supervision.as_deref().and_then(|j| serde_json::from_str(j).ok()).unwrap_or_default()
}

/// A process's counters and offsets as its row stored them; its "read new"
/// positions at the ends (what came before is not new to anyone now).
fn shared_of(r: &StoredProc, changes: &ChangeHub) -> Shared {
    let shared = Shared::new(changes.clone());
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
