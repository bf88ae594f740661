//! Workspaces: a fleet of programs described in one file (`portal.toml`),
//! brought up in dependency order, each waiting until it is ready, and
//! stopped in reverse; what `portal-cli up/down/status` and the shim's
//! `workspace_*` tools share.
//!
//! - [`file`]: the file read into checked types, errors naming the line.
//! - [`run`]: up, down and status through the daemon's API.

pub mod file;
pub mod run;

pub use file::{Member, Ready, Restart, Workspace, WorkspaceError, load, parse};
pub use run::{MemberState, Step, UpError, down, status, up};
