//! The pool at work: the lease loop, one task per job (handler, heartbeat,
//! timeout, outcome), and the drain on shutdown.

use super::backend::{fatal, Backend, LeaseAsk};
use super::job::{heartbeat, tell_finished, Completer, JobRun};
use super::report::{InFlight, Outages, Outcome, WorkerStatsSnapshot, FIRST_BACKOFF, MAX_BACKOFF};
use super::shutdown::{Phase, Shutdown};
use super::{JobContext, Worker};
use crate::{Error, JobId, LeaseToken, LeasedJob, Result};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

/// How long a stopping worker waits, after the grace period, for handlers
/// told that their lease is gone and for outcomes being recorded.
const SETTLE: Duration = Duration::from_secs(3);

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

impl Pool {
    pub(crate) fn new(w: Worker) -> Self {
        let backend = Arc::clone(&w.backend);
        let slots = Arc::new(Semaphore::new(w.concurrency));
        let outage = Outages::new(w.on_outage.clone());
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
                    tell_finished(&self.w.on_finish, &ctx, Outcome::Released, Duration::ZERO);
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
