//! [`QuorumMutex`]: one lock over N independent Redis masters, granted by a majority (the
//! Redlock algorithm), with fencing tokens that stay in holding order across the nodes.
//!
//! # Acquire
//! One attempt asks every node at once (each node's own [`Mutex::try_acquire`], so each node
//! keeps its own owner token), each under a *per-node timeout* — by default 5 % of the TTL, at
//! least 5 ms ([`QuorumMutex::node_timeout`]) — and waits for every node's answer or timeout.
//! It is granted only when
//! * a majority (N/2 + 1) of the nodes gave us the lock, and both fencing rounds below
//!   succeeded on a majority, **and**
//! * the *validity* `TTL − elapsed − drift` (elapsed counted from before the first request,
//!   after the last round; drift = TTL/100 + 2 ms) is still at least 10 % of the TTL
//!   ([`MIN_VALIDITY_PERCENT`]). A grant with less would hand out a lock that is about to run
//!   out on the nodes (most Redlock implementations skip this check).
//!
//! A failed attempt gives back what it took on every node — the nodes that timed out included,
//! since their acquire may have run: a timed-out [`Mutex::try_acquire`] is released in the
//! background, owner-checked — then waits a random delay (so that contenders do not collide in
//! lock step) and tries again until the wait ends. The final [`ErrorKind::Busy`] error names
//! each node (by its index in the `clients` given to [`QuorumMutex::new`]) and its reason.
//!
//! # Fencing across nodes
//! Taking the largest of the node fences of one round is not monotonic across holders: a node
//! that issued large fences may be restarted empty (or be in the minority of the next holder),
//! and the next holder's fences come from other nodes whose counters are lower. So a quorum
//! fence is *committed*:
//! 1. **Round 1.** On each node where we hold the lock, the node issues its fence
//!    ([`crate::MutexGuard::fencing_token`]: owner-checked, from the slot's counter, floored at
//!    the server clock; it comes with the acquire's own round trip, see
//!    [`crate::MutexOptions::fenced`]). `F` = the largest + 1.
//! 2. **Round 2.** On each node where round 1 succeeded, owner-checked (`fence_raise.lua`): if
//!    we still hold the lock there, raise the slot's counter to at least `F`. `F` is the
//!    guard's fence only if this succeeded on a majority; otherwise the attempt fails (and is
//!    retried).
//!
//! *Why a later holder's fence exceeds `F`.* Say guard A committed `F` on a majority `M_A`, and
//! guard B comes later. B's fence is the largest of its round-1 fences from a majority `R_B`
//! (plus one). Two majorities of the same N nodes intersect: some node `n` is in both. On `n`,
//! A raised the counter to at least `F` while holding the lock there, and B's round-1 `INCR`
//! ran while B held the lock there; one Redis node gives the lock to one owner at a time, and
//! the counter never decreases, so B's fence on `n` — hence B's `F` — exceeds A's `F`. (That A's
//! hold on `n` comes before B's is what "B comes later" means: the validity is measured after
//! round 2, so while A's guard is valid A holds every node of its majority, and B cannot hold a
//! majority at the same time — provided every node's lease lasts its TTL as the client counts
//! it, which a node whose clock steps forward breaks: see *Clocks that step forward* below.)
//!
//! *What breaks it, and the rule that restores it.* A node of `M_A` that restarts with an
//! empty dataset while A's lease is still running forgets both A's hold and the raised counter:
//! B could then take that node and another one that A never held, while A still believes it
//! holds the lock — exclusion and the fence order would both fail. The rule that restores both
//! is that **a node that lost its data stays out for at least one TTL**, so that every lease it
//! forgot has run out (and its holder has been told) before it counts again; the intersection
//! argument then holds for every pair of guards whose leases could overlap.
//!
//! This module enforces that rule itself rather than leaving it to the operator. Round 2
//! (`fence_raise.lua`) also reads the node's "data since" record (`<prefix>quorum:since`, one key
//! per server; per slot on a cluster): when it is missing — the node restarted without its data,
//! or is new — it is written with the node's current time, and a node whose record is younger
//! than the lock's TTL is *kept out*: it does not count towards the majority, and its hold is
//! given back. A restart that kept its data (AOF or RDB persistence) keeps the record and is
//! not kept out. Costs: a brand-new node sits out one TTL before it first counts (three new
//! nodes: the first grant comes one TTL after first use), and every client of one quorum lock
//! must use the same TTL (the wait is the caller's TTL, and a longer lease elsewhere could
//! outlive it). A node whose clock goes back restarts its wait (conservative).
//!
//! *Clocks that step forward.* Redis ends a lease by its own wall clock, so a node whose clock
//! steps forward ends its leases early — and **one such node is enough** to break both the
//! exclusion and the fence order. A guard granted by exactly a majority (two of three) has no
//! node to spare: the early end leaves it a minority while its validity, counted on the
//! client's clock, still runs, and another client can take that node and the rest and be
//! granted too. If the step falls between the guard's round 2 on that node and its grant, the
//! guard granted later even carries the smaller fence (its round 2 on the jumped node came
//! before the other's round 1 there). No check the protocol could add closes this: each runs
//! before a step that may come after it. dlock-model's quorum model finds both with a step of
//! half a TTL on one node (`a_clock_jump_on_one_node_breaks_the_fence_order`, whose doc gives
//! the trace, and `a_clock_jump_after_a_grant_lets_a_second_holder_in`), and the conformance
//! test replays the first on three real servers; by the same trace, any step that ends a lease
//! there before its holder's validity does (more than the drift allowance, TTL/100 + 2 ms) can
//! do it. A guard that committed its fence on more nodes than a majority (three of three)
//! keeps a majority through one node's step (`tests/other_kinds/quorum.rs`), but nothing makes
//! a grant take more than a majority. So the operator must keep every node's wall clock from
//! stepping: time sync that slews rather than steps (chrony with `makestep` limited to boot,
//! before Redis starts; ntpd with `-x`), and no setting of a running node's clock by hand.
//! Where a step may still happen, fencing tokens checked by the resource are what protect the
//! data: a store that refuses a fence below the highest it has seen refuses the writes of
//! whichever holder has the smaller fence once the other has written (after a step, that may
//! be the one granted later); they do not make the two guards exclusive.
//!
//! # Extension and loss
//! With [`crate::MutexOptions::watchdog`] each node's hold is renewed by its client's watchdog
//! (and stopped at `max_hold`, as for every mutex). The guard is *lost* — once —
//! when fewer than a majority of its node leases are alive ([`QuorumGuard::lost`] then resolves
//! with the reason of the lease whose loss broke the majority); its safe-until is the instant
//! until which a majority of them are certainly held.
//!
//! # Floor
//! Facade, next to `client`: it is written on [`Client`] and [`Mutex`]'s API, plus one script
//! call on a node guard's lease (round 2) and the leases' loss signal (`lease/loss.rs`), which
//! makes the guard's own loss known in the same order as a lease's.

mod guard;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::join_all;

use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::holds::guard::MutexGuard;
use crate::kinds::mutex::Mutex;
use crate::options::MutexOptions;
use crate::scripts::{self, Call, RaiseReply, unexpected};
use crate::timing::drift;
use crate::token::FencingToken;

pub use guard::{NodeRelease, QuorumGuard, QuorumRelease};

/// The least validity a grant must leave, in percent of the TTL.
pub const MIN_VALIDITY_PERCENT: u32 = 10;
/// The least per-node timeout (see [`QuorumMutex::node_timeout`]).
const MIN_NODE_TIMEOUT: Duration = Duration::from_millis(5);

/// A lock over N independent Redis masters (N odd, at least 3), granted by a majority: the
/// Redlock algorithm, with the validity checked and fences committed on a majority. Cheap to
/// clone. See the module documentation of `kinds/quorum/mod.rs` (and the README) for what it guarantees.
///
/// ```no_run
/// # async fn demo() -> Result<(), dlock_core::Error> {
/// use std::time::Duration;
/// use dlock_core::{Client, MutexOptions, QuorumMutex};
/// let clients = ["redis://10.0.0.1/", "redis://10.0.0.2/", "redis://10.0.0.3/"]
///     .into_iter()
///     .map(Client::open)
///     .collect::<Result<Vec<_>, _>>()?;
/// let lock = QuorumMutex::new(clients, "payouts", MutexOptions::new().ttl(Duration::from_secs(10)))?;
/// let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
/// println!("fence {} for {:?}", guard.fencing_token(), guard.remaining());
/// let report = guard.release().await;
/// assert!(report.was_held());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct QuorumMutex {
    name: Arc<str>,
    /// One mutex per node, in the order the clients were given.
    nodes: Vec<Mutex>,
    ttl: Duration,
    node_timeout: Duration,
}

impl QuorumMutex {
    /// A quorum lock named `name` over the masters reached by `clients` (one client per
    /// independent Redis server, not replicas of one another), each holding it with `options`.
    /// The nodes' fences come with the acquire ([`MutexOptions::fenced`] is always on).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when the number of clients is even or below 3 (a majority of
    /// an even number tolerates no more failures than the odd number below it, and fewer than
    /// 3 nodes tolerate none), when the clients' default TTLs differ and `options` sets none,
    /// or as [`Client::mutex_with`] for the name and options.
    pub fn new(clients: Vec<Client>, name: &str, options: MutexOptions) -> Result<Self> {
        let n = clients.len();
        if n < 3 || n.is_multiple_of(2) {
            return Err(Error::invalid(format!(
                "quorum lock `{name}`: needs an odd number of at least 3 independent Redis \
                 masters, got {n}; a majority of an even number survives no more failures than \
                 one node fewer, and fewer than 3 survive none"
            )));
        }
        let options = options.fenced();
        let nodes = clients
            .iter()
            .map(|c| c.mutex_with(name, options.clone()))
            .collect::<Result<Vec<_>>>()?;
        let ttl = nodes[0].ttl();
        if nodes.iter().any(|m| m.ttl() != ttl) {
            return Err(Error::invalid(format!(
                "quorum lock `{name}`: the clients have different default TTLs; set one with \
                 MutexOptions::ttl"
            )));
        }
        Ok(Self {
            name: name.into(),
            nodes,
            ttl,
            node_timeout: (ttl / 20).max(MIN_NODE_TIMEOUT),
        })
    }

    /// How long one attempt waits for each node's answer (default: 5 % of the TTL, at least
    /// 5 ms). A node that does not answer in time counts as not granting (and what it may have
    /// taken is given back). The attempt waits for every node, so a longer timeout eats the
    /// validity when a node hangs; a timeout of the TTL or more can never be granted.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout.max(MIN_NODE_TIMEOUT);
        self
    }

    /// The lock name (the same on every node).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lease each node's hold gets.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// How many nodes must agree: N/2 + 1.
    pub fn majority(&self) -> usize {
        self.nodes.len() / 2 + 1
    }

    /// One attempt: the lock if a majority granted it with enough validity left, `Ok(None)`
    /// otherwise (nothing is held then; [`QuorumMutex::acquire_timeout`] with a zero wait makes
    /// the same single attempt and says each node's reason).
    ///
    /// # Errors
    /// None so far: every node's failure is a reason for `Ok(None)`.
    ///
    /// # Cancel safety
    /// Cancel safe: each node's acquire is (what it took is released in the background).
    pub async fn try_acquire(&self) -> Result<Option<QuorumGuard>> {
        match self.attempt().await {
            Ok(guard) => Ok(Some(guard)),
            Err(_) => Ok(None),
        }
    }

    /// Tries until granted, with a random delay between attempts, as long as a majority of the
    /// nodes answers (a lock held by others is waited for without limit).
    ///
    /// # Errors
    /// [`ErrorKind::Connection`] when an attempt could not reach a majority of the nodes
    /// (refused connections, no answer within the per-node timeout): the message names each
    /// node and its reason; nothing is held afterwards.
    ///
    /// # Cancel safety
    /// As [`QuorumMutex::try_acquire`].
    pub async fn acquire(&self) -> Result<QuorumGuard> {
        self.acquire_until(None).await
    }

    /// Tries until granted or until `wait` is over (`Duration::ZERO`: one attempt).
    ///
    /// # Errors
    /// [`ErrorKind::Busy`] when no attempt was granted within `wait`: the message names each
    /// node and its reason in the last attempt (held by another owner, no answer within the
    /// per-node timeout, a connection error …, or too little validity left). Nothing is held
    /// afterwards.
    ///
    /// # Cancel safety
    /// As [`QuorumMutex::try_acquire`].
    pub async fn acquire_timeout(&self, wait: Duration) -> Result<QuorumGuard> {
        self.acquire_until(Some(wait)).await
    }

    async fn acquire_until(&self, wait: Option<Duration>) -> Result<QuorumGuard> {
        let started = Instant::now();
        let deadline = wait.and_then(|w| started.checked_add(w));
        loop {
            let why = match self.attempt().await {
                Ok(guard) => return Ok(guard),
                Err(why) => why,
            };
            let now = Instant::now();
            let nap = self.retry_delay();
            let nap = match deadline {
                Some(d) if now >= d => return Err(self.busy(started.elapsed(), &why)),
                Some(d) => nap.min(d - now),
                // Without a wait limit, a majority that could not be reached at all ends the
                // wait as a mutex's acquire ends on a connection error: an error, not a hang.
                None if why.unreachable() > self.nodes.len() - self.majority() => {
                    return Err(self.unreachable(&why));
                }
                None => nap,
            };
            tokio::time::sleep(nap).await;
        }
    }

    /// A random delay before the next attempt: uniform in 5 ms ..= max(10 ms, min(TTL/10,
    /// 200 ms)).
    fn retry_delay(&self) -> Duration {
        let low = Duration::from_millis(5);
        let high = (self.ttl / 10)
            .min(Duration::from_millis(200))
            .max(Duration::from_millis(10));
        let mut raw = [0u8; 8];
        // Jitter needs no secrecy: without the OS generator, take the middle.
        let draw = match getrandom::fill(&mut raw) {
            Ok(()) => u64::from_le_bytes(raw),
            Err(_) => u64::MAX / 2,
        };
        let span = u64::try_from((high - low).as_micros()).unwrap_or(0);
        low + Duration::from_micros(draw % (span + 1))
    }

    fn busy(&self, waited: Duration, why: &Refusal) -> Error {
        Error::new(
            ErrorKind::Busy,
            format!(
                "quorum lock `{}`: no majority ({} of {} nodes) within {waited:?}; last attempt: \
                 {why}. Nothing is held",
                self.name,
                self.majority(),
                self.nodes.len()
            ),
        )
    }

    fn unreachable(&self, why: &Refusal) -> Error {
        Error::new(
            ErrorKind::Connection,
            format!(
                "quorum lock `{}`: a majority ({} of {} nodes) could not be reached: {why}. \
                 Nothing is held; retry once the nodes are back (acquire_timeout keeps trying \
                 for its whole wait)",
                self.name,
                self.majority(),
                self.nodes.len()
            ),
        )
    }

    /// One attempt: acquire everywhere, fence in two rounds, check the validity. Gives back
    /// everything on failure and says why.
    async fn attempt(&self) -> std::result::Result<QuorumGuard, Refusal> {
        let started = Instant::now();
        let timeout = self.node_timeout;
        let tries = join_all(
            self.nodes
                .iter()
                .map(|m| tokio::time::timeout(timeout, m.try_acquire())),
        )
        .await;
        let mut reasons = Vec::with_capacity(self.nodes.len());
        let mut held: Vec<(usize, MutexGuard)> = Vec::new();
        for (i, outcome) in tries.into_iter().enumerate() {
            reasons.push(match outcome {
                Ok(Ok(Some(guard))) => {
                    held.push((i, guard));
                    NodeReason::Granted
                }
                Ok(Ok(None)) => NodeReason::HeldByAnother,
                Ok(Err(e)) => NodeReason::Failed(e.to_string()),
                Err(_) => NodeReason::TimedOut(timeout),
            });
        }
        let (fence, committed) = match self.fence(&held, &mut reasons).await {
            Some(fenced) => fenced,
            None => return Err(self.refuse(held, reasons, None).await),
        };
        // Only the nodes that committed the fence count, and only they stay held: a node kept
        // out, or one whose fencing failed, gives its hold back (in the background, as its
        // guard drops).
        held.retain(|(i, _)| committed.contains(i));
        let validity = (self.ttl.saturating_sub(drift(self.ttl))).saturating_sub(started.elapsed());
        let least = self.ttl * MIN_VALIDITY_PERCENT / 100;
        if validity < least {
            return Err(self.refuse(held, reasons, Some(validity)).await);
        }
        Ok(QuorumGuard::new(
            self.name.clone(),
            (self.nodes.len(), self.majority()),
            held,
            fence,
            self.node_timeout,
        ))
    }

    /// Both fencing rounds; the committed fence and the nodes that committed it, or `None` (the
    /// reasons say why) when a round fell short of a majority.
    async fn fence(
        &self,
        held: &[(usize, MutexGuard)],
        reasons: &mut [NodeReason],
    ) -> Option<(FencingToken, Vec<usize>)> {
        if held.len() < self.majority() {
            return None;
        }
        let timeout = self.node_timeout;
        let round1 = join_all(
            held.iter()
                .map(|(_, g)| tokio::time::timeout(timeout, g.fencing_token())),
        )
        .await;
        let mut fenced = Vec::new();
        for ((i, guard), outcome) in held.iter().zip(round1) {
            match outcome {
                Ok(Ok(fence)) => fenced.push((*i, guard, fence)),
                Ok(Err(e)) => reasons[*i] = NodeReason::Fence(e.to_string()),
                Err(_) => reasons[*i] = NodeReason::Fence(format!("no answer within {timeout:?}")),
            }
        }
        if fenced.len() < self.majority() {
            return None;
        }
        let top = fenced.iter().map(|(_, _, f)| f.get()).max()?;
        let quorum = FencingToken::new(top.checked_add(1)?);
        let round2 = join_all(
            fenced
                .iter()
                .map(|(_, g, _)| tokio::time::timeout(timeout, raise(g, quorum, self.ttl))),
        )
        .await;
        let mut committed = Vec::with_capacity(fenced.len());
        for ((i, _, _), outcome) in fenced.iter().zip(round2) {
            match outcome {
                Ok(Ok(RaiseReply::Raised)) => committed.push(*i),
                Ok(Ok(RaiseReply::KeptOut(left))) => reasons[*i] = NodeReason::KeptOut(left),
                Ok(Ok(RaiseReply::Gone)) => {
                    reasons[*i] = NodeReason::Fence("the lease ran out before round 2".into());
                }
                Ok(Ok(RaiseReply::Other)) => {
                    reasons[*i] = NodeReason::Fence("another owner took it before round 2".into());
                }
                Ok(Err(e)) => reasons[*i] = NodeReason::Fence(e.to_string()),
                Err(_) => reasons[*i] = NodeReason::Fence(format!("no answer within {timeout:?}")),
            }
        }
        (committed.len() >= self.majority()).then_some((quorum, committed))
    }

    /// Gives back every hold of a failed attempt and builds its refusal.
    async fn refuse(
        &self,
        held: Vec<(usize, MutexGuard)>,
        reasons: Vec<NodeReason>,
        validity: Option<Duration>,
    ) -> Refusal {
        // A release whose answer is lost leaves the lease to run out; the attempt has failed
        // either way.
        let _ = join_all(held.into_iter().map(|(_, g)| g.release())).await;
        Refusal {
            reasons,
            validity,
            ttl: self.ttl,
        }
    }
}

impl fmt::Debug for QuorumMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            name,
            nodes,
            ttl,
            node_timeout,
        } = self;
        f.debug_struct("QuorumMutex")
            .field("name", name)
            .field("nodes", &nodes.len())
            .field("ttl", ttl)
            .field("node_timeout", node_timeout)
            .finish()
    }
}

/// Round 2 on one node: raise the slot's counter to `fence` while we still hold the lock there,
/// unless the node's data is younger than `ttl`.
async fn raise(guard: &MutexGuard, fence: FencingToken, ttl: Duration) -> Result<RaiseReply> {
    let lease = guard.hold().lease();
    let since = lease.keys.quorum_since(lease.transport.slot().is_cluster());
    let mut call = Call::new(&scripts::FENCE_RAISE, 1);
    call.arg(&*lease.keys.lock)
        .arg(lease.token)
        .arg(lease.keys.counter())
        .arg(fence.get())
        .arg(since)
        .arg(crate::timing::millis(ttl));
    let reply = lease
        .transport
        .run(&call, "quorum fence", lease.keys.name())
        .await?;
    RaiseReply::decode(&reply).ok_or_else(|| unexpected("quorum fence", &reply))
}

/// What one node said in an attempt.
#[derive(Clone, Debug)]
enum NodeReason {
    Granted,
    HeldByAnother,
    TimedOut(Duration),
    Failed(String),
    /// Granted, but a fencing round failed there.
    Fence(String),
    /// Granted, but the node's data is younger than one TTL: it does not count yet.
    KeptOut(Duration),
}

/// Why an attempt was not granted.
struct Refusal {
    reasons: Vec<NodeReason>,
    /// `Some` when a majority was reached but too little validity was left.
    validity: Option<Duration>,
    ttl: Duration,
}

impl Refusal {
    /// How many nodes did not answer (a connection error or no answer in time).
    fn unreachable(&self) -> usize {
        self.reasons
            .iter()
            .filter(|r| matches!(r, NodeReason::TimedOut(_) | NodeReason::Failed(_)))
            .count()
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(validity) = self.validity {
            write!(
                f,
                "a majority granted it, but only {validity:?} of the {:?} lease was left \
                 (at least {MIN_VALIDITY_PERCENT} % is required: nodes answer too slowly for \
                 this TTL); ",
                self.ttl
            )?;
        }
        for (i, reason) in self.reasons.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            match reason {
                NodeReason::Granted => write!(f, "node {i}: granted"),
                NodeReason::HeldByAnother => write!(f, "node {i}: held by another owner"),
                NodeReason::TimedOut(t) => write!(f, "node {i}: no answer within {t:?}"),
                NodeReason::Failed(e) => write!(f, "node {i}: {e}"),
                NodeReason::Fence(e) => write!(f, "node {i}: granted, fencing failed: {e}"),
                NodeReason::KeptOut(left) => write!(
                    f,
                    "node {i}: kept out for {left:?} more (its data is younger than one TTL: \
                     it restarted without its data, or is new)"
                ),
            }?;
        }
        Ok(())
    }
}
