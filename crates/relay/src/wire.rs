//! The engine's values in the words of the HTTP API ([`relay_client::wire`]),
//! and the API's requests as the engine's: the one place each is converted,
//! for the server, the CLI (on a database file or a server alike) and the
//! dashboard.
//!
//! Times are RFC 3339 strings in UTC with milliseconds. Payloads and
//! results are bytes, JSON by convention: bytes that are a JSON text go out
//! as that text, byte for byte (`payload`); empty bytes as `null`; any other
//! bytes (text that is not JSON, binary) as base64 (`payload_base64`). So
//! what was submitted as a JSON value comes back as that value, and no byte
//! is ever lost or mangled.

use crate::{
    DeadGroup, Event, Job, JobFilter, JobId, JobState, LeasedJob, NewJob, NewSchedule, QueueStats, QueueTotals,
};
use base64::Engine as _;
use relay_client::wire as w;
use relay_core::{JobStatus, QueueLimits, RateLimit, Schedule, Timestamp};
use serde_json::value::RawValue;
use std::time::Duration;

/// A request that does not fit its call: a field out of range or in the
/// wrong form, two fields that exclude each other. Nothing was done; the
/// server answers it 400 `invalid_request`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(pub String);

/// RFC 3339 with milliseconds, e.g. `2026-11-29T19:00:00.123Z`.
pub fn time(t: Timestamp) -> String {
    t.to_rfc3339()
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A state as the API names it.
pub fn state(s: JobState) -> w::State {
    match s {
        JobState::Waiting => w::State::Waiting,
        JobState::Ready => w::State::Ready,
        JobState::Scheduled => w::State::Scheduled,
        JobState::Retrying => w::State::Retrying,
        JobState::Leased => w::State::Leased,
        JobState::Succeeded => w::State::Succeeded,
        JobState::Dead => w::State::Dead,
        JobState::Cancelled => w::State::Cancelled,
    }
}

/// A state the API names, as the engine's.
///
/// # Errors
///
/// [`w::State::Other`]: a state this build does not know.
pub fn job_state(s: w::State) -> Result<JobState, RequestError> {
    Ok(match s {
        w::State::Waiting => JobState::Waiting,
        w::State::Ready => JobState::Ready,
        w::State::Scheduled => JobState::Scheduled,
        w::State::Retrying => JobState::Retrying,
        w::State::Leased => JobState::Leased,
        w::State::Succeeded => JobState::Succeeded,
        w::State::Dead => JobState::Dead,
        w::State::Cancelled => JobState::Cancelled,
        w::State::Other => {
            return Err(RequestError(
                "unknown state: use WAITING, SCHEDULED, RETRYING, READY, LEASED, SUCCEEDED, DEAD or CANCELLED".into(),
            ))
        }
    })
}

/// Stored bytes as the API's (`payload`, `payload_base64`) pair: the JSON
/// text they hold as it is (`null` when empty), else base64.
fn bytes_pair(b: &[u8]) -> (Option<w::JsonText>, Option<String>) {
    if b.is_empty() {
        return (Some(w::JsonText::null()), None);
    }
    match w::JsonText::from_slice(b) {
        Some(text) => (Some(text), None),
        None => (None, Some(base64::engine::general_purpose::STANDARD.encode(b))),
    }
}

/// A job, as `GET /v1/jobs/{id}` answers it.
pub fn job(j: &Job) -> w::Job {
    let s = &j.status;
    let lease = s.lease.as_ref();
    let (payload, payload_base64) = bytes_pair(&j.payload);
    let (result, result_base64) = bytes_pair(j.result.as_deref().unwrap_or_default());
    w::Job {
        id: j.id.0,
        queue: j.queue.clone(),
        kind: j.kind.clone(),
        state: state(s.state),
        priority: j.priority.get(),
        attempts: s.attempts,
        max_attempts: s.max_attempts,
        ready_at: time(s.ready_at),
        created_at: time(j.created_at),
        finished_at: s.finished_at.map(time),
        unique_key: j.unique_key.clone(),
        lease_token: s.last_token.0,
        lease_expires_at: lease.map(|l| time(l.expires_at)),
        leased_by: lease.map(|l| l.worker.clone()),
        last_error: s.last_error.clone(),
        lease_for_ms: j.lease_for.map(ms),
        timeout_ms: j.timeout.map(ms),
        traceparent: j.traceparent.clone(),
        tags: j.tags.clone(),
        group: j.group.clone(),
        steps: j.steps.iter().map(step).collect(),
        waiting_for: None,
        waiting_on: s.waiting_on,
        progress: j.progress.as_ref().map(|p| w::Progress {
            fraction: p.fraction,
            message: p.message.clone(),
            at: time(p.at),
            attempt: p.attempt,
            token: p.token,
        }),
        payload,
        payload_base64,
        result,
        result_base64,
    }
}

/// What a WAITING job waits for, on the wire.
pub fn waiting_for(w: &crate::WaitingFor) -> w::WaitingFor {
    use crate::WaitingFor as W;
    let mut out = w::WaitingFor {
        kind: String::new(),
        count: None,
        job: None,
        key: None,
        token: None,
        step: None,
        until: None,
    };
    match w {
        W::Jobs { count } => (out.kind, out.count) = ("jobs".into(), Some(*count)),
        W::Join { job, step } => (out.kind, out.job, out.step) = ("join".into(), Some(job.0), Some(step.clone())),
        W::Event { key, step, until } => {
            (out.kind, out.key, out.step, out.until) = (
                "event".into(),
                Some(key.clone()),
                Some(step.clone()),
                Some(time(*until)),
            );
        }
        W::Token { id, step, until } => {
            (out.kind, out.token, out.step, out.until) =
                ("token".into(), Some(id.clone()), Some(step.clone()), Some(time(*until)));
        }
        W::Sleep { until } => (out.kind, out.until) = ("sleep".into(), Some(time(*until))),
    }
    out
}

/// A leased job, as a worker receives it.
pub fn leased(l: &LeasedJob) -> w::LeasedJob {
    let (payload, payload_base64) = bytes_pair(&l.payload);
    w::LeasedJob {
        id: l.id.0,
        token: l.token.0,
        queue: l.queue.clone(),
        kind: l.kind.clone(),
        priority: l.priority.get(),
        attempt: l.attempt,
        max_attempts: l.max_attempts,
        lease_expires_at: time(l.expires_at),
        lease_for_ms: ms(l.lease_for),
        timeout_ms: l.timeout.map(ms),
        traceparent: l.traceparent.clone(),
        group: l.group.clone(),
        steps: l.steps.iter().map(step).collect(),
        payload,
        payload_base64,
    }
}

/// A recorded step.
pub fn step(s: &relay_core::Step) -> w::Step {
    let (output, output_base64) = bytes_pair(&s.output);
    w::Step {
        name: s.name.clone(),
        attempt: s.attempt,
        at: time(s.at),
        bytes: s.output.len() as u64,
        output,
        output_base64,
    }
}

/// A recorded step as a client reads it back (a lease answer's, a job's).
///
/// # Errors
///
/// `at` is not RFC 3339, `output_base64` is not base64.
pub fn step_of(s: &w::Step) -> Result<relay_core::Step, RequestError> {
    Ok(relay_core::Step {
        name: s.name.clone(),
        attempt: s.attempt,
        at: rfc3339("at", &s.at)?,
        output: s.output().map_err(RequestError)?.to_vec(),
    })
}

/// What a step record did.
pub fn step_recorded(earlier: Option<&relay_core::Step>) -> w::StepRecorded {
    w::StepRecorded {
        recorded: earlier.is_none(),
        earlier: earlier.map(step),
    }
}

/// What a call did to one job: its state after, and when it is due (again)
/// when that is READY, SCHEDULED or RETRYING.
pub fn changed(id: JobId, s: &JobStatus) -> w::Changed {
    let done = w::Changed::in_state(id.0, state(s.state));
    if s.state.is_pending() {
        done.ready_at(time(s.ready_at))
    } else {
        done
    }
}

/// A schedule.
pub fn schedule(s: &Schedule) -> w::Schedule {
    let (cron, tz, every_ms) = match &s.recurrence {
        relay_core::Recurrence::Cron { expr, tz } => (Some(expr.clone()), tz.clone(), None),
        relay_core::Recurrence::Every(d) => (None, None, Some(ms(*d))),
    };
    let (payload, payload_base64) = bytes_pair(&s.payload);
    w::Schedule {
        name: s.name.clone(),
        cron,
        tz,
        every_ms,
        job: w::ScheduledJob {
            queue: s.queue.clone(),
            kind: s.kind.clone(),
            payload,
            payload_base64,
            priority: s.priority.get(),
            max_attempts: s.max_attempts,
            group: s.group.clone(),
        },
        paused: s.paused,
        created_at: time(s.created_at),
        next_at: time(s.next_at),
        last_at: s.last_at.map(time),
    }
}

/// An event of a job's log.
pub fn event(e: &Event) -> w::Event {
    w::Event {
        job_id: e.job_id.0,
        seq: e.seq,
        at: time(e.at),
        kind: e.kind.clone(),
        data: e.data.clone(),
    }
}

/// A group of DEAD jobs.
pub fn dead_group(g: &DeadGroup) -> w::DeadGroup {
    w::DeadGroup {
        queue: g.queue.clone(),
        kind: g.kind.clone(),
        error: g.error.clone(),
        count: g.count,
        newest: g.newest.0,
        last_at: time(g.last_at),
    }
}

/// A rate limit as the API gives it.
pub fn rate(r: RateLimit) -> w::Rate {
    w::Rate {
        limit: r.limit,
        per_ms: ms(r.per),
    }
}

/// A queue's limits, as `PUT /v1/queues/{queue}/limits` answers them.
pub fn queue_limits(queue: String, l: QueueLimits) -> w::QueueLimits {
    w::QueueLimits {
        queue,
        max_leased: l.max_leased,
        rate_limit: l.rate.map(rate),
        poison_after: l.poison_after,
        max_leased_per_group: l.max_leased_per_group,
    }
}

/// One queue's counts by state and its settings.
pub fn queue_stats(s: &QueueStats) -> w::QueueStats {
    w::QueueStats {
        counts: s.counts.iter().map(|(k, v)| (k.as_str().to_owned(), *v)).collect(),
        oldest_ready_age_ms: s.oldest_ready_age.map(ms),
        paused: s.paused,
        max_leased: s.limits.max_leased,
        rate_limit: s.limits.rate.map(rate),
        poison_after: s.limits.poison_after,
        max_leased_per_group: s.limits.max_leased_per_group,
    }
}

/// A page of queues' stats, with the totals over every queue (the first
/// page's).
pub fn stats(page: &crate::StatsPage, totals: Option<&QueueTotals>) -> w::Stats {
    w::Stats {
        queues: page.queues.iter().map(|(q, s)| (q.clone(), queue_stats(s))).collect(),
        next: page.next.clone(),
        totals: totals.map(self::totals),
    }
}

/// Counts over every queue at once.
pub fn totals(t: &QueueTotals) -> w::Totals {
    w::Totals {
        jobs: t.counts.iter().map(|(k, v)| (k.as_str().to_owned(), *v)).collect(),
        queues: t.queues,
        paused: t.paused,
    }
}

/// A duration in milliseconds from a request, at most [`w::MAX_MS`].
///
/// # Errors
///
/// Over [`w::MAX_MS`], named by `field`.
pub fn millis(field: &str, v: Option<u64>) -> Result<Option<Duration>, RequestError> {
    match v {
        Some(n) if n > w::MAX_MS => Err(RequestError(format!("{field} must be at most {}", w::MAX_MS))),
        v => Ok(v.map(Duration::from_millis)),
    }
}

/// An RFC 3339 time of a request.
///
/// # Errors
///
/// Not RFC 3339, named by `field`.
pub fn rfc3339(field: &str, t: &str) -> Result<Timestamp, RequestError> {
    let at = time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
        .map_err(|e| RequestError(format!("{field} {t:?} is not an RFC 3339 time: {e}")))?;
    Ok(Timestamp::from_millis(
        i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX),
    ))
}

/// A JSON value's text as sent, as a payload's or result's bytes (null:
/// none, empty): its keys in their order and its numbers as written, only
/// the whitespace between tokens left out (a pretty-printing client and a
/// compact one store the same bytes).
pub fn json_bytes(raw: &RawValue) -> Vec<u8> {
    let text = raw.get();
    if text == "null" {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in text.as_bytes() {
        if in_string {
            out.push(b);
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = b == b'"';
            out.push(b);
        }
    }
    out
}

fn base64_bytes(field: &str, b: &str) -> Result<Vec<u8>, RequestError> {
    base64::engine::general_purpose::STANDARD
        .decode(b.as_bytes())
        .map_err(|e| RequestError(format!("{field} is not base64: {e}")))
}

/// The bytes of a (`name`, `name_base64`) pair of a request: none when
/// both are left out or null.
///
/// # Errors
///
/// Both given (even as null), or base64 that is not.
pub fn bytes_of(
    name: &str,
    json: Option<Box<RawValue>>,
    b64: Option<Option<String>>,
) -> Result<Option<Vec<u8>>, RequestError> {
    Ok(match (json, b64) {
        (Some(_), Some(_)) => return Err(RequestError(format!("give {name} or {name}_base64, not both"))),
        (Some(raw), None) if raw.get() == "null" => None,
        (Some(raw), None) => Some(json_bytes(&raw)),
        (None, None | Some(None)) => None,
        (None, Some(Some(b))) => Some(base64_bytes(&format!("{name}_base64"), &b)?),
    })
}

impl TryFrom<w::NewJob> for NewJob {
    type Error = RequestError;

    /// A submitted job as the engine's: the payload's bytes (JSON text as
    /// sent, or base64 decoded), its times and durations checked.
    fn try_from(b: w::NewJob) -> Result<Self, RequestError> {
        let payload = bytes_of("payload", b.payload, b.payload_base64)?.unwrap_or_default();
        let mut job = NewJob::new(b.queue, b.kind, payload);
        if let Some(p) = b.priority {
            job = job.priority(p);
        }
        if let Some(d) = millis("delay_ms", b.delay_ms)? {
            job = job.delay(d);
        }
        if let Some(t) = b.run_at {
            job = job.run_at(rfc3339("run_at", &t)?);
        }
        if let Some(n) = b.max_attempts {
            job = job.max_attempts(n);
        }
        if let Some(k) = b.unique_key {
            job = job.unique_key(k);
        }
        if let Some(k) = b.idempotency_key {
            job = job.idempotency_key(k);
        }
        if let Some(d) = millis("throttle_ms", b.throttle_ms)? {
            job = job.throttle(d);
        }
        if let Some(d) = millis("debounce_ms", b.debounce_ms)? {
            job = job.debounce(d);
        }
        if let Some(d) = millis("lease_for_ms", b.lease_for_ms)? {
            job = job.lease_for(d);
        }
        if let Some(d) = millis("timeout_ms", b.timeout_ms)? {
            job = job.timeout(d);
        }
        if let Some(ids) = b.depends_on {
            job = job.depends_on(ids.into_iter().map(JobId));
        }
        if let Some(f) = b.on_dependency_failure {
            job = job.on_dependency_failure(match f {
                w::DependencyFailure::Cancel => relay_core::DependencyFailure::Cancel,
                w::DependencyFailure::Run => relay_core::DependencyFailure::Run,
            });
        }
        if let Some(t) = b.traceparent {
            job = job.traceparent(t);
        }
        if let Some(tags) = b.tags {
            job = job.tags(tags);
        }
        if let Some(g) = b.group {
            job = job.group(g);
        }
        Ok(job)
    }
}

/// A schedule to add (`PUT /v1/schedules/{name}`) as the engine's.
///
/// # Errors
///
/// Neither or both of `cron` and `every_ms`, or its job does not convert.
pub fn new_schedule(name: String, b: w::NewSchedule) -> Result<NewSchedule, RequestError> {
    let job = NewJob::try_from(b.job)?;
    let new = match (b.cron, b.every_ms) {
        (Some(expr), None) => NewSchedule::cron(name, expr, job),
        (None, Some(every)) => NewSchedule::every(name, millis("every_ms", Some(every))?.unwrap_or_default(), job),
        _ => return Err(RequestError("give cron or every_ms, one of the two".into())),
    };
    // With every_ms the engine refuses it: a time zone needs a cron expression.
    Ok(match b.tz {
        Some(tz) => new.tz(tz),
        None => new,
    })
}

/// A search's query as the engine's filter: 50 jobs a page unless `limit`
/// (1-1000) says otherwise.
///
/// # Errors
///
/// A time that is not RFC 3339, a limit out of range.
pub fn job_filter(q: w::ListQuery) -> Result<JobFilter, RequestError> {
    Ok(JobFilter {
        state: q.state.map(job_state).transpose()?,
        since: q.since.as_deref().map(|t| rfc3339("since", t)).transpose()?,
        until: q.until.as_deref().map(|t| rfc3339("until", t)).transpose()?,
        queue: q.queue,
        kind: q.kind,
        tag: q.tag,
        error_contains: q.error_contains,
        before: q.before.map(JobId),
        limit: match q.limit {
            None => 50,
            Some(n @ 1..=1000) => n,
            Some(n) => return Err(RequestError(format!("limit must be 1-1000, got {n}"))),
        },
    })
}

/// A filter as a search's query (`before` and `limit` left out).
pub fn filter(f: &JobFilter) -> w::Filter {
    w::Filter {
        queue: f.queue.clone(),
        state: f.state.map(state),
        kind: f.kind.clone(),
        tag: f.tag.clone(),
        since: f.since.map(time),
        until: f.until.map(time),
        error_contains: f.error_contains.clone(),
    }
}

/// A queue's limits as a request gives them (a limit left out is lifted).
///
/// # Errors
///
/// A rate window over [`w::MAX_MS`].
pub fn limits(b: w::Limits) -> Result<QueueLimits, RequestError> {
    let rate = match b.rate_limit {
        Some(r) => Some(RateLimit {
            limit: r.limit,
            per: millis("rate_limit.per_ms", Some(r.per_ms))?.unwrap_or_default(),
        }),
        None => None,
    };
    Ok(QueueLimits {
        max_leased: b.max_leased,
        max_leased_per_group: b.max_leased_per_group,
        rate,
        poison_after: b.poison_after,
    })
}

/// A retention as the wire writes it.
pub fn keep(k: crate::Keep) -> w::Keep {
    match k {
        crate::Keep::For(d) => w::Keep::Ms(ms(d)),
        crate::Keep::Forever => w::Keep::Forever(w::Forever::Forever),
    }
}

/// A retention as a request gives it (range checks are
/// [`crate::Retention::validate`]'s, when it is set).
pub fn retention(r: w::Retention) -> crate::Retention {
    let one = |k: Option<w::Keep>| {
        k.map(|k| match k {
            w::Keep::Ms(n) => crate::Keep::For(Duration::from_millis(n)),
            w::Keep::Forever(_) => crate::Keep::Forever,
        })
    };
    crate::Retention {
        succeeded: one(r.succeeded),
        dead: one(r.dead),
        cancelled: one(r.cancelled),
    }
}

/// A queue's retention, its own and over `default` (the engine's
/// `Options::retention`).
pub fn queue_retention(queue: String, own: crate::Retention, default: &crate::Retention) -> w::QueueRetention {
    let full = own.over(default);
    let of = |k: Option<crate::Keep>| keep(k.unwrap_or(relay_core::queue::DEFAULT_KEEP));
    w::QueueRetention {
        queue,
        own: w::Retention {
            succeeded: own.succeeded.map(keep),
            dead: own.dead.map(keep),
            cancelled: own.cancelled.map(keep),
        },
        effective: w::Kept {
            succeeded: of(full.succeeded),
            dead: of(full.dead),
            cancelled: of(full.cancelled),
        },
    }
}

/// A worker's heartbeat as a request gives it, for worker `id`.
///
/// # Errors
///
/// A time that is not RFC 3339 (the rest is
/// [`crate::WorkerBeat::validate`]'s).
pub fn worker_beat(id: String, b: w::WorkerBeat) -> Result<crate::WorkerBeat, RequestError> {
    let running = b
        .running
        .iter()
        .map(|r| {
            Ok(crate::Running {
                job: JobId(r.id),
                token: crate::LeaseToken(r.token),
                since: rfc3339("running.since", &r.since)?,
            })
        })
        .collect::<Result<Vec<_>, RequestError>>()?;
    Ok(crate::WorkerBeat {
        id,
        name: b.name,
        host: b.host,
        pid: b.pid,
        queues: b.queues,
        concurrency: b.concurrency,
        version: b.version,
        started_at: rfc3339("started_at", &b.started_at)?,
        beat_every: Duration::from_millis(b.beat_every_ms),
        running,
    })
}

fn running(r: &crate::Running) -> w::RunningJob {
    w::RunningJob {
        id: r.job.0,
        token: r.token.0,
        since: time(r.since),
    }
}

/// A worker as the store knows it.
pub fn worker(v: &crate::WorkerView) -> w::Worker {
    let b = &v.record.beat;
    w::Worker {
        id: b.id.clone(),
        state: match v.state {
            crate::WorkerState::Alive => w::WorkerState::Alive,
            crate::WorkerState::Gone => w::WorkerState::Gone,
            crate::WorkerState::Stopped => w::WorkerState::Stopped,
        },
        name: b.name.clone(),
        host: b.host.clone(),
        pid: b.pid,
        queues: b.queues.clone(),
        concurrency: b.concurrency,
        version: b.version.clone(),
        started_at: time(b.started_at),
        beat_every_ms: ms(b.beat_every),
        seen_at: time(v.record.seen_at),
        stopped_at: v.record.stopped_at.map(time),
        running: b.running.iter().map(running).collect(),
        orphaned: v
            .orphaned
            .iter()
            .map(|o| w::OrphanedLease {
                id: o.running.job.0,
                token: o.running.token.0,
                since: time(o.running.since),
                expires_at: time(o.expires_at),
            })
            .collect(),
    }
}

/// One pass of the prune.
pub fn pruned(p: crate::Pruned) -> w::Pruned {
    w::Pruned {
        deleted: p.deleted,
        next: p.next.map(|id| id.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{JobStatus, Priority};
    use serde_json::{json, Value};

    fn value(v: &impl serde::Serialize) -> Value {
        serde_json::to_value(v).unwrap()
    }

    #[test]
    fn bytes_keep_every_byte() {
        let status = JobStatus::new_ready(Timestamp::from_millis(0), 3);
        let mut j = Job {
            id: JobId(7),
            queue: "q".into(),
            kind: "k".into(),
            payload: b"{\"a\":1}".to_vec(),
            priority: Priority::HIGH,
            created_at: Timestamp::from_millis(1_764_442_800_123),
            unique_key: None,
            result: Some(vec![0xff, 0x00]),
            lease_for: None,
            timeout: Some(Duration::from_secs(90)),
            traceparent: None,
            tags: vec!["vip".into()],
            group: None,
            progress: None,
            steps: vec![
                relay_core::Step {
                    name: "charge".into(),
                    attempt: 1,
                    at: Timestamp::from_millis(1_764_442_800_123),
                    output: br#"{"charge":"ch_1"}"#.to_vec(),
                },
                relay_core::Step {
                    name: "pdf".into(),
                    attempt: 2,
                    at: Timestamp::from_millis(1_764_442_800_124),
                    output: vec![0x80],
                },
            ],
            status,
        };
        let v = value(&job(&j));
        assert_eq!(v["steps"][0]["output"], json!({"charge": "ch_1"}));
        assert_eq!(v["steps"][0]["bytes"], 17);
        assert_eq!(v["steps"][1]["output_base64"], "gA==");
        // A client reads each step back as it was recorded.
        let back: Vec<relay_core::Step> = job(&j).steps.iter().map(|s| step_of(s).unwrap()).collect();
        assert_eq!(back, j.steps);
        assert_eq!(v["id"], 7);
        assert_eq!(v["state"], "READY");
        assert_eq!(v["payload"], json!({"a": 1}), "JSON bytes are shown as their value");
        assert_eq!(v["result_base64"], "/wA=");
        assert_eq!(v["created_at"], "2025-11-29T19:00:00.123Z");
        j.payload = vec![0x80];
        assert_eq!(value(&job(&j))["payload_base64"], "gA==");
        // A JSON string's text is a string; text that is not JSON is bytes.
        j.payload = b"\"{\\\"a\\\":1}\"".to_vec();
        assert_eq!(value(&job(&j))["payload"], json!("{\"a\":1}"));
        j.payload = b"hello".to_vec();
        let v = value(&job(&j));
        assert_eq!((v.get("payload"), &v["payload_base64"]), (None, &json!("aGVsbG8=")));
        j.payload = Vec::new();
        assert_eq!(value(&job(&j))["payload"], Value::Null);
        j.result = None;
        assert_eq!(value(&job(&j))["result"], Value::Null);
    }

    /// Answers carry the text stored, whatever JSON it is (`1e999`, keys
    /// repeated and out of order, numbers past f64).
    #[test]
    fn every_answer_shows_every_payload_as_stored() {
        use crate::{LeaseRequest, Relay};
        let relay = Relay::in_memory().unwrap();
        let kept = br#"{"b":1,"a":12345678901234567890123,"b":1E2}"#;
        let odd = br#"{"b":1,"e":1e999}"#;
        for payload in [&kept[..], &odd[..]] {
            relay.submit(NewJob::new("q", "k", payload.to_vec())).unwrap();
        }
        let jobs = relay.lease(LeaseRequest::new(["q"]).max(2)).unwrap();
        for (l, stored) in jobs.iter().zip([&kept[..], &odd[..]]) {
            let one = serde_json::to_string(&job(&relay.get(l.id).unwrap())).unwrap();
            let lease = serde_json::to_string(&leased(l)).unwrap();
            let stored = format!(r#""payload":{}"#, std::str::from_utf8(stored).unwrap());
            assert!(one.contains(&stored) && lease.contains(&stored), "{one} / {lease}");
        }
    }

    #[test]
    fn a_new_job_converts_once_with_its_checks() {
        let raw = |t: &str| Some(RawValue::from_string(t.to_owned()).unwrap());
        let mut b = w::NewJob::new("q", "k", b"");
        b.payload = raw("{ \"b\" : 1 }");
        b.payload_base64 = Some(None);
        assert_eq!(
            NewJob::try_from(b.clone()).unwrap_err().0,
            "give payload or payload_base64, not both"
        );
        b.payload_base64 = None;
        b.run_at = Some("tomorrow".into());
        assert!(NewJob::try_from(b.clone())
            .unwrap_err()
            .0
            .starts_with("run_at \"tomorrow\""));
        b.run_at = None;
        b.delay_ms = Some(w::MAX_MS + 1);
        assert!(NewJob::try_from(b.clone())
            .unwrap_err()
            .0
            .starts_with("delay_ms must be at most"));
        b.delay_ms = None;
        let relay = crate::Relay::in_memory().unwrap();
        let id = relay.submit(NewJob::try_from(b).unwrap()).unwrap();
        assert_eq!(
            relay.get(id).unwrap().payload,
            br#"{"b":1}"#,
            "whitespace between tokens left out"
        );
    }

    #[test]
    fn json_text_is_kept_in_order_without_the_space_between_tokens() {
        let raw = |t: &str| RawValue::from_string(t.to_owned()).unwrap();
        let cases = [
            (
                "{ \"b\" : 1,\n  \"a\": [1, 2.50, \"x y\"] }",
                r#"{"b":1,"a":[1,2.50,"x y"]}"#,
            ),
            (r#"" spaced \" quote \\ ""#, r#"" spaced \" quote \\ ""#),
            ("null", ""),
            ("\"\"", "\"\""),
        ];
        for (given, stored) in cases {
            assert_eq!(String::from_utf8(json_bytes(&raw(given))).unwrap(), stored, "{given}");
        }
    }
}
