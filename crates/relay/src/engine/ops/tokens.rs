//! Completion tokens (issue 40): a lease holder makes a token that a human
//! or a third party completes once, without an API token, by presenting
//! its secret; the completion is an emit of the token's own event key, so
//! a `wait_event` on that key (`JobContext::wait_token`) wakes with it.

use super::steps::emit;
use crate::engine::batch::BatchCtx;
use crate::engine::plan::Plan;
use crate::error::{Error, Result, TokenRefusal};
use relay_core::{JobId, LeaseToken, Timestamp};
use subtle::ConstantTimeEq;

/// The mark that keeps a token: the job, the SHA-256 of its secret, its
/// expiry. Kept a week past the expiry, so that a late completion is told
/// "expired", not "unknown".
fn token_mark(id: &str) -> String {
    format!("token:{id}")
}

/// The SHA-256 of `text`, hex.
pub(crate) fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A token's mark (`token:<id>`): its job, its secret's hash, its deadline.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Stored {
    pub(crate) job: i64,
    hash: String,
    pub(crate) until_ms: i64,
}

/// The mark that says a token was completed: the first completion stands
/// for the token's life and a week, not only for its event's week. A mark
/// of its own (a live mark is never rewritten).
fn used_mark(id: &str) -> String {
    format!("token:{id}:used")
}

/// Whether mark text `value` (a token's) holds the SHA-256 of `secret`,
/// compared in constant time: what a caller without the secret can learn
/// nothing from, checked on a read connection before any write.
pub(crate) fn secret_matches(value: &str, secret: &str) -> bool {
    serde_json::from_str::<Stored>(value)
        .is_ok_and(|s| bool::from(sha256_hex(secret).as_bytes().ct_eq(s.hash.as_bytes())))
}

/// A token's mark key for its `<id>.<secret>` text, and its secret.
pub(crate) fn split(text: &str) -> Option<(String, &str)> {
    let (id, secret) = text.split_once('.')?;
    Some((token_mark(id), secret))
}

/// Makes token `token` (its id and secret drawn by the caller) for job
/// `id`'s holder of `lease`, open until `until`.
pub(crate) fn create(
    plan: &mut Plan<'_>,
    ctx: &mut BatchCtx<'_>,
    id: JobId,
    lease: LeaseToken,
    token: &crate::CompletionToken,
) -> Result<crate::CompletionToken> {
    let cur = plan.status(id)?.ok_or(Error::NotFound { id })?;
    // The holder's check, as a step record's (nothing of it is written).
    super::decide(
        ctx,
        id,
        &cur,
        relay_core::Action::Step {
            token: lease,
            name: "token",
            bytes: 0,
        },
    )?;
    let stored = Stored {
        job: id.0,
        hash: sha256_hex(&token.secret),
        until_ms: token.expires_at.as_millis(),
    };
    let text = serde_json::to_string(&stored)
        .map_err(|e| Error::from(relay_core::InvalidInput::new("token", e.to_string())))?;
    plan.set_mark(
        &token_mark(&token.id),
        text,
        token.expires_at.plus(relay_core::job::EVENT_KEEP),
    )?;
    Ok(token.clone())
}

/// Completes the token `text` (`<id>.<secret>`) with `payload`: emits its
/// event, waking the job waiting for it. Refused (nothing written) when no
/// token has that id and secret, it was completed already, it expired, or
/// its job has ended.
pub(crate) fn complete(
    plan: &mut Plan<'_>,
    ctx: &mut BatchCtx<'_>,
    text: &str,
    payload: &[u8],
) -> Result<crate::Emitted> {
    let refused = |refusal| Error::Token { refusal };
    let (id, secret) = text.split_once('.').ok_or(refused(TokenRefusal::Unknown))?;
    let stored: Stored = plan
        .mark_value(&token_mark(id))?
        .and_then(|v| serde_json::from_str(&v).ok())
        .ok_or(refused(TokenRefusal::Unknown))?;
    // Digests compared in constant time: the time taken says nothing of
    // how much of a guess was right.
    if !bool::from(sha256_hex(secret).as_bytes().ct_eq(stored.hash.as_bytes())) {
        return Err(refused(TokenRefusal::Unknown));
    }
    if plan.mark_value(&used_mark(id))?.is_some() {
        return Err(refused(TokenRefusal::Used));
    }
    let until = Timestamp::from_millis(stored.until_ms);
    if ctx.now >= until {
        return Err(refused(TokenRefusal::Expired));
    }
    let job = JobId(stored.job);
    if plan.status(job)?.is_none_or(|s| s.state.is_finished()) {
        return Err(refused(TokenRefusal::Closed));
    }
    let key = crate::CompletionToken::key_of(id);
    if plan.event_payload(&key)?.is_some() {
        return Err(refused(TokenRefusal::Used));
    }
    let done = emit(plan, ctx, &key, payload)?;
    // The completion is kept while the token could be waited for (a
    // handler may begin its wait after a long sleep), not only a week.
    let keep = until.plus(relay_core::job::EVENT_KEEP);
    if keep > ctx.now.plus(relay_core::job::EVENT_KEEP) {
        plan.set_mark(
            &crate::engine::plan::event_mark(&key),
            crate::engine::plan::event_text(payload),
            keep,
        )?;
    }
    plan.set_mark(&used_mark(id), "1".to_owned(), keep)?;
    Ok(done)
}
