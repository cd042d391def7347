//! What a [`QuorumMutex`](crate::QuorumMutex) grant gives: [`QuorumGuard`] (the holds of a
//! majority of the nodes, one fence committed on a majority, lost — once — when fewer than a
//! majority of the node leases live), its extension and release, and the release's report node
//! by node ([`QuorumRelease`], [`NodeRelease`]). Below `mod.rs`, which builds the guard: it
//! imports nothing of its folder.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, ErrorKind, Result};
use crate::holds::guard::{ExtendOutcome, MutexGuard, ReleaseOutcome};
use crate::lease::{Lease, LeaseLost, LossSignal, watch_group};
use crate::runtime::Task;
use crate::token::FencingToken;

/// What [`QuorumGuard::release`] found, node by node.
#[derive(Debug)]
#[non_exhaustive]
pub enum NodeRelease {
    /// The guard held nothing on this node (it did not grant, or did not answer).
    NotHeld,
    /// What releasing the node's hold found.
    Released(ReleaseOutcome),
    /// The node's release failed (the hold there runs out with its lease).
    Failed(Error),
}

/// What [`QuorumGuard::release`] found on every node.
#[derive(Debug)]
pub struct QuorumRelease {
    nodes: Vec<NodeRelease>,
    majority: usize,
}

impl QuorumRelease {
    /// Whether a majority of the nodes still held our lock when it was released.
    pub fn was_held(&self) -> bool {
        let held = self
            .nodes
            .iter()
            .filter(|n| matches!(n, NodeRelease::Released(o) if o.was_held()))
            .count();
        held >= self.majority
    }

    /// One outcome per node, in the order the clients were given.
    pub fn nodes(&self) -> &[NodeRelease] {
        &self.nodes
    }
}

/// A [`QuorumMutex`](crate::QuorumMutex) held by a majority. Dropping it releases every node's hold in the
/// background; [`QuorumGuard::release`] does so and reports per node.
#[must_use = "the lock is released when the guard is dropped"]
pub struct QuorumGuard {
    name: Arc<str>,
    node_count: usize,
    majority: usize,
    held: Vec<(usize, MutexGuard)>,
    fence: FencingToken,
    /// The quorum's loss, its token, and how it is made known: decided by whoever sees the
    /// majority go first — [`QuorumGuard::lost`] or the watcher — in the one order of
    /// `lease/loss.rs` (the token is cancelled before `lost()` or `is_lost()` can tell).
    loss: Arc<LossSignal>,
    /// The task that watches the node leases for the token, when nobody awaits `lost()`.
    watcher: Task,
    /// Stops the watcher (the guard is released or dropped).
    stop: CancellationToken,
    /// How long [`QuorumGuard::extend`] waits for each node.
    node_timeout: Duration,
}

impl QuorumGuard {
    pub(super) fn new(
        name: Arc<str>,
        (node_count, majority): (usize, usize),
        held: Vec<(usize, MutexGuard)>,
        fence: FencingToken,
        node_timeout: Duration,
    ) -> Self {
        let guard = Self {
            name,
            node_count,
            majority,
            held,
            fence,
            loss: Arc::default(),
            watcher: Task::default(),
            stop: CancellationToken::new(),
            node_timeout,
        };
        guard.watch();
        guard
    }

    /// The node leases of this guard.
    fn leases(&self) -> Vec<Lease> {
        self.held.iter().map(|(_, g)| g.lease()).collect()
    }

    /// How many node leases may be lost while a majority stands.
    fn tolerated(&self) -> usize {
        self.held.len().saturating_sub(self.majority)
    }

    /// Starts the watcher in the current runtime, unless it runs (or has nothing left to do):
    /// again after the runtime it ran in has ended. It makes the loss known, and so cancels
    /// the token, when nobody awaits [`QuorumGuard::lost`].
    fn watch(&self) {
        if self.watcher.is_running() || self.stop.is_cancelled() || self.is_lost() {
            return;
        }
        let (loss, stop) = (self.loss.clone(), self.stop.clone());
        let (leases, tolerated) = (self.leases(), self.tolerated());
        self.watcher.start(move || async move {
            tokio::select! {
                _ = watch_group(&loss, &leases, tolerated) => {}
                () = stop.cancelled() => {}
            }
        });
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Guarded writes are not possible under a quorum lock: its holds live on several
    /// independent servers, which no one script reaches. The batch this returns fails at
    /// [`crate::GuardedWrite::exec`] with [`crate::ErrorKind::InvalidInput`] saying so; check
    /// the fencing token where the data is ([`crate::Client::fenced_set`]).
    pub fn guarded(&self) -> crate::GuardedWrite {
        crate::GuardedWrite::cannot("QuorumGuard")
    }

    /// The fencing token committed on a majority: larger than that of every earlier holder of
    /// this quorum lock (see the module documentation for the argument, and for how a node that
    /// restarted without its data is kept out for one TTL).
    pub fn fencing_token(&self) -> FencingToken {
        self.fence
    }

    /// The indices of the nodes whose hold this guard has (alive or not).
    pub fn nodes(&self) -> impl Iterator<Item = usize> + '_ {
        self.held.iter().map(|(i, _)| *i)
    }

    /// Until when a majority of the node leases is certainly held (monotonic clock): the
    /// majority-th latest safe-until of the live node leases, each counted from when its
    /// request was sent, less the drift allowance. Renewals by the watchdog move it on.
    pub fn safe_until(&self) -> Instant {
        let now = Instant::now();
        let mut ends: Vec<Instant> = self
            .held
            .iter()
            .filter(|(_, g)| g.lease().is_held())
            .map(|(_, g)| g.safe_until())
            .collect();
        ends.sort_unstable_by(|a, b| b.cmp(a));
        ends.get(self.majority - 1).copied().unwrap_or(now).max(now)
    }

    /// How long a majority is certainly held; zero once it is not.
    pub fn remaining(&self) -> Duration {
        self.safe_until().saturating_duration_since(Instant::now())
    }

    /// Whether the quorum was lost (fewer than a majority of live node leases) and that loss
    /// made known: then the token is cancelled and [`QuorumGuard::lost`] resolves at once.
    pub fn is_lost(&self) -> bool {
        self.loss.reason().is_some()
    }

    /// Resolves when fewer than a majority of the node leases are alive, with the reason of the
    /// lease whose loss broke the majority. When it resolves, the
    /// [`QuorumGuard::cancellation_token`] is cancelled and [`QuorumGuard::is_lost`] is true
    /// already. It watches the node leases itself: it does not wait for a background task (nor
    /// need one: a guard used in another runtime than the one that acquired it still learns
    /// of its loss).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes (a loss it made known stays known).
    pub async fn lost(&self) -> LeaseLost {
        watch_group(&self.loss, &self.leases(), self.tolerated()).await
    }

    /// A token cancelled when the quorum is lost, before [`QuorumGuard::lost`] resolves. A
    /// background task watches the node leases for it (started again in the current runtime
    /// if the one it ran in has ended).
    pub fn cancellation_token(&self) -> CancellationToken {
        self.watch();
        self.loss.token().0
    }

    /// Gives every node's hold a new lease of `ttl` from now, concurrently (each node within
    /// the per-node timeout), where we still hold it. `Extended` when a majority extended: the
    /// new [`QuorumGuard::safe_until`] counts from when the requests were sent. Otherwise the
    /// quorum is gone: `TakenOver` if some node has another owner now, else `Expired`. A node
    /// that did not extend keeps its old lease; one found gone or taken is counted as lost.
    ///
    /// With [`MutexOptions::watchdog`](crate::MutexOptions::watchdog) each node is renewed by its client already; this is for
    /// fixed leases, or to lengthen one.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a TTL out of range (as [`MutexGuard::extend`]); errors
    /// of single nodes are not errors (they count as not extended), unless every node failed:
    /// then the first node's error.
    ///
    /// # Cancel safety
    /// Cancel safe: each node's extension either ran or did not, and is owner-checked.
    pub async fn extend(&mut self, ttl: Duration) -> Result<ExtendOutcome> {
        let timeout = self.node_timeout;
        let outcomes = join_all(
            self.held
                .iter_mut()
                .map(|(_, g)| tokio::time::timeout(timeout, g.extend(ttl))),
        )
        .await;
        let (mut extended, mut taken, mut first_error) = (0, false, None);
        let mut failed = 0;
        for outcome in outcomes {
            match outcome {
                Ok(Ok(ExtendOutcome::Extended)) => extended += 1,
                Ok(Ok(ExtendOutcome::TakenOver)) => taken = true,
                Ok(Ok(_)) => {}
                Ok(Err(e)) if e.kind() == ErrorKind::InvalidInput => return Err(e),
                Ok(Err(e)) => {
                    failed += 1;
                    first_error.get_or_insert(e);
                }
                Err(_) => failed += 1,
            }
        }
        if failed == self.held.len()
            && let Some(e) = first_error
        {
            return Err(e);
        }
        Ok(if extended >= self.majority {
            ExtendOutcome::Extended
        } else if taken {
            ExtendOutcome::TakenOver
        } else {
            ExtendOutcome::Expired
        })
    }

    /// Releases the lock on every node it holds, concurrently, and reports per node.
    ///
    /// # Cancel safety
    /// Dropping the future releases the holds not yet released in the background.
    pub async fn release(mut self) -> QuorumRelease {
        self.stop.cancel();
        let held = std::mem::take(&mut self.held);
        let mut nodes: Vec<NodeRelease> =
            (0..self.node_count).map(|_| NodeRelease::NotHeld).collect();
        let (indices, guards): (Vec<usize>, Vec<MutexGuard>) = held.into_iter().unzip();
        let outcomes = join_all(guards.into_iter().map(MutexGuard::release)).await;
        for (i, outcome) in indices.into_iter().zip(outcomes) {
            nodes[i] = match outcome {
                Ok(o) => NodeRelease::Released(o),
                Err(e) => NodeRelease::Failed(e),
            };
        }
        QuorumRelease {
            nodes,
            majority: self.majority,
        }
    }
}

impl Drop for QuorumGuard {
    fn drop(&mut self) {
        // The node guards release themselves in the background as they drop.
        self.stop.cancel();
    }
}

impl fmt::Debug for QuorumGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            name,
            node_count,
            majority,
            held,
            fence,
            loss,
            watcher: _,
            stop: _,
            node_timeout: _,
        } = self;
        f.debug_struct("QuorumGuard")
            .field("name", name)
            .field("nodes", node_count)
            .field("majority", majority)
            .field("held_on", &held.iter().map(|(i, _)| i).collect::<Vec<_>>())
            .field("fence", fence)
            .field("lost", &loss.reason())
            .field("remaining", &self.remaining())
            .finish()
    }
}
