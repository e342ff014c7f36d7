//! What a job is: identifiers, states, priority classes and the job record.

use crate::time::Timestamp;
use std::fmt;

/// A job's identity: 64-bit, increasing, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct JobId(pub i64);

impl From<i64> for JobId {
    fn from(v: i64) -> Self {
        Self(v)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A fencing token. Every lease of a job gets a larger token than the one
/// before it; `0` means the job was never leased.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct LeaseToken(pub i64);

impl fmt::Display for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// One of four priority classes, 0 (least urgent) to 3 (most urgent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "u8", into = "u8")]
pub struct Priority(u8);

impl Priority {
    /// Class 0, the least urgent.
    pub const LOW: Priority = Priority(0);
    /// Class 1, the default.
    pub const NORMAL: Priority = Priority(1);
    /// Class 2.
    pub const HIGH: Priority = Priority(2);
    /// Class 3, the most urgent; aging raises no job above it.
    pub const URGENT: Priority = Priority(3);
    /// The largest class number, 3.
    pub const MAX: u8 = 3;
    /// All classes, least urgent first.
    pub const ALL: [Priority; 4] = [Priority(0), Priority(1), Priority(2), Priority(3)];

    /// The class `v`, or `None` outside 0-3.
    pub const fn new(v: u8) -> Option<Priority> {
        if v <= Self::MAX {
            Some(Priority(v))
        } else {
            None
        }
    }

    /// The class number, 0-3.
    pub const fn get(self) -> u8 {
        self.0
    }
}

impl Default for Priority {
    fn default() -> Self {
        Priority::NORMAL
    }
}

impl TryFrom<u8> for Priority {
    type Error = String;
    fn try_from(v: u8) -> Result<Self, Self::Error> {
        Priority::new(v).ok_or_else(|| format!("priority {v} is outside 0-3"))
    }
}

impl From<Priority> for u8 {
    fn from(p: Priority) -> u8 {
        p.0
    }
}

/// Where a job is in its life. Every move between states is decided by
/// [`crate::transition()`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum JobState {
    /// Waiting for the jobs it depends on (`JobStatus::waiting_on` of them
    /// have not succeeded yet). Becomes READY when the last of them
    /// succeeds; CANCELLED when one of them ends DEAD or CANCELLED (unless
    /// it asked to run anyway). Leaves also by cancel or delete.
    Waiting,
    /// Due, waiting for a worker. Leaves by a lease, a cancel, or a delete.
    Ready,
    /// Its first run (or its next, after a snooze, a debounce or a delayed
    /// start) lies in the future, at `ready_at`. Becomes READY when that
    /// comes (promoted by the writers; a claim takes a due one as it is);
    /// leaves also by cancel or delete.
    Scheduled,
    /// Backing off after a failed attempt (a nack with a retry delay, its
    /// own or the policy's back-off): its next attempt is at `ready_at`.
    /// Becomes READY when that comes, as SCHEDULED does. (An expired lease
    /// is READY again at once.)
    Retrying,
    /// Held by one worker under a lease token until `lease.expires_at`.
    /// Leaves by ack (SUCCEEDED), nack (RETRYING, READY without a delay, or
    /// DEAD when attempts are spent), release (READY, no attempt counted;
    /// SCHEDULED when snoozed), lease expiry (READY at once, or DEAD), or
    /// cancel.
    Leased,
    /// Acknowledged by its worker. Final; only delete removes it.
    Succeeded,
    /// Failed for good: attempts exhausted or a permanent failure. Leaves
    /// only by retry (READY) or delete.
    Dead,
    /// Cancelled by a user, or because a job it waited for ended DEAD or
    /// CANCELLED. Leaves only by retry (READY) or delete.
    Cancelled,
}

impl JobState {
    /// Every state, in declaration (and `Ord`) order.
    pub const ALL: [JobState; 8] = [
        Self::Waiting,
        Self::Ready,
        Self::Scheduled,
        Self::Retrying,
        Self::Leased,
        Self::Succeeded,
        Self::Dead,
        Self::Cancelled,
    ];

    /// The stored and displayed name, in capitals.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "READY",
            Self::Scheduled => "SCHEDULED",
            Self::Retrying => "RETRYING",
            Self::Leased => "LEASED",
            Self::Succeeded => "SUCCEEDED",
            Self::Dead => "DEAD",
            Self::Cancelled => "CANCELLED",
            Self::Waiting => "WAITING",
        }
    }

    /// Parses a stored name; `None` for anything else (a corrupt row).
    pub fn parse(s: &str) -> Option<JobState> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// True for states no worker will ever move the job out of.
    pub const fn is_finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Dead | Self::Cancelled)
    }

    /// READY, SCHEDULED or RETRYING: waiting to be leased, once its
    /// `ready_at` has come. A claim takes any of them that is due.
    pub const fn is_pending(self) -> bool {
        matches!(self, Self::Ready | Self::Scheduled | Self::Retrying)
    }

    /// The pending state of a job that runs at `ready_at`: READY when that
    /// is not after `now`, else RETRYING after a failed attempt
    /// (`failed`), SCHEDULED otherwise.
    pub const fn pending(ready_at: Timestamp, now: Timestamp, failed: bool) -> Self {
        if ready_at.as_millis() <= now.as_millis() {
            Self::Ready
        } else if failed {
            Self::Retrying
        } else {
            Self::Scheduled
        }
    }
}

impl serde::Serialize for JobState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for JobState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        JobState::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("unknown job state {s:?}")))
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What becomes of a job when one of the jobs it depends on ends DEAD or
/// CANCELLED (or is deleted before it finished).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DependencyFailure {
    /// The dependent is CANCELLED, the reason in its event log (the default).
    #[default]
    Cancel,
    /// The dependent counts that job as done and still runs.
    Run,
}

impl DependencyFailure {
    /// The stored name, `cancel` or `run`: the text `FromStr` accepts.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Cancel => "cancel",
            Self::Run => "run",
        }
    }
}

impl std::str::FromStr for DependencyFailure {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cancel" => Ok(Self::Cancel),
            "run" => Ok(Self::Run),
            other => Err(format!("{other:?} is neither \"cancel\" nor \"run\"")),
        }
    }
}

/// The lease a LEASED job is held under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// This lease's fencing token, larger than every earlier lease's on
    /// the job.
    pub token: LeaseToken,
    /// The lease is valid strictly before this instant; from it on, the
    /// job may be expired and leased again.
    pub expires_at: Timestamp,
    /// The id of the worker that took the lease.
    pub worker: String,
}

/// The part of a job that transitions change. Stores load only this for
/// ack/nack/extend/release, never the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobStatus {
    /// Where the job is in its life.
    pub state: JobState,
    /// Attempts started so far (a lease starts one; a release or snooze
    /// gives it back; a retry resets it to 0).
    pub attempts: u32,
    /// The attempt budget: a failure or lease expiry once `attempts` has
    /// reached it makes the job DEAD instead of READY.
    pub max_attempts: u32,
    /// Not leased before this instant.
    pub ready_at: Timestamp,
    /// When the job reached SUCCEEDED, DEAD or CANCELLED.
    pub finished_at: Option<Timestamp>,
    /// The token of the job's latest lease (0: never leased). Kept after
    /// the lease ends so the next lease's token is larger.
    pub last_token: LeaseToken,
    /// Present exactly when `state` is LEASED.
    pub lease: Option<Lease>,
    /// The error text of the latest failed attempt.
    pub last_error: Option<String>,
    /// How many of the jobs this one depends on have not finished yet;
    /// above zero exactly when `state` is WAITING.
    pub waiting_on: u32,
}

impl JobStatus {
    /// A freshly submitted job.
    pub fn new_ready(ready_at: Timestamp, max_attempts: u32) -> Self {
        Self {
            state: JobState::Ready,
            attempts: 0,
            max_attempts,
            ready_at,
            finished_at: None,
            last_token: LeaseToken(0),
            lease: None,
            last_error: None,
            waiting_on: 0,
        }
    }

    /// A job submitted at `now` that waits for `waiting_on` other jobs;
    /// when that is zero, READY, or SCHEDULED if `ready_at` is later than
    /// `now`.
    pub fn new_waiting(ready_at: Timestamp, now: Timestamp, max_attempts: u32, waiting_on: u32) -> Self {
        let mut s = Self::new_ready(ready_at, max_attempts);
        if waiting_on > 0 {
            s.state = JobState::Waiting;
            s.waiting_on = waiting_on;
        } else {
            s.state = JobState::pending(ready_at, now, false);
        }
        s
    }

    /// Never leased yet: WAITING, READY or SCHEDULED with no lease ever
    /// issued (a job released or snoozed after a lease has started; one
    /// cancelled before any lease and then retried has not).
    pub fn not_started(&self) -> bool {
        (self.state == JobState::Waiting || self.state.is_pending()) && self.last_token == LeaseToken(0)
    }

    /// The lease's token when LEASED and not yet expired at `now`.
    pub fn valid_token(&self, now: Timestamp) -> Option<LeaseToken> {
        match (&self.state, &self.lease) {
            (JobState::Leased, Some(l)) if now < l.expires_at => Some(l.token),
            _ => None,
        }
    }
}

/// A whole job, as read back from a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The job's identity.
    pub id: JobId,
    /// The queue the job was submitted to; workers lease by queue.
    pub queue: String,
    /// What the job is, which tells a worker how to run it.
    pub kind: String,
    /// Opaque bytes; JSON by convention.
    pub payload: Vec<u8>,
    /// The class given at submit; aging raises the effective class at
    /// lease time without changing this.
    pub priority: Priority,
    /// When the job was submitted.
    pub created_at: Timestamp,
    /// A key no other unfinished (not SUCCEEDED, DEAD or CANCELLED) job holds at
    /// the same time: a submit with it returns this job's id and creates
    /// nothing.
    pub unique_key: Option<String>,
    /// The group (a tenant, a customer) the job belongs to: a queue's
    /// claims take groups in turn, and `max_leased_per_group` bounds how
    /// many of one group are LEASED at once.
    pub group: Option<String>,
    /// What the worker's ack reported, if anything.
    pub result: Option<Vec<u8>>,
    /// How long each lease of this job lasts, when the job says so (else
    /// the lease request's `lease_for`).
    pub lease_for: Option<std::time::Duration>,
    /// How long a worker lets one attempt run before it gives up on it,
    /// when the job says so (the worker runtime's per-kind timeout
    /// otherwise).
    pub timeout: Option<std::time::Duration>,
    /// The W3C trace context of whatever submitted the job (a
    /// `traceparent` header value), handed to each worker that runs it so
    /// the trace goes on through its execution.
    pub traceparent: Option<String>,
    /// Short labels given at submit, for search (at most 8).
    pub tags: Vec<String>,
    /// What a handler last reported of its run, kept on the job.
    pub progress: Option<Progress>,
    /// The steps its handlers have recorded, in the order they were
    /// recorded: a new attempt returns a recorded step's output without
    /// running it again (see [`Step`]).
    pub steps: Vec<Step>,
    /// The part transitions change: state, attempts, lease and so on.
    pub status: JobStatus,
}

/// What a job's handler last reported of its run (BullMQ's
/// `updateProgress`): how far along it is, and what it is doing.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Progress {
    /// From 0 (started) to 1 (done); finite, once validated.
    pub fraction: f64,
    /// What the handler is doing, if it said (at most 1,024 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When it was reported.
    pub at: Timestamp,
    /// The attempt that reported it. It stays until a later report
    /// replaces it.
    pub attempt: u32,
    /// The token of the lease that reported it: a view of the job's
    /// current run shows it only while that lease is the job's last
    /// ([`Progress::is_current`]; a release or snooze gives the attempt
    /// back, so the attempt alone does not tell runs apart).
    #[serde(default)]
    pub token: i64,
}

// The fraction is finite (validated at the call, strictly decoded from a
// store), so equality is total.
impl Eq for Progress {}

/// Longest progress message, in characters.
pub const MAX_PROGRESS_MESSAGE: usize = 1024;

impl Progress {
    /// Whether this report is of the job's latest lease (its
    /// `last_token`), not left over from an earlier run.
    pub fn is_current(&self, status: &JobStatus) -> bool {
        self.token == status.last_token.0
    }

    /// The reason a reported fraction and message are refused, if they are.
    pub fn check(fraction: f64, message: Option<&str>) -> Result<(), crate::InvalidInput> {
        if !(0.0..=1.0).contains(&fraction) {
            return Err(crate::InvalidInput::new(
                "fraction",
                format!("must be from 0 to 1 (0.25 for a quarter), got {fraction}"),
            ));
        }
        if let Some(m) = message {
            let n = m.chars().count();
            if n > MAX_PROGRESS_MESSAGE {
                return Err(crate::InvalidInput::new(
                    "message",
                    format!("at most {MAX_PROGRESS_MESSAGE} characters, got {n}"),
                ));
            }
        }
        Ok(())
    }
}

/// A step of a job's handler whose output is recorded: a later attempt of
/// the job (after a crash, a nack, an expired lease, a retry) returns
/// `output` for `name` without running the step again. Recorded only
/// under the job's current lease; the first record of a name stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The handler's name for it, unique in the job (at most
    /// [`MAX_STEP_NAME`] characters).
    pub name: String,
    /// The attempt that recorded it.
    pub attempt: u32,
    /// When it was recorded.
    pub at: Timestamp,
    /// What the step returned: bytes, JSON by convention.
    pub output: Vec<u8>,
}

/// The longest sleep a handler may ask for (`JobContext::sleep`).
pub const MAX_SLEEP: std::time::Duration = std::time::Duration::from_secs(10 * 366 * 86_400);

/// Longest event key (`emit`, `JobContext::wait_event`), in characters:
/// ASCII letters, digits and `_ . - : / @ + =` (`shipped:4242`,
/// `stripe/evt_1Nx`, `ada@example.com:verified`).
pub const MAX_EVENT_KEY: usize = 256;
/// Largest event payload, in bytes: an event is a signal (an id, a
/// status), not a store of data; each waiter records it among its steps.
pub const MAX_EVENT_PAYLOAD: usize = 64 * 1024;
/// How long an emitted event is kept: a wait that begins within this long
/// after the emit returns its payload at once.
pub const EVENT_KEEP: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// How a joined job ended, as the join's step records it: `{"joined": id,
/// "state": "SUCCEEDED", "result": <JSON>}` (or `"result_base64"`), `{...,
/// "state": "DEAD", "error": "..."}`, or `"state": "DELETED"` for a job
/// deleted before it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// The job joined.
    pub job: JobId,
    /// How it ended; `None`: deleted before it ended.
    pub state: Option<JobState>,
    /// Its result (SUCCEEDED), if any.
    pub result: Option<Vec<u8>>,
    /// Its last error (DEAD, or CANCELLED after a failure), if any.
    pub error: Option<String>,
}

impl Joined {
    /// The step output that records it.
    pub fn output(&self) -> Vec<u8> {
        use base64::Engine as _;
        let mut v = serde_json::json!({
            "joined": self.job.0,
            "state": self.state.map_or("DELETED", JobState::as_str),
        });
        if let Some(r) = self.result.as_deref().filter(|r| !r.is_empty()) {
            match serde_json::from_slice::<serde_json::Value>(r) {
                Ok(value) => v["result"] = value,
                Err(_) => v["result_base64"] = base64::engine::general_purpose::STANDARD.encode(r).into(),
            }
        }
        if let Some(e) = &self.error {
            v["error"] = e.clone().into();
        }
        v.to_string().into_bytes()
    }

    /// A join's record read back ([`Joined::output`]); `None` when the step
    /// is not a join's.
    pub fn of(output: &[u8]) -> Option<Self> {
        use base64::Engine as _;
        let v: serde_json::Value = serde_json::from_slice(output).ok()?;
        let job = JobId(v.get("joined")?.as_i64()?);
        let state = match v.get("state")?.as_str()? {
            "DELETED" => None,
            s => Some(JobState::parse(s)?),
        };
        let result = match (v.get("result"), v.get("result_base64")) {
            (Some(r), None) => Some(r.to_string().into_bytes()),
            (None, Some(b)) => Some(base64::engine::general_purpose::STANDARD.decode(b.as_str()?).ok()?),
            _ => None,
        };
        let error = v.get("error").and_then(|e| e.as_str()).map(str::to_owned);
        Some(Self {
            job,
            state,
            result,
            error,
        })
    }
}

/// What a wait for an event ended with, as its step records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    /// The event was emitted: its payload.
    Event(Vec<u8>),
    /// The wait's time ran out first.
    TimedOut,
}

impl Waited {
    /// The step output that records it: `{"event": <payload>}` when the
    /// payload is JSON, `{"event_base64": "..."}` when it is not,
    /// `{"timed_out": true}`.
    pub fn output(&self) -> Vec<u8> {
        use base64::Engine as _;
        match self {
            Self::TimedOut => br#"{"timed_out":true}"#.to_vec(),
            Self::Event(p) if p.is_empty() => br#"{"event":null}"#.to_vec(),
            Self::Event(p) => match serde_json::from_slice::<&serde_json::value::RawValue>(p) {
                Ok(raw) => format!(r#"{{"event":{}}}"#, raw.get()).into_bytes(),
                Err(_) => format!(
                    r#"{{"event_base64":"{}"}}"#,
                    base64::engine::general_purpose::STANDARD.encode(p)
                )
                .into_bytes(),
            },
        }
    }

    /// A wait's record read back ([`Waited::output`]); `None` when the step
    /// is not a wait's.
    pub fn of(output: &[u8]) -> Option<Self> {
        use base64::Engine as _;
        use serde_json::value::RawValue;
        // Raw values, so that the payload's JSON comes back as recorded
        // (and a null payload as null).
        let record: std::collections::BTreeMap<&str, &RawValue> = serde_json::from_slice(output).ok()?;
        let mut fields = record.iter();
        let (&name, value) = fields.next()?;
        if fields.next().is_some() {
            return None;
        }
        match name {
            "event" if value.get() == "null" => Some(Self::Event(Vec::new())),
            "event" => Some(Self::Event(value.get().as_bytes().to_vec())),
            "event_base64" => {
                let b: String = serde_json::from_str(value.get()).ok()?;
                base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .ok()
                    .map(Self::Event)
            }
            "timed_out" if value.get() == "true" => Some(Self::TimedOut),
            _ => None,
        }
    }

    /// The reason an event key is refused, if it is ([`MAX_EVENT_KEY`]).
    pub fn check_key(key: &str) -> Result<(), crate::InvalidInput> {
        let n = key.chars().count();
        if n == 0 || n > MAX_EVENT_KEY {
            return Err(crate::InvalidInput::new(
                "key",
                format!("an event key is 1 to {MAX_EVENT_KEY} characters, got {n}"),
            ));
        }
        if let Some(c) = key
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "_.-:/@+=".contains(*c)))
        {
            return Err(crate::InvalidInput::new(
                "key",
                format!("an event key holds ASCII letters, digits and _ . - : / @ + = only, got {c:?} in {key:?}"),
            ));
        }
        Ok(())
    }

    /// The reason an event payload is refused, if it is.
    pub fn check_payload(payload: &[u8]) -> Result<(), crate::InvalidInput> {
        if payload.len() > MAX_EVENT_PAYLOAD {
            return Err(crate::InvalidInput::new(
                "payload",
                format!(
                    "an event's payload is at most {MAX_EVENT_PAYLOAD} bytes, got {} (emit an id, keep the data in your own storage)",
                    payload.len()
                ),
            ));
        }
        Ok(())
    }
}

/// Most steps one job may record.
pub const MAX_STEPS: usize = 1000;
/// Most bytes of output one job's steps may record, all together.
pub const MAX_STEP_BYTES: usize = 1 << 20;
/// Longest step name, in characters.
pub const MAX_STEP_NAME: usize = 256;

impl Step {
    /// The output a sleep's step records: when the job wakes, as
    /// milliseconds and as RFC 3339 text (`{"sleep_until_ms": ...,
    /// "sleep_until": "..."}`), so that a run after it passes the sleep by
    /// and one before it sleeps until the same time.
    pub fn sleep_output(until: Timestamp) -> Vec<u8> {
        format!(
            r#"{{"sleep_until_ms":{},"sleep_until":"{}"}}"#,
            until.as_millis(),
            until.to_rfc3339()
        )
        .into_bytes()
    }

    /// When a sleep's step wakes its job ([`Step::sleep_output`]); `None`
    /// when the step is not a sleep's.
    pub fn sleep_until(&self) -> Option<Timestamp> {
        #[derive(serde::Deserialize)]
        struct Sleep {
            sleep_until_ms: i64,
        }
        serde_json::from_slice::<Sleep>(&self.output)
            .ok()
            .map(|s| Timestamp::from_millis(s.sleep_until_ms))
    }

    /// The reason a step name is refused, if it is: empty, too long, or
    /// holding control characters.
    pub fn check_name(name: &str) -> Result<(), crate::InvalidInput> {
        let n = name.chars().count();
        if n == 0 || n > MAX_STEP_NAME {
            return Err(crate::InvalidInput::new(
                "step",
                format!("a step name is 1 to {MAX_STEP_NAME} characters, got {n}"),
            ));
        }
        if name.chars().any(char::is_control) {
            return Err(crate::InvalidInput::new(
                "step",
                format!("a step name holds no control characters, got {name:?}"),
            ));
        }
        Ok(())
    }

    /// The reason an output is refused before anything is read, if it is:
    /// alone larger than every step of a job may hold.
    pub fn check_output(output: &[u8]) -> Result<(), crate::InvalidInput> {
        if output.len() > MAX_STEP_BYTES {
            return Err(crate::InvalidInput::new(
                "output",
                format!(
                    "a step's output is at most {MAX_STEP_BYTES} bytes (all of a job's steps together), got {}",
                    output.len()
                ),
            ));
        }
        Ok(())
    }
}

impl Job {
    /// The job's recorded step called `name`, if any.
    pub fn step(&self, name: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.name == name)
    }

    /// Bytes of output this job's steps hold.
    pub fn step_bytes(&self) -> usize {
        self.steps.iter().map(|s| s.output.len()).sum()
    }

    /// The job's state, `self.status.state`.
    pub fn state(&self) -> JobState {
        self.status.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_round_trip_and_unknown_is_none() {
        for s in JobState::ALL {
            assert_eq!(JobState::parse(s.as_str()), Some(s));
        }
        assert_eq!(JobState::parse("ready"), None);
        assert_eq!(JobState::parse("RUNNING"), None);
    }

    #[test]
    fn priority_bounds() {
        assert_eq!(Priority::new(3).map(Priority::get), Some(3));
        assert!(Priority::new(4).is_none());
        assert!(Priority::try_from(9u8).is_err());
        assert_eq!(Priority::default(), Priority::NORMAL);
    }

    #[test]
    fn valid_token_requires_leased_and_unexpired() {
        let mut s = JobStatus::new_ready(Timestamp::from_millis(0), 3);
        assert_eq!(s.valid_token(Timestamp::from_millis(1)), None);
        s.state = JobState::Leased;
        s.lease = Some(Lease {
            token: LeaseToken(4),
            expires_at: Timestamp::from_millis(10),
            worker: "w".into(),
        });
        assert_eq!(s.valid_token(Timestamp::from_millis(9)), Some(LeaseToken(4)));
        assert_eq!(s.valid_token(Timestamp::from_millis(10)), None);
    }
}
