//! The claim's side of the plan: each claimed queue's pages of READY jobs,
//! the candidates a claim chooses among, and what a batch leaves.

use super::{Entry, Gate, Plan, Slot, PAGE_MAX};
use crate::error::Result;
use relay_core::{Candidate, Priority, Timestamp};
use relay_store::{ReadyRow, StoreError};

/// A queue's classes of candidates: its four priority classes of jobs
/// without a group (`0..4`), then its four of grouped jobs (`4..8`).
pub(super) const CLASSES: usize = 8;

/// One priority class of a queue's READY jobs as read from the store, in
/// `(ready_at, id)` order, or, for grouped jobs, `(turn, id)` order:
/// `next` is the first not yet passed over.
#[derive(Default)]
pub(super) struct Class {
    pub(super) rows: Vec<Candidate>,
    /// For a class of grouped jobs: each row's turn and group.
    turns: Vec<(i64, String)>,
    pub(super) next: usize,
    /// The store may hold more after the last row read.
    pub(super) more: bool,
}

pub(super) struct Pool {
    pub(super) queue: String,
    pub(super) classes: [Class; CLASSES],
}

impl Plan<'_> {
    /// The store locks the claim candidates it reads (see
    /// `Behaviour::locks_candidates`).
    pub(crate) fn locks_candidates(&self) -> bool {
        self.store.behaviour().locks_candidates
    }

    /// Claim candidates read (and, on PostgreSQL, locked) by this batch that
    /// no claim took: when the batch commits they are free again, and a
    /// lessee that found nothing meanwhile should look again.
    pub(crate) fn left_candidates(&self) -> bool {
        let now = self.now;
        self.pools.iter().any(|p| {
            p.classes.iter().any(|c| {
                let from = c.next.min(c.rows.len());
                c.rows[from..].iter().enumerate().any(|(i, r)| {
                    // A grouped row of a group at its limit is no candidate
                    // for anyone until one of its leases ends.
                    let full = c.turns.get(from + i).is_some_and(|(_, g)| self.group_full(&p.queue, g));
                    !full
                        && match self.jobs.get(&r.id) {
                            Some(Slot::Row(e)) => e.claimable(now),
                            Some(Slot::Missing) => false,
                            Some(Slot::Corrupt(..)) | None => true,
                        }
                })
            })
        })
    }

    /// The earliest `ready_at` after now among READY jobs of `queue`. The
    /// store is asked from the instant its candidates were read at: a job
    /// that came due between that read and a later instant
    /// (`Plan::advance`) was in no pool, and is answered as due now rather
    /// than passed over until the next poll.
    pub(crate) fn next_ready_at(&mut self, queue: &str) -> Result<Option<Timestamp>> {
        let now = self.now;
        let stored = self.store.job_next_ready_at(queue, self.read_at)?;
        let planned = self
            .jobs
            .values()
            .filter_map(|s| match s {
                Slot::Row(e)
                    if e.written
                        && !e.deleted
                        && e.status.state.is_pending()
                        && e.status.ready_at > now
                        && e.row.as_ref().is_some_and(|r| r.queue == queue) =>
                {
                    Some(e.status.ready_at)
                }
                _ => None,
            })
            .min();
        Ok(match (stored, planned) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    /// The claimable candidates of `queues` right now: the first of each
    /// class read from the store that this batch has not taken or changed,
    /// and every job this batch made claimable. Each comes with the index
    /// of its queue. A queue its settings hold back (paused, at a limit)
    /// offers none.
    pub(crate) fn heads(&mut self, queues: &[String], out: &mut Vec<(usize, Candidate)>) -> Result<()> {
        out.clear();
        for (qi, q) in queues.iter().enumerate() {
            if !matches!(self.gate(q)?, Gate::Open) {
                continue;
            }
            let pi = self.pool(q)?;
            for p in 0..CLASSES {
                if let Some(c) = self.class_head(pi, p)? {
                    out.push((qi, c));
                }
            }
        }
        // Jobs made claimable by this batch (rare beside a claim; their
        // queue may need reading).
        for i in 0..self.readied.len() {
            let id = self.readied[i];
            if !matches!(self.jobs.get(&id), Some(Slot::Row(e)) if e.claimable(self.now)) {
                continue;
            }
            if !self.ensure_row(id)? {
                continue;
            }
            let Some(Slot::Row(e)) = self.jobs.get(&id) else {
                continue;
            };
            let Some(row) = e.row.as_deref() else { continue };
            // A grouped job takes its turn when the batch writes it: it is
            // claimed in the batches after.
            if row.group.is_some() {
                continue;
            }
            let Some(qi) = queues.iter().position(|q| *q == row.queue) else {
                continue;
            };
            let c = Candidate {
                id,
                priority: row.priority,
                ready_at: e.status.ready_at,
            };
            if !out.iter().any(|(_, o)| o.id == id) && matches!(self.gate(&queues[qi])?, Gate::Open) {
                out.push((qi, c));
            }
        }
        Ok(())
    }

    /// The index of `queue`'s pool, read from the store on first use.
    fn pool(&mut self, queue: &str) -> Result<usize> {
        if let Some(i) = self.pools.iter().position(|p| p.queue == queue) {
            return Ok(i);
        }
        let limit = self.demand.get(queue).copied().unwrap_or(1).clamp(1, PAGE_MAX);
        let rows = self.store.job_ready(queue, self.now, limit)?;
        Ok(self.add_pool(queue, limit, rows))
    }

    /// Keeps the first page of `queue`'s READY jobs (read `limit` a class).
    pub(super) fn add_pool(&mut self, queue: &str, limit: usize, rows: Vec<ReadyRow>) -> usize {
        let mut pool = Pool {
            queue: queue.to_owned(),
            classes: Default::default(),
        };
        let mut counts = [0usize; CLASSES];
        for mut r in rows {
            let mut p = usize::from(r.candidate.priority.get()).min(3);
            if let Some(t) = r.turn.take() {
                p += 4;
                pool.classes[p].turns.push((t.turn, t.group));
            }
            counts[p] += 1;
            pool.classes[p].rows.push(r.candidate);
            self.remember(r);
        }
        for (c, n) in pool.classes.iter_mut().zip(counts) {
            c.more = n >= limit;
        }
        self.pools.push(pool);
        self.pools.len() - 1
    }

    /// Caches a candidate's whole row, unless this batch already knows it.
    fn remember(&mut self, r: ReadyRow) {
        let id = r.candidate.id;
        if self.jobs.contains_key(&id) {
            return;
        }
        let slot = match r.job {
            None => return, // read when a claim takes it
            Some(Ok(job)) => {
                let status = job.status.clone();
                Slot::Row(Box::new(Entry::read(status, Some(Box::new(job)))))
            }
            Some(Err(StoreError::Corrupt { job, reason })) => Slot::Corrupt(job, reason),
            Some(Err(e)) => Slot::Corrupt(Some(id), e.to_string()),
        };
        self.jobs.insert(id, slot);
    }

    /// The first candidate of one class that is still claimable (for a
    /// class of grouped jobs, whose group is below its queue's
    /// `max_leased_per_group`), reading the next page from the store when
    /// the pool runs out.
    fn class_head(&mut self, pi: usize, p: usize) -> Result<Option<Candidate>> {
        let grouped = p >= 4;
        loop {
            let class = &self.pools[pi].classes[p];
            if let Some(c) = class.rows.get(class.next).copied() {
                let mut ok = match self.jobs.get(&c.id) {
                    Some(Slot::Row(e)) => e.claimable(self.now),
                    Some(Slot::Missing) => false,
                    Some(Slot::Corrupt(..)) | None => true,
                };
                if ok && grouped {
                    let pool = &self.pools[pi];
                    let group = pool.classes[p].turns.get(pool.classes[p].next).map(|t| t.1.clone());
                    let queue = pool.queue.clone();
                    // A group at its limit is passed over, however long its
                    // line: every row of it is read (its jobs stand one a
                    // turn), and the next group below its limit taken.
                    if let Some(group) = group {
                        if !self.group_open(&queue, &group)? {
                            ok = false;
                        }
                    }
                }
                if ok {
                    return Ok(Some(c));
                }
                self.pools[pi].classes[p].next += 1;
                continue;
            }
            if !class.more {
                return Ok(None);
            }
            let Some(after) = class.rows.last().copied() else {
                return Ok(None);
            };
            let last_turn = class.turns.last().map(|t| t.0);
            let queue = self.pools[pi].queue.clone();
            let limit = self.demand.get(&queue).copied().unwrap_or(1).clamp(16, PAGE_MAX);
            let rows = match (grouped, last_turn) {
                (false, _) => self.store.job_ready_after(&queue, self.now, after, limit)?,
                (true, Some(turn)) => {
                    let priority = Priority::ALL[(p - 4).min(3)];
                    self.store.job_fair_after(&queue, priority, (turn, after.id), limit)?
                }
                (true, None) => Vec::new(),
            };
            let class = &mut self.pools[pi].classes[p];
            class.more = rows.len() >= limit;
            if rows.is_empty() {
                return Ok(None);
            }
            for mut r in rows {
                let class = &mut self.pools[pi].classes[p];
                class.rows.push(r.candidate);
                if grouped {
                    // A row without a turn here would leave the turns
                    // behind the rows: a corrupt one is passed over.
                    let t = r.turn.take().map_or((i64::MIN, String::new()), |t| (t.turn, t.group));
                    class.turns.push(t);
                }
                self.remember(r);
            }
        }
    }
}
