//! [`apply`]: one atomic step, dispatched to the function that mirrors its script
//! (`mutex.rs`, `shared.rs`, `election.rs`, `guarded.rs`, `ask.rs`) or run here (pub/sub,
//! foreign writes, replication, restarts).

use crate::server::{Data, Key, Ms, Op, Reply, Server};
use crate::{ask, election, guarded, mutex, shared};

/// Runs one atomic step at server time `now` and returns its reply. Published messages
/// collect in [`Server::published`].
///
/// What expired by `now` is dropped first (Redis expires keys by itself; the shared scripts
/// purge expired holders as they begin), except for guarded.lua, which purges nothing: it reads
/// a shared holder's record as the last step left it and judges it by its deadline.
pub fn apply(server: &mut Server, now: Ms, op: Op) -> Reply {
    if !matches!(op, Op::Guarded { .. }) {
        server.expire(now);
    }
    let reply = match op {
        Op::SetNxGet { name, token, lease } => mutex::set_nx_get(server, now, name, token, lease),
        Op::ExistsQueue { name } => Reply::Int(i64::from(server.data.queues.contains_key(&name))),
        Op::FencedFast {
            name,
            token,
            lease,
            incr,
        } => mutex::fenced_fast(server, now, name, token, lease, incr),
        Op::Acquire { name, entry, mode } => mutex::acquire(server, now, name, entry, mode),
        Op::Release {
            name,
            token,
            leaving,
            how,
        } => mutex::release(server, now, name, token, leaving, how),
        Op::NativeRelease { name, token } => mutex::native_release(server, name, token),
        Op::Fence { name, token } => mutex::fence(server, now, name, token),
        Op::Extend { items } => mutex::extend(server, now, &items),
        Op::SharedAcquire {
            name,
            entry,
            limit,
            mode,
        } => {
            let reply = shared::acquire(server, now, name, entry, limit, mode);
            shared::set_expiry(server, now, name, &reply);
            reply
        }
        Op::SharedRelease {
            name,
            token,
            leaving,
        } => {
            let reply = shared::release(server, now, name, token, leaving);
            shared::set_expiry(server, now, name, &reply);
            reply
        }
        Op::SetLimit { name, limit } => {
            let reply = shared::set_limit(server, now, name, limit);
            shared::set_expiry(server, now, name, &reply);
            reply
        }
        Op::RwChange {
            name,
            old,
            new,
            up,
            lease,
        } => {
            let reply = shared::rw_change(server, now, name, old, new, up, lease);
            shared::set_expiry(server, now, name, &reply);
            reply
        }
        Op::ElectionPublish {
            name,
            token,
            fence,
            value,
        } => election::publish(server, now, name, token, fence, value),
        Op::ElectionResign { name, token, fence } => election::resign(server, name, token, fence),
        Op::ElectionRead { name } => election::read(server, now, name),
        Op::Guarded { lock, token, fence } => guarded::guarded(server, now, lock, token, fence),
        Op::FencedSet { key, fence, value } => guarded::fenced_set(server, key, fence, value),
        Op::Ask { lock } => ask::ask(server, now, lock),
        Op::Subscribe { lock, client } => {
            server.subscribed.insert((lock, client));
            Reply::Ok
        }
        Op::Unsubscribe { lock, client } => {
            server.subscribed.remove(&(lock, client));
            Reply::Ok
        }
        Op::WriteForeign { key } => {
            write_foreign(server, key);
            Reply::Ok
        }
        Op::Replicate => {
            server.replica = Some(server.data.clone());
            Reply::Ok
        }
        Op::Restart { from_replica } => {
            server.data = if from_replica {
                server.replica.clone().unwrap_or_default()
            } else {
                Data::default()
            };
            server.epoch += 1;
            Reply::Ok
        }
    };
    server.expire(now);
    reply
}

/// Another program's write at `key`: dlock's content there is replaced.
fn write_foreign(server: &mut Server, key: Key) {
    let data = &mut server.data;
    match key {
        Key::Lock(n) => {
            data.locks.remove(&n);
        }
        Key::Queue(n) => {
            data.queues.remove(&n);
            data.queue_expires.remove(&n);
        }
        Key::Shared(n) => {
            if let Some(lock) = data.shared.get_mut(&n) {
                lock.limit = None;
                lock.holders.clear();
            }
        }
        Key::SharedExp(n) => {
            if let Some(lock) = data.shared.get_mut(&n) {
                lock.holders.clear();
            }
        }
        Key::SharedQueue(n) => {
            if let Some(lock) = data.shared.get_mut(&n) {
                lock.queue.clear();
            }
        }
        Key::Counter => data.counter = 0,
        Key::Leader(n) => {
            data.leaders.remove(&n);
        }
        Key::Ask(lock) => {
            data.asked.remove(&lock);
        }
    }
    data.foreign.insert(key);
}
