//! The bodies the server reads.

use super::{base64_pair, present, BulkAction, DependencyFailure, State};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// A job to submit (`POST /v1/jobs`, and each of `POST /v1/jobs/batch`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend(
    "not" = {"required": ["payload", "payload_base64"]},
    "allOf" = [
        // A throttle (not null) needs a unique key (not null).
        {"anyOf": [
            {"not": {"required": ["throttle_ms"]}},
            {"properties": {"throttle_ms": {"enum": [null]}}},
            {"required": ["unique_key"], "properties": {"unique_key": {"type": "string"}}}
        ]},
        // A debounce (not null) needs a unique key, and sets the run time
        // itself: no throttle, delay or run_at with it.
        {"anyOf": [
            {"not": {"required": ["debounce_ms"]}},
            {"properties": {"debounce_ms": {"enum": [null]}}},
            {"required": ["unique_key"], "properties": {
                "unique_key": {"type": "string"},
                "throttle_ms": {"enum": [null]},
                "delay_ms": {"enum": [null, 0]},
                "run_at": {"enum": [null]}
            }}
        ]}
    ]
)))]
pub struct NewJob {
    /// The queue (1-64 of A-Z a-z 0-9 _ . -).
    #[cfg_attr(feature = "schema", schemars(pattern(r"^[A-Za-z0-9_.-]{1,64}$")))]
    pub queue: String,
    /// What the job is: the handler that runs it.
    #[cfg_attr(feature = "schema", schemars(pattern(r"^[^\u0000-\u001f\u007f-\u009f]{1,64}$")))]
    pub kind: String,
    /// Any JSON value, stored as its JSON text as sent (whitespace between
    /// tokens dropped); null: no payload. Not with `payload_base64`.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<serde_json::Value>"))]
    pub payload: Option<Box<RawValue>>,
    /// Bytes, base64; `Some(None)` when given as null.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>", extend("format" = "byte")))]
    pub payload_base64: Option<Option<String>>,
    /// 0 (least urgent) to 3 (most urgent); 1 when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = 3)))]
    pub priority: Option<u8>,
    /// Not leased before this many milliseconds from now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = super::MAX_MS)))]
    pub delay_ms: Option<u64>,
    /// Not leased before this moment (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub run_at: Option<String>,
    /// Attempts before the job is DEAD.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1000)))]
    pub max_attempts: Option<u32>,
    /// While a job with this key is unfinished, a submit of it answers that job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 256)))]
    pub unique_key: Option<String>,
    /// Makes the submit safe to repeat: for 24 h (the Relay's
    /// `Options::idempotency_keep`), a submit with this key again answers
    /// the first one's job (`existing`) and creates nothing. The
    /// `Idempotency-Key` header says the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 256)))]
    pub idempotency_key: Option<String>,
    /// At most one job per `unique_key` per this many milliseconds: within
    /// it a throttled submit of the key answers the job (`existing`), even
    /// once it has finished. Needs `unique_key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 2_592_000_000u64)))]
    pub throttle_ms: Option<u64>,
    /// Runs the job this many milliseconds after the last submit of its
    /// `unique_key`: while the key's job (of the same queue and kind) has
    /// not started, a debounced submit replaces its payload and moves its
    /// run time to now + this
    /// (answering the job, `existing`). Needs `unique_key`; not with
    /// `throttle_ms`, `delay_ms` or `run_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 2_592_000_000u64)))]
    pub debounce_ms: Option<u64>,
    /// Each lease of the job lasts this long, whatever the lease asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 86_400_000)))]
    pub lease_for_ms: Option<u64>,
    /// Workers give up on an attempt after this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 86_400_000)))]
    pub timeout_ms: Option<u64>,
    /// The job waits until these jobs have succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 10_000), inner(range(min = 1, max = i64::MAX))))]
    pub depends_on: Option<Vec<i64>>,
    /// What happens to the job when one it depends on ends DEAD or
    /// CANCELLED (cancel it, the default, or run it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_dependency_failure: Option<DependencyFailure>,
    /// The W3C trace context the job continues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(pattern(r"^00-(?!0{32}-)[0-9a-f]{32}-(?!0{16}-)[0-9a-f]{16}-[0-9a-f]{2}$"))
    )]
    pub traceparent: Option<String>,
    /// Short labels to search by (at most 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = 8), inner(pattern(r"^[^\u0000-\u001f\u007f-\u009f,]{1,64}$")))
    )]
    pub tags: Option<Vec<String>>,
    /// The group (a tenant) the job belongs to: its queue's claims take
    /// groups in turn, and `max_leased_per_group` bounds each group's
    /// leases.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 256)))]
    pub group: Option<String>,
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NewJobs {
    /// The jobs, in order.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 10_000)))]
    pub jobs: Vec<NewJob>,
}

/// `POST /v1/lease`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Lease {
    /// The queues to lease from (1-64).
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 64), inner(pattern(r"^[A-Za-z0-9_.-]{1,64}$")))
    )]
    pub queues: Vec<String>,
    /// Who holds the lease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(pattern(r"^[^\u0000-\u001f\u007f-\u009f]{1,64}$")))]
    pub worker: Option<String>,
    /// Lease up to this many jobs (1 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1000)))]
    pub max: Option<u32>,
    /// Each lease's length (30 s when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 86_400_000)))]
    pub lease_for_ms: Option<u64>,
    /// Wait this long for a job when none is ready (long poll; 0 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0)))]
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

/// `POST /v1/jobs/{id}/steps`: a lease holder records a step's output
/// (kept on the job; a later attempt is leased with it).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordStep {
    /// The lease's token.
    pub token: i64,
    /// The step's name, unique in the job.
    pub name: String,
    /// The output as a JSON value, kept as its JSON text.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub output: Option<Box<RawValue>>,
    /// The output as bytes, base64.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub output_base64: Option<Option<String>>,
}

impl RecordStep {
    /// A record of step `name` under `token` with `output`'s bytes (as a
    /// JSON value when they are JSON, else base64).
    pub fn new(token: i64, name: &str, output: &[u8]) -> Self {
        let (output, output_base64) = super::json_or_base64(output);
        Self {
            token,
            name: name.to_owned(),
            output,
            output_base64,
        }
    }
}

/// `POST /v1/jobs/{id}/tokens`: a completion token for the lease's holder.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// The lease's token.
    pub token: i64,
    /// How long the token is open (at most ten years: 3,660 days).
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 316_224_000_000u64)))]
    pub timeout_ms: u64,
}

/// `POST /v1/events/{key}`: an event, waking the jobs waiting for it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmitEvent {
    /// The payload as a JSON value, kept as its JSON text.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub payload: Option<Box<RawValue>>,
    /// The payload as bytes, base64.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<Option<String>>,
}

impl EmitEvent {
    /// An event carrying `payload`'s bytes (as a JSON value when they are
    /// JSON, else base64; none when empty).
    pub fn new(payload: &[u8]) -> Self {
        let (payload, payload_base64) = super::json_or_base64(payload);
        Self {
            payload,
            payload_base64,
        }
    }
}

/// `POST /v1/jobs/{id}/nack`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Nack {
    /// The lease's token.
    pub token: i64,
    /// What went wrong (kept as the job's last error).
    pub error: String,
    /// Retry after this long instead of the back-off policy's delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = super::MAX_MS)))]
    pub retry_in_ms: Option<u64>,
    /// No retry can fix it: DEAD now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub permanent: bool,
}

/// `POST /v1/jobs/{id}/extend`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Extend {
    /// The lease's token.
    pub token: i64,
    /// The lease's new length from now (30 s when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 86_400_000)))]
    pub lease_for_ms: Option<u64>,
}

/// `POST /v1/jobs/{id}/progress`: how far along a leased job is, kept on
/// the job and logged as a "progress" event.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ReportProgress {
    /// The lease's token.
    pub token: i64,
    /// From 0 (started) to 1 (done).
    #[cfg_attr(feature = "schema", schemars(range(min = 0.0, max = 1.0)))]
    pub fraction: f64,
    /// What the handler is doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 1024)))]
    pub message: Option<String>,
}

/// `POST /v1/jobs/{id}/release`: the job back to READY, the attempt not counted.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Release {
    /// The lease's token.
    pub token: i64,
    /// Snooze: READY again only after this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = super::MAX_MS)))]
    pub in_ms: Option<u64>,
}

/// `POST /v1/jobs/{id}/events`: a worker's own event on the job's log.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AppendEvent {
    /// What happened (e.g. `progress`).
    #[cfg_attr(feature = "schema", schemars(pattern(r"^[^\u0000-\u001f\u007f-\u009f]{1,64}$")))]
    pub kind: String,
    /// Its details: at most 4 KiB of JSON. A job's log takes appended
    /// events until it holds 10,000 events (400 `invalid_input` past
    /// either bound).
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
    /// Only jobs in this state (read in any case).
    #[serde(
        default,
        deserialize_with = "super::strict_state",
        skip_serializing_if = "Option::is_none"
    )]
    pub state: Option<State>,
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only this queue's jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(pattern(r"^[A-Za-z0-9_.-]{1,64}$")))]
    pub queue: Option<String>,
    /// Only jobs in this state (read in any case).
    #[serde(
        default,
        deserialize_with = "super::strict_state",
        skip_serializing_if = "Option::is_none"
    )]
    pub state: Option<State>,
    /// Only jobs of this kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(pattern(r"^[^\u0000-\u001f\u007f-\u009f]{1,64}$")))]
    pub kind: Option<String>,
    /// Only jobs carrying this tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(pattern(r"^[^\u0000-\u001f\u007f-\u009f,]{1,64}$")))]
    pub tag: Option<String>,
    /// Created at or after (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub since: Option<String>,
    /// Created before (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub until: Option<String>,
    /// Whose last error contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 256)))]
    pub error_contains: Option<String>,
    /// Only jobs with an id below this (the previous page's `next`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
    /// At most this many (1-1000; 50 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1000)))]
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
            state: self.state,
            kind: self.kind.clone(),
            tag: self.tag.clone(),
            since: self.since.clone(),
            until: self.until.clone(),
            error_contains: self.error_contains.clone(),
        }
    }
}

/// `POST /v1/jobs/bulk`: retry, cancel or delete every job a filter matches.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bulk {
    /// What to do to each job.
    pub action: BulkAction,
    /// Which jobs (at least one condition).
    pub filter: Filter,
}

/// A queue's limits (`PUT /v1/queues/{queue}/limits`, and in answers): a
/// limit left out (or null) is lifted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// At most this many of the queue's jobs LEASED at once.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1_000_000)))]
    pub max_leased: Option<u32>,
    /// At most `limit` leases per `per_ms`.
    #[serde(default)]
    pub rate_limit: Option<Rate>,
    /// A job whose lease expires this many times is DEAD (a poison pill);
    /// left out or null: the server's default (3); 0: expiries alone
    /// never make a job DEAD. Left out when `None`, so that a server
    /// older than the field takes the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = 1000)))]
    pub poison_after: Option<u32>,
    /// At most this many jobs of one group LEASED at once. Left out when
    /// `None`, as `poison_after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1_000_000)))]
    pub max_leased_per_group: Option<u32>,
}

/// A rate limit: `limit` leases per `per_ms` milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "RateLimit"))]
#[serde(deny_unknown_fields)]
pub struct Rate {
    /// Leases per window.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1_000_000)))]
    pub limit: u32,
    /// The window, in milliseconds.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 86_400_000)))]
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

/// `GET /v1/stats` and `GET /v1/queues`'s query: a page of queues, in byte
/// order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct QueuePage {
    /// Queues named after this one (the previous page's `next`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(pattern(r"^[A-Za-z0-9_.-]{0,64}$")))]
    pub after: Option<String>,
    /// At most this many (1-1000; 1000 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1000)))]
    pub limit: Option<u32>,
}

/// How long a finished job is kept: milliseconds after it finished (0: at
/// the next prune; at most ten years), or `"forever"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum Keep {
    /// Milliseconds after it finished.
    Ms(#[cfg_attr(feature = "schema", schemars(range(min = 0, max = 316_224_000_000u64)))] u64),
    /// Never deleted by the server.
    Forever(Forever),
}

/// `"forever"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Forever {
    /// Kept forever.
    Forever,
}

/// A queue's own retention, by final state (`PUT
/// /v1/queues/{queue}/retention`, and in answers, which leave out a state
/// the queue does not set): a state left out or null follows the server's
/// default (`relay serve --keep-succeeded` etc.; 7
/// days unless set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Retention {
    /// How long its SUCCEEDED jobs are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<Keep>,
    /// How long its DEAD jobs are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead: Option<Keep>,
    /// How long its CANCELLED jobs are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<Keep>,
}

/// `POST /v1/prune`: one pass of the prune, over the 5,000 jobs after
/// `after`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PruneFrom {
    /// The job id the pass begins after: the last answer's `next` (left
    /// out or 0: the table's start).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(min = 0)))]
    pub after: i64,
}
