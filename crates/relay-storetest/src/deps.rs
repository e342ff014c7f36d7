//! Job dependencies: a job that waits (WAITING) for others to succeed.

use crate::{open_clocked, NewDb};
use relay::{Completion, DependencyFailure, Error, JobId, JobState, LeaseRequest, NewJob, Relay};

fn job() -> NewJob {
    NewJob::new("q", "k", Vec::new())
}

fn state(relay: &Relay, id: JobId) -> JobState {
    relay.get(id).unwrap().state()
}

/// Leases exactly `id` (the only due job of "q") and acks it.
fn run(relay: &Relay, id: JobId) {
    let got = relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap();
    let ids: Vec<JobId> = got.iter().map(|l| l.id).collect();
    assert_eq!(ids, [id], "the one due job");
    relay.ack(id, got[0].token, None).unwrap();
}

fn kinds(relay: &Relay, id: JobId) -> Vec<String> {
    relay.events(id).unwrap().into_iter().map(|e| e.kind).collect()
}

pub fn a_chain_runs_one_link_at_a_time(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let a = relay.submit(job()).unwrap();
    let b = relay.submit(job().depends_on([a])).unwrap();
    let c = relay.submit(job().depends_on([b, b])).unwrap();
    assert_eq!(state(&relay, b), JobState::Waiting);
    assert_eq!(relay.get(c).unwrap().status.waiting_on, 1, "a repeated id counts once");
    let counts = &relay.stats().unwrap().queues["q"].counts;
    assert_eq!((counts[&JobState::Waiting], counts[&JobState::Ready]), (2, 1));
    // A WAITING job is never leased, and lease calls on it say its state.
    let l = relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap();
    assert_eq!(l.iter().map(|l| l.id).collect::<Vec<_>>(), [a]);
    assert!(matches!(
        relay.ack(b, l[0].token, None),
        Err(Error::InvalidState {
            state: JobState::Waiting,
            ..
        })
    ));
    relay.ack(a, l[0].token, None).unwrap();
    assert_eq!(state(&relay, b), JobState::Ready);
    assert_eq!(state(&relay, c), JobState::Waiting);
    let unblocked = relay.events(b).unwrap().pop().unwrap();
    assert_eq!(
        (unblocked.kind.as_str(), unblocked.data["last"].as_i64()),
        ("unblocked", Some(a.0))
    );
    let submitted = &relay.events(c).unwrap()[0];
    assert_eq!(submitted.data["depends_on"], serde_json::json!([b.0]));
    run(&relay, b);
    run(&relay, c);
    assert_eq!(kinds(&relay, c), ["submitted", "unblocked", "leased", "succeeded"]);
}

/// A thousand links: each ack readies exactly the next job.
pub fn a_chain_of_a_thousand(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let mut ids = vec![relay.submit(job()).unwrap()];
    for _ in 1..1000 {
        let prev = *ids.last().unwrap();
        ids.push(relay.submit(job().depends_on([prev])).unwrap());
    }
    assert_eq!(relay.stats().unwrap().queues["q"].counts[&JobState::Waiting], 999);
    for id in &ids {
        run(&relay, *id);
    }
    assert_eq!(relay.stats().unwrap().queues["q"].counts[&JobState::Succeeded], 1000);
}

/// Ten thousand parents onto one child: it waits for the last of them.
pub fn a_fan_in_of_ten_thousand(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let mut parents = Vec::new();
    for _ in 0..10 {
        parents.extend(
            relay
                .submit_batch((0..1000).map(|_| NewJob::new("p", "k", Vec::new())).collect())
                .unwrap(),
        );
    }
    let child = relay.submit(job().depends_on(parents.iter().copied())).unwrap();
    assert_eq!(relay.get(child).unwrap().status.waiting_on, 10_000);
    let mut done = 0;
    loop {
        let got = relay.lease(LeaseRequest::new(["p"]).max(100)).unwrap();
        if got.is_empty() {
            break;
        }
        let acks = got.iter().map(|l| Completion::ack(l.id, l.token, None)).collect();
        for r in relay.complete_batch(acks).unwrap() {
            r.unwrap();
        }
        done += got.len();
        if done == 9_900 {
            let c = relay.get(child).unwrap();
            assert_eq!((c.state(), c.status.waiting_on), (JobState::Waiting, 100));
        }
    }
    assert_eq!(done, 10_000);
    let c = relay.get(child).unwrap();
    assert_eq!((c.state(), c.status.waiting_on), (JobState::Ready, 0));
    // One event for the whole wait, not one per parent.
    assert_eq!(kinds(&relay, child), ["submitted", "unblocked"]);
    run(&relay, child);
}

pub fn a_failed_dependency_cancels_its_dependents_in_turn(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let a = relay.submit(job().max_attempts(1)).unwrap();
    let b = relay.submit(job().depends_on([a])).unwrap();
    let c = relay.submit(job().depends_on([b])).unwrap();
    let anyway = relay
        .submit(job().depends_on([a]).on_dependency_failure(DependencyFailure::Run))
        .unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    relay.nack(a, l.token, "boom", None).unwrap();
    assert_eq!(state(&relay, a), JobState::Dead);
    assert_eq!(state(&relay, b), JobState::Cancelled);
    assert_eq!(
        state(&relay, c),
        JobState::Cancelled,
        "the cancel reaches the dependents of dependents"
    );
    assert_eq!(state(&relay, anyway), JobState::Ready, "asked to run anyway");
    let e = relay.events(b).unwrap().pop().unwrap();
    assert_eq!(e.kind, "cancelled");
    assert_eq!(e.data["reason"], format!("job {a} it depends on ended DEAD"));
    let e = relay.events(c).unwrap().pop().unwrap();
    assert_eq!(e.data["reason"], format!("job {b} it depends on ended CANCELLED"));
    // A cancel by a user, and a delete of a job that never finished, do the same.
    let p = relay.submit(job()).unwrap();
    let q = relay.submit(job().depends_on([p])).unwrap();
    relay.cancel(p).unwrap();
    assert_eq!(state(&relay, q), JobState::Cancelled);
    let p = relay.submit(job()).unwrap();
    let q = relay.submit(job().depends_on([p])).unwrap();
    relay.delete(p).unwrap();
    assert_eq!(state(&relay, q), JobState::Cancelled);
    assert_eq!(
        relay.events(q).unwrap().pop().unwrap().data["reason"],
        format!("job {p} it depends on ended DELETED")
    );
    // A cancelled dependent can be retried by hand: it runs, its wait over.
    relay.retry(q).unwrap();
    assert_eq!(state(&relay, q), JobState::Ready);
}

pub fn dependencies_finished_before_the_submit(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let ok = relay.submit(job()).unwrap();
    run(&relay, ok);
    let dead = relay.submit(job()).unwrap();
    relay.cancel(dead).unwrap();
    let open = relay.submit(NewJob::new("other", "k", Vec::new())).unwrap();
    // Succeeded already: nothing to wait for.
    let j = relay.submit(job().depends_on([ok])).unwrap();
    assert_eq!(state(&relay, j), JobState::Ready);
    run(&relay, j);
    // One of them failed already: cancelled at once, as if it failed a moment later.
    let j = relay.submit(job().depends_on([ok, dead, open])).unwrap();
    assert_eq!(state(&relay, j), JobState::Cancelled);
    assert_eq!(kinds(&relay, j), ["submitted", "cancelled"]);
    // Unless it runs anyway: then it waits for the unfinished one only.
    let j = relay
        .submit(
            job()
                .depends_on([ok, dead, open])
                .on_dependency_failure(DependencyFailure::Run),
        )
        .unwrap();
    let got = relay.get(j).unwrap();
    assert_eq!((got.state(), got.status.waiting_on), (JobState::Waiting, 1));
    let l = relay.lease(LeaseRequest::new(["other"])).unwrap().remove(0);
    relay.ack(open, l.token, None).unwrap();
    assert_eq!(state(&relay, j), JobState::Ready);
}

pub fn a_waiting_job_keeps_its_delay_key_and_can_be_cancelled(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let p = relay.submit(job()).unwrap();
    let later = relay
        .submit(
            job()
                .depends_on([p])
                .delay(std::time::Duration::from_secs(60))
                .unique_key("k1"),
        )
        .unwrap();
    // A WAITING job holds its unique key.
    assert_eq!(relay.submit(job().unique_key("k1")).unwrap(), later);
    run(&relay, p);
    let j = relay.get(later).unwrap();
    assert_eq!(j.state(), JobState::Scheduled);
    assert_eq!(
        j.status.ready_at,
        relay
            .get(later)
            .unwrap()
            .created_at
            .plus(std::time::Duration::from_secs(60))
    );
    assert!(
        relay.lease(LeaseRequest::new(["q"])).unwrap().is_empty(),
        "its own delay still holds"
    );
    clock.advance(std::time::Duration::from_secs(60));
    assert_eq!(relay.lease(LeaseRequest::new(["q"])).unwrap()[0].id, later);
    // Cancelled while waiting: its parent finishing later changes nothing.
    let p = relay.submit(job()).unwrap();
    let w = relay.submit(job().depends_on([p])).unwrap();
    relay.cancel(w).unwrap();
    run(&relay, p);
    assert_eq!(state(&relay, w), JobState::Cancelled);
    assert_eq!(kinds(&relay, w), ["submitted", "cancelled"]);
}

pub fn bad_dependencies_are_refused_and_change_nothing(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let p = relay.submit(job()).unwrap();
    let field = |r: relay::Result<JobId>| match r {
        Err(Error::InvalidInput(e)) => (e.field, e.reason),
        other => panic!("expected InvalidInput, got {other:?}"),
    };
    let unknown = |r: relay::Result<JobId>| match r {
        Err(Error::DependencyNotFound { id }) => id,
        other => panic!("expected DependencyNotFound, got {other:?}"),
    };
    let missing = JobId(p.0 + 1000);
    assert_eq!(unknown(relay.submit(job().depends_on([missing]))), missing);
    // A job cannot wait for itself (nor form any cycle): its id does not
    // exist when it names its dependencies.
    let own = JobId(p.0 + 1);
    assert_eq!(unknown(relay.submit(job().depends_on([own]))), own);
    // Every id is checked, even after one that has already failed.
    let dead = relay.submit(job()).unwrap();
    relay.cancel(dead).unwrap();
    assert_eq!(unknown(relay.submit(job().depends_on([dead, missing]))), missing);
    let (f, _) = field(relay.submit(job().depends_on([JobId(-3)])));
    assert_eq!(f, "depends_on");
    let many = (1..=10_001).map(JobId);
    let (f, reason) = field(relay.submit(job().depends_on(many)));
    assert_eq!(f, "depends_on");
    assert!(reason.contains("10000"), "{reason}");
    // A batch with a bad one: nothing of it is written.
    assert!(relay
        .submit_batch(vec![job().depends_on([p]), job().depends_on([JobId(p.0 + 1000)])])
        .is_err());
    let counts = &relay.stats().unwrap().queues["q"].counts;
    assert_eq!(counts.values().sum::<u64>(), 2, "only the first two jobs: {counts:?}");
    assert_eq!(kinds(&relay, p), ["submitted"]);
}

/// A job that finishes, is retried and finishes again tells the jobs
/// waiting for it once: they do not count it twice.
pub fn a_parent_retried_and_finished_again_counts_once(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let p1 = relay.submit(job()).unwrap();
    let p2 = relay.submit(NewJob::new("other", "k", Vec::new())).unwrap();
    let c = relay
        .submit(job().depends_on([p1, p2]).on_dependency_failure(DependencyFailure::Run))
        .unwrap();
    relay.cancel(p1).unwrap();
    assert_eq!(relay.get(c).unwrap().status.waiting_on, 1);
    relay.retry(p1).unwrap();
    run(&relay, p1);
    let got = relay.get(c).unwrap();
    assert_eq!(
        (got.state(), got.status.waiting_on),
        (JobState::Waiting, 1),
        "still waiting for p2 after p1 ended twice"
    );
    let l = relay.lease(LeaseRequest::new(["other"])).unwrap().remove(0);
    relay.ack(p2, l.token, None).unwrap();
    assert_eq!(state(&relay, c), JobState::Ready);
    // A job submitted after its dependency was retried waits for its new end.
    let d = relay.submit(job().depends_on([c])).unwrap();
    run(&relay, c);
    assert_eq!(state(&relay, d), JobState::Ready);
}
