//! Read connections on PostgreSQL: what `StoreReader` answers beside the
//! writer (a job, a search, events, stats, schedules, throughput).

use crate::connect::map_err;
use crate::decode;
use crate::stmt::{typed, Pooler, Stmt};
use postgres::types::ToSql;
use postgres::{Client, Row};
use relay_core::{Job, JobId, JobState, QueueSettings, Schedule, Timestamp};
use relay_store::{DeadGroup, Event, JobFilter, QueueStats, QueueTotals, StoreError, StoreReader, Throughput};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A connection with its statements (prepared once, by SQL text; behind a
/// pooler in transaction mode, their parameter types learnt once: see
/// `crate::stmt`).
pub(crate) struct Conn {
    pub client: Client,
    stmts: HashMap<&'static str, Stmt>,
    pooled: bool,
}

impl Conn {
    pub(crate) fn new(client: Client, pooler: Pooler) -> Self {
        Self {
            client,
            stmts: HashMap::new(),
            pooled: pooler == Pooler::Transaction,
        }
    }

    fn stmt(&mut self, sql: &'static str) -> Result<Stmt, StoreError> {
        if let Some(s) = self.stmts.get(sql) {
            return Ok(s.clone());
        }
        let s = if self.pooled {
            // Prepared and closed inside one transaction: the pooled
            // session keeps nothing.
            let mut tx = self.client.transaction().map_err(map_err)?;
            let types: Arc<[postgres::types::Type]> = Arc::from(tx.prepare(sql).map_err(map_err)?.params());
            tx.commit().map_err(map_err)?;
            Stmt::Unnamed(Arc::from(sql), types)
        } else {
            Stmt::Prepared(self.client.prepare(sql).map_err(map_err)?)
        };
        self.stmts.insert(sql, s.clone());
        Ok(s)
    }

    pub(crate) fn query(&mut self, st: &Stmt, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, postgres::Error> {
        match st {
            Stmt::Prepared(s) => self.client.query(s, params),
            Stmt::Unnamed(sql, types) => self.client.query_typed(sql.as_ref(), &typed(params, types)),
        }
    }

    /// The first row, if any.
    pub(crate) fn query_opt(
        &mut self,
        st: &Stmt,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, postgres::Error> {
        Ok(self.query(st, params)?.into_iter().next())
    }

    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        let st = self.stmt(include_str!("../sql/job_get.sql"))?;
        match self.query_opt(&st, &[&id.0]).map_err(map_err)? {
            Some(row) => decode::job(&row).map(Some),
            None => Ok(None),
        }
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
        let ids: Vec<i64> = self.job_search(f)?.into_iter().map(|id| id.0).collect();
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let st = self.conn.stmt(include_str!("../sql/job_get_many.sql"))?;
        let rows = self.conn.query(&st, &[&ids]).map_err(map_err)?;
        rows.iter().map(decode::job).collect()
    }

    fn job_search(&mut self, f: &JobFilter) -> Result<Vec<JobId>, StoreError> {
        let sql = if f.tag.is_some() {
            include_str!("../sql/job_search_tag.sql")
        } else if matches!(f.state, Some(JobState::Dead | JobState::Cancelled)) {
            include_str!("../sql/job_search_failed.sql")
        } else {
            include_str!("../sql/job_search.sql")
        };
        let st = self.conn.stmt(sql)?;
        let rows = self
            .conn
            .query(
                &st,
                &[
                    &f.queue.as_deref(),
                    &f.state.map(JobState::as_str),
                    &f.kind.as_deref(),
                    &f.tag.as_deref(),
                    &f.since.map(Timestamp::as_millis),
                    &f.until.map(Timestamp::as_millis),
                    &f.error_contains.as_deref(),
                    &f.before.map(|b| b.0),
                    &i64::from(f.limit),
                ],
            )
            .map_err(map_err)?;
        rows.iter()
            .map(|r| r.try_get::<_, i64>(0).map(JobId).map_err(map_err))
            .collect()
    }

    fn job_dead_groups(&mut self, limit: u32) -> Result<Vec<DeadGroup>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_dead_groups.sql"))?;
        let window = i64::from(relay_store::DEAD_GROUP_WINDOW);
        let rows = self.conn.query(&st, &[&i64::from(limit), &window]).map_err(map_err)?;
        rows.iter()
            .map(|r| {
                Ok(DeadGroup {
                    queue: r.try_get(0).map_err(map_err)?,
                    kind: r.try_get(1).map_err(map_err)?,
                    error: r.try_get(2).map_err(map_err)?,
                    count: u64::try_from(r.try_get::<_, i64>(3).map_err(map_err)?).unwrap_or(0),
                    newest: JobId(r.try_get(4).map_err(map_err)?),
                    last_at: Timestamp::from_millis(
                        r.try_get::<_, Option<i64>>(5)
                            .map_err(map_err)?
                            .ok_or_else(|| StoreError::corrupt(None, "a DEAD job without finished_at"))?,
                    ),
                })
            })
            .collect()
    }

    fn throughput(&mut self, since: Timestamp) -> Result<Vec<Throughput>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/throughput_since.sql"))?;
        let since = relay_store::minute_of(since).as_millis();
        let rows = self.conn.query(&st, &[&since]).map_err(map_err)?;
        rows.iter().map(throughput_row).collect()
    }

    fn throughput_of(&mut self, since: Timestamp, queue: Option<&str>) -> Result<Vec<Throughput>, StoreError> {
        let since = relay_store::minute_of(since).as_millis();
        let rows = match queue {
            Some(q) => {
                let st = self.conn.stmt(include_str!("../sql/throughput_queue.sql"))?;
                self.conn.query(&st, &[&since, &q])
            }
            None => {
                let st = self.conn.stmt(include_str!("../sql/throughput_total.sql"))?;
                self.conn.query(&st, &[&since])
            }
        }
        .map_err(map_err)?;
        rows.iter().map(throughput_row).collect()
    }

    fn wait_of(&mut self, id: JobId) -> Result<Option<relay_store::Wait>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/wait_of.sql"))?;
        match self.conn.query_opt(&st, &[&id.0]).map_err(map_err)? {
            Some(r) => Ok(Some(relay_store::Wait {
                key: decode::col(&r, 0, "key", Some(id))?,
                step: decode::col(&r, 1, "step", Some(id))?,
                until: Timestamp::from_millis(decode::col(&r, 2, "until", Some(id))?),
            })),
            None => Ok(None),
        }
    }

    fn job_events(&mut self, id: JobId, after: i64, limit: u32) -> Result<Vec<Event>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_events.sql"))?;
        let rows = self
            .conn
            .query(&st, &[&id.0, &after, &i64::from(limit)])
            .map_err(map_err)?;
        rows.iter()
            .map(|r| {
                let j = Some(id);
                let data: String = decode::col(r, 3, "event data", j)?;
                let (seq, at, kind) = (
                    decode::col(r, 0, "seq", j)?,
                    decode::col(r, 1, "at", j)?,
                    decode::col(r, 2, "kind", j)?,
                );
                relay_store::decode::event(id, seq, at, kind, &data)
            })
            .collect()
    }

    fn queue_stats(
        &mut self,
        now: Timestamp,
        first: &str,
        last: &str,
    ) -> Result<BTreeMap<String, QueueStats>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/queue_counts.sql"))?;
        let counts = self
            .conn
            .query(&st, &[&first, &last])
            .map_err(map_err)?
            .iter()
            .map(|r| {
                Ok((
                    decode::col(r, 0, "queue", None)?,
                    decode::col(r, 1, "state", None)?,
                    decode::col(r, 2, "count", None)?,
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let st = self.conn.stmt(include_str!("../sql/queue_oldest_ready.sql"))?;
        let oldest = self
            .conn
            .query(&st, &[&first, &last])
            .map_err(map_err)?
            .iter()
            .map(|r| Ok((decode::col(r, 0, "queue", None)?, decode::col(r, 1, "ready_at", None)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        relay_store::decode::queue_stats(counts, oldest, now)
    }

    fn workers(&mut self, after: &str, limit: u32) -> Result<relay_store::WorkerRows, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/workers_page.sql"))?;
        let rows = self.conn.query(&st, &[&after, &i64::from(limit)]).map_err(map_err)?;
        let next = (rows.len() >= limit as usize)
            .then(|| rows.last().and_then(|r| r.try_get::<_, String>(0).ok()))
            .flatten();
        let mut out = Vec::new();
        for row in &rows {
            let read = (|| -> Result<(String, String, i64, Option<i64>), StoreError> {
                Ok((
                    decode::col(row, 0, "id", None)?,
                    decode::col(row, 1, "beat", None)?,
                    decode::col(row, 2, "seen_at", None)?,
                    decode::col(row, 3, "stopped_at", None)?,
                ))
            })();
            out.extend(relay_store::decode::worker_row(read));
        }
        Ok((out, next))
    }

    fn mark_get(&mut self, key: &str, now: Timestamp) -> Result<Option<String>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/mark_get.sql"))?;
        let row = self.conn.query_opt(&st, &[&key, &now.as_millis()]).map_err(map_err)?;
        match row {
            Some(row) => decode::col(&row, 0, "value", None),
            None => Ok(None),
        }
    }

    fn marks_page(
        &mut self,
        first: &str,
        end: &str,
        kept_past: Timestamp,
        limit: u32,
        value_chars: u32,
    ) -> Result<Vec<relay_store::MarkRow>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/marks_page.sql"))?;
        let rows = self
            .conn
            .query(
                &st,
                &[
                    &first,
                    &end,
                    &kept_past.as_millis(),
                    &i64::from(limit),
                    &i32::try_from(value_chars).unwrap_or(i32::MAX),
                ],
            )
            .map_err(map_err)?;
        rows.iter().map(mark_row).collect()
    }

    fn tokens_open(&mut self, kept_past: Timestamp, limit: u32) -> Result<Vec<relay_store::MarkRow>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/tokens_open.sql"))?;
        let rows = self
            .conn
            .query(&st, &[&kept_past.as_millis(), &i64::from(limit)])
            .map_err(map_err)?;
        rows.iter().map(mark_row).collect()
    }

    fn awaited_keys(&mut self, after: &str, limit: u32) -> Result<Vec<relay_store::AwaitedKey>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/awaited_keys.sql"))?;
        let rows = self.conn.query(&st, &[&after, &i64::from(limit)]).map_err(map_err)?;
        rows.iter()
            .map(|r| {
                let waiters: i64 = decode::col(r, 1, "waiters", None)?;
                Ok(relay_store::AwaitedKey {
                    key: decode::col(r, 0, "key", None)?,
                    waiters: u64::try_from(waiters).unwrap_or(0),
                    first: JobId(decode::col(r, 2, "first waiter", None)?),
                    until: Timestamp::from_millis(decode::col(r, 3, "until", None)?),
                })
            })
            .collect()
    }

    fn schedules(&mut self) -> Result<Vec<Schedule>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/schedules_all.sql"))?;
        let rows = self.conn.query(&st, &[]).map_err(map_err)?;
        rows.iter().map(decode::schedule).collect()
    }

    fn queue_settings_all(&mut self, first: &str, last: &str) -> Result<Vec<(String, QueueSettings)>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/queue_settings_all.sql"))?;
        let rows = self.conn.query(&st, &[&first, &last]).map_err(map_err)?;
        rows.iter().map(decode::queue_settings).collect()
    }

    fn queue_names(&mut self, after: &str, limit: u32) -> Result<Vec<String>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/queue_names.sql"))?;
        let rows = self.conn.query(&st, &[&after, &i64::from(limit)]).map_err(map_err)?;
        rows.iter().map(|r| decode::col(r, 0, "queue", None)).collect()
    }

    fn queue_busiest(&mut self, limit: u32) -> Result<Vec<String>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/queue_busiest.sql"))?;
        let rows = self.conn.query(&st, &[&i64::from(limit)]).map_err(map_err)?;
        rows.iter().map(|r| decode::col(r, 0, "queue", None)).collect()
    }

    fn job_due_counts(&mut self, now: Timestamp, limit: u32) -> Result<Vec<(String, JobState, u64)>, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/job_due_counts.sql"))?;
        let rows = self
            .conn
            .query(&st, &[&now.as_millis(), &i64::from(limit)])
            .map_err(map_err)?;
        let mut out = Vec::new();
        for r in &rows {
            let state: String = decode::col(r, 1, "state", None)?;
            // A state no writer wrote (an edit by hand) is left as it is.
            if let Some(state) = JobState::parse(&state) {
                let n: i64 = decode::col(r, 2, "count", None)?;
                out.push((decode::col(r, 0, "queue", None)?, state, u64::try_from(n).unwrap_or(0)));
            }
        }
        Ok(out)
    }

    fn queue_totals(&mut self) -> Result<QueueTotals, StoreError> {
        let st = self.conn.stmt(include_str!("../sql/queue_totals.sql"))?;
        let rows = self.conn.query(&st, &[]).map_err(map_err)?;
        let mut counts = Vec::new();
        let mut totals = QueueTotals::default();
        for r in &rows {
            match decode::col::<Option<String>>(r, 0, "state", None)? {
                Some(state) => counts.push((state, decode::col(r, 1, "count", None)?)),
                None => {
                    let n = |i, name| decode::col::<i64>(r, i, name, None).map(|v| u64::try_from(v).unwrap_or(0));
                    totals.queues = n(2, "queues")?;
                    totals.paused = n(3, "paused")?;
                }
            }
        }
        totals.counts = relay_store::decode::state_totals(counts)?;
        Ok(totals)
    }
}

/// A row of `throughput_*.sql`: minute, queue, submitted, succeeded,
/// failed, dead.
fn throughput_row(r: &postgres::Row) -> Result<Throughput, StoreError> {
    let n = |i: usize| -> Result<u64, StoreError> {
        Ok(u64::try_from(r.try_get::<_, i64>(i).map_err(map_err)?).unwrap_or(0))
    };
    Ok(Throughput {
        minute: Timestamp::from_millis(r.try_get(0).map_err(map_err)?),
        queue: r.try_get(1).map_err(map_err)?,
        submitted: n(2)?,
        succeeded: n(3)?,
        failed: n(4)?,
        dead: n(5)?,
    })
}

/// A row of `marks_page.sql` or `tokens_open.sql`.
fn mark_row(r: &tokio_postgres::Row) -> Result<relay_store::MarkRow, StoreError> {
    Ok(relay_store::MarkRow {
        key: decode::col(r, 0, "key", None)?,
        value: decode::col(r, 1, "value", None)?,
        expires_at: Timestamp::from_millis(decode::col(r, 2, "expires_at", None)?),
    })
}
