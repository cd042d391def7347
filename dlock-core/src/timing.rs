//! Lease arithmetic, pure: the accepted lease lengths, their validation, the clock-drift
//! allowance and the *safe-until* instant.
//!
//! A holder may act as the owner until `safe_until = t_request + lease − drift`, where
//! `t_request` is the local monotonic instant at which the request that set the lease was *sent*
//! (the lease started on the server no earlier than that), and `drift = lease / 100 + 2 ms` covers
//! clock-rate differences between this host and Redis.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Shortest accepted fixed lease. Below this the drift allowance and one round trip eat the
/// lease.
pub const MIN_TTL: Duration = Duration::from_millis(10);
/// Shortest accepted lease renewed by the watchdog ([`crate::MutexOptions::watchdog`]): a
/// renewal must get through before the lease runs out even when the process or Redis is busy.
/// Measured on a 2-core machine while the rest of this project's test suite ran (up to 6 tests
/// at once): 1,000 concurrent watchdog locks held for five leases each lost leases at 10 and
/// 20 ms and none at 30 ms and above (`tests/watchdog/watchdog_limits.rs` runs it at this minimum), so
/// the minimum keeps a margin of more than 3×. Production leases are better measured in
/// seconds: a lease is also how long a crashed holder blocks everyone else, and a pause of the
/// holder's process longer than it loses the lock.
pub const MIN_WATCHDOG_TTL: Duration = Duration::from_millis(100);
/// Longest accepted lease. A crashed holder blocks everyone for this long; hold longer with a
/// shorter lease that is extended while the work runs (the watchdog).
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Checks a lease length; the error names the accepted range.
pub(crate) fn validate_ttl(ttl: Duration) -> Result<Duration> {
    if ttl < MIN_TTL || ttl > MAX_TTL {
        return Err(Error::invalid(format!(
            "lock TTL {ttl:?} is outside the accepted range {MIN_TTL:?} ..= {MAX_TTL:?}; \
             for longer work keep a short lease and let the watchdog renew it"
        )));
    }
    Ok(ttl)
}

/// Checks the lease of a watchdog lock; the error names the minimum.
pub(crate) fn validate_watchdog_ttl(ttl: Duration) -> Result<Duration> {
    let ttl = validate_ttl(ttl)?;
    if ttl < MIN_WATCHDOG_TTL {
        return Err(Error::invalid(format!(
            "lock TTL {ttl:?} is shorter than the shortest lease the watchdog can keep \
             ({MIN_WATCHDOG_TTL:?}); use a longer TTL, or a fixed lease without the watchdog"
        )));
    }
    Ok(ttl)
}

/// The lease in whole milliseconds, as sent to Redis (validated leases always fit).
pub(crate) fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)
}

/// Allowance for clock-rate differences between this host and the Redis server.
pub(crate) fn drift(ttl: Duration) -> Duration {
    ttl / 100 + Duration::from_millis(2)
}

/// The last instant at which the holder may still act as the owner of a lease of `remaining`
/// that was measured by a request sent at `sent`.
pub(crate) fn safe_until(sent: Instant, remaining: Duration, ttl: Duration) -> Instant {
    let usable = remaining.saturating_sub(drift(ttl));
    sent.checked_add(usable).unwrap_or(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_range_is_enforced() {
        assert!(validate_ttl(Duration::ZERO).is_err());
        assert!(validate_ttl(Duration::from_millis(9)).is_err());
        assert!(validate_ttl(MIN_TTL).is_ok());
        assert!(validate_ttl(MAX_TTL).is_ok());
        let err = validate_ttl(MAX_TTL + Duration::from_millis(1)).unwrap_err();
        assert!(err.to_string().contains("accepted range"));
    }

    #[test]
    fn safe_until_subtracts_drift_and_saturates() {
        let now = Instant::now();
        let ttl = Duration::from_secs(10);
        assert_eq!(
            safe_until(now, ttl, ttl),
            now + Duration::from_millis(9_898)
        );
        assert_eq!(safe_until(now, Duration::from_millis(1), ttl), now);
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
    }
}
