//! The `relay` binary as scripts use it: real processes on a real file.

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const RELAY: &str = env!("CARGO_BIN_EXE_relay");

struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cli.db");
    Db { _dir: dir, path }
}

fn relay(db: &Path, args: &[&str]) -> Output {
    Command::new(RELAY)
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("RELAY_DB")
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.stderr.is_empty(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn json_lines(out: &Output) -> Vec<Value> {
    ok(out).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// A lease that found nothing: success, nothing on stdout, and one line
/// on stderr that says so (issue 42). True, for `assert!`.
fn empty_lease(out: &Output) -> bool {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "failed: {err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "stderr: {err}");
    assert!(
        err.starts_with("relay: no job to lease in ") && err.lines().count() == 1,
        "{err:?}"
    );
    true
}

/// A failed command: the exit status, and a single stderr line naming the problem.
fn fails(out: &Output, code: i32, needle: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout {:?} stderr {:?}",
        out.stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    assert!(
        err.starts_with("relay: ") && err.contains(needle),
        "{err:?} should mention {needle:?}"
    );
}

/// A payload prints as stored in every view, text and `--json`: its keys
/// in their order and a number no `f64` holds (the CLI prints the typed
/// answers, whose payloads are the stored JSON text, never a parsed value).
#[test]
fn a_payload_prints_as_stored_in_text_and_json() {
    let db = db();
    let payload = r#"{"b": 1, "a": 1e999, "n": 12345678901234567890123}"#;
    let compact = r#"{"b":1,"a":1e999,"n":12345678901234567890123}"#;
    ok(&relay(
        &db.path,
        &[
            "submit", "--queue", "q", "--kind", "k", "--tag", "vip", "--tag", "eu", payload,
        ],
    ));
    let show = ok(&relay(&db.path, &["show", "1"]));
    assert!(show.contains(&format!("payload          {compact}\n")), "{show}");
    assert!(show.contains("tags             vip,eu\n"), "{show}");
    let raw = ok(&relay(&db.path, &["--json", "show", "1"]));
    assert!(raw.contains(&format!(r#""payload":{payload}"#)), "{raw}");
    let lease = ok(&relay(&db.path, &["lease", "--queue", "q"]));
    assert_eq!(lease.trim_end().rsplit('\t').next(), Some(compact), "{lease}");
}

#[test]
fn submit_lease_ack_show_events_stats_in_text() {
    let db = db();
    let id = ok(&relay(
        &db.path,
        &[
            "submit",
            "--queue",
            "emails",
            "--kind",
            "send",
            "--priority",
            "2",
            r#"{"to":"ada"}"#,
        ],
    ));
    assert_eq!(id.trim(), "1");
    let lease = ok(&relay(&db.path, &["lease", "--queue", "emails", "--worker", "w1"]));
    let cols: Vec<&str> = lease.trim_end().split('\t').collect();
    assert_eq!(cols, ["1", "1", "send", "1", r#"{"to":"ada"}"#]);
    let acked = ok(&relay(&db.path, &["ack", "1", "--token", "1", "--result", "sent"]));
    assert_eq!(acked.trim(), "job 1 SUCCEEDED");
    let show = ok(&relay(&db.path, &["show", "1"]));
    assert!(
        show.contains("state            SUCCEEDED") && show.contains("result           sent"),
        "{show}"
    );
    let events = ok(&relay(&db.path, &["events", "1"]));
    let kinds: Vec<&str> = events.lines().map(|l| l.split_whitespace().nth(2).unwrap()).collect();
    assert_eq!(kinds, ["submitted", "leased", "succeeded"]);
    let stats = ok(&relay(&db.path, &["stats"]));
    assert!(
        stats
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .starts_with(&["emails", "0", "0", "0", "0", "0", "1"]),
        "{stats}"
    );
    // Nothing ready: lease prints nothing on stdout, says so on stderr, and succeeds.
    empty_lease(&relay(&db.path, &["lease", "--queue", "emails"]));
}

#[test]
fn json_output_uses_design_names_and_capital_states() {
    let db = db();
    let sub = json_lines(&relay(
        &db.path,
        &["--json", "submit", "-q", "q", "-k", "k", "--max-attempts", "2", "hello"],
    ));
    assert_eq!(sub, [serde_json::json!({"id": 1})]);
    // --db and --json after the subcommand work too.
    let out = Command::new(RELAY)
        .args(["lease", "--queue", "q", "--json", "--db"])
        .arg(&db.path)
        .output()
        .unwrap();
    let lease = json_lines(&out);
    assert_eq!(
        (
            lease[0]["id"].as_i64(),
            lease[0]["token"].as_i64(),
            lease[0]["attempt"].as_i64()
        ),
        (Some(1), Some(1), Some(1))
    );
    // `hello` is text, not JSON: its bytes, marked as base64.
    assert_eq!(lease[0]["payload_base64"], "aGVsbG8=");
    assert!(lease[0].get("payload").is_none());
    let nack = json_lines(&relay(
        &db.path,
        &[
            "--json",
            "nack",
            "1",
            "--token",
            "1",
            "--error",
            "boom",
            "--retry-in",
            "1h",
        ],
    ));
    assert_eq!(nack[0]["state"], "RETRYING");
    let show = json_lines(&relay(&db.path, &["show", "1", "--json"]));
    let j = &show[0];
    assert_eq!(
        (j["id"].as_i64(), j["state"].as_str(), j["attempts"].as_i64()),
        (Some(1), Some("RETRYING"), Some(1))
    );
    assert_eq!(
        (
            j["last_error"].as_str(),
            j["queue"].as_str(),
            j["max_attempts"].as_i64()
        ),
        (Some("boom"), Some("q"), Some(2))
    );
    for key in [
        "kind",
        "payload_base64", // `hello` is not JSON
        "priority",
        "ready_at",
        "created_at",
        "finished_at",
        "unique_key",
        "result",
        "lease_token",
        "lease_expires_at",
        "leased_by",
    ] {
        assert!(j.get(key).is_some(), "missing {key}: {j}");
    }
    let stats = json_lines(&relay(&db.path, &["stats", "--json"]));
    let q = &stats[0]["queues"]["q"];
    assert_eq!(
        (
            q["READY"].as_u64(),
            q["RETRYING"].as_u64(),
            q["LEASED"].as_u64(),
            q["SUCCEEDED"].as_u64(),
            q["DEAD"].as_u64(),
            q["CANCELLED"].as_u64()
        ),
        (Some(0), Some(1), Some(0), Some(0), Some(0), Some(0))
    );
    let events = json_lines(&relay(&db.path, &["events", "1", "--json"]));
    assert_eq!(
        events.iter().map(|e| e["kind"].as_str().unwrap()).collect::<Vec<_>>(),
        ["submitted", "leased", "failed"]
    );
    assert_eq!(events[2]["data"]["error"], "boom");
    // A JSON payload is shown as JSON, on a file and in the lease line.
    let sub = json_lines(&relay(
        &db.path,
        &[
            "--json",
            "submit",
            "-q",
            "j",
            "-k",
            "k",
            r#"{"to": "ada", "n": [1, 2]}"#,
        ],
    ));
    let id = sub[0]["id"].to_string();
    let shown = json_lines(&relay(&db.path, &["--json", "show", &id]));
    assert_eq!(shown[0]["payload"], serde_json::json!({"to": "ada", "n": [1, 2]}));
    let line = ok(&relay(&db.path, &["lease", "-q", "j"]));
    // On one line, the keys in their order.
    assert!(line.trim_end().ends_with("\t{\"to\":\"ada\",\"n\":[1,2]}"), "{line}");
}

#[test]
fn payload_from_stdin_env_db_and_delay() {
    let db = db();
    let mut child = Command::new(RELAY)
        .args(["submit", "--queue", "q", "--kind", "k", "--delay", "1h", "-"])
        .env("RELAY_DB", &db.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"line one\nline two").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(ok(&out).trim(), "1");
    let show = json_lines(&relay(&db.path, &["show", "1", "--json"]));
    assert_eq!(show[0]["payload_base64"], "bGluZSBvbmUKbGluZSB0d28=");
    assert!(
        empty_lease(&relay(&db.path, &["lease", "--queue", "q"])),
        "delayed job is not leased early"
    );
}

#[test]
fn errors_are_one_line_with_a_status_per_kind() {
    let db = db();
    ok(&relay(&db.path, &["submit", "--queue", "q", "--kind", "k"]));
    fails(&relay(&db.path, &["show", "99"]), 3, "job 99 not found");
    // Never leased: its state, not "lease lost" (issue 42).
    fails(
        &relay(&db.path, &["ack", "1", "--token", "7"]),
        5,
        "job 1 is READY: cannot ack it",
    );
    fails(&relay(&db.path, &["retry", "1"]), 5, "cannot retry");
    ok(&relay(&db.path, &["lease", "--queue", "q"]));
    fails(&relay(&db.path, &["ack", "1", "--token", "7"]), 4, "lease lost");
    fails(
        &relay(&db.path, &["submit", "--queue", "bad queue", "--kind", "k"]),
        2,
        "invalid queue",
    );
    fails(
        &relay(&db.path, &["submit", "--queue", "q", "--kind", "k", "--priority", "4"]),
        2,
        "4 is not a priority",
    );
    let out = Command::new(RELAY)
        .args(["stats"])
        .env_remove("RELAY_DB")
        .output()
        .unwrap();
    fails(&out, 2, "pass --db PATH (or --server URL), or set RELAY_DB");
    let junk = db.path.with_file_name("junk.db");
    std::fs::write(&junk, b"not a database at all").unwrap();
    fails(&relay(&junk, &["stats"]), 1, "not an SQLite file");
    // Bad usage is clap's (exit 2), naming the flag.
    let out = relay(&db.path, &["lease", "--queue", "q", "--wait", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--wait"));
}

/// A submit repeated with `--idempotency-key` gives the first job, even
/// once it has finished (issue 24, item 4).
#[test]
fn an_idempotency_key_makes_a_submit_safe_to_repeat() {
    let db = db();
    let args = ["submit", "-q", "q", "-k", "k", "--idempotency-key", "order-7"];
    let first = ok(&relay(&db.path, &args));
    ok(&relay(&db.path, &["cancel", first.trim()]));
    let again = relay(&db.path, &args);
    assert!(again.status.success());
    assert_eq!(String::from_utf8_lossy(&again.stdout), first);
    let note = String::from_utf8_lossy(&again.stderr);
    assert!(note.contains("was submitted with this idempotency key"), "{note}");
    let other = ok(&relay(
        &db.path,
        &["submit", "-q", "q", "-k", "k", "--idempotency-key", "order-8"],
    ));
    assert_ne!(other, first);
}

/// The README's debounce command, as written: the second submit answers
/// the first job, whose payload is now the second's; one with a delay is
/// refused (exit 2, clap's usage error) and changes nothing.
#[test]
fn a_debounced_submit_replaces_the_waiting_job() {
    let db = db();
    let submit = |more: &[&str]| {
        let mut args = vec![
            "submit",
            "-q",
            "search",
            "-k",
            "reindex",
            "--unique-key",
            "doc-7",
            "--debounce",
            "30s",
        ];
        args.extend_from_slice(more);
        relay(&db.path, &args)
    };
    let first = ok(&submit(&[r#"{"v":1}"#]));
    let again = submit(&[r#"{"v":2}"#]);
    assert!(again.status.success());
    assert_eq!(String::from_utf8_lossy(&again.stdout), first);
    let note = String::from_utf8_lossy(&again.stderr);
    assert!(note.contains("debounced"), "{note}");
    let show = ok(&relay(&db.path, &["show", first.trim()]));
    assert!(show.contains("payload          {\"v\":2}\n"), "{show}");
    let events = ok(&relay(&db.path, &["events", first.trim()]));
    assert!(events.contains("debounced"), "{events}");
    assert!(empty_lease(&relay(&db.path, &["lease", "-q", "search"])), "due in 30 s");
    let delayed = submit(&["--delay", "5s"]);
    assert_eq!(delayed.status.code(), Some(2), "{delayed:?}");
    let show = ok(&relay(&db.path, &["show", first.trim()]));
    assert!(show.contains("payload          {\"v\":2}\n"), "{show}");
}

#[test]
fn unique_key_cancel_retry_delete_jobs() {
    let db = db();
    let a = ok(&relay(
        &db.path,
        &["submit", "-q", "q", "-k", "k", "--unique-key", "u1"],
    ));
    // Found, not submitted: the same id on stdout, and a note saying so.
    let again = relay(&db.path, &["submit", "-q", "q", "-k", "k", "--unique-key", "u1"]);
    assert!(again.status.success());
    assert_eq!(String::from_utf8_lossy(&again.stdout), a);
    let note = String::from_utf8_lossy(&again.stderr);
    assert!(
        note.contains("job 1 (unfinished) already holds this unique key"),
        "{note}"
    );
    let json = json_lines(&relay(
        &db.path,
        &["--json", "submit", "-q", "q", "-k", "k", "--unique-key", "u1"],
    ));
    assert_eq!(json[0], serde_json::json!({"id": 1, "existing": true}));
    let fresh = json_lines(&relay(
        &db.path,
        &["--json", "submit", "-q", "q", "-k", "k", "--unique-key", "u2"],
    ));
    assert_eq!(fresh[0], serde_json::json!({"id": 2}));
    assert_eq!(ok(&relay(&db.path, &["cancel", "1"])).trim(), "job 1 CANCELLED");
    let dead = ok(&relay(&db.path, &["jobs", "--state", "cancelled"]));
    assert_eq!(dead.lines().count(), 2, "{dead}");
    ok(&relay(&db.path, &["delete", "2"]));
    assert_eq!(ok(&relay(&db.path, &["retry", "1"])).trim(), "job 1 READY");
    let lease = ok(&relay(&db.path, &["lease", "-q", "q", "--lease-for", "1m"]));
    let token = lease.split('\t').nth(1).unwrap().to_owned();
    let ext = json_lines(&relay(
        &db.path,
        &["--json", "extend", "1", "--token", &token, "--lease-for", "2m"],
    ));
    assert!(ext[0]["lease_expires_at"].as_str().unwrap().ends_with('Z'));
    // Snoozed: SCHEDULED, not leased before its time, and no attempt spent.
    let snoozed = ok(&relay(&db.path, &["release", "1", "--token", &token, "--in", "10m"]));
    // "10 min" when the answer is printed within the same millisecond as the release.
    assert!(
        snoozed.starts_with("job 1 SCHEDULED, runs in 9 min (")
            || snoozed.starts_with("job 1 SCHEDULED, runs in 10 min ("),
        "{snoozed}"
    );
    empty_lease(&relay(&db.path, &["lease", "-q", "q"]));
    let shown = json_lines(&relay(&db.path, &["--json", "show", "1"]));
    assert_eq!(
        (shown[0]["state"].as_str(), shown[0]["attempts"].as_i64()),
        (Some("SCHEDULED"), Some(0))
    );
    let events = ok(&relay(&db.path, &["events", "1"]));
    assert!(events.lines().last().unwrap().contains("snoozed"), "{events}");
    let refused = relay(&db.path, &["release", "1", "--token", &token, "--in", "soon"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("soon"));
    assert_eq!(ok(&relay(&db.path, &["delete", "1"])).trim(), "job 1 deleted");
    assert_eq!(
        ok(&relay(&db.path, &["jobs"])).lines().count(),
        1,
        "only the header is left"
    );
}

#[test]
fn demo_runs_and_reports() {
    let db = db();
    let out = relay(&db.path, &["demo", "--jobs", "300", "--workers", "3"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text} {}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("submitted 300 jobs and one that always fails (301 in all)"),
        "{text}"
    );
    assert!(text.contains("succeeded 300") && text.contains("dead 1"), "{text}");
    assert!(
        text.contains("attempts exhausted"),
        "the dead job's event log is shown: {text}"
    );
    // The schedule: 3.3 s of a 1 s schedule, one job per tick.
    let line = text
        .lines()
        .find(|l| l.starts_with("schedule demo-every-second (every 1s) enqueued "))
        .unwrap_or_else(|| panic!("no schedule report: {text}"));
    let n: usize = line.split_whitespace().nth(5).unwrap().parse().unwrap();
    assert!((2..=4).contains(&n), "{line}");
    let ticks: Vec<&str> = text.lines().skip_while(|l| *l != line).skip(1).take(n).collect();
    let mut distinct = ticks.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), n, "{ticks:?}");
    let stats = json_lines(&relay(&db.path, &["stats", "--json"]));
    let total: u64 = stats[0]["queues"]
        .as_object()
        .unwrap()
        .values()
        .map(|q| q["SUCCEEDED"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 300 + 5, "the jobs and the pipeline's five");
    // The pipeline ran in the order its dependencies impose.
    let rounds: Vec<Vec<&str>> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("round "))
        .map(|l| {
            l.split_once(": ")
                .unwrap()
                .1
                .split(", ")
                .map(|j| j.split(' ').next().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(
        rounds,
        [vec!["fetch", "fetch", "fetch"], vec!["merge"], vec!["publish"]],
        "{text}"
    );
    // The demo never reuses a database.
    let again = relay(&db.path, &["demo"]);
    fails(&again, 2, "already exists");
}

#[test]
fn a_postgres_url_works_wherever_a_path_does() {
    let url = relay_storetest::pg::PgServer::shared().new_database();
    let run = |args: &[&str]| {
        Command::new(RELAY)
            .args(["--db", &url])
            .args(args)
            .env_remove("RELAY_DB")
            .output()
            .unwrap()
    };
    // Regression (issue 24, item 13): a read installed Relay's tables and
    // functions into whatever database the URL named. It refuses instead,
    // and the database stays as it was.
    fails(&run(&["stats"]), 1, "holds no Relay tables");
    fails(&run(&["jobs"]), 1, "a command that writes (submit) installs them");
    let mut pg = relay::postgres::Client::connect(&url, relay::postgres::NoTls).unwrap();
    let tables: i64 = pg
        .query_one("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'relay%'", &[])
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "a read created nothing");
    let id = ok(&run(&["submit", "--queue", "q", "--kind", "k", "on postgres"]));
    assert_eq!(id.trim(), "1");
    // A PostgreSQL that does not answer, and a database that does not exist:
    // the cause is kept, and the message names the fix.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nobody = format!("postgres://postgres@127.0.0.1:{port}/relay");
    let out = Command::new(RELAY).args(["--db", &nobody, "stats"]).output().unwrap();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot connect to PostgreSQL at {nobody}"))
            && err.contains("refused")
            && err.contains("pg_isready"),
        "{err}"
    );
    let (base, _) = url.rsplit_once('/').unwrap();
    let missing_db = format!("{base}/relay_no_such_database");
    let out = Command::new(RELAY)
        .args(["--db", &missing_db, "stats"])
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("relay_no_such_database") && err.contains("does not exist") && err.contains("createdb"),
        "{err}"
    );
    let lease = ok(&run(&["lease", "--queue", "q"]));
    assert_eq!(
        lease.trim_end().split('\t').collect::<Vec<_>>(),
        ["1", "1", "k", "1", "on postgres"]
    );
    assert_eq!(ok(&run(&["ack", "1", "--token", "1"])).trim(), "job 1 SUCCEEDED");
    let stats = json_lines(&run(&["--json", "stats"]));
    assert_eq!(stats[0]["queues"]["q"]["SUCCEEDED"], 1);
    fails(&run(&["show", "5"]), 3, "job 5 not found");
    // The demo refuses a database that holds jobs, and runs on a new one.
    fails(&run(&["demo", "--jobs", "50"]), 2, "already holds 1 jobs");
    let fresh = relay_storetest::pg::PgServer::shared().new_database();
    let out = Command::new(RELAY)
        .args(["--db", &fresh, "demo", "--jobs", "100", "--workers", "2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("(PostgreSQL)") && text.contains("succeeded 100"),
        "{text}"
    );
}

fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A priority out of range gets one message, whatever the number or sign.
#[test]
fn every_bad_priority_gets_the_same_error() {
    let d = db();
    for p in ["7", "300", "-1", "99999999999"] {
        let out = relay(&d.path, &["submit", "--queue", "q", "--kind", "k", "--priority", p]);
        fails(
            &out,
            2,
            &format!("{p} is not a priority: use 0 (least urgent) to 3 (most urgent)"),
        );
    }
    ok(&relay(
        &d.path,
        &["submit", "--queue", "q", "--kind", "k", "--priority", "3"],
    ));
}

/// Opening errors name the fix; commands that only read never create a file.
#[test]
fn opening_errors_name_the_fix() {
    let d = db();
    let missing = d.path.with_file_name("nothere.db");
    for args in [&["stats"][..], &["show", "1"], &["jobs"], &["events", "1"]] {
        let out = relay(&missing, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            stderr_of(&out).contains("there is no database at"),
            "{}",
            stderr_of(&out)
        );
        assert!(!missing.exists(), "`relay {args:?}` created the file");
    }
    let dir = d.path.parent().unwrap();
    let out = relay(dir, &["stats"]);
    assert!(stderr_of(&out).contains("is a directory"), "{}", stderr_of(&out));
    let deep = dir.join("no/such/dir/jobs.db");
    let out = relay(&deep, &["submit", "--queue", "q", "--kind", "k"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("does not exist (create it first"),
        "{}",
        stderr_of(&out)
    );
    // A command that writes creates the file; then reads work.
    ok(&relay(&missing, &["submit", "--queue", "q", "--kind", "k"]));
    ok(&relay(&missing, &["stats"]));
}

/// `jobs --limit` outside 1-1000 is refused, not silently clamped.
#[test]
fn jobs_limit_is_validated() {
    let d = db();
    ok(&relay(&d.path, &["submit", "--queue", "q", "--kind", "k"]));
    for bad in ["0", "1001", "-3"] {
        let out = relay(&d.path, &["jobs", "--limit", bad]);
        assert_eq!(out.status.code(), Some(2), "--limit {bad}: {}", stderr_of(&out));
    }
    ok(&relay(&d.path, &["jobs", "--limit", "1000"]));
}

/// Every flag of every subcommand has help text, and the global flags are
/// shown apart from the subcommand's own.
#[test]
fn every_flag_has_help() {
    let subcommands = [
        "submit",
        "lease",
        "ack",
        "nack",
        "extend",
        "release",
        "show",
        "events",
        "stats",
        "pause",
        "resume",
        "limit",
        "jobs",
        "cancel",
        "retry",
        "delete",
        "work",
        "serve",
        "demo",
        "schedule add",
        "schedule list",
        "schedule remove",
        "schedule pause",
        "schedule resume",
    ];
    // What clap adds by itself, which is not help.
    let generated = |text: &str| {
        let mut t = text.to_owned();
        for tag in ["[default: ", "[env: ", "[possible values: ", "[aliases: "] {
            while let Some(at) = t.find(tag) {
                let end = t[at..].find(']').map_or(t.len(), |e| at + e + 1);
                t.replace_range(at..end, "");
            }
        }
        t.trim().to_owned()
    };
    for sub in subcommands {
        let out = Command::new(RELAY).args(sub.split(' ')).arg("--help").output().unwrap();
        let help = ok(&out);
        assert!(help.contains("Global options:"), "relay {sub} --help: {help}");
        let lines: Vec<&str> = help.lines().collect();
        // Flags ("  -q, --queue <QUEUE>") and positionals ("  <ID>", "  [PAYLOAD]").
        for (i, line) in lines.iter().enumerate().filter(|(_, l)| {
            let t = l.trim_start();
            let indent = l.len() - t.len();
            (t.starts_with('-') && (2..=6).contains(&indent))
                || ((t.starts_with('<') || t.starts_with('[')) && indent == 2)
        }) {
            // The flag, then its text on the same line or (long help)
            // indented on the next.
            let same = line
                .trim_start()
                .split("  ")
                .filter(|p| !p.trim().is_empty())
                .nth(1)
                .map(generated)
                .filter(|t| !t.is_empty());
            let next = lines
                .get(i + 1)
                .map(|l| generated(l))
                .filter(|l| !l.is_empty() && !l.starts_with('-'));
            assert!(
                same.is_some() || next.is_some(),
                "relay {sub}: an argument without help: {line:?}"
            );
        }
    }
}

/// Negative numbers are values where numbers are values: an id or a count
/// of -1 is judged as a number (not found, out of range), never taken for a
/// flag.
#[test]
fn negative_numbers_are_values() {
    let d = db();
    ok(&relay(&d.path, &["submit", "--queue", "q", "--kind", "k"]));
    fails(&relay(&d.path, &["show", "-1"]), 3, "job -1 not found");
    fails(&relay(&d.path, &["ack", "-1", "--token", "-2"]), 3, "job -1 not found");
    for args in [
        &["jobs", "--limit", "-1"][..],
        &["lease", "--queue", "q", "--max", "-1"],
        &["submit", "--queue", "q", "--kind", "k", "--max-attempts", "-1"],
    ] {
        let out = relay(&d.path, args);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("invalid value '-1'"), "{args:?}: {err}");
    }
}

/// `--run-at` schedules a job for a moment; a bad moment is a usage error.
#[test]
fn submit_run_at() {
    let d = db();
    let id = ok(&relay(
        &d.path,
        &[
            "submit",
            "--queue",
            "q",
            "--kind",
            "k",
            "--run-at",
            "2099-01-01T00:00:00Z",
        ],
    ));
    let shown = json_lines(&relay(&d.path, &["--json", "show", id.trim()]));
    assert!(
        shown[0]["ready_at"]
            .as_str()
            .unwrap_or("")
            .starts_with("2099-01-01T00:00:00"),
        "{}",
        shown[0]
    );
    assert!(
        empty_lease(&relay(&d.path, &["lease", "--queue", "q"])),
        "leased before its time"
    );
    let out = relay(
        &d.path,
        &["submit", "--queue", "q", "--kind", "k", "--run-at", "tomorrow"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_of(&out).contains("RFC 3339"), "{}", stderr_of(&out));
}

/// Without --db the demo runs on a temporary database and removes it.
#[test]
fn demo_without_a_database_cleans_up() {
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new(RELAY)
        .args(["demo", "--jobs", "40", "--workers", "2"])
        .env_remove("RELAY_DB")
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    let text = ok(&out);
    assert!(text.contains("removed the temporary database"), "{text}");
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `submit --depends-on`: the job waits, stats count it, a failed parent
/// cancels it (or not, with `--on-dependency-failure run`), an unknown id
/// is refused with exit 3 (not found) and writes nothing.
#[test]
fn submit_with_dependencies() {
    let db = db();
    let p = &db.path;
    assert_eq!(ok(&relay(p, &["submit", "-q", "q", "-k", "a"])), "1\n");
    assert_eq!(
        ok(&relay(p, &["submit", "-q", "q", "-k", "b", "--depends-on", "1"])),
        "2\n"
    );
    let both = [
        "submit",
        "-q",
        "q",
        "-k",
        "c",
        "--depends-on",
        "1,2",
        "--on-dependency-failure",
        "run",
    ];
    assert_eq!(ok(&relay(p, &both)), "3\n");
    let shown = &json_lines(&relay(p, &["--json", "show", "3"]))[0];
    assert_eq!(
        (shown["state"].as_str(), shown["waiting_on"].as_i64()),
        (Some("WAITING"), Some(2))
    );
    let stats = ok(&relay(p, &["stats"]));
    let header: Vec<&str> = stats.lines().next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = stats.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!((header[1], row[1]), ("WAITING", "2"), "{stats}");
    fails(
        &relay(p, &["submit", "-q", "q", "-k", "d", "--depends-on", "99"]),
        3,
        "job 99, named in depends_on, does not exist",
    );
    let bad = relay(
        p,
        &[
            "submit",
            "-q",
            "q",
            "-k",
            "d",
            "--depends-on",
            "1",
            "--on-dependency-failure",
            "later",
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values: cancel, run"));
    ok(&relay(p, &["cancel", "1"]));
    let states: Vec<(i64, String)> = json_lines(&relay(p, &["--json", "jobs"]))
        .iter()
        .map(|j| (j["id"].as_i64().unwrap(), j["state"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        states,
        [
            (3, "READY".to_owned()),
            (2, "CANCELLED".to_owned()),
            (1, "CANCELLED".to_owned())
        ],
        "no fourth job was written"
    );
    let events = json_lines(&relay(p, &["--json", "events", "2"]));
    assert_eq!(events[1]["data"]["reason"], "job 1 it depends on ended CANCELLED");
}

/// States are coloured on a terminal (a pseudo-terminal from util-linux's
/// `script`), and not with NO_COLOR set or when the output is piped.
#[test]
fn states_in_colour_on_a_terminal_only() {
    let db = db();
    let p = &db.path;
    ok(&relay(p, &["submit", "-q", "q", "-k", "k"]));
    let on_tty = |no_color: bool, args: &str| {
        let mut c = Command::new("script");
        c.args(["-qc", &format!("{RELAY} --db {} {args}", p.display()), "/dev/null"])
            .env_remove("RELAY_DB");
        if no_color {
            c.env("NO_COLOR", "1");
        } else {
            c.env_remove("NO_COLOR");
        }
        String::from_utf8(c.output().unwrap().stdout).unwrap()
    };
    let coloured = on_tty(false, "jobs");
    assert!(coloured.contains("\x1b[34mREADY     \x1b[0m"), "{coloured:?}");
    assert!(on_tty(false, "show 1").contains("state            \x1b[34mREADY\x1b[0m"));
    assert!(on_tty(false, "cancel 1").contains("job 1 \x1b[2mCANCELLED\x1b[0m"));
    let plain = on_tty(true, "jobs");
    assert!(plain.contains("CANCELLED") && !plain.contains('\x1b'), "{plain:?}");
    let piped = ok(&relay(p, &["jobs"]));
    assert!(piped.contains("CANCELLED") && !piped.contains('\x1b'), "{piped:?}");
}

/// `relay jobs` with every filter flag, `--tag` at submit, and `relay
/// retry|cancel|delete` by filter, as an operator at 3 a.m. would: retry
/// every DEAD job of one kind, and the mistakes (no id and no filter, both)
/// refused as bad usage.
#[test]
fn search_by_filter_and_act_on_every_match() {
    let d = db();
    let id = |out: &Output| ok(out).trim().parse::<i64>().unwrap();
    let a = id(&relay(
        &d.path,
        &[
            "submit",
            "-q",
            "q",
            "-k",
            "send",
            "--max-attempts",
            "1",
            "--tag",
            "vip",
            "--tag",
            "eu",
        ],
    ));
    let b = id(&relay(
        &d.path,
        &["submit", "-q", "q", "-k", "send", "--max-attempts", "1", "--tag", "eu"],
    ));
    let c = id(&relay(
        &d.path,
        &["submit", "-q", "q", "-k", "bill", "--max-attempts", "1"],
    ));
    // Fail all three for good.
    let leased = json_lines(&relay(&d.path, &["--json", "lease", "-q", "q", "--max", "10"]));
    for j in &leased {
        let token = j["token"].to_string();
        let idarg = j["id"].to_string();
        ok(&relay(
            &d.path,
            &["nack", &idarg, "--token", &token, "--error", "smtp: refused"],
        ));
    }
    let listed = |args: &[&str]| -> Vec<i64> {
        let mut all = vec!["--json", "jobs"];
        all.extend_from_slice(args);
        json_lines(&relay(&d.path, &all))
            .iter()
            .map(|j| j["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(listed(&["--tag", "eu"]), [b, a]);
    assert_eq!(listed(&["--kind", "bill"]), [c]);
    assert_eq!(listed(&["--state", "dead", "--error-contains", "smtp"]), [c, b, a]);
    assert_eq!(listed(&["--since", "1h"]), [c, b, a]);
    assert_eq!(listed(&["--until", "1h"]), Vec::<i64>::new());
    assert_eq!(
        listed(&["--since", "2000-01-01T00:00:00Z", "--kind", "send", "--tag", "vip"]),
        [a]
    );
    let show = json_lines(&relay(&d.path, &["--json", "show", &a.to_string()]));
    assert_eq!(show[0]["tags"], serde_json::json!(["vip", "eu"]));

    let out = ok(&relay(&d.path, &["retry", "--state", "DEAD", "--kind", "send"]));
    assert_eq!(out.trim(), "retried 2 jobs");
    assert_eq!(listed(&["--state", "READY"]), [b, a]);
    let out = json_lines(&relay(&d.path, &["--json", "cancel", "--tag", "vip"]));
    assert_eq!(out[0], serde_json::json!({"action": "cancel", "count": 1}));
    let out = ok(&relay(&d.path, &["delete", "--state", "CANCELLED"]));
    assert_eq!(out.trim(), "deleted 1 job");
    assert_eq!(listed(&[]), [c, b]);

    fails(&relay(&d.path, &["retry"]), 2, "needs a job id, or filter flags");
    fails(
        &relay(&d.path, &["retry", &c.to_string(), "--kind", "bill"]),
        2,
        "not both",
    );
    let out = relay(&d.path, &["jobs", "--since", "last tuesday"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("write a time ago (30m, 2h, 7d)"));
    fails(&relay(&d.path, &["jobs", "--tag", "a,b"]), 2, "commas");
    fails(
        &relay(&d.path, &["submit", "-q", "q", "-k", "k", "--tag", "x,y"]),
        2,
        "commas",
    );
}

/// Regression (issue 24, item 12): `relay submit -` read all of stdin
/// before checking the payload limit (`< /dev/zero` reached ~1 GB in 6 s).
/// It stops reading one byte past the limit and says so.
#[test]
fn an_endless_stdin_payload_is_refused_at_the_limit() {
    let db = db();
    let mut child = Command::new(RELAY)
        .arg("--db")
        .arg(&db.path)
        .args(["submit", "--queue", "q", "--kind", "k", "-"])
        .stdin(Stdio::from(std::fs::File::open("/dev/zero").unwrap()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("still reading stdin after 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    fails(&out, 2, "more than the limit of 1048576 bytes");
    ok(&relay(&db.path, &["stats"]));
    assert_eq!(ok(&relay(&db.path, &["jobs", "--json"])), "", "nothing was submitted");
}

/// Regression (issue 24, item 14): rough edges a new user hit. A server
/// address without its scheme said "http: invalid format"; `--server`
/// was silently ignored by `relay demo`; the demo suggested looking around
/// a temporary file it had just removed.
#[test]
fn rough_edges_say_what_to_do() {
    let run = |args: &[&str]| Command::new(RELAY).args(args).env_remove("RELAY_DB").output().unwrap();
    fails(
        &run(&["--server", "localhost:7433", "stats"]),
        2,
        "--server http://localhost:7433",
    );
    fails(&run(&["--server", "ftp://h:1", "stats"]), 2, "not an http(s) URL");
    fails(
        &run(&["--server", "http://127.0.0.1:9", "demo"]),
        2,
        "does not use --server",
    );
    let out = run(&["demo", "--jobs", "50", "--workers", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(text.contains("removed the temporary database"), "{text}");
    assert!(!text.contains("look around"), "no tour of a removed file: {text}");
    let kept = db();
    let out = relay(&kept.path, &["demo", "--jobs", "50", "--workers", "2"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("look around: relay --db"));
}

/// Regression (issue 24, item 14): a read-only file or directory gave raw
/// SQLite errors ("attempt to write a readonly database") that named
/// neither cause nor fix. Run as another user than the file's owner (root
/// writes anything).
#[test]
fn a_read_only_database_says_why_and_what_to_do() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ro.db");
    ok(&relay(&path, &["submit", "-q", "q", "-k", "k"]));
    // A copy of the binary anyone may run, beside the file.
    let bin = dir.path().join("relay");
    std::fs::copy(RELAY, &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let mut cmd = Command::new(&bin);
    cmd.arg("--db")
        .arg(&path)
        .args(["submit", "-q", "q", "-k", "k"])
        .env_remove("RELAY_DB");
    // SAFETY: getuid has no preconditions and cannot fail.
    if unsafe { libc::getuid() } == 0 {
        cmd.uid(65534).gid(65534); // nobody
    }
    let out = cmd.output().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("read-only to this process"), "{err}");
    assert!(err.contains("write access to the file and its directory"), "{err}");
}

/// The README's retention commands, as written: the queue's own settings
/// are shown beside the defaults they leave, a flag left out is unchanged,
/// and `relay prune` reports what it deleted.
#[test]
fn the_readme_retention_commands_run_as_written() {
    let db = db();
    let set = ok(&relay(
        &db.path,
        &["retention", "emails", "--succeeded", "1d", "--dead", "forever"],
    ));
    assert_eq!(
        set,
        "queue emails keeps: SUCCEEDED 1day, DEAD forever, CANCELLED 7days (default)\n"
    );
    let shown = ok(&relay(&db.path, &["retention", "emails"]));
    assert_eq!(shown, set);
    let again = ok(&relay(&db.path, &["retention", "emails", "--cancelled", "0s"]));
    assert_eq!(
        again,
        "queue emails keeps: SUCCEEDED 1day, DEAD forever, CANCELLED 0s\n"
    );
    let id = ok(&relay(&db.path, &["submit", "-q", "emails", "-k", "send"]));
    ok(&relay(&db.path, &["cancel", id.trim()]));
    let pruned = ok(&relay(&db.path, &["--keep-dead", "30d", "prune"]));
    assert!(
        pruned.starts_with("deleted 1 finished job past its retention in "),
        "{pruned}"
    );
    assert_eq!(relay(&db.path, &["show", id.trim()]).status.code(), Some(3));
}

/// The README's "Scheduled and retrying jobs" commands, run as written:
/// `relay stats` prints what the README shows, and `relay jobs` its header
/// and a row that says when the job runs.
#[test]
fn the_readme_scheduled_commands_run_as_written() {
    let readme = include_str!("../../../README.md");
    let section = readme
        .split("## Scheduled and retrying jobs")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("the README's section and its commands");
    let lines: Vec<&str> = section.lines().collect();
    assert_eq!(lines[0], "relay submit -q emails -k digest --delay 1h");
    assert_eq!(lines[1], "relay stats");
    assert_eq!(lines[4], "relay jobs --state scheduled");
    let shown = |l: &str| l.strip_prefix("# ").unwrap_or(l).to_owned();
    let db = db();
    let id = ok(&relay(
        &db.path,
        &["submit", "-q", "emails", "-k", "digest", "--delay", "1h"],
    ));
    assert_eq!(id, "1\n");
    let stats = ok(&relay(&db.path, &["stats"]));
    assert_eq!(stats, format!("{}\n{}\n", shown(lines[2]), shown(lines[3])));
    let jobs = ok(&relay(&db.path, &["jobs", "--state", "scheduled"]));
    let mut got = jobs.lines();
    assert_eq!(got.next(), Some(shown(lines[5]).as_str()));
    let row = got.next().unwrap_or_default();
    let want = shown(lines[6]);
    // The same row but for the times: created now, runs in an hour.
    assert_eq!(row[..51], want[..51], "{row}");
    assert!(row.contains("  in 59 min (") && row.ends_with(" UTC)  -"), "{row}");
    // Nothing is leased before its time.
    empty_lease(&relay(&db.path, &["lease", "--queue", "emails"]));
}

/// README, "Groups: a fair share for each tenant": its commands, run as
/// written, print what it shows.
#[test]
fn the_readme_group_commands_run_as_written() {
    let readme = include_str!("../../../README.md");
    let section = readme
        .split("## Groups: a fair share for each tenant")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("the README's section and its commands");
    let db = db();
    let mut shown = Vec::new();
    let mut printed = String::new();
    for line in section.lines() {
        if let Some(out) = line.strip_prefix("# ") {
            shown.push(out.to_owned());
            continue;
        }
        let args = shell_words(line);
        assert_eq!(args[0], "relay", "{line}");
        let args: Vec<&str> = args[1..].iter().map(String::as_str).collect();
        let out = ok(&relay(&db.path, &args));
        if args[0] == "lease" {
            printed = out;
        }
    }
    let want: String = shown.iter().map(|l| format!("{l}\n")).collect();
    assert_eq!(printed, want);
    // Its second block: a schedule with a group, listed (the next tick,
    // which depends on the day, read as a date-time).
    let schedules = readme
        .split("## Groups: a fair share for each tenant")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(2))
        .and_then(|s| s.split("```").next())
        .expect("the README's schedule block");
    let (mut shown, mut printed) = (Vec::new(), String::new());
    for line in schedules.lines() {
        if let Some(out) = line.strip_prefix("# ") {
            shown.push(out.to_owned());
            continue;
        }
        let args = shell_words(line);
        let args: Vec<&str> = args[1..].iter().map(String::as_str).collect();
        printed = ok(&relay(&db.path, &args));
    }
    let tick = |s: &str| -> String {
        s.split(' ')
            .map(|w| {
                if w.len() == 24 && w.ends_with('Z') && w.as_bytes()[10] == b'T' {
                    "<tick>"
                } else {
                    w
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let want: Vec<String> = shown.iter().map(|l| tick(l)).collect();
    let got: Vec<String> = printed.lines().map(tick).collect();
    assert_eq!(got, want);
}

/// A command line as the README writes it: words, and '...' kept whole.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut rest = line.trim();
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('\'') {
            let end = quoted.find('\'').expect("a closing quote");
            words.push(quoted[..end].to_owned());
            rest = quoted[end + 1..].trim_start();
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            words.push(rest[..end].to_owned());
            rest = rest[end..].trim_start();
        }
    }
    words
}

/// README, "PostgreSQL": its commands through PgBouncer in transaction
/// mode, run as written, against the test's server and a real PgBouncer in
/// front of it (the README's ports are `scripts/pg-dev`'s: 55432 the
/// server, 56432 the pooler).
#[test]
fn the_readme_pgbouncer_commands_run_as_written() {
    use relay_storetest::pg::{PgBouncer, PgServer};
    let readme = include_str!("../../../README.md");
    let section = readme
        .split("Behind PgBouncer in transaction mode")
        .nth(1)
        .and_then(|s| s.split("```sh\n").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("the README's paragraph and its commands");
    let direct = PgServer::shared().new_database();
    let name = direct.rsplit_once('/').unwrap().1.to_owned();
    let pooled = PgBouncer::shared().url_of(&name);
    let mut lines = section.lines();
    assert_eq!(
        lines.next(),
        Some("scripts/pg-dev start && scripts/pg-dev pgbouncer && scripts/pg-dev createdb jobs")
    );
    let mut env = Vec::new();
    let mut outputs = Vec::new();
    let mut shown = Vec::new();
    for line in lines {
        let line = line
            .replace("postgres://postgres@127.0.0.1:55432/jobs", &direct)
            .replace("postgres://postgres@127.0.0.1:56432/jobs", &pooled);
        if let Some(out) = line.strip_prefix("# ") {
            shown.push((outputs.len(), out.to_owned()));
        } else if let Some(set) = line.strip_prefix("export ") {
            let (k, v) = set.split_once('=').unwrap();
            env.push((k.to_owned(), v.to_owned()));
        } else {
            let words = shell_words(&line);
            assert_eq!(words[0], "relay", "{line}");
            let out = Command::new(RELAY)
                .args(&words[1..])
                .env_remove("RELAY_DB")
                .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .output()
                .unwrap();
            outputs.push(ok(&out));
        }
    }
    assert_eq!(env.len(), 2);
    assert_eq!(outputs.len(), 2);
    for (after, want) in shown {
        assert_eq!(outputs[after - 1].trim_end(), want);
    }
    let leased: Vec<&str> = outputs[1].trim_end().split('\t').collect();
    assert_eq!(leased, ["1", "1", "send", "1", r#"{"to":"ada"}"#]);
}

/// Issue 39, item 6: a nack's error, a payload or a kind may hold control
/// characters, and `relay show`, `relay jobs`, `relay lease` and `relay
/// events` printed them raw: a worker could clear an operator's screen or
/// retitle the terminal. Every control character (but line break and tab) and
/// every bidirectional override is now printed escaped; `--json` is JSON.
/// Seen failing before the fix: ESC reached stdout.
#[test]
fn text_from_the_store_cannot_drive_the_terminal() {
    let db = db();
    let hostile = "\u{1b}[2J\u{1b}]0;pwned\u{7}\rover\u{202e}drawn";
    // Kinds and queues refuse control characters; payloads and errors
    // are the caller's text.
    let id = ok(&relay(&db.path, &["submit", "-q", "q", "-k", "k", hostile]));
    let id = id.trim();
    let leased = ok(&relay(&db.path, &["lease", "-q", "q"]));
    let token = leased.split('\t').nth(1).unwrap().to_owned();
    ok(&relay(&db.path, &["nack", id, "--token", &token, "--error", hostile]));
    for args in [vec!["show", id], vec!["events", id]] {
        let out = ok(&relay(&db.path, &args));
        assert!(
            !out.chars()
                .any(|c| (c.is_control() && c != '\n' && c != '\t') || c == '\u{202e}'),
            "{args:?} printed a control character: {out:?}"
        );
    }
    let shown = ok(&relay(&db.path, &["show", id]));
    assert!(shown.contains("\\u{1b}[2J"), "show writes the escape out: {shown}");
    assert!(!leased.contains('\u{1b}'), "{leased:?}");
    let shown = ok(&relay(&db.path, &["--json", "show", id]));
    assert!(!shown.chars().any(|c| c == '\u{1b}' || c == '\u{202e}'), "{shown:?}");
    let job: Value = serde_json::from_str(shown.trim()).unwrap();
    assert_eq!(job["last_error"], hostile, "--json keeps the text as stored");
}

/// Issue 40: `relay show` lists a job's recorded steps, a line each (name,
/// attempt, time, size, the output cut to 120 characters); `--json` has
/// them whole.
#[test]
fn show_lists_a_jobs_steps() {
    let db = db();
    ok(&relay(&db.path, &["submit", "--queue", "q", "--kind", "k", "{}"]));
    let shown = ok(&relay(&db.path, &["show", "1"]));
    assert!(shown.contains("steps            -\n"), "{shown}");
    {
        let r = relay::Relay::open(&db.path).unwrap();
        let l = r.lease(relay::LeaseRequest::new(["q"])).unwrap().remove(0);
        r.record_step(l.id, l.token, "charge", br#"{"charge": "ch_1"}"#.to_vec())
            .unwrap();
        r.record_step(l.id, l.token, "long", format!("\"{}\"", "x".repeat(500)).into_bytes())
            .unwrap();
    }
    let shown = ok(&relay(&db.path, &["show", "1"]));
    let lines: Vec<&str> = shown.lines().filter(|l| l.contains("(attempt 1, at ")).collect();
    assert_eq!(lines.len(), 2, "{shown}");
    assert!(
        lines[0].starts_with("steps            charge (attempt 1, at ")
            && lines[0].ends_with(r#", 18 bytes) {"charge":"ch_1"}"#),
        "{shown}"
    );
    assert!(lines[1].starts_with("                 long (attempt 1, at "), "{shown}");
    assert!(
        lines[1].ends_with(&format!("502 bytes) \"{}...", "x".repeat(119))),
        "{shown}"
    );
    let json = json_lines(&relay(&db.path, &["--json", "show", "1"]));
    assert_eq!(json[0]["steps"][1]["output"].as_str().map(str::len), Some(500));
}

/// Issue 40: `relay emit KEY [PAYLOAD]` wakes the jobs waiting for the key
/// and says so; a second emit of the key changes nothing; `--json` answers
/// the call's own object.
#[test]
fn emit_wakes_the_jobs_waiting_for_its_key() {
    let db = db();
    ok(&relay(&db.path, &["submit", "--queue", "q", "--kind", "k", "{}"]));
    {
        let r = relay::Relay::open(&db.path).unwrap();
        let l = r.lease(relay::LeaseRequest::new(["q"])).unwrap().remove(0);
        let until = relay::Clock::now(&relay::SystemClock).plus(std::time::Duration::from_secs(3600));
        r.wait(l.id, l.token, "shipment", "shipped:1", until).unwrap();
    }
    let said = ok(&relay(&db.path, &["emit", "shipped:1", r#"{"tracking":"1Z"}"#]));
    assert_eq!(said, "event shipped:1 emitted: woke 1 job\n");
    let said = ok(&relay(&db.path, &["emit", "shipped:1", "later"]));
    assert_eq!(said, "event shipped:1 was emitted before: nothing changed\n");
    let json = json_lines(&relay(&db.path, &["--json", "emit", "other"]));
    assert_eq!(json[0], serde_json::json!({"first": true, "woken": 0}));
    let shown = json_lines(&relay(&db.path, &["--json", "show", "1"]));
    assert_eq!(shown[0]["state"], "READY");
    assert_eq!(
        shown[0]["steps"][0]["output"],
        serde_json::json!({"event": {"tracking": "1Z"}})
    );
    fails(&relay(&db.path, &["emit", ""]), 2, "event key");
}

/// Issue 40 item 6: `relay retry ID --reset-steps` runs a DEAD job again
/// with its steps forgotten; plain `relay retry` keeps them; the flag takes
/// one job id, not a filter.
#[test]
fn retry_reset_steps_forgets_the_steps() {
    let db = db();
    ok(&relay(
        &db.path,
        &["submit", "--queue", "q", "--kind", "k", "--max-attempts", "1", "{}"],
    ));
    let fail_with_a_step = || {
        let r = relay::Relay::open(&db.path).unwrap();
        let l = r.lease(relay::LeaseRequest::new(["q"])).unwrap().remove(0);
        r.record_step(l.id, l.token, "charge", b"1".to_vec())
            .unwrap_or_default();
        r.nack(l.id, l.token, "boom", None).unwrap();
    };
    fail_with_a_step();
    ok(&relay(&db.path, &["retry", "1"]));
    let shown = json_lines(&relay(&db.path, &["--json", "show", "1"]));
    assert_eq!(shown[0]["steps"].as_array().map(Vec::len), Some(1), "kept");
    fail_with_a_step();
    assert_eq!(
        ok(&relay(&db.path, &["retry", "1", "--reset-steps"])).trim(),
        "job 1 READY"
    );
    let shown = json_lines(&relay(&db.path, &["--json", "show", "1"]));
    assert!(shown[0].get("steps").is_none(), "forgotten: {}", shown[0]);
    fails(
        &relay(&db.path, &["retry", "--reset-steps", "--queue", "q"]),
        2,
        "one job id",
    );
}

/// Issue 42: an empty lease is not silence. `relay lease` on a queue that
/// has never had a job (a typo) says so on stderr, `--json` prints an
/// empty list; on a known queue with nothing ready it says only that.
/// `pause` of a queue nothing has used pauses it and says so. Seen failing
/// before: nothing printed at all.
#[test]
fn an_empty_lease_and_a_pause_of_an_unknown_queue_say_so() {
    let d = db();
    ok(&relay(&d.path, &["submit", "-q", "emails", "-k", "send"]));
    let out = relay(&d.path, &["lease", "-q", "emials"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "relay: no job to lease in emials (queue emials has never had a job: is its name right?)\n"
    );
    let out = relay(&d.path, &["--json", "lease", "-q", "emials"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "[]\n");
    ok(&relay(&d.path, &["lease", "-q", "emails"]));
    let out = relay(&d.path, &["lease", "-q", "emails"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "relay: no job to lease in emails\n"
    );
    let out = relay(&d.path, &["pause", "emials"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("queue emials has never had a job: is its name right?); it is paused for the jobs to come"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Known now (paused): no note.
    let out = relay(&d.path, &["pause", "emials"]);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// Issue 42: a text result (what `relay work --exec 'echo sent ...'`
/// stores) is shown as text by `relay show`, not base64; bytes that are
/// not text still are. Seen failing before: `result  base64:c2VudC...`.
#[test]
fn show_prints_a_text_result_as_text() {
    let d = db();
    let r = relay::Relay::open(&d.path).unwrap();
    let mut ids = Vec::new();
    for result in [
        b"sent to ada\n".to_vec(),
        b"line 1\nline 2\n".to_vec(),
        vec![0xff, 0x00],
    ] {
        let id = r.submit(relay::NewJob::new("q", "k", Vec::new())).unwrap();
        let l = r.lease(relay::LeaseRequest::new(["q"])).unwrap().remove(0);
        r.ack(id, l.token, Some(result)).unwrap();
        ids.push(id.0.to_string());
    }
    drop(r);
    let result = |id: &str| -> String {
        let shown = ok(&relay(&d.path, &["show", id]));
        shown
            .lines()
            .find_map(|l| l.strip_prefix("result"))
            .unwrap_or_else(|| panic!("no result line: {shown}"))
            .trim()
            .to_owned()
    };
    assert_eq!(result(&ids[0]), "sent to ada");
    assert_eq!(result(&ids[1]), r"line 1\nline 2");
    assert_eq!(result(&ids[2]), "base64:/wA=");
}

/// Issue 42: a payload that begins as JSON and does not parse (the shell
/// ate its quotes) is stored as text, as before, but with a note saying
/// so; plain text and valid JSON pass without a word.
#[test]
fn a_payload_that_looks_like_broken_json_gets_a_note() {
    let d = db();
    let out = relay(&d.path, &["submit", "-q", "q", "-k", "k", "{to: ada}"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("relay: note: the payload looks like JSON but is not (")
            && err.contains("stored as 9 bytes of text"),
        "{err}"
    );
    ok(&relay(&d.path, &["submit", "-q", "q", "-k", "k", "plain words"]));
    ok(&relay(&d.path, &["submit", "-q", "q", "-k", "k", r#"{"to":"ada"}"#]));
}

/// Issue 42: `relay list` lists jobs (clap suggested `limit` for it).
#[test]
fn list_is_jobs() {
    let d = db();
    ok(&relay(&d.path, &["submit", "-q", "q", "-k", "k"]));
    assert_eq!(
        ok(&relay(&d.path, &["--json", "list"])),
        ok(&relay(&d.path, &["--json", "jobs"]))
    );
}
