//! What a client does with each reply and push (mutex.rs, semaphore.rs, rwlock.rs,
//! election.rs and wait.rs, reduced to their decisions).

use crate::mutant::Mutant;
use crate::native;
use crate::properties;
use crate::server::{Mode, Ms, Op, Push, RW_LIMIT, ReleaseHow, Reply, Token};
use crate::state::{Held, Kind, LEASE, LockModel, Phase, State};
use crate::step::apply;

/// The caller gets its grant: the request holds `token` until `until` by its own count.
fn hold(model: &LockModel, state: &mut State, c: u8, token: Token, fence: Option<u64>, until: Ms) {
    let client = &state.clients[usize::from(c)];
    let writer = model.kind == Kind::RwLock && model.req(c, client).weight == RW_LIMIT;
    properties::observe_return(model, state, c, token);
    crate::reach::observe_hold(state, c);
    state.clients[usize::from(c)].phase = Phase::Holding {
        token,
        fence: fence.filter(|&f| f > 0),
        until,
        writer,
        changed: false,
    };
    if model.kind == Kind::Election {
        // The campaign goes on: the hold's fence (fence.lua), then the leader record.
        campaign(model, state, c);
    }
}

/// An election's leader, once its lock is held: fence.lua unless the fence came with the
/// grant, then election.lua "publish".
fn campaign(model: &LockModel, state: &mut State, c: u8) {
    let Phase::Holding { token, fence, .. } = state.clients[usize::from(c)].phase else {
        return;
    };
    let op = match fence {
        None => Op::Fence { name: 0, token },
        Some(fence) => Op::ElectionPublish {
            name: 0,
            token,
            fence,
            value: c,
        },
    };
    send(model, state, c, op);
}

/// Back to holding after a call about the hold (see [`Held`]); `false` if there was none.
fn restore(state: &mut State, c: u8, change: impl FnOnce(&mut Held)) -> bool {
    let client = &mut state.clients[usize::from(c)];
    let Some(mut held) = client.held.take() else {
        return false;
    };
    change(&mut held);
    client.phase = Phase::Holding {
        token: held.token,
        fence: held.fence,
        until: held.until,
        writer: held.writer,
        changed: held.changed,
    };
    true
}

/// The request is over.
fn done(state: &mut State, c: u8) {
    let client = &mut state.clients[usize::from(c)];
    client.phase = Phase::Done;
    client.deadline = None;
}

/// The uncontended acquire's `SET NX PX GET` answered (mutex.rs `fast_attempt`): taken, or
/// held (by another, or kept for the queue) and the caller waits. `ahead`: the entries queued
/// when the `SET` ran. A `SET` that took the lock ahead of a waiter that has run since its
/// last attempt (neither crashed nor paused) broke `queue head first`: such a waiter asks
/// again by the holder's deadline, within the key's keep. One paused meanwhile may be
/// overtaken: the key kept for it may be gone (issue #35's trade-off, documented). An entry
/// whose request is over (brought back by a restart from a lagging copy) waits for nothing.
pub(crate) fn fast(
    model: &LockModel,
    state: &mut State,
    c: u8,
    token: Token,
    set: Option<Option<Token>>,
    ahead: &[(u8, Token)],
) {
    match set {
        None => {
            let overtaken = ahead.iter().any(|&(w, entry)| {
                let waiter = &state.clients[usize::from(w)];
                let current =
                    waiter.started > 0 && LockModel::token(w, waiter.started - 1) == entry;
                let waits = matches!(waiter.phase, Phase::Waiting { .. } | Phase::InFlight { .. });
                current && waits && !waiter.dead && !waiter.paused && !waiter.away_since_ask
            });
            if overtaken {
                properties::barged(state);
            }
            let now = state.now;
            hold(model, state, c, token, None, now + LEASE);
        }
        Some(_) => attempt(model, state, c, Mode::Join),
    }
}

/// The client takes the reply of its call in flight (or sends a lost call again).
pub(crate) fn receive(model: &LockModel, state: &mut State, c: u8) {
    let Phase::InFlight { op, sent, reply } = state.clients[usize::from(c)].phase.clone() else {
        return;
    };
    let Some(reply) = reply else {
        // The reply was lost: the same call again, with the same token (retry safety).
        state.ghost.events |= crate::reach::EV_LOST_REPLY;
        send(model, state, c, op);
        return;
    };
    match (op, reply) {
        (Op::FencedFast { token, incr, .. }, Reply::Multi { set, fence, epoch }) => {
            fenced(model, state, c, token, incr, (set, fence, epoch), sent);
        }
        (Op::Fence { token, .. }, Reply::Int(fence)) if fence > 0 => {
            let fence = u64::try_from(fence).unwrap_or(0);
            if restore(state, c, |h| h.fence = Some(fence)) {
                if model.kind == Kind::Election {
                    campaign(model, state, c);
                }
            } else {
                hold(model, state, c, token, Some(fence), sent + LEASE);
            }
        }
        (Op::Fence { .. }, _) => {
            // The lease ran out before the fence was issued: the holder learns it was lost.
            if restore(state, c, |_| {}) {
                release_now(model, state, c);
            } else {
                done(state, c);
            }
        }
        (Op::Acquire { entry, mode, .. }, reply) => {
            attempted(model, state, c, entry.token, mode, reply, sent);
        }
        (Op::SharedAcquire { entry, mode, .. }, reply) => {
            attempted(model, state, c, entry.token, mode, reply, sent);
        }
        (
            Op::Release {
                how: ReleaseHow::Handoff,
                ..
            },
            _,
        ) => attempt(model, state, c, Mode::Join),
        (Op::ElectionResign { token, .. }, _) => send(
            model,
            state,
            c,
            Op::Release {
                name: 0,
                token,
                leaving: None,
                how: ReleaseHow::Own,
            },
        ),
        (Op::NativeRelease { token, .. }, reply) => {
            match native::answered(model, state, c, token, &reply) {
                Some(fallback) => send(model, state, c, fallback),
                None => done(state, c),
            }
        }
        (Op::Release { token, .. }, reply) => {
            native::fallback_answered(state, c, token, &reply);
            done(state, c);
        }
        (Op::SharedRelease { .. }, _) => done(state, c),
        (Op::Extend { .. }, Reply::Extended(results)) => {
            // 2: extended, and someone asked the holder to give the lock back (ask.lua).
            let result = results.first().copied();
            let held = restore(state, c, |h| {
                if matches!(result, Some(1 | 2)) {
                    h.until = sent + LEASE;
                }
            });
            let client = &state.clients[usize::from(c)];
            if held && result == Some(2) && model.req(c, client).yields {
                // `Lease::release_requested` resolved: this holder gives the lock back.
                properties::observe_yield(state);
                release_now(model, state, c);
            }
        }
        (Op::RwChange { new, up, .. }, Reply::Holds { fence, pttl }) => {
            properties::observe_return(model, state, c, new);
            let client = &mut state.clients[usize::from(c)];
            client.held = None;
            client.phase = Phase::Holding {
                token: new,
                fence: Some(fence),
                until: sent + pttl,
                writer: up,
                changed: true,
            };
        }
        (Op::Guarded { .. }, Reply::Applied) => {
            restore(state, c, |_| {});
        }
        (Op::Guarded { .. }, _) => {
            // Refused: the lease is reported lost (guarded.rs `fire_lost`); the caller stops
            // and drops the guard, whose release changes nothing that is its own any more.
            state.clients[usize::from(c)].held = None;
            done(state, c);
        }
        (Op::ElectionPublish { .. }, Reply::Err(_)) => {
            // E1: the campaign fails with an error naming the key; its guard is released.
            restore(state, c, |_| {});
            release_now(model, state, c);
        }
        _ => {
            // Any other reply about a hold leaves it held (a refused upgrade, a lost lease
            // found by extend, election.lua's 1, 0 or -1); anything else ends the request.
            if !restore(state, c, |h| h.changed = true) {
                done(state, c);
            }
        }
    }
}

/// The fenced uncontended acquire's `EXEC` reply (mutex.rs `counted_fence`, fence_epoch.rs).
fn fenced(
    model: &LockModel,
    state: &mut State,
    c: u8,
    token: Token,
    incr: bool,
    (set, fence, epoch): (Option<Option<Token>>, i64, u32),
    sent: Ms,
) {
    let client = &mut state.clients[usize::from(c)];
    match set {
        Some(_) => attempt(model, state, c, Mode::Join),
        None => {
            let value = u64::try_from(fence).unwrap_or(0);
            let trusted = if incr {
                let same = client.floored == Some(epoch);
                if !same {
                    // Another connection ran it: the epoch ends, nothing is trusted on it.
                    client.floored = None;
                }
                (same && value > 1) || model.mutant == Some(Mutant::FenceNotFloored)
            } else {
                if value > 0 {
                    client.floored = Some(epoch);
                }
                value > 0
            };
            if trusted {
                if incr {
                    // A plain INCR's fence is known to the holder only (fence.lua's is kept
                    // with the hold, and was checked with the step).
                    properties::observe_fence(state, value, incr);
                }
                hold(model, state, c, token, Some(value), sent + LEASE);
            } else {
                // fence.lua in a round trip of its own decides.
                send(model, state, c, Op::Fence { name: 0, token });
            }
        }
    }
}

/// A waiting attempt's reply (acquire.lua / shared_acquire.lua).
fn attempted(
    model: &LockModel,
    state: &mut State,
    c: u8,
    token: Token,
    mode: Mode,
    reply: Reply,
    sent: Ms,
) {
    match reply {
        Reply::Holds { fence, pttl } => hold(model, state, c, token, Some(fence), sent + pttl),
        Reply::Busy { wait } if matches!(mode, Mode::Wait | Mode::Again | Mode::Join) => {
            let now = state.now;
            state.clients[usize::from(c)].phase = Phase::Waiting {
                timer: now + wait.max(1),
                seen: now,
                confirmed: matches!(mode, Mode::Wait | Mode::Join),
            };
        }
        _ => done(state, c),
    }
}

/// Releases the current hold at once (an error after the lock was taken drops its guard).
fn release_now(model: &LockModel, state: &mut State, c: u8) {
    let Phase::Holding { token, fence, .. } = state.clients[usize::from(c)].phase else {
        return done(state, c);
    };
    let op = native::release_op(model, token, fence);
    send(model, state, c, op);
}

/// A push reaches its client (wait.rs): a grant is checked against the waiter's latest
/// attempt and its own clock (`grant_safe_until`) before it is returned; a stale one, or a
/// nudge, makes the waiter ask the server again.
pub(crate) fn deliver(model: &LockModel, state: &mut State, push: Push) {
    let c = push.client;
    let client = &state.clients[usize::from(c)];
    let Phase::Waiting { seen, .. } = client.phase else {
        return;
    };
    if push.token != LockModel::token(c, client.started - 1) {
        return;
    }
    match push.grant {
        Some(g) if model.mutant == Some(Mutant::StaleHandoffTrusted) => {
            let until = state.now + g.lease;
            hold(model, state, c, push.token, Some(g.fence), until);
        }
        Some(g) if g.server_ms >= seen && (state.now - g.server_ms) * 2 < g.lease => {
            hold(
                model,
                state,
                c,
                push.token,
                Some(g.fence),
                g.server_ms + g.lease,
            );
        }
        _ => attempt(model, state, c, Mode::Wait),
    }
}

/// Runs `op` on the server for client `c` and records what the step granted.
pub(crate) fn send(model: &LockModel, state: &mut State, c: u8, op: Op) {
    state.ghost.sends = state.ghost.sends.saturating_add(1);
    let before = state.server.clone();
    let reply = apply(&mut state.server, state.now, op.clone());
    let published = state.server.drain_published();
    properties::observe_step(model, state, &before, &op, &reply);
    for push in published {
        if let Err(at) = state.pushes.binary_search(&push) {
            state.pushes.insert(at, push);
        }
    }
    let client = &mut state.clients[usize::from(c)];
    if matches!(op, Op::Acquire { .. }) {
        client.away_since_ask = false;
    }
    let releasing = matches!(
        op,
        Op::Release { .. }
            | Op::NativeRelease { .. }
            | Op::SharedRelease { .. }
            | Op::ElectionResign { .. }
    );
    if let Phase::Holding {
        token,
        fence,
        until,
        writer,
        changed,
    } = client.phase
        && !releasing
    {
        client.held = Some(Held {
            token,
            fence,
            until,
            // A writer that asked to downgrade stopped writing when it asked (rwlock.rs
            // consumes the write guard); a reader asking to upgrade does not write yet.
            writer: writer && !matches!(op, Op::RwChange { .. }),
            changed,
        });
    }
    if releasing {
        client.held = None;
    }
    let lost = std::mem::take(&mut client.lose_next);
    client.phase = Phase::InFlight {
        op,
        sent: state.now,
        reply: (!lost).then_some(reply),
    };
    if lost {
        state.budget.lost_replies -= 1;
    } else if model.env.pauses == 0 {
        take_at_once(model, state, c);
    }
}

/// Client `c` takes its reply in the step that sent the call, unless handling it sends another
/// call: then the reply stays in flight, a step of its own, so that every other step may come
/// between the two calls (another candidate's publish between a fence and its own publish, a
/// release between a hand-off and the join that follows). A reply whose handling only changes
/// the client's own state is taken at once: nothing that comes between could change what the
/// client does with it (the clock waits for a reply, pushes for it wait in its slot, a crash
/// leaves a dead client's state unread). Models with pauses take every reply as a step of its
/// own: a client paused between a call and its reply acts on a stale view.
fn take_at_once(model: &LockModel, state: &mut State, c: u8) {
    let sends = state.ghost.sends;
    let mut taken = state.clone();
    receive(model, &mut taken, c);
    if taken.ghost.sends == sends {
        *state = taken;
    }
}

/// The waiting attempt of client `c` (acquire.lua / shared_acquire.lua) in `mode`.
pub(crate) fn attempt(model: &LockModel, state: &mut State, c: u8, mode: Mode) {
    let client = &state.clients[usize::from(c)];
    let op = if model.kind.shared() {
        Op::SharedAcquire {
            name: 0,
            entry: model.shared_entry(c, client),
            limit: model.limit,
            mode,
        }
    } else {
        Op::Acquire {
            name: 0,
            entry: model.entry(c, client),
            mode,
        }
    };
    send(model, state, c, op);
}
