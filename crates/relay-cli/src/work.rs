//! `relay work`: the worker runtime with `--exec` as the handler of every
//! kind: a live progress line on a terminal, one line per job outcome on
//! stderr otherwise (and a summary at exit), JSON lines with `--json`.

use crate::args::WorkArgs;
use crate::error::CliError;
use crate::exec::{self, ExecConfig};
use crate::http_backend::HttpBackend;
use crate::output::Out;
use crate::target::Remote;
use relay::worker::{Finished, Outage, Outcome, Worker, WorkerStats};
use relay::{Error, Relay};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `relay work` on a file (or a PostgreSQL URL): the worker runtime on
/// this process's store.
pub fn run(relay: Relay, a: WorkArgs, out: &Out) -> Result<(), CliError> {
    let limit = relay.options().limits.max_payload_bytes;
    let worker = Worker::new(relay, a.queue.clone()).version(format!("relay work {}", env!("CARGO_PKG_VERSION")));
    drive(worker, a, limit, out)
}

/// `relay --server URL work`: the same runtime over the server's HTTP API
/// (leases by long-poll, answered at once by a submit on the server); a
/// server that does not answer is retried with back-off (up to 30 s), said
/// once per outage; a refused token or an answer it cannot read stops it.
pub fn run_remote(remote: Remote, a: WorkArgs, out: &Out) -> Result<(), CliError> {
    let max_result = a.max_result;
    let worker = Worker::over(HttpBackend::new(remote), a.queue.clone())
        .version(format!("relay work {} (over HTTP)", env!("CARGO_PKG_VERSION")))
        .poll(LONG_POLL)
        .on_outage(|o| match o {
            Outage::Began(e) => eprintln!("relay work: {e}; retrying with back-off until it answers"),
            Outage::Ended => eprintln!("relay work: the server answers again"),
            _ => {}
        });
    drive(worker, a, max_result, out)
}

/// How long one lease call waits on the server for a job.
const LONG_POLL: Duration = Duration::from_secs(2);

/// Runs `worker` with `--exec` as the handler of every kind, its output as
/// the flags say, until it is stopped.
fn drive(worker: Worker, a: WorkArgs, result_limit: usize, out: &Out) -> Result<(), CliError> {
    let cfg = ExecConfig {
        command: a.exec.clone(),
        timeout: a.timeout,
        max_result: a.max_result.min(result_limit),
    };
    let mut worker = worker
        .concurrency(a.concurrency)
        .lease_for(a.lease_for)
        .grace(a.grace)
        .beat_every(a.beat_every)
        .fallback_handler(move |ctx| exec::run(ctx, &cfg));
    if let Some(w) = a.worker {
        worker = worker.name(w);
    }
    let tty = std::io::stderr().is_terminal();
    if out.is_json() {
        worker = worker.on_finish(|f| println!("{}", finished_json(f)));
    } else if !tty {
        // No terminal for a live line (a log file, systemd, a pipe): one
        // line per job outcome instead.
        worker = worker.on_finish(|f| eprintln!("relay work: {}", finished_text(f)));
    }
    let stats = worker.stats();
    let done = Arc::new(AtomicBool::new(false));
    let progress = tty.then(|| {
        let (stats, done) = (Arc::clone(&stats), Arc::clone(&done));
        std::thread::spawn(move || progress_line(&stats, &done))
    });
    let result = worker.run();
    done.store(true, Ordering::Relaxed);
    if let Some(p) = progress {
        let _ = p.join();
    }
    // Said also when an error stopped it (what it did before), not when
    // its settings were refused (it never ran).
    let s = stats.snapshot();
    let ran = !matches!(result, Err(Error::InvalidInput(_)));
    if ran && !out.is_json() {
        eprintln!(
            "relay work: stopped: {} succeeded, {} failed, {} dead, {} released",
            s.succeeded, s.failed, s.dead, s.released
        );
    }
    result.map(drop).map_err(|e| match &e {
        // The server's refusal, as the CLI tells it (a 401 names --auth).
        Error::Backend { source, .. } => source.downcast_ref::<CliError>().cloned().unwrap_or(CliError::Relay(e)),
        _ => CliError::Relay(e),
    })
}

pub(crate) fn finished_text(f: &Finished) -> String {
    let what = match &f.outcome {
        Outcome::Succeeded => "succeeded".to_owned(),
        Outcome::Failed { error } => format!("failed (will retry): {}", one_line(error)),
        Outcome::Dead { error } => format!("dead: {}", one_line(error)),
        Outcome::Released => "released".to_owned(),
        Outcome::Snoozed { delay } => format!("snoozed for {}", humantime::format_duration(*delay)),
        Outcome::Slept { until: Some(until) } => format!("asleep until {}", until.to_rfc3339()),
        Outcome::Slept { until: None } => "awaiting another job".to_owned(),
        Outcome::Lost => "lost its lease (another worker may run it)".to_owned(),
    };
    format!(
        "job {} ({}) attempt {} {what} in {:.0} ms",
        f.id,
        f.kind,
        f.attempt,
        f.took.as_secs_f64() * 1000.0
    )
}

/// An error's text on one line, cut to a readable length.
fn one_line(error: &str) -> String {
    let flat: String = error.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &flat[..i]),
        None => flat,
    }
}

pub(crate) fn finished_json(f: &Finished) -> serde_json::Value {
    let (outcome, error) = match &f.outcome {
        Outcome::Succeeded => ("succeeded", None),
        Outcome::Failed { error } => ("failed", Some(error.as_str())),
        Outcome::Dead { error } => ("dead", Some(error.as_str())),
        Outcome::Released => ("released", None),
        Outcome::Snoozed { .. } => ("snoozed", None),
        Outcome::Slept { .. } => ("slept", None),
        Outcome::Lost => ("lost", None),
    };
    serde_json::json!({
        "id": f.id, "kind": f.kind, "attempt": f.attempt, "outcome": outcome, "error": error,
        "took_ms": f.took.as_secs_f64() * 1000.0,
    })
}

/// One line on the terminal, rewritten in place: done, failed, running,
/// and the rate over the last few seconds.
fn progress_line(stats: &WorkerStats, done: &AtomicBool) {
    let mut window: std::collections::VecDeque<(Instant, u64)> = std::collections::VecDeque::new();
    while !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(250));
        let s = stats.snapshot();
        let finished = s.succeeded + s.failed + s.dead;
        let now = Instant::now();
        window.push_back((now, finished));
        while window.len() > 2 && now.duration_since(window[0].0) > Duration::from_secs(3) {
            window.pop_front();
        }
        let (t0, f0) = window[0];
        let rate = (finished - f0) as f64 / now.duration_since(t0).as_secs_f64().max(0.25);
        let mut e = std::io::stderr().lock();
        let _ = write!(
            e,
            "\r\x1b[Krelay work: {} done, {} failed, {} dead, {} running, {rate:.1} jobs/s",
            s.succeeded, s.failed, s.dead, s.in_flight
        );
        let _ = e.flush();
    }
    let _ = write!(std::io::stderr(), "\r\x1b[K");
}
