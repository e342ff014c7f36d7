//! `relay workers` with real worker processes: one killed with SIGKILL
//! shows as gone and its jobs' leases as orphaned until they expire; one
//! stopped with SIGTERM shows as stopped. On a file and through a server.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RELAY: &str = env!("CARGO_BIN_EXE_relay");

/// The global flags that reach the store: `--db PATH` or `--server URL`.
fn relay(target: &[String], args: &[&str]) -> std::process::Output {
    common::relay_command(RELAY).args(target).args(args).output().unwrap()
}

fn workers(target: &[String]) -> Vec<serde_json::Value> {
    let out = relay(target, &["--json", "workers"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["workers"].as_array().cloned().unwrap_or_default()
}

/// Waits until `relay workers` shows one worker for which `ok` holds.
fn wait_for(target: &[String], what: &str, ok: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all = workers(target);
        if let Some(w) = all.iter().find(|w| ok(w)) {
            return w.clone();
        }
        assert!(Instant::now() < deadline, "never {what}: {all:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A `relay work` process in a process group of its own (its commands
/// with it), running `sleep 60` for each job.
fn spawn_worker(target: &[String]) -> common::KillOnDrop {
    use std::os::unix::process::CommandExt;
    common::KillOnDrop(
        common::relay_command(RELAY)
            .args(target)
            .args(["work", "-q", "q", "-c", "2", "--exec", "sleep 60", "--lease-for", "3s"])
            .args(["--beat-every", "300ms", "--grace", "100ms"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap(),
    )
}

fn signal_group(child: &std::process::Child, signal: &str) {
    let group = format!("-{}", child.id());
    assert!(Command::new("kill")
        .args([signal, "--", &group])
        .status()
        .unwrap()
        .success());
}

fn a_killed_worker_is_gone_and_its_leases_orphaned(target: &[String]) {
    for _ in 0..3 {
        assert!(relay(target, &["submit", "-q", "q", "-k", "k"]).status.success());
    }
    let mut worker = spawn_worker(target);
    let alive = wait_for(target, "alive with two jobs", |w| {
        w["state"] == "alive" && w["running"].as_array().map_or(0, Vec::len) == 2
    });
    assert_eq!(alive["pid"], worker.0.id());
    assert_eq!(alive["queues"], serde_json::json!(["q"]));
    assert_eq!(alive["concurrency"], 2);
    assert!(alive["orphaned"].as_array().unwrap().is_empty());
    let text = String::from_utf8(relay(target, &["workers"]).stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with(alive["id"].as_str().unwrap()))
        .unwrap_or_default();
    assert!(line.contains(" alive ") && line.contains("[q]"), "{text}");
    assert!(text.contains("    runs job "), "{text}");
    signal_group(&worker.0, "-KILL");
    let _ = worker.0.wait();
    let id = alive["id"].clone();
    let gone = wait_for(target, "gone", |w| w["id"] == id && w["state"] == "gone");
    let orphaned: Vec<i64> = gone["orphaned"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_i64().unwrap())
        .collect();
    let running: Vec<i64> = alive["running"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_i64().unwrap())
        .collect();
    assert_eq!(orphaned, running, "its two leases are orphaned: {gone:#}");
    let text = String::from_utf8(relay(target, &["workers"]).stdout).unwrap();
    assert!(text.contains(" gone ") && text.contains("    orphaned: job "), "{text}");
    // Its leases expire (3 s) and are reclaimed: no longer orphaned.
    wait_for(target, "without orphans once the leases expired", |w| {
        w["id"] == id && w["state"] == "gone" && w["orphaned"].as_array().is_some_and(Vec::is_empty)
    });
}

fn a_worker_stopped_by_sigterm_says_so(target: &[String]) {
    let mut worker = spawn_worker(target);
    let alive = wait_for(target, "alive", |w| w["state"] == "alive" && w["pid"] == worker.0.id());
    signal_group(&worker.0, "-TERM");
    assert!(worker.0.wait().unwrap().success());
    let id = alive["id"].clone();
    let stopped = wait_for(target, "stopped", |w| w["id"] == id);
    assert_eq!(stopped["state"], "stopped", "{stopped:#}");
    assert!(stopped["stopped_at"].is_string());
    assert!(stopped["running"].as_array().unwrap().is_empty());
}

#[test]
fn workers_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = vec![
        "--db".to_owned(),
        dir.path().join("w.db").to_string_lossy().into_owned(),
    ];
    a_killed_worker_is_gone_and_its_leases_orphaned(&target);
    a_worker_stopped_by_sigterm_says_so(&target);
}

#[test]
fn workers_through_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, url) = common::serve(RELAY, &dir.path().join("w.db"), &[]);
    let target = vec!["--server".to_owned(), url];
    a_killed_worker_is_gone_and_its_leases_orphaned(&target);
    a_worker_stopped_by_sigterm_says_so(&target);
}
