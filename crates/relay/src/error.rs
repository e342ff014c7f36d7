//! The errors of Relay's API. Each variant is something a caller can act on;
//! its docs say what state the data is in afterwards.

use relay_core::{InvalidInput, JobId, JobState, TransitionError};
use relay_store::StoreError;
use std::sync::Arc;

/// What went wrong with a call.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No job has this id (it never existed or was deleted). Nothing changed.
    #[error("job {id} not found")]
    NotFound {
        /// The id asked for.
        id: JobId,
    },
    /// No schedule has this name. Nothing changed.
    #[error("no schedule named {name:?}")]
    ScheduleNotFound {
        /// The name asked for.
        name: String,
    },
    /// A job named in a submit's `depends_on` does not exist. Nothing
    /// changed (the submit, and only it, is refused).
    #[error("job {id}, named in depends_on, does not exist (it may have been deleted, or pruned after it finished)")]
    DependencyNotFound {
        /// An id in `depends_on` that names no job.
        id: JobId,
    },
    /// The token is not the job's current valid lease token: the lease
    /// expired, or the job was cancelled or leased again. Nothing changed;
    /// the worker must drop the job.
    #[error("job {id}: lease lost (the token is not the job's current valid lease; drop this job, another worker may hold it)")]
    LeaseLost {
        /// The job the token was for.
        id: JobId,
    },
    /// The action does not apply to the job's state. Nothing changed.
    #[error("job {id} is {state}: cannot {action} it")]
    InvalidState {
        /// The job acted on.
        id: JobId,
        /// Its state when the action was refused.
        state: JobState,
        /// The action refused, in lower case (`"ack"`, `"cancel"`...).
        action: &'static str,
    },
    /// Running the job again would give it a unique key that another
    /// unfinished job holds (a `retry` of a finished job whose key was
    /// taken since). Nothing changed; finish or cancel `holder` first.
    #[error(
        "job {id}: its unique key {key:?} is held by unfinished job {holder}; finish or cancel job {holder} first"
    )]
    Conflict {
        /// The job that was to run again.
        id: JobId,
        /// Its unique key.
        key: String,
        /// The unfinished job that holds `key` now.
        holder: JobId,
    },
    /// A worker's heartbeat for an id whose record another worker made:
    /// over HTTP, a heartbeat must carry the secret the id's first
    /// heartbeat was answered with. Nothing changed.
    #[error(
        "worker {worker} is registered by another worker: send the secret its first heartbeat was answered with, or register under an id of your own"
    )]
    WorkerTaken {
        /// The worker id refused.
        worker: String,
    },
    /// A step record would take the job past a bound of its steps: `bound`
    /// is `"steps"` (how many a job records) or `"step_bytes"` (their
    /// output, all together). Nothing changed; record less (keep large
    /// outputs in your own storage and record where), or split the work
    /// into jobs.
    #[error("job {id}: recording this step would make its {bound} {would_be}, over the bound of {limit}; record less (large outputs belong in your own storage, with the step recording where), or split the work into more jobs")]
    StepBound {
        /// The job recording.
        id: JobId,
        /// `"steps"` or `"step_bytes"`.
        bound: &'static str,
        /// The bound.
        limit: u64,
        /// What the record would have made it.
        would_be: u64,
    },
    /// A completion token's completion was refused (see
    /// [`TokenRefusal`]). Nothing changed.
    #[error("{}", refusal.message())]
    Token {
        /// Why.
        refusal: TokenRefusal,
    },
    /// The input was refused before anything was written. Nothing changed.
    #[error(transparent)]
    InvalidInput(#[from] InvalidInput),
    /// A stored row does not decode strictly. Nothing changed.
    #[error("{}corrupt row: {reason}", job.map(|j| format!("job {j}: ")).unwrap_or_default())]
    Corrupt {
        /// The job whose row it is, when the row is a job's.
        job: Option<JobId>,
        /// What does not decode.
        reason: String,
    },
    /// Another process held the database's write lock past the busy timeout.
    /// Nothing changed; retrying is safe.
    #[error("database is busy: another process held its write lock past the busy timeout; retry")]
    Busy,
    /// The store could not be opened: the file is not a Relay database,
    /// was written by a newer Relay, cannot be created or read, or met an
    /// I/O error earlier in this process (restart it); or the server
    /// cannot be reached. An existing database was not modified (a schema
    /// upgrade is one transaction: applied whole, or not at all).
    #[error("cannot open the database: {0}")]
    Open(#[source] Arc<StoreError>),
    /// The store failed before commit; nothing of this call was applied.
    /// Retrying is safe once the cause (often a full disk) is fixed.
    #[error("{0}")]
    Storage(#[source] Arc<StoreError>),
    /// The commit itself failed (an I/O error during the write or fsync):
    /// this change may or may not be on disk. Read it back, or retry a
    /// submit that carries an idempotency key (`NewJob::idempotency_key`),
    /// which cannot run twice.
    #[error("commit failed, so this change may or may not be on disk: {0}")]
    MaybeApplied(#[source] Arc<StoreError>),
    /// The operating system would not give Relay a thread or a runtime it
    /// needs (the process is out of memory or at its thread limit). Nothing
    /// was changed; free resources (or lower `concurrency`) and retry.
    #[error("cannot start {what}: {source} (the process is out of threads or memory)")]
    Resources {
        /// What could not be started ("the relay-writer thread", "the
        /// worker runtime").
        what: String,
        /// The system's error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The Relay was closed, or its writer thread stopped before it
    /// answered (it panicked). A change sent before that may or may not
    /// have been applied: read it back.
    #[error("relay is closed")]
    Closed,
    /// A worker's backend other than this process's store (a Relay server
    /// reached over HTTP, see [`crate::worker::Backend`]) failed the call:
    /// `transient` when it could not be reached or answered that it cannot
    /// now (trying again later may succeed), else it refused the call (a
    /// token, an answer that could not be read). Whether the call was
    /// applied is unknown when it could not be reached.
    #[error("{source}")]
    Backend {
        /// What went wrong, as the backend tells it.
        source: Arc<dyn std::error::Error + Send + Sync>,
        /// Whether trying again later may succeed.
        transient: bool,
    },
}

impl Error {
    /// True when the error lost the whole batch (not just one operation).
    pub(crate) fn is_batch_fatal(&self) -> bool {
        matches!(self, Self::Storage(_) | Self::Busy)
    }

    /// A thread or runtime, named by `what`, that could not be started.
    pub(crate) fn resources(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Resources {
            what: what.into(),
            source: Arc::new(source),
        }
    }

    pub(crate) fn open(e: StoreError) -> Self {
        match e {
            StoreError::Busy => Self::Busy,
            e => Self::Open(Arc::new(e)),
        }
    }
}

/// Why a completion token was not completed
/// ([`crate::Relay::complete_token`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenRefusal {
    /// No token has this id and secret (or it is long gone).
    Unknown,
    /// It was completed already: the first completion stands.
    Used,
    /// Its time ran out (its job's wait timed out).
    Expired,
    /// Its job has ended (or was deleted): nothing waits for it.
    Closed,
}

impl TokenRefusal {
    /// What it says to the one completing.
    pub fn message(self) -> &'static str {
        match self {
            Self::Unknown => "no completion token has this id and secret; check the URL you were given",
            Self::Used => "this token was completed already; the first completion stands",
            Self::Expired => "this token expired: the job stopped waiting for it",
            Self::Closed => "the job this token was made for has ended; nothing waits for it",
        }
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Corrupt { job, reason } => Self::Corrupt { job, reason },
            StoreError::Busy => Self::Busy,
            e @ (StoreError::NotADatabase { .. } | StoreError::SchemaTooNew { .. }) => Self::Open(Arc::new(e)),
            e => Self::Storage(Arc::new(e)),
        }
    }
}

impl From<TransitionError> for Error {
    fn from(e: TransitionError) -> Self {
        match e {
            TransitionError::LeaseLost { id } => Self::LeaseLost { id },
            TransitionError::InvalidState { id, state, action } => Self::InvalidState { id, state, action },
        }
    }
}

/// The result of a Relay call: [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;
