//! Deleting history in small steps, so that forgetting a big log never
//! stalls the writer.
//!
//! Cleanup, clear and retention make history invisible at once (the process
//! row goes, or its history start moves) and queue the rows here. The
//! writer deletes them [`GC_STEP_ROWS`] at a time, one short transaction
//! after each commit, and more while nothing else is queued. Deleting a
//! 200 MB log in one transaction would read every overflow page and hold
//! every append behind it for a second; in steps, appends interleave.
//!
//! Nothing is lost if the daemon stops first: at open, rows no process
//! owns and rows below a history start are found again (one index lookup
//! per process) and queued.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, params};

use super::error::StoreError;
use super::queries::StoredProc;
use super::schema::to_i64;
use crate::domain::{ProcId, StreamId};

/// Rows deleted per step: each may carry a 64 KiB overflow page that SQLite
/// reads to free, so a step costs a few milliseconds at most.
pub(crate) const GC_STEP_ROWS: i64 = 64;

/// Rows to delete: per process, per stream, everything below an offset.
#[derive(Debug, Default)]
pub(crate) struct Garbage(BTreeMap<ProcId, [u64; 3]>);

impl Garbage {
    /// Finds what an earlier daemon left to delete, given the processes
    /// stored (`procs`).
    pub(crate) fn find(conn: &Connection, procs: &[StoredProc]) -> Result<Self, StoreError> {
        let mut g = Self::default();
        let owners: std::collections::HashMap<ProcId, [u64; 3]> =
            procs.iter().map(|p| (p.id, p.starts)).collect();
        let mut next_owner =
            conn.prepare("SELECT proc_id FROM chunks WHERE proc_id > ?1 ORDER BY proc_id LIMIT 1")?;
        let mut below = conn.prepare(
            "SELECT 1 FROM chunks WHERE proc_id = ?1 AND stream = ?2 AND off < ?3 LIMIT 1",
        )?;
        let mut after = -1i64;
        while let Some(id) =
            next_owner.query_row(params![after], |r| r.get::<_, i64>(0)).optional()?
        {
            after = id;
            let proc = ProcId(u64::try_from(id).unwrap_or(0));
            match owners.get(&proc) {
                None => g.add(proc, [u64::MAX; 3]),
                Some(starts) => {
                    for s in StreamId::ALL {
                        let start = starts[s.index()];
                        let found = below
                            .query_row(params![id, s as i64, to_i64(start)], |_| Ok(()))
                            .optional()?;
                        if found.is_some() {
                            let mut cut = [0; 3];
                            cut[s.index()] = start;
                            g.add(proc, cut);
                        }
                    }
                }
            }
        }
        Ok(g)
    }

    /// Queues `id`'s rows below `below` (per stream).
    pub(crate) fn add(&mut self, id: ProcId, below: [u64; 3]) {
        let e = self.0.entry(id).or_insert([0; 3]);
        for (have, want) in e.iter_mut().zip(below) {
            *have = (*have).max(want);
        }
    }

    /// Nothing queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Deletes up to [`GC_STEP_ROWS`] rows in one transaction.
    pub(crate) fn step(&mut self, conn: &mut Connection) -> Result<(), StoreError> {
        let Some((&id, &below)) = self.0.first_key_value() else { return Ok(()) };
        let tx = conn.transaction()?;
        let mut left = GC_STEP_ROWS;
        let mut done = below;
        {
            let mut delete = tx.prepare_cached(
                "DELETE FROM chunks WHERE rowid IN
                   (SELECT rowid FROM chunks WHERE proc_id = ?1 AND stream = ?2 AND off < ?3 LIMIT ?4)",
            )?;
            for s in StreamId::ALL {
                let i = s.index();
                if below[i] == 0 || left == 0 {
                    continue;
                }
                let n = delete.execute(params![to_i64(id.0), s as i64, to_i64(below[i]), left])?;
                let n = i64::try_from(n).unwrap_or(i64::MAX);
                if n < left {
                    // This stream is clean.
                    done[i] = 0;
                }
                left -= n.min(left);
            }
        }
        tx.commit()?;
        if done == [0; 3] {
            self.0.remove(&id);
        } else {
            self.0.insert(id, done);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_delete_below_the_cut_and_load_finds_leftovers() {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&mut conn).unwrap();
        conn.execute(
            "INSERT INTO processes (id, command, args, cwd, env, mode, timeout_ms, status, started_at_ns, start_stdout)
             VALUES (1, 'sh', '[]', '/', '{}', 'pipes', 0, 'exited', 0, 100)",
            [],
        )
        .unwrap();
        for (proc, n) in [(1, 200), (2, 150)] {
            for i in 0..n {
                conn.execute(
                    "INSERT INTO chunks (proc_id, stream, off, ts_ns, mono_ns, data) VALUES (?1, 1, ?2, 0, 0, x'00')",
                    params![proc, i],
                )
                .unwrap();
            }
        }
        // Process 1 keeps offsets from 100; process 2 has no row at all.
        let mut g = Garbage::find(&conn, &super::super::load_procs(&conn).unwrap()).unwrap();
        assert_eq!(g.0.get(&ProcId(1)), Some(&[0, 100, 0]));
        assert_eq!(g.0.get(&ProcId(2)), Some(&[u64::MAX; 3]));
        let mut steps = 0;
        while !g.is_empty() {
            g.step(&mut conn).unwrap();
            steps += 1;
        }
        assert!(steps >= (100 + 150) / usize::try_from(GC_STEP_ROWS).unwrap());
        let left: Vec<(i64, i64)> = conn
            .prepare("SELECT proc_id, min(off) FROM chunks GROUP BY proc_id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(left, vec![(1, 100)]);
        assert!(
            Garbage::find(&conn, &super::super::load_procs(&conn).unwrap()).unwrap().is_empty()
        );
    }
}
