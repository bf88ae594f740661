//! Daemon configuration and the limits every part of the daemon shares.
//!
//! Each limit is a constant with the reason for its value; [`Config`] carries
//! what an operator may change (by flag or environment variable, see `main.rs`).

use std::path::PathBuf;
use std::time::Duration;

/// Default idle output buffer of a reader thread: the most a PTY read returns
/// in practice is ~20 KB and a pipe read 64 KiB (the pipe buffer), so 64 KiB
/// never splits a read the kernel could have given at once.
pub(crate) const READ_CHUNK_BYTES: usize = 64 << 10;

/// Chunks in flight between a process's reader threads and its actor: at
/// most 16 × 64 KiB = 1 MiB per process, which keeps a hundred busy
/// programs within tens of MiB. Readers merge what is ready into chunks of
/// up to 64 KiB, so a short queue still holds a lot under bulk output. When
/// full the reader blocks, the kernel buffer fills and the program blocks
/// on write (backpressure, no loss).
pub(crate) const OUTPUT_QUEUE_CHUNKS: usize = 16;

/// Requests queued to one actor. Callers wait when it is full, which only
/// happens if a client floods one process; 64 absorbs bursts of parallel tools.
pub(crate) const REQUEST_QUEUE: usize = 64;

/// Live output events kept for subscribers of one process. A subscriber more
/// than this many chunks behind is told it lagged and refills from the store,
/// so a slow reader never stalls the process or grows memory.
pub(crate) const BROADCAST_CHUNKS: usize = 1024;

/// Input accepted but not yet written to a program. A program that never
/// reads must not make the daemon buffer without bound; 32 MiB holds two
/// maximal writes. Past it, writes fail with RESOURCE_EXHAUSTED.
pub(crate) const STDIN_BACKLOG_BYTES: usize = 32 << 20;

/// Most input waiting for programs across every process of the daemon:
/// four processes' worth of backlog. Programs that never read could
/// otherwise hold the daemon's memory hostage, one 32 MiB at a time.
pub(crate) const UNREAD_INPUT_TOTAL_BYTES: usize = 128 << 20;

/// Largest stored record. Input writes are split into records of at most
/// this size so that no single row (or read page) is huge.
pub(crate) const MAX_RECORD_BYTES: usize = 64 << 10;

/// Output bytes queued for the store across all processes. When the disk
/// falls behind, actors wait for room, readers stop, programs block: the
/// log is never dropped. It is also the most a crash of the daemon can lose
/// (what was read but not yet committed): 8 MiB is about ten milliseconds
/// of the writer's throughput, two of its largest batches: enough to absorb
/// bursts, small enough to lose little and to keep memory flat.
pub(crate) const STORE_BACKLOG_BYTES: usize = 8 << 20;

/// Upper bound of bytes written in one store transaction: keeps each commit
/// short so flush barriers (reads) wait milliseconds, not seconds, and the
/// writer's page cache small.
pub(crate) const STORE_BATCH_BYTES: usize = 4 << 20;

/// Default page of a read (data bytes before rendering): large enough for a
/// screenful of logs many times over, small enough for an agent's context.
pub(crate) const DEFAULT_READ_BYTES: u64 = 64 << 10;

/// Hard cap of one read page; larger ranges are paged with the returned cursor.
pub(crate) const MAX_READ_BYTES: u64 = 4 << 20;

/// After the program itself exited, how long to wait for its output to reach
/// EOF before the rest of its session (background jobs holding the terminal
/// or pipes open) is killed. Output normally drains in microseconds.
pub(crate) const EXIT_DRAIN_GRACE: Duration = Duration::from_secs(2);

/// After killing what remained of the session, how long to wait for EOF
/// before giving up on the streams (a descendant that escaped with setsid may
/// hold them open forever). The process is then reported ended regardless.
pub(crate) const EXIT_ABANDON_GRACE: Duration = Duration::from_secs(1);

/// How often a PTY's foreground process group is checked, to discover agents
/// started inside a shell and to notice when they leave. A syscall and, while
/// a job nobody recognised yet holds the terminal, a read of its command line
/// in `/proc`: cheap enough for thousands of processes.
pub(crate) const AGENT_SWEEP: Duration = Duration::from_millis(500);

/// Default terminal size, what most programs assume when nothing says otherwise.
pub(crate) const DEFAULT_ROWS: u16 = 24;
/// Default terminal width.
pub(crate) const DEFAULT_COLS: u16 = 80;
/// Smallest accepted dimension: terminal models and many programs misbehave below 2.
pub(crate) const MIN_TERM_DIM: u16 = 2;
/// Largest accepted dimension: bigger screens are not a terminal anyone can
/// show, and each cell costs memory in the screen model.
pub(crate) const MAX_TERM_DIM: u16 = 1000;

/// Longest idle timeout accepted (30 days); longer is a unit mistake.
pub(crate) const MAX_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 24 * 3600);

/// With [`Config::fault_injection`], writing exactly these bytes to a
/// process panics its handler (tests prove the panic stays contained).
/// Only in a build with the `fault-injection` feature, which only the tests
/// enable.
#[cfg(feature = "fault-injection")]
#[doc(hidden)]
pub const FAULT_PANIC_TRIGGER: &[u8] = b"\0portal-fault-injection: panic\0";

/// Operator settings of one daemon.
#[derive(Clone, Debug)]
pub struct Config {
    /// Unix socket to listen on.
    pub socket: PathBuf,
    /// Directory of the database (created with mode 0700).
    pub data_dir: PathBuf,
    /// Most managed processes kept at once (running or finished, until cleanup).
    pub max_processes: usize,
    /// How long a process gets between SIGHUP/SIGTERM and SIGKILL at shutdown.
    pub kill_grace: Duration,
    /// The `portal-holder` binary to start when none runs (it spawns, holds
    /// and reaps every program; see `portal_holder`).
    pub holder: PathBuf,
    /// Longest a single wait may block: below the ~60 s at which some MCP
    /// clients cut calls, so a result is never lost; agents re-issue with the
    /// returned cursor.
    pub wait_ceiling: Duration,
    /// How much I/O log is kept (oldest trimmed first).
    pub retention: Retention,
    /// Tests only: writing the fault-injection trigger to a process panics
    /// its handler, to prove a panic is contained. No flag sets it, and only
    /// a build with the `fault-injection` feature has it.
    #[cfg(feature = "fault-injection")]
    #[doc(hidden)]
    pub fault_injection: bool,
    /// Ask the kernel whether programs wait for input (Linux `/proc`). Off,
    /// input states come from the text heuristic alone (how portald behaves
    /// where the kernel cannot be asked); tests use it to prove that path.
    pub kernel_input_state: bool,
    /// Ring of each output stream in a program's journal: what was read
    /// from a program but not yet logged when the daemon was killed comes
    /// back from it, up to this many bytes per stream; more is a hole of
    /// its exact size (see `proc::journal`).
    pub journal_ring_bytes: u64,
    /// How this daemon was started, so a live upgrade can exec its
    /// successor the same way; `None` when it runs inside another program
    /// (tests), which cannot replace itself.
    pub self_exec: Option<SelfExec>,
}

/// Default process limit: enough for a fleet of agents and their tools, low
/// enough that a runaway loop of starts is stopped before the machine is.
pub const DEFAULT_MAX_PROCESSES: usize = 4096;

/// Default log kept per process: a day of a busy build's output, while a
/// program stuck printing in a loop is cut off long before it matters.
pub const DEFAULT_LOG_PER_PROCESS: u64 = 512 << 20;

/// Default log kept in total: room for a few busy processes and thousands of
/// quiet ones, a small share of any developer machine's disk.
pub const DEFAULT_LOG_TOTAL: u64 = 4 << 30;

/// Default wait ceiling (see [`Config::wait_ceiling`]).
pub const DEFAULT_WAIT_CEILING: Duration = Duration::from_secs(50);

/// Ring of each output stream of a program's journal by default: 256 KiB keeps a quarter of a
/// second of a program printing flat out (about 1 GB/s through a pipe is
/// the ceiling; a PTY is far slower), which covers a store that commits
/// every few hundred milliseconds. What was read beyond it before a crash
/// is recorded as a hole of its exact size. A memfd page stays resident
/// once touched, so this is the memory a busy program costs (twice on
/// pipes, stdout and stderr); a quiet one costs only what it printed.
pub const DEFAULT_JOURNAL_RING_BYTES: u64 = 256 << 10;

/// Default shutdown grace: long enough for shells and REPLs to exit cleanly.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(2);

impl Config {
    /// Settings with defaults for everything but the socket and data dir.
    #[must_use]
    pub fn new(socket: PathBuf, data_dir: PathBuf) -> Self {
        Self {
            socket,
            data_dir,
            max_processes: DEFAULT_MAX_PROCESSES,
            kill_grace: DEFAULT_KILL_GRACE,
            holder: portal_client::paths::holder_binary()
                .unwrap_or_else(|| PathBuf::from("portal-holder")),
            wait_ceiling: DEFAULT_WAIT_CEILING,
            retention: Retention {
                per_process: DEFAULT_LOG_PER_PROCESS,
                total: DEFAULT_LOG_TOTAL,
                max_db_bytes: None,
            },
            #[cfg(feature = "fault-injection")]
            fault_injection: false,
            kernel_input_state: cfg!(target_os = "linux"),
            journal_ring_bytes: DEFAULT_JOURNAL_RING_BYTES,
            self_exec: None,
        }
    }

    /// The database file inside the data directory.
    #[must_use]
    pub fn database(&self) -> PathBuf {
        self.data_dir.join(portal_client::paths::DATABASE_FILE)
    }
}

/// How much log the daemon keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Most bytes (all streams) retained per process.
    pub per_process: u64,
    /// Most bytes retained across all processes.
    pub total: u64,
    /// Hard ceiling of the database file, if any: reaching it behaves like a
    /// full disk (trim, then drop with an error), never like a crash.
    pub max_db_bytes: Option<u64>,
}

/// Room set aside beside the database for a full disk
/// (`portal.db.reserve`): a trim's deletes, the control records of a busy
/// moment and a checkpoint's copy, with margin. Small beside any real disk.
pub const DISK_RESERVE_BYTES: u64 = 16 << 20;

/// Smallest WAL a busy writer lets grow before folding it back: each fold
/// is a copy, a sync and a wait for readers still in the WAL (followers, the
/// search indexer); at 4 MiB that wait halved capture, at 16 MiB it is lost
/// in the noise.
const WAL_FOLD_MIN_BYTES: u64 = 16 << 20;

/// Largest: a few hundred milliseconds of bulk output, which the checkpoint
/// thread copies while the writer goes on; more only costs disk.
const WAL_FOLD_MAX_BYTES: u64 = 64 << 20;

/// What one batch of the writer adds to the WAL at most: its output and
/// the B-tree pages it touches.
const WAL_BATCH_BYTES: u64 = 2 * STORE_BATCH_BYTES as u64;

/// Beside the log: the shared-memory file, the search index's WAL and the
/// daemon's own small files.
const SMALL_FILES_BYTES: u64 = 8 << 20;

impl Retention {
    /// The most log the database holds: the total limit, or the database
    /// file's ceiling when that is lower.
    #[must_use]
    pub fn log_bound(&self) -> u64 {
        self.max_db_bytes.map_or(self.total, |max| max.min(self.total))
    }

    /// WAL size at which the store folds it back into the database while
    /// output streams: an eighth of [`Self::log_bound`], within 16..64 MiB, so
    /// a small limit is not dwarfed by its WAL. The WAL never passes twice
    /// this plus one batch: past that the writer waits for the fold.
    #[must_use]
    pub fn wal_fold_bytes(&self) -> u64 {
        (self.log_bound() / 8).clamp(WAL_FOLD_MIN_BYTES, WAL_FOLD_MAX_BYTES)
    }

    /// What the data directory may hold beyond [`Self::log_bound`], even
    /// while output floods in faster than anything else: the database's
    /// B-tree pages beside the bytes kept, and pages trimmed but not yet
    /// reused (half the bound: measured 0.42 under a flood); the search index
    /// (a quarter); the WAL (twice [`Self::wal_fold_bytes`] and a batch); the
    /// reserve; the small files.
    #[must_use]
    pub fn disk_margin(&self) -> u64 {
        let bound = self.log_bound();
        bound / 2
            + bound / 4
            + 2 * self.wal_fold_bytes()
            + WAL_BATCH_BYTES
            + DISK_RESERVE_BYTES
            + SMALL_FILES_BYTES
    }

    /// No limits at all (tests).
    #[cfg(test)]
    pub(crate) const UNLIMITED: Self =
        Self { per_process: u64::MAX, total: u64::MAX, max_db_bytes: None };
}

/// How this process was started, so it can exec its successor the same way.
#[derive(Clone, Debug)]
pub struct SelfExec {
    /// The binary to upgrade to when the caller names none: the path this
    /// one was started from (a package upgrade puts the new one there).
    pub binary: PathBuf,
    /// The arguments it was started with (without `argv[0]`).
    pub args: Vec<std::ffi::OsString>,
}

impl SelfExec {
    /// This process's binary path and arguments.
    #[must_use]
    pub fn current() -> Option<Self> {
        let binary = std::env::current_exe().ok()?;
        // A binary replaced on disk after this one started shows as deleted.
        let binary = match binary.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
            Some(path) => PathBuf::from(path),
            None => binary,
        };
        Some(Self { binary, args: std::env::args_os().skip(1).collect() })
    }
}
