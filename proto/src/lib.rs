//! Portal's wire contract and what every client shares.
//!
//! - [`v1`]: the messages and the tonic client and server generated from
//!   `portal/v1/portal.proto`, the only API between `portald` and its clients.
//! - [`client`]: [`client::Client`], a verified connection to `portald` with
//!   the protocol-version check.
//! - [`transport`]: the platform seam for connections (Unix sockets, and
//!   named pipes by the same API), with each peer's credentials.
//! - [`launch`]: finding and auto-starting `portald` when nothing answers.
//! - [`hosts`]: which portald to talk to: this machine's, or another's
//!   named in the hosts file or by an `ssh://` URL.
//! - [`ssh`] and [`dial`]: the two ends of a connection to another
//!   machine's portald over the system `ssh` (`portal-cli dial-stdio`).
//! - [`paths`]: where the socket, the database and the daemon log live.
//! - [`names`]: the lowercase names clients show for the wire's enums.
//! - [`environ`]: the caller's environment a start carries.
//! - [`waits`]: one wait on several processes (the first to end, or all).

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

/// Generated protobuf messages and gRPC stubs for package `portal.v1`.
#[allow(
    clippy::all,
    clippy::pedantic,
    missing_docs,
    unreachable_pub,
    reason = "generated code; its documentation comes from the .proto comments"
)]
pub mod v1 {
    tonic::include_proto!("portal.v1");
}

/// Wire protocol version. Bump it on any incompatible change to the `.proto`;
/// clients refuse to talk to a daemon reporting another version.
pub const PROTOCOL_VERSION: u32 = 1;

/// Largest gRPC message either side accepts. Reads are capped at 4 MiB of data,
/// and writes at [`MAX_WRITE_BYTES`]; 32 MiB leaves room for framing and text
/// rendering (which can grow invalid UTF-8 threefold).
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// Largest single Write the daemon accepts. A program that never reads must
/// not make the daemon hold unbounded input; 16 MiB covers any paste.
pub const MAX_WRITE_BYTES: usize = 16 << 20;
