//! The mutation check of the model's properties (`make model-mutants`; ignored by `cargo test`):
//! each [`Mutant`] applies one protocol bug to the model's steps, and the property named for it
//! must find a counterexample — while the same model without the mutant has none. The rate
//! limiter's, the attempt protocol's, the run-time schedules' and the quorum fence's mutants are checked the same
//! way by their own models. Prints the shortest counterexample of each (`--nocapture`), then
//! `model mutants: caught N of M`, and fails below M.

// A test helper fails by panicking, and prints the traces on purpose.
#![allow(clippy::panic, clippy::print_stderr)]

use std::collections::BTreeSet;

use dlock_model::attempts::AttemptMutant;
use dlock_model::conns::ConnMutant;
use dlock_model::model::{self, Kind, LockModel, Req, bounds};
use dlock_model::quorum::QuorumMutant;
use dlock_model::rate::RateMutant;
use dlock_model::rate_model::{self, RateModel, bounds as rate_bounds};
use dlock_model::sched::once_model::OnceMutant;
use dlock_model::sched::props::SchedMutant;
use dlock_model::schedules::ScheduleMutant;
use dlock_model::{
    FENCE_LIVE_ONCE, HAND_OFF_OLDEST, LEADER_BY_HOLDER, Mutant, OBSERVERS_NO_BACK, ONE_ENTRY,
    OWNER_ONLY, READ_LIVE_LEADER, SET_LIMIT_AT_ONCE, UPGRADE_AT_ONCE,
};
use stateright::{Checker, HasDiscoveries, Model};

/// One case of the check: `mutant` applied to the model `base` breaks `property`.
struct Case {
    mutant: Mutant,
    base: &'static str,
    property: &'static str,
}

const fn case(mutant: Mutant, base: &'static str, property: &'static str) -> Case {
    Case {
        mutant,
        base,
        property,
    }
}

/// Every case; a mutant is caught when each of its cases is.
const CASES: &[Case] = &[
    case(
        Mutant::NewcomerTakesExpired,
        "a mutex of two clients, one with two requests",
        "queue head first",
    ),
    // Issue #35: the enqueue that forgets to keep the lock key lets a newcomer's plain `SET
    // NX` take the lock ahead of a running waiter once the holder's lease is over.
    case(
        Mutant::EnqueueForgetsKeep,
        "a mutex of three clients",
        "queue head first",
    ),
    case(
        Mutant::NoReadmitOnLeave,
        "unit semaphore",
        "leaving re-admits",
    ),
    case(Mutant::GrantAboveLimit, "unit semaphore", "within limit"),
    case(
        Mutant::FenceNotFloored,
        "unit fenced mutex",
        "fences increase",
    ),
    case(
        Mutant::StaleHandoffTrusted,
        "unit mutex crowd",
        "no given-away grant",
    ),
    case(Mutant::ReaderPastWriter, "unit rwlock", "queue head first"),
    case(
        Mutant::LimitDroppedWithWaiters,
        "unit semaphore",
        "limit persists",
    ),
    case(
        Mutant::DeadHeadBlocks,
        "unit semaphore",
        "dead head dropped",
    ),
    case(
        Mutant::ElectionOverwritesForeign,
        "unit election",
        "no foreign write",
    ),
    // A semaphore holder paused past its lease resumes while the other holder's later
    // deadline keeps `K:exp` (and its record) alive, and writes.
    case(
        Mutant::GuardedIgnoresDeadline,
        "unit guarded semaphore",
        "guarded write by the holder",
    ),
    // A mutex holder paused past its lease writes although another holds the lock now; once
    // the new holder wrote first, the data's fences go back.
    case(
        Mutant::GuardedSkipsOwner,
        "unit guarded mutex",
        "guarded write by the holder",
    ),
    case(
        Mutant::GuardedSkipsOwner,
        "unit guarded mutex",
        "guarded fences never decrease",
    ),
    // A request that cuts the holder's lease: the step itself changes a hold; the holder that
    // ignores it believes it holds to the end of its lease, and the server's ends sooner.
    case(
        Mutant::AskShortensLease,
        "unit ask mutex",
        "a release request changes no hold",
    ),
    case(
        Mutant::AskShortensLease,
        "unit ask mutex",
        "an asked holder keeps its lease",
    ),
    // The next holder was recorded with its predecessor: once the lock is handed to it (a
    // mutex's next holder, a semaphore's request admitted in a freed place), it is told.
    case(
        Mutant::AskRecordsNextWaiter,
        "unit ask mutex",
        "only an asked holder is told",
    ),
    case(
        Mutant::AskRecordsNextWaiter,
        "unit ask semaphore",
        "only an asked holder is told",
    ),
    // A newcomer renews while another holder's request keeps the ask key alive.
    case(
        Mutant::ExtendAnswersAnyToken,
        "unit ask semaphore",
        "only an asked holder is told",
    ),
    case(
        Mutant::ExtendAnswersAnyToken,
        "unit ask rwlock",
        "only an asked holder is told",
    ),
    case(
        Mutant::AskExpiresEarly,
        "unit ask mutex",
        "an asked holder is told at its next renewal",
    ),
    case(
        Mutant::ExtendSkipsAskedRenewal,
        "unit ask mutex",
        "an asked holder keeps its lease",
    ),
    case(
        Mutant::ExtendSkipsAskedRenewal,
        "unit ask semaphore",
        "an asked holder keeps its lease",
    ),
    // Issue #44: a candidate paused after its lock was taken over publishes its record.
    case(
        Mutant::ElectionPublishSkipsLead,
        "unit paused election",
        LEADER_BY_HOLDER,
    ),
    // Issue #44: the leader whose lease ended, its key kept for a crashed candidate's entry,
    // still shown to an observer (the model's bug found by conformance seed 99).
    case(
        Mutant::ReadIgnoresDeadline,
        "unit election",
        READ_LIVE_LEADER,
    ),
    // Issue #44: after a failover to the lagging copy, the observer takes the older leader.
    case(
        Mutant::ObserverTakesEveryRead,
        "unit restart election",
        OBSERVERS_NO_BACK,
    ),
    // Issue #44: the sole reader upgrades ahead of a queued writer.
    case(Mutant::UpgradePastQueue, "unit rwlock", UPGRADE_AT_ONCE),
    // Issue #44: the lock passes over the oldest live waiter to the next one.
    case(
        Mutant::HandOffSkipsOldest,
        "unit mutex crowd",
        HAND_OFF_OLDEST,
    ),
    // Issue #44: a watchdog whose lease ran out renews its successor's.
    case(Mutant::ExtendSkipsOwner, "unit mutex crowd", OWNER_ONLY),
    // Issue #44: a holder paused past its lease, its key kept for the waiter, gets a fence; a
    // fence request sent again after a lost reply gets another fence.
    case(
        Mutant::FenceIgnoresDeadline,
        "unit guarded mutex",
        FENCE_LIVE_ONCE,
    ),
    case(Mutant::FenceReissued, "unit guarded mutex", FENCE_LIVE_ONCE),
    // Issue #44: a join sent again after a lost reply queues the request twice.
    case(Mutant::JoinScansNothing, "unit mutex", ONE_ENTRY),
    // Issue #44: a queue without an expiry keeps a dead waiter's entry after the key kept for
    // it is gone.
    case(
        Mutant::QueueNeverExpires,
        "a mutex whose waiter may crash",
        "a mutex queue never outlives its kept key",
    ),
    // Issue #48: a native release that compares the token only deletes a key a waiter
    // flagged, and nobody hands the lock on; a client that takes its 0 as "released" leaves
    // the flagged hold alive.
    case(
        Mutant::NativeTokenOnly,
        "unit native mutex",
        "dead holder handed on",
    ),
    case(
        Mutant::NativeZeroReleased,
        "unit native mutex",
        dlock_model::NATIVE_LEAVES_NOTHING,
    ),
    // Issue #44: a lowered limit leaves the heavier request queued.
    case(
        Mutant::SetLimitKeepsHeavy,
        "unit semaphore",
        SET_LIMIT_AT_ONCE,
    ),
];

/// The model a case names.
fn base(name: &str) -> Option<LockModel> {
    Some(match name {
        "a mutex of two clients, one with two requests" => model::model(
            Kind::Mutex,
            1,
            vec![vec![Req::of(1), Req::of(1)], vec![Req::of(1)]],
            4,
        ),
        "a mutex of three clients" => model::model(
            Kind::Mutex,
            1,
            vec![vec![Req::of(1)], vec![Req::of(1)], vec![Req::of(1)]],
            4,
        ),
        "a mutex whose waiter may crash" => {
            let mut m = model::model(Kind::Mutex, 1, vec![vec![Req::of(1)], vec![Req::of(1)]], 6);
            m.env.crashes = 1;
            m
        }
        "unit mutex" => bounds::unit(Kind::Mutex),
        "unit mutex crowd" => bounds::unit_crowd(),
        "unit fenced mutex" => bounds::unit(Kind::FencedMutex),
        "unit semaphore" => bounds::unit(Kind::Semaphore),
        "unit rwlock" => bounds::unit(Kind::RwLock),
        "unit election" => bounds::unit(Kind::Election),
        "unit paused election" => bounds::unit_paused(Kind::Election),
        "unit restart election" => bounds::unit_restart(Kind::Election),
        "unit guarded mutex" => bounds::unit_guarded(Kind::Mutex),
        "unit guarded semaphore" => bounds::unit_guarded(Kind::Semaphore),
        "unit ask mutex" => bounds::unit_ask(Kind::Mutex),
        "unit native mutex" => bounds::unit_native(),
        "unit ask semaphore" => bounds::unit_ask(Kind::Semaphore),
        "unit ask rwlock" => bounds::unit_ask(Kind::RwLock),
        _ => return None,
    })
}

/// The model without a mutant breaks none of the properties its cases name.
fn clean(name: &str) -> Result<(), String> {
    let model = base(name).ok_or_else(|| format!("no base model `{name}`"))?;
    let properties: Vec<&str> = model.properties().iter().map(|p| p.name).collect();
    let named: BTreeSet<&str> = CASES
        .iter()
        .filter(|c| c.base == name)
        .map(|c| c.property)
        .collect();
    if let Some(missing) = named.iter().find(|p| !properties.contains(p)) {
        return Err(format!("no property named `{missing}`"));
    }
    let checker = model.checker().threads(2).spawn_bfs().join();
    for property in named {
        if let Some(path) = checker.discovery(property) {
            return Err(format!(
                "`{property}` is broken on `{name}` without a mutant:\n{}",
                model::trace(path)
            ));
        }
    }
    Ok(())
}

/// One case: the mutant applied, its property must be broken.
fn caught(case: &Case) -> Result<(), String> {
    let Some(base) = base(case.base) else {
        return Err(format!("no base model `{}`", case.base));
    };
    let mutated = LockModel {
        mutant: Some(case.mutant),
        ..base
    };
    let checker = mutated
        .checker()
        .threads(2)
        .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([case.property])))
        .spawn_bfs()
        .join();
    match checker.discovery(case.property) {
        Some(path) => {
            eprintln!(
                "{:?} caught by `{}` on `{}` ({} states):\n{}",
                case.mutant,
                case.property,
                case.base,
                checker.state_count(),
                model::trace(path)
            );
            Ok(())
        }
        None => Err(format!(
            "{:?} not caught by `{}` on `{}` ({} states explored)",
            case.mutant,
            case.property,
            case.base,
            checker.state_count()
        )),
    }
}

/// The property of `rate_model` that catches a rate limiter's mutant (rate.rs names it).
fn rate_property(mutant: RateMutant) -> &'static str {
    match mutant {
        RateMutant::StaleTatKept | RateMutant::ToleranceWholeBurst | RateMutant::ExpiresEarly => {
            rate_model::WINDOW
        }
        RateMutant::RefundBelowNow => rate_model::REFUND_FLOOR,
        RateMutant::ReserveIgnoresMaxWait => rate_model::RESERVE_WAIT,
        RateMutant::RefusedTryStores => rate_model::REFUSED_TRY,
        RateMutant::ConformsOneCellLate => rate_model::REFILLED,
    }
}

/// The rate limiter's mutant on `unit_rate` (the clean model's verdict is checked once).
fn rate_caught(mutant: RateMutant) -> Result<(), String> {
    let property = rate_property(mutant);
    let mutated = RateModel {
        mutant: Some(mutant),
        ..rate_bounds::unit_rate()
    };
    let checker = mutated
        .checker()
        .threads(2)
        .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([property])))
        .spawn_bfs()
        .join();
    match checker.discovery(property) {
        Some(path) => {
            eprintln!(
                "{mutant:?} caught by `{property}` ({} states):\n{}",
                checker.state_count(),
                rate_model::trace(path)
            );
            Ok(())
        }
        None => Err(format!("{mutant:?} not caught by `{property}`")),
    }
}

/// Runs every case; a mutant counts as caught when all its cases are.
fn lock_mutants(failures: &mut Vec<String>) -> usize {
    let bases: BTreeSet<&str> = CASES.iter().map(|c| c.base).collect();
    let mut broken_bases = BTreeSet::new();
    for name in bases {
        if let Err(why) = clean(name) {
            broken_bases.insert(name);
            failures.push(why);
        }
    }
    let mut missed = BTreeSet::new();
    for case in CASES {
        let result = if broken_bases.contains(case.base) {
            Err(format!("{:?}: its base model fails clean", case.mutant))
        } else {
            caught(case)
        };
        if let Err(why) = result {
            missed.insert(case.mutant);
            failures.push(why);
        }
    }
    Mutant::ALL.iter().filter(|m| !missed.contains(m)).count()
}

/// The mutation check, with its score.
#[test]
#[ignore = "the mutation check: make model-mutants"]
fn model_mutants() {
    let mut failures = Vec::new();
    let mut caught = lock_mutants(&mut failures);
    match rate_model::verdict(
        &rate_bounds::unit_rate()
            .checker()
            .threads(2)
            .spawn_bfs()
            .join(),
    ) {
        Ok(()) => {
            for mutant in RateMutant::ALL {
                match rate_caught(mutant) {
                    Ok(()) => caught += 1,
                    Err(why) => failures.push(why),
                }
            }
        }
        Err(why) => failures.push(format!("the rate limiter's model fails clean: {why}")),
    }
    for result in AttemptMutant::ALL.map(AttemptMutant::caught) {
        match result {
            Ok(()) => caught += 1,
            Err(why) => failures.push(why),
        }
    }
    for result in ScheduleMutant::ALL.map(ScheduleMutant::caught) {
        match result {
            Ok(()) => caught += 1,
            Err(why) => failures.push(why),
        }
    }
    for result in SchedMutant::ALL.map(SchedMutant::caught) {
        match result {
            Ok(()) => caught += 1,
            Err(why) => failures.push(why),
        }
    }
    for result in OnceMutant::ALL.map(OnceMutant::caught) {
        match result {
            Ok(()) => caught += 1,
            Err(why) => failures.push(why),
        }
    }
    for result in QuorumMutant::ALL.map(QuorumMutant::caught) {
        match result {
            Ok(()) => caught += 1,
            Err(why) => failures.push(why),
        }
    }
    for result in ConnMutant::ALL.map(ConnMutant::caught) {
        match result {
            Ok(()) => caught += 1,
            Err(why) => failures.push(why),
        }
    }
    let total = Mutant::ALL.len()
        + RateMutant::ALL.len()
        + AttemptMutant::ALL.len()
        + ScheduleMutant::ALL.len()
        + SchedMutant::ALL.len()
        + OnceMutant::ALL.len()
        + QuorumMutant::ALL.len()
        + ConnMutant::ALL.len();
    for why in &failures {
        eprintln!("FAILED: {why}");
    }
    eprintln!("model mutants: caught {caught} of {total}");
    assert!(
        caught == total && failures.is_empty(),
        "model mutants: caught {caught} of {total}"
    );
}

/// Every mutant has a case, and every case's base model exists (the cases themselves run in
/// `make model-mutants`).
#[test]
fn every_mutant_is_checked() {
    for mutant in Mutant::ALL {
        assert!(
            CASES.iter().any(|c| c.mutant == mutant),
            "{mutant:?} has no case"
        );
    }
    for case in CASES {
        let model = base(case.base);
        assert!(model.is_some(), "no base model `{}`", case.base);
        let named = model.is_some_and(|m| m.properties().iter().any(|p| p.name == case.property));
        assert!(named, "no property named `{}`", case.property);
    }
}
