//! What the tests that start `relay serve` share.

#![allow(dead_code)] // each test file uses its own part

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStderr, Command, Stdio};

/// `relay` (the binary at `bin`) with the environment's RELAY_DB,
/// RELAY_SERVER and RELAY_TOKEN taken out: a test says what it means.
pub fn relay_command(bin: &str) -> Command {
    let mut c = Command::new(bin);
    c.env_remove("RELAY_DB")
        .env_remove("RELAY_SERVER")
        .env_remove("RELAY_TOKEN");
    c
}

/// `relay --db DB GLOBAL... serve` on a free port of 127.0.0.1, without a
/// token; its URL, and its stderr drained from there on. Killed when the
/// guard drops.
pub fn serve(bin: &str, db: &Path, global: &[&str]) -> (KillOnDrop, String) {
    let mut server = KillOnDrop(
        relay_command(bin)
            .arg("--db")
            .arg(db)
            .args(global)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stderr(Stdio::piped())
            .spawn()
            .expect("relay serve starts"),
    );
    let (err, url) = server_url(&mut server.0);
    std::thread::spawn(move || for _ in err.lines() {});
    (server, url)
}

/// The URL `relay serve` prints on its first stderr line, and the rest of
/// its stderr for later reading. The child must have `stderr(Stdio::piped())`.
pub fn server_url(child: &mut Child) -> (BufReader<ChildStderr>, String) {
    let mut err = BufReader::new(child.stderr.take().expect("stderr piped"));
    let mut line = String::new();
    err.read_line(&mut line).expect("relay serve's first line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in relay serve's first line {line:?}"))
        .to_owned();
    (err, url)
}

/// Kills the process when the test ends, even on a failed assertion.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
