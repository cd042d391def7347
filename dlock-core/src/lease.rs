//! Leases: accepted TTLs, clock drift, the *safe-until* instant, and how the loss of a lease
//! reaches the work it protects.
//!
//! A holder may act as the owner until `safe_until = t_request + lease − drift`, where
//! `t_request` is the local monotonic instant at which the request that set the lease was *sent*
//! (the lease started on the server no earlier than that), and `drift = lease / 100 + 2 ms` covers
//! clock-rate differences between this host and Redis.
//!
//! A lease is *lost* — once, for good — when an extension finds the lock gone or owned by another,
//! when renewal stops (`max_hold`), or when `safe_until` passes without a successful renewal. Loss
//! resolves every [`Lease::lost`] future, cancels the lease's [`CancellationToken`] and logs a
//! `tracing` warning, no later than `safe_until`.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::client::Shared;
use crate::error::{Error, ErrorKind, Result};
use crate::key::LockKeys;
use crate::runtime::{lock, spawn_detached};
use crate::token::{FencingToken, OwnerToken};
use crate::wait::Registration;

/// Shortest accepted fixed lease. Below this the drift allowance and one round trip eat the
/// lease.
pub const MIN_TTL: Duration = Duration::from_millis(10);
/// Shortest accepted lease renewed by the watchdog ([`crate::MutexOptions::watchdog`]): a
/// renewal must get through before the lease runs out even when the process or Redis is busy.
/// Measured on a 2-core machine while the rest of this project's test suite ran (up to 6 tests
/// at once): 1,000 concurrent watchdog locks held for five leases each lost leases at 10 and
/// 20 ms and none at 30 ms and above (`tests/watchdog_minimum.rs` runs it at this minimum), so
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

/// Why a lease was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LostReason {
    /// The lease ran out: a fixed lease was not extended in time, or an extension found the lock
    /// already gone.
    Expired,
    /// Another owner holds the lock now (our lease expired and it was taken, or an operator
    /// forced it open and someone else acquired it).
    TakenOver,
    /// The lock was deleted from under us (an operator's `force_unlock`, or a `DEL`).
    Removed,
    /// Redis could not be reached to renew the lease before it ran out.
    Unreachable,
    /// Renewal stopped because the lock was held for its `max_hold`.
    MaxHold,
    /// The lock was released by its holder.
    Released,
    /// The client was shut down ([`crate::Client::shutdown`]), which released the lock.
    Shutdown,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Expired => "the lease expired",
            Self::TakenOver => "another owner holds the lock",
            Self::Removed => "the lock was removed by someone else",
            Self::Unreachable => "Redis could not be reached to renew the lease",
            Self::MaxHold => "the lock was held for its max_hold",
            Self::Released => "the lock was released",
            Self::Shutdown => "the client was shut down",
        })
    }
}

/// The news that a lease was lost; resolves [`Lease::lost`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseLost {
    reason: LostReason,
}

impl LeaseLost {
    /// Why the lease was lost.
    pub fn reason(self) -> LostReason {
        self.reason
    }
}

impl fmt::Display for LeaseLost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lease lost: {}", self.reason)
    }
}

impl std::error::Error for LeaseLost {}

impl LeaseLost {
    pub(crate) fn new(reason: LostReason) -> Self {
        Self { reason }
    }

    /// The lease-lost error for the lock `name`.
    pub(crate) fn into_error(self, name: &str) -> Error {
        Error::new(
            ErrorKind::LeaseLost,
            format!(
                "lock `{name}`: {}; work under this lease is no longer exclusive",
                self.reason
            ),
        )
    }
}

/// How a lease is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// The lease runs out unless the holder extends it.
    Fixed,
    /// The client's watchdog renews it every `interval`, for at most `max_hold` in all.
    Watchdog {
        interval: Duration,
        max_hold: Option<Duration>,
    },
}

#[derive(Debug)]
struct Times {
    /// The lease the last acquire/extend/renewal set (shorter than `full_ttl` near `max_hold`).
    ttl: Duration,
    /// The lease the watchdog renews to.
    full_ttl: Duration,
    safe_until: Instant,
}

/// One acquisition in Redis, shared by every hold (guard) on it and by the watchdog.
pub(crate) struct LeaseCore {
    pub(crate) shared: Arc<Shared>,
    pub(crate) keys: LockKeys,
    pub(crate) token: OwnerToken,
    pub(crate) fence: FencingToken,
    pub(crate) acquired_at: Instant,
    pub(crate) renewal: Renewal,
    times: StdMutex<Times>,
    /// Depths of the live holds (reentrancy, see `hold.rs`), as a bit set: bit `d - 1` for
    /// depth `d`; zero once the last hold is gone.
    depths: StdMutex<u64>,
    lost: OnceLock<LostReason>,
    lost_notify: Notify,
    cancel: OnceLock<CancellationToken>,
    released: AtomicBool,
    /// The watchdog stopped renewing (`max_hold`): running out is then the expected end.
    renewal_stopped: AtomicBool,
    /// Kept while held so that a late duplicate of our grant is recognised as ours rather than
    /// released as an orphan.
    _registration: Option<Registration>,
}

/// What releasing one hold of a lease means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HoldRelease {
    /// It was the last hold: release the lock in Redis.
    Last,
    /// An inner reentrant hold, released in order: the outer holds keep the lock.
    Nested,
    /// An outer hold released while an inner one is alive: refused (the inner holds keep the
    /// lock, which is released with the last of them).
    OutOfOrder,
}

/// Everything a new lease needs; see [`LeaseCore::new`].
pub(crate) struct NewLease {
    pub(crate) shared: Arc<Shared>,
    pub(crate) keys: LockKeys,
    pub(crate) token: OwnerToken,
    pub(crate) fence: u64,
    pub(crate) ttl: Duration,
    pub(crate) safe_until: Instant,
    pub(crate) renewal: Renewal,
    pub(crate) registration: Option<Registration>,
}

impl LeaseCore {
    pub(crate) fn new(new: NewLease) -> Arc<Self> {
        Arc::new(Self {
            shared: new.shared,
            keys: new.keys,
            token: new.token,
            fence: FencingToken::new(new.fence),
            acquired_at: Instant::now(),
            renewal: new.renewal,
            times: StdMutex::new(Times {
                ttl: new.ttl,
                full_ttl: new.ttl,
                safe_until: new.safe_until,
            }),
            renewal_stopped: AtomicBool::new(false),
            depths: StdMutex::new(1),
            lost: OnceLock::new(),
            lost_notify: Notify::new(),
            cancel: OnceLock::new(),
            released: AtomicBool::new(false),
            _registration: new.registration,
        })
    }

    pub(crate) fn ttl(&self) -> Duration {
        lock(&self.times).ttl
    }

    /// The lease the watchdog renews to (the acquire's, or the last explicit extension's).
    pub(crate) fn full_ttl(&self) -> Duration {
        lock(&self.times).full_ttl
    }

    /// Records that the watchdog will not renew this lease again.
    pub(crate) fn stop_renewal(&self) {
        self.renewal_stopped.store(true, Ordering::Release);
    }

    pub(crate) fn safe_until(&self) -> Instant {
        lock(&self.times).safe_until
    }

    /// Records a successful renewal by the watchdog, measured by a request sent at `sent`.
    pub(crate) fn renewed(&self, sent: Instant, ttl: Duration) {
        let mut times = lock(&self.times);
        times.ttl = ttl;
        times.safe_until = safe_until(sent, ttl, ttl);
    }

    /// Records a successful explicit extension: the watchdog renews to this lease from now on.
    pub(crate) fn extended(&self, sent: Instant, ttl: Duration) {
        let mut times = lock(&self.times);
        times.ttl = ttl;
        times.full_ttl = ttl;
        times.safe_until = safe_until(sent, ttl, ttl);
    }

    /// Whether the lease still stands: not lost, not released, not past its safe-until.
    pub(crate) fn is_live(&self) -> bool {
        self.is_live_at(Instant::now())
    }

    /// [`LeaseCore::is_live`] at `now` (a caller scanning many leases reads the clock once).
    pub(crate) fn is_live_at(&self, now: Instant) -> bool {
        !self.is_settled() && now < self.safe_until()
    }

    /// Whether the lease has ended with a known outcome (lost or released). A lease past its
    /// safe-until is not settled until someone declares it lost.
    pub(crate) fn is_settled(&self) -> bool {
        self.lost.get().is_some() || self.released.load(Ordering::Acquire)
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.lost.get().copied()
    }

    /// Declares the lease lost (first call wins): wakes `lost()` futures, cancels the token,
    /// warns. Returns whether this call was the first.
    pub(crate) fn fire_lost(&self, reason: LostReason) -> bool {
        let first = self.fire_lost_quietly(reason);
        if first && !matches!(reason, LostReason::Released | LostReason::Shutdown) {
            tracing::warn!(lock = %self.keys.name(), fence = self.fence.get(), %reason, "dlock: lease lost");
        }
        first
    }

    /// [`LeaseCore::fire_lost`] without the warning, for a caller that reports many losses in
    /// one line (the watchdog during an outage).
    pub(crate) fn fire_lost_quietly(&self, reason: LostReason) -> bool {
        if self.lost.set(reason).is_err() {
            return false;
        }
        self.lost_notify.notify_waiters();
        if let Some(token) = self.cancel.get() {
            token.cancel();
        }
        true
    }

    /// The reason to report once `safe_until` has passed without news.
    pub(crate) fn deadline_reason(&self) -> LostReason {
        match self.renewal {
            Renewal::Fixed => LostReason::Expired,
            Renewal::Watchdog { .. } if self.renewal_stopped.load(Ordering::Acquire) => {
                LostReason::MaxHold
            }
            Renewal::Watchdog { .. } => LostReason::Unreachable,
        }
    }

    /// Resolves once the lease is lost, no later than its safe-until instant.
    pub(crate) async fn lost(&self) -> LeaseLost {
        loop {
            let notified = self.lost_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(reason) = self.lost_reason() {
                return LeaseLost { reason };
            }
            let deadline = self.safe_until();
            if Instant::now() >= deadline {
                self.fire_lost(self.deadline_reason());
                continue;
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline.into()) => {}
            }
        }
    }

    /// The token cancelled when the lease is lost. Fixed leases get a timer task the first time
    /// a token is asked for (watchdog leases are watched by the watchdog anyway).
    pub(crate) fn cancellation_token(self: &Arc<Self>) -> CancellationToken {
        let mut created = false;
        let token = self
            .cancel
            .get_or_init(|| {
                created = true;
                CancellationToken::new()
            })
            .clone();
        if self.lost.get().is_some() {
            token.cancel();
        } else if created && self.renewal == Renewal::Fixed {
            let lease = Arc::downgrade(self);
            // Without a runtime, the token fires when someone next looks at the lease.
            spawn_detached(async move {
                // Fires at safe-until unless the lease is extended, lost or released first.
                if let Some(lease) = lease.upgrade() {
                    lease.lost().await;
                }
            });
        }
        token
    }

    /// Records a nested hold of `depth` (2 ..= 64; the nested permits of `hold.rs` make it
    /// unique). `false` when the last hold is gone already.
    pub(crate) fn add_hold(&self, depth: u32) -> bool {
        let mut depths = lock(&self.depths);
        if *depths == 0 {
            return false;
        }
        *depths |= 1u64.checked_shl(depth.saturating_sub(1)).unwrap_or(0);
        true
    }

    /// Removes the hold of `depth` and says what that means.
    pub(crate) fn remove_hold(&self, depth: u32) -> HoldRelease {
        let mut depths = lock(&self.depths);
        let bit = 1u64.checked_shl(depth.saturating_sub(1)).unwrap_or(0);
        let innermost = u64::BITS - depths.leading_zeros() == depth;
        *depths &= !bit;
        if *depths == 0 {
            HoldRelease::Last
        } else if innermost {
            HoldRelease::Nested
        } else {
            HoldRelease::OutOfOrder
        }
    }

    /// Marks the lease released (after the last hold's release got its answer).
    pub(crate) fn mark_released(&self) {
        self.mark_released_by(LostReason::Released);
    }

    /// Marks the lease released for `reason` (the holder's release, or the client's shutdown).
    pub(crate) fn mark_released_by(&self, reason: LostReason) {
        self.released.store(true, Ordering::Release);
        self.fire_lost(reason);
    }
}

impl fmt::Debug for LeaseCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseCore")
            .field("name", &self.keys.name())
            .field("token", &self.token)
            .field("fence", &self.fence)
            .field("renewal", &self.renewal)
            .field("lost", &self.lost.get())
            .finish_non_exhaustive()
    }
}

/// A cheap handle on a held lease, for the code running under the lock: its fencing token,
/// how long it is safe, and a way to learn that it was lost.
///
/// Get one from [`crate::MutexGuard::lease`], or as the argument of
/// [`crate::Mutex::with_lock`]'s closure.
///
/// ```no_run
/// # async fn demo(lock: dlock_core::Mutex) -> Result<(), dlock_core::Error> {
/// let guard = lock.acquire().await?;
/// let lease = guard.lease();
/// tokio::select! {
///     lost = lease.lost() => eprintln!("stopping: {lost}"),
///     () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lease {
    pub(crate) core: Arc<LeaseCore>,
}

impl Lease {
    /// The lock name.
    pub fn name(&self) -> &str {
        self.core.keys.name()
    }

    /// The fencing token of the acquisition (the same for every reentrant hold of it).
    pub fn fencing_token(&self) -> FencingToken {
        self.core.fence
    }

    /// The last instant at which the holder may act as the owner (monotonic clock).
    pub fn safe_until(&self) -> Instant {
        self.core.safe_until()
    }

    /// How much of the lease is left; zero once it ran out.
    pub fn remaining(&self) -> Duration {
        self.core
            .safe_until()
            .saturating_duration_since(Instant::now())
    }

    /// Whether the lease is still standing.
    pub fn is_held(&self) -> bool {
        self.core.is_live() && Instant::now() < self.core.safe_until()
    }

    /// Resolves when the lease is lost: an extension found the lock gone or taken, renewal
    /// stopped (`max_hold`), Redis could not be reached in time, or the lock was released. It
    /// resolves no later than [`Lease::safe_until`] (plus timer granularity).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes; poll it again or call it anew at any time.
    pub async fn lost(&self) -> LeaseLost {
        self.core.lost().await
    }

    /// A [`CancellationToken`] cancelled when the lease is lost (see [`Lease::lost`]); hand it
    /// to the work you want stopped.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.core.cancellation_token()
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { core } = self;
        f.debug_struct("Lease")
            .field("name", &core.keys.name())
            .field("fence", &core.fence)
            .field("remaining", &self.remaining())
            .field("lost", &core.lost_reason())
            .finish()
    }
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
