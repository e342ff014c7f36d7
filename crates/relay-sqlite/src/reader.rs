//! Read connections, used beside the writer (WAL lets them run at once).

use crate::connection::map_err;
use crate::decode::{self, Cols};
use crate::writer::job_get;
use relay_core::{Job, JobId, JobState, QueueSettings, Schedule, Timestamp};
use relay_store::{DeadGroup, Event, JobFilter, QueueStats, QueueTotals, StoreError, StoreReader, Throughput};
use rusqlite::{params, Connection};
use std::collections::BTreeMap;

pub(crate) struct SqliteReader {
    pub(crate) conn: Connection,
}

impl StoreReader for SqliteReader {
    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        job_get(&self.conn, id)
    }

    fn job_list(&mut self, f: &JobFilter) -> Result<Vec<Job>, StoreError> {
        // In-process, a read by primary key per job costs less than a
        // second set of search statements returning whole rows.
        let ids = self.job_search(f)?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            // Gone since the search (deleted, pruned): not listed.
            if let Some(job) = job_get(&self.conn, id)? {
                out.push(job);
            }
        }
        Ok(out)
    }

    fn job_search(&mut self, f: &JobFilter) -> Result<Vec<JobId>, StoreError> {
        let sql = if f.tag.is_some() {
            &crate::sql::JOB_SEARCH_TAG
        } else if matches!(f.state, Some(JobState::Dead | JobState::Cancelled)) {
            &crate::sql::JOB_SEARCH_FAILED
        } else {
            &crate::sql::JOB_SEARCH
        };
        let mut st = self.conn.prepare_cached(sql).map_err(map_err)?;
        let rows = st
            .query_map(
                params![
                    f.queue.as_deref(),
                    f.state.map(JobState::as_str),
                    f.kind.as_deref(),
                    f.tag.as_deref(),
                    f.since.map(Timestamp::as_millis),
                    f.until.map(Timestamp::as_millis),
                    f.error_contains.as_deref(),
                    f.before.map(|b| b.0),
                    f.limit
                ],
                |r| r.get(0),
            )
            .map_err(map_err)?;
        rows.map(|r| r.map(JobId).map_err(map_err)).collect()
    }

    fn job_dead_groups(&mut self, limit: u32) -> Result<Vec<DeadGroup>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(&crate::sql::JOB_DEAD_GROUPS)
            .map_err(map_err)?;
        let mut rows = st
            .query(params![limit, relay_store::DEAD_GROUP_WINDOW])
            .map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            let c = Cols::new(row, None);
            out.push(DeadGroup {
                queue: c.text(0, "queue")?,
                kind: c.text(1, "kind")?,
                error: c.text(2, "last_error")?,
                count: u64::try_from(c.int(3, "count")?).unwrap_or(0),
                newest: JobId(c.int(4, "id")?),
                last_at: Timestamp::from_millis(c.int(5, "finished_at")?),
            });
        }
        Ok(out)
    }

    fn throughput(&mut self, since: Timestamp) -> Result<Vec<Throughput>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(&crate::sql::THROUGHPUT_SINCE)
            .map_err(map_err)?;
        let mut rows = st.query([relay_store::minute_of(since).as_millis()]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(throughput_row(&Cols::new(row, None))?);
        }
        Ok(out)
    }

    fn throughput_of(&mut self, since: Timestamp, queue: Option<&str>) -> Result<Vec<Throughput>, StoreError> {
        let since = relay_store::minute_of(since).as_millis();
        let sql = match queue {
            Some(_) => &crate::sql::THROUGHPUT_QUEUE,
            None => &crate::sql::THROUGHPUT_TOTAL,
        };
        let mut st = self.conn.prepare_cached(sql).map_err(map_err)?;
        let mut rows = match queue {
            Some(q) => st.query(rusqlite::params![since, q]),
            None => st.query(rusqlite::params![since]),
        }
        .map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(throughput_row(&Cols::new(row, None))?);
        }
        Ok(out)
    }

    fn wait_of(&mut self, id: JobId) -> Result<Option<relay_store::Wait>, StoreError> {
        crate::writer::wait_of(&self.conn, id)
    }

    fn job_events(&mut self, id: JobId, after: i64, limit: u32) -> Result<Vec<Event>, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::JOB_EVENTS).map_err(map_err)?;
        let mut rows = st.query(params![id.0, after, limit]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            let c = Cols::new(row, Some(id));
            out.push(relay_store::decode::event(
                id,
                c.int(0, "seq")?,
                c.int(1, "at")?,
                c.text(2, "kind")?,
                &c.text(3, "event data")?,
            )?);
        }
        Ok(out)
    }

    fn queue_stats(
        &mut self,
        now: Timestamp,
        first: &str,
        last: &str,
    ) -> Result<BTreeMap<String, QueueStats>, StoreError> {
        let mut counts = Vec::new();
        let mut st = self.conn.prepare_cached(&crate::sql::QUEUE_COUNTS).map_err(map_err)?;
        let mut rows = st.query([first, last]).map_err(map_err)?;
        while let Some(row) = rows.next().map_err(map_err)? {
            let c = Cols::new(row, None);
            counts.push((c.text(0, "queue")?, c.text(1, "state")?, c.int(2, "count")?));
        }
        let mut oldest = Vec::new();
        let mut st = self
            .conn
            .prepare_cached(&crate::sql::QUEUE_OLDEST_READY)
            .map_err(map_err)?;
        let mut rows = st.query([first, last]).map_err(map_err)?;
        while let Some(row) = rows.next().map_err(map_err)? {
            let c = Cols::new(row, None);
            oldest.push((c.text(0, "queue")?, c.opt_int(1, "ready_at")?));
        }
        relay_store::decode::queue_stats(counts, oldest, now)
    }

    fn mark_get(&mut self, key: &str, now: Timestamp) -> Result<Option<String>, StoreError> {
        use rusqlite::OptionalExtension;
        self.conn
            .prepare_cached(&crate::sql::MARK_GET)
            .and_then(|mut st| {
                st.query_row(rusqlite::params![key, now.as_millis()], |r| r.get(0))
                    .optional()
            })
            .map_err(map_err)
    }

    fn marks_page(
        &mut self,
        first: &str,
        end: &str,
        kept_past: Timestamp,
        limit: u32,
        value_chars: u32,
    ) -> Result<Vec<relay_store::MarkRow>, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::MARKS_PAGE).map_err(map_err)?;
        let mut rows = st
            .query(params![first, end, kept_past.as_millis(), limit, value_chars])
            .map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(mark_row(&Cols::new(row, None))?);
        }
        Ok(out)
    }

    fn tokens_open(&mut self, kept_past: Timestamp, limit: u32) -> Result<Vec<relay_store::MarkRow>, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::TOKENS_OPEN).map_err(map_err)?;
        let mut rows = st.query(params![kept_past.as_millis(), limit]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(mark_row(&Cols::new(row, None))?);
        }
        Ok(out)
    }

    fn awaited_keys(&mut self, after: &str, limit: u32) -> Result<Vec<relay_store::AwaitedKey>, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::AWAITED_KEYS).map_err(map_err)?;
        let mut rows = st.query(params![after, limit]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            let c = Cols::new(row, None);
            out.push(relay_store::AwaitedKey {
                key: c.text(0, "key")?,
                waiters: u64::try_from(c.int(1, "waiters")?).unwrap_or(0),
                first: JobId(c.int(2, "first waiter")?),
                until: Timestamp::from_millis(c.int(3, "until")?),
            });
        }
        Ok(out)
    }

    fn workers(&mut self, after: &str, limit: u32) -> Result<relay_store::WorkerRows, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::WORKERS_PAGE).map_err(map_err)?;
        let mut rows = st.query(params![after, limit]).map_err(map_err)?;
        let mut out = Vec::new();
        let (mut n, mut last) = (0u32, None);
        while let Some(row) = rows.next().map_err(map_err)? {
            n += 1;
            last = row.get::<_, String>(0).ok();
            let c = crate::decode::Cols::new(row, None);
            let read = (|| -> Result<_, StoreError> {
                Ok((
                    c.text(0, "id")?,
                    c.text(1, "beat")?,
                    c.int(2, "seen_at")?,
                    c.opt_int(3, "stopped_at")?,
                ))
            })();
            out.extend(relay_store::decode::worker_row(read));
        }
        Ok((out, last.filter(|_| n >= limit)))
    }

    fn schedules(&mut self) -> Result<Vec<Schedule>, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::SCHEDULES_ALL).map_err(map_err)?;
        let mut rows = st.query([]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(decode::schedule(row)?);
        }
        Ok(out)
    }

    fn queue_settings_all(&mut self, first: &str, last: &str) -> Result<Vec<(String, QueueSettings)>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(&crate::sql::QUEUE_SETTINGS_ALL)
            .map_err(map_err)?;
        let mut rows = st.query([first, last]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(decode::queue_settings(row)?);
        }
        Ok(out)
    }

    fn queue_names(&mut self, after: &str, limit: u32) -> Result<Vec<String>, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::QUEUE_NAMES).map_err(map_err)?;
        let mut rows = st.query(rusqlite::params![after, limit]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(Cols::new(row, None).text(0, "queue")?);
        }
        Ok(out)
    }

    fn queue_busiest(&mut self, limit: u32) -> Result<Vec<String>, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::QUEUE_BUSIEST).map_err(map_err)?;
        let mut rows = st.query([limit]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(Cols::new(row, None).text(0, "queue")?);
        }
        Ok(out)
    }

    fn job_due_counts(&mut self, now: Timestamp, limit: u32) -> Result<Vec<(String, JobState, u64)>, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::JOB_DUE_COUNTS).map_err(map_err)?;
        let mut rows = st.query(rusqlite::params![now.as_millis(), limit]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            let c = Cols::new(row, None);
            let state = c.text(1, "state")?;
            // A state no writer wrote (an edit by hand) is left as it is.
            if let Some(state) = JobState::parse(&state) {
                out.push((
                    c.text(0, "queue")?,
                    state,
                    u64::try_from(c.int(2, "count")?).unwrap_or(0),
                ));
            }
        }
        Ok(out)
    }

    fn queue_totals(&mut self) -> Result<QueueTotals, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::QUEUE_TOTALS).map_err(map_err)?;
        let mut rows = st.query([]).map_err(map_err)?;
        let mut counts = Vec::new();
        let mut totals = QueueTotals::default();
        while let Some(row) = rows.next().map_err(map_err)? {
            let c = Cols::new(row, None);
            match c.opt_text(0, "state")? {
                Some(state) => counts.push((state, c.int(1, "count")?)),
                None => {
                    totals.queues = u64::try_from(c.int(2, "queues")?).unwrap_or(0);
                    totals.paused = u64::try_from(c.int(3, "paused")?).unwrap_or(0);
                }
            }
        }
        totals.counts = relay_store::decode::state_totals(counts)?;
        Ok(totals)
    }
}

/// A row of `throughput_*.sql`: minute, queue, submitted, succeeded,
/// failed, dead.
fn throughput_row(c: &Cols<'_, '_>) -> Result<Throughput, StoreError> {
    let n = |i, name| c.int(i, name).map(|v| u64::try_from(v).unwrap_or(0));
    Ok(Throughput {
        minute: Timestamp::from_millis(c.int(0, "minute")?),
        queue: c.text(1, "queue")?,
        submitted: n(2, "submitted")?,
        succeeded: n(3, "succeeded")?,
        failed: n(4, "failed")?,
        dead: n(5, "dead")?,
    })
}

/// A row of `marks_page.sql` or `tokens_open.sql`.
fn mark_row(c: &Cols<'_, '_>) -> Result<relay_store::MarkRow, StoreError> {
    Ok(relay_store::MarkRow {
        key: c.text(0, "key")?,
        value: c.text(1, "value")?,
        expires_at: Timestamp::from_millis(c.int(2, "expires_at")?),
    })
}
