//! Submitting inside a transaction the caller holds open (transactional
//! enqueue): on SQLite through the caller's connection (whose checks are
//! `relay_sqlite::within`'s), on PostgreSQL as `relay_submit(...)` takes
//! the job. `Relay::submit_in` and
//! `submit_in_pg` (relay.rs) are the API; ARCHITECTURE.md, "Enqueue inside
//! the caller's transaction", says how it works.

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::request::{NewJob, Submitted};

impl Engine {
    /// Submits `jobs` inside the transaction open on `tx`, a connection to
    /// this Relay's SQLite file (see `Relay::submit_in`).
    pub(crate) fn submit_in(&self, tx: &rusqlite::Connection, jobs: Vec<NewJob>) -> Result<Vec<Submitted>> {
        let mut store = self.within(tx, "submit")?;
        let pending = self.submit_op(jobs)?;
        self.run_within(&mut store, pending)
    }

    /// Emits event `key` inside the caller's transaction on this Relay's
    /// file (see `Relay::emit_in`).
    pub(crate) fn emit_in(&self, tx: &rusqlite::Connection, key: &str, payload: Vec<u8>) -> Result<crate::Emitted> {
        let mut store = self.within(tx, "emit")?;
        let pending = self.emit_op(key, payload)?;
        self.run_within(&mut store, pending)
    }

    /// The store of the transaction open on `tx`, checked to be on this
    /// Relay's file (`what` names the call in the refusal).
    fn within<'c>(&self, tx: &'c rusqlite::Connection, what: &str) -> Result<impl relay_store::Store + 'c> {
        let Some(ours) = self.backend.file() else {
            return Err(Error::InvalidInput(relay_core::InvalidInput::new(
                "transaction",
                format!(
                    "this Relay is on {}, not an SQLite file: {what} inside your own transaction there is for SQLite files",
                    self.backend.describe()
                ),
            )));
        };
        relay_sqlite::within(tx, ours).map_err(|e| match e {
            relay_sqlite::WithinError::Refused(reason) => {
                Error::InvalidInput(relay_core::InvalidInput::new("transaction", reason))
            }
            relay_sqlite::WithinError::Store(e) => e.into(),
        })
    }
}

#[cfg(feature = "postgres")]
impl Engine {
    /// An event for `relay_emit(...)`, checked as `emit` checks it.
    pub(crate) fn emit_for_pg(&self, key: &str, payload: &[u8]) -> Result<()> {
        if self.backend.file().is_some() {
            return Err(Error::InvalidInput(relay_core::InvalidInput::new(
                "transaction",
                "this Relay is on an SQLite file: emit inside your transaction there with Relay::emit_in",
            )));
        }
        // The same checks as emit's (the function makes them again).
        drop(self.emit_op(key, payload.to_vec())?);
        Ok(())
    }

    /// A job for `relay_submit(...)`, validated as `submit` does, and its
    /// delay in milliseconds.
    pub(crate) fn for_pg(&self, job: NewJob) -> Result<(crate::request::ValidJob, i64)> {
        if self.backend.file().is_some() {
            return Err(Error::InvalidInput(relay_core::InvalidInput::new(
                "transaction",
                "this Relay is on an SQLite file: submit inside your transaction there with Relay::submit_in",
            )));
        }
        let now = self.options.clock.now();
        let job = job.validate(&self.options.limits, self.options.default_max_attempts, now)?;
        // What a submit inside the caller's transaction cannot do (yet):
        // the field and why, the first that applies.
        const LATER: &str =
            "not supported inside your own transaction on PostgreSQL yet: submit this job with Relay::submit after your commit";
        let refused = [
            (!job.tags.is_empty(), "tags", LATER),
            (
                job.idempotency_key.is_some(),
                "idempotency_key",
                "not supported inside your own transaction on PostgreSQL: your transaction's commit is the answer (use unique_key there)",
            ),
            (job.throttle.is_some(), "throttle", LATER),
            (job.debounce.is_some(), "debounce", LATER),
            (!job.depends_on.is_empty(), "depends_on", LATER),
        ];
        if let Some((_, field, reason)) = refused.into_iter().find(|(refuse, ..)| *refuse) {
            return Err(Error::InvalidInput(relay_core::InvalidInput::new(field, reason)));
        }
        let delay = job.ready_at.since(now);
        Ok((job, i64::try_from(delay.as_millis()).unwrap_or(i64::MAX)))
    }
}

#[cfg(feature = "postgres")]
pub(crate) fn pg_args(job: &crate::request::ValidJob, delay_ms: i64) -> relay_postgres::SubmitArgs<'_> {
    relay_postgres::SubmitArgs {
        queue: &job.queue,
        kind: &job.kind,
        payload: &job.payload,
        priority: i32::from(job.priority.get()),
        delay_ms,
        max_attempts: i32::try_from(job.max_attempts).unwrap_or(i32::MAX),
        unique_key: job.unique_key.as_deref(),
        lease_for_ms: job.lease_for.map(relay_core::time::duration_millis),
        timeout_ms: job.timeout.map(relay_core::time::duration_millis),
        traceparent: job.traceparent.as_deref(),
        group: job.group.as_deref(),
    }
}

#[cfg(feature = "postgres")]
pub(crate) fn from_within(e: relay_postgres::WithinError) -> Error {
    from_within_as(e, "job")
}

/// `e`, a refusal naming `field`.
#[cfg(feature = "postgres")]
pub(crate) fn from_within_as(e: relay_postgres::WithinError, field: &'static str) -> Error {
    match e {
        relay_postgres::WithinError::Refused(reason) => {
            Error::InvalidInput(relay_core::InvalidInput::new(field, reason))
        }
        relay_postgres::WithinError::Store(e) => e.into(),
    }
}
