//! Workspace-level integration tests: every behaviour in its own file, all against real
//! `redis-server` processes started by `dlock-testkit` (never a mock, never a system service).
//! Multi-process behaviours start the `dlock-test-worker` binary.
//!
//! Each behaviour of dlock-core is written once and runs on both backends, a standalone server
//! and a 3-master Redis Cluster, as `<file>::<test>::single` and `…::cluster`
//! (`support::backend_tests!`); a file that runs on one backend only says why in its first
//! lines. `cluster.rs` holds what only a cluster has.

// A panic is how a test fails, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod acl;
mod authentication;
mod cancel_acquire;
mod client_shutdown;
mod cluster;
mod dashboard;
mod dashboard_browser;
mod durability;
mod election;
mod error_hints;
mod fencing;
mod fifo_expiry;
mod foreign_data;
mod guard_drop;
mod guarded_write;
mod holder_crash;
mod inspect;
mod invalid_input;
mod lease_lost;
mod lease_suspect;
mod leaving_waiters;
mod lock_family;
mod lost_signals;
mod macro_lock;
mod makefile;
mod metrics;
mod multilock;
mod mutex_exclusion;
mod mutex_release;
mod queue_reask;
mod quorum;
mod rate_limiter;
mod readme;
mod redis_down;
mod reentrancy;
mod release_request;
mod retry_safety;
mod rolling_deploy;
mod runtimes;
mod rwlock;
mod scheduler_control;
mod scheduler_crash;
mod scheduler_exactly_once;
mod scheduler_group;
mod scheduler_oneoff;
mod scheduler_outage;
mod scheduler_records;
mod scheduler_registry;
mod scheduler_retry;
mod scheduler_runtime;
mod scheduler_share;
mod scheduler_shutdown;
mod scheduler_stall;
mod secrets;
mod semaphore;
mod sentinel;
mod stale_handoff;
mod testkit_faults;
mod tls;
mod wake_on_release;
mod watchdog_batch;
mod watchdog_hold;
mod watchdog_limits;
mod watchdog_outage;
mod watchdog_pause;
mod web_pay;
mod web_postgres;
mod with_lock;
