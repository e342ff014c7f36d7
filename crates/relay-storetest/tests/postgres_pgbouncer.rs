//! The conformance suite, unchanged, on PostgreSQL through PgBouncer in
//! transaction mode (`pool_mode = transaction`), which the test setup
//! starts itself in front of the test server: each transaction may run on
//! another server session, so Relay keeps nothing in one
//! (`Pooler::Transaction`). `LISTEN` goes over a direct connection.

relay_storetest::conformance!(relay_storetest::PgDb::fresh_through_pgbouncer);
