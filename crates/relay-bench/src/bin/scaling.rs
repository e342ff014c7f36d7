//! `relay-scaling`: when does the worker runtime pay for itself?
//!
//! For job bodies of about 1 µs, 10 µs, 100 µs, 1 ms and 10 ms of CPU work
//! it runs the same number of jobs inline (a plain loop: no queue, no pool,
//! the baseline), then through the worker runtime with 1, 2, 4 and 8 slots,
//! on the in-memory store and on a file store. It prints a markdown table
//! (throughput, speed-up over inline, overhead per job), the break-even body
//! size per configuration, and draws the speed-up as an SVG chart.
//!
//! cargo run --release -p relay-bench --bin relay-scaling -- [--chart docs/scaling.svg] [--prefetch N] [--quick]

use relay::worker::Worker;
use relay::{NewJob, Relay};
use std::time::{Duration, Instant};

const BODIES_US: [u64; 5] = [1, 10, 100, 1_000, 10_000];
const THREADS: [usize; 4] = [1, 2, 4, 8];

#[derive(Clone, Copy, PartialEq)]
enum Store {
    Memory,
    File,
}

impl Store {
    fn name(self) -> &'static str {
        match self {
            Store::Memory => "memory",
            Store::File => "file",
        }
    }
}

struct Row {
    body_us: u64,
    store: Store,
    threads: usize,
    jobs: usize,
    jobs_per_sec: f64,
    inline_per_sec: f64,
}

impl Row {
    fn speedup(&self) -> f64 {
        self.jobs_per_sec / self.inline_per_sec
    }

    /// Wall time per job beyond the body's own share, in µs: what the queue
    /// and the pool cost each job (negative when parallelism more than pays).
    fn overhead_us(&self) -> f64 {
        1e6 / self.jobs_per_sec - self.body_us as f64 / self.threads.min(cores()) as f64
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Rounds of `spin` per microsecond on this machine, measured once: job
/// bodies are a fixed amount of CPU work, not a span of wall time (a body
/// that only watched the clock would "finish" while preempted).
static ROUNDS_PER_US: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

fn spin(rounds: u64) {
    let mut x = 0u64;
    for i in 0..rounds {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
        std::hint::black_box(x);
    }
}

fn calibrate() -> f64 {
    let rounds = 2_000_000;
    let best = (0..5)
        .map(|_| {
            let t = Instant::now();
            spin(rounds);
            t.elapsed()
        })
        .min()
        .unwrap_or(Duration::from_millis(1));
    rounds as f64 / (best.as_secs_f64() * 1e6)
}

/// About `d` of CPU work.
fn burn(d: Duration) {
    let per_us = *ROUNDS_PER_US.get_or_init(calibrate);
    spin((d.as_secs_f64() * 1e6 * per_us) as u64);
}

fn jobs_for(body_us: u64, quick: bool) -> usize {
    let target = if quick { 150_000.0 } else { 600_000.0 }; // µs of body per configuration
    ((target / body_us as f64) as usize).clamp(if quick { 50 } else { 100 }, if quick { 1000 } else { 4000 })
}

fn inline(body: Duration, jobs: usize) -> f64 {
    let start = Instant::now();
    for _ in 0..jobs {
        burn(body);
    }
    jobs as f64 / start.elapsed().as_secs_f64()
}

fn through_runtime(
    store: Store,
    body: Duration,
    jobs: usize,
    threads: usize,
    prefetch: usize,
    dir: &std::path::Path,
) -> Result<f64, String> {
    let relay = match store {
        Store::Memory => Relay::in_memory(),
        Store::File => Relay::open(dir.join(format!(
            "scaling-{}-{threads}-{}.db",
            body.as_micros(),
            fastrand::u64(..)
        ))),
    }
    .map_err(|e| e.to_string())?;
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(1000) {
        relay
            .submit_batch(chunk.iter().map(|_| NewJob::new("scale", "burn", Vec::new())).collect())
            .map_err(|e| e.to_string())?;
    }
    let worker = Worker::new(relay.clone(), ["scale"])
        .concurrency(threads)
        .prefetch(prefetch)
        .handle_signals(false)
        .handler("burn", move |_| {
            burn(body);
            Ok(None)
        });
    let stats = worker.stats();
    let stop = worker.shutdown_handle();
    let start = Instant::now();
    let handle = std::thread::spawn(move || worker.run());
    while stats.snapshot().succeeded < jobs as u64 {
        if handle.is_finished() {
            return Err("the worker stopped early".into());
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let took = start.elapsed();
    stop.now();
    handle
        .join()
        .map_err(|_| "the worker panicked".to_owned())?
        .map_err(|e| e.to_string())?;
    Ok(jobs as f64 / took.as_secs_f64())
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let chart = args
        .iter()
        .position(|a| a == "--chart")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let prefetch = args
        .iter()
        .position(|a| a == "--prefetch")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    match run(quick, prefetch, chart.as_deref()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("relay-scaling: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(quick: bool, prefetch: usize, chart: Option<&str>) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a scratch directory: {e}"))?;
    let mut rows = Vec::new();
    for body_us in BODIES_US {
        let body = Duration::from_micros(body_us);
        let jobs = jobs_for(body_us, quick);
        let inline_rate = inline(body, jobs);
        eprintln!("relay-scaling: body {body_us} µs, {jobs} jobs: inline {inline_rate:.0} jobs/s");
        for store in [Store::Memory, Store::File] {
            for threads in THREADS {
                let rate = through_runtime(store, body, jobs, threads, prefetch, dir.path())?;
                eprintln!("relay-scaling:   {} x{threads}: {rate:.0} jobs/s", store.name());
                rows.push(Row {
                    body_us,
                    store,
                    threads,
                    jobs,
                    jobs_per_sec: rate,
                    inline_per_sec: inline_rate,
                });
            }
        }
    }
    print_table(&rows);
    print_break_even(&rows);
    if let Some(path) = chart {
        std::fs::write(path, svg(&rows)).map_err(|e| format!("cannot write {path}: {e}"))?;
        eprintln!("relay-scaling: wrote {path}");
    }
    Ok(())
}

fn print_table(rows: &[Row]) {
    println!("| body | store | slots | jobs | inline jobs/s | runtime jobs/s | speed-up | overhead/job |");
    println!("|-----:|-------|------:|-----:|--------------:|---------------:|---------:|-------------:|");
    for r in rows {
        println!(
            "| {} µs | {} | {} | {} | {:.0} | {:.0} | {:.2}x | {:.0} µs |",
            r.body_us,
            r.store.name(),
            r.threads,
            r.jobs,
            r.inline_per_sec,
            r.jobs_per_sec,
            r.speedup(),
            r.overhead_us()
        );
    }
}

/// The smallest body at which the runtime is at least as fast as inline,
/// per store and slot count (interpolated on a log scale between bodies).
fn print_break_even(rows: &[Row]) {
    println!("\nbreak-even body size (runtime as fast as inline):");
    for store in [Store::Memory, Store::File] {
        for threads in THREADS {
            let series: Vec<&Row> = rows
                .iter()
                .filter(|r| r.store == store && r.threads == threads)
                .collect();
            let mut found = None;
            for w in series.windows(2) {
                let (a, b) = (w[0], w[1]);
                if a.speedup() < 1.0 && b.speedup() >= 1.0 {
                    let (la, lb) = ((a.body_us as f64).ln(), (b.body_us as f64).ln());
                    let (sa, sb) = (a.speedup().ln(), b.speedup().ln());
                    found = Some((la + (0.0 - sa) * (lb - la) / (sb - sa)).exp());
                }
            }
            let first = series.first().map_or(0.0, |r| r.speedup());
            let text = match found {
                Some(us) => format!("~{us:.0} µs"),
                None if first >= 1.0 => "below 1 µs".to_owned(),
                None => "above 10 ms".to_owned(),
            };
            println!("- {} store, {threads} slot(s): {text}", store.name());
        }
    }
}

/// Speed-up over inline against body size (log scale), one line per store
/// and slot count.
fn svg(rows: &[Row]) -> String {
    let (w, h, left, right, top, bottom) = (760.0, 460.0, 70.0, 190.0, 40.0, 60.0);
    let pw = w - left - right;
    let ph = h - top - bottom;
    let max_y = rows.iter().map(Row::speedup).fold(1.0f64, f64::max).ceil().max(2.0);
    let x = |us: u64| left + ((us as f64).log10() / 4.0) * pw;
    let y = |s: f64| top + ph - (s / max_y) * ph;
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="22" font-size="15" text-anchor="middle">Worker runtime speed-up over running jobs inline</text>
"#,
        left + pw / 2.0
    );
    for us in BODIES_US {
        let label = if us >= 1000 {
            format!("{} ms", us / 1000)
        } else {
            format!("{us} µs")
        };
        out += &format!(
            "<line x1=\"{0}\" x2=\"{0}\" y1=\"{top}\" y2=\"{1}\" stroke=\"#ddd\"/><text x=\"{0}\" y=\"{2}\" text-anchor=\"middle\">{label}</text>\n",
            x(us),
            top + ph,
            top + ph + 18.0
        );
    }
    let mut s = 0.0;
    while s <= max_y {
        out += &format!(
            "<line x1=\"{left}\" x2=\"{}\" y1=\"{1}\" y2=\"{1}\" stroke=\"{2}\"/><text x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{s}x</text>\n",
            left + pw,
            y(s),
            if (s - 1.0).abs() < 1e-9 { "#888" } else { "#eee" },
            left - 6.0,
            y(s) + 4.0
        );
        s += if max_y > 8.0 { 2.0 } else { 0.5 };
    }
    out += &format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">CPU work per job (log scale)</text>\n<text x=\"18\" y=\"{}\" transform=\"rotate(-90 18 {})\" text-anchor=\"middle\">throughput / inline throughput</text>\n",
        left + pw / 2.0,
        h - 14.0,
        top + ph / 2.0,
        top + ph / 2.0
    );
    let colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
    let mut legend_y = top + 10.0;
    for store in [Store::Memory, Store::File] {
        for (i, threads) in THREADS.iter().enumerate() {
            let pts: Vec<String> = rows
                .iter()
                .filter(|r| r.store == store && r.threads == *threads)
                .map(|r| format!("{:.1},{:.1}", x(r.body_us), y(r.speedup())))
                .collect();
            let dash = if store == Store::File {
                " stroke-dasharray=\"6 4\""
            } else {
                ""
            };
            out += &format!(
                "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{dash} points=\"{}\"/>\n",
                colors[i],
                pts.join(" ")
            );
            out += &format!(
                "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"2\"{dash}/><text x=\"{4}\" y=\"{5}\">{6}, {threads} slot(s)</text>\n",
                left + pw + 12.0,
                left + pw + 40.0,
                legend_y,
                colors[i],
                left + pw + 46.0,
                legend_y + 4.0,
                store.name()
            );
            legend_y += 20.0;
        }
    }
    out += "</svg>\n";
    out
}
