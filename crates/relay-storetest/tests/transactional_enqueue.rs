//! Transactional enqueue across real processes (issue "Relay from any
//! language", item 4): a child process inserts an order and submits its job
//! inside one transaction of its own connection, in a loop, and is killed
//! with SIGKILL, once at a random moment and once between its insert and
//! its commit. Afterwards every order has exactly one job and every job
//! its order (no orphan, no loss), every order the child saw committed is
//! there, and the held one is not. A Relay in this process that never
//! polls (`poll_interval` of an hour) leases every job: it is woken by the
//! commits of the other process (SQLite: the writer's `data_version`
//! watch; PostgreSQL: the NOTIFY of `relay_submit`).

use relay::{JobFilter, LeaseRequest, NewJob, Options, Relay, StoreUrl};
use relay_storetest::pg::PgServer;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Lines};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CHILD: &str = env!("CARGO_BIN_EXE_relay-testchild");

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(db: &str, hold_after: u64) -> (Killed, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(CHILD)
        .args(["enqueue", db, &hold_after.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap()).lines();
    (Killed(child), out)
}

fn order_of(payload: &[u8]) -> u64 {
    let v: serde_json::Value = serde_json::from_slice(payload).unwrap();
    v["order"].as_u64().unwrap()
}

fn orders(db: &str) -> BTreeSet<u64> {
    match StoreUrl::parse(db) {
        StoreUrl::Postgres(url) => {
            let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
            c.query("SELECT id FROM orders", &[])
                .unwrap()
                .iter()
                .map(|r| u64::try_from(r.get::<_, i64>(0)).unwrap())
                .collect()
        }
        StoreUrl::File(path) => {
            let c = rusqlite::Connection::open(path).unwrap();
            let mut st = c.prepare("SELECT id FROM orders").unwrap();
            st.query_map([], |r| r.get::<_, i64>(0))
                .unwrap()
                .map(|r| u64::try_from(r.unwrap()).unwrap())
                .collect()
        }
    }
}

fn transactional_enqueue_survives_kill_9(db: &str) {
    let options = Options {
        poll_interval: Duration::from_secs(3600), // only a wake-up can end a wait
        ..Options::default()
    };
    let relay = Relay::connect(db, options).unwrap();
    // The lessee: leases and acks every job of queue `orders` as it comes,
    // each wait a minute long, until a job of kind "stop".
    let leased = Arc::new(Mutex::new(Vec::<u64>::new()));
    let lessee = {
        let (relay, leased) = (relay.clone(), Arc::clone(&leased));
        std::thread::spawn(move || loop {
            let req = LeaseRequest::new(["orders"]).max(16).wait(Duration::from_secs(60));
            for job in relay.lease(req).unwrap() {
                relay.ack(job.id, job.token, None).unwrap();
                if job.kind == "stop" {
                    return;
                }
                leased.lock().unwrap().push(order_of(&job.payload));
            }
        })
    };

    let mut committed = BTreeSet::new();
    // 1. Killed at a random moment of its loop, after 40 commits.
    let (child, mut lines) = spawn(db, 0);
    while committed.len() < 40 {
        let line = lines.next().expect("the child ended early").unwrap();
        if let Some(rest) = line.strip_prefix("COMMITTED ") {
            committed.insert(rest.split(' ').next().unwrap().parse::<u64>().unwrap());
        }
    }
    std::thread::sleep(Duration::from_millis(fastrand::u64(0..20)));
    drop(child); // SIGKILL
                 // Lines printed before the kill still count.
    for line in lines.map_while(Result::ok) {
        if let Some(rest) = line.strip_prefix("COMMITTED ") {
            committed.insert(rest.split(' ').next().unwrap().parse::<u64>().unwrap());
        }
    }

    // 2. Killed between its insert (with its job) and its commit.
    let (child, lines) = spawn(db, 5);
    let mut held = None;
    let mut inserted = 0;
    for line in lines {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("COMMITTED ") {
            committed.insert(rest.split(' ').next().unwrap().parse::<u64>().unwrap());
        }
        if let Some(n) = line.strip_prefix("INSERTED ") {
            inserted += 1;
            if inserted == 6 {
                // The child holds this one open: it committed five.
                held = Some(n.parse::<u64>().unwrap());
                break;
            }
        }
    }
    let held = held.expect("the child never held a transaction open");
    std::thread::sleep(Duration::from_millis(100)); // it is asleep inside the transaction
    drop(child);

    // Every job is leased without a poll: woken by the other process.
    let deadline = Instant::now() + Duration::from_secs(20);
    let jobs = relay
        .list(&JobFilter {
            queue: Some("orders".into()),
            limit: 10_000,
            ..JobFilter::default()
        })
        .unwrap();
    let job_orders: Vec<u64> = jobs.iter().map(|j| order_of(&j.payload)).collect();
    while leased.lock().unwrap().len() < job_orders.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let woken_for = leased.lock().unwrap().len();
    relay.submit(NewJob::new("orders", "stop", Vec::new())).unwrap();
    lessee.join().unwrap();
    assert_eq!(
        woken_for,
        job_orders.len(),
        "the lessee was not woken for every job another process committed"
    );

    let orders = orders(db);
    let job_set: BTreeSet<u64> = job_orders.iter().copied().collect();
    assert_eq!(job_set.len(), job_orders.len(), "an order has two jobs");
    assert_eq!(orders, job_set, "orders and jobs differ: an orphan job or a lost one");
    assert!(committed.is_subset(&orders), "a commit the child saw is lost");
    assert!(!orders.contains(&held), "the order held open at the kill was committed");
    let mut leased = leased.lock().unwrap().clone();
    leased.sort_unstable();
    assert_eq!(
        leased,
        job_set.into_iter().collect::<Vec<_>>(),
        "the lessee was not woken for every job another process committed"
    );
}

#[test]
fn transactional_enqueue_survives_kill_9_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("orders.db");
    transactional_enqueue_survives_kill_9(db.to_str().unwrap());
}

#[test]
fn transactional_enqueue_survives_kill_9_on_postgres() {
    let url = PgServer::shared().new_database();
    transactional_enqueue_survives_kill_9(&url);
}
