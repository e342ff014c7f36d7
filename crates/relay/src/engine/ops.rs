//! The operations the writer plans, written once for every store: each
//! reads what it needs through the batch's [`Plan`], asks
//! `relay_core::transition` what happens, and records the answer in the
//! plan (the store writes the whole batch afterwards).

use crate::engine::batch::BatchCtx;
use crate::engine::metrics::Outcome;
use crate::engine::plan::{Gate, Plan};
use crate::error::{Error, Result};
use crate::request::{LeaseBatch, LeasedJob, Submitted, ValidJob, ValidLease, ValidSchedule};
use relay_core::{
    choose, transition, Action, Candidate, DependencyFailure, EventKind, Job, JobId, JobState, JobStatus, Next,
    Schedule, Timestamp,
};
use relay_store::{Dependent, Store};

mod steps;
mod tokens;
pub(crate) use steps::{emit, join, record_step, sleep, wait};
pub(crate) use tokens::{
    complete as complete_token, create as create_token, secret_matches, split as split_token, Stored as StoredToken,
};

pub(crate) fn submit(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>, jobs: &[ValidJob]) -> Result<Vec<Submitted>> {
    let mut ids = Vec::with_capacity(jobs.len());
    for j in jobs {
        let Some(key) = j.idempotency_key.as_deref() else {
            ids.push(insert(plan, ctx, j, None)?);
            continue;
        };
        let mark = idempotency_mark(key);
        if let Some(v) = plan.mark_value(&mark)? {
            let id = job_of_mark(&v, &format!("idempotency key {key:?}"))?;
            // The job the key made was deleted (or pruned) since: nothing
            // to answer with, and a new job would break the key's promise.
            if plan.status(id)?.is_none() {
                return Err(Error::NotFound { id });
            }
            ids.push(Submitted { id, existing: true });
            continue;
        }
        let s = insert(plan, ctx, j, None)?;
        let keep = ctx.now.plus(ctx.options.idempotency_keep);
        plan.set_mark(&mark, s.id.0.to_string(), keep)?;
        ids.push(s);
    }
    Ok(ids)
}

/// The job a mark names (an idempotency key's, a throttle's); `whose`
/// says which in the error of a mark that holds no job id.
fn job_of_mark(v: &str, whose: &str) -> Result<JobId> {
    v.parse::<i64>().map(JobId).map_err(|_| Error::Corrupt {
        job: None,
        reason: format!("the mark of {whose} holds {v:?}, not a job id"),
    })
}

/// The mark that remembers which job an idempotency key's submit made.
pub(crate) fn idempotency_mark(key: &str) -> String {
    format!("idempotency:{key}")
}

/// Writes mark `key` (kept until `until`), unless a live mark of the key
/// is there: marks are written once.
pub(crate) fn put_mark(plan: &mut Plan<'_>, key: &str, value: &str, until: Timestamp) -> Result<bool> {
    if plan.mark_value(key)?.is_some() {
        return Ok(false);
    }
    plan.set_mark(key, value.to_owned(), until)?;
    Ok(true)
}

/// One new job (or, for a unique key an unfinished job holds, that job),
/// with its "submitted" event; `tick` names the schedule and tick that
/// enqueued it, and how many of its ticks before this one were skipped.
fn insert(
    plan: &mut Plan<'_>,
    ctx: &mut BatchCtx<'_>,
    j: &ValidJob,
    tick: Option<(&str, Timestamp, u64)>,
) -> Result<Submitted> {
    // A throttle's mark is written once, for its whole period; only a
    // throttled submit reads it (a plain unique key costs no extra read).
    let mut throttle = None;
    if let Some(key) = j.unique_key.as_deref() {
        if let Some(id) = plan.active_by_key(key)? {
            match j.debounce {
                None => return Ok(Submitted { id, existing: true }),
                Some(window) => {
                    if debounce(plan, ctx, id, j, window)? {
                        return Ok(Submitted { id, existing: true });
                    }
                }
            }
        }
        if let Some(period) = j.throttle {
            match throttled(plan, key)? {
                Throttled::Job(id) => return Ok(Submitted { id, existing: true }),
                Throttled::Free => throttle = Some((key, period)),
                Throttled::Deleted => {}
            }
        }
    }
    let deps = dependencies(plan, j)?;
    // A debounced job runs its window after the last submit of its key.
    let ready_at = j.debounce.map_or(j.ready_at, |window| ctx.now.plus(window));
    let status = JobStatus::new_waiting(ready_at, ctx.now, j.max_attempts, deps.waiting_on());
    let mut data = serde_json::json!({"queue": j.queue, "kind": j.kind, "priority": j.priority, "ready_at": ready_at.to_rfc3339()});
    if let Some((name, at, skipped)) = tick {
        data["schedule"] = serde_json::json!(name);
        data["tick"] = serde_json::json!(at.to_rfc3339());
        if skipped > 0 {
            data["skipped_ticks"] = serde_json::json!(skipped);
        }
    }
    if !j.depends_on.is_empty() {
        data["depends_on"] = serde_json::json!(j.depends_on);
        data["waiting_on"] = serde_json::json!(status.waiting_on);
        data["on_dependency_failure"] = serde_json::json!(j.on_dependency_failure);
    }
    let id = plan.insert(Job {
        id: JobId(0),
        queue: j.queue.clone(),
        kind: j.kind.clone(),
        payload: j.payload.clone(),
        priority: j.priority,
        created_at: ctx.now,
        unique_key: j.unique_key.clone(),
        result: None,
        lease_for: j.lease_for,
        timeout: j.timeout,
        traceparent: j.traceparent.clone(),
        tags: j.tags.clone(),
        group: j.group.clone(),
        progress: None,
        steps: Vec::new(),
        status: status.clone(),
    })?;
    plan.event(id, EventKind::Submitted, data.to_string())?;
    match deps {
        Deps::Waiting(parents) => {
            for parent in parents {
                plan.add_edge(Dependent {
                    parent,
                    child: id,
                    on_failure: j.on_dependency_failure,
                });
            }
        }
        // One of them has already failed: as if it failed a moment later.
        Deps::Failed(parent, state) => {
            let action = Action::Abandon {
                parent,
                state: Some(state),
            };
            let next = transition(id, &status, action, &ctx.transition_ctx())?;
            persist(plan, id, next, None)?;
        }
    }
    ctx.made_ready |= status.state == JobState::Ready && ready_at <= ctx.now;
    if let Some((key, period)) = throttle {
        plan.set_mark(&throttle_mark(key), id.0.to_string(), ctx.now.plus(period))?;
    }
    Ok(Submitted { id, existing: false })
}

/// A debounced submit of a key job `id` holds: a job of the same queue
/// and kind that has not started (WAITING, or READY and never leased)
/// takes the submit's payload and runs `window` from now, with a
/// "debounced" event. One that has started, another queue's or kind's,
/// or a row that does not decode is left as it is, as for any unique key
/// (true: the submit answers it). False: the holder finished or went
/// since the key was looked up (another process, on PostgreSQL, between
/// the unlocked lookup and the locked read): the key is free.
fn debounce(
    plan: &mut Plan<'_>,
    ctx: &mut BatchCtx<'_>,
    id: JobId,
    j: &ValidJob,
    window: std::time::Duration,
) -> Result<bool> {
    let status = match plan.status(id) {
        Ok(Some(s)) if !s.state.is_finished() => s,
        Ok(_) => return Ok(false),
        Err(Error::Corrupt { .. }) => return Ok(true),
        Err(e) => return Err(e),
    };
    if !status.not_started() {
        return Ok(true);
    }
    let same = match plan.job(id) {
        Ok(held) => held.is_some_and(|held| held.queue == j.queue && held.kind == j.kind),
        // The rest of its row does not decode: left as it is.
        Err(Error::Corrupt { .. }) => return Ok(true),
        Err(e) => return Err(e),
    };
    if !same {
        return Ok(true);
    }
    let action = Action::Debounce {
        ready_at: ctx.now.plus(window),
    };
    let next = transition(id, &status, action, &ctx.transition_ctx())?;
    plan.set_fields(id, Some(&j.payload), None)?;
    persist(plan, id, next, None)?;
    Ok(true)
}

/// What a unique key's throttle says of a submit of it.
enum Throttled {
    /// Within its period: this job answers.
    Job(JobId),
    /// No period runs.
    Free,
    /// Its job was deleted within its period: the key is only unique (one
    /// unfinished job) until the period ends.
    Deleted,
}

/// The mark that holds a throttled unique key's job for its period.
fn throttle_mark(key: &str) -> String {
    format!("throttle:{key}")
}

/// Whether a throttled submit of unique key `key` made a job within its
/// period, and whether it still exists.
fn throttled(plan: &mut Plan<'_>, key: &str) -> Result<Throttled> {
    let Some(v) = plan.mark_value(&throttle_mark(key))? else {
        return Ok(Throttled::Free);
    };
    let id = job_of_mark(&v, &format!("throttled unique key {key:?}"))?;
    Ok(match plan.status(id)? {
        Some(_) => Throttled::Job(id),
        None => Throttled::Deleted,
    })
}

/// What a new job's dependencies leave it waiting for.
enum Deps {
    /// These have not finished (none: the job is READY at once).
    Waiting(Vec<JobId>),
    /// This one has already ended DEAD or CANCELLED, and the job does not
    /// run without it.
    Failed(JobId, JobState),
}

impl Deps {
    fn waiting_on(&self) -> u32 {
        match self {
            Self::Waiting(p) => u32::try_from(p.len()).unwrap_or(u32::MAX),
            Self::Failed(..) => 1,
        }
    }
}

/// Reads the jobs `j` depends on (all at once; the batch usually has them
/// already). One that does not exist refuses the submit.
fn dependencies(plan: &mut Plan<'_>, j: &ValidJob) -> Result<Deps> {
    if j.depends_on.is_empty() {
        return Ok(Deps::Waiting(Vec::new()));
    }
    plan.load_statuses(j.depends_on.clone())?;
    // Every id must exist, whatever the others' states.
    let mut statuses = Vec::with_capacity(j.depends_on.len());
    for parent in &j.depends_on {
        let Some(status) = plan.status(*parent)? else {
            return Err(Error::DependencyNotFound { id: *parent });
        };
        statuses.push((*parent, status.state));
    }
    let mut waiting = Vec::new();
    for (parent, state) in statuses {
        match state {
            JobState::Succeeded => {}
            JobState::Dead | JobState::Cancelled => {
                if j.on_dependency_failure == DependencyFailure::Cancel {
                    return Ok(Deps::Failed(parent, state));
                }
            }
            JobState::Waiting | JobState::Ready | JobState::Scheduled | JobState::Retrying | JobState::Leased => {
                waiting.push(parent)
            }
        }
    }
    Ok(Deps::Waiting(waiting))
}

/// Tells the jobs waiting for `parent`, which has just ended `ended`
/// (`None`: deleted before it finished), and those waiting for any job
/// this cancels in turn. Costs the dependents reached, nothing more. A
/// dependent that no longer waits (cancelled, retried or deleted by a
/// user) is passed over, as is one whose row is corrupt (reported).
fn settle(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>, parent: JobId, ended: Option<JobState>) -> Result<()> {
    let mut work = vec![(parent, ended)];
    while let Some((parent, ended)) = work.pop() {
        let deps = plan.dependents(parent)?;
        if deps.is_empty() {
            continue;
        }
        // Told once: a job retried and finished again does not count twice.
        plan.settle_edges(parent);
        plan.load_statuses(deps.iter().map(|d| d.child).collect())?;
        for d in deps {
            let cur = match plan.status(d.child) {
                // Waiting on jobs; one WAITING on none (asleep, waiting for
                // an event) no longer waits on this parent.
                Ok(Some(s)) if s.state == JobState::Waiting && s.waiting_on > 0 => s,
                Ok(_) => continue,
                Err(Error::Corrupt { reason, .. }) => {
                    tracing::error!(job = %d.child, %parent, %reason, "a job waiting for another cannot be told it finished: its row is corrupt; delete it (relay delete)");
                    continue;
                }
                Err(e) => return Err(e),
            };
            let action = if ended == Some(JobState::Succeeded) || d.on_failure == DependencyFailure::Run {
                Action::Unblock { parent }
            } else {
                Action::Abandon { parent, state: ended }
            };
            let next = transition(d.child, &cur, action, &ctx.transition_ctx())?;
            let status = next.status_after(&cur).clone();
            persist(plan, d.child, next, None)?;
            // A join (issue 40) is an edge that runs anyway: its step
            // records how the parent ended.
            if d.on_failure == DependencyFailure::Run && status.state != JobState::Waiting {
                steps::joined_by(plan, ctx, d.child, parent)?;
            }
            match status.state {
                JobState::Ready => ctx.made_ready |= status.ready_at <= ctx.now,
                JobState::Cancelled => {
                    if let Some(jobs) = &mut ctx.ended_jobs {
                        jobs.push(d.child);
                    }
                    work.push((d.child, Some(JobState::Cancelled)));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// The claim: up to `max` jobs, each the aging winner among the oldest due
/// job of every class of every requested queue (and any job made due
/// earlier in the batch).
pub(crate) fn lease(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>, req: &ValidLease) -> Result<LeaseBatch> {
    let mut heads: Vec<(usize, Candidate)> = Vec::with_capacity(4 * req.queues.len());
    let mut jobs = Vec::new();
    // Each leased job's ready_at: its wait ends now.
    let mut waited_since = Vec::new();
    while jobs.len() < req.max as usize {
        plan.heads(&req.queues, &mut heads)?;
        let Some(winner) = choose(heads.iter().map(|h| h.1), ctx.now, ctx.options.aging_interval) else {
            break;
        };
        let job = plan.job(winner.id)?.ok_or(Error::NotFound { id: winner.id })?;
        // The job's own lease length, where it has one.
        let lease_for = job.lease_for.unwrap_or(req.lease_for);
        let action = Action::Lease {
            worker: &req.worker,
            lease_for,
        };
        let next = transition(job.id, &job.status, action, &ctx.transition_ctx())?;
        waited_since.push(job.status.ready_at);
        let status = next.status_after(&job.status).clone();
        persist(plan, job.id, next, None)?;
        plan.count_lease(&job.queue, job.group.as_deref())?;
        jobs.push(LeasedJob::new(job, status, lease_for));
    }
    // Counted once the claim has succeeded (a failed one is undone).
    for (j, was_ready) in jobs.iter().zip(&waited_since) {
        let secs = ctx.now.since(*was_ready).as_secs_f64();
        ctx.waits.push((j.queue.clone(), j.kind.clone(), secs));
        ctx.leased.push((j.id, j.token, j.queue.clone(), j.kind.clone()));
    }
    let mut next_ready_at: Option<Timestamp> = None;
    if jobs.is_empty() {
        for q in &req.queues {
            let t = match plan.gate(q)? {
                Gate::Open => plan.next_ready_at(q)?,
                // A rate limit's window ends: the queue's jobs come due then.
                Gate::Until(t) => Some(t),
                // Paused, or at its max_leased: a resume wakes waiting
                // lessees; a lease that ends is noticed by polling.
                Gate::Shut => None,
            };
            if let Some(t) = t {
                next_ready_at = Some(next_ready_at.map_or(t, |n| n.min(t)));
            }
        }
    }
    Ok(LeaseBatch { jobs, next_ready_at })
}

/// What `action` makes of job `id` in status `cur` (see
/// `relay_core::transition`); a lost lease is counted.
fn decide(ctx: &mut BatchCtx<'_>, id: JobId, cur: &JobStatus, action: Action<'_>) -> Result<Next> {
    transition(id, cur, action, &ctx.transition_ctx()).map_err(|e| {
        if matches!(e, relay_core::TransitionError::LeaseLost { .. }) {
            ctx.leases_lost += 1;
        }
        e.into()
    })
}

/// Applies one action to one job; returns its new status.
pub(crate) fn act(
    plan: &mut Plan<'_>,
    ctx: &mut BatchCtx<'_>,
    id: JobId,
    action: Action<'_>,
    result: Option<&[u8]>,
) -> Result<JobStatus> {
    let cur = plan.status(id)?.ok_or(Error::NotFound { id })?;
    let next = decide(ctx, id, &cur, action)?;
    let mut retaken = None;
    if matches!(action, Action::Retry) && next != Next::Unchanged {
        // Checked before deciding: the unique index would refuse the write,
        // and that fails the whole batch.
        if let Some((key, holder)) = plan.retry_key(id)? {
            if let Some(holder) = holder {
                return Err(Error::Conflict { id, key, holder });
            }
            retaken = Some(key);
        }
    }
    let status = next.status_after(&cur).clone();
    let deleted = next == Next::Delete;
    // The job has just ended (or is gone before it did): those waiting
    // for it are told.
    let ended = !cur.state.is_finished() && (deleted || status.state.is_finished());
    // A lease that counted against its queue's max_leased ends: a claim
    // later in this batch may take its slot.
    let unleased = cur.state == JobState::Leased
        && cur.lease.as_ref().is_some_and(|l| l.expires_at > ctx.now)
        && (deleted || status.state != JobState::Leased);
    let counted = if unleased { plan.counted_queue_of(id)? } else { None };
    persist(plan, id, next, result)?;
    if let Some((queue, group)) = counted {
        plan.count_unlease(&queue, group.as_deref());
    }
    if let Some(key) = retaken {
        plan.retake_key(key, id);
    }
    if ended {
        if let Some(jobs) = &mut ctx.ended_jobs {
            jobs.push(id);
        }
        settle(plan, ctx, id, (!deleted).then_some(status.state))?;
    }
    ctx.made_ready |= status.state == JobState::Ready && status.ready_at <= ctx.now;
    // A lease ended: an attempt's outcome (counted by queue and kind once
    // the batch commits), or a lease given back, snoozed, cancelled or
    // deleted (no outcome; its run is forgotten).
    if let Some(lease) = &cur.lease {
        let still_held = !deleted && status.lease.as_ref().is_some_and(|l| l.token == lease.token);
        if !still_held {
            let dead = status.state == JobState::Dead;
            let outcome = match action {
                Action::Ack { .. } => Some(Outcome::Succeeded),
                Action::Nack { .. } => Some(if dead { Outcome::Dead } else { Outcome::Failed }),
                Action::Expire { .. } => Some(if dead { Outcome::Dead } else { Outcome::Expired }),
                _ => None,
            };
            ctx.ended.push((id, lease.token, outcome));
        }
    }
    Ok(status)
}

/// Deletes a job. A row that no longer decodes can still be deleted: it is
/// the way out for an operator whose queue is stuck behind a corrupt row.
pub(crate) fn delete(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>, id: JobId) -> Result<()> {
    match act(plan, ctx, id, Action::Delete, None) {
        Err(Error::Corrupt { job: Some(j), reason }) if j == id => {
            tracing::warn!(job = %id, %reason, "deleting a corrupt job");
            plan.delete_corrupt(id)?;
            // Whatever it was, nothing will finish it now: jobs still
            // waiting for it are told it is gone.
            settle(plan, ctx, id, None)
        }
        other => other.map(drop),
    }
}

/// Reclaims expired leases and promotes due jobs (see [`reap_and_promote`]);
/// answers how many leases it reclaimed (`Relay::reap_expired`).
pub(crate) fn reap(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>) -> Result<usize> {
    reap_and_promote(plan, ctx).map(|(reaped, _)| reaped)
}

/// Reclaims expired leases (each an `Expire` transition with its event)
/// and promotes SCHEDULED and RETRYING jobs whose time has come to READY
/// (`Promote`, no event); answers how many of each. A pass that read as
/// many as the store returns at once (`relay_store::REAP_BATCH` of either)
/// sets `ctx.reaps_left`: the writer runs the next one at once. A corrupt
/// row is reported (once per process) and passed over: it would otherwise
/// be first in order every time and stop everything behind it. `delete`
/// removes it.
pub(crate) fn reap_and_promote(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>) -> Result<(usize, usize)> {
    let ids = plan.overdue()?;
    let (mut reaped, mut promoted) = (0, 0);
    for id in &ids {
        let m = plan.mark();
        // A corrupt row has no state to tell: it is tried as an expiry,
        // whose read reports it.
        let leased = match plan.status(*id) {
            Ok(Some(s)) => s.state == JobState::Leased,
            _ => true,
        };
        let done = if leased {
            // Read without the plan's queue cache: that locks a limited
            // queue's row on PostgreSQL, which claims lock in name order.
            plan.store()
                .job_expiries(*id)
                .map_err(Error::from)
                .and_then(|(earlier, own)| {
                    let poison_after = own.unwrap_or(ctx.options.poison_after);
                    act(plan, ctx, *id, Action::Expire { earlier, poison_after }, None)
                })
        } else {
            act(plan, ctx, *id, Action::Promote, None)
        };
        match done {
            Ok(_) => {
                plan.keep(m);
                if leased {
                    reaped += 1;
                    ctx.leases_expired += 1;
                } else {
                    promoted += 1;
                }
            }
            Err(Error::Corrupt { job, reason }) => {
                plan.undo(m);
                if ctx.corrupt_reported.insert(*id) {
                    let job = job.unwrap_or(*id);
                    tracing::error!(%job, %reason, "an expired lease cannot be reclaimed (or a due job promoted): its row is corrupt; delete the job (relay delete) to clear it");
                }
            }
            Err(e) => {
                plan.undo(m);
                return Err(e);
            }
        }
    }
    if reaped > 0 {
        tracing::debug!(count = reaped, "reclaimed expired leases");
    }
    if promoted > 0 {
        tracing::debug!(count = promoted, "promoted due jobs to READY");
    }
    ctx.reaps_left = ids.len() >= relay_store::REAP_BATCH;
    Ok((reaped, promoted))
}

/// Deletes finished jobs older than `age` (up to 1000 a call).
/// Deletes the throughput history's minutes older than it keeps.
pub(crate) fn prune_history(store: &mut dyn Store, now: Timestamp) -> Result<u64> {
    let keep = relay_core::time::duration_millis(relay_store::THROUGHPUT_KEEP);
    Ok(store.throughput_prune(Timestamp::from_millis(now.as_millis().saturating_sub(keep)))?)
}

/// Deletes expired marks (up to 1000 a call).
pub(crate) fn prune_marks(store: &mut dyn Store, now: Timestamp) -> Result<u64> {
    Ok(store.mark_prune(now)?)
}

/// One pass of the prune: reads the window of `relay_store::PRUNE_SCAN`
/// jobs after `after` and deletes, with their events, the finished ones
/// past their queue's retention for their state (else `default`'s, else 7
/// days), at most `relay_store::PRUNE_BATCH`. A pass that deletes that
/// many stops at the last of them; the next goes on from there.
pub(crate) fn prune_pass(
    store: &mut dyn Store,
    now: Timestamp,
    default: &relay_core::Retention,
    after: JobId,
) -> Result<crate::Pruned> {
    let window = store.job_finished_window(after)?;
    let mut next = window.last;
    let mut doomed = Vec::new();
    for f in &window.finished {
        let keep = f.keep.of(f.state, default);
        if keep.is_some_and(|k| k.expired(f.finished_at, now)) {
            doomed.push((f.id, f.finished_at));
            if doomed.len() == relay_store::PRUNE_BATCH {
                next = Some(f.id);
                break;
            }
        }
    }
    let deleted = store.job_delete_finished(&doomed)?;
    Ok(crate::Pruned { deleted, next })
}

/// Pauses or resumes `queue`. A resume wakes waiting lessees (here, and
/// where the store tells other processes, there too).
pub(crate) fn set_paused(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>, queue: &str, paused: bool) -> Result<()> {
    let mut settings = plan.queue_for_change(queue)?;
    if settings.paused == paused {
        return Ok(());
    }
    settings.paused = paused;
    plan.set_queue(queue, settings)?;
    ctx.made_ready |= !paused;
    Ok(())
}

/// Sets `queue`'s limits (replacing both). Lessees are woken: a limit may
/// have been raised or lifted.
pub(crate) fn set_limits(
    plan: &mut Plan<'_>,
    ctx: &mut BatchCtx<'_>,
    queue: &str,
    limits: relay_core::QueueLimits,
) -> Result<()> {
    let mut settings = plan.queue_for_change(queue)?;
    if settings.limits == limits {
        return Ok(());
    }
    settings.limits = limits;
    plan.set_queue(queue, settings)?;
    ctx.made_ready = true;
    Ok(())
}

/// Sets `queue`'s own retention (read by the next prune pass).
pub(crate) fn set_retention(plan: &mut Plan<'_>, queue: &str, retention: relay_core::Retention) -> Result<()> {
    let mut settings = plan.queue_for_change(queue)?;
    if settings.retention == retention {
        return Ok(());
    }
    settings.retention = retention;
    plan.set_queue(queue, settings)
}

/// Most schedules one batch fires. When a batch fires this many, the
/// writer's next batch ticks again at once (see `writer.rs`), so a running
/// scheduler fires every due schedule within its tick; the cost of a tick
/// is one job insert and one schedule update.
pub(crate) const TICKS_PER_BATCH: usize = 1024;

/// Most skipped ticks of a cron schedule counted (one at a time, inside
/// the batch); more are reported as this many.
const SKIPPED_COUNT_MAX: u64 = 100;

/// Enqueues one job for each due schedule and moves it to its next tick
/// after now. Ticks that came and went before this one fired (the process
/// was down, or the scheduler fell behind) give no job each: they are
/// counted as skipped, in the job's "submitted" event (`skipped_ticks`),
/// in `Metrics::skipped_ticks` and in a log line. Each schedule is complete
/// in itself: one that fails is logged and left for the next pass.
pub(crate) fn fire_schedules(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>) -> Result<usize> {
    let mut fired = 0;
    for due in plan.due_schedules(TICKS_PER_BATCH)? {
        let s = match due {
            Ok(s) => s,
            Err(e) if e.is_batch_fatal() => return Err(e),
            Err(e) => {
                tracing::error!(error = %e, "a schedule cannot run: its row is corrupt; remove it (relay schedule remove) and add it again");
                continue;
            }
        };
        let m = plan.mark();
        match fire(plan, ctx, s) {
            Ok(()) => {
                plan.keep(m);
                fired += 1;
            }
            Err(e) if e.is_batch_fatal() => {
                plan.undo(m);
                return Err(e);
            }
            Err(e) => {
                plan.undo(m);
                tracing::error!(error = %e, "a schedule's job could not be enqueued; it is tried again on the next pass");
            }
        }
    }
    Ok(fired)
}

fn fire(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>, mut s: Schedule) -> Result<()> {
    let job = ValidJob {
        queue: s.queue.clone(),
        kind: s.kind.clone(),
        payload: s.payload.clone(),
        priority: s.priority,
        ready_at: ctx.now,
        max_attempts: s.max_attempts,
        unique_key: None,
        idempotency_key: None,
        throttle: None,
        debounce: None,
        lease_for: None,
        timeout: None,
        depends_on: Vec::new(),
        on_dependency_failure: DependencyFailure::Cancel,
        traceparent: None,
        tags: Vec::new(),
        group: s.group.clone(),
    };
    let skipped = skipped_ticks(&s, ctx.now)?;
    insert(plan, ctx, &job, Some((&s.name, s.next_at, skipped)))?;
    if skipped > 0 {
        tracing::warn!(
            schedule = %s.name,
            skipped,
            tick = %s.next_at.to_rfc3339(),
            "a schedule fired late: ticks between its due tick and now were skipped (the process was down or the scheduler fell behind)"
        );
        ctx.skipped_ticks += skipped;
    }
    s.last_at = Some(s.next_at);
    match s.recurrence.next_after(ctx.now, s.created_at)? {
        Some(next) => s.next_at = next,
        None => {
            tracing::warn!(schedule = %s.name, "the schedule has no tick left; it is paused");
            s.paused = true;
        }
    }
    let name = s.name.clone();
    plan.set_schedule(&name, Some(s))
}

/// How many ticks of `s` after its due one (`next_at`) are at or before
/// `now`: the ones this firing passes over.
fn skipped_ticks(s: &Schedule, now: Timestamp) -> Result<u64> {
    if let relay_core::Recurrence::Every(d) = &s.recurrence {
        let every = relay_core::time::duration_millis(*d).max(1);
        let late = now.as_millis().saturating_sub(s.next_at.as_millis()).max(0);
        return Ok(u64::try_from(late / every).unwrap_or(0));
    }
    let mut at = s.next_at;
    let mut n = 0;
    while n < SKIPPED_COUNT_MAX {
        match s.recurrence.next_after(at, s.created_at)? {
            Some(next) if next <= now => {
                n += 1;
                at = next;
            }
            _ => break,
        }
    }
    Ok(n)
}

/// Adds schedule `new`, or replaces the one of its name (which keeps its
/// paused state and its last tick). Its first tick is the first after now.
pub(crate) fn put_schedule(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>, new: &ValidSchedule) -> Result<Schedule> {
    // A stored row that does not decode is replaced, as if it were not there.
    let (old, corrupt) = match plan.schedule(&new.name) {
        Ok(old) => (old, false),
        Err(Error::Corrupt { reason, .. }) => {
            tracing::warn!(schedule = %new.name, %reason, "replacing a corrupt schedule");
            (None, true)
        }
        Err(e) => return Err(e),
    };
    let next_at = first_tick(&new.recurrence, ctx.now)?;
    let s = Schedule {
        name: new.name.clone(),
        recurrence: new.recurrence.clone(),
        queue: new.job.queue.clone(),
        kind: new.job.kind.clone(),
        payload: new.job.payload.clone(),
        priority: new.job.priority,
        max_attempts: new.job.max_attempts,
        group: new.job.group.clone(),
        paused: old.as_ref().is_some_and(|o| o.paused),
        created_at: ctx.now,
        next_at,
        last_at: old.and_then(|o| o.last_at),
    };
    if corrupt {
        plan.overwrite_schedule(&new.name, Some(s.clone()));
    } else {
        plan.set_schedule(&new.name, Some(s.clone()))?;
    }
    Ok(s)
}

fn first_tick(r: &relay_core::Recurrence, now: Timestamp) -> Result<Timestamp> {
    r.next_after(now, now)?.ok_or_else(|| {
        Error::InvalidInput(relay_core::InvalidInput::new(
            "cron",
            "the expression has no tick in the future",
        ))
    })
}

/// Removes schedule `name` (jobs it enqueued stay).
/// A stored row that does not decode is removed too: the way out for an
/// operator whose schedule list fails on it.
pub(crate) fn remove_schedule(plan: &mut Plan<'_>, name: &str) -> Result<()> {
    match plan.schedule(name) {
        Ok(Some(_)) => plan.set_schedule(name, None),
        Ok(None) => Err(Error::ScheduleNotFound { name: name.to_owned() }),
        Err(Error::Corrupt { reason, .. }) => {
            tracing::warn!(schedule = %name, %reason, "removing a corrupt schedule");
            plan.overwrite_schedule(name, None);
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Pauses or resumes schedule `name`. A resumed schedule's next tick is
/// the first after now: ticks missed while paused enqueue nothing.
pub(crate) fn set_schedule_paused(
    plan: &mut Plan<'_>,
    ctx: &mut BatchCtx<'_>,
    name: &str,
    paused: bool,
) -> Result<Schedule> {
    let Some(mut s) = plan.schedule(name)? else {
        return Err(Error::ScheduleNotFound { name: name.to_owned() });
    };
    if s.paused == paused {
        return Ok(s);
    }
    s.paused = paused;
    if !paused {
        s.next_at = s.recurrence.next_after(ctx.now, s.created_at)?.ok_or_else(|| {
            Error::InvalidInput(relay_core::InvalidInput::new(
                "cron",
                "the expression has no tick in the future",
            ))
        })?;
    }
    plan.set_schedule(name, Some(s.clone()))?;
    Ok(s)
}

/// Appends a user event to an existing job.
pub(crate) fn append_event(plan: &mut Plan<'_>, id: JobId, kind: &str, data: &str) -> Result<i64> {
    plan.status(id)?.ok_or(Error::NotFound { id })?;
    plan.user_event(id, kind.to_owned(), data.to_owned())
}

/// Records `next` in the batch's plan.
fn persist(plan: &mut Plan<'_>, id: JobId, next: Next, result: Option<&[u8]>) -> Result<()> {
    match next {
        Next::Unchanged => Ok(()),
        Next::Delete => plan.delete(id),
        Next::Update { status, event } => {
            plan.update(id, status, result)?;
            if let Some(e) = event {
                plan.event(id, e.kind, e.data)?;
            }
            Ok(())
        }
    }
}
