//! relay-load against a real server on loopback, and against nothing.

use std::process::Command;

const LOAD: &str = env!("CARGO_BIN_EXE_relay-load");

#[test]
fn a_run_without_any_success_fails_with_the_first_error() {
    // Nothing listens on port 1.
    let out = Command::new(LOAD)
        .args([
            "--url",
            "http://127.0.0.1:1",
            "--connections",
            "2",
            "--seconds",
            "0.3",
            "--warmup",
            "0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no call succeeded with 2 connection(s); first error: POST /v1/jobs:"),
        "{err}"
    );
    assert!(
        !String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.starts_with("| 2 ")),
        "no result row for a failed step"
    );
}

#[test]
fn a_sweep_against_a_live_server_reports_each_step() {
    let dir = tempfile::tempdir().unwrap();
    let relay = relay::Relay::open(dir.path().join("load.db")).unwrap();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let s = relay_server::Server::bind(relay, relay_server::ServerConfig::new("127.0.0.1:0".parse().unwrap()))
                .await
                .unwrap();
            addr_tx.send(s.local_addr().unwrap()).unwrap();
            s.run(async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
    });
    let addr = addr_rx.recv().unwrap();
    let pid = std::process::id().to_string();
    let url = format!("http://{addr}");
    let out = Command::new(LOAD)
        .args([
            "--url",
            &url,
            "--pid",
            &pid,
            "--connections",
            "1,4",
            "--seconds",
            "2",
            "--warmup",
            "0.2",
            "--json",
        ])
        .output()
        .unwrap();
    let _ = stop.send(());
    server.join().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines
            .iter()
            .map(|l| l["connections"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [1, 4]
    );
    for l in &lines {
        for op in ["submit", "lease", "ack"] {
            assert!(l[op]["per_sec"].as_f64().unwrap() > 0.0, "{l}");
            assert!(l[op]["p50_us"].as_f64() <= l[op]["p99_us"].as_f64());
        }
        assert_eq!(l["errors"], 0, "{l}");
        assert!(l["server_cpu_percent"].as_f64().is_some() && l["server_peak_rss_bytes"].as_u64().unwrap() > 0);
    }
}
