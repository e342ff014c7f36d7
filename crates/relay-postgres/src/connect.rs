//! Connecting, migrating (a version table, one transaction under an
//! advisory lock so that several processes migrate once), and mapping
//! driver errors to what a caller can act on.

use postgres::error::SqlState;
use postgres::{Client, NoTls};
use relay_store::StoreError;

pub const SCHEMA_VERSION: i64 = 1;
const MIGRATIONS: &[&str] = &[include_str!("../migrations/0001_init.sql")];
/// The advisory lock that serializes migrations ("RELY").
const MIGRATION_LOCK: i64 = 0x5245_4C59;

pub(crate) fn connect(url: &str) -> Result<Client, StoreError> {
    Client::connect(url, NoTls).map_err(|e| StoreError::Io {
        message: format!("cannot connect to PostgreSQL at {}: {e}", redact(url)),
        source: Box::new(e),
    })
}

/// `url` without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{user}@{}", &url[..s + 3], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

pub(crate) fn migrate(client: &mut Client) -> Result<(), StoreError> {
    let mut tx = client.transaction().map_err(map_err)?;
    tx.query_one("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(map_err)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS relay_schema (version BIGINT NOT NULL)")
        .map_err(map_err)?;
    let version: i64 = match tx.query_opt("SELECT version FROM relay_schema", &[]).map_err(map_err)? {
        Some(row) => row.get(0),
        None => {
            tx.execute("INSERT INTO relay_schema (version) VALUES (0)", &[])
                .map_err(map_err)?;
            0
        }
    };
    if version > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    let from = usize::try_from(version).unwrap_or(0);
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(from) {
        tx.batch_execute(sql).map_err(map_err)?;
        let v = i64::try_from(i + 1).unwrap_or(i64::MAX);
        tx.execute("UPDATE relay_schema SET version = $1", &[&v])
            .map_err(map_err)?;
    }
    tx.commit().map_err(map_err)
}

pub(crate) fn check_version(client: &mut Client) -> Result<(), StoreError> {
    let row = client
        .query_opt("SELECT version FROM relay_schema", &[])
        .map_err(map_err)?;
    let version: i64 = row.map_or(0, |r| r.get(0));
    if version > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

pub(crate) fn map_err(e: postgres::Error) -> StoreError {
    let code = e.code().cloned();
    match code {
        Some(c)
            if c == SqlState::T_R_SERIALIZATION_FAILURE
                || c == SqlState::T_R_DEADLOCK_DETECTED
                || c == SqlState::LOCK_NOT_AVAILABLE =>
        {
            StoreError::Busy
        }
        Some(c) if c == SqlState::DISK_FULL => StoreError::Full {
            message: e.to_string(),
            source: Box::new(e),
        },
        _ => StoreError::Io {
            message: e.to_string(),
            source: Box::new(e),
        },
    }
}
