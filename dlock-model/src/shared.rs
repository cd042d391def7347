//! The shared admission's steps (semaphore and RwLock): shared_acquire.lua,
//! shared_release.lua, shared_limit.lua and rw_change.lua over shared.lua's functions, each one
//! atomic step over [`Server`], with the fixed rules S1–S3 (issue 27): a request that leaves
//! re-admits what fits behind it, a dead head that does not fit is dropped, and the stored
//! limit is the one in force.

use crate::mutant::Mutant;
use crate::server::{
    Grant, Holder, Key, LockRef, Mode, Ms, Name, Origin, Push, RW_LIMIT, Reply, ScriptError,
    Server, SharedEntry, SharedLock, Token,
};

/// The keys every shared script may touch.
fn keys(name: Name) -> [Key; 4] {
    [
        Key::Shared(name),
        Key::SharedExp(name),
        Key::SharedQueue(name),
        Key::Counter,
    ]
}

/// shared.lua `begin`: refuses a lock whose keys hold foreign data before any write (the
/// expired holders were purged by [`Server::expire`], which `purge` mirrors).
fn begin(server: &Server, name: Name) -> Result<(), Reply> {
    match server.foreign(&keys(name)) {
        Some(key) => Err(Reply::Err(ScriptError::Foreign(key))),
        None => Ok(()),
    }
}

fn lock(server: &mut Server, name: Name) -> &mut SharedLock {
    server.data.shared.entry(name).or_default()
}

/// Whether `weight` more permits fit (the `used + weight > limit` test of `admit_from_head`).
fn fits(server: &Server, used: u32, weight: u32, limit: u32) -> bool {
    if server.is(Mutant::GrantAboveLimit) {
        return weight <= limit;
    }
    used + weight <= limit
}

/// shared.lua `admit`: makes `entry` a holder with the next fence.
fn admit(server: &mut Server, now: Ms, name: Name, entry: &SharedEntry) -> u64 {
    let fence = server.next_fence(now);
    server.write(Key::Shared(name));
    lock(server, name).holders.insert(
        entry.token,
        Holder {
            weight: entry.weight,
            fence,
            deadline: now + entry.lease,
        },
    );
    fence
}

/// shared.lua `admit_from_head`: admits the head of the queue while it fits (strict FIFO);
/// a grant that reaches nobody is taken back; a head that does not fit and whose client has no
/// subscriber left is dropped (S2). Returns the caller's fence if its entry was admitted.
fn admit_from_head(server: &mut Server, now: Ms, name: Name, caller: Option<Token>) -> Option<u64> {
    let mut mine = None;
    while let Some(state) = server.data.shared.get(&name) {
        let Some((limit, _)) = state.limit else {
            break;
        };
        let Some(entry) = state.queue.first().copied() else {
            break;
        };
        let used = state.used();
        let lock_ref = LockRef::Shared(name);
        if !fits(server, used, entry.weight, limit) {
            let gone = Some(entry.token) != caller
                && !server.subscribed.contains(&(lock_ref, entry.client));
            if gone && !server.is(Mutant::DeadHeadBlocks) {
                lock(server, name).queue.remove(0);
                continue;
            }
            break;
        }
        lock(server, name).queue.remove(0);
        let fence = admit(server, now, name, &entry);
        if Some(entry.token) == caller {
            mine = Some(fence);
            continue;
        }
        let push = Push {
            lock: lock_ref,
            client: entry.client,
            token: entry.token,
            grant: Some(Grant {
                fence,
                server_ms: now,
                lease: entry.lease,
            }),
        };
        if server.publish(push) == 0 {
            lock(server, name).holders.remove(&entry.token);
        }
    }
    mine
}

fn remove_entry(server: &mut Server, name: Name, token: Token) {
    if let Some(state) = server.data.shared.get_mut(&name) {
        state.queue.retain(|e| e.token != token);
    }
}

/// `{0, wait_ms, now}`: until the nearest holder's lease ends, else the caller's lease.
fn busy(server: &Server, now: Ms, name: Name, lease: Ms) -> Reply {
    let nearest = server
        .data
        .shared
        .get(&name)
        .and_then(|s| s.holders.values().map(|h| h.deadline).min());
    Reply::Busy {
        wait: nearest.map_or(lease, |d| d.saturating_sub(now)),
    }
}

/// shared_acquire.lua: an attempt to take `entry.weight` permits (limit rule S3, leaving rule
/// S1 in mode "last").
pub(crate) fn acquire(
    server: &mut Server,
    now: Ms,
    name: Name,
    entry: SharedEntry,
    limit: u32,
    mode: Mode,
) -> Reply {
    if let Err(reply) = begin(server, name) {
        return reply;
    }
    if entry.weight > limit {
        return Reply::Err(ScriptError::Weight);
    }
    let own = (mode != Mode::Single).then_some(entry.token);
    // shared_acquire.lua looks for the caller's hold first (a retry, a grant it has not heard),
    // whatever limit is in force now: a request that holds is told so.
    if let Some(h) = server
        .data
        .shared
        .get(&name)
        .and_then(|s| s.holders.get(&entry.token))
        .copied()
    {
        if own.is_some() {
            remove_entry(server, name, entry.token);
        }
        // shared.lua `readmit`: the permits of holders purged at the start go to the queue.
        admit_from_head(server, now, name, None);
        return Reply::Holds {
            fence: h.fence,
            pttl: h.deadline.saturating_sub(now),
        };
    }
    let stored = server.data.shared.get(&name).and_then(|s| s.limit);
    let limit = match stored {
        None => {
            server.write(Key::Shared(name));
            lock(server, name).limit = Some((limit, Origin::Handle));
            limit
        }
        Some((stored, Origin::Handle)) if stored != limit => {
            return Reply::Err(ScriptError::Limit(stored));
        }
        Some((stored, Origin::Operator)) if entry.weight > stored => {
            remove_entry(server, name, entry.token);
            return Reply::Err(ScriptError::AboveLimit(stored));
        }
        Some((stored, _)) => stored,
    };
    let mut fence = admit_from_head(server, now, name, own);
    let state = lock(server, name);
    let (used, empty) = (state.used(), state.queue.is_empty());
    let barge = server.is(Mutant::ReaderPastWriter) && entry.weight == 1;
    if fence.is_none() && (empty || barge) && fits(server, used, entry.weight, limit) {
        fence = Some(admit(server, now, name, &entry));
    }
    if let Some(fence) = fence {
        return Reply::Holds {
            fence,
            pttl: entry.lease,
        };
    }
    match mode {
        // "join" queues a new entry without a scan, and a resend of it finds the mark of its
        // first run and scans (issue #44): as "wait", the entry is queued once.
        Mode::Wait | Mode::Again | Mode::Join => {
            let state = lock(server, name);
            // "again" trusts the entry to be queued: it appends only to an empty queue.
            let queued = if mode == Mode::Again {
                !state.queue.is_empty()
            } else {
                state.queue.iter().any(|e| e.token == entry.token)
            };
            if !queued {
                server.write(Key::SharedQueue(name));
                let state = lock(server, name);
                state.qlease = state.qlease.max(entry.lease);
                state.queue.push(entry);
            }
        }
        Mode::Last => {
            remove_entry(server, name, entry.token);
            // S1: what fits behind the leaving request is admitted now.
            if !server.is(Mutant::NoReadmitOnLeave) {
                admit_from_head(server, now, name, None);
            }
        }
        Mode::Single => {}
    }
    busy(server, now, name, entry.lease)
}

/// shared_release.lua: gives back one holder's permits (dropping the caller's own queue entry
/// first, for an abandoned wait) and admits what fits at the head.
pub(crate) fn release(
    server: &mut Server,
    now: Ms,
    name: Name,
    token: Token,
    leaving: Option<SharedEntry>,
) -> Reply {
    if let Err(reply) = begin(server, name) {
        return reply;
    }
    if let Some(entry) = leaving {
        remove_entry(server, name, entry.token);
    }
    let held = server
        .data
        .shared
        .get_mut(&name)
        .and_then(|s| s.holders.remove(&token))
        .is_some();
    admit_from_head(server, now, name, None);
    Reply::Int(i64::from(held))
}

/// shared_limit.lua (`set_limit`, S3): the operator's limit is stored and persists; queued
/// requests heavier than it are removed and nudged (their next attempt fails with
/// InvalidInput); what fits at the head is admitted. Returns the limit stored before (0: none).
pub(crate) fn set_limit(server: &mut Server, now: Ms, name: Name, limit: u32) -> Reply {
    if let Err(reply) = begin(server, name) {
        return reply;
    }
    let before = server
        .data
        .shared
        .get(&name)
        .and_then(|s| s.limit)
        .map_or(0, |(l, _)| l);
    server.write(Key::Shared(name));
    let keep_heavy = server.is(Mutant::SetLimitKeepsHeavy);
    let state = lock(server, name);
    state.limit = Some((limit, Origin::Operator));
    let heavy: Vec<SharedEntry> = state
        .queue
        .iter()
        .filter(|e| e.weight > limit && !keep_heavy)
        .copied()
        .collect();
    state.queue.retain(|e| e.weight <= limit || keep_heavy);
    for entry in heavy {
        server.publish(Push {
            lock: LockRef::Shared(name),
            client: entry.client,
            token: entry.token,
            grant: None,
        });
    }
    admit_from_head(server, now, name, None);
    Reply::Int(i64::from(before))
}

/// rw_change.lua: the writer becomes a reader (`up == false`, then the readers at the head are
/// admitted beside it), or the sole reader with an empty queue becomes the writer.
pub(crate) fn rw_change(
    server: &mut Server,
    now: Ms,
    name: Name,
    old: Token,
    new: Token,
    up: bool,
    lease: Ms,
) -> Reply {
    if let Err(reply) = begin(server, name) {
        return reply;
    }
    let Some(state) = server.data.shared.get(&name) else {
        return Reply::Int(0);
    };
    // shared.lua `readmit` on the early endings below: the permits of holders purged at the
    // start go to the queue (the refused upgrade reports what is held and queued after it).
    if let Some(done) = state.holders.get(&new).copied() {
        admit_from_head(server, now, name, None);
        return Reply::Holds {
            fence: done.fence,
            pttl: done.deadline.saturating_sub(now),
        };
    }
    let Some(held) = state.holders.get(&old).copied() else {
        admit_from_head(server, now, name, None);
        return Reply::Int(0);
    };
    let to = if up {
        if held.weight != 1 {
            return Reply::Err(ScriptError::Mode);
        }
        let queued = !state.queue.is_empty() && !server.is(Mutant::UpgradePastQueue);
        if state.used() != 1 || queued {
            admit_from_head(server, now, name, None);
            let state = lock(server, name);
            return Reply::Refused {
                used: state.used(),
                waiting: u32::try_from(state.queue.len()).unwrap_or(u32::MAX),
            };
        }
        RW_LIMIT
    } else {
        if held.weight != RW_LIMIT {
            return Reply::Err(ScriptError::Mode);
        }
        1
    };
    let fence = server.next_fence(now);
    server.write(Key::Shared(name));
    let state = lock(server, name);
    state.holders.remove(&old);
    state.holders.insert(
        new,
        Holder {
            weight: to,
            fence,
            deadline: now + lease,
        },
    );
    if !up {
        admit_from_head(server, now, name, None);
    }
    Reply::Holds { fence, pttl: lease }
}

/// shared.lua `set_expiry`, which every shared script runs before it ends (not those refused
/// before any change: foreign data, a limit that disagrees, a mode change of the wrong mode):
/// while requests are queued, the hash and the queue are kept until the latest holder's
/// deadline or two `qlease` from now, whichever is later.
pub(crate) fn set_expiry(server: &mut Server, now: Ms, name: Name, reply: &Reply) {
    if matches!(
        reply,
        Reply::Err(ScriptError::Foreign(_) | ScriptError::Limit(_) | ScriptError::Mode)
    ) {
        return;
    }
    if let Some(state) = server.data.shared.get_mut(&name) {
        if state.queue.is_empty() {
            state.until = 0;
        } else {
            let latest = state
                .holders
                .values()
                .map(|h| h.deadline)
                .max()
                .unwrap_or(0);
            state.until = latest.max(now + 2 * state.qlease);
        }
    }
}
