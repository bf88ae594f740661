//! The `Changes` stream: which processes changed, coalesced, for clients
//! that follow every process at once (`portal-cli dash`).
//!
//! One task per follower. It registers for the hub's wake-up, then compares
//! every process's change mark with the value it last saw (and the set of
//! ids with the one it last saw), so it knows exactly which processes
//! changed; it sleeps when nothing did. After each batch it rests for the
//! follower's interval, so a program printing a flood costs the follower at
//! most one batch per interval, and the last change of a burst is always
//! sent (the marks keep counting meanwhile).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::daemon::Daemon;
use crate::domain::ProcId;

/// The default least time between two batches: ten redraws a second is
/// live to a person and costs nothing.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// The least a follower may ask for (50 batches a second).
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(20);

/// What changed since the previous batch.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Batch {
    /// The first batch: list everything.
    pub(crate) initial: bool,
    /// Processes that changed, ascending.
    pub(crate) ids: BTreeSet<ProcId>,
    /// The agent book changed.
    pub(crate) agents: bool,
}

/// Starts following: the first batch (`initial`) is ready at once. The
/// task ends when the receiver is dropped or the daemon shuts down.
pub(crate) fn follow(daemon: Arc<Daemon>, interval: Duration) -> mpsc::Receiver<Batch> {
    // One batch in flight: while the client is slow, changes accumulate in
    // the marks and go out together.
    let (tx, rx) = mpsc::channel(1);
    daemon.spawn(run(Arc::clone(&daemon), interval.max(MIN_INTERVAL), tx));
    rx
}

async fn run(daemon: Arc<Daemon>, interval: Duration, tx: mpsc::Sender<Batch>) {
    let follower = daemon.follow_changes();
    let mut agents = daemon.agents().subscribe();
    agents.borrow_and_update();
    let mut agent_seq = daemon.agents().last_seq();
    // Counted from here on (marks count only while someone follows).
    let mut seen = HashMap::new();
    scan(&daemon, &mut seen);
    if tx.send(Batch { initial: true, ..Batch::default() }).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            () = tokio::time::sleep(interval) => {}
            () = daemon.stopped() => return,
            () = tx.closed() => return,
        }
        let batch = loop {
            let notified = follower.notified();
            tokio::pin!(notified);
            // Registered before looking: a change after the scan wakes it.
            notified.as_mut().enable();
            let mut batch = Batch { ids: scan(&daemon, &mut seen), ..Batch::default() };
            if agents.has_changed().unwrap_or(false) {
                agents.borrow_and_update();
                batch.agents = true;
                let (transitions, _) = daemon.agents().transitions_after(agent_seq);
                for t in transitions {
                    agent_seq = agent_seq.max(t.seq);
                    batch.ids.insert(t.id);
                }
            }
            if !batch.ids.is_empty() || batch.agents {
                break batch;
            }
            tokio::select! {
                () = notified => {}
                // The book's sender lives as long as the daemon.
                _ = agents.changed() => {}
                () = daemon.stopped() => return,
                () = tx.closed() => return,
            }
        };
        if tx.send(batch).await.is_err() {
            return;
        }
    }
}

/// The processes whose mark moved, that appeared or that vanished since the
/// last scan; `seen` is brought up to date.
fn scan(daemon: &Daemon, seen: &mut HashMap<ProcId, u64>) -> BTreeSet<ProcId> {
    let mut changed = BTreeSet::new();
    let handles = daemon.list();
    let mut present = std::collections::HashSet::with_capacity(handles.len());
    for h in &handles {
        let id = h.id();
        present.insert(id);
        let count = h.shared.changes.count();
        if seen.insert(id, count) != Some(count) {
            changed.insert(id);
        }
    }
    seen.retain(|id, _| {
        let kept = present.contains(id);
        if !kept {
            changed.insert(*id);
        }
        kept
    });
    changed
}
