//! Microbenchmarks of Relay's hot paths (divan). Run and compare against the
//! committed baseline with `scripts/microbench`; see docs/BENCHMARKS.md.

use relay::{LeaseRequest, NewJob, Relay};
use relay_core::{
    choose, transition, Action, Candidate, JobId, JobStatus, LeaseToken, Priority, RetryPolicy, Timestamp,
    TransitionCtx,
};
use relay_store::Backend;
use std::hint::black_box;
use std::time::Duration;

fn main() {
    divan::main();
}

const NOW: Timestamp = Timestamp::from_millis(1_764_442_800_000);

mod core {
    use super::*;

    fn candidates() -> [Candidate; 4] {
        std::array::from_fn(|i| Candidate {
            id: JobId(i as i64 + 1),
            priority: Priority::new(i as u8).unwrap_or_default(),
            ready_at: Timestamp::from_millis(NOW.as_millis() - (i as i64) * 70_000),
        })
    }

    /// The claim's aging choice among the four class heads.
    #[divan::bench]
    fn choose_among_four(b: divan::Bencher) {
        let c = candidates();
        b.bench(|| choose(black_box(c), black_box(NOW), Duration::from_secs(60)));
    }

    #[divan::bench]
    fn transition_lease(b: divan::Bencher) {
        let status = JobStatus::new_ready(NOW, 20);
        let policy = RetryPolicy::default();
        let ctx = TransitionCtx {
            now: NOW,
            retry: &policy,
            jitter: 0.5,
        };
        let action = Action::Lease {
            worker: "worker-1",
            lease_for: Duration::from_secs(30),
        };
        b.bench(|| transition(JobId(7), black_box(&status), action, &ctx));
    }

    #[divan::bench]
    fn transition_ack(b: divan::Bencher) {
        let policy = RetryPolicy::default();
        let ctx = TransitionCtx {
            now: NOW,
            retry: &policy,
            jitter: 0.5,
        };
        let lease = Action::Lease {
            worker: "worker-1",
            lease_for: Duration::from_secs(30),
        };
        let ready = JobStatus::new_ready(NOW, 20);
        let Ok(next) = transition(JobId(7), &ready, lease, &ctx) else {
            return;
        };
        let leased = next.status_after(&ready).clone();
        b.bench(|| transition(JobId(7), black_box(&leased), Action::Ack { token: LeaseToken(1) }, &ctx));
    }

    #[divan::bench]
    fn transition_nack_backoff(b: divan::Bencher) {
        let policy = RetryPolicy::default();
        let ctx = TransitionCtx {
            now: NOW,
            retry: &policy,
            jitter: 0.5,
        };
        let lease = Action::Lease {
            worker: "worker-1",
            lease_for: Duration::from_secs(30),
        };
        let ready = JobStatus::new_ready(NOW, 20);
        let Ok(next) = transition(JobId(7), &ready, lease, &ctx) else {
            return;
        };
        let leased = next.status_after(&ready).clone();
        let nack = Action::Nack {
            token: LeaseToken(1),
            error: "connection refused",
            retry_in: None,
            permanent: false,
        };
        b.bench(|| transition(JobId(7), black_box(&leased), nack, &ctx));
    }
}

mod encode {
    use super::*;

    fn job(payload: Vec<u8>) -> relay::Job {
        relay::Job {
            id: JobId(42),
            queue: "emails".into(),
            kind: "send-welcome".into(),
            payload,
            priority: Priority::HIGH,
            created_at: NOW,
            unique_key: None,
            result: None,
            lease_for: None,
            timeout: None,
            traceparent: None,
            tags: Vec::new(),
            group: None,
            progress: None,
            steps: Vec::new(),
            status: JobStatus::new_ready(NOW, 20),
        }
    }

    /// A job as the server answers it and the CLI prints it (the wire
    /// type, then its text): 100-byte JSON payload.
    #[divan::bench]
    fn job_view_text_100b(b: divan::Bencher) {
        let j = job(format!("{{\"to\":\"{}\"}}", "a".repeat(90)).into_bytes());
        b.bench(|| serde_json::to_string(&relay::wire::job(black_box(&j))));
    }

    /// A 1 KiB binary payload (base64 in JSON).
    #[divan::bench]
    fn job_view_text_1k_binary(b: divan::Bencher) {
        let j = job((0..1024u32).map(|i| (i % 251) as u8).collect());
        b.bench(|| serde_json::to_string(&relay::wire::job(black_box(&j))));
    }
}

mod store {
    use super::*;

    /// Reading one job back: the prepared statement, the row, strict decoding.
    #[divan::bench]
    fn job_get_and_decode(b: divan::Bencher) {
        let backend = relay_sqlite::SqliteBackend::memory();
        let Ok(relay) = Relay::with_backend(std::sync::Arc::new(backend.clone()), relay::Options::default()) else {
            return;
        };
        let Ok(id) = relay.submit(NewJob::new("q", "k", vec![b'x'; 100])) else {
            return;
        };
        let Ok(mut reader) = backend.open_reader() else { return };
        b.bench_local(|| reader.job_get(black_box(id)));
    }

    /// One claim through the whole engine on the in-memory store (no fsync):
    /// channel to the writer, transaction, four index probes, aging choice,
    /// row decoding, guarded update, event; then a release so the depth
    /// stays constant.
    #[divan::bench(sample_count = 200)]
    fn claim_and_release_in_memory(b: divan::Bencher) {
        let Ok(relay) = Relay::in_memory() else { return };
        let jobs = (0..1000)
            .map(|i| NewJob::new("q", "k", vec![b'x'; 100]).priority((i % 4) as u8))
            .collect();
        if relay.submit_batch(jobs).is_err() {
            return;
        }
        let req = LeaseRequest::new(["q"]);
        b.bench_local(|| {
            if let Ok(mut got) = relay.lease(req.clone()) {
                if let Some(l) = got.pop() {
                    let _ = relay.release(l.id, l.token);
                }
            }
        });
    }
}
