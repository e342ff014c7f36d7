//! Waking lessees for jobs another connection committed.
//!
//! Another process's commit (or a caller's own transaction, `within`)
//! cannot notify this process, so a thread with a connection of its own
//! looks every `Settings::watch_interval`: `PRAGMA data_version` changes
//! when any other connection committed (this process's writers included);
//! only then does it count the jobs with ids past what it saw last, and
//! waiting lessees are woken when there are more of them than this
//! process's own writers inserted (`OwnIds`, the id ranges they report at
//! each commit). Counting, rather than comparing the last id, matters: this
//! process's writer may commit a higher id right after another connection's
//! job, within one look. Idle, a look is one read of the shared-memory WAL
//! index, no transaction and no lock held between looks; busy, a count of
//! the few rows committed since the last one. The thread has no work of the
//! writer's to contend with: a writer's mutex is never taken here.

use crate::connection::map_err;
use relay_store::{StoreError, WatchGuard};
use rusqlite::Connection;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The ids this process's writers inserted and committed, as runs of
/// consecutive ids, until the watch has looked past them.
#[derive(Debug, Default)]
pub(crate) struct OwnIds {
    runs: Mutex<Vec<(i64, i64)>>,
}

impl OwnIds {
    /// Records a commit's inserted ids (in increasing order).
    pub(crate) fn committed(&self, ids: &[i64]) {
        if ids.is_empty() {
            return;
        }
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        for &id in ids {
            match runs.last_mut() {
                Some((_, hi)) if *hi + 1 == id => *hi = id,
                _ => runs.push((id, id)),
            }
        }
    }

    /// How many of the ids in (`after`, `upto`] are this process's, and
    /// forgets the runs at or below `upto`.
    fn take(&self, after: i64, upto: i64) -> i64 {
        let mut runs = self.runs.lock().unwrap_or_else(PoisonError::into_inner);
        let own = runs
            .iter()
            .map(|&(lo, hi)| (hi.min(upto) - lo.max(after + 1) + 1).max(0))
            .sum();
        runs.retain(|&(_, hi)| hi > upto);
        own
    }
}

/// Starts the watch; it stops (and closes its connection) when the guard
/// is dropped, within the guard's drop.
pub(crate) fn start(
    conn: Connection,
    every: Duration,
    own: Arc<OwnIds>,
    wake: Box<dyn Fn() + Send + Sync>,
) -> Result<WatchGuard, StoreError> {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let mut look = Look {
        conn,
        data_version: None,
        last_id: 0,
    };
    // The first look only learns where things stand.
    let _ = look.added(&own);
    let thread = std::thread::Builder::new()
        .name("relay-sqlite-watch".into())
        .spawn(move || loop {
            match stopped.recv_timeout(every) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                _ => return, // the guard was dropped
            }
            match look.added(&own) {
                Ok(true) => wake(),
                Ok(false) => {}
                Err(e) => {
                    // A wasted wake-up costs less than a job left waiting.
                    tracing::debug!(error = %e, "looking for other connections' jobs failed");
                    wake();
                }
            }
        })
        .map_err(|e| StoreError::Io {
            message: "cannot start the thread that watches the file for other processes' jobs".into(),
            source: Box::new(e),
        })?;
    Ok(WatchGuard::new(move || {
        drop(stop);
        let _ = thread.join();
    }))
}

struct Look {
    conn: Connection,
    data_version: Option<i64>,
    last_id: i64,
}

impl Look {
    /// True when another connection committed a job since the last look.
    fn added(&mut self, own: &OwnIds) -> Result<bool, StoreError> {
        let version: i64 = self
            .conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .map_err(map_err)?;
        let before = self.data_version.replace(version);
        if before == Some(version) {
            return Ok(false);
        }
        let last: i64 = self
            .conn
            .prepare_cached(&crate::sql::JOB_IDS)
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .map_err(map_err)?;
        let after = self.last_id;
        if before.is_none() || last <= after {
            // The first look only learns where things stand; no new id, no
            // new job.
            self.last_id = self.last_id.max(last);
            own.take(after, last);
            return Ok(false);
        }
        let new: i64 = self
            .conn
            .prepare_cached(&crate::sql::JOB_COUNT_AFTER)
            .and_then(|mut st| st.query_row([after, last], |r| r.get(0)))
            .map_err(map_err)?;
        self.last_id = last;
        Ok(new > own.take(after, last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SqliteBackend, Target};
    use relay_store::Backend;

    /// Another connection's job is news; this process's own (its writers
    /// report them) and a commit without a new job are not.
    #[test]
    fn only_other_connections_jobs_wake() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let backend = SqliteBackend::file(&path);
        drop(backend.open_writer().unwrap()); // creates the schema
        let settings = crate::Settings::default();
        let own = OwnIds::default();
        let mut look = Look {
            conn: crate::connection::open(&Target::File(path.clone()), &settings, false).unwrap(),
            data_version: None,
            last_id: 0,
        };
        assert!(!look.added(&own).unwrap(), "the first look only learns");
        assert!(!look.added(&own).unwrap(), "nothing changed");
        let other = Connection::open(&path).unwrap();
        let insert = |id: i64| {
            other
                .execute(
                    "INSERT INTO jobs (id, queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at, lease_token) VALUES (?1, 'q', 'k', x'', 1, 'READY', 0, 1, 0, 0, 0)",
                    [id],
                )
                .unwrap()
        };
        insert(1);
        assert!(look.added(&own).unwrap(), "another connection's job");
        assert!(!look.added(&own).unwrap(), "told once");
        other.execute("UPDATE jobs SET priority = 2 WHERE id = 1", []).unwrap();
        assert!(!look.added(&own).unwrap(), "a commit without a new job");
        own.committed(&[2]); // this process's writer committed job 2
        insert(2);
        assert!(!look.added(&own).unwrap(), "this process's own job");
        insert(3);
        assert!(look.added(&own).unwrap());
        // Another connection's job, then this process's with a higher id,
        // both before the next look: still news.
        insert(4);
        own.committed(&[5]);
        insert(5);
        assert!(
            look.added(&own).unwrap(),
            "another's job under this process's higher id"
        );
        // This process reserved ids it did not use (a deduplicated submit):
        // its next job is still its own.
        own.committed(&[7]);
        insert(7);
        assert!(!look.added(&own).unwrap());
    }
}
