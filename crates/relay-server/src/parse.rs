//! Parsers of what a request names: a job id in a path, a state, a time,
//! a duration in milliseconds. The API and the dashboard both read these;
//! the checks themselves are `relay::wire`'s, the same for every caller.

use crate::error::ApiError;
use relay::{JobId, JobState, Timestamp};
use std::time::Duration;

/// A job id in a path or a form.
pub(crate) fn id(raw: &str) -> Result<JobId, ApiError> {
    raw.parse::<i64>()
        .map(JobId)
        .map_err(|_| ApiError::bad_request(format!("{raw:?} is not a job id (a positive integer)")))
}

/// A duration in milliseconds from a request, at most `wire::MAX_MS`.
pub(crate) fn ms(field: &str, v: Option<u64>) -> Result<Option<Duration>, ApiError> {
    Ok(relay::wire::millis(field, v)?)
}

/// A state named in a query or form, in any case.
pub(crate) fn state_arg(st: &str) -> Result<JobState, ApiError> {
    let s = st.parse::<relay_client::wire::State>().map_err(ApiError::bad_request)?;
    Ok(relay::wire::job_state(s)?)
}

/// An RFC 3339 time of a query or form.
pub(crate) fn time_arg(field: &str, t: &str) -> Result<Timestamp, ApiError> {
    Ok(relay::wire::rfc3339(field, t)?)
}
