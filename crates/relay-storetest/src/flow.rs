//! Flow control: snooze, pause/resume of a queue, and its limits.

use crate::{open_clocked, NewDb};
use relay::{Clock, Error, JobState, LeaseRequest, LeaseToken, NewJob, QueueLimits, RateLimit};
use std::time::Duration;

pub fn snooze_puts_the_job_back_for_later_without_an_attempt(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new()).max_attempts(1)).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    // A stale token snoozes nothing.
    assert!(matches!(
        relay.snooze(id, LeaseToken(l.token.0 - 1), Duration::from_secs(600)),
        Err(Error::LeaseLost { .. })
    ));
    assert_eq!(relay.get(id).unwrap().state(), JobState::Leased);
    let due = relay.snooze(id, l.token, Duration::from_secs(600)).unwrap();
    assert_eq!(due, clock.now().plus(Duration::from_secs(600)));
    let job = relay.get(id).unwrap();
    assert_eq!(
        (job.state(), job.status.attempts, job.status.ready_at, job.status.lease),
        (JobState::Scheduled, 0, due, None)
    );
    let events = relay.events(id).unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, "snoozed");
    assert_eq!(last.data["token"], l.token.0);
    // Its lease is over: neither the old token's ack nor a second snooze counts.
    assert!(matches!(relay.ack(id, l.token, None), Err(Error::LeaseLost { .. })));
    assert!(matches!(
        relay.snooze(id, l.token, Duration::ZERO),
        Err(Error::LeaseLost { .. })
    ));
    // Not before its time.
    clock.advance(Duration::from_secs(599));
    assert!(relay.lease(LeaseRequest::new(["q"])).unwrap().is_empty());
    clock.advance(Duration::from_secs(1));
    let again = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!(
        (again.id, again.attempt, again.token),
        (id, 1, LeaseToken(2)),
        "a snooze counts no attempt (max_attempts 1 still runs); tokens still grow"
    );
    // Snoozed with the batch call too.
    let s = relay
        .complete_batch(vec![relay::Completion::snooze(id, again.token, Duration::from_secs(5))])
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!((s.state, s.attempts), (JobState::Scheduled, 0));
    assert_eq!(s.ready_at, clock.now().plus(Duration::from_secs(5)));
    // A delay past any calendar saturates; the writer and the event log
    // carry on (its event printed the time past year 9999 and panicked).
    clock.advance(Duration::from_secs(5));
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    relay.snooze(id, l.token, Duration::from_secs(u64::MAX / 4)).unwrap();
    assert!(relay.events(id).unwrap().last().unwrap().data["ready_at"]
        .as_str()
        .unwrap()
        .starts_with("9999-12-31"));
    relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
}

pub fn pause_stops_leases_of_the_queue_until_resume(new_db: &NewDb) {
    let (relay, _clock, db) = open_clocked(new_db);
    let held = relay.submit(NewJob::new("q", "k", b"1".to_vec())).unwrap();
    let lease = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!(lease.id, held);
    let waiting = relay.submit(NewJob::new("q", "k", b"2".to_vec())).unwrap();
    let other = relay.submit(NewJob::new("other", "k", b"3".to_vec())).unwrap();
    relay.pause("q").unwrap();
    relay.pause("q").unwrap(); // again: nothing changes
    assert!(relay.lease(LeaseRequest::new(["q"]).max(5)).unwrap().is_empty());
    // A call naming a paused queue and another takes from the other only.
    let got: Vec<_> = relay
        .lease(LeaseRequest::new(["q", "other"]).max(5))
        .unwrap()
        .into_iter()
        .map(|l| l.id)
        .collect();
    assert_eq!(got, [other]);
    // Submits go on; the job already leased runs to its end.
    let submitted = relay.submit(NewJob::new("q", "k", b"4".to_vec())).unwrap();
    relay.ack(held, lease.token, None).unwrap();
    let stats = relay.stats().unwrap();
    assert!(stats.queues["q"].paused);
    assert!(!stats.queues["other"].paused);
    assert_eq!(stats.queues["q"].counts[&JobState::Ready], 2);
    // Stored: a reopened Relay (and so a restarted process) sees it.
    drop(relay);
    let (options, _clock) = crate::clocked();
    let relay = db.open(options).unwrap();
    assert!(relay.stats().unwrap().queues["q"].paused);
    assert!(relay.lease(LeaseRequest::new(["q"])).unwrap().is_empty());
    relay.resume("q").unwrap();
    relay.resume("q").unwrap(); // again: nothing changes
    assert!(!relay.stats().unwrap().queues["q"].paused);
    let mut got: Vec<_> = relay
        .lease(LeaseRequest::new(["q"]).max(5))
        .unwrap()
        .into_iter()
        .map(|l| l.id)
        .collect();
    got.sort();
    assert_eq!(got, [waiting, submitted]);
}

pub fn pause_refuses_a_bad_queue_name_and_shows_an_empty_paused_queue(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    for bad in ["", "no spaces", "a/b", &"x".repeat(65)] {
        assert!(matches!(relay.pause(bad), Err(Error::InvalidInput(_))), "{bad:?}");
        assert!(matches!(relay.resume(bad), Err(Error::InvalidInput(_))));
    }
    assert!(relay.stats().unwrap().queues.is_empty(), "nothing was written");
    relay.pause("quiet").unwrap();
    let stats = relay.stats().unwrap();
    let q = &stats.queues["quiet"];
    assert!(q.paused);
    assert!(q.counts.values().all(|n| *n == 0), "{q:?}");
}

/// A lease that waits on a paused queue gets its job when the queue is
/// resumed, without waiting out its poll interval.
pub fn resume_wakes_a_waiting_lease(new_db: &NewDb) {
    let db = new_db();
    let (mut options, _clock) = crate::clocked();
    options.poll_interval = Duration::from_secs(30);
    let relay = db.open(options).unwrap();
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    relay.pause("q").unwrap();
    let waiter = {
        let relay = relay.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            let got = relay
                .lease(LeaseRequest::new(["q"]).wait(Duration::from_secs(20)))
                .unwrap();
            (got, start.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(!waiter.is_finished(), "a lease on a paused queue returned at once");
    relay.resume("q").unwrap();
    let (got, took) = waiter.join().unwrap();
    assert_eq!(got.iter().map(|l| l.id).collect::<Vec<_>>(), [id]);
    assert!(
        took < Duration::from_secs(10),
        "woken by the resume, not by a poll: {took:?}"
    );
}

/// Two Relays on one store (two processes, as far as the store can tell):
/// a pause by one holds back the other's next claim.
pub fn a_pause_is_seen_by_another_relay_on_the_store(new_db: &NewDb) {
    let db = new_db();
    let (options, _clock) = crate::clocked();
    let a = db.open(options.clone()).unwrap();
    let b = db.open(options).unwrap();
    let id = a.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    a.pause("q").unwrap();
    assert!(b.lease(LeaseRequest::new(["q"])).unwrap().is_empty());
    assert!(b.stats().unwrap().queues["q"].paused);
    a.resume("q").unwrap();
    assert_eq!(b.lease(LeaseRequest::new(["q"])).unwrap().remove(0).id, id);
}

fn max_leased(n: u32) -> QueueLimits {
    QueueLimits {
        max_leased_per_group: None,
        max_leased: Some(n),
        rate: None,
        poison_after: None,
    }
}

pub fn max_leased_caps_the_queue_and_not_the_others(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    relay.set_queue_limits("q", max_leased(2)).unwrap();
    for i in 0..5u8 {
        relay.submit(NewJob::new("q", "k", vec![i])).unwrap();
    }
    for i in 0..2u8 {
        relay.submit(NewJob::new("other", "k", vec![i])).unwrap();
    }
    // One call names both: the limited queue gives 2, the other the rest.
    let got = relay.lease(LeaseRequest::new(["q", "other"]).max(10)).unwrap();
    let from_q: Vec<_> = got.iter().filter(|l| l.queue == "q").collect();
    assert_eq!((from_q.len(), got.len()), (2, 4), "{got:?}");
    assert!(relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap().is_empty());
    // A lease that ends frees its place: ack, nack, release, snooze, cancel.
    relay.ack(from_q[0].id, from_q[0].token, None).unwrap();
    let next = relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap();
    assert_eq!(next.len(), 1);
    relay
        .snooze(next[0].id, next[0].token, Duration::from_secs(3600))
        .unwrap();
    assert_eq!(relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap().len(), 1);
    // An expired lease holds no place: the claim reclaims it first.
    clock.advance(Duration::from_secs(31));
    let after_expiry = relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap();
    assert_eq!(
        after_expiry.len(),
        2,
        "both expired leases were reclaimed and their places taken"
    );
    let stats = relay.stats().unwrap();
    assert_eq!(stats.queues["q"].limits, max_leased(2));
    assert_eq!(stats.queues["q"].counts[&JobState::Leased], 2);
    // Lifted: the rest can be leased.
    relay.set_queue_limits("q", QueueLimits::default()).unwrap();
    assert!(!relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap().is_empty());
    assert_eq!(relay.stats().unwrap().queues["q"].limits, QueueLimits::default());
}

pub fn a_rate_limit_allows_its_count_per_window(new_db: &NewDb) {
    let (relay, clock, db) = open_clocked(new_db);
    let limits = QueueLimits {
        max_leased_per_group: None,
        max_leased: None,
        rate: Some(RateLimit {
            limit: 3,
            per: Duration::from_secs(10),
        }),
        poison_after: None,
    };
    relay.set_queue_limits("q", limits).unwrap();
    for i in 0..10u8 {
        relay.submit(NewJob::new("q", "k", vec![i])).unwrap();
    }
    assert_eq!(relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap().len(), 3);
    assert!(relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap().is_empty());
    // The window is stored: a reopened Relay (on the same clock) still
    // counts it.
    drop(relay);
    let options = relay::Options {
        clock: clock.clone(),
        ..crate::clocked().0
    };
    let relay = db.open(options).unwrap();
    clock.advance(Duration::from_millis(9_999));
    assert!(relay.lease(LeaseRequest::new(["q"])).unwrap().is_empty());
    clock.advance(Duration::from_millis(1));
    assert_eq!(relay.lease(LeaseRequest::new(["q"]).max(2)).unwrap().len(), 2);
    assert_eq!(relay.lease(LeaseRequest::new(["q"]).max(2)).unwrap().len(), 1);
    assert!(relay.lease(LeaseRequest::new(["q"])).unwrap().is_empty());
    assert_eq!(relay.stats().unwrap().queues["q"].limits, limits);
}

pub fn bad_limits_are_refused_and_change_nothing(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    relay.set_queue_limits("q", max_leased(4)).unwrap();
    let rate = |limit, per| QueueLimits {
        max_leased_per_group: None,
        max_leased: None,
        rate: Some(RateLimit { limit, per }),
        poison_after: None,
    };
    for bad in [
        max_leased(0),
        max_leased(1_000_001),
        rate(0, Duration::from_secs(1)),
        rate(5, Duration::ZERO),
        rate(5, Duration::from_secs(2 * 86_400)),
    ] {
        match relay.set_queue_limits("q", bad) {
            Err(Error::InvalidInput(e)) => assert!(e.field == "max_leased" || e.field == "rate_limit", "{e}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert!(matches!(
        relay.set_queue_limits("bad name", max_leased(1)),
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(relay.stats().unwrap().queues["q"].limits, max_leased(4));
    assert!(!relay.stats().unwrap().queues.contains_key("bad name"));
}

/// Two Relays on one store: the limit holds for both together.
pub fn a_limit_holds_across_relays_on_the_store(new_db: &NewDb) {
    let db = new_db();
    let (options, _clock) = crate::clocked();
    let a = db.open(options.clone()).unwrap();
    let b = db.open(options).unwrap();
    a.set_queue_limits("q", max_leased(3)).unwrap();
    for i in 0..6u8 {
        a.submit(NewJob::new("q", "k", vec![i])).unwrap();
    }
    assert_eq!(a.lease(LeaseRequest::new(["q"]).max(2)).unwrap().len(), 2);
    assert_eq!(b.lease(LeaseRequest::new(["q"]).max(5)).unwrap().len(), 1);
    assert!(a.lease(LeaseRequest::new(["q"])).unwrap().is_empty());
}

/// A job's own lease length wins over the lease request's; its timeout is
/// handed to the worker with the lease. Both are stored with the job.
pub fn a_jobs_own_lease_length_and_timeout(new_db: &NewDb) {
    let (relay, clock, db) = open_clocked(new_db);
    let long = relay
        .submit(
            NewJob::new("q", "k", Vec::new())
                .lease_for(Duration::from_secs(600))
                .timeout(Duration::from_secs(90)),
        )
        .unwrap();
    let plain = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    drop(relay);
    let options = relay::Options {
        clock: clock.clone(),
        ..crate::clocked().0
    };
    let relay = db.open(options).unwrap();
    let job = relay.get(long).unwrap();
    assert_eq!(
        (job.lease_for, job.timeout),
        (Some(Duration::from_secs(600)), Some(Duration::from_secs(90)))
    );
    let got = relay
        .lease(LeaseRequest::new(["q"]).max(2).lease_for(Duration::from_secs(30)))
        .unwrap();
    let (a, b) = (&got[0], &got[1]);
    assert_eq!((a.id, b.id), (long, plain));
    assert_eq!(
        (a.lease_for, a.timeout, a.expires_at),
        (
            Duration::from_secs(600),
            Some(Duration::from_secs(90)),
            clock.now().plus(Duration::from_secs(600))
        )
    );
    assert_eq!(
        (b.lease_for, b.timeout, b.expires_at),
        (Duration::from_secs(30), None, clock.now().plus(Duration::from_secs(30)))
    );
    // Past the request's 30 s the job's own lease still holds.
    clock.advance(Duration::from_secs(60));
    relay.ack(a.id, a.token, None).unwrap();
    assert!(matches!(relay.ack(b.id, b.token, None), Err(Error::LeaseLost { .. })));
    for (bad, field) in [
        (NewJob::new("q", "k", Vec::new()).lease_for(Duration::ZERO), "lease_for"),
        (
            NewJob::new("q", "k", Vec::new()).lease_for(Duration::from_secs(90_000)),
            "lease_for",
        ),
        (NewJob::new("q", "k", Vec::new()).timeout(Duration::ZERO), "timeout"),
        (
            NewJob::new("q", "k", Vec::new()).timeout(Duration::from_secs(90_000)),
            "timeout",
        ),
    ] {
        match relay.submit(bad) {
            Err(Error::InvalidInput(e)) => assert_eq!(e.field, field),
            other => panic!("{field}: {other:?}"),
        }
    }
}
