//! Strict row decoding for PostgreSQL rows: the column types are enforced
//! by the schema, the invariants between columns here. A row that breaks one
//! is `Corrupt`, naming the job.

use postgres::types::FromSql;
use postgres::Row;
use relay_core::{Job, JobId, JobStatus, Priority, Timestamp};
use relay_store::decode::RawStatus;
use relay_store::StoreError;

fn get<'a, T: FromSql<'a>>(row: &'a Row, i: usize, name: &str, job: Option<JobId>) -> Result<T, StoreError> {
    row.try_get(i)
        .map_err(|e| StoreError::corrupt(job, format!("column {name}: {e}")))
}

pub(crate) fn priority(row: &Row, i: usize, job: Option<JobId>) -> Result<Priority, StoreError> {
    relay_store::decode::priority(job, get(row, i, "priority", job)?)
}

/// The status columns from `at`: state, attempts, max_attempts, ready_at,
/// finished_at, lease_token, lease_expires_at, leased_by, last_error.
pub(crate) fn status(row: &Row, at: usize, job: Option<JobId>) -> Result<JobStatus, StoreError> {
    RawStatus {
        state: get(row, at, "state", job)?,
        attempts: get(row, at + 1, "attempts", job)?,
        max_attempts: get(row, at + 2, "max_attempts", job)?,
        ready_at: get(row, at + 3, "ready_at", job)?,
        finished_at: get(row, at + 4, "finished_at", job)?,
        lease_token: get(row, at + 5, "lease_token", job)?,
        lease_expires_at: get(row, at + 6, "lease_expires_at", job)?,
        leased_by: get(row, at + 7, "leased_by", job)?,
        last_error: get(row, at + 8, "last_error", job)?,
    }
    .decode(job)
}

/// A row of `sql/job_get.sql`'s columns.
pub(crate) fn job(row: &Row) -> Result<Job, StoreError> {
    let id = JobId(get(row, 0, "id", None)?);
    let j = Some(id);
    Ok(Job {
        id,
        queue: get(row, 1, "queue", j)?,
        kind: get(row, 2, "kind", j)?,
        payload: get(row, 3, "payload", j)?,
        priority: priority(row, 4, j)?,
        created_at: Timestamp::from_millis(get(row, 5, "created_at", j)?),
        unique_key: get(row, 6, "unique_key", j)?,
        result: get(row, 7, "result", j)?,
        status: status(row, 8, j)?,
    })
}
