//! Starting a program on a PTY or on pipes (through `portal-holder`, which
//! forks it and keeps a copy of its descriptors), and the threads that
//! bridge its blocking I/O to its actor.
//!
//! Threads per process (all named after the process id):
//! - `out-<id>` / `err-<id>`: one reader per output stream. Reads up to
//!   [`READ_CHUNK_BYTES`] and hands each chunk to the actor over a bounded
//!   channel (a slow actor stops the reader, the kernel buffer fills, the
//!   program blocks: backpressure, never loss). Ends on EOF (a PTY reports
//!   EIO once every secondary fd is closed), on a read error, or when the
//!   actor is gone.
//! - `in-<id>`: the input writer. Blocking writes never run on a runtime
//!   worker (a program that does not read blocks them). Ends when the actor
//!   drops its sender or input is closed.
//!
//! The exit comes from the holder, the program's parent ([`Holding`]).
//!
//! Each program has a [`Journal`] the holder keeps beside it: readers
//! record what they read in it before handing it on, and input is recorded
//! as accepted before its rpc answers and as delivered once written, so a
//! daemon killed with SIGKILL leaves its successor an exact account.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use portal_holder::wire;
use tokio::sync::{mpsc, oneshot};

use super::holding::Holding;
use super::journal::{self, Journal, Snapshot, Undelivered};
use super::probe::InputTarget;
use super::{EnvFrom, ProcError, ProcId, ProcSpec, SpawnFailure, Stdio, StreamId, TermSize};
use crate::config::{OUTPUT_QUEUE_CHUNKS, READ_CHUNK_BYTES};
use crate::screen::Replier;
use crate::sys::{self, ExitInfo};

/// Longest pause honoured between two input writes.
const MAX_INPUT_GAP: std::time::Duration = std::time::Duration::from_millis(500);

/// Stack of the I/O threads: they only loop over read/write/waitpid, and a
/// small stack keeps a thousand idle processes cheap.
const IO_THREAD_STACK_BYTES: usize = 128 << 10;

/// Output of a reader thread.
#[derive(Debug)]
pub(crate) enum OutputEvent {
    /// Bytes read.
    Data(StreamId, Bytes),
    /// A stream reached its end.
    Eof,
    /// A reader stopped for the handover: everything it read was sent
    /// before this; the rest waits in the kernel for the next daemon.
    Detached,
}

/// A program that was started, with the ends of its I/O threads.
pub(crate) struct Spawned {
    /// OS pid (a session and process group leader).
    pub(crate) pid: u32,
    /// Output of the reader threads.
    pub(crate) output: mpsc::Receiver<OutputEvent>,
    /// Number of output streams that will each send one `Eof`.
    pub(crate) streams: usize,
    /// The input writer.
    pub(crate) input: InputWriter,
    /// The program's exit, once.
    pub(crate) exit: oneshot::Receiver<std::io::Result<ExitInfo>>,
    /// The PTY's primary side (PTY mode), for resizing and terminal queries.
    pub(crate) primary: Option<Primary>,
    /// What the program reads its input from, for the kernel's input state
    /// (`None` when it could not be identified).
    pub(crate) input_target: Option<InputTarget>,
    /// What its descendants carry in their environment, to find them all at
    /// kill time.
    pub(crate) lineage: sys::Lineage,
    /// The holder, told when the program's end is recorded.
    pub(crate) holding: Arc<Holding>,
    /// At an adoption: what the journal held before this daemon's readers
    /// started, to continue the log from where the program really is.
    pub(crate) recovered: Option<Snapshot>,
}

/// The primary side of a program's PTY (the holder keeps another copy).
#[derive(Debug)]
pub(crate) struct Primary(OwnedFd);

impl Primary {
    /// Its descriptor, for terminal queries.
    #[allow(clippy::unnecessary_wraps, reason = "callers treat a PTY without a descriptor as none")]
    pub(crate) fn as_raw_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.0.as_raw_fd())
    }

    /// Sets the terminal's size (the kernel sends SIGWINCH to its foreground).
    pub(crate) fn resize(&self, size: TermSize) -> std::io::Result<()> {
        let ws = rustix::termios::Winsize {
            ws_row: size.rows,
            ws_col: size.cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        Ok(rustix::termios::tcsetwinsize(&self.0, ws)?)
    }

    /// The secondary side's device number: what the program reads from.
    fn tty_rdev(&self) -> Option<u64> {
        let name = rustix::pty::ptsname(&self.0, Vec::new()).ok()?;
        let path = std::ffi::OsStr::from_bytes(name.as_bytes());
        std::fs::metadata(path).ok().map(|m| m.rdev())
    }
}

impl std::fmt::Debug for Spawned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawned").field("pid", &self.pid).finish_non_exhaustive()
    }
}

enum InputMsg {
    /// Bytes to write; `journaled` when they count as accepted input (not
    /// a terminal's reply), whose delivery the journal records.
    Data {
        data: Bytes,
        journaled: bool,
    },
    /// Pause before the next write (between a prompt and its Enter).
    Gap(std::time::Duration),
    Close,
    /// Stop after what is queued, leaving input open: the next daemon
    /// writes on.
    Detach,
}

/// Sends input to the writer thread; counts bytes not yet written.
#[derive(Debug)]
pub(crate) struct InputWriter {
    tx: Option<std::sync::mpsc::Sender<InputMsg>>,
    pending: Arc<AtomicUsize>,
    /// Fires when the writer thread has ended.
    finished: Option<oneshot::Receiver<()>>,
    /// Where accepted input is recorded.
    journal: Option<Arc<Journal>>,
}

/// Queues bytes for the writer thread, counting them as unread (for this
/// process and in total) until it has written them. `false` when the
/// writer thread is gone (the count is undone).
fn enqueue(
    tx: &std::sync::mpsc::Sender<InputMsg>,
    pending: &AtomicUsize,
    data: Bytes,
    journaled: bool,
) -> bool {
    let len = data.len();
    pending.fetch_add(len, Ordering::AcqRel);
    UNREAD_INPUT.fetch_add(len, Ordering::AcqRel);
    if tx.send(InputMsg::Data { data, journaled }).is_err() {
        pending.fetch_sub(len, Ordering::AcqRel);
        UNREAD_INPUT.fetch_sub(len, Ordering::AcqRel);
        return false;
    }
    true
}

impl InputWriter {
    /// A handle for terminal replies, while input is open.
    /// Terminal replies are queued to the program's input, in order with
    /// other input, without logging them: they are terminal protocol, not
    /// something anyone typed; a program that stopped reading never gets
    /// them.
    pub(crate) fn replier(&self) -> Option<Replier> {
        let tx = self.tx.clone()?;
        let pending = Arc::clone(&self.pending);
        Some(Box::new(move |data: Vec<u8>| {
            enqueue(&tx, &pending, Bytes::from(data), false);
        }))
    }

    /// Bytes accepted but not yet written to the program.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Accepts input: recorded in the journal as `logged` (what the log
    /// shows of it: a secret masked, and then never written again after a
    /// crash), then queued. `false` when the writer thread is gone.
    pub(crate) fn accept(&self, data: Bytes, logged: &[u8], secret: bool) -> bool {
        let Some(tx) = &self.tx else { return false };
        if let Some(j) = &self.journal {
            let end = j.accept(logged);
            if secret {
                j.secret_until(end);
            }
        }
        let len = data.len();
        if enqueue(tx, &self.pending, data, true) {
            return true;
        }
        // Never written and never to be: accounted, so no later daemon
        // writes it.
        if let Some(j) = &self.journal {
            j.delivered(len);
        }
        false
    }

    /// Queues input an earlier daemon accepted and never wrote.
    fn redeliver(&self, data: Bytes) -> bool {
        let Some(tx) = &self.tx else { return false };
        enqueue(tx, &self.pending, data, true)
    }

    /// Queues a pause before the next write.
    pub(crate) fn gap(&self, d: std::time::Duration) {
        if let Some(tx) = &self.tx {
            // The thread may be gone (program exited); then there is no next write.
            let _ = tx.send(InputMsg::Gap(d));
        }
    }

    /// Closes input after everything queued is written (the writer thread
    /// then tells the holder to close its copy too).
    pub(crate) fn close(&mut self) {
        if let Some(tx) = self.tx.take() {
            // The thread may already be gone (program exited); nothing to close then.
            let _ = tx.send(InputMsg::Close);
        }
    }

    /// Stops the writer after what is queued without closing the
    /// program's input (the handover). The receiver fires once everything
    /// queued is written.
    pub(crate) fn detach(&mut self) -> Option<oneshot::Receiver<()>> {
        if let Some(tx) = self.tx.take() {
            // The thread may already be gone (program exited): then it is done.
            let _ = tx.send(InputMsg::Detach);
        }
        self.finished.take()
    }

    /// True once closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_none()
    }
}

/// Looks the program up like `execvp` would: a name with a `/` is a path
/// (relative to `cwd`), anything else is searched on the child's `PATH`.
pub(crate) fn resolve_program(
    command: &str,
    cwd: &Path,
    path_var: Option<&str>,
) -> Result<PathBuf, ProcError> {
    use std::os::unix::fs::PermissionsExt;
    let fail = |reason: SpawnFailure| ProcError::Spawn { program: command.to_owned(), reason };
    let check = |p: &Path| -> Result<(), SpawnFailure> {
        let meta = std::fs::metadata(p)?;
        if meta.is_dir() {
            return Err(SpawnFailure::Directory);
        }
        if meta.permissions().mode() & 0o111 == 0 {
            return Err(SpawnFailure::NotExecutable);
        }
        Ok(())
    };
    if command.contains('/') {
        let p = cwd.join(command);
        check(&p).map_err(fail)?;
        return Ok(p);
    }
    let path_var = path_var.unwrap_or("/usr/local/bin:/usr/bin:/bin");
    for dir in std::env::split_paths(path_var) {
        let candidate = cwd.join(dir).join(command);
        if check(&candidate).is_ok() {
            return Ok(candidate);
        }
    }
    Err(fail(SpawnFailure::NotOnPath(path_var.to_owned())))
}

/// What a bash on a PTY runs before each prompt: report the last command's
/// exit status as an OSC 133 `D` mark, which Portal parses and never shows.
const BASH_PROMPT_COMMAND: &str = r#"printf '\033]133;D;%s\007' "$?""#;

/// Whether Portal adds shell integration to this program: bash on a PTY,
/// unless the caller set `PROMPT_COMMAND` itself.
pub(crate) fn wants_shell_integration(spec: &ProcSpec) -> bool {
    let base = spec.command.rsplit('/').next().unwrap_or(&spec.command);
    matches!(spec.stdio, Stdio::Pty(_))
        && base == "bash"
        && !spec.env.contains_key("PROMPT_COMMAND")
}

/// `PATH` of a clean environment whose overrides name none: where every
/// Unix keeps its programs.
const CLEAN_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Variables of a caller's environment that describe the caller's own
/// terminal, not the program's: a PTY's size is Portal's to say.
const CALLERS_TERMINAL: [&str; 2] = ["COLUMNS", "LINES"];

/// Builds the child's environment: where `env_from` says it starts (the
/// daemon's, the caller's, or a clean one), then the caller's overrides,
/// then `TERM=xterm-256color` for PTYs unless the caller set `TERM`, then
/// shell integration for bash, then Portal's own variables (which a caller
/// cannot override).
pub(crate) fn child_env(
    spec: &ProcSpec,
    id: ProcId,
    token: &str,
    socket: &Path,
) -> BTreeMap<std::ffi::OsString, std::ffi::OsString> {
    let mut env: BTreeMap<std::ffi::OsString, std::ffi::OsString> = match &spec.env_from {
        EnvFrom::Daemon => std::env::vars_os().collect(),
        EnvFrom::Caller(vars) => {
            let mut env: BTreeMap<_, _> = vars.iter().map(|(k, v)| (k.into(), v.into())).collect();
            if matches!(spec.stdio, Stdio::Pty(_)) {
                for k in CALLERS_TERMINAL {
                    env.remove(std::ffi::OsStr::new(k));
                }
            }
            env
        }
        EnvFrom::Clean => BTreeMap::new(),
    };
    if spec.env_from == EnvFrom::Clean && !spec.env.contains_key("PATH") {
        env.insert("PATH".into(), CLEAN_PATH.into());
    }
    // What one daemon handed the next is no business of its programs.
    env.remove(std::ffi::OsStr::new(crate::upgrade::HANDOVER_ENV));
    for (k, v) in &spec.env {
        env.insert(k.into(), v.into());
    }
    if matches!(spec.stdio, Stdio::Pty(_)) && !spec.env.contains_key("TERM") {
        env.insert("TERM".into(), "xterm-256color".into());
    }
    if wants_shell_integration(spec) {
        env.insert("PROMPT_COMMAND".into(), BASH_PROMPT_COMMAND.into());
    }
    env.insert("PORTAL_SOCKET".into(), socket.as_os_str().to_owned());
    env.insert("PORTAL_SESSION_ID".into(), id.0.to_string().into());
    env.insert("PORTAL_SESSION_TOKEN".into(), token.into());
    env
}

/// Starts the program described by `spec` through the holder.
pub(crate) fn spawn(
    id: ProcId,
    spec: &ProcSpec,
    env: &BTreeMap<std::ffi::OsString, std::ffi::OsString>,
    holding: &Arc<Holding>,
) -> Result<Spawned, ProcError> {
    let path_var = env.get(std::ffi::OsStr::new("PATH")).and_then(|v| v.to_str());
    let program = resolve_program(&spec.command, &spec.cwd, path_var)?;
    let lossy = |v: &std::ffi::OsStr| v.to_string_lossy().into_owned();
    let token = env.get(std::ffi::OsStr::new("PORTAL_SESSION_TOKEN")).map(|t| lossy(t));
    let request = wire::Spawn {
        proc_id: id.0,
        program: lossy(program.as_os_str()),
        arg0: spec.command.clone(),
        args: spec.args.clone(),
        env: env.iter().map(|(k, v)| (lossy(k), lossy(v))).collect(),
        cwd: lossy(spec.cwd.as_os_str()),
        pty: match spec.stdio {
            Stdio::Pty(size) => Some((size.rows, size.cols)),
            Stdio::Pipes => None,
        },
        meta: serde_json::json!({ "token": token }).to_string(),
    };
    let journal =
        journal::create_or_warn(holding.journal_ring(), matches!(spec.stdio, Stdio::Pty(_)))
            .map(Arc::new);
    let asked = std::time::Instant::now();
    let (pid, fds) = holding
        .spawn(request, &journal.as_ref().map(|j| j.fds()).unwrap_or_default())
        .map_err(|reason| ProcError::Spawn {
            program: spec.command.clone(),
            reason: SpawnFailure::Holder(reason),
        })?;
    tracing::debug!(proc = %id, holder_ms = asked.elapsed().as_secs_f64() * 1e3, "portal-holder started the program");
    let lineage = lineage_of(env, holding);
    let started = match spec.stdio {
        Stdio::Pty(_) => bridge_pty(id, fds, holding, journal),
        Stdio::Pipes => bridge_pipes(id, fds, holding, journal),
    };
    match started {
        Ok(bridged) => Ok(bridged.into_spawned(pid, lineage, holding, None)),
        Err(e) => {
            // Nothing was reparented yet: the tree alone finds everything;
            // the holder reaps it and lets it go.
            let _ = sys::kill_tree(pid, None, libc::SIGKILL);
            holding.release(id);
            Err(e)
        }
    }
}

fn io_err(id: ProcId, op: &'static str) -> impl FnOnce(std::io::Error) -> ProcError {
    move |source| ProcError::Io { id, op, source }
}

/// The threads of a started program, before its exit is wired.
struct Bridged {
    output: mpsc::Receiver<OutputEvent>,
    streams: usize,
    input: InputWriter,
    primary: Option<Primary>,
    input_target: Option<InputTarget>,
    id: ProcId,
}

impl Bridged {
    fn into_spawned(
        self,
        pid: u32,
        lineage: sys::Lineage,
        holding: &Arc<Holding>,
        recovered: Option<Snapshot>,
    ) -> Spawned {
        Spawned {
            pid,
            output: self.output,
            streams: self.streams,
            input: self.input,
            exit: holding.exit_of(self.id),
            primary: self.primary,
            input_target: self.input_target,
            lineage,
            holding: Arc::clone(holding),
            recovered,
        }
    }
}

/// Reader and writer threads on a PTY's primary side.
fn bridge_pty(
    id: ProcId,
    mut fds: Vec<OwnedFd>,
    holding: &Arc<Holding>,
    journal: Option<Arc<Journal>>,
) -> Result<Bridged, ProcError> {
    let Some(primary) = fds.pop().filter(|_| fds.is_empty()) else {
        return Err(ProcError::Io {
            id,
            op: "spawn",
            source: std::io::Error::other("portal-holder sent no PTY"),
        });
    };
    let primary = Primary(primary);
    let reader = primary
        .0
        .try_clone()
        .map(std::fs::File::from)
        .map_err(io_err(id, "dup PTY primary for reading"))?;
    let writer =
        primary.0.try_clone().map(std::fs::File::from).map_err(io_err(id, "dup PTY primary"))?;
    let (out_tx, output) = mpsc::channel(OUTPUT_QUEUE_CHUNKS);
    start_reader(id, "out", StreamId::Stdout, reader, out_tx, Arc::clone(holding), journal.clone())
        .map_err(io_err(id, "start I/O threads"))?;
    let input = start_writer(id, writer, None, journal).map_err(io_err(id, "start I/O threads"))?;
    let input_target = primary.tty_rdev().map(|rdev| InputTarget::Tty { rdev });
    Ok(Bridged { output, streams: 1, input, primary: Some(primary), input_target, id })
}

/// Reader threads on output and error, a writer thread on input (input,
/// output and error; or output and error alone once input was closed).
fn bridge_pipes(
    id: ProcId,
    fds: Vec<OwnedFd>,
    holding: &Arc<Holding>,
    journal: Option<Arc<Journal>>,
) -> Result<Bridged, ProcError> {
    let mut fds = fds.into_iter();
    let (stdin, stdout, stderr) = match (fds.next(), fds.next(), fds.next(), fds.next()) {
        (Some(i), Some(o), Some(e), None) => (Some(i), o, e),
        (Some(o), Some(e), None, None) => (None, o, e),
        _ => {
            return Err(ProcError::Io {
                id,
                op: "spawn",
                source: std::io::Error::other("portal-holder sent no pipes"),
            });
        }
    };
    let (out_tx, output) = mpsc::channel(OUTPUT_QUEUE_CHUNKS);
    let file = std::fs::File::from;
    let h = || Arc::clone(holding);
    start_reader(id, "out", StreamId::Stdout, file(stdout), out_tx.clone(), h(), journal.clone())
        .and_then(|()| {
            start_reader(id, "err", StreamId::Stderr, file(stderr), out_tx, h(), journal.clone())
        })
        .map_err(io_err(id, "start I/O threads"))?;
    let Some(stdin) = stdin else {
        let input = InputWriter {
            tx: None,
            pending: Arc::new(AtomicUsize::new(0)),
            finished: None,
            journal,
        };
        return Ok(Bridged { output, streams: 2, input, primary: None, input_target: None, id });
    };
    let input_target = std::fs::File::from(stdin.try_clone().map_err(io_err(id, "dup input"))?)
        .metadata()
        .ok()
        .map(|m| InputTarget::Pipe { ino: m.ino() });
    let input = start_writer(id, std::fs::File::from(stdin), Some(Arc::clone(holding)), journal)
        .map_err(io_err(id, "start I/O threads"))?;
    Ok(Bridged { output, streams: 2, input, primary: None, input_target, id })
}

/// A program an earlier daemon left with the holder, taken over: the same
/// threads on the descriptors the holder kept. Its output continues from
/// what the kernel buffered meanwhile (the program blocked when that was
/// full); an exit that came while no daemon ran is its exit.
///
/// Its journal is read before any reader starts: the snapshot goes back
/// with it (`recovered`) so the log, which ends at `ends`, can take what
/// the last daemon read and never committed; input it accepted and never
/// wrote is written first, or said lost with its size.
pub(crate) fn adopt(
    id: ProcId,
    adoptable: portal_holder::client::Adoptable,
    socket: &Path,
    holding: &Arc<Holding>,
    ends: [u64; 3],
) -> Result<Spawned, ProcError> {
    let held = adoptable.held;
    let journal = Some(adoptable.journal).filter(|fds| !fds.is_empty()).and_then(|fds| {
        Journal::open(fds, held.pty)
            .map_err(|e| tracing::warn!(proc = %id, error = %e, "cannot read the program's journal; what the last daemon read and did not log is lost"))
            .ok()
    });
    let recovered = journal.as_ref().and_then(|j| {
        let snap = j
            .snapshot()
            .map_err(|e| tracing::warn!(proc = %id, error = %e, "cannot read the program's journal; what the last daemon read and did not log is lost"))
            .ok()?;
        for s in StreamId::ALL {
            if snap.streams[s.index()].total < ends[s.index()] {
                // A log ahead of its journal (it cannot happen unless the
                // journal was lost): the log's offsets win.
                j.restart_at(s, ends[s.index()]);
            }
        }
        Some(snap)
    });
    let journal = journal.map(Arc::new);
    holding.adopted(id, held.pid, held.exit.map(ExitInfo::from));
    // What every descendant carries, as the spawn wrote it.
    let env: BTreeMap<std::ffi::OsString, std::ffi::OsString> = [
        ("PORTAL_SOCKET".into(), socket.as_os_str().to_owned()),
        ("PORTAL_SESSION_ID".into(), id.0.to_string().into()),
    ]
    .into_iter()
    .collect();
    let lineage = lineage_of(&env, holding);
    let bridged = if held.pty {
        bridge_pty(id, adoptable.fds, holding, journal.clone())?
    } else {
        bridge_pipes(id, adoptable.fds, holding, journal.clone())?
    };
    if let (Some(snap), Some(j)) = (&recovered, &journal) {
        owe_input(id, snap, j, &bridged.input);
    }
    Ok(bridged.into_spawned(held.pid, lineage, holding, recovered))
}

/// Writes the input the last daemon accepted and never wrote, before
/// anything new; what cannot be written (gone from the ring, secret, or
/// input closed) is said lost with its size and accounted.
fn owe_input(id: ProcId, snap: &Snapshot, journal: &Journal, input: &InputWriter) {
    let lost = match journal::undelivered(snap) {
        Undelivered::None => return,
        Undelivered::Deliver(bytes) => {
            let n = bytes.len();
            if input.redeliver(Bytes::from(bytes)) {
                tracing::info!(proc = %id, bytes = n, "writing input the last daemon accepted and never wrote");
                return;
            }
            n as u64
        }
        Undelivered::Lost(n) => n,
    };
    tracing::warn!(proc = %id, bytes = lost, "input the last daemon accepted was never written to the program and cannot be: it is lost");
    journal.delivered(usize::try_from(lost).unwrap_or(usize::MAX));
}

/// What the child's descendants carry, told which pids are managed
/// processes themselves and where orphans are reparented.
fn lineage_of(
    env: &BTreeMap<std::ffi::OsString, std::ffi::OsString>,
    holding: &Arc<Holding>,
) -> sys::Lineage {
    let managed = Arc::clone(holding);
    sys::Lineage::of_env(env)
        .with_managed(Arc::new(move |pid| managed.is_managed(pid)))
        .with_parent(holding.holder_pid())
}

/// A reader stops merging reads when less than this is left in its buffer
/// (a PTY read is at most about 4 KiB).
const READ_MERGE_ROOM: usize = 4 << 10;

fn thread(name: String) -> std::thread::Builder {
    std::thread::Builder::new().name(name).stack_size(IO_THREAD_STACK_BYTES)
}

/// Reads a program's output until EOF. A read returns what the kernel has
/// (about 4 KiB from a PTY); while more is ready at once, the thread reads
/// on into the same buffer and sends one larger chunk, so bulk output
/// costs the actor, the log and the screen a fraction of the messages, and
/// a lone prompt still goes out the moment it is read.
///
/// Between chunks it waits on its stream and on the holding's detach
/// signal together: at a handover it stops there, with every byte it read
/// already sent, and what it did not read stays in the kernel for the next
/// daemon, so the log continues without a gap or a repeat.
fn start_reader(
    id: ProcId,
    tag: &str,
    stream: StreamId,
    mut src: std::fs::File,
    tx: mpsc::Sender<OutputEvent>,
    holding: Arc<Holding>,
    journal: Option<Arc<Journal>>,
) -> std::io::Result<()> {
    use std::os::fd::AsFd as _;
    thread(format!("{tag}-{id}")).spawn(move || {
        let mut buf = vec![0u8; READ_CHUNK_BYTES];
        let fd = src.as_raw_fd();
        let mut eof = false;
        while !eof {
            if sys::wait_readable_or(src.as_fd(), holding.detach_signal()) {
                // The actor may be gone already; then nobody waits for it.
                let _ = tx.blocking_send(OutputEvent::Detached);
                return;
            }
            let mut n = 0;
            loop {
                // Through the journal the kernel moves the bytes into the
                // program's output log before anything reads them, so a
                // daemon killed at any instant leaves them all counted.
                let got = match &journal {
                    Some(j) => j.take(stream, src.as_fd(), &mut buf[n..]),
                    None => src.read(&mut buf[n..]),
                };
                match got {
                    Ok(0) => eof = true,
                    Ok(got) => n += got,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    // Nothing there after all (another reader of the terminal).
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    // EIO from a PTY whose secondary side is closed is end of output.
                    Err(_) => eof = true,
                }
                if eof || buf.len() - n < READ_MERGE_ROOM || !sys::readable_now(fd) {
                    break;
                }
            }
            if n > 0 {
                let chunk = Bytes::copy_from_slice(&buf[..n]);
                if tx.blocking_send(OutputEvent::Data(stream, chunk)).is_err() {
                    // The actor is gone: nobody wants this output any more.
                    return;
                }
            }
        }
        // The actor may be gone already; then nobody waits for the EOF.
        let _ = tx.blocking_send(OutputEvent::Eof);
    })?;
    Ok(())
}

/// Input accepted for programs and not yet written to them, across every
/// process of this daemon (one daemon per OS process).
static UNREAD_INPUT: AtomicUsize = AtomicUsize::new(0);

/// Bytes of input waiting for programs, across every process.
pub(crate) fn unread_input_total() -> usize {
    UNREAD_INPUT.load(Ordering::Acquire)
}

/// The input writer; for a pipe, `holding` is told when input closes (the
/// holder's copy of the pipe must close too for the program to see its end).
fn start_writer(
    id: ProcId,
    mut dst: impl Write + Send + 'static,
    holding: Option<Arc<Holding>>,
    journal: Option<Arc<Journal>>,
) -> std::io::Result<InputWriter> {
    let delivered = journal.clone();
    let (tx, rx) = std::sync::mpsc::channel::<InputMsg>();
    let (finished_tx, finished) = oneshot::channel();
    let pending = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&pending);
    thread(format!("in-{id}")).spawn(move || {
        let journal_of = |journaled: bool| delivered.as_deref().filter(|_| journaled);
        let mut broken = false;
        let mut detached = false;
        while let Ok(msg) = rx.recv() {
            match msg {
                InputMsg::Data { data, journaled } => {
                    let j = journal_of(journaled);
                    // After a failed write (the program closed its input or
                    // exited) the rest is discarded, but still accounted.
                    if broken {
                        j.inspect(|j| j.delivered(data.len()));
                    } else if write_input(&mut dst, &data, j).is_err() {
                        broken = true;
                    }
                    counter.fetch_sub(data.len(), Ordering::AcqRel);
                    UNREAD_INPUT.fetch_sub(data.len(), Ordering::AcqRel);
                }
                #[allow(
                    clippy::disallowed_methods,
                    reason = "a dedicated writer thread, not a runtime worker"
                )]
                InputMsg::Gap(d) => std::thread::sleep(d.min(MAX_INPUT_GAP)),
                InputMsg::Close => break,
                InputMsg::Detach => {
                    detached = true;
                    break;
                }
            }
        }
        // Whatever was queued behind the close is dropped: account for it.
        // (A send racing with the end of this thread fails and undoes its
        // own count.)
        while let Ok(msg) = rx.try_recv() {
            if let InputMsg::Data { data, journaled } = msg {
                journal_of(journaled).inspect(|j| j.delivered(data.len()));
                counter.fetch_sub(data.len(), Ordering::AcqRel);
                UNREAD_INPUT.fetch_sub(data.len(), Ordering::AcqRel);
            }
        }
        // Dropping `dst` closes the daemon's end of the pipe, and the holder
        // closes its own (EOF for the program); for a PTY it is one of the
        // primary's descriptors (the program sees nothing).
        // At a handover the holder's copy stays open: the next daemon
        // writes on.
        drop(dst);
        if let Some(h) = holding.filter(|h| !detached && !h.is_detaching()) {
            h.close_input(id);
        }
        // Nobody may wait for it (no handover).
        let _ = finished_tx.send(());
    })?;
    Ok(InputWriter { tx: Some(tx), pending, finished: Some(finished), journal })
}

/// Writes one piece of input, telling the journal of every part the
/// program's descriptor took (a write cut short by a handover or a crash
/// is written again from exactly where it stopped), and of the rest when
/// the descriptor refuses it for good.
fn write_input(
    dst: &mut impl Write,
    data: &[u8],
    journal: Option<&Journal>,
) -> std::io::Result<()> {
    let mut rest = data;
    while !rest.is_empty() {
        match dst.write(rest) {
            Ok(0) => {
                journal.inspect(|j| j.delivered(rest.len()));
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            Ok(n) => {
                journal.inspect(|j| j.delivered(n));
                rest = &rest[n..];
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                journal.inspect(|j| j.delivered(rest.len()));
                return Err(e);
            }
        }
    }
    dst.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_like_execvp() {
        let cwd = Path::new("/");
        assert!(resolve_program("sh", cwd, None).is_ok());
        assert!(resolve_program("/bin/sh", cwd, None).is_ok());
        let err = resolve_program("no-such-program-xyz", cwd, Some("/bin")).unwrap_err();
        assert!(err.to_string().contains("not found on PATH"), "{err}");
        let err = resolve_program("/etc", cwd, None).unwrap_err();
        assert!(err.to_string().contains("directory"), "{err}");
        let err = resolve_program("/etc/passwd", cwd, None).unwrap_err();
        assert!(err.to_string().contains("not executable"), "{err}");
    }
}
