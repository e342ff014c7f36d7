//! What a reader of the queue is answered: a job's events, a queue's
//! counts, a search, the dead-job groups and the throughput history. They
//! belong to the library (the `relay` crate re-exports them), not to the
//! store seam that fills them, so the seam may change without changing
//! them.

use crate::{JobId, JobState, QueueLimits, Retention, Timestamp};
use std::collections::BTreeMap;
use std::time::Duration;

/// One row of a job's event log.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Event {
    /// The job the event belongs to.
    pub job_id: JobId,
    /// 1, 2, 3... per job, in the order the events were appended.
    pub seq: i64,
    /// When it was appended.
    pub at: Timestamp,
    /// What happened: `submitted`, `leased`, `succeeded`, `failed`, `expired`,
    /// ... (the engine's), or a worker's own progress event.
    pub kind: String,
    /// Its details (`{}` when there are none).
    pub data: serde_json::Value,
}

/// Counts of one queue's jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueStats {
    /// Jobs per state; every state is present, zero when empty.
    pub counts: BTreeMap<JobState, u64>,
    /// How long the oldest job that is due has been waiting to be leased.
    pub oldest_ready_age: Option<Duration>,
    /// No job of the queue is leased until it is resumed.
    pub paused: bool,
    /// The queue's limits on leases (none by default).
    pub limits: QueueLimits,
    /// The queue's own retention (the engine's defaults by default).
    pub retention: Retention,
}

impl QueueStats {
    /// A queue with no jobs: every state counted at zero.
    pub fn empty() -> Self {
        Self {
            counts: JobState::ALL.iter().map(|s| (*s, 0)).collect(),
            oldest_ready_age: None,
            paused: false,
            limits: QueueLimits::default(),
            retention: Retention::default(),
        }
    }
}

/// Every queue at once: jobs per state, the queues [`QueueStats`] are kept
/// for (with jobs, paused or limited) and how many of them are paused.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueTotals {
    /// Jobs per state over every queue; every state is present.
    pub counts: BTreeMap<JobState, u64>,
    /// Queues with jobs, paused or limited.
    pub queues: u64,
    /// Paused queues.
    pub paused: u64,
}

/// Which jobs a search (or a bulk action) takes: every condition that is
/// set must hold. Newest first, a page of `limit` at a time; the next page
/// starts `before` the last id of this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFilter {
    /// Only this queue's jobs.
    pub queue: Option<String>,
    /// Only jobs in this state.
    pub state: Option<JobState>,
    /// Only jobs of this kind.
    pub kind: Option<String>,
    /// Jobs carrying this tag.
    pub tag: Option<String>,
    /// Created at or after.
    pub since: Option<Timestamp>,
    /// Created before.
    pub until: Option<Timestamp>,
    /// Whose last error contains this text (case-sensitive).
    pub error_contains: Option<String>,
    /// Only jobs with an id below this (the cursor of the next page).
    pub before: Option<JobId>,
    /// At most this many (at least 1; the HTTP API and the CLI take at
    /// most 1,000 a page).
    pub limit: u32,
}

impl Default for JobFilter {
    /// Every job, the newest 50.
    fn default() -> Self {
        Self {
            queue: None,
            state: None,
            kind: None,
            tag: None,
            since: None,
            until: None,
            error_contains: None,
            before: None,
            limit: 50,
        }
    }
}

/// DEAD jobs of one queue and kind that failed with the same error (its
/// first line): the dashboard's "dead jobs" groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadGroup {
    /// Their queue.
    pub queue: String,
    /// Their kind.
    pub kind: String,
    /// The first line of their last error.
    pub error: String,
    /// How many of the newest [`DEAD_GROUP_WINDOW`] DEAD jobs are in the group.
    pub count: u64,
    /// The newest of them.
    pub newest: JobId,
    /// When the newest of them died.
    pub last_at: Timestamp,
}

/// One queue's jobs in one minute: what the throughput chart draws. Kept
/// by the store with each batch (submits are its inserts), so it is right
/// after a restart and sums every process on the store.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Throughput {
    /// The minute's start.
    pub minute: Timestamp,
    /// The queue.
    pub queue: String,
    /// Jobs submitted in the minute.
    pub submitted: u64,
    /// Jobs acknowledged (SUCCEEDED) in the minute.
    pub succeeded: u64,
    /// Attempts that failed in the minute (a nack, a timeout, an expired
    /// lease), whether or not the job retries.
    pub failed: u64,
    /// Jobs that became DEAD in the minute.
    pub dead: u64,
}

/// A key WAITING jobs wait for now (`Relay::awaited_keys`, as a store
/// reads it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwaitedKey {
    /// The event's key (`token:<id>` for a completion token's).
    pub key: String,
    /// How many jobs wait for it.
    pub waiters: u64,
    /// The first of them, by id.
    pub first: JobId,
    /// The soonest time one of them gives up.
    pub until: Timestamp,
}

/// How many of the newest DEAD jobs the dead groups are made of: a bounded
/// read, however many jobs are DEAD (a group's count is of these).
pub const DEAD_GROUP_WINDOW: u32 = 10_000;
