//! `relay work --exec` with real shell commands.

use relay::{JobId, JobState, NewJob, Relay};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RELAY: &str = env!("CARGO_BIN_EXE_relay");

/// Runs `relay work --queue q ARGS` until every job of `ids` is finished,
/// then stops it with SIGTERM and returns what it printed.
fn run_until_finished(db: &Path, relay: &Relay, ids: &[JobId], args: &[&str]) -> std::process::Output {
    let child = Command::new(RELAY)
        .arg("--db")
        .arg(db)
        .args(["work", "--queue", "q"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ids.iter().all(|id| relay.get(*id).unwrap().state().is_finished()) {
        assert!(Instant::now() < deadline, "jobs did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    child.wait_with_output().unwrap()
}

/// Submits `jobs` (kind, payload, max attempts), runs `relay work --exec
/// CMD --json EXTRA...` until every job is finished, stops it with SIGTERM
/// and returns the JSON lines it printed.
fn work(db: &Path, jobs: &[(&str, &str, u32)], cmd: &str, extra: &[&str]) -> (Relay, Vec<JobId>, Vec<Value>) {
    let relay = Relay::open(db).unwrap();
    let ids: Vec<JobId> = jobs
        .iter()
        .map(|(k, p, n)| {
            relay
                .submit(NewJob::new("q", *k, p.as_bytes().to_vec()).max_attempts(*n))
                .unwrap()
        })
        .collect();
    let mut args = vec!["--concurrency", "2", "--json", "--exec", cmd];
    args.extend_from_slice(extra);
    let out = run_until_finished(db, &relay, &ids, &args);
    assert!(
        out.status.success(),
        "relay work exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "quiet when stderr is not a terminal: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (relay, ids, lines)
}

#[test]
fn exit_zero_acks_with_stdout_and_the_job_environment() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = r#"read x; echo "$x from $RELAY_JOB_KIND #$RELAY_JOB_ID in $RELAY_QUEUE, attempt $RELAY_ATTEMPT""#;
    let (relay, ids, lines) = work(&dir.path().join("a.db"), &[("greet", "hello", 1)], cmd, &[]);
    let job = relay.get(ids[0]).unwrap();
    assert_eq!(job.state(), JobState::Succeeded);
    assert_eq!(
        job.result.as_deref(),
        Some(&b"hello from greet #1 in q, attempt 1\n"[..])
    );
    assert_eq!(
        (lines[0]["id"].as_i64(), lines[0]["outcome"].as_str()),
        (Some(1), Some("succeeded"))
    );
}

#[test]
fn a_failing_command_nacks_with_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = "echo 'lots of noise' >&2; echo 'disk on fire' >&2; exit 3";
    let (relay, ids, lines) = work(&dir.path().join("b.db"), &[("k", "", 1)], cmd, &[]);
    let job = relay.get(ids[0]).unwrap();
    assert_eq!(job.state(), JobState::Dead);
    assert_eq!(
        job.status.last_error.as_deref(),
        Some("exit status 3: lots of noise\ndisk on fire")
    );
    assert_eq!(lines[0]["outcome"], "dead");
}

#[test]
fn a_hanging_command_is_killed_with_everything_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let cmd = format!("sleep 300 & echo $! > {}; sleep 300", pidfile.display());
    let start = Instant::now();
    // Long enough for the shell to start its child and write the pid file
    // on a loaded machine.
    let (relay, ids, _) = work(&dir.path().join("c.db"), &[("k", "", 1)], &cmd, &["--timeout", "3s"]);
    assert!(start.elapsed() < Duration::from_secs(20));
    let job = relay.get(ids[0]).unwrap();
    assert_eq!(job.state(), JobState::Dead);
    assert_eq!(job.status.last_error.as_deref(), Some("timed out after 3s"));
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    assert!(pid.parse::<u32>().is_ok(), "the pid file holds {pid:?}");
    // Gone, or a zombie waiting for its reaper: either way no longer running.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("gone");
    assert!(
        matches!(state, "gone" | "Z" | "X"),
        "the command's child {pid} still runs: state {state}"
    );
}

#[test]
fn lines_on_fd_3_become_progress_events() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = r#"echo '{"pct": 50}' >&3; echo 'half way there' >&3; echo '{"progress": 50}' >&3; echo '{"progress": 0.5, "eta": 3}' >&3; echo '{"progress": 0.75, "message": "3 of 4"}' >&3; echo ok"#;
    let (relay, ids, _) = work(&dir.path().join("d.db"), &[("k", "", 1)], cmd, &[]);
    let events = relay.events(ids[0]).unwrap();
    let progress: Vec<Value> = events
        .iter()
        .filter(|e| e.kind == "progress")
        .map(|e| e.data.clone())
        .collect();
    assert_eq!(
        progress,
        [
            serde_json::json!({"pct": 50}),
            serde_json::json!("half way there"),
            // A percentage is refused as a report: kept as written.
            serde_json::json!({"progress": 50}),
            // More than a report: an event as written.
            serde_json::json!({"progress": 0.5, "eta": 3}),
            serde_json::json!({"fraction": 0.75, "message": "3 of 4"})
        ]
    );
    let job = relay.get(ids[0]).unwrap();
    assert_eq!(job.state(), JobState::Succeeded);
    // A line with a "progress" number is a report kept on the job.
    let kept = job.progress.expect("the report is kept on the job");
    assert_eq!(
        (kept.fraction, kept.message.as_deref(), kept.attempt),
        (0.75, Some("3 of 4"), 1)
    );
}

#[test]
fn many_jobs_mixed_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let jobs: Vec<(&str, &str, u32)> = (0..10)
        .map(|i| ("k", if i % 3 == 0 { "fail" } else { "ok" }, 1))
        .collect();
    let cmd = r#"read x; [ "$x" = ok ]"#;
    let (relay, ids, lines) = work(&dir.path().join("e.db"), &jobs, cmd, &[]);
    let dead = ids
        .iter()
        .filter(|id| relay.get(**id).unwrap().state() == JobState::Dead)
        .count();
    assert_eq!(dead, 4);
    assert_eq!(lines.len(), 10);
    assert_eq!(lines.iter().filter(|l| l["outcome"] == "succeeded").count(), 6);
}

/// Without a terminal and without --json, `relay work` logs one line per
/// job outcome on stderr, and a summary when it stops.
#[test]
fn without_a_terminal_each_outcome_is_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("log.db");
    let relay = Relay::open(&db).unwrap();
    let ok = relay
        .submit(NewJob::new("q", "greet", b"hi".to_vec()).max_attempts(1))
        .unwrap();
    let bad = relay
        .submit(NewJob::new("q", "boom", b"x".to_vec()).max_attempts(1))
        .unwrap();
    let cmd = r#"if [ "$RELAY_JOB_KIND" = boom ]; then echo "it broke" >&2; exit 3; fi; cat"#;
    let out = run_until_finished(&db, &relay, &[ok, bad], &["--exec", cmd]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("job {ok} (greet) attempt 1 succeeded")), "{err}");
    assert!(
        err.contains(&format!("job {bad} (boom) attempt 1 dead: ")) && err.contains("it broke"),
        "{err}"
    );
    assert!(err.contains("stopped: 1 succeeded"), "{err}");
}

/// A job's trace context reaches its command as RELAY_TRACEPARENT and
/// TRACEPARENT (`relay submit --traceparent`, or TRACEPARENT in the
/// submitter's environment); a job without one gets neither, even when the
/// runner's own environment has a TRACEPARENT.
#[test]
fn the_trace_context_reaches_the_command() {
    const A: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const B: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("trace.db");
    let submit = |args: &[&str], env: Option<&str>| -> JobId {
        let mut cmd = Command::new(RELAY);
        cmd.arg("--db")
            .arg(&db)
            .args(["submit", "--queue", "q", "--kind", "k"])
            .args(args);
        cmd.env_remove("TRACEPARENT");
        if let Some(tp) = env {
            cmd.env("TRACEPARENT", tp);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        JobId(String::from_utf8(out.stdout).unwrap().trim().parse().unwrap())
    };
    let flagged = submit(&["--traceparent", A], None);
    let from_env = submit(&[], Some(B));
    let plain = submit(&[], None);
    let bad = Command::new(RELAY)
        .arg("--db")
        .arg(&db)
        .args(["submit", "--queue", "q", "--kind", "k", "--traceparent", "00-nope"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "a malformed trace context is bad usage");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("traceparent"));

    let relay = Relay::open(&db).unwrap();
    let ids = [flagged, from_env, plain];
    let mut child = Command::new(RELAY)
        .arg("--db")
        .arg(&db)
        .args([
            "work",
            "--queue",
            "q",
            "--exec",
            r#"printf '%s|%s' "$RELAY_TRACEPARENT" "$TRACEPARENT""#,
        ])
        .env("TRACEPARENT", "00-11111111111111111111111111111111-2222222222222222-01")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ids.iter().all(|id| relay.get(*id).unwrap().state().is_finished()) {
        assert!(Instant::now() < deadline, "jobs did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let _ = child.wait();
    let result = |id: JobId| String::from_utf8(relay.get(id).unwrap().result.unwrap_or_default()).unwrap();
    assert_eq!(result(flagged), format!("{A}|{A}"));
    assert_eq!(result(from_env), format!("{B}|{B}"));
    assert_eq!(
        result(plain),
        "|",
        "no trace context, and none inherited from the runner"
    );
}

/// A handler that kills its own worker process (as a crashing native
/// library or the OOM killer would): each restarted worker leases the job
/// again once the dead one's lease expires, and the third expiry makes it
/// DEAD as a poison pill, with attempts left and each expiry's worker in
/// its log, while a job beside it succeeds.
#[test]
fn a_handler_that_kills_its_worker_ends_dead_after_three_expiries() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("q.db");
    let relay = Relay::open(&db).unwrap();
    let crash = relay
        .submit(NewJob::new("q", "crash", Vec::new()).max_attempts(10))
        .unwrap();
    let fine = relay.submit(NewJob::new("q", "fine", Vec::new())).unwrap();
    let cmd = r#"if [ "$RELAY_JOB_KIND" = crash ]; then kill -9 "$PPID"; sleep 5; fi; echo ok"#;
    let mut killed = 0;
    for restart in 0..6 {
        if relay.get(crash).unwrap().state() == JobState::Dead {
            break;
        }
        let mut child = Command::new(RELAY)
            .arg("--db")
            .arg(&db)
            .args(["work", "--queue", "q", "--lease-for", "1s", "--exec", cmd])
            .args(["--worker", &format!("w{restart}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Killed by its handler, or idle once the job is DEAD.
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                use std::os::unix::process::ExitStatusExt;
                assert_eq!(status.signal(), Some(9), "killed by its handler: {status:?}");
                killed += 1;
                break;
            }
            if relay.get(crash).unwrap().state() == JobState::Dead || Instant::now() > deadline {
                child.kill().unwrap();
                child.wait().unwrap();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let job = relay.get(crash).unwrap();
    assert_eq!(
        (job.state(), job.status.last_error.as_deref()),
        (
            JobState::Dead,
            Some("its lease expired 3 times: it may be crashing its worker")
        ),
        "after {killed} workers killed"
    );
    assert_eq!(killed, 3, "one worker killed per expiry");
    assert!(job.status.attempts < job.status.max_attempts, "attempts were left");
    let workers: Vec<String> = relay
        .events(crash)
        .unwrap()
        .iter()
        .filter(|e| e.kind == "expired")
        .map(|e| e.data["worker"].as_str().unwrap_or_default().to_owned())
        .collect();
    // Each lease names the run that held it: its worker id, the name with
    // a random suffix (issue 39: leases name ids, which only their worker's
    // record can claim).
    assert_eq!(workers.len(), 3, "{workers:?}");
    for (i, w) in workers.iter().enumerate() {
        let suffix = w.strip_prefix(&format!("w{i}-")).unwrap_or_default();
        assert!(
            suffix.len() == 8 && suffix.chars().all(|c| c.is_ascii_hexdigit()),
            "{workers:?}"
        );
    }
    assert_eq!(relay.get(fine).unwrap().state(), JobState::Succeeded);
}
