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
//!
//! An unnamed statement is planned at every run, and the writer's are
//! large: planning them took as much of the server's time as running them
//! (pg_stat_statements, relay-bench 4x16: 2.9 s planning, 2.7 s running).
//! So the writer's statements that return rows are each wrapped once in a
//! PL/pgSQL function of the schema (`relay_q_` and a hash of the schema
//! version and the text, made by the first Relay that needs it), called by
//! a small unnamed `SELECT * FROM relay_q_...($1, ...)`: PL/pgSQL keeps
//! the statement's plan in each server session, across transactions, so
//! whichever session the pooler hands a transaction plans it once.

use std::sync::Arc;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Statement;

#[derive(Clone)]
pub(crate) enum Stmt {
    Prepared(Statement),
    /// The statement's text (or its function's call) and its parameters'
    /// types.
    Unnamed(Arc<str>, Arc<[Type]>),
}

/// `params` paired with their types, as `query_typed` takes them.
pub(crate) fn typed<'a>(params: &[&'a (dyn ToSql + Sync)], types: &[Type]) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    params.iter().zip(types).map(|(p, t)| (*p, t.clone())).collect()
}

/// A type as SQL names it (`"pg_catalog"."_int8"`).
fn type_sql(t: &Type) -> String {
    format!(
        "\"{}\".\"{}\"",
        t.schema().replace('"', "\"\""),
        t.name().replace('"', "\"\"")
    )
}

/// The function that runs `sql` (see the module's notes): its
/// `CREATE FUNCTION`, for parameters `params` and result columns `columns`.
pub(crate) fn function_sql(name: &str, sql: &str, params: &[Type], columns: &[Type]) -> String {
    let args: Vec<String> = params.iter().map(type_sql).collect();
    let out: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, t)| format!("relay_c{i} {}", type_sql(t)))
        .collect();
    // The text's own trailing `;` (or a comment on its last line) must not
    // end the RETURN QUERY early: the `;` goes on a line of its own.
    let body = sql.trim_end().trim_end_matches(';');
    format!(
        "CREATE FUNCTION {name}({}) RETURNS TABLE({}) LANGUAGE plpgsql AS $relay_q$\n\
         #variable_conflict use_column\n\
         BEGIN\n\
         RETURN QUERY\n{body}\n;\n\
         END\n\
         $relay_q$",
        args.join(", "),
        out.join(", ")
    )
}

/// The call of function `name` with `n` parameters.
pub(crate) fn call_sql(name: &str, n: usize) -> String {
    let args: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
    format!("SELECT * FROM {name}({})", args.join(", "))
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
