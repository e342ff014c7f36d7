//! How a Relay instance behaves: limits, scheduling, retries, batching.

use relay_core::{Clock, InvalidInput, Limits, Retention, RetryPolicy, SystemClock};
use std::sync::Arc;
use std::time::Duration;

/// Settings of one Relay instance. `Options::default()` is what
/// `Relay::open` uses.
#[derive(Debug, Clone)]
pub struct Options {
    /// Largest payload (and result, and event data) accepted, in bytes.
    pub limits: Limits,
    /// A waiting job gains one priority class per interval (zero: no aging).
    pub aging_interval: Duration,
    /// Back-off after a failed attempt when the nack names no delay.
    pub retry: RetryPolicy,
    /// Attempts a job gets unless its submit says otherwise.
    pub default_max_attempts: u32,
    /// A job whose lease expires this many times (since it was submitted
    /// or last retried) is DEAD, whatever attempts it has left, with the
    /// reason "its lease expired N times: it may be crashing its worker":
    /// a poison pill, whose handler crashes or hangs its worker instead
    /// of failing, is not run again and again. 0: expiries only count as
    /// failed attempts.
    pub poison_after: u32,
    /// Largest number of operations committed together. Callers beyond it
    /// wait for the next commit.
    pub max_batch: usize,
    /// Operations that may wait for the writer before callers block in
    /// `send` (the back-pressure point).
    pub queue_capacity: usize,
    /// How often an idle writer reclaims expired leases.
    pub reap_interval: Duration,
    /// How long finished jobs are kept, by final state (SUCCEEDED, DEAD,
    /// CANCELLED), in queues without a retention of their own for that
    /// state ([`Relay::set_retention`](crate::Relay::set_retention)): each
    /// is deleted with its events this long after it finished. A state left
    /// `None` keeps 7 days; [`Keep::Forever`](crate::Keep::Forever) never
    /// deletes. Keeps the jobs table (and its indexes) small.
    pub retention: Retention,
    /// Deletes finished jobs past their retention by itself: a pass over a
    /// window of 5,000 jobs every 10 s, every second while partway through
    /// the table. `false`: only [`Relay::prune`](crate::Relay::prune)
    /// does (a short-lived process that should not prune by its own
    /// defaults, as the CLI's one-shot commands).
    pub prune: bool,
    /// How long an idempotency key is kept after its submit
    /// ([`NewJob::idempotency_key`](crate::NewJob::idempotency_key)): a
    /// submit that carries it again within this time returns the first
    /// submit's job and creates nothing.
    pub idempotency_keep: Duration,
    /// Longest a waiting `lease` sleeps before looking again. Submits in the
    /// same process wake it at once; this bounds how late it sees jobs
    /// submitted by other processes on the same file.
    pub poll_interval: Duration,
    /// SQLite files: how often a thread of this Relay looks whether
    /// another connection committed new jobs (another process, or a
    /// caller's own transaction with `Relay::submit_in`), and wakes waiting
    /// lessees if so. A read of a few microseconds on a connection of its
    /// own (`PRAGMA data_version`, then the last id only when that moved). PostgreSQL is told instead
    /// (LISTEN/NOTIFY). Other changes by other processes (a job released,
    /// retried or unblocked there) are seen within `poll_interval`.
    pub watch_interval: Duration,
    /// How long to wait for another process's write lock.
    pub busy_timeout: Duration,
    /// SQLite files: split each commit into its write and its fsync, so the
    /// writer applies the next batch while the disk flushes this one
    /// (ARCHITECTURE.md, "Split commit"). Nobody is answered before the
    /// fsync that covers their change, and this process's reads wait for
    /// it too; another process reading the same file may see a change up to
    /// one fsync before it is durable. `false`: `synchronous=FULL`, each
    /// commit waits for its own fsync (slower under load).
    pub split_commit: bool,
    /// Runs the schedules of periodic jobs (checked about once a second,
    /// at most every `reap_interval` when idle). Every process on a store
    /// may run them: each tick enqueues one job whichever takes it.
    /// `false`: this process enqueues nothing by itself
    /// (`Relay::run_schedules` still does).
    pub scheduler: bool,
    /// Where time comes from (tests inject a `ManualClock`).
    pub clock: Arc<dyn Clock>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            aging_interval: Duration::from_secs(60),
            retry: RetryPolicy::default(),
            default_max_attempts: 20,
            poison_after: 3,
            max_batch: 1024,
            queue_capacity: 8192,
            reap_interval: Duration::from_secs(1),
            retention: Retention::all(relay_core::queue::DEFAULT_KEEP),
            prune: true,
            idempotency_keep: Duration::from_secs(24 * 3600),
            poll_interval: Duration::from_millis(250),
            watch_interval: Duration::from_millis(10),
            busy_timeout: Duration::from_secs(10),
            split_commit: true,
            scheduler: true,
            clock: Arc::new(SystemClock),
        }
    }
}

impl Options {
    pub(crate) fn validate(&self) -> Result<(), InvalidInput> {
        Limits::default().max_attempts(self.default_max_attempts)?;
        self.retention.validate()?;
        if self.max_batch == 0 || self.queue_capacity == 0 {
            return Err(InvalidInput::new(
                "options",
                "max_batch and queue_capacity must be at least 1",
            ));
        }
        if self.reap_interval.is_zero() || self.poll_interval.is_zero() || self.watch_interval.is_zero() {
            return Err(InvalidInput::new(
                "options",
                "reap_interval, poll_interval and watch_interval must be more than zero",
            ));
        }
        if !(0.0..=1.0).contains(&self.retry.jitter) || self.retry.base > self.retry.cap {
            return Err(InvalidInput::new(
                "retry",
                "jitter must be in 0..=1 and base at most cap",
            ));
        }
        Ok(())
    }
}
