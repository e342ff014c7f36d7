//! The invariants a stored row must satisfy, checked once for every store.
//! A store reads its columns (with its own type checks) into a
//! [`RawStatus`] (a job), [`RawQueue`] or [`RawSchedule`]; their decoding
//! refuses anything that breaks an invariant with `Corrupt`, naming the
//! row.

use crate::StoreError;
use relay_core::{
    JobId, JobState, JobStatus, Keep, Lease, LeaseToken, Priority, QueueLimits, QueueSettings, RateLimit, RateWindow,
    Recurrence, Retention, Schedule, Timestamp,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// A dependency edge (`parent`, `child`, `on_failure` as stored), or
/// `Corrupt` naming the child when `on_failure` is neither "cancel" nor
/// "run".
pub fn dependent(parent: JobId, child: JobId, on_failure: &str) -> Result<crate::Dependent, StoreError> {
    let on_failure = on_failure.parse().map_err(|e: String| {
        StoreError::corrupt(
            Some(child),
            format!("the dependency on job {parent}: column on_failure: {e}"),
        )
    })?;
    Ok(crate::Dependent {
        parent,
        child,
        on_failure,
    })
}

/// A job's stored progress (`progress` column: the JSON of
/// [`relay_core::Progress`]), or `Corrupt` naming the job when it does not
/// parse or its fraction is outside 0-1.
pub fn progress(job: JobId, text: &str) -> Result<relay_core::Progress, StoreError> {
    let p: relay_core::Progress = serde_json::from_str(text)
        .map_err(|e| StoreError::corrupt(Some(job), format!("column progress: not a progress report: {e}")))?;
    relay_core::Progress::check(p.fraction, p.message.as_deref())
        .map_err(|e| StoreError::corrupt(Some(job), format!("column progress: {e}")))?;
    Ok(p)
}

/// The text a store keeps in a job's `progress` column.
pub fn progress_text(p: &relay_core::Progress) -> String {
    // A struct of a number, a string, a number and a number: serializing
    // it cannot fail.
    serde_json::to_string(p).unwrap_or_default()
}

/// A job's recorded steps as a store keeps them (`steps` column), in the
/// order they were recorded: their count (u32), then for each, the name's length (u16), the name
/// (UTF-8), the attempt (u32), the time (i64 milliseconds) and the
/// output's length (u32) and bytes, integers little-endian, after a
/// format byte (1). Binary, not JSON: outputs are bytes, and a lease
/// carries them on the hot path.
pub fn steps_bytes(steps: &[relay_core::Step]) -> Vec<u8> {
    let n: usize = steps.iter().map(|s| 18 + s.name.len() + s.output.len()).sum();
    let mut b = Vec::with_capacity(1 + n);
    b.push(STEPS_FORMAT);
    // At most MAX_STEPS (1,000), checked before a step is recorded.
    b.extend_from_slice(&(steps.len() as u32).to_le_bytes());
    for s in steps {
        // Names are at most 256 characters (1,024 bytes) and outputs at
        // most 1 MiB, both checked before a step is recorded.
        b.extend_from_slice(&(s.name.len() as u16).to_le_bytes());
        b.extend_from_slice(s.name.as_bytes());
        b.extend_from_slice(&s.attempt.to_le_bytes());
        b.extend_from_slice(&s.at.as_millis().to_le_bytes());
        b.extend_from_slice(&(s.output.len() as u32).to_le_bytes());
        b.extend_from_slice(&s.output);
    }
    b
}

const STEPS_FORMAT: u8 = 1;

/// A job's stored steps ([`steps_bytes`]), or `Corrupt` naming the job when
/// they do not decode whole (fewer steps than counted, a name that is not
/// UTF-8, bytes left over, a name twice, more than the bounds allow).
pub fn steps(job: JobId, bytes: &[u8]) -> Result<Vec<relay_core::Step>, StoreError> {
    let corrupt = |why: String| StoreError::corrupt(Some(job), format!("column steps: {why}"));
    let mut r = bytes;
    let mut take = |n: usize, what: &str| -> Result<&[u8], StoreError> {
        if r.len() < n {
            return Err(corrupt(format!("ends inside a step's {what}")));
        }
        let (head, rest) = r.split_at(n);
        r = rest;
        Ok(head)
    };
    let format = take(1, "format byte")?[0];
    if format != STEPS_FORMAT {
        return Err(corrupt(format!("format {format} is not one this Relay reads (1)")));
    }
    let count = u32::from_le_bytes(take(4, "count")?.try_into().unwrap_or_default()) as usize;
    if count > relay_core::job::MAX_STEPS {
        return Err(corrupt(format!(
            "{count} steps, over the bound of {}",
            relay_core::job::MAX_STEPS
        )));
    }
    let mut steps: Vec<relay_core::Step> = Vec::with_capacity(count);
    let mut total = 0usize;
    for _ in 0..count {
        let len = take(2, "name length")?;
        let len = u16::from_le_bytes([len[0], len[1]]) as usize;
        let name = std::str::from_utf8(take(len, "name")?)
            .map_err(|e| corrupt(format!("a step name is not UTF-8: {e}")))?
            .to_owned();
        let attempt = u32::from_le_bytes(take(4, "attempt")?.try_into().unwrap_or_default());
        let at = i64::from_le_bytes(take(8, "time")?.try_into().unwrap_or_default());
        let out = u32::from_le_bytes(take(4, "output length")?.try_into().unwrap_or_default()) as usize;
        let output = take(out, "output")?.to_vec();
        total += output.len();
        if steps.iter().any(|s| s.name == name) {
            return Err(corrupt(format!("step {name:?} is recorded twice")));
        }
        steps.push(relay_core::Step {
            name,
            attempt,
            at: Timestamp::from_millis(at),
            output,
        });
    }
    if !r.is_empty() {
        return Err(corrupt(format!("{} bytes left over after the last step", r.len())));
    }
    if total > relay_core::job::MAX_STEP_BYTES {
        return Err(corrupt(format!(
            "{total} bytes of output, over the bound of {}",
            relay_core::job::MAX_STEP_BYTES
        )));
    }
    Ok(steps)
}

/// A store's schema version, checked against the newest this build knows:
/// `SchemaTooNew` when a newer Relay wrote it (this one must not touch it).
pub fn schema_version(found: i64, supported: i64) -> Result<i64, StoreError> {
    if found > supported {
        return Err(StoreError::SchemaTooNew { found, supported });
    }
    Ok(found)
}

/// A stored event row of `job`; its data must be JSON.
pub fn event(job: JobId, seq: i64, at: i64, kind: String, data: &str) -> Result<crate::Event, StoreError> {
    let data = serde_json::from_str(data)
        .map_err(|e| StoreError::corrupt(Some(job), format!("event data is not JSON: {e}")))?;
    Ok(crate::Event {
        job_id: job,
        seq,
        at: Timestamp::from_millis(at),
        kind,
        data,
    })
}

/// Each queue's stats, folded from a store's raw rows: `counts` as
/// (queue, state, jobs) and `oldest` as (queue, earliest `ready_at` of its
/// READY jobs). A queue's oldest ready age is set only when that job is due
/// (its `ready_at` not in the future); a negative count reads as 0.
///
/// # Errors
///
/// `Corrupt` for a state that is not one of Relay's.
pub fn queue_stats(
    counts: impl IntoIterator<Item = (String, String, i64)>,
    oldest: impl IntoIterator<Item = (String, Option<i64>)>,
    now: Timestamp,
) -> Result<BTreeMap<String, crate::QueueStats>, StoreError> {
    let mut out: BTreeMap<String, crate::QueueStats> = BTreeMap::new();
    for (queue, raw, n) in counts {
        let state = JobState::parse(&raw)
            .ok_or_else(|| StoreError::corrupt(None, format!("queue {queue}: unknown state {raw:?}")))?;
        out.entry(queue)
            .or_insert_with(crate::QueueStats::empty)
            .counts
            .insert(state, u64::try_from(n).unwrap_or(0));
    }
    for (queue, ready_at) in oldest {
        if let Some(t) = ready_at.filter(|t| *t <= now.as_millis()) {
            out.entry(queue)
                .or_insert_with(crate::QueueStats::empty)
                .oldest_ready_age = Some(now.since(Timestamp::from_millis(t)));
        }
    }
    Ok(out)
}

/// Jobs per state over every queue from (state, jobs) rows: every state
/// present, a negative sum read as 0.
///
/// # Errors
///
/// `Corrupt` for a state that is not one of Relay's.
pub fn state_totals(rows: impl IntoIterator<Item = (String, i64)>) -> Result<BTreeMap<JobState, u64>, StoreError> {
    let mut out: BTreeMap<JobState, u64> = JobState::ALL.iter().map(|s| (*s, 0)).collect();
    for (raw, n) in rows {
        let state = JobState::parse(&raw).ok_or_else(|| StoreError::corrupt(None, format!("unknown state {raw:?}")))?;
        out.insert(state, u64::try_from(n).unwrap_or(0));
    }
    Ok(out)
}

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
    pub waiting_on: i64,
}

fn count(job: Option<JobId>, name: &str, v: i64) -> Result<u32, StoreError> {
    u32::try_from(v).map_err(|_| StoreError::corrupt(job, format!("column {name}: {v} is out of range")))
}

/// A stored duration in milliseconds: positive, or `Corrupt`.
pub fn millis(job: Option<JobId>, name: &str, ms: i64) -> Result<Duration, StoreError> {
    u64::try_from(ms)
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
        .ok_or_else(|| StoreError::corrupt(job, format!("column {name}: {ms} is not a positive duration")))
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
        let waiting_on = count(job, "waiting_on", self.waiting_on)?;
        // Only a WAITING job waits on others; one WAITING on none sleeps
        // until its ready_at (issue 40).
        if state != JobState::Waiting && waiting_on > 0 {
            return Err(StoreError::corrupt(
                job,
                format!("{state} job with waiting_on {waiting_on}"),
            ));
        }
        Ok(JobStatus {
            waiting_on,
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

    #[test]
    fn steps_round_trip_and_a_damaged_column_is_corrupt() {
        let steps = vec![
            relay_core::Step {
                name: "charge".into(),
                attempt: 1,
                at: Timestamp::from_millis(1_700_000_000_123),
                output: br#"{"charge":"ch_1"}"#.to_vec(),
            },
            relay_core::Step {
                name: "e\u{301}mail".into(),
                attempt: 2,
                at: Timestamp::from_millis(-5),
                output: vec![0, 255, 7],
            },
        ];
        let b = steps_bytes(&steps);
        assert_eq!(super::steps(JobId(4), &b).unwrap(), steps);
        assert_eq!(super::steps(JobId(4), &steps_bytes(&[])).unwrap(), vec![]);
        // Cut anywhere inside, one byte more, another format: Corrupt, never
        // a panic or a shorter list.
        for cut in 0..b.len() {
            let e = super::steps(JobId(4), &b[..cut]);
            assert!(
                matches!(
                    e,
                    Err(StoreError::Corrupt {
                        job: Some(JobId(4)),
                        ..
                    })
                ),
                "cut at {cut}: {e:?}"
            );
        }
        let mut longer = b.clone();
        longer.push(0);
        assert!(super::steps(JobId(4), &longer).is_err());
        let mut other = b.clone();
        other[0] = 2;
        assert!(super::steps(JobId(4), &other).is_err());
        let twice = steps_bytes(&[steps[0].clone(), steps[0].clone()]);
        assert!(super::steps(JobId(4), &twice).is_err());
    }

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
            waiting_on: 0,
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

/// A queue's settings row as stored, before its invariants are checked.
#[derive(Debug, Clone)]
pub struct RawQueue {
    pub paused: bool,
    pub max_leased: Option<i64>,
    pub rate_limit: Option<i64>,
    pub rate_per_ms: Option<i64>,
    pub window_start: i64,
    pub window_count: i64,
    pub poison_after: Option<i64>,
    /// The queue's retention by state (`keep_succeeded`, `keep_dead`,
    /// `keep_cancelled`): milliseconds, -1 for forever, NULL for the
    /// engine's default.
    pub keep: [Option<i64>; 3],
    pub max_leased_per_group: Option<i64>,
}

/// A queue's stored retention (`RawQueue::keep`), or why a column is out
/// of range.
pub fn retention(keep: [Option<i64>; 3]) -> Result<Retention, String> {
    let one = |name: &str, v: Option<i64>| {
        v.map(|ms| Keep::from_millis(ms).map_err(|e| format!("column {name}: {e}")))
            .transpose()
    };
    Ok(Retention {
        succeeded: one("keep_succeeded", keep[0])?,
        dead: one("keep_dead", keep[1])?,
        cancelled: one("keep_cancelled", keep[2])?,
    })
}

/// A finished job's row as the prune reads it: `id, state, finished_at`
/// and its queue's `keep_*` columns (NULL without a settings row).
#[derive(Debug, Clone)]
pub struct RawFinished {
    pub id: i64,
    pub state: String,
    pub finished_at: Option<i64>,
    pub keep: [Option<i64>; 3],
}

impl RawFinished {
    /// The finished job, or why its row (or its queue's retention) does not
    /// decode: the prune passes over it rather than delete what it cannot
    /// read.
    pub fn decode(self) -> Result<crate::Finished, String> {
        let state = JobState::parse(&self.state)
            .filter(|s| s.is_finished())
            .ok_or_else(|| format!("job {}: state {:?} is not a final state", self.id, self.state))?;
        let finished_at = self
            .finished_at
            .ok_or_else(|| format!("job {}: a {} job without finished_at", self.id, state.as_str()))?;
        let keep = retention(self.keep).map_err(|e| format!("job {}'s queue: {e}", self.id))?;
        Ok(crate::Finished {
            id: JobId(self.id),
            state,
            finished_at: Timestamp::from_millis(finished_at),
            keep,
        })
    }
}

/// A queue's stored `poison_after`, if it is in range.
pub fn poison_after(v: i64) -> Option<u32> {
    u32::try_from(v)
        .ok()
        .filter(|n| *n <= relay_core::queue::MAX_POISON_AFTER)
}

/// A queue whose settings row does not decode (a column of the wrong
/// type, or a value out of range): it is held as if paused, so that no
/// claim trusts a limit it cannot read, and the rest of the store works on.
/// Resuming it writes the row whole again (pausing or setting its limits
/// writes it too, still paused).
fn held_queue(name: &str, reason: &str) -> QueueSettings {
    tracing::error!(queue = %name, %reason, "a queue's settings row is corrupt; its jobs are held until `relay resume` writes it again");
    QueueSettings {
        paused: true,
        ..QueueSettings::default()
    }
}

/// Queue `name`'s settings from its row as a store read it: the row's
/// settings, or, when a column did not read or a value breaks an
/// invariant, the queue held (see `held_queue`).
pub fn queue_settings(name: &str, raw: Result<RawQueue, StoreError>) -> QueueSettings {
    // A held queue keeps the retention its row holds, when that reads: a
    // `relay resume` writes the row whole, and must not put a queue that
    // keeps its jobs forever back on the default.
    let kept = raw.as_ref().ok().and_then(|r| retention(r.keep).ok());
    match raw.map_err(|e| e.to_string()).and_then(RawQueue::settings) {
        Ok(s) => s,
        Err(reason) => QueueSettings {
            retention: kept.unwrap_or_default(),
            ..held_queue(name, &reason)
        },
    }
}

impl RawQueue {
    /// The settings, or why the row is corrupt: a limit out of range, half
    /// a rate limit, a negative window count.
    pub fn settings(self) -> Result<QueueSettings, String> {
        let limit = |name: &str, v: i64| {
            u32::try_from(v)
                .ok()
                .filter(|n| (1..=relay_core::queue::MAX_LIMIT).contains(n))
                .ok_or_else(|| format!("column {name}: {v} is out of range"))
        };
        let max_leased = self.max_leased.map(|v| limit("max_leased", v)).transpose()?;
        let max_leased_per_group = self
            .max_leased_per_group
            .map(|v| limit("max_leased_per_group", v))
            .transpose()?;
        let rate = match (self.rate_limit, self.rate_per_ms) {
            (None, None) => None,
            (Some(n), Some(ms)) => {
                let per = u64::try_from(ms)
                    .ok()
                    .map(Duration::from_millis)
                    .filter(|d| !d.is_zero() && *d <= relay_core::queue::MAX_RATE_PERIOD)
                    .ok_or_else(|| format!("column rate_per_ms: {ms} is out of range"))?;
                Some(RateLimit {
                    limit: limit("rate_limit", n)?,
                    per,
                })
            }
            (a, b) => {
                return Err(format!(
                    "rate_limit {a:?} and rate_per_ms {b:?}: set together or not at all"
                ))
            }
        };
        let count = u32::try_from(self.window_count)
            .map_err(|_| format!("column window_count: {} is out of range", self.window_count))?;
        let poison_after = self
            .poison_after
            .map(|v| poison_after(v).ok_or_else(|| format!("column poison_after: {v} is out of range")))
            .transpose()?;
        Ok(QueueSettings {
            paused: self.paused,
            limits: QueueLimits {
                max_leased,
                max_leased_per_group,
                rate,
                poison_after,
            },
            window: RateWindow {
                start: Timestamp::from_millis(self.window_start),
                count,
            },
            retention: retention(self.keep)?,
        })
    }
}

#[cfg(test)]
mod queue_tests {
    use super::RawQueue;

    /// A row held for a bad limit keeps its retention: writing it back
    /// (a resume) must not put the queue's jobs on the default.
    #[test]
    fn a_held_queue_keeps_its_retention() {
        let raw = RawQueue {
            paused: false,
            max_leased: Some(0),
            rate_limit: None,
            rate_per_ms: None,
            window_start: 0,
            window_count: 0,
            poison_after: None,
            keep: [None, Some(-1), Some(5)],
            max_leased_per_group: None,
        };
        let s = super::queue_settings("q", Ok(raw));
        assert!(s.paused, "held");
        assert_eq!(s.retention.dead, Some(relay_core::Keep::Forever));
        assert_eq!(
            s.retention.cancelled,
            Some(relay_core::Keep::For(std::time::Duration::from_millis(5)))
        );
    }

    #[test]
    fn half_a_rate_limit_or_a_zero_limit_is_corrupt() {
        let ok = RawQueue {
            paused: false,
            max_leased: Some(5),
            rate_limit: Some(100),
            rate_per_ms: Some(1000),
            window_start: 0,
            window_count: 3,
            poison_after: Some(3),
            keep: [Some(0), Some(-1), None],
            max_leased_per_group: None,
        };
        assert!(ok.clone().settings().is_ok());
        for bad in [
            RawQueue {
                max_leased: Some(0),
                ..ok.clone()
            },
            RawQueue {
                max_leased: Some(-1),
                ..ok.clone()
            },
            RawQueue {
                rate_per_ms: None,
                ..ok.clone()
            },
            RawQueue {
                rate_per_ms: Some(0),
                ..ok.clone()
            },
            RawQueue {
                window_count: -1,
                ..ok.clone()
            },
            RawQueue {
                poison_after: Some(-1),
                ..ok.clone()
            },
            RawQueue {
                keep: [None, Some(-2), None],
                ..ok.clone()
            },
        ] {
            assert!(bad.clone().settings().is_err(), "{bad:?}");
        }
    }
}

/// A worker's row as a store read its columns (`id, beat, seen_at,
/// stopped_at`): its record, or `None`, logged, when a column did not read
/// or the row does not decode (the reader leaves it out).
pub fn worker_row(read: Result<(String, String, i64, Option<i64>), StoreError>) -> Option<relay_core::WorkerRecord> {
    let decoded = read
        .map_err(|e| e.to_string())
        .and_then(|(id, beat, seen, stopped)| worker(&id, &beat, seen, stopped));
    decoded
        .map_err(|reason| tracing::warn!(%reason, "a worker's row does not decode; it is left out"))
        .ok()
}

/// A worker's row (`id, beat, seen_at, stopped_at`) as its record, or why
/// it does not decode.
fn worker(id: &str, beat: &str, seen_at: i64, stopped_at: Option<i64>) -> Result<relay_core::WorkerRecord, String> {
    let beat: relay_core::WorkerBeat =
        serde_json::from_str(beat).map_err(|e| format!("worker {id:?}: column beat: {e}"))?;
    if beat.id != id {
        return Err(format!("worker {id:?}: its heartbeat names {:?}", beat.id));
    }
    Ok(relay_core::WorkerRecord {
        beat,
        seen_at: Timestamp::from_millis(seen_at),
        stopped_at: stopped_at.map(Timestamp::from_millis),
    })
}

/// A schedule row as stored, before its invariants are checked.
#[derive(Debug, Clone)]
pub struct RawSchedule {
    pub name: String,
    pub cron: Option<String>,
    pub every_ms: Option<i64>,
    pub tz: Option<String>,
    pub queue: String,
    pub kind: String,
    pub payload: Vec<u8>,
    pub priority: i64,
    pub max_attempts: i64,
    pub paused: bool,
    pub created_at: i64,
    pub next_at: i64,
    pub last_at: Option<i64>,
    pub group: Option<String>,
}

impl RawSchedule {
    /// The schedule, or `Corrupt` naming it: a cron and an interval both
    /// or neither, an expression or zone that no longer parses, a priority
    /// or attempt count out of range.
    pub fn decode(self) -> Result<Schedule, StoreError> {
        let name = self.name;
        let bad = |reason: String| StoreError::corrupt(None, format!("schedule {name}: {reason}"));
        let recurrence = match (self.cron, self.every_ms) {
            (Some(expr), None) => Recurrence::Cron { expr, tz: self.tz },
            (None, Some(ms)) => Recurrence::Every(Duration::from_millis(
                u64::try_from(ms).map_err(|_| bad(format!("every_ms {ms} is out of range")))?,
            )),
            (c, e) => return Err(bad(format!("cron {c:?} and every_ms {e:?}: exactly one must be set"))),
        };
        recurrence.validate().map_err(|e| bad(e.to_string()))?;
        let priority = priority(None, self.priority).map_err(|e| bad(e.to_string()))?;
        let max_attempts = u32::try_from(self.max_attempts)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| bad(format!("max_attempts {} is out of range", self.max_attempts)))?;
        Ok(Schedule {
            name,
            recurrence,
            queue: self.queue,
            kind: self.kind,
            payload: self.payload,
            priority,
            max_attempts,
            group: self.group,
            paused: self.paused,
            created_at: Timestamp::from_millis(self.created_at),
            next_at: Timestamp::from_millis(self.next_at),
            last_at: self.last_at.map(Timestamp::from_millis),
        })
    }
}
