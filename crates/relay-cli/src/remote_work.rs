//! `relay --server URL work --exec CMD`: the `--exec` runner against a
//! server, over its HTTP API. The same command contract as on a file
//! (payload on stdin, `RELAY_*` variables, events on fd 3, timeouts, exit
//! status), the same output; leases by long-poll.
//!
//! - `--concurrency` threads each lease one job at a time (a long-poll that
//!   a submit on the server answers at once) and run its command.
//! - While a command runs, a heartbeat extends its lease every third of the
//!   lease's length; a lease found lost stops the command.
//! - A server that does not answer is retried with back-off (up to 30 s),
//!   said once per outage on stderr; the runner carries on when it is back.
//!   An outcome that cannot be reported is retried for a lease's length,
//!   then left to the lease's expiry (the job runs again).
//! - SIGTERM or SIGINT stops leasing; running commands get `--grace`, then
//!   are stopped and their jobs released, so another worker takes them at
//!   once.

use crate::args::WorkArgs;
use crate::commands::CliError;
use crate::exec::{self, ExecConfig, Running};
use crate::output::Out;
use crate::target::Remote;
use relay::worker::{Finished, JobResult, Outcome};
use relay::{Clock, JobId, LeaseToken, LeasedJob, Priority, SystemClock};
use relay_client::wire;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long one lease call waits on the server for a job.
const POLL: Duration = Duration::from_secs(2);
/// Longest pause between attempts to reach a server that does not answer.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A job this runner holds: what the command is told, and whether its
/// lease is gone.
#[derive(Clone)]
struct RemoteJob {
    job: LeasedJob,
    lost: Arc<AtomicBool>,
    remote: Arc<Remote>,
}

impl Running for RemoteJob {
    fn job(&self) -> &LeasedJob {
        &self.job
    }

    fn is_lost(&self) -> bool {
        self.lost.load(Relaxed)
    }

    fn event(&self, kind: &str, data: &Value) -> Result<(), String> {
        let event = wire::AppendEvent {
            kind: kind.to_owned(),
            data: data.clone(),
        };
        self.remote
            .client
            .append_event(self.job.id.0, &event)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// What the runner shares between its threads.
struct Shared {
    remote: Arc<Remote>,
    args: WorkArgs,
    cfg: ExecConfig,
    json: bool,
    stop: AtomicBool,
    /// Jobs running now: their token and lost flag (the drain releases them).
    running: Mutex<HashMap<JobId, (LeaseToken, Arc<AtomicBool>)>>,
    idle: Condvar,
    outage: AtomicBool,
    succeeded: AtomicU64,
    failed: AtomicU64,
    dead: AtomicU64,
    released: AtomicU64,
}

pub fn run(remote: Remote, a: WorkArgs, out: &Out) -> Result<(), CliError> {
    let cfg = ExecConfig {
        command: a.exec.clone(),
        timeout: a.timeout,
        max_result: a.max_result,
    };
    let shared = Arc::new(Shared {
        remote: Arc::new(remote),
        args: a,
        cfg,
        json: out.is_json(),
        stop: AtomicBool::new(false),
        running: Mutex::new(HashMap::new()),
        idle: Condvar::new(),
        outage: AtomicBool::new(false),
        succeeded: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        dead: AtomicU64::new(0),
        released: AtomicU64::new(0),
    });
    watch_signals(Arc::clone(&shared))?;
    let threads: Vec<_> = (0..shared.args.concurrency.max(1))
        .map(|_| {
            let s = Arc::clone(&shared);
            std::thread::spawn(move || lease_loop(&s))
        })
        .collect();
    // Wait for a stop (a signal, or a fatal answer from a lease loop).
    let mut fatal = None;
    for t in threads {
        if let Ok(Err(e)) = t.join() {
            fatal.get_or_insert(e);
        }
    }
    if !shared.json {
        eprintln!(
            "relay work: stopped: {} succeeded, {} failed, {} dead, {} released",
            shared.succeeded.load(Relaxed),
            shared.failed.load(Relaxed),
            shared.dead.load(Relaxed),
            shared.released.load(Relaxed)
        );
    }
    fatal.map_or(Ok(()), Err)
}

/// SIGTERM or SIGINT: stop leasing, give running commands `--grace`, then
/// stop them and release their jobs.
fn watch_signals(shared: Arc<Shared>) -> Result<(), CliError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|e| CliError::Io(format!("cannot start the signal watcher: {e}")))?;
    // The handlers are in place before this returns, so before the first
    // lease: a SIGTERM that comes as soon as a job is leased releases it,
    // where the signal's default action would end the runner with its job
    // held.
    let watched = {
        use tokio::signal::unix::{signal, SignalKind};
        let _rt = rt.enter();
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    };
    std::thread::spawn(move || {
        rt.block_on(async {
            let (Ok(mut term), Ok(mut int)) = watched else {
                eprintln!("relay work: cannot watch SIGTERM/SIGINT; stop it with SIGKILL (its leases then expire)");
                return;
            };
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        });
        shared.stop.store(true, Relaxed);
        drain(&shared);
    });
    Ok(())
}

/// Waits up to `--grace` for running commands, then stops the rest and
/// releases their jobs.
fn drain(shared: &Shared) {
    let deadline = Instant::now() + shared.args.grace;
    let mut running = shared.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    while !running.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        running = shared
            .idle
            .wait_timeout(running, left)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
    let held: Vec<(JobId, (LeaseToken, Arc<AtomicBool>))> = running.drain().collect();
    drop(running);
    for (id, (token, lost)) in held {
        lost.store(true, Relaxed); // stops the command
        release(shared, id, token);
    }
}

/// Gives a job back untried (else its lease expires and it runs later).
fn release(shared: &Shared, id: JobId, token: LeaseToken) {
    let release = wire::Release {
        token: token.0,
        in_ms: None,
    };
    if shared.remote.client.release(id.0, &release).is_ok() {
        shared.released.fetch_add(1, Relaxed);
    }
}

/// One thread: lease a job, run it, report it, until stopped. A fatal
/// answer (a refused token, a bad queue name) ends the runner.
fn lease_loop(shared: &Shared) -> Result<(), CliError> {
    let a = &shared.args;
    let worker = a
        .worker
        .clone()
        .unwrap_or_else(|| format!("pid-{}", std::process::id()));
    let req = wire::Lease {
        queues: a.queue.clone(),
        worker: Some(worker),
        max: Some(1),
        lease_for_ms: Some(millis(a.lease_for)),
        wait_ms: Some(millis(POLL)),
    };
    let mut backoff = Duration::from_millis(250);
    while !shared.stop.load(Relaxed) {
        let answer = shared.remote.client.lease(&req).map_err(|e| shared.remote.error(e));
        let jobs = match answer {
            Ok(jobs) => {
                if shared.outage.swap(false, Relaxed) {
                    eprintln!("relay work: the server answers again");
                }
                backoff = Duration::from_millis(250);
                jobs
            }
            Err(e) if transient(&e) => {
                if !shared.outage.swap(true, Relaxed) {
                    eprintln!("relay work: {e}; retrying with back-off until it answers");
                }
                sleep_unless_stopped(shared, backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
            Err(e) => {
                shared.stop.store(true, Relaxed);
                return Err(e);
            }
        };
        for j in jobs {
            match leased(&j) {
                Some(job) => run_one(shared, job),
                None => eprintln!("relay work: the server sent a job this runner cannot read: {j:?}"),
            }
        }
    }
    Ok(())
}

/// A server that does not answer, or answers that it cannot right now.
fn transient(e: &CliError) -> bool {
    match e {
        CliError::Io(_) => true,
        CliError::Remote { status, .. } => *status >= 500 || *status == 429,
        _ => false,
    }
}

fn sleep_unless_stopped(shared: &Shared, d: Duration) {
    let end = Instant::now() + d;
    while !shared.stop.load(Relaxed) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50).min(end.saturating_duration_since(Instant::now())));
    }
}

/// A job of the lease answer (its payload's bytes: a JSON value's compact
/// text, or the base64 bytes).
fn leased(j: &wire::LeasedJob) -> Option<LeasedJob> {
    let lease_for = Duration::from_millis(j.lease_for_ms);
    Some(LeasedJob {
        id: JobId(j.id),
        token: LeaseToken(j.token),
        queue: j.queue.clone(),
        kind: j.kind.clone(),
        payload: j.payload().ok()?.to_vec(),
        priority: Priority::new(j.priority)?,
        attempt: j.attempt,
        max_attempts: j.max_attempts,
        expires_at: SystemClock.now().plus(lease_for),
        created_at: SystemClock.now(),
        lease_for,
        timeout: j.timeout_ms.map(Duration::from_millis),
        traceparent: j.traceparent.clone(),
    })
}

fn run_one(shared: &Shared, job: LeasedJob) {
    let lost = Arc::new(AtomicBool::new(false));
    let (id, token, kind, attempt) = (job.id, job.token, job.kind.clone(), job.attempt);
    {
        let mut running = shared.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Leased as the runner began to stop (the drain may be over): given
        // back at once instead of run.
        if shared.stop.load(Relaxed) {
            drop(running);
            release(shared, id, token);
            return;
        }
        running.insert(id, (token, Arc::clone(&lost)));
    }
    let ctx = RemoteJob {
        job,
        lost: Arc::clone(&lost),
        remote: Arc::clone(&shared.remote),
    };
    let started = Instant::now();
    // Dropping `done` ends the heartbeat at once.
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let beat = {
        let ctx = ctx.clone();
        std::thread::spawn(move || heartbeat(&ctx, &ended))
    };
    let result = exec::run(&ctx, &shared.cfg);
    drop(done);
    let _ = beat.join();
    // Still ours unless the drain released it.
    let ours = shared
        .running
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&id)
        .is_some();
    shared.idle.notify_all();
    let outcome = if !ours {
        Outcome::Released
    } else if lost.load(Relaxed) {
        Outcome::Lost
    } else {
        report(shared, &ctx, result)
    };
    let f = Finished {
        id,
        kind,
        attempt,
        outcome,
        took: started.elapsed(),
    };
    if shared.json {
        println!("{}", crate::work::finished_json(&f));
    } else {
        eprintln!("relay work: {}", crate::work::finished_text(&f));
    }
}

/// Extends the lease every third of its length until the command ends; a
/// lease found gone marks the job lost (its command is stopped).
fn heartbeat(ctx: &RemoteJob, ended: &std::sync::mpsc::Receiver<()>) {
    let every = ctx.job.lease_for / 3;
    let extend = wire::Extend {
        token: ctx.job.token.0,
        lease_for_ms: Some(millis(ctx.job.lease_for)),
    };
    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = ended.recv_timeout(every) {
        match ctx.remote.client.extend(ctx.job.id.0, &extend) {
            Err(e) if matches!(e.code(), Some("lease_lost" | "invalid_state")) => {
                ctx.lost.store(true, Relaxed);
                return;
            }
            _ => {} // extended, or the server is away: try at the next beat
        }
    }
}

/// Reports the command's outcome; retries a server that does not answer
/// for up to a lease's length.
fn report(shared: &Shared, ctx: &RemoteJob, result: JobResult) -> Outcome {
    let job = &ctx.job;
    let (call, outcome) = match result {
        Ok(r) => (
            Report::Ack(wire::Ack::new(job.token.0, r.as_deref())),
            Outcome::Succeeded,
        ),
        Err(e) => match e.snooze {
            Some(d) => (
                Report::Release(wire::Release {
                    token: job.token.0,
                    in_ms: Some(millis(d)),
                }),
                Outcome::Snoozed { delay: d },
            ),
            None => {
                let nack = wire::Nack {
                    token: job.token.0,
                    error: e.message.clone(),
                    retry_in_ms: e.retry_in.map(millis),
                    permanent: e.permanent,
                };
                let dead = e.permanent || job.attempt >= job.max_attempts;
                let outcome = if dead {
                    Outcome::Dead { error: e.message }
                } else {
                    Outcome::Failed { error: e.message }
                };
                (Report::Nack(nack), outcome)
            }
        },
    };
    let give_up = Instant::now() + job.lease_for;
    let mut backoff = Duration::from_millis(250);
    loop {
        let sent = match &call {
            Report::Ack(a) => shared.remote.client.ack(job.id.0, a),
            Report::Nack(n) => shared.remote.client.nack(job.id.0, n),
            Report::Release(r) => shared.remote.client.release(job.id.0, r),
        };
        match sent.map_err(|e| shared.remote.error(e)) {
            Ok(_) => {
                let counter = match &outcome {
                    Outcome::Succeeded => &shared.succeeded,
                    Outcome::Dead { .. } => &shared.dead,
                    Outcome::Failed { .. } => &shared.failed,
                    _ => return outcome,
                };
                counter.fetch_add(1, Relaxed);
                return outcome;
            }
            Err(CliError::Remote { code, .. }) if code == "lease_lost" || code == "invalid_state" => {
                return Outcome::Lost;
            }
            Err(e) if transient(&e) && Instant::now() < give_up => {
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
            Err(e) => {
                eprintln!(
                    "relay work: job {}: its outcome could not be reported ({e}); it runs again when its lease expires",
                    job.id
                );
                return Outcome::Lost;
            }
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// An outcome on its way to the server.
enum Report {
    Ack(wire::Ack),
    Nack(wire::Nack),
    Release(wire::Release),
}
