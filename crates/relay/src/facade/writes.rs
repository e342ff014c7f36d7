//! The calls that write: each an operation run by the writer.

use crate::engine::calls::{AfterFailure, SimpleAction};
use crate::error::Result;
use crate::relay::{first, single};
use crate::request::{Completion, NewJob, NewSchedule, Submitted, Worked};
use crate::{AsyncRelay, Relay};
use relay_core::{JobId, JobStatus, LeaseToken, QueueLimits, Schedule, Timestamp};
use std::time::Duration;

// Named by the calls' docs.
#[cfg(doc)]
use crate::{Error, Options};

facade! {
    /// Marks the job SUCCEEDED, with an optional result; jobs waiting for it
    /// (`depends_on`) are told. The same ack again (same token) succeeds and
    /// changes nothing, so a caller that did not see the answer may retry.
    ///
    /// ```
    /// use relay::{JobState, LeaseRequest, NewJob, Relay};
    ///
    /// let relay = Relay::in_memory()?;
    /// let id = relay.submit(NewJob::new("reports", "build", Vec::new()))?;
    /// let job = relay.lease(LeaseRequest::new(["reports"]))?.remove(0);
    ///
    /// relay.ack(job.id, job.token, Some(br#"{"pages":3}"#.to_vec()))?;
    /// assert_eq!(relay.get(id)?.state(), JobState::Succeeded);
    /// relay.ack(job.id, job.token, None)?; // repeated: Ok, nothing changes
    /// # Ok::<(), relay::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::LeaseLost`]: `token` is not the job's current valid lease
    ///   (it expired, or the job was released and leased again). The job was
    ///   not changed; drop it.
    /// - [`Error::InvalidState`]: the job has finished (DEAD, CANCELLED, or
    ///   SUCCEEDED under another lease) or is WAITING. It was not changed.
    /// - [`Error::NotFound`]: no job has this id; nothing was changed.
    /// - [`Error::InvalidInput`]: `result` is larger than the payload limit;
    ///   nothing was sent.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`],
    ///   [`Error::Corrupt`] and [`Error::Closed`], as for every write (see
    ///   [`Relay`]).
    write fn ack(id: JobId, token: LeaseToken, result: Option<Vec<u8>>) -> Result<()> = |e| e.ack_op(id, token, result)?;

    /// Adds a schedule of periodic jobs, or replaces the one of its name
    /// (which keeps its paused state). Its first tick is the first after
    /// now. Every process on the store with `Options::scheduler` (the
    /// default) runs due schedules, about once a second; each tick
    /// enqueues exactly one job, and ticks missed while no Relay ran
    /// enqueue one job, not one each.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: a bad name, cron expression (field
    ///   `cron`, also for one with no tick in the future), time zone (`tz`),
    ///   interval (`every`) or job template; nothing was changed.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`] and
    ///   [`Error::Closed`], as for every write (see [`Relay`]). A schedule
    ///   of this name whose row does not decode is replaced, not an error.
    write fn add_schedule(schedule: NewSchedule) -> Result<Schedule> = |e| e.add_schedule_op(schedule)?;

    /// Appends a user event (progress, a log line) to the job's event log;
    /// returns its sequence number.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: `kind` is not a valid label, `data` is
    ///   over 4 KiB of JSON, or the job's log already holds 10,000 events;
    ///   nothing was changed.
    /// - [`Error::NotFound`]: no job has this id; nothing was changed.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`],
    ///   [`Error::Corrupt`] and [`Error::Closed`], as for every write (see
    ///   [`Relay`]).
    write fn append_event(id: JobId, kind: &str, data: &serde_json::Value) -> Result<i64> = |e| e.append_event_op(id, kind, data)?;

    /// Cancels a WAITING, READY, SCHEDULED, RETRYING or LEASED job: it becomes CANCELLED. Its lease
    /// holder's next ack, nack or extend fails with [`Error::InvalidState`];
    /// jobs waiting for it (`depends_on`) are cancelled too, unless they run
    /// anyway ([`NewJob::on_dependency_failure`]).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidState`]: the job has already finished; it was not
    ///   changed.
    /// - [`Error::NotFound`]: no job has this id; nothing was changed.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`],
    ///   [`Error::Corrupt`] and [`Error::Closed`], as for every write (see
    ///   [`Relay`]).
    write fn cancel(id: JobId) -> Result<()> = |e| e.action_op(id, SimpleAction::Cancel);

    /// Records one [`Completion`] (an ack, nack or snooze built as a value,
    /// e.g. by code that decides the outcome in one place and reports it in
    /// another); returns the job's new status.
    ///
    /// # Errors
    ///
    /// What [`Relay::ack`], [`Relay::nack`], [`Relay::nack_permanent`] or
    /// [`Relay::snooze`] returns for the same outcome, leaving the job in
    /// the same state.
    write fn complete(completion: Completion) -> Result<JobStatus> = |e| e.complete_op(vec![completion]), then |done| single(done);

    /// Acks, nacks and snoozes many leased jobs in one operation (one trip to
    /// the writer), in the order given. Each completion succeeds or fails on
    /// its own: the inner list holds one result per completion, in order:
    /// the job's new status, or the error that [`Relay::ack`],
    /// [`Relay::nack`] or [`Relay::snooze`] would have returned for it.
    ///
    /// # Errors
    ///
    /// The outer error is for the whole call:
    ///
    /// - [`Error::InvalidInput`]: an ack's result is larger than the payload
    ///   limit; nothing was sent.
    /// - [`Error::Busy`], [`Error::Storage`]: none of the completions was
    ///   applied.
    /// - [`Error::MaybeApplied`], [`Error::Closed`]: the completions that
    ///   would have succeeded may or may not have been applied; read the jobs
    ///   to find out.
    ///
    /// An inner error ([`Error::LeaseLost`], [`Error::InvalidState`],
    /// [`Error::NotFound`], [`Error::Corrupt`]) is that completion's alone: its
    /// job was not changed, and the others were applied.
    write fn complete_batch(batch: Vec<Completion>) -> Result<Vec<Result<JobStatus>>> = |e| e.complete_op(batch);

    /// [`Relay::complete_batch`] answered as a [`Worked`] without jobs: each
    /// completion's result, and for a step record
    /// ([`CompletionOutcome::Step`](crate::CompletionOutcome::Step)) whose
    /// name was recorded already, the record that stands
    /// ([`Worked::earlier`]). What the worker protocol's `POST /v1/work`
    /// runs when it leases nothing.
    ///
    /// # Errors
    ///
    /// As [`Relay::complete_batch`].
    write fn report(batch: Vec<Completion>) -> Result<Worked> = |e| e.report_op(batch);

    /// Makes a completion token for job `id`, held under `token`, open for
    /// `timeout`: a human or a third party completes it once, without an
    /// API token, by presenting its secret ([`Relay::complete_token`],
    /// `POST /v1/tokens/{id}.{secret}/complete`), which wakes the job
    /// waiting for its event ([`CompletionToken::event_key`](crate::CompletionToken::event_key)). A worker's
    /// handler makes one with
    /// [`JobContext::token`](crate::worker::JobContext::token).
    ///
    /// # Errors
    ///
    /// - [`Error::LeaseLost`], [`Error::InvalidState`]: `token` is not the
    ///   job's current lease; nothing was made.
    /// - [`Error::InvalidInput`]: `timeout` is 0 or over ten years.
    /// - As every write (see [`Relay`]).
    write fn create_token(id: JobId, token: LeaseToken, timeout: Duration) -> Result<crate::CompletionToken> = |e| e.create_token_op(id, token, timeout)?;

    /// Completes the completion token `token` (`<id>.<secret>`) with
    /// `payload` (at most 64 KiB): the job waiting for it runs on with the
    /// payload, in this commit. The first completion stands.
    ///
    /// # Errors
    ///
    /// - [`Error::Token`]: no token has this id and secret
    ///   ([`TokenRefusal::Unknown`](crate::TokenRefusal::Unknown)), it was
    ///   completed already (`Used`), it expired (`Expired`), or its job has
    ///   ended (`Closed`); nothing changed.
    /// - [`Error::InvalidInput`]: the payload is over 64 KiB.
    /// - As every write (see [`Relay`]).
    write fn complete_token(token: &str, payload: Vec<u8>) -> Result<crate::Emitted> = |e| e.complete_token_op(token, payload)?;

    /// Removes a job that is not LEASED, with its events. If it had not
    /// finished, jobs waiting for it are cancelled, unless they run anyway
    /// ([`NewJob::on_dependency_failure`]). A job whose row does not decode
    /// can still be deleted: the way to clear a corrupt row.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidState`]: the job is LEASED (cancel it first); it was
    ///   not changed.
    /// - [`Error::NotFound`]: no job has this id; nothing was changed.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`],
    ///   [`Error::Corrupt`] and [`Error::Closed`], as for every write (see
    ///   [`Relay`]).
    write fn delete(id: JobId) -> Result<()> = |e| e.action_op(id, SimpleAction::Delete);

    /// Extends the lease to `lease_for` from now (not from its current
    /// expiry); returns the new expiry.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: `lease_for` is 0 or above 24 h; nothing was
    ///   sent.
    /// - [`Error::LeaseLost`]: `token` is not the job's current valid lease (an
    ///   expired lease cannot be extended). The job was not changed; drop it.
    /// - [`Error::InvalidState`]: the job has finished or is WAITING. It was
    ///   not changed.
    /// - [`Error::NotFound`]: no job has this id; nothing was changed.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`],
    ///   [`Error::Corrupt`] and [`Error::Closed`], as for every write (see
    ///   [`Relay`]).
    write fn extend(id: JobId, token: LeaseToken, lease_for: Duration) -> Result<Timestamp> = |e| e.extend_op(id, token, lease_for)?;

    /// Extends many leases in one operation (a worker's heartbeat), each
    /// `(id, token, lease_for)` to `lease_for` from now. The inner list
    /// holds one result per lease, in order: its new expiry, or the error
    /// [`Relay::extend`] would have returned for it.
    ///
    /// # Errors
    ///
    /// The outer error is for the whole call, as for
    /// [`Relay::complete_batch`].
    write fn extend_batch(leases: Vec<(JobId, LeaseToken, Duration)>) -> Result<Vec<Result<Timestamp>>> = |e| e.extend_batch_op(leases);

    /// Reports a failed attempt. The job runs again after `retry_in` (or the
    /// back-off policy's delay), or becomes DEAD when its attempts are spent.
    /// `error` is kept as the job's last error (cut to 8 KiB). Returns the
    /// job's new status.
    ///
    /// # Errors
    ///
    /// - [`Error::LeaseLost`]: `token` is not the job's current valid lease.
    ///   The job was not changed; drop it.
    /// - [`Error::InvalidState`]: the job has finished or is WAITING. It was
    ///   not changed.
    /// - [`Error::NotFound`]: no job has this id; nothing was changed.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`],
    ///   [`Error::Corrupt`] and [`Error::Closed`], as for every write (see
    ///   [`Relay`]).
    write fn nack(id: JobId, token: LeaseToken, error: &str, retry_in: Option<Duration>) -> Result<JobStatus> = |e| e.nack_op(id, token, error, AfterFailure::Retry(retry_in));

    /// Reports a failure that no retry can fix: the job becomes DEAD now.
    /// Returns its new status.
    ///
    /// # Errors
    ///
    /// As [`Relay::nack`].
    write fn nack_permanent(id: JobId, token: LeaseToken, error: &str) -> Result<JobStatus> = |e| e.nack_op(id, token, error, AfterFailure::Dead);

    /// Pauses `queue`: from the next claim on, in every process on the
    /// store, none of its jobs is leased (a lease that names only paused
    /// queues waits, or returns empty). Submits, acks and everything else
    /// go on; leases already held run to their end. Stored: it outlasts
    /// restarts. Pausing a paused queue changes nothing.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: an invalid queue name; nothing was sent.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`],
    ///   [`Error::Corrupt`] and [`Error::Closed`], as for every write (see
    ///   [`Relay`]).
    write fn pause(queue: &str) -> Result<()> = |e| e.pause_op(queue, true)?;

    /// Pauses a schedule: its ticks enqueue nothing until it is resumed.
    /// Returns the schedule as it is now; pausing a paused one changes nothing.
    ///
    /// # Errors
    ///
    /// - [`Error::ScheduleNotFound`]: no schedule has this name; nothing was
    ///   changed.
    /// - [`Error::Corrupt`]: the schedule's row does not decode (remove it
    ///   and add it again); nothing was changed.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`] and
    ///   [`Error::Closed`], as for every write (see [`Relay`]).
    write fn pause_schedule(name: &str) -> Result<Schedule> = |e| e.pause_schedule_op(name, true);

    /// Reports how far along a leased job is: `fraction` from 0 to 1 and,
    /// if given, what the handler is doing (at most 1,024 characters). The
    /// latest report is kept on the job ([`Job::progress`], with the
    /// attempt that made it) for the dashboard, `relay show` and `get`;
    /// each is also a "progress" event. Only the lease's holder reports.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: a fraction outside 0-1 (or NaN), a
    ///   message over 1,024 characters; nothing was sent.
    /// - [`Error::LeaseLost`], [`Error::InvalidState`], [`Error::NotFound`]:
    ///   as [`Relay::extend`]; the job was not changed.
    ///
    /// [`Job::progress`]: relay_core::Job::progress
    write fn progress(id: JobId, token: LeaseToken, fraction: f64, message: Option<&str>) -> Result<()> = |e| e.progress_op(id, token, fraction, message)?;

    /// Records the output of step `name` of a leased job: a later attempt
    /// of the job (after a crash, a nack, an expired lease, a retry) is
    /// leased with it ([`LeasedJob::steps`]) and returns it without running
    /// the step again. Durable when this returns, as every write. Only the
    /// lease's holder records, and the first record of a name stands:
    /// returns `None` when this one was recorded, or the record of `name`
    /// that was there already (this one changed nothing). A step is
    /// usually recorded for you by a worker's `JobContext::step`.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: a name empty, over 256 characters or
    ///   holding control characters, an output over 1 MiB; nothing was
    ///   sent.
    /// - [`Error::StepBound`]: the job would hold more than 1,000 steps or
    ///   1 MiB of step output; nothing was changed.
    /// - [`Error::LeaseLost`], [`Error::InvalidState`], [`Error::NotFound`]:
    ///   as [`Relay::extend`]; the job was not changed (a worker whose
    ///   lease expired never writes over the next holder's steps).
    ///
    /// [`LeasedJob::steps`]: crate::LeasedJob::steps
    write fn record_step(id: JobId, token: LeaseToken, name: &str, output: Vec<u8>) -> Result<Option<relay_core::Step>> = |e| e.record_step_op(id, token, name, output)?;

    /// Emits event `key` with `payload` (at most 64 KiB; JSON by
    /// convention): every job waiting for the key (`JobContext::wait_event`)
    /// has the payload recorded as its wait's step and is READY, in this
    /// commit; the event is kept 7 days, so a wait that begins later
    /// returns it at once. The first emit of a key stands: a later one
    /// changes nothing and answers `first: false` (emit with a key that
    /// names one occurrence, such as `shipment:4242`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`]: a key empty, over 256 characters or holding
    /// control characters, a payload over 64 KiB; nothing was changed.
    write fn emit(key: &str, payload: Vec<u8>) -> Result<crate::Emitted> = |e| e.emit_op(key, payload)?;

    /// A leased job waits for event `key` until `until`, its outcome
    /// recorded under step `step` (usually called for you by a worker's
    /// `JobContext::wait_event`): READY at once, the step recorded, when
    /// the event was emitted already (its payload) or `until` has come
    /// (timed out); otherwise WAITING, holding no worker, no place in its
    /// queue's limits and no attempt, until an emit of the key wakes it or
    /// `until` (a wait begun earlier under the same step keeps its time).
    /// Returns the job's new status.
    ///
    /// # Errors
    ///
    /// As [`Relay::sleep`], and [`Error::InvalidInput`] for a bad key.
    write fn wait(id: JobId, token: LeaseToken, step: &str, key: &str, until: Timestamp) -> Result<JobStatus> = |e| e.wait_op(id, token, step, key, until)?;

    /// Puts a leased job to sleep until `until`: records step `step` (the
    /// sleep's own record: a later run that calls the same sleep passes it
    /// once its time has come), then the job gives its lease back and is
    /// WAITING, holding no worker, no place in its queue's `max_leased` or
    /// group limits, and no attempt, until `until`, when it is READY in its
    /// priority class (aging counted from then). A step of that name
    /// recorded earlier wins, and the job sleeps until its time. Usually
    /// called for you by a worker's `JobContext::sleep`.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: a bad step name, `until` more than ten
    ///   years off, or a step of that name recorded that is not a sleep;
    ///   nothing was changed.
    /// - [`Error::LeaseLost`], [`Error::InvalidState`], [`Error::NotFound`],
    ///   [`Error::StepBound`]: as [`Relay::record_step`]; nothing was
    ///   changed.
    write fn sleep(id: JobId, token: LeaseToken, step: &str, until: Timestamp) -> Result<JobStatus> = |e| e.sleep_op(id, token, step, until)?;

    /// One pass of the prune: reads the 5,000 jobs after id `after`
    /// (`JobId(0)`: from the table's start) and deletes, with their events,
    /// the finished ones past their retention, at most 1,000. Call it again
    /// from [`Pruned::next`](crate::Pruned::next) until that is `None` to
    /// go through the whole table, a batch at a time (as `relay prune` and
    /// `POST /v1/prune` do, showing progress).
    ///
    /// # Errors
    ///
    /// As [`Relay::prune`].
    write fn prune_from(after: JobId) -> Result<crate::Pruned> = |e| e.prune_op(after);

    /// Keeps `value` under `key` for `keep`, in the store (so every
    /// process on it sees it, and it survives restarts), unless a mark of
    /// `key` that has not expired is there: a mark is written once.
    /// Returns whether this call wrote it. Expired marks are pruned. The
    /// server keeps the dashboard sessions that logged out in them; keys
    /// that start with `idempotency:` are the idempotency keys' own
    /// ([`NewJob::idempotency_key`](crate::NewJob::idempotency_key)).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] (field `key`) for a key that is empty or
    /// over 256 characters; and those of every write (see [`Relay`]).
    write fn put_mark(key: &str, value: &str, keep: std::time::Duration) -> Result<bool> = |e| e.put_mark_op(key, value, keep)?;

    /// Reclaims expired leases now (the engine also does this by itself);
    /// returns how many. Each reclaimed job counts a failed attempt: READY
    /// again, or DEAD when its attempts are spent. Also promotes SCHEDULED
    /// and RETRYING jobs whose time has come to READY (not counted in the
    /// answer). A job whose row does not decode is logged and passed over.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`] and
    /// [`Error::Closed`], as for every write (see [`Relay`]).
    write fn reap_expired() -> Result<usize> = |e| e.reap_op();

    /// Gives the job back untried: READY at once, the attempt not counted.
    ///
    /// # Errors
    ///
    /// As [`Relay::nack`].
    write fn release(id: JobId, token: LeaseToken) -> Result<()> = |e| e.action_op(id, SimpleAction::Release(token));

    /// Removes a schedule (the jobs it enqueued stay). A schedule whose row
    /// does not decode is removed too.
    ///
    /// # Errors
    ///
    /// - [`Error::ScheduleNotFound`]: no schedule has this name; nothing was
    ///   changed.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`] and
    ///   [`Error::Closed`], as for every write (see [`Relay`]).
    write fn remove_schedule(name: &str) -> Result<()> = |e| e.remove_schedule_op(name);

    /// Resumes a paused queue: its jobs are leased again, and lessees
    /// waiting for it are woken. Resuming a queue that is not paused
    /// changes nothing.
    ///
    /// # Errors
    ///
    /// As [`Relay::pause`].
    write fn resume(queue: &str) -> Result<()> = |e| e.pause_op(queue, false)?;

    /// Resumes a paused schedule from its next tick after now (ticks
    /// missed while paused enqueue nothing). Returns the schedule as it is now.
    ///
    /// # Errors
    ///
    /// As [`Relay::pause_schedule`]; and [`Error::InvalidInput`] (field
    /// `cron`) for a schedule with no tick left in the future: it stays
    /// paused.
    write fn resume_schedule(name: &str) -> Result<Schedule> = |e| e.pause_schedule_op(name, false);

    /// Runs a DEAD or CANCELLED job again: READY now, with a fresh attempt
    /// budget.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidState`]: the job is not DEAD or CANCELLED; it was not
    ///   changed.
    /// - [`Error::Conflict`]: another unfinished job holds its unique key; the
    ///   job was not changed.
    /// - [`Error::NotFound`]: no job has this id; nothing was changed.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`],
    ///   [`Error::Corrupt`] and [`Error::Closed`], as for every write (see
    ///   [`Relay`]).
    write fn retry(id: JobId) -> Result<()> = |e| e.action_op(id, SimpleAction::Retry);

    /// [`Relay::retry`], forgetting the job's recorded steps (and any wait
    /// of its last run): every step runs again, as in a job never run.
    /// `relay retry ID --reset-steps`, `POST /v1/jobs/{id}/retry?reset_steps=true`.
    ///
    /// # Errors
    ///
    /// As [`Relay::retry`].
    write fn retry_from_start(id: JobId) -> Result<()> = |e| e.retry_from_start_op(id);

    /// Enqueues the jobs of every due schedule now (the engine also does
    /// this by itself about once a second, with `Options::scheduler`);
    /// returns how many. A schedule that cannot run (a corrupt row) is
    /// logged and passed over.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`] and
    /// [`Error::Closed`], as for every write (see [`Relay`]).
    write fn run_schedules() -> Result<usize> = |e| e.run_schedules_op();

    /// Sets `queue`'s limits, replacing the ones it had
    /// (`QueueLimits::default()` lifts them): at most `max_leased` of its
    /// jobs LEASED at once, and at most `rate.limit` leases per
    /// `rate.per`, all processes and nodes on the store together. Leases
    /// already held are not taken back. A claim that names a queue at its
    /// limit takes from its other queues.
    ///
    /// ```
    /// use relay::{QueueLimits, RateLimit, Relay};
    /// use std::time::Duration;
    /// let relay = Relay::in_memory()?;
    /// relay.set_queue_limits("smtp", QueueLimits {
    ///     max_leased: Some(5),
    ///     max_leased_per_group: None, // or at most N of one group (NewJob::group)
    ///     rate: Some(RateLimit { limit: 100, per: Duration::from_secs(1) }),
    ///     poison_after: None, // the engine's default: 3 lease expiries
    /// })?;
    /// assert_eq!(relay.stats()?.queues["smtp"].limits.max_leased, Some(5));
    /// # Ok::<(), relay::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: an invalid queue name, or a limit of 0
    ///   (pause the queue instead), above 1,000,000, or a rate period outside
    ///   1 ms-24 h; nothing was sent.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`],
    ///   [`Error::Corrupt`] and [`Error::Closed`], as for every write (see
    ///   [`Relay`]).
    write fn set_queue_limits(queue: &str, limits: QueueLimits) -> Result<()> = |e| e.limits_op(queue, limits)?;

    /// Sets how long `queue` keeps its finished jobs, by final state; a
    /// state left `None` follows [`Options::retention`]. Replaces the
    /// queue's previous retention whole. Read back with
    /// [`Relay::queue_stats`] (`retention`); the engine's prune follows it
    /// from its next pass, for jobs that finished before too.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: an invalid queue name, or a retention
    ///   over 10 years (short of [`Keep::Forever`](crate::Keep::Forever));
    ///   nothing was sent.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`],
    ///   [`Error::Corrupt`] and [`Error::Closed`], as for every write (see
    ///   [`Relay`]).
    write fn set_retention(queue: &str, retention: crate::Retention) -> Result<()> = |e| e.retention_op(queue, retention)?;

    /// Puts the job back for later: READY again once `delay` has passed,
    /// the attempt not counted (it was not a failure), and a "snoozed"
    /// event in its log. For a handler whose job cannot run yet (a
    /// resource still being prepared, an upstream rate limit).
    ///
    /// Returns when the job is due again.
    ///
    /// # Errors
    ///
    /// As [`Relay::nack`].
    write fn snooze(id: JobId, token: LeaseToken, delay: Duration) -> Result<Timestamp> = |e| e.snooze_op(id, token, delay);

    /// Submits one job; returns its id (or, for a `unique_key` already held
    /// by an unfinished job, that job's id).
    ///
    /// ```
    /// use relay::{NewJob, Relay};
    ///
    /// let relay = Relay::in_memory()?;
    /// let welcome = || NewJob::new("emails", "welcome", br#"{"to":"ada"}"#.to_vec()).unique_key("welcome:ada");
    /// let id = relay.submit(welcome())?;
    /// // The key is held by an unfinished job: its id again, nothing new.
    /// assert_eq!(relay.submit(welcome())?, id);
    /// # Ok::<(), relay::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: the job breaks a limit (queue, kind, payload
    ///   size, priority, max attempts, tags...); nothing was sent.
    /// - [`Error::DependencyNotFound`]: an id in `depends_on` names no job;
    ///   nothing was written.
    /// - [`Error::MaybeApplied`]: the job may or may not exist. Submitting it
    ///   again with the same `unique_key` cannot create it twice.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::Corrupt`] and
    ///   [`Error::Closed`], as for every write (see [`Relay`]).
    write fn submit(job: NewJob) -> Result<JobId> = |e| e.submit_op(vec![job])?, then |done| first(done).map(|s| s.id);

    /// Submits jobs atomically: all are committed, or none. Returns their ids
    /// in the order given (for a `unique_key` already held, the holder's).
    ///
    /// # Errors
    ///
    /// As [`Relay::submit`], for the batch as a whole: after any error but
    /// [`Error::MaybeApplied`] none of the jobs was written; after
    /// [`Error::MaybeApplied`], all of them or none may exist.
    write fn submit_batch(jobs: Vec<NewJob>) -> Result<Vec<JobId>> = |e| e.submit_op(jobs)?, then |done| Ok(done.into_iter().map(|s| s.id).collect());

    /// [`Relay::submit_batch`], saying of each job whether it was found
    /// rather than written ([`Submitted::existing`]: its unique key held,
    /// or its idempotency key carried by an earlier submit).
    ///
    /// # Errors
    ///
    /// As [`Relay::submit_batch`].
    write fn submit_batch_outcome(jobs: Vec<NewJob>) -> Result<Vec<Submitted>> = |e| e.submit_op(jobs)?;

    /// [`Relay::submit`], saying whether the id is of a job it found: an
    /// unfinished job already holding the job's `unique_key` (nothing new
    /// was written).
    ///
    /// # Errors
    ///
    /// As [`Relay::submit`].
    write fn submit_outcome(job: NewJob) -> Result<Submitted> = |e| e.submit_op(vec![job])?, then |done| first(done);

    /// Records a worker's heartbeat: registers it the first time, and
    /// says it is alive and what it runs every time after. The worker
    /// runtimes send one every `beat_every` (5 s by default); a worker
    /// whose heartbeats stop is gone three of them later (and a second),
    /// and the leases it held show as orphaned until they expire. Records
    /// not seen for an hour are deleted.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: a field the store would not keep (see
    ///   [`WorkerBeat::validate`](crate::WorkerBeat::validate)); nothing
    ///   was sent.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`] and
    ///   [`Error::Closed`], as for every write (see [`Relay`]).
    write fn worker_beat(beat: &crate::WorkerBeat) -> Result<()> = |e| e.worker_beat_op(beat, false, crate::WorkerClaim::Local)?;

    /// A heartbeat (or, with `stopped`, the last one) of a worker outside
    /// this process, as the server's `PUT /v1/workers/{id}` sends it: a
    /// record is written only by the worker that made it. Written when the
    /// id has no record (or one forgotten, an hour unseen), or when `claim`
    /// presents the hash of the secret the record was made with; a record
    /// made by [`Relay::worker_beat`] (in-process) is written by no remote
    /// claim.
    ///
    /// # Errors
    ///
    /// [`Error::WorkerTaken`] when the record is another's (nothing
    /// written); else as [`Relay::worker_beat`].
    write fn worker_beat_as(beat: &crate::WorkerBeat, stopped: bool, claim: crate::WorkerClaim) -> Result<()> = |e| e.worker_beat_op(beat, stopped, claim)?;

    /// A worker's last heartbeat: it stopped, with nothing running.
    ///
    /// # Errors
    ///
    /// As [`Relay::worker_beat`].
    write fn worker_stopped(beat: &crate::WorkerBeat) -> Result<()> = |e| e.worker_beat_op(beat, true, crate::WorkerClaim::Local)?;
}
