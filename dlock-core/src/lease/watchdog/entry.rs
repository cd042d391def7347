//! One lease in the watchdog's care: when its next renewal is due, and the backoff of its
//! retries after a failed one (never so late that the lease runs out first).

use std::sync::Weak;
use std::time::{Duration, Instant};

use crate::lease::LeaseCore;

/// The first retry after a failed renewal comes after a quarter of the interval, at most this.
const FIRST_RETRY: Duration = Duration::from_millis(500);

pub(super) struct Entry {
    pub(super) lease: Weak<LeaseCore>,
    pub(super) interval: Duration,
    /// When the next renewal is due.
    pub(super) next_due: Instant,
    /// Failed renewals in a row; retries are due at exactly `next_due`, not early.
    pub(super) failures: u32,
    /// The last shard call for this lease reached a node that does not serve its key: the
    /// next renewal goes in a call of its slot (always routed right).
    pub(super) by_slot: bool,
    /// Renewals stop after this instant (`max_hold`).
    pub(super) renew_until: Option<Instant>,
    /// No more renewals: the lease is left to run out (`max_hold` reached).
    pub(super) winding_down: bool,
}

impl Entry {
    /// Whether a renewal should go now: on time (or up to half an interval early, to share a
    /// batch), or, after a failure, exactly at the retry instant.
    pub(super) fn is_due(&self, now: Instant) -> bool {
        if self.winding_down {
            return false;
        }
        if self.failures > 0 {
            self.next_due <= now
        } else {
            self.next_due <= now + self.interval / 2
        }
    }

    pub(super) fn first_retry(&self) -> Duration {
        (self.interval / 4).min(FIRST_RETRY)
    }

    pub(super) fn retry_delay(&self) -> Duration {
        let factor = 1u32 << self.failures.saturating_sub(1).min(16);
        self.first_retry().saturating_mul(factor).min(self.interval)
    }

    /// When to retry after a failure at `now`: after the backoff delay, but never so late that
    /// the lease (certain until `safe_until`) runs out first — the last retry goes a first
    /// retry delay before `safe_until`, and retries never come closer together than half of
    /// that delay (an error that comes back at once must not spin).
    pub(super) fn retry_at(&self, now: Instant, safe_until: Instant) -> Instant {
        let first = self.first_retry();
        let last_chance = safe_until.checked_sub(first).unwrap_or(now);
        (now + self.retry_delay()).min(last_chance.max(now + first / 2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_from_a_quarter_interval_to_the_interval() {
        let mut entry = Entry {
            lease: Weak::new(),
            interval: Duration::from_secs(10),
            next_due: Instant::now(),
            failures: 1,
            renew_until: None,
            winding_down: false,
            by_slot: false,
        };
        let delays: Vec<_> = (1..=6)
            .map(|n| {
                entry.failures = n;
                entry.retry_delay()
            })
            .collect();
        let ms = |d: &Duration| d.as_millis();
        assert_eq!(
            delays.iter().map(ms).collect::<Vec<_>>(),
            [500, 1_000, 2_000, 4_000, 8_000, 10_000]
        );
        entry.interval = Duration::from_millis(300);
        entry.failures = 1;
        assert_eq!(entry.retry_delay(), Duration::from_millis(75));
        // Never past the lease's last chance: the fourth failure would wait 300 ms, but the
        // lease is certain for 200 ms only: the retry goes a first delay (75 ms) before that.
        let now = Instant::now();
        entry.failures = 4;
        assert_eq!(
            entry.retry_at(now, now + Duration::from_millis(200)),
            now + Duration::from_millis(125)
        );
        assert_eq!(
            entry.retry_at(now, now + Duration::from_secs(4)),
            now + Duration::from_millis(300)
        );
        // At the last chance already: soon, but not at once.
        assert_eq!(
            entry.retry_at(now, now),
            now + Duration::from_micros(37_500)
        );
        // A retry is due at its instant, not half an interval early.
        let now = Instant::now();
        entry.next_due = now + Duration::from_millis(10);
        assert!(!entry.is_due(now));
        entry.failures = 0;
        assert!(entry.is_due(now));
    }
}
