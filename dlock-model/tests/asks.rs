//! The release request's steps (ask.lua, and extend.lua's answer to an asked holder), one
//! scenario per rule of its contract, driven through [`apply`] as the conformance test drives
//! them; and each model mutant of the request, shown on the step it breaks.

use std::collections::BTreeSet;

use dlock_model::{
    Entry, ExtendItem, Key, LockRef, Mode, Mutant, Op, Reply, ScriptError, Server, SharedEntry,
    abstraction, apply,
};

const LEASE: u64 = 10;
const M: LockRef = LockRef::Mutex(0);
const S: LockRef = LockRef::Shared(0);

fn entry(token: u32, client: u8) -> Entry {
    Entry {
        token,
        client,
        lease: LEASE,
    }
}

fn take(server: &mut Server, now: u64, token: u32) -> Reply {
    let entry = entry(token, 0);
    let mode = Mode::Wait;
    apply(
        server,
        now,
        Op::Acquire {
            name: 0,
            entry,
            mode,
        },
    )
}

fn take_shared(server: &mut Server, now: u64, token: u32, lease: u64) -> Reply {
    let entry = SharedEntry {
        token,
        client: 0,
        lease,
        weight: 1,
    };
    let (limit, mode) = (2, Mode::Wait);
    let op = Op::SharedAcquire {
        name: 0,
        entry,
        limit,
        mode,
    };
    apply(server, now, op)
}

fn ask(server: &mut Server, now: u64, lock: LockRef) -> Reply {
    apply(server, now, Op::Ask { lock })
}

fn extend(server: &mut Server, now: u64, lock: LockRef, token: u32) -> Reply {
    let items = vec![ExtendItem {
        lock,
        token,
        lease: LEASE,
    }];
    apply(server, now, Op::Extend { items })
}

fn release(server: &mut Server, now: u64, token: u32) -> Reply {
    let op = Op::Release {
        name: 0,
        token,
        leaving: None,
        how: dlock_model::ReleaseHow::Own,
    };
    apply(server, now, op)
}

fn asked(server: &Server, now: u64, lock: LockRef) -> Vec<u32> {
    let view = abstraction(server, now);
    view.asked
        .get(&lock)
        .map(|t| t.iter().copied().collect())
        .unwrap_or_default()
}

#[test]
fn a_mutex_holder_is_asked_and_told_and_its_successor_is_not() {
    let mut server = Server::new(None);
    assert_eq!(ask(&mut server, 0, M), Reply::Int(0), "nobody holds it");
    assert!(
        server.data.asked.is_empty(),
        "a request to nobody records nothing"
    );
    take(&mut server, 0, 1);
    let before = server.data.clone();
    assert_eq!(ask(&mut server, 2, M), Reply::Int(1));
    assert_eq!(asked(&server, 2, M), vec![1]);
    // Kept for the lock's PTTL: until its deadline (10).
    assert_eq!(server.data.asked[&M].until, 10);
    let mut unchanged = server.data.clone();
    unchanged.asked.clone_from(&before.asked);
    assert_eq!(unchanged, before, "the request changes no hold");
    assert_eq!(extend(&mut server, 3, M, 1), Reply::Extended(vec![2]));
    assert_eq!(server.data.locks[&0].deadline, 13, "renewed as ever");
    // Asked again (retry safety): the same holder, the same state but for the later expiry.
    assert_eq!(ask(&mut server, 4, M), Reply::Int(1));
    assert_eq!(server.data.asked[&M].until, 13);
    assert_eq!(release(&mut server, 5, 1), Reply::Int(1));
    // The next holder, while the request for its predecessor lives: not told.
    take(&mut server, 6, 2);
    assert_eq!(asked(&server, 6, M), vec![1]);
    assert_eq!(extend(&mut server, 7, M, 2), Reply::Extended(vec![1]));
    assert!(
        asked(&server, 13, M).is_empty(),
        "gone with the lease it found"
    );
}

#[test]
fn every_live_shared_holder_is_asked_until_the_latest_deadline() {
    let mut server = Server::new(None);
    take_shared(&mut server, 0, 1, LEASE);
    take_shared(&mut server, 0, 2, 2 * LEASE);
    assert_eq!(ask(&mut server, 1, S), Reply::Int(2));
    assert_eq!(asked(&server, 1, S), vec![1, 2]);
    assert_eq!(server.data.asked[&S].until, 2 * LEASE);
    assert_eq!(extend(&mut server, 2, S, 1), Reply::Extended(vec![2]));
    // Holder 1 gives back; 3 takes its permit while holder 2's request keeps the key alive.
    let op = Op::SharedRelease {
        name: 0,
        token: 1,
        leaving: None,
    };
    apply(&mut server, 3, op);
    take_shared(&mut server, 3, 3, LEASE);
    assert_eq!(extend(&mut server, 4, S, 3), Reply::Extended(vec![1]));
    assert_eq!(extend(&mut server, 4, S, 2), Reply::Extended(vec![2]));
    // A later request to holders with shorter leases never brings the expiry earlier.
    assert_eq!(ask(&mut server, 5, S), Reply::Int(2));
    assert_eq!(server.data.asked[&S].until, 2 * LEASE);
    assert_eq!(asked(&server, 5, S), vec![1, 2, 3]);
}

/// A shared holder past its deadline, still in `K:exp` until a script purges it, is not
/// asked (`ZRANGE … (now +inf`).
#[test]
fn a_shared_holder_past_its_deadline_is_not_asked() {
    let mut server = Server::new(None);
    take_shared(&mut server, 0, 1, LEASE);
    take_shared(&mut server, 5, 2, LEASE);
    assert_eq!(ask(&mut server, 12, S), Reply::Int(1));
    assert_eq!(asked(&server, 12, S), vec![2]);
    assert_eq!(ask(&mut server, 20, S), Reply::Int(0));
}

/// Foreign data at the lock key is refused with DLOCKFOREIGN, at `K:exp` or at the ask key
/// with a plain WRONGTYPE (the script stops before its first write); extend.lua reads an ask
/// key of another type as no request.
#[test]
fn foreign_data_is_refused_and_a_foreign_ask_key_is_no_request() {
    let mut server = Server::new(None);
    apply(&mut server, 0, Op::WriteForeign { key: Key::Lock(0) });
    let refused = ScriptError::Foreign(Key::Lock(0));
    assert_eq!(ask(&mut server, 0, M), Reply::Err(refused));

    let mut server = Server::new(None);
    take(&mut server, 0, 1);
    assert_eq!(ask(&mut server, 0, M), Reply::Int(1));
    apply(&mut server, 1, Op::WriteForeign { key: Key::Ask(M) });
    assert_eq!(extend(&mut server, 1, M, 1), Reply::Extended(vec![1]));
    let wrong = ScriptError::WrongType(Key::Ask(M));
    assert_eq!(ask(&mut server, 2, M), Reply::Err(wrong));
    assert!(server.data.asked.is_empty());

    let mut server = Server::new(None);
    take_shared(&mut server, 0, 1, LEASE);
    let exp = Key::SharedExp(0);
    apply(&mut server, 0, Op::WriteForeign { key: exp });
    assert_eq!(
        ask(&mut server, 0, S),
        Reply::Err(ScriptError::WrongType(exp))
    );
    apply(
        &mut server,
        0,
        Op::WriteForeign {
            key: Key::Shared(0),
        },
    );
    let refused = ScriptError::Foreign(Key::Shared(0));
    assert_eq!(ask(&mut server, 0, S), Reply::Err(refused));
}

/// Each model mutant of the request, on the step where it differs from dlock's protocol.
#[test]
fn the_mutants_differ_where_they_say() {
    let mutant = |m| Server::new(Some(m));

    let mut server = mutant(Mutant::AskShortensLease);
    take(&mut server, 0, 1);
    ask(&mut server, 2, M);
    assert_eq!(server.data.locks[&0].deadline, 6, "half of the 8 ms left");

    let mut server = mutant(Mutant::AskRecordsNextWaiter);
    take(&mut server, 0, 1);
    let entry = entry(2, 1);
    apply(
        &mut server,
        1,
        Op::Acquire {
            name: 0,
            entry,
            mode: Mode::Wait,
        },
    );
    assert_eq!(ask(&mut server, 2, M), Reply::Int(1));
    assert_eq!(asked(&server, 2, M), vec![1, 2], "the waiter too");

    let mut server = mutant(Mutant::ExtendAnswersAnyToken);
    take(&mut server, 0, 1);
    ask(&mut server, 1, M);
    release(&mut server, 2, 1);
    take(&mut server, 3, 2);
    assert_eq!(extend(&mut server, 4, M, 2), Reply::Extended(vec![2]));

    let mut server = mutant(Mutant::AskExpiresEarly);
    take(&mut server, 0, 1);
    ask(&mut server, 2, M);
    assert_eq!(server.data.asked[&M].until, 6);
    assert_eq!(extend(&mut server, 7, M, 1), Reply::Extended(vec![1]));

    let mut server = mutant(Mutant::ExtendSkipsAskedRenewal);
    take(&mut server, 0, 1);
    ask(&mut server, 1, M);
    assert_eq!(extend(&mut server, 5, M, 1), Reply::Extended(vec![2]));
    assert_eq!(server.data.locks[&0].deadline, LEASE, "not renewed");
    let tokens: BTreeSet<u32> = server.data.asked[&M].tokens.clone();
    assert_eq!(tokens, BTreeSet::from([1]));
}
