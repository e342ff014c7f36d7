//! Connecting, migrating (a version table, one transaction under an
//! advisory lock so that several processes migrate once), and mapping
//! driver errors to what a caller can act on.

use postgres::error::SqlState;
use postgres::{Client, NoTls};
use relay_store::StoreError;
use std::time::Duration;

pub const SCHEMA_VERSION: i64 = 25;
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_init.sql"),
    include_str!("../migrations/0002_expect.sql"),
    include_str!("../migrations/0003_queues.sql"),
    include_str!("../migrations/0004_dependencies.sql"),
    include_str!("../migrations/0005_submit_function.sql"),
    include_str!("../migrations/0006_traceparent.sql"),
    include_str!("../migrations/0007_tags.sql"),
    include_str!("../migrations/0008_dashboard.sql"),
    include_str!("../migrations/0009_counts_without_join.sql"),
    include_str!("../migrations/0010_marks.sql"),
    include_str!("../migrations/0011_queue_order.sql"),
    include_str!("../migrations/0012_poison.sql"),
    include_str!("../migrations/0013_progress.sql"),
    include_str!("../migrations/0014_retention.sql"),
    include_str!("../migrations/0015_workers.sql"),
    include_str!("../migrations/0016_scheduled.sql"),
    include_str!("../migrations/0017_groups.sql"),
    include_str!("../migrations/0018_submit_group.sql"),
    include_str!("../migrations/0019_group_heads.sql"),
    include_str!("../migrations/0020_schedule_groups.sql"),
    include_str!("../migrations/0021_last_seq.sql"),
    include_str!("../migrations/0022_group_leased.sql"),
    include_str!("../migrations/0023_worker_owner.sql"),
    include_str!("../migrations/0024_steps.sql"),
    include_str!("../migrations/0025_emit_function.sql"),
];
/// The schema's functions (`relay_submit`), each in its current definition
/// and only there: run after the migrations whenever `migrate()` applies
/// any, so a new database and an upgraded one end with the same ones. A
/// change to it needs a new migration to reach a database already current.
const FUNCTIONS: &str = include_str!("../migrations/functions.sql");
/// The advisory lock that serializes migrations ("RELY").
const MIGRATION_LOCK: i64 = 0x5245_4C59;

/// How long a request may go unacknowledged by the server's machine before
/// the connection is given up (`TCP_USER_TIMEOUT`), unless the URL says
/// (`?tcp_user_timeout=SECONDS`): a link that went dead (a cable, a
/// switch, a host that vanished) is then found in this time, the calls
/// that met it are answered, and the writer connects again, rather than
/// every call waiting out the kernel's retransmissions (some 15 minutes).
/// A busy server does not trip it: its machine acknowledges the bytes.
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);
/// Keepalive probes after this long idle (see [`config`]).
const KEEPALIVES_IDLE: Duration = Duration::from_secs(30);

/// `url` as the driver's configuration, with Relay's defaults.
pub(crate) fn config(url: &str) -> Result<tokio_postgres::Config, StoreError> {
    let mut config: tokio_postgres::Config = url.parse().map_err(|e: postgres::Error| StoreError::Io {
        message: format!(
            "cannot read the PostgreSQL URL {}: {} (postgres://user[:password]@host[:port]/database[?option=value&...])",
            redact(url),
            with_causes(&e)
        ),
        source: Box::new(e),
    })?;
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
    // An idle connection (the LISTEN one, a reader between reads) sends
    // nothing a dead link could fail: keepalive probes every 30 s make it
    // (the driver's own default is two hours; a URL's keepalives_idle
    // other than that is kept).
    if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
        config.keepalives_idle(KEEPALIVES_IDLE);
    }
    Ok(config)
}

pub(crate) fn connect(url: &str) -> Result<Client, StoreError> {
    let config = config(url)?;
    postgres::Config::from(config)
        .connect(NoTls)
        .map_err(|e| cannot_connect(url, e))
}

/// A connection to `url` failed: the cause, and what to do about it.
pub(crate) fn cannot_connect(url: &str, e: postgres::Error) -> StoreError {
    StoreError::Io {
        message: format!(
            "cannot connect to PostgreSQL at {}: {} ({})",
            redact(url),
            with_causes(&e),
            connect_hint(&e)
        ),
        source: Box::new(e),
    }
}

/// `e` and every error under it ("error connecting to server: Connection
/// refused (os error 111)"): the driver's own message leaves out the cause.
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        cause = c.source();
    }
    text
}

/// What to do about a failed connection, by its cause.
pub(crate) fn connect_hint(e: &postgres::Error) -> &'static str {
    match e.code() {
        Some(c) if *c == SqlState::INVALID_CATALOG_NAME => {
            "the database does not exist: create it (createdb NAME) or name another in the URL"
        }
        Some(c) if *c == SqlState::INVALID_PASSWORD || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => {
            "check the user and password in the URL"
        }
        Some(c) if *c == SqlState::TOO_MANY_CONNECTIONS => {
            "the server has no connection left: raise max_connections or close idle clients"
        }
        Some(_) => "see the server's message above",
        None => {
            "is PostgreSQL running and listening there? Check the host and port, e.g. with pg_isready -h HOST -p PORT"
        }
    }
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
    let version = match stored_version(&mut tx)? {
        Some(v) => relay_store::decode::schema_version(v, SCHEMA_VERSION)?,
        None => {
            tx.execute("INSERT INTO relay_schema (version) VALUES (0)", &[])
                .map_err(map_err)?;
            0
        }
    };
    let from = usize::try_from(version).unwrap_or(0);
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(from) {
        tx.batch_execute(sql).map_err(map_err)?;
        let v = i64::try_from(i + 1).unwrap_or(i64::MAX);
        tx.execute("UPDATE relay_schema SET version = $1", &[&v])
            .map_err(map_err)?;
    }
    if from < MIGRATIONS.len() {
        tx.batch_execute(FUNCTIONS).map_err(map_err)?;
        tx.batch_execute(DROP_STATEMENT_FUNCTIONS).map_err(map_err)?;
    }
    tx.commit().map_err(map_err)
}

/// The functions that wrap statements behind a pooler (`relay_q_*`, see
/// `crate::stmt`) are named by the schema version and the statement's
/// text: those of the versions before are dropped when the schema moves
/// on (a Relay that still calls one learns its statements again).
const DROP_STATEMENT_FUNCTIONS: &str = "DO $$
DECLARE f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.proname LIKE 'relay\\_q\\_%' AND p.pronamespace = current_schema()::regnamespace LOOP
        EXECUTE 'DROP FUNCTION ' || f;
    END LOOP;
END $$";

/// Reads back the server settings promise 1 rests on, for the writer's
/// session: `fsync` must be on (a crash of the server's machine could
/// otherwise lose acknowledged commits, and Relay cannot change it), and
/// `synchronous_commit` must not be `off` (the server would answer COMMIT
/// before its WAL is flushed). A session that starts with it off (a role's,
/// a database's or the URL's `options=-c synchronous_commit=off`) gets it
/// set back to `on` for Relay's own session and read again.
///
/// Returns the `synchronous_commit` Relay's transactions run with: behind
/// a pooler in transaction mode (`pooled`) no session is Relay's own, so
/// each transaction sets it (`SET LOCAL`) to this value.
pub(crate) fn check_durability(session: &mut dyn Session, pooled: bool) -> Result<String, StoreError> {
    let fsync = session.show("fsync")?;
    if fsync != "on" {
        return Err(StoreError::Setting {
            name: "fsync",
            asked: "on (set fsync = on in postgresql.conf and reload)".into(),
            got: fsync,
        });
    }
    let sync = session.show("synchronous_commit")?;
    if sync == "off" && pooled {
        tracing::info!(
            "synchronous_commit is off for this database or role; Relay sets it on in each of its transactions"
        );
        return Ok("on".into());
    }
    if sync == "off" {
        session.exec("SET synchronous_commit = on")?;
        let got = session.show("synchronous_commit")?;
        if got == "off" {
            return Err(StoreError::Setting {
                name: "synchronous_commit",
                asked: "on".into(),
                got,
            });
        }
        tracing::info!("synchronous_commit was off for this session; Relay set it on for its own connection");
        return Ok("on".into());
    }
    // PostgreSQL's own names only: the value goes into a statement.
    Ok(match sync.as_str() {
        "local" | "remote_write" | "remote_apply" => sync,
        _ => "on".into(),
    })
}

/// A connection a setting can be read and changed on.
pub(crate) trait Session {
    fn show(&mut self, name: &'static str) -> Result<String, StoreError>;
    fn exec(&mut self, sql: &str) -> Result<(), StoreError>;
}

impl Session for Client {
    /// By the simple protocol: nothing prepared, so a pooler in
    /// transaction mode cannot lose it between two round trips.
    fn show(&mut self, name: &'static str) -> Result<String, StoreError> {
        let messages = self.simple_query(&format!("SHOW {name}")).map_err(map_err)?;
        messages
            .iter()
            .find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
                _ => None,
            })
            .ok_or_else(|| StoreError::corrupt(None, format!("SHOW {name} returned no row")))
    }

    fn exec(&mut self, sql: &str) -> Result<(), StoreError> {
        self.batch_execute(sql).map_err(map_err)
    }
}

/// Whether the database at `url` holds Relay's schema (its `relay_schema`
/// table), without creating anything.
pub fn has_schema(url: &str) -> Result<bool, StoreError> {
    let mut client = connect(url)?;
    let messages = client
        .simple_query("SELECT to_regclass('relay_schema') IS NOT NULL")
        .map_err(map_err)?;
    let got = messages.iter().find_map(|m| match m {
        postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
        _ => None,
    });
    Ok(got.as_deref() == Some("t"))
}

/// In a transaction of its own: a pooler in transaction mode gives the
/// statement's prepare and its run the same server session only there.
pub(crate) fn check_version(client: &mut Client) -> Result<(), StoreError> {
    let mut tx = client.transaction().map_err(map_err)?;
    let version = stored_version(&mut tx)?;
    tx.commit().map_err(map_err)?;
    relay_store::decode::schema_version(version.unwrap_or(0), SCHEMA_VERSION).map(drop)
}

/// The version in `relay_schema` (`None` before the first migration wrote it).
fn stored_version(client: &mut impl postgres::GenericClient) -> Result<Option<i64>, StoreError> {
    let row = client
        .query_opt("SELECT version FROM relay_schema", &[])
        .map_err(map_err)?;
    row.map(|r| crate::decode::col(&r, 0, "relay_schema.version", None))
        .transpose()
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
        // A unique key another process took since the batch checked it, or
        // a set-based write that changed fewer rows than planned (RLY01,
        // migration 0002): the writer plans the batch again.
        Some(c) if c == SqlState::UNIQUE_VIOLATION || c.code() == "RLY01" => StoreError::Busy,
        // A named statement gone, or taken by another client: its session
        // was handed to someone else in between (a pooler in transaction
        // mode that Relay was not told of).
        Some(c) if c == SqlState::INVALID_SQL_STATEMENT_NAME || c == SqlState::DUPLICATE_PSTATEMENT => StoreError::Io {
            message: format!(
                "{}: is Relay connecting through a pooler in transaction mode (PgBouncer's pool_mode = transaction)? Then set RELAY_PG_POOLER=transaction (PgBackend::pooler), and RELAY_PG_LISTEN_URL to a direct connection for wake-ups",
                with_causes(&e)
            ),
            source: Box::new(e),
        },
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A dead link is given up after 30 s unless the URL says otherwise;
    /// a URL that does not parse is an error that shows the form.
    #[test]
    fn a_dead_link_is_given_up_unless_the_url_says_otherwise() {
        let default = config("postgres://relay@db.example/jobs").unwrap();
        assert_eq!(default.get_tcp_user_timeout(), Some(&Duration::from_secs(30)));
        assert_eq!(default.get_keepalives_idle(), Duration::from_secs(30));
        let given = config("postgres://relay@db.example/jobs?tcp_user_timeout=5").unwrap();
        assert_eq!(given.get_tcp_user_timeout(), Some(&Duration::from_secs(5)));
        let Err(e) = config("postgres://relay:secret@db.example/jobs?no_such_option=1") else {
            panic!("an unknown option was taken");
        };
        let text = e.to_string();
        assert!(
            text.contains("postgres://user[:password]@host") && !text.contains("secret"),
            "{text}"
        );
    }
}
