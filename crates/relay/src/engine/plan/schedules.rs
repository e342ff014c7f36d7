//! The plan's side of periodic jobs: schedules as the batch sees them
//! (read, and locked where other processes write, before they change),
//! the due ones, and what the batch writes of them.

use super::{Plan, Undo};
use crate::error::Result;
use relay_core::Schedule;
use relay_store::ScheduleWrite;

/// A schedule as this batch sees it (`None`: there is none).
#[derive(Clone)]
pub(super) struct ScheduleEntry {
    value: Option<Schedule>,
    /// The store has a row for it (else a delete writes nothing).
    stored: bool,
    /// The batch writes it (or deletes it).
    written: bool,
}

impl Plan<'_> {
    /// Schedule `name` as this batch sees it (read, and locked where other
    /// processes write, on first use).
    pub(crate) fn schedule(&mut self, name: &str) -> Result<Option<Schedule>> {
        if !self.schedules.contains_key(name) {
            let value = self.store.schedule_get(name)?;
            let stored = value.is_some();
            self.schedules.insert(
                name.to_owned(),
                ScheduleEntry {
                    value,
                    stored,
                    written: false,
                },
            );
        }
        Ok(self.schedules.get(name).and_then(|e| e.value.clone()))
    }

    /// Writes schedule `name` whole (`Some`), or deletes it (`None`).
    pub(crate) fn set_schedule(&mut self, name: &str, value: Option<Schedule>) -> Result<()> {
        self.schedule(name)?;
        let Some(e) = self.schedules.get_mut(name) else {
            return Ok(());
        };
        if self.logging {
            self.undo.push(Undo::Schedule(name.to_owned(), e.clone()));
        }
        e.value = value;
        e.written = true;
        Ok(())
    }

    /// Writes schedule `name` whole (`Some`) or deletes it (`None`) without
    /// reading it: for a stored row that does not decode.
    pub(crate) fn overwrite_schedule(&mut self, name: &str, value: Option<Schedule>) {
        let prev = self.schedules.get(name).cloned();
        if self.logging {
            self.undo.push(match prev {
                Some(e) => Undo::Schedule(name.to_owned(), e),
                None => Undo::ScheduleUnread(name.to_owned()),
            });
        }
        self.schedules.insert(
            name.to_owned(),
            ScheduleEntry {
                value,
                stored: true,
                written: true,
            },
        );
    }

    /// Schedules due now, as this batch sees them, at most `limit`, in tick
    /// order (locked, where other processes write; those another batch
    /// holds are passed over). A row that does not decode is its own error.
    pub(crate) fn due_schedules(&mut self, limit: usize) -> Result<Vec<Result<Schedule>>> {
        let now = self.now;
        let mut out = Vec::new();
        for r in self.store.schedules_due(now, limit)? {
            match r {
                Ok(s) => {
                    let e = self.schedules.entry(s.name.clone()).or_insert_with(|| ScheduleEntry {
                        value: Some(s.clone()),
                        stored: true,
                        written: false,
                    });
                    // As the batch left it (changed or removed earlier).
                    if let Some(v) = e.value.as_ref().filter(|v| !v.paused && v.next_at <= now) {
                        out.push(Ok(v.clone()));
                    }
                }
                Err(e) => out.push(Err(e.into())),
            }
        }
        Ok(out)
    }
}

/// The schedules a batch writes or deletes, in name order (a schedule
/// added and removed in one batch writes nothing).
pub(super) fn writes(schedules: &super::HashMap<String, ScheduleEntry>) -> Vec<ScheduleWrite<'_>> {
    let mut schedules: Vec<(&String, &ScheduleEntry)> = schedules
        .iter()
        .filter(|(_, e)| e.written && (e.stored || e.value.is_some()))
        .collect();
    schedules.sort_unstable_by(|a, b| a.0.cmp(b.0));
    schedules
        .into_iter()
        .map(|(name, e)| ScheduleWrite {
            name,
            schedule: e.value.as_ref(),
        })
        .collect()
}
