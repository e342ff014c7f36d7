//! The conformance suite, unchanged, on PostgreSQL: a real server that the
//! test setup starts itself (initdb into a temporary directory, a loopback
//! port), one fresh database per case. `RELAY_TEST_PG_URL` points it at an
//! existing server instead.

relay_storetest::conformance!(relay_storetest::PgDb::fresh);
