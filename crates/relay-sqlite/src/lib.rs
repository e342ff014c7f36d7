//! Relay's embedded store: one SQLite file.
//!
//! The file runs in WAL mode; the writer commits with `synchronous=NORMAL`
//! and the engine fsyncs the WAL (through [`Store::syncer`](relay_store::Store::syncer)) before it
//! answers, so that the next batch is applied while the disk flushes this
//! one (`Settings::split_commit`; off: `synchronous=FULL`). Every setting is
//! read back after it is set and opening fails if one did not take. The
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
mod quarantine;
mod reader;
mod sql;
/// For the query-plan tests, which read the `sql/` files themselves.
#[doc(hidden)]
pub use sql::with_limits;
mod sync;
mod watch;
mod writer;

pub use connection::{Settings, Target, MIGRATIONS, SCHEMA_VERSION};
use relay_store::{Backend, StoreError, StoreReader, Syncer, WriterStore};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
#[doc(hidden)]
pub use sync::set_wal_sync_hook;

/// Why a caller's connection cannot carry a transactional submit
/// ([`within`]).
#[derive(Debug, thiserror::Error)]
pub enum WithinError {
    /// The connection is not fit for it (no transaction open, another
    /// file, a commit that would not be durable): the message says what to
    /// change.
    #[error("{0}")]
    Refused(String),
    /// Reading the connection, or its file's schema, failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The store on a caller's own connection to the Relay file at `ours`,
/// for one call inside the transaction the caller holds open on it
/// (transactional enqueue, `Relay::submit_in`). Its
/// `begin`/`commit`/`rollback` are a savepoint in that transaction: what it
/// writes commits or rolls back with the caller's transaction, and an
/// error undoes only its own part.
///
/// # Errors
///
/// - [`WithinError::Refused`]: the connection has no transaction open, is
///   on another file (or in memory), or runs with `synchronous` below
///   FULL (its commit would not be durable on power loss).
/// - [`StoreError::SchemaTooNew`] or [`StoreError::NotADatabase`] when the
///   connection's file is not at this build's schema version (open it with
///   this Relay first, which migrates it).
pub fn within<'c>(
    conn: &'c rusqlite::Connection,
    ours: &std::path::Path,
) -> Result<impl relay_store::Store + 'c, WithinError> {
    fit_for_submit(conn, ours)?;
    // Refuses another application's file and a newer schema, as opening does.
    let version = connection::check_version(conn)?;
    if version != SCHEMA_VERSION {
        return Err(StoreError::NotADatabase {
            reason: format!(
                "the connection's file is at schema version {version}, not {SCHEMA_VERSION}: open it with this Relay first"
            ),
        }
        .into());
    }
    Ok(writer::SqliteStore {
        conn,
        syncer: None,
        on_disk: false,
        next_id: None,
        nested: true,
        own: None,
        inserted: Vec::new(),
        queues: writer::Queues::default(),
        triggers_off: false,
        ungrouped: std::collections::HashSet::new(),
    })
}

/// Refuses a connection that cannot carry a transactional submit to the
/// Relay file at `ours`, saying what to change.
fn fit_for_submit(tx: &rusqlite::Connection, ours: &std::path::Path) -> Result<(), WithinError> {
    if tx.is_autocommit() {
        return Err(WithinError::Refused(
            "the connection has no transaction open: begin one (Connection::transaction_with_behavior) and pass it"
                .into(),
        ));
    }
    let theirs = tx.path().filter(|p| !p.is_empty()).map(std::path::Path::new);
    let same = match (theirs, std::fs::canonicalize(ours)) {
        (Some(theirs), Ok(ours)) => std::fs::canonicalize(theirs).is_ok_and(|t| t == ours),
        _ => false,
    };
    if !same {
        return Err(WithinError::Refused(format!(
            "the connection is on {}, this Relay on {}: open your connection on the Relay's file",
            theirs.map_or_else(
                || "an in-memory or temporary database".into(),
                |p| p.display().to_string()
            ),
            ours.display()
        )));
    }
    let sync: i64 = tx
        .pragma_query_value(None, "synchronous", |r| r.get(0))
        .map_err(|e| StoreError::Io {
            message: format!("reading the connection's synchronous setting: {e}"),
            source: Box::new(e),
        })?;
    if sync < 2 {
        return Err(WithinError::Refused(format!(
            "the connection runs with synchronous = {sync}: its commit would not be durable on power loss; run PRAGMA synchronous = FULL on it"
        )));
    }
    Ok(())
}

/// Opens connections to one SQLite database.
#[derive(Debug, Clone)]
pub struct SqliteBackend {
    target: Target,
    settings: Settings,
    /// The ids this process's writers committed (see `watch.rs`).
    own: Arc<watch::OwnIds>,
}

impl SqliteBackend {
    /// A database file, created if missing.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self {
            target: Target::File(path.into()),
            settings: Settings::default(),
            own: Arc::default(),
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
            own: Arc::default(),
        }
    }

    #[must_use]
    pub fn with_settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }
}

impl Backend for SqliteBackend {
    fn open_writer(&self) -> Result<Box<WriterStore>, StoreError> {
        let conn = connection::open(&self.target, &self.settings, true)?;
        let syncer = match &self.target {
            Target::File(path) if self.settings.split_commit => {
                // The schema may have just been written without an fsync.
                let wal = sync::WalSyncer::open(&conn)
                    .and_then(|wal| wal.sync().map(|()| wal))
                    // The first fsync failed: pages may be cached that are
                    // not on disk; a retried open must not build on them.
                    .inspect_err(|_| quarantine::add(path))?;
                Some(Arc::new(wal) as Arc<dyn Syncer>)
            }
            _ => None,
        };
        // Its writes do the triggers' work themselves (writer.rs,
        // `triggers_off`); other connections, other programs' included,
        // run them. Read back, as every setting is.
        if conn
            .set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false)
            .map_err(connection::map_err)?
        {
            return Err(StoreError::Setting {
                name: "SQLITE_DBCONFIG_ENABLE_TRIGGER",
                asked: "0".into(),
                got: "1".into(),
            });
        }
        Ok(Box::new(writer::SqliteStore {
            conn,
            syncer,
            on_disk: matches!(self.target, Target::File(_)),
            next_id: None,
            nested: false,
            own: Some(Arc::clone(&self.own)),
            inserted: Vec::new(),
            queues: writer::Queues::default(),
            triggers_off: true,
            ungrouped: std::collections::HashSet::new(),
        }))
    }

    fn open_reader(&self) -> Result<Box<dyn StoreReader>, StoreError> {
        let conn = connection::open(&self.target, &self.settings, false)?;
        Ok(Box::new(reader::SqliteReader { conn }))
    }

    fn describe(&self) -> String {
        self.target.describe()
    }

    fn durability(&self) -> String {
        match self.target {
            Target::File(_) => {
                "WAL, and the WAL fdatasynced before any change is answered (synchronous=NORMAL + split commit)".into()
            }
            Target::Memory(_) => "in memory: nothing survives the process".into(),
        }
    }

    /// A connection and thread of its own that wake this process's waiting
    /// lessees when another connection commits new jobs (see `watch.rs`).
    /// None for a database in memory: nothing else writes it.
    fn watch_ready(&self, wake: Box<dyn Fn() + Send + Sync>) -> Result<Option<relay_store::WatchGuard>, StoreError> {
        match &self.target {
            Target::File(_) => {
                let conn = connection::open(&self.target, &self.settings, false)?;
                watch::start(conn, self.settings.watch_interval, Arc::clone(&self.own), wake).map(Some)
            }
            Target::Memory(_) => Ok(None),
        }
    }

    fn file(&self) -> Option<&std::path::Path> {
        match &self.target {
            Target::File(path) => Some(path),
            Target::Memory(_) => None,
        }
    }

    fn failure_flag(&self) -> Option<Arc<std::sync::atomic::AtomicBool>> {
        match &self.target {
            Target::File(path) => quarantine::flag(path),
            Target::Memory(_) => None,
        }
    }

    fn quarantine(&self) {
        if let Target::File(path) = &self.target {
            quarantine::add(path);
        }
    }
}
