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

/// A failed call's status whose details carry `detail`: what clients
/// decide on (retry or not, how to word it), whatever the message says.
#[must_use]
pub fn status(
    code: tonic::Code,
    message: impl Into<String>,
    detail: &v1::ErrorDetail,
) -> tonic::Status {
    use prost::Message as _;
    tonic::Status::with_details(code, message, detail.encode_to_vec().into())
}

/// The detail a failed call's status carries: the default (nothing done
/// unknown, kind unspecified) when it carries none, as a status made by
/// the transport rather than the daemon.
#[must_use]
pub fn detail(status: &tonic::Status) -> v1::ErrorDetail {
    use prost::Message as _;
    v1::ErrorDetail::decode(status.details()).unwrap_or_default()
}
