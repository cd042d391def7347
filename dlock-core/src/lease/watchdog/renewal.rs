//! The pieces of one renewal round that need no watchdog state: the lease a renewal sets,
//! which locks may share a call, and why a lock a renewal found gone is gone.

use std::time::{Duration, Instant};

use redis::cluster_routing::Slot;

use crate::lease::{LeaseCore, LostReason};
use crate::timing;

/// The lease to set at `now` — the full lease, or what is left of `max_hold` (`None` when too
/// little is left to renew) — and whether this is the last renewal.
pub(super) fn renewal_ttl(
    lease: &LeaseCore,
    renew_until: Option<Instant>,
    now: Instant,
) -> (Option<Duration>, bool) {
    let full = lease.full_ttl();
    match renew_until {
        None => (Some(full), false),
        Some(until) => {
            let left = until.saturating_duration_since(now);
            if left < timing::MIN_TTL {
                (None, true)
            } else {
                (Some(full.min(left)), left <= full)
            }
        }
    }
}

/// Which locks may share a renewal call.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Group {
    /// A standalone server: any.
    Server,
    /// Locks served by one cluster shard: the call declares the first key only (Redis routes
    /// it by that key), the others are read as undeclared keys of other slots of that node.
    Shard(u16),
    /// Locks of one cluster slot (the shard map is unknown or stale): all keys declared.
    Slot(Slot),
}

/// Why a lock that a renewal found gone is gone. The renewal ran on the server before its answer
/// arrived (`received`); the lease certainly lasted until `safe_until` (the previous renewal's
/// send time plus the lease, less the drift allowance). Found gone while it must still have
/// been there, it was deleted; otherwise it may simply have run out (a renewal sent in time but
/// delayed on the way, or a process that was paused).
pub(super) fn gone_reason(safe_until: Instant, received: Instant) -> LostReason {
    if received < safe_until {
        LostReason::Removed
    } else {
        LostReason::Expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_gone_is_removed_only_if_the_lease_certainly_still_stood() {
        let now = Instant::now();
        let later = now + Duration::from_millis(5);
        assert_eq!(gone_reason(later, now), LostReason::Removed);
        // Sent in time, answered after the lease could have run out: it may have expired.
        assert_eq!(gone_reason(now, later), LostReason::Expired);
    }
}
