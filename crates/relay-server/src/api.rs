//! The routes: `/v1/...` for every library call, `/healthz`, `/metrics`.

use crate::error::{ApiError, ApiJson};
use crate::parse::{id, ms};
use crate::AppState;
use axum::extract::{MatchedPath, Path, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use relay::{wire as conv, Completion, JobFilter, LeaseRequest, LeaseToken, NewJob};
use relay_client::wire;
use relay_client::wire::ErrorCode;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) type S = State<Arc<AppState>>;
pub(crate) type ApiResult = Result<Response, ApiError>;

/// Records every request in the metrics, by route template and status.
pub(crate) async fn observe(State(state): S, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_owned();
    let start = Instant::now();
    let res = next.run(req).await;
    state.metrics.observe(&route, res.status().as_u16(), start.elapsed());
    res
}

/// Cuts off a request that takes longer than the configured timeout. A
/// bulk action is exempt: it does bounded work per transaction and may run
/// for minutes on a million jobs; cut off, it would go on anyway while its
/// caller saw a 503 and tried again.
pub(crate) async fn deadline(State(state): S, req: Request, next: Next) -> Response {
    if req.method() == axum::http::Method::POST && req.uri().path().ends_with("/jobs/bulk") {
        return next.run(req).await;
    }
    let reading = matches!(*req.method(), axum::http::Method::GET | axum::http::Method::HEAD);
    match tokio::time::timeout(state.config.request_timeout, next.run(req)).await {
        Ok(res) => res,
        Err(_) if reading => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Timeout, "the request took too long").into_response()
        }
        // A change cut off here may already be with the writer, which
        // commits it all the same: never answered as not applied.
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::MaybeApplied,
            "the request took too long: its change may or may not have been applied; read it back before retrying (a submit with a unique_key is safe to retry)",
        )
        .into_response(),
    }
}

/// 200 with an answer: a view (`Value`) or one of `relay_client::wire`'s.
pub(crate) fn ok<T: serde::Serialize>(v: T) -> ApiResult {
    Ok(Json(v).into_response())
}

/// The request's `traceparent` header, when it holds a valid W3C trace
/// context. An invalid one is passed over, as the W3C recommendation asks
/// of a receiver (the trace starts afresh); the body's field is checked.
fn header_traceparent(headers: &axum::http::HeaderMap) -> Option<String> {
    let v = headers.get("traceparent")?.to_str().ok()?.trim();
    match relay::Limits::default().traceparent(v) {
        Ok(()) => Some(v.to_owned()),
        Err(e) => {
            tracing::debug!(error = %e, "ignoring an invalid traceparent header");
            None
        }
    }
}

/// A submitted job (`wire::NewJob`, as read) as the library's `NewJob`; the
/// body's traceparent first, else the header's.
fn new_job(mut b: wire::NewJob, header: Option<&str>) -> Result<NewJob, ApiError> {
    if b.traceparent.is_none() {
        b.traceparent = header.map(str::to_owned);
    }
    Ok(NewJob::try_from(b)?)
}

/// The `Idempotency-Key` header, if any: readable text, the same as the
/// body's field when both are given.
fn header_idempotency_key(headers: &axum::http::HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(v) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let v = v
        .to_str()
        .map_err(|_| ApiError::bad_request("the Idempotency-Key header must be visible ASCII text"))?
        .trim();
    if v.is_empty() || v.len() > 250 {
        return Err(ApiError::bad_request(format!(
            "the Idempotency-Key header must be 1-250 characters, got {}",
            v.len()
        )));
    }
    Ok(Some(v.to_owned()))
}

/// The body's idempotency key, else the header's (`index`: a batch's job,
/// whose key is the header's with `/index` after it).
fn with_idempotency_key(mut b: wire::NewJob, header: Option<&str>, index: Option<usize>) -> wire::NewJob {
    if let (Some(h), None) = (header, &b.idempotency_key) {
        b.idempotency_key = Some(match index {
            Some(i) => format!("{h}/{i}"),
            None => h.to_owned(),
        });
    }
    b
}

/// 201 with the new job's id; 200 with `"existing": true` when an
/// unfinished job already holds the unique key, or an earlier submit
/// carried the idempotency key (nothing was written).
pub(crate) async fn submit(
    State(s): S,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<wire::NewJob>,
) -> ApiResult {
    let header = header_traceparent(&headers);
    let body = with_idempotency_key(body, header_idempotency_key(&headers)?.as_deref(), None);
    let done = s.relay.submit_outcome(new_job(body, header.as_deref())?).await?;
    Ok(if done.existing {
        (
            StatusCode::OK,
            Json(wire::Submitted {
                id: done.id.0,
                existing: true,
            }),
        )
            .into_response()
    } else {
        (
            StatusCode::CREATED,
            Json(wire::Submitted {
                id: done.id.0,
                existing: false,
            }),
        )
            .into_response()
    })
}

pub(crate) async fn submit_batch(
    State(s): S,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<wire::NewJobs>,
) -> ApiResult {
    if body.jobs.is_empty() || body.jobs.len() > 10_000 {
        return Err(ApiError::bad_request("jobs must hold 1-10000 jobs"));
    }
    let header = header_traceparent(&headers);
    let key = header_idempotency_key(&headers)?;
    let jobs = body
        .jobs
        .into_iter()
        .enumerate()
        .map(|(i, j)| new_job(with_idempotency_key(j, key.as_deref(), Some(i)), header.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let ids = s.relay.submit_batch(jobs).await?;
    let ids = ids.into_iter().map(|id| id.0).collect();
    Ok((StatusCode::CREATED, Json(wire::SubmittedBatch { ids })).into_response())
}

/// Jobs matching the query's filter, newest first; `next` is the cursor of
/// the next page (`before`), absent on the last one.
pub(crate) async fn list(
    State(s): S,
    q: Result<Query<wire::ListQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(q) = q.map_err(|e| ApiError::bad_request(format!("bad query: {}", e.body_text())))?;
    let filter = conv::job_filter(q)?;
    let jobs = s.relay.list(&filter).await?;
    let next = (jobs.len() == filter.limit as usize)
        .then(|| jobs.last().map(|j| j.id.0))
        .flatten();
    ok(wire::JobPage {
        jobs: jobs.iter().map(conv::job).collect(),
        next,
    })
}

/// Retries, cancels or deletes every job a filter matches, a chunk per
/// transaction; answers how many it changed.
pub(crate) async fn bulk(State(s): S, ApiJson(raw): ApiJson<Value>) -> ApiResult {
    // A filter field given as null is refused, not read as absent: a
    // filter that turned out empty would act on every job.
    if let Some(k) = raw
        .get("filter")
        .and_then(Value::as_object)
        .and_then(|f| f.iter().find(|(_, v)| v.is_null()).map(|(k, _)| k.clone()))
    {
        return Err(ApiError::bad_request(format!(
            "filter.{k} is null: leave it out instead"
        )));
    }
    let body: wire::Bulk = serde_json::from_value(raw)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid for this call: {e}")))?;
    let filter = conv::job_filter(wire::ListQuery::new(body.filter, None, None))?;
    if filter == JobFilter::default() {
        return Err(ApiError::bad_request(
            "the filter is empty: name at least one of queue, state, kind, tag, since, until, error_contains",
        ));
    }
    let count = match body.action {
        wire::BulkAction::Retry => s.relay.retry_matching(&filter).await?,
        wire::BulkAction::Cancel => s.relay.cancel_matching(&filter).await?,
        wire::BulkAction::Delete => s.relay.delete_matching(&filter).await?,
    };
    ok(wire::BulkDone {
        action: body.action,
        count,
    })
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeadQuery {
    limit: Option<u32>,
}

/// DEAD jobs grouped by queue, kind and the first line of their error.
pub(crate) async fn dead(
    State(s): S,
    q: Result<Query<DeadQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let Query(q) = q.map_err(|e| ApiError::bad_request(format!("bad query: {}", e.body_text())))?;
    let groups = s.relay.dead_groups(q.limit.unwrap_or(100)).await?;
    ok(wire::DeadGroups {
        groups: groups.iter().map(conv::dead_group).collect(),
    })
}

pub(crate) async fn show(State(s): S, Path(raw): Path<String>) -> ApiResult {
    ok(conv::job(&s.relay.get(id(&raw)?).await?))
}

pub(crate) async fn delete(State(s): S, Path(raw): Path<String>) -> ApiResult {
    let id = id(&raw)?;
    s.relay.delete(id).await?;
    ok(wire::Changed::deleted(id.0))
}

pub(crate) async fn nack(State(s): S, Path(raw): Path<String>, ApiJson(b): ApiJson<wire::Nack>) -> ApiResult {
    let id = id(&raw)?;
    let token = LeaseToken(b.token);
    let c = if b.permanent {
        Completion::nack_permanent(id, token, b.error)
    } else {
        Completion::nack(id, token, b.error, ms("retry_in_ms", b.retry_in_ms)?)
    };
    let status = s.relay.complete(c).await?;
    ok(conv::changed(id, &status))
}

pub(crate) async fn extend(State(s): S, Path(raw): Path<String>, ApiJson(b): ApiJson<wire::Extend>) -> ApiResult {
    let id = id(&raw)?;
    let lease_for = ms("lease_for_ms", b.lease_for_ms)?.unwrap_or(Duration::from_secs(30));
    let until = s.relay.extend(id, LeaseToken(b.token), lease_for).await?;
    ok(wire::Changed::lease_until(id.0, conv::time(until)))
}

pub(crate) async fn release(State(s): S, Path(raw): Path<String>, ApiJson(b): ApiJson<wire::Release>) -> ApiResult {
    let id = id(&raw)?;
    let token = LeaseToken(b.token);
    match ms("in_ms", b.in_ms)? {
        Some(delay) => {
            let at = s.relay.snooze(id, token, delay).await?;
            ok(wire::Changed::in_state(id.0, wire::State::Ready).ready_at(conv::time(at)))
        }
        None => {
            s.relay.release(id, token).await?;
            ok(wire::Changed::in_state(id.0, wire::State::Ready))
        }
    }
}

pub(crate) async fn cancel(State(s): S, Path(raw): Path<String>) -> ApiResult {
    let id = id(&raw)?;
    s.relay.cancel(id).await?;
    ok(wire::Changed::in_state(id.0, wire::State::Cancelled))
}

pub(crate) async fn retry(State(s): S, Path(raw): Path<String>) -> ApiResult {
    let id = id(&raw)?;
    s.relay.retry(id).await?;
    ok(wire::Changed::in_state(id.0, wire::State::Ready))
}

pub(crate) async fn events(State(s): S, Path(raw): Path<String>) -> ApiResult {
    let events = s.relay.events(id(&raw)?).await?;
    ok(wire::Events {
        events: events.iter().map(conv::event).collect(),
    })
}

pub(crate) async fn append_event(
    State(s): S,
    Path(raw): Path<String>,
    ApiJson(b): ApiJson<wire::AppendEvent>,
) -> ApiResult {
    let id = id(&raw)?;
    let seq = s.relay.append_event(id, &b.kind, &b.data).await?;
    Ok((StatusCode::CREATED, Json(wire::Appended { job_id: id.0, seq })).into_response())
}

/// A lease request as the library's, and how long it may wait.
pub(crate) fn lease_request(s: &AppState, b: wire::Lease) -> Result<(LeaseRequest, Duration), ApiError> {
    let wait = ms("wait_ms", b.wait_ms)?.unwrap_or(Duration::ZERO);
    if wait > s.config.max_wait {
        return Err(ApiError::bad_request(format!(
            "wait_ms must be at most {}",
            s.config.max_wait.as_millis()
        )));
    }
    let mut req = LeaseRequest::new(b.queues).max(b.max.unwrap_or(1)).wait(wait);
    if let Some(w) = b.worker {
        req = req.worker(w);
    }
    if let Some(d) = ms("lease_for_ms", b.lease_for_ms)? {
        req = req.lease_for(d);
    }
    Ok((req, wait))
}

/// One of the long-polls allowed to wait at once (none needed for a
/// request that does not wait); 429 when all are taken.
pub(crate) fn wait_permit(s: &AppState, wait: Duration) -> Result<Option<tokio::sync::SemaphorePermit<'_>>, ApiError> {
    if wait.is_zero() {
        return Ok(None);
    }
    s.waiting.try_acquire().map(Some).map_err(|_| {
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::TooManyWaiting,
            "too many lease requests are waiting; retry shortly or wait less",
        )
    })
}

pub(crate) fn leased(jobs: &[relay::LeasedJob]) -> Vec<wire::LeasedJob> {
    jobs.iter().map(conv::leased).collect()
}

/// Long-poll: waits up to `wait_ms` for a job, woken at once by a submit;
/// answered with no jobs when the server shuts down.
pub(crate) async fn lease(State(s): S, ApiJson(b): ApiJson<wire::Lease>) -> ApiResult {
    let (req, wait) = lease_request(&s, b)?;
    let _permit = wait_permit(&s, wait)?;
    let mut stopping = s.stopping.clone();
    if *stopping.borrow() {
        return ok(wire::Leased { jobs: Vec::new() });
    }
    let jobs = s.relay.lease_until(req, stopping.changed()).await?;
    ok(wire::Leased { jobs: leased(&jobs) })
}

/// A page of queues from its query: after a name, 1-1000 (1000 when left
/// out), so that no answer grows with the number of queues.
fn queue_page(
    q: Result<Query<wire::QueuePage>, axum::extract::rejection::QueryRejection>,
) -> Result<(Option<String>, u32), ApiError> {
    let Query(q) = q.map_err(|e| ApiError::bad_request(format!("bad query: {}", e.body_text())))?;
    // `after=` (empty) is the first page, as no `after` at all.
    let after = q.after.filter(|a| !a.is_empty());
    match q.limit {
        None => Ok((after, 1000)),
        Some(n @ 1..=1000) => Ok((after, n)),
        Some(n) => Err(ApiError::bad_request(format!("limit must be 1-1000, got {n}"))),
    }
}

/// A page of queues' stats; the first page (no `after`) with the totals
/// over every queue.
pub(crate) async fn stats(
    State(s): S,
    q: Result<Query<wire::QueuePage>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let (after, limit) = queue_page(q)?;
    let first = after.is_none();
    let page = s.relay.stats_page(after, limit).await?;
    let totals = match first {
        true => Some(s.relay.queue_totals().await?),
        false => None,
    };
    ok(conv::stats(&page, totals.as_ref()))
}

/// A page of queue names.
pub(crate) async fn queues(
    State(s): S,
    q: Result<Query<wire::QueuePage>, axum::extract::rejection::QueryRejection>,
) -> ApiResult {
    let (after, limit) = queue_page(q)?;
    let page = s.relay.stats_page(after, limit).await?;
    ok(wire::QueueNames {
        queues: page.queues.into_keys().collect(),
        next: page.next,
    })
}

pub(crate) async fn pause(State(s): S, Path(queue): Path<String>) -> ApiResult {
    s.relay.pause(&queue).await?;
    ok(wire::QueuePaused { queue, paused: true })
}

pub(crate) async fn resume(State(s): S, Path(queue): Path<String>) -> ApiResult {
    s.relay.resume(&queue).await?;
    ok(wire::QueuePaused { queue, paused: false })
}

/// Replaces the queue's limits: a field left out (or null) lifts that limit.
pub(crate) async fn set_limits(State(s): S, Path(queue): Path<String>, ApiJson(raw): ApiJson<Value>) -> ApiResult {
    // Every field is optional: serde would also read a struct from an
    // array (`[null, null]`), so only an object is taken.
    if !raw.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    let b: wire::Limits = serde_json::from_value(raw)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid for this call: {e}")))?;
    let limits = conv::limits(b)?;
    s.relay.set_queue_limits(&queue, limits).await?;
    ok(conv::queue_limits(queue, limits))
}

pub(crate) async fn schedules(State(s): S) -> ApiResult {
    let all = s.relay.schedules().await?;
    ok(wire::Schedules {
        schedules: all.iter().map(conv::schedule).collect(),
    })
}

/// Adds the schedule, or replaces the one of this name.
/// 200 `{"status": "ok"}` while the store takes writes; 503 `{"status":
/// "failing", "error", "since", "stopped"}` after a batch failed as a whole
/// (a full disk, a read-only file), until a later one commits, and for good
/// after a failed fsync (`stopped`: restart the server once the disk is
/// fixed).
pub(crate) async fn healthz(State(s): S) -> Response {
    let h = s.relay.health();
    match h.failure {
        None if h.ok => Json(json!({"status": "ok"})).into_response(),
        failure => {
            let (error, since) = failure.map_or((None, None), |f| (Some(f.error), Some(f.at.to_rfc3339())));
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(json!({"status": "failing", "stopped": h.stopped, "error": error, "since": since})),
            )
                .into_response()
        }
    }
}

pub(crate) async fn put_schedule(
    State(s): S,
    Path(name): Path<String>,
    ApiJson(raw): ApiJson<Box<serde_json::value::RawValue>>,
) -> ApiResult {
    // `cron`, `tz` and `every_ms` are given or left out, never null (one
    // of cron and every_ms names the kind of schedule). The body is read
    // as text, so the job's payload is kept as written.
    let Ok(fields) = serde_json::from_str::<std::collections::BTreeMap<&str, &serde_json::value::RawValue>>(raw.get())
    else {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    };
    if let Some(k) = ["cron", "tz", "every_ms"]
        .iter()
        .find(|k| fields.get(**k).is_some_and(|v| v.get() == "null"))
    {
        return Err(ApiError::bad_request(format!("{k} is null: leave it out instead")));
    }
    let b: wire::NewSchedule = serde_json::from_str(raw.get())
        .map_err(|e| ApiError::bad_request(format!("the body is not valid for this call: {e}")))?;
    let new = conv::new_schedule(name, b)?;
    ok(conv::schedule(&s.relay.add_schedule(new).await?))
}

pub(crate) async fn remove_schedule(State(s): S, Path(name): Path<String>) -> ApiResult {
    s.relay.remove_schedule(&name).await?;
    ok(wire::ScheduleRemoved { name, deleted: true })
}

pub(crate) async fn pause_schedule(State(s): S, Path(name): Path<String>) -> ApiResult {
    ok(conv::schedule(&s.relay.pause_schedule(&name).await?))
}

pub(crate) async fn resume_schedule(State(s): S, Path(name): Path<String>) -> ApiResult {
    ok(conv::schedule(&s.relay.resume_schedule(&name).await?))
}

pub(crate) async fn metrics(State(s): S) -> Response {
    // The busiest queues by name, the rest summed: bounded however many
    // queues there are.
    let queues = async {
        let top = s.relay.busiest_queues(s.config.metrics_queues).await?;
        let totals = s.relay.queue_totals().await?;
        Ok::<_, relay::Error>((top, totals))
    }
    .await
    .ok();
    let text = s
        .metrics
        .render(&s.relay.metrics(), queues.as_ref().map(|(t, all)| (t, all)));
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

pub(crate) async fn openapi(State(s): S) -> Response {
    Json(crate::openapi::document(&s.config)).into_response()
}

pub(crate) async fn ack(State(s): S, Path(raw): Path<String>, ApiJson(b): ApiJson<wire::Ack>) -> ApiResult {
    let id = id(&raw)?;
    let result = conv::bytes_of("result", b.result, b.result_base64)?;
    s.relay.ack(id, LeaseToken(b.token), result).await?;
    ok(wire::Changed::in_state(id.0, wire::State::Succeeded))
}
