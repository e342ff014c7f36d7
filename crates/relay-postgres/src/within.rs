//! Transactional enqueue from Rust: a job submitted inside a transaction
//! the caller holds open on a connection of its own (tokio-postgres or
//! the synchronous `postgres` crate). It goes through `relay_submit(...)`
//! (migrations 0005 and 0006), as from any other language: the job and its event are
//! written in the caller's transaction and exist if and only if it
//! commits, and the function's NOTIFY, delivered at that commit, wakes the
//! waiting lessees of every Relay process.

use crate::connect::map_err;
use relay_store::StoreError;
use tokio_postgres::error::SqlState;

const SUBMIT_IN: &str = include_str!("../sql/submit_in.sql");
const EMIT_IN: &str = include_str!("../sql/emit_in.sql");

/// A job for [`submit_in`], already validated by the caller.
#[derive(Debug, Clone, Copy)]
pub struct SubmitArgs<'a> {
    pub queue: &'a str,
    pub kind: &'a str,
    pub payload: &'a [u8],
    pub priority: i32,
    pub delay_ms: i64,
    pub max_attempts: i32,
    pub unique_key: Option<&'a str>,
    pub lease_for_ms: Option<i64>,
    pub timeout_ms: Option<i64>,
    pub traceparent: Option<&'a str>,
    pub group: Option<&'a str>,
}

/// Why [`submit_in`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum WithinError {
    /// `relay_submit` refused an argument (SQLSTATE 22023); its message
    /// names it. The caller's transaction is aborted, as after any error.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SubmitArgs<'_> {
    fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 11] {
        [
            &self.queue,
            &self.kind,
            &self.payload,
            &self.priority,
            &self.delay_ms,
            &self.max_attempts,
            &self.unique_key,
            &self.lease_for_ms,
            &self.timeout_ms,
            &self.traceparent,
            &self.group,
        ]
    }
}

fn map(e: tokio_postgres::Error) -> WithinError {
    match e.code() {
        Some(c) if *c == SqlState::INVALID_PARAMETER_VALUE => {
            let message = e
                .as_db_error()
                .map_or_else(|| e.to_string(), |d| d.message().to_owned());
            WithinError::Refused(message)
        }
        Some(c) if *c == SqlState::UNDEFINED_FUNCTION => WithinError::Store(StoreError::NotADatabase {
            reason: format!(
                "{}: Relay's functions are not in this database as this Relay knows them: open it with this Relay (which migrates it) first",
                e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_owned())
            ),
        }),
        _ => WithinError::Store(map_err(e)),
    }
}

/// Submits a job inside the caller's open transaction (`client` is a
/// `tokio_postgres::Transaction`, or a client inside `BEGIN`); returns its
/// id, or the id of the unfinished job holding its unique key.
///
/// # Errors
///
/// [`WithinError::Refused`] for an argument `relay_submit` refuses, and
/// [`WithinError::Store`] for anything else (a lost connection, a database
/// without Relay's schema).
pub async fn submit_in(client: &impl tokio_postgres::GenericClient, a: &SubmitArgs<'_>) -> Result<i64, WithinError> {
    let row = client.query_one(SUBMIT_IN, &a.params()).await.map_err(map)?;
    row.try_get(0).map_err(map)
}

/// [`submit_in`] on the synchronous `postgres` crate's client or
/// transaction.
///
/// # Errors
///
/// As [`submit_in`].
pub fn submit_in_blocking(client: &mut impl postgres::GenericClient, a: &SubmitArgs<'_>) -> Result<i64, WithinError> {
    let row = client.query_one(SUBMIT_IN, &a.params()).map_err(map)?;
    row.try_get(0).map_err(map)
}

/// Emits event `key` inside the caller's open transaction (`client` as for
/// [`submit_in`]) through `relay_emit(...)`: the event and the wake-ups of
/// the jobs waiting for it exist if and only if the transaction commits.
/// Returns whether this was the key's first emit, and how many jobs it woke.
///
/// # Errors
///
/// As [`submit_in`].
pub async fn emit_in(
    client: &impl tokio_postgres::GenericClient,
    key: &str,
    payload: &[u8],
) -> Result<(bool, u32), WithinError> {
    let row = client.query_one(EMIT_IN, &[&key, &payload]).await.map_err(map)?;
    emitted(&row)
}

/// [`emit_in`] on the synchronous `postgres` crate's client or transaction.
///
/// # Errors
///
/// As [`submit_in`].
pub fn emit_in_blocking(
    client: &mut impl postgres::GenericClient,
    key: &str,
    payload: &[u8],
) -> Result<(bool, u32), WithinError> {
    let row = client.query_one(EMIT_IN, &[&key, &payload]).map_err(map)?;
    emitted(&row)
}

fn emitted(row: &tokio_postgres::Row) -> Result<(bool, u32), WithinError> {
    let first: bool = row.try_get(0).map_err(map)?;
    let woken: i32 = row.try_get(1).map_err(map)?;
    Ok((first, u32::try_from(woken).unwrap_or(0)))
}
