//! The distributed mutex: [`Mutex`] (a handle on one lock name) and [`MutexGuard`] (one held
//! acquisition).
//!
//! Every state change is one Lua script (`scripts/*.lua`): acquire takes the lock or queues the
//! caller in one round trip, release hands the lock to the oldest live waiter, extend renews the
//! lease; release and extend check the owner token. Waiting is push-based, see [`crate::wait`].

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::client::Shared;
use crate::error::{Error, ErrorKind, Result};
use crate::key::LockKeys;
use crate::lease::{self, validate_ttl};
use crate::scripts;
use crate::token::{FencingToken, OwnerToken};
use crate::wait::{Grant, Registration};

/// The shortest pause between two attempts of a waiting acquire (when the holder's remaining
/// lease is about to run out).
const MIN_NAP: Duration = Duration::from_millis(1);

/// Options of a [`Mutex`] handle; see [`crate::Client::mutex_with`].
///
/// ```
/// use std::time::Duration;
/// let options = dlock_core::MutexOptions::new()
///     .ttl(Duration::from_secs(10))
///     .label("nightly-report");
/// # let _ = options;
/// ```
#[derive(Clone, Debug, Default)]
pub struct MutexOptions {
    pub(crate) ttl: Option<Duration>,
    pub(crate) label: Option<String>,
}

impl MutexOptions {
    /// Options with every default: the client's default TTL, no label.
    pub fn new() -> Self {
        Self::default()
    }

    /// The lease of each acquisition, from [`crate::MIN_TTL`] to [`crate::MAX_TTL`]. A holder that
    /// crashes keeps everyone else out for at most this long.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// A short free-text label stored with the holder's host and pid, for operators.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
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
    keys: Arc<LockKeys>,
    ttl: Duration,
    /// Holder metadata stored with the lock: `<host>\x1f<pid>\x1f<label>`.
    meta: Arc<str>,
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

impl Mutex {
    pub(crate) fn new(
        shared: Arc<Shared>,
        keys: Arc<LockKeys>,
        ttl: Duration,
        meta: Arc<str>,
    ) -> Self {
        Self {
            shared,
            keys,
            ttl,
            meta,
        }
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    /// The lease each acquisition gets.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Takes the lock if it is free, without waiting: one round trip.
    ///
    /// Returns `Ok(None)` when another owner holds it.
    ///
    /// # Errors
    /// [`ErrorKind::Connection`] or [`ErrorKind::Timeout`] when Redis does not answer within the
    /// command timeout; [`ErrorKind::WrongType`] when the lock's key holds another type.
    ///
    /// # Cancel safety
    /// Cancel safe. If the future is dropped after the request was sent, the lock may have been
    /// taken on the server; it is released in the background (owner-checked), so nothing stays
    /// held by an acquisition nobody knows about.
    pub async fn try_acquire(&self) -> Result<Option<MutexGuard>> {
        let token = OwnerToken::generate()?;
        let mut cleanup = Cleanup::new(self, token);
        let sent = Instant::now();
        let outcome = self.attempt(token, Mode::Try, "").await?;
        cleanup.disarm();
        Ok(match outcome {
            Attempt::Acquired { fence, pttl } => {
                tracing::debug!(lock = %self.keys.name, fence, "dlock: acquired");
                Some(self.guard(token, fence, lease::safe_until(sent, pttl, self.ttl), None))
            }
            Attempt::Held { pttl, .. } => {
                tracing::debug!(lock = %self.keys.name, pttl_ms = pttl.as_millis(), "dlock: held by another owner");
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

    async fn acquire_until(&self, wait: Option<Duration>) -> Result<MutexGuard> {
        let span = tracing::debug_span!("dlock.acquire", lock = %self.keys.name);
        let started = Instant::now();
        let deadline = wait.and_then(|w| started.checked_add(w));
        let result = self.acquire_inner(deadline).instrument(span).await;
        if let Ok(guard) = &result {
            tracing::debug!(
                lock = %self.keys.name,
                fence = guard.fence.get(),
                waited_us = started.elapsed().as_micros(),
                "dlock: acquired"
            );
        }
        result.map_err(|e| match e.kind() {
            ErrorKind::Busy => Error::new(
                ErrorKind::Busy,
                format!(
                    "lock `{}` was held by another owner for the whole wait of {:?}",
                    self.keys.name,
                    started.elapsed()
                ),
            ),
            _ => e,
        })
    }

    async fn acquire_inner(&self, deadline: Option<Instant>) -> Result<MutexGuard> {
        let token = OwnerToken::generate()?;
        let mut cleanup = Cleanup::new(self, token);
        let channel = self.keys.wake_channel(&self.shared.client_id);

        // Uncontended fast path: one round trip, no subscription. Skipped when this client is
        // subscribed already (other local waiters exist), as the lock is then most likely held.
        if !self.shared.waiters.is_subscribed(&channel) {
            let sent = Instant::now();
            let outcome = self.attempt(token, Mode::Try, "").await?;
            cleanup.disarm();
            match outcome {
                Attempt::Acquired { fence, pttl } => {
                    let safe_until = lease::safe_until(sent, pttl, self.ttl);
                    return Ok(self.guard(token, fence, safe_until, None));
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
        let _membership = self.shared.waiters.join(&self.shared.conn, channel).await?;
        let entry: Box<str> = format!(
            "{} {} {} {}",
            token.as_str(),
            self.shared.client_id,
            lease::millis(self.ttl),
            self.meta
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
                    let safe_until = lease::safe_until(sent, pttl, self.ttl);
                    return Ok(self.guard(token, fence, safe_until, Some(registration)));
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
                                let safe_until = granted_safe_until(&grant, sent, server_ms);
                                return Ok(self.guard(token, grant.fence, safe_until, Some(registration)));
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
        let mut invocation = scripts::ACQUIRE.prepare_invoke();
        invocation
            .key(&*self.keys.lock)
            .key(&*self.keys.fence)
            .key(&*self.keys.queue)
            .arg(token.as_bytes())
            .arg(lease::millis(self.ttl))
            .arg(&*self.meta)
            .arg(mode.as_str())
            .arg(entry);
        let reply: Vec<i64> = self
            .shared
            .eval(&invocation, "acquire", &self.keys.name)
            .await?;
        match *reply.as_slice() {
            [1, fence, pttl] => Ok(Attempt::Acquired {
                fence: u64::try_from(fence).map_err(|_| unexpected("acquire", &reply))?,
                pttl: millis_or(pttl, self.ttl),
            }),
            [0, pttl, server_ms] => Ok(Attempt::Held {
                pttl: millis_or(pttl, self.ttl),
                server_ms,
            }),
            _ => Err(unexpected("acquire", &reply)),
        }
    }

    fn guard(
        &self,
        token: OwnerToken,
        fence: u64,
        safe_until: Instant,
        registration: Option<Registration>,
    ) -> MutexGuard {
        MutexGuard {
            shared: self.shared.clone(),
            keys: self.keys.clone(),
            token,
            fence: FencingToken::new(fence),
            ttl: self.ttl,
            safe_until,
            done: false,
            _registration: registration,
        }
    }
}

impl fmt::Debug for Mutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            shared: _,
            keys,
            ttl,
            meta: _,
        } = self;
        f.debug_struct("Mutex")
            .field("name", &keys.name)
            .field("ttl", ttl)
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

fn unexpected(op: &str, reply: &[i64]) -> Error {
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
    entry: Option<Box<str>>,
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

    fn arm(&mut self, entry: Box<str>) {
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

/// What [`MutexGuard::release`] found on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseOutcome {
    /// We still owned the lock and released it (handing it to the next waiter, if any).
    Released,
    /// The lease had expired and nobody holds the lock: nothing was changed.
    Expired,
    /// The lease had expired and another owner holds the lock now: it was left untouched.
    /// Whatever the guard protected may have overlapped with that owner.
    TakenOver,
}

impl ReleaseOutcome {
    /// Whether we still owned the lock when releasing it.
    pub fn was_held(self) -> bool {
        self == Self::Released
    }
}

/// What [`MutexGuard::extend`] found on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExtendOutcome {
    /// We still owned the lock; it now has the new lease.
    Extended,
    /// The lease had expired and nobody holds the lock: nothing was re-created.
    Expired,
    /// The lease had expired and another owner holds the lock now: it was left untouched.
    TakenOver,
}

/// One held acquisition of a [`Mutex`].
///
/// Release it with [`MutexGuard::release`], which reports whether we still owned the lock.
/// Dropping the guard instead releases it in the background, best effort: it never blocks and
/// never panics, also outside a runtime, where the lease simply expires.
///
/// ```no_run
/// # async fn demo(lock: dlock_core::Mutex) -> Result<(), dlock_core::Error> {
/// let guard = lock.acquire().await?;
/// assert!(guard.remaining() > std::time::Duration::ZERO);
/// if !guard.release().await?.was_held() {
///     eprintln!("the lease ran out before we finished: the work may have overlapped");
/// }
/// # Ok(()) }
/// ```
pub struct MutexGuard {
    shared: Arc<Shared>,
    keys: Arc<LockKeys>,
    token: OwnerToken,
    fence: FencingToken,
    ttl: Duration,
    safe_until: Instant,
    /// Set once release got an answer: Drop has nothing left to do.
    done: bool,
    /// Kept while held so that a late duplicate of our grant is recognised as ours rather than
    /// released as an orphan.
    _registration: Option<Registration>,
}

impl MutexGuard {
    /// The lock name.
    pub fn name(&self) -> &str {
        &self.keys.name
    }

    /// The fencing token of this acquisition: larger than that of every earlier acquisition of
    /// the same name.
    pub fn fencing_token(&self) -> FencingToken {
        self.fence
    }

    /// The lease length of the last acquire or extend.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The last instant at which this guard may act as the owner (monotonic clock): the lease
    /// counted from when the request that set it was sent, less a clock-drift allowance.
    pub fn safe_until(&self) -> Instant {
        self.safe_until
    }

    /// How much of the lease is left, by [`MutexGuard::safe_until`]; zero once it has run out.
    pub fn remaining(&self) -> Duration {
        self.safe_until.saturating_duration_since(Instant::now())
    }

    /// Gives the lock a new lease of `ttl`, counted from now, if we still own it.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a TTL out of range; [`ErrorKind::Connection`] or
    /// [`ErrorKind::Timeout`] when Redis does not answer in time (the lease is unchanged or
    /// extended; [`MutexGuard::remaining`] keeps the old, conservative value).
    ///
    /// # Cancel safety
    /// Cancel safe: extending is idempotent, and the guard's view of the lease only changes
    /// once the answer has arrived.
    pub async fn extend(&mut self, ttl: Duration) -> Result<ExtendOutcome> {
        let ttl = validate_ttl(ttl)?;
        let mut invocation = scripts::EXTEND.prepare_invoke();
        invocation
            .key(&*self.keys.lock)
            .arg(self.token.as_bytes())
            .arg(lease::millis(ttl));
        let sent = Instant::now();
        let reply: i64 = self
            .shared
            .eval(&invocation, "extend", &self.keys.name)
            .await?;
        let outcome = match reply {
            1 => ExtendOutcome::Extended,
            0 => ExtendOutcome::Expired,
            -1 => ExtendOutcome::TakenOver,
            _ => return Err(unexpected("extend", &[reply])),
        };
        if outcome == ExtendOutcome::Extended {
            self.ttl = ttl;
            self.safe_until = lease::safe_until(sent, ttl, ttl);
        } else {
            self.safe_until = self.safe_until.min(sent);
        }
        tracing::debug!(lock = %self.keys.name, ?outcome, ttl_ms = ttl.as_millis(), "dlock: extend");
        Ok(outcome)
    }

    /// Releases the lock if we still own it and says what was found.
    ///
    /// # Errors
    /// [`ErrorKind::Connection`] or [`ErrorKind::Timeout`] when Redis does not answer in time;
    /// the release is then retried once in the background, and the lease expires otherwise.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped before the answer arrived, the guard's drop
    /// releases again in the background; release is owner-checked, so running twice is harmless.
    pub async fn release(mut self) -> Result<ReleaseOutcome> {
        let mut invocation = scripts::RELEASE.prepare_invoke();
        invocation
            .key(&*self.keys.lock)
            .key(&*self.keys.fence)
            .key(&*self.keys.queue)
            .arg(self.token.as_bytes())
            .arg("")
            .arg(self.shared.conn.publish_command());
        let reply: i64 = self
            .shared
            .eval(&invocation, "release", &self.keys.name)
            .await?;
        self.done = true;
        let outcome = match reply {
            1 | 2 => ReleaseOutcome::Released,
            0 => ReleaseOutcome::Expired,
            -1 => ReleaseOutcome::TakenOver,
            _ => return Err(unexpected("release", &[reply])),
        };
        tracing::debug!(lock = %self.keys.name, ?outcome, handed_off = reply == 2, "dlock: release");
        Ok(outcome)
    }
}

impl Drop for MutexGuard {
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            self.shared
                .release_in_background(self.keys.clone(), self.token, None);
        }
    }
}

impl fmt::Debug for MutexGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            shared: _,
            keys,
            token,
            fence,
            ttl,
            safe_until: _,
            done,
            _registration: _,
        } = self;
        f.debug_struct("MutexGuard")
            .field("name", &keys.name)
            .field("token", token)
            .field("fence", fence)
            .field("ttl", ttl)
            .field("remaining", &self.remaining())
            .field("released", done)
            .finish()
    }
}
