//! The one function that moves a job between states.
//!
//! Stores never decide anything: they load a job's [`JobStatus`], call
//! [`transition()`] with what happened, and persist the [`Next`] it returns
//! (with a write guarded on the state and token they loaded).

use crate::job::{JobId, JobState, JobStatus, Lease, LeaseToken};
use crate::retry::RetryPolicy;
use crate::time::Timestamp;
use serde_json::{json, Value};
use std::time::Duration;

/// What happened to a job.
#[derive(Debug, Clone, Copy)]
pub enum Action<'a> {
    /// A worker takes the job (READY and due -> LEASED, one attempt starts).
    Lease { worker: &'a str, lease_for: Duration },
    /// The lease holder reports success (LEASED -> SUCCEEDED).
    Ack { token: LeaseToken },
    /// The lease holder reports failure: READY again after `retry_in` (or
    /// the policy's back-off), DEAD when attempts are spent or `permanent`.
    Nack {
        token: LeaseToken,
        error: &'a str,
        retry_in: Option<Duration>,
        permanent: bool,
    },
    /// The lease holder asks for more time (LEASED -> LEASED).
    Extend { token: LeaseToken, lease_for: Duration },
    /// The lease holder gives the job back untried (LEASED -> READY, the
    /// attempt is not counted).
    Release { token: LeaseToken },
    /// The lease holder puts the job back for later (LEASED -> READY after
    /// `delay`): the attempt is not counted, and the event log says
    /// "snoozed". For a job whose time has not come yet (a rate limit
    /// upstream, a resource still being prepared), not for a failure.
    Snooze { token: LeaseToken, delay: Duration },
    /// The lease ran out (LEASED -> READY at once, or DEAD when attempts are
    /// spent). Only valid once `now` has reached the lease's expiry.
    Expire,
    /// A user cancels the job (READY or LEASED -> CANCELLED).
    Cancel,
    /// A user runs a DEAD or CANCELLED job again with a fresh attempt budget.
    Retry,
    /// A user removes the job (any state but LEASED).
    Delete,
    /// A job this WAITING one depends on has finished, and the dependent
    /// goes on: one fewer to wait for; READY (at its own `ready_at`, or
    /// now if that has passed) once none is left.
    Unblock { parent: JobId },
    /// A job this WAITING one depends on ended `state` (DEAD, CANCELLED,
    /// or deleted unfinished) and the dependent does not run without it:
    /// WAITING -> CANCELLED, the reason in the event log.
    Abandon { parent: JobId, state: Option<JobState> },
}

impl Action<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Lease { .. } => "lease",
            Self::Ack { .. } => "ack",
            Self::Nack { .. } => "nack",
            Self::Extend { .. } => "extend",
            Self::Release { .. } => "release",
            Self::Snooze { .. } => "snooze",
            Self::Expire => "expire",
            Self::Cancel => "cancel",
            Self::Retry => "retry",
            Self::Delete => "delete",
            Self::Unblock { .. } => "unblock",
            Self::Abandon { .. } => "abandon",
        }
    }
}

/// What a transition needs besides the job.
#[derive(Debug, Clone, Copy)]
pub struct TransitionCtx<'a> {
    pub now: Timestamp,
    pub retry: &'a RetryPolicy,
    /// A uniform sample from `[0, 1)` for back-off jitter.
    pub jitter: f64,
}

/// One row for the job's event log.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub kind: &'static str,
    /// A JSON object, as text (what the store writes).
    pub data: String,
}

/// The data of a "leased" event (fields in the order a JSON map sorts them,
/// as every other event's). A struct rather than `json!`: a claim's event is
/// on the writer's hottest path, and building a map cost ~5% of its time.
#[derive(serde::Serialize)]
struct LeasedData<'a> {
    attempt: u32,
    expires_at: String,
    token: i64,
    worker: &'a str,
}

/// The data of a "succeeded" event.
#[derive(serde::Serialize)]
struct AckedData {
    attempt: u32,
    token: i64,
}

/// What the store must persist.
#[derive(Debug, Clone, PartialEq)]
pub struct Next {
    pub status: JobStatus,
    /// The event-log row to append, if the action is worth one.
    pub event: Option<EventRecord>,
    /// The job is to be removed (with its events).
    pub delete: bool,
    /// Nothing to write: the action had already been applied (an ack
    /// repeated with the token it succeeded with).
    pub unchanged: bool,
}

/// Why a transition was refused. Nothing changes when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The token is not the job's current, unexpired lease token: a later
    /// lease has taken the job from this worker, or this lease expired (or
    /// was given back). A job that has finished says its state instead
    /// (`InvalidState`).
    #[error("job {id}: lease lost (the token is not the job's current valid lease; another worker may hold it)")]
    LeaseLost { id: JobId },
    /// The action does not apply to a job in this state.
    #[error("job {id}: cannot {action} a job that is {state}")]
    InvalidState {
        id: JobId,
        state: JobState,
        action: &'static str,
    },
}

/// Decides the job's next status for `action`, or refuses.
pub fn transition(
    id: JobId,
    cur: &JobStatus,
    action: Action<'_>,
    ctx: &TransitionCtx<'_>,
) -> Result<Next, TransitionError> {
    let now = ctx.now;
    let invalid = || TransitionError::InvalidState {
        id,
        state: cur.state,
        action: action.name(),
    };
    match action {
        Action::Lease { worker, lease_for } => {
            if cur.state != JobState::Ready || cur.ready_at > now {
                return Err(invalid());
            }
            let token = LeaseToken(cur.last_token.0 + 1);
            let expires_at = now.plus(lease_for);
            let mut s = cur.clone();
            s.state = JobState::Leased;
            s.attempts = cur.attempts.saturating_add(1);
            s.last_token = token;
            s.lease = Some(Lease {
                token,
                expires_at,
                worker: worker.to_owned(),
            });
            let data = LeasedData {
                attempt: s.attempts,
                expires_at: expires_at.to_rfc3339(),
                token: token.0,
                worker,
            };
            Ok(update(s, "leased", data))
        }
        Action::Ack { token } => {
            if cur.state == JobState::Succeeded && cur.last_token == token {
                // This very lease's ack, repeated (a client that timed out
                // and tried again): it succeeded; nothing more to do. Only
                // the lease that acked holds its token, and a later lease
                // would have raised it.
                return Ok(Next {
                    status: cur.clone(),
                    event: None,
                    delete: false,
                    unchanged: true,
                });
            }
            holder(id, cur, token, now, action.name())?;
            let mut s = finish(cur, JobState::Succeeded, now);
            s.last_error = cur.last_error.clone();
            let data = AckedData {
                attempt: cur.attempts,
                token: token.0,
            };
            Ok(update(s, "succeeded", data))
        }
        Action::Nack {
            token,
            error,
            retry_in,
            permanent,
        } => {
            holder(id, cur, token, now, action.name())?;
            Ok(fail(
                cur,
                "failed",
                error,
                retry_in,
                permanent,
                ctx,
                json!({"token": token.0}),
            ))
        }
        Action::Extend { token, lease_for } => {
            let lease = holder(id, cur, token, now, action.name())?;
            let mut s = cur.clone();
            s.lease = Some(Lease {
                token,
                expires_at: now.plus(lease_for),
                worker: lease.worker.clone(),
            });
            Ok(Next {
                status: s,
                event: None,
                delete: false,
                unchanged: false,
            })
        }
        Action::Release { token } => {
            holder(id, cur, token, now, action.name())?;
            let mut s = cur.clone();
            s.state = JobState::Ready;
            s.attempts = cur.attempts.saturating_sub(1);
            s.ready_at = now;
            s.lease = None;
            Ok(update(s, "released", json!({"token": token.0})))
        }
        Action::Snooze { token, delay } => {
            holder(id, cur, token, now, action.name())?;
            let mut s = cur.clone();
            s.state = JobState::Ready;
            s.attempts = cur.attempts.saturating_sub(1);
            s.ready_at = now.plus(delay);
            s.lease = None;
            let data = json!({"token": token.0, "ready_at": s.ready_at.to_rfc3339()});
            Ok(update(s, "snoozed", data))
        }
        Action::Expire => match &cur.lease {
            Some(l) if cur.state == JobState::Leased && now >= l.expires_at => {
                let data = json!({"token": l.token.0, "worker": l.worker});
                Ok(fail(
                    cur,
                    "expired",
                    "lease expired",
                    Some(Duration::ZERO),
                    false,
                    ctx,
                    data,
                ))
            }
            _ => Err(invalid()),
        },
        Action::Cancel => {
            if !matches!(cur.state, JobState::Ready | JobState::Leased | JobState::Waiting) {
                return Err(invalid());
            }
            let mut s = finish(cur, JobState::Cancelled, now);
            s.waiting_on = 0;
            Ok(update(s, "cancelled", json!({"from": cur.state.as_str()})))
        }
        Action::Retry => {
            if !matches!(cur.state, JobState::Dead | JobState::Cancelled) {
                return Err(invalid());
            }
            let mut s = cur.clone();
            s.state = JobState::Ready;
            s.attempts = 0;
            s.ready_at = now;
            s.finished_at = None;
            Ok(update(s, "retried", json!({"from": cur.state.as_str()})))
        }
        Action::Unblock { parent } => {
            if cur.state != JobState::Waiting {
                return Err(invalid());
            }
            let mut s = cur.clone();
            s.waiting_on = cur.waiting_on.saturating_sub(1);
            if s.waiting_on > 0 {
                return Ok(Next {
                    status: s,
                    event: None,
                    delete: false,
                    unchanged: false,
                });
            }
            s.state = JobState::Ready;
            s.ready_at = cur.ready_at.max(now);
            let data = json!({"last": parent.0, "ready_at": s.ready_at.to_rfc3339()});
            Ok(update(s, "unblocked", data))
        }
        Action::Abandon { parent, state } => {
            if cur.state != JobState::Waiting {
                return Err(invalid());
            }
            let mut s = finish(cur, JobState::Cancelled, now);
            s.waiting_on = 0;
            let ended = state.map_or("DELETED", JobState::as_str);
            let data = json!({
                "from": cur.state.as_str(),
                "dependency": parent.0,
                "reason": format!("job {parent} it depends on ended {ended}"),
            });
            Ok(update(s, "cancelled", data))
        }
        Action::Delete => {
            if cur.state == JobState::Leased {
                return Err(invalid());
            }
            Ok(Next {
                status: cur.clone(),
                event: None,
                delete: true,
                unchanged: false,
            })
        }
    }
}

fn update(status: JobStatus, kind: &'static str, data: impl serde::Serialize) -> Next {
    // Serializing these maps and structs (string keys, numbers, strings)
    // cannot fail; an empty object would still be valid event data.
    let data = serde_json::to_string(&data).unwrap_or_else(|_| "{}".to_owned());
    Next {
        status,
        event: Some(EventRecord { kind, data }),
        delete: false,
        unchanged: false,
    }
}

/// The lease, if `token` is the job's current valid one. A job that has
/// finished (SUCCEEDED, DEAD, CANCELLED) says so: whatever lease the
/// caller held, the job is over and the state is what it needs to know
/// ("job 7 is CANCELLED"), as does a job still waiting for its
/// dependencies (never leased). Otherwise the lease is lost: another lease
/// holds the job, or this one expired (or was given back).
fn holder<'s>(
    id: JobId,
    cur: &'s JobStatus,
    token: LeaseToken,
    now: Timestamp,
    action: &'static str,
) -> Result<&'s Lease, TransitionError> {
    match &cur.lease {
        Some(l) if cur.valid_token(now) == Some(token) => Ok(l),
        _ if cur.state.is_finished() || cur.state == JobState::Waiting => Err(TransitionError::InvalidState {
            id,
            state: cur.state,
            action,
        }),
        _ => Err(TransitionError::LeaseLost { id }),
    }
}

fn finish(cur: &JobStatus, state: JobState, now: Timestamp) -> JobStatus {
    let mut s = cur.clone();
    s.state = state;
    s.finished_at = Some(now);
    s.lease = None;
    s
}

/// A failed attempt: back to READY after a delay, or DEAD.
fn fail(
    cur: &JobStatus,
    kind: &'static str,
    error: &str,
    retry_in: Option<Duration>,
    permanent: bool,
    ctx: &TransitionCtx<'_>,
    mut data: Value,
) -> Next {
    let attempt = cur.attempts;
    data["attempt"] = json!(attempt);
    data["error"] = json!(error);
    if permanent || attempt >= cur.max_attempts {
        let mut s = finish(cur, JobState::Dead, ctx.now);
        s.last_error = Some(error.to_owned());
        data["dead"] = json!(true);
        data["reason"] = json!(if permanent {
            "permanent failure"
        } else {
            "attempts exhausted"
        });
        return update(s, kind, data);
    }
    let delay = retry_in.unwrap_or_else(|| ctx.retry.backoff(attempt, ctx.jitter));
    let mut s = cur.clone();
    s.state = JobState::Ready;
    s.ready_at = ctx.now.plus(delay);
    s.lease = None;
    s.last_error = Some(error.to_owned());
    data["retry_at"] = json!(s.ready_at.to_rfc3339());
    update(s, kind, data)
}

#[cfg(test)]
mod tests;
