//! Where a command goes: a database file (the library) or a Relay server
//! (HTTP). Both answer with the same JSON views, so every subcommand prints
//! the same output either way.

use crate::error::CliError;
use crate::output::Doc;
use relay::{wire as conv, JobFilter, JobId, LeaseRequest, LeaseToken, NewJob, Relay};
use relay_client::wire;
use serde_json::Value;
use std::time::Duration;

pub enum Target {
    Local(Relay),
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
    pub lease_for: Option<Duration>,
    pub timeout: Option<Duration>,
    pub depends_on: Vec<i64>,
    pub on_dependency_failure: wire::DependencyFailure,
    pub traceparent: Option<String>,
    pub tags: Vec<String>,
}

impl Submit {
    /// The job as the library's: the server's body, converted as the
    /// server converts it.
    fn job(self) -> Result<NewJob, CliError> {
        Ok(NewJob::try_from(self.wire())?)
    }

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
        job.lease_for_ms = self.lease_for.map(millis);
        job.timeout_ms = self.timeout.map(millis);
        job.traceparent = self.traceparent;
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

/// Simple calls on one schedule.
#[derive(Clone, Copy)]
pub enum ScheduleAdmin {
    Remove,
    Pause,
    Resume,
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
    Delete,
    /// Gives the job back: READY now, or (snooze) after the duration.
    Release(LeaseToken, Option<Duration>),
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Target {
    pub fn submit(&self, s: Submit) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => {
                let done = r.submit_outcome(s.job()?)?;
                view_of(&wire::Submitted {
                    id: done.id.0,
                    existing: done.existing,
                })
            }
            Target::Remote(r) => r.answer(r.client.submit(&s.wire())),
        }
    }

    /// Adds (or replaces) a schedule whose ticks enqueue `job`.
    pub fn add_schedule(&self, name: &str, when: When, job: Submit) -> Result<Doc, CliError> {
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
        match self {
            Target::Local(r) => doc(&conv::schedule(
                &r.add_schedule(conv::new_schedule(name.to_owned(), new)?)?,
            )),
            Target::Remote(r) => r.doc(r.client.put_schedule(name, &new)),
        }
    }

    pub fn schedules(&self) -> Result<Vec<Doc>, CliError> {
        match self {
            Target::Local(r) => r.schedules()?.iter().map(|s| doc(&conv::schedule(s))).collect(),
            Target::Remote(r) => r.docs(r.client.schedules()),
        }
    }

    /// Removes, pauses or resumes a schedule.
    pub fn schedule_admin(&self, name: &str, what: ScheduleAdmin) -> Result<Doc, CliError> {
        match self {
            Target::Local(r) => match what {
                ScheduleAdmin::Remove => {
                    r.remove_schedule(name)?;
                    doc(&wire::ScheduleRemoved {
                        name: name.to_owned(),
                        deleted: true,
                    })
                }
                ScheduleAdmin::Pause => doc(&conv::schedule(&r.pause_schedule(name)?)),
                ScheduleAdmin::Resume => doc(&conv::schedule(&r.resume_schedule(name)?)),
            },
            Target::Remote(r) => match what {
                ScheduleAdmin::Remove => r.doc(r.client.remove_schedule(name)),
                ScheduleAdmin::Pause => r.doc(r.client.pause_schedule(name)),
                ScheduleAdmin::Resume => r.doc(r.client.resume_schedule(name)),
            },
        }
    }

    pub fn lease(&self, l: Lease) -> Result<Vec<Doc>, CliError> {
        match self {
            Target::Local(r) => {
                let mut req = LeaseRequest::new(l.queues)
                    .lease_for(l.lease_for)
                    .wait(l.wait)
                    .max(l.max);
                if let Some(w) = l.worker {
                    req = req.worker(w);
                }
                r.lease(req)?.iter().map(|l| doc(&conv::leased(l))).collect()
            }
            Target::Remote(r) => r.docs(r.client.lease(&wire::Lease {
                queues: l.queues,
                worker: l.worker,
                max: Some(l.max),
                lease_for_ms: Some(millis(l.lease_for)),
                wait_ms: Some(millis(l.wait)),
            })),
        }
    }

    pub fn ack(&self, id: JobId, token: LeaseToken, result: Option<String>) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => {
                r.ack(id, token, result.map(String::into_bytes))?;
                view_of(&wire::Changed::in_state(id.0, wire::State::Succeeded))
            }
            // As bytes: the server keeps exactly what a local ack would.
            Target::Remote(r) => r.answer(
                r.client
                    .ack(id.0, &wire::Ack::new(token.0, result.as_deref().map(str::as_bytes))),
            ),
        }
    }

    pub fn nack(
        &self,
        id: JobId,
        token: LeaseToken,
        error: String,
        retry_in: Option<Duration>,
    ) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => view_of(&conv::changed(id, &r.nack(id, token, &error, retry_in)?)),
            Target::Remote(r) => r.answer(r.client.nack(
                id.0,
                &wire::Nack {
                    token: token.0,
                    error,
                    retry_in_ms: retry_in.map(millis),
                    permanent: false,
                },
            )),
        }
    }

    pub fn extend(&self, id: JobId, token: LeaseToken, lease_for: Duration) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => {
                let until = r.extend(id, token, lease_for)?;
                view_of(&wire::Changed::lease_until(id.0, conv::time(until)))
            }
            Target::Remote(r) => r.answer(r.client.extend(
                id.0,
                &wire::Extend {
                    token: token.0,
                    lease_for_ms: Some(millis(lease_for)),
                },
            )),
        }
    }

    pub fn admin(&self, id: JobId, what: Admin) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => match what {
                Admin::Cancel => r
                    .cancel(id)
                    .map(|()| wire::Changed::in_state(id.0, wire::State::Cancelled)),
                Admin::Retry => r.retry(id).map(|()| wire::Changed::in_state(id.0, wire::State::Ready)),
                Admin::Release(t, None) => r
                    .release(id, t)
                    .map(|()| wire::Changed::in_state(id.0, wire::State::Ready)),
                Admin::Release(t, Some(d)) => r
                    .snooze(id, t, d)
                    .map(|at| wire::Changed::in_state(id.0, wire::State::Ready).ready_at(conv::time(at))),
                Admin::Delete => r.delete(id).map(|()| wire::Changed::deleted(id.0)),
            }
            .map_err(CliError::from)
            .and_then(|done| view_of(&done)),
            Target::Remote(r) => match what {
                Admin::Cancel => r.answer(r.client.cancel(id.0)),
                Admin::Retry => r.answer(r.client.retry(id.0)),
                Admin::Release(t, delay) => r.answer(r.client.release(
                    id.0,
                    &wire::Release {
                        token: t.0,
                        in_ms: delay.map(millis),
                    },
                )),
                Admin::Delete => r.answer(r.client.delete(id.0)),
            },
        }
    }

    pub fn show(&self, id: JobId) -> Result<Doc, CliError> {
        match self {
            Target::Local(r) => doc(&conv::job(&r.get(id)?)),
            Target::Remote(r) => r.doc(r.client.get(id.0)),
        }
    }

    pub fn events(&self, id: JobId) -> Result<Vec<Value>, CliError> {
        match self {
            Target::Local(r) => r.events(id)?.iter().map(|e| view_of(&conv::event(e))).collect(),
            Target::Remote(r) => r.answers(r.client.events(id.0)),
        }
    }

    /// Pauses (`true`) or resumes a queue.
    pub fn pause(&self, queue: &str, paused: bool) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => {
                if paused {
                    r.pause(queue)?;
                } else {
                    r.resume(queue)?;
                }
                view_of(&wire::QueuePaused {
                    queue: queue.to_owned(),
                    paused,
                })
            }
            Target::Remote(r) if paused => r.answer(r.client.pause(queue)),
            Target::Remote(r) => r.answer(r.client.resume(queue)),
        }
    }

    /// Replaces a queue's limits.
    pub fn set_limits(&self, queue: &str, limits: relay::QueueLimits) -> Result<Value, CliError> {
        let wanted = wire::Limits {
            max_leased: limits.max_leased,
            rate_limit: limits.rate.map(conv::rate),
        };
        match self {
            Target::Local(r) => {
                r.set_queue_limits(queue, limits)?;
                view_of(&conv::queue_limits(queue.to_owned(), limits))
            }
            Target::Remote(r) => r.answer(r.client.set_limits(queue, &wanted)),
        }
    }

    /// A page of queues' stats (`{"queues", "next", "totals"}`, totals on
    /// the first page), as `GET /v1/stats` answers it.
    pub fn stats_page(&self, after: Option<String>) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => {
                let first = after.is_none();
                let page = r.stats_page(after.as_deref(), 1000)?;
                let totals = if first { Some(r.queue_totals()?) } else { None };
                view_of(&conv::stats(&page, totals.as_ref()))
            }
            Target::Remote(r) => r.answer(r.client.stats_page(&wire::QueuePage { after, limit: None })),
        }
    }

    /// Jobs matching `filter`, newest first.
    pub fn jobs(&self, filter: JobFilter) -> Result<Vec<Doc>, CliError> {
        match self {
            Target::Local(r) => r.list(&filter)?.iter().map(|j| doc(&conv::job(j))).collect(),
            Target::Remote(r) => {
                let query = wire::ListQuery::new(conv::filter(&filter), filter.before.map(|b| b.0), Some(filter.limit));
                r.docs(r.client.list(&query).map(|page| page.jobs))
            }
        }
    }

    /// Retries, cancels or deletes (`action`) every job `filter` matches;
    /// answers `{"action", "count"}`.
    pub fn bulk(&self, action: wire::BulkAction, filter: JobFilter) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => {
                let count = match action {
                    wire::BulkAction::Retry => r.retry_matching(&filter)?,
                    wire::BulkAction::Cancel => r.cancel_matching(&filter)?,
                    wire::BulkAction::Delete => r.delete_matching(&filter)?,
                };
                view_of(&wire::BulkDone { action, count })
            }
            Target::Remote(r) => r.answer(r.client.bulk(&wire::Bulk {
                action,
                filter: conv::filter(&filter),
            })),
        }
    }
}

/// One of the API's answers as the JSON every command prints: a local call
/// answers with the server's types, so both print the same.
fn view_of<T: serde::Serialize>(answer: &T) -> Result<Value, CliError> {
    serde_json::to_value(answer).map_err(|e| CliError::Io(format!("an answer that does not serialize: {e}")))
}

/// An answer carrying payloads as printed, exactly as serialized.
fn doc<T: serde::Serialize>(answer: &T) -> Result<Doc, CliError> {
    Doc::of(answer).map_err(CliError::Io)
}

/// A Relay server, reached over HTTP (`relay_client`).
pub struct Remote {
    pub client: relay_client::Client,
    token_given: bool,
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
        if let Some(t) = token {
            client = client.with_token(t);
        }
        Ok(Self { client, token_given })
    }

    /// A call's answer as the JSON every command prints (the views a
    /// local call prints too).
    pub fn answer<T: serde::Serialize>(&self, r: Result<T, relay_client::Error>) -> Result<Value, CliError> {
        let done = r.map_err(|e| self.error(e))?;
        serde_json::to_value(done).map_err(|e| CliError::Io(format!("the server's answer: {e}")))
    }

    /// An answer carrying payloads, as printed (payloads as answered).
    pub fn doc<T: serde::Serialize>(&self, r: Result<T, relay_client::Error>) -> Result<Doc, CliError> {
        doc(&r.map_err(|e| self.error(e))?)
    }

    /// A list of answers carrying payloads, each as printed.
    pub fn docs<T: serde::Serialize>(&self, r: Result<Vec<T>, relay_client::Error>) -> Result<Vec<Doc>, CliError> {
        r.map_err(|e| self.error(e))?.iter().map(doc).collect()
    }

    /// A list answer, each item as its JSON view.
    pub fn answers<T: serde::Serialize>(&self, r: Result<Vec<T>, relay_client::Error>) -> Result<Vec<Value>, CliError> {
        match self.answer(r)? {
            Value::Array(items) => Ok(items),
            other => Err(CliError::Io(format!("the server's answer is not a list: {other}"))),
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
