//! The seam between Relay's engine and the stores that keep its jobs.
//!
//! The engine (one writer thread per process, group commit, replies,
//! wake-ups) is written once, in the `relay` crate. A store only knows how to
//! run primitive, entity + verb statements inside one transaction:
//! [`Store`] for the writer, [`StoreReader`] for read connections, and a
//! [`Backend`] that opens both. Every decision (which job a claim takes, what
//! a nack does) is made by `relay_core` and by the engine's operations, so a
//! second store (PostgreSQL) implements these traits and nothing else.
//!
//! This crate is internal: its traits may change with the engine.
//!
//! - [`Store`]: transaction control and the job/event primitives.
//! - [`StoreReader`]: reads beside the writer.
//! - [`StoreError`]: what a store can report, driver errors kept as sources.
//! - [`Event`], [`QueueStats`], [`JobFilter`]: read models.

use relay_core::{Candidate, Job, JobId, JobState, JobStatus, LeaseToken, Priority, Timestamp};
use std::collections::BTreeMap;
use std::time::Duration;

pub mod decode;
mod error;
pub use error::StoreError;

/// A new job, as the engine hands it to [`Store::job_insert`].
#[derive(Debug, Clone, Copy)]
pub struct JobInsert<'a> {
    pub queue: &'a str,
    pub kind: &'a str,
    pub payload: &'a [u8],
    pub priority: Priority,
    pub unique_key: Option<&'a str>,
    pub created_at: Timestamp,
    pub status: &'a JobStatus,
    /// The job's first event (number 1), written with it.
    pub event: Option<EventWrite<'a>>,
}

/// A guarded status write: it applies only while the stored job is still in
/// `expect_state` with `expect_token` as its latest token.
#[derive(Debug, Clone, Copy)]
pub struct JobSetStatus<'a> {
    pub id: JobId,
    pub expect_state: JobState,
    pub expect_token: LeaseToken,
    pub status: &'a JobStatus,
    /// Replaces the job's result when `Some`.
    pub result: Option<&'a [u8]>,
}

/// Most expired leases one call to `Store::job_expired_leases` returns.
pub const REAP_BATCH: usize = 256;

/// An event to append with a transition.
#[derive(Debug, Clone, Copy)]
pub struct EventWrite<'a> {
    pub at: Timestamp,
    pub kind: &'a str,
    /// JSON text.
    pub data: &'a str,
}

/// One row of a job's event log.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Event {
    pub job_id: JobId,
    /// 1, 2, 3... per job, in the order the events were appended.
    pub seq: i64,
    pub at: Timestamp,
    pub kind: String,
    pub data: serde_json::Value,
}

/// Counts of one queue's jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueStats {
    /// Jobs per state; every state is present, zero when empty.
    pub counts: BTreeMap<JobState, u64>,
    /// How long the oldest job that is due has been waiting to be leased.
    pub oldest_ready_age: Option<Duration>,
}

/// Which jobs a listing returns, newest first.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub queue: Option<String>,
    pub state: Option<JobState>,
    /// Only jobs with an id below this (for paging).
    pub before: Option<JobId>,
    pub limit: u32,
}

/// The writer's connection: used by one thread, inside transactions the
/// engine opens and closes.
///
/// Every method but `begin` runs inside the current transaction. A failed
/// statement changes nothing (the store undoes it); the engine isolates one
/// operation from another with [`Store::changes`] (see the engine's docs).
pub trait Store: Send {
    /// Starts the batch's transaction, taking the store's write lock (waiting
    /// up to the busy timeout for other processes).
    fn begin(&mut self) -> Result<(), StoreError>;
    /// Ends the batch's transaction. An error here means "maybe applied".
    /// Durable on return unless the store has a [`Store::syncer`]: then
    /// the commit is only written, and durable once a later
    /// [`Syncer::sync`] returns.
    fn commit(&mut self) -> Result<(), StoreError>;
    /// Where a store splits its commit in two (write now, make durable
    /// later), the handle that does the second half from another thread, so
    /// the writer can apply the next batch while the disk flushes this one.
    /// `None` (the default): [`Store::commit`] is durable by itself.
    fn syncer(&self) -> Option<std::sync::Arc<dyn Syncer>> {
        None
    }
    fn rollback(&mut self) -> Result<(), StoreError>;
    /// True where a failed commit (other than busy or disk full) may leave
    /// what this process reads ahead of what is on disk: a local file,
    /// whose failed writeback Linux reports once and then forgets. The
    /// engine then stops writing and reading, as after a failed
    /// [`Syncer::sync`]. `false` (the default): the store recovers by
    /// itself (PostgreSQL handles its own fsync failures).
    fn failed_commit_is_final(&self) -> bool {
        false
    }
    /// True where `Busy` means a transient conflict with another process
    /// that a new attempt resolves at once (PostgreSQL's deadlocks and
    /// serialization failures): the engine then applies the batch again.
    /// `false` (the default): `Busy` already waited its busy timeout.
    fn busy_is_transient(&self) -> bool {
        false
    }
    /// Rows inserted, updated or deleted by this connection so far; a
    /// statement that failed adds nothing.
    fn changes(&self) -> u64;

    /// Inserts a new job and, when given, its first event.
    fn job_insert(&mut self, job: &JobInsert<'_>) -> Result<JobId, StoreError>;
    /// The unfinished (READY or LEASED) job holding `key`, if any.
    fn job_find_active_by_key(&mut self, key: &str) -> Result<Option<JobId>, StoreError>;
    /// Job `id`'s unique key and the other unfinished job holding it now,
    /// if any (what a retry of a finished job checks before it writes).
    fn job_key_holder(&mut self, id: JobId) -> Result<Option<(String, JobId)>, StoreError>;
    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError>;
    fn job_get_status(&mut self, id: JobId) -> Result<Option<JobStatus>, StoreError>;
    /// A guarded status write and, when it matched, its event: `false` (and
    /// nothing written) when the guard did not match. Stores may do both in
    /// one statement (PostgreSQL does: one round trip fewer per transition).
    fn job_transition(&mut self, p: &JobSetStatus<'_>, event: Option<EventWrite<'_>>) -> Result<bool, StoreError>;
    /// Removes a job and its events.
    fn job_delete(&mut self, id: JobId) -> Result<bool, StoreError>;
    /// The oldest READY job of each priority class in `queue` whose
    /// `ready_at` is at or before `now`: at most four, one index probe each.
    fn job_ready_heads(&mut self, queue: &str, now: Timestamp) -> Result<Vec<Candidate>, StoreError>;
    /// The oldest due READY job of one class of `queue` (one probe): what a
    /// claim needs after taking that class's head.
    fn job_ready_head(
        &mut self,
        queue: &str,
        priority: Priority,
        now: Timestamp,
    ) -> Result<Option<Candidate>, StoreError> {
        Ok(self
            .job_ready_heads(queue, now)?
            .into_iter()
            .find(|c| c.priority == priority))
    }
    /// The earliest `ready_at` after `now` among READY jobs of `queue`.
    fn job_next_ready_at(&mut self, queue: &str, now: Timestamp) -> Result<Option<Timestamp>, StoreError>;
    /// LEASED jobs whose lease expired at or before `now`, oldest expiry
    /// first, at most [`REAP_BATCH`] of them.
    fn job_expired_leases(&mut self, now: Timestamp) -> Result<Vec<JobId>, StoreError>;
    /// Deletes up to 1000 finished jobs (SUCCEEDED, DEAD, CANCELLED) that
    /// finished before `before`, with their events; returns how many.
    fn job_prune(&mut self, before: Timestamp) -> Result<u64, StoreError>;
    fn event_append(&mut self, job: JobId, at: Timestamp, kind: &str, data: &str) -> Result<i64, StoreError>;
    /// Tells other processes, when this transaction commits, that jobs
    /// became ready (PostgreSQL: NOTIFY). A no-op where nobody can listen.
    fn notify_ready(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Makes durable everything its store had committed when `sync` was
/// called: commits are written in order, so one sync covers every commit
/// before it (the second half of a split commit, see [`Store::syncer`]).
pub trait Syncer: Send + Sync {
    /// An error means the disk may have dropped written commits: the
    /// engine answers their callers "maybe applied" and writes nothing more.
    fn sync(&self) -> Result<(), StoreError>;
}

/// A read connection, used beside the writer.
pub trait StoreReader: Send {
    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError>;
    fn job_list(&mut self, filter: &JobFilter) -> Result<Vec<Job>, StoreError>;
    /// Events with `seq > after`, in order, at most `limit`.
    fn job_events(&mut self, id: JobId, after: i64, limit: u32) -> Result<Vec<Event>, StoreError>;
    fn queue_stats(&mut self, now: Timestamp) -> Result<BTreeMap<String, QueueStats>, StoreError>;
}

/// Opens a store's connections.
pub trait Backend: Send + Sync {
    fn open_writer(&self) -> Result<Box<dyn Store>, StoreError>;
    fn open_reader(&self) -> Result<Box<dyn StoreReader>, StoreError>;
    /// A short description for logs and errors (a path, a URL without password).
    fn describe(&self) -> String;
    /// A sync or commit failed in a way that leaves this process's view of
    /// the data possibly ahead of the disk (see
    /// [`Store::failed_commit_is_final`]): refuse to open the store again
    /// in this process. A no-op where a reopen is safe (the default).
    fn quarantine(&self) {}
    /// A flag shared by every handle of this process on the same store,
    /// set when one of them quarantines it: the others then stop too
    /// (`None`: nothing to share, the default). Read after the writer is
    /// opened (the file exists then).
    fn failure_flag(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        None
    }
    /// Calls `wake` whenever another process reports ready jobs (see
    /// [`Store::notify_ready`]), until the returned guard is dropped. `None`
    /// where the store has no such channel (waiters then poll).
    fn watch_ready(&self, wake: Box<dyn Fn() + Send + Sync>) -> Result<Option<WatchGuard>, StoreError> {
        let _ = wake;
        Ok(None)
    }
}

/// Stops a [`Backend::watch_ready`] listener when dropped.
pub struct WatchGuard {
    stop: std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl WatchGuard {
    pub fn new(stop: impl FnOnce() + Send + 'static) -> Self {
        Self {
            stop: std::sync::Mutex::new(Some(Box::new(stop))),
        }
    }
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        let stop = self.stop.get_mut().ok().and_then(Option::take);
        if let Some(stop) = stop {
            stop();
        }
    }
}
