//! Polite release requests: ask.lua (the holders of a lock recorded as asked in
//! `<lock>:ask`, with an expiry no earlier than their leases) and what extend.lua reads of it
//! (an asked holder's renewal answers 2), each one atomic step over [`Server`]. The comments
//! follow ask.lua's order. A request changes no hold: nothing here touches a lock's keys.

use crate::mutant::Mutant;
use crate::server::{Key, LockRef, Ms, Reply, ScriptError, Server, Token};

/// ask.lua on `lock` at server time `now`: every live holder's token recorded as asked, the
/// key kept at least until that holder's deadline; the reply is the number of holders asked.
///
/// Refused before any write, as the script is: foreign data at the lock key (`DLOCKFOREIGN`,
/// from `unusable` or `shared_unusable`); a shared lock's `K:exp`, or the ask key, of another
/// type (a plain `WRONGTYPE` error of `ZRANGE` or `HSET`: the contract names only the lock
/// key, and the client reports both as `ErrorKind::WrongType`).
pub(crate) fn ask(server: &mut Server, now: Ms, lock: LockRef) -> Reply {
    // The holders asked, with their deadlines; the queue head too, for the mutant.
    let (holders, head): (Vec<(Token, Ms)>, Option<Token>) = match lock {
        LockRef::Mutex(name) => {
            // read(KEYS[1]): absent (released, expired) is 0 asked; then unusable().
            if let Some(key) = server.foreign(&[Key::Lock(name)]) {
                return Reply::Err(ScriptError::Foreign(key));
            }
            let Some(hold) = server.live_hold(name, now) else {
                return Reply::Int(0);
            };
            let head = server.data.queues.get(&name).and_then(|q| q.first());
            // `string.sub(value, 1, 32)`, kept for the lock's PTTL.
            (vec![(hold.token, hold.deadline)], head.map(|e| e.token))
        }
        LockRef::Shared(name) => {
            if let Some(key) = server.foreign(&[Key::Shared(name)]) {
                return Reply::Err(ScriptError::Foreign(key));
            }
            // `ZRANGE K:exp (now +inf BYSCORE`: a key of another type fails the script.
            if let Some(key) = server.foreign(&[Key::SharedExp(name)]) {
                return Reply::Err(ScriptError::WrongType(key));
            }
            let Some(state) = server.data.shared.get(&name) else {
                return Reply::Int(0);
            };
            let holders = state
                .holders
                .iter()
                .filter(|(_, h)| now < h.deadline)
                .map(|(&t, h)| (t, h.deadline))
                .collect();
            (holders, state.queue.first().map(|e| e.token))
        }
    };
    if holders.is_empty() {
        return Reply::Int(0);
    }
    // `record`: HSET fails on an ask key of another type, before anything is written.
    if let Some(key) = server.foreign(&[Key::Ask(lock)]) {
        return Reply::Err(ScriptError::WrongType(key));
    }
    let count = i64::try_from(holders.len()).unwrap_or(i64::MAX);
    let mut records = holders.clone();
    if server.is(Mutant::AskRecordsNextWaiter)
        && let (Some(head), Some(&(_, deadline))) = (head, holders.first())
    {
        records.push((head, deadline));
    }
    let early = server.is(Mutant::AskExpiresEarly);
    server.write(Key::Ask(lock));
    let asked = server.data.asked.entry(lock).or_default();
    for (token, deadline) in records {
        // keep_ms: the lock's PTTL (a mutex), `deadline - now` (a shared holder); > 0 here.
        let keep = deadline.saturating_sub(now);
        let keep = if early { keep / 2 } else { keep };
        asked.tokens.insert(token);
        // `if PTTL(ask) < keep_ms then PEXPIRE ask keep_ms`: only ever later.
        asked.until = asked.until.max(now + keep);
    }
    if server.is(Mutant::AskShortensLease) {
        shorten(server, now, lock);
    }
    Reply::Int(count)
}

/// The mutant [`Mutant::AskShortensLease`]: every live hold of `lock` keeps half the lease it
/// had left (rounded down: a hold with one tick left ends now).
fn shorten(server: &mut Server, now: Ms, lock: LockRef) {
    let half = |deadline: Ms| now + deadline.saturating_sub(now) / 2;
    match lock {
        LockRef::Mutex(name) => {
            if let Some(hold) = server.data.locks.get_mut(&name) {
                hold.deadline = half(hold.deadline);
                if !hold.waiting {
                    hold.expires = hold.deadline;
                }
            }
        }
        LockRef::Shared(name) => {
            if let Some(state) = server.data.shared.get_mut(&name) {
                for holder in state.holders.values_mut() {
                    holder.deadline = half(holder.deadline);
                }
            }
        }
    }
}

/// extend.lua's `extended`: whether the holder `token` of `lock` was asked to give it back
/// (`redis.pcall('HEXISTS', key .. ':ask', token) == 1`; an ask key of another type is read
/// with pcall, and is no request). Called for a hold the step has just renewed.
pub(crate) fn told(server: &Server, lock: LockRef, token: Token) -> bool {
    if server.foreign(&[Key::Ask(lock)]).is_some() {
        return false;
    }
    server.data.asked.get(&lock).is_some_and(|asked| {
        if server.is(Mutant::ExtendAnswersAnyToken) {
            !asked.tokens.is_empty()
        } else {
            asked.tokens.contains(&token)
        }
    })
}
