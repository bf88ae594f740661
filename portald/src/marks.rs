//! Change marks: how a process says "something a list shows of me changed"
//! (output, input, status, input state, size) to clients that follow the
//! whole daemon (the `Changes` rpc, which `portal-cli dash` draws from).
//!
//! Each process has a [`ChangeMark`], a counter its actor bumps; the daemon
//! has one [`ChangeHub`] that wakes followers. A follower compares every
//! mark with the value it saw last, so it learns *which* processes changed,
//! and since the counter is bumped before the wake-up, a follower that
//! registers for the wake-up before comparing can never miss a change.
//! While nobody follows, a change costs one relaxed load: the capture path
//! pays nothing for a dashboard that is not open.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

/// The daemon's wake-up for followers. Cheap to clone (one `Arc`).
#[derive(Clone, Debug, Default)]
pub(crate) struct ChangeHub(Arc<HubInner>);

#[derive(Debug, Default)]
struct HubInner {
    /// Followers connected now; producers skip everything while it is 0.
    followers: AtomicUsize,
    wake: Notify,
}

impl ChangeHub {
    /// Wakes every follower (something changed that no mark records: a
    /// process was added or forgotten).
    pub(crate) fn wake(&self) {
        if self.0.followers.load(Ordering::Relaxed) > 0 {
            self.0.wake.notify_waiters();
        }
    }

    /// Registers a follower; it counts until dropped.
    pub(crate) fn follow(&self) -> Follower {
        self.0.followers.fetch_add(1, Ordering::AcqRel);
        Follower(self.clone())
    }
}

/// One follower of a [`ChangeHub`].
#[derive(Debug)]
pub(crate) struct Follower(ChangeHub);

impl Follower {
    /// The wake-up to register *before* comparing marks (then `.await` it
    /// only if nothing had changed): `notify_waiters` wakes only futures
    /// registered when it is called.
    pub(crate) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.0.0.wake.notified()
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.0.0.followers.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A process's change counter.
#[derive(Debug, Default)]
pub(crate) struct ChangeMark {
    hub: ChangeHub,
    count: AtomicU64,
}

impl ChangeMark {
    /// A mark that wakes the followers of `hub`.
    pub(crate) fn new(hub: ChangeHub) -> Self {
        Self { hub, count: AtomicU64::new(0) }
    }

    /// Something about this process changed.
    pub(crate) fn changed(&self) {
        if self.hub.0.followers.load(Ordering::Relaxed) == 0 {
            return;
        }
        // Counted first, then the wake-up: a follower woken reads the new
        // count (Release here, Acquire in `count`).
        self.count.fetch_add(1, Ordering::Release);
        self.hub.0.wake.notify_waiters();
    }

    /// The counter, to compare with the value seen last.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_counts_only_while_someone_follows() {
        let hub = ChangeHub::default();
        let mark = ChangeMark::new(hub.clone());
        mark.changed();
        assert_eq!(mark.count(), 0, "nobody follows: nothing is paid");
        let follower = hub.follow();
        mark.changed();
        assert_eq!(mark.count(), 1);
        drop(follower);
        mark.changed();
        assert_eq!(mark.count(), 1);
    }

    #[tokio::test]
    async fn a_follower_registered_before_comparing_is_woken() {
        let hub = ChangeHub::default();
        let mark = ChangeMark::new(hub.clone());
        let follower = hub.follow();
        let notified = follower.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let seen = mark.count();
        mark.changed();
        // Registered before the change: woken, and the count moved.
        tokio::time::timeout(std::time::Duration::from_secs(5), notified)
            .await
            .expect("the follower is woken");
        assert!(mark.count() > seen);
    }
}
