//! Relay's scale-out store: PostgreSQL. Many Relay processes on many
//! machines share one database; each keeps its own writer thread and group
//! commit (one transaction per batch).
//!
//! - Claims take the oldest due job of each class with `FOR UPDATE SKIP
//!   LOCKED` (`sql/job_ready.sql`), so processes never wait on each
//!   other's candidates (`PgBackend::skip_locked(false)` waits instead:
//!   correctness rests on the guarded writes, not on it); transitions lock
//!   their job row (`FOR UPDATE`).
//! - Expired leases are reclaimed by whichever process gets there first,
//!   exactly once (the guarded write; `SKIP LOCKED` keeps the others from
//!   waiting for it).
//! - No savepoints: the engine isolates operations by the store's change
//!   counter, so PostgreSQL's subtransaction-cache cliff never applies.
//! - Schema in `migrations/`, version in `relay_schema`, migrated under an
//!   advisory lock; a newer schema is refused.
//!
//! Durability is the server's: `synchronous_commit = on` and `fsync = on`
//! (its defaults) make each commit durable before Relay answers. The writer
//! reads both back when it connects: it refuses a server with `fsync` off,
//! and turns `synchronous_commit` back on for its own session. A writer
//! whose connection dropped reconnects at its next batch (the batch that
//! met the drop was answered "maybe applied", or "nothing applied").

mod connect;
mod decode;
mod pipe;
mod reader;
mod stmt;
mod store;
mod within;
mod write;

pub use connect::{has_schema, SCHEMA_VERSION};
use postgres::fallible_iterator::FallibleIterator;
use reader::{Conn, PgReader};
use relay_store::{Backend, StoreError, StoreReader, WatchGuard, WriterStore};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
pub use stmt::Pooler;
use store::PgStore;
pub use within::{emit_in, emit_in_blocking, submit_in, submit_in_blocking, SubmitArgs, WithinError};
/// The drivers [`submit_in`] and [`submit_in_blocking`] take connections of.
pub use {postgres, tokio_postgres};

/// Opens connections to one PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgBackend {
    url: String,
    writers: Option<usize>,
    skip_locked: Option<bool>,
    pooler: Option<Pooler>,
    listen_url: Option<String>,
    /// Job ids drawn and not yet handed out, shared by the writers.
    ids: Arc<std::sync::Mutex<Vec<relay_core::JobId>>>,
}

impl PgBackend {
    /// `postgres://user[:password]@host[:port]/database`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            writers: None,
            skip_locked: None,
            pooler: None,
            listen_url: None,
            ids: Arc::default(),
        }
    }

    /// With `false`, claims, the reap and the scheduler lock their
    /// candidates with a plain `FOR UPDATE` instead of `FOR UPDATE SKIP
    /// LOCKED`: a candidate another process holds is waited for and checked
    /// again (READ COMMITTED re-reads its state) rather than passed over.
    /// Slower under contention, equally correct: every write is guarded by
    /// the state and token the batch read. For PostgreSQL-compatible
    /// engines without `SKIP LOCKED`, and to test that correctness never
    /// rests on it. Also `RELAY_PG_SKIP_LOCKED=off`.
    pub fn skip_locked(mut self, on: bool) -> Self {
        self.skip_locked = Some(on);
        self
    }

    /// Whether candidates are locked with `SKIP LOCKED` (see
    /// [`PgBackend::skip_locked`]; on unless turned off).
    fn skips_locked(&self) -> bool {
        self.skip_locked.unwrap_or_else(|| {
            let Ok(v) = std::env::var("RELAY_PG_SKIP_LOCKED") else {
                return true;
            };
            match v.trim().to_ascii_lowercase().as_str() {
                "off" | "0" | "false" | "no" => false,
                "on" | "1" | "true" | "yes" | "" => true,
                other => {
                    tracing::warn!(value = %other, "RELAY_PG_SKIP_LOCKED is neither on nor off; SKIP LOCKED stays on");
                    true
                }
            }
        })
    }

    /// Tells Relay that `url` reaches the server through a connection
    /// pooler and in which mode. With [`Pooler::Transaction`] (PgBouncer's
    /// `pool_mode = transaction`) Relay keeps nothing in a server session
    /// between transactions: statements go unnamed (their parameter types
    /// learnt once), the settings the writer relies on are set in each
    /// transaction, and wake-ups come over [`PgBackend::listen_url`] or,
    /// without it, by polling (every `Options::poll_interval`). Also
    /// `RELAY_PG_POOLER=transaction`.
    pub fn pooler(mut self, pooler: Pooler) -> Self {
        self.pooler = Some(pooler);
        self
    }

    /// A direct connection (not through a pooler in transaction mode) for
    /// `LISTEN`: wake-ups when another process commits ready jobs. Used
    /// only with [`Pooler::Transaction`], where a `LISTEN` sent through
    /// the pooler would hear nothing (elsewhere `LISTEN` goes to the
    /// store's own URL). Also `RELAY_PG_LISTEN_URL`.
    pub fn listen_url(mut self, url: impl Into<String>) -> Self {
        self.listen_url = Some(url.into());
        self
    }

    /// The pooler mode: as set, else `RELAY_PG_POOLER`, else none.
    fn pooler_mode(&self) -> Pooler {
        self.pooler.unwrap_or_else(|| {
            let Ok(v) = std::env::var("RELAY_PG_POOLER") else {
                return Pooler::None;
            };
            Pooler::parse(&v).unwrap_or_else(|| {
                tracing::warn!(value = %v, "RELAY_PG_POOLER is neither transaction nor none; taken as none");
                Pooler::None
            })
        })
    }

    /// Where `LISTEN` connects: the store's own URL; behind a pooler in
    /// transaction mode, the listen URL as set, else `RELAY_PG_LISTEN_URL`,
    /// else nowhere (waiters poll).
    fn listen_at(&self) -> Option<String> {
        let given = self.listen_url.clone().or_else(|| {
            std::env::var("RELAY_PG_LISTEN_URL")
                .ok()
                .filter(|v| !v.trim().is_empty())
        });
        match (given, self.pooler_mode()) {
            (Some(url), Pooler::Transaction) => Some(url),
            (None, Pooler::Transaction) => None,
            (Some(_), Pooler::None) => {
                tracing::warn!("a listen URL is only used behind a pooler in transaction mode (RELAY_PG_POOLER=transaction); LISTEN goes to the store's own URL");
                Some(self.url.clone())
            }
            (None, Pooler::None) => Some(self.url.clone()),
        }
    }

    /// Runs `n` writers (1-16) instead of the default (see
    /// [`Backend::writers`]).
    pub fn with_writers(mut self, n: usize) -> Self {
        self.writers = Some(n.clamp(1, 16));
        self
    }

    /// True for URLs this store takes (`postgres://` or `postgresql://`).
    pub fn handles(url: &str) -> bool {
        url.starts_with("postgres://") || url.starts_with("postgresql://")
    }
}

impl Backend for PgBackend {
    fn open_writer(&self) -> Result<Box<WriterStore>, StoreError> {
        let pooler = self.pooler_mode();
        let pipe = store::open_writer(&self.url, pooler)?;
        Ok(Box::new(PgStore::new(
            pipe,
            self.url.clone(),
            Arc::clone(&self.ids),
            self.skips_locked(),
            pooler,
        )))
    }

    fn open_reader(&self) -> Result<Box<dyn StoreReader>, StoreError> {
        let mut client = connect::connect(&self.url)?;
        connect::check_version(&mut client)?;
        Ok(Box::new(PgReader {
            conn: Conn::new(client, self.pooler_mode()),
        }))
    }

    fn describe(&self) -> String {
        connect::redact(&self.url)
    }

    /// The writer's `Pipe` and the blocking `postgres` client of readers and
    /// of the LISTEN thread each run a runtime of their own.
    fn drives_a_runtime(&self) -> bool {
        true
    }

    fn durability(&self) -> String {
        "synchronous_commit on (checked at connect): a change is answered once PostgreSQL has flushed its WAL".into()
    }

    /// Two by default (one connection's server backend is one core, and
    /// its round trips leave it idle between a batch's flights; see
    /// BENCHMARKS.md), or `RELAY_PG_WRITERS` (1-16) for a larger server,
    /// or what [`PgBackend::with_writers`] set.
    fn writers(&self) -> usize {
        if let Some(n) = self.writers {
            return n;
        }
        std::env::var("RELAY_PG_WRITERS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|n| (1..=16).contains(n))
            .unwrap_or(2)
    }

    /// A connection of its own that LISTENs for `relay_ready` and wakes this
    /// process's waiting lessees whenever any process commits ready jobs.
    /// Behind a pooler in transaction mode without a listen URL: none
    /// (waiters poll), since a `LISTEN` through the pooler hears nothing.
    fn watch_ready(&self, wake: Box<dyn Fn() + Send + Sync>) -> Result<Option<WatchGuard>, StoreError> {
        let Some(url) = self.listen_at() else {
            tracing::info!(
                "PostgreSQL through a pooler in transaction mode and no listen URL: waiting lessees poll (set RELAY_PG_LISTEN_URL to a direct connection for wake-ups)"
            );
            return Ok(None);
        };
        let listen = move || -> Result<postgres::Client, StoreError> {
            let mut client = connect::connect(&url)?;
            client
                .batch_execute(include_str!("../sql/listen_ready.sql"))
                .map_err(connect::map_err)?;
            Ok(client)
        };
        let mut client = listen()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("relay-pg-listen".into())
            .spawn(move || loop {
                while !stopping.load(Ordering::Relaxed) {
                    let mut notes = client.notifications();
                    // Wakes on the first notification: a timeout iterator
                    // restarts its timer at each one, so waiting for it to
                    // run dry woke nobody while they kept coming.
                    let first = notes.timeout_iter(Duration::from_millis(500)).next();
                    match first {
                        Ok(Some(_)) => {
                            // Those already here say the same: read without waiting.
                            let mut pending = notes.iter();
                            while let Ok(Some(_)) = pending.next() {}
                            wake();
                        }
                        Ok(None) => {}
                        Err(_) => break,
                    }
                }
                // The connection is gone (a restart, a dead link,
                // pg_terminate_backend): waiters poll meanwhile, and the
                // thread connects again, waiting longer after each failure
                // (a quarter second, doubling, at most 5 s).
                let mut delay = Duration::from_millis(250);
                if !stopping.load(Ordering::Relaxed) {
                    tracing::warn!("the LISTEN connection closed; waiting lessees poll until it is back");
                }
                loop {
                    let until = std::time::Instant::now() + delay;
                    while std::time::Instant::now() < until {
                        if stopping.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    match listen() {
                        Ok(c) => {
                            client = c;
                            tracing::info!("the LISTEN connection is back");
                            // Whatever was committed while it was gone.
                            wake();
                            break;
                        }
                        Err(_) => delay = (delay * 2).min(Duration::from_secs(5)),
                    }
                }
            })
            .map_err(|e| StoreError::Io {
                message: "cannot start the LISTEN thread".into(),
                source: Box::new(e),
            })?;
        // Not joined: the thread sees the flag within half a second and
        // closes its connection; a Relay being dropped need not wait for it.
        drop(thread);
        Ok(Some(WatchGuard::new(move || stop.store(true, Ordering::Relaxed))))
    }
}
