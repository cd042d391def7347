//! What the watchdog tells the logs: leases declared lost past their safe-until (one line per
//! round during an outage), and suspicions and recoveries, one line each per look.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::lease::{LeaseCore, LostReason};

/// Declares lost a lease past its safe-until, for the reason that means (see
/// [`LeaseCore::deadline_reason`]). During an outage an unreachable lease is not logged one by
/// one: `true` says it is to be counted in [`report_overdue`]'s line.
pub(super) fn declare_overdue(lease: &LeaseCore, in_outage: bool) -> bool {
    let reason = lease.deadline_reason();
    if in_outage && reason == LostReason::Unreachable {
        lease.fire_lost_quietly(reason)
    } else {
        lease.fire_lost(reason);
        false
    }
}

/// The one line for the leases [`declare_overdue`] counted.
pub(super) fn report_overdue(overdue: usize) {
    if overdue > 0 {
        tracing::warn!(
            leases = overdue,
            "dlock: leases lost: Redis could not be reached to renew them before they ran out"
        );
    }
}

/// The leases that became suspect in one look, reported in one line: a hung Redis makes
/// every lease of the client suspect at about the same time.
#[derive(Default)]
pub(super) struct Suspects {
    count: usize,
    /// The first one's name, and how long it is still safe.
    first: Option<(Arc<str>, Duration)>,
}

impl Suspects {
    pub(super) fn add(&mut self, lease: &LeaseCore, now: Instant) {
        self.count += 1;
        self.first.get_or_insert_with(|| {
            (
                Arc::from(lease.keys.name()),
                lease.safe_until().saturating_duration_since(now),
            )
        });
    }

    pub(super) fn report(self) {
        let Some((name, safe_for)) = self.first else {
            return;
        };
        if self.count == 1 {
            tracing::warn!(
                lock = %name,
                ?safe_for,
                "dlock: lease suspect: its renewal has gone unacknowledged for a renewal \
                 interval; still held, retrying"
            );
        } else {
            tracing::warn!(
                leases = self.count,
                first = %name,
                ?safe_for,
                "dlock: leases suspect: their renewals have gone unacknowledged for a renewal \
                 interval; still held, retrying"
            );
        }
    }
}

/// The leases whose suspicion one renewal round ended, reported in one line.
#[derive(Default)]
pub(super) struct Recoveries {
    count: usize,
    first: Option<Arc<str>>,
}

impl Recoveries {
    pub(super) fn add(&mut self, lease: &LeaseCore) {
        self.count += 1;
        self.first
            .get_or_insert_with(|| Arc::from(lease.keys.name()));
    }

    pub(super) fn report(self) {
        let Some(name) = self.first else {
            return;
        };
        if self.count == 1 {
            tracing::info!(lock = %name, "dlock: lease no longer suspect: its renewal was acknowledged");
        } else {
            tracing::info!(
                leases = self.count,
                first = %name,
                "dlock: leases no longer suspect: their renewals were acknowledged"
            );
        }
    }
}
