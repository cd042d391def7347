//! [`LeaseCore`]: one acquisition in Redis, shared by every hold on it and by the watchdog —
//! made, fenced, renewed, extended and released here; and [`HeldLocks`], the registry of the
//! leases a client holds. How its standing (held, suspect, asked, lost) changes is in
//! `lease/state.rs`.

use super::loss::{LeaseLost, LeaseState, LossSignal, LostReason};
use crate::error::Result;
use crate::key::LockKeys;
use crate::metrics;
use crate::options::Renewal;
use crate::runtime::lock;
use crate::scripts::wire::LockValue;
use crate::scripts::{self, Call, ExtendStatus, FenceReply, ReleaseReply, unexpected};
use crate::timing::{self, safe_until};
use crate::token::{ExtendOwner, FencingToken, OwnerToken};
use crate::transport::wait::Registration;
use crate::transport::{ReleaseOnDrop, Transport, release_call};
use std::collections::HashMap;
use std::fmt;
use std::sync::Weak;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{Semaphore, watch};

#[derive(Debug)]
pub(super) struct Times {
    /// The lease the last acquire/extend/renewal set (shorter than `full_ttl` near `max_hold`).
    pub(super) ttl: Duration,
    /// The lease the watchdog renews to.
    pub(super) full_ttl: Duration,
    pub(super) safe_until: Instant,
    /// Where the watchdog's renewals stand, to tell a pause from an outage at the deadline.
    pub(super) renewal: RenewalState,
    /// When the oldest renewal not yet acknowledged was sent (the first of a run of failed or
    /// awaited ones); `None` once one is acknowledged.
    pub(super) unacked_since: Option<Instant>,
    /// The lease is suspect (see [`LeaseState::Suspect`]).
    pub(super) suspect: bool,
}

/// The watchdog's last renewal of a lease (see [`LeaseCore::deadline_reason`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RenewalState {
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
    pub(super) held: Arc<HeldLocks>,
    pub(crate) keys: LockKeys,
    pub(crate) token: OwnerToken,
    /// The label written into the lock value (see [`LeaseCore::release`]).
    pub(super) label: Option<Arc<str>>,
    /// The fencing token of this acquisition, once issued (see [`LeaseCore::fence`]).
    pub(super) fence: OnceLock<FencingToken>,
    pub(crate) acquired_at: Instant,
    pub(crate) renewal: Renewal,
    pub(super) times: StdMutex<Times>,
    /// Depths of the live holds (reentrancy, see `holds/hold.rs`), as a bit set: bit `d - 1` for
    /// depth `d`; zero once the last hold is gone.
    pub(super) depths: AtomicU64,
    /// The turn that acquisitions nested directly in the first hold's body take (`holds/hold.rs`):
    /// the first hold is the lease itself, and this is its one field.
    pub(crate) nested_permits: OnceLock<Arc<Semaphore>>,
    /// The loss, once decided, its cancellation token, and how it is made known (in the one
    /// order of `lease/loss.rs`: whoever learns of the loss finds the token cancelled).
    pub(super) loss: LossSignal,
    /// The lease's state for [`Lease::states`](crate::Lease::states) receivers, made on the first call (most leases
    /// are never watched, and a channel is an allocation).
    pub(super) states: OnceLock<watch::Sender<LeaseState>>,
    pub(super) released: AtomicBool,
    /// The watchdog stopped renewing (`max_hold`): running out is then the expected end.
    pub(super) renewal_stopped: AtomicBool,
    /// Someone asked the holder to give the lock back (`ask.lua`, learnt from an extension);
    /// [`Lease::release_requested`](crate::Lease::release_requested) waits for it on `loss`'s wake-ups.
    pub(super) asked: AtomicBool,
    /// Whether the holder excludes every other holder of the lock (a mutex's, a read-write
    /// lock's writer) or shares it (a reader, a semaphore's permits): an acquisition nested in
    /// a shared hold's body may only share it too (`kinds/rwlock.rs`).
    pub(crate) exclusive: bool,
    /// Kept while held so that a late duplicate of our grant is recognised as ours rather than
    /// released as an orphan. Boxed: only leases that waited have one, and every held lease
    /// would otherwise carry its 48 bytes. `None` also says the lease never waited: the lock
    /// then holds the value its uncontended `SET` wrote.
    pub(super) registration: Option<Box<Registration>>,
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
    pub(super) fn metric_label(&self) -> &str {
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
    pub(super) fn renewal_interval(&self) -> Option<Duration> {
        match self.renewal {
            Renewal::Watchdog { interval, .. } => Some(interval),
            Renewal::Fixed => None,
        }
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
    ///
    /// On a server with `DELIFEQ`, a hold that its uncontended `SET` took, and whose value
    /// nothing is known to have changed, goes to it first (`transport/native.rs`): its 1 is
    /// "released, nobody waited"; its 0 sends release.lua with the same arguments, whose
    /// answer (handed on, expired, held by another) is the one returned.
    pub(crate) async fn release(&self) -> Result<ReleaseReply> {
        self.mark_released();
        let mut pending = ReleaseOnDrop::new(&self.transport, &self.keys, self.token);
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
            if self.native_first() && self.transport.release_native(&self.keys, &value).await? {
                pending.disarm();
                return Ok(ReleaseReply::Released);
            }
            release_call(&self.keys, value, None)
        } else {
            release_call(&self.keys, self.token, None)
        };
        let reply = self
            .transport
            .run(&call, "release", self.keys.name())
            .await?;
        pending.disarm();
        self.transport
            .release_reply(&reply)
            .ok_or_else(|| unexpected("release", &reply))
    }

    /// Whether this lease's release tries `DELIFEQ` first: its lock should still hold the value
    /// its `SET` wrote. Not when a fence was issued to it (fenced, or fenced on demand: the
    /// fence may be in the value), nor when this client knows that someone waits for the lock —
    /// a waiting acquire of its own, or a release request (`asked`) — since a waiter's flag
    /// makes `DELIFEQ` answer 0 and cost a second round trip before release.lua hands it on.
    fn native_first(&self) -> bool {
        self.fence.get().is_none()
            && !self.asked.load(Ordering::Relaxed)
            && !self.transport.waiters.waits_here(&self.keys.lock)
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
    pub(super) fn insert(&self, lease: &Arc<LeaseCore>) {
        if lease.keys.kind().is_shared() {
            lock(&self.shared).insert(lease.token, Arc::downgrade(lease));
            return;
        }
        lock(&self.map).insert(lease.keys.lock.clone(), Arc::downgrade(lease));
    }

    /// Forgets `lease`, unless a newer lease replaced it.
    pub(super) fn remove(&self, lease: &LeaseCore) {
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
