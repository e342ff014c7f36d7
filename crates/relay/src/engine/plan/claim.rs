//! The claim's side of the plan: each claimed queue's pages of READY jobs,
//! the candidates a claim chooses among, and what a batch leaves.

use super::HashMap;
use super::{Entry, Gate, Plan, Slot, PAGE_MAX};
use crate::error::Result;
use relay_core::{Candidate, JobId, Priority, Timestamp};
use relay_store::{ReadyRow, StoreError};

/// A queue's classes of candidates: its four priority classes of jobs
/// without a group (`0..4`), then its four of grouped jobs (`4..8`).
pub(super) const CLASSES: usize = 8;

/// One priority class of a queue's READY jobs as read from the store, in
/// `(ready_at, id)` order, or, for grouped jobs, `(turn, id)` order:
/// `next` is the first not yet passed over.
///
/// A class of grouped jobs reads the store's heads (each group's first
/// READY job) page by page, and a group's line behind its head once this
/// batch has taken the head (`pending`): the lines' rows are merged in by
/// `(turn, id)`, so the batch takes one group's jobs one a turn as the
/// store would have them without heads.
#[derive(Default)]
pub(super) struct Class {
    pub(super) rows: Vec<Candidate>,
    /// For a class of grouped jobs: each row's turn and group.
    turns: Vec<(i64, String)>,
    pub(super) next: usize,
    /// The store may hold more after the last row read (of a class of
    /// grouped jobs: more heads after `heads_after`).
    pub(super) more: bool,
    /// The last head read: the next page of heads starts after it.
    heads_after: Option<(i64, JobId)>,
    /// Each group read: its last row read, and whether its line may hold
    /// more after it.
    lines: HashMap<String, ((i64, JobId), bool)>,
    /// Groups whose last row read this batch passed (took) while their
    /// line may hold more: the line is read on from that row when the
    /// class's next candidate could stand behind it.
    pending: Vec<(String, i64, JobId)>,
    /// Groups whose head row came without a job (all held by other
    /// transactions, or none READY left): see `Changes::heads`.
    pub(super) held: Vec<String>,
}

impl Class {
    /// Merges grouped rows into the rows not yet passed, by `(turn, id)`.
    fn merge(&mut self, turn: i64, group: String, c: Candidate) {
        let key = (turn, c.id);
        let from = self.next.min(self.rows.len());
        let at = from
            + self.turns[from..]
                .iter()
                .zip(&self.rows[from..])
                .take_while(|((t, _), r)| (*t, r.id) <= key)
                .count();
        self.rows.insert(at, c);
        self.turns.insert(at, (turn, group));
    }

    /// Notes a row of a page of heads: the page's keyset moves to its
    /// head. False for a head whose group's jobs other transactions hold
    /// all (no candidate).
    fn read_head(&mut self, heads: bool, t: &relay_store::Turn, id: JobId) -> bool {
        let key = t.head.unwrap_or((t.turn, id));
        self.heads_after = Some(self.heads_after.map_or(key, |h| h.max(key)));
        if t.held {
            self.held.push(t.group.clone());
            return false;
        }
        self.note_line(heads, t.turn, &t.group, id, true);
        true
    }

    /// Notes a grouped row read: its group's line has read up to it. (Only
    /// where the store holds heads: elsewhere no line is read.)
    fn note_line(&mut self, heads: bool, turn: i64, group: &str, id: JobId, more: bool) {
        if !heads {
            return;
        }
        let e = self.lines.entry(group.to_owned()).or_insert(((turn, id), more));
        if (turn, id) >= e.0 {
            *e = ((turn, id), more);
        }
    }
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
        self.pools.iter().any(|p| {
            p.classes.iter().any(|c| {
                let from = c.next.min(c.rows.len());
                c.rows[from..].iter().enumerate().any(|(i, r)| {
                    // A grouped row of a group at its limit is no candidate
                    // for anyone until one of its leases ends.
                    let full = c.turns.get(from + i).is_some_and(|(_, g)| self.group_full(&p.queue, g));
                    !full && self.candidate_claimable(r.id)
                })
            })
        })
    }

    /// The groups of queue `name`'s grouped candidates not yet passed
    /// over, in the order a claim meets them (with repeats).
    pub(super) fn candidate_groups<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pools.iter().filter(move |p| p.queue == name).flat_map(|p| {
            p.classes[4..].iter().flat_map(|c| {
                let from = c.next.min(c.turns.len());
                c.turns[from..].iter().map(|(_, g)| g.as_str())
            })
        })
    }

    /// Whether candidate `id` may still be claimed: as read, unless this
    /// batch changed it, or deleted it. A row not read whole (or corrupt)
    /// is read when a claim takes it, and judged then.
    fn candidate_claimable(&self, id: JobId) -> bool {
        match self.jobs.get(&id) {
            Some(Slot::Row(e)) => e.claimable(self.now),
            Some(Slot::Missing) => false,
            Some(Slot::Corrupt(..)) | None => true,
        }
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
        let heads = self.group_heads;
        let mut pool = Pool {
            queue: queue.to_owned(),
            classes: Default::default(),
        };
        let mut counts = [0usize; CLASSES];
        for mut r in rows {
            // Grouped rows in the four classes after the plain ones.
            let p = usize::from(r.candidate.priority.get()).min(3) + if r.turn.is_some() { 4 } else { 0 };
            counts[p] += 1;
            let class = &mut pool.classes[p];
            if let Some(t) = r.turn.take() {
                if !class.read_head(heads, &t, r.candidate.id) {
                    continue;
                }
                // By (turn, id): a row read past a head another
                // transaction holds stands at its own, later turn.
                class.merge(t.turn, t.group, r.candidate);
            } else {
                class.rows.push(r.candidate);
            }
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
        if p >= 4 {
            return self.fair_head(pi, p);
        }
        loop {
            let class = &self.pools[pi].classes[p];
            if let Some(c) = class.rows.get(class.next).copied() {
                if self.candidate_claimable(c.id) {
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
            let queue = self.pools[pi].queue.clone();
            let limit = self.demand.get(&queue).copied().unwrap_or(1).clamp(16, PAGE_MAX);
            let rows = self.store.job_ready_after(&queue, self.now, after, limit)?;
            let class = &mut self.pools[pi].classes[p];
            class.more = rows.len() >= limit;
            if rows.is_empty() {
                return Ok(None);
            }
            for r in rows {
                self.pools[pi].classes[p].rows.push(r.candidate);
                self.remember(r);
            }
        }
    }

    /// [`Plan::class_head`] for a class of grouped jobs. Where the store
    /// holds only heads (`Behaviour::group_heads`), a group at its limit is
    /// passed over in one row, its head: the rest of its line is not read.
    /// Elsewhere every grouped READY job is read, and a group at its limit
    /// is passed over row by row.
    fn fair_head(&mut self, pi: usize, p: usize) -> Result<Option<Candidate>> {
        loop {
            let class = &self.pools[pi].classes[p];
            let Some(c) = class.rows.get(class.next).copied() else {
                // Passed every row read: more heads, else the lines of the
                // groups whose last rows this batch took.
                if class.more {
                    self.read_heads(pi, p)?;
                } else if !class.pending.is_empty() {
                    self.read_lines(pi, p)?;
                } else {
                    return Ok(None);
                }
                continue;
            };
            let (turn, group) = class
                .turns
                .get(class.next)
                .cloned()
                .unwrap_or((i64::MIN, String::new()));
            // A row read from a line may stand after heads not read yet,
            // and a line not read on yet may hold rows before this one
            // (its next job's turn is at least one more than its last's).
            if class.more && class.heads_after.is_some_and(|h| (turn, c.id) > h) {
                self.read_heads(pi, p)?;
                continue;
            }
            if class.pending.iter().any(|(_, t, _)| t.saturating_add(1) <= turn) {
                self.read_lines(pi, p)?;
                continue;
            }
            let claimable = self.candidate_claimable(c.id);
            let queue = self.pools[pi].queue.clone();
            let open = group.is_empty() || self.group_open(&queue, &group)?;
            if claimable && open {
                return Ok(Some(c));
            }
            let class = &mut self.pools[pi].classes[p];
            class.next += 1;
            // Taken (or gone) while its group may take more: the group's
            // line goes on after it. A group at its limit is passed over.
            if open
                && !claimable
                && self.group_heads
                && class
                    .lines
                    .get(&group)
                    .is_some_and(|(last, more)| *more && *last == (turn, c.id))
            {
                class.pending.push((group, turn, c.id));
            }
        }
    }

    /// Reads the class's next page of heads, after the last one read.
    fn read_heads(&mut self, pi: usize, p: usize) -> Result<()> {
        let heads = self.group_heads;
        let class = &mut self.pools[pi].classes[p];
        let Some(after) = class.heads_after else {
            class.more = false;
            return Ok(());
        };
        let queue = self.pools[pi].queue.clone();
        let limit = self.demand.get(&queue).copied().unwrap_or(1).clamp(16, PAGE_MAX);
        let priority = Priority::ALL[(p - 4).min(3)];
        let rows = self.store.job_fair_after(&queue, priority, after, limit)?;
        let class = &mut self.pools[pi].classes[p];
        class.more = rows.len() >= limit;
        for mut r in rows {
            let class = &mut self.pools[pi].classes[p];
            // A row without a turn is corrupt: it is read again with its
            // job (and fails alone) rather than merged.
            let (turn, group) = match r.turn.take() {
                Some(t) => {
                    if !class.read_head(heads, &t, r.candidate.id) {
                        continue;
                    }
                    (t.turn, t.group)
                }
                None => (i64::MIN, String::new()),
            };
            class.merge(turn, group, r.candidate);
            self.remember(r);
        }
        Ok(())
    }

    /// Reads on the lines of the class's pending groups, a share of the
    /// queue's demand each.
    fn read_lines(&mut self, pi: usize, p: usize) -> Result<()> {
        let heads = self.group_heads;
        let pending = std::mem::take(&mut self.pools[pi].classes[p].pending);
        if pending.is_empty() {
            return Ok(());
        }
        let queue = self.pools[pi].queue.clone();
        let demand = self.demand.get(&queue).copied().unwrap_or(1);
        let limit = (demand / pending.len()).clamp(4, PAGE_MAX);
        let priority = Priority::ALL[(p - 4).min(3)];
        let after: Vec<(&str, i64, JobId)> = pending.iter().map(|(g, t, id)| (g.as_str(), *t, *id)).collect();
        let rows = self.store.job_group_next(&queue, priority, &after, limit)?;
        let mut read: HashMap<String, usize> = HashMap::default();
        for mut r in rows {
            let Some(t) = r.turn.take() else { continue };
            let class = &mut self.pools[pi].classes[p];
            *read.entry(t.group.clone()).or_default() += 1;
            class.note_line(heads, t.turn, &t.group, r.candidate.id, true);
            class.merge(t.turn, t.group, r.candidate);
            self.remember(r);
        }
        // A line that gave fewer than asked has no more.
        let class = &mut self.pools[pi].classes[p];
        for (g, _, _) in &pending {
            if read.get(g).copied().unwrap_or(0) < limit {
                if let Some(l) = class.lines.get_mut(g) {
                    l.1 = false;
                }
            }
        }
        Ok(())
    }
}
