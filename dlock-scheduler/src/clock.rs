//! The scheduler's clock: wall-clock time in UTC, replaceable for tests and demos, and the
//! replica's estimate of the Redis server's clock built on it.
//!
//! Occurrences are *nominal* instants computed from the cron expression, so replicas agree on
//! them whatever their clocks say. Fire times are measured by the Redis server: a claim is
//! refused before its time by the server's clock (the replica then waits). Each replica also
//! corrects its own clock by the server time its requests return ([`ServerClock`]), so that a
//! replica whose clock runs late still asks on time once it has heard from Redis — the turn of
//! a late replica would otherwise start late. A skewed clock therefore only makes a replica ask
//! early or late until its first answer. [`SkewedClock`] lets tests and demos inject a skew.

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
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

/// Replies slower than this are not used to estimate the server's clock: the estimate's error
/// is up to half the round trip.
const MAX_SAMPLE_RTT: TimeDelta = TimeDelta::milliseconds(50);
/// How long the fastest sample is trusted before any newer one replaces it (clocks drift, and
/// a replica's clock may be stepped).
const SAMPLE_MAX_AGE: TimeDelta = TimeDelta::seconds(60);

/// A replica's estimate of the Redis server's clock: its [`Clock`] plus the offset measured
/// from the server times in the scheduler's replies. A reply's server time is taken to be the
/// middle of its round trip, so its error is at most half the round trip: the estimate keeps
/// the sample with the shortest round trip (NTP's minimum filter), replaced by any sample once
/// it is [`SAMPLE_MAX_AGE`] old. Zero offset until the first reply.
pub(crate) struct ServerClock {
    clock: Arc<dyn Clock>,
    /// Server minus local, in µs: read on every wake-up, so kept apart from `best`.
    offset_us: AtomicI64,
    best: StdMutex<Option<Sample>>,
}

/// The sample the estimate rests on.
#[derive(Clone, Copy, Debug)]
struct Sample {
    rtt: TimeDelta,
    taken: DateTime<Utc>,
}

impl ServerClock {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            offset_us: AtomicI64::new(0),
            best: StdMutex::new(None),
        }
    }

    /// The replica's own clock, uncorrected: what samples are taken with.
    pub(crate) fn local(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The estimated time on the Redis server. (The server's times are whole milliseconds
    /// rounded down, so the estimate errs late rather than early.)
    pub(crate) fn now(&self) -> DateTime<Utc> {
        let offset = TimeDelta::microseconds(self.offset_us.load(Ordering::Relaxed));
        let local = self.clock.now();
        local.checked_add_signed(offset).unwrap_or(local)
    }

    /// How long until `at` by the server's estimated clock (zero if it has passed).
    pub(crate) fn until(&self, at: DateTime<Utc>) -> Duration {
        (at - self.now()).to_std().unwrap_or(Duration::ZERO)
    }

    /// Learns from a reply: the request left at `sent` and its answer came back at `received`
    /// (both by [`ServerClock::local`]), carrying the server's time `server_ms`.
    pub(crate) fn sample(&self, sent: DateTime<Utc>, received: DateTime<Utc>, server_ms: i64) {
        let rtt = received - sent;
        if rtt < TimeDelta::zero() || rtt > MAX_SAMPLE_RTT {
            return;
        }
        let Some(middle) = sent.checked_add_signed(rtt / 2) else {
            return;
        };
        let Some(middle_us) = middle.timestamp_nanos_opt().map(|ns| ns / 1000) else {
            return;
        };
        // Poison-tolerant: `best` only ever gets whole assignments.
        let mut best = self.best.lock().unwrap_or_else(PoisonError::into_inner);
        let better = best.is_none_or(|b| rtt <= b.rtt || received - b.taken > SAMPLE_MAX_AGE);
        if better {
            *best = Some(Sample {
                rtt,
                taken: received,
            });
            let offset_us = server_ms.saturating_mul(1000).saturating_sub(middle_us);
            self.offset_us.store(offset_us, Ordering::Relaxed);
        }
    }
}

impl fmt::Debug for ServerClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            clock: _,
            offset_us,
            best: _,
        } = self;
        write!(f, "ServerClock({} µs)", offset_us.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_offset_is_taken_from_fast_replies_only() {
        let server = ServerClock::new(Arc::new(SkewedClock::millis(-400)));
        let sent = server.local();
        // The server's clock is 400 ms ahead of this replica's.
        let server_ms = (sent + TimeDelta::milliseconds(401)).timestamp_millis();
        server.sample(sent, sent + TimeDelta::milliseconds(2), server_ms);
        let error = (server.now() - SystemClock.now()).num_milliseconds();
        assert!(error.abs() <= 5, "corrected to within a few ms: {error}");
        // A slow reply is ignored, and so is one slower than the best so far.
        server.sample(sent, sent + TimeDelta::seconds(1), server_ms + 10_000);
        server.sample(sent, sent + TimeDelta::milliseconds(20), server_ms + 10_000);
        let error = (server.now() - SystemClock.now()).num_milliseconds();
        assert!(error.abs() <= 5, "{error}");
        // Once the best sample is old, a newer one replaces it.
        let later = sent + TimeDelta::seconds(61);
        let later_server_ms = (later + TimeDelta::milliseconds(10_410)).timestamp_millis();
        server.sample(later, later + TimeDelta::milliseconds(20), later_server_ms);
        let error = (server.now() - SystemClock.now()).num_milliseconds();
        assert!(error > 9_000, "{error}");
    }
}
