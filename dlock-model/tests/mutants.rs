//! The mutation check of the model's properties (`make model-mutants`; ignored by `cargo test`):
//! each [`Mutant`] applies one protocol bug to the model's steps, and the property named for it
//! must find a counterexample — while the same model without the mutant has none. The shortest
//! counterexample is printed (`--nocapture`).

// A test helper fails by panicking, and prints the traces on purpose.
#![allow(clippy::panic, clippy::print_stderr)]

use std::collections::BTreeSet;

use dlock_model::Mutant;
use dlock_model::model::{self, Kind, LockModel, Req, bounds};
use dlock_model::rate::RateMutant;
use dlock_model::rate_model::{self, RateModel, bounds as rate_bounds};
use stateright::{Checker, HasDiscoveries, Model};

/// Checks `base` without and with `mutant` for `property`.
fn caught(base: LockModel, mutant: Mutant, property: &'static str) {
    assert!(
        base.properties().iter().any(|p| p.name == property),
        "no property named `{property}`"
    );
    let clean = base.clone().checker().threads(2).spawn_bfs().join();
    if let Some(path) = clean.discovery(property) {
        panic!(
            "`{property}` is broken without the mutant:\n{}",
            model::trace(path)
        );
    }
    let mutated = LockModel {
        mutant: Some(mutant),
        ..base
    };
    let checker = mutated
        .checker()
        .threads(2)
        .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([property])))
        .spawn_bfs()
        .join();
    match checker.discovery(property) {
        Some(path) => eprintln!(
            "{mutant:?} caught by `{property}` ({} states):\n{}",
            checker.state_count(),
            model::trace(path)
        ),
        None => panic!(
            "{mutant:?} not caught by `{property}` ({} states explored)",
            checker.state_count()
        ),
    }
}

/// Issue #44: a mutex queue without an expiry keeps the entry of a waiter that died after the
/// key kept for it is gone.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_queue_that_never_expires() {
    let mut base = model::model(Kind::Mutex, 1, vec![vec![Req::of(1)], vec![Req::of(1)]], 6);
    base.env.crashes = 1;
    caught(
        base,
        Mutant::QueueNeverExpires,
        "a mutex queue never outlives its kept key",
    );
}

#[test]
#[ignore = "the mutation check: make model-mutants"]
fn newcomer_takes_expired_lock_ahead_of_waiters() {
    let base = model::model(
        Kind::Mutex,
        1,
        vec![vec![Req::of(1), Req::of(1)], vec![Req::of(1)]],
        4,
    );
    caught(base, Mutant::NewcomerTakesExpired, "queue head first");
}

/// Issue #35: the enqueue that forgets to keep the lock key lets a newcomer's plain `SET NX`
/// take the lock ahead of a running waiter once the holder's lease is over.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn an_enqueue_that_forgets_to_keep_the_lock_key() {
    let base = model::model(
        Kind::Mutex,
        1,
        vec![vec![Req::of(1)], vec![Req::of(1)], vec![Req::of(1)]],
        4,
    );
    caught(base, Mutant::EnqueueForgetsKeep, "queue head first");
}

#[test]
#[ignore = "the mutation check: make model-mutants"]
fn no_readmission_after_a_timed_out_request() {
    caught(
        bounds::unit(Kind::Semaphore),
        Mutant::NoReadmitOnLeave,
        "leaving re-admits",
    );
}

#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_grant_above_the_limit() {
    caught(
        bounds::unit(Kind::Semaphore),
        Mutant::GrantAboveLimit,
        "within limit",
    );
}

#[test]
#[ignore = "the mutation check: make model-mutants"]
fn the_fence_not_floored_after_a_restart() {
    caught(
        bounds::unit(Kind::FencedMutex),
        Mutant::FenceNotFloored,
        "fences increase",
    );
}

#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_stale_hand_off_trusted_by_the_client() {
    caught(
        bounds::unit_crowd(),
        Mutant::StaleHandoffTrusted,
        "no given-away grant",
    );
}

#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_reader_admitted_past_a_queued_writer() {
    caught(
        bounds::unit(Kind::RwLock),
        Mutant::ReaderPastWriter,
        "queue head first",
    );
}

#[test]
#[ignore = "the mutation check: make model-mutants"]
fn the_limit_dropped_when_the_last_holder_leaves_with_requests_queued() {
    caught(
        bounds::unit(Kind::Semaphore),
        Mutant::LimitDroppedWithWaiters,
        "limit persists",
    );
}

#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_dead_head_blocks_the_queue() {
    caught(
        bounds::unit(Kind::Semaphore),
        Mutant::DeadHeadBlocks,
        "dead head dropped",
    );
}

#[test]
#[ignore = "the mutation check: make model-mutants"]
fn an_election_overwrites_foreign_data_at_its_record_key() {
    caught(
        bounds::unit(Kind::Election),
        Mutant::ElectionOverwritesForeign,
        "no foreign write",
    );
}

/// A semaphore holder paused past its lease resumes while the other holder's later deadline
/// keeps `K:exp` (and its record) alive, and writes.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_guarded_write_that_ignores_a_shared_holders_deadline() {
    caught(
        bounds::unit_guarded(Kind::Semaphore),
        Mutant::GuardedIgnoresDeadline,
        "guarded write by the holder",
    );
}

/// A mutex holder paused past its lease writes although another holds the lock now.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_guarded_write_that_skips_the_mutex_owner_check() {
    caught(
        bounds::unit_guarded(Kind::Mutex),
        Mutant::GuardedSkipsOwner,
        "guarded write by the holder",
    );
}

/// The same, after the new holder wrote: the data's fences go back.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_guarded_write_that_skips_the_owner_check_sends_the_fences_back() {
    caught(
        bounds::unit_guarded(Kind::Mutex),
        Mutant::GuardedSkipsOwner,
        "guarded fences never decrease",
    );
}

/// A request that cuts the holder's lease: the step itself changes a hold.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_release_request_that_shortens_the_lease() {
    caught(
        bounds::unit_ask(Kind::Mutex),
        Mutant::AskShortensLease,
        "a release request changes no hold",
    );
}

/// The same, seen by the holder: it ignores the request, believes it holds to the end of the
/// lease it was granted, and the server's ends sooner.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_release_request_that_shortens_the_lease_takes_the_lock_from_its_holder() {
    caught(
        bounds::unit_ask(Kind::Mutex),
        Mutant::AskShortensLease,
        "an asked holder keeps its lease",
    );
}

/// The mutex's next holder was recorded with its predecessor: once the lock is handed to it,
/// its renewal is told.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_release_request_that_records_the_next_waiter() {
    caught(
        bounds::unit_ask(Kind::Mutex),
        Mutant::AskRecordsNextWaiter,
        "only an asked holder is told",
    );
}

/// The same on a semaphore: the request admitted in the place of a holder that gave back.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_release_request_that_records_the_next_waiter_of_a_semaphore() {
    caught(
        bounds::unit_ask(Kind::Semaphore),
        Mutant::AskRecordsNextWaiter,
        "only an asked holder is told",
    );
}

/// A semaphore's newcomer renews while the other holder's request keeps the ask key alive.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_renewal_told_whenever_the_ask_key_lives() {
    caught(
        bounds::unit_ask(Kind::Semaphore),
        Mutant::ExtendAnswersAnyToken,
        "only an asked holder is told",
    );
}

/// The same on a RwLock: its next holder (a writer after the asked reader, a reader after a
/// downgrade) is told.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_renewal_told_whenever_the_ask_key_lives_on_a_rwlock() {
    caught(
        bounds::unit_ask(Kind::RwLock),
        Mutant::ExtendAnswersAnyToken,
        "only an asked holder is told",
    );
}

/// The ask key gone before the holder's next renewal on time.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_release_request_that_expires_before_the_next_renewal() {
    caught(
        bounds::unit_ask(Kind::Mutex),
        Mutant::AskExpiresEarly,
        "an asked holder is told at its next renewal",
    );
}

/// An asked holder's renewal answered without renewing.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_renewal_of_an_asked_holder_that_does_not_renew() {
    caught(
        bounds::unit_ask(Kind::Mutex),
        Mutant::ExtendSkipsAskedRenewal,
        "an asked holder keeps its lease",
    );
}

/// The same for a semaphore's holder.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_renewal_of_an_asked_shared_holder_that_does_not_renew() {
    caught(
        bounds::unit_ask(Kind::Semaphore),
        Mutant::ExtendSkipsAskedRenewal,
        "an asked holder keeps its lease",
    );
}

/// Every mutant has its test above.
#[test]
fn every_mutant_is_checked() {
    assert_eq!(Mutant::ALL.len(), 18);
}

/// Checks the rate limiter's `unit_rate` without and with `mutant` for `property`.
fn rate_caught(mutant: RateMutant, property: &'static str) {
    let base = rate_bounds::unit_rate();
    assert!(
        base.properties().iter().any(|p| p.name == property),
        "no property named `{property}`"
    );
    let clean = base.clone().checker().threads(2).spawn_bfs().join();
    if let Some(path) = clean.discovery(property) {
        panic!(
            "`{property}` is broken without the mutant:\n{}",
            rate_model::trace(path)
        );
    }
    let mutated = RateModel {
        mutant: Some(mutant),
        ..base
    };
    let checker = mutated
        .checker()
        .threads(2)
        .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([property])))
        .spawn_bfs()
        .join();
    match checker.discovery(property) {
        Some(path) => eprintln!(
            "{mutant:?} caught by `{property}` ({} states):\n{}",
            checker.state_count(),
            rate_model::trace(path)
        ),
        None => panic!(
            "{mutant:?} not caught by `{property}` ({} states explored)",
            checker.state_count()
        ),
    }
}

/// A TAT left in the past, in a key kept past it: more than a burst after an idle spell.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_rate_limiter_that_keeps_a_stale_tat() {
    rate_caught(RateMutant::StaleTatKept, rate_model::WINDOW);
}

/// A tolerance of a whole burst: burst + 1 cells at once.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_rate_limiter_with_one_cell_too_many() {
    rate_caught(RateMutant::ToleranceWholeBurst, rate_model::WINDOW);
}

/// A refund not floored at now.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_refund_below_now() {
    rate_caught(RateMutant::RefundBelowNow, rate_model::REFUND_FLOOR);
}

/// A reservation made whatever its wait.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_reservation_past_its_max_wait() {
    rate_caught(RateMutant::ReserveIgnoresMaxWait, rate_model::RESERVE_WAIT);
}

/// A limiter's key gone before its TAT.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_rate_key_that_expires_early() {
    rate_caught(RateMutant::ExpiresEarly, rate_model::WINDOW);
}

/// A refused try that moves the TAT.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn a_refused_try_that_stores() {
    rate_caught(RateMutant::RefusedTryStores, rate_model::REFUSED_TRY);
}

/// Cells that conform one cell late.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn cells_that_conform_one_cell_late() {
    rate_caught(RateMutant::ConformsOneCellLate, rate_model::REFILLED);
}

/// Every rate limiter mutant has its test above.
#[test]
fn every_rate_mutant_is_checked() {
    assert_eq!(RateMutant::ALL.len(), 7);
}
