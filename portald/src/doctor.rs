//! `portald --doctor`: a way out of a damaged database.
//!
//! A database SQLite cannot open, or whose integrity check fails, stops
//! every start of the daemon. The doctor checks it; when it is damaged it
//! moves it (and its `-wal` and `-shm`) aside under a timestamped name,
//! creates a fresh database and copies into it what SQLite can still read
//! of the old one, table by table and row by row, skipping past rows it
//! cannot read. Processes that were running are marked `lost`, as a daemon
//! restart would. It refuses to run while a daemon holds the database.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};

use crate::config::Config;
use crate::store::schema;

/// Tables copied when salvaging, parents before children.
const TABLES: &[&str] = &["processes", "chunks", "programs", "agent_events"];

/// After a row that cannot be read, how many rowids the salvage skips ahead
/// at most, a step at a time, before giving up on the rest of the table.
const MAX_SKIPS: u32 = 1000;

/// Why the doctor could not do its work; what it did until then stands.
#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    /// A daemon holds the database.
    #[error("portald{} is running on the database in {}: stop it first (portal-cli daemon stop), then run the doctor", pid.map(|p| format!(" (pid {p})")).unwrap_or_default(), data_dir.display())]
    DaemonRunning {
        /// The daemon's pid, when known.
        pid: Option<u32>,
        /// Its data directory.
        data_dir: PathBuf,
    },
    /// The lock could not be taken for another reason.
    #[error("taking the lock of {}: {reason}", data_dir.display())]
    Lock {
        /// The data directory.
        data_dir: PathBuf,
        /// Why.
        reason: String,
    },
    /// The check itself could not run (locked, permissions, a full disk):
    /// that is not damage, and nothing was changed.
    #[error("cannot check {}: {reason}; nothing was changed", db.display())]
    Check {
        /// The database.
        db: PathBuf,
        /// What SQLite said.
        reason: String,
    },
    /// A file could not be moved aside.
    #[error("moving {} to {}: {source}", from.display(), to.display())]
    Move {
        /// The file.
        from: PathBuf,
        /// Its new name.
        to: PathBuf,
        /// The OS's reason.
        #[source]
        source: std::io::Error,
    },
    /// The fresh database could not be made.
    #[error("creating {}: {reason}", db.display())]
    Create {
        /// The database.
        db: PathBuf,
        /// What failed.
        reason: String,
    },
}

/// Checks the database and repairs it when damaged; returns what was done.
///
/// # Errors
/// When a daemon is running on it, or a file cannot be moved or created.
pub fn run(config: &Config) -> Result<String, DoctorError> {
    // Held to the end: a client auto-starting a daemon meanwhile would open
    // the database being repaired.
    let _lock = hold_lock(config)?;
    let db = config.database();
    if !db.exists() {
        return Ok(format!("no database at {}: nothing to check\n", db.display()));
    }
    let problem = match check(&db) {
        Ok(()) => {
            return Ok(format!("{} is healthy (integrity check ok)\n", db.display()));
        }
        Err(Check::Damaged(problem)) => problem,
        // Locked, no permission, a full disk: not damage. Moving a healthy
        // database aside would lose it.
        Err(Check::Failed(reason)) => return Err(DoctorError::Check { db, reason }),
    };
    let mut out = format!("{} is damaged: {problem}\n", db.display());
    let stamp = crate::sys::wall_ns() / 1_000_000_000;
    let broken = aside(&db, stamp)?;
    let _ = writeln!(out, "moved it aside to {}", broken.display());
    let create = |reason: String| DoctorError::Create { db: db.clone(), reason };
    let mut fresh = Connection::open(&db).map_err(|e| create(e.to_string()))?;
    crate::store::prepare_new(&fresh).map_err(|e| create(e.to_string()))?;
    schema::migrate(&mut fresh).map_err(|e| create(e.to_string()))?;
    let salvaged = salvage(&broken, &mut fresh);
    match salvaged {
        Ok(counts) if counts.iter().all(|(_, n, _)| *n == 0) => {
            out.push_str("nothing could be read back from it; the new database starts empty\n");
        }
        Ok(counts) => {
            for (table, rows, complete) in counts {
                let _ = writeln!(
                    out,
                    "salvaged {rows} rows of {table}{}",
                    if complete { "" } else { " (the rest could not be read)" }
                );
            }
            fresh
                .execute("UPDATE processes SET status = 'lost' WHERE status = 'running'", [])
                .map_err(|e| create(e.to_string()))?;
        }
        Err(e) => {
            let _ = writeln!(out, "nothing could be salvaged ({e}); the new database starts empty");
        }
    }
    let _ = writeln!(out, "a fresh database is at {}; portald can start again", db.display());
    Ok(out)
}

/// Takes the daemon's lock on the data directory (a daemon cannot start
/// while it is held); fails when a daemon holds it.
fn hold_lock(config: &Config) -> Result<Option<std::fs::File>, DoctorError> {
    if !config.data_dir.exists() {
        return Ok(None);
    }
    match crate::instance::take(&config.data_dir) {
        Ok(lock) => Ok(Some(lock)),
        Err(crate::instance::LockError::Held { holder, .. }) => {
            Err(DoctorError::DaemonRunning { pid: holder, data_dir: config.data_dir.clone() })
        }
        Err(e) => {
            Err(DoctorError::Lock { data_dir: config.data_dir.clone(), reason: e.to_string() })
        }
    }
}

/// Why a check did not pass.
enum Check {
    /// SQLite says the file is damaged or not a database.
    Damaged(String),
    /// The check itself could not run (locked, permissions, disk full).
    Failed(String),
}

/// Opens the database and runs SQLite's integrity check.
fn check(db: &Path) -> Result<(), Check> {
    let judge = |e: rusqlite::Error| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            Check::Damaged(e.to_string())
        }
        _ => Check::Failed(e.to_string()),
    };
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_WRITE).map_err(judge)?;
    let mut stmt = conn.prepare("PRAGMA integrity_check").map_err(judge)?;
    let rows: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .map_err(judge)?
        .collect::<Result<_, _>>()
        .map_err(judge)?;
    match rows.as_slice() {
        [ok] if ok == "ok" => Ok(()),
        [] => Err(Check::Damaged("the integrity check said nothing".into())),
        problems => {
            Err(Check::Damaged(problems.iter().take(3).cloned().collect::<Vec<_>>().join("; ")))
        }
    }
}

/// Renames the database and its companions to `<name>.broken-<stamp>`.
fn aside(db: &Path, stamp: i64) -> Result<PathBuf, DoctorError> {
    let with = |suffix: &str| {
        let mut s = db.as_os_str().to_owned();
        s.push(suffix);
        PathBuf::from(s)
    };
    let broken = with(&format!(".broken-{stamp}"));
    let rename = |from: &Path, to: &Path| {
        std::fs::rename(from, to).map_err(|source| DoctorError::Move {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            source,
        })
    };
    rename(db, &broken)?;
    for part in ["-wal", "-shm"] {
        let from = with(part);
        if from.exists() {
            let to = with(&format!(".broken-{stamp}{part}"));
            rename(&from, &to)?;
        }
    }
    Ok(broken)
}

/// Copies every readable row of [`TABLES`] from `broken` into `fresh`;
/// per table: rows copied and whether the whole table could be read.
fn salvage(broken: &Path, fresh: &mut Connection) -> rusqlite::Result<Vec<(String, u64, bool)>> {
    let old = Connection::open_with_flags(broken, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let tx = fresh.transaction()?;
    let mut counts = Vec::new();
    for table in TABLES {
        let Ok(columns) = columns(&old, table) else {
            counts.push(((*table).to_owned(), 0, false));
            continue;
        };
        let list = columns.join(", ");
        let marks = vec!["?"; columns.len()].join(", ");
        let insert = format!("INSERT OR IGNORE INTO {table} ({list}) VALUES ({marks})");
        let select =
            format!("SELECT rowid, {list} FROM {table} WHERE rowid >= ?1 ORDER BY rowid LIMIT 256");
        let (mut next, mut copied, mut skips, mut complete) = (i64::MIN, 0u64, 0u32, true);
        loop {
            let page: Result<Vec<(i64, Vec<Value>)>, rusqlite::Error> =
                old.prepare(&select).and_then(|mut s| {
                    s.query_map([next], |r| {
                        let id: i64 = r.get(0)?;
                        let values = (1..=columns.len())
                            .map(|i| r.get::<_, Value>(i))
                            .collect::<Result<_, _>>()?;
                        Ok((id, values))
                    })?
                    .collect()
                });
            match page {
                Ok(rows) if rows.is_empty() => break,
                Ok(rows) => {
                    for (id, values) in rows {
                        if tx.execute(&insert, rusqlite::params_from_iter(values)).is_ok() {
                            copied += 1;
                        }
                        next = id + 1;
                    }
                }
                Err(_) if skips < MAX_SKIPS && next != i64::MIN => {
                    complete = false;
                    skips += 1;
                    next += 1;
                }
                Err(_) => {
                    complete = false;
                    break;
                }
            }
        }
        counts.push(((*table).to_owned(), copied, complete));
    }
    tx.commit()?;
    Ok(counts)
}

/// The columns of `table` as the old database declares them.
fn columns(conn: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({table})"))?;
    let cols: Vec<String> = stmt.query_map([], |r| r.get(1))?.collect::<Result<_, _>>()?;
    if cols.is_empty() {
        return Err(rusqlite::Error::QueryReturnedNoRows);
    }
    Ok(cols)
}
