//! Counters the writer keeps, read without locks.

use relay_core::{JobId, LeaseToken, Timestamp};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// The last batch failed as a whole (`failure` says how).
    failing: AtomicBool,
    failure: Mutex<Option<WriteFailure>>,
    commits: AtomicU64,
    operations: AtomicU64,
    failed_commits: AtomicU64,
    largest_batch: AtomicU64,
    syncs: AtomicU64,
    caller_batches: AtomicU64,
    skipped_ticks: AtomicU64,
    leases_expired: AtomicU64,
    leases_lost: AtomicU64,
    /// How long leased jobs waited, by queue and kind.
    waits: Mutex<BTreeMap<(String, String), Waits>>,
    /// The leases this Relay handed out and has not seen end: what a run
    /// time is measured from.
    held: Mutex<HashMap<(JobId, LeaseToken), Held>>,
    /// How long leases ran until their outcome, by queue and kind.
    runs: Mutex<BTreeMap<(String, String), Waits>>,
    /// Ends of attempts by queue, kind and outcome.
    outcomes: Mutex<BTreeMap<(String, String, Outcome), u64>>,
}

/// A lease this Relay handed out: its job's queue and kind, and when.
#[derive(Debug)]
struct Held {
    queue: String,
    kind: String,
    at: Timestamp,
}

/// Leases handed out longer ago than this are forgotten once many are
/// held (their ends were seen by another process, or never came): what
/// bounds the memory of [`Counters::held`].
const HELD_FOR: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Leases held in memory before the old ones are looked for.
const HELD_MAX: usize = 100_000;

/// How an attempt ended, as `relay_job_outcomes_total` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Acknowledged: SUCCEEDED.
    Succeeded,
    /// Nacked, with attempts left: RETRYING or READY.
    Failed,
    /// Nacked for good, or its last attempt failed or expired: DEAD.
    Dead,
    /// Its lease expired, with attempts left: READY again.
    Expired,
}

impl Outcome {
    /// The label's value: `succeeded`, `failed`, `dead`, `expired`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Dead => "dead",
            Self::Expired => "expired",
        }
    }
}

/// How many attempts of one queue and kind ended one way, since this Relay
/// was opened.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct JobOutcomes {
    /// The queue (`(other)` for leases another process handed out, or
    /// past [`WAIT_PAIRS`] pairs).
    pub queue: String,
    /// The job kind (likewise).
    pub kind: String,
    /// How they ended.
    pub outcome: Outcome,
    /// How many.
    pub count: u64,
}

/// Upper bounds of [`QueueWait`]'s buckets, in seconds: from 5 ms (a job
/// taken as it came) to an hour.
pub const WAIT_BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0,
];

/// Most (queue, kind) pairs with a wait histogram of their own; the rest
/// share one labelled `(other)` (a label set must stay bounded).
pub const WAIT_PAIRS: usize = 256;

#[derive(Debug, Default, Clone)]
struct Waits {
    buckets: [u64; WAIT_BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// A histogram of one queue and kind, since this Relay was opened: how
/// long its jobs waited between becoming ready (their `ready_at`) and
/// being leased ([`Relay::queue_waits`](crate::Relay::queue_waits)), or
/// how long their leases ran until their outcome
/// ([`Relay::job_runs`](crate::Relay::job_runs)).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueueWait {
    /// The queue (`(other)` past [`WAIT_PAIRS`] pairs).
    pub queue: String,
    /// The job kind (`(other)` past [`WAIT_PAIRS`] pairs).
    pub kind: String,
    /// Leases that waited (or ran) at most [`WAIT_BUCKETS`]`[i]` seconds
    /// (cumulative, as Prometheus counts them).
    pub buckets: [u64; WAIT_BUCKETS.len()],
    /// Leases counted.
    pub count: u64,
    /// The seconds' sum.
    pub sum: f64,
}

/// A snapshot of the writer's counters since this Relay was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Metrics {
    /// Commits that wrote something.
    pub commits: u64,
    /// Operations those commits carried.
    pub operations: u64,
    /// Commits that failed (their callers got `MaybeApplied`).
    pub failed_commits: u64,
    /// Most operations carried by one commit.
    pub largest_batch: u64,
    /// Separate fsyncs made for split commits (SQLite): one may cover
    /// several commits. 0 where each commit syncs itself (PostgreSQL, or
    /// SQLite with `split_commit` off).
    pub syncs: u64,
    /// Batches run by a blocking caller in its own thread (it found the
    /// writer idle and nothing else in flight) instead of the writer
    /// thread: see `Store::caller_may_commit`. Counted whether or not they
    /// wrote anything.
    pub caller_batches: u64,
    /// Ticks of schedules that were passed over: due while the process was
    /// down or the scheduler behind, and fired as one late job (each job's
    /// "submitted" event says how many it covered, `skipped_ticks`).
    pub skipped_ticks: u64,
    /// Leases that expired and were reclaimed (their jobs READY again, or
    /// DEAD): a worker died, hung or was too slow to extend.
    pub leases_expired: u64,
    /// Calls (acks, nacks, extends, ...; each item of a batch call)
    /// refused because their lease was lost: it expired, or a later lease
    /// took the job. Their work was not recorded. (A job cancelled or
    /// finished answers its state instead, not counted here.)
    pub leases_lost: u64,
}

/// A batch that failed as a whole: nothing of it was written (or, for a
/// failed commit, its fate is unknown).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WriteFailure {
    /// The error, as its callers were told.
    pub error: String,
    /// When the batch failed.
    pub at: Timestamp,
}

/// Whether this Relay can write: see [`Relay::health`](crate::Relay::health).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Health {
    /// The last batch that wrote something committed (or none failed yet),
    /// and no fsync has failed.
    pub ok: bool,
    /// An fsync or a commit failed in a way that stops this Relay for good:
    /// it refuses every write until it is reopened (see ARCHITECTURE.md,
    /// "After an I/O error").
    pub stopped: bool,
    /// Why the last write failed, while no write has succeeded since.
    pub failure: Option<WriteFailure>,
}

impl Counters {
    /// A batch failed as a whole: health reports it until a batch commits.
    pub(crate) fn write_failed(&self, error: String, at: Timestamp) {
        let mut f = self.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *f = Some(WriteFailure { error, at });
        self.failing.store(true, Relaxed);
    }

    pub(crate) fn failure(&self) -> Option<WriteFailure> {
        if !self.failing.load(Relaxed) {
            return None;
        }
        self.failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn committed(&self, ops: usize) {
        if self.failing.load(Relaxed) {
            let mut f = self.failure.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *f = None;
            self.failing.store(false, Relaxed);
        }
        let ops = ops as u64;
        self.commits.fetch_add(1, Relaxed);
        self.operations.fetch_add(ops, Relaxed);
        self.largest_batch.fetch_max(ops, Relaxed);
    }

    pub(crate) fn synced(&self) {
        self.syncs.fetch_add(1, Relaxed);
    }

    pub(crate) fn ran_in_caller(&self) {
        self.caller_batches.fetch_add(1, Relaxed);
    }

    pub(crate) fn ticks_skipped(&self, n: u64) {
        if n > 0 {
            self.skipped_ticks.fetch_add(n, Relaxed);
        }
    }

    /// Leases a committed batch reclaimed after they expired, and calls
    /// it refused because their lease was lost.
    pub(crate) fn leases(&self, expired: u64, lost: u64) {
        if expired > 0 {
            self.leases_expired.fetch_add(expired, Relaxed);
        }
        if lost > 0 {
            self.leases_lost.fetch_add(lost, Relaxed);
        }
    }

    /// The waits (queue, kind, seconds) of the leases a committed batch
    /// made.
    pub(crate) fn waited(&self, waits: &[(String, String, f64)]) {
        if waits.is_empty() {
            return;
        }
        let mut all = self.waits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (queue, kind, secs) in waits {
            observe(&mut all, queue, kind, *secs);
        }
    }

    /// Every (queue, kind)'s wait histogram, in name order.
    pub(crate) fn queue_waits(&self) -> Vec<QueueWait> {
        histograms(&self.waits)
    }

    /// The leases (job, token, queue, kind) a committed batch handed out
    /// at `at`: their ends are measured from then.
    pub(crate) fn leased(&self, leases: Vec<(JobId, LeaseToken, String, String)>, at: Timestamp) {
        if leases.is_empty() {
            return;
        }
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.len() >= HELD_MAX {
            let before = Timestamp::from_millis(
                at.as_millis()
                    .saturating_sub(relay_core::time::duration_millis(HELD_FOR)),
            );
            held.retain(|_, h| h.at >= before);
        }
        for (id, token, queue, kind) in leases {
            held.insert((id, token), Held { queue, kind, at });
        }
    }

    /// The leases (job, token, outcome) a committed batch ended at `at`:
    /// an outcome is counted by the queue and kind of the lease this Relay
    /// handed out, with its run time (under `(other)`, without one, when
    /// another process handed it out); a lease ended without one (given
    /// back, snoozed, cancelled) is only forgotten.
    pub(crate) fn ended(&self, ends: &[(JobId, LeaseToken, Option<Outcome>)], at: Timestamp) {
        if ends.is_empty() {
            return;
        }
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut runs = self.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut outcomes = self.outcomes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (id, token, outcome) in ends {
            let Some(outcome) = outcome else {
                // Given back or cancelled: no outcome, no run time.
                held.remove(&(*id, *token));
                continue;
            };
            let (queue, kind) = match held.remove(&(*id, *token)) {
                Some(h) => {
                    observe(&mut runs, &h.queue, &h.kind, at.since(h.at).as_secs_f64());
                    (h.queue, h.kind)
                }
                None => ("(other)".to_owned(), "(other)".to_owned()),
            };
            // Bounded as the histograms are: at most WAIT_PAIRS pairs'
            // worth of (queue, kind, outcome) series.
            let key =
                if outcomes.contains_key(&(queue.clone(), kind.clone(), *outcome)) || outcomes.len() < WAIT_PAIRS * 4 {
                    (queue, kind, *outcome)
                } else {
                    ("(other)".to_owned(), "(other)".to_owned(), *outcome)
                };
            *outcomes.entry(key).or_insert(0) += 1;
        }
    }

    /// Every (queue, kind)'s run-time histogram, in name order.
    pub(crate) fn job_runs(&self) -> Vec<QueueWait> {
        histograms(&self.runs)
    }

    /// Every (queue, kind, outcome)'s count, in name order.
    pub(crate) fn job_outcomes(&self) -> Vec<JobOutcomes> {
        let all = self.outcomes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        all.iter()
            .map(|((queue, kind, outcome), n)| JobOutcomes {
                queue: queue.clone(),
                kind: kind.clone(),
                outcome: *outcome,
                count: *n,
            })
            .collect()
    }

    pub(crate) fn commit_failed(&self) {
        self.failed_commits.fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> Metrics {
        Metrics {
            commits: self.commits.load(Relaxed),
            operations: self.operations.load(Relaxed),
            failed_commits: self.failed_commits.load(Relaxed),
            largest_batch: self.largest_batch.load(Relaxed),
            syncs: self.syncs.load(Relaxed),
            caller_batches: self.caller_batches.load(Relaxed),
            skipped_ticks: self.skipped_ticks.load(Relaxed),
            leases_expired: self.leases_expired.load(Relaxed),
            leases_lost: self.leases_lost.load(Relaxed),
        }
    }
}

/// Adds `secs` to the histogram of (queue, kind), or of `(other)` once
/// [`WAIT_PAIRS`] pairs have one.
fn observe(all: &mut BTreeMap<(String, String), Waits>, queue: &str, kind: &str, secs: f64) {
    let key = (queue.to_owned(), kind.to_owned());
    let w = if all.contains_key(&key) || all.len() < WAIT_PAIRS {
        all.entry(key).or_default()
    } else {
        all.entry(("(other)".to_owned(), "(other)".to_owned())).or_default()
    };
    for (i, b) in WAIT_BUCKETS.iter().enumerate() {
        if secs <= *b {
            w.buckets[i] += 1;
        }
    }
    w.count += 1;
    w.sum += secs;
}

fn histograms(all: &Mutex<BTreeMap<(String, String), Waits>>) -> Vec<QueueWait> {
    let all = all.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    all.iter()
        .map(|((queue, kind), w)| QueueWait {
            queue: queue.clone(),
            kind: kind.clone(),
            buckets: w.buckets,
            count: w.count,
            sum: w.sum,
        })
        .collect()
}
