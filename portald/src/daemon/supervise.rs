//! Restarting a failed run under its policy: a run that failed (an exit
//! status other than 0, or a signal) is started again under its name after
//! the policy's backoff, until the policy's limit.

use std::sync::Arc;

use super::Daemon;
use crate::proc::{EndReason, ProcHandle, ProcStatus, Run};
use crate::sys;

impl Daemon {
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
