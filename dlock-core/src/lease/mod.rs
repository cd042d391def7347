//! Leases: one acquisition in Redis ([`LeaseCore`]), shared by its holds and the watchdog; how
//! its loss reaches the work it protects; releasing and extending it; and the registry of the
//! leases a client holds ([`HeldLocks`]). The arithmetic (TTLs, drift, safe-until) is in
//! `timing.rs`.
//!
//! A lease is *lost* — once, for good — when an extension finds the lock gone or owned by another,
//! when renewal stops (`max_hold`), or when `safe_until` passes without a successful renewal. Loss
//! resolves every [`Lease::lost`] future, cancels the lease's [`CancellationToken`] and logs a
//! `tracing` warning, no later than `safe_until`.
//!
//! Before that, a watchdog lease can be *suspect*: a renewal was sent one renewal interval ago
//! and is still not acknowledged (Redis slow, paused, cut off), while `safe_until` is ahead.
//! The lease still stands; the holder gets the time that is left to prepare. The next
//! acknowledged renewal makes it *held* again (recovered). One state machine ([`LeaseState`]):
//!
//! ```text
//! Held ──renewal unanswered for an interval──▶ Suspect ──renewal acknowledged──▶ Held
//!   │                                            │
//!   └───────────── lost (any reason) ────────────┴──▶ Lost(reason)   (final)
//! ```

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, OnceLock};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use std::collections::HashMap;
use std::sync::Weak;

use crate::error::{Error, ErrorKind, Result};
use crate::key::LockKeys;
use crate::metrics;
use crate::options::Renewal;
use crate::runtime::{lock, spawn_detached};
use crate::scripts::wire::LockValue;
use crate::scripts::{self, Call, ExtendStatus, FenceReply, ReleaseReply, unexpected};
use crate::timing::{self, safe_until};
use crate::token::{ExtendOwner, FencingToken, OwnerToken};
use crate::transport::wait::Registration;
use crate::transport::{ReleaseOnDrop, Transport, release_call};

mod loss;
pub(crate) mod watchdog;

pub(crate) use loss::LossSignal;
pub use loss::LostReason;

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

/// Where a lease stands: [`Lease::state`], [`Lease::states`].
///
/// `Held` and `Suspect` both mean the lease still stands (the holder is the owner until
/// [`Lease::safe_until`]); `Lost` is final.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseState {
    /// Held, and its last renewal (if any was sent) was acknowledged in time.
    Held,
    /// Still held, but in danger: a watchdog renewal sent one renewal interval ago has not been
    /// acknowledged (Redis slow, paused, or cut off), while [`Lease::safe_until`] is ahead.
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

#[derive(Debug)]
struct Times {
    /// The lease the last acquire/extend/renewal set (shorter than `full_ttl` near `max_hold`).
    ttl: Duration,
    /// The lease the watchdog renews to.
    full_ttl: Duration,
    safe_until: Instant,
    /// Where the watchdog's renewals stand, to tell a pause from an outage at the deadline.
    renewal: RenewalState,
    /// When the oldest renewal not yet acknowledged was sent (the first of a run of failed or
    /// awaited ones); `None` once one is acknowledged.
    unacked_since: Option<Instant>,
    /// The lease is suspect (see [`LeaseState::Suspect`]).
    suspect: bool,
}

/// The watchdog's last renewal of a lease (see [`LeaseCore::deadline_reason`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RenewalState {
    /// None sent since the last answer (or since the acquire).
    Answered,
    /// One sent; it is answered or fails (the command timeout) by this instant, if the process
    /// runs.
    InFlight { settled_by: Instant },
    /// The last one failed (Redis unreachable or slow): the watchdog retries.
    Failed,
}

/// One acquisition in Redis, shared by every hold (guard) on it and by the watchdog.
pub(crate) struct LeaseCore {
    pub(crate) transport: Arc<Transport>,
    /// The client's registry of held leases, which this one leaves when it is released.
    held: Arc<HeldLocks>,
    pub(crate) keys: LockKeys,
    pub(crate) token: OwnerToken,
    /// The label written into the lock value (see [`LeaseCore::release`]).
    label: Option<Arc<str>>,
    /// The fencing token of this acquisition, once issued (see [`LeaseCore::fence`]).
    fence: OnceLock<FencingToken>,
    pub(crate) acquired_at: Instant,
    pub(crate) renewal: Renewal,
    times: StdMutex<Times>,
    /// Depths of the live holds (reentrancy, see `holds/hold.rs`), as a bit set: bit `d - 1` for
    /// depth `d`; zero once the last hold is gone.
    depths: AtomicU64,
    /// The turn that acquisitions nested directly in the first hold's body take (`holds/hold.rs`):
    /// the first hold is the lease itself, and this is its one field.
    pub(crate) nested_permits: OnceLock<Arc<Semaphore>>,
    /// The loss, once decided, its cancellation token, and how it is made known (in the one
    /// order of `lease/loss.rs`: whoever learns of the loss finds the token cancelled).
    loss: LossSignal,
    /// The lease's state for [`Lease::states`] receivers, made on the first call (most leases
    /// are never watched, and a channel is an allocation).
    states: OnceLock<watch::Sender<LeaseState>>,
    released: AtomicBool,
    /// The watchdog stopped renewing (`max_hold`): running out is then the expected end.
    renewal_stopped: AtomicBool,
    /// Someone asked the holder to give the lock back (`ask.lua`, learnt from an extension);
    /// [`Lease::release_requested`] waits for it on `loss`'s wake-ups.
    asked: AtomicBool,
    /// Whether the holder excludes every other holder of the lock (a mutex's, a read-write
    /// lock's writer) or shares it (a reader, a semaphore's permits): an acquisition nested in
    /// a shared hold's body may only share it too (`kinds/rwlock.rs`).
    pub(crate) exclusive: bool,
    /// Kept while held so that a late duplicate of our grant is recognised as ours rather than
    /// released as an orphan. Boxed: only leases that waited have one, and every held lease
    /// would otherwise carry its 48 bytes. `None` also says the lease never waited: the lock
    /// then holds the value its uncontended `SET` wrote.
    registration: Option<Box<Registration>>,
}

/// A lease that ends without being released or lost (its release failed, say) still leaves the
/// `dlock.held` gauge.
#[cfg(feature = "metrics")]
impl Drop for LeaseCore {
    fn drop(&mut self) {
        if self.loss.decided().is_none() {
            metrics::settled(
                self.keys.kind().metric_name(),
                self.metric_label(),
                self.acquired_at.elapsed(),
                None,
            );
        }
    }
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
    pub(crate) transport: Arc<Transport>,
    pub(crate) held: Arc<HeldLocks>,
    pub(crate) keys: LockKeys,
    pub(crate) token: OwnerToken,
    /// Its fencing token, when one was issued with it.
    pub(crate) fence: Option<u64>,
    pub(crate) ttl: Duration,
    pub(crate) safe_until: Instant,
    pub(crate) renewal: Renewal,
    pub(crate) registration: Option<Registration>,
    /// The label written into the lock value.
    pub(crate) label: Option<Arc<str>>,
    /// See [`LeaseCore::exclusive`].
    pub(crate) exclusive: bool,
}

impl LeaseCore {
    pub(crate) fn new(new: NewLease) -> Arc<Self> {
        let lease = Arc::new(Self {
            transport: new.transport,
            held: new.held,
            keys: new.keys,
            token: new.token,
            label: new.label,
            fence: new
                .fence
                .map(|f| OnceLock::from(FencingToken::new(f)))
                .unwrap_or_default(),
            acquired_at: Instant::now(),
            renewal: new.renewal,
            times: StdMutex::new(Times {
                ttl: new.ttl,
                full_ttl: new.ttl,
                safe_until: new.safe_until,
                renewal: RenewalState::Answered,
                unacked_since: None,
                suspect: false,
            }),
            renewal_stopped: AtomicBool::new(false),
            asked: AtomicBool::new(false),
            exclusive: new.exclusive,
            depths: AtomicU64::new(1),
            nested_permits: OnceLock::new(),
            loss: LossSignal::default(),
            states: OnceLock::new(),
            released: AtomicBool::new(false),
            registration: new.registration.map(Box::new),
        });
        lease.held.insert(&lease);
        metrics::held(lease.keys.kind().metric_name(), lease.metric_label());
        lease
    }

    /// The `lock` label of this lease's metrics: the holder label, or `""`.
    fn metric_label(&self) -> &str {
        self.label.as_deref().unwrap_or_default()
    }

    pub(crate) fn ttl(&self) -> Duration {
        lock(&self.times).ttl
    }

    /// The fencing token, if one was issued to this acquisition already.
    pub(crate) fn issued_fence(&self) -> Option<FencingToken> {
        self.fence.get().copied()
    }

    /// The fencing token of this acquisition, issued by `fence.lua` the first time it is asked
    /// for (only while the lock is this lease's, so fences stay in holding order).
    pub(crate) async fn fence(&self) -> Result<FencingToken> {
        if let Some(fence) = self.issued_fence() {
            return Ok(fence);
        }
        if let Some(reason) = self.lost_reason() {
            return Err(LeaseLost::new(reason).into_error(self.keys.name()));
        }
        let mut call = Call::new(&scripts::FENCE, 1);
        call.arg(&*self.keys.lock)
            .arg(self.token)
            .arg(self.keys.counter());
        let reply = self
            .transport
            .run(&call, "fencing token", self.keys.name())
            .await?;
        match FenceReply::decode(&reply) {
            Some(FenceReply::Fence(fence)) => {
                Ok(*self.fence.get_or_init(|| FencingToken::new(fence)))
            }
            Some(FenceReply::Gone) => {
                self.fire_lost(LostReason::Expired);
                Err(LeaseLost::new(LostReason::Expired).into_error(self.keys.name()))
            }
            Some(FenceReply::Other) => {
                self.fire_lost(LostReason::TakenOver);
                Err(LeaseLost::new(LostReason::TakenOver).into_error(self.keys.name()))
            }
            None => Err(unexpected("fencing token", &reply)),
        }
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
    /// Returns whether this ended a suspicion (the caller reports recoveries in one line).
    pub(crate) fn renewed(&self, sent: Instant, ttl: Duration) -> bool {
        let recovered = {
            let mut times = lock(&self.times);
            times.ttl = ttl;
            times.safe_until = safe_until(sent, ttl, ttl);
            times.renewal = RenewalState::Answered;
            times.unacked_since = None;
            // A lease declared lost meanwhile (its answer came after its safe-until) stays lost.
            std::mem::replace(&mut times.suspect, false) && !self.is_settled()
        };
        if recovered {
            self.suspicion_changed(metrics::Suspicion::Recovered);
        }
        recovered
    }

    /// Records that the watchdog sends a renewal now. Its answer or its failure comes within
    /// the command timeout (twice that, for a cluster that settles its slots first) while the
    /// process runs.
    pub(crate) fn renewal_sent(&self, sent: Instant) {
        let settled_by = sent + self.transport.command_timeout().saturating_mul(2);
        let mut times = lock(&self.times);
        times.renewal = RenewalState::InFlight { settled_by };
        times.unacked_since.get_or_insert(sent);
    }

    /// The watchdog's renewal interval, for a watchdog lease.
    fn renewal_interval(&self) -> Option<Duration> {
        match self.renewal {
            Renewal::Watchdog { interval, .. } => Some(interval),
            Renewal::Fixed => None,
        }
    }

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
    /// the first time, wakes [`Lease::release_requested`] and logs it.
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
    fn suspicion_changed(&self, which: metrics::Suspicion) {
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

    /// Tells the [`Lease::states`] receivers (if any) the state as it is now. Every change
    /// calls this after it is made, so the last value sent is always the current one.
    fn publish_state(&self) {
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
    /// [`LossSignal::fire`]'s: whoever learns of the loss finds the token cancelled. The
    /// [`Lease::states`] receivers hear of it last.
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
                return LeaseLost { reason };
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

    /// Records a nested hold of `depth` (2 ..= 64; the nested permits of `holds/hold.rs` make it
    /// unique). `false` when the last hold is gone already.
    pub(crate) fn add_hold(&self, depth: u32) -> bool {
        let bit = depth_bit(depth);
        // Never revives a lease whose last hold is gone (zero stays zero).
        self.depths
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |depths| {
                (depths != 0).then_some(depths | bit)
            })
            .is_ok()
    }

    /// Removes the hold of `depth` and says what that means.
    pub(crate) fn remove_hold(&self, depth: u32) -> HoldRelease {
        let before = self.depths.fetch_and(!depth_bit(depth), Ordering::AcqRel);
        let innermost = u64::BITS - before.leading_zeros() == depth;
        if before & !depth_bit(depth) == 0 {
            HoldRelease::Last
        } else if innermost {
            HoldRelease::Nested
        } else {
            HoldRelease::OutOfOrder
        }
    }

    /// Marks the lease released: the holder gives it up (its last hold is gone).
    pub(crate) fn mark_released(&self) {
        self.mark_released_by(LostReason::Released);
    }

    /// Marks the lease released for `reason` (the holder's release, or the client's shutdown).
    pub(crate) fn mark_released_by(&self, reason: LostReason) {
        self.released.store(true, Ordering::Release);
        self.fire_lost(reason);
        self.held.remove(self);
    }

    /// This lease's owner as `extend.lua` takes it.
    pub(crate) fn extend_owner(&self) -> ExtendOwner {
        ExtendOwner {
            token: self.token,
            kind: self.keys.kind(),
        }
    }

    /// Gives the lock back in Redis (its last hold is gone), owner-checked, and says what was
    /// found. The lease counts as released from the start: its holder has given it up. If the
    /// answer does not arrive, the release is retried once in the background.
    pub(crate) async fn release(&self) -> Result<ReleaseReply> {
        self.mark_released();
        // A lease that never waited names its owner by the whole value its `SET` wrote, which
        // `release.lua` matches with one comparison (a value changed since — a fence on demand,
        // a waiter's flag — is still matched by its token). A waiting acquire's value was
        // written by a script, with its flag and fence: the token names it.
        let call = if self.registration.is_none() && !self.keys.kind().is_shared() {
            let value = LockValue {
                token: &self.token,
                holder: &self.transport.holder,
                label: self.label.as_deref().unwrap_or_default(),
            };
            release_call(&self.keys, value, None)
        } else {
            release_call(&self.keys, self.token, None)
        };
        let mut pending = ReleaseOnDrop::new(&self.transport, &self.keys, self.token);
        let reply = self
            .transport
            .run(&call, "release", self.keys.name())
            .await?;
        pending.disarm();
        self.transport
            .release_reply(&reply)
            .ok_or_else(|| unexpected("release", &reply))
    }

    /// Gives the lock back in the background (its last hold was dropped); never blocks.
    pub(crate) fn release_in_background(&self) {
        if self.lost_reason() == Some(LostReason::Shutdown) {
            // Released by the client's shutdown already.
            return;
        }
        self.mark_released();
        self.transport
            .release_in_background(self.keys.clone(), self.token, None);
    }

    /// Sets a new lease of `ttl` in Redis, owner-checked; a successful one becomes the lease
    /// the watchdog renews to, and a lock found gone or taken makes the lease lost.
    pub(crate) async fn extend(&self, ttl: Duration) -> Result<ExtendStatus> {
        let mut call = Call::new(&scripts::EXTEND, 1);
        call.arg(&*self.keys.lock)
            .arg(self.extend_owner())
            .arg(timing::millis(ttl));
        let sent = Instant::now();
        let reply = self
            .transport
            .run(&call, "extend", self.keys.name())
            .await?;
        let status = match ExtendStatus::decode_batch(&reply, 1).as_deref() {
            Some([Some(status)]) => *status,
            _ => return Err(unexpected("extend", &reply)),
        };
        match status {
            ExtendStatus::Extended => self.extended(sent, ttl),
            ExtendStatus::Asked => {
                self.extended(sent, ttl);
                self.mark_asked();
            }
            ExtendStatus::Gone => {
                self.fire_lost(LostReason::Expired);
            }
            ExtendStatus::Other => {
                self.fire_lost(LostReason::TakenOver);
            }
        }
        Ok(status)
    }
}

/// The bit of `depth` (1 ..= 64) in [`LeaseCore`]'s set of live hold depths.
fn depth_bit(depth: u32) -> u64 {
    1u64.checked_shl(depth.saturating_sub(1)).unwrap_or(0)
}

/// The live leases of one client, by lock key: for [`crate::Client::shutdown`] (release them
/// all) and for the warning when a caller waits for a lock its own client holds (a self-wait
/// that may never end). Reentrancy does not use it: it is decided by the scope of the running
/// body (`holds/hold.rs`).
///
/// A holder of a shared lock (a semaphore's permit) is one of possibly many of the same key in
/// one client: those are kept by token instead.
#[derive(Debug, Default)]
pub(crate) struct HeldLocks {
    map: StdMutex<HashMap<Arc<str>, Weak<LeaseCore>>>,
    shared: StdMutex<HashMap<OwnerToken, Weak<LeaseCore>>>,
}

impl HeldLocks {
    /// Records a lease just acquired from Redis (replacing the record of an earlier lease of the
    /// same mutex, which can only be a lost one).
    fn insert(&self, lease: &Arc<LeaseCore>) {
        if lease.keys.kind().is_shared() {
            lock(&self.shared).insert(lease.token, Arc::downgrade(lease));
            return;
        }
        lock(&self.map).insert(lease.keys.lock.clone(), Arc::downgrade(lease));
    }

    /// Forgets `lease`, unless a newer lease replaced it.
    fn remove(&self, lease: &LeaseCore) {
        if lease.keys.kind().is_shared() {
            lock(&self.shared).remove(&lease.token);
            return;
        }
        // One lookup on the usual path (the record is this lease's): take it out, and put it
        // back only when it is a newer lease's. Hashing the key is most of what the registry
        // costs a pair (SipHash, callgrind: ~200 instructions a lookup).
        let mut map = lock(&self.map);
        if let Some((key, held)) = map.remove_entry(&*lease.keys.lock)
            && !std::ptr::eq(held.as_ptr(), lease)
        {
            map.insert(key, held);
        }
    }

    /// The live lease of `lock_key`, if this client holds it.
    pub(crate) fn get(&self, lock_key: &str) -> Option<Arc<LeaseCore>> {
        lock(&self.map)
            .get(lock_key)
            .and_then(Weak::upgrade)
            .filter(|lease| lease.is_live())
    }

    /// Every lease not yet released or lost, forgetting them all (client shutdown).
    pub(crate) fn take_all(&self) -> Vec<Arc<LeaseCore>> {
        let mutexes: Vec<Weak<LeaseCore>> = lock(&self.map).drain().map(|(_, l)| l).collect();
        let shared: Vec<Weak<LeaseCore>> = lock(&self.shared).drain().map(|(_, l)| l).collect();
        mutexes
            .into_iter()
            .chain(shared)
            .filter_map(|lease| lease.upgrade())
            .filter(|lease| !lease.is_settled())
            .collect()
    }
}

impl fmt::Debug for LeaseCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseCore")
            .field("name", &self.keys.name())
            .field("token", &self.token)
            .field("fence", &self.issued_fence())
            .field("renewal", &self.renewal)
            .field("lost", &self.loss.decided())
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

    /// The fencing token of the acquisition (the same for every nested hold of it), issued on
    /// demand: the first call costs one round trip unless it came with the lock (a hand-off, or
    /// [`crate::MutexOptions::fenced`]); later calls return it at once. Pass it to the storage
    /// you write to, which rejects a token smaller than the largest it has seen.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`] when the lease is lost before a token was issued to it (a stale
    /// holder never gets one newer than its successor's); [`ErrorKind::Connection`] or
    /// [`ErrorKind::Timeout`] when Redis does not answer in time.
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
