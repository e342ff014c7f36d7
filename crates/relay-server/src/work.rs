//! The worker protocol's routes: `POST /v1/work` (a worker's outcomes and
//! its next lease in one call and one commit, each outcome answered on its
//! own) and `POST /v1/heartbeat` (many leases extended at once).

// `Handle` is sealed (see `calls`).
#![allow(private_interfaces)]

use crate::api::{lease_request, leased, wait_permit};
use crate::calls::{Handle, Req};
use crate::error::ApiError;
use crate::parse::ms;
use crate::AppState;
use relay::{wire as conv, Completion, JobId, LeaseToken};
use relay_client::wire;
use relay_client::wire::calls;
use std::sync::Arc;
use std::time::Duration;

/// A worker's outcomes, then its next lease, in one commit; each outcome
/// answered on its own. Long-polls only when there is nothing to report.
impl Handle for calls::Work {
    /// A turn without outcomes whose lease asks to wait.
    fn long_poll(r: &Req<Self>) -> bool {
        r.body.outcomes.is_empty() && r.body.lease.as_ref().and_then(|l| l.wait_ms).is_some_and(|w| w > 0)
    }

    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Worked, ApiError> {
        let b = r.body;
        if b.outcomes.len() > wire::MAX_ITEMS {
            return Err(ApiError::bad_request(format!(
                "outcomes must hold at most {} items",
                wire::MAX_ITEMS
            )));
        }
        let ids: Vec<i64> = b.outcomes.iter().map(|o| o.id).collect();
        let batch = b.outcomes.into_iter().map(completion).collect::<Result<Vec<_>, _>>()?;
        let (completions, earlier, jobs) = match b.lease {
            None if batch.is_empty() => (Vec::new(), Vec::new(), Vec::new()),
            None => {
                let done = s.relay.report(batch).await?;
                (done.completions, done.earlier, Vec::new())
            }
            Some(lease) => {
                let (req, wait) = lease_request(&s, lease)?;
                let _permit = wait_permit(&s, if batch.is_empty() { wait } else { Duration::ZERO })?;
                let mut stopping = s.stopping.clone();
                if *stopping.borrow() {
                    // Shutting down: the outcomes are recorded, nothing leased
                    // to a worker whose server is going away.
                    if batch.is_empty() {
                        (Vec::new(), Vec::new(), Vec::new())
                    } else {
                        let done = s.relay.report(batch).await?;
                        (done.completions, done.earlier, Vec::new())
                    }
                } else {
                    let done = s.relay.complete_and_lease_until(batch, req, stopping.changed()).await?;
                    (done.completions, done.earlier, done.jobs)
                }
            }
        };
        let mut earlier = earlier.into_iter();
        let outcomes = ids
            .into_iter()
            .zip(completions)
            .map(|(id, r)| {
                let stood = earlier.next().flatten();
                match r {
                    Ok(status) => {
                        let mut a = wire::ItemAnswer::new(id);
                        a.state = Some(conv::state(status.state));
                        if status.state.is_pending() {
                            a.ready_at = Some(conv::time(status.ready_at));
                        }
                        a.earlier = stood.as_ref().map(conv::step);
                        a
                    }
                    Err(e) => refused(id, e),
                }
            })
            .collect();
        Ok(wire::Worked {
            outcomes,
            jobs: leased(&jobs),
        })
    }
}

/// One outcome of `POST /v1/work` as the library's completion; a field that
/// does not belong to its kind is refused.
fn completion(o: wire::Outcome) -> Result<Completion, ApiError> {
    use wire::OutcomeKind as K;
    let (id, token) = (JobId(o.id), LeaseToken(o.token));
    let stray = |field: &str| {
        ApiError::bad_request(format!(
            "outcome of job {}: {field} does not go with outcome \"{}\"",
            o.id,
            o.outcome.name()
        ))
    };
    let has_result = o.result.is_some() || o.result_base64.is_some();
    let has_sleep = o.step.is_some() || o.until.is_some() || o.key.is_some();
    if o.outcome != K::Step && (o.output.is_some() || o.output_base64.is_some()) {
        return Err(stray("output"));
    }
    if o.outcome != K::Join && o.child.is_some() {
        return Err(stray("child"));
    }
    match o.outcome {
        K::Ack => {
            if let Some(f) = [
                (o.error.is_some(), "error"),
                (o.retry_in_ms.is_some(), "retry_in_ms"),
                (o.permanent, "permanent"),
                (o.in_ms.is_some(), "in_ms"),
                (o.step.is_some(), "step"),
                (o.until.is_some(), "until"),
                (o.key.is_some(), "key"),
            ]
            .iter()
            .find_map(|(given, f)| given.then_some(*f))
            {
                return Err(stray(f));
            }
            Ok(Completion::ack(
                id,
                token,
                conv::bytes_of("result", o.result, o.result_base64)?,
            ))
        }
        K::Nack => {
            if has_result || o.in_ms.is_some() || has_sleep {
                return Err(stray(if has_result {
                    "result"
                } else if has_sleep {
                    "step or until"
                } else {
                    "in_ms"
                }));
            }
            let Some(error) = o.error else {
                return Err(ApiError::bad_request(format!(
                    "outcome of job {}: a nack needs its error",
                    o.id
                )));
            };
            // As POST /v1/jobs/{id}/nack: permanent wins over a delay.
            Ok(if o.permanent {
                Completion::nack_permanent(id, token, error)
            } else {
                Completion::nack(id, token, error, ms("retry_in_ms", o.retry_in_ms)?)
            })
        }
        K::Release => {
            if has_result || o.error.is_some() || o.retry_in_ms.is_some() || o.permanent || has_sleep {
                return Err(stray("a field other than in_ms"));
            }
            Ok(match ms("in_ms", o.in_ms)? {
                Some(delay) => Completion::snooze(id, token, delay),
                None => Completion::release(id, token),
            })
        }
        K::Sleep => {
            if has_result
                || o.error.is_some()
                || o.retry_in_ms.is_some()
                || o.permanent
                || o.in_ms.is_some()
                || o.key.is_some()
            {
                return Err(stray("a field other than step and until"));
            }
            let (Some(step), Some(until)) = (o.step, o.until) else {
                return Err(ApiError::bad_request(format!(
                    "outcome of job {}: a sleep needs its step and until",
                    o.id
                )));
            };
            let until = conv::rfc3339("until", &until)?;
            relay::Step::check_name(&step)
                .map_err(|e| ApiError::bad_request(format!("outcome of job {}: {e}", o.id)))?;
            Ok(Completion::sleep(id, token, step, until))
        }
        K::Wait => {
            if has_result || o.error.is_some() || o.retry_in_ms.is_some() || o.permanent || o.in_ms.is_some() {
                return Err(stray("a field other than step, key and until"));
            }
            let (Some(step), Some(key), Some(until)) = (o.step, o.key, o.until) else {
                return Err(ApiError::bad_request(format!(
                    "outcome of job {}: a wait needs its step, key and until",
                    o.id
                )));
            };
            let until = conv::rfc3339("until", &until)?;
            relay::Step::check_name(&step)
                .and_then(|()| relay::Waited::check_key(&key))
                .map_err(|e| ApiError::bad_request(format!("outcome of job {}: {e}", o.id)))?;
            Ok(Completion::wait(id, token, step, key, until))
        }
        // Output and child are checked above for every other kind.
        K::Step | K::Join
            if has_result
                || o.error.is_some()
                || o.retry_in_ms.is_some()
                || o.permanent
                || o.in_ms.is_some()
                || o.until.is_some()
                || o.key.is_some() =>
        {
            Err(stray(if o.outcome == K::Step {
                "a field other than step and output"
            } else {
                "a field other than step and child"
            }))
        }
        K::Step => {
            let Some(step) = o.step else {
                return Err(ApiError::bad_request(format!(
                    "outcome of job {}: a step record needs its step",
                    o.id
                )));
            };
            relay::Step::check_name(&step)
                .map_err(|e| ApiError::bad_request(format!("outcome of job {}: {e}", o.id)))?;
            let output = conv::bytes_of("output", o.output, o.output_base64)?.unwrap_or_default();
            Ok(Completion::step(id, token, step, output))
        }
        K::Join => {
            let (Some(step), Some(child)) = (o.step, o.child) else {
                return Err(ApiError::bad_request(format!(
                    "outcome of job {}: a join needs its step and child",
                    o.id
                )));
            };
            relay::Step::check_name(&step)
                .map_err(|e| ApiError::bad_request(format!("outcome of job {}: {e}", o.id)))?;
            Ok(Completion::join(id, token, step, JobId(child)))
        }
    }
}

/// An item refused on its own, with the code and message the per-job
/// endpoints answer for the same error.
fn refused(id: i64, e: relay::Error) -> wire::ItemAnswer {
    let e = ApiError::from(e);
    wire::ItemAnswer::refused(id, e.code, e.message)
}

/// Extends many leases at once; each answered on its own.
impl Handle for calls::Heartbeat {
    async fn handle(s: Arc<AppState>, r: Req<Self>) -> Result<wire::Beaten, ApiError> {
        let b = r.body;
        if b.leases.len() > wire::MAX_ITEMS {
            return Err(ApiError::bad_request(format!(
                "leases must hold at most {} items",
                wire::MAX_ITEMS
            )));
        }
        // A length out of range breaks the document's schema: the call is
        // refused whole, as any malformed body.
        let length = |field: &str, v: Option<u64>| {
            let d = v.map(Duration::from_millis);
            match d.map(|d| relay::Limits::default().lease_for(d)) {
                Some(Err(e)) => Err(ApiError::bad_request(format!("{field}: {}", e.reason))),
                _ => Ok(d),
            }
        };
        let default = length("lease_for_ms", b.lease_for_ms)?.unwrap_or(Duration::from_secs(30));
        let leases = b
            .leases
            .iter()
            .map(|l| {
                let lease_for = length("leases[].lease_for_ms", l.lease_for_ms)?.unwrap_or(default);
                Ok((JobId(l.id), LeaseToken(l.token), lease_for))
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        // A worker holding no jobs renews none: nothing to write.
        if leases.is_empty() {
            return Ok(wire::Beaten { leases: Vec::new() });
        }
        let done = s.relay.extend_batch(leases).await?;
        let leases = b
            .leases
            .iter()
            .zip(done)
            .map(|(l, r)| match r {
                Ok(until) => wire::ItemAnswer {
                    lease_expires_at: Some(conv::time(until)),
                    ..wire::ItemAnswer::new(l.id)
                },
                Err(e) => refused(l.id, e),
            })
            .collect();
        Ok(wire::Beaten { leases })
    }
}
