use super::*;
use crate::job::Lease;

/// The parts of a `Next` these tests look at, cloned; a status or event
/// of a `Next` that has none fails the test.
trait Parts {
    fn status(&self) -> JobStatus;
    fn event(&self) -> Option<EventRecord>;
    fn unchanged(&self) -> bool;
    fn deleted(&self) -> bool;
}

impl Parts for Next {
    fn status(&self) -> JobStatus {
        match self {
            Next::Update { status, .. } => status.clone(),
            other => panic!("no new status: {other:?}"),
        }
    }
    fn event(&self) -> Option<EventRecord> {
        match self {
            Next::Update { event, .. } => event.clone(),
            Next::Delete | Next::Unchanged => None,
        }
    }
    fn unchanged(&self) -> bool {
        matches!(self, Next::Unchanged)
    }
    fn deleted(&self) -> bool {
        matches!(self, Next::Delete)
    }
}

const T0: Timestamp = Timestamp::from_millis(1_000_000);

fn policy() -> RetryPolicy {
    RetryPolicy {
        base: Duration::from_secs(1),
        cap: Duration::from_secs(8),
        jitter: 0.0,
    }
}

fn ctx(policy: &RetryPolicy, now: Timestamp) -> TransitionCtx<'_> {
    TransitionCtx {
        now,
        retry: policy,
        jitter: 0.0,
    }
}

/// A job in `state`, leased (token 7, expiring at T0+30s) when LEASED.
fn status(state: JobState) -> JobStatus {
    let mut s = JobStatus::new_ready(T0, 3);
    s.state = state;
    s.last_token = LeaseToken(7);
    if state == JobState::Leased {
        s.attempts = 1;
        s.lease = Some(Lease {
            token: LeaseToken(7),
            expires_at: T0.plus(Duration::from_secs(30)),
            worker: "w".into(),
        });
    }
    if state.is_finished() {
        s.finished_at = Some(T0);
    }
    if state == JobState::Waiting {
        s.waiting_on = 1;
    }
    s
}

fn actions() -> Vec<Action<'static>> {
    let token = LeaseToken(7);
    let d = Duration::from_secs(30);
    vec![
        Action::Lease {
            worker: "w2",
            lease_for: d,
        },
        Action::Ack { token },
        Action::Nack {
            token,
            error: "boom",
            retry_in: None,
            permanent: false,
        },
        Action::Extend { token, lease_for: d },
        Action::Progress {
            token,
            fraction: 0.5,
            message: Some("halfway"),
        },
        Action::Step {
            token,
            name: "charge",
            bytes: 12,
        },
        Action::Sleep {
            token,
            until: T0.plus(d),
        },
        Action::Wait {
            token,
            key: "shipped:1",
            until: T0.plus(d),
        },
        Action::Wake { key: "shipped:1" },
        Action::Release { token },
        Action::Snooze { token, delay: d },
        Action::Expire {
            earlier: 0,
            poison_after: 3,
        },
        Action::Cancel,
        Action::Retry,
        Action::Delete,
        Action::Unblock { parent: JobId(2) },
        Action::Abandon {
            parent: JobId(2),
            state: Some(JobState::Dead),
        },
        // Every job of `status` has been leased (token 7): started, so
        // no debounce applies to any of them.
        Action::Debounce { ready_at: T0.plus(d) },
        Action::Promote,
    ]
}

/// Every (state, action) pair: which are allowed, and the state each leads to.
#[test]
fn every_state_action_pair() {
    use JobState::*;
    let p = policy();
    // Expire is judged at expiry time; everything else at T0.
    let expired_at = T0.plus(Duration::from_secs(30));
    for state in JobState::ALL {
        for action in actions() {
            let now = if matches!(action, Action::Expire { .. }) {
                expired_at
            } else {
                T0
            };
            let got = transition(JobId(1), &status(state), action, &ctx(&p, now));
            let expect: Option<JobState> = match (state, action.name()) {
                // Due (ready_at is T0): a claim takes it whatever its
                // pending state, and the writers promote it.
                (Ready | Scheduled | Retrying, "lease") => Some(Leased),
                (Scheduled | Retrying, "promote") => Some(Ready),
                (Leased, "ack") => Some(Succeeded),
                // The same token's ack again: already done, nothing to write.
                (Succeeded, "ack") => Some(Succeeded),
                // The policy's back-off (1 s) and the snooze's 30 s.
                (Leased, "nack") => Some(Retrying),
                (Leased, "extend" | "progress" | "step") => Some(Leased),
                (Leased, "release") => Some(Ready),
                (Leased, "snooze") => Some(Scheduled),
                (Leased, "sleep" | "wait") => Some(Waiting),
                (Leased, "expire") => Some(Ready),
                (Ready | Scheduled | Retrying | Leased | Waiting, "cancel") => Some(Cancelled),
                (Dead | Cancelled, "retry") => Some(Ready),
                (Ready | Scheduled | Retrying | Succeeded | Dead | Cancelled | Waiting, "delete") => Some(state),
                (Waiting, "unblock") => Some(Ready),
                (Waiting, "abandon") => Some(Cancelled),
                _ => None,
            };
            match (expect, got) {
                (Some(want), Ok(next)) => {
                    assert_eq!(
                        next.status_after(&status(state)).state,
                        want,
                        "{state} + {}",
                        action.name()
                    )
                }
                (None, Err(e)) => {
                    let lease_action = matches!(
                        action.name(),
                        "ack" | "nack" | "extend" | "progress" | "step" | "sleep" | "wait" | "release" | "snooze"
                    );
                    // A lease action on a job that is not finished has lost
                    // its lease; on a finished one it is told the state.
                    match e {
                        TransitionError::LeaseLost { .. } => {
                            assert!(
                                lease_action && !state.is_finished() && state != Waiting,
                                "{state} + {}",
                                action.name()
                            )
                        }
                        TransitionError::InvalidState { state: s, .. } => {
                            assert!(
                                !lease_action || state.is_finished() || state == Waiting,
                                "{state} + {}",
                                action.name()
                            );
                            assert_eq!(s, state);
                        }
                    }
                }
                (want, got) => panic!("{state} + {}: expected {want:?}, got {got:?}", action.name()),
            }
        }
    }
}

#[test]
fn lease_counts_attempt_and_raises_token() {
    let p = policy();
    let n = transition(JobId(1), &status(JobState::Ready), actions()[0], &ctx(&p, T0)).unwrap();
    assert_eq!(n.status().attempts, 1);
    assert_eq!(n.status().last_token, LeaseToken(8));
    let lease = n.status().lease.unwrap();
    assert_eq!(lease.token, LeaseToken(8));
    assert_eq!(lease.expires_at, T0.plus(Duration::from_secs(30)));
    assert_eq!(n.event().unwrap().kind.as_str(), "leased");
}

#[test]
fn lease_before_ready_at_is_refused() {
    let p = policy();
    let mut s = status(JobState::Ready);
    s.ready_at = T0.plus(Duration::from_millis(1));
    let e = transition(JobId(1), &s, actions()[0], &ctx(&p, T0)).unwrap_err();
    assert!(matches!(e, TransitionError::InvalidState { .. }));
}

#[test]
fn stale_wrong_or_expired_token_is_lease_lost() {
    let p = policy();
    let s = status(JobState::Leased);
    let ack = |token, now| transition(JobId(3), &s, Action::Ack { token }, &ctx(&p, now));
    assert_eq!(
        ack(LeaseToken(6), T0).unwrap_err(),
        TransitionError::LeaseLost { id: JobId(3) }
    );
    assert_eq!(
        ack(LeaseToken(8), T0).unwrap_err(),
        TransitionError::LeaseLost { id: JobId(3) }
    );
    let expiry = T0.plus(Duration::from_secs(30));
    assert_eq!(
        ack(LeaseToken(7), expiry).unwrap_err(),
        TransitionError::LeaseLost { id: JobId(3) }
    );
    assert!(ack(LeaseToken(7), Timestamp::from_millis(expiry.as_millis() - 1)).is_ok());
}

#[test]
fn nack_backs_off_then_dies_with_error() {
    let p = policy();
    let mut s = status(JobState::Leased);
    let nack = Action::Nack {
        token: LeaseToken(7),
        error: "disk on fire",
        retry_in: None,
        permanent: false,
    };
    let n = transition(JobId(1), &s, nack, &ctx(&p, T0)).unwrap();
    assert_eq!(n.status().state, JobState::Retrying);
    assert_eq!(n.status().ready_at, T0.plus(Duration::from_secs(1)));
    assert_eq!(n.status().last_error.as_deref(), Some("disk on fire"));
    assert!(n.status().lease.is_none());
    let ev: serde_json::Value = serde_json::from_str(&n.event().unwrap().data).unwrap();
    assert_eq!(ev["error"], "disk on fire");

    s.attempts = 3;
    let n = transition(JobId(1), &s, nack, &ctx(&p, T0)).unwrap();
    assert_eq!(n.status().state, JobState::Dead);
    assert_eq!(n.status().finished_at, Some(T0));
    let ev: serde_json::Value = serde_json::from_str(&n.event().unwrap().data).unwrap();
    assert_eq!(ev["dead"], true);
}

#[test]
fn nack_explicit_retry_in_and_permanent() {
    let p = policy();
    let s = status(JobState::Leased);
    let a = Action::Nack {
        token: LeaseToken(7),
        error: "e",
        retry_in: Some(Duration::from_secs(5)),
        permanent: false,
    };
    assert_eq!(
        transition(JobId(1), &s, a, &ctx(&p, T0)).unwrap().status().ready_at,
        T0.plus(Duration::from_secs(5))
    );
    let a = Action::Nack {
        token: LeaseToken(7),
        error: "e",
        retry_in: None,
        permanent: true,
    };
    assert_eq!(
        transition(JobId(1), &s, a, &ctx(&p, T0)).unwrap().status().state,
        JobState::Dead
    );
}

#[test]
fn release_gives_back_the_attempt() {
    let p = policy();
    let n = transition(
        JobId(1),
        &status(JobState::Leased),
        Action::Release { token: LeaseToken(7) },
        &ctx(&p, T0),
    )
    .unwrap();
    assert_eq!(n.status().attempts, 0);
    assert_eq!(n.status().ready_at, T0);
    assert_eq!(n.status().last_token, LeaseToken(7));
}

#[test]
fn snooze_gives_back_the_attempt_and_waits() {
    let p = policy();
    let n = transition(
        JobId(1),
        &status(JobState::Leased),
        Action::Snooze {
            token: LeaseToken(7),
            delay: Duration::from_secs(600),
        },
        &ctx(&p, T0),
    )
    .unwrap();
    assert_eq!(n.status().state, JobState::Scheduled);
    assert_eq!(n.status().attempts, 0);
    assert_eq!(n.status().ready_at, T0.plus(Duration::from_secs(600)));
    assert_eq!(n.status().lease, None);
    assert_eq!(n.status().last_token, LeaseToken(7));
    let e = n.event().unwrap();
    assert_eq!(e.kind.as_str(), "snoozed");
    assert!(e.data.contains("\"token\":7"), "{}", e.data);
    // Another lease's token cannot snooze it.
    let stale = Action::Snooze {
        token: LeaseToken(6),
        delay: Duration::ZERO,
    };
    assert!(matches!(
        transition(JobId(1), &status(JobState::Leased), stale, &ctx(&p, T0)),
        Err(TransitionError::LeaseLost { .. })
    ));
}

#[test]
fn expire_only_after_expiry_and_counts_attempt() {
    let p = policy();
    let mut s = status(JobState::Leased);
    assert!(transition(JobId(1), &s, EXPIRE, &ctx(&p, T0)).is_err());
    let at = T0.plus(Duration::from_secs(30));
    let n = transition(JobId(1), &s, EXPIRE, &ctx(&p, at)).unwrap();
    assert_eq!(
        (n.status().state, n.status().attempts, n.status().ready_at),
        (JobState::Ready, 1, at)
    );
    s.attempts = 3;
    assert_eq!(
        transition(JobId(1), &s, EXPIRE, &ctx(&p, at)).unwrap().status().state,
        JobState::Dead
    );
}

const EXPIRE: Action<'static> = Action::Expire {
    earlier: 0,
    poison_after: 3,
};

/// A job whose lease expires `poison_after` times is DEAD with attempts
/// left, its reason saying why; before that each expiry is a failed
/// attempt, READY again; `poison_after` 0 never kills.
#[test]
fn the_nth_expiry_kills_a_poison_pill() {
    let p = policy();
    let mut s = status(JobState::Leased);
    s.max_attempts = 20;
    let at = T0.plus(Duration::from_secs(30));
    let expire = |earlier, poison_after| {
        transition(JobId(1), &s, Action::Expire { earlier, poison_after }, &ctx(&p, at)).unwrap()
    };
    assert_eq!(expire(1, 3).status().state, JobState::Ready);
    let dead = expire(2, 3);
    let why = "its lease expired 3 times: it may be crashing its worker";
    assert_eq!(
        (
            dead.status().state,
            dead.status().last_error.as_deref(),
            dead.status().finished_at
        ),
        (JobState::Dead, Some(why), Some(at))
    );
    let Next::Update { event: Some(e), .. } = &dead else {
        panic!("no event: {dead:?}")
    };
    let data: serde_json::Value = serde_json::from_str(&e.data).unwrap();
    assert_eq!(
        (
            e.kind,
            data["expiries"].as_u64(),
            data["reason"].as_str(),
            data["worker"].as_str()
        ),
        (EventKind::Expired, Some(3), Some(why), Some("w"))
    );
    assert_eq!(expire(40, 0).status().state, JobState::Ready, "0: no limit");
}

#[test]
fn extend_moves_expiry_keeps_token() {
    let p = policy();
    let now = T0.plus(Duration::from_secs(10));
    let a = Action::Extend {
        token: LeaseToken(7),
        lease_for: Duration::from_secs(60),
    };
    let n = transition(JobId(1), &status(JobState::Leased), a, &ctx(&p, now)).unwrap();
    let l = n.status().lease.unwrap();
    assert_eq!(
        (l.token, l.expires_at),
        (LeaseToken(7), now.plus(Duration::from_secs(60)))
    );
    assert!(n.event().is_none());
}

#[test]
fn retry_resets_attempts() {
    let p = policy();
    let mut s = status(JobState::Dead);
    s.attempts = 3;
    let n = transition(JobId(1), &s, Action::Retry, &ctx(&p, T0)).unwrap();
    assert_eq!((n.status().attempts, n.status().finished_at), (0, None));
}

#[test]
fn lease_and_ack_events_are_json_objects_with_sorted_keys() {
    let p = RetryPolicy::default();
    let s = JobStatus::new_ready(T0, 3);
    let lease = Action::Lease {
        worker: "w\"1",
        lease_for: Duration::from_secs(30),
    };
    let n = transition(JobId(1), &s, lease, &ctx(&p, T0)).unwrap();
    let ev = n.event().unwrap();
    assert_eq!(ev.kind.as_str(), "leased");
    let v: serde_json::Value = serde_json::from_str(&ev.data).unwrap();
    assert_eq!(v["worker"], "w\"1");
    assert_eq!(v["attempt"], 1);
    assert_eq!(v["token"], 1);
    let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["attempt", "expires_at", "token", "worker"]);
    let ack = Action::Ack { token: LeaseToken(1) };
    let n = transition(JobId(1), &n.status(), ack, &ctx(&p, T0)).unwrap();
    assert_eq!(n.event().unwrap().data, r#"{"attempt":1,"token":1}"#);
}

/// An ack repeated with the token it succeeded with is answered Ok and
/// writes nothing; any other token on a finished job is still refused.
#[test]
fn a_repeated_ack_is_answered_and_changes_nothing() {
    let p = policy();
    let leased = status(JobState::Leased);
    let first = transition(JobId(1), &leased, Action::Ack { token: LeaseToken(7) }, &ctx(&p, T0)).unwrap();
    assert!(!first.unchanged());
    let again = transition(
        JobId(1),
        &first.status(),
        Action::Ack { token: LeaseToken(7) },
        &ctx(&p, T0),
    )
    .unwrap();
    assert!(again.unchanged() && again.event().is_none() && !again.deleted());
    assert_eq!(*again.status_after(&first.status()), first.status());
    let stale = transition(
        JobId(1),
        &first.status(),
        Action::Ack { token: LeaseToken(6) },
        &ctx(&p, T0),
    );
    // Any other token on the finished job is told its state.
    assert_eq!(
        stale,
        Err(TransitionError::InvalidState {
            id: JobId(1),
            state: JobState::Succeeded,
            action: "ack"
        })
    );
    // A nack after the ack is not the same call repeated.
    let nack = Action::Nack {
        token: LeaseToken(7),
        error: "late",
        retry_in: None,
        permanent: false,
    };
    assert!(transition(JobId(1), &first.status(), nack, &ctx(&p, T0)).is_err());
}

#[test]
fn a_waiting_job_counts_down_to_ready_and_keeps_its_own_delay() {
    let p = policy();
    let later = T0.plus(Duration::from_secs(60));
    let s = JobStatus::new_waiting(later, T0, 3, 2);
    assert_eq!(s.state, JobState::Waiting);
    let unblock = Action::Unblock { parent: JobId(5) };
    let one = transition(JobId(9), &s, unblock, &ctx(&p, T0)).unwrap();
    assert_eq!((one.status().state, one.status().waiting_on), (JobState::Waiting, 1));
    assert!(one.event().is_none(), "no event until it is READY");
    let two = transition(JobId(9), &one.status(), unblock, &ctx(&p, T0)).unwrap();
    assert_eq!((two.status().state, two.status().waiting_on), (JobState::Scheduled, 0));
    assert_eq!(two.status().ready_at, later, "its own delay still holds");
    assert_eq!(two.event().unwrap().kind.as_str(), "unblocked");
    // Readied after its delay passed: due now, not in the past.
    let late = T0.plus(Duration::from_secs(120));
    let s = JobStatus::new_waiting(T0, T0, 3, 1);
    let r = transition(JobId(9), &s, unblock, &ctx(&p, late)).unwrap();
    assert_eq!(r.status().ready_at, late);
    assert_eq!(r.status().state, JobState::Ready);
    // Nothing to wait for: READY at once, or SCHEDULED until its time.
    assert_eq!(JobStatus::new_waiting(T0, T0, 3, 0).state, JobState::Ready);
    assert_eq!(JobStatus::new_waiting(later, T0, 3, 0).state, JobState::Scheduled);
}

#[test]
fn jobs_waiting_for_their_time_are_scheduled_or_retrying_until_promoted() {
    let p = policy();
    let leased = status(JobState::Leased);
    let nack = |retry_in| Action::Nack {
        token: LeaseToken(7),
        error: "boom",
        retry_in,
        permanent: false,
    };
    let backing_off = transition(JobId(1), &leased, nack(None), &ctx(&p, T0))
        .unwrap()
        .status();
    assert_eq!(backing_off.state, JobState::Retrying);
    assert_eq!(backing_off.ready_at, T0.plus(Duration::from_secs(1)));
    let at_once = transition(JobId(1), &leased, nack(Some(Duration::ZERO)), &ctx(&p, T0)).unwrap();
    assert_eq!(at_once.status().state, JobState::Ready, "no back-off: READY at once");
    let snooze = Action::Snooze {
        token: LeaseToken(7),
        delay: Duration::from_secs(5),
    };
    let snoozed = transition(JobId(1), &leased, snooze, &ctx(&p, T0)).unwrap().status();
    assert_eq!(snoozed.state, JobState::Scheduled);

    // Not promoted, nor leased, before its time; both once it has come.
    for s in [&backing_off, &snoozed] {
        assert!(transition(JobId(1), s, Action::Promote, &ctx(&p, T0)).is_err());
        assert!(transition(JobId(1), s, actions()[0], &ctx(&p, T0)).is_err());
        let due = s.ready_at;
        let promoted = transition(JobId(1), s, Action::Promote, &ctx(&p, due)).unwrap();
        assert_eq!(promoted.status().state, JobState::Ready);
        assert!(promoted.event().is_none(), "a promotion writes no event");
        let lease = transition(JobId(1), s, actions()[0], &ctx(&p, due)).unwrap();
        assert_eq!(lease.status().state, JobState::Leased);
    }
    // A debounce moves a job that has not started to its new time.
    let fresh = JobStatus::new_ready(T0, 3);
    let later = T0.plus(Duration::from_secs(9));
    let debounced = transition(JobId(1), &fresh, Action::Debounce { ready_at: later }, &ctx(&p, T0)).unwrap();
    assert_eq!(debounced.status().state, JobState::Scheduled);
    assert!(debounced.status().not_started());
}

#[test]
fn an_abandoned_job_is_cancelled_with_the_reason() {
    let p = policy();
    let s = JobStatus::new_waiting(T0, T0, 3, 3);
    let action = Action::Abandon {
        parent: JobId(5),
        state: Some(JobState::Dead),
    };
    let next = transition(JobId(9), &s, action, &ctx(&p, T0)).unwrap();
    assert_eq!(next.status().state, JobState::Cancelled);
    assert_eq!(next.status().waiting_on, 0);
    assert_eq!(next.status().finished_at, Some(T0));
    let e = next.event().unwrap();
    assert_eq!(e.kind.as_str(), "cancelled");
    let data: Value = serde_json::from_str(&e.data).unwrap();
    assert_eq!(data["dependency"], 5);
    assert_eq!(data["reason"], "job 5 it depends on ended DEAD");
}

#[test]
fn a_debounce_moves_a_job_that_never_started_and_nothing_else() {
    let p = policy();
    let later = T0.plus(Duration::from_secs(60));
    let debounce = Action::Debounce { ready_at: later };
    for fresh in [JobStatus::new_ready(T0, 3), JobStatus::new_waiting(T0, T0, 3, 2)] {
        let next = transition(JobId(9), &fresh, debounce, &ctx(&p, T0)).unwrap();
        let s = next.status();
        // A READY job waits for its new time SCHEDULED; a WAITING one
        // still waits.
        let state = if fresh.state == JobState::Waiting {
            JobState::Waiting
        } else {
            JobState::Scheduled
        };
        assert_eq!((s.state, s.ready_at, s.waiting_on), (state, later, fresh.waiting_on));
        let e = next.event().unwrap();
        assert_eq!(e.kind.as_str(), "debounced");
        let data: Value = serde_json::from_str(&e.data).unwrap();
        assert_eq!(data["ready_at"], later.to_rfc3339());
        assert_eq!(data["from"], T0.to_rfc3339());
    }
    // Released (or snoozed, or retried by hand) after a lease: READY with
    // no attempt counted, but it has started.
    let mut released = JobStatus::new_ready(T0, 3);
    released.last_token = LeaseToken(1);
    let err = transition(JobId(9), &released, debounce, &ctx(&p, T0)).unwrap_err();
    assert!(
        matches!(
            err,
            TransitionError::InvalidState {
                state: JobState::Ready,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_wait_is_woken_by_its_event_and_a_record_reads_back() {
    let p = policy();
    let leased = status(JobState::Leased);
    let until = T0.plus(Duration::from_secs(60));
    let w = transition(
        JobId(9),
        &leased,
        Action::Wait {
            token: LeaseToken(7),
            key: "k",
            until,
        },
        &ctx(&p, T0),
    )
    .unwrap();
    let s = w.status();
    assert_eq!((s.state, s.ready_at, s.waiting_on), (JobState::Waiting, until, 0));
    assert_eq!(w.event().unwrap().kind.as_str(), "waiting");
    let woke = transition(JobId(9), &s, Action::Wake { key: "k" }, &ctx(&p, T0)).unwrap();
    assert_eq!((woke.status().state, woke.status().ready_at), (JobState::Ready, T0));
    assert_eq!(woke.event().unwrap().kind.as_str(), "woken");
    // A job waiting on other jobs is not woken by an event.
    let mut deps = s.clone();
    deps.waiting_on = 2;
    assert!(transition(JobId(9), &deps, Action::Wake { key: "k" }, &ctx(&p, T0)).is_err());
    for w in [
        crate::job::Waited::Event(br#"{"n": 1}"#.to_vec()),
        crate::job::Waited::Event(vec![0xff, 0]),
        crate::job::Waited::TimedOut,
    ] {
        assert_eq!(crate::job::Waited::of(&w.output()), Some(w));
    }
    assert_eq!(
        crate::job::Waited::of(&crate::job::Waited::Event(Vec::new()).output()),
        Some(crate::job::Waited::Event(Vec::new()))
    );
    assert_eq!(crate::job::Waited::of(b"7"), None);
    assert_eq!(crate::job::Waited::of(br#"{"sleep_until_ms": 5}"#), None);
}

#[test]
fn a_sleep_gives_the_lease_and_the_attempt_back_until_its_time() {
    let p = policy();
    let leased = status(JobState::Leased);
    let until = T0.plus(Duration::from_secs(3600));
    let next = transition(
        JobId(9),
        &leased,
        Action::Sleep {
            token: LeaseToken(7),
            until,
        },
        &ctx(&p, T0),
    )
    .unwrap();
    let s = next.status();
    assert_eq!(
        (s.state, s.ready_at, s.lease.is_none(), s.attempts, s.waiting_on),
        (JobState::Waiting, until, true, leased.attempts - 1, 0)
    );
    assert_eq!(next.event().unwrap().kind.as_str(), "sleeping");
    // Not before its time; at it, READY (aging counted from then).
    assert!(transition(
        JobId(9),
        &s,
        Action::Promote,
        &ctx(&p, Timestamp::from_millis(until.as_millis() - 1))
    )
    .is_err());
    let woke = transition(JobId(9), &s, Action::Promote, &ctx(&p, until)).unwrap();
    assert_eq!((woke.status().state, woke.status().ready_at), (JobState::Ready, until));
    // A sleeper waits on no job: a parent's end neither unblocks nor
    // abandons it.
    assert!(transition(JobId(9), &s, Action::Unblock { parent: JobId(2) }, &ctx(&p, until)).is_err());
    assert!(transition(
        JobId(9),
        &s,
        Action::Abandon {
            parent: JobId(2),
            state: None
        },
        &ctx(&p, until)
    )
    .is_err());
    // A job waiting on other jobs is never woken by time.
    let mut deps = s.clone();
    deps.waiting_on = 1;
    assert!(transition(JobId(9), &deps, Action::Promote, &ctx(&p, until)).is_err());
    // A sleep whose time has come is READY at once; a stale token sleeps nothing.
    let now = transition(
        JobId(9),
        &leased,
        Action::Sleep {
            token: LeaseToken(7),
            until: T0,
        },
        &ctx(&p, T0),
    )
    .unwrap();
    assert_eq!(now.status().state, JobState::Ready);
    assert!(matches!(
        transition(
            JobId(9),
            &leased,
            Action::Sleep {
                token: LeaseToken(6),
                until
            },
            &ctx(&p, T0)
        ),
        Err(TransitionError::LeaseLost { .. })
    ));
}

#[test]
fn a_step_record_changes_nothing_but_the_log_and_needs_the_lease() {
    let p = policy();
    let leased = status(JobState::Leased);
    let record = |token| Action::Step {
        token: LeaseToken(token),
        name: "charge",
        bytes: 17,
    };
    let next = transition(JobId(9), &leased, record(7), &ctx(&p, T0)).unwrap();
    assert_eq!(next.status(), leased, "the status is as it was");
    let e = next.event().unwrap();
    assert_eq!(e.kind.as_str(), "step");
    let data: Value = serde_json::from_str(&e.data).unwrap();
    assert_eq!(
        (data["name"].as_str(), data["bytes"].as_u64()),
        (Some("charge"), Some(17))
    );
    // A stale token (the job leased again since) and an expired lease.
    assert!(matches!(
        transition(JobId(9), &leased, record(6), &ctx(&p, T0)),
        Err(TransitionError::LeaseLost { .. })
    ));
    assert!(matches!(
        transition(JobId(9), &leased, record(7), &ctx(&p, T0.plus(Duration::from_secs(30)))),
        Err(TransitionError::LeaseLost { .. })
    ));
    assert!(crate::Step::check_name("").is_err());
    assert!(crate::Step::check_name(&"s".repeat(257)).is_err());
    assert!(crate::Step::check_name("a\nb").is_err());
    assert!(crate::Step::check_name("charge card 4").is_ok());
    assert!(crate::Step::check_output(&vec![0; crate::job::MAX_STEP_BYTES + 1]).is_err());
}

#[test]
fn progress_changes_nothing_but_the_log_and_needs_the_lease() {
    let p = policy();
    let leased = status(JobState::Leased);
    let report = |token| Action::Progress {
        token: LeaseToken(token),
        fraction: 0.25,
        message: Some("page 1 of 4"),
    };
    let next = transition(JobId(9), &leased, report(7), &ctx(&p, T0)).unwrap();
    assert_eq!(next.status(), leased, "the status is as it was");
    let e = next.event().unwrap();
    assert_eq!(e.kind.as_str(), "progress");
    let data: Value = serde_json::from_str(&e.data).unwrap();
    assert_eq!(
        (data["fraction"].as_f64(), data["message"].as_str()),
        (Some(0.25), Some("page 1 of 4"))
    );
    assert!(matches!(
        transition(JobId(9), &leased, report(6), &ctx(&p, T0)),
        Err(TransitionError::LeaseLost { .. })
    ));
    let expired = T0.plus(Duration::from_secs(30));
    assert!(matches!(
        transition(JobId(9), &leased, report(7), &ctx(&p, expired)),
        Err(TransitionError::LeaseLost { .. })
    ));
    assert!(crate::Progress::check(1.5, None).is_err());
    assert!(crate::Progress::check(f64::NAN, None).is_err());
    assert!(crate::Progress::check(0.5, Some(&"x".repeat(1025))).is_err());
    assert!(crate::Progress::check(1.0, Some("done")).is_ok());
}
