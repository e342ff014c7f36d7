//! Issue 39, item 5, at an upgrade: records written before schema 17 have
//! no owner's mark. A worker running across the upgrade (over HTTP, with
//! no secret yet) must go on beating, not be refused for an hour; its
//! first heartbeat takes the record. Seen failing with the mark-less rows
//! treated as in-process ones: `WorkerTaken`.

use relay::{Relay, Timestamp, WorkerBeat, WorkerClaim};
use std::time::Duration;

fn beat(id: &str) -> WorkerBeat {
    WorkerBeat {
        id: id.into(),
        name: "n".into(),
        host: "h".into(),
        pid: 1,
        queues: vec!["q".into()],
        concurrency: 1,
        version: "t".into(),
        started_at: Timestamp::from_millis(0),
        beat_every: Duration::from_secs(5),
        running: Vec::new(),
    }
}

#[test]
fn a_record_from_before_the_marks_is_taken_by_its_next_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let relay = Relay::open(&path).unwrap();
    relay.worker_beat(&beat("old")).unwrap();
    // As a version-16 file holds it: no mark.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("UPDATE workers SET secret_sha256 = NULL WHERE id = 'old'", [])
        .unwrap();
    drop(conn);
    let remote = |presented: Option<&str>| WorkerClaim::Remote {
        presented: presented.map(str::to_owned),
        fresh: "fresh-hash".into(),
    };
    relay.worker_beat_as(&beat("old"), false, remote(None)).unwrap();
    // Taken: from now on only with its secret.
    assert!(relay.worker_beat_as(&beat("old"), false, remote(None)).is_err());
    relay
        .worker_beat_as(&beat("old"), false, remote(Some("fresh-hash")))
        .unwrap();
}
