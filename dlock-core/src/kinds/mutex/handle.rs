//! The mutex handle's data, which every part of the mutex reads: [`Mutex`] (the client's shared
//! state, the lock's keys, the settings of its leases), its constructor, accessors and `Debug`.
//! The lowest file of `kinds/mutex/`: it imports nothing of its folder.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::client::context::Context;
use crate::key::LockKeys;
use crate::options::LockSettings;

/// A handle on one distributed mutex, identified by its name. Cheap to clone.
///
/// Create it with [`crate::Client::mutex`]. A handle holds nothing by itself; each successful
/// acquire returns a [`MutexGuard`](crate::MutexGuard).
///
/// ```no_run
/// # async fn demo(client: dlock_core::Client) -> Result<(), dlock_core::Error> {
/// use std::time::Duration;
/// let lock = client.mutex("order:42")?;
/// let guard = lock.acquire_timeout(Duration::from_secs(5)).await?;
/// // Pass the fencing token to the storage you write to.
/// let token = guard.fencing_token().await?;
/// # let _ = token;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Mutex {
    pub(super) ctx: Arc<Context>,
    pub(super) keys: LockKeys,
    pub(super) settings: LockSettings,
}

impl Mutex {
    pub(crate) fn new(ctx: Arc<Context>, keys: LockKeys, settings: LockSettings) -> Self {
        Self {
            ctx,
            keys,
            settings,
        }
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        self.keys.name()
    }

    /// The lease each acquisition gets (renewed by the watchdog if enabled).
    pub fn ttl(&self) -> Duration {
        self.settings.ttl
    }

    /// The lock's keys.
    pub(crate) fn keys(&self) -> &LockKeys {
        &self.keys
    }
}

impl fmt::Debug for Mutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Self {
            ctx: _,
            keys,
            settings,
        } = self;
        f.debug_struct("Mutex")
            .field("name", &keys.name())
            .field("label", &settings.label)
            .field("ttl", &settings.ttl)
            .field("renewal", &settings.renewal)
            .field("reentrant", &settings.reentrant)
            .field("on_lost", &settings.on_lost)
            .field("durability", &settings.durability())
            .finish_non_exhaustive()
    }
}
