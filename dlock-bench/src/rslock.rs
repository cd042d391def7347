//! rslock, the best Rust peer (issue #13), as a [`Subject`]: its documented API as its README
//! uses it, on one Redis server.
//!
//! * Client: one `LockManager` per process over one `redis::Client::open(url)`, which is what
//!   `LockManager::new(vec![url])` builds (it only `unwrap`s the URL): one multiplexed connection
//!   with the `redis` crate's defaults (RESP2, Nagle on), opened on first use. Retry settings are
//!   rslock's defaults (3 tries per `lock` call, a random pause of 0–200 ms between tries).
//! * Acquire: `LockManager::acquire(name, 10 s)`, its documented blocking acquire, which "loops
//!   until the lock is acquired" (it calls `lock` again and again; each failed `SET NX` is followed
//!   by its compare-and-delete script). rslock has no wait bound of its own, so the benchmark
//!   bounds it like dlock's: [`tokio::time::timeout`] of [`ACQUIRE_WAIT`] (30 s). A timeout drops
//!   the acquire mid-way: an attempt in flight may still take the lock, which then stays until
//!   its TTL (rslock documents this for cancellation).
//! * Release: `LockGuard::release()`, which runs its compare-and-delete script (`EVALSHA`, with
//!   `redis::Script` hashing the script again on every call). It reports nothing: whether the
//!   lock was still held is unknown to the caller, so [`Subject::release`] answers `true`. The
//!   pair workloads show a lost release anyway: their `del` count falls below the pairs.
//!
//! rslock has no fencing token: it does not run W2-fence.

use rslock::{LockGuard, LockManager};

use crate::redis_stats::Plain;
use crate::rt::BoxError;
use crate::spec::{ACQUIRE_WAIT, TTL};
use crate::subject::Subject;

/// The rslock version measured: the exact version pinned in dlock-bench's Cargo.toml (a test
/// below checks that the two agree).
pub(crate) const VERSION: &str = "0.10.0";

/// An rslock lock manager on the benchmark's server.
#[derive(Debug)]
pub(crate) struct Rslock(LockManager);

/// rslock's handle on one lock name: it has none of its own (every call takes the name).
#[derive(Debug)]
pub(crate) struct RslockLock<'a> {
    manager: &'a LockManager,
    name: &'a str,
}

impl Subject for Rslock {
    const NAME: &'static str = "rslock";
    const LABEL: &'static str = "rslock 0.10.0";
    const WAITS: bool = true;
    const OWN_PLAIN: Plain = Plain::client_only(&["set"]);
    type Lock<'a> = RslockLock<'a>;
    type Guard<'a> = LockGuard;

    async fn connect(url: &str) -> Result<Self, BoxError> {
        // `LockManager::new(vec![url])` without its `unwrap` of the URL.
        let client = redis::Client::open(url)?;
        Ok(Self(LockManager::from_clients(vec![client])))
    }

    fn lock<'a>(&'a self, name: &'a str) -> Result<RslockLock<'a>, BoxError> {
        Ok(RslockLock {
            manager: &self.0,
            name,
        })
    }

    async fn acquire<'a, 'l: 'a>(lock: &'a Self::Lock<'l>) -> Result<Option<LockGuard>, BoxError> {
        let RslockLock { manager, name } = *lock;
        match tokio::time::timeout(ACQUIRE_WAIT, manager.acquire(name, TTL)).await {
            Ok(Ok(guard)) => Ok(Some(guard)),
            Ok(Err(e)) => Err(format!("rslock: acquire failed: {e}").into()),
            Err(_elapsed) => Ok(None),
        }
    }

    async fn release(guard: Self::Guard<'_>) -> Result<bool, BoxError> {
        guard.release().await;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_the_one_pinned() {
        let manifest = include_str!("../Cargo.toml");
        let pin = format!("rslock = {{ version = \"={VERSION}\"");
        assert!(manifest.contains(&pin), "Cargo.toml does not pin {pin}");
        assert!(Rslock::LABEL.ends_with(VERSION));
    }
}
