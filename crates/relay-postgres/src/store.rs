//! The writer connection and read connections on PostgreSQL.

use crate::connect::map_err;
use crate::decode;
use postgres::{Client, Statement};
use relay_core::{Candidate, Job, JobId, JobState, JobStatus, Timestamp};
use relay_store::{
    Changes, Event, EventRow, JobFilter, JobInsert, JobUpdate, QueueStats, ReadyRow, StatusRead, Store, StoreError,
    StoreReader,
};
use std::collections::{BTreeMap, HashMap};

/// A connection with its prepared statements (prepared once, by SQL text).
pub(crate) struct Conn {
    pub client: Client,
    stmts: HashMap<&'static str, Statement>,
}

impl Conn {
    pub(crate) fn new(client: Client) -> Self {
        Self {
            client,
            stmts: HashMap::new(),
        }
    }

    fn stmt(&mut self, sql: &'static str) -> Result<Statement, StoreError> {
        if let Some(s) = self.stmts.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql).map_err(map_err)?;
        self.stmts.insert(sql, s.clone());
        Ok(s)
    }

    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        let st = self.stmt(include_str!("../sql/job_get.sql"))?;
        match self.client.query_opt(&st, &[&id.0]).map_err(map_err)? {
            Some(row) => decode::job(&row).map(Some),
            None => Ok(None),
        }
    }
}

pub(crate) struct PgStore {
    pub conn: Conn,
    /// Where to connect again after the connection dropped.
    url: String,
    /// Job ids drawn from the sequence and not handed out yet.
    ids: Vec<JobId>,
}

/// Ids drawn from the sequence at a time: most batches then draw none.
const ID_BLOCK: usize = 256;

/// The writer's connection: migrated, its durability settings read back.
pub(crate) fn open_writer_client(url: &str) -> Result<Client, StoreError> {
    let mut client = crate::connect::connect(url)?;
    crate::connect::migrate(&mut client)?;
    crate::connect::check_durability(&mut client)?;
    Ok(client)
}

impl PgStore {
    pub(crate) fn new(conn: Conn, url: String) -> Self {
        Self {
            conn,
            url,
            ids: Vec::new(),
        }
    }

    fn exec(&mut self, sql: &str) -> Result<(), StoreError> {
        self.conn.client.batch_execute(sql).map_err(map_err)
    }

    fn ready_rows(&mut self, rows: &[postgres::Row]) -> Result<Vec<ReadyRow>, StoreError> {
        rows.iter()
            .map(|row| {
                let id = JobId(decode::col(row, 0, "id", None)?);
                let candidate = Candidate {
                    id,
                    priority: decode::priority(row, 4, Some(id))?,
                    ready_at: Timestamp::from_millis(decode::col(row, 11, "ready_at", Some(id))?),
                };
                Ok(ReadyRow {
                    candidate,
                    job: Some(decode::job(row)),
                })
            })
            .collect()
    }

    /// One set-based statement's row count, which must be `expected`.
    fn execute_all(
        &mut self,
        sql: &'static str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
        expected: usize,
        what: &str,
    ) -> Result<(), StoreError> {
        let st = self.conn.stmt(sql)?;
        let n = match self.conn.client.execute(&st, params) {
            Ok(n) => n,
            Err(e) if e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) => {
                // A retry's key taken by another process since the batch
                // checked: plan the batch again (it then sees the holder).
                tracing::debug!(error = %e, "a unique key was taken by another process during the batch");
                return Err(StoreError::Busy);
            }
            Err(e) => return Err(map_err(e)),
        };
        if n as usize == expected {
            return Ok(());
        }
        // Rows locked when read cannot change, but a unique key can be
        // taken by another process's insert: plan the batch again.
        tracing::debug!(
            what,
            expected,
            written = n,
            "a set-based write fell short; planning the batch again"
        );
        Err(StoreError::Busy)
    }

    fn apply_updates(&mut self, ups: &[JobUpdate<'_>]) -> Result<(), StoreError> {
        if ups.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = ups.iter().map(|u| u.id.0).collect();
        let expect_state: Vec<&str> = ups.iter().map(|u| u.expect_state.as_str()).collect();
        let expect_token: Vec<i64> = ups.iter().map(|u| u.expect_token.0).collect();
        let state: Vec<&str> = ups.iter().map(|u| u.status.state.as_str()).collect();
        let attempts: Vec<i64> = ups.iter().map(|u| i(u.status.attempts)).collect();
        let ready_at: Vec<i64> = ups.iter().map(|u| u.status.ready_at.as_millis()).collect();
        let finished_at: Vec<Option<i64>> = ups
            .iter()
            .map(|u| u.status.finished_at.map(Timestamp::as_millis))
            .collect();
        let token: Vec<i64> = ups.iter().map(|u| u.status.last_token.0).collect();
        let expires: Vec<Option<i64>> = ups
            .iter()
            .map(|u| u.status.lease.as_ref().map(|l| l.expires_at.as_millis()))
            .collect();
        let by: Vec<Option<&str>> = ups
            .iter()
            .map(|u| u.status.lease.as_ref().map(|l| l.worker.as_str()))
            .collect();
        let error: Vec<Option<&str>> = ups.iter().map(|u| u.status.last_error.as_deref()).collect();
        let result: Vec<Option<&[u8]>> = ups.iter().map(|u| u.result).collect();
        self.execute_all(
            include_str!("../sql/apply_update.sql"),
            &[
                &ids,
                &expect_state,
                &expect_token,
                &state,
                &attempts,
                &ready_at,
                &finished_at,
                &token,
                &expires,
                &by,
                &error,
                &result,
            ],
            ups.len(),
            "update",
        )
    }

    fn apply_inserts(&mut self, ins: &[JobInsert<'_>]) -> Result<(), StoreError> {
        if ins.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = ins.iter().map(|j| j.id.0).collect();
        let queue: Vec<&str> = ins.iter().map(|j| j.queue).collect();
        let kind: Vec<&str> = ins.iter().map(|j| j.kind).collect();
        let payload: Vec<&[u8]> = ins.iter().map(|j| j.payload).collect();
        let priority: Vec<i64> = ins.iter().map(|j| i64::from(j.priority.get())).collect();
        let state: Vec<&str> = ins.iter().map(|j| j.status.state.as_str()).collect();
        let attempts: Vec<i64> = ins.iter().map(|j| i(j.status.attempts)).collect();
        let max_attempts: Vec<i64> = ins.iter().map(|j| i(j.status.max_attempts)).collect();
        let ready_at: Vec<i64> = ins.iter().map(|j| j.status.ready_at.as_millis()).collect();
        let created_at: Vec<i64> = ins.iter().map(|j| j.created_at.as_millis()).collect();
        let finished_at: Vec<Option<i64>> = ins
            .iter()
            .map(|j| j.status.finished_at.map(Timestamp::as_millis))
            .collect();
        let key: Vec<Option<&str>> = ins.iter().map(|j| j.unique_key).collect();
        let result: Vec<Option<&[u8]>> = ins.iter().map(|j| j.result).collect();
        let token: Vec<i64> = ins.iter().map(|j| j.status.last_token.0).collect();
        let expires: Vec<Option<i64>> = ins
            .iter()
            .map(|j| j.status.lease.as_ref().map(|l| l.expires_at.as_millis()))
            .collect();
        let by: Vec<Option<&str>> = ins
            .iter()
            .map(|j| j.status.lease.as_ref().map(|l| l.worker.as_str()))
            .collect();
        let error: Vec<Option<&str>> = ins.iter().map(|j| j.status.last_error.as_deref()).collect();
        self.execute_all(
            include_str!("../sql/apply_insert.sql"),
            &[
                &ids,
                &queue,
                &kind,
                &payload,
                &priority,
                &state,
                &attempts,
                &max_attempts,
                &ready_at,
                &created_at,
                &finished_at,
                &key,
                &result,
                &token,
                &expires,
                &by,
                &error,
            ],
            ins.len(),
            "insert",
        )
    }

    fn apply_events(&mut self, evs: &[EventRow<'_>]) -> Result<(), StoreError> {
        if evs.is_empty() {
            return Ok(());
        }
        let job: Vec<i64> = evs.iter().map(|e| e.job.0).collect();
        let base: Vec<Option<i64>> = evs.iter().map(|e| e.base).collect();
        let ord: Vec<i64> = evs.iter().map(|e| e.ord).collect();
        let at: Vec<i64> = evs.iter().map(|e| e.at.as_millis()).collect();
        let kind: Vec<&str> = evs.iter().map(|e| e.kind).collect();
        let data: Vec<&str> = evs.iter().map(|e| e.data).collect();
        self.execute_all(
            include_str!("../sql/apply_events.sql"),
            &[&job, &base, &ord, &at, &kind, &data],
            evs.len(),
            "events",
        )
    }
}

fn i(v: u32) -> i64 {
    i64::from(v)
}

impl Store for PgStore {
    fn job_prune(&mut self, before: Timestamp) -> Result<u64, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_prune.sql"))?;
        let row = self
            .conn
            .client
            .query_one(&st, &[&before.as_millis()])
            .map_err(map_err)?;
        let n: i64 = decode::col(&row, 0, "pruned", None)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn notify_ready(&mut self) -> Result<(), StoreError> {
        self.exec(include_str!("../sql/notify_ready.sql"))
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        if self.conn.client.is_closed() {
            // The server or the network dropped the connection (the batch
            // that met it was answered already): connect again, with the
            // same checks as at open. Statements are prepared anew.
            tracing::warn!("the PostgreSQL connection of the writer dropped; connecting again");
            self.conn = Conn::new(open_writer_client(&self.url)?);
        }
        self.exec("BEGIN")
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        self.exec("COMMIT")
    }

    fn rollback(&mut self) -> Result<(), StoreError> {
        self.exec("ROLLBACK")
    }

    fn busy_is_transient(&self) -> bool {
        true
    }

    fn job_ids(&mut self, n: usize) -> Result<Vec<JobId>, StoreError> {
        if self.ids.len() < n {
            let want = i64::try_from(n.max(ID_BLOCK)).unwrap_or(i64::MAX);
            let st = self.conn.stmt(include_str!("../sql/job_ids.sql"))?;
            let rows = self.conn.client.query(&st, &[&want]).map_err(map_err)?;
            let mut fresh = rows
                .iter()
                .map(|r| decode::col(r, 0, "nextval", None).map(JobId))
                .collect::<Result<Vec<_>, _>>()?;
            // Handed out from the end: keep the lowest last.
            fresh.sort_unstable_by(|a, b| b.cmp(a));
            fresh.append(&mut self.ids);
            self.ids = fresh;
        }
        let at = self.ids.len().saturating_sub(n);
        let mut out = self.ids.split_off(at);
        out.reverse();
        Ok(out)
    }

    fn job_find_active_by_key(&mut self, key: &str) -> Result<Option<JobId>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_find_active_by_key.sql"))?;
        let row = self.conn.client.query_opt(&st, &[&key]).map_err(map_err)?;
        row.map(|r| decode::col(&r, 0, "id", None).map(JobId)).transpose()
    }

    fn job_unique_key(&mut self, id: JobId) -> Result<Option<String>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_unique_key.sql"))?;
        match self.conn.client.query_opt(&st, &[&id.0]).map_err(map_err)? {
            Some(row) => decode::col(&row, 0, "unique_key", Some(id)),
            None => Ok(None),
        }
    }

    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        self.conn.job_get(id)
    }

    fn job_get_status(&mut self, id: JobId) -> Result<Option<JobStatus>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_get_status.sql"))?;
        match self.conn.client.query_opt(&st, &[&id.0]).map_err(map_err)? {
            Some(row) => {
                decode::priority(&row, 9, Some(id))?;
                decode::status(&row, 0, Some(id)).map(Some)
            }
            None => Ok(None),
        }
    }

    fn job_get_statuses(&mut self, ids: &[JobId]) -> Result<Vec<StatusRead>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_get_statuses.sql"))?;
        let raw: Vec<i64> = ids.iter().map(|id| id.0).collect();
        let rows = self.conn.client.query(&st, &[&raw]).map_err(map_err)?;
        rows.iter()
            .map(|row| {
                let id = JobId(decode::col(row, 0, "id", None)?);
                let status = decode::priority(row, 10, Some(id)).and_then(|_| decode::status(row, 1, Some(id)));
                Ok((id, status))
            })
            .collect()
    }

    fn job_ready(&mut self, queue: &str, now: Timestamp, limit: usize) -> Result<Vec<ReadyRow>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_ready.sql"))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .conn
            .client
            .query(&st, &[&queue, &now.as_millis(), &limit])
            .map_err(map_err)?;
        self.ready_rows(&rows)
    }

    fn job_ready_after(
        &mut self,
        queue: &str,
        now: Timestamp,
        after: Candidate,
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_ready_after.sql"))?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .conn
            .client
            .query(
                &st,
                &[
                    &queue,
                    &i64::from(after.priority.get()),
                    &now.as_millis(),
                    &after.ready_at.as_millis(),
                    &after.id.0,
                    &limit,
                ],
            )
            .map_err(map_err)?;
        self.ready_rows(&rows)
    }

    fn job_next_ready_at(&mut self, queue: &str, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_next_ready_at.sql"))?;
        let row = self
            .conn
            .client
            .query_one(&st, &[&queue, &now.as_millis()])
            .map_err(map_err)?;
        let next: Option<i64> = decode::col(&row, 0, "ready_at", None)?;
        Ok(next.map(Timestamp::from_millis))
    }

    fn job_expired_leases(&mut self, now: Timestamp) -> Result<Vec<JobId>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_expired_leases.sql"))?;
        let rows = self.conn.client.query(&st, &[&now.as_millis()]).map_err(map_err)?;
        rows.iter().map(|r| decode::col(r, 0, "id", None).map(JobId)).collect()
    }

    fn event_last_seq(&mut self, id: JobId) -> Result<i64, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/event_last_seq.sql"))?;
        let row = self.conn.client.query_one(&st, &[&id.0]).map_err(map_err)?;
        decode::col(&row, 0, "seq", Some(id))
    }

    /// At most five statements, whatever the batch's size.
    fn apply(&mut self, c: &Changes<'_>) -> Result<(), StoreError> {
        if !c.deletes.is_empty() {
            let ids: Vec<i64> = c.deletes.iter().map(|id| id.0).collect();
            self.execute_all(include_str!("../sql/apply_delete.sql"), &[&ids], ids.len(), "delete")?;
        }
        let split = c.updates.len() - c.updates_taking_keys.min(c.updates.len());
        let (plain, taking) = c.updates.split_at(split);
        self.apply_updates(plain)?;
        self.apply_updates(taking)?;
        self.apply_inserts(&c.inserts)?;
        self.apply_events(&c.events)
    }
}

pub(crate) struct PgReader {
    pub conn: Conn,
}

impl StoreReader for PgReader {
    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        self.conn.job_get(id)
    }

    fn job_list(&mut self, f: &JobFilter) -> Result<Vec<Job>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_list.sql"))?;
        let rows = self
            .conn
            .client
            .query(
                &st,
                &[
                    &f.queue.as_deref(),
                    &f.state.map(JobState::as_str),
                    &f.before.map(|b| b.0),
                    &i64::from(f.limit),
                ],
            )
            .map_err(map_err)?;
        rows.iter().map(decode::job).collect()
    }

    fn job_events(&mut self, id: JobId, after: i64, limit: u32) -> Result<Vec<Event>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_events.sql"))?;
        let rows = self
            .conn
            .client
            .query(&st, &[&id.0, &after, &i64::from(limit)])
            .map_err(map_err)?;
        rows.iter()
            .map(|r| {
                let j = Some(id);
                let raw: String = decode::col(r, 3, "event data", j)?;
                let data = serde_json::from_str(&raw)
                    .map_err(|e| StoreError::corrupt(j, format!("event data is not JSON: {e}")))?;
                Ok(Event {
                    job_id: id,
                    seq: decode::col(r, 0, "seq", j)?,
                    at: Timestamp::from_millis(decode::col(r, 1, "at", j)?),
                    kind: decode::col(r, 2, "kind", j)?,
                    data,
                })
            })
            .collect()
    }

    fn queue_stats(&mut self, now: Timestamp) -> Result<BTreeMap<String, QueueStats>, StoreError> {
        let mut out: BTreeMap<String, QueueStats> = BTreeMap::new();
        let empty = || QueueStats {
            counts: JobState::ALL.iter().map(|s| (*s, 0)).collect(),
            oldest_ready_age: None,
        };
        let st = self.conn.stmt(include_str!("../sql/queue_counts.sql"))?;
        for r in self.conn.client.query(&st, &[]).map_err(map_err)? {
            let queue: String = decode::col(&r, 0, "queue", None)?;
            let raw: String = decode::col(&r, 1, "state", None)?;
            let state = JobState::parse(&raw)
                .ok_or_else(|| StoreError::corrupt(None, format!("queue {queue}: unknown state {raw:?}")))?;
            let n: i64 = decode::col(&r, 2, "count", None)?;
            out.entry(queue)
                .or_insert_with(empty)
                .counts
                .insert(state, u64::try_from(n).unwrap_or(0));
        }
        let st = self.conn.stmt(include_str!("../sql/queue_oldest_ready.sql"))?;
        for r in self.conn.client.query(&st, &[&now.as_millis()]).map_err(map_err)? {
            let queue: String = decode::col(&r, 0, "queue", None)?;
            if let Some(oldest) = decode::col::<Option<i64>>(&r, 1, "ready_at", None)? {
                out.entry(queue).or_insert_with(empty).oldest_ready_age =
                    Some(now.since(Timestamp::from_millis(oldest)));
            }
        }
        Ok(out)
    }
}
