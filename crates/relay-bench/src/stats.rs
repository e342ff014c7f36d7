//! Latency samples and their percentiles, and the process's peak memory.

use std::time::Duration;

/// Throughput and latency of one phase.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Phase {
    pub jobs_per_sec: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
}

impl Phase {
    pub fn from_samples(mut samples: Vec<Duration>, jobs: u64, wall: Duration) -> Self {
        samples.sort_unstable();
        Phase {
            jobs_per_sec: jobs as f64 / wall.as_secs_f64().max(1e-9),
            p50_us: micros(percentile(&samples, 50.0)),
            p95_us: micros(percentile(&samples, 95.0)),
            p99_us: micros(percentile(&samples, 99.0)),
        }
    }
}

/// The `p`th percentile of sorted samples (nearest rank).
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Peak resident set size of this process (VmHWM), in bytes.
pub fn peak_rss_bytes() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let s: Vec<Duration> = (1..=100).map(Duration::from_micros).collect();
        assert_eq!(percentile(&s, 50.0), Duration::from_micros(50));
        assert_eq!(percentile(&s, 99.0), Duration::from_micros(99));
        assert_eq!(percentile(&s, 100.0), Duration::from_micros(100));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
        assert!(peak_rss_bytes() > 0);
    }
}
