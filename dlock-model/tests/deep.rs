//! The model checker at deeper bounds (`make model`; ignored by `cargo test`): the same
//! properties as the unit run (tests/check.rs), more clients, requests and environment
//! actions. Prints the states explored and the time per kind; dlock-model/README.md records
//! them.

// A test helper fails by panicking, and prints the counts on purpose.
#![allow(clippy::panic, clippy::print_stderr)]

use std::time::Instant;

use dlock_model::model::{self, Kind, LockModel, bounds};
use dlock_model::{ASK_TOLD, ASK_YIELDED, EXCLUSIVE_AS_SEEN, GUARDED_REFUSED, KEPT_REFUSED};
use stateright::{Checker, Model};

fn deep(kind: Kind) {
    deep_model(bounds::deep(kind), "");
}

fn deep_model(model: LockModel, what: &str) {
    let kind = model.kind;
    // `exclusive as seen` is about exclusive holds: a shared kind's is vacuous.
    let pauses = model.env.pauses > 0 && !kind.shared();
    // Guarded writes by holders that a pause or a restart can make stale: some must be
    // refused, or `guarded write by the holder` holds vacuously.
    let stale_writes = model.clients.iter().flatten().any(|r| r.guard)
        && (model.env.pauses > 0 || model.env.restarts > 0);
    // Release requests to holders that renew: some renewal must answer "asked", and a holder
    // that yields must give the lock back, or the request's properties hold vacuously.
    let asked = model.env.asks > 0 && model.clients.iter().flatten().any(|r| r.watchdog);
    let yields = asked && model.clients.iter().flatten().any(|r| r.yields);
    // A mutex with three requests or more: some newcomer must meet a key kept for a waiter.
    let kept = kind == Kind::Mutex && model.clients.iter().flatten().count() >= 3;
    let names: Vec<&'static str> = model.properties().iter().map(|p| p.name).collect();
    let started = Instant::now();
    let checker = model.checker().threads(2).spawn_bfs().join();
    eprintln!(
        "deep {what}{kind:?}: {} states ({} unique), depth {}, {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    for name in names {
        if name == EXCLUSIVE_AS_SEEN && pauses {
            assert!(checker.discovery(name).is_some(), "{kind:?}: vacuous");
            continue;
        }
        if name == GUARDED_REFUSED {
            assert!(
                !stale_writes || checker.discovery(name).is_some(),
                "{kind:?}: no stale guarded write refused: vacuous"
            );
            continue;
        }
        if name == KEPT_REFUSED {
            assert!(
                !kept || checker.discovery(name).is_some(),
                "{kind:?}: no newcomer met a kept key: the kept key's properties are vacuous"
            );
            continue;
        }
        if name == ASK_TOLD || name == ASK_YIELDED {
            let wanted = if name == ASK_TOLD { asked } else { yields };
            assert!(
                !wanted || checker.discovery(name).is_some(),
                "{kind:?}: `{name}` not reached: vacuous"
            );
            continue;
        }
        if let Some(path) = checker.discovery(name) {
            panic!(
                "{kind:?}: property `{name}` broken:\n{}",
                model::trace(path)
            );
        }
    }
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_mutex() {
    deep(Kind::Mutex);
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_fenced_mutex() {
    deep(Kind::FencedMutex);
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_semaphore() {
    deep(Kind::Semaphore);
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_rwlock() {
    deep(Kind::RwLock);
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_election() {
    deep(Kind::Election);
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_guarded_mutex() {
    deep_model(bounds::deep_guarded(Kind::Mutex), "guarded ");
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_guarded_fenced_mutex() {
    deep_model(bounds::deep_guarded(Kind::FencedMutex), "guarded ");
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_guarded_semaphore() {
    deep_model(bounds::deep_guarded(Kind::Semaphore), "guarded ");
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_guarded_rwlock() {
    deep_model(bounds::deep_guarded(Kind::RwLock), "guarded ");
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_ask_mutex() {
    deep_model(bounds::deep_ask(Kind::Mutex), "ask ");
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_ask_semaphore() {
    deep_model(bounds::deep_ask(Kind::Semaphore), "ask ");
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_ask_rwlock() {
    deep_model(bounds::deep_ask(Kind::RwLock), "ask ");
}

/// The scheduler's attempt protocol with two kills and two pauses.
#[test]
#[ignore = "deeper bounds: make model"]
fn deep_attempts() {
    deep_attempts_from(dlock_model::attempts::AttemptModel::new(None), "attempts");
}

/// The same for a one-off job (it starts pending, `once.lua`).
#[test]
#[ignore = "deeper bounds: make model"]
fn deep_one_off_attempts() {
    deep_attempts_from(
        dlock_model::attempts::AttemptModel::one_off(None),
        "one-off attempts",
    );
}

fn deep_attempts_from(start: dlock_model::attempts::AttemptModel, what: &str) {
    use dlock_model::attempts::{AttemptModel, settle_bound};
    let model = AttemptModel {
        kills: 2,
        pauses: 2,
        until: 3 * settle_bound() + start.until - 2 * settle_bound(),
        ..start
    };
    let names = model.must_hold();
    let started = Instant::now();
    let checker = model.checker().threads(2).spawn_bfs().join();
    eprintln!(
        "deep {what}: {} states ({} unique), depth {}, {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    for name in names {
        if let Some(path) = checker.discovery(name) {
            panic!(
                "{what}: property `{name}` broken: {:#?}",
                path.into_actions()
            );
        }
    }
}

/// The rate limiter at `deep_rate`: two clients, burst 3, six calls, nine ticks, one restart.
#[test]
#[ignore = "deeper bounds: make model"]
fn deep_rate() {
    use dlock_model::rate_model::{self, bounds};
    let model = bounds::deep_rate();
    let started = Instant::now();
    let checker = model.checker().threads(2).spawn_bfs().join();
    eprintln!(
        "deep rate: {} states ({} unique), depth {}, {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    if let Err(why) = rate_model::verdict(&checker) {
        panic!("rate: {why}");
    }
}
