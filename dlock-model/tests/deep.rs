//! The model checker at deeper bounds (`make model`; ignored by `cargo test`): the same
//! properties and reachability checks as the unit run (tests/check.rs), with more clients,
//! requests and environment actions (`model::bounds`'s `deep*`). Prints the states explored and
//! the time per model; each fails when its unique states differ from the number
//! dlock-model/README.md documents for it (times are the machine's, not documented).

// A test helper fails by panicking, and prints the counts on purpose.
#![allow(clippy::panic, clippy::print_stderr)]

use std::time::Instant;

use dlock_model::counts;
use dlock_model::model::{self, Kind, LockModel, bounds};
use stateright::{Checker, Model};

/// Checks `model`, documented in the README as `id`: every property, every reachability check
/// its faults call for (`model::verdict`), and its unique states (`dlock_model::counts`).
fn deep(id: &str, model: LockModel) {
    let started = Instant::now();
    let checker = model.checker().threads(2).spawn_bfs().join();
    let unique = checker.unique_state_count();
    eprintln!(
        "deep `{id}`: {unique} unique states ({} in all), depth {}, {:.1?}",
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
#[ignore = "deeper bounds: make model"]
fn deep_mutex() {
    deep("deep mutex", bounds::deep(Kind::Mutex));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_fenced_mutex() {
    deep("deep fenced mutex", bounds::deep(Kind::FencedMutex));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_semaphore() {
    deep("deep semaphore", bounds::deep(Kind::Semaphore));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_rwlock() {
    deep("deep rwlock", bounds::deep(Kind::RwLock));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_election() {
    deep("deep election", bounds::deep(Kind::Election));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_retry_semaphore() {
    deep("deep retry semaphore", bounds::deep_retry(Kind::Semaphore));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_retry_rwlock() {
    deep("deep retry rwlock", bounds::deep_retry(Kind::RwLock));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_restart_mutex() {
    deep("deep restart mutex", bounds::deep_restart(Kind::Mutex));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_restart_semaphore() {
    deep(
        "deep restart semaphore",
        bounds::deep_restart(Kind::Semaphore),
    );
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_restart_rwlock() {
    deep("deep restart rwlock", bounds::deep_restart(Kind::RwLock));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_restart_election() {
    deep(
        "deep restart election",
        bounds::deep_restart(Kind::Election),
    );
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_guarded_mutex() {
    deep("deep guarded mutex", bounds::deep_guarded(Kind::Mutex));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_guarded_fenced_mutex() {
    deep(
        "deep guarded fenced mutex",
        bounds::deep_guarded(Kind::FencedMutex),
    );
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_guarded_semaphore() {
    deep(
        "deep guarded semaphore",
        bounds::deep_guarded(Kind::Semaphore),
    );
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_guarded_rwlock() {
    deep("deep guarded rwlock", bounds::deep_guarded(Kind::RwLock));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_ask_mutex() {
    deep("deep ask mutex", bounds::deep_ask(Kind::Mutex));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_ask_semaphore() {
    deep("deep ask semaphore", bounds::deep_ask(Kind::Semaphore));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_ask_rwlock() {
    deep("deep ask rwlock", bounds::deep_ask(Kind::RwLock));
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_ask_restart_semaphore() {
    deep(
        "deep ask restart semaphore",
        bounds::unit_ask_restart(Kind::Semaphore),
    );
}

#[test]
#[ignore = "deeper bounds: make model"]
fn deep_ask_restart_rwlock() {
    deep(
        "deep ask restart rwlock",
        bounds::unit_ask_restart(Kind::RwLock),
    );
}

/// The scheduler's attempt protocol with two kills and two pauses.
#[test]
#[ignore = "deeper bounds: make model"]
fn deep_attempts() {
    deep_attempts_from(
        dlock_model::attempts::AttemptModel::new(None),
        "deep attempts",
    );
}

/// The same for a one-off job (it starts pending, `once.lua`).
#[test]
#[ignore = "deeper bounds: make model"]
fn deep_one_off_attempts() {
    deep_attempts_from(
        dlock_model::attempts::AttemptModel::one_off(None),
        "deep one-off attempts",
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
        "`{what}`: {} unique states ({} in all), depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
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
    if let Err(why) = counts::compare(what, checker.unique_state_count()) {
        panic!("{why}");
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
        "deep `deep rate`: {} unique states ({} in all), depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    if let Err(why) = rate_model::verdict(&checker) {
        panic!("rate: {why}");
    }
    if let Err(why) = counts::compare("deep rate", checker.unique_state_count()) {
        panic!("{why}");
    }
}

/// The scheduler's claim path with every fault and operator step at once (`sched/model.rs`).
#[test]
#[ignore = "deeper bounds: make model"]
fn deep_scheduler_claims() {
    use dlock_model::sched::model::SchedModel;
    use dlock_model::sched::props::verdict;
    let model = SchedModel::deep();
    let started = Instant::now();
    let checker = model.clone().checker().threads(2).spawn_bfs().join();
    eprintln!(
        "`deep scheduler claims`: {} unique states ({} in all), depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    if let Err(why) = verdict(&model, &checker) {
        panic!("deep scheduler claims: {why}");
    }
    if let Err(why) = counts::compare("deep scheduler claims", checker.unique_state_count()) {
        panic!("{why}");
    }
}
