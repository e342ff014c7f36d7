//! relay-bench as users run it: a real process on real files.

use serde_json::Value;
use std::process::{Command, Output};

const BENCH: &str = env!("CARGO_BIN_EXE_relay-bench");

fn bench(args: &[&str]) -> Output {
    Command::new(BENCH).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_run_reports_every_field_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.db");
    let out = bench(&[
        "--jobs",
        "300",
        "--workers",
        "2",
        "--concurrency",
        "4",
        "--json",
        "--database",
        db.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            r["workers"].as_u64(),
            r["concurrency"].as_u64(),
            r["threads"].as_u64(),
            r["jobs"].as_u64()
        ),
        (Some(2), Some(4), Some(8), Some(300))
    );
    assert_eq!(r["verified"], true);
    for phase in ["submit", "lease_ack"] {
        for key in ["jobs_per_sec", "p50_us", "p95_us", "p99_us"] {
            assert!(r[phase][key].as_f64().unwrap() > 0.0, "{phase}.{key}: {r}");
        }
        assert!(r[phase]["p50_us"].as_f64() <= r[phase]["p99_us"].as_f64());
    }
    assert!(r["peak_rss_bytes"].as_u64().unwrap() > 1 << 20);
    assert!(r["floor"]["ops_per_sec"].as_f64().unwrap() > 0.0 && r["floor"]["p50_us"].as_f64().unwrap() > 0.0);
    // The database really holds 300 SUCCEEDED jobs.
    let relay = relay::Relay::open(&db).unwrap();
    assert_eq!(
        relay.stats().unwrap().queues["bench"].counts[&relay::JobState::Succeeded],
        300
    );
}

#[test]
fn a_database_that_holds_anything_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("used.db");
    let first = bench(&[
        "--jobs",
        "20",
        "--workers",
        "1",
        "--concurrency",
        "2",
        "--no-floor",
        "--database",
        db.to_str().unwrap(),
    ]);
    assert!(first.status.success(), "{}", stderr(&first));
    let again = bench(&["--jobs", "20", "--no-floor", "--database", db.to_str().unwrap()]);
    assert!(!again.status.success());
    assert!(again.stdout.is_empty(), "no report for a refused run");
    let e = stderr(&again);
    assert!(
        e.contains("already holds data") && e.contains("new --database path"),
        "{e}"
    );
    // Any non-empty file, Relay's or not.
    let other = dir.path().join("notes.txt");
    std::fs::write(&other, "keep me").unwrap();
    let out = bench(&["--jobs", "20", "--no-floor", "--database", other.to_str().unwrap()]);
    assert!(!out.status.success());
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "keep me");
}

#[test]
fn a_run_that_does_not_verify_fails_without_throughput() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fault.db");
    let out = bench(&[
        "--jobs",
        "200",
        "--workers",
        "1",
        "--concurrency",
        "4",
        "--no-floor",
        "--fault-skip-ack-every",
        "50",
        "--database",
        db.to_str().unwrap(),
    ]);
    assert!(!out.status.success(), "a run with unacknowledged jobs must fail");
    assert!(
        out.stdout.is_empty(),
        "no throughput printed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let e = stderr(&out);
    assert!(e.contains("verification failed: 196 of 200 jobs SUCCEEDED"), "{e}");
    assert!(e.contains("LEASED 4"), "{e}");
}

#[test]
fn depth_and_matrix_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("depth.db");
    let out = bench(&[
        "--jobs",
        "100",
        "--workers",
        "1",
        "--concurrency",
        "4",
        "--depth",
        "5000",
        "--priorities",
        "--no-floor",
        "--json",
        "--database",
        db.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (r["depth"].as_u64(), r["verified"].as_bool(), r["floor"].is_null()),
        (Some(5000), Some(true), true)
    );

    let out = bench(&[
        "--matrix",
        "--jobs",
        "64",
        "--no-floor",
        "--database",
        dir.path().join("m").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| workers"))
        .collect();
    let shapes: Vec<String> = rows
        .iter()
        .map(|r| {
            r.split('|')
                .skip(1)
                .take(3)
                .map(str::trim)
                .collect::<Vec<_>>()
                .join("x")
        })
        .collect();
    assert_eq!(shapes, ["1x1x1", "1x16x16", "4x16x64", "8x16x128", "16x16x256"]);
}

#[test]
fn bad_flags_are_refused() {
    let out = bench(&["--jobs", "0", "--database", "/tmp/never-created-relay-bench.db"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--jobs must be at least 1"));
    let out = bench(&["--jobs", "10"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--database PATH is required"));
}

#[test]
fn postgres_databases_run_and_a_used_one_is_refused() {
    let url = relay_storetest::pg::PgServer::shared().new_database();
    let out = bench(&[
        "--jobs",
        "200",
        "--workers",
        "2",
        "--concurrency",
        "4",
        "--no-floor",
        "--json",
        "--database",
        &url,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((r["verified"].as_bool(), r["jobs"].as_u64()), (Some(true), Some(200)));
    let again = bench(&["--jobs", "20", "--no-floor", "--database", &url]);
    assert!(!again.status.success());
    assert!(stderr(&again).contains("already holds 200 jobs"), "{}", stderr(&again));
}

/// `--baseline` runs the textbook queue and a pipelined group-commit
/// writer on the same PostgreSQL in the same run, verifies each, and
/// gives Relay's throughput as a multiple of each;
/// on SQLite it is refused (the fsync floor is SQLite's baseline).
#[test]
fn the_postgres_baseline_runs_beside_relay() {
    let url = relay_storetest::pg::PgServer::shared().new_database();
    let args = [
        "--jobs",
        "300",
        "--workers",
        "2",
        "--concurrency",
        "4",
        "--no-floor",
        "--baseline",
    ];
    let out = bench(&[&args[..], &["--json", "--database", &url]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let b = &r["baseline"];
    assert_eq!(b["connections"].as_u64(), Some(8));
    for phase in ["submit", "lease_ack"] {
        let rate = b[phase]["jobs_per_sec"].as_f64().unwrap_or(0.0);
        assert!(rate > 0.0, "baseline {phase}: {b}");
    }
    // The pipelined group-commit writer: verified (the run fails where a
    // job does not end DONE), its callers' transitions grouped into fewer
    // commits than transitions (300 submits, 300 leases, 300 acks).
    let g = &r["group_commit"];
    assert_eq!(g["callers"].as_u64(), Some(8));
    for phase in ["submit", "lease_ack"] {
        let rate = g[phase]["jobs_per_sec"].as_f64().unwrap_or(0.0);
        assert!(rate > 0.0, "group commit {phase}: {g}");
    }
    let commits = g["commits"].as_u64().unwrap_or(0);
    assert!(
        (1..900).contains(&commits),
        "group commit: {commits} commits for 900 transitions: {g}"
    );
    let url = relay_storetest::pg::PgServer::shared().new_database();
    let out = bench(&[&args[..], &["--database", &url]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("baseline: the textbook queue on 8 connections")
            && text.contains("baseline: a pipelined group-commit writer (one connection, 8 callers")
            && text.contains("x lease+ACK")
            // Issue 42: what the baselines leave out is said beside them.
            && text.contains("(the baselines keep a job's state and token only: no event log"),
        "{text}"
    );
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("b.db");
    let out = bench(&["--baseline", "--no-floor", "--database", db.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("needs a postgres://"), "{}", stderr(&out));
}

/// `--processes 1,2`: the phases once per count on one database, each
/// verified, each count's lease+ack reported.
#[test]
fn several_process_counts_in_one_run() {
    let url = relay_storetest::pg::PgServer::shared().new_database();
    let out = bench(&[
        "--jobs",
        "200",
        "--workers",
        "1",
        "--concurrency",
        "4",
        "--no-floor",
        "--processes",
        "1,2",
        "--json",
        "--database",
        &url,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = r["by_processes"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{r}");
    assert_eq!(rows[1][0].as_u64(), Some(2));
    assert!(rows[1][1]["jobs_per_sec"].as_f64().unwrap_or(0.0) > 0.0);
    let bad = bench(&["--processes", "0", "--no-floor", "--database", &url]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("--processes takes counts"), "{}", stderr(&bad));
}

/// `--matrix` on PostgreSQL: every row on a database of its own, made on
/// the same server and dropped after the row.
#[test]
fn a_postgres_matrix_runs_each_row_on_a_database_of_its_own() {
    let url = relay_storetest::pg::PgServer::shared().new_database();
    let out = bench(&["--matrix", "--jobs", "32", "--no-floor", "--json", "--database", &url]);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let shapes: Vec<(u64, u64)> = rows
        .iter()
        .map(|r| (r["workers"].as_u64().unwrap(), r["concurrency"].as_u64().unwrap()))
        .collect();
    assert_eq!(shapes, [(1, 1), (1, 16), (4, 16), (8, 16), (16, 16)]);
    assert!(rows.iter().all(|r| r["verified"].as_bool() == Some(true)));
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let left: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_database WHERE datname LIKE 'relay_matrix_%'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "a row's database was left behind");
    // The database named on the command line was not used for any row.
    let used: i64 = admin
        .query_one("SELECT count(*) FROM pg_tables WHERE tablename = 'relay_jobs'", &[])
        .unwrap()
        .get(0);
    assert_eq!(used, 0);
}
