//! Does a claim cost more when more jobs wait? Preloads N ready jobs (over
//! all four priority classes), then times single-job leases, each a durable
//! commit, and prints the median per depth and the ratio.
//!
//! cargo run --release -p relay --example claim_depth -- [DEPTH...] [--memory]
//!
//! Default depths: 100 and 1000000. `--memory` uses the in-memory store,
//! which removes the fsync and leaves the claim's own cost.

use relay::{LeaseRequest, NewJob, Relay};
use std::time::{Duration, Instant};

const CLAIMS: usize = 2000;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let memory = args.iter().any(|a| a == "--memory");
    let mut depths: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if depths.is_empty() {
        depths = vec![100, 1_000_000];
    }
    let dir = tempfile::tempdir()?;
    let mut rows = Vec::new();
    for depth in depths {
        let relay = if memory {
            Relay::in_memory()?
        } else {
            Relay::open(dir.path().join(format!("depth-{depth}.db")))?
        };
        preload(&relay, depth + CLAIMS)?;
        let p50 = time_claims(&relay)?;
        println!("depth {depth:>9}: claim p50 {:>7.1} us", p50.as_secs_f64() * 1e6);
        rows.push((depth, p50));
    }
    if let (Some(first), Some(last)) = (rows.first(), rows.last()) {
        let ratio = last.1.as_secs_f64() / first.1.as_secs_f64();
        println!("ratio p50(depth {}) / p50(depth {}) = {ratio:.2}", last.0, first.0);
    }
    Ok(())
}

fn preload(relay: &Relay, n: usize) -> relay::Result<()> {
    let start = Instant::now();
    let mut done = 0;
    while done < n {
        let chunk = (n - done).min(10_000);
        let jobs = (0..chunk)
            .map(|i| NewJob::new("bench", "k", b"{}".to_vec()).priority(((done + i) % 4) as u8))
            .collect();
        relay.submit_batch(jobs)?;
        done += chunk;
        if done % 100_000 == 0 {
            eprintln!("  preloaded {done}/{n} ({:.0} s)", start.elapsed().as_secs_f64());
        }
    }
    Ok(())
}

fn time_claims(relay: &Relay) -> relay::Result<Duration> {
    let mut samples = Vec::with_capacity(CLAIMS);
    for _ in 0..CLAIMS {
        let t = Instant::now();
        let got = relay.lease(LeaseRequest::new(["bench"]))?;
        samples.push(t.elapsed());
        assert_eq!(got.len(), 1);
    }
    samples.sort();
    Ok(samples[samples.len() / 2])
}
