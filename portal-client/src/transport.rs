//! The local transport between clients and `portald`: the platform seam for
//! connections.
//!
//! Everything above this module speaks of a [`Listener`] that yields
//! [`Conn`]s and of [`dial`]; nothing else in Portal names a socket type.
//! Both sit on the `interprocess` crate's local sockets, which are Unix
//! domain sockets on Unix and named pipes on Windows, so a Windows transport
//! is a name (`\\.\pipe\portald-<user>`) and a peer check, not a rewrite.
//!
//! On Unix the name is always a filesystem path (`GenericFilePath`), never
//! Linux's abstract namespace: an abstract socket has no file permissions,
//! and anyone in the network namespace could connect. The socket is created
//! mode 0600 before it listens (no umask race), a stale path is never
//! overwritten here (the daemon removes it under its lock), and the path is
//! left for the daemon to remove at shutdown rather than on drop.
//!
//! Each connection carries its peer's credentials ([`Peer`], from
//! `SO_PEERCRED` or its platform's equivalent), read once when the
//! connection is made; the server exposes them to every call as tonic
//! connect info, and the client checks them before it sends anything.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};

use interprocess::local_socket::tokio as local;
use interprocess::local_socket::traits::StreamCommon as _;
use interprocess::local_socket::traits::tokio::{Listener as _, Stream as _};
use interprocess::local_socket::{GenericFilePath, ListenerOptions, ToFsName as _};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::user::UserId;

/// Who is on the other end of a connection, as the kernel reports it.
/// `None` where the platform or the kernel does not say: callers fail closed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peer {
    /// The peer's effective user id (Unix) or token user (Windows).
    pub uid: Option<UserId>,
    /// The peer's process id.
    pub pid: Option<u32>,
}

/// One connection, client or server side.
#[derive(Debug)]
pub struct Conn {
    stream: local::Stream,
    peer: Peer,
}

impl Conn {
    fn new(stream: local::Stream) -> Self {
        let peer = stream.peer_creds().map(peer_of).unwrap_or_default();
        Self { stream, peer }
    }

    /// The peer's credentials, read when the connection was made.
    #[must_use]
    pub fn peer(&self) -> Peer {
        self.peer
    }
}

/// `SO_PEERCRED`'s uid and pid.
#[cfg(unix)]
fn peer_of(c: interprocess::local_socket::PeerCreds) -> Peer {
    Peer { uid: c.euid(), pid: c.pid().and_then(|p| u32::try_from(p).ok()) }
}

/// A named pipe tells the other end's process id (the client's to the
/// server, the server's to the client); its user is read from that
/// process's token. A process that has gone, or that this user may not
/// open, has no user: refused.
#[cfg(windows)]
fn peer_of(c: interprocess::local_socket::PeerCreds) -> Peer {
    let pid = c.pid();
    Peer { uid: pid.and_then(crate::user::of_process), pid }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The server passes each call the peer of the connection it came on.
impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer
    }
}

/// Connects to the daemon listening at `path`.
///
/// # Errors
/// When nothing listens there, or the path is not a valid name.
pub async fn dial(path: &Path) -> io::Result<Conn> {
    let name = path.to_fs_name::<GenericFilePath>()?;
    let stream = local::Stream::connect(name).await?;
    Ok(Conn::new(stream))
}

/// A listening endpoint (see the module docs for how it is made private).
#[derive(Debug)]
pub struct Listener(local::Listener);

/// The mode of the socket file: its owner only (the directory is 0700 too).
#[cfg(unix)]
const SOCKET_MODE: u32 = 0o600;

/// Listens at `path`, which must not exist. Must be called within a tokio
/// runtime.
///
/// # Errors
/// When the path exists (`AddrInUse`) or cannot be bound.
pub fn listen(path: &Path) -> io::Result<Listener> {
    let name = path.to_fs_name::<GenericFilePath>()?;
    let options = ListenerOptions::new().name(name).reclaim_name(false).try_overwrite(false);
    #[cfg(unix)]
    let options = {
        use interprocess::os::unix::local_socket::ListenerOptionsExt as _;
        options.mode(SOCKET_MODE)
    };
    #[cfg(windows)]
    let options = {
        use interprocess::os::windows::local_socket::ListenerOptionsExt as _;
        options.security_descriptor(owner_only()?)
    };
    let mut listener = options.create_tokio()?;
    // The daemon removes the socket itself, after its programs have ended.
    listener.do_not_reclaim_name_on_drop();
    Ok(Listener(listener))
}

/// A security descriptor that admits this user alone (`D:P`: protected,
/// nothing inherited; one ACE granting all access to the user's SID). Every
/// instance of the pipe gets it, and interprocess creates the pipe with
/// `PIPE_REJECT_REMOTE_CLIENTS` and the first instance with
/// `FILE_FLAG_FIRST_PIPE_INSTANCE`, so another user's pipe of the same name
/// makes this one fail rather than share it.
#[cfg(windows)]
fn owner_only() -> io::Result<interprocess::os::windows::security_descriptor::SecurityDescriptor> {
    let sddl = format!("D:P(A;;GA;;;{})", crate::user::current());
    let sddl = widestring::U16CString::from_str(&sddl)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    interprocess::os::windows::security_descriptor::SecurityDescriptor::deserialize(&sddl)
}

impl Listener {
    /// Waits for the next connection.
    ///
    /// # Errors
    /// When accepting fails (the listener stays usable).
    pub async fn accept(&self) -> io::Result<Conn> {
        self.0.accept().await.map(Conn::new)
    }

    /// A duplicate of the listening descriptor, for the daemon that replaces
    /// this one in place (a live upgrade): connections made meanwhile wait in
    /// the kernel's backlog instead of being refused.
    ///
    /// # Errors
    /// When the descriptor cannot be duplicated.
    #[cfg(unix)]
    pub fn duplicate_fd(&self) -> io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd as _;
        match &self.0 {
            local::Listener::UdSocket(l) => l.as_fd().try_clone_to_owned(),
        }
    }

    /// Listens on a descriptor an earlier daemon handed over (see
    /// [`Listener::duplicate_fd`]); the socket file stays as it is.
    ///
    /// # Errors
    /// When `fd` is not a listening socket. Must be called within a tokio
    /// runtime.
    #[cfg(unix)]
    pub fn from_inherited(fd: std::os::fd::OwnedFd) -> io::Result<Self> {
        use interprocess::os::unix::uds_local_socket::tokio::Listener as Uds;
        let mut listener = local::Listener::from(Uds::try_from(fd)?);
        listener.do_not_reclaim_name_on_drop();
        Ok(Self(listener))
    }

    /// Every connection, as a stream for tonic's `serve_with_incoming`.
    pub fn incoming(self) -> impl futures_core::Stream<Item = io::Result<Conn>> + Send {
        futures_util::stream::unfold(self, |listener| async move {
            let next = listener.accept().await;
            Some((next, listener))
        })
    }
}

#[cfg(all(test, unix))]
mod tests {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    #[tokio::test]
    async fn a_connection_carries_bytes_and_the_peers_uid_both_ways() {
        let dir = private_dir();
        let path = dir.path().join("t.sock");
        let listener = listen(&path).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, SOCKET_MODE, "private before anyone can connect");
        let server = tokio::spawn(async move {
            let mut conn = listener.accept().await.unwrap();
            let mut buf = [0u8; 4];
            conn.read_exact(&mut buf).await.unwrap();
            conn.write_all(b"pong").await.unwrap();
            (conn.peer(), buf)
        });
        let mut client = dial(&path).await.unwrap();
        client.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        client.read_exact(&mut buf).await.unwrap();
        let (server_saw, sent) = server.await.unwrap();
        assert_eq!((&buf, &sent), (b"pong", b"ping"));
        let me = crate::user::current();
        assert_eq!(client.peer().uid, Some(me));
        assert_eq!(server_saw.uid, Some(me));
        assert_eq!(server_saw.pid, Some(std::process::id()));
        // Left in place on drop: the daemon removes it after its programs.
        drop(client);
        assert!(path.exists());
    }

    #[tokio::test]
    async fn an_existing_path_is_never_overwritten() {
        let dir = private_dir();
        let path = dir.path().join("t.sock");
        std::fs::write(&path, b"not a socket").unwrap();
        let err = listen(&path).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AddrInUse, "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"not a socket");
    }

    /// A fresh directory under /tmp (socket paths are short).
    fn private_dir() -> tempfile::TempDir {
        tempfile::Builder::new().prefix("ptr").tempdir_in("/tmp").expect("a directory in /tmp")
    }
}
