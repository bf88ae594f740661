//! The real `portal-shim` binary driven over stdio by an MCP client (rmcp's),
//! against a real `portald`. One test binary; one module per area: the tool
//! surface, programs and their output, results and errors, waits, agents,
//! workspaces, other hosts, and the shim's connections (auto-start,
//! reconnection, survival of a shim crash, its client on stdio).
#![allow(clippy::unwrap_used, reason = "a test fails loudly on the first unexpected error")]

mod agents;
mod common;
mod connections;
mod processes;
mod remote;
mod results;
mod tools;
mod waits;
mod workspace;
