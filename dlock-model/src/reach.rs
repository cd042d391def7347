//! Reachability checks (issue #44): for every fault the environment may inject, a `sometimes`
//! property that some run took it **with an effect** — a paused client resumed after the clock
//! moved, a lost reply's call was sent again and answered, a lost grant was made good by the
//! waiter's timer, a crashed waiter's entry was skipped, a restart lost a hold or an entry, a
//! restart from the lagging copy brought back one that had ended, and the election's observer
//! was shown an older leader. A property that holds only because its fault was never taken is
//! vacuous; `LockModel::reachable` names the checks a model must discover, and tests/check.rs and
//! tests/deep.rs fail when one is not.
//!
//! The events are bits of [`Ghost::events`](crate::model::Ghost::events), set by the step that
//! takes the effect and cleared by the next one: a state differs from its twin only right
//! after the event, which keeps the state space from doubling per check.

use stateright::Property;

use crate::model::{LockModel, State};
use crate::server::{Data, Ms, Token};

/// A paused client resumed after the clock moved while it held, waited or had a call out.
pub(crate) const EV_PAUSE: u16 = 1;
/// A lost reply's call was sent again and answered (the script ran twice).
pub(crate) const EV_LOST_REPLY: u16 = 1 << 1;
/// A waiter whose grant push was lost holds, by asking again.
pub(crate) const EV_LOST_PUSH: u16 = 1 << 2;
/// A crashed client's queue entry was skipped (a hand-off or an admission passed it by).
pub(crate) const EV_CRASH: u16 = 1 << 3;
/// A restart lost a hold or a queue entry that would still be there.
pub(crate) const EV_RESTART_LOST: u16 = 1 << 4;
/// A restart from the lagging copy brought back a hold or an entry that had ended or left.
pub(crate) const EV_RESTART_STALE: u16 = 1 << 5;
/// The observer read a leader older than one it had seen, and kept the newer.
pub(crate) const EV_OBSERVER_FILTERED: u16 = 1 << 6;
/// The native release (`DELIFEQ`, native.rs) deleted a hold.
pub(crate) const EV_NATIVE_RELEASED: u16 = 1 << 7;
/// The native release answered 0 and release.lua handed the lock to a waiter.
pub(crate) const EV_NATIVE_HANDED: u16 = 1 << 8;
/// The native release answered 0 and release.lua found the caller's lease expired.
pub(crate) const EV_NATIVE_EXPIRED: u16 = 1 << 9;
/// The native release answered 0 and release.lua found another holder.
pub(crate) const EV_NATIVE_TAKEN: u16 = 1 << 10;

/// `a paused client resumed after the clock moved (reachable)`.
pub const REACH_PAUSE: &str = "a paused client resumed after the clock moved (reachable)";
/// `a lost reply's call was sent again and answered (reachable)`.
pub const REACH_LOST_REPLY: &str = "a lost reply's call was sent again and answered (reachable)";
/// `a waiter whose grant was lost took the lock by asking again (reachable)`.
pub const REACH_LOST_PUSH: &str =
    "a waiter whose grant was lost took the lock by asking again (reachable)";
/// `a crashed waiter's entry was skipped (reachable)`.
pub const REACH_CRASH: &str = "a crashed waiter's entry was skipped (reachable)";
/// `a restart lost a hold or a queue entry (reachable)`.
pub const REACH_RESTART_LOST: &str = "a restart lost a hold or a queue entry (reachable)";
/// `a restart from the lagging copy brought back an ended hold or entry (reachable)`.
pub const REACH_RESTART_STALE: &str =
    "a restart from the lagging copy brought back an ended hold or entry (reachable)";
/// `the observer was shown an older leader and kept the newer (reachable)`.
pub const REACH_OBSERVER_FILTERED: &str =
    "the observer was shown an older leader and kept the newer (reachable)";

/// The reachability checks, as properties.
pub(crate) fn all() -> Vec<Property<LockModel>> {
    vec![
        Property::sometimes(REACH_PAUSE, |_, s: &State| event(s, EV_PAUSE)),
        Property::sometimes(REACH_LOST_REPLY, |_, s: &State| event(s, EV_LOST_REPLY)),
        Property::sometimes(REACH_LOST_PUSH, |_, s: &State| event(s, EV_LOST_PUSH)),
        Property::sometimes(REACH_CRASH, |_, s: &State| event(s, EV_CRASH)),
        Property::sometimes(REACH_RESTART_LOST, |_, s: &State| event(s, EV_RESTART_LOST)),
        Property::sometimes(REACH_RESTART_STALE, |_, s: &State| {
            event(s, EV_RESTART_STALE)
        }),
        Property::sometimes(REACH_OBSERVER_FILTERED, |_, s: &State| {
            event(s, EV_OBSERVER_FILTERED)
        }),
    ]
}

fn event(state: &State, bit: u16) -> bool {
    state.ghost.events & bit != 0
}

/// The holds (live at `now`) and queue entries of the model's lock in `data`.
fn present(data: &Data, now: Ms) -> Vec<Token> {
    let mut out: Vec<Token> = data
        .locks
        .get(&0)
        .filter(|h| h.live(now))
        .map(|h| h.token)
        .into_iter()
        .collect();
    out.extend(data.queues.get(&0).into_iter().flatten().map(|e| e.token));
    if let Some(lock) = data.shared.get(&0) {
        out.extend(
            lock.holders
                .iter()
                .filter(|(_, h)| now < h.deadline)
                .map(|(t, _)| *t),
        );
        out.extend(lock.queue.iter().map(|e| e.token));
    }
    out
}

/// A restart at `now` turned `before` (the data as it would be at `now` without it) into the
/// server's data now: the events it took.
pub(crate) fn observe_restart(state: &mut State, before: &Data) {
    let now = state.now;
    let had = present(before, now);
    let has = present(&state.server.data, now);
    if had.iter().any(|t| !has.contains(t)) {
        state.ghost.events |= EV_RESTART_LOST;
    }
    if has.iter().any(|t| !had.contains(t)) {
        state.ghost.events |= EV_RESTART_STALE;
    }
}

/// The clock moves: every paused client that holds, waits or has a call out is marked.
pub(crate) fn observe_tick(state: &mut State) {
    for (c, client) in state.clients.iter().enumerate() {
        let busy = !matches!(
            client.phase,
            crate::model::Phase::Idle | crate::model::Phase::Done
        );
        if client.paused && !client.dead && busy {
            state.ghost.paused_ticked |= 1 << c;
        }
    }
}

/// Client `c` resumes: a pause over a tick took effect.
pub(crate) fn observe_resume(state: &mut State, c: u8) {
    let bit = 1 << c;
    if state.ghost.paused_ticked & bit != 0 {
        state.ghost.events |= EV_PAUSE;
        state.ghost.paused_ticked &= !bit;
    }
}

/// Client `c` holds (its request's grant returned): if its grant push had been lost, the
/// timer made it good.
pub(crate) fn observe_hold(state: &mut State, c: u8) {
    let bit = 1 << c;
    if state.ghost.lost_grant & bit != 0 {
        state.ghost.events |= EV_LOST_PUSH;
        state.ghost.lost_grant &= !bit;
    }
}
