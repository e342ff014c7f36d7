//! One job's run: its handler (with its timeout, holding its slot), the
//! heartbeat that renews its lease meanwhile, and its outcome, recorded
//! alone or gathered with others' (`Completer`).

use super::backend::{fatal, transient, Backend};
use super::report::{Finished, InFlight, OnFinish, Outages, Outcome, WorkerStats, FIRST_BACKOFF, MAX_BACKOFF};
use super::{Handler, JobContext, JobError, JobResult, Park, Registered};
use crate::{Error, Result};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::OwnedSemaphorePermit;

/// Everything one job's task needs.
pub(super) struct JobRun {
    pub(super) ctx: JobContext,
    pub(super) completer: Completer,
    pub(super) heartbeat: tokio::task::JoinHandle<()>,
    pub(super) in_flight: InFlight,
    pub(super) stats: Arc<WorkerStats>,
    pub(super) on_finish: Option<OnFinish>,
    pub(super) queues: String,
}

impl JobRun {
    pub(super) async fn go(
        self,
        registered: Option<Registered>,
        timeout: Option<Duration>,
        permit: OwnedSemaphorePermit,
    ) {
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
        tell_finished(&self.on_finish, &self.ctx, outcome, started.elapsed());
    }

    async fn record(&self, result: JobResult) -> Outcome {
        let (id, token) = (self.ctx.id(), self.ctx.job().token);
        let completion = match &result {
            Ok(out) => crate::Completion::ack(id, token, out.clone()),
            Err(JobError { snooze: Some(d), .. }) => crate::Completion::snooze(id, token, *d),
            Err(JobError { park: Some(p), .. }) => match &**p {
                Park::Sleep { step, until } => crate::Completion::sleep(id, token, step.clone(), *until),
                Park::Wait { step, key, until } => {
                    crate::Completion::wait(id, token, step.clone(), key.clone(), *until)
                }
                Park::Join { step, child } => crate::Completion::join(id, token, step.clone(), *child),
            },
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
            (Err(JobError { park: Some(p), .. }), _) => Outcome::Slept { until: p.until() },
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
            Outcome::Slept { .. } => &self.stats.slept,
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
pub(super) struct Completer {
    backend: Arc<dyn Backend>,
    tx: Option<CompleteTx>,
    outage: Outages,
}

type CompleteTx =
    tokio::sync::mpsc::UnboundedSender<(crate::Completion, tokio::sync::oneshot::Sender<Result<crate::JobState>>)>;

/// Most outcomes recorded by one operation.
const COMPLETE_BATCH: usize = 256;

impl Completer {
    pub(super) fn start(backend: Arc<dyn Backend>, batching: bool, outage: Outages) -> Self {
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

pub(super) fn tell_finished(on_finish: &Option<OnFinish>, ctx: &JobContext, outcome: Outcome, took: Duration) {
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
pub(super) async fn heartbeat(backend: Arc<dyn Backend>, ctx: JobContext, lease_for: Duration, outage: Outages) {
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
