//! The writer connection: the [`Store`] primitives, each one prepared
//! statement from `sql/`.

use crate::connection::map_err;
use crate::decode::{self, Cols};
use relay_core::{Candidate, Job, JobId, JobStatus, Priority, Timestamp};
use relay_store::{EventWrite, JobInsert, JobSetStatus, Store, StoreError, Syncer};
use rusqlite::{params, Connection, OptionalExtension};

pub(crate) struct SqliteStore {
    pub(crate) conn: Connection,
    /// A file (not the in-memory test database).
    pub(crate) on_disk: bool,
    /// Set when commits run with `synchronous=NORMAL` (a split commit).
    pub(crate) syncer: Option<std::sync::Arc<dyn Syncer>>,
}

impl SqliteStore {
    /// The guarded status write; `false` when the guard did not match.
    fn set_status(&mut self, p: &JobSetStatus<'_>) -> Result<bool, StoreError> {
        let s = p.status;
        let lease = s.lease.as_ref();
        let n = self.exec(
            &crate::sql::JOB_SET_STATUS,
            params![
                p.id.0,
                p.expect_state.as_str(),
                p.expect_token.0,
                s.state.as_str(),
                s.attempts,
                s.ready_at.as_millis(),
                s.finished_at.map(Timestamp::as_millis),
                s.last_token.0,
                lease.map(|l| l.expires_at.as_millis()),
                lease.map(|l| l.worker.as_str()),
                s.last_error.as_deref(),
                p.result,
            ],
        )?;
        Ok(n == 1)
    }

    /// Runs one cached statement; returns the rows it changed.
    fn exec(&self, sql: &str, params: impl rusqlite::Params) -> Result<usize, StoreError> {
        self.conn
            .prepare_cached(sql)
            .and_then(|mut s| s.execute(params))
            .map_err(map_err)
    }
}

impl Store for SqliteStore {
    fn job_prune(&mut self, before: Timestamp) -> Result<u64, StoreError> {
        self.exec(&crate::sql::JOB_PRUNE_EVENTS, [before.as_millis()])?;
        Ok(self.exec(&crate::sql::JOB_PRUNE, [before.as_millis()])? as u64)
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        self.exec("BEGIN IMMEDIATE", []).map(drop)
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.exec("COMMIT", []).map(drop)
    }

    fn rollback(&mut self) -> Result<(), StoreError> {
        if self.conn.is_autocommit() {
            return Ok(()); // SQLite already rolled the transaction back (I/O error, disk full)
        }
        self.exec("ROLLBACK", []).map(drop)
    }

    fn changes(&self) -> u64 {
        self.conn.total_changes()
    }

    fn failed_commit_is_final(&self) -> bool {
        self.on_disk
    }

    fn syncer(&self) -> Option<std::sync::Arc<dyn Syncer>> {
        self.syncer.clone()
    }

    fn job_insert(&mut self, j: &JobInsert<'_>) -> Result<JobId, StoreError> {
        let s = j.status;
        self.exec(
            &crate::sql::JOB_INSERT,
            params![
                j.queue,
                j.kind,
                j.payload,
                j.priority.get(),
                s.state.as_str(),
                s.attempts,
                s.max_attempts,
                s.ready_at.as_millis(),
                j.created_at.as_millis(),
                j.unique_key,
                s.last_token.0,
            ],
        )?;
        let id = JobId(self.conn.last_insert_rowid());
        if let Some(e) = j.event {
            self.exec(
                &crate::sql::EVENT_APPEND,
                params![id.0, 1, e.at.as_millis(), e.kind, e.data],
            )?;
        }
        Ok(id)
    }

    fn job_find_active_by_key(&mut self, key: &str) -> Result<Option<JobId>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(&crate::sql::JOB_FIND_ACTIVE_BY_KEY)
            .map_err(map_err)?;
        st.query_row([key], |r| r.get(0))
            .optional()
            .map(|o| o.map(JobId))
            .map_err(map_err)
    }

    fn job_key_holder(&mut self, id: JobId) -> Result<Option<(String, JobId)>, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::JOB_KEY_HOLDER).map_err(map_err)?;
        let mut rows = st.query([id.0]).map_err(map_err)?;
        match rows.next().map_err(map_err)? {
            Some(row) => {
                let c = Cols::new(row, Some(id));
                Ok(Some((c.text(0, "unique_key")?, JobId(c.int(1, "id")?))))
            }
            None => Ok(None),
        }
    }

    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        job_get(&self.conn, id)
    }

    fn job_get_status(&mut self, id: JobId) -> Result<Option<JobStatus>, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::JOB_GET_STATUS).map_err(map_err)?;
        let mut rows = st.query([id.0]).map_err(map_err)?;
        match rows.next().map_err(map_err)? {
            Some(row) => {
                let c = Cols::new(row, Some(id));
                c.priority(9)?;
                c.status(0).map(Some)
            }
            None => Ok(None),
        }
    }

    /// The guarded write, then its event numbered inside one INSERT: two
    /// statements instead of the default's three.
    fn job_transition(&mut self, p: &JobSetStatus<'_>, event: Option<EventWrite<'_>>) -> Result<bool, StoreError> {
        if !self.set_status(p)? {
            return Ok(false);
        }
        if let Some(e) = event {
            self.exec(
                &crate::sql::EVENT_APPEND_NEXT,
                params![p.id.0, e.at.as_millis(), e.kind, e.data],
            )?;
        }
        Ok(true)
    }

    fn job_delete(&mut self, id: JobId) -> Result<bool, StoreError> {
        self.exec(&crate::sql::JOB_EVENTS_DELETE, [id.0])?;
        Ok(self.exec(&crate::sql::JOB_DELETE, [id.0])? == 1)
    }

    fn job_ready_heads(&mut self, queue: &str, now: Timestamp) -> Result<Vec<Candidate>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(&crate::sql::JOB_READY_HEADS)
            .map_err(map_err)?;
        let mut rows = st.query(params![queue, now.as_millis()]).map_err(map_err)?;
        let mut out = Vec::with_capacity(4);
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(candidate(row)?);
        }
        Ok(out)
    }

    fn job_ready_head(
        &mut self,
        queue: &str,
        priority: Priority,
        now: Timestamp,
    ) -> Result<Option<Candidate>, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::JOB_READY_HEAD).map_err(map_err)?;
        let mut rows = st
            .query(params![queue, priority.get(), now.as_millis()])
            .map_err(map_err)?;
        match rows.next().map_err(map_err)? {
            Some(row) => candidate(row).map(Some),
            None => Ok(None),
        }
    }

    fn job_next_ready_at(&mut self, queue: &str, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(&crate::sql::JOB_NEXT_READY_AT)
            .map_err(map_err)?;
        st.query_row(params![queue, now.as_millis()], |r| r.get::<_, Option<i64>>(0))
            .map(|o| o.map(Timestamp::from_millis))
            .map_err(map_err)
    }

    fn job_expired_leases(&mut self, now: Timestamp) -> Result<Vec<JobId>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(&crate::sql::JOB_EXPIRED_LEASES)
            .map_err(map_err)?;
        let rows = st.query_map(params![now.as_millis()], |r| r.get(0)).map_err(map_err)?;
        rows.map(|r| r.map(JobId).map_err(map_err)).collect()
    }

    fn event_append(&mut self, job: JobId, at: Timestamp, kind: &str, data: &str) -> Result<i64, StoreError> {
        let seq: i64 = self
            .conn
            .prepare_cached(&crate::sql::EVENT_NEXT_SEQ)
            .and_then(|mut st| st.query_row([job.0], |r| r.get(0)))
            .map_err(map_err)?;
        self.exec(
            &crate::sql::EVENT_APPEND,
            params![job.0, seq, at.as_millis(), kind, data],
        )?;
        Ok(seq)
    }
}

/// A claim candidate from `id, priority, ready_at`, decoded strictly.
fn candidate(row: &rusqlite::Row<'_>) -> Result<Candidate, StoreError> {
    let id = JobId(Cols::new(row, None).int(0, "id")?);
    let c = Cols::new(row, Some(id));
    Ok(Candidate {
        id,
        priority: c.priority(1)?,
        ready_at: Timestamp::from_millis(c.int(2, "ready_at")?),
    })
}

pub(crate) fn job_get(conn: &Connection, id: JobId) -> Result<Option<Job>, StoreError> {
    let mut st = conn.prepare_cached(&crate::sql::JOB_GET).map_err(map_err)?;
    let mut rows = st.query([id.0]).map_err(map_err)?;
    match rows.next().map_err(map_err)? {
        Some(row) => decode::job(row).map(Some),
        None => Ok(None),
    }
}
