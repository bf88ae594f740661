//! Agent state: which coding agent runs in which PTY, and what it is doing.
//!
//! Every PTY process has an agent record. Signals feed it: hook reports
//! (`portal-cli emit` over the socket), OSC 3008 records in the output,
//! heuristics (bells, OSC 9 / 9;4 / 777 notifications), and exact process
//! facts (the child's exit; the PTY's foreground process group entering or
//! leaving a recognised agent). Every change goes through the pure reducer
//! [`reducer::apply`], whose guard table is unit-tested:
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
//!
//! Here: the module's parts, re-exported. `reducer.rs`: the records, the
//! events and the reducer; `book.rs`: the book of every process's record,
//! its transitions and wake-ups; `wait.rs`: waiting for agents to reach a
//! state; `rebuild.rs`: records of adopted programs; `signals.rs`: decoding
//! the signals; `dialog.rs`: finding a dialog on a screen; `hooks/`:
//! installing the agents' hooks.

mod book;
pub(crate) mod dialog;
pub(crate) mod hooks;
pub(crate) mod rebuild;
mod reducer;
pub(crate) mod signals;
mod wait;

pub(crate) use book::{Agents, summary};
pub(crate) use reducer::{AgentEvent, AgentRecord};
pub(crate) use wait::{Mode, WaitOutcome, WaitsForInput, wait_fleet, wait_one};

pub(crate) use crate::domain::{AgentState, Source, Transition};
