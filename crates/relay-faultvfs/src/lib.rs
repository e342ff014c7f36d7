//! Test support: a fault-injecting SQLite VFS over the default `unix` one.
//!
//! [`install`] registers it as the default VFS of the process, so every
//! SQLite connection the process opens (Relay's included) writes through
//! it. It keeps, for the database and WAL files, what has been fsynced and
//! what has not, and can:
//!
//! - fail the Nth write or fsync with the error a full or failing disk
//!   gives ([`Plan`]: `SQLITE_FULL`, `SQLITE_IOERR_WRITE`, `SQLITE_IOERR_FSYNC`);
//! - cut the power ([`power_cut`]): stop every write, put each file back as
//!   it was at its last successful fsync (appends dropped, overwritten
//!   bytes restored), and end the process at once, as a power loss would.
//!
//! How: the shim lets the `unix` VFS open each file, then points the file's
//! method table at a copy whose `xWrite`, `xTruncate`, `xSync` and `xClose`
//! keep the books and call the originals (the file stays the `unix` VFS's
//! own, so every other method, locks and shared memory included, is
//! untouched). Overwritten bytes are read first through the file's own
//! `xRead`: the shim never opens a descriptor of the database, which would
//! drop the process's POSIX locks when closed. The WAL's fsyncs that Relay
//! makes itself (its split commit syncs through a descriptor of its own)
//! come through [`relay_sqlite::set_wal_sync_hook`].
//!
//! One mutex is held across every tracked write and SQLite's own fsyncs, so
//! a power cut is ordered after any write it lets finish. Not for
//! production: it serializes I/O.

#![allow(unsafe_code)]

mod vfs;

pub use vfs::{install, power_cut, Plan, CUT_EXIT_CODE};

/// SQLite's result codes for the failures a [`Plan`] injects.
pub mod codes {
    pub use rusqlite::ffi::{SQLITE_FULL, SQLITE_IOERR_FSYNC, SQLITE_IOERR_WRITE};
}
