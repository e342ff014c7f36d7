//! Starts `relay serve` (the `relay` binary next to the running one) on a
//! database, on a free loopback port; shared by the load generators.

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The server, its URL and pid.
pub fn spawn_server(db: &Path) -> Result<(Child, String, u32), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let relay = exe.with_file_name("relay");
    let mut child = Command::new(&relay)
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("RELAY_TOKEN")
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start {} (build it: cargo build --release --bin relay): {e}",
                relay.display()
            )
        })?;
    let mut line = String::new();
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let mut reader = std::io::BufReader::new(stderr);
    std::io::BufRead::read_line(&mut reader, &mut line).map_err(|e| e.to_string())?;
    std::thread::spawn(move || for _ in std::io::BufRead::lines(reader) {});
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .ok_or(format!("relay serve said: {line}"))?
        .to_owned();
    let pid = child.id();
    Ok((child, url, pid))
}
