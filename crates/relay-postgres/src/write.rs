//! A batch's writes as arrays, one set-based statement per kind
//! (`sql/apply_*.sql`), pipelined with the COMMIT by the writer.

use crate::pipe::{Pipe, Req};
use crate::stmt::Stmt;
use relay_core::Timestamp;
use relay_core::{JobState, Keep, Recurrence};
use relay_store::{Changes, EventRow, JobInsert, JobUpdate, QueueWrite, ScheduleWrite, StoreError};
use std::collections::{HashMap, HashSet};
use tokio_postgres::types::ToSql;

fn i(v: u32) -> i64 {
    i64::from(v)
}

/// The columns of a batch's updates, as arrays (`sql/apply_update.sql`).
pub(crate) struct UpdateCols<'a> {
    ids: Vec<i64>,
    expect_state: Vec<&'a str>,
    expect_token: Vec<i64>,
    state: Vec<&'a str>,
    attempts: Vec<i64>,
    ready_at: Vec<i64>,
    finished_at: Vec<Option<i64>>,
    token: Vec<i64>,
    expires: Vec<Option<i64>>,
    by: Vec<Option<&'a str>>,
    error: Vec<Option<&'a str>>,
    result: Vec<Option<&'a [u8]>>,
    waiting_on: Vec<i64>,
    /// The throughput history's counts per job (`$15`-`$17`, after the
    /// statement's count).
    succeeded: Vec<i64>,
    failed: Vec<i64>,
    dead: Vec<i64>,
    /// Per job, its last event number before the batch where the batch
    /// read it (`$19`), and its events in the batch (`$20`).
    seq_base: Vec<Option<i64>>,
    events: Vec<i64>,
    /// These jobs' events (`$21`-`$25`, `$26` their count), written by
    /// the same statement (`sql/apply_update.sql`).
    ev: EventCols<'a>,
    ev_count: i64,
}

impl<'a> UpdateCols<'a> {
    /// The columns of `ups`, with their jobs' events from `events` (every
    /// event of the batch).
    pub(crate) fn new<'u>(ups: impl Iterator<Item = &'u JobUpdate<'a>> + Clone, events: &[EventRow<'a>]) -> Self
    where
        'a: 'u,
    {
        let mine: HashSet<i64> = ups.clone().map(|u| u.id.0).collect();
        let evs: Vec<EventRow<'a>> = events.iter().filter(|e| mine.contains(&e.job.0)).copied().collect();
        let last = last_ords(&evs);
        let base: HashMap<i64, i64> = evs.iter().filter_map(|e| Some((e.job.0, e.base?))).collect();
        Self {
            seq_base: ups.clone().map(|u| base.get(&u.id.0).copied()).collect(),
            events: ups.clone().map(|u| last.get(&u.id.0).copied().unwrap_or(0)).collect(),
            ev_count: i64::try_from(evs.len()).unwrap_or(i64::MAX),
            ev: EventCols::new(&evs),
            ids: ups.clone().map(|u| u.id.0).collect(),
            expect_state: ups.clone().map(|u| u.expect_state.as_str()).collect(),
            expect_token: ups.clone().map(|u| u.expect_token.0).collect(),
            state: ups.clone().map(|u| u.status.state.as_str()).collect(),
            attempts: ups.clone().map(|u| i(u.status.attempts)).collect(),
            ready_at: ups.clone().map(|u| u.status.ready_at.as_millis()).collect(),
            finished_at: ups
                .clone()
                .map(|u| u.status.finished_at.map(Timestamp::as_millis))
                .collect(),
            token: ups.clone().map(|u| u.status.last_token.0).collect(),
            expires: ups
                .clone()
                .map(|u| u.status.lease.as_ref().map(|l| l.expires_at.as_millis()))
                .collect(),
            by: ups
                .clone()
                .map(|u| u.status.lease.as_ref().map(|l| l.worker.as_str()))
                .collect(),
            error: ups.clone().map(|u| u.status.last_error.as_deref()).collect(),
            result: ups.clone().map(|u| u.result).collect(),
            waiting_on: ups.clone().map(|u| i(u.status.waiting_on)).collect(),
            succeeded: ups.clone().map(|u| i(u.tally.succeeded)).collect(),
            failed: ups.clone().map(|u| i(u.tally.failed)).collect(),
            dead: ups.clone().map(|u| i(u.tally.dead)).collect(),
        }
    }

    pub(crate) fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.ids,
            &self.expect_state,
            &self.expect_token,
            &self.state,
            &self.attempts,
            &self.ready_at,
            &self.finished_at,
            &self.token,
            &self.expires,
            &self.by,
            &self.error,
            &self.result,
            &self.waiting_on,
        ]
    }

    /// `$19` on, after the throughput columns and minute.
    fn event_params(&self) -> [&(dyn ToSql + Sync); 8] {
        let e = &self.ev;
        [
            &self.seq_base,
            &self.events,
            &e.job,
            &e.ord,
            &e.at,
            &e.kind,
            &e.data,
            &self.ev_count,
        ]
    }
}

/// The columns of a batch's queue settings (`sql/apply_queues.sql`).
pub(crate) struct QueueCols<'a> {
    name: Vec<&'a str>,
    paused: Vec<bool>,
    max_leased: Vec<Option<i64>>,
    rate_limit: Vec<Option<i64>>,
    rate_per_ms: Vec<Option<i64>>,
    window_start: Vec<i64>,
    window_count: Vec<i64>,
    at: Vec<i64>,
    poison_after: Vec<Option<i64>>,
    keep: [Vec<Option<i64>>; 3],
    /// `$14`, after the statement's count.
    max_leased_per_group: Vec<Option<i64>>,
}

impl<'a> QueueCols<'a> {
    pub(crate) fn new(qs: &[QueueWrite<'a>]) -> Self {
        let rate = |q: &QueueWrite<'_>| q.settings.limits.rate;
        Self {
            name: qs.iter().map(|q| q.name).collect(),
            paused: qs.iter().map(|q| q.settings.paused).collect(),
            max_leased: qs.iter().map(|q| q.settings.limits.max_leased.map(i)).collect(),
            rate_limit: qs.iter().map(|q| rate(q).map(|r| i(r.limit))).collect(),
            rate_per_ms: qs
                .iter()
                .map(|q| rate(q).map(|r| relay_core::time::duration_millis(r.per)))
                .collect(),
            window_start: qs.iter().map(|q| q.settings.window.start.as_millis()).collect(),
            window_count: qs.iter().map(|q| i(q.settings.window.count)).collect(),
            at: qs.iter().map(|q| q.at.as_millis()).collect(),
            poison_after: qs.iter().map(|q| q.settings.limits.poison_after.map(i)).collect(),
            keep: [
                qs.iter()
                    .map(|q| q.settings.retention.succeeded.map(Keep::to_millis))
                    .collect(),
                qs.iter()
                    .map(|q| q.settings.retention.dead.map(Keep::to_millis))
                    .collect(),
                qs.iter()
                    .map(|q| q.settings.retention.cancelled.map(Keep::to_millis))
                    .collect(),
            ],
            max_leased_per_group: qs
                .iter()
                .map(|q| q.settings.limits.max_leased_per_group.map(i))
                .collect(),
        }
    }

    pub(crate) fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.name,
            &self.paused,
            &self.max_leased,
            &self.rate_limit,
            &self.rate_per_ms,
            &self.window_start,
            &self.window_count,
            &self.at,
            &self.poison_after,
            &self.keep[0],
            &self.keep[1],
            &self.keep[2],
        ]
    }
}

/// One schedule written whole (`sql/schedule_put.sql`), or deleted
/// (`sql/schedule_delete.sql`): a statement each (schedules change rarely).
pub(crate) struct ScheduleRow<'a> {
    name: &'a str,
    put: Option<SchedulePut<'a>>,
}

struct SchedulePut<'a> {
    cron: Option<&'a str>,
    every_ms: Option<i64>,
    tz: Option<&'a str>,
    queue: &'a str,
    kind: &'a str,
    payload: &'a [u8],
    priority: i64,
    max_attempts: i64,
    paused: bool,
    created_at: i64,
    next_at: i64,
    last_at: Option<i64>,
    group: Option<&'a str>,
}

impl<'a> ScheduleRow<'a> {
    pub(crate) fn new(w: &ScheduleWrite<'a>) -> Self {
        let put = w.schedule.map(|s| {
            let (cron, every_ms, tz) = match &s.recurrence {
                Recurrence::Cron { expr, tz } => (Some(expr.as_str()), None, tz.as_deref()),
                Recurrence::Every(d) => (None, Some(relay_core::time::duration_millis(*d)), None),
            };
            SchedulePut {
                cron,
                every_ms,
                tz,
                queue: &s.queue,
                kind: &s.kind,
                payload: &s.payload,
                priority: i64::from(s.priority.get()),
                max_attempts: i(s.max_attempts),
                paused: s.paused,
                created_at: s.created_at.as_millis(),
                next_at: s.next_at.as_millis(),
                last_at: s.last_at.map(Timestamp::as_millis),
                group: s.group.as_deref(),
            }
        });
        Self { name: w.name, put }
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        match &self.put {
            None => vec![&self.name],
            Some(p) => vec![
                &self.name,
                &p.cron,
                &p.every_ms,
                &p.tz,
                &p.queue,
                &p.kind,
                &p.payload,
                &p.priority,
                &p.max_attempts,
                &p.paused,
                &p.created_at,
                &p.next_at,
                &p.last_at,
                &p.group,
            ],
        }
    }
}

/// The columns of a batch's inserts (`sql/apply_insert.sql`).
pub(crate) struct InsertCols<'a> {
    ids: Vec<i64>,
    queue: Vec<&'a str>,
    kind: Vec<&'a str>,
    payload: Vec<&'a [u8]>,
    priority: Vec<i64>,
    state: Vec<&'a str>,
    attempts: Vec<i64>,
    max_attempts: Vec<i64>,
    ready_at: Vec<i64>,
    created_at: Vec<i64>,
    finished_at: Vec<Option<i64>>,
    key: Vec<Option<&'a str>>,
    result: Vec<Option<&'a [u8]>>,
    token: Vec<i64>,
    expires: Vec<Option<i64>>,
    by: Vec<Option<&'a str>>,
    error: Vec<Option<&'a str>>,
    lease_for: Vec<Option<i64>>,
    timeout: Vec<Option<i64>>,
    waiting_on: Vec<i64>,
    /// Sent after the statement's count (`$22`; `$29` of apply_submit.sql).
    pub(crate) traceparent: Vec<Option<&'a str>>,
    /// Each job's tags as a JSON array (`$23`; `$30`), NULL for none.
    pub(crate) tags: Vec<Option<String>>,
    /// Each job's group (`$25`; `$32`), NULL for none.
    pub(crate) group: Vec<Option<&'a str>>,
    /// Each job's last event number, its events in the batch being its
    /// first (`$26`; `$33`): the row's `last_seq` (migration 0021).
    pub(crate) last_seq: Vec<i64>,
}

impl<'a> InsertCols<'a> {
    /// The columns of `ins`, whose events are among `events`.
    pub(crate) fn new(ins: &[JobInsert<'a>], events: &[EventRow<'_>]) -> Self {
        let last = last_ords(events);
        Self {
            ids: ins.iter().map(|j| j.id.0).collect(),
            queue: ins.iter().map(|j| j.queue).collect(),
            kind: ins.iter().map(|j| j.kind).collect(),
            payload: ins.iter().map(|j| j.payload).collect(),
            priority: ins.iter().map(|j| i64::from(j.priority.get())).collect(),
            state: ins.iter().map(|j| j.status.state.as_str()).collect(),
            attempts: ins.iter().map(|j| i(j.status.attempts)).collect(),
            max_attempts: ins.iter().map(|j| i(j.status.max_attempts)).collect(),
            ready_at: ins.iter().map(|j| j.status.ready_at.as_millis()).collect(),
            created_at: ins.iter().map(|j| j.created_at.as_millis()).collect(),
            finished_at: ins
                .iter()
                .map(|j| j.status.finished_at.map(Timestamp::as_millis))
                .collect(),
            key: ins.iter().map(|j| j.unique_key).collect(),
            result: ins.iter().map(|j| j.result).collect(),
            token: ins.iter().map(|j| j.status.last_token.0).collect(),
            expires: ins
                .iter()
                .map(|j| j.status.lease.as_ref().map(|l| l.expires_at.as_millis()))
                .collect(),
            by: ins
                .iter()
                .map(|j| j.status.lease.as_ref().map(|l| l.worker.as_str()))
                .collect(),
            error: ins.iter().map(|j| j.status.last_error.as_deref()).collect(),
            lease_for: ins
                .iter()
                .map(|j| j.lease_for.map(relay_core::time::duration_millis))
                .collect(),
            timeout: ins
                .iter()
                .map(|j| j.timeout.map(relay_core::time::duration_millis))
                .collect(),
            waiting_on: ins.iter().map(|j| i(j.status.waiting_on)).collect(),
            traceparent: ins.iter().map(|j| j.traceparent).collect(),
            tags: ins
                .iter()
                .map(|j| (!j.tags.is_empty()).then(|| serde_json::Value::from(j.tags.to_vec()).to_string()))
                .collect(),
            group: ins.iter().map(|j| j.group).collect(),
            last_seq: ins.iter().map(|j| last.get(&j.id.0).copied().unwrap_or(0)).collect(),
        }
    }

    /// The `i`th job's columns (`i` below the number of jobs).
    pub(crate) fn row(&self, i: usize) -> InsertRow<'_, 'a> {
        InsertRow {
            cols: self,
            i,
            traceparent: self.traceparent[i],
            tags: self.tags[i].as_deref(),
            group: self.group[i],
        }
    }

    pub(crate) fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![
            &self.ids,
            &self.queue,
            &self.kind,
            &self.payload,
            &self.priority,
            &self.state,
            &self.attempts,
            &self.max_attempts,
            &self.ready_at,
            &self.created_at,
            &self.finished_at,
            &self.key,
            &self.result,
            &self.token,
            &self.expires,
            &self.by,
            &self.error,
            &self.lease_for,
            &self.timeout,
            &self.waiting_on,
        ]
    }
}

/// One job's columns (`InsertCols::row`), as the scalars of
/// `sql/apply_submit_one.sql`.
pub(crate) struct InsertRow<'c, 'a> {
    cols: &'c InsertCols<'a>,
    i: usize,
    pub(crate) traceparent: Option<&'a str>,
    pub(crate) tags: Option<&'c str>,
    pub(crate) group: Option<&'a str>,
}

impl InsertRow<'_, '_> {
    /// `$1`-`$20` of `sql/apply_submit_one.sql`.
    pub(crate) fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        let (c, i) = (self.cols, self.i);
        vec![
            &c.ids[i],
            &c.queue[i],
            &c.kind[i],
            &c.payload[i],
            &c.priority[i],
            &c.state[i],
            &c.attempts[i],
            &c.max_attempts[i],
            &c.ready_at[i],
            &c.created_at[i],
            &c.finished_at[i],
            &c.key[i],
            &c.result[i],
            &c.token[i],
            &c.expires[i],
            &c.by[i],
            &c.error[i],
            &c.lease_for[i],
            &c.timeout[i],
            &c.waiting_on[i],
        ]
    }
}

/// The columns of a batch's events (`sql/apply_events.sql`).
pub(crate) struct EventCols<'a> {
    job: Vec<i64>,
    base: Vec<Option<i64>>,
    ord: Vec<i64>,
    at: Vec<i64>,
    kind: Vec<&'a str>,
    data: Vec<&'a str>,
}

impl<'a> EventCols<'a> {
    pub(crate) fn new(evs: &[EventRow<'a>]) -> Self {
        Self {
            job: evs.iter().map(|e| e.job.0).collect(),
            base: evs.iter().map(|e| e.base).collect(),
            ord: evs.iter().map(|e| e.ord).collect(),
            at: evs.iter().map(|e| e.at.as_millis()).collect(),
            kind: evs.iter().map(|e| e.kind).collect(),
            data: evs.iter().map(|e| e.data).collect(),
        }
    }

    pub(crate) fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![&self.job, &self.base, &self.ord, &self.at, &self.kind, &self.data]
    }
}

/// Each job's number of events in `events` (the last one's place among
/// them).
fn last_ords(events: &[EventRow<'_>]) -> HashMap<i64, i64> {
    let mut last = HashMap::new();
    for e in events {
        let n = last.entry(e.job.0).or_insert(0);
        *n = e.ord.max(*n);
    }
    last
}

/// Nothing but jobs' rows and their events: no queue settings, schedules,
/// deletes or dependency edges.
fn jobs_and_events_only(c: &Changes<'_>) -> bool {
    c.queues.is_empty()
        && c.marks.is_empty()
        && c.fields.is_empty()
        && c.waits.is_empty()
        && c.waits_ended.is_empty()
        && c.schedules.is_empty()
        && c.deletes.is_empty()
        && c.settled.is_empty()
        && c.dependents.is_empty()
}

/// Only new jobs and their own events: what `sql/apply_submit.sql` writes.
pub(crate) fn only_new_jobs(c: &Changes<'_>) -> bool {
    jobs_and_events_only(c)
        && c.heads.is_empty()
        && c.heads_unread.is_empty()
        && c.updates.is_empty()
        && c.events
            .iter()
            .all(|e| e.base == Some(0) && c.inserts.iter().any(|j| j.id == e.job))
}

/// A batch's writes as pipelined requests (`sql/apply_*.sql`): at most
/// eleven statements (and one per schedule, one per job whose `last_seq`
/// a user's event forgets), each checking its own row count.
pub(crate) struct Writes<'a> {
    queues_st: Stmt,
    queues: QueueCols<'a>,
    schedule_put_st: Stmt,
    schedule_delete_st: Stmt,
    schedules: Vec<ScheduleRow<'a>>,
    delete_st: Stmt,
    update_st: Stmt,
    insert_st: Stmt,
    events_st: Stmt,
    forget_st: Stmt,
    deps_st: Stmt,
    deps: DepCols,
    settled_st: Stmt,
    settled: Vec<i64>,
    marks_st: Stmt,
    marks: MarkCols<'a>,
    waits_st: Stmt,
    wait_ids: Vec<i64>,
    wait_keys: Vec<&'a str>,
    wait_steps: Vec<&'a str>,
    wait_until: Vec<i64>,
    waits_ended: Vec<i64>,
    fields_st: Stmt,
    field_ids: Vec<i64>,
    payloads: Vec<Option<&'a [u8]>>,
    progress: Vec<Option<&'a str>>,
    steps: Vec<Option<&'a [u8]>>,
    field_count: i64,
    deletes: Vec<i64>,
    /// Updates that make jobs READY, written before the others when the
    /// batch also takes grouped jobs out of READY (see `reqs`).
    early: UpdateCols<'a>,
    plain: UpdateCols<'a>,
    taking: UpdateCols<'a>,
    inserts: InsertCols<'a>,
    /// The events no update writes (`sql/apply_events.sql`), and the jobs
    /// among theirs that the batch neither inserts nor updates.
    events: EventCols<'a>,
    forget: Vec<i64>,
    counts: [i64; 8],
    /// The throughput history's minute the batch counts in.
    minute: i64,
    /// `sql/apply_update_one.sql`, for a batch of one transition and its
    /// one event.
    one: Option<Stmt>,
    /// `sql/apply_heads.sql` and its columns (`Changes::heads`).
    heads_st: Option<Stmt>,
    heads: (Vec<&'a str>, Vec<i64>, Vec<&'a str>, Vec<i64>),
    /// `sql/apply_turns.sql` and the jobs the updates make READY, in the
    /// batch's order, when there are two or more.
    turns_st: Option<Stmt>,
    entering: Vec<i64>,
}

/// The columns of a batch's marks (`sql/apply_marks.sql`), the batch's
/// time and their count.
pub(crate) struct MarkCols<'a> {
    key: Vec<&'a str>,
    value: Vec<&'a str>,
    expires_at: Vec<i64>,
    at: i64,
    count: i64,
}

impl<'a> MarkCols<'a> {
    fn new(c: &Changes<'a>) -> Self {
        Self {
            key: c.marks.iter().map(|m| m.key).collect(),
            value: c.marks.iter().map(|m| m.value).collect(),
            expires_at: c.marks.iter().map(|m| m.expires_at.as_millis()).collect(),
            at: c.at.as_millis(),
            count: i64::try_from(c.marks.len()).unwrap_or(i64::MAX),
        }
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        vec![&self.key, &self.value, &self.expires_at, &self.at, &self.count]
    }
}

/// The columns of a batch's new dependency edges (`sql/apply_deps.sql`).
pub(crate) struct DepCols {
    parent: Vec<i64>,
    child: Vec<i64>,
    on_failure: Vec<&'static str>,
}

impl DepCols {
    fn new(ds: &[relay_store::Dependent]) -> Self {
        Self {
            parent: ds.iter().map(|d| d.parent.0).collect(),
            child: ds.iter().map(|d| d.child.0).collect(),
            on_failure: ds.iter().map(|d| d.on_failure.as_str()).collect(),
        }
    }
}

impl<'a> Writes<'a> {
    pub(crate) fn new(pipe: &mut Pipe, c: &Changes<'a>) -> Result<Self, StoreError> {
        let split = c.updates.len() - c.updates_taking_keys.min(c.updates.len());
        let (plain, taking) = c.updates.split_at(split);
        let n = |len: usize| i64::try_from(len).unwrap_or(i64::MAX);
        let enters = |u: &JobUpdate| u.status.state == JobState::Ready && u.expect_state != JobState::Ready;
        let entering: Vec<i64> = c.updates.iter().filter(|u| enters(u)).map(|u| u.id.0).collect();
        // A job's turn is given as its row is written, after its group's
        // READY jobs (sql/migrations/0020): a batch that reclaims or
        // promotes jobs and also takes grouped jobs out of READY (a claim)
        // writes the jobs entering READY first, so that they queue behind
        // the jobs the batch found READY, as the engine orders the batch
        // (promotions, then the claim) and SQLite writes it. In one
        // statement the rows are written in the plan's order, and a job
        // written after its group's head was taken went before the head's
        // successor. (A finished job retried to READY while taking its
        // unique key back stays with the updates taking keys, written last
        // so that a key released in the batch is free first: in a batch
        // whose claim takes its group's head it may take a turn level with
        // the head's successor rather than behind it.)
        let split_entering = !entering.is_empty() && (!c.heads.is_empty() || !c.heads_unread.is_empty());
        let ev = &c.events;
        let (early, plain) = if split_entering {
            (
                UpdateCols::new(plain.iter().filter(|u| enters(u)), ev),
                UpdateCols::new(plain.iter().filter(|u| !enters(u)), ev),
            )
        } else {
            (UpdateCols::new([].iter(), ev), UpdateCols::new(plain.iter(), ev))
        };
        // The events the updates do not write: new jobs' and those of jobs
        // the batch leaves as they are (sql/apply_events.sql), whose
        // last_seq it forgets.
        let updated: HashSet<i64> = c.updates.iter().map(|u| u.id.0).collect();
        let inserted: HashSet<i64> = c.inserts.iter().map(|j| j.id.0).collect();
        let rest: Vec<EventRow<'a>> = ev.iter().filter(|e| !updated.contains(&e.job.0)).copied().collect();
        let mut forget: Vec<i64> = rest
            .iter()
            .map(|e| e.job.0)
            .filter(|id| !inserted.contains(id))
            .collect();
        forget.sort_unstable();
        forget.dedup();
        Ok(Self {
            queues_st: pipe.stmt(include_str!("../sql/apply_queues.sql"))?,
            queues: QueueCols::new(&c.queues),
            schedule_put_st: pipe.stmt(include_str!("../sql/schedule_put.sql"))?,
            schedule_delete_st: pipe.stmt(include_str!("../sql/schedule_delete.sql"))?,
            schedules: c.schedules.iter().map(ScheduleRow::new).collect(),
            delete_st: pipe.stmt(include_str!("../sql/apply_delete.sql"))?,
            update_st: pipe.stmt(include_str!("../sql/apply_update.sql"))?,
            insert_st: pipe.stmt(include_str!("../sql/apply_insert.sql"))?,
            events_st: pipe.stmt(include_str!("../sql/apply_events.sql"))?,
            forget_st: pipe.stmt(include_str!("../sql/apply_forget.sql"))?,
            deps_st: pipe.stmt(include_str!("../sql/apply_deps.sql"))?,
            deps: DepCols::new(&c.dependents),
            settled_st: pipe.stmt(include_str!("../sql/apply_settled.sql"))?,
            settled: c.settled.iter().map(|id| id.0).collect(),
            marks_st: pipe.stmt(include_str!("../sql/apply_marks.sql"))?,
            marks: MarkCols::new(c),
            waits_st: pipe.stmt(include_str!("../sql/apply_waits.sql"))?,
            wait_ids: c.waits.iter().map(|w| w.job.0).collect(),
            wait_keys: c.waits.iter().map(|w| w.key).collect(),
            wait_steps: c.waits.iter().map(|w| w.step).collect(),
            wait_until: c.waits.iter().map(|w| w.until.as_millis()).collect(),
            waits_ended: c.waits_ended.iter().map(|id| id.0).collect(),
            fields_st: pipe.stmt(include_str!("../sql/apply_fields.sql"))?,
            field_ids: c.fields.iter().map(|f| f.id.0).collect(),
            payloads: c.fields.iter().map(|f| f.payload).collect(),
            progress: c.fields.iter().map(|f| f.progress).collect(),
            steps: c.fields.iter().map(|f| f.steps).collect(),
            field_count: n(c.fields.len()),
            deletes: c.deletes.iter().map(|id| id.0).collect(),
            counts: [
                n(c.queues.len()),
                n(c.deletes.len()),
                n(early.ids.len()),
                n(plain.ids.len()),
                n(taking.len()),
                n(c.inserts.len()),
                n(c.dependents.len()),
                n(rest.len()),
            ],
            early,
            plain,
            taking: UpdateCols::new(taking.iter(), ev),
            inserts: InsertCols::new(&c.inserts, ev),
            events: EventCols::new(&rest),
            forget,
            minute: relay_store::minute_of(c.at).as_millis(),
            one: if one_transition(c) {
                Some(pipe.stmt(include_str!("../sql/apply_update_one.sql"))?)
            } else {
                None
            },
            heads_st: if c.heads.is_empty() && c.heads_unread.is_empty() {
                None
            } else {
                Some(pipe.stmt(include_str!("../sql/apply_heads.sql"))?)
            },
            heads: (
                c.heads.iter().map(|h| h.0).collect(),
                c.heads.iter().map(|h| i64::from(h.1.get())).collect(),
                c.heads.iter().map(|h| h.2).collect(),
                c.heads_unread.iter().map(|id| id.0).collect(),
            ),
            turns_st: if entering.len() > 1 {
                Some(pipe.stmt(include_str!("../sql/apply_turns.sql"))?)
            } else {
                None
            },
            entering,
        })
    }

    /// Queue settings, deletes, updates (those taking keys back last),
    /// inserts, dependency edges, events.
    pub(crate) fn reqs(&self) -> Vec<Req<'_>> {
        let mut reqs = Vec::with_capacity(8);
        // First: the unread jobs' groups are read before they are written.
        if let Some(st) = &self.heads_st {
            let h = &self.heads;
            reqs.push(Req::Write(st, vec![&h.0, &h.1, &h.2, &h.3]));
        }
        if let Some(st) = &self.one {
            reqs.push(self.one_req(st));
            return reqs;
        }
        let [queues, deletes, early, plain, taking, inserts, deps, events] = &self.counts;
        if self.marks.count > 0 {
            reqs.push(Req::Write(&self.marks_st, self.marks.params()));
        }
        if *queues > 0 {
            let mut p = self.queues.params();
            p.push(queues);
            p.push(&self.queues.max_leased_per_group);
            reqs.push(Req::Write(&self.queues_st, p));
        }
        for s in &self.schedules {
            let st = if s.put.is_some() {
                &self.schedule_put_st
            } else {
                &self.schedule_delete_st
            };
            reqs.push(Req::Write(st, s.params()));
        }
        if *deletes > 0 {
            reqs.push(Req::Write(&self.delete_st, vec![&self.deletes, deletes]));
        }
        if !self.settled.is_empty() {
            reqs.push(Req::Write(&self.settled_st, vec![&self.settled]));
        }
        for (cols, count) in [(&self.early, early), (&self.plain, plain), (&self.taking, taking)] {
            if *count > 0 {
                let mut p = cols.params();
                p.extend_from_slice(&[count, &cols.succeeded, &cols.failed, &cols.dead, &self.minute]);
                p.extend_from_slice(&cols.event_params());
                reqs.push(Req::Write(&self.update_st, p));
            }
        }
        if let Some(st) = &self.turns_st {
            reqs.push(Req::Write(st, vec![&self.entering]));
        }
        if *inserts > 0 {
            let mut p = self.inserts.params();
            p.push(inserts);
            p.push(&self.inserts.traceparent);
            p.push(&self.inserts.tags);
            p.push(&self.minute);
            p.push(&self.inserts.group);
            p.push(&self.inserts.last_seq);
            reqs.push(Req::Write(&self.insert_st, p));
        }
        // After the inserts: a job inserted in this batch may take fields too.
        if self.field_count > 0 {
            reqs.push(Req::Write(
                &self.fields_st,
                vec![
                    &self.field_ids,
                    &self.payloads,
                    &self.progress,
                    &self.steps,
                    &self.field_count,
                ],
            ));
        }
        if *deps > 0 {
            let d = &self.deps;
            reqs.push(Req::Write(
                &self.deps_st,
                vec![&d.parent, &d.child, &d.on_failure, deps],
            ));
        }
        for id in &self.forget {
            reqs.push(Req::Write(&self.forget_st, vec![id]));
        }
        if *events > 0 {
            let mut p = self.events.params();
            p.push(events);
            reqs.push(Req::Write(&self.events_st, p));
        }
        // After the jobs' rows: a wait refers to its job.
        if !self.wait_ids.is_empty() || !self.waits_ended.is_empty() {
            reqs.push(Req::Write(
                &self.waits_st,
                vec![
                    &self.wait_ids,
                    &self.wait_keys,
                    &self.wait_steps,
                    &self.wait_until,
                    &self.waits_ended,
                ],
            ));
        }
        reqs
    }

    /// The one transition and its event (if any) as the scalars of
    /// `sql/apply_update_one.sql` (see [`one_transition`]).
    fn one_req<'s>(&'s self, st: &'s Stmt) -> Req<'s> {
        /// The event's columns where there is none (`$23` says so).
        static NO_EVENT: (Option<i64>, i64, &str) = (None, 0, "");
        let u = [&self.early, &self.plain]
            .into_iter()
            .find(|u| !u.ids.is_empty())
            .unwrap_or(&self.taking);
        let e = &u.ev;
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![
            &u.ids[0],
            &u.expect_state[0],
            &u.expect_token[0],
            &u.state[0],
            &u.attempts[0],
            &u.ready_at[0],
            &u.finished_at[0],
            &u.token[0],
            &u.expires[0],
            &u.by[0],
            &u.error[0],
            &u.result[0],
            &u.waiting_on[0],
            &u.succeeded[0],
            &u.failed[0],
            &u.dead[0],
            &self.minute,
        ];
        if e.job.is_empty() {
            let (base, zero, empty) = &NO_EVENT;
            params.extend_from_slice(&[base, zero, zero, empty, empty, &false]);
        } else {
            params.extend_from_slice(&[&e.base[0], &e.ord[0], &e.at[0], &e.kind[0], &e.data[0], &true]);
        }
        Req::Write(st, params)
    }
}

/// One transition of an existing job and its event, if it has one (an
/// extend has none), and nothing else: a lone lease, ack, nack, snooze or
/// extend. Written by one statement with scalar parameters
/// (`sql/apply_update_one.sql`) instead of two over arrays.
pub(crate) fn one_transition(c: &Changes<'_>) -> bool {
    let shape = match (c.updates.as_slice(), c.events.as_slice()) {
        ([u], [e]) => u.id == e.job,
        ([_], []) => true,
        _ => false,
    };
    shape && c.inserts.is_empty() && jobs_and_events_only(c)
}
