//! Wire ⇄ domain conversions. Every request field is validated here, and a
//! bad one becomes an [`InvalidRequest`] naming the field.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use portal_proto::v1 as pb;

use crate::config::{
    DEFAULT_COLS, DEFAULT_READ_BYTES, DEFAULT_ROWS, MAX_IDLE_TIMEOUT, MAX_READ_BYTES, MAX_TERM_DIM,
    MIN_TERM_DIM,
};
use crate::proc::input::{InputReport, InputSource, InputState};
use crate::proc::{
    EnvFrom, ProcHandle, ProcSpec, ProcStatus, RestartPolicy, Stdio, StreamId, TermSize,
};
use crate::reads::{FollowFrom, OutRecord, ReadFrom, ReadResult, ReadSpec};
use crate::registry::ProcTarget;
use crate::screen::Snapshot;
use crate::store::{Keep, ProgramRow};
use crate::waits::{KeyItem, Matcher, WaitOutcome, WaitReason, WaitSpec};

/// A request field that is not acceptable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid {field}: {reason}")]
pub(crate) struct InvalidRequest {
    /// The field, as named in the .proto (`args[2]`, `env.FOO`).
    pub(crate) field: String,
    /// What is wrong and what is expected.
    pub(crate) reason: String,
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> InvalidRequest {
    InvalidRequest { field: field.into(), reason: reason.into() }
}

/// Longest name accepted.
const MAX_NAME_CHARS: usize = 128;

/// Longest command, argument or environment entry accepted: Linux's
/// MAX_ARG_STRLEN (32 pages).
const MAX_ARG_BYTES: usize = 128 << 10;

fn no_nul(field: &str, s: &str) -> Result<(), InvalidRequest> {
    if s.contains('\0') {
        return Err(invalid(field, "contains a NUL byte, which cannot be passed to a program"));
    }
    if s.len() > MAX_ARG_BYTES {
        return Err(invalid(
            field,
            format!("is {} bytes; at most {MAX_ARG_BYTES} are accepted", s.len()),
        ));
    }
    Ok(())
}

/// The process a request names.
pub(crate) fn target(r: Option<&pb::ProcRef>) -> Result<ProcTarget, InvalidRequest> {
    match r.and_then(|r| r.target.as_ref()) {
        Some(pb::proc_ref::Target::Id(id)) => Ok(ProcTarget::Id(*id)),
        Some(pb::proc_ref::Target::Name(name)) if !name.is_empty() => {
            Ok(ProcTarget::Name(name.clone()))
        }
        Some(pb::proc_ref::Target::Name(_)) => Err(invalid("proc.name", "is empty")),
        None => Err(invalid("proc", "is required: give the process id or name")),
    }
}

/// Checks a terminal size; zero dimensions take `default`.
pub(crate) fn term_size(
    field: &str,
    s: Option<&pb::TermSize>,
    default: TermSize,
) -> Result<TermSize, InvalidRequest> {
    let Some(s) = s else { return Ok(default) };
    let dim = |name: &str, v: u32, d: u16| -> Result<u16, InvalidRequest> {
        if v == 0 {
            return Ok(d);
        }
        u16::try_from(v).ok().filter(|v| (MIN_TERM_DIM..=MAX_TERM_DIM).contains(v)).ok_or_else(
            || {
                invalid(
                    format!("{field}.{name}"),
                    format!("is {v}; it must be between {MIN_TERM_DIM} and {MAX_TERM_DIM}"),
                )
            },
        )
    };
    Ok(TermSize {
        rows: dim("rows", s.rows, default.rows)?,
        cols: dim("cols", s.cols, default.cols)?,
    })
}

/// Validates a start request into a spec. The working directory is checked
/// to exist: blocking (it stats the filesystem), so callers run it on a
/// blocking thread.
pub(crate) fn start_spec(req: pb::StartRequest) -> Result<ProcSpec, InvalidRequest> {
    if req.command.trim().is_empty() {
        return Err(invalid("command", "is empty: name the program to run (no shell is implied)"));
    }
    no_nul("command", &req.command)?;
    for (i, a) in req.args.iter().enumerate() {
        no_nul(&format!("args[{i}]"), a)?;
    }
    let mut env = BTreeMap::new();
    for (k, v) in req.env {
        if k.is_empty() || k.contains('=') {
            return Err(invalid(format!("env key {k:?}"), "must be non-empty and contain no '='"));
        }
        no_nul(&format!("env key {k:?}"), &k)?;
        no_nul(&format!("env.{k}"), &v)?;
        env.insert(k, v);
    }
    let env_from = match pb::EnvFrom::try_from(req.env_from) {
        Ok(pb::EnvFrom::Unspecified | pb::EnvFrom::Daemon) => EnvFrom::Daemon,
        Ok(pb::EnvFrom::Clean) => EnvFrom::Clean,
        Ok(pb::EnvFrom::Caller) => {
            let mut vars = BTreeMap::new();
            for (k, v) in req.caller_env {
                // Named without the value: it may be a secret.
                if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                    return Err(invalid(
                        format!("caller_env key {k:?}"),
                        "must be non-empty, without '=' or NUL, and its value without NUL",
                    ));
                }
                vars.insert(k, v);
            }
            EnvFrom::Caller(std::sync::Arc::new(vars))
        }
        Err(_) => {
            return Err(invalid("env_from", format!("{} is not a known value", req.env_from)));
        }
    };
    // A client that names no directory (one on another machine, whose
    // own directory means nothing here) gets the user's home.
    let cwd = if req.cwd.is_empty() {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.is_absolute() && h.is_dir())
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"))
    } else {
        no_nul("cwd", &req.cwd)?;
        let p = PathBuf::from(&req.cwd);
        if !p.is_absolute() {
            return Err(invalid(
                "cwd",
                format!("{:?} is relative; give an absolute directory", req.cwd),
            ));
        }
        p
    };
    match std::fs::metadata(&cwd) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(invalid("cwd", format!("{} is not a directory", cwd.display()))),
        Err(e) => return Err(invalid("cwd", format!("{}: {e}", cwd.display()))),
    }
    let name = match req.name.as_str() {
        "" => None,
        n if n.chars().count() > MAX_NAME_CHARS => {
            return Err(invalid("name", format!("is longer than {MAX_NAME_CHARS} characters")));
        }
        n if n.chars().all(|c| c.is_ascii_digit()) => {
            return Err(invalid("name", "is all digits, which would read as an id; add a letter"));
        }
        n if n.chars().any(char::is_control) => {
            return Err(invalid("name", "contains control characters"));
        }
        // `HOST:NAME` names a process on another host.
        n if n.contains(':') => {
            return Err(invalid(
                "name",
                "contains ':', which reads as HOST:NAME (a process on another host); use '-' or '.'",
            ));
        }
        n => Some(n.to_owned()),
    };
    let idle_timeout = match req.timeout_ms {
        0 => None,
        ms => {
            let d = Duration::from_millis(ms);
            if d > MAX_IDLE_TIMEOUT {
                return Err(invalid(
                    "timeout_ms",
                    format!("{ms} is more than 30 days; is the unit right (milliseconds)?"),
                ));
            }
            Some(d)
        }
    };
    let mode = pb::Mode::try_from(req.mode)
        .map_err(|_| invalid("mode", format!("{} is not a known mode", req.mode)))?;
    let stdio = match mode {
        pb::Mode::Pty => Stdio::Pty(term_size(
            "size",
            req.size.as_ref(),
            TermSize { rows: DEFAULT_ROWS, cols: DEFAULT_COLS },
        )?),
        pb::Mode::Pipes | pb::Mode::Unspecified => {
            if req.size.is_some() {
                return Err(invalid("size", "applies only to mode PTY"));
            }
            Stdio::Pipes
        }
    };
    let restart = match req.restart {
        Some(r) if r.on_failure => {
            if name.is_none() {
                return Err(invalid(
                    "restart",
                    "needs a name: each run takes it over from the last",
                ));
            }
            Some(RestartPolicy {
                max_restarts: if r.max_restarts == 0 {
                    DEFAULT_MAX_RESTARTS
                } else {
                    r.max_restarts
                },
                backoff_ms: if r.backoff_ms == 0 { DEFAULT_BACKOFF_MS } else { r.backoff_ms },
            })
        }
        _ => None,
    };
    Ok(ProcSpec {
        command: req.command,
        args: req.args,
        cwd,
        env,
        env_from,
        name,
        idle_timeout,
        stdio,
        restart,
    })
}

/// Restarts when a policy names no limit.
const DEFAULT_MAX_RESTARTS: u32 = 5;

/// The first wait before a restart when a policy names none: long enough
/// that a program failing at once does not spin, short enough to come back
/// before anyone notices.
const DEFAULT_BACKOFF_MS: u64 = 1000;

/// Wire stream → domain.
pub(crate) fn stream(v: i32) -> Result<StreamId, InvalidRequest> {
    match pb::Stream::try_from(v) {
        Ok(pb::Stream::Stdin) => Ok(StreamId::Stdin),
        Ok(pb::Stream::Stdout) => Ok(StreamId::Stdout),
        Ok(pb::Stream::Stderr) => Ok(StreamId::Stderr),
        _ => Err(invalid("streams", format!("{v} is not a stream (use STDIN, STDOUT or STDERR)"))),
    }
}

/// Domain stream → wire.
pub(crate) fn stream_pb(s: StreamId) -> pb::Stream {
    match s {
        StreamId::Stdin => pb::Stream::Stdin,
        StreamId::Stdout => pb::Stream::Stdout,
        StreamId::Stderr => pb::Stream::Stderr,
    }
}

/// A stream list; empty = stdout and stderr.
pub(crate) fn streams(list: &[i32]) -> Result<Vec<StreamId>, InvalidRequest> {
    if list.is_empty() {
        return Ok(vec![StreamId::Stdout, StreamId::Stderr]);
    }
    let mut out = Vec::new();
    for v in list {
        let s = stream(*v)?;
        if !out.contains(&s) {
            out.push(s);
        }
    }
    Ok(out)
}

fn cursor_offsets(c: &pb::Cursor) -> Result<[Option<u64>; 3], InvalidRequest> {
    let mut out = [None; 3];
    for o in &c.offsets {
        out[stream(o.stream)?.index()] = Some(o.offset);
    }
    Ok(out)
}

/// Offsets → wire cursor for the given streams.
pub(crate) fn cursor_pb(streams: &[StreamId], offsets: [u64; 3]) -> pb::Cursor {
    pb::Cursor {
        offsets: streams
            .iter()
            .map(|s| pb::StreamOffset { stream: stream_pb(*s).into(), offset: offsets[s.index()] })
            .collect(),
    }
}

/// Validates a read request.
pub(crate) fn read_spec(req: &pb::ReadRequest) -> Result<ReadSpec, InvalidRequest> {
    let streams = streams(&req.streams)?;
    let from = match &req.from {
        None => ReadFrom::Start,
        Some(pb::read_request::From::Cursor(c)) => ReadFrom::Cursor(cursor_offsets(c)?),
        Some(pb::read_request::From::LastNs(0)) => {
            return Err(invalid("last_ns", "must be more than 0"));
        }
        Some(pb::read_request::From::LastNs(ns)) => ReadFrom::LastNs(*ns),
        Some(pb::read_request::From::ServerCursor(true)) => ReadFrom::ServerCursor,
        Some(pb::read_request::From::Tail(true)) => ReadFrom::Tail,
        Some(pb::read_request::From::ServerCursor(false) | pb::read_request::From::Tail(false)) => {
            ReadFrom::Start
        }
    };
    let max_bytes = match req.max_bytes {
        0 => DEFAULT_READ_BYTES,
        n if n > MAX_READ_BYTES => {
            return Err(invalid(
                "max_bytes",
                format!(
                    "{n} is more than the {MAX_READ_BYTES}-byte page limit; page with the returned cursor"
                ),
            ));
        }
        n => n,
    };
    let text = match pb::Encoding::try_from(req.encoding) {
        Ok(pb::Encoding::Text | pb::Encoding::Unspecified) => true,
        Ok(pb::Encoding::Raw) => false,
        Err(_) => return Err(invalid("encoding", format!("{} is not an encoding", req.encoding))),
    };
    let keep = match pb::Keep::try_from(req.keep) {
        Ok(pb::Keep::Unspecified) => None,
        Ok(pb::Keep::Head) => Some(Keep::Head),
        Ok(pb::Keep::Tail) => Some(Keep::Tail),
        Err(_) => return Err(invalid("keep", format!("{} is not a keep mode", req.keep))),
    };
    let keep = if from == ReadFrom::Tail { Some(Keep::Tail) } else { keep };
    Ok(ReadSpec { streams, from, max_bytes, keep, text })
}

/// Validates where a follow starts.
pub(crate) fn follow_from(req: &pb::FollowRequest) -> Result<FollowFrom, InvalidRequest> {
    match (&req.from, req.from_start) {
        (Some(_), true) => Err(invalid("from", "cannot be combined with from_start")),
        (Some(c), false) => Ok(FollowFrom::Cursor(cursor_offsets(c)?)),
        (None, true) => Ok(FollowFrom::Start),
        (None, false) => Ok(FollowFrom::End),
    }
}

/// Default byte cap of a wait: agents.md's 128 KiB, a few screens of logs.
const DEFAULT_WAIT_BYTES: u64 = 128 << 10;

/// Compiled size limit of a needle: generous for any real pattern, small
/// enough that a hostile one cannot take the daemon's memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Longest settle window accepted: ten minutes is already a timeout.
const MAX_SETTLE_MS: u32 = 600_000;

fn matcher(field: &str, pattern: &str, regex: bool) -> Result<Matcher, InvalidRequest> {
    if pattern.contains('\0') {
        return Err(invalid(field, "contains a NUL byte"));
    }
    if regex {
        // Multi-line: `^` and `$` match at line boundaries, in output and on
        // the screen alike.
        regex::RegexBuilder::new(pattern)
            .multi_line(true)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map(Matcher::Regex)
            .map_err(|e| invalid(field, format!("is not a valid regular expression: {e}")))
    } else {
        Ok(Matcher::Literal(pattern.to_owned()))
    }
}

/// Validates a wait. Timeouts above `ceiling` are clamped, not refused.
pub(crate) fn wait_spec(
    streams: &[i32],
    from: Option<&pb::Cursor>,
    until: Option<&pb::WaitCondition>,
    ceiling: std::time::Duration,
) -> Result<WaitSpec, InvalidRequest> {
    let default = pb::WaitCondition::default();
    let c = until.unwrap_or(&default);
    let needle =
        (!c.needle.is_empty()).then(|| matcher("until.needle", &c.needle, c.regex)).transpose()?;
    if c.on_screen && needle.is_none() {
        return Err(invalid("until.on_screen", "needs a needle to look for on the screen"));
    }
    let stop = c
        .stop
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.is_empty())
        .map(|(i, p)| matcher(&format!("until.stop[{i}]"), p, c.regex))
        .collect::<Result<Vec<_>, _>>()?;
    if c.settle_ms > MAX_SETTLE_MS {
        return Err(invalid(
            "until.settle_ms",
            format!(
                "{} is more than {MAX_SETTLE_MS} ms; use timeout_ms for long waits",
                c.settle_ms
            ),
        ));
    }
    let mut settle = (c.settle_ms > 0).then(|| Duration::from_millis(u64::from(c.settle_ms)));
    if c.screen_stable && settle.is_none() {
        settle = Some(crate::waits::DEFAULT_SETTLE);
    }
    // With no condition of its own, a wait ends when the program waits for
    // input (or exits): never early because a busy program is quiet.
    let needle_or_settle = needle.as_ref().map(|_| ()).or(settle.map(|_| ()));
    let max_bytes = match c.max_bytes {
        0 => DEFAULT_WAIT_BYTES,
        n if n > MAX_READ_BYTES => {
            return Err(invalid("until.max_bytes", format!("{n} is more than {MAX_READ_BYTES}")));
        }
        n => n,
    };
    let requested = if c.timeout_ms == 0 {
        crate::waits::DEFAULT_TIMEOUT
    } else {
        Duration::from_millis(c.timeout_ms)
    };
    let clamped = requested > ceiling;
    Ok(WaitSpec {
        streams: self::streams(streams)?,
        from: from.map(cursor_offsets).transpose()?,
        needle,
        on_screen: c.on_screen,
        stop,
        settle,
        screen_stable: c.screen_stable,
        max_bytes,
        timeout: requested.min(ceiling),
        clamped,
        snapshot: c.snapshot,
        input: c.input.unwrap_or(needle_or_settle.is_none()),
        raw_output: c.raw_output,
        consume: false,
    })
}

/// A wait outcome on the wire.
pub(crate) fn wait_pb(o: WaitOutcome) -> pb::WaitResponse {
    let (status, exit_code, exit_signal, _) = status_pb(o.status);
    let reason = match o.reason {
        WaitReason::Matched => pb::WaitReason::Matched,
        WaitReason::Stopped => pb::WaitReason::Stopped,
        WaitReason::Settled => pb::WaitReason::Settled,
        WaitReason::ScreenStable => pb::WaitReason::ScreenStable,
        WaitReason::Prompt => pb::WaitReason::Prompt,
        WaitReason::InputRequested => pb::WaitReason::InputRequested,
        WaitReason::AwaitingSecret => pb::WaitReason::AwaitingSecret,
        WaitReason::Exited => pb::WaitReason::Exited,
        WaitReason::Timeout => pb::WaitReason::Timeout,
    };
    let (matched, match_stream, match_offset) = match o.matched {
        Some((m, s, off)) => (m, stream_pb(s), off),
        None => (String::new(), pb::Stream::Unspecified, 0),
    };
    pb::WaitResponse {
        reason: reason.into(),
        matched,
        match_offset,
        match_stream: match_stream.into(),
        output: o.output,
        bytes: o.bytes,
        truncated: o.truncated,
        began: Some(cursor_pb(&o.streams, o.began)),
        next: Some(cursor_pb(&o.streams, o.next)),
        effective_timeout_ms: u64::try_from(o.timeout.as_millis()).unwrap_or(u64::MAX),
        elapsed_ms: u64::try_from(o.elapsed.as_millis()).unwrap_or(u64::MAX),
        status: status.into(),
        exit_code,
        exit_signal,
        alternate_screen: o.alternate,
        command_exit_code: o.command_exit,
        screen: o.screen,
        matched_at_entry: o.matched_at_entry,
        timeout_clamped: o.clamped,
        awaiting_secret: o.awaiting_secret,
        prompt: o.prompt,
        input_state: o
            .input
            .map_or(pb::InputState::Unspecified, |r| input_state_pb(r.state))
            .into(),
        input_source: o
            .input
            .map_or(pb::InputSource::Unspecified, |r| input_source_pb(r.source))
            .into(),
        output_is_screen: o.output_is_screen,
        full_screen: o.full_screen,
    }
}

/// An input state on the wire.
pub(crate) fn input_state_pb(s: InputState) -> pb::InputState {
    match s {
        InputState::Running => pb::InputState::Running,
        InputState::AwaitingInput => pb::InputState::AwaitingInput,
        InputState::AwaitingSecret => pb::InputState::AwaitingSecret,
        InputState::Idle => pb::InputState::Idle,
        InputState::Exited => pb::InputState::Exited,
    }
}

/// An input state's source on the wire.
pub(crate) fn input_source_pb(s: InputSource) -> pb::InputSource {
    match s {
        InputSource::Kernel => pb::InputSource::Kernel,
        InputSource::Heuristic => pb::InputSource::Heuristic,
        InputSource::KernelPrompt => pb::InputSource::KernelPrompt,
    }
}

/// Key-send items.
pub(crate) fn key_items(keys: &[pb::KeyInput]) -> Result<Vec<KeyItem>, InvalidRequest> {
    if keys.is_empty() {
        return Err(invalid("keys", "is empty: give text or key names to send"));
    }
    keys.iter()
        .enumerate()
        .map(|(i, k)| match &k.input {
            Some(pb::key_input::Input::Text(t)) => Ok(KeyItem::Text(t.clone())),
            Some(pb::key_input::Input::Key(name)) => Ok(KeyItem::Key(name.clone())),
            None => Err(invalid(format!("keys[{i}]"), "is empty: set text or key")),
        })
        .collect()
}

/// Whether a follow renders text (unspecified = raw, unlike reads).
pub(crate) fn follow_text(req: &pb::FollowRequest) -> Result<bool, InvalidRequest> {
    match pb::Encoding::try_from(req.encoding) {
        Ok(pb::Encoding::Text) => Ok(true),
        Ok(pb::Encoding::Raw | pb::Encoding::Unspecified) => Ok(false),
        Err(_) => Err(invalid("encoding", format!("{} is not an encoding", req.encoding))),
    }
}

/// Domain status → wire status, exit code and signal.
pub(crate) fn status_pb(s: ProcStatus) -> (pb::Status, Option<i32>, Option<i32>, Option<i64>) {
    use crate::proc::EndReason;
    match s {
        ProcStatus::Running => (pb::Status::Running, None, None, None),
        ProcStatus::Lost => (pb::Status::Lost, None, None, None),
        ProcStatus::Ended { reason, exit, at_ns } => {
            let st = match reason {
                EndReason::Exited => pb::Status::Exited,
                EndReason::Killed => pb::Status::Killed,
                EndReason::TimedOut => pb::Status::TimedOut,
                EndReason::Stopped => pb::Status::Stopped,
                EndReason::HolderLost => pb::Status::HolderLost,
            };
            (st, exit.code, exit.signal, Some(at_ns))
        }
    }
}

fn size_pb(s: TermSize) -> pb::TermSize {
    pb::TermSize { rows: u32::from(s.rows), cols: u32::from(s.cols) }
}

/// A process's metadata on the wire, with the input state the actor last
/// published (`fresh` overrides it with one just asked for).
pub(crate) fn process_pb(h: &ProcHandle, fresh: Option<InputReport>) -> pb::Process {
    use std::sync::atomic::Ordering;
    let f = &h.facts;
    let published = h.published();
    let (status, exit_code, exit_signal, ended_at_ns) = status_pb(published.status);
    let (mode, size) = match f.spec.stdio {
        Stdio::Pty(_) => (pb::Mode::Pty, published.size.map(size_pb)),
        Stdio::Pipes => (pb::Mode::Pipes, None),
    };
    let input = match (published.status, fresh) {
        (_, Some(r)) => Some(r),
        (ProcStatus::Running, None) => h.shared.input(),
        // An ended process's state is a fact, whoever asks.
        (ProcStatus::Ended { .. }, None) => {
            Some(InputReport { state: InputState::Exited, source: InputSource::Kernel })
        }
        (ProcStatus::Lost, None) => None,
    };
    let streams = StreamId::ALL
        .iter()
        .filter(|s| !(matches!(f.spec.stdio, Stdio::Pty(_)) && **s == StreamId::Stderr))
        .map(|s| pb::StreamStats {
            stream: stream_pb(*s).into(),
            end_offset: h.shared.end[s.index()].load(Ordering::Acquire),
            start_offset: h.shared.start[s.index()].load(Ordering::Acquire),
            chunks: h.shared.chunks[s.index()].load(Ordering::Acquire),
            lost_bytes: 0,
        })
        .collect();
    pb::Process {
        id: f.id.0,
        name: f.spec.name.clone().unwrap_or_default(),
        command: f.spec.command.clone(),
        args: f.spec.args.clone(),
        cwd: f.spec.cwd.to_string_lossy().into_owned(),
        env: f.spec.env.clone().into_iter().collect(),
        mode: mode.into(),
        size,
        status: status.into(),
        pid: f.pid,
        exit_code,
        exit_signal,
        started_at_ns: f.started_at_ns,
        ended_at_ns,
        timeout_ms: f
            .spec
            .idle_timeout
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        idle_ms: h.shared.idle_ms(),
        streams,
        stdin_closed: h.shared.stdin_closed.load(Ordering::Acquire),
        awaiting_secret: h.shared.awaiting_secret.load(Ordering::Acquire),
        input_state: input.map_or(pb::InputState::Unspecified, |r| input_state_pb(r.state)).into(),
        input_source: input
            .map_or(pb::InputSource::Unspecified, |r| input_source_pb(r.source))
            .into(),
        output_quiet_ms: h.shared.output_quiet_ms(),
        restart: f.spec.restart.map(|r| pb::RestartPolicy {
            on_failure: true,
            max_restarts: r.max_restarts,
            backoff_ms: r.backoff_ms,
        }),
        restarts: f.run.restarts,
        restart_of: f.run.restart_of.unwrap_or(0),
        replaced_by: h.shared.replaced_by.load(Ordering::Acquire),
        restart_in_ms: match h.shared.restart_due_ns.load(Ordering::Acquire) {
            0 => 0,
            due => {
                u64::try_from((due - crate::sys::monotonic_ns()) / 1_000_000).unwrap_or(0).max(1)
            }
        },
    }
}

/// A record on the wire.
pub(crate) fn record_pb(r: OutRecord) -> pb::Record {
    pb::Record {
        stream: stream_pb(r.stream).into(),
        offset: r.offset,
        length: r.length,
        ts_ns: r.ts_ns,
        data: r.data,
        origin: r.origin.as_deref().unwrap_or_default().to_owned(),
    }
}

/// A read result on the wire.
pub(crate) fn read_pb(r: ReadResult) -> pb::ReadResponse {
    let streams = &r.streams;
    pb::ReadResponse {
        next: Some(cursor_pb(streams, r.next)),
        end: Some(cursor_pb(streams, r.end)),
        history_start: Some(cursor_pb(streams, r.history_start)),
        omitted_bytes: r.omitted,
        omitted_from: Some(cursor_pb(streams, r.omitted_from)),
        history_trimmed: r.trimmed,
        status: status_pb(r.status).0.into(),
        records: r.records.into_iter().map(record_pb).collect(),
        lost: r
            .lost
            .into_iter()
            .map(|(s, offset, length)| pb::Lost { stream: stream_pb(s).into(), offset, length })
            .collect(),
    }
}

/// A screen snapshot on the wire.
pub(crate) fn snapshot_pb(h: &ProcHandle, s: Snapshot) -> pb::ScreenSnapshot {
    pb::ScreenSnapshot {
        id: h.id().0,
        status: status_pb(h.status()).0.into(),
        size: Some(size_pb(s.size)),
        lines: s.lines,
        cursor_row: u32::from(s.cursor.0),
        cursor_col: u32::from(s.cursor.1),
        alternate_screen: s.alternate,
        title: s.title,
        bracketed_paste: s.bracketed_paste,
        application_cursor: s.application_cursor,
        cursor_hidden: s.cursor_hidden,
        skipped_bytes: s.skipped_bytes,
        offset: s.offset,
        full_screen: s.full_screen,
    }
}

/// A registry entry on the wire: what was recorded, else the built-in
/// profile, else unknown.
pub(crate) fn program_pb(program: String, row: Option<ProgramRow>) -> pb::Program {
    match row {
        Some(r) => pb::Program {
            program: r.program,
            known: true,
            needs_pty: r.needs_pty,
            notes: r.notes,
            confirmed_count: r.confirmed_count,
            last_confirmed_at_ns: r.last_confirmed_at_ns,
            builtin: false,
        },
        None => match crate::profiles::profile(&program) {
            Some(p) => pb::Program {
                program,
                known: true,
                needs_pty: p.needs_pty,
                notes: p.notes.to_owned(),
                builtin: true,
                ..Default::default()
            },
            None => pb::Program { program, ..Default::default() },
        },
    }
}

/// Canonical program name for the registry: `\` → `/`, basename, trailing
/// `.exe` removed (any case), lowercase. `C:\bin\ssh.EXE`, `/usr/bin/SSH.exe`
/// and `SSH` all become `ssh`.
pub(crate) fn canonical_program(field: &str, raw: &str) -> Result<String, InvalidRequest> {
    let slashed = raw.trim().replace('\\', "/");
    let base = slashed.rsplit('/').next().unwrap_or("");
    let lower = base.to_lowercase();
    let name = lower.strip_suffix(".exe").unwrap_or(&lower).to_owned();
    if name.is_empty() {
        return Err(invalid(field, format!("{raw:?} names no program")));
    }
    no_nul(field, &name)?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(command: &str) -> pb::StartRequest {
        pb::StartRequest { command: command.into(), ..Default::default() }
    }

    #[test]
    fn start_validation_names_the_field() {
        let err = |req: pb::StartRequest| start_spec(req).unwrap_err().field;
        assert_eq!(err(start("")), "command");
        assert_eq!(err(start("a\0b")), "command");
        assert_eq!(
            err(pb::StartRequest { args: vec!["ok".into(), "x\0".into()], ..start("sh") }),
            "args[1]"
        );
        assert_eq!(err(pb::StartRequest { cwd: "rel/dir".into(), ..start("sh") }), "cwd");
        assert_eq!(err(pb::StartRequest { cwd: "/no/such/dir".into(), ..start("sh") }), "cwd");
        assert_eq!(err(pb::StartRequest { name: "123".into(), ..start("sh") }), "name");
        assert_eq!(err(pb::StartRequest { name: "box:x".into(), ..start("sh") }), "name");
        assert_eq!(err(pb::StartRequest { timeout_ms: u64::MAX, ..start("sh") }), "timeout_ms");
        assert_eq!(err(pb::StartRequest { mode: 9, ..start("sh") }), "mode");
        let big = pb::TermSize { rows: 5000, cols: 80 };
        assert_eq!(
            err(pb::StartRequest { mode: pb::Mode::Pty.into(), size: Some(big), ..start("sh") }),
            "size.rows"
        );
        let env = [("A=B".to_owned(), "x".to_owned())].into_iter().collect();
        assert!(err(pb::StartRequest { env, ..start("sh") }).starts_with("env key"));
    }

    #[test]
    fn pty_defaults_to_24x80() {
        let spec =
            start_spec(pb::StartRequest { mode: pb::Mode::Pty.into(), ..start("sh") }).unwrap();
        assert_eq!(spec.stdio, Stdio::Pty(TermSize { rows: 24, cols: 80 }));
    }

    #[test]
    fn program_names_are_canonical() {
        for raw in ["C:\\bin\\ssh.EXE", "/usr/bin/SSH.exe", "SSH", "ssh"] {
            assert_eq!(canonical_program("program", raw).unwrap(), "ssh");
        }
        assert_eq!(canonical_program("program", "GDB.EXE").unwrap(), "gdb");
        assert!(canonical_program("program", "/usr/bin/").is_err());
    }

    #[test]
    fn read_requests_are_checked() {
        let req = pb::ReadRequest { max_bytes: MAX_READ_BYTES + 1, ..Default::default() };
        assert_eq!(read_spec(&req).unwrap_err().field, "max_bytes");
        let req = pb::ReadRequest { streams: vec![42], ..Default::default() };
        assert_eq!(read_spec(&req).unwrap_err().field, "streams");
        let spec = read_spec(&pb::ReadRequest::default()).unwrap();
        assert_eq!(spec.streams, vec![StreamId::Stdout, StreamId::Stderr]);
        assert_eq!(spec.max_bytes, DEFAULT_READ_BYTES);
    }
}
