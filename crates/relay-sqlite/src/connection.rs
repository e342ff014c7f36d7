//! Opening connections: the header check, the settings the guarantees rest
//! on (each read back after it is set), and schema migration.

use relay_store::StoreError;
use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};
use std::path::PathBuf;
use std::time::Duration;

/// The schema version this build writes (PRAGMA user_version).
pub const SCHEMA_VERSION: i64 = 18;
/// PRAGMA application_id of a Relay database: "RELY".
const APPLICATION_ID: i64 = 0x5245_4C59;
/// Each schema version's migration, in order (applied on open; the plan
/// tests apply them to an in-memory database).
#[doc(hidden)]
pub const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_init.sql"),
    include_str!("../migrations/0002_queues.sql"),
    include_str!("../migrations/0003_dependencies.sql"),
    include_str!("../migrations/0004_traceparent.sql"),
    include_str!("../migrations/0005_tags.sql"),
    include_str!("../migrations/0006_dashboard.sql"),
    include_str!("../migrations/0007_marks.sql"),
    include_str!("../migrations/0008_poison.sql"),
    include_str!("../migrations/0009_progress.sql"),
    include_str!("../migrations/0010_retention.sql"),
    include_str!("../migrations/0011_workers.sql"),
    include_str!("../migrations/0012_scheduled.sql"),
    include_str!("../migrations/0013_groups.sql"),
    include_str!("../migrations/0014_group_heads.sql"),
    include_str!("../migrations/0015_schedule_groups.sql"),
    include_str!("../migrations/0016_group_leased.sql"),
    include_str!("../migrations/0017_worker_owner.sql"),
    include_str!("../migrations/0018_steps.sql"),
];

/// Where the database lives.
#[derive(Debug, Clone)]
pub enum Target {
    File(PathBuf),
    /// A process-private database in memory (SQLite's memdb VFS), shared by
    /// the connections of one backend. Not durable: for tests.
    Memory(String),
}

impl Target {
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::File(p) => p.display().to_string(),
            Self::Memory(n) => format!("in-memory database {n}"),
        }
    }
}

/// Connection settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How long to wait for another process's write lock.
    pub busy_timeout: Duration,
    /// Caps the database at this many pages (SQLite's `max_page_count`):
    /// past it, writes fail as if the disk were full. For tests of that path.
    pub max_page_count: Option<u32>,
    /// Splits the writer's commit in two (see `docs/ARCHITECTURE.md`,
    /// "Split commit"): `COMMIT` runs with `synchronous=NORMAL` and only
    /// writes the WAL; the engine then fsyncs the WAL through
    /// [`relay_store::Store::syncer`] before it answers anyone, while the
    /// writer already applies the next batch. Every answered change is as
    /// durable as with `synchronous=FULL`. `false`: `synchronous=FULL`, each
    /// `COMMIT` waits for its own fsync.
    pub split_commit: bool,
    /// How often the backend's watch looks whether another connection
    /// committed new jobs (see `watch.rs`).
    pub watch_interval: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            busy_timeout: Duration::from_secs(10),
            max_page_count: None,
            split_commit: true,
            watch_interval: Duration::from_millis(10),
        }
    }
}

pub(crate) fn open(target: &Target, settings: &Settings, writer: bool) -> Result<Connection, StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    // Only SQLite itself ever opens the file (never `std::fs`): on Linux,
    // closing any descriptor of a file drops every POSIX lock the process
    // holds on it, including the SHARED lock SQLite keeps for as long as a
    // connection is open in WAL mode. Without it, the next program to close
    // the file (a backup, the sqlite3 CLI) believes it is the last user,
    // checkpoints and unlinks the live WAL. See ARCHITECTURE.md, "The
    // contract".
    let conn = match target {
        Target::File(path) => {
            crate::quarantine::check(path)?;
            Connection::open_with_flags(path, flags)
        }
        Target::Memory(name) => Connection::open_with_flags(format!("file:/{name}?vfs=memdb"), flags),
    }
    .map_err(map_err)?;
    conn.busy_timeout(settings.busy_timeout).map_err(map_err)?;
    conn.set_prepared_statement_cache_capacity(64);
    // Before any setting that writes (journal_mode=WAL rewrites the
    // header): a file that is not a Relay database is refused untouched.
    let version = inspect(&conn, target)?;
    match target {
        Target::File(_) => {
            set_pragma(&conn, "journal_mode", "WAL", "wal")?;
            if writer && settings.split_commit {
                set_pragma(&conn, "synchronous", "NORMAL", "1")?;
            } else {
                set_pragma(&conn, "synchronous", "FULL", "2")?;
            }
        }
        Target::Memory(_) => {}
    }
    if writer {
        if version != SCHEMA_VERSION {
            migrate(&conn)?;
        }
        if let Some(pages) = settings.max_page_count {
            conn.pragma_update(None, "max_page_count", pages).map_err(map_err)?;
        }
    } else {
        set_pragma(&conn, "query_only", "1", "1")?;
    }
    Ok(conn)
}

/// Reads the file's identity through SQLite (which reads the header and
/// writes nothing): refuses a file that is not SQLite, another
/// application's database and a newer schema. Returns the schema version.
fn inspect(conn: &Connection, target: &Target) -> Result<i64, StoreError> {
    let version = check_version(conn).map_err(|e| match e {
        StoreError::NotADatabase { .. } => StoreError::NotADatabase {
            reason: format!("{} is not an SQLite file (its header is wrong)", target.describe()),
        },
        e => e,
    })?;
    if version == 0 && foreign_tables(conn)? {
        return Err(StoreError::NotADatabase {
            reason: "an SQLite database of another application (it has tables but no Relay schema)".into(),
        });
    }
    Ok(version)
}

/// An unversioned file with tables that Relay did not create.
fn foreign_tables(conn: &Connection) -> Result<bool, StoreError> {
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
        .map_err(map_err)?;
    Ok(tables > 0 && pragma_int(conn, "application_id")? != APPLICATION_ID)
}

/// Sets a pragma and reads it back: SQLite ignores misspelled or
/// unsupported pragmas silently, so only the answer counts.
fn set_pragma(conn: &Connection, name: &'static str, value: &str, expect: &str) -> Result<(), StoreError> {
    let got: String = conn
        .query_row(&format!("PRAGMA {name} = {value}"), [], |r| {
            r.get::<_, rusqlite::types::Value>(0)
        })
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => {
                conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get::<_, rusqlite::types::Value>(0))
            }
            e => Err(e),
        })
        .map(|v| match v {
            rusqlite::types::Value::Integer(i) => i.to_string(),
            rusqlite::types::Value::Text(t) => t.to_lowercase(),
            other => format!("{other:?}"),
        })
        .map_err(map_err)?;
    if got != expect {
        return Err(StoreError::Setting {
            name,
            asked: value.to_owned(),
            got,
        });
    }
    Ok(())
}

fn pragma_int(conn: &Connection, name: &str) -> Result<i64, StoreError> {
    conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
        .map_err(map_err)
}

pub(crate) fn check_version(conn: &Connection) -> Result<i64, StoreError> {
    let app = pragma_int(conn, "application_id")?;
    if app != 0 && app != APPLICATION_ID {
        return Err(StoreError::NotADatabase {
            reason: format!("the file belongs to another application (application_id {app:#x})"),
        });
    }
    relay_store::decode::schema_version(pragma_int(conn, "user_version")?, SCHEMA_VERSION)
}

/// Brings the schema to [`SCHEMA_VERSION`] in one transaction, so two
/// processes opening a new file at once migrate it exactly once.
fn migrate(conn: &Connection) -> Result<(), StoreError> {
    let tx = begin_immediate(conn)?;
    // Another process may have migrated (or claimed) the file since `inspect`.
    let version = check_version(conn)?;
    if version == 0 && foreign_tables(conn)? {
        return Err(StoreError::NotADatabase {
            reason: "an SQLite database of another application (it has tables but no Relay schema)".into(),
        });
    }
    let from = usize::try_from(version).unwrap_or(0);
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(from) {
        conn.execute_batch(sql).map_err(map_err)?;
        conn.pragma_update(None, "user_version", i64::try_from(i + 1).unwrap_or(i64::MAX))
            .map_err(map_err)?;
    }
    conn.pragma_update(None, "application_id", APPLICATION_ID)
        .map_err(map_err)?;
    tx.commit().map_err(map_err)
}

fn begin_immediate(conn: &Connection) -> Result<rusqlite::Transaction<'_>, StoreError> {
    rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate).map_err(map_err)
}

pub(crate) fn io_err(message: String, e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Io {
        message,
        source: Box::new(e),
    }
}

/// Maps a driver error to what a caller can act on.
pub(crate) fn map_err(e: rusqlite::Error) -> StoreError {
    let code = e.sqlite_error_code();
    match code {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Busy,
        Some(ErrorCode::DiskFull) => StoreError::Full {
            message: e.to_string(),
            source: Box::new(e),
        },
        Some(ErrorCode::NotADatabase) => StoreError::NotADatabase { reason: e.to_string() },
        Some(ErrorCode::DatabaseCorrupt) => StoreError::corrupt(None, format!("the database file is damaged: {e}")),
        Some(ErrorCode::ReadOnly) => io_err(
            format!(
                "the database is read-only to this process ({e}): Relay writes the file and, beside it, \
                 its -wal and -shm files; give this user write access to the file and its directory \
                 (see ls -l), or remount the filesystem read-write"
            ),
            e,
        ),
        Some(ErrorCode::CannotOpen) => io_err(
            format!(
                "cannot open the database file ({e}): check that its directory exists and that this \
                 user may read and write there (Relay also creates the -wal and -shm files beside it)"
            ),
            e,
        ),
        _ => io_err(e.to_string(), e),
    }
}
