//! Portal's client side: everything a client of `portald` shares, over the
//! wire contract of `portal-proto`. The daemon uses it too, for what both
//! ends must agree on: the paths, the transport's server side, the
//! environment variables they hand each other, the OSC 3008 record.
//!
//! - [`client`]: [`client::Client`], a verified connection to `portald` with
//!   the protocol-version check.
//! - [`transport`]: the platform seam for connections (Unix sockets, and
//!   named pipes by the same API), with each peer's credentials.
//! - [`launch`]: finding and auto-starting `portald` when nothing answers.
//! - [`hosts`]: which portald to talk to: this machine's, or another's
//!   named in the hosts file or by an `ssh://` URL.
//! - [`ssh`] and [`dial`]: the two ends of a connection to another
//!   machine's portald over the system `ssh` (`portal-cli dial-stdio`).
//! - [`workspace`]: a fleet of programs from `portal.toml`, up and down.
//! - [`paths`]: where the socket, the database and the daemon log live.
//! - [`names`]: the lowercase names clients show for the wire's enums.
//! - [`environ`]: the caller's environment a start carries.
//! - [`waits`]: one wait on several processes (the first to end, or all).
//! - [`osc3008`]: the in-band agent-state record a PTY carries.

pub mod client;
pub mod dial;
pub mod environ;
pub mod hosts;
pub mod launch;
pub mod names;
pub mod osc3008;
pub mod paths;
pub mod ssh;
pub mod transport;
pub mod waits;
pub mod workspace;
