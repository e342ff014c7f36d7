//! Operations that share one batch see each other, in the order they were
//! sent, and one that fails leaves the others alone. The writer is held
//! while the operations are sent (async calls, each polled once, in order),
//! so they are planned and written as one batch.

use crate::{clocked, NewDb, TestDb};
use relay::ManualClock;
use relay::{AsyncRelay, Error, JobId, JobState, LeaseRequest, LeaseToken, NewJob, Relay};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

type Started<T> = Pin<Box<dyn Future<Output = T>>>;

/// Polls `f` once: far enough to send its operation to the held writer.
fn start<T: 'static>(f: impl Future<Output = T> + 'static) -> Started<T> {
    let mut f: Started<T> = Box::pin(f);
    let mut cx = Context::from_waker(Waker::noop());
    assert!(
        matches!(f.as_mut().poll(&mut cx), Poll::Pending),
        "an operation finished while the writer was held"
    );
    f
}

/// Runs `send` (which starts operations with [`start`]) while the writer is
/// held, then lets the writer go and waits for every answer.
fn one_batch<T>(relay: &Relay, send: impl FnOnce(&AsyncRelay) -> T) -> T {
    let hold = relay.hold_writer().expect("an open Relay has a writer");
    let started = send(&relay.to_async());
    drop(hold);
    started
}

/// Every operation since `before` went through one commit.
fn one_commit_since(relay: &Relay, before: &relay::Metrics) {
    let m = relay.metrics();
    assert_eq!(
        m.commits - before.commits,
        1,
        "the operations were not one batch: {m:?}"
    );
}

fn block_on<T>(f: Started<T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(f)
}

/// The id the next submit of this process will get: one after `last`
/// (checked by the caller against what the submit returns).
fn next_id(last: JobId) -> JobId {
    JobId(last.0 + 1)
}

/// A fresh database on a manual clock, with one writer: a held writer
/// then makes one batch of what is sent.
fn open_clocked(new_db: &NewDb) -> (Relay, Arc<ManualClock>, Box<dyn TestDb>) {
    let db = new_db();
    let (options, clock) = clocked();
    let relay = db.open_one_writer(options).unwrap();
    (relay, clock, db)
}

pub fn a_submit_its_cancel_and_a_claim_in_one_batch(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let first = relay.submit(NewJob::new("other", "k", Vec::new())).unwrap();
    let expected = next_id(first);
    let before = relay.metrics();
    let (submit, cancel, lease) = one_batch(&relay, |r| {
        let (a, b, c) = (r.clone(), r.clone(), r.clone());
        (
            start(async move { a.submit(NewJob::new("q", "k", b"x".to_vec())).await }),
            start(async move { b.cancel(expected).await }),
            start(async move { c.lease(LeaseRequest::new(["q"])).await }),
        )
    });
    assert_eq!(block_on(submit).unwrap(), expected, "ids are handed out in order");
    block_on(cancel).unwrap();
    let leased = block_on(lease).unwrap();
    one_commit_since(&relay, &before);
    assert!(
        leased.is_empty(),
        "the claim took a job cancelled before it: {leased:?}"
    );
    assert_eq!(relay.get(expected).unwrap().state(), JobState::Cancelled);
    let kinds: Vec<String> = relay.events(expected).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["submitted", "cancelled"]);
    // The other job was never touched.
    assert_eq!(relay.get(first).unwrap().state(), JobState::Ready);
}

pub fn a_submit_and_its_claim_in_one_batch(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let before = relay.metrics();
    let (submit, lease) = one_batch(&relay, |r| {
        let (a, b) = (r.clone(), r.clone());
        (
            start(async move { a.submit(NewJob::new("q", "k", b"payload".to_vec())).await }),
            start(async move { b.lease(LeaseRequest::new(["q"])).await }),
        )
    });
    let id = block_on(submit).unwrap();
    let leased = block_on(lease).unwrap();
    one_commit_since(&relay, &before);
    assert_eq!(
        leased.len(),
        1,
        "the claim missed a job submitted before it in its batch"
    );
    assert_eq!(leased[0].id, id);
    assert_eq!(leased[0].payload, b"payload");
    assert_eq!(leased[0].attempt, 1);
    // Written as the batch left it: leased, with both events, and the lease
    // works like any other.
    assert_eq!(relay.get(id).unwrap().state(), JobState::Leased);
    relay.ack(id, leased[0].token, None).unwrap();
    let kinds: Vec<String> = relay.events(id).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["submitted", "leased", "succeeded"]);
}

pub fn a_lease_and_its_ack_in_one_batch(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    // A job's first lease has token 1.
    let before = relay.metrics();
    let (lease, ack) = one_batch(&relay, |r| {
        let (a, b) = (r.clone(), r.clone());
        (
            start(async move { a.lease(LeaseRequest::new(["q"])).await }),
            start(async move { b.ack(id, LeaseToken(1), Some(b"done".to_vec())).await }),
        )
    });
    let leased = block_on(lease).unwrap();
    assert_eq!(leased.len(), 1);
    assert_eq!((leased[0].id, leased[0].token), (id, LeaseToken(1)));
    block_on(ack).unwrap();
    one_commit_since(&relay, &before);
    let job = relay.get(id).unwrap();
    assert_eq!(job.state(), JobState::Succeeded);
    assert_eq!(job.result.as_deref(), Some(&b"done"[..]));
    let seqs: Vec<i64> = relay.events(id).unwrap().into_iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
}

pub fn a_stale_ack_beside_valid_acks_fails_alone(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let ids: Vec<JobId> = (0..3)
        .map(|i| relay.submit(NewJob::new("q", "k", vec![i])).unwrap())
        .collect();
    let short = LeaseRequest::new(["q"]).max(1).lease_for(Duration::from_secs(10));
    let long = LeaseRequest::new(["q"]).max(2).lease_for(Duration::from_secs(300));
    let first = relay.lease(short.clone()).unwrap().remove(0);
    let others = relay.lease(long).unwrap();
    assert_eq!(others.len(), 2);
    // The first lease expires; the job is leased again under a new token.
    clock.advance(Duration::from_secs(11));
    let again = relay.lease(short).unwrap().remove(0);
    assert_eq!(again.id, first.id);
    assert!(again.token > first.token);
    let before = relay.metrics();
    let (stale, a, b, fresh) = one_batch(&relay, |r| {
        let (r1, r2, r3, r4) = (r.clone(), r.clone(), r.clone(), r.clone());
        let (o0, o1) = (others[0].clone(), others[1].clone());
        let (f, g) = (first.clone(), again.clone());
        (
            start(async move { r1.ack(f.id, f.token, None).await }),
            start(async move { r2.ack(o0.id, o0.token, None).await }),
            start(async move { r3.ack(o1.id, o1.token, None).await }),
            start(async move { r4.ack(g.id, g.token, None).await }),
        )
    });
    let e = block_on(stale).unwrap_err();
    assert!(matches!(e, Error::LeaseLost { id } if id == first.id), "{e:?}");
    block_on(a).unwrap();
    block_on(b).unwrap();
    block_on(fresh).unwrap();
    one_commit_since(&relay, &before);
    for id in ids {
        assert_eq!(relay.get(id).unwrap().state(), JobState::Succeeded);
    }
}

/// A batch whose operations all fail writes nothing, and the next batch
/// is unaffected.
pub fn a_batch_of_refused_operations_writes_nothing(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let events = relay.events(id).unwrap();
    let before = relay.metrics();
    let (ack, unknown, retry) = one_batch(&relay, |r| {
        let (a, b, c) = (r.clone(), r.clone(), r.clone());
        (
            start(async move { a.ack(id, LeaseToken(9), None).await }),
            start(async move { b.cancel(JobId(id.0 + 1000)).await }),
            start(async move { c.retry(id).await }),
        )
    });
    assert!(block_on(ack).is_err());
    assert!(matches!(block_on(unknown), Err(Error::NotFound { .. })));
    assert!(matches!(block_on(retry), Err(Error::InvalidState { .. })));
    one_commit_since(&relay, &before);
    assert_eq!(relay.get(id).unwrap().state(), JobState::Ready);
    assert_eq!(relay.events(id).unwrap(), events);
    assert_eq!(relay.lease(LeaseRequest::new(["q"])).unwrap().len(), 1);
}

/// `reap_expired` in a batch after an operation that changed one of the
/// expired leases: it reclaims the others and passes over that one, and an
/// operation after it in the batch is written. Regression: the reap failed
/// on the changed job (`InvalidState`), and the plan then lost the write
/// of the operation after it.
pub fn a_reap_beside_operations_on_its_jobs_in_one_batch(new_db: &NewDb) {
    let db = new_db();
    let (mut options, clock) = clocked();
    // Leases are reclaimed only by claims and by the explicit reap below.
    options.reap_interval = Duration::from_secs(365 * 24 * 3600);
    let relay = db.open_one_writer(options).unwrap();
    let a = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let b = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let req = LeaseRequest::new(["q"]).max(1).lease_for(Duration::from_secs(1));
    let first = relay.lease(req.clone()).unwrap().remove(0);
    clock.advance(Duration::from_millis(10));
    let second = relay.lease(req).unwrap().remove(0);
    assert_eq!((first.id, second.id), (a, b));
    clock.advance(Duration::from_secs(5)); // both leases expired; a's first
    let before = relay.metrics();
    let (cancel_b, reap, cancel_a) = one_batch(&relay, |r| {
        let (r1, r2, r3) = (r.clone(), r.clone(), r.clone());
        (
            start(async move { r1.cancel(b).await }),
            start(async move { r2.reap_expired().await }),
            start(async move { r3.cancel(a).await }),
        )
    });
    block_on(cancel_b).unwrap();
    assert_eq!(block_on(reap).unwrap(), 1, "the reap reclaims a, and passes over b");
    block_on(cancel_a).unwrap();
    one_commit_since(&relay, &before);
    assert_eq!(relay.get(a).unwrap().state(), JobState::Cancelled);
    assert_eq!(relay.get(b).unwrap().state(), JobState::Cancelled);
    let kinds: Vec<String> = relay.events(a).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["submitted", "leased", "expired", "cancelled"]);
}

/// A pause holds back a claim later in its batch; a resume frees one.
pub fn a_pause_or_resume_and_a_claim_in_one_batch(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let before = relay.metrics();
    let (pause, lease) = one_batch(&relay, |r| {
        let (a, b) = (r.clone(), r.clone());
        (
            start(async move { a.pause("q").await }),
            start(async move { b.lease(LeaseRequest::new(["q"])).await }),
        )
    });
    block_on(pause).unwrap();
    assert!(
        block_on(lease).unwrap().is_empty(),
        "claimed from a queue paused before it"
    );
    one_commit_since(&relay, &before);
    let before = relay.metrics();
    let (resume, lease, pause_again) = one_batch(&relay, |r| {
        let (a, b, c) = (r.clone(), r.clone(), r.clone());
        (
            start(async move { a.resume("q").await }),
            start(async move { b.lease(LeaseRequest::new(["q"])).await }),
            start(async move { c.pause("q").await }),
        )
    });
    block_on(resume).unwrap();
    assert_eq!(block_on(lease).unwrap().remove(0).id, id);
    block_on(pause_again).unwrap();
    one_commit_since(&relay, &before);
    assert!(
        relay.stats().unwrap().queues["q"].paused,
        "the batch's last word stands"
    );
    assert_eq!(relay.get(id).unwrap().state(), JobState::Leased);
}

/// Claims of one batch count against the queue's limit together.
pub fn claims_in_one_batch_share_the_queue_limit(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    relay
        .set_queue_limits(
            "q",
            relay::QueueLimits {
                max_leased_per_group: None,
                max_leased: Some(3),
                rate: None,
                poison_after: None,
            },
        )
        .unwrap();
    for i in 0..8u8 {
        relay.submit(NewJob::new("q", "k", vec![i])).unwrap();
    }
    let before = relay.metrics();
    let leases = one_batch(&relay, |r| {
        (0..3)
            .map(|_| {
                let r = r.clone();
                start(async move { r.lease(LeaseRequest::new(["q"]).max(2)).await })
            })
            .collect::<Vec<_>>()
    });
    let got: usize = leases.into_iter().map(|l| block_on(l).unwrap().len()).sum();
    one_commit_since(&relay, &before);
    assert_eq!(got, 3, "three claims of 2 in one batch under max_leased 3");
}

/// A schedule added and removed in one batch writes nothing, and fails
/// nothing (the removal found no stored row to delete).
pub fn a_schedule_added_and_removed_in_one_batch(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let before = relay.metrics();
    let (add, remove, lease) = one_batch(&relay, |r| {
        let (a, b, c) = (r.clone(), r.clone(), r.clone());
        (
            start(async move {
                a.add_schedule(relay::NewSchedule::every(
                    "brief",
                    Duration::from_secs(60),
                    NewJob::new("q", "k", Vec::new()),
                ))
                .await
            }),
            start(async move { b.remove_schedule("brief").await }),
            start(async move { c.lease(LeaseRequest::new(["q"])).await }),
        )
    });
    block_on(add).unwrap();
    block_on(remove).unwrap();
    assert_eq!(
        block_on(lease).unwrap().remove(0).id,
        id,
        "the batch's other work stands"
    );
    one_commit_since(&relay, &before);
    assert!(relay.schedules().unwrap().is_empty());
}

/// A limit set partway through a batch counts the leases the batch made
/// before it.
pub fn a_limit_set_partway_through_a_batch_counts_its_earlier_leases(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    for i in 0..8u8 {
        relay.submit(NewJob::new("q", "k", vec![i])).unwrap();
    }
    let before = relay.metrics();
    let (first, limit, second) = one_batch(&relay, |r| {
        let (a, b, c) = (r.clone(), r.clone(), r.clone());
        (
            start(async move { a.lease(LeaseRequest::new(["q"]).max(3)).await }),
            start(async move {
                b.set_queue_limits(
                    "q",
                    relay::QueueLimits {
                        max_leased_per_group: None,
                        max_leased: Some(4),
                        rate: None,
                        poison_after: None,
                    },
                )
                .await
            }),
            start(async move { c.lease(LeaseRequest::new(["q"]).max(5)).await }),
        )
    });
    assert_eq!(block_on(first).unwrap().len(), 3);
    block_on(limit).unwrap();
    assert_eq!(
        block_on(second).unwrap().len(),
        1,
        "3 leased before the limit of 4: one more"
    );
    one_commit_since(&relay, &before);
}

/// A `max_leased_per_group` set partway through a batch counts the group's
/// leases committed before the batch and those the batch took before it.
pub fn a_group_limit_set_partway_through_a_batch_counts_earlier_leases(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    for i in 0..8u8 {
        relay.submit(NewJob::new("q", "k", vec![i]).group("acme")).unwrap();
    }
    // One lease of the group committed before the batch.
    assert_eq!(relay.lease(LeaseRequest::new(["q"])).unwrap().len(), 1);
    let before = relay.metrics();
    let (first, limit, second) = one_batch(&relay, |r| {
        let (a, b, c) = (r.clone(), r.clone(), r.clone());
        (
            start(async move { a.lease(LeaseRequest::new(["q"]).max(2)).await }),
            start(async move {
                b.set_queue_limits(
                    "q",
                    relay::QueueLimits {
                        max_leased_per_group: Some(4),
                        ..relay::QueueLimits::default()
                    },
                )
                .await
            }),
            start(async move { c.lease(LeaseRequest::new(["q"]).max(5)).await }),
        )
    });
    assert_eq!(block_on(first).unwrap().len(), 2);
    block_on(limit).unwrap();
    assert_eq!(
        block_on(second).unwrap().len(),
        1,
        "1 leased before the batch and 2 in it, under a limit of 4: one more"
    );
    one_commit_since(&relay, &before);
}

/// A child submitted, and its parent acked, in one batch; beside them a
/// submit naming an unknown job fails alone.
pub fn a_dependent_submitted_and_its_parent_acked_in_one_batch(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let parent = relay.submit(NewJob::new("p", "k", Vec::new())).unwrap();
    let l = relay.lease(LeaseRequest::new(["p"])).unwrap().remove(0);
    let before = relay.metrics();
    let (child, bad, ack, claim) = one_batch(&relay, |r| {
        let (a, b, c, d) = (r.clone(), r.clone(), r.clone(), r.clone());
        (
            start(async move { a.submit(NewJob::new("q", "k", Vec::new()).depends_on([parent])).await }),
            start(async move {
                b.submit(NewJob::new("q", "k", Vec::new()).depends_on([JobId(parent.0 + 100)]))
                    .await
            }),
            start(async move { c.ack(parent, l.token, None).await }),
            start(async move { d.lease(LeaseRequest::new(["q"])).await }),
        )
    });
    let child = block_on(child).unwrap();
    assert!(matches!(block_on(bad), Err(Error::DependencyNotFound { .. })));
    block_on(ack).unwrap();
    let claimed = block_on(claim).unwrap();
    one_commit_since(&relay, &before);
    // The ack saw the edge its batch had just added, and readied the child
    // for the claim after it.
    assert_eq!(claimed.iter().map(|l| l.id).collect::<Vec<_>>(), [child]);
    let kinds: Vec<String> = relay.events(child).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["submitted", "unblocked", "leased"]);
    let q = &relay.stats().unwrap().queues["q"].counts;
    assert_eq!(q.values().sum::<u64>(), 1, "the bad submit wrote nothing: {q:?}");
}

/// A pass of the prune asked for in a batch with other operations runs
/// before they are planned: a retry of a DEAD job past its retention, sent
/// first, finds it pruned, and nothing else of the batch fails. (Run while
/// the batch was planned, the pass deleted a row the retry had read, and
/// the batch's write found it gone and failed whole.)
pub fn a_prune_and_a_retry_of_what_it_prunes_in_one_batch(new_db: &NewDb) {
    let db = new_db();
    let (mut options, clock) = clocked();
    options.prune = false; // only the pass asked for
    let relay = db.open_one_writer(options).unwrap();
    let dead = relay.submit(NewJob::new("q", "k", Vec::new()).max_attempts(1)).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    relay.nack_permanent(dead, l.token, "bad").unwrap();
    let other = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    clock.advance(Duration::from_secs(8 * 86_400));
    let (retry, prune, submit) = one_batch(&relay, |r| {
        let (a, b, c) = (r.clone(), r.clone(), r.clone());
        (
            start(async move { a.retry(dead).await }),
            start(async move { b.prune_from(JobId(0)).await }),
            start(async move { c.submit(NewJob::new("q", "k", Vec::new())).await }),
        )
    });
    let pruned = block_on(prune).unwrap();
    assert_eq!((pruned.deleted, pruned.next), (1, None));
    assert!(
        matches!(block_on(retry), Err(Error::NotFound { .. })),
        "the retry finds the job pruned"
    );
    let fresh = block_on(submit).unwrap();
    assert!(matches!(relay.get(dead), Err(Error::NotFound { .. })));
    assert_eq!(relay.get(other).unwrap().state(), JobState::Ready);
    assert_eq!(relay.get(fresh).unwrap().state(), JobState::Ready);
}

/// Issue 40: a job's wait and an emit of its key in one batch: the emit
/// sees the waiter the batch wrote, and wakes it (no lost wake-up), in the
/// same commit.
pub fn a_wait_and_an_emit_of_its_key_in_one_batch(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    let until = relay::Clock::now(&*clock).plus(Duration::from_secs(3600));
    let before = relay.metrics();
    let (wait, emit) = one_batch(&relay, |r| {
        let (a, b) = (r.clone(), r.clone());
        (
            start(async move { a.wait(id, l.token, "paid", "paid:9", until).await }),
            start(async move { b.emit("paid:9", b"42".to_vec()).await }),
        )
    });
    assert_eq!(block_on(wait).unwrap().state, JobState::Waiting);
    let e = block_on(emit).unwrap();
    assert_eq!((e.first, e.woken), (true, 1));
    one_commit_since(&relay, &before);
    let job = relay.get(id).unwrap();
    assert_eq!(job.state(), JobState::Ready);
    assert_eq!(
        relay::Waited::of(&job.step("paid").unwrap().output),
        Some(relay::Waited::Event(b"42".to_vec()))
    );
}
