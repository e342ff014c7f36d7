//! Time as Relay sees it: milliseconds since the Unix epoch, read through an
//! injected [`Clock`] so tests can jump time instead of sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// 9999-12-31T23:59:59.999Z, the last instant RFC 3339 can write.
const LAST_PRINTABLE_MS: u64 = 253_402_300_799_999;

/// A point in time, in whole milliseconds since the Unix epoch (UTC); the
/// epoch itself by default.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Timestamp(i64);

impl Timestamp {
    /// The instant `ms` milliseconds after the Unix epoch (before it when
    /// negative).
    pub const fn from_millis(ms: i64) -> Self {
        Self(ms)
    }

    /// Milliseconds since the Unix epoch; negative before it.
    pub const fn as_millis(self) -> i64 {
        self.0
    }

    /// `self + d`, saturating instead of overflowing for absurd durations.
    #[must_use]
    pub fn plus(self, d: Duration) -> Self {
        Self(self.0.saturating_add(duration_millis(d)))
    }

    /// RFC 3339 in UTC with milliseconds, e.g. `2026-11-29T19:00:00.123Z`
    /// (times before the epoch print as the epoch, times after 9999 as its
    /// last millisecond).
    pub fn to_rfc3339(self) -> String {
        // humantime writes years up to 9999 only (and panics past them):
        // a later time (a saturated delay) prints as 9999-12-31T23:59:59.999Z.
        let ms = u64::try_from(self.0).unwrap_or(0).min(LAST_PRINTABLE_MS);
        humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
    }

    /// How long after `earlier` this is; zero when it is not later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }

    /// This instant as a person reads it from `now`: "in 12 min", "3 min
    /// ago", "now" (within a second); seconds, minutes, hours up to two
    /// days, then days, each rounded down.
    pub fn relative_to(self, now: Timestamp) -> String {
        let ms = self.0.saturating_sub(now.0);
        let span = |ms: i64| {
            let s = ms.unsigned_abs() / 1000;
            match s {
                0..60 => format!("{s} s"),
                60..3600 => format!("{} min", s / 60),
                3600..172_800 => format!("{} h", s / 3600),
                _ => format!("{} days", s / 86_400),
            }
        };
        match ms {
            -999..=999 => "now".to_owned(),
            1000.. => format!("in {}", span(ms)),
            _ => format!("{} ago", span(ms)),
        }
    }

    /// `2026-12-03 18:05:12 UTC`: to the second, with the zone.
    pub fn utc_text(self) -> String {
        let t = self.to_rfc3339();
        match (t.get(..10), t.get(11..19)) {
            (Some(day), Some(time)) => format!("{day} {time} UTC"),
            _ => t,
        }
    }
}

/// A duration in whole milliseconds, saturating at `i64::MAX`.
pub fn duration_millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Where Relay reads the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time. Not necessarily monotonic: a wall clock may step
    /// back, and callers must tolerate it.
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, duration_millis);
        Timestamp(ms)
    }
}

/// A clock that only moves when told to: for tests that expire leases and
/// age jobs without sleeping.
#[derive(Debug)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    /// A clock that reads `start` until it is moved.
    pub fn new(start: Timestamp) -> Self {
        Self(AtomicI64::new(start.0))
    }

    /// Moves the clock forward by `d`, in whole milliseconds (a part of a
    /// millisecond is dropped).
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(duration_millis(d), Ordering::SeqCst);
    }

    /// Sets the clock to `t`, which may be earlier than now: a clock that
    /// steps back, as a wall clock can.
    pub fn set(&self, t: Timestamp) {
        self.0.store(t.0, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn relative_times_read_as_a_person_says_them() {
        use super::Timestamp;
        let now = Timestamp::from_millis(1_764_784_512_000);
        let at = |s: i64| Timestamp::from_millis(now.as_millis() + s * 1000).relative_to(now);
        assert_eq!(at(0), "now");
        assert_eq!(at(59), "in 59 s");
        assert_eq!(at(12 * 60 + 30), "in 12 min");
        assert_eq!(at(-3 * 60), "3 min ago");
        assert_eq!(at(5 * 3600), "in 5 h");
        assert_eq!(at(-3 * 86_400), "3 days ago");
        assert_eq!(now.utc_text(), "2025-12-03 17:55:12 UTC");
    }

    use super::*;

    #[test]
    fn add_saturates_and_since_clamps() {
        let t = Timestamp::from_millis(i64::MAX - 1);
        assert_eq!(t.plus(Duration::from_secs(10)).as_millis(), i64::MAX);
        let a = Timestamp::from_millis(10);
        let b = Timestamp::from_millis(25);
        assert_eq!(b.since(a), Duration::from_millis(15));
        assert_eq!(a.since(b), Duration::ZERO);
    }

    #[test]
    fn rfc3339() {
        assert_eq!(
            Timestamp::from_millis(1_764_442_800_123).to_rfc3339(),
            "2025-11-29T19:00:00.123Z"
        );
        assert_eq!(Timestamp::from_millis(-5).to_rfc3339(), "1970-01-01T00:00:00.000Z");
        // A delay that saturated prints (it panicked past year 9999).
        assert_eq!(
            Timestamp::from_millis(i64::MAX).to_rfc3339(),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            Timestamp::from_millis(253_402_300_799_999).to_rfc3339(),
            "9999-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::new(Timestamp::from_millis(5));
        assert_eq!(c.now().as_millis(), 5);
        c.advance(Duration::from_millis(7));
        assert_eq!(c.now().as_millis(), 12);
        c.set(Timestamp::from_millis(1));
        assert_eq!(c.now().as_millis(), 1);
    }

    #[test]
    fn system_clock_is_after_2020() {
        assert!(SystemClock.now().as_millis() > 1_577_836_800_000);
    }
}
