//! The blocking client: one method per call of the API, on `ureq`.

use crate::wire::{
    Ack, AppendEvent, Appended, Bulk, BulkDone, Changed, DeadGroup, DeadGroups, Event, Events, Extend, Job, JobPage,
    Lease, Leased, LeasedJob, Limits, ListQuery, Nack, NewJob, NewJobs, NewSchedule, QueueLimits, QueuePaused, Release,
    Schedule, ScheduleRemoved, Schedules, Stats, Submitted, SubmittedBatch,
};
use crate::Error;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::Duration;

/// A Relay server, reached over HTTP. Cheap to clone (the connection pool
/// is shared); every method is one request.
#[derive(Clone)]
pub struct Client {
    base: String,
    auth: Option<String>,
    agent: ureq::Agent,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("auth", &self.auth.as_ref().map(|_| "Bearer ***"))
            .finish()
    }
}

fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .build()
        .into()
}

impl Client {
    /// A client of the server at `base_url` (e.g. `http://127.0.0.1:7433`),
    /// without a token, giving up on a call after an hour (set less with
    /// [`Client::timeout`]; a long-poll lease waits at most the server's
    /// `--max-wait`).
    pub fn new(base_url: &str) -> Self {
        Self {
            base: base_url.trim_end_matches('/').to_owned(),
            auth: None,
            agent: agent(Duration::from_secs(3600)),
        }
    }

    /// Sends `token` as the bearer token of every call.
    #[must_use]
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.auth = Some(format!("Bearer {}", token.into()));
        self
    }

    /// Gives up on a call (connect, send, wait, read) after `d`.
    #[must_use]
    pub fn timeout(mut self, d: Duration) -> Self {
        self.agent = agent(d);
        self
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn call<T: DeserializeOwned>(&self, method: &str, path: &str, body: Option<&impl Serialize>) -> Result<T, Error> {
        let url = format!("{}{path}", self.base);
        let transport = |e: &dyn std::fmt::Display| Error::Transport {
            url: self.base.clone(),
            message: e.to_string(),
        };
        let json = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| Error::Decode(format!("the request does not serialize: {e}")))?;
        let res = match method {
            "GET" => self.auth(self.agent.get(&url)).call(),
            "DELETE" => self.auth(self.agent.delete(&url)).call(),
            "PUT" => self
                .auth(self.agent.put(&url))
                .header("Content-Type", "application/json")
                .send(json.unwrap_or_else(|| b"{}".to_vec())),
            _ => match json {
                Some(b) => self
                    .auth(self.agent.post(&url))
                    .header("Content-Type", "application/json")
                    .send(b),
                None => self.auth(self.agent.post(&url)).send_empty(),
            },
        };
        let mut res = res.map_err(|e| transport(&e))?;
        let status = res.status().as_u16();
        let text = res.body_mut().read_to_string().map_err(|e| transport(&e))?;
        if (200..300).contains(&status) {
            return serde_json::from_str(&text)
                .map_err(|e| Error::Decode(format!("{e}, in {status} {}", snippet(&text))));
        }
        Err(match serde_json::from_str::<crate::wire::ErrorBody>(&text) {
            Ok(b) => Error::Api {
                status,
                code: b.error.code,
                message: b.error.message,
            },
            Err(_) => Error::Api {
                status,
                code: "http".into(),
                message: format!("the server answered {status}: {}", snippet(&text)),
            },
        })
    }

    fn auth<B>(&self, req: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.auth {
            Some(a) => req.header("Authorization", a),
            None => req,
        }
    }

    /// Submits a job (`POST /v1/jobs`).
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_input` (nothing written) and the
    /// server's other errors; [`Error::Transport`] (the job may exist: give
    /// it a unique key to retry safely).
    pub fn submit(&self, job: &NewJob) -> Result<Submitted, Error> {
        self.call("POST", "/v1/jobs", Some(job))
    }

    /// Submits jobs in one transaction (`POST /v1/jobs/batch`): all or none.
    ///
    /// # Errors
    ///
    /// As [`Client::submit`]; a refused job refuses the batch.
    pub fn submit_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<i64>, Error> {
        let done: SubmittedBatch = self.call("POST", "/v1/jobs/batch", Some(&NewJobs { jobs }))?;
        Ok(done.ids)
    }

    /// Leases ready jobs (`POST /v1/lease`), waiting up to `wait_ms` for one.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] (`invalid_input`, `too_many_waiting`...);
    /// [`Error::Transport`] (jobs may have been leased: they run again when
    /// their leases expire).
    pub fn lease(&self, req: &Lease) -> Result<Vec<LeasedJob>, Error> {
        let leased: Leased = self.call("POST", "/v1/lease", Some(req))?;
        Ok(leased.jobs)
    }

    /// Acknowledges a leased job: SUCCEEDED. Repeating an ack that
    /// succeeded (after a timeout) answers success again.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `lease_lost` (another lease holds the job, or
    /// yours expired: drop it) or `invalid_state` (it is no longer LEASED);
    /// nothing changed.
    pub fn ack(&self, id: i64, ack: &Ack) -> Result<Changed, Error> {
        self.call("POST", &format!("/v1/jobs/{id}/ack"), Some(ack))
    }

    /// Reports a failed attempt: the job retries later, or is DEAD.
    ///
    /// # Errors
    ///
    /// As [`Client::ack`].
    pub fn nack(&self, id: i64, nack: &Nack) -> Result<Changed, Error> {
        self.call("POST", &format!("/v1/jobs/{id}/nack"), Some(nack))
    }

    /// Extends a lease from now.
    ///
    /// # Errors
    ///
    /// As [`Client::ack`].
    pub fn extend(&self, id: i64, extend: &Extend) -> Result<Changed, Error> {
        self.call("POST", &format!("/v1/jobs/{id}/extend"), Some(extend))
    }

    /// Gives a leased job back (or snoozes it), the attempt not counted.
    ///
    /// # Errors
    ///
    /// As [`Client::ack`].
    pub fn release(&self, id: i64, release: &Release) -> Result<Changed, Error> {
        self.call("POST", &format!("/v1/jobs/{id}/release"), Some(release))
    }

    /// Cancels a READY, WAITING or LEASED job.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found` or `invalid_state`; nothing changed.
    pub fn cancel(&self, id: i64) -> Result<Changed, Error> {
        self.call("POST", &format!("/v1/jobs/{id}/cancel"), None::<&()>)
    }

    /// Runs a DEAD or CANCELLED job again.
    ///
    /// # Errors
    ///
    /// As [`Client::cancel`], and `conflict` when its unique key was taken.
    pub fn retry(&self, id: i64) -> Result<Changed, Error> {
        self.call("POST", &format!("/v1/jobs/{id}/retry"), None::<&()>)
    }

    /// Deletes a job that is not LEASED, with its events.
    ///
    /// # Errors
    ///
    /// As [`Client::cancel`].
    pub fn delete(&self, id: i64) -> Result<Changed, Error> {
        self.call("DELETE", &format!("/v1/jobs/{id}"), None::<&()>)
    }

    /// One job.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found`.
    pub fn get(&self, id: i64) -> Result<Job, Error> {
        self.call("GET", &format!("/v1/jobs/{id}"), None::<&()>)
    }

    /// A job's event log, oldest first.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found`.
    pub fn events(&self, id: i64) -> Result<Vec<Event>, Error> {
        let events: Events = self.call("GET", &format!("/v1/jobs/{id}/events"), None::<&()>)?;
        Ok(events.events)
    }

    /// Appends a worker's own event to a job's log.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found` or `invalid_input`.
    pub fn append_event(&self, id: i64, event: &AppendEvent) -> Result<Appended, Error> {
        self.call("POST", &format!("/v1/jobs/{id}/events"), Some(event))
    }

    /// A page of the jobs a query matches, newest first.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_request` (a bad state, time or limit).
    pub fn list(&self, query: &ListQuery) -> Result<JobPage, Error> {
        let q: Vec<String> = query
            .pairs()
            .into_iter()
            .map(|(k, v)| format!("{k}={}", encode(&v)))
            .collect();
        self.call("GET", &format!("/v1/jobs?{}", q.join("&")), None::<&()>)
    }

    /// Retries, cancels or deletes every job a filter matches.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_request` (an empty filter, an unknown
    /// action); a failure part way leaves the chunks done so far done.
    pub fn bulk(&self, bulk: &Bulk) -> Result<BulkDone, Error> {
        self.call("POST", "/v1/jobs/bulk", Some(bulk))
    }

    /// DEAD jobs grouped by queue, kind and first line of error.
    ///
    /// # Errors
    ///
    /// The server's errors.
    pub fn dead_groups(&self, limit: u32) -> Result<Vec<DeadGroup>, Error> {
        let groups: DeadGroups = self.call("GET", &format!("/v1/dead?limit={limit}"), None::<&()>)?;
        Ok(groups.groups)
    }

    /// Jobs per queue and state, with each queue's settings.
    ///
    /// # Errors
    ///
    /// The server's errors.
    pub fn stats(&self) -> Result<Stats, Error> {
        self.call("GET", "/v1/stats", None::<&()>)
    }

    /// Pauses a queue: none of its jobs is leased until it is resumed.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_input` (a bad queue name).
    pub fn pause(&self, queue: &str) -> Result<QueuePaused, Error> {
        self.call("POST", &format!("/v1/queues/{}/pause", segment(queue)), None::<&()>)
    }

    /// Resumes a paused queue.
    ///
    /// # Errors
    ///
    /// As [`Client::pause`].
    pub fn resume(&self, queue: &str) -> Result<QueuePaused, Error> {
        self.call("POST", &format!("/v1/queues/{}/resume", segment(queue)), None::<&()>)
    }

    /// Replaces a queue's limits (a limit left out is lifted).
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_input`.
    pub fn set_limits(&self, queue: &str, limits: &Limits) -> Result<QueueLimits, Error> {
        self.call("PUT", &format!("/v1/queues/{}/limits", segment(queue)), Some(limits))
    }

    /// Every schedule.
    ///
    /// # Errors
    ///
    /// The server's errors.
    pub fn schedules(&self) -> Result<Vec<Schedule>, Error> {
        let all: Schedules = self.call("GET", "/v1/schedules", None::<&()>)?;
        Ok(all.schedules)
    }

    /// Adds a schedule, or replaces the one of this name.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_input` or `invalid_request`.
    pub fn put_schedule(&self, name: &str, schedule: &NewSchedule) -> Result<Schedule, Error> {
        self.call("PUT", &format!("/v1/schedules/{}", segment(name)), Some(schedule))
    }

    /// Removes a schedule (the jobs it enqueued stay).
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found`.
    pub fn remove_schedule(&self, name: &str) -> Result<ScheduleRemoved, Error> {
        self.call("DELETE", &format!("/v1/schedules/{}", segment(name)), None::<&()>)
    }

    /// Pauses a schedule: its ticks enqueue nothing.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found`.
    pub fn pause_schedule(&self, name: &str) -> Result<Schedule, Error> {
        self.call("POST", &format!("/v1/schedules/{}/pause", segment(name)), None::<&()>)
    }

    /// Resumes a schedule from its next tick after now.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found`.
    pub fn resume_schedule(&self, name: &str) -> Result<Schedule, Error> {
        self.call("POST", &format!("/v1/schedules/{}/resume", segment(name)), None::<&()>)
    }
}

/// At most 200 characters of an answer, for messages.
fn snippet(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_owned(),
    }
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

/// `s` as one path segment: anything but A-Z a-z 0-9 _ . - is
/// percent-encoded (a bad name then reaches the server whole, and its
/// error names it).
fn segment(s: &str) -> String {
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
