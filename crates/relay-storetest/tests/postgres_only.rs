//! What only the PostgreSQL store has: LISTEN/NOTIFY wake-ups across Relay
//! processes, and the schema version check.

use relay::{LeaseRequest, NewJob, Options, Relay};
use relay_storetest::{pg::PgServer, PgDb, TestDb};
use std::time::{Duration, Instant};

#[test]
fn a_submit_in_one_relay_wakes_a_lessee_of_another_at_once() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url);
    // With a 60 s poll, only a notification can wake the waiter in time.
    let waiting = db
        .open(Options {
            poll_interval: Duration::from_secs(60),
            ..Options::default()
        })
        .unwrap();
    let other = db.open(Options::default()).unwrap();
    let start = Instant::now();
    let got = std::thread::scope(|s| {
        let w = s.spawn(|| {
            waiting
                .lease(LeaseRequest::new(["q"]).wait(Duration::from_secs(30)))
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        other.submit(NewJob::new("q", "k", Vec::new())).unwrap();
        w.join().unwrap()
    });
    assert_eq!(got.len(), 1);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "woken by NOTIFY, not by polling: {:?}",
        start.elapsed()
    );
}

#[test]
fn a_newer_schema_is_refused() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    drop(db.open(Options::default()).unwrap());
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client.batch_execute("UPDATE relay_schema SET version = 99").unwrap();
    let e = db.open(Options::default()).unwrap_err();
    assert!(e.to_string().contains("schema version 99 is newer"), "{e}");
    let _ = Relay::in_memory();
}
