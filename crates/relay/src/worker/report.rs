//! What a worker tells about its work: live counters, each job's outcome,
//! and outages (calls failing in a way that may pass), with the pauses
//! between tries. Shared by the pool (run.rs) and each job's run (job.rs).

use super::JobContext;
use crate::{Error, JobId, LeaseToken};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Live counters of a worker.
#[derive(Debug, Default)]
pub struct WorkerStats {
    /// Jobs acked.
    pub succeeded: AtomicU64,
    /// Jobs nacked and to be retried.
    pub failed: AtomicU64,
    /// Jobs nacked for good (attempts spent, permanent, or no handler).
    pub dead: AtomicU64,
    /// Jobs given back untried at shutdown.
    pub released: AtomicU64,
    /// Jobs put back for later by their handlers ([`JobError::snooze`](super::JobError::snooze)).
    pub snoozed: AtomicU64,
    /// Jobs put to sleep by their handlers ([`JobContext::sleep`](super::JobContext::sleep)).
    pub slept: AtomicU64,
    /// Jobs whose outcome was not recorded: the lease was lost (another
    /// worker may hold the job, or it finished meanwhile), or the call
    /// failed (the job runs again after its lease expires).
    pub lost: AtomicU64,
    /// Jobs running now: their handlers started, their outcomes not yet
    /// recorded.
    pub in_flight: AtomicU64,
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkerStatsSnapshot {
    /// Acked.
    pub succeeded: u64,
    /// Nacked and to be retried.
    pub failed: u64,
    /// Nacked for good (attempts spent, permanent, or no handler).
    pub dead: u64,
    /// Given back untried at shutdown.
    pub released: u64,
    /// Put back for later by their handlers ([`JobError::snooze`](super::JobError::snooze)).
    pub snoozed: u64,
    /// Put to sleep by their handlers ([`JobContext::sleep`](super::JobContext::sleep)).
    pub slept: u64,
    /// The lease was lost before the outcome could be recorded.
    pub lost: u64,
    /// Running: handler started, outcome not yet recorded.
    pub in_flight: u64,
}

impl WorkerStats {
    /// The counters now (each read on its own: not one atomic moment).
    pub fn snapshot(&self) -> WorkerStatsSnapshot {
        WorkerStatsSnapshot {
            succeeded: self.succeeded.load(Relaxed),
            failed: self.failed.load(Relaxed),
            dead: self.dead.load(Relaxed),
            released: self.released.load(Relaxed),
            snoozed: self.snoozed.load(Relaxed),
            slept: self.slept.load(Relaxed),
            lost: self.lost.load(Relaxed),
            in_flight: self.in_flight.load(Relaxed),
        }
    }
}

/// What became of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Acked.
    Succeeded,
    /// Nacked; it will run again.
    Failed {
        /// The handler's error, as recorded.
        error: String,
    },
    /// Nacked for good.
    Dead {
        /// The handler's error, as recorded.
        error: String,
    },
    /// Given back untried at shutdown: READY again at once.
    Released,
    /// Put back for later by its handler; runs again after `delay`.
    Snoozed {
        /// How long until the job may be leased again.
        delay: Duration,
    },
    /// Put to sleep by its handler: WAITING, holding no worker, until
    /// `until` (a sleep, a wait for an event), or until the job it joined
    /// ends (`None`).
    Slept {
        /// When it wakes at the latest.
        until: Option<crate::Timestamp>,
    },
    /// The lease was gone when the outcome was reported.
    Lost,
}

/// One finished job, for logs and progress displays.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The job's id.
    pub id: JobId,
    /// Its kind.
    pub kind: String,
    /// Which attempt this was (1 for the first).
    pub attempt: u32,
    /// What became of it.
    pub outcome: Outcome,
    /// From the start of its handler to its recorded outcome (zero for a
    /// job released at shutdown).
    pub took: Duration,
}

/// The callback told of each finished job.
pub(crate) type OnFinish = Arc<dyn Fn(&Finished) + Send + Sync>;

/// What [`Worker::on_outage`](super::Worker::on_outage) is told.
#[derive(Debug)]
#[non_exhaustive]
pub enum Outage<'a> {
    /// A call failed in a way that may pass (the server away, a busy
    /// store): the worker tries again with back-off. Told once per outage.
    Began(&'a Error),
    /// Calls succeed again.
    Ended,
}

/// The callback told of outages.
pub(crate) type OnOutage = Arc<dyn Fn(Outage<'_>) + Send + Sync>;

/// Longest pause between tries of a backend that does not answer.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// First pause after a failed call.
pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(250);

/// The jobs whose handlers run: each one's lease, context and start.
pub(super) type InFlight = Arc<Mutex<HashMap<JobId, (LeaseToken, JobContext, crate::Timestamp)>>>;

/// Whether calls are failing now, and whom to tell when that changes.
#[derive(Clone)]
pub(super) struct Outages {
    failing: Arc<AtomicBool>,
    tell: Option<OnOutage>,
}

impl Outages {
    pub(super) fn new(tell: Option<OnOutage>) -> Self {
        Self {
            failing: Arc::default(),
            tell,
        }
    }

    pub(super) fn failed(&self, e: &Error) {
        if !self.failing.swap(true, Relaxed) {
            match &self.tell {
                Some(f) => f(Outage::Began(e)),
                None => tracing::warn!(error = %e, "a call failed; trying again with back-off"),
            }
        }
    }

    pub(super) fn answered(&self) {
        if self.failing.swap(false, Relaxed) {
            match &self.tell {
                Some(f) => f(Outage::Ended),
                None => tracing::info!("calls succeed again"),
            }
        }
    }
}
