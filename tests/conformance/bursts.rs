//! Bursts: short runs of steps that build, in a few steps, the states a lucky draw of single
//! steps rarely meets (issue 44), each with random parameters:
//! - a stale holder on a kept key: its lease over, its waiters paused or dead (so nobody asks
//!   again and the key stays, kept for them), then each request that holder can still send;
//! - mode changes of the read-write lock with readers, writers or both queued;
//! - `set_limit` below, at and above the queued weights, while held and once idle;
//! - an election's leader past its deadline while its candidates are paused;
//! - restarts, empty or from the replica's copy, around holds and queues;
//! - lost replies and lost grants around acquires, releases, renewals and changes.
//!
//! A burst is generated whole and shrinks by dropping its steps one at a time (each step is
//! kept by a boolean drawn true 9 times in 10, which shrinks towards false).

use proptest::prelude::*;

use crate::steps::{CLIENTS, Lock, Step};

fn acquire(client: u8, lock: Lock, weight: u32, lease: u8, wait: bool) -> Step {
    Step::Acquire {
        client,
        lock,
        weight,
        limit: 3,
        lease,
        wait,
        fenced: false,
    }
}

/// Three clients in a random order.
fn clients() -> impl Strategy<Value = Vec<u8>> {
    Just((0..CLIENTS).collect::<Vec<u8>>()).prop_shuffle()
}

/// `steps`, each kept with probability 0.9 (shrinking drops them one by one).
fn most(steps: Vec<Step>) -> impl Strategy<Value = Vec<Step>> {
    let n = steps.len();
    proptest::collection::vec(proptest::bool::weighted(0.9), n).prop_map(move |keep| {
        steps
            .iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|(s, _)| s.clone())
            .collect()
    })
}

/// What a stale holder may still send that leaves it believing it holds (a fence it is refused,
/// a publish refused, an operator's request or read, a new acquire of its client), and the
/// requests whose refusal tells it the lease is lost (one of them ends its turn).
fn stale_requests(lock: Lock, holder: u8) -> (Vec<Step>, Vec<Step>) {
    let mut quiet = vec![
        acquire(holder, lock, 1, 1, true),
        Step::FencedSet {
            client: holder,
            lock,
        },
        Step::Ask { lock },
        Step::Inspect { lock },
    ];
    let mut ending = vec![
        Step::Extend {
            client: holder,
            lock,
            lease: 1,
        },
        Step::Guarded {
            client: holder,
            lock,
        },
        Step::Release {
            client: holder,
            lock,
        },
    ];
    match lock {
        Lock::Mutex => quiet.extend([Step::Fence { client: holder }, Step::ForceUnlock { lock }]),
        Lock::Election => {
            quiet.extend([
                Step::Publish { client: holder },
                Step::Observe,
                Step::ForceUnlock { lock },
            ]);
            ending.push(Step::Resign { client: holder });
        }
        Lock::Rw => ending.extend([
            Step::Upgrade { client: holder },
            Step::Downgrade { client: holder },
        ]),
        Lock::Sem => {}
    }
    (quiet, ending)
}

/// A random selection of `quiet` in a random order, then one of `ending`.
fn stale_turn((quiet, ending): (Vec<Step>, Vec<Step>)) -> impl Strategy<Value = Vec<Step>> {
    let n = quiet.len();
    (
        proptest::sample::subsequence(quiet, 0..=n).prop_shuffle(),
        proptest::sample::select(ending),
    )
        .prop_map(|(mut steps, last)| {
            steps.push(last);
            steps
        })
}

/// A holder whose lease ends on a key kept for waiters that are paused or dead (nobody asks
/// again), or with nobody waiting (its keys expire), then the requests the holder can still
/// send (its lease over, or at times still on); at times the waiters resume (one of them takes
/// the lock and writes) and the stale holder tries again.
fn stale(locks: Vec<Lock>) -> impl Strategy<Value = Vec<Step>> {
    (
        proptest::sample::select(locks),
        clients(),
        0..4u8,
        1..=2u8,
        (any::<bool>(), proptest::bool::weighted(0.8)),
    )
        .prop_flat_map(|(lock, c, fault, lease, (resume, late))| {
            let (holder, w1, w2) = (c[0], c[1], c[2]);
            (
                stale_turn(stale_requests(lock, holder)),
                stale_turn(stale_requests(lock, holder)),
            )
                .prop_flat_map(move |(first, again)| {
                    // A mutex holder takes the uncontended path; a semaphore's holds all its
                    // permits; a read-write lock's writes, so that everyone after it queues.
                    let shared = lock == Lock::Sem || lock == Lock::Rw;
                    let mut steps = vec![acquire(holder, lock, 3, 1, shared)];
                    if lock == Lock::Election {
                        steps.push(Step::Publish { client: holder });
                    }
                    if fault < 3 {
                        steps.push(acquire(w1, lock, 1, lease, true));
                        steps.push(acquire(w2, lock, 2, 1, true));
                    }
                    steps.extend(match fault {
                        0 => vec![Step::Pause { client: w1 }, Step::Pause { client: w2 }],
                        1 => vec![Step::Crash { client: w1 }, Step::Crash { client: w2 }],
                        2 => vec![Step::Pause { client: w1 }, Step::Crash { client: w2 }],
                        _ => vec![],
                    });
                    if late {
                        steps.push(Step::Advance { units: 1 });
                    }
                    steps.extend(first);
                    if resume {
                        steps.extend([
                            Step::Resume { client: w1 },
                            Step::Resume { client: w2 },
                            Step::FencedSet { client: w1, lock },
                        ]);
                        steps.extend(again);
                    }
                    most(steps)
                })
        })
}

/// A holder alone whose lease ends (its keys expire with it), then the requests it can still
/// send.
fn alone(locks: Vec<Lock>) -> impl Strategy<Value = Vec<Step>> {
    (proptest::sample::select(locks), 0..CLIENTS).prop_flat_map(|(lock, holder)| {
        stale_turn(stale_requests(lock, holder)).prop_flat_map(move |turn| {
            let mut steps = vec![
                acquire(holder, lock, 2, 1, true),
                Step::Advance { units: 1 },
            ];
            steps.extend(turn);
            most(steps)
        })
    })
}

/// The read-write lock with readers or a writer holding and readers, writers or both queued,
/// then upgrades and downgrades (by the right mode or the wrong one, at times with a lost
/// reply: the change is sent again).
fn rw_changes() -> impl Strategy<Value = Vec<Step>> {
    let rw = Lock::Rw;
    (
        clients(),
        any::<bool>(),
        proptest::collection::vec(1..=2u32, 0..=2),
        proptest::sample::subsequence((0..8usize).collect::<Vec<_>>(), 2..=5),
    )
        .prop_flat_map(move |(c, writes, queue, picks)| {
            let (first, rest) = (c[0], &c[1..]);
            let mut steps = vec![acquire(first, rw, if writes { 2 } else { 1 }, 2, true)];
            for (&client, &weight) in rest.iter().zip(&queue) {
                steps.push(acquire(client, rw, weight, 1, true));
            }
            let other = rest[0];
            let changes = [
                Step::LoseReply { client: first },
                Step::Upgrade { client: first },
                Step::Downgrade { client: first },
                Step::Release {
                    client: other,
                    lock: rw,
                },
                Step::LoseReply { client: first },
                Step::Upgrade { client: first },
                Step::Downgrade { client: first },
                Step::Inspect { lock: rw },
            ];
            steps.extend(picks.iter().filter_map(|&i| changes.get(i).cloned()));
            most(steps)
        })
}

/// A semaphore with permits held and requests of various weights queued, then `set_limit`
/// below, at and above them, while held and after the holder left (idle), and the queued
/// requests asking again (those dropped are refused).
fn limits() -> impl Strategy<Value = Vec<Step>> {
    let sem = Lock::Sem;
    (
        clients(),
        1..=3u32,
        proptest::collection::vec(1..=3u32, 2),
        proptest::collection::vec(1..=5u32, 1..=3),
        any::<bool>(),
    )
        .prop_flat_map(move |(c, held, queued, limits, crash)| {
            let mut steps = vec![acquire(c[0], sem, held, 1, true)];
            // A handle built with another limit than the one stored: refused (DLOCKLIMIT).
            steps.push(Step::Acquire {
                client: c[2],
                lock: sem,
                weight: 1,
                limit: 2,
                lease: 1,
                wait: true,
                fenced: false,
            });
            for (&client, &weight) in c[1..].iter().zip(&queued) {
                steps.push(acquire(client, sem, weight, 1, true));
            }
            // The head dies: a raised limit admits it (its grant reaches nobody), a lowered one
            // drops it.
            if crash {
                steps.push(Step::Crash { client: c[1] });
            }
            let (first, rest) = limits.split_at(1);
            steps.push(Step::SetLimit { limit: first[0] });
            steps.extend([
                Step::Retry {
                    client: c[1],
                    lock: sem,
                },
                Step::Release {
                    client: c[0],
                    lock: sem,
                },
            ]);
            for &limit in rest {
                steps.push(Step::SetLimit { limit });
            }
            steps.extend([
                Step::Retry {
                    client: c[2],
                    lock: sem,
                },
                acquire(c[0], sem, 1, 1, true),
                Step::Inspect { lock: sem },
            ]);
            most(steps)
        })
}

/// An election: a leader publishes and refreshes, a candidate waits and is paused (or dies),
/// the leader's lease ends; the stale leader publishes, resigns; observers read throughout. At
/// times the server restarts from a copy taken before the leader's fence.
fn election() -> impl Strategy<Value = Vec<Step>> {
    let e = Lock::Election;
    (clients(), any::<bool>(), any::<bool>(), 0..3u8).prop_flat_map(
        move |(c, fenced, pause, restart)| {
            let (leader, candidate) = (c[0], c[1]);
            let mut steps = vec![Step::Acquire {
                client: leader,
                lock: e,
                weight: 1,
                limit: 1,
                lease: 1,
                wait: false,
                fenced,
            }];
            if restart == 0 {
                steps.extend([
                    Step::Replicate,
                    Step::Publish { client: leader },
                    Step::Restart { from_copy: true },
                ]);
            }
            steps.extend([
                Step::Publish { client: leader },
                Step::Observe,
                acquire(candidate, e, 1, 1, true),
                Step::Publish { client: leader },
                if pause {
                    Step::Pause { client: candidate }
                } else {
                    Step::Crash { client: candidate }
                },
                Step::Advance { units: 1 },
                Step::Observe,
                Step::Publish { client: leader },
                Step::Resign { client: leader },
                Step::Observe,
                Step::Resume { client: candidate },
                Step::Publish { client: candidate },
                Step::Observe,
                Step::Resign { client: candidate },
            ]);
            if restart == 1 {
                // A resignation that finds no record of its own.
                steps.retain(|s| *s != Step::Publish { client: candidate });
            }
            if !pause {
                steps.retain(|s| !matches!(s, Step::Resume { .. }));
            }
            most(steps)
        },
    )
}

/// Holds and a queue, the replica catching up at some point, more changes, then a restart
/// (empty or from the copy), after which the clients go on as they believe.
fn restart(locks: Vec<Lock>) -> impl Strategy<Value = Vec<Step>> {
    (
        proptest::sample::select(locks),
        clients(),
        any::<bool>(),
        0..3usize,
    )
        .prop_flat_map(|(lock, c, from_copy, at)| {
            let mut steps = vec![
                acquire(c[0], lock, 2, 2, true),
                acquire(c[1], lock, 2, 1, true),
            ];
            let mut later = vec![
                match lock {
                    Lock::Mutex => Step::Fence { client: c[0] },
                    Lock::Election => Step::Publish { client: c[0] },
                    _ => Step::Guarded { client: c[0], lock },
                },
                Step::Ask { lock },
                acquire(c[2], lock, 1, 1, true),
            ];
            later.insert(at, Step::Replicate);
            steps.extend(later);
            steps.push(Step::Restart { from_copy });
            steps.extend([
                Step::Extend {
                    client: c[0],
                    lock,
                    lease: 1,
                },
                Step::Publish { client: c[0] },
                Step::Release { client: c[0], lock },
                Step::Retry { client: c[1], lock },
            ]);
            most(steps)
        })
}

/// Lost replies (the same call sent again) and lost grants around a lock's requests.
fn lost(locks: Vec<Lock>) -> impl Strategy<Value = Vec<Step>> {
    (proptest::sample::select(locks), clients(), 0..4u8).prop_flat_map(|(lock, c, how)| {
        let (a, b) = (c[0], c[1]);
        let mut steps = vec![
            Step::LoseReply { client: a },
            acquire(a, lock, 2, 1, true),
            Step::LoseReply { client: b },
            acquire(b, lock, 2, 1, true),
        ];
        steps.extend(match how {
            // The grant is lost: the waiter asks again, or leaves, and finds it holds.
            0 => vec![
                Step::LosePush { client: b },
                Step::Release { client: a, lock },
                Step::Retry { client: b, lock },
            ],
            1 => vec![
                Step::LosePush { client: b },
                Step::Release { client: a, lock },
                Step::Cancel { client: b, lock },
            ],
            2 => vec![
                Step::LosePush { client: b },
                Step::LoseReply { client: a },
                Step::Release { client: a, lock },
                Step::GiveUp { client: b, lock },
            ],
            _ => vec![
                Step::LoseReply { client: a },
                Step::Extend {
                    client: a,
                    lock,
                    lease: 2,
                },
                Step::LoseReply { client: a },
                Step::Fence { client: a },
                Step::LoseReply { client: a },
                Step::Guarded { client: a, lock },
                Step::LoseReply { client: a },
                Step::Release { client: a, lock },
            ],
        });
        most(steps)
    })
}

/// One burst on (mostly) `locks`.
pub(crate) fn burst(locks: Vec<Lock>) -> impl Strategy<Value = Vec<Step>> {
    prop_oneof![
        2 => stale(locks.clone()),
        1 => alone(locks.clone()),
        1 => rw_changes(),
        1 => limits(),
        1 => election(),
        1 => restart(locks.clone()),
        1 => lost(locks),
    ]
}
