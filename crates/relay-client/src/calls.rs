//! Each call of the API, described once (method, path, JSON body, how its
//! answer is read) for both clients to send.

use crate::wire::{
    self, calls, Ack, AppendEvent, Appended, Beaten, Bulk, BulkDone, Changed, DeadGroup, DeadGroups, DeadQuery, Events,
    Extend, Heartbeat, ItemAnswer, Job, JobPage, Lease, Leased, LeasedJob, Limits, ListQuery, Method, Nack, NewJob,
    NewJobs, NewSchedule, Nothing, Part, QueueLimits, QueuePage, QueuePaused, Release, Schedule, ScheduleRemoved,
    Schedules, Stats, Submitted, SubmittedBatch, Work, Worked,
};
use crate::Error;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// A request to send, and how to read its answer into a `T`.
pub(crate) struct Call<T> {
    pub method: &'static str,
    pub path: String,
    pub body: Option<Vec<u8>>,
    read: fn(&str) -> Result<T, serde_json::Error>,
}

fn read<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    serde_json::from_str(text)
}

impl<T> Call<T> {
    /// The same request, its answer read as a `W` then unwrapped.
    fn unwrap<W: DeserializeOwned>(call: Call<W>, read: fn(&str) -> Result<T, serde_json::Error>) -> Self {
        Self {
            method: call.method,
            path: call.path,
            body: call.body,
            read,
        }
    }

    /// The answer of a request that succeeded (2xx), read.
    pub fn answer(&self, status: u16, text: &str) -> Result<T, Error> {
        (self.read)(text).map_err(|e| Error::Decode(format!("{e}, in {status} {}", snippet(text))))
    }
}

/// An error answer (not 2xx) as [`Error::Api`]: the server's code and
/// message, or (from something that is not Relay) the status and text.
pub(crate) fn refused(status: u16, text: &str) -> Error {
    match serde_json::from_str::<crate::wire::ErrorBody>(text) {
        Ok(b) => Error::Api {
            status,
            code: b.error.code,
            message: b.error.message,
        },
        Err(_) => Error::Api {
            status,
            code: crate::wire::ErrorCode::Http,
            message: match snippet(text) {
                t if t.is_empty() => "an answer that is not Relay's (empty)".to_owned(),
                t => format!("an answer that is not Relay's: {t}"),
            },
        },
    }
}

/// Any call of the table, with its path parameter, query and body.
pub(crate) fn of<C: wire::Call>(param: &C::Param, query: &C::Query, body: &C::Body) -> Result<Call<C::Answer>, Error> {
    let mut path = C::path(param);
    if <C::Query as Part>::GIVEN {
        let pairs = query_pairs(query)?;
        if !pairs.is_empty() {
            path.push('?');
            path.push_str(&pairs.join("&"));
        }
    }
    let method = C::METHOD.as_str();
    let body = if <C::Body as Part>::GIVEN {
        Some(serde_json::to_vec(body).map_err(|e| Error::Decode(format!("the request does not serialize: {e}")))?)
    } else {
        // A POST still sends `{}` as JSON: a server without tokens refuses
        // a change sent as anything else (a web page's form could send that).
        (C::METHOD == Method::Post).then(|| b"{}".to_vec())
    };
    Ok(Call {
        method,
        path,
        body,
        read: read::<C::Answer>,
    })
}

/// A query's fields as `name=value` pairs, percent-encoded (those left
/// out or null skipped).
fn query_pairs(query: &impl Serialize) -> Result<Vec<String>, Error> {
    let v = serde_json::to_value(query).map_err(|e| Error::Decode(format!("the query does not serialize: {e}")))?;
    let Value::Object(fields) = v else {
        return Ok(Vec::new());
    };
    Ok(fields
        .into_iter()
        .filter_map(|(k, v)| match v {
            Value::Null => None,
            Value::String(s) => Some(format!("{k}={}", encode(&s))),
            other => Some(format!("{k}={}", encode(&other.to_string()))),
        })
        .collect())
}

const NONE: Nothing = Nothing {};

pub(crate) fn submit(job: &NewJob) -> Result<Call<Submitted>, Error> {
    of::<calls::Submit>(&(), &NONE, job)
}

pub(crate) fn submit_batch(jobs: Vec<NewJob>) -> Result<Call<Vec<i64>>, Error> {
    let call = of::<calls::SubmitBatch>(&(), &NONE, &NewJobs { jobs })?;
    Ok(Call::unwrap(call, |t| read::<SubmittedBatch>(t).map(|b| b.ids)))
}

pub(crate) fn lease(req: &Lease) -> Result<Call<Vec<LeasedJob>>, Error> {
    let call = of::<calls::Lease>(&(), &NONE, req)?;
    Ok(Call::unwrap(call, |t| read::<Leased>(t).map(|l| l.jobs)))
}

pub(crate) fn ack(id: i64, ack: &Ack) -> Result<Call<Changed>, Error> {
    of::<calls::Ack>(&id, &NONE, ack)
}

pub(crate) fn nack(id: i64, nack: &Nack) -> Result<Call<Changed>, Error> {
    of::<calls::Nack>(&id, &NONE, nack)
}

pub(crate) fn extend(id: i64, extend: &Extend) -> Result<Call<Changed>, Error> {
    of::<calls::Extend>(&id, &NONE, extend)
}

pub(crate) fn release(id: i64, release: &Release) -> Result<Call<Changed>, Error> {
    of::<calls::Release>(&id, &NONE, release)
}

pub(crate) fn work(work: &Work) -> Result<Call<Worked>, Error> {
    of::<calls::Work>(&(), &NONE, work)
}

pub(crate) fn heartbeat(beat: &Heartbeat) -> Result<Call<Vec<ItemAnswer>>, Error> {
    let call = of::<calls::Heartbeat>(&(), &NONE, beat)?;
    Ok(Call::unwrap(call, |t| read::<Beaten>(t).map(|b| b.leases)))
}

pub(crate) fn cancel(id: i64) -> Result<Call<Changed>, Error> {
    of::<calls::Cancel>(&id, &NONE, &NONE)
}

pub(crate) fn retry(id: i64) -> Result<Call<Changed>, Error> {
    of::<calls::Retry>(&id, &calls::RetryQuery::default(), &NONE)
}

pub(crate) fn delete(id: i64) -> Result<Call<Changed>, Error> {
    of::<calls::Delete>(&id, &NONE, &NONE)
}

pub(crate) fn get(id: i64) -> Result<Call<Job>, Error> {
    of::<calls::Get>(&id, &NONE, &NONE)
}

pub(crate) fn job_result(id: i64, wait: std::time::Duration) -> Result<Call<Job>, Error> {
    let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    let query = calls::ResultQuery {
        wait_ms: (wait_ms > 0).then_some(wait_ms),
    };
    of::<calls::JobResult>(&id, &query, &NONE)
}

/// The longest one `GET /v1/jobs/{id}/result` of `Client::result` waits:
/// below the server's default `--max-wait` (60 s), and an answer that
/// comes while the wait runs stops it.
pub(crate) const RESULT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether `state` is one a job ends in.
pub(crate) fn ended(job: &Job) -> bool {
    matches!(
        job.state,
        crate::wire::State::Succeeded | crate::wire::State::Dead | crate::wire::State::Cancelled
    )
}

pub(crate) fn events_page(id: i64, after: i64, limit: Option<u32>) -> Result<Call<Events>, Error> {
    let query = calls::EventsQuery {
        after: (after > 0).then_some(after),
        limit,
    };
    of::<calls::Events>(&id, &query, &NONE)
}

pub(crate) fn append_event(id: i64, event: &AppendEvent) -> Result<Call<Appended>, Error> {
    of::<calls::AppendEvent>(&id, &NONE, event)
}

pub(crate) fn list(query: &ListQuery) -> Result<Call<JobPage>, Error> {
    of::<calls::List>(&(), query, &NONE)
}

pub(crate) fn bulk(bulk: &Bulk) -> Result<Call<BulkDone>, Error> {
    of::<calls::Bulk>(&(), &NONE, bulk)
}

pub(crate) fn dead_groups(limit: u32) -> Result<Call<Vec<DeadGroup>>, Error> {
    let call = of::<calls::DeadGroups>(&(), &DeadQuery { limit: Some(limit) }, &NONE)?;
    Ok(Call::unwrap(call, |t| read::<DeadGroups>(t).map(|g| g.groups)))
}

pub(crate) fn stats(page: &QueuePage) -> Result<Call<Stats>, Error> {
    of::<calls::Stats>(&(), page, &NONE)
}

pub(crate) fn pause(queue: &str) -> Result<Call<QueuePaused>, Error> {
    of::<calls::PauseQueue>(&queue.to_owned(), &NONE, &NONE)
}

pub(crate) fn resume(queue: &str) -> Result<Call<QueuePaused>, Error> {
    of::<calls::ResumeQueue>(&queue.to_owned(), &NONE, &NONE)
}

pub(crate) fn set_limits(queue: &str, limits: &Limits) -> Result<Call<QueueLimits>, Error> {
    of::<calls::SetQueueLimits>(&queue.to_owned(), &NONE, limits)
}

pub(crate) fn schedules() -> Result<Call<Vec<Schedule>>, Error> {
    let call = of::<calls::Schedules>(&(), &NONE, &NONE)?;
    Ok(Call::unwrap(call, |t| read::<Schedules>(t).map(|s| s.schedules)))
}

pub(crate) fn put_schedule(name: &str, schedule: &NewSchedule) -> Result<Call<Schedule>, Error> {
    of::<calls::PutSchedule>(&name.to_owned(), &NONE, schedule)
}

pub(crate) fn remove_schedule(name: &str) -> Result<Call<ScheduleRemoved>, Error> {
    of::<calls::RemoveSchedule>(&name.to_owned(), &NONE, &NONE)
}

pub(crate) fn pause_schedule(name: &str) -> Result<Call<Schedule>, Error> {
    of::<calls::PauseSchedule>(&name.to_owned(), &NONE, &NONE)
}

pub(crate) fn resume_schedule(name: &str) -> Result<Call<Schedule>, Error> {
    of::<calls::ResumeSchedule>(&name.to_owned(), &NONE, &NONE)
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
