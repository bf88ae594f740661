//! `portald`: Portal's daemon, as a library (the binary in `main.rs` is thin,
//! and tests run the daemon in-process).
//!
//! It starts programs on PTYs or pipes and keeps them running across client
//! restarts, logs every byte in and out to SQLite, keeps a live terminal
//! screen per PTY program, and serves all of it over gRPC on a Unix socket.
//!
//! Crate map:
//! - [`server`]: [`bind`] (directories, lock, database, socket) and [`serve`]
//!   (the gRPC server and the shutdown order).
//! - `grpc`: the service; wire ⇄ domain conversion and validation; the one
//!   error → status table; the peer-uid check.
//! - `daemon`: the domain facade the service calls. `domain`: the types
//!   every layer shares (process and stream ids, chunks, agent states); it
//!   imports nothing of the daemon.
//! - `registry`: id/name → process handle. `profiles`: built-in answers of
//!   the program registry (`program_query`) for common programs.
//! - `proc`: one actor per managed process (`proc::actor`), spawning and
//!   I/O threads (`proc::spawn`), signals.
//! - `reads`: paged reads and follow streams.
//! - `screen`: the terminal screen on its own thread. `ansi`: text rendering.
//! - `store`: the SQLite writer thread, schema and range reads.
//! - `search`: the full-text index of the log, its thread and searches.
//! - `sys`: every `unsafe` libc call.
//! - [`config`]: limits and settings.
//! - [`doctor`]: checking and repairing a damaged database.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod agents;
mod ansi;
mod changes;
pub mod config;
mod daemon;
pub mod doctor;
mod domain;
mod endpoint;
mod error;
#[cfg(test)]
mod fuzz;
mod grpc;
mod instance;
mod marks;
mod osc;
mod proc;
mod profiles;
mod reads;
mod registry;
mod screen;
mod search;
mod sends;
pub mod server;
mod store;
mod sys;
pub mod upgrade;
mod waits;

pub use config::Config;
pub use config::Retention;
pub use server::{Ended, Listener, StartError, bind, run, serve};

/// Detaches the daemon from whoever started it: a new session, so it has no
/// controlling terminal and survives the client and its terminal.
///
/// # Errors
/// When `setsid` fails (the process already leads a group).
pub fn detach() -> std::io::Result<()> {
    sys::setsid()
}
