//! A batch planned from a status the writer did not read
//! (`Store::apply_unread`): one flight, and what its answers say.

use super::PgStore;
use crate::connect::map_err;
use crate::decode;
use crate::pipe::{Answer, Req};
use crate::write::{one_transition, Writes};
use relay_core::{JobStatus, Timestamp};
use relay_store::{Changes, CommitFailed, StoreError};

impl PgStore {
    /// [`relay_store::Store::apply_unread`]: `BEGIN`, the row's lock, the
    /// guarded write and the `COMMIT`, in one flight: one round trip where
    /// a batch that reads first costs two.
    pub(super) fn write_unread(&mut self, c: &Changes<'_>, expected: &JobStatus) -> Result<bool, CommitFailed> {
        if !one_transition(c) {
            return Ok(false);
        }
        let notify = std::mem::take(&mut self.notify);
        if self.pipe.is_closed() {
            return Ok(false); // the batch read next connects again
        }
        let lock_st = self
            .pipe
            .stmt(include_str!("../../sql/job_lock.sql"))
            .map_err(CommitFailed::NotApplied)?;
        let write_st = self
            .pipe
            .stmt(include_str!("../../sql/apply_unread.sql"))
            .map_err(CommitFailed::NotApplied)?;
        let writes = Writes::new(&mut self.pipe, c).map_err(CommitFailed::NotApplied)?;
        let Some(Req::Write(_, mut params)) = writes.reqs().pop() else {
            return Ok(false);
        };
        let id = c.updates[0].id.0;
        let was = UnreadGuard::new(expected);
        params.extend_from_slice(&[
            &was.attempts,
            &was.max_attempts,
            &was.ready_at,
            &was.finished_at,
            &was.expires,
            &was.by,
            &was.error,
            &was.waiting_on,
            &notify,
        ]);
        let answers = self.pipe.transaction(vec![
            Req::Read(&lock_st, vec![&id]),
            Req::Write(&write_st, params),
            Req::Simple("COMMIT"),
        ]);
        unread_outcome(answers)
    }
}

/// The status a batch was planned from, as the guard of
/// `sql/apply_unread.sql` binds it (`$23`-`$30`).
struct UnreadGuard<'a> {
    attempts: i64,
    max_attempts: i64,
    ready_at: i64,
    finished_at: Option<i64>,
    expires: Option<i64>,
    by: Option<&'a str>,
    error: Option<&'a str>,
    waiting_on: i64,
}

impl<'a> UnreadGuard<'a> {
    fn new(s: &'a JobStatus) -> Self {
        Self {
            attempts: i64::from(s.attempts),
            max_attempts: i64::from(s.max_attempts),
            ready_at: s.ready_at.as_millis(),
            finished_at: s.finished_at.map(Timestamp::as_millis),
            expires: s.lease.as_ref().map(|l| l.expires_at.as_millis()),
            by: s.lease.as_ref().map(|l| l.worker.as_str()),
            error: s.last_error.as_deref(),
            waiting_on: i64::from(s.waiting_on),
        }
    }
}

/// What the answers of `BEGIN`, the lock, the guarded write and `COMMIT`
/// (`PgStore::apply_unread`) say: written and committed, not written, or
/// unknown.
fn unread_outcome(answers: Vec<Result<Answer, tokio_postgres::Error>>) -> Result<bool, CommitFailed> {
    let mut answers = answers.into_iter();
    let (begin, lock, write, commit) = (answers.next(), answers.next(), answers.next(), answers.next());
    let unknown = |e: tokio_postgres::Error| {
        if crate::pipe::refused(&e) {
            CommitFailed::NotApplied(map_err(e))
        } else {
            CommitFailed::MaybeApplied(map_err(e))
        }
    };
    match begin {
        Some(Ok(_)) => {}
        // The session was gone before anything was sent (nothing after
        // `BEGIN` left): plan again on a new one. Gone after it was sent,
        // the COMMIT may have run: unknown.
        Some(Err(e)) if e.is_closed() && lock.is_none() => return Ok(false),
        Some(Err(e)) => return Err(unknown(e)),
        None => return Ok(false),
    }
    // A lock or write the server refused aborted the transaction: the
    // COMMIT after it rolled back.
    if let Some(Err(e)) = lock {
        return if crate::pipe::refused(&e) {
            Ok(false)
        } else {
            Err(unknown(e))
        };
    }
    // How many rows the write changed (0 or 1), as it answered.
    let written = match write {
        Some(Ok(Answer::Rows(rows))) => match rows.first() {
            Some(row) => decode::col::<i64>(row, 0, "written", None).map(|n| n > 0),
            None => Ok(false),
        },
        Some(Ok(Answer::Done)) | None => Ok(false),
        Some(Err(e)) => {
            return if crate::pipe::refused(&e) {
                Ok(false)
            } else {
                Err(unknown(e))
            }
        }
    };
    match (commit, written) {
        // Nothing matched: nothing to commit, whatever the COMMIT answered.
        (_, Ok(false)) => Ok(false),
        (Some(Ok(_)), Ok(true)) => Ok(true),
        (Some(Ok(_)), Err(e)) => Err(CommitFailed::MaybeApplied(e)),
        (Some(Err(e)), _) => Err(unknown(e)),
        (None, _) => Err(CommitFailed::MaybeApplied(StoreError::Io {
            message: "the COMMIT got no answer".into(),
            source: "no answer".into(),
        })),
    }
}
