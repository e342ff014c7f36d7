//! Flow control: snooze, and pause/resume of a queue.

use crate::{open_clocked, NewDb};
use relay::{Clock, Error, JobState, LeaseRequest, LeaseToken, NewJob};
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
        (JobState::Ready, 0, due, None)
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
    assert_eq!((s.state, s.attempts), (JobState::Ready, 0));
    assert_eq!(s.ready_at, clock.now().plus(Duration::from_secs(5)));
}
