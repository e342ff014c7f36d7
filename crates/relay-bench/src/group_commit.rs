//! `--baseline` on PostgreSQL, second yardstick: the fastest writer one
//! would write by hand with Relay's durability. One connection and one
//! writer thread; callers hand it their requests and wait; the writer
//! takes every request waiting, sends the batch's statements in one
//! flight (`BEGIN`, one claim for all the batch's leases, one update for
//! its acks, one insert for its submits, `COMMIT`: pipelined, one round
//! trip) and answers the callers once the `COMMIT` returned (one WAL flush
//! per batch, `synchronous_commit` on). No events, counts, retries,
//! leases that expire or fencing beyond the token: what Relay does beyond
//! this is what its multiple of it pays for. Its own schema,
//! `relay_baseline_gc`, made afresh for each run; every job must end DONE.

use crate::args::Args;
use crate::stats::Phase;
use relay::tokio_postgres::{self, NoTls};
use std::sync::mpsc;
use std::sync::Barrier;
use std::time::{Duration, Instant};

const SCHEMA: &str = "DROP SCHEMA IF EXISTS relay_baseline_gc CASCADE;
CREATE SCHEMA relay_baseline_gc;
CREATE TABLE relay_baseline_gc.jobs (
    id      BIGSERIAL PRIMARY KEY,
    state   TEXT   NOT NULL,
    token   BIGINT NOT NULL DEFAULT 0,
    payload BYTEA  NOT NULL
);
CREATE INDEX jobs_ready ON relay_baseline_gc.jobs (id) WHERE state = 'READY';";
const INSERT: &str =
    "INSERT INTO relay_baseline_gc.jobs (state, payload) SELECT 'READY', p FROM unnest($1::BYTEA[]) AS p";
const CLAIM: &str = "UPDATE relay_baseline_gc.jobs SET state = 'LEASED', token = token + 1
WHERE id IN (SELECT id FROM relay_baseline_gc.jobs WHERE state = 'READY' ORDER BY id LIMIT $1 FOR UPDATE)
RETURNING id, token";
const ACK: &str = "UPDATE relay_baseline_gc.jobs AS j SET state = 'DONE'
FROM unnest($1::BIGINT[], $2::BIGINT[]) AS a(id, token)
WHERE j.id = a.id AND j.token = a.token AND j.state = 'LEASED'
RETURNING j.id";

/// The most requests one batch takes.
const MAX_BATCH: usize = 1024;

enum Request {
    Submit(mpsc::SyncSender<Result<(), String>>),
    Lease(mpsc::SyncSender<Result<Option<(i64, i64)>, String>>),
    Ack(i64, i64, mpsc::SyncSender<Result<(), String>>),
}

/// The group-commit writer's two phases, and its batches.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct GroupCommit {
    /// Caller threads (the writer has one connection).
    pub callers: u32,
    pub submit: Phase,
    pub lease_ack: Phase,
    /// Transactions committed in both phases (each one WAL flush).
    pub commits: u64,
}

/// Runs the writer and `args.threads()` callers with the run's jobs.
pub fn run(args: &Args, url: &str) -> Result<GroupCommit, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("group-commit baseline: cannot start a runtime: {e}"))?;
    let connect = || {
        rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(url, NoTls)
                .await
                .map_err(|e| format!("group-commit baseline: cannot connect to PostgreSQL: {e}"))?;
            Ok::<_, String>((client, conn))
        })
    };
    let (client, conn) = connect()?;
    rt.spawn(conn);
    rt.block_on(client.batch_execute(SCHEMA))
        .map_err(|e| format!("group-commit baseline: cannot create its schema relay_baseline_gc: {e}"))?;
    let (tx, rx) = mpsc::channel::<Request>();
    let threads = args.threads();
    let payload = vec![b'x'; args.payload_bytes];
    let (outcome, commits) = std::thread::scope(|s| {
        let writer = s.spawn(|| write_loop(&rt, &client, &payload, rx));
        let submit = on_threads(threads, &tx, |tx, t| {
            let mut samples = Vec::new();
            let mut i = u64::from(t);
            while i < args.jobs {
                let start = Instant::now();
                let (answer, answered) = mpsc::sync_channel(1);
                tx.send(Request::Submit(answer)).map_err(|_| "the writer stopped")?;
                answered.recv().map_err(|_| "the writer stopped")??;
                samples.push(start.elapsed());
                i += u64::from(threads);
            }
            Ok(samples)
        });
        let lease_ack = submit.and_then(|submit| {
            let lease_ack = on_threads(threads, &tx, |tx, _| {
                let mut samples = Vec::new();
                loop {
                    let start = Instant::now();
                    let (answer, answered) = mpsc::sync_channel(1);
                    tx.send(Request::Lease(answer)).map_err(|_| "the writer stopped")?;
                    let Some((id, token)) = answered.recv().map_err(|_| "the writer stopped")?? else {
                        return Ok(samples);
                    };
                    let (answer, answered) = mpsc::sync_channel(1);
                    tx.send(Request::Ack(id, token, answer))
                        .map_err(|_| "the writer stopped")?;
                    answered.recv().map_err(|_| "the writer stopped")??;
                    samples.push(start.elapsed());
                }
            });
            lease_ack.map(|l| (submit, l))
        });
        drop(tx);
        let commits = writer.join().unwrap_or(Err("the group-commit writer panicked".into()));
        (lease_ack, commits)
    });
    let ((submit, lease_ack), commits) = (outcome?, commits?);
    let done: i64 = rt
        .block_on(client.query_one("SELECT count(*) FROM relay_baseline_gc.jobs WHERE state = 'DONE'", &[]))
        .and_then(|r| r.try_get(0))
        .map_err(|e| format!("group-commit baseline: cannot verify: {e}"))?;
    if u64::try_from(done).ok() != Some(args.jobs) {
        return Err(format!(
            "group-commit baseline: {done} of {} jobs DONE: it does not verify",
            args.jobs
        ));
    }
    rt.block_on(client.batch_execute("DROP SCHEMA relay_baseline_gc CASCADE"))
        .map_err(|e| format!("group-commit baseline: cannot drop its schema: {e}"))?;
    Ok(GroupCommit {
        callers: threads,
        submit: Phase::from_samples(submit.0, args.jobs, submit.1),
        lease_ack: Phase::from_samples(lease_ack.0, args.jobs, lease_ack.1),
        commits,
    })
}

/// The writer: a batch of every request waiting (up to [`MAX_BATCH`]),
/// its statements in one flight, its callers answered after the COMMIT.
/// Returns the commits made.
fn write_loop(
    rt: &tokio::runtime::Runtime,
    client: &tokio_postgres::Client,
    payload: &[u8],
    rx: mpsc::Receiver<Request>,
) -> Result<u64, String> {
    let mut commits = 0;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let submits = batch.iter().filter(|r| matches!(r, Request::Submit(_))).count();
        let leases = batch.iter().filter(|r| matches!(r, Request::Lease(_))).count();
        let (ids, tokens): (Vec<i64>, Vec<i64>) = batch
            .iter()
            .filter_map(|r| match r {
                Request::Ack(id, token, _) => Some((*id, *token)),
                _ => None,
            })
            .unzip();
        let payloads: Vec<&[u8]> = vec![payload; submits];
        let limit = i64::try_from(leases).unwrap_or(i64::MAX);
        let acks = ids.len();
        // Polled together, in this order: sent in one flight.
        let flight = async {
            let begin = client.batch_execute("BEGIN");
            let insert = async {
                if submits > 0 {
                    client.execute(INSERT, &[&payloads]).await.map(|_| ())
                } else {
                    Ok(())
                }
            };
            let claim = async {
                if leases > 0 {
                    client.query(CLAIM, &[&limit]).await
                } else {
                    Ok(Vec::new())
                }
            };
            let ack = async {
                if acks > 0 {
                    client.query(ACK, &[&ids, &tokens]).await.map(|rows| rows.len())
                } else {
                    Ok(0)
                }
            };
            let commit = client.batch_execute("COMMIT");
            tokio::join!(begin, insert, claim, ack, commit)
        };
        let (begin, insert, claim, ack, commit) = rt.block_on(flight);
        let failed = [begin.err(), insert.err(), commit.err()].into_iter().flatten().next();
        let outcome = match (failed, claim, ack) {
            (Some(e), _, _) => Err(e.to_string()),
            (None, Err(e), _) | (None, _, Err(e)) => Err(e.to_string()),
            (None, Ok(claimed), Ok(acked)) if acked == acks => Ok(claimed),
            (None, Ok(_), Ok(acked)) => Err(format!("{acked} of {acks} acks matched their job")),
        };
        commits += 1;
        let mut claimed = match &outcome {
            Ok(rows) => rows
                .iter()
                .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
                .collect::<Result<Vec<(i64, i64)>, tokio_postgres::Error>>()
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.clone()),
        }
        .map(Vec::into_iter);
        for r in batch {
            let err = |e: &String| format!("group-commit baseline: {e}");
            match r {
                Request::Submit(a) | Request::Ack(_, _, a) => {
                    let _ = a.send(claimed.as_ref().map(drop).map_err(err));
                }
                Request::Lease(a) => {
                    let _ = a.send(match &mut claimed {
                        Ok(rows) => Ok(rows.next()),
                        Err(e) => Err(err(e)),
                    });
                }
            }
        }
    }
    Ok(commits)
}

type Samples = (Vec<Duration>, Duration);

/// `work` on `threads` threads at once, from a common start.
fn on_threads<F>(threads: u32, tx: &mpsc::Sender<Request>, work: F) -> Result<Samples, String>
where
    F: Fn(&mpsc::Sender<Request>, u32) -> Result<Vec<Duration>, String> + Sync,
{
    let barrier = Barrier::new(threads as usize + 1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, work, tx) = (&barrier, &work, tx.clone());
                s.spawn(move || {
                    barrier.wait();
                    work(&tx, t)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.join().unwrap_or_else(|_| Err("a caller thread panicked".into()))?);
        }
        Ok((all, start.elapsed()))
    })
}
