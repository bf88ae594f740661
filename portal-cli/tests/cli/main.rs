//! The real `portal-cli` binary against a real `portald` on a private socket.
//! One test binary; one module per area: starting and seeing programs,
//! typing into them and waiting on them, agents, what is kept of their
//! output, installing Portal, help for people, and how the CLI fails.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod agents;
mod common;
mod failures;
mod help;
mod history;
mod input;
mod install;
mod processes;
