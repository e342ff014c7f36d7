//! `relay work --exec`: each job runs a shell command.
//!
//! The command gets the payload on stdin and `RELAY_JOB_ID`, `RELAY_JOB_KIND`,
//! `RELAY_QUEUE`, `RELAY_ATTEMPT`, `RELAY_LEASE_TOKEN` (to call `relay
//! extend`, `relay release --in` itself), `RELAY_TRACEPARENT` and `TRACEPARENT` (the
//! W3C trace context the job was submitted in, when it has one) and
//! `RELAY_EVENTS_FD=3` in its environment.
//! Exit status 0 acks the job (stdout, up to a limit, becomes the result);
//! any other status nacks it with the tail of stderr. Each line written to
//! file descriptor 3 becomes a `progress` event of the job (the line as JSON
//! when it parses, else as a string); a JSON object of only a number
//! `"progress"` from 0 to 1 and, maybe, a string `"message"` is a progress
//! report, kept on the job (`relay show`, the dashboard), and logged as its
//! own `progress` event. The command runs in a process group of
//! its own: a timeout, a lost lease or the end of the command kills the
//! whole group, so nothing it started outlives it.

use relay::worker::{JobContext, JobError, JobResult};
use relay::LeasedJob;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What running a command needs of its job: the worker runtime's
/// `JobContext` on a database, the remote runner's own over HTTP
/// (`relay work --server`).
pub trait Running: Clone + Send + 'static {
    fn job(&self) -> &LeasedJob;
    /// The lease is gone (or the worker is stopping at once): the command
    /// is stopped.
    fn is_lost(&self) -> bool;
    /// Appends an event to the job's log.
    fn event(&self, kind: &str, data: &serde_json::Value) -> Result<(), String>;
    /// Reports how far along the job is (kept on the job, and an event).
    fn progress(&self, fraction: f64, message: Option<&str>) -> Result<(), String>;
}

impl Running for JobContext {
    fn job(&self) -> &LeasedJob {
        JobContext::job(self)
    }

    fn is_lost(&self) -> bool {
        JobContext::is_lost(self)
    }

    fn event(&self, kind: &str, data: &serde_json::Value) -> Result<(), String> {
        JobContext::event(self, kind, data).map(drop).map_err(|e| e.to_string())
    }

    fn progress(&self, fraction: f64, message: Option<&str>) -> Result<(), String> {
        JobContext::progress(self, fraction, message).map_err(|e| e.to_string())
    }
}

/// How the command runs.
#[derive(Debug, Clone)]
pub struct ExecConfig {
    pub command: String,
    pub timeout: Option<Duration>,
    /// Most stdout bytes kept as the result.
    pub max_result: usize,
}

/// Most stderr bytes kept for the nack's error text (the end of it).
const STDERR_TAIL: usize = 2048;

pub fn run<R: Running>(ctx: &R, cfg: &ExecConfig) -> JobResult {
    let (events_rx, events_tx) =
        std::io::pipe().map_err(|e| JobError::new(format!("cannot create the events pipe: {e}")))?;
    let job = ctx.job();
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(&cfg.command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("RELAY_JOB_ID", job.id.to_string())
        .env("RELAY_JOB_KIND", &job.kind)
        .env("RELAY_QUEUE", &job.queue)
        .env("RELAY_ATTEMPT", job.attempt.to_string())
        .env("RELAY_LEASE_TOKEN", job.token.to_string())
        .env("RELAY_EVENTS_FD", "3")
        .process_group(0);
    // The trace the job was submitted in, so the command can continue it
    // (never one inherited from this process's own environment).
    // TRACEPARENT too (the OpenTelemetry convention for environment
    // carriers): a `relay submit` inside the command continues it.
    match &job.traceparent {
        Some(tp) => cmd.env("RELAY_TRACEPARENT", tp).env("TRACEPARENT", tp),
        None => cmd.env_remove("RELAY_TRACEPARENT").env_remove("TRACEPARENT"),
    };
    let events_fd = events_tx.as_raw_fd();
    // SAFETY: between fork and exec only async-signal-safe calls are made:
    // dup2 places the events pipe on fd 3 without close-on-exec (or, if it is
    // fd 3 already, fcntl clears that flag).
    unsafe {
        cmd.pre_exec(move || {
            let rc = if events_fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(events_fd, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| JobError::new(format!("cannot run /bin/sh -c {:?}: {e}", cfg.command)))?;
    drop(events_tx);
    let pgid = child.id();
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let payload = job.payload.clone();
    let max_result = cfg.max_result;
    let feeder = std::thread::spawn(move || {
        if let Some(mut s) = stdin {
            let _ = s.write_all(&payload); // the command may not read it all
        }
    });
    let out_reader = std::thread::spawn(move || read_capped(stdout, max_result));
    let err_reader = std::thread::spawn(move || read_tail(stderr, STDERR_TAIL));
    let ev_ctx = ctx.clone();
    let ev_reader = std::thread::spawn(move || forward_events(events_rx, &ev_ctx));
    let (waiter_tx, waiter_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = waiter_tx.send(child.wait());
    });
    // The job's own timeout, where it has one.
    let ended = wait(&waiter_rx, ctx, ctx.job().timeout.or(cfg.timeout), pgid);
    // Whatever the command left running dies with it.
    kill_group(pgid);
    let _ = feeder.join();
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    let _ = ev_reader.join();
    outcome(ended, stdout, &stderr)
}

/// How the command ended.
enum Ended {
    Exited(std::io::Result<ExitStatus>),
    TimedOut(Duration),
    LeaseLost,
}

fn wait(
    rx: &std::sync::mpsc::Receiver<std::io::Result<ExitStatus>>,
    ctx: &impl Running,
    timeout: Option<Duration>,
    pgid: u32,
) -> Ended {
    let start = Instant::now();
    loop {
        let mut slice = Duration::from_millis(200);
        if let Some(t) = timeout {
            let left = t.saturating_sub(start.elapsed());
            if left.is_zero() {
                kill_group(pgid);
                let _ = rx.recv();
                return Ended::TimedOut(t);
            }
            slice = slice.min(left);
        }
        match rx.recv_timeout(slice) {
            Ok(status) => return Ended::Exited(status),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Ended::Exited(Err(std::io::Error::other("lost track of the command")))
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if ctx.is_lost() => {
                kill_group(pgid);
                let _ = rx.recv();
                return Ended::LeaseLost;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
}

fn outcome(ended: Ended, stdout: Vec<u8>, stderr: &str) -> JobResult {
    let with_stderr = |msg: String| {
        let tail = stderr.trim();
        if tail.is_empty() {
            msg
        } else {
            format!("{msg}: {tail}")
        }
    };
    match ended {
        Ended::Exited(Ok(s)) if s.success() => Ok(Some(stdout)),
        Ended::Exited(Ok(s)) => match (s.code(), s.signal()) {
            (Some(code), _) => Err(JobError::new(with_stderr(format!("exit status {code}")))),
            (None, Some(sig)) => Err(JobError::new(with_stderr(format!("killed by signal {sig}")))),
            (None, None) => Err(JobError::new(with_stderr("ended abnormally".into()))),
        },
        Ended::Exited(Err(e)) => Err(JobError::new(format!("waiting for the command failed: {e}"))),
        Ended::TimedOut(t) => Err(JobError::new(with_stderr(format!(
            "timed out after {}",
            humantime::format_duration(t)
        )))),
        Ended::LeaseLost => Err(JobError::new("the lease was lost; the command was stopped")),
    }
}

fn kill_group(pgid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pgid) {
        // SAFETY: kill(2) with a negative pid signals that process group;
        // the group is the command's own (process_group(0) above).
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

/// Reads everything, keeping the first `cap` bytes.
fn read_capped(r: Option<impl Read>, cap: usize) -> Vec<u8> {
    let Some(mut r) = r else { return Vec::new() };
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    kept
}

/// Reads everything, keeping the last `cap` bytes as text.
fn read_tail(r: Option<impl Read>, cap: usize) -> String {
    let Some(mut r) = r else { return String::new() };
    let mut all = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        all.extend_from_slice(&buf[..n]);
        if all.len() > 4 * cap {
            all.drain(..all.len() - cap);
        }
    }
    let start = all.len().saturating_sub(cap);
    String::from_utf8_lossy(&all[start..]).into_owned()
}

/// A line that is a progress report: an object of only a number
/// `"progress"` and, maybe, a string `"message"`.
fn report(data: &serde_json::Value) -> Option<(f64, Option<&str>)> {
    let o = data.as_object()?;
    let fraction = o.get("progress")?.as_f64()?;
    let message = match o.get("message") {
        None => None,
        Some(m) => Some(m.as_str()?),
    };
    (o.len() == 1 + usize::from(message.is_some())).then_some((fraction, message))
}

fn forward_events(r: impl Read, ctx: &impl Running) {
    for line in BufReader::new(r).lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let data = serde_json::from_str(&line).unwrap_or(serde_json::Value::String(line));
        // {"progress": 0.5, "message": "..."}: a report kept on the job
        // (which logs its own event). Anything else, and a report the
        // store refuses (a fraction outside 0-1, say a percentage): an
        // event as written, as lines have always been.
        if let Some((fraction, message)) = report(&data) {
            // Only a report the store would refuse is an event instead;
            // any other failure (the lease lost, say) is the report's.
            if relay::Progress::check(fraction, message).is_ok() {
                if let Err(e) = ctx.progress(fraction, message) {
                    eprintln!("relay work: job {}: progress not recorded: {e}", ctx.job().id);
                }
                continue;
            }
        }
        if let Err(e) = ctx.event("progress", &data) {
            eprintln!("relay work: job {}: event not recorded: {e}", ctx.job().id);
        }
    }
}
