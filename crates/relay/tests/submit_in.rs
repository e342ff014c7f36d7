//! Transactional enqueue on SQLite (`Relay::submit_in`): a job submitted
//! inside the caller's own transaction on the Relay's file exists if and
//! only if that transaction commits, with everything `submit` does; bad
//! input is refused with a typed error and leaves the caller's transaction
//! as it was; a lessee waiting in this process is woken by the commit.
//! (Across processes and kill -9: relay-storetest's transactional_enqueue.)

use relay::rusqlite::{Connection, TransactionBehavior};
use relay::{Error, JobId, JobState, LeaseRequest, NewJob, Options, Relay};
use std::time::{Duration, Instant};

fn setup() -> (tempfile::TempDir, std::path::PathBuf, Relay, Connection) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let relay = Relay::open(&path).unwrap();
    let db = Connection::open(&path).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)", [])
        .unwrap();
    (dir, path, relay, db)
}

fn job(n: u32) -> NewJob {
    NewJob::new("emails", "confirm", format!("{{\"order\":{n}}}").into_bytes())
}

fn count(db: &Connection, sql: &str) -> i64 {
    db.query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn the_job_exists_if_and_only_if_the_transaction_commits() {
    let (_dir, _path, relay, mut db) = setup();
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
    tx.execute("INSERT INTO orders (item) VALUES ('tea')", []).unwrap();
    let kept = relay.submit_in(&tx, job(1)).unwrap();
    assert!(!kept.existing);
    tx.commit().unwrap();
    let j = relay.get(kept.id).unwrap();
    assert_eq!(j.state(), JobState::Ready);
    assert_eq!(j.payload, br#"{"order":1}"#);
    let events = relay.events(kept.id).unwrap();
    assert_eq!(events[0].kind, "submitted");

    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
    tx.execute("INSERT INTO orders (item) VALUES ('cake')", []).unwrap();
    let dropped = relay.submit_batch_in(&tx, vec![job(2), job(3)]).unwrap();
    tx.rollback().unwrap();
    for s in &dropped {
        assert!(
            matches!(relay.get(s.id), Err(Error::NotFound { .. })),
            "{s:?} outlived its rollback"
        );
    }
    assert_eq!(count(&db, "SELECT count(*) FROM orders"), 1);
    assert_eq!(count(&db, "SELECT count(*) FROM jobs"), 1);

    // The Relay goes on as before, and numbers past the rolled-back ids.
    let next = relay.submit(job(4)).unwrap();
    assert!(next > kept.id);
    let leased = relay.lease(LeaseRequest::new(["emails"]).max(10)).unwrap();
    assert_eq!(leased.iter().map(|l| l.id).collect::<Vec<_>>(), vec![kept.id, next]);
}

#[test]
fn unique_keys_and_dependencies_work_inside_the_transaction() {
    let (_dir, _path, relay, mut db) = setup();
    let parent = relay.submit(job(1).unique_key("order-1")).unwrap();
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
    let again = relay.submit_in(&tx, job(1).unique_key("order-1")).unwrap();
    assert_eq!((again.id, again.existing), (parent, true));
    let child = relay.submit_in(&tx, job(2).depends_on([parent])).unwrap();
    tx.commit().unwrap();
    assert_eq!(relay.get(child.id).unwrap().state(), JobState::Waiting);
    let l = relay.lease(LeaseRequest::new(["emails"])).unwrap();
    relay.ack(l[0].id, l[0].token, None).unwrap();
    assert_eq!(relay.get(child.id).unwrap().state(), JobState::Ready);
}

#[test]
fn bad_input_is_refused_and_leaves_the_transaction_as_it_was() {
    let (dir, path, relay, mut db) = setup();
    // No transaction open.
    let e = relay.submit_in(&db, job(1)).unwrap_err();
    assert!(matches!(&e, Error::InvalidInput(i) if i.field == "transaction"), "{e}");
    // Another file, and a database in memory.
    let other = Connection::open(dir.path().join("other.db")).unwrap();
    other.execute_batch("BEGIN").unwrap();
    let e = relay.submit_in(&other, job(1)).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidInput(i) if i.field == "transaction" && i.reason.contains("other.db")),
        "{e}"
    );
    let memory = Connection::open_in_memory().unwrap();
    memory.execute_batch("BEGIN").unwrap();
    assert!(matches!(relay.submit_in(&memory, job(1)), Err(Error::InvalidInput(_))));
    // A connection whose commit would not be durable on power loss.
    let loose = Connection::open(&path).unwrap();
    loose.pragma_update(None, "synchronous", "NORMAL").unwrap();
    loose.execute_batch("BEGIN IMMEDIATE").unwrap();
    let e = relay.submit_in(&loose, job(1)).unwrap_err();
    assert!(
        matches!(&e, Error::InvalidInput(i) if i.reason.contains("synchronous")),
        "{e}"
    );
    loose.execute_batch("ROLLBACK").unwrap();

    // A job the engine refuses: the caller's own insert survives, alone.
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
    tx.execute("INSERT INTO orders (item) VALUES ('tea')", []).unwrap();
    let e = relay.submit_in(&tx, job(1).depends_on([JobId(99)])).unwrap_err();
    assert!(matches!(e, Error::DependencyNotFound { id: JobId(99) }), "{e}");
    let e = relay
        .submit_batch_in(&tx, vec![job(2), NewJob::new("emails", "big", vec![b'x'; 2 << 20])])
        .unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)), "{e}");
    tx.commit().unwrap();
    assert_eq!(count(&db, "SELECT count(*) FROM orders"), 1);
    assert_eq!(count(&db, "SELECT count(*) FROM jobs"), 0);
    assert_eq!(count(&db, "SELECT count(*) FROM job_events"), 0);
}

#[test]
fn a_waiting_lessee_is_woken_by_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let options = Options {
        poll_interval: Duration::from_secs(3600), // only a wake-up can end the wait
        ..Options::default()
    };
    let relay = Relay::open_with(&path, options).unwrap();
    let waiter = {
        let relay = relay.clone();
        std::thread::spawn(move || {
            let leased = relay
                .lease(LeaseRequest::new(["emails"]).wait(Duration::from_secs(60)))
                .unwrap();
            (Instant::now(), leased.len())
        })
    };
    std::thread::sleep(Duration::from_millis(300)); // it waits now
    let mut db = Connection::open(&path).unwrap();
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
    relay.submit_in(&tx, job(1)).unwrap();
    tx.commit().unwrap();
    let committed = Instant::now();
    let (woken, n) = waiter.join().unwrap();
    assert_eq!(n, 1);
    // Measured: about one watch interval (10 ms). Generous for a busy machine,
    // and far below the wait it would otherwise sit out.
    assert!(
        woken.duration_since(committed) < Duration::from_secs(10),
        "woken after {:?}",
        woken - committed
    );
}
