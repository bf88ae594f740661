//! What goes wrong in the store: one typed error for the writer, the reads
//! and opening the database.

use std::path::PathBuf;

/// What went wrong in the store.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    /// SQLite failed.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The database could not be opened.
    #[error("cannot open database {}: {reason}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// Why, for a person: SQLite's error, or what to do about a full disk.
        reason: String,
    },
    /// A schema migration failed.
    #[error("migrating the database to schema version {version} failed: {source}")]
    Migrate {
        /// Target version.
        version: usize,
        #[source]
        source: rusqlite::Error,
    },
    /// The writer thread is gone (shutting down).
    #[error("the store is closed")]
    Closed,
    /// Stored data is not what this version wrote.
    #[error("corrupt record: {0}")]
    Corrupt(String),
}
