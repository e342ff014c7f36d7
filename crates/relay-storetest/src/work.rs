//! A worker's turn in one operation (`complete_and_lease`) and its
//! heartbeat (`extend_batch`): each item answered on its own, the
//! completions and the claim in one commit, a repeated call applying
//! nothing twice.

use crate::{open_clocked, NewDb};
use relay::{Clock, Completion, Error, JobId, JobState, LeaseRequest, LeaseToken, NewJob, QueueLimits, Relay};
use std::time::{Duration, Instant};

fn kinds(relay: &Relay, id: JobId) -> Vec<String> {
    relay.events(id).unwrap().into_iter().map(|e| e.kind).collect()
}

fn count(kinds: &[String], kind: &str) -> usize {
    kinds.iter().filter(|k| *k == kind).count()
}

pub fn complete_and_lease_answers_each_outcome_and_leases_in_one_commit(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let limits = QueueLimits {
        max_leased_per_group: None,
        max_leased: Some(4),
        rate: None,
        poison_after: None,
    };
    relay.set_queue_limits("q", limits).unwrap();
    for n in 0..10 {
        relay
            .submit(NewJob::new("q", "k", vec![b'0' + n]).max_attempts(3))
            .unwrap();
    }
    let l = relay.lease(LeaseRequest::new(["q"]).max(4)).unwrap();
    assert_eq!(l.len(), 4, "the queue's limit");
    let (ack, dead, stale, snooze) = (&l[0], &l[1], &l[2], &l[3]);
    let batch = vec![
        Completion::ack(ack.id, ack.token, Some(b"{\"ok\":1}".to_vec())),
        Completion::nack_permanent(dead.id, dead.token, "for good"),
        Completion::ack(stale.id, LeaseToken(stale.token.0 + 1), None),
        Completion::snooze(snooze.id, snooze.token, Duration::from_secs(60)),
        Completion::ack(JobId(9999), LeaseToken(1), None),
        Completion::ack(stale.id, stale.token, Some(vec![0; 2 << 20])),
    ];
    let before = relay.metrics();
    let worked = relay
        .complete_and_lease(
            batch.clone(),
            LeaseRequest::new(["q"]).max(10).wait(Duration::from_secs(30)),
        )
        .unwrap();
    assert_eq!(relay.metrics().commits - before.commits, 1, "one commit for both");
    let c = &worked.completions;
    assert_eq!(c.len(), 6);
    assert_eq!(c[0].as_ref().unwrap().state, JobState::Succeeded);
    assert_eq!(c[1].as_ref().unwrap().state, JobState::Dead);
    assert!(matches!(c[2], Err(Error::LeaseLost { .. })), "{:?}", c[2]);
    assert_eq!(c[3].as_ref().unwrap().state, JobState::Scheduled);
    assert!(matches!(c[4], Err(Error::NotFound { .. })), "{:?}", c[4]);
    assert!(matches!(c[5], Err(Error::InvalidInput(_))), "{:?}", c[5]);
    assert_eq!(
        worked.jobs.len(),
        3,
        "the claim saw the three slots the completions freed, and no more"
    );
    assert!(worked.jobs.iter().all(|j| j.id.0 > 4), "the snoozed job is not due");
    assert_eq!(
        relay.get(stale.id).unwrap().state(),
        JobState::Leased,
        "refused items change nothing"
    );
    assert_eq!(relay.get(ack.id).unwrap().result.as_deref(), Some(&b"{\"ok\":1}"[..]));

    // The same call again (its answer was lost): nothing applied twice.
    let again = relay
        .complete_and_lease(batch, LeaseRequest::new(["q"]).max(10))
        .unwrap();
    assert_eq!(again.completions[0].as_ref().unwrap().state, JobState::Succeeded);
    assert!(
        again.completions[1..4].iter().all(Result::is_err),
        "{:?}",
        again.completions
    );
    assert!(again.jobs.is_empty(), "the limit is reached");
    assert_eq!(count(&kinds(&relay, ack.id), "succeeded"), 1);
    assert_eq!(count(&kinds(&relay, dead.id), "failed"), 1);
    assert_eq!(
        relay.get(snooze.id).unwrap().status.attempts,
        0,
        "a snooze spends no attempt"
    );
}

pub fn complete_and_lease_releases_and_waits_only_without_outcomes(new_db: &NewDb) {
    let db = new_db();
    let options = relay::Options {
        poll_interval: Duration::from_secs(3600),
        ..relay::Options::default()
    };
    let relay = db.open(options).unwrap();
    relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    // With an outcome: answered once it is on disk, not after the wait.
    let t = Instant::now();
    let worked = relay
        .complete_and_lease(
            vec![Completion::release(l.id, l.token)],
            LeaseRequest::new(["empty"]).wait(Duration::from_secs(60)),
        )
        .unwrap();
    assert!(t.elapsed() < Duration::from_secs(30), "it waited: {:?}", t.elapsed());
    assert_eq!(worked.completions[0].as_ref().unwrap().state, JobState::Ready);
    assert!(worked.jobs.is_empty());
    let job = relay.get(l.id).unwrap();
    assert_eq!(
        (job.state(), job.status.attempts),
        (JobState::Ready, 0),
        "released untried"
    );
    // Without one: a long-poll (the poll an hour away), woken by a submit.
    let before = relay.metrics().operations;
    let r2 = relay.clone();
    let waiter = std::thread::spawn(move || {
        r2.complete_and_lease(Vec::new(), LeaseRequest::new(["later"]).wait(Duration::from_secs(60)))
    });
    while relay.metrics().operations == before {
        std::thread::yield_now(); // until its first claim found nothing
    }
    let id = relay.submit(NewJob::new("later", "k", Vec::new())).unwrap();
    let worked = waiter.join().unwrap().unwrap();
    assert_eq!(worked.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [id]);
    assert!(worked.completions.is_empty());
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "woken by the submit: {:?}",
        t.elapsed()
    );
}

pub fn extend_batch_answers_each_lease(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    for _ in 0..3 {
        relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    }
    let l = relay
        .lease(LeaseRequest::new(["q"]).max(3).lease_for(Duration::from_secs(10)))
        .unwrap();
    relay.cancel(l[1].id).unwrap();
    clock.advance(Duration::from_secs(5));
    let out = relay
        .extend_batch(vec![
            (l[0].id, l[0].token, Duration::from_secs(60)),
            (l[1].id, l[1].token, Duration::from_secs(60)),
            (l[2].id, LeaseToken(l[2].token.0 + 7), Duration::from_secs(60)),
            (JobId(9999), LeaseToken(1), Duration::from_secs(60)),
            (l[2].id, l[2].token, Duration::ZERO),
        ])
        .unwrap();
    assert_eq!(out[0].as_ref().unwrap(), &clock.now().plus(Duration::from_secs(60)));
    assert!(
        matches!(out[1], Err(Error::InvalidState { .. } | Error::LeaseLost { .. })),
        "{:?}",
        out[1]
    );
    assert!(matches!(out[2], Err(Error::LeaseLost { .. })), "{:?}", out[2]);
    assert!(matches!(out[3], Err(Error::NotFound { .. })), "{:?}", out[3]);
    assert!(matches!(out[4], Err(Error::InvalidInput(_))), "{:?}", out[4]);
    let kept = relay.get(l[0].id).unwrap();
    assert_eq!(
        kept.status.lease.map(|x| x.expires_at),
        Some(clock.now().plus(Duration::from_secs(60)))
    );
    let untouched = relay.get(l[2].id).unwrap();
    assert_eq!(
        untouched.status.lease.map(|x| x.expires_at),
        Some(l[2].expires_at),
        "a refused item extends nothing"
    );
    assert_eq!(relay.get(l[1].id).unwrap().state(), JobState::Cancelled);
}
