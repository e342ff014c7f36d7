//! The pool at work: the lease loop, one task per job (handler, heartbeat,
//! timeout, outcome), and the drain on shutdown.

use super::backend::{fatal, transient, Backend, LeaseAsk};
use super::shutdown::{Phase, Shutdown};
use super::{Handler, JobContext, JobError, JobResult, Registered, Worker};
use crate::{Error, JobId, LeaseToken, LeasedJob, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// Live counters of a worker.
#[derive(Debug, Default)]
pub struct WorkerStats {
    /// Jobs acked.
    pub succeeded: AtomicU64,
    /// Jobs nacked and to be retried.
    pub failed: AtomicU64,
    /// Jobs nacked for good (attempts spent, permanent, or no handler).
    pub dead: AtomicU64,
    /// Jobs given back untried at shutdown.
    pub released: AtomicU64,
    /// Jobs put back for later by their handlers ([`JobError::snooze`]).
    pub snoozed: AtomicU64,
    /// Jobs whose outcome was not recorded: the lease was lost (another
    /// worker may hold the job, or it finished meanwhile), or the call
    /// failed (the job runs again after its lease expires).
    pub lost: AtomicU64,
    /// Jobs running now: their handlers started, their outcomes not yet
    /// recorded.
    pub in_flight: AtomicU64,
}

/// The counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct WorkerStatsSnapshot {
    /// Acked.
    pub succeeded: u64,
    /// Nacked and to be retried.
    pub failed: u64,
    /// Nacked for good (attempts spent, permanent, or no handler).
    pub dead: u64,
    /// Given back untried at shutdown.
    pub released: u64,
    /// Put back for later by their handlers ([`JobError::snooze`]).
    pub snoozed: u64,
    /// The lease was lost before the outcome could be recorded.
    pub lost: u64,
    /// Running: handler started, outcome not yet recorded.
    pub in_flight: u64,
}

impl WorkerStats {
    /// The counters now (each read on its own: not one atomic moment).
    pub fn snapshot(&self) -> WorkerStatsSnapshot {
        WorkerStatsSnapshot {
            succeeded: self.succeeded.load(Relaxed),
            failed: self.failed.load(Relaxed),
            dead: self.dead.load(Relaxed),
            released: self.released.load(Relaxed),
            snoozed: self.snoozed.load(Relaxed),
            lost: self.lost.load(Relaxed),
            in_flight: self.in_flight.load(Relaxed),
        }
    }
}

/// What became of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Acked.
    Succeeded,
    /// Nacked; it will run again.
    Failed {
        /// The handler's error, as recorded.
        error: String,
    },
    /// Nacked for good.
    Dead {
        /// The handler's error, as recorded.
        error: String,
    },
    /// Given back untried at shutdown: READY again at once.
    Released,
    /// Put back for later by its handler; runs again after `delay`.
    Snoozed {
        /// How long until the job may be leased again.
        delay: Duration,
    },
    /// The lease was gone when the outcome was reported.
    Lost,
}

/// One finished job, for logs and progress displays.
#[derive(Debug, Clone)]
pub struct Finished {
    /// The job's id.
    pub id: JobId,
    /// Its kind.
    pub kind: String,
    /// Which attempt this was (1 for the first).
    pub attempt: u32,
    /// What became of it.
    pub outcome: Outcome,
    /// From the start of its handler to its recorded outcome (zero for a
    /// job released at shutdown).
    pub took: Duration,
}

/// The callback told of each finished job.
pub(crate) type OnFinish = Arc<dyn Fn(&Finished) + Send + Sync>;

/// What [`Worker::on_outage`](super::Worker::on_outage) is told.
#[derive(Debug)]
#[non_exhaustive]
pub enum Outage<'a> {
    /// A call failed in a way that may pass (the server away, a busy
    /// store): the worker tries again with back-off. Told once per outage.
    Began(&'a Error),
    /// Calls succeed again.
    Ended,
}

/// The callback told of outages.
pub(crate) type OnOutage = Arc<dyn Fn(Outage<'_>) + Send + Sync>;

/// Longest pause between tries of a backend that does not answer.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// First pause after a failed call.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// How long a stopping worker waits, after the grace period, for handlers
/// told that their lease is gone and for outcomes being recorded.
const SETTLE: Duration = Duration::from_secs(3);

/// The jobs whose handlers run: each one's lease, context and start.
type InFlight = Arc<Mutex<HashMap<JobId, (LeaseToken, JobContext, crate::Timestamp)>>>;

/// A leased job waiting for a free slot (with `prefetch`), its lease
/// already kept alive.
struct Buffered {
    job: LeasedJob,
    heartbeat: tokio::task::JoinHandle<()>,
    ctx: JobContext,
}

pub(crate) struct Pool {
    w: Worker,
    backend: Arc<dyn Backend>,
    slots: Arc<Semaphore>,
    in_flight: InFlight,
    completer: Completer,
    buffer: Mutex<std::collections::VecDeque<Buffered>>,
    /// This run's worker id: its heartbeats' record and the holder its
    /// leases name, so only this run's record can show them orphaned.
    id: String,
    /// Told of outages once each.
    outage: Outages,
    /// The pause before the next lease after a failed one.
    backoff: Mutex<Duration>,
    /// An error that will not pass: the worker drains and returns it.
    fatal: Mutex<Option<Error>>,
}

/// Whether calls are failing now, and whom to tell when that changes.
#[derive(Clone)]
struct Outages {
    failing: Arc<AtomicBool>,
    tell: Option<OnOutage>,
}

impl Outages {
    fn failed(&self, e: &Error) {
        if !self.failing.swap(true, Relaxed) {
            match &self.tell {
                Some(f) => f(Outage::Began(e)),
                None => tracing::warn!(error = %e, "a call failed; trying again with back-off"),
            }
        }
    }

    fn answered(&self) {
        if self.failing.swap(false, Relaxed) {
            match &self.tell {
                Some(f) => f(Outage::Ended),
                None => tracing::info!("calls succeed again"),
            }
        }
    }
}

impl Pool {
    pub(crate) fn new(w: Worker) -> Self {
        let backend = Arc::clone(&w.backend);
        let slots = Arc::new(Semaphore::new(w.concurrency));
        let outage = Outages {
            failing: Arc::default(),
            tell: w.on_outage.clone(),
        };
        // Outcomes are gathered into batches only with prefetch: measured,
        // the extra hop costs more than it saves when each slot holds one job.
        let completer = Completer::start(Arc::clone(&backend), w.prefetch > 0, outage.clone());
        let id = relay_core::presence::worker_id(&w.name, fastrand::u32(..));
        Self {
            id,
            outage,
            backoff: Mutex::new(FIRST_BACKOFF),
            fatal: Mutex::default(),
            w,
            backend,
            slots,
            in_flight: Arc::default(),
            completer,
            buffer: Mutex::default(),
        }
    }

    pub(crate) async fn run(self) -> Result<WorkerStatsSnapshot> {
        if self.w.signals {
            // Registered here, before the first lease: a SIGTERM as soon
            // as a job runs is a graceful stop, not the default action.
            tokio::spawn(listen_for_signals(self.w.shutdown.clone()));
        }
        let beat = self.beat();
        // Aborted when dropped: a caller that drops `run_async` leaves no
        // heartbeats saying it is alive.
        let (stop_beats, beats_stopped) = tokio::sync::oneshot::channel();
        let presence = AbortOnDrop(tokio::spawn(presence(
            Arc::clone(&self.backend),
            beat.clone(),
            Arc::clone(&self.in_flight),
            beats_stopped,
        )));
        let mut tasks = JoinSet::new();
        let mut phase = self.w.shutdown.subscribe();
        while self.w.shutdown.phase() == Phase::Running {
            let first = tokio::select! {
                p = Arc::clone(&self.slots).acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
                _ = phase.changed() => continue,
            };
            let mut permits = vec![first];
            while let Ok(p) = Arc::clone(&self.slots).try_acquire_owned() {
                permits.push(p);
            }
            while let Some(p) = permits.pop() {
                match self.buffer.lock().unwrap_or_else(PoisonError::into_inner).pop_front() {
                    Some(b) => {
                        tasks.spawn(self.job_task(b, p));
                    }
                    None => {
                        permits.push(p);
                        break;
                    }
                }
            }
            if !permits.is_empty() {
                self.lease_into(&mut tasks, permits).await;
            }
            while tasks.try_join_next().is_some() {}
        }
        self.drain(tasks).await;
        // The heartbeat under way ends first: a late "alive" must not undo
        // "stopped".
        let _ = stop_beats.send(());
        presence.finish().await;
        if let Err(e) = self.backend.beat(beat, true).await {
            tracing::warn!(error = %e, "could not record this worker's stop; it shows as gone once its heartbeats are missed");
        }
        match self.fatal() {
            Some(e) => Err(e),
            None => Ok(self.w.stats.snapshot()),
        }
    }

    /// This worker as its heartbeats describe it (without its running jobs).
    fn beat(&self) -> crate::WorkerBeat {
        let pid = std::process::id();
        crate::WorkerBeat {
            id: self.id.clone(),
            name: self.w.name.clone(),
            host: whoami::hostname().unwrap_or_default(),
            pid,
            queues: self.w.queues.clone(),
            concurrency: u32::try_from(self.w.concurrency).unwrap_or(u32::MAX),
            version: self.w.version.clone(),
            started_at: self.backend.now(),
            beat_every: self.w.beat_every,
            running: Vec::new(),
        }
    }

    /// Leases as many jobs as there are free slots (plus room in the
    /// prefetch buffer) and starts them.
    async fn lease_into(&self, tasks: &mut JoinSet<()>, mut permits: Vec<OwnedSemaphorePermit>) {
        let buffered = self.buffer.lock().unwrap_or_else(PoisonError::into_inner).len();
        let want = permits.len() + self.w.prefetch.saturating_sub(buffered);
        let lease = LeaseAsk {
            queues: self.w.queues.clone(),
            worker: self.id.clone(),
            max: u32::try_from(want).unwrap_or(1).clamp(1, crate::MAX_LEASE_BATCH),
            lease_for: self.w.lease_for,
            wait: self.w.poll,
        };
        let mut phase = self.w.shutdown.subscribe();
        let stop = Box::pin(async move {
            let _ = phase.changed().await;
        });
        match self.backend.lease(lease, stop).await {
            Ok(jobs) => {
                self.outage.answered();
                *self.backoff.lock().unwrap_or_else(PoisonError::into_inner) = FIRST_BACKOFF;
                let runtime = tokio::runtime::Handle::current();
                for job in jobs {
                    let ctx = JobContext::new(job.clone(), Arc::clone(&self.backend), runtime.clone());
                    // Renewed by the lease's own length (the job's, where it has one).
                    let heartbeat = tokio::spawn(heartbeat(
                        Arc::clone(&self.backend),
                        ctx.clone(),
                        job.lease_for,
                        self.outage.clone(),
                    ));
                    let b = Buffered { job, heartbeat, ctx };
                    match permits.pop() {
                        Some(permit) => {
                            tasks.spawn(self.job_task(b, permit));
                        }
                        None => self.buffer.lock().unwrap_or_else(PoisonError::into_inner).push_back(b),
                    }
                }
            }
            Err(e) if !fatal(&e) => {
                self.outage.failed(&e);
                let pause = {
                    let mut backoff = self.backoff.lock().unwrap_or_else(PoisonError::into_inner);
                    let pause = *backoff;
                    *backoff = (pause * 2).min(MAX_BACKOFF);
                    pause
                };
                let mut phase = self.w.shutdown.subscribe();
                if self.w.shutdown.phase() == Phase::Running {
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        _ = phase.changed() => {}
                    }
                }
            }
            Err(e) => {
                // It will not pass (a refused token, an answer that cannot
                // be read, a closed relay): stop, drain, and say why.
                tracing::error!(error = %e, "the worker stops: {e}");
                self.fatal
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(e);
                self.w.shutdown.drain();
            }
        }
    }

    /// The error that stopped the worker, if one did.
    fn fatal(&self) -> Option<Error> {
        self.fatal.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn job_task(
        &self,
        b: Buffered,
        permit: OwnedSemaphorePermit,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let registered = self
            .w
            .handlers
            .get(&b.job.kind)
            .cloned()
            .or_else(|| self.w.fallback.clone());
        // The job's own timeout first, then its kind's, then the worker's.
        let timeout = b
            .job
            .timeout
            .or_else(|| self.w.timeouts.get(&b.job.kind).copied())
            .or(self.w.default_timeout);
        let run = JobRun {
            ctx: b.ctx,
            completer: self.completer.clone(),
            heartbeat: b.heartbeat,
            in_flight: Arc::clone(&self.in_flight),
            stats: Arc::clone(&self.w.stats),
            on_finish: self.w.on_finish.clone(),
            queues: self.w.queues.join(", "),
        };
        run.go(registered, timeout, permit)
    }

    /// Waits for running jobs up to the grace period (or until told to stop
    /// at once), then releases every job still in flight.
    async fn drain(&self, mut tasks: JoinSet<()>) {
        let mut phase = self.w.shutdown.subscribe();
        let deadline = tokio::time::Instant::now() + self.w.grace;
        while self.w.shutdown.phase() == Phase::Draining {
            tokio::select! {
                next = tasks.join_next() => if next.is_none() { break },
                () = tokio::time::sleep_until(deadline) => break,
                _ = phase.changed() => {}
            }
        }
        let mut left: Vec<(JobId, (LeaseToken, JobContext))> = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(id, (token, ctx, _))| (id, (token, ctx)))
            .collect();
        // Prefetched jobs that never got a slot go back too.
        for b in self.buffer.lock().unwrap_or_else(PoisonError::into_inner).drain(..) {
            b.heartbeat.abort();
            self.w.stats.in_flight.fetch_add(1, Relaxed);
            left.push((b.job.id, (b.job.token, b.ctx)));
        }
        for (id, (token, ctx)) in left {
            ctx.mark_lost();
            match self.backend.release(id, token).await {
                Ok(()) => {
                    self.w.stats.released.fetch_add(1, Relaxed);
                    self.w.stats.in_flight.fetch_sub(1, Relaxed);
                    report(&self.w.on_finish, &ctx, Outcome::Released, Duration::ZERO);
                }
                Err(e) => {
                    tracing::warn!(job = %id, error = %e, "could not release at shutdown; it runs again after its lease expires")
                }
            }
        }
        // Handlers told their lease is gone (a command is stopped within a
        // fraction of a second) and outcomes still being recorded get a
        // moment to end; then async handlers stop at their next await, and
        // blocking ones, which cannot be interrupted, have their late
        // outcome refused (LeaseLost).
        let settle = tokio::time::Instant::now() + SETTLE;
        while !tasks.is_empty() {
            tokio::select! {
                next = tasks.join_next() => if next.is_none() { break },
                () = tokio::time::sleep_until(settle) => break,
            }
        }
        if !tasks.is_empty() {
            tracing::warn!(
                tasks = tasks.len(),
                "stopping with handlers or outcomes still running; their jobs run again after their leases expire"
            );
        }
        tasks.abort_all();
    }
}

/// A task aborted when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl AbortOnDrop {
    /// Waits for the task to end by itself.
    async fn finish(mut self) {
        let _ = (&mut self.0).await;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sends the worker's heartbeat every `beat_every`, with the jobs it runs,
/// until aborted. A heartbeat that fails is logged and sent again at the
/// next.
async fn presence(
    backend: Arc<dyn Backend>,
    mut beat: crate::WorkerBeat,
    in_flight: InFlight,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let mut failing = false;
    loop {
        beat.running = in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(id, (token, _, since))| crate::Running {
                job: *id,
                token: *token,
                since: *since,
            })
            .take(relay_core::presence::MAX_RUNNING)
            .collect();
        beat.running.sort_by_key(|r| r.job);
        match backend.beat(beat.clone(), false).await {
            Ok(()) => failing = false,
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(error = %e, "could not send this worker's heartbeat; trying again");
            }
            Err(_) => {}
        }
        tokio::select! {
            () = tokio::time::sleep(beat.beat_every) => {}
            _ = &mut stop => return,
        }
    }
}

/// Everything one job's task needs.
struct JobRun {
    ctx: JobContext,
    completer: Completer,
    heartbeat: tokio::task::JoinHandle<()>,
    in_flight: InFlight,
    stats: Arc<WorkerStats>,
    on_finish: Option<OnFinish>,
    queues: String,
}

impl JobRun {
    async fn go(self, registered: Option<Registered>, timeout: Option<Duration>, permit: OwnedSemaphorePermit) {
        let (id, token) = (self.ctx.id(), self.ctx.job().token);
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, (token, self.ctx.clone(), self.ctx.now()));
        self.stats.in_flight.fetch_add(1, Relaxed);
        let started = Instant::now();
        let result = match registered {
            None => Err(JobError::permanent(format!(
                "no handler for kind {:?} on this worker (queues: {}); register one with Worker::handler",
                self.ctx.kind(),
                self.queues
            ))),
            Some(r) => run_handler(r.handler, self.ctx.clone(), timeout, permit).await,
        };
        self.heartbeat.abort();
        // Whoever takes the job out of the in-flight map reports its outcome:
        // a shutdown may already have released it.
        if self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id)
            .is_none()
        {
            return;
        }
        self.stats.in_flight.fetch_sub(1, Relaxed);
        let outcome = self.record(result).await;
        report(&self.on_finish, &self.ctx, outcome, started.elapsed());
    }

    async fn record(&self, result: JobResult) -> Outcome {
        let (id, token) = (self.ctx.id(), self.ctx.job().token);
        let completion = match &result {
            Ok(out) => crate::Completion::ack(id, token, out.clone()),
            Err(JobError { snooze: Some(d), .. }) => crate::Completion::snooze(id, token, *d),
            Err(e) if e.permanent => crate::Completion::nack_permanent(id, token, e.message.clone()),
            Err(e) => crate::Completion::nack(id, token, e.message.clone(), e.retry_in),
        };
        // Tried again while the backend is away, until the lease would have
        // expired anyway (the job then runs again).
        let give_up = tokio::time::Instant::now() + self.ctx.job().lease_for;
        let mut pause = FIRST_BACKOFF;
        let call = loop {
            match self.completer.complete(completion.clone()).await {
                Err(e) if transient(&e) && tokio::time::Instant::now() + pause < give_up => {
                    self.completer.outage.failed(&e);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_BACKOFF);
                }
                done => break done,
            }
        };
        if call.is_ok() {
            self.completer.outage.answered();
        }
        let call = call.map(|state| match (&result, state) {
            (Ok(_), _) => Outcome::Succeeded,
            (Err(JobError { snooze: Some(d), .. }), _) => Outcome::Snoozed { delay: *d },
            (Err(e), crate::JobState::Dead) => Outcome::Dead {
                error: e.message.clone(),
            },
            (Err(e), _) => Outcome::Failed {
                error: e.message.clone(),
            },
        });
        let outcome = match call {
            Ok(o) => o,
            // Another lease holds it, or the job finished meanwhile (a
            // cancel): either way this run's outcome does not count.
            Err(Error::LeaseLost { .. } | Error::InvalidState { .. }) => Outcome::Lost,
            Err(e) => {
                tracing::warn!(job = %id, error = %e, "could not record the outcome; the job runs again after its lease expires");
                Outcome::Lost
            }
        };
        let counter = match outcome {
            Outcome::Succeeded => &self.stats.succeeded,
            Outcome::Failed { .. } => &self.stats.failed,
            Outcome::Dead { .. } => &self.stats.dead,
            Outcome::Released => &self.stats.released,
            Outcome::Snoozed { .. } => &self.stats.snoozed,
            Outcome::Lost => &self.stats.lost,
        };
        counter.fetch_add(1, Relaxed);
        outcome
    }
}

/// Gathers the outcomes of finished jobs and records them in batches: one
/// writer operation for every outcome that arrived while the previous batch
/// was being committed, instead of one per job.
#[derive(Clone)]
struct Completer {
    backend: Arc<dyn Backend>,
    tx: Option<CompleteTx>,
    outage: Outages,
}

type CompleteTx =
    tokio::sync::mpsc::UnboundedSender<(crate::Completion, tokio::sync::oneshot::Sender<Result<crate::JobState>>)>;

/// Most outcomes recorded by one operation.
const COMPLETE_BATCH: usize = 256;

impl Completer {
    fn start(backend: Arc<dyn Backend>, batching: bool, outage: Outages) -> Self {
        if !batching {
            return Self {
                tx: None,
                backend,
                outage,
            };
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(
            crate::Completion,
            tokio::sync::oneshot::Sender<Result<crate::JobState>>,
        )>();
        let r = Arc::clone(&backend);
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut batch = vec![first];
                while batch.len() < COMPLETE_BATCH {
                    match rx.try_recv() {
                        Ok(next) => batch.push(next),
                        Err(_) => break,
                    }
                }
                let (completions, replies): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
                match r.complete(completions).await {
                    Ok(results) => {
                        for (reply, r) in replies.into_iter().zip(results) {
                            let _ = reply.send(r);
                        }
                    }
                    Err(e) => {
                        for reply in replies {
                            let _ = reply.send(Err(e.clone()));
                        }
                    }
                }
            }
        });
        Self {
            tx: Some(tx),
            backend,
            outage,
        }
    }

    async fn complete(&self, c: crate::Completion) -> Result<crate::JobState> {
        let Some(tx) = &self.tx else {
            return self
                .backend
                .complete(vec![c])
                .await?
                .pop()
                .unwrap_or(Err(Error::Closed));
        };
        let (reply, rx) = tokio::sync::oneshot::channel();
        tx.send((c, reply)).map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }
}

fn report(on_finish: &Option<OnFinish>, ctx: &JobContext, outcome: Outcome, took: Duration) {
    if let Some(f) = on_finish {
        let job = ctx.job();
        f(&Finished {
            id: job.id,
            kind: job.kind.clone(),
            attempt: job.attempt,
            outcome,
            took,
        });
    }
}

/// Runs the handler holding its pool slot; a panic or a timeout becomes an
/// error. A blocking handler keeps its slot until it really returns.
async fn run_handler(
    handler: Handler,
    ctx: JobContext,
    timeout: Option<Duration>,
    permit: OwnedSemaphorePermit,
) -> JobResult {
    use tracing::Instrument;
    // The job's span: a child of the trace it was submitted in (see trace.rs).
    let job = ctx.job();
    let span = tracing::info_span!(
        "relay.job",
        job.id = job.id.0,
        job.kind = %job.kind,
        job.queue = %job.queue,
        job.attempt = job.attempt
    );
    if let Some(tp) = &job.traceparent {
        crate::trace::set_parent(&span, tp);
    }
    let mut task = match handler {
        Handler::Sync(f) => tokio::task::spawn_blocking(move || {
            let _slot = permit;
            span.in_scope(|| f(&ctx))
        }),
        Handler::Async(f) => {
            let fut = span.in_scope(|| f(ctx));
            tokio::spawn(
                async move {
                    let _slot = permit;
                    fut.await
                }
                .instrument(span),
            )
        }
    };
    let joined = match timeout {
        None => (&mut task).await,
        Some(t) => match tokio::time::timeout(t, &mut task).await {
            Ok(j) => j,
            Err(_) => {
                task.abort();
                return Err(JobError::new(format!("timed out after {}", humantime_short(t))));
            }
        },
    };
    match joined {
        Ok(result) => result,
        Err(e) if e.is_panic() => Err(JobError::new(format!(
            "handler panicked: {}",
            panic_message(e.into_panic())
        ))),
        Err(_) => Err(JobError::new("handler was cancelled")),
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(a non-string panic payload)".to_owned())
}

fn humantime_short(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// Extends the lease every third of its duration while the handler runs.
async fn heartbeat(backend: Arc<dyn Backend>, ctx: JobContext, lease_for: Duration, outage: Outages) {
    let every = lease_for / 3;
    loop {
        tokio::time::sleep(every).await;
        match backend.extend(ctx.id(), ctx.job().token, lease_for).await {
            Ok(()) => {}
            Err(Error::LeaseLost { .. } | Error::InvalidState { .. } | Error::NotFound { .. }) => {
                ctx.mark_lost();
                return;
            }
            Err(e) if !fatal(&e) => outage.failed(&e),
            Err(e) => tracing::warn!(job = %ctx.id(), error = %e, "heartbeat failed; trying again"),
        }
    }
}

/// SIGINT and SIGTERM as graceful shutdowns. The handlers are installed
/// when this is called, not when the future is first polled.
#[cfg(unix)]
fn listen_for_signals(shutdown: Shutdown) -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let watched = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()));
    async move {
        let (Ok(mut int), Ok(mut term)) = watched else {
            tracing::warn!("cannot listen for SIGINT/SIGTERM; use the shutdown handle");
            return;
        };
        loop {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            shutdown.graceful();
        }
    }
}

/// Elsewhere, Ctrl-C (Windows' console control events).
#[cfg(not(unix))]
async fn listen_for_signals(shutdown: Shutdown) {
    while tokio::signal::ctrl_c().await.is_ok() {
        shutdown.graceful();
    }
    tracing::warn!("cannot listen for Ctrl-C; use the shutdown handle");
}
