//! The job's life: submit, lease, ack, events, unique keys, cancel, retry,
//! delete, release, stats, waiting, reopening, and the async API.

use crate::{clocked, open_clocked, NewDb};
use relay::{Clock, Error, JobFilter, JobId, JobState, LeaseRequest, LeaseToken, NewJob, Priority, Timestamp};
use std::time::{Duration, Instant};

fn kinds(relay: &relay::Relay, id: JobId) -> Vec<String> {
    relay.events(id).unwrap().into_iter().map(|e| e.kind).collect()
}

pub fn submit_lease_ack(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let id = relay
        .submit(
            NewJob::new("emails", "send", b"{\"to\":1}".to_vec())
                .priority(2)
                .max_attempts(4),
        )
        .unwrap();
    let job = relay.get(id).unwrap();
    assert_eq!(
        (job.state(), job.priority, job.status.attempts, job.status.max_attempts),
        (JobState::Ready, Priority::HIGH, 0, 4)
    );
    assert_eq!(
        (job.queue.as_str(), job.kind.as_str(), job.payload.as_slice()),
        ("emails", "send", &b"{\"to\":1}"[..])
    );
    assert_eq!(job.created_at, clock.now());

    let leased = relay
        .lease(
            LeaseRequest::new(["emails"])
                .worker("w1")
                .lease_for(Duration::from_secs(30)),
        )
        .unwrap();
    assert_eq!(leased.len(), 1);
    let l = &leased[0];
    assert_eq!(
        (l.id, l.token, l.attempt, l.max_attempts, l.kind.as_str()),
        (id, LeaseToken(1), 1, 4, "send")
    );
    assert_eq!(l.expires_at, clock.now().plus(Duration::from_secs(30)));
    let job = relay.get(id).unwrap();
    assert_eq!(job.state(), JobState::Leased);
    assert_eq!(job.status.lease.as_ref().map(|l| l.worker.as_str()), Some("w1"));
    assert!(
        relay.lease(LeaseRequest::new(["emails"])).unwrap().is_empty(),
        "a leased job is not leased twice"
    );

    relay.ack(id, l.token, Some(b"done".to_vec())).unwrap();
    let job = relay.get(id).unwrap();
    assert_eq!(job.state(), JobState::Succeeded);
    assert_eq!(job.result.as_deref(), Some(&b"done"[..]));
    assert_eq!(job.status.finished_at, Some(clock.now()));
    assert!(job.status.lease.is_none());
    assert_eq!(kinds(&relay, id), ["submitted", "leased", "succeeded"]);
    // The same ack again (a client over a network that timed out and
    // retried): answered Ok, and nothing changes, not even the result.
    relay.ack(id, l.token, Some(b"again".to_vec())).unwrap();
    let again = relay.get(id).unwrap();
    assert_eq!(again.result.as_deref(), Some(&b"done"[..]));
    assert_eq!(again.status, job.status);
    assert_eq!(kinds(&relay, id), ["submitted", "leased", "succeeded"]);
    // Any other token is not this lease's ack: the job is over, and says so.
    let stale = relay::LeaseToken(l.token.0 - 1);
    assert!(matches!(
        relay.ack(id, stale, None),
        Err(Error::InvalidState { id: i, state: JobState::Succeeded, .. }) if i == id
    ));
}

/// A job's trace context goes in with the submit and comes back from get,
/// list and lease, and across a reopen; a malformed one is refused.
pub fn traceparent_is_kept_and_handed_out(new_db: &NewDb) {
    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let (relay, _clock, db) = open_clocked(new_db);
    let traced = relay.submit(NewJob::new("t", "k", Vec::new()).traceparent(TP)).unwrap();
    let plain = relay.submit(NewJob::new("t", "k", Vec::new())).unwrap();
    assert_eq!(relay.get(traced).unwrap().traceparent.as_deref(), Some(TP));
    assert_eq!(relay.get(plain).unwrap().traceparent, None);
    let listed = relay
        .list(&JobFilter {
            queue: Some("t".into()),
            limit: 10,
            ..JobFilter::default()
        })
        .unwrap();
    assert_eq!(
        listed.iter().filter(|j| j.traceparent.as_deref() == Some(TP)).count(),
        1
    );
    for bad in [
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ] {
        let e = relay
            .submit(NewJob::new("t", "k", Vec::new()).traceparent(bad))
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidInput(i) if i.field == "traceparent"),
            "{bad:?}: {e}"
        );
    }
    drop(relay);
    let relay = db.open(relay::Options::default()).unwrap();
    let leased = relay.lease(LeaseRequest::new(["t"]).max(3)).unwrap();
    assert_eq!(leased[0].id, traced);
    assert_eq!(leased[0].traceparent.as_deref(), Some(TP));
    assert_eq!(leased[1].traceparent, None);
}

pub fn events_and_user_events(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    let seq = relay
        .append_event(id, "progress", &serde_json::json!({"pct": 50}))
        .unwrap();
    assert_eq!(seq, 3);
    relay.append_event(id, "log", &serde_json::json!("half way")).unwrap();
    relay.ack(l.id, l.token, None).unwrap();
    let events = relay.events(id).unwrap();
    let seqs: Vec<i64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert_eq!(events[2].data["pct"], 50);
    assert_eq!(events[3].data, "half way");
    assert_eq!(
        events[1].data["worker"],
        serde_json::json!(format!("pid-{}", std::process::id()))
    );
    assert_eq!(
        kinds(&relay, id),
        ["submitted", "leased", "progress", "log", "succeeded"]
    );
}

pub fn unique_key_dedupes_until_finished(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let a = relay
        .submit(NewJob::new("q", "k", b"1".to_vec()).unique_key("order-7"))
        .unwrap();
    let b = relay
        .submit(NewJob::new("q", "k", b"2".to_vec()).unique_key("order-7"))
        .unwrap();
    assert_eq!(a, b);
    let batch = relay
        .submit_batch(vec![
            NewJob::new("q", "k", Vec::new()).unique_key("x"),
            NewJob::new("q", "k", Vec::new()).unique_key("x"),
            NewJob::new("q", "k", Vec::new()).unique_key("order-7"),
        ])
        .unwrap();
    assert_eq!((batch[0], batch[2]), (batch[1], a));
    assert_eq!(relay.get(a).unwrap().payload, b"1");
    assert_eq!(
        relay
            .list(&JobFilter {
                limit: 100,
                ..JobFilter::default()
            })
            .unwrap()
            .len(),
        2
    );
    // Still unfinished while leased.
    let l = relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap();
    assert_eq!(
        relay
            .submit(NewJob::new("q", "k", Vec::new()).unique_key("order-7"))
            .unwrap(),
        a
    );
    for j in &l {
        relay.ack(j.id, j.token, None).unwrap();
    }
    let c = relay
        .submit(NewJob::new("q", "k", Vec::new()).unique_key("order-7"))
        .unwrap();
    assert!(c > a, "a finished job's key may be used again");
}

pub fn cancel_retry_delete(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    relay.cancel(id).unwrap();
    assert_eq!(relay.get(id).unwrap().state(), JobState::Cancelled);
    assert!(relay.lease(LeaseRequest::new(["q"])).unwrap().is_empty());
    assert!(matches!(
        relay.cancel(id),
        Err(Error::InvalidState {
            state: JobState::Cancelled,
            ..
        })
    ));
    relay.retry(id).unwrap();
    assert_eq!(relay.get(id).unwrap().state(), JobState::Ready);
    assert!(matches!(
        relay.retry(id),
        Err(Error::InvalidState {
            state: JobState::Ready,
            action: "retry",
            ..
        })
    ));

    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert!(matches!(
        relay.delete(id),
        Err(Error::InvalidState {
            state: JobState::Leased,
            ..
        })
    ));
    relay.cancel(id).unwrap();
    assert!(
        matches!(
            relay.ack(id, l.token, None),
            Err(Error::InvalidState {
                state: JobState::Cancelled,
                action: "ack",
                ..
            })
        ),
        "a cancelled job's holder is told it is CANCELLED"
    );
    relay.delete(id).unwrap();
    assert!(matches!(relay.get(id), Err(Error::NotFound { .. })));
    assert!(matches!(relay.events(id), Err(Error::NotFound { .. })));
    assert!(matches!(relay.delete(id), Err(Error::NotFound { .. })));
    let next = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    assert!(next > id, "ids are never reused");
}

pub fn release_gives_job_back(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new()).max_attempts(1)).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    relay.release(id, l.token).unwrap();
    let job = relay.get(id).unwrap();
    assert_eq!((job.state(), job.status.attempts), (JobState::Ready, 0));
    assert!(matches!(relay.release(id, l.token), Err(Error::LeaseLost { .. })));
    let again = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!(
        (again.attempt, again.token),
        (1, LeaseToken(2)),
        "release counts no attempt; tokens still grow"
    );
}

pub fn lease_many_across_queues(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let mut ids = Vec::new();
    for i in 0..5u8 {
        ids.push(relay.submit(NewJob::new("a", "k", vec![i]).priority(i % 4)).unwrap());
        ids.push(
            relay
                .submit(NewJob::new("b", "k", vec![i]).priority(3 - i % 4))
                .unwrap(),
        );
    }
    relay.submit(NewJob::new("c", "k", Vec::new()).priority(3)).unwrap();
    let got = relay.lease(LeaseRequest::new(["a", "b"]).max(7)).unwrap();
    assert_eq!(got.len(), 7);
    let mut seen: Vec<JobId> = got.iter().map(|l| l.id).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 7);
    assert!(got.iter().all(|l| l.queue != "c"));
    let prios: Vec<u8> = got.iter().map(|l| l.priority.get()).collect();
    assert!(prios.windows(2).all(|w| w[0] >= w[1]), "most urgent first: {prios:?}");
    assert_eq!(relay.lease(LeaseRequest::new(["a", "b"]).max(10)).unwrap().len(), 3);
}

pub fn stats_counts_and_oldest_age(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    for _ in 0..3 {
        relay.submit(NewJob::new("a", "k", Vec::new())).unwrap();
    }
    relay
        .submit(NewJob::new("b", "k", Vec::new()).delay(Duration::from_secs(3600)))
        .unwrap();
    clock.advance(Duration::from_secs(5));
    let l = relay.lease(LeaseRequest::new(["a"])).unwrap().remove(0);
    relay.ack(l.id, l.token, None).unwrap();
    let s = relay.stats().unwrap();
    let a = &s.queues["a"];
    assert_eq!(
        (
            a.counts[&JobState::Ready],
            a.counts[&JobState::Succeeded],
            a.counts[&JobState::Dead]
        ),
        (2, 1, 0)
    );
    assert_eq!(a.oldest_ready_age, Some(Duration::from_secs(5)));
    let b = &s.queues["b"];
    assert_eq!((b.counts[&JobState::Ready], b.counts[&JobState::Scheduled]), (0, 1));
    assert_eq!(b.oldest_ready_age, None, "a delayed job is not yet waiting");
}

pub fn jobs_survive_reopen(new_db: &NewDb) {
    let db = new_db();
    let (options, _clock) = clocked();
    let relay = db.open(options.clone()).unwrap();
    let id = relay.submit(NewJob::new("q", "k", b"keep".to_vec())).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    drop(relay);
    let relay = db.open(options).unwrap();
    let job = relay.get(id).unwrap();
    assert_eq!((job.state(), job.payload.as_slice()), (JobState::Leased, &b"keep"[..]));
    relay.ack(id, l.token, None).unwrap();
}

pub fn lease_wait_is_woken_by_submit(new_db: &NewDb) {
    let db = new_db();
    // Polling far above the bound below: only the wake-up can pass it.
    let relay = db
        .open(relay::Options {
            poll_interval: Duration::from_secs(3600),
            ..relay::Options::default()
        })
        .unwrap();
    let waiter = relay.clone();
    let t = std::thread::spawn(move || {
        let start = Instant::now();
        let got = waiter
            .lease(LeaseRequest::new(["q"]).wait(Duration::from_secs(60)))
            .unwrap();
        (got, start.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100));
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let (got, waited) = t.join().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, id);
    assert!(
        waited < Duration::from_secs(30),
        "woken by the submit, not the timeout: {waited:?}"
    );
}

pub fn lease_wait_times_out_empty(new_db: &NewDb) {
    let db = new_db();
    let relay = db.open(relay::Options::default()).unwrap();
    relay.submit(NewJob::new("other", "k", Vec::new())).unwrap();
    let start = Instant::now();
    let got = relay
        .lease(LeaseRequest::new(["q"]).wait(Duration::from_millis(300)))
        .unwrap();
    assert!(got.is_empty());
    assert!(start.elapsed() >= Duration::from_millis(300));
}

pub fn async_api_round_trip(new_db: &NewDb) {
    let db = new_db();
    let relay = db.open(relay::Options::default()).unwrap().to_async();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async move {
        let waiter = relay.clone();
        let wait = tokio::spawn(async move {
            waiter
                .lease(LeaseRequest::new(["q"]).wait(Duration::from_secs(60)))
                .await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let id = relay.submit(NewJob::new("q", "k", b"x".to_vec())).await.unwrap();
        let l = wait.await.unwrap().unwrap().remove(0);
        assert_eq!(l.id, id);
        relay.extend(id, l.token, Duration::from_secs(60)).await.unwrap();
        relay.ack(id, l.token, None).await.unwrap();
        assert_eq!(relay.get(id).await.unwrap().state(), JobState::Succeeded);
        assert_eq!(relay.events(id).await.unwrap().len(), 3);
        assert!(matches!(
            relay.nack(id, l.token, "late", None).await,
            Err(Error::InvalidState {
                state: JobState::Succeeded,
                ..
            })
        ));
    });
}

pub fn complete_batch_settles_each_job_alone(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    for _ in 0..3 {
        relay.submit(NewJob::new("q", "k", Vec::new()).max_attempts(2)).unwrap();
    }
    let l = relay.lease(LeaseRequest::new(["q"]).max(3)).unwrap();
    let (a, b, c) = (&l[0], &l[1], &l[2]);
    let results = relay
        .complete_batch(vec![
            relay::Completion::ack(a.id, a.token, Some(b"done".to_vec())),
            relay::Completion::nack(b.id, b.token, "later", Some(Duration::from_secs(60))),
            relay::Completion::ack(c.id, LeaseToken(c.token.0 + 1), None),
            relay::Completion::nack_permanent(JobId(9999), LeaseToken(1), "gone"),
        ])
        .unwrap();
    assert_eq!(results.len(), 4);
    assert_eq!(results[0].as_ref().unwrap().state, JobState::Succeeded);
    assert_eq!(results[1].as_ref().unwrap().state, JobState::Retrying);
    assert!(matches!(results[2], Err(Error::LeaseLost { .. })));
    assert!(matches!(results[3], Err(Error::NotFound { .. })));
    assert_eq!(relay.get(a.id).unwrap().result.as_deref(), Some(&b"done"[..]));
    assert_eq!(relay.get(b.id).unwrap().status.last_error.as_deref(), Some("later"));
    assert_eq!(
        relay.get(c.id).unwrap().state(),
        JobState::Leased,
        "the stale completion changed nothing"
    );
    let e = relay
        .complete_batch(vec![relay::Completion::ack(c.id, c.token, Some(vec![0; 2 << 20]))])
        .unwrap();
    assert!(matches!(e[..], [Err(Error::InvalidInput(_))]), "{e:?}");
    // One completion alone: its status, or its own error.
    let snoozed = relay
        .complete(relay::Completion::snooze(c.id, c.token, Duration::from_secs(60)))
        .unwrap();
    assert_eq!((snoozed.state, snoozed.attempts), (JobState::Scheduled, 0));
    let again = relay.complete(relay::Completion::ack(c.id, c.token, None)).unwrap_err();
    assert!(
        matches!(again, Error::InvalidState { .. } | Error::LeaseLost { .. }),
        "{again:?}"
    );
    assert_eq!(
        relay.get(c.id).unwrap().state(),
        JobState::Scheduled,
        "the refused ack changed nothing"
    );
}

pub fn finished_jobs_are_pruned_by_their_retention(new_db: &NewDb) {
    use relay::{Keep, Retention};
    let db = new_db();
    let (mut options, clock) = crate::clocked();
    let hour = Duration::from_secs(3600);
    // The defaults: SUCCEEDED an hour, DEAD forever, CANCELLED 7 days.
    options.retention = Retention {
        succeeded: Some(Keep::For(hour)),
        dead: Some(Keep::Forever),
        cancelled: None,
    };
    options.reap_interval = Duration::from_millis(20);
    let relay = db.open(options).unwrap();
    // "audit" keeps SUCCEEDED forever and CANCELLED a minute.
    let audit = Retention {
        succeeded: Some(Keep::Forever),
        dead: None,
        cancelled: Some(Keep::For(Duration::from_secs(60))),
    };
    relay.set_retention("audit", audit).unwrap();
    assert_eq!(relay.queue_stats("audit").unwrap().retention, audit, "read back");
    let finish = |queue: &str, outcome: JobState| {
        let id = relay.submit(NewJob::new(queue, "k", Vec::new())).unwrap();
        if outcome == JobState::Cancelled {
            relay.cancel(id).unwrap();
            return id;
        }
        let l = relay.lease(LeaseRequest::new([queue])).unwrap().remove(0);
        assert_eq!(l.id, id);
        match outcome {
            JobState::Succeeded => relay.ack(id, l.token, None).unwrap(),
            _ => drop(relay.nack_permanent(id, l.token, "bad").unwrap()),
        }
        id
    };
    let q_ok = [finish("q", JobState::Succeeded), finish("q", JobState::Succeeded)];
    let q_dead = finish("q", JobState::Dead);
    let q_cancelled = finish("q", JobState::Cancelled);
    let audit_ok = finish("audit", JobState::Succeeded);
    let audit_cancelled = finish("audit", JobState::Cancelled);
    clock.advance(2 * hour);
    let fresh = finish("q", JobState::Succeeded);
    let q_ready = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    // The engine prunes by itself on its idle ticks.
    let deadline = Instant::now() + Duration::from_secs(20);
    while relay.get(q_ok[1]).is_ok() || relay.get(audit_cancelled).is_ok() {
        assert!(Instant::now() < deadline, "finished jobs were never pruned");
        std::thread::sleep(Duration::from_millis(20));
    }
    let gone = |id: JobId| {
        matches!(relay.get(id), Err(Error::NotFound { .. })) && matches!(relay.events(id), Err(Error::NotFound { .. }))
    };
    assert!(gone(q_ok[0]) && gone(q_ok[1]), "SUCCEEDED past the default hour");
    assert!(gone(audit_cancelled), "CANCELLED past the queue's own minute");
    for (id, why) in [
        (q_dead, "DEAD is kept forever by default"),
        (q_cancelled, "CANCELLED is kept 7 days when nothing says otherwise"),
        (q_ready, "an unfinished job is never pruned"),
        (fresh, "a recent one is kept"),
        (audit_ok, "the queue keeps SUCCEEDED forever"),
    ] {
        assert!(relay.get(id).is_ok(), "job {id}: {why}");
    }
    assert_eq!(relay.prune().unwrap(), 0, "nothing more is due");
    clock.advance(8 * 24 * hour);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(gone(fresh) && gone(q_cancelled)) {
        assert!(
            Instant::now() < deadline,
            "the recent one and the week-old CANCELLED were never pruned"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The engine's pass reached the table's end: its next is 10 s away on
    // this clock, which stands still from here on.
    // A retention set later applies to jobs that finished before it.
    relay
        .set_retention(
            "q",
            Retention {
                dead: Some(Keep::For(Duration::ZERO)),
                ..Retention::default()
            },
        )
        .unwrap();
    assert_eq!(relay.prune().unwrap(), 1);
    assert!(gone(q_dead));
    for id in [q_ready, audit_ok] {
        assert!(relay.get(id).is_ok(), "job {id} kept");
    }
    let stats = relay.stats().unwrap();
    assert_eq!(stats.queues["q"].counts[&JobState::Dead], 0, "counts follow the prune");
    assert_eq!(stats.queues["q"].counts[&JobState::Ready], 1);
    assert_eq!(stats.queues["audit"].counts[&JobState::Succeeded], 1);
    // Out of range: refused, nothing changed.
    let long = Retention {
        cancelled: Some(Keep::For(Duration::from_secs(11 * 366 * 86_400))),
        ..Retention::default()
    };
    assert!(matches!(relay.set_retention("audit", long), Err(Error::InvalidInput(e)) if e.field == "cancelled"));
    assert_eq!(relay.queue_stats("audit").unwrap().retention, audit);
}

/// The prune goes through the table a window at a time and on past jobs
/// it keeps: more finished jobs than one window holds, kept forever at the
/// front of the table, do not hide later ones that are due.
pub fn the_prune_goes_past_the_jobs_it_keeps(new_db: &NewDb) {
    use relay::{Keep, Retention};
    let db = new_db();
    let (mut options, clock) = crate::clocked();
    options.reap_interval = Duration::from_millis(20);
    let relay = db.open(options).unwrap();
    relay.set_retention("keep", Retention::all(Keep::Forever)).unwrap();
    relay
        .set_retention("drop", Retention::all(Keep::For(Duration::ZERO)))
        .unwrap();
    // More than one window (relay_store::PRUNE_SCAN, 5,000 jobs).
    let kept = 5_500;
    let mut ids = Vec::new();
    for _ in 0..kept / 500 {
        ids.extend(
            relay
                .submit_batch((0..500).map(|_| NewJob::new("keep", "k", Vec::new())).collect())
                .unwrap(),
        );
    }
    assert_eq!(
        relay
            .cancel_matching(&JobFilter {
                queue: Some("keep".into()),
                ..JobFilter::default()
            })
            .unwrap(),
        kept as u64
    );
    let dropped: Vec<JobId> = (0..10)
        .map(|_| {
            let id = relay.submit(NewJob::new("drop", "k", Vec::new())).unwrap();
            relay.cancel(id).unwrap();
            id
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while dropped.iter().any(|id| relay.get(*id).is_ok()) {
        assert!(
            Instant::now() < deadline,
            "jobs behind a window of kept ones were never pruned"
        );
        clock.advance(Duration::from_secs(2));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(relay.get(ids[0]).is_ok() && relay.get(ids[kept - 1]).is_ok());
    assert_eq!(
        relay.queue_stats("keep").unwrap().counts[&JobState::Cancelled],
        kept as u64
    );
}

/// Stats a page at a time (issue 24, item 9: one answer held every queue,
/// 18 MB with 100,000 of them): pages in byte order with a cursor, paused
/// and limited queues without jobs among them, every queue once; totals
/// over every queue; the busiest queues by READY jobs, padded by name;
/// the throughput of one queue and of all summed.
pub fn stats_come_a_page_at_a_time(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    // q00..q24, with 1..=25 READY jobs (q24 the busiest), one DEAD job in
    // q03, "Z" (before "q" in byte order) paused with no job, "qx" limited.
    let mut jobs = Vec::new();
    for i in 0..25 {
        for _ in 0..=i {
            jobs.push(NewJob::new(format!("q{i:02}"), "k", Vec::new()));
        }
    }
    relay.submit_batch(jobs).unwrap();
    let dead = relay.submit(NewJob::new("d", "k", Vec::new()).max_attempts(1)).unwrap();
    let l = relay.lease(LeaseRequest::new(["d"])).unwrap().remove(0);
    relay.nack(l.id, l.token, "boom", None).unwrap();
    assert_eq!(relay.get(dead).unwrap().state(), JobState::Dead);
    relay.pause("Z").unwrap();
    relay
        .set_queue_limits(
            "qx",
            relay::QueueLimits {
                max_leased_per_group: None,
                max_leased: Some(2),
                rate: None,
                poison_after: None,
            },
        )
        .unwrap();
    let all = relay.stats().unwrap();
    assert_eq!(all.queues.len(), 28, "{:?}", all.queues.keys());

    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = relay.stats_page(after.as_deref(), 6).unwrap();
        assert!(page.queues.len() <= 6);
        for (name, st) in &page.queues {
            assert_eq!(Some(st), all.queues.get(name), "{name} as in stats()");
        }
        seen.extend(page.queues.keys().cloned());
        match page.next {
            Some(n) => {
                assert_eq!(page.queues.len(), 6);
                assert_eq!(page.queues.keys().last(), Some(&n));
                after = Some(n);
            }
            None => break,
        }
    }
    assert_eq!(
        seen,
        all.queues.keys().cloned().collect::<Vec<_>>(),
        "every queue once, in order"
    );
    assert_eq!(seen[0], "Z");
    // One queue by name: as stats() has it, its neighbours aside; a queue
    // nothing has used counts zero; a name that is not a queue's is refused.
    for name in ["Z", "qx", "q07", "q24", "d"] {
        assert_eq!(Some(&relay.queue_stats(name).unwrap()), all.queues.get(name), "{name}");
    }
    assert_eq!(
        relay.queue_stats("q0").unwrap(),
        relay::QueueStats::empty(),
        "a prefix of q00.."
    );
    assert!(matches!(relay.queue_stats("x y"), Err(Error::InvalidInput(_))));
    assert!(relay.stats_page(None, 0).is_err(), "a page of none");
    let past = relay.stats_page(Some("zzz"), 10).unwrap();
    assert_eq!((past.queues.len(), past.next), (0, None));
    // `after` is a queue's name: anything else (a NUL, which PostgreSQL
    // refuses as text, or an empty name) is the caller's error, not the
    // store's.
    for bad in ["a\0b", "", "x y"] {
        assert!(
            matches!(relay.stats_page(Some(bad), 10), Err(Error::InvalidInput(ref e)) if e.field == "after"),
            "{bad:?}"
        );
    }

    let t = relay.queue_totals().unwrap();
    assert_eq!(t.counts[&JobState::Ready], (1..=25).sum::<u64>());
    assert_eq!(t.counts[&JobState::Dead], 1);
    assert_eq!(t.counts[&JobState::Leased], 0);
    assert_eq!((t.queues, t.paused), (28, 1));

    let top = relay.busiest_queues(3).unwrap();
    assert_eq!(top.queues.keys().collect::<Vec<_>>(), ["q22", "q23", "q24"]);
    assert_eq!(top.queues["q24"], all.queues["q24"]);
    // Fewer queues with READY jobs than asked: the rest by name.
    let padded = relay.busiest_queues(27).unwrap();
    assert_eq!(padded.queues.len(), 27);
    assert!(padded.queues.contains_key("Z") && padded.queues.contains_key("d"));
    assert!(!padded.queues.contains_key("qx"), "the last by name is left out");
    assert_eq!(relay.busiest_queues(100).unwrap(), all);

    let since = Timestamp::from_millis(0);
    let q24 = relay.throughput_of(since, Some("q24")).unwrap();
    assert_eq!(q24.iter().map(|r| r.submitted).sum::<u64>(), 25);
    assert!(q24.iter().all(|r| r.queue == "q24"));
    let every = relay.throughput_of(since, None).unwrap();
    assert_eq!(
        every.iter().map(|r| r.submitted).sum::<u64>(),
        (1..=25).sum::<u64>() + 1
    );
    assert_eq!(every.iter().map(|r| r.dead).sum::<u64>(), 1);
    let per_minute: Vec<_> = every.iter().map(|r| r.minute).collect();
    assert!(
        per_minute.windows(2).all(|w| w[0] < w[1]),
        "a row a minute, oldest first"
    );
}

/// A lease holder's progress is kept on the job (the latest, with the
/// attempt that made it) and logged as a "progress" event; a stale token,
/// an expired lease, a fraction outside 0-1 or an oversized message are
/// refused and change nothing; a finished job keeps its last report, and
/// a later attempt's report replaces it.
pub fn progress_is_kept_on_the_job(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "import", b"{}".to_vec())).unwrap();
    let lease_for = Duration::from_secs(30);
    let l = relay
        .lease(LeaseRequest::new(["q"]).lease_for(lease_for))
        .unwrap()
        .remove(0);
    assert_eq!(relay.get(id).unwrap().progress, None);
    clock.advance(Duration::from_secs(1));
    relay.progress(id, l.token, 0.25, Some("page 1 of 4")).unwrap();
    let at = clock.now();
    let want = relay::Progress {
        fraction: 0.25,
        message: Some("page 1 of 4".into()),
        at,
        attempt: 1,
        token: l.token.0,
    };
    assert_eq!(relay.get(id).unwrap().progress.as_ref(), Some(&want));
    let events = relay.events(id).unwrap();
    let last = events.last().unwrap();
    assert_eq!(last.kind, "progress");
    assert_eq!(last.data["fraction"], 0.25);
    assert_eq!(last.data["message"], "page 1 of 4");
    let before = kinds(&relay, id).len();
    for bad in [
        relay.progress(id, LeaseToken(l.token.0 + 1), 0.5, None),
        relay.progress(id, l.token, 1.5, None),
        relay.progress(id, l.token, f64::NAN, None),
        relay.progress(id, l.token, 0.5, Some(&"x".repeat(1025))),
        relay.progress(JobId(999), l.token, 0.5, None),
    ] {
        assert!(
            matches!(
                bad,
                Err(Error::LeaseLost { .. } | Error::InvalidInput(_) | Error::NotFound { .. })
            ),
            "{bad:?}"
        );
    }
    assert_eq!(
        relay.get(id).unwrap().progress.as_ref(),
        Some(&want),
        "refused reports change nothing"
    );
    assert_eq!(kinds(&relay, id).len(), before);
    // Its lease expired: the report is refused, the last one kept.
    clock.advance(lease_for);
    assert!(matches!(
        relay.progress(id, l.token, 0.75, None),
        Err(Error::LeaseLost { .. })
    ));
    // The next attempt reports its own; it stays once the job succeeds.
    let l2 = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!((l2.id, l2.attempt), (id, 2));
    let left = relay.get(id).unwrap();
    let earlier = left.progress.as_ref().unwrap();
    assert_eq!(earlier, &want, "kept until the next report");
    assert!(!earlier.is_current(&left.status), "and told apart as the first lease's");
    relay.progress(id, l2.token, 1.0, None).unwrap();
    relay.ack(id, l2.token, None).unwrap();
    let kept = relay.get(id).unwrap().progress.unwrap();
    assert_eq!((kept.fraction, kept.message.as_deref(), kept.attempt), (1.0, None, 2));
    assert!(kept.is_current(&relay.get(id).unwrap().status));
    // A release gives the attempt back: the next lease has the same
    // attempt number, and the report is still told apart by its lease.
    let other = relay.submit(NewJob::new("q", "import", Vec::new())).unwrap();
    let l3 = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    relay.progress(other, l3.token, 0.5, None).unwrap();
    relay.release(other, l3.token).unwrap();
    let l4 = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!((l4.id, l4.attempt), (other, l3.attempt));
    let again = relay.get(other).unwrap();
    assert!(!again.progress.unwrap().is_current(&again.status));
    assert!(matches!(
        relay.progress(id, l2.token, 1.0, None),
        Err(Error::InvalidState { .. })
    ));
}

/// `Relay::metrics` counts leases reclaimed after they expired and calls
/// refused because their lease was lost (what `/metrics` exports as
/// `relay_leases_expired_total` and `relay_leases_lost_total`).
pub fn expired_and_lost_leases_are_counted(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let lease_for = Duration::from_secs(30);
    let first = relay
        .lease(LeaseRequest::new(["q"]).lease_for(lease_for))
        .unwrap()
        .remove(0);
    let before = relay.metrics();
    assert_eq!((before.leases_expired, before.leases_lost), (0, 0));
    clock.advance(lease_for + Duration::from_secs(1));
    let second = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!(second.id, id);
    assert_eq!(relay.metrics().leases_expired, 1, "the first lease was reclaimed");
    for _ in 0..2 {
        assert!(matches!(relay.ack(id, first.token, None), Err(Error::LeaseLost { .. })));
    }
    relay.ack(id, second.token, None).unwrap();
    let after = relay.metrics();
    assert_eq!((after.leases_expired, after.leases_lost), (1, 2));
}

/// `Relay::queue_waits`: how long each leased job waited since it became
/// ready, by queue and kind (`relay_queue_wait_seconds` in `/metrics`).
pub fn queue_waits_are_histograms_by_queue_and_kind(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    assert!(relay.queue_waits().is_empty());
    relay.submit(NewJob::new("mail", "send", Vec::new())).unwrap();
    relay.submit(NewJob::new("mail", "send", Vec::new())).unwrap();
    relay.submit(NewJob::new("mail", "bounce", Vec::new())).unwrap();
    clock.advance(Duration::from_secs(2));
    let leased = relay.lease(LeaseRequest::new(["mail"]).max(3)).unwrap();
    assert_eq!(leased.len(), 3);
    // A refused lease call counts nothing.
    assert!(relay.lease(LeaseRequest::new(["mail"])).unwrap().is_empty());
    let waits = relay.queue_waits();
    let pairs: Vec<(&str, &str, u64)> = waits
        .iter()
        .map(|w| (w.queue.as_str(), w.kind.as_str(), w.count))
        .collect();
    assert_eq!(pairs, [("mail", "bounce", 1), ("mail", "send", 2)]);
    let send = &waits[1];
    assert!((send.sum - 4.0).abs() < 1e-9, "two waits of 2 s: {}", send.sum);
    let le = |bound: f64| {
        let i = relay::WAIT_BUCKETS.iter().position(|b| *b == bound).unwrap();
        send.buckets[i]
    };
    assert_eq!((le(1.0), le(5.0), le(3600.0)), (0, 2, 2), "cumulative buckets");
}

/// Each attempt's end is counted by outcome under the queue and kind of its
/// lease, and its lease's run time observed: an ack (succeeded), a nack
/// with attempts left (failed) or for good (dead), an expiry reclaimed by
/// this Relay (expired); an end of a lease another Relay handed out counts
/// under `(other)`, without a run time. Nothing counts for a refused call.
pub fn outcomes_and_run_times_by_queue_and_kind(new_db: &NewDb) {
    use relay::Outcome;
    let db = new_db();
    let (options, clock) = crate::clocked();
    let relay = db.open(options.clone()).unwrap();
    assert!(relay.job_outcomes().is_empty() && relay.job_runs().is_empty());
    let job = |kind: &str| NewJob::new("mail", kind, Vec::new()).max_attempts(2);
    for kind in ["send", "send", "send", "bounce"] {
        relay.submit(job(kind)).unwrap();
    }
    let l = relay
        .lease(LeaseRequest::new(["mail"]).max(4).lease_for(Duration::from_secs(30)))
        .unwrap();
    assert_eq!(l.len(), 4);
    clock.advance(Duration::from_secs(3));
    relay.ack(l[0].id, l[0].token, None).unwrap();
    relay.nack(l[1].id, l[1].token, "later", None).unwrap();
    relay.nack_permanent(l[2].id, l[2].token, "never").unwrap();
    // A refused ack (a stale token) counts nothing.
    assert!(
        relay.ack(l[0].id, l[0].token, None).is_ok(),
        "a repeated ack is answered Ok"
    );
    assert!(relay.ack(l[3].id, relay::LeaseToken(l[3].token.0 + 1), None).is_err());
    // The "bounce" lease expires and this Relay reclaims it.
    clock.advance(Duration::from_secs(30));
    relay.reap_expired().unwrap();
    let outcomes = |r: &relay::Relay| -> Vec<(String, String, Outcome, u64)> {
        r.job_outcomes()
            .into_iter()
            .map(|o| (o.queue, o.kind, o.outcome, o.count))
            .collect()
    };
    let s = |x: &str| x.to_owned();
    assert_eq!(
        outcomes(&relay),
        [
            (s("mail"), s("bounce"), Outcome::Expired, 1),
            (s("mail"), s("send"), Outcome::Succeeded, 1),
            (s("mail"), s("send"), Outcome::Failed, 1),
            (s("mail"), s("send"), Outcome::Dead, 1),
        ]
    );
    let runs: Vec<(String, String, u64, f64)> = relay
        .job_runs()
        .into_iter()
        .map(|r| (r.queue, r.kind, r.count, r.sum))
        .collect();
    assert_eq!(
        runs,
        [(s("mail"), s("bounce"), 1, 33.0), (s("mail"), s("send"), 3, 9.0)],
        "each lease's run from its lease to its end"
    );
    // A lease handed out by another Relay on the same store, acked here.
    let other = db.open(options).unwrap();
    let id = other.submit(NewJob::new("digest", "send", Vec::new())).unwrap();
    let theirs = other.lease(LeaseRequest::new(["digest"])).unwrap().remove(0);
    assert_eq!(theirs.id, id);
    relay.ack(id, theirs.token, None).unwrap();
    assert!(outcomes(&relay).contains(&(s("(other)"), s("(other)"), Outcome::Succeeded, 1)));
    assert_eq!(
        relay.job_runs().iter().map(|r| r.count).sum::<u64>(),
        4,
        "no run time for it"
    );
    // A lease given back is no attempt's end: nothing more is counted.
    let before = outcomes(&relay);
    relay.submit(NewJob::new("digest", "wait", Vec::new())).unwrap();
    let given = relay.lease(LeaseRequest::new(["digest"])).unwrap().remove(0);
    relay.release(given.id, given.token).unwrap();
    assert_eq!(outcomes(&relay), before, "a release is no outcome");
}
