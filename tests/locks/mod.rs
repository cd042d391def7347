//! Locks: what every lock kind that queues does, and the guard around it. Mutual exclusion
//! (mutex, semaphore, read-write lock, multi-lock, `#[distributed_lock]`), FIFO and wake-ups,
//! hand-offs and waiters that leave, release and extend, guards, reentrancy, fencing tokens and
//! guarded writes, polite release requests, and retries of every script.
//!
//! Run alone with `make test-locks` (filter `locks::`; tests/README.md).

mod cancel_acquire;
mod fencing;
mod fifo_expiry;
mod guard_drop;
mod guarded_write;
mod leaving_waiters;
mod lock_family;
mod macro_lock;
mod multilock;
mod mutex_exclusion;
mod mutex_release;
mod native_release;
mod queue_reask;
mod reentrancy;
mod release_request;
mod retry_safety;
mod rwlock;
mod semaphore;
mod stale_handoff;
mod wake_on_release;
mod with_lock;
