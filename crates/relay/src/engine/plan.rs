//! Planning a batch: every operation reads and decides against an overlay
//! of what the operations before it in the batch decided, and writes
//! nothing; the store then writes the whole batch at once
//! ([`relay_store::Store::apply`]).
//!
//! Why two phases:
//! - One failing operation fails alone without savepoints or a redo: it
//!   has written nothing, and its own decisions are undone in memory
//!   ([`Plan::mark`], [`Plan::undo`]).
//! - A store writes a batch in a few statements whatever its size
//!   (PostgreSQL: one `UPDATE .. FROM unnest(..)` for every transition),
//!   and reads what the batch needs up front in one statement each
//!   (`Plan::prefetch`), where a round trip per statement is the cost.
//! - Operations later in a batch see earlier ones: a claim takes a job
//!   submitted earlier in its batch, and never one cancelled earlier; an
//!   ack may follow its lease in the same batch.

use crate::error::{Error, Result};
use relay_core::{EventKind, Job, JobId, JobState, JobStatus, Priority, Progress, Step, Timestamp};
use relay_store::{Changes, EventRow, FieldsWrite, JobInsert, JobUpdate, Prefetch, Store, StoreError, Tally};
use std::borrow::Cow;

mod claim;
mod deps;
mod marks;
mod queues;
mod schedules;
mod waits;
use claim::{Pool, CLASSES};
use deps::{Deps, DepsMark};
use marks::MarkEntry;
pub(crate) use marks::{event_mark, event_text};
pub(crate) use queues::Gate;
use queues::QueueEntry;
use schedules::ScheduleEntry;
use waits::WaitEntry;

/// The plan's maps are keyed by job ids and queue names the process chose,
/// not by an attacker: a fast, fixed hash (SipHash measured at ~2% of the
/// writer's time).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;

/// What an operation will read, declared before the batch is planned so
/// the store can read it for the whole batch at once.
#[derive(Debug, Clone, Default)]
pub(crate) enum Hint {
    #[default]
    None,
    /// It acts on these jobs.
    Jobs(Vec<JobId>),
    /// It claims up to `max` jobs from these queues.
    Claim { queues: Vec<String>, max: u32 },
    /// It submits this many jobs, which depend on these.
    Submit { jobs: usize, parents: Vec<JobId> },
    /// It acts on these jobs, then claims up to `max` jobs from these
    /// queues (a worker's outcomes and its next lease).
    CompleteAndClaim {
        jobs: Vec<JobId>,
        queues: Vec<String>,
        max: u32,
    },
    /// A pass of the prune after this job id, run before the batch is
    /// planned (as the writer's own prune is): its deletes go to the store
    /// at once, so no operation of the batch may have read a row it
    /// deletes.
    Prune(JobId),
}

impl Hint {
    /// The jobs it acts on and the claim it makes, if any.
    fn parts(&self) -> (&[JobId], Option<(&[String], u32)>) {
        match self {
            Hint::Jobs(j) => (j, None),
            Hint::Claim { queues, max } => (&[], Some((queues, *max))),
            Hint::CompleteAndClaim { jobs, queues, max } => (jobs, Some((queues, *max))),
            Hint::None | Hint::Submit { .. } | Hint::Prune(_) => (&[], None),
        }
    }

    /// True for an operation that claims jobs.
    pub(crate) fn claims(&self) -> bool {
        self.parts().1.is_some()
    }
}

/// One job as this batch sees it.
struct Entry {
    /// The row's state and token as the store has them, the guard of its
    /// update; `None` for a job this batch inserts.
    base: Option<(JobState, relay_core::LeaseToken)>,
    status: JobStatus,
    /// The rest of the row, when read (or inserted); its `status` field is
    /// not kept current (`status` above is).
    row: Option<Box<Job>>,
    /// A result this batch writes.
    result: Option<Vec<u8>>,
    /// Fields this batch writes besides the status (a debounce's payload,
    /// a holder's progress).
    fields: Option<Box<Fields>>,
    written: bool,
    deleted: bool,
    /// The number of the job's last event before this batch, once known.
    seq_base: Option<i64>,
    /// Events this batch appends to the job.
    events: i64,
    /// The operation that last saved this entry for undo (see `Plan::save`).
    saved_by: u32,
}

impl Entry {
    fn live(&self) -> bool {
        !self.deleted
    }

    /// Waiting to be leased (READY, SCHEDULED or RETRYING) and due at
    /// `now`: a claim may take it.
    fn claimable(&self, now: Timestamp) -> bool {
        !self.deleted && self.status.state.is_pending() && self.status.ready_at <= now
    }

    fn unfinished(&self) -> bool {
        !self.deleted && !self.status.state.is_finished()
    }
}

enum Slot {
    Missing,
    /// The row does not decode; every operation on it fails alone.
    Corrupt(Option<JobId>, String),
    Row(Box<Entry>),
}

impl Slot {
    /// A status the store read: a corrupt row is its own slot, any other
    /// error fails the batch.
    fn read(r: Result<JobStatus, StoreError>) -> Result<Self> {
        match r {
            Ok(status) => Ok(Slot::Row(Box::new(Entry::read(status, None)))),
            Err(StoreError::Corrupt { job, reason }) => Ok(Slot::Corrupt(job, reason)),
            Err(e) => Err(e.into()),
        }
    }
}

struct PlannedEvent {
    job: JobId,
    ord: i64,
    at: Timestamp,
    kind: Cow<'static, str>,
    data: String,
    /// What the event counts in the throughput history (the engine's own
    /// "succeeded", "failed" and "expired"; never a user's event).
    tally: Tally,
}

/// Undo records of the operation being planned.
enum Undo {
    /// The job was not known before (an insert): forget it.
    Remove(JobId),
    /// What a write changed in a known job.
    Restore(JobId, Saved),
    Taken(String, Option<JobId>),
    /// A corrupt row this operation deleted.
    Corrupt(JobId, Option<JobId>, String),
    /// A queue's settings before this operation changed them.
    Queue(String, QueueEntry),
    /// What a claim's count (or an ended lease's) changed in a queue.
    Count(Box<queues::Counted>),
    /// A schedule before this operation changed it.
    Schedule(String, ScheduleEntry),
    /// A schedule this batch had not read before this operation wrote it.
    ScheduleUnread(String),
    /// A mark before this operation wrote it.
    Mark(String, MarkEntry),
    /// A job's wait before this operation wrote it.
    Wait(JobId, WaitEntry),
}

/// The fields of a job a batch writes besides its status.
#[derive(Clone, Default)]
struct Fields {
    payload: Option<Vec<u8>>,
    /// The report, and its text as stored
    /// ([`relay_store::decode::progress_text`]).
    progress: Option<(Progress, String)>,
    /// All the job's steps, and their bytes as stored
    /// ([`relay_store::decode::steps_bytes`]).
    steps: Option<(Vec<Step>, Vec<u8>)>,
}

/// The parts of an [`Entry`] a write changes.
struct Saved {
    status: JobStatus,
    result: Option<Vec<u8>>,
    fields: Option<Box<Fields>>,
    written: bool,
    deleted: bool,
    events: i64,
}

/// Where an operation started: [`Plan::undo`] goes back to it.
pub(crate) struct Mark {
    /// Opened with no other mark open: keeping it ends the operation.
    outer: bool,
    undo: usize,
    written: usize,
    events: usize,
    deps: DepsMark,
    readied: usize,
    cursors: Vec<[usize; CLASSES]>,
}

/// A batch being planned: the store to read from, and what the batch has
/// decided so far.
pub(crate) struct Plan<'s> {
    store: &'s mut dyn Store,
    now: Timestamp,
    /// The instant the prefetch read candidates at (`now` before
    /// [`Plan::advance`]).
    read_at: Timestamp,
    jobs: HashMap<JobId, Slot>,
    /// Jobs written, in the order they were first written.
    written: Vec<JobId>,
    events: Vec<PlannedEvent>,
    /// Unique keys taken in this batch (by a submit or a retry).
    taken: HashMap<String, JobId>,
    /// The store's answers to "who holds this key".
    holders: HashMap<String, Option<JobId>>,
    pools: Vec<Pool>,
    /// The settings of queues the batch read or changed.
    queues: HashMap<String, QueueEntry>,
    /// Schedules the batch read or changed.
    schedules: HashMap<String, ScheduleEntry>,
    /// Marks the batch read or wrote.
    marks: HashMap<String, MarkEntry>,
    /// Jobs' waits for events, as read and written by the batch.
    waits: HashMap<JobId, WaitEntry>,
    /// Dependency edges read, added and spent.
    deps: Deps,
    /// Jobs that became claimable in this batch (inserted, or made READY).
    readied: Vec<JobId>,
    fresh_ids: Vec<JobId>,
    /// The expired leases and due jobs read by `prefetch`, for the reap.
    overdue: Option<Vec<JobId>>,
    /// Jobs the batch's claims want per queue, and ids its submits need.
    demand: HashMap<String, usize>,
    submits: usize,
    undo: Vec<Undo>,
    /// Marks open (an operation's, and any inside it).
    depth: u32,
    logging: bool,
    /// Numbers the undo scopes (operations, and marked parts of them),
    /// so that each saves an entry once however often it writes it.
    op: u32,
    /// A claim took a grouped job: the store hands its group's head to the
    /// next of its line when the batch is written, a job other processes'
    /// claims could not see before (their waiting lessees are told).
    grouped_leased: bool,
    /// The store's `Behaviour::group_heads`, read once.
    group_heads: bool,
}

/// A job's log takes events appended by callers (`append_event`, which
/// any holder of an API token may call, its lease or not) until it holds
/// this many events: one caller cannot grow another's job without bound
/// (issue 39; 50,000 appended events made a 15 MB log).
pub const MAX_EVENTS_APPENDED: i64 = 10_000;

/// An appended event's data (`append_event`) is at most this many bytes of
/// JSON: with [`MAX_EVENTS_APPENDED`], a job's appended events hold at most
/// 40 MiB, whoever appends them (issue 39).
pub const MAX_APPENDED_EVENT_BYTES: usize = 4096;

/// Most rows of one class read for a claim at a time.
const PAGE_MAX: usize = 128;

impl<'s> Plan<'s> {
    pub(crate) fn new(store: &'s mut dyn Store, now: Timestamp) -> Self {
        let group_heads = store.behaviour().group_heads;
        Self {
            store,
            now,
            read_at: now,
            jobs: HashMap::default(),
            written: Vec::new(),
            events: Vec::new(),
            taken: HashMap::default(),
            holders: HashMap::default(),
            pools: Vec::new(),
            queues: HashMap::default(),
            schedules: HashMap::default(),
            marks: HashMap::default(),
            waits: HashMap::default(),
            deps: Deps::default(),
            readied: Vec::new(),
            fresh_ids: Vec::new(),
            overdue: None,
            demand: HashMap::default(),
            submits: 0,
            undo: Vec::new(),
            depth: 0,
            logging: false,
            op: 0,
            grouped_leased: false,
            group_heads,
        }
    }

    /// Whether a claim of this batch took a grouped job (see
    /// `grouped_leased`).
    pub(crate) fn grouped_leased(&self) -> bool {
        self.grouped_leased
    }

    /// The store, for housekeeping writes made before planning (pruning).
    pub(crate) fn store(&mut self) -> &mut dyn Store {
        self.store
    }

    /// Reads what the batch's operations declared (and, when `reap`, the
    /// expired leases) in one call to the store.
    pub(crate) fn prefetch<'h>(&mut self, hints: impl Iterator<Item = &'h Hint>, reap: bool) -> Result<()> {
        let mut ids = Vec::new();
        // The jobs the batch acts on may finish (a submit's dependencies
        // do not): their dependents are read.
        let mut may_finish = Vec::new();
        let mut queues: Vec<&str> = Vec::new();
        for h in hints {
            if let Hint::Submit { jobs, parents } = h {
                self.submits += jobs;
                ids.extend_from_slice(parents);
                continue;
            }
            let (jobs, claim) = h.parts();
            ids.extend_from_slice(jobs);
            may_finish.extend_from_slice(jobs);
            for q in claim.iter().flat_map(|(qs, _)| qs.iter()) {
                let d = self.demand.entry(q.clone()).or_default();
                if *d == 0 {
                    queues.push(q);
                }
                *d += claim.map_or(0, |(_, max)| max) as usize;
            }
        }
        ids.sort_unstable();
        ids.dedup();
        may_finish.sort_unstable();
        may_finish.dedup();
        let ready: Vec<(&str, usize)> = queues
            .iter()
            .map(|q| (*q, self.demand.get(*q).copied().unwrap_or(1).clamp(1, PAGE_MAX)))
            .collect();
        let got = self.store.prefetch(&Prefetch {
            now: self.now,
            overdue: reap,
            statuses: &ids,
            may_finish: &may_finish,
            ready: &ready,
        })?;
        for id in &ids {
            self.jobs.insert(*id, Slot::Missing);
        }
        self.deps.prefetched(may_finish, got.dependents);
        let overdue: Vec<JobId> = got.overdue.iter().map(|(id, _)| *id).collect();
        for (id, r) in got.overdue.into_iter().chain(got.statuses) {
            self.jobs.insert(id, Slot::read(r)?);
        }
        self.overdue = reap.then_some(overdue);
        for (queue, _) in &ready {
            self.keep_queue_read(queue, &got.queues, &got.leased, &got.group_leased);
        }
        for ((queue, limit), rows) in ready.iter().zip(got.ready) {
            // A paused queue's jobs may not have been read: its pool is
            // read if the batch resumes it.
            if !self.queues.get(*queue).is_some_and(|e| e.settings.paused) {
                self.add_pool(queue, *limit, rows);
            }
        }
        Ok(())
    }

    /// Moves the batch's instant on to `later` (never back): read again
    /// once the prefetch holds its locks.
    pub(crate) fn advance(&mut self, later: Timestamp) {
        self.now = self.now.max(later);
    }

    /// Takes `status` as job `id`'s, with no job waiting for it, in place
    /// of the batch's reads: for a batch planned from what this process
    /// wrote (see `Writer::unread`), which the store writes only if its
    /// row still is so.
    pub(crate) fn seed(&mut self, id: JobId, status: JobStatus) {
        self.jobs.insert(id, Slot::Row(Box::new(Entry::read(status, None))));
        self.deps.prefetched(vec![id], Vec::new());
    }

    /// Reads the statuses of `ids` not read yet, in one call (in id order:
    /// PostgreSQL locks them, and one order everywhere avoids deadlocks).
    pub(crate) fn load_statuses(&mut self, mut ids: Vec<JobId>) -> Result<()> {
        ids.retain(|id| !self.jobs.contains_key(id));
        if ids.is_empty() {
            return Ok(());
        }
        ids.sort_unstable();
        ids.dedup();
        let found = self.store.job_get_statuses(&ids)?;
        for id in &ids {
            self.jobs.insert(*id, Slot::Missing);
        }
        for (id, r) in found {
            self.jobs.insert(id, Slot::read(r)?);
        }
        Ok(())
    }

    /// Where the operation about to be planned starts.
    pub(crate) fn mark(&mut self) -> Mark {
        self.logging = true;
        // A new undo scope (an operation, or a part inside one): its first
        // write of each entry saves it.
        self.op += 1;
        let outer = self.depth == 0;
        self.depth += 1;
        Mark {
            outer,
            undo: self.undo.len(),
            written: self.written.len(),
            events: self.events.len(),
            deps: self.deps.mark(),
            readied: self.readied.len(),
            cursors: self
                .pools
                .iter()
                .map(|p| p.classes.each_ref().map(|c| c.next))
                .collect(),
        }
    }

    /// Forgets every decision made since `m`: the operation failed alone.
    pub(crate) fn undo(&mut self, m: Mark) {
        self.depth = self.depth.saturating_sub(1);
        while self.undo.len() > m.undo {
            match self.undo.pop() {
                Some(Undo::Remove(id)) => {
                    self.jobs.remove(&id);
                }
                Some(Undo::Restore(id, s)) => {
                    if let Some(Slot::Row(e)) = self.jobs.get_mut(&id) {
                        e.saved_by = 0;
                        e.status = s.status;
                        e.result = s.result;
                        e.fields = s.fields;
                        e.written = s.written;
                        e.deleted = s.deleted;
                        e.events = s.events;
                    }
                }
                Some(Undo::Corrupt(id, job, reason)) => {
                    self.jobs.insert(id, Slot::Corrupt(job, reason));
                }
                Some(Undo::Queue(name, entry)) => {
                    self.queues.insert(name, entry);
                }
                Some(Undo::Count(c)) => self.uncount(*c),
                Some(Undo::Schedule(name, entry)) => {
                    self.schedules.insert(name, entry);
                }
                Some(Undo::ScheduleUnread(name)) => {
                    self.schedules.remove(&name);
                }
                Some(Undo::Mark(key, entry)) => self.restore_mark(key, entry),
                Some(Undo::Wait(id, entry)) => self.restore_wait(id, entry),
                Some(Undo::Taken(k, Some(id))) => {
                    self.taken.insert(k, id);
                }
                Some(Undo::Taken(k, None)) => {
                    self.taken.remove(&k);
                }
                None => break,
            }
        }
        self.written.truncate(m.written);
        self.events.truncate(m.events);
        self.deps.undo(&m.deps);
        self.readied.truncate(m.readied);
        let known = m.cursors.len();
        for (p, c) in self.pools.iter_mut().zip(m.cursors) {
            for (class, next) in p.classes.iter_mut().zip(c) {
                class.next = next;
            }
        }
        // Pools first read after the mark: their rows stay (facts), their
        // cursors go back to the start.
        for p in self.pools.iter_mut().skip(known) {
            for class in &mut p.classes {
                class.next = 0;
            }
        }
    }

    /// The operation succeeded: its decisions stay. (A mark inside an
    /// operation, around one part of it, keeps its undo records: the
    /// operation as a whole may still fail.)
    pub(crate) fn keep(&mut self, m: Mark) {
        self.depth = self.depth.saturating_sub(1);
        if m.outer {
            self.undo.clear();
        }
    }

    /// Job `id` as read or as this batch left it (`None`: missing or deleted).
    fn entry(&mut self, id: JobId) -> Result<Option<&mut Entry>> {
        if !self.jobs.contains_key(&id) {
            self.load_statuses(vec![id])?;
        }
        match self.jobs.get_mut(&id) {
            Some(Slot::Row(e)) if e.live() => Ok(Some(e)),
            Some(Slot::Corrupt(job, reason)) => Err(Error::Corrupt {
                job: *job,
                reason: reason.clone(),
            }),
            _ => Ok(None),
        }
    }

    /// Records the entry's current value before this operation first
    /// changes it.
    fn save(&mut self, id: JobId) {
        if !self.logging {
            return;
        }
        let op = self.op;
        let undo = match self.jobs.get_mut(&id) {
            Some(Slot::Row(e)) if e.saved_by == op => return,
            Some(Slot::Row(e)) => {
                e.saved_by = op;
                Undo::Restore(
                    id,
                    Saved {
                        status: e.status.clone(),
                        result: e.result.clone(),
                        fields: e.fields.clone(),
                        written: e.written,
                        deleted: e.deleted,
                        events: e.events,
                    },
                )
            }
            _ => Undo::Remove(id),
        };
        self.undo.push(undo);
    }

    pub(crate) fn status(&mut self, id: JobId) -> Result<Option<JobStatus>> {
        Ok(self.entry(id)?.map(|e| e.status.clone()))
    }

    /// Reads job `id`'s whole row into its entry if the batch has not yet;
    /// false when the job is missing or deleted.
    fn ensure_row(&mut self, id: JobId) -> Result<bool> {
        let Some(e) = self.entry(id)? else { return Ok(false) };
        if e.row.is_some() {
            return Ok(true);
        }
        let Some(row) = self.store.job_get(id)? else {
            return Ok(false);
        };
        if let Some(Slot::Row(e)) = self.jobs.get_mut(&id) {
            e.row = Some(Box::new(row));
        }
        Ok(true)
    }

    /// The whole job, with its status as this batch left it.
    pub(crate) fn job(&mut self, id: JobId) -> Result<Option<Job>> {
        if !self.jobs.contains_key(&id) {
            // Not read yet: the whole row in one read.
            let slot = match self.store.job_get(id) {
                Ok(Some(job)) => Slot::Row(Box::new(Entry::read(job.status.clone(), Some(Box::new(job))))),
                Ok(None) => Slot::Missing,
                Err(StoreError::Corrupt { job, reason }) => Slot::Corrupt(job, reason),
                Err(e) => return Err(e.into()),
            };
            self.jobs.insert(id, slot);
        }
        let Some(e) = self.entry(id)? else { return Ok(None) };
        if e.row.is_none() {
            let Some(row) = self.store.job_get(id)? else {
                return Ok(None);
            };
            if let Some(Slot::Row(e)) = self.jobs.get_mut(&id) {
                e.row = Some(Box::new(row));
            }
        }
        let Some(Slot::Row(e)) = self.jobs.get(&id) else {
            return Ok(None);
        };
        let fields = e.fields.as_deref();
        Ok(e.row.as_deref().map(|r| Job {
            status: e.status.clone(),
            payload: fields
                .and_then(|f| f.payload.clone())
                .unwrap_or_else(|| r.payload.clone()),
            progress: fields
                .and_then(|f| f.progress.as_ref())
                .map_or_else(|| r.progress.clone(), |(p, _)| Some(p.clone())),
            steps: fields
                .and_then(|f| f.steps.as_ref())
                .map_or_else(|| r.steps.clone(), |(s, _)| s.clone()),
            // A result this batch writes (an ack), read by a join it ends.
            result: e.result.clone().or_else(|| r.result.clone()),
            ..r.clone()
        }))
    }

    /// A new job; returns its id.
    pub(crate) fn insert(&mut self, job: Job) -> Result<JobId> {
        if self.fresh_ids.is_empty() {
            let n = self.submits.max(1);
            let mut ids = self.store.job_ids(n)?;
            ids.reverse();
            self.fresh_ids = ids;
        }
        let id = self.fresh_ids.pop().ok_or_else(|| {
            Error::Storage(std::sync::Arc::new(StoreError::Io {
                message: "the store reserved no id for a new job".into(),
                source: "job_ids returned too few".into(),
            }))
        })?;
        self.submits = self.submits.saturating_sub(1);
        if let Some(key) = job.unique_key.clone() {
            self.take_key(key, id);
        }
        let status = job.status.clone();
        self.save(id);
        self.jobs.insert(
            id,
            Slot::Row(Box::new(Entry {
                base: None,
                status: status.clone(),
                row: Some(Box::new(Job { id, ..job })),
                result: None,
                fields: None,
                written: true,
                deleted: false,
                seq_base: Some(0),
                events: 0,
                saved_by: 0,
            })),
        );
        self.written.push(id);
        if status.state == JobState::Ready && status.ready_at <= self.now {
            self.readied.push(id);
        }
        Ok(id)
    }

    /// Job `id`'s new status (and result, when given).
    pub(crate) fn update(&mut self, id: JobId, status: JobStatus, result: Option<&[u8]>) -> Result<()> {
        if self.entry(id)?.is_none() {
            return Err(Error::NotFound { id });
        }
        self.save(id);
        let now = self.now;
        let Some(Slot::Row(e)) = self.jobs.get_mut(&id) else {
            return Err(Error::NotFound { id });
        };
        let was_claimable = e.claimable(now);
        e.status = status;
        if let Some(r) = result {
            e.result = Some(r.to_vec());
        }
        let first = !e.written;
        e.written = true;
        let readied = !was_claimable && e.claimable(now);
        if first {
            self.written.push(id);
        }
        if readied {
            self.readied.push(id);
        }
        Ok(())
    }

    /// Job `id`'s new payload and progress (each kept when `None`), with
    /// its new status (given to `update`).
    pub(crate) fn set_fields(&mut self, id: JobId, payload: Option<&[u8]>, progress: Option<&Progress>) -> Result<()> {
        if self.entry(id)?.is_none() {
            return Err(Error::NotFound { id });
        }
        self.save(id);
        let Some(Slot::Row(e)) = self.jobs.get_mut(&id) else {
            return Err(Error::NotFound { id });
        };
        let f = e.fields.get_or_insert_with(Box::default);
        if let Some(p) = payload {
            f.payload = Some(p.to_vec());
        }
        if let Some(p) = progress {
            f.progress = Some((p.clone(), relay_store::decode::progress_text(p)));
        }
        if !e.written {
            e.written = true;
            self.written.push(id);
        }
        Ok(())
    }

    /// Job `id`'s steps, all of them, replaced by `steps` (with its new
    /// status, given to `update`).
    pub(crate) fn set_steps(&mut self, id: JobId, steps: Vec<Step>) -> Result<()> {
        if self.entry(id)?.is_none() {
            return Err(Error::NotFound { id });
        }
        self.save(id);
        let Some(Slot::Row(e)) = self.jobs.get_mut(&id) else {
            return Err(Error::NotFound { id });
        };
        let bytes = relay_store::decode::steps_bytes(&steps);
        e.fields.get_or_insert_with(Box::default).steps = Some((steps, bytes));
        if !e.written {
            e.written = true;
            self.written.push(id);
        }
        Ok(())
    }

    pub(crate) fn delete(&mut self, id: JobId) -> Result<()> {
        if self.entry(id)?.is_none() {
            return Err(Error::NotFound { id });
        }
        self.save(id);
        let Some(Slot::Row(e)) = self.jobs.get_mut(&id) else {
            return Err(Error::NotFound { id });
        };
        e.deleted = true;
        let first = !e.written;
        e.written = true;
        if first {
            self.written.push(id);
        }
        Ok(())
    }

    /// Deletes a row that does not decode (the one write such a row takes).
    pub(crate) fn delete_corrupt(&mut self, id: JobId) -> Result<()> {
        let Some(Slot::Corrupt(job, reason)) = self.jobs.remove(&id) else {
            return Err(Error::NotFound { id });
        };
        if self.logging {
            self.undo.push(Undo::Corrupt(id, job, reason));
        }
        let status = JobStatus::new_ready(self.now, 1);
        let mut e = Entry::read(status, None);
        e.deleted = true;
        e.written = true;
        self.jobs.insert(id, Slot::Row(Box::new(e)));
        self.written.push(id);
        Ok(())
    }

    /// Appends one of the engine's own events to job `id`. The end of an
    /// attempt (`succeeded`, `failed`, `expired`) counts in the throughput
    /// history.
    pub(crate) fn event(&mut self, id: JobId, kind: EventKind, data: String) -> Result<()> {
        self.append_event(id, Cow::Borrowed(kind.as_str()), data, |status| match kind {
            EventKind::Succeeded => Tally {
                succeeded: 1,
                ..Tally::default()
            },
            EventKind::Failed | EventKind::Expired => Tally {
                failed: 1,
                dead: u32::from(status.state == JobState::Dead),
                ..Tally::default()
            },
            _ => Tally::default(),
        })
        .map(drop)
    }

    /// Appends a user's event (any kind, counted nowhere) to job `id` and
    /// returns its number, reading the job's last number first if this
    /// batch has not yet.
    pub(crate) fn user_event(&mut self, id: JobId, kind: String, data: String) -> Result<i64> {
        let Some(e) = self.entry(id)? else {
            return Err(Error::NotFound { id });
        };
        let base = match e.seq_base {
            Some(base) => base,
            None => {
                let base = self.store.event_last_seq(id)?;
                if let Some(Slot::Row(e)) = self.jobs.get_mut(&id) {
                    e.seq_base = Some(base);
                }
                base
            }
        };
        let ord = self.append_event(id, Cow::Owned(kind), data, |_| Tally::default())?;
        let seq = base + ord;
        if seq > MAX_EVENTS_APPENDED {
            // The operation fails alone and its event is undone with it.
            return Err(Error::InvalidInput(relay_core::InvalidInput::new(
                "events",
                format!(
                    "job {id} holds {} events, the most a job's log takes appended events up to \
                     (the engine's own events, leases and outcomes, are still kept)",
                    seq - 1
                ),
            )));
        }
        Ok(seq)
    }

    /// Appends an event to job `id`, tallied from the job's status; returns
    /// its place among this batch's events of the job.
    fn append_event(
        &mut self,
        id: JobId,
        kind: Cow<'static, str>,
        data: String,
        tally: impl FnOnce(&JobStatus) -> Tally,
    ) -> Result<i64> {
        if self.entry(id)?.is_none() {
            return Err(Error::NotFound { id });
        }
        self.save(id);
        let at = self.now;
        let Some(Slot::Row(e)) = self.jobs.get_mut(&id) else {
            return Err(Error::NotFound { id });
        };
        e.events += 1;
        let ord = e.events;
        let tally = tally(&e.status);
        self.events.push(PlannedEvent {
            job: id,
            ord,
            at,
            kind,
            data,
            tally,
        });
        Ok(ord)
    }

    fn take_key(&mut self, key: String, id: JobId) {
        let prev = self.taken.insert(key.clone(), id);
        if self.logging {
            self.undo.push(Undo::Taken(key, prev));
        }
    }

    /// The unfinished job holding `key` as this batch left it.
    pub(crate) fn active_by_key(&mut self, key: &str) -> Result<Option<JobId>> {
        if let Some(&id) = self.taken.get(key) {
            if matches!(self.jobs.get(&id), Some(Slot::Row(e)) if e.unfinished()) {
                return Ok(Some(id));
            }
        }
        let holder = match self.holders.get(key) {
            Some(h) => *h,
            None => {
                let h = self.store.job_find_active_by_key(key)?;
                self.holders.insert(key.to_owned(), h);
                h
            }
        };
        Ok(holder.filter(|h| match self.jobs.get(h) {
            Some(Slot::Row(e)) => e.unfinished(),
            Some(Slot::Missing) => false,
            Some(Slot::Corrupt(..)) | None => true,
        }))
    }

    /// What a retry of finished job `id` checks: its unique key, and the
    /// other unfinished job holding that key now (a conflict), if any.
    pub(crate) fn retry_key(&mut self, id: JobId) -> Result<Option<(String, Option<JobId>)>> {
        let known = match self.jobs.get(&id) {
            Some(Slot::Row(e)) => e.row.as_ref().map(|r| r.unique_key.clone()),
            _ => None,
        };
        let key = match known {
            Some(k) => k,
            None => self.store.job_unique_key(id)?,
        };
        let Some(key) = key else { return Ok(None) };
        let holder = self.active_by_key(&key)?.filter(|h| *h != id);
        Ok(Some((key, holder)))
    }

    /// A retry gave job `id` its key back.
    pub(crate) fn retake_key(&mut self, key: String, id: JobId) {
        self.take_key(key, id);
    }

    /// LEASED jobs whose lease expired at or before `now`, and SCHEDULED
    /// or RETRYING jobs due by then, as this batch left them.
    pub(crate) fn overdue(&mut self) -> Result<Vec<JobId>> {
        let mut ids = match self.overdue.take() {
            Some(ids) => ids,
            None => {
                let ids = self.store.job_overdue(self.now)?;
                self.load_statuses(ids.clone())?;
                ids
            }
        };
        // Not one that an earlier operation of the batch changed (acked,
        // cancelled, already reclaimed or promoted). A corrupt row stays,
        // for the reap to report.
        let now = self.now;
        ids.retain(|id| match self.jobs.get(id) {
            Some(Slot::Row(e)) => {
                !e.deleted
                    && match e.status.state {
                        JobState::Leased => e.status.lease.as_ref().is_some_and(|l| l.expires_at <= now),
                        JobState::Scheduled | JobState::Retrying => e.status.ready_at <= now,
                        // Asleep (WAITING on no other job) until ready_at.
                        JobState::Waiting => e.status.waiting_on == 0 && e.status.ready_at <= now,
                        _ => false,
                    }
            }
            Some(Slot::Corrupt(..)) => true,
            Some(Slot::Missing) | None => false,
        });
        Ok(ids)
    }

    /// What the batch writes, for [`Store::apply`]; then the store to apply
    /// it with.
    pub(crate) fn changes(&mut self) -> (Changes<'_>, &mut dyn Store) {
        let mut ch = Changes {
            queues: queues::writes(&self.queues, self.now),
            schedules: schedules::writes(&self.schedules),
            marks: marks::writes(&self.marks),
            at: self.now,
            ..Changes::default()
        };
        (ch.waits, ch.waits_ended) = waits::writes(&self.waits, &self.jobs);
        let mut tallies: HashMap<JobId, Tally> = HashMap::default();
        for ev in self.events.iter().filter(|e| !e.tally.is_zero()) {
            let t = tallies.entry(ev.job).or_default();
            t.succeeded += ev.tally.succeeded;
            t.failed += ev.tally.failed;
            t.dead += ev.tally.dead;
        }
        let mut taking = Vec::new();
        for id in &self.written {
            let Some(Slot::Row(e)) = self.jobs.get(id) else {
                continue;
            };
            match (e.base, e.deleted) {
                (None, true) => {}
                (Some(_), true) => ch.deletes.push(*id),
                (None, false) => {
                    let Some(row) = e.row.as_deref() else { continue };
                    ch.inserts.push(JobInsert {
                        id: *id,
                        queue: &row.queue,
                        kind: &row.kind,
                        payload: e
                            .fields
                            .as_ref()
                            .and_then(|f| f.payload.as_deref())
                            .unwrap_or(&row.payload),
                        priority: row.priority,
                        unique_key: row.unique_key.as_deref(),
                        created_at: row.created_at,
                        status: &e.status,
                        result: e.result.as_deref(),
                        lease_for: row.lease_for,
                        timeout: row.timeout,
                        traceparent: row.traceparent.as_deref(),
                        tags: &row.tags,
                        group: row.group.as_deref(),
                    });
                    // A job inserted and given progress or steps in one
                    // batch (its payload is the insert's).
                    if let Some(f) = e
                        .fields
                        .as_deref()
                        .filter(|f| f.progress.is_some() || f.steps.is_some())
                    {
                        ch.fields.push(FieldsWrite {
                            id: *id,
                            payload: None,
                            progress: f.progress.as_ref().map(|(_, text)| text.as_str()),
                            steps: f.steps.as_ref().map(|(_, b)| b.as_slice()),
                        });
                    }
                }
                (Some((state, token)), false) => {
                    if let Some(f) = e.fields.as_deref() {
                        ch.fields.push(FieldsWrite {
                            id: *id,
                            payload: f.payload.as_deref(),
                            progress: f.progress.as_ref().map(|(_, text)| text.as_str()),
                            steps: f.steps.as_ref().map(|(_, b)| b.as_slice()),
                        });
                    }
                    let u = JobUpdate {
                        id: *id,
                        expect_state: state,
                        expect_token: token,
                        status: &e.status,
                        result: e.result.as_deref(),
                        tally: tallies.get(id).copied().unwrap_or_default(),
                    };
                    if state.is_finished() && !e.status.state.is_finished() {
                        taking.push(u);
                    } else {
                        ch.updates.push(u);
                    }
                }
            }
        }
        ch.updates_taking_keys = taking.len();
        ch.updates.append(&mut taking);
        (ch.dependents, ch.settled) = self.dependency_writes();
        if self.group_heads && self.store.behaviour().locks_candidates {
            (ch.heads, ch.heads_unread) = heads_left(&self.written, &self.jobs, &self.pools);
        }
        for ev in &self.events {
            let Some(Slot::Row(e)) = self.jobs.get(&ev.job) else {
                continue;
            };
            if e.deleted {
                continue;
            }
            ch.events.push(EventRow {
                job: ev.job,
                base: e.seq_base,
                ord: ev.ord,
                at: ev.at,
                kind: &ev.kind,
                data: &ev.data,
            });
        }
        (ch, self.store)
    }
}

/// `Changes::heads` and `heads_unread`, where the store keeps groups'
/// heads apart: the groups whose READY jobs the batch takes out of READY
/// (the jobs, where their rows were not read), and those whose head a
/// claim found without a job.
#[allow(clippy::type_complexity)]
fn heads_left<'p>(
    written: &[JobId],
    jobs: &'p HashMap<JobId, Slot>,
    pools: &'p [Pool],
) -> (Vec<(&'p str, Priority, &'p str)>, Vec<JobId>) {
    let mut out: Vec<(&str, Priority, &str)> = Vec::new();
    let mut unread = Vec::new();
    for id in written {
        let Some(Slot::Row(e)) = jobs.get(id) else {
            continue;
        };
        let was_ready = e.base.is_some_and(|(state, _)| state == JobState::Ready);
        if !was_ready || (!e.deleted && e.status.state == JobState::Ready) {
            continue;
        }
        match e.row.as_deref() {
            Some(row) => {
                if let Some(g) = row.group.as_deref() {
                    out.push((&row.queue, row.priority, g));
                }
            }
            None => unread.push(*id),
        }
    }
    for pool in pools {
        for (p, class) in pool.classes.iter().enumerate().skip(CLASSES / 2) {
            let priority = Priority::ALL[(p - CLASSES / 2).min(3)];
            out.extend(class.held.iter().map(|g| (pool.queue.as_str(), priority, g.as_str())));
        }
    }
    out.sort_unstable();
    out.dedup();
    (out, unread)
}

impl Entry {
    fn read(status: JobStatus, row: Option<Box<Job>>) -> Self {
        Self {
            base: Some((status.state, status.last_token)),
            status,
            row,
            result: None,
            fields: None,
            written: false,
            deleted: false,
            seq_base: None,
            events: 0,
            saved_by: 0,
        }
    }
}
