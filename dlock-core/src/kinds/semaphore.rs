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
//! * **The limit is stored.** The first acquire stores its handle's limit; a handle built with
//!   another limit is refused with [`crate::ErrorKind::InvalidInput`] while the semaphore exists
//!   in Redis (while anyone holds or waits). A limit set with [`Semaphore::set_limit`] is kept
//!   until it is set again, and every handle follows it, whatever limit it was built with.
//! * **Nobody waits behind a request that left.** A request whose wait ends, that is dropped, or
//!   whose client died admits whatever fits behind it (the dead one at the latest when the queue
//!   is next served: its client no longer listens).

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::client::context::Context;
use crate::error::{Error, ErrorKind, Result};
use crate::holds::guard::{self, MutexGuard};
use crate::holds::hold::Hold;
use crate::key::{LockKeys, LockKind, validate_name};
use crate::kinds::shared::SharedLock;
use crate::lease::Lease;
use crate::options::{LockSettings, MutexOptions, Wait};
use crate::scripts::{self, Call, unexpected};
use crate::token::FencingToken;

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
///
/// # Guarantees
/// * **One acquisition, one holder.** `acquire(n)` takes `n` permits as one holder with its own
///   token, lease, fencing token and [`Permit`], whatever `n` is; they are released together.
/// * **Leased.** A holder's permits come back at the end of its own lease if it crashes, and
///   nobody else's lease is touched. A fixed lease (the default, as for a mutex) makes permits
///   that expire; with [`MutexOptions::watchdog`](crate::MutexOptions::watchdog) live permits
///   are renewed in the client's renewal batches.
/// * **Strict FIFO.** Waiters are served from the head of one queue while their request fits: a
///   request for many permits is never overtaken by a stream of small ones, and `n` above the
///   limit is refused at once ([`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)): it
///   could never be served.
/// * **Pushed, not polled.** A release admits the waiters that now fit and wakes them at once;
///   a waiter's fallback timer is capped at the nearest holder's deadline, when a crashed
///   holder's permits come back.
/// * **Fenced.** Every grant takes a fencing token ([`Permit::fencing_token`]): strictly
///   increasing per name, across releases, expiries and a lost counter.
/// * **The limit is stored.** The first acquire stores its handle's limit; a handle built with
///   another limit is refused with
///   [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) while the semaphore exists in
///   Redis (while anyone holds or waits). A limit set with [`Semaphore::set_limit`] is kept
///   until it is set again, and every handle follows it, whatever limit it was built with.
/// * **Nobody waits behind a request that left.** A request whose wait ends, that is dropped,
///   or whose client died admits whatever fits behind it (the dead one's at the latest when the
///   queue is next served: its client no longer listens).
///
/// The guide's chapter: [`_guide::family`](crate::_guide::family).
#[derive(Clone)]
pub struct Semaphore {
    pub(crate) shared: SharedLock,
}

impl Semaphore {
    pub(crate) fn new(
        ctx: Arc<Context>,
        keys: LockKeys,
        limit: u32,
        settings: LockSettings,
    ) -> Self {
        Self {
            shared: SharedLock {
                ctx,
                keys,
                limit,
                settings,
            },
        }
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.shared.keys.name()
    }

    /// The number of permits this handle was built with.
    pub fn limit(&self) -> u32 {
        self.shared.limit
    }

    /// Takes `permits` permits if they are free now and nobody waits ahead; `Ok(None)` otherwise.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when `permits` is 0 or above this handle's limit or the one
    /// set with [`Semaphore::set_limit`], or a limit stored by another handle differs from this
    /// handle's; connection errors; [`ErrorKind::WrongType`] when the key holds
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
    pub fn acquire(&self, permits: u32) -> impl Future<Output = Result<Permit>> + Send + '_ {
        // Not an `async fn` wrapping `acquire_until` (here and in `acquire_timeout`): it would
        // add a layer to every waiting task's future for nothing.
        self.acquire_until(permits, None)
    }

    /// As [`Semaphore::acquire`], waiting at most `wait`.
    ///
    /// # Errors
    /// [`ErrorKind::Busy`] when the wait ended first; otherwise as [`Semaphore::try_acquire`].
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire`].
    pub fn acquire_timeout(
        &self,
        permits: u32,
        wait: Duration,
    ) -> impl Future<Output = Result<Permit>> + Send + '_ {
        self.acquire_until(permits, Some(wait))
    }

    /// Sets the semaphore's limit in Redis to `limit` (and this handle's with it), for every
    /// process: the limit is kept (without expiry) until it is set again, and every handle's
    /// requests are weighed against it, whatever limit the handle was built with. A higher
    /// limit admits at once the waiters at the head of the queue that now fit. A lower one takes
    /// nothing from the holders — new requests wait until what is held fits under it — and
    /// fails at once the queued requests that ask for more than it (they could never be served:
    /// [`ErrorKind::InvalidInput`]). Setting a limit on a semaphore nobody holds keeps it the
    /// same way. Returns the limit in force before (`None`: nobody held or waited and none was
    /// set, so the next acquire would have stored its handle's).
    ///
    /// The trade-off: the kept limit is one small key per semaphore that was ever given one;
    /// delete `<prefix>{<name>}:sem:limit` to go back to limits stored by handles.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// let mut exports = client.semaphore("exports", 4)?;
    /// exports.set_limit(8).await?; // the next 4 waiters are admitted at once
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a limit of 0; connection errors; [`ErrorKind::WrongType`]
    /// when the key holds data dlock did not write.
    ///
    /// # Cancel safety
    /// Cancel safe: setting a limit twice is setting it once; until the answer arrives this
    /// handle keeps its old limit.
    pub async fn set_limit(&mut self, limit: u32) -> Result<Option<u32>> {
        if limit == 0 {
            return Err(Error::invalid(format!(
                "semaphore `{}`: a limit of 0 permits could never admit anyone; give 1 or more",
                self.name()
            )));
        }
        let keys = &self.shared.keys;
        let mut call = Call::new(&scripts::SHARED_LIMIT, 1);
        call.arg(&*keys.lock).arg(limit).arg(keys.counter());
        let reply = self
            .shared
            .ctx
            .transport
            .run(&call, "set limit", keys.name())
            .await?;
        let before = scripts::int(&reply).ok_or_else(|| unexpected("set limit", &reply))?;
        self.shared.limit = limit;
        Ok(u32::try_from(before).ok().filter(|&b| b > 0))
    }

    /// Runs `work` holding `permits` permits, then gives them back; as
    /// [`crate::Mutex::with_lock`] (the lease's loss stops `work` unless the options say
    /// [`crate::OnLost::Signal`]).
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// use dlock_core::Wait;
    /// let exports = client.semaphore("exports", 4)?;
    /// let rows = exports
    ///     .with_permits(1, Wait::Forever, |lease| async move {
    ///         // … at most 4 of these run at once, across every replica …
    ///         42
    ///     })
    ///     .await?;
    /// # let _ = rows; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::Busy`] when the wait ends first, [`ErrorKind::LeaseLost`] when the lease is
    /// lost and `work` was stopped, otherwise as [`Semaphore::acquire`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops `work` and gives the permits back in the
    /// background.
    pub async fn with_permits<F, Fut, T>(&self, permits: u32, wait: Wait, work: F) -> Result<T>
    where
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = T>,
    {
        let permit = self.acquire_until(permits, wait.limit()).await?;
        guard::run_body(permit.guard, self.shared.settings.on_lost, work).await
    }

    fn check(&self, permits: u32) -> Result<()> {
        let ctx = &self.shared.ctx;
        if ctx.is_closed() {
            return Err(ctx.closed_error(self.name()));
        }
        if permits == 0 || permits > self.limit() {
            return Err(Error::invalid(format!(
                "semaphore `{}`: asked for {permits} permits; a request takes 1 to {} (the \
                 limit), or it could never be served",
                self.name(),
                self.limit()
            )));
        }
        Ok(())
    }

    async fn acquire_until(&self, permits: u32, wait: Option<Duration>) -> Result<Permit> {
        self.check(permits)?;
        let started = Instant::now();
        let Some(admitted) = self.shared.admit(permits, wait).await? else {
            return Err(self.busy(permits, wait, started.elapsed()));
        };
        let fence = FencingToken::new(admitted.fence);
        let lease = self.shared.lease(admitted, false)?;
        tracing::debug!(semaphore = %self.name(), permits, %fence, "dlock: permits acquired");
        Ok(Permit {
            guard: MutexGuard::new(Hold::First(lease)),
            permits,
            fence,
        })
    }

    fn busy(&self, permits: u32, wait: Option<Duration>, waited: Duration) -> Error {
        let name = self.name();
        let limit = self.limit();
        let message = if wait == Some(Duration::ZERO) {
            format!(
                "semaphore `{name}`: {permits} of {limit} permits are not free now (tried once \
                 without waiting; to wait, use acquire or acquire_timeout)"
            )
        } else {
            format!(
                "semaphore `{name}`: {permits} of {limit} permits did not become free in the \
                 wait of {waited:?}"
            )
        };
        Error::new(ErrorKind::Busy, message)
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name())
            .field("limit", &self.limit())
            .field("ttl", &self.shared.settings.ttl)
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
    /// How many permits this holder has.
    pub fn permits(&self) -> u32 {
        self.permits
    }
}

guard::hold_api!(Permit, "holder's permits");

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("name", &self.name())
            .field("permits", &self.permits)
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A handle on the distributed semaphore called `name`, with `permits` permits (default
    /// options: each permit has the client's default TTL as a fixed lease); see [`Semaphore`].
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a bad name or `permits == 0`.
    pub fn semaphore(&self, name: &str, permits: u32) -> Result<Semaphore> {
        self.semaphore_with(name, permits, MutexOptions::new())
    }

    /// A handle on the semaphore called `name` with explicit options: the lease (`ttl`), the
    /// watchdog or a fixed lease (`renewal`; a fixed lease makes permits that expire), `max_hold`
    /// and the holder's `label` apply to each permit as to a mutex's hold; reentrancy and
    /// `fenced` do not (every permit is its own holder, and always fenced).
    ///
    /// # Errors
    /// As [`Client::semaphore`], and for invalid options.
    pub fn semaphore_with(
        &self,
        name: &str,
        permits: u32,
        options: MutexOptions,
    ) -> Result<Semaphore> {
        validate_name(name)?;
        if permits == 0 {
            return Err(Error::invalid(format!(
                "semaphore `{name}` needs at least 1 permit"
            )));
        }
        let settings = options.settings(self.ctx.config.default_ttl)?;
        let keys = LockKeys::of_kind(LockKind::Semaphore, &self.ctx.config.key_prefix, name);
        Ok(Semaphore::new(self.ctx.clone(), keys, permits, settings))
    }
}
