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

/// Most bytes of jobs (payloads, results and errors, as an estimate of
/// their JSON) one page of [`Relay::list_page`](crate::Relay::list_page)
/// carries; a page holds at least one job, whatever its size.
pub const LIST_PAGE_BYTES: usize = 8 << 20;

/// Jobs read from the store at a time for a bounded page: a page's memory
/// is its bytes and one such read.
const LIST_READ: u32 = 16;

/// A page of jobs, newest first, and the next page's `before`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobPage {
    /// The page's jobs, newest first.
    pub jobs: Vec<relay_core::Job>,
    /// The next page's `before`: the page's last job, when more may follow.
    pub next: Option<relay_core::JobId>,
}

/// What a job weighs in an answer, about: its bytes twice (JSON escapes,
/// base64), its error, and its other fields.
fn answer_bytes(j: &relay_core::Job) -> usize {
    let bytes = j.payload.len() + j.result.as_ref().map_or(0, Vec::len) + j.step_bytes();
    2 * bytes + 128 * j.steps.len() + j.status.last_error.as_ref().map_or(0, String::len) + 512
}

impl Engine {
    /// [`Relay::list_page`](crate::Relay::list_page).
    pub(crate) fn list_page(&self, filter: &JobFilter, max_bytes: usize) -> Result<JobPage> {
        check_filter(filter)?;
        let mut page = JobPage::default();
        let mut bytes = 0usize;
        let mut f = filter.clone();
        let mut left = filter.limit;
        while left > 0 {
            f.limit = left.min(LIST_READ);
            let jobs = self.readers.with(|r| r.job_list(&f))?;
            let read = jobs.len();
            // Fewer than asked: the end, or rows deleted (pruned) between
            // the search and their reads. One id searched past the last
            // row read says which (a page never ends early on a prune).
            let short = read < f.limit as usize;
            let last = jobs.last().map(|j| j.id).or(f.before);
            for j in jobs {
                let size = answer_bytes(&j);
                if !page.jobs.is_empty() && bytes + size > max_bytes {
                    page.next = page.jobs.last().map(|j| j.id);
                    return Ok(page);
                }
                bytes += size;
                left -= 1;
                page.jobs.push(j);
            }
            if short {
                let probe = JobFilter {
                    limit: 1,
                    before: last,
                    ..filter.clone()
                };
                let Some(&more) = self.readers.with(|r| r.job_search(&probe))?.first() else {
                    return Ok(page);
                };
                // Read on from that row (`before` is exclusive).
                f.before = Some(relay_core::JobId(more.0 + 1));
                continue;
            }
            f.before = page.jobs.last().map(|j| j.id);
        }
        // A full page: more may follow.
        page.next = page.jobs.last().map(|j| j.id);
        Ok(page)
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
