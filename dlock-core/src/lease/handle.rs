//! [`Lease`]: the holder's handle on a lease — its fence, how long it is safe, its loss — and
//! [`watch_group`], the loss of several leases held together.

use super::acquisition::LeaseCore;
use super::loss::{LeaseLost, LeaseState, LossSignal};
use crate::error::Result;
use crate::token::FencingToken;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

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

    /// The fencing token of the acquisition (the same for every nested hold of it), issued on
    /// demand: the first call costs one round trip unless it came with the lock (a hand-off, or
    /// [`crate::MutexOptions::fenced`]); later calls return it at once. Pass it to the storage
    /// you write to, which rejects a token smaller than the largest it has seen.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`](crate::ErrorKind::LeaseLost) when the lease is lost before a token was issued to it (a stale
    /// holder never gets one newer than its successor's); [`ErrorKind::Connection`](crate::ErrorKind::Connection) or
    /// [`ErrorKind::Timeout`](crate::ErrorKind::Timeout) when Redis does not answer in time.
    ///
    /// # Cancel safety
    /// Cancel safe: issuing is idempotent for the hold (a retry returns the same token).
    pub async fn fencing_token(&self) -> Result<FencingToken> {
        self.core.fence().await
    }

    /// The fencing token, if one was issued to this acquisition already (no round trip).
    pub fn issued_fencing_token(&self) -> Option<FencingToken> {
        self.core.issued_fence()
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
    /// resolves no later than [`Lease::safe_until`] (plus timer granularity). When it
    /// resolves, the [`Lease::cancellation_token`] is cancelled and [`Lease::state`] says
    /// lost already: every sign of the loss agrees, whoever looks first.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes; poll it again or call it anew at any time.
    pub async fn lost(&self) -> LeaseLost {
        self.core.lost().await
    }

    /// A [`CancellationToken`] cancelled when the lease is lost (see [`Lease::lost`]), before
    /// `lost()` resolves or [`Lease::state`] says so; hand it to the work you want stopped.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.core.cancellation_token()
    }

    /// Resolves when the lease is in danger: [`LeaseState::Suspect`] once a watchdog renewal
    /// has gone unacknowledged for one renewal interval while the lease still stands, or
    /// [`LeaseState::Lost`] if the lease is lost without being suspect first (a renewal that
    /// found the lock taken, a release). Resolves at once if the lease is suspect or lost now.
    ///
    /// Suspect is a warning, not a loss: the holder still owns the lock until
    /// [`Lease::safe_until`]. Use it to stop starting new work, flush what can be flushed, or
    /// log; then watch [`Lease::states`] for the recovery, or [`Lease::lost`] for the loss.
    /// With the default lease (30 s, renewed every 10 s) a renewal that hangs makes the lease
    /// suspect 10 s after it was sent, about 20 s before it could be lost. Fixed leases (no
    /// watchdog) are never suspect.
    ///
    /// ```no_run
    /// # async fn demo(lock: dlock_core::Mutex) -> Result<(), dlock_core::Error> {
    /// let guard = lock.acquire().await?;
    /// let lease = guard.lease();
    /// tokio::select! {
    ///     state = lease.suspect() => eprintln!("pausing new work: {state}"),
    ///     () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn suspect(&self) -> LeaseState {
        self.core.trouble().await
    }

    /// Resolves once someone asked the holder to give the lock back
    /// ([`crate::Client::request_release`], `dlock unlock --ask`); never, if nobody asks. The
    /// holder decides: finish the current step and release, or ignore it and keep the lock
    /// (nothing is taken away). A watchdog holder learns of a request with its next renewal,
    /// within one renewal interval; a fixed-lease holder only when it calls `extend`.
    ///
    /// ```no_run
    /// # async fn demo(lock: dlock_core::Mutex) -> Result<(), dlock_core::Error> {
    /// let guard = lock.acquire().await?;
    /// let lease = guard.lease();
    /// loop {
    ///     tokio::select! {
    ///         () = lease.release_requested() => break, // someone needs it: stop at a step
    ///         lost = lease.lost() => {
    ///             eprintln!("stopping: {lost}");
    ///             return Ok(());
    ///         }
    ///         () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {} // a step
    ///     }
    /// }
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn release_requested(&self) {
        self.core.asked().await;
    }

    /// Whether someone asked the holder to give the lock back (see
    /// [`Lease::release_requested`]).
    pub fn is_release_requested(&self) -> bool {
        self.core.is_asked()
    }

    /// Where the lease stands now: held, suspect, or lost (and why).
    pub fn state(&self) -> LeaseState {
        self.core.state()
    }

    /// A [`tokio::sync::watch`] receiver of the lease's state: it sees each change
    /// (`Held` → `Suspect` → `Held` on a recovery, then `Lost(reason)` once, for good). Like
    /// any watch receiver it keeps the latest value: changes closer together than the receiver
    /// looks are seen as the last of them.
    ///
    /// ```no_run
    /// # async fn demo(lock: dlock_core::Mutex) -> Result<(), dlock_core::Error> {
    /// use dlock_core::LeaseState;
    /// let guard = lock.acquire().await?;
    /// let mut states = guard.lease().states();
    /// tokio::spawn(async move {
    ///     while states.changed().await.is_ok() {
    ///         let state = *states.borrow_and_update();
    ///         eprintln!("lease: {state}");
    ///         if let LeaseState::Lost(_) = state {
    ///             break;
    ///         }
    ///     }
    /// });
    /// # Ok(()) }
    /// ```
    pub fn states(&self) -> watch::Receiver<LeaseState> {
        self.core.states()
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { core } = self;
        f.debug_struct("Lease")
            .field("name", &core.keys.name())
            .field("fence", &core.issued_fence())
            .field("remaining", &self.remaining())
            .field("lost", &core.lost_reason())
            .finish()
    }
}

/// Watches the `leases` of a group for its loss: the group is lost once more than `tolerated`
/// of them are, with the reason of the lease whose loss made it so. Fires `signal` then
/// (unless another observer did) and resolves once the loss is made known, with the reason
/// that stands. Resolves at once if it was made known before.
///
/// # Cancel safety
/// Cancel safe: it only observes, and a loss it fired stays fired.
pub(crate) async fn watch_group(
    signal: &LossSignal,
    leases: &[Lease],
    tolerated: usize,
) -> LeaseLost {
    let mut pending: FuturesUnordered<_> = leases.iter().map(Lease::lost).collect();
    let mut lost = 0usize;
    loop {
        let notified = signal.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(reason) = signal.reason() {
            return LeaseLost::new(reason);
        }
        tokio::select! {
            () = &mut notified => {}
            Some(one) = pending.next() => {
                lost += 1;
                if lost > tolerated {
                    return LeaseLost::new(signal.settle(one.reason()).await);
                }
            }
        }
    }
}
