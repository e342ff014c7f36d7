//! The bodies of Relay's HTTP API, as the server reads and writes them.
//!
//! Requests are read by the server with these very types (unknown fields
//! are refused), so a client built on them cannot drift from it. Responses
//! keep every field the server sends: a test turns real answers into these
//! types and back and finds them unchanged.
//!
//! Durations are whole milliseconds (`*_ms`), times RFC 3339 strings in UTC
//! with milliseconds, states in capitals. Payloads and results are bytes: a
//! JSON text travels as its JSON value (`payload`), anything else as base64
//! (`payload_base64`); see [`Bytes`].

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::BTreeMap;

/// A field that was given (as `Some`, null included), unlike one left out
/// (`None`, with `#[serde(default)]`).
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Bytes as the API carries them, decoded from a `payload` /
/// `payload_base64` (or `result` / `result_base64`) pair.
#[derive(Debug, Clone, PartialEq)]
pub enum Bytes {
    /// None, or empty (`null`).
    Empty,
    /// A JSON text, as its value.
    Json(Value),
    /// Bytes that are not a JSON text.
    Raw(Vec<u8>),
}

impl Bytes {
    /// The pair's bytes: `json` as given (`Some(Null)` or `None`: none),
    /// else `base64` decoded.
    ///
    /// # Errors
    ///
    /// The decoder's message when `base64` is not base64.
    pub fn from_pair(json: Option<&Value>, base64: Option<&str>) -> Result<Self, String> {
        use base64::Engine as _;
        match (json, base64) {
            (Some(v), _) if !v.is_null() => Ok(Self::Json(v.clone())),
            (_, Some(b)) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .map(Self::Raw)
                .map_err(|e| format!("not base64: {e}")),
            _ => Ok(Self::Empty),
        }
    }

    /// The bytes themselves: a JSON value's compact text, or the raw bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            Self::Empty => Vec::new(),
            Self::Json(v) => v.to_string().into_bytes(),
            Self::Raw(b) => b.clone(),
        }
    }
}

/// `bytes` as a request's (`payload`, `payload_base64`) pair: sent as base64,
/// so the server keeps exactly these bytes (a JSON text among them is
/// shown as JSON when read back, as if it had been sent as JSON).
fn base64_pair(bytes: &[u8]) -> Option<Option<String>> {
    use base64::Engine as _;
    (!bytes.is_empty()).then(|| Some(base64::engine::general_purpose::STANDARD.encode(bytes)))
}

/// A job to submit (`POST /v1/jobs`, and each of `POST /v1/jobs/batch`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewJob {
    /// The queue (1-64 of A-Z a-z 0-9 _ . -).
    pub queue: String,
    /// What the job is: the handler that runs it.
    pub kind: String,
    /// Any JSON value, stored as its JSON text as sent (whitespace between
    /// tokens dropped); null: no payload. Not with `payload_base64`.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub payload: Option<Box<RawValue>>,
    /// Bytes, base64; `Some(None)` when given as null.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<Option<String>>,
    /// 0 (least urgent) to 3 (most urgent); 1 when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// Not leased before this many milliseconds from now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Not leased before this moment (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<String>,
    /// Attempts before the job is DEAD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// While a job with this key is unfinished, a submit of it answers that job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_key: Option<String>,
    /// Each lease of the job lasts this long, whatever the lease asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_for_ms: Option<u64>,
    /// Workers give up on an attempt after this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The job waits until these jobs have succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends_on: Option<Vec<i64>>,
    /// `"cancel"` (the default) or `"run"`: what happens to the job when
    /// one it depends on ends DEAD or CANCELLED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_dependency_failure: Option<String>,
    /// The W3C trace context the job continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// Short labels to search by (at most 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

impl NewJob {
    /// A job of `kind` on `queue` carrying `payload`'s bytes (sent as base64,
    /// kept byte for byte).
    pub fn new(queue: impl Into<String>, kind: impl Into<String>, payload: &[u8]) -> Self {
        Self {
            queue: queue.into(),
            kind: kind.into(),
            payload_base64: base64_pair(payload),
            ..Self::default()
        }
    }

    /// A job whose payload is `value`, sent as JSON (read back as that value).
    ///
    /// # Errors
    ///
    /// `value` does not serialize to JSON.
    pub fn json(
        queue: impl Into<String>,
        kind: impl Into<String>,
        value: &impl Serialize,
    ) -> Result<Self, serde_json::Error> {
        Ok(Self {
            queue: queue.into(),
            kind: kind.into(),
            payload: Some(serde_json::value::to_raw_value(value)?),
            ..Self::default()
        })
    }
}

/// `POST /v1/jobs/batch`: 1-10,000 jobs, all or none.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewJobs {
    /// The jobs, in order.
    pub jobs: Vec<NewJob>,
}

/// `POST /v1/lease`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lease {
    /// The queues to lease from (1-64).
    pub queues: Vec<String>,
    /// Who holds the lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// Lease up to this many jobs (1 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    /// Each lease's length (30 s when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_for_ms: Option<u64>,
    /// Wait this long for a job when none is ready (long poll; 0 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

/// `POST /v1/jobs/{id}/ack`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    /// The lease's token.
    pub token: i64,
    /// The result as a JSON value, kept as its JSON text.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<RawValue>>,
    /// The result as bytes, base64.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub result_base64: Option<Option<String>>,
}

impl Ack {
    /// An ack under `token` with `result`'s bytes (none when `None` or empty).
    pub fn new(token: i64, result: Option<&[u8]>) -> Self {
        Self {
            token,
            result: None,
            result_base64: result.and_then(base64_pair),
        }
    }
}

/// `POST /v1/jobs/{id}/nack`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nack {
    /// The lease's token.
    pub token: i64,
    /// What went wrong (kept as the job's last error).
    pub error: String,
    /// Retry after this long instead of the back-off policy's delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
    /// No retry can fix it: DEAD now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub permanent: bool,
}

/// `POST /v1/jobs/{id}/extend`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Extend {
    /// The lease's token.
    pub token: i64,
    /// The lease's new length from now (30 s when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_for_ms: Option<u64>,
}

/// `POST /v1/jobs/{id}/release`: the job back to READY, the attempt not counted.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Release {
    /// The lease's token.
    pub token: i64,
    /// Snooze: READY again only after this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_ms: Option<u64>,
}

/// `POST /v1/jobs/{id}/events`: a worker's own event on the job's log.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppendEvent {
    /// What happened (e.g. `progress`).
    pub kind: String,
    /// Its details.
    #[serde(default)]
    pub data: Value,
}

/// Which jobs (`GET /v1/jobs` as query parameters, `POST /v1/jobs/bulk` as
/// its `filter`): every field given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// Only this queue's jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Only jobs in this state (any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Only jobs of this kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Only jobs carrying this tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Created at or after (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Created before (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Whose last error contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_contains: Option<String>,
}

impl Filter {
    /// True when no condition is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// `GET /v1/jobs`'s query: a [`Filter`]'s conditions, a cursor and a page
/// size.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only this queue's jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Only jobs in this state (any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Only jobs of this kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Only jobs carrying this tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// Created at or after (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Created before (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Whose last error contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_contains: Option<String>,
    /// Only jobs with an id below this (the previous page's `next`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
    /// At most this many (1-1000; 50 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

impl ListQuery {
    /// The jobs `filter` matches, `limit` a page, before `before`.
    pub fn new(filter: Filter, before: Option<i64>, limit: Option<u32>) -> Self {
        Self {
            queue: filter.queue,
            state: filter.state,
            kind: filter.kind,
            tag: filter.tag,
            since: filter.since,
            until: filter.until,
            error_contains: filter.error_contains,
            before,
            limit,
        }
    }

    /// Its conditions.
    pub fn filter(&self) -> Filter {
        Filter {
            queue: self.queue.clone(),
            state: self.state.clone(),
            kind: self.kind.clone(),
            tag: self.tag.clone(),
            since: self.since.clone(),
            until: self.until.clone(),
            error_contains: self.error_contains.clone(),
        }
    }

    /// The query as `name=value` pairs (values not yet percent-encoded).
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let texts = [
            ("queue", &self.queue),
            ("state", &self.state),
            ("kind", &self.kind),
            ("tag", &self.tag),
            ("since", &self.since),
            ("until", &self.until),
            ("error_contains", &self.error_contains),
        ];
        let mut out: Vec<(&'static str, String)> = texts
            .into_iter()
            .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
            .collect();
        out.extend(self.before.map(|b| ("before", b.to_string())));
        out.extend(self.limit.map(|n| ("limit", n.to_string())));
        out
    }
}

/// `POST /v1/jobs/bulk`: retry, cancel or delete every job a filter matches.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bulk {
    /// `"retry"`, `"cancel"` or `"delete"`.
    pub action: String,
    /// Which jobs (at least one condition).
    pub filter: Filter,
}

/// A queue's limits (`PUT /v1/queues/{queue}/limits`, and in answers): a
/// limit left out (or null) is lifted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// At most this many of the queue's jobs LEASED at once.
    #[serde(default)]
    pub max_leased: Option<u32>,
    /// At most `limit` leases per `per_ms`.
    #[serde(default)]
    pub rate_limit: Option<Rate>,
}

/// A rate limit: `limit` leases per `per_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    /// Leases per window.
    pub limit: u32,
    /// The window, in milliseconds.
    pub per_ms: u64,
}

/// `PUT /v1/schedules/{name}`: a cron expression or an interval, and the
/// job each tick enqueues.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewSchedule {
    /// Five fields (or six, seconds first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// The cron expression's IANA time zone (UTC when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
    /// Instead of cron: every this many milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// The job each tick enqueues (no delay, run_at or unique_key).
    pub job: NewJob,
}

// ---- Answers ----

/// A submit's answer: the job's id, and `existing` when an unfinished job
/// already held its unique key (nothing was written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    /// The job's id.
    pub id: i64,
    /// True when the id is of a job that already held the unique key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub existing: bool,
}

/// A batch submit's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmittedBatch {
    /// The new jobs' ids, in the order given.
    pub ids: Vec<i64>,
}

/// A job, as `GET /v1/jobs/{id}` and the list answer it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Its id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: String,
    /// WAITING, READY, LEASED, SUCCEEDED, DEAD or CANCELLED.
    pub state: String,
    /// 0-3.
    pub priority: u8,
    /// Attempts so far.
    pub attempts: u32,
    /// Attempts before it is DEAD.
    pub max_attempts: u32,
    /// When it is (or was) due.
    pub ready_at: String,
    /// When it was submitted.
    pub created_at: String,
    /// When it finished, once it has.
    pub finished_at: Option<String>,
    /// Its unique key.
    pub unique_key: Option<String>,
    /// Its latest lease's token (0 before any).
    pub lease_token: i64,
    /// When its lease expires, while LEASED.
    pub lease_expires_at: Option<String>,
    /// Who holds its lease, while LEASED.
    pub leased_by: Option<String>,
    /// Its last error.
    pub last_error: Option<String>,
    /// Its own lease length.
    pub lease_for_ms: Option<u64>,
    /// Its own attempt timeout.
    pub timeout_ms: Option<u64>,
    /// The trace context it continues.
    pub traceparent: Option<String>,
    /// Its tags.
    pub tags: Vec<String>,
    /// How many jobs it still waits on.
    pub waiting_on: u32,
    /// Its payload as JSON (`Some(Null)`: none); absent when it is bytes.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// Its payload as base64, when it is not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
    /// Its result as JSON (`Some(Null)`: none); absent when it is bytes.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Its result as base64, when it is not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_base64: Option<String>,
}

impl Job {
    /// The payload's bytes.
    ///
    /// # Errors
    ///
    /// `payload_base64` is not base64.
    pub fn payload(&self) -> Result<Bytes, String> {
        Bytes::from_pair(self.payload.as_ref(), self.payload_base64.as_deref())
    }

    /// The result's bytes.
    ///
    /// # Errors
    ///
    /// `result_base64` is not base64.
    pub fn result(&self) -> Result<Bytes, String> {
        Bytes::from_pair(self.result.as_ref(), self.result_base64.as_deref())
    }
}

/// A page of `GET /v1/jobs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobPage {
    /// The jobs, newest first.
    pub jobs: Vec<Job>,
    /// The next page's `before`; none on the last page.
    pub next: Option<i64>,
}

/// A leased job, as a worker receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeasedJob {
    /// Its id.
    pub id: i64,
    /// This lease's token: give it to ack, nack, extend and release.
    pub token: i64,
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: String,
    /// 0-3.
    pub priority: u8,
    /// This attempt's number (1 for the first).
    pub attempt: u32,
    /// Attempts before it is DEAD.
    pub max_attempts: u32,
    /// When this lease expires unless extended.
    pub lease_expires_at: String,
    /// This lease's length.
    pub lease_for_ms: u64,
    /// Its attempt timeout.
    pub timeout_ms: Option<u64>,
    /// The trace context it continues.
    pub traceparent: Option<String>,
    /// Its payload as JSON (`Some(Null)`: none); absent when it is bytes.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// Its payload as base64, when it is not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
}

impl LeasedJob {
    /// The payload's bytes.
    ///
    /// # Errors
    ///
    /// `payload_base64` is not base64.
    pub fn payload(&self) -> Result<Bytes, String> {
        Bytes::from_pair(self.payload.as_ref(), self.payload_base64.as_deref())
    }
}

/// `POST /v1/lease`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Leased {
    /// The jobs leased (none when none was ready in time).
    pub jobs: Vec<LeasedJob>,
}

/// What a call on one job did: its id and whatever the call changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changed {
    /// The job's id.
    pub id: i64,
    /// Its state after the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// When it is due again (a nack that retries, a snooze).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<String>,
    /// The lease's new expiry (an extend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<String>,
    /// True when the job was deleted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted: bool,
}

impl Changed {
    /// Job `id`, nothing said of it yet.
    pub fn new(id: i64) -> Self {
        Self {
            id,
            state: None,
            ready_at: None,
            lease_expires_at: None,
            deleted: false,
        }
    }

    /// Job `id`, now in `state`.
    pub fn in_state(id: i64, state: &str) -> Self {
        Self {
            state: Some(state.to_owned()),
            ..Self::new(id)
        }
    }

    /// Job `id`, deleted.
    pub fn deleted(id: i64) -> Self {
        Self {
            deleted: true,
            ..Self::new(id)
        }
    }

    /// Job `id`'s lease, now expiring at `at`.
    pub fn lease_until(id: i64, at: String) -> Self {
        Self {
            lease_expires_at: Some(at),
            ..Self::new(id)
        }
    }

    /// The same, due again at `at`.
    #[must_use]
    pub fn ready_at(mut self, at: String) -> Self {
        self.ready_at = Some(at);
        self
    }
}

/// One event of a job's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The job.
    pub job_id: i64,
    /// 1, 2, 3... per job.
    pub seq: i64,
    /// When.
    pub at: String,
    /// What happened.
    pub kind: String,
    /// Its details.
    pub data: Value,
}

/// `GET /v1/jobs/{id}/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Events {
    /// The events, oldest first.
    pub events: Vec<Event>,
}

/// `POST /v1/jobs/{id}/events`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Appended {
    /// The job.
    pub job_id: i64,
    /// The new event's number.
    pub seq: i64,
}

/// One queue in `GET /v1/stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    /// Jobs per state (every state, zero included).
    #[serde(flatten)]
    pub counts: BTreeMap<String, u64>,
    /// How long the oldest due job has waited to be leased.
    pub oldest_ready_age_ms: Option<u64>,
    /// No job of the queue is leased while true.
    pub paused: bool,
    /// At most this many of its jobs LEASED at once.
    pub max_leased: Option<u32>,
    /// Its rate limit.
    pub rate_limit: Option<Rate>,
}

/// `GET /v1/stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Every queue that has jobs or settings.
    pub queues: BTreeMap<String, QueueStats>,
}

/// A queue after `pause` or `resume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePaused {
    /// The queue.
    pub queue: String,
    /// Whether it is paused now.
    pub paused: bool,
}

/// A queue's limits after `PUT /v1/queues/{queue}/limits`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueLimits {
    /// The queue.
    pub queue: String,
    /// At most this many of its jobs LEASED at once.
    pub max_leased: Option<u32>,
    /// Its rate limit.
    pub rate_limit: Option<Rate>,
}

/// A bulk action's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkDone {
    /// The action taken.
    pub action: String,
    /// How many jobs it changed.
    pub count: u64,
}

/// DEAD jobs of one queue and kind that failed with the same first line of error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadGroup {
    /// Their queue.
    pub queue: String,
    /// Their kind.
    pub kind: String,
    /// The first line of their last error.
    pub error: String,
    /// How many.
    pub count: u64,
    /// The newest of them.
    pub newest: i64,
    /// When the newest died.
    pub last_at: String,
}

/// `GET /v1/dead`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadGroups {
    /// The groups, largest first.
    pub groups: Vec<DeadGroup>,
}

/// The job a schedule's ticks enqueue, as answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduledJob {
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: String,
    /// Its payload as JSON (`Some(Null)`: none); absent when it is bytes.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// Its payload as base64, when it is not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
    /// 0-3.
    pub priority: u8,
    /// Attempts before it is DEAD.
    pub max_attempts: u32,
}

/// A schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Its name.
    pub name: String,
    /// Its cron expression (or none, for an interval).
    pub cron: Option<String>,
    /// The cron expression's time zone.
    pub tz: Option<String>,
    /// Its interval (or none, for cron).
    pub every_ms: Option<u64>,
    /// The job each tick enqueues.
    pub job: ScheduledJob,
    /// Its ticks enqueue nothing while true.
    pub paused: bool,
    /// When it was added (or last replaced).
    pub created_at: String,
    /// Its next tick.
    pub next_at: String,
    /// Its latest tick, once it has ticked.
    pub last_at: Option<String>,
}

/// `GET /v1/schedules`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedules {
    /// Every schedule, by name.
    pub schedules: Vec<Schedule>,
}

/// A schedule's removal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRemoved {
    /// Its name.
    pub name: String,
    /// Always true.
    pub deleted: bool,
}

/// Every error answer: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// An error's code (e.g. `lease_lost`, `not_found`, `invalid_input`) and
/// message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Stable: what to branch on.
    pub code: String,
    /// For people: what went wrong and what to do.
    pub message: String,
}
