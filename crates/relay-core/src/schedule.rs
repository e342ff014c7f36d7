//! The claim's choice: four priority classes with aging.
//!
//! A store hands over at most one candidate per class: the oldest eligible
//! ready job of that class (one index probe each). Within a class the oldest
//! job has waited longest, so it also has the highest effective priority of
//! its class; choosing among the four heads is therefore exact, and the cost
//! of a claim does not depend on how many jobs are waiting.

use crate::job::{JobId, Priority};
use crate::time::Timestamp;
use std::time::Duration;

/// The head of one priority class's ready list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// The job.
    pub id: JobId,
    /// Its own class, before aging.
    pub priority: Priority,
    /// When it became leasable; its wait, for aging, counts from here.
    pub ready_at: Timestamp,
}

/// `min(3, priority + waited / aging_interval)`, where `waited` is the
/// time from `ready_at` to `now` (zero when `ready_at` is later) and the
/// division rounds down, in whole milliseconds; a zero interval (or one
/// under a millisecond) disables aging.
pub fn effective_priority(priority: Priority, ready_at: Timestamp, now: Timestamp, aging_interval: Duration) -> u8 {
    let interval = aging_interval.as_millis();
    if interval == 0 {
        return priority.get();
    }
    let steps = now.since(ready_at).as_millis() / interval;
    let boosted = u128::from(priority.get()) + steps;
    u8::try_from(boosted.min(u128::from(Priority::MAX))).unwrap_or(Priority::MAX)
}

/// The candidate to lease: highest effective priority, ties to the oldest
/// (earliest `ready_at`, then lowest id).
pub fn choose<I>(candidates: I, now: Timestamp, aging_interval: Duration) -> Option<Candidate>
where
    I: IntoIterator<Item = Candidate>,
{
    candidates.into_iter().max_by(|a, b| {
        let ea = effective_priority(a.priority, a.ready_at, now, aging_interval);
        let eb = effective_priority(b.priority, b.ready_at, now, aging_interval);
        ea.cmp(&eb).then(b.ready_at.cmp(&a.ready_at)).then(b.id.cmp(&a.id))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(id: i64, p: u8, ready_ms: i64) -> Candidate {
        Candidate {
            id: JobId(id),
            priority: Priority::new(p).unwrap(),
            ready_at: Timestamp::from_millis(ready_ms),
        }
    }

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn effective_priority_ages_and_caps() {
        let now = Timestamp::from_millis(10 * 60_000);
        let p0 = Priority::LOW;
        assert_eq!(effective_priority(p0, now, now, MIN), 0);
        assert_eq!(
            effective_priority(p0, Timestamp::from_millis(now.as_millis() - 59_999), now, MIN),
            0
        );
        assert_eq!(
            effective_priority(p0, Timestamp::from_millis(now.as_millis() - 60_000), now, MIN),
            1
        );
        assert_eq!(effective_priority(p0, Timestamp::from_millis(0), now, MIN), 3);
        assert_eq!(
            effective_priority(Priority::URGENT, Timestamp::from_millis(0), now, MIN),
            3
        );
        assert_eq!(
            effective_priority(p0, Timestamp::from_millis(0), now, Duration::ZERO),
            0
        );
        // A job whose ready_at lies in the future has not waited at all.
        assert_eq!(effective_priority(Priority::HIGH, now.plus(MIN), now, MIN), 2);
    }

    #[test]
    fn higher_class_wins_when_fresh() {
        let now = Timestamp::from_millis(1000);
        let c = choose([cand(1, 0, 0), cand(2, 3, 900), cand(3, 1, 10)], now, MIN).unwrap();
        assert_eq!(c.id, JobId(2));
    }

    #[test]
    fn aged_low_class_beats_newer_urgent_on_tie() {
        let now = Timestamp::from_millis(3 * 60_000 + 5);
        // The p0 job has waited three intervals: effective 3, older than the p3 job.
        let c = choose([cand(9, 3, now.as_millis()), cand(1, 0, 0)], now, MIN).unwrap();
        assert_eq!(c.id, JobId(1));
    }

    #[test]
    fn ties_go_to_oldest_then_lowest_id() {
        let now = Timestamp::from_millis(100);
        let c = choose([cand(5, 2, 50), cand(4, 2, 50), cand(3, 2, 60)], now, MIN).unwrap();
        assert_eq!(c.id, JobId(4));
        assert!(choose(Vec::new(), now, MIN).is_none());
    }
}
