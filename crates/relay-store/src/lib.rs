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
//! - [`Store`]: transaction control, the reads a batch plans with, and
//!   [`Store::apply`], which writes a planned batch ([`Changes`]).
//! - [`StoreReader`]: reads beside the writer.
//! - [`StoreError`]: what a store can report, driver errors kept as sources.
//! - [`Event`], [`QueueStats`], [`JobFilter`]: read models, `relay_core`'s
//!   (re-exported here), so that the seam can change without changing them.

use relay_core::{
    Candidate, DependencyFailure, Job, JobId, JobState, JobStatus, LeaseToken, Priority, QueueSettings, Schedule,
    Timestamp,
};
use std::collections::BTreeMap;
use std::time::Duration;

pub mod decode;
pub use relay_core::read::{
    AwaitedKey, DeadGroup, Event, JobFilter, QueueStats, QueueTotals, Throughput, DEAD_GROUP_WINDOW,
};
pub use relay_core::StoreError;

/// A job first written by this batch: its final state in the batch, under
/// an id reserved with [`Store::job_ids`].
#[derive(Debug, Clone, Copy)]
pub struct JobInsert<'a> {
    pub id: JobId,
    pub queue: &'a str,
    pub kind: &'a str,
    pub payload: &'a [u8],
    pub priority: Priority,
    pub unique_key: Option<&'a str>,
    pub created_at: Timestamp,
    pub status: &'a JobStatus,
    pub result: Option<&'a [u8]>,
    pub lease_for: Option<Duration>,
    pub timeout: Option<Duration>,
    pub traceparent: Option<&'a str>,
    pub tags: &'a [String],
    /// Its group (see `Job::group`); the store gives a grouped job its
    /// turn whenever it becomes READY.
    pub group: Option<&'a str>,
}

/// An existing job's new status. The guard (`expect_state`,
/// `expect_token`) is what the batch read: the store's row lock (or write
/// lock) keeps it true until the commit, so a write that does not match
/// means another writer broke that lock, and the batch fails.
#[derive(Debug, Clone, Copy)]
pub struct JobUpdate<'a> {
    pub id: JobId,
    pub expect_state: JobState,
    pub expect_token: LeaseToken,
    pub status: &'a JobStatus,
    /// Replaces the job's result when `Some`.
    pub result: Option<&'a [u8]>,
    /// What this batch counts for the job in the throughput history.
    pub tally: Tally,
}

/// A job's ends of attempts in one batch, for the throughput history
/// ([`StoreReader::throughput`]): the store adds them to the job's queue
/// in the batch's minute (it knows the queue; the batch may not have read
/// it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Acknowledged: SUCCEEDED.
    pub succeeded: u32,
    /// Attempts that failed (a nack, a lease that expired).
    pub failed: u32,
    /// Of those, the ones that left the job DEAD.
    pub dead: u32,
}

impl Tally {
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// Minutes of throughput history a store keeps (two days).
pub const THROUGHPUT_KEEP: Duration = Duration::from_secs(2 * 24 * 3600);

/// The start of `t`'s minute.
pub fn minute_of(t: Timestamp) -> Timestamp {
    Timestamp::from_millis(t.as_millis().div_euclid(60_000) * 60_000)
}

/// An event to append. Its number is `base + ord`, where `base` is the
/// job's last number before this batch: given when the batch read it (or
/// 0 for a job the batch inserts), else read by the store.
#[derive(Debug, Clone, Copy)]
pub struct EventRow<'a> {
    pub job: JobId,
    pub base: Option<i64>,
    /// 1, 2, 3... among this batch's events of `job`, in order.
    pub ord: i64,
    pub at: Timestamp,
    pub kind: &'a str,
    /// JSON text.
    pub data: &'a str,
}

/// A queue's settings as the batch leaves them: written whole (inserted,
/// or replacing what the store has).
#[derive(Debug, Clone, Copy)]
pub struct QueueWrite<'a> {
    pub name: &'a str,
    pub settings: &'a QueueSettings,
    pub at: Timestamp,
}

/// An edge of the dependency graph: `child` waits for `parent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dependent {
    pub parent: JobId,
    pub child: JobId,
    /// What the child does if `parent` ends DEAD or CANCELLED.
    pub on_failure: DependencyFailure,
}

/// One edge as [`Store::job_dependents`] read it (an error when its row
/// does not decode).
pub type DependentRead = Result<Dependent, StoreError>;

/// A schedule as the batch leaves it: written whole, or deleted (`None`).
#[derive(Debug, Clone, Copy)]
pub struct ScheduleWrite<'a> {
    pub name: &'a str,
    pub schedule: Option<&'a Schedule>,
}

/// A mark a batch writes: a value kept under a key until `expires_at`
/// (the job an idempotency key named, a dashboard session that ended).
/// Written whole, inserted or replacing an expired mark of the key; where
/// other processes write, a key another batch marked meanwhile fails the
/// write with [`StoreError::Busy`] (the batch is planned again and then
/// reads it).
#[derive(Debug, Clone, Copy)]
pub struct MarkWrite<'a> {
    pub key: &'a str,
    pub value: &'a str,
    pub expires_at: Timestamp,
}

/// Everything a batch writes, planned before anything is written (see the
/// engine's `plan` module), for [`Store::apply`] to write in a few
/// statements. Applied in this order: queue settings, schedules, deletes
/// (with their events, and the edges from them), the edges from settled
/// jobs, then updates (every
/// update that gives a finished job its unique key back comes after the
/// others, so a key released in the batch is free first), then inserts,
/// then dependency edges, then events.
#[derive(Debug, Default)]
pub struct Changes<'a> {
    pub queues: Vec<QueueWrite<'a>>,
    pub schedules: Vec<ScheduleWrite<'a>>,
    pub deletes: Vec<JobId>,
    pub updates: Vec<JobUpdate<'a>>,
    /// How many of `updates`, from the end, take a unique key back.
    pub updates_taking_keys: usize,
    pub inserts: Vec<JobInsert<'a>>,
    /// New edges (each child is a job of `inserts`).
    pub dependents: Vec<Dependent>,
    /// Jobs whose dependents this batch has told that they finished: the
    /// edges from them are deleted (a job retried and finished again must
    /// not count twice).
    pub settled: Vec<JobId>,
    pub events: Vec<EventRow<'a>>,
    pub marks: Vec<MarkWrite<'a>>,
    /// Jobs' waits for events this batch writes, each whole (a job waits
    /// for one at a time).
    pub waits: Vec<WaitWrite<'a>>,
    /// Jobs whose wait this batch ends (none of them in `waits`).
    pub waits_ended: Vec<JobId>,
    /// Fields of existing jobs this batch replaces besides their status
    /// (a debounced submit's payload, a holder's progress and steps), each job also
    /// in `updates`, whose guard keeps it as read.
    pub fields: Vec<FieldsWrite<'a>>,
    /// When the batch was planned: its minute is the one its tallies and
    /// inserts count in.
    pub at: Timestamp,
    /// Groups (queue, class, group) whose READY jobs this batch takes out
    /// of READY (leased, cancelled, made to wait, deleted), where the job's
    /// row was read, and groups whose head a claim found with no READY job
    /// it could lock ([`Turn::held`]): a store that keeps groups' heads
    /// apart from the job rows ([`Behaviour::group_heads`] on PostgreSQL)
    /// sees to their heads when the batch commits. Jobs entering READY are
    /// the store's own business (a trigger, whatever writes them).
    pub heads: Vec<(&'a str, Priority, &'a str)>,
    /// Jobs this batch takes out of READY whose row it did not read (so
    /// whose group it does not know): a store as for `heads` looks their
    /// groups up before it writes them.
    pub heads_unread: Vec<JobId>,
}

impl Changes<'_> {
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
            && self.schedules.is_empty()
            && self.deletes.is_empty()
            && self.updates.is_empty()
            && self.inserts.is_empty()
            && self.dependents.is_empty()
            && self.settled.is_empty()
            && self.events.is_empty()
            && self.marks.is_empty()
            && self.fields.is_empty()
            && self.waits.is_empty()
            && self.waits_ended.is_empty()
            && self.heads.is_empty()
            && self.heads_unread.is_empty()
    }
}

/// A job's wait for event `key` (issue 40): step `step` records what it
/// ends with; it gives up at `until`.
#[derive(Debug, Clone, Copy)]
pub struct WaitWrite<'a> {
    pub job: JobId,
    pub key: &'a str,
    pub step: &'a str,
    pub until: Timestamp,
}

/// A job's wait as stored: its event's key, its step, when it gives up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub key: String,
    pub step: String,
    pub until: Timestamp,
}

/// A kept mark as a page of them reads it ([`StoreReader::marks_page`]):
/// its key, its value (cut to the page's length) and when it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkRow {
    pub key: String,
    pub value: String,
    pub expires_at: Timestamp,
}

/// An existing job's new payload, progress and steps (each unchanged when
/// `None`; the progress as its stored text, see [`decode::progress_text`],
/// the steps as [`decode::steps_bytes`] writes them, all of them).
#[derive(Debug, Clone, Copy)]
pub struct FieldsWrite<'a> {
    pub id: JobId,
    pub payload: Option<&'a [u8]>,
    pub progress: Option<&'a str>,
    pub steps: Option<&'a [u8]>,
}

/// A READY job offered to a claim: its place in the queue, decoded
/// strictly, and the whole row where the store reads it with the
/// candidate (to save a round trip; an error when the rest does not
/// decode: a claim that picks it fails, as it would reading it alone).
#[derive(Debug)]
pub struct ReadyRow {
    pub candidate: Candidate,
    pub job: Option<Result<Job, StoreError>>,
    /// A grouped job's turn and group: it was read from the grouped jobs'
    /// classes, in `(turn, id)` order.
    pub turn: Option<Turn>,
}

/// Where a grouped READY job stands: claims take each class of a queue's
/// grouped jobs in `(turn, id)` order (see `Job::group`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    pub turn: i64,
    pub group: String,
    /// Read from a page of heads ([`Store::job_ready`],
    /// [`Store::job_fair_after`], where [`Behaviour::group_heads`]): the
    /// head's `(turn, id)`, the page's keyset. The row is the head itself,
    /// or, where another transaction holds the head, the first job of the
    /// head's group this one could lock (PostgreSQL). `None` for a row of
    /// a group's line ([`Store::job_group_next`]) or of a store without
    /// heads.
    pub head: Option<(i64, JobId)>,
    /// No job of the head's group could be locked (all held by other
    /// transactions): the row is the head's key only, and no candidate.
    pub held: bool,
}

impl Turn {
    /// A row of a group's line, or of a store without heads.
    pub fn new(turn: i64, group: String) -> Self {
        Turn {
            turn,
            group,
            head: None,
            held: false,
        }
    }
}

/// One job's status as [`Store::job_get_statuses`] read it (an error
/// when its row does not decode).
pub type StatusRead = (JobId, Result<JobStatus, StoreError>);

/// What a batch reads before its operations are planned, asked for at
/// once so that a store can send every read in one round trip.
#[derive(Debug, Clone, Copy)]
pub struct Prefetch<'a> {
    pub now: Timestamp,
    /// The batch reclaims expired leases and promotes due jobs: read them
    /// (see [`Store::job_overdue`]) with their statuses.
    pub overdue: bool,
    /// Jobs the batch acts on, in id order (see [`Store::job_get_statuses`]).
    pub statuses: &'a [JobId],
    /// Those of them the batch may finish, whose dependents it reads (see
    /// [`Store::job_dependents`]), in id order.
    pub may_finish: &'a [JobId],
    /// Queues the batch claims from, and how many rows of each class to
    /// read (see [`Store::job_ready`]). Their settings are read too.
    pub ready: &'a [(&'a str, usize)],
}

/// What [`Store::prefetch`] read.
#[derive(Debug, Default)]
pub struct Prefetched {
    pub overdue: Vec<StatusRead>,
    pub statuses: Vec<StatusRead>,
    /// The stored settings of the queues of [`Prefetch::ready`] (those
    /// with none are left out), read before their jobs. Where other
    /// processes write, the rows of queues with limits are locked until
    /// the commit, so that one batch at a time claims from such a queue.
    pub queues: Vec<(String, QueueSettings)>,
    /// For each of those queues with a `max_leased`: how many of its jobs
    /// hold a lease that has not expired, counted after its row was locked
    /// (see [`Store::job_leased_count`]).
    pub leased: Vec<(String, u64)>,
    /// For queues with a `max_leased_per_group`: the lease counts of
    /// groups the batch's first candidates hold, where other processes
    /// write (read in the first flight, after the queues' rows were
    /// locked, see [`Store::job_group_leased`]). Groups left out are read
    /// when a claim meets them; a store whose batches exclude every other
    /// writer (SQLite) reads none here.
    pub group_leased: Vec<(String, Vec<(String, u64)>)>,
    /// One list per queue of [`Prefetch::ready`], in the same order; a
    /// queue those settings pause may have none read (a claim skips it).
    pub ready: Vec<Vec<ReadyRow>>,
    /// The edges to the jobs waiting for the jobs of
    /// [`Prefetch::may_finish`] (see [`Store::job_dependents`]), read after
    /// their rows were locked.
    pub dependents: Vec<DependentRead>,
}

/// Most expired leases, and most due jobs, one call to `Store::job_overdue`
/// returns.
pub const REAP_BATCH: usize = 256;

/// How many due SCHEDULED and RETRYING jobs a read of stats looks at to
/// count them READY (`StoreReader::job_due_counts`). The writers promote
/// them within a reap interval, so with one running there are none.
pub const DUE_LOOK: u32 = 10_000;

/// Most finished jobs one prune pass deletes.
pub const PRUNE_BATCH: usize = 1000;

/// How many job ids one call to `Store::job_finished_window` looks among:
/// a pass reads a bounded window of the table, however few of its jobs may
/// go, and the next pass goes on after it.
pub const PRUNE_SCAN: usize = 5000;

/// A finished job as the prune reads it ([`Store::job_finished_window`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub id: JobId,
    /// SUCCEEDED, DEAD or CANCELLED.
    pub state: relay_core::JobState,
    pub finished_at: Timestamp,
    /// Its queue's own retention.
    pub keep: relay_core::Retention,
}

/// A window of the jobs table, as the prune reads it.
#[derive(Debug, Clone, Default)]
pub struct FinishedWindow {
    /// The window's finished jobs, by id.
    pub finished: Vec<Finished>,
    /// The last id in the window; `None` when the window reached the
    /// table's end (it holds fewer than [`PRUNE_SCAN`] jobs).
    pub last: Option<JobId>,
}

/// A store the engine's writer thread owns.
pub type WriterStore = dyn Store + Send;

/// What a store does that decides how the engine drives it
/// ([`Store::behaviour`]), in one value instead of a question per call.
/// Each field is `false` by default: a store that is durable on commit,
/// locks nothing it reads, and waits out its own conflicts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Behaviour {
    /// A failed commit (other than busy or disk full) may leave what this
    /// process reads ahead of what is on disk: a local file, whose failed
    /// writeback Linux reports once and then forgets. The engine then
    /// stops writing and reading, as after a failed [`Syncer::sync`].
    /// (`false`: the store recovers by itself; PostgreSQL handles its own
    /// fsync failures.)
    pub failed_commit_is_final: bool,
    /// `Busy` means a transient conflict with another process that a new
    /// attempt resolves at once (PostgreSQL's deadlocks, and a unique key
    /// another process took between this batch's check and its write): the
    /// engine then plans and applies the batch again. (`false`: `Busy`
    /// already waited its busy timeout.)
    pub busy_is_transient: bool,
    /// Reading claim candidates locks them until the commit (PostgreSQL's
    /// `FOR UPDATE SKIP LOCKED`), so that a claim elsewhere may pass over
    /// candidates a batch read and did not take: the engine then wakes
    /// waiting lessees when such a batch commits.
    pub locks_candidates: bool,
    /// The store can commit a batch planned from a status it did not read
    /// in the batch ([`Store::apply_unread`]): the one this process wrote
    /// when it leased the job, kept by the engine.
    pub applies_unread: bool,
    /// Only each group's first READY job of a class (its head) is among
    /// the grouped claim candidates ([`Store::job_ready`],
    /// [`Store::job_fair_after`]): the claim reads a group's line behind
    /// it with [`Store::job_group_next`] once it took the head. (`false`:
    /// every grouped READY job is a candidate, and a group at its limit is
    /// passed over row by row.)
    pub group_heads: bool,
}

/// The writer's connection: used by one thread, inside transactions the
/// engine opens and closes.
///
/// A batch runs in two phases. Planning reads (every method below but
/// `apply`, the prune's deletes and `notify_ready`) and decides; an operation that
/// fails there fails alone and has written nothing. Then [`Store::apply`]
/// writes what the whole batch decided, in a few statements; any error
/// there fails the batch. Reads of rows the batch may change lock them
/// where other processes write too (PostgreSQL: `FOR UPDATE`, or `FOR
/// UPDATE SKIP LOCKED` for claim candidates and expired leases).
///
/// Not `Send` by itself: a store may borrow a caller's connection for one
/// call (SQLite's `within`); the engine's own writers are
/// [`WriterStore`]s.
pub trait Store {
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
    /// Whether the calling thread may run a batch on this store now,
    /// instead of the writer thread: a blocking caller that finds the
    /// writer idle and nothing else in flight commits its own operation (no
    /// wake-up of the writer thread, none back). Asked with the writer
    /// held, at each such call. `false` (the default): only the writer
    /// thread runs batches.
    fn caller_may_commit(&self) -> bool {
        false
    }
    fn rollback(&mut self) -> Result<(), StoreError>;
    /// What this store does that decides how the engine drives it, asked
    /// once, when a writer opens on it. All `false` by default.
    fn behaviour(&self) -> Behaviour {
        Behaviour::default()
    }
    /// `n` ids for new jobs, never used by a committed job. An id reserved
    /// by a batch that did not commit is never shown to anyone (its callers
    /// got an error) and may be reserved again (SQLite) or skipped
    /// (PostgreSQL's sequence).
    fn job_ids(&mut self, n: usize) -> Result<Vec<JobId>, StoreError>;
    /// The unfinished (not SUCCEEDED, DEAD or CANCELLED) job holding `key`, if any.
    fn job_find_active_by_key(&mut self, key: &str) -> Result<Option<JobId>, StoreError>;
    /// Job `id`'s unique key (`None`: the job is missing or has none).
    fn job_unique_key(&mut self, id: JobId) -> Result<Option<String>, StoreError>;
    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError>;
    fn job_get_status(&mut self, id: JobId) -> Result<Option<JobStatus>, StoreError>;
    /// The statuses of many jobs (missing ones left out; a row that does
    /// not decode is its own error). Stores may read them in one statement.
    fn job_get_statuses(&mut self, ids: &[JobId]) -> Result<Vec<StatusRead>, StoreError> {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.job_get_status(*id) {
                Ok(Some(s)) => out.push((*id, Ok(s))),
                Ok(None) => {}
                Err(e @ StoreError::Corrupt { .. }) => out.push((*id, Err(e))),
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
    /// Everything a batch reads up front, in one call. The default reads
    /// one thing after another; a store with round trips sends them
    /// together.
    fn prefetch(&mut self, p: &Prefetch<'_>) -> Result<Prefetched, StoreError> {
        let overdue = if p.overdue {
            let ids = self.job_overdue(p.now)?;
            self.job_get_statuses(&ids)?
        } else {
            Vec::new()
        };
        let statuses = self.job_get_statuses(p.statuses)?;
        let names: Vec<&str> = p.ready.iter().map(|(q, _)| *q).collect();
        let queues = if names.is_empty() {
            Vec::new()
        } else {
            self.queue_settings(&names)?
        };
        let mut leased = Vec::new();
        for (q, s) in &queues {
            if s.limits.max_leased.is_some() {
                leased.push((q.clone(), self.job_leased_count(q, p.now)?));
            }
        }
        let dependents = self.job_dependents(p.may_finish)?;
        let mut ready = Vec::with_capacity(p.ready.len());
        for (queue, limit) in p.ready {
            let paused = queues.iter().any(|(q, s)| q == queue && s.paused);
            ready.push(if paused {
                Vec::new()
            } else {
                self.job_ready(queue, p.now, *limit)?
            });
        }
        Ok(Prefetched {
            overdue,
            statuses,
            queues,
            leased,
            group_leased: Vec::new(),
            ready,
            dependents,
        })
    }
    /// The edges from `parents` to the jobs waiting for them, in parent
    /// order. Costs the number of those edges (an index on the parent),
    /// whatever the size of the graph. Where other processes write, the
    /// parents' rows are locked by the batch first: an edge to a parent is
    /// committed by the batch that read and locked that parent unfinished.
    /// A row that does not decode is its own error.
    fn job_dependents(&mut self, parents: &[JobId]) -> Result<Vec<DependentRead>, StoreError>;
    /// The stored settings of these queues (those with none are left out;
    /// locked as in [`Prefetched::queues`]).
    fn queue_settings(&mut self, names: &[&str]) -> Result<Vec<(String, QueueSettings)>, StoreError>;
    /// Queue `name`'s settings, read before the batch changes them: where
    /// other processes write, its row is created with the defaults if
    /// missing and locked until the commit, so that two batches changing
    /// one queue take turns. The default reads it ([`Store::queue_settings`]).
    fn queue_lock(&mut self, name: &str, now: Timestamp) -> Result<QueueSettings, StoreError> {
        let _ = now;
        Ok(self
            .queue_settings(&[name])?
            .into_iter()
            .find(|(q, _)| q == name)
            .map(|(_, s)| s)
            .unwrap_or_default())
    }
    /// Schedules whose next tick is at or before `now`, not paused, in tick
    /// order, at most `limit`. Where other processes write, the rows are
    /// locked until the commit and rows another batch holds are passed
    /// over (each tick is taken by one batch). A row that does not decode
    /// is its own error.
    fn schedules_due(&mut self, now: Timestamp, limit: usize) -> Result<Vec<Result<Schedule, StoreError>>, StoreError>;
    /// One schedule (`None`: no such schedule), locked for the batch to
    /// change where other processes write.
    fn schedule_get(&mut self, name: &str) -> Result<Option<Schedule>, StoreError>;
    /// How many of `queue`'s jobs hold a lease that has not expired at
    /// `now` (its `max_leased` is checked against it; a claim reclaims the
    /// expired ones first). Costs the number of unexpired leases, not the
    /// queue's depth.
    fn job_leased_count(&mut self, queue: &str, now: Timestamp) -> Result<u64, StoreError>;
    /// How many of `queue`'s jobs of each of `groups` hold a lease that
    /// has not expired at `now` (groups with none left out), for its
    /// `max_leased_per_group`. Costs the leases of those groups, never
    /// the queue's other groups: a claim reads the groups it meets, so
    /// 100,000 leased groups cost it nothing (issue 39).
    fn job_group_leased(
        &mut self,
        queue: &str,
        groups: &[&str],
        now: Timestamp,
    ) -> Result<Vec<(String, u64)>, StoreError>;
    /// The oldest due READY jobs of `queue` without a group (`ready_at` at
    /// or before `now`): at least `limit` of each priority class that has
    /// that many (fewer means the class has no more; more is allowed), each
    /// class in `(ready_at, id)` order; then, as many of each class of its
    /// grouped READY jobs in `(turn, id)` order (with [`ReadyRow::turn`]).
    fn job_ready(&mut self, queue: &str, now: Timestamp, limit: usize) -> Result<Vec<ReadyRow>, StoreError>;
    /// The next page of one class: its due READY jobs after `after` in
    /// `(ready_at, id)` order, at least `limit` of them if there are that
    /// many (as [`Store::job_ready`]).
    fn job_ready_after(
        &mut self,
        queue: &str,
        now: Timestamp,
        after: Candidate,
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError>;
    /// The next page of one class of `queue`'s grouped READY jobs (only
    /// the groups' heads where [`Behaviour::group_heads`]): after `after`
    /// (a turn and an id) in `(turn, id)` order, at least `limit` of them
    /// if there are that many.
    fn job_fair_after(
        &mut self,
        queue: &str,
        priority: Priority,
        after: (i64, JobId),
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError>;
    /// The lines of groups whose heads a claim took: for each `(group,
    /// turn, id)` of `after`, that group's next READY jobs of class
    /// `priority` after `(turn, id)` in `(turn, id)` order, at least
    /// `limit` of them if it has that many (fewer means it has no more).
    /// Rows with [`ReadyRow::turn`], the groups one after the other.
    /// Called only where [`Behaviour::group_heads`]; the default reads
    /// nothing.
    fn job_group_next(
        &mut self,
        queue: &str,
        priority: Priority,
        after: &[(&str, i64, JobId)],
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError> {
        let _ = (queue, priority, after, limit);
        Ok(Vec::new())
    }
    /// The earliest `ready_at` after `now` among `queue`'s jobs waiting to
    /// be leased (READY, SCHEDULED, RETRYING).
    fn job_next_ready_at(&mut self, queue: &str, now: Timestamp) -> Result<Option<Timestamp>, StoreError>;
    /// What the reap reclaims or promotes: LEASED jobs whose lease expired
    /// at or before `now`, oldest expiry first, then SCHEDULED and RETRYING
    /// jobs whose `ready_at` is not after `now`, earliest first; at most
    /// [`REAP_BATCH`] of each.
    fn job_overdue(&mut self, now: Timestamp) -> Result<Vec<JobId>, StoreError>;
    /// The number of job `id`'s last event (0 when it has none).
    fn event_last_seq(&mut self, id: JobId) -> Result<i64, StoreError>;
    /// When job `id`'s lease expires: how many times it expired before,
    /// since it was submitted or last retried (its `expired` events after
    /// its last `retried` one), and its queue's own `poison_after` (`None`:
    /// the engine's, or a value out of range). Read without a lock.
    fn job_expiries(&mut self, id: JobId) -> Result<(u32, Option<u32>), StoreError>;
    /// The value of mark `key` if it has not expired at `now` (see
    /// [`MarkWrite`]).
    fn mark_get(&mut self, key: &str, now: Timestamp) -> Result<Option<String>, StoreError>;

    /// An event's mark (`event:<key>`, see [`Store::mark_get`]), read so
    /// that a wait for the event and its emit in two transactions of
    /// other writers go one after the other (PostgreSQL: a transaction
    /// lock on the key, taken before the read): whichever commits second
    /// sees the first.
    fn event_get(&mut self, key: &str, now: Timestamp) -> Result<Option<String>, StoreError> {
        self.mark_get(key, now)
    }

    /// The jobs waiting for event `key`, with their waits' steps, in id
    /// order.
    fn waits_on(&mut self, key: &str) -> Result<Vec<(JobId, String)>, StoreError>;

    /// Job `id`'s wait for an event, if it has one.
    fn wait_of(&mut self, id: JobId) -> Result<Option<Wait>, StoreError>;

    /// Writes a batch's changes (see [`Changes`] for the order). Any error
    /// fails the batch: the engine rolls the transaction back.
    fn apply(&mut self, changes: &Changes<'_>) -> Result<(), StoreError>;
    /// Writes a batch's changes and commits them: [`Store::apply`] then
    /// [`Store::commit`] (the default), or both in one round trip where
    /// the store can. The engine calls it instead of the two for stores
    /// without a [`Store::syncer`] whose failed commits are not final.
    fn apply_commit(&mut self, changes: &Changes<'_>) -> Result<(), CommitFailed> {
        if !changes.is_empty() {
            self.apply(changes).map_err(CommitFailed::NotApplied)?;
        }
        self.commit().map_err(CommitFailed::MaybeApplied)
    }
    /// While `sealed`, every read fails with [`StoreError::Busy`]: a batch
    /// planned for [`Store::apply_unread`] must not plan from anything the
    /// guard of that write does not check. A no-op by default.
    fn seal_reads(&mut self, sealed: bool) {
        let _ = sealed;
    }
    /// Commits, as a transaction of its own, a batch of one transition of
    /// one job and its one event, planned from `expected`, a status this
    /// store did not read: nothing is written unless the job's row still
    /// is `expected` in every column and no job waits for it.
    /// `Ok(true)`: written and committed. `Ok(false)`: the row was
    /// otherwise (or the batch is not of that shape); nothing was written,
    /// and the batch is planned again from a read.
    fn apply_unread(&mut self, changes: &Changes<'_>, expected: &JobStatus) -> Result<bool, CommitFailed> {
        let _ = (changes, expected);
        Ok(false)
    }
    /// The [`PRUNE_SCAN`] jobs after id `after` (by id): the finished ones
    /// (SUCCEEDED, DEAD, CANCELLED) with their queue's retention, and the
    /// last id read. A row that does not decode is logged and left out
    /// (never pruned). Housekeeping, run before a batch is planned.
    fn job_finished_window(&mut self, after: JobId) -> Result<FinishedWindow, StoreError>;
    /// Deletes the finished jobs named, with their events and the
    /// dependency edges from them, each only while it is still finished
    /// at the time given (a job retried since is left); returns how many.
    /// Housekeeping, beside [`Store::job_finished_window`].
    fn job_delete_finished(&mut self, jobs: &[(JobId, Timestamp)]) -> Result<u64, StoreError>;
    /// Records worker `id`'s heartbeat (`beat`: its JSON, as
    /// [`relay_core::WorkerBeat`] serializes), seen at `seen_at`; with
    /// `stopped`, it said it stopped then, if `owner` may write it (see
    /// [`WorkerOwner`]): false, and nothing written, when the record is
    /// another's. Written at once, in the batch's transaction (a heartbeat
    /// is repeated whole, so one lost with a failed batch is replaced by
    /// the next).
    fn worker_put(
        &mut self,
        id: &str,
        beat: &str,
        seen_at: Timestamp,
        stopped: bool,
        owner: &WorkerOwner<'_>,
    ) -> Result<bool, StoreError>;
    /// Deletes the workers last seen before `before`; returns how many.
    /// Housekeeping, beside [`Store::job_delete_finished`].
    fn worker_prune(&mut self, before: Timestamp) -> Result<u64, StoreError>;
    /// Deletes throughput history of minutes before `before`; returns how
    /// many rows. Housekeeping, beside [`Store::job_delete_finished`].
    fn throughput_prune(&mut self, before: Timestamp) -> Result<u64, StoreError>;
    /// Deletes up to [`PRUNE_BATCH`] marks that expired at or before
    /// `before`; returns how many. Housekeeping, beside [`Store::job_delete_finished`].
    fn mark_prune(&mut self, before: Timestamp) -> Result<u64, StoreError>;
    /// Tells other processes, when this transaction commits, that jobs
    /// became ready (PostgreSQL: NOTIFY). A no-op where nobody can listen.
    fn notify_ready(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Why [`Store::apply_commit`] failed.
#[derive(Debug)]
pub enum CommitFailed {
    /// Nothing was applied: a write failed and the transaction is rolled
    /// back (as when [`Store::apply`] fails).
    NotApplied(StoreError),
    /// The commit may or may not have happened (as when [`Store::commit`]
    /// fails).
    MaybeApplied(StoreError),
}

/// Makes durable everything its store had committed when `sync` was
/// called: commits are written in order, so one sync covers every commit
/// before it (the second half of a split commit, see [`Store::syncer`]).
pub trait Syncer: Send + Sync {
    /// An error means the disk may have dropped written commits: the
    /// engine answers their callers "maybe applied" and writes nothing more.
    fn sync(&self) -> Result<(), StoreError>;
}

/// The name range of every queue, for [`StoreReader::queue_stats`]: queue
/// names are made of `[A-Za-z0-9_.-]`, all below `\x7f`.
pub const ALL_QUEUES: (&str, &str) = ("", "\x7f");

/// A read connection, used beside the writer.
pub trait StoreReader: Send {
    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError>;
    /// The jobs `filter` matches, newest first.
    fn job_list(&mut self, filter: &JobFilter) -> Result<Vec<Job>, StoreError>;
    /// The ids of the jobs `filter` matches, newest first (for bulk actions).
    fn job_search(&mut self, filter: &JobFilter) -> Result<Vec<JobId>, StoreError>;
    /// The newest [`DEAD_GROUP_WINDOW`] DEAD jobs grouped by queue, kind
    /// and error, most jobs first.
    fn job_dead_groups(&mut self, limit: u32) -> Result<Vec<DeadGroup>, StoreError>;
    /// Per queue and minute, from the minute of `since` on, oldest first.
    fn throughput(&mut self, since: Timestamp) -> Result<Vec<Throughput>, StoreError>;
    /// As [`StoreReader::throughput`], of one queue (`Some`) or summed over
    /// every queue (`None`: rows with an empty queue name), a row a minute.
    fn throughput_of(&mut self, since: Timestamp, queue: Option<&str>) -> Result<Vec<Throughput>, StoreError>;
    /// Events with `seq > after`, in order, at most `limit`.
    fn job_events(&mut self, id: JobId, after: i64, limit: u32) -> Result<Vec<Event>, StoreError>;
    /// Job `id`'s wait (an event, a completion token, a joined job), if it
    /// has one.
    fn wait_of(&mut self, id: JobId) -> Result<Option<Wait>, StoreError>;
    /// Counts of the queues with jobs named from `first` to `last` (byte
    /// order, both included; [`ALL_QUEUES`] for every queue).
    fn queue_stats(
        &mut self,
        now: Timestamp,
        first: &str,
        last: &str,
    ) -> Result<BTreeMap<String, QueueStats>, StoreError>;
    /// The stored settings of the queues named from `first` to `last`
    /// (queues with none are left out).
    fn queue_settings_all(&mut self, first: &str, last: &str) -> Result<Vec<(String, QueueSettings)>, StoreError>;
    /// The names stats are kept for (queues with jobs, paused or limited),
    /// in byte order, after `after` (`""`: from the first), at most `limit`.
    fn queue_names(&mut self, after: &str, limit: u32) -> Result<Vec<String>, StoreError>;
    /// The queues with the most READY jobs, most first (then by name), at
    /// most `limit`; queues with none are left out.
    fn queue_busiest(&mut self, limit: u32) -> Result<Vec<String>, StoreError>;
    /// Every queue at once.
    fn queue_totals(&mut self) -> Result<QueueTotals, StoreError>;
    /// SCHEDULED and RETRYING jobs due by `now` that no writer has promoted
    /// to READY yet, by queue and state, among the `limit` earliest (see
    /// [`DUE_LOOK`]): what stats count READY instead.
    fn job_due_counts(&mut self, now: Timestamp, limit: u32) -> Result<Vec<(String, JobState, u64)>, StoreError>;
    /// Every schedule, by name.
    fn schedules(&mut self) -> Result<Vec<Schedule>, StoreError>;
    /// As [`Store::mark_get`].
    fn mark_get(&mut self, key: &str, now: Timestamp) -> Result<Option<String>, StoreError>;
    /// The marks with keys from `first` up to (not including) `end` (a
    /// prefix's range) kept past `kept_past`, the latest to go first, at
    /// most `limit`, each value cut to its first `value_chars` characters
    /// (the recent events, `event:`; open tokens are
    /// [`StoreReader::tokens_open`]'s, which leaves out used ones). Read along the
    /// marks' expiry index, so a page costs its rows and the later marks of
    /// other kinds, however many there are.
    fn marks_page(
        &mut self,
        first: &str,
        end: &str,
        kept_past: Timestamp,
        limit: u32,
        value_chars: u32,
    ) -> Result<Vec<MarkRow>, StoreError>;
    /// The completion tokens not completed yet whose marks go after
    /// `kept_past` (a token's mark is kept a week past its deadline), the
    /// latest to go first, at most `limit` (values whole: a token's is
    /// short). Along the expiry index, as [`StoreReader::marks_page`].
    fn tokens_open(&mut self, kept_past: Timestamp, limit: u32) -> Result<Vec<MarkRow>, StoreError>;
    /// The event and token keys jobs wait for now (WAITING, their wait not
    /// ended; joins left out), in the store's order of keys after `after`
    /// (`""`: from the first), at most `limit`, along the waits' key index.
    fn awaited_keys(&mut self, after: &str, limit: u32) -> Result<Vec<AwaitedKey>, StoreError>;
    /// A page of workers' latest heartbeats, by id: those after `after`
    /// (`""`: from the first), at most `limit` rows; a row that does not
    /// decode is logged and left out. The second value is the next page's
    /// `after` (the last row's id) when the page read `limit` rows.
    fn workers(&mut self, after: &str, limit: u32) -> Result<WorkerRows, StoreError>;
}

/// Who writes a worker's record ([`Store::worker_put`]). A record is
/// written by whoever made it: a caller over HTTP presents the hash of
/// its secret (its own, or the one its first heartbeat was answered
/// with); a worker inside a Relay process presents `local`, its records'
/// mark. A record last seen before `forgotten_before`, or one without a
/// mark (written before the marks), is free to anyone.
#[derive(Debug, Clone, Copy)]
pub struct WorkerOwner<'a> {
    /// The SHA-256 (hex) of the secret presented, if any.
    pub presented: Option<&'a str>,
    /// The caller is over HTTP: it must present a secret to write a
    /// record that exists.
    pub remote: bool,
    /// The hash the record keeps (the presented one, or a new secret's;
    /// an in-process worker's mark, `local`).
    pub keep: Option<&'a str>,
    /// Records last seen before this are forgotten.
    pub forgotten_before: Timestamp,
}

/// A page of worker records, and the next page's `after`
/// ([`StoreReader::workers`]).
pub type WorkerRows = (Vec<relay_core::WorkerRecord>, Option<String>);

/// Opens a store's connections.
pub trait Backend: Send + Sync {
    fn open_writer(&self) -> Result<Box<WriterStore>, StoreError>;
    fn open_reader(&self) -> Result<Box<dyn StoreReader>, StoreError>;
    /// A short description for logs and errors (a path, a URL without password).
    fn describe(&self) -> String;
    /// One line saying what an answered change survives (the settings in
    /// force), for the dashboard.
    fn durability(&self) -> String {
        String::new()
    }
    /// The database file, for a store on one (SQLite).
    fn file(&self) -> Option<&std::path::Path> {
        None
    }
    /// A sync or commit failed in a way that leaves this process's view of
    /// the data possibly ahead of the disk (see
    /// [`Behaviour::failed_commit_is_final`]): refuse to open the store again
    /// in this process. A no-op where a reopen is safe (the default).
    fn quarantine(&self) {}
    /// A flag shared by every handle of this process on the same store,
    /// set when one of them quarantines it: the others then stop too
    /// (`None`: nothing to share, the default). Read after the writer is
    /// opened (the file exists then).
    fn failure_flag(&self) -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
        None
    }
    /// How many writers (each a connection from [`Backend::open_writer`]
    /// and a thread) one Relay runs. 1 (the default) where writes take
    /// turns anyway (SQLite's write lock). More where the server works on
    /// several transactions at once and one connection's round trips and
    /// one server backend are the limit (PostgreSQL): the writers take
    /// batches from the same queue and meet in the database exactly as
    /// several processes do (row locks, `SKIP LOCKED`).
    fn writers(&self) -> usize {
        1
    }
    /// Whether this store's connections drive a Tokio runtime of their own
    /// (`block_on`, as PostgreSQL's drivers do), which panics on a thread
    /// that already runs an async executor. The engine then opens the
    /// store, and reads, on a thread of its own when a blocking call comes
    /// from async code. `false` (the default).
    fn drives_a_runtime(&self) -> bool {
        false
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
