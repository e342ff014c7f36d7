//! Relay's embedded store: one SQLite file.
//!
//! The file runs in WAL mode with `synchronous=FULL`; both settings are read
//! back after they are set and opening fails if either did not take. The
//! schema is created and migrated on open (`PRAGMA user_version`); a file
//! written by a newer Relay, or a file that is not a Relay database, is
//! refused without being modified. Rows are decoded strictly: a row that
//! breaks an invariant is a `Corrupt` error naming the job.
//!
//! - [`SqliteBackend`]: opens the writer and read connections of one file.
//! - `sql/*.sql`: every statement; `migrations/`: the numbered schema.
//!
//! ```
//! use relay_sqlite::SqliteBackend;
//! use relay_store::Backend;
//! let dir = tempfile::tempdir().unwrap();
//! let backend = SqliteBackend::file(dir.path().join("jobs.db"));
//! let mut writer = backend.open_writer().unwrap();
//! writer.begin().unwrap();
//! writer.commit().unwrap();
//! ```

mod connection;
mod decode;
mod reader;
mod writer;

pub use connection::{Settings, Target, SCHEMA_VERSION};
use relay_store::{Backend, Store, StoreError, StoreReader};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// Opens connections to one SQLite database.
#[derive(Debug, Clone)]
pub struct SqliteBackend {
    target: Target,
    settings: Settings,
}

impl SqliteBackend {
    /// A database file, created if missing.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self {
            target: Target::File(path.into()),
            settings: Settings::default(),
        }
    }

    /// A fresh, private, non-durable database in memory (for tests).
    pub fn memory() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("relay-{}-{n}", std::process::id());
        Self {
            target: Target::Memory(name),
            settings: Settings::default(),
        }
    }

    #[must_use]
    pub fn with_settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    pub fn target(&self) -> &Target {
        &self.target
    }
}

impl Backend for SqliteBackend {
    fn open_writer(&self) -> Result<Box<dyn Store>, StoreError> {
        let conn = connection::open(&self.target, &self.settings, true)?;
        Ok(Box::new(writer::SqliteStore { conn }))
    }

    fn open_reader(&self) -> Result<Box<dyn StoreReader>, StoreError> {
        let conn = connection::open(&self.target, &self.settings, false)?;
        Ok(Box::new(reader::SqliteReader { conn }))
    }

    fn describe(&self) -> String {
        self.target.describe()
    }
}
