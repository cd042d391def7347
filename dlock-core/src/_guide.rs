//! The guide: how to use dlock-core, chapter by chapter, beyond the crate page's map.
//!
//! Each chapter is a markdown file in `dlock-core/guide/`, shipped in the package and rendered
//! here as a module with nothing but documentation (no items: nothing here is API). Every
//! `rust` block in it is a complete program or test of dlock's repository (`examples/readme/`),
//! verbatim; dlock's tests hold each block to its file and build and run them against a real
//! Redis, so they are not doctests a second time (lib.rs leaves this module out of doctests).
//!
//! | chapter | what it covers |
//! |---|---|
//! | [`locks`] | the mutex, `#[distributed_lock]`, reentrancy, how a contended lock is handed over |
//! | [`leases_and_fencing`] | leases and the watchdog, lease loss and suspicion, asking a holder to let go, fencing tokens |
//! | [`family`] | the semaphore, the read-write lock, leader election, the multi-lock, quorum (Redlock) |
//! | [`guarded_writes`] | writes applied only while the hold is yours; fenced writes; the fence in SQL |
//! | [`rate_limits`] | a budget of calls shared by every replica, `#[rate_limited]` |
//! | [`operating`] | metrics, the `dlock` command line, introspection |
//! | [`production`] | deployments (Cluster, Sentinel, quorum), replica acknowledgement, the application's own connection, TLS, ACL users, secrets, compatibility |
//! | [`managed_services`] | ElastiCache, MemoryDB, Memorystore, Azure Managed Redis, Upstash: what to expect (documented, not tested here) |
//! | [`testing`] | testing your code against real Redis and its faults (`dlock-testkit`); dlock's own checks |
//! | [`guarantees`] | what dlock promises, what it does not, what it needs |
//! | [`partitions`] | partitions and failover, measured: each durability under each network fault |
//! | [`benchmarks`] | what it costs and how fast it is, at scale |
//! | [`web_layers`] | dlock-tower: idempotency keys, distributed rate limits and single-flight as tower layers for axum |
//!
//! The scheduler's chapters are in `dlock_scheduler::_guide` (jobs, delivery, one-off jobs and
//! groups, operating).

#[doc = include_str!("../guide/locks.md")]
pub mod locks {}

#[doc = include_str!("../guide/leases_and_fencing.md")]
pub mod leases_and_fencing {}

#[doc = include_str!("../guide/family.md")]
pub mod family {}

#[doc = include_str!("../guide/guarded_writes.md")]
pub mod guarded_writes {}

#[doc = include_str!("../guide/rate_limits.md")]
pub mod rate_limits {}

#[doc = include_str!("../guide/operating.md")]
pub mod operating {}

#[doc = include_str!("../guide/production.md")]
pub mod production {}

#[doc = include_str!("../guide/managed_services.md")]
pub mod managed_services {}

#[doc = include_str!("../guide/testing.md")]
pub mod testing {}

#[doc = include_str!("../guide/guarantees.md")]
pub mod guarantees {}

#[doc = include_str!("../guide/partitions.md")]
pub mod partitions {}

#[doc = include_str!("../guide/benchmarks.md")]
pub mod benchmarks {}

#[doc = include_str!("../guide/web_layers.md")]
pub mod web_layers {}
