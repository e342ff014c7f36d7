//! Search, tags, bulk actions and the dead-job groups (the dashboard's
//! reads and actions): every filter alone and together, cursor paging,
//! bulk actions over more than one chunk that pass over what they may not
//! change, and bad filters refused.

use crate::{open_clocked, NewDb};
use relay::{Completion, Error, JobFilter, JobId, JobState, LeaseRequest, NewJob, Relay, BULK_CHUNK};
use std::collections::BTreeSet;
use std::time::Duration;

fn ids(jobs: &[relay::Job]) -> Vec<JobId> {
    jobs.iter().map(|j| j.id).collect()
}

fn list(relay: &Relay, f: JobFilter) -> Vec<JobId> {
    ids(&relay.list(&JobFilter { limit: 1000, ..f }).unwrap())
}

/// Leases every ready job of `queue` and fails each for good with the
/// error `error(id)`.
fn kill_all(relay: &Relay, queue: &str, error: impl Fn(JobId) -> String) {
    loop {
        let leased = relay.lease(LeaseRequest::new([queue]).max(1000)).unwrap();
        if leased.is_empty() {
            return;
        }
        let done: Vec<Completion> = leased
            .iter()
            .map(|l| Completion::nack_permanent(l.id, l.token, error(l.id)))
            .collect();
        for r in relay.complete_batch(done).unwrap() {
            assert_eq!(r.unwrap().state, JobState::Dead);
        }
    }
}

pub fn search_by_every_filter_with_cursor_paging(new_db: &NewDb) {
    let (relay, clock, _db) = open_clocked(new_db);
    let t0 = relay::Clock::now(&*clock);
    let a = relay
        .submit(NewJob::new("mail", "send", Vec::new()).tags(["vip", "eu", "vip"]))
        .unwrap();
    clock.advance(Duration::from_secs(60));
    let b = relay
        .submit(NewJob::new("mail", "bounce", Vec::new()).tags(["eu"]))
        .unwrap();
    clock.advance(Duration::from_secs(60));
    let c = relay.submit(NewJob::new("other", "send", Vec::new())).unwrap();
    let t2 = relay::Clock::now(&*clock);
    kill_all(&relay, "other", |_| "smtp: connection refused\nat line 3".into());
    relay.cancel(b).unwrap();

    assert_eq!(relay.get(a).unwrap().tags, ["vip", "eu"], "in order, each once");
    assert_eq!(relay.get(c).unwrap().tags, Vec::<String>::new());
    let all = |f: JobFilter| list(&relay, f);
    assert_eq!(all(JobFilter::default()), [c, b, a], "newest first");
    assert_eq!(
        all(JobFilter {
            queue: Some("mail".into()),
            ..JobFilter::default()
        }),
        [b, a]
    );
    assert_eq!(
        all(JobFilter {
            kind: Some("send".into()),
            ..JobFilter::default()
        }),
        [c, a]
    );
    assert_eq!(
        all(JobFilter {
            tag: Some("eu".into()),
            ..JobFilter::default()
        }),
        [b, a]
    );
    assert_eq!(
        all(JobFilter {
            tag: Some("vip".into()),
            ..JobFilter::default()
        }),
        [a]
    );
    assert_eq!(
        all(JobFilter {
            tag: Some("none".into()),
            ..JobFilter::default()
        }),
        []
    );
    assert_eq!(
        all(JobFilter {
            state: Some(JobState::Dead),
            ..JobFilter::default()
        }),
        [c]
    );
    assert_eq!(
        all(JobFilter {
            state: Some(JobState::Cancelled),
            ..JobFilter::default()
        }),
        [b]
    );
    assert_eq!(
        all(JobFilter {
            state: Some(JobState::Ready),
            ..JobFilter::default()
        }),
        [a]
    );
    assert_eq!(
        all(JobFilter {
            error_contains: Some("connection refused".into()),
            ..JobFilter::default()
        }),
        [c]
    );
    assert_eq!(
        all(JobFilter {
            error_contains: Some("Connection".into()),
            ..JobFilter::default()
        }),
        [],
        "case-sensitive"
    );
    assert_eq!(
        all(JobFilter {
            since: Some(t0.plus(Duration::from_secs(30))),
            ..JobFilter::default()
        }),
        [c, b]
    );
    assert_eq!(
        all(JobFilter {
            until: Some(t0.plus(Duration::from_secs(60))),
            ..JobFilter::default()
        }),
        [a]
    );
    assert_eq!(
        all(JobFilter {
            since: Some(t2),
            ..JobFilter::default()
        }),
        [c],
        "since is inclusive"
    );
    assert_eq!(
        all(JobFilter {
            since: Some(t2),
            until: Some(t0),
            ..JobFilter::default()
        }),
        [],
        "an empty range matches nothing"
    );
    // Together: every condition holds.
    assert_eq!(
        all(JobFilter {
            queue: Some("mail".into()),
            tag: Some("eu".into()),
            state: Some(JobState::Cancelled),
            ..JobFilter::default()
        }),
        [b]
    );
    assert_eq!(
        all(JobFilter {
            kind: Some("send".into()),
            state: Some(JobState::Dead),
            queue: Some("mail".into()),
            ..JobFilter::default()
        }),
        []
    );

    // Paging: pages of 2 through 7 jobs, by the cursor.
    let more: Vec<JobId> = (0..4)
        .map(|i| {
            relay
                .submit(NewJob::new("mail", "send", Vec::new()).tags(["eu"]))
                .unwrap_or_else(|e| panic!("{i}: {e}"))
        })
        .collect();
    for f in [
        JobFilter::default(),
        JobFilter {
            tag: Some("eu".into()),
            ..JobFilter::default()
        },
        JobFilter {
            queue: Some("mail".into()),
            ..JobFilter::default()
        },
    ] {
        let whole = all(f.clone());
        let mut paged: Vec<JobId> = Vec::new();
        let mut before = None;
        for pages in 0.. {
            assert!(pages < 20, "paging {f:?} does not end: {paged:?}");
            let page = ids(&relay
                .list(&JobFilter {
                    limit: 2,
                    before,
                    ..f.clone()
                })
                .unwrap());
            assert!(page.len() <= 2);
            paged.extend(&page);
            match page.last() {
                Some(last) if page.len() == 2 => before = Some(*last),
                _ => break,
            }
        }
        assert_eq!(paged, whole, "{f:?}");
    }
    assert!(all(JobFilter::default()).starts_with(&more.iter().rev().copied().collect::<Vec<_>>()));

    // Bad filters: refused, naming the field.
    for (f, field) in [
        (
            JobFilter {
                limit: 0,
                ..JobFilter::default()
            },
            "limit",
        ),
        (
            JobFilter {
                queue: Some("no spaces".into()),
                ..JobFilter::default()
            },
            "queue",
        ),
        (
            JobFilter {
                tag: Some("a,b".into()),
                ..JobFilter::default()
            },
            "tags",
        ),
        (
            JobFilter {
                kind: Some(String::new()),
                ..JobFilter::default()
            },
            "kind",
        ),
        (
            JobFilter {
                error_contains: Some(String::new()),
                ..JobFilter::default()
            },
            "error_contains",
        ),
    ] {
        let e = relay.list(&f).unwrap_err();
        assert!(matches!(&e, Error::InvalidInput(i) if i.field == field), "{f:?}: {e}");
        if field != "limit" {
            // A bulk action takes every match: its limit does not apply.
            let e = relay.retry_matching(&f).unwrap_err();
            assert!(matches!(&e, Error::InvalidInput(i) if i.field == field), "{f:?}: {e}");
        }
    }
    // Bad tags at submit.
    for tags in [
        vec!["a,b".to_owned()],
        vec![String::new()],
        (0..9).map(|i| i.to_string()).collect(),
        vec!["x".to_owned(); 9], // more than 8 given, even if the same
    ] {
        let e = relay
            .submit(NewJob::new("mail", "k", Vec::new()).tags(tags.clone()))
            .unwrap_err();
        assert!(
            matches!(&e, Error::InvalidInput(i) if i.field == "tags"),
            "{tags:?}: {e}"
        );
    }
    // A deleted job leaves its tags' index with it.
    relay.delete(a).unwrap();
    assert_eq!(
        all(JobFilter {
            tag: Some("vip".into()),
            ..JobFilter::default()
        }),
        []
    );
}

pub fn bulk_actions_take_every_match_and_pass_over_the_rest(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    let n = BULK_CHUNK as usize * 2 + 37; // more than two chunks
    let dead: Vec<JobId> = relay
        .submit_batch(
            (0..n)
                .map(|_| NewJob::new("q", "a", Vec::new()).max_attempts(1))
                .collect(),
        )
        .unwrap();
    let other_kind = relay
        .submit_batch(
            (0..5)
                .map(|_| NewJob::new("q", "b", Vec::new()).max_attempts(1))
                .collect(),
        )
        .unwrap();
    kill_all(&relay, "q", |_| "boom".into());
    let ready = relay.submit(NewJob::new("q", "a", Vec::new())).unwrap();
    let leased = relay.submit(NewJob::new("held", "a", Vec::new())).unwrap();
    let lease = relay.lease(LeaseRequest::new(["held"])).unwrap();
    assert_eq!(lease[0].id, leased);

    // Retry: every DEAD job of kind a, in three chunks; the others untouched.
    let retried = relay
        .retry_matching(&JobFilter {
            state: Some(JobState::Dead),
            kind: Some("a".into()),
            ..JobFilter::default()
        })
        .unwrap();
    assert_eq!(retried, n as u64);
    for id in &dead {
        assert_eq!(relay.get(*id).unwrap().state(), JobState::Ready);
    }
    for id in &other_kind {
        assert_eq!(relay.get(*id).unwrap().state(), JobState::Dead);
    }
    // Retrying READY jobs is not allowed: passed over, counted as nothing.
    assert_eq!(
        relay
            .retry_matching(&JobFilter {
                kind: Some("a".into()),
                ..JobFilter::default()
            })
            .unwrap(),
        0
    );

    // Cancel: every READY job of kind a in queue q (the leased one is in
    // another queue); then delete what was cancelled.
    let cancelled = relay
        .cancel_matching(&JobFilter {
            queue: Some("q".into()),
            kind: Some("a".into()),
            ..JobFilter::default()
        })
        .unwrap();
    assert_eq!(cancelled, n as u64 + 1);
    assert_eq!(relay.get(ready).unwrap().state(), JobState::Cancelled);
    let deleted = relay
        .delete_matching(&JobFilter {
            state: Some(JobState::Cancelled),
            ..JobFilter::default()
        })
        .unwrap();
    assert_eq!(deleted, n as u64 + 1);
    assert!(matches!(relay.get(dead[0]), Err(Error::NotFound { .. })));
    // Delete passes over a LEASED job; its holder can still ack.
    assert_eq!(
        relay
            .delete_matching(&JobFilter {
                kind: Some("a".into()),
                ..JobFilter::default()
            })
            .unwrap(),
        0
    );
    relay.ack(leased, lease[0].token, None).unwrap();
    let left: BTreeSet<JobId> = list(&relay, JobFilter::default()).into_iter().collect();
    let expected: BTreeSet<JobId> = other_kind.iter().copied().chain([leased]).collect();
    assert_eq!(left, expected);
}

pub fn dead_jobs_are_grouped_by_queue_kind_and_first_line(new_db: &NewDb) {
    let (relay, _clock, _db) = open_clocked(new_db);
    for (kind, n) in [("send", 3), ("send", 1), ("bill", 2)] {
        for _ in 0..n {
            relay
                .submit(NewJob::new("q", kind, Vec::new()).max_attempts(1))
                .unwrap();
        }
        let first_line = if n == 1 { "bad address" } else { "timeout" };
        kill_all(&relay, "q", move |id| format!("{first_line}\nstack of job {id}"));
    }
    let groups = relay.dead_groups(10).unwrap();
    let got: Vec<(&str, &str, &str, u64)> = groups
        .iter()
        .map(|g| (g.queue.as_str(), g.kind.as_str(), g.error.as_str(), g.count))
        .collect();
    assert_eq!(
        got,
        [
            ("q", "send", "timeout", 3),
            ("q", "bill", "timeout", 2),
            ("q", "send", "bad address", 1)
        ]
    );
    assert_eq!(relay.dead_groups(1).unwrap().len(), 1);
    assert!(matches!(relay.dead_groups(0), Err(Error::InvalidInput(_))));
    // Retrying a group: its queue, kind and error.
    let g = &groups[0];
    let n = relay
        .retry_matching(&JobFilter {
            queue: Some(g.queue.clone()),
            kind: Some(g.kind.clone()),
            state: Some(JobState::Dead),
            error_contains: Some(g.error.clone()),
            ..JobFilter::default()
        })
        .unwrap();
    assert_eq!(n, 3);
    assert_eq!(relay.dead_groups(10).unwrap().len(), 2);
}
