//! The calls that read (and the bulk actions, which read in pages and
//! write as they go).

use crate::engine::reads::{Stats, StatsPage};
use crate::error::Result;
use crate::{AsyncRelay, Relay};
use relay_core::read::{DeadGroup, Event, JobFilter, QueueTotals, Throughput};
use relay_core::{Job, JobId, Schedule, Timestamp};

// Named by the calls' docs.
#[cfg(doc)]
use crate::{Error, Options};

facade! {
    /// The event and token keys WAITING jobs wait for now (their waits
    /// not ended), in the store's order of keys after `after` (`None`:
    /// from the first), at most `limit` (1-1000): each with its number of
    /// waiters, the first of them and the soonest time one gives up. What
    /// the dashboard's Events page lists.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a `limit` out of range; otherwise as
    /// every read.
    read fn awaited_keys(after: Option<&str>, limit: u32) -> Result<Vec<crate::AwaitedKey>> = |e| e.awaited_keys(after, limit);

    /// The stats of the `limit` queues with the most READY jobs; when
    /// fewer have any, then of the first others by name (so with `limit`
    /// queues or fewer, every queue). What `/metrics` labels.
    ///
    /// # Errors
    ///
    /// As [`Relay::stats`].
    read fn busiest_queues(limit: u32) -> Result<Stats> = |e| e.busiest_queues(limit);

    /// [`Relay::retry_matching`] for cancel: every unfinished (WAITING, READY, SCHEDULED, RETRYING or LEASED)
    /// job `filter` matches is CANCELLED (a worker holding one loses its
    /// lease).
    ///
    /// # Errors
    ///
    /// As [`Relay::retry_matching`].
    read fn cancel_matching(filter: &JobFilter) -> Result<u64> = |e| e.bulk(filter, crate::engine::search::Bulk::Cancel);

    /// DEAD jobs grouped by queue, kind and the first line of their error,
    /// the largest groups first, at most `limit` (1-1000) groups. Made of
    /// the newest [`DEAD_GROUP_WINDOW`](crate::DEAD_GROUP_WINDOW) DEAD jobs
    /// (a bounded read however many there are; a group's count is of
    /// those, and `stats` counts them all). To retry
    /// a group, filter on its queue and kind, `state: Dead`, and
    /// `error_contains` its error (a substring match: an error whose first
    /// line merely contains it is retried too; an empty error, or one past
    /// 256 characters, cannot be named this way).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: `limit` is outside 1-1000.
    /// - [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    ///   [`Relay`]).
    read fn dead_groups(limit: u32) -> Result<Vec<DeadGroup>> = |e| { crate::engine::search::check_limit(limit)?; e.readers.with(|r| r.job_dead_groups(limit)) };

    /// [`Relay::retry_matching`] for delete: every job `filter` matches that
    /// is not LEASED is deleted, with its events.
    ///
    /// # Errors
    ///
    /// As [`Relay::retry_matching`].
    read fn delete_matching(filter: &JobFilter) -> Result<u64> = |e| e.bulk(filter, crate::engine::search::Bulk::Delete);

    /// The job's event log, oldest first.
    ///
    /// # Errors
    ///
    /// - [`Error::NotFound`]: no job has this id.
    /// - [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    ///   [`Relay`]).
    read fn events(id: JobId) -> Result<Vec<Event>> = |e| e.events(id);

    /// A page of the job's event log, oldest first: the events after
    /// `seq` `after` (0: from the first), at most `limit` (1-1000) and at
    /// most [`EVENT_PAGE_BYTES`](crate::EVENT_PAGE_BYTES) of them (at
    /// least one); `next` is the next page's `after`.
    ///
    /// # Errors
    ///
    /// - [`Error::NotFound`]: no job has this id.
    /// - [`Error::InvalidInput`]: `limit` outside 1-1000.
    /// - [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    ///   [`Relay`]).
    read fn events_page(id: JobId, after: i64, limit: u32) -> Result<crate::EventPage> = |e| e.events_page(id, after, limit);

    /// The job with this id, as last committed.
    ///
    /// # Errors
    ///
    /// - [`Error::NotFound`]: no job has this id.
    /// - [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    ///   [`Relay`]).
    read fn get(id: JobId) -> Result<Job> = |e| e.get(id);

    /// What job `id` waits for while it is WAITING (`None` otherwise):
    /// jobs it depends on, a job it joined, an event or a completion token
    /// until a time, or a sleep's end.
    ///
    /// # Errors
    ///
    /// As [`Relay::get`].
    read fn waiting_for(id: JobId) -> Result<Option<crate::WaitingFor>> = |e| e.waiting_for(id);

    /// Jobs matching `filter`, newest first, `filter.limit` of them; the
    /// next page is `before` the last one's id. A `since` at or after `until`
    /// is an empty range: it matches nothing.
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidInput`]: the filter breaks a limit (a bad queue
    ///   name, kind or tag, an `error_contains` that is empty or too long, a
    ///   `limit` of 0).
    /// - [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    ///   [`Relay`]).
    read fn list(filter: &JobFilter) -> Result<Vec<Job>> = |e| { crate::engine::search::check_filter(filter)?; e.readers.with(|r| r.job_list(filter)) };

    /// [`Relay::list`], a page bounded in bytes as well as in count: at
    /// most `filter.limit` jobs and about `max_bytes` of them (their
    /// payloads, results and errors; at least one job), read a few at a
    /// time, so that a page of large jobs costs its bytes and no more
    /// (the HTTP API answers pages of at most
    /// [`LIST_PAGE_BYTES`](crate::LIST_PAGE_BYTES)). `next` is the next
    /// page's `before`; none when no more follow.
    ///
    /// # Errors
    ///
    /// As [`Relay::list`].
    read fn list_page(filter: &JobFilter, max_bytes: usize) -> Result<crate::JobPage> = |e| e.list_page(filter, max_bytes);

    /// The value kept under `key` ([`Relay::put_mark`]), unless there is
    /// none or it has expired.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    /// [`Relay`]).
    read fn mark(key: &str) -> Result<Option<String>> = |e| { let now = e.options.clock.now(); e.readers.with(|r| r.mark_get(key, now)) };

    /// The completion tokens neither completed nor expired, the latest
    /// deadline first, at most `limit` (1-1000): each token's id, job and
    /// deadline (never its secret, which only its holder has).
    ///
    /// # Errors
    ///
    /// As [`Relay::awaited_keys`].
    read fn open_tokens(limit: u32) -> Result<Vec<crate::OpenToken>> = |e| e.open_tokens(limit);

    /// One queue's counts by state, the age of its oldest due job, and its
    /// pause state and limits (every count zero for a queue nothing has
    /// used).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a name that is not a queue's; else as
    /// [`Relay::stats`].
    read fn queue_stats(queue: &str) -> Result<crate::QueueStats> = |e| e.queue_stats(queue);

    /// Counts over every queue at once: jobs per state, queues, paused
    /// queues (a handful of numbers, however many queues there are).
    ///
    /// # Errors
    ///
    /// As [`Relay::stats`].
    read fn queue_totals() -> Result<QueueTotals> = |e| e.queue_totals();

    /// The latest events emitted and kept (a week after their emit: see
    /// [`Relay::emit`]), newest first, at most `limit` (1-1000): each
    /// event's key, until when it is kept, and its payload's first
    /// [`crate::EVENT_PREVIEW`] characters.
    ///
    /// # Errors
    ///
    /// As [`Relay::awaited_keys`].
    read fn recent_events(limit: u32) -> Result<Vec<crate::RecentEvent>> = |e| e.recent_events(limit);

    /// Retries every job `filter` matches that can be retried (DEAD or
    /// CANCELLED; the rest, and those whose unique key is taken, are passed
    /// over), [`BULK_CHUNK`](crate::BULK_CHUNK) jobs per transaction so that
    /// other callers go on meanwhile; returns how many it retried. The
    /// filter's `limit` does not apply (every match is taken); its `before`
    /// says where to start.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad filter (see [`Relay::list`]; nothing
    /// done). Any other error ([`Error::Busy`], [`Error::Storage`],
    /// [`Error::MaybeApplied`], [`Error::Closed`]) stops the work where it
    /// is: the chunks before it are done, the chunk it met is as the variant
    /// says (after [`Error::MaybeApplied`], applied or not), and the rest is
    /// untouched. A job that cannot be changed (its state, a taken unique
    /// key, a corrupt row) is passed over, not an error.
    read fn retry_matching(filter: &JobFilter) -> Result<u64> = |e| e.bulk(filter, crate::engine::search::Bulk::Retry);

    /// Every schedule, by name, with its next and latest tick.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    /// [`Relay`]).
    read fn schedules() -> Result<Vec<Schedule>> = |e| e.readers.with(|r| r.schedules());

    /// How many jobs each queue has in each state, the age of its oldest
    /// ready job, and whether it is paused or limited.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    /// [`Relay`]).
    read fn stats() -> Result<Stats> = |e| e.stats();

    /// [`Relay::stats`] a page at a time, bounded however many queues
    /// there are: the queues named after `after` (byte order; `None` from
    /// the first), at most `limit`, and the next page's `after`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a `limit` of 0; else as [`Relay::stats`].
    read fn stats_page(after: Option<&str>, limit: u32) -> Result<StatsPage> = |e| e.stats_page(after, limit);

    /// Jobs submitted, succeeded, failed (attempts) and dead per queue and
    /// minute, from the minute of `since` on, oldest first: the history
    /// the dashboard charts. Kept by the store with each batch (so it
    /// counts every process on the store, and survives restarts) for two
    /// days.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    /// [`Relay`]).
    read fn throughput(since: Timestamp) -> Result<Vec<Throughput>> = |e| e.readers.with(|r| r.throughput(since));

    /// [`Relay::throughput`] of one queue (`Some`), or of every queue
    /// summed (`None`: a row a minute, its queue empty), however many
    /// queues there are.
    ///
    /// # Errors
    ///
    /// As [`Relay::throughput`].
    read fn throughput_of(since: Timestamp, queue: Option<&str>) -> Result<Vec<Throughput>> = |e| e.readers.with(|r| r.throughput_of(since, queue));

    /// Every worker the store knows (alive, gone or stopped in the last
    /// hour), by id, with the jobs it runs and, for a gone one, the leases
    /// it left orphaned.
    ///
    /// # Errors
    ///
    /// [`Error::Corrupt`] and [`Error::Storage`], as for every read (see
    /// [`Relay`]).
    read fn workers() -> Result<Vec<crate::WorkerView>> = |e| e.workers();

    /// A page of [`Relay::workers`]: those after id `after` (`None`: from
    /// the first), at most `limit` (1-1000) and about
    /// [`WORKER_PAGE_BYTES`](crate::WORKER_PAGE_BYTES) of them (at least
    /// one); `next` is the next page's `after`. A page may hold fewer than
    /// `limit` with more to follow (workers forgotten after an hour are
    /// left out).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a `limit` outside 1-1000; else as
    /// [`Relay::workers`].
    read fn workers_page(after: Option<&str>, limit: u32) -> Result<crate::WorkerPage> = |e| e.workers_page(after, limit);
}
