//! Strict row decoding for PostgreSQL rows: the column types are enforced
//! by the schema, the invariants between columns here. A row that breaks one
//! is `Corrupt`, naming the job.

use postgres::types::FromSql;
use postgres::Row;
use relay_core::{Job, JobId, JobState, JobStatus, Lease, LeaseToken, Priority, Timestamp};
use relay_store::StoreError;

fn get<'a, T: FromSql<'a>>(row: &'a Row, i: usize, name: &str, job: Option<JobId>) -> Result<T, StoreError> {
    row.try_get(i)
        .map_err(|e| StoreError::corrupt(job, format!("column {name}: {e}")))
}

fn count(v: i64, name: &str, job: Option<JobId>) -> Result<u32, StoreError> {
    u32::try_from(v).map_err(|_| StoreError::corrupt(job, format!("column {name}: {v} is out of range")))
}

pub(crate) fn priority(row: &Row, i: usize, job: Option<JobId>) -> Result<Priority, StoreError> {
    let v: i64 = get(row, i, "priority", job)?;
    u8::try_from(v)
        .ok()
        .and_then(Priority::new)
        .ok_or_else(|| StoreError::corrupt(job, format!("column priority: {v} is outside 0-3")))
}

/// The status columns from `at`: state, attempts, max_attempts, ready_at,
/// finished_at, lease_token, lease_expires_at, leased_by, last_error.
pub(crate) fn status(row: &Row, at: usize, job: Option<JobId>) -> Result<JobStatus, StoreError> {
    let raw: String = get(row, at, "state", job)?;
    let state = JobState::parse(&raw)
        .ok_or_else(|| StoreError::corrupt(job, format!("column state: unknown state {raw:?}")))?;
    let max_attempts = count(get(row, at + 2, "max_attempts", job)?, "max_attempts", job)?;
    if max_attempts == 0 {
        return Err(StoreError::corrupt(job, "column max_attempts: 0"));
    }
    let finished_at = get::<Option<i64>>(row, at + 4, "finished_at", job)?.map(Timestamp::from_millis);
    if state.is_finished() != finished_at.is_some() {
        return Err(StoreError::corrupt(
            job,
            format!("{state} job with finished_at {finished_at:?}"),
        ));
    }
    let last_token = LeaseToken(get(row, at + 5, "lease_token", job)?);
    let expires: Option<i64> = get(row, at + 6, "lease_expires_at", job)?;
    let worker: Option<String> = get(row, at + 7, "leased_by", job)?;
    let lease = match (state, expires, worker) {
        (JobState::Leased, Some(e), Some(worker)) => Some(Lease {
            token: last_token,
            expires_at: Timestamp::from_millis(e),
            worker,
        }),
        (JobState::Leased, e, w) => {
            return Err(StoreError::corrupt(
                job,
                format!("LEASED job without a lease (lease_expires_at {e:?}, leased_by {w:?})"),
            ))
        }
        (_, None, None) => None,
        _ => return Err(StoreError::corrupt(job, format!("{state} job holds a lease"))),
    };
    Ok(JobStatus {
        state,
        attempts: count(get(row, at + 1, "attempts", job)?, "attempts", job)?,
        max_attempts,
        ready_at: Timestamp::from_millis(get(row, at + 3, "ready_at", job)?),
        finished_at,
        last_token,
        lease,
        last_error: get(row, at + 8, "last_error", job)?,
    })
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
