//! Leases: one acquisition in Redis ([`LeaseCore`]), shared by its holds and the watchdog; how
//! its loss reaches the work it protects; releasing and extending it; and the registry of the
//! leases a client holds ([`HeldLocks`]). The arithmetic (TTLs, drift, safe-until) is in
//! `timing.rs`.
//!
//! A lease is *lost* — once, for good — when an extension finds the lock gone or owned by another,
//! when renewal stops (`max_hold`), or when `safe_until` passes without a successful renewal. Loss
//! resolves every [`Lease::lost`] future, cancels the lease's [`CancellationToken`] and logs a
//! `tracing` warning, no later than `safe_until`.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, Semaphore};
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
use crate::transport::{ReleaseOnDrop, Transport, release_call};
use crate::wait::Registration;

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

#[derive(Debug)]
struct Times {
    /// The lease the last acquire/extend/renewal set (shorter than `full_ttl` near `max_hold`).
    ttl: Duration,
    /// The lease the watchdog renews to.
    full_ttl: Duration,
    safe_until: Instant,
    /// Where the watchdog's renewals stand, to tell a pause from an outage at the deadline.
    renewal: RenewalState,
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
    /// Depths of the live holds (reentrancy, see `hold.rs`), as a bit set: bit `d - 1` for
    /// depth `d`; zero once the last hold is gone.
    depths: AtomicU64,
    /// The turn that acquisitions nested directly in the first hold's body take (`hold.rs`):
    /// the first hold is the lease itself, and this is its one field.
    pub(crate) nested_permits: OnceLock<Arc<Semaphore>>,
    /// Why the lease was lost, once decided (the first `fire_lost` wins) …
    lost: OnceLock<LostReason>,
    /// … and made known: set after the cancellation token is cancelled, so that whoever learns
    /// of the loss finds the token cancelled, and the reason decided before.
    lost_published: AtomicBool,
    lost_notify: Notify,
    cancel: OnceLock<CancellationToken>,
    released: AtomicBool,
    /// The watchdog stopped renewing (`max_hold`): running out is then the expected end.
    renewal_stopped: AtomicBool,
    /// Whether the holder excludes every other holder of the lock (a mutex's, a read-write
    /// lock's writer) or shares it (a reader, a semaphore's permits): an acquisition nested in
    /// a shared hold's body may only share it too (`rwlock.rs`).
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
        if self.lost.get().is_none() {
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
            }),
            renewal_stopped: AtomicBool::new(false),
            exclusive: new.exclusive,
            depths: AtomicU64::new(1),
            nested_permits: OnceLock::new(),
            lost: OnceLock::new(),
            lost_published: AtomicBool::new(false),
            lost_notify: Notify::new(),
            cancel: OnceLock::new(),
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
    pub(crate) fn renewed(&self, sent: Instant, ttl: Duration) {
        let mut times = lock(&self.times);
        times.ttl = ttl;
        times.safe_until = safe_until(sent, ttl, ttl);
        times.renewal = RenewalState::Answered;
    }

    /// Records that the watchdog sends a renewal now. Its answer or its failure comes within
    /// the command timeout (twice that, for a cluster that settles its slots first) while the
    /// process runs.
    pub(crate) fn renewal_sent(&self, sent: Instant) {
        let settled_by = sent + self.transport.command_timeout().saturating_mul(2);
        lock(&self.times).renewal = RenewalState::InFlight { settled_by };
    }

    /// Records that the watchdog's renewal failed (it retries).
    pub(crate) fn renewal_failed(&self) {
        lock(&self.times).renewal = RenewalState::Failed;
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

    /// Why the lease was lost, once that is known (its cancellation token is then cancelled).
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        if self.lost_published.load(Ordering::Acquire) {
            self.lost.get().copied()
        } else {
            None
        }
    }

    /// Declares the lease lost for the reason its deadline passing means, unless a loss was
    /// declared already; the reason that stands either way.
    pub(crate) fn fire_deadline(&self) -> LostReason {
        self.fire_lost(self.deadline_reason());
        *self.lost.get().unwrap_or(&LostReason::Expired)
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
    ///
    /// Order matters: the reason is decided first (the first call wins, so every observer
    /// reports the same one), then the token is cancelled, then the reason is published and
    /// `lost()` woken — whoever learns of the loss finds the token cancelled. A token that
    /// [`LeaseCore::cancellation_token`] creates meanwhile cancels itself (it checks the
    /// decided reason).
    pub(crate) fn fire_lost_quietly(&self, reason: LostReason) -> bool {
        if self.lost.set(reason).is_err() {
            return false;
        }
        metrics::settled(
            self.keys.kind().metric_name(),
            self.metric_label(),
            metrics::since(self.acquired_at),
            reason.metric_name(),
        );
        if let Some(token) = self.cancel.get() {
            token.cancel();
        }
        self.lost_published.store(true, Ordering::Release);
        self.lost_notify.notify_waiters();
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
            let notified = self.lost_notify.notified();
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
/// body (`hold.rs`).
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
            .field("fence", &core.issued_fence())
            .field("remaining", &self.remaining())
            .field("lost", &core.lost_reason())
            .finish()
    }
}
