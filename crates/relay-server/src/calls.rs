//! Every call of the API's table (`relay_client::wire::calls`), answered:
//! one generic route ([`serve`]) reads any call's path parameter, query and
//! body into the table's types, runs the call's [`Handle`], and writes its
//! answer type with the call's status. The router is built from the same
//! table, so a call without a handler does not compile.
//!
//! [`Handle`] is sealed: other crates name a call of it through
//! [`Answered`] ([`crate::Local::call`]) but cannot call or implement it,
//! so its inputs (`AppState`, [`Req`]) stay this crate's.
#![allow(private_interfaces)]

use crate::api::{
    header_idempotency_key, header_traceparent, lease_request, leased, new_job, wait_permit, with_idempotency_key,
};
use crate::error::{ApiError, ApiJson};
use crate::AppState;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter};
use axum::{Json, Router};
use relay::{wire as conv, Completion, JobId, LeaseToken};
use relay_client::wire::{self, calls, Call, Method, Part, PathParam};
use serde_json::value::RawValue;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// A call as the server read it: its path parameter, query and body in the
/// table's types, and the request's headers.
pub(crate) struct Req<C: Call + ?Sized> {
    pub param: C::Param,
    pub query: C::Query,
    pub body: C::Body,
    pub headers: HeaderMap,
}

/// A call of the table this server answers: every call of
/// `relay_client::wire::calls` is one, over HTTP and in process
/// ([`crate::Local::call`]).
pub trait Answered: Handle {}

impl<C: Handle> Answered for C {}

/// How the server answers one call of the table (implemented for each).
pub trait Handle: Call + Sized {
    /// Runs the call.
    fn handle(s: Arc<AppState>, r: Req<Self>) -> impl Future<Output = Result<Self::Answer, ApiError>> + Send;

    /// The status of a success (the table's, unless the answer says
    /// otherwise).
    fn status(_answer: &Self::Answer) -> u16 {
        Self::STATUS
    }

    /// Whether the request may wait for jobs (a long-poll): its time is
    /// then mostly that wait, kept out of the request-latency histogram.
    fn long_poll(_r: &Req<Self>) -> bool {
        false
    }
}

/// The one route of every call: reads it, runs it, answers it.
async fn serve<C: Handle>(
    State(s): State<Arc<AppState>>,
    path: Result<Option<Path<String>>, PathRejection>,
    req: Request,
) -> Response {
    match answer::<C>(s, path, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn answer<C: Handle>(
    s: Arc<AppState>,
    path: Result<Option<Path<String>>, PathRejection>,
    req: Request,
) -> Result<Response, ApiError> {
    let raw = path
        .map_err(|e| ApiError::bad_request(format!("bad path: {}", e.body_text())))?
        .map(|Path(p)| p);
    let param = C::Param::parse(raw).map_err(ApiError::bad_request)?;
    let query = if <C::Query as Part>::GIVEN {
        Query::<C::Query>::try_from_uri(req.uri())
            .map_err(|e| ApiError::bad_request(format!("bad query: {}", e.body_text())))?
            .0
    } else {
        none()?
    };
    let headers = req.headers().clone();
    let body = if !<C::Body as Part>::GIVEN {
        none()?
    } else if <C::Body as Part>::CHECKED {
        // Read as text first: what the type cannot tell (a field given as
        // null) is refused before it is read, and a payload in it is kept
        // as written.
        let ApiJson(raw) = ApiJson::<Box<RawValue>>::from_request(req, &s).await?;
        if let Some(why) = <C::Body as Part>::refuse(raw.get()) {
            return Err(ApiError::bad_request(why));
        }
        serde_json::from_str(raw.get())
            .map_err(|e| ApiError::bad_request(format!("the body is not valid for this call: {e}")))?
    } else {
        ApiJson::<C::Body>::from_request(req, &s).await?.0
    };
    let req = Req {
        param,
        query,
        body,
        headers,
    };
    let long_poll = C::long_poll(&req);
    let answer = C::handle(s, req).await?;
    let status = StatusCode::from_u16(C::status(&answer)).unwrap_or(StatusCode::OK);
    let mut res = (status, Json(answer)).into_response();
    if long_poll {
        res.extensions_mut().insert(crate::metrics::LongPoll);
    }
    Ok(res)
}

/// The query or body of a call that takes none ([`wire::Nothing`]).
fn none<T: serde::de::DeserializeOwned>() -> Result<T, ApiError> {
    // Only `Nothing` is not given, and it reads from `{}`.
    serde_json::from_str("{}").map_err(|e| ApiError::bad_request(format!("this call's table entry is wrong: {e}")))
}

fn filter(m: Method) -> MethodFilter {
    match m {
        Method::Get => MethodFilter::GET,
        Method::Post => MethodFilter::POST,
        Method::Put => MethodFilter::PUT,
        Method::Delete => MethodFilter::DELETE,
    }
}

macro_rules! table_router {
    ($($call:ident),*) => {
        /// Every call of the table on [`serve`] (behind the tokens: the
        /// caller adds the layer).
        pub(crate) fn router() -> Router<Arc<AppState>> {
            let r = Router::new();
            $(let r = r.route(calls::$call::PATH, on(filter(calls::$call::METHOD), serve::<calls::$call>));)*
            r
        }
    };
}
relay_client::for_each_call!(table_router);

impl Handle for calls::Submit {
    /// 201 with the new job's id; 200 with `"existing": true` when an
    /// unfinished job already holds the unique key, or an earlier submit
    /// carried the idempotency key (nothing was written).
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Submitted, ApiError> {
        let header = header_traceparent(&r.headers);
        let body = with_idempotency_key(r.body, header_idempotency_key(&r.headers)?.as_deref(), None);
        let done = s.relay.submit_outcome(new_job(body, header.as_deref())?).await?;
        Ok(wire::Submitted {
            id: done.id.0,
            existing: done.existing,
        })
    }

    fn status(answer: &wire::Submitted) -> u16 {
        if answer.existing {
            200
        } else {
            Self::STATUS
        }
    }
}

impl Handle for calls::SubmitBatch {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::SubmittedBatch, ApiError> {
        let jobs = r.body.jobs;
        if jobs.is_empty() || jobs.len() > 10_000 {
            return Err(ApiError::bad_request("jobs must hold 1-10000 jobs"));
        }
        let header = header_traceparent(&r.headers);
        let key = header_idempotency_key(&r.headers)?;
        let jobs = jobs
            .into_iter()
            .enumerate()
            .map(|(i, j)| new_job(with_idempotency_key(j, key.as_deref(), Some(i)), header.as_deref()))
            .collect::<Result<Vec<_>, _>>()?;
        let done = s.relay.submit_batch_outcome(jobs).await?;
        Ok(wire::SubmittedBatch {
            ids: done.iter().map(|d| d.id.0).collect(),
            existing: done.iter().filter(|d| d.existing).map(|d| d.id.0).collect(),
        })
    }

    /// 200 when every job was found (a batch retried with its idempotency
    /// key), as a single submit's answer; else 201.
    fn status(answer: &wire::SubmittedBatch) -> u16 {
        if !answer.ids.is_empty() && answer.existing.len() == answer.ids.len() {
            200
        } else {
            Self::STATUS
        }
    }
}

impl Handle for calls::List {
    /// Jobs matching the query's filter, newest first, a page of at most
    /// `limit` jobs and [`relay::LIST_PAGE_BYTES`]; `next` is the cursor
    /// of the next page (`before`), absent on the last one.
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::JobPage, ApiError> {
        let filter = conv::job_filter(r.query)?;
        let page = s.relay.list_page(&filter, relay::LIST_PAGE_BYTES).await?;
        Ok(wire::JobPage {
            jobs: page.jobs.iter().map(conv::job).collect(),
            next: page.next.map(|id| id.0),
        })
    }
}

impl Handle for calls::Bulk {
    /// Retries, cancels or deletes every job a filter matches, a chunk per
    /// transaction; answers how many it changed.
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::BulkDone, ApiError> {
        let filter = conv::job_filter(wire::ListQuery::new(r.body.filter, None, None))?;
        if filter == relay::JobFilter::default() {
            return Err(ApiError::bad_request(
                "the filter is empty: name at least one of queue, state, kind, tag, since, until, error_contains",
            ));
        }
        let action = r.body.action;
        let count = match action {
            wire::BulkAction::Retry => s.relay.retry_matching(&filter).await?,
            wire::BulkAction::Cancel => s.relay.cancel_matching(&filter).await?,
            wire::BulkAction::Delete => s.relay.delete_matching(&filter).await?,
        };
        Ok(wire::BulkDone { action, count })
    }
}

impl Handle for calls::DeadGroups {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::DeadGroups, ApiError> {
        let groups = s.relay.dead_groups(r.query.limit.unwrap_or(100)).await?;
        Ok(wire::DeadGroups {
            groups: groups.iter().map(conv::dead_group).collect(),
        })
    }
}

impl Handle for calls::Get {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Job, ApiError> {
        let job = s.relay.get(JobId(r.param)).await?;
        let mut out = conv::job(&job);
        if job.state() == relay::JobState::Waiting {
            // Gone since (deleted): answered as it was read.
            if let Ok(Some(w)) = s.relay.waiting_for(job.id).await {
                out.waiting_for = Some(conv::waiting_for(&w));
            }
        }
        Ok(out)
    }
}

/// Awaits the job's end up to `wait_ms`, one of the server's long-polls.
impl Handle for calls::JobResult {
    fn long_poll(r: &Req<Self>) -> bool {
        r.query.wait_ms.is_some_and(|w| w > 0)
    }

    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Job, ApiError> {
        // At most the server's --max-wait: the caller asks again (as the
        // clients' `result` does) with what is left of its own wait.
        let wait = crate::parse::ms("wait_ms", r.query.wait_ms)?
            .unwrap_or(Duration::ZERO)
            .min(s.config.max_wait);
        let id = JobId(r.param);
        // A server shutting down holds no long-poll.
        let wait = if *s.stopping.borrow() { Duration::ZERO } else { wait };
        let _permit = crate::api::wait_permit(&s, wait)?;
        let job = match s.relay.result_until(id, wait, s.stopping.clone().changed()).await? {
            Some(job) => job,
            None => s.relay.get(id).await?,
        };
        Ok(conv::job(&job))
    }
}

impl Handle for calls::Delete {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Changed, ApiError> {
        s.relay.delete(JobId(r.param)).await?;
        Ok(wire::Changed::deleted(r.param))
    }
}

impl Handle for calls::Ack {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Changed, ApiError> {
        let result = conv::bytes_of("result", r.body.result, r.body.result_base64)?;
        s.relay.ack(JobId(r.param), LeaseToken(r.body.token), result).await?;
        Ok(wire::Changed::in_state(r.param, wire::State::Succeeded))
    }
}

impl Handle for calls::Nack {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Changed, ApiError> {
        let (id, b) = (JobId(r.param), r.body);
        let token = LeaseToken(b.token);
        let c = if b.permanent {
            Completion::nack_permanent(id, token, b.error)
        } else {
            Completion::nack(id, token, b.error, conv::millis("retry_in_ms", b.retry_in_ms)?)
        };
        Ok(conv::changed(id, &s.relay.complete(c).await?))
    }
}

impl Handle for calls::Extend {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Changed, ApiError> {
        let lease_for = conv::millis("lease_for_ms", r.body.lease_for_ms)?.unwrap_or(Duration::from_secs(30));
        let until = s
            .relay
            .extend(JobId(r.param), LeaseToken(r.body.token), lease_for)
            .await?;
        Ok(wire::Changed::lease_until(r.param, conv::time(until)))
    }
}

impl Handle for calls::Progress {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Changed, ApiError> {
        let b = r.body;
        s.relay
            .progress(JobId(r.param), LeaseToken(b.token), b.fraction, b.message.as_deref())
            .await?;
        Ok(wire::Changed::in_state(r.param, wire::State::Leased))
    }
}

impl Handle for calls::RecordStep {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::StepRecorded, ApiError> {
        let b = r.body;
        let output = conv::bytes_of("output", b.output, b.output_base64)?.unwrap_or_default();
        let earlier = s
            .relay
            .record_step(JobId(r.param), LeaseToken(b.token), &b.name, output)
            .await?;
        Ok(relay::wire::step_recorded(earlier.as_ref()))
    }
}

impl Handle for calls::CreateToken {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::TokenCreated, ApiError> {
        let timeout = Duration::from_millis(r.body.timeout_ms);
        let t = s
            .relay
            .create_token(JobId(r.param), LeaseToken(r.body.token), timeout)
            .await?;
        Ok(wire::TokenCreated {
            id: t.id.clone(),
            token: t.text(),
            path: t.path(),
            key: t.event_key(),
            expires_at: conv::time(t.expires_at),
        })
    }
}

impl Handle for calls::Emit {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Emitted, ApiError> {
        let b = r.body;
        let payload = conv::bytes_of("payload", b.payload, b.payload_base64)?.unwrap_or_default();
        let done = s.relay.emit(&r.param, payload).await?;
        Ok(wire::Emitted {
            first: done.first,
            woken: done.woken,
        })
    }
}

impl Handle for calls::Release {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Changed, ApiError> {
        let (id, token) = (JobId(r.param), LeaseToken(r.body.token));
        match conv::millis("in_ms", r.body.in_ms)? {
            Some(delay) => {
                let at = s.relay.snooze(id, token, delay).await?;
                // SCHEDULED until then; READY at once when it is now.
                let state = if delay.is_zero() {
                    wire::State::Ready
                } else {
                    wire::State::Scheduled
                };
                Ok(wire::Changed::in_state(r.param, state).ready_at(conv::time(at)))
            }
            None => {
                s.relay.release(id, token).await?;
                Ok(wire::Changed::in_state(r.param, wire::State::Ready))
            }
        }
    }
}

impl Handle for calls::Cancel {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Changed, ApiError> {
        s.relay.cancel(JobId(r.param)).await?;
        Ok(wire::Changed::in_state(r.param, wire::State::Cancelled))
    }
}

impl Handle for calls::Retry {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Changed, ApiError> {
        if r.query.reset_steps {
            s.relay.retry_from_start(JobId(r.param)).await?;
        } else {
            s.relay.retry(JobId(r.param)).await?;
        }
        Ok(wire::Changed::in_state(r.param, wire::State::Ready))
    }
}

impl Handle for calls::Events {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Events, ApiError> {
        let (after, limit) = (r.query.after.unwrap_or(0), r.query.limit.unwrap_or(1000));
        if after < 0 {
            return Err(ApiError::bad_request(format!("after must be 0 or more, got {after}")));
        }
        let page = s.relay.events_page(JobId(r.param), after, limit).await?;
        Ok(wire::Events {
            events: page.events.iter().map(conv::event).collect(),
            next: page.next,
        })
    }
}

impl Handle for calls::AppendEvent {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Appended, ApiError> {
        let seq = s.relay.append_event(JobId(r.param), &r.body.kind, &r.body.data).await?;
        Ok(wire::Appended { job_id: r.param, seq })
    }
}

impl Handle for calls::Lease {
    /// Long-poll: waits up to `wait_ms` for a job, woken at once by a
    /// submit; answered with no jobs when the server shuts down.
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Leased, ApiError> {
        let (req, wait) = lease_request(&s, r.body)?;
        let _permit = wait_permit(&s, wait)?;
        let mut stopping = s.stopping.clone();
        if *stopping.borrow() {
            return Ok(wire::Leased { jobs: Vec::new() });
        }
        let jobs = s.relay.lease_until(req, stopping.changed()).await?;
        Ok(wire::Leased { jobs: leased(&jobs) })
    }

    fn long_poll(r: &Req<Self>) -> bool {
        r.body.wait_ms.is_some_and(|w| w > 0)
    }
}

/// A page of queues from its query: after a name, 1-1000 (1000 when left
/// out), so that no answer grows with the number of queues.
fn queue_page(q: wire::QueuePage) -> Result<(Option<String>, u32), ApiError> {
    // `after=` (empty) is the first page, as no `after` at all.
    let after = q.after.filter(|a| !a.is_empty());
    match q.limit {
        None => Ok((after, 1000)),
        Some(n @ 1..=1000) => Ok((after, n)),
        Some(n) => Err(ApiError::bad_request(format!("limit must be 1-1000, got {n}"))),
    }
}

impl Handle for calls::Stats {
    /// A page of queues' stats; the first page (no `after`) with the
    /// totals over every queue.
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Stats, ApiError> {
        let (after, limit) = queue_page(r.query)?;
        let first = after.is_none();
        let page = s.relay.stats_page(after.as_deref(), limit).await?;
        let totals = match first {
            true => Some(s.relay.queue_totals().await?),
            false => None,
        };
        Ok(conv::stats(&page, totals.as_ref()))
    }
}

impl Handle for calls::Queues {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::QueueNames, ApiError> {
        let (after, limit) = queue_page(r.query)?;
        let page = s.relay.stats_page(after.as_deref(), limit).await?;
        Ok(wire::QueueNames {
            queues: page.queues.into_keys().collect(),
            next: page.next,
        })
    }
}

impl Handle for calls::GetQueue {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::QueueInfo, ApiError> {
        let stats = s.relay.queue_stats(&r.param).await?;
        Ok(wire::QueueInfo {
            queue: r.param,
            stats: conv::queue_stats(&stats),
        })
    }
}

impl Handle for calls::PauseQueue {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::QueuePaused, ApiError> {
        s.relay.pause(&r.param).await?;
        Ok(wire::QueuePaused {
            queue: r.param,
            paused: true,
        })
    }
}

impl Handle for calls::ResumeQueue {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::QueuePaused, ApiError> {
        s.relay.resume(&r.param).await?;
        Ok(wire::QueuePaused {
            queue: r.param,
            paused: false,
        })
    }
}

impl Handle for calls::SetQueueLimits {
    /// Replaces the queue's limits: a field left out (or null) lifts that
    /// limit.
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::QueueLimits, ApiError> {
        let limits = conv::limits(r.body)?;
        s.relay.set_queue_limits(&r.param, limits).await?;
        Ok(conv::queue_limits(r.param, limits))
    }
}

impl Handle for calls::GetRetention {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::QueueRetention, ApiError> {
        let stats = s.relay.queue_stats(&r.param).await?;
        Ok(conv::queue_retention(
            r.param,
            stats.retention,
            &s.relay.options().retention,
        ))
    }
}

impl Handle for calls::SetRetention {
    /// Replaces the queue's retention: a state left out (or null) follows
    /// the server's default.
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::QueueRetention, ApiError> {
        let own = conv::retention(r.body);
        s.relay.set_retention(&r.param, own).await?;
        Ok(conv::queue_retention(r.param, own, &s.relay.options().retention))
    }
}

impl Handle for calls::Prune {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Pruned, ApiError> {
        if r.body.after < 0 {
            return Err(ApiError::bad_request(format!(
                "after must be a job id or 0 (the first pass), got {}",
                r.body.after
            )));
        }
        Ok(conv::pruned(s.relay.prune_from(relay::JobId(r.body.after)).await?))
    }
}

impl Handle for calls::PutWorker {
    /// Written only by the worker that made the record: the first
    /// heartbeat of an id is answered with a secret, every later one must
    /// carry it (403 `forbidden` otherwise; nothing written).
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::WorkerSeen, ApiError> {
        let stopped = r.body.stopped;
        if let Some(secret) = &r.body.secret {
            let n = secret.chars().count();
            if n == 0 || n > 128 {
                return Err(ApiError::bad_request(format!(
                    "secret must be 1-128 characters (the one the worker's first heartbeat was answered with), got {n}"
                )));
            }
        }
        let presented = r.body.secret.as_deref().map(crate::auth::sha256_hex);
        let fresh = crate::auth::worker_secret()?;
        let claim = relay::WorkerClaim::Remote {
            presented: presented.clone(),
            fresh: crate::auth::sha256_hex(&fresh),
        };
        let beat = conv::worker_beat(r.param, r.body)?;
        s.relay.worker_beat_as(&beat, stopped, claim).await?;
        Ok(wire::WorkerSeen {
            id: beat.id,
            stopped,
            // A record it made (it presented none): its secret from now on.
            secret: presented.is_none().then_some(fresh),
        })
    }
}

impl Handle for calls::Workers {
    /// A page of the workers, by id (`next`: the next page's `after`).
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Workers, ApiError> {
        if let Some(a) = &r.query.after {
            let id = a.len() <= 64 && a.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
            if !id {
                return Err(ApiError::bad_request(
                    "after must be a worker's id (1-64 of A-Z a-z 0-9 _ . -): the previous page's next",
                ));
            }
        }
        let page = s
            .relay
            .workers_page(r.query.after.as_deref(), r.query.limit.unwrap_or(1000))
            .await?;
        Ok(wire::Workers {
            workers: page.workers.iter().map(conv::worker).collect(),
            next: page.next,
        })
    }
}

impl Handle for calls::Schedules {
    async fn handle(s: Arc<AppState>, _: Req<Self>) -> Result<wire::Schedules, ApiError> {
        let all = s.relay.schedules().await?;
        Ok(wire::Schedules {
            schedules: all.iter().map(conv::schedule).collect(),
        })
    }
}

impl Handle for calls::GetSchedule {
    /// Read from the list: a store holds a handful of schedules, each a
    /// row.
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Schedule, ApiError> {
        let all = s.relay.schedules().await?;
        match all.iter().find(|one| one.name == r.param) {
            Some(one) => Ok(conv::schedule(one)),
            None => Err(relay::Error::ScheduleNotFound { name: r.param }.into()),
        }
    }
}

impl Handle for calls::PutSchedule {
    /// Adds the schedule, or replaces the one of this name.
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Schedule, ApiError> {
        let new = conv::new_schedule(r.param, r.body)?;
        Ok(conv::schedule(&s.relay.add_schedule(new).await?))
    }
}

impl Handle for calls::RemoveSchedule {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::ScheduleRemoved, ApiError> {
        s.relay.remove_schedule(&r.param).await?;
        Ok(wire::ScheduleRemoved {
            name: r.param,
            deleted: true,
        })
    }
}

impl Handle for calls::PauseSchedule {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Schedule, ApiError> {
        Ok(conv::schedule(&s.relay.pause_schedule(&r.param).await?))
    }
}

impl Handle for calls::ResumeSchedule {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Schedule, ApiError> {
        Ok(conv::schedule(&s.relay.resume_schedule(&r.param).await?))
    }
}
