//! `--baseline` on PostgreSQL: the queue anyone would write by hand, run
//! on the same server in the same run, so Relay's throughput can be given
//! as a multiple of it (the fsync floor plays this part for SQLite).
//!
//! One connection per thread, one transaction per transition (autocommit),
//! a claim that is one statement: `UPDATE .. WHERE id = (SELECT .. FOR
//! UPDATE SKIP LOCKED LIMIT 1)`. Its own schema, `relay_baseline`, made
//! afresh for each run; every job must end DONE or the run fails.

use crate::args::Args;
use crate::stats::Phase;
use postgres::{Client, NoTls};
use std::sync::Barrier;
use std::time::{Duration, Instant};

const SCHEMA: &str = "DROP SCHEMA IF EXISTS relay_baseline CASCADE;
CREATE SCHEMA relay_baseline;
CREATE TABLE relay_baseline.jobs (
    id      BIGSERIAL PRIMARY KEY,
    state   TEXT   NOT NULL,
    token   BIGINT NOT NULL DEFAULT 0,
    payload BYTEA  NOT NULL
);
CREATE INDEX jobs_ready ON relay_baseline.jobs (id) WHERE state = 'READY';";
const INSERT: &str = "INSERT INTO relay_baseline.jobs (state, payload) VALUES ('READY', $1)";
const CLAIM: &str = "UPDATE relay_baseline.jobs SET state = 'LEASED', token = token + 1
WHERE id = (SELECT id FROM relay_baseline.jobs WHERE state = 'READY' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id, token";
const ACK: &str = "UPDATE relay_baseline.jobs SET state = 'DONE' WHERE id = $1 AND token = $2 AND state = 'LEASED'";

/// The textbook queue's two phases.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Baseline {
    /// Connections (one per thread).
    pub connections: u32,
    pub submit: Phase,
    pub lease_ack: Phase,
}

fn connect(url: &str) -> Result<Client, String> {
    Client::connect(url, NoTls).map_err(|e| format!("baseline: cannot connect to PostgreSQL: {e}"))
}

/// Runs the textbook queue with the run's jobs, threads and payload size.
pub fn run(args: &Args, url: &str) -> Result<Baseline, String> {
    let mut admin = connect(url)?;
    admin
        .batch_execute(SCHEMA)
        .map_err(|e| format!("baseline: cannot create its schema relay_baseline: {e}"))?;
    let threads = args.threads();
    let payload = vec![b'x'; args.payload_bytes];
    let submit = on_connections(url, threads, |client, t| {
        let st = client.prepare(INSERT).map_err(|e| e.to_string())?;
        let mut samples = Vec::new();
        let mut i = u64::from(t);
        while i < args.jobs {
            let start = Instant::now();
            client
                .execute(&st, &[&payload])
                .map_err(|e| format!("baseline insert: {e}"))?;
            samples.push(start.elapsed());
            i += u64::from(threads);
        }
        Ok(samples)
    })?;
    let lease_ack = on_connections(url, threads, |client, _| {
        let claim = client.prepare(CLAIM).map_err(|e| e.to_string())?;
        let ack = client.prepare(ACK).map_err(|e| e.to_string())?;
        let mut samples = Vec::new();
        loop {
            let start = Instant::now();
            let Some(row) = client
                .query_opt(&claim, &[])
                .map_err(|e| format!("baseline claim: {e}"))?
            else {
                return Ok(samples);
            };
            let (id, token): (i64, i64) = (
                row.try_get(0).map_err(|e| e.to_string())?,
                row.try_get(1).map_err(|e| e.to_string())?,
            );
            let n = client
                .execute(&ack, &[&id, &token])
                .map_err(|e| format!("baseline ack: {e}"))?;
            if n != 1 {
                return Err(format!(
                    "baseline: the ack of job {id} (token {token}) matched {n} rows"
                ));
            }
            samples.push(start.elapsed());
        }
    })?;
    let done: i64 = admin
        .query_one("SELECT count(*) FROM relay_baseline.jobs WHERE state = 'DONE'", &[])
        .and_then(|r| r.try_get(0))
        .map_err(|e| format!("baseline: cannot verify: {e}"))?;
    if u64::try_from(done).ok() != Some(args.jobs) {
        return Err(format!(
            "baseline: {done} of {} jobs DONE: it does not verify",
            args.jobs
        ));
    }
    admin
        .batch_execute("DROP SCHEMA relay_baseline CASCADE")
        .map_err(|e| format!("baseline: cannot drop its schema: {e}"))?;
    Ok(Baseline {
        connections: threads,
        submit: Phase::from_samples(submit.0, args.jobs, submit.1),
        lease_ack: Phase::from_samples(lease_ack.0, args.jobs, lease_ack.1),
    })
}

type Samples = (Vec<Duration>, Duration);

/// `work` on `threads` connections at once, from a common start.
fn on_connections<F>(url: &str, threads: u32, work: F) -> Result<Samples, String>
where
    F: Fn(&mut Client, u32) -> Result<Vec<Duration>, String> + Sync,
{
    let mut clients = (0..threads).map(|_| connect(url)).collect::<Result<Vec<_>, _>>()?;
    let barrier = Barrier::new(threads as usize + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .iter_mut()
            .enumerate()
            .map(|(t, client)| {
                let (barrier, work) = (&barrier, &work);
                s.spawn(move || {
                    barrier.wait();
                    work(client, u32::try_from(t).unwrap_or(u32::MAX))
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.join().unwrap_or_else(|_| Err("a baseline thread panicked".into()))?);
        }
        Ok((all, start.elapsed()))
    })
}
