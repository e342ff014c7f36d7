//! Durable steps (issue 40): a lease holder records a step's output on the
//! job, fenced by its token; every later lease of the job carries the
//! recorded steps.

use crate::{open_clocked, NewDb};
use relay::{Clock, Error, JobId, LeaseRequest, LeaseToken, NewJob, Relay};
use std::time::Duration;

fn kinds(relay: &Relay, id: JobId) -> Vec<String> {
    relay.events(id).unwrap().into_iter().map(|e| e.kind).collect()
}

fn lease_one(relay: &Relay, lease_for: Duration) -> relay::LeasedJob {
    let mut jobs = relay
        .lease(LeaseRequest::new(["q"]).lease_for(lease_for).worker("w"))
        .unwrap();
    assert_eq!(jobs.len(), 1, "one job to lease");
    jobs.remove(0)
}

fn names(steps: &[relay::Step]) -> Vec<(&str, &[u8], u32)> {
    steps
        .iter()
        .map(|s| (s.name.as_str(), s.output.as_slice(), s.attempt))
        .collect()
}

/// A record is kept on the job, durable across a reopen, shown by `get`,
/// and carried by every later lease of the job (a nack's retry, an
/// expired lease, a DEAD job retried); the first record of a name stands.
pub fn recorded_steps_come_with_every_later_lease(new_db: &NewDb) {
    let (relay, clock, db) = open_clocked(new_db);
    let lease_for = Duration::from_secs(30);
    let id = relay
        .submit(NewJob::new("q", "order", b"{}".to_vec()).max_attempts(3))
        .unwrap();
    let first = lease_one(&relay, lease_for);
    assert!(first.steps.is_empty(), "a new job has no steps");
    clock.advance(Duration::from_millis(5));
    let recorded_at = clock.now();
    assert_eq!(
        relay
            .record_step(id, first.token, "charge", br#"{"charge":"ch_1"}"#.to_vec())
            .unwrap(),
        None
    );
    // The same name again, with another output: the first stands, and it
    // is answered so the handler goes on with it.
    let again = relay
        .record_step(id, first.token, "charge", br#"{"charge":"ch_2"}"#.to_vec())
        .unwrap()
        .expect("the earlier record is answered");
    assert_eq!(again.output, br#"{"charge":"ch_1"}"#);
    assert_eq!((again.attempt, again.at), (1, recorded_at));
    relay.record_step(id, first.token, "label", vec![0, 159, 255]).unwrap();
    let want = vec![
        ("charge", &br#"{"charge":"ch_1"}"#[..], 1),
        ("label", &[0u8, 159, 255][..], 1),
    ];
    assert_eq!(names(&relay.get(id).unwrap().steps), want);
    let steps_events = kinds(&relay, id).iter().filter(|k| *k == "step").count();
    assert_eq!(steps_events, 2, "one event per step taken, none for the record refused");
    // A failed attempt: the retry is leased with the steps.
    relay.nack(id, first.token, "boom", Some(Duration::ZERO)).unwrap();
    let second = lease_one(&relay, lease_for);
    assert_eq!(second.attempt, 2);
    assert_eq!(names(&second.steps), want);
    relay
        .record_step(id, second.token, "email", b"\"sent\"".to_vec())
        .unwrap();
    // The lease expires: the next lease has all three.
    clock.advance(lease_for);
    let third = lease_one(&relay, lease_for);
    assert_eq!(third.attempt, 3);
    assert_eq!(
        third
            .steps
            .iter()
            .map(|s| (s.name.as_str(), s.attempt))
            .collect::<Vec<_>>(),
        [("charge", 1), ("label", 1), ("email", 2)]
    );
    // Its last attempt fails: DEAD, and a retry keeps the steps.
    relay.nack(id, third.token, "boom", None).unwrap();
    assert_eq!(relay.get(id).unwrap().state(), relay::JobState::Dead);
    relay.retry(id).unwrap();
    drop(relay);
    // Durable: a reopened store leases the job with them.
    let (mut options, _) = crate::clocked();
    options.clock = clock.clone();
    let relay = db.open(options).unwrap();
    let fourth = relay
        .lease(LeaseRequest::new(["q"]).lease_for(lease_for).worker("w"))
        .unwrap()
        .remove(0);
    assert_eq!(fourth.steps.len(), 3);
    assert_eq!(fourth.steps[0].output, br#"{"charge":"ch_1"}"#);
    assert_eq!(fourth.steps[2].output, b"\"sent\"");
}

/// Fencing: a worker whose lease expired records a step after the job was
/// leased again; it gets LeaseLost, and the job's record is the new
/// holder's, written after. A stale record changes nothing, not even the
/// event log.
pub fn a_stale_lease_cannot_record_a_step(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let lease_for = Duration::from_secs(30);
    let id = relay.submit(NewJob::new("q", "order", b"{}".to_vec())).unwrap();
    let old = lease_one(&relay, lease_for);
    clock.advance(lease_for);
    let new = lease_one(&relay, lease_for);
    assert!(new.token > old.token);
    let events = kinds(&relay, id).len();
    let stale = relay.record_step(id, old.token, "charge", b"\"old\"".to_vec());
    assert!(matches!(stale, Err(Error::LeaseLost { id: j }) if j == id), "{stale:?}");
    assert!(relay.get(id).unwrap().steps.is_empty(), "the stale record left nothing");
    assert_eq!(kinds(&relay, id).len(), events, "nor an event");
    assert_eq!(
        relay.record_step(id, new.token, "charge", b"\"new\"".to_vec()).unwrap(),
        None
    );
    let stale = relay.record_step(id, old.token, "charge", b"\"old\"".to_vec());
    assert!(matches!(stale, Err(Error::LeaseLost { .. })), "{stale:?}");
    let steps = relay.get(id).unwrap().steps;
    assert_eq!(names(&steps), [("charge", &b"\"new\""[..], 2)]);
    // An expired lease not yet taken by anyone, a finished job, a job that
    // does not exist: refused, nothing written.
    clock.advance(lease_for);
    assert!(matches!(
        relay.record_step(id, new.token, "late", Vec::new()),
        Err(Error::LeaseLost { .. })
    ));
    let last = lease_one(&relay, lease_for);
    relay.ack(id, last.token, None).unwrap();
    assert!(matches!(
        relay.record_step(id, last.token, "after", Vec::new()),
        Err(Error::InvalidState { .. })
    ));
    assert!(matches!(
        relay.record_step(JobId(9_999), LeaseToken(1), "x", Vec::new()),
        Err(Error::NotFound { .. })
    ));
    assert_eq!(relay.get(id).unwrap().steps.len(), 1);
}

/// A job's steps are bounded in count and bytes, with errors naming the
/// bound; a refused record changes nothing and fails alone.
pub fn steps_are_bounded_per_job(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "big", b"{}".to_vec())).unwrap();
    let l = lease_one(&relay, Duration::from_secs(300));
    for bad in ["", "a\nb", &"s".repeat(relay::MAX_STEP_NAME + 1)] {
        assert!(
            matches!(
                relay.record_step(id, l.token, bad, Vec::new()),
                Err(Error::InvalidInput(_))
            ),
            "{bad:?}"
        );
    }
    let big = vec![7u8; relay::MAX_STEP_BYTES + 1];
    assert!(matches!(
        relay.record_step(id, l.token, "big", big),
        Err(Error::InvalidInput(_))
    ));
    // Bytes: 1 MiB in all.
    let half = vec![1u8; relay::MAX_STEP_BYTES / 2];
    relay.record_step(id, l.token, "a", half.clone()).unwrap();
    relay.record_step(id, l.token, "b", half.clone()).unwrap();
    let over = relay.record_step(id, l.token, "c", vec![1]);
    assert!(
        matches!(over, Err(Error::StepBound { bound: "step_bytes", limit, would_be, .. })
            if limit == relay::MAX_STEP_BYTES as u64 && would_be == limit + 1),
        "{over:?}"
    );
    assert!(over.unwrap_err().to_string().contains("step_bytes"));
    // Count: 1,000 steps (an empty output is a step too).
    let id2 = relay.submit(NewJob::new("q", "many", b"{}".to_vec())).unwrap();
    let l2 = lease_one(&relay, Duration::from_secs(300));
    for i in 0..relay::MAX_STEPS {
        relay.record_step(id2, l2.token, &format!("s{i}"), Vec::new()).unwrap();
    }
    let over = relay.record_step(id2, l2.token, "one more", Vec::new());
    assert!(matches!(over, Err(Error::StepBound { bound: "steps", .. })), "{over:?}");
    // Refused records changed nothing; the holders go on.
    assert_eq!(relay.get(id).unwrap().steps.len(), 2);
    assert_eq!(relay.get(id2).unwrap().steps.len(), relay::MAX_STEPS);
    relay.ack(id, l.token, None).unwrap();
    relay.ack(id2, l2.token, None).unwrap();
}

/// A sleep gives the lease and the attempt back: the job is WAITING,
/// holding no place in its queue's `max_leased`, until its time, when a
/// claim takes it (READY, aging counted from then) with its steps, the
/// sleep's among them. Counted WAITING; a stale token sleeps nothing.
pub fn a_sleeping_job_holds_no_lease_until_its_time(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    relay
        .set_queue_limits(
            "q",
            relay::QueueLimits {
                max_leased: Some(1),
                ..relay::QueueLimits::default()
            },
        )
        .unwrap();
    let lease_for = Duration::from_secs(30);
    let a = relay.submit(NewJob::new("q", "sleeper", b"{}".to_vec())).unwrap();
    let first = lease_one(&relay, lease_for);
    assert_eq!((first.id, first.attempt), (a, 1));
    relay.record_step(a, first.token, "charge", b"1".to_vec()).unwrap();
    let b = relay.submit(NewJob::new("q", "other", b"{}".to_vec())).unwrap();
    assert!(
        relay.lease(LeaseRequest::new(["q"]).worker("w")).unwrap().is_empty(),
        "max_leased 1 is taken by the sleeper-to-be"
    );
    let hour = Duration::from_secs(3600);
    let until = clock.now().plus(hour);
    // A stale token sleeps nothing.
    let stale = relay.sleep(a, LeaseToken(first.token.0 - 1), "nap", until);
    assert!(matches!(stale, Err(Error::LeaseLost { .. })), "{stale:?}");
    let s = relay.sleep(a, first.token, "nap", until).unwrap();
    assert_eq!((s.state, s.ready_at, s.attempts), (relay::JobState::Waiting, until, 0));
    let job = relay.get(a).unwrap();
    assert!(job.status.lease.is_none());
    assert_eq!(job.steps.len(), 2, "the sleep is recorded as a step");
    assert_eq!(job.steps[1].sleep_until(), Some(until));
    assert_eq!(kinds(&relay, a).last().map(String::as_str), Some("sleeping"));
    assert_eq!(relay.stats().unwrap().queues["q"].counts[&relay::JobState::Waiting], 1);
    // Its max_leased slot is free: the other job runs meanwhile.
    let other = lease_one(&relay, lease_for);
    assert_eq!(other.id, b);
    relay.ack(b, other.token, None).unwrap();
    // Not before its time...
    clock.advance(hour - Duration::from_millis(1));
    assert!(relay.lease(LeaseRequest::new(["q"]).worker("w")).unwrap().is_empty());
    assert_eq!(relay.get(a).unwrap().state(), relay::JobState::Waiting);
    // ...and at it: leased again, the same attempt, with both steps.
    clock.advance(Duration::from_millis(1));
    let again = lease_one(&relay, lease_for);
    assert_eq!((again.id, again.attempt), (a, 1));
    assert_eq!(
        again.steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["charge", "nap"]
    );
    // The same sleep asked again (a run that did not pass it) sleeps until
    // the recorded time, which has come: READY at once, no second record.
    let s = relay.sleep(a, again.token, "nap", clock.now().plus(hour)).unwrap();
    assert_eq!(s.state, relay::JobState::Ready);
    let again = lease_one(&relay, lease_for);
    relay.ack(a, again.token, None).unwrap();
    assert_eq!(relay.get(a).unwrap().steps.len(), 2);
}

/// Sleeping jobs come due by the reap as SCHEDULED ones do, whatever the
/// batch: an idle reap makes them READY (counted), and one that wakes
/// before its lessee makes it READY; a cancelled sleeper never wakes; a
/// job waiting on another job is never woken by time.
pub fn sleepers_wake_by_the_reap_and_cancel_ends_a_sleep(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let lease_for = Duration::from_secs(30);
    let ids: Vec<JobId> = (0..3)
        .map(|_| relay.submit(NewJob::new("q", "s", b"{}".to_vec())).unwrap())
        .collect();
    let parent = relay.submit(NewJob::new("p", "parent", b"{}".to_vec())).unwrap();
    let child = relay
        .submit(NewJob::new("q", "child", b"{}".to_vec()).depends_on([parent]))
        .unwrap();
    let leases = relay
        .lease(LeaseRequest::new(["q"]).max(3).lease_for(lease_for).worker("w"))
        .unwrap();
    assert_eq!(leases.len(), 3);
    let minute = Duration::from_secs(60);
    for (i, l) in leases.iter().enumerate() {
        let until = clock.now().plus(minute * (i as u32 + 1));
        relay.sleep(l.id, l.token, "wait", until).unwrap();
    }
    relay.cancel(leases[2].id).unwrap();
    let waiting = |relay: &Relay| relay.stats().unwrap().queues["q"].counts[&relay::JobState::Waiting];
    assert_eq!(waiting(&relay), 3, "two sleepers and the dependent");
    clock.advance(minute * 10);
    assert_eq!(relay.reap_expired().unwrap(), 0, "no lease expired");
    let states: Vec<relay::JobState> = ids.iter().map(|id| relay.get(*id).unwrap().state()).collect();
    assert_eq!(
        states,
        [
            relay::JobState::Ready,
            relay::JobState::Ready,
            relay::JobState::Cancelled
        ]
    );
    assert_eq!(relay.get(child).unwrap().state(), relay::JobState::Waiting);
    assert_eq!(waiting(&relay), 1, "only the dependent waits");
}

fn waited(relay: &Relay, id: JobId, step: &str) -> Option<relay::Waited> {
    relay::Waited::of(&relay.get(id).unwrap().step(step)?.output)
}

/// Events (issue 40 item 3): a job waits for a key holding no lease; an
/// emit records the payload as each waiter's step and makes it READY in
/// its own commit; the next lease carries the step. The first emit of a
/// key stands; a wait that begins after the emit returns it at once; a
/// stale token waits for nothing.
pub fn an_emit_wakes_its_waiters_and_the_first_emit_stands(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let lease_for = Duration::from_secs(30);
    let day = Duration::from_secs(86_400);
    let ids: Vec<JobId> = (0..3)
        .map(|_| relay.submit(NewJob::new("q", "order", b"{}".to_vec())).unwrap())
        .collect();
    let leases = relay
        .lease(LeaseRequest::new(["q"]).max(3).lease_for(lease_for).worker("w"))
        .unwrap();
    assert_eq!(leases.len(), 3);
    let stale = relay.wait(
        leases[0].id,
        LeaseToken(leases[0].token.0 + 1),
        "shipment",
        "shipped:1",
        clock.now().plus(day),
    );
    assert!(matches!(stale, Err(Error::LeaseLost { .. })), "{stale:?}");
    for l in &leases[..2] {
        let s = relay
            .wait(l.id, l.token, "shipment", "shipped:1", clock.now().plus(day))
            .unwrap();
        assert_eq!((s.state, s.attempts), (relay::JobState::Waiting, 0));
    }
    // The third waits on another key, and is cancelled while it waits.
    relay
        .wait(
            leases[2].id,
            leases[2].token,
            "shipment",
            "shipped:2",
            clock.now().plus(day),
        )
        .unwrap();
    relay.cancel(leases[2].id).unwrap();
    assert!(
        relay.lease(LeaseRequest::new(["q"]).worker("w")).unwrap().is_empty(),
        "waiters are not leased"
    );
    assert_eq!(kinds(&relay, ids[0]).last().map(String::as_str), Some("waiting"));
    let e = relay.emit("shipped:1", br#"{"tracking": "1Z"}"#.to_vec()).unwrap();
    assert_eq!((e.first, e.woken), (true, 2));
    for id in &ids[..2] {
        assert_eq!(relay.get(*id).unwrap().state(), relay::JobState::Ready);
        assert_eq!(
            waited(&relay, *id, "shipment"),
            Some(relay::Waited::Event(br#"{"tracking": "1Z"}"#.to_vec()))
        );
        assert_eq!(kinds(&relay, *id).last().map(String::as_str), Some("woken"));
    }
    // A second emit of the key changes nothing.
    let again = relay.emit("shipped:1", br#"{"tracking": "other"}"#.to_vec()).unwrap();
    assert_eq!((again.first, again.woken), (false, 0));
    // The woken jobs are leased with the step (the same attempt).
    let next = relay
        .lease(LeaseRequest::new(["q"]).max(3).lease_for(lease_for).worker("w"))
        .unwrap();
    assert_eq!(next.len(), 2);
    for l in &next {
        assert_eq!(l.attempt, 1);
        let step = l.steps.iter().find(|s| s.name == "shipment").unwrap();
        assert_eq!(
            relay::Waited::of(&step.output),
            Some(relay::Waited::Event(br#"{"tracking": "1Z"}"#.to_vec()))
        );
    }
    // A wait that begins after the emit: READY at once, the step recorded.
    let late = relay.submit(NewJob::new("q", "order", b"{}".to_vec())).unwrap();
    let l = lease_one(&relay, lease_for);
    assert_eq!(l.id, late);
    let s = relay
        .wait(late, l.token, "shipment", "shipped:1", clock.now().plus(day))
        .unwrap();
    assert_eq!(s.state, relay::JobState::Ready);
    assert_eq!(
        waited(&relay, late, "shipment"),
        Some(relay::Waited::Event(br#"{"tracking": "1Z"}"#.to_vec()))
    );
    // The cancelled waiter stays cancelled when its key is emitted.
    let e = relay.emit("shipped:2", Vec::new()).unwrap();
    assert_eq!((e.first, e.woken), (true, 0));
    assert_eq!(relay.get(ids[2]).unwrap().state(), relay::JobState::Cancelled);
    // Bad input changes nothing.
    assert!(matches!(relay.emit("", Vec::new()), Err(Error::InvalidInput(_))));
    assert!(matches!(
        relay.emit("k", vec![b'1'; relay::MAX_EVENT_PAYLOAD + 1]),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        relay.put_mark("event:x", "j1", Duration::from_secs(60)),
        Err(Error::InvalidInput(_))
    ));
}

/// A wait's time runs out: the job is READY at its `until` (the reap
/// promotes it like a sleeper); its next run's wait (under the same step,
/// asking a later time) keeps the first wait's time, so it times out then:
/// the step records it, and an emit after that changes nothing for it.
pub fn a_wait_times_out_at_its_first_time(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let lease_for = Duration::from_secs(30);
    let hour = Duration::from_secs(3600);
    let id = relay.submit(NewJob::new("q", "order", b"{}".to_vec())).unwrap();
    let l = lease_one(&relay, lease_for);
    let until = clock.now().plus(hour);
    relay.wait(id, l.token, "approval", "approved:7", until).unwrap();
    clock.advance(hour);
    let again = lease_one(&relay, lease_for);
    assert_eq!((again.id, again.attempt), (id, 1));
    assert!(
        again.steps.is_empty(),
        "no step yet: the wait's time ran out, nothing recorded"
    );
    let s = relay
        .wait(id, again.token, "approval", "approved:7", clock.now().plus(hour))
        .unwrap();
    assert_eq!(s.state, relay::JobState::Ready, "the first wait's time has come");
    assert_eq!(waited(&relay, id, "approval"), Some(relay::Waited::TimedOut));
    let e = relay.emit("approved:7", b"true".to_vec()).unwrap();
    assert_eq!((e.first, e.woken), (true, 0));
    let last = lease_one(&relay, lease_for);
    relay.ack(id, last.token, None).unwrap();
    assert_eq!(waited(&relay, id, "approval"), Some(relay::Waited::TimedOut));
}

/// Item 6: a retried DEAD job keeps its steps (it goes on after the last
/// one); `retry_from_start` forgets them, so every step runs again.
pub fn a_retry_keeps_the_steps_unless_told_to_reset_them(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let id = relay
        .submit(NewJob::new("q", "k", b"{}".to_vec()).max_attempts(1))
        .unwrap();
    let l = lease_one(&relay, Duration::from_secs(30));
    relay.record_step(id, l.token, "charge", b"1".to_vec()).unwrap();
    relay.nack(id, l.token, "boom", None).unwrap();
    assert_eq!(relay.get(id).unwrap().state(), relay::JobState::Dead);
    relay.retry(id).unwrap();
    let l = lease_one(&relay, Duration::from_secs(30));
    assert_eq!(l.steps.len(), 1, "a retry keeps the steps");
    relay.nack(id, l.token, "boom", None).unwrap();
    relay.retry_from_start(id).unwrap();
    let job = relay.get(id).unwrap();
    assert_eq!(
        (job.state(), job.steps.len(), job.status.attempts),
        (relay::JobState::Ready, 0, 0)
    );
    let l = lease_one(&relay, Duration::from_secs(30));
    assert!(l.steps.is_empty(), "every step runs again");
    // Only a DEAD or CANCELLED job: a leased one is refused, unchanged.
    assert!(matches!(relay.retry_from_start(id), Err(Error::InvalidState { .. })));
}

/// A job cancelled while it waited on another job, retried, run, and
/// parked (a wait for an event) keeps its old dependency edge; when that
/// parent finishes, the edge is passed over: the job still waits for its
/// event (not SCHEDULED by the parent's end, nor cancelled by its death),
/// and the emit wakes it. (Found by the model: the parent's end counted
/// down a job waiting on none.)
pub fn a_parked_job_is_not_told_of_a_dependency_it_no_longer_waits_on(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let parent = relay.submit(NewJob::new("p", "parent", b"{}".to_vec())).unwrap();
    let child = relay
        .submit(NewJob::new("q", "child", b"{}".to_vec()).depends_on([parent]))
        .unwrap();
    relay.cancel(child).unwrap();
    relay.retry(child).unwrap();
    let l = lease_one(&relay, Duration::from_secs(30));
    assert_eq!(l.id, child);
    let until = clock.now().plus(Duration::from_secs(3600));
    relay.wait(child, l.token, "go", "go:1", until).unwrap();
    let p = relay.lease(LeaseRequest::new(["p"])).unwrap().remove(0);
    relay.ack(parent, p.token, None).unwrap();
    let s = relay.get(child).unwrap().status;
    assert_eq!(
        (s.state, s.ready_at),
        (relay::JobState::Waiting, until),
        "still waiting for its event"
    );
    let e = relay.emit("go:1", Vec::new()).unwrap();
    assert_eq!((e.first, e.woken), (true, 1));
    // A parent that dies does not cancel a parked job either.
    let parent2 = relay
        .submit(NewJob::new("p", "parent", b"{}".to_vec()).max_attempts(1))
        .unwrap();
    let child2 = relay
        .submit(NewJob::new("q", "child", b"{}".to_vec()).depends_on([parent2]))
        .unwrap();
    relay.cancel(child2).unwrap();
    relay.retry(child2).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"]).max(2)).unwrap();
    let l2 = l.iter().find(|j| j.id == child2).unwrap();
    relay.sleep(child2, l2.token, "nap", until).unwrap();
    let p2 = relay.lease(LeaseRequest::new(["p"])).unwrap().remove(0);
    relay.nack(parent2, p2.token, "boom", None).unwrap();
    assert_eq!(
        relay.get(child2).unwrap().state(),
        relay::JobState::Waiting,
        "asleep, not cancelled"
    );
}

/// Item 7: step records as completions of one operation
/// (`complete_and_lease`, `report`), beside an ack and a lease: each
/// answered on its own (a stale token refused alone, a bad name refused
/// alone), the first record of a name standing and answered in
/// `Worked::earlier`, the job still LEASED, what landed carried by the
/// job's next lease.
pub fn step_records_go_with_other_outcomes_in_one_operation(new_db: &NewDb) {
    use relay::{Completion, JobState};
    let (relay, _clock, _db) = open_clocked(new_db);
    let a = relay.submit(NewJob::new("q", "k", b"{}".to_vec())).unwrap();
    let b = relay.submit(NewJob::new("q", "k", b"{}".to_vec())).unwrap();
    let leased = relay
        .lease(
            LeaseRequest::new(["q"])
                .max(2)
                .lease_for(Duration::from_secs(30))
                .worker("w"),
        )
        .unwrap();
    let token = |id: JobId| leased.iter().find(|l| l.id == id).unwrap().token;
    let (ta, tb) = (token(a), token(b));
    let c = relay.submit(NewJob::new("q", "k", b"{}".to_vec())).unwrap();
    let worked = relay
        .complete_and_lease(
            vec![
                Completion::step(a, ta, "charge", b"1".to_vec()),
                Completion::step(a, ta, "charge", b"2".to_vec()),
                Completion::step(a, LeaseToken(ta.0 + 1000), "stale", b"3".to_vec()),
                Completion::step(a, ta, "", b"4".to_vec()),
                Completion::step(a, ta, "label", vec![0, 255]),
                Completion::ack(b, tb, None),
            ],
            LeaseRequest::new(["q"]).worker("w"),
        )
        .unwrap();
    let states: Vec<Result<JobState, String>> = worked
        .completions
        .iter()
        .map(|r| r.as_ref().map(|s| s.state).map_err(|e| format!("{e:?}")))
        .collect();
    assert_eq!(states[0], Ok(JobState::Leased));
    assert_eq!(states[1], Ok(JobState::Leased));
    assert!(
        matches!(worked.completions[2], Err(Error::LeaseLost { .. })),
        "{states:?}"
    );
    assert!(
        matches!(worked.completions[3], Err(Error::InvalidInput(_))),
        "{states:?}"
    );
    assert_eq!(states[4], Ok(JobState::Leased));
    assert_eq!(states[5], Ok(JobState::Succeeded));
    assert_eq!(worked.earlier.len(), 6);
    assert!(worked.earlier[0].is_none());
    assert_eq!(worked.earlier[1].as_ref().map(|s| s.output.as_slice()), Some(&b"1"[..]));
    assert!(worked.earlier[2..].iter().all(Option::is_none));
    assert_eq!(worked.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [c]);
    // Without a lease: the same answers.
    let reported = relay
        .report(vec![
            Completion::step(a, ta, "label", b"again".to_vec()),
            Completion::step(a, ta, "email", b"sent".to_vec()),
        ])
        .unwrap();
    assert_eq!(
        reported.earlier[0].as_ref().map(|s| s.output.as_slice()),
        Some(&[0u8, 255][..])
    );
    assert!(reported.earlier[1].is_none() && reported.jobs.is_empty());
    let want = vec![
        ("charge", &b"1"[..], 1),
        ("label", &[0u8, 255][..], 1),
        ("email", &b"sent"[..], 1),
    ];
    assert_eq!(names(&relay.get(a).unwrap().steps), want);
    assert_eq!(kinds(&relay, a).iter().filter(|k| *k == "step").count(), 3);
    relay.release(a, ta).unwrap();
    let next = lease_one(&relay, Duration::from_secs(30));
    assert_eq!(next.id, a);
    assert_eq!(names(&next.steps), want);
}

/// Item 5: `result` awaits a job's end: woken by the commit that ends it
/// in this process (the poll is an hour, so only the wake-up can answer),
/// seen from another Relay on the same database within its poll; `None`
/// when the time runs out first; `NotFound` for an unknown job.
pub fn result_awaits_the_end_of_a_job(new_db: &NewDb) {
    use relay::{JobState, Options};
    let db = new_db();
    let woken = db
        .open(Options {
            poll_interval: Duration::from_secs(3600),
            ..Options::default()
        })
        .unwrap();
    let id = woken.submit(NewJob::new("q", "k", b"{}".to_vec())).unwrap();
    let job = woken.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!(woken.result(id, Duration::from_millis(50)).unwrap().map(|j| j.id), None);
    let acker = woken.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        acker.ack(job.id, job.token, Some(b"42".to_vec()))
    });
    let asked = std::time::Instant::now();
    let done = woken
        .result(id, Duration::from_secs(30))
        .unwrap()
        .expect("the job ended");
    // Without the wake-up it would be read again only at the deadline.
    assert!(
        asked.elapsed() < Duration::from_secs(29),
        "not woken by the ack's commit"
    );
    t.join().unwrap().unwrap();
    assert_eq!(done.state(), JobState::Succeeded);
    assert_eq!(done.result.as_deref(), Some(&b"42"[..]));
    // Ended already: at once.
    assert_eq!(
        woken.result(id, Duration::ZERO).unwrap().map(|j| j.state()),
        Some(JobState::Succeeded)
    );
    assert!(matches!(
        woken.result(JobId(id.0 + 1000), Duration::from_secs(1)),
        Err(Error::NotFound { .. })
    ));
    // Another Relay on the database ends it: seen within this one's poll.
    let polling = db
        .open(Options {
            poll_interval: Duration::from_millis(50),
            ..Options::default()
        })
        .unwrap();
    let other = db.open(Options::default()).unwrap();
    let dead = polling
        .submit(NewJob::new("q", "k", b"{}".to_vec()).max_attempts(1))
        .unwrap();
    let leased = other.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        other.nack(leased.id, leased.token, "no", None)
    });
    let ended = polling
        .result(dead, Duration::from_secs(60))
        .unwrap()
        .expect("seen by the poll");
    t.join().unwrap().unwrap();
    assert_eq!(ended.state(), JobState::Dead);
    assert_eq!(ended.status.last_error.as_deref(), Some("no"));
}

/// Item 5: a lease holder joins another job (`Completion::join`): WAITING
/// on it, holding no lease; the child's end records how it ended as the
/// join's step (result or error) and makes the joiner READY in that
/// commit; a child that has ended already is recorded at once; a stale
/// token, an unknown child and the job itself are refused alone; a joiner
/// cancelled while it waited, retried and joining the same child again
/// writes its edge once.
pub fn a_join_waits_for_the_child_and_records_how_it_ended(new_db: &NewDb) {
    use relay::{Completion, JobState, Joined};
    let (relay, _clock, _db) = open_clocked(new_db);
    let lease_in = |q: &str| {
        relay
            .lease(LeaseRequest::new([q]).lease_for(Duration::from_secs(30)).worker("w"))
            .unwrap()
            .remove(0)
    };
    let parent = relay.submit(NewJob::new("p", "flow", b"{}".to_vec())).unwrap();
    let child = relay.submit(NewJob::new("c", "part", b"{}".to_vec())).unwrap();
    let p = lease_in("p");
    let joined = |c: Completion| relay.complete_batch(vec![c]).unwrap().remove(0);
    // Refused alone: a stale token, an unknown child, itself.
    assert!(matches!(
        joined(Completion::join(parent, LeaseToken(p.token.0 + 99), "wait-part", child)),
        Err(Error::LeaseLost { .. })
    ));
    // A job that does not exist (pruned after it ended, say) is recorded
    // as DELETED, at once, and the job goes on.
    let st = joined(Completion::join(parent, p.token, "wait-gone", JobId(child.0 + 999))).unwrap();
    assert_eq!(st.state, JobState::Ready);
    let gone = relay.get(parent).unwrap();
    let j = Joined::of(&gone.steps.iter().find(|s| s.name == "wait-gone").unwrap().output).unwrap();
    assert_eq!(j.state, None, "recorded as DELETED");
    let p = lease_in("p");
    assert!(matches!(
        joined(Completion::join(parent, p.token, "wait-part", parent)),
        Err(Error::InvalidInput(_))
    ));
    let st = joined(Completion::join(parent, p.token, "wait-part", child)).unwrap();
    assert_eq!(
        (st.state, st.waiting_on, st.lease.is_none()),
        (JobState::Waiting, 1, true)
    );
    assert!(kinds(&relay, parent).contains(&"joining".to_owned()));
    let c = lease_in("c");
    relay.ack(c.id, c.token, Some(br#"{"n":42}"#.to_vec())).unwrap();
    assert_eq!(relay.get(parent).unwrap().state(), JobState::Ready);
    let again = lease_in("p");
    assert_eq!(again.id, parent);
    assert_eq!(again.attempt, 1, "a join spends no attempt");
    let rec = again
        .steps
        .iter()
        .find(|s| s.name == "wait-part")
        .expect("the join's step");
    let j = Joined::of(&rec.output).expect("a join's record");
    assert_eq!(
        (j.job, j.state, j.result.as_deref()),
        (child, Some(JobState::Succeeded), Some(&br#"{"n":42}"#[..]))
    );
    // A child that ended already (DEAD): recorded at once, READY at once.
    let failing = relay
        .submit(NewJob::new("c", "part", b"{}".to_vec()).max_attempts(1))
        .unwrap();
    let f = lease_in("c");
    relay.nack(f.id, f.token, "out of stock", None).unwrap();
    let st = joined(Completion::join(parent, again.token, "wait-failing", failing)).unwrap();
    assert_eq!(st.state, JobState::Ready);
    let rec = relay.get(parent).unwrap().steps;
    let j = Joined::of(&rec.iter().find(|s| s.name == "wait-failing").unwrap().output).unwrap();
    assert_eq!(
        (j.state, j.error.as_deref()),
        (Some(JobState::Dead), Some("out of stock"))
    );
    // Cancelled while it waits, retried, joining the same child again:
    // one edge, and the child's end still reaches it.
    let slow = relay.submit(NewJob::new("c", "part", b"{}".to_vec())).unwrap();
    let p3 = lease_in("p");
    joined(Completion::join(parent, p3.token, "wait-slow", slow)).unwrap();
    relay.cancel(parent).unwrap();
    relay.retry(parent).unwrap();
    let p4 = lease_in("p");
    let st = joined(Completion::join(parent, p4.token, "wait-slow", slow)).unwrap();
    assert_eq!(st.state, JobState::Waiting);
    let s = lease_in("c");
    relay.ack(s.id, s.token, None).unwrap();
    let job = relay.get(parent).unwrap();
    assert_eq!(job.state(), JobState::Ready);
    let j = Joined::of(&job.steps.iter().find(|s| s.name == "wait-slow").unwrap().output).unwrap();
    assert_eq!((j.state, j.result), (Some(JobState::Succeeded), None));
}

/// Item 4: a completion token, made by the lease's holder, completes once
/// with its secret (a wrong one is "unknown", as is a made-up id), wakes
/// the job waiting for its event with the payload, and is refused after
/// use, after its expiry and once its job has ended; its event key cannot
/// be emitted by hand.
pub fn a_completion_token_completes_once_with_its_secret(new_db: &NewDb) {
    use relay::{Completion, JobState, TokenRefusal, Waited};
    let (relay, clock, _db) = open_clocked(new_db);
    let refusal = |r: relay::Result<relay::Emitted>| match r {
        Err(Error::Token { refusal }) => refusal,
        other => panic!("expected a token refusal, got {other:?}"),
    };
    let id = relay.submit(NewJob::new("q", "approve", b"{}".to_vec())).unwrap();
    let l = lease_one(&relay, Duration::from_secs(30));
    assert!(matches!(
        relay.create_token(id, LeaseToken(l.token.0 + 5), Duration::from_secs(3600)),
        Err(Error::LeaseLost { .. })
    ));
    assert!(matches!(
        relay.create_token(id, l.token, Duration::ZERO),
        Err(Error::InvalidInput(_))
    ));
    let t = relay.create_token(id, l.token, Duration::from_secs(3600)).unwrap();
    assert_eq!((t.id.len(), t.secret.len()), (32, 64));
    assert!(t.path().ends_with(&format!("{}.{}/complete", t.id, t.secret)));
    let until = clock.now().plus(Duration::from_secs(3600));
    let st = relay
        .complete_batch(vec![Completion::wait(id, l.token, "approval", t.event_key(), until)])
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!(st.state, JobState::Waiting);
    // Not completable without its secret, nor by an emit of its key.
    assert_eq!(
        refusal(relay.complete_token(&format!("{}.{}", t.id, "0".repeat(64)), b"1".to_vec())),
        TokenRefusal::Unknown
    );
    assert_eq!(
        refusal(relay.complete_token(&format!("{}.{}", "f".repeat(32), t.secret), b"1".to_vec())),
        TokenRefusal::Unknown
    );
    assert_eq!(
        refusal(relay.complete_token("no-dot-here", b"1".to_vec())),
        TokenRefusal::Unknown
    );
    assert!(matches!(
        relay.emit(&t.event_key(), b"1".to_vec()),
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(relay.get(id).unwrap().state(), JobState::Waiting);
    let done = relay
        .complete_token(&t.text(), br#"{"approved_by":"ada"}"#.to_vec())
        .unwrap();
    assert_eq!(done.woken, 1);
    let job = relay.get(id).unwrap();
    assert_eq!(job.state(), JobState::Ready);
    let rec = job.steps.iter().find(|s| s.name == "approval").unwrap();
    assert_eq!(
        Waited::of(&rec.output),
        Some(Waited::Event(br#"{"approved_by":"ada"}"#.to_vec()))
    );
    assert_eq!(
        refusal(relay.complete_token(&t.text(), b"2".to_vec())),
        TokenRefusal::Used
    );
    // Expired: the job's wait timed out.
    let l2 = lease_one(&relay, Duration::from_secs(3600));
    let late = relay.create_token(id, l2.token, Duration::from_secs(60)).unwrap();
    clock.advance(Duration::from_secs(61));
    assert_eq!(
        refusal(relay.complete_token(&late.text(), b"1".to_vec())),
        TokenRefusal::Expired
    );
    // Completed, then waited for a week and more later (a handler that
    // slept first): the completion is still there, and still "used".
    let long = relay
        .create_token(id, l2.token, Duration::from_secs(30 * 86_400))
        .unwrap();
    assert_eq!(
        relay.complete_token(&long.text(), b"\"yes\"".to_vec()).unwrap().woken,
        0
    );
    clock.advance(Duration::from_secs(9 * 86_400));
    assert_eq!(
        refusal(relay.complete_token(&long.text(), b"2".to_vec())),
        TokenRefusal::Used
    );
    let l3 = lease_one(&relay, Duration::from_secs(3600));
    let st = relay
        .complete_batch(vec![Completion::wait(
            id,
            l3.token,
            "late-approval",
            long.event_key(),
            long.expires_at,
        )])
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!(st.state, JobState::Ready, "the completion was found at once");
    let rec = relay.get(id).unwrap();
    let rec = rec.steps.iter().find(|s| s.name == "late-approval").unwrap();
    assert_eq!(Waited::of(&rec.output), Some(Waited::Event(b"\"yes\"".to_vec())));
    let l2 = lease_one(&relay, Duration::from_secs(3600));
    let closing = relay.create_token(id, l2.token, Duration::from_secs(3600)).unwrap();
    // Closed: its job has ended.
    relay.ack(id, l2.token, None).unwrap();
    assert_eq!(
        refusal(relay.complete_token(&closing.text(), b"1".to_vec())),
        TokenRefusal::Closed
    );
}

/// Item 6: `waiting_for` says what a WAITING job waits for: a sleep's
/// end, an event or a completion token until a time, a job it joined, or
/// the jobs it depends on; `None` for a job not WAITING.
pub fn waiting_for_says_what_a_waiting_job_waits_for(new_db: &NewDb) {
    use relay::{Completion, WaitingFor};
    let (relay, clock, _db) = open_clocked(new_db);
    let hour = Duration::from_secs(3600);
    let submit = |q: &str| relay.submit(NewJob::new(q, "k", b"{}".to_vec())).unwrap();
    let lease_of = |q: &str| {
        relay
            .lease(LeaseRequest::new([q]).lease_for(hour).worker("w"))
            .unwrap()
            .remove(0)
    };
    let park = |c: Completion| relay.complete_batch(vec![c]).unwrap().remove(0).unwrap();
    let (sleeper, waiter, tokened, joiner, child) = (submit("a"), submit("b"), submit("c"), submit("d"), submit("e"));
    let until = clock.now().plus(hour);
    assert_eq!(relay.waiting_for(sleeper).unwrap(), None, "READY waits for nothing");
    let l = lease_of("a");
    park(Completion::sleep(sleeper, l.token, "nap", until));
    assert_eq!(relay.waiting_for(sleeper).unwrap(), Some(WaitingFor::Sleep { until }));
    let l = lease_of("b");
    park(Completion::wait(waiter, l.token, "shipment", "shipped:7", until));
    assert_eq!(
        relay.waiting_for(waiter).unwrap(),
        Some(WaitingFor::Event {
            key: "shipped:7".into(),
            step: "shipment".into(),
            until
        })
    );
    let l = lease_of("c");
    let t = relay.create_token(tokened, l.token, hour).unwrap();
    park(Completion::wait(
        tokened,
        l.token,
        "approval",
        t.event_key(),
        t.expires_at,
    ));
    assert_eq!(
        relay.waiting_for(tokened).unwrap(),
        Some(WaitingFor::Token {
            id: t.id.clone(),
            step: "approval".into(),
            until: t.expires_at
        })
    );
    let l = lease_of("d");
    park(Completion::join(joiner, l.token, "child", child));
    assert_eq!(
        relay.waiting_for(joiner).unwrap(),
        Some(WaitingFor::Join {
            job: child,
            step: "child".into()
        })
    );
    let dependent = relay
        .submit(NewJob::new("f", "k", b"{}".to_vec()).depends_on([child, tokened]))
        .unwrap();
    assert_eq!(
        relay.waiting_for(dependent).unwrap(),
        Some(WaitingFor::Jobs { count: 2 })
    );
    // A wait that ended (cancelled), then a sleep: the sleep.
    relay.cancel(waiter).unwrap();
    relay.retry(waiter).unwrap();
    let l = lease_of("b");
    let later = until.plus(hour);
    park(Completion::sleep(waiter, l.token, "nap", later));
    assert_eq!(
        relay.waiting_for(waiter).unwrap(),
        Some(WaitingFor::Sleep { until: later })
    );
    assert!(matches!(relay.waiting_for(JobId(9_999)), Err(Error::NotFound { .. })));
}

/// Item 6: what the dashboard's Events page reads. `awaited_keys` counts
/// the jobs WAITING for each event or token key now (a wait that ended
/// with a cancel, a join and an emitted key left out), in pages after a
/// key; `recent_events` gives the latest kept events newest first (JSON
/// as written, bytes in base64, a long payload cut); `open_tokens` the
/// tokens neither completed nor expired, without their secrets. Limits
/// out of range are refused.
pub fn the_events_pages_reads_list_waits_events_and_open_tokens(new_db: &NewDb) {
    use relay::Completion;
    let (relay, clock, _db) = open_clocked(new_db);
    let hour = Duration::from_secs(3600);
    let leased = |q: &str| {
        relay.submit(NewJob::new(q, "k", b"{}".to_vec())).unwrap();
        relay
            .lease(LeaseRequest::new([q]).lease_for(hour).worker("w"))
            .unwrap()
            .remove(0)
    };
    let park = |c: Completion| relay.complete_batch(vec![c]).unwrap().remove(0).unwrap();
    let until = clock.now().plus(hour);
    let mut first = None;
    for i in 0..3 {
        let l = leased("a");
        first.get_or_insert(l.id);
        park(Completion::wait(
            l.id,
            l.token,
            "ship",
            "k:b",
            until.plus(Duration::from_secs(i)),
        ));
    }
    let l = leased("a");
    park(Completion::wait(l.id, l.token, "ship", "k:a", until));
    let gone = leased("a");
    park(Completion::wait(gone.id, gone.token, "ship", "k:gone", until));
    relay.cancel(gone.id).unwrap();
    let l = leased("a");
    park(Completion::wait(l.id, l.token, "ship", "k:emitted", until));
    relay.emit("k:emitted", b"{\"n\": 1}".to_vec()).unwrap();
    let child = relay.submit(NewJob::new("child", "k", Vec::new())).unwrap();
    let l = leased("a");
    park(Completion::join(l.id, l.token, "child", child));
    let holder = leased("t");
    let open = relay.create_token(holder.id, holder.token, hour).unwrap();
    park(Completion::wait(
        holder.id,
        holder.token,
        "approval",
        open.event_key(),
        open.expires_at,
    ));

    let keys = |after: Option<&str>, limit| -> Vec<(String, u64)> {
        relay
            .awaited_keys(after, limit)
            .unwrap()
            .into_iter()
            .map(|k| (k.key, k.waiters))
            .collect()
    };
    let all = keys(None, 100);
    assert_eq!(
        all,
        [("k:a".into(), 1), ("k:b".into(), 3), (open.event_key(), 1)],
        "waited for now"
    );
    let b = relay.awaited_keys(Some("k:a"), 1).unwrap().remove(0);
    assert_eq!(
        (b.key.as_str(), b.waiters, b.first, b.until),
        ("k:b", 3, first.unwrap(), until)
    );
    assert_eq!(keys(Some(&open.event_key()), 100), []);

    // Events, newest first (the clock moves on between emits).
    clock.advance(Duration::from_secs(1));
    relay.emit("k:bytes", vec![0xff, 0, 1]).unwrap();
    clock.advance(Duration::from_secs(1));
    relay
        .emit("k:long", format!("\"{}\"", "x".repeat(1000)).into_bytes())
        .unwrap();
    let recent = relay.recent_events(10).unwrap();
    let seen: Vec<(&str, &str, bool, bool)> = recent
        .iter()
        .map(|e| (e.key.as_str(), e.preview.as_str(), e.json, e.cut))
        .take(3)
        .collect();
    let long = format!("\"{}", "x".repeat(relay::EVENT_PREVIEW as usize - 1));
    assert_eq!(
        seen,
        [
            ("k:long", long.as_str(), true, true),
            ("k:bytes", "/wAB", false, false),
            ("k:emitted", "{\"n\": 1}", true, false)
        ]
    );
    assert_eq!(recent[0].kept_until, clock.now().plus(relay::EVENT_KEEP));
    assert_eq!(relay.recent_events(1).unwrap().len(), 1);

    // Tokens: open, completed, expired.
    let l = leased("t");
    let done = relay.create_token(l.id, l.token, hour).unwrap();
    relay.complete_token(&done.text(), Vec::new()).unwrap();
    let l = leased("t");
    let short = relay.create_token(l.id, l.token, Duration::from_secs(1)).unwrap();
    let ids = |relay: &Relay| -> Vec<(String, JobId)> {
        relay
            .open_tokens(100)
            .unwrap()
            .into_iter()
            .map(|t| (t.id, t.job))
            .collect()
    };
    assert_eq!(ids(&relay), [(open.id.clone(), holder.id), (short.id.clone(), l.id)]);
    clock.advance(Duration::from_secs(2));
    assert_eq!(
        ids(&relay),
        [(open.id.clone(), holder.id)],
        "an expired token is not open"
    );
    assert_eq!(relay.open_tokens(1).unwrap()[0].expires_at, open.expires_at);

    for limit in [0, 1001] {
        assert!(matches!(relay.awaited_keys(None, limit), Err(Error::InvalidInput(_))));
        assert!(matches!(relay.recent_events(limit), Err(Error::InvalidInput(_))));
        assert!(matches!(relay.open_tokens(limit), Err(Error::InvalidInput(_))));
    }
}
