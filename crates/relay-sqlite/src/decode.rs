//! Strict row decoding: every column must hold exactly the type and range
//! the schema promises, or the row is reported as `Corrupt`, naming the job.

use relay_core::{Job, JobId, JobStatus, Priority, QueueSettings, Schedule, Timestamp};
use relay_store::decode::RawStatus;
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

    /// A 0/1 flag.
    pub(crate) fn flag(&self, i: usize, name: &str) -> Result<bool, StoreError> {
        match self.value(i, name)? {
            ValueRef::Integer(0) => Ok(false),
            ValueRef::Integer(1) => Ok(true),
            v => Err(self.bad(name, "0 or 1", v)),
        }
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

    /// A positive number of milliseconds, or NULL.
    pub(crate) fn opt_duration(&self, i: usize, name: &str) -> Result<Option<std::time::Duration>, StoreError> {
        self.opt_int(i, name)?
            .map(|ms| relay_store::decode::millis(self.job, name, ms))
            .transpose()
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

    /// The status columns, starting at column `at` in this order: state,
    /// attempts, max_attempts, ready_at, finished_at, lease_token,
    /// lease_expires_at, leased_by, last_error; and `waiting_on` at column
    /// `waiting`.
    pub(crate) fn status(&self, at: usize, waiting: usize) -> Result<JobStatus, StoreError> {
        RawStatus {
            state: self.text(at, "state")?,
            attempts: self.int(at + 1, "attempts")?,
            max_attempts: self.int(at + 2, "max_attempts")?,
            ready_at: self.int(at + 3, "ready_at")?,
            finished_at: self.opt_int(at + 4, "finished_at")?,
            lease_token: self.int(at + 5, "lease_token")?,
            lease_expires_at: self.opt_int(at + 6, "lease_expires_at")?,
            leased_by: self.opt_text(at + 7, "leased_by")?,
            last_error: self.opt_text(at + 8, "last_error")?,
            waiting_on: self.int(waiting, "waiting_on")?,
        }
        .decode(self.job)
    }

    pub(crate) fn priority(&self, i: usize) -> Result<Priority, StoreError> {
        relay_store::decode::priority(self.job, self.int(i, "priority")?)
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
        lease_for: c.opt_duration(17, "lease_for_ms")?,
        timeout: c.opt_duration(18, "timeout_ms")?,
        traceparent: c.opt_text(20, "traceparent")?,
        tags: match c.opt_text(21, "tags")? {
            None => Vec::new(),
            Some(t) => serde_json::from_str(&t)
                .map_err(|e| StoreError::corrupt(Some(id), format!("column tags: not a JSON array of strings: {e}")))?,
        },
        progress: c
            .opt_text(22, "progress")?
            .map(|t| relay_store::decode::progress(id, &t))
            .transpose()?,
        group: c.opt_text(23, "grp")?,
        steps: c
            .opt_blob(24, "steps")?
            .map(|b| relay_store::decode::steps(id, &b))
            .transpose()?
            .unwrap_or_default(),
        status: c.status(8, 19)?,
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

/// A `job_deps` row: `parent, child, on_failure`.
pub(crate) fn dependent(row: &Row<'_>) -> Result<relay_store::Dependent, StoreError> {
    let c = Cols::new(row, None);
    let parent = JobId(c.int(0, "parent")?);
    let child = JobId(c.int(1, "child")?);
    relay_store::decode::dependent(parent, child, &c.text(2, "on_failure")?)
}

/// A `queues` row: `name, paused, max_leased, rate_limit, rate_per_ms,
/// window_start, window_count, poison_after, keep_succeeded, keep_dead,
/// keep_cancelled`.
pub(crate) fn queue_settings(row: &Row<'_>) -> Result<(String, QueueSettings), StoreError> {
    let c = Cols::new(row, None);
    let name = c.text(0, "queue name")?;
    let raw = || -> Result<relay_store::decode::RawQueue, StoreError> {
        Ok(relay_store::decode::RawQueue {
            paused: c.flag(1, "paused")?,
            max_leased: c.opt_int(2, "max_leased")?,
            rate_limit: c.opt_int(3, "rate_limit")?,
            rate_per_ms: c.opt_int(4, "rate_per_ms")?,
            window_start: c.int(5, "window_start")?,
            window_count: c.int(6, "window_count")?,
            poison_after: c.opt_int(7, "poison_after")?,
            keep: [
                c.opt_int(8, "keep_succeeded")?,
                c.opt_int(9, "keep_dead")?,
                c.opt_int(10, "keep_cancelled")?,
            ],
            max_leased_per_group: c.opt_int(11, "max_leased_per_group")?,
        })
    };
    let settings = relay_store::decode::queue_settings(&name, raw());
    Ok((name, settings))
}

/// A row of `job_finished_window.sql`: `id, state, finished_at,
/// keep_succeeded, keep_dead, keep_cancelled`, or why it does not decode.
pub(crate) fn finished(row: &Row<'_>) -> Result<relay_store::Finished, String> {
    let c = Cols::new(row, None);
    let raw = || -> Result<relay_store::decode::RawFinished, StoreError> {
        Ok(relay_store::decode::RawFinished {
            id: c.int(0, "id")?,
            state: c.text(1, "state")?,
            finished_at: c.opt_int(2, "finished_at")?,
            keep: [
                c.opt_int(3, "keep_succeeded")?,
                c.opt_int(4, "keep_dead")?,
                c.opt_int(5, "keep_cancelled")?,
            ],
        })
    };
    raw().map_err(|e| e.to_string())?.decode()
}

/// A `schedules` row: `name, cron, every_ms, tz, queue, kind, payload,
/// priority, max_attempts, paused, created_at, next_at, last_at, grp`.
pub(crate) fn schedule(row: &Row<'_>) -> Result<Schedule, StoreError> {
    let c = Cols::new(row, None);
    relay_store::decode::RawSchedule {
        name: c.text(0, "schedule name")?,
        cron: c.opt_text(1, "cron")?,
        every_ms: c.opt_int(2, "every_ms")?,
        tz: c.opt_text(3, "tz")?,
        queue: c.text(4, "queue")?,
        kind: c.text(5, "kind")?,
        payload: c
            .opt_blob(6, "payload")?
            .ok_or_else(|| StoreError::corrupt(None, "schedule payload: NULL"))?,
        priority: c.int(7, "priority")?,
        max_attempts: c.int(8, "max_attempts")?,
        paused: c.flag(9, "paused")?,
        created_at: c.int(10, "created_at")?,
        next_at: c.int(11, "next_at")?,
        last_at: c.opt_int(12, "last_at")?,
        group: c.opt_text(13, "schedule group")?,
    }
    .decode()
}
