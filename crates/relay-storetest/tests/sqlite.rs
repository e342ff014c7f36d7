//! The conformance suite on the SQLite store (a temporary file per case, so
//! the WAL and fsync paths really run).

relay_storetest::conformance!(relay_storetest::SqliteFile::fresh);

/// The model with groups (see `relay_storetest::model`; on PostgreSQL in
/// `postgres_only.rs`, with fewer cases).
#[test]
fn matches_the_model_with_groups() {
    relay_storetest::model::matches_the_model_with_groups(&relay_storetest::SqliteFile::fresh, 400);
}
