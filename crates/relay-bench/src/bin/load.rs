//! `relay-load`: drives a Relay server over HTTP and reports what it costs.
//!
//! For each step of a sweep of connection counts, every connection (a thread
//! with its own keep-alive HTTP connection) loops: submit a job, lease a job,
//! ack it — producers and workers at once. After a warm-up that is not
//! sampled, it times each call for the step's duration and reports
//! throughput and p50/p95/p99 per operation, with the server's CPU and RSS
//! sampled from `/proc/<pid>` over the measured window. A step with no
//! successful call fails the run: the first error is printed verbatim and
//! the exit status is non-zero.
//!
//! relay-load [--url URL --pid PID | --spawn] [--token T] [--connections 1,16,64,256]
//!            [--seconds 5] [--warmup 1] [--json] [--worker [--batch N]]
//!
//! `--worker` drives the worker protocol instead: every connection is a
//! worker that reports the outcomes of the jobs it holds (acks) and leases
//! its next `--batch` jobs (default 1) in one `POST /v1/work` call, while a
//! producer thread keeps the queue stocked with batches of 1,000 jobs. It
//! reports jobs acked per second, the call's latency, and the server's CPU
//! time per job acked (both modes).
//!
//! `--worker --drain` is a plain worker for `scripts/worker-bench`: its
//! connections work (no producer, no steps) until it is killed, after
//! printing `READY`; the first of `--connections` counts. `--queue Q`
//! works on Q instead of `load`.
//!
//! `--spawn` starts `relay serve` itself (the `relay` binary next to this
//! one) on a new database in a temporary directory, and stops it after.

#[path = "../spawn.rs"]
mod spawn;

use serde_json::{json, Value};
use std::process::{Child, Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Config {
    url: String,
    token: Option<String>,
    pid: Option<u32>,
    connections: Vec<usize>,
    seconds: f64,
    warmup: f64,
    json: bool,
    /// `--worker`: jobs leased per call; `None` for the per-job calls.
    worker_batch: Option<u32>,
    /// `--drain`: work until killed.
    drain: bool,
    /// The queue submitted to and leased from (`--queue`, default `load`).
    queue: String,
}

fn parse_args() -> Result<(Config, bool), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let num = |name: &str, default: f64| {
        get(name).map_or(Ok(default), |v| {
            v.parse().map_err(|_| format!("{name} takes a number, got {v:?}"))
        })
    };
    let connections = get("--connections")
        .unwrap_or_else(|| "1,16,64,256".into())
        .split(',')
        .map(|c| {
            c.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=4096).contains(n))
                .ok_or(format!("bad connection count {c:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let spawn = args.iter().any(|a| a == "--spawn");
    let url = get("--url").unwrap_or_default();
    if url.is_empty() && !spawn {
        return Err("give --url URL (and --pid PID to sample the server), or --spawn to start a server".into());
    }
    let pid = get("--pid")
        .map(|p| p.parse().map_err(|_| format!("--pid takes a process id, got {p:?}")))
        .transpose()?;
    let config = Config {
        url,
        token: get("--token"),
        pid,
        connections,
        seconds: num("--seconds", 5.0)?,
        warmup: num("--warmup", 1.0)?,
        json: args.iter().any(|a| a == "--json"),
        worker_batch: if args.iter().any(|a| a == "--worker") {
            let b = num("--batch", 1.0)?;
            if !(1.0..=1000.0).contains(&b) {
                return Err(format!("--batch takes 1-1000, got {b}"));
            }
            Some(b as u32)
        } else {
            None
        },
        drain: args.iter().any(|a| a == "--drain"),
        queue: get("--queue").unwrap_or_else(|| "load".into()),
    };
    Ok((config, spawn))
}

#[derive(Default)]
struct Samples {
    submit: Vec<Duration>,
    lease: Vec<Duration>,
    ack: Vec<Duration>,
    /// `--worker`: each `POST /v1/work` call, and the outcomes it acked.
    work: Vec<Duration>,
    acked: u64,
    errors: u64,
    first_error: Option<String>,
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_unstable();
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1].as_secs_f64() * 1e6
}

/// CPU seconds (user + system) and current RSS of a process.
fn proc_usage(pid: u32) -> Option<(f64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit(')').next()?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some((ticks / hz, rss_kb * 1024))
}

fn connection(cfg: &Config, warm_until: Instant, stop: &AtomicBool, out: &Mutex<Samples>) {
    let client = client(cfg);
    let mut local = Samples::default();
    let payload = serde_json::value::to_raw_value(&"x".repeat(100)).ok();
    let record = |which: usize, start: Instant, r: Result<(), String>, local: &mut Samples| {
        if start < warm_until {
            return;
        }
        match r {
            Ok(_) => [&mut local.submit, &mut local.lease, &mut local.ack][which].push(start.elapsed()),
            Err(e) => {
                local.errors += 1;
                local.first_error.get_or_insert(e);
            }
        }
    };
    let job = relay_client::wire::NewJob {
        queue: cfg.queue.clone(),
        kind: "k".into(),
        payload,
        ..Default::default()
    };
    let lease = relay_client::wire::Lease {
        queues: vec![cfg.queue.clone()],
        worker: Some("load".into()),
        ..Default::default()
    };
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let r = client.submit(&job);
        record(0, t, r.map(drop).map_err(|e| format!("POST /v1/jobs: {e}")), &mut local);
        let t = Instant::now();
        let r = client.lease(&lease);
        let leased = r.as_ref().ok().and_then(|jobs| jobs.first()).map(|j| (j.id, j.token));
        record(
            1,
            t,
            r.map(drop).map_err(|e| format!("POST /v1/lease: {e}")),
            &mut local,
        );
        let Some((id, token)) = leased else {
            continue;
        };
        let t = Instant::now();
        let r = client.ack(id, &relay_client::wire::Ack::new(token, None));
        record(
            2,
            t,
            r.map(drop).map_err(|e| format!("POST /v1/jobs/{id}/ack: {e}")),
            &mut local,
        );
    }
    if let Ok(mut o) = out.lock() {
        o.submit.append(&mut local.submit);
        o.lease.append(&mut local.lease);
        o.ack.append(&mut local.ack);
        o.work.append(&mut local.work);
        o.acked += local.acked;
        o.errors += local.errors;
        if o.first_error.is_none() {
            o.first_error = local.first_error;
        }
    }
}

fn client(cfg: &Config) -> relay_client::Client {
    let client = relay_client::Client::new(&cfg.url).timeout(Duration::from_secs(30));
    match &cfg.token {
        Some(t) => client.with_token(t.clone()),
        None => client,
    }
}

/// Jobs submitted and acked by every connection of a `--worker` step: the
/// producer keeps the difference (the queue's depth) stocked.
#[derive(Default)]
struct Stock {
    submitted: AtomicU64,
    acked: AtomicU64,
}

/// Keeps at least 20,000 jobs ready, submitting 1,000 per call.
fn produce(cfg: &Config, stop: &AtomicBool, stock: &Stock, out: &Mutex<Samples>) {
    let client = client(cfg);
    let job = relay_client::wire::NewJob {
        queue: cfg.queue.clone(),
        kind: "k".into(),
        ..Default::default()
    };
    while !stop.load(Ordering::Relaxed) {
        let submitted = stock.submitted.load(Ordering::Relaxed);
        if submitted.saturating_sub(stock.acked.load(Ordering::Relaxed)) >= 20_000 {
            std::thread::sleep(Duration::from_millis(2));
            continue;
        }
        match client.submit_batch(vec![job.clone(); 1000]) {
            Ok(ids) => {
                stock.submitted.fetch_add(ids.len() as u64, Ordering::Relaxed);
            }
            Err(e) => {
                if let Ok(mut o) = out.lock() {
                    o.errors += 1;
                    o.first_error.get_or_insert(format!("POST /v1/jobs/batch: {e}"));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// A worker: acks what it holds and leases its next `batch` jobs in one
/// call, in a loop.
fn work_connection(
    cfg: &Config,
    batch: u32,
    warm_until: Instant,
    stop: &AtomicBool,
    stock: &Stock,
    out: &Mutex<Samples>,
) {
    use relay_client::wire;
    let client = client(cfg);
    let mut local = Samples::default();
    let lease = wire::Lease {
        queues: vec![cfg.queue.clone()],
        worker: Some("load".into()),
        max: Some(batch),
        wait_ms: Some(1000),
        ..Default::default()
    };
    let mut held: Vec<wire::Outcome> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let work = wire::Work {
            outcomes: std::mem::take(&mut held),
            lease: Some(lease.clone()),
        };
        let t = Instant::now();
        match client.work(&work) {
            Ok(done) => {
                let acked = done.outcomes.iter().filter(|o| o.error.is_none()).count() as u64;
                stock.acked.fetch_add(acked, Ordering::Relaxed);
                if t >= warm_until {
                    local.work.push(t.elapsed());
                    local.acked += acked;
                }
                if let Some(e) = done.outcomes.iter().find_map(|o| o.error.as_ref()) {
                    local.errors += 1;
                    local
                        .first_error
                        .get_or_insert(format!("an ack was refused: {}: {}", e.code, e.message));
                }
                held = done
                    .jobs
                    .iter()
                    .map(|j| wire::Outcome::ack(j.id, j.token, None))
                    .collect();
            }
            Err(e) => {
                local.errors += 1;
                local.first_error.get_or_insert(format!("POST /v1/work: {e}"));
                held = work.outcomes; // sent again: a repeated ack is answered Ok
            }
        }
    }
    if let Ok(mut o) = out.lock() {
        o.work.append(&mut local.work);
        o.acked += local.acked;
        o.errors += local.errors;
        if o.first_error.is_none() {
            o.first_error = local.first_error;
        }
    }
}

fn step(cfg: &Config, conns: usize) -> Result<Value, String> {
    let samples = Mutex::new(Samples::default());
    let stop = AtomicBool::new(false);
    let warm_until = Instant::now() + Duration::from_secs_f64(cfg.warmup);
    let mut cpu = (0.0, 0.0);
    let mut peak_rss = 0u64;
    let stock = Stock::default();
    std::thread::scope(|s| {
        match cfg.worker_batch {
            None => {
                for _ in 0..conns {
                    s.spawn(|| connection(cfg, warm_until, &stop, &samples));
                }
            }
            Some(batch) => {
                s.spawn(|| produce(cfg, &stop, &stock, &samples));
                let (stop, stock, samples) = (&stop, &stock, &samples);
                for _ in 0..conns {
                    s.spawn(move || work_connection(cfg, batch, warm_until, stop, stock, samples));
                }
            }
        }
        std::thread::sleep(warm_until.saturating_duration_since(Instant::now()));
        let start = cfg.pid.and_then(proc_usage);
        let end_at = Instant::now() + Duration::from_secs_f64(cfg.seconds);
        while Instant::now() < end_at {
            std::thread::sleep(Duration::from_millis(100));
            if let Some((_, rss)) = cfg.pid.and_then(proc_usage) {
                peak_rss = peak_rss.max(rss);
            }
        }
        let end = cfg.pid.and_then(proc_usage);
        if let (Some(a), Some(b)) = (start, end) {
            cpu = (b.0 - a.0, cfg.seconds);
        }
        stop.store(true, Ordering::Relaxed);
    });
    let mut s = samples
        .into_inner()
        .map_err(|_| "a connection thread panicked".to_owned())?;
    let ok = s.submit.len() + s.lease.len() + s.ack.len() + s.work.len();
    if ok == 0 {
        return Err(format!(
            "no call succeeded with {conns} connection(s); first error: {}",
            s.first_error.unwrap_or_else(|| "none".into())
        ));
    }
    let secs = cfg.seconds;
    let op = |v: &mut Vec<Duration>| json!({"per_sec": v.len() as f64 / secs, "p50_us": pct(v, 50.0), "p95_us": pct(v, 95.0), "p99_us": pct(v, 99.0)});
    // Jobs finished in the window: acks of either protocol.
    let jobs = s.acked + s.ack.len() as u64;
    let cpu_us_per_job = cfg.pid.filter(|_| jobs > 0).map(|_| cpu.0 * 1e6 / jobs as f64);
    Ok(json!({
        "mode": if cfg.worker_batch.is_some() { "worker" } else { "per-job" },
        "batch": cfg.worker_batch,
        "jobs_acked_per_sec": jobs as f64 / secs,
        "work": op(&mut s.work),
        "server_cpu_us_per_job": cpu_us_per_job,
        "connections": conns,
        "seconds": secs,
        "submit": op(&mut s.submit),
        "lease": op(&mut s.lease),
        "ack": op(&mut s.ack),
        "errors": s.errors,
        "first_error": s.first_error,
        "server_cpu_percent": cfg.pid.map(|_| cpu.0 / cpu.1.max(1e-9) * 100.0),
        "server_peak_rss_bytes": cfg.pid.map(|_| peak_rss),
    }))
}

fn spawn_server() -> Result<(Child, String, u32, tempfile::TempDir), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (child, url, pid) = spawn::spawn_server(&dir.path().join("load.db"))?;
    Ok((child, url, pid, dir))
}

/// Works as `--connections` workers until killed (`scripts/worker-bench`).
fn drain(cfg: &Config, batch: u32) -> ExitCode {
    let (stop, stock, samples) = (AtomicBool::new(false), Stock::default(), Mutex::new(Samples::default()));
    let conns = cfg.connections.first().copied().unwrap_or(1);
    let (stop, stock, samples) = (&stop, &stock, &samples);
    std::thread::scope(|s| {
        for _ in 0..conns {
            // Warm "forever": a worker that runs until killed keeps no samples.
            let never = Instant::now() + Duration::from_secs(10 * 365 * 86_400);
            s.spawn(move || work_connection(cfg, batch, never, stop, stock, samples));
        }
        println!("READY");
    });
    ExitCode::SUCCESS
}

/// The table's head for either mode.
fn header(worker: bool) -> &'static str {
    if worker {
        "| connections | jobs per call | jobs acked/s | call p50/p95/p99 µs | server CPU | server CPU per job | server RSS |\n|---:|---:|---:|---:|---:|---:|---:|"
    } else {
        "| connections | submit/s | submit p50/p95/p99 µs | lease/s | lease p50/p95/p99 µs | ack/s | ack p50/p95/p99 µs | server CPU | server CPU per job | server RSS |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    }
}

/// One step's row of the table.
fn row(conns: usize, v: &Value) -> String {
    let o = |k: &str| {
        format!(
            "{:.0} | {:.0} / {:.0} / {:.0}",
            v[k]["per_sec"].as_f64().unwrap_or(0.0),
            v[k]["p50_us"].as_f64().unwrap_or(0.0),
            v[k]["p95_us"].as_f64().unwrap_or(0.0),
            v[k]["p99_us"].as_f64().unwrap_or(0.0)
        )
    };
    let cpu = v["server_cpu_percent"]
        .as_f64()
        .map_or("-".into(), |c| format!("{c:.0}%"));
    let per_job = v["server_cpu_us_per_job"]
        .as_f64()
        .map_or("-".into(), |c| format!("{c:.0} µs"));
    let rss = v["server_peak_rss_bytes"]
        .as_u64()
        .map_or("-".into(), |r| format!("{:.1} MiB", r as f64 / 1048576.0));
    if v["mode"] == "worker" {
        let w = &v["work"];
        format!(
            "| {conns} | {} | {:.0} | {:.0} / {:.0} / {:.0} | {cpu} | {per_job} | {rss} |",
            v["batch"],
            v["jobs_acked_per_sec"].as_f64().unwrap_or(0.0),
            w["p50_us"].as_f64().unwrap_or(0.0),
            w["p95_us"].as_f64().unwrap_or(0.0),
            w["p99_us"].as_f64().unwrap_or(0.0)
        )
    } else {
        format!(
            "| {conns} | {} | {} | {} | {cpu} | {per_job} | {rss} |",
            o("submit"),
            o("lease"),
            o("ack")
        )
    }
}

fn main() -> ExitCode {
    let (mut cfg, spawn) = match parse_args() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("relay-load: {e}");
            return ExitCode::from(2);
        }
    };
    let mut server = None;
    if spawn {
        match spawn_server() {
            Ok((child, url, pid, dir)) => {
                cfg.url = url;
                cfg.pid = Some(pid);
                server = Some((child, dir));
            }
            Err(e) => {
                eprintln!("relay-load: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    match (cfg.drain, cfg.worker_batch) {
        (true, Some(batch)) => return drain(&cfg, batch),
        (true, None) => {
            eprintln!("relay-load: --drain goes with --worker");
            return ExitCode::from(2);
        }
        _ => {}
    }
    let mut code = ExitCode::SUCCESS;
    if !cfg.json {
        println!("{}", header(cfg.worker_batch.is_some()));
    }
    for conns in cfg.connections.clone() {
        eprintln!(
            "relay-load: {conns} connection(s), {}s warm-up, {}s measured",
            cfg.warmup, cfg.seconds
        );
        match step(&cfg, conns) {
            Ok(v) if cfg.json => println!("{v}"),
            Ok(v) => println!("{}", row(conns, &v)),
            Err(e) => {
                eprintln!("relay-load: {e}");
                code = ExitCode::FAILURE;
                break;
            }
        }
    }
    if let Some((mut child, _dir)) = server {
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let _ = child.wait();
    }
    code
}
