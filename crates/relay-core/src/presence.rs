//! Workers as they describe themselves: each worker process (the Rust
//! runtime, `relay work`, the Python and TypeScript Workers) registers with
//! a heartbeat ([`WorkerBeat`]) and sends it again every `beat_every`, with
//! the jobs it is running. A worker whose heartbeats stopped is gone; the
//! leases it held are orphaned until they expire.

use crate::job::{JobId, LeaseToken};
use crate::time::Timestamp;
use crate::validate::{InvalidInput, Limits};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Most jobs one heartbeat lists as running.
pub const MAX_RUNNING: usize = 4096;

/// Shortest and longest time between heartbeats.
pub const BEAT_EVERY_RANGE: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(600));

/// How often the runtimes send their heartbeat unless told otherwise.
pub const DEFAULT_BEAT_EVERY: Duration = Duration::from_secs(5);

/// How long after its last heartbeat a worker's record is deleted (gone or
/// stopped).
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// A worker process, as each of its heartbeats describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerBeat {
    /// Its identity: unique to this run of the process (1-64 of A-Z a-z
    /// 0-9 _ . -: it appears in URLs), chosen by the worker; see
    /// [`worker_id`].
    pub id: String,
    /// The name it was given (many runs may share one). Its leases name
    /// its `id` as their holder: a gone worker's leases show as orphaned
    /// only when they name the record's id, which no other client can
    /// write.
    pub name: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The queues it works.
    pub queues: Vec<String>,
    /// How many jobs it runs at once.
    pub concurrency: u32,
    /// Its runtime and version, e.g. `relay-rust 0.1.0`.
    pub version: String,
    /// When it started.
    pub started_at: Timestamp,
    /// How often it sends a heartbeat.
    #[serde(with = "millis")]
    pub beat_every: Duration,
    /// The jobs it is running now.
    pub running: Vec<Running>,
}

/// A job a worker is running: its lease and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Running {
    /// The job.
    pub job: JobId,
    /// The lease it runs under.
    pub token: LeaseToken,
    /// When its handler started.
    pub since: Timestamp,
}

/// A worker as the store keeps it: its latest heartbeat, when that came,
/// and when it said it stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerRecord {
    /// Its latest heartbeat.
    pub beat: WorkerBeat,
    /// When that heartbeat was recorded.
    pub seen_at: Timestamp,
    /// When it said it stopped (its last heartbeat, with nothing running).
    pub stopped_at: Option<Timestamp>,
}

/// Whether a worker is alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkerState {
    /// Its heartbeats come.
    Alive,
    /// Its heartbeats stopped without a word: it crashed, was killed, or
    /// lost its way to the store. Its leases are orphaned until they
    /// expire.
    Gone,
    /// It said it stopped.
    Stopped,
}

impl WorkerState {
    /// Its name, in lower case.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alive => "alive",
            Self::Gone => "gone",
            Self::Stopped => "stopped",
        }
    }
}

impl WorkerRecord {
    /// Its state at `now`: gone once three heartbeats (and a second more)
    /// have not come.
    pub fn state(&self, now: Timestamp) -> WorkerState {
        if self.stopped_at.is_some() {
            return WorkerState::Stopped;
        }
        let late = self.beat.beat_every * 3 + Duration::from_secs(1);
        if now > self.seen_at.plus(late) {
            WorkerState::Gone
        } else {
            WorkerState::Alive
        }
    }
}

impl WorkerBeat {
    /// Refuses a heartbeat the store would not keep.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] naming the field: `id` not 1-64 of A-Z a-z 0-9 _ .
    /// -; `name` not a worker name;
    /// `host` or `version` over 255 characters; a queue that is not a
    /// queue name, more than 64 of them; `concurrency` 0; `beat_every`
    /// outside 100 ms-10 min; more than [`MAX_RUNNING`] running jobs.
    pub fn validate(&self, limits: &Limits) -> Result<(), InvalidInput> {
        let text = |field: &'static str, v: &str, max: usize| {
            let n = v.chars().count();
            if n > max {
                return Err(InvalidInput::new(
                    field,
                    format!("must be at most {max} characters, got {n}"),
                ));
            }
            if v.chars().any(char::is_control) {
                return Err(InvalidInput::new(field, "must not contain control characters"));
            }
            Ok(())
        };
        limits.queue(&self.id).map_err(|e| InvalidInput::new("id", e.reason))?;
        limits.label("name", &self.name)?;
        text("host", &self.host, 255)?;
        text("version", &self.version, 255)?;
        if self.queues.len() > 64 {
            return Err(InvalidInput::new(
                "queues",
                format!("at most 64, got {}", self.queues.len()),
            ));
        }
        for q in &self.queues {
            limits.queue(q).map_err(|e| InvalidInput::new("queues", e.reason))?;
        }
        if self.concurrency == 0 {
            return Err(InvalidInput::new("concurrency", "must be at least 1"));
        }
        let (lo, hi) = BEAT_EVERY_RANGE;
        if self.beat_every < lo || self.beat_every > hi {
            return Err(InvalidInput::new(
                "beat_every",
                format!(
                    "must be 100ms-10min, got {}",
                    humantime::format_duration(self.beat_every)
                ),
            ));
        }
        if self.running.len() > MAX_RUNNING {
            return Err(InvalidInput::new(
                "running",
                format!("at most {MAX_RUNNING} jobs, got {}", self.running.len()),
            ));
        }
        Ok(())
    }
}

mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// A worker id for a run of a worker named `name`: the name with any
/// character outside A-Z a-z 0-9 _ . - made `_`, cut to 48 characters, and
/// `-` with `suffix` (random, 8 hex digits) after it.
pub fn worker_id(name: &str, suffix: u32) -> String {
    let clean: String = name
        .chars()
        .take(48)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{clean}-{suffix:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat() -> WorkerBeat {
        WorkerBeat {
            id: "w-1".into(),
            name: "worker-1".into(),
            host: "h".into(),
            pid: 1,
            queues: vec!["q".into()],
            concurrency: 4,
            version: "relay-rust 0".into(),
            started_at: Timestamp::from_millis(0),
            beat_every: Duration::from_secs(5),
            running: Vec::new(),
        }
    }

    #[test]
    fn a_worker_is_gone_after_three_missed_beats() {
        let r = WorkerRecord {
            beat: beat(),
            seen_at: Timestamp::from_millis(1_000),
            stopped_at: None,
        };
        assert_eq!(r.state(Timestamp::from_millis(17_000)), WorkerState::Alive);
        assert_eq!(r.state(Timestamp::from_millis(17_001)), WorkerState::Gone);
        let stopped = WorkerRecord {
            stopped_at: Some(Timestamp::from_millis(1_000)),
            ..r
        };
        assert_eq!(stopped.state(Timestamp::from_millis(1_000)), WorkerState::Stopped);
    }

    #[test]
    fn bad_beats_are_refused_by_field() {
        let limits = Limits::default();
        assert!(beat().validate(&limits).is_ok());
        for (bad, field) in [
            (
                WorkerBeat {
                    id: String::new(),
                    ..beat()
                },
                "id",
            ),
            (
                WorkerBeat {
                    id: "a b".into(),
                    ..beat()
                },
                "id",
            ),
            (
                WorkerBeat {
                    concurrency: 0,
                    ..beat()
                },
                "concurrency",
            ),
            (
                WorkerBeat {
                    queues: vec!["a b".into()],
                    ..beat()
                },
                "queues",
            ),
            (
                WorkerBeat {
                    beat_every: Duration::from_millis(10),
                    ..beat()
                },
                "beat_every",
            ),
            (
                WorkerBeat {
                    running: vec![
                        Running {
                            job: JobId(1),
                            token: LeaseToken(1),
                            since: Timestamp::from_millis(0)
                        };
                        MAX_RUNNING + 1
                    ],
                    ..beat()
                },
                "running",
            ),
        ] {
            assert_eq!(bad.validate(&limits).map_err(|e| e.field), Err(field));
        }
    }
}
