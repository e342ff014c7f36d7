//! Queue limits across real processes (issue "Scheduling", acceptance 2):
//! three worker processes of eight handlers each share one store; the
//! store's own rows are read continuously by another connection (an
//! operator's `sqlite3`/`psql`), and its event log is the record of when
//! each lease was taken. On SQLite and on PostgreSQL.

use relay::{NewJob, Options, QueueLimits, RateLimit, Relay};
use relay_storetest::pg::PgServer;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = env!("CARGO_BIN_EXE_relay-testchild");

/// How an outside connection reads the store.
enum Peek {
    Sqlite(rusqlite::Connection),
    Pg(postgres::Client),
}

impl Peek {
    fn open(db: &str) -> Self {
        match relay::StoreUrl::parse(db) {
            relay::StoreUrl::Postgres(url) => Peek::Pg(postgres::Client::connect(url, postgres::NoTls).unwrap()),
            relay::StoreUrl::File(path) => Peek::Sqlite(rusqlite::Connection::open(path).unwrap()),
        }
    }

    /// One number from a query in both dialects (table names differ).
    fn count(&mut self, where_: &str) -> i64 {
        match self {
            Peek::Sqlite(c) => c
                .query_row(&format!("SELECT count(*) FROM jobs WHERE {where_}"), [], |r| r.get(0))
                .unwrap(),
            Peek::Pg(c) => c
                .query_one(&format!("SELECT count(*) FROM relay_jobs WHERE {where_}"), &[])
                .unwrap()
                .get(0),
        }
    }

    /// When each lease was taken (ms), in order.
    fn lease_times(&mut self) -> Vec<i64> {
        let sql = |t: &str| format!("SELECT at FROM {t} WHERE kind = 'leased' ORDER BY at");
        match self {
            Peek::Sqlite(c) => {
                let mut st = c.prepare(&sql("job_events")).unwrap();
                st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
            }
            Peek::Pg(c) => c
                .query(&sql("relay_job_events"), &[])
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect(),
        }
    }
}

/// Worker processes, killed when dropped (also when an assertion fails:
/// none is left running after the test).
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Three worker processes (the worker runtime on queue `q`, eight
/// handlers each, every handler sleeping `sleep_ms`), their output drained.
fn workers(db: &str, sleep_ms: u64) -> Workers {
    let children = (0..3)
        .map(|_| {
            let mut child = Command::new(CHILD)
                .args(["runtime", db, "8", &sleep_ms.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap();
            let out = BufReader::new(child.stdout.take().unwrap());
            std::thread::spawn(move || out.lines().map_while(Result::ok).for_each(drop));
            child
        })
        .collect();
    Workers(children)
}

fn submit(relay: &Relay, n: usize) {
    let jobs = (0..n).map(|_| NewJob::new("q", "k", Vec::new())).collect();
    relay.submit_batch(jobs).unwrap();
}

fn max_leased_is_never_exceeded(db: &str) {
    let relay = Relay::connect(db, Options::default()).unwrap();
    let limits = QueueLimits {
        max_leased: Some(5),
        rate: None,
        poison_after: None,
    };
    relay.set_queue_limits("q", limits).unwrap();
    submit(&relay, 400);
    let mut peek = Peek::open(db);
    let children = workers(db, 15);
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut samples, mut most) = (0u64, 0i64);
    loop {
        let leased = peek.count("queue = 'q' AND state = 'LEASED'");
        samples += 1;
        most = most.max(leased);
        assert!(
            leased <= 5,
            "{leased} jobs LEASED at once under max_leased 5 (sample {samples})"
        );
        if peek.count("queue = 'q' AND state = 'SUCCEEDED'") == 400 {
            break;
        }
        assert!(Instant::now() < deadline, "the workers did not finish in 120 s");
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(children);
    assert_eq!(most, 5, "the limit was reached (else the test shows nothing)");
    assert!(samples > 50, "sampled continuously: {samples} samples");
}

fn a_rate_limit_holds_over_ten_seconds(db: &str) {
    let relay = Relay::connect(db, Options::default()).unwrap();
    let limits = QueueLimits {
        max_leased: None,
        rate: Some(RateLimit {
            limit: 50,
            per: Duration::from_secs(1),
        }),
        poison_after: None,
    };
    relay.set_queue_limits("q", limits).unwrap();
    submit(&relay, 1_000);
    let mut peek = Peek::open(db);
    let children = workers(db, 0);
    // Until ten seconds after the first lease have passed in the leases
    // themselves: the window is the limit's, not the processes' start-up.
    let deadline = Instant::now() + Duration::from_secs(90);
    let times = loop {
        let times = peek.lease_times();
        let done = times
            .first()
            .is_some_and(|first| times.iter().any(|t| *t >= first + 10_000));
        if done || times.len() == 1_000 {
            break times;
        }
        assert!(Instant::now() < deadline, "ten seconds of leases not seen in 90 s");
        std::thread::sleep(Duration::from_millis(200));
    };
    drop(children);
    let first = *times.first().expect("no job was leased");
    let in_ten = times.iter().filter(|t| **t < first + 10_000).count();
    // 50 a second for 10 s: at most 500 and 10% (the limit). At least 400:
    // the limit does not hold the workers back much further, with room for
    // three processes on a loaded machine.
    assert!(
        (400..=550).contains(&in_ten),
        "{in_ten} leases in the first 10 s under 50/s ({} in all)",
        times.len()
    );
}

#[test]
fn sqlite_max_leased_is_never_exceeded_by_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    max_leased_is_never_exceeded(dir.path().join("limits.db").to_str().unwrap());
}

#[test]
fn postgres_max_leased_is_never_exceeded_by_three_processes() {
    max_leased_is_never_exceeded(&PgServer::shared().new_database());
}

#[test]
fn sqlite_a_rate_limit_holds_across_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    a_rate_limit_holds_over_ten_seconds(dir.path().join("rate.db").to_str().unwrap());
}

#[test]
fn postgres_a_rate_limit_holds_across_three_processes() {
    a_rate_limit_holds_over_ten_seconds(&PgServer::shared().new_database());
}
