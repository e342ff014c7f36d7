//! Retries: back-off, dead jobs, delays.

use crate::open_clocked;
use crate::NewDb;
use relay::{Clock, JobState, LeaseRequest, NewJob, RetryPolicy};
use std::time::Duration;

pub fn dead_after_max_attempts_with_every_error(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new()).max_attempts(3)).unwrap();
    for attempt in 1..=3 {
        clock.advance(Duration::from_secs(3600));
        let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
        assert_eq!(l.attempt, attempt);
        let status = relay.nack(id, l.token, &format!("error {attempt}"), None).unwrap();
        let want = if attempt < 3 {
            JobState::Retrying
        } else {
            JobState::Dead
        };
        assert_eq!(status.state, want);
    }
    let job = relay.get(id).unwrap();
    assert_eq!(
        (job.state(), job.status.last_error.as_deref()),
        (JobState::Dead, Some("error 3"))
    );
    clock.advance(Duration::from_secs(3600));
    assert!(
        relay.lease(LeaseRequest::new(["q"])).unwrap().is_empty(),
        "dead jobs are not leased"
    );
    let errors: Vec<String> = relay
        .events(id)
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "failed")
        .map(|e| e.data["error"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(errors, ["error 1", "error 2", "error 3"]);
}

pub fn backoff_grows_and_respects_cap(new_db: &NewDb) {
    let db = new_db();
    let (mut options, clock) = crate::clocked();
    let cap = Duration::from_secs(30);
    options.retry = RetryPolicy {
        base: Duration::from_secs(1),
        cap,
        jitter: 0.5,
    };
    let relay = db.open(options).unwrap();
    let id = relay
        .submit(NewJob::new("q", "k", Vec::new()).max_attempts(12))
        .unwrap();
    let mut delays = Vec::new();
    for _ in 0..11 {
        let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
        let status = relay.nack(id, l.token, "again", None).unwrap();
        let delay = status.ready_at.since(clock.now());
        delays.push(delay);
        // Not leasable a moment before it is due.
        clock.advance(delay.saturating_sub(Duration::from_millis(1)));
        if !delay.is_zero() {
            assert!(
                relay.lease(LeaseRequest::new(["q"])).unwrap().is_empty(),
                "leased before its back-off"
            );
        }
        clock.advance(Duration::from_millis(1));
    }
    assert!(
        delays[0] >= Duration::from_millis(500) && delays[0] <= Duration::from_secs(1),
        "{delays:?}"
    );
    for w in delays.windows(2) {
        assert!(
            w[1] + Duration::from_millis(1) >= w[0] || w[1] >= cap / 2,
            "shrank: {delays:?}"
        );
    }
    assert!(delays.iter().all(|d| *d <= cap), "over the cap: {delays:?}");
    assert!(
        delays.last().unwrap() >= &(cap / 2),
        "reaches the cap region: {delays:?}"
    );
}

pub fn delayed_jobs_are_not_leased_early(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let later = relay
        .submit(NewJob::new("q", "k", Vec::new()).delay(Duration::from_secs(10)))
        .unwrap();
    let at = clock.now().plus(Duration::from_secs(20));
    let at_job = relay.submit(NewJob::new("q", "k", Vec::new()).run_at(at)).unwrap();
    assert!(relay.lease(LeaseRequest::new(["q"])).unwrap().is_empty());
    clock.advance(Duration::from_millis(9_999));
    assert!(relay.lease(LeaseRequest::new(["q"])).unwrap().is_empty());
    clock.advance(Duration::from_millis(1));
    assert_eq!(
        relay
            .lease(LeaseRequest::new(["q"]).max(5))
            .unwrap()
            .iter()
            .map(|l| l.id)
            .collect::<Vec<_>>(),
        [later]
    );
    clock.advance(Duration::from_secs(10));
    assert_eq!(relay.lease(LeaseRequest::new(["q"])).unwrap()[0].id, at_job);
}

pub fn permanent_failure_dies_at_once(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let id = relay
        .submit(NewJob::new("q", "k", Vec::new()).max_attempts(20))
        .unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    let s = relay.nack_permanent(id, l.token, "no handler for kind k").unwrap();
    assert_eq!((s.state, s.attempts), (JobState::Dead, 1));
}

/// A job whose lease expires 3 times (`Options::poison_after`) is DEAD with
/// attempts left: a poison pill, told apart from a job whose handler
/// reports errors. Each expiry is in its log with the worker that held it;
/// a retry starts the count again; nacks and a user's events named like
/// the engine's do not count.
pub fn a_job_whose_lease_keeps_expiring_is_dead_as_a_poison_pill(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let id = relay
        .submit(NewJob::new("q", "k", Vec::new()).max_attempts(10))
        .unwrap();
    let lease = |worker: &str| {
        let l = relay
            .lease(
                LeaseRequest::new(["q"])
                    .worker(worker)
                    .lease_for(Duration::from_secs(5)),
            )
            .unwrap();
        assert_eq!(l.len(), 1, "{worker} leases it");
        l[0].token
    };
    // Reclaimed now, or already by the engine's own reaper.
    let expire = || {
        clock.advance(Duration::from_secs(6));
        relay.reap_expired().unwrap();
    };
    // A nack is a failure the handler reported: not an expiry.
    let t = lease("w0");
    relay.nack(id, t, "handled", Some(Duration::ZERO)).unwrap();
    for n in 1..=2 {
        lease(&format!("w{n}"));
        expire();
        assert_eq!(relay.get(id).unwrap().state(), JobState::Ready, "after {n} expiries");
    }
    // A user's events named like the engine's count nothing.
    relay
        .append_event(id, "expired", &serde_json::json!({"why": "mine"}))
        .unwrap();
    relay.append_event(id, "retried", &serde_json::json!({})).unwrap();
    lease("w3");
    expire();
    let why = "its lease expired 3 times: it may be crashing its worker";
    let job = relay.get(id).unwrap();
    assert_eq!(
        (job.state(), job.status.attempts, job.status.last_error.as_deref()),
        (JobState::Dead, 4, Some(why)),
        "DEAD with 6 attempts left"
    );
    let events = relay.events(id).unwrap();
    let seen: Vec<(Option<&str>, Option<u64>)> = events
        .iter()
        .filter(|e| e.kind == "expired" && e.data["why"] != "mine")
        .map(|e| (e.data["worker"].as_str(), e.data["expiries"].as_u64()))
        .collect();
    assert_eq!(
        seen,
        [(Some("w1"), Some(1)), (Some("w2"), Some(2)), (Some("w3"), Some(3))]
    );
    let last = events.last().unwrap();
    assert_eq!(
        (last.data["dead"].as_bool(), last.data["reason"].as_str()),
        (Some(true), Some(why))
    );
    // Dead groups (the dashboard's dead page) hold poison pills on their
    // own, apart from jobs whose attempts ran out.
    let other = relay.submit(NewJob::new("q", "k", Vec::new()).max_attempts(1)).unwrap();
    lease("w9");
    expire();
    assert_eq!(relay.get(other).unwrap().state(), JobState::Dead);
    let groups: Vec<(String, u64)> = relay
        .dead_groups(10)
        .unwrap()
        .into_iter()
        .map(|g| (g.error, g.count))
        .collect();
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert!(groups.contains(&(why.to_owned(), 1)), "{groups:?}");
    assert!(groups.contains(&("lease expired".to_owned(), 1)), "{groups:?}");
    // Retried: the count starts again.
    relay.retry(id).unwrap();
    lease("w4");
    expire();
    assert_eq!(
        relay.get(id).unwrap().state(),
        JobState::Ready,
        "one expiry since the retry"
    );
}

/// A queue's own `poison_after` wins over the engine's: 1 kills at the
/// first expiry, 0 never by expiries alone (attempts still run out); the
/// setting is stored, read back by the stats and survives a reopen.
pub fn a_queues_own_poison_after_wins(new_db: &NewDb) {
    let (relay, clock, db) = open_clocked(new_db);
    let set = |queue: &str, n| {
        let limits = relay::QueueLimits {
            poison_after: Some(n),
            ..Default::default()
        };
        relay.set_queue_limits(queue, limits).unwrap();
    };
    set("strict", 1);
    set("tolerant", 0);
    let strict = relay.submit(NewJob::new("strict", "k", Vec::new())).unwrap();
    let tolerant = relay
        .submit(NewJob::new("tolerant", "k", Vec::new()).max_attempts(5))
        .unwrap();
    let mut died = Vec::new();
    for round in 1..=5 {
        for q in ["strict", "tolerant"] {
            relay
                .lease(LeaseRequest::new([q]).lease_for(Duration::from_secs(5)))
                .unwrap();
        }
        clock.advance(Duration::from_secs(6));
        relay.reap_expired().unwrap();
        for (name, id) in [("strict", strict), ("tolerant", tolerant)] {
            if relay.get(id).unwrap().state() == JobState::Dead && !died.iter().any(|(n, _)| *n == name) {
                died.push((name, round));
            }
        }
    }
    assert_eq!(died, [("strict", 1), ("tolerant", 5)]);
    assert_eq!(
        relay.get(strict).unwrap().status.last_error.as_deref(),
        Some("its lease expired 1 time: it may be crashing its worker")
    );
    assert_eq!(
        relay.get(tolerant).unwrap().status.last_error.as_deref(),
        Some("lease expired"),
        "its attempts ran out"
    );
    drop(relay);
    let relay = db.open(crate::clocked().0).unwrap();
    let stats = relay.stats().unwrap();
    assert_eq!(
        (
            stats.queues["strict"].limits.poison_after,
            stats.queues["tolerant"].limits.poison_after
        ),
        (Some(1), Some(0))
    );
    assert!(
        relay
            .set_queue_limits(
                "strict",
                relay::QueueLimits {
                    poison_after: Some(1001),
                    ..Default::default()
                }
            )
            .is_err(),
        "out of range"
    );
    assert_eq!(relay.queue_stats("strict").unwrap().limits.poison_after, Some(1));
}
