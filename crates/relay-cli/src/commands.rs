//! Each subcommand: check what the flags say, make the library call, print.

use crate::args::{Cli, Command, LeaseArgs, SubmitArgs};
use crate::output::Out;
use relay::{Error, JobFilter, JobId, JobState, LeaseRequest, LeaseToken, NewJob, Relay};
use std::fmt;
use std::io::Read;
use std::path::PathBuf;

/// A failure of one command, with the exit status it maps to.
#[derive(Debug)]
pub enum CliError {
    Relay(Error),
    Usage(String),
    Io(String),
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        Self::Relay(e)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Relay(e) => write!(f, "{e}"),
            Self::Usage(m) | Self::Io(m) => f.write_str(m),
        }
    }
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) | Self::Relay(Error::InvalidInput(_)) => 2,
            Self::Relay(Error::NotFound { .. }) => 3,
            Self::Relay(Error::LeaseLost { .. }) => 4,
            Self::Relay(Error::InvalidState { .. }) => 5,
            _ => 1,
        }
    }
}

pub fn run(cli: Cli) -> Result<(), CliError> {
    let out = Out::new(cli.json);
    if let Command::Demo(args) = &cli.command {
        return crate::demo::run(cli.db, args, &out);
    }
    let relay = open(cli.db)?;
    match cli.command {
        Command::Submit(a) => submit(&relay, a, &out),
        Command::Lease(a) => lease(&relay, a, &out),
        Command::Ack(a) => {
            let (id, token) = (JobId(a.lease.id), LeaseToken(a.lease.token));
            relay.ack(id, token, a.result.map(String::into_bytes))?;
            out.state(id, JobState::Succeeded, None);
            Ok(())
        }
        Command::Nack(a) => {
            let (id, token) = (JobId(a.lease.id), LeaseToken(a.lease.token));
            let status = relay.nack(id, token, &a.error, a.retry_in)?;
            let retry_at = (status.state == JobState::Ready).then_some(status.ready_at);
            out.state(id, status.state, retry_at);
            Ok(())
        }
        Command::Extend(a) => {
            let until = relay.extend(JobId(a.lease.id), LeaseToken(a.lease.token), a.lease_for)?;
            out.extended(JobId(a.lease.id), until);
            Ok(())
        }
        Command::Release(a) => {
            relay.release(JobId(a.id), LeaseToken(a.token))?;
            out.state(JobId(a.id), JobState::Ready, None);
            Ok(())
        }
        Command::Show(a) => {
            out.job(&relay.get(JobId(a.id))?);
            Ok(())
        }
        Command::Events(a) => {
            out.events(&relay.events(JobId(a.id))?);
            Ok(())
        }
        Command::Stats => {
            out.stats(&relay.stats()?);
            Ok(())
        }
        Command::Jobs(a) => {
            let state = match a.state.as_deref() {
                None => None,
                Some(s) => Some(JobState::parse(&s.to_uppercase()).ok_or_else(|| {
                    CliError::Usage(format!(
                        "unknown state {s:?}: use READY, LEASED, SUCCEEDED, DEAD or CANCELLED"
                    ))
                })?),
            };
            let filter = JobFilter {
                queue: a.queue,
                state,
                before: None,
                limit: a.limit.clamp(1, 10_000),
            };
            out.jobs(&relay.list(&filter)?);
            Ok(())
        }
        Command::Cancel(a) => admin(&out, JobId(a.id), JobState::Cancelled, || relay.cancel(JobId(a.id))),
        Command::Retry(a) => admin(&out, JobId(a.id), JobState::Ready, || relay.retry(JobId(a.id))),
        Command::Delete(a) => {
            relay.delete(JobId(a.id))?;
            out.deleted(JobId(a.id));
            Ok(())
        }
        Command::Work(a) => crate::work::run(relay, a, &out),
        Command::Serve(a) => crate::serve::run(relay, a),
        Command::Demo(_) => Ok(()),
    }
}

fn open(db: Option<PathBuf>) -> Result<Relay, CliError> {
    let path = db.ok_or_else(|| CliError::Usage("no database given: pass --db PATH or set RELAY_DB".into()))?;
    Relay::open(&path).map_err(|e| match e {
        Error::Open(inner) => CliError::Io(format!("cannot open {}: {inner}", path.display())),
        other => CliError::Relay(other),
    })
}

fn admin(out: &Out, id: JobId, to: JobState, f: impl FnOnce() -> relay::Result<()>) -> Result<(), CliError> {
    f()?;
    out.state(id, to, None);
    Ok(())
}

fn submit(relay: &Relay, a: SubmitArgs, out: &Out) -> Result<(), CliError> {
    let payload = match a.payload.as_deref() {
        None => Vec::new(),
        Some("-") => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| CliError::Io(format!("cannot read the payload from stdin: {e}")))?;
            buf
        }
        Some(p) => p.as_bytes().to_vec(),
    };
    let mut job = NewJob::new(a.queue, a.kind, payload).priority(a.priority);
    if let Some(d) = a.delay {
        job = job.delay(d);
    }
    if let Some(n) = a.max_attempts {
        job = job.max_attempts(n);
    }
    if let Some(k) = a.unique_key {
        job = job.unique_key(k);
    }
    let id = relay.submit(job)?;
    out.submitted(id);
    Ok(())
}

fn lease(relay: &Relay, a: LeaseArgs, out: &Out) -> Result<(), CliError> {
    let mut req = LeaseRequest::new(a.queue)
        .lease_for(a.lease_for)
        .wait(a.wait)
        .max(a.max);
    if let Some(w) = a.worker {
        req = req.worker(w);
    }
    for l in relay.lease(req)? {
        out.leased(&l);
    }
    Ok(())
}
