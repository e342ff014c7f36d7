//! `relay --server URL work`: the one worker runtime (`relay::worker`)
//! over a Relay server's HTTP API. Each call of [`Backend`] is one request
//! of the async client: leases by long-poll and outcomes through `POST
//! /v1/work`, lease renewals through `POST /v1/heartbeat`, the worker's
//! record through `PUT /v1/workers/{id}` with a secret of its own.

use crate::error::CliError;
use crate::target::{millis, Remote};
use relay::worker::{Backend, BoxFuture, LeaseAsk};
use relay::{Clock, Completion, CompletionOutcome, Error, JobId, JobState, LeaseToken, LeasedJob, Priority};
use relay_client::wire::{self, ErrorCode};
use relay_client::AsyncClient;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A Relay server as a worker's backend.
pub struct HttpBackend {
    client: AsyncClient,
    /// Turns the client's errors into the CLI's (a 401 names the flag).
    remote: Arc<Remote>,
    /// This worker's secret, sent with every heartbeat from the first (no
    /// other client can write its record, and a first heartbeat whose
    /// answer was lost is simply sent again); without randomness, the one
    /// the server answers the first heartbeat with.
    secret: Mutex<Option<String>>,
}

impl HttpBackend {
    pub fn new(remote: Remote) -> Self {
        Self {
            client: remote.async_client(),
            remote: Arc::new(remote),
            secret: Mutex::new(own_secret()),
        }
    }

    /// The client's error as a worker's: the CLI's error inside, transient
    /// when the server did not answer or answered that it cannot now.
    fn error(&self, e: relay_client::Error) -> Error {
        let cli = self.remote.error(e);
        let transient = match &cli {
            CliError::Io(_) => true,
            CliError::Remote { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        };
        Error::Backend {
            source: Arc::new(cli),
            transient,
        }
    }

    /// An item the server refused on its own (an outcome, a renewal).
    fn refused(&self, id: i64, e: &wire::ErrorDetail) -> Error {
        if gone(e.code) {
            return Error::LeaseLost { id: JobId(id) };
        }
        Error::Backend {
            source: Arc::new(CliError::Remote {
                status: 200,
                code: e.code,
                message: format!("job {id}: {}", e.message),
            }),
            transient: false,
        }
    }

    async fn lease_now(&self, ask: &LeaseAsk) -> relay::Result<Vec<LeasedJob>> {
        let work = wire::Work {
            outcomes: Vec::new(),
            lease: Some(wire::Lease {
                queues: ask.queues.clone(),
                worker: Some(ask.worker.clone()),
                max: Some(ask.max),
                lease_for_ms: Some(millis(ask.lease_for)),
                wait_ms: Some(millis(ask.wait)),
            }),
        };
        let done = self.client.work(&work).await.map_err(|e| self.error(e))?;
        let mut jobs = Vec::with_capacity(done.jobs.len());
        for j in done.jobs {
            match leased(&j) {
                Some(job) => jobs.push(job),
                None => {
                    // Given back it would be leased again at once, forever:
                    // failed for good, with what was wrong, for an operator.
                    eprintln!("relay work: the server sent a job this worker cannot read; failing it: {j:?}");
                    let error = "the job as leased could not be read by relay work (its payload or priority); \
                                 see the worker's log";
                    let work = wire::Work {
                        outcomes: vec![wire::Outcome::nack_permanent(j.id, j.token, error)],
                        lease: None,
                    };
                    let _ = self.client.work(&work).await;
                }
            }
        }
        Ok(jobs)
    }

    async fn release_now(&self, id: JobId, token: LeaseToken) -> relay::Result<()> {
        let release = wire::Release {
            token: token.0,
            in_ms: None,
        };
        match self.client.release(id.0, &release).await {
            Ok(_) => Ok(()),
            Err(relay_client::Error::Api { code, .. }) if gone(code) => Err(Error::LeaseLost { id }),
            Err(e) => Err(self.error(e)),
        }
    }
}

impl Backend for HttpBackend {
    fn lease<'a>(&'a self, ask: LeaseAsk, stop: BoxFuture<'a, ()>) -> BoxFuture<'a, relay::Result<Vec<LeasedJob>>> {
        Box::pin(async move {
            let call = self.lease_now(&ask);
            tokio::pin!(call);
            tokio::select! {
                jobs = &mut call => jobs,
                () = stop => {
                    // Stopping: the long-poll ends within its wait; what it
                    // leased goes back at once rather than at its expiry.
                    if let Ok(jobs) = call.await {
                        for j in jobs {
                            let _ = self.release_now(j.id, j.token).await;
                        }
                    }
                    Ok(Vec::new())
                }
            }
        })
    }

    fn complete(&self, batch: Vec<Completion>) -> BoxFuture<'_, relay::Result<Vec<relay::Result<JobState>>>> {
        Box::pin(async move {
            let work = wire::Work {
                outcomes: batch.iter().map(outcome).collect(),
                lease: None,
            };
            let done = self.client.work(&work).await.map_err(|e| self.error(e))?;
            let answers = batch.iter().zip(done.outcomes).map(|(c, a)| match (&a.error, a.state) {
                (Some(e), _) => Err(self.refused(c.id.0, e)),
                (None, Some(state)) => relay::wire::job_state(state).map_err(|e| self.unreadable(&e.0)),
                (None, None) => Err(self.unreadable("an outcome's answer without its state")),
            });
            Ok(answers.collect())
        })
    }

    fn extend(&self, id: JobId, token: LeaseToken, lease_for: Duration) -> BoxFuture<'_, relay::Result<()>> {
        Box::pin(async move {
            let beat = wire::Heartbeat {
                leases: vec![wire::HeldLease {
                    id: id.0,
                    token: token.0,
                    lease_for_ms: Some(millis(lease_for)),
                }],
                lease_for_ms: None,
            };
            let answers = self.client.heartbeat(&beat).await.map_err(|e| self.error(e))?;
            match answers.first().and_then(|a| a.error.as_ref()) {
                Some(e) => Err(self.refused(id.0, e)),
                None => Ok(()),
            }
        })
    }

    fn release(&self, id: JobId, token: LeaseToken) -> BoxFuture<'_, relay::Result<()>> {
        Box::pin(self.release_now(id, token))
    }

    fn beat(&self, beat: relay::WorkerBeat, stopped: bool) -> BoxFuture<'_, relay::Result<()>> {
        Box::pin(async move {
            let secret = self.secret.lock().unwrap_or_else(PoisonError::into_inner).clone();
            let body = wire::WorkerBeat {
                name: beat.name,
                host: beat.host,
                pid: beat.pid,
                queues: beat.queues,
                concurrency: beat.concurrency,
                version: beat.version,
                started_at: beat.started_at.to_rfc3339(),
                beat_every_ms: millis(beat.beat_every),
                running: beat
                    .running
                    .iter()
                    .map(|r| wire::RunningJob {
                        id: r.job.0,
                        token: r.token.0,
                        since: r.since.to_rfc3339(),
                    })
                    .collect(),
                stopped,
                secret,
            };
            let seen = self
                .client
                .send::<wire::calls::PutWorker>(&beat.id, &wire::Nothing {}, &body)
                .await
                .map_err(|e| self.error(e))?;
            if let Some(secret) = seen.secret {
                *self.secret.lock().unwrap_or_else(PoisonError::into_inner) = Some(secret);
            }
            Ok(())
        })
    }

    fn append_event(&self, id: JobId, kind: String, data: serde_json::Value) -> BoxFuture<'_, relay::Result<i64>> {
        Box::pin(async move {
            let event = wire::AppendEvent { kind, data };
            let done = self.client.append_event(id.0, &event).await;
            done.map(|a| a.seq).map_err(|e| self.error(e))
        })
    }

    fn progress(
        &self,
        id: JobId,
        token: LeaseToken,
        fraction: f64,
        message: Option<String>,
    ) -> BoxFuture<'_, relay::Result<()>> {
        Box::pin(async move {
            let report = wire::ReportProgress {
                token: token.0,
                fraction,
                message,
            };
            match self
                .client
                .send::<wire::calls::Progress>(&id.0, &wire::Nothing {}, &report)
                .await
            {
                Ok(_) => Ok(()),
                Err(relay_client::Error::Api {
                    code: ErrorCode::LeaseLost,
                    ..
                }) => Err(Error::LeaseLost { id }),
                Err(e) => Err(self.error(e)),
            }
        })
    }

    fn create_token(
        &self,
        id: JobId,
        token: LeaseToken,
        timeout: Duration,
    ) -> BoxFuture<'_, relay::Result<relay::CompletionToken>> {
        Box::pin(async move {
            let body = wire::CreateToken {
                token: token.0,
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            };
            match self
                .client
                .send::<wire::calls::CreateToken>(&id.0, &wire::Nothing {}, &body)
                .await
            {
                Ok(t) => {
                    let (tid, secret) = t
                        .token
                        .split_once('.')
                        .ok_or_else(|| self.unreadable("a completion token"))?;
                    let expires_at = relay::wire::rfc3339("expires_at", &t.expires_at)
                        .map_err(|_| self.unreadable("a token's expiry"))?;
                    Ok(relay::CompletionToken {
                        id: tid.to_owned(),
                        secret: secret.to_owned(),
                        expires_at,
                    })
                }
                Err(relay_client::Error::Api { code, .. }) if gone(code) => Err(Error::LeaseLost { id }),
                Err(e) => Err(self.error(e)),
            }
        })
    }

    fn record_step(
        &self,
        id: JobId,
        token: LeaseToken,
        name: String,
        output: Vec<u8>,
    ) -> BoxFuture<'_, relay::Result<Option<relay::Step>>> {
        Box::pin(async move {
            let body = wire::RecordStep::new(token.0, &name, &output);
            match self
                .client
                .send::<wire::calls::RecordStep>(&id.0, &wire::Nothing {}, &body)
                .await
            {
                Ok(done) => match done.earlier {
                    None if done.recorded => Ok(None),
                    Some(s) => relay::wire::step_of(&s)
                        .map(Some)
                        .map_err(|_| self.unreadable("a step's record")),
                    None => Err(self.unreadable("a step record neither taken nor standing")),
                },
                Err(relay_client::Error::Api { code, .. }) if gone(code) => Err(Error::LeaseLost { id }),
                Err(e) => Err(self.error(e)),
            }
        })
    }

    fn now(&self) -> relay::Timestamp {
        relay::SystemClock.now()
    }

    fn limits(&self) -> relay::Limits {
        // The server checks its own; these catch a bad queue or worker name
        // before the first request.
        relay::Limits::default()
    }
}

impl HttpBackend {
    /// An answer the worker cannot read: it stops rather than guess.
    fn unreadable(&self, what: &str) -> Error {
        Error::Backend {
            source: Arc::new(CliError::Answer(format!(
                "the server's answer was not understood ({what}); is {} a Relay server of this version?",
                self.client.base_url()
            ))),
            transient: false,
        }
    }
}

/// A completion as the worker protocol's outcome.
fn outcome(c: &Completion) -> wire::Outcome {
    let (id, token) = (c.id.0, c.token.0);
    match &c.outcome {
        CompletionOutcome::Ack { result } => wire::Outcome::ack(id, token, result.as_deref()),
        CompletionOutcome::Nack {
            error, permanent: true, ..
        } => wire::Outcome::nack_permanent(id, token, error.clone()),
        CompletionOutcome::Nack { error, retry_in, .. } => {
            wire::Outcome::nack(id, token, error.clone(), retry_in.map(millis))
        }
        CompletionOutcome::Snooze { delay } => wire::Outcome::release(id, token, Some(millis(*delay))),
        CompletionOutcome::Sleep { step, until } => wire::Outcome::sleep(id, token, step.clone(), until.to_rfc3339()),
        CompletionOutcome::Wait { step, key, until } => {
            wire::Outcome::wait(id, token, step.clone(), key.clone(), until.to_rfc3339())
        }
        CompletionOutcome::Step { name, output } => wire::Outcome::step(id, token, name.clone(), output),
        CompletionOutcome::Join { step, child } => wire::Outcome::join(id, token, step.clone(), child.0),
        _ => wire::Outcome::release(id, token, None),
    }
}

/// A job of the lease answer (its payload's bytes: a JSON value's compact
/// text, or the base64 bytes).
fn leased(j: &wire::LeasedJob) -> Option<LeasedJob> {
    let lease_for = Duration::from_millis(j.lease_for_ms);
    let now = relay::SystemClock.now();
    Some(LeasedJob {
        id: JobId(j.id),
        token: LeaseToken(j.token),
        queue: j.queue.clone(),
        kind: j.kind.clone(),
        payload: j.payload().ok()?.to_vec(),
        priority: Priority::new(j.priority)?,
        attempt: j.attempt,
        max_attempts: j.max_attempts,
        expires_at: now.plus(lease_for),
        created_at: now,
        lease_for,
        timeout: j.timeout_ms.map(Duration::from_millis),
        traceparent: j.traceparent.clone(),
        group: j.group.clone(),
        steps: j
            .steps
            .iter()
            .map(relay::wire::step_of)
            .collect::<Result<_, _>>()
            .ok()?,
    })
}

/// An item's error code saying the job is no longer this worker's (its
/// lease lost, the job finished or deleted meanwhile).
fn gone(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::LeaseLost | ErrorCode::InvalidState | ErrorCode::NotFound
    )
}

/// 32 random bytes in hex: this worker's secret (`None` without a source
/// of randomness: the server's answer then gives one).
fn own_secret() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
