//! Where a worker leases its jobs and reports what became of them: this
//! process's store ([`AsyncRelay`]) or a Relay server elsewhere (`relay
//! work --server` implements this over HTTP). The runtime (heartbeats,
//! presence, drain, progress, timeouts, panics, shutdown) is written once,
//! over this trait.

use crate::{AsyncRelay, Completion, Error, JobId, JobState, LeaseRequest, LeaseToken, LeasedJob, Result, Timestamp};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A boxed future: what [`Backend`]'s calls answer.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the runtime asks a backend to lease.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseAsk {
    /// The queues to lease from.
    pub queues: Vec<String>,
    /// The lease holder: the worker's id.
    pub worker: String,
    /// At most this many jobs (1-1000).
    pub max: u32,
    /// How long each lease lasts before a heartbeat renews it.
    pub lease_for: Duration,
    /// How long to wait for a job when none is ready.
    pub wait: Duration,
}

impl LeaseAsk {
    /// The same request as a [`LeaseRequest`].
    pub fn request(&self) -> LeaseRequest {
        LeaseRequest::new(self.queues.clone())
            .worker(self.worker.clone())
            .max(self.max)
            .lease_for(self.lease_for)
            .wait(self.wait)
    }
}

/// Where a [`crate::worker::Worker`] talks to. Each call is one request (a
/// write, a read); the runtime decides when to make it.
///
/// Errors are [`Error`]s: a job no longer held answers
/// [`Error::LeaseLost`] or [`Error::InvalidState`]; a backend elsewhere that
/// cannot be reached answers [`Error::Backend`] with `transient` set (the
/// runtime tries again with back-off), and one that refuses the worker
/// (its token, an answer it cannot read) with `transient` unset (the
/// worker stops and [`crate::worker::Worker::run`] returns it).
pub trait Backend: Send + Sync + 'static {
    /// Leases up to `lease.max` jobs, waiting up to `lease.wait` for one.
    /// Once `stop` resolves it answers at once, with no jobs: any it leased
    /// meanwhile are given back.
    fn lease<'a>(&'a self, lease: LeaseAsk, stop: BoxFuture<'a, ()>) -> BoxFuture<'a, Result<Vec<LeasedJob>>>;

    /// Records outcomes, each on its own: the job's state after it, or why
    /// it was refused.
    fn complete(&self, batch: Vec<Completion>) -> BoxFuture<'_, Result<Vec<Result<JobState>>>>;

    /// Extends a lease by `lease_for` from now.
    fn extend(&self, id: JobId, token: LeaseToken, lease_for: Duration) -> BoxFuture<'_, Result<()>>;

    /// Gives a job back untried.
    fn release(&self, id: JobId, token: LeaseToken) -> BoxFuture<'_, Result<()>>;

    /// Records the worker's heartbeat (`stopped`: its last, it stopped).
    fn beat(&self, beat: crate::WorkerBeat, stopped: bool) -> BoxFuture<'_, Result<()>>;

    /// Appends an event to a job's log; answers its number.
    fn append_event(&self, id: JobId, kind: String, data: serde_json::Value) -> BoxFuture<'_, Result<i64>>;

    /// Records a running job's progress under its lease.
    fn progress(
        &self,
        id: JobId,
        token: LeaseToken,
        fraction: f64,
        message: Option<String>,
    ) -> BoxFuture<'_, Result<()>>;

    /// Records step `name`'s output under the job's lease: `None` when it
    /// is recorded, or the record of `name` that stood already (see
    /// [`crate::Relay::record_step`]).
    fn record_step(
        &self,
        id: JobId,
        token: LeaseToken,
        name: String,
        output: Vec<u8>,
    ) -> BoxFuture<'_, Result<Option<relay_core::Step>>>;

    /// Makes a completion token for the job held under `token`, open for
    /// `timeout` (see [`crate::Relay::create_token`]).
    fn create_token(
        &self,
        id: JobId,
        token: LeaseToken,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<crate::CompletionToken>>;

    /// The time now, by the backend's clock where the runtime can read it.
    fn now(&self) -> Timestamp;

    /// The limits a worker's settings (queue names, its name) are checked
    /// against before its first lease.
    fn limits(&self) -> relay_core::Limits;
}

impl Backend for AsyncRelay {
    fn lease<'a>(&'a self, lease: LeaseAsk, stop: BoxFuture<'a, ()>) -> BoxFuture<'a, Result<Vec<LeasedJob>>> {
        Box::pin(self.lease_until(lease.request(), stop))
    }

    fn complete(&self, batch: Vec<Completion>) -> BoxFuture<'_, Result<Vec<Result<JobState>>>> {
        Box::pin(async move {
            let done = self.complete_batch(batch).await?;
            Ok(done.into_iter().map(|r| r.map(|s| s.state)).collect())
        })
    }

    fn extend(&self, id: JobId, token: LeaseToken, lease_for: Duration) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { AsyncRelay::extend(self, id, token, lease_for).await.map(drop) })
    }

    fn release(&self, id: JobId, token: LeaseToken) -> BoxFuture<'_, Result<()>> {
        Box::pin(AsyncRelay::release(self, id, token))
    }

    fn beat(&self, beat: crate::WorkerBeat, stopped: bool) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            if stopped {
                self.worker_stopped(&beat).await
            } else {
                self.worker_beat(&beat).await
            }
        })
    }

    fn append_event(&self, id: JobId, kind: String, data: serde_json::Value) -> BoxFuture<'_, Result<i64>> {
        Box::pin(async move { AsyncRelay::append_event(self, id, &kind, &data).await })
    }

    fn progress(
        &self,
        id: JobId,
        token: LeaseToken,
        fraction: f64,
        message: Option<String>,
    ) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move { AsyncRelay::progress(self, id, token, fraction, message.as_deref()).await })
    }

    fn record_step(
        &self,
        id: JobId,
        token: LeaseToken,
        name: String,
        output: Vec<u8>,
    ) -> BoxFuture<'_, Result<Option<relay_core::Step>>> {
        Box::pin(async move { AsyncRelay::record_step(self, id, token, &name, output).await })
    }

    fn create_token(
        &self,
        id: JobId,
        token: LeaseToken,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<crate::CompletionToken>> {
        Box::pin(AsyncRelay::create_token(self, id, token, timeout))
    }

    fn now(&self) -> Timestamp {
        self.options().clock.now()
    }

    fn limits(&self) -> relay_core::Limits {
        self.options().limits.clone()
    }
}

/// Whether trying the call again later may succeed: a backend that could
/// not be reached or answered that it cannot now, or a store that was
/// busy or failed to write.
pub(crate) fn transient(e: &Error) -> bool {
    match e {
        Error::Backend { transient, .. } => *transient,
        Error::Busy | Error::Storage(_) | Error::MaybeApplied(_) | Error::Resources { .. } => true,
        _ => false,
    }
}

/// Whether the error will not pass however long the worker waits: the
/// relay is closed, the store refuses the request as invalid, or a backend
/// elsewhere refuses the worker (its token, an answer it cannot read).
pub(crate) fn fatal(e: &Error) -> bool {
    matches!(
        e,
        Error::Closed | Error::InvalidInput(_) | Error::Backend { transient: false, .. }
    )
}
