//! `relay serve` as a real process: it serves, refuses an open listener
//! without a token, and stops cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const RELAY: &str = env!("CARGO_BIN_EXE_relay");

#[test]
fn serves_over_http_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "# team tokens\nalpha-token\n\n").unwrap();
    let mut child = Command::new(RELAY)
        .arg("--db")
        .arg(dir.path().join("s.db"))
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .env_remove("RELAY_TOKEN")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .to_owned();
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let res = agent
        .post(&format!("{url}/v1/jobs"))
        .header("Authorization", "Bearer alpha-token")
        .send_json(serde_json::json!({"queue": "q", "kind": "k"}))
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);
    let res = agent.get(&format!("{url}/v1/stats")).call().unwrap();
    assert_eq!(res.status().as_u16(), 401);
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    assert!(rest.contains("relay: stopped"), "{rest}");
}

#[test]
fn refuses_an_open_listener_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(RELAY)
        .arg("--db")
        .arg(dir.path().join("s.db"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env_remove("RELAY_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("without a token"));
}
