//! Where a command goes: a database file (the library) or a Relay server
//! (HTTP). Both answer with the API's typed answers (`relay_client::wire`),
//! so every subcommand prints the same output either way.

use crate::error::CliError;
use relay::{wire as conv, JobFilter, JobId, LeaseToken};
use relay_client::wire;
use relay_client::wire::{calls, Nothing};
use relay_server::{Answered, Local};
use std::time::Duration;

pub enum Target {
    Local(Local),
    Remote(Remote),
}

/// A job to submit, as the flags gave it.
pub struct Submit {
    pub queue: String,
    pub kind: String,
    pub payload: Vec<u8>,
    pub priority: u8,
    pub delay: Option<Duration>,
    pub run_at: Option<relay::Timestamp>,
    pub max_attempts: Option<u32>,
    pub unique_key: Option<String>,
    pub idempotency_key: Option<String>,
    pub throttle: Option<Duration>,
    pub debounce: Option<Duration>,
    pub lease_for: Option<Duration>,
    pub timeout: Option<Duration>,
    pub depends_on: Vec<i64>,
    pub on_dependency_failure: wire::DependencyFailure,
    pub traceparent: Option<String>,
    pub tags: Vec<String>,
    pub group: Option<String>,
}

impl Submit {
    /// The job as the server's `NewJob` body. The payload goes as bytes:
    /// the server stores exactly what a local submit would (JSON text as
    /// given, and text that is not JSON).
    fn wire(self) -> wire::NewJob {
        let mut job = wire::NewJob::new(self.queue, self.kind, &self.payload);
        job.priority = Some(self.priority);
        job.delay_ms = self.delay.map(millis);
        job.run_at = self.run_at.map(relay::Timestamp::to_rfc3339);
        job.max_attempts = self.max_attempts;
        job.unique_key = self.unique_key;
        job.idempotency_key = self.idempotency_key;
        job.throttle_ms = self.throttle.map(millis);
        job.debounce_ms = self.debounce.map(millis);
        job.lease_for_ms = self.lease_for.map(millis);
        job.timeout_ms = self.timeout.map(millis);
        job.traceparent = self.traceparent;
        job.group = self.group;
        if !self.tags.is_empty() {
            job.tags = Some(self.tags);
        }
        if !self.depends_on.is_empty() {
            job.depends_on = Some(self.depends_on);
            job.on_dependency_failure = Some(self.on_dependency_failure);
        }
        job
    }
}

/// When a schedule ticks.
pub enum When {
    Cron {
        expr: String,
        tz: Option<String>,
    },
    /// An interval (a time zone given with it is refused).
    Every(Duration, Option<String>),
}

pub struct Lease {
    pub queues: Vec<String>,
    pub worker: Option<String>,
    pub lease_for: Duration,
    pub wait: Duration,
    pub max: u32,
}

/// Simple calls on one job.
#[derive(Clone, Copy)]
pub enum Admin {
    Cancel,
    Retry,
    /// A retry that forgets the job's recorded steps.
    RetryResetSteps,
    Delete,
    /// Gives the job back: READY now, or (snooze) after the duration.
    Release(LeaseToken, Option<Duration>),
}

/// A duration in whole milliseconds, as the wire takes it.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

const NONE: Nothing = Nothing {};

impl Target {
    /// Sends call `C` of the API's table: to the server, or through the
    /// server's own handlers in this process. Every command below is this,
    /// written once for both.
    pub fn send<C: Answered>(&self, param: &C::Param, query: &C::Query, body: &C::Body) -> Result<C::Answer, CliError>
    where
        C::Param: Clone,
    {
        match self {
            Target::Local(l) => l.call::<C>(param, query, body).map_err(CliError::from),
            Target::Remote(r) => r.client.send::<C>(param, query, body).map_err(|e| r.error(e)),
        }
    }

    pub fn submit(&self, s: Submit) -> Result<wire::Submitted, CliError> {
        self.send::<calls::Submit>(&(), &NONE, &s.wire())
    }

    /// Adds (or replaces) a schedule whose ticks enqueue `job`.
    pub fn add_schedule(&self, name: &str, when: When, job: Submit) -> Result<wire::Schedule, CliError> {
        let (cron, every_ms, tz) = match when {
            When::Cron { expr, tz } => (Some(expr), None, tz),
            When::Every(d, tz) => (None, Some(millis(d)), tz),
        };
        let new = wire::NewSchedule {
            cron,
            tz,
            every_ms,
            job: job.wire(),
        };
        self.send::<calls::PutSchedule>(&name.to_owned(), &NONE, &new)
    }

    pub fn schedules(&self) -> Result<Vec<wire::Schedule>, CliError> {
        Ok(self.send::<calls::Schedules>(&(), &NONE, &NONE)?.schedules)
    }

    pub fn remove_schedule(&self, name: &str) -> Result<wire::ScheduleRemoved, CliError> {
        self.send::<calls::RemoveSchedule>(&name.to_owned(), &NONE, &NONE)
    }

    /// Pauses (`true`) or resumes a schedule.
    pub fn pause_schedule(&self, name: &str, paused: bool) -> Result<wire::Schedule, CliError> {
        let name = name.to_owned();
        if paused {
            self.send::<calls::PauseSchedule>(&name, &NONE, &NONE)
        } else {
            self.send::<calls::ResumeSchedule>(&name, &NONE, &NONE)
        }
    }

    pub fn lease(&self, l: Lease) -> Result<Vec<wire::LeasedJob>, CliError> {
        let req = wire::Lease {
            queues: l.queues,
            worker: l.worker,
            max: Some(l.max),
            lease_for_ms: Some(millis(l.lease_for)),
            wait_ms: Some(millis(l.wait)),
        };
        Ok(self.send::<calls::Lease>(&(), &NONE, &req)?.jobs)
    }

    pub fn ack(&self, id: JobId, token: LeaseToken, result: Option<String>) -> Result<wire::Changed, CliError> {
        // As bytes: the job keeps exactly what was given.
        let ack = wire::Ack::new(token.0, result.as_deref().map(str::as_bytes));
        self.send::<calls::Ack>(&id.0, &NONE, &ack)
    }

    pub fn nack(
        &self,
        id: JobId,
        token: LeaseToken,
        error: String,
        retry_in: Option<Duration>,
    ) -> Result<wire::Changed, CliError> {
        let nack = wire::Nack {
            token: token.0,
            error,
            retry_in_ms: retry_in.map(millis),
            permanent: false,
        };
        self.send::<calls::Nack>(&id.0, &NONE, &nack)
    }

    pub fn extend(&self, id: JobId, token: LeaseToken, lease_for: Duration) -> Result<wire::Changed, CliError> {
        let extend = wire::Extend {
            token: token.0,
            lease_for_ms: Some(millis(lease_for)),
        };
        self.send::<calls::Extend>(&id.0, &NONE, &extend)
    }

    pub fn admin(&self, id: JobId, what: Admin) -> Result<wire::Changed, CliError> {
        let id = id.0;
        match what {
            Admin::Cancel => self.send::<calls::Cancel>(&id, &NONE, &NONE),
            Admin::Retry => self.send::<calls::Retry>(&id, &calls::RetryQuery::default(), &NONE),
            Admin::RetryResetSteps => self.send::<calls::Retry>(&id, &calls::RetryQuery { reset_steps: true }, &NONE),
            Admin::Delete => self.send::<calls::Delete>(&id, &NONE, &NONE),
            Admin::Release(t, delay) => {
                let release = wire::Release {
                    token: t.0,
                    in_ms: delay.map(millis),
                };
                self.send::<calls::Release>(&id, &NONE, &release)
            }
        }
    }

    pub fn show(&self, id: JobId) -> Result<wire::Job, CliError> {
        self.send::<calls::Get>(&id.0, &NONE, &NONE)
    }

    /// The job's events, a page at a time (each at most 4 MiB) to `each`.
    pub fn events(&self, id: JobId, mut each: impl FnMut(&[wire::Event])) -> Result<(), CliError> {
        let mut query = calls::EventsQuery::default();
        loop {
            let page = self.send::<calls::Events>(&id.0, &query, &NONE)?;
            each(&page.events);
            match page.next {
                Some(next) => query.after = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// The workers, a page at a time (each at most 4 MiB) to `each`.
    pub fn workers(&self, mut each: impl FnMut(&wire::Workers)) -> Result<(), CliError> {
        let mut query = calls::WorkersQuery::default();
        loop {
            let page = self.send::<calls::Workers>(&(), &query, &NONE)?;
            each(&page);
            match page.next {
                Some(next) => query.after = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// One queue's counts and settings.
    pub fn queue(&self, queue: &str) -> Result<wire::QueueInfo, CliError> {
        self.send::<calls::GetQueue>(&queue.to_owned(), &NONE, &NONE)
    }

    /// Pauses (`true`) or resumes a queue.
    pub fn pause(&self, queue: &str, paused: bool) -> Result<wire::QueuePaused, CliError> {
        let queue = queue.to_owned();
        if paused {
            self.send::<calls::PauseQueue>(&queue, &NONE, &NONE)
        } else {
            self.send::<calls::ResumeQueue>(&queue, &NONE, &NONE)
        }
    }

    /// Emits an event.
    pub fn emit(&self, key: &str, payload: &[u8]) -> Result<wire::Emitted, CliError> {
        self.send::<calls::Emit>(&key.to_owned(), &NONE, &wire::EmitEvent::new(payload))
    }

    /// Replaces a queue's limits.
    pub fn set_limits(&self, queue: &str, limits: relay::QueueLimits) -> Result<wire::QueueLimits, CliError> {
        let wanted = wire::Limits {
            max_leased: limits.max_leased,
            rate_limit: limits.rate.map(conv::rate),
            poison_after: limits.poison_after,
            max_leased_per_group: limits.max_leased_per_group,
        };
        self.send::<calls::SetQueueLimits>(&queue.to_owned(), &NONE, &wanted)
    }

    /// A queue's retention, its own and what the prune keeps.
    pub fn retention(&self, queue: &str) -> Result<wire::QueueRetention, CliError> {
        self.send::<calls::GetRetention>(&queue.to_owned(), &NONE, &NONE)
    }

    /// Replaces a queue's own retention.
    pub fn set_retention(&self, queue: &str, own: wire::Retention) -> Result<wire::QueueRetention, CliError> {
        self.send::<calls::SetRetention>(&queue.to_owned(), &NONE, &own)
    }

    /// One pass of the prune, after job `after`.
    pub fn prune_from(&self, after: i64) -> Result<wire::Pruned, CliError> {
        self.send::<calls::Prune>(&(), &NONE, &wire::PruneFrom { after })
    }

    /// A page of queues' stats (totals on the first page), as
    /// `GET /v1/stats` answers it.
    pub fn stats_page(&self, after: Option<String>) -> Result<wire::Stats, CliError> {
        self.send::<calls::Stats>(&(), &wire::QueuePage { after, limit: None }, &NONE)
    }

    /// Jobs matching `filter`, newest first: `filter.limit` of them, over
    /// as many pages as the answers' byte bound makes.
    pub fn jobs(&self, filter: JobFilter) -> Result<Vec<wire::Job>, CliError> {
        let mut out: Vec<wire::Job> = Vec::new();
        let mut before = filter.before.map(|b| b.0);
        loop {
            let left = filter
                .limit
                .saturating_sub(u32::try_from(out.len()).unwrap_or(u32::MAX));
            let query = wire::ListQuery::new(conv::filter(&filter), before, Some(left));
            let page = self.send::<calls::List>(&(), &query, &NONE)?;
            let full = page.jobs.len() >= left as usize;
            out.extend(page.jobs);
            match page.next {
                Some(n) if !full => before = Some(n),
                _ => return Ok(out),
            }
        }
    }

    /// Retries, cancels or deletes (`action`) every job `filter` matches;
    /// answers how many it changed.
    pub fn bulk(&self, action: wire::BulkAction, filter: JobFilter) -> Result<wire::BulkDone, CliError> {
        let bulk = wire::Bulk {
            action,
            filter: conv::filter(&filter),
        };
        self.send::<calls::Bulk>(&(), &NONE, &bulk)
    }
}

/// A Relay server, reached over HTTP (`relay_client`).
pub struct Remote {
    pub client: relay_client::Client,
    token_given: bool,
    /// The server's address and token, for an async client of it.
    base: String,
    token: Option<String>,
}

impl Remote {
    /// A client of the server at `base`, which must be an http(s) URL.
    ///
    /// # Errors
    ///
    /// [`CliError::Usage`] for an address without its scheme.
    pub fn new(base: &str, token: Option<String>) -> Result<Self, CliError> {
        let scheme = base.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        if !matches!(scheme.as_deref(), Some("http" | "https")) {
            return Err(CliError::Usage(format!(
                "--server {base:?} is not an http(s) URL: give its scheme, e.g. --server http://{}",
                base.split_once("://").map_or(base, |(_, rest)| rest)
            )));
        }
        let token_given = token.is_some();
        let mut client = relay_client::Client::new(base);
        if let Some(t) = &token {
            client = client.with_token(t.clone());
        }
        Ok(Self {
            client,
            token_given,
            base: base.to_owned(),
            token,
        })
    }

    /// An async client of the same server, with the same token.
    pub fn async_client(&self) -> relay_client::AsyncClient {
        let client = relay_client::AsyncClient::new(&self.base);
        match &self.token {
            Some(t) => client.with_token(t.clone()),
            None => client,
        }
    }

    /// The client's error as the CLI's: the server's code, or an I/O error;
    /// a 401 says which flag or variable carries the token.
    pub fn error(&self, e: relay_client::Error) -> CliError {
        match e {
            relay_client::Error::Api {
                status,
                code,
                mut message,
            } => {
                if status == 401 {
                    let given = if self.token_given {
                        "the token given was refused"
                    } else {
                        "no token was given"
                    };
                    message = format!("{message} ({given}: pass the server's token with --auth TOKEN or RELAY_TOKEN)");
                }
                CliError::Remote { status, code, message }
            }
            e @ relay_client::Error::Decode(_) => CliError::Answer(e.to_string()),
            other => CliError::Io(other.to_string()),
        }
    }
}
