//! The mutex's steps: the uncontended `SET NX PX GET`, the fenced `MULTI`, acquire.lua,
//! release.lua, fence.lua and extend.lua, each one atomic step over [`Server`]. Every function
//! names the Lua it mirrors; the comments follow the script's order.

use crate::ask;
use crate::mutant::Mutant;
use crate::server::{
    Entry, ExtendItem, Grant, Hold, Key, LockRef, Mode, Ms, Name, Push, ReleaseHow, Reply,
    ScriptError, Server, Token,
};

/// What `hand_off` did.
enum HandOff {
    /// The caller's own entry was the oldest live one: the lock is its, with this fence.
    Caller(u64),
    /// Granted to a live waiter, told by this push.
    Granted(Push),
    /// Nobody live was queued: the queue is empty and the lock key deleted.
    Nobody,
}

/// The keys every mutex script may touch.
fn keys(name: Name) -> [Key; 3] {
    [Key::Lock(name), Key::Queue(name), Key::Counter]
}

fn queue_len(server: &Server, name: Name) -> usize {
    server.data.queues.get(&name).map_or(0, Vec::len)
}

fn queued(server: &Server, name: Name, token: Token) -> bool {
    server
        .data
        .queues
        .get(&name)
        .is_some_and(|q| q.iter().any(|e| e.token == token))
}

/// `LREM <queue> 1 <entry>`.
fn remove_entry(server: &mut Server, name: Name, token: Token) {
    if let Some(queue) = server.data.queues.get_mut(&name) {
        if let Some(at) = queue.iter().position(|e| e.token == token) {
            queue.remove(at);
        }
        if queue.is_empty() {
            server.data.queues.remove(&name);
            server.data.queue_expires.remove(&name);
        }
    }
}

/// `LPOP <queue>`.
fn pop(server: &mut Server, name: Name) -> Option<Entry> {
    let queue = server.data.queues.get_mut(&name)?;
    let entry = (!queue.is_empty()).then(|| queue.remove(0));
    if queue.is_empty() {
        server.data.queues.remove(&name);
        server.data.queue_expires.remove(&name);
    }
    entry
}

/// common.lua `keep` (issue #35), after every step that changes a mutex's queue or hold: while
/// callers wait, the `w` flag is set and the key lives one lease (`lease`: the lease of the
/// request the step served) past the holder's deadline, never shorter, so that a newcomer's
/// plain `SET NX` fails until the queue's head has had its turn (a live waiter asks again at
/// the deadline, by its fallback timer); with nobody waiting the flag is cleared and the key
/// expires with the lease, and a key kept past its deadline for callers who all left is
/// deleted.
fn keep(server: &mut Server, now: Ms, name: Name, lease: Ms) {
    let margin = (queue_len(server, name) > 0).then_some(lease);
    let Some(hold) = server.data.locks.get(&name).cloned() else {
        return;
    };
    let mut kept = hold.clone();
    match margin {
        Some(margin) => {
            kept.waiting = true;
            if !server.is(Mutant::EnqueueForgetsKeep) {
                kept.expires = kept.expires.max(kept.deadline + margin);
            }
        }
        None => {
            kept.waiting = false;
            kept.expires = kept.deadline;
        }
    }
    // The queue's expiry is set to the key's where the key's moves (`PEXPIREAT … GT` answered
    // 1, issue #44); a new queue meets a key not kept yet, whose expiry moves.
    if margin.is_some() && kept.expires > hold.expires && !server.is(Mutant::QueueNeverExpires) {
        server.data.queue_expires.insert(name, kept.expires);
    }
    if kept == hold {
        return;
    }
    server.write(Key::Lock(name));
    if kept.live(now) {
        server.data.locks.insert(name, kept);
    } else {
        server.data.locks.remove(&name);
    }
}

/// common.lua `hand_off`: the lock goes to the oldest live waiter; a publish that reaches
/// nobody means that waiter is gone, and the next entry is tried.
fn hand_off(server: &mut Server, now: Ms, name: Name, caller: Option<Token>) -> HandOff {
    let mut pass_over = server.is(Mutant::HandOffSkipsOldest) && queue_len(server, name) > 1;
    loop {
        let Some(entry) = pop(server, name) else {
            server.data.locks.remove(&name);
            return HandOff::Nobody;
        };
        if std::mem::take(&mut pass_over) {
            continue;
        }
        let fence = server.next_fence(now);
        server.write(Key::Lock(name));
        server
            .data
            .locks
            .insert(name, Hold::new(entry.token, Some(fence), now, entry.lease));
        keep(server, now, name, entry.lease);
        // hand_off sets the queue's expiry anew with the key's (`PEXPIRE <queue> 2 * lease`).
        if server.data.queues.contains_key(&name) && !server.is(Mutant::QueueNeverExpires) {
            server
                .data
                .queue_expires
                .insert(name, now + 2 * entry.lease);
        }
        if caller == Some(entry.token) {
            return HandOff::Caller(fence);
        }
        let push = Push {
            lock: LockRef::Mutex(name),
            client: entry.client,
            token: entry.token,
            grant: Some(Grant {
                fence,
                server_ms: now,
                lease: entry.lease,
            }),
        };
        if server.publish(push) > 0 {
            return HandOff::Granted(push);
        }
    }
}

/// The uncontended acquire, `SET <lock> <value> NX PX <lease> GET` (mutex.rs
/// `fast_attempt_once`): refused by any key, a kept one too (issue #35).
pub(crate) fn set_nx_get(
    server: &mut Server,
    now: Ms,
    name: Name,
    token: Token,
    lease: Ms,
) -> Reply {
    if server.foreign(&[Key::Lock(name)]).is_some() {
        return Reply::SetNx(Some(None));
    }
    if let Some(held) = server.data.locks.get(&name) {
        return Reply::SetNx(Some(Some(held.token)));
    }
    server
        .data
        .locks
        .insert(name, Hold::new(token, None, now, lease));
    Reply::SetNx(None)
}

/// The fenced uncontended acquire's `MULTI … EXEC` (mutex.rs `fast_attempt_once` with a ticket,
/// fence_epoch.rs): `SET NX PX GET`, then a plain `INCR` of the slot's
/// counter (`incr`: the client trusts this slot as floored on its connection) or fence.lua,
/// then `CLIENT GETNAME` (the epoch).
pub(crate) fn fenced_fast(
    server: &mut Server,
    now: Ms,
    name: Name,
    token: Token,
    lease: Ms,
    incr: bool,
) -> Reply {
    let set = match set_nx_get(server, now, name, token, lease) {
        Reply::SetNx(set) => set,
        _ => Some(None),
    };
    let fence = if incr {
        server.write(Key::Counter);
        server.data.counter += 1;
        i64::try_from(server.data.counter).unwrap_or(i64::MAX)
    } else {
        match fence(server, now, name, token) {
            Reply::Int(n) => n,
            _ => -1,
        }
    };
    Reply::Multi {
        set,
        fence,
        epoch: server.epoch,
    }
}

/// acquire.lua: the waiting acquire's attempt.
pub(crate) fn acquire(server: &mut Server, now: Ms, name: Name, entry: Entry, mode: Mode) -> Reply {
    if let Some(key) = server.foreign(&keys(name)) {
        return Reply::Err(ScriptError::Foreign(key));
    }
    // ARGV[4] is sent in modes "wait" and "last" only.
    let own = (mode != Mode::Single).then_some(entry.token);
    // Free: no key, or a key kept past its holder's deadline (issue #35), which is nobody's.
    let mut taken = server.live_hold(name, now).is_none();
    if taken {
        server
            .data
            .locks
            .insert(name, Hold::new(entry.token, None, now, entry.lease));
    }
    if taken && queue_len(server, name) > 0 && !server.is(Mutant::NewcomerTakesExpired) {
        // Free, but callers wait: the oldest live one comes first (possibly this caller).
        match hand_off(server, now, name, own) {
            HandOff::Caller(fence) => {
                return Reply::Holds {
                    fence,
                    pttl: entry.lease,
                };
            }
            HandOff::Granted(_) => taken = false,
            HandOff::Nobody => {
                server
                    .data
                    .locks
                    .insert(name, Hold::new(entry.token, None, now, entry.lease));
            }
        }
    }
    if taken {
        let fence = server.next_fence(now);
        if own.is_some() {
            remove_entry(server, name, entry.token);
        }
        if let Some(hold) = server.data.locks.get_mut(&name) {
            hold.fence = Some(fence);
        }
        keep(server, now, name, entry.lease);
        return Reply::Holds {
            fence,
            pttl: entry.lease,
        };
    }
    let Some(held) = server.live_hold(name, now).cloned() else {
        return Reply::Int(0);
    };
    let pttl = held.deadline.saturating_sub(now);
    if held.token == entry.token {
        if own.is_some() {
            remove_entry(server, name, entry.token);
            keep(server, now, name, entry.lease);
        }
        return Reply::Holds {
            fence: held.fence.unwrap_or(0),
            pttl,
        };
    }
    match mode {
        Mode::Wait => {
            if !queued(server, name, entry.token) {
                server.data.queues.entry(name).or_default().push(entry);
            }
            keep(server, now, name, entry.lease);
        }
        Mode::Join => {
            // The first run of this token's join queues without a scan; a resend finds its
            // mark (`<lock>:joined:<token>`, a minute: longer than any run of the model) and
            // scans: either way the entry is queued once, as by "wait" (issue #44).
            if server.is(Mutant::JoinScansNothing) || !queued(server, name, entry.token) {
                server.data.queues.entry(name).or_default().push(entry);
            }
            keep(server, now, name, entry.lease);
        }
        Mode::Again => {
            if queue_len(server, name) == 0 {
                server.data.queues.entry(name).or_default().push(entry);
            }
            keep(server, now, name, entry.lease);
        }
        Mode::Last => {
            remove_entry(server, name, entry.token);
            keep(server, now, name, entry.lease);
        }
        Mode::Single => {}
    }
    Reply::Busy { wait: pttl }
}

/// release.lua: release a lock the caller owns and hand it to the oldest live waiter.
pub(crate) fn release(
    server: &mut Server,
    now: Ms,
    name: Name,
    token: Token,
    leaving: Option<Entry>,
    how: ReleaseHow,
) -> Reply {
    let held = server.data.locks.get(&name).cloned();
    // The fast paths: the caller's own unflagged lock, nobody leaving, no mode.
    if let Some(h) = &held
        && how == ReleaseHow::Own
        && leaving.is_none()
        && h.token == token
        && !h.waiting
        && server.foreign(&[Key::Lock(name)]).is_none()
    {
        server.data.locks.remove(&name);
        return Reply::Int(1);
    }
    if let Some(entry) = leaving {
        // `LREM` of the caller's entry fails on a queue key of another type: refused by name,
        // before anything is written.
        if server.foreign(&[Key::Queue(name)]).is_some() {
            return Reply::Err(ScriptError::Foreign(Key::Queue(name)));
        }
        remove_entry(server, name, entry.token);
        if server.foreign(&[Key::Lock(name)]).is_none() {
            keep(server, now, name, 0);
        }
    }
    if server.foreign(&[Key::Lock(name)]).is_some() {
        return if how == ReleaseHow::Force {
            Reply::Err(ScriptError::Foreign(Key::Lock(name)))
        } else {
            Reply::Int(-1)
        };
    }
    let Some(held) = server.data.locks.get(&name).cloned() else {
        return Reply::Int(0);
    };
    if !held.live(now) {
        // Kept past its deadline for the queue (issue #35): nobody's, the caller's lease
        // included. Its head takes it now, as any script that finds it free hands it on.
        if let Some(key) = server.foreign(&[Key::Queue(name), Key::Counter]) {
            return Reply::Err(ScriptError::Foreign(key));
        }
        hand_off(server, now, name, None);
        return Reply::Int(0);
    }
    if how != ReleaseHow::Force && held.token != token {
        return Reply::Int(-1);
    }
    if !held.waiting && how != ReleaseHow::Handoff {
        server.data.locks.remove(&name);
        return Reply::Int(1);
    }
    if let Some(key) = server.foreign(&[Key::Queue(name), Key::Counter]) {
        return Reply::Err(ScriptError::Foreign(key));
    }
    match hand_off(server, now, name, None) {
        HandOff::Granted(push) => Reply::Handed(push),
        HandOff::Caller(_) | HandOff::Nobody => Reply::Int(1),
    }
}

/// `DELIFEQ <lock> <value>` (Valkey 9), with the whole value the caller's plain `SET` wrote:
/// the key is deleted (1) only while it holds exactly that value — the caller's token, nobody
/// flagged it (`-`, version 1), no fence added — else 0 and nothing changes. A key another
/// program wrote compares unequal (0); one of another Redis type answers `WRONGTYPE`, which
/// the client takes as 0 (it runs release.lua, which reports it). A key kept past its deadline
/// is flagged (`w2`): 0. DELIFEQ reads no clock and touches no other key.
pub(crate) fn native_release(server: &mut Server, name: Name, token: Token) -> Reply {
    if server.foreign(&[Key::Lock(name)]).is_some() {
        return Reply::Int(0);
    }
    let Some(held) = server.data.locks.get(&name) else {
        return Reply::Int(0);
    };
    let token_only = server.is(Mutant::NativeTokenOnly);
    if held.token != token || (!token_only && (held.waiting || held.fence.is_some())) {
        return Reply::Int(0);
    }
    server.write(Key::Lock(name));
    server.data.locks.remove(&name);
    Reply::Int(1)
}

/// fence.lua: the fence of the caller's current hold, issued on demand and kept with it.
pub(crate) fn fence(server: &mut Server, now: Ms, name: Name, token: Token) -> Reply {
    if server.foreign(&[Key::Lock(name)]).is_some() {
        return Reply::Int(-1);
    }
    let hold = if server.is(Mutant::FenceIgnoresDeadline) {
        server.data.locks.get(&name)
    } else {
        server.live_hold(name, now)
    };
    let Some(held) = hold.cloned() else {
        return Reply::Int(0);
    };
    if held.token != token {
        return Reply::Int(-1);
    }
    if let Some(fence) = held.fence.filter(|_| !server.is(Mutant::FenceReissued)) {
        return Reply::Int(i64::try_from(fence).unwrap_or(i64::MAX));
    }
    if let Some(key) = server.foreign(&[Key::Counter]) {
        return Reply::Err(ScriptError::Foreign(key));
    }
    let fence = server.next_fence(now);
    if let Some(hold) = server.data.locks.get_mut(&name) {
        hold.fence = Some(fence);
    }
    Reply::Int(i64::try_from(fence).unwrap_or(i64::MAX))
}

/// extend.lua: new leases, counted from now, for the locks the caller owns (the watchdog's
/// batch). Owner-checked per item; nothing is re-created. A renewed holder that ask.lua
/// recorded as asked is answered 2 instead of 1 (`extended`, read after the renewal).
pub(crate) fn extend(server: &mut Server, now: Ms, items: &[ExtendItem]) -> Reply {
    let mut out = Vec::with_capacity(items.len());
    let owner_checked = !server.is(Mutant::ExtendSkipsOwner);
    for item in items {
        // The ask key is not touched by the renewal: read before it, the same answer.
        let told = ask::told(server, item.lock, item.token);
        let renew = !(told && server.is(Mutant::ExtendSkipsAskedRenewal));
        let extended = if told { 2 } else { 1 };
        let result = match item.lock {
            LockRef::Mutex(name) => {
                if server.foreign(&[Key::Lock(name)]).is_some() {
                    -1
                } else {
                    match server.data.locks.get_mut(&name) {
                        None => 0,
                        // extend.lua compares the owner first: another owner's value is -1,
                        // its deadline passed or not.
                        Some(h) if h.token != item.token && owner_checked => -1,
                        // A key kept past its deadline for the queue is nobody's: lost.
                        Some(h) if !h.live(now) => 0,
                        // extend.lua renews and nothing else: a value of version 1 gets its
                        // `PEXPIRE`, one kept for callers (`w`) its deadline moved and the keep
                        // a lease past it (never shorter), whatever the queue holds now.
                        Some(h) => {
                            if renew {
                                h.deadline = now + item.lease;
                                let kept = now + 2 * item.lease;
                                // The queue's expiry follows the kept key's where it moves
                                // (`PEXPIREAT … GT` answered 1, issue #44).
                                if h.waiting
                                    && kept > h.expires
                                    && let Some(until) = server.data.queue_expires.get_mut(&name)
                                {
                                    *until = kept;
                                }
                                h.expires = if h.waiting {
                                    h.expires.max(kept)
                                } else {
                                    h.deadline
                                };
                            }
                            extended
                        }
                    }
                }
            }
            LockRef::Shared(name) => {
                if server
                    .foreign(&[Key::Shared(name), Key::SharedExp(name)])
                    .is_some()
                {
                    -1
                } else {
                    match server.data.shared.get_mut(&name) {
                        Some(lock) if lock.holders.contains_key(&item.token) => {
                            if let Some(h) = lock.holders.get_mut(&item.token)
                                && renew
                            {
                                h.deadline = now + item.lease;
                            }
                            // extend.lua: while requests wait, the hash and the queue are kept
                            // at least until the latest deadline (GT).
                            if !lock.queue.is_empty() {
                                let latest =
                                    lock.holders.values().map(|h| h.deadline).max().unwrap_or(0);
                                lock.until = lock.until.max(latest);
                            }
                            extended
                        }
                        _ => 0,
                    }
                }
            }
        };
        out.push(result);
    }
    Reply::Extended(out)
}
