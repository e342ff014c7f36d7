//! Periodic jobs: when a schedule's ticks fall, and the schedule record.
//!
//! Cron expressions are parsed and evaluated by the `croner` crate, in an
//! IANA time zone from `chrono-tz`. Daylight-saving changes: a time that
//! falls in a spring-forward gap ticks once, right after the gap; in the
//! hour a fall-back repeats, each wall-clock time ticks once, on its first
//! pass (so a `*/5` schedule skips the repeated hour's second pass); the
//! next tick is always after now.

use crate::job::Priority;
use crate::time::Timestamp;
use crate::validate::InvalidInput;
use chrono::{TimeZone, Utc};
use std::str::FromStr;
use std::time::Duration;

/// When a schedule's ticks fall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recurrence {
    /// A cron expression: five fields (minute hour day-of-month month
    /// day-of-week), or six with seconds first; in time zone `tz` (an IANA
    /// name such as `Europe/Berlin`; UTC when `None`).
    Cron {
        /// The expression as written, in `croner`'s syntax.
        expr: String,
        /// An IANA time zone name; `None` for UTC.
        tz: Option<String>,
    },
    /// Every `Duration` (1 s to 366 days), counted from the schedule's
    /// creation.
    Every(Duration),
}

/// Shortest [`Recurrence::Every`] interval: one second.
pub const MIN_EVERY: Duration = Duration::from_secs(1);
/// Longest [`Recurrence::Every`] interval: 366 days.
pub const MAX_EVERY: Duration = Duration::from_secs(366 * 86_400);

impl Recurrence {
    /// Refuses an expression that does not parse, an unknown time zone, or
    /// an interval out of range, naming what is wrong.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `cron` when the expression does not
    /// parse, `tz` when the zone is not an IANA name `chrono-tz` knows, or
    /// `every` when the interval lies outside [`MIN_EVERY`] to [`MAX_EVERY`].
    pub fn validate(&self) -> Result<(), InvalidInput> {
        match self {
            Self::Cron { expr, tz } => {
                parse_cron(expr)?;
                if let Some(tz) = tz {
                    parse_tz(tz)?;
                }
                Ok(())
            }
            Self::Every(d) => {
                if *d < MIN_EVERY || *d > MAX_EVERY {
                    return Err(InvalidInput::new(
                        "every",
                        format!("must be 1s-366d, got {}", humantime::format_duration(*d)),
                    ));
                }
                Ok(())
            }
        }
    }

    /// The first tick strictly after `after`; `anchor` is where an
    /// interval's ticks are counted from. `None` when the expression has
    /// no tick left (a date that never comes) or `after` lies outside the
    /// dates `chrono` can represent. Cron ticks fall on whole seconds; an interval's on `anchor`
    /// plus a whole number of intervals (`anchor` itself when `after` is
    /// before it). The interval's range is not checked here.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `cron` or `tz`, as [`Recurrence::validate`]
    /// says; an interval never fails.
    pub fn next_after(&self, after: Timestamp, anchor: Timestamp) -> Result<Option<Timestamp>, InvalidInput> {
        match self {
            Self::Every(d) => {
                let every = crate::time::duration_millis(*d).max(1);
                let since = after.as_millis().saturating_sub(anchor.as_millis());
                let n = if since < 0 { 0 } else { since / every + 1 };
                Ok(Some(Timestamp::from_millis(
                    anchor.as_millis().saturating_add(n.saturating_mul(every)),
                )))
            }
            Self::Cron { expr, tz } => {
                let cron = parse_cron(expr)?;
                let zone = match tz {
                    Some(tz) => parse_tz(tz)?,
                    None => chrono_tz::Tz::UTC,
                };
                // Cron ticks fall on whole seconds: search from the second
                // `after` lies in (every tick at or before it is not after it).
                let second = after.as_millis().div_euclid(1000) * 1000;
                let Some(start) = Utc.timestamp_millis_opt(second).single() else {
                    return Ok(None);
                };
                // croner searches in wall-clock time: from the second
                // occurrence of an hour the clocks repeat, its answer may be
                // a tick of the first, already past. Search on from there
                // until a tick really comes after `after` (at most the
                // ticks of one repeated hour, 3,600 with seconds).
                let mut at = start.with_timezone(&zone);
                for _ in 0..4_000 {
                    let Ok(next) = cron.find_next_occurrence(&at, false) else {
                        return Ok(None);
                    };
                    let t = Timestamp::from_millis(next.timestamp_millis());
                    if t > after {
                        return Ok(Some(t));
                    }
                    at = next;
                }
                Ok(None)
            }
        }
    }
}

/// Every time zone name a schedule accepts (IANA names), for documents
/// that list them.
pub fn time_zones() -> impl Iterator<Item = &'static str> {
    chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name())
}

fn parse_cron(expr: &str) -> Result<croner::Cron, InvalidInput> {
    croner::Cron::from_str(expr).map_err(|e| {
        InvalidInput::new(
            "cron",
            format!("{expr:?} is not a cron expression ({e}); write five fields, e.g. \"*/5 * * * *\""),
        )
    })
}

fn parse_tz(tz: &str) -> Result<chrono_tz::Tz, InvalidInput> {
    chrono_tz::Tz::from_str(tz).map_err(|_| {
        InvalidInput::new(
            "tz",
            format!("{tz:?} is not a time zone; use an IANA name such as Europe/Berlin or UTC"),
        )
    })
}

/// A named schedule: each tick enqueues one job from its template. Stored
/// with its state (`paused`, `next_at`, `last_at`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The schedule's unique name (a queue name's characters).
    pub name: String,
    /// When it ticks.
    pub recurrence: Recurrence,
    /// The queue each tick's job is submitted to.
    pub queue: String,
    /// The kind of each tick's job.
    pub kind: String,
    /// The payload of each tick's job, the same bytes every time.
    pub payload: Vec<u8>,
    /// The priority class of each tick's job.
    pub priority: Priority,
    /// The attempt budget of each tick's job.
    pub max_attempts: u32,
    /// The group (a tenant) of each tick's job, if any.
    pub group: Option<String>,
    /// Ticks while paused enqueue nothing.
    pub paused: bool,
    /// When the schedule was added or last replaced: an interval's ticks
    /// are counted from it.
    pub created_at: Timestamp,
    /// The next tick: the schedule is due once the time reaches it.
    pub next_at: Timestamp,
    /// The tick that enqueued the latest job, if any.
    pub last_at: Option<Timestamp>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> Timestamp {
        Timestamp::from_millis(Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap().timestamp_millis())
    }

    fn cron(expr: &str, tz: &str) -> Recurrence {
        Recurrence::Cron {
            expr: expr.into(),
            tz: Some(tz.into()),
        }
    }

    #[test]
    fn every_counts_from_its_anchor() {
        let r = Recurrence::Every(Duration::from_secs(30));
        let a = Timestamp::from_millis(1_000_000);
        assert_eq!(r.next_after(a, a).unwrap(), Some(Timestamp::from_millis(1_030_000)));
        assert_eq!(
            r.next_after(Timestamp::from_millis(1_029_999), a).unwrap(),
            Some(Timestamp::from_millis(1_030_000))
        );
        assert_eq!(
            r.next_after(Timestamp::from_millis(1_030_000), a).unwrap(),
            Some(Timestamp::from_millis(1_060_000))
        );
        // Long after (missed ticks): the next one still on the grid.
        assert_eq!(
            r.next_after(Timestamp::from_millis(1_000_000 + 95_000), a).unwrap(),
            Some(Timestamp::from_millis(1_120_000))
        );
    }

    #[test]
    fn cron_in_a_time_zone() {
        // 09:00 in Berlin is 08:00 UTC in winter, 07:00 in summer.
        let r = cron("0 9 * * *", "Europe/Berlin");
        let a = utc(2026, 1, 10, 12, 0);
        assert_eq!(r.next_after(a, a).unwrap(), Some(utc(2026, 1, 11, 8, 0)));
        let a = utc(2026, 7, 10, 12, 0);
        assert_eq!(r.next_after(a, a).unwrap(), Some(utc(2026, 7, 11, 7, 0)));
        let plain = Recurrence::Cron {
            expr: "*/5 * * * *".into(),
            tz: None,
        };
        let a = utc(2026, 1, 10, 12, 3);
        assert_eq!(plain.next_after(a, a).unwrap(), Some(utc(2026, 1, 10, 12, 5)));
        // From an instant with milliseconds: the tick is still on the second.
        let a = Timestamp::from_millis(utc(2026, 1, 10, 12, 3).as_millis() + 27);
        assert_eq!(plain.next_after(a, a).unwrap(), Some(utc(2026, 1, 10, 12, 5)));
        let on_tick = utc(2026, 1, 10, 12, 5);
        assert_eq!(
            plain
                .next_after(Timestamp::from_millis(on_tick.as_millis() + 999), on_tick)
                .unwrap(),
            Some(utc(2026, 1, 10, 12, 10)),
            "strictly after"
        );
    }

    /// 2026-03-29: Berlin springs from 02:00 to 03:00; 2026-10-25: falls
    /// back from 03:00 to 02:00.
    #[test]
    fn daylight_saving_changes_give_one_tick_a_day() {
        let r = cron("30 2 * * *", "Europe/Berlin");
        let mut t = utc(2026, 3, 27, 12, 0);
        let mut ticks = Vec::new();
        for _ in 0..4 {
            t = r.next_after(t, t).unwrap().unwrap();
            ticks.push(t);
        }
        // 02:30 does not exist on the 29th: once, right after the gap
        // (03:00 CEST = 01:00 UTC).
        assert_eq!(
            ticks,
            [
                utc(2026, 3, 28, 1, 30),
                utc(2026, 3, 29, 1, 0),
                utc(2026, 3, 30, 0, 30),
                utc(2026, 3, 31, 0, 30)
            ]
        );
        let mut t = utc(2026, 10, 24, 12, 0);
        let mut ticks = Vec::new();
        for _ in 0..3 {
            t = r.next_after(t, t).unwrap().unwrap();
            ticks.push(t);
        }
        // 02:30 happens twice on the 25th: once, at the first.
        assert_eq!(
            ticks,
            [
                utc(2026, 10, 25, 0, 30),
                utc(2026, 10, 26, 1, 30),
                utc(2026, 10, 27, 1, 30)
            ]
        );
    }

    /// From inside the hour the clocks repeat (Berlin, 2026-10-25, 02:00
    /// CEST = 00:00 UTC, then 02:00 CET = 01:00 UTC), the next tick is
    /// after now, never one of the first pass through the hour (croner
    /// answers in wall-clock time, and gave 02:10 CEST, an hour back).
    /// Each wall-clock time of that hour ticks once, on its first pass: a
    /// `*/5` schedule resumes at 03:00 CET.
    #[test]
    fn the_next_tick_from_inside_a_repeated_hour_is_after_now() {
        let every5 = cron("*/5 * * * *", "Europe/Berlin");
        let now = utc(2026, 10, 25, 1, 7); // 02:07 CET, the second pass
        assert_eq!(every5.next_after(now, now).unwrap(), Some(utc(2026, 10, 25, 2, 0)));
        let daily = cron("30 2 * * *", "Europe/Berlin");
        let now = utc(2026, 10, 25, 1, 10); // 02:10 CET: today's 02:30 CEST is past
        assert_eq!(daily.next_after(now, now).unwrap(), Some(utc(2026, 10, 26, 1, 30)));
    }

    #[test]
    fn bad_expressions_zones_and_intervals_are_refused() {
        for bad in ["", "* * *", "61 * * * *", "every minute", "* * * * * * * *"] {
            let r = Recurrence::Cron {
                expr: bad.into(),
                tz: None,
            };
            assert_eq!(r.validate().map_err(|e| e.field), Err("cron"), "{bad:?}");
        }
        assert_eq!(
            cron("* * * * *", "Mars/Olympus").validate().map_err(|e| e.field),
            Err("tz")
        );
        for d in [
            Duration::ZERO,
            Duration::from_millis(999),
            Duration::from_secs(367 * 86_400),
        ] {
            assert_eq!(Recurrence::Every(d).validate().map_err(|e| e.field), Err("every"));
        }
        assert!(cron("*/5 * * * *", "Europe/Berlin").validate().is_ok());
    }
}
