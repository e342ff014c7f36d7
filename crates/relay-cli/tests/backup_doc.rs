//! The backup procedure of docs/ARCHITECTURE.md ("Backups"), run as written
//! while `relay serve` answers submits on the same file.

mod common;

use std::process::{Command, Stdio};

const RELAY: &str = env!("CARGO_BIN_EXE_relay");

/// The `sh` block that follows the "**Backups.**" item.
fn documented_commands() -> Vec<String> {
    let doc = include_str!("../../../docs/ARCHITECTURE.md");
    let from = doc
        .find("**Backups.**")
        .expect("docs/ARCHITECTURE.md has a Backups item");
    let rest = &doc[from..];
    let start = rest.find("```sh").expect("the Backups item has an sh block") + "```sh".len();
    let end = rest[start..].find("```").expect("the sh block ends") + start;
    rest[start..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_documented_backup_runs_while_relay_serves() {
    let commands = documented_commands();
    assert_eq!(commands.len(), 2, "{commands:?}");
    let dir = tempfile::tempdir().unwrap();
    let mut server = common::KillOnDrop(
        Command::new(RELAY)
            .args(["--db", "jobs.db", "serve", "--listen", "127.0.0.1:0"])
            .current_dir(dir.path())
            .env_remove("RELAY_TOKEN")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (_err, url) = common::server_url(&mut server.0);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let submit = |i: usize| {
        let res = agent
            .post(&format!("{url}/v1/jobs"))
            .send_json(serde_json::json!({"queue": "q", "kind": "k", "payload": i}))
            .unwrap();
        assert_eq!(res.status().as_u16(), 201);
    };
    (0..5).for_each(submit);
    let mut outputs = Vec::new();
    for command in &commands {
        let out = Command::new("sh")
            .args(["-c", command])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push(String::from_utf8_lossy(&out.stdout).trim().to_owned());
    }
    assert_eq!(outputs[1], "ok", "the integrity check of the copy");
    // The server goes on, and lost nothing to the backup.
    (5..8).for_each(submit);
    drop(server);
    let count = |db: &str| -> u64 {
        let out = Command::new(RELAY)
            .args(["--db", db, "--json", "stats"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["queues"]["q"]["READY"].as_u64().unwrap_or(0)
    };
    assert_eq!(
        count("jobs-backup.db"),
        5,
        "the copy holds the jobs submitted before it"
    );
    assert_eq!(count("jobs.db"), 8, "the served file lost a job");
}
