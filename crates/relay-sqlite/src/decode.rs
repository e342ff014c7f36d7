//! Strict row decoding: every column must hold exactly the type and range
//! the schema promises, or the row is reported as `Corrupt`, naming the job.

use relay_core::{Job, JobId, JobState, JobStatus, Lease, LeaseToken, Priority, Timestamp};
use relay_store::StoreError;
use rusqlite::types::ValueRef;
use rusqlite::Row;

/// Reads columns of one row on behalf of one job.
pub(crate) struct Cols<'a, 'r> {
    row: &'a Row<'r>,
    job: Option<JobId>,
}

impl<'a, 'r> Cols<'a, 'r> {
    pub(crate) fn new(row: &'a Row<'r>, job: Option<JobId>) -> Self {
        Self { row, job }
    }

    fn value(&self, i: usize, name: &str) -> Result<ValueRef<'a>, StoreError> {
        self.row
            .get_ref(i)
            .map_err(|e| StoreError::corrupt(self.job, format!("column {name}: {e}")))
    }

    fn bad(&self, name: &str, what: &str, v: ValueRef<'_>) -> StoreError {
        StoreError::corrupt(
            self.job,
            format!("column {name}: expected {what}, found {}", describe(v)),
        )
    }

    pub(crate) fn int(&self, i: usize, name: &str) -> Result<i64, StoreError> {
        match self.value(i, name)? {
            ValueRef::Integer(v) => Ok(v),
            v => Err(self.bad(name, "an integer", v)),
        }
    }

    pub(crate) fn opt_int(&self, i: usize, name: &str) -> Result<Option<i64>, StoreError> {
        match self.value(i, name)? {
            ValueRef::Null => Ok(None),
            ValueRef::Integer(v) => Ok(Some(v)),
            v => Err(self.bad(name, "an integer or NULL", v)),
        }
    }

    pub(crate) fn text(&self, i: usize, name: &str) -> Result<String, StoreError> {
        self.opt_text(i, name)?
            .ok_or_else(|| StoreError::corrupt(self.job, format!("column {name}: NULL")))
    }

    pub(crate) fn opt_text(&self, i: usize, name: &str) -> Result<Option<String>, StoreError> {
        match self.value(i, name)? {
            ValueRef::Null => Ok(None),
            ValueRef::Text(b) => String::from_utf8(b.to_vec())
                .map(Some)
                .map_err(|_| StoreError::corrupt(self.job, format!("column {name}: text is not UTF-8"))),
            v => Err(self.bad(name, "text", v)),
        }
    }

    pub(crate) fn opt_blob(&self, i: usize, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match self.value(i, name)? {
            ValueRef::Null => Ok(None),
            ValueRef::Blob(b) => Ok(Some(b.to_vec())),
            v => Err(self.bad(name, "a blob", v)),
        }
    }

    fn count(&self, i: usize, name: &str) -> Result<u32, StoreError> {
        let v = self.int(i, name)?;
        u32::try_from(v).map_err(|_| StoreError::corrupt(self.job, format!("column {name}: {v} is out of range")))
    }

    /// The status columns, starting at column `at` in this order: state,
    /// attempts, max_attempts, ready_at, finished_at, lease_token,
    /// lease_expires_at, leased_by, last_error.
    pub(crate) fn status(&self, at: usize) -> Result<JobStatus, StoreError> {
        let raw = self.text(at, "state")?;
        let state = JobState::parse(&raw)
            .ok_or_else(|| StoreError::corrupt(self.job, format!("column state: unknown state {raw:?}")))?;
        let max_attempts = self.count(at + 2, "max_attempts")?;
        if max_attempts == 0 {
            return Err(StoreError::corrupt(self.job, "column max_attempts: 0"));
        }
        let finished_at = self.opt_int(at + 4, "finished_at")?.map(Timestamp::from_millis);
        if state.is_finished() != finished_at.is_some() {
            return Err(StoreError::corrupt(
                self.job,
                format!("{state} job with finished_at {finished_at:?}"),
            ));
        }
        let last_token = LeaseToken(self.int(at + 5, "lease_token")?);
        let expires = self.opt_int(at + 6, "lease_expires_at")?;
        let worker = self.opt_text(at + 7, "leased_by")?;
        let lease = match (state, expires, worker) {
            (JobState::Leased, Some(e), Some(worker)) => Some(Lease {
                token: last_token,
                expires_at: Timestamp::from_millis(e),
                worker,
            }),
            (JobState::Leased, e, w) => {
                return Err(StoreError::corrupt(
                    self.job,
                    format!("LEASED job without a lease (lease_expires_at {e:?}, leased_by {w:?})"),
                ))
            }
            (_, None, None) => None,
            (_, _, _) => return Err(StoreError::corrupt(self.job, format!("{state} job holds a lease"))),
        };
        Ok(JobStatus {
            state,
            attempts: self.count(at + 1, "attempts")?,
            max_attempts,
            ready_at: Timestamp::from_millis(self.int(at + 3, "ready_at")?),
            finished_at,
            last_token,
            lease,
            last_error: self.opt_text(at + 8, "last_error")?,
        })
    }

    pub(crate) fn priority(&self, i: usize) -> Result<Priority, StoreError> {
        let v = self.int(i, "priority")?;
        u8::try_from(v)
            .ok()
            .and_then(Priority::new)
            .ok_or_else(|| StoreError::corrupt(self.job, format!("column priority: {v} is outside 0-3")))
    }
}

/// Decodes a row of `sql/job_get.sql`'s columns.
pub(crate) fn job(row: &Row<'_>) -> Result<Job, StoreError> {
    let id = JobId(Cols::new(row, None).int(0, "id")?);
    let c = Cols::new(row, Some(id));
    Ok(Job {
        id,
        queue: c.text(1, "queue")?,
        kind: c.text(2, "kind")?,
        payload: c
            .opt_blob(3, "payload")?
            .ok_or_else(|| StoreError::corrupt(Some(id), "column payload: NULL"))?,
        priority: c.priority(4)?,
        created_at: Timestamp::from_millis(c.int(5, "created_at")?),
        unique_key: c.opt_text(6, "unique_key")?,
        result: c.opt_blob(7, "result")?,
        status: c.status(8)?,
    })
}

fn describe(v: ValueRef<'_>) -> String {
    match v {
        ValueRef::Null => "NULL".into(),
        ValueRef::Integer(i) => format!("integer {i}"),
        ValueRef::Real(r) => format!("real {r}"),
        ValueRef::Text(t) => format!("text {:?}", String::from_utf8_lossy(&t[..t.len().min(40)])),
        ValueRef::Blob(b) => format!("blob of {} bytes", b.len()),
    }
}
