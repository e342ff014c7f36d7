//! Marks (values kept under a key until they expire) and the idempotency
//! keys built on them (issue 24, item 4): a submit retried after an answer
//! its caller never got must not make a second job, whatever happened to
//! the first one since.

use crate::{open_clocked, NewDb};
use relay::{Error, JobFilter, JobId, LeaseRequest, NewJob};
use std::sync::Barrier;
use std::time::Duration;

fn job(payload: &[u8]) -> NewJob {
    NewJob::new("q", "k", payload.to_vec())
}

fn count(relay: &relay::Relay) -> usize {
    relay
        .list(&JobFilter {
            limit: 1000,
            ..JobFilter::default()
        })
        .unwrap()
        .len()
}

/// A submit repeated with its idempotency key returns the first job, even
/// after that job finished (where a unique key would be free again); the
/// key lasts `Options::idempotency_keep`, then is a new submit's.
pub fn an_idempotency_key_returns_the_first_job_for_its_keep(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let first = relay.submit_outcome(job(b"1").idempotency_key("pay-7")).unwrap();
    assert!(!first.existing);
    let again = relay.submit_outcome(job(b"2").idempotency_key("pay-7")).unwrap();
    assert_eq!((again.id, again.existing), (first.id, true));
    // Finished: still the same job.
    let l = relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap();
    assert_eq!(l.len(), 1);
    relay.ack(l[0].id, l[0].token, None).unwrap();
    let after = relay.submit_outcome(job(b"3").idempotency_key("pay-7")).unwrap();
    assert_eq!((after.id, after.existing), (first.id, true));
    assert_eq!(relay.get(first.id).unwrap().payload, b"1");
    // In one batch, beside a new key: each key one job.
    let batch = relay
        .submit_batch(vec![
            job(b"4").idempotency_key("pay-8"),
            job(b"5").idempotency_key("pay-8"),
            job(b"6").idempotency_key("pay-7"),
        ])
        .unwrap();
    assert_eq!(batch[0], batch[1]);
    assert_eq!(batch[2], first.id);
    assert_eq!(count(&relay), 2);
    // Past its keep, the key makes a new job.
    clock.advance(relay::Options::default().idempotency_keep + Duration::from_secs(1));
    let later = relay.submit_outcome(job(b"7").idempotency_key("pay-7")).unwrap();
    assert!(!later.existing);
    assert!(later.id > batch[0]);
    assert_eq!(count(&relay), 3);
}

/// A key that is empty or too long is refused and changes nothing; a
/// refused submit leaves its key free.
pub fn a_bad_idempotency_key_is_refused_and_changes_nothing(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    for bad in [String::new(), "k".repeat(257)] {
        match relay.submit(job(b"1").idempotency_key(bad)) {
            Err(Error::InvalidInput(e)) => assert_eq!(e.field, "idempotency_key"),
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }
    // Refused for another field: the key is not taken.
    assert!(relay
        .submit(NewJob::new("", "k", Vec::new()).idempotency_key("x"))
        .is_err());
    assert_eq!(count(&relay), 0);
    let s = relay.submit_outcome(job(b"1").idempotency_key("x")).unwrap();
    assert!(!s.existing);
}

/// Two Relays on one database (two writers, as two processes have), eight
/// threads each, submit one idempotency key at once: one job, and every
/// caller gets it.
pub fn concurrent_submits_of_one_idempotency_key_get_one_job(new_db: &NewDb) {
    let db = new_db();
    let relays = [
        db.open(relay::Options::default()).unwrap(),
        db.open(relay::Options::default()).unwrap(),
    ];
    for round in 0..10 {
        let key = format!("charge-{round}");
        let barrier = Barrier::new(16);
        let ids: Vec<JobId> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..16)
                .map(|t| {
                    let (relay, barrier, key) = (&relays[t % 2], &barrier, &key);
                    s.spawn(move || {
                        barrier.wait();
                        relay.submit(job(&[1]).idempotency_key(key))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap()
                        .unwrap_or_else(|e| panic!("round {round}: a submit of a shared key failed: {e}"))
                })
                .collect()
        });
        assert!(
            ids.iter().all(|id| *id == ids[0]),
            "round {round}: one key, many jobs: {ids:?}"
        );
    }
    assert_eq!(count(&relays[0]), 10);
}

/// A mark is written once, read by another Relay on the store, and gone
/// when it expires (then it may be written again).
pub fn marks_are_written_once_and_expire(new_db: &NewDb) {
    let (relay, clock, db) = open_clocked(new_db);
    assert_eq!(relay.mark("session-ended:n1").unwrap(), None);
    assert!(relay
        .put_mark("session-ended:n1", "v1", Duration::from_secs(60))
        .unwrap());
    assert!(!relay
        .put_mark("session-ended:n1", "v2", Duration::from_secs(60))
        .unwrap());
    assert_eq!(relay.mark("session-ended:n1").unwrap().as_deref(), Some("v1"));
    let (options, _) = crate::clocked();
    let other = db
        .open(relay::Options {
            clock: clock.clone(),
            ..options
        })
        .unwrap();
    assert_eq!(other.mark("session-ended:n1").unwrap().as_deref(), Some("v1"));
    clock.advance(Duration::from_secs(61));
    assert_eq!(relay.mark("session-ended:n1").unwrap(), None);
    assert!(relay
        .put_mark("session-ended:n1", "v3", Duration::from_secs(60))
        .unwrap());
    assert_eq!(other.mark("session-ended:n1").unwrap().as_deref(), Some("v3"));
    assert!(matches!(
        relay.put_mark("", "v", Duration::from_secs(1)),
        Err(Error::InvalidInput(_))
    ));
}
