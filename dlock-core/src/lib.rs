//! Distributed locks on Redis for Tokio applications.
//!
//! ```no_run
//! # async fn demo() -> Result<(), dlock_core::Error> {
//! use std::time::Duration;
//!
//! // Connects now: a wrong URL, password or port is an error here, not at the first lock.
//! let client = dlock_core::Client::builder("redis://127.0.0.1:6379/").connect().await?;
//! let lock = client.mutex("order:42")?;
//! let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
//! // Exclusive across every process that uses the same Redis and lock name.
//! // Hand the fencing token to the storage you write to.
//! println!("holding {} with token {}", guard.name(), guard.fencing_token().await?);
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! # Map
//! Every public item, by what it is for (all at the crate root).
//!
//! | for | items |
//! |---|---|
//! | connecting | [`Client`] ([`Client::builder`] `(url).connect()` fails at start-up on a wrong URL; [`Client::cluster_builder`], [`Client::sentinel_builder`]), [`ClientBuilder`], [`Connection`]; on the application's own redis-rs connection: [`ClientBuilder::app_connection`] with an [`AppConnection`]; defaults [`DEFAULT_COMMAND_TIMEOUT`], [`DEFAULT_CONNECT_TIMEOUT`], [`DEFAULT_KEY_PREFIX`], [`DEFAULT_TTL`] |
//! | a mutex | [`Mutex`] ([`Client::mutex`]), [`MutexGuard`], [`ReleaseOutcome`], [`ExtendOutcome`]; options [`MutexOptions`], [`Wait`], [`OnLost`], [`Durability`]; lock names from values: [`KeyPart`] |
//! | a function under a lock | `#[distributed_lock]` (feature `macros`), [`set_default_client`] |
//! | leases and fences | [`Lease`], [`LeaseLost`], [`LeaseState`], [`LostReason`], [`FencingToken`]; bounds [`MIN_TTL`], [`MAX_TTL`], [`MIN_WATCHDOG_TTL`] |
//! | the other kinds | [`Semaphore`], [`Permit`]; [`RwLock`], [`ReadGuard`], [`WriteGuard`], [`UpgradeError`]; [`Election`], [`Leadership`], [`Leader`]; [`MultiLock`], [`MultiGuard`]; [`QuorumMutex`], [`QuorumGuard`], [`QuorumRelease`], [`NodeRelease`], [`MIN_VALIDITY_PERCENT`] |
//! | data the lock protects | [`GuardedWrite`], [`Guarded`], [`Refused`]; [`Client::fenced_set`], [`Fenced`], [`fence_key`] |
//! | rate limits | [`RateLimiter`], [`KeyedRateLimiter`], [`Quota`], [`Decision`]; `#[rate_limited]` (feature `macros`) |
//! | operating | [`Client::inspect`], [`HeldLock`], [`HeldLocks`], [`HolderInfo`], [`SemaphoreInfo`], [`RwLockInfo`], [`SharedHolder`]; [`Client::shutdown`], [`ShutdownReport`] |
//! | errors | [`Error`], [`ErrorKind`], [`Result`] |
//! | limits on input | [`MAX_NAME_LEN`], [`MAX_PREFIX_LEN`], [`MAX_LABEL_LEN`] |
//! | building on dlock | [`ext`], [`redis`] |
//!
//! # The guide
//! The reference, chapter by chapter, in [`_guide`]: [locks](_guide::locks),
//! [leases and fencing](_guide::leases_and_fencing), [the lock family](_guide::family),
//! [guarded writes](_guide::guarded_writes), [rate limits](_guide::rate_limits),
//! [operating](_guide::operating), [production Redis](_guide::production),
//! [testing](_guide::testing), [guarantees](_guide::guarantees),
//! [benchmarks](_guide::benchmarks).
//!
//! # What dlock guarantees
//! * **Mutual exclusion while the lease lasts.** Every state change is one atomic command or
//!   Lua script: an uncontended acquire is a plain `SET NX PX GET` (while callers wait, the lock
//!   key is kept past its holder's lease, so it fails and FIFO holds), the rest are scripts. Release and extend check a 128-bit
//!   owner token drawn from a CSPRNG, so nothing ever releases or extends a lock it does not own.
//! * **Retries are safe.** The token names the acquisition: a retried acquire never queues
//!   twice and a retried fence request returns the same fence; release and extend are
//!   owner-checked. An acquire whose reply was lost (timeout, dropped future) is released in the
//!   background.
//! * **Fencing tokens** strictly increase per lock name in holding order, across releases,
//!   expiries and processes. They are issued on demand ([`MutexGuard::fencing_token`]), only to
//!   the current holder, so holders that never ask pay nothing; a hand-off carries one, and
//!   [`MutexOptions::fenced`] takes one in the acquisition's own round trip. They come from one
//!   counter per cluster slot; a counter lost to a restart or failover restarts at the server
//!   clock, so they keep increasing.
//! * **Fair, push-based waiting.** A waiter queues in Redis; release hands the lock to the
//!   oldest live waiter and wakes exactly that waiter (no polling, no thundering herd).
//! * **Lease loss reaches the work.** A [`Lease`] (from [`MutexGuard::lease`] or
//!   [`Mutex::with_lock`]) resolves [`Lease::lost`] and cancels its `CancellationToken` no later
//!   than its safe-until instant: when a renewal finds the lock deleted or taken, when Redis
//!   cannot be reached in time, or when renewal stops at `max_hold`. With
//!   [`MutexOptions::watchdog`] the lease is renewed every third of it, 100 locks per script call.
//! * **Reentrancy for nested calls only** (default on): code running inside the body that
//!   holds a lock ([`Mutex::with_lock`], `#[distributed_lock]`) re-enters it without a round
//!   trip — a locked function calling another on the same key, recursion up to 64 levels.
//!   Concurrent futures (`join!`, `select!`, `join_all`), spawned tasks, a moved guard and a
//!   second plain `acquire()` are other holders and wait their turn; nested acquisitions that run
//!   concurrently inside one body take turns. See [`MutexOptions::reentrant`].
//! * **FIFO, also on expiry.** A lock whose holder's lease ran out goes to the oldest live
//!   waiter, never to a newcomer; a hand-off that reached a waiter too late (it was paused) is
//!   checked with the server before it is returned.
//! * **No foreign data touched.** A lock key holding data dlock did not write is reported
//!   ([`ErrorKind::WrongType`], naming the key) and never modified.
//! * **The lock family.** [`Semaphore`] (leased, fenced permits in strict FIFO order) and
//!   [`RwLock`] (many readers or one writer, one FIFO queue for both, so neither starves; atomic
//!   downgrade, never-waiting upgrade) share one weighted admission with a lease and a fence per
//!   holder, renewed by the same watchdog.
//! * **Clean shutdown.** [`Client::shutdown`] releases every lock and queue entry of the client
//!   at process exit, so other replicas get them at once.
//!
//! # What it does not guarantee
//! * **A lease can be outlived by a paused holder.** A holder paused longer than its lease (GC,
//!   VM migration, swap, `SIGSTOP`) right after it checked [`MutexGuard::remaining`] or
//!   [`Lease::is_held`] still acts as the owner when it resumes. Check the lease before
//!   irreversible steps, and have the storage check fencing tokens where a stale writer must
//!   never get through. (A *waiter* paused while the lock was handed to it is not affected: the
//!   stale hand-off is detected and it waits again.)
//! * **Failover can lose a lock.** Redis replicates asynchronously: a lock written to a master
//!   that fails before replicating is gone on the promoted replica. Fencing tokens stay
//!   increasing (every fence is floored at the server clock, so the promoted master's exceed
//!   those lost with the old one), but two holders may briefly coexist: the old holder learns
//!   it from [`Lease::lost`] at its next renewal, or from its release. A Sentinel client
//!   ([`Client::sentinel_builder`]) follows the failover to the new master by itself; requests
//!   made while no master answers fail after the command timeout.
//!   [`MutexOptions::durability`] narrows the window: the guard is returned only once `n`
//!   replicas acknowledged the grant, so a failover to one of them keeps it (one to a replica
//!   that did not acknowledge still loses it).
//! * **Clocks.** Leases are measured by the Redis server; the client's view
//!   ([`MutexGuard::safe_until`]) is counted from when the request was sent and reduced by a
//!   drift allowance of `TTL/100 + 2 ms`.
//!
//! # Requirements
//! Redis 7.0 or newer (RESP3, `LPOS`, `SET … NX GET`), reached through one multiplexed connection per
//! [`Client`]; Redis Cluster needs Redis 7 (sharded pub/sub) and is reached with
//! [`Client::cluster_builder`]; a master watched by Redis Sentinel with
//! [`Client::sentinel_builder`]. Every key of one lock shares the hash tag `{name}`, so each
//! script runs on one slot. A client can also run on the application's own connection
//! ([`ClientBuilder::app_connection`]; redis-rs major version 1, the [`redis`] re-exported
//! here), keeping a connection of its own for wake-ups only.
//!
//! # Building on dlock
//! [`ext`] is for crates built on dlock (dlock-scheduler is one): requests on a client's own
//! connection with its timeouts and error explanations, the keys dlock names, subscriptions on
//! that connection. Its signatures name types of the `redis` crate, re-exported as
//! [`redis`]: dlock-core 0.1 uses redis **1.x**, and a new major version of `redis`
//! comes with a new major version of dlock-core.
//!
//! # Layout
//! Each floor is a folder (the ground is its files); every import points into its own floor or
//! a lower one, never up (`scripts/check-module-cycles.py` checks it against this table, which
//! is the only table of floors). From the top floor:
//!
//! | floor | modules | what lives there |
//! |---|---|---|
//! | guide | `_guide.rs` | [`_guide`]: the guide's chapters (`guide/*.md`), modules of documentation only |
//! | extension | `ext.rs`, `__private.rs` | [`ext`], the surface crates built on dlock use (timed requests on a client's connection, base keys, subscriptions); what `dlock-macros` expands to (hidden, unstable), and the conformance test's hooks behind the non-default `__conformance` feature |
//! | lock kinds | `kinds/` | one file per kind, each adding its constructor to [`Client`]: [`Mutex`], [`Semaphore`], [`RwLock`] and the weighted FIFO admission they share (`shared.rs`), [`MultiLock`], [`Election`], [`QuorumMutex`] (Redlock over N clients), [`RateLimiter`]; release requests for every kind |
//! | client | `client/` | [`Client`] and what every handle of it shares (`context.rs`); [`ClientBuilder`]; the operator's calls: [`Client::inspect`], [`Client::shutdown`], [`Client::fenced_set`] |
//! | holds | `holds/` | [`MutexGuard`]: one hold, release, extend; reentrancy (the scope of the running body, nested holds and their turns); [`GuardedWrite`], writes applied only while the hold is ours |
//! | leases | `lease/` | [`Lease`], [`LeaseLost`], [`LeaseState`]: one acquisition in Redis, its standing (held, suspect, asked, lost) and how its loss reaches the work; the client's held leases; the watchdog's batched renewal |
//! | transport | `transport/` | one request shape under the command timeout; the connection (standalone, cluster, the master the sentinels name, or the application's own) and the errors that explain it; waiters, wake channels and grants; subscriptions; replica acknowledgement (`WAIT`); a cluster's shard map |
//! | scripts | `scripts/` | one Lua file per state change with its contract on top, its typed reply, the wire formats and the key layouts |
//! | ground | `error.rs`, `server_texts.rs`, `key.rs`, `keypart.rs`, `options.rs`, `timing.rs`, `token.rs`, `fence_epoch.rs`, `metrics.rs`, `runtime.rs` | [`Error`] / [`ErrorKind`] and the servers' refusal texts that have no error code; names → keys; [`KeyPart`]; [`MutexOptions`] and their validation; lease arithmetic; owner tokens and [`FencingToken`]s; fence epochs; metrics; background tasks |
//!
//! # Features
//! | feature | default | what it adds |
//! |---|---|---|
//! | `macros` | yes | `#[distributed_lock]` and `#[rate_limited]` (re-exported from `dlock-macros`): run an `async fn` under a lock, or only as often as a budget admits, checked at compile time |
//! | `__conformance` | no | not an API: the script texts and state decoders that dlock's own conformance test reads (hidden, may change in any release) |

#![cfg_attr(docsrs, feature(doc_cfg))]

#[doc(hidden)]
pub mod __private;
// Documentation only. Its `rust` blocks are the programs of `examples/readme/`, which dlock's
// tests hold to the text and run against Redis: left out of doctests, not compiled twice.
#[cfg(not(doctest))]
pub mod _guide;
mod client;
mod error;
pub mod ext;
mod fence_epoch;
mod holds;
mod key;
mod keypart;
mod kinds;
mod lease;
mod metrics;
mod options;
mod runtime;
mod scripts;
mod server_texts;
mod timing;
mod token;
mod transport;

pub use client::Client;
pub use client::builder::{
    ClientBuilder, DEFAULT_COMMAND_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_KEY_PREFIX,
    DEFAULT_TTL,
};
pub use client::fenced::{Fenced, fence_key};
pub use client::inspect::{
    HeldLock, HeldLocks, HolderInfo, RwLockInfo, SemaphoreInfo, SharedHolder,
};
pub use client::shutdown::ShutdownReport;
pub use error::{Error, ErrorKind, Result};
pub use holds::guard::{ExtendOutcome, MutexGuard, ReleaseOutcome};
pub use holds::guarded::{Guarded, GuardedWrite, Refused};
pub use key::{MAX_NAME_LEN, MAX_PREFIX_LEN};
pub use keypart::KeyPart;
pub use kinds::election::{Election, Leader, Leadership};
pub use kinds::multilock::{MultiGuard, MultiLock};
pub use kinds::mutex::Mutex;
pub use kinds::quorum::{
    MIN_VALIDITY_PERCENT, NodeRelease, QuorumGuard, QuorumMutex, QuorumRelease,
};
pub use kinds::rate_limiter::{Decision, KeyedRateLimiter, Quota, RateLimiter};
pub use kinds::rwlock::{ReadGuard, RwLock, UpgradeError, WriteGuard};
pub use kinds::semaphore::{Permit, Semaphore};
pub use lease::{Lease, LeaseLost, LeaseState, LostReason};
pub use options::{Durability, MAX_LABEL_LEN, MutexOptions, OnLost, Wait};
pub use timing::{MAX_TTL, MIN_TTL, MIN_WATCHDOG_TTL};
pub use token::FencingToken;
pub use transport::conn::{AppConnection, Connection};

#[cfg(feature = "macros")]
pub use dlock_macros::{distributed_lock, rate_limited};

/// The `redis` crate (redis-rs, major version 1) that dlock-core is built on and that
/// [`ext`]'s signatures name: use it rather than a `redis` dependency of your own, so the
/// types always match.
pub use redis;

/// Sets the client that `#[distributed_lock]` and `#[rate_limited]` functions use when they are not given
/// `client = …`. Call it once, at start-up.
///
/// ```no_run
/// # async fn demo() -> Result<(), dlock_core::Error> {
/// let client = dlock_core::Client::open("redis://127.0.0.1:6379/")?;
/// dlock_core::set_default_client(client)?;
/// # Ok(()) }
/// ```
///
/// # Errors
/// [`ErrorKind::InvalidInput`] if a default client is already set (it is never replaced: locks
/// taken through it must keep one client).
pub fn set_default_client(client: Client) -> Result<()> {
    __private::set_default(client)
}
