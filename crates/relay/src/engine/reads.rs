//! The engine's reads beside the writer: where the store is, how long a
//! lease that found nothing waits, and the queue lists a page at a time
//! (`Relay::stats_page`, `busiest_queues` and the rest are the API).

use super::Engine;
use crate::error::{Error, Result};
use crate::request::LeaseBatch;
use relay_core::read::Event;
use relay_core::read::QueueStats;
use relay_core::{Job, JobId, Timestamp};
use std::collections::BTreeMap;
use std::time::Instant;

/// Per-queue counts, as returned by [`Relay::stats`](crate::Relay::stats).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Stats {
    /// Every queue that has jobs, is paused or has limits, by name.
    pub queues: BTreeMap<String, QueueStats>,
}

/// A page of per-queue counts, as returned by [`Relay::stats_page`](crate::Relay::stats_page).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatsPage {
    /// The page's queues (with jobs, paused or limited), by name.
    pub queues: BTreeMap<String, QueueStats>,
    /// The next page's `after`: the page's last queue, when more follow.
    pub next: Option<String>,
}

/// A page of a job's events, as returned by
/// [`Relay::events_page`](crate::Relay::events_page).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct EventPage {
    /// The page's events, oldest first.
    pub events: Vec<Event>,
    /// The next page's `after`: the page's last event's `seq`, when more
    /// follow.
    pub next: Option<i64>,
}

/// Most bytes of events (their kinds and data as JSON) one page carries;
/// a page holds at least one event, whatever its size.
pub const EVENT_PAGE_BYTES: usize = 4 << 20;

/// Events read from the store at a time for a page: a page's memory is
/// its bytes and one such read, however large the events are.
const EVENT_READ: u32 = 100;

/// Where a Relay's store is and what an answered change survives (for
/// the dashboard and logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreInfo {
    /// A file's path, or a URL without its password.
    pub location: String,
    /// One line: the durability settings in force.
    pub durability: String,
}

impl Engine {
    pub(crate) fn store_info(&self) -> StoreInfo {
        StoreInfo {
            location: self.backend.describe(),
            durability: self.backend.durability(),
        }
    }

    /// When a lease found nothing: until when to sleep before looking again
    /// (`None`: return now).
    pub(crate) fn wait_until(&self, batch: &LeaseBatch, deadline: Instant) -> Option<Instant> {
        let now = Instant::now();
        if !batch.jobs.is_empty() || now >= deadline {
            return None;
        }
        let mut until = deadline.min(now + self.options.poll_interval);
        if let Some(t) = batch.next_ready_at {
            until = until.min(now + t.since(self.options.clock.now()));
        }
        Some(until)
    }

    pub(crate) fn get(&self, id: JobId) -> Result<Job> {
        self.readers.with(|r| r.job_get(id))?.ok_or(Error::NotFound { id })
    }

    /// What job `id` waits for, while it is WAITING (see
    /// [`crate::Relay::waiting_for`]).
    pub(crate) fn waiting_for(&self, id: JobId) -> Result<Option<crate::WaitingFor>> {
        use crate::WaitingFor as W;
        let job = self.get(id)?;
        let st = &job.status;
        if st.state != relay_core::JobState::Waiting {
            return Ok(None);
        }
        let wait = self.readers.with(|r| r.wait_of(id))?;
        Ok(Some(match wait {
            Some(w) if st.waiting_on > 0 => match w.key.strip_prefix("#join:").and_then(|j| j.parse().ok()) {
                Some(job) => W::Join {
                    job: JobId(job),
                    step: w.step,
                },
                None => W::Jobs { count: st.waiting_on },
            },
            None if st.waiting_on > 0 => W::Jobs { count: st.waiting_on },
            // A wait's row stays after it ended (a cancel, a timeout): it
            // is this one's only if its time is the job's.
            Some(w) if w.until == st.ready_at => match w.key.strip_prefix("token:") {
                Some(token) => W::Token {
                    id: token.to_owned(),
                    step: w.step,
                    until: w.until,
                },
                None => W::Event {
                    key: w.key,
                    step: w.step,
                    until: w.until,
                },
            },
            _ => W::Sleep { until: st.ready_at },
        }))
    }

    /// The latest events kept (see [`crate::Relay::recent_events`]).
    pub(crate) fn recent_events(&self, limit: u32) -> Result<Vec<crate::RecentEvent>> {
        crate::engine::search::check_limit(limit)?;
        let now = self.options.clock.now();
        // Two characters more than the preview: its mark's kind ('j' for
        // JSON, 'b' for base64) first, and one that says it goes on.
        let want = crate::EVENT_PREVIEW + 2;
        let rows = self
            .readers
            .with(|r| r.marks_page("event:", "event;", now, limit, want))?;
        Ok(rows
            .into_iter()
            .map(|m| {
                let mut value = m.value.chars();
                let json = value.next() == Some('j');
                let preview: String = value.by_ref().take(crate::EVENT_PREVIEW as usize).collect();
                crate::RecentEvent {
                    key: m.key.strip_prefix("event:").unwrap_or(&m.key).to_owned(),
                    kept_until: m.expires_at,
                    cut: value.next().is_some(),
                    preview,
                    json,
                }
            })
            .collect())
    }

    /// The completion tokens not completed yet (see
    /// [`crate::Relay::open_tokens`]).
    pub(crate) fn open_tokens(&self, limit: u32) -> Result<Vec<crate::OpenToken>> {
        crate::engine::search::check_limit(limit)?;
        // A token's mark is kept a week past its deadline: those kept
        // past a week from now have not expired.
        let now = self.options.clock.now();
        let rows = self
            .readers
            .with(|r| r.tokens_open(now.plus(relay_core::job::EVENT_KEEP), limit))?;
        Ok(rows
            .into_iter()
            .filter_map(|m| {
                let id = m.key.strip_prefix("token:")?.to_owned();
                match serde_json::from_str::<crate::engine::ops::StoredToken>(&m.value) {
                    Ok(t) => Some(crate::OpenToken {
                        id,
                        job: JobId(t.job),
                        expires_at: Timestamp::from_millis(t.until_ms),
                    }),
                    Err(e) => {
                        tracing::error!(token = id, error = %e, "a completion token's mark does not decode; it is left out");
                        None
                    }
                }
            })
            .filter(|t| t.expires_at > now)
            .collect())
    }

    /// The keys WAITING jobs wait for (see [`crate::Relay::awaited_keys`]).
    pub(crate) fn awaited_keys(&self, after: Option<&str>, limit: u32) -> Result<Vec<crate::AwaitedKey>> {
        crate::engine::search::check_limit(limit)?;
        self.readers.with(|r| r.awaited_keys(after.unwrap_or(""), limit))
    }

    pub(crate) fn events(&self, id: JobId) -> Result<Vec<Event>> {
        let events = self.readers.with(|r| r.job_events(id, 0, u32::MAX))?;
        if events.is_empty() {
            self.get(id)?; // NotFound for an unknown job, else a job with no events yet
        }
        Ok(events)
    }

    pub(crate) fn events_page(&self, id: JobId, after: i64, limit: u32) -> Result<EventPage> {
        crate::engine::search::check_limit(limit)?;
        let want = limit as usize;
        let mut page = EventPage::default();
        let mut bytes = 0usize;
        let mut from = after;
        'read: loop {
            let n = u32::try_from(want - page.events.len())
                .unwrap_or(u32::MAX)
                .min(EVENT_READ);
            let read = self.readers.with(|r| r.job_events(id, from, n + 1))?;
            let more = read.len() > n as usize;
            for e in read.into_iter().take(n as usize + 1) {
                let size = e.kind.len() + e.data.to_string().len() + 64;
                let full = page.events.len() == want || (!page.events.is_empty() && bytes + size > EVENT_PAGE_BYTES);
                if full {
                    page.next = page.events.last().map(|e| e.seq);
                    break 'read;
                }
                bytes += size;
                from = e.seq;
                page.events.push(e);
            }
            if !more {
                break;
            }
        }
        if page.events.is_empty() {
            self.get(id)?; // NotFound for an unknown job, else none (more) yet
        }
        Ok(page)
    }

    pub(crate) fn stats(&self) -> Result<Stats> {
        let now = self.options.clock.now();
        let (first, last) = relay_store::ALL_QUEUES;
        let queues = self.readers.with(|r| stats_between(r, now, first, last))?;
        Ok(Stats { queues })
    }

    pub(crate) fn stats_page(&self, after: Option<&str>, limit: u32) -> Result<StatsPage> {
        if limit == 0 {
            return Err(Error::InvalidInput(relay_core::InvalidInput::new(
                "limit",
                "a page of queues holds at least 1",
            )));
        }
        if let Some(a) = after {
            // A queue's name (never stored otherwise): a page after it is
            // well defined, and nothing else reaches the store's query.
            self.options
                .limits
                .queue(a)
                .map_err(|e| Error::InvalidInput(relay_core::InvalidInput::new("after", e.reason)))?;
        }
        let now = self.options.clock.now();
        let after = after.unwrap_or("");
        self.readers.with(|r| {
            let mut names = r.queue_names(after, limit.saturating_add(1))?;
            let more = names.len() > limit as usize;
            names.truncate(limit as usize);
            let next = if more { names.last().cloned() } else { None };
            let (Some(first), Some(last)) = (names.first(), names.last()) else {
                return Ok(StatsPage::default());
            };
            let mut queues = stats_between(r, now, first, last)?;
            // A queue that came since the names were read waits for a
            // later read: the page holds `limit` at most.
            queues.retain(|q, _| names.binary_search(q).is_ok());
            Ok(StatsPage { queues, next })
        })
    }

    pub(crate) fn queue_stats(&self, queue: &str) -> Result<QueueStats> {
        self.options
            .limits
            .queue(queue)
            .map_err(|e| Error::InvalidInput(relay_core::InvalidInput::new("queue", e.reason)))?;
        let now = self.options.clock.now();
        self.readers.with(|r| {
            let mut one = stats_between(r, now, queue, queue)?;
            Ok(one.remove(queue).unwrap_or_else(QueueStats::empty))
        })
    }

    pub(crate) fn busiest_queues(&self, limit: u32) -> Result<Stats> {
        let now = self.options.clock.now();
        self.readers.with(|r| {
            let mut names = r.queue_busiest(limit)?;
            if names.len() < limit as usize {
                for q in r.queue_names("", limit)? {
                    if names.len() == limit as usize {
                        break;
                    }
                    if !names.contains(&q) {
                        names.push(q);
                    }
                }
            }
            let due = due(r, now)?;
            let mut queues = BTreeMap::new();
            for q in &names {
                queues.extend(stats_between_with(r, now, q, q, &due)?);
            }
            Ok(Stats { queues })
        })
    }

    /// Counts over every queue at once, a due job that no writer has
    /// promoted yet counted READY.
    pub(crate) fn queue_totals(&self) -> Result<relay_core::read::QueueTotals> {
        let now = self.options.clock.now();
        self.readers.with(|r| {
            let mut totals = r.queue_totals()?;
            for (_, state, n) in due(r, now)? {
                count_due_as_ready(&mut totals.counts, state, n);
            }
            Ok(totals)
        })
    }
}

/// The stats of the queues named from `first` to `last`: their counts,
/// and their settings when paused or limited (a configured queue shows
/// even with no jobs).
/// A worker the store knows, at the moment it was read.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct WorkerView {
    /// Its latest heartbeat, when it came, and when it said it stopped.
    pub record: relay_core::WorkerRecord,
    /// Alive, gone (its heartbeats stopped without a word) or stopped.
    pub state: relay_core::WorkerState,
    /// For a gone worker, the jobs of its last heartbeat still LEASED under
    /// the lease it ran them with, and that lease not yet expired: nobody
    /// runs them until it does.
    pub orphaned: Vec<Orphaned>,
}

/// A lease held by a worker that is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Orphaned {
    /// The job, its lease and when it started.
    pub running: relay_core::Running,
    /// When the lease expires (the job is then leased again, or DEAD).
    pub expires_at: Timestamp,
}

/// A page of workers, as returned by
/// [`Relay::workers_page`](crate::Relay::workers_page).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkerPage {
    /// The page's workers seen in the last hour, by id.
    pub workers: Vec<WorkerView>,
    /// The next page's `after`, when more may follow.
    pub next: Option<String>,
}

/// Most bytes of workers (their heartbeats, about) one page carries; a
/// page holds at least one worker.
pub const WORKER_PAGE_BYTES: usize = 4 << 20;

/// Workers read from the store at a time for a page.
const WORKER_READ: u32 = 100;

/// What a worker weighs in an answer, about.
fn worker_bytes(w: &relay_core::WorkerRecord) -> usize {
    let b = &w.beat;
    let text = b.id.len() + b.name.len() + b.host.len() + b.version.len();
    text + b.queues.iter().map(|q| q.len() + 4).sum::<usize>() + 96 * b.running.len() + 256
}

impl Engine {
    /// Every worker seen in the last hour, a page at a time.
    pub(crate) fn workers(&self) -> Result<Vec<WorkerView>> {
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let page = self.workers_page(after.as_deref(), 1000)?;
            out.extend(page.workers);
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(out),
            }
        }
    }

    pub(crate) fn workers_page(&self, after: Option<&str>, limit: u32) -> Result<WorkerPage> {
        crate::engine::search::check_limit(limit)?;
        let now = self.options.clock.now();
        let mut page = WorkerPage::default();
        let mut bytes = 0usize;
        let (mut from, mut read) = (after.unwrap_or("").to_owned(), 0u32);
        loop {
            let want = (limit - read).min(WORKER_READ);
            let (records, next) = self.readers.with(|r| r.workers(&from, want))?;
            for record in records {
                let size = worker_bytes(&record);
                if !page.workers.is_empty() && bytes + size > WORKER_PAGE_BYTES {
                    page.next = page.workers.last().map(|w| w.record.beat.id.clone());
                    return Ok(page);
                }
                bytes += size;
                if let Some(view) = self.worker_view(record, now)? {
                    page.workers.push(view);
                }
            }
            read += want;
            match next {
                Some(n) if read < limit => from = n,
                Some(n) => {
                    page.next = Some(n);
                    return Ok(page);
                }
                None => return Ok(page),
            }
        }
    }

    /// A worker record as seen now; `None` once forgotten (an hour after
    /// its last heartbeat, whether or not a prune has deleted its row yet).
    fn worker_view(&self, record: relay_core::WorkerRecord, now: Timestamp) -> Result<Option<WorkerView>> {
        let forget = relay_core::time::duration_millis(relay_core::presence::FORGET_AFTER);
        if now.as_millis().saturating_sub(record.seen_at.as_millis()) > forget {
            return Ok(None);
        }
        let state = record.state(now);
        let mut orphaned = Vec::new();
        if state == relay_core::WorkerState::Gone {
            for running in &record.beat.running {
                // A job whose row does not decode is left out, not the page.
                let job = match self.readers.with(|r| r.job_get(running.job)) {
                    Ok(job) => job,
                    Err(Error::Corrupt { .. }) => None,
                    Err(e) => return Err(e),
                };
                // Held under this worker's id, with the token it lists: a
                // record that names another worker's lease shows nothing
                // (only its maker writes a record, and ids are unique).
                let lease = job.and_then(|j| j.status.lease);
                let held = |l: &relay_core::Lease| {
                    l.token == running.token && l.expires_at > now && l.worker == record.beat.id
                };
                if let Some(l) = lease.filter(held) {
                    orphaned.push(Orphaned {
                        running: *running,
                        expires_at: l.expires_at,
                    });
                }
            }
        }
        Ok(Some(WorkerView {
            record,
            state,
            orphaned,
        }))
    }
}

/// Moves `n` jobs of `state` (SCHEDULED or RETRYING, due but not promoted
/// yet) to READY in `counts`: what a lease would take now is READY.
fn count_due_as_ready(counts: &mut BTreeMap<relay_core::JobState, u64>, state: relay_core::JobState, n: u64) {
    let Some(c) = counts.get_mut(&state) else {
        return;
    };
    let moved = n.min(*c);
    *c -= moved;
    *counts.entry(relay_core::JobState::Ready).or_insert(0) += moved;
}

/// Due SCHEDULED and RETRYING jobs that no writer has promoted yet (none
/// ran since they came due), by queue and state: stats count them READY,
/// as a lease would take them.
type Due = Vec<(String, relay_core::JobState, u64)>;

fn due(r: &mut dyn relay_store::StoreReader, now: Timestamp) -> std::result::Result<Due, relay_store::StoreError> {
    r.job_due_counts(now, relay_store::DUE_LOOK)
}

fn stats_between(
    r: &mut dyn relay_store::StoreReader,
    now: Timestamp,
    first: &str,
    last: &str,
) -> std::result::Result<BTreeMap<String, QueueStats>, relay_store::StoreError> {
    let due = due(r, now)?;
    stats_between_with(r, now, first, last, &due)
}

fn stats_between_with(
    r: &mut dyn relay_store::StoreReader,
    now: Timestamp,
    first: &str,
    last: &str,
    due: &Due,
) -> std::result::Result<BTreeMap<String, QueueStats>, relay_store::StoreError> {
    let mut queues = r.queue_stats(now, first, last)?;
    for (queue, state, n) in due {
        if let Some(q) = queues.get_mut(queue) {
            count_due_as_ready(&mut q.counts, *state, *n);
        }
    }
    for (name, s) in r.queue_settings_all(first, last)? {
        if s.paused || s.limits != relay_core::QueueLimits::default() || s.retention.is_set() {
            let q = queues.entry(name).or_insert_with(QueueStats::empty);
            q.paused = s.paused;
            q.limits = s.limits;
            q.retention = s.retention;
        }
    }
    Ok(queues)
}
