//! Counters the writer keeps, read without locks.

use relay_core::Timestamp;
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
    waits: Mutex<std::collections::BTreeMap<(String, String), Waits>>,
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

/// How long the jobs of one queue and kind waited between becoming ready
/// (their `ready_at`) and being leased, since this Relay was opened.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueueWait {
    /// The queue (`(other)` past [`WAIT_PAIRS`] pairs).
    pub queue: String,
    /// The job kind (`(other)` past [`WAIT_PAIRS`] pairs).
    pub kind: String,
    /// Leases that waited at most [`WAIT_BUCKETS`]`[i]` seconds
    /// (cumulative, as Prometheus counts them).
    pub buckets: [u64; WAIT_BUCKETS.len()],
    /// Leases counted.
    pub count: u64,
    /// The waits' sum, in seconds.
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
            let key = (queue.clone(), kind.clone());
            let w = if all.contains_key(&key) || all.len() < WAIT_PAIRS {
                all.entry(key).or_default()
            } else {
                all.entry(("(other)".to_owned(), "(other)".to_owned())).or_default()
            };
            for (i, b) in WAIT_BUCKETS.iter().enumerate() {
                if *secs <= *b {
                    w.buckets[i] += 1;
                }
            }
            w.count += 1;
            w.sum += secs;
        }
    }

    /// Every (queue, kind)'s wait histogram, in name order.
    pub(crate) fn queue_waits(&self) -> Vec<QueueWait> {
        let all = self.waits.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
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
