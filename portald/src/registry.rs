//! The index of managed processes: id → [`ProcHandle`], and names.
//!
//! A plain `std::sync::Mutex` around two maps: every operation takes
//! microseconds, does no I/O and is never held across an `.await`, so an extra
//! task would add nothing. A poisoned lock is recovered (the maps are updated
//! in single steps and always consistent).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::marks::ChangeHub;
use crate::proc::{ProcError, ProcHandle, ProcId};

/// How a request names a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ProcTarget {
    /// By id.
    Id(u64),
    /// By unique name.
    Name(String),
}

#[derive(Default)]
struct Inner {
    by_id: BTreeMap<ProcId, ProcHandle>,
    /// Name → owner; `None` while a start that reserved it is in progress.
    names: HashMap<String, Option<ProcId>>,
    /// Names of ended processes a start in progress takes over: they still
    /// name the ended process until it is done, and no other start may
    /// take them meanwhile.
    taking: std::collections::HashSet<String>,
    /// Starts in progress (they count against the limit).
    starting: usize,
}

/// The index, and the wake-up of clients that follow every process (a
/// process added or forgotten is a change no process's mark records).
#[derive(Default)]
pub(crate) struct Registry {
    inner: Mutex<Inner>,
    changes: ChangeHub,
}

/// A slot reserved for a start in progress; released on drop unless filled.
pub(crate) struct Reservation<'a> {
    registry: &'a Registry,
    name: Option<String>,
    /// The ended process whose name this start takes over.
    replaces: Option<ProcId>,
    filled: bool,
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The hub every process's change mark wakes.
    pub(crate) fn changes(&self) -> &ChangeHub {
        &self.changes
    }

    /// Reserves room (and the name) for a process about to start. With
    /// `replace_ended`, a name an ended process holds is taken over (it
    /// goes back to that process if the start fails).
    pub(crate) fn reserve(
        &self,
        name: Option<&str>,
        limit: usize,
        replace_ended: bool,
    ) -> Result<Reservation<'_>, ProcError> {
        let mut inner = self.lock();
        if inner.by_id.len() + inner.starting >= limit {
            return Err(ProcError::TooMany { limit });
        }
        let mut replaces = None;
        if let Some(name) = name {
            match inner.names.get(name) {
                None => {
                    inner.names.insert(name.to_owned(), None);
                }
                Some(Some(old))
                    if replace_ended
                        && !inner.taking.contains(name)
                        && inner.by_id.get(old).is_some_and(|h| {
                            !matches!(h.published().status, crate::proc::ProcStatus::Running)
                        }) =>
                {
                    replaces = Some(*old);
                    inner.taking.insert(name.to_owned());
                }
                Some(_) => return Err(ProcError::NameTaken(name.to_owned())),
            }
        }
        inner.starting += 1;
        Ok(Reservation { registry: self, name: name.map(str::to_owned), replaces, filled: false })
    }

    /// Adds a process of an earlier daemon (it keeps its id, and its name
    /// unless another run took that over).
    pub(crate) fn insert_dormant(&self, handle: ProcHandle) {
        let mut inner = self.lock();
        let replaced = handle.shared.replaced_by.load(std::sync::atomic::Ordering::Acquire) != 0;
        if let Some(name) = handle.facts.spec.name.as_ref().filter(|_| !replaced) {
            inner.names.insert(name.clone(), Some(handle.id()));
        }
        inner.by_id.insert(handle.id(), handle);
        drop(inner);
        self.changes.wake();
    }

    /// Looks a process up.
    pub(crate) fn get(&self, target: &ProcTarget) -> Result<ProcHandle, ProcError> {
        let inner = self.lock();
        let id = match target {
            ProcTarget::Id(id) => ProcId(*id),
            ProcTarget::Name(name) => match inner.names.get(name) {
                Some(Some(id)) => *id,
                _ => return Err(ProcError::NameNotFound(name.clone())),
            },
        };
        inner.by_id.get(&id).cloned().ok_or(ProcError::NotFound(id.0))
    }

    /// Removes a process (its handle is returned; the actor ends once every
    /// other handle is gone too).
    pub(crate) fn remove(&self, id: ProcId) -> Option<ProcHandle> {
        let mut inner = self.lock();
        let handle = inner.by_id.remove(&id)?;
        // A run whose name another took over leaves the name to it.
        if let Some(name) = &handle.facts.spec.name
            && inner.names.get(name) == Some(&Some(id))
        {
            inner.names.remove(name);
        }
        drop(inner);
        self.changes.wake();
        Some(handle)
    }

    /// Every process, by id.
    pub(crate) fn list(&self) -> Vec<ProcHandle> {
        self.lock().by_id.values().cloned().collect()
    }
}

impl Reservation<'_> {
    /// Registers the started process in the reserved slot; returns the
    /// ended process whose name it took over, if it did.
    pub(crate) fn fill(mut self, handle: ProcHandle) -> Option<ProcHandle> {
        let mut inner = self.registry.lock();
        inner.starting -= 1;
        if let Some(name) = &self.name {
            inner.names.insert(name.clone(), Some(handle.id()));
            inner.taking.remove(name);
        }
        inner.by_id.insert(handle.id(), handle);
        let replaced = self.replaces.and_then(|old| inner.by_id.get(&old).cloned());
        drop(inner);
        self.filled = true;
        self.registry.changes.wake();
        replaced
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.filled {
            return;
        }
        let mut inner = self.registry.lock();
        inner.starting -= 1;
        if let Some(name) = &self.name {
            if self.replaces.is_some() {
                // The name still names the ended process.
                inner.taking.remove(name);
            } else {
                inner.names.remove(name);
            }
        }
    }
}
