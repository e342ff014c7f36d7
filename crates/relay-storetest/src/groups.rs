//! Groups (tenants): a queue's claims take its groups in turn, and its
//! `max_leased_per_group` bounds each group's leases.

use crate::{open_clocked, NewDb};
use relay::{Error, JobState, LeaseRequest, LeasedJob, NewJob, QueueLimits, Relay};
use std::time::Duration;

fn grouped(group: &str) -> NewJob {
    NewJob::new("q", "k", group.as_bytes().to_vec()).group(group)
}

/// The groups of what one lease call took, in the order it took them.
fn take(relay: &Relay, max: u32) -> Vec<LeasedJob> {
    relay
        .lease(LeaseRequest::new(["q"]).max(max).lease_for(Duration::from_secs(600)))
        .unwrap()
}

fn groups_of(jobs: &[LeasedJob]) -> Vec<String> {
    jobs.iter()
        .map(|j| String::from_utf8(j.payload.clone()).unwrap())
        .collect()
}

/// A group with many jobs waiting does not hold back the groups with few:
/// one job of each group a round, in the order the groups' jobs came,
/// within one claim and from claim to claim.
pub fn groups_are_taken_in_turn(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    relay.submit_batch((0..30).map(|_| grouped("big")).collect()).unwrap();
    for g in ["a", "b"] {
        relay.submit_batch((0..3).map(|_| grouped(g)).collect()).unwrap();
    }
    let id = relay.submit(grouped("c")).unwrap();
    assert_eq!(relay.get(id).unwrap().group.as_deref(), Some("c"), "kept on the job");
    // One claim of 7 takes the first round and most of the second.
    let first = take(&relay, 7);
    assert_eq!(groups_of(&first), ["big", "a", "b", "c", "big", "a", "b"]);
    // Claim after claim, the rounds go on where they stopped.
    let mut order = Vec::new();
    for _ in 0..5 {
        order.extend(groups_of(&take(&relay, 1)));
    }
    assert_eq!(order, ["big", "a", "b", "big", "big"]);
    // Within a group, its own jobs in the order they came.
    let big: Vec<i64> = first.iter().filter(|j| j.payload == b"big").map(|j| j.id.0).collect();
    assert!(big.windows(2).all(|w| w[0] < w[1]), "{big:?}");
}

/// A job of a group that comes back READY (a lease given back, a failed
/// attempt without back-off) waits behind the group's other READY jobs, as
/// one submitted then would; a group whose jobs were all taken starts again
/// at the front of the line, not behind its old turns.
pub fn a_job_back_in_its_group_waits_its_turn(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let ids: Vec<_> = (0..3)
        .map(|i| relay.submit(NewJob::new("q", "k", vec![i]).group("a")).unwrap())
        .collect();
    let l = take(&relay, 1).remove(0);
    assert_eq!(l.id, ids[0]);
    relay.release(l.id, l.token).unwrap();
    let order: Vec<_> = (0..3).map(|_| take(&relay, 1).remove(0).id).collect();
    assert_eq!(order, [ids[1], ids[2], ids[0]]);
    // Group "a" has nothing READY now; "b" has ten waiting. A new job of
    // "a" is taken within a round, not after the ten.
    relay.submit_batch((0..10).map(|_| grouped("b")).collect()).unwrap();
    take(&relay, 2);
    relay.submit(grouped("a")).unwrap();
    let next = groups_of(&take(&relay, 2));
    assert!(next.contains(&"a".to_owned()), "{next:?}");
}

/// A delayed grouped job is claimed once the writer promotes it, at the
/// front of the line at that moment (its turn is given when it becomes
/// READY, not when it was submitted).
pub fn a_delayed_grouped_job_takes_its_turn_when_it_comes_due(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    relay.submit_batch((0..20).map(|_| grouped("big")).collect()).unwrap();
    let late = relay.submit(grouped("late").delay(Duration::from_secs(10))).unwrap();
    assert_eq!(relay.get(late).unwrap().state(), JobState::Scheduled);
    assert_eq!(groups_of(&take(&relay, 5)), ["big"; 5]);
    clock.advance(Duration::from_secs(10));
    relay.reap_expired().unwrap(); // promotes it
    assert_eq!(relay.get(late).unwrap().state(), JobState::Ready);
    let next = groups_of(&take(&relay, 2));
    assert!(next.contains(&"late".to_owned()), "{next:?}");
}

/// Jobs of one group that come due together take their turns in the
/// order they came due, not in the order they were submitted: one pass
/// promotes them all (on PostgreSQL in one statement, whose rows are
/// written in an order of the server's choosing).
pub fn jobs_of_a_group_due_together_keep_the_order_they_came_due(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let delays = [40, 10, 30, 20];
    let ids: Vec<_> = delays
        .iter()
        .map(|s| relay.submit(grouped("g").delay(Duration::from_secs(*s))).unwrap())
        .collect();
    clock.advance(Duration::from_secs(60));
    relay.reap_expired().unwrap(); // promotes all four in one pass
    assert!(ids.iter().all(|id| relay.get(*id).unwrap().state() == JobState::Ready));
    let order: Vec<_> = (0..4).map(|_| take(&relay, 1).remove(0).id).collect();
    assert_eq!(order, [ids[1], ids[3], ids[2], ids[0]], "by time due");
}

/// A job whose lease expired and that a claim takes back queues behind
/// the READY jobs of its group as the claim found them, although the same
/// claim then takes the group's head: it is reclaimed first, then the
/// claim takes. (PostgreSQL wrote both rows in one statement, in an order
/// of its plan's, and a job written after the head was taken went before
/// the head's successor.)
pub fn a_reclaimed_job_queues_behind_its_groups_ready_jobs(new_db: &NewDb) {
    let db = new_db();
    let (mut options, clock) = crate::clocked();
    // The claim, not the reaper, takes the expired lease back.
    options.reap_interval = Duration::from_secs(365 * 24 * 3600);
    let relay = db.open(options).unwrap();
    let a1 = relay.submit(grouped("a").max_attempts(2)).unwrap();
    let a2 = relay.submit(grouped("a")).unwrap();
    let short = LeaseRequest::new(["q"]).lease_for(Duration::from_secs(1));
    assert_eq!(relay.lease(short).unwrap()[0].id, a1);
    let b1 = relay.submit(grouped("b")).unwrap();
    clock.advance(Duration::from_secs(2));
    // This claim reclaims a1 (behind a2) and takes a2; b1 took its turn
    // beside a2's.
    let order: Vec<_> = (0..3).map(|_| take(&relay, 1).remove(0).id).collect();
    assert_eq!(order, [a2, b1, a1], "a2, b1, then the reclaimed a1");
    assert_eq!(relay.get(a1).unwrap().status.attempts, 2);
}

/// A group's head that is deleted or cancelled while READY hands the
/// group on to its next job, so the rest of the line is still claimed, in
/// order.
pub fn a_deleted_or_cancelled_head_hands_its_group_on(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let ids: Vec<_> = (0..4).map(|_| relay.submit(grouped("a")).unwrap()).collect();
    relay.delete(ids[0]).unwrap();
    relay.cancel(ids[1]).unwrap();
    let order: Vec<_> = (0..2).map(|_| take(&relay, 1).remove(0).id).collect();
    assert_eq!(order, [ids[2], ids[3]]);
    assert!(take(&relay, 1).is_empty());
}

/// `max_leased_per_group` bounds each group's unexpired leases across
/// every Relay on the store; a claim takes other groups' jobs past a group
/// at its limit; an ended lease frees a slot (within the batch too); an
/// expired one no longer counts.
pub fn max_leased_per_group_bounds_each_group(new_db: &NewDb) {
    let (relay, clock, db) = open_clocked(new_db);
    let limits = QueueLimits {
        max_leased_per_group: Some(2),
        ..QueueLimits::default()
    };
    relay.set_queue_limits("q", limits).unwrap();
    assert_eq!(relay.stats().unwrap().queues["q"].limits.max_leased_per_group, Some(2));
    relay.submit_batch((0..10).map(|_| grouped("x")).collect()).unwrap();
    relay.submit_batch((0..3).map(|_| grouped("y")).collect()).unwrap();
    relay.submit(NewJob::new("q", "k", b"none".to_vec())).unwrap();
    let first = take(&relay, 10);
    let mut got = groups_of(&first);
    got.sort();
    assert_eq!(got, ["none", "x", "x", "y", "y"]);
    assert!(take(&relay, 10).is_empty(), "both groups at their limit");
    // Another Relay on the same store counts the same leases.
    let (mut options, _) = crate::clocked();
    options.clock = clock.clone();
    let other = db.open(options).unwrap();
    assert!(other.lease(LeaseRequest::new(["q"]).max(10)).unwrap().is_empty());
    // An ack frees its group's slot.
    let x = first.iter().find(|j| j.payload == b"x").unwrap();
    relay.ack(x.id, x.token, None).unwrap();
    assert_eq!(groups_of(&take(&relay, 10)), ["x"]);
    // Expired leases no longer count: two of each group again.
    clock.advance(Duration::from_secs(601));
    let again = groups_of(&take(&relay, 10));
    assert_eq!(again.iter().filter(|g| *g == "x").count(), 2, "{again:?}");
    assert_eq!(
        again.iter().filter(|g| *g == "y").count(),
        1,
        "{again:?}: y has one left"
    );
    // Lifting the limit lifts it.
    relay.set_queue_limits("q", QueueLimits::default()).unwrap();
    let rest = groups_of(&take(&relay, 20));
    assert!(rest.iter().filter(|g| *g == "x").count() > 2, "{rest:?}");
}

/// A group key is 1-256 characters and a limit 1-1,000,000: anything else
/// is refused alone, and nothing is written.
pub fn group_input_is_checked(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    for bad in [String::new(), "g".repeat(257)] {
        let e = relay.submit(NewJob::new("q", "k", Vec::new()).group(bad)).unwrap_err();
        assert!(matches!(&e, Error::InvalidInput(i) if i.field == "group"), "{e:?}");
    }
    let e = relay
        .set_queue_limits(
            "q",
            QueueLimits {
                max_leased_per_group: Some(0),
                ..QueueLimits::default()
            },
        )
        .unwrap_err();
    assert!(
        matches!(&e, Error::InvalidInput(i) if i.field == "max_leased_per_group"),
        "{e:?}"
    );
    assert!(relay.stats().unwrap().queues.is_empty(), "nothing written");
}

/// A group's backlog in one priority class does not push back its jobs of
/// another: there, it takes turns with that class's groups from the front.
pub fn a_groups_turns_are_kept_per_priority_class(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let job = |g: &str, p: u8| NewJob::new("q", "k", g.as_bytes().to_vec()).group(g).priority(p);
    relay.submit_batch((0..10).map(|_| job("b", 3)).collect()).unwrap();
    relay.submit_batch((0..10).map(|_| job("a", 1)).collect()).unwrap();
    relay.submit(job("a", 3)).unwrap();
    let urgent = groups_of(&take(&relay, 2));
    assert_eq!(urgent, ["b", "a"], "a's urgent job in the first round of its class");
}

/// A group at its `max_leased_per_group` with a long line of READY jobs
/// holds back no other group, however far that group's turns run ahead of
/// the held one's.
pub fn a_group_at_its_limit_holds_back_no_other_group(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let limits = QueueLimits {
        max_leased_per_group: Some(1),
        ..QueueLimits::default()
    };
    relay.set_queue_limits("q", limits).unwrap();
    let n = 1_100;
    relay.submit_batch((0..n).map(|_| grouped("held")).collect()).unwrap();
    relay.submit_batch((0..n).map(|_| grouped("free")).collect()).unwrap();
    // "held" takes its one lease and keeps it; "free" acks each of its.
    let first = take(&relay, 2);
    assert_eq!(groups_of(&first), ["held", "free"]);
    relay.ack(first[1].id, first[1].token, None).unwrap();
    let mut free = 1;
    loop {
        let got = take(&relay, 250);
        if got.is_empty() {
            break;
        }
        assert!(groups_of(&got).iter().all(|g| g == "free"), "{:?}", groups_of(&got));
        for j in &got {
            relay.ack(j.id, j.token, None).unwrap();
        }
        free += got.len();
    }
    assert_eq!(
        free, n,
        "every job of the free group leased while the other stayed at its limit"
    );
}
