//! Search and bulk actions: the checks a filter must pass, and retry,
//! cancel or delete of every job a filter matches, a chunk per transaction
//! (`Relay::list`, `retry_matching` and the rest in relay.rs are the API;
//! ARCHITECTURE.md, "Search, tags and bulk actions").

use super::Engine;
use crate::error::{Error, Result};
use relay_core::read::JobFilter;

/// Jobs a bulk action takes per transaction: small enough that the batch
/// it shares with other callers' operations stays short (at 500 a chunk
/// held the writer ~8 ms, and the p99 of submits and leases beside a
/// bulk retry rose 5x; BENCHMARKS.md, "The dashboard at a million jobs").
pub const BULK_CHUNK: u32 = 100;

/// What a bulk action does to each job it matches.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Bulk {
    Retry,
    Cancel,
    Delete,
}

impl Engine {
    /// Runs `what` on every job `filter` matches, a chunk per transaction.
    pub(crate) fn bulk(&self, filter: &JobFilter, what: Bulk) -> Result<u64> {
        check_filter(&JobFilter {
            limit: 1,
            ..filter.clone()
        })?;
        let mut f = JobFilter {
            limit: BULK_CHUNK,
            ..filter.clone()
        };
        let mut done = 0;
        loop {
            let started = std::time::Instant::now();
            let ids = self.readers.with(|r| r.job_search(&f))?;
            let Some(&last) = ids.last() else { break };
            let full = ids.len() == BULK_CHUNK as usize;
            done += self.run(self.bulk_op(ids, what))?;
            if !full {
                break;
            }
            f.before = Some(last);
            // Pace: rest as long as the chunk took, so that a bulk action
            // takes at most about half of the writer's time, however many
            // jobs it matches, and other callers' batches run between.
            std::thread::sleep(started.elapsed());
        }
        Ok(done)
    }
}

pub(crate) fn check_limit(limit: u32) -> Result<()> {
    if limit == 0 || limit > 1000 {
        return Err(Error::InvalidInput(relay_core::InvalidInput::new(
            "limit",
            format!("must be 1-1000, got {limit}"),
        )));
    }
    Ok(())
}

/// Refuses a filter that breaks a limit, naming the field. (`since` at or
/// after `until` is an empty range: it matches nothing.)
pub(crate) fn check_filter(f: &JobFilter) -> Result<()> {
    let limits = relay_core::Limits::default();
    if let Some(q) = &f.queue {
        limits.queue(q)?;
    }
    if let Some(k) = &f.kind {
        limits.label("kind", k)?;
    }
    if let Some(t) = &f.tag {
        limits.tag(t)?;
    }
    if let Some(e) = &f.error_contains {
        let n = e.chars().count();
        if n == 0 || n > relay_core::validate::MAX_SEARCH_LEN {
            return Err(Error::InvalidInput(relay_core::InvalidInput::new(
                "error_contains",
                format!("must be 1-{} characters, got {n}", relay_core::validate::MAX_SEARCH_LEN),
            )));
        }
    }
    if f.limit == 0 {
        return Err(Error::InvalidInput(relay_core::InvalidInput::new(
            "limit",
            "must be at least 1",
        )));
    }
    Ok(())
}
