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
    NotFound { id: JobId },
    /// No schedule has this name. Nothing changed.
    #[error("no schedule named {name:?}")]
    ScheduleNotFound { name: String },
    /// A job named in a submit's `depends_on` does not exist. Nothing
    /// changed (the submit, and only it, is refused).
    #[error("job {id}, named in depends_on, does not exist (it may have been deleted, or pruned after it finished)")]
    DependencyNotFound { id: JobId },
    /// The token is not the job's current valid lease token: the lease
    /// expired, or the job was cancelled or leased again. Nothing changed;
    /// the worker must drop the job.
    #[error("job {id}: lease lost (the token is not the job's current valid lease; drop this job, another worker may hold it)")]
    LeaseLost { id: JobId },
    /// The action does not apply to the job's state. Nothing changed.
    #[error("job {id} is {state}: cannot {action} it")]
    InvalidState {
        id: JobId,
        state: JobState,
        action: &'static str,
    },
    /// Running the job again would give it a unique key that another
    /// unfinished job holds (a `retry` of a finished job whose key was
    /// taken since). Nothing changed; finish or cancel `holder` first.
    #[error(
        "job {id}: its unique key {key:?} is held by unfinished job {holder}; finish or cancel job {holder} first"
    )]
    Conflict { id: JobId, key: String, holder: JobId },
    /// The input was refused before anything was written. Nothing changed.
    #[error(transparent)]
    InvalidInput(#[from] InvalidInput),
    /// A stored row does not decode strictly. Nothing changed.
    #[error("{}corrupt row: {reason}", job.map(|j| format!("job {j}: ")).unwrap_or_default())]
    Corrupt { job: Option<JobId>, reason: String },
    /// Another process held the database's write lock past the busy timeout.
    /// Nothing changed; retrying is safe.
    #[error("database is busy: another process held its write lock past the busy timeout; retry")]
    Busy,
    /// The file is not a Relay database, or was written by a newer Relay.
    /// It was not modified.
    #[error("cannot open the database: {0}")]
    Open(#[source] Arc<StoreError>),
    /// The store failed before commit; nothing of this call was applied.
    /// Retrying is safe once the cause (often a full disk) is fixed.
    #[error("{0}")]
    Storage(#[source] Arc<StoreError>),
    /// The commit itself failed (an I/O error during the write or fsync):
    /// this change may or may not be on disk. Read it back, or retry a
    /// submit with a `unique_key` so that it cannot run twice.
    #[error("commit failed, so this change may or may not be on disk: {0}")]
    MaybeApplied(#[source] Arc<StoreError>),
    /// The Relay was closed (or its writer thread stopped).
    #[error("relay is closed")]
    Closed,
}

impl Error {
    /// True when the error lost the whole batch (not just one operation).
    pub(crate) fn is_batch_fatal(&self) -> bool {
        matches!(self, Self::Storage(_) | Self::Busy)
    }

    pub(crate) fn open(e: StoreError) -> Self {
        match e {
            StoreError::Busy => Self::Busy,
            e => Self::Open(Arc::new(e)),
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

pub type Result<T, E = Error> = std::result::Result<T, E>;
