//! Which fence counters the uncontended fenced acquire may take by a plain `INCR`.
//!
//! `MutexOptions::fenced()` takes the fence in the acquire's own `MULTI`. A slot's fence
//! counter that lost its latest values (a restart from an old snapshot or a lagging AOF, a
//! failover to a lagging replica) would hand out fences that were issued before; `fence.lua`
//! (`next_fence`) floors every fence at the server clock, which is above every fence issued
//! before (a fence is at most its issue time), but a script call costs twice a plain command.
//! Until session 25 the fast path took the `INCR` when it was within 500 ms of `TIME` in the
//! same `MULTI` — sound only if every loss of data takes longer than that to recover from (a
//! restart can take less), and costly: a slot's counter moves by one per acquire, falls behind
//! the clock between two acquires of that slot, and a third of the fenced acquires went on to
//! `fence.lua` in a second round trip (docs/benchmarks/2026-11-25-run-k.md).
//!
//! Now the clock is not asked at all. A counter can only lose values where the server's data
//! goes back, and a restart or a failover replaces the client's connection. So each slot's
//! counter is floored once *per connection*: each client names its connection (`CLIENT
//! SETNAME dlock:<client id>:<epoch>`) and every fenced acquire reads the name back (`CLIENT
//! GETNAME`, in its `MULTI`). The first fenced acquire of a slot on a connection runs
//! `fence.lua` inside its `MULTI` (still one round trip), which raises the counter to the
//! clock if it is behind; once its reply shows that it ran on the current epoch's connection,
//! later acquires of that slot take a plain `INCR`, and the reply's name confirms that they ran
//! on that same connection, after the floor. A reply from another connection (a reconnect, a
//! failover) ends the epoch: the next one names the new connection and knows no slot yet.
//!
//! Why this is sound:
//! * One name, one connection: each epoch's name is sent by exactly one `SETNAME` (the first
//!   acquire to claim it), so at most one connection ever carries it.
//! * A slot is marked for an epoch only by a reply that carried the epoch's name and floored
//!   the counter (`fence.lua`), and its `INCR` is taken only from a reply that carried the name
//!   again: both ran on that one connection, so on one server process whose data did not go
//!   back in between, and the counter is above every fence issued before the floor.
//! * A reply that failed (an error, `READONLY` of a demoted master, a timeout) ends the epoch.
//!
//! What it does not catch: the data of a server going back while a connection stays open
//! (`DEBUG RELOAD`, a master made a replica and promoted again without the connection
//! dropping and without a fenced acquire failing in between, a counter key overwritten by
//! hand). A counter made anew (`FLUSHALL`, an eviction, a deleted key) is still caught by its
//! value. On a Redis Cluster every fenced acquire runs `fence.lua` in its `MULTI`: the cluster
//! client keeps one connection per node and replaces them out of sight, so a name proves
//! nothing there. The same on the application's own connection
//! (`ClientBuilder::app_connection`): dlock must not rename it, and does not see it replaced.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arc_swap::ArcSwap;

/// Redis Cluster's number of hash slots (fence counters are per slot).
const SLOTS: usize = 16384;

/// The fence counters one client floored, per connection.
pub(crate) struct FenceEpochs {
    /// `dlock:<client id>:`; each epoch's name is this and its number.
    prefix: Box<str>,
    current: ArcSwap<Epoch>,
    /// The last epoch's number.
    numbers: AtomicU64,
    /// `false` on a cluster or the application's connection: every fenced acquire runs
    /// `fence.lua`.
    enabled: bool,
    /// Set when the user's ACL refused `CLIENT SETNAME`/`GETNAME`: from then on, as on a
    /// cluster.
    names_refused: AtomicBool,
}

/// One connection's name and the slots whose counters were floored on it.
struct Epoch {
    name: Box<str>,
    /// Set by the one acquire that sends this epoch's `SETNAME`.
    claimed: AtomicBool,
    /// Set once that `SETNAME` succeeded.
    named: AtomicBool,
    /// One bit per slot.
    current_slots: Box<[AtomicU64]>,
}

impl Epoch {
    fn new(name: String) -> Self {
        Self {
            name: name.into(),
            claimed: AtomicBool::new(false),
            named: AtomicBool::new(false),
            current_slots: (0..SLOTS / 64).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn bit(slot: usize) -> (usize, u64) {
        let slot = slot % SLOTS;
        (slot / 64, 1 << (slot % 64))
    }

    fn is_current(&self, slot: usize) -> bool {
        let (word, bit) = Self::bit(slot);
        self.current_slots[word].load(Ordering::Acquire) & bit != 0
    }

    fn mark_current(&self, slot: usize) {
        let (word, bit) = Self::bit(slot);
        self.current_slots[word].fetch_or(bit, Ordering::Release);
    }
}

impl FenceEpochs {
    /// The epochs of the client `client_id`; `unseen`: never take a plain `INCR` (a cluster,
    /// or the application's connection: connections replaced out of dlock's sight).
    pub(crate) fn new(client_id: &str, unseen: bool) -> Self {
        let prefix: Box<str> = format!("dlock:{client_id}:").into();
        let first = Epoch::new(format!("{prefix}1"));
        Self {
            prefix,
            current: ArcSwap::from_pointee(first),
            numbers: AtomicU64::new(1),
            enabled: !unseen,
            names_refused: AtomicBool::new(false),
        }
    }

    /// What one fenced acquire of a lock in `slot` sends with its `MULTI`, and how it reads
    /// the replies ([`Ticket`]).
    pub(crate) fn ticket(&self, slot: usize) -> Ticket {
        if !self.enabled || self.names_refused.load(Ordering::Relaxed) {
            return Ticket::clock_only();
        }
        let epoch = self.current.load_full();
        let named = epoch.named.load(Ordering::Acquire);
        let trusted = named && epoch.is_current(slot);
        // Only the first acquire of an epoch names the connection: one name, one connection.
        let names = !named && !epoch.claimed.swap(true, Ordering::AcqRel);
        Ticket {
            epoch: Some(epoch),
            slot,
            named_when_sent: named,
            trusted,
            names,
        }
    }

    /// Whether `error` (of a fenced acquire whose `MULTI` named the connection) is the user's
    /// ACL refusing the name commands. The first such error switches naming off for good (the
    /// server discarded the whole `MULTI`, so the acquire may simply be sent again): every
    /// fenced acquire then floors its fence by script, as on a cluster, and stays correct.
    pub(crate) fn refused_names(&self, error: &crate::error::Error) -> bool {
        let text = error.to_string();
        let refused = error.kind() == crate::error::ErrorKind::Permission
            && (text.contains("client|getname") || text.contains("client|setname"));
        if refused && !self.names_refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "dlock: this Redis user may not run CLIENT SETNAME/GETNAME (grant +@connection, \
                 as the guide's ACL line does); fenced acquires stay correct but floor every \
                 fence by script"
            );
        }
        refused
    }

    /// Ends `epoch` if it is still the current one: a new one (with a new name, and no slot
    /// floored yet) takes its place.
    fn end(&self, epoch: &Arc<Epoch>) {
        let current = self.current.load();
        if !Arc::ptr_eq(&current, epoch) {
            return;
        }
        let number = self.numbers.fetch_add(1, Ordering::Relaxed) + 1;
        let next = Arc::new(Epoch::new(format!("{}{number}", self.prefix)));
        // Only if nobody replaced it meanwhile (else that newer epoch stays).
        let _ = self.current.compare_and_swap(&current, next);
    }
}

impl std::fmt::Debug for FenceEpochs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FenceEpochs")
            .field("epoch", &self.current.load().name)
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

/// One fenced acquire's part in its epoch: what to add to the `MULTI`, and what the replies
/// allow.
pub(crate) struct Ticket {
    /// `None` on a cluster.
    epoch: Option<Arc<Epoch>>,
    slot: usize,
    /// Whether the epoch's `SETNAME` had succeeded before this acquire was sent (so that, on
    /// the epoch's connection, it runs after the `SETNAME`).
    named_when_sent: bool,
    /// The slot's counter was floored on the epoch's connection: a plain `INCR` will do.
    trusted: bool,
    /// This acquire sends the epoch's `SETNAME`.
    names: bool,
}

impl Ticket {
    fn clock_only() -> Self {
        Self {
            epoch: None,
            slot: 0,
            named_when_sent: false,
            trusted: false,
            names: false,
        }
    }

    /// Whether the `MULTI` carries `CLIENT GETNAME` (and [`Ticket::set_name`] may add
    /// `SETNAME`): never on a cluster.
    pub(crate) fn reads_name(&self) -> bool {
        self.epoch.is_some()
    }

    /// Whether the `MULTI` takes the fence by a plain `INCR` (else by `fence.lua`).
    pub(crate) fn trusted(&self) -> bool {
        self.trusted
    }

    /// The name this acquire gives the connection (`CLIENT SETNAME`, last in the `MULTI`).
    pub(crate) fn set_name(&self) -> Option<&str> {
        self.epoch
            .as_deref()
            .filter(|_| self.names)
            .map(|e| &*e.name)
    }

    /// Reads the replies of `CLIENT GETNAME` (`name`, the connection's name before this
    /// `MULTI`) and of this acquire's `SETNAME` (`named`: `None` if it sent none, else whether
    /// it succeeded). `true` when the `MULTI` ran on the epoch's connection. Ends the epoch
    /// when the reply shows another connection than the epoch's.
    pub(crate) fn read(
        &self,
        epochs: &FenceEpochs,
        name: Option<&[u8]>,
        named: Option<bool>,
    ) -> bool {
        let Some(epoch) = &self.epoch else {
            return false;
        };
        // A SETNAME refused by the ACL discards the whole MULTI (see `refused_names`); one that
        // failed otherwise leaves this epoch unnamed, and its acquires floored by script.
        if named == Some(true) {
            epoch.named.store(true, Ordering::Release);
        }
        let same = name == Some(epoch.name.as_bytes());
        if !same && self.named_when_sent {
            // Sent after the epoch's connection was named, yet it ran elsewhere: that
            // connection is gone (a reconnect, a failover). Name the new one anew.
            epochs.end(epoch);
        }
        same
    }

    /// `fence.lua` floored the slot's counter in a `MULTI` that ran on the epoch's connection
    /// (`read` said so): later acquires of the slot on it take a plain `INCR`.
    pub(crate) fn floored(&self) {
        if let Some(epoch) = &self.epoch {
            epoch.mark_current(self.slot);
        }
    }

    /// The `MULTI` failed (an error reply, a timeout, a dropped connection): what the
    /// connection and its server are now is unknown, so the epoch ends.
    pub(crate) fn failed(&self, epochs: &FenceEpochs) {
        if let Some(epoch) = &self.epoch {
            epochs.end(epoch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(epochs: &FenceEpochs) -> Vec<u8> {
        epochs.current.load().name.as_bytes().to_vec()
    }

    #[test]
    fn a_slot_is_trusted_only_on_the_connection_it_was_floored_on() {
        let epochs = FenceEpochs::new("c1", false);
        // The first acquire names the connection and floors the counter by script.
        let first = epochs.ticket(7);
        assert!(!first.trusted() && first.reads_name());
        assert_eq!(first.set_name(), Some("dlock:c1:1"));
        // Its GETNAME ran before its SETNAME: not on the epoch's connection yet.
        assert!(!first.read(&epochs, None, Some(true)));
        // The next one floors the slot on the named connection, and names nothing.
        let second = epochs.ticket(7);
        assert!(second.set_name().is_none() && !second.trusted());
        let current = name(&epochs);
        assert!(second.read(&epochs, Some(&current), None));
        second.floored();
        // From now on a plain INCR for that slot, not for another.
        let third = epochs.ticket(7);
        assert!(third.trusted());
        assert!(third.read(&epochs, Some(&current), None));
        assert!(!epochs.ticket(8).trusted());
        // A reply from another connection (unnamed: a reconnect) ends the epoch: the next
        // acquire names the new connection, and trusts nothing.
        let fourth = epochs.ticket(7);
        assert!(fourth.trusted());
        assert!(!fourth.read(&epochs, None, None));
        assert_ne!(name(&epochs), current);
        let fifth = epochs.ticket(7);
        assert!(!fifth.trusted());
        assert_eq!(fifth.set_name(), Some("dlock:c1:2"));
        // A reply still carrying the old name is not on the new epoch's connection.
        assert!(!fifth.read(&epochs, Some(&current), Some(true)));
        assert!(!epochs.ticket(7).trusted());
    }

    #[test]
    fn a_reply_sent_before_the_name_was_set_ends_nothing() {
        let epochs = FenceEpochs::new("c1", false);
        let (naming, early) = (epochs.ticket(1), epochs.ticket(1));
        assert!(naming.set_name().is_some() && early.set_name().is_none());
        assert!(!naming.read(&epochs, None, Some(true)));
        // `early` was sent before the name was known to be set: its unnamed reply is no sign
        // of another connection.
        assert!(!early.read(&epochs, None, None));
        assert_eq!(name(&epochs), b"dlock:c1:1");
    }

    #[test]
    fn a_failed_acquire_ends_the_epoch_once() {
        let epochs = FenceEpochs::new("c1", false);
        epochs.ticket(1).read(&epochs, None, Some(true));
        let current = name(&epochs);
        let floor = epochs.ticket(1);
        assert!(floor.read(&epochs, Some(&current), None));
        floor.floored();
        assert!(epochs.ticket(1).trusted());
        let (a, b) = (epochs.ticket(1), epochs.ticket(1));
        a.failed(&epochs);
        // A second failure of the same epoch does not end the next one.
        b.failed(&epochs);
        assert_eq!(name(&epochs), b"dlock:c1:2");
        assert!(!epochs.ticket(1).trusted());
    }

    #[test]
    fn each_name_is_sent_once() {
        let epochs = FenceEpochs::new("c1", false);
        let claims = (0..10)
            .filter(|_| epochs.ticket(3).set_name().is_some())
            .count();
        assert_eq!(claims, 1);
    }

    #[test]
    fn a_cluster_always_floors_by_script() {
        let epochs = FenceEpochs::new("c1", true);
        let ticket = epochs.ticket(3);
        assert!(!ticket.trusted() && !ticket.reads_name() && ticket.set_name().is_none());
        assert!(!ticket.read(&epochs, None, None));
    }
}
