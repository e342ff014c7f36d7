//! Unique keys under concurrency: one failing operation fails alone.
//!
//! Regression: a `retry` of a finished job whose unique key another
//! unfinished job had taken since hit the store's unique index; the error
//! was mapped to `Storage` and every other caller of the same batch was told
//! "nothing applied". On PostgreSQL two processes submitting one key at once
//! had the same fate.

use crate::NewDb;
use relay::{Error, JobId, JobState, NewJob};
use std::sync::Barrier;

/// A retry into a held key is `Conflict` naming the holder, changes
/// nothing, and the submits racing beside it (often in its batch) commit.
pub fn retry_into_a_held_key_is_a_conflict_that_fails_alone(new_db: &NewDb) {
    let db = new_db();
    let relay = db.open(relay::Options::default()).unwrap();
    for round in 0..5 {
        let key = format!("order-{round}");
        let old = relay
            .submit(NewJob::new("q", "k", Vec::new()).unique_key(&key))
            .unwrap();
        relay.cancel(old).unwrap();
        let holder = relay
            .submit(NewJob::new("q", "k", Vec::new()).unique_key(&key))
            .unwrap();
        assert_ne!(old, holder, "a cancelled job's key is free again");
        let barrier = Barrier::new(9);
        let (retried, submitted) = std::thread::scope(|s| {
            let retry = s.spawn(|| {
                barrier.wait();
                relay.retry(old)
            });
            let others: Vec<_> = (0..8)
                .map(|i| {
                    let (relay, barrier) = (&relay, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        relay.submit(NewJob::new("q", "other", vec![i]))
                    })
                })
                .collect();
            let submitted: Vec<_> = others.into_iter().map(|h| h.join().unwrap()).collect();
            (retry.join().unwrap(), submitted)
        });
        match retried {
            Err(Error::Conflict { id, key: k, holder: h }) => {
                assert_eq!((id, k.as_str(), h), (old, key.as_str(), holder));
            }
            other => panic!("round {round}: expected Conflict, got {other:?}"),
        }
        for s in submitted {
            let id = s.unwrap_or_else(|e| panic!("round {round}: a submit beside the conflict failed: {e}"));
            assert_eq!(relay.get(id).unwrap().state(), JobState::Ready);
        }
        assert_eq!(
            relay.get(old).unwrap().state(),
            JobState::Cancelled,
            "the refused retry changed its job"
        );
        assert_eq!(relay.get(holder).unwrap().state(), JobState::Ready);
        // Once the holder is finished, the retry goes through.
        relay.cancel(holder).unwrap();
        relay.retry(old).unwrap();
        assert_eq!(relay.get(old).unwrap().state(), JobState::Ready);
    }
}

/// Two Relays on one database (two writers, as two processes have),
/// eight threads each, submit the same key at once: every caller gets the
/// same job, none an error.
pub fn concurrent_submits_of_one_key_get_one_job(new_db: &NewDb) {
    let db = new_db();
    let relays = [
        db.open(relay::Options::default()).unwrap(),
        db.open(relay::Options::default()).unwrap(),
    ];
    for round in 0..10 {
        let key = format!("pay-{round}");
        let barrier = Barrier::new(16);
        let ids: Vec<JobId> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..16)
                .map(|t| {
                    let (relay, barrier, key) = (&relays[t % 2], &barrier, &key);
                    s.spawn(move || {
                        barrier.wait();
                        relay.submit(NewJob::new("q", "k", vec![1]).unique_key(key))
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
}

/// `throttle(period)`: at most one job per unique key per period. Within
/// it a submit of the key answers the job even once it has finished (and
/// a batch's submits of it answer one job); after it, the key is free; a
/// job deleted within it leaves the key only unique; no throttle without a
/// unique key, none over 30 days; nothing refused changes anything.
pub fn a_throttled_key_answers_its_job_for_the_period(new_db: &NewDb) {
    use relay::LeaseRequest;
    use std::time::Duration;
    let (relay, clock, _db) = crate::open_clocked(new_db);
    let minute = Duration::from_secs(60);
    let job = |payload: &[u8]| {
        NewJob::new("q", "refresh", payload.to_vec())
            .unique_key("cache")
            .throttle(minute)
    };
    let first = relay.submit_outcome(job(b"1")).unwrap();
    assert!(!first.existing);
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    relay.ack(l.id, l.token, None).unwrap();
    clock.advance(Duration::from_secs(30));
    let again = relay.submit_outcome(job(b"2")).unwrap();
    assert_eq!(
        (again.id, again.existing),
        (first.id, true),
        "finished, still within the minute"
    );
    assert_eq!(relay.get(first.id).unwrap().payload, b"1");
    // A submit without a throttle reads none: the job finished, so the key
    // is free to it.
    let plain = relay
        .submit(NewJob::new("q", "refresh", Vec::new()).unique_key("cache"))
        .unwrap();
    assert!(plain > first.id);
    relay.cancel(plain).unwrap();
    clock.advance(Duration::from_secs(31));
    let next = relay.submit_outcome(job(b"3")).unwrap();
    assert!(!next.existing && next.id > first.id, "a minute later the key is free");
    let batch = relay.submit_batch(vec![job(b"4"), job(b"5")]).unwrap();
    assert_eq!(batch, [next.id, next.id]);
    relay.cancel(next.id).unwrap();
    relay.delete(next.id).unwrap();
    let after_delete = relay.submit_outcome(job(b"6")).unwrap();
    assert!(!after_delete.existing, "a deleted job frees the key");
    assert_eq!(
        relay.submit_outcome(job(b"7")).unwrap().id,
        after_delete.id,
        "and leaves it unique: one unfinished job"
    );
    let before = relay.queue_totals().unwrap().counts;
    for bad in [
        NewJob::new("q", "k", Vec::new()).throttle(minute),
        NewJob::new("q", "k", Vec::new())
            .unique_key("u")
            .throttle(Duration::ZERO),
        NewJob::new("q", "k", Vec::new())
            .unique_key("u")
            .throttle(relay::MAX_THROTTLE + Duration::from_millis(1)),
    ] {
        assert!(matches!(relay.submit(bad), Err(Error::InvalidInput(_))));
    }
    assert_eq!(
        relay.queue_totals().unwrap().counts,
        before,
        "refused submits change nothing"
    );
}

/// `debounce(window)`: the job runs `window` after the last submit of its
/// unique key. While the key's job has not started, a debounced submit
/// replaces its payload and moves its run time to now + window (a
/// "debounced" event; in one batch too); a job that has started (LEASED,
/// or READY again after a release) is left as it is; a finished one
/// frees the key. No debounce without a unique key, with a throttle or a
/// delay, or outside 1 ms to 30 days; nothing refused changes anything.
pub fn a_debounced_key_replaces_its_job_until_it_starts(new_db: &NewDb) {
    use relay::{Clock, LeaseRequest};
    use std::time::Duration;
    let (relay, clock, _db) = crate::open_clocked(new_db);
    let minute = Duration::from_secs(60);
    let job = |payload: &[u8]| {
        NewJob::new("q", "reindex", payload.to_vec())
            .unique_key("doc-7")
            .debounce(minute)
    };
    let t0 = clock.now();
    let first = relay.submit_outcome(job(b"1")).unwrap();
    assert!(!first.existing);
    assert_eq!(relay.get(first.id).unwrap().status.ready_at, t0.plus(minute));
    clock.advance(Duration::from_secs(30));
    let again = relay.submit_outcome(job(b"2")).unwrap();
    assert_eq!((again.id, again.existing), (first.id, true));
    let got = relay.get(first.id).unwrap();
    assert_eq!(got.payload, b"2", "the payload is the last submit's");
    let pushed = t0.plus(Duration::from_secs(90));
    assert_eq!(got.status.ready_at, pushed, "runs a minute after the last submit");
    let events = relay.events(first.id).unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, "debounced");
    assert_eq!(last.data["ready_at"], pushed.to_rfc3339());
    assert_eq!(last.data["from"], t0.plus(minute).to_rfc3339());
    // Not due a minute after the first submit: pushed back.
    clock.advance(Duration::from_secs(31));
    assert!(relay.lease(LeaseRequest::new(["q"])).unwrap().is_empty());
    clock.advance(Duration::from_secs(30));
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!((l.id, l.payload.as_slice()), (first.id, b"2".as_slice()));
    // Started: left as it is, whether running or given back.
    let running = relay.submit_outcome(job(b"3")).unwrap();
    assert_eq!((running.id, running.existing), (first.id, true));
    relay.release(l.id, l.token).unwrap();
    let released = relay.submit_outcome(job(b"4")).unwrap();
    assert_eq!(released.id, first.id);
    let got = relay.get(first.id).unwrap();
    assert_eq!(got.payload, b"2", "a started job keeps its payload");
    assert!(got.status.ready_at <= clock.now(), "and its run time");
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    relay.ack(l.id, l.token, None).unwrap();
    // Finished: the key is free; in one batch the later submit wins.
    let batch = relay.submit_batch(vec![job(b"5"), job(b"6")]).unwrap();
    assert!(batch[0] > first.id);
    assert_eq!(batch[0], batch[1]);
    let got = relay.get(batch[0]).unwrap();
    assert_eq!(got.payload, b"6");
    assert_eq!(got.status.ready_at, clock.now().plus(minute));
    // The key's job is another kind's (or queue's): left as it is.
    let other = NewJob::new("q", "notify", b"7".to_vec())
        .unique_key("doc-7")
        .debounce(minute);
    let answered = relay.submit_outcome(other).unwrap();
    assert_eq!((answered.id, answered.existing), (batch[0], true));
    let got = relay.get(batch[0]).unwrap();
    assert_eq!(
        (got.kind.as_str(), got.payload.as_slice()),
        ("reindex", b"6".as_slice())
    );
    let before = relay.queue_totals().unwrap().counts;
    let keyed = || NewJob::new("q", "k", Vec::new()).unique_key("u");
    for bad in [
        NewJob::new("q", "k", Vec::new()).debounce(minute),
        keyed().debounce(Duration::ZERO),
        keyed().debounce(relay::MAX_DEBOUNCE + Duration::from_millis(1)),
        keyed().debounce(minute).throttle(minute),
        keyed().debounce(minute).delay(minute),
        keyed().debounce(minute).run_at(clock.now().plus(minute)),
    ] {
        assert!(matches!(relay.submit(bad), Err(Error::InvalidInput(_))));
    }
    assert_eq!(
        relay.queue_totals().unwrap().counts,
        before,
        "refused submits change nothing"
    );
    assert_eq!(relay.get(batch[0]).unwrap().payload, b"6");
}
