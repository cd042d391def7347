//! The one wait loop of every lock kind that queues (the mutex, and the shared kinds: the
//! semaphore and the read-write lock), with what differs between them as a small strategy,
//! [`Queued`]: the uncontended first try, the queue entry, one ask of the kind's script and
//! what its reply means.
//!
//! The loop: one try that does not queue (skipped when this client already listens on the
//! lock's wake channel: other local requests wait, so this one most likely waits too); then
//! subscribe first and queue second, so a grant is never published before the waiter listens;
//! then ask the server, and nap until a grant is pushed (`transport/wait.rs`) or the fallback
//! timer (bounded by the lease left) runs out, and ask again. A pushed grant is only trusted
//! when it is newer than the waiter's latest look at the lock and has most of its lease left;
//! otherwise the server is asked again. The last ask (the wait is over) leaves the queue
//! whatever its outcome. Dropped at any point, the future leaves the queue and gives back a
//! grant that came meanwhile, in the background ([`ReleaseOnDrop`]).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::context::Context;
use crate::error::Result;
use crate::key::LockKeys;
use crate::metrics;
use crate::options::LockSettings;
use crate::timing;
use crate::token::OwnerToken;
use crate::transport::ReleaseOnDrop;
use crate::transport::wait::{self, Membership, Registration, Seen};

/// How an ask treats the queue: the `mode` argument of `acquire.lua` and `shared_acquire.lua`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// One attempt that does not queue (the shared kinds' first try; the mutex's is a `SET`).
    Once,
    /// Queue the caller if it must wait (unless its entry is queued already: a scan).
    Wait,
    /// The re-ask after the fallback timer that follows a `Wait` or `Join` which found the
    /// caller queued, with nothing heard since: the entry is trusted to be queued still, and
    /// appended only to an empty queue (no scan).
    Again,
    /// The first ask of a waiting request: its entry is new, so it queues without a scan; a
    /// resend of it finds the mark of its first run and scans instead, so the request is never
    /// queued twice (issue #44).
    Join,
    /// The wait is over: leave the queue whatever the outcome.
    Last,
}

impl Mode {
    /// The mode as the scripts read it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Once => "",
            Self::Wait => "wait",
            Self::Again => "again",
            Self::Join => "join",
            Self::Last => "last",
        }
    }
}

/// What one ask of the kind's script answered.
pub(crate) enum Answer<F> {
    /// The request holds the lock now, with `fence`, and `pttl` of lease left.
    Granted { fence: F, pttl: Duration },
    /// The request must wait: the lock is free in `until_free` at the latest (the fallback
    /// timer's bound), as the server saw it at `server_ms`.
    Queued {
        until_free: Duration,
        server_ms: i64,
    },
}

/// A request just granted in Redis, before it becomes a lease; `F`: its fence (the mutex's is
/// issued on demand, so optional).
pub(crate) struct Granted<F> {
    pub(crate) token: OwnerToken,
    pub(crate) fence: F,
    pub(crate) safe_until: Instant,
    pub(crate) registration: Option<Registration>,
}

impl<F> Granted<F> {
    /// Granted by a reply to a request sent at `sent` that gave `pttl` of a `ttl` lease.
    pub(crate) fn new(
        token: OwnerToken,
        fence: F,
        sent: Instant,
        pttl: Duration,
        ttl: Duration,
        registration: Option<Registration>,
    ) -> Self {
        Self {
            token,
            fence,
            safe_until: timing::safe_until(sent, pttl, ttl),
            registration,
        }
    }
}

/// What a queueing kind brings to [`wait_in_line`]. Each request future it returns is boxed by
/// the loop: a waiting task keeps the loop's future for as long as it waits, and would
/// otherwise carry the largest request inline.
pub(crate) trait Queued: Sync {
    /// The fence a grant carries (a pushed grant's always has one).
    type Fence: From<u64> + Send;
    /// What the kind watches while its request waits (the mutex: a wait for its own hold).
    type Watch: Send;

    fn ctx(&self) -> &Arc<Context>;
    fn keys(&self) -> &LockKeys;
    fn settings(&self) -> &LockSettings;

    /// The uncontended try, which does not queue: `Some((fence, pttl))` when it took the lock.
    fn try_once(
        &self,
        token: OwnerToken,
    ) -> impl Future<Output = Result<Option<(Self::Fence, Duration)>>> + Send;

    /// The request's queue entry (see `scripts/wire.rs`).
    fn queue_entry(&self, token: OwnerToken) -> Arc<str>;

    /// One ask of the kind's script in `mode`, with the request's queue `entry`.
    fn ask(
        &self,
        token: OwnerToken,
        mode: Mode,
        entry: &str,
    ) -> impl Future<Output = Result<Answer<Self::Fence>>> + Send;

    /// Called on every answer that keeps the request waiting.
    fn still_waiting(&self, watch: &mut Self::Watch);
}

/// Waits in the lock's queue until granted (`Ok(Some)`) or `deadline` passes (`Ok(None)`:
/// nothing is held or queued then; `None`: no deadline; one already passed: one try that does
/// not queue).
///
/// Not an `async fn`: it would keep its arguments twice in its state (as captured and as
/// locals), for as long as the caller waits. For the same reason the kind's parts are asked for
/// where they are used, not kept in locals across the waits.
///
/// # Cancel safety
/// Dropping the future leaves the queue and gives back a grant that came meanwhile, in the
/// background.
#[expect(
    clippy::manual_async_fn,
    reason = "an async fn keeps its arguments twice in its state"
)]
pub(crate) fn wait_in_line<K: Queued + Send>(
    kind: K,
    deadline: Option<Instant>,
    mut watch: K::Watch,
) -> impl Future<Output = Result<Option<Granted<K::Fence>>>> + Send {
    async move {
        let token = kind.ctx().tokens.next();
        let mut cleanup = ReleaseOnDrop::new(&kind.ctx().transport, kind.keys(), token);
        let (registration, _membership) =
            match join_line(&kind, token, deadline, &mut cleanup).await? {
                Joined::Settled(granted) => return Ok(granted),
                Joined::InLine(registration, membership) => (registration, membership),
            };
        cleanup.arm(registration.entry().clone());
        let _waiting = metrics::Waiting::start(kind.keys().kind().metric_name(), label(&kind));
        // Since when the asks fail (a Sentinel client rides out a failover).
        let mut failing = None;
        // The mode of the next ask unless the wait is over: `Join` first (the entry is new: no
        // scan); `Again` (no scan) once after an ask that found this request queued with
        // nothing heard since; `Wait` (a scan) otherwise.
        let mut next = Mode::Join;
        loop {
            if kind.ctx().is_closed() {
                return Err(kind.ctx().closed_error(kind.keys().name()));
            }
            let last = deadline.is_some_and(|d| Instant::now() >= d);
            let mode = if last { Mode::Last } else { next };
            next = Mode::Wait;
            let sent = Instant::now();
            // A block, so that the answer is gone before the nap: the nap's state is the
            // largest the future keeps.
            let (seen, until_free) = {
                let asked = ask(
                    &kind,
                    token,
                    mode,
                    registration.entry(),
                    deadline,
                    &mut failing,
                );
                let Some(answer) = asked.await? else {
                    continue;
                };
                match answer {
                    Answer::Granted { fence, pttl } => {
                        cleanup.disarm();
                        let (ttl, registration) = (kind.settings().ttl, Some(registration));
                        let granted = Granted::new(token, fence, sent, pttl, ttl, registration);
                        return Ok(Some(granted));
                    }
                    Answer::Queued { .. } if last => {
                        cleanup.disarm();
                        return Ok(None);
                    }
                    Answer::Queued {
                        until_free,
                        server_ms,
                    } => {
                        kind.still_waiting(&mut watch);
                        if matches!(mode, Mode::Wait | Mode::Join) {
                            next = Mode::Again;
                        }
                        (Seen { sent, server_ms }, until_free)
                    }
                }
            };
            // Without a trusted grant (the nap is over, a nudge, a grant that came too late):
            // ask the server again.
            tokio::select! {
                () = registration.notified() => {
                    // A grant that came too late, a nudge, a disconnection: the entry may be
                    // gone.
                    next = Mode::Wait;
                    if let Some((grant, safe_until)) = registration.trusted_grant(seen) {
                        cleanup.disarm();
                        return Ok(Some(Granted {
                            token,
                            fence: grant.fence.into(),
                            safe_until,
                            registration: Some(registration),
                        }));
                    }
                }
                () = tokio::time::sleep(wait::nap(until_free, deadline)) => {
                    metrics::fallback_wake(kind.keys().kind().metric_name(), label(&kind));
                }
            }
        }
    }
}

/// Where [`wait_in_line`] stands once it tried to skip the line or joined it.
enum Joined<F> {
    /// Done before queueing: granted by the uncontended try, or the wait was already over
    /// (`None`).
    Settled(Option<Granted<F>>),
    /// Listening on the lock's wake channel, with an entry to queue.
    InLine(Registration, Membership),
}

/// The start of [`wait_in_line`]: one try that does not queue, unless this client already
/// listens on the lock's wake channel (other local requests wait, so this one most likely
/// waits too); then subscribe, before anything is queued, so that a grant can never be
/// published before the waiter listens. `cleanup` is disarmed where nothing is left to clean.
///
/// The connection is scoped to this function: the membership keeps its own handle, and this
/// one would only sit in the waiting future.
async fn join_line<K: Queued>(
    kind: &K,
    token: OwnerToken,
    deadline: Option<Instant>,
    cleanup: &mut ReleaseOnDrop<'_>,
) -> Result<Joined<K::Fence>> {
    let (conn, generation) = match kind.ctx().transport.conn() {
        Ok(conn) => conn,
        Err(e) => {
            // Nothing was sent: nothing to release.
            cleanup.disarm();
            return Err(e);
        }
    };
    let waiters = &kind.ctx().transport.waiters;
    if !waiters.is_subscribed(&kind.keys().lock, generation) {
        let sent = Instant::now();
        let first = Box::pin(kind.try_once(token)).await?;
        cleanup.disarm();
        if let Some((fence, pttl)) = first {
            let ttl = kind.settings().ttl;
            let granted = Granted::new(token, fence, sent, pttl, ttl, None);
            return Ok(Joined::Settled(Some(granted)));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(Joined::Settled(None));
        }
    }
    let registration = waiters.register(token, &kind.keys().lock, kind.queue_entry(token));
    // Boxed, as the asks: the subscription's state lives only while it is made.
    let joined = waiters.join((&conn, generation), &kind.keys().lock);
    let membership = match Box::pin(joined).await {
        Ok(membership) => membership,
        Err(e) => {
            let again = kind
                .ctx()
                .transport
                .join_again(e, &kind.keys().lock, deadline);
            Box::pin(again).await?
        }
    };
    Ok(Joined::InLine(registration, membership))
}

/// One ask of the kind's script in `mode`. An error that a Sentinel client rides out (a
/// failover, `failing` since when) is waited out: `None`, ask again.
async fn ask<K: Queued>(
    kind: &K,
    token: OwnerToken,
    mode: Mode,
    entry: &str,
    deadline: Option<Instant>,
    failing: &mut Option<Instant>,
) -> Result<Option<Answer<K::Fence>>> {
    match Box::pin(kind.ask(token, mode, entry)).await {
        Ok(answer) => {
            *failing = None;
            Ok(Some(answer))
        }
        Err(e) => {
            let since = *failing.get_or_insert_with(Instant::now);
            let transport = &kind.ctx().transport;
            if transport.rides_out(&e, deadline, since) {
                Box::pin(transport.ride_out(deadline)).await;
                return Ok(None);
            }
            Err(e)
        }
    }
}

/// The kind's label, as metrics name it.
fn label<K: Queued>(kind: &K) -> &str {
    kind.settings().label.as_deref().unwrap_or_default()
}
