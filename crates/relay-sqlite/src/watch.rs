//! Waking lessees for jobs another connection committed.
//!
//! Another process's commit (or a caller's own transaction, `within`)
//! cannot notify this process, so a thread with a connection of its own
//! looks every `Settings::watch_interval`: `PRAGMA data_version` changes
//! when any other connection committed (this process's writers included);
//! only then is the last job id read, and waiting lessees are woken when it
//! grew past both what the watch saw last and what this process's own
//! writers committed (`own_last_id`, raised at each of their commits). Idle,
//! that is one read of the shared-memory WAL index per interval, no
//! transaction and no lock held between looks. The thread has no work of
//! the writer's to contend with: a writer's mutex is never taken here.

use crate::connection::map_err;
use relay_store::{StoreError, WatchGuard};
use rusqlite::Connection;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Starts the watch; it stops (and closes its connection) when the guard
/// is dropped, within the guard's drop.
pub(crate) fn start(
    conn: Connection,
    every: Duration,
    own_last_id: Arc<AtomicI64>,
    wake: Box<dyn Fn() + Send + Sync>,
) -> Result<WatchGuard, StoreError> {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let mut look = Look {
        conn,
        data_version: None,
        last_id: 0,
    };
    // The first look only learns where things stand.
    let _ = look.added(&own_last_id);
    let thread = std::thread::Builder::new()
        .name("relay-sqlite-watch".into())
        .spawn(move || loop {
            match stopped.recv_timeout(every) {
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                _ => return, // the guard was dropped
            }
            match look.added(&own_last_id) {
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
    fn added(&mut self, own_last_id: &AtomicI64) -> Result<bool, StoreError> {
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
        let known = self.last_id.max(own_last_id.load(Ordering::Relaxed));
        self.last_id = self.last_id.max(last);
        Ok(before.is_some() && last > known)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SqliteBackend, Target};
    use relay_store::Backend;

    /// Another connection's job is news; this process's own (its writers
    /// raise `own_last_id`) and a commit without a new job are not.
    #[test]
    fn only_other_connections_jobs_wake() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let backend = SqliteBackend::file(&path);
        drop(backend.open_writer().unwrap()); // creates the schema
        let settings = crate::Settings::default();
        let own = Arc::new(AtomicI64::new(0));
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
        own.store(2, Ordering::Relaxed); // this process's writer committed job 2
        insert(2);
        assert!(!look.added(&own).unwrap(), "this process's own job");
        insert(3);
        assert!(look.added(&own).unwrap());
    }
}
