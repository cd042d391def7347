//! [`MultiLock`]: several mutexes taken as one — all or none — without deadlocks.
//!
//! * **One canonical order.** The names are deduplicated and always taken in one order — by
//!   Redis Cluster slot, then by key — whatever order the caller gave them in. A caller waits
//!   for a member only while it holds nothing that comes after it, so two multi-locks (or a
//!   multi-lock and a plain mutex) can never wait for each other in a cycle: whoever holds the
//!   first contested name in the order finishes.
//! * **Fast path.** The attempt at every member is sent at once (the connection pipelines them;
//!   on a cluster, each node gets its slots' share), so an uncontended multi-lock costs about
//!   one round trip per node, not one per name. The members after the first busy one are given
//!   back at once, and the rest are waited for in order, each in its own FIFO queue with pushed
//!   hand-offs (the mutex's slow path).
//! * **One lease per name.** Each member is a mutex hold of its own, with the options the
//!   multi-lock was built with (the watchdog renews them in its batches); the guard's
//!   [`MultiGuard::lost`] resolves when *any* member is lost, and its safe-until is the
//!   earliest member's. A member whose fixed lease ran out while a later member was waited for
//!   makes the whole acquisition start again (within the wait), so a guard never starts with a
//!   lost member; prefer the watchdog when members may wait long.
//! * **Fenced per name.** [`MultiGuard::fencing_tokens`] gives one fencing token per name, in
//!   the guard's order ([`MultiGuard::names`]).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;

use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::holds::guard::{ExtendOutcome, MutexGuard, ReleaseOutcome};
use crate::kinds::mutex::Mutex;
use crate::lease::{Lease, LeaseLost, LossSignal, watch_group};
use crate::options::MutexOptions;
use crate::runtime::Task;
use crate::token::FencingToken;

/// A handle on several mutexes taken together, all or none. Cheap to clone.
///
/// ```no_run
/// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
/// use std::time::Duration;
/// // A transfer locks both accounts; another transfer the other way round cannot deadlock.
/// let accounts = client.multi_lock(["account:17", "account:4"])?;
/// let guard = accounts.acquire_timeout(Duration::from_secs(5)).await?;
/// let fences = guard.fencing_tokens().await?; // one per name, in `guard.names()` order
/// # let _ = fences;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MultiLock {
    /// The members, deduplicated, in the canonical order.
    members: Vec<Mutex>,
}

impl MultiLock {
    /// `members` deduplicated and put in the canonical order (slot, then key).
    pub(crate) fn new(mut members: Vec<Mutex>) -> Result<Self> {
        if members.is_empty() {
            return Err(Error::invalid(
                "a multi-lock needs at least one lock name; give the names to take together",
            ));
        }
        members.sort_by(|a, b| {
            let (a, b) = (a.keys(), b.keys());
            (a.slot(), &a.lock).cmp(&(b.slot(), &b.lock))
        });
        members.dedup_by(|a, b| a.keys().lock == b.keys().lock);
        Ok(Self { members })
    }

    /// The member names, in the order they are taken.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.members.iter().map(Mutex::name)
    }

    /// Takes every member if each is free now; `Ok(None)` otherwise (nothing is held then).
    ///
    /// # Errors
    /// As [`Mutex::try_acquire`], for any member; whatever was taken is given back.
    ///
    /// # Cancel safety
    /// Cancel safe: members taken by a dropped attempt are given back in the background.
    pub async fn try_acquire(&self) -> Result<Option<MultiGuard>> {
        match self.acquire_until(Some(Duration::ZERO)).await {
            Ok(guard) => Ok(Some(guard)),
            Err(e) if e.is_busy() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Waits, member by member in the canonical order, until every member is held.
    ///
    /// # Errors
    /// As [`Mutex::acquire`], for any member; whatever was taken is given back.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future gives back the members held and leaves the queue it
    /// waits in, in the background.
    pub async fn acquire(&self) -> Result<MultiGuard> {
        self.acquire_until(None).await
    }

    /// As [`MultiLock::acquire`], waiting at most `wait` in all.
    ///
    /// # Errors
    /// [`ErrorKind::Busy`] when a member stayed held for the rest of the wait (nothing is held
    /// afterwards); otherwise as [`MultiLock::acquire`].
    ///
    /// # Cancel safety
    /// As [`MultiLock::acquire`].
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<MultiGuard> {
        self.acquire_until(Some(wait)).await
    }

    async fn acquire_until(&self, wait: Option<Duration>) -> Result<MultiGuard> {
        let started = Instant::now();
        let deadline = wait.and_then(|w| started.checked_add(w));
        loop {
            let guards = self.take_all(deadline).await?;
            // A fixed lease of an early member may have run out while a later one was waited
            // for: start again rather than hand out a guard with a lost member.
            if guards.iter().all(|g| g.lease().is_held()) {
                return Ok(MultiGuard::new(guards));
            }
            let _ = release_all(guards).await;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Error::new(
                    ErrorKind::Busy,
                    format!(
                        "multi-lock [{}]: a member's lease ran out while a later member was \
                         waited for, and the wait of {:?} is over; use the watchdog or longer \
                         leases for members that wait long",
                        self.joined_names(),
                        started.elapsed()
                    ),
                ));
            }
        }
    }

    /// One pass: every member tried at once, then the rest waited for in order from the first
    /// busy one.
    async fn take_all(&self, deadline: Option<Instant>) -> Result<Vec<MutexGuard>> {
        let tries = join_all(self.members.iter().map(Mutex::try_acquire)).await;
        let mut held = Vec::with_capacity(self.members.len());
        let mut first_busy = None;
        let mut failure = None;
        let mut later = Vec::new();
        for (i, attempt) in tries.into_iter().enumerate() {
            match attempt {
                Ok(Some(guard)) if first_busy.is_none() && failure.is_none() => held.push(guard),
                Ok(Some(guard)) => later.push(guard),
                Ok(None) => {
                    first_busy.get_or_insert(i);
                }
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        // Nothing after the first busy member may be held while it is waited for. (A release
        // whose answer is lost is retried in the background, and the lease ends anyway.)
        let _ = release_all(later).await;
        if let Some(e) = failure {
            let _ = release_all(held).await;
            return Err(e);
        }
        let Some(from) = first_busy else {
            return Ok(held);
        };
        for member in &self.members[from..] {
            let taken = match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    member.acquire_timeout(left).await
                }
                None => member.acquire().await,
            };
            match taken {
                Ok(guard) => held.push(guard),
                Err(e) => {
                    let _ = release_all(held).await;
                    if e.is_busy() {
                        return Err(Error::new(
                            ErrorKind::Busy,
                            format!(
                                "multi-lock [{}]: `{}` stayed held by another owner; nothing \
                                 of the multi-lock is held ({e})",
                                self.joined_names(),
                                member.name()
                            ),
                        ));
                    }
                    return Err(e);
                }
            }
        }
        Ok(held)
    }

    fn joined_names(&self) -> String {
        self.names().collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLock")
            .field("names", &self.names().collect::<Vec<_>>())
            .finish()
    }
}

/// Gives back every guard, concurrently, and says the worst of what was found (`Released`
/// when every member was still held).
async fn release_all(guards: Vec<MutexGuard>) -> Result<ReleaseOutcome> {
    let outcomes = join_all(guards.into_iter().map(MutexGuard::release)).await;
    let mut worst = ReleaseOutcome::Released;
    let mut error = None;
    for outcome in outcomes {
        match outcome {
            Ok(ReleaseOutcome::TakenOver) => worst = ReleaseOutcome::TakenOver,
            Ok(ReleaseOutcome::Expired) if worst != ReleaseOutcome::TakenOver => {
                worst = ReleaseOutcome::Expired;
            }
            Ok(_) => {}
            Err(e) => error = Some(e),
        }
    }
    match error {
        Some(e) => Err(e),
        None => Ok(worst),
    }
}

/// Every member of a [`MultiLock`], held. Dropping it gives them back in the background;
/// [`MultiGuard::release`] does so and says what happened.
#[must_use = "the locks are given back when the guard is dropped"]
pub struct MultiGuard {
    guards: Vec<MutexGuard>,
    /// The guard's loss (its first lost member's), its token, and how it is made known:
    /// decided by whoever sees a member lost first — [`MultiGuard::lost`] or the watcher — in
    /// the one order of `lease/loss.rs` (the token is cancelled before `lost()` can tell).
    loss: Arc<LossSignal>,
    /// The task that watches the members for the token, started with the first token.
    watcher: Task,
}

impl MultiGuard {
    fn new(guards: Vec<MutexGuard>) -> Self {
        Self {
            guards,
            loss: Arc::default(),
            watcher: Task::default(),
        }
    }

    /// The members' leases.
    fn leases(&self) -> Vec<Lease> {
        self.guards.iter().map(MutexGuard::lease).collect()
    }

    /// The member names, in the canonical order (that of [`MultiGuard::fencing_tokens`]).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.guards.iter().map(MutexGuard::name)
    }

    /// Guarded writes are not possible under several locks: their holds live in several
    /// cluster slots, which no one script reaches. The batch this returns fails at
    /// [`crate::GuardedWrite::exec`] with [`crate::ErrorKind::InvalidInput`] saying so; guard
    /// the write with one member's [`MutexGuard::guarded`], or check the members' fencing
    /// tokens where the data is ([`crate::Client::fenced_set`]).
    pub fn guarded(&self) -> crate::GuardedWrite {
        crate::GuardedWrite::cannot("MultiGuard")
    }

    /// One fencing token per member, in [`MultiGuard::names`] order (issued on demand, all in
    /// one go).
    ///
    /// # Errors
    /// As [`MutexGuard::fencing_token`], for any member.
    ///
    /// # Cancel safety
    /// Cancel safe: issuing is idempotent for each hold.
    pub async fn fencing_tokens(&self) -> Result<Vec<FencingToken>> {
        join_all(self.guards.iter().map(MutexGuard::fencing_token))
            .await
            .into_iter()
            .collect()
    }

    /// Until when every member is certainly held: the earliest member's safe-until.
    pub fn safe_until(&self) -> Instant {
        self.guards
            .iter()
            .map(MutexGuard::safe_until)
            .min()
            .unwrap_or_else(Instant::now)
    }

    /// How long every member is certainly held; zero once one ran out.
    pub fn remaining(&self) -> Duration {
        self.safe_until().saturating_duration_since(Instant::now())
    }

    /// Resolves when any member's lease is lost, with the reason of the first member found
    /// lost. When it resolves, every token of [`MultiGuard::cancellation_token`] is cancelled
    /// already.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes (a loss it made known stays known).
    pub async fn lost(&self) -> LeaseLost {
        watch_group(&self.loss, &self.leases(), 0).await
    }

    /// A token cancelled when any member's lease is lost (or the guard is released), before
    /// [`MultiGuard::lost`] resolves. Every call returns the same token; a background task
    /// watches the members for it (started with the first call, and again in the current
    /// runtime if the one it ran in has ended).
    pub fn cancellation_token(&self) -> CancellationToken {
        if !self.watcher.is_running() && self.loss.reason().is_none() {
            let (loss, leases) = (self.loss.clone(), self.leases());
            // Ends with the first lost member: a dropped guard releases its members.
            self.watcher.start(move || async move {
                watch_group(&loss, &leases, 0).await;
            });
        }
        self.loss.token().0
    }

    /// Sets a new lease of `ttl` from now on every member still held; `Extended` only when all
    /// were, otherwise the worst outcome found (the members found gone stay gone).
    ///
    /// # Errors
    /// As [`MutexGuard::extend`], for any member.
    ///
    /// # Cancel safety
    /// Cancel safe: extending is idempotent.
    pub async fn extend(&mut self, ttl: Duration) -> Result<ExtendOutcome> {
        let outcomes = join_all(self.guards.iter_mut().map(|g| g.extend(ttl))).await;
        let mut worst = ExtendOutcome::Extended;
        for outcome in outcomes {
            match outcome? {
                ExtendOutcome::TakenOver => worst = ExtendOutcome::TakenOver,
                ExtendOutcome::Expired if worst != ExtendOutcome::TakenOver => {
                    worst = ExtendOutcome::Expired;
                }
                _ => {}
            }
        }
        Ok(worst)
    }

    /// Gives every member back, concurrently; `Released` when every member was still held,
    /// otherwise the worst outcome found.
    ///
    /// # Errors
    /// As [`MutexGuard::release`], for any member (the others are released all the same).
    ///
    /// # Cancel safety
    /// Dropping the future gives back the members not yet released, in the background.
    pub async fn release(self) -> Result<ReleaseOutcome> {
        release_all(self.guards).await
    }
}

impl fmt::Debug for MultiGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiGuard")
            .field("names", &self.names().collect::<Vec<_>>())
            .field("remaining", &self.remaining())
            .finish()
    }
}

impl Client {
    /// A handle on the mutexes `names`, taken together — all or none — in one canonical order
    /// (by cluster slot, then key), so multi-locks never deadlock; see [`MultiLock`]. Each member
    /// is the mutex of that name (the same lock as [`Client::mutex`] gives) with default options.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidInput`] for no names or a bad one (as [`Client::mutex`]).
    pub fn multi_lock<I, S>(&self, names: I) -> Result<MultiLock>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.multi_lock_with(names, MutexOptions::new())
    }

    /// As [`Client::multi_lock`], with `options` for every member (the lease, the watchdog,
    /// `max_hold`, `fenced`, the label …).
    ///
    /// # Errors
    /// As [`Client::multi_lock`], and for invalid options (as [`Client::mutex_with`]).
    pub fn multi_lock_with<I, S>(&self, names: I, options: MutexOptions) -> Result<MultiLock>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let members = names
            .into_iter()
            .map(|name| self.mutex_with(name.as_ref(), options.clone()))
            .collect::<Result<Vec<_>>>()?;
        MultiLock::new(members)
    }
}
