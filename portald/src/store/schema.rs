//! The database schema and its migrations, keyed on `PRAGMA user_version`.
//!
//! Tables:
//! - `processes`: one row per managed process (id never reused thanks to
//!   `AUTOINCREMENT`), its spec, status, exit and where history begins.
//! - `chunks`: the I/O log. One row per chunk read from (or written to) a
//!   program: process, stream, byte offset within the stream, wall-clock and
//!   monotonic timestamps, raw bytes. Indexed by offset and by monotonic time
//!   so every read is a range scan, never a full scan.
//! - `programs`: the "does it need a PTY" registry.
//! - `agent_events`: agent state transitions, by global sequence number.
//! - `resizes`: each terminal's resizes, for recordings.
//! - `meta`: the log's random identity (`log_id`).

use rusqlite::Connection;

use super::error::StoreError;

/// Each entry migrates from version `i` to `i + 1`.
/// The newest schema this binary knows (what a live upgrade compares).
pub(crate) const VERSION: usize = MIGRATIONS.len();

const MIGRATIONS: &[&str] = &[
    // 1: initial schema.
    r"
    CREATE TABLE processes (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        name          TEXT,
        command       TEXT NOT NULL,
        args          TEXT NOT NULL,              -- JSON array
        cwd           TEXT NOT NULL,
        env           TEXT NOT NULL,              -- JSON object of overrides
        mode          TEXT NOT NULL,              -- 'pty' | 'pipes'
        rows          INTEGER,
        cols          INTEGER,
        timeout_ms    INTEGER NOT NULL,
        pid           INTEGER NOT NULL DEFAULT 0,
        status        TEXT NOT NULL,
        exit_code     INTEGER,
        exit_signal   INTEGER,
        started_at_ns INTEGER NOT NULL,
        ended_at_ns   INTEGER,
        start_stdin   INTEGER NOT NULL DEFAULT 0, -- where retained history begins
        start_stdout  INTEGER NOT NULL DEFAULT 0,
        start_stderr  INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE chunks (
        id      INTEGER PRIMARY KEY,               -- insertion order across streams
        proc_id INTEGER NOT NULL,
        stream  INTEGER NOT NULL,                  -- 0 stdin, 1 stdout/pty, 2 stderr
        off     INTEGER NOT NULL,                  -- byte offset within the stream
        ts_ns   INTEGER NOT NULL,                  -- wall clock, display only
        mono_ns INTEGER NOT NULL,                  -- CLOCK_MONOTONIC, for windows
        data    BLOB NOT NULL
    );
    CREATE UNIQUE INDEX chunks_by_offset ON chunks (proc_id, stream, off);
    CREATE INDEX chunks_by_time ON chunks (proc_id, stream, mono_ns);
    CREATE TABLE programs (
        program              TEXT PRIMARY KEY,
        needs_pty            INTEGER NOT NULL,
        notes                TEXT NOT NULL DEFAULT '',
        confirmed_count      INTEGER NOT NULL,
        last_confirmed_at_ns INTEGER NOT NULL
    );
    ",
    // 2: agent state history.
    r"
    CREATE TABLE agent_events (
        seq     INTEGER PRIMARY KEY,
        proc_id INTEGER NOT NULL,
        at_ns   INTEGER NOT NULL,
        before  TEXT NOT NULL,
        after   TEXT NOT NULL,
        source  TEXT NOT NULL,
        name    TEXT,
        reason  TEXT
    );
    ",
    // 3: who typed each piece of input (NULL for output and older input).
    r"
    ALTER TABLE chunks ADD COLUMN origin TEXT;
    ",
    // 4: terminal resizes, for recordings.
    r"
    CREATE TABLE resizes (
        proc_id   INTEGER NOT NULL,
        at_ns     INTEGER NOT NULL,
        from_rows INTEGER NOT NULL,
        from_cols INTEGER NOT NULL,
        to_rows   INTEGER NOT NULL,
        to_cols   INTEGER NOT NULL
    );
    CREATE INDEX resizes_by_proc ON resizes (proc_id, at_ns);
    ",
    // 5: this log's identity, which derived files (the search index) check
    // so that they never describe another log.
    r"
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO meta (key, value) VALUES ('log_id', lower(hex(randomblob(16))));
    ",
    // 6: restarts: a process's policy and run (JSON), and the run that took
    // its name over.
    r"
    ALTER TABLE processes ADD COLUMN supervision TEXT;
    ALTER TABLE processes ADD COLUMN replaced_by INTEGER;
    ",
];

/// Sets the connection pragmas every connection needs.
pub(crate) fn configure(conn: &Connection) -> Result<(), StoreError> {
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Reads stream pages through once; a small cache per connection keeps
    // the pool's memory flat (the writer sets its own, larger one).
    conn.pragma_update(None, "cache_size", -READ_CACHE_KIB)?;
    Ok(())
}

/// Page cache of a read connection (SQLite's default is 2 MiB).
const READ_CACHE_KIB: i64 = 1024;

/// Switches to WAL and brings the schema up to date.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
        tracing::warn!(mode, "database is not in WAL mode; readers may wait for writers");
    }
    configure(conn)?;
    let current: usize = conn
        .pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))?
        .try_into()
        .unwrap_or(0);
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let version = i + 1;
        let tx = conn.transaction()?;
        tx.execute_batch(sql).map_err(|source| StoreError::Migrate { version, source })?;
        tx.pragma_update(None, "user_version", i64::try_from(version).unwrap_or(i64::MAX))?;
        tx.commit()?;
    }
    Ok(())
}

/// An unsigned count or offset as SQLite's INTEGER (an i64) stores it;
/// beyond `i64::MAX` (never reached in practice) it saturates.
pub(super) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_apply_and_are_idempotent() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        let v: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0)).unwrap();
        assert_eq!(v, i64::try_from(MIGRATIONS.len()).unwrap());
        let n: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table'", [], |r| r.get(0))
            .unwrap();
        assert!(n >= 3);
    }
}
