//! What a handler sees of its job, and what it returns.

use super::Backend;
use crate::LeasedJob;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a handler returns: `Ok(result)` acks the job (with the optional
/// result bytes), `Err` nacks it.
pub type JobResult = Result<Option<Vec<u8>>, JobError>;

/// Why a job failed, and what should happen next.
///
/// Any `std::error::Error` converts into one with `?`, as a retryable
/// failure using the back-off policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobError {
    /// What went wrong: recorded as the job's last error.
    pub message: String,
    /// Retry after this long instead of the back-off policy's delay.
    pub retry_in: Option<Duration>,
    /// No retry can fix it: the job becomes DEAD now.
    pub permanent: bool,
    /// Not a failure: run the job again after this long, the attempt not
    /// counted (see [`JobError::snooze`]).
    pub snooze: Option<Duration>,
}

impl JobError {
    /// A failure to retry with back-off.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retry_in: None,
            permanent: false,
            snooze: None,
        }
    }

    /// Not a failure: the job cannot run yet (a resource still being
    /// prepared, an upstream rate limit). It is READY again after `d`, the
    /// attempt is not counted, and its event log says "snoozed".
    ///
    /// ```
    /// use relay::worker::JobError;
    /// use std::time::Duration;
    /// let later = JobError::snooze(Duration::from_secs(600));
    /// assert_eq!(later.snooze, Some(Duration::from_secs(600)));
    /// ```
    pub fn snooze(d: Duration) -> Self {
        Self {
            message: format!("snoozed for {d:?}"),
            retry_in: None,
            permanent: false,
            snooze: Some(d),
        }
    }

    /// A failure that no retry can fix.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retry_in: None,
            permanent: true,
            snooze: None,
        }
    }

    /// Retry after `d` instead of the back-off policy's delay.
    #[must_use]
    pub fn retry_in(mut self, d: Duration) -> Self {
        self.retry_in = Some(d);
        self
    }
}

impl<E: std::error::Error> From<E> for JobError {
    fn from(e: E) -> Self {
        JobError::new(e.to_string())
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A running job, as its handler sees it.
#[derive(Clone)]
pub struct JobContext {
    job: Arc<LeasedJob>,
    backend: Arc<dyn Backend>,
    /// The worker's runtime: the blocking calls run their future on it.
    runtime: tokio::runtime::Handle,
    lost: Arc<AtomicBool>,
}

impl std::fmt::Debug for JobContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobContext")
            .field("id", &self.job.id)
            .field("kind", &self.job.kind)
            .field("attempt", &self.job.attempt)
            .field("token", &self.job.token)
            .field("lost", &self.lost.load(std::sync::atomic::Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl JobContext {
    pub(crate) fn new(job: LeasedJob, backend: Arc<dyn Backend>, runtime: tokio::runtime::Handle) -> Self {
        Self {
            job: Arc::new(job),
            backend,
            runtime,
            lost: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Now, by the backend's clock.
    pub(crate) fn now(&self) -> crate::Timestamp {
        self.backend.now()
    }

    /// Runs a call to the backend to its end from blocking code (a sync
    /// handler, or a thread it started), on a thread of its own with the
    /// worker's runtime. A backend that needs the runtime's drivers (a
    /// server's, over HTTP) is driven by the runtime's worker threads: from
    /// async code, use the `_async` methods, which never block one. A call
    /// the stopped runtime cannot finish answers [`crate::Error::Closed`].
    fn block_on<T: Send>(&self, call: super::BoxFuture<'_, crate::Result<T>>) -> crate::Result<T> {
        std::thread::scope(|s| {
            match std::thread::Builder::new()
                .name("relay-call".into())
                .spawn_scoped(s, || self.runtime.block_on(call))
            {
                Ok(t) => t.join().unwrap_or(Err(crate::Error::Closed)),
                Err(e) => Err(crate::Error::resources("a thread for a worker's call", e)),
            }
        })
    }

    /// The leased job: its id, token, payload, attempt, lease...
    pub fn job(&self) -> &LeasedJob {
        &self.job
    }

    /// The job's id.
    pub fn id(&self) -> crate::JobId {
        self.job.id
    }

    /// The job's kind.
    pub fn kind(&self) -> &str {
        &self.job.kind
    }

    /// The bytes the job was submitted with.
    pub fn payload(&self) -> &[u8] {
        &self.job.payload
    }

    /// The payload parsed as JSON into `T`.
    ///
    /// # Errors
    ///
    /// A permanent [`JobError`] when the payload is not JSON of that shape:
    /// returned from the handler with `?`, it makes the job DEAD at once (no
    /// retry can fix its payload).
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, JobError> {
        serde_json::from_slice(&self.job.payload)
            .map_err(|e| JobError::permanent(format!("payload is not the expected JSON: {e}")))
    }

    /// 1 for the first attempt.
    pub fn attempt(&self) -> u32 {
        self.job.attempt
    }

    /// The W3C trace context the job was submitted in
    /// ([`crate::NewJob::traceparent`]), for handlers that carry the trace
    /// on by hand (outgoing requests, their own telemetry). With the
    /// `opentelemetry` feature the handler already runs in a span
    /// (`relay.job`) that continues it.
    pub fn traceparent(&self) -> Option<&str> {
        self.job.traceparent.as_deref()
    }

    /// Appends an event (progress, a log line) to the job's event log;
    /// returns its sequence number. Blocks until it is committed; from async
    /// code use [`JobContext::event_async`].
    ///
    /// # Errors
    ///
    /// As [`crate::Relay::append_event`]. The lease is not checked: the event is
    /// recorded even after the lease is lost, as long as the job exists.
    pub fn event(&self, kind: &str, data: &serde_json::Value) -> crate::Result<i64> {
        self.block_on(self.backend.append_event(self.job.id, kind.to_owned(), data.clone()))
    }

    /// [`JobContext::event`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Relay::append_event`].
    pub async fn event_async(&self, kind: &str, data: &serde_json::Value) -> crate::Result<i64> {
        self.backend
            .append_event(self.job.id, kind.to_owned(), data.clone())
            .await
    }

    /// Reports how far along the job is (`fraction` from 0 to 1, and what
    /// the handler is doing): kept on the job for the dashboard and
    /// `relay show`, and a "progress" event. Blocks until it is committed;
    /// from async code use [`JobContext::progress_async`].
    ///
    /// # Errors
    ///
    /// As [`crate::Relay::progress`]: [`crate::Error::LeaseLost`] once the lease
    /// is gone.
    pub fn progress(&self, fraction: f64, message: Option<&str>) -> crate::Result<()> {
        let message = message.map(str::to_owned);
        self.block_on(self.backend.progress(self.job.id, self.job.token, fraction, message))
    }

    /// [`JobContext::progress`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Relay::progress`].
    pub async fn progress_async(&self, fraction: f64, message: Option<&str>) -> crate::Result<()> {
        let message = message.map(str::to_owned);
        self.backend
            .progress(self.job.id, self.job.token, fraction, message)
            .await
    }

    /// True once the job's lease is lost (it expired, was cancelled, or the
    /// worker is stopping at once): a long handler should stop early, its
    /// result will be refused.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    pub(crate) fn mark_lost(&self) {
        self.lost.store(true, Ordering::Relaxed);
    }
}
