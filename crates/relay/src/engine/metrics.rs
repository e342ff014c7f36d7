//! Counters the writer keeps, read without locks.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub(crate) struct Counters {
    commits: AtomicU64,
    operations: AtomicU64,
    failed_commits: AtomicU64,
    largest_batch: AtomicU64,
    syncs: AtomicU64,
    caller_batches: AtomicU64,
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
}

impl Counters {
    pub(crate) fn committed(&self, ops: usize) {
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
        }
    }
}
