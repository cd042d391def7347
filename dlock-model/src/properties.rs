//! The properties the checker holds the model to, each a named predicate over a [`State`].
//!
//! Safety properties are predicates of the state, or rules checked on every step that grants
//! (recorded in [`crate::model::Ghost::broken`]). Liveness is stated as **bounded-response
//! invariants checked with `always`** (stateright's `eventually` is not sound on the cycles
//! this model has): the clock only moves when no client has something due (a reply to read, a
//! fallback timer or a wait deadline that has come), so "before the clock moves, X has
//! happened" is a bound of zero ticks on a response; and "after this step, X holds" is a bound
//! of zero steps.
//!
//! Each property's doc names the environment actions it holds under. The model's assumptions
//! (what README's "What dlock does not promise" lists) are left out of a property by name:
//! a holder paused past its lease, and a hold lost by a restart or failover without
//! durability; [`EXCLUSIVE_AS_SEEN`] is the property without them, which the checker is
//! expected to break.

use stateright::Property;

use crate::server::{Data, ExtendItem, LockRef, Ms, Op, RW_LIMIT, Reply, Server, Token};
use crate::state::{Kind, LEASE, LockModel, Phase, State};

/// A grant above the limit in force.
const WITHIN_LIMIT: u32 = 1;
/// A fence not above an earlier grant's.
const FENCES_INCREASE: u32 = 1 << 1;
/// A grant returned whose lease the server had given away.
const NO_GIVEN_AWAY: u32 = 1 << 2;
/// A grant ahead of an older queued request.
const QUEUE_HEAD_FIRST: u32 = 1 << 3;
/// A live queue head that fits, left waiting while the clock moves.
const FITTING_HEAD: u32 = 1 << 4;
/// A request left the queue and a fitting one behind it was not admitted in that step.
const LEAVING_READMITS: u32 = 1 << 5;
/// A free lock with live waiters while the clock moves.
const DEAD_HOLDER: u32 = 1 << 6;
/// A release left a dead client's entry at the head.
const DEAD_HEAD: u32 = 1 << 7;
/// A guarded write applied for a token that does not hold the lock on the server then.
const GUARDED_BY_HOLDER: u32 = 1 << 8;
/// A guarded write of an exclusive hold applied with a smaller fence than the data holds.
const GUARDED_FENCES: u32 = 1 << 9;
/// A release request changed a hold, a deadline, a queue, a fence or the protected data.
const ASK_NO_HOLD_CHANGED: u32 = 1 << 10;
/// A renewal answered "asked" to a token that held the lock at no release request.
const ASK_TOLD_ONLY_ASKED: u32 = 1 << 11;
/// A renewal of an asked holder that held the lock did not renew it.
const ASK_KEEPS_LEASE: u32 = 1 << 12;
/// The first renewal of an asked holder since the request did not answer "asked".
const ASK_TOLD_NEXT: u32 = 1 << 13;
/// Safety `a kept key outlives its holder by at most one lease` broken (issue #35).
const KEPT_KEY_BOUNDED: u32 = 1 << 14;
/// Safety `a mutex queue never outlives its kept key` broken (issue #44).
const QUEUE_BOUNDED: u32 = 1 << 15;

/// The name of the property a paused holder breaks, as README says (expected counterexample).
pub const EXCLUSIVE_AS_SEEN: &str = "exclusive as seen by clients (expected to fail: pauses)";

/// The name of the reachability check of the guarded write: some run reaches a refused one
/// (a stale holder's), so that `guarded write by the holder` does not hold vacuously. A
/// discovery is an example, not a counterexample; the runs with guarded writes and pauses or
/// restarts require one.
pub const GUARDED_REFUSED: &str = "a guarded write refused (reachable)";

/// The name of a reachability check of the release request: some renewal answers "asked", so
/// that `only an asked holder is told`, `an asked holder keeps its lease` and `an asked holder
/// is told at its next renewal` do not hold vacuously. The runs with requests and renewals
/// require one.
pub const ASK_TOLD: &str = "a renewal answered asked (reachable)";

/// The name of the other reachability check of the release request: a holder told it was
/// asked gives the lock back, and the lock goes on to others (whom the request must not
/// reach). The runs with a holder that yields require one.
pub const ASK_YIELDED: &str = "an asked holder gave the lock back (reachable)";

/// Every property, by name.
pub(crate) fn all() -> Vec<Property<LockModel>> {
    vec![
        Property::always("exclusive", exclusive),
        Property::always(EXCLUSIVE_AS_SEEN, exclusive_as_seen),
        Property::always("writer alone", writer_alone),
        Property::always("within limit", within_limit),
        Property::always("fences increase", fences_increase),
        Property::always("no given-away grant", no_given_away_grant),
        Property::always("no foreign write", no_foreign_write),
        Property::always("queue head first", queue_head_first),
        Property::always("fitting head admitted", fitting_head_admitted),
        Property::always("leaving re-admits", leaving_readmits),
        Property::always("dead holder handed on", dead_holder_handed_on),
        Property::always("dead head dropped", dead_head_dropped),
        Property::always(KEPT_KEY, kept_key_bounded),
        Property::always(QUEUE_KEPT, queue_bounded),
        Property::sometimes(KEPT_REFUSED, kept_refused),
        Property::always("limit persists", limit_persists),
        Property::always("guarded write by the holder", guarded_by_holder),
        Property::always("guarded fences never decrease", guarded_fences),
        Property::sometimes(GUARDED_REFUSED, guarded_refused),
        Property::always("a release request changes no hold", ask_changes_no_hold),
        Property::always("only an asked holder is told", told_only_if_asked),
        Property::always("an asked holder keeps its lease", asked_keeps_lease),
        Property::always(
            "an asked holder is told at its next renewal",
            asked_told_next,
        ),
        Property::sometimes(ASK_TOLD, ask_told),
        Property::sometimes(ASK_YIELDED, ask_yielded),
    ]
}

/// The name of the kept key's property (issue #35).
pub(crate) const KEPT_KEY: &str = "a kept key outlives its holder by at most one lease";

/// The name of the kept key's reachability check (issue #35): a newcomer's `SET NX` is refused
/// by a key kept past its holder's deadline, so that `a kept key outlives its holder by at most
/// one lease` and `queue head first` are not met only because no key was ever kept. The mutex
/// runs with three requests or more require one.
pub const KEPT_REFUSED: &str = "a kept key refused a newcomer (reachable)";

fn kept_refused(_: &LockModel, state: &State) -> bool {
    state.ghost.kept_refused
}

/// Safety (issue #35): a mutex's lock key whose holder's lease ran out exists only while
/// callers are queued, and Redis drops it at most one lease (the model's) past the holder's
/// deadline; a live hold's key expires with its lease, or, while callers wait, at most one
/// lease later. So a key kept for callers who all died or left is gone one lease after the
/// lease it outlived. Checked after every step (`observe_kept`), since a key expires between
/// steps.
fn kept_key_bounded(_: &LockModel, state: &State) -> bool {
    ok(state, KEPT_KEY_BOUNDED)
}

/// The name of the mutex queue's bound (issue #44).
pub(crate) const QUEUE_KEPT: &str = "a mutex queue never outlives its kept key";

/// Safety (issue #44): a mutex queue has an expiry, and lives only while the lock key kept for
/// it does, no longer (so, by [`KEPT_KEY`], at most one lease past its holder's deadline): the
/// entries of waiters that all died go with the key instead of staying forever. A live waiter
/// keeps both by asking again. Holds under every action. Checked after every step
/// (`observe_kept`).
fn queue_bounded(_: &LockModel, state: &State) -> bool {
    ok(state, QUEUE_BOUNDED)
}

/// Records a break of [`KEPT_KEY`] or [`QUEUE_KEPT`] in the server as it is now.
pub(crate) fn observe_kept(state: &mut State) {
    let now = state.now;
    let server = &state.server;
    let queued = server.data.queues.get(&0).is_some_and(|q| !q.is_empty());
    let bounded = server
        .data
        .locks
        .get(&0)
        .filter(|h| now < h.expires)
        .is_none_or(|h| {
            let within = h.expires <= h.deadline + LEASE;
            let flagged = h.waiting || h.expires == h.deadline;
            within && flagged && (h.live(now) || queued)
        });
    if !bounded {
        state.ghost.broken |= KEPT_KEY_BOUNDED;
    }
    let queue_expires = server.data.queue_expires.get(&0).copied();
    let live_queue = queued && queue_expires.is_none_or(|at| now < at);
    let key = server.data.locks.get(&0).filter(|h| now < h.expires);
    let within = match (queue_expires, key) {
        (Some(at), Some(hold)) => at <= hold.expires,
        _ => false,
    };
    if live_queue && !within {
        state.ghost.broken |= QUEUE_BOUNDED;
    }
}

fn ok(state: &State, bit: u32) -> bool {
    state.ghost.broken & bit == 0
}

/// Safety: every grant leaves the live holders' permits within the limit in force (the
/// handles', or the operator's once `set_limit` ran; lowering takes nothing from holders).
/// Holds under every environment action.
fn within_limit(_: &LockModel, state: &State) -> bool {
    ok(state, WITHIN_LIMIT)
}

/// Safety: a later grant has a larger fence (fences kept with a hold, and the fenced fast
/// path's plain `INCR`). Holds under every action, restarts and failovers to a lagging
/// replica included (the floor at the server clock); not under data rolled back under an
/// open connection (an assumption, see `tests/check.rs`).
fn fences_increase(_: &LockModel, state: &State) -> bool {
    ok(state, FENCES_INCREASE)
}

/// Safety: a client never returns a grant whose lease the server already gave away (or that
/// ran out), unless it was paused after the server's check or a restart lost the grant.
/// Holds under every action with those exemptions.
fn no_given_away_grant(_: &LockModel, state: &State) -> bool {
    ok(state, NO_GIVEN_AWAY)
}

/// Safety: a script never writes to a key holding a type or format dlock could not have
/// written (E1). Holds under every action, another program's writes included.
fn no_foreign_write(_: &LockModel, state: &State) -> bool {
    !state.server.wrote_foreign
}

/// Safety (fairness): nobody is granted ahead of an older queued request; a RwLock reader
/// never passes a queued writer. Holds under every action.
fn queue_head_first(_: &LockModel, state: &State) -> bool {
    ok(state, QUEUE_HEAD_FIRST)
}

/// Liveness (bounded): a request that fits and has nobody ahead of it is admitted before the
/// clock moves, not after an unrelated lease. Holds under every action (a head whose client
/// crashed or was paused during its wait is exempt).
fn fitting_head_admitted(_: &LockModel, state: &State) -> bool {
    ok(state, FITTING_HEAD)
}

/// Liveness (bounded): a request that leaves the queue (wait timeout, cancel) leaves no
/// fitting request behind it waiting: they are admitted in the same step (S1). Holds under
/// every action.
fn leaving_readmits(_: &LockModel, state: &State) -> bool {
    ok(state, LEAVING_READMITS)
}

/// Liveness (bounded): a lock whose holder died (or whose lease ran out) is granted to the
/// queue head by the end of that lease, when a running client waits for it. Holds under every
/// action (a waiter paused during its wait is exempt: its timer runs late).
fn dead_holder_handed_on(_: &LockModel, state: &State) -> bool {
    ok(state, DEAD_HOLDER)
}

/// Liveness (bounded): after a release, no crashed client's entry heads the queue (S2: a head
/// that does not fit and whose client is gone is dropped). Holds under every action.
fn dead_head_dropped(_: &LockModel, state: &State) -> bool {
    ok(state, DEAD_HEAD)
}

/// Safety: a guarded write is applied only for a holder that holds the lock on the server at
/// that step, by the server's clock (a mutex's live value is its token; a shared holder's
/// deadline is later than now). Holds under every action, pauses and restarts included: a
/// holder paused past its lease, or whose hold a restart lost, writes nothing.
fn guarded_by_holder(_: &LockModel, state: &State) -> bool {
    ok(state, GUARDED_BY_HOLDER)
}

/// Safety, the consequence for the data: a guarded write of an exclusive hold (a mutex, a
/// RwLock writer) carries a fence no smaller than any write the lock's data holds, so the
/// fences a store receives from one lock's holders never decrease. (A semaphore's holders,
/// and readers, write side by side in any order.) Holds under every action the model takes
/// (a restart from a lagging copy takes the data back with the hold).
fn guarded_fences(_: &LockModel, state: &State) -> bool {
    ok(state, GUARDED_FENCES)
}

/// Reachability (an example is wanted, see [`GUARDED_REFUSED`]): a guarded write was refused.
fn guarded_refused(_: &LockModel, state: &State) -> bool {
    state.ghost.refused_write
}

/// Safety: a release request (ask.lua) changes no hold: every holder, deadline, queue entry,
/// fence, stored limit and protected write is as it was; only the lock's ask key changes.
/// Holds under every action.
fn ask_changes_no_hold(_: &LockModel, state: &State) -> bool {
    ok(state, ASK_NO_HOLD_CHANGED)
}

/// Safety: only a holder that was asked is told: a renewal answers "asked" only to a token that
/// held the lock on the server when some release request ran. A later holder of the same lock
/// (a new token: a hand-off, a new acquire, a RwLock mode change) is never told by an earlier
/// request. Holds under every action, restarts from a lagging copy included.
fn told_only_if_asked(_: &LockModel, state: &State) -> bool {
    ok(state, ASK_TOLD_ONLY_ASKED)
}

/// Safety: an asked holder keeps its lease. A client whose hold was asked, and which believes it
/// holds by its own count (its lease, counted from when it sent the call that granted or
/// renewed it, has not run out), holds the lock on the server: a holder that ignores the
/// request, renewing on time or not at all, keeps the lock to the end of its lease. And each
/// renewal of an asked token, sent while it holds on the server, renews it (answers 1 or 2, and
/// its lease runs from then). Holds under every action the release request's models take,
/// pauses and lost replies included (a paused holder's own count runs out with its lease);
/// not under a rollback, which takes holds away under open connections.
fn asked_keeps_lease(model: &LockModel, state: &State) -> bool {
    ok(state, ASK_KEEPS_LEASE) && asked_believers_hold(model, state)
}

/// Every client that believes it holds a token that was asked holds the lock on the server.
/// (A RwLock mode change in flight is left out: its old token's hold ends with the step.)
fn asked_believers_hold(model: &LockModel, state: &State) -> bool {
    if state.ghost.asked.is_empty() {
        return true;
    }
    let live = live_holders(model.kind, &state.server, state.now);
    state.clients.iter().all(|c| {
        let (token, until) = match (&c.phase, c.held) {
            (Phase::Holding { token, until, .. }, _) => (*token, *until),
            (Phase::InFlight { op, .. }, Some(held)) if !matches!(op, Op::RwChange { .. }) => {
                (held.token, held.until)
            }
            _ => return true,
        };
        let believes = !c.dead && c.epoch == state.server.epoch && state.now < until;
        !believes || !state.ghost.asked.contains(&token) || live.iter().any(|h| h.0 == token)
    })
}

/// Liveness (bounded: one renewal): an asked holder is told at its next renewal — the first
/// renewal of its hold after the request answers "asked" (the request outlives the lease it
/// found, and a renewal on time comes before that lease ends). Holds under every action but
/// restarts and rollbacks, which may lose the request with the data (a pending request is
/// forgotten there), and foreign data at the ask key (not among the model's actions).
fn asked_told_next(_: &LockModel, state: &State) -> bool {
    ok(state, ASK_TOLD_NEXT)
}

/// Reachability (an example is wanted, see [`ASK_TOLD`]).
fn ask_told(_: &LockModel, state: &State) -> bool {
    state.ghost.told
}

/// Reachability (an example is wanted, see [`ASK_YIELDED`]).
fn ask_yielded(_: &LockModel, state: &State) -> bool {
    state.ghost.yielded
}

/// The clients that hold by their own count now, and whether each is a writer. `as_seen`
/// also counts a paused holder whose lease ran out (it cannot have noticed) and a holder whose
/// grant a restart lost.
fn believers(state: &State, as_seen: bool) -> impl Iterator<Item = bool> + '_ {
    state.clients.iter().filter_map(move |c| {
        let (until, writer) = match (&c.phase, c.held) {
            (Phase::Holding { until, writer, .. }, _) => (*until, *writer),
            (Phase::InFlight { .. }, Some(held)) => (held.until, held.writer),
            _ => return None,
        };
        let live = state.now < until && c.epoch == state.server.epoch;
        (!c.dead && (live || (as_seen && c.paused))).then_some(writer)
    })
}

/// Safety: never two live exclusive holders (mutex, election leader). Holds under: the clock,
/// delayed/lost pushes, lost replies, crashes; pauses and restarts except for the holders they
/// make stale (README: a paused holder outliving its lease; a failover without durability).
fn exclusive(model: &LockModel, state: &State) -> bool {
    model.kind.shared() || believers(state, false).count() <= 1
}

/// Expected counterexample: the same without the assumptions. A holder paused past its lease
/// still believes it holds when it resumes (README "What dlock does not promise").
fn exclusive_as_seen(model: &LockModel, state: &State) -> bool {
    model.kind.shared() || believers(state, true).count() <= 1
}

/// Safety: a RwLock writer holds alone. Holds under the same actions as `exclusive`.
fn writer_alone(model: &LockModel, state: &State) -> bool {
    if model.kind != Kind::RwLock {
        return true;
    }
    let holders: Vec<bool> = believers(state, false).collect();
    !holders.contains(&true) || holders.len() == 1
}

/// Liveness (bounded): a limit once set stays in force while anyone holds or waits: the
/// stored limit is the operator's (once set) or the handles'. Holds under every action; a
/// restart takes the limit in force back to what the server keeps (an operator's limit lost
/// with the data is the assumption of a failover without durability).
fn limit_persists(model: &LockModel, state: &State) -> bool {
    if !model.kind.shared() {
        return true;
    }
    let Some(lock) = state.server.data.shared.get(&0) else {
        return true;
    };
    let busy = !lock.queue.is_empty() || lock.holders.values().any(|h| state.now < h.deadline);
    !busy || lock.limit.map(|(l, _)| l) == Some(state.ghost.limit)
}

/// Live holders of the model's lock on `server` at `now`: `(token, weight)`.
fn live_holders(kind: Kind, server: &Server, now: u64) -> Vec<(Token, u32)> {
    if kind.shared() {
        server
            .data
            .shared
            .get(&0)
            .map(|l| {
                l.holders
                    .iter()
                    .filter(|(_, h)| now < h.deadline)
                    .map(|(&t, h)| (t, h.weight))
                    .collect()
            })
            .unwrap_or_default()
    } else {
        server
            .data
            .locks
            .get(&0)
            .filter(|h| now < h.deadline)
            .map(|h| vec![(h.token, 1)])
            .unwrap_or_default()
    }
}

/// The queue of the model's lock: `(token, client, weight)`, oldest first.
fn queue(kind: Kind, server: &Server) -> Vec<(Token, u8, u32)> {
    if kind.shared() {
        server
            .data
            .shared
            .get(&0)
            .map(|l| {
                l.queue
                    .iter()
                    .map(|e| (e.token, e.client, e.weight))
                    .collect()
            })
            .unwrap_or_default()
    } else {
        server
            .data
            .queues
            .get(&0)
            .map(|q| q.iter().map(|e| (e.token, e.client, 1)).collect())
            .unwrap_or_default()
    }
}

/// The fences kept with the live holds: `(token, fence)`.
fn fences(kind: Kind, server: &Server, now: u64) -> Vec<(Token, u64)> {
    if kind.shared() {
        server
            .data
            .shared
            .get(&0)
            .map(|l| {
                l.holders
                    .iter()
                    .filter(|(_, h)| now < h.deadline)
                    .map(|(&t, h)| (t, h.fence))
                    .collect()
            })
            .unwrap_or_default()
    } else {
        server
            .data
            .locks
            .get(&0)
            .filter(|h| now < h.deadline)
            .and_then(|h| h.fence.map(|f| vec![(h.token, f)]))
            .unwrap_or_default()
    }
}

/// Whether the head of the queue fits now (shared kinds): `(fits, head's client)`.
fn head_fits(state: &State) -> Option<(bool, u8)> {
    let lock = state.server.data.shared.get(&0)?;
    let head = lock.queue.first()?;
    let limit = lock.limit.map(|(l, _)| l)?;
    let used: u32 = lock
        .holders
        .values()
        .filter(|h| state.now < h.deadline)
        .map(|h| h.weight)
        .sum();
    Some((used + head.weight <= limit, head.client))
}

/// A fence granted now: it must exceed every fence granted before (safety `fences increase`;
/// holds under every action, restarts included: the floor at the server clock).
pub(crate) fn observe_fence(state: &mut State, fence: u64, _incr: bool) {
    if fence <= state.ghost.max_fence {
        state.ghost.broken |= FENCES_INCREASE;
    }
    state.ghost.max_fence = state.ghost.max_fence.max(fence);
}

/// The uncontended acquire kept a lock it took while callers were queued.
pub(crate) fn barged(state: &mut State) {
    state.ghost.broken |= QUEUE_HEAD_FIRST;
}

/// Checks one server step (`before` → `state.server`) for the rules of a grant:
/// * safety `within limit`: a new grant leaves the live holders' weight within the limit in
///   force (holds under every action);
/// * safety `fences increase`: every fence newly kept with a hold exceeds all before;
/// * `queue head first`: nobody is granted ahead of an older queued request (holds under
///   every action; the uncontended `SET NX` is checked where the client decides, see
///   client.rs `fast`);
/// * liveness `leaving re-admits`: after a request leaves the queue (its last attempt, or a
///   cancel), the head that remains does not fit (holds under every action);
/// * liveness `dead head dropped`: after a release, no gone client's entry heads the queue.
pub(crate) fn observe_step(
    model: &LockModel,
    state: &mut State,
    before: &Server,
    op: &Op,
    reply: &Reply,
) {
    let kind = model.kind;
    let now = state.now;
    let after = &state.server;
    let old: Vec<(Token, u32)> = live_holders(kind, before, now);
    let new: Vec<(Token, u32)> = live_holders(kind, after, now)
        .into_iter()
        .filter(|h| !old.contains(h))
        .collect();
    let changed_to = match op {
        Op::RwChange { new, .. } => Some(*new),
        _ => None,
    };
    let provisional = matches!(op, Op::SetNxGet { .. } | Op::FencedFast { .. });
    let mut broken = 0;
    if !new.is_empty() {
        let used: u32 = live_holders(kind, after, now).iter().map(|h| h.1).sum();
        let limit = if kind == Kind::RwLock {
            RW_LIMIT
        } else if kind.shared() {
            state.ghost.limit
        } else {
            1
        };
        if used > limit {
            broken |= WITHIN_LIMIT;
        }
        let queued_before = queue(kind, before);
        let queued_after = queue(kind, after);
        for (token, _) in &new {
            if Some(*token) == changed_to || provisional {
                continue;
            }
            let ahead: Vec<Token> = match queued_before.iter().position(|e| e.0 == *token) {
                Some(at) => queued_before[..at].iter().map(|e| e.0).collect(),
                None => queued_before.iter().map(|e| e.0).collect(),
            };
            if queued_after.iter().any(|e| ahead.contains(&e.0)) {
                broken |= QUEUE_HEAD_FIRST;
            }
        }
    }
    let old_fences = fences(kind, before, now);
    let mut new_fences: Vec<u64> = fences(kind, after, now)
        .into_iter()
        .filter(|f| !old_fences.contains(f))
        .map(|(_, f)| f)
        .collect();
    new_fences.sort_unstable();
    let leaving = match op {
        Op::SharedAcquire {
            mode: crate::Mode::Last,
            ..
        } => matches!(reply, Reply::Busy { .. }),
        Op::SharedRelease { leaving, .. } => leaving.is_some(),
        _ => false,
    };
    let released = matches!(op, Op::SharedRelease { .. });
    if let (Op::Guarded { token, fence, .. }, Reply::Applied) = (op, reply) {
        broken |= guarded_write(kind, before, now, *token, *fence);
    }
    if matches!((op, reply), (Op::Guarded { .. }, Reply::NotApplied { .. })) {
        state.ghost.refused_write = true;
    }
    state.ghost.broken |= broken;
    let live: Vec<Token> = old.iter().map(|h| h.0).collect();
    observe_ask(kind, state, &live, before, (op, reply));
    for fence in new_fences {
        observe_fence(state, fence, false);
    }
    crate::rules::observe(model, state, before, op, reply);
    if leaving && head_fits(state).is_some_and(|(fits, _)| fits) {
        state.ghost.broken |= LEAVING_READMITS;
    }
    if released
        && head_fits(state).is_some_and(|(_, client)| {
            !state
                .server
                .subscribed
                .contains(&(LockRef::Shared(0), client))
        })
    {
        state.ghost.broken |= DEAD_HEAD;
    }
}

/// An applied guarded write of `token` with `fence` on the model's lock, judged on the server
/// as it was before the step (`before`, at `now`): the bits of the rules it broke.
/// * safety `guarded write by the holder`: `token` holds the lock on the server now;
/// * safety `guarded fences never decrease`: the write of an exclusive hold carries a fence no
///   smaller than every fence the lock's data holds.
fn guarded_write(kind: Kind, before: &Server, now: u64, token: Token, fence: u64) -> u32 {
    let mut broken = 0;
    if !live_holders(kind, before, now).iter().any(|h| h.0 == token) {
        broken |= GUARDED_BY_HOLDER;
    }
    let exclusive = match kind {
        Kind::Semaphore => false,
        Kind::RwLock => before
            .data
            .shared
            .get(&0)
            .and_then(|l| l.holders.get(&token))
            .is_some_and(|h| h.weight == RW_LIMIT),
        Kind::Mutex | Kind::FencedMutex | Kind::Election => true,
    };
    let largest = before
        .data
        .written
        .get(&kind.lock())
        .and_then(|w| w.iter().map(|w| w.1).max())
        .unwrap_or(0);
    if exclusive && fence < largest {
        broken |= GUARDED_FENCES;
    }
    broken
}

/// The release request's rules on one step (`before` → `state.server`, at `state.now`):
/// * safety `a release request changes no hold`: ask.lua leaves every key but the ask key as
///   it found it (what expired by now aside);
/// * safety `only an asked holder is told`: a renewal answers "asked" only to a token that
///   held the lock when a request ran;
/// * safety `an asked holder keeps its lease`: the renewal of an asked token that holds is a
///   renewal;
/// * liveness `an asked holder is told at its next renewal`: the first renewal of an asked
///   hold answers "asked".
///
/// `live`: the holders before the step. A hold that ended (by the server's clock) before this
/// step is no longer owed an answer.
fn observe_ask(
    kind: Kind,
    state: &mut State,
    live: &[Token],
    before: &Server,
    step: (&Op, &Reply),
) {
    let (op, reply) = step;
    let now = state.now;
    state.ghost.pending.retain(|t| live.contains(t));
    match (op, reply) {
        (Op::Ask { .. }, _) => {
            let mut found = before.clone();
            found.expire(now);
            if !same_but_asked(&found.data, &state.server.data) {
                state.ghost.broken |= ASK_NO_HOLD_CHANGED;
            }
            if matches!(reply, Reply::Int(_)) {
                state.ghost.asked.extend(live.iter().copied());
                state.ghost.pending.extend(live.iter().copied());
            }
        }
        (Op::Extend { items }, Reply::Extended(results)) => {
            for (item, &result) in items.iter().zip(results) {
                let held = live.contains(&item.token);
                state.ghost.broken |= renewal(kind, state, item, result, held);
            }
        }
        _ => {}
    }
}

/// One renewal of `item` answered `result`, by a token that held before the step (`held`):
/// the bits of the rules it broke; the ghost learns who was told.
fn renewal(kind: Kind, state: &mut State, item: &ExtendItem, result: i64, held: bool) -> u32 {
    let ghost = &mut state.ghost;
    let token = item.token;
    let mut broken = 0;
    if result == 2 {
        ghost.told = true;
        if !ghost.asked.contains(&token) {
            broken |= ASK_TOLD_ONLY_ASKED;
        }
    }
    if result == 1 && ghost.pending.contains(&token) {
        broken |= ASK_TOLD_NEXT;
    }
    if matches!(result, 1 | 2) {
        ghost.pending.remove(&token);
    }
    if held && ghost.asked.contains(&token) {
        let deadline = deadline(kind, &state.server, token);
        if !matches!(result, 1 | 2) || deadline != Some(state.now + item.lease) {
            broken |= ASK_KEEPS_LEASE;
        }
    }
    broken
}

/// The deadline of `token`'s hold of the model's lock on `server`, if it holds.
fn deadline(kind: Kind, server: &Server, token: Token) -> Option<Ms> {
    if kind.shared() {
        let lock = server.data.shared.get(&0)?;
        lock.holders.get(&token).map(|h| h.deadline)
    } else {
        let hold = server.data.locks.get(&0)?;
        (hold.token == token).then_some(hold.deadline)
    }
}

/// Whether `a` and `b` hold the same, the release requests apart.
fn same_but_asked(a: &Data, b: &Data) -> bool {
    let Data {
        locks,
        queues,
        queue_expires,
        shared,
        leaders,
        counter,
        foreign,
        written,
        fenced,
        asked: _,
    } = a;
    *locks == b.locks
        && *queues == b.queues
        && *queue_expires == b.queue_expires
        && *shared == b.shared
        && *leaders == b.leaders
        && *counter == b.counter
        && *foreign == b.foreign
        && *written == b.written
        && *fenced == b.fenced
}

/// A holder told it was asked gives the lock back (reachability [`ASK_YIELDED`]).
pub(crate) fn observe_yield(state: &mut State) {
    state.ghost.yielded = true;
}

/// A restart or a rollback may lose release requests with the rest of the data (no
/// durability, or a lagging copy): what was owed an answer is not any more. Whom a request
/// reached stays recorded (`only an asked holder is told` holds across them).
pub(crate) fn observe_lost_data(state: &mut State) {
    state.ghost.pending.clear();
}

/// Before the clock moves (every client's due step taken):
/// * liveness `fitting head admitted` (shared): a queue head of a running client that fits
///   has been admitted — it does not wait for an unrelated lease to end. Holds under every
///   action (a head whose client crashed, or was paused during its wait, is exempt: its
///   timer cannot run, or runs late by the pause);
/// * liveness `dead holder handed on` (mutex, election): a lock whose holder died or
///   expired is held by a queued request by the end of that holder's lease, when any queued
///   client is running.
pub(crate) fn observe_tick(model: &LockModel, state: &mut State) {
    // A queued entry whose client runs and waits for it (an entry restored by a restart from
    // a lagging copy may belong to a request that is over: nobody's timer runs for it), and
    // was not paused during this request (its timer then runs late by the pause).
    let waits = |c: u8, token: Token| {
        let client = &state.clients[usize::from(c)];
        !client.paused
            && !client.stale
            && !client.dead
            && client.started > 0
            && LockModel::token(c, client.started - 1) == token
            && matches!(client.phase, Phase::Waiting { .. })
    };
    if model.kind.shared() {
        let head = state
            .server
            .data
            .shared
            .get(&0)
            .and_then(|l| l.queue.first().map(|e| (e.client, e.token)));
        if let (Some((true, _)), Some((c, token))) = (head_fits(state), head)
            && waits(c, token)
        {
            state.ghost.broken |= FITTING_HEAD;
        }
    } else {
        let free = live_holders(model.kind, &state.server, state.now).is_empty();
        let waiting = queue(model.kind, &state.server)
            .iter()
            .any(|&(token, c, _)| waits(c, token));
        if free && waiting {
            state.ghost.broken |= DEAD_HOLDER;
        }
    }
}

/// A client returns a grant of `token` (safety `no given-away grant`): the server still
/// has it as a live holder, unless the client was paused since its request began or a
/// restart came in between. Holds under every action.
pub(crate) fn observe_return(model: &LockModel, state: &mut State, c: u8, token: Token) {
    let client = &state.clients[usize::from(c)];
    if client.stale || client.epoch != state.server.epoch {
        return;
    }
    let live = live_holders(model.kind, &state.server, state.now)
        .iter()
        .any(|h| h.0 == token);
    if !live {
        state.ghost.broken |= NO_GIVEN_AWAY;
    }
}
