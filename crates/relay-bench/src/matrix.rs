//! `--matrix`: one child process per row (so each row's peak RSS is its own),
//! each on a fresh database: a new file, or on PostgreSQL a new database
//! on the same server (created before the row, dropped after it).

use crate::args::Args;
use crate::report::{self, Report};
use std::path::PathBuf;
use std::process::Command;

const ROWS: [(u32, u32); 5] = [(1, 1), (1, 16), (4, 16), (8, 16), (16, 16)];

/// Where a row runs: a file, or a PostgreSQL database made for it.
enum RowDb {
    File(PathBuf),
    Pg {
        admin_url: String,
        name: String,
        url: String,
    },
}

impl RowDb {
    fn arg(&self) -> &std::ffi::OsStr {
        match self {
            RowDb::File(p) => p.as_os_str(),
            RowDb::Pg { url, .. } => std::ffi::OsStr::new(url),
        }
    }

    fn remove(&self) {
        match self {
            RowDb::File(p) => cleanup(p),
            RowDb::Pg { admin_url, name, .. } => {
                if let Ok(mut c) = postgres::Client::connect(admin_url, postgres::NoTls) {
                    let _ = c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
                }
            }
        }
    }
}

/// `url` with its database name replaced by `name` (query kept).
fn with_database(url: &str, name: &str) -> Result<String, String> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let slash = base[scheme_end..]
        .find('/')
        .map(|i| i + scheme_end)
        .ok_or_else(|| format!("{url}: expected postgres://user@host/database"))?;
    let mut out = format!("{}/{name}", &base[..slash]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    Ok(out)
}

/// A new database for one row, on the server of `url`.
fn pg_row(url: &str, w: u32, c: u32) -> Result<RowDb, String> {
    let name = format!("relay_matrix_{w}x{c}_{}", std::process::id());
    let mut admin = postgres::Client::connect(url, postgres::NoTls)
        .map_err(|e| format!("cannot connect to PostgreSQL to make row {w}x{c}'s database: {e}"))?;
    admin.batch_execute(&format!("CREATE DATABASE {name}")).map_err(|e| {
        format!(
            "cannot create a database for row {w}x{c}: {e} (--matrix on PostgreSQL makes one database per row: give the role CREATEDB, or run the rows one by one with --workers and --concurrency)"
        )
    })?;
    Ok(RowDb::Pg {
        admin_url: url.to_owned(),
        url: with_database(url, &name)?,
        name,
    })
}

pub fn run(args: &Args) -> Result<(), String> {
    args.check()?;
    let pg_url = args
        .database
        .as_ref()
        .and_then(|d| d.to_str())
        .filter(|u| relay_postgres_url(u))
        .map(str::to_owned);
    let temp;
    let dir: PathBuf = match &args.database {
        _ if pg_url.is_some() => PathBuf::new(),
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
        let db = match &pg_url {
            Some(url) => pg_row(url, w, c)?,
            None => RowDb::File(dir.join(format!("matrix-{w}x{c}-{}.db", std::process::id()))),
        };
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
            .arg(db.arg());
        if args.baseline {
            cmd.arg("--baseline");
        }
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
        let out = cmd.output();
        db.remove();
        let out = out.map_err(|e| format!("cannot run row {w}x{c}: {e}"))?;
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
            if let Some(b) = &r.baseline {
                print!("row {}x{}: ", r.workers, r.concurrency);
                report::baseline_line(r, b);
            }
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

fn relay_postgres_url(u: &str) -> bool {
    relay::StoreUrl::parse(u).is_postgres()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_row_database_replaces_the_name_and_keeps_the_query() {
        assert_eq!(
            super::with_database("postgres://u:p@h:5432/bench?sslmode=disable", "row").unwrap(),
            "postgres://u:p@h:5432/row?sslmode=disable"
        );
        assert_eq!(
            super::with_database("postgresql://u@h/db", "r").unwrap(),
            "postgresql://u@h/r"
        );
        assert!(super::with_database("postgres://u@h", "r").is_err());
    }
}
