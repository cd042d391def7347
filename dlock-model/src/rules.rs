//! The step rules of issue #44: README promises that had no property. Each is checked on every
//! step that could break it (the server before the step, with what expired by then dropped,
//! against the server after it), records a break in [`Ghost::broken`](crate::model::Ghost),
//! and has a [`Mutant`](crate::Mutant) that it catches:
//!
//! * [`LEADER_BY_HOLDER`]: the leader record and its notices are written only by the current
//!   holder, with its own fence (`ElectionPublishSkipsLead`);
//! * [`READ_LIVE_LEADER`]: election_read.lua shows a leader only while its hold is live on the
//!   server with that fence (`ReadIgnoresDeadline`);
//! * [`OBSERVERS_NO_BACK`]: an observer never goes back to an older leader (`ObserverTakesEveryRead`);
//! * [`UPGRADE_AT_ONCE`]: an upgrade with anyone else holding or queued fails at once, and the
//!   sole reader with nobody queued is granted (`UpgradePastQueue`);
//! * [`HAND_OFF_OLDEST`]: a hand-off goes to the oldest live waiter, passing over only entries
//!   whose client is gone (`HandOffSkipsOldest`);
//! * [`OWNER_ONLY`]: no step changes a live hold but its owner's (`ExtendSkipsOwner`);
//! * [`FENCE_LIVE_ONCE`]: fence.lua answers only a live holder, with the fence kept with its
//!   hold, issued once (`FenceIgnoresDeadline`, `FenceReissued`);
//! * [`ONE_ENTRY`]: a request is queued at most once and never while it holds, retries
//!   included (`JoinScansNothing`);
//! * [`SET_LIMIT_AT_ONCE`]: `set_limit` takes effect in its step (`SetLimitKeepsHeavy`).

use stateright::Property;

use crate::model::{Kind, LockModel, State};
use crate::mutant::Mutant;
use crate::reach::EV_CRASH;
use crate::server::{Hold, LockRef, Ms, Op, ReleaseHow, Reply, Server, Token};

/// `the leader record is written by its holder`.
pub const LEADER_BY_HOLDER: &str = "the leader record is written by its holder";
/// `a read shows only the live leader`.
pub const READ_LIVE_LEADER: &str = "a read shows only the live leader";
/// `observers never go back`.
pub const OBSERVERS_NO_BACK: &str = "observers never go back";
/// `an upgrade with others fails at once`.
pub const UPGRADE_AT_ONCE: &str = "an upgrade with others fails at once";
/// `a hand-off goes to the oldest live waiter`.
pub const HAND_OFF_OLDEST: &str = "a hand-off goes to the oldest live waiter";
/// `only the owner changes its hold`.
pub const OWNER_ONLY: &str = "only the owner changes its hold";
/// `a fence is its live hold's, issued once`.
pub const FENCE_LIVE_ONCE: &str = "a fence is its live hold's, issued once";
/// `one entry per request`.
pub const ONE_ENTRY: &str = "one entry per request";
/// `set_limit takes effect at once`.
pub const SET_LIMIT_AT_ONCE: &str = "set_limit takes effect at once";

const B_LEADER: u32 = 1 << 15;
const B_READ: u32 = 1 << 16;
const B_OBSERVERS: u32 = 1 << 17;
const B_UPGRADE: u32 = 1 << 18;
const B_HAND_OFF: u32 = 1 << 19;
const B_OWNER: u32 = 1 << 20;
const B_FENCE: u32 = 1 << 21;
const B_SET_LIMIT: u32 = 1 << 22;

/// The rules, as properties.
pub(crate) fn all() -> Vec<Property<LockModel>> {
    vec![
        Property::always(LEADER_BY_HOLDER, |_, s: &State| ok(s, B_LEADER)),
        Property::always(READ_LIVE_LEADER, |_, s: &State| ok(s, B_READ)),
        Property::always(OBSERVERS_NO_BACK, |_, s: &State| ok(s, B_OBSERVERS)),
        Property::always(UPGRADE_AT_ONCE, |_, s: &State| ok(s, B_UPGRADE)),
        Property::always(HAND_OFF_OLDEST, |_, s: &State| ok(s, B_HAND_OFF)),
        Property::always(OWNER_ONLY, |_, s: &State| ok(s, B_OWNER)),
        Property::always(FENCE_LIVE_ONCE, |_, s: &State| ok(s, B_FENCE)),
        Property::always(ONE_ENTRY, |_, s: &State| one_entry(&s.server, s.now)),
        Property::always(SET_LIMIT_AT_ONCE, |_, s: &State| ok(s, B_SET_LIMIT)),
    ]
}

fn ok(state: &State, bit: u32) -> bool {
    state.ghost.broken & bit == 0
}

/// Checks one script step (`before` → `state.server`, at `state.now`) for the rules above,
/// and takes the reachability event of a crashed waiter skipped.
pub(crate) fn observe(
    model: &LockModel,
    state: &mut State,
    before: &Server,
    op: &Op,
    reply: &Reply,
) {
    let now = state.now;
    let mut found = before.clone();
    found.expire(now);
    let after = &state.server;
    let broken = leader_record(&found, after, now, (op, reply))
        | upgrade(&found, after, op, reply)
        | hand_off(model.kind, &found, after, now, op)
        | owner_only(&found, after, now, op)
        | fence(&found, after, now, (op, reply))
        | set_limit(after, op, reply);
    state.ghost.broken |= broken;
    if crashed_waiter_skipped(&found, after, now) {
        state.ghost.events |= EV_CRASH;
    }
}

/// Whether `token` holds the election's lock on `server` at `now`, its lease running, with
/// `fence` kept in its value.
fn leads(server: &Server, now: Ms, token: Token, fence: u64) -> bool {
    server
        .live_hold(0, now)
        .is_some_and(|h| h.token == token && h.fence == Some(fence))
}

/// Safety `the leader record is written by its holder` (README, "Leader election"): a publish
/// that writes or refreshes the record, or announces it (reply 1), comes from the token that
/// holds the election's lock on the server, its lease running, with the fence kept in that
/// hold; a resign deletes (and announces the vacancy of) only the caller's own record, while
/// the lock key still carries the caller's token and fence (election.lua reads the key, not
/// the deadline, for a resign: a leader whose lease ended with candidates queued may still
/// delete its own record, which no successor has replaced). Holds under every action, pauses
/// and restarts included: a leader paused past its lease never overwrites its successor's.
fn leader_record(found: &Server, after: &Server, now: Ms, (op, reply): (&Op, &Reply)) -> u32 {
    let changed = found.data.leaders.get(&0) != after.data.leaders.get(&0);
    let announced = matches!(reply, Reply::Int(1));
    let by_holder = match op {
        Op::ElectionPublish { token, fence, .. } => leads(found, now, *token, *fence),
        Op::ElectionResign { token, fence, .. } => {
            let key = found
                .data
                .locks
                .get(&0)
                .is_some_and(|h| h.token == *token && h.fence == Some(*fence));
            let own = found
                .data
                .leaders
                .get(&0)
                .is_some_and(|r| r.fence == *fence);
            key && own
        }
        _ => return 0,
    };
    if (changed || announced) && !by_holder {
        B_LEADER
    } else {
        0
    }
}

/// The observer's read of the election (election_read.lua) at `state.now`, on `before` (the
/// server as the read found it):
/// * safety `a read shows only the live leader`: the lock fence it reports is the live hold's
///   (0 when nobody holds, a key kept past its holder's deadline included), and a leader only
///   while the record is that live hold's (its fence, its holder's value);
/// * safety `observers never go back`: between two restarts, no read shows a leader older than
///   one shown before; and the leader the observer reports (election.rs `Observed`: a read's
///   leader taken only above the highest fence seen; a read without one ends the current
///   leader only once proved over) never has a smaller fence than one it reported. Holds under
///   every action, restarts from a lagging copy included, which do show older leaders to reads.
pub(crate) fn observe_read(model: &LockModel, state: &mut State, before: &Server, reply: &Reply) {
    let Reply::Leader {
        lock_fence,
        leader_fence,
        value,
    } = *reply
    else {
        return;
    };
    let now = state.now;
    let mut found = before.clone();
    found.expire(now);
    let hold = found.live_hold(0, now);
    let live_fence = hold.and_then(|h| h.fence).unwrap_or(0);
    let holder = hold.map(|h| client_of(h.token));
    if lock_fence != live_fence
        || (leader_fence > 0 && (leader_fence != live_fence || holder != Some(value)))
    {
        state.ghost.broken |= B_READ;
    }
    observer(
        model,
        state,
        lock_fence,
        (leader_fence > 0).then_some((leader_fence, value)),
    );
}

/// The client of a model token (`16c + r + 1`).
fn client_of(token: Token) -> u8 {
    u8::try_from(token.saturating_sub(1) / 16).unwrap_or(u8::MAX)
}

/// election.rs `Observed::read`, and the checks of `observers never go back` on it.
fn observer(model: &LockModel, state: &mut State, lock_fence: u64, leader: Option<(u64, u8)>) {
    let ghost = &mut state.ghost;
    let seen = &mut state.observer;
    match leader {
        Some((fence, value)) => {
            if fence < ghost.read_max {
                ghost.broken |= B_OBSERVERS;
            }
            ghost.read_max = ghost.read_max.max(fence);
            if fence <= seen.seen {
                if fence < seen.seen {
                    ghost.events |= crate::reach::EV_OBSERVER_FILTERED;
                }
                if model.mutant != Some(Mutant::ObserverTakesEveryRead) {
                    return;
                }
            }
            seen.seen = seen.seen.max(fence);
            seen.current = Some((fence, value));
            if fence < ghost.shown {
                ghost.broken |= B_OBSERVERS;
            }
            ghost.shown = ghost.shown.max(fence);
        }
        None => {
            // Dropped only when the read proves it over: its fence was issued before the read
            // (at most the counter then) and the lock holds another.
            let counter = state.server.data.counter;
            if seen
                .current
                .is_some_and(|(f, _)| f <= counter && f != lock_fence)
            {
                seen.current = None;
            }
        }
    }
}

/// Safety `an upgrade with others fails at once` (README, "Read-write lock": "an upgrade that
/// would have to wait (other readers, or anyone queued) fails at once"): rw_change.lua "up" by
/// a live reader that finds another live holder or anyone queued grants nothing, leaves the
/// reader's hold as it was and queues nothing; by the sole holder with nobody queued, it
/// grants the write hold in the same step. Holds under every action.
fn upgrade(found: &Server, after: &Server, op: &Op, reply: &Reply) -> u32 {
    let Op::RwChange {
        old, new, up: true, ..
    } = op
    else {
        return 0;
    };
    let Some(lock) = found.data.shared.get(&0) else {
        return 0;
    };
    let Some(held) = lock.holders.get(old).filter(|h| h.weight == 1) else {
        return 0;
    };
    if lock.holders.contains_key(new) {
        // A retried upgrade that was granted before: it reports that hold.
        return 0;
    }
    let granted = matches!(reply, Reply::Holds { .. });
    let others = lock.holders.len() > 1 || !lock.queue.is_empty();
    let then = after.data.shared.get(&0);
    let kept = then.and_then(|l| l.holders.get(old)) == Some(held);
    let writer = then.is_some_and(|l| l.holders.contains_key(new));
    let queued = then.is_some_and(|l| l.queue.iter().any(|e| e.token == *old || e.token == *new));
    let fine = if others {
        !granted && kept && !writer && !queued
    } else {
        granted && writer
    };
    if fine { 0 } else { B_UPGRADE }
}

/// Safety `a hand-off goes to the oldest live waiter` (README, "Fair, push-based waiting":
/// "release hands the lock to the oldest live waiter"; also when a lease ran out, by the
/// first script that finds the lock free): when a mutex passes to a queued request, every
/// entry older than it belonged to a client that is gone (no subscriber left), or is the
/// caller's own, leaving (a cancel, a wait that timed out). Holds under every action.
fn hand_off(kind: Kind, found: &Server, after: &Server, now: Ms, op: &Op) -> u32 {
    if kind.shared() {
        return 0;
    }
    let before = found.live_hold(0, now).map(|h| h.token);
    let Some(granted) = after
        .live_hold(0, now)
        .map(|h| h.token)
        .filter(|t| Some(*t) != before)
    else {
        return 0;
    };
    let queue = found
        .data
        .queues
        .get(&0)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let Some(at) = queue.iter().position(|e| e.token == granted) else {
        return 0;
    };
    let own = callers(op).unwrap_or_default();
    let live = |c| after.subscribed.contains(&(LockRef::Mutex(0), c));
    if queue[..at]
        .iter()
        .any(|e| live(e.client) && !own.contains(&e.token))
    {
        B_HAND_OFF
    } else {
        0
    }
}

/// The tokens a step acts for: its caller's (an extend batch: each item's).
fn callers(op: &Op) -> Option<Vec<Token>> {
    Some(match op {
        Op::Release { how, .. } if *how == ReleaseHow::Force => return None,
        Op::SetNxGet { token, .. }
        | Op::FencedFast { token, .. }
        | Op::Release { token, .. }
        | Op::NativeRelease { token, .. }
        | Op::Fence { token, .. }
        | Op::SharedRelease { token, .. }
        | Op::ElectionPublish { token, .. }
        | Op::ElectionResign { token, .. }
        | Op::Guarded { token, .. } => vec![*token],
        Op::Acquire { entry, .. } => vec![entry.token],
        Op::SharedAcquire { entry, .. } => vec![entry.token],
        Op::RwChange { old, .. } => vec![*old],
        Op::Extend { items } => items.iter().map(|i| i.token).collect(),
        Op::SetLimit { .. } | Op::Ask { .. } | Op::ElectionRead { .. } => Vec::new(),
        _ => return None,
    })
}

/// A hold as the rule compares it: token, end of lease, fence.
fn same(a: &Hold, b: &Hold) -> bool {
    (a.token, a.deadline, a.fence) == (b.token, b.deadline, b.fence)
}

/// Safety `only the owner changes its hold` (README, "Owner-checked": "release/extend never
/// touch a lock someone else owns"): a script step leaves every live hold of a token it does
/// not act for as it was — its holder, its deadline, its fence (a mutex's; each shared
/// holder's). Holds under every action (an operator's forced release aside, which the model's
/// clients do not send).
fn owner_only(found: &Server, after: &Server, now: Ms, op: &Op) -> u32 {
    let Some(callers) = callers(op) else {
        return 0;
    };
    let mutex_kept = found.live_hold(0, now).is_none_or(|h| {
        callers.contains(&h.token) || after.live_hold(0, now).is_some_and(|a| same(h, a))
    });
    let shared_kept = found.data.shared.get(&0).is_none_or(|lock| {
        lock.holders.iter().all(|(t, h)| {
            callers.contains(t)
                || after.data.shared.get(&0).and_then(|l| l.holders.get(t)) == Some(h)
        })
    });
    if mutex_kept && shared_kept {
        0
    } else {
        B_OWNER
    }
}

/// Safety `a fence is its live hold's, issued once` (README, "Fencing tokens": "never to a
/// holder whose lease ended", and "Retry-safe": "a retried fence request returns the same
/// fence"): a fence that fence.lua answers (alone, or in the fenced fast path's `MULTI`) is
/// the one kept with the caller's hold, live on the server at that step, and a hold that had a
/// fence is answered that fence. Holds under every action.
fn fence(found: &Server, after: &Server, now: Ms, (op, reply): (&Op, &Reply)) -> u32 {
    let (token, answered) = match (op, reply) {
        (Op::Fence { token, .. }, Reply::Int(f)) => (*token, *f),
        (
            Op::FencedFast {
                token, incr: false, ..
            },
            Reply::Multi { fence, .. },
        ) => (*token, *fence),
        _ => return 0,
    };
    let Some(answered) = u64::try_from(answered).ok().filter(|&f| f > 0) else {
        return 0;
    };
    let had = found
        .live_hold(0, now)
        .filter(|h| h.token == token)
        .and_then(|h| h.fence);
    let kept = after
        .live_hold(0, now)
        .is_some_and(|h| h.token == token && h.fence == Some(answered));
    if kept && had.is_none_or(|f| f == answered) {
        0
    } else {
        B_FENCE
    }
}

/// Safety `one entry per request` (README, "Retry-safe": "a retried acquire never takes two
/// holds"): a request's token is queued at most once, and never while it holds; a call sent
/// again after a lost reply included. A state predicate. Holds under every action.
fn one_entry(server: &Server, now: Ms) -> bool {
    let mut queued: Vec<Token> = server
        .data
        .queues
        .get(&0)
        .into_iter()
        .flatten()
        .map(|e| e.token)
        .collect();
    let mut holding: Vec<Token> = server
        .live_hold(0, now)
        .map(|h| h.token)
        .into_iter()
        .collect();
    if let Some(lock) = server.data.shared.get(&0) {
        queued.extend(lock.queue.iter().map(|e| e.token));
        holding.extend(
            lock.holders
                .iter()
                .filter(|(_, h)| now < h.deadline)
                .map(|(t, _)| *t),
        );
    }
    let count = queued.len();
    queued.sort_unstable();
    queued.dedup();
    count == queued.len() && !queued.iter().any(|t| holding.contains(t))
}

/// Safety `set_limit takes effect at once` (README, "Semaphore": "a raised limit admits the
/// waiters that now fit at once, and a lowered one takes nothing from the holders but fails at
/// once the queued requests that ask for more than it"): after shared_limit.lua the operator's
/// limit is stored, no queued request weighs more than it, and the head that remains does not
/// fit. (That it takes nothing from holders is `only the owner changes its hold`.) Holds under
/// every action.
fn set_limit(after: &Server, op: &Op, reply: &Reply) -> u32 {
    let Op::SetLimit { limit, .. } = op else {
        return 0;
    };
    if matches!(reply, Reply::Err(_)) {
        return 0;
    }
    let Some(lock) = after.data.shared.get(&0) else {
        return B_SET_LIMIT;
    };
    let stored = lock.limit.map(|(l, _)| l) == Some(*limit);
    let heavy = lock.queue.iter().any(|e| e.weight > *limit);
    let fits = lock
        .queue
        .first()
        .is_some_and(|head| lock.used() + head.weight <= *limit);
    if stored && !heavy && !fits {
        0
    } else {
        B_SET_LIMIT
    }
}

/// Whether the step passed by a crashed client's queue entry (reachability [`EV_CRASH`]): an
/// entry of a client with no subscriber left is gone from the queue and holds nothing.
fn crashed_waiter_skipped(found: &Server, after: &Server, now: Ms) -> bool {
    let gone = |lock, c| !after.subscribed.contains(&(lock, c));
    let mutex = found.data.queues.get(&0).into_iter().flatten().any(|e| {
        gone(LockRef::Mutex(0), e.client)
            && !after
                .data
                .queues
                .get(&0)
                .into_iter()
                .flatten()
                .any(|a| a.token == e.token)
            && after.live_hold(0, now).is_none_or(|h| h.token != e.token)
    });
    let shared = found.data.shared.get(&0).is_some_and(|lock| {
        lock.queue.iter().any(|e| {
            let then = after.data.shared.get(&0);
            gone(LockRef::Shared(0), e.client)
                && !then.is_some_and(|l| l.queue.iter().any(|a| a.token == e.token))
                && !then.is_some_and(|l| l.holders.contains_key(&e.token))
        })
    });
    mutex || shared
}
