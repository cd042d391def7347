//! Fixed scenarios (issue 44): the hard states built step by step, so that every run meets
//! them whatever its seed draws, for every kind of lock:
//! - a stale holder on a kept key (its lease over, the key kept for waiters that are paused
//!   or dead), followed by each request it can still send — renewal, fence, guarded write,
//!   fenced write, release, release request, publish, resign, inspection;
//! - upgrades and downgrades with readers, writers or both queued, by the right mode and the
//!   wrong one;
//! - `set_limit` below, at and above queued weights, while held and while idle;
//! - an election's leader paused past its deadline, then publishing, resigning, observed;
//! - restarts, empty and from the replica's copy;
//! - lost replies (the same call sent again) and lost grants.
//!
//! Each runs as a sequence does (`crate::run`: every protocol step compared with the model).

use crate::steps::{Lock, Step};

mod stale;
use stale::{overtaken, stale_holders};

const M: Lock = Lock::Mutex;
const S: Lock = Lock::Sem;
const RW: Lock = Lock::Rw;
const E: Lock = Lock::Election;
const A: u8 = 0;
const B: u8 = 1;
const C: u8 = 2;

/// An acquire that waits (a mutex's and an election's try the uncontended path first).
fn wait(client: u8, lock: Lock, weight: u32, lease: u8) -> Step {
    Step::Acquire {
        client,
        lock,
        weight,
        limit: 3,
        lease,
        wait: true,
        fenced: false,
    }
}

/// An acquire that does not wait (a mutex's: the uncontended path alone).
fn try_(client: u8, lock: Lock, lease: u8) -> Step {
    Step::Acquire {
        client,
        lock,
        weight: 1,
        limit: 3,
        lease,
        wait: false,
        fenced: false,
    }
}

fn extend(client: u8, lock: Lock) -> Step {
    Step::Extend {
        client,
        lock,
        lease: 1,
    }
}

fn release(client: u8, lock: Lock) -> Step {
    Step::Release { client, lock }
}

fn guarded(client: u8, lock: Lock) -> Step {
    Step::Guarded { client, lock }
}

fn fenced(client: u8, lock: Lock) -> Step {
    Step::FencedSet { client, lock }
}

const ADVANCE: Step = Step::Advance { units: 1 };

/// Waiters that leave while others wait, and a waiter whose entry left unheard.
fn leaving() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "waiters leave one by one: the holder's flag and the keep follow",
            vec![
                try_(A, M, 2),
                wait(B, M, 1, 1),
                wait(C, M, 1, 2),
                Step::Cancel { client: B, lock: M },
                Step::Inspect { lock: M },
                Step::Cancel { client: C, lock: M },
                Step::Inspect { lock: M },
                wait(B, M, 1, 1),
                Step::GiveUp { client: B, lock: M },
                release(A, M),
            ],
        ),
        (
            "a wait at the head times out: what fits behind it is admitted (S1)",
            vec![
                wait(A, S, 2, 2),
                wait(B, S, 2, 1),
                wait(C, S, 1, 1),
                Step::GiveUp { client: B, lock: S },
                Step::Inspect { lock: S },
                wait(A, RW, 1, 2),
                wait(B, RW, 2, 1),
                wait(C, RW, 1, 1),
                Step::Cancel {
                    client: B,
                    lock: RW,
                },
                Step::Inspect { lock: RW },
            ],
        ),
        (
            "a queue of dead waiters is kept two of its longest leases, then goes",
            vec![
                wait(A, S, 3, 1),
                wait(B, S, 1, 1),
                Step::Crash { client: B },
                ADVANCE,
                Step::Inspect { lock: S },
                ADVANCE,
                Step::Inspect { lock: S },
            ],
        ),
        (
            "a waiter whose grant was lost and whose hold ran out asks again: queued anew",
            vec![
                try_(A, M, 1),
                wait(B, M, 1, 1),
                Step::LosePush { client: B },
                release(A, M),
                Step::Pause { client: B },
                ADVANCE,
                try_(C, M, 2),
                Step::Resume { client: B },
                release(C, M),
            ],
        ),
        (
            "a semaphore waiter whose grant was lost and whose hold ran out asks again",
            vec![
                wait(A, S, 3, 1),
                wait(B, S, 1, 1),
                Step::LosePush { client: B },
                release(A, S),
                Step::Pause { client: B },
                ADVANCE,
                wait(C, S, 3, 2),
                Step::Resume { client: B },
                release(C, S),
            ],
        ),
    ]
}

/// Upgrades and downgrades with a queue.
fn mode_changes() -> Vec<(&'static str, Vec<Step>)> {
    let up = |c| Step::Upgrade { client: c };
    let down = |c| Step::Downgrade { client: c };
    let inspect = Step::Inspect { lock: RW };
    vec![
        (
            "two readers, a writer queued: upgrades refused while anyone is queued",
            vec![
                wait(A, RW, 1, 2),
                wait(B, RW, 1, 2),
                wait(C, RW, 2, 1),
                up(A),
                release(B, RW),
                up(A),
                inspect.clone(),
                release(A, RW),
                inspect.clone(),
            ],
        ),
        (
            "a writer, readers queued: a downgrade admits them beside it",
            vec![
                wait(A, RW, 2, 2),
                wait(B, RW, 1, 1),
                wait(C, RW, 1, 1),
                down(A),
                inspect.clone(),
                up(A),
                release(B, RW),
                release(C, RW),
                up(A),
            ],
        ),
        (
            "a writer, a reader then a writer queued: the downgrade admits the reader only",
            vec![
                wait(A, RW, 2, 2),
                wait(B, RW, 1, 1),
                wait(C, RW, 2, 1),
                down(A),
                inspect.clone(),
                up(A),
                release(B, RW),
                up(A),
                release(A, RW),
                inspect,
            ],
        ),
        (
            "a reader alone upgrades; the change sent again; a reader then queues",
            vec![
                wait(A, RW, 1, 2),
                Step::LoseReply { client: A },
                up(A),
                wait(B, RW, 1, 1),
                Step::LoseReply { client: A },
                down(A),
                up(A),
                release(A, RW),
            ],
        ),
        (
            "changes from the wrong mode",
            vec![
                wait(A, RW, 2, 2),
                up(A),
                down(A),
                down(A),
                wait(B, RW, 1, 1),
                up(B),
            ],
        ),
        (
            "a stale writer changes after its keys expired, then after a restart",
            vec![
                wait(A, RW, 2, 1),
                ADVANCE,
                down(A),
                wait(B, RW, 1, 2),
                Step::Restart { from_copy: false },
                up(B),
                guarded(B, RW),
            ],
        ),
    ]
}

/// `set_limit` below, at and above queued weights, while held and while idle.
fn limits() -> Vec<(&'static str, Vec<Step>)> {
    let limit = |limit| Step::SetLimit { limit };
    let inspect = Step::Inspect { lock: S };
    vec![
        (
            "held: the limit set at a queued weight, then below and above",
            vec![
                wait(A, S, 2, 2),
                wait(B, S, 2, 1),
                wait(C, S, 1, 1),
                limit(2),
                inspect.clone(),
                Step::Retry { client: B, lock: S },
                release(A, S),
                inspect.clone(),
                limit(1),
                Step::Retry { client: C, lock: S },
                release(B, S),
                limit(3),
                inspect,
            ],
        ),
        (
            "held: the limit set below the head's weight drops it, and the next fits",
            vec![
                wait(A, S, 1, 2),
                wait(B, S, 3, 1),
                wait(C, S, 1, 1),
                limit(2),
                Step::Retry { client: B, lock: S },
                Step::Inspect { lock: S },
            ],
        ),
        (
            "idle: set, then a handle of another limit takes the operator's",
            vec![
                limit(2),
                wait(A, S, 2, 1),
                wait(B, S, 1, 1),
                limit(3),
                Step::Inspect { lock: S },
                release(A, S),
                release(B, S),
                limit(1),
                Step::Inspect { lock: S },
            ],
        ),
        (
            "a dead request at the head: a raised limit admits it, the grant reaches nobody",
            vec![
                wait(A, S, 3, 2),
                wait(B, S, 2, 1),
                wait(C, S, 1, 1),
                Step::Crash { client: B },
                limit(5),
                Step::Inspect { lock: S },
                release(A, S),
                limit(2),
            ],
        ),
        (
            "a dead request at the head that does not fit is dropped",
            vec![
                wait(A, S, 3, 2),
                wait(B, S, 2, 1),
                wait(C, S, 1, 1),
                Step::Crash { client: B },
                limit(3),
                release(A, S),
                Step::Inspect { lock: S },
            ],
        ),
    ]
}

/// An election's leader past its deadline while its candidate waits, paused.
fn elections() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "a leader publishes, refreshes, and resigns; a candidate takes over",
            vec![
                Step::Observe,
                try_(A, E, 2),
                Step::Publish { client: A },
                Step::Observe,
                Step::Publish { client: A },
                wait(B, E, 1, 1),
                Step::Resign { client: A },
                Step::Observe,
                Step::Publish { client: B },
                Step::Resign { client: B },
                Step::Resign { client: B },
            ],
        ),
        (
            "a candidate granted the lock resigns with no record of its own",
            vec![
                try_(A, E, 1),
                wait(B, E, 1, 1),
                Step::Resign { client: A },
                Step::Observe,
                Step::Resign { client: B },
                Step::Observe,
            ],
        ),
        (
            "a leader paused past its deadline: publishes, observed, resigns",
            vec![
                try_(A, E, 1),
                Step::Publish { client: A },
                wait(B, E, 1, 1),
                Step::Pause { client: A },
                Step::Pause { client: B },
                ADVANCE,
                Step::Observe,
                Step::Inspect { lock: E },
                Step::Resume { client: A },
                Step::Publish { client: A },
                Step::Observe,
                Step::Resign { client: A },
                Step::Resume { client: B },
                Step::Observe,
                Step::Publish { client: B },
                Step::Observe,
            ],
        ),
    ]
}

/// Restarts: empty, and from the replica's copy taken before a fence, a record, a hand-off.
fn restarts() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "a mutex restored from a copy taken before its fence and its waiter",
            vec![
                try_(A, M, 2),
                wait(B, M, 1, 1),
                Step::Replicate,
                Step::Fence { client: A },
                wait(C, M, 1, 1),
                Step::Restart { from_copy: true },
                Step::Fence { client: A },
                Step::FencedSet { client: A, lock: M },
                extend(A, M),
                release(A, M),
            ],
        ),
        (
            "an election restored from a copy taken before its leader's fence",
            vec![
                try_(A, E, 2),
                Step::Replicate,
                Step::Publish { client: A },
                Step::Restart { from_copy: true },
                Step::Publish { client: A },
                Step::Observe,
                Step::Resign { client: A },
            ],
        ),
        (
            "a semaphore restored from a copy taken before a hand-off",
            vec![
                wait(A, S, 2, 2),
                wait(B, S, 2, 1),
                Step::Replicate,
                release(A, S),
                guarded(B, S),
                Step::Restart { from_copy: true },
                Step::Retry { client: B, lock: S },
                guarded(B, S),
                extend(B, S),
                Step::Restart { from_copy: false },
                release(B, S),
            ],
        ),
    ]
}

/// Lost replies: every request of every kind sent twice.
fn lost() -> Vec<(&'static str, Vec<Step>)> {
    let lose = |c| Step::LoseReply { client: c };
    let mut out = Vec::new();
    for (lock, name) in [
        (M, "a mutex"),
        (S, "a semaphore"),
        (RW, "a read-write lock"),
        (E, "an election"),
    ] {
        out.push((
            name,
            vec![
                lose(A),
                wait(A, lock, 2, 1),
                lose(B),
                wait(B, lock, 2, 1),
                lose(A),
                extend(A, lock),
                lose(A),
                Step::Fence { client: A },
                lose(A),
                guarded(A, lock),
                lose(A),
                release(A, lock),
                lose(B),
                release(B, lock),
            ],
        ));
    }
    out
}

/// Lost grants: the waiter asks again, leaves, or times out, and finds it holds.
fn lost_grants() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "a lost grant: the waiter asks again and finds it holds",
            vec![
                try_(A, M, 1),
                wait(B, M, 1, 1),
                Step::LosePush { client: B },
                release(A, M),
                Step::Retry { client: B, lock: M },
                release(B, M),
            ],
        ),
        (
            "a lost grant: the waiter leaves, with and without others behind it",
            vec![
                try_(A, M, 1),
                wait(B, M, 1, 1),
                wait(C, M, 1, 1),
                Step::LosePush { client: B },
                release(A, M),
                Step::Cancel { client: B, lock: M },
                Step::LosePush { client: C },
                wait(A, M, 1, 1),
                release(C, M),
                Step::Cancel { client: C, lock: M },
            ],
        ),
        (
            "a lost grant: the waiter, alone in the queue, leaves",
            vec![
                try_(A, M, 1),
                wait(B, M, 1, 1),
                Step::LosePush { client: B },
                release(A, M),
                Step::Cancel { client: B, lock: M },
            ],
        ),
        (
            "a lost grant: the waiter asks again by its timer a unit later, its lease running",
            vec![
                wait(A, S, 3, 1),
                wait(B, S, 1, 2),
                Step::LosePush { client: B },
                release(A, S),
                ADVANCE,
                release(B, S),
                try_(A, M, 1),
                wait(B, M, 1, 2),
                wait(C, M, 1, 1),
                Step::LosePush { client: B },
                release(A, M),
                ADVANCE,
                release(B, M),
            ],
        ),
        (
            "a lost grant: the wait times out",
            vec![
                wait(A, S, 3, 1),
                wait(B, S, 1, 1),
                Step::LosePush { client: B },
                release(A, S),
                Step::GiveUp { client: B, lock: S },
                wait(A, M, 1, 1),
                wait(B, M, 1, 1),
                Step::LosePush { client: B },
                release(A, M),
                Step::GiveUp { client: B, lock: M },
            ],
        ),
    ]
}

/// Queues of dead waiters met by a holder on time and by a newcomer.
fn dead_queues() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "a mutex holder releases while every waiter is dead",
            vec![
                try_(A, M, 2),
                wait(B, M, 1, 1),
                wait(C, M, 1, 1),
                Step::Crash { client: B },
                Step::Crash { client: C },
                extend(A, M),
                release(A, M),
            ],
        ),
        (
            "a kept key for a dead waiter, taken by a newcomer",
            vec![
                try_(A, M, 1),
                wait(B, M, 1, 1),
                Step::Crash { client: B },
                ADVANCE,
                wait(C, M, 1, 1),
                release(A, M),
                release(C, M),
            ],
        ),
    ]
}

/// What the longer runs found (DLOCK_CONFORMANCE_SEED and _CASES), kept as scenarios.
fn found() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            // Seeds 1 and 2 at 4,096 (issue 44): a request granted unheard, then the limit
            // lowered below its weight; its next attempt must find its hold (shared_acquire.lua
            // looks for the caller's hold first), where the model refused it (DLOCKWEIGHT).
            "a holder that did not hear its grant asks again after the limit went below its weight",
            vec![
                Step::LosePush { client: A },
                wait(C, S, 2, 1),
                wait(A, S, 3, 1),
                Step::SetLimit { limit: 5 },
                Step::SetLimit { limit: 1 },
                Step::Retry { client: A, lock: S },
            ],
        ),
        (
            // Seed 99 at 4,096 (issue 44): a dead waiter's entry outlives the kept key; the next
            // holder's value is version 1 beside that queue, and extend.lua only renews it,
            // where the model's renewal flagged it as callers waiting.
            "a renewal of a hold taken beside a queue of dead waiters whose kept key expired",
            vec![
                try_(A, M, 1),
                wait(B, M, 1, 1),
                Step::Crash { client: B },
                ADVANCE,
                ADVANCE,
                try_(C, M, 1),
                Step::Extend {
                    client: C,
                    lock: M,
                    lease: 2,
                },
                Step::Inspect { lock: M },
                release(C, M),
            ],
        ),
        (
            // Seed 4 at 128 (issue 44): the model answered 0 (nobody holds) where extend.lua
            // compares the owner first and answers -1 (another owner's value, kept past its
            // deadline for a paused candidate).
            "a stale renewal after the lock changed hands and that hold ran out too",
            vec![
                try_(A, E, 1),
                ADVANCE,
                try_(A, E, 1),
                wait(C, E, 1, 1),
                Step::Pause { client: C },
                ADVANCE,
                extend(A, E),
            ],
        ),
    ]
}

/// Release requests that meet a later, shorter hold: the request already kept stays as long.
fn asks() -> Vec<(&'static str, Vec<Step>)> {
    vec![
        (
            "a request for a long hold, then one for a shorter hold after it",
            vec![
                try_(A, M, 2),
                Step::Ask { lock: M },
                release(A, M),
                try_(B, M, 1),
                Step::Ask { lock: M },
                extend(B, M),
            ],
        ),
        (
            "semaphore holders asked, then a shorter one alone",
            vec![
                wait(A, S, 1, 2),
                wait(B, S, 1, 1),
                Step::Ask { lock: S },
                release(A, S),
                Step::Ask { lock: S },
                extend(B, S),
            ],
        ),
    ]
}

/// An operator forces a mutex open: held with and without waiters, kept past its deadline,
/// free; the holder then goes on as it believes.
fn forced() -> Vec<(&'static str, Vec<Step>)> {
    let force = Step::ForceUnlock { lock: M };
    vec![
        (
            "forced open while held, with a waiter then without",
            vec![
                force.clone(),
                try_(A, M, 2),
                wait(B, M, 1, 1),
                force.clone(),
                Step::Inspect { lock: M },
                extend(A, M),
                force.clone(),
                release(B, M),
                try_(C, M, 1),
                force.clone(),
                release(C, M),
            ],
        ),
        (
            "forced open when kept past its deadline for a paused waiter",
            vec![
                try_(A, M, 1),
                wait(B, M, 1, 1),
                Step::Pause { client: B },
                ADVANCE,
                force,
                Step::Resume { client: B },
                release(B, M),
                release(A, M),
            ],
        ),
    ]
}

/// Every scenario, by name.
pub(crate) fn all() -> Vec<(String, Vec<Step>)> {
    let mut out = stale_holders();
    out.extend(overtaken());
    for (name, steps) in mode_changes()
        .into_iter()
        .chain(leaving())
        .chain(limits())
        .chain(elections())
        .chain(restarts())
        .chain(lost())
        .chain(lost_grants())
        .chain(dead_queues())
        .chain(asks())
        .chain(forced())
        .chain(found())
    {
        out.push((name.to_owned(), steps));
    }
    out
}

/// Runs every scenario; the number run, or the first difference.
pub(crate) fn run(real: &mut crate::redis_side::Real) -> Result<usize, String> {
    let all = all();
    for (name, steps) in &all {
        crate::run(real, steps).map_err(|e| format!("scenario \"{name}\": {e}"))?;
    }
    Ok(all.len())
}
