//! Strict row decoding for PostgreSQL rows: the column types are enforced
//! by the schema, the invariants between columns here. A row that breaks one
//! is `Corrupt`, naming the job.

use postgres::types::FromSql;
use postgres::Row;
use relay_core::{Job, JobId, JobStatus, Priority, QueueSettings, Schedule, Timestamp};
use relay_store::decode::RawStatus;
use relay_store::StoreError;

/// Column `i` as a `T`, or `Corrupt` (never a panic) when its type or
/// nullness does not match.
pub(crate) fn col<'a, T: FromSql<'a>>(row: &'a Row, i: usize, name: &str, job: Option<JobId>) -> Result<T, StoreError> {
    row.try_get(i)
        .map_err(|e| StoreError::corrupt(job, format!("column {name}: {e}")))
}

pub(crate) fn priority(row: &Row, i: usize, job: Option<JobId>) -> Result<Priority, StoreError> {
    relay_store::decode::priority(job, col(row, i, "priority", job)?)
}

/// The status columns from `at`: state, attempts, max_attempts, ready_at,
/// finished_at, lease_token, lease_expires_at, leased_by, last_error; and
/// `waiting_on` at column `waiting`.
pub(crate) fn status(row: &Row, at: usize, waiting: usize, job: Option<JobId>) -> Result<JobStatus, StoreError> {
    RawStatus {
        state: col(row, at, "state", job)?,
        attempts: col(row, at + 1, "attempts", job)?,
        max_attempts: col(row, at + 2, "max_attempts", job)?,
        ready_at: col(row, at + 3, "ready_at", job)?,
        finished_at: col(row, at + 4, "finished_at", job)?,
        lease_token: col(row, at + 5, "lease_token", job)?,
        lease_expires_at: col(row, at + 6, "lease_expires_at", job)?,
        leased_by: col(row, at + 7, "leased_by", job)?,
        last_error: col(row, at + 8, "last_error", job)?,
        waiting_on: col(row, waiting, "waiting_on", job)?,
    }
    .decode(job)
}

/// A row of `sql/job_get.sql`'s columns.
pub(crate) fn job(row: &Row) -> Result<Job, StoreError> {
    let id = JobId(col(row, 0, "id", None)?);
    let j = Some(id);
    Ok(Job {
        id,
        queue: col(row, 1, "queue", j)?,
        kind: col(row, 2, "kind", j)?,
        payload: col(row, 3, "payload", j)?,
        priority: priority(row, 4, j)?,
        created_at: Timestamp::from_millis(col(row, 5, "created_at", j)?),
        unique_key: col(row, 6, "unique_key", j)?,
        result: col(row, 7, "result", j)?,
        lease_for: duration(row, 17, "lease_for_ms", j)?,
        timeout: duration(row, 18, "timeout_ms", j)?,
        traceparent: col(row, 20, "traceparent", j)?,
        tags: col::<Option<Vec<String>>>(row, 21, "tags", j)?.unwrap_or_default(),
        progress: col::<Option<&str>>(row, 22, "progress", j)?
            .map(|t| relay_store::decode::progress(id, t))
            .transpose()?,
        group: col(row, 23, "grp", j)?,
        steps: col::<Option<&[u8]>>(row, 24, "steps", j)?
            .map(|b| relay_store::decode::steps(id, b))
            .transpose()?
            .unwrap_or_default(),
        status: status(row, 8, 19, j)?,
    })
}

/// A positive number of milliseconds, or NULL.
fn duration(row: &Row, i: usize, name: &str, job: Option<JobId>) -> Result<Option<std::time::Duration>, StoreError> {
    col::<Option<i64>>(row, i, name, job)?
        .map(|ms| relay_store::decode::millis(job, name, ms))
        .transpose()
}

/// A `relay_job_deps` row: `parent, child, on_failure`.
pub(crate) fn dependent(row: &Row) -> Result<relay_store::Dependent, StoreError> {
    let parent = JobId(col(row, 0, "parent", None)?);
    let child = JobId(col(row, 1, "child", None)?);
    let on_failure: String = col(row, 2, "on_failure", Some(child))?;
    relay_store::decode::dependent(parent, child, &on_failure)
}

/// A `relay_queues` row: `name, paused, max_leased, rate_limit,
/// rate_per_ms, window_start, window_count, poison_after, keep_succeeded,
/// keep_dead, keep_cancelled`.
pub(crate) fn queue_settings(row: &Row) -> Result<(String, QueueSettings), StoreError> {
    let name: String = col(row, 0, "queue name", None)?;
    let raw = || -> Result<relay_store::decode::RawQueue, StoreError> {
        Ok(relay_store::decode::RawQueue {
            paused: col(row, 1, "paused", None)?,
            max_leased: col(row, 2, "max_leased", None)?,
            rate_limit: col(row, 3, "rate_limit", None)?,
            rate_per_ms: col(row, 4, "rate_per_ms", None)?,
            window_start: col(row, 5, "window_start", None)?,
            window_count: col(row, 6, "window_count", None)?,
            poison_after: col(row, 7, "poison_after", None)?,
            keep: [
                col(row, 8, "keep_succeeded", None)?,
                col(row, 9, "keep_dead", None)?,
                col(row, 10, "keep_cancelled", None)?,
            ],
            max_leased_per_group: col(row, 11, "max_leased_per_group", None)?,
        })
    };
    let settings = relay_store::decode::queue_settings(&name, raw());
    Ok((name, settings))
}

/// A row of `job_finished_window.sql` with a job (`id, state,
/// finished_at, keep_succeeded, keep_dead, keep_cancelled`), or why it
/// does not decode.
pub(crate) fn finished(row: &Row) -> Result<relay_store::Finished, String> {
    let raw = || -> Result<relay_store::decode::RawFinished, StoreError> {
        Ok(relay_store::decode::RawFinished {
            id: col(row, 0, "id", None)?,
            state: col(row, 1, "state", None)?,
            finished_at: col(row, 2, "finished_at", None)?,
            keep: [
                col(row, 3, "keep_succeeded", None)?,
                col(row, 4, "keep_dead", None)?,
                col(row, 5, "keep_cancelled", None)?,
            ],
        })
    };
    raw().map_err(|e| e.to_string())?.decode()
}

/// A `relay_schedules` row: `name, cron, every_ms, tz, queue, kind, payload,
/// priority, max_attempts, paused, created_at, next_at, last_at, grp`.
pub(crate) fn schedule(row: &Row) -> Result<Schedule, StoreError> {
    relay_store::decode::RawSchedule {
        name: col(row, 0, "schedule name", None)?,
        cron: col(row, 1, "cron", None)?,
        every_ms: col(row, 2, "every_ms", None)?,
        tz: col(row, 3, "tz", None)?,
        queue: col(row, 4, "queue", None)?,
        kind: col(row, 5, "kind", None)?,
        payload: col(row, 6, "payload", None)?,
        priority: col(row, 7, "priority", None)?,
        max_attempts: col(row, 8, "max_attempts", None)?,
        paused: col(row, 9, "paused", None)?,
        created_at: col(row, 10, "created_at", None)?,
        next_at: col(row, 11, "next_at", None)?,
        last_at: col(row, 12, "last_at", None)?,
        group: col(row, 13, "schedule group", None)?,
    }
    .decode()
}
