//! The writers' housekeeping: when a batch reclaims expired leases, prunes
//! and fires due schedules ([`Housekeeping::duties`]), and doing it inside
//! the batch's transaction before its callers' operations.

use super::batch::{BatchCtx, Duties};
use super::metrics::Counters;
use super::ops;
use super::plan::Plan;
use crate::error::Result;
use crate::options::Options;
use relay_core::{JobId, Timestamp};
use relay_store::Store;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

/// What one pass of the prune did ([`Relay::prune_from`](crate::Relay::prune_from)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    /// Finished jobs it deleted, with their events.
    pub deleted: u64,
    /// Where the next pass goes on (the id it stopped at); `None` once it
    /// reached the table's end.
    pub next: Option<JobId>,
}

/// How often the scheduler looks for due schedules.
pub(crate) const TICK_EVERY: Duration = Duration::from_millis(250);

/// How often finished jobs past their retention are pruned once a pass
/// reached the table's end.
const PRUNE_EVERY: Duration = Duration::from_secs(10);

/// How often while the prune is partway through the table: a pass reads
/// `relay_store::PRUNE_SCAN` jobs and deletes at most `PRUNE_BATCH`, so a
/// table of a million jobs is gone through in about 200 s, and up to 1,000
/// jobs a second are deleted.
const PRUNE_BUSY_EVERY: Duration = Duration::from_secs(1);

/// When a Relay's writers last reaped, pruned and ticked (milliseconds),
/// shared by every writer of the Relay (so "the first batch after opening
/// reaps" holds once, whichever writer takes it).
pub(crate) struct Housekeeping {
    last_reap: AtomicI64,
    last_prune: AtomicI64,
    last_tick: AtomicI64,
    /// Where the next prune pass begins (a job id; 0: the table's start).
    prune_after: AtomicI64,
    /// The last prune pass stopped before the table's end.
    prune_busy: AtomicBool,
    /// The last tick fired as many schedules as a batch may, or the last
    /// reap read as many overdue jobs as it reads at once: the writer runs
    /// the next batch (and tick, and reap) at once instead of waiting.
    ticks_left: AtomicBool,
}

impl Default for Housekeeping {
    /// Never: the first batch after opening reaps.
    fn default() -> Self {
        Self {
            last_reap: AtomicI64::new(i64::MIN),
            last_prune: AtomicI64::new(i64::MIN),
            last_tick: AtomicI64::new(i64::MIN),
            prune_after: AtomicI64::new(0),
            prune_busy: AtomicBool::new(false),
            ticks_left: AtomicBool::new(false),
        }
    }
}

impl Housekeeping {
    /// What a batch at `now` does besides its operations, recorded as done:
    /// it reaps when it claims (`claims`) or when the reap is due.
    pub(crate) fn duties(&self, now: Timestamp, claims: bool, options: &Options) -> Duties {
        let due =
            |last: &AtomicI64, every: Duration| now >= Timestamp::from_millis(last.load(Ordering::Relaxed)).plus(every);
        let reap = claims || due(&self.last_reap, options.reap_interval);
        if reap {
            self.last_reap.store(now.as_millis(), Ordering::Relaxed);
        }
        let every = if self.prune_busy.load(Ordering::Relaxed) {
            PRUNE_BUSY_EVERY
        } else {
            PRUNE_EVERY
        };
        let prune = (options.prune && reap && due(&self.last_prune, every)).then(|| {
            self.last_prune.store(now.as_millis(), Ordering::Relaxed);
            JobId(self.prune_after.load(Ordering::Relaxed))
        });
        let tick = options.scheduler && due(&self.last_tick, TICK_EVERY);
        if tick {
            self.last_tick.store(now.as_millis(), Ordering::Relaxed);
        }
        Duties { reap, prune, tick }
    }

    /// Taken once: whether the last tick left schedules due, so that the
    /// writer runs the next batch at once instead of waiting.
    pub(crate) fn take_ticks_left(&self) -> bool {
        self.ticks_left.swap(false, Ordering::Relaxed)
    }

    /// After a batch planned: counts the ticks of schedules it skipped; when
    /// it ran the tick and fired as many schedules as a batch may, has the
    /// next batch tick again at once.
    pub(crate) fn ticked(&self, ctx: &BatchCtx<'_>) {
        if ctx.duties.tick && ctx.ticks_left {
            self.ticks_left.store(true, Ordering::Relaxed);
            self.last_tick.store(i64::MIN, Ordering::Relaxed);
        }
        // A backlog of due jobs to promote (or leases to reclaim): the
        // next batch reaps again, at once.
        if ctx.reaps_left {
            self.ticks_left.store(true, Ordering::Relaxed);
            self.last_reap.store(i64::MIN, Ordering::Relaxed);
        }
    }

    /// After a batch committed (see [`Tallied`]): the next prune pass goes on where its
    /// pass stopped (the table's start once it reached the end), sooner
    /// while it is partway through. A batch that did not commit leaves
    /// both, and its window is read again.
    fn pruned(&self, pruned: Option<crate::Pruned>) {
        if let Some(p) = pruned {
            self.prune_after.store(p.next.map_or(0, |id| id.0), Ordering::Relaxed);
            self.prune_busy.store(p.next.is_some(), Ordering::Relaxed);
        }
    }
}

/// What a planned batch counts in the writer's counters (and where its
/// prune stopped), taken from its context and added only once the batch
/// has committed (a batch rolled back, refused or of unknown fate counts
/// nothing: its reclaims happen again in a later batch, and would be
/// counted twice).
pub(crate) struct Tallied {
    skipped_ticks: u64,
    leases_expired: u64,
    leases_lost: u64,
    waits: Vec<(String, String, f64)>,
    leased: Vec<(JobId, relay_core::LeaseToken, String, String)>,
    ended: Vec<(JobId, relay_core::LeaseToken, Option<super::metrics::Outcome>)>,
    at: Timestamp,
    pruned: Option<crate::Pruned>,
}

impl Tallied {
    pub(crate) fn take(ctx: &mut BatchCtx<'_>) -> Self {
        Self {
            skipped_ticks: ctx.skipped_ticks,
            leases_expired: ctx.leases_expired,
            leases_lost: ctx.leases_lost,
            waits: std::mem::take(&mut ctx.waits),
            leased: std::mem::take(&mut ctx.leased),
            ended: std::mem::take(&mut ctx.ended),
            at: ctx.now,
            pruned: ctx.pruned.take(),
        }
    }

    pub(crate) fn add(self, counters: &Counters, housekeeping: &Housekeeping) {
        housekeeping.pruned(self.pruned);
        counters.ticks_skipped(self.skipped_ticks);
        counters.leases(self.leases_expired, self.leases_lost);
        counters.waited(&self.waits);
        counters.leased(self.leased, self.at);
        counters.ended(&self.ended, self.at);
    }
}

/// Deletes what is past keeping: the throughput history's old minutes,
/// expired marks, and finished jobs past their retention in one window of
/// the jobs table after `after` (see `ops::prune_pass`). A failure is tried
/// again at the next prune, unless it leaves the batch unusable.
pub(crate) fn prune(store: &mut dyn Store, ctx: &mut BatchCtx<'_>, after: JobId) -> Result<()> {
    let tolerate = |r: Result<u64>, what: &str| match r {
        Ok(n) => {
            if n > 0 {
                tracing::debug!(count = n, "pruned {what}");
            }
            Ok(())
        }
        Err(e) if e.is_batch_fatal() => Err(e),
        Err(e) => {
            tracing::warn!(error = %e, "pruning {what} failed; will try again");
            Ok(())
        }
    };
    tolerate(ops::prune_history(store, ctx.now), "throughput history")?;
    tolerate(ops::prune_marks(store, ctx.now), "expired marks")?;
    let forget = relay_core::time::duration_millis(relay_core::presence::FORGET_AFTER);
    tolerate(
        store
            .worker_prune(Timestamp::from_millis(ctx.now.as_millis().saturating_sub(forget)))
            .map_err(Into::into),
        "workers not seen for an hour",
    )?;
    match ops::prune_pass(store, ctx.now, &ctx.options.retention, after) {
        Ok(p) => {
            if p.deleted > 0 {
                tracing::debug!(count = p.deleted, "pruned finished jobs");
            }
            ctx.pruned = Some(p);
        }
        Err(e) if e.is_batch_fatal() => return Err(e),
        Err(e) => tracing::warn!(error = %e, "pruning finished jobs failed; will try again"),
    }
    Ok(())
}

/// Runs the passes of the prune the batch's operations ask for
/// (`Hint::Prune`), before anything is read for its plan: their deletes go
/// to the store at once, so no operation may have read a row they delete.
/// Each pass's result waits in `ctx.asked_prunes` for its operation; an
/// error that leaves the batch unusable fails the batch.
pub(crate) fn asked_prunes<'h>(
    store: &mut dyn Store,
    ctx: &mut BatchCtx<'_>,
    hints: impl Iterator<Item = &'h super::plan::Hint>,
) -> Result<()> {
    for hint in hints {
        if let super::plan::Hint::Prune(after) = hint {
            let pass = ops::prune_pass(store, ctx.now, &ctx.options.retention, *after);
            if let Err(e) = &pass {
                if e.is_batch_fatal() {
                    return Err(e.clone());
                }
            }
            ctx.asked_prunes.push_back(pass);
        }
    }
    Ok(())
}

/// Reclaims expired leases (`duties.reap`) and enqueues the jobs of due
/// schedules (`duties.tick`) in `plan`; returns how many rows that wrote.
/// Each reclaim and each schedule's tick is complete in itself, so a pass
/// that stops early keeps what it did (tried again at the next one), unless
/// the error leaves the batch unusable.
pub(crate) fn reap_and_tick(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>) -> Result<usize> {
    let mut wrote = 0;
    if ctx.duties.reap {
        match ops::reap_and_promote(plan, ctx) {
            Ok((reaped, promoted)) => wrote = reaped + promoted,
            Err(e) if e.is_batch_fatal() => return Err(e),
            Err(e) => tracing::warn!(error = %e, "reclaiming expired leases stopped early; will try again"),
        }
    }
    if ctx.duties.tick {
        // The jobs of ticks count with the reclaims as housekeeping that
        // wrote: the commit is then counted and (split commit) numbered
        // for its fsync.
        match ops::fire_schedules(plan, ctx) {
            Ok(n) if n > 0 => {
                ctx.ticks_left = n >= ops::TICKS_PER_BATCH;
                tracing::debug!(count = n, "enqueued the jobs of due schedules");
                wrote += n;
            }
            Ok(_) => {}
            Err(e) if e.is_batch_fatal() => return Err(e),
            Err(e) => tracing::warn!(error = %e, "running the schedules stopped early; will try again"),
        }
    }
    Ok(wrote)
}
