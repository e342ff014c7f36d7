//! A lease holder's lone ack, nack, snooze or extend planned from the
//! status its Relay wrote when it leased the job, instead of a read
//! (ARCHITECTURE.md, "Stores"): the statuses kept, and the writer's path
//! that plans from them.

use super::{BatchCtx, CommitPath, Duties, Operation, Writer};
use crate::engine::plan::Plan;
use crate::error::Result;
use relay_core::{JobId, JobState, JobStatus, Timestamp};
use relay_store::{Changes, CommitFailed};
use std::sync::PoisonError;

/// The status each job this Relay leased had when its lease committed,
/// kept for the lease's holder: their ack, nack, snooze or extend, alone in
/// a batch, is planned from it without reading the row, and the store
/// writes it only if the row still is that status
/// ([`Store::apply_unread`]; on PostgreSQL one round trip instead of two).
/// Kept only where the store applies such batches. Bounded (emptied when
/// full): a status forgotten, or changed by another process, costs the
/// read, nothing else.
#[derive(Default)]
pub(crate) struct HeldStatuses(std::sync::Mutex<std::collections::HashMap<JobId, JobStatus>>);

/// Statuses kept at most: a lease past them is planned from a read.
const HELD_MAX: usize = 4096;

impl HeldStatuses {
    pub(super) fn get(&self, id: JobId) -> Option<JobStatus> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).get(&id).cloned()
    }

    pub(super) fn forget(&self, id: JobId) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
    }

    /// What a committed batch did to its jobs: a lease (or extend) keeps
    /// the job's new status, anything else forgets it.
    pub(super) fn note(&self, c: &Changes<'_>) {
        let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for u in &c.updates {
            if u.status.state == JobState::Leased {
                if held.len() >= HELD_MAX && !held.contains_key(&u.id) {
                    // Full, likely of jobs other processes finished:
                    // start again rather than stop keeping new leases.
                    held.clear();
                }
                held.insert(u.id, u.status.clone());
            } else {
                held.remove(&u.id);
            }
        }
        for id in &c.deletes {
            held.remove(id);
        }
    }
}

impl Writer {
    /// A batch of one operation of a lease's holder (an ack, nack, snooze
    /// or extend), planned from the status this Relay wrote when it leased
    /// the job ([`HeldStatuses`]) instead of a read, and committed by the
    /// store only if the row still is that status
    /// ([`Store::apply_unread`]). `None`: not such a batch, or the row was
    /// otherwise (nothing written): the batch is planned from a read.
    pub(super) fn unread(
        &mut self,
        batch: &mut [Box<dyn Operation>],
        instant: &mut Option<(Timestamp, Duties)>,
    ) -> Option<(Result<()>, bool)> {
        if !self.behaviour.applies_unread || self.path != CommitPath::Fused {
            return None;
        }
        let [op] = batch else {
            return None;
        };
        let id = op.held()?;
        let expected = self.held.get(id)?;
        let (now, duties) = match *instant {
            Some(i) => i,
            None => *instant.insert(self.instant(std::slice::from_ref(op))),
        };
        if duties != Duties::NONE {
            return None; // housekeeping reads: this batch reads too
        }
        let mut ctx = BatchCtx::new(now, duties, &self.options, &mut self.rng, &mut self.corrupt_reported);
        if self.deliver.finished.any() {
            ctx.ended_jobs = Some(Vec::new());
        }
        let store = self.store.as_mut();
        store.seal_reads(true);
        let mut plan = Plan::new(store, now);
        plan.seed(id, expected.clone());
        let planned = op.plan(&mut plan, &mut ctx);
        let (changes, store) = plan.changes();
        let applied = match planned {
            // Planned without a read: its own failure (a lease lost, say)
            // is judged again from one.
            Err(_) => None,
            Ok(()) => {
                let notified = !ctx.made_ready || store.notify_ready().is_ok();
                notified.then(|| store.apply_unread(&changes, &expected))
            }
        };
        if let Some(Ok(true)) = applied {
            self.held.note(&changes);
        }
        drop(changes);
        let made_ready = ctx.made_ready;
        let ended_jobs = ctx.ended_jobs.take();
        // What it counts (an attempt's end, say), once committed.
        let tallied = matches!(applied, Some(Ok(true))).then(|| super::housekeeping::Tallied::take(&mut ctx));
        self.store.seal_reads(false);
        match applied {
            Some(Ok(true)) => {
                self.committed(1, 0);
                if let Some(t) = tallied {
                    t.add(&self.deliver.counters, &self.housekeeping);
                }
                if let Some(ended) = &ended_jobs {
                    self.deliver.finished.notify(ended);
                }
                Some((Ok(()), made_ready))
            }
            Some(Err(CommitFailed::MaybeApplied(e))) => {
                self.held.forget(id);
                Some((self.commit_failed(e), false))
            }
            _ => {
                // Another process changed the row (or the batch took
                // another shape): what it holds now is read, and the
                // answer comes from that plan alone.
                self.held.forget(id);
                op.forget_plan();
                None
            }
        }
    }
}
