//! The native release (issue #48): on a server with `DELIFEQ` (Valkey 9; Redis 8.4's `DELEX …
//! IFEQ` is the same idea), a mutex hold taken by the caller's plain `SET` is released with that
//! one command first ([`Op::NativeRelease`], the step in mutex.rs), sent with the whole value
//! the `SET` wrote. Its 0 does not tell a hold a waiter flagged from one that expired or was
//! taken over: release.lua runs next with the same arguments, and its answer is the one the
//! caller gets (acquisition.rs `LeaseCore::release`). This file holds that decision of the
//! client, the property that checks it and the reachability checks of its branches; the
//! models that use it set [`Env::native`](crate::model::Env::native).

use stateright::Property;

use crate::model::{Kind, LockModel, State};
use crate::mutant::Mutant;
use crate::reach;
use crate::server::{Op, ReleaseHow, Reply, Token};

/// A bit of [`Ghost::broken`](crate::model::Ghost::broken) (the others are in properties.rs):
/// a client ended its release after the native release while the server still had its token
/// as a live holder.
pub(crate) const LEFT_HELD: u32 = 1 << 16;

/// `a finished native release leaves no live hold of its caller`: a release that tried
/// `DELIFEQ` ends only once the caller's hold is gone — deleted by `DELIFEQ`, or released,
/// handed on or found expired or taken by release.lua after a 0. A client that took the 0 as
/// "released" would leave a flagged hold alive for its lease, its waiters served late.
pub const NATIVE_LEAVES_NOTHING: &str =
    "a finished native release leaves no live hold of its caller";
/// `DELIFEQ released a hold (reachable)`.
pub const REACH_NATIVE_RELEASED: &str = "the native release deleted a hold (reachable)";
/// `the native release answered 0 and release.lua handed the lock to a waiter (reachable)`.
pub const REACH_NATIVE_HANDED: &str =
    "the native release answered 0 and release.lua handed the lock on (reachable)";
/// `the native release answered 0 and release.lua found the lease expired (reachable)`.
pub const REACH_NATIVE_EXPIRED: &str =
    "the native release answered 0 and release.lua found the lease expired (reachable)";
/// `the native release answered 0 and release.lua found another holder (reachable)`.
pub const REACH_NATIVE_TAKEN: &str =
    "the native release answered 0 and release.lua found another holder (reachable)";

/// The release of a hold: `DELIFEQ` when the server has it and the hold is one the caller's
/// plain `SET` took (a mutex's, no fence known: neither a hand-off's nor fenced), else
/// release.lua.
pub(crate) fn release_op(model: &LockModel, token: Token, fence: Option<u64>) -> Op {
    if model.env.native && model.kind == Kind::Mutex && fence.is_none() {
        Op::NativeRelease { name: 0, token }
    } else {
        Op::Release {
            name: 0,
            token,
            leaving: None,
            how: ReleaseHow::Own,
        }
    }
}

/// The reply to `DELIFEQ` (client `c`, its hold `token`): 1 ends the release; anything else
/// (0, or `WRONGTYPE` on a key of another type) sends release.lua with the same arguments.
/// Returns the call to send next, if any.
pub(crate) fn answered(
    model: &LockModel,
    state: &mut State,
    c: u8,
    token: Token,
    reply: &Reply,
) -> Option<Op> {
    let zero_is_done = model.mutant == Some(Mutant::NativeZeroReleased);
    if *reply == Reply::Int(1) || zero_is_done {
        if *reply == Reply::Int(1) {
            state.ghost.events |= reach::EV_NATIVE_RELEASED;
        }
        left_nothing(state, c, token);
        return None;
    }
    state.clients[usize::from(c)].fallback = true;
    Some(Op::Release {
        name: 0,
        token,
        leaving: None,
        how: ReleaseHow::Own,
    })
}

/// release.lua answered the fallback of client `c`: which branch it took, and the property.
pub(crate) fn fallback_answered(state: &mut State, c: u8, token: Token, reply: &Reply) {
    let client = &mut state.clients[usize::from(c)];
    if !std::mem::take(&mut client.fallback) {
        return;
    }
    state.ghost.events |= match reply {
        Reply::Handed(_) => reach::EV_NATIVE_HANDED,
        Reply::Int(0) => reach::EV_NATIVE_EXPIRED,
        Reply::Int(-1) => reach::EV_NATIVE_TAKEN,
        _ => 0,
    };
    left_nothing(state, c, token);
}

/// The caller `c` ends its release of `token`: the server must not have it as a live holder
/// (unless a restart or a pause made the client's view stale, as `no given-away grant`
/// allows).
fn left_nothing(state: &mut State, c: u8, token: Token) {
    let client = &state.clients[usize::from(c)];
    if client.stale || client.epoch != state.server.epoch {
        return;
    }
    let now = state.now;
    let held = state
        .server
        .data
        .locks
        .get(&0)
        .is_some_and(|h| h.token == token && h.live(now));
    if held {
        state.ghost.broken |= LEFT_HELD;
    }
}

/// The property and the reachability checks.
pub(crate) fn all() -> Vec<Property<LockModel>> {
    vec![
        Property::always(NATIVE_LEAVES_NOTHING, |_, s: &State| {
            s.ghost.broken & LEFT_HELD == 0
        }),
        Property::sometimes(REACH_NATIVE_RELEASED, |_, s: &State| {
            s.ghost.events & reach::EV_NATIVE_RELEASED != 0
        }),
        Property::sometimes(REACH_NATIVE_HANDED, |_, s: &State| {
            s.ghost.events & reach::EV_NATIVE_HANDED != 0
        }),
        Property::sometimes(REACH_NATIVE_EXPIRED, |_, s: &State| {
            s.ghost.events & reach::EV_NATIVE_EXPIRED != 0
        }),
        Property::sometimes(REACH_NATIVE_TAKEN, |_, s: &State| {
            s.ghost.events & reach::EV_NATIVE_TAKEN != 0
        }),
    ]
}

/// The checks a model with the native release must discover.
pub(crate) fn reachable(model: &LockModel) -> Vec<&'static str> {
    if !model.env.native || model.kind != Kind::Mutex {
        return Vec::new();
    }
    vec![
        REACH_NATIVE_RELEASED,
        REACH_NATIVE_HANDED,
        REACH_NATIVE_EXPIRED,
        REACH_NATIVE_TAKEN,
    ]
}
