//! End-to-end tests: a real `portald` (in-process, on a private socket and
//! database) driving real programs (`sh`, `cat`, `seq`, `python3`, `less`).
//! One integration binary; one module per area.
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod agents;
mod agents_crash;
mod capture;
mod changes;
mod clients;
mod codex_trust;
mod daemon;
mod disk;
mod errors;
mod input;
mod lifecycle;
mod load;
mod reads;
mod real_agents;
mod registry;
mod restarts;
mod screen;
mod screen_diff;
mod security;
mod sizes;
mod tidy;
mod vocab_names;
mod waits;
