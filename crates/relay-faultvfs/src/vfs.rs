//! The shim itself: see the crate docs.

use rusqlite::ffi;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

/// The exit status of a process whose power [`power_cut`] cut.
pub const CUT_EXIT_CODE: i32 = 86;

/// Which operations fail. Writes and fsyncs are counted from 1 over the
/// database and WAL files of the process (Relay's own WAL fsyncs included).
#[derive(Debug, Clone, Copy, Default)]
pub struct Plan {
    /// The Nth write fails with this SQLite code, writing nothing:
    /// `SQLITE_FULL` is a full disk (ENOSPC), `SQLITE_IOERR_WRITE` EIO.
    pub fail_write: Option<(u64, c_int)>,
    /// The Nth fsync fails (`SQLITE_IOERR_FSYNC`; Relay's own WAL fsyncs
    /// see EIO) and loses what it should have written, for good: as on
    /// Linux, the pages are dropped and later fsyncs succeed without them
    /// (a power cut afterwards shows the hole).
    pub fail_sync: Option<u64>,
}

/// What the shim knows of one database or WAL file.
#[derive(Default)]
struct FileState {
    /// Length at the last successful fsync.
    synced_len: u64,
    /// Sequence number of the write epoch that fsync covered.
    synced_seq: u64,
    /// Current length.
    len: u64,
    /// Bytes overwritten since that fsync: (sequence, offset, old bytes).
    undo: Vec<(u64, u64, Vec<u8>)>,
    /// What a failed fsync lost: ranges whose pages Linux dropped (marked
    /// clean without writing them), with what the disk still holds there.
    /// A later write of a range makes it dirty again (it is then written
    /// by the next fsync); what is left is restored by a power cut even
    /// though later fsyncs "succeeded".
    holes: Vec<(u64, Vec<u8>)>,
}

impl FileState {
    /// An fsync failed: what it should have written is lost (Linux drops
    /// the pages and reports success next time), the rest goes on.
    fn sync_failed(&mut self, seq: u64) {
        for (_, off, old) in self.undo.drain(..).rev() {
            self.holes.push((off, old));
        }
        if self.len > self.synced_len {
            let n = usize::try_from(self.len - self.synced_len).unwrap_or(0);
            self.holes.push((self.synced_len, vec![0; n]));
        }
        self.synced_seq = seq;
        self.synced_len = self.len;
    }

    /// `[start, end)` is written again: those bytes are no longer lost.
    fn rewritten(&mut self, start: u64, end: u64) {
        let mut kept = Vec::with_capacity(self.holes.len());
        for (off, bytes) in self.holes.drain(..) {
            let hole_end = off + bytes.len() as u64;
            if hole_end <= start || off >= end {
                kept.push((off, bytes));
                continue;
            }
            if off < start {
                kept.push((off, bytes[..usize::try_from(start - off).unwrap_or(0)].to_vec()));
            }
            if hole_end > end {
                kept.push((end, bytes[usize::try_from(end - off).unwrap_or(0)..].to_vec()));
            }
        }
        self.holes = kept;
    }

    /// An fsync that began at `(seq, len)` succeeded: everything written
    /// before it is durable.
    fn synced(&mut self, (seq, len): (u64, u64)) {
        self.undo.retain(|e| e.0 >= seq);
        if seq > self.synced_seq {
            self.synced_seq = seq;
            self.synced_len = len;
        }
    }
}

/// An open file: the `unix` VFS's methods it had, and its path if tracked.
struct Handle {
    orig: &'static ffi::sqlite3_io_methods,
    path: Option<PathBuf>,
}

#[derive(Default)]
struct State {
    files: HashMap<PathBuf, FileState>,
    handles: HashMap<usize, Handle>,
    /// Patched method tables, by the address of the original.
    patched: HashMap<usize, &'static ffi::sqlite3_io_methods>,
    next_seq: u64,
    writes: u64,
    syncs: u64,
    plan: Plan,
}

fn state() -> MutexGuard<'static, State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The `unix` VFS, as an address (raw pointers are not `Sync`).
static PARENT: OnceLock<usize> = OnceLock::new();

fn parent() -> *mut ffi::sqlite3_vfs {
    PARENT.get().copied().unwrap_or(0) as *mut ffi::sqlite3_vfs
}

/// Registers the shim as the process's default SQLite VFS (once), routes
/// Relay's own WAL fsyncs through it, and sets the failure plan.
///
/// # Panics
/// If SQLite has no `unix` VFS (not a Unix build).
pub fn install(plan: Plan) {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // SAFETY: sqlite3_vfs_find initializes SQLite and returns a static.
        let unix = unsafe { ffi::sqlite3_vfs_find(c"unix".as_ptr()) };
        assert!(!unix.is_null(), "SQLite has no unix VFS");
        let _ = PARENT.set(unix as usize);
        // SAFETY: a plain copy of a valid, static VFS struct.
        let mut vfs: ffi::sqlite3_vfs = unsafe { *unix };
        vfs.zName = c"relay-fault".as_ptr();
        vfs.pNext = std::ptr::null_mut();
        vfs.xOpen = Some(x_open);
        vfs.xDelete = Some(x_delete);
        let vfs = Box::leak(Box::new(vfs));
        // SAFETY: the struct lives forever; 1 makes it the default.
        let rc = unsafe { ffi::sqlite3_vfs_register(vfs, 1) };
        assert_eq!(rc, ffi::SQLITE_OK, "cannot register the fault VFS");
        relay_sqlite::set_wal_sync_hook(external_sync);
    });
    state().plan = plan;
}

/// Cuts the power: no write reaches a file any more, every tracked file is
/// put back as it was at its last successful fsync, and the process ends
/// at once with [`CUT_EXIT_CODE`] (no destructors, no buffers flushed).
pub fn power_cut() -> ! {
    use std::os::unix::fs::FileExt;
    let mut s = state(); // held until the end: nothing else writes
    for (path, fs) in &mut s.files {
        let Ok(file) = std::fs::OpenOptions::new().write(true).open(path) else {
            continue; // deleted: nothing to restore
        };
        let _ = file.set_len(fs.synced_len);
        let undo = fs.undo.iter().rev().map(|(_, off, old)| (off, old));
        // Lost pages last: what the disk holds there whatever came after.
        for (off, old) in undo.chain(fs.holes.iter().map(|(off, old)| (off, old))) {
            if *off < fs.synced_len {
                let n = old
                    .len()
                    .min(usize::try_from(fs.synced_len - off).unwrap_or(usize::MAX));
                let _ = file.write_all_at(&old[..n], *off);
            }
        }
        let _ = file.sync_all();
    }
    // SAFETY: ends the process without running anything else.
    unsafe { libc::_exit(CUT_EXIT_CODE) }
}

/// Relay's own fsync of a WAL (its split commit), through the shim.
fn external_sync(path: &Path, file: &std::fs::File) -> std::io::Result<()> {
    let epoch = {
        let mut s = state();
        s.syncs += 1;
        let seq = s.next_seq;
        if s.plan.fail_sync == Some(s.syncs) {
            if let Some(fs) = s.files.get_mut(path) {
                fs.sync_failed(seq);
            }
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        s.files.get(path).map(|fs| (seq, fs.len))
    };
    file.sync_data()?;
    if let Some(epoch) = epoch {
        if let Some(fs) = state().files.get_mut(path) {
            fs.synced(epoch);
        }
    }
    Ok(())
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let parent = parent();
    // SAFETY: the parent is the unix VFS; `file` has room for its file.
    let rc = unsafe { ((*parent).xOpen.expect("unix xOpen"))(parent, name, file, flags, out_flags) };
    // SAFETY: `file` was just filled in (or left closed) by the parent.
    if rc != ffi::SQLITE_OK || unsafe { (*file).pMethods.is_null() } {
        return rc;
    }
    let tracked = !name.is_null() && flags & (ffi::SQLITE_OPEN_MAIN_DB | ffi::SQLITE_OPEN_WAL) != 0;
    // SAFETY: SQLite passes a NUL-terminated name.
    let path = tracked.then(|| PathBuf::from(unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned()));
    // SAFETY: the parent set a valid, static method table.
    let orig: &'static ffi::sqlite3_io_methods = unsafe { &*(*file).pMethods };
    let mut s = state();
    if let Some(p) = &path {
        if !s.files.contains_key(p) {
            let mut size: ffi::sqlite3_int64 = 0;
            // SAFETY: an open file and its own method.
            unsafe { (orig.xFileSize.expect("xFileSize"))(file, &mut size) };
            let len = u64::try_from(size).unwrap_or(0);
            // What is on disk when first seen counts as durable.
            s.files.insert(
                p.clone(),
                FileState {
                    synced_len: len,
                    len,
                    ..FileState::default()
                },
            );
        }
    }
    let key = std::ptr::from_ref(orig) as usize;
    let patched = *s.patched.entry(key).or_insert_with(|| {
        let mut m = *orig;
        m.xWrite = Some(x_write);
        m.xTruncate = Some(x_truncate);
        m.xSync = Some(x_sync);
        m.xClose = Some(x_close);
        Box::leak(Box::new(m))
    });
    s.handles.insert(file as usize, Handle { orig, path });
    // SAFETY: the same file, now calling through the patched table.
    unsafe { (*file).pMethods = patched };
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_delete(_vfs: *mut ffi::sqlite3_vfs, name: *const c_char, sync_dir: c_int) -> c_int {
    if !name.is_null() {
        // SAFETY: SQLite passes a NUL-terminated name.
        let path = PathBuf::from(unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned());
        state().files.remove(&path);
    }
    let parent = parent();
    // SAFETY: forwarded to the unix VFS as given.
    unsafe { ((*parent).xDelete.expect("unix xDelete"))(parent, name, sync_dir) }
}

/// The original methods of `file`, and its tracked path.
fn handle(s: &State, file: *mut ffi::sqlite3_file) -> (&'static ffi::sqlite3_io_methods, Option<PathBuf>) {
    match s.handles.get(&(file as usize)) {
        Some(h) => (h.orig, h.path.clone()),
        None => unreachable_handle(),
    }
}

#[cold]
fn unreachable_handle() -> ! {
    // A file the shim did not open cannot call its methods.
    std::process::abort()
}

/// Reads `[off, off + len)` of `file` through its own method (never a
/// descriptor of ours), zero-filled past its end.
fn read_old(
    orig: &ffi::sqlite3_io_methods,
    file: *mut ffi::sqlite3_file,
    off: u64,
    len: u64,
) -> Result<Vec<u8>, c_int> {
    let mut old = vec![0u8; usize::try_from(len).unwrap_or(0)];
    let (Ok(amt), Ok(at)) = (c_int::try_from(old.len()), i64::try_from(off)) else {
        return Err(ffi::SQLITE_IOERR_READ);
    };
    // SAFETY: an open file, a buffer of `amt` bytes.
    let rc = unsafe { (orig.xRead.expect("xRead"))(file, old.as_mut_ptr().cast::<c_void>(), amt, at) };
    if rc == ffi::SQLITE_OK || rc == ffi::SQLITE_IOERR_SHORT_READ {
        Ok(old)
    } else {
        Err(rc)
    }
}

unsafe extern "C" fn x_write(file: *mut ffi::sqlite3_file, buf: *const c_void, amt: c_int, off: i64) -> c_int {
    let mut s = state();
    let (orig, path) = handle(&s, file);
    if let Some(path) = path {
        s.writes += 1;
        if let Some((n, code)) = s.plan.fail_write {
            if s.writes == n {
                return code;
            }
        }
        let seq = s.next_seq;
        s.next_seq += 1;
        let (start, amt64) = (u64::try_from(off).unwrap_or(0), u64::try_from(amt).unwrap_or(0));
        let fs = s.files.entry(path).or_default();
        fs.rewritten(start, start + amt64);
        let end = (start + amt64).min(fs.len);
        if start < end {
            match read_old(orig, file, start, end - start) {
                Ok(old) => fs.undo.push((seq, start, old)),
                Err(rc) => return rc,
            }
        }
        fs.len = fs.len.max(start + amt64);
    }
    // SAFETY: the original method on its own file.
    unsafe { (orig.xWrite.expect("xWrite"))(file, buf, amt, off) }
}

unsafe extern "C" fn x_truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    let mut s = state();
    let (orig, path) = handle(&s, file);
    if let Some(path) = path {
        let seq = s.next_seq;
        s.next_seq += 1;
        let size = u64::try_from(size).unwrap_or(0);
        let fs = s.files.entry(path).or_default();
        if size < fs.len {
            match read_old(orig, file, size, fs.len - size) {
                Ok(old) => fs.undo.push((seq, size, old)),
                Err(rc) => return rc,
            }
        }
        fs.len = size;
    }
    // SAFETY: the original method on its own file.
    unsafe { (orig.xTruncate.expect("xTruncate"))(file, size) }
}

unsafe extern "C" fn x_sync(file: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    let mut s = state();
    let (orig, path) = handle(&s, file);
    let Some(path) = path else {
        // SAFETY: the original method on its own file.
        return unsafe { (orig.xSync.expect("xSync"))(file, flags) };
    };
    s.syncs += 1;
    if s.plan.fail_sync == Some(s.syncs) {
        let seq = s.next_seq;
        if let Some(fs) = s.files.get_mut(&path) {
            fs.sync_failed(seq);
        }
        return ffi::SQLITE_IOERR_FSYNC;
    }
    let epoch = (s.next_seq, s.files.get(&path).map_or(0, |fs| fs.len));
    // SAFETY: the original method on its own file (under the lock: a cut
    // is ordered after it).
    let rc = unsafe { (orig.xSync.expect("xSync"))(file, flags) };
    if rc == ffi::SQLITE_OK {
        if let Some(fs) = s.files.get_mut(&path) {
            fs.synced(epoch);
        }
    }
    rc
}

unsafe extern "C" fn x_close(file: *mut ffi::sqlite3_file) -> c_int {
    let mut s = state();
    let (orig, _) = handle(&s, file);
    s.handles.remove(&(file as usize));
    drop(s);
    // SAFETY: the original method on its own file, once.
    unsafe { (orig.xClose.expect("xClose"))(file) }
}
