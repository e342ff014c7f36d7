//! Four priority classes with aging.

use crate::open_clocked;
use crate::NewDb;
use relay::{JobId, LeaseRequest, NewJob};
use std::time::Duration;

fn lease_one(relay: &relay::Relay) -> Option<relay::LeasedJob> {
    relay.lease(LeaseRequest::new(["q"])).unwrap().pop()
}

pub fn higher_class_first_when_fresh(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let mut by_prio = Vec::new();
    for p in 0..4u8 {
        by_prio.push(relay.submit(NewJob::new("q", "k", Vec::new()).priority(p)).unwrap());
        clock.advance(Duration::from_secs(1));
    }
    let order: Vec<JobId> = std::iter::from_fn(|| lease_one(&relay).map(|l| l.id)).collect();
    let expect: Vec<JobId> = by_prio.into_iter().rev().collect();
    assert_eq!(order, expect);
}

pub fn aged_low_priority_beats_newer_urgent(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let aging = relay.options().aging_interval;
    let low = relay.submit(NewJob::new("q", "k", Vec::new()).priority(0)).unwrap();
    clock.advance(aging * 2);
    let urgent = relay.submit(NewJob::new("q", "k", Vec::new()).priority(3)).unwrap();
    // Waited two intervals: effective 2 < 3.
    assert_eq!(lease_one(&relay).unwrap().id, urgent);
    let urgent2 = relay.submit(NewJob::new("q", "k", Vec::new()).priority(3)).unwrap();
    clock.advance(aging);
    // Three intervals: effective 3, and older than the urgent job: it wins.
    assert_eq!(lease_one(&relay).unwrap().id, low);
    assert_eq!(lease_one(&relay).unwrap().id, urgent2);
}

pub fn no_starvation_under_urgent_stream(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let low = relay.submit(NewJob::new("q", "k", Vec::new()).priority(0)).unwrap();
    let step = Duration::from_secs(5);
    // Urgent jobs arrive twice as fast as they are served: without aging
    // the low job would wait forever.
    let mut served_at = None;
    for round in 0..200u32 {
        relay.submit(NewJob::new("q", "k", Vec::new()).priority(3)).unwrap();
        relay.submit(NewJob::new("q", "k", Vec::new()).priority(3)).unwrap();
        let l = lease_one(&relay).unwrap();
        relay.ack(l.id, l.token, None).unwrap();
        if l.id == low {
            served_at = Some(round);
            break;
        }
        clock.advance(step);
    }
    let round = served_at.expect("the priority-0 job starved");
    let aging = relay.options().aging_interval;
    let bound = u32::try_from((aging * 3).as_secs() / step.as_secs()).unwrap() + 1;
    assert!(round <= bound, "served in round {round}, expected by {bound}");
}
