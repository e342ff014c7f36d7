//! [`AsyncRelay`]: the calls of [`Relay`] as futures, on the same engine.

use crate::engine::metrics::Metrics;
use crate::engine::reads::StoreInfo;
use crate::engine::Engine;
use crate::error::{Error, Result};
// The docs of each method point to its blocking twin.
use crate::request::{Completion, LeaseRequest, LeasedJob, ValidLease, Worked};
#[cfg(doc)]
use crate::Relay;
use std::sync::Arc;
use std::time::Instant;

/// The async face of a [`Relay`] ([`Relay::to_async`]): the same calls, as
/// futures, on the same engine. Waiting for a commit or a job never blocks
/// the executor's thread.
///
/// It needs a Tokio runtime. Reads (`get`, `events`, `list`, `stats`,
/// `schedules`, `dead_groups`, `throughput`) and bulk actions
/// (`retry_matching`...) run on Tokio's blocking threads
/// (`spawn_blocking`), and a `lease` that waits uses Tokio's timers, so the
/// runtime needs its time driver (`#[tokio::main]`, or a runtime built with
/// `enable_time` or `enable_all`). Under another executor those calls panic
/// ("there is no reactor running"). Writes (`submit`, `ack`, `cancel`...)
/// and a `lease` that does not wait work on any executor.
///
/// Each method returns the errors of its [`Relay`] counterpart, leaving the
/// data in the same state. A read or bulk action whose blocking task did not
/// finish (it panicked, or the runtime is shutting down) returns
/// [`Error::Closed`]. Dropping a future does not take back an operation it
/// has sent: the change may still be applied (a `lease` dropped so leaves
/// the jobs it took leased until their leases expire; give
/// [`AsyncRelay::lease_until`] a `stop` future instead).
///
/// ```
/// use relay::{JobState, LeaseRequest, NewJob, Relay};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let relay = Relay::in_memory()?.to_async();
/// let rt = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
/// rt.block_on(async {
///     let id = relay.submit(NewJob::new("emails", "send", br#"{"to":"ada"}"#.to_vec())).await?;
///     let jobs = relay.lease(LeaseRequest::new(["emails"]).worker("w1")).await?;
///     relay.ack(jobs[0].id, jobs[0].token, None).await?;
///     assert_eq!(relay.get(id).await?.state(), JobState::Succeeded);
///     Ok::<(), relay::Error>(())
/// })?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct AsyncRelay {
    pub(crate) engine: Arc<Engine>,
}

impl std::fmt::Debug for AsyncRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncRelay")
            .field("store", &self.engine.backend.describe())
            .finish()
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
        job: crate::NewJob,
    ) -> Result<crate::JobId> {
        let (job, delay_ms) = self.engine.for_pg(job)?;
        let id = relay_postgres::submit_in(tx, &crate::within::pg_args(&job, delay_ms))
            .await
            .map_err(crate::within::from_within)?;
        Ok(crate::JobId(id))
    }

    /// [`Relay::emit_in_pg`] with tokio-postgres: `tx` is a
    /// `tokio_postgres::Transaction` (or a client inside `BEGIN`).
    ///
    /// # Errors
    ///
    /// As [`Relay::emit_in_pg`].
    #[cfg(feature = "postgres")]
    pub async fn emit_in_pg(
        &self,
        tx: &impl relay_postgres::tokio_postgres::GenericClient,
        key: &str,
        payload: Vec<u8>,
    ) -> Result<crate::Emitted> {
        self.engine.emit_for_pg(key, &payload)?;
        let (first, woken) = relay_postgres::emit_in(tx, key, &payload)
            .await
            .map_err(|e| crate::within::from_within_as(e, "key"))?;
        Ok(crate::Emitted { first, woken })
    }

    /// [`Relay::lease`], as a future. A request that waits, when no job is
    /// ready, uses Tokio's timers: it needs a Tokio runtime with its time
    /// driver.
    ///
    /// # Errors
    ///
    /// As [`Relay::lease`].
    pub async fn lease(&self, req: LeaseRequest) -> Result<Vec<LeasedJob>> {
        self.lease_until(req, std::future::pending::<()>()).await
    }

    /// [`AsyncRelay::lease`], giving up its wait as soon as `stop` completes,
    /// and then returning an empty list. A claim already sent to the writer
    /// is awaited first, so no job it leased is lost.
    ///
    /// # Errors
    ///
    /// As [`Relay::lease`].
    pub async fn lease_until(&self, req: LeaseRequest, stop: impl std::future::Future) -> Result<Vec<LeasedJob>> {
        self.lease_valid(req.validate(&self.engine.options.limits)?, stop).await
    }

    async fn lease_valid(&self, req: ValidLease, stop: impl std::future::Future) -> Result<Vec<LeasedJob>> {
        let deadline = Instant::now() + req.wait;
        let mut stop = std::pin::pin!(stop);
        loop {
            let seen = self.engine.deliver.ready.generation();
            let batch = self.engine.run_async(self.engine.lease_op(req.clone())).await?;
            let Some(until) = self.engine.wait_until(&batch, deadline) else {
                return Ok(batch.jobs);
            };
            let mut woken = std::pin::pin!(self.engine.deliver.ready.wait_async(seen, until));
            // Whichever comes first: a wake-up (or the deadline), or `stop`.
            let stopped = std::future::poll_fn(|cx| {
                if std::future::Future::poll(stop.as_mut(), cx).is_ready() {
                    return std::task::Poll::Ready(true);
                }
                std::future::Future::poll(woken.as_mut(), cx).map(|()| false)
            })
            .await;
            if stopped {
                return Ok(Vec::new());
            }
        }
    }

    /// [`Relay::result`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::result`].
    pub async fn result(&self, id: crate::JobId, timeout: std::time::Duration) -> Result<Option<crate::Job>> {
        self.result_until(id, timeout, std::future::pending::<()>()).await
    }

    /// [`AsyncRelay::result`], giving up its wait (answering the job as it
    /// is then) as soon as `stop` completes: a server shutting down.
    ///
    /// # Errors
    ///
    /// As [`Relay::result`].
    pub async fn result_until(
        &self,
        id: crate::JobId,
        timeout: std::time::Duration,
        stop: impl std::future::Future,
    ) -> Result<Option<crate::Job>> {
        let deadline = crate::relay::far_deadline(timeout);
        let mut stop = std::pin::pin!(stop);
        let awaiting = self.engine.deliver.finished.register(id);
        loop {
            let job = self.get(id).await?;
            if job.state().is_finished() {
                return Ok(Some(job));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let until = deadline.min(now + self.engine.options.poll_interval);
            let mut woken = std::pin::pin!(tokio::time::timeout_at(until.into(), awaiting.rx.recv_async()));
            let stopped = std::future::poll_fn(|cx| {
                if std::future::Future::poll(stop.as_mut(), cx).is_ready() {
                    return std::task::Poll::Ready(true);
                }
                std::future::Future::poll(woken.as_mut(), cx).map(|_| false)
            })
            .await;
            if stopped {
                return Ok(None);
            }
        }
    }

    /// [`Relay::complete_and_lease`], as a future, giving up its wait (when
    /// `batch` is empty and it waits) as soon as `stop` completes, as
    /// [`AsyncRelay::lease_until`] does.
    ///
    /// # Errors
    ///
    /// As [`Relay::complete_and_lease`].
    pub async fn complete_and_lease_until(
        &self,
        batch: Vec<Completion>,
        lease: LeaseRequest,
        stop: impl std::future::Future,
    ) -> Result<Worked> {
        let req = lease.validate(&self.engine.options.limits)?;
        if batch.is_empty() {
            let jobs = self.lease_valid(req, stop).await?;
            return Ok(Worked {
                completions: Vec::new(),
                earlier: Vec::new(),
                jobs,
            });
        }
        self.engine
            .run_async(self.engine.complete_and_lease_op(batch, req))
            .await
    }

    /// [`Relay::options`].
    pub fn options(&self) -> &crate::Options {
        &self.engine.options
    }

    /// As [`Relay::store_info`].
    pub fn store_info(&self) -> StoreInfo {
        self.engine.store_info()
    }

    /// Runs a read on a blocking thread: store drivers may block (and the
    /// PostgreSQL one must not run inside the async runtime).
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Engine) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let engine = Arc::clone(&self.engine);
        tokio::task::spawn_blocking(move || crate::engine::executor::on_blocking_pool(|| f(&engine)))
            .await
            .map_err(|_| Error::Closed)?
    }

    /// As [`Relay::metrics`].
    pub fn metrics(&self) -> Metrics {
        self.engine.deliver.counters.snapshot()
    }

    /// [`Relay::queue_waits`].
    pub fn queue_waits(&self) -> Vec<crate::QueueWait> {
        self.engine.deliver.counters.queue_waits()
    }

    /// [`Relay::job_runs`].
    pub fn job_runs(&self) -> Vec<crate::QueueWait> {
        self.engine.deliver.counters.job_runs()
    }

    /// [`Relay::job_outcomes`].
    pub fn job_outcomes(&self) -> Vec<crate::JobOutcomes> {
        self.engine.deliver.counters.job_outcomes()
    }

    /// [`Relay::health`].
    pub fn health(&self) -> crate::Health {
        self.engine.health()
    }
}
