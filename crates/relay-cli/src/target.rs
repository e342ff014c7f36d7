//! Where a command goes: a database file (the library) or a Relay server
//! (HTTP). Both answer with the same JSON views, so every subcommand prints
//! the same output either way.

use crate::commands::CliError;
use relay::{view, Completion, JobFilter, JobId, JobState, LeaseRequest, LeaseToken, NewJob, Relay};
use serde_json::{json, Value};
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
    pub lease_for: Option<Duration>,
    pub timeout: Option<Duration>,
    pub depends_on: Vec<i64>,
    pub on_dependency_failure: relay::DependencyFailure,
    pub traceparent: Option<String>,
    pub tags: Vec<String>,
}

impl Submit {
    fn job(self) -> NewJob {
        let mut job = NewJob::new(self.queue, self.kind, self.payload).priority(self.priority);
        if let Some(d) = self.delay {
            job = job.delay(d);
        }
        if let Some(t) = self.run_at {
            job = job.run_at(t);
        }
        if let Some(n) = self.max_attempts {
            job = job.max_attempts(n);
        }
        if let Some(k) = self.unique_key {
            job = job.unique_key(k);
        }
        if let Some(d) = self.lease_for {
            job = job.lease_for(d);
        }
        if let Some(d) = self.timeout {
            job = job.timeout(d);
        }
        if !self.depends_on.is_empty() {
            job = job
                .depends_on(self.depends_on.into_iter().map(JobId))
                .on_dependency_failure(self.on_dependency_failure);
        }
        if let Some(t) = self.traceparent {
            job = job.traceparent(t);
        }
        if !self.tags.is_empty() {
            job = job.tags(self.tags);
        }
        job
    }

    /// The job as the server's `NewJob` body.
    fn body(self) -> Value {
        let mut body = json!({"queue": self.queue, "kind": self.kind, "priority": self.priority,
            "delay_ms": self.delay.map(millis), "run_at": self.run_at.map(relay::Timestamp::to_rfc3339),
            "max_attempts": self.max_attempts, "unique_key": self.unique_key,
            "lease_for_ms": self.lease_for.map(millis), "timeout_ms": self.timeout.map(millis),
            "traceparent": self.traceparent});
        if !self.tags.is_empty() {
            body["tags"] = json!(self.tags);
        }
        if !self.depends_on.is_empty() {
            body["depends_on"] = json!(self.depends_on);
            body["on_dependency_failure"] = json!(self.on_dependency_failure);
        }
        // As bytes: the server stores exactly what a local submit would
        // (JSON text as given, and text that is not JSON).
        if !self.payload.is_empty() {
            body["payload_base64"] = json!(base64_of(&self.payload));
        }
        body
    }
}

fn base64_of(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
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

/// `s` as one segment of a URL path: anything but A-Z a-z 0-9 _ . - is
/// percent-encoded (queue names are those; a wrong one then reaches the
/// server whole, and its error names it).
fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Target {
    pub fn submit(&self, s: Submit) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => {
                let done = r.submit_outcome(s.job())?;
                Ok(if done.existing {
                    json!({"id": done.id, "existing": true})
                } else {
                    json!({"id": done.id})
                })
            }
            Target::Remote(r) => r.call("POST", "/v1/jobs", Some(s.body())),
        }
    }

    /// Adds (or replaces) a schedule whose ticks enqueue `job`.
    pub fn add_schedule(&self, name: &str, when: When, job: Submit) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => {
                let new = match when {
                    When::Cron { expr, tz } => {
                        let mut n = relay::NewSchedule::cron(name, expr, job.job());
                        if let Some(tz) = tz {
                            n = n.tz(tz);
                        }
                        n
                    }
                    When::Every(d, tz) => {
                        let mut n = relay::NewSchedule::every(name, d, job.job());
                        if let Some(tz) = tz {
                            n = n.tz(tz); // refused: a time zone needs a cron expression
                        }
                        n
                    }
                };
                Ok(view::schedule(&r.add_schedule(new)?))
            }
            Target::Remote(r) => {
                // A time zone is sent only when given (the server takes no null).
                let (mut body, tz) = match when {
                    When::Cron { expr, tz } => (json!({"cron": expr, "job": job.body()}), tz),
                    When::Every(d, tz) => (json!({"every_ms": millis(d), "job": job.body()}), tz),
                };
                if let Some(tz) = tz {
                    body["tz"] = json!(tz);
                }
                r.call("PUT", &format!("/v1/schedules/{}", path_segment(name)), Some(body))
            }
        }
    }

    pub fn schedules(&self) -> Result<Vec<Value>, CliError> {
        let v = match self {
            Target::Local(r) => return Ok(r.schedules()?.iter().map(view::schedule).collect()),
            Target::Remote(r) => r.call("GET", "/v1/schedules", None)?,
        };
        Ok(v["schedules"].as_array().cloned().unwrap_or_default())
    }

    /// Removes, pauses or resumes a schedule.
    pub fn schedule_admin(&self, name: &str, what: ScheduleAdmin) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => match what {
                ScheduleAdmin::Remove => r.remove_schedule(name).map(|()| json!({"name": name, "deleted": true})),
                ScheduleAdmin::Pause => r.pause_schedule(name).map(|s| view::schedule(&s)),
                ScheduleAdmin::Resume => r.resume_schedule(name).map(|s| view::schedule(&s)),
            }
            .map_err(CliError::from),
            Target::Remote(r) => {
                let path = format!("/v1/schedules/{}", path_segment(name));
                match what {
                    ScheduleAdmin::Remove => r.call("DELETE", &path, None),
                    ScheduleAdmin::Pause => r.call("POST", &format!("{path}/pause"), None),
                    ScheduleAdmin::Resume => r.call("POST", &format!("{path}/resume"), None),
                }
            }
        }
    }

    pub fn lease(&self, l: Lease) -> Result<Vec<Value>, CliError> {
        match self {
            Target::Local(r) => {
                let mut req = LeaseRequest::new(l.queues)
                    .lease_for(l.lease_for)
                    .wait(l.wait)
                    .max(l.max);
                if let Some(w) = l.worker {
                    req = req.worker(w);
                }
                Ok(r.lease(req)?.iter().map(view::leased).collect())
            }
            Target::Remote(r) => {
                let body = json!({"queues": l.queues, "worker": l.worker, "max": l.max,
                    "lease_for_ms": millis(l.lease_for), "wait_ms": millis(l.wait)});
                list(r.call("POST", "/v1/lease", Some(body))?, "jobs")
            }
        }
    }

    pub fn ack(&self, id: JobId, token: LeaseToken, result: Option<String>) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => {
                r.ack(id, token, result.map(String::into_bytes))?;
                Ok(json!({"id": id, "state": "SUCCEEDED"}))
            }
            // As bytes: the server keeps exactly what a local ack would.
            Target::Remote(r) => r.call(
                "POST",
                &format!("/v1/jobs/{id}/ack"),
                Some(json!({"token": token, "result_base64": result.map(|t| base64_of(t.as_bytes()))})),
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
            Target::Local(r) => {
                let s = r
                    .complete_batch(vec![Completion::nack(id, token, error, retry_in)])?
                    .pop()
                    .unwrap_or(Err(relay::Error::Closed))?;
                let mut v = json!({"id": id, "state": s.state.as_str()});
                if s.state == JobState::Ready {
                    v["ready_at"] = json!(view::time(s.ready_at));
                }
                Ok(v)
            }
            Target::Remote(r) => r.call(
                "POST",
                &format!("/v1/jobs/{id}/nack"),
                Some(json!({"token": token, "error": error, "retry_in_ms": retry_in.map(millis)})),
            ),
        }
    }

    pub fn extend(&self, id: JobId, token: LeaseToken, lease_for: Duration) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => {
                let until = r.extend(id, token, lease_for)?;
                Ok(json!({"id": id, "lease_expires_at": view::time(until)}))
            }
            Target::Remote(r) => r.call(
                "POST",
                &format!("/v1/jobs/{id}/extend"),
                Some(json!({"token": token, "lease_for_ms": millis(lease_for)})),
            ),
        }
    }

    pub fn admin(&self, id: JobId, what: Admin) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => match what {
                Admin::Cancel => r.cancel(id).map(|()| json!({"id": id, "state": "CANCELLED"})),
                Admin::Retry => r.retry(id).map(|()| json!({"id": id, "state": "READY"})),
                Admin::Release(t, None) => r.release(id, t).map(|()| json!({"id": id, "state": "READY"})),
                Admin::Release(t, Some(d)) => r
                    .snooze(id, t, d)
                    .map(|at| json!({"id": id, "state": "READY", "ready_at": view::time(at)})),
                Admin::Delete => r.delete(id).map(|()| json!({"id": id, "deleted": true})),
            }
            .map_err(CliError::from),
            Target::Remote(r) => match what {
                Admin::Cancel => r.call("POST", &format!("/v1/jobs/{id}/cancel"), None),
                Admin::Retry => r.call("POST", &format!("/v1/jobs/{id}/retry"), None),
                Admin::Release(t, delay) => r.call(
                    "POST",
                    &format!("/v1/jobs/{id}/release"),
                    Some(json!({"token": t, "in_ms": delay.map(millis)})),
                ),
                Admin::Delete => r.call("DELETE", &format!("/v1/jobs/{id}"), None),
            },
        }
    }

    pub fn show(&self, id: JobId) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => Ok(view::job(&r.get(id)?)),
            Target::Remote(r) => r.call("GET", &format!("/v1/jobs/{id}"), None),
        }
    }

    pub fn events(&self, id: JobId) -> Result<Vec<Value>, CliError> {
        match self {
            Target::Local(r) => Ok(r.events(id)?.iter().map(view::event).collect()),
            Target::Remote(r) => list(r.call("GET", &format!("/v1/jobs/{id}/events"), None)?, "events"),
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
                Ok(json!({"queue": queue, "paused": paused}))
            }
            Target::Remote(r) => {
                let verb = if paused { "pause" } else { "resume" };
                r.call("POST", &format!("/v1/queues/{}/{verb}", path_segment(queue)), None)
            }
        }
    }

    /// Replaces a queue's limits.
    pub fn set_limits(&self, queue: &str, limits: relay::QueueLimits) -> Result<Value, CliError> {
        let mut v = view::limits(&limits);
        match self {
            Target::Local(r) => {
                r.set_queue_limits(queue, limits)?;
                v.insert("queue".into(), json!(queue));
                Ok(Value::Object(v))
            }
            Target::Remote(r) => r.call(
                "PUT",
                &format!("/v1/queues/{}/limits", path_segment(queue)),
                Some(Value::Object(v)),
            ),
        }
    }

    pub fn stats(&self) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => Ok(view::stats(&r.stats()?)),
            Target::Remote(r) => r.call("GET", "/v1/stats", None),
        }
    }

    /// Jobs matching `filter`, newest first.
    pub fn jobs(&self, filter: JobFilter) -> Result<Vec<Value>, CliError> {
        match self {
            Target::Local(r) => Ok(r.list(&filter)?.iter().map(view::job).collect()),
            Target::Remote(r) => list(r.call("GET", &format!("/v1/jobs?{}", query(&filter)), None)?, "jobs"),
        }
    }

    /// Retries, cancels or deletes (`action`) every job `filter` matches;
    /// answers `{"action", "count"}`.
    pub fn bulk(&self, action: &str, filter: JobFilter) -> Result<Value, CliError> {
        match self {
            Target::Local(r) => {
                let count = match action {
                    "retry" => r.retry_matching(&filter)?,
                    "cancel" => r.cancel_matching(&filter)?,
                    _ => r.delete_matching(&filter)?,
                };
                Ok(json!({"action": action, "count": count}))
            }
            Target::Remote(r) => {
                let mut f = serde_json::Map::new();
                let mut put = |k: &str, v: Option<Value>| {
                    if let Some(v) = v {
                        f.insert(k.into(), v);
                    }
                };
                put("queue", filter.queue.map(Value::from));
                put("state", filter.state.map(|s| Value::from(s.as_str())));
                put("kind", filter.kind.map(Value::from));
                put("tag", filter.tag.map(Value::from));
                put("since", filter.since.map(|t| Value::from(t.to_rfc3339())));
                put("until", filter.until.map(|t| Value::from(t.to_rfc3339())));
                put("error_contains", filter.error_contains.map(Value::from));
                r.call("POST", "/v1/jobs/bulk", Some(json!({"action": action, "filter": f})))
            }
        }
    }
}

/// A filter as the list endpoint's query string.
fn query(f: &JobFilter) -> String {
    let mut q = vec![format!("limit={}", f.limit)];
    let mut put = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            q.push(format!("{k}={}", encode(&v)));
        }
    };
    put("queue", f.queue.clone());
    put("state", f.state.map(|s| s.as_str().to_owned()));
    put("kind", f.kind.clone());
    put("tag", f.tag.clone());
    put("since", f.since.map(relay::Timestamp::to_rfc3339));
    put("until", f.until.map(relay::Timestamp::to_rfc3339));
    put("error_contains", f.error_contains.clone());
    put("before", f.before.map(|b| b.to_string()));
    q.join("&")
}

/// Percent-encodes a query value (everything but the unreserved characters).
fn encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn list(mut v: Value, key: &str) -> Result<Vec<Value>, CliError> {
    match v.get_mut(key).map(Value::take) {
        Some(Value::Array(items)) => Ok(items),
        _ => Err(CliError::Io(format!("the server's answer has no {key:?} list"))),
    }
}

/// A Relay server, reached over HTTP.
pub struct Remote {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
}

impl Remote {
    pub fn new(base: &str, token: Option<String>) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(3600)))
            .build()
            .into();
        Self {
            base: base.trim_end_matches('/').to_owned(),
            token,
            agent,
        }
    }

    pub(crate) fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, CliError> {
        let url = format!("{}{path}", self.base);
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let res = match method {
            "GET" => with_auth(self.agent.get(&url), auth.as_deref()).call(),
            "DELETE" => with_auth(self.agent.delete(&url), auth.as_deref()).call(),
            "PUT" => with_auth(self.agent.put(&url), auth.as_deref()).send_json(body.unwrap_or(Value::Null)),
            _ => match body {
                Some(b) => with_auth(self.agent.post(&url), auth.as_deref()).send_json(b),
                None => with_auth(self.agent.post(&url), auth.as_deref()).send_empty(),
            },
        };
        let mut res = res.map_err(|e| CliError::Io(format!("cannot reach the server at {}: {e}", self.base)))?;
        let status = res.status().as_u16();
        let text = res
            .body_mut()
            .read_to_string()
            .map_err(|e| CliError::Io(format!("reading the server's answer: {e}")))?;
        let v: Value = serde_json::from_str(&text).map_err(|_| {
            CliError::Io(format!(
                "the server answered {status} with something that is not JSON: {}",
                text.trim()
            ))
        })?;
        if (200..300).contains(&status) {
            return Ok(v);
        }
        let code = v["error"]["code"].as_str().unwrap_or("error").to_owned();
        let mut message = v["error"]["message"].as_str().unwrap_or(text.trim()).to_owned();
        if status == 401 {
            let given = if self.token.is_some() {
                "the token given was refused"
            } else {
                "no token was given"
            };
            message = format!("{message} ({given}: pass the server's token with --auth TOKEN or RELAY_TOKEN)");
        }
        Err(CliError::Remote { status, code, message })
    }
}

fn with_auth<B>(req: ureq::RequestBuilder<B>, auth: Option<&str>) -> ureq::RequestBuilder<B> {
    match auth {
        Some(a) => req.header("Authorization", a),
        None => req,
    }
}
