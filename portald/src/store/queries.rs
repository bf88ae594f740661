//! Queries on the log: processes, the program registry, agent transitions
//! and ranges of output. Plain functions on a connection, run on the read
//! pool or the writer.

use rusqlite::{Connection, OptionalExtension, params};

use super::error::StoreError;
use super::msg::ProgramRow;
use super::schema::to_i64;
use crate::domain::{AgentState, ProcId, Resize, RowStatus, Source, StreamId, Transition};
use bytes::Bytes;

/// Looks a program up.
pub(crate) fn load_program(
    conn: &Connection,
    program: &str,
) -> Result<Option<ProgramRow>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT needs_pty, notes, confirmed_count, last_confirmed_at_ns FROM programs WHERE program = ?1",
            params![program],
            |r| {
                Ok(ProgramRow {
                    program: program.to_owned(),
                    needs_pty: r.get(0)?,
                    notes: r.get(1)?,
                    confirmed_count: r.get(2)?,
                    last_confirmed_at_ns: r.get(3)?,
                })
            },
        )
        .optional()?)
}

/// A process row from an earlier daemon, with its stream counters.
#[derive(Clone, Debug)]
pub(crate) struct StoredProc {
    pub(crate) id: ProcId,
    /// Its name, if it had one.
    pub(crate) name: Option<String>,
    /// The program as the caller named it.
    pub(crate) command: String,
    pub(crate) args: Vec<String>,
    /// Working directory.
    pub(crate) cwd: String,
    /// Environment overrides.
    pub(crate) env: std::collections::BTreeMap<String, String>,
    /// PTY size, for PTY processes.
    pub(crate) size: Option<(u16, u16)>,
    /// Idle timeout.
    pub(crate) timeout_ms: u64,
    /// OS pid it had.
    pub(crate) pid: u32,
    /// Stored status (`lost` for a name this daemon does not know).
    pub(crate) status: RowStatus,
    /// Exit code.
    pub(crate) exit_code: Option<i32>,
    /// Exit signal.
    pub(crate) exit_signal: Option<i32>,
    /// Start, ns.
    pub(crate) started_at_ns: i64,
    /// End, ns.
    pub(crate) ended_at_ns: Option<i64>,
    /// Per stream: history start.
    pub(crate) starts: [u64; 3],
    /// Per stream: end offset.
    pub(crate) ends: [u64; 3],
    /// Per stream: chunks retained.
    pub(crate) chunks: [u64; 3],
    /// Restart policy and run, as JSON.
    pub(crate) supervision: Option<String>,
    /// The process that took its name over.
    pub(crate) replaced_by: Option<ProcId>,
}

/// Every process row, oldest first, with stream counters from the log.
pub(crate) fn load_procs(conn: &Connection) -> Result<Vec<StoredProc>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT id, name, command, args, cwd, env, mode, rows, cols, timeout_ms, pid, status, exit_code, exit_signal,
                started_at_ns, ended_at_ns, start_stdin, start_stdout, start_stderr, supervision, replaced_by
         FROM processes ORDER BY id",
    )?;
    let mut procs = Vec::new();
    let mut rows = stmt.query([])?;
    let u = |v: i64| u64::try_from(v).unwrap_or(0);
    while let Some(r) = rows.next()? {
        let mode: String = r.get(6)?;
        let rows_: Option<i64> = r.get(7)?;
        let cols: Option<i64> = r.get(8)?;
        let size = (mode == "pty").then(|| {
            let d =
                |v: Option<i64>, default| v.and_then(|v| u16::try_from(v).ok()).unwrap_or(default);
            (d(rows_, crate::config::DEFAULT_ROWS), d(cols, crate::config::DEFAULT_COLS))
        });
        procs.push(StoredProc {
            id: ProcId(u(r.get(0)?)),
            name: r.get(1)?,
            command: r.get(2)?,
            args: serde_json::from_str(&r.get::<_, String>(3)?).unwrap_or_default(),
            cwd: r.get(4)?,
            env: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or_default(),
            size,
            timeout_ms: u(r.get(9)?),
            pid: u32::try_from(r.get::<_, i64>(10)?).unwrap_or(0),
            status: RowStatus::parse(&r.get::<_, String>(11)?).unwrap_or(RowStatus::Lost),
            exit_code: r.get(12)?,
            exit_signal: r.get(13)?,
            started_at_ns: r.get(14)?,
            ended_at_ns: r.get(15)?,
            starts: [u(r.get(16)?), u(r.get(17)?), u(r.get(18)?)],
            supervision: r.get(19)?,
            replaced_by: r.get::<_, Option<i64>>(20)?.map(|v| ProcId(u(v))),
            ends: [0; 3],
            chunks: [0; 3],
        });
    }
    let mut counters = conn.prepare_cached(
        "SELECT stream, max(off + length(data)), count(*) FROM chunks WHERE proc_id = ?1 GROUP BY stream",
    )?;
    for p in &mut procs {
        let mut rows = counters.query(params![to_i64(p.id.0)])?;
        while let Some(r) = rows.next()? {
            if let Some(s) = StreamId::ALL.get(usize::try_from(r.get::<_, i64>(0)?).unwrap_or(9)) {
                p.ends[s.index()] = u(r.get::<_, Option<i64>>(1)?.unwrap_or(0));
                p.chunks[s.index()] = u(r.get(2)?);
            }
        }
        for i in 0..3 {
            p.ends[i] = p.ends[i].max(p.starts[i]);
        }
    }
    Ok(procs)
}

/// The highest agent transition sequence number recorded.
pub(crate) fn last_agent_seq(conn: &Connection) -> Result<u64, StoreError> {
    let v: i64 =
        conn.query_row("SELECT coalesce(max(seq), 0) FROM agent_events", [], |r| r.get(0))?;
    Ok(u64::try_from(v).unwrap_or(0))
}

/// What the log holds of each stream's retained history from `start`: the
/// bytes stored, and the end of the last stored chunk (0 when none).
pub(crate) fn stored_bytes(
    conn: &Connection,
    id: ProcId,
    spans: &[(StreamId, u64)],
) -> Result<Vec<(u64, u64)>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT coalesce(sum(length(data)), 0), coalesce(max(off + length(data)), 0)
         FROM chunks WHERE proc_id = ?1 AND stream = ?2 AND off >= ?3",
    )?;
    spans
        .iter()
        .map(|(stream, start)| {
            let (stored, end): (i64, i64) = stmt.query_row(
                params![to_i64(id.0), to_i64(stream.index() as u64), to_i64(*start)],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            Ok((u64::try_from(stored).unwrap_or(0), u64::try_from(end).unwrap_or(0)))
        })
        .collect()
}

/// A process's recorded resizes, oldest first.
pub(crate) fn resizes(conn: &Connection, id: ProcId) -> Result<Vec<Resize>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT at_ns, from_rows, from_cols, to_rows, to_cols FROM resizes WHERE proc_id = ?1 ORDER BY at_ns",
    )?;
    let rows = stmt.query_map(params![to_i64(id.0)], |r| {
        Ok(Resize {
            id,
            at_ns: r.get(0)?,
            from: crate::domain::TermSize { rows: r.get(1)?, cols: r.get(2)? },
            to: crate::domain::TermSize { rows: r.get(3)?, cols: r.get(4)? },
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Recorded transitions after `since`, oldest first, at most `limit`.
pub(crate) fn agent_events_after(
    conn: &Connection,
    since: u64,
    limit: usize,
) -> Result<Vec<Transition>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, proc_id, at_ns, before, after, source, name, reason FROM agent_events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
    )?;
    let rows = stmt.query_map(
        params![to_i64(since), i64::try_from(limit).unwrap_or(i64::MAX)],
        transition_row,
    )?;
    rows.map(|row| transition(row?)).collect()
}

/// The newest recorded transition of one process: what a daemon that
/// adopts it after a crash rebuilds its agent record from. The scan runs
/// backwards from the newest row, so a live process costs a few rows.
pub(crate) fn newest_agent_event(
    conn: &Connection,
    id: ProcId,
) -> Result<Option<Transition>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, proc_id, at_ns, before, after, source, name, reason FROM agent_events WHERE proc_id = ?1 ORDER BY seq DESC LIMIT 1",
    )?;
    let mut rows = stmt.query_map(params![to_i64(id.0)], transition_row)?;
    rows.next().map(|row| transition(row?)).transpose()
}

/// An `agent_events` row as it is stored.
type TransitionRow = (i64, i64, i64, String, String, String, Option<String>, Option<String>);

fn transition_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TransitionRow> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?))
}

fn transition(row: TransitionRow) -> Result<Transition, StoreError> {
    let (seq, id, at_ns, before, after, source, name, reason) = row;
    let state = |s: &str| {
        AgentState::parse(s).ok_or_else(|| StoreError::Corrupt(format!("agent state {s:?}")))
    };
    Ok(Transition {
        seq: u64::try_from(seq).unwrap_or(0),
        id: ProcId(u64::try_from(id).unwrap_or(0)),
        before: state(&before)?,
        after: state(&after)?,
        source: Source::parse(&source).unwrap_or(Source::Lifecycle),
        name,
        reason,
        at_ns,
    })
}

/// A piece of one stream read back from the log. Not a [`Chunk`]: a row read
/// back carries its insertion order (`seq`, which merges streams in the
/// order they were produced) and no process (a read is of one process).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    /// Row id: insertion order across streams.
    pub(crate) seq: i64,
    pub(crate) stream: StreamId,
    /// Offset of the first byte.
    pub(crate) offset: u64,
    /// Wall-clock ns of the chunk.
    pub(crate) ts_ns: i64,
    /// The bytes.
    pub(crate) data: Bytes,
    /// Who typed it (input only).
    pub(crate) origin: Option<std::sync::Arc<str>>,
}

impl Piece {
    /// Offset just past the last byte.
    pub(crate) fn end(&self) -> u64 {
        self.offset + self.data.len() as u64
    }
}

/// Which end a bounded read keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Keep {
    /// The oldest bytes.
    Head,
    /// The newest bytes.
    Tail,
}

/// Reads at most `max_bytes` of `[from, to)` of one stream, as pieces in
/// offset order, trimmed to the range and the budget.
pub(crate) fn read_range(
    conn: &Connection,
    proc: ProcId,
    stream: StreamId,
    from: u64,
    to: u64,
    max_bytes: u64,
    keep: Keep,
) -> Result<Vec<Piece>, StoreError> {
    if to <= from || max_bytes == 0 {
        return Ok(Vec::new());
    }
    let sql = match keep {
        Keep::Head => {
            "SELECT id, off, ts_ns, data, origin FROM chunks
             WHERE proc_id = ?1 AND stream = ?2 AND off < ?4
               AND off >= coalesce((SELECT max(off) FROM chunks WHERE proc_id = ?1 AND stream = ?2 AND off <= ?3), 0)
             ORDER BY off"
        }
        Keep::Tail => {
            "SELECT id, off, ts_ns, data, origin FROM chunks
             WHERE proc_id = ?1 AND stream = ?2 AND off < ?4
               AND off >= coalesce((SELECT max(off) FROM chunks WHERE proc_id = ?1 AND stream = ?2 AND off <= ?3), 0)
             ORDER BY off DESC"
        }
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let mut rows = stmt.query(params![to_i64(proc.0), stream as i64, to_i64(from), to_i64(to)])?;
    let mut out = Vec::new();
    let mut total = 0u64;
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let off =
            u64::try_from(row.get::<_, i64>(1)?).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let ts_ns: i64 = row.get(2)?;
        let blob = row.get_ref(3)?.as_blob().map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let end = off + blob.len() as u64;
        let lo = from.max(off);
        let hi = to.min(end);
        if hi <= lo {
            continue;
        }
        let (lo, hi) = match keep {
            Keep::Head => (lo, hi.min(lo + (max_bytes - total))),
            Keep::Tail => (lo.max(hi.saturating_sub(max_bytes - total)), hi),
        };
        let slice =
            &blob[usize::try_from(lo - off).unwrap_or(0)..usize::try_from(hi - off).unwrap_or(0)];
        total += hi - lo;
        let origin = row.get::<_, Option<String>>(4)?.map(std::sync::Arc::from);
        out.push(Piece {
            seq,
            stream,
            offset: lo,
            ts_ns,
            data: Bytes::copy_from_slice(slice),
            origin,
        });
        if total >= max_bytes {
            break;
        }
    }
    if keep == Keep::Tail {
        out.reverse();
    }
    Ok(out)
}

/// Where each process's history begins, per stream (every process row).
pub(crate) fn history_starts(
    conn: &Connection,
) -> Result<std::collections::HashMap<ProcId, [u64; 3]>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT id, start_stdin, start_stdout, start_stderr FROM processes")?;
    let rows = stmt.query_map([], |r| {
        let u = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok((ProcId(u(r.get(0)?)), [u(r.get(1)?), u(r.get(2)?), u(r.get(3)?)]))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Where one process's history begins, per stream; `None` when it is gone.
pub(crate) fn history_starts_of(
    conn: &Connection,
    id: ProcId,
) -> Result<Option<[u64; 3]>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT start_stdin, start_stdout, start_stderr FROM processes WHERE id = ?1",
    )?;
    let u = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(stmt
        .query_row(params![to_i64(id.0)], |r| Ok([u(r.get(0)?), u(r.get(1)?), u(r.get(2)?)]))
        .optional()?)
}

/// The log's random identity, made when the database was created.
pub(crate) fn log_id(conn: &Connection) -> Result<String, StoreError> {
    Ok(conn.query_row("SELECT value FROM meta WHERE key = 'log_id'", [], |r| r.get(0))?)
}

/// Offset of the first chunk of `stream` read at or after monotonic time
/// `since_mono_ns`, if any.
pub(crate) fn first_offset_since(
    conn: &Connection,
    proc: ProcId,
    stream: StreamId,
    since_mono_ns: i64,
) -> Result<Option<u64>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT off FROM chunks WHERE proc_id = ?1 AND stream = ?2 AND mono_ns >= ?3 ORDER BY mono_ns LIMIT 1",
    )?;
    let off: Option<i64> = stmt
        .query_row(params![to_i64(proc.0), stream as i64, since_mono_ns], |r| r.get(0))
        .optional()?;
    Ok(off.and_then(|o| u64::try_from(o).ok()))
}
