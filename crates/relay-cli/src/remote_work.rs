//! `relay --server URL work --exec CMD`: the `--exec` runner against a
//! server, over its HTTP API. The same command contract as on a file
//! (payload on stdin, `RELAY_*` variables, events on fd 3, timeouts, exit
//! status), the same output; leases by long-poll.
//!
//! - `--concurrency` threads each hold one job at a time. A thread reports
//!   its job's outcome and leases its next job in one call (`POST
//!   /v1/work`: one round trip, one commit on the server); with nothing to
//!   report it long-polls, answered at once by a submit on the server.
//! - One heartbeat thread extends every running job's lease in one call
//!   (`POST /v1/heartbeat`) every third of the shortest lease; a lease
//!   found lost stops its command.
//! - A server that does not answer is retried with back-off (up to 30 s),
//!   said once per outage on stderr; the runner carries on when it is back.
//!   An outcome that cannot be reported is retried for a lease's length,
//!   then left to the lease's expiry (the job runs again).
//! - SIGTERM or SIGINT stops leasing; running commands get `--grace`, then
//!   are stopped and their jobs released, so another worker takes them at
//!   once.

use crate::args::WorkArgs;
use crate::error::CliError;
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

    fn progress(&self, fraction: f64, message: Option<&str>) -> Result<(), String> {
        let report = wire::ReportProgress {
            token: self.job.token.0,
            fraction,
            message: message.map(str::to_owned),
        };
        self.remote
            .client
            .send::<relay_client::wire::calls::Progress>(&self.job.id.0, &relay_client::wire::Nothing {}, &report)
            .map(drop)
            .map_err(|e| e.to_string())
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

/// A running job's lease, as the heartbeat and the drain see it.
struct Held {
    token: LeaseToken,
    lease_for: Duration,
    lost: Arc<AtomicBool>,
    /// When its command started.
    since: relay::Timestamp,
}

/// What the runner shares between its threads.
struct Shared {
    remote: Arc<Remote>,
    args: WorkArgs,
    cfg: ExecConfig,
    json: bool,
    stop: AtomicBool,
    /// Jobs running now: their lease and lost flag (the heartbeat extends
    /// them, the drain releases them).
    running: Mutex<HashMap<JobId, Held>>,
    idle: Condvar,
    outage: AtomicBool,
    succeeded: AtomicU64,
    failed: AtomicU64,
    dead: AtomicU64,
    released: AtomicU64,
    /// Set once a signal's drain has released what was still running, so
    /// that the runner reports and exits only after it.
    drained: (Mutex<bool>, Condvar),
    /// A signal stopped the runner (its drain is then awaited).
    signalled: AtomicBool,
}

pub fn run(remote: Remote, a: WorkArgs, out: &Out) -> Result<(), CliError> {
    let (lo, hi) = relay::presence::BEAT_EVERY_RANGE;
    if a.beat_every < lo || a.beat_every > hi {
        return Err(CliError::Usage("--beat-every must be 100ms-10min".into()));
    }
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
        drained: (Mutex::new(false), Condvar::new()),
        signalled: AtomicBool::new(false),
    });
    let presence = Presence::new(&shared.args);
    watch_signals(Arc::clone(&shared))?;
    {
        let s = Arc::clone(&shared);
        std::thread::spawn(move || heartbeat(&s));
    }
    let beating = {
        let (s, p) = (Arc::clone(&shared), presence.clone());
        std::thread::spawn(move || p.beat_until_stopped(&s))
    };
    let threads: Vec<_> = (0..shared.args.concurrency.max(1))
        .map(|_| {
            let (s, id) = (Arc::clone(&shared), presence.id.clone());
            std::thread::spawn(move || lease_loop(&s, id))
        })
        .collect();
    // Wait for a stop (a signal, or a fatal answer from a lease loop).
    let mut fatal = None;
    for t in threads {
        if let Ok(Err(e)) = t.join() {
            fatal.get_or_insert(e);
        }
    }
    if shared.signalled.load(Relaxed) {
        let (done, told) = &shared.drained;
        let mut done = done.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while !*done {
            done = told.wait(done).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
    // The last heartbeat after any still in flight: a later "alive" would
    // undo "stopped".
    shared.stop.store(true, Relaxed);
    let _ = beating.join();
    presence.stopped(&shared);
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
        shared.signalled.store(true, Relaxed);
        shared.stop.store(true, Relaxed);
        drain(&shared);
        let (done, told) = &shared.drained;
        *done.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        told.notify_all();
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
    let held: Vec<(JobId, Held)> = running.drain().collect();
    drop(running);
    for (_, h) in &held {
        h.lost.store(true, Relaxed); // stops the command
    }
    let outcomes = held
        .iter()
        .map(|(id, h)| wire::Outcome::release(id.0, h.token.0, None))
        .collect();
    let work = wire::Work { outcomes, lease: None };
    if let Ok(done) = shared.remote.client.work(&work) {
        let given_back = done.outcomes.iter().filter(|o| o.error.is_none()).count();
        shared.released.fetch_add(given_back as u64, Relaxed);
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

/// One thread: lease a job, run it, then report its outcome and lease the
/// next in one call, until stopped. A fatal answer (a refused token, a bad
/// queue name) ends the runner. It leases under this run's worker id, so
/// only this run's record can show its leases orphaned.
fn lease_loop(shared: &Shared, id: String) -> Result<(), CliError> {
    let a = &shared.args;
    let req = wire::Lease {
        queues: a.queue.clone(),
        worker: Some(id),
        max: Some(1),
        lease_for_ms: Some(millis(a.lease_for)),
        wait_ms: Some(millis(POLL)),
    };
    let mut report: Option<Report> = None;
    let mut backoff = Duration::from_millis(250);
    loop {
        let stopping = shared.stop.load(Relaxed);
        if stopping && report.is_none() {
            return Ok(());
        }
        let work = wire::Work {
            outcomes: report.iter().map(|r| r.outcome.clone()).collect(),
            lease: (!stopping).then(|| req.clone()),
        };
        let done = match shared.remote.client.work(&work).map_err(|e| shared.remote.error(e)) {
            Ok(done) => {
                if shared.outage.swap(false, Relaxed) {
                    eprintln!("relay work: the server answers again");
                }
                backoff = Duration::from_millis(250);
                done
            }
            Err(e) if transient(&e) => {
                if !shared.outage.swap(true, Relaxed) {
                    eprintln!("relay work: {e}; retrying with back-off until it answers");
                }
                if let Some(r) = report.take_if(|r| Instant::now() >= r.give_up) {
                    r.abandoned(shared, &e);
                }
                if report.is_some() {
                    // An outcome to report, stopping or not: a pause, never a spin.
                    std::thread::sleep(backoff);
                } else {
                    sleep_unless_stopped(shared, backoff);
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
            Err(e) => {
                shared.stop.store(true, Relaxed);
                return Err(e);
            }
        };
        if let (Some(r), Some(answer)) = (report.take(), done.outcomes.first()) {
            r.answered(shared, answer);
        }
        for j in done.jobs {
            match leased(&j) {
                Some(job) => report = run_one(shared, job),
                None => {
                    eprintln!("relay work: the server sent a job this runner cannot read, given back: {j:?}");
                    release(shared, JobId(j.id), LeaseToken(j.token));
                }
            }
        }
    }
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
        group: j.group.clone(),
    })
}

/// Runs the job's command; returns its outcome to report, or `None` when
/// it is no longer this runner's (its lease lost, or released by the drain).
fn run_one(shared: &Shared, job: LeasedJob) -> Option<Report> {
    let lost = Arc::new(AtomicBool::new(false));
    let (id, token) = (job.id, job.token);
    {
        let mut running = shared.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Leased as the runner began to stop (the drain may be over): given
        // back at once instead of run.
        if shared.stop.load(Relaxed) {
            drop(running);
            release(shared, id, token);
            return None;
        }
        let held = Held {
            token,
            lease_for: job.lease_for,
            lost: Arc::clone(&lost),
            since: relay::Clock::now(&relay::SystemClock),
        };
        running.insert(id, held);
    }
    let ctx = RemoteJob {
        job,
        lost: Arc::clone(&lost),
        remote: Arc::clone(&shared.remote),
    };
    let started = Instant::now();
    let result = exec::run(&ctx, &shared.cfg);
    // Still ours unless the drain released it.
    let ours = shared
        .running
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&id)
        .is_some();
    shared.idle.notify_all();
    if !ours || lost.load(Relaxed) {
        let outcome = if ours { Outcome::Lost } else { Outcome::Released };
        print_finished(shared, &ctx.job, outcome, started.elapsed());
        return None;
    }
    Some(Report::new(&ctx.job, result, started.elapsed()))
}

fn print_finished(shared: &Shared, job: &LeasedJob, outcome: Outcome, took: Duration) {
    let f = Finished {
        id: job.id,
        kind: job.kind.clone(),
        attempt: job.attempt,
        outcome,
        took,
    };
    if shared.json {
        println!("{}", crate::work::finished_json(&f));
    } else {
        eprintln!("relay work: {}", crate::work::finished_text(&f));
    }
}

/// Extends every running job's lease in one call, every third of the
/// shortest of them; a lease found gone marks its job lost (its command
/// is stopped).
fn heartbeat(shared: &Shared) {
    let mut next = Instant::now() + shared.args.lease_for / 3;
    loop {
        std::thread::sleep(
            next.saturating_duration_since(Instant::now())
                .min(Duration::from_millis(200)),
        );
        if shared.stop.load(Relaxed) && shared.running.lock().map_or(true, |r| r.is_empty()) {
            return;
        }
        if Instant::now() < next {
            continue;
        }
        let held: Vec<(JobId, LeaseToken, Duration, Arc<AtomicBool>)> = {
            let running = shared.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            running
                .iter()
                .map(|(id, h)| (*id, h.token, h.lease_for, Arc::clone(&h.lost)))
                .collect()
        };
        let shortest = held.iter().map(|h| h.2).min().unwrap_or(shared.args.lease_for);
        next = Instant::now() + shortest / 3;
        if held.is_empty() {
            continue;
        }
        let beat = wire::Heartbeat {
            leases: held
                .iter()
                .map(|(id, token, lease_for, _)| wire::HeldLease {
                    id: id.0,
                    token: token.0,
                    lease_for_ms: Some(millis(*lease_for)),
                })
                .collect(),
            lease_for_ms: None,
        };
        // The server away: tried again at the next beat.
        let Ok(answers) = shared.remote.client.heartbeat(&beat) else {
            continue;
        };
        for (h, a) in held.iter().zip(answers) {
            if a.error.as_ref().is_some_and(|e| gone(e.code)) {
                h.3.store(true, Relaxed);
            }
        }
    }
}

/// This worker's name: `--worker`, else `pid-<pid>` (its id, which its
/// leases name, is the name with a random suffix).
fn worker_name(a: &WorkArgs) -> String {
    a.worker
        .clone()
        .unwrap_or_else(|| format!("pid-{}", std::process::id()))
}

/// This runner as its heartbeats to the server describe it
/// (`PUT /v1/workers/{worker}`).
#[derive(Clone)]
struct Presence {
    id: String,
    beat: wire::WorkerBeat,
    /// This worker's secret, sent with every heartbeat from the first (no
    /// other client can write its record, and a first heartbeat whose
    /// answer was lost is simply sent again); without randomness, the
    /// one the server answers the first heartbeat with.
    secret: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl Presence {
    fn new(a: &WorkArgs) -> Self {
        let name = worker_name(a);
        Self {
            id: relay::worker_id(&name, fastrand::u32(..)),
            beat: wire::WorkerBeat {
                name,
                host: whoami::hostname().unwrap_or_default(),
                pid: std::process::id(),
                queues: a.queue.clone(),
                concurrency: u32::try_from(a.concurrency.max(1)).unwrap_or(u32::MAX),
                version: format!("relay work {} (over HTTP)", env!("CARGO_PKG_VERSION")),
                started_at: relay::Clock::now(&relay::SystemClock).to_rfc3339(),
                beat_every_ms: millis(a.beat_every),
                running: Vec::new(),
                stopped: false,
                secret: None,
            },
            secret: std::sync::Arc::new(std::sync::Mutex::new(own_secret())),
        }
    }

    /// Sends one heartbeat with what runs now (or, `stopped`, the last).
    fn send(&self, shared: &Shared, stopped: bool) -> Result<(), relay_client::Error> {
        let mut beat = self.beat.clone();
        beat.stopped = stopped;
        beat.secret
            .clone_from(&self.secret.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        if !stopped {
            let running = shared.running.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            beat.running = running
                .iter()
                .map(|(id, h)| wire::RunningJob {
                    id: id.0,
                    token: h.token.0,
                    since: h.since.to_rfc3339(),
                })
                .collect();
            beat.running.sort_by_key(|r| r.id);
        }
        let none = wire::Nothing {};
        let seen = shared
            .remote
            .client
            .send::<wire::calls::PutWorker>(&self.id, &none, &beat)?;
        if let Some(secret) = seen.secret {
            *self.secret.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(secret);
        }
        Ok(())
    }

    /// A heartbeat every `--beat-every` until the runner stops; one that
    /// fails (the server away, or one too old for the call) is tried again
    /// at the next.
    fn beat_until_stopped(&self, shared: &Shared) {
        let every = Duration::from_millis(self.beat.beat_every_ms);
        let mut next = Instant::now();
        let mut failing = false;
        while !shared.stop.load(Relaxed) {
            if Instant::now() >= next {
                match self.send(shared, false) {
                    Ok(()) => failing = false,
                    Err(e) if !failing => {
                        failing = true;
                        eprintln!("relay work: could not send this worker's heartbeat ({e}); trying again");
                    }
                    Err(_) => {}
                }
                next = Instant::now() + every;
            }
            std::thread::sleep(
                next.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(200)),
            );
        }
    }

    /// The last heartbeat: this runner stopped.
    fn stopped(&self, shared: &Shared) {
        if let Err(e) = self.send(shared, true) {
            eprintln!("relay work: could not tell the server this worker stopped ({e}); it shows as gone after its missed heartbeats");
        }
    }
}

/// 32 random bytes in hex: this worker's secret (`None` without a source
/// of randomness: the server's answer then gives one).
fn own_secret() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// An item's error code saying the job is no longer this runner's.
fn gone(code: relay_client::wire::ErrorCode) -> bool {
    use relay_client::wire::ErrorCode;
    matches!(
        code,
        ErrorCode::LeaseLost | ErrorCode::InvalidState | ErrorCode::NotFound
    )
}

/// A finished command's outcome on its way to the server.
struct Report {
    job: LeasedJob,
    outcome: wire::Outcome,
    /// What is printed once the server took it.
    done: Outcome,
    took: Duration,
    /// Past this the lease has expired anyway: the outcome is dropped.
    give_up: Instant,
}

impl Report {
    fn new(job: &LeasedJob, result: JobResult, took: Duration) -> Self {
        let (id, token) = (job.id.0, job.token.0);
        let (outcome, done) = match result {
            Ok(r) => (wire::Outcome::ack(id, token, r.as_deref()), Outcome::Succeeded),
            Err(e) => match e.snooze {
                Some(d) => (
                    wire::Outcome::release(id, token, Some(millis(d))),
                    Outcome::Snoozed { delay: d },
                ),
                None => {
                    let dead = e.permanent || job.attempt >= job.max_attempts;
                    let outcome = if e.permanent {
                        wire::Outcome::nack_permanent(id, token, e.message.clone())
                    } else {
                        wire::Outcome::nack(id, token, e.message.clone(), e.retry_in.map(millis))
                    };
                    let done = if dead {
                        Outcome::Dead { error: e.message }
                    } else {
                        Outcome::Failed { error: e.message }
                    };
                    (outcome, done)
                }
            },
        };
        Self {
            job: job.clone(),
            outcome,
            done,
            took,
            give_up: Instant::now() + job.lease_for,
        }
    }

    /// The server answered the outcome: counted and printed.
    fn answered(self, shared: &Shared, answer: &wire::ItemAnswer) {
        let outcome = match &answer.error {
            None => {
                let counter = match &self.done {
                    Outcome::Succeeded => Some(&shared.succeeded),
                    Outcome::Dead { .. } => Some(&shared.dead),
                    Outcome::Failed { .. } => Some(&shared.failed),
                    _ => None,
                };
                if let Some(c) = counter {
                    c.fetch_add(1, Relaxed);
                }
                self.done
            }
            Some(e) if gone(e.code) => Outcome::Lost,
            Some(e) => {
                eprintln!(
                    "relay work: job {}: its outcome was refused ({}: {}); it runs again when its lease expires",
                    self.job.id, e.code, e.message
                );
                Outcome::Lost
            }
        };
        print_finished(shared, &self.job, outcome, self.took);
    }

    /// The server could not be reached for a lease's length: the outcome is
    /// dropped, the job runs again once its lease expires.
    fn abandoned(self, shared: &Shared, e: &CliError) {
        eprintln!(
            "relay work: job {}: its outcome could not be reported ({e}); it runs again when its lease expires",
            self.job.id
        );
        print_finished(shared, &self.job, Outcome::Lost, self.took);
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
