//! A real PostgreSQL for the tests: `initdb` into a temporary directory
//! (as the `postgres` user when run as root: the server refuses root), a
//! server on a free loopback port with `fsync` and `synchronous_commit` on,
//! one fresh database per test, stopped when the test process exits.
//!
//! `RELAY_TEST_PG_URL=postgres://user@host/db` uses an existing server
//! instead (each test then creates its own database on it).

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use postgres::error::SqlState;

pub struct PgServer {
    /// A URL of the server's `postgres` database (for CREATE DATABASE).
    admin_url: String,
    /// Set when this process started the server.
    data_dir: Option<std::path::PathBuf>,
}

static SERVER: OnceLock<PgServer> = OnceLock::new();
static NEXT_DB: AtomicU32 = AtomicU32::new(0);

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Runs a PostgreSQL tool, as `postgres` when we are root.
fn pg_tool(tool: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", tool]);
        c
    } else {
        Command::new(tool)
    };
    cmd.args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {tool} (is PostgreSQL installed?): {e}"))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(55432)
}

extern "C" fn stop_at_exit() {
    if let Some(PgServer {
        data_dir: Some(dir), ..
    }) = SERVER.get()
    {
        let data = dir.join("data");
        let _ = pg_tool(
            "pg_ctl",
            &["-D", data.to_str().unwrap_or_default(), "-m", "immediate", "-w", "stop"],
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}

impl PgServer {
    /// The server shared by every test of this process, started on first use.
    pub fn shared() -> &'static PgServer {
        SERVER.get_or_init(|| match std::env::var("RELAY_TEST_PG_URL") {
            Ok(url) => PgServer {
                admin_url: url,
                data_dir: None,
            },
            Err(_) => Self::start("", true),
        })
    }

    /// A server of the test's own, with extra `-c name=value` settings,
    /// stopped when dropped (for settings the shared server must not have).
    pub fn private(settings: &str) -> PgServer {
        Self::start(settings, false)
    }

    /// The URL of a database on this server.
    pub fn url_of(&self, database: &str) -> String {
        match self.admin_url.rsplit_once('/') {
            Some((base, _)) => format!("{base}/{database}"),
            None => panic!("the admin URL (RELAY_TEST_PG_URL) must end with /DATABASE"),
        }
    }

    fn start(settings: &str, shared: bool) -> PgServer {
        let dir = std::env::temp_dir().join(format!("relay-pg-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).unwrap();
        if is_root() {
            let out = Command::new("chown")
                .args(["postgres:postgres", dir.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(out.status.success(), "chown: {}", String::from_utf8_lossy(&out.stderr));
        }
        let data = dir.join("data");
        let out = pg_tool(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on -c max_connections=300 -c max_wal_size=256MB {settings}",
            dir.display()
        );
        let log = dir.join("server.log");
        let out = pg_tool(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-o",
                &opts,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "start",
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        if shared {
            // SAFETY: registering a plain extern "C" function with atexit.
            unsafe {
                libc::atexit(stop_at_exit);
            }
        }
        PgServer {
            admin_url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            data_dir: Some(dir),
        }
    }

    /// A new, empty database; returns its URL.
    pub fn new_database(&self) -> String {
        let name = format!(
            "relay_test_{}_{}",
            std::process::id(),
            NEXT_DB.fetch_add(1, Ordering::Relaxed)
        );
        let mut client = self.admin();
        if let Err(e) = client.batch_execute(&format!("CREATE DATABASE {name}")) {
            panic!("CREATE DATABASE {name}: {}\n{}", describe(&e), self.log_tail());
        }
        self.url_of(&name)
    }

    /// Drops a database [`PgServer::new_database`] made, once its test is
    /// done with it: a test process makes a hundred of them, and each
    /// holds its files and the WAL that created it (over a gigabyte in all
    /// when they were kept, on machines whose disks can be nearly full).
    pub fn drop_database(&self, url: &str) -> Result<(), String> {
        let Some((_, name)) = url.rsplit_once('/') else {
            return Err(format!("{url} names no database"));
        };
        self.try_admin()?
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .map_err(|e| format!("DROP DATABASE {name}: {}", describe(&e)))
    }

    /// A connection to the `postgres` database; panics with the server's
    /// own words and the end of its log when there is none.
    fn admin(&self) -> postgres::Client {
        self.try_admin().unwrap_or_else(|e| panic!("{e}\n{}", self.log_tail()))
    }

    /// A connection to the `postgres` database. A server that is starting,
    /// recovering or out of connection slots is waited for (a minute at
    /// most).
    fn try_admin(&self) -> Result<postgres::Client, String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match postgres::Client::connect(&self.admin_url, postgres::NoTls) {
                Ok(client) => return Ok(client),
                Err(e) => {
                    let transient = e
                        .code()
                        .is_some_and(|c| *c == SqlState::CANNOT_CONNECT_NOW || *c == SqlState::TOO_MANY_CONNECTIONS);
                    if transient && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(200));
                        continue;
                    }
                    return Err(format!(
                        "cannot reach the test PostgreSQL at {}: {}",
                        self.admin_url,
                        describe(&e)
                    ));
                }
            }
        }
    }

    /// The last lines of the server's log, when this process started it.
    fn log_tail(&self) -> String {
        let Some(dir) = &self.data_dir else {
            return String::new();
        };
        let log = dir.join("server.log");
        match std::fs::read_to_string(&log) {
            Ok(text) => {
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(40)..].join("\n");
                format!("the end of {}:\n{tail}", log.display())
            }
            Err(e) => format!("(cannot read {}: {e})", log.display()),
        }
    }
}

/// An error with its causes: the driver's own text for a server's error
/// is only "db error", its source holds what the server said.
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {} (SQLSTATE {})", db.severity(), db.message(), db.code().code()),
        None => {
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                text.push_str(&format!(": {c}"));
                cause = c.source();
            }
            text
        }
    }
}

/// Private servers stop with their owner (the shared one lives in a static
/// and is stopped at exit instead).
impl Drop for PgServer {
    fn drop(&mut self) {
        if let Some(dir) = self.data_dir.take() {
            let data = dir.join("data");
            let _ = pg_tool(
                "pg_ctl",
                &["-D", data.to_str().unwrap_or_default(), "-m", "immediate", "-w", "stop"],
            );
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A real PgBouncer in transaction mode (`pool_mode = transaction`) in
/// front of the shared test server, started on first use on a free
/// loopback port (as the `postgres` user when run as root: PgBouncer
/// refuses root) and stopped when the test process exits. Debian's
/// `pgbouncer` package (1.18: no protocol-level prepared statements);
/// `scripts/test-deps` installs it.
///
/// A test drops its database while its Relays may still be at work (the
/// database goes first when dropped with them): a client of the pooler
/// then waits for a server session that cannot be made, so waits are cut
/// to 10 s (`query_wait_timeout`; 120 s by default).
pub struct PgBouncer {
    /// `postgres://postgres@127.0.0.1:PORT` (a database name follows).
    base: String,
    dir: std::path::PathBuf,
    /// Stopped when dropped (the shared one is stopped at exit instead).
    owned: bool,
    binary: &'static str,
    port: u16,
}

static BOUNCER: OnceLock<PgBouncer> = OnceLock::new();

extern "C" fn stop_bouncer_at_exit() {
    if let Some(b) = BOUNCER.get() {
        b.stop();
    }
}

impl PgBouncer {
    /// The pooler shared by every test of this process.
    pub fn shared() -> &'static PgBouncer {
        BOUNCER.get_or_init(|| {
            let bouncer = Self::start(PgServer::shared(), 20);
            // SAFETY: registering a plain extern "C" function with atexit.
            unsafe {
                libc::atexit(stop_bouncer_at_exit);
            }
            bouncer
        })
    }

    /// A pooler of the test's own in front of `server`, stopped when
    /// dropped.
    pub fn private(server: &PgServer) -> PgBouncer {
        Self::private_with_sessions(server, 20)
    }

    /// [`PgBouncer::private`], with at most `sessions` server sessions per
    /// database (one: every client's transactions share one session, so
    /// whatever a client leaves in it, the next one finds).
    pub fn private_with_sessions(server: &PgServer, sessions: u32) -> PgBouncer {
        let mut b = Self::start(server, sessions);
        b.owned = true;
        b
    }

    /// The URL of `database` through the pooler.
    pub fn url_of(&self, database: &str) -> String {
        format!("{}/{database}", self.base)
    }

    /// The pooler's log (its errors say why a client was refused).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }

    fn start(server: &PgServer, sessions: u32) -> PgBouncer {
        let binary = ["pgbouncer", "/usr/sbin/pgbouncer"]
            .into_iter()
            .find(|b| {
                Command::new(b)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .unwrap_or_else(|| {
                panic!("PgBouncer is not installed: run scripts/test-deps (Debian's pgbouncer package)")
            });
        // The server's host and port, from its admin URL.
        let hostport = server
            .admin_url
            .rsplit_once('/')
            .and_then(|(base, _)| base.rsplit_once('@').map(|(_, hp)| hp.to_owned()))
            .unwrap_or_else(|| panic!("cannot read a host and port from {}", server.admin_url));
        let (host, pg_port) = hostport.rsplit_once(':').unwrap_or((hostport.as_str(), "5432"));
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("relay-pgbouncer-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("users.txt"), "\"postgres\" \"\"\n").unwrap();
        let config = format!(
            "[databases]\n\
             * = host={host} port={pg_port}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = trust\n\
             auth_file = {dir}/users.txt\n\
             pool_mode = transaction\n\
             max_client_conn = 2000\n\
             default_pool_size = {sessions}\n\
             server_idle_timeout = 10\n\
             query_wait_timeout = 10\n\
             server_login_retry = 1\n\
             ignore_startup_parameters = extra_float_digits\n\
             logfile = {dir}/pgbouncer.log\n\
             pidfile = {dir}/pgbouncer.pid\n",
            dir = dir.display()
        );
        std::fs::write(dir.join("pgbouncer.ini"), config).unwrap();
        if is_root() {
            let out = Command::new("chown")
                .args(["-R", "postgres:postgres", dir.to_str().unwrap()])
                .output()
                .unwrap();
            assert!(out.status.success(), "chown: {}", String::from_utf8_lossy(&out.stderr));
        }
        let bouncer = PgBouncer {
            base: format!("postgres://postgres@127.0.0.1:{port}"),
            dir,
            owned: false,
            binary,
            port,
        };
        bouncer.launch();
        bouncer
    }

    /// Starts the pooler on its configuration and waits until it listens.
    fn launch(&self) {
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", self.binary]);
            c
        } else {
            Command::new(self.binary)
        };
        let ini = self.dir.join("pgbouncer.ini");
        let out = cmd
            .args(["-d", ini.to_str().unwrap()])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.binary));
        assert!(
            out.status.success(),
            "pgbouncer did not start: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "pgbouncer is not listening on 127.0.0.1:{} after 20 s:\n{}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the pooler at once (SIGTERM: every client's connection is
    /// closed), as an operator's restart does, and starts it again on the
    /// same port.
    pub fn restart(&self) {
        let pid = std::fs::read_to_string(self.dir.join("pgbouncer.pid"))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
            .expect("the pooler's pid file");
        // SAFETY: kill with a pid PgBouncer wrote; no memory involved.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        // SAFETY: signal 0 only asks whether the process exists.
        while unsafe { libc::kill(pid, 0) } == 0 {
            assert!(Instant::now() < deadline, "pgbouncer did not stop within 20 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.launch();
    }

    fn stop(&self) {
        if let Ok(pid) = std::fs::read_to_string(self.dir.join("pgbouncer.pid")) {
            if let Ok(pid) = pid.trim().parse::<i32>() {
                // SAFETY: kill with a pid PgBouncer wrote; no memory involved.
                unsafe {
                    libc::kill(pid, libc::SIGTERM);
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        if self.owned {
            self.stop();
        }
    }
}
