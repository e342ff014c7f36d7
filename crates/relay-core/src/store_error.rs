//! What a store can report. Driver errors stay behind `#[source]`.

use crate::JobId;

type Source = Box<dyn std::error::Error + Send + Sync>;

/// A store failure. The docs of each variant say what state data is in.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A stored row does not decode strictly (unknown state, NULL where none
    /// may be, priority outside 0-3...). Nothing was changed.
    #[error("{}corrupt row: {reason}", job.map(|j| format!("job {j}: ")).unwrap_or_default())]
    Corrupt {
        /// The job whose row it is, when known.
        job: Option<JobId>,
        /// What is wrong with it.
        reason: String,
    },
    /// Another process held the write lock past the busy timeout. Nothing
    /// was changed; retrying is safe.
    #[error("database is busy: another process held its write lock past the busy timeout; retry")]
    Busy,
    /// The file exists but is not a Relay database. It was not modified.
    #[error("not a Relay database: {reason}")]
    NotADatabase {
        /// Why it is not.
        reason: String,
    },
    /// The database was written by a newer Relay. It was not modified.
    #[error("database schema version {found} is newer than this Relay supports ({supported}); upgrade Relay")]
    SchemaTooNew {
        /// The database's schema version.
        found: i64,
        /// The newest this Relay knows.
        supported: i64,
    },
    /// A setting the guarantees depend on did not take effect.
    #[error("setting {name} did not take effect: asked for {asked}, the database answered {got}")]
    Setting {
        /// The setting (a pragma or a server parameter).
        name: &'static str,
        /// The value Relay set.
        asked: String,
        /// The value the database reported after.
        got: String,
    },
    /// The disk is full. The batch in progress was rolled back.
    #[error("disk full: {message}; free space and retry")]
    Full {
        /// What the driver said.
        message: String,
        /// The driver's error.
        #[source]
        source: Source,
    },
    /// The write would give `job` a unique key that another unfinished job
    /// took meanwhile (another process, after the engine checked). Only
    /// that write was undone; the transaction goes on.
    #[error("job {job}: its unique key was taken by another unfinished job meanwhile")]
    KeyTaken {
        /// The job that was not given the key.
        job: JobId,
    },
    /// Any other I/O or driver failure. During a commit this means the
    /// change may or may not be on disk.
    #[error("storage error: {message}")]
    Io {
        /// What failed, and what to do about it.
        message: String,
        /// The driver's or the system's error.
        #[source]
        source: Source,
    },
}

impl StoreError {
    /// A [`StoreError::Corrupt`] of `job`'s row (when known).
    pub fn corrupt(job: Option<JobId>, reason: impl Into<String>) -> Self {
        Self::Corrupt {
            job,
            reason: reason.into(),
        }
    }

    /// True when only the operation that met it failed; false when the whole
    /// transaction is lost.
    pub fn is_op_local(&self) -> bool {
        matches!(self, Self::Corrupt { .. } | Self::KeyTaken { .. })
    }
}
