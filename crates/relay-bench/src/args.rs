//! Command-line flags.

use clap::Parser;
use std::path::PathBuf;
use std::time::Duration;

/// Measure Relay's durable throughput and latency on this machine's disk.
#[derive(Debug, Clone, Parser)]
#[command(name = "relay-bench", version)]
pub struct Args {
    /// Jobs to submit, then lease and ack.
    #[arg(long, default_value_t = 5000)]
    pub jobs: u64,
    /// Worker groups (each with its own worker name).
    #[arg(long, default_value_t = 4)]
    pub workers: u32,
    /// Threads per worker group: threads = workers x concurrency.
    #[arg(long, default_value_t = 16)]
    pub concurrency: u32,
    /// A new database file (refused if it holds anything). With --matrix, a
    /// directory for the rows' files (default: a temporary directory).
    #[arg(long, value_name = "PATH")]
    pub database: Option<PathBuf>,
    /// Print one JSON object instead of the table row.
    #[arg(long)]
    pub json: bool,
    /// Run the rows 1x1, 1x16, 4x16, 8x16 and 16x16, each on a fresh file.
    #[arg(long)]
    pub matrix: bool,
    /// Skip measuring the disk's write+fsync floor.
    #[arg(long)]
    pub no_floor: bool,
    /// Payload size in bytes.
    #[arg(long, default_value_t = 100)]
    pub payload_bytes: usize,
    /// Lease duration.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    pub lease_for: Duration,
    /// Spread jobs over the four priority classes (default: all priority 1).
    #[arg(long)]
    pub priorities: bool,
    /// Before the run, preload this many READY jobs in the same queue and
    /// classes, scheduled a day ahead, to show that claims do not slow down
    /// as the ready set grows.
    #[arg(long, default_value_t = 0)]
    pub depth: u64,
    /// Fault injection for testing the verifier: leave every Nth leased job
    /// unacknowledged (the run must then fail).
    #[arg(long, hide = true, default_value_t = 0)]
    pub fault_skip_ack_every: u64,
    /// SQLite: commit the old way, each `COMMIT` waiting for its own fsync
    /// (`synchronous=FULL`), instead of splitting the fsync off the writer.
    /// For comparing the two.
    #[arg(long)]
    pub no_split_commit: bool,
    /// Lease and ack from this many Relay processes (each with
    /// workers x concurrency threads) on the same database. Useful with
    /// PostgreSQL; with SQLite they share the file's write lock. A list
    /// (`1,2,4`) runs the submit and lease+ack phases once per count, one
    /// after another on the same database, and reports each count's
    /// lease+ack throughput as a multiple of the first.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub processes: Vec<u32>,
    /// PostgreSQL: also run the textbook queue (one connection per thread,
    /// one transaction per transition, a SKIP LOCKED claim) on the same
    /// server in the same run, and give Relay's throughput as a multiple of
    /// it. (SQLite's baseline is the fsync floor, always measured.)
    #[arg(long)]
    pub baseline: bool,
    /// Before the run, limit the bench queue to this many LEASED jobs at
    /// once (all threads and processes together), to measure what a
    /// limited queue's claim costs (a limit above the thread count never
    /// binds).
    #[arg(long, value_name = "N")]
    pub max_leased: Option<u32>,
    /// Before the run, rate-limit the bench queue's leases: N/PERIOD, e.g.
    /// 1000/s. Lease+ack throughput is then the rate.
    #[arg(long, value_name = "N/PERIOD")]
    pub rate: Option<relay::RateLimit>,
    /// Spread the jobs over N groups (`NewJob::group`, job i in group
    /// `g{i % N}`): the claim then takes groups in turn, and the row
    /// measures what that costs.
    #[arg(long, value_name = "N")]
    pub groups: Option<u32>,
    /// Before the run, limit the bench queue to this many LEASED jobs of
    /// one group at once (with --groups).
    #[arg(long, value_name = "N", requires = "groups")]
    pub max_leased_per_group: Option<u32>,
    /// Before the lease+ack phase, submit one more job (queue
    /// `bench-fan-in`) that depends on every job of the run: each ack then
    /// also counts that job's wait down, and the row measures what a
    /// fan-in costs the acks. At most 10,000 jobs (a job's limit of
    /// dependencies); verified: the waiting job is READY at the end.
    #[arg(long)]
    pub fan_in: bool,
    /// After the lease+ack phase, the workflow mode (issue 40): as many
    /// jobs again (queue `bench-flow`), each leased, given N no-op steps
    /// (`Relay::record_step`, each a fenced write on disk before it
    /// returns) and acked, by the same threads; reports steps/s and its
    /// ratio to the run's lease+ACK jobs/s. Verified: every job SUCCEEDED
    /// with its N steps.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub workflow_steps: u32,
    /// Before the run, park this many jobs (queue `bench-sleep`) asleep
    /// for a day (`Relay::sleep`, WAITING, holding no lease), to show that
    /// jobs waiting in durable execution cost the running queue nothing.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub sleepers: u64,
    /// Before the run, park this many jobs (queue `bench-wait`) waiting a
    /// day for events, each its own key (`bench-event:<id>`, a row of the
    /// waits table each), WAITING and holding no lease.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub waiters: u64,
    /// Internal: run only the lease+ack loop (a child of --processes) and
    /// print its samples as JSON.
    #[arg(long, hide = true)]
    pub lease_ack_child: bool,
}

impl Args {
    /// The bench queue has a limit (`--max-leased`, `--rate`,
    /// `--max-leased-per-group`).
    pub fn limited(&self) -> bool {
        self.max_leased.is_some() || self.rate.is_some() || self.max_leased_per_group.is_some()
    }

    pub fn options(&self) -> relay::Options {
        relay::Options {
            split_commit: !self.no_split_commit,
            ..relay::Options::default()
        }
    }

    /// The first (or only) process count.
    pub fn first_processes(&self) -> u32 {
        self.processes.first().copied().unwrap_or(1)
    }

    pub fn threads(&self) -> u32 {
        self.workers.saturating_mul(self.concurrency)
    }

    pub fn check(&self) -> Result<(), String> {
        if self.jobs == 0 {
            return Err("--jobs must be at least 1".into());
        }
        if self.workers == 0 || self.concurrency == 0 || self.threads() > 4096 {
            return Err("--workers and --concurrency must be at least 1, and their product at most 4096".into());
        }
        if self.processes.is_empty() || self.processes.iter().any(|p| *p == 0 || *p > 64) {
            return Err("--processes takes counts from 1 to 64, e.g. 1,2,4".into());
        }
        if self.fan_in && (self.jobs > 10_000 || self.processes.len() > 1 || self.depth > 0) {
            return Err("--fan-in makes one job wait for every job of one run: at most --jobs 10000, one --processes count, no --depth".into());
        }
        if self.workflow_steps > 1000 {
            return Err("--workflow-steps must be at most 1000 (a job's bound on steps)".into());
        }
        if self.groups == Some(0) {
            return Err("--groups must be at least 1".into());
        }
        if self.payload_bytes > 1 << 20 {
            return Err("--payload-bytes must be at most 1 MiB (Relay's default payload limit)".into());
        }
        Ok(())
    }
}
