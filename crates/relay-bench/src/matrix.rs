//! `--matrix`: one child process per row (so each row's peak RSS is its own),
//! each on a fresh database file.

use crate::args::Args;
use crate::report;
use crate::run::Report;
use std::path::PathBuf;
use std::process::Command;

const ROWS: [(u32, u32); 5] = [(1, 1), (1, 16), (4, 16), (8, 16), (16, 16)];

pub fn run(args: &Args) -> Result<(), String> {
    args.check()?;
    let temp;
    let dir: PathBuf = match &args.database {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
            d.clone()
        }
        None => {
            temp = std::env::temp_dir().join(format!("relay-bench-matrix-{}", std::process::id()));
            std::fs::create_dir_all(&temp).map_err(|e| format!("cannot create {}: {e}", temp.display()))?;
            temp
        }
    };
    let exe = std::env::current_exe().map_err(|e| format!("cannot find relay-bench itself: {e}"))?;
    let mut reports = Vec::new();
    if !args.json {
        println!("{}", report::header());
    }
    for (w, c) in ROWS {
        let db = dir.join(format!("matrix-{w}x{c}-{}.db", std::process::id()));
        let mut cmd = Command::new(&exe);
        cmd.arg("--json")
            .args([
                "--jobs",
                &args.jobs.to_string(),
                "--workers",
                &w.to_string(),
                "--concurrency",
                &c.to_string(),
            ])
            .args([
                "--payload-bytes",
                &args.payload_bytes.to_string(),
                "--depth",
                &args.depth.to_string(),
            ])
            .arg("--lease-for")
            .arg(humantime::format_duration(args.lease_for).to_string())
            .arg("--database")
            .arg(&db);
        if args.no_floor {
            cmd.arg("--no-floor");
        }
        if args.no_split_commit {
            cmd.arg("--no-split-commit");
        }
        if args.priorities {
            cmd.arg("--priorities");
        }
        eprintln!("relay-bench: row {w}x{c}");
        let out = cmd.output().map_err(|e| format!("cannot run row {w}x{c}: {e}"))?;
        cleanup(&db);
        if !out.status.success() {
            return Err(format!(
                "row {w}x{c} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let r: Report =
            serde_json::from_slice(&out.stdout).map_err(|e| format!("row {w}x{c}: unreadable report: {e}"))?;
        if args.json {
            println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
        } else {
            println!("{}", report::row(&r));
        }
        reports.push(r);
    }
    if !args.json {
        for r in &reports {
            if let Some(f) = &r.floor {
                println!(
                    "floor for row {}x{}: {:.0} ops/s (p50 {:.0} µs)",
                    r.workers, r.concurrency, f.ops_per_sec, f.p50_us
                );
            }
        }
    }
    Ok(())
}

fn cleanup(db: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
}
