//! Periodic jobs: schedules, their ticks (exactly one job each, one for a
//! run of missed ticks), daylight-saving changes, and their admin calls.
//! The scheduler is driven by `run_schedules` on a manual clock.

use crate::NewDb;
use relay::{Error, JobFilter, JobState, LeaseRequest, ManualClock, NewJob, NewSchedule, Options, Relay, Timestamp};
use std::sync::Arc;
use std::time::Duration;

/// A Relay whose scheduler runs only when told (`run_schedules`).
fn open_at(new_db: &NewDb, start: Timestamp) -> (Relay, Arc<ManualClock>, Box<dyn crate::TestDb>, Options) {
    let db = new_db();
    let (mut options, _) = crate::clocked();
    let clock = Arc::new(ManualClock::new(start));
    options.clock = clock.clone();
    options.scheduler = false;
    let relay = db.open(options.clone()).unwrap();
    (relay, clock, db, options)
}

fn jobs_of(relay: &Relay, queue: &str) -> Vec<relay::Job> {
    relay
        .list(&JobFilter {
            queue: Some(queue.into()),
            limit: 1000,
            ..JobFilter::default()
        })
        .unwrap()
}

/// The ticks (from each job's "submitted" event) of a queue's jobs, oldest first.
fn ticks(relay: &Relay, queue: &str) -> Vec<String> {
    let mut out: Vec<(relay::JobId, String)> = jobs_of(relay, queue)
        .iter()
        .map(|j| {
            let ev = relay.events(j.id).unwrap();
            (j.id, ev[0].data["tick"].as_str().unwrap_or("none").to_owned())
        })
        .collect();
    out.sort();
    out.into_iter().map(|(_, t)| t).collect()
}

pub fn an_interval_schedule_enqueues_one_job_per_tick(new_db: &NewDb) {
    let t0 = Timestamp::from_millis(1_700_000_000_000);
    let (relay, clock, _db, _) = open_at(new_db, t0);
    let job = NewJob::new("reports", "build", b"{\"n\":1}".to_vec()).priority(2);
    let s = relay
        .add_schedule(NewSchedule::every("every-30s", Duration::from_secs(30), job))
        .unwrap();
    assert_eq!(
        (s.next_at, s.last_at, s.paused),
        (t0.plus(Duration::from_secs(30)), None, false)
    );
    assert_eq!(relay.run_schedules().unwrap(), 0, "not yet");
    clock.advance(Duration::from_secs(30));
    assert_eq!(relay.run_schedules().unwrap(), 1);
    assert_eq!(relay.run_schedules().unwrap(), 0, "the same tick never twice");
    let leased = relay.lease(LeaseRequest::new(["reports"])).unwrap().remove(0);
    assert_eq!(
        (leased.kind.as_str(), &leased.payload[..], leased.priority.get()),
        ("build", &b"{\"n\":1}"[..], 2)
    );
    let ev = relay.events(leased.id).unwrap();
    assert_eq!(ev[0].data["schedule"], "every-30s");
    clock.advance(Duration::from_secs(29));
    assert_eq!(relay.run_schedules().unwrap(), 0);
    clock.advance(Duration::from_secs(1));
    assert_eq!(relay.run_schedules().unwrap(), 1);
    // Twenty ticks missed while nothing ran: one catch-up job, not twenty.
    clock.advance(Duration::from_secs(600));
    assert_eq!(relay.run_schedules().unwrap(), 1);
    assert_eq!(relay.run_schedules().unwrap(), 0);
    assert_eq!(jobs_of(&relay, "reports").len(), 3);
    let s = relay.schedules().unwrap().remove(0);
    assert_eq!(
        s.last_at,
        Some(t0.plus(Duration::from_secs(90))),
        "the catch-up job carries the first missed tick"
    );
    assert_eq!(
        s.next_at,
        t0.plus(Duration::from_secs(690)),
        "the next tick is on the grid, after now"
    );
}

/// A schedule's job may carry a group (a tenant): the schedule keeps it
/// (after reopening too), each tick's job carries it and takes its turn
/// among the queue's groups, and a group the submit would refuse is
/// refused here too.
pub fn a_schedules_jobs_carry_its_group(new_db: &NewDb) {
    let t0 = Timestamp::from_millis(1_700_000_000_000);
    let (relay, clock, db, options) = open_at(new_db, t0);
    let job = NewJob::new("q", "report", b"tick".to_vec()).group("tenant-7");
    let s = relay
        .add_schedule(NewSchedule::every("per-tenant", Duration::from_secs(60), job))
        .unwrap();
    assert_eq!(s.group.as_deref(), Some("tenant-7"));
    let bad = NewJob::new("q", "k", Vec::new()).group("x".repeat(300));
    assert!(matches!(
        relay.add_schedule(NewSchedule::every("bad", Duration::from_secs(60), bad)),
        Err(Error::InvalidInput(_))
    ));
    drop(relay);
    let relay = db.open(options).unwrap();
    assert_eq!(relay.schedules().unwrap()[0].group.as_deref(), Some("tenant-7"), "kept");
    // A big group's backlog first; the tick's job is taken within a round.
    relay
        .submit_batch(
            (0..50)
                .map(|_| NewJob::new("q", "k", b"big".to_vec()).group("big"))
                .collect(),
        )
        .unwrap();
    clock.advance(Duration::from_secs(60));
    assert_eq!(relay.run_schedules().unwrap(), 1);
    let got = relay
        .lease(LeaseRequest::new(["q"]).max(2).lease_for(Duration::from_secs(600)))
        .unwrap();
    let tick = got
        .iter()
        .find(|j| j.payload == b"tick")
        .expect("the tick's job in the first round");
    assert_eq!(tick.group.as_deref(), Some("tenant-7"));
    assert_eq!(relay.get(tick.id).unwrap().group.as_deref(), Some("tenant-7"));
}

/// Berlin springs forward on 2026-03-29 and falls back on 2026-10-25; a
/// 02:30 schedule runs once on each of those days too.
pub fn a_cron_schedule_runs_once_a_day_across_daylight_saving_changes(new_db: &NewDb) {
    for (start, expect) in [
        (
            1_774_612_800_000, // 2026-03-27T12:00:00Z
            [
                "2026-03-28T01:30:00.000Z",
                "2026-03-29T01:00:00.000Z", // 02:30 does not exist: right after the gap
                "2026-03-30T00:30:00.000Z",
                "2026-03-31T00:30:00.000Z",
            ],
        ),
        (
            1_792_756_800_000, // 2026-10-23T12:00:00Z
            [
                "2026-10-24T00:30:00.000Z",
                "2026-10-25T00:30:00.000Z", // 02:30 happens twice: the first
                "2026-10-26T01:30:00.000Z",
                "2026-10-27T01:30:00.000Z",
            ],
        ),
    ] {
        let (relay, clock, _db, _) = open_at(new_db, Timestamp::from_millis(start));
        relay
            .add_schedule(
                NewSchedule::cron("nightly", "30 2 * * *", NewJob::new("night", "k", Vec::new())).tz("Europe/Berlin"),
            )
            .unwrap();
        // Every 15 minutes for four days, the scheduler looks.
        for _ in 0..4 * 24 * 4 {
            clock.advance(Duration::from_secs(900));
            relay.run_schedules().unwrap();
        }
        assert_eq!(ticks(&relay, "night"), expect);
    }
}

pub fn schedules_are_paused_resumed_replaced_and_removed(new_db: &NewDb) {
    let t0 = Timestamp::from_millis(1_700_000_000_000);
    let (relay, clock, db, options) = open_at(new_db, t0);
    let job = || NewJob::new("q", "k", Vec::new());
    relay
        .add_schedule(NewSchedule::every("s", Duration::from_secs(60), job()))
        .unwrap();
    let paused = relay.pause_schedule("s").unwrap();
    assert!(paused.paused);
    clock.advance(Duration::from_secs(300));
    assert_eq!(relay.run_schedules().unwrap(), 0, "a paused schedule enqueues nothing");
    // Stored: a reopened Relay still has it, paused.
    drop(relay);
    let relay = db.open(options).unwrap();
    assert!(relay.schedules().unwrap()[0].paused);
    let resumed = relay.resume_schedule("s").unwrap();
    assert_eq!(
        resumed.next_at,
        t0.plus(Duration::from_secs(360)),
        "ticks missed while paused are skipped"
    );
    assert_eq!(relay.run_schedules().unwrap(), 0);
    clock.advance(Duration::from_secs(60));
    assert_eq!(relay.run_schedules().unwrap(), 1);
    // Replaced: the new definition, still paused if it was.
    relay.pause_schedule("s").unwrap();
    let replaced = relay
        .add_schedule(NewSchedule::every("s", Duration::from_secs(10), job()))
        .unwrap();
    assert!(replaced.paused);
    assert_eq!(replaced.recurrence, relay::Recurrence::Every(Duration::from_secs(10)));
    relay.remove_schedule("s").unwrap();
    assert!(relay.schedules().unwrap().is_empty());
    for r in [
        relay.remove_schedule("s").map(drop),
        relay.pause_schedule("s").map(drop),
        relay.resume_schedule("nope").map(drop),
    ] {
        assert!(matches!(r, Err(Error::ScheduleNotFound { .. })), "{r:?}");
    }
    assert_eq!(jobs_of(&relay, "q").len(), 1, "removing a schedule keeps its jobs");
}

pub fn bad_schedules_are_refused_and_change_nothing(new_db: &NewDb) {
    let (relay, _clock, _db, _) = open_at(new_db, Timestamp::from_millis(1_700_000_000_000));
    let job = || NewJob::new("q", "k", Vec::new());
    let cases: Vec<(NewSchedule, &str)> = vec![
        (NewSchedule::cron("a", "every minute", job()), "cron"),
        (NewSchedule::cron("a", "61 * * * *", job()), "cron"),
        (NewSchedule::cron("a", "* * * * *", job()).tz("Mars/Olympus"), "tz"),
        (NewSchedule::every("a", Duration::from_secs(5), job()).tz("UTC"), "tz"),
        (NewSchedule::every("a", Duration::ZERO, job()), "every"),
        (NewSchedule::every("bad name", Duration::from_secs(5), job()), "name"),
        (
            NewSchedule::every("a", Duration::from_secs(5), NewJob::new("bad queue", "k", Vec::new())),
            "queue",
        ),
        (
            NewSchedule::every("a", Duration::from_secs(5), job().delay(Duration::from_secs(1))),
            "delay",
        ),
        (
            NewSchedule::every("a", Duration::from_secs(5), job().unique_key("u")),
            "unique_key",
        ),
        (
            NewSchedule::every("a", Duration::from_secs(5), job().priority(9)),
            "priority",
        ),
        (
            NewSchedule::every("a", Duration::from_secs(5), job().lease_for(Duration::from_secs(60))),
            "lease_for",
        ),
    ];
    for (s, field) in cases {
        match relay.add_schedule(s) {
            Err(Error::InvalidInput(e)) => assert_eq!(e.field, field, "{e}"),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert!(relay.schedules().unwrap().is_empty());
}

/// Two Relays on one store run the scheduler at the same tick: one job.
pub fn two_relays_on_the_store_enqueue_a_tick_once(new_db: &NewDb) {
    let t0 = Timestamp::from_millis(1_700_000_000_000);
    let (a, clock, db, options) = open_at(new_db, t0);
    let b = db.open(options).unwrap();
    a.add_schedule(NewSchedule::every(
        "s",
        Duration::from_secs(5),
        NewJob::new("q", "k", Vec::new()),
    ))
    .unwrap();
    for _ in 0..10 {
        clock.advance(Duration::from_secs(5));
        let (x, y) = std::thread::scope(|s| {
            let x = s.spawn(|| a.run_schedules().unwrap());
            let y = s.spawn(|| b.run_schedules().unwrap());
            (x.join().unwrap(), y.join().unwrap())
        });
        assert_eq!(x + y, 1, "each tick enqueues one job");
    }
    let t = ticks(&a, "q");
    let mut unique = t.clone();
    unique.dedup();
    assert_eq!((t.len(), unique.len()), (10, 10), "{t:?}");
    assert!(jobs_of(&a, "q").iter().all(|j| j.state() == JobState::Ready));
}

/// Adds `n` schedules every second on queue `q`, all at once (one batch).
fn add_every_second(relay: &Relay, n: usize) {
    std::thread::scope(|s| {
        for t in 0..8 {
            s.spawn(move || {
                for i in (t..n).step_by(8) {
                    let job = NewJob::new("ticks", "tick", Vec::new());
                    relay
                        .add_schedule(NewSchedule::every(format!("s-{i}"), Duration::from_secs(1), job))
                        .unwrap();
                }
            });
        }
    });
}

fn count(relay: &Relay, queue: &str) -> u64 {
    relay
        .stats()
        .unwrap()
        .queues
        .get(queue)
        .map_or(0, |q| q.counts.values().sum())
}

/// Regression (issue 24, item 6): 200 schedules every second enqueued 30%
/// of their ticks, and nothing said so (one pass fired 64 schedules, the
/// rest slid to their next tick). One pass now fires every due schedule
/// (up to 1,024, and the writer ticks again at once past that); a tick
/// that is passed over (the process was down) is counted: in the late
/// job's event, in `Metrics::skipped_ticks` and in the log.
pub fn five_hundred_schedules_each_tick_and_late_ticks_are_counted(new_db: &NewDb) {
    let t0 = Timestamp::from_millis(1_700_000_000_000);
    let (relay, clock, _db, _) = open_at(new_db, t0);
    add_every_second(&relay, 500);
    for second in 1..=3 {
        clock.advance(Duration::from_secs(1));
        assert_eq!(relay.run_schedules().unwrap(), 500, "second {second}");
        assert_eq!(count(&relay, "ticks"), 500 * second);
    }
    assert_eq!(relay.metrics().skipped_ticks, 0);
    // Down for 5 s: each schedule fires once, late, counting 4 skipped.
    clock.advance(Duration::from_secs(5));
    assert_eq!(relay.run_schedules().unwrap(), 500);
    assert_eq!(count(&relay, "ticks"), 2000);
    assert_eq!(relay.metrics().skipped_ticks, 2000);
    let newest = relay
        .list(&JobFilter {
            queue: Some("ticks".into()),
            limit: 1,
            ..JobFilter::default()
        })
        .unwrap();
    let ev = relay.events(newest[0].id).unwrap();
    assert_eq!(ev[0].data["skipped_ticks"], 4, "{:?}", ev[0].data);
    clock.advance(Duration::from_secs(1));
    assert_eq!(relay.run_schedules().unwrap(), 500);
    assert_eq!(relay.metrics().skipped_ticks, 2000, "on time again");
}

/// The engine's own scheduler, on the real clock: 500 schedules every
/// second for a few seconds. Every tick before each schedule's next one is
/// a job or counted as skipped in a job's event (on a quiet machine, all
/// are jobs); and more than 64 schedules fire per second (the old cap).
pub fn a_running_scheduler_keeps_up_with_five_hundred_schedules(new_db: &NewDb) {
    let db = new_db();
    let relay = db.open(Options::default()).unwrap();
    add_every_second(&relay, 500);
    std::thread::sleep(Duration::from_millis(4_500));
    drop(relay); // the scheduler stops: what follows reads a still store
    let relay = db
        .open(Options {
            scheduler: false,
            ..Options::default()
        })
        .unwrap();
    let owed: i64 = relay
        .schedules()
        .unwrap()
        .iter()
        .map(|s| (s.next_at.as_millis() - s.created_at.as_millis()) / 1000 - 1)
        .sum();
    let (mut jobs, mut skipped, mut before) = (0i64, 0i64, None);
    loop {
        let page = relay
            .list(&JobFilter {
                queue: Some("ticks".into()),
                before,
                limit: 500,
                ..JobFilter::default()
            })
            .unwrap();
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        for j in &page {
            jobs += 1;
            skipped += relay.events(j.id).unwrap()[0].data["skipped_ticks"]
                .as_i64()
                .unwrap_or(0);
        }
    }
    assert_eq!(
        jobs + skipped,
        owed,
        "every tick before each schedule's next: a job, or counted skipped"
    );
    assert!(
        jobs >= 1_000,
        "{jobs} jobs from 500 schedules every second for 4.5 s ({skipped} ticks skipped)"
    );
}
