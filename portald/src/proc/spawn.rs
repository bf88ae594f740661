//! Starting a program on a PTY or on pipes, and the threads that bridge its
//! blocking I/O to its actor.
//!
//! Threads per process (all named after the process id):
//! - `out-<id>` / `err-<id>`: one reader per output stream. Reads up to
//!   [`READ_CHUNK_BYTES`] and hands each chunk to the actor over a bounded
//!   channel (a slow actor stops the reader, the kernel buffer fills, the
//!   program blocks: backpressure, never loss). Ends on EOF (a PTY reports
//!   EIO once every secondary fd is closed; portable-pty maps it to EOF), on a
//!   read error, or when the actor is gone.
//! - `in-<id>`: the input writer. Blocking writes never run on a runtime
//!   worker (a program that does not read blocks them). Ends when the actor
//!   drops its sender or input is closed.
//! - `wait-<id>`: blocks in `waitpid` for the program and sends its exit to
//!   the actor once. Ends when the program is reaped.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::os::fd::AsFd as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};
use tokio::sync::{mpsc, oneshot};

use super::probe::InputTarget;
use super::{ProcError, ProcId, ProcSpec, Stdio, StreamId, TermSize};
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
}

/// Pids Portal spawned and has not reaped yet, so the orphan reaper leaves
/// them to their waiter threads. Spawning holds the lock from fork until the
/// pid is recorded, so a just-forked child is never mistaken for an orphan.
#[derive(Debug, Default)]
pub(crate) struct SpawnedPids(Mutex<HashSet<u32>>);

impl SpawnedPids {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<u32>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `pid` is a managed process's own pid.
    pub(crate) fn contains(&self, pid: u32) -> bool {
        self.lock().contains(&pid)
    }

    /// Reaps orphans that are not ours, holding the spawn lock.
    pub(crate) fn reap_orphans(&self) -> Vec<u32> {
        let ours = self.lock();
        sys::reap_orphans(&ours)
    }

    fn forget(&self, pid: u32) {
        self.lock().remove(&pid);
    }
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
    pub(crate) primary: Option<Box<dyn MasterPty + Send>>,
    /// What the program reads its input from, for the kernel's input state
    /// (`None` when it could not be identified).
    pub(crate) input_target: Option<InputTarget>,
    /// What its descendants carry in their environment, to find them all at
    /// kill time.
    pub(crate) lineage: sys::Lineage,
}

impl std::fmt::Debug for Spawned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawned").field("pid", &self.pid).finish_non_exhaustive()
    }
}

enum InputMsg {
    Data(Bytes),
    /// Pause before the next write (between a prompt and its Enter).
    Gap(std::time::Duration),
    Close,
}

/// Sends input to the writer thread; counts bytes not yet written.
#[derive(Debug)]
pub(crate) struct InputWriter {
    tx: Option<std::sync::mpsc::Sender<InputMsg>>,
    pending: Arc<AtomicUsize>,
}

/// Queues bytes for the writer thread, counting them as unread (for this
/// process and in total) until it has written them. `false` when the
/// writer thread is gone (the count is undone).
fn enqueue(tx: &std::sync::mpsc::Sender<InputMsg>, pending: &AtomicUsize, data: Bytes) -> bool {
    let len = data.len();
    pending.fetch_add(len, Ordering::AcqRel);
    UNREAD_INPUT.fetch_add(len, Ordering::AcqRel);
    if tx.send(InputMsg::Data(data)).is_err() {
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
            enqueue(&tx, &pending, Bytes::from(data));
        }))
    }

    /// Bytes accepted but not yet written to the program.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Queues bytes. `false` when the writer thread is gone.
    pub(crate) fn send(&self, data: Bytes) -> bool {
        let Some(tx) = &self.tx else { return false };
        enqueue(tx, &self.pending, data)
    }

    /// Queues a pause before the next write.
    pub(crate) fn gap(&self, d: std::time::Duration) {
        if let Some(tx) = &self.tx {
            // The thread may be gone (program exited); then there is no next write.
            let _ = tx.send(InputMsg::Gap(d));
        }
    }

    /// Closes input after everything queued is written.
    pub(crate) fn close(&mut self) {
        if let Some(tx) = self.tx.take() {
            // The thread may already be gone (program exited); nothing to close then.
            let _ = tx.send(InputMsg::Close);
        }
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
    let fail = |reason: String| ProcError::Spawn { program: command.to_owned(), reason };
    let check = |p: &Path| -> Result<(), String> {
        let meta = std::fs::metadata(p).map_err(|e| e.to_string())?;
        if meta.is_dir() {
            return Err("it is a directory".into());
        }
        if meta.permissions().mode() & 0o111 == 0 {
            return Err("permission denied (not executable)".into());
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
    Err(fail(format!("not found on PATH ({path_var})")))
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

/// Builds the child's environment: the daemon's, then the caller's overrides,
/// then `TERM=xterm-256color` for PTYs unless the caller set `TERM`, then
/// shell integration for bash, then Portal's own variables (which a caller
/// cannot override).
pub(crate) fn child_env(
    spec: &ProcSpec,
    id: ProcId,
    token: &str,
    socket: &Path,
) -> BTreeMap<std::ffi::OsString, std::ffi::OsString> {
    let mut env: BTreeMap<_, _> = std::env::vars_os().collect();
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

/// Starts the program described by `spec`.
pub(crate) fn spawn(
    id: ProcId,
    spec: &ProcSpec,
    env: &BTreeMap<std::ffi::OsString, std::ffi::OsString>,
    pids: &Arc<SpawnedPids>,
) -> Result<Spawned, ProcError> {
    let path_var = env.get(std::ffi::OsStr::new("PATH")).and_then(|v| v.to_str());
    let program = resolve_program(&spec.command, &spec.cwd, path_var)?;
    match spec.stdio {
        Stdio::Pty(size) => spawn_pty(id, spec, env, size, pids),
        Stdio::Pipes => spawn_pipes(id, spec, &program, env, pids),
    }
}

fn io_err(id: ProcId, op: &'static str) -> impl FnOnce(std::io::Error) -> ProcError {
    move |source| ProcError::Io { id, op, source }
}

fn anyhow_io(e: &anyhow::Error) -> std::io::Error {
    std::io::Error::other(format!("{e:#}"))
}

fn spawn_pty(
    id: ProcId,
    spec: &ProcSpec,
    env: &BTreeMap<std::ffi::OsString, std::ffi::OsString>,
    size: TermSize,
    pids: &Arc<SpawnedPids>,
) -> Result<Spawned, ProcError> {
    let pair = native_pty_system().openpty(pty_size(size)).map_err(|e| ProcError::Io {
        id,
        op: "openpty",
        source: anyhow_io(&e),
    })?;
    let mut cmd = CommandBuilder::new(&spec.command);
    cmd.args(&spec.args);
    cmd.cwd(&spec.cwd);
    cmd.env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let portable_pty::PtyPair { slave: secondary, master: primary } = pair;
    let pid = {
        let mut ours = pids.lock();
        let child = secondary.spawn_command(cmd).map_err(|e| ProcError::Spawn {
            program: spec.command.clone(),
            reason: format!("{e:#}"),
        })?;
        let pid = child.process_id().ok_or_else(|| ProcError::Io {
            id,
            op: "spawn",
            source: std::io::Error::other("the child has no pid"),
        })?;
        ours.insert(pid);
        // The std Child is never waited on: the waiter thread reaps the pid.
        drop(child);
        pid
    };
    // Without this the reader never sees EOF: the parent would keep the
    // secondary side open after the program exits.
    drop(secondary);
    let reader = match primary.as_raw_fd().map(sys::dup_fd) {
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            abort_spawned(pid, pids);
            return Err(ProcError::Io { id, op: "dup PTY primary for reading", source: e });
        }
        None => {
            abort_spawned(pid, pids);
            return Err(ProcError::Io {
                id,
                op: "dup PTY primary for reading",
                source: std::io::Error::other("the PTY has no file descriptor"),
            });
        }
    };
    let writer = match primary.as_raw_fd().map(sys::dup_fd) {
        Some(Ok(w)) => w,
        Some(Err(e)) => {
            abort_spawned(pid, pids);
            return Err(ProcError::Io { id, op: "dup PTY primary", source: e });
        }
        None => {
            abort_spawned(pid, pids);
            return Err(ProcError::Io {
                id,
                op: "dup PTY primary",
                source: std::io::Error::other("the PTY has no file descriptor"),
            });
        }
    };
    let (out_tx, output) = mpsc::channel(OUTPUT_QUEUE_CHUNKS);
    let started = start_reader(id, "out", StreamId::Stdout, reader, out_tx)
        .and_then(|()| start_writer(id, writer))
        .and_then(|input| Ok((input, start_waiter(id, pid, pids)?)));
    match started {
        Ok((input, exit)) => {
            let input_target = primary
                .tty_name()
                .and_then(|path| std::fs::metadata(path).ok())
                .map(|m| InputTarget::Tty { rdev: m.rdev() });
            Ok(Spawned {
                lineage: lineage_of(env, pids),
                pid,
                output,
                streams: 1,
                input,
                exit,
                primary: Some(primary),
                input_target,
            })
        }
        Err(e) => {
            abort_spawned(pid, pids);
            Err(io_err(id, "start I/O threads")(e))
        }
    }
}

/// What the child's descendants carry, told which pids are managed
/// processes themselves.
fn lineage_of(
    env: &BTreeMap<std::ffi::OsString, std::ffi::OsString>,
    pids: &Arc<SpawnedPids>,
) -> sys::Lineage {
    let pids = Arc::clone(pids);
    sys::Lineage::of_env(env).with_managed(Arc::new(move |pid| pids.contains(pid)))
}

/// Kills and reaps a child whose I/O could not be set up, so a failed start
/// leaves nothing behind.
fn abort_spawned(pid: u32, pids: &SpawnedPids) {
    // Nothing was reparented yet: the tree alone finds everything.
    let _ = sys::kill_tree(pid, None, libc::SIGKILL);
    let _ = sys::wait_pid(pid);
    pids.forget(pid);
}

fn spawn_pipes(
    id: ProcId,
    spec: &ProcSpec,
    program: &Path,
    env: &BTreeMap<std::ffi::OsString, std::ffi::OsString>,
    pids: &Arc<SpawnedPids>,
) -> Result<Spawned, ProcError> {
    use std::process::{Command, Stdio as StdStdio};
    let mut cmd = Command::new(program);
    std::os::unix::process::CommandExt::arg0(&mut cmd, &spec.command);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(env)
        .stdin(StdStdio::piped())
        .stdout(StdStdio::piped())
        .stderr(StdStdio::piped());
    sys::new_session_on_spawn(&mut cmd);
    let mut child = {
        let mut ours = pids.lock();
        let child = cmd.spawn().map_err(|e| ProcError::Spawn {
            program: spec.command.clone(),
            reason: e.to_string(),
        })?;
        ours.insert(child.id());
        child
    };
    let pid = child.id();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        abort_spawned(pid, pids);
        return Err(ProcError::Io {
            id,
            op: "spawn",
            source: std::io::Error::other("pipes were not created"),
        });
    };
    // The std Child is never waited on: the waiter thread reaps the pid.
    drop(child);
    let input_target = stdin
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| std::fs::File::from(fd).metadata())
        .ok()
        .map(|m| InputTarget::Pipe { ino: m.ino() });
    let (out_tx, output) = mpsc::channel(OUTPUT_QUEUE_CHUNKS);
    let started = start_reader(id, "out", StreamId::Stdout, stdout, out_tx.clone())
        .and_then(|()| start_reader(id, "err", StreamId::Stderr, stderr, out_tx))
        .and_then(|()| start_writer(id, stdin))
        .and_then(|input| Ok((input, start_waiter(id, pid, pids)?)));
    match started {
        Ok((input, exit)) => Ok(Spawned {
            pid,
            output,
            streams: 2,
            input,
            exit,
            primary: None,
            input_target,
            lineage: lineage_of(env, pids),
        }),
        Err(e) => {
            abort_spawned(pid, pids);
            Err(io_err(id, "start I/O threads")(e))
        }
    }
}

/// The portable-pty size for a terminal size.
pub(crate) fn pty_size(size: TermSize) -> PtySize {
    PtySize { rows: size.rows, cols: size.cols, pixel_width: 0, pixel_height: 0 }
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
fn start_reader(
    id: ProcId,
    tag: &str,
    stream: StreamId,
    mut src: impl Read + std::os::fd::AsRawFd + Send + 'static,
    tx: mpsc::Sender<OutputEvent>,
) -> std::io::Result<()> {
    thread(format!("{tag}-{id}")).spawn(move || {
        let mut buf = vec![0u8; READ_CHUNK_BYTES];
        let fd = src.as_raw_fd();
        let mut eof = false;
        while !eof {
            let mut n = 0;
            loop {
                match src.read(&mut buf[n..]) {
                    Ok(0) => eof = true,
                    Ok(got) => n += got,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
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

fn start_writer(id: ProcId, mut dst: impl Write + Send + 'static) -> std::io::Result<InputWriter> {
    let (tx, rx) = std::sync::mpsc::channel::<InputMsg>();
    let pending = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&pending);
    thread(format!("in-{id}")).spawn(move || {
        let mut broken = false;
        while let Ok(msg) = rx.recv() {
            match msg {
                InputMsg::Data(data) => {
                    // After a failed write (the program closed its input or
                    // exited) the rest is discarded, but still accounted.
                    if !broken && dst.write_all(&data).and_then(|()| dst.flush()).is_err() {
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
            }
        }
        // Whatever was queued behind the close is dropped: account for it.
        // (A send racing with the end of this thread fails and undoes its
        // own count.)
        while let Ok(msg) = rx.try_recv() {
            if let InputMsg::Data(data) = msg {
                counter.fetch_sub(data.len(), Ordering::AcqRel);
                UNREAD_INPUT.fetch_sub(data.len(), Ordering::AcqRel);
            }
        }
        // Dropping `dst` closes the pipe (EOF for the program), or one of the
        // PTY primary's descriptors (the program sees nothing).
    })?;
    Ok(InputWriter { tx: Some(tx), pending })
}

fn start_waiter(
    id: ProcId,
    pid: u32,
    pids: &Arc<SpawnedPids>,
) -> std::io::Result<oneshot::Receiver<std::io::Result<ExitInfo>>> {
    let (tx, rx) = oneshot::channel();
    let pids = Arc::clone(pids);
    thread(format!("wait-{id}")).spawn(move || {
        let exit = sys::wait_pid(pid);
        pids.forget(pid);
        // The actor may be gone (daemon shutting down); the child is reaped anyway.
        let _ = tx.send(exit);
    })?;
    Ok(rx)
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
