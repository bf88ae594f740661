//! A verified connection to `portald` (over [`crate::transport`]).
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

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint};

use crate::transport::{self, Conn};

use portal_proto::v1::{GetInfoRequest, GetInfoResponse, portal_client::PortalClient};
use portal_proto::{MAX_MESSAGE_BYTES, PROTOCOL_VERSION};

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

/// Checks that `socket` and its directory are this user's and that nobody
/// else may write to either. A socket that does not exist yet is fine (the
/// daemon creates it); a directory that does not exist is fine too.
///
/// # Errors
/// [`ClientError::Untrusted`] naming the path and its owner.
pub fn verify_location(socket: &Path) -> Result<(), ClientError> {
    let me = crate::paths::uid();
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

/// Dials `socket` and refuses a peer running as another user (or one whose
/// user the kernel does not tell).
async fn dial(
    socket: PathBuf,
    refused: Arc<Mutex<Option<ClientError>>>,
) -> std::io::Result<TokioIo<Conn>> {
    let conn = transport::dial(&socket).await?;
    let me = crate::paths::uid();
    if conn.peer().uid != Some(me) {
        let peer =
            conn.peer().uid.map_or_else(|| "an unknown user".to_owned(), |u| format!("uid {u}"));
        let reason = format!("the process serving it runs as {peer}, not as you (uid {me})");
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

    /// Connects to `target`: this machine's daemon (started when
    /// `opts.autostart` and nothing answers), or a remote one over SSH.
    ///
    /// # Errors
    /// As [`crate::launch::connect_or_start`] or [`Client::connect_remote`].
    pub async fn connect_to(
        target: &crate::hosts::Target,
        opts: &crate::launch::LaunchOptions,
    ) -> Result<Self, ClientError> {
        match target {
            crate::hosts::Target::Local => crate::launch::connect_or_start(opts).await,
            crate::hosts::Target::Remote(r) => Self::connect_remote(r, opts.autostart).await,
        }
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

/// Who this process is, for the log's record of who typed what (see
/// [`set_identity`]).
static IDENTITY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Says who this process is ("claude-code 2.1.0 via portal-shim (pid
/// 812)", "portal-cli write (ada@laptop)"): every connection it makes
/// from now on tells the daemon (`Identify`), and a remote one tells the
/// far end's `dial-stdio` too, so a connection made again behind the
/// scenes is still this process's. The first call wins.
pub fn set_identity(who: String) {
    let _ = IDENTITY.set(who);
}

/// What [`set_identity`] set.
#[must_use]
pub fn identity() -> Option<&'static str> {
    IDENTITY.get().map(String::as_str)
}

/// Tells the daemon who this process is, when it was said; a daemon too
/// old to ask (UNIMPLEMENTED), or any refusal, is no reason to fail.
pub async fn identify(rpc: &mut PortalClient<Channel>) {
    if let Some(who) = identity() {
        let req = portal_proto::v1::IdentifyRequest { client: who.to_owned() };
        if let Err(s) = rpc.identify(req).await {
            tracing::debug!(status = %s.message(), "portald did not take this client's name");
        }
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
/// A daemon that refuses a call because it is going away says
/// [`portal_proto::NOTHING_DONE`]: such a call may be repeated as it is.
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
