//! The distributed mutex: [`Mutex`] (a handle on one lock name) and [`Mutex::with_lock`] (run
//! a future under the lock, stopped if the lease is lost).
//!
//! Every state change is one Lua script (`scripts/*.lua`): acquire takes the lock or queues the
//! caller in one round trip, release hands the lock to the oldest live waiter, extend renews the
//! lease; release and extend check the owner token. Waiting is push-based (see `transport/wait.rs`);
//! renewal is the watchdog's (`lease/watchdog.rs`); holds in `holds/guard.rs`; reentrancy (nested calls
//! only) in `holds/hold.rs`.
//!
//! A hand-off received while waiting is only trusted when it is newer than the waiter's own
//! latest look at the lock and has most of its lease left; otherwise the waiter asks the server
//! again. So a waiter whose process was paused while the lock was handed to it, ran out and went
//! to someone else never comes back with that stale hand-off.
//!
//! Here: the public calls (try, wait, `with_lock`), the lease a grant becomes and the durability
//! acknowledgement; the handle's data in `handle.rs`, the requests on the wire and the mutex's
//! part of the wait loop (`kinds/queue.rs`) in `requests.rs`.

mod handle;
mod requests;

use std::future::Future;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::holds::guard::{self, MutexGuard};
use crate::holds::hold::{self, Hold, Patience};
use crate::key::{LockKeys, validate_name};
use crate::kinds::queue;
use crate::lease::{Lease, LeaseCore, LeaseLost, LostReason, NewLease};
use crate::metrics::{self, Outcome};
use crate::options::{Durability, MutexOptions, Wait};
use crate::scripts::ExtendStatus;
use crate::transport::ReleaseOnDrop;

pub use handle::Mutex;
use requests::{Fast, SelfWait, Taken};

impl Mutex {
    /// Takes the lock if it is free and nobody waits for it, without waiting: one round trip.
    ///
    /// Returns `Ok(None)` when another owner holds it (or others queued for it first). Inside
    /// the body that holds this lock ([`Mutex::with_lock`], `#[distributed_lock]`) it is a
    /// nested acquisition (see [`crate::MutexOptions::reentrant`]): no round trip, `Ok(None)` while a
    /// concurrent nested hold of the same body has the turn.
    ///
    /// # Errors
    /// [`ErrorKind::Connection`] or [`ErrorKind::Timeout`] when Redis does not answer within the
    /// command timeout; [`ErrorKind::WrongType`] when the lock's keys hold data dlock did not
    /// write; [`ErrorKind::Reentrancy`] for a nested acquisition through a non-reentrant handle
    /// or beyond 64 levels; [`ErrorKind::LeaseLost`] for a nested acquisition whose enclosing
    /// lease is lost; [`ErrorKind::Shutdown`] after [`crate::Client::shutdown`].
    ///
    /// With [`crate::MutexOptions::durability`], a grant becomes a guard only once acknowledged:
    /// [`ErrorKind::NotDurable`] when fewer replicas acknowledged it within the timeout than
    /// asked for, [`ErrorKind::LeaseLost`] when the lock was lost before the acknowledgement,
    /// [`ErrorKind::Connection`] / [`ErrorKind::Timeout`] when the connection that waits for
    /// the replicas fails — in every case the lock is released first (owner-checked), so
    /// nothing stays held; [`ErrorKind::InvalidInput`] for [`crate::Durability::Aof`] on a
    /// server without `WAITAOF` (asked with `COMMAND INFO` before anything is taken).
    ///
    /// # Cancel safety
    /// Cancel safe. If the future is dropped after the request was sent (or the request timed
    /// out), the lock may have been taken on the server; it is released in the background
    /// (owner-checked), so nothing stays held by an acquisition nobody knows about. One case
    /// is left to the lease: if the connection is replaced while the request is still queued on
    /// the old socket, the cleanup may reach Redis first, and the late acquisition then holds
    /// the lock until its TTL runs out (no watchdog renews it). Dropped while it waits for the
    /// replicas' acknowledgement (durability), the lock it was granted is released in the
    /// background; the wait itself runs to its end on its own connection, unseen.
    pub async fn try_acquire(&self) -> Result<Option<MutexGuard>> {
        if let Some(outer) = hold::enclosing(&self.ctx.transport, &self.keys.lock) {
            let nested = hold::nest(outer, Patience::Try, self.settings.reentrant).await?;
            return Ok(nested.map(MutexGuard::new));
        }
        self.check_open()?;
        if matches!(self.settings.durability(), Durability::Aof { .. }) {
            Box::pin(self.check_server()).await?;
        }
        let token = self.ctx.tokens.next();
        let mut cleanup = ReleaseOnDrop::new(&self.ctx.transport, &self.keys, token);
        let sent = Instant::now();
        let fast = self.fast_attempt(token).await;
        if fast.is_ok() {
            // On an error the lock may have been taken all the same (a `MULTI` whose fence
            // failed after its `SET`): the guard gives it back, owner-checked.
            cleanup.disarm();
        }
        let outcome = match &fast {
            Ok(Fast::Taken { .. }) => Outcome::Acquired,
            Ok(Fast::Busy) => Outcome::Busy,
            Err(_) => Outcome::Error,
        };
        self.record(outcome, false, sent);
        match fast? {
            Fast::Taken { fence } => {
                let ttl = self.settings.ttl;
                let guard = self.hold(Taken::new(token, fence, sent, ttl, ttl, None))?;
                if !self.is_durable() {
                    return Ok(Some(guard));
                }
                Box::pin(self.acknowledged_or_released(guard))
                    .await
                    .map(Some)
            }
            Fast::Busy => Ok(None),
        }
    }

    /// Records one acquire call's metrics (nothing without the `metrics` feature).
    fn record(&self, outcome: Outcome, contended: bool, started: Instant) {
        metrics::acquire(
            self.keys.kind().metric_name(),
            self.settings.label.as_deref().unwrap_or_default(),
            outcome,
            contended,
            metrics::since(started),
        );
    }

    /// Waits for the lock without a time limit.
    ///
    /// Waiting is push-based: the waiter queues in Redis and the releasing owner hands the lock
    /// straight to the oldest waiter (FIFO across processes, also when a holder's lease runs
    /// out) and wakes it. A fallback timer bounded by the holder's remaining lease covers expiry
    /// and lost messages. Inside the body that holds this lock it is a nested acquisition (see
    /// [`crate::MutexOptions::reentrant`]); anywhere else — including after an earlier `acquire()` of
    /// the same flow returned a guard — it waits like any other holder.
    ///
    /// # Errors
    /// As [`Mutex::try_acquire`]. A Redis error while waiting ends the wait.
    ///
    /// # Cancel safety
    /// Cancel safe. Dropping the future removes the waiter from the queue and releases the lock
    /// in the background if it was handed over meanwhile (or granted and still waiting for the
    /// replicas' acknowledgement); the wake-channel subscription is dropped with the last local
    /// waiter.
    pub fn acquire(&self) -> impl Future<Output = Result<MutexGuard>> + Send + '_ {
        // Not an `async fn` wrapping `acquire_until` (here and in `acquire_timeout`): it would
        // add a layer to every waiting task's future for nothing.
        self.acquire_until(None)
    }

    /// Waits for the lock for at most `wait`; `Duration::ZERO` tries once.
    ///
    /// # Errors
    /// [`ErrorKind::Busy`] when another owner held the lock for the whole wait (nothing is held
    /// or queued afterwards), otherwise as [`Mutex::try_acquire`].
    ///
    /// # Cancel safety
    /// As [`Mutex::acquire`].
    pub fn acquire_timeout(
        &self,
        wait: Duration,
    ) -> impl Future<Output = Result<MutexGuard>> + Send + '_ {
        self.acquire_until(Some(wait))
    }

    /// Runs `work` while holding the lock, then releases it.
    ///
    /// `work` receives the [`crate::Lease`] (fencing token, `lost()`, cancellation token). With
    /// [`OnLost::Cancel`](crate::OnLost::Cancel) (the default) the future is dropped as soon
    /// as the lease is lost and the call returns an [`ErrorKind::LeaseLost`] error; with
    /// [`OnLost::Signal`](crate::OnLost::Signal) it runs to the end and reacts itself. Combine
    /// with [`crate::MutexOptions::watchdog`] for work of unknown length.
    ///
    /// `work` is the *body* of the hold: acquisitions of the same lock nested inside it re-enter
    /// (a locked function calling another locked function on the same key, recursion), and
    /// nested acquisitions running concurrently inside it take turns (see
    /// [`crate::MutexOptions::reentrant`]).
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// use std::time::Duration;
    /// use dlock_core::{MutexOptions, Wait};
    /// let lock = client.mutex_with("report", MutexOptions::new().watchdog())?;
    /// let rows = lock
    ///     .with_lock(Wait::AtMost(Duration::from_secs(5)), |lease| async move {
    ///         // … exclusive work; lease.fencing_token() goes to the storage …
    ///         42
    ///     })
    ///     .await?;
    /// # let _ = rows; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`ErrorKind::Busy`] when the lock stays held for the whole wait, [`ErrorKind::LeaseLost`]
    /// when the lease is lost under [`OnLost::Cancel`](crate::OnLost::Cancel), otherwise as
    /// [`Mutex::acquire`]. If the final release fails, the work's output is still returned
    /// (the lease then expires).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops `work` and releases the lock in the background.
    pub async fn with_lock<F, Fut, T>(&self, wait: Wait, work: F) -> Result<T>
    where
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.acquire_until(wait.limit()).await?;
        guard::run_body(guard, self.settings.on_lost, work).await
    }

    fn check_open(&self) -> Result<()> {
        if self.ctx.is_closed() {
            return Err(self.ctx.closed_error(self.keys.name()));
        }
        Ok(())
    }

    /// The error of a wait (of `wait`, `None`: unbounded) that ended with the lock still held
    /// by another owner.
    fn busy(&self, wait: Option<Duration>, waited: Duration) -> Error {
        let name = self.keys.name();
        let mut message = if wait == Some(Duration::ZERO) {
            format!(
                "lock `{name}` is held by another owner (tried once without waiting; to wait, \
                 use acquire_timeout / Wait::AtMost, or `wait = \"5s\"` in #[distributed_lock])"
            )
        } else {
            format!("lock `{name}` was held by another owner for the whole wait of {waited:?}")
        };
        if let Some(own) = self.ctx.held.get(&self.keys.lock) {
            message.push_str(&format!(
                "; another task of this process holds `{name}` (for {}): most often another \
                 request for the same thing, which waits its turn; if it is the code that \
                 waited (a second acquire under the first guard), it waited for itself — \
                 release the first guard first, or run the nested work inside with_lock / \
                 #[distributed_lock], where it re-enters",
                crate::error::wait_text(own.acquired_at.elapsed())
            ));
        }
        Error::new(ErrorKind::Busy, message)
    }

    /// Turns a lock just taken in Redis into a lease with its first hold.
    fn hold(&self, taken: Taken) -> Result<MutexGuard> {
        tracing::debug!(lock = %self.keys.name(), fence = ?taken.fence, "dlock: acquired");
        let lease = LeaseCore::new(NewLease {
            transport: self.ctx.transport.clone(),
            held: self.ctx.held.clone(),
            keys: self.keys.clone(),
            token: taken.token,
            fence: taken.fence,
            ttl: self.settings.ttl,
            safe_until: taken.safe_until,
            renewal: self.settings.renewal,
            registration: taken.registration,
            label: self.settings.label.clone(),
            exclusive: true,
        });
        if self.ctx.is_closed() {
            // The client was shut down while this acquisition was under way (the lease is in the
            // client's registry now, so a shutdown after this check finds it): give it back.
            lease.mark_released_by(LostReason::Shutdown);
            self.ctx
                .transport
                .release_in_background(self.keys.clone(), lease.token, None);
            return Err(self.ctx.closed_error(self.keys.name()));
        }
        self.ctx.watchdog.register(&lease);
        Ok(MutexGuard::new(Hold::First(lease)))
    }

    /// Checks, once, that the server can give the durability asked for (`WAITAOF`, asked with
    /// `COMMAND INFO`), before anything is taken. (Boxed by its callers: a rare request that should not
    /// size every acquire future.)
    async fn check_server(&self) -> Result<()> {
        self.ctx
            .acks
            .check_server(&self.ctx.transport, self.settings.durability())
            .await
    }

    /// Whether a grant must be acknowledged (`transport/durable.rs`) before it becomes a guard.
    fn is_durable(&self) -> bool {
        self.settings.durability() != Durability::None
    }

    /// `guard` once acknowledged as its durability asks (`transport/durable.rs`). A grant that is not
    /// acknowledged in time, or found lost, is released (owner-checked) and reported: never a
    /// guard on a lock held without the durability asked for. If the future is dropped while
    /// it waits, the guard's drop releases the lock in the background. (Boxed by its callers:
    /// only durable acquires carry its state.)
    async fn acknowledged_or_released(&self, guard: MutexGuard) -> Result<MutexGuard> {
        match self.acknowledged(&guard).await {
            Ok(()) => Ok(guard),
            Err(e) => {
                if let Err(release) = guard.release().await {
                    tracing::warn!(lock = %self.keys.name(), error = %release, "dlock: could not release a grant that was not acknowledged; it is retried in the background, and its lease expires otherwise");
                }
                Err(e)
            }
        }
    }

    /// Waits for the acknowledgement of `guard`'s grant; the extend that precedes the wait sets
    /// the lease anew, from when it was sent.
    async fn acknowledged(&self, guard: &MutexGuard) -> Result<()> {
        let lease = guard.hold().lease();
        let want = self.settings.durability();
        let ttl = lease.ttl();
        let ack = self
            .ctx
            .acks
            .confirm(self.keys.lock.clone(), lease.extend_owner(), ttl, want)
            .await?;
        let reason = match ack.status {
            ExtendStatus::Extended | ExtendStatus::Asked => {
                lease.renewed(ack.sent, ttl);
                if ack.status == ExtendStatus::Asked {
                    lease.mark_asked();
                }
                return match ack.shortfall(self.keys.name(), want) {
                    Some(e) => Err(e),
                    None => Ok(()),
                };
            }
            ExtendStatus::Gone => LostReason::Expired,
            ExtendStatus::Other => LostReason::TakenOver,
        };
        lease.fire_lost(reason);
        Err(LeaseLost::new(reason).into_error(self.keys.name()))
    }

    /// Not an `async fn`, as `queue::wait_in_line`: an `async fn` keeps its arguments twice in
    /// its state (as captured and as locals), for as long as the caller waits.
    #[expect(
        clippy::manual_async_fn,
        reason = "an async fn keeps its arguments twice in its state: see acquire_until"
    )]
    fn acquire_until(
        &self,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<MutexGuard>> + Send + '_ {
        async move {
            let started = Instant::now();
            let deadline = wait.and_then(|w| started.checked_add(w));
            if let Some(outer) = hold::enclosing(&self.ctx.transport, &self.keys.lock) {
                // Boxed: a rare path, which would otherwise size every waiting task's future.
                let nested = Box::pin(hold::nest(
                    outer,
                    Patience::Until(deadline),
                    self.settings.reentrant,
                ))
                .await?;
                // `Until` waits for the turn or fails; it never answers "not now".
                return nested
                    .map(MutexGuard::new)
                    .ok_or_else(|| self.busy(wait, started.elapsed()));
            }
            self.check_open()?;
            if matches!(self.settings.durability(), Durability::Aof { .. }) {
                Box::pin(self.check_server()).await?;
            }
            let span = tracing::debug_span!("dlock.acquire", lock = %self.keys.name());
            let waited = queue::wait_in_line(self, deadline, SelfWait::new(started));
            let waited = waited.instrument(span).await;
            // The wait ended with the lock held by another owner: named below.
            let waited =
                waited.and_then(|taken| taken.ok_or_else(|| Error::new(ErrorKind::Busy, "busy")));
            let taken = match waited {
                Ok(taken) => {
                    self.record(Outcome::Acquired, taken.registration.is_some(), started);
                    taken
                }
                Err(e) => {
                    let outcome = Outcome::refused(Some(&e), wait);
                    self.record(outcome, outcome == Outcome::Timeout, started);
                    if e.is_busy() {
                        return Err(self.busy(wait, started.elapsed()));
                    }
                    return Err(e);
                }
            };
            let guard = self.hold(taken)?;
            if !self.is_durable() {
                return Ok(guard);
            }
            Box::pin(self.acknowledged_or_released(guard)).await
        }
    }
}

impl Client {
    /// A handle on the mutex called `name`, with the client's default TTL.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// let lock = client.mutex("invoice:2026-11")?;
    /// if let Some(guard) = lock.try_acquire().await? {
    ///     // … exclusive work …
    ///     guard.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for an empty name, one longer than
    /// [`crate::MAX_NAME_LEN`] bytes, or one containing braces or control characters.
    pub fn mutex(&self, name: &str) -> Result<Mutex> {
        self.mutex_with(name, MutexOptions::new())
    }

    /// A handle on the mutex called `name` with explicit options.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// use std::time::Duration;
    /// use dlock_core::MutexOptions;
    /// let lock = client.mutex_with(
    ///     "payment:9913",
    ///     MutexOptions::new().ttl(Duration::from_secs(10)).label("pay handler"),
    /// )?;
    /// # let _ = lock; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Client::mutex`], plus an out-of-range TTL ([`crate::MIN_TTL`] ..= [`crate::MAX_TTL`]),
    /// a watchdog lease below [`crate::MIN_WATCHDOG_TTL`] or with a renewal interval longer than
    /// half the TTL, a `max_hold` below the minimum watchdog lease, a label longer than
    /// [`crate::MAX_LABEL_LEN`] bytes or with control characters, or a [`crate::Durability`]
    /// with nothing to wait for, a timeout out of range, or on a Redis Cluster.
    pub fn mutex_with(&self, name: &str, options: MutexOptions) -> Result<Mutex> {
        validate_name(name)?;
        let cluster = self.ctx.transport.slot().is_cluster();
        let settings = options.mutex_settings(self.ctx.config.default_ttl, cluster)?;
        let keys = LockKeys::new(&self.ctx.config.key_prefix, name);
        Ok(Mutex::new(self.ctx.clone(), keys, settings))
    }
}
