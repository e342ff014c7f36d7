//! A child process for the tests that need real processes: killed with
//! SIGKILL mid-flight, or run twice against one file. Each line it prints
//! on stdout reports a call that has returned successfully (an
//! acknowledged change).
//!
//! - `relay-testchild churn DB THREADS`: submit, lease and ack in a loop
//!   until killed; prints `S <id>` after each submit, `A <id>` after each ack.
//! - `relay-testchild work DB THREADS STALL_EVERY`: leases and acks jobs of
//!   queue `q` (1 s leases) until none is left; every STALL_EVERY-th job it
//!   sleeps past its lease before acking. Prints `ACK <id> <token>` for an
//!   accepted ack and `LOST <id> <token>` for a refused one.
//! - `relay-testchild script DB`: runs one command per line of stdin and
//!   ends each answer with `OK <command>` (or `ERR <command>: <error>`):
//!   `submit N` prints `S <id>` per job; `work N` leases up to N jobs and
//!   acks each, printing `A <id>`; `call NAME` makes one public call of
//!   that kind (see `call`), so a test can look at the process between
//!   calls (its file locks, the WAL) before it sends the next line.
//! - `relay-testchild campaign DB THREADS CUT_AFTER_MS [sync=N|full=N]`:
//!   under the fault VFS, THREADS threads submit, lease, ack and nack until
//!   the power is cut after CUT_AFTER_MS (exit status
//!   `relay_faultvfs::CUT_EXIT_CODE`), optionally with the Nth fsync
//!   failing (EIO) or the Nth write finding the disk full. Prints `S <id>`,
//!   `L <id> <token>`, `A <id> <token>`, `N <id> <token>` after each call
//!   that returned successfully, `X stopped` when a thread stops after an
//!   I/O error; beside them, workflows that record a step, wait for an
//!   event and are woken by other threads' emits (see `campaign_workflow`:
//!   `R`, `W`, `E` lines).
//! - `relay-testchild faults DB WRITE|FULL|SYNC N CALLS`: under the fault
//!   VFS with the Nth write failing with EIO (`WRITE`) or ENOSPC (`FULL`),
//!   or the Nth fsync failing (`SYNC`), makes CALLS submits one after
//!   another; prints `S <id>` for each answered, `E <variant>: <error>`
//!   for each refused. When the open itself fails it prints `OPEN-ERR: ..`
//!   and opens once more: `REOPEN-OK` or `REOPEN-ERR: ..`.
//! - `relay-testchild idle DB`: opens the store with the default options
//!   (the scheduler on) and does nothing else until killed; prints
//!   `OPEN` once open.
//! - `relay-testchild runtime DB CONCURRENCY SLEEP_MS [LEASE_MS]`: the worker
//!   runtime on queue `q` (leases of LEASE_MS, 1 s if not given; 500 ms
//!   grace; signals handled); its handler
//!   prints `RUNNING <id>`, sleeps, and succeeds. Exits 0 once shut down.
//! - `relay-testchild workflow DB CONCURRENCY`: the worker runtime on queue
//!   `wf` (500 ms leases), each job five steps with a 50 ms sleep after the
//!   second: a step's body prints `B <id> <step>` when it starts, sleeps a
//!   few ms and returns a value unique to its run (`<pid>-<nanos>`); once
//!   `ctx.step` has returned (its record answered) the handler prints
//!   `R <id> <step> <value>`, the value the job holds for the step. Runs
//!   until killed.
//! - `relay-testchild enqueue DB HOLD_AFTER`: transactional enqueue. In a
//!   loop, on a connection of its own to DB (rusqlite, or `postgres` for a
//!   URL): begins a transaction, inserts a row into `orders`, submits a job
//!   for it inside that transaction (`Relay::submit_in` / `submit_in_pg`),
//!   prints `INSERTED <n>`, commits and prints `COMMITTED <n> <job id>`.
//!   After HOLD_AFTER commits (0: never) it stops before the commit of
//!   the next one and sleeps until killed.

use relay::{Error, JobState, LeaseRequest, NewJob, Relay};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let threads: usize = arg(3).parse().unwrap_or(4);
    if arg(1) == "runtime" {
        let lease = Duration::from_millis(arg(5).parse().unwrap_or(1_000));
        return runtime(&arg(2), threads, arg(4).parse().unwrap_or(0), lease);
    }
    if arg(1) == "script" {
        return script(&arg(2));
    }
    if arg(1) == "workflow" {
        return workflow(&arg(2), threads);
    }
    if arg(1) == "idle" {
        let Some(_relay) = open(&arg(2)) else {
            return ExitCode::FAILURE;
        };
        say_line("OPEN");
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    if arg(1) == "enqueue" {
        return match enqueue(&arg(2), arg(3).parse().unwrap_or(0)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("relay-testchild: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if arg(1) == "campaign" {
        return campaign(&arg(2), threads, arg(4).parse().unwrap_or(100), &arg(5));
    }
    if arg(1) == "faults" {
        return faults(
            &arg(2),
            &arg(3),
            arg(4).parse().unwrap_or(1),
            arg(5).parse().unwrap_or(10),
        );
    }
    let Some(relay) = open(&arg(2)) else {
        return ExitCode::FAILURE;
    };
    let out = Mutex::new(std::io::stdout());
    let say = |line: String| {
        let mut o = out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    };
    let result: Result<(), Error> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let relay = relay.clone();
                let say = &say;
                let mode = arg(1);
                let stall_every: u64 = arg(4).parse().unwrap_or(0);
                s.spawn(move || match mode.as_str() {
                    "churn" => churn(&relay, t, say),
                    "work" => work(&relay, t, stall_every, say),
                    other => {
                        eprintln!("relay-testchild: unknown mode {other:?}");
                        Ok(())
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().unwrap_or(Err(Error::Closed)))
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("relay-testchild: {e}");
            ExitCode::FAILURE
        }
    }
}

fn churn(relay: &Relay, t: usize, say: &(dyn Fn(String) + Sync)) -> Result<(), Error> {
    for i in 0u64.. {
        let id = relay.submit(NewJob::new("crash", "k", format!("{t}-{i}").into_bytes()))?;
        say(format!("S {id}"));
        if let Some(l) = relay.lease(LeaseRequest::new(["crash"]).worker(format!("t{t}")))?.pop() {
            relay.ack(l.id, l.token, Some(b"ok".to_vec()))?;
            say(format!("A {}", l.id));
        }
    }
    Ok(())
}

fn work(relay: &Relay, t: usize, stall_every: u64, say: &(dyn Fn(String) + Sync)) -> Result<(), Error> {
    let lease_for = Duration::from_secs(1);
    let mut n = 0u64;
    // A worker that looks before it works: every thread reads once first
    // (the read connections of a process open lazily, on the first read).
    relay.stats()?;
    loop {
        let req = LeaseRequest::new(["q"])
            .worker(format!("p{}-t{t}", std::process::id()))
            .lease_for(lease_for);
        // Busy: the batch met another process's (a deadlock PostgreSQL
        // broke, with SKIP LOCKED off) more often than the writer plans
        // again; nothing was applied, and a worker tries again.
        let leased = match relay.lease(req.wait(Duration::from_millis(200))) {
            Err(Error::Busy) => continue,
            other => other?,
        };
        let Some(l) = leased.into_iter().next_back() else {
            let stats = relay.stats()?;
            let q = stats.queues.get("q");
            let open = q.map_or(0, |q| q.counts[&JobState::Ready] + q.counts[&JobState::Leased]);
            if open == 0 {
                return Ok(());
            }
            continue;
        };
        say(format!("L {} {}", l.id, l.token));
        n += 1;
        if stall_every > 0 && n.is_multiple_of(stall_every) {
            std::thread::sleep(lease_for + Duration::from_millis(300));
        }
        let mut acked = relay.ack(l.id, l.token, None);
        for _ in 0..5 {
            if !matches!(acked, Err(Error::Busy)) {
                break;
            }
            acked = relay.ack(l.id, l.token, None);
        }
        match acked {
            Ok(()) => say(format!("ACK {} {}", l.id, l.token)),
            // Another worker holds it or has finished it.
            Err(Error::LeaseLost { .. } | Error::InvalidState { .. }) => say(format!("LOST {} {}", l.id, l.token)),
            Err(e) => return Err(e),
        }
    }
}

fn workflow(db: &str, concurrency: usize) -> ExitCode {
    let out = std::sync::Arc::new(Mutex::new(std::io::stdout()));
    let say = move |line: String| {
        let mut o = out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    };
    let result = Relay::connect(db, relay::Options::default()).and_then(|relay| {
        relay::worker::Worker::new(relay, ["wf"])
            .concurrency(concurrency)
            .lease_for(Duration::from_millis(500))
            .handler("flow", move |ctx| {
                for step in 0..5 {
                    let name = format!("s{step}");
                    let value: String = ctx.step(&name, || {
                        say(format!("B {} {name}", ctx.id()));
                        std::thread::sleep(Duration::from_millis(fastrand::u64(1..15)));
                        let nanos = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_nanos());
                        Ok(format!("{}-{nanos}", std::process::id()))
                    })?;
                    say(format!("R {} {name} {value}", ctx.id()));
                    if step == 1 {
                        ctx.sleep("nap", Duration::from_millis(50))?;
                    }
                }
                Ok(None)
            })
            .run()
    });
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("relay-testchild: {e}");
            ExitCode::FAILURE
        }
    }
}

fn runtime(db: &str, concurrency: usize, sleep_ms: u64, lease: Duration) -> ExitCode {
    let result = Relay::connect(db, relay::Options::default()).and_then(|relay| {
        relay::worker::Worker::new(relay, ["q"])
            .concurrency(concurrency)
            .lease_for(lease)
            .grace(Duration::from_millis(500))
            .handler("k", move |ctx| {
                println!("RUNNING {}", ctx.id());
                let _ = std::io::stdout().flush();
                std::thread::sleep(Duration::from_millis(sleep_ms));
                Ok(None)
            })
            .run()
    });
    match result {
        Ok(stats) => {
            println!("STOPPED released={} succeeded={}", stats.released, stats.succeeded);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("relay-testchild: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The `script` mode: see the module docs.
fn script(db: &str) -> ExitCode {
    let Some(relay) = open(db) else {
        return ExitCode::FAILURE;
    };
    println!("OPEN");
    let mut held: Vec<relay::LeasedJob> = Vec::new();
    let mut last: Option<relay::JobId> = None;
    for line in std::io::stdin().lines().map_while(Result::ok) {
        let line = line.trim().to_owned();
        let (cmd, arg) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        let n: usize = arg.parse().unwrap_or(1);
        let r = match cmd {
            "submit" => (0..n).try_for_each(|i| {
                let id = relay.submit(NewJob::new("q", "k", format!("script-{i}").into_bytes()))?;
                println!("S {id}");
                Ok(())
            }),
            "work" => relay
                .lease(LeaseRequest::new(["q"]).worker("script").max(n as u32))
                .and_then(|jobs| {
                    jobs.into_iter().try_for_each(|j| {
                        relay.ack(j.id, j.token, None)?;
                        println!("A {}", j.id);
                        Ok(())
                    })
                }),
            "call" => call(&relay, arg, &mut held, &mut last),
            other => {
                println!("ERR {other}: unknown command");
                continue;
            }
        };
        match r {
            Ok(()) => println!("OK {line}"),
            Err(e) => println!("ERR {line}: {e}"),
        }
        let _ = std::io::stdout().flush();
    }
    ExitCode::SUCCESS
}

/// Every kind of public call, one per name, on jobs of queue `c`.
fn call(
    relay: &Relay,
    name: &str,
    held: &mut Vec<relay::LeasedJob>,
    last: &mut Option<relay::JobId>,
) -> Result<(), Error> {
    let lease = |max: u32| relay.lease(LeaseRequest::new(["c"]).worker("calls").max(max));
    let job = |last: &Option<relay::JobId>| last.ok_or(Error::NotFound { id: relay::JobId(0) });
    match name {
        "submit" => *last = Some(relay.submit(NewJob::new("c", "k", b"{}".to_vec()))?),
        "submit_batch" => {
            let jobs = (0..4).map(|i| NewJob::new("c", "k", vec![i])).collect();
            *last = relay.submit_batch(jobs)?.pop();
        }
        "lease" => held.extend(lease(4)?),
        "ack" => {
            let j = held.pop().ok_or(Error::Closed)?;
            relay.ack(j.id, j.token, Some(b"done".to_vec()))?;
        }
        "nack" => {
            let j = held.pop().ok_or(Error::Closed)?;
            relay.nack(j.id, j.token, "failed", Some(Duration::from_secs(3600)))?;
        }
        "extend" => {
            let j = held.last().ok_or(Error::Closed)?;
            relay.extend(j.id, j.token, Duration::from_secs(60))?;
        }
        "release" => {
            let j = held.pop().ok_or(Error::Closed)?;
            relay.release(j.id, j.token)?;
        }
        "complete_batch" => {
            let batch = held
                .drain(..)
                .map(|j| relay::Completion::ack(j.id, j.token, None))
                .collect();
            relay.complete_batch(batch)?.into_iter().try_for_each(|r| r.map(drop))?;
        }
        "cancel" => relay.cancel(job(last)?)?,
        "retry" => relay.retry(job(last)?)?,
        "delete" => relay.delete(job(last)?)?,
        "append_event" => drop(relay.append_event(job(last)?, "progress", &serde_json::json!({"n": 1}))?),
        "get" => drop(relay.get(job(last)?)?),
        "events" => drop(relay.events(job(last)?)?),
        "list" => drop(relay.list(&relay::JobFilter {
            limit: 10,
            ..relay::JobFilter::default()
        })?),
        "stats" => drop(relay.stats()?),
        "metrics" => drop(relay.metrics()),
        "prune" => drop(relay.prune()?),
        "reap_expired" => drop(relay.reap_expired()?),
        "async_stats" => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|_| Error::Closed)?;
            let r = relay.to_async();
            rt.block_on(async {
                let id = r.submit(NewJob::new("c", "k", b"{}".to_vec())).await?;
                r.get(id).await?;
                r.stats().await.map(drop)
            })?;
        }
        other => {
            return Err(Error::InvalidInput(relay::InvalidInput::new(
                "call",
                format!("unknown call {other}"),
            )));
        }
    }
    Ok(())
}

fn say_line(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
}

/// The `campaign` mode: see the module docs.
fn campaign(db: &str, threads: usize, cut_after_ms: u64, fault: &str) -> ExitCode {
    let plan = fault
        .split_once('=')
        .and_then(|(kind, n)| fault_plan(kind, n.parse().ok()?));
    relay_faultvfs::install(plan.unwrap_or_default());
    let Some(relay) = open(db) else {
        return ExitCode::FAILURE;
    };
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(cut_after_ms));
        relay_faultvfs::power_cut();
    });
    std::thread::scope(|s| {
        for t in 0..threads {
            let relay = relay.clone();
            s.spawn(move || {
                // A call the disk failed is not answered Ok: not printed.
                // After a full disk the thread goes on; after an I/O error
                // the Relay refuses everything, and the thread waits for the cut.
                loop {
                    match campaign_thread(&relay, t) {
                        Err(Error::Storage(_) | Error::MaybeApplied(_)) if fault.starts_with("full") => continue,
                        Err(Error::Storage(_) | Error::MaybeApplied(_)) if fault.starts_with("sync") => {
                            say_line("X stopped");
                            return;
                        }
                        Err(e) => {
                            eprintln!("relay-testchild: thread {t}: {e}");
                            std::process::exit(1);
                        }
                        Ok(()) => return,
                    }
                }
            });
        }
    });
    // Every thread stopped (after an I/O error): the cut still ends it.
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn campaign_thread(relay: &Relay, t: usize) -> Result<(), Error> {
    let mut rng = fastrand::Rng::with_seed(t as u64 ^ u64::from(std::process::id()));
    loop {
        let id = relay.submit(NewJob::new("p", "k", vec![0u8; rng.usize(0..200)]))?;
        say_line(&format!("S {id}"));
        let req = LeaseRequest::new(["p"]).worker(format!("t{t}")).max(2);
        for job in relay.lease(req)? {
            say_line(&format!("L {} {}", job.id, job.token));
            if rng.u8(0..4) == 0 {
                relay.nack(job.id, job.token, "campaign", Some(Duration::ZERO))?;
                say_line(&format!("N {} {}", job.id, job.token));
            } else {
                relay.ack(job.id, job.token, None)?;
                say_line(&format!("A {} {}", job.id, job.token));
            }
        }
        campaign_workflow(relay, t, &mut rng)?;
    }
}

/// The campaign's workflows (issue 40): a job of queue `w` records step
/// `a`, then waits for event `e<id>` under step `w` (a day at most), and
/// is acked once leased with the event recorded; each pass also emits the
/// event of a job submitted a little earlier (waiting, about to wait, or
/// from an earlier round). Prints `R <id> a <value>` for an answered record
/// (the value that stands: its own, or the earlier one the call returned),
/// `W <id> e<id>` for an answered wait and `E e<id> <woken>` for an
/// answered emit.
fn campaign_workflow(relay: &Relay, t: usize, rng: &mut fastrand::Rng) -> Result<(), Error> {
    let id = relay.submit(NewJob::new("w", "flow", Vec::new()))?;
    say_line(&format!("S {id}"));
    let req = LeaseRequest::new(["w"]).worker(format!("t{t}")).max(2);
    for job in relay.lease(req)? {
        let (id, token) = (job.id, job.token);
        say_line(&format!("L {id} {token}"));
        if job.steps.iter().any(|s| s.name == "w") {
            relay.ack(id, token, None)?;
            say_line(&format!("A {id} {token}"));
            continue;
        }
        if !job.steps.iter().any(|s| s.name == "a") {
            let mine = format!("{id}-{token}").into_bytes();
            let stands = relay
                .record_step(id, token, "a", mine.clone())?
                .map_or(mine, |s| s.output);
            say_line(&format!("R {id} a {}", String::from_utf8_lossy(&stands)));
        }
        let until = relay::Clock::now(&relay::SystemClock).plus(Duration::from_secs(86_400));
        relay.wait(id, token, "w", &format!("e{id}"), until)?;
        say_line(&format!("W {id} e{id}"));
    }
    let back = rng.i64(1..60);
    if id.0 > back {
        let key = format!("e{}", id.0 - back);
        let emitted = relay.emit(&key, b"1".to_vec())?;
        say_line(&format!("E {key} {}", emitted.woken));
    }
    Ok(())
}

/// The `faults` mode: see the module docs.
fn faults(db: &str, mode: &str, n: u64, calls: usize) -> ExitCode {
    let Some(plan) = fault_plan(mode, n) else {
        eprintln!("relay-testchild: unknown fault {mode:?}");
        return ExitCode::FAILURE;
    };
    relay_faultvfs::install(plan);
    let relay = match Relay::connect(db, relay::Options::default()) {
        Ok(r) => r,
        Err(e) => {
            // The failure hit the open itself: say so, and try once more
            // in this process (the plan's failure is spent by now).
            say_line(&format!("OPEN-ERR: {e}"));
            match Relay::connect(db, relay::Options::default()) {
                Ok(_) => say_line("REOPEN-OK"),
                Err(e) => say_line(&format!("REOPEN-ERR: {e}")),
            }
            return ExitCode::SUCCESS;
        }
    };
    for i in 0..calls {
        match relay.submit(NewJob::new("f", "k", format!("{i}").into_bytes())) {
            Ok(id) => say_line(&format!("S {id}")),
            Err(e) => {
                let variant = format!("{e:?}");
                let variant = variant.split(['(', ' ', '{']).next().unwrap_or("?").to_owned();
                say_line(&format!("E {variant}: {e}"));
            }
        }
    }
    ExitCode::SUCCESS
}

/// The Nth write failing with EIO (`write`) or ENOSPC (`full`), or the Nth
/// fsync failing (`sync`); any case.
fn fault_plan(kind: &str, n: u64) -> Option<relay_faultvfs::Plan> {
    use relay_faultvfs::codes;
    let write = |code| relay_faultvfs::Plan {
        fail_write: Some((n, code)),
        ..Default::default()
    };
    match kind.to_ascii_lowercase().as_str() {
        "write" => Some(write(codes::SQLITE_IOERR_WRITE)),
        "full" => Some(write(codes::SQLITE_FULL)),
        "sync" => Some(relay_faultvfs::Plan {
            fail_sync: Some(n),
            ..Default::default()
        }),
        _ => None,
    }
}

/// Opens the database, or says why not on stderr.
/// The `enqueue` mode: see the module docs.
fn enqueue(db: &str, hold_after: u64) -> Result<(), Box<dyn std::error::Error>> {
    let relay = Relay::connect(db, relay::Options::default())?;
    let job = |n: u64| NewJob::new("orders", "confirm", format!("{{\"order\":{n}}}").into_bytes());
    let mut committed = 0;
    let mut hold = |_n: u64| {
        committed += 1;
        if hold_after > 0 && committed > hold_after {
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
    };
    if let relay::StoreUrl::Postgres(url) = relay::StoreUrl::parse(db) {
        let mut client = relay::postgres::Client::connect(url, relay::postgres::NoTls)?;
        client.batch_execute("CREATE TABLE IF NOT EXISTS orders (id BIGINT PRIMARY KEY)")?;
        let last: i64 = client.query_one("SELECT coalesce(max(id), 0) FROM orders", &[])?.get(0);
        for n in u64::try_from(last)? + 1.. {
            let mut tx = client.transaction()?;
            tx.execute("INSERT INTO orders (id) VALUES ($1)", &[&i64::try_from(n)?])?;
            let id = relay.submit_in_pg(&mut tx, job(n))?;
            say_line(&format!("INSERTED {n}"));
            hold(n);
            tx.commit()?;
            say_line(&format!("COMMITTED {n} {id}"));
        }
    } else {
        let mut conn = relay::rusqlite::Connection::open(db)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY)", [])?;
        let last: i64 = conn.query_row("SELECT coalesce(max(id), 0) FROM orders", [], |r| r.get(0))?;
        for n in u64::try_from(last)? + 1.. {
            let tx = conn.transaction_with_behavior(relay::rusqlite::TransactionBehavior::Immediate)?;
            tx.execute("INSERT INTO orders (id) VALUES (?1)", [i64::try_from(n)?])?;
            let job = relay.submit_in(&tx, job(n))?;
            say_line(&format!("INSERTED {n}"));
            hold(n);
            tx.commit()?;
            say_line(&format!("COMMITTED {n} {}", job.id));
        }
    }
    Ok(())
}

fn open(db: &str) -> Option<Relay> {
    Relay::connect(db, relay::Options::default())
        .inspect_err(|e| eprintln!("relay-testchild: cannot open {db}: {e}"))
        .ok()
}
