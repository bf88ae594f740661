//! A verified connection to `portald`: this machine's, over
//! [`crate::transport`], or another machine's, over [`crate::ssh`].
//!
//! [`Client::connect`] verifies the daemon before sending it anything: the
//! socket's directory and the socket belong to this user and nobody else may
//! write to them, and the process on the other end of every connection
//! (`SO_PEERCRED`, checked by the client's own connector, so reconnects are
//! checked too) runs as this user. Another user who got to a shared path
//! first (`/tmp`) is refused with a message naming the path and its owner.
//! Then it calls `GetInfo` once and refuses a daemon speaking another
//! protocol version. The generated stub is available through
//! [`Client::rpc`]; it is cheap to clone (one HTTP/2 connection shared).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hyper_util::rt::TokioIo;
use portal_proto::v1::{GetInfoRequest, GetInfoResponse, portal_client::PortalClient};
use portal_proto::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
use tonic::transport::{Channel, Endpoint};

use crate::error::{ClientError, error_chain};
use crate::identity::{identify, identity};
use crate::transport::{self, Conn};

/// A connected, version-checked client.
#[derive(Clone, Debug)]
pub struct Client {
    rpc: PortalClient<Channel>,
    socket: PathBuf,
    info: GetInfoResponse,
    host: Option<String>,
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

/// On Windows a pipe name is no file and has no directory: who may serve
/// and open it is the pipe's own security descriptor, and the server's
/// user is checked on every connection (see `dial`).
///
/// # Errors
/// None on Windows.
#[cfg(windows)]
#[allow(clippy::unnecessary_wraps, reason = "the same signature as on Unix")]
pub fn verify_location(_socket: &Path) -> Result<(), ClientError> {
    Ok(())
}

/// Checks that `socket` and its directory are this user's and that nobody
/// else may write to either. A socket that does not exist yet is fine (the
/// daemon creates it); a directory that does not exist is fine too.
///
/// # Errors
/// [`ClientError::Untrusted`] naming the path and its owner.
#[cfg(unix)]
pub fn verify_location(socket: &Path) -> Result<(), ClientError> {
    use std::os::unix::fs::MetadataExt as _;
    let me = crate::user::current();
    let dir = socket.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let check = |path: &Path, what: &str| -> Result<(), ClientError> {
        let Ok(meta) = std::fs::metadata(path) else { return Ok(()) };
        let untrusted =
            |reason: String| ClientError::Untrusted { path: path.to_path_buf(), reason };
        if meta.uid() != me {
            return Err(untrusted(format!(
                "the {what} belongs to uid {}, not to you (uid {me})",
                meta.uid()
            )));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(untrusted(format!(
                "others may write to the {what} (mode {:o})",
                meta.mode() & 0o7777
            )));
        }
        Ok(())
    };
    check(dir, "socket's directory")?;
    check(socket, "socket")
}

/// Checks `socket` and dials it as [`Client::connect`] does, for a caller
/// that pipes bytes rather than speaking gRPC (`dial-stdio`).
///
/// # Errors
/// As [`Client::connect`], before any byte is sent.
pub async fn dial_verified(socket: &Path) -> Result<Conn, ClientError> {
    check_socket_path(socket)?;
    verify_location(socket)?;
    let refused = Arc::new(Mutex::new(None));
    match dial(socket.to_path_buf(), Arc::clone(&refused)).await {
        Ok(io) => Ok(io.into_inner()),
        Err(e) => Err(refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .unwrap_or_else(|| ClientError::Unavailable {
                socket: socket.to_path_buf(),
                reason: e.to_string(),
            })),
    }
}

/// What a user id is called in messages.
const USER: &str = if cfg!(windows) { "user" } else { "uid" };

/// Dials `socket` and refuses a peer running as another user (or one whose
/// user the kernel does not tell).
async fn dial(
    socket: PathBuf,
    refused: Arc<Mutex<Option<ClientError>>>,
) -> std::io::Result<TokioIo<Conn>> {
    let conn = transport::dial(&socket).await?;
    let me = crate::user::current();
    if conn.peer().uid != Some(me) {
        let peer =
            conn.peer().uid.map_or_else(|| "an unknown user".to_owned(), |u| format!("{USER} {u}"));
        let reason = format!("the process serving it runs as {peer}, not as you ({USER} {me})");
        let msg = format!("{}: {reason}", socket.display());
        *refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(ClientError::Untrusted { path: socket, reason });
        return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, msg));
    }
    Ok(TokioIo::new(conn))
}

impl Client {
    /// Verifies the daemon at `socket`, connects and checks its protocol
    /// version.
    ///
    /// # Errors
    /// [`ClientError::Untrusted`] when the socket or its server is not this
    /// user's, [`ClientError::Unavailable`] when nothing answers,
    /// [`ClientError::VersionMismatch`].
    pub async fn connect(socket: &Path) -> Result<Self, ClientError> {
        check_socket_path(socket)?;
        verify_location(socket)?;
        let unavailable =
            |reason: String| ClientError::Unavailable { socket: socket.to_path_buf(), reason };
        // The URI only names the connection to HTTP/2; the connector dials.
        let endpoint = Endpoint::from_static("http://localhost");
        let refused = Arc::new(Mutex::new(None));
        let connector = {
            let (socket, refused) = (socket.to_path_buf(), Arc::clone(&refused));
            let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
            tower::service_fn(move |_: tonic::transport::Uri| {
                let (socket, refused, first) =
                    (socket.clone(), Arc::clone(&refused), Arc::clone(&first));
                async move {
                    let io = dial(socket.clone(), refused).await?;
                    // The channel dials again by itself after a daemon went
                    // away (an upgrade, a crash): the new daemon hears who
                    // this process is before the call that made it dial.
                    if !first.swap(false, std::sync::atomic::Ordering::Relaxed) {
                        tell_who(&socket).await;
                    }
                    Ok::<_, std::io::Error>(io)
                }
            })
        };
        let channel = match endpoint.connect_with_connector(connector).await {
            Ok(c) => c,
            Err(e) => {
                let refusal =
                    refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
                return Err(refusal.unwrap_or_else(|| unavailable(error_chain(&e))));
            }
        };
        let (rpc, info) = greet(channel).await.map_err(|s| match s.code() {
            tonic::Code::PermissionDenied => ClientError::Refused {
                socket: socket.to_path_buf(),
                reason: s.message().to_owned(),
            },
            _ => unavailable(format!("GetInfo failed: {}", s.message())),
        })?;
        if info.protocol_version != PROTOCOL_VERSION {
            return Err(ClientError::VersionMismatch {
                socket: socket.to_path_buf(),
                client: PROTOCOL_VERSION,
                daemon: info.protocol_version,
                daemon_version: info.daemon_version,
            });
        }
        Ok(Self { rpc, socket: socket.to_path_buf(), info, host: None })
    }

    /// Connects to the portald of another machine over SSH ([`crate::ssh`]),
    /// which starts it there when `autostart` and nothing answers. The
    /// connection is one ssh process, shared by every call of this client
    /// (and its clones); when it breaks, the next call starts another.
    ///
    /// # Errors
    /// The ssh failures of [`crate::ssh::dial`], or
    /// [`ClientError::RemoteFailed`] when the remote daemon does not answer.
    pub async fn connect_remote(
        remote: &crate::hosts::Remote,
        autostart: bool,
    ) -> Result<Self, ClientError> {
        let endpoint = Endpoint::from_static("http://localhost");
        let failed = Arc::new(Mutex::new(None));
        let connector = {
            let (remote, failed) = (remote.clone(), Arc::clone(&failed));
            tower::service_fn(move |_: tonic::transport::Uri| {
                let (remote, failed) = (remote.clone(), Arc::clone(&failed));
                async move {
                    match crate::ssh::dial(&remote, autostart).await {
                        Ok(conn) => Ok(TokioIo::new(conn)),
                        Err(e) => {
                            let msg = e.to_string();
                            *failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                                Some(e);
                            Err(std::io::Error::other(msg))
                        }
                    }
                }
            })
        };
        let host = remote.label.clone();
        let remote_failed =
            |message: String| ClientError::RemoteFailed { host: host.clone(), message };
        let channel = match endpoint.connect_with_connector(connector).await {
            Ok(c) => c,
            Err(e) => {
                let why = failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
                return Err(why.unwrap_or_else(|| remote_failed(error_chain(&e))));
            }
        };
        let (rpc, info) = greet(channel)
            .await
            .map_err(|s| remote_failed(format!("GetInfo failed: {}", s.message())))?;
        if info.protocol_version != PROTOCOL_VERSION {
            return Err(ClientError::VersionSkew {
                host: host.clone(),
                local_protocol: PROTOCOL_VERSION,
                local_version: env!("CARGO_PKG_VERSION").to_owned(),
                remote_protocol: Some(info.protocol_version),
                remote_version: info.daemon_version,
            });
        }
        let socket = PathBuf::from(&info.socket);
        Ok(Self { rpc, socket, info, host: Some(host) })
    }

    /// The remote host's label, or `None` for this machine.
    #[must_use]
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// The generated stub (a cheap clone sharing the connection).
    #[must_use]
    pub fn rpc(&self) -> PortalClient<Channel> {
        self.rpc.clone()
    }

    /// The socket this client is connected to (on the remote host, for a
    /// remote client).
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

/// [`identify`] over a connection of its own (the daemon knows clients by
/// their process, whichever connection they speak on), bounded: a daemon
/// that does not answer soon is told nothing.
async fn tell_who(socket: &Path) {
    if identity().is_none() {
        return;
    }
    let refused = Arc::new(Mutex::new(None));
    let Ok(io) = dial(socket.to_path_buf(), refused).await else { return };
    let slot = Arc::new(Mutex::new(Some(io)));
    let connector = tower::service_fn(move |_: tonic::transport::Uri| {
        let io = slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        async move { io.ok_or_else(|| std::io::Error::other("one connection only")) }
    });
    let told = async {
        let channel =
            Endpoint::from_static("http://localhost").connect_with_connector(connector).await;
        if let Ok(channel) = channel {
            identify(&mut PortalClient::new(channel)).await;
        }
    };
    if tokio::time::timeout(TELL_WHO_TIMEOUT, told).await.is_err() {
        tracing::debug!("portald did not take this client's name in time");
    }
}

/// How long a reconnection waits for the daemon to take the client's name.
const TELL_WHO_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The stub over `channel` and the daemon's `GetInfo`, its first call;
/// then who this process is.
async fn greet(
    channel: Channel,
) -> Result<(PortalClient<Channel>, GetInfoResponse), tonic::Status> {
    let mut rpc = PortalClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let info = rpc.get_info(GetInfoRequest {}).await?.into_inner();
    if info.protocol_version == PROTOCOL_VERSION {
        identify(&mut rpc).await;
    }
    Ok((rpc, info))
}
