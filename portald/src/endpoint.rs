//! The daemon's socket while it serves: its private directory, every
//! listener's connections as the one stream the gRPC server takes, and the
//! socket bound again when someone deletes it.
//!
//! The socket lives in a runtime directory others clean (`/run/user/UID`
//! goes at logout, a tmp cleaner sweeps `/tmp`); the daemon and its log
//! live on. A daemon whose socket vanished is unreachable, and a client
//! that auto-starts one would find the database taken: so the daemon looks
//! at its path every [`CHECK_EVERY`] and, when nothing is there, binds it
//! again (directory included) and serves both listeners. A socket someone
//! else put at the path is left alone, and at shutdown the daemon removes
//! the path only if it is still the socket it bound.

use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use portal_client::transport::{Conn, Listener};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How often the socket's path is looked at: a `stat` a second costs
/// nothing, and a client started in the meantime waits for the daemon's
/// answer for several seconds (`launch`'s timeout) before giving up.
pub(crate) const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Connections accepted but not yet taken by the server: it takes them as
/// they come; a burst waits in the kernel's backlog beyond this.
const ACCEPTED_QUEUE: usize = 64;

/// A file's identity: device and inode.
type FileId = (u64, u64);

/// The socket this daemon serves.
#[derive(Debug)]
pub(crate) struct Endpoint {
    socket: PathBuf,
    /// The socket file this daemon bound (or inherited), to tell it from a
    /// file another process put at the path.
    ours: Mutex<Option<FileId>>,
    /// A duplicate of the newest listener, handed over at a live upgrade.
    current: Mutex<Option<OwnedFd>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn file_id(path: &Path) -> Option<FileId> {
    std::fs::symlink_metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// A directory Portal must keep private and cannot.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// It could not be created.
    #[error("creating the {what} directory {}: {source}", dir.display())]
    Create {
        /// Which directory (socket, data).
        what: &'static str,
        /// Where.
        dir: PathBuf,
        /// The OS's reason.
        #[source]
        source: std::io::Error,
    },
    /// It could not be looked at.
    #[error("reading {}: {source}", dir.display())]
    Read {
        /// Where.
        dir: PathBuf,
        /// The OS's reason.
        #[source]
        source: std::io::Error,
    },
    /// Another user owns it.
    #[error("refusing to use the {what} directory {}: it belongs to uid {owner}, not {me}", dir.display())]
    NotMine {
        /// Which directory.
        what: &'static str,
        /// Where.
        dir: PathBuf,
        /// Its owner.
        owner: u32,
        /// This user.
        me: u32,
    },
    /// Others may write to it.
    #[error("refusing to use the {what} directory {}: others may write to it (mode {mode:o}); use a private directory", dir.display())]
    Shared {
        /// Which directory.
        what: &'static str,
        /// Where.
        dir: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

/// Why the socket could not be bound.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// Its directory is not private.
    #[error(transparent)]
    Dir(#[from] DirError),
    /// Listening failed.
    #[error("binding {}: {source}", socket.display())]
    Listen {
        /// The socket.
        socket: PathBuf,
        /// The OS's reason.
        #[source]
        source: std::io::Error,
    },
}

/// Creates `dir` (0700) when missing and refuses one another user owns or
/// others may write to.
///
/// # Errors
/// Naming the directory and what is wrong with it.
pub(crate) fn private_dir(dir: &Path, what: &'static str) -> Result<(), DirError> {
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| DirError::Create { what, dir: dir.to_path_buf(), source })?;
    }
    let meta = std::fs::metadata(dir)
        .map_err(|source| DirError::Read { dir: dir.to_path_buf(), source })?;
    let me = portal_client::user::current();
    if meta.uid() != me {
        return Err(DirError::NotMine { what, dir: dir.to_path_buf(), owner: meta.uid(), me });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(DirError::Shared { what, dir: dir.to_path_buf(), mode: meta.mode() & 0o7777 });
    }
    Ok(())
}

/// Listens on `socket` after checking its directory is private.
pub(crate) fn listen(socket: &Path) -> Result<Listener, BindError> {
    private_dir(socket_dir(socket), "socket")?;
    portal_client::transport::listen(socket)
        .map_err(|source| BindError::Listen { socket: socket.to_path_buf(), source })
}

/// The socket's directory.
pub(crate) fn socket_dir(socket: &Path) -> &Path {
    socket.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

impl Endpoint {
    /// Serves `listener` (bound at `socket`) until the returned stream is
    /// dropped, and keeps the socket's path bound until `shutdown`.
    pub(crate) fn serve(
        listener: Listener,
        socket: PathBuf,
        shutdown: CancellationToken,
    ) -> (Arc<Self>, impl futures::Stream<Item = std::io::Result<Conn>> + Send + 'static) {
        let this = Arc::new(Self {
            ours: Mutex::new(file_id(&socket)),
            current: Mutex::new(listener.duplicate_fd().ok()),
            socket,
        });
        let (tx, rx) = mpsc::channel(ACCEPTED_QUEUE);
        accept_into(listener, tx.clone());
        tokio::spawn(Arc::clone(&this).keep(tx, shutdown));
        let stream =
            futures::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|conn| (conn, rx)) },
            );
        (this, stream)
    }

    /// Binds the path again whenever it is gone, until `shutdown` or the
    /// server no longer takes connections.
    async fn keep(
        self: Arc<Self>,
        tx: mpsc::Sender<std::io::Result<Conn>>,
        shutdown: CancellationToken,
    ) {
        let mut tick = tokio::time::interval(CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tx.closed() => return,
                _ = tick.tick() => {}
            }
            if std::fs::symlink_metadata(&self.socket).is_ok() {
                continue;
            }
            match self.bind_again() {
                Ok(listener) => {
                    tracing::warn!(socket = %self.socket.display(), "the socket was deleted; listening on it again");
                    accept_into(listener, tx.clone());
                }
                Err(e) => {
                    tracing::warn!(socket = %self.socket.display(), error = %e, "the socket was deleted and cannot be bound again");
                }
            }
        }
    }

    fn bind_again(&self) -> Result<Listener, BindError> {
        let listener = listen(&self.socket)?;
        *lock(&self.ours) = file_id(&self.socket);
        *lock(&self.current) = listener.duplicate_fd().ok();
        Ok(listener)
    }

    /// A duplicate of the listener clients reach now, for a live upgrade.
    pub(crate) fn handover_fd(&self) -> Option<OwnedFd> {
        lock(&self.current).as_ref().and_then(|fd| fd.try_clone().ok())
    }

    /// Removes the socket's path if it is still the socket this daemon
    /// bound; a successor's socket stays.
    pub(crate) fn remove_if_ours(&self) {
        let ours = *lock(&self.ours);
        if ours.is_none() || file_id(&self.socket) != ours {
            return;
        }
        if let Err(e) = std::fs::remove_file(&self.socket)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %self.socket.display(), error = %e, "cannot remove");
        }
    }
}

/// Accepts on `listener` until nobody takes connections any more.
fn accept_into(listener: Listener, tx: mpsc::Sender<std::io::Result<Conn>>) {
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                () = tx.closed() => return,
                next = listener.accept() => next,
            };
            if tx.send(next).await.is_err() {
                return;
            }
        }
    });
}
