//! Portal's wire contract: the messages and gRPC service generated from
//! `portal/v1/portal.proto` ([`v1`], the only API between `portald` and its
//! clients) and the constants both ends must agree on. Everything a client
//! does with them (connecting, auto-starting, other hosts, workspaces) is
//! `portal-client`'s.

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

/// What a daemon that is going away (a stop, a live upgrade) says in the
/// status of a call it refused without doing anything: a client that finds
/// it in the message may repeat the call as it is.
pub const NOTHING_DONE: &str = "nothing was done: retry";
