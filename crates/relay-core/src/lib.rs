//! The pure heart of Relay: what a job is and how it moves.
//!
//! Nothing here performs I/O, spawns threads or reads the wall clock; every
//! function is deterministic given its inputs, so it is tested exhaustively
//! in isolation and every store applies exactly what it decides.
//!
//! - [`job`]: identifiers, [`JobState`], [`Priority`], the [`Job`] record and
//!   the mutable part of it, [`JobStatus`], that transitions work on.
//! - [`transition()`]: the ONE function that moves a job between states.
//! - [`schedule`]: the aging rule that picks among the oldest ready job of
//!   each priority class.
//! - [`periodic`]: schedules of periodic jobs ([`Recurrence`]: cron or an
//!   interval) and when their ticks fall.
//! - [`queue`]: a queue's own stored settings ([`QueueSettings`]: paused,
//!   [`QueueLimits`], the [`RateLimit`]'s window).
//! - [`retry`]: exponential back-off with jitter, capped.
//! - [`time`]: [`Timestamp`] and the injected [`Clock`].
//! - [`validate`]: limits on names and payloads, as [`InvalidInput`] errors.
//! - [`read`]: what readers are answered ([`read::Event`], [`read::QueueStats`],
//!   [`read::JobFilter`], ...), and [`StoreError`], what a store can report.
//!
//! ```
//! use relay_core::{transition, Action, JobState, JobStatus, RetryPolicy, Timestamp, TransitionCtx};
//! use std::time::Duration;
//!
//! let now = Timestamp::from_millis(1_000);
//! let ready = JobStatus::new_ready(now, 3);
//! let ctx = TransitionCtx { now, retry: &RetryPolicy::default(), jitter: 0.0 };
//! let next = transition(1.into(), &ready, Action::Lease { worker: "w1", lease_for: Duration::from_secs(30) }, &ctx)
//!     .unwrap();
//! let leased = next.status_after(&ready);
//! assert_eq!(leased.state, JobState::Leased);
//! assert_eq!(leased.attempts, 1);
//! ```

#![warn(missing_docs)]

pub mod job;
pub mod periodic;
pub mod presence;
pub mod queue;
pub mod read;
pub mod retry;
pub mod schedule;
mod store_error;
pub mod time;
pub mod transition;
pub mod validate;

pub use job::{DependencyFailure, Job, JobId, JobState, JobStatus, Lease, LeaseToken, Priority, Progress, Step};
pub use periodic::{Recurrence, Schedule};
pub use presence::{Running, WorkerBeat, WorkerRecord, WorkerState};
pub use queue::{Keep, QueueLimits, QueueSettings, RateLimit, RateWindow, Retention};
pub use retry::RetryPolicy;
pub use schedule::{choose, effective_priority, Candidate};
pub use store_error::StoreError;
pub use time::{Clock, ManualClock, SystemClock, Timestamp};
pub use transition::{transition, Action, EventKind, EventRecord, Next, TransitionCtx, TransitionError};
pub use validate::{InvalidInput, Limits};
