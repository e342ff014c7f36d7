//! The handles users hold: [`Relay`] (blocking) and [`AsyncRelay`] (async).
//! Both are cheap to clone and share one engine; the engine closes (after
//! committing everything already sent) when the last handle is dropped.

use crate::calls::SimpleAction;
use crate::engine::metrics::Metrics;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::request::{Completion, LeaseBatch, LeaseRequest, LeasedJob, NewJob, NewSchedule, Submitted};
use relay_core::{Job, JobId, JobStatus, LeaseToken, QueueLimits, Schedule, Timestamp};
use relay_sqlite::{Settings, SqliteBackend};
use relay_store::{Backend, DeadGroup, Event, JobFilter, QueueStats, Throughput};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Per-queue counts, as returned by [`Relay::stats`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    pub queues: BTreeMap<String, QueueStats>,
}

/// A durable job queue. Every method that changes state returns only after
/// its change is committed to disk.
#[derive(Clone)]
pub struct Relay {
    engine: Arc<Engine>,
}

/// The async face of a [`Relay`]: the same calls, as futures. Waiting for a
/// commit or a job never blocks the executor's thread; reads run on the
/// calling task (they are short).
///
/// The futures need a Tokio runtime with its time driver enabled
/// (`#[tokio::main]`, or `Builder::enable_time`): a `lease` that waits uses
/// Tokio's timers, and panics under another executor ("there is no reactor
/// running"). Calls that do not wait work on any executor.
#[derive(Clone)]
pub struct AsyncRelay {
    engine: Arc<Engine>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("store", &self.engine.backend.describe())
            .finish()
    }
}

impl std::fmt::Debug for AsyncRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncRelay")
            .field("store", &self.engine.backend.describe())
            .finish()
    }
}

// The handles are shared across threads and tasks: keep them so.
const _: () = {
    const fn shared<T: Send + Sync + Clone + 'static>() {}
    shared::<Relay>();
    shared::<AsyncRelay>();
};

impl Relay {
    /// Opens (creating if needed) the database file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, Options::default())
    }

    pub fn open_with(path: impl AsRef<Path>, options: Options) -> Result<Self> {
        let backend = SqliteBackend::file(path.as_ref()).with_settings(Settings {
            busy_timeout: options.busy_timeout,
            split_commit: options.split_commit,
            watch_interval: options.watch_interval,
            ..Settings::default()
        });
        Self::with_backend(Arc::new(backend), options)
    }

    /// Opens `target`: a `postgres://` (or `postgresql://`) URL, or the path
    /// of an SQLite file.
    pub fn connect(target: &str, options: Options) -> Result<Self> {
        if !crate::is_postgres_url(target) {
            return Self::open_with(target, options);
        }
        #[cfg(feature = "postgres")]
        {
            Self::with_backend(Arc::new(relay_postgres::PgBackend::new(target)), options)
        }
        #[cfg(not(feature = "postgres"))]
        {
            let _ = options;
            Err(Error::Open(Arc::new(relay_store::StoreError::Io {
                message:
                    "this build of relay has no PostgreSQL store: enable the `postgres` feature of the relay crate"
                        .into(),
                source: "feature `postgres` off".into(),
            })))
        }
    }

    /// A private database in memory: fast, not durable. For tests.
    pub fn in_memory() -> Result<Self> {
        Self::in_memory_with(Options::default())
    }

    pub fn in_memory_with(options: Options) -> Result<Self> {
        Self::with_backend(Arc::new(SqliteBackend::memory()), options)
    }

    /// Runs the engine on any store.
    pub fn with_backend(backend: Arc<dyn Backend>, options: Options) -> Result<Self> {
        Ok(Self {
            engine: Arc::new(Engine::start(backend, options)?),
        })
    }

    /// The async face of this Relay (same engine).
    pub fn to_async(&self) -> AsyncRelay {
        AsyncRelay {
            engine: Arc::clone(&self.engine),
        }
    }

    pub fn options(&self) -> &Options {
        &self.engine.options
    }

    /// Submits one job; returns its id (or, for a `unique_key` already held
    /// by an unfinished job, that job's id).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a job that breaks a limit, and
    /// [`Error::DependencyNotFound`] for a `depends_on` id that is not a
    /// job: nothing is written.
    pub fn submit(&self, job: NewJob) -> Result<JobId> {
        self.submit_outcome(job).map(|s| s.id)
    }

    /// [`Relay::submit`], saying whether the id is of a job it found: an
    /// unfinished job already holding the job's `unique_key` (nothing new
    /// was written).
    ///
    /// # Errors
    ///
    /// As [`Relay::submit`].
    pub fn submit_outcome(&self, job: NewJob) -> Result<Submitted> {
        first(self.engine.run(self.engine.submit_op(vec![job])?)?)
    }

    /// Submits jobs atomically: all are committed, or none.
    pub fn submit_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>> {
        let done = self.engine.run(self.engine.submit_op(jobs)?)?;
        Ok(done.into_iter().map(|s| s.id).collect())
    }

    /// Submits a job inside your own transaction on this Relay's SQLite
    /// file (transactional enqueue): the job exists if and only if that
    /// transaction commits, so "insert the order, then enqueue its email"
    /// can neither lose the email nor send one for an order that was rolled
    /// back. Everything [`Relay::submit`] does applies (limits, unique
    /// keys, dependencies, the `submitted` event).
    ///
    /// `tx` is a [`rusqlite::Connection`] of your own, on the same file,
    /// with a transaction open (a `rusqlite::Transaction` derefs to one;
    /// begin it with `TransactionBehavior::Immediate`, or a commit by
    /// another process between your first read and this write fails your
    /// transaction with `Busy`). Its commit is what makes the job durable,
    /// so the connection must run with `PRAGMA synchronous = FULL` (SQLite's
    /// default) or `EXTRA`.
    ///
    /// Waiting lessees of this Relay (and of Relays in other processes)
    /// are woken within [`Options::watch_interval`] of your commit: a
    /// thread of each Relay watches the file's `PRAGMA data_version`.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("app.db");
    /// use relay::rusqlite::{Connection, TransactionBehavior};
    /// use relay::{NewJob, Relay};
    ///
    /// let relay = Relay::open(&path)?;
    /// let mut db = Connection::open(&path)?; // your application's own connection
    /// db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)", [])?;
    ///
    /// let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
    /// tx.execute("INSERT INTO orders (item) VALUES ('tea')", [])?;
    /// let job = relay.submit_in(&tx, NewJob::new("emails", "confirm", br#"{"order":1}"#.to_vec()))?;
    /// tx.commit()?; // the order and its job, or neither
    ///
    /// assert_eq!(relay.get(job.id)?.state(), relay::JobState::Ready);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// Those of [`Relay::submit`]; and [`Error::InvalidInput`] (field
    /// `transaction`) when `tx` has no transaction open, is on another file
    /// or in memory, or runs with `synchronous` below `FULL`. After an error
    /// nothing of this call is in your transaction; the transaction itself
    /// stays open, for you to commit or roll back. [`Error::Storage`] when
    /// this process saw the file's fsync fail (the Relay is stopped).
    pub fn submit_in(&self, tx: &rusqlite::Connection, job: NewJob) -> Result<Submitted> {
        first(self.submit_batch_in(tx, vec![job])?)
    }

    /// [`Relay::submit_in`] for several jobs: all are in your transaction,
    /// or none.
    ///
    /// # Errors
    ///
    /// As [`Relay::submit_in`].
    pub fn submit_batch_in(&self, tx: &rusqlite::Connection, jobs: Vec<NewJob>) -> Result<Vec<Submitted>> {
        self.engine.submit_in(tx, jobs)
    }

    /// Submits a job inside your own transaction on this Relay's
    /// PostgreSQL database (transactional enqueue), with the synchronous
    /// `postgres` crate ([`relay::postgres`](crate::postgres), re-exported):
    /// the job and its `submitted` event exist if and only if `tx` commits,
    /// and lessees of every Relay process are woken at that commit
    /// (NOTIFY). It runs `relay_submit(...)`, the SQL function any language
    /// can call (README, "relay_submit under PostgreSQL"). Returns the
    /// job's id, or that of the unfinished job holding its unique key.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a job that breaks a limit, for a job
    /// with `depends_on` or `tags` (submit it with [`Relay::submit`] after
    /// your commit), and (field `transaction`) when
    /// this Relay is on an SQLite file. Nothing is written then, and `tx`
    /// is untouched. [`Error::Storage`] for a lost connection or a
    /// database without Relay's schema; as after any error PostgreSQL has
    /// then aborted `tx`.
    #[cfg(feature = "postgres")]
    pub fn submit_in_pg(&self, tx: &mut impl relay_postgres::postgres::GenericClient, job: NewJob) -> Result<JobId> {
        let (job, delay_ms) = self.engine.for_pg(job)?;
        let id = relay_postgres::submit_in_blocking(tx, &crate::within::pg_args(&job, delay_ms))
            .map_err(crate::within::from_within)?;
        Ok(JobId(id))
    }

    /// Leases up to `max` ready jobs, waiting up to `wait` when none is.
    pub fn lease(&self, req: LeaseRequest) -> Result<Vec<LeasedJob>> {
        let req = req.validate(&self.engine.options.limits)?;
        let deadline = Instant::now() + req.wait;
        loop {
            let seen = self.engine.deliver.signal.generation();
            let batch = self.engine.run(self.engine.lease_op(req.clone()))?;
            match self.engine.wait_until(&batch, deadline) {
                None => return Ok(batch.jobs),
                Some(until) => self.engine.deliver.signal.wait(seen, until),
            }
        }
    }

    /// Marks the job SUCCEEDED, with an optional result.
    pub fn ack(&self, id: JobId, token: LeaseToken, result: Option<Vec<u8>>) -> Result<()> {
        self.engine.run(self.engine.ack_op(id, token, result)?)
    }

    /// Reports a failed attempt. The job runs again after `retry_in` (or the
    /// back-off policy's delay), or becomes DEAD when its attempts are spent.
    /// Returns the job's new status.
    pub fn nack(&self, id: JobId, token: LeaseToken, error: &str, retry_in: Option<Duration>) -> Result<JobStatus> {
        self.engine.run(self.engine.nack_op(id, token, error, retry_in, false))
    }

    /// Reports a failure that no retry can fix: the job becomes DEAD now.
    pub fn nack_permanent(&self, id: JobId, token: LeaseToken, error: &str) -> Result<JobStatus> {
        self.engine.run(self.engine.nack_op(id, token, error, None, true))
    }

    /// Acks and nacks many leased jobs in one operation (one trip to the
    /// writer). Each completion succeeds or fails on its own; the outer error
    /// is for the whole call (closed, storage).
    pub fn complete_batch(&self, batch: Vec<Completion>) -> Result<Vec<Result<JobStatus>>> {
        self.engine.run(self.engine.complete_op(batch)?)
    }

    /// Extends the lease to `lease_for` from now; returns the new expiry.
    pub fn extend(&self, id: JobId, token: LeaseToken, lease_for: Duration) -> Result<Timestamp> {
        self.engine.run(self.engine.extend_op(id, token, lease_for)?)
    }

    /// Gives the job back untried: READY at once, the attempt not counted.
    pub fn release(&self, id: JobId, token: LeaseToken) -> Result<()> {
        self.engine.run(self.engine.action_op(id, SimpleAction::Release(token)))
    }

    /// Puts the job back for later: READY again once `delay` has passed,
    /// the attempt not counted (it was not a failure), and a "snoozed"
    /// event in its log. For a handler whose job cannot run yet (a
    /// resource still being prepared, an upstream rate limit).
    ///
    /// # Errors
    ///
    /// [`Error::LeaseLost`] when `token` is not the job's current valid
    /// lease, [`Error::NotFound`] for an unknown job; nothing changes.
    ///
    /// Returns when the job is due again.
    pub fn snooze(&self, id: JobId, token: LeaseToken, delay: Duration) -> Result<Timestamp> {
        self.engine.run(self.engine.snooze_op(id, token, delay))
    }

    /// Pauses `queue`: from the next claim on, in every process on the
    /// store, none of its jobs is leased (a lease that names only paused
    /// queues waits, or returns empty). Submits, acks and everything else
    /// go on; leases already held run to their end. Stored: it outlasts
    /// restarts. Pausing a paused queue changes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for an invalid queue name; nothing changes.
    pub fn pause(&self, queue: &str) -> Result<()> {
        self.engine.run(self.engine.pause_op(queue, true)?)
    }

    /// Resumes a paused queue: its jobs are leased again, and lessees
    /// waiting for it are woken. Resuming a queue that is not paused
    /// changes nothing.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for an invalid queue name; nothing changes.
    pub fn resume(&self, queue: &str) -> Result<()> {
        self.engine.run(self.engine.pause_op(queue, false)?)
    }

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
    ///     rate: Some(RateLimit { limit: 100, per: Duration::from_secs(1) }),
    /// })?;
    /// assert_eq!(relay.stats()?.queues["smtp"].limits.max_leased, Some(5));
    /// # Ok::<(), relay::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for an invalid queue name or a limit of 0
    /// (pause the queue instead), above 1,000,000, or a rate period outside
    /// 1 ms-24 h; nothing changes.
    pub fn set_queue_limits(&self, queue: &str, limits: QueueLimits) -> Result<()> {
        self.engine.run(self.engine.limits_op(queue, limits)?)
    }

    /// Adds a schedule of periodic jobs, or replaces the one of its name
    /// (which keeps its paused state). Its first tick is the first after
    /// now. Every process on the store with `Options::scheduler` (the
    /// default) runs due schedules, about once a second; each tick
    /// enqueues exactly one job, and ticks missed while no Relay ran
    /// enqueue one job, not one each.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad name, cron expression (field
    /// `cron`), time zone (`tz`), interval (`every`) or job template;
    /// nothing changes.
    pub fn add_schedule(&self, schedule: NewSchedule) -> Result<Schedule> {
        self.engine.run(self.engine.add_schedule_op(schedule)?)
    }

    /// Removes a schedule (the jobs it enqueued stay).
    ///
    /// # Errors
    ///
    /// [`Error::ScheduleNotFound`]; nothing changes.
    pub fn remove_schedule(&self, name: &str) -> Result<()> {
        self.engine.run(self.engine.remove_schedule_op(name))
    }

    /// Pauses a schedule: its ticks enqueue nothing until it is resumed.
    ///
    /// # Errors
    ///
    /// [`Error::ScheduleNotFound`]; nothing changes.
    pub fn pause_schedule(&self, name: &str) -> Result<Schedule> {
        self.engine.run(self.engine.pause_schedule_op(name, true))
    }

    /// Resumes a paused schedule from its next tick after now (ticks
    /// missed while paused enqueue nothing).
    ///
    /// # Errors
    ///
    /// [`Error::ScheduleNotFound`]; nothing changes.
    pub fn resume_schedule(&self, name: &str) -> Result<Schedule> {
        self.engine.run(self.engine.pause_schedule_op(name, false))
    }

    /// Every schedule, by name, with its next and latest tick.
    pub fn schedules(&self) -> Result<Vec<Schedule>> {
        self.engine.readers.with(|r| r.schedules())
    }

    /// Enqueues the jobs of every due schedule now (the engine also does
    /// this by itself about once a second, with `Options::scheduler`);
    /// returns how many.
    pub fn run_schedules(&self) -> Result<usize> {
        self.engine.run(self.engine.run_schedules_op())
    }

    /// Cancels a READY or LEASED job (its lease holder gets `LeaseLost`).
    pub fn cancel(&self, id: JobId) -> Result<()> {
        self.engine.run(self.engine.action_op(id, SimpleAction::Cancel))
    }

    /// Runs a DEAD or CANCELLED job again, with a fresh attempt budget.
    pub fn retry(&self, id: JobId) -> Result<()> {
        self.engine.run(self.engine.action_op(id, SimpleAction::Retry))
    }

    /// Removes a job that is not LEASED, with its events.
    pub fn delete(&self, id: JobId) -> Result<()> {
        self.engine.run(self.engine.action_op(id, SimpleAction::Delete))
    }

    /// Appends a user event (progress, a log line) to the job's event log;
    /// returns its sequence number.
    pub fn append_event(&self, id: JobId, kind: &str, data: &serde_json::Value) -> Result<i64> {
        self.engine.run(self.engine.append_event_op(id, kind, data)?)
    }

    /// Deletes up to 1000 finished jobs that finished more than `age` ago,
    /// with their events; returns how many. The engine does this by itself
    /// with `Options::retention`; call it again while it returns 1000.
    pub fn prune(&self, age: Duration) -> Result<u64> {
        self.engine.run(self.engine.prune_op(age))
    }

    /// Reclaims expired leases now (the engine also does this by itself).
    pub fn reap_expired(&self) -> Result<usize> {
        self.engine.run(self.engine.reap_op())
    }

    pub fn get(&self, id: JobId) -> Result<Job> {
        self.engine.get(id)
    }

    /// The job's event log, oldest first.
    pub fn events(&self, id: JobId) -> Result<Vec<Event>> {
        self.engine.events(id)
    }

    /// Jobs matching `filter`, newest first, `filter.limit` of them; the
    /// next page is `before` the last one's id.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a filter that breaks a limit (a bad queue
    /// name, a limit of 0, `since` after `until`...).
    pub fn list(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        crate::search::check_filter(filter)?;
        self.engine.readers.with(|r| r.job_list(filter))
    }

    /// Retries every job `filter` matches that can be retried (DEAD or
    /// CANCELLED; the rest are passed over), [`BULK_CHUNK`](crate::BULK_CHUNK) jobs per
    /// transaction so that other callers go on meanwhile; returns how many
    /// it retried. The filter's `limit` does not apply (every match is
    /// taken); its `before` says where to start.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad filter (nothing done). Any other
    /// error stops the work where it is: the chunks before it are done.
    pub fn retry_matching(&self, filter: &JobFilter) -> Result<u64> {
        self.engine.bulk(filter, crate::search::Bulk::Retry)
    }

    /// [`Relay::retry_matching`] for cancel: every READY, WAITING or LEASED
    /// job `filter` matches is CANCELLED (a worker holding one loses its
    /// lease).
    ///
    /// # Errors
    ///
    /// As [`Relay::retry_matching`].
    pub fn cancel_matching(&self, filter: &JobFilter) -> Result<u64> {
        self.engine.bulk(filter, crate::search::Bulk::Cancel)
    }

    /// [`Relay::retry_matching`] for delete: every job `filter` matches that
    /// is not LEASED is deleted, with its events.
    ///
    /// # Errors
    ///
    /// As [`Relay::retry_matching`].
    pub fn delete_matching(&self, filter: &JobFilter) -> Result<u64> {
        self.engine.bulk(filter, crate::search::Bulk::Delete)
    }

    /// DEAD jobs grouped by queue, kind and the first line of their error,
    /// the largest groups first, at most `limit` (1-1000) groups. Made of
    /// the newest [`DEAD_GROUP_WINDOW`](crate::DEAD_GROUP_WINDOW) DEAD jobs
    /// (a bounded read however many there are; a group's count is of
    /// those, and `stats` counts them all). To retry
    /// a group, filter on its queue and kind, `state: Dead`, and
    /// `error_contains` its error (a substring match: an error whose first
    /// line merely contains it is retried too; an empty error, or one past
    /// 256 characters, cannot be named this way).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a limit outside 1-1000.
    pub fn dead_groups(&self, limit: u32) -> Result<Vec<DeadGroup>> {
        crate::search::check_limit(limit)?;
        self.engine.readers.with(|r| r.job_dead_groups(limit))
    }

    pub fn stats(&self) -> Result<Stats> {
        self.engine.stats()
    }

    /// Jobs submitted, succeeded, failed (attempts) and dead per queue and
    /// minute, from the minute of `since` on, oldest first: the history
    /// the dashboard charts. Kept by the store with each batch (so it
    /// counts every process on the store, and survives restarts) for two
    /// days.
    ///
    /// # Errors
    ///
    /// [`Error::Storage`] when the store cannot be read.
    pub fn throughput(&self, since: Timestamp) -> Result<Vec<Throughput>> {
        self.engine.readers.with(|r| r.throughput(since))
    }

    /// Where the store is and what an answered change survives.
    pub fn store_info(&self) -> StoreInfo {
        self.engine.store_info()
    }

    /// The writer's counters: commits, operations, largest batch.
    /// For tests of batching: holds the writers until the guard is dropped,
    /// so that operations sent meanwhile are applied, in the order they
    /// were sent, as one batch when the store runs one writer (several
    /// writers share them out; `None` for a Relay that is closing).
    #[doc(hidden)]
    pub fn hold_writer(&self) -> Option<crate::engine::WriterHold> {
        self.engine.hold_writer()
    }

    pub fn metrics(&self) -> Metrics {
        self.engine.deliver.counters.snapshot()
    }
}

impl AsyncRelay {
    /// [`Relay::submit_in_pg`] with tokio-postgres
    /// ([`relay::tokio_postgres`](crate::tokio_postgres), re-exported):
    /// `tx` is a `tokio_postgres::Transaction` (or a client inside `BEGIN`).
    ///
    /// # Errors
    ///
    /// As [`Relay::submit_in_pg`].
    #[cfg(feature = "postgres")]
    pub async fn submit_in_pg(
        &self,
        tx: &impl relay_postgres::tokio_postgres::GenericClient,
        job: NewJob,
    ) -> Result<JobId> {
        let (job, delay_ms) = self.engine.for_pg(job)?;
        let id = relay_postgres::submit_in(tx, &crate::within::pg_args(&job, delay_ms))
            .await
            .map_err(crate::within::from_within)?;
        Ok(JobId(id))
    }

    pub async fn submit(&self, job: NewJob) -> Result<JobId> {
        self.submit_outcome(job).await.map(|s| s.id)
    }

    /// [`Relay::submit_outcome`], as a future.
    pub async fn submit_outcome(&self, job: NewJob) -> Result<Submitted> {
        first(self.engine.run_async(self.engine.submit_op(vec![job])?).await?)
    }

    pub async fn submit_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>> {
        let done = self.engine.run_async(self.engine.submit_op(jobs)?).await?;
        Ok(done.into_iter().map(|s| s.id).collect())
    }

    pub async fn lease(&self, req: LeaseRequest) -> Result<Vec<LeasedJob>> {
        self.lease_until(req, std::future::pending::<()>()).await
    }

    /// `lease`, giving up its wait (never a claim in flight, so no job is
    /// lost) as soon as `stop` completes.
    pub async fn lease_until(&self, req: LeaseRequest, stop: impl std::future::Future) -> Result<Vec<LeasedJob>> {
        let req = req.validate(&self.engine.options.limits)?;
        let deadline = Instant::now() + req.wait;
        tokio::pin!(stop);
        loop {
            let seen = self.engine.deliver.signal.generation();
            let batch = self.engine.run_async(self.engine.lease_op(req.clone())).await?;
            match self.engine.wait_until(&batch, deadline) {
                None => return Ok(batch.jobs),
                Some(until) => tokio::select! {
                    () = self.engine.deliver.signal.wait_async(seen, until) => {}
                    _ = &mut stop => return Ok(Vec::new()),
                },
            }
        }
    }

    pub async fn ack(&self, id: JobId, token: LeaseToken, result: Option<Vec<u8>>) -> Result<()> {
        self.engine.run_async(self.engine.ack_op(id, token, result)?).await
    }

    pub async fn nack(
        &self,
        id: JobId,
        token: LeaseToken,
        error: &str,
        retry_in: Option<Duration>,
    ) -> Result<JobStatus> {
        self.engine
            .run_async(self.engine.nack_op(id, token, error, retry_in, false))
            .await
    }

    pub async fn nack_permanent(&self, id: JobId, token: LeaseToken, error: &str) -> Result<JobStatus> {
        self.engine
            .run_async(self.engine.nack_op(id, token, error, None, true))
            .await
    }

    pub async fn complete_batch(&self, batch: Vec<Completion>) -> Result<Vec<Result<JobStatus>>> {
        self.engine.run_async(self.engine.complete_op(batch)?).await
    }

    pub async fn extend(&self, id: JobId, token: LeaseToken, lease_for: Duration) -> Result<Timestamp> {
        self.engine
            .run_async(self.engine.extend_op(id, token, lease_for)?)
            .await
    }

    pub async fn release(&self, id: JobId, token: LeaseToken) -> Result<()> {
        self.engine
            .run_async(self.engine.action_op(id, SimpleAction::Release(token)))
            .await
    }

    /// [`Relay::snooze`].
    pub async fn snooze(&self, id: JobId, token: LeaseToken, delay: Duration) -> Result<Timestamp> {
        self.engine.run_async(self.engine.snooze_op(id, token, delay)).await
    }

    /// [`Relay::pause`].
    pub async fn pause(&self, queue: &str) -> Result<()> {
        self.engine.run_async(self.engine.pause_op(queue, true)?).await
    }

    /// [`Relay::resume`].
    pub async fn resume(&self, queue: &str) -> Result<()> {
        self.engine.run_async(self.engine.pause_op(queue, false)?).await
    }

    /// [`Relay::set_queue_limits`].
    pub async fn set_queue_limits(&self, queue: &str, limits: QueueLimits) -> Result<()> {
        self.engine.run_async(self.engine.limits_op(queue, limits)?).await
    }

    /// [`Relay::add_schedule`].
    pub async fn add_schedule(&self, schedule: NewSchedule) -> Result<Schedule> {
        self.engine.run_async(self.engine.add_schedule_op(schedule)?).await
    }

    /// [`Relay::remove_schedule`].
    pub async fn remove_schedule(&self, name: &str) -> Result<()> {
        self.engine.run_async(self.engine.remove_schedule_op(name)).await
    }

    /// [`Relay::pause_schedule`].
    pub async fn pause_schedule(&self, name: &str) -> Result<Schedule> {
        self.engine.run_async(self.engine.pause_schedule_op(name, true)).await
    }

    /// [`Relay::resume_schedule`].
    pub async fn resume_schedule(&self, name: &str) -> Result<Schedule> {
        self.engine.run_async(self.engine.pause_schedule_op(name, false)).await
    }

    /// [`Relay::schedules`].
    pub async fn schedules(&self) -> Result<Vec<Schedule>> {
        self.read(|e| e.readers.with(|r| r.schedules())).await
    }

    /// [`Relay::run_schedules`].
    pub async fn run_schedules(&self) -> Result<usize> {
        self.engine.run_async(self.engine.run_schedules_op()).await
    }

    pub async fn cancel(&self, id: JobId) -> Result<()> {
        self.engine
            .run_async(self.engine.action_op(id, SimpleAction::Cancel))
            .await
    }

    pub async fn retry(&self, id: JobId) -> Result<()> {
        self.engine
            .run_async(self.engine.action_op(id, SimpleAction::Retry))
            .await
    }

    pub async fn delete(&self, id: JobId) -> Result<()> {
        self.engine
            .run_async(self.engine.action_op(id, SimpleAction::Delete))
            .await
    }

    pub async fn append_event(&self, id: JobId, kind: &str, data: &serde_json::Value) -> Result<i64> {
        self.engine
            .run_async(self.engine.append_event_op(id, kind, data)?)
            .await
    }

    /// Reclaims expired leases now (the engine also does this by itself).
    pub async fn reap_expired(&self) -> Result<usize> {
        self.engine.run_async(self.engine.reap_op()).await
    }

    pub async fn get(&self, id: JobId) -> Result<Job> {
        self.read(move |e| e.get(id)).await
    }

    pub async fn events(&self, id: JobId) -> Result<Vec<Event>> {
        self.read(move |e| e.events(id)).await
    }

    /// [`Relay::list`].
    ///
    /// # Errors
    ///
    /// As [`Relay::list`].
    pub async fn list(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        crate::search::check_filter(filter)?;
        let filter = filter.clone();
        self.read(move |e| e.readers.with(|r| r.job_list(&filter))).await
    }

    /// [`Relay::retry_matching`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::retry_matching`].
    pub async fn retry_matching(&self, filter: &JobFilter) -> Result<u64> {
        let filter = filter.clone();
        self.read(move |e| e.bulk(&filter, crate::search::Bulk::Retry)).await
    }

    /// [`Relay::cancel_matching`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::retry_matching`].
    pub async fn cancel_matching(&self, filter: &JobFilter) -> Result<u64> {
        let filter = filter.clone();
        self.read(move |e| e.bulk(&filter, crate::search::Bulk::Cancel)).await
    }

    /// [`Relay::delete_matching`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::retry_matching`].
    pub async fn delete_matching(&self, filter: &JobFilter) -> Result<u64> {
        let filter = filter.clone();
        self.read(move |e| e.bulk(&filter, crate::search::Bulk::Delete)).await
    }

    /// [`Relay::dead_groups`].
    ///
    /// # Errors
    ///
    /// As [`Relay::dead_groups`].
    pub async fn dead_groups(&self, limit: u32) -> Result<Vec<DeadGroup>> {
        crate::search::check_limit(limit)?;
        self.read(move |e| e.readers.with(|r| r.job_dead_groups(limit))).await
    }

    pub async fn stats(&self) -> Result<Stats> {
        self.read(Engine::stats).await
    }

    /// [`Relay::throughput`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::throughput`].
    pub async fn throughput(&self, since: Timestamp) -> Result<Vec<Throughput>> {
        self.read(move |e| e.readers.with(|r| r.throughput(since))).await
    }

    /// As [`Relay::store_info`].
    pub fn store_info(&self) -> StoreInfo {
        self.engine.store_info()
    }

    /// Runs a read on a blocking thread: store drivers may block (and the
    /// PostgreSQL one must not run inside the async runtime).
    async fn read<T: Send + 'static>(&self, f: impl FnOnce(&Engine) -> Result<T> + Send + 'static) -> Result<T> {
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || f(&engine))
            .await
            .map_err(|_| Error::Closed)?
    }

    pub fn metrics(&self) -> Metrics {
        self.engine.deliver.counters.snapshot()
    }
}

/// Where a Relay's store is and what an answered change survives (for
/// the dashboard and logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreInfo {
    /// A file's path, or a URL without its password.
    pub location: String,
    /// One line: the durability settings in force.
    pub durability: String,
}

impl Engine {
    fn store_info(&self) -> StoreInfo {
        StoreInfo {
            location: self.backend.describe(),
            durability: self.backend.durability(),
        }
    }

    /// When a lease found nothing: until when to sleep before looking again
    /// (`None`: return now).
    fn wait_until(&self, batch: &LeaseBatch, deadline: Instant) -> Option<Instant> {
        let now = Instant::now();
        if !batch.jobs.is_empty() || now >= deadline {
            return None;
        }
        let mut until = deadline.min(now + self.options.poll_interval);
        if let Some(t) = batch.next_ready_at {
            until = until.min(now + t.since(self.options.clock.now()));
        }
        Some(until)
    }

    fn get(&self, id: JobId) -> Result<Job> {
        self.readers.with(|r| r.job_get(id))?.ok_or(Error::NotFound { id })
    }

    fn events(&self, id: JobId) -> Result<Vec<Event>> {
        let events = self.readers.with(|r| r.job_events(id, 0, u32::MAX))?;
        if events.is_empty() {
            self.get(id)?; // NotFound for an unknown job, else a job with no events yet
        }
        Ok(events)
    }

    fn stats(&self) -> Result<Stats> {
        let now = self.options.clock.now();
        let (mut queues, settings) = self
            .readers
            .with(|r| Ok((r.queue_stats(now)?, r.queue_settings_all()?)))?;
        for (name, s) in settings {
            // A configured queue shows even with no jobs.
            if s.paused || s.limits.is_set() {
                let q = queues.entry(name).or_insert_with(QueueStats::empty);
                q.paused = s.paused;
                q.limits = s.limits;
            }
        }
        Ok(Stats { queues })
    }
}

fn first<T>(items: Vec<T>) -> Result<T> {
    items.into_iter().next().ok_or(Error::Closed)
}
