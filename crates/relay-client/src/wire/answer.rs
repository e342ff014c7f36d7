//! The answers the server sends.

use super::{present, BulkAction, Bytes, JsonText, Keep, Rate, Retention, State};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A submit's answer: the job's id, and `existing` when an unfinished job
/// already held its unique key (nothing was written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Submitted {
    /// The job's id.
    pub id: i64,
    /// True when the id is of a job that already held the unique key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub existing: bool,
}

/// A batch submit's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SubmittedBatch {
    /// The jobs' ids, in the order given.
    pub ids: Vec<i64>,
    /// The ids of those found rather than written (an unfinished job held
    /// the unique key, or an earlier submit carried the idempotency key),
    /// in the same order; empty when every job is new. The answer is 200
    /// when every job was found, 201 otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub existing: Vec<i64>,
}

/// A job, as `GET /v1/jobs/{id}` and the list answer it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Job {
    /// Its id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: String,
    /// Its state.
    pub state: State,
    /// 0-3.
    pub priority: u8,
    /// Attempts so far.
    pub attempts: u32,
    /// Attempts before it is DEAD.
    pub max_attempts: u32,
    /// When it is (or was) due.
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub ready_at: String,
    /// When it was submitted.
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub created_at: String,
    /// When it finished, once it has.
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub finished_at: Option<String>,
    /// Its unique key.
    pub unique_key: Option<String>,
    /// Its latest lease's token (0 before any).
    pub lease_token: i64,
    /// When its lease expires, while LEASED.
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
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
    /// What its handler last reported of its run; absent until one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// The group it belongs to; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The steps its handlers recorded, in the order they were recorded;
    /// absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    /// What it waits for while WAITING (`GET /v1/jobs/{id}` only); absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<WaitingFor>,
    /// Its payload: the JSON value stored (null: none); absent when the
    /// bytes are not JSON (then `payload_base64`).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub payload: Option<JsonText>,
    /// Its payload as base64, when it is not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
    /// Its result: the JSON value stored (null: none); absent when the
    /// bytes are not JSON (then `result_base64`).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub result: Option<JsonText>,
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

/// What a job's handler last reported of its run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Progress {
    /// From 0 (started) to 1 (done).
    pub fraction: f64,
    /// What the handler said it is doing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it reported it.
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub at: String,
    /// The attempt that reported it.
    pub attempt: u32,
    /// The token of the lease that reported it: a report left over from an
    /// earlier run (its token not the job's `lease_token`) stays until the
    /// next one reports.
    pub token: i64,
}

/// What a WAITING job waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WaitingFor {
    /// `jobs` (its dependencies: `count`), `join` (a job it joined:
    /// `job`), `event` (`key`), `token` (a completion token: `token`, its
    /// id) or `sleep`.
    pub kind: String,
    /// `jobs`: how many have not ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// `join`: the job awaited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<i64>,
    /// `event`: its key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `token`: the completion token's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The wait's step (`join`, `event`, `token`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// Until when (`event`, `token`: the wait gives up; `sleep`: it wakes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub until: Option<String>,
}

/// A step a job's handler recorded: a later attempt returns its output
/// instead of running it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Step {
    /// The handler's name for it.
    pub name: String,
    /// The attempt that recorded it.
    pub attempt: u32,
    /// When it was recorded.
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub at: String,
    /// Bytes of its output.
    pub bytes: u64,
    /// Its output: the JSON value recorded (null: none); absent when the
    /// bytes are not JSON (then `output_base64`).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub output: Option<JsonText>,
    /// Its output as base64, when it is not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_base64: Option<String>,
}

impl Step {
    /// The output's bytes.
    ///
    /// # Errors
    ///
    /// `output_base64` is not base64.
    pub fn output(&self) -> Result<Bytes, String> {
        Bytes::from_pair(self.output.as_ref(), self.output_base64.as_deref())
    }
}

/// What `POST /v1/jobs/{id}/steps` did: `recorded` when this record was
/// taken, else the record of the name that stood already (the first record
/// of a name wins), whose output the handler goes on with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct StepRecorded {
    /// True when this record was taken; false when `earlier` stands.
    pub recorded: bool,
    /// The record that stood already, when this one was not taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier: Option<Step>,
}

/// What `POST /v1/events/{key}` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Emitted {
    /// This was the key's first emit, kept 7 days; a later emit of the key
    /// changes nothing.
    pub first: bool,
    /// Jobs it woke: each was waiting for the key, and has its payload
    /// recorded.
    pub woken: u32,
}

/// `POST /v1/jobs/{id}/tokens`'s answer: a completion token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TokenCreated {
    /// Its public id.
    pub id: String,
    /// What completes it (`<id>.<secret>`): whoever holds it may complete
    /// the token once, without an API token.
    pub token: String,
    /// The path that completes it (`POST`, below the server's address).
    pub path: String,
    /// The event key its completion emits (what a job waits for).
    pub key: String,
    /// When it expires.
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub expires_at: String,
}

/// A page of `GET /v1/jobs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct JobPage {
    /// The jobs, newest first.
    pub jobs: Vec<Job>,
    /// The next page's `before`; none on the last page.
    pub next: Option<i64>,
}

/// A leased job, as a worker receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub lease_expires_at: String,
    /// This lease's length.
    pub lease_for_ms: u64,
    /// Its attempt timeout.
    pub timeout_ms: Option<u64>,
    /// The trace context it continues.
    pub traceparent: Option<String>,
    /// Its group (tenant), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The steps earlier runs recorded (a handler returns their outputs
    /// instead of running them again); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
    /// Its payload: the JSON value stored (null: none); absent when the
    /// bytes are not JSON (then `payload_base64`).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub payload: Option<JsonText>,
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Leased {
    /// The jobs leased (none when none was ready in time).
    pub jobs: Vec<LeasedJob>,
}

/// What a call on one job did: its id and whatever the call changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Changed {
    /// The job's id.
    pub id: i64,
    /// Its state after the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<State>,
    /// When it is due again (a nack that retries, a snooze).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub ready_at: Option<String>,
    /// The lease's new expiry (an extend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
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
    pub fn in_state(id: i64, state: State) -> Self {
        Self {
            state: Some(state),
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Event {
    /// The job.
    pub job_id: i64,
    /// 1, 2, 3... per job.
    pub seq: i64,
    /// When.
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub at: String,
    /// What happened.
    pub kind: String,
    /// Its details.
    pub data: Value,
}

/// `GET /v1/jobs/{id}/events`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Events {
    /// The events, oldest first: a page of at most the query's `limit`
    /// and 4 MiB.
    pub events: Vec<Event>,
    /// The next page's `after`; none on the last page.
    #[serde(default)]
    pub next: Option<i64>,
}

/// `POST /v1/jobs/{id}/events`'s answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Appended {
    /// The job.
    pub job_id: i64,
    /// The new event's number.
    pub seq: i64,
}

/// One queue in `GET /v1/stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// Its own poison-pill threshold: a job whose lease expires this many
    /// times is DEAD (absent: the server's default, 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poison_after: Option<u32>,
    /// At most this many jobs of one group LEASED at once (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_leased_per_group: Option<u32>,
}

/// `GET /v1/stats`: a page of queues, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Stats {
    /// The page's queues (with jobs, paused or limited).
    pub queues: BTreeMap<String, QueueStats>,
    /// The next page's `after`; none on the last page.
    #[serde(default)]
    pub next: Option<String>,
    /// Every queue at once, on the first page (no `after`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub totals: Option<Totals>,
}

/// Counts over every queue at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Totals {
    /// Jobs per state (every state, zero included).
    pub jobs: BTreeMap<String, u64>,
    /// Queues with jobs, paused or limited.
    pub queues: u64,
    /// Paused queues.
    pub paused: u64,
}

/// `GET /v1/queues`: a page of queue names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QueueNames {
    /// The page's queues (with jobs, paused or limited), in byte order.
    pub queues: Vec<String>,
    /// The next page's `after`; none on the last page.
    #[serde(default)]
    pub next: Option<String>,
}

/// One queue: `GET /v1/queues/{queue}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QueueInfo {
    /// The queue.
    pub queue: String,
    /// Its counts by state, and its settings.
    #[serde(flatten)]
    pub stats: QueueStats,
}

/// A queue after `pause` or `resume`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QueuePaused {
    /// The queue.
    pub queue: String,
    /// Whether it is paused now.
    pub paused: bool,
}

/// A queue's limits after `PUT /v1/queues/{queue}/limits`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QueueLimits {
    /// The queue.
    pub queue: String,
    /// At most this many of its jobs LEASED at once.
    pub max_leased: Option<u32>,
    /// Its rate limit.
    pub rate_limit: Option<Rate>,
    /// A job whose lease expires this many times is DEAD (null: the
    /// server's default, 3).
    #[serde(default)]
    pub poison_after: Option<u32>,
    /// At most this many jobs of one group LEASED at once (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_leased_per_group: Option<u32>,
}

/// A queue's retention: `GET` and `PUT /v1/queues/{queue}/retention`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct QueueRetention {
    /// The queue.
    pub queue: String,
    /// Its own retention (a state null follows the server's default).
    pub own: Retention,
    /// What the prune keeps of it: its own, else the server's default.
    pub effective: Kept,
}

/// How long each final state's jobs are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Kept {
    /// SUCCEEDED jobs.
    pub succeeded: Keep,
    /// DEAD jobs.
    pub dead: Keep,
    /// CANCELLED jobs.
    pub cancelled: Keep,
}

/// One pass of the prune: `POST /v1/prune`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Pruned {
    /// Finished jobs it deleted, with their events.
    pub deleted: u64,
    /// The next pass's `after`; null once the pass reached the table's end.
    pub next: Option<i64>,
}

/// A bulk action's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BulkDone {
    /// The action taken.
    pub action: BulkAction,
    /// How many jobs it changed.
    pub count: u64,
}

/// DEAD jobs of one queue and kind that failed with the same first line of error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub last_at: String,
}

/// `GET /v1/dead`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DeadGroups {
    /// The groups, largest first.
    pub groups: Vec<DeadGroup>,
}

/// The job a schedule's ticks enqueue, as answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScheduledJob {
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: String,
    /// Its payload: the JSON value stored (null: none); absent when the
    /// bytes are not JSON (then `payload_base64`).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub payload: Option<JsonText>,
    /// Its payload as base64, when it is not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_base64: Option<String>,
    /// 0-3.
    pub priority: u8,
    /// Attempts before it is DEAD.
    pub max_attempts: u32,
    /// Its group (a tenant), if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

impl ScheduledJob {
    /// The payload's bytes.
    ///
    /// # Errors
    ///
    /// `payload_base64` is not base64.
    pub fn payload(&self) -> Result<Bytes, String> {
        Bytes::from_pair(self.payload.as_ref(), self.payload_base64.as_deref())
    }
}

/// A schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub created_at: String,
    /// Its next tick.
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub next_at: String,
    /// Its latest tick, once it has ticked.
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub last_at: Option<String>,
}

/// `GET /v1/schedules`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Schedules {
    /// Every schedule, by name.
    pub schedules: Vec<Schedule>,
}

/// A schedule's removal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ScheduleRemoved {
    /// Its name.
    pub name: String,
    /// Always true.
    pub deleted: bool,
}

/// Every error answer: `{"error": {"code", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// An error's code (e.g. `lease_lost`, `not_found`, `invalid_input`) and
/// message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ErrorDetail {
    /// Stable: what to branch on.
    pub code: ErrorCode,
    /// For people: what went wrong and what to do.
    pub message: String,
}

/// What went wrong, as the server's error answers name it
/// (`{"error": {"code": "lease_lost", ...}}`): stable, what to branch on.
/// Only `maybe_applied` (and a timeout or a broken connection on the
/// client's side) leaves a write's fate open; every other error changed
/// nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// The request does not fit the call (400): a body, query or path that
    /// does not parse, a field out of range.
    InvalidRequest,
    /// A value breaks one of Relay's limits (400): a queue name, a payload
    /// size, a priority.
    InvalidInput,
    /// No valid token (401).
    Unauthorized,
    /// Refused whatever the token (403): a cross-site or non-JSON change to
    /// a server without tokens, a host name that is not loopback.
    Forbidden,
    /// No such job or schedule (404).
    NotFound,
    /// A job named in `depends_on` does not exist (404).
    DependencyNotFound,
    /// No such endpoint (404).
    NoRoute,
    /// The token is not the job's current lease (409): another worker may
    /// hold it.
    LeaseLost,
    /// The job's state does not allow the call (409).
    InvalidState,
    /// Another unfinished job holds the unique key (409).
    Conflict,
    /// A step record would take the job past its 1,000 steps or 1 MiB of
    /// step output (409): nothing was recorded.
    StepBound,
    /// No completion token has this id and secret (404).
    TokenUnknown,
    /// The completion token was completed already (409): the first
    /// completion stands.
    TokenUsed,
    /// The completion token expired (410): its job stopped waiting.
    TokenExpired,
    /// The completion token's job has ended (409): nothing waits for it.
    TokenClosed,
    /// The body is over the server's limit (413).
    PayloadTooLarge,
    /// Too many lease requests are waiting (429): retry shortly.
    TooManyWaiting,
    /// The store is busy (503): nothing applied, retry.
    Busy,
    /// The server is shutting down (503): nothing applied.
    Closed,
    /// A read took longer than the request deadline (503).
    Timeout,
    /// The store failed (503): nothing applied.
    Storage,
    /// A stored row does not decode (500).
    Corrupt,
    /// The change may or may not be on disk (a failed commit or fsync, or a
    /// change cut off by the request deadline): read it back, or retry a
    /// submit that carries an idempotency key.
    MaybeApplied,
    /// The answer was not Relay's (a proxy's page, an empty body): only its
    /// status says what happened. Never sent by a server; set by clients.
    #[cfg_attr(feature = "schema", schemars(skip))]
    Http,
    /// A code this build does not know (a newer server).
    #[serde(other)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    Other,
}

impl ErrorCode {
    /// The code as the server spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::InvalidInput => "invalid_input",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::DependencyNotFound => "dependency_not_found",
            Self::NoRoute => "no_route",
            Self::LeaseLost => "lease_lost",
            Self::InvalidState => "invalid_state",
            Self::Conflict => "conflict",
            Self::StepBound => "step_bound",
            Self::TokenUnknown => "token_unknown",
            Self::TokenUsed => "token_used",
            Self::TokenExpired => "token_expired",
            Self::TokenClosed => "token_closed",
            Self::PayloadTooLarge => "payload_too_large",
            Self::TooManyWaiting => "too_many_waiting",
            Self::Busy => "busy",
            Self::Closed => "closed",
            Self::Timeout => "timeout",
            Self::Storage => "storage",
            Self::Corrupt => "corrupt",
            Self::MaybeApplied => "maybe_applied",
            Self::Http => "http",
            Self::Other => "other",
        }
    }

    /// Every code a server sends, for documents and tests.
    pub const SERVER: [ErrorCode; 23] = [
        Self::InvalidRequest,
        Self::InvalidInput,
        Self::Unauthorized,
        Self::Forbidden,
        Self::NotFound,
        Self::DependencyNotFound,
        Self::NoRoute,
        Self::LeaseLost,
        Self::InvalidState,
        Self::Conflict,
        Self::StepBound,
        Self::TokenUnknown,
        Self::TokenUsed,
        Self::TokenExpired,
        Self::TokenClosed,
        Self::PayloadTooLarge,
        Self::TooManyWaiting,
        Self::Busy,
        Self::Closed,
        Self::Timeout,
        Self::Storage,
        Self::Corrupt,
        Self::MaybeApplied,
    ];
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    /// Each code reads and writes as it spells itself, and an unknown one
    /// (a newer server's) reads as `Other`.
    #[test]
    fn error_codes_spell_themselves() {
        for code in ErrorCode::SERVER.into_iter().chain([ErrorCode::Http]) {
            let text = serde_json::to_string(&code).unwrap();
            assert_eq!(text, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<ErrorCode>(&text).unwrap(), code);
        }
        assert_eq!(
            serde_json::from_str::<ErrorCode>("\"new_in_v9\"").unwrap(),
            ErrorCode::Other
        );
    }
}
