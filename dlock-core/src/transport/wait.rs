//! How waiters learn that a lock is theirs, without polling.
//!
//! A waiter that finds the lock held joins the lock's FIFO queue in Redis (one entry per waiting
//! acquire call). The owner's release script hands the lock straight to the oldest entry and
//! publishes the grant on that entry's client channel, `<lock key>:wake:<client id>`. So:
//!
//! * **Subscribe first.** A client subscribes to its wake channel of a lock *before* its first
//!   queued attempt, so a grant can never be published into the void. One subscription per
//!   client per lock name, shared by every local waiter ([`Waiters::join`]); the last waiter to
//!   leave unsubscribes.
//! * **No thundering herd, no barging.** Exactly one waiter is woken per release, in arrival
//!   order across all processes, and it already owns the lock when it wakes: no second round trip.
//! * **Dead waiters are skipped.** A publish that reaches no subscriber tells the release script
//!   that the waiter's client is gone, so it moves on to the next entry.
//! * **Fallback timer.** Expiry publishes nothing and a message can be lost on a reconnect, so a
//!   waiter also retries after the holder's remaining lease (PTTL) and right after a disconnect.
//!   A waiter's retry after the timer that follows an attempt which found it queued, with
//!   nothing heard since, does not scan the queue for its entry (acquire.lua mode "again"): an
//!   entry leaves the queue without its waiter hearing of it only when the waiter was paused
//!   past a grant's lease or the queue was deleted by someone else, and the next retry scans.
//! * **Orphans.** A grant for a waiter that is no longer waiting (its acquire future was dropped)
//!   is handed to the client's orphan handler, which releases it in the background (handing the
//!   lock on to the next waiter).
//! * **Stale grants.** A grant can arrive late (the waiter's process was paused, the message sat
//!   in a socket) after its lease ran out and someone else took the lock. The waiter therefore
//!   checks a grant against the server time of its own latest attempt (see `kinds/queue.rs`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use redis::{PushInfo, PushKind, Value};
use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::runtime::{lock, spawn_detached};
use crate::scripts::wire::{self, Grant};
use crate::timing;
use crate::token::OwnerToken;
use crate::transport::conn::Conn;

/// Where one waiting acquire call receives its grant, or a nudge to retry now. (The token is
/// the slot's key in the registry, so only the rest of the grant is kept: a parked waiter's
/// memory is the point of this type.)
#[derive(Debug)]
pub(crate) struct Slot {
    /// Fence, server time (ms) and lease (ms) of the grant delivered and not yet taken. Fences
    /// are never zero, which keeps the `Option` free.
    grant: Mutex<Option<(NonZeroU64, i64, u64)>>,
    notify: Notify,
    /// The lock and queue entry of the waiter, for [`Waiters::queued`] (client shutdown).
    lock_key: Arc<str>,
    entry: Arc<str>,
}

impl Slot {
    fn deliver(&self, grant: Grant) {
        let Some(fence) = NonZeroU64::new(grant.fence) else {
            // A nudge (`<token> 0 0 0 1`, from `shared_limit.lua`): no grant, ask the server
            // again now.
            self.notify.notify_one();
            return;
        };
        let lease_ms = u64::try_from(grant.lease.as_millis()).unwrap_or(u64::MAX);
        *lock(&self.grant) = Some((fence, grant.server_ms, lease_ms));
        self.notify.notify_one();
    }

    /// Resolves after a grant was delivered or a retry was requested (a permit is kept if
    /// nobody is waiting yet, so no wake-up is lost).
    pub(crate) async fn notified(&self) {
        self.notify.notified().await;
    }

    /// The grant delivered to `token` (the slot's own), if one is waiting to be taken.
    fn take_grant(&self, token: OwnerToken) -> Option<Grant> {
        lock(&self.grant)
            .take()
            .map(|(fence, server_ms, lease_ms)| Grant {
                token,
                fence: fence.get(),
                server_ms,
                lease: Duration::from_millis(lease_ms),
            })
    }
}

/// A grant nobody waits for any more; the orphan handler releases it.
#[derive(Debug)]
pub(crate) struct Orphan {
    pub(crate) lock_key: String,
    pub(crate) token: OwnerToken,
}

/// What the client does with an orphan grant (release it in the background).
pub(crate) type OrphanHandler = Box<dyn Fn(Orphan) + Send + Sync>;

/// A waiter's queue entry, as [`Waiters::queued`] lists them.
#[derive(Debug)]
pub(crate) struct Queued {
    pub(crate) lock_key: Arc<str>,
    pub(crate) token: OwnerToken,
    pub(crate) entry: Arc<str>,
}

struct ChannelEntry {
    /// This client's wake channel for the lock (one copy per lock, not per waiter).
    channel: Arc<str>,
    /// Local waiters using the subscription (guarded by the map's mutex).
    users: usize,
    /// Serialises subscribe/unsubscribe of this channel; the connection generation it is
    /// subscribed on (0: not subscribed). A rebuilt connection has a new generation and none of
    /// the old one's subscriptions.
    state: Arc<tokio::sync::Mutex<u64>>,
}

/// The client-wide registry of waiting acquire calls and of wake-channel subscriptions.
pub(crate) struct Waiters {
    slots: Mutex<HashMap<OwnerToken, Arc<Slot>>>,
    /// Wake-channel subscriptions, by lock key (so the fast path can ask without formatting the
    /// channel name).
    channels: Mutex<HashMap<Arc<str>, ChannelEntry>>,
    on_orphan: OnceLock<OrphanHandler>,
    wake_suffix: String,
    /// Grants taken while a replaced connection may deliver them a second time.
    taken: Mutex<Taken>,
    /// Whether a connection was ever replaced (`taken` is used): until then a hand-off takes no
    /// lock for it.
    watching: AtomicBool,
}

/// The grants waiters took while a replaced connection is kept (`transport/conn/rotate.rs`):
/// it is still subscribed to the wake channels, so a grant may arrive on it too, after its
/// waiter took the first copy and left. Without this record that copy would look like an
/// orphan, and be released in the background under its new holder.
#[derive(Default)]
struct Taken {
    /// Until when grants are recorded (none while no connection was replaced).
    until: Option<Instant>,
    tokens: HashSet<OwnerToken>,
    order: VecDeque<OwnerToken>,
}

/// How many taken grants are remembered at most (the oldest are forgotten first).
const TAKEN_AT_MOST: usize = 4_096;

impl Taken {
    fn record(&mut self, token: OwnerToken) {
        match self.until {
            Some(until) if Instant::now() < until => {}
            Some(_) => *self = Self::default(),
            None => return,
        }
        if self.tokens.insert(token) {
            self.order.push_back(token);
        }
        while self.order.len() > TAKEN_AT_MOST {
            if let Some(old) = self.order.pop_front() {
                self.tokens.remove(&old);
            }
        }
    }
}

impl std::fmt::Debug for Waiters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiters")
            .field("waiting", &lock(&self.slots).len())
            .field("channels", &lock(&self.channels).len())
            .finish_non_exhaustive()
    }
}

impl Waiters {
    pub(crate) fn new(client_id: &str) -> Self {
        Self {
            slots: Mutex::default(),
            channels: Mutex::default(),
            on_orphan: OnceLock::new(),
            taken: Mutex::default(),
            watching: AtomicBool::new(false),
            // What follows the lock key in a wake channel's name (one definition: `wire`).
            wake_suffix: wire::wake_channel("", client_id),
        }
    }

    /// Sets what happens to grants nobody waits for (once, when the client is built).
    pub(crate) fn set_orphan_handler(&self, handler: OrphanHandler) {
        let _ = self.on_orphan.set(handler);
    }

    /// Handles one RESP3 push message from the connection. Called on the connection's task, so
    /// it only does map look-ups and non-blocking sends.
    pub(crate) fn on_push(&self, info: PushInfo) {
        match info.kind {
            PushKind::Message | PushKind::SMessage => self.on_message(&info.data),
            PushKind::Disconnection => {
                // Grants published while we reconnect are lost: every waiter retries now.
                for slot in lock(&self.slots).values() {
                    slot.notify.notify_one();
                }
            }
            _ => {}
        }
    }

    fn on_message(&self, data: &[Value]) {
        let (Some(Value::BulkString(channel)), Some(Value::BulkString(payload))) =
            (data.first(), data.get(1))
        else {
            return;
        };
        // Grants are published only on this client's wake channels. A message on another
        // channel is not one: it reaches the waiters when a listener of the channel
        // (`ext::subscribe`, the scheduler's `run_now` wake-ups) has just left it and the
        // server has not taken the unsubscription yet — at every graceful shutdown of a
        // scheduler whose jobs other replicas still announce (issue #51). Not a fault.
        let Some(lock_key) = std::str::from_utf8(channel)
            .ok()
            .and_then(|c| c.strip_suffix(self.wake_suffix.as_str()))
        else {
            tracing::debug!(
                channel = %String::from_utf8_lossy(channel),
                "dlock: a message on a channel no listener or waiter has now (it was just left)"
            );
            return;
        };
        let Some(grant) = Grant::parse(payload) else {
            tracing::warn!(%lock_key, "dlock: ignoring a malformed message on a wake channel");
            return;
        };
        let slot = lock(&self.slots).get(&grant.token).cloned();
        match slot {
            Some(slot) => slot.deliver(grant),
            None if lock(&self.taken).tokens.contains(&grant.token) => {
                tracing::debug!(
                    "dlock: a grant delivered twice (a replaced connection is kept); ignored"
                );
            }
            None => {
                if let Some(handler) = self.on_orphan.get() {
                    handler(Orphan {
                        lock_key: lock_key.to_owned(),
                        token: grant.token,
                    });
                }
            }
        }
    }

    /// Wakes a waiter of this client that a release made by this client just handed the lock to
    /// (`grant` as returned by `release.lua`), without waiting for the same news to travel
    /// through Redis's pub/sub. A grant for another process's waiter is ignored here: the
    /// published message reaches it.
    pub(crate) fn deliver_local(&self, grant: &[u8]) {
        if let Some(grant) = Grant::parse(grant)
            && let Some(slot) = lock(&self.slots).get(&grant.token).cloned()
        {
            slot.deliver(grant);
        }
    }

    /// Registers a waiting acquire call (`entry` is its queue entry on `lock_key`); the returned
    /// guard unregisters it.
    pub(crate) fn register(
        self: &Arc<Self>,
        token: OwnerToken,
        lock_key: &Arc<str>,
        entry: Arc<str>,
    ) -> Registration {
        let slot = Arc::new(Slot {
            grant: Mutex::new(None),
            notify: Notify::new(),
            lock_key: lock_key.clone(),
            entry,
        });
        lock(&self.slots).insert(token, slot.clone());
        Registration {
            waiters: self.clone(),
            token,
            slot,
        }
    }

    /// Whether this client is subscribed to the wake channel of `lock_key` on the connection of
    /// `generation` right now (a queued attempt can then be sent without subscribing first).
    pub(crate) fn is_subscribed(&self, lock_key: &str, generation: u64) -> bool {
        let channels = lock(&self.channels);
        if channels.is_empty() {
            return false;
        }
        channels.get(lock_key).is_some_and(|entry| {
            entry
                .state
                .try_lock()
                .is_ok_and(|subscribed| *subscribed == generation)
        })
    }

    /// Whether a waiting acquire call of this client waits for the lock `lock_key` now (it uses
    /// the lock's wake channel): a release of that lock is then likely to find it flagged.
    pub(crate) fn waits_here(&self, lock_key: &str) -> bool {
        let channels = lock(&self.channels);
        !channels.is_empty() && channels.get(lock_key).is_some_and(|entry| entry.users > 0)
    }

    /// Every waiting acquire call's queue entry.
    pub(crate) fn queued(&self) -> Vec<Queued> {
        lock(&self.slots)
            .iter()
            .map(|(token, slot)| Queued {
                lock_key: slot.lock_key.clone(),
                token: *token,
                entry: slot.entry.clone(),
            })
            .collect()
    }

    /// Wakes every waiting acquire call (it then looks at why: the client is shutting down).
    pub(crate) fn wake_all(&self) {
        for slot in lock(&self.slots).values() {
            slot.notify.notify_one();
        }
    }

    /// After a Sentinel client moved to another master (`conn`, the connection of
    /// `generation`), which knows none of the old master's subscriptions: subscribes there every
    /// wake channel that local waiters use, then wakes every waiter. A waiter's queue entry and
    /// a grant published meanwhile may be lost with the old master, so each one asks the new
    /// master at once (its attempt queues it again) instead of napping until the holder's lease
    /// ends. Runs in the background; a channel that cannot be subscribed now is subscribed by
    /// the next waiter that joins it.
    ///
    /// The old connection may still deliver grants for `watch` (a standalone client keeps it,
    /// `transport/conn/rotate.rs`): grants taken until then are remembered, so that a second
    /// copy is not released as an orphan.
    pub(crate) fn resubscribe(self: &Arc<Self>, conn: Conn, generation: u64, watch: Duration) {
        {
            self.watching.store(true, Ordering::Release);
            let mut taken = lock(&self.taken);
            let until = Instant::now() + watch;
            taken.until = Some(taken.until.map_or(until, |u| u.max(until)));
        }
        let waiters = self.clone();
        spawn_detached(async move {
            let channels: Vec<_> = lock(&waiters.channels)
                .values()
                .map(|entry| (entry.state.clone(), entry.channel.clone()))
                .collect();
            for (state, channel) in channels {
                let mut subscribed = state.lock().await;
                if *subscribed == 0 || *subscribed >= generation {
                    continue;
                }
                match conn.subscribe(&channel).await {
                    Ok(()) => *subscribed = generation,
                    Err(e) => {
                        tracing::debug!(%channel, error = %e, "dlock: cannot subscribe on the new master yet");
                    }
                }
            }
            waiters.wake_all();
        });
    }

    /// The wake channels this client is subscribed to, forgetting them (client shutdown).
    pub(crate) fn take_channels(&self) -> Vec<Arc<str>> {
        lock(&self.channels)
            .drain()
            .map(|(_, entry)| entry.channel)
            .collect()
    }

    /// Joins the users of `lock_key`'s wake channel, subscribing first if this is the first
    /// local waiter. A waiting acquire registers ([`Waiters::register`]), then joins, then
    /// queues: a grant can then never be published before this client listens. (Two calls, not
    /// one: a future that kept the registration's arguments across the subscribe made every
    /// waiting task's future 104 bytes larger.)
    ///
    /// # Cancel safety
    /// Cancel safe: the membership is counted before the subscribe is awaited and released
    /// when the future is dropped; the last member to leave unsubscribes unconditionally, which
    /// also covers a subscribe that was sent but never confirmed.
    pub(crate) async fn join(
        self: &Arc<Self>,
        (conn, generation): (&Conn, u64),
        lock_key: &Arc<str>,
    ) -> Result<Membership> {
        let (state, channel) = {
            let mut channels = lock(&self.channels);
            let entry = channels
                .entry(lock_key.clone())
                .or_insert_with(|| ChannelEntry {
                    channel: format!("{lock_key}{}", self.wake_suffix).into(),
                    users: 0,
                    state: Arc::default(),
                });
            entry.users += 1;
            (entry.state.clone(), entry.channel.clone())
        };
        let membership = Membership {
            waiters: self.clone(),
            conn: conn.clone(),
            lock_key: lock_key.clone(),
        };
        let mut subscribed = state.lock().await;
        if *subscribed != generation {
            conn.subscribe(&channel)
                .await
                .map_err(|e| refused_subscription(&channel, e))?;
            *subscribed = generation;
        }
        Ok(membership)
    }

    /// Runs after the last local waiter of `channel` left: unsubscribes unless someone joined
    /// again meanwhile, then forgets the channel.
    async fn cleanup(self: Arc<Self>, conn: Conn, lock_key: Arc<str>) {
        let Some((state, channel)) = lock(&self.channels)
            .get(&lock_key)
            .map(|e| (e.state.clone(), e.channel.clone()))
        else {
            return;
        };
        let mut subscribed = state.lock().await;
        if lock(&self.channels)
            .get(&lock_key)
            .is_none_or(|entry| entry.users > 0)
        {
            return;
        }
        if let Err(e) = conn.unsubscribe(&channel).await {
            // Redis is unreachable: the subscription may come back with the reconnect. That is
            // harmless (grants for unknown tokens go to the janitor) and the next waiter to leave
            // this channel unsubscribes again.
            tracing::debug!(%channel, error = %e, "dlock: unsubscribe failed");
        }
        *subscribed = 0;
        let mut channels = lock(&self.channels);
        if channels
            .get(&lock_key)
            .is_some_and(|entry| entry.users == 0)
        {
            channels.remove(&lock_key);
        }
    }

    #[cfg(test)]
    fn waiting(&self) -> usize {
        lock(&self.slots).len()
    }
}

/// A waiting acquire call's entry in [`Waiters`]; unregisters on drop.
#[derive(Debug)]
pub(crate) struct Registration {
    waiters: Arc<Waiters>,
    token: OwnerToken,
    slot: Arc<Slot>,
}

impl Registration {
    /// The waiter's queue entry.
    pub(crate) fn entry(&self) -> &Arc<str> {
        &self.slot.entry
    }

    /// The grant delivered to this waiter, if one is waiting to be taken.
    pub(crate) fn take_grant(&self) -> Option<Grant> {
        let grant = self.slot.take_grant(self.token)?;
        if self.waiters.watching.load(Ordering::Acquire) {
            lock(&self.waiters.taken).record(self.token);
        }
        Some(grant)
    }

    /// Completes when something was delivered to this waiter: a grant, or a nudge (a
    /// reconnect, a shutdown).
    ///
    /// # Cancel safety
    /// Cancel safe: a delivery not yet seen stays in the slot.
    pub(crate) async fn notified(&self) {
        self.slot.notified().await;
    }

    /// The grant delivered to this waiter, if there is one and it can be trusted after the
    /// attempt `seen` that found the lock taken ([`grant_safe_until`]), with its safe-until
    /// instant. `None` for a nudge without a grant, or a grant that came too late: then ask the
    /// server again.
    pub(crate) fn trusted_grant(&self, seen: Seen) -> Option<(Grant, Instant)> {
        let grant = self.take_grant()?;
        let safe_until = grant_safe_until(&grant, seen, Instant::now());
        if safe_until.is_none() {
            tracing::debug!(
                fence = grant.fence,
                "dlock: a grant arrived too late to trust; asking the server"
            );
        }
        Some(grant).zip(safe_until)
    }
}

/// How long a waiting acquire sleeps after an attempt that found no room, unless a grant comes
/// first: until the holder's lease ends (`until_free`, at least [`MIN_NAP`]), and no later than
/// the caller's `deadline`.
pub(crate) fn nap(until_free: Duration, deadline: Option<Instant>) -> Duration {
    let nap = until_free.max(MIN_NAP);
    deadline.map_or(nap, |d| {
        nap.min(d.saturating_duration_since(Instant::now()))
    })
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.waiters.slots).remove(&self.token);
    }
}

/// One local waiter's share of a wake-channel subscription; leaving is on drop.
pub(crate) struct Membership {
    waiters: Arc<Waiters>,
    conn: Conn,
    lock_key: Arc<str>,
}

impl std::fmt::Debug for Membership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Membership")
            .field("lock", &self.lock_key)
            .finish_non_exhaustive()
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let last = {
            let mut channels = lock(&self.waiters.channels);
            channels.get_mut(&self.lock_key).is_some_and(|entry| {
                entry.users = entry.users.saturating_sub(1);
                entry.users == 0
            })
        };
        if !last {
            return;
        }
        // Without a runtime the subscription stays until the connection closes; it is harmless
        // (grants for unknown tokens are released as orphans).
        spawn_detached(
            self.waiters
                .clone()
                .cleanup(self.conn.clone(), self.lock_key.clone()),
        );
    }
}

/// The shortest pause between two attempts of a waiting acquire (when the holder's remaining
/// lease is about to run out).
const MIN_NAP: Duration = Duration::from_millis(1);

/// What a waiting acquire's latest attempt saw: sent at `sent` (local clock), it ran at
/// `server_ms` (server clock) and found the lock held by another owner.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seen {
    pub(crate) sent: Instant,
    pub(crate) server_ms: i64,
}

/// The last instant at which a hand-off received while waiting may be used, judged against the
/// waiter's latest attempt `seen` (which found the lock held by another owner); `None` when it
/// cannot be trusted without asking the server again:
///
/// * granted before that attempt ran (by the server's clock): the lock went to someone else
///   since, so the grant is stale. (A grant in the same millisecond came after the attempt: had
///   it come before, the attempt would have found the lock the caller's own — a lease cannot
///   run out and be taken by someone else within a millisecond, leases being at least 10 ms.)
/// * less than half its lease left by a conservative count (the waiter was slow or paused).
///
/// The grant happened at local time `seen.sent + (grant − seen)` or later (the attempt ran no
/// earlier than it was sent), and no later than now (it has arrived).
fn grant_safe_until(grant: &Grant, seen: Seen, now: Instant) -> Option<Instant> {
    let after = grant.server_ms.checked_sub(seen.server_ms)?;
    let after = u64::try_from(after).ok()?;
    let start = seen
        .sent
        .checked_add(Duration::from_millis(after))?
        .min(now);
    let safe_until = timing::safe_until(start, grant.lease, grant.lease);
    (safe_until > now + grant.lease / 2).then_some(safe_until)
}

/// The error of a refused subscription to the wake channel `channel`: a channel the user's ACL
/// does not allow is named, with the key prefix in use (the channel starts with it) and the
/// pattern to grant.
fn refused_subscription(channel: &str, error: redis::RedisError) -> Error {
    const CONTEXT: &str = "subscribe to the wake channel";
    let plain = Error::from_redis(CONTEXT, error.clone());
    let text = error.to_string();
    // The refusal's code is `NOPERM` everywhere; which right it lacked is only in its text:
    // Redis 7 "… access one of the channels …", Valkey 8.1/9.1 "No permissions to access a
    // channel".
    let lower = text.to_lowercase();
    if plain.kind() != crate::error::ErrorKind::Permission
        || !(lower.contains("one of the channels") || lower.contains("access a channel"))
    {
        return plain;
    }
    let prefix = channel.split('{').next().unwrap_or_default();
    let why = format!(
        "{text}; the Redis user's ACL allows no channel `{channel}`: this client's key prefix \
         is `{prefix}`, and its wake channels are named like its keys; grant `&{prefix}*`"
    );
    Error::explained(CONTEXT, crate::error::ErrorKind::Permission, &why, error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiters() -> (Arc<Waiters>, Arc<Mutex<Vec<Orphan>>>) {
        let waiters = Arc::new(Waiters::new("c0ffee"));
        let orphans = Arc::new(Mutex::new(Vec::new()));
        let sink = orphans.clone();
        waiters.set_orphan_handler(Box::new(move |orphan| lock(&sink).push(orphan)));
        (waiters, orphans)
    }

    fn register(waiters: &Arc<Waiters>, token: OwnerToken) -> Registration {
        waiters.register(token, &Arc::from("dlock:{a}"), Arc::from("entry"))
    }

    #[test]
    fn grants_parse_and_reach_their_slot() {
        let (waiters, orphans) = waiters();
        let token = OwnerToken::generate().unwrap();
        let registration = register(&waiters, token);
        assert_eq!(waiters.waiting(), 1);
        let queued = waiters.queued();
        assert_eq!(queued.len(), 1);
        assert_eq!(
            (&*queued[0].lock_key, &*queued[0].entry),
            ("dlock:{a}", "entry")
        );

        let payload = format!("{} 17 1700000000000 2500 1", token.hex().as_str());
        let message = |payload: &str| PushInfo {
            kind: PushKind::Message,
            data: vec![
                Value::BulkString(b"dlock:{a}:wake:c0ffee".to_vec()),
                Value::BulkString(payload.as_bytes().to_vec()),
            ],
        };
        waiters.on_push(message(&payload));
        let grant = registration.take_grant().unwrap();
        assert_eq!(grant.fence, 17);
        assert_eq!(grant.server_ms, 1_700_000_000_000);
        assert_eq!(grant.lease, Duration::from_millis(2500));

        // Once the waiter is gone the grant becomes an orphan, released by the client.
        drop(registration);
        assert_eq!(waiters.waiting(), 0);
        waiters.on_push(message(&payload));
        let orphan = lock(&orphans).pop().unwrap();
        assert_eq!(orphan.lock_key, "dlock:{a}");
        assert_eq!(orphan.token, token);

        // Garbage is ignored, not a panic.
        waiters.on_push(message("not a grant"));
        assert!(lock(&orphans).is_empty());

        // A message on a channel that is not one of this client's wake channels (a listened
        // channel just left) is no grant, even if it reads like one.
        waiters.on_push(PushInfo {
            kind: PushKind::Message,
            data: vec![
                Value::BulkString(b"dlock:{sched:tick}:wake".to_vec()),
                Value::BulkString(payload.as_bytes().to_vec()),
            ],
        });
        assert!(lock(&orphans).is_empty());
    }

    /// While a replaced connection is kept (`transport/conn/rotate.rs`), a grant may arrive on
    /// it too, after its waiter took the first copy and left: that copy is no orphan (releasing
    /// it would release the new holder's lock). A grant nobody took still is one.
    #[tokio::test]
    async fn a_second_copy_of_a_taken_grant_is_not_an_orphan_while_an_old_connection_is_kept() {
        let (waiters, orphans) = waiters();
        waiters.resubscribe(
            Conn::Unresolved(Arc::from("test")),
            2,
            Duration::from_secs(60),
        );
        let message = |token: OwnerToken| PushInfo {
            kind: PushKind::Message,
            data: vec![
                Value::BulkString(b"dlock:{a}:wake:c0ffee".to_vec()),
                Value::BulkString(
                    format!("{} 17 1700000000000 2500 1", token.hex().as_str()).into_bytes(),
                ),
            ],
        };
        let token = OwnerToken::generate().unwrap();
        let registration = register(&waiters, token);
        waiters.on_push(message(token));
        assert_eq!(registration.take_grant().unwrap().fence, 17);
        drop(registration);
        waiters.on_push(message(token));
        assert!(
            lock(&orphans).is_empty(),
            "the second copy was released as an orphan"
        );

        let abandoned = OwnerToken::generate().unwrap();
        waiters.on_push(message(abandoned));
        assert_eq!(lock(&orphans).pop().unwrap().token, abandoned);
    }

    #[test]
    fn a_local_hand_off_reaches_only_local_waiters() {
        let (waiters, orphans) = waiters();
        let token = OwnerToken::generate().unwrap();
        let registration = register(&waiters, token);
        waiters.deliver_local(format!("{} 9 1700000000000 100", token.hex().as_str()).as_bytes());
        assert_eq!(registration.take_grant().unwrap().fence, 9);
        // Another process's waiter: not ours, and not an orphan either (its own client releases
        // nothing; the published message reaches it).
        let other = OwnerToken::generate().unwrap();
        waiters.deliver_local(format!("{} 10 1700000000000 100", other.hex().as_str()).as_bytes());
        assert!(lock(&orphans).is_empty());
        waiters.deliver_local(b"garbage");
    }

    // Trusting a grant (grant_safe_until).

    fn grant(server_ms: i64, lease_ms: u64) -> Grant {
        Grant {
            token: crate::token::OwnerToken::generate().unwrap(),
            fence: 7,
            server_ms,
            lease: Duration::from_millis(lease_ms),
        }
    }

    #[test]
    fn a_fresh_grant_is_counted_from_its_server_time() {
        let now = Instant::now();
        let seen = Seen {
            sent: now - Duration::from_millis(100),
            server_ms: 1_000,
        };
        // Granted 60 ms after the attempt ran: the lease started no earlier than 40 ms ago.
        let safe_until = grant_safe_until(&grant(1_060, 10_000), seen, now).unwrap();
        let expected = now - Duration::from_millis(40) + Duration::from_millis(10_000 - 102);
        assert_eq!(safe_until, expected);
    }

    #[test]
    fn grants_older_than_the_latest_look_or_mostly_spent_are_not_trusted() {
        let now = Instant::now();
        let seen = Seen {
            sent: now - Duration::from_millis(10),
            server_ms: 5_000,
        };
        // Granted before an attempt that saw another holder: stale.
        assert_eq!(grant_safe_until(&grant(4_999, 30_000), seen, now), None);
        // In the same millisecond: after it (see the function's docs).
        assert!(grant_safe_until(&grant(5_000, 30_000), seen, now).is_some());
        // A waiter paused past the lease: the grant's lease has run out by now.
        let paused = Seen {
            sent: now - Duration::from_secs(5),
            server_ms: 5_000,
        };
        assert_eq!(grant_safe_until(&grant(5_010, 1_000), paused, now), None);
        // More than half of it left: trusted.
        assert!(grant_safe_until(&grant(5_010, 1_000), seen, now).is_some());
    }
}
