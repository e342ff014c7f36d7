//! The conformance suite on the SQLite store (a temporary file per case, so
//! the WAL and fsync paths really run).

relay_storetest::conformance!(relay_storetest::SqliteFile::fresh);
