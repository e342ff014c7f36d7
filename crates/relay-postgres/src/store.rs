//! The writer connection on PostgreSQL (read connections: `reader.rs`).

use crate::connect::map_err;
use crate::decode;
use crate::pipe::{Answer, Pipe, Req};
use crate::write::{only_new_jobs, InsertCols, Writes};

mod unread;
use crate::stmt::{Pooler, Stmt};
use postgres::Row;
use relay_core::{Candidate, Job, JobId, JobStatus, QueueSettings, Schedule, Timestamp};
use relay_store::{Behaviour, Changes, CommitFailed, Prefetch, Prefetched, ReadyRow, StatusRead, Store, StoreError};
use std::sync::{Arc, Mutex};
use tokio_postgres::types::ToSql;

pub(crate) struct PgStore {
    pipe: Pipe,
    /// Where to connect again after the connection dropped.
    url: String,
    /// Job ids drawn from the sequence and not handed out yet, shared by
    /// the writers of one Relay: a caller's submits get rising ids
    /// whichever writer takes them (claims break ties of `ready_at` by id).
    ids: Arc<Mutex<Vec<JobId>>>,
    /// `NOTIFY` owed at the commit (jobs became ready).
    notify: bool,
    /// Reads refused (see `Store::seal_reads`).
    sealed: bool,
    /// Candidates locked with `SKIP LOCKED` (see `PgBackend::skip_locked`).
    skip_locked: bool,
    /// How the connection reaches the server (see [`Pooler`]).
    pooler: Pooler,
}

/// `sql` without its `SKIP LOCKED` (see `PgBackend::skip_locked`): made
/// once per statement and kept for the process (a handful of statements;
/// prepared statements are cached by their text's address).
fn without_skip_locked(sql: &'static str) -> &'static str {
    type Made = std::collections::HashMap<(usize, usize), &'static str>;
    static MADE: std::sync::LazyLock<Mutex<Made>> = std::sync::LazyLock::new(Mutex::default);
    let mut made = MADE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    made.entry((sql.as_ptr() as usize, sql.len()))
        .or_insert_with(|| Box::leak(sql.replace("SKIP LOCKED", "").into_boxed_str()))
}

/// Ids drawn from the sequence at a time: most batches then draw none.
const ID_BLOCK: usize = 256;

/// The writer's connection: the schema migrated (on a connection of its
/// own), the session's durability settings read back.
pub(crate) fn open_writer(url: &str, pooler: Pooler) -> Result<Pipe, StoreError> {
    let mut client = crate::connect::connect(url)?;
    crate::connect::migrate(&mut client)?;
    drop(client);
    let mut pipe = Pipe::connect(url, pooler)?;
    let pooled = pipe.pooled();
    let synchronous_commit = crate::connect::check_durability(&mut pipe, pooled)?;
    if pipe.pooled() {
        // No session is the writer's own: each transaction sets these.
        pipe.pin_settings(&synchronous_commit);
        return Ok(pipe);
    }
    // The writer's statements take arrays and always run the same plan
    // (index lookups by id, one seek per class): planning them afresh for
    // each batch (PostgreSQL's custom plans for the first executions, and
    // whenever it judges them cheaper) cost more than running them
    // (1x1 lease+ack 762 -> 1,267 jobs/s, docs/BENCHMARKS.md).
    pipe.simple("SET plan_cache_mode = force_generic_plan")?;
    // The writer's statements rely on READ COMMITTED (each statement sees
    // what committed before it began, after the locks before it were
    // taken), whatever default the database or role was given.
    pipe.simple("SET default_transaction_isolation = 'read committed'")?;
    Ok(pipe)
}

impl crate::connect::Session for Pipe {
    fn show(&mut self, name: &'static str) -> Result<String, StoreError> {
        Pipe::show(self, name)
    }

    fn exec(&mut self, sql: &str) -> Result<(), StoreError> {
        self.simple(sql)
    }
}

impl PgStore {
    pub(crate) fn new(pipe: Pipe, url: String, ids: Arc<Mutex<Vec<JobId>>>, skip_locked: bool, pooler: Pooler) -> Self {
        Self {
            pipe,
            url,
            ids,
            notify: false,
            sealed: false,
            skip_locked,
            pooler,
        }
    }

    /// A statement that locks candidates, as this store runs it.
    fn locking(&self, sql: &'static str) -> &'static str {
        if self.skip_locked {
            sql
        } else {
            without_skip_locked(sql)
        }
    }

    fn query(&mut self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, StoreError> {
        if self.sealed {
            return Err(StoreError::Busy);
        }
        self.pipe.query(sql, params)
    }

    fn query_opt(&mut self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<Option<Row>, StoreError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    fn query_one(&mut self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, StoreError> {
        self.query_opt(sql, params)?
            .ok_or_else(|| StoreError::corrupt(None, "a query that always returns a row returned none"))
    }
}

fn ready_rows(rows: &[Row]) -> Result<Vec<ReadyRow>, StoreError> {
    rows.iter()
        .map(|row| {
            // A page of heads (job_ready.sql, job_fair_after.sql): the
            // head's key after the job's columns.
            let head = if row.len() > 29 {
                let turn: Option<i64> = decode::col(row, 26, "head_turn", None)?;
                let id: Option<i64> = decode::col(row, 27, "head_id", None)?;
                turn.zip(id).map(|(t, i)| (t, JobId(i)))
            } else {
                None
            };
            if let (Some((turn, head_id)), None) = (head, decode::col::<Option<i64>>(row, 0, "id", None)?) {
                // Every READY job of the head's group is held by other
                // transactions (or none is left): the head's key only.
                let group: String = decode::col(row, 28, "head_grp", Some(head_id))?;
                return Ok(ReadyRow {
                    candidate: Candidate {
                        id: head_id,
                        priority: decode::priority(row, 29, Some(head_id))?,
                        ready_at: Timestamp::from_millis(0),
                    },
                    job: None,
                    turn: Some(relay_store::Turn {
                        head,
                        held: true,
                        ..relay_store::Turn::new(turn, group)
                    }),
                });
            }
            let id = JobId(decode::col(row, 0, "id", None)?);
            let candidate = Candidate {
                id,
                priority: decode::priority(row, 4, Some(id))?,
                ready_at: Timestamp::from_millis(decode::col(row, 11, "ready_at", Some(id))?),
            };
            let turn = match (
                decode::col::<Option<i64>>(row, 25, "turn", Some(id))?,
                decode::col::<Option<String>>(row, 23, "grp", Some(id))?,
            ) {
                (Some(turn), Some(group)) => Some(relay_store::Turn {
                    head,
                    ..relay_store::Turn::new(turn, group)
                }),
                _ => None,
            };
            Ok(ReadyRow {
                candidate,
                job: Some(decode::job(row)),
                turn,
            })
        })
        .collect()
}

/// Rows of `id` then the status columns then `priority` and `waiting_on`, as
/// `sql/job_get_statuses.sql` returns them.
fn status_rows(rows: &[Row]) -> Result<Vec<StatusRead>, StoreError> {
    rows.iter()
        .map(|row| {
            let id = JobId(decode::col(row, 0, "id", None)?);
            let status = decode::priority(row, 10, Some(id)).and_then(|_| decode::status(row, 1, 11, Some(id)));
            Ok((id, status))
        })
        .collect()
}

fn rows(a: Option<Answer>) -> Vec<Row> {
    match a {
        Some(Answer::Rows(r)) => r,
        _ => Vec::new(),
    }
}

impl Store for PgStore {
    fn throughput_prune(&mut self, before: Timestamp) -> Result<u64, StoreError> {
        self.pipe.begin_now()?; // a write: never in a flight with BEGIN
        let row = self.query_one(include_str!("../sql/throughput_prune.sql"), &[&before.as_millis()])?;
        let n: i64 = decode::col(&row, 0, "pruned", None)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn mark_prune(&mut self, before: Timestamp) -> Result<u64, StoreError> {
        self.pipe.begin_now()?; // a write: never in a flight with BEGIN
        let batch = limit(relay_store::PRUNE_BATCH);
        let row = self.query_one(
            self.locking(include_str!("../sql/mark_prune.sql")),
            &[&before.as_millis(), &batch],
        )?;
        let n: i64 = decode::col(&row, 0, "pruned", None)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn job_finished_window(&mut self, after: JobId) -> Result<relay_store::FinishedWindow, StoreError> {
        let rows = self.query(
            include_str!("../sql/job_finished_window.sql"),
            &[&after.0, &limit(relay_store::PRUNE_SCAN)],
        )?;
        let mut window = relay_store::FinishedWindow::default();
        for row in &rows {
            let n: i64 = decode::col(row, 7, "window size", None)?;
            window.last = decode::col::<Option<i64>>(row, 6, "last id", None)?
                .filter(|_| n >= limit(relay_store::PRUNE_SCAN))
                .map(JobId);
            if decode::col::<Option<i64>>(row, 0, "id", None)?.is_none() {
                continue; // the lone row of a window without finished jobs
            }
            match decode::finished(row) {
                Ok(f) => window.finished.push(f),
                Err(reason) => tracing::warn!(%reason, "a finished job does not decode; the prune leaves it"),
            }
        }
        Ok(window)
    }

    fn worker_put(
        &mut self,
        id: &str,
        beat: &str,
        seen_at: Timestamp,
        stopped: bool,
        owner: &relay_store::WorkerOwner<'_>,
    ) -> Result<bool, StoreError> {
        self.pipe.begin_now()?; // a write: never in a flight with BEGIN
        let at = seen_at.as_millis();
        let forgotten = owner.forgotten_before.as_millis();
        let rows = self.query(
            include_str!("../sql/worker_put.sql"),
            &[
                &id,
                &beat,
                &at,
                &stopped.then_some(at),
                &owner.presented,
                &owner.remote,
                &forgotten,
                &owner.keep,
            ],
        )?;
        Ok(!rows.is_empty())
    }

    fn worker_prune(&mut self, before: Timestamp) -> Result<u64, StoreError> {
        self.pipe.begin_now()?; // a write: never in a flight with BEGIN
        let row = self.query_one(include_str!("../sql/worker_prune.sql"), &[&before.as_millis()])?;
        let n: i64 = decode::col(&row, 0, "pruned", None)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn job_delete_finished(&mut self, jobs: &[(JobId, Timestamp)]) -> Result<u64, StoreError> {
        if jobs.is_empty() {
            return Ok(0);
        }
        self.pipe.begin_now()?; // a write: never in a flight with BEGIN
        let ids: Vec<i64> = jobs.iter().map(|(id, _)| id.0).collect();
        let at: Vec<i64> = jobs.iter().map(|(_, t)| t.as_millis()).collect();
        let row = self.query_one(include_str!("../sql/job_delete_finished.sql"), &[&ids, &at])?;
        let n: i64 = decode::col(&row, 0, "pruned", None)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Sent with the COMMIT (one flight).
    fn notify_ready(&mut self) -> Result<(), StoreError> {
        self.notify = true;
        Ok(())
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        if self.pipe.is_closed() {
            // The server or the network dropped the connection (the batch
            // that met it was answered already): connect again, with the
            // same checks as at open. Statements are prepared anew.
            tracing::warn!("the PostgreSQL connection of the writer dropped; connecting again");
            self.pipe = open_writer(&self.url, self.pooler)?;
        }
        self.notify = false;
        self.pipe.wrap_unwrapped()?;
        self.pipe.begin();
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        if std::mem::take(&mut self.notify) {
            let sql = concat!(include_str!("../sql/notify_ready.sql"), ";\nCOMMIT");
            return self.pipe.finish(sql);
        }
        self.pipe.finish("COMMIT")
    }

    fn rollback(&mut self) -> Result<(), StoreError> {
        self.notify = false;
        self.pipe.finish("ROLLBACK")
    }

    /// Deadlocks and unique keys taken by another process are transient,
    /// claims lock their candidates (`FOR UPDATE SKIP LOCKED`), and a
    /// holder's batch may be written unread (`apply_unread`).
    fn behaviour(&self) -> Behaviour {
        Behaviour {
            failed_commit_is_final: false,
            busy_is_transient: true,
            locks_candidates: true,
            applies_unread: true,
            // Heads only (relay_group_heads, migrations/0019_group_heads.sql);
            // a head another transaction holds is read past
            // (sql/job_ready.sql).
            group_heads: true,
        }
    }

    fn job_ids(&mut self, n: usize) -> Result<Vec<JobId>, StoreError> {
        let ids = Arc::clone(&self.ids);
        let mut pool = ids.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if pool.len() < n {
            let want = i64::try_from(n.max(ID_BLOCK)).unwrap_or(i64::MAX);
            let rows = self.query(include_str!("../sql/job_ids.sql"), &[&want])?;
            let mut fresh = rows
                .iter()
                .map(|r| decode::col(r, 0, "nextval", None).map(JobId))
                .collect::<Result<Vec<_>, _>>()?;
            // Handed out from the end: keep the lowest last.
            fresh.sort_unstable_by(|a, b| b.cmp(a));
            fresh.append(&mut pool);
            *pool = fresh;
        }
        let at = pool.len().saturating_sub(n);
        let mut out = pool.split_off(at);
        out.reverse();
        Ok(out)
    }

    fn job_find_active_by_key(&mut self, key: &str) -> Result<Option<JobId>, StoreError> {
        let row = self.query_opt(include_str!("../sql/job_find_active_by_key.sql"), &[&key])?;
        row.map(|r| decode::col(&r, 0, "id", None).map(JobId)).transpose()
    }

    fn job_unique_key(&mut self, id: JobId) -> Result<Option<String>, StoreError> {
        match self.query_opt(include_str!("../sql/job_unique_key.sql"), &[&id.0])? {
            Some(row) => decode::col(&row, 0, "unique_key", Some(id)),
            None => Ok(None),
        }
    }

    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        match self.query_opt(include_str!("../sql/job_get_locked.sql"), &[&id.0])? {
            Some(row) => decode::job(&row).map(Some),
            None => Ok(None),
        }
    }

    fn job_get_status(&mut self, id: JobId) -> Result<Option<JobStatus>, StoreError> {
        match self.query_opt(include_str!("../sql/job_get_status.sql"), &[&id.0])? {
            Some(row) => {
                decode::priority(&row, 9, Some(id))?;
                decode::status(&row, 0, 10, Some(id)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn job_get_statuses(&mut self, ids: &[JobId]) -> Result<Vec<StatusRead>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let raw: Vec<i64> = ids.iter().map(|id| id.0).collect();
        let rows = self.query(include_str!("../sql/job_get_statuses.sql"), &[&raw])?;
        status_rows(&rows)
    }

    /// Every read in one flight (with the transaction's `BEGIN`). The
    /// claimed queues with limits first: their rows are locked before any
    /// job's (one order in every batch), and their counts of leased jobs
    /// are read once the locks are held.
    fn prefetch(&mut self, p: &Prefetch<'_>) -> Result<Prefetched, StoreError> {
        if self.sealed {
            return Err(StoreError::Busy);
        }
        let limited_st = self.pipe.stmt(include_str!("../sql/queue_settings_limited.sql"))?;
        let counts_st = self.pipe.stmt(include_str!("../sql/queue_leased_counts.sql"))?;
        let groups_st = self.pipe.stmt(include_str!("../sql/queue_group_leased.sql"))?;
        let queues_st = self.pipe.stmt(include_str!("../sql/queue_settings.sql"))?;
        let overdue_st = self
            .pipe
            .stmt(self.locking(include_str!("../sql/job_overdue_statuses.sql")))?;
        let statuses_st = self.pipe.stmt(include_str!("../sql/job_get_statuses.sql"))?;
        let ready_st = self.pipe.stmt(self.locking(include_str!("../sql/job_ready.sql")))?;
        let deps_st = self.pipe.stmt(include_str!("../sql/job_dependents.sql"))?;
        let names: Vec<&str> = p.ready.iter().map(|(q, _)| *q).collect();
        let now = p.now.as_millis();
        let ids: Vec<i64> = p.statuses.iter().map(|id| id.0).collect();
        let may_finish: Vec<i64> = p.may_finish.iter().map(|id| id.0).collect();
        let limits: Vec<i64> = p
            .ready
            .iter()
            .map(|(_, l)| i64::try_from(*l).unwrap_or(i64::MAX))
            .collect();
        let reap = limit(relay_store::REAP_BATCH);
        let first_page = limits.iter().copied().max().unwrap_or(1);
        let mut reqs = Vec::with_capacity(5 + p.ready.len());
        if !names.is_empty() {
            reqs.push(Req::Read(&limited_st, vec![&names]));
            reqs.push(Req::Read(&counts_st, vec![&names, &now]));
            reqs.push(Req::Read(&groups_st, vec![&names, &now, &first_page]));
            reqs.push(Req::Read(&queues_st, vec![&names]));
        }
        if p.overdue {
            reqs.push(Req::Read(&overdue_st, vec![&now, &reap]));
        }
        if !ids.is_empty() {
            reqs.push(Req::Read(&statuses_st, vec![&ids]));
        }
        if !may_finish.is_empty() {
            // After the statement that locks them (see job_dependents.sql).
            reqs.push(Req::Read(&deps_st, vec![&may_finish]));
        }
        for ((queue, _), limit) in p.ready.iter().zip(&limits) {
            reqs.push(Req::Read(&ready_st, vec![queue, &now, limit, &false]));
        }
        if reqs.is_empty() {
            return Ok(Prefetched::default());
        }
        let mut answers = self.pipe.run(reqs)?.into_iter();
        let (mut queues, mut leased) = (Vec::new(), Vec::new());
        let mut group_leased: Vec<(String, Vec<(String, u64)>)> = Vec::new();
        if !names.is_empty() {
            for r in rows(answers.next()) {
                queues.push(decode::queue_settings(&r)?);
            }
            for r in rows(answers.next()) {
                let n: i64 = decode::col(&r, 1, "count", None)?;
                leased.push((decode::col(&r, 0, "queue", None)?, u64::try_from(n).unwrap_or(0)));
            }
            for r in rows(answers.next()) {
                let queue: String = decode::col(&r, 0, "queue", None)?;
                let n: i64 = decode::col(&r, 2, "count", None)?;
                let group = (decode::col(&r, 1, "grp", None)?, u64::try_from(n).unwrap_or(0));
                match group_leased.iter_mut().find(|(q, _)| *q == queue) {
                    Some((_, gs)) => gs.push(group),
                    None => group_leased.push((queue, vec![group])),
                }
            }
            for r in rows(answers.next()) {
                queues.push(decode::queue_settings(&r)?);
            }
        }
        let overdue = if p.overdue {
            status_rows(&rows(answers.next()))?
        } else {
            Vec::new()
        };
        let statuses = if ids.is_empty() {
            Vec::new()
        } else {
            status_rows(&rows(answers.next()))?
        };
        let dependents = if may_finish.is_empty() {
            Vec::new()
        } else {
            rows(answers.next()).iter().map(decode::dependent).collect()
        };
        let ready = p
            .ready
            .iter()
            .map(|_| ready_rows(&rows(answers.next())))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Prefetched {
            overdue,
            statuses,
            queues,
            leased,
            group_leased,
            ready,
            dependents,
        })
    }

    fn job_dependents(&mut self, parents: &[JobId]) -> Result<Vec<relay_store::DependentRead>, StoreError> {
        if parents.is_empty() {
            return Ok(Vec::new());
        }
        let raw: Vec<i64> = parents.iter().map(|id| id.0).collect();
        let rows = self.query(include_str!("../sql/job_dependents.sql"), &[&raw])?;
        Ok(rows.iter().map(decode::dependent).collect())
    }

    fn queue_settings(&mut self, names: &[&str]) -> Result<Vec<(String, QueueSettings)>, StoreError> {
        let mut out = Vec::new();
        for sql in [
            include_str!("../sql/queue_settings_limited.sql"),
            include_str!("../sql/queue_settings.sql"),
        ] {
            for r in self.query(sql, &[&names])? {
                out.push(decode::queue_settings(&r)?);
            }
        }
        Ok(out)
    }

    fn queue_lock(&mut self, name: &str, now: Timestamp) -> Result<QueueSettings, StoreError> {
        self.pipe.begin_now()?; // a write: never in a flight with BEGIN
        self.query(include_str!("../sql/queue_lock_insert.sql"), &[&name, &now.as_millis()])?;
        match self.query_opt(include_str!("../sql/queue_lock.sql"), &[&name])? {
            Some(r) => decode::queue_settings(&r).map(|(_, s)| s),
            None => Ok(QueueSettings::default()),
        }
    }

    fn schedules_due(&mut self, now: Timestamp, limit: usize) -> Result<Vec<Result<Schedule, StoreError>>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.query(
            self.locking(include_str!("../sql/schedules_due.sql")),
            &[&now.as_millis(), &limit],
        )?;
        Ok(rows.iter().map(decode::schedule).collect())
    }

    fn schedule_get(&mut self, name: &str) -> Result<Option<Schedule>, StoreError> {
        match self.query_opt(include_str!("../sql/schedule_get.sql"), &[&name])? {
            Some(r) => decode::schedule(&r).map(Some),
            None => Ok(None),
        }
    }

    fn job_leased_count(&mut self, queue: &str, now: Timestamp) -> Result<u64, StoreError> {
        let row = self.query_one(include_str!("../sql/job_leased_count.sql"), &[&queue, &now.as_millis()])?;
        let n: i64 = decode::col(&row, 0, "count", None)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn job_group_leased(
        &mut self,
        queue: &str,
        groups: &[&str],
        now: Timestamp,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        let rows = self.query(
            include_str!("../sql/job_group_leased.sql"),
            &[&queue, &now.as_millis(), &groups],
        )?;
        rows.iter()
            .map(|r| {
                let n: i64 = decode::col(r, 1, "count", None)?;
                Ok((decode::col(r, 0, "grp", None)?, u64::try_from(n).unwrap_or(0)))
            })
            .collect()
    }

    fn job_fair_after(
        &mut self,
        queue: &str,
        priority: relay_core::Priority,
        after: (i64, JobId),
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.query(
            self.locking(include_str!("../sql/job_fair_after.sql")),
            &[&queue, &i64::from(priority.get()), &after.0, &after.1 .0, &limit],
        )?;
        ready_rows(&rows)
    }

    fn job_group_next(
        &mut self,
        queue: &str,
        priority: relay_core::Priority,
        after: &[(&str, i64, JobId)],
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError> {
        if after.is_empty() {
            return Ok(Vec::new());
        }
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let groups: Vec<&str> = after.iter().map(|a| a.0).collect();
        let turns: Vec<i64> = after.iter().map(|a| a.1).collect();
        let ids: Vec<i64> = after.iter().map(|a| a.2 .0).collect();
        let rows = self.query(
            self.locking(include_str!("../sql/job_group_next.sql")),
            &[&queue, &i64::from(priority.get()), &groups, &turns, &ids, &limit],
        )?;
        ready_rows(&rows)
    }

    fn job_ready(&mut self, queue: &str, now: Timestamp, limit: usize) -> Result<Vec<ReadyRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.query(
            self.locking(include_str!("../sql/job_ready.sql")),
            &[&queue, &now.as_millis(), &limit, &true],
        )?;
        ready_rows(&rows)
    }

    fn job_ready_after(
        &mut self,
        queue: &str,
        now: Timestamp,
        after: Candidate,
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.query(
            self.locking(include_str!("../sql/job_ready_after.sql")),
            &[
                &queue,
                &i64::from(after.priority.get()),
                &now.as_millis(),
                &after.ready_at.as_millis(),
                &after.id.0,
                &limit,
            ],
        )?;
        ready_rows(&rows)
    }

    fn job_next_ready_at(&mut self, queue: &str, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        let row = self.query_one(
            include_str!("../sql/job_next_ready_at.sql"),
            &[&queue, &now.as_millis()],
        )?;
        let next: Option<i64> = decode::col(&row, 0, "ready_at", None)?;
        Ok(next.map(Timestamp::from_millis))
    }

    fn job_overdue(&mut self, now: Timestamp) -> Result<Vec<JobId>, StoreError> {
        let rows = self.query(
            self.locking(include_str!("../sql/job_overdue_statuses.sql")),
            &[&now.as_millis(), &limit(relay_store::REAP_BATCH)],
        )?;
        rows.iter().map(|r| decode::col(r, 0, "id", None).map(JobId)).collect()
    }

    fn mark_get(&mut self, key: &str, now: Timestamp) -> Result<Option<String>, StoreError> {
        match self.query_opt(include_str!("../sql/mark_get.sql"), &[&key, &now.as_millis()])? {
            Some(row) => decode::col(&row, 0, "value", None),
            None => Ok(None),
        }
    }

    fn event_get(&mut self, key: &str, now: Timestamp) -> Result<Option<String>, StoreError> {
        // The key's transaction lock first, in a statement of its own: the
        // read after it then sees whatever a transaction that held it
        // (a wait or an emit of the key) committed.
        self.query_one(include_str!("../sql/event_lock.sql"), &[&key])?;
        self.mark_get(key, now)
    }

    fn waits_on(&mut self, key: &str) -> Result<Vec<(JobId, String)>, StoreError> {
        let rows = self.query(include_str!("../sql/waits_on.sql"), &[&key])?;
        rows.iter()
            .map(|r| {
                let id = JobId(decode::col(r, 0, "job_id", None)?);
                Ok((id, decode::col(r, 1, "step", Some(id))?))
            })
            .collect()
    }

    fn wait_of(&mut self, id: JobId) -> Result<Option<relay_store::Wait>, StoreError> {
        match self.query_opt(include_str!("../sql/wait_of.sql"), &[&id.0])? {
            Some(r) => Ok(Some(relay_store::Wait {
                key: decode::col(&r, 0, "key", Some(id))?,
                step: decode::col(&r, 1, "step", Some(id))?,
                until: Timestamp::from_millis(decode::col(&r, 2, "until", Some(id))?),
            })),
            None => Ok(None),
        }
    }

    fn job_expiries(&mut self, id: JobId) -> Result<(u32, Option<u32>), StoreError> {
        let row = self.query_one(include_str!("../sql/job_expiries.sql"), &[&id.0])?;
        let n: i64 = decode::col(&row, 0, "expiries", Some(id))?;
        let own: Option<i64> = decode::col(&row, 1, "poison_after", Some(id))?;
        Ok((
            u32::try_from(n).unwrap_or(u32::MAX),
            own.and_then(relay_store::decode::poison_after),
        ))
    }

    fn event_last_seq(&mut self, id: JobId) -> Result<i64, StoreError> {
        let row = self.query_one(include_str!("../sql/event_last_seq.sql"), &[&id.0])?;
        decode::col(&row, 0, "seq", Some(id))
    }

    /// Any thread outside an async runtime: the writer's connection runs on
    /// a runtime of its own (`Pipe`), entered with `block_on`, which any one
    /// thread at a time may do but not from within another runtime (a
    /// blocking call from async code, or from `spawn_blocking`, goes to the
    /// writer thread as before).
    fn caller_may_commit(&self) -> bool {
        tokio::runtime::Handle::try_current().is_err()
    }

    fn seal_reads(&mut self, sealed: bool) {
        self.sealed = sealed;
    }

    /// `BEGIN`, the row's lock, the guarded write and the `COMMIT`, in one
    /// flight (`store/unread.rs`).
    fn apply_unread(&mut self, c: &Changes<'_>, expected: &JobStatus) -> Result<bool, CommitFailed> {
        self.write_unread(c, expected)
    }

    /// At most nine statements (and one per schedule), whatever the batch's
    /// size, in one flight.
    fn apply(&mut self, c: &Changes<'_>) -> Result<(), StoreError> {
        let writes = Writes::new(&mut self.pipe, c)?;
        self.pipe.run(writes.reqs()).map(drop)
    }

    /// The writes and the COMMIT in one flight. A write that fails (a
    /// unique key taken meanwhile, a count that falls short: both abort the
    /// transaction on the server) leaves the COMMIT to roll back: nothing
    /// applied.
    fn apply_commit(&mut self, c: &Changes<'_>) -> Result<(), CommitFailed> {
        let notify = std::mem::take(&mut self.notify);
        let commit = if notify {
            concat!(include_str!("../sql/notify_ready.sql"), ";\nCOMMIT")
        } else {
            "COMMIT"
        };
        if c.is_empty() {
            return self.pipe.finish(commit).map_err(CommitFailed::MaybeApplied);
        }
        if self.pipe.nothing_sent() && only_new_jobs(c) {
            return self.submit_alone(c, notify);
        }
        let writes = Writes::new(&mut self.pipe, c).map_err(CommitFailed::NotApplied)?;
        let mut reqs = writes.reqs();
        reqs.push(Req::Simple(commit));
        let sent = reqs.len();
        let mut answers = self.pipe.run_all(reqs).map_err(CommitFailed::NotApplied)?;
        if answers.len() < sent {
            // A write could not be sent, so neither was the COMMIT: the
            // transaction is open with part of the batch, and the engine
            // rolls it back.
            let e = match answers.pop() {
                // The connection was gone before the writes: plan the batch
                // again on a new one.
                Some(Err(e)) if e.is_closed() => StoreError::Busy,
                Some(Err(e)) => map_err(e),
                _ => StoreError::Io {
                    message: "a write of the batch could not be sent".into(),
                    source: "unsent".into(),
                },
            };
            return Err(CommitFailed::NotApplied(e));
        }
        let committed = answers.pop();
        for a in answers {
            if let Err(e) = a {
                // The server refused a write: the transaction aborted
                // there, and the COMMIT after it rolled back. A broken
                // connection (or a session the server ended) tells nothing
                // of the COMMIT.
                let refused = crate::pipe::refused(&e);
                let e = map_err(e);
                return Err(if refused {
                    CommitFailed::NotApplied(e)
                } else {
                    CommitFailed::MaybeApplied(e)
                });
            }
        }
        match committed {
            Some(Ok(_)) => Ok(()),
            // Refused at COMMIT (a serialization failure): rolled back.
            Some(Err(e)) if crate::pipe::refused(&e) => Err(CommitFailed::NotApplied(map_err(e))),
            Some(Err(e)) => Err(CommitFailed::MaybeApplied(map_err(e))),
            None => Err(CommitFailed::MaybeApplied(StoreError::Io {
                message: "the COMMIT got no answer".into(),
                source: "no answer".into(),
            })),
        }
    }
}

impl PgStore {
    /// A batch that read nothing and only submits: one statement, on its
    /// own (no BEGIN, no COMMIT), one round trip.
    fn submit_alone(&mut self, c: &Changes<'_>, notify: bool) -> Result<(), CommitFailed> {
        if let ([job], [event]) = (c.inserts.as_slice(), c.events.as_slice()) {
            return self.submit_one(c, job, event, notify);
        }
        let st = self
            .pipe
            .stmt(include_str!("../sql/apply_submit.sql"))
            .map_err(CommitFailed::NotApplied)?;
        let jobs = InsertCols::new(&c.inserts, &c.events);
        let job: Vec<i64> = c.events.iter().map(|e| e.job.0).collect();
        let ord: Vec<i64> = c.events.iter().map(|e| e.ord).collect();
        let at: Vec<i64> = c.events.iter().map(|e| e.at.as_millis()).collect();
        let kind: Vec<&str> = c.events.iter().map(|e| e.kind).collect();
        let data: Vec<&str> = c.events.iter().map(|e| e.data).collect();
        let n = |len: usize| i64::try_from(len).unwrap_or(i64::MAX);
        let (n_jobs, n_events) = (n(c.inserts.len()), n(c.events.len()));
        let minute = relay_store::minute_of(c.at).as_millis();
        let mut params = jobs.params();
        params.extend_from_slice(&[
            &job,
            &ord,
            &at,
            &kind,
            &data,
            &n_jobs,
            &n_events,
            &notify,
            &jobs.traceparent,
            &jobs.tags,
            &minute,
            &jobs.group,
            &jobs.last_seq,
        ]);
        self.alone(&st, &params)
    }

    /// [`PgStore::submit_alone`] for one job and its one event, with scalar
    /// parameters (`sql/apply_submit_one.sql`): the statement a lone submit
    /// sends, measured at 0.72-0.87x the time of its one-element arrays.
    fn submit_one(
        &mut self,
        c: &Changes<'_>,
        job: &relay_store::JobInsert<'_>,
        event: &relay_store::EventRow<'_>,
        notify: bool,
    ) -> Result<(), CommitFailed> {
        let st = self
            .pipe
            .stmt(include_str!("../sql/apply_submit_one.sql"))
            .map_err(CommitFailed::NotApplied)?;
        let cols = InsertCols::new(std::slice::from_ref(job), std::slice::from_ref(event));
        let row = cols.row(0);
        let minute = relay_store::minute_of(c.at).as_millis();
        let at = event.at.as_millis();
        let mut params = row.params();
        params.extend_from_slice(&[
            &event.ord,
            &at,
            &event.kind,
            &event.data,
            &notify,
            &row.traceparent,
            &row.tags,
            &minute,
            &row.group,
        ]);
        self.alone(&st, &params)
    }

    /// Runs one statement on its own (autocommit). Refused by the server:
    /// it changed nothing; any other failure: it may have been applied.
    fn alone(&mut self, st: &Stmt, params: &[&(dyn ToSql + Sync)]) -> Result<(), CommitFailed> {
        match self.pipe.autocommit(st, params) {
            Ok(_) => Ok(()),
            Err(e) if crate::pipe::refused(&e) => Err(CommitFailed::NotApplied(map_err(e))),
            Err(e) => Err(CommitFailed::MaybeApplied(map_err(e))),
        }
    }
}

/// A batch limit as the `BIGINT` a statement binds.
fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
