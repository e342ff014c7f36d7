//! Many callers mixing every operation share the writer's batches. A claim
//! keeps the queue's heads for the rest of its batch and re-probes only the
//! class it took from; every operation that changes which jobs are READY
//! must drop them. If one did not, a later claim in the same batch would
//! pick a job that is no longer READY (an error to the caller) or skip one
//! that just became READY. This drives all of them at once and checks both.

use relay::{Error, JobFilter, JobState, LeaseRequest, NewJob, Relay};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[test]
fn claims_in_mixed_batches_only_ever_take_ready_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let relay = Relay::open(dir.path().join("relay.db")).unwrap();
    let stop = AtomicBool::new(false);
    let leased = AtomicU64::new(0);
    let commits_before = relay.metrics().commits;
    std::thread::scope(|s| {
        for t in 0..12u64 {
            let (relay, stop, leased) = (&relay, &stop, &leased);
            s.spawn(move || {
                let mut rng = fastrand::Rng::with_seed(t);
                while !stop.load(Ordering::Relaxed) {
                    let n = rng.u32(1..4);
                    let jobs = (0..n)
                        .map(|_| NewJob::new("q", "k", Vec::new()).priority(rng.u8(0..4)))
                        .collect();
                    let ids = relay.submit_batch(jobs).unwrap();
                    if rng.u8(0..8) == 0 {
                        // Cancel a job that may be READY (its head must go).
                        match relay.cancel(ids[0]) {
                            Ok(()) | Err(Error::InvalidState { .. }) => {}
                            Err(e) => panic!("cancel: {e}"),
                        }
                    }
                    let got = relay
                        .lease(LeaseRequest::new(["q"]).max(rng.u32(1..4)).worker(format!("w{t}")))
                        .unwrap_or_else(|e| panic!("a claim failed: {e}"));
                    for j in got {
                        leased.fetch_add(1, Ordering::Relaxed);
                        let r = match rng.u8(0..4) {
                            0 => relay.nack(j.id, j.token, "again", Some(Duration::ZERO)).map(drop),
                            1 => relay.release(j.id, j.token),
                            _ => relay.ack(j.id, j.token, None),
                        };
                        match r {
                            Ok(()) => {}
                            // Another thread cancelled it while we held it.
                            Err(Error::InvalidState { id, .. }) => {
                                assert_eq!(relay.get(id).unwrap().state(), JobState::Cancelled);
                            }
                            Err(e) => panic!("finishing job {}: {e}", j.id),
                        }
                    }
                }
            });
        }
        // At least 3 s of mixed batches, and until 600 jobs were leased (a
        // loaded machine does less in 3 s; a minute at most).
        let start = Instant::now();
        while (start.elapsed() < Duration::from_secs(3) || leased.load(Ordering::Relaxed) < 600)
            && start.elapsed() < Duration::from_secs(60)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let m = relay.metrics();
    assert!(leased.load(Ordering::Relaxed) > 500, "too little work to mean anything");
    assert!(
        m.operations > (m.commits - commits_before) * 2,
        "operations did not share batches: {m:?}"
    );

    // Nothing READY was skipped for good: drain what is left, in order.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = relay.lease(LeaseRequest::new(["q"]).max(100)).unwrap();
        if got.is_empty() {
            break;
        }
        for j in got {
            relay.ack(j.id, j.token, None).unwrap();
        }
        assert!(Instant::now() < deadline, "the queue never drained");
    }
    let all = relay
        .list(&JobFilter {
            limit: 1_000_000,
            ..Default::default()
        })
        .unwrap();
    let mut by_state: HashMap<JobState, usize> = HashMap::new();
    for j in &all {
        *by_state.entry(j.state()).or_default() += 1;
    }
    assert_eq!(by_state.get(&JobState::Ready), None, "{by_state:?}");
    assert_eq!(by_state.get(&JobState::Leased), None, "{by_state:?}");
}
