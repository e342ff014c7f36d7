//! What a handler sees of its job, and what it returns.

use super::Backend;
use crate::LeasedJob;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
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
    /// Not a failure: the job sleeps or waits for an event, holding no
    /// worker (see [`JobContext::sleep`], [`JobContext::wait_event`]).
    pub park: Option<Box<Park>>,
}

/// How a handler parks its job ([`JobError::park`]): the job gives its
/// lease back and is WAITING, holding no worker and no attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Park {
    /// Asleep under step `step` until `until`.
    Sleep {
        /// The sleep's step.
        step: String,
        /// When it wakes.
        until: crate::Timestamp,
    },
    /// Waiting for event `key` under step `step` until `until`.
    Wait {
        /// The wait's step.
        step: String,
        /// The event's key.
        key: String,
        /// When it gives up.
        until: crate::Timestamp,
    },
    /// Awaiting job `child`'s end under step `step`.
    Join {
        /// The join's step.
        step: String,
        /// The job awaited.
        child: crate::JobId,
    },
}

impl Park {
    /// When the job wakes at the latest (`None`: when its child ends).
    pub fn until(&self) -> Option<crate::Timestamp> {
        match self {
            Self::Sleep { until, .. } | Self::Wait { until, .. } => Some(*until),
            Self::Join { .. } => None,
        }
    }
}

impl JobError {
    /// A failure to retry with back-off.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retry_in: None,
            permanent: false,
            snooze: None,
            park: None,
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
            park: None,
        }
    }

    /// A failure that no retry can fix.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retry_in: None,
            permanent: true,
            snooze: None,
            park: None,
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
    /// Each step's recorded output: those the lease carried, and those this
    /// run recorded since.
    steps: Arc<Mutex<HashMap<String, Arc<[u8]>>>>,
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
        let steps = job
            .steps
            .iter()
            .map(|s| (s.name.clone(), Arc::from(s.output.as_slice())))
            .collect();
        Self {
            job: Arc::new(job),
            backend,
            runtime,
            lost: Arc::new(AtomicBool::new(false)),
            steps: Arc::new(Mutex::new(steps)),
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

    /// Runs step `name` of the job once, whatever happens to the worker:
    /// when an earlier run of the job recorded it, returns the recorded
    /// output without calling `f`; otherwise calls `f`, records what it
    /// returns under the job's lease (durably, before this returns) and
    /// returns it. The output is JSON (`T` is serialized with serde).
    ///
    /// Code outside steps runs again on every attempt; a step's body runs
    /// again only when its worker died (or lost its lease) between the
    /// body's end and the record. Give a side effect in a step an
    /// idempotency key ([`JobContext::key`]) so that the other system
    /// drops its repeat. A `f` that fails records nothing: its error is
    /// returned, and the next attempt runs the step again. Blocks until the
    /// record is committed; from async code use
    /// [`JobContext::step_async`].
    ///
    /// ```no_run
    /// # fn charge(_: &str, _: u64) -> Result<String, relay::worker::JobError> { Ok("ch_1".into()) }
    /// # fn h(ctx: relay::worker::JobContext) -> relay::worker::JobResult {
    /// let charge_id: String = ctx.step("charge", || charge(&ctx.key("charge"), 4200))?;
    /// ctx.step("email", || Ok(format!("receipt for {charge_id} sent")))?;
    /// # Ok(None) }
    /// ```
    ///
    /// # Errors
    ///
    /// `f`'s error; a [`JobError`] when the lease is lost (the job's next
    /// holder goes on; this run's result will be refused), when a recorded
    /// output is not JSON of type `T` (permanent), or when the record is
    /// refused (a name over 256 characters, the job's 1,000 steps or 1 MiB
    /// of output: permanent).
    pub fn step<T, F>(&self, name: &str, f: F) -> Result<T, JobError>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnOnce() -> Result<T, JobError>,
    {
        if let Some(out) = self.recorded(name) {
            return decode_step(name, &out);
        }
        let value = f()?;
        let output = encode_step(name, &value)?;
        match self.block_on(Box::pin(self.record(name, output))) {
            Ok(None) => Ok(value),
            Ok(Some(earlier)) => decode_step(name, &earlier),
            Err(e) => Err(self.step_failed(name, e)),
        }
    }

    /// [`JobContext::step`] for an async body, as a future.
    ///
    /// # Errors
    ///
    /// As [`JobContext::step`].
    pub async fn step_async<T, F, Fut>(&self, name: &str, f: F) -> Result<T, JobError>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<T, JobError>>,
    {
        if let Some(out) = self.recorded(name) {
            return decode_step(name, &out);
        }
        let value = f().await?;
        let output = encode_step(name, &value)?;
        match self.record(name, output).await {
            Ok(None) => Ok(value),
            Ok(Some(earlier)) => decode_step(name, &earlier),
            Err(e) => Err(self.step_failed(name, e)),
        }
    }

    /// Sleeps for `d` without holding a worker: the job gives its lease
    /// back and is WAITING until then, when it is leased again (by this
    /// worker or another) and its handler runs from the start, passing its
    /// recorded steps and this sleep at once. Return its error with `?`:
    ///
    /// ```no_run
    /// # fn h(ctx: relay::worker::JobContext) -> relay::worker::JobResult {
    /// let charge: String = ctx.step("charge", || Ok("ch_1".to_owned()))?;
    /// ctx.sleep("cool-off", std::time::Duration::from_secs(86_400))?;
    /// ctx.step("email", || Ok(()))?;
    /// # Ok(None) }
    /// ```
    ///
    /// The sleep is recorded as step `name` when the job goes to sleep (the
    /// time it wakes): a run before that time sleeps until it, a run after
    /// it goes on at once. No attempt is spent.
    ///
    /// # Errors
    ///
    /// The [`JobError`] that puts the job to sleep (return it: the runtime
    /// records the sleep as the job's outcome); a permanent one when step
    /// `name` is recorded and is not a sleep.
    pub fn sleep(&self, name: &str, d: Duration) -> Result<(), JobError> {
        self.sleep_until(name, self.now().plus(d))
    }

    /// [`JobContext::sleep`] until a time rather than for a duration.
    ///
    /// # Errors
    ///
    /// As [`JobContext::sleep`].
    pub fn sleep_until(&self, name: &str, until: crate::Timestamp) -> Result<(), JobError> {
        let until = match self.recorded(name) {
            None => until,
            Some(out) => {
                let step = relay_core::Step {
                    name: name.to_owned(),
                    attempt: 0,
                    at: until,
                    output: out.to_vec(),
                };
                step.sleep_until().ok_or_else(|| {
                    JobError::permanent(format!(
                        "step {name:?} is recorded and is not a sleep; name the sleep anew"
                    ))
                })?
            }
        };
        if until <= self.now() {
            return Ok(());
        }
        Err(JobError {
            park: Some(Box::new(Park::Sleep {
                step: name.to_owned(),
                until,
            })),
            ..JobError::new(format!("asleep until {}", until.to_rfc3339()))
        })
    }

    /// Waits for event `key` (emitted by [`crate::Relay::emit`], `relay
    /// emit`, `POST /v1/events/{key}`) for at most `timeout`, without
    /// holding a worker: `Some(payload)` once it is emitted (at once when
    /// it was emitted already, in the last 7 days), `None` when `timeout`
    /// ran out first. Recorded as step `name`: a later run returns the same
    /// answer. The payload is JSON of type `T`.
    ///
    /// While the event has not come, this returns the [`JobError`] that
    /// parks the job: return it with `?`. The job gives its lease back and
    /// is WAITING until an emit of the key (which makes it READY in its
    /// own commit) or the timeout; then its handler runs from the start,
    /// passing its recorded steps and this wait.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # fn h(ctx: relay::worker::JobContext) -> relay::worker::JobResult {
    /// let key = format!("shipped:{}", ctx.id());
    /// match ctx.wait_event::<serde_json::Value>("shipment", &key, Duration::from_secs(86_400))? {
    ///     Some(shipment) => { /* go on with it */ }
    ///     None => return Err(relay::worker::JobError::permanent("no shipment within a day")),
    /// }
    /// # Ok(None) }
    /// ```
    ///
    /// # Errors
    ///
    /// The [`JobError`] that parks the job (return it); a permanent one when
    /// step `name` is recorded and is not a wait's, or the payload is not
    /// JSON of type `T`.
    pub fn wait_event<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
        key: &str,
        timeout: Duration,
    ) -> Result<Option<T>, JobError> {
        match self.wait_event_bytes(name, key, timeout)? {
            Some(p) => decode_step(name, &p).map(Some),
            None => Ok(None),
        }
    }

    /// [`JobContext::wait_event`] for a payload of any bytes.
    ///
    /// # Errors
    ///
    /// As [`JobContext::wait_event`].
    pub fn wait_event_bytes(&self, name: &str, key: &str, timeout: Duration) -> Result<Option<Vec<u8>>, JobError> {
        if let Some(out) = self.recorded(name) {
            return match relay_core::job::Waited::of(&out) {
                Some(relay_core::job::Waited::Event(p)) => Ok(Some(p)),
                Some(relay_core::job::Waited::TimedOut) => Ok(None),
                None => Err(JobError::permanent(format!(
                    "step {name:?} is recorded and is not a wait for an event; name the wait anew"
                ))),
            };
        }
        let until = self.now().plus(timeout);
        Err(JobError {
            park: Some(Box::new(Park::Wait {
                step: name.to_owned(),
                key: key.to_owned(),
                until,
            })),
            ..JobError::new(format!("waiting for event {key:?} until {}", until.to_rfc3339()))
        })
    }

    /// Makes a completion token once, as step `name`, open for `timeout`: a
    /// human or a third party completes it once, without an API token, by
    /// `POST`ing a JSON payload to its [`path`](crate::CompletionToken::path)
    /// on the server (or [`crate::Relay::complete_token`]). Hand its path
    /// to a vendor's webhook or put it in an approval email, then
    /// [`JobContext::wait_token`]. Every later run gets the same token.
    ///
    /// # Errors
    ///
    /// As [`JobContext::step`].
    pub fn token(&self, name: &str, timeout: Duration) -> Result<crate::CompletionToken, JobError> {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Recorded {
            token: String,
            expires_at_ms: i64,
        }
        let r: Recorded = self.step(name, || {
            let t = self
                .block_on(self.backend.create_token(self.job.id, self.job.token, timeout))
                .map_err(|e| self.step_failed(name, e))?;
            Ok(Recorded {
                token: t.text(),
                expires_at_ms: t.expires_at.as_millis(),
            })
        })?;
        let (id, secret) = r.token.split_once('.').ok_or_else(|| {
            JobError::permanent(format!(
                "step {name:?} is recorded and is not a token; name the token anew"
            ))
        })?;
        Ok(crate::CompletionToken {
            id: id.to_owned(),
            secret: secret.to_owned(),
            expires_at: crate::Timestamp::from_millis(r.expires_at_ms),
        })
    }

    /// Waits for completion token `token` to be completed, without holding
    /// a worker, as [`JobContext::wait_event_bytes`] waits for an event:
    /// `Some(payload)` once it is completed, `None` when it expired first.
    /// Recorded as step `name`.
    ///
    /// # Errors
    ///
    /// As [`JobContext::wait_event`].
    pub fn wait_token(&self, name: &str, token: &crate::CompletionToken) -> Result<Option<Vec<u8>>, JobError> {
        let now = self.now();
        let left = Duration::from_millis(u64::try_from(token.expires_at.as_millis() - now.as_millis()).unwrap_or(0));
        self.wait_event_bytes(name, &token.event_key(), left)
    }

    /// Submits a child job once, as step `name`: `submit` gets the step's
    /// idempotency key ([`JobContext::key`]) to give the job
    /// ([`crate::NewJob::idempotency_key`]), so a run again after a crash
    /// between the submit and its record finds the same job; the child's
    /// id is recorded and returned on every later run. Await it with
    /// [`JobContext::join`].
    ///
    /// ```no_run
    /// # fn h(relay: relay::Relay, ctx: relay::worker::JobContext) -> relay::worker::JobResult {
    /// use relay::NewJob;
    /// let label = ctx.spawn("label", |key| {
    ///     relay.submit(NewJob::new("labels", "print", b"{}".to_vec()).idempotency_key(key))
    /// })?;
    /// let printed = ctx.join("label-printed", label)?;
    /// # Ok(printed.result) }
    /// ```
    ///
    /// # Errors
    ///
    /// `submit`'s error (transient: the job is tried again), and as
    /// [`JobContext::step`].
    pub fn spawn<F>(&self, name: &str, submit: F) -> Result<crate::JobId, JobError>
    where
        F: FnOnce(String) -> crate::Result<crate::JobId>,
    {
        let key = self.key(name);
        self.step(name, || {
            submit(key)
                .map(|id| id.0)
                .map_err(|e| JobError::new(format!("step {name:?}: the child job was not submitted: {e}")))
        })
        .map(crate::JobId)
    }

    /// Awaits job `child`'s end without holding a worker: how it ended
    /// ([`crate::Joined`]: its state, its result or its last error) once it
    /// is SUCCEEDED, DEAD or CANCELLED. Until then the returned error parks
    /// the job WAITING on the child (return it with `?`), holding no lease
    /// and no attempt; the child's end records how it ended as step `name`
    /// and makes this job READY, and its handler runs again from the start,
    /// passing its recorded steps and this join at once.
    ///
    /// # Errors
    ///
    /// The [`JobError`] that parks the job; a permanent one when step
    /// `name` is recorded and is not a join.
    pub fn join(&self, name: &str, child: crate::JobId) -> Result<crate::Joined, JobError> {
        if let Some(out) = self.recorded(name) {
            return crate::Joined::of(&out).ok_or_else(|| {
                JobError::permanent(format!(
                    "step {name:?} is recorded and is not a join; name the join anew"
                ))
            });
        }
        Err(JobError {
            park: Some(Box::new(Park::Join {
                step: name.to_owned(),
                child,
            })),
            ..JobError::new(format!("awaiting job {child}"))
        })
    }

    /// An idempotency key for the side effect of step `name`: the same on
    /// every attempt of this job, different for every other job and step
    /// (`relay-<job id>-<name>`). Hand it to the system the step calls (a
    /// payment provider's `Idempotency-Key`, a unique column) so that a
    /// body run again after a crash changes nothing twice.
    pub fn key(&self, name: &str) -> String {
        format!("relay-{}-{name}", self.job.id.0)
    }

    /// The recorded output of step `name`, if it has one.
    pub fn step_output(&self, name: &str) -> Option<Vec<u8>> {
        self.recorded(name).map(|o| o.to_vec())
    }

    fn recorded(&self, name: &str) -> Option<Arc<[u8]>> {
        self.steps
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Records `output` for `name` (trying again while the backend cannot
    /// be reached and the lease holds): the output that stands, `None` when
    /// it is this one.
    async fn record(&self, name: &str, output: Vec<u8>) -> crate::Result<Option<Arc<[u8]>>> {
        let mut pause = Duration::from_millis(50);
        loop {
            let call = self
                .backend
                .record_step(self.job.id, self.job.token, name.to_owned(), output.clone());
            match call.await {
                Ok(earlier) => {
                    let standing: Arc<[u8]> = match &earlier {
                        Some(s) => Arc::from(s.output.as_slice()),
                        None => Arc::from(output),
                    };
                    self.steps
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(name.to_owned(), standing.clone());
                    return Ok(earlier.map(|_| standing));
                }
                Err(e) if super::backend::transient(&e) && !self.is_lost() => {
                    tracing::warn!(job = %self.job.id, step = name, error = %e, "cannot record a step yet; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn step_failed(&self, name: &str, e: crate::Error) -> JobError {
        match e {
            crate::Error::LeaseLost { .. } | crate::Error::InvalidState { .. } | crate::Error::NotFound { .. } => {
                self.mark_lost();
                JobError::new(format!(
                    "step {name:?} ran but its record was refused: {e} (the job's next run does the step again)"
                ))
            }
            crate::Error::StepBound { .. } | crate::Error::InvalidInput(_) => {
                JobError::permanent(format!("step {name:?} cannot be recorded: {e}"))
            }
            e => JobError::new(format!("step {name:?} ran but could not be recorded: {e}")),
        }
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

/// A step's value as the JSON it is recorded as.
fn encode_step<T: serde::Serialize>(name: &str, value: &T) -> Result<Vec<u8>, JobError> {
    serde_json::to_vec(value)
        .map_err(|e| JobError::permanent(format!("step {name:?}'s output does not serialize to JSON: {e}")))
}

/// A recorded output read back as a `T`.
fn decode_step<T: serde::de::DeserializeOwned>(name: &str, output: &[u8]) -> Result<T, JobError> {
    // An empty output was recorded as JSON null.
    let text: &[u8] = if output.is_empty() { b"null" } else { output };
    serde_json::from_slice(text).map_err(|e| {
        JobError::permanent(format!(
            "step {name:?}'s recorded output is not the JSON this handler expects ({e}); \
             a handler that changed a step's type must name the step anew"
        ))
    })
}
