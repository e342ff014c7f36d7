//! The plan's side of jobs' waits for events (issue 40): each job's wait
//! read once per batch, written with the batch; the waiters of a key as
//! the batch sees them (the store's, with what the batch wrote).

use super::{Plan, Slot, Undo};
use crate::error::Result;
use relay_core::JobId;
use relay_store::{Wait, WaitWrite};

/// A job's wait as this batch sees it.
#[derive(Clone)]
pub(super) struct WaitEntry {
    wait: Option<Wait>,
    /// The batch writes it (a new wait, or an ended one).
    written: bool,
}

impl Plan<'_> {
    /// Job `id`'s wait for an event, if it has one.
    pub(crate) fn wait_of(&mut self, id: JobId) -> Result<Option<Wait>> {
        if !self.waits.contains_key(&id) {
            let wait = self.store.wait_of(id)?;
            self.waits.insert(id, WaitEntry { wait, written: false });
        }
        Ok(self.waits.get(&id).and_then(|e| e.wait.clone()))
    }

    /// Sets (or, with `None`, ends) job `id`'s wait.
    pub(crate) fn set_wait(&mut self, id: JobId, wait: Option<Wait>) -> Result<()> {
        self.wait_of(id)?;
        let Some(e) = self.waits.get_mut(&id) else {
            return Ok(());
        };
        if self.logging {
            self.undo.push(Undo::Wait(id, e.clone()));
        }
        e.wait = wait;
        e.written = true;
        Ok(())
    }

    /// The jobs waiting for event `key` with their waits' steps, as this
    /// batch sees them, in id order.
    pub(crate) fn waits_on(&mut self, key: &str) -> Result<Vec<(JobId, String)>> {
        let stored = self.store.waits_on(key)?;
        let mut out: Vec<(JobId, String)> = stored
            .into_iter()
            .filter(|(id, _)| match self.waits.get(id) {
                // The batch changed it: as the batch sees it (below).
                Some(e) => !e.written,
                None => true,
            })
            .collect();
        out.extend(
            self.waits
                .iter()
                .filter(|(_, e)| e.written)
                .filter_map(|(id, e)| e.wait.as_ref().filter(|w| w.key == key).map(|w| (*id, w.step.clone()))),
        );
        out.sort_unstable_by_key(|(id, _)| *id);
        Ok(out)
    }

    pub(super) fn restore_wait(&mut self, id: JobId, entry: WaitEntry) {
        self.waits.insert(id, entry);
    }
}

/// The waits a batch writes, and the jobs whose wait it ends; none of a job
/// the batch deletes (its wait goes with its row).
pub(super) fn writes<'a>(
    waits: &'a super::HashMap<JobId, WaitEntry>,
    jobs: &super::HashMap<JobId, Slot>,
) -> (Vec<WaitWrite<'a>>, Vec<JobId>) {
    let deleted = |id: &JobId| matches!(jobs.get(id), Some(Slot::Row(e)) if e.deleted);
    let mut puts = Vec::new();
    let mut ended = Vec::new();
    for (id, e) in waits.iter().filter(|(id, e)| e.written && !deleted(id)) {
        match &e.wait {
            Some(w) => puts.push(WaitWrite {
                job: *id,
                key: &w.key,
                step: &w.step,
                until: w.until,
            }),
            None => ended.push(*id),
        }
    }
    puts.sort_unstable_by_key(|w| w.job);
    ended.sort_unstable();
    (puts, ended)
}
