//! `relay-dashload`: what the dashboard costs on a large store.
//!
//! 1. Fills a database to `--jobs` jobs (kept between runs: it only adds
//!    what is missing) in a realistic mix: 4 queues, 8 kinds, one job in
//!    ten tagged, `--scheduled` of them SCHEDULED (due in a week; 0.2 by
//!    default), of the rest one in eight DEAD (with one of three errors)
//!    and the others SUCCEEDED (filled in batches of a thousand, to the
//!    end of the store's ids: a second fill adds after the first's).
//! 2. Starts `relay serve` on it and times each dashboard page and search
//!    over HTTP (`--requests` each after a warm-up): p50, p95, max.
//! 3. Bulk: runs `--load` connections that submit, lease and ack in a
//!    loop, first alone (`--seconds`), then while the dashboard's "retry
//!    all" retries every DEAD job of the store (`--bulk` of them are made
//!    DEAD first), and compares the operations' p99.
//!
//! relay-dashload --database PATH|postgres://... [--jobs 1000000] [--scheduled 0.2]
//!                [--requests 50] [--load 8] [--seconds 10] [--bulk 100000] [--json]

#[path = "../spawn.rs"]
mod spawn;

use relay::{Completion, JobState, LeaseRequest, NewJob, Options, Relay};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

struct Config {
    database: PathBuf,
    jobs: u64,
    scheduled: f64,
    requests: usize,
    load: usize,
    seconds: f64,
    bulk: u64,
    json: bool,
}

fn parse_args() -> Result<Config, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let num = |name: &str, default: f64| {
        get(name).map_or(Ok(default), |v| {
            v.parse::<f64>()
                .map_err(|_| format!("{name} takes a number, got {v:?}"))
        })
    };
    Ok(Config {
        database: get("--database")
            .map(PathBuf::from)
            .ok_or("--database PATH (or a postgres:// URL) is required: kept between runs, filling it takes a while")?,
        jobs: num("--jobs", 1_000_000.0)? as u64,
        scheduled: match num("--scheduled", 0.2)? {
            f if (0.0..=1.0).contains(&f) => f,
            f => return Err(format!("--scheduled takes a fraction from 0 to 1, got {f}")),
        },
        requests: num("--requests", 50.0)? as usize,
        load: num("--load", 8.0)? as usize,
        seconds: num("--seconds", 10.0)?,
        bulk: num("--bulk", 100_000.0)? as u64,
        json: args.iter().any(|a| a == "--json"),
    })
}

const QUEUES: [&str; 4] = ["mail", "reports", "billing", "webhooks"];
const ERRORS: [&str; 3] = [
    "smtp: connection refused\n  at send (mailer.rs:42)",
    "timeout after 30s",
    "http 503 from upstream",
];

/// The store: an SQLite file, or a PostgreSQL database by URL.
fn open(database: &std::path::Path) -> Result<Relay, relay::Error> {
    Relay::connect(&database.to_string_lossy(), Options::default())
}

fn total(relay: &Relay) -> Result<u64, relay::Error> {
    Ok(relay.stats()?.queues.values().flat_map(|q| q.counts.values()).sum())
}

/// Adds jobs until the store has `want`: in each thousand, `scheduled` of
/// them left SCHEDULED (due in a week), the others leased at once and
/// finished (one in eight DEAD, the rest SUCCEEDED). Prints progress to
/// stderr.
fn fill(relay: &Relay, want: u64, scheduled: f64) -> Result<(), relay::Error> {
    let mut have = total(relay)?;
    let start = Instant::now();
    let job = |k: u64| {
        let job = NewJob::new(
            QUEUES[(k % 4) as usize],
            format!("kind{}", k % 8),
            format!("{{\"n\":{k}}}").into_bytes(),
        )
        .max_attempts(1);
        if k % 10 == 3 {
            job.tags(["vip"])
        } else {
            job
        }
    };
    while have < want {
        let batch = (want - have).min(1000);
        let finished = batch - (batch as f64 * scheduled).round() as u64;
        relay.submit_batch((have..have + finished).map(job).collect())?;
        loop {
            let leased = relay.lease(
                LeaseRequest::new(QUEUES)
                    .max(relay::MAX_LEASE_BATCH)
                    .lease_for(Duration::from_secs(600)),
            )?;
            if leased.is_empty() {
                break;
            }
            let done: Vec<Completion> = leased
                .iter()
                .map(|l| match l.id.0 % 8 {
                    0 => Completion::nack_permanent(l.id, l.token, ERRORS[(l.id.0 / 8 % 3) as usize]),
                    _ => Completion::ack(l.id, l.token, None),
                })
                .collect();
            relay.complete_batch(done)?;
        }
        // Due in a week: SCHEDULED, and never leased by the next batch's loop.
        let week = Duration::from_secs(7 * 24 * 3600);
        relay.submit_batch((have + finished..have + batch).map(|k| job(k).delay(week)).collect())?;
        have += batch;
        if have % 50_000 < 1000 {
            eprintln!(
                "filling: {have} of {want} jobs ({:.0} s)",
                start.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .build()
        .into()
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

/// Times `path` `n` times after 3 warm-ups; milliseconds.
fn time_page(url: &str, path: &str, n: usize) -> Result<Vec<f64>, String> {
    let a = agent();
    let mut out = Vec::with_capacity(n);
    for i in 0..n + 3 {
        let t = Instant::now();
        let mut res = a
            .get(&format!("{url}{path}"))
            .call()
            .map_err(|e| format!("{path}: {e}"))?;
        let body = res.body_mut().read_to_string().map_err(|e| e.to_string())?;
        if res.status() != 200 {
            return Err(format!("{path}: {} {}", res.status(), &body[..body.len().min(300)]));
        }
        if i >= 3 {
            out.push(t.elapsed().as_secs_f64() * 1000.0);
        }
    }
    Ok(out)
}

#[derive(Default)]
struct Lat {
    submit: Vec<f64>,
    lease: Vec<f64>,
    ack: Vec<f64>,
}

/// One connection: submit, lease, ack in a loop until `stop`; µs per call.
fn worker(url: &str, stop: &AtomicBool, out: &Mutex<Lat>) {
    let a = agent();
    let mut lat = Lat::default();
    let call = |path: &str, body: Value| -> Option<(f64, Value)> {
        let t = Instant::now();
        let mut res = a.post(&format!("{url}{path}")).send_json(&body).ok()?;
        let v: Value = res.body_mut().read_json().ok()?;
        Some((t.elapsed().as_secs_f64() * 1e6, v))
    };
    while !stop.load(Ordering::Relaxed) {
        if let Some((us, _)) = call("/v1/jobs", json!({"queue": "load", "kind": "k", "payload": {}})) {
            lat.submit.push(us);
        }
        if let Some((us, v)) = call("/v1/lease", json!({"queues": ["load"], "max": 1})) {
            lat.lease.push(us);
            if let Some(j) = v["jobs"].get(0) {
                let path = format!("/v1/jobs/{}/ack", j["id"]);
                if let Some((us, _)) = call(&path, json!({"token": j["token"]})) {
                    lat.ack.push(us);
                }
            }
        }
    }
    let mut o = out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    o.submit.extend(lat.submit);
    o.lease.extend(lat.lease);
    o.ack.extend(lat.ack);
}

/// Runs the load for `seconds`, or while `during` runs (then at least
/// until it ends); returns the latencies and what `during` answered.
fn load(
    cfg: &Config,
    url: &str,
    during: Option<&(dyn Fn() -> Result<Value, String> + Sync)>,
) -> Result<(Lat, Option<Value>, f64), String> {
    let stop = AtomicBool::new(false);
    let out = Mutex::new(Lat::default());
    let start = Instant::now();
    let answer = std::thread::scope(|s| {
        for _ in 0..cfg.load {
            s.spawn(|| worker(url, &stop, &out));
        }
        std::thread::sleep(Duration::from_millis(500));
        let answer = match during {
            Some(f) => Some(f()),
            None => {
                std::thread::sleep(Duration::from_secs_f64(cfg.seconds));
                None
            }
        };
        stop.store(true, Ordering::Relaxed);
        answer
    });
    let elapsed = start.elapsed().as_secs_f64();
    let lat = out.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok((lat, answer.transpose()?, elapsed))
}

fn summary(lat: &mut Lat) -> Value {
    let one = |v: &mut Vec<f64>| json!({"n": v.len(), "p50_us": pct(v, 0.5).round(), "p99_us": pct(v, 0.99).round()});
    json!({"submit": one(&mut lat.submit), "lease": one(&mut lat.lease), "ack": one(&mut lat.ack)})
}

fn run(cfg: &Config) -> Result<Value, String> {
    let relay = open(&cfg.database).map_err(|e| e.to_string())?;
    fill(&relay, cfg.jobs, cfg.scheduled).map_err(|e| e.to_string())?;
    let stats = relay.stats().map_err(|e| e.to_string())?;
    let count = |st: JobState| -> u64 { stats.queues.values().map(|q| q.counts[&st]).sum() };
    let jobs = total(&relay).map_err(|e| e.to_string())?;
    let some_id = relay
        .list(&relay::JobFilter {
            limit: 1,
            ..relay::JobFilter::default()
        })
        .map_err(|e| e.to_string())?
        .first()
        .map_or(1, |j| j.id.0 / 2);
    drop(relay);
    eprintln!(
        "store: {jobs} jobs ({} DEAD, {} SCHEDULED, {} READY); starting relay serve",
        count(JobState::Dead),
        count(JobState::Scheduled),
        count(JobState::Ready)
    );
    let (mut child, url, _pid) = spawn::spawn_server(&cfg.database)?;
    let result = (|| {
        let pages = [
            "/".to_owned(),
            "/jobs".to_owned(),
            "/jobs?queue=mail".to_owned(),
            "/jobs?queue=mail&state=READY".to_owned(),
            "/jobs?state=SCHEDULED".to_owned(),
            "/jobs?state=DEAD".to_owned(),
            "/jobs?queue=billing&state=DEAD&kind=kind2".to_owned(),
            "/jobs?kind=kind5".to_owned(),
            "/jobs?tag=vip".to_owned(),
            "/jobs?state=DEAD&error=smtp".to_owned(),
            "/jobs?since=10m".to_owned(),
            format!("/jobs?before={some_id}"),
            "/dead".to_owned(),
            "/events".to_owned(),
            format!("/jobs/{some_id}"),
        ];
        let mut timings = Vec::new();
        for p in &pages {
            let mut v = time_page(&url, p, cfg.requests)?;
            let row =
                json!({"page": p, "p50_ms": pct(&mut v, 0.5), "p95_ms": pct(&mut v, 0.95), "max_ms": pct(&mut v, 1.0)});
            eprintln!("{row}");
            timings.push(row);
        }
        // Bulk: make `bulk` jobs DEAD in a queue of their own, then retry
        // them all as the dashboard's button does, under load.
        let relay = open(&cfg.database).map_err(|e| e.to_string())?;
        let mut made = 0;
        while made < cfg.bulk {
            let n = (cfg.bulk - made).min(1000);
            relay
                .submit_batch(
                    (0..n)
                        .map(|_| NewJob::new("bulk", "doomed", Vec::new()).max_attempts(1))
                        .collect(),
                )
                .map_err(|e| e.to_string())?;
            loop {
                let l = relay
                    .lease(LeaseRequest::new(["bulk"]).max(relay::MAX_LEASE_BATCH))
                    .map_err(|e| e.to_string())?;
                if l.is_empty() {
                    break;
                }
                relay
                    .complete_batch(
                        l.iter()
                            .map(|l| Completion::nack_permanent(l.id, l.token, "doomed"))
                            .collect(),
                    )
                    .map_err(|e| e.to_string())?;
            }
            made += n;
        }
        drop(relay);
        eprintln!("bulk: {made} DEAD jobs made; load alone for {} s", cfg.seconds);
        let (mut idle, _, idle_s) = load(cfg, &url, None)?;
        let bulk = || -> Result<Value, String> {
            let t = Instant::now();
            let mut res = agent()
                .post(&format!("{url}/v1/jobs/bulk"))
                .send_json(json!({"action": "retry", "filter": {"queue": "bulk", "state": "DEAD"}}))
                .map_err(|e| e.to_string())?;
            let v: Value = res.body_mut().read_json().map_err(|e| e.to_string())?;
            Ok(json!({"answer": v, "seconds": t.elapsed().as_secs_f64()}))
        };
        eprintln!("bulk: the same load while retrying every DEAD job of queue bulk");
        let (mut busy, answer, busy_s) = load(cfg, &url, Some(&bulk))?;
        let (idle, busy) = (summary(&mut idle), summary(&mut busy));
        let ratio = |op: &str| {
            busy[op]["p99_us"].as_f64().unwrap_or(f64::NAN) / idle[op]["p99_us"].as_f64().unwrap_or(f64::NAN)
        };
        Ok(json!({
            "jobs": jobs,
            "pages": timings,
            "bulk": {
                "retried": answer,
                "idle": idle, "idle_seconds": idle_s,
                "during_bulk": busy, "during_seconds": busy_s,
                "p99_ratio": {"submit": ratio("submit"), "lease": ratio("lease"), "ack": ratio("ack")},
            },
        }))
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn main() -> ExitCode {
    let cfg = match parse_args() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("relay-dashload: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&cfg) {
        Ok(v) => {
            if cfg.json {
                println!("{v}");
            } else {
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("relay-dashload: {e}");
            ExitCode::FAILURE
        }
    }
}
