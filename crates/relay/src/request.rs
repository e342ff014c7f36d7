//! What callers ask for, and the checked forms the writer receives. Every
//! check happens in the caller's thread, before the writer sees anything.

use relay_core::validate::truncate_error;
use relay_core::{
    DependencyFailure, InvalidInput, Job, JobId, JobStatus, LeaseToken, Limits, Priority, Recurrence, Timestamp,
};
use std::time::Duration;

/// A job to submit.
///
/// ```
/// use relay::NewJob;
/// use std::time::Duration;
/// let job = NewJob::new("emails", "send-welcome", br#"{"to":"ada@example.com"}"#.to_vec())
///     .priority(2)
///     .delay(Duration::from_secs(10))
///     .max_attempts(5)
///     .unique_key("welcome:ada");
/// ```
#[derive(Debug, Clone)]
pub struct NewJob {
    queue: String,
    kind: String,
    payload: Vec<u8>,
    priority: u8,
    when: When,
    max_attempts: Option<u32>,
    unique_key: Option<String>,
    idempotency_key: Option<String>,
    throttle: Option<Duration>,
    debounce: Option<Duration>,
    lease_for: Option<Duration>,
    timeout: Option<Duration>,
    depends_on: Vec<JobId>,
    on_dependency_failure: DependencyFailure,
    traceparent: Option<String>,
    tags: Vec<String>,
    group: Option<String>,
}

/// Longest [`NewJob::throttle`] period: 30 days.
pub const MAX_THROTTLE: Duration = Duration::from_secs(30 * 24 * 3600);

/// Longest [`NewJob::debounce`] window: 30 days.
pub const MAX_DEBOUNCE: Duration = MAX_THROTTLE;

#[derive(Debug, Clone, Copy)]
enum When {
    Now,
    After(Duration),
    At(Timestamp),
}

impl NewJob {
    /// A job of `kind` for `queue`, carrying `payload` (bytes, JSON by
    /// convention): priority 1, ready now, the Relay's
    /// [`Options::default_max_attempts`](crate::Options::default_max_attempts)
    /// attempts, no unique key. Nothing is checked until it is submitted.
    pub fn new(queue: impl Into<String>, kind: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        Self {
            queue: queue.into(),
            kind: kind.into(),
            payload: payload.into(),
            priority: Priority::NORMAL.get(),
            when: When::Now,
            max_attempts: None,
            unique_key: None,
            idempotency_key: None,
            throttle: None,
            debounce: None,
            lease_for: None,
            timeout: None,
            depends_on: Vec::new(),
            on_dependency_failure: DependencyFailure::Cancel,
            traceparent: None,
            tags: Vec::new(),
            group: None,
        }
    }

    /// The job waits (WAITING) until every one of these jobs has
    /// SUCCEEDED, then becomes READY (at its own delay or `run_at`, if
    /// that is later). If one of them ends DEAD or CANCELLED, this job is
    /// CANCELLED with the reason in its event log, unless
    /// [`NewJob::on_dependency_failure`] says to run it anyway. Jobs that
    /// have already succeeded count as done. At most 10,000 ids, or the
    /// submit is refused with
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) (field
    /// `depends_on`); each must name an existing job, or it is refused with
    /// [`Error::DependencyNotFound`](crate::Error::DependencyNotFound).
    /// Either way nothing is written. Since a job can only depend on jobs
    /// that exist before it, dependencies never form a cycle.
    #[must_use]
    pub fn depends_on(mut self, ids: impl IntoIterator<Item = JobId>) -> Self {
        self.depends_on.extend(ids);
        self
    }

    /// What becomes of this job if a job it depends on ends DEAD or
    /// CANCELLED: [`DependencyFailure::Cancel`] (the default) or
    /// [`DependencyFailure::Run`].
    #[must_use]
    pub fn on_dependency_failure(mut self, f: DependencyFailure) -> Self {
        self.on_dependency_failure = f;
        self
    }

    /// Priority class 0 (least urgent) to 3 (most urgent); default 1.
    /// Anything above 3 is refused at submit with
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) (field
    /// `priority`), and nothing is written.
    #[must_use]
    pub fn priority(mut self, p: u8) -> Self {
        self.priority = p;
        self
    }

    /// Not leased until `d` from now.
    #[must_use]
    pub fn delay(mut self, d: Duration) -> Self {
        self.when = When::After(d);
        self
    }

    /// Not leased before `t`.
    #[must_use]
    pub fn run_at(mut self, t: Timestamp) -> Self {
        self.when = When::At(t);
        self
    }

    /// Attempts the job gets (1-1000) before a failure makes it DEAD;
    /// default the Relay's
    /// [`Options::default_max_attempts`](crate::Options::default_max_attempts)
    /// (20 by default). Anything outside 1-1000 is refused at submit with
    /// [`Error::InvalidInput`](crate::Error::InvalidInput) (field
    /// `max_attempts`), and nothing is written.
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// While a job with this key is unfinished (not SUCCEEDED, DEAD or CANCELLED),
    /// submitting the key again returns that job's id and creates nothing.
    #[must_use]
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    /// At most one job per [`NewJob::unique_key`] per `period`: for
    /// `period` after a throttled job with this key was submitted, a
    /// throttled submit of the key answers that job (`existing`) and
    /// creates nothing, even once it has finished (without a throttle the
    /// key is free again as soon as its job finishes). For work that should run at most so often
    /// however often it is asked for (a cache refresh, a report). A job
    /// deleted within its period leaves the key only unique (one unfinished
    /// job) for the rest of it. Needs a unique key; 1 ms to 30 days.
    #[must_use]
    pub fn throttle(mut self, period: Duration) -> Self {
        self.throttle = Some(period);
        self
    }

    /// Runs the job `window` after the last submit of its
    /// [`NewJob::unique_key`]: while the key's job has not started
    /// (WAITING, or READY and never leased), a debounced submit of the key
    /// to the same queue and kind replaces that job's payload with its own
    /// and moves its run time to
    /// now + `window` (a "debounced" event says from when), answering the
    /// job (`existing`). A job that has started is left as it is, as for
    /// any unique key. For work that should run once a burst of requests
    /// has settled (reindex after edits, one notification for many
    /// changes). Needs a unique key; sets the run time itself (no
    /// [`NewJob::delay`] or [`NewJob::run_at`]), not with a throttle; 1 ms
    /// to 30 days.
    #[must_use]
    pub fn debounce(mut self, window: Duration) -> Self {
        self.debounce = Some(window);
        self
    }

    /// Makes the submit safe to repeat: a submit carrying the same key
    /// within [`Options::idempotency_keep`](crate::Options::idempotency_keep)
    /// (24 h by default) of the first returns the first submit's job
    /// (`existing`) and creates nothing, whatever state that job is in and
    /// whatever the repeat carries. For a caller that retries after an
    /// answer it did not get (a timeout, a dropped connection, `maybe
    /// applied`). Unlike [`NewJob::unique_key`], the key outlives the job's
    /// run. 1-256 characters.
    #[must_use]
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Each lease of this job lasts `d` (more than 0, at most 24 h),
    /// whatever the lease request says: for a job that needs longer (or
    /// shorter) than the rest of its queue. The worker runtime's
    /// heartbeats renew it by as much (an `extend` call says its own
    /// length).
    #[must_use]
    pub fn lease_for(mut self, d: Duration) -> Self {
        self.lease_for = Some(d);
        self
    }

    /// The worker runtime gives up on an attempt of this job after `d`
    /// (more than 0, at most 24 h), instead of its per-kind timeout: a
    /// nack with a timeout error, as for any timeout.
    #[must_use]
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }

    /// The W3C trace context this job continues (a `traceparent` header
    /// value, e.g. the one of the request that submitted it). It is stored
    /// with the job and handed to every worker that runs it
    /// ([`LeasedJob::traceparent`], `JobContext::traceparent`,
    /// `RELAY_TRACEPARENT` for `relay work --exec`). With the
    /// `opentelemetry` feature, a job submitted without one takes the
    /// current `tracing` span's context.
    #[must_use]
    pub fn traceparent(mut self, traceparent: impl Into<String>) -> Self {
        self.traceparent = Some(traceparent.into());
        self
    }

    /// Short labels to find the job by (`JobFilter::tag`, the dashboard's
    /// search): at most 8, each 1-64 characters without control characters
    /// or commas; given twice counts once. They never change.
    #[must_use]
    pub fn tags<T: Into<String>>(mut self, tags: impl IntoIterator<Item = T>) -> Self {
        self.tags = tags.into_iter().map(Into::into).collect();
        self
    }

    /// The group (a tenant, a customer, an account) the job belongs to,
    /// 1-256 characters: its queue's claims take groups in turn (round
    /// robin over the groups with jobs READY, priority and aging still
    /// deciding within a group), so a group with 100,000 jobs waiting
    /// never holds back one with 10; and the queue's
    /// [`QueueLimits::max_leased_per_group`](crate::QueueLimits::max_leased_per_group)
    /// bounds how many of one group are LEASED at once, across every
    /// process. A grouped job is claimed once it is READY: one delayed,
    /// snoozed or backing off is claimable when the writer promotes it
    /// (within about a second of its time), not before.
    #[must_use]
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    pub(crate) fn validate(
        self,
        limits: &Limits,
        default_attempts: u32,
        now: Timestamp,
    ) -> Result<ValidJob, InvalidInput> {
        limits.queue(&self.queue)?;
        if let Some(g) = &self.group {
            limits.group(g)?;
        }
        if let Some(d) = self.lease_for {
            limits.lease_for(d)?;
        }
        if let Some(d) = self.timeout {
            limits
                .lease_for(d)
                .map_err(|e| InvalidInput::new("timeout", e.reason))?;
        }
        limits.label("kind", &self.kind)?;
        limits.payload(&self.payload)?;
        let priority = Priority::new(self.priority)
            .ok_or_else(|| InvalidInput::new("priority", format!("{} is outside 0-3", self.priority)))?;
        let max_attempts = self.max_attempts.unwrap_or(default_attempts);
        limits.max_attempts(max_attempts)?;
        if let Some(k) = &self.unique_key {
            limits.unique_key(k)?;
        }
        if let Some(k) = &self.idempotency_key {
            limits
                .unique_key(k)
                .map_err(|e| InvalidInput::new("idempotency_key", e.reason))?;
        }
        if let Some(period) = self.throttle {
            if self.unique_key.is_none() {
                return Err(InvalidInput::new(
                    "throttle",
                    "throttles a unique key: give the job one (unique_key)",
                ));
            }
            if period < Duration::from_millis(1) || period > MAX_THROTTLE {
                return Err(InvalidInput::new(
                    "throttle",
                    format!("must be 1 ms to 30 days, got {period:?}"),
                ));
            }
        }
        if let Some(window) = self.debounce {
            let refuse = |reason: &str| Err(InvalidInput::new("debounce", reason));
            if self.unique_key.is_none() {
                return refuse("debounces a unique key: give the job one (unique_key)");
            }
            if self.throttle.is_some() {
                return refuse("a job is debounced or throttled, not both: drop one");
            }
            if !matches!(self.when, When::Now) && !matches!(self.when, When::After(d) if d.is_zero()) {
                return refuse("sets the run time itself (window after the last submit): drop delay/run_at");
            }
            if window < Duration::from_millis(1) || window > MAX_DEBOUNCE {
                return Err(InvalidInput::new(
                    "debounce",
                    format!("must be 1 ms to 30 days, got {window:?}"),
                ));
            }
        }
        if let Some(t) = &self.traceparent {
            limits.traceparent(t)?;
        }
        let tags = limits.tags(&self.tags)?;
        let ready_at = match self.when {
            When::Now => now,
            When::After(d) => now.plus(d),
            When::At(t) => t,
        };
        let depends_on = limits.dependencies(&self.depends_on)?;
        Ok(ValidJob {
            depends_on,
            on_dependency_failure: self.on_dependency_failure,
            queue: self.queue,
            kind: self.kind,
            payload: self.payload,
            priority,
            ready_at,
            max_attempts,
            unique_key: self.unique_key,
            idempotency_key: self.idempotency_key,
            throttle: self.throttle,
            debounce: self.debounce,
            lease_for: self.lease_for,
            timeout: self.timeout,
            traceparent: self.traceparent.or_else(crate::trace::current),
            tags,
            group: self.group,
        })
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ValidJob {
    pub queue: String,
    pub kind: String,
    pub payload: Vec<u8>,
    pub priority: Priority,
    pub ready_at: Timestamp,
    pub max_attempts: u32,
    pub unique_key: Option<String>,
    pub idempotency_key: Option<String>,
    pub throttle: Option<Duration>,
    pub debounce: Option<Duration>,
    pub lease_for: Option<Duration>,
    pub timeout: Option<Duration>,
    /// Sorted, each once.
    pub depends_on: Vec<JobId>,
    pub on_dependency_failure: DependencyFailure,
    pub traceparent: Option<String>,
    pub tags: Vec<String>,
    pub group: Option<String>,
}

/// What a submit did: the job's id, and whether it was an unfinished job
/// already holding the submit's unique key, or the job of an earlier submit
/// with its idempotency key (nothing new was written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    /// The job's id: the new job's, or the one found.
    pub id: JobId,
    /// True when an unfinished job already held the submit's unique key,
    /// or an earlier submit carried its idempotency key: `id` is that
    /// job's, and nothing was written.
    pub existing: bool,
}

/// A request for jobs.
///
/// ```
/// use relay::LeaseRequest;
/// use std::time::Duration;
/// let req = LeaseRequest::new(["emails", "reports"])
///     .worker("mailer-1")
///     .max(10)
///     .lease_for(Duration::from_secs(60))
///     .wait(Duration::from_secs(5));
/// ```
#[derive(Debug, Clone)]
pub struct LeaseRequest {
    queues: Vec<String>,
    worker: Option<String>,
    max: u32,
    lease_for: Duration,
    wait: Duration,
}

/// Most jobs one lease call may take.
pub const MAX_LEASE_BATCH: u32 = 1000;
/// Longest a lease call may wait for a job.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);

impl LeaseRequest {
    /// A request for one job from `queues` (1-64 names), leased for 30 s,
    /// without waiting. Nothing is checked until it is used.
    pub fn new<Q: Into<String>>(queues: impl IntoIterator<Item = Q>) -> Self {
        Self {
            queues: queues.into_iter().map(Into::into).collect(),
            worker: None,
            max: 1,
            lease_for: Duration::from_secs(30),
            wait: Duration::ZERO,
        }
    }

    /// Who holds the leases (shown in events and `show`); default `pid-<pid>`.
    #[must_use]
    pub fn worker(mut self, w: impl Into<String>) -> Self {
        self.worker = Some(w.into());
        self
    }

    /// Up to `n` jobs at once (default 1).
    #[must_use]
    pub fn max(mut self, n: u32) -> Self {
        self.max = n;
        self
    }

    /// How long each lease lasts unless extended (default 30 s).
    #[must_use]
    pub fn lease_for(mut self, d: Duration) -> Self {
        self.lease_for = d;
        self
    }

    /// Block up to `d` for a job when none is ready (default: do not wait).
    #[must_use]
    pub fn wait(mut self, d: Duration) -> Self {
        self.wait = d;
        self
    }

    pub(crate) fn validate(self, limits: &Limits) -> Result<ValidLease, InvalidInput> {
        if self.queues.is_empty() || self.queues.len() > 64 {
            return Err(InvalidInput::new(
                "queues",
                format!("name 1-64 queues, got {}", self.queues.len()),
            ));
        }
        for q in &self.queues {
            limits.queue(q)?;
        }
        let worker = self.worker.unwrap_or_else(|| format!("pid-{}", std::process::id()));
        limits.label("worker", &worker)?;
        if self.max == 0 || self.max > MAX_LEASE_BATCH {
            return Err(InvalidInput::new(
                "max",
                format!("must be 1-{MAX_LEASE_BATCH}, got {}", self.max),
            ));
        }
        limits.lease_for(self.lease_for)?;
        if self.wait > MAX_WAIT {
            return Err(InvalidInput::new(
                "wait",
                format!("must be at most 1h, got {:?}", self.wait),
            ));
        }
        Ok(ValidLease {
            queues: self.queues,
            worker,
            max: self.max,
            lease_for: self.lease_for,
            wait: self.wait,
        })
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ValidLease {
    pub queues: Vec<String>,
    pub worker: String,
    pub max: u32,
    pub lease_for: Duration,
    pub wait: Duration,
}

/// A job handed to a worker, with the token that fences its lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedJob {
    /// The job's id.
    pub id: JobId,
    /// This lease's fencing token: pass it to `ack`, `nack`, `extend`,
    /// `release` and `snooze`. A later lease of the job gets a larger one,
    /// and this one is then refused.
    pub token: LeaseToken,
    /// The queue the job was submitted to.
    pub queue: String,
    /// What kind of work it is (the worker runtime picks a handler by it).
    pub kind: String,
    /// The bytes it was submitted with.
    pub payload: Vec<u8>,
    /// Its priority class, 0-3.
    pub priority: Priority,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Attempts it gets before a failure makes it DEAD.
    pub max_attempts: u32,
    /// When this lease expires unless extended; after it the token is
    /// refused and the job is leased again.
    pub expires_at: Timestamp,
    /// When the job was submitted.
    pub created_at: Timestamp,
    /// How long this lease lasts: the job's own (see [`NewJob::lease_for`])
    /// or the request's. Heartbeats renew it by as much.
    pub lease_for: Duration,
    /// The job's own timeout (see [`NewJob::timeout`]), if it has one.
    pub timeout: Option<Duration>,
    /// The trace context the job was submitted in (see
    /// [`NewJob::traceparent`]), if any.
    pub traceparent: Option<String>,
    /// The job's group (see [`NewJob::group`]), if it has one.
    pub group: Option<String>,
    /// The steps earlier runs of the job recorded (see
    /// [`crate::Relay::record_step`]), in the order they were recorded: a
    /// handler returns their outputs instead of running them again.
    pub steps: Vec<relay_core::Step>,
}

impl LeasedJob {
    pub(crate) fn new(job: Job, status: JobStatus, lease_for: Duration) -> Self {
        let (token, expires_at) = status
            .lease
            .as_ref()
            .map_or((LeaseToken(0), job.created_at), |l| (l.token, l.expires_at));
        Self {
            id: job.id,
            token,
            queue: job.queue,
            kind: job.kind,
            payload: job.payload,
            priority: job.priority,
            attempt: status.attempts,
            max_attempts: status.max_attempts,
            expires_at,
            created_at: job.created_at,
            lease_for,
            timeout: job.timeout,
            traceparent: job.traceparent,
            group: job.group,
            steps: job.steps,
        }
    }
}

/// The outcome of one leased job, for [`crate::Relay::complete_batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The leased job.
    pub id: JobId,
    /// The token of its lease ([`LeasedJob::token`]).
    pub token: LeaseToken,
    /// What to record.
    pub outcome: CompletionOutcome,
}

/// What [`Completion`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompletionOutcome {
    /// Like `ack`.
    Ack {
        /// The job's result, if any.
        result: Option<Vec<u8>>,
    },
    /// Like `nack` (or `nack_permanent` when `permanent`).
    Nack {
        /// Why the attempt failed (kept as the job's last error).
        error: String,
        /// Run again after this long instead of the back-off policy's
        /// delay.
        retry_in: Option<Duration>,
        /// No retry can fix it: the job becomes DEAD now.
        permanent: bool,
    },
    /// Like `snooze`: READY again after `delay`, the attempt not counted.
    Snooze {
        /// How long until the job may be leased again.
        delay: Duration,
    },
    /// Like `release`: READY again now, the attempt not counted.
    Release,
    /// Waits for event `key` under step `step` until `until` (see
    /// [`crate::Relay::emit`]): WAITING, holding no lease, until the event
    /// is emitted or `until`; READY at once when the event was emitted
    /// already, the step is recorded, or `until` has come.
    Wait {
        /// The wait's step name: it records the event's payload, or that
        /// the wait timed out.
        step: String,
        /// The event's key.
        key: String,
        /// When the wait gives up.
        until: Timestamp,
    },
    /// Like [`crate::Relay::sleep`]: the step `step` recorded, WAITING
    /// until `until` (a step of that name recorded earlier wins, its time
    /// with it), holding no lease, the attempt not counted.
    Sleep {
        /// The sleep's step name.
        step: String,
        /// When the job wakes.
        until: Timestamp,
    },
    /// Like [`crate::Relay::record_step`]: step `name` recorded with
    /// `output`, the job still LEASED. When a record of the name stood
    /// already, it stands and is answered in [`Worked::earlier`].
    Step {
        /// The step's name.
        name: String,
        /// Its output.
        output: Vec<u8>,
    },
    /// Awaits job `child`'s end under step `step`: WAITING on it, holding
    /// no lease, the attempt not counted, until its end records how it
    /// ended as the step ([`relay_core::job::Joined`]) and makes this job
    /// READY; READY at once when it has ended already or the step is
    /// recorded.
    Join {
        /// The join's step name.
        step: String,
        /// The job awaited.
        child: JobId,
    },
}

impl Completion {
    /// Succeeded, with an optional result: as [`crate::Relay::ack`].
    pub fn ack(id: JobId, token: LeaseToken, result: Option<Vec<u8>>) -> Self {
        Self {
            id,
            token,
            outcome: CompletionOutcome::Ack { result },
        }
    }

    /// Failed, to be retried after `retry_in` (or the back-off policy's delay)
    /// unless its attempts are spent: as [`crate::Relay::nack`].
    pub fn nack(id: JobId, token: LeaseToken, error: impl Into<String>, retry_in: Option<Duration>) -> Self {
        Self {
            id,
            token,
            outcome: CompletionOutcome::Nack {
                error: error.into(),
                retry_in,
                permanent: false,
            },
        }
    }

    /// Put back for later, the attempt not counted: as
    /// [`crate::Relay::snooze`].
    pub fn snooze(id: JobId, token: LeaseToken, delay: Duration) -> Self {
        Self {
            id,
            token,
            outcome: CompletionOutcome::Snooze { delay },
        }
    }

    /// Waiting for event `key` under step `step` until `until` (see
    /// [`CompletionOutcome::Wait`]).
    pub fn wait(
        id: JobId,
        token: LeaseToken,
        step: impl Into<String>,
        key: impl Into<String>,
        until: Timestamp,
    ) -> Self {
        Self {
            id,
            token,
            outcome: CompletionOutcome::Wait {
                step: step.into(),
                key: key.into(),
                until,
            },
        }
    }

    /// Asleep until `until` under step `step`: as [`crate::Relay::sleep`].
    pub fn sleep(id: JobId, token: LeaseToken, step: impl Into<String>, until: Timestamp) -> Self {
        Self {
            id,
            token,
            outcome: CompletionOutcome::Sleep {
                step: step.into(),
                until,
            },
        }
    }

    /// Step `name` recorded with `output`: as [`crate::Relay::record_step`].
    pub fn step(id: JobId, token: LeaseToken, name: impl Into<String>, output: Vec<u8>) -> Self {
        Self {
            id,
            token,
            outcome: CompletionOutcome::Step {
                name: name.into(),
                output,
            },
        }
    }

    /// Awaiting job `child`'s end under step `step` (see
    /// [`CompletionOutcome::Join`]).
    pub fn join(id: JobId, token: LeaseToken, step: impl Into<String>, child: JobId) -> Self {
        Self {
            id,
            token,
            outcome: CompletionOutcome::Join {
                step: step.into(),
                child,
            },
        }
    }

    /// Given back untried, READY again now: as [`crate::Relay::release`].
    pub fn release(id: JobId, token: LeaseToken) -> Self {
        Self {
            id,
            token,
            outcome: CompletionOutcome::Release,
        }
    }

    /// Failed for good, DEAD now: as [`crate::Relay::nack_permanent`].
    pub fn nack_permanent(id: JobId, token: LeaseToken, error: impl Into<String>) -> Self {
        Self {
            id,
            token,
            outcome: CompletionOutcome::Nack {
                error: error.into(),
                retry_in: None,
                permanent: true,
            },
        }
    }
}

/// What [`crate::Relay::complete_and_lease`] did: each completion's
/// result, in the order given, and the jobs it leased.
#[derive(Debug)]
#[non_exhaustive]
pub struct Worked {
    /// One result per completion: the job's new status, or the error that
    /// completion alone met (its job unchanged).
    pub completions: Vec<crate::Result<JobStatus>>,
    /// One per completion: for a step record ([`CompletionOutcome::Step`])
    /// whose name was recorded already, the record that stands (this one
    /// was not taken); `None` for every other.
    pub earlier: Vec<Option<relay_core::Step>>,
    /// The jobs leased, with their tokens.
    pub jobs: Vec<LeasedJob>,
}

pub(crate) struct LeaseBatch {
    pub jobs: Vec<LeasedJob>,
    /// When nothing was leased: the earliest time a job will become due.
    pub next_ready_at: Option<Timestamp>,
}

/// Checks a result or event body against the payload limit.
pub(crate) fn check_body(limits: &Limits, field: &'static str, body: &[u8]) -> Result<(), InvalidInput> {
    limits.payload(body).map_err(|e| InvalidInput::new(field, e.reason))
}

/// An error text as stored: at most 8 KiB.
pub(crate) fn error_text(s: &str) -> String {
    truncate_error(s).to_owned()
}

/// A periodic job: a name, when its ticks fall, and the job each tick
/// enqueues. Each tick enqueues exactly one job, whichever process on the
/// store takes it; ticks missed while no Relay ran enqueue one job, not
/// one each.
///
/// ```
/// use relay::{NewJob, NewSchedule, Relay};
/// use std::time::Duration;
/// let relay = Relay::in_memory()?;
/// relay.add_schedule(
///     NewSchedule::cron("nightly-report", "0 3 * * *", NewJob::new("reports", "build", Vec::new()))
///         .tz("Europe/Berlin"),
/// )?;
/// relay.add_schedule(NewSchedule::every("heartbeat", Duration::from_secs(30), NewJob::new("ops", "ping", Vec::new())))?;
/// assert_eq!(relay.schedules()?.len(), 2);
/// # Ok::<(), relay::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct NewSchedule {
    name: String,
    recurrence: Recurrence,
    tz: Option<String>,
    job: NewJob,
}

impl NewSchedule {
    /// Ticks at the times a cron expression names (five fields, or six
    /// with seconds first), in UTC unless [`NewSchedule::tz`] says otherwise.
    pub fn cron(name: impl Into<String>, expr: impl Into<String>, job: NewJob) -> Self {
        Self {
            name: name.into(),
            recurrence: Recurrence::Cron {
                expr: expr.into(),
                tz: None,
            },
            tz: None,
            job,
        }
    }

    /// Ticks every `d` (1 s to 366 days) from when the schedule is added.
    pub fn every(name: impl Into<String>, d: Duration, job: NewJob) -> Self {
        Self {
            name: name.into(),
            recurrence: Recurrence::Every(d),
            tz: None,
            job,
        }
    }

    /// The cron expression's time zone, an IANA name such as
    /// `Europe/Berlin` (its daylight-saving changes included). Refused for
    /// an interval.
    #[must_use]
    pub fn tz(mut self, tz: impl Into<String>) -> Self {
        self.tz = Some(tz.into());
        self
    }

    pub(crate) fn validate(
        self,
        limits: &Limits,
        default_attempts: u32,
        now: Timestamp,
    ) -> Result<ValidSchedule, InvalidInput> {
        limits.schedule_name(&self.name)?;
        let recurrence = match (self.recurrence, self.tz) {
            (Recurrence::Cron { expr, .. }, tz) => Recurrence::Cron { expr, tz },
            (every, None) => every,
            (Recurrence::Every(_), Some(tz)) => {
                return Err(InvalidInput::new(
                    "tz",
                    format!("{tz:?}: a time zone applies to a cron expression, not to an interval"),
                ))
            }
        };
        recurrence.validate()?;
        if self.job.unique_key.is_some() {
            return Err(InvalidInput::new(
                "unique_key",
                "a schedule's job takes no unique key (each tick enqueues exactly one job)",
            ));
        }
        if self.job.idempotency_key.is_some() {
            return Err(InvalidInput::new(
                "idempotency_key",
                "a schedule's job takes no idempotency key (each tick enqueues exactly one job)",
            ));
        }
        if self.job.throttle.is_some() {
            return Err(InvalidInput::new(
                "throttle",
                "a schedule's job takes no throttle (its schedule says how often it runs)",
            ));
        }
        if self.job.debounce.is_some() {
            return Err(InvalidInput::new(
                "debounce",
                "a schedule's job takes no debounce (it runs at its tick)",
            ));
        }
        if self.job.lease_for.is_some() || self.job.timeout.is_some() {
            return Err(InvalidInput::new(
                "lease_for",
                "a schedule's job takes no lease_for or timeout of its own yet (set them on the worker)",
            ));
        }
        if !self.job.depends_on.is_empty() {
            return Err(InvalidInput::new(
                "depends_on",
                "a schedule's job cannot depend on other jobs (each tick's job runs at its tick)",
            ));
        }
        if !self.job.tags.is_empty() {
            return Err(InvalidInput::new(
                "tags",
                "a schedule's job takes no tags yet (find its jobs by kind or queue)",
            ));
        }
        if self.job.traceparent.is_some() {
            return Err(InvalidInput::new(
                "traceparent",
                "a schedule's job takes no trace context: each tick's job starts a trace of its own",
            ));
        }
        if !matches!(self.job.when, When::Now) {
            return Err(InvalidInput::new(
                "delay",
                "a schedule's job runs at its tick: give it no delay or run_at",
            ));
        }
        let job = self.job.validate(limits, default_attempts, now)?;
        Ok(ValidSchedule {
            name: self.name,
            recurrence,
            job,
        })
    }
}

#[derive(Debug, Clone)]
pub(crate) struct ValidSchedule {
    pub name: String,
    pub recurrence: Recurrence,
    pub job: ValidJob,
}

/// A completion token ([`crate::Relay::create_token`]): a human or a third
/// party completes it once, without an API token, by presenting its secret
/// (`POST /v1/tokens/{id}.{secret}/complete`); the job waiting for it
/// ([`crate::worker::JobContext::wait_token`]) then runs on with the
/// payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionToken {
    /// Its public id (32 hex digits).
    pub id: String,
    /// Its secret (64 hex digits): whoever holds it may complete the token.
    pub secret: String,
    /// When it expires.
    pub expires_at: Timestamp,
}

impl CompletionToken {
    /// A new token with a random id and secret.
    pub(crate) fn fresh(expires_at: Timestamp) -> crate::Result<Self> {
        let mut bytes = [0u8; 48];
        getrandom::fill(&mut bytes).map_err(|e| {
            crate::Error::resources(
                "randomness for a completion token",
                std::io::Error::other(e.to_string()),
            )
        })?;
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        Ok(Self {
            id: hex(&bytes[..16]),
            secret: hex(&bytes[16..]),
            expires_at,
        })
    }

    /// What completes it: `<id>.<secret>`.
    pub fn text(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }

    /// The path that completes it, below the server's address.
    pub fn path(&self) -> String {
        format!("/v1/tokens/{}/complete", self.text())
    }

    /// The event key its completion emits.
    pub fn event_key(&self) -> String {
        Self::key_of(&self.id)
    }

    pub(crate) fn key_of(id: &str) -> String {
        format!("token:{id}")
    }
}

/// An event kept after its emit ([`crate::Relay::recent_events`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecentEvent {
    /// Its key.
    pub key: String,
    /// Until when it is kept: a wait that begins before then returns its
    /// payload at once. A week after its emit, or (for the completion of
    /// a completion token, key `token:<id>`) a week after the token's
    /// deadline.
    pub kept_until: Timestamp,
    /// Its payload as emitted when it is JSON (`json`), else its bytes in
    /// base64; at most [`EVENT_PREVIEW`] characters, cut when `cut`.
    pub preview: String,
    /// The payload is JSON.
    pub json: bool,
    /// The preview is cut short.
    pub cut: bool,
}

/// Most characters of an event's payload [`crate::Relay::recent_events`]
/// gives.
pub const EVENT_PREVIEW: u32 = 300;

/// A completion token not completed yet ([`crate::Relay::open_tokens`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenToken {
    /// Its public id (the part of its text before the `.`; the secret
    /// after it is kept only as a hash).
    pub id: String,
    /// The job it completes.
    pub job: JobId,
    /// When it expires.
    pub expires_at: Timestamp,
}

/// What a WAITING job waits for ([`crate::Relay::waiting_for`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitingFor {
    /// Jobs it was submitted to depend on: `count` of them have not ended.
    Jobs {
        /// How many.
        count: u32,
    },
    /// A job its handler joined ([`crate::worker::JobContext::join`]).
    Join {
        /// The job awaited.
        job: JobId,
        /// The join's step.
        step: String,
    },
    /// An event ([`crate::worker::JobContext::wait_event`]), until `until`.
    Event {
        /// The event's key.
        key: String,
        /// The wait's step.
        step: String,
        /// When the wait gives up.
        until: Timestamp,
    },
    /// A completion token ([`crate::worker::JobContext::wait_token`]), until
    /// `until`.
    Token {
        /// The token's public id.
        id: String,
        /// The wait's step.
        step: String,
        /// When the token expires.
        until: Timestamp,
    },
    /// Asleep ([`crate::worker::JobContext::sleep`]) until `until`.
    Sleep {
        /// When it wakes.
        until: Timestamp,
    },
}

/// What an emit did ([`crate::Relay::emit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Emitted {
    /// This was the key's first emit (kept); a later one changes nothing.
    pub first: bool,
    /// Jobs it woke (each waiting for the key, its payload recorded).
    pub woken: u32,
}
