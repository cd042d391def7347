//! [`Semaphore`]: a distributed counting semaphore with leased, fenced permits, granted in strict
//! FIFO order (`scripts/shared.lua`, `shared_acquire.lua`, `shared_release.lua`).
//!
//! * **One acquisition, one holder.** `acquire(n)` takes `n` permits as one holder with its own
//!   token, lease, fencing token and [`Permit`] guard, whatever `n` is; released together.
//! * **Leased.** Every holder's permits come back at the end of its own lease if it crashes: a
//!   fixed lease (the default, as for a mutex) is the permit-expirable semaphore;
//!   [`crate::MutexOptions::watchdog`] renews live ones in the client's renewal batches. Nobody
//!   else's lease is touched when one ends.
//! * **Strict FIFO.** Waiters are served from the head of one queue while their request fits: a
//!   request for many permits is never starved by a stream of small ones, and `n` above the limit
//!   is an error at once (it could never be served).
//! * **Pushed, not polled.** A release admits the waiters that now fit and publishes their grants
//!   on their clients' wake channels, as the mutex's hand-off does; a waiter's fallback timer is
//!   capped at the nearest holder's deadline, when a crashed holder's permits come back.
//! * **Fenced.** Every grant takes the next fence of the slot's counter (`next_fence` of
//!   `common.lua`): strictly increasing per name, across releases, expiries and a lost counter.
//! * **The limit is stored.** The first acquire stores its limit; a handle built with another
//!   limit is refused with [`crate::ErrorKind::InvalidInput`] while the semaphore exists in Redis
//!   (nobody holds it for longer than its last lease).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::context::Context;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::{ExtendOutcome, MutexGuard, ReleaseOutcome};
use crate::hold::Hold;
use crate::key::LockKeys;
use crate::lease::{Lease, LeaseCore, LeaseLost, LostReason, NewLease};
use crate::options::LockSettings;
use crate::scripts::wire;
use crate::scripts::{self, Call, SharedReply, unexpected};
use crate::timing;
use crate::token::{FencingToken, OwnerToken};
use crate::transport::ReleaseOnDrop;
use crate::wait::{self, Registration, Seen};

use tokio_util::sync::CancellationToken;

/// A handle on the distributed semaphore called `name`, with `limit` permits. Cheap to clone.
///
/// ```no_run
/// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
/// let exports = client.semaphore("exports", 4)?;
/// let permit = exports.acquire(1).await?; // at most 4 holders at once, in FIFO order
/// // … work; `permit.fencing_token()` goes with every write it makes …
/// permit.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    ctx: Arc<Context>,
    keys: LockKeys,
    limit: u32,
    settings: LockSettings,
}

/// How an attempt treats the queue (`shared_acquire.lua`'s mode).
#[derive(Clone, Copy)]
enum Mode {
    Once,
    Wait,
    Last,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Once => "",
            Self::Wait => "wait",
            Self::Last => "last",
        }
    }
}

impl Semaphore {
    pub(crate) fn new(
        ctx: Arc<Context>,
        keys: LockKeys,
        limit: u32,
        settings: LockSettings,
    ) -> Self {
        Self {
            ctx,
            keys,
            limit,
            settings,
        }
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.keys.name()
    }

    /// The number of permits this handle was built with.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Takes `permits` permits if they are free now and nobody waits ahead; `Ok(None)` otherwise.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when `permits` is 0 or above the limit, or the stored limit
    /// differs from this handle's; connection errors; [`ErrorKind::WrongType`] when the key holds
    /// data dlock did not write.
    ///
    /// # Cancel safety
    /// Dropping the future gives back whatever the request may have taken, in the background.
    pub async fn try_acquire(&self, permits: u32) -> Result<Option<Permit>> {
        match self.acquire_until(permits, Some(Duration::ZERO)).await {
            Ok(permit) => Ok(Some(permit)),
            Err(e) if e.is_busy() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits, in FIFO order, until `permits` permits are this caller's.
    ///
    /// # Errors
    /// As [`Semaphore::try_acquire`].
    ///
    /// # Cancel safety
    /// Dropping the future leaves the queue and gives back permits granted meanwhile, in the
    /// background.
    pub async fn acquire(&self, permits: u32) -> Result<Permit> {
        self.acquire_until(permits, None).await
    }

    /// As [`Semaphore::acquire`], waiting at most `wait`.
    ///
    /// # Errors
    /// [`ErrorKind::Busy`] when the wait ended first; otherwise as [`Semaphore::try_acquire`].
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire`].
    pub async fn acquire_timeout(&self, permits: u32, wait: Duration) -> Result<Permit> {
        self.acquire_until(permits, Some(wait)).await
    }

    fn check(&self, permits: u32) -> Result<()> {
        if self.ctx.is_closed() {
            return Err(self.ctx.closed_error(self.keys.name()));
        }
        if permits == 0 || permits > self.limit {
            return Err(Error::invalid(format!(
                "semaphore `{}`: asked for {permits} permits; a request takes 1 to {} (the \
                 limit), or it could never be served",
                self.keys.name(),
                self.limit
            )));
        }
        Ok(())
    }

    async fn acquire_until(&self, permits: u32, wait: Option<Duration>) -> Result<Permit> {
        self.check(permits)?;
        let started = Instant::now();
        let deadline = wait.and_then(|w| started.checked_add(w));
        let token = self.ctx.tokens.next();
        let mut cleanup = ReleaseOnDrop::new(&self.ctx.transport, &self.keys, token);
        let sent = Instant::now();
        match self.attempt(token, permits, Mode::Once, "").await? {
            SharedReply::Held { fence, pttl } => {
                cleanup.disarm();
                let safe_until = timing::safe_until(sent, pttl, self.settings.ttl);
                return Ok(self.permit(token, permits, fence, safe_until, None));
            }
            SharedReply::Wait { .. } if deadline.is_some_and(|d| Instant::now() >= d) => {
                cleanup.disarm();
                return Err(self.busy(permits, wait, started.elapsed()));
            }
            SharedReply::Wait { .. } => {}
        }
        cleanup.disarm();

        // Subscribe first, then queue: a grant can never be published before we listen.
        let (conn, generation) = self.ctx.transport.conn()?;
        let entry: Arc<str> = wire::shared_queue_entry(
            &token,
            &self.ctx.client_id,
            timing::millis(self.settings.ttl),
            self.ctx.transport.slot().publish_mode(),
            permits,
            &self.ctx.transport.holder,
            self.settings.label.as_deref().unwrap_or_default(),
        )
        .into();
        let waiters = &self.ctx.transport.waiters;
        let registration = waiters.register(token, &self.keys.lock, entry);
        let _membership = waiters.join((&conn, generation), &self.keys.lock).await?;
        drop(conn);
        cleanup.arm(registration.entry().clone());
        loop {
            if self.ctx.is_closed() {
                return Err(self.ctx.closed_error(self.keys.name()));
            }
            let last = deadline.is_some_and(|d| Instant::now() >= d);
            let mode = if last { Mode::Last } else { Mode::Wait };
            let sent = Instant::now();
            let reply = self.attempt(token, permits, mode, registration.entry());
            let (seen, until_free) = match reply.await? {
                SharedReply::Held { fence, pttl } => {
                    cleanup.disarm();
                    let safe_until = timing::safe_until(sent, pttl, self.settings.ttl);
                    return Ok(self.permit(token, permits, fence, safe_until, Some(registration)));
                }
                SharedReply::Wait { .. } if last => {
                    cleanup.disarm();
                    return Err(self.busy(permits, wait, started.elapsed()));
                }
                SharedReply::Wait {
                    wait: until_free,
                    server_ms,
                } => (Seen { sent, server_ms }, until_free),
            };
            // Without a trusted grant (the nap is over, a nudge, a grant that came too late):
            // ask the server again.
            tokio::select! {
                () = registration.notified() => {
                    if let Some((grant, safe_until)) = registration.trusted_grant(seen) {
                        cleanup.disarm();
                        let registration = Some(registration);
                        return Ok(self.permit(token, permits, grant.fence, safe_until, registration));
                    }
                }
                () = tokio::time::sleep(wait::nap(until_free, deadline)) => {}
            }
        }
    }

    fn busy(&self, permits: u32, wait: Option<Duration>, waited: Duration) -> Error {
        let name = self.keys.name();
        let message = if wait == Some(Duration::ZERO) {
            format!(
                "semaphore `{name}`: {permits} of {} permits are not free now (tried once \
                 without waiting; to wait, use acquire or acquire_timeout)",
                self.limit
            )
        } else {
            format!(
                "semaphore `{name}`: {permits} of {} permits did not become free in the wait of \
                 {waited:?}",
                self.limit
            )
        };
        Error::new(ErrorKind::Busy, message)
    }

    /// Runs `shared_acquire.lua` once.
    async fn attempt(
        &self,
        token: OwnerToken,
        permits: u32,
        mode: Mode,
        entry: &str,
    ) -> Result<SharedReply> {
        let label = self.settings.label.as_deref().unwrap_or_default();
        let mut call = Call::new(&scripts::SHARED_ACQUIRE, 1);
        call.arg(&*self.keys.lock)
            .arg(token)
            .arg(permits)
            .arg(self.limit)
            .arg("keep")
            .arg(timing::millis(self.settings.ttl))
            .arg(mode.as_str())
            .arg(entry)
            .arg(self.keys.counter())
            .arg(format!("{}\x1f{label}", self.ctx.transport.holder));
        let reply = self
            .ctx
            .transport
            .run(&call, "acquire", self.keys.name())
            .await?;
        SharedReply::decode(&reply).ok_or_else(|| unexpected("acquire", &reply))
    }

    fn permit(
        &self,
        token: OwnerToken,
        permits: u32,
        fence: u64,
        safe_until: Instant,
        registration: Option<Registration>,
    ) -> Permit {
        tracing::debug!(semaphore = %self.keys.name(), permits, fence, "dlock: permits acquired");
        let lease = LeaseCore::new(NewLease {
            transport: self.ctx.transport.clone(),
            held: self.ctx.held.clone(),
            keys: self.keys.clone(),
            token,
            fence: Some(fence),
            ttl: self.settings.ttl,
            safe_until,
            renewal: self.settings.renewal,
            registration,
            label: self.settings.label.clone(),
        });
        if self.ctx.is_closed() {
            lease.mark_released_by(LostReason::Shutdown);
            self.ctx
                .transport
                .release_in_background(self.keys.clone(), token, None);
        } else {
            self.ctx.watchdog.register(&lease);
        }
        Permit {
            guard: MutexGuard::new(Hold::First(lease)),
            permits,
            fence: FencingToken::new(fence),
        }
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.keys.name())
            .field("limit", &self.limit)
            .field("ttl", &self.settings.ttl)
            .finish_non_exhaustive()
    }
}

/// Permits of a [`Semaphore`] held by one acquisition. Dropping it gives them back in the
/// background; [`Permit::release`] does so and says what happened.
#[must_use = "the permits are given back when the permit is dropped"]
pub struct Permit {
    guard: MutexGuard,
    permits: u32,
    fence: FencingToken,
}

impl Permit {
    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.guard.name()
    }

    /// How many permits this holder has.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The fencing token of this acquisition: every grant of the semaphore's name takes a larger
    /// one.
    pub fn fencing_token(&self) -> FencingToken {
        self.fence
    }

    /// Until when the permits are certainly held (the lease, counted conservatively).
    pub fn safe_until(&self) -> Instant {
        self.guard.safe_until()
    }

    /// How long the permits are certainly held.
    pub fn remaining(&self) -> Duration {
        self.guard.remaining()
    }

    /// A cheap handle on the lease for the work under the permits.
    pub fn lease(&self) -> Lease {
        self.guard.lease()
    }

    /// Completes when the lease is lost (ran out, removed, or the client shut down).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) -> LeaseLost {
        self.guard.lost().await
    }

    /// Cancelled when the lease is lost.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.guard.cancellation_token()
    }

    /// Sets a new lease of `ttl` from now, if the permits are still this holder's.
    ///
    /// # Errors
    /// Connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe: the extension either ran or did not.
    pub async fn extend(&mut self, ttl: Duration) -> Result<ExtendOutcome> {
        self.guard.extend(ttl).await
    }

    /// Gives the permits back and admits the waiters that now fit.
    ///
    /// # Errors
    /// Connection errors (the lease then runs out by itself).
    ///
    /// # Cancel safety
    /// Dropping the future retries the release in the background.
    pub async fn release(self) -> Result<ReleaseOutcome> {
        self.guard.release().await
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("name", &self.name())
            .field("permits", &self.permits)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}
