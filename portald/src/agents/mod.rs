//! Agent state: which coding agent runs in which PTY, and what it is doing.
//!
//! Every PTY process has an agent record. Signals feed it: hook reports
//! (`portal-cli emit` over the socket), OSC 3008 records in the output,
//! heuristics (bells, OSC 9 / 9;4 / 777 notifications), and exact process
//! facts (the child's exit; the PTY's foreground process group entering or
//! leaving a recognised agent). Every change goes through the pure reducer
//! [`apply`], whose guard table is unit-tested:
//! - a hook or OSC report is authoritative for the current agent instance;
//!   once one has spoken, heuristics are ignored until the instance ends;
//! - a bell or notification means `awaiting_input` only while `running`;
//! - Claude's idle reminder after `done` does not turn it into
//!   `awaiting_input`;
//! - a dialog on the agent's screen (a permission request or another menu)
//!   means `awaiting_input` with reason `permission` or `choice` and the
//!   dialog's text, whatever else said; once it is gone the state goes back
//!   to what it was (a permission granted mid-turn is `running` again);
//! - exit (of the child, of the foreground agent, or a SessionEnd report)
//!   ends the instance; discovery starts a new one in `unknown` (never
//!   `running`: a discovered agent at its prompt is not busy).
//!
//! A state change is a transition with a global sequence number, kept in a
//! ring for watchers and appended to the database, so history survives
//! daemon restarts and a daemon that adopts a program rebuilds its record
//! from it ([`rebuild`]). The book is a `std::sync::Mutex` held for microseconds
//! and never across an `.await`; a `watch` channel carrying the latest
//! sequence number wakes waiters.

pub(crate) mod dialog;
pub(crate) mod hooks;
pub(crate) mod rebuild;
pub(crate) mod signals;

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::watch;

pub(crate) use crate::domain::{AgentState, ProcId, Source, Transition};
use crate::store::Store;

/// Transitions kept in memory for watchers; older ones are read from the
/// database.
const TRANSITION_RING: usize = 4096;

/// An agent record (carried to the next daemon at a live upgrade).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct AgentRecord {
    /// Process id.
    pub(crate) id: ProcId,
    /// Name (from discovery or reports).
    pub(crate) name: Option<String>,
    /// Kind recognised by discovery.
    pub(crate) kind: Option<String>,
    /// State.
    pub(crate) state: AgentState,
    /// Source of the state.
    pub(crate) source: Source,
    /// Not a guess.
    pub(crate) exact: bool,
    /// Reason or detail.
    pub(crate) reason: Option<String>,
    /// Hook event.
    pub(crate) event: Option<String>,
    /// The agent's own session id.
    pub(crate) session_id: Option<String>,
    /// The agent's pid (discovery).
    pub(crate) pid: Option<u32>,
    /// Wall clock of the last state change.
    pub(crate) since_ns: i64,
    /// Monotonic clock of the last state change.
    pub(crate) since_mono_ns: i64,
    /// Whether anything ever made this look like an agent.
    pub(crate) is_agent: bool,
    /// The dialog the agent shows (a permission request or another menu),
    /// as its screen has it; sends are refused while there is one.
    pub(crate) dialog: Option<String>,
    /// Sequence number of the transition that set the state (0: none was
    /// recorded): a record carried through a handover loses to a newer
    /// transition in the log (see [`rebuild`]).
    #[serde(default)]
    pub(crate) seq: u64,
}

impl AgentRecord {
    /// The record of a PTY process no agent has spoken for yet.
    fn new(id: ProcId, since_ns: i64, since_mono_ns: i64) -> Self {
        Self {
            id,
            name: None,
            kind: None,
            state: AgentState::Unknown,
            source: Source::Lifecycle,
            exact: true,
            reason: None,
            event: None,
            session_id: None,
            pid: None,
            since_ns,
            since_mono_ns,
            is_agent: false,
            dialog: None,
            seq: 0,
        }
    }
}

/// A signal about an agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AgentEvent {
    /// An authoritative report (hook or OSC 3008).
    Report {
        /// Hook or Osc.
        source: Source,
        /// The state.
        state: AgentState,
        /// Reason.
        reason: Option<String>,
        /// Agent name.
        name: Option<String>,
        /// Hook event.
        event: Option<String>,
        /// Agent session id.
        session_id: Option<String>,
    },
    /// A bell outside any OSC.
    Bell,
    /// A desktop notification (OSC 9 text, OSC 777 notify).
    Notify(String),
    /// A progress report (OSC 9;4): busy or not.
    Progress(bool),
    /// A recognised agent: the program itself, or a job that came to the
    /// PTY's foreground.
    Discovered {
        /// Name.
        name: String,
        /// Kind.
        kind: String,
        /// Its pid (the program, or the foreground group's leader).
        pid: u32,
        /// A foreground job of the program (a shell), with the monotonic
        /// time (ns) since which it may have held the terminal: it ends when
        /// the program takes the terminal back, and a report that arrived
        /// since then was its own. `None`: the program itself, which ends
        /// only by exiting, whatever jobs it puts in the foreground.
        job: Option<i64>,
    },
    /// The program took the terminal back from a foreground job.
    ForegroundLeft,
    /// The PTY's child exited.
    ChildExited {
        /// Exit code.
        code: Option<i32>,
        /// Signal.
        signal: Option<i32>,
    },
    /// Portal just typed a prompt into it.
    Sent,
    /// What its screen shows: a dialog, or none (any more).
    Dialog(Option<dialog::Dialog>),
}

/// Per-record state the reducer needs beyond the visible record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Instance {
    /// A hook or OSC report arrived during this agent instance.
    pub(crate) authoritative: bool,
    /// The discovered agent is a foreground job: the program taking the
    /// terminal back ends it.
    pub(crate) foreground: bool,
    /// What the state was before a dialog took over, to go back to once it
    /// is answered (a permission granted mid-turn means `running` again).
    pub(crate) before_dialog: Option<(AgentState, Source, bool, Option<String>)>,
    /// Monotonic time (ns) of the last hook or OSC report.
    pub(crate) reported_mono_ns: i64,
}

/// Reasons under which `awaiting_input` means a dialog, not a prompt.
pub(crate) const DIALOG_REASONS: [&str; 2] = ["permission", "choice"];

impl AgentRecord {
    /// Waiting on a dialog (by its screen, or by a hook's permission
    /// request): a prompt typed now would answer it.
    pub(crate) fn in_dialog(&self) -> bool {
        self.dialog.is_some()
            || (self.state == AgentState::AwaitingInput
                && self.reason.as_deref().is_some_and(|r| DIALOG_REASONS.contains(&r)))
    }
}

/// The reducer: applies one event to a record at time `(now_ns, mono_ns)`.
/// Returns the previous state when the state changed.
pub(crate) fn apply(
    rec: &mut AgentRecord,
    inst: &mut Instance,
    event: AgentEvent,
    now: (i64, i64),
) -> Option<AgentState> {
    let before = rec.state;
    let set = |rec: &mut AgentRecord,
               state: AgentState,
               source: Source,
               exact: bool,
               reason: Option<String>| {
        rec.state = state;
        rec.source = source;
        rec.exact = exact;
        rec.reason = reason;
    };
    match event {
        AgentEvent::Report { source, state, reason, name, event, session_id } => {
            // Claude repeats a reminder after finishing a turn; a finished
            // turn is still finished.
            let reminder = reason.as_deref() == Some("idle_reminder");
            if reminder && state == AgentState::AwaitingInput && rec.state == AgentState::Done {
                return None;
            }
            // Codex reports `idle` right after `done`: the finished turn
            // still waits to be looked at.
            let program_idle = event.as_deref() == Some(signals::PROGRAM_STATUS_EVENT)
                && state == AgentState::Idle;
            if program_idle && rec.state == AgentState::Done {
                return None;
            }
            rec.is_agent = true;
            if name.is_some() {
                rec.name = name;
            }
            if session_id.is_some() {
                rec.session_id = session_id;
            }
            rec.event = event;
            set(rec, state, source, true, reason);
            if state == AgentState::Exited {
                *inst = Instance::default();
                rec.dialog = None;
            } else {
                inst.authoritative = true;
                inst.reported_mono_ns = now.1;
                if state != AgentState::AwaitingInput {
                    // It moved on: the dialog is answered (the next sweep
                    // finds it again if it is still on the screen).
                    rec.dialog = None;
                    inst.before_dialog = None;
                }
            }
        }
        AgentEvent::Bell | AgentEvent::Notify(_) => {
            if inst.authoritative || rec.state != AgentState::Running {
                return None;
            }
            let detail = match event {
                AgentEvent::Notify(text) => Some(text),
                _ => Some("bell".to_owned()),
            };
            set(rec, AgentState::AwaitingInput, Source::Heuristic, false, detail);
        }
        AgentEvent::Progress(busy) => {
            if inst.authoritative {
                return None;
            }
            rec.is_agent = true;
            let state = if busy { AgentState::Running } else { AgentState::Done };
            set(rec, state, Source::Heuristic, false, Some("progress".into()));
        }
        AgentEvent::Discovered { name, kind, pid, job } => {
            let new_instance = rec.pid != Some(pid) || rec.state == AgentState::Exited;
            // The job may have reported before the sweep found it (Claude
            // says `idle` at once): that report is its own, not a leftover.
            let reported_first = job.is_some_and(|since| {
                inst.authoritative
                    && inst.reported_mono_ns >= since
                    && rec.state != AgentState::Exited
            });
            rec.is_agent = true;
            rec.name = Some(name);
            rec.kind = Some(kind);
            rec.pid = Some(pid);
            inst.foreground = job.is_some();
            if new_instance && !reported_first {
                inst.authoritative = false;
                set(rec, AgentState::Unknown, Source::Lifecycle, true, Some("discovered".into()));
            }
        }
        AgentEvent::ForegroundLeft => {
            if !inst.foreground {
                return None;
            }
            *inst = Instance::default();
            rec.dialog = None;
            set(
                rec,
                AgentState::Exited,
                Source::Lifecycle,
                true,
                Some("left the foreground".into()),
            );
        }
        AgentEvent::ChildExited { code, signal } => {
            *inst = Instance::default();
            rec.dialog = None;
            let reason = match (code, signal) {
                (Some(c), _) => format!("exit {c}"),
                (None, Some(s)) => format!("signal {s}"),
                _ => "exited".to_owned(),
            };
            set(rec, AgentState::Exited, Source::Lifecycle, true, Some(reason));
        }
        AgentEvent::Dialog(Some(found)) => {
            if rec.state == AgentState::Exited || !rec.is_agent {
                return None;
            }
            rec.dialog = Some(found.text);
            let asking = rec.state == AgentState::AwaitingInput
                && rec.reason.as_deref().is_some_and(|r| DIALOG_REASONS.contains(&r));
            if !asking {
                inst.before_dialog.get_or_insert((
                    rec.state,
                    rec.source,
                    rec.exact,
                    rec.reason.clone(),
                ));
                let reason = Some(found.kind.reason().to_owned());
                set(rec, AgentState::AwaitingInput, Source::Heuristic, false, reason);
            }
        }
        AgentEvent::Dialog(None) => {
            // Nothing was shown: nothing to answer.
            rec.dialog.take()?;
            let asking = rec.state == AgentState::AwaitingInput
                && rec.reason.as_deref().is_some_and(|r| DIALOG_REASONS.contains(&r));
            if asking {
                // Answered: back to what it was doing (a granted permission
                // mid-turn is `running` again); a dialog that came first
                // leaves it running, the safe guess until it reports.
                let (state, source, exact, reason) = inst.before_dialog.take().unwrap_or((
                    AgentState::Running,
                    Source::Heuristic,
                    false,
                    Some("dialog answered".into()),
                ));
                let (state, reason) = match state {
                    AgentState::AwaitingInput | AgentState::Unknown => {
                        (AgentState::Running, Some("dialog answered".into()))
                    }
                    s => (s, reason),
                };
                set(rec, state, source, exact, reason);
            }
            inst.before_dialog = None;
        }
        AgentEvent::Sent => {
            if !AgentState::READY.contains(&rec.state) {
                return None;
            }
            set(rec, AgentState::Running, Source::Heuristic, false, Some("prompt sent".into()));
        }
    }
    if rec.state == before {
        return None;
    }
    rec.since_ns = now.0;
    rec.since_mono_ns = now.1;
    Some(before)
}

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

fn now() -> (i64, i64) {
    (crate::sys::wall_ns(), crate::sys::monotonic_ns())
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
            let before = apply(&mut entry.record, &mut entry.instance, event, now);
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

/// Waiting for agents: how one agent's wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WaitOutcome {
    /// In a target state.
    Reached,
    /// Not when the call returned.
    Timeout,
    /// Exited while another state was awaited.
    Exited,
    /// Cleaned up.
    Vanished,
    /// The daemon is shutting down.
    Stopped,
    /// Nothing in the terminal ever reported or was recognised as a coding
    /// agent, and it has had its chance ([`NOT_AN_AGENT_GRACE`], or its
    /// program waits for input): a wait for an agent state would only time
    /// out.
    NotAnAgent,
}

/// How long a terminal nothing has recognised as an agent may still turn
/// out to be one before an agent wait says it is not: four sweeps of the
/// foreground job ([`crate::config::AGENT_SWEEP`]) and an agent's first
/// report, which comes as it starts; short enough that a wait on a REPL
/// answers at once in a person's terms rather than at its timeout.
pub(crate) const NOT_AN_AGENT_GRACE: Duration = Duration::from_secs(2);

/// Whether a terminal's program waits for input now (asked of its process
/// by the caller): a program at its prompt that never reported as an agent
/// is not one, grace or not.
pub(crate) type WaitsForInput<'a> = &'a (dyn Fn(ProcId) -> bool + Sync);

/// When the grace of a record that is not (yet) an agent ends.
fn grace_end(r: &AgentRecord) -> tokio::time::Instant {
    // A record nothing spoke for keeps the time it was made.
    let age_ns = crate::sys::monotonic_ns().saturating_sub(r.since_mono_ns);
    let age = Duration::from_nanos(u64::try_from(age_ns).unwrap_or(0));
    tokio::time::Instant::now() + NOT_AN_AGENT_GRACE.saturating_sub(age)
}

/// The level check of a wait, and when to look again even without a
/// change (the end of a non-agent's grace).
fn check(
    agents: &Agents,
    id: ProcId,
    states: &[AgentState],
    at_input: WaitsForInput<'_>,
) -> (Option<WaitOutcome>, Option<tokio::time::Instant>) {
    match agents.get(id) {
        None => (Some(WaitOutcome::Vanished), None),
        Some(r) if !r.is_agent => {
            let end = grace_end(&r);
            let ended = r.state == AgentState::Exited;
            if ended || end <= tokio::time::Instant::now() || at_input(id) {
                (Some(WaitOutcome::NotAnAgent), None)
            } else {
                (None, Some(end))
            }
        }
        Some(r) if states.contains(&r.state) => (Some(WaitOutcome::Reached), None),
        Some(r) if r.state == AgentState::Exited => (Some(WaitOutcome::Exited), None),
        Some(_) => (None, None),
    }
}

/// Waits for one agent: level check, then each change, until `deadline`.
pub(crate) async fn wait_one(
    agents: &Agents,
    id: ProcId,
    states: &[AgentState],
    deadline: tokio::time::Instant,
    cancel: &tokio_util::sync::CancellationToken,
    at_input: WaitsForInput<'_>,
) -> WaitOutcome {
    let mut rx = agents.subscribe();
    loop {
        let (outcome, again) = check(agents, id, states, at_input);
        if let Some(o) = outcome {
            return o;
        }
        let wake = again.map_or(deadline, |a| a.min(deadline));
        tokio::select! {
            changed = rx.changed() => if changed.is_err() { return WaitOutcome::Stopped },
            () = tokio::time::sleep_until(wake) => if wake == deadline { return WaitOutcome::Timeout },
            () = cancel.cancelled() => return WaitOutcome::Stopped,
        }
    }
}

/// Fleet mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Every one.
    All,
    /// The first.
    Any,
}

/// Waits for several agents; one outcome per id, in input order. In `Any`
/// mode the first `reached` ends the call (an early `exited` does not), and
/// the rest get a final level check.
pub(crate) async fn wait_fleet(
    agents: &Agents,
    ids: &[ProcId],
    states: &[AgentState],
    mode: Mode,
    timeout: Duration,
    cancel: &tokio_util::sync::CancellationToken,
    at_input: WaitsForInput<'_>,
) -> Vec<WaitOutcome> {
    let deadline = tokio::time::Instant::now() + timeout;
    match mode {
        Mode::All => {
            futures::future::join_all(
                ids.iter().map(|id| wait_one(agents, *id, states, deadline, cancel, at_input)),
            )
            .await
        }
        Mode::Any => {
            let mut rx = agents.subscribe();
            loop {
                let checked: Vec<_> =
                    ids.iter().map(|id| check(agents, *id, states, at_input)).collect();
                let any_reached = checked.iter().any(|(o, _)| *o == Some(WaitOutcome::Reached));
                let all_final = checked.iter().all(|(o, _)| o.is_some());
                if any_reached || all_final {
                    return checked
                        .into_iter()
                        .map(|(o, _)| o.unwrap_or(WaitOutcome::Timeout))
                        .collect();
                }
                let wake = checked.iter().filter_map(|(_, a)| *a).fold(deadline, std::cmp::min);
                let stop = tokio::select! {
                    changed = rx.changed() => changed.is_err().then_some(WaitOutcome::Stopped),
                    () = tokio::time::sleep_until(wake) => (wake == deadline).then_some(WaitOutcome::Timeout),
                    () = cancel.cancelled() => Some(WaitOutcome::Stopped),
                };
                if let Some(end) = stop {
                    return ids
                        .iter()
                        .map(|id| check(agents, *id, states, at_input).0.unwrap_or(end))
                        .collect();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dialog(kind: dialog::DialogKind) -> AgentEvent {
        AgentEvent::Dialog(Some(dialog::Dialog { kind, text: "Do you want to proceed?".into() }))
    }

    fn record() -> (AgentRecord, Instance) {
        (AgentRecord::new(ProcId(1), 0, 0), Instance::default())
    }

    fn report(state: AgentState, reason: Option<&str>) -> AgentEvent {
        AgentEvent::Report {
            source: Source::Hook,
            state,
            reason: reason.map(str::to_owned),
            name: Some("claude".into()),
            event: None,
            session_id: None,
        }
    }

    /// The guard table: (state before, event, state after).
    #[test]
    fn reducer_guard_table() {
        use AgentState::*;
        let cases: Vec<(&str, Vec<AgentEvent>, AgentState)> = vec![
            ("hook sets state", vec![report(Running, None)], Running),
            (
                "reminder after done is ignored",
                vec![report(Done, None), report(AwaitingInput, Some("idle_reminder"))],
                Done,
            ),
            (
                "permission after done is accepted",
                vec![report(Done, None), report(AwaitingInput, Some("permission"))],
                AwaitingInput,
            ),
            (
                "bell while running means waiting",
                vec![AgentEvent::Progress(true), AgentEvent::Bell],
                AwaitingInput,
            ),
            ("bell while unknown means nothing", vec![AgentEvent::Bell], Unknown),
            (
                "heuristics ignored after a hook",
                vec![report(Running, None), AgentEvent::Bell],
                Running,
            ),
            (
                "progress ignored after a hook",
                vec![report(Done, None), AgentEvent::Progress(true)],
                Done,
            ),
            (
                "notification after done means nothing",
                vec![AgentEvent::Progress(false), AgentEvent::Notify("hi".into())],
                Done,
            ),
            (
                "child exit wins",
                vec![
                    report(Running, None),
                    AgentEvent::ChildExited { code: Some(0), signal: None },
                ],
                Exited,
            ),
            (
                "discovery starts unknown, never running",
                vec![AgentEvent::Discovered {
                    name: "claude".into(),
                    kind: "claude".into(),
                    pid: 7,
                    job: Some(0),
                }],
                Unknown,
            ),
            (
                "foreground leaving the agent exits it",
                vec![
                    AgentEvent::Discovered {
                        name: "claude".into(),
                        kind: "claude".into(),
                        pid: 7,
                        job: Some(0),
                    },
                    report(Done, None),
                    AgentEvent::ForegroundLeft,
                ],
                Exited,
            ),
            (
                "an agent that is the program outlives the jobs it runs",
                vec![
                    AgentEvent::Discovered {
                        name: "claude".into(),
                        kind: "claude".into(),
                        pid: 7,
                        job: None,
                    },
                    report(Done, None),
                    AgentEvent::ForegroundLeft,
                ],
                Done,
            ),
            (
                "foreground change without an agent means nothing",
                vec![AgentEvent::ForegroundLeft],
                Unknown,
            ),
            (
                "a new instance listens to heuristics again",
                vec![
                    report(Done, None),
                    report(Exited, None),
                    AgentEvent::Discovered {
                        name: "claude".into(),
                        kind: "claude".into(),
                        pid: 8,
                        job: Some(0),
                    },
                    AgentEvent::Progress(true),
                    AgentEvent::Bell,
                ],
                AwaitingInput,
            ),
            ("a sent prompt means running", vec![report(Done, None), AgentEvent::Sent], Running),
            (
                "a job that reported before the sweep found it keeps its report",
                vec![
                    report(Idle, None),
                    AgentEvent::Discovered {
                        name: "claude".into(),
                        kind: "claude".into(),
                        pid: 9,
                        job: Some(0),
                    },
                ],
                Idle,
            ),
            (
                "a report from before the job took the terminal is not the job's",
                vec![
                    report(Idle, None),
                    AgentEvent::Discovered {
                        name: "claude".into(),
                        kind: "claude".into(),
                        pid: 9,
                        job: Some(5),
                    },
                ],
                Unknown,
            ),
            (
                "a program's idle after its done keeps it done",
                vec![
                    report(Done, None),
                    AgentEvent::Report {
                        source: Source::Osc,
                        state: Idle,
                        reason: None,
                        name: None,
                        event: Some(signals::PROGRAM_STATUS_EVENT.into()),
                        session_id: None,
                    },
                ],
                Done,
            ),
            (
                "a dialog on screen means waiting on it",
                vec![report(Running, None), dialog(dialog::DialogKind::Permission)],
                AwaitingInput,
            ),
            (
                "an answered permission goes back to running",
                vec![
                    report(Running, None),
                    dialog(dialog::DialogKind::Permission),
                    AgentEvent::Dialog(None),
                ],
                Running,
            ),
            (
                "a picker opened after a turn closes back to done",
                vec![
                    report(Done, None),
                    dialog(dialog::DialogKind::Choice),
                    AgentEvent::Dialog(None),
                ],
                Done,
            ),
            (
                "a dialog after the exit means nothing",
                vec![report(Exited, None), dialog(dialog::DialogKind::Permission)],
                Exited,
            ),
            (
                "a send to a busy agent changes nothing",
                vec![report(Running, None), AgentEvent::Sent],
                Running,
            ),
        ];
        for (name, events, want) in cases {
            let (mut rec, mut inst) = record();
            for e in events {
                apply(&mut rec, &mut inst, e, (1, 1));
            }
            assert_eq!(rec.state, want, "{name}");
        }
    }

    #[test]
    fn transitions_only_on_change_and_heuristics_are_not_exact() {
        let (mut rec, mut inst) = record();
        assert_eq!(
            apply(&mut rec, &mut inst, AgentEvent::Progress(true), (5, 5)),
            Some(AgentState::Unknown)
        );
        assert!(!rec.exact && rec.source == Source::Heuristic && rec.since_ns == 5);
        assert_eq!(apply(&mut rec, &mut inst, AgentEvent::Progress(true), (6, 6)), None);
        assert_eq!(rec.since_ns, 5);
    }

    #[test]
    fn attention_order_and_summary() {
        let mk = |id, state| AgentRecord { id: ProcId(id), state, ..record().0 };
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
