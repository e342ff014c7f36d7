//! Retry back-off: exponential, with jitter, capped.

use std::time::Duration;

/// How long a failed job waits before its next attempt.
///
/// The delay before attempt `n + 1` after `n` failed attempts is
/// `exp = min(cap, base * 2^(n-1))`, shortened by up to `jitter * exp` at
/// random. Delays never pass `cap`, and with `jitter <= 0.5` they never
/// shrink from one attempt to the next until the cap is reached (the
/// shortest next delay equals the longest current one).
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// The delay after the first failure, before jitter; it doubles with
    /// each failure after that. 1 s by default.
    pub base: Duration,
    /// The longest delay, before jitter. 1 h by default.
    pub cap: Duration,
    /// Fraction of the delay removed at random, in `0.0..=1.0` (values
    /// outside are clamped). 0.5 by default.
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(3600),
            jitter: 0.5,
        }
    }
}

impl RetryPolicy {
    /// The delay after `attempt` failed attempts (1 for the first failure);
    /// `rand` is a uniform sample from `[0, 1)`. `attempt` 0 counts as 1.
    pub fn backoff(&self, attempt: u32, rand: f64) -> Duration {
        let exp = attempt.saturating_sub(1).min(62);
        let full = self.base.checked_mul(1u32 << exp.min(31)).unwrap_or(self.cap);
        let full = if exp > 31 { self.cap } else { full.min(self.cap) };
        let cut = (self.jitter.clamp(0.0, 1.0) * rand.clamp(0.0, 1.0)).min(1.0);
        full.mul_f64(1.0 - cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps_without_jitter() {
        let p = RetryPolicy {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
            jitter: 0.0,
        };
        let ds: Vec<u128> = (1..=6).map(|a| p.backoff(a, 0.7).as_millis()).collect();
        assert_eq!(ds, vec![100, 200, 400, 800, 1000, 1000]);
        assert_eq!(p.backoff(u32::MAX, 0.0), Duration::from_secs(1));
    }

    #[test]
    fn jitter_stays_within_bounds_and_never_shrinks_across_attempts() {
        let p = RetryPolicy::default();
        for attempt in 1..40 {
            let lo_next = p.backoff(attempt + 1, 0.999_999);
            let hi_now = p.backoff(attempt, 0.0);
            assert!(hi_now <= p.cap);
            let capped = p.backoff(attempt + 1, 0.0) == p.cap;
            assert!(
                lo_next.as_millis() + 1 >= hi_now.as_millis() || capped,
                "attempt {attempt}"
            );
            assert!(p.backoff(attempt, 0.5) >= hi_now / 2);
        }
    }
}
