//! The operations of durable execution (issue 40): a lease holder's step
//! records, sleeps and waits for events, and emits, each planned through
//! the batch's [`Plan`] as the other operations of `ops` are.

use super::{act, decide, persist};
use crate::engine::batch::BatchCtx;
use crate::engine::plan::Plan;
use crate::error::{Error, Result};
use relay_core::job::{Waited, EVENT_KEEP, MAX_STEPS, MAX_STEP_BYTES};
use relay_core::{Action, JobId, JobState, JobStatus, LeaseToken, Step, Timestamp};

/// Records step `name` of job `id` under lease `token` (see
/// `Engine::record_step_op`): the token is checked first, so a stale one
/// is refused whatever the job holds.
pub(crate) fn record_step(
    plan: &mut Plan<'_>,
    ctx: &mut BatchCtx<'_>,
    id: JobId,
    token: LeaseToken,
    name: &str,
    output: &[u8],
) -> Result<Option<Step>> {
    let cur = plan.status(id)?.ok_or(Error::NotFound { id })?;
    let action = Action::Step {
        token,
        name,
        bytes: output.len(),
    };
    let next = decide(ctx, id, &cur, action)?;
    if let Some(earlier) = append_step(plan, ctx, id, cur.attempts, name, output)? {
        return Ok(Some(earlier));
    }
    persist(plan, id, next, None)?;
    Ok(None)
}

/// Appends step `name` with `output` to job `id`'s steps, recorded by
/// `attempt` now (whoever may record it is the caller's check): `None`
/// when appended, or the record of `name` that stands (nothing written).
fn append_step(
    plan: &mut Plan<'_>,
    ctx: &BatchCtx<'_>,
    id: JobId,
    attempt: u32,
    name: &str,
    output: &[u8],
) -> Result<Option<Step>> {
    let job = plan.job(id)?.ok_or(Error::NotFound { id })?;
    if let Some(earlier) = job.step(name) {
        return Ok(Some(earlier.clone()));
    }
    let bounds = [
        ("steps", MAX_STEPS, job.steps.len() + 1),
        ("step_bytes", MAX_STEP_BYTES, job.step_bytes() + output.len()),
    ];
    if let Some((bound, limit, would_be)) = bounds.into_iter().find(|(_, limit, n)| n > limit) {
        return Err(Error::StepBound {
            id,
            bound,
            limit: limit as u64,
            would_be: would_be as u64,
        });
    }
    let mut steps = job.steps;
    steps.push(Step {
        name: name.to_owned(),
        attempt,
        at: ctx.now,
        output: output.to_vec(),
    });
    plan.set_steps(id, steps)?;
    Ok(None)
}

/// Puts job `id` to sleep until `until` under lease `token`: records step
/// `step` (its output the wake-up time), then gives the lease back until
/// then (see `Action::Sleep`). A step of that name recorded earlier (a
/// sleep an earlier run began) wins, and the job sleeps until its time.
pub(crate) fn sleep(
    plan: &mut Plan<'_>,
    ctx: &mut BatchCtx<'_>,
    id: JobId,
    token: LeaseToken,
    step: &str,
    until: Timestamp,
) -> Result<JobStatus> {
    let until = match record_step(plan, ctx, id, token, step, &Step::sleep_output(until))? {
        None => until,
        Some(earlier) => earlier.sleep_until().ok_or_else(|| {
            relay_core::InvalidInput::new(
                "step",
                format!("step {step:?} of job {id} is recorded, and not as a sleep: name the sleep anew"),
            )
        })?,
    };
    act(plan, ctx, id, Action::Sleep { token, until }, None)
}

/// Job `id`'s holder waits for event `key` under step `step` until `until`
/// (see `Action::Wait`): when the step is recorded already, or the event
/// was emitted (its payload recorded as the step now), or the wait's time
/// has run out (recorded as timed out), the job is READY at once and its
/// handler's next run reads the step; otherwise it is WAITING, holding no
/// lease, until an emit of the key wakes it or `until` (a wait begun
/// earlier for the same step keeps its own time).
pub(crate) fn wait(
    plan: &mut Plan<'_>,
    ctx: &mut BatchCtx<'_>,
    id: JobId,
    token: LeaseToken,
    step: &str,
    key: &str,
    until: Timestamp,
) -> Result<JobStatus> {
    let cur = plan.status(id)?.ok_or(Error::NotFound { id })?;
    // The token first: a stale one changes nothing, whatever the job holds.
    decide(ctx, id, &cur, Action::Wait { token, key, until })?;
    let recorded = plan.job(id)?.ok_or(Error::NotFound { id })?.step(step).is_some();
    let earlier = plan.wait_of(id)?;
    let mut wait = None;
    let until = if recorded {
        ctx.now
    } else if let Some(payload) = plan.event_payload(key)? {
        append_step(plan, ctx, id, cur.attempts, step, &Waited::Event(payload).output())?;
        ctx.now
    } else {
        let until = earlier
            .as_ref()
            .filter(|w| w.key == key && w.step == step)
            .map_or(until, |w| w.until);
        if until <= ctx.now {
            append_step(plan, ctx, id, cur.attempts, step, &Waited::TimedOut.output())?;
            ctx.now
        } else {
            wait = Some(relay_store::Wait {
                key: key.to_owned(),
                step: step.to_owned(),
                until,
            });
            until
        }
    };
    if wait != earlier {
        plan.set_wait(id, wait)?;
    }
    act(plan, ctx, id, Action::Wait { token, key, until }, None)
}

/// Emits event `key` with `payload`: the first emit of a key is kept
/// (`EVENT_KEEP`), and every job waiting for it has the
/// payload recorded as its wait's step and is READY, in this commit; a
/// later emit of the key changes nothing. Answers whether this emit was
/// the first, and how many jobs it woke.
pub(crate) fn emit(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>, key: &str, payload: &[u8]) -> Result<crate::Emitted> {
    if plan.event_payload(key)?.is_some() {
        return Ok(crate::Emitted { first: false, woken: 0 });
    }
    plan.set_mark(
        &crate::engine::plan::event_mark(key),
        crate::engine::plan::event_text(payload),
        ctx.now.plus(EVENT_KEEP),
    )?;
    let output = Waited::Event(payload.to_vec()).output();
    let mut woken = 0;
    for (job, step) in plan.waits_on(key)? {
        plan.set_wait(job, None)?;
        let st = match plan.status(job) {
            Ok(Some(st)) => st,
            Ok(None) => continue,
            Err(Error::Corrupt { reason, .. }) => {
                tracing::error!(%job, key, %reason, "a job waiting for an event cannot be woken: its row is corrupt; delete it (relay delete)");
                continue;
            }
            Err(e) => return Err(e),
        };
        // Cancelled, deleted or retried since it began to wait: its wait
        // ends with nothing to wake.
        if st.state != JobState::Waiting || st.waiting_on != 0 {
            continue;
        }
        match append_step(plan, ctx, job, st.attempts, &step, &output) {
            // Past its bounds: woken all the same, its handler's wait
            // then fails on its own with the bound it met.
            Ok(_) | Err(Error::StepBound { .. }) => {}
            Err(e) => return Err(e),
        }
        act(plan, ctx, job, Action::Wake { key }, None)?;
        woken += 1;
    }
    Ok(crate::Emitted { first: true, woken })
}

/// The waits-table key of a join of job `child`: never an event key (`#`
/// is not allowed in one), so no emit reads or clears it.
pub(crate) fn join_key(child: JobId) -> String {
    format!("#join:{}", child.0)
}

/// How job `child` ended, as a join records it (`None`: it is gone).
fn joined(plan: &mut Plan<'_>, child: JobId) -> Result<relay_core::job::Joined> {
    let job = plan.job(child)?;
    Ok(relay_core::job::Joined {
        job: child,
        state: job.as_ref().map(|j| j.status.state),
        result: job.as_ref().and_then(|j| j.result.clone()),
        error: job.and_then(|j| j.status.last_error),
    })
}

/// Job `id`'s holder awaits job `child`'s end under step `step` (see
/// `Action::Join`): when the step is recorded already, or the child has
/// ended (its outcome recorded as the step now), the job is READY at once
/// and its handler's next run reads the step; otherwise it is WAITING on
/// the child, holding no lease, until the child's end records the step
/// and unblocks it (`settle`, through the dependency edge added here).
/// The child's row is read (and on PostgreSQL locked) in this batch, so a
/// batch that ends it elsewhere sees the edge, or this one sees it ended.
pub(crate) fn join(
    plan: &mut Plan<'_>,
    ctx: &mut BatchCtx<'_>,
    id: JobId,
    token: LeaseToken,
    step: &str,
    child: JobId,
) -> Result<JobStatus> {
    let cur = plan.status(id)?.ok_or(Error::NotFound { id })?;
    decide(
        ctx,
        id,
        &cur,
        Action::Join {
            token,
            child,
            ended: false,
        },
    )?;
    if child == id {
        return Err(relay_core::InvalidInput::new("job", format!("job {id} cannot join itself")).into());
    }
    let recorded = plan.job(id)?.ok_or(Error::NotFound { id })?.step(step).is_some();
    let ended = if recorded {
        true
    } else {
        // Gone (deleted, or pruned by retention after it ended): recorded
        // as DELETED, as a child deleted during the join is.
        if plan.status(child)?.is_none_or(|st| st.state.is_finished()) {
            let out = joined(plan, child)?.output();
            append_step(plan, ctx, id, cur.attempts, step, &out)?;
            true
        } else {
            false
        }
    };
    let wait = (!ended).then(|| relay_store::Wait {
        key: join_key(child),
        step: step.to_owned(),
        until: ctx.now,
    });
    if plan.wait_of(id)? != wait {
        plan.set_wait(id, wait)?;
    }
    if !ended && !plan.dependents(child)?.iter().any(|d| d.child == id) {
        plan.add_edge(relay_store::Dependent {
            parent: child,
            child: id,
            on_failure: relay_core::DependencyFailure::Run,
        });
    }
    act(plan, ctx, id, Action::Join { token, child, ended }, None)
}

/// Called by `settle` for a job unblocked by `parent`'s end: when it
/// awaits `parent` as a join, records how `parent` ended as the join's
/// step and ends the join.
pub(crate) fn joined_by(plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>, waiter: JobId, parent: JobId) -> Result<()> {
    let Some(w) = plan.wait_of(waiter)? else {
        return Ok(());
    };
    if w.key != join_key(parent) {
        return Ok(());
    }
    plan.set_wait(waiter, None)?;
    let attempts = plan.status(waiter)?.map_or(0, |s| s.attempts);
    let out = joined(plan, parent)?.output();
    match append_step(plan, ctx, waiter, attempts, &w.step, &out) {
        // Past its bounds: unblocked all the same; its handler's join then
        // fails on its own with the bound it met.
        Ok(_) | Err(Error::StepBound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}
