//! What only the PostgreSQL store has: LISTEN/NOTIFY wake-ups across Relay
//! processes, and the schema version check.

use relay::{LeaseRequest, NewJob, Options, Relay};
use relay_storetest::{pg::PgServer, PgDb, TestDb};
use std::time::{Duration, Instant};

#[test]
fn a_submit_in_one_relay_wakes_a_lessee_of_another_at_once() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url);
    // With a 60 s poll, only a notification can wake the waiter in time.
    let waiting = db
        .open(Options {
            poll_interval: Duration::from_secs(60),
            ..Options::default()
        })
        .unwrap();
    let other = db.open(Options::default()).unwrap();
    let start = Instant::now();
    let got = std::thread::scope(|s| {
        let w = s.spawn(|| {
            waiting
                .lease(LeaseRequest::new(["q"]).wait(Duration::from_secs(30)))
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        other.submit(NewJob::new("q", "k", Vec::new())).unwrap();
        w.join().unwrap()
    });
    assert_eq!(got.len(), 1);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "woken by NOTIFY, not by polling: {:?}",
        start.elapsed()
    );
}

/// Regression (issue 24, item 7): the LISTEN thread woke waiting lessees
/// only once notifications had stopped coming for 500 ms, so a job
/// committed through `relay_submit` was leased a poll later, never at its
/// commit. With the poll an hour away, each lease must follow its commit
/// closely.
#[test]
fn a_notification_wakes_a_lessee_at_the_commit() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    let relay = db
        .open(Options {
            poll_interval: Duration::from_secs(3600),
            ..Options::default()
        })
        .unwrap();
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut waits = Vec::new();
    for _ in 0..5 {
        let before = relay.metrics().operations;
        let (committed, leased) = std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let got = relay
                    .lease(LeaseRequest::new(["woken"]).wait(Duration::from_secs(60)))
                    .unwrap();
                (got, Instant::now())
            });
            while relay.metrics().operations == before {
                std::thread::yield_now(); // until the waiter's claim found nothing
            }
            std::thread::sleep(Duration::from_millis(50));
            c.batch_execute("SELECT relay_submit('woken', 'k')").unwrap();
            let committed = Instant::now();
            let (got, at) = waiter.join().unwrap();
            assert_eq!(got.len(), 1);
            (committed, at)
        });
        waits.push(leased.saturating_duration_since(committed));
    }
    waits.sort();
    assert!(
        waits[2] < Duration::from_millis(250),
        "a lessee is woken at the commit, not 500 ms of quiet later: {waits:?}"
    );
}

/// A blocking caller that finds the writer idle commits its own operation
/// (no hop to the writer thread and back), but not from inside an async
/// runtime: the writer's connection runs on a runtime of its own, which
/// cannot be entered from another. There, blocking calls go to the writer
/// thread, and opening and reads (whose drivers run runtimes of their own
/// too) run on a thread of their own: every blocking call works from async
/// code, as on SQLite.
#[test]
fn blocking_calls_from_inside_an_async_runtime_are_answered() {
    let db = PgDb::fresh();
    // Outside a runtime: the caller's own thread commits.
    let outside = db.open(Options::default()).unwrap();
    let first = outside.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    assert_eq!(outside.metrics().caller_batches, 1, "{:?}", outside.metrics());
    for (round, flavour) in ["current_thread", "multi_thread"].into_iter().enumerate() {
        let rt = match flavour {
            "current_thread" => tokio::runtime::Builder::new_current_thread().build(),
            _ => tokio::runtime::Builder::new_multi_thread().worker_threads(1).build(),
        }
        .unwrap();
        rt.block_on(async {
            let relay = db.open(Options::default()).unwrap();
            let id = relay.submit(NewJob::new("q", "k", b"{}".to_vec())).unwrap();
            // Inside one, the writer thread did.
            assert_eq!(relay.metrics().caller_batches, 0, "{flavour}");
            let got = relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap();
            assert!(got.iter().any(|j| j.id == id), "{flavour}");
            for j in got {
                relay.ack(j.id, j.token, None).unwrap();
            }
            assert_eq!(relay.get(id).unwrap().state(), relay::JobState::Succeeded, "{flavour}");
            let kinds: Vec<String> = relay.events(id).unwrap().into_iter().map(|e| e.kind).collect();
            assert_eq!(kinds, ["submitted", "leased", "succeeded"], "{flavour}");
            // The first job and one more each round.
            let succeeded = relay.stats().unwrap().queues["q"].counts[&relay::JobState::Succeeded];
            assert_eq!(succeeded, round as u64 + 2, "{flavour}");
            // The async face, from the same runtime, reads the same.
            let a = relay.to_async();
            assert_eq!(
                a.get(id).await.unwrap().state(),
                relay::JobState::Succeeded,
                "{flavour}"
            );
            // Dropped inside the runtime too.
            drop(a);
            drop(relay);
        });
    }
    assert_eq!(outside.get(first).unwrap().state(), relay::JobState::Succeeded);
}

#[test]
fn a_newer_schema_is_refused() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    drop(db.open(Options::default()).unwrap());
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client.batch_execute("UPDATE relay_schema SET version = 99").unwrap();
    let e = db.open(Options::default()).unwrap_err();
    assert!(e.to_string().contains("schema version 99 is newer"), "{e}");
    let _ = Relay::in_memory();
}

/// A queue's settings row that does not decode holds that queue only (as
/// if paused), not every batch that claims from it; resuming writes it
/// whole again. A corrupt schedule row is skipped, named by the listing,
/// and can be removed. (The SQLite side: relay/tests/sqlite_file.rs.)
#[test]
fn corrupt_queue_and_schedule_rows_fail_alone_and_can_be_repaired() {
    let url = PgServer::shared().new_database();
    let options = Options {
        scheduler: false,
        ..Options::default()
    };
    let relay = PgDb::fresh_at(url.clone()).open(options).unwrap();
    let limits = relay::QueueLimits {
        max_leased_per_group: None,
        max_leased: Some(3),
        rate: None,
        poison_after: None,
    };
    relay.set_queue_limits("q", limits).unwrap();
    relay.submit(relay::NewJob::new("q", "k", Vec::new())).unwrap();
    relay.submit(relay::NewJob::new("other", "k", Vec::new())).unwrap();
    let every = std::time::Duration::from_secs(1);
    relay
        .add_schedule(relay::NewSchedule::every(
            "s",
            every,
            relay::NewJob::new("q", "k", Vec::new()),
        ))
        .unwrap();
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client
        .batch_execute(
            "UPDATE relay_queues SET max_leased = -3 WHERE name = 'q';
             UPDATE relay_schedules SET cron = 'not a cron', every_ms = NULL WHERE name = 's';",
        )
        .unwrap();
    let got = relay.lease(relay::LeaseRequest::new(["q", "other"]).max(5)).unwrap();
    assert_eq!(got.iter().map(|l| l.queue.as_str()).collect::<Vec<_>>(), ["other"]);
    assert!(relay.stats().unwrap().queues["q"].paused);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(relay.run_schedules().unwrap(), 0);
    assert!(matches!(relay.schedules(), Err(relay::Error::Corrupt { .. })));
    relay.resume("q").unwrap();
    assert_eq!(relay.lease(relay::LeaseRequest::new(["q"])).unwrap().len(), 1);
    relay.remove_schedule("s").unwrap();
    assert!(relay.schedules().unwrap().is_empty());
}

/// Issue 6, acceptance 2 (issue 11: four processes): four Relay processes
/// on one PostgreSQL, 8 workers each, 30,000 jobs; one process is killed
/// with SIGKILL midway. Every job
/// ends SUCCEEDED, no job is acknowledged twice, no token is accepted twice,
/// and the killed process's leases run again elsewhere after they expire.
#[test]
fn four_processes_share_one_database_and_survive_a_kill_9() {
    four_processes_and_a_kill_9(true, 30_000, false);
}

/// The same with every process reaching the database through PgBouncer
/// in transaction mode (`RELAY_PG_POOLER=transaction`, `LISTEN` on the
/// direct URL): their transactions share the pool's server sessions.
#[test]
fn four_processes_through_pgbouncer_survive_a_kill_9() {
    four_processes_and_a_kill_9(true, 10_000, true);
}

/// The same with `SKIP LOCKED` turned off in every process
/// (`RELAY_PG_SKIP_LOCKED=off`): candidates another process holds are
/// waited for and checked again, and still no job is run twice.
#[test]
fn four_processes_without_skip_locked_survive_a_kill_9() {
    four_processes_and_a_kill_9(false, 10_000, false);
}

fn four_processes_and_a_kill_9(skip_locked: bool, total: usize, pooled: bool) {
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    const CHILD: &str = env!("CARGO_BIN_EXE_relay-testchild");
    let url = PgServer::shared().new_database();
    let relay = PgDb::fresh_at(url.clone()).open(Options::default()).unwrap();
    let (child_url, pooler) = if pooled {
        let name = url.rsplit_once('/').unwrap().1;
        (relay_storetest::pg::PgBouncer::shared().url_of(name), "transaction")
    } else {
        (url.clone(), "none")
    };
    for chunk in 0..total / 1000 {
        relay
            .submit_batch(
                (0..1000)
                    .map(|i| NewJob::new("q", "k", format!("{chunk}-{i}").into_bytes()))
                    .collect(),
            )
            .unwrap();
    }
    let mut children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(CHILD)
                .args(["work", &child_url, "8", "0"])
                .env("RELAY_PG_SKIP_LOCKED", if skip_locked { "on" } else { "off" })
                .env("RELAY_PG_POOLER", pooler)
                .env("RELAY_PG_LISTEN_URL", &url)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();
    // Let the first process get well into the work, then kill it.
    let mut victim = children.remove(0);
    let mut out = BufReader::new(victim.stdout.take().unwrap());
    let mut lines = Vec::new();
    let mut line = String::new();
    while lines.len() < 2000 && out.read_line(&mut line).unwrap() > 0 {
        lines.push(std::mem::take(&mut line));
    }
    victim.kill().unwrap();
    victim.wait().unwrap();
    lines.extend(out.lines().map_while(Result::ok));
    // What the killed process leased and never reported done: each lease
    // either landed its ack just before the kill or ran again elsewhere.
    let mut held: HashMap<i64, i64> = HashMap::new();
    for l in &lines {
        let parts: Vec<&str> = l.split_whitespace().collect();
        if let [kind, id, token] = parts[..] {
            let (id, token): (i64, i64) = (id.parse().unwrap(), token.parse().unwrap());
            match kind {
                "L" => {
                    held.insert(id, token);
                }
                "ACK" | "LOST" => {
                    held.remove(&id);
                }
                _ => {}
            }
        }
    }
    for child in children {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "a surviving process failed: {:?}", o.status);
        lines.extend(String::from_utf8(o.stdout).unwrap().lines().map(str::to_owned));
    }
    let mut accepted: HashMap<i64, i64> = HashMap::new();
    for l in &lines {
        let parts: Vec<&str> = l.split_whitespace().collect();
        if parts.first() == Some(&"ACK") {
            let (id, token) = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
            assert!(accepted.insert(id, token).is_none(), "job {id} acknowledged twice");
        }
    }
    let jobs = relay
        .list(&relay::JobFilter {
            limit: 100_000,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(jobs.len(), total);
    let mut unreported = 0;
    for job in &jobs {
        assert_eq!(job.state(), relay::JobState::Succeeded, "job {}", job.id);
        match accepted.get(&job.id.0) {
            Some(token) => assert_eq!(
                *token, job.status.last_token.0,
                "job {}: the accepted token is its last",
                job.id
            ),
            None => unreported += 1, // acked by the killed process just before it died
        }
    }
    assert!(
        unreported <= 8,
        "{unreported} jobs succeeded without an acknowledgement being seen"
    );
    assert!(held.len() <= 8, "the killed process held {} leases at once", held.len());
    let by_id: HashMap<i64, &relay::Job> = jobs.iter().map(|j| (j.id.0, j)).collect();
    for (id, token) in &held {
        let job = by_id[id];
        let landed = job.status.last_token.0 == *token && !accepted.contains_key(id);
        let ran_again = job.status.attempts > 1 && job.status.last_token.0 != *token;
        assert!(
            landed || ran_again,
            "job {id}: leased by the killed process (token {token}), neither its ack landed nor did it run again: {:?}",
            job.status
        );
    }
    eprintln!(
        "the killed process held {} leases; {} ran again elsewhere",
        held.len(),
        held.keys().filter(|id| by_id[*id].status.attempts > 1).count()
    );
}

/// Promise 1 rests on the server's `fsync`; Relay reads it back and refuses
/// a server that runs without it, naming the setting.
#[test]
fn a_server_without_fsync_is_refused() {
    let server = PgServer::private("-c fsync=off");
    let url = server.url_of("postgres");
    match Relay::connect(&url, Options::default()) {
        Err(relay::Error::Open(e)) => {
            let text = e.to_string();
            assert!(text.contains("fsync") && text.contains("off"), "{text}");
        }
        Err(e) => panic!("expected an open error naming fsync, got {e}"),
        Ok(_) => panic!("a server with fsync = off was accepted"),
    }
}

/// A session that starts with `synchronous_commit = off` (here from the
/// URL) gets it turned back on for Relay's writer. Seen from the server, on
/// a server of the test's own: with it on, each of 20 submits in a row
/// waits for its own WAL flush (`pg_stat_wal.wal_sync` counts them); with
/// it off, COMMIT returns before the flush and the count hardly moves.
#[test]
fn a_session_without_synchronous_commit_is_put_right() {
    let server = PgServer::private("-c wal_writer_delay=10s");
    let url = format!("{}?options=-c%20synchronous_commit%3Doff", server.url_of("postgres"));
    let relay = Relay::connect(&url, Options::default()).unwrap();
    let mut probe = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let show: String = probe.query_one("SHOW synchronous_commit", &[]).unwrap().get(0);
    assert_eq!(show, "off", "the URL's option is in force for other sessions");
    // Backends publish their statistics when idle, at most once a second.
    let syncs = |c: &mut postgres::Client| -> i64 {
        std::thread::sleep(Duration::from_millis(2500));
        c.query_one("SELECT wal_sync FROM pg_stat_wal", &[]).unwrap().get(0)
    };
    let before = syncs(&mut probe);
    for _ in 0..20 {
        relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    }
    // Each writer's backend (a Relay runs two) publishes its own count
    // when it next idles: under load one may come seconds after the other.
    let mut flushed = syncs(&mut probe) - before;
    for _ in 0..4 {
        if flushed >= 18 {
            break;
        }
        flushed = syncs(&mut probe) - before;
    }
    assert!(
        flushed >= 18,
        "20 submits in a row made {flushed} WAL flushes: the writer commits without waiting for them"
    );
}

/// The writer's connection dropped (a server restart, a proxy, an admin's
/// pg_terminate_backend): the call that meets it fails with a typed error,
/// and later calls work on a new connection.
#[test]
fn the_writer_reconnects_after_its_connection_dropped() {
    let url = PgServer::shared().new_database();
    let relay = Relay::connect(&url, Options::default()).unwrap();
    let first = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    assert_eq!(relay.get(first).unwrap().kind, "k");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let killed: i64 = admin
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()) t",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(killed >= 1, "no connection of the Relay was found to drop");
    // The next call may meet the dead connection: a typed error, never a panic.
    match relay.submit(NewJob::new("q", "k", Vec::new())) {
        Ok(_) | Err(relay::Error::Storage(_) | relay::Error::MaybeApplied(_)) => {}
        Err(e) => panic!("unexpected error after the drop: {e:?}"),
    }
    let mut later = None;
    for _ in 0..3 {
        if let Ok(id) = relay.submit(NewJob::new("q", "after", Vec::new())) {
            later = Some(id);
            break;
        }
    }
    let later = later.expect("the writer never reconnected");
    let leased = relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap();
    assert!(leased.iter().any(|j| j.id == later));
    let mut read = None;
    for _ in 0..3 {
        if let Ok(job) = relay.get(later) {
            read = Some(job);
            break;
        }
    }
    assert_eq!(read.expect("reads never recovered").kind, "after");
}

/// A holder's ack planned from the status its Relay wrote when it leased
/// the job, refused there (the expiry it wrote has passed, but another
/// Relay extended the lease), and then not written because the server is
/// gone: the caller is told the server's failure, never the refusal of a
/// plan that was not the one applied ("lease lost" would tell a worker whose
/// lease still holds to drop its work).
#[test]
fn an_ack_planned_from_what_was_written_answers_what_was_applied() {
    let server = PgServer::private("");
    let url = server.new_database();
    let (mut options, clock) = relay_storetest::clocked();
    // No housekeeping due when the ack comes (it would read first): no
    // reap, no schedules.
    options.reap_interval = Duration::from_secs(365 * 24 * 3600);
    options.scheduler = false;
    let a = PgDb::fresh_at(url.clone()).open(options.clone()).unwrap();
    let b = PgDb::fresh_at(url).open(options).unwrap();
    let id = a.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let held = a
        .lease(LeaseRequest::new(["q"]).lease_for(Duration::from_secs(10)))
        .unwrap()
        .remove(0);
    b.extend(id, held.token, Duration::from_secs(60)).unwrap();
    clock.advance(Duration::from_secs(20));
    drop(b);
    drop(server); // stops it (immediate) and removes its files
    match a.ack(id, held.token, None) {
        Err(relay::Error::Storage(_) | relay::Error::MaybeApplied(_) | relay::Error::Busy) => {}
        other => panic!("the ack should fail with the server's failure, got {other:?}"),
    }
}

/// Regression: rows were read with `Row::get`, which panics on a type it
/// did not expect; in the writer thread that killed the writer and every
/// later call got `Closed`. A column of the wrong type (here: a hand-edited
/// schema) is now `Corrupt`, and the Relay goes on.
#[test]
fn a_column_of_the_wrong_type_is_corrupt_not_a_panic() {
    let url = PgServer::shared().new_database();
    let relay = Relay::connect(&url, Options::default()).unwrap();
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // A read connection decoding an event's kind.
    admin
        .batch_execute("ALTER TABLE relay_job_events ALTER COLUMN kind TYPE bytea USING convert_to(kind, 'UTF8')")
        .unwrap();
    let e = relay.events(id).unwrap_err();
    assert!(matches!(e, relay::Error::Corrupt { .. }), "{e:?}");
    // A writer decoding a job's id (in a database of its own, changed
    // before the Relay prepared any statement).
    let url = PgServer::shared().new_database();
    drop(Relay::connect(&url, Options::default()).unwrap());
    postgres::Client::connect(&url, postgres::NoTls)
        .unwrap()
        .batch_execute("ALTER TABLE relay_jobs ALTER COLUMN id TYPE integer")
        .unwrap();
    let relay = Relay::connect(&url, Options::default()).unwrap();
    let id = relay.submit(NewJob::new("q", "k2", Vec::new())).unwrap();
    for _ in 0..2 {
        // Twice: the writer is still alive for the second (not `Closed`).
        let e = relay.cancel(id).unwrap_err();
        assert!(matches!(e, relay::Error::Corrupt { .. }), "{e:?}");
    }
    assert!(relay.stats().is_ok());
}

/// Two processes (two writers) race on one unique key: one retries a
/// cancelled job that held it, the other submits a new job with it. Either
/// may win; the loser gets the winner's job (submit) or `Conflict` (retry),
/// and the jobs submitted beside the retry commit: never `Storage`.
/// Regression: the retry's UPDATE hit the unique index after the engine's
/// check and aborted the whole PostgreSQL transaction.
#[test]
fn a_retry_racing_a_submit_of_its_key_in_another_process_fails_alone() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url);
    let (a, b) = (
        db.open(Options::default()).unwrap(),
        db.open(Options::default()).unwrap(),
    );
    let mut conflicts = 0;
    for round in 0..40 {
        let key = format!("race-{round}");
        let old = a.submit(NewJob::new("q", "k", Vec::new()).unique_key(&key)).unwrap();
        a.cancel(old).unwrap();
        let barrier = std::sync::Barrier::new(6);
        let (retried, submitted, beside) = std::thread::scope(|s| {
            let r = s.spawn(|| {
                barrier.wait();
                a.retry(old)
            });
            let n = s.spawn(|| {
                barrier.wait();
                b.submit(NewJob::new("q", "k", Vec::new()).unique_key(&key))
            });
            let others: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        a.submit(NewJob::new("q", "other", Vec::new()))
                    })
                })
                .collect();
            let others: Vec<_> = others.into_iter().map(|h| h.join().unwrap()).collect();
            (r.join().unwrap(), n.join().unwrap(), others)
        });
        let submitted = submitted.unwrap_or_else(|e| panic!("round {round}: the submit failed: {e}"));
        match retried {
            Ok(()) => assert_eq!(submitted, old, "round {round}: the retry won, the submit must find it"),
            Err(relay::Error::Conflict { holder, .. }) => {
                assert_eq!(holder, submitted, "round {round}");
                conflicts += 1;
            }
            Err(e) => panic!("round {round}: the retry failed with {e:?}"),
        }
        for r in beside {
            r.unwrap_or_else(|e| panic!("round {round}: a submit beside the retry failed: {e}"));
        }
        a.cancel(submitted).unwrap();
    }
    eprintln!("{conflicts} of 40 rounds ended in Conflict");
}

/// Two processes submit the same two unique keys in opposite orders, each
/// in one batch: PostgreSQL makes one the victim of a deadlock, and that
/// batch is applied again instead of failing: both get the same two jobs.
#[test]
fn batches_of_one_keys_in_opposite_orders_both_succeed() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url);
    let (a, b) = (
        db.open(Options::default()).unwrap(),
        db.open(Options::default()).unwrap(),
    );
    // Each deadlock costs PostgreSQL's deadlock_timeout (1 s) to detect.
    for round in 0..8 {
        let (k1, k2) = (format!("x-{round}"), format!("y-{round}"));
        let job = |k: &str| NewJob::new("q", "k", Vec::new()).unique_key(k);
        let barrier = std::sync::Barrier::new(2);
        let (ra, rb) = std::thread::scope(|s| {
            let ha = s.spawn(|| {
                barrier.wait();
                a.submit_batch(vec![job(&k1), job(&k2)])
            });
            let hb = s.spawn(|| {
                barrier.wait();
                b.submit_batch(vec![job(&k2), job(&k1)])
            });
            (ha.join().unwrap(), hb.join().unwrap())
        });
        let ra = ra.unwrap_or_else(|e| panic!("round {round}: {e:?}"));
        let rb = rb.unwrap_or_else(|e| panic!("round {round}: {e:?}"));
        assert_eq!((ra[0], ra[1]), (rb[1], rb[0]), "round {round}: one key, two jobs");
    }
}

/// The claim's cost must not grow with queue depth, nor a finished job's
/// with the size of the dependency graph: PostgreSQL's own plans for the
/// candidate query, the next page of a class, and the read of a batch's
/// dependents use indexes, never a scan of the table or a sort, with the
/// planner's statistics for a deep queue and a big graph in place.
#[test]
fn the_claim_and_the_dependents_read_use_their_indexes() {
    let url = PgServer::shared().new_database();
    drop(PgDb::fresh_at(url.clone()).open(Options::default()).unwrap()); // migrates
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(
        "INSERT INTO relay_jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                                 finished_at, lease_token)
         SELECT 'q' || (i % 3), 'k', '', i % 4, CASE WHEN i % 10 = 0 THEN 'READY' ELSE 'SUCCEEDED' END, 0, 3, i, i,
                CASE WHEN i % 10 = 0 THEN NULL ELSE i END, 0
         FROM generate_series(1, 50000) AS i;
         INSERT INTO relay_job_deps (parent, child, on_failure)
         SELECT i, CASE WHEN i % 2 = 0 THEN 60000 ELSE i + 1 END, 'cancel' FROM generate_series(1, 50000) AS i;
         INSERT INTO relay_jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                                 lease_token, grp)
         SELECT 'q1', 'k', '', i % 4, 'READY', 0, 3, i, i, 0, 'g' || (i % 1000)
         FROM generate_series(1, 5000) AS i;",
    )
    .unwrap();
    // (A statement of its own: the heads are written when the jobs'
    // transaction commits.)
    c.batch_execute("ANALYZE;").unwrap();
    let plan = |c: &mut postgres::Client, sql: &str, args: &str| -> String {
        c.batch_execute(&format!("DEALLOCATE ALL; PREPARE s AS {sql}")).unwrap();
        c.query(&format!("EXPLAIN EXECUTE s({args})"), &[])
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let cases = [
        (
            "job_ready",
            include_str!("../../relay-postgres/sql/job_ready.sql"),
            "'q1', 100000, 8, false",
            "relay_jobs_ready",
        ),
        (
            "job_ready_after",
            include_str!("../../relay-postgres/sql/job_ready_after.sql"),
            "'q1', 2, 100000, 500, 500, 8",
            "relay_jobs_ready",
        ),
        (
            "job_dependents",
            include_str!("../../relay-postgres/sql/job_dependents.sql"),
            "ARRAY[10, 11, 12]::BIGINT[]",
            "relay_job_deps_pkey",
        ),
        (
            "job_ready (the groups' heads)",
            include_str!("../../relay-postgres/sql/job_ready.sql"),
            "'q1', 100000, 8, false",
            "relay_group_heads_turn",
        ),
        (
            "job_fair_after",
            include_str!("../../relay-postgres/sql/job_fair_after.sql"),
            "'q1', 1, 3, 500, 8",
            "relay_group_heads_turn",
        ),
        (
            "job_fair_after (the heads' jobs)",
            include_str!("../../relay-postgres/sql/job_fair_after.sql"),
            "'q1', 1, 3, 500, 8",
            "relay_jobs_group_turn",
        ),
        (
            "job_group_next",
            include_str!("../../relay-postgres/sql/job_group_next.sql"),
            "'q1', 1, ARRAY['g1', 'g5'], ARRAY[3, 4]::BIGINT[], ARRAY[500, 501]::BIGINT[], 8",
            "relay_jobs_group_turn",
        ),
    ];
    for (name, sql, args, index) in cases {
        let p = plan(&mut c, sql, args);
        // (The queue settings table holds a row per configured queue: a
        // scan of it is fine.)
        for table in ["relay_jobs", "relay_job_deps"] {
            assert!(
                !p.contains(&format!("Seq Scan on {table}")),
                "{name} scans {table}:\n{p}"
            );
        }
        assert!(!p.contains("Sort"), "{name} sorts:\n{p}");
        assert!(p.contains(index), "{name} does not use {index}:\n{p}");
    }
}

/// Transactional enqueue from any language: `relay_submit(...)` inside the
/// caller's own transaction. Rolled back: no job. Committed: the job, and a
/// lessee of another Relay woken by the NOTIFY at commit (its poll is a
/// minute). A bad argument aborts the caller's transaction with SQLSTATE
/// 22023 naming it; a held unique key returns that job. A client killed
/// with SIGKILL between its submit and its commit leaves no job.
#[test]
fn relay_submit_enqueues_inside_the_callers_transaction() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    let relay = db
        .open(Options {
            poll_interval: Duration::from_secs(60),
            ..Options::default()
        })
        .unwrap();
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let count =
        |c: &mut postgres::Client| -> i64 { c.query_one("SELECT count(*) FROM relay_jobs", &[]).unwrap().get(0) };

    let mut tx = c.transaction().unwrap();
    tx.execute("CREATE TABLE orders (id INT)", &[]).unwrap();
    tx.query_one(
        "SELECT relay_submit('emails', 'send', convert_to('{\"order\":1}', 'UTF8'))",
        &[],
    )
    .unwrap();
    tx.rollback().unwrap();
    assert_eq!(count(&mut c), 0, "rolled back: no job");

    let start = Instant::now();
    let got = std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            relay
                .lease(LeaseRequest::new(["emails"]).wait(Duration::from_secs(30)))
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        let mut tx = c.transaction().unwrap();
        tx.execute("CREATE TABLE orders (id INT)", &[]).unwrap();
        tx.execute("INSERT INTO orders VALUES (1)", &[]).unwrap();
        let id: i64 = tx
            .query_one(
                "SELECT relay_submit('emails', 'send', convert_to('{\"order\":1}', 'UTF8'), p_priority => 2)",
                &[],
            )
            .unwrap()
            .get(0);
        tx.commit().unwrap();
        (id, waiter.join().unwrap())
    });
    let (id, leased) = got;
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].id.0, id);
    assert_eq!(leased[0].payload, br#"{"order":1}"#);
    assert_eq!(leased[0].priority.get(), 2);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "woken by the commit's NOTIFY: {:?}",
        start.elapsed()
    );
    relay.ack(leased[0].id, leased[0].token, None).unwrap();
    let events = relay.events(leased[0].id).unwrap();
    assert_eq!(events[0].kind, "submitted");
    assert_eq!(events[0].data["via"], "relay_submit");
    assert_eq!(events.last().unwrap().kind, "succeeded");

    // A unique key held by an unfinished job: that job, nothing written.
    let first: i64 = c
        .query_one("SELECT relay_submit('q', 'k', '', p_unique_key => 'order-7')", &[])
        .unwrap()
        .get(0);
    let again: i64 = c
        .query_one(
            "SELECT relay_submit('q', 'k', '', p_unique_key => 'order-7', p_delay_ms => 5)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(first, again);

    // A group, as NewJob::group gives it.
    let grouped: i64 = c
        .query_one("SELECT relay_submit('tenants', 'k', '', p_group => 'tenant-42')", &[])
        .unwrap()
        .get(0);
    let leased = relay.lease(LeaseRequest::new(["tenants"])).unwrap();
    assert_eq!(
        leased.iter().map(|j| (j.id.0, j.group.as_deref())).collect::<Vec<_>>(),
        [(grouped, Some("tenant-42"))]
    );

    // Bad arguments: SQLSTATE 22023 naming the field; the caller's
    // transaction is aborted, so its own writes go too.
    let before = count(&mut c);
    for (call, field) in [
        ("relay_submit('bad queue!', 'k')", "queue"),
        ("relay_submit('q', '')", "kind"),
        ("relay_submit('q', 'k', '', p_priority => 9)", "priority"),
        ("relay_submit('q', 'k', '', p_delay_ms => -1)", "delay_ms"),
        ("relay_submit('q', 'k', '', p_max_attempts => 0)", "max_attempts"),
        ("relay_submit('q', 'k', NULL)", "payload"),
        ("relay_submit('q', 'k', '', p_group => '')", "group"),
    ] {
        let mut tx = c.transaction().unwrap();
        tx.execute("CREATE TABLE IF NOT EXISTS orders (id INT)", &[]).unwrap();
        tx.execute("INSERT INTO orders VALUES (2)", &[]).unwrap();
        let e = tx.query_one(&format!("SELECT {call}"), &[]).unwrap_err();
        let db_err = e.as_db_error().unwrap_or_else(|| panic!("{call}: {e}"));
        assert_eq!(db_err.code().code(), "22023", "{call}: {db_err}");
        assert!(
            db_err.message().contains(&format!("invalid {field}")),
            "{call}: {db_err}"
        );
        // PostgreSQL answers COMMIT of an aborted transaction with a
        // rollback: the caller's own row must be gone.
        let _ = tx.commit();
    }
    assert_eq!(count(&mut c), before, "nothing written by the refused calls");
    let orders: i64 = c
        .query_one("SELECT count(*) FROM orders WHERE id = 2", &[])
        .unwrap()
        .get(0);
    assert_eq!(orders, 0, "the callers' transactions were aborted");

    // SIGKILL between the submit and the commit: no orphan job.
    let before = count(&mut c);
    let mut psql = std::process::Command::new("psql")
        .args([url.as_str(), "-v", "ON_ERROR_STOP=1", "-q"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::{BufRead, Write};
        let mut stdin = psql.stdin.take().unwrap();
        writeln!(stdin, "BEGIN; SELECT relay_submit('killed', 'k'); \\echo SUBMITTED").unwrap();
        stdin.flush().unwrap();
        let mut out = std::io::BufReader::new(psql.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("SUBMITTED") {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "psql ended early");
        }
        psql.kill().unwrap(); // SIGKILL: the transaction never commits
        psql.wait().unwrap();
        drop(stdin);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let open: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'",
                &[],
            )
            .unwrap()
            .get(0);
        if open == 0 || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(count(&mut c), before, "the killed client's job does not exist");
}

/// Transactional enqueue from Rust on PostgreSQL: `AsyncRelay::submit_in_pg`
/// with a tokio-postgres transaction and `Relay::submit_in_pg` with the
/// synchronous driver's. Rolled back: no job. Committed: the job (with its
/// own lease length, timeout and trace context), leased by a waiting lessee
/// woken at the commit. What `relay_submit` cannot carry yet (dependencies)
/// and bad input are refused with a typed error before anything reaches
/// the caller's transaction.
#[test]
fn submit_in_pg_enqueues_inside_the_callers_transaction() {
    use relay::tokio_postgres;
    const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    let relay = db
        .open(Options {
            poll_interval: Duration::from_secs(60),
            ..Options::default()
        })
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let count = |c: &mut relay::postgres::Client| -> i64 {
        c.query_one("SELECT count(*) FROM relay_jobs", &[]).unwrap().get(0)
    };
    let mut sync = relay::postgres::Client::connect(&url, relay::postgres::NoTls).unwrap();
    sync.batch_execute("CREATE TABLE orders (id INT)").unwrap();

    // tokio-postgres: rolled back, then committed with a waiting lessee.
    let (id, leased, waited) = rt.block_on(async {
        let (mut client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        let a = relay.to_async();
        let tx = client.transaction().await.unwrap();
        tx.execute("INSERT INTO orders VALUES (1)", &[]).await.unwrap();
        a.submit_in_pg(&tx, NewJob::new("emails", "confirm", br#"{"order":1}"#.to_vec()))
            .await
            .unwrap();
        tx.rollback().await.unwrap();

        let waiter = {
            let relay = relay.clone();
            std::thread::spawn(move || {
                relay
                    .lease(LeaseRequest::new(["emails"]).wait(Duration::from_secs(30)))
                    .unwrap()
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let tx = client.transaction().await.unwrap();
        tx.execute("INSERT INTO orders VALUES (2)", &[]).await.unwrap();
        let id = a
            .submit_in_pg(
                &tx,
                NewJob::new("emails", "confirm", br#"{"order":2}"#.to_vec())
                    .priority(3)
                    .lease_for(Duration::from_secs(7))
                    .timeout(Duration::from_secs(5))
                    .traceparent(TRACE),
            )
            .await
            .unwrap();
        tx.commit().await.unwrap();
        let committed = Instant::now();
        let leased = tokio::task::spawn_blocking(move || waiter.join().unwrap())
            .await
            .unwrap();
        (id, leased, committed.elapsed())
    });
    assert_eq!(leased.len(), 1, "rolled back: no job; committed: one");
    assert_eq!((leased[0].id, leased[0].priority.get()), (id, 3));
    assert_eq!(leased[0].payload, br#"{"order":2}"#);
    assert_eq!(leased[0].lease_for, Duration::from_secs(7));
    assert_eq!(leased[0].timeout, Some(Duration::from_secs(5)));
    assert_eq!(leased[0].traceparent.as_deref(), Some(TRACE));
    assert!(
        waited < Duration::from_secs(10),
        "woken by the commit's NOTIFY: {waited:?}"
    );

    // The synchronous driver; a held unique key gives that job's id.
    let mut tx = sync.transaction().unwrap();
    let a = relay
        .submit_in_pg(&mut tx, NewJob::new("q", "k", Vec::new()).unique_key("order-3"))
        .unwrap();
    let b = relay
        .submit_in_pg(&mut tx, NewJob::new("q", "k", Vec::new()).unique_key("order-3"))
        .unwrap();
    assert_eq!(a, b);
    // A group: the job takes its group's turn like any other grouped job.
    let grouped = relay
        .submit_in_pg(&mut tx, NewJob::new("grouped", "k", Vec::new()).group("acme"))
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(relay.get(a).unwrap().state(), relay::JobState::Ready);
    let leased = relay.lease(LeaseRequest::new(["grouped"])).unwrap();
    assert_eq!(
        leased.iter().map(|j| (j.id, j.group.as_deref())).collect::<Vec<_>>(),
        [(grouped, Some("acme"))]
    );

    // relay_submit's jobs are in the counts and the throughput history as
    // the engine's own submits are (the rolled-back one and the
    // deduplicated one not at all).
    let hour_ago = relay::Timestamp::from_millis(relay::Clock::now(&relay::SystemClock).as_millis() - 3_600_000);
    let submitted = |q: &str| -> u64 {
        relay
            .throughput(hour_ago)
            .unwrap()
            .iter()
            .filter(|r| r.queue == q)
            .map(|r| r.submitted)
            .sum()
    };
    assert_eq!((submitted("emails"), submitted("q")), (1, 1));
    let stats = relay.stats().unwrap();
    assert_eq!(stats.queues["q"].counts[&relay::JobState::Ready], 1);
    assert_eq!(stats.queues["emails"].counts[&relay::JobState::Leased], 1);

    // Refused before the caller's transaction is touched: it commits its
    // own row afterwards.
    let before = count(&mut sync);
    let mut tx = sync.transaction().unwrap();
    tx.execute("INSERT INTO orders VALUES (4)", &[]).unwrap();
    for (job, field) in [
        (NewJob::new("q", "k", Vec::new()).depends_on([a]), "depends_on"),
        (NewJob::new("q", "k", Vec::new()).tags(["x"]), "tags"),
        (NewJob::new("q", "k", Vec::new()).group(""), "group"),
        (
            NewJob::new("q", "k", Vec::new()).idempotency_key("i"),
            "idempotency_key",
        ),
        (
            NewJob::new("q", "k", Vec::new())
                .unique_key("u")
                .throttle(Duration::from_secs(1)),
            "throttle",
        ),
        (
            NewJob::new("q", "k", Vec::new())
                .unique_key("u")
                .debounce(Duration::from_secs(1)),
            "debounce",
        ),
        (NewJob::new("q", "k", Vec::new()).lease_for(Duration::ZERO), "lease_for"),
        (NewJob::new("q", "k", Vec::new()).traceparent("00-bad"), "traceparent"),
        (NewJob::new("bad queue!", "k", Vec::new()), "queue"),
    ] {
        let e = relay.submit_in_pg(&mut tx, job).unwrap_err();
        assert!(matches!(&e, relay::Error::InvalidInput(i) if i.field == field), "{e}");
    }
    tx.commit().unwrap();
    assert_eq!(count(&mut sync), before);
    let kept: i64 = sync
        .query_one("SELECT count(*) FROM orders WHERE id = 4", &[])
        .unwrap()
        .get(0);
    assert_eq!(kept, 1);

    // A Relay on an SQLite file says where its own transactional submit is.
    let dir = tempfile::tempdir().unwrap();
    let file = Relay::open(dir.path().join("x.db")).unwrap();
    let mut tx = sync.transaction().unwrap();
    let e = file
        .submit_in_pg(&mut tx, NewJob::new("q", "k", Vec::new()))
        .unwrap_err();
    assert!(
        matches!(&e, relay::Error::InvalidInput(i) if i.field == "transaction"),
        "{e}"
    );
}

/// Issue 40, item 3: `Relay::emit_in_pg` / `AsyncRelay::emit_in_pg` (the
/// SQL function `relay_emit`) emit inside the caller's transaction.
/// Rolled back: no event, every waiter still WAITING. Committed: the
/// waiters are READY with the payload recorded as their wait's step (after
/// a step recorded earlier), a lessee of another process is woken by the
/// commit's NOTIFY, and what the function writes (the step's bytes, the
/// job's events, the counts) is what `Relay::emit` writes for the same
/// payload, JSON, bytes or empty. The first emit wins; a wait begun after
/// it returns at once; bad keys and payloads are refused before the
/// caller's transaction is touched, and by the function itself (SQLSTATE
/// 22023) when called from SQL.
#[test]
fn emit_in_pg_wakes_waiters_inside_the_callers_transaction() {
    use relay::{Clock, JobState};
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    let relay = db
        .open(Options {
            poll_interval: Duration::from_secs(60),
            ..Options::default()
        })
        .unwrap();
    let other = db
        .open(Options {
            poll_interval: Duration::from_secs(60),
            ..Options::default()
        })
        .unwrap();
    let until = relay::SystemClock.now().plus(Duration::from_secs(3600));
    // A job of queue `q` leased, given a step, and set waiting for `key`.
    let waiting = |q: &str, key: &str| -> relay::JobId {
        let id = relay.submit(NewJob::new(q, "flow", Vec::new())).unwrap();
        let job = relay.lease(LeaseRequest::new([q])).unwrap().remove(0);
        assert_eq!(job.id, id);
        relay
            .record_step(id, job.token, "charge", b"{\"id\":1}".to_vec())
            .unwrap();
        let st = relay.wait(id, job.token, "ship", key, until).unwrap();
        assert_eq!(st.state, JobState::Waiting);
        id
    };
    let a = waiting("wf", "shipped:42");
    let b = waiting("wf", "shipped:42");
    let cancelled = waiting("wf", "shipped:42");
    relay.cancel(cancelled).unwrap();
    let mut sync = relay::postgres::Client::connect(&url, relay::postgres::NoTls).unwrap();
    sync.batch_execute("CREATE TABLE orders (id INT, shipped BOOL)")
        .unwrap();
    let event_kept = |c: &mut relay::postgres::Client, key: &str| -> bool {
        c.query_one(
            "SELECT count(*) > 0 FROM relay_marks WHERE key = $1",
            &[&format!("event:{key}")],
        )
        .unwrap()
        .get(0)
    };

    // Rolled back: nothing.
    let mut tx = sync.transaction().unwrap();
    tx.execute("INSERT INTO orders VALUES (42, true)", &[]).unwrap();
    let e = relay
        .emit_in_pg(&mut tx, "shipped:42", br#"{"carrier":"ups"}"#.to_vec())
        .unwrap();
    assert_eq!((e.first, e.woken), (true, 2), "the cancelled job's wait ended with it");
    tx.rollback().unwrap();
    assert!(!event_kept(&mut sync, "shipped:42"));
    for id in [a, b] {
        assert_eq!(relay.get(id).unwrap().state(), JobState::Waiting);
        assert!(
            relay.waiting_for(id).unwrap().is_some(),
            "job {id}'s wait survives the rollback"
        );
    }

    // Committed, with a lessee of another Relay waiting on the queue.
    let leased = std::thread::scope(|s| {
        let w = s.spawn(|| {
            other
                .lease(LeaseRequest::new(["wf"]).max(2).wait(Duration::from_secs(30)))
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        let mut tx = sync.transaction().unwrap();
        tx.execute("INSERT INTO orders VALUES (42, true)", &[]).unwrap();
        let e = relay
            .emit_in_pg(&mut tx, "shipped:42", br#"{"carrier":"ups"}"#.to_vec())
            .unwrap();
        assert_eq!((e.first, e.woken), (true, 2));
        tx.commit().unwrap();
        let committed = Instant::now();
        let got = w.join().unwrap();
        assert!(
            committed.elapsed() < Duration::from_secs(10),
            "woken by NOTIFY: {:?}",
            committed.elapsed()
        );
        got
    });
    let mut ids: Vec<_> = leased.iter().map(|j| j.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [a, b]);
    for j in &leased {
        let names: Vec<&str> = j.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["charge", "ship"]);
        assert_eq!(j.steps[1].output, br#"{"event":{"carrier":"ups"}}"#);
    }
    assert!(event_kept(&mut sync, "shipped:42"));
    assert_eq!(relay.get(cancelled).unwrap().state(), JobState::Cancelled);
    // The first emit wins, from SQL or the library.
    let mut tx = sync.transaction().unwrap();
    let e = relay.emit_in_pg(&mut tx, "shipped:42", b"\"late\"".to_vec()).unwrap();
    tx.commit().unwrap();
    assert_eq!((e.first, e.woken), (false, 0));
    assert!(!relay.emit("shipped:42", Vec::new()).unwrap().first);
    // A wait begun after it returns at once.
    let late = relay.submit(NewJob::new("late", "flow", Vec::new())).unwrap();
    let job = relay.lease(LeaseRequest::new(["late"])).unwrap().remove(0);
    let st = relay.wait(late, job.token, "ship", "shipped:42", until).unwrap();
    assert_eq!(st.state, JobState::Ready);
    assert_eq!(
        relay.get(late).unwrap().step("ship").unwrap().output,
        br#"{"event":{"carrier":"ups"}}"#
    );

    // The same as Relay::emit writes, for JSON, bytes and nothing.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for (n, payload) in [br#" {"n": [1, 2]} "#.to_vec(), vec![0xff, 0, 1], Vec::new()]
        .into_iter()
        .enumerate()
    {
        let by_sql = waiting(&format!("sql{n}"), &format!("same:{n}:sql"));
        let by_lib = waiting(&format!("lib{n}"), &format!("same:{n}:lib"));
        let e = rt.block_on(async {
            let (mut client, conn) = relay::tokio_postgres::connect(&url, relay::tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(conn);
            let tx = client.transaction().await.unwrap();
            let e = relay
                .to_async()
                .emit_in_pg(&tx, &format!("same:{n}:sql"), payload.clone())
                .await
                .unwrap();
            tx.commit().await.unwrap();
            e
        });
        assert_eq!((e.first, e.woken), (true, 1));
        let e = relay.emit(&format!("same:{n}:lib"), payload.clone()).unwrap();
        assert_eq!((e.first, e.woken), (true, 1));
        let (s, l) = (relay.get(by_sql).unwrap(), relay.get(by_lib).unwrap());
        assert_eq!((s.state(), l.state()), (JobState::Ready, JobState::Ready));
        let (ss, ls) = (s.step("ship").unwrap(), l.step("ship").unwrap());
        assert_eq!(
            (String::from_utf8_lossy(&ss.output), ss.attempt),
            (String::from_utf8_lossy(&ls.output), ls.attempt),
            "payload {payload:?}"
        );
        let kinds = |id| {
            relay
                .events(id)
                .unwrap()
                .into_iter()
                .map(|e| (e.kind, e.data))
                .collect::<Vec<_>>()
        };
        let (ks, kl) = (kinds(by_sql), kinds(by_lib));
        assert_eq!(ks.len(), kl.len());
        assert_eq!(ks.last().unwrap().0, "woken");
        assert_eq!(kl.last().unwrap().0, "woken");
        let key_of = |d: &serde_json::Value| d["key"].as_str().unwrap().replace(":sql", "").replace(":lib", "");
        assert_eq!(key_of(&ks.last().unwrap().1), key_of(&kl.last().unwrap().1));
        let marks: Vec<String> = sync
            .query(
                "SELECT value FROM relay_marks WHERE key IN ($1, $2) ORDER BY key DESC",
                &[&format!("event:same:{n}:sql"), &format!("event:same:{n}:lib")],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(marks[0], marks[1], "the kept event of payload {payload:?}");
    }
    let stats = relay.stats().unwrap();
    for q in ["sql0", "sql1", "sql2", "lib0", "lib1", "lib2"] {
        assert_eq!(stats.queues[q].counts.get(&JobState::Ready), Some(&1), "queue {q}");
        assert_eq!(
            stats.queues[q].counts.get(&JobState::Waiting).copied().unwrap_or(0),
            0,
            "queue {q}"
        );
    }

    // Refused before the caller's transaction is touched; the function
    // refuses the same from SQL.
    let mut tx = sync.transaction().unwrap();
    tx.execute("INSERT INTO orders VALUES (7, false)", &[]).unwrap();
    for (key, payload, field) in [
        ("no spaces", Vec::new(), "key"),
        ("", Vec::new(), "key"),
        ("token:abc", Vec::new(), "key"),
        ("big", vec![b'1'; 64 * 1024 + 1], "payload"),
    ] {
        let e = relay.emit_in_pg(&mut tx, key, payload).unwrap_err();
        assert!(
            matches!(&e, relay::Error::InvalidInput(i) if i.field == field),
            "{key:?}: {e}"
        );
    }
    tx.commit().unwrap();
    let kept: i64 = sync
        .query_one("SELECT count(*) FROM orders WHERE id = 7", &[])
        .unwrap()
        .get(0);
    assert_eq!(kept, 1);
    for (key, payload) in [
        ("no spaces", Vec::new()),
        ("token:abc", Vec::new()),
        ("big", vec![b'1'; 64 * 1024 + 1]),
    ] {
        let e = sync
            .query("SELECT * FROM relay_emit($1, $2)", &[&key, &payload])
            .unwrap_err();
        assert_eq!(
            e.code(),
            Some(&relay::postgres::error::SqlState::INVALID_PARAMETER_VALUE),
            "{key:?}: {e}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let file = Relay::open(dir.path().join("x.db")).unwrap();
    let mut tx = sync.transaction().unwrap();
    let e = file.emit_in_pg(&mut tx, "k", Vec::new()).unwrap_err();
    assert!(
        matches!(&e, relay::Error::InvalidInput(i) if i.field == "transaction"),
        "{e}"
    );
}

/// Through PgBouncer in transaction mode, `LISTEN` on the direct listen
/// URL wakes a lessee of one Relay at another's submit, as without the
/// pooler.
#[test]
fn through_pgbouncer_a_submit_wakes_a_lessee_over_the_listen_url() {
    let db = PgDb::through_pgbouncer();
    let waiting = db
        .open(Options {
            poll_interval: Duration::from_secs(60),
            ..Options::default()
        })
        .unwrap();
    let other = db.open(Options::default()).unwrap();
    let start = Instant::now();
    let got = std::thread::scope(|s| {
        let w = s.spawn(|| {
            waiting
                .lease(LeaseRequest::new(["q"]).wait(Duration::from_secs(30)))
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        other.submit(NewJob::new("q", "k", Vec::new())).unwrap();
        w.join().unwrap()
    });
    assert_eq!(got.len(), 1);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "woken by NOTIFY, not by polling: {:?}",
        start.elapsed()
    );
}

/// Through PgBouncer in transaction mode with no listen URL, a `LISTEN`
/// through the pooler would hear nothing: Relay opens without one, and
/// waiting lessees find other Relays' jobs by polling.
#[test]
fn through_pgbouncer_without_a_listen_url_lessees_poll() {
    let db = PgDb::through_pgbouncer();
    let open = || {
        let backend = relay_postgres::PgBackend::new(db.relay_url()).pooler(relay_postgres::Pooler::Transaction);
        Relay::with_backend(
            std::sync::Arc::new(backend),
            Options {
                poll_interval: Duration::from_millis(200),
                ..Options::default()
            },
        )
        .unwrap()
    };
    let (waiting, other) = (open(), open());
    let got = std::thread::scope(|s| {
        let w = s.spawn(|| {
            waiting
                .lease(LeaseRequest::new(["q"]).wait(Duration::from_secs(20)))
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        let id = other.submit(NewJob::new("q", "k", Vec::new())).unwrap();
        (id, w.join().unwrap())
    });
    assert_eq!(got.1.iter().map(|j| j.id).collect::<Vec<_>>(), vec![got.0]);
}

/// Behind a pooler in transaction mode no server session is Relay's own:
/// a database whose sessions start with `synchronous_commit = off` would
/// have Relay's commits answered before their WAL is flushed. Each of the
/// writer's transactions sets it on (`SET LOCAL`). Seen from the server,
/// on a server and pooler of the test's own, as in
/// `a_session_without_synchronous_commit_is_put_right`: 20 submits in a
/// row make 20 WAL flushes.
#[test]
fn through_pgbouncer_a_database_without_synchronous_commit_still_waits_for_the_flush() {
    use relay_storetest::pg::PgBouncer;
    let server = PgServer::private("-c wal_writer_delay=10s");
    let url = server.new_database();
    let name = url.rsplit_once('/').unwrap().1.to_owned();
    let mut probe = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    probe
        .batch_execute(&format!("ALTER DATABASE {name} SET synchronous_commit = off"))
        .unwrap();
    let bouncer = PgBouncer::private(&server);
    let backend = relay_postgres::PgBackend::new(bouncer.url_of(&name))
        .pooler(relay_postgres::Pooler::Transaction)
        .listen_url(url.clone());
    let relay = Relay::with_backend(std::sync::Arc::new(backend), Options::default()).unwrap();
    let mut fresh = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let show: String = fresh.query_one("SHOW synchronous_commit", &[]).unwrap().get(0);
    assert_eq!(show, "off", "the database's setting is in force for its sessions");
    let syncs = |c: &mut postgres::Client| -> i64 {
        std::thread::sleep(Duration::from_millis(2500));
        c.query_one("SELECT wal_sync FROM pg_stat_wal", &[]).unwrap().get(0)
    };
    let before = syncs(&mut probe);
    for _ in 0..20 {
        relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    }
    let mut flushed = syncs(&mut probe) - before;
    for _ in 0..4 {
        if flushed >= 18 {
            break;
        }
        flushed = syncs(&mut probe) - before;
    }
    assert!(
        flushed >= 18,
        "20 submits in a row through the pooler made {flushed} WAL flushes: the writer commits without waiting for them"
    );
    drop(relay);
    drop(bouncer);
}

/// Through a pooler in transaction mode each transaction may run on the
/// server session another client used last. With one session for every
/// client, two Relays (each two writers and readers) take turns on it:
/// every job is submitted, leased and acknowledged, and no prepared
/// statement is left in the session, where it would be in the way of the
/// next client (`prepared statement "s3" already exists`) or missing from
/// the next session (`... does not exist`).
#[test]
fn through_a_one_session_pool_two_relays_take_turns_and_leave_no_statement_behind() {
    use relay_storetest::pg::PgBouncer;
    let server = PgServer::private("");
    let url = server.new_database();
    let name = url.rsplit_once('/').unwrap().1.to_owned();
    let bouncer = PgBouncer::private_with_sessions(&server, 1);
    let open = || {
        let backend = relay_postgres::PgBackend::new(bouncer.url_of(&name))
            .pooler(relay_postgres::Pooler::Transaction)
            .listen_url(url.clone());
        Relay::with_backend(std::sync::Arc::new(backend), Options::default()).unwrap()
    };
    let relays = [open(), open()];
    for (i, relay) in relays.iter().enumerate() {
        let jobs = (0..100)
            .map(|j| NewJob::new("q", "k", format!("{i}-{j}").into_bytes()))
            .collect();
        relay.submit_batch(jobs).unwrap();
    }
    let done: usize = std::thread::scope(|s| {
        let workers: Vec<_> = relays
            .iter()
            .map(|relay| {
                s.spawn(move || {
                    let mut done = 0;
                    loop {
                        let jobs = relay.lease(LeaseRequest::new(["q"]).max(7)).unwrap();
                        if jobs.is_empty() {
                            return done;
                        }
                        for job in jobs {
                            relay.ack(job.id, job.token, None).unwrap();
                            done += 1;
                        }
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(done, 200);
    let stats = relays[0].stats().unwrap();
    assert_eq!(
        stats.queues["q"].counts.get(&relay::JobState::Succeeded),
        Some(&200),
        "{stats:?}"
    );
    // The one session, as the next client of the pooler finds it.
    let mut next = postgres::Client::connect(&bouncer.url_of(&name), postgres::NoTls).unwrap();
    let left: Vec<String> = next
        .simple_query("SELECT name FROM pg_prepared_statements")
        .unwrap()
        .into_iter()
        .filter_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        })
        .collect();
    assert!(
        left.is_empty(),
        "prepared statements left in the pooled session: {left:?}"
    );
    // The writer's statements that return rows ran through functions,
    // whose plans the session keeps (made once, by whichever Relay first
    // needed each).
    let made = next
        .simple_query("SELECT count(*) FROM pg_proc WHERE proname LIKE 'relay\\_q\\_%'")
        .unwrap()
        .into_iter()
        .find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse::<i64>().ok()),
            _ => None,
        });
    assert!(made.is_some_and(|n| n >= 5), "the statements' functions: {made:?}");
}

/// The LISTEN connection dropped (a server restart, a dead link, an
/// operator's pg_terminate_backend): it connects again by itself, so a
/// lessee waiting in one Relay is again woken at another's submit, not
/// left to poll. (It was left to poll for the rest of the process's life.)
#[test]
fn the_listen_connection_comes_back_after_it_dropped() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    // With a 60 s poll, only a notification can wake the waiter in time.
    let waiting = db
        .open(Options {
            poll_interval: Duration::from_secs(60),
            ..Options::default()
        })
        .unwrap();
    let other = db.open(Options::default()).unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let listening = |admin: &mut postgres::Client| -> i64 {
        admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN relay_ready%'",
                &[],
            )
            .unwrap()
            .get(0)
    };
    assert_eq!(listening(&mut admin), 2, "each Relay listens");
    let ended: i64 = admin
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND query LIKE 'LISTEN relay_ready%') t",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(ended, 2);
    let deadline = Instant::now() + Duration::from_secs(20);
    while listening(&mut admin) < 2 {
        assert!(Instant::now() < deadline, "the LISTEN connections never came back");
        std::thread::sleep(Duration::from_millis(100));
    }
    let start = Instant::now();
    let got = std::thread::scope(|s| {
        let w = s.spawn(|| {
            waiting
                .lease(LeaseRequest::new(["q"]).wait(Duration::from_secs(30)))
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        other.submit(NewJob::new("q", "k", Vec::new())).unwrap();
        w.join().unwrap()
    });
    assert_eq!(got.len(), 1, "the waiter was never woken");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "woken by NOTIFY, not by polling: {:?}",
        start.elapsed()
    );
}

/// Through PgBouncer, a statement's function that goes away while Relay
/// runs (a server restored from a backup, a failover, an operator's DROP)
/// fails at most the batches that met it: the writers learn their
/// statements again, make the functions anew, and later calls succeed.
#[test]
fn through_pgbouncer_functions_dropped_under_a_running_relay_are_made_again() {
    let db = PgDb::through_pgbouncer();
    let relay = db.open(Options::default()).unwrap();
    let round = |relay: &Relay| -> Result<(), relay::Error> {
        relay.submit(NewJob::new("q", "k", Vec::new()))?;
        for job in relay.lease(LeaseRequest::new(["q"]).max(10))? {
            relay.ack(job.id, job.token, None)?;
        }
        Ok(())
    };
    round(&relay).unwrap();
    let direct = db.url().to_owned();
    let mut admin = postgres::Client::connect(&direct, postgres::NoTls).unwrap();
    let count = |admin: &mut postgres::Client| -> i64 {
        admin
            .query_one("SELECT count(*) FROM pg_proc WHERE proname LIKE 'relay\\_q\\_%'", &[])
            .unwrap()
            .get(0)
    };
    assert!(count(&mut admin) >= 3, "the statements' functions were made");
    admin
        .batch_execute(
            "DO $$ DECLARE f regprocedure; BEGIN \
             FOR f IN SELECT oid::regprocedure FROM pg_proc WHERE proname LIKE 'relay\\_q\\_%' LOOP \
             EXECUTE 'DROP FUNCTION ' || f; END LOOP; END $$",
        )
        .unwrap();
    assert_eq!(count(&mut admin), 0);
    let mut failed = 0;
    let mut ok = 0;
    for _ in 0..20 {
        match round(&relay) {
            Ok(()) => ok += 1,
            Err(relay::Error::Storage(_) | relay::Error::Busy | relay::Error::MaybeApplied(_)) => failed += 1,
            Err(e) => panic!("unexpected error: {e:?}"),
        }
    }
    assert!(failed <= 4, "{failed} of 20 rounds failed after the DROP");
    assert!(ok >= 16, "{ok} of 20 rounds succeeded after the DROP");
    assert!(count(&mut admin) >= 3, "the functions were made again");
}

/// A database at schema 17 has `relay_submit` without `p_group`; its
/// upgrade leaves one `relay_submit`, the new one, so calls that leave
/// the defaults out are not ambiguous between the two signatures. The
/// statement functions a pooled Relay made for the version before go.
#[test]
fn the_upgrade_to_18_replaces_relay_submit_rather_than_adding_a_second() {
    let url = PgServer::shared().new_database();
    drop(PgDb::fresh_at(url.clone()).open(Options::default()).unwrap());
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // Version 17 as it was: the function with the old arguments.
    c.batch_execute(
        "DROP FUNCTION relay_submit(TEXT, TEXT, BYTEA, INT, BIGINT, INT, TEXT, BIGINT, BIGINT, TEXT, TEXT);
         CREATE FUNCTION relay_submit(p_queue TEXT, p_kind TEXT, p_payload BYTEA DEFAULT '', p_priority INT DEFAULT 1,
             p_delay_ms BIGINT DEFAULT 0, p_max_attempts INT DEFAULT 20, p_unique_key TEXT DEFAULT NULL,
             p_lease_for_ms BIGINT DEFAULT NULL, p_timeout_ms BIGINT DEFAULT NULL, p_traceparent TEXT DEFAULT NULL)
             RETURNS BIGINT LANGUAGE sql AS 'SELECT -1::BIGINT';
         CREATE FUNCTION relay_q_of_version_17(BIGINT) RETURNS TABLE(relay_c0 BIGINT)
             LANGUAGE sql AS 'SELECT $1';
         UPDATE relay_schema SET version = 17;",
    )
    .unwrap();
    let relay = PgDb::fresh_at(url.clone()).open(Options::default()).unwrap();
    let versions: i64 = c.query_one("SELECT version FROM relay_schema", &[]).unwrap().get(0);
    assert_eq!(versions, relay_postgres::SCHEMA_VERSION);
    let functions: i64 = c
        .query_one("SELECT count(*) FROM pg_proc WHERE proname = 'relay_submit'", &[])
        .unwrap()
        .get(0);
    assert_eq!(functions, 1, "one relay_submit");
    let stale: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_proc WHERE proname = 'relay_q_of_version_17'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(stale, 0, "the statement functions of the version before are dropped");
    let id: i64 = c
        .query_one("SELECT relay_submit('q', 'k', '', p_group => 'g')", &[])
        .unwrap()
        .get(0);
    assert!(id > 0);
    let plain: i64 = c.query_one("SELECT relay_submit('q', 'k')", &[]).unwrap().get(0);
    assert!(plain > id);
    assert_eq!(relay.get(relay::JobId(id)).unwrap().group.as_deref(), Some("g"));
}

/// The pooler restarts under a running Relay (an operator's upgrade or
/// config change: every client connection closed at once). The calls that
/// met it get typed errors, the writers and readers connect again, and
/// later calls succeed; nothing answered is lost.
#[test]
fn through_pgbouncer_a_restart_of_the_pooler_is_survived() {
    use relay_storetest::pg::PgBouncer;
    let server = PgServer::private("");
    let url = server.new_database();
    let name = url.rsplit_once('/').unwrap().1.to_owned();
    let bouncer = PgBouncer::private(&server);
    let backend = relay_postgres::PgBackend::new(bouncer.url_of(&name))
        .pooler(relay_postgres::Pooler::Transaction)
        .listen_url(url.clone());
    let relay = Relay::with_backend(std::sync::Arc::new(backend), Options::default()).unwrap();
    let mut answered = Vec::new();
    for i in 0..20 {
        answered.push(
            relay
                .submit(NewJob::new("q", "k", format!("before-{i}").into_bytes()))
                .unwrap(),
        );
    }
    bouncer.restart();
    let mut failed = 0;
    for i in 0..40 {
        match relay.submit(NewJob::new("q", "k", format!("after-{i}").into_bytes())) {
            Ok(id) => answered.push(id),
            Err(relay::Error::Storage(_) | relay::Error::Busy | relay::Error::MaybeApplied(_)) => failed += 1,
            Err(e) => panic!("unexpected error after the restart: {e:?}"),
        }
    }
    assert!(failed <= 4, "{failed} of 40 submits failed after the restart");
    let mut read = None;
    for _ in 0..4 {
        if let Ok(stats) = relay.stats() {
            read = Some(stats);
            break;
        }
    }
    let stats = read.expect("reads never recovered after the restart");
    let held = stats.queues["q"].counts.values().sum::<u64>();
    assert!(
        held >= answered.len() as u64,
        "{held} jobs for {} answered",
        answered.len()
    );
    for id in &answered {
        assert_eq!(relay.get(*id).unwrap().kind, "k");
    }
    let leased = relay.lease(LeaseRequest::new(["q"]).max(100)).unwrap();
    assert!(!leased.is_empty());
}

/// The heads of `queue`'s groups as relay_group_heads holds them, and as
/// they are (each group's first READY job of a class by `(turn, id)`).
type Heads = Vec<(String, i64)>;

fn heads_held_and_true(c: &mut postgres::Client) -> (Heads, Heads) {
    let held = c
        .query(
            "SELECT grp, job FROM relay_group_heads ORDER BY queue, priority, grp",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let truth = c
        .query(
            "SELECT grp, id FROM (
                 SELECT DISTINCT ON (queue, priority, grp) queue, priority, grp, id FROM relay_jobs
                 WHERE state = 'READY' AND grp IS NOT NULL ORDER BY queue, priority, grp, turn, id) AS h
             ORDER BY queue, priority, grp",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    (held, truth)
}

/// A group's head is kept by whichever transaction commits last among
/// those that changed its READY jobs (migrations/0019_group_heads.sql),
/// whatever the interleaving: no transaction waits for another before its
/// commit, and a claim reads past a head another transaction holds.
#[test]
fn a_group_keeps_its_head_whatever_the_interleaving() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    let relay = db.open(Options::default()).unwrap();
    let grouped = |g: &str| NewJob::new("q", "k", Vec::new()).group(g);
    let later = |g: &str| grouped(g).delay(Duration::from_secs(3600));
    let head = |c: &mut postgres::Client, g: &str| -> Option<i64> {
        c.query_opt("SELECT job FROM relay_group_heads WHERE grp = $1", &[&g])
            .unwrap()
            .map(|r| r.get(0))
    };
    let mut c1 = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut c2 = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // A job taken out of READY, and its group noted, as a Relay batch does
    // (sql/apply_heads.sql).
    let leave = "WITH t AS (UPDATE relay_jobs SET state = 'SCHEDULED', ready_at = ready_at + 3600000
                            WHERE id = $1 RETURNING queue, priority, grp)
                 SELECT relay_heads_note_all(array_agg(queue), array_agg(priority), array_agg(grp)) FROM t";
    let enter =
        "UPDATE relay_jobs SET state = 'READY', ready_at = (extract(epoch FROM now()) * 1000)::BIGINT WHERE id = $1";

    // The head leaves; a job enters while that is uncommitted, and commits
    // first.
    let h = relay.submit(grouped("a")).unwrap().0;
    let j = relay.submit(later("a")).unwrap().0;
    assert_eq!(head(&mut c1, "a"), Some(h));
    c1.batch_execute("BEGIN").unwrap();
    c1.query(leave, &[&h]).unwrap();
    c2.batch_execute("BEGIN").unwrap();
    c2.execute(enter, &[&j]).unwrap();
    c2.batch_execute("COMMIT").unwrap();
    assert_eq!(
        head(&mut c1, "a"),
        Some(h),
        "the head is still READY to the one that committed"
    );
    c1.batch_execute("COMMIT").unwrap();
    assert_eq!(head(&mut c1, "a"), Some(j), "the job that entered heads the group");

    // A job enters first, behind the head; the head leaves in another
    // transaction that commits first (seeing no other READY job).
    let h = relay.submit(grouped("b")).unwrap().0;
    let j = relay.submit(later("b")).unwrap().0;
    c2.batch_execute("BEGIN").unwrap();
    c2.execute(enter, &[&j]).unwrap();
    c1.batch_execute("BEGIN").unwrap();
    c1.query(leave, &[&h]).unwrap();
    c1.batch_execute("COMMIT").unwrap();
    assert_eq!(head(&mut c1, "b"), None, "no READY job left that it could see");
    c2.batch_execute("COMMIT").unwrap();
    assert_eq!(
        head(&mut c1, "b"),
        Some(j),
        "the one that committed last headed the group"
    );

    // While another transaction holds a group's lock (as one committing a
    // change to the group does), a transaction that only takes a job out
    // commits without waiting for it, and one that makes a job READY
    // waits, then heads the group: had it passed over, the holder could
    // have seen the group empty and the job would have no head.
    let h = relay.submit(grouped("z")).unwrap().0;
    let j = relay.submit(later("z")).unwrap().0;
    let mut c3 = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let hold = "BEGIN; SELECT pg_advisory_xact_lock(1380468548, relay_group_lock_key('q', 1, 'z'))";
    c3.batch_execute(hold).unwrap();
    c1.batch_execute("BEGIN").unwrap();
    c1.query(leave, &[&h]).unwrap();
    let started = Instant::now();
    c1.batch_execute("COMMIT").unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "taking a job out waited for the group's lock"
    );
    assert_eq!(head(&mut c1, "z"), Some(h), "left behind while the lock was held");
    std::thread::scope(|s| {
        let entering = s.spawn(|| {
            c2.batch_execute("BEGIN").unwrap();
            c2.execute(enter, &[&j]).unwrap();
            c2.batch_execute("COMMIT").unwrap();
        });
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            !entering.is_finished(),
            "a job entering READY waits for the group's lock"
        );
        c3.batch_execute("COMMIT").unwrap();
        entering.join().unwrap();
    });
    assert_eq!(head(&mut c1, "z"), Some(j));

    // A savepoint rolled back takes its note with it; a job deleted while
    // READY hands the head on.
    let h = relay.submit(grouped("c")).unwrap().0;
    let j = relay.submit(grouped("c")).unwrap().0;
    c1.batch_execute("BEGIN; SAVEPOINT s").unwrap();
    c1.query(leave, &[&h]).unwrap();
    c1.batch_execute("ROLLBACK TO SAVEPOINT s; COMMIT").unwrap();
    assert_eq!(head(&mut c1, "c"), Some(h));
    relay.delete(relay::JobId(h)).unwrap();
    assert_eq!(head(&mut c1, "c"), Some(j), "deleted by Relay");

    // A note made in a savepoint that is rolled back goes with it, and a
    // note after it is still seen to at the commit.
    let s1 = relay.submit(later("s1")).unwrap().0;
    let s2 = relay.submit(later("s2")).unwrap().0;
    c1.batch_execute("BEGIN; SAVEPOINT s").unwrap();
    c1.execute(enter, &[&s1]).unwrap();
    c1.batch_execute("ROLLBACK TO SAVEPOINT s").unwrap();
    c1.execute(enter, &[&s2]).unwrap();
    c1.batch_execute("COMMIT").unwrap();
    assert_eq!(head(&mut c1, "s1"), None);
    assert_eq!(head(&mut c1, "s2"), Some(s2), "the note after the rolled back one");

    // Another program takes the last READY job of a group out without
    // noting it: the head is left behind, and the first claim that finds
    // it empty puts it right, though it leases nothing (the queue holds
    // nothing else).
    let d = NewJob::new("other", "k", Vec::new()).group("d");
    let h = relay.submit(d).unwrap().0;
    c1.execute(
        "UPDATE relay_jobs SET state = 'SCHEDULED', ready_at = ready_at + 3600000 WHERE id = $1",
        &[&h],
    )
    .unwrap();
    assert_eq!(head(&mut c1, "d"), Some(h), "left behind");
    assert!(relay.lease(LeaseRequest::new(["other"]).max(100)).unwrap().is_empty());
    assert_eq!(head(&mut c1, "d"), None, "put right by the claim");
    c1.execute(enter, &[&h]).unwrap();
    assert_eq!(head(&mut c1, "d"), Some(h));

    // A transaction that changes more groups than a lock each would allow
    // (a bulk submit) heads them all.
    let many: Vec<NewJob> = (0..300)
        .map(|i| NewJob::new("bulk", "k", Vec::new()).group(format!("m{i}")))
        .collect();
    relay.submit_batch(many).unwrap();
    let (held, truth) = heads_held_and_true(&mut c1);
    assert_eq!(held, truth, "after a submit of 300 groups");

    // A claim reads past a head another transaction holds: it takes the
    // next job of the group rather than nothing.
    let h = relay.submit(grouped("e")).unwrap().0;
    let n = relay.submit(grouped("e")).unwrap().0;
    let ids = |got: Vec<relay::LeasedJob>| got.iter().map(|l| l.id.0).collect::<Vec<_>>();
    c1.batch_execute("BEGIN").unwrap();
    c1.query("SELECT id FROM relay_jobs WHERE id = $1 FOR UPDATE", &[&h])
        .unwrap();
    let got = relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap();
    let got = ids(got);
    assert!(got.contains(&n), "read past the held head: {got:?}");
    assert!(!got.contains(&h));
    c1.batch_execute("ROLLBACK").unwrap();

    // The job read past a held head stands at its own turn among the
    // other groups' heads: behind another group's first job of an earlier
    // turn, though its group's head comes first in the page.
    let rp = |g: &str| NewJob::new("rp", "k", Vec::new()).group(g);
    let h = relay.submit(rp("e1")).unwrap().0; // turn 0
    let n = relay.submit(rp("e1")).unwrap().0; // turn 1
    let k = relay.submit(rp("e2")).unwrap().0; // turn 0
    c1.batch_execute("BEGIN").unwrap();
    c1.query("SELECT id FROM relay_jobs WHERE id = $1 FOR UPDATE", &[&h])
        .unwrap();
    let got = ids(relay.lease(LeaseRequest::new(["rp"]).max(2)).unwrap());
    assert_eq!(
        got,
        [k, n],
        "turn 0 before the held group's turn 1, in the order claimed"
    );
    c1.batch_execute("ROLLBACK").unwrap();

    // relay_submit inside a caller's transaction heads its group when that
    // commits, and everything READY is claimed.
    c2.batch_execute("BEGIN").unwrap();
    let s: i64 = c2
        .query_one("SELECT relay_submit('q', 'k', '', p_group => 'f')", &[])
        .unwrap()
        .get(0);
    assert_eq!(head(&mut c1, "f"), None);
    c2.batch_execute("COMMIT").unwrap();
    assert_eq!(head(&mut c1, "f"), Some(s));
    let (held, truth) = heads_held_and_true(&mut c1);
    assert_eq!(held, truth);
    let got = ids(relay.lease(LeaseRequest::new(["q", "other", "rp"]).max(100)).unwrap());
    let ready: i64 = c1
        .query_one(
            "SELECT count(*) FROM relay_jobs WHERE state = 'READY' AND queue <> 'bulk'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(ready, 0, "every READY job claimed ({got:?})");
    let heads: i64 = c1
        .query_one("SELECT count(*) FROM relay_group_heads WHERE queue <> 'bulk'", &[])
        .unwrap()
        .get(0);
    assert_eq!(heads, 0, "no head left");
}

/// Six connections change the READY jobs of four shared groups at once,
/// each transaction touching its groups in a random order and committing
/// with others: no transaction waits for another in a circle (no
/// deadlock), no group with READY jobs is ever left without its head row,
/// and every job is then claimed.
#[test]
fn group_heads_stay_right_under_concurrent_writers() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    let relay = db.open(Options::default()).unwrap();
    const THREADS: usize = 6;
    let groups = ["g0", "g1", "g2", "g3"];
    // Each thread its own jobs (so no two wait on a job row), of every
    // group, half READY.
    let mut owned: Vec<Vec<i64>> = Vec::new();
    for _ in 0..THREADS {
        let jobs: Vec<NewJob> = (0..40)
            .map(|i| {
                let j = NewJob::new("q", "k", Vec::new()).group(groups[i % groups.len()]);
                if i % 2 == 0 {
                    j
                } else {
                    j.delay(Duration::from_secs(3600))
                }
            })
            .collect();
        owned.push(relay.submit_batch(jobs).unwrap().iter().map(|id| id.0).collect());
    }
    // Three times: whether the last commits meet is a matter of timing.
    for wave in 0..3 {
        let failures = std::sync::Mutex::new(Vec::<String>::new());
        let barrier = std::sync::Barrier::new(THREADS);
        std::thread::scope(|s| {
            for (t, ids) in owned.iter().enumerate() {
                let url = &url;
                let failures = &failures;
                let barrier = &barrier;
                s.spawn(move || {
                    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
                    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ (t as u64 + 1) ^ ((wave as u64) << 32);
                    let mut next = |n: usize| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        (seed % n as u64) as usize
                    };
                    for round in 0..=60 {
                        let run = (|| -> Result<(), postgres::Error> {
                            let mut tx = c.transaction()?;
                            // The last round of every connection commits at
                            // once: each reads the heads of its groups while
                            // the others have not committed.
                            let last = round == 60;
                            for _ in 0..if last { 12 } else { 1 + next(6) } {
                                let id = ids[next(ids.len())];
                                if next(2) == 0 {
                                    tx.execute(
                                        "UPDATE relay_jobs SET state = 'READY',
                                             ready_at = (extract(epoch FROM now()) * 1000)::BIGINT
                                         WHERE id = $1 AND state <> 'READY'",
                                        &[&id],
                                    )?;
                                } else {
                                    tx.query(
                                        "WITH t AS (UPDATE relay_jobs SET state = 'SCHEDULED', ready_at = ready_at + 3600000
                                                    WHERE id = $1 AND state = 'READY' RETURNING queue, priority, grp)
                                         SELECT relay_heads_note_all(array_agg(queue), array_agg(priority), array_agg(grp)) FROM t",
                                        &[&id],
                                    )?;
                                }
                            }
                            if last {
                                barrier.wait();
                            }
                            tx.commit()
                        })();
                        if let Err(e) = run {
                            failures.lock().unwrap().push(format!("{e:?}"));
                        }
                    }
                });
            }
        });
        let failures = failures.into_inner().unwrap();
        assert!(
            failures.is_empty(),
            "{} transactions failed: {:?}",
            failures.len(),
            &failures[..1]
        );
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        // Every group with a READY job has its head row (a head may lag
        // where a transaction that only took jobs out passed over a group
        // another was committing: the claim reads past it).
        let (held, truth) = heads_held_and_true(&mut c);
        let held: std::collections::BTreeSet<&String> = held.iter().map(|(g, _)| g).collect();
        let missing: Vec<&String> = truth.iter().map(|(g, _)| g).filter(|g| !held.contains(g)).collect();
        assert!(
            missing.is_empty(),
            "wave {wave}: groups with READY jobs and no head: {missing:?}"
        );
        assert_eq!(truth.len(), groups.len());
    }
    // And every READY job is claimed; then no head is left.
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let ready = |c: &mut postgres::Client| -> i64 {
        c.query_one("SELECT count(*) FROM relay_jobs WHERE state = 'READY'", &[])
            .unwrap()
            .get(0)
    };
    for _ in 0..20 {
        if ready(&mut c) == 0 {
            break;
        }
        relay.lease(LeaseRequest::new(["q"]).max(100)).unwrap();
    }
    assert_eq!(ready(&mut c), 0, "every READY job claimed");
    relay.lease(LeaseRequest::new(["q"]).max(100)).unwrap();
    let heads: i64 = c
        .query_one("SELECT count(*) FROM relay_group_heads", &[])
        .unwrap()
        .get(0);
    assert_eq!(heads, 0, "the heads of the emptied groups are gone");
}

/// The claim's cost does not grow with the jobs of a group at its
/// `max_leased_per_group` (docs/ARCHITECTURE.md, "Groups in the claim"):
/// only the group's head is read, not its line. Counted by PostgreSQL
/// itself: the live rows fetched through the indexes of READY and grouped
/// jobs (the claim's, the heads', the groups' lines; not the leases' or
/// the primary key) by the writer's backend for 600 claims of a free group
/// beside a held group of 2,000 READY jobs (its turns running ahead of the
/// free group's, so that a claim reading every grouped READY job passes
/// over a growing run of them; the count grows with the square of the
/// claims). Live rows, not index entries: the entries of jobs already
/// taken stay in the indexes until a vacuum, and are passed over or not
/// as other transactions on the server let them be marked dead (168,220
/// entries in one run beside other tests, 6,002 alone).
#[test]
fn a_group_at_its_limit_costs_the_claim_a_few_rows() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    let grouped = |g: &str| NewJob::new("q", "k", Vec::new()).group(g);
    {
        let relay = db.open(Options::default()).unwrap();
        relay
            .set_queue_limits(
                "q",
                relay::QueueLimits {
                    max_leased_per_group: Some(1),
                    ..relay::QueueLimits::default()
                },
            )
            .unwrap();
        relay
            .submit_batch((0..2_000).map(|_| grouped("held")).collect())
            .unwrap();
        relay
            .submit_batch((0..2_000).map(|_| grouped("free")).collect())
            .unwrap();
        let first = relay.lease(LeaseRequest::new(["q"]).max(2)).unwrap();
        assert_eq!(first.len(), 2);
        let free = first.iter().find(|j| j.group.as_deref() == Some("free")).unwrap();
        relay.ack(free.id, free.token, None).unwrap();
    }
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // Index entries read on the jobs and heads tables.
    let mut read = || -> i64 {
        settled_stat(
            &mut c,
            "SELECT coalesce(sum(idx_tup_fetch), 0)::BIGINT FROM pg_stat_all_indexes
             WHERE relname IN ('relay_jobs', 'relay_group_heads')
               AND (indexrelname LIKE '%group%' OR indexrelname LIKE '%fair%' OR indexrelname LIKE '%ready%')",
        )
    };
    let before = read();
    let claims = 600i64;
    {
        let relay = db.open(Options::default()).unwrap();
        for _ in 0..claims {
            let got = relay.lease(LeaseRequest::new(["q"]).max(1)).unwrap();
            assert_eq!(got.len(), 1, "the free group's next job");
            assert_eq!(got[0].group.as_deref(), Some("free"));
            relay.ack(got[0].id, got[0].token, None).unwrap();
        }
    }
    let entries = read() - before;
    eprintln!("{entries} rows fetched for {claims} claims");
    assert!(
        entries <= claims * 80,
        "{entries} rows fetched for {claims} claims beside a held group"
    );
}

/// The group triggers' reads of relay_jobs (migrations/0019_group_heads.sql)
/// are planned on relay_jobs_group_turn even as generic plans made over an
/// empty table, which is when a connection first runs them and how they
/// then stay (the writer forces generic plans): a plan that scans the
/// queue's grouped jobs (relay_jobs_group_wait, its first column only the
/// queue, looked as cheap once) would cost every lease and submit of a
/// group. Each statement as the triggers write it, with NEW's or the key's
/// columns as parameters.
#[test]
fn the_group_triggers_read_relay_jobs_by_its_index_planned_on_an_empty_table() {
    let url = PgServer::shared().new_database();
    drop(PgDb::fresh_at(url.clone()).open(Options::default()).unwrap()); // migrates
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute("SET plan_cache_mode = force_generic_plan").unwrap();
    let plan = |c: &mut postgres::Client, sql: &str, args: &str| -> String {
        c.batch_execute(&format!("DEALLOCATE ALL; PREPARE s AS {sql}")).unwrap();
        c.query(&format!("EXPLAIN EXECUTE s({args})"), &[])
            .unwrap()
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let cases = [
        (
            "the group's last turn",
            "SELECT turn FROM relay_jobs
             WHERE state = 'READY' AND grp IS NOT NULL AND queue = $1 AND priority = $2 AND grp = $3 AND id <> $4
             ORDER BY turn DESC, id DESC LIMIT 1",
            "'q', 1, 'g', 5",
        ),
        (
            "the group's first READY job",
            "SELECT j.turn, j.id FROM relay_jobs j
             WHERE j.state = 'READY' AND j.grp IS NOT NULL AND j.queue = $1 AND j.priority = $2 AND j.grp = $3
             ORDER BY j.turn, j.id LIMIT 1",
            "'q', 1, 'g'",
        ),
    ];
    for (name, sql, args) in cases {
        let p = plan(&mut c, sql, args);
        assert!(!p.contains("Seq Scan on relay_jobs"), "{name} scans relay_jobs:\n{p}");
        assert!(
            p.contains("relay_jobs_group_turn"),
            "{name} does not use relay_jobs_group_turn:\n{p}"
        );
        assert!(
            p.lines().any(|l| l.contains("Index Cond") && l.contains("(grp = $3)")),
            "{name} does not seek its group:\n{p}"
        );
        assert!(!p.contains("Sort"), "{name} sorts:\n{p}");
    }
    // A batch's note of the groups it takes jobs from reads the jobs it
    // did not read by their ids, never the groups' lines (a generic plan
    // once read the whole of relay_jobs_group_turn, whose predicate the
    // statement implied: 1,164,057 entries for 300 claims).
    let p = plan(
        &mut c,
        include_str!("../../relay-postgres/sql/apply_heads.sql"),
        "ARRAY['q'], ARRAY[1]::BIGINT[], ARRAY['g'], ARRAY[5]::BIGINT[]",
    );
    assert!(
        !p.contains("relay_jobs_group_turn"),
        "apply_heads reads the groups' lines:\n{p}"
    );
    // So does the batch's giving again of the turns it gave.
    let p = plan(
        &mut c,
        include_str!("../../relay-postgres/sql/apply_turns.sql"),
        "ARRAY[5, 6]::BIGINT[]",
    );
    assert!(
        !p.contains("relay_jobs_group_turn"),
        "apply_turns reads the groups' lines:\n{p}"
    );
    // The migrations hold these statements as written here (the last
    // turn's in relay_turn_for since version 20).
    let migration = [
        include_str!("../../relay-postgres/migrations/0019_group_heads.sql"),
        include_str!("../../relay-postgres/migrations/0020_schedule_groups.sql"),
    ]
    .concat();
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    for (name, sql) in [
        (
            "last",
            "AND grp = p_grp AND id <> p_id ORDER BY turn DESC, id DESC LIMIT 1",
        ),
        ("first", "AND j.grp = k.grp ORDER BY j.turn, j.id LIMIT 1"),
    ] {
        assert!(
            squash(&migration).contains(sql),
            "the trigger's {name} read changed: check its plan here"
        );
    }
}

/// A caller at REPEATABLE READ reads as of its start, at its commit too:
/// its fix never deletes a head row (here its snapshot shows the group
/// empty while another transaction made a job READY since), and a grouped
/// `relay_submit` whose group's row changed since it began fails with
/// 40001, to be retried, leaving nothing behind.
#[test]
fn a_repeatable_read_caller_never_leaves_a_group_without_its_head() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    let relay = db.open(Options::default()).unwrap();
    let head = |c: &mut postgres::Client, g: &str| -> Option<i64> {
        c.query_opt("SELECT job FROM relay_group_heads WHERE grp = $1", &[&g])
            .unwrap()
            .map(|r| r.get(0))
    };
    let mut c1 = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut c2 = postgres::Client::connect(&url, postgres::NoTls).unwrap();

    // The last READY job of the group is taken out by a REPEATABLE READ
    // transaction whose snapshot predates another job entering READY.
    let h = relay.submit(NewJob::new("q", "k", Vec::new()).group("g")).unwrap().0;
    c1.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1 FROM relay_jobs LIMIT 1")
        .unwrap();
    let j = relay.submit(NewJob::new("q", "k", Vec::new()).group("g")).unwrap().0;
    c1.query(
        "WITH t AS (UPDATE relay_jobs SET state = 'SCHEDULED', ready_at = ready_at + 3600000
                    WHERE id = $1 RETURNING queue, priority, grp)
         SELECT relay_heads_note_all(array_agg(queue), array_agg(priority), array_agg(grp)) FROM t",
        &[&h],
    )
    .unwrap();
    c1.batch_execute("COMMIT").unwrap();
    assert!(head(&mut c2, "g").is_some(), "the group keeps a head row");
    let got: Vec<i64> = relay
        .lease(LeaseRequest::new(["q"]).max(10))
        .unwrap()
        .iter()
        .map(|l| l.id.0)
        .collect();
    assert_eq!(got, [j]);

    // A grouped relay_submit at REPEATABLE READ, the group's row changed
    // since the transaction began.
    let k = relay.submit(NewJob::new("q", "k", Vec::new()).group("h")).unwrap().0;
    c1.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1 FROM relay_jobs LIMIT 1")
        .unwrap();
    relay.submit(NewJob::new("q", "k", Vec::new()).group("h")).unwrap();
    relay.lease(LeaseRequest::new(["q"]).max(1)).unwrap(); // takes k: the row changes
    c1.query("SELECT relay_submit('q', 'k', '', p_group => 'h')", &[])
        .unwrap();
    let end = c1.batch_execute("COMMIT");
    if let Err(e) = &end {
        assert_eq!(
            e.code(),
            Some(&postgres::error::SqlState::T_R_SERIALIZATION_FAILURE),
            "{e}"
        );
    }
    let ready: i64 = c2
        .query_one(
            "SELECT count(*) FROM relay_jobs WHERE grp = 'h' AND state = 'READY'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        ready,
        if end.is_ok() { 2 } else { 1 },
        "k taken, the other READY, and the submit if committed"
    );
    assert!(head(&mut c2, "h").is_some(), "group h keeps a head row");
    let _ = k;
}

/// The model with groups on PostgreSQL: a batch's jobs made READY keep
/// the engine's order in their group (`sql/apply_turns.sql`), as on
/// SQLite, although one statement writes their rows in an order of the
/// server's choosing.
#[test]
fn matches_the_model_with_groups() {
    relay_storetest::model::matches_the_model_with_groups(&PgDb::fresh, 150);
}

/// An operator's SQL that moves READY jobs to another priority or group
/// (Relay never does) leaves both lines headed, so every job is still
/// claimed: the old group's head passes on, the new group gets one
/// (migrations/0020_schedule_groups.sql). Without the move trigger the
/// moved jobs' new groups had no head row, and their jobs were never
/// leased.
#[test]
fn a_ready_job_moved_by_sql_to_another_group_or_class_is_still_claimed() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    let relay = db.open(Options::default()).unwrap();
    let sub = |g: &str, kind: &str| relay.submit(NewJob::new("q", kind, Vec::new()).group(g)).unwrap().0;
    let b1 = sub("b", "b1");
    sub("b", "b2");
    let d1 = sub("d", "d1");
    sub("d", "d2");
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.execute("UPDATE relay_jobs SET priority = 3 WHERE id = $1", &[&b1])
        .unwrap();
    c.execute("UPDATE relay_jobs SET grp = 'e' WHERE id = $1", &[&d1])
        .unwrap();
    c.execute("UPDATE relay_jobs SET grp = NULL WHERE kind = 'd2'", &[])
        .unwrap();
    // Every group with READY jobs has its head row, naming its first job.
    let wrong: Vec<String> = c
        .query(
            "SELECT j.queue || '/' || j.priority || '/' || j.grp || ' head ' || coalesce(h.job::TEXT, 'none')
             FROM (SELECT DISTINCT ON (queue, priority, grp) queue, priority, grp, id FROM relay_jobs
                   WHERE state = 'READY' AND grp IS NOT NULL ORDER BY queue, priority, grp, turn, id) AS j
             LEFT JOIN relay_group_heads h USING (queue, priority, grp)
             WHERE h.job IS DISTINCT FROM j.id",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(wrong, Vec::<String>::new());
    let mut kinds = Vec::new();
    for _ in 0..10 {
        let got = relay.lease(LeaseRequest::new(["q"]).max(2)).unwrap();
        kinds.extend(got.into_iter().map(|l| l.kind));
    }
    kinds.sort();
    assert_eq!(kinds, ["b1", "b2", "d1", "d2"], "every job claimed");
}

/// The number `sql` answers from the statistics views, once the
/// database's other backends have ended (a backend reports its counts at
/// the latest when it exits) and the number has stopped moving.
fn settled_stat(c: &mut postgres::Client, sql: &str) -> i64 {
    for _ in 0..100 {
        let others: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0);
        if others == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut last = -1;
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(200));
        let n: i64 = c.query_one(sql, &[]).unwrap().get(0);
        if n == last {
            return n;
        }
        last = n;
    }
    last
}

/// How many times relay_job_events' primary key was searched.
fn event_index_scans(c: &mut postgres::Client) -> i64 {
    settled_stat(
        c,
        "SELECT coalesce(sum(idx_scan), 0)::BIGINT FROM pg_stat_all_indexes WHERE relname = 'relay_job_events'",
    )
}

/// A job's events are numbered from the last number kept in its row
/// (migration 0021), which the statement that writes the job moves on:
/// leases, acks, nacks and extends of jobs Relay submitted read nothing
/// from relay_job_events (they read its highest number for every event
/// before: an index search each).
#[test]
fn events_are_numbered_without_searching_the_events() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    let ids = {
        let relay = db.open(Options::default()).unwrap();
        let mut ids = relay
            .submit_batch((0..100).map(|_| NewJob::new("q", "k", Vec::new())).collect())
            .unwrap();
        ids.push(relay.submit(NewJob::new("q", "k", Vec::new())).unwrap());
        ids
    };
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let before = event_index_scans(&mut c);
    {
        let relay = db.open(Options::default()).unwrap();
        // Batches of transitions, lone ones, a nack, an extend.
        let mut left = ids.len();
        while left > 0 {
            let got = relay.lease(LeaseRequest::new(["q"]).max(25)).unwrap();
            assert!(!got.is_empty());
            left -= got.len();
            for (i, j) in got.iter().enumerate() {
                match i {
                    0 => {
                        relay.nack(j.id, j.token, "again", Some(Duration::ZERO)).unwrap();
                        let again = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
                        relay.ack(again.id, again.token, None).unwrap();
                    }
                    1 => {
                        relay.extend(j.id, j.token, Duration::from_secs(60)).unwrap();
                        relay.ack(j.id, j.token, None).unwrap();
                    }
                    _ => relay.ack(j.id, j.token, None).unwrap(),
                }
            }
        }
        for id in &ids {
            assert_eq!(relay.get(*id).unwrap().state(), relay::JobState::Succeeded);
        }
    }
    let scans = event_index_scans(&mut c) - before;
    assert_eq!(scans, 0, "searches of relay_job_events' index by the leases and acks");
    // Each row's last_seq is its last event's number.
    let off: i64 = c
        .query_one(
            "SELECT count(*) FROM relay_jobs AS j
             WHERE j.last_seq IS DISTINCT FROM (SELECT max(seq) FROM relay_job_events WHERE job_id = j.id)",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(off, 0, "jobs whose last_seq is not their last event's number");
}

/// A job whose last number is not known (a row from before migration 0021,
/// or one another program wrote events for and set last_seq NULL, as the
/// migration asks) has its events numbered after those it has, and its
/// last_seq known again from its next transition.
#[test]
fn events_of_a_job_without_a_last_seq_follow_those_it_has() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    let relay = db.open(Options::default()).unwrap();
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(&format!(
        "BEGIN;
         INSERT INTO relay_job_events (job_id, seq, at, kind, data) VALUES ({0}, 2, 0, 'note', '\"by hand\"');
         UPDATE relay_jobs SET last_seq = NULL WHERE id = {0};
         COMMIT;",
        id.0
    ))
    .unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    relay.append_event(id, "log", &serde_json::json!("x")).unwrap();
    relay.ack(l.id, l.token, None).unwrap();
    let events = relay.events(id).unwrap();
    let got: Vec<(i64, &str)> = events.iter().map(|e| (e.seq, e.kind.as_str())).collect();
    assert_eq!(
        got,
        [
            (1, "submitted"),
            (2, "note"),
            (3, "leased"),
            (4, "log"),
            (5, "succeeded")
        ]
    );
    let last: Option<i64> = c
        .query_one("SELECT last_seq FROM relay_jobs WHERE id = $1", &[&id.0])
        .unwrap()
        .get(0);
    assert_eq!(last, Some(5));
}

/// Issue 40: a job's wait and an emit of its key, sent at once by two
/// Relays (two writers, two connections) on one database, again and again:
/// the job is never left WAITING for an event that was emitted. Each takes
/// the key's transaction lock before it reads the event (`event_lock.sql`),
/// so whichever commits second sees the first's commit.
#[test]
fn a_wait_and_an_emit_in_two_relays_lose_no_wake_up() {
    let url = PgServer::shared().new_database();
    let a = PgDb::fresh_at(url.clone()).open(Options::default()).unwrap();
    let b = PgDb::fresh_at(url).open(Options::default()).unwrap();
    let rounds = 150;
    for i in 0..rounds {
        let id = a.submit(NewJob::new("q", "k", Vec::new())).unwrap();
        let l = a.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
        assert_eq!(l.id, id);
        let key = format!("race:{i}");
        let until = relay::Clock::now(&relay::SystemClock).plus(Duration::from_secs(3600));
        let barrier = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                barrier.wait();
                a.wait(id, l.token, "event", &key, until).unwrap();
            });
            s.spawn(|| {
                barrier.wait();
                b.emit(&key, b"1".to_vec()).unwrap();
            });
        });
        let job = a.get(id).unwrap();
        assert_eq!(
            job.state(),
            relay::JobState::Ready,
            "round {i}: the job waits for an event that was emitted"
        );
        assert_eq!(
            relay::Waited::of(&job.step("event").unwrap().output),
            Some(relay::Waited::Event(b"1".to_vec())),
            "round {i}"
        );
        let again = a.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
        a.ack(id, again.token, None).unwrap();
    }
}
