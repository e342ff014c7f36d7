//! The plan's side of what is kept about a queue: its settings as the
//! batch sees them (read with the claim, or locked to change), whether a
//! claim may take its jobs (`Plan::gate`), and what its claims count.

use super::{HashMap, Plan, Slot, Undo};
use crate::error::Result;
use relay_core::{JobState, QueueSettings, Timestamp};
use relay_store::QueueWrite;

/// Most groups whose counts one read asks the store for.
const GROUPS_READ_MAX: usize = 512;

/// A queue's settings as this batch sees them.
#[derive(Clone)]
pub(super) struct QueueEntry {
    pub(super) settings: QueueSettings,
    /// The batch writes them.
    written: bool,
    /// The store locked the row for this batch (see `Store::queue_lock`):
    /// the batch may change it.
    locked: bool,
    /// For a queue with `max_leased`: its LEASED jobs, counting this
    /// batch's claims (`None` until read).
    pub(super) leased: Option<u64>,
    /// For a queue with `max_leased_per_group`: its groups' LEASED jobs,
    /// as this batch counts them (`None` until the limit is known).
    pub(super) group_leased: Option<GroupCounts>,
}

/// The unexpired leases of a queue's groups as a batch counts them: the
/// store's count of each group the batch met, read when it first meets
/// it, and what the batch's own claims and outcomes changed. Nothing here
/// grows with the queue's groups, only with those the batch meets, and an
/// operation's undo is one number (issue 39: every lease cloned a map of
/// every leased group before).
#[derive(Clone, Default)]
pub(super) struct GroupCounts {
    /// The store's count of each group read.
    read: HashMap<String, u64>,
    /// This batch's leases taken (+1 each) and ended (-1), per group.
    planned: HashMap<String, i64>,
}

impl GroupCounts {
    /// Group `g`'s leases, counting this batch's; `None` before its read.
    fn get(&self, g: &str) -> Option<u64> {
        let read = *self.read.get(g)?;
        let planned = self.planned.get(g).copied().unwrap_or(0);
        Some(read.saturating_add_signed(planned))
    }

    fn add(&mut self, g: &str, n: i64) {
        match self.planned.get_mut(g) {
            Some(p) => *p += n,
            None => {
                self.planned.insert(g.to_owned(), n);
            }
        }
    }
}

/// What a claim's count (or an ended lease's) changed in a queue's entry,
/// to go back on when its operation fails: the numbers before, never the
/// entry whole.
pub(super) struct Counted {
    queue: String,
    group: Option<String>,
    /// What was added to the group's count.
    added: i64,
    leased: Option<u64>,
    settings: QueueSettings,
    written: bool,
}

impl Counted {
    /// Queue `name`'s entry `e` before `added` is counted for `group`.
    fn before(name: &str, group: Option<&str>, added: i64, e: &QueueEntry) -> Self {
        Self {
            queue: name.to_owned(),
            group: group.map(str::to_owned),
            added,
            leased: e.leased,
            settings: e.settings,
            written: e.written,
        }
    }
}

impl QueueEntry {
    pub(super) fn read(settings: QueueSettings) -> Self {
        // Rows with limits are read locked (`Prefetched::queues`).
        let locked = settings.limits.is_set();
        Self {
            settings,
            written: false,
            locked,
            leased: None,
            group_leased: None,
        }
    }
}

/// Whether a claim may take a queue's jobs now.
pub(crate) enum Gate {
    Open,
    /// Its rate limit allows no more until then.
    Until(Timestamp),
    /// Paused, or at its `max_leased`.
    Shut,
}

impl Plan<'_> {
    /// Keeps the settings (and, for a limited queue, the lease count) a
    /// batch's first reads brought of `queue` (none: the defaults).
    pub(super) fn keep_queue_read(
        &mut self,
        queue: &str,
        read: &[(String, QueueSettings)],
        leased: &[(String, u64)],
        group_leased: &[(String, Vec<(String, u64)>)],
    ) {
        let settings = read
            .iter()
            .find(|(q, _)| q == queue)
            .map(|(_, s)| *s)
            .unwrap_or_default();
        let mut entry = QueueEntry::read(settings);
        entry.leased = leased.iter().find(|(q, _)| q == queue).map(|(_, n)| *n);
        // The counts the store read with the batch's first candidates (on
        // PostgreSQL); the others are read when a claim meets the group
        // (`Plan::group_open`).
        if entry.settings.limits.max_leased_per_group.is_some() {
            let mut counts = GroupCounts::default();
            if let Some((_, read)) = group_leased.iter().find(|(q, _)| q == queue) {
                counts.read.extend(read.iter().cloned());
            }
            entry.group_leased = Some(counts);
        }
        self.queues.insert(queue.to_owned(), entry);
    }

    /// Queue `name`'s settings as this batch sees them.
    pub(crate) fn queue(&mut self, name: &str) -> Result<QueueSettings> {
        // One lookup on the claim's path (the batch's first reads kept it).
        if let Some(e) = self.queues.get(name) {
            return Ok(e.settings);
        }
        let settings = self
            .store
            .queue_settings(&[name])?
            .into_iter()
            .find(|(q, _)| q == name)
            .map(|(_, s)| s)
            .unwrap_or_default();
        self.queues.insert(name.to_owned(), QueueEntry::read(settings));
        Ok(settings)
    }

    /// Queue `name`'s settings, locked for this batch to change.
    pub(crate) fn queue_for_change(&mut self, name: &str) -> Result<QueueSettings> {
        if !self.queues.get(name).is_some_and(|e| e.locked) {
            let settings = self.store.queue_lock(name, self.now)?;
            let leased = self.queues.get(name).and_then(|e| e.leased);
            let group_leased = self.queues.get(name).and_then(|e| e.group_leased.clone());
            let mut entry = QueueEntry::read(settings);
            entry.locked = true;
            entry.leased = leased;
            entry.group_leased = group_leased;
            self.queues.insert(name.to_owned(), entry);
        }
        self.queue(name)
    }

    /// Queue `name`'s new settings (read with [`Plan::queue_for_change`]).
    pub(crate) fn set_queue(&mut self, name: &str, settings: QueueSettings) -> Result<()> {
        self.queue_for_change(name)?;
        let Some(e) = self.queues.get_mut(name) else {
            return Ok(());
        };
        if self.logging {
            self.undo.push(Undo::Queue(name.to_owned(), e.clone()));
        }
        e.settings = settings;
        e.written = true;
        Ok(())
    }

    /// Whether a claim may take `name`'s jobs now: not paused, under its
    /// `max_leased`, its rate window not spent.
    pub(crate) fn gate(&mut self, name: &str) -> Result<Gate> {
        let s = self.queue(name)?;
        if s.paused {
            return Ok(Gate::Shut);
        }
        if let Some(max) = s.limits.max_leased {
            let leased = match self.queues.get(name).and_then(|e| e.leased) {
                Some(n) => n,
                None => {
                    // Read mid-batch (a limit set earlier in it): the
                    // store's count, plus the leases this batch planned.
                    let n = self.store.job_leased_count(name, self.now)? + self.planned_leases(name);
                    if let Some(e) = self.queues.get_mut(name) {
                        e.leased = Some(n);
                    }
                    n
                }
            };
            if leased >= u64::from(max) {
                return Ok(Gate::Shut);
            }
        }
        if let Some(r) = s.limits.rate {
            if r.left(&s.window, self.now) == 0 {
                return Ok(Gate::Until(r.window_end(&s.window)));
            }
        }
        Ok(Gate::Open)
    }

    /// Whether a claim may take a job of `group` in queue `name`: the
    /// queue has no `max_leased_per_group`, or the group is below it. The
    /// first time the batch meets a group, its count is read from the
    /// store, with those of the other groups the batch's candidates of
    /// that queue hold (one read per page of candidates, not per group).
    pub(crate) fn group_open(&mut self, name: &str, group: &str) -> Result<bool> {
        let Some(max) = self.queue(name)?.limits.max_leased_per_group else {
            return Ok(true);
        };
        if self.queues.get(name).is_some_and(|e| e.group_leased.is_none()) {
            // Set partway through this batch: the leases it planned.
            let mut counts = GroupCounts::default();
            for g in self.planned_group_leases(name) {
                counts.add(&g, 1);
            }
            if let Some(e) = self.queues.get_mut(name) {
                e.group_leased = Some(counts);
            }
        }
        let known = |p: &Self, g: &str| {
            p.queues
                .get(name)
                .and_then(|e| e.group_leased.as_ref())
                .is_none_or(|c| c.read.contains_key(g))
        };
        if !known(self, group) {
            let mut unread = vec![group.to_owned()];
            for g in self.candidate_groups(name) {
                if unread.len() >= GROUPS_READ_MAX {
                    break;
                }
                if !known(self, g) && !unread.iter().any(|u| u == g) {
                    unread.push(g.to_owned());
                }
            }
            let names: Vec<&str> = unread.iter().map(String::as_str).collect();
            let found = self.store.job_group_leased(name, &names, self.now)?;
            if let Some(c) = self.queues.get_mut(name).and_then(|e| e.group_leased.as_mut()) {
                for g in unread {
                    c.read.insert(g, 0);
                }
                for (g, n) in found {
                    c.read.insert(g, n);
                }
            }
        }
        let n = self
            .queues
            .get(name)
            .and_then(|e| e.group_leased.as_ref())
            .and_then(|c| c.get(group))
            .unwrap_or(0);
        Ok(n < u64::from(max))
    }

    /// Whether this batch counts `group` of queue `name` at its
    /// `max_leased_per_group` (from what it read; no store read: a group
    /// whose count it has not read is not).
    pub(super) fn group_full(&self, name: &str, group: &str) -> bool {
        let Some(e) = self.queues.get(name) else { return false };
        let (Some(max), Some(c)) = (e.settings.limits.max_leased_per_group, e.group_leased.as_ref()) else {
            return false;
        };
        c.get(group).is_some_and(|n| n >= u64::from(max))
    }

    /// The groups of queue `name`'s jobs this batch leased, one entry per
    /// lease. Scans the batch's jobs: only for a limit set partway through.
    fn planned_group_leases(&self, name: &str) -> Vec<String> {
        self.jobs
            .values()
            .filter_map(|s| match s {
                Slot::Row(e)
                    if e.written
                        && !e.deleted
                        && e.status.state == JobState::Leased
                        && e.base.is_none_or(|(state, _)| state != JobState::Leased) =>
                {
                    e.row.as_ref().filter(|r| r.queue == name).and_then(|r| r.group.clone())
                }
                _ => None,
            })
            .collect()
    }

    /// Jobs of queue `name` this batch leased (not LEASED in the store).
    /// Scans the batch's jobs: only for a limit set partway through a batch.
    fn planned_leases(&self, name: &str) -> u64 {
        let n = self
            .jobs
            .values()
            .filter(|s| match s {
                Slot::Row(e) => {
                    e.written
                        && !e.deleted
                        && e.status.state == JobState::Leased
                        && e.base.is_none_or(|(state, _)| state != JobState::Leased)
                        && e.row.as_ref().is_some_and(|r| r.queue == name)
                }
                _ => false,
            })
            .count();
        u64::try_from(n).unwrap_or(u64::MAX)
    }

    /// The queue (and group) of job `id`, which is about to give up an
    /// unexpired lease, where this batch counts that queue's leases (a
    /// `max_leased` or `max_leased_per_group` read for a claim); `None`
    /// otherwise, without a read.
    pub(crate) fn counted_queue_of(&mut self, id: relay_core::JobId) -> Result<Option<(String, Option<String>)>> {
        if !self
            .queues
            .values()
            .any(|e| e.leased.is_some() || e.group_leased.is_some())
        {
            return Ok(None);
        }
        // A row that cannot be read whole is not counted: the claim then
        // sees one slot fewer, the safe side, and the outcome stands.
        let Ok(Some(job)) = self.job(id) else { return Ok(None) };
        Ok(self
            .queues
            .get(&job.queue)
            .is_some_and(|e| e.leased.is_some() || e.group_leased.is_some())
            .then_some((job.queue, job.group)))
    }

    /// One of `name`'s leases (of `group`) ended in this batch (an ack,
    /// nack, release, cancel...): a claim later in the batch may take its
    /// slot.
    pub(crate) fn count_unlease(&mut self, name: &str, group: Option<&str>) {
        let Some(e) = self.queues.get_mut(name) else { return };
        let counted = self.logging.then(|| Counted::before(name, group, -1, e));
        if let Some(n) = e.leased.as_mut() {
            *n = n.saturating_sub(1);
        }
        if let (Some(c), Some(g)) = (e.group_leased.as_mut(), group) {
            c.add(g, -1);
        }
        if let Some(counted) = counted {
            self.undo.push(Undo::Count(Box::new(counted)));
        }
    }

    /// A claim took one of `name`'s jobs (of `group`): it counts against
    /// the queue's limits.
    pub(crate) fn count_lease(&mut self, name: &str, group: Option<&str>) -> Result<()> {
        self.grouped_leased |= group.is_some() && self.group_heads;
        let limited = self.queues.get(name).is_some_and(|e| e.settings.limits.is_set());
        if !limited {
            return Ok(());
        }
        let now = self.now;
        let Some(e) = self.queues.get_mut(name) else {
            return Ok(());
        };
        let counted = self.logging.then(|| Counted::before(name, group, 1, e));
        if let Some(n) = e.leased.as_mut() {
            *n += 1;
        }
        if let (Some(c), Some(g)) = (e.group_leased.as_mut(), group) {
            c.add(g, 1);
        }
        if let Some(r) = e.settings.limits.rate {
            r.take(&mut e.settings.window, now);
            e.written = true;
        }
        if let Some(counted) = counted {
            self.undo.push(Undo::Count(Box::new(counted)));
        }
        Ok(())
    }

    /// Goes back on one count (see [`Counted`]).
    pub(super) fn uncount(&mut self, c: Counted) {
        let Some(e) = self.queues.get_mut(&c.queue) else { return };
        e.leased = c.leased;
        e.settings = c.settings;
        e.written = c.written;
        if let (Some(counts), Some(g)) = (e.group_leased.as_mut(), c.group.as_deref()) {
            counts.add(g, -c.added);
        }
    }
}

/// The queue settings a batch writes, in name order: where other writers
/// lock the same rows (PostgreSQL), one order everywhere avoids deadlocks.
pub(super) fn writes(queues: &super::HashMap<String, QueueEntry>, now: Timestamp) -> Vec<QueueWrite<'_>> {
    let mut queues: Vec<(&String, &QueueEntry)> = queues.iter().filter(|(_, e)| e.written).collect();
    queues.sort_unstable_by(|a, b| a.0.cmp(b.0));
    queues
        .into_iter()
        .map(|(name, e)| QueueWrite {
            name,
            settings: &e.settings,
            at: now,
        })
        .collect()
}
