//! [`AsyncRelay`]: the calls of [`Relay`] as futures, on the same engine.

use crate::engine::calls::{AfterFailure, SimpleAction};
use crate::engine::metrics::Metrics;
use crate::engine::reads::{Stats, StoreInfo};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::relay::{first, single};
// The docs of each method point to its blocking twin.
use crate::request::{Completion, LeaseRequest, LeasedJob, NewJob, NewSchedule, Submitted, ValidLease, Worked};
#[cfg(doc)]
use crate::Relay;
use relay_core::read::{DeadGroup, Event, JobFilter, Throughput};
use relay_core::{Job, JobId, JobStatus, LeaseToken, QueueLimits, Schedule, Timestamp};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
        job: NewJob,
    ) -> Result<JobId> {
        let (job, delay_ms) = self.engine.for_pg(job)?;
        let id = relay_postgres::submit_in(tx, &crate::within::pg_args(&job, delay_ms))
            .await
            .map_err(crate::within::from_within)?;
        Ok(JobId(id))
    }

    /// [`Relay::submit`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::submit`].
    pub async fn submit(&self, job: NewJob) -> Result<JobId> {
        self.submit_outcome(job).await.map(|s| s.id)
    }

    /// [`Relay::submit_outcome`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::submit_outcome`].
    pub async fn submit_outcome(&self, job: NewJob) -> Result<Submitted> {
        first(self.engine.run_async(self.engine.submit_op(vec![job])?).await?)
    }

    /// [`Relay::submit_batch`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::submit_batch`].
    pub async fn submit_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<JobId>> {
        let done = self.engine.run_async(self.engine.submit_op(jobs)?).await?;
        Ok(done.into_iter().map(|s| s.id).collect())
    }

    /// [`Relay::submit_batch_outcome`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::submit_batch`].
    pub async fn submit_batch_outcome(&self, jobs: Vec<NewJob>) -> Result<Vec<Submitted>> {
        self.engine.run_async(self.engine.submit_op(jobs)?).await
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

    /// [`Relay::ack`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::ack`].
    pub async fn ack(&self, id: JobId, token: LeaseToken, result: Option<Vec<u8>>) -> Result<()> {
        self.engine.run_async(self.engine.ack_op(id, token, result)?).await
    }

    /// [`Relay::nack`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::nack`].
    pub async fn nack(
        &self,
        id: JobId,
        token: LeaseToken,
        error: &str,
        retry_in: Option<Duration>,
    ) -> Result<JobStatus> {
        self.engine
            .run_async(self.engine.nack_op(id, token, error, AfterFailure::Retry(retry_in)))
            .await
    }

    /// [`Relay::nack_permanent`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::nack_permanent`].
    pub async fn nack_permanent(&self, id: JobId, token: LeaseToken, error: &str) -> Result<JobStatus> {
        self.engine
            .run_async(self.engine.nack_op(id, token, error, AfterFailure::Dead))
            .await
    }

    /// [`Relay::complete_batch`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::complete_batch`].
    pub async fn complete_batch(&self, batch: Vec<Completion>) -> Result<Vec<Result<JobStatus>>> {
        self.engine.run_async(self.engine.complete_op(batch)).await
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
                jobs,
            });
        }
        self.engine
            .run_async(self.engine.complete_and_lease_op(batch, req))
            .await
    }

    /// [`Relay::extend_batch`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::extend_batch`].
    pub async fn extend_batch(&self, leases: Vec<(JobId, LeaseToken, Duration)>) -> Result<Vec<Result<Timestamp>>> {
        self.engine.run_async(self.engine.extend_batch_op(leases)).await
    }

    /// [`Relay::complete`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::complete`].
    pub async fn complete(&self, completion: Completion) -> Result<JobStatus> {
        single(self.complete_batch(vec![completion]).await?)
    }

    /// [`Relay::extend`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::extend`].
    pub async fn extend(&self, id: JobId, token: LeaseToken, lease_for: Duration) -> Result<Timestamp> {
        self.engine
            .run_async(self.engine.extend_op(id, token, lease_for)?)
            .await
    }

    /// [`Relay::progress`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::progress`].
    pub async fn progress(&self, id: JobId, token: LeaseToken, fraction: f64, message: Option<&str>) -> Result<()> {
        self.engine
            .run_async(self.engine.progress_op(id, token, fraction, message)?)
            .await
    }

    /// [`Relay::release`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::release`].
    pub async fn release(&self, id: JobId, token: LeaseToken) -> Result<()> {
        self.engine
            .run_async(self.engine.action_op(id, SimpleAction::Release(token)))
            .await
    }

    /// [`Relay::snooze`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::snooze`].
    pub async fn snooze(&self, id: JobId, token: LeaseToken, delay: Duration) -> Result<Timestamp> {
        self.engine.run_async(self.engine.snooze_op(id, token, delay)).await
    }

    /// [`Relay::pause`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::pause`].
    pub async fn pause(&self, queue: &str) -> Result<()> {
        self.engine.run_async(self.engine.pause_op(queue, true)?).await
    }

    /// [`Relay::resume`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::resume`].
    pub async fn resume(&self, queue: &str) -> Result<()> {
        self.engine.run_async(self.engine.pause_op(queue, false)?).await
    }

    /// [`Relay::set_queue_limits`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::set_queue_limits`].
    pub async fn set_queue_limits(&self, queue: &str, limits: QueueLimits) -> Result<()> {
        self.engine.run_async(self.engine.limits_op(queue, limits)?).await
    }

    /// [`Relay::add_schedule`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::add_schedule`].
    pub async fn add_schedule(&self, schedule: NewSchedule) -> Result<Schedule> {
        self.engine.run_async(self.engine.add_schedule_op(schedule)?).await
    }

    /// [`Relay::remove_schedule`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::remove_schedule`].
    pub async fn remove_schedule(&self, name: &str) -> Result<()> {
        self.engine.run_async(self.engine.remove_schedule_op(name)).await
    }

    /// [`Relay::pause_schedule`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::pause_schedule`].
    pub async fn pause_schedule(&self, name: &str) -> Result<Schedule> {
        self.engine.run_async(self.engine.pause_schedule_op(name, true)).await
    }

    /// [`Relay::resume_schedule`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::resume_schedule`].
    pub async fn resume_schedule(&self, name: &str) -> Result<Schedule> {
        self.engine.run_async(self.engine.pause_schedule_op(name, false)).await
    }

    /// [`Relay::put_mark`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::put_mark`].
    pub async fn put_mark(&self, key: &str, value: &str, keep: std::time::Duration) -> Result<bool> {
        self.engine.run_async(self.engine.put_mark_op(key, value, keep)?).await
    }

    /// [`Relay::mark`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::mark`].
    pub async fn mark(&self, key: &str) -> Result<Option<String>> {
        let key = key.to_owned();
        self.read(move |e| {
            let now = e.options.clock.now();
            e.readers.with(|r| r.mark_get(&key, now))
        })
        .await
    }

    /// [`Relay::schedules`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::schedules`].
    pub async fn schedules(&self) -> Result<Vec<Schedule>> {
        self.read(|e| e.readers.with(|r| r.schedules())).await
    }

    /// [`Relay::run_schedules`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::run_schedules`].
    pub async fn run_schedules(&self) -> Result<usize> {
        self.engine.run_async(self.engine.run_schedules_op()).await
    }

    /// [`Relay::cancel`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::cancel`].
    pub async fn cancel(&self, id: JobId) -> Result<()> {
        self.engine
            .run_async(self.engine.action_op(id, SimpleAction::Cancel))
            .await
    }

    /// [`Relay::retry`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::retry`].
    pub async fn retry(&self, id: JobId) -> Result<()> {
        self.engine
            .run_async(self.engine.action_op(id, SimpleAction::Retry))
            .await
    }

    /// [`Relay::delete`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::delete`].
    pub async fn delete(&self, id: JobId) -> Result<()> {
        self.engine
            .run_async(self.engine.action_op(id, SimpleAction::Delete))
            .await
    }

    /// [`Relay::append_event`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::append_event`].
    pub async fn append_event(&self, id: JobId, kind: &str, data: &serde_json::Value) -> Result<i64> {
        self.engine
            .run_async(self.engine.append_event_op(id, kind, data)?)
            .await
    }

    /// [`Relay::reap_expired`], as a future.
    ///
    /// # Errors
    ///
    /// As [`Relay::reap_expired`].
    pub async fn reap_expired(&self) -> Result<usize> {
        self.engine.run_async(self.engine.reap_op()).await
    }

    /// [`Relay::get`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::get`].
    pub async fn get(&self, id: JobId) -> Result<Job> {
        self.read(move |e| e.get(id)).await
    }

    /// [`Relay::events`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::events`].
    pub async fn events(&self, id: JobId) -> Result<Vec<Event>> {
        self.read(move |e| e.events(id)).await
    }

    /// [`Relay::events_page`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::events_page`].
    pub async fn events_page(&self, id: JobId, after: i64, limit: u32) -> Result<crate::EventPage> {
        self.read(move |e| e.events_page(id, after, limit)).await
    }

    /// [`Relay::list`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::list`].
    pub async fn list(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        crate::engine::search::check_filter(filter)?;
        let filter = filter.clone();
        self.read(move |e| e.readers.with(|r| r.job_list(&filter))).await
    }

    /// [`Relay::list_page`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::list`].
    pub async fn list_page(&self, filter: &JobFilter, max_bytes: usize) -> Result<crate::JobPage> {
        let filter = filter.clone();
        self.read(move |e| e.list_page(&filter, max_bytes)).await
    }

    /// [`Relay::retry_matching`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::retry_matching`].
    pub async fn retry_matching(&self, filter: &JobFilter) -> Result<u64> {
        let filter = filter.clone();
        self.read(move |e| e.bulk(&filter, crate::engine::search::Bulk::Retry))
            .await
    }

    /// [`Relay::cancel_matching`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::cancel_matching`].
    pub async fn cancel_matching(&self, filter: &JobFilter) -> Result<u64> {
        let filter = filter.clone();
        self.read(move |e| e.bulk(&filter, crate::engine::search::Bulk::Cancel))
            .await
    }

    /// [`Relay::delete_matching`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::delete_matching`].
    pub async fn delete_matching(&self, filter: &JobFilter) -> Result<u64> {
        let filter = filter.clone();
        self.read(move |e| e.bulk(&filter, crate::engine::search::Bulk::Delete))
            .await
    }

    /// [`Relay::dead_groups`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::dead_groups`].
    pub async fn dead_groups(&self, limit: u32) -> Result<Vec<DeadGroup>> {
        crate::engine::search::check_limit(limit)?;
        self.read(move |e| e.readers.with(|r| r.job_dead_groups(limit))).await
    }

    /// [`Relay::stats`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::stats`].
    pub async fn stats(&self) -> Result<Stats> {
        self.read(Engine::stats).await
    }

    /// [`Relay::stats_page`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::stats_page`].
    pub async fn stats_page(&self, after: Option<String>, limit: u32) -> Result<crate::StatsPage> {
        self.read(move |e| e.stats_page(after.as_deref(), limit)).await
    }

    /// [`Relay::queue_stats`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::queue_stats`].
    pub async fn queue_stats(&self, queue: String) -> Result<crate::QueueStats> {
        self.read(move |e| e.queue_stats(&queue)).await
    }

    /// [`Relay::worker_beat`], without blocking.
    ///
    /// # Errors
    ///
    /// As [`Relay::worker_beat`].
    pub async fn worker_beat(&self, beat: &crate::WorkerBeat) -> Result<()> {
        self.engine
            .run_async(self.engine.worker_beat_op(beat, false, crate::WorkerClaim::Local)?)
            .await
    }

    /// [`Relay::worker_stopped`], without blocking.
    ///
    /// # Errors
    ///
    /// As [`Relay::worker_beat`].
    pub async fn worker_stopped(&self, beat: &crate::WorkerBeat) -> Result<()> {
        self.engine
            .run_async(self.engine.worker_beat_op(beat, true, crate::WorkerClaim::Local)?)
            .await
    }

    /// [`Relay::worker_beat_as`], without blocking.
    ///
    /// # Errors
    ///
    /// As [`Relay::worker_beat_as`].
    pub async fn worker_beat_as(
        &self,
        beat: &crate::WorkerBeat,
        stopped: bool,
        claim: crate::WorkerClaim,
    ) -> Result<()> {
        self.engine
            .run_async(self.engine.worker_beat_op(beat, stopped, claim)?)
            .await
    }

    /// [`Relay::workers`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::workers`].
    pub async fn workers(&self) -> Result<Vec<crate::WorkerView>> {
        self.read(|e| e.workers()).await
    }

    /// [`Relay::workers_page`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::workers_page`].
    pub async fn workers_page(&self, after: Option<String>, limit: u32) -> Result<crate::WorkerPage> {
        self.read(move |e| e.workers_page(after.as_deref(), limit)).await
    }

    /// [`Relay::prune_from`], without blocking.
    ///
    /// # Errors
    ///
    /// As [`Relay::prune`].
    pub async fn prune_from(&self, after: JobId) -> Result<crate::Pruned> {
        self.engine.run_async(self.engine.prune_op(after)).await
    }

    /// [`Relay::set_retention`], without blocking.
    ///
    /// # Errors
    ///
    /// As [`Relay::set_retention`].
    pub async fn set_retention(&self, queue: &str, retention: crate::Retention) -> Result<()> {
        self.engine.run_async(self.engine.retention_op(queue, retention)?).await
    }

    /// [`Relay::queue_totals`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::queue_totals`].
    pub async fn queue_totals(&self) -> Result<crate::QueueTotals> {
        self.read(|e| e.queue_totals()).await
    }

    /// [`Relay::busiest_queues`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::busiest_queues`].
    pub async fn busiest_queues(&self, limit: u32) -> Result<Stats> {
        self.read(move |e| e.busiest_queues(limit)).await
    }

    /// [`Relay::throughput`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::throughput`].
    pub async fn throughput(&self, since: Timestamp) -> Result<Vec<Throughput>> {
        self.read(move |e| e.readers.with(|r| r.throughput(since))).await
    }

    /// [`Relay::throughput_of`], on a blocking thread.
    ///
    /// # Errors
    ///
    /// As [`Relay::throughput`].
    pub async fn throughput_of(&self, since: Timestamp, queue: Option<String>) -> Result<Vec<Throughput>> {
        self.read(move |e| e.readers.with(|r| r.throughput_of(since, queue.as_deref())))
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
    async fn read<T: Send + 'static>(&self, f: impl FnOnce(&Engine) -> Result<T> + Send + 'static) -> Result<T> {
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
