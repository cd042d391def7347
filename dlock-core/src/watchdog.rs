//! The watchdog: renews the leases of a client's watchdog guards, in batches, and declares a
//! lease lost as soon as it is.
//!
//! One task per client (started with the first watchdog guard, ending with the last). Each lease
//! is renewed every `interval` (default a third of the lease). Renewals due within half an
//! interval of each other are sent together — one `extend.lua` call per [`BATCH`] locks — and
//! then share their next renewal time, so holding 10,000 locks costs about 100 round trips per
//! renewal interval, not 10,000. (A lease renewed half an interval early still has more than
//! half of it left: renewing early is safe.)
//!
//! A lease is declared lost (see [`crate::lease`]) when a renewal finds the lock deleted or
//! owned by another, when `safe_until` passes without a successful renewal (Redis unreachable),
//! or when renewal stops at `max_hold`. The watchdog stops renewing a lease when its last guard is
//! released or dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use redis::Value;

use crate::client::Shared;
use crate::lease::{self, LeaseCore, LostReason, Renewal};

use crate::scripts::{self, Call};
use crate::token::OwnerToken;

/// Locks renewed per script call.
pub(crate) const BATCH: usize = 100;

/// How soon a failed renewal is retried (bounded by the renewal interval).
const RETRY: Duration = Duration::from_millis(500);

struct Entry {
    lease: Weak<LeaseCore>,
    interval: Duration,
    /// When the next renewal is due.
    next_due: Instant,
    /// Renewals stop after this instant (`max_hold`).
    renew_until: Option<Instant>,
    /// No more renewals: the lease is left to run out (`max_hold` reached).
    winding_down: bool,
}

#[derive(Default)]
struct State {
    entries: HashMap<OwnerToken, Entry>,
    running: bool,
    /// When the task, asleep, will look again; a new lease due later needs no wake-up.
    planned_wake: Option<Instant>,
}

/// The watchdog of one client.
#[derive(Default)]
pub(crate) struct Watchdog {
    state: Mutex<State>,
    /// Shared with the task, which must not keep the client alive while it sleeps.
    wake: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Watchdog")
            .field("leases", &state.entries.len())
            .field("running", &state.running)
            .finish()
    }
}

/// One renewal to send: the lease and the lease length to set.
struct Due {
    lease: Arc<LeaseCore>,
    ttl: Duration,
}

impl Watchdog {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts renewing `lease` (a watchdog lease just acquired).
    pub(crate) fn register(&self, shared: &Arc<Shared>, lease: &Arc<LeaseCore>) {
        let Renewal::Watchdog { interval, max_hold } = lease.renewal else {
            return;
        };
        let next_due = lease.acquired_at + interval;
        let (start, wake) = {
            let mut state = self.lock();
            state.entries.insert(
                lease.token,
                Entry {
                    lease: Arc::downgrade(lease),
                    interval,
                    next_due,
                    renew_until: max_hold.and_then(|m| lease.acquired_at.checked_add(m)),
                    winding_down: false,
                },
            );
            // Waking the task rescans every lease: only when this one is due before the task
            // looks again anyway (holding 10,000 locks, a wake per acquire made each acquire
            // cost ~1 ms of CPU, measured).
            let wake = state.planned_wake.is_some_and(|w| next_due < w);
            (!std::mem::replace(&mut state.running, true), wake)
        };
        if start {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    handle.spawn(run(Arc::downgrade(shared)));
                }
                Err(_) => {
                    self.lock().running = false;
                    tracing::warn!(lock = %lease.keys.name(), "dlock: no runtime for the watchdog; the lease will not be renewed");
                }
            }
        } else if wake {
            self.wake.notify_one();
        }
    }

    /// Stops renewing the lease of `token` (its last guard is gone).
    pub(crate) fn deregister(&self, token: &OwnerToken) {
        self.lock().entries.remove(token);
    }

    /// Picks the renewals due now, declares overdue leases lost, and says when to look again.
    /// `None` when nothing is left to watch (the task then ends).
    fn collect(&self, now: Instant) -> Option<(Vec<Due>, Instant)> {
        let mut state = self.lock();
        let mut due = Vec::new();
        let mut wake: Option<Instant> = None;
        state.entries.retain(|_, entry| {
            // Not `is_live_at`: a lease past its safe-until must reach `fire_lost` below, so
            // that its cancellation token and log line report the loss.
            let Some(lease) = entry.lease.upgrade().filter(|l| !l.is_settled()) else {
                return false;
            };
            let safe_until = lease.safe_until();
            if now >= safe_until {
                lease.fire_lost(lease.deadline_reason());
                return false;
            }
            // Renewals due within the next half interval go now, together: leases acquired at
            // different moments converge onto shared renewal times, so batches stay full.
            if !entry.winding_down && entry.next_due <= now + entry.interval / 2 {
                let (ttl, last) = renewal_ttl(&lease, entry.renew_until, now);
                if last {
                    // max_hold: this renewal (if any) lets the lease end at max_hold.
                    entry.winding_down = true;
                    lease.stop_renewal();
                }
                if let Some(ttl) = ttl {
                    due.push(Due { lease, ttl });
                    // Tentative; replaced by the outcome of the renewal.
                    entry.next_due = now + entry.interval;
                }
            }
            let next = if entry.winding_down {
                safe_until
            } else {
                entry.next_due.min(safe_until)
            };
            wake = Some(wake.map_or(next, |w| w.min(next)));
            true
        });
        // Renewals to send mean the task looks again right after them.
        state.planned_wake = if due.is_empty() { wake } else { None };
        match wake {
            Some(wake) => Some((due, wake)),
            None => {
                state.running = false;
                None
            }
        }
    }

    /// Schedules the next renewal of `token` after a failed attempt.
    fn retry_soon(&self, token: &OwnerToken, now: Instant) {
        if let Some(entry) = self.lock().entries.get_mut(token) {
            entry.next_due = now + RETRY.min(entry.interval);
        }
    }
}

/// The lease to set at `now` — the full lease, or what is left of `max_hold` (`None` when too
/// little is left to renew) — and whether this is the last renewal.
fn renewal_ttl(
    lease: &LeaseCore,
    renew_until: Option<Instant>,
    now: Instant,
) -> (Option<Duration>, bool) {
    let full = lease.full_ttl();
    match renew_until {
        None => (Some(full), false),
        Some(until) => {
            let left = until.saturating_duration_since(now);
            if left < lease::MIN_TTL {
                (None, true)
            } else {
                (Some(full.min(left)), left <= full)
            }
        }
    }
}

/// The watchdog task of one client.
async fn run(shared: Weak<Shared>) {
    loop {
        let Some(client) = shared.upgrade() else {
            return;
        };
        let Some((due, wake)) = client.watchdog.collect(Instant::now()) else {
            return;
        };
        if !due.is_empty() {
            renew(&client, due).await;
            continue;
        }
        let wake_signal = client.watchdog.wake.clone();
        let notified = wake_signal.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // Do not keep the client alive while sleeping.
        drop(client);
        tokio::select! {
            () = notified => {}
            () = tokio::time::sleep_until(wake.into()) => {}
        }
    }
}

/// Sends the due renewals, [`BATCH`] locks per script call (of one slot on a cluster), all calls
/// concurrently, and applies the answers.
async fn renew(shared: &Arc<Shared>, due: Vec<Due>) {
    let sent = Instant::now();
    let mut groups: HashMap<_, Vec<Due>> = HashMap::new();
    for d in due {
        groups
            .entry(shared.conn.batch_group(&d.lease.keys.lock))
            .or_default()
            .push(d);
    }
    let chunks = groups.values().flat_map(|group| group.chunks(BATCH));
    let calls = chunks.map(|chunk| async move {
        let mut call = Call::new(&scripts::EXTEND, chunk.len());
        for d in chunk {
            call.arg(&*d.lease.keys.lock);
        }
        for d in chunk {
            call.arg(d.lease.token.as_bytes()).arg(lease::millis(d.ttl));
        }
        let reply = shared.run(&call, "renew", "(watchdog batch)").await;
        let statuses = reply.map(|value| match value {
            Value::Array(items) => items.iter().map(scripts::int).collect::<Vec<_>>(),
            _ => Vec::new(),
        });
        (chunk, statuses)
    });
    for (chunk, reply) in join_all(calls).await {
        match reply {
            Ok(statuses) if statuses.len() == chunk.len() => {
                for (d, status) in chunk.iter().zip(statuses) {
                    apply(shared, d, status.unwrap_or(0), sent);
                }
            }
            Ok(statuses) => {
                tracing::warn!(
                    sent = chunk.len(),
                    got = statuses.len(),
                    "dlock: watchdog got a malformed reply"
                );
                chunk
                    .iter()
                    .for_each(|d| shared.watchdog.retry_soon(&d.lease.token, Instant::now()));
            }
            Err(e) => {
                tracing::warn!(error = %e, locks = chunk.len(), "dlock: lease renewal failed; retrying");
                chunk
                    .iter()
                    .for_each(|d| shared.watchdog.retry_soon(&d.lease.token, Instant::now()));
            }
        }
    }
}

fn apply(shared: &Shared, due: &Due, status: i64, sent: Instant) {
    let lease = &due.lease;
    match status {
        1 => lease.renewed(sent, due.ttl),
        0 => {
            // The key is gone. Before safe-until it can only have been deleted by someone.
            let reason = if sent < lease.safe_until() {
                LostReason::Removed
            } else {
                LostReason::Expired
            };
            lease.fire_lost(reason);
            shared.watchdog.deregister(&lease.token);
        }
        _ => {
            lease.fire_lost(LostReason::TakenOver);
            shared.watchdog.deregister(&lease.token);
        }
    }
}
