//! The writer connection: the [`Store`] reads, each one prepared statement
//! from `sql/`, and a batch's writes (`apply`), a cached statement per row.

use crate::connection::map_err;
use crate::decode::{self, Cols};
use relay_core::{Candidate, Job, JobId, JobState, JobStatus, QueueSettings, Recurrence, Schedule, Timestamp};
use relay_store::{Behaviour, Changes, JobInsert, JobUpdate, ReadyRow, Store, StoreError, Syncer, Turn};
use rusqlite::{params, Connection, OptionalExtension};
use std::borrow::Borrow;

pub(crate) struct SqliteStore<C = Connection> {
    /// The writer's own connection, or (inside a caller's transaction,
    /// [`crate::within`]) the caller's.
    pub(crate) conn: C,
    /// Inside a caller's transaction: `begin`/`commit`/`rollback` are a
    /// savepoint in it, never its own transaction.
    pub(crate) nested: bool,
    /// The ids this process's writers committed, shared with the backend's
    /// watch (see `watch.rs`), so that their own jobs are not taken for
    /// another connection's. `None` inside a caller's transaction (its
    /// commit is not this process's to count).
    pub(crate) own: Option<std::sync::Arc<crate::watch::OwnIds>>,
    /// The ids this transaction inserted, in order.
    pub(crate) inserted: Vec<i64>,
    /// A file (not the in-memory test database).
    pub(crate) on_disk: bool,
    /// Set when commits run with `synchronous=NORMAL` (a split commit).
    pub(crate) syncer: Option<std::sync::Arc<dyn Syncer>>,
    /// The next id to hand out in the open transaction (see `job_ids`).
    pub(crate) next_id: Option<i64>,
    /// The queues of the jobs this transaction read, for the counts (see
    /// [`Queues`]).
    pub(crate) queues: Queues,
    /// The writer's own connection, on which SQLite runs no triggers
    /// (`SQLITE_DBCONFIG_ENABLE_TRIGGER` off): SQLite runs a table's
    /// triggers' programs for every row written, grouped or not, which
    /// cost relay-bench some 4-7% of its CPU with no group in use
    /// (docs/BENCHMARKS.md). Its writes then do what the triggers do for
    /// other programs: a grouped job that becomes READY takes its turn
    /// (`job_turn_give.sql`), a head that leaves READY or is deleted
    /// hands the head on (`job_head_pass.sql`), a deleted job's tags go
    /// (`job_tags_delete.sql`). False inside a caller's transaction,
    /// whose connection runs the triggers.
    pub(crate) triggers_off: bool,
    /// The jobs without a group this transaction read as claim
    /// candidates: one of them leaving READY hands no head on, so nothing
    /// is read for it.
    pub(crate) ungrouped: std::collections::HashSet<i64>,
}

/// The queue of each job a transaction read (its status, or the whole
/// row): the batch's updates then count under their queue without asking
/// the database again (an `UPDATE ... RETURNING queue` cost lease+ack
/// about 20%, measured). A handful of queues per batch: names are kept
/// once each.
#[derive(Debug, Default)]
pub(crate) struct Queues {
    names: Vec<String>,
    of: std::collections::HashMap<i64, u32>,
}

impl Queues {
    fn note(&mut self, id: JobId, queue: &str) {
        let i = match self.names.iter().position(|n| n == queue) {
            Some(i) => i,
            None => {
                self.names.push(queue.to_owned());
                self.names.len() - 1
            }
        };
        self.of.insert(id.0, u32::try_from(i).unwrap_or(u32::MAX));
    }

    fn of(&self, id: JobId) -> Option<&str> {
        self.of
            .get(&id.0)
            .and_then(|i| self.names.get(*i as usize))
            .map(String::as_str)
    }

    fn clear(&mut self) {
        self.names.clear();
        self.of.clear();
    }
}

impl<C: Borrow<Connection>> SqliteStore<C> {
    fn conn(&self) -> &Connection {
        self.conn.borrow()
    }

    /// Runs one cached statement; returns the rows it changed.
    fn exec(&self, sql: &str, params: impl rusqlite::Params) -> Result<usize, StoreError> {
        self.conn()
            .prepare_cached(sql)
            .and_then(|mut s| s.execute(params))
            .map_err(map_err)
    }

    /// Claim candidates; `heads`: grouped rows are their groups' heads.
    fn candidates(
        &mut self,
        sql: &str,
        params: impl rusqlite::Params,
        heads: bool,
    ) -> Result<Vec<ReadyRow>, StoreError> {
        // The connection field alone: those without a group are noted in
        // `self.ungrouped`.
        let conn: &Connection = self.conn.borrow();
        let mut st = conn.prepare_cached(sql).map_err(map_err)?;
        let mut rows = st.query(params).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            // The rest of the row is read only for the job a claim takes
            // (in-process, a second statement costs less than decoding
            // candidates that are passed over).
            let candidate = candidate(row)?;
            let c = Cols::new(row, Some(candidate.id));
            let turn = match (c.opt_int(3, "turn")?, c.opt_text(4, "grp")?) {
                (Some(turn), Some(group)) => Some(Turn {
                    head: heads.then_some((turn, candidate.id)),
                    ..Turn::new(turn, group)
                }),
                (None, None) => {
                    if self.triggers_off {
                        self.ungrouped.insert(candidate.id.0);
                    }
                    None
                }
                _ => {
                    return Err(StoreError::corrupt(
                        Some(candidate.id),
                        "a grouped READY job without its turn",
                    ))
                }
            };
            out.push(ReadyRow {
                candidate,
                job: None,
                turn,
            });
        }
        Ok(out)
    }

    /// Writes a transition; answers the job's queue when the counts or the
    /// throughput history see it (the state changes, or `u.tally`): as the
    /// batch read it, or (a job it did not read) from the update itself.
    fn update(&self, u: &JobUpdate<'_>) -> Result<Option<String>, StoreError> {
        let s = u.status;
        let lease = s.lease.as_ref();
        let params = params![
            u.id.0,
            u.expect_state.as_str(),
            u.expect_token.0,
            s.state.as_str(),
            s.attempts,
            s.ready_at.as_millis(),
            s.finished_at.map(Timestamp::as_millis),
            s.last_token.0,
            lease.map(|l| l.expires_at.as_millis()),
            lease.map(|l| l.worker.as_str()),
            s.last_error.as_deref(),
            u.result,
            s.waiting_on,
        ];
        let counted = !u.tally.is_zero() || u.expect_state != s.state;
        let known = self.queues.of(u.id);
        let queue = if !counted || known.is_some() {
            match self.exec(&crate::sql::JOB_SET_STATUS, params)? {
                1 => known.filter(|_| counted).map(str::to_owned),
                _ => return Err(unmatched(u.id)),
            }
        } else {
            let mut st = self
                .conn()
                .prepare_cached(&crate::sql::JOB_SET_STATUS_QUEUE)
                .map_err(map_err)?;
            let mut rows = st.query(params).map_err(map_err)?;
            match rows.next().map_err(map_err)? {
                Some(row) => Some(row.get::<_, String>(0).map_err(map_err)?),
                None => return Err(unmatched(u.id)),
            }
        };
        if self.triggers_off {
            self.keep_group(u.id, u.expect_state, s.state)?;
        }
        Ok(queue)
    }

    /// What the triggers do for other programs' writes (see
    /// `triggers_off`), for job `id`, whose state went `from` -> `to`.
    fn keep_group(&self, id: JobId, from: JobState, to: JobState) -> Result<(), StoreError> {
        if to == JobState::Ready && from != JobState::Ready {
            self.exec(&crate::sql::JOB_TURN_GIVE, [id.0])?;
        } else if from == JobState::Ready && to != JobState::Ready && !self.ungrouped.contains(&id.0) {
            // Two statements: one joining the job to its group's line by
            // the job's id measured 0.68x lease+ACK with 1,000 groups.
            let row = self
                .conn()
                .prepare_cached(&crate::sql::JOB_GROUP_OF)
                .and_then(|mut st| {
                    st.query_row([id.0], |r| {
                        Ok((loose_text(r, 0), loose_int(r, 1), loose_text(r, 2), loose_int(r, 3)))
                    })
                    .optional()
                })
                .map_err(map_err)?;
            if let Some((Some(queue), Some(priority), Some(group), Some(head))) = row {
                self.exec(&crate::sql::JOB_HEAD_PASS, params![queue, priority, group, head])?;
            }
        }
        Ok(())
    }

    /// After job `id` was deleted (see `triggers_off`): its group's head
    /// passes on if it was the head of READY jobs, and its tags go.
    fn deleted(&self, id: JobId, gone: &Deleted) -> Result<(), StoreError> {
        if !self.triggers_off {
            return Ok(());
        }
        if let (true, Some(group), Some(priority), Some(head)) =
            (gone.state == "READY", &gone.group, gone.priority, gone.head)
        {
            self.exec(&crate::sql::JOB_HEAD_PASS, params![gone.queue, priority, group, head])?;
        }
        if let Some(tags) = &gone.tags {
            self.exec(&crate::sql::JOB_TAGS_DELETE, params![id.0, tags])?;
        }
        Ok(())
    }

    /// Adds a batch's [`Counts`] to the store: one statement per queue
    /// (throughput) and per queue and state (job counts).
    fn count(&self, at: Timestamp, counts: &Counts) -> Result<(), StoreError> {
        let minute = relay_store::minute_of(at).as_millis();
        for (queue, [submitted, succeeded, failed, dead]) in &counts.minute {
            self.exec(
                &crate::sql::THROUGHPUT_ADD,
                params![minute, queue, submitted, succeeded, failed, dead],
            )?;
        }
        for (queue, state, n) in counts.states.iter().filter(|c| c.2 != 0) {
            self.exec(&crate::sql::JOB_COUNTS_ADD, params![queue, state, n])?;
        }
        Ok(())
    }

    fn put_schedule(&self, s: &Schedule) -> Result<(), StoreError> {
        let (cron, every_ms, tz) = match &s.recurrence {
            Recurrence::Cron { expr, tz } => (Some(expr.as_str()), None, tz.as_deref()),
            Recurrence::Every(d) => (None, Some(relay_core::time::duration_millis(*d)), None),
        };
        self.exec(
            &crate::sql::SCHEDULE_PUT,
            params![
                s.name,
                cron,
                every_ms,
                tz,
                s.queue,
                s.kind,
                s.payload,
                s.priority.get(),
                s.max_attempts,
                s.paused,
                s.created_at.as_millis(),
                s.next_at.as_millis(),
                s.last_at.map(Timestamp::as_millis),
                s.group
            ],
        )
        .map(drop)
    }

    fn insert(&mut self, j: &JobInsert<'_>) -> Result<(), StoreError> {
        let s = j.status;
        let lease = s.lease.as_ref();
        let sql = if j.group.is_some() {
            &crate::sql::JOB_INSERT_GROUPED
        } else {
            &crate::sql::JOB_INSERT
        };
        self.exec(
            sql,
            params![
                j.id.0,
                j.queue,
                j.kind,
                j.payload,
                j.priority.get(),
                s.state.as_str(),
                s.attempts,
                s.max_attempts,
                s.ready_at.as_millis(),
                j.created_at.as_millis(),
                s.finished_at.map(Timestamp::as_millis),
                j.unique_key,
                j.result,
                s.last_token.0,
                lease.map(|l| l.expires_at.as_millis()),
                lease.map(|l| l.worker.as_str()),
                s.last_error.as_deref(),
                j.lease_for.map(relay_core::time::duration_millis),
                j.timeout.map(relay_core::time::duration_millis),
                s.waiting_on,
                j.traceparent,
                tags_json(j.tags),
                j.group,
            ],
        )?;
        self.inserted.push(j.id.0);
        for tag in j.tags {
            self.exec(&crate::sql::JOB_TAG_INSERT, params![tag, j.id.0])?;
        }
        Ok(())
    }
}

/// A guarded write found its row changed: impossible under the write lock
/// unless something else wrote the file.
fn unmatched(id: JobId) -> StoreError {
    StoreError::Io {
        message: format!("job {id} changed while the batch held the write lock; nothing of the batch was written"),
        source: "guarded update matched no row".into(),
    }
}

impl<C: Borrow<Connection>> Store for SqliteStore<C> {
    fn throughput_prune(&mut self, before: Timestamp) -> Result<u64, StoreError> {
        Ok(self.exec(&crate::sql::THROUGHPUT_PRUNE, [before.as_millis()])? as u64)
    }

    fn mark_prune(&mut self, before: Timestamp) -> Result<u64, StoreError> {
        let batch = i64::try_from(relay_store::PRUNE_BATCH).unwrap_or(i64::MAX);
        Ok(self.exec(&crate::sql::MARK_PRUNE, params![before.as_millis(), batch])? as u64)
    }

    fn job_finished_window(&mut self, after: JobId) -> Result<relay_store::FinishedWindow, StoreError> {
        let mut window = relay_store::FinishedWindow::default();
        {
            let mut st = self
                .conn()
                .prepare_cached(&crate::sql::JOB_FINISHED_WINDOW)
                .map_err(map_err)?;
            let mut rows = st.query([after.0]).map_err(map_err)?;
            while let Some(r) = rows.next().map_err(map_err)? {
                match crate::decode::finished(r) {
                    Ok(f) => window.finished.push(f),
                    Err(reason) => tracing::warn!(%reason, "a finished job does not decode; the prune leaves it"),
                }
            }
        }
        let (last, n): (Option<i64>, i64) = self
            .conn()
            .prepare_cached(&crate::sql::JOB_WINDOW_END)
            .and_then(|mut st| st.query_row([after.0], |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(map_err)?;
        window.last = last
            .filter(|_| usize::try_from(n).is_ok_and(|n| n >= relay_store::PRUNE_SCAN))
            .map(JobId);
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
        let at = seen_at.as_millis();
        let params = params![
            id,
            beat,
            at,
            stopped.then_some(at),
            owner.presented,
            owner.remote,
            owner.forgotten_before.as_millis(),
            owner.keep
        ];
        Ok(self.exec(&crate::sql::WORKER_PUT, params)? == 1)
    }

    fn worker_prune(&mut self, before: Timestamp) -> Result<u64, StoreError> {
        Ok(self.exec(&crate::sql::WORKER_PRUNE, [before.as_millis()])? as u64)
    }

    fn job_delete_finished(&mut self, jobs: &[(JobId, Timestamp)]) -> Result<u64, StoreError> {
        let mut counts = Counts::default();
        let mut n = 0;
        for (id, finished_at) in jobs {
            let gone = self
                .conn()
                .prepare_cached(&crate::sql::JOB_DELETE_FINISHED)
                .and_then(|mut st| {
                    st.query_row(params![id.0, finished_at.as_millis()], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, Option<String>>(2)?,
                        ))
                    })
                    .optional()
                })
                .map_err(map_err)?;
            let Some((queue, state, tags)) = gone else { continue };
            if let (true, Some(tags)) = (self.triggers_off, &tags) {
                self.exec(&crate::sql::JOB_TAGS_DELETE, params![id.0, tags])?;
            }
            self.exec(&crate::sql::JOB_EVENTS_DELETE, [id.0])?;
            self.exec(&crate::sql::JOB_DEPS_DELETE, [id.0])?;
            counts.gone(&queue, &state);
            n += 1;
        }
        self.count(Timestamp::from_millis(0), &counts)?;
        Ok(n)
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        self.next_id = None;
        self.inserted.clear();
        self.queues.clear();
        self.ungrouped.clear();
        if self.nested {
            return self.exec("SAVEPOINT relay_within", []).map(drop);
        }
        self.exec("BEGIN IMMEDIATE", []).map(drop)
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        let sql = if self.nested { "RELEASE relay_within" } else { "COMMIT" };
        self.exec(sql, [])?;
        if let Some(own) = &self.own {
            own.committed(&self.inserted);
        }
        self.inserted.clear();
        Ok(())
    }

    fn rollback(&mut self) -> Result<(), StoreError> {
        if self.conn().is_autocommit() {
            return Ok(()); // SQLite already rolled the transaction back (I/O error, disk full)
        }
        if self.nested {
            // Undoes what the savepoint holds; the caller's transaction
            // stays open, as it was before.
            return self
                .exec("ROLLBACK TO relay_within", [])
                .and_then(|_| self.exec("RELEASE relay_within", []))
                .map(drop);
        }
        self.exec("ROLLBACK", []).map(drop)
    }

    /// A file on disk: a failed commit is final (see
    /// [`Behaviour::failed_commit_is_final`]); only groups' heads are claim
    /// candidates (migrations/0014_group_heads.sql).
    fn behaviour(&self) -> Behaviour {
        Behaviour {
            failed_commit_is_final: self.on_disk,
            group_heads: true,
            ..Behaviour::default()
        }
    }

    fn syncer(&self) -> Option<std::sync::Arc<dyn Syncer>> {
        self.syncer.clone()
    }

    /// With the split commit: the caller commits (the WAL write, no fsync)
    /// and the fsync is shared as usual. Without it, the writer thread.
    fn caller_may_commit(&self) -> bool {
        self.syncer.is_some()
    }

    fn job_find_active_by_key(&mut self, key: &str) -> Result<Option<JobId>, StoreError> {
        let mut st = self
            .conn()
            .prepare_cached(&crate::sql::JOB_FIND_ACTIVE_BY_KEY)
            .map_err(map_err)?;
        st.query_row([key], |r| r.get(0))
            .optional()
            .map(|o| o.map(JobId))
            .map_err(map_err)
    }

    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        let job = job_get(self.conn(), id)?;
        if let Some(j) = &job {
            self.queues.note(id, &j.queue);
        }
        Ok(job)
    }

    fn job_get_status(&mut self, id: JobId) -> Result<Option<JobStatus>, StoreError> {
        // The connection field alone: the queue is noted in `self.queues`.
        let conn: &Connection = self.conn.borrow();
        let mut st = conn.prepare_cached(&crate::sql::JOB_GET_STATUS).map_err(map_err)?;
        let mut rows = st.query([id.0]).map_err(map_err)?;
        match rows.next().map_err(map_err)? {
            Some(row) => {
                let c = Cols::new(row, Some(id));
                c.priority(9)?;
                let status = c.status(0, 10)?;
                if let Ok(queue) = row.get_ref(11).and_then(|v| v.as_str().map_err(Into::into)) {
                    self.queues.note(id, queue);
                }
                Ok(Some(status))
            }
            None => Ok(None),
        }
    }

    fn job_next_ready_at(&mut self, queue: &str, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        let mut st = self
            .conn()
            .prepare_cached(&crate::sql::JOB_NEXT_READY_AT)
            .map_err(map_err)?;
        st.query_row(params![queue, now.as_millis()], |r| r.get::<_, Option<i64>>(0))
            .map(|o| o.map(Timestamp::from_millis))
            .map_err(map_err)
    }

    fn job_overdue(&mut self, now: Timestamp) -> Result<Vec<JobId>, StoreError> {
        let mut st = self.conn().prepare_cached(&crate::sql::JOB_OVERDUE).map_err(map_err)?;
        let rows = st.query_map(params![now.as_millis()], |r| r.get(0)).map_err(map_err)?;
        rows.map(|r| r.map(JobId).map_err(map_err)).collect()
    }

    fn job_ids(&mut self, n: usize) -> Result<Vec<JobId>, StoreError> {
        let last = match self.next_id {
            Some(next) => next - 1,
            None => self
                .conn()
                .prepare_cached(&crate::sql::JOB_IDS)
                .and_then(|mut st| st.query_row([], |r| r.get::<_, i64>(0)))
                .map_err(map_err)?,
        };
        let n = i64::try_from(n).unwrap_or(i64::MAX / 2);
        self.next_id = Some(last + n + 1);
        Ok((1..=n).map(|i| JobId(last + i)).collect())
    }

    fn job_unique_key(&mut self, id: JobId) -> Result<Option<String>, StoreError> {
        let mut st = self
            .conn()
            .prepare_cached(&crate::sql::JOB_UNIQUE_KEY)
            .map_err(map_err)?;
        let mut rows = st.query([id.0]).map_err(map_err)?;
        match rows.next().map_err(map_err)? {
            Some(row) => Cols::new(row, Some(id)).opt_text(0, "unique_key"),
            None => Ok(None),
        }
    }

    fn schedules_due(&mut self, now: Timestamp, limit: usize) -> Result<Vec<Result<Schedule, StoreError>>, StoreError> {
        let mut st = self
            .conn()
            .prepare_cached(&crate::sql::SCHEDULES_DUE)
            .map_err(map_err)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut rows = st.query(params![now.as_millis(), limit]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(decode::schedule(row));
        }
        Ok(out)
    }

    fn schedule_get(&mut self, name: &str) -> Result<Option<Schedule>, StoreError> {
        let mut st = self.conn().prepare_cached(&crate::sql::SCHEDULE_GET).map_err(map_err)?;
        let mut rows = st.query([name]).map_err(map_err)?;
        match rows.next().map_err(map_err)? {
            Some(row) => decode::schedule(row).map(Some),
            None => Ok(None),
        }
    }

    fn job_leased_count(&mut self, queue: &str, now: Timestamp) -> Result<u64, StoreError> {
        let n: i64 = self
            .conn()
            .prepare_cached(&crate::sql::JOB_LEASED_COUNT)
            .and_then(|mut st| st.query_row(params![queue, now.as_millis()], |r| r.get(0)))
            .map_err(map_err)?;
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
        let names = serde_json::Value::from(groups.to_vec()).to_string();
        let mut st = self
            .conn()
            .prepare_cached(&crate::sql::JOB_GROUP_LEASED)
            .map_err(map_err)?;
        let rows = st
            .query_map(params![queue, now.as_millis(), names], |r| {
                Ok((r.get::<_, String>(0)?, u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0)))
            })
            .map_err(map_err)?;
        rows.map(|r| r.map_err(map_err)).collect()
    }

    fn job_fair_after(
        &mut self,
        queue: &str,
        priority: relay_core::Priority,
        after: (i64, JobId),
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError> {
        let (i, _) = crate::sql::page(limit);
        self.candidates(
            &crate::sql::JOB_FAIR_AFTER_PAGES[i],
            params![queue, priority.get(), after.0, after.1 .0],
            true,
        )
    }

    fn job_group_next(
        &mut self,
        queue: &str,
        priority: relay_core::Priority,
        after: &[(&str, i64, JobId)],
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError> {
        let (i, _) = crate::sql::page(limit);
        let mut out = Vec::new();
        for (group, turn, id) in after {
            out.extend(self.candidates(
                &crate::sql::JOB_GROUP_NEXT_PAGES[i],
                params![queue, priority.get(), group, turn, id.0],
                false,
            )?);
        }
        Ok(out)
    }

    fn job_ready(&mut self, queue: &str, now: Timestamp, limit: usize) -> Result<Vec<ReadyRow>, StoreError> {
        let (i, _) = crate::sql::page(limit);
        self.candidates(&crate::sql::JOB_READY_PAGES[i], params![queue, now.as_millis()], true)
    }

    fn job_ready_after(
        &mut self,
        queue: &str,
        now: Timestamp,
        after: Candidate,
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError> {
        let (i, _) = crate::sql::page(limit);
        self.candidates(
            &crate::sql::JOB_READY_AFTER_PAGES[i],
            params![
                queue,
                after.priority.get(),
                now.as_millis(),
                after.ready_at.as_millis(),
                after.id.0
            ],
            false,
        )
    }

    fn mark_get(&mut self, key: &str, now: Timestamp) -> Result<Option<String>, StoreError> {
        self.conn()
            .prepare_cached(&crate::sql::MARK_GET)
            .and_then(|mut st| st.query_row(params![key, now.as_millis()], |r| r.get(0)).optional())
            .map_err(map_err)
    }

    fn waits_on(&mut self, key: &str) -> Result<Vec<(JobId, String)>, StoreError> {
        let mut st = self.conn().prepare_cached(&crate::sql::WAITS_ON).map_err(map_err)?;
        let rows = st
            .query_map([key], |r| Ok((JobId(r.get(0)?), r.get::<_, String>(1)?)))
            .map_err(map_err)?;
        rows.collect::<Result<_, _>>().map_err(map_err)
    }

    fn wait_of(&mut self, id: JobId) -> Result<Option<relay_store::Wait>, StoreError> {
        wait_of(self.conn(), id)
    }

    fn job_expiries(&mut self, id: JobId) -> Result<(u32, Option<u32>), StoreError> {
        let (n, own): (i64, Option<i64>) = self
            .conn()
            .prepare_cached(&crate::sql::JOB_EXPIRIES)
            .and_then(|mut st| st.query_row([id.0], |r| Ok((r.get(0)?, r.get(1)?))))
            .map_err(map_err)?;
        Ok((
            u32::try_from(n).unwrap_or(u32::MAX),
            own.and_then(relay_store::decode::poison_after),
        ))
    }

    fn event_last_seq(&mut self, id: JobId) -> Result<i64, StoreError> {
        let next: i64 = self
            .conn()
            .prepare_cached(&crate::sql::EVENT_NEXT_SEQ)
            .and_then(|mut st| st.query_row([id.0], |r| r.get(0)))
            .map_err(map_err)?;
        Ok(next - 1)
    }

    fn job_dependents(&mut self, parents: &[JobId]) -> Result<Vec<relay_store::DependentRead>, StoreError> {
        if parents.is_empty() {
            return Ok(Vec::new());
        }
        // One probe of an empty table first: a batch of a queue that does
        // not use dependencies reads no edges.
        let any: bool = self
            .conn()
            .prepare_cached(&crate::sql::JOB_DEPS_ANY)
            .and_then(|mut st| st.query_row([], |r| r.get(0)))
            .map_err(map_err)?;
        if !any {
            return Ok(Vec::new());
        }
        // A JSON array of the ids, for json_each: one statement per batch.
        let ids = format!(
            "[{}]",
            parents.iter().map(|p| p.0.to_string()).collect::<Vec<_>>().join(",")
        );
        let mut st = self
            .conn()
            .prepare_cached(&crate::sql::JOB_DEPENDENTS)
            .map_err(map_err)?;
        let mut rows = st.query([ids]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(decode::dependent(row));
        }
        Ok(out)
    }

    fn queue_settings(&mut self, names: &[&str]) -> Result<Vec<(String, QueueSettings)>, StoreError> {
        let mut st = self
            .conn()
            .prepare_cached(&crate::sql::QUEUE_SETTINGS)
            .map_err(map_err)?;
        let mut out = Vec::new();
        for name in names {
            let mut rows = st.query([name]).map_err(map_err)?;
            if let Some(row) = rows.next().map_err(map_err)? {
                out.push(decode::queue_settings(row)?);
            }
        }
        Ok(out)
    }

    /// One prepared statement per row: in-process, a statement costs no
    /// round trip, and these are cached.
    fn apply(&mut self, c: &Changes<'_>) -> Result<(), StoreError> {
        for m in &c.marks {
            self.exec(&crate::sql::MARK_PUT, params![m.key, m.value, m.expires_at.as_millis()])?;
        }
        for w in &c.schedules {
            match w.schedule {
                Some(s) => self.put_schedule(s)?,
                None => {
                    self.exec(&crate::sql::SCHEDULE_DELETE, [w.name])?;
                }
            }
        }
        for q in &c.queues {
            let s = q.settings;
            let rate = s.limits.rate;
            self.exec(
                &crate::sql::QUEUE_PUT,
                params![
                    q.name,
                    s.paused,
                    s.limits.max_leased,
                    rate.map(|r| r.limit),
                    rate.map(|r| relay_core::time::duration_millis(r.per)),
                    s.window.start.as_millis(),
                    s.window.count,
                    q.at.as_millis(),
                    s.limits.poison_after,
                    s.retention.succeeded.map(relay_core::Keep::to_millis),
                    s.retention.dead.map(relay_core::Keep::to_millis),
                    s.retention.cancelled.map(relay_core::Keep::to_millis),
                    s.limits.max_leased_per_group
                ],
            )?;
        }
        let mut counts = Counts::default();
        for id in &c.deletes {
            self.exec(&crate::sql::JOB_EVENTS_DELETE, [id.0])?;
            self.exec(&crate::sql::JOB_DEPS_DELETE, [id.0])?;
            let gone = self
                .conn()
                .prepare_cached(&crate::sql::JOB_DELETE)
                .and_then(|mut st| {
                    st.query_row([id.0], |r| {
                        Ok(Deleted {
                            queue: r.get(0)?,
                            state: r.get(1)?,
                            priority: loose_int(r, 2),
                            group: loose_text(r, 3),
                            head: loose_int(r, 4),
                            tags: loose_text(r, 5),
                        })
                    })
                    .optional()
                })
                .map_err(map_err)?;
            let Some(gone) = gone else {
                return Err(unmatched(*id));
            };
            self.deleted(*id, &gone)?;
            counts.gone(&gone.queue, &gone.state);
        }
        for id in &c.settled {
            self.exec(&crate::sql::JOB_DEPS_DELETE, [id.0])?;
        }
        for u in &c.updates {
            if let Some(queue) = self.update(u)? {
                let t = u.tally;
                counts.minute(&queue, [0, t.succeeded.into(), t.failed.into(), t.dead.into()]);
                if u.expect_state != u.status.state {
                    counts.state(&queue, u.expect_state.as_str(), -1);
                    counts.state(&queue, u.status.state.as_str(), 1);
                }
            }
        }
        for j in &c.inserts {
            self.insert(j)?;
            counts.minute(j.queue, [1, 0, 0, 0]);
            counts.state(j.queue, j.status.state.as_str(), 1);
        }
        // After the inserts: a job inserted in this batch may take fields too.
        for f in &c.fields {
            if self.exec(
                &crate::sql::JOB_SET_FIELDS,
                params![f.id.0, f.payload, f.progress, f.steps],
            )? != 1
            {
                return Err(unmatched(f.id));
            }
        }
        self.count(c.at, &counts)?;
        for d in &c.dependents {
            self.exec(
                &crate::sql::JOB_DEP_INSERT,
                params![d.parent.0, d.child.0, d.on_failure.as_str()],
            )?;
        }
        for e in &c.events {
            match e.base {
                Some(base) => self.exec(
                    &crate::sql::EVENT_APPEND,
                    params![e.job.0, base + e.ord, e.at.as_millis(), e.kind, e.data],
                )?,
                None => self.exec(
                    &crate::sql::EVENT_APPEND_NEXT,
                    params![e.job.0, e.at.as_millis(), e.kind, e.data],
                )?,
            };
        }
        for w in &c.waits {
            self.exec(
                &crate::sql::WAIT_PUT,
                params![w.job.0, w.key, w.step, w.until.as_millis()],
            )?;
        }
        for id in &c.waits_ended {
            self.exec(&crate::sql::WAIT_DELETE, [id.0])?;
        }
        Ok(())
    }
}

/// A deleted job's row, as far as the counts, its group's head and its
/// tags need it (`sql/job_delete.sql`), read loosely: a row edited by
/// hand must still be deletable, so a value of the wrong type is `None`,
/// and what needs it is left undone.
struct Deleted {
    queue: String,
    state: String,
    priority: Option<i64>,
    group: Option<String>,
    head: Option<i64>,
    tags: Option<String>,
}

/// Column `i` as an integer, `None` when it is not one.
fn loose_int(r: &rusqlite::Row<'_>, i: usize) -> Option<i64> {
    r.get_ref(i).ok().and_then(|v| v.as_i64().ok())
}

/// Column `i` as text, `None` when it is not text.
fn loose_text(r: &rusqlite::Row<'_>, i: usize) -> Option<String> {
    r.get_ref(i).ok().and_then(|v| v.as_str().ok()).map(str::to_owned)
}

/// What a batch changes in the counts the dashboard reads: per queue, the
/// minute's submitted, succeeded, failed and dead; per queue and state, the
/// change in the number of jobs. Few queues per batch: lists beat maps.
#[derive(Default)]
struct Counts {
    minute: Vec<(String, [i64; 4])>,
    states: Vec<(String, String, i64)>,
}

impl Counts {
    fn minute(&mut self, queue: &str, n: [i64; 4]) {
        // A change that ends no attempt (a cancel, a release, a promotion)
        // adds no row of zeros.
        if n == [0; 4] {
            return;
        }
        match self.minute.iter_mut().find(|(q, _)| q == queue) {
            Some((_, c)) => c.iter_mut().zip(n).for_each(|(c, n)| *c += n),
            None => self.minute.push((queue.to_owned(), n)),
        }
    }

    /// A job row deleted. A state no writer wrote (a row edited by hand)
    /// was never counted.
    fn gone(&mut self, queue: &str, state: &str) {
        if relay_core::JobState::parse(state).is_some() {
            self.state(queue, state, -1);
        }
    }

    fn state(&mut self, queue: &str, state: &str, n: i64) {
        match self.states.iter_mut().find(|(q, s, _)| q == queue && s == state) {
            Some((_, _, c)) => *c += n,
            None => self.states.push((queue.to_owned(), state.to_owned(), n)),
        }
    }
}

/// A job's tags as stored: a JSON array, NULL for none (its `job_tags`
/// rows are written beside it, and deleted with it: by the writer's own
/// statement, `job_tags_delete.sql`, or on other connections a trigger).
fn tags_json(tags: &[String]) -> Option<String> {
    (!tags.is_empty()).then(|| serde_json::Value::from(tags.to_vec()).to_string())
}

/// A claim candidate from `id, priority, ready_at`, decoded strictly.
fn candidate(row: &rusqlite::Row<'_>) -> Result<Candidate, StoreError> {
    let id = JobId(Cols::new(row, None).int(0, "id")?);
    let c = Cols::new(row, Some(id));
    Ok(Candidate {
        id,
        priority: c.priority(1)?,
        ready_at: Timestamp::from_millis(c.int(2, "ready_at")?),
    })
}

/// Job `id`'s wait, if it has one (the writer's and the readers' read).
pub(crate) fn wait_of(conn: &Connection, id: JobId) -> Result<Option<relay_store::Wait>, StoreError> {
    conn.prepare_cached(&crate::sql::WAIT_OF)
        .and_then(|mut st| {
            st.query_row([id.0], |r| {
                Ok(relay_store::Wait {
                    key: r.get(0)?,
                    step: r.get(1)?,
                    until: Timestamp::from_millis(r.get(2)?),
                })
            })
            .optional()
        })
        .map_err(map_err)
}

pub(crate) fn job_get(conn: &Connection, id: JobId) -> Result<Option<Job>, StoreError> {
    let mut st = conn.prepare_cached(&crate::sql::JOB_GET).map_err(map_err)?;
    let mut rows = st.query([id.0]).map_err(map_err)?;
    match rows.next().map_err(map_err)? {
        Some(row) => decode::job(row).map(Some),
        None => Ok(None),
    }
}
