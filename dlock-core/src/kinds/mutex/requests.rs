//! What the mutex sends to acquire, and what the replies mean: the uncontended attempt (a plain
//! `SET … NX`, or with `fenced` a `MULTI` that also issues the fence: see `fence_epoch.rs`),
//! one run of `acquire.lua`, the caller's queue entry, and the mutex's part of the one wait loop
//! ([`Queued`], `kinds/queue.rs`), with its warning for a wait on the client's own hold.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::{Cmd, Value};

use super::handle::Mutex;
use crate::client::context::Context;
use crate::error::{Error, ErrorKind, Result};
use crate::fence_epoch::Ticket;
use crate::key::LockKeys;
use crate::kinds::queue::{Answer, Granted, Mode, Queued};
use crate::options::LockSettings;
use crate::scripts::wire::{self, LockValue};
use crate::scripts::{self, AcquireReply, Call, FastReply, FenceReply, unexpected};
use crate::timing;
use crate::token::OwnerToken;

/// What the uncontended acquire found.
pub(super) enum Fast {
    /// The lock is the caller's now (with its fence, when asked for with `fenced`).
    Taken { fence: Option<u64> },
    /// Another owner holds it, or callers queued for it first (it was handed to them).
    Busy,
}

/// A lock just taken in Redis, before it becomes a lease (its fence, when one was issued with
/// it: fences are issued on demand).
pub(super) type Taken = Granted<Option<u64>>;

/// What the wait loop ([`queue::wait_in_line`]) asks of the mutex.
impl Queued for &Mutex {
    type Fence = Option<u64>;
    type Watch = SelfWait;

    fn ctx(&self) -> &Arc<Context> {
        &self.ctx
    }

    fn keys(&self) -> &LockKeys {
        &self.keys
    }

    fn settings(&self) -> &LockSettings {
        &self.settings
    }

    /// The uncontended path: one round trip of a plain `SET` (see [`Mutex::fast_attempt`]).
    async fn try_once(&self, token: OwnerToken) -> Result<Option<(Option<u64>, Duration)>> {
        match self.fast_attempt(token).await? {
            Fast::Taken { fence } => Ok(Some((fence, self.settings.ttl))),
            Fast::Busy => {
                tracing::debug!("dlock: contended; waiting");
                Ok(None)
            }
        }
    }

    fn queue_entry(&self, token: OwnerToken) -> Arc<str> {
        Mutex::queue_entry(self, token)
    }

    async fn ask(&self, token: OwnerToken, mode: Mode, entry: &str) -> Result<Answer<Option<u64>>> {
        Ok(match self.attempt(token, mode, entry).await? {
            AcquireReply::Taken { fence } => Answer::Granted {
                fence: Some(fence),
                pttl: self.settings.ttl,
            },
            AcquireReply::Owned { fence, pttl } => Answer::Granted { fence, pttl },
            AcquireReply::Held { pttl, server_ms } => Answer::Queued {
                until_free: pttl,
                server_ms,
            },
        })
    }

    fn still_waiting(&self, watch: &mut SelfWait) {
        watch.check(self);
    }
}

impl Mutex {
    /// The fence the fenced fast path's `MULTI` issued (see `fence_epoch.rs`): its plain
    /// `INCR`, if no floor applies ([`wire::counted_fence`]) and it ran on the connection the
    /// slot's counter was floored on, or the one `fence.lua` issued in it. `None` sends the
    /// acquire to `fence.lua` in a round trip of its own. `replies`: `SET`, then what
    /// `ticket` added (`INCR` or `fence.lua`; `CLIENT GETNAME`; `CLIENT SETNAME`).
    fn counted_fence(&self, ticket: &Ticket, replies: &[Value]) -> Option<u64> {
        let mut added = replies.get(1..)?.iter();
        // What issued the fence: the plain INCR, or fence.lua.
        let issued = if ticket.trusted() {
            Ok(added.next()?)
        } else {
            Err(added.next()?)
        };
        let name = if ticket.reads_name() {
            match added.next()? {
                Value::BulkString(name) => Some(name.as_slice()),
                _ => None,
            }
        } else {
            None
        };
        let named = ticket
            .set_name()
            .map(|_| matches!(added.next(), Some(Value::Okay | Value::SimpleString(_))));
        let same = ticket.read(&self.ctx.fence_epochs, name, named);
        match issued {
            // Taken only on the connection the slot was floored on.
            Ok(incr) => same.then(|| wire::counted_fence(incr)).flatten(),
            // fence.lua floored the counter and took the fence: on the epoch's connection,
            // plain INCRs of the slot will do from now on. An error in its place (NOSCRIPT on
            // a fresh server, a foreign counter) leaves it to fence.lua's own round trip.
            Err(reply) => {
                let fence = FenceReply::decode(reply)?.fence()?;
                if same {
                    ticket.floored();
                }
                Some(fence)
            }
        }
    }

    /// The caller's queue entry (see `scripts/wire.rs`).
    fn queue_entry(&self, token: OwnerToken) -> Arc<str> {
        wire::queue_entry(
            &token,
            &self.ctx.client_id,
            timing::millis(self.settings.ttl),
            self.ctx.transport.slot().publish_mode(),
            &self.ctx.transport.holder,
            self.settings.label.as_deref().unwrap_or_default(),
        )
        .into()
    }

    /// Runs `acquire.lua` once.
    async fn attempt(&self, token: OwnerToken, mode: Mode, entry: &str) -> Result<AcquireReply> {
        let mut call = Call::new(&scripts::ACQUIRE, 1);
        call.arg(&*self.keys.lock)
            .arg(LockValue {
                token: &token,
                holder: &self.ctx.transport.holder,
                label: self.settings.label.as_deref().unwrap_or_default(),
            })
            .arg(timing::millis(self.settings.ttl))
            .arg(mode.as_str())
            .arg(entry)
            .arg(self.keys.counter());
        let reply = self
            .ctx
            .transport
            .run(&call, "acquire", self.keys.name())
            .await?;
        AcquireReply::decode(&reply).ok_or_else(|| unexpected("acquire", &reply))
    }

    /// The uncontended acquire, in one round trip of one plain command: `SET <lock> <value> NX
    /// PX <ttl> GET` takes a free lock. While callers wait, the lock key is kept up to one lease
    /// past its holder's deadline (a version-2 value, `lock_value.lua`), so the `SET` fails and
    /// the caller queues behind them: FIFO holds when a holder's lease runs out with callers
    /// queued, without a look at the queue here. A held lock's value comes back with `GET`, so
    /// data dlock did not write is reported, never taken.
    ///
    /// With `fenced`, the same round trip issues the hold's fence: the commands run in a `MULTI`
    /// (so the fence is taken at the instant the lock is, and fences stay in holding order)
    /// with `INCR` of the slot's fence counter — on a connection on which the slot's counter
    /// was floored at the server clock before — or else with `fence.lua`, which floors it;
    /// `CLIENT GETNAME` tells which connection it ran on (`fence_epoch.rs`). A warm acquire is
    /// thus `MULTI`, `SET`, `INCR`, `CLIENT GETNAME`, `EXEC`. When a floor applies
    /// after all (a counter made anew), `fence.lua` issues the fence in a round trip of its
    /// own. A busy attempt's `INCR` leaves a gap in the counter, which is harmless.
    pub(super) async fn fast_attempt(&self, token: OwnerToken) -> Result<Fast> {
        match self.fast_attempt_once(token).await {
            // The ACL refused the connection's name commands: the server discarded the whole
            // MULTI (nothing was taken), and the next one goes without them.
            Err(e) if self.settings.fenced && self.ctx.fence_epochs.refused_names(&e) => {
                Box::pin(self.fast_attempt_once(token)).await
            }
            other => other,
        }
    }

    /// The fenced uncontended attempt: `set` in a `MULTI` with the fence's commands (see
    /// [`Mutex::fast_attempt`]). Returns the `SET`'s reply and the fence the `MULTI` issued, if
    /// the epoch trusts it; a command's error is explained (`ErrorKind::WrongType` for the
    /// `SET`'s, which the caller names).
    async fn fenced_attempt(&self, set: Cmd, token: &OwnerToken) -> Result<(Value, Option<u64>)> {
        let lock = &*self.keys.lock;
        let name = self.keys.name();
        let ticket = self.ctx.fence_epochs.ticket(self.keys.slot());
        let mut pipe = redis::Pipeline::with_capacity(4);
        pipe.ignore_errors();
        pipe.atomic();
        pipe.add_command(set);
        // A plain INCR on a connection on which this slot's counter was floored, else the
        // floor itself (`fence.lua`, `next_fence` at the server clock): see fence_epoch.rs.
        // Then which connection this ran on.
        if ticket.trusted() {
            let mut incr = Cmd::with_capacity(2, lock.len() + 48);
            incr.arg("INCR").arg(self.keys.counter());
            pipe.add_command(incr);
        } else {
            let mut call = Call::new(&scripts::FENCE, 1);
            call.arg(lock).arg(token).arg(self.keys.counter());
            pipe.add_command(call.cmd);
        }
        if ticket.reads_name() {
            let mut getname = Cmd::with_capacity(2, 16);
            getname.arg("CLIENT").arg("GETNAME");
            pipe.add_command(getname);
        }
        if let Some(set) = ticket.set_name() {
            pipe.cmd("CLIENT").arg("SETNAME").arg(set);
        }
        let replies = match self.ctx.transport.pipeline(&pipe, "acquire", name).await {
            Ok(replies) => replies,
            Err(e) => {
                ticket.failed(&self.ctx.fence_epochs);
                return Err(e);
            }
        };
        // Read for every outcome: the epoch learns whether its name was set.
        let counted = self.counted_fence(&ticket, &replies);
        match replies.into_iter().next() {
            Some(Value::ServerError(e)) => {
                ticket.failed(&self.ctx.fence_epochs);
                Err(self.ctx.transport.explain("acquire", name, e.into()).await)
            }
            Some(reply) => Ok((reply, counted)),
            None => Err(unexpected("acquire", &Value::Array(Vec::new()))),
        }
    }

    /// One uncontended attempt: see [`Mutex::fast_attempt`].
    async fn fast_attempt_once(&self, token: OwnerToken) -> Result<Fast> {
        let lock = &*self.keys.lock;
        let label = self.settings.label.as_deref().unwrap_or_default();
        // Each command's buffer is sized for it up front: grown from empty, argument by
        // argument, it was a third of the client's cost of writing the request (callgrind).
        let holder = &self.ctx.transport.holder;
        let mut set = Cmd::with_capacity(7, lock.len() + holder.len() + label.len() + 64);
        set.arg("SET")
            .arg(lock)
            .arg(LockValue {
                token: &token,
                holder,
                label,
            })
            .arg("NX")
            .arg("PX")
            .arg(timing::millis(self.settings.ttl))
            .arg("GET");
        let name = self.keys.name();
        let context = || format!("acquire `{name}`");
        let sent = if self.settings.fenced {
            self.fenced_attempt(set, &token).await
        } else {
            // One command, not a pipeline of one: no reply vector, no second buffer.
            let reply = self.ctx.transport.command(&set, "acquire", name).await;
            reply.map(|reply| (reply, None))
        };
        let (reply, counted) = match sent {
            Ok(sent) => sent,
            // The `SET`'s `WRONGTYPE`: the lock key holds another type, named as foreign data.
            Err(e) if e.kind() == ErrorKind::WrongType => {
                return Err(Error::foreign(&context(), lock, "holds another Redis type"));
            }
            Err(e) => return Err(e),
        };
        let reply = FastReply::decode(&reply).ok_or_else(|| unexpected("acquire", &reply))?;
        match reply {
            FastReply::Taken => {
                let fence = match counted {
                    Some(fence) => Some(fence),
                    None if !self.settings.fenced => None,
                    // A floor applies, or the counter holds something else: the script
                    // decides (and reports a foreign counter). Boxed, as the hand-off below:
                    // rare paths stay out of the acquire's future, which every waiting task
                    // carries. No fence when the lock was lost meanwhile (its lease ran out,
                    // or it was forced open): the lease learns it when it next asks.
                    None => {
                        let mut call = Call::new(&scripts::FENCE, 1);
                        call.arg(lock).arg(token).arg(self.keys.counter());
                        let reply =
                            Box::pin(self.ctx.transport.run(&call, "acquire", name)).await?;
                        FenceReply::decode(&reply)
                            .ok_or_else(|| unexpected("fencing token", &reply))?
                            .fence()
                    }
                };
                Ok(Fast::Taken { fence })
            }
            FastReply::Held(value) => {
                let value = String::from_utf8_lossy(&value);
                match wire::parse_lock_value(&value) {
                    Some(holder) if holder.version <= wire::READ_VERSION => {
                        if holder.token == token.hex().as_str() {
                            return Err(Error::protocol(format!(
                                "{}: the lock already held this acquisition's own token",
                                context()
                            )));
                        }
                        Ok(Fast::Busy)
                    }
                    Some(holder) => Err(Error::foreign(
                        &context(),
                        lock,
                        &format!(
                            "holds a lock of a newer dlock (format version {}); upgrade this \
                             client",
                            holder.version
                        ),
                    )),
                    None => Err(Error::foreign(
                        &context(),
                        lock,
                        "holds a value dlock did not write",
                    )),
                }
            }
        }
    }
}

/// Warns, once, when a waiting acquire has waited longer than the lease of a hold of the same
/// lock by its own client: if that hold belongs to the code that waits, the wait never ends.
/// (It lives in every waiting task's future: kept small.)
pub(crate) struct SelfWait {
    /// When the acquire started waiting; `None` once it warned.
    started: Option<Instant>,
}

impl SelfWait {
    pub(super) fn new(started: Instant) -> Self {
        Self {
            started: Some(started),
        }
    }

    /// Warns if the acquire waits for its own client's hold.
    fn check(&mut self, mutex: &Mutex) {
        let Some(started) = self.started else {
            return;
        };
        let Some(own) = mutex.ctx.held.get(&mutex.keys.lock) else {
            return;
        };
        let waited = started.elapsed();
        if waited < own.ttl() {
            return;
        }
        self.started = None;
        tracing::warn!(
            lock = %mutex.keys.name(),
            fence = ?own.issued_fence(),
            waited = ?waited,
            "dlock: waiting longer than a lease for a lock this client holds itself; if the \
             holder is the code that waits (a second acquire() while the first guard is alive), \
             it waits for itself: release the first guard, or run the nested work inside \
             with_lock / #[distributed_lock], where it re-enters"
        );
    }
}
