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
//! - `relay-testchild runtime DB CONCURRENCY SLEEP_MS`: the worker runtime on
//!   queue `q` (1 s leases, 500 ms grace, signals handled); its handler
//!   prints `RUNNING <id>`, sleeps, and succeeds. Exits 0 once shut down.

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
        return runtime(&arg(2), threads, arg(4).parse().unwrap_or(0));
    }
    let relay = match Relay::connect(&arg(2), relay::Options::default()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("relay-testchild: cannot open {}: {e}", arg(2));
            return ExitCode::FAILURE;
        }
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
    loop {
        let req = LeaseRequest::new(["q"])
            .worker(format!("p{}-t{t}", std::process::id()))
            .lease_for(lease_for);
        let Some(l) = relay.lease(req.wait(Duration::from_millis(200)))?.pop() else {
            let stats = relay.stats()?;
            let q = stats.queues.get("q");
            let open = q.map_or(0, |q| q.counts[&JobState::Ready] + q.counts[&JobState::Leased]);
            if open == 0 {
                return Ok(());
            }
            continue;
        };
        n += 1;
        if stall_every > 0 && n.is_multiple_of(stall_every) {
            std::thread::sleep(lease_for + Duration::from_millis(300));
        }
        match relay.ack(l.id, l.token, None) {
            Ok(()) => say(format!("ACK {} {}", l.id, l.token)),
            Err(Error::LeaseLost { .. }) => say(format!("LOST {} {}", l.id, l.token)),
            Err(e) => return Err(e),
        }
    }
}

fn runtime(db: &str, concurrency: usize, sleep_ms: u64) -> ExitCode {
    let result = Relay::connect(db, relay::Options::default()).and_then(|relay| {
        relay::worker::Worker::new(relay, ["q"])
            .concurrency(concurrency)
            .lease_for(Duration::from_secs(1))
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
