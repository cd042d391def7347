//! [`MutexGuard`]: one hold on a lease, and what releasing or extending it found.
//!
//! A lease (one acquisition in Redis, `lease/mod.rs`) carries one hold per guard: the first from the
//! acquire that took it, more from acquisitions nested inside the body that holds it (`holds/hold.rs`).
//! The lock is released in Redis with the last hold; holds are released innermost first.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::error::{Error, ErrorKind, Result};
use crate::holds::guarded::GuardedWrite;
use crate::holds::hold;
use crate::holds::hold::Hold;
use crate::lease::{HoldRelease, Lease, LeaseCore, LeaseLost};
use crate::options::{OnLost, Renewal};
use crate::scripts::{ExtendStatus, ReleaseReply};
use crate::timing::{validate_ttl, validate_watchdog_ttl};
use crate::token::FencingToken;

/// What [`MutexGuard::release`] found on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseOutcome {
    /// We still owned the lock and released it (handing it to the next waiter, if any).
    Released,
    /// An inner reentrant guard was released; the outer guards still hold the lock.
    Nested,
    /// The lease had expired and nobody holds the lock: nothing was changed.
    Expired,
    /// The lease had expired and another owner holds the lock now: it was left untouched.
    /// Whatever the guard protected may have overlapped with that owner.
    TakenOver,
}

impl ReleaseOutcome {
    /// Whether we still owned the lock when releasing it.
    pub fn was_held(self) -> bool {
        matches!(self, Self::Released | Self::Nested)
    }
}

/// What [`MutexGuard::extend`] found on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExtendOutcome {
    /// We still owned the lock; it now has the new lease.
    Extended,
    /// The lease had expired or the lock was deleted, and nobody holds it: nothing was
    /// re-created.
    Expired,
    /// Another owner holds the lock now: it was left untouched.
    TakenOver,
}

/// One hold on a [`crate::Mutex`].
///
/// Release it with [`MutexGuard::release`], which reports whether we still owned the lock.
/// Dropping the guard instead releases it in the background, best effort: it never blocks and
/// never panics, also outside a runtime, where the lease simply expires.
///
/// ```no_run
/// # async fn demo(lock: dlock_core::Mutex) -> Result<(), dlock_core::Error> {
/// let guard = lock.acquire().await?;
/// assert!(guard.remaining() > std::time::Duration::ZERO);
/// if !guard.release().await?.was_held() {
///     eprintln!("the lease ran out before we finished: the work may have overlapped");
/// }
/// # Ok(()) }
/// ```
pub struct MutexGuard {
    hold: Hold,
    /// Set once this hold's bookkeeping is done: Drop has nothing left to do.
    done: bool,
}

impl MutexGuard {
    pub(crate) fn new(hold: Hold) -> Self {
        Self { hold, done: false }
    }

    /// The hold, for the scope of a body run under this guard (`with_lock`).
    pub(crate) fn hold(&self) -> &Hold {
        &self.hold
    }

    /// The lease of the hold, read by every accessor.
    fn lease_core(&self) -> &Arc<LeaseCore> {
        self.hold.lease()
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        self.lease_core().keys.name()
    }

    /// The fencing token of this acquisition: larger than that of every earlier acquisition of
    /// the same name. Issued on demand — one round trip the first time, unless it came with the
    /// lock (a hand-off to a waiter, or [`crate::MutexOptions::fenced`]) — and the same for every
    /// nested guard of the acquisition.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`] when the lease is lost before a token was issued to it;
    /// [`ErrorKind::Connection`] or [`ErrorKind::Timeout`] when Redis does not answer in time.
    ///
    /// # Cancel safety
    /// Cancel safe: issuing is idempotent for the hold (a retry returns the same token).
    pub async fn fencing_token(&self) -> Result<FencingToken> {
        self.lease_core().fence().await
    }

    /// The fencing token, if one was issued to this acquisition already (no round trip).
    pub fn issued_fencing_token(&self) -> Option<FencingToken> {
        self.lease_core().issued_fence()
    }

    /// The lease length set by the last acquire, extend or renewal.
    pub fn ttl(&self) -> Duration {
        self.lease_core().ttl()
    }

    /// How deep this guard is nested: 1 for the acquisition, 2 and more for acquisitions
    /// nested inside the body that holds the lock (see [`crate::MutexOptions::reentrant`]).
    pub fn depth(&self) -> u32 {
        self.hold.depth()
    }

    /// The last instant at which this guard may act as the owner (monotonic clock): the lease
    /// counted from when the request that set it was sent, less a clock-drift allowance.
    pub fn safe_until(&self) -> Instant {
        self.lease_core().safe_until()
    }

    /// How much of the lease is left, by [`MutexGuard::safe_until`]; zero once it has run out.
    pub fn remaining(&self) -> Duration {
        self.safe_until().saturating_duration_since(Instant::now())
    }

    /// A handle on the lease for the code running under the lock.
    pub fn lease(&self) -> Lease {
        Lease {
            core: self.lease_core().clone(),
        }
    }

    /// A batch of Redis writes applied only while this hold is still ours, checked in the same
    /// atomic step; see [`GuardedWrite`].
    pub fn guarded(&self) -> GuardedWrite {
        GuardedWrite::new(self.lease_core().clone())
    }

    /// Resolves when the lease is lost; see [`Lease::lost`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) -> LeaseLost {
        self.lease_core().lost().await
    }

    /// A token cancelled when the lease is lost; see [`Lease::cancellation_token`].
    pub fn cancellation_token(&self) -> CancellationToken {
        self.lease_core().cancellation_token()
    }

    /// Gives the lock a new lease of `ttl`, counted from now, if we still own it. On a
    /// watchdog lock the watchdog renews to this lease from then on.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a TTL out of range — on a watchdog lock, one shorter than
    /// [`crate::MIN_WATCHDOG_TTL`] or than twice the renewal interval (a failed renewal could
    /// not be retried in time); [`ErrorKind::Connection`] or [`ErrorKind::Timeout`] when Redis
    /// does not answer in time (the lease is unchanged or extended;
    /// [`MutexGuard::remaining`] keeps the old, conservative value).
    ///
    /// # Cancel safety
    /// Cancel safe: extending is idempotent, and the guard's view of the lease only changes
    /// once the answer has arrived.
    pub async fn extend(&mut self, ttl: Duration) -> Result<ExtendOutcome> {
        let ttl = match self.lease_core().renewal {
            Renewal::Fixed => validate_ttl(ttl)?,
            Renewal::Watchdog { interval, .. } => watchdog_extension(ttl, interval)?,
        };
        let outcome = match self.lease_core().extend(ttl).await? {
            ExtendStatus::Extended | ExtendStatus::Asked => ExtendOutcome::Extended,
            ExtendStatus::Gone => ExtendOutcome::Expired,
            ExtendStatus::Other => ExtendOutcome::TakenOver,
        };
        tracing::debug!(lock = %self.name(), ?outcome, ttl_ms = ttl.as_millis(), "dlock: extend");
        Ok(outcome)
    }

    /// Releases this hold; with the last hold, releases the lock if we still own it and says
    /// what was found.
    ///
    /// # Errors
    /// [`ErrorKind::Reentrancy`] when an outer reentrant guard is released while an inner one is
    /// alive (nothing is released then: the inner guards keep the lock, and it is released with
    /// the last of them); [`ErrorKind::Connection`] or [`ErrorKind::Timeout`] when Redis does not
    /// answer in time (the release is then retried once in the background, and the lease
    /// expires otherwise).
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before the answer arrived, the release is retried
    /// in the background; release is owner-checked, so running twice is harmless.
    pub async fn release(mut self) -> Result<ReleaseOutcome> {
        self.done = true;
        match self.lease_core().remove_hold(self.hold.depth()) {
            HoldRelease::Nested => return Ok(ReleaseOutcome::Nested),
            HoldRelease::OutOfOrder => return Err(out_of_order(&self)),
            HoldRelease::Last => {}
        }
        let outcome = match self.lease_core().release().await? {
            ReleaseReply::Released | ReleaseReply::HandedOff { .. } => ReleaseOutcome::Released,
            ReleaseReply::Expired => ReleaseOutcome::Expired,
            ReleaseReply::TakenOver => ReleaseOutcome::TakenOver,
        };
        tracing::debug!(lock = %self.name(), ?outcome, "dlock: release");
        Ok(outcome)
    }
}

/// Runs `work` as the body of `guard`'s hold (acquisitions of the same lock nested in it
/// re-enter, `holds/hold.rs`), then releases the hold: the one `with_lock` of every lock kind. With
/// [`OnLost::Cancel`] the body is dropped as soon as the lease is lost and the call fails with
/// [`ErrorKind::LeaseLost`]; with [`OnLost::Signal`] it runs to its end. A release that fails
/// or finds the lease gone is logged, and the body's output is still returned.
///
/// # Cancel safety
/// Dropping the future drops `work` and releases the hold in the background.
pub(crate) async fn run_body<F, Fut, T>(guard: MutexGuard, on_lost: OnLost, work: F) -> Result<T>
where
    F: FnOnce(Lease) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let lease = guard.lease();
    let body = hold::run_as_body_of(guard.hold().clone(), work(lease.clone()));
    let output = match on_lost {
        OnLost::Signal => body.await,
        OnLost::Cancel => {
            tokio::pin!(body);
            tokio::select! {
                biased;
                output = &mut body => output,
                lost = lease.lost() => {
                    drop(guard);
                    return Err(lost.into_error(lease.name()));
                }
            }
        }
    };
    match guard.release().await {
        Ok(outcome) if !outcome.was_held() => {
            tracing::warn!(lock = %lease.name(), ?outcome, "dlock: the work finished after its lease was lost");
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(lock = %lease.name(), error = %e, "dlock: release after the work failed; the lease will expire");
        }
    }
    Ok(output)
}

impl MutexGuard {
    /// Ends this hold without a release in Redis: its lock passed to another token in one
    /// script (a read-write lock's downgrade or upgrade). The lease counts as released (its
    /// `lost()` resolves with [`crate::LostReason::Released`]); the caller checked that this is
    /// the acquisition's only hold.
    pub(crate) fn pass_on(mut self) {
        self.done = true;
        self.lease_core().remove_hold(self.hold.depth());
        self.lease_core().mark_released();
    }
}

fn out_of_order(guard: &MutexGuard) -> Error {
    Error::new(
        ErrorKind::Reentrancy,
        format!(
            "lock `{}`: the guard of depth {} was released while an inner nested guard is \
             still held; release the innermost guard first (the lock stays held until the last \
             guard is released)",
            guard.name(),
            guard.depth()
        ),
    )
}

/// Checks a new lease for a watchdog lock renewed every `interval`.
fn watchdog_extension(ttl: Duration, interval: Duration) -> Result<Duration> {
    let ttl = validate_watchdog_ttl(ttl)?;
    if ttl < interval * 2 {
        return Err(Error::invalid(format!(
            "a lease of {ttl:?} is shorter than twice the watchdog's renewal interval \
             ({interval:?}): a failed renewal could not be retried before it runs out; extend \
             to at least {:?}",
            interval * 2
        )));
    }
    Ok(ttl)
}

impl Drop for MutexGuard {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        if self.lease_core().remove_hold(self.hold.depth()) == HoldRelease::Last {
            self.lease_core().release_in_background();
        }
    }
}

impl fmt::Debug for MutexGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self { hold, done } = self;
        let lease = hold.lease();
        f.debug_struct("MutexGuard")
            .field("name", &lease.keys.name())
            .field("token", &lease.token)
            .field("fence", &lease.issued_fence())
            .field("depth", &hold.depth())
            .field("remaining", &self.remaining())
            .field("released", done)
            .finish()
    }
}

/// The lease API of a guard that wraps one hold (a field `guard: MutexGuard`) and carries the
/// fencing token issued with it (a field `fence: FencingToken`): a semaphore's
/// [`crate::Permit`], a read-write lock's [`crate::ReadGuard`] and [`crate::WriteGuard`]. One
/// definition, so the kinds cannot drift apart; `$what` names the hold in the docs.
macro_rules! hold_api {
    ($guard:ident, $what:literal) => {
        impl $guard {
            /// The lock's name.
            pub fn name(&self) -> &str {
                self.guard.name()
            }

            #[doc = concat!(
                "The fencing token of this ", $what, ", issued with it: every later grant of \
                 the lock's name takes a larger one. Pass it to the storage you write to."
            )]
            pub fn fencing_token(&self) -> $crate::FencingToken {
                self.fence
            }

            /// How deep this guard is nested: 1 for an acquisition from Redis, more for one
            /// nested inside the body that holds the lock.
            pub fn depth(&self) -> u32 {
                self.guard.depth()
            }

            #[doc = concat!(
                "Until when the ", $what, " is certainly held (the lease, counted \
                 conservatively from when its request was sent)."
            )]
            pub fn safe_until(&self) -> std::time::Instant {
                self.guard.safe_until()
            }

            #[doc = concat!("How long the ", $what, " is certainly held; zero once it ran out.")]
            pub fn remaining(&self) -> std::time::Duration {
                self.guard.remaining()
            }

            #[doc = concat!("A cheap handle on the lease, for the work under the ", $what, ".")]
            pub fn lease(&self) -> $crate::Lease {
                self.guard.lease()
            }

            /// Completes when the lease is lost (ran out, removed, released, or the client shut
            /// down); see [`crate::Lease::lost`].
            ///
            /// # Cancel safety
            /// Cancel safe: it only observes.
            pub async fn lost(&self) -> $crate::LeaseLost {
                self.guard.lost().await
            }

            /// A token cancelled when the lease is lost.
            pub fn cancellation_token(&self) -> tokio_util::sync::CancellationToken {
                self.guard.cancellation_token()
            }

            #[doc = concat!(
                "A batch of Redis writes applied only while this ", $what, " is still ours \
                 (its record in the lock, by the server's clock), checked in the same atomic \
                 step; see [`crate::GuardedWrite`]."
            )]
            pub fn guarded(&self) -> $crate::GuardedWrite {
                self.guard.guarded()
            }

            #[doc = concat!(
                "Sets a new lease of `ttl` from now, if the ", $what, " is still this holder's \
                 (see [`crate::MutexGuard::extend`])."
            )]
            ///
            /// # Errors
            /// A TTL out of range ([`crate::ErrorKind::InvalidInput`]); connection errors.
            ///
            /// # Cancel safety
            /// Cancel safe: the extension either ran or did not.
            pub async fn extend(
                &mut self,
                ttl: std::time::Duration,
            ) -> $crate::Result<$crate::ExtendOutcome> {
                self.guard.extend(ttl).await
            }

            #[doc = concat!(
                "Gives the ", $what, " back (with the last hold of a nested acquisition), admits \
                 the waiters that now fit, and says what was found."
            )]
            ///
            /// # Errors
            /// As [`crate::MutexGuard::release`].
            ///
            /// # Cancel safety
            /// Dropping the future retries the release in the background.
            pub async fn release(self) -> $crate::Result<$crate::ReleaseOutcome> {
                self.guard.release().await
            }
        }
    };
}
pub(crate) use hold_api;
