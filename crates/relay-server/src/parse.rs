//! Parsers of what a request names: a job id in a path, a state, a time,
//! a duration in milliseconds. The API and the dashboard both read these.

use crate::error::ApiError;
use relay::{JobId, JobState, Timestamp};
use std::time::Duration;

/// A job id in a path or a form.
pub(crate) fn id(raw: &str) -> Result<JobId, ApiError> {
    raw.parse::<i64>()
        .map(JobId)
        .map_err(|_| ApiError::bad_request(format!("{raw:?} is not a job id (a positive integer)")))
}

/// A duration in milliseconds from a request, at most `MAX_MS`.
pub(crate) fn ms(field: &str, v: Option<u64>) -> Result<Option<Duration>, ApiError> {
    match v {
        Some(n) if n > crate::openapi::MAX_MS => Err(ApiError::bad_request(format!(
            "{field} must be at most {}",
            crate::openapi::MAX_MS
        ))),
        v => Ok(v.map(Duration::from_millis)),
    }
}

/// A state named in a query or body, in any case.
pub(crate) fn state_arg(st: &str) -> Result<JobState, ApiError> {
    JobState::parse(&st.to_uppercase()).ok_or_else(|| {
        ApiError::bad_request(format!(
            "unknown state {st:?}: use WAITING, READY, LEASED, SUCCEEDED, DEAD or CANCELLED"
        ))
    })
}

/// An RFC 3339 time of a query or body.
pub(crate) fn time_arg(field: &str, t: &str) -> Result<Timestamp, ApiError> {
    let at = time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
        .map_err(|e| ApiError::bad_request(format!("{field} {t:?} is not an RFC 3339 time: {e}")))?;
    Ok(Timestamp::from_millis(
        i64::try_from(at.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX),
    ))
}
