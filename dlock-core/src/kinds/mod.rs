//! The lock kinds, one file or folder each, on the client's shared state ([`crate::client`]):
//! every kind adds its own constructor to [`crate::Client`]. The kinds that queue (the mutex,
//! and through `shared.rs` the semaphore and the read-write lock) wait in one loop,
//! `queue.rs`, each bringing its own requests to it.

pub(crate) mod election;
pub(crate) mod multilock;
pub(crate) mod mutex;
pub(crate) mod queue;
pub(crate) mod quorum;
pub(crate) mod rate_limiter;
pub(crate) mod release_request;
pub(crate) mod rwlock;
pub(crate) mod semaphore;
pub(crate) mod shared;
