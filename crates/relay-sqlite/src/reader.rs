//! Read connections, used beside the writer (WAL lets them run at once).

use crate::connection::map_err;
use crate::decode::{self, Cols};
use crate::writer::job_get;
use relay_core::{Job, JobId, JobState, QueueSettings, Schedule, Timestamp};
use relay_store::{Event, JobFilter, QueueStats, StoreError, StoreReader};
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
        let mut st = self.conn.prepare_cached(&crate::sql::JOB_LIST).map_err(map_err)?;
        let mut rows = st
            .query(params![
                f.queue.as_deref(),
                f.state.map(JobState::as_str),
                f.before.map(|b| b.0),
                f.limit
            ])
            .map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(decode::job(row)?);
        }
        Ok(out)
    }

    fn job_events(&mut self, id: JobId, after: i64, limit: u32) -> Result<Vec<Event>, StoreError> {
        let mut st = self.conn.prepare_cached(&crate::sql::JOB_EVENTS).map_err(map_err)?;
        let mut rows = st.query(params![id.0, after, limit]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            let c = Cols::new(row, Some(id));
            let raw = c.text(3, "event data")?;
            let data = serde_json::from_str(&raw)
                .map_err(|e| StoreError::corrupt(Some(id), format!("event data is not JSON: {e}")))?;
            out.push(Event {
                job_id: id,
                seq: c.int(0, "seq")?,
                at: Timestamp::from_millis(c.int(1, "at")?),
                kind: c.text(2, "kind")?,
                data,
            });
        }
        Ok(out)
    }

    fn queue_stats(&mut self, now: Timestamp) -> Result<BTreeMap<String, QueueStats>, StoreError> {
        let mut out: BTreeMap<String, QueueStats> = BTreeMap::new();
        let empty = QueueStats::empty;
        let mut st = self.conn.prepare_cached(&crate::sql::QUEUE_COUNTS).map_err(map_err)?;
        let mut rows = st.query([]).map_err(map_err)?;
        while let Some(row) = rows.next().map_err(map_err)? {
            let c = Cols::new(row, None);
            let queue = c.text(0, "queue")?;
            let raw = c.text(1, "state")?;
            let state = JobState::parse(&raw)
                .ok_or_else(|| StoreError::corrupt(None, format!("queue {queue}: unknown state {raw:?}")))?;
            let n = u64::try_from(c.int(2, "count")?).unwrap_or(0);
            out.entry(queue).or_insert_with(empty).counts.insert(state, n);
        }
        let mut st = self
            .conn
            .prepare_cached(&crate::sql::QUEUE_OLDEST_READY)
            .map_err(map_err)?;
        let mut rows = st.query([now.as_millis()]).map_err(map_err)?;
        while let Some(row) = rows.next().map_err(map_err)? {
            let c = Cols::new(row, None);
            let queue = c.text(0, "queue")?;
            if let Some(oldest) = c.opt_int(1, "ready_at")? {
                let age = now.since(Timestamp::from_millis(oldest));
                out.entry(queue).or_insert_with(empty).oldest_ready_age = Some(age);
            }
        }
        Ok(out)
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

    fn queue_settings_all(&mut self) -> Result<Vec<(String, QueueSettings)>, StoreError> {
        let mut st = self
            .conn
            .prepare_cached(&crate::sql::QUEUE_SETTINGS_ALL)
            .map_err(map_err)?;
        let mut rows = st.query([]).map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            out.push(decode::queue_settings(row)?);
        }
        Ok(out)
    }
}
