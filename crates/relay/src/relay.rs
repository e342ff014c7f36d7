//! The handles users hold: [`Relay`] (blocking) here, and [`AsyncRelay`]
//! (async, `async_relay.rs`).
//! Both are cheap to clone and share one engine; the engine closes (after
//! committing everything already sent) when the last handle is dropped.

use crate::engine::calls::{AfterFailure, SimpleAction};
use crate::engine::metrics::Metrics;
use crate::engine::reads::{Stats, StatsPage, StoreInfo};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::request::{Completion, LeaseRequest, LeasedJob, NewJob, NewSchedule, Submitted, ValidLease, Worked};
use crate::store_url::StoreUrl;
use crate::AsyncRelay;
use relay_core::read::{DeadGroup, Event, JobFilter, QueueTotals, Throughput};
use relay_core::{Job, JobId, JobStatus, LeaseToken, QueueLimits, Schedule, Timestamp};
use relay_sqlite::{Settings, SqliteBackend};
use relay_store::Backend;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A durable job queue. Every method that changes state returns only after
/// its change is committed to disk.
///
/// Cheap to clone: clones share one engine, which closes (after committing
/// everything already sent) when the last handle, this or an [`AsyncRelay`],
/// is dropped.
///
/// Its methods block the calling thread until they are answered. They work
/// from async code too, on any store (on PostgreSQL, whose drivers run
/// runtimes of their own, they then open and read on a thread of their
/// own), but they hold the executor's thread meanwhile: in async code use
/// [`Relay::to_async`].
///
/// # Errors
///
/// Each method's own `# Errors` section names what is particular to it. Any
/// call that writes may also return these, and leaves the data as said:
///
/// - [`Error::Busy`]: another process held the write lock past
///   [`Options::busy_timeout`]. Nothing was changed; retrying is safe.
/// - [`Error::Storage`]: the store failed before the commit (a full disk,
///   a lost connection), so nothing of the call was applied; or this Relay
///   stopped after a failed fsync, and writes and reads nothing more until
///   the process is restarted.
/// - [`Error::MaybeApplied`]: the commit, or the fsync after it, failed: the
///   change may or may not be on disk. Read the job to find out (or submit
///   again with the same `unique_key`).
/// - [`Error::Corrupt`]: a row the call needed does not decode. Nothing was
///   changed; [`Relay::delete`] still removes a corrupt job.
/// - [`Error::Closed`]: the writer thread stopped before it answered. The
///   change may or may not have been applied.
///
/// Any call that reads may return [`Error::Corrupt`] or [`Error::Storage`]
/// (the store cannot be read, or this Relay stopped after a failed fsync);
/// a read changes nothing.
#[derive(Clone)]
pub struct Relay {
    engine: Arc<Engine>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("store", &self.engine.backend.describe())
            .finish()
    }
}

// The handles are shared across threads and tasks: keep them so.
const _: () = {
    const fn shared<T: Send + Sync + Clone + 'static>() {}
    shared::<Relay>();
    shared::<crate::AsyncRelay>();
};

impl Relay {
    /// Opens (creating if needed) the database file at `path`, with
    /// `Options::default()`.
    ///
    /// # Errors
    ///
    /// As [`Relay::open_with`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, Options::default())
    }

    /// Opens (creating if needed) the database file at `path`, brings its
    /// schema up to date, and starts the engine with `options`.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: `options` break a rule (`max_batch`,
    ///   `queue_capacity` or an interval of 0, a retry policy whose jitter is
    ///   outside 0-1 or whose base exceeds its cap, `default_max_attempts`
    ///   outside 1-1000); the file was not opened.
    /// - [`Error::Open`]: the file cannot be opened as a Relay database (see the
    ///   variant); an existing database was not modified.
    /// - [`Error::Busy`]: another process held the write lock past
    ///   `options.busy_timeout` while this one opened the file. Nothing was
    ///   changed; retrying is safe.
    /// - [`Error::Storage`]: a thread of the engine could not be started.
    pub fn open_with(path: impl AsRef<Path>, options: Options) -> Result<Self> {
        let backend = SqliteBackend::file(path.as_ref()).with_settings(Settings {
            busy_timeout: options.busy_timeout,
            split_commit: options.split_commit,
            watch_interval: options.watch_interval,
            ..Settings::default()
        });
        Self::on_backend(Arc::new(backend), options)
    }

    /// Opens `target`: a `postgres://` (or `postgresql://`) URL, or the path
    /// of an SQLite file ([`StoreUrl::parse`] tells them apart).
    ///
    /// # Errors
    ///
    /// As [`Relay::open_with`]; and [`Error::Open`] for a PostgreSQL URL when
    /// this build lacks the `postgres` feature, or when the server cannot be
    /// reached or used (see the variant).
    pub fn connect(target: &str, options: Options) -> Result<Self> {
        match StoreUrl::parse(target) {
            StoreUrl::File(path) => Self::open_with(path, options),
            #[cfg(feature = "postgres")]
            StoreUrl::Postgres(url) => Self::on_backend(Arc::new(relay_postgres::PgBackend::new(url)), options),
            #[cfg(not(feature = "postgres"))]
            StoreUrl::Postgres(_) => Err(Error::Open(Arc::new(relay_store::StoreError::Io {
                message:
                    "this build of relay has no PostgreSQL store: enable the `postgres` feature of the relay crate"
                        .into(),
                source: "feature `postgres` off".into(),
            }))),
        }
    }

    /// Whether `target` (as [`Relay::connect`] takes it) already holds a
    /// Relay store: a file that exists, or a PostgreSQL database with
    /// Relay's schema. Nothing is created: a command that only reads asks
    /// first, so that a typo in a path or URL never makes a store.
    ///
    /// # Errors
    ///
    /// [`Error::Open`] when the PostgreSQL server cannot be reached (or this
    /// build has no PostgreSQL store).
    pub fn store_exists(target: &str) -> Result<bool> {
        match StoreUrl::parse(target) {
            StoreUrl::File(path) => Ok(path.exists()),
            #[cfg(feature = "postgres")]
            StoreUrl::Postgres(url) => relay_postgres::has_schema(url).map_err(Error::open),
            #[cfg(not(feature = "postgres"))]
            StoreUrl::Postgres(_) => Self::connect(target, Options::default()).map(|_| false),
        }
    }

    /// A private database in memory: fast, not durable. For tests.
    ///
    /// # Errors
    ///
    /// As [`Relay::in_memory_with`].
    pub fn in_memory() -> Result<Self> {
        Self::in_memory_with(Options::default())
    }

    /// A private database in memory, with `options`: fast, not durable. For
    /// tests.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for `options` that break a rule (see
    /// [`Relay::open_with`]); [`Error::Open`] or [`Error::Storage`] only when
    /// SQLite or a thread of the engine cannot be started.
    pub fn in_memory_with(options: Options) -> Result<Self> {
        Self::on_backend(Arc::new(SqliteBackend::memory()), options)
    }

    /// Runs the engine on any store: a `relay_store::Backend` (Relay's own
    /// test suites use it to run one store under faults).
    ///
    /// Unstable: the store seam (`relay_store`) changes with the engine, in
    /// any release; it is behind the `unstable-store` feature so that the
    /// rest of this crate's API does not change with it.
    ///
    /// # Errors
    ///
    /// As [`Relay::open_with`]; what makes the store fail to open depends on
    /// `backend`.
    #[cfg(feature = "unstable-store")]
    pub fn with_backend(backend: Arc<dyn Backend>, options: Options) -> Result<Self> {
        Self::on_backend(backend, options)
    }

    fn on_backend(backend: Arc<dyn Backend>, options: Options) -> Result<Self> {
        // Opened off an async executor's thread where the store's drivers
        // need it (a Relay opened on PostgreSQL inside `#[tokio::main]`).
        let engine =
            crate::engine::executor::off_executor(backend.as_ref(), || Engine::start(Arc::clone(&backend), options))?;
        Ok(Self {
            engine: Arc::new(engine),
        })
    }

    /// The async face of this Relay (same engine).
    pub fn to_async(&self) -> AsyncRelay {
        AsyncRelay {
            engine: Arc::clone(&self.engine),
        }
    }

    /// The options this Relay was opened with.
    pub fn options(&self) -> &Options {
        &self.engine.options
    }

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

    /// Submits jobs atomically: all are committed, or none. Returns their ids
    /// in the order given (for a `unique_key` already held, the holder's).
    ///
    /// # Errors
    ///
    /// As [`Relay::submit`], for the batch as a whole: after any error but
    /// [`Error::MaybeApplied`] none of the jobs was written; after
    /// [`Error::MaybeApplied`], all of them or none may exist.
    pub fn submit_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>> {
        let done = self.engine.run(self.engine.submit_op(jobs)?)?;
        Ok(done.into_iter().map(|s| s.id).collect())
    }

    /// [`Relay::submit_batch`], saying of each job whether it was found
    /// rather than written ([`Submitted::existing`]: its unique key held,
    /// or its idempotency key carried by an earlier submit).
    ///
    /// # Errors
    ///
    /// As [`Relay::submit_batch`].
    pub fn submit_batch_outcome(&self, jobs: Vec<NewJob>) -> Result<Vec<Submitted>> {
        self.engine.run(self.engine.submit_op(jobs)?)
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
    /// - [`Error::InvalidInput`]: the job breaks a limit (as for
    ///   [`Relay::submit`]), or (field `transaction`) `tx` has no
    ///   transaction open, is on another file or in memory, or runs with
    ///   `synchronous` below `FULL`.
    /// - [`Error::DependencyNotFound`]: an id in `depends_on` names no job.
    /// - [`Error::Storage`]: the write failed, or this process saw the
    ///   file's fsync fail (the Relay is stopped).
    /// - [`Error::Busy`]: your transaction could not take the write lock.
    /// - [`Error::Corrupt`]: a row the submit needed does not decode.
    ///
    /// After any error nothing of this call is in your transaction; the
    /// transaction itself stays open, for you to commit or roll back. This
    /// call never returns [`Error::MaybeApplied`]: your commit, not this
    /// call, makes the job durable.
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

    /// Leases up to the request's `max` ready jobs from its queues, in the
    /// order they were chosen (priority, with aging), waiting up to its
    /// `wait` when none is ready. A submit in this process wakes the wait at once; one in
    /// another process is seen within [`Options::watch_interval`] (SQLite) or
    /// at once (PostgreSQL). Each lease starts an attempt and lasts the job's
    /// own `lease_for`, or else the request's. Paused queues, and queues at
    /// their limits, give nothing. Returns an empty list when the wait ends
    /// with no job.
    ///
    /// ```
    /// use relay::{LeaseRequest, NewJob, Relay};
    /// use std::time::Duration;
    ///
    /// let relay = Relay::in_memory()?;
    /// relay.submit(NewJob::new("emails", "send", b"{}".to_vec()))?;
    ///
    /// let request = LeaseRequest::new(["emails"]).worker("w1").max(10).wait(Duration::from_secs(1));
    /// let jobs = relay.lease(request)?;
    /// assert_eq!((jobs.len(), jobs[0].attempt), (1, 1));
    /// // None left: a request that does not wait (the default) returns at once.
    /// assert!(relay.lease(LeaseRequest::new(["emails"]))?.is_empty());
    /// # Ok::<(), relay::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: the request breaks a rule (no queue or more
    ///   than 64, a bad queue or worker name, `max` outside
    ///   1-[`MAX_LEASE_BATCH`](crate::MAX_LEASE_BATCH), `lease_for` of 0 or
    ///   above 24 h, `wait` above [`MAX_WAIT`](crate::MAX_WAIT)); nothing was
    ///   leased.
    /// - [`Error::Corrupt`]: a job the claim chose does not decode; nothing was
    ///   leased.
    /// - [`Error::MaybeApplied`]: jobs may have been leased to this call, whose
    ///   tokens it cannot return: they run again once their leases expire (the
    ///   attempt counted).
    /// - [`Error::Busy`], [`Error::Storage`] and [`Error::Closed`], as for every
    ///   write (see [`Relay`]).
    pub fn lease(&self, req: LeaseRequest) -> Result<Vec<LeasedJob>> {
        self.lease_valid(req.validate(&self.engine.options.limits)?)
    }

    fn lease_valid(&self, req: ValidLease) -> Result<Vec<LeasedJob>> {
        let deadline = Instant::now() + req.wait;
        loop {
            let seen = self.engine.deliver.ready.generation();
            let batch = self.engine.run(self.engine.lease_op(req.clone()))?;
            match self.engine.wait_until(&batch, deadline) {
                None => return Ok(batch.jobs),
                Some(until) => self.engine.deliver.ready.wait(seen, until),
            }
        }
    }

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
    pub fn ack(&self, id: JobId, token: LeaseToken, result: Option<Vec<u8>>) -> Result<()> {
        self.engine.run(self.engine.ack_op(id, token, result)?)
    }

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
    pub fn nack(&self, id: JobId, token: LeaseToken, error: &str, retry_in: Option<Duration>) -> Result<JobStatus> {
        self.engine
            .run(self.engine.nack_op(id, token, error, AfterFailure::Retry(retry_in)))
    }

    /// Reports a failure that no retry can fix: the job becomes DEAD now.
    /// Returns its new status.
    ///
    /// # Errors
    ///
    /// As [`Relay::nack`].
    pub fn nack_permanent(&self, id: JobId, token: LeaseToken, error: &str) -> Result<JobStatus> {
        self.engine
            .run(self.engine.nack_op(id, token, error, AfterFailure::Dead))
    }

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
    pub fn complete_batch(&self, batch: Vec<Completion>) -> Result<Vec<Result<JobStatus>>> {
        self.engine.run(self.engine.complete_op(batch))
    }

    /// A worker's turn in one operation: records `batch` as
    /// [`Relay::complete_batch`] does, then leases the next jobs as `lease`
    /// asks, in the same transaction and commit (one fsync serves both).
    /// The completions come first, so the slots they free (a queue's
    /// `max_leased`) are there for the claim. `lease`'s wait applies only
    /// when `batch` is empty: with completions to report, it answers as
    /// soon as they are on disk, with the jobs that were ready then.
    ///
    /// ```
    /// use relay::{Completion, JobState, LeaseRequest, NewJob, Relay};
    ///
    /// let relay = Relay::in_memory()?;
    /// for n in 0..4 {
    ///     relay.submit(NewJob::new("q", "k", format!("{n}").into_bytes()))?;
    /// }
    /// let mut jobs = relay.lease(LeaseRequest::new(["q"]).max(2))?;
    /// while !jobs.is_empty() {
    ///     let done = jobs.iter().map(|j| Completion::ack(j.id, j.token, None)).collect();
    ///     let worked = relay.complete_and_lease(done, LeaseRequest::new(["q"]).max(2))?;
    ///     assert!(worked.completions.iter().all(Result::is_ok));
    ///     jobs = worked.jobs;
    /// }
    /// assert_eq!(relay.stats()?.queues["q"].counts[&JobState::Succeeded], 4);
    /// # Ok::<(), relay::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The outer error is for the whole call, as for
    /// [`Relay::complete_batch`]; also [`Error::InvalidInput`] for a bad
    /// `lease` (nothing was sent). Each completion's own error is in
    /// [`Worked::completions`]. A claim that fails beside completions
    /// (a job it chose does not decode) leases nothing and leaves the
    /// completions applied; the next lease reports its error.
    pub fn complete_and_lease(&self, batch: Vec<Completion>, lease: LeaseRequest) -> Result<Worked> {
        let req = lease.validate(&self.engine.options.limits)?;
        if batch.is_empty() {
            let jobs = self.lease_valid(req)?;
            return Ok(Worked {
                completions: Vec::new(),
                jobs,
            });
        }
        self.engine.run(self.engine.complete_and_lease_op(batch, req))
    }

    /// Extends many leases in one operation (a worker's heartbeat), each
    /// `(id, token, lease_for)` to `lease_for` from now. The inner list
    /// holds one result per lease, in order: its new expiry, or the error
    /// [`Relay::extend`] would have returned for it.
    ///
    /// # Errors
    ///
    /// The outer error is for the whole call, as for
    /// [`Relay::complete_batch`].
    pub fn extend_batch(&self, leases: Vec<(JobId, LeaseToken, Duration)>) -> Result<Vec<Result<Timestamp>>> {
        self.engine.run(self.engine.extend_batch_op(leases))
    }

    /// Records one [`Completion`] (an ack, nack or snooze built as a value,
    /// e.g. by code that decides the outcome in one place and reports it in
    /// another); returns the job's new status.
    ///
    /// # Errors
    ///
    /// What [`Relay::ack`], [`Relay::nack`], [`Relay::nack_permanent`] or
    /// [`Relay::snooze`] returns for the same outcome, leaving the job in
    /// the same state.
    pub fn complete(&self, completion: Completion) -> Result<JobStatus> {
        single(self.complete_batch(vec![completion])?)
    }

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
    pub fn extend(&self, id: JobId, token: LeaseToken, lease_for: Duration) -> Result<Timestamp> {
        self.engine.run(self.engine.extend_op(id, token, lease_for)?)
    }

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
    pub fn progress(&self, id: JobId, token: LeaseToken, fraction: f64, message: Option<&str>) -> Result<()> {
        self.engine.run(self.engine.progress_op(id, token, fraction, message)?)
    }

    /// Gives the job back untried: READY at once, the attempt not counted.
    ///
    /// # Errors
    ///
    /// As [`Relay::nack`].
    pub fn release(&self, id: JobId, token: LeaseToken) -> Result<()> {
        self.engine.run(self.engine.action_op(id, SimpleAction::Release(token)))
    }

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
    /// - [`Error::InvalidInput`]: an invalid queue name; nothing was sent.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`],
    ///   [`Error::Corrupt`] and [`Error::Closed`], as for every write (see
    ///   [`Relay`]).
    pub fn pause(&self, queue: &str) -> Result<()> {
        self.engine.run(self.engine.pause_op(queue, true)?)
    }

    /// Resumes a paused queue: its jobs are leased again, and lessees
    /// waiting for it are woken. Resuming a queue that is not paused
    /// changes nothing.
    ///
    /// # Errors
    ///
    /// As [`Relay::pause`].
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
    /// - [`Error::InvalidInput`]: a bad name, cron expression (field
    ///   `cron`, also for one with no tick in the future), time zone (`tz`),
    ///   interval (`every`) or job template; nothing was changed.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`] and
    ///   [`Error::Closed`], as for every write (see [`Relay`]). A schedule
    ///   of this name whose row does not decode is replaced, not an error.
    pub fn add_schedule(&self, schedule: NewSchedule) -> Result<Schedule> {
        self.engine.run(self.engine.add_schedule_op(schedule)?)
    }

    /// Removes a schedule (the jobs it enqueued stay). A schedule whose row
    /// does not decode is removed too.
    ///
    /// # Errors
    ///
    /// - [`Error::ScheduleNotFound`]: no schedule has this name; nothing was
    ///   changed.
    /// - [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`] and
    ///   [`Error::Closed`], as for every write (see [`Relay`]).
    pub fn remove_schedule(&self, name: &str) -> Result<()> {
        self.engine.run(self.engine.remove_schedule_op(name))
    }

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
    pub fn pause_schedule(&self, name: &str) -> Result<Schedule> {
        self.engine.run(self.engine.pause_schedule_op(name, true))
    }

    /// Resumes a paused schedule from its next tick after now (ticks
    /// missed while paused enqueue nothing). Returns the schedule as it is now.
    ///
    /// # Errors
    ///
    /// As [`Relay::pause_schedule`]; and [`Error::InvalidInput`] (field
    /// `cron`) for a schedule with no tick left in the future: it stays
    /// paused.
    pub fn resume_schedule(&self, name: &str) -> Result<Schedule> {
        self.engine.run(self.engine.pause_schedule_op(name, false))
    }

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
    pub fn put_mark(&self, key: &str, value: &str, keep: std::time::Duration) -> Result<bool> {
        self.engine.run(self.engine.put_mark_op(key, value, keep)?)
    }

    /// The value kept under `key` ([`Relay::put_mark`]), unless there is
    /// none or it has expired.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    /// [`Relay`]).
    pub fn mark(&self, key: &str) -> Result<Option<String>> {
        let now = self.engine.options.clock.now();
        self.engine.readers.with(|r| r.mark_get(key, now))
    }

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
    pub fn worker_beat(&self, beat: &crate::WorkerBeat) -> Result<()> {
        self.engine
            .run(self.engine.worker_beat_op(beat, false, crate::WorkerClaim::Local)?)
    }

    /// A worker's last heartbeat: it stopped, with nothing running.
    ///
    /// # Errors
    ///
    /// As [`Relay::worker_beat`].
    pub fn worker_stopped(&self, beat: &crate::WorkerBeat) -> Result<()> {
        self.engine
            .run(self.engine.worker_beat_op(beat, true, crate::WorkerClaim::Local)?)
    }

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
    pub fn worker_beat_as(&self, beat: &crate::WorkerBeat, stopped: bool, claim: crate::WorkerClaim) -> Result<()> {
        self.engine.run(self.engine.worker_beat_op(beat, stopped, claim)?)
    }

    /// Every worker the store knows (alive, gone or stopped in the last
    /// hour), by id, with the jobs it runs and, for a gone one, the leases
    /// it left orphaned.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    /// [`Relay`]).
    pub fn workers(&self) -> Result<Vec<crate::WorkerView>> {
        self.engine.workers()
    }

    /// A page of [`Relay::workers`]: those after id `after` (`None`: from
    /// the first), at most `limit` (1-1000) and about
    /// [`WORKER_PAGE_BYTES`](crate::WORKER_PAGE_BYTES) of them (at least
    /// one); `next` is the next page's `after`. A page may hold fewer than
    /// `limit` with more to follow (workers forgotten after an hour are
    /// left out).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a `limit` outside 1-1000; else as
    /// [`Relay::workers`].
    pub fn workers_page(&self, after: Option<&str>, limit: u32) -> Result<crate::WorkerPage> {
        self.engine.workers_page(after, limit)
    }

    /// Every schedule, by name, with its next and latest tick.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    /// [`Relay`]).
    pub fn schedules(&self) -> Result<Vec<Schedule>> {
        self.engine.readers.with(|r| r.schedules())
    }

    /// Enqueues the jobs of every due schedule now (the engine also does
    /// this by itself about once a second, with `Options::scheduler`);
    /// returns how many. A schedule that cannot run (a corrupt row) is
    /// logged and passed over.
    ///
    /// # Errors
    ///
    /// [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`] and
    /// [`Error::Closed`], as for every write (see [`Relay`]).
    pub fn run_schedules(&self) -> Result<usize> {
        self.engine.run(self.engine.run_schedules_op())
    }

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
    pub fn cancel(&self, id: JobId) -> Result<()> {
        self.engine.run(self.engine.action_op(id, SimpleAction::Cancel))
    }

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
    pub fn retry(&self, id: JobId) -> Result<()> {
        self.engine.run(self.engine.action_op(id, SimpleAction::Retry))
    }

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
    pub fn delete(&self, id: JobId) -> Result<()> {
        self.engine.run(self.engine.action_op(id, SimpleAction::Delete))
    }

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
    pub fn append_event(&self, id: JobId, kind: &str, data: &serde_json::Value) -> Result<i64> {
        self.engine.run(self.engine.append_event_op(id, kind, data)?)
    }

    /// Deletes now, with their events, every finished job past its
    /// retention (its queue's, else [`Options::retention`]'s); returns how
    /// many. The engine does this by itself, a window of the table at a
    /// time; this goes through the whole table at once, one pass
    /// ([`Relay::prune_from`]) per write batch.
    ///
    /// ```
    /// use relay::{Keep, NewJob, Relay, Retention};
    /// use std::time::Duration;
    ///
    /// let relay = Relay::in_memory()?;
    /// relay.set_retention("thumbnails", Retention { succeeded: Some(Keep::For(Duration::ZERO)), ..Retention::default() })?;
    /// let id = relay.submit(NewJob::new("thumbnails", "resize", Vec::new()))?;
    /// let job = relay.lease(relay::LeaseRequest::new(["thumbnails"]))?.remove(0);
    /// relay.ack(id, job.token, None)?;
    /// assert_eq!(relay.prune()?, 1);
    /// assert!(relay.get(id).is_err());
    /// # Ok::<(), relay::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Busy`], [`Error::Storage`], [`Error::MaybeApplied`] and
    /// [`Error::Closed`], as for every write (see [`Relay`]); what was
    /// deleted before the error stays deleted.
    pub fn prune(&self) -> Result<u64> {
        let mut deleted = 0;
        let mut after = JobId(0);
        loop {
            let pass = self.prune_from(after)?;
            deleted += pass.deleted;
            match pass.next {
                Some(next) => after = next,
                None => return Ok(deleted),
            }
        }
    }

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
    pub fn prune_from(&self, after: JobId) -> Result<crate::Pruned> {
        self.engine.run(self.engine.prune_op(after))
    }

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
    pub fn set_retention(&self, queue: &str, retention: crate::Retention) -> Result<()> {
        self.engine.run(self.engine.retention_op(queue, retention)?)
    }

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
    pub fn reap_expired(&self) -> Result<usize> {
        self.engine.run(self.engine.reap_op())
    }

    /// The job with this id, as last committed.
    ///
    /// # Errors
    ///
    /// - [`Error::NotFound`]: no job has this id.
    /// - [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    ///   [`Relay`]).
    pub fn get(&self, id: JobId) -> Result<Job> {
        self.engine.get(id)
    }

    /// The job's event log, oldest first.
    ///
    /// # Errors
    ///
    /// - [`Error::NotFound`]: no job has this id.
    /// - [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    ///   [`Relay`]).
    pub fn events(&self, id: JobId) -> Result<Vec<Event>> {
        self.engine.events(id)
    }

    /// A page of the job's event log, oldest first: the events after
    /// `seq` `after` (0: from the first), at most `limit` (1-1000) and at
    /// most [`EVENT_PAGE_BYTES`](crate::EVENT_PAGE_BYTES) of them (at
    /// least one); `next` is the next page's `after`.
    ///
    /// # Errors
    ///
    /// - [`Error::NotFound`]: no job has this id.
    /// - [`Error::InvalidInput`]: `limit` outside 1-1000.
    /// - [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    ///   [`Relay`]).
    pub fn events_page(&self, id: JobId, after: i64, limit: u32) -> Result<crate::EventPage> {
        self.engine.events_page(id, after, limit)
    }

    /// Jobs matching `filter`, newest first, `filter.limit` of them; the
    /// next page is `before` the last one's id. A `since` at or after `until`
    /// is an empty range: it matches nothing.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: the filter breaks a limit (a bad queue
    ///   name, kind or tag, an `error_contains` that is empty or too long, a
    ///   `limit` of 0).
    /// - [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    ///   [`Relay`]).
    pub fn list(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        crate::engine::search::check_filter(filter)?;
        self.engine.readers.with(|r| r.job_list(filter))
    }

    /// [`Relay::list`], a page bounded in bytes as well as in count: at
    /// most `filter.limit` jobs and about `max_bytes` of them (their
    /// payloads, results and errors; at least one job), read a few at a
    /// time, so that a page of large jobs costs its bytes and no more
    /// (the HTTP API answers pages of at most
    /// [`LIST_PAGE_BYTES`](crate::LIST_PAGE_BYTES)). `next` is the next
    /// page's `before`; none when no more follow.
    ///
    /// # Errors
    ///
    /// As [`Relay::list`].
    pub fn list_page(&self, filter: &JobFilter, max_bytes: usize) -> Result<crate::JobPage> {
        self.engine.list_page(filter, max_bytes)
    }

    /// Retries every job `filter` matches that can be retried (DEAD or
    /// CANCELLED; the rest, and those whose unique key is taken, are passed
    /// over), [`BULK_CHUNK`](crate::BULK_CHUNK) jobs per transaction so that
    /// other callers go on meanwhile; returns how many it retried. The
    /// filter's `limit` does not apply (every match is taken); its `before`
    /// says where to start.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad filter (see [`Relay::list`]; nothing
    /// done). Any other error ([`Error::Busy`], [`Error::Storage`],
    /// [`Error::MaybeApplied`], [`Error::Closed`]) stops the work where it
    /// is: the chunks before it are done, the chunk it met is as the variant
    /// says (after [`Error::MaybeApplied`], applied or not), and the rest is
    /// untouched. A job that cannot be changed (its state, a taken unique
    /// key, a corrupt row) is passed over, not an error.
    pub fn retry_matching(&self, filter: &JobFilter) -> Result<u64> {
        self.engine.bulk(filter, crate::engine::search::Bulk::Retry)
    }

    /// [`Relay::retry_matching`] for cancel: every unfinished (WAITING, READY, SCHEDULED, RETRYING or LEASED)
    /// job `filter` matches is CANCELLED (a worker holding one loses its
    /// lease).
    ///
    /// # Errors
    ///
    /// As [`Relay::retry_matching`].
    pub fn cancel_matching(&self, filter: &JobFilter) -> Result<u64> {
        self.engine.bulk(filter, crate::engine::search::Bulk::Cancel)
    }

    /// [`Relay::retry_matching`] for delete: every job `filter` matches that
    /// is not LEASED is deleted, with its events.
    ///
    /// # Errors
    ///
    /// As [`Relay::retry_matching`].
    pub fn delete_matching(&self, filter: &JobFilter) -> Result<u64> {
        self.engine.bulk(filter, crate::engine::search::Bulk::Delete)
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
    /// - [`Error::InvalidInput`]: `limit` is outside 1-1000.
    /// - [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    ///   [`Relay`]).
    pub fn dead_groups(&self, limit: u32) -> Result<Vec<DeadGroup>> {
        crate::engine::search::check_limit(limit)?;
        self.engine.readers.with(|r| r.job_dead_groups(limit))
    }

    /// How many jobs each queue has in each state, the age of its oldest
    /// ready job, and whether it is paused or limited.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    /// [`Relay`]).
    pub fn stats(&self) -> Result<Stats> {
        self.engine.stats()
    }

    /// [`Relay::stats`] a page at a time, bounded however many queues
    /// there are: the queues named after `after` (byte order; `None` from
    /// the first), at most `limit`, and the next page's `after`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a `limit` of 0; else as [`Relay::stats`].
    pub fn stats_page(&self, after: Option<&str>, limit: u32) -> Result<StatsPage> {
        self.engine.stats_page(after, limit)
    }

    /// One queue's counts by state, the age of its oldest due job, and its
    /// pause state and limits (every count zero for a queue nothing has
    /// used).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a name that is not a queue's; else as
    /// [`Relay::stats`].
    pub fn queue_stats(&self, queue: &str) -> Result<crate::QueueStats> {
        self.engine.queue_stats(queue)
    }

    /// Counts over every queue at once: jobs per state, queues, paused
    /// queues (a handful of numbers, however many queues there are).
    ///
    /// # Errors
    ///
    /// As [`Relay::stats`].
    pub fn queue_totals(&self) -> Result<QueueTotals> {
        self.engine.queue_totals()
    }

    /// The stats of the `limit` queues with the most READY jobs; when
    /// fewer have any, then of the first others by name (so with `limit`
    /// queues or fewer, every queue). What `/metrics` labels.
    ///
    /// # Errors
    ///
    /// As [`Relay::stats`].
    pub fn busiest_queues(&self, limit: u32) -> Result<Stats> {
        self.engine.busiest_queues(limit)
    }

    /// Jobs submitted, succeeded, failed (attempts) and dead per queue and
    /// minute, from the minute of `since` on, oldest first: the history
    /// the dashboard charts. Kept by the store with each batch (so it
    /// counts every process on the store, and survives restarts) for two
    /// days.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    /// [`Relay`]).
    pub fn throughput(&self, since: Timestamp) -> Result<Vec<Throughput>> {
        self.engine.readers.with(|r| r.throughput(since))
    }

    /// [`Relay::throughput`] of one queue (`Some`), or of every queue
    /// summed (`None`: a row a minute, its queue empty), however many
    /// queues there are.
    ///
    /// # Errors
    ///
    /// As [`Relay::throughput`].
    pub fn throughput_of(&self, since: Timestamp, queue: Option<&str>) -> Result<Vec<Throughput>> {
        self.engine.readers.with(|r| r.throughput_of(since, queue))
    }

    /// Where the store is and what an answered change survives.
    pub fn store_info(&self) -> StoreInfo {
        self.engine.store_info()
    }

    /// For tests of batching: holds the writers until the guard is dropped,
    /// so that operations sent meanwhile are applied, in the order they
    /// were sent, as one batch when the store runs one writer (several
    /// writers share them out; `None` for a Relay that is closing).
    #[doc(hidden)]
    pub fn hold_writer(&self) -> Option<crate::engine::WriterHold> {
        self.engine.hold_writer()
    }

    /// The writer's counters since this Relay was opened (shared by its
    /// clones and its [`AsyncRelay`]): commits, operations, largest batch,
    /// failed commits, fsyncs.
    pub fn metrics(&self) -> Metrics {
        self.engine.deliver.counters.snapshot()
    }

    /// How long leased jobs waited between becoming ready and being
    /// leased, by queue and kind, since this Relay was opened (its clones
    /// and its [`AsyncRelay`] share them): a histogram per pair, at most
    /// [`WAIT_PAIRS`](crate::WAIT_PAIRS) of them (the rest summed under
    /// `(other)`). `/metrics` exports them as `relay_queue_wait_seconds`.
    pub fn queue_waits(&self) -> Vec<crate::QueueWait> {
        self.engine.deliver.counters.queue_waits()
    }

    /// How long leases this Relay handed out ran until their outcome (an
    /// ack, a nack, or the expiry this Relay reclaimed), by queue and kind,
    /// since it was opened (its clones and its [`AsyncRelay`] share them):
    /// a histogram per pair, bounded as [`Relay::queue_waits`] are.
    /// `/metrics` exports them as `relay_job_run_seconds`.
    pub fn job_runs(&self) -> Vec<crate::QueueWait> {
        self.engine.deliver.counters.job_runs()
    }

    /// How the attempts this Relay ended ended ([`Outcome`](crate::Outcome):
    /// succeeded, failed, dead, expired), by the queue and kind of their
    /// lease; an attempt whose lease another process handed out counts
    /// under `(other)`. `/metrics` exports them as
    /// `relay_job_outcomes_total`.
    pub fn job_outcomes(&self) -> Vec<crate::JobOutcomes> {
        self.engine.deliver.counters.job_outcomes()
    }

    /// Whether this Relay can write, as its last batches found: not ok
    /// after a batch failed as a whole (a full disk, a read-only file, a
    /// store that does not answer) until a later batch commits, and never
    /// again after an fsync failed (`stopped`). What a health check
    /// (`/healthz`) answers; it writes nothing itself.
    pub fn health(&self) -> crate::Health {
        self.engine.health()
    }
}

pub(crate) fn first<T>(items: Vec<T>) -> Result<T> {
    items.into_iter().next().ok_or(Error::Closed)
}

/// The one answer of a batch of one.
pub(crate) fn single(mut answers: Vec<Result<JobStatus>>) -> Result<JobStatus> {
    answers.pop().unwrap_or(Err(Error::Closed))
}
