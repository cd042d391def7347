//! The leases one client holds, by lock key: for [`crate::Client::shutdown`] (release them all)
//! and for the warning when a caller waits for a lock its own client holds (a self-wait that
//! may never end).
//!
//! Reentrancy does not use this map: it is decided by the scope of the running body
//! (`hold.rs`), never by who the client is or which task runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use crate::lease::LeaseCore;
use crate::runtime::lock;

/// The live leases of one client, by lock key.
#[derive(Debug, Default)]
pub(crate) struct HeldLocks {
    map: Mutex<HashMap<Arc<str>, Weak<LeaseCore>>>,
}

impl HeldLocks {
    /// Records a lease just acquired from Redis (replacing the record of an earlier lease of the
    /// same lock, which can only be a lost one).
    pub(crate) fn insert(&self, lease: &Arc<LeaseCore>) {
        lock(&self.map).insert(lease.keys.lock.clone(), Arc::downgrade(lease));
    }

    /// Forgets `lease` (its last hold is gone), unless a newer lease replaced it.
    pub(crate) fn remove(&self, lease: &LeaseCore) {
        let mut map = lock(&self.map);
        if map
            .get(&*lease.keys.lock)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), lease))
        {
            map.remove(&*lease.keys.lock);
        }
    }

    /// The live lease of `lock_key`, if this client holds it.
    pub(crate) fn get(&self, lock_key: &str) -> Option<Arc<LeaseCore>> {
        lock(&self.map)
            .get(lock_key)
            .and_then(Weak::upgrade)
            .filter(|lease| lease.is_live())
    }

    /// Every lease not yet released or lost, forgetting them all (client shutdown).
    pub(crate) fn take_all(&self) -> Vec<Arc<LeaseCore>> {
        lock(&self.map)
            .drain()
            .filter_map(|(_, lease)| lease.upgrade())
            .filter(|lease| !lease.is_settled())
            .collect()
    }
}
