//! The one place a loss is made known ([`LossSignal`]), for a lease and for the guards made of
//! several leases (a `MultiGuard`, a `QuorumGuard`: `lease::watch_group`), and why a lease is
//! lost ([`LostReason`]). It imports nothing of `lease/mod.rs`, which builds on it.
//!
//! Every kind shows a loss three ways: `lost()` resolves, the cancellation token is cancelled,
//! and the state (`Lease::state`, `QuorumGuard::is_lost`) says lost. Code that learns of the
//! loss one way must find the others already true, so [`LossSignal::fire`] keeps one order:
//! the reason is decided (the first call wins, so every observer reports the same one), then
//! the token is cancelled, then the loss is published (the state and `lost()` see it), then
//! the waiters are woken. A group's loss is decided by whoever sees it first — its own
//! `lost()`, or the task behind its token — through the same `fire`, so no observer waits for
//! another task to run.

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering, fence};

use crate::error::{Error, ErrorKind};
use tokio::sync::Notify;
use tokio::sync::futures::Notified;
use tokio_util::sync::CancellationToken;

/// A loss, once decided, and how it is made known (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct LossSignal {
    /// Why, once decided (the first [`LossSignal::fire`] wins) …
    decided: OnceLock<LostReason>,
    /// … and made known: set after the token is cancelled.
    published: AtomicBool,
    /// Wakes the waiters of [`LossSignal::published`] (and, for a lease, of a release request:
    /// [`LossSignal::wake`]).
    notify: Notify,
    /// Made on the first ask (most leases are never watched, and a token is an allocation).
    token: OnceLock<CancellationToken>,
}

impl LossSignal {
    /// Decides the loss for `reason` unless it was decided already, and makes it known in the
    /// one order: decided, token cancelled, published, waiters woken. `true` if this call
    /// decided it.
    pub(crate) fn fire(&self, reason: LostReason) -> bool {
        if self.decided.set(reason).is_err() {
            return false;
        }
        // Pairs with the fence in `token`: a token made while the loss is decided is
        // cancelled here or there, never by neither (each side writes, then reads the other's).
        fence(Ordering::SeqCst);
        if let Some(token) = self.token.get() {
            token.cancel();
        }
        self.published.store(true, Ordering::Release);
        self.notify.notify_waiters();
        true
    }

    /// The reason decided, published or not yet (a lease that has one is settled).
    pub(crate) fn decided(&self) -> Option<LostReason> {
        self.decided.get().copied()
    }

    /// The reason, once the loss is made known (its token is cancelled by then).
    pub(crate) fn reason(&self) -> Option<LostReason> {
        if self.published.load(Ordering::Acquire) {
            self.decided()
        } else {
            None
        }
    }

    /// The cancellation token, and whether this call made it. One made after the loss was
    /// decided is cancelled before it is returned.
    pub(crate) fn token(&self) -> (CancellationToken, bool) {
        let mut made = false;
        let token = self
            .token
            .get_or_init(|| {
                made = true;
                CancellationToken::new()
            })
            .clone();
        fence(Ordering::SeqCst);
        if self.decided.get().is_some() {
            token.cancel();
        }
        (token, made)
    }

    /// A wake-up by the next [`LossSignal::fire`] or [`LossSignal::wake`]; enable it before
    /// looking at the state it waits for.
    pub(crate) fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }

    /// Wakes every waiter without a loss (a lease's release request).
    pub(crate) fn wake(&self) {
        self.notify.notify_waiters();
    }

    /// Resolves once the loss is made known, with its reason.
    pub(crate) async fn published(&self) -> LostReason {
        loop {
            let notified = self.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(reason) = self.reason() {
                return reason;
            }
            notified.await;
        }
    }

    /// Fires for `reason` (unless decided already) and resolves once the loss is made known,
    /// with the reason that stands: a loss decided by another caller is published by it.
    pub(crate) async fn settle(&self, reason: LostReason) -> LostReason {
        if self.fire(reason) {
            return reason;
        }
        self.published().await
    }
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
    /// The lease ran out while this process did not run: the watchdog's renewal was due well
    /// before the lease's end, Redis answered the renewals it was sent, but the next one never
    /// went out in time — the process was paused (SIGSTOP, a VM or container freeze, a stop in
    /// a debugger) or its runtime starved (a task or thread blocking the worker threads).
    /// Redis was fine: look at the process, not at the network.
    Paused,
    /// Renewal stopped because the lock was held for its `max_hold`.
    MaxHold,
    /// The lock was released by its holder.
    Released,
    /// The client was shut down ([`crate::Client::shutdown`]), which released the lock.
    Shutdown,
}

impl LostReason {
    /// The `reason` label of `dlock.lease.lost` (`metrics.rs`); `None` for the ends that are not
    /// losses (a release, a shutdown).
    pub(crate) fn metric_name(self) -> Option<&'static str> {
        Some(match self {
            Self::Expired => "expired",
            Self::TakenOver => "taken_over",
            Self::Removed => "removed",
            Self::Unreachable => "unreachable",
            Self::Paused => "paused",
            Self::MaxHold => "max_hold",
            Self::Released | Self::Shutdown => return None,
        })
    }
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Expired => "the lease expired",
            Self::TakenOver => "another owner holds the lock",
            Self::Removed => "the lock was removed by someone else",
            Self::Unreachable => "Redis could not be reached to renew the lease",
            Self::Paused => {
                "the process did not run (paused, or its runtime blocked) until the lease ran out; \
                 Redis answered every renewal it was sent"
            }
            Self::MaxHold => "the lock was held for its max_hold",
            Self::Released => "the lock was released",
            Self::Shutdown => "the client was shut down",
        })
    }
}

/// The news that a lease was lost; resolves [`Lease::lost`](crate::Lease::lost).
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

/// Where a lease stands: [`Lease::state`](crate::Lease::state), [`Lease::states`](crate::Lease::states).
///
/// `Held` and `Suspect` both mean the lease still stands (the holder is the owner until
/// [`Lease::safe_until`](crate::Lease::safe_until)); `Lost` is final.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseState {
    /// Held, and its last renewal (if any was sent) was acknowledged in time.
    Held,
    /// Still held, but in danger: a watchdog renewal sent one renewal interval ago has not been
    /// acknowledged (Redis slow, paused, or cut off), while [`Lease::safe_until`](crate::Lease::safe_until) is ahead.
    /// The next acknowledged renewal makes the lease `Held` again; if none comes before
    /// `safe_until`, it becomes `Lost`. Only watchdog leases become suspect: a fixed lease sends
    /// no renewals.
    Suspect,
    /// Lost, or ended by a release or a shutdown ([`LostReason::Released`],
    /// [`LostReason::Shutdown`]): final.
    Lost(LostReason),
}

impl LeaseState {
    /// Whether the lease still stands (`Held` or `Suspect`).
    pub fn is_held(self) -> bool {
        !matches!(self, Self::Lost(_))
    }
}

impl fmt::Display for LeaseState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Held => f.write_str("held"),
            Self::Suspect => f.write_str("suspect: a renewal is not acknowledged yet"),
            Self::Lost(reason) => write!(f, "lost: {reason}"),
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_cancelled_before_the_loss_is_published() {
        let signal = LossSignal::default();
        let (token, made) = signal.token();
        assert!(made);
        assert!(!token.is_cancelled() && signal.reason().is_none());
        assert!(signal.fire(LostReason::Removed));
        assert!(token.is_cancelled());
        assert_eq!(signal.reason(), Some(LostReason::Removed));
        // The first reason stands; a token asked for afterwards is cancelled already.
        assert!(!signal.fire(LostReason::Expired));
        assert_eq!(signal.decided(), Some(LostReason::Removed));
        let (again, made) = signal.token();
        assert!(!made && again.is_cancelled());
        let late = LossSignal::default();
        late.fire(LostReason::TakenOver);
        assert!(late.token().0.is_cancelled());
    }
}
