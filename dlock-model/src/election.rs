//! The election's steps: election.lua (publish, resign) and election_read.lua, each one atomic
//! step over [`Server`]. The leadership itself is a hold of the mutex of the same name
//! (`crate::mutex`); the record is written only by the holder with its hold's fence, and
//! refused (E1) when its key holds data dlock did not write.

use crate::mutant::Mutant;
use crate::server::{Key, Ms, Name, Record, Reply, ScriptError, Server, Token};

/// Whether `token` holds the election's lock with `fence` kept in its value.
fn leads(server: &Server, name: Name, token: Token, fence: u64) -> bool {
    server.foreign(&[Key::Lock(name)]).is_none()
        && server
            .data
            .locks
            .get(&name)
            .is_some_and(|h| h.token == token && h.fence == Some(fence))
}

/// election.lua mode "publish": write the record (unless it is ours already: then refresh
/// its expiry), at twice the lock's remaining lease.
pub(crate) fn publish(
    server: &mut Server,
    now: Ms,
    name: Name,
    token: Token,
    fence: u64,
    value: u8,
) -> Reply {
    if !leads(server, name, token, fence) && !server.is(Mutant::ElectionPublishSkipsLead) {
        return Reply::Int(-1);
    }
    // E1: another program's data at the record's key is refused by name, before any write.
    if server.data.foreign.contains(&Key::Leader(name))
        && !server.is(Mutant::ElectionOverwritesForeign)
    {
        return Reply::Err(ScriptError::Foreign(Key::Leader(name)));
    }
    let pttl = server
        .data
        .locks
        .get(&name)
        .filter(|h| h.live(now))
        .map_or(0, |h| h.deadline.saturating_sub(now));
    if pttl == 0 {
        return Reply::Int(-1);
    }
    let current = server.data.leaders.get(&name).copied();
    if current.is_some_and(|r| r.fence > fence) {
        return Reply::Int(-1);
    }
    let deadline = now + 2 * pttl;
    if let Some(r) = current.filter(|r| r.fence == fence && r.value == value) {
        server.data.leaders.insert(name, Record { deadline, ..r });
        return Reply::Int(0);
    }
    server.write(Key::Leader(name));
    server.data.leaders.insert(
        name,
        Record {
            fence,
            value,
            deadline,
        },
    );
    Reply::Int(1)
}

/// election.lua mode "resign": delete the record if it is ours.
pub(crate) fn resign(server: &mut Server, name: Name, token: Token, fence: u64) -> Reply {
    if !leads(server, name, token, fence) {
        return Reply::Int(-1);
    }
    if server.foreign(&[Key::Leader(name)]).is_some() {
        return Reply::Int(0);
    }
    match server.data.leaders.get(&name) {
        Some(r) if r.fence == fence => {
            server.data.leaders.remove(&name);
            Reply::Int(1)
        }
        _ => Reply::Int(0),
    }
}

/// election_read.lua: the lock's fence, and the record only while its fence is the lock's. A
/// lock key kept past its holder's deadline for the candidates who wait (issue #35) is held
/// by nobody: its fence is no leader's, as the script reads it (0).
pub(crate) fn read(server: &Server, now: Ms, name: Name) -> Reply {
    let lock_fence = server
        .data
        .locks
        .get(&name)
        .filter(|h| h.live(now) || server.is(Mutant::ReadIgnoresDeadline))
        .and_then(|h| h.fence)
        .unwrap_or(0);
    match server.data.leaders.get(&name) {
        Some(r) if lock_fence > 0 && r.fence == lock_fence => Reply::Leader {
            lock_fence,
            leader_fence: lock_fence,
            value: r.value,
        },
        _ => Reply::Leader {
            lock_fence,
            leader_fence: 0,
            value: 0,
        },
    }
}
