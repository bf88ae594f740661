//! Agent records for programs a daemon adopts: rebuilt from what the last
//! daemon left behind, then checked against what is true now.
//!
//! A live upgrade leaves each program's record with the holder; a daemon
//! killed with SIGKILL leaves nothing there but the token, and the record a
//! handover left may be from an upgrade long before the crash. What every
//! daemon leaves is the log of transitions (`agent_events`), so the newest
//! of the two wins: the carried record only while no newer transition of
//! its process was logged (compared by sequence number), else the newest
//! logged transition (its state, source, name and reason).
//!
//! That is what was true when the last daemon stopped; the checks say what
//! is true now, each as the event the sweep would have applied, so a change
//! found here is a transition in the log like any other:
//! - the program itself recognised as an agent (by its command line) is the
//!   agent, as at a start;
//! - a recognised agent holding the terminal as a job is the agent;
//! - an interactive shell holding its terminal again means the agent that
//!   ran as its job has left (an interactive shell is never the agent);
//! - a dialog on the screen (rebuilt from the log's tail) means waiting on
//!   it; a dialog the screen had found before and no longer shows was
//!   answered (one an agent reported itself stands until it reports again);
//! - a program that ended meanwhile is ended by its actor, which applies
//!   the exit the holder kept.

use crate::agents::dialog::{self, Dialog};
use crate::agents::reducer::{AgentEvent, AgentRecord, DIALOG_REASONS, Instance};
use crate::agents::signals;
use crate::domain::{AgentState, ProcId, Source, TermSize, Transition};

/// What a daemon knows of a PTY program it adopts.
pub(crate) struct Adopted {
    /// Process id.
    pub(crate) id: ProcId,
    /// The program's pid (it leads its session and its own group).
    pub(crate) pid: u32,
    /// Its command line as it was started.
    pub(crate) argv: Vec<String>,
    /// Its terminal's size.
    pub(crate) size: TermSize,
    /// The record a handover left with the holder, if any.
    pub(crate) carried: Option<AgentRecord>,
    /// The log's tail its screen is rebuilt from, and the offset it ends at.
    pub(crate) screen: Option<(Vec<u8>, u64)>,
}

/// Who holds the terminal now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Foreground {
    /// The program's own group.
    Own,
    /// A job: its group, and the agent its leader is recognised as.
    Job {
        /// The job's process group.
        pgrp: u32,
        /// The agent it is, if recognised.
        agent: Option<(String, String)>,
    },
}

/// What is true of an adopted program now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Facts {
    /// The program itself recognised as an agent (name, kind).
    pub(crate) program_agent: Option<(String, String)>,
    /// The program is an interactive shell (it runs agents as jobs).
    pub(crate) interactive_shell: bool,
    /// Who holds the terminal (`None`: not known, e.g. the program ended).
    pub(crate) foreground: Option<Foreground>,
    /// What the screen shows (`None`: not looked at).
    pub(crate) dialog: Option<Option<Dialog>>,
}

/// Shells, which run agents as jobs when started without a script.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "fish", "ksh", "mksh", "ash"];

/// Whether `argv` starts an interactive shell: a shell with no command
/// (`-c`) and no script, only options.
fn is_interactive_shell(argv: &[String]) -> bool {
    let Some(first) = argv.first() else { return false };
    let base = first.rsplit('/').next().unwrap_or(first).trim_start_matches('-');
    SHELLS.contains(&base) && argv[1..].iter().all(|a| a.starts_with('-') && a != "-c")
}

/// The foreground process group of `pid`'s terminal (`tpgid`, field 8 of
/// `/proc/<pid>/stat`, read after the last `)` since the command name may
/// hold any character).
fn terminal_foreground(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    let tpgid: i64 = rest.split_ascii_whitespace().nth(5)?.parse().ok()?;
    u32::try_from(tpgid).ok().filter(|p| *p > 0)
}

impl Facts {
    /// Looks at the process table and, when `look_at_screen`, at the screen
    /// rebuilt from the log's tail. Blocking: `/proc` reads and a parse.
    pub(crate) fn look(adopted: &Adopted, look_at_screen: bool) -> Self {
        let program_agent = signals::identify(&adopted.argv, None);
        let foreground = terminal_foreground(adopted.pid).map(|pgrp| {
            if pgrp == adopted.pid {
                Foreground::Own
            } else {
                let agent = crate::sys::command_line(pgrp)
                    .and_then(|(argv, exe)| signals::identify(&argv, exe.as_deref()));
                Foreground::Job { pgrp, agent }
            }
        });
        let dialog = adopted.screen.as_ref().filter(|_| look_at_screen).map(|(bytes, offset)| {
            let start = offset.saturating_sub(bytes.len() as u64);
            let snap = crate::screen::replay(adopted.id, adopted.size, bytes, start);
            dialog::find(&snap.lines)
        });
        Self {
            program_agent,
            interactive_shell: is_interactive_shell(&adopted.argv),
            foreground,
            dialog,
        }
    }
}

/// The record a logged transition describes, `now` being (wall, monotonic).
fn from_log(t: &Transition, now: (i64, i64)) -> AgentRecord {
    // A transition to `exited` by the lifecycle alone (the program's own
    // exit) says nothing made it an agent; anything else did.
    let is_agent =
        t.name.is_some() || t.source != Source::Lifecycle || t.after != AgentState::Exited;
    AgentRecord {
        id: t.id,
        name: t.name.clone(),
        kind: None,
        state: t.after,
        source: t.source,
        // Only guesses are inexact (see `apply`).
        exact: t.source != Source::Heuristic,
        reason: t.reason.clone(),
        event: None,
        session_id: None,
        pid: None,
        since_ns: t.at_ns,
        since_mono_ns: now.1.saturating_sub(now.0.saturating_sub(t.at_ns).max(0)),
        is_agent,
        dialog: None,
        seq: t.seq,
    }
}

/// The newest of what the last daemon knew: the carried record unless the
/// log holds a newer transition of the process. `None`: nothing is known.
pub(crate) fn newest(
    carried: Option<AgentRecord>,
    logged: Option<&Transition>,
    now: (i64, i64),
) -> Option<AgentRecord> {
    match (carried, logged) {
        (Some(c), Some(t)) => {
            // A record carried by a daemon that did not number its
            // transitions is compared by the wall clock of its last change,
            // which is the transition's own.
            let log_is_newer = if c.seq > 0 { t.seq > c.seq } else { t.at_ns > c.since_ns };
            if !log_is_newer {
                return Some(c);
            }
            let mut rec = from_log(t, now);
            if c.name == rec.name {
                // The same agent, later: what only the record kept still holds.
                rec.kind = c.kind;
                rec.session_id = c.session_id;
            }
            Some(rec)
        }
        (Some(c), None) => Some(c),
        (None, Some(t)) => Some(from_log(t, now)),
        (None, None) => None,
    }
}

/// Sets what `facts` say of the agent's identity on `rec` and `inst`, and
/// returns the events that bring its state in line with them.
pub(crate) fn check(
    rec: &mut AgentRecord,
    inst: &mut Instance,
    pid: u32,
    facts: &Facts,
) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    let live = rec.state != AgentState::Exited;
    // An agent that spoke for itself outranks guesses for the rest of its
    // instance, as it did before.
    inst.authoritative = live && matches!(rec.source, Source::Hook | Source::Osc);
    inst.foreground = false;
    if let Some((name, kind)) = &facts.program_agent {
        rec.is_agent = true;
        rec.name.get_or_insert_with(|| name.clone());
        rec.kind = Some(kind.clone());
        rec.pid = Some(pid);
    } else if let Some(Foreground::Job { pgrp, agent: Some((name, kind)) }) = &facts.foreground {
        // An ended record is left to the sweep, which finds a new instance.
        if live {
            rec.is_agent = true;
            rec.name.get_or_insert_with(|| name.clone());
            rec.kind = Some(kind.clone());
            rec.pid = Some(*pgrp);
            inst.foreground = true;
        }
    } else if facts.foreground == Some(Foreground::Own)
        && facts.interactive_shell
        && live
        && rec.is_agent
    {
        // The agent was a job of this shell, and the shell has the terminal
        // back: it left while no daemon watched.
        inst.foreground = true;
        events.push(AgentEvent::ForegroundLeft);
        return events;
    }
    match &facts.dialog {
        Some(Some(found)) => events.push(AgentEvent::Dialog(Some(found.clone()))),
        Some(None) => {
            let from_screen = rec.state == AgentState::AwaitingInput
                && rec.source == Source::Heuristic
                && rec.reason.as_deref().is_some_and(|r| DIALOG_REASONS.contains(&r));
            if from_screen {
                // The log keeps no dialog text: the dialog it waited on is
                // taken as shown, so the screen without it answers it, as
                // the sweep would have.
                rec.dialog = Some(String::new());
                events.push(AgentEvent::Dialog(None));
            }
        }
        None => {}
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transition(seq: u64, after: AgentState, source: Source, reason: Option<&str>) -> Transition {
        Transition {
            seq,
            id: ProcId(3),
            before: AgentState::Unknown,
            after,
            source,
            name: Some("claude".into()),
            reason: reason.map(str::to_owned),
            at_ns: 1_000 + i64::try_from(seq).unwrap_or(0),
        }
    }

    fn carried(seq: u64, state: AgentState) -> AgentRecord {
        AgentRecord {
            kind: Some("claude".into()),
            session_id: Some("s".into()),
            pid: Some(77),
            state,
            seq,
            since_ns: 1_000 + i64::try_from(seq).unwrap_or(0),
            name: Some("claude".into()),
            is_agent: true,
            ..AgentRecord::new(ProcId(3), 0, 0)
        }
    }

    const NOW: (i64, i64) = (5_000, 9_000);

    #[test]
    fn the_newest_of_the_carried_record_and_the_log_wins() {
        use AgentState::*;
        let log = |seq, state| transition(seq, state, Source::Osc, None);
        // A handover meta older than the log's newest transition loses.
        let r = newest(Some(carried(4, Done)), Some(&log(9, AwaitingInput)), NOW).unwrap();
        assert_eq!((r.state, r.seq, r.kind.as_deref()), (AwaitingInput, 9, Some("claude")));
        // A carried record as new as the log keeps what only it knew.
        let r = newest(Some(carried(9, Done)), Some(&log(9, Done)), NOW).unwrap();
        assert_eq!((r.state, r.pid), (Done, Some(77)));
        // A record from a daemon that numbered nothing: by the clock.
        let r = newest(Some(carried(0, Done)), Some(&log(9, Running)), NOW).unwrap();
        assert_eq!(r.state, Running);
        // After a crash with no handover: the log alone, as it was logged.
        let r = newest(None, Some(&log(9, AwaitingInput)), NOW).unwrap();
        assert_eq!(
            (r.state, r.source, r.exact, r.is_agent),
            (AwaitingInput, Source::Osc, true, true)
        );
        assert_eq!(r.since_mono_ns, NOW.1 - (NOW.0 - 1_009));
        // A program's own exit alone made no agent.
        let mut exit = transition(2, Exited, Source::Lifecycle, Some("exit 0"));
        exit.name = None;
        assert!(!newest(None, Some(&exit), NOW).unwrap().is_agent);
        assert_eq!(newest(None, None, NOW), None);
    }

    fn rebuilt(t: &Transition, facts: &Facts) -> (AgentRecord, Vec<AgentEvent>) {
        let mut rec = newest(None, Some(t), NOW).unwrap();
        let mut inst = Instance::default();
        let events = check(&mut rec, &mut inst, 50, facts);
        for e in events.clone() {
            crate::agents::reducer::apply(&mut rec, &mut inst, e, NOW);
        }
        (rec, events)
    }

    #[test]
    fn checks_against_the_process_table_and_the_screen() {
        use AgentState::*;
        let claude = Some(("claude".to_owned(), "claude".to_owned()));
        let done = transition(5, Done, Source::Hook, None);
        // The program is the agent: its identity, its logged state.
        let facts = Facts { program_agent: claude.clone(), ..Facts::default() };
        let (rec, events) = rebuilt(&done, &facts);
        assert_eq!((rec.state, rec.kind.as_deref(), rec.pid), (Done, Some("claude"), Some(50)));
        assert!(events.is_empty());
        // A job that is still the agent keeps its state and gets its group.
        let job = Some(Foreground::Job { pgrp: 61, agent: claude });
        let facts = Facts { interactive_shell: true, foreground: job, ..Facts::default() };
        let (rec, _) = rebuilt(&done, &facts);
        assert_eq!((rec.state, rec.pid), (Done, Some(61)));
        // The shell holds its terminal again: the agent left meanwhile.
        let facts = Facts {
            interactive_shell: true,
            foreground: Some(Foreground::Own),
            ..Facts::default()
        };
        let (rec, _) = rebuilt(&done, &facts);
        assert_eq!((rec.state, rec.reason.as_deref()), (Exited, Some("left the foreground")));
        // A program that reports for itself (not a shell) keeps its state.
        let facts = Facts { foreground: Some(Foreground::Own), ..Facts::default() };
        assert_eq!(rebuilt(&done, &facts).0.state, Done);
        // A dialog on the screen now means waiting on it.
        let shown = Dialog { kind: dialog::DialogKind::Permission, text: "Proceed?".into() };
        let facts = Facts { dialog: Some(Some(shown)), ..Facts::default() };
        let (rec, _) = rebuilt(&transition(6, Running, Source::Osc, None), &facts);
        assert_eq!((rec.state, rec.reason.as_deref()), (AwaitingInput, Some("permission")));
        assert_eq!(rec.dialog.as_deref(), Some("Proceed?"));
        // A dialog the screen had shown and shows no more was answered.
        let asked = transition(7, AwaitingInput, Source::Heuristic, Some("permission"));
        let facts = Facts { dialog: Some(None), ..Facts::default() };
        let (rec, _) = rebuilt(&asked, &facts);
        assert_eq!((rec.state, rec.dialog.as_deref()), (Running, None));
        // One the agent reported itself stands until it reports again.
        let reported = transition(8, AwaitingInput, Source::Hook, Some("permission"));
        assert_eq!(rebuilt(&reported, &facts).0.state, AwaitingInput);
    }

    #[test]
    fn interactive_shells_are_told_from_scripts() {
        let argv = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(is_interactive_shell(&argv(&["sh", "-i"])));
        assert!(is_interactive_shell(&argv(&["/bin/bash"])));
        assert!(is_interactive_shell(&argv(&["-bash"])));
        assert!(!is_interactive_shell(&argv(&["sh", "-c", "read x"])));
        assert!(!is_interactive_shell(&argv(&["bash", "agent.sh"])));
        assert!(!is_interactive_shell(&argv(&["python3"])));
    }
}
