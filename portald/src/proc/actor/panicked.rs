//! What happens when a process's actor panics (a bug): its supervisor kills
//! the program's tree (nobody would read its output any more), records the
//! process as lost and lets the holder forget it. Every other process and
//! the daemon carry on; this one's log stays readable.

use std::sync::Arc;

use tokio::sync::watch;

use crate::proc::holding::Holding;
use crate::proc::{ProcId, ProcStatus, Published, RowStatus};
use crate::store::{StatusUpdate, Store};
use crate::sys;

/// What the supervisor of an actor needs if the actor panics.
pub(super) struct Supervisor {
    pub(super) id: ProcId,
    pub(super) pid: u32,
    pub(super) lineage: sys::Lineage,
    pub(super) state: Arc<watch::Sender<Published>>,
    pub(super) store: Store,
    pub(super) holding: Arc<Holding>,
}

impl Supervisor {
    /// Cleans up after the actor's panic.
    pub(super) async fn actor_panicked(self, panic: Box<dyn std::any::Any + Send>) {
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
        self.holding.released(self.id).await;
        self.state.send_modify(|p| p.status = ProcStatus::Lost);
    }
}
