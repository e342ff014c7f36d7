//! The network between Relay and PostgreSQL fails (issue "PostgreSQL beyond
//! one machine", acceptance 2): every packet to the server's port is
//! dropped for 5 s, as a cut cable or `netem loss 100%` would, by an
//! nftables rule the test makes and removes itself (root and Debian's
//! `nftables`, which `scripts/test-deps` installs; without root the test
//! says so and does nothing).

use relay::{Completion, Error, LeaseRequest, NewJob, Options, Relay};
use relay_storetest::pg::PgServer;
use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Drops every packet sent to a loopback port while it lives.
struct LinkDrop {
    table: String,
}

impl LinkDrop {
    fn new(port: u16) -> LinkDrop {
        let table = format!("relay_link_{}", std::process::id());
        let nft = |args: &[&str]| {
            let out = Command::new(nft_binary())
                .args(args)
                .output()
                .unwrap_or_else(|e| panic!("cannot run nft (install Debian's nftables: scripts/test-deps): {e}"));
            assert!(
                out.status.success(),
                "nft {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        nft(&["add", "table", "inet", &table]);
        let drop = LinkDrop { table };
        nft(&[
            "add",
            "chain",
            "inet",
            &drop.table,
            "out",
            "{ type filter hook output priority 0; }",
        ]);
        nft(&[
            "add",
            "rule",
            "inet",
            &drop.table,
            "out",
            "tcp",
            "dport",
            &port.to_string(),
            "drop",
        ]);
        drop
    }
}

impl Drop for LinkDrop {
    fn drop(&mut self) {
        let _ = Command::new(nft_binary())
            .args(["delete", "table", "inet", &self.table])
            .output();
    }
}

/// Debian puts `nft` in /usr/sbin, which a user's PATH may lack.
fn nft_binary() -> &'static str {
    if std::path::Path::new("/usr/sbin/nft").exists() {
        "/usr/sbin/nft"
    } else {
        "nft"
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// What the callers were told, by kind.
#[derive(Default)]
struct Told {
    /// Submits answered with their id: (id, payload).
    submitted: Vec<(relay::JobId, Vec<u8>)>,
    /// Acks answered Ok.
    acked: Vec<relay::JobId>,
    /// Errors, by their kind's name.
    errors: HashMap<&'static str, usize>,
    /// When the last call answered Ok.
    last_ok: Option<Instant>,
    /// The longest a call took.
    longest: Duration,
}

fn kind(e: &Error) -> &'static str {
    match e {
        Error::MaybeApplied(_) => "MaybeApplied",
        Error::Storage(_) => "Storage",
        Error::Busy => "Busy",
        Error::Closed => "Closed",
        _ => "other",
    }
}

/// Submits and acks run on four threads while the link to the server
/// drops for 5 s. Each of the Relay's connections gives up on a request
/// unanswered for 2 s (`tcp_user_timeout=2` in the URL), so the writers
/// meet the drop. Whatever a caller was told holds afterwards: every
/// submit answered with an id is there with its payload, every ack
/// answered Ok left its job SUCCEEDED; the calls that met the drop were
/// told `MaybeApplied`, `Storage` or `Busy` (never anything else, never a
/// panic); and once the link is back the writers connect again and calls
/// succeed.
#[test]
fn a_link_down_for_five_seconds_loses_nothing_acknowledged_and_the_writers_reconnect() {
    if !is_root() {
        eprintln!("SKIPPED: dropping a port's packets with nftables needs root");
        return;
    }
    let server = PgServer::private("");
    let url = server.new_database();
    let port: u16 = url
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .expect("a port in the test server's URL");
    let relay = Relay::connect(
        &format!("{url}?tcp_user_timeout=2&connect_timeout=2"),
        Options::default(),
    )
    .unwrap();
    let told = Mutex::new(Told::default());
    let stop = AtomicBool::new(false);
    let note = |started: Instant, r: Result<(), &Error>| {
        let mut t = told.lock().unwrap();
        t.longest = t.longest.max(started.elapsed());
        match r {
            Ok(()) => t.last_ok = Some(Instant::now()),
            Err(e) => *t.errors.entry(kind(e)).or_default() += 1,
        }
    };
    let (dropped_at, restored_at) = std::thread::scope(|s| {
        for p in 0..3 {
            let (relay, told, stop, note) = (&relay, &told, &stop, &note);
            s.spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let payload = format!("{p}-{i}").into_bytes();
                    i += 1;
                    let started = Instant::now();
                    match relay.submit(NewJob::new("q", "k", payload.clone())) {
                        Ok(id) => {
                            told.lock().unwrap().submitted.push((id, payload));
                            note(started, Ok(()));
                        }
                        Err(e) => note(started, Err(&e)),
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            });
        }
        {
            let (relay, told, stop, note) = (&relay, &told, &stop, &note);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let jobs = match relay.lease(LeaseRequest::new(["q"]).max(8).wait(Duration::from_millis(200))) {
                        Ok(jobs) => {
                            note(started, Ok(()));
                            jobs
                        }
                        Err(e) => {
                            note(started, Err(&e));
                            continue;
                        }
                    };
                    let acks = jobs.iter().map(|j| Completion::ack(j.id, j.token, None)).collect();
                    let started = Instant::now();
                    match relay.complete_batch(acks) {
                        Ok(answers) => {
                            for (job, answer) in jobs.iter().zip(answers) {
                                match answer {
                                    Ok(_) => {
                                        told.lock().unwrap().acked.push(job.id);
                                        note(started, Ok(()));
                                    }
                                    Err(e) => note(started, Err(&e)),
                                }
                            }
                        }
                        Err(e) => note(started, Err(&e)),
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_secs(2));
        let cut = LinkDrop::new(port);
        let dropped_at = Instant::now();
        std::thread::sleep(Duration::from_secs(5));
        drop(cut);
        let restored_at = Instant::now();
        // Long enough for every writer to connect again.
        std::thread::sleep(Duration::from_secs(8));
        stop.store(true, Ordering::Relaxed);
        (dropped_at, restored_at)
    });
    let told = told.into_inner().unwrap();
    eprintln!(
        "submitted {}, acked {}, errors {:?}, longest call {:?}",
        told.submitted.len(),
        told.acked.len(),
        told.errors,
        told.longest
    );
    assert_eq!(
        told.errors.get("other"),
        None,
        "only typed storage errors: {:?}",
        told.errors
    );
    assert_eq!(
        told.errors.get("Closed"),
        None,
        "the Relay never closed: {:?}",
        told.errors
    );
    // The drop was felt: some call waited it out or was told it failed.
    assert!(
        told.longest >= Duration::from_secs(2) || !told.errors.is_empty(),
        "no call met the drop (longest {:?})",
        told.longest
    );
    assert!(
        told.last_ok.is_some_and(|t| t > restored_at + Duration::from_secs(2)),
        "no call succeeded once the link was back ({:?} after the drop)",
        told.last_ok.map(|t| t.saturating_duration_since(dropped_at))
    );
    // Read back on a new Relay: what was told holds.
    drop(relay);
    let check = Relay::connect(&url, Options::default()).unwrap();
    for (id, payload) in &told.submitted {
        let job = check
            .get(*id)
            .unwrap_or_else(|e| panic!("submit of job {id} was answered, and it is gone: {e}"));
        assert_eq!(&job.payload, payload, "job {id}");
    }
    for id in &told.acked {
        assert_eq!(
            check.get(*id).unwrap().state(),
            relay::JobState::Succeeded,
            "job {id}: its ack was answered Ok"
        );
    }
    let after = check.submit(NewJob::new("q", "after", Vec::new())).unwrap();
    assert_eq!(check.get(after).unwrap().kind, "after");
}
