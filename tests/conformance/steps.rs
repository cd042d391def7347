//! The operations a generated sequence is made of: what simulated clients and the environment
//! do, at the level of the client library (an acquire that waits, a wait that times out, a
//! release…). The driver turns each into the protocol steps the client takes (one script or
//! one plain command each) and runs them on both sides. `Debug` prints a step as one line of
//! the numbered list a failing (shrunk) sequence is reported as.

use std::fmt;

use proptest::prelude::*;

/// Simulated clients (processes): A, B, C.
pub(crate) const CLIENTS: u8 = 3;

/// The locks of a sequence: one of each kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Lock {
    /// The mutex `m`.
    Mutex,
    /// The semaphore `s`.
    Sem,
    /// The read-write lock `rw`.
    Rw,
    /// The election `e` (its mutex `election:e` and leader record).
    Election,
}

impl Lock {
    fn label(self) -> &'static str {
        match self {
            Lock::Mutex => "mutex",
            Lock::Sem => "sem",
            Lock::Rw => "rw",
            Lock::Election => "election",
        }
    }
}

/// One operation of a sequence. A client's operation on a request picks that client's oldest
/// request on the lock in the state it needs (queued, holding); when there is none, or the
/// client is dead, the operation does nothing (and says so in the run's log).
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// A new acquire call. Mutex and election: the uncontended pipeline first, then (with
    /// `wait`) acquire.lua mode "wait". Semaphore: `weight` permits of a handle whose limit is
    /// `limit`; read-write lock: a read (`weight` 1) or a write (otherwise).
    Acquire {
        client: u8,
        lock: Lock,
        weight: u32,
        limit: u32,
        lease: u8,
        wait: bool,
        /// Mutex only: the uncontended acquire of `MutexOptions::fenced` (one `MULTI` that
        /// also issues the fence: `INCR` on a connection that floored the slot, else
        /// fence.lua).
        fenced: bool,
    },
    /// A queued request's next attempt (woken by a grant, or by its fallback timer).
    Retry { client: u8, lock: Lock },
    /// A queued request's wait timed out: its last attempt (mode "last").
    GiveUp { client: u8, lock: Lock },
    /// A queued request abandoned (its future dropped): release with its entry.
    Cancel { client: u8, lock: Lock },
    /// A holding request releases.
    Release { client: u8, lock: Lock },
    /// A holding request extends its lease (extend.lua).
    Extend { client: u8, lock: Lock, lease: u8 },
    /// A mutex holder asks for its fence (fence.lua).
    Fence { client: u8 },
    /// A holding request's guarded write of its lock's data (guarded.lua: one `RPUSH`), with
    /// the fence it knows.
    Guarded { client: u8, lock: Lock },
    /// A holding request's `fenced_set` of its lock's data key (fenced.lua) with its fence.
    FencedSet { client: u8, lock: Lock },
    /// `Semaphore::set_limit`.
    SetLimit { limit: u32 },
    /// Someone asks the lock's holders to give it back (`request_release`, ask.lua).
    Ask { lock: Lock },
    /// An operator forces a mutex (or an election's lock) open (`force_unlock`, release.lua
    /// "force"); a semaphore or read-write lock: nothing.
    ForceUnlock { lock: Lock },
    /// A reader of the read-write lock upgrades (rw_change.lua "up").
    Upgrade { client: u8 },
    /// The writer of the read-write lock downgrades (rw_change.lua "down").
    Downgrade { client: u8 },
    /// The election's holder publishes itself as leader (fence.lua if needed, election.lua).
    Publish { client: u8 },
    /// The election's leader resigns (election.lua "resign", then the lock's release).
    Resign { client: u8 },
    /// An observer reads the leader (election_read.lua).
    Observe,
    /// An operator reads the lock (inspect.lua, shared_inspect.lua), compared with the model's
    /// view of it.
    Inspect { lock: Lock },
    /// The server clock jumps `units` whole lease units.
    Advance { units: u8 },
    /// The replica (or the AOF) catches up: the copy a later restart may come back with.
    Replicate,
    /// The server restarts (and comes back one lease unit later): empty, or (`from_copy`)
    /// with the copy of the last `Replicate` (empty if none).
    Restart { from_copy: bool },
    /// A client dies: its subscription closes; its holds and queue entries stay.
    Crash { client: u8 },
    /// A client stops (a long GC pause, a stopped VM): it sends nothing and its fallback timers
    /// do not fire, but its subscription stays open, so grants still reach it.
    Pause { client: u8 },
    /// A paused client runs again: it reads the grants that reached it meanwhile, then each of
    /// its waiting requests asks again (its timer fired during the pause).
    Resume { client: u8 },
    /// The reply to the client's next request is lost after its script ran: the client sends
    /// the same call again (a resent request must be safe).
    LoseReply { client: u8 },
    /// The next grant published to the client is lost: its request goes on waiting, and asks
    /// again by its timer, or leaves.
    LosePush { client: u8 },
}

fn name(client: u8) -> char {
    char::from(b'A' + client)
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Step::Acquire {
                client,
                lock,
                weight,
                limit,
                lease,
                wait,
                fenced,
            } => {
                let how = match (wait, fenced && lock == Lock::Mutex) {
                    (true, false) => "wait",
                    (false, false) => "try",
                    (true, true) => "fenced wait",
                    (false, true) => "fenced try",
                };
                let c = name(client);
                match lock {
                    Lock::Sem => write!(
                        f,
                        "client {c}: acquire sem x{weight} of {limit} {how}, lease {lease}"
                    ),
                    Lock::Rw if weight == 1 => write!(f, "client {c}: read {how}, lease {lease}"),
                    Lock::Rw => write!(f, "client {c}: write {how}, lease {lease}"),
                    Lock::Mutex => write!(f, "client {c}: acquire mutex {how}, lease {lease}"),
                    Lock::Election => write!(f, "client {c}: campaign {how}, lease {lease}"),
                }
            }
            Step::Retry { client, lock } => {
                write!(f, "client {}: retry {}", name(client), lock.label())
            }
            Step::GiveUp { client, lock } => {
                write!(
                    f,
                    "client {}: wait on {} times out",
                    name(client),
                    lock.label()
                )
            }
            Step::Cancel { client, lock } => {
                write!(
                    f,
                    "client {}: cancel wait on {}",
                    name(client),
                    lock.label()
                )
            }
            Step::Release { client, lock } => {
                write!(f, "client {}: release {}", name(client), lock.label())
            }
            Step::Extend {
                client,
                lock,
                lease,
            } => write!(
                f,
                "client {}: extend {} to lease {lease}",
                name(client),
                lock.label()
            ),
            Step::Fence { client } => write!(f, "client {}: fence of mutex", name(client)),
            Step::Guarded { client, lock } => {
                write!(
                    f,
                    "client {}: guarded write under {}",
                    name(client),
                    lock.label()
                )
            }
            Step::FencedSet { client, lock } => {
                write!(
                    f,
                    "client {}: fenced set of {}'s data",
                    name(client),
                    lock.label()
                )
            }
            Step::SetLimit { limit } => write!(f, "operator: set_limit(sem, {limit})"),
            Step::Ask { lock } => write!(f, "operator: request_release({})", lock.label()),
            Step::ForceUnlock { lock } => write!(f, "operator: force_unlock({})", lock.label()),
            Step::Upgrade { client } => write!(f, "client {}: upgrade rw", name(client)),
            Step::Downgrade { client } => write!(f, "client {}: downgrade rw", name(client)),
            Step::Publish { client } => write!(f, "client {}: publish leadership", name(client)),
            Step::Resign { client } => write!(f, "client {}: resign", name(client)),
            Step::Observe => write!(f, "observer: read leader"),
            Step::Inspect { lock } => write!(f, "operator: inspect {}", lock.label()),
            Step::Advance { units } => write!(f, "clock: +{units} lease unit(s)"),
            Step::Replicate => write!(f, "server: the replica catches up"),
            Step::Restart { from_copy: false } => write!(f, "server: restart empty"),
            Step::Restart { from_copy: true } => {
                write!(f, "server: restart from the replica's copy")
            }
            Step::Crash { client } => write!(f, "client {}: dies", name(client)),
            Step::Pause { client } => write!(f, "client {}: pauses", name(client)),
            Step::Resume { client } => write!(f, "client {}: resumes", name(client)),
            Step::LoseReply { client } => {
                write!(f, "client {}: its next reply is lost", name(client))
            }
            Step::LosePush { client } => {
                write!(f, "client {}: its next grant is lost", name(client))
            }
        }
    }
}

/// A sequence of steps, printed as a numbered list.
#[derive(Clone)]
pub(crate) struct Sequence(pub Vec<Step>);

impl fmt::Debug for Sequence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f)?;
        for (i, step) in self.0.iter().enumerate() {
            writeln!(f, "  {}. {step:?}", i + 1)?;
        }
        Ok(())
    }
}

fn client() -> impl Strategy<Value = u8> {
    0..CLIENTS
}

const LOCKS: [Lock; 4] = [Lock::Mutex, Lock::Sem, Lock::Rw, Lock::Election];

/// One step on one of `locks`, weighted towards the acquires and waits that make queues.
pub(crate) fn step(locks: Vec<Lock>) -> impl Strategy<Value = Step> {
    let lock = move || proptest::sample::select(locks.clone());
    let acquire = (
        client(),
        lock(),
        1..=3u32,
        prop_oneof![3 => Just(3u32), 1 => Just(2u32)],
        1..=2u8,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(client, lock, weight, limit, lease, wait, fenced)| Step::Acquire {
                client,
                lock,
                // The client refuses a weight above its handle's limit before it asks.
                weight: if lock == Lock::Rw && weight > 1 {
                    2
                } else {
                    weight.min(limit)
                },
                limit,
                lease,
                wait,
                fenced: fenced && lock == Lock::Mutex,
            },
        );
    prop_oneof![
        8 => acquire,
        5 => (client(), lock()).prop_map(|(client, lock)| Step::Retry { client, lock }),
        3 => (client(), lock()).prop_map(|(client, lock)| Step::GiveUp { client, lock }),
        2 => (client(), lock()).prop_map(|(client, lock)| Step::Cancel { client, lock }),
        4 => (client(), lock()).prop_map(|(client, lock)| Step::Release { client, lock }),
        1 => (client(), lock(), 1..=2u8)
            .prop_map(|(client, lock, lease)| Step::Extend { client, lock, lease }),
        1 => client().prop_map(|client| Step::Fence { client }),
        3 => (client(), lock()).prop_map(|(client, lock)| Step::Guarded { client, lock }),
        2 => (client(), lock()).prop_map(|(client, lock)| Step::FencedSet { client, lock }),
        1 => (1..=4u32).prop_map(|limit| Step::SetLimit { limit }),
        2 => lock().prop_map(|lock| Step::Ask { lock }),
        1 => lock().prop_map(|lock| Step::ForceUnlock { lock }),
        1 => client().prop_map(|client| Step::Upgrade { client }),
        1 => client().prop_map(|client| Step::Downgrade { client }),
        1 => client().prop_map(|client| Step::Publish { client }),
        1 => client().prop_map(|client| Step::Resign { client }),
        1 => Just(Step::Observe),
        1 => lock().prop_map(|lock| Step::Inspect { lock }),
        2 => (1..=2u8).prop_map(|units| Step::Advance { units }),
        1 => Just(Step::Replicate),
        1 => any::<bool>().prop_map(|from_copy| Step::Restart { from_copy }),
        2 => client().prop_map(|client| Step::Crash { client }),
        1 => client().prop_map(|client| Step::Pause { client }),
        1 => client().prop_map(|client| Step::Resume { client }),
        2 => client().prop_map(|client| Step::LoseReply { client }),
        1 => client().prop_map(|client| Step::LosePush { client }),
    ]
}

/// Three clients contending for one lock: the first takes it, the others wait behind it (the
/// queues every interesting step needs, in three steps instead of a lucky draw); then, at
/// times, the first waiter leaves (its wait times out, is cancelled, or its client dies, before
/// the holder releases or its lease ends), which is where re-admission and hand-off matter; or
/// the holder's lease ends and it writes late (guarded, or fenced after the first waiter); or
/// someone asks the holder to give the lock back, it is told by its renewal and releases, and
/// the first waiter that takes over renews (not told: the request was not for it).
fn contention(locks: Vec<Lock>) -> impl Strategy<Value = Vec<Step>> {
    (
        proptest::sample::select(locks),
        Just((0..CLIENTS).collect::<Vec<u8>>()).prop_shuffle(),
        prop_oneof![
            // The queue re-admission is about: a head that does not fit, one behind it that does.
            1 => (1..=2u32).prop_map(|held| vec![held, 3, 1]),
            1 => proptest::collection::vec(1..=3u32, 3),
        ],
        0..11u8,
    )
        .prop_map(|(lock, clients, weights, leave)| {
            let mut steps: Vec<Step> = clients
                .iter()
                .zip(weights)
                .enumerate()
                .map(|(i, (&client, weight))| Step::Acquire {
                    client,
                    lock,
                    weight: if lock == Lock::Rw && weight > 1 {
                        2
                    } else {
                        weight
                    },
                    limit: 3,
                    lease: 1,
                    wait: i > 0,
                    fenced: false,
                })
                .collect();
            let (holder, client) = (clients[0], clients[1]);
            match leave {
                0 | 6 => steps.push(Step::GiveUp { client, lock }),
                1 => steps.push(Step::Cancel { client, lock }),
                2 => steps.push(Step::Crash { client }),
                3 => steps.extend([
                    Step::Crash { client },
                    Step::Release {
                        client: holder,
                        lock,
                    },
                ]),
                4 => steps.extend([Step::Crash { client }, Step::Advance { units: 1 }]),
                // The holder's lease ends (the waiters' timers fire and one takes over); it
                // writes late, as a paused holder does: guarded, or fenced after its successor.
                7 => steps.extend([
                    Step::Advance { units: 1 },
                    Step::Guarded {
                        client: holder,
                        lock,
                    },
                ]),
                8 => steps.extend([
                    Step::Advance { units: 1 },
                    Step::FencedSet { client, lock },
                    Step::FencedSet {
                        client: holder,
                        lock,
                    },
                    Step::Guarded { client, lock },
                ]),
                // Every waiter dies first: no attempt purges the holder whose lease ended, and
                // its record stays in a shared lock's `:exp` (kept by the dead queue) when it
                // writes.
                9 => steps.extend([
                    Step::Crash { client },
                    Step::Crash { client: clients[2] },
                    Step::Advance { units: 1 },
                    Step::Guarded {
                        client: holder,
                        lock,
                    },
                ]),
                10 => steps.extend([
                    Step::Ask { lock },
                    Step::Extend {
                        client: holder,
                        lock,
                        lease: 2,
                    },
                    Step::Release {
                        client: holder,
                        lock,
                    },
                    Step::Extend {
                        client,
                        lock,
                        lease: 1,
                    },
                ]),
                _ => {}
            }
            steps
        })
}

/// A sequence of up to `len` steps (made of single steps and contention bursts). Most
/// sequences keep to one or two locks, so that their steps meet in the same queues instead of
/// spreading over four.
pub(crate) fn sequence(len: usize) -> impl Strategy<Value = Sequence> {
    let focus = prop_oneof![
        3 => proptest::sample::subsequence(LOCKS.to_vec(), 1..=2),
        1 => Just(LOCKS.to_vec()),
    ];
    focus
        .prop_flat_map(move |locks| {
            let fragment = prop_oneof![
                6 => step(locks.clone()).prop_map(|step| vec![step]),
                // A subsequence, so that shrinking can drop a burst's steps one by one.
                1 => contention(locks.clone()).prop_flat_map(|steps| {
                    let n = steps.len();
                    proptest::sample::subsequence(steps, 1..=n)
                }),
                // The hard states (bursts.rs).
                3 => crate::bursts::burst(locks),
            ];
            proptest::collection::vec(fragment, 1..=len * 6 / 8)
        })
        .prop_map(move |fragments| Sequence(fragments.into_iter().flatten().take(len).collect()))
}
