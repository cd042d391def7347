//! The stale holders of `scenarios.rs`: for every kind, a holder whose lease ended on a key
//! kept for waiters that are paused or dead, followed by each request it can still send; and a
//! holder overtaken by its waiter, whose requests then meet another owner's hold.

use super::{A, ADVANCE, B, C, E, M, RW, S, extend, fenced, guarded, release, try_, wait};
use crate::steps::{Lock, Step};

/// A holds `lock` (lease 1); B waits (lease 2) and C waits, then both stop (`dead`: die; else
/// pause); A's lease ends; the key (a shared lock's hash) is kept for them.
fn stale_holder(lock: Lock, dead: bool) -> Vec<Step> {
    let mut steps = match lock {
        M | E => vec![try_(A, lock, 1)],
        // All the permits; a writer.
        S | RW => vec![wait(A, lock, 3, 1)],
    };
    if lock == E {
        steps.push(Step::Publish { client: A });
    }
    steps.extend([wait(B, lock, 1, 2), wait(C, lock, 2, 1)]);
    steps.extend(if dead {
        [Step::Crash { client: B }, Step::Crash { client: C }]
    } else {
        [Step::Pause { client: B }, Step::Pause { client: C }]
    });
    steps.push(ADVANCE);
    steps
}

/// The stale holder's requests that leave it believing it holds, then `last`, then (paused
/// waiters) the waiters resume and the first of them renews and releases.
fn stale(lock: Lock, dead: bool, last: Step) -> Vec<Step> {
    let mut steps = stale_holder(lock, dead);
    steps.extend([Step::Ask { lock }, Step::Inspect { lock }, fenced(A, lock)]);
    match lock {
        M => steps.push(Step::Fence { client: A }),
        E => steps.extend([Step::Observe, Step::Publish { client: A }, Step::Observe]),
        _ => {}
    }
    steps.push(last);
    if !dead {
        steps.extend([
            Step::Resume { client: B },
            Step::Resume { client: C },
            Step::Inspect { lock },
            extend(B, lock),
            release(B, lock),
            release(C, lock),
        ]);
    }
    steps
}

/// Every kind's stale holder, with each last request it can send.
pub(super) fn stale_holders() -> Vec<(String, Vec<Step>)> {
    let mut out = Vec::new();
    for lock in [M, S, RW, E] {
        let mut lasts = vec![
            ("renews", extend(A, lock)),
            ("writes guarded", guarded(A, lock)),
            ("releases", release(A, lock)),
        ];
        match lock {
            E => lasts.push(("resigns", Step::Resign { client: A })),
            RW => lasts.extend([
                ("downgrades", Step::Downgrade { client: A }),
                ("upgrades", Step::Upgrade { client: A }),
            ]),
            _ => {}
        }
        for (what, last) in lasts {
            for dead in [false, true] {
                let waiters = if dead { "dead" } else { "paused" };
                out.push((
                    format!("a stale {lock:?} holder, its waiters {waiters}, {what}"),
                    stale(lock, dead, last.clone()),
                ));
            }
        }
    }
    out
}

/// A holder whose lease ended and whose waiter took over (it asked again by its timer): every
/// request of the stale holder meets another owner's hold.
pub(super) fn overtaken() -> Vec<(String, Vec<Step>)> {
    let mut out = Vec::new();
    for lock in [M, S, RW, E] {
        let first = match lock {
            M | E => try_(A, lock, 1),
            S | RW => wait(A, lock, 3, 1),
        };
        let mut lasts = vec![
            ("renews", extend(A, lock)),
            ("writes guarded", guarded(A, lock)),
            ("releases", release(A, lock)),
        ];
        if lock == RW {
            lasts.push(("downgrades", Step::Downgrade { client: A }));
        }
        for (what, last) in lasts {
            let mut steps = vec![first.clone(), wait(B, lock, 1, 1), ADVANCE];
            steps.extend([fenced(B, lock), fenced(A, lock), Step::Inspect { lock }]);
            match lock {
                M => steps.push(Step::Fence { client: A }),
                E => steps.extend([Step::Publish { client: B }, Step::Publish { client: A }]),
                _ => {}
            }
            steps.extend([last, Step::Observe]);
            out.push((
                format!("a {lock:?} holder overtaken by its waiter, then it {what}"),
                steps,
            ));
        }
    }
    out
}
