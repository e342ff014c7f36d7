//! What the tests of other programs on the database file share: who holds
//! SQLite's locks on it, and the programs that visit it.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The process holding a read lock on SQLite's SHARED byte range of `path`
/// (asked with `fcntl(F_GETLK)`), if any. In WAL mode every process with a
/// connection open holds it for the connection's life. The caller must
/// hold no SQLite connection to `path` itself: its own locks are invisible
/// to it, and closing the descriptor opened here would drop them.
pub fn shared_lock_holder(path: &Path) -> Option<i32> {
    let file = std::fs::File::open(path).unwrap();
    // SAFETY: flock is plain data; all-zero is a valid value.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = libc::F_WRLCK as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = 0x4000_0002; // SQLite's SHARED_FIRST (PENDING_BYTE + 2)
    fl.l_len = 510; // SHARED_SIZE
                    // SAFETY: a valid descriptor and a valid, exclusively borrowed flock.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut fl) };
    assert_eq!(rc, 0, "F_GETLK: {}", std::io::Error::last_os_error());
    (i32::from(fl.l_type) != libc::F_UNLCK).then_some(fl.l_pid)
}

/// SQLite's own check of the whole file: it must answer "ok".
pub fn assert_sound(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok", "{} is damaged", path.display());
}

/// The WAL of a database file.
pub fn wal(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", path.display()))
}

/// A python3 program that opens the file, counts its jobs and closes it.
pub const PYTHON_READER: &str = "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\nprint(c.execute('select count(*) from jobs').fetchone()[0])\nc.close()\n";

/// `sqlite3 PATH ".backup COPY"` (the backup ARCHITECTURE.md gives), then
/// checks the copy: it is sound and holds `at_least` jobs.
pub fn sqlite3_backup(path: &Path, copy: &Path, at_least: i64) {
    let out = Command::new("sqlite3")
        .arg(path)
        .arg(format!(".backup '{}'", copy.display()))
        .output()
        .expect("the sqlite3 CLI is needed: scripts/test installs Debian's sqlite3 package");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_sound(copy);
    let conn = rusqlite::Connection::open(copy).unwrap();
    let n: i64 = conn.query_row("SELECT count(*) FROM jobs", [], |r| r.get(0)).unwrap();
    assert!(n >= at_least, "the backup holds {n} jobs, expected at least {at_least}");
}

/// python3's sqlite3: connect, SELECT, close.
pub fn python_reader(path: &Path) {
    let out = Command::new("python3")
        .args(["-c", PYTHON_READER])
        .arg(path)
        .output()
        .expect("python3 is needed");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// rusqlite in the calling process: open, SELECT, close.
pub fn rusqlite_reader(path: &Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let _: i64 = conn.query_row("SELECT count(*) FROM jobs", [], |r| r.get(0)).unwrap();
}
