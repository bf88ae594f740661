//! Full-text search over everything the log holds: every process's output
//! and input, as rendered text.
//!
//! `text.rs`: lines, words and queries (one definition for indexing and
//! checking); `index.rs`: the index file and the thread that keeps it;
//! `query.rs`: running a search. Here: the handle the daemon holds.
//!
//! A search first passes the store's flush barrier and then waits (briefly)
//! for the indexer to reach that commit, so, like a read, it sees what was
//! printed before it was asked; when the indexer is behind (a burst of
//! output, a rebuild) it answers from what is indexed and says how much is
//! not.

mod index;
mod query;
mod text;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use index::{IndexThread, index_path};
pub(crate) use query::{Found, Order, Page, Search};
pub(crate) use text::{Query, QueryError};

use crate::store::{LogFeed, ReadPool, Store, StoreError};
use index::IndexState;

/// How long a search waits for the indexer to reach the newest output.
const CATCH_UP_WAIT: Duration = Duration::from_secs(2);

/// How long one search may check candidates before it returns what it has
/// (with where to resume): a search never holds a caller for long.
const SEARCH_BUDGET: Duration = Duration::from_secs(2);

/// The search index of a store.
#[derive(Debug)]
pub(crate) struct SearchIndex {
    state: Arc<IndexState>,
    feed: Arc<LogFeed>,
    pool: Arc<ReadPool>,
}

/// A search's answer and how current the index was.
#[derive(Debug)]
pub(crate) struct Answer {
    /// What was found.
    pub(crate) found: Found,
    /// Bytes of log not indexed yet (not searched).
    pub(crate) unindexed_bytes: u64,
    /// Why the index is not being kept, if it is not.
    pub(crate) index_error: Option<String>,
}

impl SearchIndex {
    /// Starts indexing `store`'s log (the index file is opened, or built,
    /// on the indexer's thread: the daemon does not wait for it).
    pub(crate) fn start(store: &Store) -> (Self, IndexThread) {
        let state = Arc::new(IndexState::default());
        let feed = store.feed();
        let db: PathBuf = store.path().to_path_buf();
        let thread = index::start(db.clone(), Arc::clone(&feed), Arc::clone(&state));
        let pool = Arc::new(ReadPool::new(index_path(&db)));
        (Self { state, feed, pool }, thread)
    }

    /// Runs a search over everything stored before it was asked.
    pub(crate) async fn search(&self, store: &Store, s: Search) -> Result<Answer, StoreError> {
        store.flush().await?;
        let generation = self.feed.generation();
        self.state.caught_up(generation, CATCH_UP_WAIT).await;
        if !self.state.opened() {
            // Still opening (or rebuilding the file): nothing to read yet.
            return Ok(Answer {
                found: Found::default(),
                // Nothing is indexed yet: the whole log is unsearched.
                unindexed_bytes: store.health().retained.max(self.state.pending()),
                index_error: self.state.error(),
            });
        }
        let pool = Arc::clone(&self.pool);
        let deadline = Instant::now() + SEARCH_BUDGET;
        let found =
            store.read(move |log| pool.with(|index| query::run(index, log, &s, deadline))).await?;
        Ok(Answer { found, unindexed_bytes: self.state.pending(), index_error: self.state.error() })
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::config::Retention;
    use crate::domain::{Chunk, ProcId, StreamId};
    use crate::store::new_proc;

    /// More than one indexing step.
    const STEP_BYTES_FOR_TESTS: u64 = 4 << 20;

    async fn put(store: &Store, id: ProcId, stream: StreamId, offset: u64, ts: i64, data: &str) {
        let chunk = Chunk {
            proc: id,
            stream,
            offset,
            ts_ns: ts,
            mono_ns: ts,
            data: Bytes::from(data.to_owned()),
            origin: None,
        };
        store.append(chunk).await.unwrap();
    }

    fn search(q: &str) -> Search {
        Search {
            query: Query::parse(q, None).unwrap(),
            procs: vec![],
            streams: vec![],
            since_ns: None,
            until_ns: None,
            limit: 10,
            context: 0,
            order: Order::Oldest,
            page: None,
        }
    }

    fn lines(a: &Answer) -> Vec<(u64, u64, String)> {
        a.found.hits.iter().map(|h| (h.proc.0, h.offset, h.text.clone())).collect()
    }

    #[tokio::test]
    async fn finds_lines_by_words_in_the_right_process_and_forgets_cleared_output() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let (store, thread) = Store::open(&path, Retention::UNLIMITED).unwrap();
        let (index, index_thread) = SearchIndex::start(&store);
        let a = store.create_proc(new_proc()).await.unwrap();
        let b = store.create_proc(new_proc()).await.unwrap();
        put(&store, a, StreamId::Stdout, 0, 10, "starting\nlistening on :8080\n").await;
        put(&store, b, StreamId::Stdout, 0, 20, "compiling\nerror[E0308]: mismatched types\n")
            .await;
        put(&store, b, StreamId::Stderr, 0, 30, "warning: unused\nprompt> ").await;
        let got = index.search(&store, search("mismatched")).await.unwrap();
        assert_eq!(lines(&got), [(b.0, 10, "error[E0308]: mismatched types".to_owned())]);
        assert_eq!(got.found.hits[0].ts_ns, 20);
        // A waiting prompt (no line break yet) is found, and found once when
        // its line grows.
        assert_eq!(lines(&index.search(&store, search("prompt")).await.unwrap()).len(), 1);
        put(&store, b, StreamId::Stderr, 24, 40, "typed more\n").await;
        let got = index.search(&store, search("prompt typed")).await.unwrap();
        assert_eq!(lines(&got), [(b.0, 16, "prompt> typed more".to_owned())]);
        // Filters: process, stream, time; a phrase, a prefix.
        let mut s = search("listening");
        s.procs = vec![b];
        assert!(index.search(&store, s).await.unwrap().found.hits.is_empty());
        let mut s = search("warn*");
        s.streams = vec![StreamId::Stdout];
        assert!(index.search(&store, s).await.unwrap().found.hits.is_empty());
        let mut s = search("\"mismatched types\"");
        s.since_ns = Some(25);
        assert!(index.search(&store, s).await.unwrap().found.hits.is_empty());
        // Cleared output is never found again.
        store.clear(b, [0, 100, 0]).await.unwrap();
        assert!(index.search(&store, search("mismatched")).await.unwrap().found.hits.is_empty());
        // And the index dropped it (the search above waited for the indexer).
        let left: i64 = rusqlite::Connection::open(index_path(&path))
            .unwrap()
            .query_row(
                "SELECT count(*) FROM segments WHERE proc_id = ?1 AND stream = 1",
                [i64::try_from(b.0).unwrap()],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(left, 0, "the index forgot the cleared output");
        assert_eq!(lines(&index.search(&store, search("listening")).await.unwrap()).len(), 1);
        drop(index);
        drop(store);
        thread.join();
        index_thread.join();
    }

    #[tokio::test]
    async fn pages_newest_first_and_an_index_rebuilt_from_the_log_finds_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let mut first = Vec::new();
        for round in 0..2 {
            let (store, thread) = Store::open(&path, Retention::UNLIMITED).unwrap();
            let (index, index_thread) = SearchIndex::start(&store);
            if round == 0 {
                let a = store.create_proc(new_proc()).await.unwrap();
                let text: String = (0..3000).map(|i| format!("line {i} tick\n")).collect();
                put(&store, a, StreamId::Stdout, 0, 5, &text).await;
            }
            let mut s = search("tick");
            s.order = Order::Newest;
            s.limit = 1000;
            let mut pages = Vec::new();
            loop {
                let got = index.search(&store, s.clone()).await.unwrap();
                pages.extend(got.found.hits.iter().map(|h| h.text.clone()));
                match got.found.next {
                    Some(p) => s.page = Some(p),
                    None => break,
                }
            }
            assert_eq!(pages.len(), 3000, "every line once, across pages");
            assert_eq!(pages[0], "line 2999 tick");
            assert_eq!(pages[2999], "line 0 tick");
            if round == 0 {
                first = pages;
            } else {
                assert_eq!(pages, first);
            }
            drop(index);
            drop(store);
            thread.join();
            index_thread.join();
            // The second round starts without an index: it is rebuilt.
            std::fs::remove_file(index_path(&path)).unwrap();
        }
    }

    #[tokio::test]
    async fn lost_output_after_an_unfinished_line_ends_it_and_indexing_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let (store, thread) = Store::open(&dir.path().join("t.db"), Retention::UNLIMITED).unwrap();
        let (index, index_thread) = SearchIndex::start(&store);
        let a = store.create_proc(new_proc()).await.unwrap();
        put(&store, a, StreamId::Stdout, 0, 1, "Downloading... ").await;
        assert_eq!(lines(&index.search(&store, search("downloading")).await.unwrap()).len(), 1);
        // More than a step's worth of output was never stored (a full
        // disk), then output resumes: the indexer must not stall on it.
        let resumed = 15 + 3 * STEP_BYTES_FOR_TESTS;
        put(&store, a, StreamId::Stdout, resumed, 2, "काम किया गया\ndone\n").await;
        let got = index.search(&store, search("done")).await.unwrap();
        assert_eq!(got.unindexed_bytes, 0, "the indexer caught up");
        assert_eq!(lines(&got), [(a.0, resumed + 33, "done".to_owned())]);
        assert_eq!(lines(&index.search(&store, search("downloading")).await.unwrap()).len(), 1);
        // Words as the tokenizer splits them, checked by SQLite itself.
        assert_eq!(lines(&index.search(&store, search("किया")).await.unwrap()).len(), 1);
        drop(index);
        drop(store);
        thread.join();
        index_thread.join();
    }
}
