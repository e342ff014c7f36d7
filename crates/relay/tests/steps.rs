//! Durable steps in the worker runtime (issue 40): `JobContext::step`
//! records a step's output under the job's lease, and a later attempt
//! returns it without running the step's body again.

use relay::worker::{JobError, Worker};
use relay::{JobId, JobState, LeaseRequest, NewJob, Relay};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn open() -> (tempfile::TempDir, Relay) {
    let dir = tempfile::tempdir().unwrap();
    let relay = Relay::open(dir.path().join("steps.db")).unwrap();
    (dir, relay)
}

fn run_until(worker: Worker, done: impl Fn() -> bool) {
    let stop = worker.shutdown_handle();
    let t = std::thread::spawn(move || worker.handle_signals(false).run().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "condition not reached in 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.graceful();
    t.join().unwrap();
}

/// How many times each step body ran.
type Runs = Arc<Mutex<HashMap<String, u32>>>;

fn ran(runs: &Runs, step: &str) {
    *runs.lock().unwrap().entry(step.to_owned()).or_default() += 1;
}

fn count(runs: &Runs, step: &str) -> u32 {
    runs.lock().unwrap().get(step).copied().unwrap_or(0)
}

#[test]
fn a_retry_skips_the_steps_an_earlier_attempt_recorded() {
    let (_d, relay) = open();
    let id = relay
        .submit(NewJob::new("q", "order", br#"{"cents": 4200}"#.to_vec()).max_attempts(3))
        .unwrap();
    let runs: Runs = Arc::default();
    let r = runs.clone();
    let w = Worker::new(relay.clone(), ["q"]).handler("order", move |ctx| {
        let charge: String = ctx.step("charge", || {
            ran(&r, "charge");
            Ok(format!("ch_{}", ctx.key("charge")))
        })?;
        let label: u32 = ctx.step("label", || {
            ran(&r, "label");
            // The first attempt fails after its first step.
            if ctx.attempt() == 1 {
                return Err(JobError::new("the label printer is off").retry_in(Duration::ZERO));
            }
            Ok(7)
        })?;
        ctx.step("email", || {
            ran(&r, "email");
            Ok(())
        })?;
        Ok(Some(format!("{charge} {label}").into_bytes()))
    });
    run_until(w, || relay.get(id).unwrap().state().is_finished());
    let job = relay.get(id).unwrap();
    assert_eq!(job.state(), JobState::Succeeded);
    assert_eq!(
        job.result.as_deref(),
        Some(format!("ch_relay-{}-charge 7", id.0).as_bytes())
    );
    assert_eq!(
        (count(&runs, "charge"), count(&runs, "label"), count(&runs, "email")),
        (1, 2, 1),
        "the charge ran once; the failed label step ran again"
    );
    let steps: Vec<(String, u32)> = job.steps.iter().map(|s| (s.name.clone(), s.attempt)).collect();
    assert_eq!(steps, [("charge".into(), 1), ("label".into(), 2), ("email".into(), 2)]);
    assert_eq!(job.steps[1].output, b"7");
    assert_eq!(job.steps[2].output, b"null");
}

#[test]
fn async_steps_are_recorded_once_and_answered_again() {
    let (_d, relay) = open();
    let a = relay.submit(NewJob::new("q", "async", b"{}".to_vec())).unwrap();
    let runs: Runs = Arc::default();
    let r = runs.clone();
    let w = Worker::new(relay.clone(), ["q"]).async_handler("async", move |ctx| {
        let r = r.clone();
        async move {
            let n: u64 = ctx
                .step_async("fetch", || async {
                    ran(&r, "fetch");
                    Ok(41)
                })
                .await?;
            // A recorded step is returned again, without its body.
            let again: u64 = ctx
                .step_async("fetch", || async {
                    ran(&r, "fetch");
                    Ok(0)
                })
                .await?;
            Ok(Some((n + again).to_string().into_bytes()))
        }
    });
    run_until(w, || relay.get(a).unwrap().state().is_finished());
    assert_eq!(relay.get(a).unwrap().result.as_deref(), Some(&b"82"[..]));
    assert_eq!(count(&runs, "fetch"), 1);
}

#[test]
fn a_recorded_output_of_another_type_is_a_permanent_error() {
    let (_d, relay) = open();
    let id = relay.submit(NewJob::new("q", "typed", b"{}".to_vec())).unwrap();
    // An earlier version of the handler recorded a string.
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    relay.record_step(id, l.token, "n", b"\"seven\"".to_vec()).unwrap();
    relay.release(id, l.token).unwrap();
    let w = Worker::new(relay.clone(), ["q"]).handler("typed", |ctx| {
        let n: u32 = ctx.step("n", || Ok(7))?;
        Ok(Some(n.to_string().into_bytes()))
    });
    run_until(w, || relay.get(id).unwrap().state().is_finished());
    let job = relay.get(id).unwrap();
    assert_eq!(job.state(), JobState::Dead);
    let error = job.status.last_error.unwrap_or_default();
    assert!(
        error.contains("step \"n\"") && error.contains("name the step anew"),
        "{error}"
    );
}

#[test]
fn key_is_stable_per_job_and_step() {
    let (_d, relay) = open();
    let ids: Vec<JobId> = (0..2)
        .map(|_| relay.submit(NewJob::new("q", "k", b"{}".to_vec())).unwrap())
        .collect();
    let keys: Arc<Mutex<Vec<(JobId, String)>>> = Arc::default();
    let k = keys.clone();
    let w = Worker::new(relay.clone(), ["q"]).handler("k", move |ctx| {
        k.lock().unwrap().push((ctx.id(), ctx.key("charge")));
        Ok(None)
    });
    run_until(w, || ids.iter().all(|id| relay.get(*id).unwrap().state().is_finished()));
    let mut keys = keys.lock().unwrap().clone();
    keys.sort();
    assert_eq!(
        keys,
        ids.iter()
            .map(|id| (*id, format!("relay-{}-charge", id.0)))
            .collect::<Vec<_>>()
    );
}

/// A sleep holds no worker: with one slot, a job asleep for 600 ms lets
/// another job run meanwhile; it wakes, is leased again (the same attempt)
/// and goes on after the sleep, its steps not run again; it is leased
/// within a second of its time (issue 40's target), here with the worker
/// long-polling its queue.
#[test]
fn a_sleep_frees_the_worker_and_the_job_goes_on_after_it() {
    let (_d, relay) = open();
    let sleeper = relay.submit(NewJob::new("q", "sleeper", b"{}".to_vec())).unwrap();
    let runs: Runs = Arc::default();
    let r = runs.clone();
    let order: Arc<Mutex<Vec<String>>> = Arc::default();
    let o = order.clone();
    let o2 = order.clone();
    let relay2 = relay.clone();
    let w = Worker::new(relay.clone(), ["q"])
        .concurrency(1)
        .handler("sleeper", move |ctx| {
            ctx.step("before", || {
                ran(&r, "before");
                o.lock().unwrap().push("before".into());
                // Submitted while this one runs: it runs while this sleeps.
                relay2.submit(NewJob::new("q", "other", b"{}".to_vec())).unwrap();
                Ok(())
            })?;
            ctx.sleep("nap", Duration::from_millis(600))?;
            ctx.step("after", || {
                ran(&r, "after");
                o.lock().unwrap().push("after".into());
                Ok(())
            })?;
            Ok(None)
        })
        .handler("other", move |_| {
            o2.lock().unwrap().push("other".into());
            Ok(None)
        });
    run_until(w, || relay.get(sleeper).unwrap().state().is_finished());
    assert_eq!(*order.lock().unwrap(), ["before", "other", "after"]);
    assert_eq!((count(&runs, "before"), count(&runs, "after")), (1, 1));
    let job = relay.get(sleeper).unwrap();
    assert_eq!((job.state(), job.status.attempts), (JobState::Succeeded, 1));
    let until = job.steps[1].sleep_until().expect("the sleep's step");
    let events = relay.events(sleeper).unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "submitted",
            "leased",
            "step",
            "step",
            "sleeping",
            "leased",
            "step",
            "succeeded"
        ]
    );
    let woke = events[5].at;
    assert!(woke >= until, "leased again at {woke:?}, before its time {until:?}");
    let late = woke.since(until);
    eprintln!("leased again {late:?} after its time");
    assert!(late < Duration::from_secs(1), "leased {late:?} after its time");
}

/// Events in the runtime: a handler waits for its key holding no worker;
/// an emit wakes it and the handler goes on with the payload; a wait whose
/// time runs out answers `None`. Both answers are recorded: the handler's
/// code before the wait runs once per lease, its steps once.
#[test]
fn wait_event_goes_on_with_the_payload_or_times_out() {
    let (_d, relay) = open();
    let approved = relay.submit(NewJob::new("q", "approve", b"{}".to_vec())).unwrap();
    let ignored = relay.submit(NewJob::new("q", "approve", b"{}".to_vec())).unwrap();
    let runs: Runs = Arc::default();
    let r = runs.clone();
    let resumed: Arc<Mutex<Option<Instant>>> = Arc::default();
    let res = resumed.clone();
    let w = Worker::new(relay.clone(), ["q"]).handler("approve", move |ctx| {
        ctx.step("ask", || {
            ran(&r, &format!("ask {}", ctx.id()));
            Ok(())
        })?;
        let timeout = if ctx.id().0 == 1 {
            Duration::from_secs(60)
        } else {
            Duration::from_millis(300)
        };
        let answer: Option<serde_json::Value> =
            ctx.wait_event("approval", &format!("approved:{}", ctx.id()), timeout)?;
        res.lock().unwrap().get_or_insert_with(Instant::now);
        Ok(Some(match answer {
            Some(v) => format!("approved by {}", v["by"].as_str().unwrap_or("?")).into_bytes(),
            None => b"timed out".to_vec(),
        }))
    });
    let relay2 = relay.clone();
    let emitted: Arc<Mutex<Option<Instant>>> = Arc::default();
    let em = emitted.clone();
    let emitter = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while relay2.get(approved).unwrap().state() != JobState::Waiting {
            assert!(Instant::now() < deadline, "the job never waited");
            std::thread::sleep(Duration::from_millis(5));
        }
        let e = relay2
            .emit(&format!("approved:{}", approved.0), br#"{"by": "ada"}"#.to_vec())
            .unwrap();
        *em.lock().unwrap() = Some(Instant::now());
        assert_eq!((e.first, e.woken), (true, 1));
    });
    run_until(w, || {
        [approved, ignored]
            .iter()
            .all(|id| relay.get(*id).unwrap().state().is_finished())
    });
    emitter.join().unwrap();
    assert_eq!(
        relay.get(approved).unwrap().result.as_deref(),
        Some(&b"approved by ada"[..])
    );
    assert_eq!(relay.get(ignored).unwrap().result.as_deref(), Some(&b"timed out"[..]));
    assert_eq!((count(&runs, "ask 1"), count(&runs, "ask 2")), (1, 1));
    for id in [approved, ignored] {
        let job = relay.get(id).unwrap();
        assert_eq!(job.status.attempts, 1, "a wait spends no attempt");
        let kinds: Vec<String> = relay.events(id).unwrap().into_iter().map(|e| e.kind).collect();
        assert!(kinds.contains(&"waiting".to_owned()), "{kinds:?}");
    }
    let (e, r) = (emitted.lock().unwrap().unwrap(), resumed.lock().unwrap().unwrap());
    eprintln!(
        "the handler went on {:?} after the emit returned",
        r.saturating_duration_since(e)
    );
}

/// Issue 40's target "a due sleep is READY within 1 s of its time, also
/// after a restart": a job asleep while no Relay runs is READY soon after
/// the file is opened again (the first batch after opening reaps, and an
/// idle writer reaps every `reap_interval`, 1 s), and leased with its steps.
#[test]
fn a_sleep_that_came_due_while_nothing_ran_is_ready_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("restart.db");
    let id = {
        let relay = Relay::open(&path).unwrap();
        let id = relay.submit(NewJob::new("q", "k", b"{}".to_vec())).unwrap();
        let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
        relay.record_step(id, l.token, "before", b"1".to_vec()).unwrap();
        let until = relay::Clock::now(&relay::SystemClock).plus(Duration::from_millis(200));
        relay.sleep(id, l.token, "nap", until).unwrap();
        id
    };
    // Nothing runs past its time.
    std::thread::sleep(Duration::from_millis(400));
    let reopened = Instant::now();
    let relay = Relay::open(&path).unwrap();
    while relay.get(id).unwrap().state() != JobState::Ready {
        assert!(
            reopened.elapsed() < Duration::from_secs(10),
            "never READY after the restart"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    eprintln!("READY {:?} after the reopen", reopened.elapsed());
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!((l.id, l.attempt), (id, 1));
    assert_eq!(
        l.steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["before", "nap"]
    );
}

/// Item 5: a handler spawns child jobs once (`ctx.spawn`, a step whose
/// submit carries the step's idempotency key) and joins them
/// (`ctx.join`), holding no worker while they run: with one worker slot,
/// the children run while their parent waits; the parent then goes on
/// with each child's result, or its error.
#[test]
fn a_handler_spawns_children_and_joins_them_holding_no_worker() {
    let (_d, relay) = open();
    let id = relay.submit(NewJob::new("q", "order", b"{}".to_vec())).unwrap();
    let runs: Runs = Arc::default();
    let (r, spawner) = (runs.clone(), relay.clone());
    let w = Worker::new(relay.clone(), ["q"])
        .concurrency(1)
        .handler("order", move |ctx| {
            ran(&r, "order");
            let label = ctx.spawn("label", |key| {
                ran(&r, "spawn");
                spawner.submit(NewJob::new("q", "label", b"{}".to_vec()).idempotency_key(key))
            })?;
            let broken = ctx.spawn("broken", |key| {
                spawner.submit(
                    NewJob::new("q", "broken", b"{}".to_vec())
                        .idempotency_key(key)
                        .max_attempts(1),
                )
            })?;
            let printed = ctx.join("label-printed", label)?;
            let failed = ctx.join("broken-ended", broken)?;
            assert_eq!(printed.state, Some(JobState::Succeeded));
            assert_eq!(failed.state, Some(JobState::Dead));
            let text = format!(
                "{} / {}",
                String::from_utf8_lossy(printed.result.as_deref().unwrap_or_default()),
                failed.error.unwrap_or_default()
            );
            Ok(Some(text.into_bytes()))
        })
        .handler("label", |_ctx| Ok(Some(br#"{"label":"L-1"}"#.to_vec())))
        .handler("broken", |_ctx| Err(JobError::permanent("the printer caught fire")));
    run_until(w, || relay.get(id).unwrap().state().is_finished());
    let job = relay.get(id).unwrap();
    assert_eq!(job.state(), JobState::Succeeded, "{:?}", job.status.last_error);
    assert_eq!(
        job.result.as_deref(),
        Some(&br#"{"label":"L-1"} / the printer caught fire"#[..])
    );
    assert_eq!(count(&runs, "spawn"), 1, "the child was submitted once");
    // Run 1 parks on the label; a later run passes it, and parks on the
    // broken job unless that ended first (then its join is recorded at once
    // and the job is READY again: one run more).
    let order_runs = count(&runs, "order");
    assert!((2..=3).contains(&order_runs), "the order ran {order_runs} times");
    assert_eq!(job.status.attempts, 1, "joins spend no attempt");
}

/// Item 3: an emit inside the caller's own transaction on the file wakes
/// the waiting job if and only if that transaction commits: rolled back,
/// the job still waits and the key was never emitted; committed, the job is
/// READY with the payload recorded, and a later emit is not the first.
#[test]
fn an_emit_in_the_callers_transaction_counts_only_if_it_commits() {
    use relay::rusqlite::{Connection, TransactionBehavior};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("app.db");
    let relay = Relay::open(&path).unwrap();
    let id = relay.submit(NewJob::new("q", "k", b"{}".to_vec())).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    let until = relay::Clock::now(&relay::SystemClock).plus(Duration::from_secs(3600));
    relay
        .complete_batch(vec![relay::Completion::wait(
            id,
            l.token,
            "shipment",
            "shipped:42",
            until,
        )])
        .unwrap()
        .remove(0)
        .unwrap();
    let mut db = Connection::open(&path).unwrap();
    db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, shipped INTEGER)", [])
        .unwrap();
    {
        let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
        tx.execute("INSERT INTO orders VALUES (42, 1)", []).unwrap();
        let e = relay
            .emit_in(&tx, "shipped:42", br#"{"carrier":"dhl"}"#.to_vec())
            .unwrap();
        assert_eq!((e.first, e.woken), (true, 1));
        tx.rollback().unwrap();
    }
    assert_eq!(
        relay.get(id).unwrap().state(),
        JobState::Waiting,
        "rolled back: still waiting"
    );
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
    tx.execute("INSERT INTO orders VALUES (42, 1)", []).unwrap();
    relay
        .emit_in(&tx, "shipped:42", br#"{"carrier":"ups"}"#.to_vec())
        .unwrap();
    tx.commit().unwrap();
    let job = relay.get(id).unwrap();
    assert_eq!(job.state(), JobState::Ready);
    assert_eq!(
        relay::Waited::of(&job.steps[0].output),
        Some(relay::Waited::Event(br#"{"carrier":"ups"}"#.to_vec()))
    );
    assert!(!relay.emit("shipped:42", b"{}".to_vec()).unwrap().first);
    // Outside a transaction: refused, nothing written.
    let plain = Connection::open(&path).unwrap();
    assert!(matches!(
        relay.emit_in(&plain, "shipped:43", Vec::new()),
        Err(relay::Error::InvalidInput(_))
    ));
}
