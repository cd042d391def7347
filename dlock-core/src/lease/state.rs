//! The standing of one lease, as the state machine of `lease/mod.rs` draws it: when a renewal
//! makes it suspect, when it was asked to let go, and how its loss is decided and made known
//! (no later than its safe-until instant).

use super::acquisition::{LeaseCore, RenewalState};
use super::loss::{LeaseLost, LeaseState, LostReason};
use crate::metrics;
use crate::options::Renewal;
use crate::runtime::{lock, spawn_detached};
use crate::timing::safe_until;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

impl LeaseCore {
    /// When the lease becomes suspect unless a renewal is acknowledged first: one renewal
    /// interval after the oldest unacknowledged one was sent. `None` when no renewal is
    /// awaited, or the lease is suspect already.
    pub(crate) fn suspect_at(&self) -> Option<Instant> {
        let interval = self.renewal_interval()?;
        let times = lock(&self.times);
        if times.suspect {
            return None;
        }
        times.unacked_since.map(|sent| sent + interval)
    }

    /// Makes the lease suspect if a renewal has gone unacknowledged for one renewal interval by
    /// `now` while `safe_until` is ahead (past it, the lease is lost instead). Returns whether
    /// it became suspect now (the caller reports suspicions in one line).
    pub(crate) fn check_suspect(&self, now: Instant) -> bool {
        let Some(interval) = self.renewal_interval() else {
            return false;
        };
        if self.is_settled() {
            return false;
        }
        {
            let mut times = lock(&self.times);
            let overdue = times
                .unacked_since
                .is_some_and(|sent| now >= sent + interval);
            if times.suspect || !overdue || now >= times.safe_until {
                return false;
            }
            times.suspect = true;
        }
        self.suspicion_changed(metrics::Suspicion::Suspect);
        true
    }

    /// Records that the holder was asked to give the lock back (an extension answered so);
    /// the first time, wakes [`Lease::release_requested`](crate::Lease::release_requested) and logs it.
    pub(crate) fn mark_asked(&self) {
        if self.asked.swap(true, Ordering::AcqRel) || self.is_settled() {
            return;
        }
        metrics::release_requested(self.keys.kind().metric_name(), self.metric_label());
        tracing::info!(lock = %self.keys.name(), "dlock: the holder was asked to release the lock");
        self.loss.wake();
    }

    /// Whether the holder was asked to give the lock back.
    pub(crate) fn is_asked(&self) -> bool {
        self.asked.load(Ordering::Acquire)
    }

    /// Resolves once the holder was asked to give the lock back; never, if nobody asks.
    pub(crate) async fn asked(&self) {
        loop {
            let notified = self.loss.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_asked() {
                return;
            }
            notified.await;
        }
    }

    /// Counts a suspicion's start or end and tells the state's receivers (after the change).
    pub(super) fn suspicion_changed(&self, which: metrics::Suspicion) {
        metrics::suspicion(self.keys.kind().metric_name(), self.metric_label(), which);
        self.publish_state();
    }

    /// Where the lease stands now.
    pub(crate) fn state(&self) -> LeaseState {
        if let Some(reason) = self.lost_reason() {
            return LeaseState::Lost(reason);
        }
        if lock(&self.times).suspect {
            LeaseState::Suspect
        } else {
            LeaseState::Held
        }
    }

    /// Tells the [`Lease::states`](crate::Lease::states) receivers (if any) the state as it is now. Every change
    /// calls this after it is made, so the last value sent is always the current one.
    pub(super) fn publish_state(&self) {
        if let Some(tx) = self.states.get() {
            let now = self.state();
            tx.send_if_modified(|state| std::mem::replace(state, now) != now);
        }
    }

    /// A receiver of the lease's state changes (the channel is made on the first call).
    pub(crate) fn states(&self) -> watch::Receiver<LeaseState> {
        let tx = self.states.get_or_init(|| watch::channel(self.state()).0);
        let rx = tx.subscribe();
        // A change between making the channel and subscribing was published to nobody (or
        // before the channel existed): send the current state.
        self.publish_state();
        rx
    }

    /// Resolves when the lease is no longer plainly held: suspect, or lost (whichever comes
    /// first), with that state.
    pub(crate) async fn trouble(&self) -> LeaseState {
        let mut rx = self.states();
        let suspect = async {
            // Copied out at once: the borrow it comes in must not live across an await (the
            // future stays `Send`).
            let seen = rx
                .wait_for(|state| *state != LeaseState::Held)
                .await
                .map(|s| *s);
            match seen {
                Ok(state) => state,
                // The sender lives as long as the lease, which `self` keeps alive.
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            state = suspect => state,
            lost = self.lost() => LeaseState::Lost(lost.reason()),
        }
    }

    /// Records that the watchdog's renewal failed (it retries).
    pub(crate) fn renewal_failed(&self) {
        lock(&self.times).renewal = RenewalState::Failed;
    }

    /// Records a successful explicit extension: the watchdog renews to this lease from now on.
    /// An acknowledged extension ends a suspicion like a renewal does.
    pub(crate) fn extended(&self, sent: Instant, ttl: Duration) {
        let recovered = {
            let mut times = lock(&self.times);
            times.ttl = ttl;
            times.full_ttl = ttl;
            times.safe_until = safe_until(sent, ttl, ttl);
            if times.unacked_since.is_some_and(|unacked| unacked <= sent) {
                times.unacked_since = None;
            }
            times.suspect && times.unacked_since.is_none() && {
                times.suspect = false;
                true
            }
        };
        if recovered {
            tracing::info!(lock = %self.keys.name(), "dlock: lease no longer suspect: an extension was acknowledged");
            self.suspicion_changed(metrics::Suspicion::Recovered);
        }
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
        self.loss.decided().is_some() || self.released.load(Ordering::Acquire)
    }

    /// Why the lease was lost, once that is known (its cancellation token is then cancelled).
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.loss.reason()
    }

    /// Declares the lease lost for the reason its deadline passing means, unless a loss was
    /// declared already; the reason that stands either way.
    pub(crate) fn fire_deadline(&self) -> LostReason {
        self.fire_lost(self.deadline_reason());
        self.loss.decided().unwrap_or(LostReason::Expired)
    }

    /// Declares the lease lost (first call wins): wakes `lost()` futures, cancels the token,
    /// warns. Returns whether this call was the first.
    pub(crate) fn fire_lost(&self, reason: LostReason) -> bool {
        let first = self.fire_lost_quietly(reason);
        if first && !matches!(reason, LostReason::Released | LostReason::Shutdown) {
            tracing::warn!(lock = %self.keys.name(), fence = ?self.issued_fence(), %reason, "dlock: lease lost");
        }
        first
    }

    /// [`LeaseCore::fire_lost`] without the warning, for a caller that reports many losses in
    /// one line (the watchdog during an outage).
    ///
    /// The order (decided, token cancelled, published, `lost()` woken) is
    /// [`LossSignal::fire`](super::loss::LossSignal::fire)'s: whoever learns of the loss finds the token cancelled. The
    /// [`Lease::states`](crate::Lease::states) receivers hear of it last.
    pub(crate) fn fire_lost_quietly(&self, reason: LostReason) -> bool {
        if !self.loss.fire(reason) {
            return false;
        }
        metrics::settled(
            self.keys.kind().metric_name(),
            self.metric_label(),
            metrics::since(self.acquired_at),
            reason.metric_name(),
        );
        self.publish_state();
        true
    }

    /// The reason to report once `safe_until` has passed without news. For a watchdog lease:
    /// `Unreachable` when its renewal failed or is still awaited; `Paused` when none was
    /// awaited (the one due a third of a lease before never went out) or the one awaited
    /// should have been answered or failed long ago — in both cases the process did not run.
    pub(crate) fn deadline_reason(&self) -> LostReason {
        match self.renewal {
            Renewal::Fixed => LostReason::Expired,
            Renewal::Watchdog { .. } if self.renewal_stopped.load(Ordering::Acquire) => {
                LostReason::MaxHold
            }
            Renewal::Watchdog { .. } => match lock(&self.times).renewal {
                RenewalState::Answered => LostReason::Paused,
                RenewalState::InFlight { settled_by } if Instant::now() > settled_by => {
                    LostReason::Paused
                }
                RenewalState::InFlight { .. } | RenewalState::Failed => LostReason::Unreachable,
            },
        }
    }

    /// Resolves once the lease is lost, no later than its safe-until instant.
    pub(crate) async fn lost(&self) -> LeaseLost {
        loop {
            let notified = self.loss.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(reason) = self.lost_reason() {
                return LeaseLost::new(reason);
            }
            let deadline = self.safe_until();
            if Instant::now() >= deadline {
                if !self.fire_lost(self.deadline_reason()) {
                    // Decided by another caller, which is publishing it: its wake-up comes.
                    notified.await;
                }
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
        let (token, created) = self.loss.token();
        if created && !token.is_cancelled() && self.renewal == Renewal::Fixed {
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
}
