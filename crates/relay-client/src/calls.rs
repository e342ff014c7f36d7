//! Each call of the API, described once (method, path, JSON body, how its
//! answer is read) for both clients to send.

use crate::wire::{
    Ack, AppendEvent, Appended, Beaten, Bulk, BulkDone, Changed, DeadGroup, DeadGroups, Event, Events, Extend,
    Heartbeat, ItemAnswer, Job, JobPage, Lease, Leased, LeasedJob, Limits, ListQuery, Nack, NewJob, NewJobs,
    NewSchedule, QueueLimits, QueuePage, QueuePaused, Release, Schedule, ScheduleRemoved, Schedules, Stats, Submitted,
    SubmittedBatch, Work, Worked,
};
use crate::Error;
use serde::de::DeserializeOwned;
use serde::Serialize;

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

impl<T: DeserializeOwned> Call<T> {
    fn new(method: &'static str, path: String, body: Option<&impl Serialize>) -> Result<Self, Error> {
        Ok(Self {
            method,
            path,
            body: body
                .map(serde_json::to_vec)
                .transpose()
                .map_err(|e| Error::Decode(format!("the request does not serialize: {e}")))?,
            read: read::<T>,
        })
    }

    fn get(path: String) -> Self {
        Self {
            method: "GET",
            path,
            body: None,
            read: read::<T>,
        }
    }

    /// A call without a body of its own. A POST still sends `{}` as JSON:
    /// a server without tokens refuses a change sent as anything else (a
    /// web page's form could send that).
    fn bare(method: &'static str, path: String) -> Self {
        Self {
            method,
            path,
            body: (method == "POST").then(|| b"{}".to_vec()),
            read: read::<T>,
        }
    }
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

pub(crate) fn submit(job: &NewJob) -> Result<Call<Submitted>, Error> {
    Call::new("POST", "/v1/jobs".into(), Some(job))
}

pub(crate) fn submit_batch(jobs: Vec<NewJob>) -> Result<Call<Vec<i64>>, Error> {
    let call = Call::<SubmittedBatch>::new("POST", "/v1/jobs/batch".into(), Some(&NewJobs { jobs }))?;
    Ok(Call::unwrap(call, |t| read::<SubmittedBatch>(t).map(|b| b.ids)))
}

pub(crate) fn lease(req: &Lease) -> Result<Call<Vec<LeasedJob>>, Error> {
    let call = Call::<Leased>::new("POST", "/v1/lease".into(), Some(req))?;
    Ok(Call::unwrap(call, |t| read::<Leased>(t).map(|l| l.jobs)))
}

pub(crate) fn ack(id: i64, ack: &Ack) -> Result<Call<Changed>, Error> {
    Call::new("POST", format!("/v1/jobs/{id}/ack"), Some(ack))
}

pub(crate) fn nack(id: i64, nack: &Nack) -> Result<Call<Changed>, Error> {
    Call::new("POST", format!("/v1/jobs/{id}/nack"), Some(nack))
}

pub(crate) fn extend(id: i64, extend: &Extend) -> Result<Call<Changed>, Error> {
    Call::new("POST", format!("/v1/jobs/{id}/extend"), Some(extend))
}

pub(crate) fn release(id: i64, release: &Release) -> Result<Call<Changed>, Error> {
    Call::new("POST", format!("/v1/jobs/{id}/release"), Some(release))
}

pub(crate) fn work(work: &Work) -> Result<Call<Worked>, Error> {
    Call::new("POST", "/v1/work".into(), Some(work))
}

pub(crate) fn heartbeat(beat: &Heartbeat) -> Result<Call<Vec<ItemAnswer>>, Error> {
    let call = Call::<Beaten>::new("POST", "/v1/heartbeat".into(), Some(beat))?;
    Ok(Call::unwrap(call, |t| read::<Beaten>(t).map(|b| b.leases)))
}

pub(crate) fn cancel(id: i64) -> Call<Changed> {
    Call::bare("POST", format!("/v1/jobs/{id}/cancel"))
}

pub(crate) fn retry(id: i64) -> Call<Changed> {
    Call::bare("POST", format!("/v1/jobs/{id}/retry"))
}

pub(crate) fn delete(id: i64) -> Call<Changed> {
    Call::bare("DELETE", format!("/v1/jobs/{id}"))
}

pub(crate) fn get(id: i64) -> Call<Job> {
    Call::get(format!("/v1/jobs/{id}"))
}

pub(crate) fn events(id: i64) -> Call<Vec<Event>> {
    Call::unwrap(Call::<Events>::get(format!("/v1/jobs/{id}/events")), |t| {
        read::<Events>(t).map(|e| e.events)
    })
}

pub(crate) fn append_event(id: i64, event: &AppendEvent) -> Result<Call<Appended>, Error> {
    Call::new("POST", format!("/v1/jobs/{id}/events"), Some(event))
}

pub(crate) fn list(query: &ListQuery) -> Call<JobPage> {
    let q: Vec<String> = query
        .pairs()
        .into_iter()
        .map(|(k, v)| format!("{k}={}", encode(&v)))
        .collect();
    Call::get(format!("/v1/jobs?{}", q.join("&")))
}

pub(crate) fn bulk(bulk: &Bulk) -> Result<Call<BulkDone>, Error> {
    Call::new("POST", "/v1/jobs/bulk".into(), Some(bulk))
}

pub(crate) fn dead_groups(limit: u32) -> Call<Vec<DeadGroup>> {
    Call::unwrap(Call::<DeadGroups>::get(format!("/v1/dead?limit={limit}")), |t| {
        read::<DeadGroups>(t).map(|g| g.groups)
    })
}

pub(crate) fn stats(page: &QueuePage) -> Call<Stats> {
    let mut q = Vec::new();
    if let Some(a) = &page.after {
        q.push(format!("after={}", encode(a)));
    }
    if let Some(n) = page.limit {
        q.push(format!("limit={n}"));
    }
    if q.is_empty() {
        Call::get("/v1/stats".into())
    } else {
        Call::get(format!("/v1/stats?{}", q.join("&")))
    }
}

pub(crate) fn pause(queue: &str) -> Call<QueuePaused> {
    Call::bare("POST", format!("/v1/queues/{}/pause", segment(queue)))
}

pub(crate) fn resume(queue: &str) -> Call<QueuePaused> {
    Call::bare("POST", format!("/v1/queues/{}/resume", segment(queue)))
}

pub(crate) fn set_limits(queue: &str, limits: &Limits) -> Result<Call<QueueLimits>, Error> {
    Call::new("PUT", format!("/v1/queues/{}/limits", segment(queue)), Some(limits))
}

pub(crate) fn schedules() -> Call<Vec<Schedule>> {
    Call::unwrap(Call::<Schedules>::get("/v1/schedules".into()), |t| {
        read::<Schedules>(t).map(|s| s.schedules)
    })
}

pub(crate) fn put_schedule(name: &str, schedule: &NewSchedule) -> Result<Call<Schedule>, Error> {
    Call::new("PUT", format!("/v1/schedules/{}", segment(name)), Some(schedule))
}

pub(crate) fn remove_schedule(name: &str) -> Call<ScheduleRemoved> {
    Call::bare("DELETE", format!("/v1/schedules/{}", segment(name)))
}

pub(crate) fn pause_schedule(name: &str) -> Call<Schedule> {
    Call::bare("POST", format!("/v1/schedules/{}/pause", segment(name)))
}

pub(crate) fn resume_schedule(name: &str) -> Call<Schedule> {
    Call::bare("POST", format!("/v1/schedules/{}/resume", segment(name)))
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
