//! Fencing: a worker whose lease ended can never act on the job again.

use crate::open_clocked;
use crate::NewDb;
use relay::{Error, JobState, LeaseRequest, LeaseToken, NewJob};
use std::time::Duration;

const LEASE: Duration = Duration::from_secs(10);

pub fn expired_lease_is_lost_and_next_holder_acks(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let first = relay
        .lease(LeaseRequest::new(["q"]).worker("slow").lease_for(LEASE))
        .unwrap()
        .remove(0);
    clock.advance(LEASE);
    let t = first.token;
    assert!(matches!(relay.ack(id, t, None), Err(Error::LeaseLost { id: i }) if i == id));
    assert!(matches!(relay.nack(id, t, "late", None), Err(Error::LeaseLost { .. })));
    assert!(matches!(relay.extend(id, t, LEASE), Err(Error::LeaseLost { .. })));
    assert!(matches!(relay.release(id, t), Err(Error::LeaseLost { .. })));
    assert_eq!(
        relay.get(id).unwrap().status.attempts,
        1,
        "refused calls changed nothing"
    );

    let second = relay
        .lease(LeaseRequest::new(["q"]).worker("fast").lease_for(LEASE))
        .unwrap()
        .remove(0);
    assert_eq!((second.id, second.attempt), (id, 2));
    assert!(second.token > first.token);
    assert!(
        matches!(relay.ack(id, first.token, None), Err(Error::LeaseLost { .. })),
        "old token still refused"
    );
    relay.ack(id, second.token, Some(b"fast".to_vec())).unwrap();
    let job = relay.get(id).unwrap();
    assert_eq!(
        (job.state(), job.result.as_deref()),
        (JobState::Succeeded, Some(&b"fast"[..]))
    );
    let kinds: Vec<String> = relay.events(id).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["submitted", "leased", "expired", "leased", "succeeded"]);
}

/// The holder of a cancelled job's lease is refused, told the job's state
/// (it is over: no other worker holds it).
pub fn cancelled_lease_is_lost(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    relay.cancel(id).unwrap();
    let cancelled = |r: relay::Result<()>| {
        matches!(
            r,
            Err(Error::InvalidState {
                state: JobState::Cancelled,
                ..
            })
        )
    };
    assert!(cancelled(relay.extend(id, l.token, LEASE).map(drop)));
    assert!(cancelled(relay.ack(id, LeaseToken(l.token.0 + 1), None)));
    assert_eq!(relay.get(id).unwrap().state(), JobState::Cancelled);
}

pub fn extend_keeps_the_job(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let l = relay
        .lease(LeaseRequest::new(["q"]).lease_for(LEASE))
        .unwrap()
        .remove(0);
    for _ in 0..5 {
        clock.advance(Duration::from_secs(8));
        let until = relay.extend(id, l.token, LEASE).unwrap();
        assert_eq!(until, relay::Clock::now(&*clock).plus(LEASE));
        assert!(
            relay.lease(LeaseRequest::new(["q"])).unwrap().is_empty(),
            "extended job is not re-leased"
        );
    }
    relay.ack(id, l.token, None).unwrap();
    assert_eq!(relay.get(id).unwrap().status.attempts, 1);
}

pub fn reaper_reclaims_without_a_caller(new_db: &NewDb) {
    let db = new_db();
    let (mut options, clock) = crate::clocked();
    options.reap_interval = Duration::from_millis(20);
    let relay = db.open(options).unwrap();
    let id = relay.submit(NewJob::new("q", "k", Vec::new()).max_attempts(1)).unwrap();
    relay.lease(LeaseRequest::new(["q"]).lease_for(LEASE)).unwrap();
    clock.advance(LEASE);
    // No call touches the job: the idle writer must reclaim it by itself.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while relay.get(id).unwrap().state() == JobState::Leased {
        assert!(std::time::Instant::now() < deadline, "expired lease never reclaimed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let job = relay.get(id).unwrap();
    assert_eq!(job.state(), JobState::Dead, "its only attempt expired");
    let last = relay.events(id).unwrap().pop().unwrap();
    assert_eq!(
        (last.kind.as_str(), &last.data["dead"]),
        ("expired", &serde_json::json!(true))
    );
}

/// A holder's ack, nack, snooze or extend may be planned from what its own Relay
/// wrote when it leased the job, without reading the row (PostgreSQL: one
/// round trip instead of two). Whatever another Relay on the store did to
/// the job meanwhile is still seen: the holder is refused as after a read,
/// the other's work stands, and a job made to wait for it meanwhile is told.
pub fn a_holder_sees_what_another_relay_did_to_its_job(new_db: &NewDb) {
    let db = new_db();
    let (mut options, clock) = crate::clocked();
    // Expired leases are reclaimed by claims only: a holder's call after
    // the clock moved is then not a batch that reaps (which reads first).
    options.reap_interval = Duration::from_secs(365 * 24 * 3600);
    options.scheduler = false;
    let a = db.open(options.clone()).unwrap();
    let b = db.open(options).unwrap();
    let lease = |r: &relay::Relay, q: &str| {
        r.lease(LeaseRequest::new([q]).worker("w").lease_for(LEASE))
            .unwrap()
            .remove(0)
    };

    // Cancelled by the other Relay: the holder's ack is refused.
    let id = a.submit(NewJob::new("q1", "k", Vec::new())).unwrap();
    let held = lease(&a, "q1");
    b.cancel(id).unwrap();
    assert!(
        matches!(
            a.ack(id, held.token, None),
            Err(Error::InvalidState {
                state: JobState::Cancelled,
                ..
            })
        ),
        "an ack of a job cancelled elsewhere is refused"
    );
    assert_eq!(b.get(id).unwrap().state(), JobState::Cancelled);

    // Failed and leased again through the other Relay (same worker name,
    // same clock: only the token and the attempt differ): the old token is
    // refused, the new holder's ack stands.
    let id = a.submit(NewJob::new("q2", "k", Vec::new())).unwrap();
    let old = lease(&a, "q2");
    b.nack(id, old.token, "once more", Some(Duration::ZERO)).unwrap();
    let new = lease(&b, "q2");
    assert_eq!(new.id, id);
    assert!(
        matches!(a.ack(id, old.token, None), Err(Error::LeaseLost { .. })),
        "the old holder's ack is refused"
    );
    assert!(matches!(a.extend(id, old.token, LEASE), Err(Error::LeaseLost { .. })));
    b.ack(id, new.token, Some(b"new".to_vec())).unwrap();
    let job = a.get(id).unwrap();
    assert_eq!((job.state(), job.status.attempts), (JobState::Succeeded, 2));
    assert_eq!(job.result.as_deref(), Some(&b"new"[..]));

    // A job submitted through the other Relay to wait for the leased one
    // is told when the holder acks it.
    let parent = a.submit(NewJob::new("q3", "k", Vec::new())).unwrap();
    let held = lease(&a, "q3");
    let child = b
        .submit(NewJob::new("q4", "k", Vec::new()).depends_on([parent]))
        .unwrap();
    assert_eq!(b.get(child).unwrap().state(), JobState::Waiting);
    a.ack(parent, held.token, None).unwrap();
    assert_eq!(
        b.get(child).unwrap().state(),
        JobState::Ready,
        "the dependent was told its parent finished"
    );

    // Extended through the other Relay: past the expiry its holder's Relay
    // wrote, the lease still holds, and the ack is taken.
    let id = a.submit(NewJob::new("q6", "k", Vec::new())).unwrap();
    let held = lease(&a, "q6");
    b.extend(id, held.token, LEASE * 6).unwrap();
    clock.advance(LEASE * 2);
    a.ack(id, held.token, None).unwrap();
    assert_eq!(b.get(id).unwrap().state(), JobState::Succeeded);

    // And the holder's own calls in turn, with nobody else in between.
    let id = a.submit(NewJob::new("q5", "k", Vec::new())).unwrap();
    let held = lease(&a, "q5");
    let until = a.extend(id, held.token, LEASE * 2).unwrap();
    assert_eq!(until, relay::Clock::now(&*clock).plus(LEASE * 2));
    assert_eq!(
        b.get(id).unwrap().status.lease.map(|l| l.expires_at),
        Some(until),
        "the extended expiry is what the store holds"
    );
    a.nack(id, held.token, "retry", Some(Duration::ZERO)).unwrap();
    let again = lease(&a, "q5");
    a.ack(id, again.token, None).unwrap();
    let job = b.get(id).unwrap();
    assert_eq!((job.state(), job.status.attempts), (JobState::Succeeded, 2));
    let kinds: Vec<String> = b.events(id).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["submitted", "leased", "failed", "leased", "succeeded"]);
}
