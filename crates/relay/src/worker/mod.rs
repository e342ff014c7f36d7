//! The worker runtime: register handlers by job kind, and Relay leases,
//! runs, heartbeats, acks and nacks for you.
//!
//! ```no_run
//! use relay::worker::{JobError, Worker};
//! use relay::Relay;
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), relay::Error> {
//! let relay = Relay::open("jobs.db")?;
//! let report = Worker::new(relay, ["emails"])
//!     .concurrency(8)
//!     .handler("send", |ctx| {
//!         let to: String = ctx.json()?;
//!         ctx.event("log", &serde_json::json!(format!("sending to {to}")))?;
//!         Ok(Some(b"sent".to_vec()))
//!     })
//!     .async_handler("fetch", |ctx| async move {
//!         if ctx.payload().is_empty() {
//!             return Err(JobError::permanent("nothing to fetch"));
//!         }
//!         Ok(None)
//!     })
//!     .timeout("fetch", Duration::from_secs(30))
//!     .run()?; // until SIGINT/SIGTERM: stop leasing, finish or release in-flight jobs
//! println!("{} succeeded", report.succeeded);
//! # Ok(()) }
//! ```
//!
//! - A bounded pool: at most `concurrency` handlers run at once, and the
//!   worker leases only as many jobs as it has free slots.
//! - Heartbeats extend each lease every third of its duration for as long as
//!   the handler runs; a lost lease is flagged to the handler
//!   ([`JobContext::is_lost`]).
//! - Outcomes: `Ok` acks (with the optional result); `Err` nacks with the
//!   error's text; a panic nacks with the panic message (the pool stays at
//!   full strength); a timeout nacks with a timeout error; a kind with no
//!   handler is DEAD at once.
//! - Shutdown ([`Shutdown`], or SIGINT/SIGTERM): stop leasing, let running
//!   handlers finish within the grace period, then release (not nack) the
//!   rest so they run again at once elsewhere; a second signal stops at
//!   once. A job whose handler never returned is leased again after its
//!   lease expires, so nothing is lost either way.
//!
//! Sync handlers run on blocking threads and cannot be interrupted: one that
//! overruns its timeout is nacked, but keeps its pool slot until it returns
//! (so the pool never runs more than `concurrency` handlers). Async handlers
//! are cancelled at their next `.await`.

mod backend;
mod context;
mod job;
mod report;
mod run;
mod shutdown;

pub use backend::{Backend, BoxFuture, LeaseAsk};
pub use context::{JobContext, JobError, JobResult, Park};
use report::OnFinish;
pub use report::{Finished, Outage, Outcome, WorkerStats};
pub use shutdown::Shutdown;

use crate::{Error, Relay, Result};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

type SyncFn = dyn Fn(&JobContext) -> JobResult + Send + Sync;
type AsyncFn = dyn Fn(JobContext) -> Pin<Box<dyn Future<Output = JobResult> + Send>> + Send + Sync;

#[derive(Clone)]
pub(crate) enum Handler {
    Sync(Arc<SyncFn>),
    Async(Arc<AsyncFn>),
}

/// A handler and its timeout.
#[derive(Clone)]
pub(crate) struct Registered {
    pub handler: Handler,
}

/// A pool of handlers working the given queues. Configure, then [`Worker::run`].
pub struct Worker {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) queues: Vec<String>,
    pub(crate) name: String,
    pub(crate) concurrency: usize,
    pub(crate) lease_for: Duration,
    pub(crate) grace: Duration,
    pub(crate) poll: Duration,
    pub(crate) prefetch: usize,
    pub(crate) handlers: HashMap<String, Registered>,
    pub(crate) fallback: Option<Registered>,
    /// Per kind, set by [`Worker::timeout`] (before or after its handler).
    pub(crate) timeouts: HashMap<String, Duration>,
    pub(crate) default_timeout: Option<Duration>,
    pub(crate) signals: bool,
    pub(crate) shutdown: Shutdown,
    pub(crate) stats: Arc<WorkerStats>,
    pub(crate) on_finish: Option<OnFinish>,
    pub(crate) on_outage: Option<report::OnOutage>,
    pub(crate) beat_every: Duration,
    pub(crate) version: String,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut kinds: Vec<&String> = self.handlers.keys().collect();
        kinds.sort();
        f.debug_struct("Worker")
            .field("queues", &self.queues)
            .field("name", &self.name)
            .field("concurrency", &self.concurrency)
            .field("lease_for", &self.lease_for)
            .field("grace", &self.grace)
            .field("prefetch", &self.prefetch)
            .field("kinds", &kinds)
            .field("fallback", &self.fallback.is_some())
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker for `queues` with one slot; add handlers, then run it.
    pub fn new<Q: Into<String>>(relay: Relay, queues: impl IntoIterator<Item = Q>) -> Self {
        Self::over(relay.to_async(), queues)
    }

    /// A worker for `queues` that talks to `backend` (a Relay server, say)
    /// instead of a store in this process; otherwise as [`Worker::new`].
    pub fn over<Q: Into<String>>(backend: impl Backend, queues: impl IntoIterator<Item = Q>) -> Self {
        Self {
            backend: Arc::new(backend),
            queues: queues.into_iter().map(Into::into).collect(),
            name: format!("worker-{}", std::process::id()),
            concurrency: 1,
            lease_for: Duration::from_secs(30),
            grace: Duration::from_secs(10),
            poll: Duration::from_millis(500),
            prefetch: 0,
            handlers: HashMap::new(),
            fallback: None,
            timeouts: HashMap::new(),
            default_timeout: None,
            signals: true,
            shutdown: Shutdown::default(),
            stats: Arc::new(WorkerStats::default()),
            on_finish: None,
            on_outage: None,
            beat_every: relay_core::presence::DEFAULT_BEAT_EVERY,
            version: format!("relay-rust {}", env!("CARGO_PKG_VERSION")),
        }
    }

    /// At most `n` handlers at once (default 1).
    #[must_use]
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// How often the worker tells the store it is alive and what it runs
    /// (default 5 s; 100 ms-10 min): [`Relay::workers`](crate::Relay::workers)
    /// shows it gone three heartbeats after its last.
    #[must_use]
    pub fn beat_every(mut self, d: Duration) -> Self {
        self.beat_every = d;
        self
    }

    /// What the worker says it is in its heartbeats (default
    /// `relay-rust <version>`).
    #[must_use]
    pub fn version(mut self, v: impl Into<String>) -> Self {
        self.version = v.into();
        self
    }

    /// The lease holder's name in events (default `worker-<pid>`).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Each lease's duration; heartbeats renew it every third (default 30 s).
    #[must_use]
    pub fn lease_for(mut self, d: Duration) -> Self {
        self.lease_for = d;
        self
    }

    /// Lease up to `n` jobs beyond the free slots and keep them ready (their
    /// leases renewed) for the next free slot: fewer trips to the store for
    /// tiny jobs, at the price of holding jobs another worker could run.
    /// Default 0.
    #[must_use]
    pub fn prefetch(mut self, n: usize) -> Self {
        self.prefetch = n.min(crate::MAX_LEASE_BATCH as usize);
        self
    }

    /// How long one lease waits for a job when none is ready (default
    /// 500 ms, at least 10 ms): a submit answers it at once, so this is how
    /// often an idle worker asks again (a server's long-poll).
    #[must_use]
    pub fn poll(mut self, d: Duration) -> Self {
        self.poll = d.clamp(Duration::from_millis(10), crate::MAX_WAIT);
        self
    }

    /// How long a graceful shutdown waits for running handlers (default 10 s).
    #[must_use]
    pub fn grace(mut self, d: Duration) -> Self {
        self.grace = d;
        self
    }

    /// Handle SIGINT/SIGTERM (default true; embedded users may prefer the
    /// [`Shutdown`] handle alone).
    #[must_use]
    pub fn handle_signals(mut self, on: bool) -> Self {
        self.signals = on;
        self
    }

    /// A blocking handler for jobs of `kind`.
    #[must_use]
    pub fn handler<F>(mut self, kind: impl Into<String>, f: F) -> Self
    where
        F: Fn(&JobContext) -> JobResult + Send + Sync + 'static,
    {
        self.handlers.insert(
            kind.into(),
            Registered {
                handler: Handler::Sync(Arc::new(f)),
            },
        );
        self
    }

    /// An async handler for jobs of `kind`.
    #[must_use]
    pub fn async_handler<F, Fut>(mut self, kind: impl Into<String>, f: F) -> Self
    where
        F: Fn(JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        let f: Arc<AsyncFn> = Arc::new(move |ctx| Box::pin(f(ctx)));
        self.handlers.insert(
            kind.into(),
            Registered {
                handler: Handler::Async(f),
            },
        );
        self
    }

    /// A blocking handler for every kind without one of its own.
    #[must_use]
    pub fn fallback_handler<F>(mut self, f: F) -> Self
    where
        F: Fn(&JobContext) -> JobResult + Send + Sync + 'static,
    {
        self.fallback = Some(Registered {
            handler: Handler::Sync(Arc::new(f)),
        });
        self
    }

    /// Jobs of `kind` that run longer than `d` are nacked with a timeout
    /// error (a job's own timeout, given at submit, comes first). Set before
    /// or after the kind's handler, or for a kind the fallback handler runs.
    #[must_use]
    pub fn timeout(mut self, kind: impl Into<String>, d: Duration) -> Self {
        self.timeouts.insert(kind.into(), d);
        self
    }

    /// The timeout for kinds without one of their own.
    #[must_use]
    pub fn default_timeout(mut self, d: Duration) -> Self {
        self.default_timeout = Some(d);
        self
    }

    /// Called after each job's outcome is recorded (for logs and progress).
    #[must_use]
    pub fn on_finish(mut self, f: impl Fn(&Finished) + Send + Sync + 'static) -> Self {
        self.on_finish = Some(Arc::new(f));
        self
    }

    /// Called when a call to the store or server fails in a way that may
    /// pass (the server away, a busy store), once per outage, and when
    /// calls succeed again; the worker meanwhile tries again with back-off
    /// (up to 30 s). By default both are logged (`tracing`).
    #[must_use]
    pub fn on_outage(mut self, f: impl Fn(Outage<'_>) + Send + Sync + 'static) -> Self {
        self.on_outage = Some(Arc::new(f));
        self
    }

    /// A handle that stops this worker from another thread.
    pub fn shutdown_handle(&self) -> Shutdown {
        self.shutdown.clone()
    }

    /// Live counters (done, failed, in flight...).
    pub fn stats(&self) -> Arc<WorkerStats> {
        Arc::clone(&self.stats)
    }

    fn check(&self) -> Result<()> {
        let bad = |field, reason: &str| Err(Error::InvalidInput(crate::InvalidInput::new(field, reason)));
        if self.concurrency == 0 || self.concurrency > 4096 {
            return bad("concurrency", "must be 1-4096");
        }
        if self.handlers.is_empty() && self.fallback.is_none() {
            return bad("handlers", "register at least one handler");
        }
        if self.lease_for < Duration::from_millis(30) {
            return bad("lease_for", "must be at least 30ms (heartbeats renew it every third)");
        }
        let (lo, hi) = relay_core::presence::BEAT_EVERY_RANGE;
        if self.beat_every < lo || self.beat_every > hi {
            return bad("beat_every", "must be 100ms-10min");
        }
        if self.version.chars().count() > 255 || self.version.chars().any(char::is_control) {
            return bad("version", "must be at most 255 characters, without control characters");
        }
        // Checks the queue names and worker name now rather than on first lease.
        crate::LeaseRequest::new(self.queues.clone())
            .worker(self.name.clone())
            .lease_for(self.lease_for)
            .validate(&self.backend.limits())?;
        Ok(())
    }

    /// Runs until shut down (by the handle, or SIGINT/SIGTERM), on a runtime
    /// of its own. Returns the final counts.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: the worker is misconfigured (`concurrency`
    ///   outside 1-4096, no handler, `lease_for` under 30 ms or above 24 h,
    ///   no queue or more than 64, a bad queue or worker name), or `run` was
    ///   called inside a Tokio runtime (call [`Worker::run_async`] there).
    ///   Nothing was leased.
    /// - [`Error::Resources`]: its runtime could not be started. Nothing was
    ///   leased.
    ///
    /// - An error that will not pass (the relay closed; a server that
    ///   refuses the worker's token or answers what it cannot read): the
    ///   worker stops leasing, drains as on a graceful shutdown, and returns
    ///   it.
    ///
    /// Other errors met while running (a failed lease, a lost lease, an
    /// outcome that could not be recorded) are told to
    /// [`Worker::on_outage`] or logged, and counted, not returned: an
    /// outcome is tried again until its lease would have expired; a job
    /// whose outcome was not recorded runs again after that.
    pub fn run(self) -> Result<WorkerStatsSnapshot> {
        self.check()?;
        if tokio::runtime::Handle::try_current().is_ok() {
            // Starting a runtime inside one panics ("Cannot start a runtime
            // from within a runtime"): say what to call instead.
            return Err(Error::InvalidInput(relay_core::InvalidInput::new(
                "worker",
                "Worker::run starts a tokio runtime of its own and was called inside one; in async code, call `worker.run_async().await`",
            )));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(self.concurrency.clamp(1, 4))
            .max_blocking_threads(self.concurrency + 8)
            .thread_name("relay-worker")
            .enable_all()
            .build()
            .map_err(|e| Error::resources("the worker runtime", e))?;
        let result = rt.block_on(self.run_async());
        // A blocking handler that never returned must not keep the process
        // alive: its job was released, and it will be refused if it ends.
        rt.shutdown_background();
        result
    }

    /// Runs on the caller's tokio runtime (which needs its time driver and,
    /// for sync handlers, blocking threads), until shut down. Returns the
    /// final counts.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the worker is misconfigured (see
    /// [`Worker::run`]); nothing was leased. An error that will not pass,
    /// after the drain (see [`Worker::run`]).
    pub async fn run_async(self) -> Result<WorkerStatsSnapshot> {
        self.check()?;
        run::Pool::new(self).run().await
    }
}

pub use report::WorkerStatsSnapshot;
