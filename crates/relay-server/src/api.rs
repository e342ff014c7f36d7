//! The routes: `/v1/...` for every library call, `/healthz`, `/metrics`.

use crate::error::ApiError;
use crate::parse::ms;
use crate::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use relay::{wire as conv, LeaseRequest, NewJob};
use relay_client::wire;
use relay_client::wire::ErrorCode;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) type S = State<Arc<AppState>>;

/// Records every request in the metrics, by route template and status;
/// a long-poll's time in a histogram of its own.
pub(crate) async fn observe(State(state): S, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_owned();
    let start = Instant::now();
    let res = next.run(req).await;
    let long_poll = res.extensions().get::<crate::metrics::LongPoll>().is_some();
    state
        .metrics
        .observe(&route, res.status().as_u16(), start.elapsed(), long_poll);
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
            "the request took too long: its change may or may not have been applied; read it back before retrying (a submit with an idempotency key, the Idempotency-Key header or the idempotency_key field, is safe to retry as it was)",
        )
        .into_response(),
    }
}

/// The request's `traceparent` header, when it holds a valid W3C trace
/// context. An invalid one is passed over, as the W3C recommendation asks
/// of a receiver (the trace starts afresh); the body's field is checked.
pub(crate) fn header_traceparent(headers: &axum::http::HeaderMap) -> Option<String> {
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
pub(crate) fn new_job(mut b: wire::NewJob, header: Option<&str>) -> Result<NewJob, ApiError> {
    if b.traceparent.is_none() {
        b.traceparent = header.map(str::to_owned);
    }
    Ok(NewJob::try_from(b)?)
}

/// The `Idempotency-Key` header, if any: readable text, the same as the
/// body's field when both are given.
pub(crate) fn header_idempotency_key(headers: &axum::http::HeaderMap) -> Result<Option<String>, ApiError> {
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
pub(crate) fn with_idempotency_key(mut b: wire::NewJob, header: Option<&str>, index: Option<usize>) -> wire::NewJob {
    if let (Some(h), None) = (header, &b.idempotency_key) {
        b.idempotency_key = Some(match index {
            Some(i) => format!("{h}/{i}"),
            None => h.to_owned(),
        });
    }
    b
}

/// A lease request as the library's, and how long it may wait.
pub(crate) fn lease_request(s: &AppState, b: wire::Lease) -> Result<(LeaseRequest, Duration), ApiError> {
    // Checked against the server's own bound first: a huge value is over
    // it, and the bound it is told is that one.
    let max_wait = u64::try_from(s.config.max_wait.as_millis()).unwrap_or(u64::MAX);
    if b.wait_ms.is_some_and(|w| w > max_wait) {
        return Err(ApiError::bad_request(format!("wait_ms must be at most {max_wait}")));
    }
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

/// `POST /v1/tokens/{token}/complete`: completes a completion token with
/// the body (any JSON value, at most 64 KiB; none: null). Needs no API
/// token: the token's secret is the credential, compared in constant time.
/// 200 `{"completed": true, "woken": n}`; 404 `token_unknown`, 409
/// `token_used` or `token_closed`, 410 `token_expired`.
pub(crate) async fn complete_token(
    State(s): S,
    axum::extract::Path(token): axum::extract::Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<serde_json::Value>, ApiError> {
    let payload = if body.iter().all(u8::is_ascii_whitespace) {
        Vec::new()
    } else {
        let raw: &serde_json::value::RawValue = serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("the body must be a JSON value (the token's payload): {e}")))?;
        raw.get().as_bytes().to_vec()
    };
    let done = s.relay.complete_token(&token, payload).await?;
    Ok(Json(json!({"completed": true, "woken": done.woken})))
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
            "too many requests are waiting (long-polls of leases and results); retry shortly or wait less",
        )
    })
}

pub(crate) fn leased(jobs: &[relay::LeasedJob]) -> Vec<wire::LeasedJob> {
    jobs.iter().map(conv::leased).collect()
}

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
    let jobs = crate::metrics::JobMetrics {
        waits: s.relay.queue_waits(),
        runs: s.relay.job_runs(),
        outcomes: s.relay.job_outcomes(),
    };
    let text = s
        .metrics
        .render(&s.relay.metrics(), &jobs, queues.as_ref().map(|(t, all)| (t, all)));
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

pub(crate) async fn openapi(State(s): S) -> Response {
    Json(crate::openapi::document(&s.config)).into_response()
}
