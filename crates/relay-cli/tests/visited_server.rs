//! The reproduction from the reliability issue, with real processes:
//! `relay serve` answers submits and acks while a Prometheus scrape,
//! `sqlite3 .backup`, python3's sqlite3 and `relay stats` visit its file;
//! then it is killed -9. Every answered change must be on disk.
//!
//! Regression: the server's first read (`/metrics`) opened a read
//! connection, whose header check opened and closed the file outside
//! SQLite and so dropped the process's SHARED lock; the backup then
//! checkpointed and unlinked the live WAL, and jobs answered 201 afterwards
//! were gone after kill -9.

mod common;

use common::KillOnDrop;
use relay_storetest::visitors::{python_reader, shared_lock_holder, sqlite3_backup, wal};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};

const RELAY: &str = env!("CARGO_BIN_EXE_relay");

struct Server {
    url: String,
    agent: ureq::Agent,
}

impl Server {
    fn post(&self, path: &str, body: &Value) -> Value {
        let mut res = self.agent.post(&format!("{}{path}", self.url)).send_json(body).unwrap();
        let status = res.status().as_u16();
        let text = res.body_mut().read_to_string().unwrap();
        assert!((200..300).contains(&status), "POST {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    fn submit(&self, submitted: &mut Vec<i64>, n: usize) {
        for i in 0..n {
            let v = self.post(
                "/v1/jobs",
                &json!({"queue": "q", "kind": "k", "payload": format!("p{i}")}),
            );
            submitted.push(v["id"].as_i64().unwrap());
        }
    }

    fn lease_and_ack(&self, acked: &mut Vec<i64>, n: u32) {
        let v = self.post("/v1/lease", &json!({"queues": ["q"], "worker": "w", "max": n}));
        for job in v["jobs"].as_array().unwrap() {
            let id = job["id"].as_i64().unwrap();
            self.post(&format!("/v1/jobs/{id}/ack"), &json!({"token": job["token"]}));
            acked.push(id);
        }
    }
}

/// A program that opens the file: given its path and the jobs it holds.
type Visitor = dyn Fn(&Path, i64);

fn relay_stats(path: &Path) {
    let out = Command::new(RELAY).arg("--db").arg(path).arg("stats").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_served_file_loses_nothing_to_its_visitors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q.db");
    let mut child = KillOnDrop(
        Command::new(RELAY)
            .arg("--db")
            .arg(&path)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env_remove("RELAY_TOKEN")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let pid = i32::try_from(child.0.id()).unwrap();
    let (_err, url) = common::server_url(&mut child.0);
    let server = Server {
        url,
        agent: ureq::Agent::config_builder().http_status_as_error(false).build().into(),
    };
    let (mut submitted, mut acked) = (Vec::new(), Vec::new());
    server.submit(&mut submitted, 3);
    let mut metrics = server.agent.get(&format!("{}/metrics", server.url)).call().unwrap();
    assert_eq!(metrics.status().as_u16(), 200);
    let _ = metrics.body_mut().read_to_string().unwrap();
    let visitors: [(&str, &Visitor); 3] = [
        ("sqlite3 .backup", &|p, n| {
            sqlite3_backup(p, &p.with_extension("copy"), n)
        }),
        ("python3", &|p, _| python_reader(p)),
        ("relay stats", &|p, _| relay_stats(p)),
    ];
    for (name, visit) in visitors {
        visit(&path, submitted.len() as i64);
        assert!(wal(&path).exists(), "the server's live WAL was unlinked by {name}");
        assert_eq!(
            shared_lock_holder(&path),
            Some(pid),
            "the server lost its lock after {name}"
        );
        server.submit(&mut submitted, 3);
        server.lease_and_ack(&mut acked, 2);
    }
    drop(child); // SIGKILL
    assert_eq!(submitted.len(), 12);
    assert_eq!(acked.len(), 6);
    let conn = states_read_back(&path);
    for id in &submitted {
        let state = conn
            .get(id)
            .unwrap_or_else(|| panic!("job {id} was answered 201 and is gone"));
        if acked.contains(id) {
            assert_eq!(state, "SUCCEEDED", "the ack of job {id} was answered and is gone");
        }
    }
}

/// Every job's state, read back with the `relay` CLI after the kill.
fn states_read_back(path: &Path) -> std::collections::HashMap<i64, String> {
    let out = Command::new(RELAY)
        .arg("--db")
        .arg(path)
        .args(["--json", "jobs", "--limit", "1000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["id"].as_i64().unwrap(), v["state"].as_str().unwrap().to_owned())
        })
        .collect()
}
