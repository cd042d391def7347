//! Workspace-level integration tests: every behaviour in its own file, all against real
//! `redis-server` processes started by `dlock-testkit` (never a mock, never a system service).
//! Multi-process behaviours start the `dlock-test-worker` binary.
//!
//! The files are grouped by subject, one folder each; a folder is a test-name prefix
//! (`locks::mutex_exclusion::…`), so `make test-<folder>` runs one group (tests/README.md).
//!
//! Each behaviour of dlock-core is written once and runs on both backends, a standalone server
//! and a 3-master Redis Cluster, as `<folder>::<file>::<test>::single` and `…::cluster`
//! (`support::backend_tests!`); a file that runs on one backend only says why in its first
//! lines. `operate/cluster.rs` holds what only a cluster has.

// A panic is how a test fails, helpers included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod locks;
mod operate;
mod other_kinds;
mod partitions;
mod repo;
mod scheduler;
mod security;
mod watchdog;
mod web;
