//! What the multi-process tests share: an outside connection to the store
//! (an operator's `sqlite3`/`psql`) and worker processes killed on drop.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

const CHILD: &str = env!("CARGO_BIN_EXE_relay-testchild");

/// How an outside connection reads the store.
pub enum Peek {
    Sqlite(rusqlite::Connection),
    Pg(postgres::Client),
}

impl Peek {
    pub fn open(db: &str) -> Self {
        match relay::StoreUrl::parse(db) {
            relay::StoreUrl::Postgres(url) => Peek::Pg(postgres::Client::connect(url, postgres::NoTls).unwrap()),
            relay::StoreUrl::File(path) => Peek::Sqlite(rusqlite::Connection::open(path).unwrap()),
        }
    }

    /// Rows of (text, number) from a query written for either store
    /// (`{jobs}` and `{events}` name the tables).
    pub fn pairs(&mut self, sql: &str) -> Vec<(String, i64)> {
        let (jobs, events) = match self {
            Peek::Sqlite(_) => ("jobs", "job_events"),
            Peek::Pg(_) => ("relay_jobs", "relay_job_events"),
        };
        let sql = sql.replace("{jobs}", jobs).replace("{events}", events);
        match self {
            Peek::Sqlite(c) => {
                let mut st = c.prepare(&sql).unwrap();
                st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect()
            }
            Peek::Pg(c) => c
                .query(&sql, &[])
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect(),
        }
    }

    /// How many jobs match `where_`.
    pub fn count(&mut self, where_: &str) -> i64 {
        self.pairs(&format!("SELECT 'n', count(*) FROM {{jobs}} WHERE {where_}"))[0].1
    }

    /// When each lease was taken (ms), in order.
    pub fn lease_times(&mut self) -> Vec<i64> {
        self.event_times("'leased'").into_iter().map(|(at, _)| at).collect()
    }

    /// When each event of the `kinds` (an SQL list) was recorded (ms),
    /// with its kind, in order of time.
    pub fn event_times(&mut self, kinds: &str) -> Vec<(i64, String)> {
        self.pairs(&format!(
            "SELECT kind, at FROM {{events}} WHERE kind IN ({kinds}) ORDER BY at"
        ))
        .into_iter()
        .map(|(kind, at)| (at, kind))
        .collect()
    }
}

/// Worker processes, killed when dropped (also when an assertion fails:
/// none is left running after the test).
pub struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `n` worker processes (the worker runtime on queue `q`, `handlers`
/// each, every handler sleeping `sleep_ms`, leases of `lease_ms`), their
/// output drained.
pub fn workers(db: &str, n: usize, handlers: usize, sleep_ms: u64, lease_ms: u64) -> Workers {
    let children = (0..n)
        .map(|_| {
            let mut child = Command::new(CHILD)
                .args([
                    "runtime",
                    db,
                    &handlers.to_string(),
                    &sleep_ms.to_string(),
                    &lease_ms.to_string(),
                ])
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
