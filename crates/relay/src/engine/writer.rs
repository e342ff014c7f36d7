//! The writer thread: group commit.
//!
//! Every write of a process goes through here. The thread blocks for the
//! first waiting operation, drains every other one already waiting (up to
//! `max_batch`), applies them in ONE transaction (one failing operation fails
//! alone: see `plan_and_apply`), commits once, and only then answers each caller.
//! Alone, a caller waits one fsync; under load one fsync serves everyone who
//! arrived while the previous commit ran. Where the store splits its commit
//! (SQLite), the fsync runs on a sync thread while the writer applies the
//! next batch; nobody is answered before the fsync that covers their change.
//! The writer itself is a mutex-guarded [`Writer`]: its thread holds it
//! while it builds and commits a batch, and a caller that finds it idle with
//! nothing else in flight may commit its own operation (`Engine::run`).
//!
//! The channel into the thread is bounded (`queue_capacity`): when it is
//! full, callers block in `send` — that is the back-pressure point.

use super::batch::{BatchCtx, Duties};
use super::durable::{self, Durability};
use super::housekeeping::{self, Housekeeping};
use super::metrics::Counters;
use super::plan::{Hint, Plan};
use super::signal::ReadySignal;
use crate::error::{Error, Result};
use crate::options::Options;
use relay_core::{JobId, Timestamp};
use relay_store::{Behaviour, CommitFailed, Store, StoreError, Syncer, WriterStore};
use std::sync::Arc;

mod held;
pub(crate) use held::HeldStatuses;

/// One caller's operation, waiting for its batch.
pub(crate) trait Operation: Send {
    /// What it will read, so the batch can read it for everyone at once.
    fn hint(&self) -> &Hint;
    /// Plans the operation: reads through `plan` and records what it
    /// writes there. The result is kept for `finish`; the returned error (a
    /// copy) says whether it failed alone or failed the batch.
    fn plan(&mut self, plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>) -> Result<()>;
    /// Answers the caller once the batch's fate is known: the operation's
    /// own error if it failed, else the batch's error, else its value.
    fn finish(self: Box<Self>, batch: Result<()>);
    /// True for claims: the batch reclaims expired leases first.
    fn claims(&self) -> bool {
        self.hint().claims()
    }
    /// The job whose lease's holder this operation comes from, where it
    /// reads nothing but that job's status and the jobs waiting for it
    /// (see [`super::Pending::held`]).
    fn held(&self) -> Option<JobId> {
        None
    }
    /// Drops what `plan` last kept for the answer: a plan that was not
    /// written (see `Writer::unread`) must not answer the caller.
    fn forget_plan(&mut self) {}
}

pub(crate) type Work<T> = Box<dyn FnMut(&mut Plan<'_>, &mut BatchCtx<'_>) -> Result<T> + Send>;

/// An operation returning `T`, answered on a typed reply channel.
pub(crate) struct Call<T> {
    work: Work<T>,
    out: Option<Result<T>>,
    reply: flume::Sender<Result<T>>,
    hint: Hint,
    /// See [`Operation::held`].
    holder_of: Option<JobId>,
}

impl<T: Send + 'static> Call<T> {
    /// An operation that reads what `hint` says.
    pub(crate) fn boxed(work: Work<T>, hint: Hint) -> (Box<dyn Operation>, flume::Receiver<Result<T>>) {
        Self::with_holder(work, hint, None)
    }

    /// An operation of the holder of `id`'s lease (see
    /// [`Operation::held`]).
    pub(crate) fn of_holder(work: Work<T>, id: JobId) -> (Box<dyn Operation>, flume::Receiver<Result<T>>) {
        Self::with_holder(work, Hint::Jobs(vec![id]), Some(id))
    }

    fn with_holder(
        work: Work<T>,
        hint: Hint,
        holder_of: Option<JobId>,
    ) -> (Box<dyn Operation>, flume::Receiver<Result<T>>) {
        let (reply, rx) = flume::bounded(1);
        (
            Box::new(Call {
                work,
                out: None,
                reply,
                hint,
                holder_of,
            }),
            rx,
        )
    }
}

impl<T: Send + 'static> Operation for Call<T> {
    fn hint(&self) -> &Hint {
        &self.hint
    }

    fn held(&self) -> Option<JobId> {
        self.holder_of
    }

    fn forget_plan(&mut self) {
        self.out = None;
    }

    fn plan(&mut self, plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>) -> Result<()> {
        let r = (self.work)(plan, ctx);
        let status = match &r {
            Ok(_) => Ok(()),
            Err(e) => Err(e.clone()),
        };
        self.out = Some(r);
        status
    }

    fn finish(self: Box<Self>, batch: Result<()>) {
        let answer = match (self.out, batch) {
            (Some(Err(own)), _) => Err(own),
            (_, Err(e)) => Err(e),
            (Some(Ok(v)), Ok(())) => Ok(v),
            (None, Ok(())) => Err(Error::Closed), // never applied: cannot happen after a commit
        };
        let _ = self.reply.send(answer); // the caller may have given up waiting
    }
}

/// A committed (or failed) batch on its way to its callers.
pub(crate) struct Answered {
    ops: Vec<Box<dyn Operation>>,
    outcome: Result<()>,
    /// A job became ready: wake waiting lessees.
    made_ready: bool,
    /// The commit's number when it still needs its fsync (a split commit).
    unsynced: Option<u64>,
}

impl Answered {
    /// A written batch's answer, before its operations are moved in
    /// (`Writer::route`). Waiting lessees are woken when it is answered,
    /// after its fsync: never for a job whose submit is not yet durable.
    fn unsent(outcome: Result<()>, made_ready: bool, unsynced: Option<u64>) -> Self {
        Self {
            ops: Vec::new(),
            outcome,
            made_ready,
            unsynced,
        }
    }

    /// A batch that was not made durable gets the sync's error instead of
    /// its own success.
    fn sync_failed(&mut self, e: &Error) {
        if self.unsynced.is_some() && self.outcome.is_ok() {
            self.outcome = Err(e.clone());
        }
    }

    /// Syncs (when the commit is split and not yet synced), then answers:
    /// how the thread that committed a small batch finishes it.
    pub(crate) fn finish(mut self, d: &Deliver) {
        if let Some(seq) = self.unsynced {
            if let Err(e) = d.sync(seq) {
                self.sync_failed(&e);
            }
        }
        answer(&mut self.ops, &self.outcome, self.made_ready, &d.ready);
    }
}

/// Answers callers on a thread of its own, so that waking them (a futex
/// wake per caller, measured at 13% of the writer's time) overlaps the
/// writer's next batch instead of delaying it. Emptied batch vectors go
/// back to the writer for reuse.
pub(crate) fn reply_loop(
    rx: flume::Receiver<Answered>,
    recycle: flume::Sender<Vec<Box<dyn Operation>>>,
    ready: Arc<ReadySignal>,
) {
    for mut done in rx {
        answer(&mut done.ops, &done.outcome, done.made_ready, &ready);
        let _ = recycle.try_send(done.ops);
    }
}

/// The middle stage of a split commit: takes every committed batch waiting,
/// fsyncs once for all of them, and passes them to the reply thread. The
/// writer applies the next batch meanwhile, and the reply thread wakes the
/// previous batch's callers while this one waits on the disk.
pub(crate) fn sync_loop(rx: flume::Receiver<Answered>, replies: flume::Sender<Answered>, d: Deliver) {
    let mut pending: Vec<Answered> = Vec::new();
    while let Ok(first) = rx.recv() {
        pending.push(first);
        pending.extend(rx.try_iter());
        if let Some(seq) = pending.iter().filter_map(|a| a.unsynced).max() {
            if let Err(e) = d.sync(seq) {
                pending.iter_mut().for_each(|a| a.sync_failed(&e));
            }
        }
        for done in pending.drain(..) {
            if let Err(flume::SendError(mut lost)) = replies.send(done) {
                answer(&mut lost.ops, &lost.outcome, lost.made_ready, &d.ready);
            }
        }
    }
}

/// How often a batch is applied again after a transient conflict with
/// another process (see [`Behaviour::busy_is_transient`]).
const BUSY_RETRIES: u32 = 3;

/// Batches this small (with nobody else waiting) are synced and answered by
/// the thread that committed them, not handed on.
const REPLY_INLINE_MAX: usize = 2;

fn answer(ops: &mut Vec<Box<dyn Operation>>, outcome: &Result<()>, made_ready: bool, ready: &ReadySignal) {
    if outcome.is_ok() && made_ready {
        ready.notify();
    }
    for op in ops.drain(..) {
        op.finish(outcome.clone());
    }
}

/// What finishing a batch needs: its fsync (split commits) and its answers.
#[derive(Clone)]
pub(crate) struct Deliver {
    /// The store's syncer when its commits are split (see [`Store::syncer`]).
    pub syncer: Option<Arc<dyn Syncer>>,
    pub durability: Arc<Durability>,
    pub counters: Arc<Counters>,
    pub ready: Arc<ReadySignal>,
    /// Wakes callers awaiting jobs' ends.
    pub finished: Arc<super::signal::FinishSignal>,
    /// Held for the length of one sync: syncs of one file never overlap.
    pub sync_turn: Arc<std::sync::Mutex<()>>,
}

impl Deliver {
    /// An fsync is running now (another thread holds the turn).
    fn sync_busy(&self) -> bool {
        self.sync_turn.try_lock().is_err()
    }

    /// The second half of a split commit: makes every commit up to `seq`
    /// durable, or stops the Relay when the disk failed.
    ///
    /// Linux reports a failed writeback once and may then drop the pages,
    /// so a later fsync can "succeed" over a hole: the first failure is
    /// final. Syncs run one at a time, none starts after a failure, and
    /// the failure flag is read again after every successful one, so no
    /// batch is answered Ok once any sync of this Relay has failed.
    fn sync(&self, seq: u64) -> Result<()> {
        let Some(syncer) = self.syncer.as_deref() else {
            return Ok(()); // every commit was durable by itself
        };
        let _one_at_a_time = self.sync_turn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(e) = self.durability.failure() {
            return Err(Error::MaybeApplied(e));
        }
        let _span = tracing::debug_span!("relay.fsync", seq).entered();
        match syncer.sync() {
            Ok(()) => {
                if let Some(e) = self.durability.failure() {
                    return Err(Error::MaybeApplied(e));
                }
                self.counters.synced();
                self.durability.mark_durable(seq);
                Ok(())
            }
            Err(e) => {
                let e = Arc::new(e);
                tracing::error!(error = %e, "fsync failed; its callers are told their changes may be on disk, and this Relay stops writing");
                self.counters.commit_failed();
                self.durability.fail(Arc::clone(&e));
                Err(Error::MaybeApplied(e))
            }
        }
    }
}

/// The writer: the store's write connection and the batch being built.
/// One thread at a time holds it (a mutex): the writer thread, or a caller
/// that found it idle with nothing waiting and commits its own operation
/// without a thread hop (see `Engine::run`).
pub(crate) struct Writer {
    pub store: Box<WriterStore>,
    pub deliver: Deliver,
    pub rx: flume::Receiver<Box<dyn Operation>>,
    pub options: Options,
    /// The next stage (sync or replies); `None` once the writer thread has
    /// stopped, so that stage can drain and stop.
    pub replies: Option<flume::Sender<Answered>>,
    pub recycled: flume::Receiver<Vec<Box<dyn Operation>>>,
    /// Corrupt rows the reaper has reported, so each is logged once.
    pub corrupt_reported: std::collections::HashSet<relay_core::JobId>,
    pub rng: fastrand::Rng,
    pub batch: Vec<Box<dyn Operation>>,
    /// When expired leases were last reclaimed and finished jobs pruned,
    /// shared by every writer of the Relay (so "the first batch after
    /// opening reaps" holds once, whichever writer takes it).
    pub housekeeping: Arc<Housekeeping>,
    /// The statuses of the jobs this Relay leased, shared by its writers.
    pub held: Arc<HeldStatuses>,
    /// How its batches reach the disk, chosen at open.
    pub path: CommitPath,
    /// What its store does, asked at open.
    pub behaviour: Behaviour,
}

/// How a writer's batches reach the disk: chosen once, from what its store
/// does (`CommitPath::of`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommitPath {
    /// The COMMIT makes the batch durable by itself, and nothing runs
    /// between the write and it (no commit to number for a sync, no final
    /// commit failure to watch for): the store sends both at once
    /// (PostgreSQL: one round trip fewer per batch).
    Fused,
    /// The write, then the COMMIT, whose fsync runs apart on the sync
    /// thread: the batch is numbered before COMMIT, and nobody is answered
    /// before the fsync that covers it (SQLite, see [`Store::syncer`]).
    Split,
    /// The write, then a COMMIT that makes it durable, watched for a
    /// failure that leaves the file behind what this process saw
    /// ([`Behaviour::failed_commit_is_final`]); also an operation run inside
    /// its caller's transaction, which the caller commits.
    Plain,
}

impl CommitPath {
    /// The path of a writer on `store`, with `syncer` when its commits are
    /// split.
    pub(crate) fn of(store: &WriterStore, syncer: Option<&Arc<dyn Syncer>>) -> Self {
        if syncer.is_some() {
            Self::Split
        } else if store.behaviour().failed_commit_is_final {
            Self::Plain
        } else {
            Self::Fused
        }
    }
}

/// The writer thread: waits for operations, applies them in batches, until
/// every sender is dropped.
pub(crate) fn run(
    writer: &std::sync::Mutex<Writer>,
    rx: &flume::Receiver<Box<dyn Operation>>,
    d: &Deliver,
    reap_interval: std::time::Duration,
) {
    let (housekeeping, scheduler) = {
        let w = writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (Arc::clone(&w.housekeeping), w.options.scheduler)
    };
    loop {
        // Taken once: only a tick that fires a full pass again sets it.
        let wait = if housekeeping.take_ticks_left() {
            std::time::Duration::ZERO
        } else if scheduler {
            // Due schedules fire within a quarter second, even when idle.
            reap_interval.min(housekeeping::TICK_EVERY)
        } else {
            reap_interval
        };
        let first = match rx.recv_timeout(wait) {
            Ok(op) => Some(op),
            Err(flume::RecvTimeoutError::Timeout) => None,
            Err(flume::RecvTimeoutError::Disconnected) => break,
        };
        let inline = writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .process(first);
        if let Some(done) = inline {
            done.finish(d);
        }
    }
    // Lets the sync and reply stages drain and stop; the connection itself
    // closes when the engine drops the writer, after them.
    writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner).replies = None;
    tracing::debug!("relay writer stopped");
}

impl Writer {
    /// Another writer on `store` taking batches from the same queue, with
    /// the same next stages and housekeeping times (see `Backend::writers`).
    pub(crate) fn sibling(&self, store: Box<WriterStore>) -> Self {
        Self {
            path: CommitPath::of(store.as_ref(), self.deliver.syncer.as_ref()),
            behaviour: store.behaviour(),
            store,
            deliver: self.deliver.clone(),
            rx: self.rx.clone(),
            options: self.options.clone(),
            replies: self.replies.clone(),
            recycled: self.recycled.clone(),
            corrupt_reported: std::collections::HashSet::new(),
            rng: fastrand::Rng::new(),
            batch: Vec::with_capacity(self.options.max_batch),
            housekeeping: Arc::clone(&self.housekeeping),
            held: Arc::clone(&self.held),
        }
    }

    /// Applies `first` and every operation already waiting as one batch
    /// and commits it. A batch of more than two callers goes on to the sync
    /// and reply threads; a smaller one comes back, to be synced and
    /// answered by the caller of `process` once it has let go of the writer
    /// (so that the next batch can be applied during that fsync).
    pub(crate) fn process(&mut self, first: Option<Box<dyn Operation>>) -> Option<Answered> {
        let mut batch = std::mem::take(&mut self.batch);
        batch.extend(first);
        while batch.len() < self.options.max_batch {
            match self.rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        let inline = self.execute(&mut batch);
        self.batch = batch;
        inline
    }

    /// The batch's instant, and its duties. Read once the write lock is
    /// held: `BEGIN` may wait up to the busy timeout for another process,
    /// and a lease must not be judged by a clock read before that wait (an
    /// ack 10 s past its expiry would be accepted).
    fn instant(&mut self, batch: &[Box<dyn Operation>]) -> (Timestamp, Duties) {
        let now = self.options.clock.now();
        let claims = batch.iter().any(|op| op.claims());
        (now, self.housekeeping.duties(now, claims, &self.options))
    }

    /// Commits the open transaction; counts it when it carried anything.
    fn commit(&mut self, ops: usize, reaped: usize) -> Result<()> {
        match self.store.commit() {
            Ok(()) => {
                self.committed(ops, reaped);
                Ok(())
            }
            Err(e) => self.commit_failed(e),
        }
    }

    fn committed(&self, ops: usize, reaped: usize) {
        // An idle reap that found nothing wrote nothing: no fsync, no count.
        if ops > 0 || reaped > 0 {
            self.deliver.counters.committed(ops);
        }
    }

    /// A commit whose fate is unknown: its callers are told so.
    fn commit_failed(&mut self, e: StoreError) -> Result<()> {
        let _ = self.store.rollback();
        self.deliver.counters.commit_failed();
        tracing::error!(error = %e, "commit failed; its callers are told the change may be on disk");
        let e = Arc::new(e);
        if self.behaviour.failed_commit_is_final && !matches!(*e, StoreError::Busy | StoreError::Full { .. }) {
            // COMMIT wrote (and, unsplit, fsynced) the file: after an
            // I/O error there, what this process sees may be ahead
            // of the disk. Same rule as a failed sync.
            self.deliver.durability.fail(Arc::clone(&e));
        }
        Err(Error::MaybeApplied(e))
    }

    /// Writes and commits one batch, then routes its answers.
    fn execute(&mut self, batch: &mut Vec<Box<dyn Operation>>) -> Option<Answered> {
        let _span = tracing::debug_span!("relay.commit", ops = batch.len()).entered();
        let done = self.write(batch)?;
        if let Err(e) = &done.outcome {
            // A caller's write failed (an idle pass's failure, say a
            // connection to restart, is no caller's answer; Busy is
            // another process's turn, not a failure).
            if !batch.is_empty() && !matches!(e, Error::Busy) {
                self.deliver
                    .counters
                    .write_failed(e.to_string(), self.options.clock.now());
            }
        }
        self.route(batch, done)
    }

    /// Writes `batch` and commits it: one holder's operation alone is
    /// planned without a read where it can be (`unread`), anything else
    /// from reads, again after a conflict with another process. `None`:
    /// refused and answered, because a sync failed (writing on could make
    /// later answers durable while an earlier commit is lost).
    fn write(&mut self, batch: &mut Vec<Box<dyn Operation>>) -> Option<Answered> {
        if let Some(e) = self.deliver.durability.failure() {
            refuse(batch, &e, &self.deliver.ready);
            return None;
        }
        let mut instant = None;
        if let Some((outcome, made_ready)) = self.unread(batch, &mut instant) {
            return Some(Answered::unsent(outcome, made_ready, None));
        }
        let mut conflicts = 0;
        loop {
            match self.attempt(batch, &mut instant) {
                Attempt::Done {
                    outcome,
                    made_ready,
                    unsynced,
                } => return Some(Answered::unsent(outcome, made_ready, unsynced)),
                Attempt::Refused => return None,
                Attempt::Conflict if conflicts < BUSY_RETRIES => {
                    conflicts += 1;
                    tracing::debug!("the batch met a conflict with another process; planning it again");
                }
                Attempt::Conflict => return Some(Answered::unsent(Err(Error::Busy), false, None)),
            }
        }
    }

    /// One try at a batch: BEGIN, plan and apply, COMMIT (numbered first
    /// when its fsync comes apart).
    fn attempt(&mut self, batch: &mut Vec<Box<dyn Operation>>, instant: &mut Option<(Timestamp, Duties)>) -> Attempt {
        if let Err(e) = self.store.begin() {
            let _ = self.store.rollback();
            return Attempt::failed(e.into());
        }
        // A redo keeps the first try's duties, but its clock is read
        // again: this BEGIN may have waited too.
        let (now, duties) = match *instant {
            Some((_, duties)) => (self.options.clock.now(), duties),
            None => *instant.insert(self.instant(batch)),
        };
        let mut ctx = BatchCtx::new(now, duties, &self.options, &mut self.rng, &mut self.corrupt_reported);
        if self.deliver.finished.any() {
            ctx.ended_jobs = Some(Vec::new());
        }
        let held = self.behaviour.applies_unread.then(|| Arc::clone(&self.held));
        let planned = plan_and_apply(self.store.as_mut(), batch, &mut ctx, self.path, held.as_deref());
        let tallied = planned.is_ok().then(|| {
            self.housekeeping.ticked(&ctx);
            housekeeping::Tallied::take(&mut ctx)
        });
        let made_ready = ctx.made_ready;
        let ended_jobs = ctx.ended_jobs.take();
        match planned {
            Ok(Planned::Committed(reaped)) => {
                self.committed(batch.len(), reaped);
                if let Some(ended) = &ended_jobs {
                    self.deliver.finished.notify(ended);
                }
                if let Some(t) = tallied {
                    t.add(&self.deliver.counters, &self.housekeeping);
                }
                Attempt::Done {
                    outcome: Ok(()),
                    made_ready,
                    unsynced: None,
                }
            }
            Ok(Planned::CommitFailed(e)) => Attempt::failed_commit(self.commit_failed(e)),
            Ok(Planned::Applied(reaped)) => {
                if let Some(e) = self.deliver.durability.failure() {
                    // A sync failed while this batch was applied: it must
                    // not reach the file.
                    let _ = self.store.rollback();
                    refuse(batch, &e, &self.deliver.ready);
                    return Attempt::Refused;
                }
                // Numbered before COMMIT: any reader that sees this batch
                // then waits for its fsync (see durable.rs).
                let unsynced = (self.path == CommitPath::Split && (!batch.is_empty() || reaped > 0))
                    .then(|| self.deliver.durability.begin_commit());
                let outcome = self.commit(batch.len(), reaped);
                if let (Ok(()), Some(t)) = (&outcome, tallied) {
                    t.add(&self.deliver.counters, &self.housekeeping);
                }
                // Woken callers read their job, and a read waits for the
                // fsync of what it sees (durable.rs).
                if let (Ok(()), Some(ended)) = (&outcome, &ended_jobs) {
                    self.deliver.finished.notify(ended);
                }
                Attempt::Done {
                    outcome,
                    made_ready,
                    unsynced,
                }
            }
            Err(Error::Busy) if self.behaviour.busy_is_transient => {
                // Another process won a race this batch planned around (a
                // deadlock, or a unique key taken between the check and
                // the write): nothing was applied.
                let _ = self.store.rollback();
                Attempt::Conflict
            }
            Err(e) => {
                let _ = self.store.rollback();
                Attempt::failed(e)
            }
        }
    }

    /// Hands a written batch's answers on: back to the caller of `process`
    /// (few callers, nobody else waiting), or to the sync or reply thread.
    fn route(&mut self, batch: &mut Vec<Box<dyn Operation>>, done: Answered) -> Option<Answered> {
        // While the sync thread is in an fsync, a small batch goes to it too
        // (its next fsync covers it) rather than wait here for its turn:
        // the writer thread must not stall on the disk.
        let inline_sync = self.rx.is_empty() && !self.deliver.sync_busy();
        if batch.len() <= REPLY_INLINE_MAX && (done.unsynced.is_none() || inline_sync) {
            // Few callers and nobody else waiting: syncing and answering
            // them in this thread (after it lets go of the writer) is
            // cheaper than two thread hops.
            // Moved out, so that the batch vector keeps its capacity.
            let mut ops = Vec::with_capacity(batch.len());
            ops.append(batch);
            return Some(Answered { ops, ..done });
        }
        let fresh = self
            .recycled
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(batch.len()));
        let ops = std::mem::replace(batch, fresh);
        let Some(next) = self.replies.as_ref() else {
            return Some(Answered { ops, ..done });
        };
        if let Err(flume::SendError(lost)) = next.send(Answered { ops, ..done }) {
            // The sync/reply threads are gone (they stop only after the writer).
            return Some(lost);
        }
        None
    }
}

/// How one try at a batch ended.
enum Attempt {
    /// Committed, or failed: the callers' answer, whether a job became
    /// ready to lease, and the commit's number while it awaits its fsync.
    Done {
        outcome: Result<()>,
        made_ready: bool,
        unsynced: Option<u64>,
    },
    /// Another process won a race the batch planned around: nothing was
    /// applied; plan it again.
    Conflict,
    /// Refused and answered: a sync failed while it was applied.
    Refused,
}

impl Attempt {
    /// Nothing applied: the batch fails with `e`.
    fn failed(e: Error) -> Self {
        Self::Done {
            outcome: Err(e),
            made_ready: false,
            unsynced: None,
        }
    }

    /// A COMMIT whose fate is unknown (`commit_failed`'s answer).
    fn failed_commit(outcome: Result<()>) -> Self {
        Self::Done {
            outcome,
            made_ready: false,
            unsynced: None,
        }
    }
}

/// Plans and writes one operation inside a transaction its caller holds
/// open on `store` (a savepoint in it), for `Relay::submit_in`. Nothing
/// is committed here: the caller's commit makes it real, and its rollback
/// leaves nothing. An error leaves the caller's transaction as it was.
pub(crate) fn within(
    store: &mut dyn Store,
    op: Box<dyn Operation>,
    options: &Options,
    durability: &Durability,
) -> Result<()> {
    if let Some(e) = durability.failure() {
        // This process saw the file's fsync fail: nothing may build on it.
        let e = Err(Error::Storage(Arc::new(durable::stopped(&e))));
        op.finish(e.clone());
        return e;
    }
    if let Err(e) = store.begin() {
        let e = Err(Error::from(e));
        op.finish(e.clone());
        return e;
    }
    let mut rng = fastrand::Rng::new();
    let mut reported = std::collections::HashSet::new();
    let mut batch = [op];
    let mut ctx = BatchCtx::new(options.clock.now(), Duties::NONE, options, &mut rng, &mut reported);
    let outcome = match plan_and_apply(store, &mut batch, &mut ctx, CommitPath::Plain, None) {
        Ok(_) => store.commit().map_err(Error::from),
        Err(e) => Err(e),
    };
    if outcome.is_err() {
        let _ = store.rollback();
    }
    let [op] = batch;
    op.finish(outcome.clone());
    outcome
}

/// Answers every operation of a batch that was not written: the Relay
/// stopped after a failed sync.
fn refuse(batch: &mut Vec<Box<dyn Operation>>, e: &Arc<StoreError>, ready: &ReadySignal) {
    let stopped = Err(Error::Storage(Arc::new(durable::stopped(e))));
    answer(batch, &stopped, false, ready);
}

/// How far [`plan_and_apply`] took a batch.
enum Planned {
    /// Written; the transaction is open. Holds how many rows housekeeping
    /// wrote (leases reclaimed, schedule ticks enqueued).
    Applied(usize),
    /// Written and committed.
    Committed(usize),
    /// Written, and the commit's fate is unknown.
    CommitFailed(StoreError),
}

/// Plans every operation of the batch inside the open transaction, then
/// writes the plan. Returns how far it took the batch, with how many rows housekeeping wrote.
///
/// Operations are isolated without savepoints: an operation that fails
/// while planning has written nothing, and its decisions are undone in the
/// plan ([`Plan::undo`]), so it fails alone. Only the write at the end can
/// fail the batch. (A savepoint per operation cost ~10% of the writer's
/// time on SQLite: it copies every page an operation touches.)
fn plan_and_apply(
    store: &mut dyn Store,
    batch: &mut [Box<dyn Operation>],
    ctx: &mut BatchCtx<'_>,
    path: CommitPath,
    held: Option<&HeldStatuses>,
) -> Result<Planned> {
    if let Some(after) = ctx.duties.prune {
        housekeeping::prune(store, ctx, after)?;
    }
    housekeeping::asked_prunes(store, ctx, batch.iter().map(|op| op.hint()))?;
    let mut plan = Plan::new(store, ctx.now);
    plan.prefetch(batch.iter().map(|op| op.hint()), ctx.duties.reap)?;
    // The instant is read again now that the batch holds its locks: on
    // PostgreSQL, BEGIN takes none, and the prefetch may have waited for
    // another process's batch on a limited queue's row. Judged by the
    // clock read before that wait, a rate window that process began would
    // look like a clock step back and the leases' events would be timed
    // out of commit order (issue 28, item 5). Never moved back.
    ctx.now = ctx.now.max(ctx.options.clock.now());
    plan.advance(ctx.now);
    let reaped = housekeeping::reap_and_tick(&mut plan, ctx)?;
    for op in batch.iter_mut() {
        let m = plan.mark();
        match op.plan(&mut plan, ctx) {
            Ok(()) => plan.keep(m),
            Err(e) if e.is_batch_fatal() => return Err(e),
            Err(_) => plan.undo(m),
        }
    }
    let left = batch.iter().any(|op| op.claims()) && plan.locks_candidates() && plan.left_candidates();
    // A grouped job taken hands its group's head on when the batch is
    // written: that next job is new to every other claim.
    ctx.made_ready |= plan.grouped_leased();
    let (changes, store) = plan.changes();
    if ctx.made_ready {
        store.notify_ready()?;
    }
    // Claim candidates this batch read and left (on PostgreSQL locked until
    // its commit, so another writer's claim may have skipped them): waiting
    // lessees of this process look again once it commits.
    ctx.made_ready |= left;
    if path == CommitPath::Fused {
        return match store.apply_commit(&changes) {
            Ok(()) => {
                if let Some(held) = held {
                    held.note(&changes);
                }
                Ok(Planned::Committed(reaped))
            }
            Err(CommitFailed::NotApplied(e)) => Err(e.into()),
            Err(CommitFailed::MaybeApplied(e)) => Ok(Planned::CommitFailed(e)),
        };
    }
    if !changes.is_empty() {
        store.apply(&changes)?;
    }
    Ok(Planned::Applied(reaped))
}
