//! [`RwLock`]: a distributed read-write lock — many readers or one writer — fair, leased and
//! fenced, on the shared admission of `kinds/shared.rs` (`scripts/shared.lua`): a reader weighs 1 and
//! a writer weighs the whole limit, so a writer is admitted alone and readers together.
//!
//! * **Fair (FIFO, task-fair).** Readers and writers wait in one queue. A read is granted when
//!   no writer holds and nobody is queued ahead of it; a release admits the whole run of readers
//!   at the head of the queue and stops at the first writer. So a stream of readers never
//!   starves a queued writer (readers that come after it queue behind it), and a writer never
//!   overtakes readers queued before it.
//! * **Per-holder leases.** Every reader has its own token, lease and fence, renewed in the
//!   watchdog's batches; a crashed reader's hold ends at its own deadline and nobody else's.
//! * **Fenced.** Every grant takes the next fence of the slot's counter, so a writer's fence
//!   exceeds that of every reader and writer granted before it.
//! * **Downgrade and upgrade** are atomic (`scripts/rw_change.lua`): [`WriteGuard::downgrade`]
//!   keeps the lock as a reader and admits the readers queued at the head;
//!   [`ReadGuard::try_upgrade`] never waits — it succeeds only for the sole reader with nobody
//!   queued, otherwise it fails at once (two readers that both waited to upgrade would wait for
//!   each other forever).
//! * **Reentrancy for nested calls only**, as the mutex's (`holds/hold.rs`): inside the body of
//!   [`RwLock::with_read`] or [`RwLock::with_write`], a nested `read` is granted locally without
//!   queueing (it could otherwise wait behind a writer queued for the lock its own body holds);
//!   a nested `write` inside a write re-enters; a nested `write` inside a read would be an
//!   upgrade and fails at once with [`ErrorKind::Reentrancy`].

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::client::context::Context;
use crate::error::{Error, ErrorKind, Result};
use crate::holds::guard::{self, MutexGuard};
use crate::holds::hold::{self, Hold, Patience};
use crate::key::{LockKeys, LockKind, validate_name};
use crate::kinds::shared::SharedLock;
use crate::lease::{Lease, LeaseLost, LostReason};
use crate::options::{LockSettings, MutexOptions, Wait};
use crate::scripts::{self, Call, RwChangeReply, unexpected};
use crate::timing;
use crate::token::FencingToken;
use crate::transport::ReleaseOnDrop;

/// A writer's weight: the whole limit of the lock's admission, so it fits only when nobody
/// holds. (A reader weighs 1; this many readers at once is far beyond any deployment.)
const WRITER: u32 = 1 << 30;

/// A handle on the distributed read-write lock called `name`. Cheap to clone.
///
/// ```no_run
/// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
/// let prices = client.rw_lock("prices")?;
/// let read = prices.read().await?; // beside other readers, never beside a writer
/// // … read the prices …
/// read.release().await?;
/// let write = prices.write().await?; // alone; readers that came later wait behind it
/// // … write the prices with write.fencing_token() …
/// write.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RwLock {
    pub(crate) shared: Arc<SharedLock>,
}

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

impl Access {
    fn weight(self) -> u32 {
        match self {
            Self::Read => 1,
            Self::Write => WRITER,
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

impl RwLock {
    pub(crate) fn new(ctx: Arc<Context>, keys: LockKeys, settings: LockSettings) -> Self {
        Self {
            shared: Arc::new(SharedLock {
                ctx,
                keys,
                limit: WRITER,
                settings,
            }),
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.shared.keys.name()
    }

    /// The lease each hold gets (renewed by the watchdog if enabled).
    pub fn ttl(&self) -> Duration {
        self.shared.settings.ttl
    }

    /// Takes a read hold if no writer holds and nobody waits; `Ok(None)` otherwise. Inside the
    /// body of a hold of this lock it is a nested read, granted locally.
    ///
    /// # Errors
    /// [`ErrorKind::Connection`] or [`ErrorKind::Timeout`] when Redis does not answer in time;
    /// [`ErrorKind::WrongType`] when the lock's keys hold data dlock did not write;
    /// [`ErrorKind::Reentrancy`] for a nested read through a non-reentrant handle or beyond 64
    /// levels; [`ErrorKind::Shutdown`] after [`crate::Client::shutdown`].
    ///
    /// # Cancel safety
    /// Cancel safe: a hold the request may have taken is given back in the background.
    pub async fn try_read(&self) -> Result<Option<ReadGuard>> {
        let guard = self.try_hold(Access::Read).await?;
        guard.map(|guard| ReadGuard::new(guard, self)).transpose()
    }

    /// Waits, in FIFO order with the writers, for a read hold.
    ///
    /// # Errors
    /// As [`RwLock::try_read`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves the queue and gives back a hold granted
    /// meanwhile, in the background.
    pub async fn read(&self) -> Result<ReadGuard> {
        let guard = self.hold_until(Access::Read, None).await?;
        ReadGuard::new(guard, self)
    }

    /// As [`RwLock::read`], waiting at most `wait`.
    ///
    /// # Errors
    /// [`ErrorKind::Busy`] when the wait ended first; otherwise as [`RwLock::try_read`].
    ///
    /// # Cancel safety
    /// As [`RwLock::read`].
    pub async fn read_timeout(&self, wait: Duration) -> Result<ReadGuard> {
        let guard = self.hold_until(Access::Read, Some(wait)).await?;
        ReadGuard::new(guard, self)
    }

    /// Takes the write hold if nobody holds and nobody waits; `Ok(None)` otherwise.
    ///
    /// # Errors
    /// As [`RwLock::try_read`], and [`ErrorKind::Reentrancy`] inside the body of a read hold of
    /// this lock (that would be an upgrade: see [`ReadGuard::try_upgrade`]).
    ///
    /// # Cancel safety
    /// As [`RwLock::try_read`].
    pub async fn try_write(&self) -> Result<Option<WriteGuard>> {
        let guard = self.try_hold(Access::Write).await?;
        guard.map(|guard| WriteGuard::new(guard, self)).transpose()
    }

    /// Waits, in FIFO order with the readers, for the write hold.
    ///
    /// # Errors
    /// As [`RwLock::try_write`].
    ///
    /// # Cancel safety
    /// As [`RwLock::read`].
    pub async fn write(&self) -> Result<WriteGuard> {
        let guard = self.hold_until(Access::Write, None).await?;
        WriteGuard::new(guard, self)
    }

    /// As [`RwLock::write`], waiting at most `wait`.
    ///
    /// # Errors
    /// [`ErrorKind::Busy`] when the wait ended first; otherwise as [`RwLock::try_write`].
    ///
    /// # Cancel safety
    /// As [`RwLock::read`].
    pub async fn write_timeout(&self, wait: Duration) -> Result<WriteGuard> {
        let guard = self.hold_until(Access::Write, Some(wait)).await?;
        WriteGuard::new(guard, self)
    }

    /// Runs `work` under a read hold, then releases it; as [`crate::Mutex::with_lock`] (the
    /// lease's loss stops `work` unless the options say [`crate::OnLost::Signal`]). `work` is
    /// the body of the hold: a `read` nested in it is granted locally, a `write` nested in it
    /// fails at once.
    ///
    /// # Errors
    /// [`ErrorKind::Busy`] when the wait ends first, [`ErrorKind::LeaseLost`] when the lease is
    /// lost and `work` was stopped, otherwise as [`RwLock::read`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future drops `work` and releases the hold in the background.
    pub async fn with_read<F, Fut, T>(&self, wait: Wait, work: F) -> Result<T>
    where
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.hold_until(Access::Read, wait.limit()).await?;
        guard::run_body(guard, self.shared.settings.on_lost, work).await
    }

    /// Runs `work` under the write hold, then releases it; as [`RwLock::with_read`]. A `read`
    /// or `write` nested in `work` re-enters.
    ///
    /// # Errors
    /// As [`RwLock::with_read`].
    ///
    /// # Cancel safety
    /// As [`RwLock::with_read`].
    pub async fn with_write<F, Fut, T>(&self, wait: Wait, work: F) -> Result<T>
    where
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = T>,
    {
        let guard = self.hold_until(Access::Write, wait.limit()).await?;
        guard::run_body(guard, self.shared.settings.on_lost, work).await
    }

    async fn try_hold(&self, access: Access) -> Result<Option<MutexGuard>> {
        match self.hold_until(access, Some(Duration::ZERO)).await {
            Ok(guard) => Ok(Some(guard)),
            Err(e) if e.is_busy() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A hold of `access`: nested in the body that holds this lock, or admitted by Redis.
    async fn hold_until(&self, access: Access, wait: Option<Duration>) -> Result<MutexGuard> {
        let started = Instant::now();
        let ctx = &self.shared.ctx;
        if let Some(outer) = hold::enclosing(&ctx.transport, &self.shared.keys.lock) {
            if access == Access::Write && !outer.lease().exclusive {
                return Err(Error::new(
                    ErrorKind::Reentrancy,
                    format!(
                        "read-write lock `{}`: write asked for inside the body of a read hold \
                         of the same lock; that is an upgrade, which would wait for the \
                         body's own read. Take the write hold first (it allows nested reads), \
                         or use ReadGuard::try_upgrade",
                        self.name()
                    ),
                ));
            }
            let deadline = wait.and_then(|w| started.checked_add(w));
            let patience = match wait {
                Some(Duration::ZERO) => Patience::Try,
                _ => Patience::Until(deadline),
            };
            let reentrant = self.shared.settings.reentrant;
            let nested = Box::pin(hold::nest(outer, patience, reentrant)).await?;
            return nested
                .map(MutexGuard::new)
                .ok_or_else(|| self.busy(access, wait, started.elapsed()));
        }
        if ctx.is_closed() {
            return Err(ctx.closed_error(self.name()));
        }
        let Some(admitted) = self.shared.admit(access.weight(), wait).await? else {
            return Err(self.busy(access, wait, started.elapsed()));
        };
        tracing::debug!(lock = %self.name(), access = access.noun(), fence = admitted.fence, "dlock: read-write lock acquired");
        let lease = self.shared.lease(admitted, access == Access::Write)?;
        Ok(MutexGuard::new(Hold::First(lease)))
    }

    fn busy(&self, access: Access, wait: Option<Duration>, waited: Duration) -> Error {
        let name = self.name();
        let noun = access.noun();
        let message = if wait == Some(Duration::ZERO) {
            format!(
                "read-write lock `{name}`: no {noun} hold now (a writer holds, or others wait \
                 ahead; tried once without waiting: to wait, use {noun}() or {noun}_timeout)"
            )
        } else {
            format!("read-write lock `{name}`: no {noun} hold within the wait of {waited:?}")
        };
        Error::new(ErrorKind::Busy, message)
    }

    /// Passes `guard`'s hold to a new token in the other mode (`rw_change.lua`).
    async fn change(&self, guard: MutexGuard, to: Access) -> Result<Changed> {
        let from = match to {
            Access::Read => "write",
            Access::Write => "read",
        };
        if guard.depth() > 1 {
            return Err(Error::new(
                ErrorKind::Reentrancy,
                format!(
                    "read-write lock `{}`: a nested {from} hold cannot change its mode; change \
                     the outermost hold",
                    self.name()
                ),
            ));
        }
        let shared = &self.shared;
        let old = guard.hold().lease().token;
        let new = shared.ctx.tokens.next();
        let mut cleanup = ReleaseOnDrop::new(&shared.ctx.transport, &shared.keys, new);
        let mut call = Call::new(&scripts::RW_CHANGE, 1);
        call.arg(&*shared.keys.lock)
            .arg(old)
            .arg(new)
            .arg(match to {
                Access::Read => "down",
                Access::Write => "up",
            })
            .arg(WRITER)
            .arg(timing::millis(shared.settings.ttl))
            .arg(shared.keys.counter());
        let sent = Instant::now();
        let what = match to {
            Access::Read => "downgrade",
            Access::Write => "upgrade",
        };
        // On an error the guard is dropped (its hold given back in the background) and so is
        // `cleanup` (the new token's, if the change ran): the caller holds nothing.
        let reply = shared.ctx.transport.run(&call, what, self.name()).await?;
        let reply = RwChangeReply::decode(&reply).ok_or_else(|| unexpected(what, &reply))?;
        cleanup.disarm();
        match reply {
            RwChangeReply::Changed { fence, pttl } => {
                guard.pass_on();
                let admitted = shared.admitted(new, fence, sent, pttl, None);
                let lease = shared.lease(admitted, to == Access::Write)?;
                Ok(Changed::To(MutexGuard::new(Hold::First(lease))))
            }
            RwChangeReply::Gone => {
                guard.hold().lease().fire_lost(LostReason::Expired);
                Err(LeaseLost::new(LostReason::Expired).into_error(self.name()))
            }
            RwChangeReply::Refused { used, waiting } => Ok(Changed::Refused {
                guard,
                readers: used,
                waiting,
            }),
        }
    }
}

/// What a mode change came to.
enum Changed {
    To(MutexGuard),
    /// An upgrade refused: `readers` hold (the caller among them), `waiting` are queued.
    Refused {
        guard: MutexGuard,
        readers: u64,
        waiting: u64,
    },
}

impl fmt::Debug for RwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RwLock")
            .field("name", &self.name())
            .field("ttl", &self.ttl())
            .finish_non_exhaustive()
    }
}

/// The fencing token of a hold of a read-write lock: every one is issued with its grant (a
/// nested hold shares its acquisition's).
fn fence_of(guard: &MutexGuard) -> Result<FencingToken> {
    guard.issued_fencing_token().ok_or_else(|| {
        Error::protocol(format!(
            "read-write lock `{}`: a hold without a fencing token",
            guard.name()
        ))
    })
}

/// A read hold of an [`RwLock`]: other readers may hold beside it, never a writer. Dropping it
/// gives it back in the background; [`ReadGuard::release`] does so and says what happened.
#[must_use = "the read hold is given back when the guard is dropped"]
pub struct ReadGuard {
    guard: MutexGuard,
    fence: FencingToken,
    lock: RwLock,
}

impl ReadGuard {
    fn new(guard: MutexGuard, lock: &RwLock) -> Result<Self> {
        Ok(Self {
            fence: fence_of(&guard)?,
            guard,
            lock: lock.clone(),
        })
    }

    /// Becomes the writer, at once or not at all: only the sole reader with nobody queued can
    /// upgrade (two readers that both waited to upgrade would wait for each other forever).
    /// The write hold is a new grant with a new fence, larger than every reader's; this read
    /// hold's lease ends with it ([`ReadGuard::lost`] resolves with
    /// [`LostReason::Released`]).
    ///
    /// ```no_run
    /// # async fn demo(lock: dlock_core::RwLock) -> Result<(), dlock_core::Error> {
    /// let read = lock.read().await?;
    /// match read.try_upgrade().await {
    ///     Ok(write) => { /* … write … */ write.release().await?; }
    ///     Err(refused) => match refused.into_read_guard() {
    ///         Some(read) => { /* others read: still reading */ read.release().await?; }
    ///         None => { /* the request failed: nothing is held */ }
    ///     },
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// An [`UpgradeError`]: [`ErrorKind::Busy`] when others read or wait (this read hold is
    /// kept and given back in the error); [`ErrorKind::Reentrancy`] for a nested hold (kept as
    /// well); otherwise — the lease was lost, Redis did not answer — nothing is held any more.
    ///
    /// # Cancel safety
    /// Dropping the future gives back both the read hold and a write hold the request may have
    /// taken, in the background.
    pub async fn try_upgrade(self) -> std::result::Result<WriteGuard, UpgradeError> {
        let Self { guard, lock, .. } = self;
        if guard.depth() > 1 {
            let error = Error::new(
                ErrorKind::Reentrancy,
                format!(
                    "read-write lock `{}`: a nested read hold cannot upgrade; upgrade the \
                     outermost hold",
                    guard.name()
                ),
            );
            return Err(UpgradeError::kept(guard, lock, error));
        }
        match lock.change(guard, Access::Write).await {
            Ok(Changed::To(guard)) => WriteGuard::new(guard, &lock).map_err(UpgradeError::lost),
            Ok(Changed::Refused {
                guard,
                readers,
                waiting,
            }) => {
                let error = Error::new(
                    ErrorKind::Busy,
                    format!(
                        "read-write lock `{}`: upgrade refused: {} other reader(s) hold it and \
                         {waiting} caller(s) wait; an upgrade never waits (it could deadlock). \
                         Release the read hold and take the write hold",
                        lock.name(),
                        readers.saturating_sub(1)
                    ),
                );
                Err(UpgradeError::kept(guard, lock, error))
            }
            Err(error) => Err(UpgradeError::lost(error)),
        }
    }
}

guard::hold_api!(ReadGuard, "read hold");

impl fmt::Debug for ReadGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadGuard")
            .field("name", &self.name())
            .field("fence", &self.fence)
            .field("depth", &self.depth())
            .finish_non_exhaustive()
    }
}

/// The write hold of an [`RwLock`]: nobody else holds beside it. Dropping it gives it back in
/// the background; [`WriteGuard::release`] does so and says what happened.
#[must_use = "the write hold is given back when the guard is dropped"]
pub struct WriteGuard {
    guard: MutexGuard,
    fence: FencingToken,
    lock: RwLock,
}

impl WriteGuard {
    fn new(guard: MutexGuard, lock: &RwLock) -> Result<Self> {
        Ok(Self {
            fence: fence_of(&guard)?,
            guard,
            lock: lock.clone(),
        })
    }

    /// Becomes a reader without letting go: in one step the write hold becomes a read hold (a
    /// new grant with a new fence and lease) and the readers queued at the head of the queue,
    /// up to the first writer, are admitted beside it. This write hold's lease ends with it.
    ///
    /// # Errors
    /// [`ErrorKind::Reentrancy`] for a nested hold (which is given back, as when dropped);
    /// [`ErrorKind::LeaseLost`] when the lease had ended; connection errors. After an error
    /// nothing is held (what the request may have taken is given back in the background).
    ///
    /// # Cancel safety
    /// Dropping the future gives back the hold, in either mode, in the background.
    pub async fn downgrade(self) -> Result<ReadGuard> {
        let Self { guard, lock, .. } = self;
        match lock.change(guard, Access::Read).await? {
            Changed::To(guard) => ReadGuard::new(guard, &lock),
            Changed::Refused { .. } => Err(Error::protocol(format!(
                "read-write lock `{}`: the downgrade was answered as a refused upgrade",
                lock.name()
            ))),
        }
    }
}

guard::hold_api!(WriteGuard, "write hold");

impl fmt::Debug for WriteGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteGuard")
            .field("name", &self.name())
            .field("fence", &self.fence)
            .field("depth", &self.depth())
            .finish_non_exhaustive()
    }
}

/// A refused or failed [`ReadGuard::try_upgrade`]: the error, and the read hold when it is
/// still held (the upgrade was refused).
pub struct UpgradeError {
    error: Error,
    read: Option<ReadGuard>,
}

impl UpgradeError {
    fn kept(guard: MutexGuard, lock: RwLock, error: Error) -> Self {
        let read = ReadGuard::new(guard, &lock).ok();
        Self { error, read }
    }

    fn lost(error: Error) -> Self {
        Self { error, read: None }
    }

    /// Why the upgrade did not happen.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The read hold, when it is still held (the upgrade was refused); `None` when the request
    /// failed and nothing is held.
    pub fn into_read_guard(self) -> Option<ReadGuard> {
        self.read
    }

    /// The error alone (the read hold, if still held, is given back in the background): for
    /// `?` in a function that returns [`crate::Result`],
    /// `guard.try_upgrade().await.map_err(UpgradeError::into_error)?`. (There is deliberately no
    /// `From<UpgradeError> for Error`: a second `From` impl would break type inference of `?` on
    /// errors built by closures in callers' code.)
    pub fn into_error(self) -> Error {
        self.error
    }
}

impl fmt::Debug for UpgradeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpgradeError")
            .field("error", &self.error)
            .field("still_reading", &self.read.is_some())
            .finish()
    }
}

impl fmt::Display for UpgradeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for UpgradeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl Client {
    /// A handle on the distributed read-write lock called `name` (default options: each hold
    /// has the client's default TTL as a fixed lease); see [`RwLock`]. Its keys are its own: a
    /// mutex or semaphore of the same name is another lock.
    ///
    /// ```no_run
    /// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
    /// let catalog = client.rw_lock("catalog")?;
    /// let read = catalog.read().await?;
    /// # drop(read); Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for a bad name (as [`Client::mutex`]).
    pub fn rw_lock(&self, name: &str) -> Result<RwLock> {
        self.rw_lock_with(name, MutexOptions::new())
    }

    /// A handle on the read-write lock called `name` with explicit options: the lease (`ttl`),
    /// the watchdog, `max_hold`, the holder's `label`, `reentrant` (nested calls inside
    /// [`RwLock::with_read`] / [`RwLock::with_write`] bodies) and `on_lost` apply to every hold
    /// as to a mutex's; `fenced` does not (every hold is fenced).
    ///
    /// # Errors
    /// As [`Client::rw_lock`], and for invalid options (as [`Client::mutex_with`]).
    pub fn rw_lock_with(&self, name: &str, options: MutexOptions) -> Result<RwLock> {
        validate_name(name)?;
        let settings = options.settings(self.ctx.config.default_ttl)?;
        let keys = LockKeys::of_kind(LockKind::RwLock, &self.ctx.config.key_prefix, name);
        Ok(RwLock::new(self.ctx.clone(), keys, settings))
    }
}
