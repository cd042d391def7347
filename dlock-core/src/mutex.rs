//! The distributed mutex: [`Mutex`] (a handle on one lock name), its [`MutexOptions`], and
//! [`Mutex::with_lock`] (run a future under the lock, stopped if the lease is lost).
//!
//! Every state change is one Lua script (`scripts/*.lua`): acquire takes the lock or queues the
//! caller in one round trip, release hands the lock to the oldest live waiter, extend renews the
//! lease; release and extend check the owner token. Waiting is push-based (see `wait.rs`);
//! renewal is the watchdog's (`watchdog.rs`); holds and reentrancy are in `guard.rs` and
//! `reentry.rs`.

use std::fmt;
use std::future::Future;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{RedisWrite, ToRedisArgs, Value};
use tracing::Instrument;

use crate::client::Shared;
use crate::error::{Error, ErrorKind, Result};
use crate::guard::MutexGuard;
use crate::key::LockKeys;
use crate::lease::{self, LeaseCore, NewLease, Renewal};
use crate::scripts::{self, Call};
use crate::token::OwnerToken;
use crate::wait::{Grant, Registration};

/// The shortest pause between two attempts of a waiting acquire (when the holder's remaining
/// lease is about to run out).
const MIN_NAP: Duration = Duration::from_millis(1);

/// What [`Mutex::with_lock`] does when the lease is lost while its future runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnLost {
    /// Drop the future and return an [`ErrorKind::LeaseLost`] error (default): work that is no
    /// longer exclusive stops at its next `.await`.
    #[default]
    Cancel,
    /// Let the future finish; it learns of the loss through its [`crate::Lease`]
    /// (`lost()`, `cancellation_token()`) and decides itself.
    Signal,
}

/// How long [`Mutex::with_lock`] waits for the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wait {
    /// Try once; [`ErrorKind::Busy`] if held.
    No,
    /// Wait up to this long; [`ErrorKind::Busy`] afterwards.
    AtMost(Duration),
    /// Wait without a limit.
    Forever,
}

impl From<Duration> for Wait {
    fn from(wait: Duration) -> Self {
        Self::AtMost(wait)
    }
}

/// Options of a [`Mutex`] handle; see [`crate::Client::mutex_with`].
///
/// ```
/// use std::time::Duration;
/// let options = dlock_core::MutexOptions::new()
///     .ttl(Duration::from_secs(10)) // the lease
///     .watchdog()                    // renewed every 10 s / 3 while held …
///     .max_hold(Duration::from_secs(600)) // … for at most 10 minutes
///     .label("nightly-report");
/// # let _ = options;
/// ```
#[derive(Clone, Debug)]
pub struct MutexOptions {
    pub(crate) ttl: Option<Duration>,
    pub(crate) label: Option<String>,
    pub(crate) watchdog: bool,
    pub(crate) renew_every: Option<Duration>,
    pub(crate) max_hold: Option<Duration>,
    pub(crate) reentrant: bool,
    pub(crate) on_lost: OnLost,
}

impl Default for MutexOptions {
    fn default() -> Self {
        Self {
            ttl: None,
            label: None,
            watchdog: false,
            renew_every: None,
            max_hold: None,
            reentrant: true,
            on_lost: OnLost::Cancel,
        }
    }
}

impl MutexOptions {
    /// Options with every default: the client's default TTL as a fixed lease, no label,
    /// reentrant, [`OnLost::Cancel`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The lease, from [`crate::MIN_TTL`] to [`crate::MAX_TTL`]. A holder that crashes keeps
    /// everyone else out for at most this long.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Renew the lease while the lock is held (the watchdog), every third of the lease unless
    /// [`MutexOptions::renew_every`] says otherwise. Without it the lease is fixed: it runs out
    /// after the TTL unless you [`MutexGuard::extend`] it.
    pub fn watchdog(mut self) -> Self {
        self.watchdog = true;
        self
    }

    /// Renewal interval of the watchdog (implies [`MutexOptions::watchdog`]); must leave room
    /// before the lease runs out (at most half the TTL).
    pub fn renew_every(mut self, interval: Duration) -> Self {
        self.watchdog = true;
        self.renew_every = Some(interval);
        self
    }

    /// Stop renewing after the lock has been held this long, so that a hung holder eventually
    /// loses the lock (implies [`MutexOptions::watchdog`]). The lease is shortened so that the
    /// lock is free by then.
    pub fn max_hold(mut self, max_hold: Duration) -> Self {
        self.watchdog = true;
        self.max_hold = Some(max_hold);
        self
    }

    /// Whether a task that already holds this lock may acquire it again (default `true`): the
    /// new guard shares the lease and the fencing token, costs no round trip, and the lock is
    /// released with the outermost guard. With `false`, such an acquire fails with
    /// [`ErrorKind::Reentrancy`] instead of waiting for itself.
    ///
    /// Reentrancy is scoped to the Tokio task (not the thread); a spawned task is another owner.
    pub fn reentrant(mut self, reentrant: bool) -> Self {
        self.reentrant = reentrant;
        self
    }

    /// What [`Mutex::with_lock`] does when the lease is lost (default [`OnLost::Cancel`]).
    pub fn on_lost(mut self, on_lost: OnLost) -> Self {
        self.on_lost = on_lost;
        self
    }

    /// A short free-text label stored with the holder's host and pid, for operators
    /// ([`crate::Client::inspect`]).
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// Checks the options against the effective TTL and says how the lease is kept.
    pub(crate) fn renewal(&self, ttl: Duration) -> Result<Renewal> {
        if !self.watchdog {
            return Ok(Renewal::Fixed);
        }
        let interval = self.renew_every.unwrap_or(ttl / 3);
        if interval.is_zero() || interval > ttl / 2 {
            return Err(Error::invalid(format!(
                "watchdog renewal interval {interval:?} must be greater than zero and at most \
                 half the lease ({ttl:?}), so that a failed renewal can be retried in time"
            )));
        }
        if let Some(max_hold) = self.max_hold
            && max_hold < lease::MIN_TTL
        {
            return Err(Error::invalid(format!(
                "max_hold {max_hold:?} is shorter than the minimum lease {:?}",
                lease::MIN_TTL
            )));
        }
        Ok(Renewal::Watchdog {
            interval,
            max_hold: self.max_hold,
        })
    }
}

/// A handle on one distributed mutex, identified by its name. Cheap to clone.
///
/// Create it with [`crate::Client::mutex`]. A handle holds nothing by itself; each successful
/// acquire returns a [`MutexGuard`].
///
/// ```no_run
/// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
/// use std::time::Duration;
/// let lock = client.mutex("order:42")?;
/// let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
/// // Pass the fencing token to the storage you write to.
/// let token = guard.fencing_token();
/// # let _ = token;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Mutex {
    shared: Arc<Shared>,
    keys: LockKeys,
    ttl: Duration,
    renewal: Renewal,
    reentrant: bool,
    on_lost: OnLost,
    /// The label stored with the holder's host and pid.
    label: Option<Arc<str>>,
}

/// The lock value `<token>- <host>\x1f<pid>\x1f<label>` (see `acquire.lua`), written straight
/// into the command.
struct LockValue<'a> {
    token: &'a OwnerToken,
    holder: &'a str,
    label: &'a str,
}

impl ToRedisArgs for LockValue<'_> {
    fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
        let mut arg = out.writer_for_next_arg();
        // Writing into the command's buffer cannot fail.
        let _ = arg.write_all(self.token.as_bytes());
        let _ = arg.write_all(b"- ");
        let _ = arg.write_all(self.holder.as_bytes());
        let _ = arg.write_all(b"\x1f");
        let _ = arg.write_all(self.label.as_bytes());
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Try,
    Wait,
    Last,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Try => "try",
            Self::Wait => "wait",
            Self::Last => "last",
        }
    }
}

enum Attempt {
    Acquired { fence: u64, pttl: Duration },
    Held { pttl: Duration, server_ms: i64 },
}

/// A lock just taken in Redis, before it becomes a lease.
struct Taken {
    token: OwnerToken,
    fence: u64,
    safe_until: Instant,
    registration: Option<Registration>,
}

impl Mutex {
    pub(crate) fn new(
        shared: Arc<Shared>,
        keys: LockKeys,
        ttl: Duration,
        options: &MutexOptions,
    ) -> Result<Self> {
        Ok(Self {
            renewal: options.renewal(ttl)?,
            reentrant: options.reentrant,
            on_lost: options.on_lost,
            label: options.label.as_deref().map(Arc::from),
            shared,
            keys,
            ttl,
        })
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        self.keys.name()
    }

    /// The lease each acquisition gets (renewed by the watchdog if enabled).
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Takes the lock if it is free, without waiting: one round trip.
    ///
    /// Returns `Ok(None)` when another owner holds it. If the current task already holds it, a
    /// reentrant mutex returns a nested guard (no round trip) and a non-reentrant one fails with
    /// [`ErrorKind::Reentrancy`].
    ///
    /// # Errors
    /// [`ErrorKind::Connection`] or [`ErrorKind::Timeout`] when Redis does not answer within the
    /// command timeout; [`ErrorKind::WrongType`] when the lock's key holds another type;
    /// [`ErrorKind::Reentrancy`] as above.
    ///
    /// # Cancel safety
    /// Cancel safe. If the future is dropped after the request was sent (or the request timed
    /// out), the lock may have been taken on the server; it is released in the background
    /// (owner-checked), so nothing stays held by an acquisition nobody knows about. One case
    /// is left to the lease: if the connection is replaced while the request is still queued on
    /// the old socket, the cleanup may reach Redis first, and the late acquisition then holds
    /// the lock until its TTL runs out (no watchdog renews it).
    pub async fn try_acquire(&self) -> Result<Option<MutexGuard>> {
        if let Some(guard) = self.reenter()? {
            return Ok(Some(guard));
        }
        let token = self.shared.tokens.next();
        let mut cleanup = Cleanup::new(self, token);
        let sent = Instant::now();
        let outcome = self.attempt(token, Mode::Try, "").await?;
        cleanup.disarm();
        Ok(match outcome {
            Attempt::Acquired { fence, pttl } => {
                tracing::debug!(lock = %self.keys.name(), fence, "dlock: acquired");
                let safe_until = lease::safe_until(sent, pttl, self.ttl);
                Some(self.hold(Taken {
                    token,
                    fence,
                    safe_until,
                    registration: None,
                }))
            }
            Attempt::Held { pttl, .. } => {
                tracing::debug!(lock = %self.keys.name(), pttl_ms = pttl.as_millis(), "dlock: held by another owner");
                None
            }
        })
    }

    /// Waits for the lock without a time limit.
    ///
    /// Waiting is push-based: the waiter queues in Redis and the releasing owner hands the lock
    /// straight to the oldest waiter (FIFO across processes) and wakes it. A fallback timer
    /// bounded by the holder's remaining lease covers expiry and lost messages.
    ///
    /// # Errors
    /// As [`Mutex::try_acquire`]. A Redis error while waiting ends the wait.
    ///
    /// # Cancel safety
    /// Cancel safe. Dropping the future removes the waiter from the queue and releases the lock
    /// in the background if it was handed over meanwhile; the wake-channel subscription is
    /// dropped with the last local waiter.
    pub async fn acquire(&self) -> Result<MutexGuard> {
        self.acquire_until(None).await
    }

    /// Waits for the lock for at most `wait`; `Duration::ZERO` tries once.
    ///
    /// # Errors
    /// [`ErrorKind::Busy`] when another owner held the lock for the whole wait (nothing is held
    /// or queued afterwards), otherwise as [`Mutex::try_acquire`].
    ///
    /// # Cancel safety
    /// As [`Mutex::acquire`].
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<MutexGuard> {
        self.acquire_until(Some(wait)).await
    }

    /// Runs `work` while holding the lock, then releases it.
    ///
    /// `work` receives the [`crate::Lease`] (fencing token, `lost()`, cancellation token). With
    /// [`OnLost::Cancel`] (the default) the future is dropped as soon as the lease is lost and
    /// the call returns an [`ErrorKind::LeaseLost`] error; with [`OnLost::Signal`] it runs to the
    /// end and reacts itself. Combine with [`MutexOptions::watchdog`] for work of unknown length.
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
    /// when the lease is lost under [`OnLost::Cancel`], otherwise as [`Mutex::acquire`]. If the
    /// final release fails, the work's output is still returned (the lease then expires).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops `work` and releases the lock in the background.
    pub async fn with_lock<F, Fut, T>(&self, wait: Wait, work: F) -> Result<T>
    where
        F: FnOnce(crate::Lease) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = match wait {
            Wait::No => self
                .try_acquire()
                .await?
                .ok_or_else(|| self.busy(Duration::ZERO))?,
            Wait::AtMost(wait) => self.acquire_timeout(wait).await?,
            Wait::Forever => self.acquire().await?,
        };
        let lease = guard.lease();
        let body = work(lease.clone());
        let output = match self.on_lost {
            OnLost::Signal => body.await,
            OnLost::Cancel => {
                tokio::pin!(body);
                tokio::select! {
                    biased;
                    output = &mut body => output,
                    lost = lease.lost() => {
                        drop(guard);
                        return Err(lost.into_error(self.keys.name()));
                    }
                }
            }
        };
        match guard.release().await {
            Ok(outcome) if !outcome.was_held() => {
                tracing::warn!(lock = %self.keys.name(), ?outcome, "dlock: the work finished after its lease was lost");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(lock = %self.keys.name(), error = %e, "dlock: release after the work failed; the lease will expire");
            }
        }
        Ok(output)
    }

    fn busy(&self, waited: Duration) -> Error {
        Error::new(
            ErrorKind::Busy,
            format!(
                "lock `{}` was held by another owner for the whole wait of {waited:?}",
                self.keys.name()
            ),
        )
    }

    /// A nested hold if the current task holds this lock already.
    fn reenter(&self) -> Result<Option<MutexGuard>> {
        let held = self
            .shared
            .held
            .reenter(&self.keys.lock, self.keys.name(), self.reentrant)?;
        Ok(held.map(|(lease, depth)| {
            tracing::debug!(lock = %self.keys.name(), depth, "dlock: re-entered");
            MutexGuard::new(lease, depth)
        }))
    }

    /// Turns a lock just taken in Redis into a lease with its first hold.
    fn hold(&self, taken: Taken) -> MutexGuard {
        let lease = LeaseCore::new(NewLease {
            shared: self.shared.clone(),
            keys: self.keys.clone(),
            token: taken.token,
            fence: taken.fence,
            ttl: self.ttl,
            safe_until: taken.safe_until,
            renewal: self.renewal,
            registration: taken.registration,
        });
        self.shared.held.insert(&lease);
        self.shared.watchdog.register(&self.shared, &lease);
        MutexGuard::new(lease, 1)
    }

    async fn acquire_until(&self, wait: Option<Duration>) -> Result<MutexGuard> {
        if let Some(guard) = self.reenter()? {
            return Ok(guard);
        }
        let span = tracing::debug_span!("dlock.acquire", lock = %self.keys.name());
        let started = Instant::now();
        let deadline = wait.and_then(|w| started.checked_add(w));
        match self.acquire_inner(deadline).instrument(span).await {
            Ok(taken) => {
                tracing::debug!(
                    lock = %self.keys.name(),
                    fence = taken.fence,
                    waited_us = started.elapsed().as_micros(),
                    "dlock: acquired"
                );
                Ok(self.hold(taken))
            }
            Err(e) if e.is_busy() => Err(self.busy(started.elapsed())),
            Err(e) => Err(e),
        }
    }

    async fn acquire_inner(&self, deadline: Option<Instant>) -> Result<Taken> {
        let token = self.shared.tokens.next();
        let mut cleanup = Cleanup::new(self, token);
        // Uncontended fast path: one round trip, no subscription. Skipped when this client is
        // subscribed already (other local waiters exist), as the lock is then most likely held.
        if !self.shared.waiters.is_subscribed(&self.keys.lock) {
            let sent = Instant::now();
            let outcome = self.attempt(token, Mode::Try, "").await?;
            cleanup.disarm();
            match outcome {
                Attempt::Acquired { fence, pttl } => {
                    let safe_until = lease::safe_until(sent, pttl, self.ttl);
                    return Ok(Taken {
                        token,
                        fence,
                        safe_until,
                        registration: None,
                    });
                }
                Attempt::Held { pttl, .. } => {
                    tracing::debug!(pttl_ms = pttl.as_millis(), "dlock: contended; waiting");
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(Error::new(ErrorKind::Busy, "busy"));
                    }
                }
            }
        }

        // Subscribe first, then queue: a grant can never be published before we listen.
        let registration = self.shared.waiters.register(token);
        let _membership = self
            .shared
            .waiters
            .join(&self.shared.conn, &self.keys.lock, || {
                self.keys.wake_channel(&self.shared.client_id)
            })
            .await?;
        let entry: Arc<str> = format!(
            "{} {} {} {} {}\x1f{}",
            token.as_str(),
            self.shared.client_id,
            lease::millis(self.ttl),
            self.shared.conn.publish_mode(),
            self.shared.holder,
            self.label.as_deref().unwrap_or_default()
        )
        .into();
        cleanup.arm(entry.clone());

        loop {
            let last = deadline.is_some_and(|d| Instant::now() >= d);
            let mode = if last { Mode::Last } else { Mode::Wait };
            let sent = Instant::now();
            match self.attempt(token, mode, &entry).await? {
                Attempt::Acquired { fence, pttl } => {
                    cleanup.disarm();
                    return Ok(Taken {
                        token,
                        fence,
                        safe_until: lease::safe_until(sent, pttl, self.ttl),
                        registration: Some(registration),
                    });
                }
                Attempt::Held { .. } if last => {
                    cleanup.disarm();
                    return Err(Error::new(ErrorKind::Busy, "busy"));
                }
                Attempt::Held { pttl, server_ms } => {
                    let mut nap = pttl.max(MIN_NAP);
                    if let Some(deadline) = deadline {
                        nap = nap.min(deadline.saturating_duration_since(Instant::now()));
                    }
                    tokio::select! {
                        () = registration.slot().notified() => {
                            if let Some(grant) = registration.slot().take_grant() {
                                cleanup.disarm();
                                return Ok(Taken {
                                    token,
                                    fence: grant.fence,
                                    safe_until: granted_safe_until(&grant, sent, server_ms),
                                    registration: Some(registration),
                                });
                            }
                            // A nudge without a grant (reconnect): retry now.
                        }
                        () = tokio::time::sleep(nap) => {}
                    }
                }
            }
        }
    }

    /// Runs `acquire.lua` once.
    async fn attempt(&self, token: OwnerToken, mode: Mode, entry: &str) -> Result<Attempt> {
        let mut call = Call::new(&scripts::ACQUIRE, 1);
        call.arg(&*self.keys.lock)
            .arg(LockValue {
                token: &token,
                holder: &self.shared.holder,
                label: self.label.as_deref().unwrap_or_default(),
            })
            .arg(lease::millis(self.ttl));
        if mode != Mode::Try {
            // "try" is the script's default: every argument costs the server (measured).
            call.arg(mode.as_str()).arg(entry);
        }
        let reply = self.shared.run(&call, "acquire", self.keys.name()).await?;
        if let Value::Int(fence) = reply {
            // Taken now, with the full lease.
            return Ok(Attempt::Acquired {
                fence: u64::try_from(fence).map_err(|_| unexpected("acquire", &reply))?,
                pttl: self.ttl,
            });
        }
        match scripts::ints::<3>(&reply) {
            Some([1, fence, pttl]) => Ok(Attempt::Acquired {
                fence: u64::try_from(fence).map_err(|_| unexpected("acquire", &reply))?,
                pttl: millis_or(pttl, self.ttl),
            }),
            Some([0, pttl, server_ms]) => Ok(Attempt::Held {
                pttl: millis_or(pttl, self.ttl),
                server_ms,
            }),
            _ => Err(unexpected("acquire", &reply)),
        }
    }
}

impl fmt::Debug for Mutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            shared: _,
            keys,
            ttl,
            renewal,
            reentrant,
            on_lost,
            label,
        } = self;
        f.debug_struct("Mutex")
            .field("name", &keys.name())
            .field("label", label)
            .field("ttl", ttl)
            .field("renewal", renewal)
            .field("reentrant", reentrant)
            .field("on_lost", on_lost)
            .finish_non_exhaustive()
    }
}

/// A lower bound of the local instant at which a hand-off happened: the request that queued us
/// was sent at `sent` and ran at server time `queued_ms`; the grant ran `grant - queued_ms`
/// later on the server's clock. Never later than now (the grant has arrived).
fn granted_safe_until(grant: &Grant, sent: Instant, queued_ms: i64) -> Instant {
    let between = u64::try_from(grant.server_ms.saturating_sub(queued_ms)).unwrap_or(0);
    let start = sent
        .checked_add(Duration::from_millis(between))
        .unwrap_or(sent)
        .min(Instant::now());
    lease::safe_until(start, grant.lease, grant.lease)
}

/// A PTTL reply as a duration; a key without expiry (never written by dlock) counts as `ttl`.
fn millis_or(ms: i64, ttl: Duration) -> Duration {
    u64::try_from(ms).map_or(ttl, Duration::from_millis)
}

pub(crate) fn unexpected(op: &str, reply: &Value) -> Error {
    Error::protocol(format!(
        "{op}: unexpected script reply {reply:?}; is the server Redis 6.2 or newer and the key \
         written only by dlock?"
    ))
}

/// Releases, in the background, whatever an unfinished acquire may have left on the server: a
/// lock taken by a request whose reply never arrived, or a queue entry. Owner-checked, so it is
/// harmless when nothing was left.
struct Cleanup<'a> {
    mutex: &'a Mutex,
    token: OwnerToken,
    entry: Option<Arc<str>>,
    armed: bool,
}

impl<'a> Cleanup<'a> {
    /// Armed from the start: the first request is about to be sent.
    fn new(mutex: &'a Mutex, token: OwnerToken) -> Self {
        Self {
            mutex,
            token,
            entry: None,
            armed: true,
        }
    }

    fn arm(&mut self, entry: Arc<str>) {
        self.entry = Some(entry);
        self.armed = true;
    }

    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.mutex.shared.release_in_background(
                self.mutex.keys.clone(),
                self.token,
                self.entry.take(),
            );
        }
    }
}
