//! The writer connection and read connections on PostgreSQL.

use crate::connect::map_err;
use crate::decode;
use postgres::{Client, Statement};
use relay_core::{Candidate, Job, JobId, JobState, JobStatus, Timestamp};
use relay_store::{Event, EventWrite, JobFilter, JobInsert, JobSetStatus, QueueStats, Store, StoreError, StoreReader};
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
    /// Rows changed so far: the engine's proof that a failed operation wrote nothing.
    changes: u64,
    /// Where to connect again after the connection dropped.
    url: String,
}

/// The writer's connection: migrated, its durability settings read back.
pub(crate) fn open_writer_client(url: &str) -> Result<Client, StoreError> {
    let mut client = crate::connect::connect(url)?;
    crate::connect::migrate(&mut client)?;
    crate::connect::check_durability(&mut client)?;
    Ok(client)
}

impl PgStore {
    pub(crate) fn new(conn: Conn, url: String) -> Self {
        Self { conn, changes: 0, url }
    }

    fn exec(&mut self, sql: &str) -> Result<(), StoreError> {
        self.conn.client.batch_execute(sql).map_err(map_err)
    }
}

fn i(v: u32) -> i64 {
    i64::from(v)
}

impl PgStore {
    /// One attempt at `sql/job_insert.sql`: the new id, or `None` when an
    /// unfinished job of another transaction holds the unique key.
    fn insert_row(&mut self, j: &JobInsert<'_>) -> Result<Option<JobId>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_insert.sql"))?;
        let s = j.status;
        let row = self
            .conn
            .client
            .query_opt(
                &st,
                &[
                    &j.queue,
                    &j.kind,
                    &j.payload,
                    &i64::from(j.priority.get()),
                    &s.state.as_str(),
                    &i(s.attempts),
                    &i(s.max_attempts),
                    &s.ready_at.as_millis(),
                    &j.created_at.as_millis(),
                    &j.unique_key,
                    &s.last_token.0,
                    &j.event.map(|e| e.at.as_millis()),
                    &j.event.map(|e| e.kind),
                    &j.event.map(|e| e.data),
                ],
            )
            .map_err(map_err)?;
        let Some(row) = row else { return Ok(None) };
        self.changes += 1 + u64::from(j.event.is_some());
        decode::col(&row, 0, "id", None).map(|id| Some(JobId(id)))
    }
}

impl Store for PgStore {
    fn job_transition(&mut self, p: &JobSetStatus<'_>, event: Option<EventWrite<'_>>) -> Result<bool, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_transition.sql"))?;
        let s = p.status;
        let lease = s.lease.as_ref();
        // A retry gives a finished job its unique key back: another process
        // may have taken the key since the engine checked, and the unique
        // index would then abort the whole transaction. A savepoint (retries
        // are rare) keeps that failure to this write.
        let retry = p.status.state == JobState::Ready && matches!(p.expect_state, JobState::Dead | JobState::Cancelled);
        if retry {
            self.exec("SAVEPOINT relay_retry")?;
        }
        let row = self.conn.client.query_one(
            &st,
            &[
                &p.id.0,
                &p.expect_state.as_str(),
                &p.expect_token.0,
                &s.state.as_str(),
                &i(s.attempts),
                &s.ready_at.as_millis(),
                &s.finished_at.map(Timestamp::as_millis),
                &s.last_token.0,
                &lease.map(|l| l.expires_at.as_millis()),
                &lease.map(|l| l.worker.as_str()),
                &s.last_error.as_deref(),
                &p.result,
                &event.map_or(0, |e| e.at.as_millis()),
                &event.map(|e| e.kind),
                &event.map_or("", |e| e.data),
            ],
        );
        let row = match row {
            Ok(row) => row,
            Err(e) if retry && e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION) => {
                self.exec("ROLLBACK TO SAVEPOINT relay_retry; RELEASE SAVEPOINT relay_retry")?;
                return Err(StoreError::KeyTaken { job: p.id });
            }
            Err(e) => return Err(map_err(e)),
        };
        if retry {
            self.exec("RELEASE SAVEPOINT relay_retry")?;
        }
        let matched = decode::col::<i64>(&row, 0, "matched", Some(p.id))? == 1;
        if matched {
            self.changes += 1 + u64::from(event.is_some());
        }
        Ok(matched)
    }

    fn job_prune(&mut self, before: Timestamp) -> Result<u64, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_prune.sql"))?;
        let row = self
            .conn
            .client
            .query_one(&st, &[&before.as_millis()])
            .map_err(map_err)?;
        let n: i64 = decode::col(&row, 0, "pruned", None)?;
        let n = u64::try_from(n).unwrap_or(0);
        self.changes += n;
        Ok(n)
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

    fn changes(&self) -> u64 {
        self.changes
    }

    fn busy_is_transient(&self) -> bool {
        true
    }

    /// Inserts the job, or, when a submit with the same unique key in
    /// another process committed first, returns that job (the same answer
    /// the engine gives a key it finds before inserting).
    fn job_insert(&mut self, j: &JobInsert<'_>) -> Result<JobId, StoreError> {
        // The holder can finish between the insert and the look-up; then
        // the insert is tried again (bounded: each round needs another
        // process to finish a job with this very key at that moment).
        for _ in 0..8 {
            if let Some(id) = self.insert_row(j)? {
                return Ok(id);
            }
            let key = j.unique_key.ok_or_else(|| StoreError::Io {
                message: "the insert of a job without a unique key returned no row".into(),
                source: "no row".into(),
            })?;
            if let Some(id) = self.job_find_active_by_key(key)? {
                return Ok(id);
            }
        }
        Err(StoreError::Busy)
    }

    fn job_find_active_by_key(&mut self, key: &str) -> Result<Option<JobId>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_find_active_by_key.sql"))?;
        let row = self.conn.client.query_opt(&st, &[&key]).map_err(map_err)?;
        row.map(|r| decode::col(&r, 0, "id", None).map(JobId)).transpose()
    }

    fn job_key_holder(&mut self, id: JobId) -> Result<Option<(String, JobId)>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_key_holder.sql"))?;
        match self.conn.client.query_opt(&st, &[&id.0]).map_err(map_err)? {
            Some(row) => Ok(Some((
                decode::col(&row, 0, "unique_key", Some(id))?,
                JobId(decode::col(&row, 1, "id", Some(id))?),
            ))),
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

    fn job_delete(&mut self, id: JobId) -> Result<bool, StoreError> {
        let ev = self.conn.stmt(include_str!("../sql/job_events_delete.sql"))?;
        self.changes += self.conn.client.execute(&ev, &[&id.0]).map_err(map_err)?;
        let st = self.conn.stmt(include_str!("../sql/job_delete.sql"))?;
        let n = self.conn.client.execute(&st, &[&id.0]).map_err(map_err)?;
        self.changes += n;
        Ok(n == 1)
    }

    fn job_ready_heads(&mut self, queue: &str, now: Timestamp) -> Result<Vec<Candidate>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_ready_heads.sql"))?;
        let rows = self
            .conn
            .client
            .query(&st, &[&queue, &now.as_millis()])
            .map_err(map_err)?;
        rows.iter()
            .map(|row| {
                let id = JobId(decode::col(row, 0, "id", None)?);
                Ok(Candidate {
                    id,
                    priority: decode::priority(row, 1, Some(id))?,
                    ready_at: Timestamp::from_millis(decode::col(row, 2, "ready_at", Some(id))?),
                })
            })
            .collect()
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

    fn event_append(&mut self, job: JobId, at: Timestamp, kind: &str, data: &str) -> Result<i64, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/event_append.sql"))?;
        let row = self
            .conn
            .client
            .query_one(&st, &[&job.0, &at.as_millis(), &kind, &data])
            .map_err(map_err)?;
        self.changes += 1;
        decode::col(&row, 0, "seq", Some(job))
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
