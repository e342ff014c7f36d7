//! What one run measured ([`Report`]), and the table: one markdown row per
//! run, ready to paste into BENCHMARKS.md.

use crate::floor::Floor;
use crate::stats::Phase;

/// Everything one run measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub workers: u32,
    pub concurrency: u32,
    pub threads: u32,
    pub jobs: u64,
    pub verified: bool,
    pub submit: Phase,
    pub lease_ack: Phase,
    pub peak_rss_bytes: u64,
    pub floor: Option<Floor>,
    pub depth: u64,
    pub payload_bytes: usize,
    /// PostgreSQL with `--baseline`: the textbook queue, same run.
    #[serde(default)]
    pub baseline: Option<crate::textbook::Baseline>,
    /// PostgreSQL with `--baseline`: the pipelined group-commit writer,
    /// same run.
    #[serde(default)]
    pub group_commit: Option<crate::group_commit::GroupCommit>,
    /// `--processes` with several counts: each count's lease+ack phase.
    #[serde(default)]
    pub by_processes: Vec<(u32, Phase)>,
    /// `--workflow-steps`: the workflow phase.
    #[serde(default)]
    pub workflow: Option<Workflow>,
}

/// The workflow phase: jobs leased, given `steps` no-op steps each, acked.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Workflow {
    /// Jobs run.
    pub count: u64,
    /// Steps per job.
    pub steps: u32,
    /// Per job (lease, its steps, ack): its latencies and jobs/s.
    pub jobs: Phase,
    /// Steps recorded per second of the phase.
    pub steps_per_sec: f64,
    /// `steps_per_sec` over the run's lease+ACK jobs/s.
    pub ratio: f64,
}

/// `--workflow-steps`: the workflow phase's numbers.
pub fn workflow_line(w: &Workflow) {
    println!(
        "workflow: {} jobs of {} no-op steps each: {:.0} steps/s = {:.2}x lease+ACK jobs/s ({:.0} workflows/s, p50 {:.0} µs each)",
        w.count, w.steps, w.steps_per_sec, w.ratio, w.jobs.jobs_per_sec, w.jobs.p50_us
    );
}

pub fn header() -> String {
    [
        "| workers | concurrency | threads | submit jobs/s | submit p50/p95/p99 µs | lease+ACK jobs/s | lease+ACK p50/p95/p99 µs | peak RSS |",
        "|--------:|------------:|--------:|--------------:|----------------------:|-----------------:|-------------------------:|---------:|",
    ]
    .join("\n")
}

fn rate(jobs_per_sec: f64, floor: Option<&Floor>) -> String {
    match floor {
        Some(f) => format!("{jobs_per_sec:.0} ({:.1}x)", jobs_per_sec / f.ops_per_sec),
        None => format!("{jobs_per_sec:.0}"),
    }
}

pub fn row(r: &Report) -> String {
    let f = r.floor.as_ref();
    format!(
        "| {} | {} | {} | {} | {:.0} / {:.0} / {:.0} | {} | {:.0} / {:.0} / {:.0} | {:.1} MiB |",
        r.workers,
        r.concurrency,
        r.threads,
        rate(r.submit.jobs_per_sec, f),
        r.submit.p50_us,
        r.submit.p95_us,
        r.submit.p99_us,
        rate(r.lease_ack.jobs_per_sec, f),
        r.lease_ack.p50_us,
        r.lease_ack.p95_us,
        r.lease_ack.p99_us,
        r.peak_rss_bytes as f64 / (1024.0 * 1024.0),
    )
}

pub fn floor_line(floor: Option<&Floor>) {
    match floor {
        Some(f) => println!(
            "\nfloor: 100-byte write + fsync next to the database: {:.0} ops/s (p50 {:.0} µs); (Nx) = multiple of the floor",
            f.ops_per_sec, f.p50_us
        ),
        None => println!("\nfloor: not measured (--no-floor)"),
    }
}

/// `--baseline`: the textbook queue's numbers and Relay's as multiples.
pub fn baseline_line(r: &Report, b: &crate::textbook::Baseline) {
    let x = |relay: f64, base: f64| relay / base.max(1e-9);
    println!(
        "baseline: the textbook queue on {} connections: submit {:.0} jobs/s (p50 {:.0} µs), lease+ACK {:.0} jobs/s (p50 {:.0} µs); Relay = {:.2}x submit, {:.2}x lease+ACK",
        b.connections,
        b.submit.jobs_per_sec,
        b.submit.p50_us,
        b.lease_ack.jobs_per_sec,
        b.lease_ack.p50_us,
        x(r.submit.jobs_per_sec, b.submit.jobs_per_sec),
        x(r.lease_ack.jobs_per_sec, b.lease_ack.jobs_per_sec),
    );
    println!("  {LEAVES_OUT}");
}

/// What both baselines leave out, printed under their lines: a multiple
/// below 1x is what Relay's guarantees cost, not a lost race.
const LEAVES_OUT: &str = "(the baselines keep a job's state and token only: no event log, counts, throughput history, \
retries, lease expiry, priorities, groups, limits or steps; Relay does all of these in the same commits)";

/// `--baseline`: the group-commit writer's numbers and Relay's as multiples.
pub fn group_commit_line(r: &Report, g: &crate::group_commit::GroupCommit) {
    let x = |relay: f64, base: f64| relay / base.max(1e-9);
    println!(
        "baseline: a pipelined group-commit writer (one connection, {} callers, {} commits): submit {:.0} jobs/s (p50 {:.0} µs), lease+ACK {:.0} jobs/s (p50 {:.0} µs); Relay = {:.2}x submit, {:.2}x lease+ACK",
        g.callers,
        g.commits,
        g.submit.jobs_per_sec,
        g.submit.p50_us,
        g.lease_ack.jobs_per_sec,
        g.lease_ack.p50_us,
        x(r.submit.jobs_per_sec, g.submit.jobs_per_sec),
        x(r.lease_ack.jobs_per_sec, g.lease_ack.jobs_per_sec),
    );
    println!("  {LEAVES_OUT}");
}

/// `--processes 1,2,4`: each count's lease+ack, as a multiple of the first.
pub fn processes_lines(rows: &[(u32, Phase)]) {
    let Some((_, first)) = rows.first() else { return };
    for (p, phase) in rows {
        println!(
            "lease+ACK from {p} process(es): {:.0} jobs/s (p50 {:.0} µs), {:.2}x the first",
            phase.jobs_per_sec,
            phase.p50_us,
            phase.jobs_per_sec / first.jobs_per_sec.max(1e-9)
        );
    }
}
