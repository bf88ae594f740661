//! Binding the socket and serving until shutdown.
//!
//! [`bind`] prepares everything that can fail before the daemon is useful:
//! the runtime directory (created 0700, refused if another user owns it or
//! anyone else may write to it), the data directory's lock (`instance`: one
//! daemon per database, a second gets [`StartError::AlreadyRunning`]), the
//! stale socket left by a dead daemon (removed once nothing answers on it),
//! the database, and the listening socket (mode 0600). It returns once the
//! socket listens, so connections made after it wait in the backlog until
//! [`serve`] accepts them. What a live upgrade handed over is used only
//! once `instance` has checked it.
//!
//! [`serve`] runs until the token is cancelled (SIGTERM/SIGINT in `main`, the
//! Shutdown rpc, or a test), then shuts down in this order:
//! 1. stop accepting and finish in-flight calls (follow streams end);
//! 2. every actor signals its process tree (SIGHUP for PTYs, SIGTERM for
//!    pipes), escalates to SIGKILL after the kill grace, drains its output
//!    and records the end;
//! 3. wait for every tracked task;
//! 4. close the store: its writer commits what is queued and exits (joined);
//! 5. unlink the socket if it is still the one this daemon bound, and
//!    release the lock (its file stays: see `instance`).

use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use portal_proto::v1::portal_server::PortalServer;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::daemon::{Daemon, Parts};
use crate::grpc::{PortalService, auth};
use crate::proc::holding::Holding;
use crate::store::{Store, StoreThread};

/// How long in-flight calls get to finish at shutdown before connections are
/// closed under them. Calls are short (waits end on the shutdown token), so
/// this only matters for clients that stopped reading.
const CLIENT_DRAIN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Why the daemon could not start, or stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Another daemon owns the database, or serves the socket.
    #[error("{why}")]
    AlreadyRunning {
        /// The socket this daemon was to serve.
        socket: PathBuf,
        /// Which daemon, in words (its pid when known).
        why: String,
    },
    /// The socket's path cannot be used (too long).
    #[error(transparent)]
    SocketPath(#[from] portal_client::error::ClientError),
    /// A directory is not private, or the socket cannot be bound.
    #[error(transparent)]
    Bind(#[from] crate::endpoint::BindError),
    /// A file of the data directory could not be made or kept private.
    #[error("{op} {}: {source}", path.display())]
    File {
        /// What was being done.
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS's reason.
        #[source]
        source: std::io::Error,
    },
    /// Something other than a socket is where the socket goes.
    #[error("{} exists and is not a socket; portald will not delete it: move it away or choose another --socket", .0.display())]
    NotASocket(PathBuf),
    /// The data directory's lock could not be taken.
    #[error(transparent)]
    Lock(Box<dyn std::error::Error + Send + Sync>),
    /// The database could not be opened.
    #[error("opening the database {} (if it is damaged, `portal-cli daemon doctor` moves it aside and salvages what it can): {source}", database.display())]
    Store {
        /// The database.
        database: PathBuf,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The socket a previous portald handed over cannot be listened on.
    #[error("listening on the socket the previous portald handed over: {0}")]
    Inherited(#[source] std::io::Error),
    /// portal-holder, which keeps the programs, could not be reached.
    #[error("connecting to portal-holder: {0}")]
    Holder(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Serving gRPC failed.
    #[error("serving gRPC: {0}")]
    Serve(#[source] tonic::transport::Error),
    /// The listening socket could not be passed to the next daemon.
    #[error("duplicating the listening socket for the next portald")]
    HandoverSocket,
}

/// A bound, locked, listening daemon that has not started serving yet.
pub struct Listener {
    config: Config,
    listener: portal_client::transport::Listener,
    /// The data directory's lock, held while this daemon lives.
    lock: File,
    store: Store,
    store_thread: StoreThread,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener").field("socket", &self.config.socket).finish_non_exhaustive()
    }
}

/// Keeps the log private whatever the umask: the data directory 0700, the
/// database 0600 before SQLite opens it (SQLite gives its `-wal` and `-shm`
/// files the database's mode), and existing files of older installs
/// tightened.
fn private_files(data_dir: &Path, database: &Path) -> Result<(), StartError> {
    tighten(data_dir, 0o700)?;
    if !database.exists() {
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(database)
            .map_err(|source| StartError::File {
                op: "creating",
                path: database.to_path_buf(),
                source,
            })?;
    }
    let mut files =
        vec![database.to_path_buf(), data_dir.join(portal_client::paths::DAEMON_LOG_FILE)];
    for suffix in ["-wal", "-shm"] {
        let mut name = database.as_os_str().to_owned();
        name.push(suffix);
        files.push(PathBuf::from(name));
    }
    for file in files.iter().filter(|f| f.exists()) {
        tighten(file, 0o600)?;
    }
    Ok(())
}

/// Removes every permission beyond `mode` from `path`.
fn tighten(path: &Path, mode: u32) -> Result<(), StartError> {
    let file = |op, source| StartError::File { op, path: path.to_path_buf(), source };
    let meta = std::fs::metadata(path).map_err(|e| file("reading", e))?;
    let current = meta.mode() & 0o7777;
    if current & !mode != 0 {
        tracing::info!(path = %path.display(), from = format!("{current:o}"), to = format!("{mode:o}"), "making private");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(current & mode))
            .map_err(|e| file("making private", e))?;
    }
    Ok(())
}

/// Removes a socket nobody answers on, as a killed daemon leaves it. One
/// that answers is another daemon's (another data directory, the same
/// socket): it stays, and this one does not start.
fn remove_stale_socket(socket: &Path) -> Result<(), StartError> {
    let Ok(meta) = std::fs::symlink_metadata(socket) else { return Ok(()) };
    use std::os::unix::fs::FileTypeExt as _;
    if !meta.file_type().is_socket() {
        return Err(StartError::NotASocket(socket.to_path_buf()));
    }
    if std::os::unix::net::UnixStream::connect(socket).is_ok() {
        return Err(StartError::AlreadyRunning {
            socket: socket.to_path_buf(),
            why: format!(
                "another portald (with another data directory) serves {}: stop it, or choose another --socket",
                socket.display()
            ),
        });
    }
    tracing::info!(socket = %socket.display(), "removing a stale socket");
    std::fs::remove_file(socket).map_err(|source| StartError::File {
        op: "removing the stale socket",
        path: socket.to_path_buf(),
        source,
    })?;
    Ok(())
}

/// What a predecessor handed over, each descriptor used only if it checks
/// out: a leaked or crafted `PORTAL_HANDOVER` is a normal start.
fn checked_handover(config: &Config) -> (Option<File>, Option<std::os::fd::OwnedFd>) {
    let Some(mut inherited) = crate::upgrade::take_inherited() else { return (None, None) };
    crate::upgrade::keep_fallback(&mut inherited);
    let lock = inherited.lock.take().and_then(|fd| {
        crate::instance::verify_lock(fd, &config.data_dir)
            .inspect_err(|why| {
                tracing::warn!("not using the lock {} named: {why}", crate::upgrade::HANDOVER_ENV);
            })
            .ok()
    });
    let listener = inherited.listener.take().filter(|fd| {
        crate::instance::verify_listener(fd, &config.socket)
            .inspect_err(|why| {
                tracing::warn!(
                    "not using the socket {} named: {why}",
                    crate::upgrade::HANDOVER_ENV
                );
            })
            .is_ok()
    });
    (lock, listener)
}

/// Prepares the directories, the lock, the database and the socket. Must be
/// called within the tokio runtime that will serve it.
///
/// # Errors
/// [`StartError::AlreadyRunning`] when another daemon holds the lock;
/// another [`StartError`] for anything else (naming the path involved).
pub fn bind(config: &Config) -> Result<Listener, StartError> {
    let socket = config.socket.clone();
    portal_client::client::check_socket_path(&socket)?;
    crate::endpoint::private_dir(crate::endpoint::socket_dir(&socket), "socket")
        .map_err(crate::endpoint::BindError::from)?;
    crate::endpoint::private_dir(&config.data_dir, "data")
        .map_err(crate::endpoint::BindError::from)?;
    private_files(&config.data_dir, &config.database())?;
    // A live upgrade hands over the listening socket and the lock, still
    // held: nobody can slip in between the two daemons.
    let (lock, inherited_listener) = checked_handover(config);
    let lock = match lock {
        Some(lock) => lock,
        None => crate::instance::take(&config.data_dir).map_err(|e| match e {
            crate::instance::LockError::Held { .. } => {
                StartError::AlreadyRunning { socket: socket.clone(), why: e.to_string() }
            }
            crate::instance::LockError::Io { .. } => StartError::Lock(e.into()),
        })?,
    };
    if inherited_listener.is_none() {
        remove_stale_socket(&socket)?;
    }
    let (store, store_thread) = Store::open(&config.database(), config.retention)
        .map_err(|e| StartError::Store { database: config.database(), source: e.into() })?;
    let listener = match inherited_listener {
        Some(fd) => {
            portal_client::transport::Listener::from_inherited(fd).map_err(StartError::Inherited)?
        }
        None => crate::endpoint::listen(&socket)?,
    };
    tracing::info!(socket = %socket.display(), database = %config.database().display(), "listening");
    Ok(Listener { config: config.clone(), listener, lock, store, store_thread })
}

/// How serving ended.
#[derive(Debug)]
pub enum Ended {
    /// Stopped: every program ended, the socket and lock are gone.
    Stopped,
    /// Handed over for a live upgrade: every program runs on, held by the
    /// holder; the caller execs the new binary with this.
    Upgrade(crate::upgrade::Handover),
}

/// Serves until `shutdown` is cancelled, then shuts down in order (or,
/// for a live upgrade, hands every program over).
///
/// # Errors
/// When portal-holder cannot be reached or the socket cannot be served.
pub async fn serve(listener: Listener, shutdown: CancellationToken) -> Result<Ended, StartError> {
    let Listener { config, listener, lock, store, store_thread } = listener;
    let socket = config.socket.clone();
    let tracker = TaskTracker::new();
    // Every program is spawned, held and reaped by the holder, so that it
    // outlives this daemon; it is started here when none runs.
    let holder_socket = portal_holder::client::socket_beside(&socket);
    let holder_binary = config.holder.clone();
    let journal_ring = config.journal_ring_bytes;
    let (holding, leftovers) = tokio::task::spawn_blocking(move || {
        Holding::connect(&holder_socket, &holder_binary, journal_ring)
    })
    .await
    .map_err(|e| StartError::Holder(e.into()))?
    .map_err(|e| StartError::Holder(e.into()))?;
    let holder_pid = holding.holder_pid();
    let last_seq = store.read(crate::store::last_agent_seq).await.unwrap_or(0);
    let (search, index_thread) = crate::search::SearchIndex::start(&store);
    let daemon = Arc::new(Daemon::new(Parts {
        config,
        store: store.clone(),
        search,
        holding,
        tracker: tracker.clone(),
        shutdown: shutdown.clone(),
        last_agent_seq: last_seq,
    }));
    let teardown = Teardown { tracker, store, store_thread, index_thread };
    match daemon.load_dormant(leftovers).await {
        Ok((0, _)) => {}
        Ok((n, adopted)) => tracing::info!(
            processes = n,
            adopted,
            "processes of an earlier daemon are listed (adopted if the holder still held them, lost if not)"
        ),
        Err(e) => tracing::error!(error = %e, "cannot list the processes of an earlier daemon"),
    }
    // What an earlier daemon restarted on failure, this one does too.
    daemon.supervise_adopted();
    // From here a failure is a crash like any other: the next start adopts.
    crate::upgrade::served();
    // The socket is bound again if someone deletes it; a live upgrade hands
    // the newest listener over, so clients that connect during the handover
    // wait in its backlog.
    let (endpoint, incoming) =
        crate::endpoint::Endpoint::serve(listener, socket.clone(), shutdown.clone());
    let service = PortalServer::new(PortalService::new(Arc::clone(&daemon)))
        .max_decoding_message_size(portal_proto::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(portal_proto::MAX_MESSAGE_BYTES);
    let service = tonic::service::interceptor::InterceptedService::new(
        crate::grpc::decode::DecodeErrors(service),
        auth::check_peer,
    );
    let server = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, shutdown.clone().cancelled_owned());
    // Graceful shutdown waits for clients to close their connections; one
    // that never does (hung, or its runtime blocked) must not keep the daemon
    // and its programs alive, so the graceful phase is bounded.
    let served = tokio::select! {
        r = server => r,
        () = async {
            shutdown.cancelled().await;
            tokio::time::sleep(CLIENT_DRAIN_GRACE).await;
        } => {
            tracing::warn!("clients did not disconnect within {CLIENT_DRAIN_GRACE:?}; closing their connections");
            Ok(())
        }
    };
    // Whatever ended serving, shut everything down.
    shutdown.cancel();
    if let Some(plan) = daemon.take_upgrade() {
        tracing::info!("handing over: every program stays with portal-holder");
        teardown.tasks_done().await;
        teardown.close_store(daemon).await;
        // Every program is handed over: an error of the server now must not
        // keep the next daemon from taking them.
        if let Err(e) = served {
            tracing::warn!(error = %e, "serving gRPC ended with an error; handing over anyway");
        }
        let listen_fd = endpoint.handover_fd().ok_or(StartError::HandoverSocket)?;
        let handover = crate::upgrade::Handover { plan, listener: listen_fd, lock: lock.into() };
        return Ok(Ended::Upgrade(handover));
    }
    tracing::info!("shutting down: stopping managed processes");
    teardown.tasks_done().await;
    // Every managed process has ended; what they left behind (daemons that
    // double forked away, reparented here) goes with them.
    let lineage = crate::sys::Lineage::daemon(&socket, holder_pid);
    if let Ok(killed) =
        tokio::task::spawn_blocking(move || crate::sys::kill_leftovers(&lineage)).await
        && killed > 0
    {
        tracing::info!(killed, "killed what managed processes left behind");
    }
    teardown.close_store(daemon).await;
    endpoint.remove_if_ours();
    drop(lock);
    tracing::info!("portald stopped");
    served.map_err(StartError::Serve).map(|()| Ended::Stopped)
}

/// What is wound down last, in this order, whether the daemon stops or
/// hands over: its tasks, then the store and the search indexer.
struct Teardown {
    tracker: TaskTracker,
    store: Store,
    store_thread: StoreThread,
    index_thread: crate::search::IndexThread,
}

impl Teardown {
    /// Waits for every tracked task: every actor has ended its program (or
    /// handed it over) and recorded it.
    async fn tasks_done(&self) {
        self.tracker.close();
        self.tracker.wait().await;
    }

    /// Drops the daemon, commits what is queued and joins the writer and
    /// the indexer (the next daemon's indexer must not race this one's).
    async fn close_store(self, daemon: Arc<Daemon>) {
        drop(daemon);
        self.store.close().await;
        let (store_thread, index_thread) = (self.store_thread, self.index_thread);
        tokio::task::spawn_blocking(move || {
            store_thread.join();
            index_thread.join();
        })
        .await
        .ok();
    }
}

/// Binds and serves: the daemon's whole life.
///
/// # Errors
/// As [`bind`] and [`serve`].
pub async fn run(config: &Config, shutdown: CancellationToken) -> Result<Ended, StartError> {
    let listener = bind(config)?;
    serve(listener, shutdown).await
}
