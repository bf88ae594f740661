//! Why a client could not talk to `portald`, as one type for every way it
//! can fail ([`ClientError`]: the local socket and its owner, auto-start,
//! ssh and the remote side), and how a failed call reads:
//! [`error_chain`], [`is_disconnect`]. Every other module's errors end
//! here, so it imports none of them.

use std::path::PathBuf;

/// Why a client could not talk to the daemon.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing answered on the socket.
    #[error("cannot reach portald at {}: {reason}", socket.display())]
    Unavailable {
        /// The socket that was tried.
        socket: PathBuf,
        /// What went wrong, as text (connection errors carry no useful type).
        reason: String,
    },
    /// The daemon speaks another protocol version.
    #[error(
        "portald at {} speaks protocol {daemon} (version {daemon_version}) but this client speaks {client}; restart the daemon with `portal-cli daemon stop`",
        socket.display()
    )]
    VersionMismatch {
        /// The socket.
        socket: PathBuf,
        /// This client's protocol version.
        client: u32,
        /// The daemon's protocol version.
        daemon: u32,
        /// The daemon's crate version.
        daemon_version: String,
    },
    /// The socket path is too long for a Unix socket address.
    #[error("socket path {} is {len} bytes; Unix sockets allow at most {max}", socket.display())]
    SocketPathTooLong {
        /// The socket.
        socket: PathBuf,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The daemon refused this client (another user's daemon).
    #[error("portald at {} refused this client: {reason}", socket.display())]
    Refused {
        /// The socket.
        socket: PathBuf,
        /// The daemon's message.
        reason: String,
    },
    /// The socket, its directory or the process serving it belongs to
    /// someone else: nothing was sent.
    #[error(
        "refusing to talk to {}: {reason}; nothing was sent. Remove it if it is not yours, or set PORTAL_SOCKET to a path in a private directory",
        path.display()
    )]
    Untrusted {
        /// The path that failed the check.
        path: PathBuf,
        /// Why, naming the owner.
        reason: String,
    },
    /// The daemon could not be started.
    #[error("cannot start portald: {0}")]
    Launch(String),
    /// ssh could not reach a remote host.
    #[error(
        "cannot reach host {host}: {detail}\nhint: check that `{ssh} true` works from here (is the host up, are the address and port right?)"
    )]
    HostUnreachable {
        /// The host's label.
        host: String,
        /// What ssh said.
        detail: String,
        /// The ssh command that reaches it, for a person to try.
        ssh: String,
    },
    /// ssh reached the host but may not log in (or does not trust its key).
    #[error("host {host} refused the login: {detail}\nhint: {}", login_hint(detail, ssh))]
    AuthRefused {
        /// The host's label.
        host: String,
        /// What ssh said.
        detail: String,
        /// The ssh command that reaches it, for a person to try.
        ssh: String,
    },
    /// The remote login could not run `portal-cli`.
    #[error(
        "portal-cli is not installed on host {host} (running {command:?} there failed: {detail})\nhint: install Portal there (portal-cli, portald and portal-holder side by side: `cargo install --path portal-cli`, `--path portald` and `--path holder` from a checkout, or copy the three binaries), or set the path to portal-cli in the hosts file: [hosts] {host} = {{ url = \"ssh://…\", portal = \"/path/to/portal-cli\" }}"
    )]
    RemoteMissing {
        /// The host's label.
        host: String,
        /// The command that was run there.
        command: String,
        /// What the remote shell said.
        detail: String,
    },
    /// The two sides speak different protocol versions.
    #[error("{}", version_skew(host, *local_protocol, local_version, *remote_protocol, remote_version))]
    VersionSkew {
        /// The host's label.
        host: String,
        /// This side's protocol.
        local_protocol: u32,
        /// This side's crate version.
        local_version: String,
        /// The remote side's protocol (`None`: too old to say).
        remote_protocol: Option<u32>,
        /// The remote side's crate version, when it said.
        remote_version: String,
    },
    /// The remote side ran but could not serve (its portald would not
    /// start, say).
    #[error("portal on host {host} failed: {message}")]
    RemoteFailed {
        /// The host's label.
        host: String,
        /// What it said.
        message: String,
    },
}

/// What to do about a refused login: a host key ssh does not trust yet is
/// accepted by hand; a refused key needs a key that is accepted.
fn login_hint(detail: &str, ssh: &str) -> String {
    if detail.contains("Host key verification failed") || detail.contains("HOST IDENTIFICATION") {
        format!(
            "ssh does not trust this host's key: check it and accept it by running `{ssh}` once"
        )
    } else {
        format!(
            "Portal runs ssh without a password prompt (BatchMode): give it a key the host accepts (`ssh-copy-id`, an agent, IdentityFile in ~/.ssh/config); `{ssh}` must log in without asking"
        )
    }
}

/// The message of [`ClientError::VersionSkew`]: which side to upgrade.
fn version_skew(
    host: &str,
    local_protocol: u32,
    local_version: &str,
    remote_protocol: Option<u32>,
    remote_version: &str,
) -> String {
    let here =
        format!("this machine's portal-cli {local_version} speaks protocol {local_protocol}");
    match remote_protocol {
        Some(p) if p > local_protocol => format!(
            "{here} but host {host} runs Portal {remote_version} (protocol {p}): upgrade Portal on this machine"
        ),
        Some(p) => format!(
            "{here} but host {host} runs Portal {remote_version} (protocol {p}): upgrade Portal on {host}"
        ),
        None => format!(
            "{here} but the portal-cli on host {host} is too old to serve remote clients (it has no dial-stdio): upgrade Portal on {host}"
        ),
    }
}

/// Joins an error and its sources with `: `.
#[must_use]
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let s = e.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = e.source();
    }
    out
}

/// True when a status means the daemon went away (the call may be retried
/// after reconnecting). A connection that breaks mid-call surfaces as
/// `UNAVAILABLE`, or as `UNKNOWN`/`INTERNAL`/`CANCELLED` carrying a transport
/// message, depending on when it broke.
///
/// A daemon that refuses a call because it is going away marks the
/// status's detail ([`portal_proto::detail`]) `nothing_done`: such a call
/// may be repeated as it is.
#[must_use]
pub fn is_disconnect(status: &tonic::Status) -> bool {
    match status.code() {
        tonic::Code::Unavailable => true,
        tonic::Code::Unknown | tonic::Code::Internal | tonic::Code::Cancelled => {
            let m = status.message().to_ascii_lowercase();
            [
                "transport error",
                "connection",
                "broken pipe",
                "h2 protocol error",
                "error trying to connect",
                "operation was canceled",
            ]
            .iter()
            .any(|k| m.contains(k))
        }
        _ => false,
    }
}
