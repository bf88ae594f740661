//! The agent book: every PTY process's record and its reducer state, the
//! ring of recent transitions, and the wake-up channel. Each transition is
//! numbered, kept in the ring for watchers and appended to the database.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

use crate::agents::rebuild::{self, Adopted, Facts};
use crate::agents::reducer::{self, AgentEvent, AgentRecord, Instance, now};
use crate::domain::{AgentState, ProcId, Transition};
use crate::store::Store;

/// Transitions kept in memory for watchers; older ones are read from the
/// database.
const TRANSITION_RING: usize = 4096;

struct Entry {
    record: AgentRecord,
    instance: Instance,
}

struct Book {
    entries: HashMap<ProcId, Entry>,
    ring: VecDeque<Transition>,
    next_seq: u64,
}

/// The agent book: records, transitions, and the wake-up channel.
pub(crate) struct Agents {
    book: Mutex<Book>,
    changed: watch::Sender<u64>,
    store: Store,
}

impl Agents {
    /// An empty book whose sequence numbers continue after `last_seq`.
    pub(crate) fn new(store: Store, last_seq: u64) -> Self {
        let (changed, _) = watch::channel(last_seq);
        Self {
            book: Mutex::new(Book {
                entries: HashMap::new(),
                ring: VecDeque::new(),
                next_seq: last_seq + 1,
            }),
            changed,
            store,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds the record of a new PTY process.
    pub(crate) fn register(&self, id: ProcId) {
        let (wall, mono) = now();
        let record = AgentRecord::new(id, wall, mono);
        self.lock().entries.insert(id, Entry { record, instance: Instance::default() });
    }

    /// Forgets a process (cleanup). Waiters see it vanish.
    pub(crate) fn remove(&self, id: ProcId) {
        self.lock().entries.remove(&id);
        self.changed.send_modify(|_| {});
    }

    /// Applies an event; records and announces a transition if the state
    /// changed. Returns the record after the event.
    pub(crate) fn apply(&self, id: ProcId, event: AgentEvent) -> Option<AgentRecord> {
        let (record, transition) = {
            let mut book = self.lock();
            let seq = book.next_seq;
            let entry = book.entries.get_mut(&id)?;
            let now = now();
            let before = reducer::apply(&mut entry.record, &mut entry.instance, event, now);
            if before.is_some() {
                entry.record.seq = seq;
            }
            let record = entry.record.clone();
            let transition = before.map(|before| Transition {
                seq,
                id,
                before,
                after: record.state,
                source: record.source,
                name: record.name.clone(),
                reason: record.reason.clone(),
                at_ns: now.0,
            });
            if let Some(t) = &transition {
                book.next_seq += 1;
                if book.ring.len() == TRANSITION_RING {
                    book.ring.pop_front();
                }
                book.ring.push_back(t.clone());
            }
            (record, transition)
        };
        if let Some(t) = transition {
            tracing::info!(
                proc = %id,
                agent_state_before = t.before.as_str(),
                agent_state_after = t.after.as_str(),
                agent_name = t.name.as_deref().unwrap_or(""),
                agent_source = t.source.as_str(),
                "agent transition"
            );
            self.store.record_transition(t.clone());
            self.changed.send_replace(t.seq);
        }
        Some(record)
    }

    /// Whether anything made the process look like an agent.
    pub(crate) fn is_agent(&self, id: ProcId) -> bool {
        self.lock().entries.get(&id).is_some_and(|e| e.record.is_agent)
    }

    /// One record.
    pub(crate) fn get(&self, id: ProcId) -> Option<AgentRecord> {
        self.lock().entries.get(&id).map(|e| e.record.clone())
    }

    /// Records that look like agents, most urgent first.
    pub(crate) fn list(&self) -> Vec<AgentRecord> {
        let mut v: Vec<AgentRecord> = self
            .lock()
            .entries
            .values()
            .filter(|e| e.record.is_agent)
            .map(|e| e.record.clone())
            .collect();
        v.sort_by(|a, b| b.state.attention().cmp(&a.state.attention()).then(a.id.cmp(&b.id)));
        v
    }

    /// A wake-up channel: its value is the latest sequence number, and it
    /// also fires when a record vanishes.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Transitions after `since` kept in memory, and whether the ring still
    /// reaches back to `since` (else older ones come from the database).
    pub(crate) fn transitions_after(&self, since: u64) -> (Vec<Transition>, bool) {
        let book = self.lock();
        // Older transitions (before the ring, or from an earlier daemon) are
        // in the database.
        let oldest_in_memory = book.ring.front().map_or(book.next_seq, |t| t.seq);
        let complete = since.saturating_add(1) >= oldest_in_memory;
        (book.ring.iter().filter(|t| t.seq > since).cloned().collect(), complete)
    }

    /// The next sequence number minus one.
    pub(crate) fn last_seq(&self) -> u64 {
        self.lock().next_seq - 1
    }

    /// The record of a PTY program this daemon adopts: rebuilt from the
    /// carried record and the log, checked against the process table and
    /// the screen. Corrections are applied through the reducer, so they are
    /// logged transitions too. A record nothing is known of starts afresh,
    /// as at a start.
    pub(crate) async fn rebuild(&self, adopted: Adopted) {
        let id = adopted.id;
        let logged = self
            .store
            .read(move |c| crate::store::newest_agent_event(c, id))
            .await
            .unwrap_or_else(|e| {
                tracing::warn!(proc = %id, error = %e, "cannot read the agent's history; it starts afresh");
                None
            });
        let carried = adopted.carried.clone().filter(|r| r.id == id);
        let base = rebuild::newest(carried, logged.as_ref(), now());
        let look_at_screen = base.as_ref().is_some_and(|r| r.is_agent);
        let pid = adopted.pid;
        let facts = tokio::task::spawn_blocking(move || Facts::look(&adopted, look_at_screen))
            .await
            .unwrap_or_default();
        let Some(mut record) = base else {
            self.register(id);
            if let Some((name, kind)) = facts.program_agent {
                // The program itself is an agent: known from its start.
                self.apply(id, AgentEvent::Discovered { name, kind, pid, job: None });
            }
            return;
        };
        let mut instance = Instance::default();
        let events = rebuild::check(&mut record, &mut instance, pid, &facts);
        tracing::info!(
            proc = %id,
            agent_state = record.state.as_str(),
            agent_name = record.name.as_deref().unwrap_or(""),
            corrections = events.len(),
            "agent record rebuilt for an adopted program"
        );
        self.lock().entries.insert(id, Entry { record, instance });
        for event in events {
            self.apply(id, event);
        }
        self.changed.send_modify(|_| {});
    }
}

/// The per-state tally: "wait:1 done:2 run:3"; empty for no agents.
pub(crate) fn summary(records: &[AgentRecord]) -> String {
    AgentState::ATTENTION
        .iter()
        .filter_map(|s| {
            let n = records.iter().filter(|r| r.state == *s).count();
            (n > 0).then(|| format!("{}:{n}", s.label()))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::reducer::AgentRecord;

    #[test]
    fn attention_order_and_summary() {
        let mk =
            |id, state| AgentRecord { id: ProcId(id), state, ..AgentRecord::new(ProcId(1), 0, 0) };
        let recs = vec![
            mk(1, AgentState::Running),
            mk(2, AgentState::AwaitingInput),
            mk(3, AgentState::Done),
            mk(4, AgentState::Running),
        ];
        assert_eq!(summary(&recs), "wait:1 done:1 run:2");
        assert_eq!(summary(&[]), "");
        assert!(AgentState::AwaitingInput.attention() > AgentState::Done.attention());
        assert!(AgentState::Running.attention() > AgentState::Idle.attention());
        assert!(AgentState::Unknown.attention() > AgentState::Exited.attention());
    }
}
