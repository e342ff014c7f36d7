//! A statement as a connection runs it: prepared once and kept by the
//! session (direct connections), or, behind a pooler in transaction mode,
//! sent whole each time as the unnamed statement.
//!
//! A pooler in transaction mode (PgBouncer's `pool_mode = transaction`)
//! hands each transaction whichever server session is free, so nothing a
//! session keeps between transactions is there for the next one: a named
//! statement prepared on one session is missing on the next (`prepared
//! statement "s3" does not exist`), or already taken on it by another
//! client (`... already exists`). Unnamed statements live for one
//! round trip; their parameter types are learnt once, by preparing the
//! statement inside a transaction of its own and closing it before that
//! transaction ends, so no session is left holding it.

use std::sync::Arc;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Statement;

#[derive(Clone)]
pub(crate) enum Stmt {
    Prepared(Statement),
    /// The statement's text and its parameters' types.
    Unnamed(&'static str, Arc<[Type]>),
}

/// `params` paired with their types, as `query_typed` takes them.
pub(crate) fn typed<'a>(
    params: &[&'a (dyn ToSql + Sync)],
    types: &[Type],
) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    params.iter().zip(types).map(|(p, t)| (*p, t.clone())).collect()
}

/// How Relay's sessions reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pooler {
    /// Direct connections, or a pooler in session mode: each Relay
    /// connection keeps one server session (prepared statements and
    /// settings kept for it, `LISTEN` on it).
    #[default]
    None,
    /// A pooler in transaction mode (PgBouncer's `pool_mode =
    /// transaction`): no session state is relied on between transactions.
    /// Statements are sent unnamed, settings are set in each transaction
    /// (`SET LOCAL`), statements outside a transaction run inside one, and
    /// `LISTEN` needs a direct connection of its own (see
    /// `PgBackend::listen_url`), or waiters poll.
    Transaction,
}

impl Pooler {
    /// `RELAY_PG_POOLER`: `transaction`, or `none` / `session` / empty.
    pub(crate) fn parse(v: &str) -> Option<Self> {
        match v.trim().to_ascii_lowercase().as_str() {
            "transaction" => Some(Self::Transaction),
            "none" | "session" | "" | "off" | "direct" => Some(Self::None),
            _ => None,
        }
    }
}
