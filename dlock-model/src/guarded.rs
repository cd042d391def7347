//! The writes a hold protects: guarded.lua (a holder's batch, applied only while its hold is
//! still its own, checked in the same step) and fenced.lua (a compare-and-set of a value and
//! its fence), each one atomic step over [`Server`]. The comments follow the scripts' order.

use crate::mutant::Mutant;
use crate::server::{Key, LockRef, Ms, Name, Reply, ScriptError, Server, Token};

/// guarded.lua: the writes of `token`'s holder on `lock`, applied (to
/// [`Data::written`](crate::Data::written)) only while the hold is still its own by the
/// server's clock `now`.
///
/// It runs on the data as the previous step left it (see [`crate::apply`]): guarded.lua purges
/// nothing, so a shared holder past its deadline may still have its record in `K:exp`, and the
/// script must look at the deadline, not at the record's presence. (The model purges expired
/// holders at every step, where Redis waits for the next shared script: the model shows fewer
/// unpurged records than Redis, never more.)
pub(crate) fn guarded(
    server: &mut Server,
    now: Ms,
    lock: LockRef,
    token: Token,
    fence: u64,
) -> Reply {
    match lock {
        LockRef::Shared(name) => {
            // shared_unusable(K), then ZSCORE of K:exp (an error on another type).
            if let Some(key) = server.foreign(&[Key::Shared(name), Key::SharedExp(name)]) {
                return Reply::Err(ScriptError::Foreign(key));
            }
            let alive = match zscore(server, now, name, token) {
                None => false,
                Some(_) if server.is(Mutant::GuardedIgnoresDeadline) => true,
                // `tonumber(deadline) <= now_ms()`: gone, even before a purge removes it.
                Some(deadline) => now < deadline,
            };
            if !alive {
                return Reply::NotApplied { taken: false };
            }
        }
        LockRef::Mutex(name) => {
            // read(KEYS[1]): absent (expired by its PX, released) is "gone"; then unusable().
            if let Some(key) = server.foreign(&[Key::Lock(name)]) {
                return Reply::Err(ScriptError::Foreign(key));
            }
            let Some(hold) = server.data.locks.get(&name).filter(|h| now < h.deadline) else {
                return Reply::NotApplied { taken: false };
            };
            // `string.sub(value, 1, 32) ~= owner`.
            if hold.token != token && !server.is(Mutant::GuardedSkipsOwner) {
                return Reply::NotApplied { taken: true };
            }
        }
    }
    // The target keys' types, then the writes: one write of the lock's protected data.
    server
        .data
        .written
        .entry(lock)
        .or_default()
        .push((token, fence));
    Reply::Applied
}

/// `ZSCORE K:exp token` on the data as the last step left it: the holder's deadline, while its
/// record is there and `K:exp` lives (shared.lua `set_expiry`: it expires at the latest
/// holder's deadline or, while requests are queued, at `until`, whichever is later).
fn zscore(server: &Server, now: Ms, name: Name, token: Token) -> Option<Ms> {
    let lock = server.data.shared.get(&name)?;
    let holder = lock.holders.get(&token)?;
    let latest = lock.holders.values().map(|h| h.deadline).max().unwrap_or(0);
    (now < latest.max(lock.until)).then_some(holder.deadline)
}

/// fenced.lua "set": `value` written at the data key `key`, with `fence` as its stored fence,
/// unless the stored fence is larger (an equal one writes again: a holder's second write, or a
/// retry). The script compares decimal strings (longer is larger, then byte by byte), which is
/// the order of the u64s: the model compares the numbers. Foreign data at either key and a data
/// key of another type are not modelled (no step writes there).
pub(crate) fn fenced_set(server: &mut Server, key: Name, fence: u64, value: Token) -> Reply {
    if let Some(&(stored, _)) = server.data.fenced.get(&key)
        && stored > fence
    {
        return Reply::Stale { stored };
    }
    server.data.fenced.insert(key, (fence, value));
    Reply::Written
}
