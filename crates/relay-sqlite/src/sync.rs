//! The second half of a split commit: fsync the WAL.
//!
//! With `synchronous=NORMAL`, SQLite's `COMMIT` appends the transaction's
//! frames to the WAL and returns without an fsync. The WAL is append-only
//! and recovery replays it up to the first frame whose checksum chain
//! breaks, so an fsync of the WAL file makes every commit written before it
//! durable: the same guarantee `synchronous=FULL` gives, taken one batch
//! later and off the writer's path. Linux flushes a file's data through any
//! descriptor of it, so a descriptor of our own (read-only) is enough.
//!
//! Opening and closing our own descriptor of the WAL is safe where the same
//! on the database file is not: SQLite's POSIX locks live on the database
//! file and its `-shm`, never on the `-wal`, so closing this descriptor
//! drops no lock. The WAL stays the same file while any connection of this
//! process is open (the SHARED lock that connection holds keeps every other
//! process from deleting it); each sync checks that the path still names
//! the file it synced, so if something broke that rule the Relay stops
//! instead of answering for a WAL nobody will read.

use crate::connection::io_err;
use relay_store::{StoreError, Syncer};
use rusqlite::Connection;
use std::fs::File;
use std::path::{Path, PathBuf};

pub(crate) struct WalSyncer {
    wal: File,
    path: PathBuf,
    /// Which file the descriptor refers to (device and inode).
    identity: Option<(u64, u64)>,
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
        let meta = wal
            .metadata()
            .map_err(|e| io_err(format!("cannot stat the WAL {}", path.display()), e))?;
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_err(format!("cannot fsync the directory {}", dir.display()), e))?;
        Ok(Self {
            wal,
            path,
            identity: identity(&meta),
        })
    }
}

/// How a WAL is fsynced: `fdatasync` unless a test installed a hook.
type SyncHook = fn(&Path, &File) -> std::io::Result<()>;

static SYNC_HOOK: std::sync::OnceLock<SyncHook> = std::sync::OnceLock::new();

/// Test support: routes every WAL fsync of split commits through `hook`
/// (given the WAL's path and Relay's descriptor of it), for a fault
/// injecting VFS that must see them. Only the first call takes effect.
#[doc(hidden)]
pub fn set_wal_sync_hook(hook: SyncHook) {
    let _ = SYNC_HOOK.set(hook);
}

impl Syncer for WalSyncer {
    fn sync(&self) -> Result<(), StoreError> {
        match SYNC_HOOK.get() {
            Some(hook) => hook(&self.path, &self.wal),
            None => self.wal.sync_data(),
        }
        .map_err(|e| io_err(format!("fsync of the WAL {} failed", self.path.display()), e))?;
        // `stat`, not `open`: opening and closing the path could itself drop locks.
        let live = std::fs::metadata(&self.path).map(|m| identity(&m));
        if live.as_ref().ok() == Some(&self.identity) {
            return Ok(());
        }
        Err(StoreError::Io {
            message: format!(
                "the WAL {} was removed or replaced while this Relay had it open (a program that ignores SQLite's locks touched the file?); what was answered since may be lost: stop every program on the file, check it with `sqlite3 FILE 'PRAGMA integrity_check'`, then reopen",
                self.path.display()
            ),
            source: match live {
                Err(e) => Box::new(e),
                Ok(_) => "a different file now has the WAL's name".into(),
            },
        })
    }
}

#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

/// Elsewhere only the WAL's existence is checked.
#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}
