//! The watchdog: renews the leases of a client's watchdog guards, in batches, and declares a
//! lease lost as soon as it is.
//!
//! One task per client (started with the first watchdog guard, ending with the last, and started
//! again in the current runtime if the runtime it ran in has ended). Each lease is renewed every
//! `interval` (default a third of the lease). Renewals due within half an interval of each other
//! are sent together — one `extend.lua` call per [`BATCH`] locks — and then share their next
//! renewal time, so holding 10,000 locks costs about 100 round trips per renewal interval, not
//! 10,000. (A lease renewed half an interval early still has more than half of it left: renewing
//! early is safe.) On a Redis Cluster a call renews the locks of one shard (see `transport/shards.rs`):
//! the same 10,000 locks on three masters cost about 102 calls per interval, not one per slot.
//!
//! A renewal that fails (Redis unreachable or slow) is retried with exponential backoff, from a
//! quarter of the interval (at most 500 ms) up to the interval, at exactly the planned instant
//! (leases that failed together retry together) — but always once more shortly before the lease
//! could run out, so that an outage shorter than the lease never costs it. An outage is logged once per client when it
//! starts and once when renewals work again, with counts; leases that run out meanwhile are
//! reported in one line per renewal round.
//!
//! A lease is *suspect* (see [`crate::lease`]) once a renewal sent for it has gone one interval
//! without an acknowledgement — failed and retried, or still awaited — while its safe-until is
//! ahead; the task looks at that instant even while the renewal round is still awaited. An
//! acknowledged renewal makes it held again. Suspicions and recoveries are logged in one line
//! per look, with counts.
//!
//! A lease is declared lost (see [`crate::lease`]) when a renewal finds the lock deleted or
//! owned by another, when `safe_until` passes without a successful renewal (Redis unreachable),
//! or when renewal stops at `max_hold`. The reason is what the server said: `Removed` only when
//! the key was found gone by a request that certainly ran before the lease could have run out,
//! `Expired` otherwise. A lease that passes `safe_until` is `Unreachable` when its renewal
//! failed or is awaited, `Paused` when the renewal due before never went out (or its answer
//! never got processed within the command timeout): the process did not run. The watchdog stops renewing a lease when its last guard is released or
//! dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use redis::cluster_routing::Slot;

use crate::error::Error;
use crate::lease::{LeaseCore, LostReason};
use crate::metrics;
use crate::options::Renewal;
use crate::runtime::{Task, lock, sleep_until};
use crate::scripts::{self, Call, ExtendStatus, unexpected};
use crate::timing;
use crate::token::OwnerToken;
use crate::transport::Transport;
use crate::transport::shards::Shards;

mod entry;
mod renewal;
mod report;

use entry::Entry;
use renewal::{Group, gone_reason, renewal_ttl};
use report::{Recoveries, Suspects, declare_overdue, report_overdue};

/// Locks renewed per script call.
pub(crate) const BATCH: usize = 100;

/// An outage of renewals, reported once when it starts and once when it ends.
struct Outage {
    since: Instant,
    failed_calls: u64,
}

#[derive(Default)]
struct State {
    entries: HashMap<OwnerToken, Entry>,
    /// The task is meant to run (it clears this, under the lock, when it leaves).
    running: bool,
    /// When the task, asleep, will look again; a new lease due later needs no wake-up.
    planned_wake: Option<Instant>,
    outage: Option<Outage>,
}

/// The watchdog of one client. Cheap to clone (a handle on shared state).
#[derive(Clone)]
pub(crate) struct Watchdog {
    inner: Arc<Inner>,
}

/// The watchdog's state, shared with its task. The task holds it (and so the transport) only
/// while it has leases to renew.
struct Inner {
    state: Mutex<State>,
    task: Task,
    wake: tokio::sync::Notify,
    transport: Arc<Transport>,
    /// A cluster's shard map, to renew the locks of one shard in one call.
    shards: Option<Shards>,
}

impl std::fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.inner.state);
        f.debug_struct("Watchdog")
            .field("leases", &state.entries.len())
            .field("running", &(state.running && self.inner.task.is_running()))
            .finish()
    }
}

/// One renewal to send: the lease and the lease length to set.
struct Due {
    lease: Arc<LeaseCore>,
    ttl: Duration,
    /// Renew in a call of its slot: a shard call reached a node that did not serve it.
    by_slot: bool,
}

impl Watchdog {
    /// The watchdog of the client whose requests go through `transport`. It starts again in
    /// the current runtime when the connection is rebuilt after its runtime ended.
    pub(crate) fn new(transport: Arc<Transport>) -> Self {
        let inner = Arc::new(Inner {
            state: Mutex::default(),
            task: Task::default(),
            wake: tokio::sync::Notify::new(),
            shards: transport.slot().is_cluster().then(Shards::default),
            transport,
        });
        let weak = Arc::downgrade(&inner);
        inner.transport.slot().set_on_rebuild(Box::new(move || {
            if let Some(inner) = weak.upgrade() {
                Watchdog { inner }.ensure_running();
            }
        }));
        Self { inner }
    }

    /// Starts renewing `lease` (a watchdog lease just acquired).
    pub(crate) fn register(&self, lease: &Arc<LeaseCore>) {
        let Renewal::Watchdog { interval, max_hold } = lease.renewal else {
            return;
        };
        let next_due = lease.acquired_at + interval;
        let wake = {
            let mut state = lock(&self.inner.state);
            state.entries.insert(
                lease.token,
                Entry {
                    lease: Arc::downgrade(lease),
                    interval,
                    next_due,
                    failures: 0,
                    by_slot: false,
                    renew_until: max_hold.and_then(|m| lease.acquired_at.checked_add(m)),
                    winding_down: false,
                },
            );
            // Waking the task rescans every lease: only when this one is due before the task
            // looks again anyway (holding 10,000 locks, a wake per acquire made each acquire
            // cost ~1 ms of CPU, measured).
            let wake = state.planned_wake.is_some_and(|w| next_due < w);
            if self.start_locked(&mut state) {
                false
            } else {
                wake
            }
        };
        if wake {
            self.inner.wake.notify_one();
        }
        if !lock(&self.inner.state).running {
            tracing::warn!(lock = %lease.keys.name(), "dlock: no runtime for the watchdog; the lease will not be renewed");
        }
    }

    /// Starts the task in the current runtime if leases are registered and no task runs (its
    /// runtime ended, for instance).
    pub(crate) fn ensure_running(&self) {
        let mut state = lock(&self.inner.state);
        if !state.entries.is_empty() {
            self.start_locked(&mut state);
        }
    }

    /// Starts the task unless it runs; `true` if it was started now.
    fn start_locked(&self, state: &mut State) -> bool {
        if state.running && self.inner.task.is_running() {
            return false;
        }
        let inner = self.inner.clone();
        state.running = self.inner.task.start(move || run(inner));
        state.planned_wake = None;
        state.running
    }

    /// Stops renewing every lease and ends the task (client shutdown).
    pub(crate) fn stop(&self) {
        let mut state = lock(&self.inner.state);
        state.entries.clear();
        state.running = false;
        self.inner.task.abort();
    }
}

impl Inner {
    /// Renews the leases of `tokens` in the next round: a node that did not serve their keys
    /// answered, and the next round groups them by a fresh shard map (or by slot).
    fn retry_now(&self, tokens: &[OwnerToken]) {
        if tokens.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut state = lock(&self.state);
        for token in tokens {
            if let Some(entry) = state.entries.get_mut(token) {
                entry.next_due = now;
                entry.by_slot = true;
            }
        }
    }

    /// Stops renewing the lease of `token` (found gone or taken).
    fn deregister(&self, token: &OwnerToken) {
        lock(&self.state).entries.remove(token);
    }

    /// While a renewal round is awaited (Redis hangs: up to the command timeout), does what
    /// `collect` does between rounds except renewing: makes suspect the leases whose renewal
    /// has gone unacknowledged for an interval by `now`, and declares lost those past their
    /// safe-until (their `lost()` futures fire at that instant anyway; this is for their
    /// cancellation tokens and the log). Says when to look again: the next such instant.
    fn look_during_round(&self, now: Instant) -> Option<Instant> {
        let state = lock(&self.state);
        let in_outage = state.outage.is_some();
        let mut suspects = Suspects::default();
        let mut overdue = 0usize;
        let mut next: Option<Instant> = None;
        for entry in state.entries.values() {
            let Some(lease) = entry.lease.upgrade().filter(|l| !l.is_settled()) else {
                continue;
            };
            let safe_until = lease.safe_until();
            if now >= safe_until {
                overdue += usize::from(declare_overdue(&lease, in_outage));
                continue;
            }
            if lease.check_suspect(now) {
                suspects.add(&lease, now);
            }
            let at = lease.suspect_at().map_or(safe_until, |s| s.min(safe_until));
            next = Some(next.map_or(at, |n| n.min(at)));
        }
        drop(state);
        suspects.report();
        report_overdue(overdue);
        next
    }

    /// Picks the renewals due now, declares overdue leases lost, and says when to look again.
    /// `None` when nothing is left to watch (the task then ends).
    fn collect(&self, now: Instant) -> Option<(Vec<Due>, Instant)> {
        let mut state = lock(&self.state);
        let mut due = Vec::new();
        let mut wake: Option<Instant> = None;
        let mut overdue = 0usize;
        let mut suspects = Suspects::default();
        let in_outage = state.outage.is_some();
        state.entries.retain(|_, entry| {
            // Not `is_live_at`: a lease past its safe-until must reach `fire_lost` below, so
            // that its cancellation token and log line report the loss.
            let Some(lease) = entry.lease.upgrade().filter(|l| !l.is_settled()) else {
                return false;
            };
            let safe_until = lease.safe_until();
            if now >= safe_until {
                overdue += usize::from(declare_overdue(&lease, in_outage));
                return false;
            }
            if lease.check_suspect(now) {
                suspects.add(&lease, now);
            }
            let mut suspect_at = lease.suspect_at();
            if entry.is_due(now) {
                let (ttl, last) = renewal_ttl(&lease, entry.renew_until, now);
                if last {
                    // max_hold: this renewal (if any) lets the lease end at max_hold.
                    entry.winding_down = true;
                    lease.stop_renewal();
                }
                if let Some(ttl) = ttl {
                    lease.renewal_sent(now);
                    suspect_at = lease.suspect_at();
                    due.push(Due {
                        lease,
                        ttl,
                        by_slot: entry.by_slot,
                    });
                    // Tentative; replaced by the outcome of the renewal.
                    entry.next_due = now + entry.interval;
                }
            }
            let mut next = if entry.winding_down {
                safe_until
            } else {
                entry.next_due.min(safe_until)
            };
            if let Some(suspect_at) = suspect_at {
                next = next.min(suspect_at);
            }
            wake = Some(wake.map_or(next, |w| w.min(next)));
            true
        });
        suspects.report();
        report_overdue(overdue);
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

    /// Records the outcome of one renewal round (one result per script call): leases whose
    /// call failed retry with backoff. An outage starts with the first failed call while no
    /// lease was failing, and ends when no lease is failing any more — so a round that partly
    /// fails (a cluster with one master down: one call per slot) is one outage, not a
    /// start/end pair per call, and retries and on-time renewals alternating in separate
    /// rounds do not end it early.
    fn record_round(&self, calls: &[(Vec<OwnerToken>, Option<Error>)]) {
        let now = Instant::now();
        let mut state = lock(&self.state);
        let mut first_error = None;
        let mut failed_calls = 0u64;
        let mut failed = Vec::new();
        // The leases that failed in this round retry together, at the earliest of their retry
        // instants (each lease's own would scatter them over as many rounds as leases).
        let mut retry: Option<Instant> = None;
        for (tokens, error) in calls {
            for token in tokens {
                if let Some(entry) = state.entries.get_mut(token) {
                    if error.is_some() {
                        entry.failures = entry.failures.saturating_add(1);
                        let lease = entry.lease.upgrade();
                        if let Some(lease) = &lease {
                            lease.renewal_failed();
                        }
                        let safe_until = lease.map_or(now, |l| l.safe_until());
                        let at = entry.retry_at(now, safe_until);
                        retry = Some(retry.map_or(at, |r| r.min(at)));
                        failed.push(*token);
                    } else {
                        entry.failures = 0;
                        entry.by_slot = false;
                    }
                }
            }
            if let Some(error) = error {
                failed_calls += 1;
                first_error.get_or_insert(error);
            }
        }
        if let Some(retry) = retry {
            for token in &failed {
                if let Some(entry) = state.entries.get_mut(token) {
                    entry.next_due = retry;
                }
            }
        }
        if let Some(error) = first_error {
            match &mut state.outage {
                Some(outage) => {
                    outage.failed_calls += failed_calls;
                    tracing::debug!(%error, failed_calls, "dlock: lease renewals failed again");
                }
                None => {
                    tracing::warn!(
                        %error,
                        failed_calls,
                        calls = calls.len(),
                        leases = state.entries.len(),
                        "dlock: lease renewals failing; retrying with backoff (logged once \
                         until they work again)"
                    );
                    state.outage = Some(Outage {
                        since: now,
                        failed_calls,
                    });
                }
            }
        } else if !state.entries.values().any(|e| e.failures > 0)
            && let Some(outage) = state.outage.take()
        {
            tracing::warn!(
                after = ?now.saturating_duration_since(outage.since),
                failed_calls = outage.failed_calls,
                "dlock: lease renewals work again"
            );
        }
    }
}

/// The watchdog task of one client: renews what is due, sleeps until the next renewal or a
/// wake-up, and ends when no lease is left.
async fn run(inner: Arc<Inner>) {
    if let Some(shards) = &inner.shards {
        // The first renewal should not wait for (or, in an outage, go without) the map.
        shards.current(&inner.transport).await;
    }
    loop {
        let Some((due, wake)) = inner.collect(Instant::now()) else {
            return;
        };
        if !due.is_empty() {
            renew(&inner, due, wake).await;
            continue;
        }
        let notified = inner.wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        tokio::select! {
            () = notified => {}
            () = tokio::time::sleep_until(wake.into()) => {}
        }
    }
}

/// Sends the due renewals, [`BATCH`] locks per script call (of one shard, or failing a shard
/// map, one slot, on a cluster), all calls concurrently, and applies the answers. Leases whose
/// renewal goes unanswered for an interval meanwhile are made suspect at that instant (the
/// first such instant is no earlier than `look_at`, the task's next look).
async fn renew(inner: &Inner, due: Vec<Due>, look_at: Instant) {
    let transport = &inner.transport;
    let shards = match &inner.shards {
        Some(shards) => shards.current(transport).await,
        None => None,
    };
    let sent = Instant::now();
    let mut groups: HashMap<Group, Vec<Due>> = HashMap::new();
    for d in due {
        let key = &d.lease.keys.lock;
        let group = if inner.shards.is_none() {
            Group::Server
        } else {
            match shards
                .as_ref()
                .filter(|_| !d.by_slot)
                .and_then(|map| map.shard_of_key(key))
            {
                Some(shard) => Group::Shard(shard),
                None => Group::Slot(Slot::for_key(key.as_bytes())),
            }
        };
        groups.entry(group).or_default().push(d);
    }
    let chunks = groups
        .iter()
        .flat_map(|(group, dues)| dues.chunks(BATCH).map(move |chunk| (*group, chunk)));
    let calls = chunks.map(|(group, chunk)| async move {
        let declared = if matches!(group, Group::Shard(_)) {
            1
        } else {
            chunk.len()
        };
        let mut call = Call::new(&scripts::EXTEND, declared);
        for d in &chunk[..declared] {
            call.arg(&*d.lease.keys.lock);
        }
        for d in chunk {
            call.arg(d.lease.extend_owner()).arg(timing::millis(d.ttl));
        }
        for d in &chunk[declared..] {
            call.arg(&*d.lease.keys.lock);
        }
        let reply = transport.run(&call, "renew", "(watchdog batch)").await;
        let received = Instant::now();
        metrics::renewal_request(received - sent);
        let statuses = reply.and_then(|value| {
            ExtendStatus::decode_batch(&value, chunk.len())
                .ok_or_else(|| unexpected("renew", &value))
        });
        (chunk, statuses, received)
    });
    let round = join_all(calls);
    tokio::pin!(round);
    let mut look_at = Some(look_at);
    let replies = loop {
        tokio::select! {
            // An answer that is ready wins over the timer (a process that resumes from a
            // pause finds both ready: the renewal was answered, nothing is suspect).
            biased;
            replies = &mut round => break replies,
            () = sleep_until(look_at) => {
                look_at = inner.look_during_round(Instant::now());
            }
        }
    };
    let mut outcomes = Vec::new();
    let mut elsewhere = Vec::new();
    let mut recoveries = Recoveries::default();
    for (chunk, reply, received) in replies {
        let tokens: Vec<OwnerToken> = chunk.iter().map(|d| d.lease.token).collect();
        match reply {
            Ok(statuses) => {
                for (d, status) in chunk.iter().zip(statuses) {
                    match status {
                        Some(status) => {
                            if apply(inner, d, status, sent, received) {
                                recoveries.add(&d.lease);
                            }
                        }
                        None => elsewhere.push(d.lease.token),
                    }
                }
                outcomes.push((tokens, None));
            }
            Err(e) => outcomes.push((tokens, Some(e))),
        }
    }
    if let Some(shards) = &inner.shards
        && (!elsewhere.is_empty() || outcomes.iter().any(|(_, e)| e.is_some()))
    {
        shards.invalidate();
    }
    recoveries.report();
    inner.record_round(&outcomes);
    inner.retry_now(&elsewhere);
}

/// Applies one lease's renewal answer; `true` when it ended the lease's suspicion.
fn apply(inner: &Inner, due: &Due, status: ExtendStatus, sent: Instant, received: Instant) -> bool {
    let lease = &due.lease;
    match status {
        ExtendStatus::Extended | ExtendStatus::Asked => {
            metrics::renewed(lease.safe_until().saturating_duration_since(sent));
            if status == ExtendStatus::Asked {
                lease.mark_asked();
            }
            return lease.renewed(sent, due.ttl);
        }
        ExtendStatus::Gone => {
            lease.fire_lost(gone_reason(lease.safe_until(), received));
            inner.deregister(&lease.token);
        }
        ExtendStatus::Other => {
            lease.fire_lost(LostReason::TakenOver);
            inner.deregister(&lease.token);
        }
    }
    false
}
