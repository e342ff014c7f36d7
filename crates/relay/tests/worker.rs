//! The worker runtime: outcomes, heartbeats, timeouts, the pool's bound and
//! graceful shutdown, on a real database file.

use relay::worker::{JobError, Outcome, Worker};
use relay::{JobId, JobState, NewJob, Options, Relay};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn open() -> (tempfile::TempDir, Relay) {
    let dir = tempfile::tempdir().unwrap();
    let relay = Relay::open(dir.path().join("w.db")).unwrap();
    (dir, relay)
}

fn submit(relay: &Relay, kind: &str, payload: &str, max_attempts: u32) -> JobId {
    relay
        .submit(NewJob::new("q", kind, payload.as_bytes().to_vec()).max_attempts(max_attempts))
        .unwrap()
}

/// Runs `worker` on a thread until `done` holds (or 30 s pass), then shuts
/// it down gracefully and returns its final stats.
fn run_until(worker: Worker, done: impl Fn() -> bool) -> relay::worker::WorkerStatsSnapshot {
    let stop = worker.shutdown_handle();
    let t = std::thread::spawn(move || worker.handle_signals(false).run().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "condition not reached in 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.graceful();
    t.join().unwrap()
}

fn state(relay: &Relay, id: JobId) -> JobState {
    relay.get(id).unwrap().state()
}

fn finished(relay: &Relay, id: JobId) -> bool {
    state(relay, id).is_finished()
}

#[test]
fn ok_acks_with_result_and_events_are_recorded() {
    let (_d, relay) = open();
    let id = submit(&relay, "greet", "\"ada\"", 3);
    let w = Worker::new(relay.clone(), ["q"]).handler("greet", |ctx| {
        let name: String = ctx.json()?;
        ctx.event("progress", &serde_json::json!({"pct": 50}))?;
        Ok(Some(format!("hello {name}").into_bytes()))
    });
    let stats = run_until(w, || finished(&relay, id));
    let job = relay.get(id).unwrap();
    assert_eq!(
        (job.state(), job.result.as_deref()),
        (JobState::Succeeded, Some(&b"hello ada"[..]))
    );
    let kinds: Vec<String> = relay.events(id).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["submitted", "leased", "progress", "succeeded"]);
    assert_eq!(stats.succeeded, 1);
}

#[test]
fn err_nacks_with_its_text_then_dies() {
    let (_d, relay) = open();
    let id = submit(&relay, "flaky", "", 2);
    let w = Worker::new(relay.clone(), ["q"]).handler("flaky", |ctx| {
        Err(JobError::new(format!("refused on attempt {}", ctx.attempt())).retry_in(Duration::ZERO))
    });
    let stats = run_until(w, || finished(&relay, id));
    let job = relay.get(id).unwrap();
    assert_eq!(
        (job.state(), job.status.last_error.as_deref()),
        (JobState::Dead, Some("refused on attempt 2"))
    );
    let errors: Vec<String> = relay
        .events(id)
        .unwrap()
        .iter()
        .filter(|e| e.kind == "failed")
        .map(|e| e.data["error"].to_string())
        .collect();
    assert_eq!(errors, ["\"refused on attempt 1\"", "\"refused on attempt 2\""]);
    assert_eq!((stats.failed, stats.dead), (1, 1));
}

#[test]
fn a_snoozed_job_runs_again_later_without_spending_an_attempt() {
    let (_d, relay) = open();
    // One attempt only: a snooze that counted one would leave it DEAD.
    let id = submit(&relay, "wait-for-it", "", 1);
    let runs = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&runs);
    let w = Worker::new(relay.clone(), ["q"]).handler("wait-for-it", move |ctx| {
        if seen.fetch_add(1, Ordering::SeqCst) < 2 {
            return Err(JobError::snooze(Duration::from_millis(50)));
        }
        assert_eq!(ctx.attempt(), 1, "snoozes count no attempt");
        Ok(None)
    });
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&outcomes);
    let w = w.on_finish(move |f| log.lock().unwrap().push(f.outcome.clone()));
    let stats = run_until(w, || finished(&relay, id));
    assert_eq!(state(&relay, id), JobState::Succeeded);
    assert_eq!((stats.snoozed, stats.failed, stats.succeeded), (2, 0, 1));
    assert_eq!(
        *outcomes.lock().unwrap(),
        [
            Outcome::Snoozed {
                delay: Duration::from_millis(50)
            },
            Outcome::Snoozed {
                delay: Duration::from_millis(50)
            },
            Outcome::Succeeded
        ]
    );
    let kinds: Vec<String> = relay.events(id).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            "submitted",
            "leased",
            "snoozed",
            "leased",
            "snoozed",
            "leased",
            "succeeded"
        ]
    );
}

/// A job's own timeout wins over its kind's; its own lease length sets the
/// heartbeat (a 2 s lease is renewed while its handler runs 5 s, under a
/// worker whose leases are 30 s; each renewal has a second and more to
/// spare on a loaded machine).
#[test]
fn a_jobs_own_timeout_and_lease_length_rule_its_run() {
    let (_d, relay) = open();
    let quick = relay
        .submit(
            NewJob::new("q", "slow", b"quick".to_vec())
                .max_attempts(1)
                .timeout(Duration::from_millis(200)),
        )
        .unwrap();
    let held = relay
        .submit(NewJob::new("q", "slow", b"held".to_vec()).lease_for(Duration::from_secs(2)))
        .unwrap();
    let w = Worker::new(relay.clone(), ["q"])
        .concurrency(2)
        .lease_for(Duration::from_secs(30))
        .async_handler("slow", |_ctx| async move {
            tokio::time::sleep(Duration::from_millis(5_000)).await;
            Ok(None)
        })
        .timeout("slow", Duration::from_secs(60));
    run_until(w, || finished(&relay, quick) && finished(&relay, held));
    let q = relay.get(quick).unwrap();
    assert_eq!(
        q.state(),
        JobState::Dead,
        "the job's 200 ms timeout, not its kind's 60 s"
    );
    assert!(
        q.status.last_error.as_deref().unwrap_or("").contains("timed out"),
        "{q:?}"
    );
    let h = relay.get(held).unwrap();
    assert_eq!(h.state(), JobState::Succeeded, "heartbeats kept its 2 s lease alive");
    let expired = relay.events(held).unwrap().iter().any(|e| e.kind == "expired");
    assert!(!expired);
}

#[test]
fn a_panic_is_a_nack_and_the_pool_keeps_its_strength() {
    let (_d, relay) = open();
    let bad = submit(&relay, "explode", "", 1);
    let good: Vec<JobId> = (0..10).map(|_| submit(&relay, "fine", "", 1)).collect();
    let w = Worker::new(relay.clone(), ["q"])
        .concurrency(2)
        .handler("explode", |_| panic!("kaboom"))
        .handler("fine", |_| Ok(None));
    let r = relay.clone();
    let stats = run_until(w, move || finished(&r, bad) && good.iter().all(|id| finished(&r, *id)));
    let job = relay.get(bad).unwrap();
    assert_eq!(job.state(), JobState::Dead);
    assert_eq!(job.status.last_error.as_deref(), Some("handler panicked: kaboom"));
    assert_eq!((stats.succeeded, stats.dead), (10, 1));
}

#[test]
fn timeouts_nack_sync_and_async_handlers() {
    let (_d, relay) = open();
    let slow_async = submit(&relay, "slow-async", "", 1);
    let slow_sync = submit(&relay, "slow-sync", "", 1);
    let w = Worker::new(relay.clone(), ["q"])
        .concurrency(2)
        .async_handler("slow-async", |_| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(None)
        })
        .handler("slow-sync", |_| {
            // Long past its timeout: the timer must win even if the
            // runtime is not polled for a while on a loaded machine.
            std::thread::sleep(Duration::from_millis(3_000));
            Ok(None)
        })
        .timeout("slow-async", Duration::from_millis(200))
        .timeout("slow-sync", Duration::from_millis(100));
    let r = relay.clone();
    let start = Instant::now();
    run_until(w, move || finished(&r, slow_async) && finished(&r, slow_sync));
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "the async handler was not cut off"
    );
    for (id, want) in [
        (slow_async, "timed out after 200ms"),
        (slow_sync, "timed out after 100ms"),
    ] {
        let job = relay.get(id).unwrap();
        assert_eq!(
            (job.state(), job.status.last_error.as_deref()),
            (JobState::Dead, Some(want))
        );
    }
}

/// A kind's timeout holds whether it is set before or after its handler,
/// and for a kind the fallback handler runs (it was dropped when set
/// first).
#[test]
fn a_timeout_set_before_its_handler_holds() {
    let (_d, relay) = open();
    let early = submit(&relay, "early", "", 1);
    let other = submit(&relay, "other", "", 1);
    let slow = |_: &relay::worker::JobContext| {
        std::thread::sleep(Duration::from_millis(3_000));
        Ok(None)
    };
    let w = Worker::new(relay.clone(), ["q"])
        .concurrency(2)
        .timeout("early", Duration::from_millis(100))
        .timeout("other", Duration::from_millis(150))
        .handler("early", slow)
        .fallback_handler(slow);
    let r = relay.clone();
    run_until(w, move || finished(&r, early) && finished(&r, other));
    for (id, want) in [(early, "timed out after 100ms"), (other, "timed out after 150ms")] {
        let job = relay.get(id).unwrap();
        assert_eq!(
            (job.state(), job.status.last_error.as_deref()),
            (JobState::Dead, Some(want))
        );
    }
}

#[test]
fn a_kind_without_handler_is_dead_at_once() {
    let (_d, relay) = open();
    let id = submit(&relay, "mystery", "", 20);
    let w = Worker::new(relay.clone(), ["q"]).handler("known", |_| Ok(None));
    run_until(w, || finished(&relay, id));
    let job = relay.get(id).unwrap();
    assert_eq!(
        (job.state(), job.status.attempts),
        (JobState::Dead, 1),
        "not retried 20 times"
    );
    assert!(job
        .status
        .last_error
        .unwrap()
        .contains("no handler for kind \"mystery\""));
}

#[test]
fn heartbeats_keep_a_job_longer_than_its_lease() {
    let (_d, relay) = open();
    let id = submit(&relay, "long", "", 1);
    let w = Worker::new(relay.clone(), ["q"])
        // Renewed every 667 ms: each renewal (an fsync'd commit) has more
        // than a second to spare on a loaded machine.
        .lease_for(Duration::from_secs(2))
        .handler("long", |ctx| {
            std::thread::sleep(Duration::from_millis(4_500));
            assert!(!ctx.is_lost());
            Ok(None)
        });
    run_until(w, || finished(&relay, id));
    let job = relay.get(id).unwrap();
    assert_eq!((job.state(), job.status.attempts), (JobState::Succeeded, 1));
    assert!(relay.events(id).unwrap().iter().all(|e| e.kind != "expired"));
}

#[test]
fn graceful_shutdown_finishes_quick_jobs_and_releases_slow_ones() {
    let (_d, relay) = open();
    let quick: Vec<JobId> = (0..2).map(|_| submit(&relay, "quick", "", 5)).collect();
    let slow: Vec<JobId> = (0..2).map(|_| submit(&relay, "slow", "", 5)).collect();
    let started = Arc::new(AtomicUsize::new(0));
    let s = Arc::clone(&started);
    let w = Worker::new(relay.clone(), ["q"])
        .concurrency(4)
        .grace(Duration::from_millis(300))
        .handler("quick", |_| {
            std::thread::sleep(Duration::from_millis(50));
            Ok(None)
        })
        .async_handler("slow", move |_| {
            s.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(None)
            }
        });
    let r = relay.clone();
    let stats = run_until(w, || {
        started.load(Ordering::SeqCst) == 2 && quick.iter().all(|id| finished(&r, *id))
    });
    assert_eq!((stats.succeeded, stats.released, stats.in_flight), (2, 2, 0));
    for id in &slow {
        let job = relay.get(*id).unwrap();
        assert_eq!(
            (job.state(), job.status.attempts),
            (JobState::Ready, 0),
            "released, not nacked"
        );
        assert_eq!(relay.events(*id).unwrap().last().unwrap().kind, "released");
    }
    // They run again at once elsewhere.
    let again = Worker::new(relay.clone(), ["q"]).handler("slow", |_| Ok(None));
    run_until(again, || slow.iter().all(|id| finished(&relay, *id)));
}

#[test]
fn the_pool_never_runs_more_than_n_and_keeps_n_busy() {
    let (_d, relay) = open();
    let ids: Vec<JobId> = (0..40).map(|_| submit(&relay, "work", "", 1)).collect();
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (r, m) = (Arc::clone(&running), Arc::clone(&most));
    let w = Worker::new(relay.clone(), ["q"])
        .concurrency(4)
        .handler("work", move |_| {
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(20));
            r.fetch_sub(1, Ordering::SeqCst);
            Ok(None)
        });
    run_until(w, || ids.iter().all(|id| finished(&relay, *id)));
    assert_eq!(most.load(Ordering::SeqCst), 4, "never more than 4, and 4 reached");
}

/// Eight slots run eight jobs at once: each handler waits until eight are
/// running together (a rendezvous, not a stopwatch: a timed speed-up
/// fails on a loaded machine, and speed is for the benchmarks), so the
/// jobs only succeed if the slots never wait on each other.
#[test]
fn eight_slots_run_eight_jobs_at_once() {
    let relay = Relay::in_memory_with(Options::default()).unwrap();
    let ids: Vec<JobId> = (0..24).map(|_| submit(&relay, "meet", "", 1)).collect();
    let met = Arc::new((Mutex::new((0usize, 0usize)), std::sync::Condvar::new()));
    let m = Arc::clone(&met);
    let w = Worker::new(relay.clone(), ["q"])
        .concurrency(8)
        .handler("meet", move |_| {
            let (lock, cv) = &*m;
            let mut g = lock.lock().unwrap();
            // (arrived in this round, rounds completed)
            let round = g.1;
            g.0 += 1;
            if g.0 == 8 {
                *g = (0, round + 1);
                cv.notify_all();
                return Ok(None);
            }
            let (g, timeout) = cv
                .wait_timeout_while(g, Duration::from_secs(20), |g| g.1 == round)
                .unwrap();
            drop(g);
            if timeout.timed_out() {
                return Err(JobError::permanent("fewer than eight ran at once"));
            }
            Ok(None)
        });
    let r = relay.clone();
    let stats = run_until(w, move || ids.iter().all(|id| finished(&r, *id)));
    assert_eq!((stats.succeeded, stats.dead), (24, 0), "three rounds of eight");
    assert_eq!(met.0.lock().unwrap().1, 3);
}

#[test]
fn on_finish_reports_each_outcome() {
    let (_d, relay) = open();
    let a = submit(&relay, "ok", "", 1);
    let b = submit(&relay, "no", "", 1);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let w = Worker::new(relay.clone(), ["q"])
        .handler("ok", |_| Ok(None))
        .handler("no", |_| Err(JobError::permanent("bad input")))
        .on_finish(move |f| s.lock().unwrap().push((f.id, f.outcome.clone())));
    run_until(w, || finished(&relay, a) && finished(&relay, b));
    let mut got = seen.lock().unwrap().clone();
    got.sort_by_key(|x| x.0);
    assert_eq!(
        got,
        [
            (a, Outcome::Succeeded),
            (
                b,
                Outcome::Dead {
                    error: "bad input".into()
                }
            )
        ]
    );
}

#[test]
fn bad_configuration_is_refused() {
    let (_d, relay) = open();
    let e = Worker::new(relay.clone(), ["q"]).run().unwrap_err();
    assert!(e.to_string().contains("register at least one handler"), "{e}");
    let e = Worker::new(relay.clone(), ["bad queue"])
        .handler("k", |_| Ok(None))
        .run()
        .unwrap_err();
    assert!(e.to_string().contains("invalid queue"), "{e}");
    let e = Worker::new(relay, ["q"])
        .concurrency(0)
        .handler("k", |_| Ok(None))
        .run()
        .unwrap_err();
    assert!(e.to_string().contains("concurrency"), "{e}");
}

#[test]
fn prefetched_jobs_wait_for_a_slot_and_are_released_at_shutdown() {
    let (_d, relay) = open();
    let ids: Vec<JobId> = (0..20).map(|_| submit(&relay, "tiny", "", 1)).collect();
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (r, m) = (Arc::clone(&running), Arc::clone(&most));
    let w = Worker::new(relay.clone(), ["q"])
        .concurrency(1)
        .prefetch(8)
        .handler("tiny", move |_| {
            m.fetch_max(r.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
            r.fetch_sub(1, Ordering::SeqCst);
            Ok(None)
        });
    let stats = w.stats();
    run_until(w, || stats.snapshot().succeeded == 20);
    assert!(ids.iter().all(|id| state(&relay, *id) == JobState::Succeeded));
    assert_eq!(
        most.load(Ordering::SeqCst),
        1,
        "prefetching never runs more than the slots"
    );

    // At shutdown, the one running job and the four waiting ones are released.
    let ids: Vec<JobId> = (0..5).map(|_| submit(&relay, "slow", "", 1)).collect();
    let w = Worker::new(relay.clone(), ["q"])
        .concurrency(1)
        .prefetch(4)
        .grace(Duration::from_millis(100))
        .async_handler("slow", |_| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(None)
        });
    let stats = w.stats();
    let r = relay.clone();
    let s = run_until(w, || ids.iter().all(|id| state(&r, *id) == JobState::Leased));
    assert_eq!((s.released, stats.snapshot().in_flight), (5, 0));
    assert!(ids.iter().all(|id| state(&relay, *id) == JobState::Ready));
}

/// `Worker::run` inside an async runtime used to panic ("Cannot start a
/// runtime from within a runtime"); it now says to call `run_async`.
#[tokio::test]
async fn run_inside_a_runtime_says_to_call_run_async() {
    let relay = Relay::in_memory().unwrap();
    let worker = Worker::new(relay, ["q"]).handler("k", |_| Ok(None));
    let shown = format!("{worker:?}");
    assert!(shown.contains("Worker") && shown.contains("\"k\""), "{shown}");
    match worker.run() {
        Err(relay::Error::InvalidInput(i)) => assert!(i.reason.contains("run_async"), "{i}"),
        other => panic!("expected an error naming run_async, got {other:?}"),
    }
}
