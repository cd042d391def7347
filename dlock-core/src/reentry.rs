//! Task-scoped reentrancy: which lock each task of this client holds.
//!
//! In async Rust the unit of ownership is the task, not the thread (a task moves between
//! threads; a thread runs many tasks). A task that acquires a lock it already holds through the
//! same client either re-enters it (reentrant locks: a new hold on the same lease, no round trip,
//! the same fencing token) or gets an [`crate::ErrorKind::Reentrancy`] error — never a wait for
//! itself, which would deadlock until the lease ran out. A spawned task is a different owner.
//! Code outside any task (the future given to `Runtime::block_on`, e.g. `#[tokio::main]`) is
//! identified by its thread.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::error::{Error, ErrorKind, Result};
use crate::lease::LeaseCore;

/// Who holds a lock within this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Owner {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

impl Owner {
    /// The current task, or the current thread outside a task.
    pub(crate) fn current() -> Self {
        tokio::task::try_id().map_or_else(|| Self::Thread(std::thread::current().id()), Self::Task)
    }
}

/// The locks held through one client, by lock key, with their owner.
#[derive(Debug, Default)]
pub(crate) struct HeldLocks {
    map: Mutex<HashMap<Arc<str>, Weak<LeaseCore>>>,
}

impl HeldLocks {
    /// If the current owner already holds `lock_key`: a new hold on that lease (reentrant) or
    /// an error (not reentrant). `None` when it must be acquired from Redis.
    pub(crate) fn reenter(
        &self,
        lock_key: &str,
        name: &str,
        reentrant: bool,
    ) -> Result<Option<(Arc<LeaseCore>, u32)>> {
        let held = {
            let map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
            map.get(lock_key).and_then(Weak::upgrade)
        };
        let Some(lease) = held.filter(|l| l.owner == Owner::current() && l.is_live()) else {
            return Ok(None);
        };
        if !reentrant {
            return Err(Error::new(
                ErrorKind::Reentrancy,
                format!(
                    "lock `{name}` is already held by this task; acquiring it again would wait \
                     for itself. Release it first, or enable MutexOptions::reentrant(true)"
                ),
            ));
        }
        Ok(lease.add_hold().map(|depth| (lease, depth)))
    }

    /// Records a lease just acquired from Redis (replacing a stale record of an earlier lease
    /// of the same lock, which can only be a lost one).
    pub(crate) fn insert(&self, lease: &Arc<LeaseCore>) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.insert(lease.keys.lock.clone(), Arc::downgrade(lease));
    }

    /// Forgets `lease` (its last hold is gone), unless a newer lease replaced it.
    pub(crate) fn remove(&self, lease: &LeaseCore) {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if map
            .get(&*lease.keys.lock)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), lease))
        {
            map.remove(&*lease.keys.lock);
        }
    }
}
