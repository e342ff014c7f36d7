//! Files this process must not open again: an fsync or a commit of theirs
//! failed here.
//!
//! Linux reports a failed writeback once and may keep the pages that never
//! reached the disk in its page cache, marked clean: a connection opened
//! afterwards would read them as if they were stored, and build on them.
//! So once a Relay of this process has met such a failure on a file, every
//! later open of that file in this process is refused until the process
//! restarts (which the error says). Files are named by their canonical
//! path (symlinks and `..` resolved) with device and inode, read with
//! `stat` and `realpath` (never `open`: closing a descriptor of the file
//! would drop the POSIX locks of this process's other connections to it);
//! the path too, because a deleted file's inode number is soon reused by a
//! new file elsewhere. (A second hard link to the file is not recognized.)

use relay_store::StoreError;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

type Identity = (PathBuf, u64, u64);

static FAILED: Mutex<Option<HashSet<Identity>>> = Mutex::new(None);

/// One flag per file, shared by every Relay of this process on it: set by
/// the first failure, read by every batch of the others.
static FLAGS: Mutex<Option<HashMap<Identity, Arc<AtomicBool>>>> = Mutex::new(None);

/// The failure flag every Relay of this process on `path` shares.
pub(crate) fn flag(path: &Path) -> Option<Arc<AtomicBool>> {
    identity(path).map(flag_of)
}

fn flag_of(id: Identity) -> Arc<AtomicBool> {
    let mut flags = FLAGS.lock().unwrap_or_else(PoisonError::into_inner);
    Arc::clone(flags.get_or_insert_with(HashMap::new).entry(id).or_default())
}

#[cfg(unix)]
fn identity(path: &Path) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    // realpath(3): symlinks and `..` resolved; it opens nothing.
    let canonical = std::fs::canonicalize(path).ok()?;
    Some((canonical, meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn identity(path: &Path) -> Option<Identity> {
    std::fs::canonicalize(path).ok().map(|p| (p, 0, 0))
}

/// Records that an fsync or commit of `path` failed in this process.
pub(crate) fn add(path: &Path) {
    let Some(id) = identity(path) else { return };
    flag_of(id.clone()).store(true, Ordering::SeqCst);
    FAILED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashSet::new)
        .insert(id);
}

/// Refuses a file recorded by [`add`].
pub(crate) fn check(path: &Path) -> Result<(), StoreError> {
    let Some(id) = identity(path) else {
        return Ok(()); // not there yet: it will be created
    };
    let failed = FAILED.lock().unwrap_or_else(PoisonError::into_inner);
    if failed.as_ref().is_some_and(|f| f.contains(&id)) {
        return Err(StoreError::Io {
            message: format!(
                "an fsync or write of {} failed earlier in this process, and pages that never reached the disk may still be cached and read back as if they had: fix the disk, stop every program using the file, then start this process again (see ARCHITECTURE.md, \"After an I/O error\")",
                path.display()
            ),
            source: "refused after an I/O error".into(),
        });
    }
    Ok(())
}
