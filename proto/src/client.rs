//! A connection to `portald` over its Unix socket.
//!
//! [`Client::connect`] dials the socket, calls `GetInfo` once and refuses a
//! daemon speaking another protocol version. The generated stub is available
//! through [`Client::rpc`]; it is cheap to clone (one HTTP/2 connection shared).

use std::path::{Path, PathBuf};

use tonic::transport::{Channel, Endpoint};

use crate::v1::{GetInfoRequest, GetInfoResponse, portal_client::PortalClient};
use crate::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};

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
    /// The daemon could not be started.
    #[error("cannot start portald: {0}")]
    Launch(String),
}

/// A connected, version-checked client.
#[derive(Clone, Debug)]
pub struct Client {
    rpc: PortalClient<Channel>,
    socket: PathBuf,
    info: GetInfoResponse,
}

/// Checks that `socket` fits in `sun_path`.
///
/// # Errors
/// [`ClientError::SocketPathTooLong`].
pub fn check_socket_path(socket: &Path) -> Result<(), ClientError> {
    let len = socket.as_os_str().len();
    if len > crate::paths::MAX_SOCKET_PATH_BYTES {
        return Err(ClientError::SocketPathTooLong {
            socket: socket.to_path_buf(),
            len,
            max: crate::paths::MAX_SOCKET_PATH_BYTES,
        });
    }
    Ok(())
}

impl Client {
    /// Connects to the daemon at `socket` and checks its protocol version.
    ///
    /// # Errors
    /// [`ClientError::Unavailable`] when nothing answers, [`ClientError::VersionMismatch`].
    pub async fn connect(socket: &Path) -> Result<Self, ClientError> {
        check_socket_path(socket)?;
        let unavailable =
            |reason: String| ClientError::Unavailable { socket: socket.to_path_buf(), reason };
        let endpoint = Endpoint::from_shared(format!("unix://{}", socket.display()))
            .map_err(|e| unavailable(e.to_string()))?;
        let channel = endpoint.connect().await.map_err(|e| unavailable(error_chain(&e)))?;
        let mut rpc = PortalClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        let info = rpc
            .get_info(GetInfoRequest {})
            .await
            .map_err(|s| match s.code() {
                tonic::Code::PermissionDenied => ClientError::Refused {
                    socket: socket.to_path_buf(),
                    reason: s.message().to_owned(),
                },
                _ => unavailable(format!("GetInfo failed: {}", s.message())),
            })?
            .into_inner();
        if info.protocol_version != PROTOCOL_VERSION {
            return Err(ClientError::VersionMismatch {
                socket: socket.to_path_buf(),
                client: PROTOCOL_VERSION,
                daemon: info.protocol_version,
                daemon_version: info.daemon_version,
            });
        }
        Ok(Self { rpc, socket: socket.to_path_buf(), info })
    }

    /// The generated stub (a cheap clone sharing the connection).
    #[must_use]
    pub fn rpc(&self) -> PortalClient<Channel> {
        self.rpc.clone()
    }

    /// The socket this client is connected to.
    #[must_use]
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// What the daemon said at connect time.
    #[must_use]
    pub fn info(&self) -> &GetInfoResponse {
        &self.info
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
