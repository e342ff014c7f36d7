//! The writer thread: group commit.
//!
//! Every write of a process goes through here. The thread blocks for the
//! first waiting operation, drains every other one already waiting (up to
//! `max_batch`), applies them in ONE transaction (one failing operation fails
//! alone: see `apply_all`), commits once, and only then answers each caller. Alone, a caller waits one fsync; under load one
//! fsync serves everyone who arrived while the previous commit ran.
//!
//! The channel into the thread is bounded (`queue_capacity`): when it is
//! full, callers block in `send` — that is the back-pressure point.

use super::metrics::Counters;
use super::signal::Signal;
use crate::error::{Error, Result};
use crate::ops;
use crate::options::Options;
use relay_core::{RetryPolicy, Timestamp, TransitionCtx};
use relay_store::Store;
use std::sync::Arc;

/// What an operation sees of its batch.
pub(crate) struct BatchCtx<'a> {
    /// One instant for the whole batch.
    pub now: Timestamp,
    pub options: &'a Options,
    rng: &'a mut fastrand::Rng,
    /// Set by an operation that made a job ready to lease now.
    pub woke: bool,
    /// This batch also prunes finished jobs past their retention.
    pub prune_due: bool,
}

impl BatchCtx<'_> {
    pub(crate) fn transition_ctx(&mut self) -> TransitionCtx<'_> {
        let jitter = self.rng.f64();
        let retry: &RetryPolicy = &self.options.retry;
        TransitionCtx {
            now: self.now,
            retry,
            jitter,
        }
    }
}

/// One caller's operation, waiting for its batch.
pub(crate) trait Operation: Send {
    /// Runs against the open transaction; the result is kept for `finish`.
    /// The returned error (a copy) tells the writer how to roll back.
    fn apply(&mut self, store: &mut dyn Store, ctx: &mut BatchCtx<'_>) -> Result<()>;
    /// Answers the caller once the batch's fate is known: the operation's
    /// own error if it failed, else the batch's error, else its value.
    fn finish(self: Box<Self>, batch: Result<()>);
    /// True for claims: the batch reclaims expired leases first.
    fn claims(&self) -> bool;
}

pub(crate) type Work<T> = Box<dyn FnMut(&mut dyn Store, &mut BatchCtx<'_>) -> Result<T> + Send>;

/// An operation returning `T`, answered on a typed reply channel.
pub(crate) struct Call<T> {
    work: Work<T>,
    out: Option<Result<T>>,
    reply: flume::Sender<Result<T>>,
    claims: bool,
}

impl<T: Send + 'static> Call<T> {
    pub(crate) fn boxed(work: Work<T>, claims: bool) -> (Box<dyn Operation>, flume::Receiver<Result<T>>) {
        let (reply, rx) = flume::bounded(1);
        (
            Box::new(Call {
                work,
                out: None,
                reply,
                claims,
            }),
            rx,
        )
    }
}

impl<T: Send + 'static> Operation for Call<T> {
    fn apply(&mut self, store: &mut dyn Store, ctx: &mut BatchCtx<'_>) -> Result<()> {
        let r = (self.work)(store, ctx);
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

    fn claims(&self) -> bool {
        self.claims
    }
}

/// A committed (or failed) batch on its way to its callers.
pub(crate) struct Answered {
    ops: Vec<Box<dyn Operation>>,
    outcome: Result<()>,
    /// A job became ready: wake waiting lessees.
    wake: bool,
}

/// Answers callers on a thread of its own, so that waking them (a futex
/// wake per caller, measured at 13% of the writer's time) overlaps the
/// writer's next batch instead of delaying it. Emptied batch vectors go
/// back to the writer for reuse.
pub(crate) fn reply_loop(
    rx: flume::Receiver<Answered>,
    recycle: flume::Sender<Vec<Box<dyn Operation>>>,
    signal: Arc<Signal>,
) {
    for mut done in rx {
        answer(&mut done.ops, &done.outcome, done.wake, &signal);
        let _ = recycle.try_send(done.ops);
    }
}

/// How often finished jobs past their retention are pruned.
const PRUNE_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Batches this small are answered by the writer itself.
const REPLY_INLINE_MAX: usize = 2;

fn answer(ops: &mut Vec<Box<dyn Operation>>, outcome: &Result<()>, wake: bool, signal: &Signal) {
    if outcome.is_ok() && wake {
        signal.notify();
    }
    for op in ops.drain(..) {
        op.finish(outcome.clone());
    }
}

pub(crate) struct Writer {
    pub store: Box<dyn Store>,
    pub rx: flume::Receiver<Box<dyn Operation>>,
    pub options: Options,
    pub counters: Arc<Counters>,
    pub replies: flume::Sender<Answered>,
    pub recycled: flume::Receiver<Vec<Box<dyn Operation>>>,
    pub signal: Arc<Signal>,
}

impl Writer {
    /// Runs until every sender is dropped, then returns.
    pub(crate) fn run(mut self) {
        let mut rng = fastrand::Rng::new();
        let mut batch: Vec<Box<dyn Operation>> = Vec::with_capacity(self.options.max_batch);
        let mut last_reap = Timestamp::from_millis(i64::MIN);
        let mut last_prune = Timestamp::from_millis(i64::MIN);
        loop {
            match self.rx.recv_timeout(self.options.reap_interval) {
                Ok(op) => batch.push(op),
                Err(flume::RecvTimeoutError::Timeout) => {}
                Err(flume::RecvTimeoutError::Disconnected) => break,
            }
            while batch.len() < self.options.max_batch {
                match self.rx.try_recv() {
                    Ok(op) => batch.push(op),
                    Err(_) => break,
                }
            }
            let now = self.options.clock.now();
            let reap = batch.iter().any(|op| op.claims()) || now >= last_reap.plus(self.options.reap_interval);
            if reap {
                last_reap = now;
            }
            let prune = reap && now >= last_prune.plus(PRUNE_EVERY);
            if prune {
                last_prune = now;
            }
            self.execute(&mut batch, now, (reap, prune), &mut rng);
        }
        tracing::debug!("relay writer stopped");
    }

    /// Commits the open transaction; counts it when it carried anything.
    fn commit(&mut self, ops: usize, reaped: usize) -> Result<()> {
        match self.store.commit() {
            Ok(()) => {
                // An idle reap that found nothing wrote nothing: no fsync, no count.
                if ops > 0 || reaped > 0 {
                    self.counters.committed(ops);
                }
                Ok(())
            }
            Err(e) => {
                let _ = self.store.rollback();
                self.counters.commit_failed();
                tracing::error!(error = %e, "commit failed; its callers are told the change may be on disk");
                Err(Error::MaybeApplied(Arc::new(e)))
            }
        }
    }

    fn execute(
        &mut self,
        batch: &mut Vec<Box<dyn Operation>>,
        now: Timestamp,
        (reap, prune_due): (bool, bool),
        rng: &mut fastrand::Rng,
    ) {
        let mut skip = vec![false; batch.len()];
        let (outcome, woke) = loop {
            let mut ctx = BatchCtx {
                now,
                options: &self.options,
                rng: &mut *rng,
                woke: false,
                prune_due,
            };
            match apply_all(self.store.as_mut(), batch, &skip, &mut ctx, reap) {
                Ok(reaped) => {
                    let woke = ctx.woke;
                    break (self.commit(batch.len(), reaped), woke);
                }
                Err(Abort::Redo(i)) => {
                    let _ = self.store.rollback();
                    skip[i] = true;
                    tracing::warn!("an operation failed after writing; applying its batch again without it");
                }
                Err(Abort::Fatal(e)) => {
                    let _ = self.store.rollback();
                    break (Err(e), false);
                }
            }
        };
        if batch.len() <= REPLY_INLINE_MAX {
            // Few callers: waking them here is cheaper than a hop through
            // the reply thread (one less thread wake-up on their path).
            answer(batch, &outcome, woke, &self.signal);
            return;
        }
        let fresh = self
            .recycled
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(batch.len()));
        let ops = std::mem::replace(batch, fresh);
        if let Err(flume::SendError(mut lost)) = self.replies.send(Answered {
            ops,
            outcome,
            wake: woke,
        }) {
            // The reply thread is gone (it only stops when the writer does).
            answer(&mut lost.ops, &lost.outcome, lost.wake, &self.signal);
        }
    }
}

/// Why a batch's transaction was abandoned.
enum Abort {
    /// Operation `i` failed after it had written: roll back, and apply the
    /// batch again without it.
    Redo(usize),
    /// The transaction is lost; every caller gets this error.
    Fatal(Error),
}

/// Opens the transaction and applies every operation not in `skip`.
/// Returns how many expired leases were reclaimed.
///
/// Operations are isolated without savepoints: each one reads and checks
/// everything before it writes, so a refused operation (a stale token, a
/// corrupt row, a wrong state) has written nothing and simply fails alone.
/// The store's change counter proves it; in the rare case an operation
/// failed after writing, the batch is rolled back and applied again without
/// it. A savepoint per operation cost ~10% of the writer's time (it copies
/// every page an operation touches into a sub-journal).
fn apply_all(
    store: &mut dyn Store,
    batch: &mut [Box<dyn Operation>],
    skip: &[bool],
    ctx: &mut BatchCtx<'_>,
    reap: bool,
) -> Result<usize, Abort> {
    store.begin().map_err(|e| Abort::Fatal(e.into()))?;
    let mut reaped = 0;
    if reap {
        // Each reclaim is complete in itself, so a partial reap is kept.
        match ops::reap(store, ctx) {
            Ok(n) => reaped = n,
            Err(e) if e.is_batch_fatal() => return Err(Abort::Fatal(e)),
            Err(e) => tracing::warn!(error = %e, "reclaiming expired leases stopped early; will try again"),
        }
        if let Some(age) = ctx.options.retention.filter(|_| ctx.prune_due) {
            match ops::prune(store, ctx.now, age) {
                Ok(n) if n > 0 => tracing::debug!(count = n, "pruned finished jobs"),
                Ok(_) => {}
                Err(e) if e.is_batch_fatal() => return Err(Abort::Fatal(e)),
                Err(e) => tracing::warn!(error = %e, "pruning finished jobs failed; will try again"),
            }
        }
    }
    for (i, op) in batch.iter_mut().enumerate() {
        if skip.get(i).copied().unwrap_or(false) {
            continue;
        }
        let before = store.changes();
        match op.apply(store, ctx) {
            Ok(()) => {}
            Err(e) if e.is_batch_fatal() => return Err(Abort::Fatal(e)),
            Err(_) if store.changes() == before => {}
            Err(_) => return Err(Abort::Redo(i)),
        }
    }
    if ctx.woke {
        store.notify_ready().map_err(|e| Abort::Fatal(e.into()))?;
    }
    Ok(reaped)
}
