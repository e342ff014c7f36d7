//! Each API call as a [`Pending`] operation, built once and run by both the
//! blocking [`crate::Relay`] and the async [`crate::AsyncRelay`].

use crate::engine::batch::BatchCtx;
use crate::engine::ops;
use crate::engine::plan::Plan;
use crate::engine::{Engine, Hint, Pending};
use crate::error::Result;
use crate::request::{
    check_body, error_text, Completion, CompletionOutcome, LeaseBatch, NewJob, NewSchedule, ValidLease, Worked,
};
use relay_core::{Action, JobId, JobStatus, LeaseToken, Schedule, Timestamp};
use std::time::Duration;

impl Engine {
    pub(crate) fn submit_op(&self, jobs: Vec<NewJob>) -> Result<Pending<Vec<crate::request::Submitted>>> {
        let now = self.options.clock.now();
        let limits = &self.options.limits;
        let valid = jobs
            .into_iter()
            .map(|j| j.validate(limits, self.options.default_max_attempts, now))
            .collect::<Result<Vec<_>, _>>()?;
        let mut parents: Vec<JobId> = valid.iter().flat_map(|j| j.depends_on.iter().copied()).collect();
        parents.sort_unstable();
        parents.dedup();
        let hint = Hint::Submit {
            jobs: valid.len(),
            parents,
        };
        Ok(Pending::new(hint, move |plan, ctx| ops::submit(plan, ctx, &valid)))
    }

    pub(crate) fn lease_op(&self, req: ValidLease) -> Pending<LeaseBatch> {
        let hint = Hint::Claim {
            queues: req.queues.clone(),
            max: req.max,
        };
        Pending::new(hint, move |plan, ctx| ops::lease(plan, ctx, &req))
    }

    pub(crate) fn ack_op(&self, id: JobId, token: LeaseToken, result: Option<Vec<u8>>) -> Result<Pending<()>> {
        if let Some(r) = &result {
            check_body(&self.options.limits, "result", r)?;
        }
        Ok(Pending::held(id, move |plan, ctx| {
            ops::act(plan, ctx, id, Action::Ack { token }, result.as_deref()).map(drop)
        }))
    }

    pub(crate) fn nack_op(&self, id: JobId, token: LeaseToken, error: &str, then: AfterFailure) -> Pending<JobStatus> {
        let error = error_text(error);
        let (retry_in, permanent) = match then {
            AfterFailure::Retry(after) => (after, false),
            AfterFailure::Dead => (None, true),
        };
        Pending::held(id, move |plan, ctx| {
            ops::act(
                plan,
                ctx,
                id,
                Action::Nack {
                    token,
                    error: &error,
                    retry_in,
                    permanent,
                },
                None,
            )
        })
    }

    pub(crate) fn extend_op(&self, id: JobId, token: LeaseToken, lease_for: Duration) -> Result<Pending<Timestamp>> {
        self.options.limits.lease_for(lease_for)?;
        Ok(Pending::held(id, move |plan, ctx| {
            let s = ops::act(plan, ctx, id, Action::Extend { token, lease_for }, None)?;
            Ok(s.lease.map_or(ctx.now, |l| l.expires_at))
        }))
    }

    /// A lease holder's progress report, kept on the job (with the
    /// attempt that made it) and in its event log.
    pub(crate) fn progress_op(
        &self,
        id: JobId,
        token: LeaseToken,
        fraction: f64,
        message: Option<&str>,
    ) -> Result<Pending<()>> {
        relay_core::Progress::check(fraction, message)?;
        let message = message.map(str::to_owned);
        Ok(Pending::new(Hint::Jobs(vec![id]), move |plan, ctx| {
            let action = Action::Progress {
                token,
                fraction,
                message: message.as_deref(),
            };
            let s = ops::act(plan, ctx, id, action, None)?;
            let progress = relay_core::Progress {
                fraction,
                message: message.clone(),
                at: ctx.now,
                attempt: s.attempts,
                token: token.0,
            };
            plan.set_fields(id, None, Some(&progress))
        }))
    }

    /// A lease holder's record of a step's output, kept on the job: `None`
    /// when it is recorded, or the record of `name` that stands already
    /// (the first record of a name wins; this one changed nothing).
    pub(crate) fn record_step_op(
        &self,
        id: JobId,
        token: LeaseToken,
        name: &str,
        output: Vec<u8>,
    ) -> Result<Pending<Option<relay_core::Step>>> {
        relay_core::Step::check_name(name)?;
        relay_core::Step::check_output(&output)?;
        let name = name.to_owned();
        Ok(Pending::new(Hint::Jobs(vec![id]), move |plan, ctx| {
            ops::record_step(plan, ctx, id, token, &name, &output)
        }))
    }

    /// Snooze: returns when the job is due again.
    pub(crate) fn snooze_op(&self, id: JobId, token: LeaseToken, delay: Duration) -> Pending<Timestamp> {
        Pending::held(id, move |plan, ctx| {
            ops::act(plan, ctx, id, Action::Snooze { token, delay }, None).map(|s| s.ready_at)
        })
    }

    /// Release, cancel, retry and delete: actions with nothing to validate.
    pub(crate) fn action_op(&self, id: JobId, action: SimpleAction) -> Pending<()> {
        Pending::new(Hint::Jobs(vec![id]), move |plan, ctx| {
            let a = match action {
                SimpleAction::Release(token) => Action::Release { token },
                SimpleAction::Cancel => Action::Cancel,
                SimpleAction::Retry => Action::Retry,
                SimpleAction::Delete => return ops::delete(plan, ctx, id),
            };
            ops::act(plan, ctx, id, a, None).map(drop)
        })
    }

    /// Retry, cancel or delete each of `ids`, each on its own: one that
    /// its state does not allow (or that is gone) is passed over. Returns
    /// how many it changed.
    pub(crate) fn bulk_op(&self, ids: Vec<JobId>, what: super::search::Bulk) -> Pending<u64> {
        Pending::new(Hint::Jobs(ids.clone()), move |plan, ctx| {
            let mut done = 0;
            for &id in &ids {
                let m = plan.mark();
                let r = match what {
                    super::search::Bulk::Retry => ops::act(plan, ctx, id, Action::Retry, None).map(drop),
                    super::search::Bulk::Cancel => ops::act(plan, ctx, id, Action::Cancel, None).map(drop),
                    super::search::Bulk::Delete => ops::delete(plan, ctx, id),
                };
                match r {
                    Ok(()) => {
                        plan.keep(m);
                        done += 1;
                    }
                    Err(e) if e.is_batch_fatal() => return Err(e),
                    Err(_) => plan.undo(m),
                }
            }
            Ok(done)
        })
    }

    /// Writes mark `key` for `keep`, unless a live one is there.
    pub(crate) fn put_mark_op(&self, key: &str, value: &str, keep: std::time::Duration) -> Result<Pending<bool>> {
        self.options
            .limits
            .unique_key(key)
            .map_err(|e| relay_core::InvalidInput::new("key", e.reason))?;
        if key.starts_with("idempotency:") {
            return Err(
                relay_core::InvalidInput::new("key", "keys under idempotency: are the idempotency keys' own").into(),
            );
        }
        if key.starts_with("event:") {
            return Err(
                relay_core::InvalidInput::new("key", "keys under event: are the emitted events' own (emit)").into(),
            );
        }
        if key.starts_with("token:") {
            return Err(relay_core::InvalidInput::new(
                "key",
                "keys under token: are the completion tokens' own (create_token)",
            )
            .into());
        }
        let (key, value) = (key.to_owned(), value.to_owned());
        Ok(Pending::new(Hint::None, move |plan, ctx| {
            ops::put_mark(plan, &key, &value, ctx.now.plus(keep))
        }))
    }

    /// Pause (`true`) or resume (`false`) a queue.
    pub(crate) fn pause_op(&self, queue: &str, paused: bool) -> Result<Pending<()>> {
        self.options.limits.queue(queue)?;
        let queue = queue.to_owned();
        Ok(Pending::new(Hint::None, move |plan, ctx| {
            ops::set_paused(plan, ctx, &queue, paused)
        }))
    }

    /// Set (replace) a queue's limits.
    pub(crate) fn limits_op(&self, queue: &str, limits: relay_core::QueueLimits) -> Result<Pending<()>> {
        self.options.limits.queue(queue)?;
        limits.validate()?;
        let queue = queue.to_owned();
        Ok(Pending::new(Hint::None, move |plan, ctx| {
            ops::set_limits(plan, ctx, &queue, limits)
        }))
    }

    pub(crate) fn add_schedule_op(&self, s: NewSchedule) -> Result<Pending<Schedule>> {
        let now = self.options.clock.now();
        let valid = s.validate(&self.options.limits, self.options.default_max_attempts, now)?;
        Ok(Pending::new(Hint::None, move |plan, ctx| {
            ops::put_schedule(plan, ctx, &valid)
        }))
    }

    pub(crate) fn remove_schedule_op(&self, name: &str) -> Pending<()> {
        let name = name.to_owned();
        Pending::new(Hint::None, move |plan, _ctx| ops::remove_schedule(plan, &name))
    }

    pub(crate) fn pause_schedule_op(&self, name: &str, paused: bool) -> Pending<Schedule> {
        let name = name.to_owned();
        Pending::new(Hint::None, move |plan, ctx| {
            ops::set_schedule_paused(plan, ctx, &name, paused)
        })
    }

    pub(crate) fn run_schedules_op(&self) -> Pending<usize> {
        Pending::new(Hint::None, ops::fire_schedules)
    }

    pub(crate) fn append_event_op(&self, id: JobId, kind: &str, data: &serde_json::Value) -> Result<Pending<i64>> {
        self.options.limits.label("event kind", kind)?;
        let data = data.to_string();
        check_body(&self.options.limits, "event data", data.as_bytes())?;
        if data.len() > crate::engine::plan::MAX_APPENDED_EVENT_BYTES {
            return Err(relay_core::InvalidInput::new(
                "event data",
                format!(
                    "is {} bytes of JSON; an appended event's data is at most {} bytes \
                     (keep larger records in the job's result or your own storage)",
                    data.len(),
                    crate::engine::plan::MAX_APPENDED_EVENT_BYTES
                ),
            )
            .into());
        }
        let kind = kind.to_owned();
        Ok(Pending::new(Hint::Jobs(vec![id]), move |plan, _ctx| {
            ops::append_event(plan, id, &kind, &data)
        }))
    }

    /// Acks, nacks, snoozes and releases of many jobs in one operation;
    /// each succeeds or fails on its own (a result over the size limit
    /// included).
    pub(crate) fn complete_op(&self, batch: Vec<Completion>) -> Pending<Vec<Result<JobStatus>>> {
        self.completions_op(batch, |w| w.completions)
    }

    /// [`Self::complete_op`] answering the step records that stood already
    /// too (a [`Worked`] without jobs).
    pub(crate) fn report_op(&self, batch: Vec<Completion>) -> Pending<Worked> {
        self.completions_op(batch, |w| w)
    }

    fn completions_op<T: Send + 'static>(&self, batch: Vec<Completion>, answer: fn(Worked) -> T) -> Pending<T> {
        let batch = self.checked_completions(batch);
        let ids: Vec<JobId> = batch.iter().map(|(c, _)| c.id).collect();
        // A sleep, a wait and a step read the job's steps: never planned
        // unread.
        let reads_row = batch.iter().any(|(c, _)| {
            matches!(
                c.outcome,
                CompletionOutcome::Sleep { .. }
                    | CompletionOutcome::Wait { .. }
                    | CompletionOutcome::Step { .. }
                    | CompletionOutcome::Join { .. }
            )
        });
        let work = move |plan: &mut Plan<'_>, ctx: &mut BatchCtx<'_>| {
            let (completions, earlier) = complete_each(plan, ctx, &batch)?;
            Ok(answer(Worked {
                completions,
                earlier,
                jobs: Vec::new(),
            }))
        };
        match ids.as_slice() {
            [id] if !reads_row => Pending::held(*id, work),
            _ => Pending::new(Hint::Jobs(ids), work),
        }
    }

    /// Retries a DEAD or CANCELLED job with its steps forgotten (see
    /// [`crate::Relay::retry_from_start`]).
    pub(crate) fn retry_from_start_op(&self, id: JobId) -> Pending<()> {
        Pending::new(Hint::Jobs(vec![id]), move |plan, ctx| {
            ops::act(plan, ctx, id, Action::Retry, None)?;
            if plan.job(id)?.is_some_and(|j| !j.steps.is_empty()) {
                plan.set_steps(id, Vec::new())?;
            }
            if plan.wait_of(id)?.is_some() {
                plan.set_wait(id, None)?;
            }
            Ok(())
        })
    }

    /// Makes a completion token for job `id`'s holder of `lease`, open for
    /// `timeout` (see [`crate::Relay::create_token`]).
    pub(crate) fn create_token_op(
        &self,
        id: JobId,
        lease: LeaseToken,
        timeout: Duration,
    ) -> Result<Pending<crate::CompletionToken>> {
        let now = self.options.clock.now();
        if timeout.is_zero() || timeout > relay_core::job::MAX_SLEEP {
            return Err(relay_core::InvalidInput::new(
                "timeout",
                format!(
                    "a token is open for more than 0 and at most {} days",
                    relay_core::job::MAX_SLEEP.as_secs() / 86_400
                ),
            )
            .into());
        }
        let token = crate::CompletionToken::fresh(now.plus(timeout))?;
        Ok(Pending::new(Hint::Jobs(vec![id]), move |plan, ctx| {
            ops::create_token(plan, ctx, id, lease, &token)
        }))
    }

    /// Completes a token (see [`crate::Relay::complete_token`]).
    pub(crate) fn complete_token_op(&self, text: &str, payload: Vec<u8>) -> Result<Pending<crate::Emitted>> {
        relay_core::job::Waited::check_payload(&payload)?;
        if text.len() > 200 {
            return Err(crate::Error::Token {
                refusal: crate::TokenRefusal::Unknown,
            });
        }
        // Checked on a read connection first: a guess (a wrong secret, a
        // made-up id) costs the writer nothing.
        let unknown = crate::Error::Token {
            refusal: crate::TokenRefusal::Unknown,
        };
        let (mark, secret) = ops::split_token(text).ok_or(unknown.clone())?;
        let now = self.options.clock.now();
        let stored = self.readers.with(|r| r.mark_get(&mark, now))?;
        if !stored.is_some_and(|v| ops::secret_matches(&v, secret)) {
            return Err(unknown);
        }
        let text = text.to_owned();
        Ok(Pending::new(Hint::None, move |plan, ctx| {
            ops::complete_token(plan, ctx, &text, &payload)
        }))
    }

    /// Emits event `key` (see [`crate::Relay::emit`]).
    pub(crate) fn emit_op(&self, key: &str, payload: Vec<u8>) -> Result<Pending<crate::Emitted>> {
        relay_core::job::Waited::check_key(key)?;
        if key.starts_with("token:") {
            return Err(relay_core::InvalidInput::new(
                "key",
                "keys under token: are the completion tokens' own: complete a token with its secret (POST /v1/tokens/{token}/complete)",
            )
            .into());
        }
        relay_core::job::Waited::check_payload(&payload)?;
        let key = key.to_owned();
        Ok(Pending::new(Hint::None, move |plan, ctx| {
            ops::emit(plan, ctx, &key, &payload)
        }))
    }

    /// A lease holder waits for event `key` (see [`crate::Relay::wait`]).
    pub(crate) fn wait_op(
        &self,
        id: JobId,
        token: LeaseToken,
        step: &str,
        key: &str,
        until: Timestamp,
    ) -> Result<Pending<JobStatus>> {
        check_sleep(step, until, self.options.clock.now())?;
        relay_core::job::Waited::check_key(key)?;
        let (step, key) = (step.to_owned(), key.to_owned());
        Ok(Pending::new(Hint::Jobs(vec![id]), move |plan, ctx| {
            ops::wait(plan, ctx, id, token, &step, &key, until)
        }))
    }

    /// A lease holder puts its job to sleep until `until` under step `step`
    /// (see [`crate::Relay::sleep`]); returns its new status.
    pub(crate) fn sleep_op(
        &self,
        id: JobId,
        token: LeaseToken,
        step: &str,
        until: Timestamp,
    ) -> Result<Pending<JobStatus>> {
        check_sleep(step, until, self.options.clock.now())?;
        let step = step.to_owned();
        Ok(Pending::new(Hint::Jobs(vec![id]), move |plan, ctx| {
            ops::sleep(plan, ctx, id, token, &step, until)
        }))
    }

    /// [`Self::complete_op`], then a claim (without waiting) in the same
    /// operation: the completions first, so what they free (a queue's
    /// `max_leased`) is there for the claim, and one commit carries both.
    pub(crate) fn complete_and_lease_op(&self, batch: Vec<Completion>, req: ValidLease) -> Pending<Worked> {
        let batch = self.checked_completions(batch);
        let hint = Hint::CompleteAndClaim {
            jobs: batch.iter().map(|(c, _)| c.id).collect(),
            queues: req.queues.clone(),
            max: req.max,
        };
        Pending::new(hint, move |plan, ctx| {
            let (completions, earlier) = complete_each(plan, ctx, &batch)?;
            let m = plan.mark();
            let jobs = match ops::lease(plan, ctx, &req) {
                Ok(leased) => {
                    plan.keep(m);
                    leased.jobs
                }
                Err(e) if e.is_batch_fatal() => return Err(e),
                // The completions stand; the claim is made again by the
                // caller's next lease, which then reports its error.
                Err(e) => {
                    plan.undo(m);
                    tracing::debug!(error = %e, "a claim beside completions failed alone");
                    Vec::new()
                }
            };
            Ok(Worked {
                completions,
                earlier,
                jobs,
            })
        })
    }

    /// Each completion with the error that refuses it before the batch (a
    /// result over the size limit), the error texts cut to size.
    fn checked_completions(&self, batch: Vec<Completion>) -> Vec<(Completion, Option<crate::Error>)> {
        batch
            .into_iter()
            .map(|mut c| {
                let refused = match &mut c.outcome {
                    CompletionOutcome::Ack { result: Some(r) } => check_body(&self.options.limits, "result", r)
                        .err()
                        .map(crate::Error::from),
                    CompletionOutcome::Nack { error, .. } => {
                        *error = error_text(error);
                        None
                    }
                    CompletionOutcome::Sleep { step, until } => check_sleep(step, *until, self.options.clock.now())
                        .err()
                        .map(crate::Error::from),
                    CompletionOutcome::Wait { step, key, until } => check_sleep(step, *until, self.options.clock.now())
                        .and_then(|()| relay_core::job::Waited::check_key(key))
                        .err()
                        .map(crate::Error::from),
                    CompletionOutcome::Join { step, .. } => {
                        relay_core::Step::check_name(step).err().map(crate::Error::from)
                    }
                    CompletionOutcome::Step { name, output } => relay_core::Step::check_name(name)
                        .and_then(|()| relay_core::Step::check_output(output))
                        .err()
                        .map(crate::Error::from),
                    _ => None,
                };
                (c, refused)
            })
            .collect()
    }

    /// Extends many leases in one operation, each to its own length from
    /// now; each succeeds or fails on its own.
    pub(crate) fn extend_batch_op(
        &self,
        leases: Vec<(JobId, LeaseToken, Duration)>,
    ) -> Pending<Vec<Result<Timestamp>>> {
        let limits = self.options.limits.clone();
        let ids: Vec<JobId> = leases.iter().map(|l| l.0).collect();
        Pending::new(Hint::Jobs(ids), move |plan, ctx| {
            let mut out = Vec::with_capacity(leases.len());
            for &(id, token, lease_for) in &leases {
                if let Err(e) = limits.lease_for(lease_for) {
                    out.push(Err(e.into()));
                    continue;
                }
                let m = plan.mark();
                let r = ops::act(plan, ctx, id, Action::Extend { token, lease_for }, None);
                out.push(settle(plan, m, r)?.map(|s| s.lease.map_or(ctx.now, |l| l.expires_at)));
            }
            Ok(out)
        })
    }

    pub(crate) fn prune_op(&self, after: JobId) -> Pending<crate::Pruned> {
        // The pass itself runs before the batch is planned (`Hint::Prune`);
        // the operation takes what it did.
        Pending::new(Hint::Prune(after), move |_, ctx| {
            // Always there: the writer runs one pass per such operation.
            ctx.asked_prunes.pop_front().unwrap_or(Ok(crate::Pruned {
                deleted: 0,
                next: Some(after),
            }))
        })
    }

    pub(crate) fn worker_beat_op(
        &self,
        beat: &relay_core::WorkerBeat,
        stopped: bool,
        claim: WorkerClaim,
    ) -> Result<Pending<()>> {
        beat.validate(&self.options.limits)?;
        let mut beat = beat.clone();
        if stopped {
            beat.running.clear();
        }
        let json = serde_json::to_string(&beat).map_err(|e| {
            crate::Error::InvalidInput(relay_core::InvalidInput::new(
                "beat",
                format!("does not serialize: {e}"),
            ))
        })?;
        Ok(Pending::new(Hint::None, move |plan, ctx| {
            let forget = relay_core::time::duration_millis(relay_core::presence::FORGET_AFTER);
            let (presented, keep) = match &claim {
                WorkerClaim::Local => (Some(LOCAL_WORKER), Some(LOCAL_WORKER)),
                WorkerClaim::Remote { presented, fresh } => {
                    (presented.as_deref(), Some(presented.as_deref().unwrap_or(fresh)))
                }
            };
            let owner = relay_store::WorkerOwner {
                presented,
                remote: matches!(claim, WorkerClaim::Remote { .. }),
                keep,
                forgotten_before: relay_core::Timestamp::from_millis(ctx.now.as_millis().saturating_sub(forget)),
            };
            if plan.store().worker_put(&beat.id, &json, ctx.now, stopped, &owner)? {
                Ok(())
            } else {
                Err(crate::Error::WorkerTaken {
                    worker: beat.id.clone(),
                })
            }
        }))
    }

    pub(crate) fn retention_op(&self, queue: &str, retention: relay_core::Retention) -> Result<Pending<()>> {
        self.options.limits.queue(queue)?;
        retention.validate()?;
        let queue = queue.to_owned();
        Ok(Pending::new(Hint::None, move |plan, _| {
            ops::set_retention(plan, &queue, retention)
        }))
    }

    pub(crate) fn reap_op(&self) -> Pending<usize> {
        Pending::new(Hint::None, ops::reap)
    }
}

/// What marks a worker record made in-process (never a SHA-256 in hex).
const LOCAL_WORKER: &str = "local";

/// Who sends a worker's heartbeat: a worker in this process, or a caller
/// over HTTP with the hash (SHA-256, hex) of the secret it presents, and
/// that of a fresh secret for a record it makes.
#[derive(Debug, Clone)]
pub enum WorkerClaim {
    /// A worker inside this Relay process.
    Local,
    /// A caller over HTTP.
    Remote {
        /// The hash of the secret it sent, if any.
        presented: Option<String>,
        /// The hash of the secret it is answered with if the record is new.
        fresh: String,
    },
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum SimpleAction {
    Release(LeaseToken),
    Cancel,
    Retry,
    Delete,
}

/// What a nack does with the job.
#[derive(Debug, Clone, Copy)]
pub(crate) enum AfterFailure {
    /// Retry after this long, or the back-off policy's delay (`None`),
    /// unless its attempts are spent.
    Retry(Option<Duration>),
    /// No retry: DEAD now.
    Dead,
}

/// Applies each completion on its own: one refused (its lease lost, its
/// result too large...) is undone and answered with its error, the others
/// stand. Only a batch-fatal error ends the operation. Beside each
/// result, the record that stood already for a step record not taken.
#[allow(clippy::type_complexity)]
fn complete_each(
    plan: &mut Plan<'_>,
    ctx: &mut BatchCtx<'_>,
    batch: &[(Completion, Option<crate::Error>)],
) -> Result<(Vec<Result<JobStatus>>, Vec<Option<relay_core::Step>>)> {
    let mut out = Vec::with_capacity(batch.len());
    let mut earlier = vec![None; batch.len()];
    for (i, (c, refused)) in batch.iter().enumerate() {
        if let Some(e) = refused {
            out.push(Err(e.clone()));
            continue;
        }
        let token = c.token;
        if let CompletionOutcome::Step { name, output } = &c.outcome {
            let m = plan.mark();
            let r = ops::record_step(plan, ctx, c.id, token, name, output).and_then(|stood| {
                earlier[i] = stood;
                // The job as it is now: still LEASED, its lease unchanged.
                plan.status(c.id)?.ok_or(crate::Error::NotFound { id: c.id })
            });
            out.push(settle(plan, m, r)?);
            continue;
        }
        if let CompletionOutcome::Sleep { step, until } = &c.outcome {
            let m = plan.mark();
            let r = ops::sleep(plan, ctx, c.id, token, step, *until);
            out.push(settle(plan, m, r)?);
            continue;
        }
        if let CompletionOutcome::Join { step, child } = &c.outcome {
            let m = plan.mark();
            let r = ops::join(plan, ctx, c.id, token, step, *child);
            out.push(settle(plan, m, r)?);
            continue;
        }
        if let CompletionOutcome::Wait { step, key, until } = &c.outcome {
            let m = plan.mark();
            let r = ops::wait(plan, ctx, c.id, token, step, key, *until);
            out.push(settle(plan, m, r)?);
            continue;
        }
        let (action, result) = match &c.outcome {
            CompletionOutcome::Ack { result } => (Action::Ack { token }, result.as_deref()),
            CompletionOutcome::Nack {
                error,
                retry_in,
                permanent,
            } => {
                let a = Action::Nack {
                    token,
                    error,
                    retry_in: *retry_in,
                    permanent: *permanent,
                };
                (a, None)
            }
            CompletionOutcome::Snooze { delay } => (Action::Snooze { token, delay: *delay }, None),
            CompletionOutcome::Release
            | CompletionOutcome::Sleep { .. }
            | CompletionOutcome::Wait { .. }
            | CompletionOutcome::Step { .. }
            | CompletionOutcome::Join { .. } => (Action::Release { token }, None),
        };
        let m = plan.mark();
        let r = ops::act(plan, ctx, c.id, action, result);
        out.push(settle(plan, m, r)?);
    }
    Ok((out, earlier))
}

/// The reason a sleep is refused before it is sent: a bad step name, or a
/// wake-up further off than [`relay_core::job::MAX_SLEEP`].
fn check_sleep(step: &str, until: Timestamp, now: Timestamp) -> Result<(), relay_core::InvalidInput> {
    relay_core::Step::check_name(step)?;
    if until > now.plus(relay_core::job::MAX_SLEEP) {
        return Err(relay_core::InvalidInput::new(
            "until",
            format!(
                "a sleep ends within {} days, got {}",
                relay_core::job::MAX_SLEEP.as_secs() / 86_400,
                until.to_rfc3339()
            ),
        ));
    }
    Ok(())
}

/// Keeps what an item planned since `m` if it succeeded, undoes it if it
/// failed alone; a batch-fatal error is returned as the outer error.
fn settle<T>(plan: &mut Plan<'_>, m: crate::engine::plan::Mark, r: Result<T>) -> Result<Result<T>> {
    match r {
        Err(e) if e.is_batch_fatal() => Err(e),
        Err(e) => {
            plan.undo(m);
            Ok(Err(e))
        }
        Ok(v) => {
            plan.keep(m);
            Ok(Ok(v))
        }
    }
}
