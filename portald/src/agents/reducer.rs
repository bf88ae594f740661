//! An agent record and the pure reducer that applies each signal to it.
//!
//! Every change goes through [`apply`], whose guard table is unit-tested
//! (see the rules in the parent module); it touches nothing but the record
//! and the instance it is given, at the time it is given.

use crate::agents::dialog;
use crate::domain::{AgentState, ProcId, Source};

/// The event name reports from OSC 7501 carry, for the reducer's guard
/// (an `idle` right after `done` keeps the finished turn `done`).
pub(crate) const PROGRAM_STATUS_EVENT: &str = "osc7501";

/// Wall-clock and monotonic time (ns) now, as the reducer takes it.
pub(crate) fn now() -> (i64, i64) {
    (crate::sys::wall_ns(), crate::sys::monotonic_ns())
}

/// An agent record (carried to the next daemon at a live upgrade).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct AgentRecord {
    /// Process id.
    pub(crate) id: ProcId,
    /// Name (from discovery or reports).
    pub(crate) name: Option<String>,
    /// Kind recognised by discovery.
    pub(crate) kind: Option<String>,
    /// What the agent is doing, as last decided.
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
    /// transition in the log (see [`crate::agents::rebuild`]).
    #[serde(default)]
    pub(crate) seq: u64,
}

impl AgentRecord {
    /// The record of a PTY process no agent has spoken for yet.
    pub(crate) fn new(id: ProcId, since_ns: i64, since_mono_ns: i64) -> Self {
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
        /// Why, in the reporter's words (`permission`, `idle_reminder`).
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
        /// The agent's name as recognised (`claude`, `codex`).
        name: String,
        /// Which known agent it is (today the same word as the name).
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
        /// The signal that ended it, if one did.
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
            let program_idle =
                event.as_deref() == Some(PROGRAM_STATUS_EVENT) && state == AgentState::Idle;
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
                        event: Some(PROGRAM_STATUS_EVENT.into()),
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
}
