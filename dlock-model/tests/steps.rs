//! The step API, one scenario per rule of the protocol (issue 27's fixed rules S1–S4, M1, E1
//! and the fence floor): each drives [`apply`] as a conformance test would and checks the
//! replies and the [`abstraction`].

use dlock_model::{
    Entry, ExtendItem, Key, LockRef, Mode, Mutant, Op, Origin, RW_LIMIT, ReleaseHow, Reply,
    ScriptError, Server, SharedEntry, abstraction, apply,
};

const LEASE: u64 = 10;

fn entry(token: u32, client: u8) -> Entry {
    Entry {
        token,
        client,
        lease: LEASE,
    }
}

fn shared(token: u32, client: u8, weight: u32) -> SharedEntry {
    SharedEntry {
        token,
        client,
        lease: LEASE,
        weight,
    }
}

fn acquire(server: &mut Server, now: u64, e: Entry, mode: Mode) -> Reply {
    apply(
        server,
        now,
        Op::Acquire {
            name: 0,
            entry: e,
            mode,
        },
    )
}

fn sem(server: &mut Server, now: u64, e: SharedEntry, limit: u32, mode: Mode) -> Reply {
    apply(
        server,
        now,
        Op::SharedAcquire {
            name: 0,
            entry: e,
            limit,
            mode,
        },
    )
}

fn subscribe_mutex(server: &mut Server, client: u8) {
    apply(
        server,
        0,
        Op::Subscribe {
            lock: LockRef::Mutex(0),
            client,
        },
    );
}

fn subscribe_shared(server: &mut Server, client: u8) {
    apply(
        server,
        0,
        Op::Subscribe {
            lock: LockRef::Shared(0),
            client,
        },
    );
}

#[test]
fn release_hands_off_to_the_oldest_live_waiter_skipping_dead_ones() {
    let mut server = Server::new(None);
    subscribe_mutex(&mut server, 2);
    assert!(matches!(
        acquire(&mut server, 0, entry(1, 0), Mode::Wait),
        Reply::Holds { .. }
    ));
    // Client 1 queues and dies (no subscriber); client 2 queues behind it.
    assert_eq!(
        acquire(&mut server, 1, entry(2, 1), Mode::Wait),
        Reply::Busy { wait: 9 }
    );
    assert_eq!(
        acquire(&mut server, 1, entry(3, 2), Mode::Wait),
        Reply::Busy { wait: 9 }
    );
    assert!(abstraction(&server, 1).mutexes[&0].flagged);
    let reply = apply(
        &mut server,
        2,
        Op::Release {
            name: 0,
            token: 1,
            leaving: None,
            how: ReleaseHow::Own,
        },
    );
    let Reply::Handed(push) = reply else {
        panic!("expected a hand-off, got {reply:?}");
    };
    assert_eq!((push.client, push.token), (2, 3));
    assert_eq!(server.drain_published(), vec![push]);
    let view = &abstraction(&server, 2).mutexes[&0];
    assert_eq!((view.holder, view.queue.clone()), (Some(3), vec![]));
}

#[test]
fn an_expired_lock_goes_to_the_queue_head_not_to_the_newcomer() {
    let mut server = Server::new(None);
    subscribe_mutex(&mut server, 1);
    acquire(&mut server, 0, entry(1, 0), Mode::Wait);
    acquire(&mut server, 1, entry(2, 1), Mode::Wait);
    // The holder's lease ends; a newcomer's attempt hands the lock to the waiter.
    assert_eq!(
        acquire(&mut server, 11, entry(3, 2), Mode::Wait),
        Reply::Busy { wait: 10 }
    );
    let view = &abstraction(&server, 11).mutexes[&0];
    assert_eq!((view.holder, view.queue.clone()), (Some(2), vec![3]));
}

fn set_nx(server: &mut Server, now: u64, token: u32) -> Reply {
    apply(
        server,
        now,
        Op::SetNxGet {
            name: 0,
            token,
            lease: LEASE,
        },
    )
}

fn extend(server: &mut Server, now: u64, token: u32) -> Reply {
    apply(
        server,
        now,
        Op::Extend {
            items: vec![ExtendItem {
                lock: LockRef::Mutex(0),
                token,
                lease: LEASE,
            }],
        },
    )
}

/// Issue #35: while a caller waits, the lock key outlives its holder's lease by one lease, so
/// the uncontended `SET NX` (alone, no `EXISTS`) fails; the first script to find it hands it
/// to the queue's head.
#[test]
fn a_kept_key_refuses_the_newcomer_and_goes_to_the_queue_head() {
    let mut server = Server::new(None);
    subscribe_mutex(&mut server, 1);
    acquire(&mut server, 0, entry(1, 0), Mode::Wait);
    acquire(&mut server, 1, entry(2, 1), Mode::Wait);
    // The holder's lease is over at 10; the key is kept (to 20) for the waiter.
    assert_eq!(set_nx(&mut server, 12, 3), Reply::SetNx(Some(Some(1))));
    assert_eq!(abstraction(&server, 12).mutexes[&0].holder, None);
    // The late holder renews nothing and releases nothing of its own; its release hands on.
    assert_eq!(extend(&mut server, 12, 1), Reply::Extended(vec![0]));
    assert_eq!(
        apply(
            &mut server,
            12,
            Op::Release {
                name: 0,
                token: 1,
                leaving: None,
                how: ReleaseHow::Own,
            },
        ),
        Reply::Int(0)
    );
    let view = &abstraction(&server, 12).mutexes[&0];
    assert_eq!((view.holder, view.queue.clone()), (Some(2), vec![]));
    // Nobody waits now: the new holder's key is a plain one again, gone with its lease.
    assert_eq!(set_nx(&mut server, 22, 4), Reply::SetNx(None));
}

/// A kept key whose waiters all died is gone one lease after the lease it outlived; one whose
/// waiters all left is deleted by the last one's leaving.
#[test]
fn a_kept_key_lives_at_most_one_lease_past_its_holder() {
    let mut server = Server::new(None);
    acquire(&mut server, 0, entry(1, 0), Mode::Wait);
    acquire(&mut server, 1, entry(2, 1), Mode::Wait);
    assert_eq!(set_nx(&mut server, 19, 3), Reply::SetNx(Some(Some(1))));
    assert_eq!(set_nx(&mut server, 20, 3), Reply::SetNx(None));

    // The waiter gives up while the lease runs: the key is a plain one again, gone at 10.
    let mut server = Server::new(None);
    acquire(&mut server, 0, entry(1, 0), Mode::Wait);
    acquire(&mut server, 1, entry(2, 1), Mode::Wait);
    assert_eq!(
        acquire(&mut server, 5, entry(2, 1), Mode::Last),
        Reply::Busy { wait: 5 }
    );
    assert_eq!(set_nx(&mut server, 10, 3), Reply::SetNx(None));

    // A waiter cancelled after the lease (its release as it leaves): the kept key goes at once.
    let mut server = Server::new(None);
    acquire(&mut server, 0, entry(1, 0), Mode::Wait);
    acquire(&mut server, 1, entry(2, 1), Mode::Wait);
    let leave = Op::Release {
        name: 0,
        token: 2,
        leaving: Some(entry(2, 1)),
        how: ReleaseHow::Own,
    };
    assert_eq!(apply(&mut server, 12, leave), Reply::Int(0));
    assert_eq!(set_nx(&mut server, 12, 3), Reply::SetNx(None));
}

/// The mutant of issue #35: queueing flags the lock but does not keep its key, so a
/// newcomer's `SET NX` takes it ahead of the queue right after the lease.
#[test]
fn the_enqueue_that_forgets_to_keep_the_key_lets_a_newcomer_in() {
    let mut server = Server::new(Some(Mutant::EnqueueForgetsKeep));
    subscribe_mutex(&mut server, 1);
    acquire(&mut server, 0, entry(1, 0), Mode::Wait);
    acquire(&mut server, 1, entry(2, 1), Mode::Wait);
    assert_eq!(set_nx(&mut server, 10, 3), Reply::SetNx(None));
}

#[test]
fn a_fence_is_floored_at_the_clock_after_an_empty_restart() {
    let mut server = Server::new(None);
    let Reply::Holds { fence: first, .. } = acquire(&mut server, 5, entry(1, 0), Mode::Single)
    else {
        panic!("not taken");
    };
    apply(
        &mut server,
        6,
        Op::Restart {
            from_replica: false,
        },
    );
    let Reply::Holds { fence: second, .. } = acquire(&mut server, 7, entry(2, 0), Mode::Single)
    else {
        panic!("not taken");
    };
    assert!(second > first, "{second} <= {first}");
    assert_eq!(server.epoch, 1);
}

#[test]
fn the_fenced_multi_reports_its_connection_epoch() {
    let mut server = Server::new(None);
    let reply = apply(
        &mut server,
        3,
        Op::FencedFast {
            name: 0,
            token: 1,
            lease: LEASE,
            incr: false,
        },
    );
    assert_eq!(
        reply,
        Reply::Multi {
            set: None,
            fence: 3000,
            epoch: 0
        }
    );
}

#[test]
fn extend_renews_only_what_the_caller_owns() {
    let mut server = Server::new(None);
    acquire(&mut server, 0, entry(1, 0), Mode::Single);
    let items = vec![
        ExtendItem {
            lock: LockRef::Mutex(0),
            token: 1,
            lease: LEASE,
        },
        ExtendItem {
            lock: LockRef::Mutex(0),
            token: 9,
            lease: LEASE,
        },
        ExtendItem {
            lock: LockRef::Mutex(1),
            token: 1,
            lease: LEASE,
        },
    ];
    assert_eq!(
        apply(&mut server, 5, Op::Extend { items }),
        Reply::Extended(vec![1, -1, 0])
    );
    assert_eq!(abstraction(&server, 14).mutexes[&0].holder, Some(1));
}

#[test]
fn s1_a_request_whose_wait_ends_admits_what_fits_behind_it() {
    let mut server = Server::new(None);
    subscribe_shared(&mut server, 2);
    subscribe_shared(&mut server, 3);
    // Limit 3, two permits held; X wants 3 (queued), Y wants 1 (queued behind X).
    assert!(matches!(
        sem(&mut server, 0, shared(1, 0, 2), 3, Mode::Wait),
        Reply::Holds { .. }
    ));
    assert!(matches!(
        sem(&mut server, 1, shared(2, 2, 3), 3, Mode::Wait),
        Reply::Busy { .. }
    ));
    assert!(matches!(
        sem(&mut server, 1, shared(3, 3, 1), 3, Mode::Wait),
        Reply::Busy { .. }
    ));
    // X's last attempt: it leaves, and Y is admitted in the same step.
    assert!(matches!(
        sem(&mut server, 2, shared(2, 2, 3), 3, Mode::Last),
        Reply::Busy { .. }
    ));
    let view = &abstraction(&server, 2).shared[&0];
    assert_eq!(view.queue, vec![]);
    assert_eq!(view.holders.get(&3), Some(&1));
    assert_eq!(server.drain_published().len(), 1);
}

#[test]
fn s2_a_dead_head_that_does_not_fit_is_dropped() {
    let mut server = Server::new(None);
    subscribe_shared(&mut server, 3);
    sem(&mut server, 0, shared(1, 0, 2), 3, Mode::Wait);
    // Client 2 queues for 3 and is gone (never subscribed); Y (client 3) queues for 1.
    sem(&mut server, 1, shared(2, 2, 3), 3, Mode::Wait);
    sem(&mut server, 1, shared(3, 3, 1), 3, Mode::Wait);
    // Any script that runs the admission drops the dead head.
    apply(
        &mut server,
        2,
        Op::SharedRelease {
            name: 0,
            token: 99,
            leaving: None,
        },
    );
    let view = &abstraction(&server, 2).shared[&0];
    assert_eq!(view.queue, vec![]);
    assert!(view.holders.contains_key(&3));
}

#[test]
fn s3_an_operator_limit_persists_wins_and_refuses_heavier_requests() {
    let mut server = Server::new(None);
    subscribe_shared(&mut server, 1);
    assert_eq!(
        apply(&mut server, 0, Op::SetLimit { name: 0, limit: 1 }),
        Reply::Int(0)
    );
    // Nobody holds or waits, yet the operator's limit stays.
    let view = &abstraction(&server, 50).shared[&0];
    assert_eq!((view.limit, view.operator), (Some(1), true));
    assert_eq!(
        sem(&mut server, 50, shared(1, 0, 3), 3, Mode::Wait),
        Reply::Err(ScriptError::AboveLimit(1))
    );
    // A handle of another limit is weighed against it.
    assert!(matches!(
        sem(&mut server, 50, shared(2, 0, 1), 3, Mode::Wait),
        Reply::Holds { .. }
    ));
    assert!(matches!(
        sem(&mut server, 50, shared(3, 1, 1), 3, Mode::Wait),
        Reply::Busy { .. }
    ));
    assert_eq!(server.data.shared[&0].limit, Some((1, Origin::Operator)));
}

#[test]
fn s3_set_limit_removes_and_nudges_heavier_queued_requests() {
    let mut server = Server::new(None);
    subscribe_shared(&mut server, 1);
    subscribe_shared(&mut server, 2);
    sem(&mut server, 0, shared(1, 0, 1), 3, Mode::Wait);
    sem(&mut server, 0, shared(2, 1, 3), 3, Mode::Wait);
    sem(&mut server, 0, shared(3, 2, 1), 3, Mode::Wait);
    apply(&mut server, 1, Op::SetLimit { name: 0, limit: 2 });
    let pushes = server.drain_published();
    assert!(pushes.iter().any(|p| p.token == 2 && p.grant.is_none()));
    assert!(pushes.iter().any(|p| p.token == 3 && p.grant.is_some()));
    // The holders leave: the operator's limit stays while nobody holds.
    for token in [1, 3] {
        apply(
            &mut server,
            2,
            Op::SharedRelease {
                name: 0,
                token,
                leaving: None,
            },
        );
    }
    assert_eq!(
        sem(&mut server, 3, shared(2, 1, 3), 3, Mode::Wait),
        Reply::Err(ScriptError::AboveLimit(2))
    );
}

#[test]
fn s3_a_handle_limit_lives_while_requests_wait() {
    let mut server = Server::new(None);
    sem(&mut server, 0, shared(1, 0, 2), 2, Mode::Wait);
    sem(&mut server, 1, shared(2, 1, 1), 2, Mode::Wait);
    sem(&mut server, 1, shared(3, 2, 2), 2, Mode::Wait);
    // The holder's lease ends with a request queued: the limit stays.
    assert_eq!(abstraction(&server, 20).shared[&0].limit, Some(2));
    // Nobody holds or waits any more: the handle's limit goes with them.
    apply(
        &mut server,
        20,
        Op::SharedRelease {
            name: 0,
            token: 0,
            leaving: Some(shared(3, 2, 2)),
        },
    );
    assert!(!abstraction(&server, 40).shared.contains_key(&0));
}

#[test]
fn rwlock_upgrade_only_alone_and_downgrade_admits_readers() {
    let mut server = Server::new(None);
    subscribe_shared(&mut server, 1);
    sem(&mut server, 0, shared(1, 0, 1), RW_LIMIT, Mode::Wait);
    sem(&mut server, 0, shared(2, 1, 1), RW_LIMIT, Mode::Wait);
    let up = |server: &mut Server, old, new| {
        apply(
            server,
            1,
            Op::RwChange {
                name: 0,
                old,
                new,
                up: true,
                lease: LEASE,
            },
        )
    };
    assert_eq!(
        up(&mut server, 1, 10),
        Reply::Refused {
            used: 2,
            waiting: 0
        }
    );
    apply(
        &mut server,
        1,
        Op::SharedRelease {
            name: 0,
            token: 2,
            leaving: None,
        },
    );
    assert!(matches!(up(&mut server, 1, 10), Reply::Holds { .. }));
    // A reader queues behind the writer; the downgrade admits it.
    sem(&mut server, 2, shared(3, 1, 1), RW_LIMIT, Mode::Wait);
    assert!(matches!(
        apply(
            &mut server,
            2,
            Op::RwChange {
                name: 0,
                old: 10,
                new: 11,
                up: false,
                lease: LEASE
            }
        ),
        Reply::Holds { .. }
    ));
    let view = &abstraction(&server, 2).shared[&0];
    assert_eq!(view.holders.get(&11), Some(&1));
    assert_eq!(view.holders.get(&3), Some(&1));
}

#[test]
fn e1_an_election_refuses_foreign_data_at_its_record_key() {
    let mut server = Server::new(None);
    acquire(&mut server, 0, entry(1, 0), Mode::Single);
    let Reply::Int(fence) = apply(&mut server, 0, Op::Fence { name: 0, token: 1 }) else {
        panic!("no fence");
    };
    let fence = u64::try_from(fence).unwrap_or(0);
    apply(
        &mut server,
        0,
        Op::WriteForeign {
            key: Key::Leader(0),
        },
    );
    let publish = Op::ElectionPublish {
        name: 0,
        token: 1,
        fence,
        value: 7,
    };
    assert_eq!(
        apply(&mut server, 1, publish.clone()),
        Reply::Err(ScriptError::Foreign(Key::Leader(0)))
    );
    assert!(!server.wrote_foreign);
    let mut mutated = Server::new(Some(dlock_model::Mutant::ElectionOverwritesForeign));
    acquire(&mut mutated, 0, entry(1, 0), Mode::Single);
    apply(&mut mutated, 0, Op::Fence { name: 0, token: 1 });
    apply(
        &mut mutated,
        0,
        Op::WriteForeign {
            key: Key::Leader(0),
        },
    );
    assert_eq!(apply(&mut mutated, 1, publish), Reply::Int(1));
    assert!(mutated.wrote_foreign);
}

#[test]
fn election_read_reports_a_record_only_while_its_fence_holds_the_lock() {
    let mut server = Server::new(None);
    acquire(&mut server, 0, entry(1, 0), Mode::Single);
    let Reply::Int(fence) = apply(&mut server, 0, Op::Fence { name: 0, token: 1 }) else {
        panic!("no fence");
    };
    let fence = u64::try_from(fence).unwrap_or(0);
    apply(
        &mut server,
        0,
        Op::ElectionPublish {
            name: 0,
            token: 1,
            fence,
            value: 7,
        },
    );
    assert!(matches!(
        apply(&mut server, 1, Op::ElectionRead { name: 0 }),
        Reply::Leader { value: 7, .. }
    ));
    // The lease ran out (the record outlives it): no leader is reported.
    assert_eq!(
        apply(&mut server, 11, Op::ElectionRead { name: 0 }),
        Reply::Leader {
            lock_fence: 0,
            leader_fence: 0,
            value: 0
        }
    );
    assert_eq!(abstraction(&server, 11).leaders.len(), 1);
}

/// A leader's lease ran out while candidates wait (the key kept for them, issue #35) and none
/// of them asked again: nobody leads, and election_read.lua reports no fence (found by
/// `DLOCK_CONFORMANCE_SEED=99`: the model reported the expired holder's fence).
#[test]
fn election_read_reports_no_fence_for_a_key_kept_past_its_holder() {
    let mut server = Server::new(None);
    subscribe_mutex(&mut server, 1);
    assert!(matches!(
        acquire(&mut server, 0, entry(1, 0), Mode::Wait),
        Reply::Holds { .. }
    ));
    acquire(&mut server, 1, entry(2, 1), Mode::Wait);
    let read = |server: &mut Server, now| apply(server, now, Op::ElectionRead { name: 0 });
    assert!(matches!(read(&mut server, 5), Reply::Leader { lock_fence, .. } if lock_fence > 0));
    // Past the deadline (10), the key is kept (to 20) for the waiter, who has not asked again.
    assert_eq!(
        read(&mut server, 12),
        Reply::Leader {
            lock_fence: 0,
            leader_fence: 0,
            value: 0
        }
    );
    assert_eq!(abstraction(&server, 12).mutexes[&0].queue, vec![2]);
}

fn guarded(server: &mut Server, now: u64, lock: LockRef, token: u32, fence: u64) -> Reply {
    apply(server, now, Op::Guarded { lock, token, fence })
}

#[test]
fn a_guarded_write_lands_only_for_the_mutex_owner() {
    let mut server = Server::new(None);
    let m = LockRef::Mutex(0);
    acquire(&mut server, 0, entry(1, 0), Mode::Wait);
    assert_eq!(guarded(&mut server, 1, m, 1, 5), Reply::Applied);
    // Another token: "taken", nothing written.
    assert_eq!(
        guarded(&mut server, 2, m, 2, 9),
        Reply::NotApplied { taken: true }
    );
    // The lease ran out: "gone"; then the lock is another's: "taken".
    assert_eq!(
        guarded(&mut server, 10, m, 1, 5),
        Reply::NotApplied { taken: false }
    );
    acquire(&mut server, 11, entry(2, 1), Mode::Wait);
    assert_eq!(
        guarded(&mut server, 12, m, 1, 5),
        Reply::NotApplied { taken: true }
    );
    assert_eq!(guarded(&mut server, 12, m, 2, 9), Reply::Applied);
    assert_eq!(abstraction(&server, 12).written[&m], vec![1, 2]);
    assert_eq!(server.data.written[&m], vec![(1, 5), (2, 9)]);
    // Another program's data at the lock key: an error, nothing written.
    apply(&mut server, 13, Op::WriteForeign { key: Key::Lock(0) });
    assert_eq!(
        guarded(&mut server, 13, m, 2, 9),
        Reply::Err(ScriptError::Foreign(Key::Lock(0)))
    );
    assert_eq!(server.data.written[&m].len(), 2);
}

/// A shared holder past its deadline is refused even while its record is still in `K:exp`
/// (no shared script purged it, and another holder's later deadline keeps the key); the
/// mutant that looks at the record alone lets it write.
#[test]
fn a_guarded_write_of_a_shared_holder_is_judged_by_its_deadline_not_its_record() {
    for mutant in [None, Some(Mutant::GuardedIgnoresDeadline)] {
        let mut server = Server::new(mutant);
        let s = LockRef::Shared(0);
        sem(&mut server, 0, shared(1, 0, 1), 2, Mode::Wait);
        sem(&mut server, 5, shared(2, 1, 1), 2, Mode::Wait);
        assert_eq!(guarded(&mut server, 9, s, 1, 1), Reply::Applied);
        // At 10 holder 1's lease is over; its record is still there (the last step ran at 9).
        assert!(server.data.shared[&0].holders.contains_key(&1));
        let late = guarded(&mut server, 10, s, 1, 1);
        if mutant.is_none() {
            assert_eq!(late, Reply::NotApplied { taken: false });
        } else {
            assert_eq!(late, Reply::Applied, "the mutant writes");
        }
        // Purged now (the step's expiry): "gone" for both.
        assert_eq!(
            guarded(&mut server, 11, s, 1, 1),
            Reply::NotApplied { taken: false }
        );
        assert_eq!(guarded(&mut server, 11, s, 2, 2), Reply::Applied);
        // Past every deadline, K:exp expired with the latest: gone, mutant or not.
        assert_eq!(
            guarded(&mut server, 20, s, 2, 2),
            Reply::NotApplied { taken: false }
        );
    }
}

/// fenced.lua's compare-and-set: an equal fence writes again, a smaller one is refused with
/// the stored fence, exactly for fences around 2^53 (where a double rounds) and u64::MAX.
#[test]
fn a_fenced_set_keeps_the_largest_fence_exactly() {
    let mut server = Server::new(None);
    let set = |server: &mut Server, fence: u64, value: u32| {
        apply(
            server,
            0,
            Op::FencedSet {
                key: 0,
                fence,
                value,
            },
        )
    };
    let big = 1_u64 << 53;
    assert_eq!(set(&mut server, big + 1, 1), Reply::Written);
    assert_eq!(set(&mut server, big, 2), Reply::Stale { stored: big + 1 });
    assert_eq!(set(&mut server, big + 1, 3), Reply::Written);
    assert_eq!(set(&mut server, u64::MAX - 1, 4), Reply::Written);
    assert_eq!(
        set(&mut server, 9, 5),
        Reply::Stale {
            stored: u64::MAX - 1
        }
    );
    assert_eq!(set(&mut server, u64::MAX, 6), Reply::Written);
    assert_eq!(abstraction(&server, 0).fenced[&0], 6);
}
