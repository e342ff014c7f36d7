//! `relay demo`: a new database, a few thousand jobs over three queues and
//! four priorities, a few workers, some failures and retries, one job that
//! always fails and goes DEAD; a schedule ticking every second; a small
//! pipeline of jobs that wait for each other; then a report of what
//! happened.

use crate::args::DemoArgs;
use crate::error::CliError;
use crate::output::Out;
use relay::{JobFilter, JobId, JobState, LeaseRequest, LeasedJob, NewJob, NewSchedule, Options, Relay, RetryPolicy};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const QUEUES: [(&str, &str); 3] = [("emails", "send"), ("reports", "render"), ("webhooks", "deliver")];

/// What the workers saw.
#[derive(Default)]
struct Tally {
    finished: AtomicU64,
    succeeded: AtomicU64,
    retries: AtomicU64,
    dead: AtomicU64,
    /// Wait before the first lease, per priority, in milliseconds.
    waits: Mutex<[Vec<u64>; 4]>,
}

pub fn run(db: Option<PathBuf>, args: &DemoArgs, out: &Out) -> Result<(), CliError> {
    // Without --db the demo works on a temporary file and removes it after.
    let temporary = db.is_none();
    let path = db.unwrap_or_else(|| std::env::temp_dir().join(format!("relay-demo-{}.db", std::process::id())));
    let result = run_on(&path, args, !temporary, out);
    if temporary {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        if result.is_ok() && !out.is_json() {
            out.line(&format!(
                "(removed the temporary database {}; pass --db PATH to keep one)",
                path.display()
            ));
        }
    }
    result
}

fn run_on(path: &std::path::Path, args: &DemoArgs, kept: bool, out: &Out) -> Result<(), CliError> {
    let path = path.to_path_buf();
    if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
        return Err(CliError::Usage(format!(
            "{} already exists: the demo makes a new database; pass --db with a new path",
            path.display()
        )));
    }
    if args.jobs == 0 || args.workers == 0 || args.workers > 256 {
        return Err(CliError::Usage("--jobs must be at least 1 and --workers 1-256".into()));
    }
    let options = Options {
        retry: RetryPolicy {
            base: Duration::from_millis(20),
            cap: Duration::from_millis(500),
            jitter: 0.5,
        },
        aging_interval: Duration::from_secs(2),
        ..Options::default()
    };
    let relay = Relay::connect(&path.to_string_lossy(), options)?;
    let jobs: u64 = relay.stats()?.queues.values().flat_map(|q| q.counts.values()).sum();
    if jobs > 0 {
        return Err(CliError::Usage(format!(
            "{} already holds {jobs} jobs: the demo makes a new database; pass --db with a new one",
            path.display()
        )));
    }
    if !out.is_json() {
        let store = match relay::StoreUrl::parse(&path.to_string_lossy()) {
            relay::StoreUrl::Postgres(_) => "PostgreSQL",
            relay::StoreUrl::File(_) => "SQLite, WAL, every answer after its fsync",
        };
        out.line(&format!("Relay demo: {} ({store})\n", path.display()));
    }
    let (submit_time, poison) = submit_all(&relay, args)?;
    let total = u64::from(args.jobs) + 1;
    let tally = Tally::default();
    let start = Instant::now();
    std::thread::scope(|s| -> Result<(), CliError> {
        let workers: Vec<_> = (0..args.workers)
            .map(|w| {
                s.spawn({
                    let relay = relay.clone();
                    let tally = &tally;
                    move || work(&relay, w, total, tally)
                })
            })
            .collect();
        progress(&tally, total);
        workers
            .into_iter()
            .try_for_each(|h| h.join().unwrap_or(Err(relay::Error::Closed)))?;
        Ok(())
    })?;
    let run_time = start.elapsed();
    let ticks = periodic(&relay, out)?;
    let rounds = pipeline(&relay)?;
    report(
        &relay,
        out,
        (&path, kept),
        args,
        total,
        submit_time,
        run_time,
        &tally,
        poison,
        &ticks,
        &rounds,
    )
}

/// A pipeline: three `fetch` jobs, a `merge` that waits for all of them and
/// a `publish` that waits for the merge. Workers lease whatever is READY,
/// round after round; returns each round's jobs (id and kind), which shows
/// the order the dependencies impose.
fn pipeline(relay: &Relay) -> Result<Vec<Vec<(JobId, String)>>, CliError> {
    let job = |kind: &str| NewJob::new("pipeline", kind, Vec::new());
    let fetches = (0..3)
        .map(|_| relay.submit(job("fetch")))
        .collect::<relay::Result<Vec<_>>>()?;
    let merge = relay.submit(job("merge").depends_on(fetches))?;
    relay.submit(job("publish").depends_on([merge]))?;
    let mut rounds = Vec::new();
    for _ in 0..10 {
        let leased = relay.lease(LeaseRequest::new(["pipeline"]).max(10))?;
        if leased.is_empty() {
            break;
        }
        for l in &leased {
            relay.ack(l.id, l.token, None)?;
        }
        rounds.push(leased.into_iter().map(|l| (l.id, l.kind)).collect());
    }
    Ok(rounds)
}

/// How long the demo lets its schedule tick.
const TICKING: Duration = Duration::from_millis(3_300);

/// A schedule that ticks every second while the demo waits a little over
/// three seconds (the engine's own scheduler enqueues its jobs); returns the
/// ticks of the jobs it enqueued.
fn periodic(relay: &Relay, out: &Out) -> Result<Vec<String>, CliError> {
    if !out.is_json() {
        out.line("a schedule ticks every second for 3 s (each tick enqueues exactly one job)...");
    }
    let every = NewSchedule::every(
        "demo-every-second",
        Duration::from_secs(1),
        NewJob::new("ticks", "tick", Vec::new()),
    );
    relay.add_schedule(every)?;
    std::thread::sleep(TICKING);
    relay.pause_schedule("demo-every-second")?;
    let filter = JobFilter {
        queue: Some("ticks".into()),
        limit: 100,
        ..JobFilter::default()
    };
    let mut ticks = Vec::new();
    for job in relay.list(&filter)? {
        let first = relay.events(job.id)?.into_iter().next();
        if let Some(tick) = first.and_then(|e| e.data["tick"].as_str().map(str::to_owned)) {
            ticks.push(tick);
        }
    }
    ticks.sort();
    Ok(ticks)
}

/// Submits from `workers` threads, one job per call, so that group commit
/// has callers to batch. Returns the time taken and the poison job's id.
fn submit_all(relay: &Relay, args: &DemoArgs) -> Result<(Duration, JobId), CliError> {
    let start = Instant::now();
    std::thread::scope(|s| {
        let producers: Vec<_> = (0..args.workers)
            .map(|p| {
                let relay = relay.clone();
                s.spawn(move || -> relay::Result<()> {
                    for i in (p..args.jobs).step_by(args.workers as usize) {
                        let (queue, kind) = QUEUES[i as usize % 3];
                        let priority = [0, 0, 0, 0, 1, 1, 1, 2, 2, 3][i as usize % 10];
                        // Some jobs fail once or twice before they succeed.
                        let fail = u32::from(i % 25 == 0) + u32::from(i % 75 == 0);
                        let payload = format!(r#"{{"n":{i},"fail_times":{fail}}}"#);
                        relay.submit(NewJob::new(queue, kind, payload).priority(priority).max_attempts(5))?;
                    }
                    Ok(())
                })
            })
            .collect();
        producers
            .into_iter()
            .try_for_each(|h| h.join().unwrap_or(Err(relay::Error::Closed)))
    })?;
    let poison = relay.submit(NewJob::new("webhooks", "deliver", r#"{"poison":true}"#).max_attempts(3))?;
    Ok((start.elapsed(), poison))
}

fn work(relay: &Relay, w: u32, total: u64, tally: &Tally) -> relay::Result<()> {
    let queues = QUEUES.map(|q| q.0);
    let req = LeaseRequest::new(queues)
        .worker(format!("demo-{w}"))
        .max(8)
        .wait(Duration::from_millis(100));
    while tally.finished.load(Relaxed) < total {
        for job in relay.lease(req.clone())? {
            handle(relay, &job, tally)?;
        }
    }
    Ok(())
}

fn handle(relay: &Relay, job: &LeasedJob, tally: &Tally) -> relay::Result<()> {
    if job.attempt == 1 {
        let waited = relay.options().clock.now().since(job.created_at);
        let ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
        if let Ok(mut w) = tally.waits.lock() {
            w[usize::from(job.priority.get())].push(ms);
        }
    }
    let payload: serde_json::Value = serde_json::from_slice(&job.payload).unwrap_or_default();
    let fail_times = payload["fail_times"].as_u64().unwrap_or(0);
    let outcome = if payload["poison"] == true {
        Some("poison pill: this job always fails".to_owned())
    } else if u64::from(job.attempt) <= fail_times {
        Some(format!("transient error on attempt {}", job.attempt))
    } else {
        None
    };
    match outcome {
        None => {
            relay.ack(job.id, job.token, Some(b"ok".to_vec()))?;
            tally.succeeded.fetch_add(1, Relaxed);
            tally.finished.fetch_add(1, Relaxed);
        }
        Some(error) => {
            let status = relay.nack(job.id, job.token, &error, None)?;
            if status.state == JobState::Dead {
                tally.dead.fetch_add(1, Relaxed);
                tally.finished.fetch_add(1, Relaxed);
            } else {
                tally.retries.fetch_add(1, Relaxed);
            }
        }
    }
    Ok(())
}

/// A progress line on stderr while the workers run (rewritten in place on a
/// terminal, every two seconds otherwise).
fn progress(tally: &Tally, total: u64) {
    let tty = std::io::stderr().is_terminal();
    let every = if tty {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(2)
    };
    let mut last = Instant::now();
    while tally.finished.load(Relaxed) < total {
        std::thread::sleep(Duration::from_millis(50));
        if last.elapsed() >= every {
            last = Instant::now();
            let done = tally.finished.load(Relaxed);
            let line = format!(
                "running: {done}/{total} jobs finished, {} retries",
                tally.retries.load(Relaxed)
            );
            let mut e = std::io::stderr().lock();
            let _ = if tty {
                write!(e, "\r{line}")
            } else {
                writeln!(e, "{line}")
            };
        }
    }
    if tty {
        let _ = write!(std::io::stderr(), "\r\x1b[K");
    }
}

#[allow(clippy::too_many_arguments)]
/// `(path, kept)`: the database, and whether it stays after the demo.
fn report(
    relay: &Relay,
    out: &Out,
    (path, kept): (&std::path::Path, bool),
    args: &DemoArgs,
    total: u64,
    submit_time: Duration,
    run_time: Duration,
    tally: &Tally,
    poison: JobId,
    ticks: &[String],
    rounds: &[Vec<(JobId, String)>],
) -> Result<(), CliError> {
    let round_text = |r: &Vec<(JobId, String)>| {
        r.iter()
            .map(|(id, kind)| format!("{kind} #{id}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let m = relay.metrics();
    let rate = |n: u64, d: Duration| n as f64 / d.as_secs_f64().max(1e-9);
    let waits = tally.waits.lock().map(|w| w.clone()).unwrap_or_default();
    let events = relay.events(poison)?;
    if out.is_json() {
        let per_priority: Vec<serde_json::Value> = waits
            .iter()
            .enumerate()
            .map(|(p, w)| serde_json::json!({"priority": p, "jobs": w.len(), "p50_ms": pct(w, 50), "p95_ms": pct(w, 95)}))
            .collect();
        out.line(&serde_json::json!({
            "database": path.display().to_string(),
            "jobs": total, "workers": args.workers,
            "submit_jobs_per_sec": rate(total, submit_time),
            "run_jobs_per_sec": rate(total, run_time),
            "succeeded": tally.succeeded.load(Relaxed), "retries": tally.retries.load(Relaxed), "dead": tally.dead.load(Relaxed),
            "commits": m.commits, "operations": m.operations, "largest_batch": m.largest_batch,
            "waits": per_priority,
            "dead_job": {"id": poison, "events": events.iter().map(relay::wire::event).collect::<Vec<_>>()},
            "schedule": {"name": "demo-every-second", "every_ms": 1000, "ticks": ticks},
            "pipeline": rounds.iter().map(|r| r.iter().map(|(id, kind)| serde_json::json!({"id": id, "kind": kind})).collect::<Vec<_>>()).collect::<Vec<_>>(),
        }).to_string());
        return Ok(());
    }
    out.line(&format!(
        "submitted {} jobs and one that always fails ({total} in all) from {} threads in {:.2} s: {:.0} jobs/s",
        args.jobs,
        args.workers,
        submit_time.as_secs_f64(),
        rate(total, submit_time)
    ));
    out.line(&format!(
        "ran them with {} workers in {:.2} s: {:.0} jobs/s (each lease and each ack durably committed)",
        args.workers,
        run_time.as_secs_f64(),
        rate(total, run_time)
    ));
    out.line(&format!(
        "  succeeded {}, retried {} times, dead {}",
        tally.succeeded.load(Relaxed),
        tally.retries.load(Relaxed),
        tally.dead.load(Relaxed)
    ));
    out.line(&format!(
        "  {} commits carried {} operations ({:.1} per fsync, at most {}): group commit at work\n",
        m.commits,
        m.operations,
        m.operations as f64 / m.commits.max(1) as f64,
        m.largest_batch
    ));
    out.line("wait from submit to first lease, by priority (aging: +1 class per 2 s waited):");
    out.line("  priority   jobs     p50       p95");
    for (p, w) in waits.iter().enumerate().rev() {
        out.line(&format!(
            "  {p:>8} {:>6} {:>7} ms {:>7} ms",
            w.len(),
            pct(w, 50),
            pct(w, 95)
        ));
    }
    out.line(&format!("\nevent log of job {poison}, which always fails:"));
    for e in &events {
        out.line(&format!(
            "  {:>2}  {}  {:<10} {}",
            e.seq,
            relay::wire::time(e.at),
            e.kind,
            e.data
        ));
    }
    out.line(&format!(
        "\nschedule demo-every-second (every 1s) enqueued {} jobs in {:.1} s, one per tick:",
        ticks.len(),
        TICKING.as_secs_f64()
    ));
    for t in ticks {
        out.line(&format!("  {t}"));
    }
    out.line("\na pipeline (merge waits for the three fetches, publish for the merge), leased round by round:");
    for (i, r) in rounds.iter().enumerate() {
        out.line(&format!("  round {}: {}", i + 1, round_text(r)));
    }
    // Only for a file that stays: a temporary one is removed next.
    if kept {
        out.line(&format!(
            "\nlook around: relay --db {} stats | jobs --state DEAD | show {poison} | schedule list",
            path.display()
        ));
    }
    Ok(())
}

fn pct(v: &[u64], p: usize) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    s[(s.len() * p / 100).min(s.len() - 1)]
}
