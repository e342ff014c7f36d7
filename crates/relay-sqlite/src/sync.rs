//! The second half of a split commit: fsync the WAL.
//!
//! With `synchronous=NORMAL`, SQLite's `COMMIT` appends the transaction's
//! frames to the WAL and returns without an fsync. The WAL is append-only
//! and recovery replays it up to the first frame whose checksum chain
//! breaks, so an fsync of the WAL file makes every commit written before it
//! durable: the same guarantee `synchronous=FULL` gives, taken one batch
//! later and off the writer's path. Linux flushes a file's data through any
//! descriptor of it, so a descriptor of our own (read-only) is enough.

use crate::connection::io_err;
use relay_store::{StoreError, Syncer};
use rusqlite::Connection;
use std::fs::File;
use std::path::{Path, PathBuf};

pub(crate) struct WalSyncer {
    wal: File,
    path: PathBuf,
}

impl WalSyncer {
    /// Opens the WAL of the writer's connection (it exists: the connection
    /// has read the schema in WAL mode) and fsyncs its directory once, so
    /// that the WAL's and the database's names survive a power loss too
    /// (SQLite does this on the first fsync it would have made itself).
    pub(crate) fn open(conn: &Connection) -> Result<Self, StoreError> {
        let db = conn.path().filter(|p| !p.is_empty()).ok_or_else(|| StoreError::Io {
            message: "the database has no file name, so its WAL cannot be synced".into(),
            source: "no file name".into(),
        })?;
        let path = PathBuf::from(format!("{db}-wal"));
        let wal = File::open(&path).map_err(|e| io_err(format!("cannot open the WAL {}", path.display()), e))?;
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err(format!("cannot fsync the directory {}", dir.display()), e))?;
        Ok(Self { wal, path })
    }
}

impl Syncer for WalSyncer {
    fn sync(&self) -> Result<(), StoreError> {
        self.wal
            .sync_data()
            .map_err(|e| io_err(format!("fsync of the WAL {} failed", self.path.display()), e))
    }
}
