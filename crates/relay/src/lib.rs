//! Relay: a durable job queue on one SQLite file.
//!
//! Programs submit jobs; workers lease them, run them and acknowledge them.
//! Relay promises two things:
//!
//! 1. Nothing it has acknowledged to a caller is lost: a call that changes
//!    state returns only after its change is committed with `fsync`.
//! 2. No job is ever held by two valid leases: every lease carries a larger
//!    fencing token, and a worker whose lease expired gets
//!    [`Error::LeaseLost`] instead of overwriting its successor's work.
//!
//! # Map
//!
//! - [`Relay`] / [`AsyncRelay`]: the API, blocking and async.
//! - [`NewJob`], [`LeaseRequest`], [`LeasedJob`]: what goes in and out.
//! - [`Options`]: limits, aging, retries, batching.
//! - [`StoreUrl`]: whether a target names an SQLite file or a PostgreSQL
//!   database.
//! - [`Error`]: one variant per thing a caller can act on.
//! - The engine (private): one writer thread per process applies every
//!   waiting operation in one transaction and commits once (group commit);
//!   reads use their own connections. Decisions come from `relay_core`;
//!   storage sits behind `relay_store::Store`.
//!
//! # Example
//!
//! ```
//! use relay::{LeaseRequest, NewJob, Relay};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), relay::Error> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let path = dir.path().join("jobs.db");
//! let relay = Relay::open(&path)?;
//! let id = relay.submit(NewJob::new("emails", "send", br#"{"to":"ada"}"#.to_vec()).priority(2))?;
//!
//! let leases = relay.lease(LeaseRequest::new(["emails"]).worker("w1").wait(Duration::from_secs(1)))?;
//! let job = &leases[0];
//! assert_eq!(job.id, id);
//! relay.ack(job.id, job.token, Some(b"sent".to_vec()))?;
//!
//! assert_eq!(relay.get(id)?.state(), relay::JobState::Succeeded);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod async_relay;
mod engine;
mod error;
mod facade;
mod options;
mod relay;
mod request;
mod store_url;
mod trace;
pub mod wire;
mod within;
#[cfg(feature = "worker")]
pub mod worker;

pub use async_relay::AsyncRelay;
pub use engine::calls::WorkerClaim;
pub use engine::housekeeping::Pruned;
pub use engine::metrics::{Health, JobOutcomes, Metrics, Outcome, QueueWait, WriteFailure, WAIT_BUCKETS, WAIT_PAIRS};
pub use engine::reads::{
    EventPage, Orphaned, Stats, StatsPage, StoreInfo, WorkerPage, WorkerView, EVENT_PAGE_BYTES, WORKER_PAGE_BYTES,
};
pub use engine::search::{JobPage, BULK_CHUNK, LIST_PAGE_BYTES};
#[doc(hidden)]
pub use engine::WriterHold;
pub use error::{Error, Result, TokenRefusal};
pub use options::Options;
pub use relay::Relay;
pub use request::{
    Completion, CompletionOutcome, CompletionToken, Emitted, LeaseRequest, LeasedJob, NewJob, NewSchedule, OpenToken,
    RecentEvent, Submitted, WaitingFor, Worked, EVENT_PREVIEW, MAX_DEBOUNCE, MAX_LEASE_BATCH, MAX_THROTTLE, MAX_WAIT,
};
pub use store_url::StoreUrl;

pub use relay_core::job::{
    Joined, Waited, EVENT_KEEP, MAX_EVENT_KEY, MAX_EVENT_PAYLOAD, MAX_STEPS, MAX_STEP_BYTES, MAX_STEP_NAME,
};
pub use relay_core::periodic::time_zones;
pub use relay_core::presence;
pub use relay_core::presence::worker_id;
pub use relay_core::read::{
    AwaitedKey, DeadGroup, Event, JobFilter, QueueStats, QueueTotals, Throughput, DEAD_GROUP_WINDOW,
};
pub use relay_core::StoreError;
pub use relay_core::{
    Clock, DependencyFailure, InvalidInput, Job, JobId, JobState, JobStatus, Keep, Lease, LeaseToken, Limits,
    ManualClock, Priority, Progress, QueueLimits, RateLimit, Recurrence, Retention, RetryPolicy, Running, Schedule,
    Step, SystemClock, Timestamp, WorkerBeat, WorkerRecord, WorkerState,
};
/// The PostgreSQL drivers [`Relay::submit_in_pg`] and
/// [`AsyncRelay::submit_in_pg`] take transactions of.
#[cfg(feature = "postgres")]
pub use relay_postgres::{postgres, tokio_postgres};
/// The SQLite driver Relay is built with: open the connection you pass to
/// [`Relay::submit_in`] with this one, so both use one SQLite library.
pub use rusqlite;

/// The README's Rust examples, compiled and run by `cargo test --doc` so
/// that they work as pasted.
#[cfg(all(doctest, feature = "worker"))]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeExamples;

/// The durable execution guide's Rust example, run as pasted.
#[cfg(all(doctest, feature = "worker"))]
#[doc = include_str!("../../../docs/guides/durable-execution.md")]
pub struct DurableExecutionGuide;

// The handles are meant to be shared across threads and tasks (cloned into
// each); a change that made one of them !Send or !Sync would break users'
// code, so it breaks this build first.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<Relay>();
    shared::<AsyncRelay>();
    shared::<Error>();
};
#[cfg(feature = "worker")]
const _: () = {
    const fn shared<T: Send + Sync>() {}
    const fn sent<T: Send>() {}
    shared::<worker::Worker>();
    sent::<worker::JobContext>();
};
