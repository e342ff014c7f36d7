//! The conformance suite on PostgreSQL with `SKIP LOCKED` turned off
//! (`PgBackend::skip_locked(false)`): candidates are locked with a plain
//! `FOR UPDATE`, waited for and checked again. Relay's correctness rests on
//! the state and token every write is guarded by, not on `SKIP LOCKED`,
//! which only keeps processes from waiting on each other (issue "PostgreSQL
//! beyond one machine": engines such as some PostgreSQL-compatible ones may
//! not have it).

relay_storetest::conformance!(relay_storetest::PgDb::fresh_without_skip_locked);
