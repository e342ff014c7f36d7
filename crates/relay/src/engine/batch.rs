//! What an operation sees of its batch ([`BatchCtx`]), and the duties a
//! batch carries besides its callers' operations ([`Duties`]).

use crate::options::Options;
use relay_core::{JobId, RetryPolicy, Timestamp, TransitionCtx};
use std::collections::HashSet;

/// The housekeeping a batch does before its callers' operations, decided
/// once per batch (`Housekeeping::duties`) and kept when the batch is
/// planned again after a conflict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Duties {
    /// Reclaims expired leases (every claim does, and an idle writer at
    /// `reap_interval`).
    pub reap: bool,
    /// Deletes what is past keeping (finished jobs past their retention,
    /// old throughput minutes, expired marks); only with `reap`. Holds the
    /// job id the prune's window begins after (see `ops::prune_pass`).
    pub prune: Option<JobId>,
    /// Enqueues the jobs of due schedules.
    pub tick: bool,
}

impl Duties {
    /// None: an operation run inside its caller's transaction.
    pub const NONE: Self = Self {
        reap: false,
        prune: None,
        tick: false,
    };
}

/// What an operation sees of its batch.
pub(crate) struct BatchCtx<'a> {
    /// One instant for the whole batch.
    pub now: Timestamp,
    pub options: &'a Options,
    rng: &'a mut fastrand::Rng,
    /// What this batch does besides its operations.
    pub duties: Duties,
    /// Set by an operation that made a job ready to lease now.
    pub made_ready: bool,
    /// The jobs this batch ended, collected only while a caller awaits a
    /// job's end (`Relay::result`); may hold one an undone operation ended
    /// (a spurious wake-up: the caller reads its job again).
    pub ended_jobs: Option<Vec<JobId>>,
    /// Corrupt rows the reaper has already reported (once per process).
    pub corrupt_reported: &'a mut HashSet<JobId>,
    /// Ticks of schedules this batch passed over (see `ops::fire_schedules`).
    pub skipped_ticks: u64,
    /// Leases this batch reclaimed after they expired.
    pub leases_expired: u64,
    /// Operations of this batch refused because their lease was lost.
    pub leases_lost: u64,
    /// How long each job this batch leased waited: queue, kind, seconds.
    pub waits: Vec<(String, String, f64)>,
    /// The leases this batch handed out: job, token, queue, kind.
    pub leased: Vec<(JobId, relay_core::LeaseToken, String, String)>,
    /// The leases this batch ended: job, token, the attempt's outcome
    /// (none when the lease was given back, snoozed or cancelled).
    pub ended: Vec<(JobId, relay_core::LeaseToken, Option<super::metrics::Outcome>)>,
    /// This batch fired as many schedules as one batch may: more may be due.
    pub ticks_left: bool,
    /// The reap read as many overdue jobs as it reads at once: more may
    /// be waiting.
    pub reaps_left: bool,
    /// What this batch's prune did, when it pruned.
    pub pruned: Option<crate::Pruned>,
    /// What the passes its operations asked for did (`Hint::Prune`), in
    /// the batch's order, each taken by its operation.
    pub asked_prunes: std::collections::VecDeque<crate::error::Result<crate::Pruned>>,
}

impl<'a> BatchCtx<'a> {
    pub(crate) fn new(
        now: Timestamp,
        duties: Duties,
        options: &'a Options,
        rng: &'a mut fastrand::Rng,
        corrupt_reported: &'a mut HashSet<JobId>,
    ) -> Self {
        Self {
            now,
            options,
            rng,
            duties,
            made_ready: false,
            ended_jobs: None,
            corrupt_reported,
            skipped_ticks: 0,
            leases_expired: 0,
            leases_lost: 0,
            waits: Vec::new(),
            leased: Vec::new(),
            ended: Vec::new(),
            ticks_left: false,
            reaps_left: false,
            pruned: None,
            asked_prunes: std::collections::VecDeque::new(),
        }
    }

    pub(crate) fn transition_ctx(&mut self) -> TransitionCtx<'_> {
        let jitter = self.rng.f64();
        let retry: &RetryPolicy = &self.options.retry;
        TransitionCtx {
            now: self.now,
            retry,
            jitter,
        }
    }
}
