//! The async client: the calls of [`crate::Client`], as futures, on
//! `reqwest` (which needs a Tokio runtime).

use crate::calls::{self, Call};
use crate::wire::{
    Ack, AppendEvent, Appended, Bulk, BulkDone, Changed, DeadGroup, Event, Extend, Heartbeat, ItemAnswer, Job, JobPage,
    Lease, LeasedJob, Limits, ListQuery, Nack, NewJob, NewSchedule, QueueLimits, QueuePage, QueuePaused, Release,
    Schedule, ScheduleRemoved, Stats, Submitted, Work, Worked,
};
use crate::Error;
use std::time::Duration;

/// A Relay server, reached over HTTP from async code (a Tokio runtime).
/// Cheap to clone (the connection pool is shared); every method is one
/// request, with the same answers and errors as [`crate::Client`]'s.
#[derive(Clone)]
pub struct AsyncClient {
    base: String,
    auth: Option<String>,
    http: reqwest::Client,
    timeout: Duration,
}

impl std::fmt::Debug for AsyncClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncClient")
            .field("base", &self.base)
            .field("auth", &self.auth.as_ref().map(|_| "Bearer ***"))
            .finish()
    }
}

impl AsyncClient {
    /// A client of the server at `base_url`, without a token, giving up on
    /// a call after an hour (see [`AsyncClient::timeout`]).
    pub fn new(base_url: &str) -> Self {
        Self {
            base: base_url.trim_end_matches('/').to_owned(),
            auth: None,
            http: reqwest::Client::new(),
            timeout: Duration::from_secs(3600),
        }
    }

    /// Sends `token` as the bearer token of every call.
    #[must_use]
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.auth = Some(format!("Bearer {}", token.into()));
        self
    }

    /// Gives up on a call after `d`.
    #[must_use]
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    async fn run<T>(&self, call: Call<T>) -> Result<T, Error> {
        let url = format!("{}{}", self.base, call.path);
        let transport = |e: reqwest::Error| Error::Transport {
            url: self.base.clone(),
            message: crate::error::sending(&error_chain(&e)),
        };
        let method = match call.method {
            "GET" => reqwest::Method::GET,
            "PUT" => reqwest::Method::PUT,
            "DELETE" => reqwest::Method::DELETE,
            _ => reqwest::Method::POST,
        };
        let mut req = self.http.request(method, &url).timeout(self.timeout);
        if let Some(a) = &self.auth {
            req = req.header("Authorization", a);
        }
        if let Some(body) = &call.body {
            req = req.header("Content-Type", "application/json").body(body.clone());
        }
        let res = req.send().await.map_err(transport)?;
        let status = res.status().as_u16();
        let text = res.text().await.map_err(transport)?;
        if (200..300).contains(&status) {
            call.answer(status, &text)
        } else {
            Err(calls::refused(status, &text))
        }
    }

    /// [`crate::Client::send`], as a future: any call of the API's table.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::send`].
    pub async fn send<C: crate::wire::Call>(
        &self,
        param: &C::Param,
        query: &C::Query,
        body: &C::Body,
    ) -> Result<C::Answer, Error> {
        self.run(calls::of::<C>(param, query, body)?).await
    }

    /// [`crate::Client::submit`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::submit`].
    pub async fn submit(&self, job: &NewJob) -> Result<Submitted, Error> {
        self.run(calls::submit(job)?).await
    }

    /// [`crate::Client::submit_batch`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::submit_batch`].
    pub async fn submit_batch(&self, jobs: Vec<NewJob>) -> Result<Vec<i64>, Error> {
        self.run(calls::submit_batch(jobs)?).await
    }

    /// [`crate::Client::lease`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::lease`].
    pub async fn lease(&self, req: &Lease) -> Result<Vec<LeasedJob>, Error> {
        self.run(calls::lease(req)?).await
    }

    /// [`crate::Client::work`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::work`].
    pub async fn work(&self, work: &Work) -> Result<Worked, Error> {
        self.run(calls::work(work)?).await
    }

    /// [`crate::Client::heartbeat`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::heartbeat`].
    pub async fn heartbeat(&self, beat: &Heartbeat) -> Result<Vec<ItemAnswer>, Error> {
        self.run(calls::heartbeat(beat)?).await
    }

    /// [`crate::Client::ack`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::ack`].
    pub async fn ack(&self, id: i64, ack: &Ack) -> Result<Changed, Error> {
        self.run(calls::ack(id, ack)?).await
    }

    /// [`crate::Client::nack`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::nack`].
    pub async fn nack(&self, id: i64, nack: &Nack) -> Result<Changed, Error> {
        self.run(calls::nack(id, nack)?).await
    }

    /// [`crate::Client::extend`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::extend`].
    pub async fn extend(&self, id: i64, extend: &Extend) -> Result<Changed, Error> {
        self.run(calls::extend(id, extend)?).await
    }

    /// [`crate::Client::release`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::release`].
    pub async fn release(&self, id: i64, release: &Release) -> Result<Changed, Error> {
        self.run(calls::release(id, release)?).await
    }

    /// [`crate::Client::cancel`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::cancel`].
    pub async fn cancel(&self, id: i64) -> Result<Changed, Error> {
        self.run(calls::cancel(id)?).await
    }

    /// [`crate::Client::retry`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::retry`].
    pub async fn retry(&self, id: i64) -> Result<Changed, Error> {
        self.run(calls::retry(id)?).await
    }

    /// [`crate::Client::delete`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::delete`].
    pub async fn delete(&self, id: i64) -> Result<Changed, Error> {
        self.run(calls::delete(id)?).await
    }

    /// [`crate::Client::get`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::get`].
    pub async fn get(&self, id: i64) -> Result<Job, Error> {
        self.run(calls::get(id)?).await
    }

    /// [`crate::Client::result`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::result`].
    pub async fn result(&self, id: i64, timeout: std::time::Duration) -> Result<Option<Job>, Error> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let job = self.run(calls::job_result(id, left.min(calls::RESULT_WAIT))?).await?;
            if calls::ended(&job) {
                return Ok(Some(job));
            }
            if left.is_zero() {
                return Ok(None);
            }
        }
    }

    /// [`crate::Client::events`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::events`].
    pub async fn events(&self, id: i64) -> Result<Vec<Event>, Error> {
        let mut all = Vec::new();
        let mut after = 0;
        loop {
            let page = self.events_page(id, after, None).await?;
            all.extend(page.events);
            match page.next {
                Some(next) => after = next,
                None => return Ok(all),
            }
        }
    }

    /// [`crate::Client::events_page`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::events_page`].
    pub async fn events_page(&self, id: i64, after: i64, limit: Option<u32>) -> Result<crate::wire::Events, Error> {
        self.run(calls::events_page(id, after, limit)?).await
    }

    /// [`crate::Client::append_event`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::append_event`].
    pub async fn append_event(&self, id: i64, event: &AppendEvent) -> Result<Appended, Error> {
        self.run(calls::append_event(id, event)?).await
    }

    /// [`crate::Client::list`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::list`].
    pub async fn list(&self, query: &ListQuery) -> Result<JobPage, Error> {
        self.run(calls::list(query)?).await
    }

    /// [`crate::Client::bulk`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::bulk`].
    pub async fn bulk(&self, bulk: &Bulk) -> Result<BulkDone, Error> {
        self.run(calls::bulk(bulk)?).await
    }

    /// [`crate::Client::dead_groups`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::dead_groups`].
    pub async fn dead_groups(&self, limit: u32) -> Result<Vec<DeadGroup>, Error> {
        self.run(calls::dead_groups(limit)?).await
    }

    /// [`crate::Client::stats`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::stats`].
    pub async fn stats(&self) -> Result<Stats, Error> {
        let mut page = QueuePage::default();
        let mut all = self.run(calls::stats(&page)?).await?;
        while let Some(next) = all.next.take() {
            page.after = Some(next);
            let more = self.run(calls::stats(&page)?).await?;
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
    pub async fn stats_page(&self, page: &QueuePage) -> Result<Stats, Error> {
        self.run(calls::stats(page)?).await
    }

    /// [`crate::Client::pause`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::pause`].
    pub async fn pause(&self, queue: &str) -> Result<QueuePaused, Error> {
        self.run(calls::pause(queue)?).await
    }

    /// [`crate::Client::resume`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::resume`].
    pub async fn resume(&self, queue: &str) -> Result<QueuePaused, Error> {
        self.run(calls::resume(queue)?).await
    }

    /// [`crate::Client::set_limits`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::set_limits`].
    pub async fn set_limits(&self, queue: &str, limits: &Limits) -> Result<QueueLimits, Error> {
        self.run(calls::set_limits(queue, limits)?).await
    }

    /// [`crate::Client::schedules`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::schedules`].
    pub async fn schedules(&self) -> Result<Vec<Schedule>, Error> {
        self.run(calls::schedules()?).await
    }

    /// [`crate::Client::put_schedule`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::put_schedule`].
    pub async fn put_schedule(&self, name: &str, schedule: &NewSchedule) -> Result<Schedule, Error> {
        self.run(calls::put_schedule(name, schedule)?).await
    }

    /// [`crate::Client::remove_schedule`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::remove_schedule`].
    pub async fn remove_schedule(&self, name: &str) -> Result<ScheduleRemoved, Error> {
        self.run(calls::remove_schedule(name)?).await
    }

    /// [`crate::Client::pause_schedule`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::pause_schedule`].
    pub async fn pause_schedule(&self, name: &str) -> Result<Schedule, Error> {
        self.run(calls::pause_schedule(name)?).await
    }

    /// [`crate::Client::resume_schedule`], as a future.
    ///
    /// # Errors
    ///
    /// As [`crate::Client::resume_schedule`].
    pub async fn resume_schedule(&self, name: &str) -> Result<Schedule, Error> {
        self.run(calls::resume_schedule(name)?).await
    }
}

/// `e` with its causes ("error sending request: ... Connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}
