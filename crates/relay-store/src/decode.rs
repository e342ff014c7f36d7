//! The invariants a stored job must satisfy, checked once for every store.
//! A store reads its columns (with its own type checks) into a
//! [`RawStatus`]; [`RawStatus::decode`] refuses anything that breaks an
//! invariant with `Corrupt`, naming the job.

use crate::StoreError;
use relay_core::{JobId, JobState, JobStatus, Lease, LeaseToken, Priority, Timestamp};

/// A job's status columns as stored, before any invariant is checked.
#[derive(Debug, Clone)]
pub struct RawStatus {
    pub state: String,
    pub attempts: i64,
    pub max_attempts: i64,
    pub ready_at: i64,
    pub finished_at: Option<i64>,
    pub lease_token: i64,
    pub lease_expires_at: Option<i64>,
    pub leased_by: Option<String>,
    pub last_error: Option<String>,
}

fn count(job: Option<JobId>, name: &str, v: i64) -> Result<u32, StoreError> {
    u32::try_from(v).map_err(|_| StoreError::corrupt(job, format!("column {name}: {v} is out of range")))
}

/// A stored priority, or `Corrupt` outside 0-3.
pub fn priority(job: Option<JobId>, v: i64) -> Result<Priority, StoreError> {
    u8::try_from(v)
        .ok()
        .and_then(Priority::new)
        .ok_or_else(|| StoreError::corrupt(job, format!("column priority: {v} is outside 0-3")))
}

impl RawStatus {
    pub fn decode(self, job: Option<JobId>) -> Result<JobStatus, StoreError> {
        let raw = self.state;
        let state = JobState::parse(&raw)
            .ok_or_else(|| StoreError::corrupt(job, format!("column state: unknown state {raw:?}")))?;
        let max_attempts = count(job, "max_attempts", self.max_attempts)?;
        if max_attempts == 0 {
            return Err(StoreError::corrupt(job, "column max_attempts: 0"));
        }
        let finished_at = self.finished_at.map(Timestamp::from_millis);
        if state.is_finished() != finished_at.is_some() {
            return Err(StoreError::corrupt(
                job,
                format!("{state} job with finished_at {finished_at:?}"),
            ));
        }
        let last_token = LeaseToken(self.lease_token);
        let lease = match (state, self.lease_expires_at, self.leased_by) {
            (JobState::Leased, Some(e), Some(worker)) => Some(Lease {
                token: last_token,
                expires_at: Timestamp::from_millis(e),
                worker,
            }),
            (JobState::Leased, e, w) => {
                return Err(StoreError::corrupt(
                    job,
                    format!("LEASED job without a lease (lease_expires_at {e:?}, leased_by {w:?})"),
                ))
            }
            (_, None, None) => None,
            _ => return Err(StoreError::corrupt(job, format!("{state} job holds a lease"))),
        };
        Ok(JobStatus {
            state,
            attempts: count(job, "attempts", self.attempts)?,
            max_attempts,
            ready_at: Timestamp::from_millis(self.ready_at),
            finished_at,
            last_token,
            lease,
            last_error: self.last_error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready() -> RawStatus {
        RawStatus {
            state: "READY".into(),
            attempts: 0,
            max_attempts: 3,
            ready_at: 5,
            finished_at: None,
            lease_token: 0,
            lease_expires_at: None,
            leased_by: None,
            last_error: None,
        }
    }

    #[test]
    fn each_broken_invariant_is_corrupt() {
        let job = Some(JobId(9));
        assert!(ready().decode(job).is_ok());
        let cases: Vec<(RawStatus, &str)> = vec![
            (
                RawStatus {
                    state: "WEIRD".into(),
                    ..ready()
                },
                "unknown state",
            ),
            (
                RawStatus {
                    max_attempts: 0,
                    ..ready()
                },
                "max_attempts: 0",
            ),
            (
                RawStatus {
                    attempts: -1,
                    ..ready()
                },
                "attempts: -1 is out of range",
            ),
            (
                RawStatus {
                    finished_at: Some(1),
                    ..ready()
                },
                "READY job with finished_at",
            ),
            (
                RawStatus {
                    state: "SUCCEEDED".into(),
                    ..ready()
                },
                "SUCCEEDED job with finished_at None",
            ),
            (
                RawStatus {
                    state: "LEASED".into(),
                    ..ready()
                },
                "LEASED job without a lease",
            ),
            (
                RawStatus {
                    leased_by: Some("w".into()),
                    lease_expires_at: Some(1),
                    ..ready()
                },
                "READY job holds a lease",
            ),
        ];
        for (raw, want) in cases {
            match raw.decode(job) {
                Err(StoreError::Corrupt {
                    job: Some(JobId(9)),
                    reason,
                }) => assert!(reason.contains(want), "{reason}"),
                other => panic!("expected Corrupt with {want:?}, got {other:?}"),
            }
        }
        assert!(priority(job, 4).is_err() && priority(job, -1).is_err() && priority(job, 3).is_ok());
    }
}
