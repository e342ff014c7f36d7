//! The operations the writer applies, written once for every store: each
//! loads what it needs, asks `relay_core::transition` what happens, and
//! persists the answer with a guarded write.

use crate::engine::writer::{BatchCtx, KeptHeads};
use crate::error::{Error, Result};
use crate::request::{LeaseBatch, LeasedJob, ValidJob, ValidLease};
use relay_core::{choose, transition, Action, Candidate, JobId, JobState, JobStatus, Next, Priority, Timestamp};
use relay_store::{EventWrite, JobInsert, JobSetStatus, Store, StoreError};

pub(crate) fn submit(store: &mut dyn Store, ctx: &mut BatchCtx<'_>, jobs: &[ValidJob]) -> Result<Vec<JobId>> {
    let mut ids = Vec::with_capacity(jobs.len());
    for j in jobs {
        if let Some(key) = j.unique_key.as_deref() {
            if let Some(id) = store.job_find_active_by_key(key)? {
                ids.push(id);
                continue;
            }
        }
        let status = JobStatus::new_ready(j.ready_at, j.max_attempts);
        let data = serde_json::json!({"queue": j.queue, "kind": j.kind, "priority": j.priority, "ready_at": j.ready_at.to_rfc3339()})
            .to_string();
        let id = store.job_insert(&JobInsert {
            queue: &j.queue,
            kind: &j.kind,
            payload: &j.payload,
            priority: j.priority,
            unique_key: j.unique_key.as_deref(),
            created_at: ctx.now,
            status: &status,
            event: Some(EventWrite {
                at: ctx.now,
                kind: "submitted",
                data: &data,
            }),
        })?;
        ctx.woke |= j.ready_at <= ctx.now;
        ctx.ready_changed();
        ids.push(id);
    }
    Ok(ids)
}

/// The claim: up to `max` jobs, each the aging winner among the oldest due
/// job of every class of every requested queue.
pub(crate) fn lease(store: &mut dyn Store, ctx: &mut BatchCtx<'_>, req: &ValidLease) -> Result<LeaseBatch> {
    let mut heads: Vec<(usize, Candidate)> = Vec::with_capacity(4 * req.queues.len());
    for (qi, q) in req.queues.iter().enumerate() {
        match ctx.take_heads(q) {
            Some(kept) => {
                heads.extend(kept.heads.iter().map(|c| (qi, *c)));
                for p in kept.stale {
                    heads.extend(store.job_ready_head(q, p, ctx.now)?.map(|c| (qi, c)));
                }
            }
            None => heads.extend(store.job_ready_heads(q, ctx.now)?.into_iter().map(|c| (qi, c))),
        }
    }
    let mut stale: Vec<(usize, Priority)> = Vec::new();
    let mut jobs = Vec::new();
    while jobs.len() < req.max as usize {
        let Some(winner) = choose(heads.iter().map(|h| h.1), ctx.now, ctx.options.aging_interval) else {
            break;
        };
        let job = store.job_get(winner.id)?.ok_or(Error::NotFound { id: winner.id })?;
        let action = Action::Lease {
            worker: &req.worker,
            lease_for: req.lease_for,
        };
        let next = transition(job.id, &job.status, action, &ctx.transition_ctx())?;
        persist(store, ctx.now, job.id, &job.status, &next, None)?;
        jobs.push(LeasedJob::new(job, next.status));
        // The winner's class has a new head (the next job in its index);
        // the other classes' heads are unchanged.
        let qi = heads.iter().position(|h| h.1.id == winner.id).map_or(0, |i| heads[i].0);
        heads.retain(|h| h.1.id != winner.id);
        if jobs.len() < req.max as usize {
            if let Some(c) = store.job_ready_head(&req.queues[qi], winner.priority, ctx.now)? {
                heads.push((qi, c));
            }
        } else {
            // Probed by the next claim of the batch, if there is one.
            stale.push((qi, winner.priority));
        }
    }
    for (qi, q) in req.queues.iter().enumerate() {
        let kept = KeptHeads {
            heads: heads.iter().filter(|h| h.0 == qi).map(|h| h.1).collect(),
            stale: stale.iter().filter(|s| s.0 == qi).map(|s| s.1).collect(),
        };
        ctx.keep_heads(q, kept);
    }
    let mut next_ready_at: Option<Timestamp> = None;
    if jobs.is_empty() {
        for q in &req.queues {
            if let Some(t) = store.job_next_ready_at(q, ctx.now)? {
                next_ready_at = Some(next_ready_at.map_or(t, |n| n.min(t)));
            }
        }
    }
    Ok(LeaseBatch { jobs, next_ready_at })
}

/// Applies one action to one job; returns its new status.
pub(crate) fn act(
    store: &mut dyn Store,
    ctx: &mut BatchCtx<'_>,
    id: JobId,
    action: Action<'_>,
    result: Option<&[u8]>,
) -> Result<JobStatus> {
    let cur = store.job_get_status(id)?.ok_or(Error::NotFound { id })?;
    let next = transition(id, &cur, action, &ctx.transition_ctx())?;
    if matches!(action, Action::Retry) {
        // Checked before writing, on every store: the unique index would
        // refuse the write, and on PostgreSQL that aborts the whole batch.
        if let Some((key, holder)) = store.job_key_holder(id)? {
            return Err(Error::Conflict { id, key, holder });
        }
    }
    match persist(store, ctx.now, id, &cur, &next, result) {
        Err(Error::Storage(e)) if matches!(*e, StoreError::KeyTaken { .. }) => {
            // Taken by another process after the check above.
            return Err(match store.job_key_holder(id)? {
                Some((key, holder)) => Error::Conflict { id, key, holder },
                None => Error::Busy, // the holder finished meanwhile: retrying is safe
            });
        }
        r => r?,
    }
    if cur.state == JobState::Ready || next.status.state == JobState::Ready || next.delete {
        ctx.ready_changed();
    }
    ctx.woke |= next.status.state == JobState::Ready && next.status.ready_at <= ctx.now;
    Ok(next.status)
}

/// Deletes a job. A row that no longer decodes can still be deleted: it is
/// the way out for an operator whose queue is stuck behind a corrupt row.
pub(crate) fn delete(store: &mut dyn Store, ctx: &mut BatchCtx<'_>, id: JobId) -> Result<()> {
    match act(store, ctx, id, Action::Delete, None) {
        Err(Error::Corrupt { job: Some(j), reason }) if j == id => {
            tracing::warn!(job = %id, %reason, "deleting a corrupt job");
            ctx.ready_changed();
            if store.job_delete(id)? {
                Ok(())
            } else {
                Err(Error::NotFound { id })
            }
        }
        other => other.map(drop),
    }
}

/// Reclaims expired leases (each an `Expire` transition with its event).
/// A corrupt row is reported (once per process) and passed over: it would
/// otherwise be first in expiry order every time and stop every reclaim
/// behind it. `delete` removes it.
pub(crate) fn reap(store: &mut dyn Store, ctx: &mut BatchCtx<'_>) -> Result<usize> {
    let ids = store.job_expired_leases(ctx.now)?;
    let mut reaped = 0;
    for id in &ids {
        match act(store, ctx, *id, Action::Expire, None) {
            Ok(_) => reaped += 1,
            Err(Error::Corrupt { job, reason }) => {
                if ctx.corrupt_reported.insert(*id) {
                    let job = job.unwrap_or(*id);
                    tracing::error!(%job, %reason, "an expired lease cannot be reclaimed: its row is corrupt; delete the job (relay delete) to clear it");
                }
            }
            Err(e) => return Err(e),
        }
    }
    if reaped > 0 {
        tracing::debug!(count = reaped, "reclaimed expired leases");
    }
    Ok(reaped)
}

/// Deletes finished jobs older than `age` (up to 1000 a call).
pub(crate) fn prune(store: &mut dyn Store, now: Timestamp, age: std::time::Duration) -> Result<u64> {
    let before = Timestamp::from_millis(now.as_millis().saturating_sub(relay_core::time::duration_millis(age)));
    Ok(store.job_prune(before)?)
}

/// Appends a user event to an existing job.
pub(crate) fn append_event(store: &mut dyn Store, now: Timestamp, id: JobId, kind: &str, data: &str) -> Result<i64> {
    store.job_get_status(id)?.ok_or(Error::NotFound { id })?;
    Ok(store.event_append(id, now, kind, data)?)
}

/// Writes `next` over `cur`, guarded on the state and token that were read.
fn persist(
    store: &mut dyn Store,
    now: Timestamp,
    id: JobId,
    cur: &JobStatus,
    next: &Next,
    result: Option<&[u8]>,
) -> Result<()> {
    if next.unchanged {
        return Ok(());
    }
    if next.delete {
        return if store.job_delete(id)? {
            Ok(())
        } else {
            Err(Error::NotFound { id })
        };
    }
    let guarded = JobSetStatus {
        id,
        expect_state: cur.state,
        expect_token: cur.last_token,
        status: &next.status,
        result,
    };
    let event = next.event.as_ref().map(|e| EventWrite {
        at: now,
        kind: e.kind,
        data: &e.data,
    });
    if !store.job_transition(&guarded, event)? {
        return Err(Error::LeaseLost { id });
    }
    Ok(())
}
