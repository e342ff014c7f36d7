//! The disk's floor: how fast this directory's disk makes one small write
//! durable. A 100-byte write followed by fsync, a few hundred times, on a
//! scratch file next to the database; the median is the floor latency.

use crate::stats::{micros, percentile};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Floor {
    pub ops_per_sec: f64,
    pub p50_us: f64,
}

const SAMPLES: usize = 300;

pub fn measure(dir: &Path) -> std::io::Result<Floor> {
    let path = dir.join(format!(".relay-bench-floor-{}", std::process::id()));
    let result = measure_at(&path);
    let _ = std::fs::remove_file(&path);
    result
}

fn measure_at(path: &Path) -> std::io::Result<Floor> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)?;
    let block = [0x5au8; 100];
    let mut samples: Vec<Duration> = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES + 20 {
        let t = Instant::now();
        f.seek(SeekFrom::Start(((i % 64) * 100) as u64))?;
        f.write_all(&block)?;
        f.sync_all()?;
        if i >= 20 {
            samples.push(t.elapsed()); // the first writes allocate blocks: warm-up
        }
    }
    samples.sort_unstable();
    let p50 = percentile(&samples, 50.0);
    Ok(Floor {
        ops_per_sec: 1.0 / p50.as_secs_f64().max(1e-9),
        p50_us: micros(p50),
    })
}
