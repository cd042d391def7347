//! The model checker on dlock's protocol (no mutant), at the unit bounds (`model::bounds`'s
//! `unit*`): every property holds in every state reached, except the expected counterexample
//! of README's "What dlock does not promise" (a paused holder outliving its lease), which the
//! checker must find where pauses are on; every reachability check the model's faults call for
//! is reached (`model::verdict`); and the unique states explored are the number
//! dlock-model/README.md documents for the model (`dlock_model::counts`). Prints the states
//! explored per model, also under a plain `cargo test` (`make test`): written to the process's
//! stderr directly, which the test harness does not capture.

// A test helper fails by panicking, and prints the counts on purpose.
#![allow(clippy::panic, clippy::print_stderr)]

use std::collections::BTreeSet;
use std::io::Write;
use std::time::Instant;

use dlock_model::counts;
use dlock_model::model::{self, Kind, LockModel, bounds};
use stateright::{Checker, HasDiscoveries, Model};

/// Checks `model`, documented in the README as `id`.
fn check(id: &str, model: LockModel) {
    let started = Instant::now();
    let checker = model.checker().threads(2).spawn_bfs().join();
    let unique = checker.unique_state_count();
    let _ = writeln!(
        std::io::stderr(),
        "model `{id}`: {unique} unique states ({} in all), depth {}, {:.1?}",
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    if let Err(why) = model::verdict(&checker) {
        panic!("`{id}`: {why}");
    }
    if let Err(why) = counts::compare(id, unique) {
        panic!("{why}");
    }
}

#[test]
fn mutex() {
    check("unit mutex", bounds::unit(Kind::Mutex));
}

#[test]
fn mutex_crowd() {
    check("unit mutex crowd", bounds::unit_crowd());
}

#[test]
fn fenced_mutex() {
    check("unit fenced mutex", bounds::unit(Kind::FencedMutex));
}

#[test]
fn semaphore() {
    check("unit semaphore", bounds::unit(Kind::Semaphore));
}

#[test]
fn rwlock() {
    check("unit rwlock", bounds::unit(Kind::RwLock));
}

#[test]
fn election() {
    check("unit election", bounds::unit(Kind::Election));
}

#[test]
fn retry_semaphore() {
    check("unit retry semaphore", bounds::unit_retry(Kind::Semaphore));
}

#[test]
fn retry_rwlock() {
    check("unit retry rwlock", bounds::unit_retry(Kind::RwLock));
}

#[test]
fn paused_election() {
    check("unit paused election", bounds::unit_paused(Kind::Election));
}

#[test]
fn restart_mutex() {
    check("unit restart mutex", bounds::unit_restart(Kind::Mutex));
}

#[test]
fn restart_semaphore() {
    check(
        "unit restart semaphore",
        bounds::unit_restart(Kind::Semaphore),
    );
}

#[test]
fn restart_rwlock() {
    check("unit restart rwlock", bounds::unit_restart(Kind::RwLock));
}

#[test]
fn restart_election() {
    check(
        "unit restart election",
        bounds::unit_restart(Kind::Election),
    );
}

#[test]
fn guarded_mutex() {
    check("unit guarded mutex", bounds::unit_guarded(Kind::Mutex));
}

#[test]
fn guarded_fenced_mutex() {
    check(
        "unit guarded fenced mutex",
        bounds::unit_guarded(Kind::FencedMutex),
    );
}

#[test]
fn guarded_semaphore() {
    check(
        "unit guarded semaphore",
        bounds::unit_guarded(Kind::Semaphore),
    );
}

#[test]
fn guarded_rwlock() {
    check("unit guarded rwlock", bounds::unit_guarded(Kind::RwLock));
}

/// Issue #48: the native release (`DELIFEQ`) with its fallback to release.lua.
#[test]
fn native_mutex() {
    check("unit native mutex", bounds::unit_native());
}

#[test]
fn ask_mutex() {
    check("unit ask mutex", bounds::unit_ask(Kind::Mutex));
}

#[test]
fn ask_semaphore() {
    check("unit ask semaphore", bounds::unit_ask(Kind::Semaphore));
}

#[test]
fn ask_rwlock() {
    check("unit ask rwlock", bounds::unit_ask(Kind::RwLock));
}

#[test]
fn ask_restart_mutex() {
    check(
        "unit ask restart mutex",
        bounds::unit_ask_restart(Kind::Mutex),
    );
}

/// The model's assumption, shown: data rolled back under an open connection (README, "What
/// dlock does not promise"; fence_epoch.rs) lets the fenced fast path trust a plain INCR of a
/// counter that went back, and a fence repeats. The checker must report it.
#[test]
fn a_rollback_under_an_open_connection_repeats_a_fence() {
    let mut model = bounds::unit(Kind::FencedMutex);
    model.env.restarts = 0;
    model.env.rollbacks = 1;
    let checker = model
        .checker()
        .threads(2)
        .finish_when(HasDiscoveries::AnyOf(BTreeSet::from(["fences increase"])))
        .spawn_bfs()
        .join();
    let path = checker.discovery("fences increase");
    assert!(
        path.is_some(),
        "the rollback's repeated fence was not reported"
    );
    if let Some(path) = path {
        eprintln!("rollback under an open connection:\n{}", model::trace(path));
    }
}
