//! The throughput history (the dashboard's chart): each submit, ack,
//! failed attempt and death counted once, under its queue and the minute
//! of its batch; a user's event of the same name, a stale ack and a
//! refused operation count nothing; the history survives a reopen, is
//! summed over every Relay on the store, and is pruned after two days.

use crate::{clocked, NewDb};
use relay::{Clock, Error, LeaseRequest, NewJob, Throughput, Timestamp};
use std::time::Duration;

fn minute(t: Timestamp) -> Timestamp {
    Timestamp::from_millis(t.as_millis().div_euclid(60_000) * 60_000)
}

fn row(minute: Timestamp, queue: &str, counts: [u64; 4]) -> Throughput {
    let [submitted, succeeded, failed, dead] = counts;
    Throughput {
        minute,
        queue: queue.into(),
        submitted,
        succeeded,
        failed,
        dead,
    }
}

pub fn throughput_counts_each_end_per_queue_and_minute(new_db: &NewDb) {
    let db = new_db();
    let (mut options, clock) = clocked();
    options.reap_interval = Duration::from_millis(20);
    let relay = db.open(options.clone()).unwrap();
    let m0 = minute(clock.now());

    // Minute 0: three submits to "a" (two in one call), one to "b".
    relay
        .submit_batch(vec![
            NewJob::new("a", "k", Vec::new()),
            NewJob::new("a", "k", Vec::new()),
        ])
        .unwrap();
    relay.submit(NewJob::new("a", "k", Vec::new())).unwrap();
    relay.submit(NewJob::new("b", "k", Vec::new()).max_attempts(1)).unwrap();
    // Refused submits count nothing.
    assert!(relay.submit(NewJob::new("bad queue!", "k", Vec::new())).is_err());
    let l = relay.lease(LeaseRequest::new(["a"]).max(2)).unwrap();
    // A user's event named like the engine's counts nothing.
    relay.append_event(l[0].id, "failed", &serde_json::json!({})).unwrap();
    relay.ack(l[0].id, l[0].token, None).unwrap();
    relay.ack(l[0].id, l[0].token, None).unwrap(); // repeated: no second count
    relay
        .nack(l[1].id, l[1].token, "boom", Some(Duration::from_secs(3600)))
        .unwrap();

    // Minute 1: "b"'s job dies; one of "a"'s leases expires and is reaped.
    clock.advance(Duration::from_secs(60));
    let m1 = minute(clock.now());
    let b = relay.lease(LeaseRequest::new(["b"])).unwrap();
    relay.nack(b[0].id, b[0].token, "bad input", None).unwrap();
    let a3 = relay
        .lease(LeaseRequest::new(["a"]).lease_for(Duration::from_secs(1)))
        .unwrap();
    clock.advance(Duration::from_secs(2));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while relay.get(a3[0].id).unwrap().status.lease.is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the expired lease was never reaped"
        );
        relay.reap_expired().unwrap();
        std::thread::sleep(Duration::from_millis(10));
    }
    // A stale ack counts nothing.
    assert!(matches!(
        relay.ack(a3[0].id, a3[0].token, None),
        Err(Error::LeaseLost { .. })
    ));

    let want = vec![
        row(m0, "a", [3, 1, 1, 0]),
        row(m0, "b", [1, 0, 0, 0]),
        row(m1, "a", [0, 0, 1, 0]),
        row(m1, "b", [0, 0, 1, 1]),
    ];
    assert_eq!(relay.throughput(m0).unwrap(), want);
    assert_eq!(
        relay.throughput(m1.plus(Duration::from_secs(30))).unwrap(),
        want[2..],
        "from the minute of `since` on"
    );

    // Kept by the store: the same after a reopen.
    drop(relay);
    let relay = db.open(options.clone()).unwrap();
    assert_eq!(relay.throughput(m0).unwrap(), want);

    // A second Relay on the same store adds to the same rows.
    let other = db.open(options).unwrap();
    other.submit(NewJob::new("a", "k", Vec::new())).unwrap();
    let got = relay.throughput(m1).unwrap();
    assert_eq!(got[0], row(m1, "a", [1, 0, 1, 0]), "{got:?}");
    drop(other);

    // Pruned after two days (with the finished jobs' housekeeping, which on
    // PostgreSQL also folds the job counts of connections that ended, as
    // the other Relay's have: the counts stay what they were).
    // Jobs waiting for their time (SCHEDULED, RETRYING) are READY once it
    // has come: counted together.
    let counts = |r: &relay::Relay| -> Vec<(String, Vec<u64>)> {
        r.stats()
            .unwrap()
            .queues
            .into_iter()
            .map(|(q, s)| {
                let pending = s.counts.iter().filter(|(st, _)| st.is_pending()).map(|(_, n)| n).sum();
                let rest = s.counts.iter().filter(|(st, _)| !st.is_pending()).map(|(_, n)| *n);
                (q, std::iter::once(pending).chain(rest).collect())
            })
            .collect()
    };
    let before = counts(&relay);
    clock.advance(Duration::from_secs(3 * 24 * 3600));
    relay.submit(NewJob::new("c", "k", Vec::new())).unwrap();
    let m_late = minute(clock.now());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !relay.throughput(m0).unwrap().iter().all(|r| r.minute == m_late) {
        assert!(std::time::Instant::now() < deadline, "old minutes were never pruned");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(relay.throughput(m0).unwrap(), [row(m_late, "c", [1, 0, 0, 0])]);
    let after = counts(&relay);
    assert_eq!(after[..2], before[..], "the counts of a and b did not move");
    assert_eq!(after[2].0, "c");
}
