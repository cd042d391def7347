//! The scheduler's clock: wall-clock time in UTC, replaceable for tests and demos.
//!
//! Occurrences are *nominal* instants computed from the cron expression, so replicas agree on
//! them whatever their clocks say. A skewed clock only makes a replica *try* an occurrence early
//! or late: the claim in Redis keeps it to one run, and refuses it before its time by the Redis
//! server's clock (the replica then waits). [`SkewedClock`] lets tests and demos inject a skew.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

/// A source of the current wall-clock time.
pub trait Clock: Send + Sync + 'static {
    /// The current time, in UTC.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The system clock shifted by a fixed offset: a replica whose clock runs early (positive) or
/// late (negative). For tests and demos of clock skew.
///
/// ```
/// use dlock_scheduler::{Clock, SkewedClock, SystemClock};
/// let early = SkewedClock::ahead(std::time::Duration::from_millis(700));
/// assert!(early.now() > SystemClock.now());
/// ```
#[derive(Clone, Copy)]
pub struct SkewedClock {
    offset: TimeDelta,
}

impl SkewedClock {
    /// A clock `by` ahead of the system clock.
    pub fn ahead(by: Duration) -> Self {
        Self {
            offset: TimeDelta::from_std(by).unwrap_or(TimeDelta::MAX),
        }
    }

    /// A clock `by` behind the system clock.
    pub fn behind(by: Duration) -> Self {
        Self {
            offset: -TimeDelta::from_std(by).unwrap_or(TimeDelta::MAX),
        }
    }

    /// A clock `ms` milliseconds ahead (positive) or behind (negative).
    pub fn millis(ms: i64) -> Self {
        Self {
            offset: TimeDelta::milliseconds(ms),
        }
    }
}

impl Clock for SkewedClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
            .checked_add_signed(self.offset)
            .unwrap_or_else(Utc::now)
    }
}

impl fmt::Debug for SkewedClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { offset } = self;
        write!(f, "SkewedClock({} ms)", offset.num_milliseconds())
    }
}

/// How long until `at` by `clock` (zero if it has passed).
pub(crate) fn until(clock: &dyn Clock, at: DateTime<Utc>) -> Duration {
    (at - clock.now()).to_std().unwrap_or(Duration::ZERO)
}
