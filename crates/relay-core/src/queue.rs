//! What is kept about a queue itself, apart from its jobs: whether it is
//! paused, its limits, and the state of its rate limit.

use crate::time::Timestamp;
use crate::validate::InvalidInput;
use std::time::Duration;

/// A queue's stored settings. A queue nobody has configured has the
/// defaults (not paused, no limits); queues come into being with their
/// first job and need no declaration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSettings {
    /// No job of the queue is leased while it is paused; submits, acks and
    /// everything else go on as usual, and leases already held run to the
    /// end.
    pub paused: bool,
    /// Limits on the queue's leases; none by default.
    pub limits: QueueLimits,
    /// The rate limit's current window (state kept with the settings).
    pub window: RateWindow,
    /// How long the queue keeps its finished jobs; the engine's defaults
    /// by default.
    pub retention: Retention,
}

/// How long a queue keeps its finished jobs, by final state, before the
/// engine deletes them with their events. `None` for a state: the engine's
/// default for it (`Options::retention`, 7 days unless set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Retention {
    /// How long a SUCCEEDED job is kept.
    pub succeeded: Option<Keep>,
    /// How long a DEAD job is kept.
    pub dead: Option<Keep>,
    /// How long a CANCELLED job is kept.
    pub cancelled: Option<Keep>,
}

/// How long a finished job is kept: for a time after it finished, or
/// forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Keep {
    /// Deleted once this long has passed since it finished (0: at the
    /// next prune).
    For(Duration),
    /// Never deleted by the engine.
    Forever,
}

/// Longest retention short of forever: ten years.
pub const MAX_KEEP: Duration = Duration::from_secs(10 * 366 * 86_400);

/// What the engine keeps when nothing says otherwise: 7 days.
pub const DEFAULT_KEEP: Keep = Keep::For(Duration::from_secs(7 * 86_400));

impl Keep {
    /// As stored: milliseconds, or -1 for forever.
    pub fn to_millis(self) -> i64 {
        match self {
            Keep::For(d) => crate::time::duration_millis(d),
            Keep::Forever => -1,
        }
    }

    /// From its stored form ([`Keep::to_millis`]).
    ///
    /// # Errors
    ///
    /// A message when `ms` is below -1 or longer than [`MAX_KEEP`].
    pub fn from_millis(ms: i64) -> Result<Keep, String> {
        match ms {
            -1 => Ok(Keep::Forever),
            ms if ms >= 0 && ms <= crate::time::duration_millis(MAX_KEEP) => {
                Ok(Keep::For(Duration::from_millis(ms.unsigned_abs())))
            }
            ms => Err(format!(
                "{ms} is not a retention (-1 for forever, or 0-{} ms)",
                MAX_KEEP.as_millis()
            )),
        }
    }

    /// Whether a job that finished at `finished` is past keeping at `now`.
    pub fn expired(self, finished: Timestamp, now: Timestamp) -> bool {
        match self {
            Keep::For(d) => finished.plus(d) <= now,
            Keep::Forever => false,
        }
    }
}

impl std::fmt::Display for Keep {
    /// `forever`, or the duration as humantime writes it (`7days`, `1h 30m`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Keep::For(d) if d.is_zero() => f.write_str("0s"),
            Keep::For(d) => write!(f, "{}", humantime::format_duration(*d)),
            Keep::Forever => f.write_str("forever"),
        }
    }
}

impl std::str::FromStr for Keep {
    type Err = String;

    /// `forever`, or a duration (`0s`, `12h`, `30d`, `1h 30m`). The range
    /// is [`Retention::validate`]'s.
    ///
    /// # Errors
    ///
    /// A message naming what was expected.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "forever" => Ok(Keep::Forever),
            other => humantime::parse_duration(other)
                .map(Keep::For)
                .map_err(|e| format!("{other:?}: {e} (write forever, or a duration like 0s, 12h, 30d)")),
        }
    }
}

impl Retention {
    /// The same `keep` for every final state.
    pub fn all(keep: Keep) -> Retention {
        Retention {
            succeeded: Some(keep),
            dead: Some(keep),
            cancelled: Some(keep),
        }
    }

    /// Whether any state has a retention of its own.
    pub fn is_set(&self) -> bool {
        *self != Retention::default()
    }

    /// What is kept for a job in `state`: its own setting, else
    /// `default`'s, else [`DEFAULT_KEEP`]; `None` for a state that is not
    /// final (never pruned).
    pub fn of(&self, state: crate::JobState, default: &Retention) -> Option<Keep> {
        use crate::JobState;
        let full = self.over(default);
        match state {
            JobState::Succeeded => full.succeeded,
            JobState::Dead => full.dead,
            JobState::Cancelled => full.cancelled,
            _ => None,
        }
    }

    /// Every state's retention filled in from `default`, else
    /// [`DEFAULT_KEEP`].
    pub fn over(&self, default: &Retention) -> Retention {
        let pick = |own: Option<Keep>, dflt: Option<Keep>| Some(own.or(dflt).unwrap_or(DEFAULT_KEEP));
        Retention {
            succeeded: pick(self.succeeded, default.succeeded),
            dead: pick(self.dead, default.dead),
            cancelled: pick(self.cancelled, default.cancelled),
        }
    }

    /// Refuses a retention longer than [`MAX_KEEP`] (short of forever).
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `succeeded`, `dead` or `cancelled`.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        for (field, keep) in [
            ("succeeded", self.succeeded),
            ("dead", self.dead),
            ("cancelled", self.cancelled),
        ] {
            if let Some(Keep::For(d)) = keep {
                if d > MAX_KEEP {
                    return Err(InvalidInput::new(
                        field,
                        format!(
                            "must be at most 10 years ({} ms) or forever, got {}",
                            MAX_KEEP.as_millis(),
                            humantime::format_duration(d)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Limits on a queue's leases, enforced by the store across every process
/// and node that shares it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueueLimits {
    /// At most this many of the queue's jobs LEASED at once, all workers
    /// together.
    pub max_leased: Option<u32>,
    /// At most this many jobs of one group (`NewJob::group`) LEASED at
    /// once, all workers together: one tenant's jobs never take more than
    /// that many of the queue's workers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_leased_per_group: Option<u32>,
    /// At most `limit` leases in each window of `per`.
    pub rate: Option<RateLimit>,
    /// A job of the queue whose lease expires this many times (since it
    /// was submitted or last retried) is DEAD, whatever attempts it has
    /// left: a poison pill, whose handler crashes or hangs its worker.
    /// `None`: the engine's default (`Options::poison_after`, 3); 0:
    /// expiries only count as failed attempts.
    pub poison_after: Option<u32>,
}

/// At most `limit` leases in each window of `per`. A window begins with
/// the first lease after the previous one ended, so over any stretch of
/// `k` windows' length at most `(k + 1) * limit` leases are taken, and
/// under steady demand `k * limit`. (A lease is timed by its batch's
/// clock, read before the batch waited for the queue's lock: another
/// process's lease may be timed a few milliseconds before the window it
/// was counted in began.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RateLimit {
    /// Leases allowed in one window (1 to [`MAX_LIMIT`] once validated).
    pub limit: u32,
    /// The window's length (1 ms to [`MAX_RATE_PERIOD`] once validated);
    /// serialized as `per_ms`, in whole milliseconds.
    #[serde(rename = "per_ms", serialize_with = "millis")]
    pub per: Duration,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A rate limit's window: it began at `start`, and `count` leases were
/// taken in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateWindow {
    /// When the window began: the first lease after the previous window
    /// ended (the epoch by default).
    pub start: Timestamp,
    /// Leases taken in the window so far.
    pub count: u32,
}

/// Largest `max_leased` and rate `limit`: one million.
pub const MAX_LIMIT: u32 = 1_000_000;
/// Longest rate window: one day.
pub const MAX_RATE_PERIOD: Duration = Duration::from_secs(86_400);
/// Largest `poison_after`.
pub const MAX_POISON_AFTER: u32 = 1000;

impl QueueLimits {
    /// Some limit on leases is set (a queue without one needs no lock or
    /// count when its jobs are claimed; `poison_after` is not one).
    pub fn is_set(&self) -> bool {
        self.max_leased.is_some() || self.rate.is_some() || self.max_leased_per_group.is_some()
    }

    /// Refuses limits that could not work: zero (pause the queue instead),
    /// above [`MAX_LIMIT`], a window shorter than a millisecond or longer
    /// than a day. Unset limits always pass.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `max_leased` (or
    /// `max_leased_per_group`) when it is 0 or above [`MAX_LIMIT`]; for field `rate_limit` when the rate's `limit` is out
    /// of that range or its `per` lies outside 1 ms to [`MAX_RATE_PERIOD`];
    /// for field `poison_after` above [`MAX_POISON_AFTER`].
    pub fn validate(&self) -> Result<(), InvalidInput> {
        if let Some(n) = self.poison_after.filter(|n| *n > MAX_POISON_AFTER) {
            return Err(InvalidInput::new(
                "poison_after",
                format!("must be 0-{MAX_POISON_AFTER}, got {n} (0: expiries never make a job DEAD by themselves)"),
            ));
        }
        if let Some(n) = self.max_leased {
            if n == 0 || n > MAX_LIMIT {
                return Err(InvalidInput::new(
                    "max_leased",
                    format!("must be 1-{MAX_LIMIT}, got {n} (to stop a queue's leases, pause it)"),
                ));
            }
        }
        if let Some(n) = self.max_leased_per_group {
            if n == 0 || n > MAX_LIMIT {
                return Err(InvalidInput::new(
                    "max_leased_per_group",
                    format!("must be 1-{MAX_LIMIT}, got {n} (to stop a queue's leases, pause it)"),
                ));
            }
        }
        if let Some(r) = self.rate {
            if r.limit == 0 || r.limit > MAX_LIMIT {
                return Err(InvalidInput::new(
                    "rate_limit",
                    format!(
                        "the limit must be 1-{MAX_LIMIT}, got {} (to stop a queue's leases, pause it)",
                        r.limit
                    ),
                ));
            }
            if r.per < Duration::from_millis(1) || r.per > MAX_RATE_PERIOD {
                return Err(InvalidInput::new(
                    "rate_limit",
                    format!("the period must be 1ms-24h, got {:?}", r.per),
                ));
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for RateLimit {
    type Err = String;

    /// `N/PERIOD`: a count, a slash, and `s`, `min`, `h`, `d` or a
    /// duration (`100/s`, `5/min`, `1000/h`, `20/10s`). Range checks are
    /// [`QueueLimits::validate`]'s.
    ///
    /// # Errors
    ///
    /// A message with the expected form when there is no `/`, the count is
    /// not a `u32`, or the period is neither a unit nor a duration.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let usage = "write a rate like 100/s, 5/min, 1000/h or 20/10s";
        let (n, period) = s.split_once('/').ok_or_else(|| format!("{s:?}: {usage}"))?;
        let limit = n
            .trim()
            .parse::<u32>()
            .map_err(|e| format!("{n:?} is not a count ({e}): {usage}"))?;
        let per = match period.trim() {
            "s" | "sec" | "second" => Duration::from_secs(1),
            "m" | "min" | "minute" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            "d" | "day" => Duration::from_secs(86_400),
            other => humantime::parse_duration(other).map_err(|e| format!("{other:?}: {e}: {usage}"))?,
        };
        Ok(RateLimit { limit, per })
    }
}

impl RateLimit {
    /// When `w`'s window ends: `per` after its start (saturating).
    pub fn window_end(&self, w: &RateWindow) -> Timestamp {
        w.start.plus(self.per)
    }

    /// Whether `now` begins a new window: `w` has ended, or it begins
    /// more than `per` after `now` (the clock stepped back that far).
    ///
    /// A `now` shortly before `w.start` is in `w`: with several processes
    /// on one store, a batch's clock is read before it waits for the
    /// queue's lock, so the window another process began while it waited
    /// may start a few milliseconds "after" it. Counting that as a fresh
    /// window let each such batch take a whole extra `limit` (574 leases
    /// in 10 s under 50/s across three processes on PostgreSQL).
    fn begins_anew(&self, w: &RateWindow, now: Timestamp) -> bool {
        now >= self.window_end(w) || now.plus(self.per) < w.start
    }

    /// Leases still allowed at `now` (a window that has ended, or begins
    /// more than `per` after `now` because the clock stepped back, counts
    /// as a fresh one).
    pub fn left(&self, w: &RateWindow, now: Timestamp) -> u32 {
        if self.begins_anew(w, now) {
            self.limit
        } else {
            self.limit.saturating_sub(w.count)
        }
    }

    /// Counts one lease at `now`, starting a new window if the last one
    /// ended (or lies more than `per` in the future: a clock that stepped
    /// back).
    pub fn take(&self, w: &mut RateWindow, now: Timestamp) {
        if self.begins_anew(w, now) {
            *w = RateWindow { start: now, count: 0 };
        }
        w.count = w.count.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn a_window_allows_its_limit_then_the_next_begins() {
        let r = RateLimit {
            limit: 3,
            per: Duration::from_secs(1),
        };
        let mut w = RateWindow::default();
        assert_eq!(r.left(&w, at(10_000)), 3);
        for _ in 0..3 {
            r.take(&mut w, at(10_000));
        }
        assert_eq!(
            w,
            RateWindow {
                start: at(10_000),
                count: 3
            }
        );
        assert_eq!(r.left(&w, at(10_999)), 0);
        assert_eq!(r.window_end(&w), at(11_000));
        assert_eq!(r.left(&w, at(11_000)), 3);
        r.take(&mut w, at(11_500));
        assert_eq!(
            w,
            RateWindow {
                start: at(11_500),
                count: 1
            }
        );
        // A clock that stepped back starts afresh rather than waiting.
        assert_eq!(r.left(&w, at(5_000)), 3);
    }

    #[test]
    fn a_batch_whose_clock_was_read_just_before_the_window_began_is_in_it() {
        // Another process began the window at 11.5 s and took the whole
        // limit while this batch, whose clock read 11.497 s, waited for
        // the queue's lock.
        let r = RateLimit {
            limit: 3,
            per: Duration::from_secs(1),
        };
        let mut w = RateWindow {
            start: at(11_500),
            count: 3,
        };
        assert_eq!(r.left(&w, at(11_497)), 0);
        assert_eq!(r.left(&w, at(10_500)), 0, "a whole window early is still this one");
        w.count = 2;
        r.take(&mut w, at(11_497));
        assert_eq!(
            w,
            RateWindow {
                start: at(11_500),
                count: 3
            },
            "counted in the window, which keeps its start"
        );
        // More than a window early: the clock stepped back, start afresh.
        assert_eq!(r.left(&w, at(10_499)), 3);
    }

    #[test]
    fn rates_parse_from_text() {
        let r = |s: &str| s.parse::<RateLimit>().map(|r| (r.limit, r.per));
        assert_eq!(r("100/s"), Ok((100, Duration::from_secs(1))));
        assert_eq!(r("5/min"), Ok((5, Duration::from_secs(60))));
        assert_eq!(r("20/10s"), Ok((20, Duration::from_secs(10))));
        for bad in ["100", "x/s", "5/fortnight", "-1/s", "/s"] {
            assert!(r(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn limits_refuse_zero_and_out_of_range() {
        let ok = QueueLimits {
            max_leased_per_group: None,
            max_leased: Some(5),
            rate: Some(RateLimit {
                limit: 100,
                per: Duration::from_secs(1),
            }),
            poison_after: Some(0),
        };
        assert!(ok.validate().is_ok());
        assert!(QueueLimits::default().validate().is_ok());
        let bad = [
            QueueLimits {
                max_leased: Some(0),
                ..ok
            },
            QueueLimits {
                poison_after: Some(MAX_POISON_AFTER + 1),
                ..ok
            },
            QueueLimits {
                max_leased: Some(MAX_LIMIT + 1),
                ..ok
            },
            QueueLimits {
                rate: Some(RateLimit {
                    limit: 0,
                    per: Duration::from_secs(1),
                }),
                ..ok
            },
            QueueLimits {
                rate: Some(RateLimit {
                    limit: 1,
                    per: Duration::ZERO,
                }),
                ..ok
            },
            QueueLimits {
                rate: Some(RateLimit {
                    limit: 1,
                    per: Duration::from_secs(86_401),
                }),
                ..ok
            },
        ];
        for b in bad {
            assert!(b.validate().is_err(), "{b:?}");
        }
    }
}
