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
    /// A worker takes the job (READY, or SCHEDULED or RETRYING and due ->
    /// LEASED, one attempt starts)
    /// under a token one larger than the job's last.
    Lease {
        /// The worker's id, kept on the lease and in the event.
        worker: &'a str,
        /// How long the lease lasts, from `now` (the expiry saturates).
        lease_for: Duration,
    },
    /// The lease holder reports success (LEASED -> SUCCEEDED). Repeated
    /// with the token that succeeded, it changes nothing and succeeds again.
    Ack {
        /// The token of the lease being acknowledged.
        token: LeaseToken,
    },
    /// The lease holder reports failure: RETRYING until `retry_in` (or the
    /// policy's back-off) has passed (READY at once when that is zero),
    /// DEAD when attempts are spent or `permanent`.
    Nack {
        /// The token of the lease that failed.
        token: LeaseToken,
        /// The failure, kept as the job's `last_error` and in the event
        /// (stored as given: shortening it is the caller's part).
        error: &'a str,
        /// The wait before the next attempt, from `now`; `None` for the
        /// retry policy's back-off.
        retry_in: Option<Duration>,
        /// DEAD now, whatever attempts are left.
        permanent: bool,
    },
    /// The lease holder asks for more time (LEASED -> LEASED, same token).
    Extend {
        /// The token of the lease to extend.
        token: LeaseToken,
        /// The lease's new length, counted from `now` (not added to the
        /// current expiry).
        lease_for: Duration,
    },
    /// The lease holder gives the job back untried (LEASED -> READY at
    /// once, the attempt is not counted).
    Release {
        /// The token of the lease given back.
        token: LeaseToken,
    },
    /// The lease holder puts the job back for later (LEASED -> SCHEDULED
    /// until `delay` has passed; READY when it is zero): the attempt is
    /// not counted, and the event log says "snoozed". For a job whose time
    /// has not come yet (a rate limit upstream, a resource still being prepared), not for a failure.
    Snooze {
        /// The token of the lease given back.
        token: LeaseToken,
        /// How long from `now` until the job may be leased again.
        delay: Duration,
    },
    /// The lease ran out (LEASED -> READY at once, or DEAD when attempts are
    /// spent). Only valid once `now` has reached the lease's expiry. A job
    /// whose lease has now expired `poison_after` times since it was last
    /// retried is DEAD whatever attempts are left: a poison pill, whose
    /// handler crashes or hangs its worker rather than failing.
    Expire {
        /// How many times this job's lease expired before, since it was
        /// submitted or last retried.
        earlier: u32,
        /// The expiries that make it DEAD (0: none do).
        poison_after: u32,
    },
    /// A user cancels the job (WAITING, READY, SCHEDULED, RETRYING or
    /// LEASED -> CANCELLED). A
    /// cancelled LEASED job's lease ends: its holder's later calls fail.
    Cancel,
    /// A user runs a DEAD or CANCELLED job again with a fresh attempt
    /// budget (-> READY at once, `attempts` back to 0).
    Retry,
    /// A user removes the job (any state but LEASED).
    Delete,
    /// The lease holder reports how far along the job is (LEASED ->
    /// LEASED, nothing else changes; a "progress" event; the engine keeps
    /// the latest on the job).
    Progress {
        /// The token of the lease reporting.
        token: LeaseToken,
        /// From 0 to 1.
        fraction: f64,
        /// What the handler is doing.
        message: Option<&'a str>,
    },
    /// The lease holder records a step's output (LEASED -> LEASED,
    /// nothing else changes; a "step" event; the engine keeps the output
    /// on the job).
    Step {
        /// The token of the lease recording.
        token: LeaseToken,
        /// The step's name.
        name: &'a str,
        /// Bytes of its output.
        bytes: usize,
    },
    /// The lease holder puts the job to sleep until `until` (LEASED ->
    /// WAITING, holding no lease and no attempt; READY at once when
    /// `until` has come): the writers make it READY at `until`
    /// ([`Action::Promote`]), aging counted from then. A "sleeping" event.
    Sleep {
        /// The token of the lease sleeping.
        token: LeaseToken,
        /// When the job wakes.
        until: Timestamp,
    },
    /// The lease holder waits for event `key` until `until` (LEASED ->
    /// WAITING, holding no lease and no attempt, as a sleep; READY at once
    /// when `until` has come: the wait is over, its step recorded). A
    /// "waiting" event.
    Wait {
        /// The token of the lease waiting.
        token: LeaseToken,
        /// The event waited for.
        key: &'a str,
        /// When the wait gives up (or ends, recorded).
        until: Timestamp,
    },
    /// The lease holder waits for job `child` to end (LEASED -> WAITING on
    /// that one job, holding no lease and no attempt; READY at once when
    /// `ended`: the child has ended, its outcome recorded as the join's
    /// step). The child's end unblocks it as a dependency that runs anyway
    /// ([`Action::Unblock`]). A "joining" event.
    Join {
        /// The token of the lease joining.
        token: LeaseToken,
        /// The job awaited.
        child: JobId,
        /// The child has ended already.
        ended: bool,
    },
    /// Event `key` was emitted: a job waiting for it (WAITING on no other
    /// job) is READY now. A "woken" event.
    Wake {
        /// The event.
        key: &'a str,
    },
    /// A debounced submit of the job's unique key found it not started
    /// yet (WAITING, or READY or SCHEDULED and never leased): it runs at
    /// `ready_at` instead, pushed back by the debounce window (SCHEDULED
    /// unless WAITING; the engine replaces its payload with the submit's).
    Debounce {
        /// The job's new run time.
        ready_at: Timestamp,
    },
    /// A job this WAITING one depends on has finished, and the dependent
    /// goes on: one fewer to wait for; READY (at its own `ready_at`, or
    /// now if that has passed; SCHEDULED until a later `ready_at`) once
    /// none is left.
    Unblock {
        /// The dependency that finished.
        parent: JobId,
    },
    /// A job this WAITING one depends on ended `state` (DEAD, CANCELLED,
    /// or deleted unfinished) and the dependent does not run without it:
    /// WAITING -> CANCELLED, the reason in the event log.
    Abandon {
        /// The dependency that failed.
        parent: JobId,
        /// The state it ended in; `None` when it was deleted unfinished.
        state: Option<JobState>,
    },
    /// A SCHEDULED or RETRYING job's time has come, or a sleeping one's
    /// (WAITING on no other job): READY (no event; the writers promote due
    /// jobs so that counts show them ready).
    Promote,
}

impl Action<'_> {
    /// The action's name in lowercase (`lease`, `ack`, ...), as
    /// [`TransitionError::InvalidState`] reports it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Lease { .. } => "lease",
            Self::Ack { .. } => "ack",
            Self::Nack { .. } => "nack",
            Self::Extend { .. } => "extend",
            Self::Release { .. } => "release",
            Self::Snooze { .. } => "snooze",
            Self::Expire { .. } => "expire",
            Self::Cancel => "cancel",
            Self::Retry => "retry",
            Self::Delete => "delete",
            Self::Debounce { .. } => "debounce",
            Self::Progress { .. } => "progress",
            Self::Step { .. } => "step",
            Self::Sleep { .. } => "sleep",
            Self::Wait { .. } => "wait",
            Self::Wake { .. } => "wake",
            Self::Join { .. } => "join",
            Self::Unblock { .. } => "unblock",
            Self::Abandon { .. } => "abandon",
            Self::Promote => "promote",
        }
    }
}

/// What a transition needs besides the job.
#[derive(Debug, Clone, Copy)]
pub struct TransitionCtx<'a> {
    /// The instant the action happens: lease expiries, `ready_at` and
    /// `finished_at` are set and checked against it.
    pub now: Timestamp,
    /// The back-off for a nack that names no `retry_in`.
    pub retry: &'a RetryPolicy,
    /// A uniform sample from `[0, 1)` for back-off jitter.
    pub jitter: f64,
}

/// What happened to a job, as the engine writes it in the job's event
/// log. (A user's own events, `Relay::append_event`, may be called
/// anything else.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// The job was created.
    Submitted,
    /// A worker took it: an attempt began.
    Leased,
    /// Its holder acknowledged it.
    Succeeded,
    /// An attempt failed (a nack); the job is READY or RETRYING again, or DEAD.
    Failed,
    /// Its holder gave it back without an attempt counted.
    Released,
    /// Its holder put it off until later.
    Snoozed,
    /// A lease expired: a failed attempt, as `Failed`.
    Expired,
    /// It was cancelled, or it will never run (a job it depends on ended).
    Cancelled,
    /// A DEAD or CANCELLED job was made READY again.
    Retried,
    /// The last job it waited for ended: it is READY.
    Unblocked,
    /// A debounced submit of its unique key replaced its payload and
    /// moved its run time.
    Debounced,
    /// Its lease holder reported how far along it is.
    Progress,
    /// Its lease holder recorded a step's output.
    Step,
    /// Its lease holder put it to sleep: WAITING until a time, holding no
    /// lease.
    Sleeping,
    /// Its lease holder waits for an event: WAITING until it is emitted or
    /// the wait's time runs out, holding no lease.
    Waiting,
    /// The event it waited for was emitted: READY.
    Woken,
    /// Its lease holder awaits another job's end: WAITING on it, holding
    /// no lease.
    Joining,
}

impl EventKind {
    /// The kind as the event log spells it, in lowercase.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Submitted => "submitted",
            Self::Leased => "leased",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Released => "released",
            Self::Snoozed => "snoozed",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
            Self::Retried => "retried",
            Self::Unblocked => "unblocked",
            Self::Debounced => "debounced",
            Self::Progress => "progress",
            Self::Step => "step",
            Self::Sleeping => "sleeping",
            Self::Waiting => "waiting",
            Self::Woken => "woken",
            Self::Joining => "joining",
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row for the job's event log.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    /// What happened.
    pub kind: EventKind,
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
pub enum Next {
    /// The job's new status, and the event-log row to append if the action
    /// is worth one.
    Update {
        /// The job's status after the action.
        status: JobStatus,
        /// The event-log row to append, if any.
        event: Option<EventRecord>,
    },
    /// The job is to be removed (with its events).
    Delete,
    /// Nothing to write: the action had already been applied (an ack
    /// repeated with the token it succeeded with).
    Unchanged,
}

impl Next {
    /// The job's status after the action: `cur`, the status it was decided
    /// from, when the job is deleted or unchanged.
    pub fn status_after<'a>(&'a self, cur: &'a JobStatus) -> &'a JobStatus {
        match self {
            Self::Update { status, .. } => status,
            Self::Delete | Self::Unchanged => cur,
        }
    }
}

/// Why a transition was refused. Nothing changes when one is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The token is not the job's current, unexpired lease token: a later
    /// lease has taken the job from this worker, or this lease expired (or
    /// was given back). A job that has finished, is WAITING, or was never
    /// leased says its state instead (`InvalidState`).
    #[error("job {id}: lease lost (the token is not the job's current valid lease; another worker may hold it)")]
    LeaseLost {
        /// The job the action was refused for.
        id: JobId,
    },
    /// The action does not apply to a job in this state.
    #[error("job {id}: cannot {action} a job that is {state}")]
    InvalidState {
        /// The job the action was refused for.
        id: JobId,
        /// The job's state when the action was refused.
        state: JobState,
        /// The refused action's name, from [`Action::name`].
        action: &'static str,
    },
}

/// Decides the job's next status for `action`, or refuses.
///
/// Pure: the same inputs give the same answer, and `cur` is not changed;
/// the caller persists the returned [`Next`].
///
/// # Errors
///
/// [`TransitionError::LeaseLost`] when an ack, nack, extend, release or
/// snooze of a READY, SCHEDULED, RETRYING or LEASED job carries a token that is not its valid
/// lease's (a later lease holds the job, or this one expired or was given
/// back).
///
/// [`TransitionError::InvalidState`] when the action does not apply to the
/// job's state: a lease of a job not READY, SCHEDULED or RETRYING, or not yet due; an ack, nack,
/// extend, release or snooze of a WAITING or finished job (but a repeated
/// ack with the token that succeeded is `Ok`); an expire of a job not
/// LEASED or whose lease has not expired; a cancel of a finished job; a
/// retry of a job neither DEAD nor CANCELLED; an unblock or abandon of a
/// job not WAITING; a delete of a LEASED job.
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
            if !cur.state.is_pending() || cur.ready_at > now {
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
            Ok(update(s, EventKind::Leased, data))
        }
        Action::Ack { token } => {
            if cur.state == JobState::Succeeded && cur.last_token == token {
                // This very lease's ack, repeated (a client that timed out
                // and tried again): it succeeded; nothing more to do. Only
                // the lease that acked holds its token, and a later lease
                // would have raised it.
                return Ok(Next::Unchanged);
            }
            holder(id, cur, token, now, action.name())?;
            let mut s = finish(cur, JobState::Succeeded, now);
            s.last_error = cur.last_error.clone();
            let data = AckedData {
                attempt: cur.attempts,
                token: token.0,
            };
            Ok(update(s, EventKind::Succeeded, data))
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
                EventKind::Failed,
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
            Ok(Next::Update { status: s, event: None })
        }
        Action::Release { token } => {
            holder(id, cur, token, now, action.name())?;
            let mut s = cur.clone();
            s.state = JobState::Ready;
            s.attempts = cur.attempts.saturating_sub(1);
            s.ready_at = now;
            s.lease = None;
            Ok(update(s, EventKind::Released, json!({"token": token.0})))
        }
        Action::Snooze { token, delay } => {
            holder(id, cur, token, now, action.name())?;
            let mut s = cur.clone();
            s.attempts = cur.attempts.saturating_sub(1);
            s.ready_at = now.plus(delay);
            s.state = JobState::pending(s.ready_at, now, false);
            s.lease = None;
            let data = json!({"token": token.0, "ready_at": s.ready_at.to_rfc3339()});
            Ok(update(s, EventKind::Snoozed, data))
        }
        Action::Expire { earlier, poison_after } => match &cur.lease {
            Some(l) if cur.state == JobState::Leased && now >= l.expires_at => {
                let expiries = earlier.saturating_add(1);
                let data = json!({"token": l.token.0, "worker": l.worker, "expiries": expiries});
                if poison_after > 0 && expiries >= poison_after {
                    let mut s = finish(cur, JobState::Dead, now);
                    let why = poisoned(expiries);
                    s.last_error = Some(why.clone());
                    let mut data = data;
                    data["attempt"] = json!(cur.attempts);
                    data["error"] = json!("lease expired");
                    data["dead"] = json!(true);
                    data["reason"] = json!(why);
                    return Ok(update(s, EventKind::Expired, data));
                }
                Ok(fail(
                    cur,
                    EventKind::Expired,
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
            if !(cur.state.is_pending() || matches!(cur.state, JobState::Leased | JobState::Waiting)) {
                return Err(invalid());
            }
            let mut s = finish(cur, JobState::Cancelled, now);
            s.waiting_on = 0;
            Ok(update(s, EventKind::Cancelled, json!({"from": cur.state.as_str()})))
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
            Ok(update(s, EventKind::Retried, json!({"from": cur.state.as_str()})))
        }
        Action::Unblock { parent } => {
            // A job WAITING on no job (asleep, waiting for an event) waits
            // on no parent, whatever edges are left from before.
            if cur.state != JobState::Waiting || cur.waiting_on == 0 {
                return Err(invalid());
            }
            let mut s = cur.clone();
            s.waiting_on = cur.waiting_on.saturating_sub(1);
            if s.waiting_on > 0 {
                return Ok(Next::Update { status: s, event: None });
            }
            s.ready_at = cur.ready_at.max(now);
            s.state = JobState::pending(s.ready_at, now, false);
            let data = json!({"last": parent.0, "ready_at": s.ready_at.to_rfc3339()});
            Ok(update(s, EventKind::Unblocked, data))
        }
        Action::Abandon { parent, state } => {
            if cur.state != JobState::Waiting || cur.waiting_on == 0 {
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
            Ok(update(s, EventKind::Cancelled, data))
        }
        Action::Delete => {
            if cur.state == JobState::Leased {
                return Err(invalid());
            }
            Ok(Next::Delete)
        }
        Action::Progress {
            token,
            fraction,
            message,
        } => {
            holder(id, cur, token, now, "progress")?;
            let mut data = json!({ "fraction": fraction });
            if let Some(m) = message {
                data["message"] = json!(m);
            }
            Ok(update(cur.clone(), EventKind::Progress, data))
        }
        Action::Sleep { token, until } => {
            holder(id, cur, token, now, action.name())?;
            let data = json!({"token": token.0, "until": until.to_rfc3339()});
            Ok(update(parked(cur, until, now), EventKind::Sleeping, data))
        }
        Action::Wait { token, key, until } => {
            holder(id, cur, token, now, action.name())?;
            let data = json!({"token": token.0, "key": key, "until": until.to_rfc3339()});
            Ok(update(parked(cur, until, now), EventKind::Waiting, data))
        }
        Action::Join { token, child, ended } => {
            holder(id, cur, token, now, action.name())?;
            let data = json!({"token": token.0, "job": child.0});
            let mut s = parked(cur, now, now);
            if !ended {
                s.state = JobState::Waiting;
                s.waiting_on = 1;
            }
            Ok(update(s, EventKind::Joining, data))
        }
        Action::Wake { key } => {
            if cur.state != JobState::Waiting || cur.waiting_on != 0 {
                return Err(invalid());
            }
            let mut s = cur.clone();
            s.state = JobState::Ready;
            s.ready_at = now;
            Ok(update(s, EventKind::Woken, json!({"key": key})))
        }
        Action::Step { token, name, bytes } => {
            holder(id, cur, token, now, "record a step of")?;
            Ok(update(
                cur.clone(),
                EventKind::Step,
                json!({ "name": name, "bytes": bytes }),
            ))
        }
        Action::Debounce { ready_at } => {
            if !cur.not_started() {
                return Err(invalid());
            }
            let mut s = cur.clone();
            s.ready_at = ready_at;
            if cur.state != JobState::Waiting {
                s.state = JobState::pending(ready_at, now, false);
            }
            let data = json!({"from": cur.ready_at.to_rfc3339(), "ready_at": ready_at.to_rfc3339()});
            Ok(update(s, EventKind::Debounced, data))
        }
        Action::Promote => {
            // A sleeping job (WAITING on no other job) wakes as a
            // SCHEDULED one comes due.
            let sleeping = cur.state == JobState::Waiting && cur.waiting_on == 0;
            if !(matches!(cur.state, JobState::Scheduled | JobState::Retrying) || sleeping) || cur.ready_at > now {
                return Err(invalid());
            }
            let mut s = cur.clone();
            s.state = JobState::Ready;
            Ok(Next::Update { status: s, event: None })
        }
    }
}

/// A poison pill's error and reason: why it is DEAD.
pub fn poisoned(expiries: u32) -> String {
    let times = if expiries == 1 { "time" } else { "times" };
    format!("its lease expired {expiries} {times}: it may be crashing its worker")
}

fn update(status: JobStatus, kind: EventKind, data: impl serde::Serialize) -> Next {
    // Serializing these maps and structs (string keys, numbers, strings)
    // cannot fail; an empty object would still be valid event data.
    let data = serde_json::to_string(&data).unwrap_or_else(|_| "{}".to_owned());
    Next::Update {
        status,
        event: Some(EventRecord { kind, data }),
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
        // A finished or WAITING job says its state, and so does one never
        // leased: no lease of it was ever there to lose.
        _ if cur.state.is_finished() || cur.state == JobState::Waiting || cur.last_token == LeaseToken(0) => {
            Err(TransitionError::InvalidState {
                id,
                state: cur.state,
                action,
            })
        }
        _ => Err(TransitionError::LeaseLost { id }),
    }
}

/// A lease holder's job parked until `until` (a sleep, a wait): the lease
/// and the attempt given back, WAITING on no other job until then, or
/// READY now when it has come.
fn parked(cur: &JobStatus, until: Timestamp, now: Timestamp) -> JobStatus {
    let mut s = cur.clone();
    s.attempts = cur.attempts.saturating_sub(1);
    s.lease = None;
    s.waiting_on = 0;
    if until <= now {
        s.state = JobState::Ready;
        s.ready_at = now;
    } else {
        s.state = JobState::Waiting;
        s.ready_at = until;
    }
    s
}

fn finish(cur: &JobStatus, state: JobState, now: Timestamp) -> JobStatus {
    let mut s = cur.clone();
    s.state = state;
    s.finished_at = Some(now);
    s.lease = None;
    s
}

/// A failed attempt: RETRYING until a delay has passed (READY at once
/// without one), or DEAD.
fn fail(
    cur: &JobStatus,
    kind: EventKind,
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
    s.ready_at = ctx.now.plus(delay);
    s.state = JobState::pending(s.ready_at, ctx.now, true);
    s.lease = None;
    s.last_error = Some(error.to_owned());
    data["retry_at"] = json!(s.ready_at.to_rfc3339());
    update(s, kind, data)
}

#[cfg(test)]
mod tests;
