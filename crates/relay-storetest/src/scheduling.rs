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

/// Jobs waiting for their time are SCHEDULED (a first run later) or
/// RETRYING (backing off after a failure), counted and listed apart from
/// the READY ones a lease takes now, until the writers promote them.
pub fn scheduled_and_retrying_are_told_apart_from_ready(new_db: &NewDb) {
    use relay::{JobFilter, JobState};
    let (relay, clock, _db) = open_clocked(new_db);
    let first = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let failing = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let later = NewJob::new("q", "k", Vec::new())
        .delay(Duration::from_secs(3600))
        .unique_key("later");
    let later = relay.submit(later).unwrap();
    let leased = relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap();
    let ids: Vec<JobId> = leased.iter().map(|l| l.id).collect();
    assert_eq!(ids, [first, failing], "the scheduled job is not leased before its time");
    let nacked = relay
        .nack(failing, leased[1].token, "boom", Some(Duration::from_secs(600)))
        .unwrap();
    assert_eq!(nacked.state, JobState::Retrying);
    relay.release(first, leased[0].token).unwrap();

    let counts = |relay: &relay::Relay| {
        let s = relay.stats().unwrap();
        let q = &s.queues["q"];
        let n = |st| q.counts.get(&st).copied().unwrap_or(0);
        (n(JobState::Ready), n(JobState::Scheduled), n(JobState::Retrying))
    };
    assert_eq!(counts(&relay), (1, 1, 1), "READY, SCHEDULED, RETRYING");
    let listed = |state| -> Vec<JobId> {
        let filter = JobFilter {
            state: Some(state),
            limit: 10,
            ..JobFilter::default()
        };
        relay.list(&filter).unwrap().iter().map(|j| j.id).collect()
    };
    assert_eq!(listed(JobState::Ready), [first]);
    assert_eq!(listed(JobState::Scheduled), [later]);
    assert_eq!(listed(JobState::Retrying), [failing]);
    // A SCHEDULED job holds its unique key.
    let again = NewJob::new("q", "k", Vec::new()).unique_key("later");
    assert_eq!(relay.submit(again).unwrap(), later);
    // What a lease takes now is what READY counts.
    let now = relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap();
    assert_eq!(now.iter().map(|l| l.id).collect::<Vec<_>>(), [first]);
    relay.ack(first, now[0].token, None).unwrap();
    assert_eq!(counts(&relay), (0, 1, 1));

    // Its time come, the RETRYING job is promoted to READY by the writers
    // by themselves (an idle writer's housekeeping), with no event.
    let events = relay.events(failing).unwrap().len();
    clock.advance(Duration::from_secs(600));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while relay.get(failing).unwrap().state() != JobState::Ready {
        assert!(std::time::Instant::now() < deadline, "never promoted");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(counts(&relay), (1, 1, 0));
    let job = relay.get(failing).unwrap();
    assert_eq!((job.state(), job.status.attempts), (JobState::Ready, 1));
    assert_eq!(
        relay.events(failing).unwrap().len(),
        events,
        "a promotion writes no event"
    );
    let age = relay.stats().unwrap().queues["q"].oldest_ready_age;
    assert_eq!(age, Some(Duration::ZERO), "waiting since it came due");

    // A SCHEDULED job can be cancelled like a READY one, and a due one is
    // leased whether or not it was promoted yet.
    relay.cancel(later).unwrap();
    assert_eq!(counts(&relay), (1, 0, 0));
    let soon = relay
        .submit(NewJob::new("q", "k", Vec::new()).delay(Duration::from_secs(5)))
        .unwrap();
    assert_eq!(relay.get(soon).unwrap().state(), JobState::Scheduled);
    clock.advance(Duration::from_secs(5));
    let got = relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap();
    let mut got: Vec<JobId> = got.iter().map(|l| l.id).collect();
    got.sort();
    assert_eq!(got, [failing, soon]);
}

/// A due job no writer has promoted yet (none ran since it came due: a
/// file only read, a server stopped) is counted READY by stats, as a lease
/// would take it; the writers' first batch promotes it.
pub fn stats_count_a_due_job_ready_before_any_writer_promotes_it(new_db: &NewDb) {
    use relay::JobState;
    let db = new_db();
    let (mut options, clock) = crate::clocked();
    // Idle writers never reap by themselves here: only a batch does.
    options.reap_interval = Duration::from_secs(365 * 24 * 3600);
    let relay = db.open(options).unwrap();
    let id = relay
        .submit(NewJob::new("q", "k", Vec::new()).delay(Duration::from_secs(60)))
        .unwrap();
    let counts = |relay: &relay::Relay| {
        let s = relay.stats().unwrap();
        let q = &s.queues["q"];
        let n = |st| q.counts.get(&st).copied().unwrap_or(0);
        let total = relay.queue_totals().unwrap().counts;
        let t = |st| total.get(&st).copied().unwrap_or(0);
        (
            (n(JobState::Ready), n(JobState::Scheduled)),
            (t(JobState::Ready), t(JobState::Scheduled)),
        )
    };
    assert_eq!(counts(&relay), ((0, 1), (0, 1)));
    clock.advance(Duration::from_secs(60));
    assert_eq!(relay.get(id).unwrap().state(), JobState::Scheduled, "not promoted yet");
    assert_eq!(counts(&relay), ((1, 0), (1, 0)), "counted READY all the same");
    // A claim's batch promotes it (and takes it).
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!(l.id, id);
    assert_eq!(counts(&relay), ((0, 0), (0, 0)));
}

/// A pass promotes as many due jobs as the store returns at once
/// (`relay_store::REAP_BATCH`); a backlog larger than that (many jobs
/// scheduled for one instant) is promoted pass after pass at once, not
/// one pass per reap interval.
pub fn a_backlog_of_due_jobs_is_promoted_pass_after_pass(new_db: &NewDb) {
    use relay::{JobFilter, JobState};
    let db = new_db();
    let (mut options, clock) = crate::clocked();
    // Idle writers never reap by themselves here: only what is asked.
    options.reap_interval = Duration::from_secs(365 * 24 * 3600);
    let relay = db.open(options).unwrap();
    // More than twice the 256 a pass reads (relay_store::REAP_BATCH).
    let n = 600;
    let jobs = (0..n)
        .map(|_| NewJob::new("q", "k", Vec::new()).delay(Duration::from_secs(60)))
        .collect();
    relay.submit_batch(jobs).unwrap();
    clock.advance(Duration::from_secs(60));
    relay.reap_expired().unwrap();
    let scheduled = || {
        let filter = JobFilter {
            state: Some(JobState::Scheduled),
            limit: 1000,
            ..JobFilter::default()
        };
        relay.list(&filter).unwrap().len()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while scheduled() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {n} still SCHEDULED after the first pass",
            scheduled()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = relay.stats().unwrap();
    assert_eq!(s.queues["q"].counts[&JobState::Ready], n);
}
