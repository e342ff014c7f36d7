//! What the tests that start `relay serve` share.

#![allow(dead_code)] // each test file uses its own part

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStderr};

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
