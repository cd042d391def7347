//! The options of a lock handle: [`MutexOptions`] (lease, watchdog, `max_hold`, reentrancy,
//! label, durability), [`OnLost`], [`Wait`] and [`Durability`], all validated in one place
//! (`MutexOptions::settings`), and how a lease is kept ([`Renewal`]). Pure: no I/O.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::timing;

/// Longest accepted label, in bytes.
pub const MAX_LABEL_LEN: usize = 256;

/// How a lease is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// The lease runs out unless the holder extends it.
    Fixed,
    /// The client's watchdog renews it every `interval`, for at most `max_hold` in all.
    Watchdog {
        interval: Duration,
        max_hold: Option<Duration>,
    },
}

/// What [`crate::Mutex::with_lock`] does when the lease is lost while its future runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnLost {
    /// Drop the future and return an [`crate::ErrorKind::LeaseLost`] error (default): work that is no
    /// longer exclusive stops at its next `.await`.
    #[default]
    Cancel,
    /// Let the future finish; it learns of the loss through its [`crate::Lease`]
    /// (`lost()`, `cancellation_token()`) and decides itself.
    Signal,
}

/// How long [`crate::Mutex::with_lock`] waits for the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wait {
    /// Try once; [`crate::ErrorKind::Busy`] if held.
    No,
    /// Wait up to this long; [`crate::ErrorKind::Busy`] afterwards.
    AtMost(Duration),
    /// Wait without a limit.
    Forever,
}

impl Wait {
    /// The longest wait: `Some(ZERO)` for one attempt, `None` without a limit.
    pub(crate) fn limit(self) -> Option<Duration> {
        match self {
            Self::No => Some(Duration::ZERO),
            Self::AtMost(wait) => Some(wait),
            Self::Forever => None,
        }
    }
}

impl From<Duration> for Wait {
    fn from(wait: Duration) -> Self {
        Self::AtMost(wait)
    }
}

/// Options of a [`crate::Mutex`] handle; see [`crate::Client::mutex_with`].
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
    pub(crate) fenced: bool,
    pub(crate) durability: Durability,
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
            fenced: false,
            durability: Durability::None,
        }
    }
}

impl MutexOptions {
    /// Options with every default: the client's default TTL as a fixed lease, no label,
    /// reentrant for nested calls, [`OnLost::Cancel`].
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
    /// [`MutexOptions::renew_every`] says otherwise. The lease must be at least
    /// [`crate::MIN_WATCHDOG_TTL`]. Without it the lease is fixed: it runs out
    /// after the TTL unless you [`crate::MutexGuard::extend`] it.
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

    /// Whether an acquire *nested inside the body that holds this lock* re-enters it (default
    /// `true`).
    ///
    /// The body is the work run by [`crate::Mutex::with_lock`] or a `#[distributed_lock]`
    /// function: a locked function that calls another locked function on the same key, or
    /// itself, re-enters — the nested guard shares the lease and the fencing token, costs no
    /// round trip, and nesting deeper than 64 levels fails with
    /// [`crate::ErrorKind::Reentrancy`]. Nested acquisitions that run *concurrently* inside one
    /// body (`join!`, `select!`, `join_all`) take turns. Everything else is another holder and
    /// waits: other tasks, concurrent futures outside the body, a guard moved elsewhere, and a
    /// second plain `acquire()` after a first one (it cannot be told apart from a concurrent
    /// one; like `tokio::sync::Mutex`, a flow that acquires twice waits for itself — a warning
    /// names the lock when that wait outlasts the lease).
    ///
    /// With `false`, an acquire nested inside the body fails at once with
    /// [`crate::ErrorKind::Reentrancy`] instead of re-entering.
    pub fn reentrant(mut self, reentrant: bool) -> Self {
        self.reentrant = reentrant;
        self
    }

    /// Issue the fencing token with every acquisition, in the acquire's own round trip, for
    /// holders that always hand it to their storage (default off).
    ///
    /// Fencing tokens are issued on demand: [`crate::MutexGuard::fencing_token`] costs one round
    /// trip the first time (nothing at all for holders that never ask), except for a lock handed
    /// over to a waiter, which arrives with its token. With `fenced`, an uncontended acquire
    /// takes it in its own round trip — an `INCR` of the slot's fence counter in the acquire's
    /// `MULTI`, no script (measured in BENCHMARKS.md, "W2-fence") — instead of a second round
    /// trip. Such a fence is known to the holder only: [`crate::Client::inspect`] does not show
    /// it.
    pub fn fenced(mut self) -> Self {
        self.fenced = true;
        self
    }

    /// What [`crate::Mutex::with_lock`] does when the lease is lost (default [`OnLost::Cancel`]).
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

    /// Wait, after each grant from Redis, until replicas acknowledged it (or its AOF was
    /// fsynced) before the acquire returns the guard (default [`Durability::None`]); see
    /// [`Durability`]. A grant that misses the acknowledgement is released and the acquire
    /// fails with [`crate::ErrorKind::NotDurable`]: never a guard on a lock that a failover
    /// right after the acquire could lose unnoticed.
    ///
    /// For [`crate::Mutex`] (and what is made of mutexes: [`crate::MultiLock`],
    /// [`crate::QuorumMutex`], where each node's acquire, its wait included, must fit the
    /// node timeout) on a single server or a master with replicas; a Redis Cluster, a
    /// read-write lock, a semaphore and an election refuse it when the handle is made. A
    /// reentrant nested acquisition shares the enclosing hold, which was acknowledged already.
    ///
    /// The wait runs on a connection of the client's own, never on the shared one (other
    /// locks, wake-ups and renewals go on meanwhile); concurrent acquires of one client share
    /// one wait, and a wait for lagging replicas delays the durable acquires queued behind it
    /// by up to its timeout. The wait comes after the grant, on top of the acquire's own wait
    /// limit (`acquire_timeout`, [`Wait::AtMost`]).
    ///
    /// # Cancel safety
    /// An acquire future dropped while it waits for the acknowledgement releases the lock it
    /// was granted, in the background (owner-checked); the wait itself runs to its end unseen.
    ///
    /// ```
    /// use std::time::Duration;
    /// use dlock_core::{Durability, MutexOptions};
    /// let options = MutexOptions::new()
    ///     .ttl(Duration::from_secs(30))
    ///     .durability(Durability::Replicas { n: 1, timeout: Duration::from_millis(500) });
    /// # let _ = options;
    /// ```
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Checks every option (with the client's `default_ttl` where no TTL is set) and gives the
    /// settings a lock handle runs with. For the kinds that do not wait for acknowledgements:
    /// a [`Durability`] other than `None` is refused (see [`MutexOptions::mutex_settings`]).
    pub(crate) fn settings(&self, default_ttl: Duration) -> Result<LockSettings> {
        if self.durability != Durability::None {
            return Err(Error::invalid(format!(
                "durability {:?} is supported by Mutex (and MultiLock / QuorumMutex, which are                  made of mutexes) only; RwLock, Semaphore and Election do not wait for replica                  acknowledgement yet: leave MutexOptions::durability out of their options",
                self.durability
            )));
        }
        self.checked(default_ttl)
    }

    /// [`MutexOptions::settings`] for a mutex on a deployment that is a Redis Cluster
    /// (`cluster`) or not: a mutex honours [`Durability`], except on a cluster.
    pub(crate) fn mutex_settings(
        &self,
        default_ttl: Duration,
        cluster: bool,
    ) -> Result<LockSettings> {
        if cluster && self.durability != Durability::None {
            return Err(Error::invalid(format!(
                "durability {:?} is for a single server or a master with replicas (Sentinel) \
                 for now: on a Redis Cluster, WAIT would have to reach each lock's own node on \
                 a connection of its own, which dlock does not do yet; leave \
                 MutexOptions::durability out on a cluster",
                self.durability
            )));
        }
        self.checked(default_ttl)
    }

    fn checked(&self, default_ttl: Duration) -> Result<LockSettings> {
        let ttl = timing::validate_ttl(self.ttl.unwrap_or(default_ttl))?;
        if let Some(label) = &self.label {
            validate_label(label)?;
        }
        self.durability.validate(ttl)?;
        Ok(LockSettings {
            ttl,
            renewal: self.renewal(ttl)?,
            reentrant: self.reentrant,
            on_lost: self.on_lost,
            fenced: self.fenced,
            durability: (self.durability != Durability::None).then(|| Arc::new(self.durability)),
            label: self.label.as_deref().map(Arc::from),
        })
    }

    /// Checks the options against the effective TTL and says how the lease is kept.
    fn renewal(&self, ttl: Duration) -> Result<Renewal> {
        if !self.watchdog {
            return Ok(Renewal::Fixed);
        }
        timing::validate_watchdog_ttl(ttl)?;
        let interval = self.renew_every.unwrap_or(ttl / 3);
        if interval.is_zero() || interval > ttl / 2 {
            return Err(Error::invalid(format!(
                "watchdog renewal interval {interval:?} must be greater than zero and at most \
                 half the lease ({ttl:?}), so that a failed renewal can be retried in time"
            )));
        }
        if let Some(max_hold) = self.max_hold
            && max_hold < timing::MIN_WATCHDOG_TTL
        {
            return Err(Error::invalid(format!(
                "max_hold {max_hold:?} is shorter than the shortest watchdog lease {:?}",
                timing::MIN_WATCHDOG_TTL
            )));
        }
        Ok(Renewal::Watchdog {
            interval,
            max_hold: self.max_hold,
        })
    }
}

/// What a grant waits for before the acquire returns its guard
/// ([`MutexOptions::durability`]).
///
/// Redis replicates asynchronously: a lock granted by the master and lost with it before any
/// replica received the grant is free on the replica that is promoted, and another client
/// takes it while the first still believes it holds it. Waiting for an acknowledgement closes
/// that window for the failures it covers: with `Replicas { n: 1, .. }`, the grant is on at
/// least one replica when the guard is returned, and a failover that promotes *that* replica
/// (Sentinel promotes the most up-to-date one) keeps the lock. It does not make Redis
/// consistent: a failover that promotes a replica that did not acknowledge, or the loss of the
/// master and every acknowledging replica together, still loses the lock. Use fencing tokens
/// where that matters.
///
/// The replica counts are explicit, never detected from the topology: a count that follows
/// the replicas you happen to have shrinks silently when one is down.
///
/// How it works (ARCHITECTURE.md, "Replica acknowledgement"): the client sends, on a
/// connection of its own, the owner-checked extend of every lock granted since its last such
/// write (which restores the lease the wait takes and proves the lock is still held), then
/// `WAIT n timeout` (or `WAITAOF`). Concurrent acquires share one extend and one `WAIT`.
///
/// ```
/// use std::time::Duration;
/// use dlock_core::Durability;
/// let one_replica = Durability::Replicas { n: 1, timeout: Duration::from_millis(500) };
/// let fsynced = Durability::Aof { local: true, replicas: 1, timeout: Duration::from_secs(1) };
/// # let _ = (one_replica, fsynced);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Durability {
    /// Return the guard as soon as the master granted the lock (default).
    #[default]
    None,
    /// Wait (`WAIT`) until at least `n` replicas received the grant, for at most `timeout`.
    /// `n` ≥ 1; `timeout` from 1 ms to half the lock's TTL (the lease is set anew just
    /// before the wait, so the guard starts with at least half its lease).
    Replicas {
        /// How many replicas must acknowledge.
        n: u32,
        /// How long to wait for them.
        timeout: Duration,
    },
    /// Wait (`WAITAOF`: Redis 7.2 or newer, Valkey; detected with `COMMAND INFO`) until the grant was fsynced to the master's own
    /// append-only file (`local`, which needs `appendonly yes`) and to the AOF of at least
    /// `replicas` replicas, for at most `timeout` (as in `Replicas`). At least one of the two
    /// must be asked for.
    Aof {
        /// Whether the master's own AOF must have it fsynced.
        local: bool,
        /// How many replicas must have it fsynced to their AOF.
        replicas: u32,
        /// How long to wait for them.
        timeout: Duration,
    },
}

impl Durability {
    /// The longest wait, `None` for [`Durability::None`].
    pub(crate) fn timeout(self) -> Option<Duration> {
        match self {
            Self::None => None,
            Self::Replicas { timeout, .. } | Self::Aof { timeout, .. } => Some(timeout),
        }
    }

    /// Checks the counts and the timeout against the lock's TTL.
    fn validate(self, ttl: Duration) -> Result<()> {
        match self {
            Self::None => return Ok(()),
            Self::Replicas { n: 0, .. } => {
                return Err(Error::invalid(
                    "Durability::Replicas with n = 0 waits for nothing; ask for at least 1 \
                     replica, or use Durability::None",
                ));
            }
            Self::Aof {
                local: false,
                replicas: 0,
                ..
            } => {
                return Err(Error::invalid(
                    "Durability::Aof with local = false and replicas = 0 waits for nothing; \
                     ask for the local AOF, at least 1 replica, or use Durability::None",
                ));
            }
            _ => {}
        }
        let timeout = self.timeout().unwrap_or_default();
        if timeout < Duration::from_millis(1) || timeout > ttl / 2 {
            return Err(Error::invalid(format!(
                "durability timeout {timeout:?} must be from 1ms to half the lock's TTL \
                 ({:?}): the lease is set anew before the wait, and the guard must start \
                 with most of it (raise MutexOptions::ttl or shorten the timeout)",
                ttl / 2
            )));
        }
        Ok(())
    }
}

/// Checks a label: the error says what is wrong.
pub(crate) fn validate_label(label: &str) -> Result<()> {
    if label.len() > MAX_LABEL_LEN {
        return Err(Error::invalid(format!(
            "lock label is {} bytes long; the limit is {MAX_LABEL_LEN} bytes",
            label.len()
        )));
    }
    if label.chars().any(char::is_control) {
        return Err(Error::invalid(format!(
            "lock label {label:?} contains control characters; use printable text"
        )));
    }
    Ok(())
}

/// The validated settings of a lock handle.
#[derive(Clone, Debug)]
pub(crate) struct LockSettings {
    /// The lease each acquisition gets.
    pub(crate) ttl: Duration,
    pub(crate) renewal: Renewal,
    pub(crate) reentrant: bool,
    pub(crate) on_lost: OnLost,
    /// Fetch the fencing token with each acquisition.
    pub(crate) fenced: bool,
    /// What a grant waits for before it becomes a guard; `None` for [`Durability::None`].
    /// Behind a pointer: few handles ask for it, and every handle (and every waiting task that
    /// owns one) would otherwise carry its 24 bytes (docs/benchmarks/2026-11-25-run-l.md).
    durability: Option<Arc<Durability>>,
    /// Stored with the holder's host and pid.
    pub(crate) label: Option<Arc<str>>,
}

impl LockSettings {
    /// What a grant waits for before it becomes a guard.
    pub(crate) fn durability(&self) -> Durability {
        self.durability
            .as_deref()
            .copied()
            .unwrap_or(Durability::None)
    }
}
