//! One benchmark run on one new database.

use crate::args::Args;
use crate::floor;
use crate::report::{self, Report};
use crate::stats::{peak_rss_bytes, Phase};
use relay::{JobState, LeaseRequest, NewJob, Relay};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Barrier;
use std::time::{Duration, Instant};

const QUEUE: &str = "bench";

/// One lease at a time; under a queue limit it waits a little (up to the
/// rate window's end, or the poll interval) instead of returning at once.
fn lease_request(args: &Args, worker: String) -> LeaseRequest {
    let req = LeaseRequest::new([QUEUE]).worker(worker).lease_for(args.lease_for);
    if args.limited() {
        req.wait(Duration::from_millis(250))
    } else {
        req
    }
}

pub fn single(args: &Args) -> Result<(), String> {
    let path = match &args.database {
        Some(p) => p.clone(),
        None => return Err("--database PATH is required: a new file for this run (e.g. /tmp/bench-1.db)".into()),
    };
    let r = run(args, &path)?;
    if args.json {
        println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    } else {
        println!("{}", report::header());
        println!("{}", report::row(&r));
        report::floor_line(r.floor.as_ref());
        if let Some(b) = &r.baseline {
            report::baseline_line(&r, b);
        }
        if let Some(g) = &r.group_commit {
            report::group_commit_line(&r, g);
        }
        report::processes_lines(&r.by_processes);
        if let Some(w) = &r.workflow {
            report::workflow_line(w);
        }
    }
    Ok(())
}

/// Refuses a path that already holds anything: every run starts empty.
pub fn check_new(path: &Path) -> Result<(), String> {
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    for p in [path, wal.as_path()] {
        if std::fs::metadata(p).is_ok_and(|m| m.len() > 0) {
            return Err(format!(
                "{} already holds data: relay-bench needs a new database for every run; pass a new --database path",
                p.display()
            ));
        }
    }
    Ok(())
}

/// Refuses a PostgreSQL database that already holds jobs.
fn check_empty(relay: &Relay, target: &str) -> Result<(), String> {
    let stats = relay.stats().map_err(|e| format!("reading {target}: {e}"))?;
    let jobs: u64 = stats.queues.values().flat_map(|q| q.counts.values()).sum();
    if jobs > 0 {
        return Err(format!(
            "the database already holds {jobs} jobs: relay-bench needs a new database for every run; create one (CREATE DATABASE ...) and pass its URL"
        ));
    }
    Ok(())
}

pub fn run(args: &Args, path: &Path) -> Result<Report, String> {
    args.check()?;
    let target = path.to_string_lossy().into_owned();
    let postgres = relay::StoreUrl::parse(&target).is_postgres();
    if !postgres {
        check_new(path)?;
    }
    if args.baseline && !postgres {
        return Err("--baseline runs the textbook PostgreSQL queue: it needs a postgres:// --database (SQLite's baseline is the fsync floor, measured anyway)".into());
    }
    // The floor is measured next to the database; for a server, in the temporary directory here.
    let temp = std::env::temp_dir();
    let dir = if postgres {
        temp.as_path()
    } else {
        path.parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    };
    let floor = if args.no_floor {
        None
    } else {
        progress(args, "measuring the disk's write+fsync floor");
        Some(floor::measure(dir).map_err(|e| format!("cannot measure the fsync floor in {}: {e}", dir.display()))?)
    };
    let relay = Relay::connect(&target, args.options()).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    if postgres {
        check_empty(&relay, &target)?;
    }
    if args.depth > 0 {
        preload(&relay, args)?;
    }
    if args.sleepers > 0 {
        park(&relay, args, args.sleepers, false)?;
    }
    if args.waiters > 0 {
        park(&relay, args, args.waiters, true)?;
    }
    if args.limited() {
        let limits = relay::QueueLimits {
            max_leased_per_group: args.max_leased_per_group,
            max_leased: args.max_leased,
            rate: args.rate,
            poison_after: None,
        };
        relay
            .set_queue_limits(QUEUE, limits)
            .map_err(|e| format!("cannot limit the bench queue: {e}"))?;
    }
    progress(
        args,
        &format!("submitting {} jobs from {} threads", args.jobs, args.threads()),
    );
    let before = relay.metrics();
    let submit = submit_phase(&relay, args)?;
    let fan_in = if args.fan_in {
        progress(args, &format!("submitting a job that waits for all {} jobs", args.jobs));
        Some(fan_in(&relay)?)
    } else {
        None
    };
    let after_submit = relay.metrics();
    progress(args, &writer_line("submit", &before, &after_submit));
    progress(
        args,
        &format!("leasing and acking {} jobs from {} threads", args.jobs, args.threads()),
    );
    let (lease_ack, leased) = lease_ack_with(&relay, args, &target, args.first_processes(), &after_submit)?;
    verify(&relay, args, leased, 1)?;
    if let Some(id) = fan_in {
        let j = relay.get(id).map_err(|e| format!("reading the fan-in job: {e}"))?;
        if j.state() != JobState::Ready || j.status.waiting_on != 0 {
            return Err(format!(
                "verification failed: the fan-in job is {} waiting for {}, not READY",
                j.state(),
                j.status.waiting_on
            ));
        }
    }
    // `--processes 1,2,4`: the same phases again for each further count,
    // on the same database (verified cumulatively).
    let mut by_processes = vec![(args.first_processes(), lease_ack)];
    for (round, &p) in args.processes.iter().enumerate().skip(1) {
        progress(
            args,
            &format!("again: {} jobs, lease+ack from {p} processes", args.jobs),
        );
        submit_phase(&relay, args)?;
        let before = relay.metrics();
        let (phase, leased) = lease_ack_with(&relay, args, &target, p, &before)?;
        verify(&relay, args, leased, round as u64 + 1)?;
        by_processes.push((p, phase));
    }
    let workflow = if args.workflow_steps > 0 {
        Some(workflow(&relay, args, by_processes[0].1.jobs_per_sec)?)
    } else {
        None
    };
    let baseline = if args.baseline {
        progress(
            args,
            &format!("baseline: the textbook queue on {} connections", args.threads()),
        );
        Some(crate::textbook::run(args, &target)?)
    } else {
        None
    };
    let group_commit = if args.baseline {
        progress(
            args,
            &format!(
                "baseline: a pipelined group-commit writer on one connection, {} callers",
                args.threads()
            ),
        );
        Some(crate::group_commit::run(args, &target)?)
    } else {
        None
    };
    Ok(Report {
        workers: args.workers,
        concurrency: args.concurrency,
        threads: args.threads(),
        jobs: args.jobs,
        verified: true,
        submit,
        lease_ack,
        peak_rss_bytes: peak_rss_bytes(),
        floor,
        depth: args.depth,
        payload_bytes: args.payload_bytes,
        baseline,
        group_commit,
        by_processes: if args.processes.len() > 1 {
            by_processes
        } else {
            Vec::new()
        },
        workflow,
    })
}

/// The lease+ack phase from `processes` processes (1: this one).
fn lease_ack_with(
    relay: &Relay,
    args: &Args,
    target: &str,
    processes: u32,
    before: &relay::Metrics,
) -> Result<(Phase, u64), String> {
    if processes > 1 {
        return lease_ack_processes(args, target, processes);
    }
    let r = lease_ack_phase(relay, args)?;
    progress(args, &writer_line("lease+ack", before, &relay.metrics()));
    Ok(r)
}

/// How the writer batched a phase: commits, operations per commit, fsyncs.
fn writer_line(phase: &str, a: &relay::Metrics, b: &relay::Metrics) -> String {
    let commits = b.commits - a.commits;
    let ops = b.operations - a.operations;
    let syncs = b.syncs - a.syncs;
    let per = if commits == 0 { 0.0 } else { ops as f64 / commits as f64 };
    let sync_note = if syncs == 0 {
        "each commit synced itself".to_owned()
    } else {
        format!(
            "{syncs} separate fsyncs ({:.1} commits each)",
            commits as f64 / syncs as f64
        )
    };
    format!("{phase}: {commits} commits, {per:.1} operations each; {sync_note}")
}

fn progress(args: &Args, what: &str) {
    if !args.json || std::io::stderr().is_terminal() {
        eprintln!("relay-bench: {what}");
    }
}

fn payload(args: &Args) -> Vec<u8> {
    vec![b'x'; args.payload_bytes]
}

fn priority(args: &Args, i: u64) -> u8 {
    if args.priorities {
        (i % 4) as u8
    } else {
        1
    }
}

/// Jobs scheduled a day ahead (SCHEDULED): in the same index ranges the
/// claim probes, never due during the run.
fn preload(relay: &Relay, args: &Args) -> Result<(), String> {
    let start = Instant::now();
    let mut done = 0;
    while done < args.depth {
        let n = (args.depth - done).min(10_000);
        let jobs = (0..n)
            .map(|i| {
                NewJob::new(QUEUE, "depth", payload(args))
                    .priority(priority(args, done + i))
                    .delay(Duration::from_secs(86_400))
            })
            .collect();
        relay.submit_batch(jobs).map_err(|e| format!("preloading: {e}"))?;
        done += n;
        if done % 200_000 == 0 || done == args.depth {
            progress(
                args,
                &format!(
                    "preloaded {done}/{} ready jobs ({:.0} s)",
                    args.depth,
                    start.elapsed().as_secs_f64()
                ),
            );
        }
    }
    Ok(())
}

/// Runs `per_thread` on every thread at once; returns their samples and the
/// wall time from the common start to the last finish.
fn on_threads<F>(args: &Args, per_thread: F) -> Result<(Vec<Duration>, Duration), String>
where
    F: Fn(u32) -> Result<Vec<Duration>, String> + Sync,
{
    let threads = args.threads();
    let barrier = Barrier::new(threads as usize + 1);
    let (samples, wall) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, f) = (&barrier, &per_thread);
                s.spawn(move || {
                    barrier.wait();
                    f(t)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
            .collect();
        (results, start.elapsed())
    });
    let mut all = Vec::new();
    for r in samples {
        all.extend(r?);
    }
    Ok((all, wall))
}

/// `--fan-in`: one job that waits for every READY job of the bench queue.
fn fan_in(relay: &Relay) -> Result<relay::JobId, String> {
    let mut ids = Vec::new();
    let mut before = None;
    loop {
        let filter = relay::JobFilter {
            queue: Some(QUEUE.into()),
            state: Some(JobState::Ready),
            before,
            limit: 1000,
            ..relay::JobFilter::default()
        };
        let page = relay
            .list(&filter)
            .map_err(|e| format!("listing the run's jobs: {e}"))?;
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        ids.extend(page.iter().map(|j| j.id));
    }
    let job = NewJob::new("bench-fan-in", "bench", Vec::new()).depends_on(ids);
    relay.submit(job).map_err(|e| format!("submitting the fan-in job: {e}"))
}

fn submit_phase(relay: &Relay, args: &Args) -> Result<Phase, String> {
    let threads = u64::from(args.threads());
    let (samples, wall) = on_threads(args, |t| {
        let mut samples = Vec::new();
        let mut i = u64::from(t);
        while i < args.jobs {
            let mut job = NewJob::new(QUEUE, "bench", payload(args)).priority(priority(args, i));
            if let Some(n) = args.groups {
                job = job.group(format!("g{}", i % u64::from(n)));
            }
            let start = Instant::now();
            relay.submit(job).map_err(|e| format!("submit: {e}"))?;
            samples.push(start.elapsed());
            i += threads;
        }
        Ok(samples)
    })?;
    Ok(Phase::from_samples(samples, args.jobs, wall))
}

fn lease_ack_phase(relay: &Relay, args: &Args) -> Result<(Phase, u64), String> {
    let claimed = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let (samples, wall) = on_threads(args, |t| {
        let worker = format!("bench-w{}", t / args.concurrency);
        let req = lease_request(args, worker);
        let mut samples = Vec::new();
        while claimed.load(Relaxed) < args.jobs && !failed.load(Relaxed) {
            let start = Instant::now();
            let leased = relay.lease(req.clone()).map_err(|e| format!("lease: {e}"));
            let Some(job) = leased.inspect_err(|_| failed.store(true, Relaxed))?.pop() else {
                if args.limited() {
                    continue; // the limit held it back: look again until all are claimed
                }
                break;
            };
            let n = claimed.fetch_add(1, Relaxed) + 1;
            if args.fault_skip_ack_every > 0 && n.is_multiple_of(args.fault_skip_ack_every) {
                continue;
            }
            relay.ack(job.id, job.token, None).map_err(|e| format!("ack: {e}"))?;
            samples.push(start.elapsed());
        }
        Ok(samples)
    })?;
    let leased = claimed.load(Relaxed);
    Ok((Phase::from_samples(samples, args.jobs, wall), leased))
}

/// `--sleepers N` (`events` false): N jobs of queue `bench-sleep`, leased
/// 1,000 at a time and put to sleep for a day, each in one batch of
/// sleeps. `--waiters N` (`events` true): N jobs of queue `bench-wait`
/// waiting a day for events, each its own key.
fn park(relay: &Relay, args: &Args, count: u64, events: bool) -> Result<(), String> {
    let (queue, what) = if events {
        ("bench-wait", "waiting a day for an event each")
    } else {
        ("bench-sleep", "asleep for a day")
    };
    progress(args, &format!("parking {count} jobs {what} (queue {queue})"));
    let day = Duration::from_secs(86_400);
    let mut left = count;
    while left > 0 {
        let n = left.min(1000);
        let jobs = (0..n).map(|_| NewJob::new(queue, "parked", Vec::new())).collect();
        relay
            .submit_batch(jobs)
            .map_err(|e| format!("submitting jobs to park: {e}"))?;
        let leased = relay
            .lease(LeaseRequest::new([queue]).max(n as u32).worker("bench-parker"))
            .map_err(|e| format!("leasing jobs to park: {e}"))?;
        let until = relay::Clock::now(&relay::SystemClock).plus(day);
        let parks = leased
            .iter()
            .map(|l| match events {
                true => relay::Completion::wait(l.id, l.token, "event", format!("bench-event:{}", l.id.0), until),
                false => relay::Completion::sleep(l.id, l.token, "nap", until),
            })
            .collect();
        for r in relay.complete_batch(parks).map_err(|e| format!("parking jobs: {e}"))? {
            r.map_err(|e| format!("a parked job: {e}"))?;
        }
        left -= leased.len() as u64;
        if leased.is_empty() {
            return Err("no job to park could be leased".into());
        }
    }
    let waiting = relay
        .stats()
        .map_err(|e| format!("reading stats: {e}"))?
        .queues
        .get(queue)
        .and_then(|q| q.counts.get(&JobState::Waiting).copied())
        .unwrap_or(0);
    if waiting != count {
        return Err(format!("{waiting} of {count} parked jobs are WAITING"));
    }
    Ok(())
}

const FLOW: &str = "bench-flow";

/// `--workflow-steps N`: `--jobs` jobs of queue `bench-flow`, each leased,
/// given N no-op steps and acked by the run's threads; verified.
fn workflow(relay: &Relay, args: &Args, lease_ack_per_sec: f64) -> Result<crate::report::Workflow, String> {
    let steps = args.workflow_steps;
    progress(args, &format!("workflow: submitting {} jobs", args.jobs));
    let ids: Vec<relay::JobId> = (0..args.jobs)
        .collect::<Vec<_>>()
        .chunks(1000)
        .map(|c| relay.submit_batch(c.iter().map(|_| NewJob::new(FLOW, "flow", payload(args))).collect()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("workflow submit: {e}"))?
        .into_iter()
        .flatten()
        .collect();
    progress(
        args,
        &format!(
            "workflow: {} jobs of {steps} steps each from {} threads",
            args.jobs,
            args.threads()
        ),
    );
    let claimed = AtomicU64::new(0);
    let names: Vec<String> = (0..steps).map(|i| format!("step-{i}")).collect();
    let (samples, wall) = on_threads(args, |t| {
        let req = LeaseRequest::new([FLOW])
            .worker(format!("bench-w{}", t / args.concurrency))
            .lease_for(args.lease_for);
        let mut samples = Vec::new();
        while claimed.load(Relaxed) < args.jobs {
            let start = Instant::now();
            let Some(job) = relay.lease(req.clone()).map_err(|e| format!("lease: {e}"))?.pop() else {
                break;
            };
            claimed.fetch_add(1, Relaxed);
            for name in &names {
                relay
                    .record_step(job.id, job.token, name, b"null".to_vec())
                    .map_err(|e| format!("record_step: {e}"))?;
            }
            relay.ack(job.id, job.token, None).map_err(|e| format!("ack: {e}"))?;
            samples.push(start.elapsed());
        }
        Ok(samples)
    })?;
    let jobs = Phase::from_samples(samples, args.jobs, wall);
    // Every job finished with its steps (a sample of them read back whole).
    let stats = relay.stats().map_err(|e| format!("reading stats to verify: {e}"))?;
    let done = stats
        .queues
        .get(FLOW)
        .and_then(|q| q.counts.get(&JobState::Succeeded).copied())
        .unwrap_or(0);
    if done != args.jobs {
        return Err(format!(
            "workflow verification failed: {done} of {} jobs SUCCEEDED",
            args.jobs
        ));
    }
    for id in ids.iter().step_by((ids.len() / 50).max(1)) {
        let job = relay.get(*id).map_err(|e| format!("reading job {id}: {e}"))?;
        if job.steps.len() != steps as usize {
            return Err(format!(
                "workflow verification failed: job {id} holds {} steps",
                job.steps.len()
            ));
        }
    }
    let steps_per_sec = f64::from(steps) * args.jobs as f64 / wall.as_secs_f64().max(1e-9);
    Ok(crate::report::Workflow {
        count: args.jobs,
        steps,
        jobs,
        steps_per_sec,
        ratio: steps_per_sec / lease_ack_per_sec.max(1e-9),
    })
}

/// Every submitted job (`rounds` x `--jobs` so far) must be SUCCEEDED, and
/// nothing else may have moved.
fn verify(relay: &Relay, args: &Args, leased: u64, rounds: u64) -> Result<(), String> {
    let stats = relay.stats().map_err(|e| format!("reading stats to verify: {e}"))?;
    let q = stats.queues.get(QUEUE).cloned().unwrap_or_default();
    let n = |s: JobState| q.counts.get(&s).copied().unwrap_or(0);
    let ok = n(JobState::Succeeded) == args.jobs * rounds
        && n(JobState::Ready) == 0
        && n(JobState::Scheduled) == args.depth
        && n(JobState::Leased) == 0
        && n(JobState::Dead) == 0
        && leased == args.jobs;
    if ok {
        return Ok(());
    }
    Err(format!(
        "verification failed: {} of {} jobs SUCCEEDED (READY {}, SCHEDULED {} of the {} preloaded, LEASED {}, DEAD {}; {} leased); a run that does not verify reports no throughput",
        n(JobState::Succeeded),
        args.jobs * rounds,
        n(JobState::Ready),
        n(JobState::Scheduled),
        args.depth,
        n(JobState::Leased),
        n(JobState::Dead),
        leased
    ))
}

/// `--processes N`: the lease+ack phase in N child processes at once; the
/// throughput is all jobs over the wall time from the first start to the
/// last exit, the latencies are every child's samples together.
fn lease_ack_processes(args: &Args, target: &str, processes: u32) -> Result<(Phase, u64), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find relay-bench itself: {e}"))?;
    let start = Instant::now();
    let children = (0..processes)
        .map(|_| {
            std::process::Command::new(&exe)
                .args(["--lease-ack-child", "--database", target, "--no-floor"])
                .args([
                    "--workers",
                    &args.workers.to_string(),
                    "--concurrency",
                    &args.concurrency.to_string(),
                ])
                .args(["--jobs", &args.jobs.to_string()])
                .args(args.no_split_commit.then_some("--no-split-commit"))
                .stdout(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start a lease+ack process: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut samples = Vec::new();
    let mut leased = 0u64;
    for c in children {
        let out = c.wait_with_output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("a lease+ack process failed: {:?}", out.status));
        }
        let v: serde_json::Value =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("unreadable child report: {e}"))?;
        leased += v["leased"].as_u64().unwrap_or(0);
        samples.extend(
            v["samples_us"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_u64)
                .map(Duration::from_micros),
        );
    }
    let wall = start.elapsed();
    Ok((Phase::from_samples(samples, args.jobs, wall), leased))
}

/// The child side of `--processes`: lease and ack until nothing is left.
pub fn lease_ack_child(args: &Args) -> Result<(), String> {
    let target = args
        .database
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned())
        .ok_or("--database is required")?;
    let relay = Relay::connect(&target, args.options()).map_err(|e| e.to_string())?;
    let leased = AtomicU64::new(0);
    let (samples, _) = on_threads(args, |t| {
        let req = lease_request(args, format!("bench-p{}-t{t}", std::process::id()));
        let mut samples = Vec::new();
        loop {
            let start = Instant::now();
            let Some(job) = relay.lease(req.clone()).map_err(|e| format!("lease: {e}"))?.pop() else {
                let ready = relay
                    .stats()
                    .map_err(|e| format!("stats: {e}"))?
                    .queues
                    .get(QUEUE)
                    .map_or(0, |q| q.counts.get(&JobState::Ready).copied().unwrap_or(0));
                if args.limited() && ready > 0 {
                    continue; // held back by the limit, not out of jobs
                }
                break;
            };
            leased.fetch_add(1, Relaxed);
            relay.ack(job.id, job.token, None).map_err(|e| format!("ack: {e}"))?;
            samples.push(start.elapsed());
        }
        Ok(samples)
    })?;
    let us: Vec<u64> = samples
        .iter()
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .collect();
    println!(
        "{}",
        serde_json::json!({"leased": leased.load(Relaxed), "samples_us": us})
    );
    Ok(())
}
