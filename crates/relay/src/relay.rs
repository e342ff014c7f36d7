//! The handles users hold: [`Relay`] (blocking) here, and [`AsyncRelay`]
//! (async, `async_relay.rs`).
//! Both are cheap to clone and share one engine; the engine closes (after
//! committing everything already sent) when the last handle is dropped.

use crate::engine::metrics::Metrics;
use crate::engine::reads::StoreInfo;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::request::{Completion, LeaseRequest, LeasedJob, NewJob, Submitted, ValidLease, Worked};
use crate::store_url::StoreUrl;
use crate::AsyncRelay;
use relay_core::{JobId, JobStatus};
use relay_sqlite::{Settings, SqliteBackend};
use relay_store::Backend;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

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
    pub(crate) engine: Arc<Engine>,
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

    /// Emits event `key` inside your own transaction on this Relay's SQLite
    /// file, as [`Relay::submit_in`] submits: the event and the wake-ups of
    /// the jobs waiting for it exist if and only if `tx` commits (an order
    /// marked shipped and its `shipped:<id>` event, or neither). What it
    /// does is [`Relay::emit`]'s; lessees see the woken jobs within
    /// [`Options::watch_interval`] of your commit.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// # let path = dir.path().join("app.db");
    /// use relay::rusqlite::{Connection, TransactionBehavior};
    /// use relay::Relay;
    ///
    /// let relay = Relay::open(&path)?;
    /// let mut db = Connection::open(&path)?;
    /// db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, shipped INTEGER)", [])?;
    /// let tx = db.transaction_with_behavior(TransactionBehavior::Immediate)?;
    /// tx.execute("INSERT INTO orders (id, shipped) VALUES (42, 1)", [])?;
    /// let emitted = relay.emit_in(&tx, "shipped:42", br#"{"carrier":"ups"}"#.to_vec())?;
    /// tx.commit()?; // the order's row and its event, or neither
    /// assert!(emitted.first);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Relay::emit`] and [`Relay::submit_in`] (a `tx` on another file,
    /// without a transaction, or below `synchronous = FULL`). After any
    /// error nothing of this call is in your transaction.
    pub fn emit_in(&self, tx: &rusqlite::Connection, key: &str, payload: Vec<u8>) -> Result<crate::Emitted> {
        self.engine.emit_in(tx, key, payload)
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

    /// Emits event `key` inside your own transaction on this Relay's
    /// PostgreSQL database, as [`Relay::submit_in_pg`] submits: the event
    /// and the wake-ups of the jobs waiting for it (each READY with the
    /// payload recorded as its wait's step) exist if and only if `tx`
    /// commits, and lessees of every Relay process are woken at that
    /// commit (NOTIFY). It runs `relay_emit(...)`, the SQL function any
    /// language can call (docs/guides/durable-execution.md). What it does
    /// is [`Relay::emit`]'s: the first emit of a key wins.
    ///
    /// A wait for the same key that begins while `tx` is open waits for
    /// its commit (both take the key's transaction lock): keep `tx` short.
    ///
    /// # Errors
    ///
    /// As [`Relay::emit`] for a bad key or payload, and (field
    /// `transaction`) when this Relay is on an SQLite file (use
    /// [`Relay::emit_in`]); nothing is written then and `tx` is untouched.
    /// [`Error::Storage`] for a lost connection or a database without
    /// Relay's schema; as after any error PostgreSQL has then aborted `tx`.
    #[cfg(feature = "postgres")]
    pub fn emit_in_pg(
        &self,
        tx: &mut impl relay_postgres::postgres::GenericClient,
        key: &str,
        payload: Vec<u8>,
    ) -> Result<crate::Emitted> {
        self.engine.emit_for_pg(key, &payload)?;
        let (first, woken) =
            relay_postgres::emit_in_blocking(tx, key, &payload).map_err(|e| crate::within::from_within_as(e, "key"))?;
        Ok(crate::Emitted { first, woken })
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

    /// Awaits job `id`'s end for at most `timeout`: the job once it is
    /// SUCCEEDED, DEAD or CANCELLED (its `result`, its `last_error`), or
    /// `None` when it had not ended by then. A caller awaiting a job this
    /// process ends is woken by the commit that ends it (after its fsync);
    /// one another process ends is seen within
    /// [`Options::poll_interval`](crate::Options::poll_interval). Costs a
    /// read of the job per wake-up, and the writer nothing while no caller
    /// awaits.
    ///
    /// ```
    /// use relay::{JobState, LeaseRequest, NewJob, Relay};
    /// use std::time::Duration;
    ///
    /// let relay = Relay::in_memory()?;
    /// let id = relay.submit(NewJob::new("q", "k", b"{}".to_vec()))?;
    /// let worker = relay.clone();
    /// std::thread::spawn(move || {
    ///     let job = worker.lease(LeaseRequest::new(["q"]).wait(Duration::from_secs(5)))?.remove(0);
    ///     worker.ack(job.id, job.token, Some(b"42".to_vec()))
    /// });
    /// let done = relay.result(id, Duration::from_secs(30))?.expect("it ended in time");
    /// assert_eq!((done.state(), done.result.as_deref()), (JobState::Succeeded, Some(&b"42"[..])));
    /// # Ok::<(), relay::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::NotFound`]: no job has this id (or it was deleted while
    ///   awaited).
    /// - [`Error::Corrupt`], [`Error::Storage`], [`Error::Closed`], as for
    ///   every read.
    pub fn result(&self, id: JobId, timeout: std::time::Duration) -> Result<Option<crate::Job>> {
        let deadline = far_deadline(timeout);
        // Registered before the first read: an end committed between the
        // read and the wait still wakes it.
        let awaiting = self.engine.deliver.finished.register(id);
        loop {
            let job = self.get(id)?;
            if job.state().is_finished() {
                return Ok(Some(job));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let _ = awaiting
                .rx
                .recv_deadline(deadline.min(now + self.engine.options.poll_interval));
        }
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
                earlier: Vec::new(),
                jobs,
            });
        }
        self.engine.run(self.engine.complete_and_lease_op(batch, req))
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

/// `timeout` from now, or a century from now for a longer one
/// (`Duration::MAX`: wait for ever), where `Instant + timeout` would panic.
pub(crate) fn far_deadline(timeout: std::time::Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .or_else(|| now.checked_add(std::time::Duration::from_secs(100 * 365 * 86_400)))
        .unwrap_or(now)
}
