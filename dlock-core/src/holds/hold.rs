//! Reentrancy: a lock is re-entered by calls *nested inside the body that holds it*, and by
//! nothing else.
//!
//! The unit of ownership in async Rust is neither the thread nor the task: one task runs many
//! futures at once (`join!`, `select!`, `join_all`, `FuturesUnordered`), and keyed by task they
//! would all "re-enter" and hold the lock together. So the holder is the *scope of the running
//! body*: [`crate::Mutex::with_lock`] (and `#[distributed_lock]`, which expands to it) runs its
//! body inside a `tokio::task_local!` scope that names the [`Hold`] it runs under. Such a scope
//! is per future, not per task: it covers exactly the code the body awaits, is not inherited by
//! spawned tasks, and ends with the body.
//!
//! * An acquire inside that scope (same client, same lock) is **nested**: it does not go to
//!   Redis; it takes the hold's single *nested permit*, so two nested acquisitions that run
//!   concurrently inside one body take turns locally instead of both entering. The nested hold
//!   shares the lease and the fencing token, one level deeper; with `with_lock` it opens a scope
//!   of its own, so recursion works to [`MAX_DEPTH`] levels, and deeper fails at once.
//! * An acquire anywhere else — another task, a concurrent future outside the body, code after
//!   `acquire()` returned a guard — is another holder and waits its turn. A plain `acquire()`
//!   cannot tell a second acquire of the same flow from a concurrent one, so it waits like any
//!   other holder (as `tokio::sync::Mutex` does); if it waits for a lock its own client holds
//!   for longer than that lease, a warning names the lock.
//!
//! A hold gives its permit back only when it and everything nested in it are gone, so releasing
//! an outer guard early never lets a second nested holder in beside an inner one.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Error, ErrorKind, Result};
use crate::lease::{LeaseCore, LeaseLost, LostReason};
use crate::runtime::sleep_until;
use crate::transport::Transport;

/// How deep holds of one lease may nest (the acquisition is depth 1).
pub(crate) const MAX_DEPTH: u32 = 64;

tokio::task_local! {
    /// The holds of the bodies running around the current code, innermost first.
    static SCOPE: Arc<Scope>;
}

/// One hold of the body running around the current code, and the scopes around that body.
struct Scope {
    hold: Hold,
    outer: Option<Arc<Scope>>,
}

/// One hold on a lease: the acquisition itself (depth 1), or a nested acquisition inside the
/// body of the hold one level up. Shared by the guard and by the scope of the body it runs.
///
/// The acquisition is the lease itself, without an allocation of its own (every held lock has
/// one; few nest).
#[derive(Clone)]
pub(crate) enum Hold {
    /// Depth 1: the lease just acquired from Redis.
    First(Arc<LeaseCore>),
    /// Depth 2 and more.
    Nested(Arc<NestedHold>),
}

/// A hold nested in the body of another.
pub(crate) struct NestedHold {
    lease: Arc<LeaseCore>,
    depth: u32,
    /// Nested acquisitions inside this hold's body take turns on this one permit; made when the
    /// first of them asks (most holds never nest, and pay nothing for it).
    nested: OnceLock<Arc<Semaphore>>,
    /// The enclosing hold and its permit: given back when this hold and everything nested in
    /// it are gone.
    _outer: (Hold, OwnedSemaphorePermit),
}

impl Hold {
    /// The lease this hold is on.
    pub(crate) fn lease(&self) -> &Arc<LeaseCore> {
        match self {
            Self::First(lease) => lease,
            Self::Nested(hold) => &hold.lease,
        }
    }

    /// 1 for the acquisition, one more per level of nesting.
    pub(crate) fn depth(&self) -> u32 {
        match self {
            Self::First(_) => 1,
            Self::Nested(hold) => hold.depth,
        }
    }

    /// The permit that acquisitions nested directly in this hold's body take turns on.
    fn nested_permits(&self) -> &OnceLock<Arc<Semaphore>> {
        match self {
            Self::First(lease) => &lease.nested_permits,
            Self::Nested(hold) => &hold.nested,
        }
    }

    /// A hold nested in `outer`, which gave `permit`.
    fn nested_in(outer: Hold, permit: OwnedSemaphorePermit) -> Self {
        Self::Nested(Arc::new(NestedHold {
            lease: outer.lease().clone(),
            depth: outer.depth() + 1,
            nested: OnceLock::new(),
            _outer: (outer, permit),
        }))
    }
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("lock", &self.lease().keys.name())
            .field("depth", &self.depth())
            .finish_non_exhaustive()
    }
}

/// The innermost hold of `lock_key` through the client whose transport is `transport` among the
/// bodies running around the current code, if any.
pub(crate) fn enclosing(transport: &Arc<Transport>, lock_key: &str) -> Option<Hold> {
    SCOPE
        .try_with(|scope| {
            let mut scope = Some(scope);
            while let Some(current) = scope {
                let lease = current.hold.lease();
                if Arc::ptr_eq(&lease.transport, transport) && &*lease.keys.lock == lock_key {
                    return Some(current.hold.clone());
                }
                scope = current.outer.as_ref();
            }
            None
        })
        .ok()
        .flatten()
}

/// Runs `body` as the body of `hold`: acquisitions of the same lock inside it are nested.
pub(crate) async fn run_as_body_of<F: std::future::Future>(hold: Hold, body: F) -> F::Output {
    let outer = SCOPE.try_with(Arc::clone).ok();
    SCOPE.scope(Arc::new(Scope { hold, outer }), body).await
}

/// How long a nested acquisition waits for its turn.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Patience {
    /// Not at all: `None` when a concurrent nested hold has the turn.
    Try,
    /// Until this instant (`None`: without limit).
    Until(Option<Instant>),
}

/// A hold nested in `outer` (the caller runs inside `outer`'s body): waits for the turn among
/// concurrent nested acquisitions of the same body. `Ok(None)` when it is not this one's turn
/// with [`Patience::Try`].
///
/// # Errors
/// [`ErrorKind::Reentrancy`] through a non-reentrant handle, or beyond [`MAX_DEPTH`];
/// [`ErrorKind::LeaseLost`] when the enclosing lease is (or gets) lost while waiting;
/// [`ErrorKind::Busy`] when the turn did not come by the deadline.
pub(crate) async fn nest(outer: Hold, patience: Patience, reentrant: bool) -> Result<Option<Hold>> {
    let lease = outer.lease().clone();
    let name = lease.keys.name();
    if !reentrant {
        return Err(Error::new(
            ErrorKind::Reentrancy,
            format!(
                "lock `{name}` is held by the body this acquire runs in; acquiring it again \
                 through a non-reentrant handle would wait for itself. Use the lease you have, or \
                 enable MutexOptions::reentrant(true)"
            ),
        ));
    }
    if outer.depth() >= MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::Reentrancy,
            format!(
                "lock `{name}` is already nested {MAX_DEPTH} deep; deeper nesting is refused \
                 (unbounded recursion under a lock?)"
            ),
        ));
    }
    if let Some(reason) = lost_reason(&lease) {
        return Err(LeaseLost::new(reason).into_error(name));
    }
    let permits = outer
        .nested_permits()
        .get_or_init(|| Arc::new(Semaphore::new(1)))
        .clone();
    let permit = match patience {
        Patience::Try => match permits.try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => return Ok(None),
        },
        Patience::Until(deadline) => {
            let started = Instant::now();
            let turn = permits.acquire_owned();
            tokio::pin!(turn);
            let mut warn_at = Some(started + lease.ttl());
            loop {
                let limit = [deadline, warn_at].into_iter().flatten().min();
                tokio::select! {
                    biased;
                    permit = &mut turn => match permit {
                        Ok(permit) => break permit,
                        // The semaphore is never closed.
                        Err(_) => return Err(Error::protocol("nested permits closed")),
                    },
                    lost = lease.lost() => return Err(lost.into_error(name)),
                    () = sleep_until(limit) => {
                        let now = Instant::now();
                        if deadline.is_some_and(|d| now >= d) {
                            return Err(Error::new(
                                ErrorKind::Busy,
                                format!(
                                    "lock `{name}` stayed held by a concurrent nested \
                                     acquisition of the same body for the whole wait of {:?} \
                                     (nested acquisitions that run concurrently take turns)",
                                    now - started
                                ),
                            ));
                        }
                        warn_at = None;
                        tracing::warn!(
                            lock = %name,
                            waited = ?now - started,
                            "dlock: a nested acquire waits longer than the lease for a concurrent \
                             nested hold of the same body; if that hold belongs to the code that \
                             waits (two guards kept at once), it waits for itself"
                        );
                    }
                }
            }
        }
    };
    let depth = outer.depth() + 1;
    if !lease.add_hold(depth) {
        let reason = lost_reason(&lease).unwrap_or(LostReason::Released);
        return Err(LeaseLost::new(reason).into_error(name));
    }
    Ok(Some(Hold::nested_in(outer, permit)))
}

/// Why the lease is no longer usable, if it is not.
fn lost_reason(lease: &LeaseCore) -> Option<LostReason> {
    lease
        .lost_reason()
        .or_else(|| (!lease.is_live()).then(|| lease.fire_deadline()))
}
