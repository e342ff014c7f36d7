//! The blocking client: one method per call of the API, on `ureq`.

use crate::calls::{self, Call};
use crate::wire::{
    Ack, AppendEvent, Appended, Bulk, BulkDone, Changed, DeadGroup, Event, Extend, Heartbeat, ItemAnswer, Job, JobPage,
    Lease, LeasedJob, Limits, ListQuery, Nack, NewJob, NewSchedule, QueueLimits, QueuePage, QueuePaused, Release,
    Schedule, ScheduleRemoved, Stats, Submitted, Work, Worked,
};
use crate::Error;
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

    fn run<T>(&self, call: Call<T>) -> Result<T, Error> {
        let url = format!("{}{}", self.base, call.path);
        let transport = |e: &dyn std::fmt::Display| Error::Transport {
            url: self.base.clone(),
            message: e.to_string(),
        };
        let res = match (call.method, &call.body) {
            ("GET", _) => self.auth(self.agent.get(&url)).call(),
            ("DELETE", _) => self.auth(self.agent.delete(&url)).call(),
            (method, Some(body)) => {
                let req = if method == "PUT" {
                    self.agent.put(&url)
                } else {
                    self.agent.post(&url)
                };
                self.auth(req)
                    .header("Content-Type", "application/json")
                    .send(body.as_slice())
            }
            (_, None) => self.auth(self.agent.post(&url)).send_empty(),
        };
        let mut res = res.map_err(|e| transport(&crate::error::sending(&e)))?;
        let status = res.status().as_u16();
        // No cap of the client's own: an answer is as large as the server
        // made it (the server bounds its lists in bytes); ureq's default
        // of 10 MiB made a big answer read as "cannot reach the server".
        let text = res
            .body_mut()
            .with_config()
            .limit(u64::MAX)
            .read_to_string()
            .map_err(|e| transport(&e))?;
        if (200..300).contains(&status) {
            call.answer(status, &text)
        } else {
            Err(calls::refused(status, &text))
        }
    }

    fn auth<B>(&self, req: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.auth {
            Some(a) => req.header("Authorization", a),
            None => req,
        }
    }

    /// Sends any call of the API's table ([`crate::wire::calls`]) with its
    /// path parameter (`()`, a job's id, a queue's or schedule's name), its
    /// query and its body ([`crate::wire::Nothing`] for none); answers its
    /// answer type. The named methods below are this with their types.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), relay_client::Error> {
    /// use relay_client::wire::{calls, Nothing};
    /// let relay = relay_client::Client::new("http://127.0.0.1:7433");
    /// let paused = relay.send::<calls::PauseQueue>(&"emails".to_owned(), &Nothing {}, &Nothing {})?;
    /// assert!(paused.paused);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// The server's error answers ([`Error::Api`]), [`Error::Transport`]
    /// and [`Error::Decode`], as for the named methods.
    pub fn send<C: crate::wire::Call>(
        &self,
        param: &C::Param,
        query: &C::Query,
        body: &C::Body,
    ) -> Result<C::Answer, Error> {
        self.run(calls::of::<C>(param, query, body)?)
    }

    /// Submits a job (`POST /v1/jobs`).
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_input` (nothing written) and the
    /// server's other errors; [`Error::Transport`] (the job may exist: give
    /// it a unique key to retry safely).
    pub fn submit(&self, job: &NewJob) -> Result<Submitted, Error> {
        self.run(calls::submit(job)?)
    }

    /// Submits jobs in one transaction (`POST /v1/jobs/batch`): all or none.
    ///
    /// # Errors
    ///
    /// As [`Client::submit`]; a refused job refuses the batch.
    pub fn submit_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<i64>, Error> {
        self.run(calls::submit_batch(jobs)?)
    }

    /// Leases ready jobs (`POST /v1/lease`), waiting up to `wait_ms` for one.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] (`invalid_input`, `too_many_waiting`...);
    /// [`Error::Transport`] (jobs may have been leased: they run again when
    /// their leases expire).
    pub fn lease(&self, req: &Lease) -> Result<Vec<LeasedJob>, Error> {
        self.run(calls::lease(req)?)
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
        self.run(calls::ack(id, ack)?)
    }

    /// Reports a failed attempt: the job retries later, or is DEAD.
    ///
    /// # Errors
    ///
    /// As [`Client::ack`].
    pub fn nack(&self, id: i64, nack: &Nack) -> Result<Changed, Error> {
        self.run(calls::nack(id, nack)?)
    }

    /// Extends a lease from now.
    ///
    /// # Errors
    ///
    /// As [`Client::ack`].
    pub fn extend(&self, id: i64, extend: &Extend) -> Result<Changed, Error> {
        self.run(calls::extend(id, extend)?)
    }

    /// Reports the outcomes of leased jobs and leases the next ones, in one
    /// call and one commit on the server (`POST /v1/work`). Each outcome is
    /// answered on its own in [`Worked::outcomes`](crate::wire::Worked):
    /// a stale token fails only its own item. The lease's wait applies only
    /// when there are no outcomes.
    ///
    /// # Errors
    ///
    /// For the whole call: [`Error::Api`] (`invalid_request`,
    /// `invalid_input` for a bad lease, `too_many_waiting`...; nothing was
    /// applied) and [`Error::Transport`] (the outcomes may or may not have
    /// been applied: sending the same call again is safe, an ack repeated
    /// with its token is answered with its state again).
    pub fn work(&self, work: &Work) -> Result<Worked, Error> {
        self.run(calls::work(work)?)
    }

    /// Extends many leases at once (`POST /v1/heartbeat`): one answer per
    /// lease, in order, with its new expiry or its own error (`lease_lost`,
    /// `invalid_state`, `not_found`: the job is no longer held).
    ///
    /// # Errors
    ///
    /// For the whole call, as [`Client::work`].
    pub fn heartbeat(&self, beat: &Heartbeat) -> Result<Vec<ItemAnswer>, Error> {
        self.run(calls::heartbeat(beat)?)
    }

    /// Gives a leased job back (or snoozes it), the attempt not counted.
    ///
    /// # Errors
    ///
    /// As [`Client::ack`].
    pub fn release(&self, id: i64, release: &Release) -> Result<Changed, Error> {
        self.run(calls::release(id, release)?)
    }

    /// Cancels an unfinished job (WAITING, READY, SCHEDULED, RETRYING or LEASED).
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found` or `invalid_state`; nothing changed.
    pub fn cancel(&self, id: i64) -> Result<Changed, Error> {
        self.run(calls::cancel(id)?)
    }

    /// Runs a DEAD or CANCELLED job again.
    ///
    /// # Errors
    ///
    /// As [`Client::cancel`], and `conflict` when its unique key was taken.
    pub fn retry(&self, id: i64) -> Result<Changed, Error> {
        self.run(calls::retry(id)?)
    }

    /// Deletes a job that is not LEASED, with its events.
    ///
    /// # Errors
    ///
    /// As [`Client::cancel`].
    pub fn delete(&self, id: i64) -> Result<Changed, Error> {
        self.run(calls::delete(id)?)
    }

    /// One job.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found`.
    pub fn get(&self, id: i64) -> Result<Job, Error> {
        self.run(calls::get(id)?)
    }

    /// Awaits a job's end for at most `timeout`: the job once it is
    /// SUCCEEDED, DEAD or CANCELLED (its `result`, its `last_error`), or
    /// `None` when it had not ended by then. Long-polls
    /// `GET /v1/jobs/{id}/result` (30 s a call), woken by the commit that
    /// ends the job.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found`; `too_many_waiting` when the server's
    /// long-polls are all taken.
    pub fn result(&self, id: i64, timeout: Duration) -> Result<Option<Job>, Error> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let job = self.run(calls::job_result(id, left.min(calls::RESULT_WAIT))?)?;
            if calls::ended(&job) {
                return Ok(Some(job));
            }
            if left.is_zero() {
                return Ok(None);
            }
        }
    }

    /// A job's event log, oldest first (every page of it).
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found`.
    pub fn events(&self, id: i64) -> Result<Vec<Event>, Error> {
        let mut all = Vec::new();
        let mut after = 0;
        loop {
            let page = self.events_page(id, after, None)?;
            all.extend(page.events);
            match page.next {
                Some(next) => after = next,
                None => return Ok(all),
            }
        }
    }

    /// A page of a job's event log: the events after `seq` `after` (0:
    /// from the first), at most `limit` (1-1000; 1000 when `None`) and
    /// 4 MiB; `next` is the next page's `after`.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found`, or `invalid_request` for a limit
    /// out of range.
    pub fn events_page(&self, id: i64, after: i64, limit: Option<u32>) -> Result<crate::wire::Events, Error> {
        self.run(calls::events_page(id, after, limit)?)
    }

    /// Appends a worker's own event to a job's log.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found` or `invalid_input`.
    pub fn append_event(&self, id: i64, event: &AppendEvent) -> Result<Appended, Error> {
        self.run(calls::append_event(id, event)?)
    }

    /// A page of the jobs a query matches, newest first.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_request` (a bad state, time or limit).
    pub fn list(&self, query: &ListQuery) -> Result<JobPage, Error> {
        self.run(calls::list(query)?)
    }

    /// Retries, cancels or deletes every job a filter matches.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_request` (an empty filter, an unknown
    /// action); a failure part way leaves the chunks done so far done.
    pub fn bulk(&self, bulk: &Bulk) -> Result<BulkDone, Error> {
        self.run(calls::bulk(bulk)?)
    }

    /// DEAD jobs grouped by queue, kind and first line of error.
    ///
    /// # Errors
    ///
    /// The server's errors.
    pub fn dead_groups(&self, limit: u32) -> Result<Vec<DeadGroup>, Error> {
        self.run(calls::dead_groups(limit)?)
    }

    /// Jobs per queue and state, with each queue's settings: every queue,
    /// a page (of 1,000) per call.
    ///
    /// # Errors
    ///
    /// The server's errors.
    pub fn stats(&self) -> Result<Stats, Error> {
        let mut page = QueuePage::default();
        let mut all = self.run(calls::stats(&page)?)?;
        while let Some(next) = all.next.take() {
            page.after = Some(next);
            let more = self.run(calls::stats(&page)?)?;
            all.queues.extend(more.queues);
            all.next = more.next;
        }
        Ok(all)
    }

    /// One page of [`Self::stats`]: at most `page.limit` queues named after
    /// `page.after`, and the next page's `after`; the first page (no
    /// `after`) carries the totals over every queue.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_request` for a limit out of 1-1000.
    pub fn stats_page(&self, page: &QueuePage) -> Result<Stats, Error> {
        self.run(calls::stats(page)?)
    }

    /// Pauses a queue: none of its jobs is leased until it is resumed.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_input` (a bad queue name).
    pub fn pause(&self, queue: &str) -> Result<QueuePaused, Error> {
        self.run(calls::pause(queue)?)
    }

    /// Resumes a paused queue.
    ///
    /// # Errors
    ///
    /// As [`Client::pause`].
    pub fn resume(&self, queue: &str) -> Result<QueuePaused, Error> {
        self.run(calls::resume(queue)?)
    }

    /// Replaces a queue's limits (a limit left out is lifted).
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_input`.
    pub fn set_limits(&self, queue: &str, limits: &Limits) -> Result<QueueLimits, Error> {
        self.run(calls::set_limits(queue, limits)?)
    }

    /// Every schedule.
    ///
    /// # Errors
    ///
    /// The server's errors.
    pub fn schedules(&self) -> Result<Vec<Schedule>, Error> {
        self.run(calls::schedules()?)
    }

    /// Adds a schedule, or replaces the one of this name.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `invalid_input` or `invalid_request`.
    pub fn put_schedule(&self, name: &str, schedule: &NewSchedule) -> Result<Schedule, Error> {
        self.run(calls::put_schedule(name, schedule)?)
    }

    /// Removes a schedule (the jobs it enqueued stay).
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found`.
    pub fn remove_schedule(&self, name: &str) -> Result<ScheduleRemoved, Error> {
        self.run(calls::remove_schedule(name)?)
    }

    /// Pauses a schedule: its ticks enqueue nothing.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found`.
    pub fn pause_schedule(&self, name: &str) -> Result<Schedule, Error> {
        self.run(calls::pause_schedule(name)?)
    }

    /// Resumes a schedule from its next tick after now.
    ///
    /// # Errors
    ///
    /// [`Error::Api`] with `not_found`.
    pub fn resume_schedule(&self, name: &str) -> Result<Schedule, Error> {
        self.run(calls::resume_schedule(name)?)
    }
}
