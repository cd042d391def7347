//! [`GuardedWrite`]: writes to Redis that take effect only while a hold is still the caller's,
//! checked in the same atomic step as the writes (`scripts/guarded.lua`).
//!
//! A fencing token protects data only where the store checks it; for data kept in Redis beside
//! the lock, the lock itself is the check: the script reads the hold's owner token (a mutex's
//! lock value, a shared holder's record and deadline) and runs the writes only if it is still
//! there, by the server's clock, in one script. A holder that was paused past its lease, whose
//! lock was forced open or taken over, writes nothing.
//!
//! * **One round trip**, as a plain write: the batch is one `EVALSHA`.
//! * **One slot.** A script touches keys of one cluster slot, so on a Cluster every target key
//!   must hash like the lock: name them with the lock name as hash tag (`balance:{order:42}`
//!   for the lock `order:42`). A mismatch is [`ErrorKind::InvalidInput`] naming the keys, before
//!   anything is sent. A standalone server takes any key; naming keys this way keeps the code
//!   ready for a cluster.
//! * **Not dlock's keys.** A target key under the client's key prefix (the lock itself, its
//!   queue, the fence counter) is refused: a guarded `DEL` of the lock would open it.
//! * **Checked before the first write**: the ownership, then each target key's type as the
//!   command will find it. A refused batch changes nothing.
//! * **Not a transaction.** A command that fails at run time (`INCR` of a string that is not a
//!   number) gets its error reply and the others still run, so the commands before it stay
//!   applied — as `MULTI`/`EXEC` does. Guard the values you write, or keep such commands last.
//! * `MultiGuard` and `QuorumGuard` cannot guard a write: their holds live in several slots or
//!   on several servers, which no one script reaches. Their `guarded()` answers
//!   [`ErrorKind::InvalidInput`] at `exec`; write under one member's guard, or pass the fencing
//!   token to [`crate::Client::fenced_set`].

use std::fmt;
use std::sync::Arc;

use redis::{FromRedisValue, ToRedisArgs, Value};

use crate::error::{Error, ErrorKind, Result};
use crate::key::key_slot;
use crate::lease::{Lease, LeaseCore, LostReason};
use crate::scripts::{self, Call, unexpected};
use crate::token::ExtendOwner;

/// The commands a guarded write runs, with the type their key must hold: the client's copy of
/// the table in `guarded.lua` (a test holds the two together).
const COMMANDS: [(&str, &str); 34] = [
    ("SET", "string"),
    ("GET", "string"),
    ("GETDEL", "none"),
    ("INCR", "string"),
    ("INCRBY", "string"),
    ("INCRBYFLOAT", "string"),
    ("DECR", "string"),
    ("DECRBY", "string"),
    ("APPEND", "string"),
    ("SETRANGE", "string"),
    ("HSET", "hash"),
    ("HSETNX", "hash"),
    ("HDEL", "hash"),
    ("HINCRBY", "hash"),
    ("HINCRBYFLOAT", "hash"),
    ("HGET", "hash"),
    ("RPUSH", "list"),
    ("LPUSH", "list"),
    ("LTRIM", "list"),
    ("LREM", "list"),
    ("LSET", "list"),
    ("LPOP", "list"),
    ("RPOP", "list"),
    ("SADD", "set"),
    ("SREM", "set"),
    ("ZADD", "zset"),
    ("ZREM", "zset"),
    ("ZINCRBY", "zset"),
    ("DEL", "none"),
    ("UNLINK", "none"),
    ("EXPIRE", "any"),
    ("PEXPIRE", "any"),
    ("PERSIST", "any"),
    ("EXISTS", "any"),
];

/// The most arguments one command of a guarded write or one fenced write may carry: the scripts
/// spread them with Lua's `unpack`, which stops at 8,000 values (Redis's Lua 5.1); refused before
/// anything is sent, so no script fails half-way over it.
pub(crate) const MAX_ARGS: usize = 7_000;

/// One command of the batch.
struct Command {
    name: &'static str,
    key: Vec<u8>,
    args: Vec<Vec<u8>>,
}

/// Whose hold guards the batch.
enum Owner {
    /// A hold on one lock: a mutex, a semaphore's permits, a read or write hold.
    Hold(Arc<LeaseCore>),
    /// A guard that cannot guard a write (`what` names it).
    Cannot(&'static str),
}

/// A batch of Redis writes that takes effect only while the hold it was made from is still the
/// caller's; made by `guarded()` on a [`crate::MutexGuard`], [`crate::Permit`],
/// [`crate::ReadGuard`], [`crate::WriteGuard`] or [`crate::Lease`]. Built like a
/// `redis::Pipeline`, sent by [`GuardedWrite::exec`] in one round trip. See the module docs
/// for what it checks.
///
/// ```no_run
/// # async fn demo(lock: dlock_core::Mutex) -> Result<(), dlock_core::Error> {
/// // The lock "order:42"; the data shares its hash tag.
/// let guard = lock.acquire().await?;
/// let outcome = guard
///     .guarded()
///     .hset("order:{order:42}", "status", "paid")
///     .incr("paid-total:{order:42}", 1250)
///     .exec()
///     .await?;
/// if !outcome.is_applied() {
///     // The lease ran out or another holder took over: nothing was written.
/// }
/// # Ok(()) }
/// ```
#[must_use = "nothing is written until `exec` is awaited"]
pub struct GuardedWrite {
    owner: Owner,
    commands: Vec<Command>,
    /// The first argument that could not be used, reported by `exec`.
    invalid: Option<String>,
}

/// What a [`GuardedWrite`] found.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Guarded {
    /// The hold was the caller's: every command ran. One reply per command, in order; a command
    /// that failed at run time has the server's error text instead, and the others ran.
    Applied(Vec<std::result::Result<Value, String>>),
    /// The hold is not the caller's any more: nothing was written. The lease is reported lost.
    Refused(Refused),
}

/// Why a [`GuardedWrite`] was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refused {
    /// The hold ended: its lease ran out, it was released, or an operator forced the lock open
    /// (for a semaphore or read-write lock: the holder's record is gone or past its deadline).
    Lost,
    /// Another owner holds the mutex now.
    TakenOver,
}

impl Guarded {
    /// Whether the writes were applied.
    pub fn is_applied(&self) -> bool {
        matches!(self, Self::Applied(_))
    }

    /// The replies of an applied batch, in command order; `None` when it was refused.
    pub fn replies(&self) -> Option<&[std::result::Result<Value, String>]> {
        match self {
            Self::Applied(replies) => Some(replies),
            Self::Refused(_) => None,
        }
    }

    /// The reply of the command at `index`, converted, like a pipeline's.
    ///
    /// # Errors
    /// [`ErrorKind::LeaseLost`] when the batch was refused; [`ErrorKind::InvalidInput`] for an
    /// index past the last command; the command's own error ([`ErrorKind::Redis`]) when it
    /// failed at run time; [`ErrorKind::Protocol`] when the reply does not convert to `T`.
    pub fn reply<T: FromRedisValue>(&self, index: usize) -> Result<T> {
        let replies = match self {
            Self::Applied(replies) => replies,
            Self::Refused(why) => {
                return Err(Error::new(
                    ErrorKind::LeaseLost,
                    format!("guarded write refused ({why}): no command ran"),
                ));
            }
        };
        let reply = replies.get(index).ok_or_else(|| {
            Error::invalid(format!(
                "guarded write: no command {index} (the batch had {})",
                replies.len()
            ))
        })?;
        let value = reply.as_ref().map_err(|e| {
            Error::new(
                ErrorKind::Redis,
                format!("guarded write: command {index} failed: {e}"),
            )
        })?;
        T::from_redis_value(value.clone()).map_err(|e| {
            Error::protocol(format!(
                "guarded write: the reply of command {index} is not of the type asked for: {e}"
            ))
        })
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Lost => "the hold ended",
            Self::TakenOver => "another owner holds the lock",
        })
    }
}

impl Lease {
    /// A batch of Redis writes applied only while this lease is still ours, checked in the same
    /// atomic step; see [`GuardedWrite`].
    pub fn guarded(&self) -> GuardedWrite {
        GuardedWrite::new(self.core.clone())
    }
}

/// The bytes of a key argument, which must be exactly one argument.
fn key_bytes(key: &impl ToRedisArgs) -> std::result::Result<Vec<u8>, String> {
    let mut args = key.to_redis_args();
    if args.len() == 1 {
        Ok(args.pop().unwrap_or_default())
    } else {
        Err(format!(
            "a key must be one argument, this one is {}",
            args.len()
        ))
    }
}

macro_rules! commands {
    ($(
        $(#[$doc:meta])*
        $method:ident => $name:literal ( $($arg:ident : $ty:ident),* );
    )*) => {
        $(
            $(#[$doc])*
            pub fn $method<K: ToRedisArgs $(, $ty: ToRedisArgs)*>(
                &mut self,
                key: K,
                $($arg: $ty),*
            ) -> &mut Self {
                #[allow(unused_mut)] // the commands without arguments
                let mut args = Vec::new();
                $( args.extend($arg.to_redis_args()); )*
                self.push($name, &key, args)
            }
        )*
    };
}

impl GuardedWrite {
    pub(crate) fn new(lease: Arc<LeaseCore>) -> Self {
        Self {
            owner: Owner::Hold(lease),
            commands: Vec::new(),
            invalid: None,
        }
    }

    /// The batch of a guard that cannot guard writes (`what` names it); `exec` explains.
    pub(crate) fn cannot(what: &'static str) -> Self {
        Self {
            owner: Owner::Cannot(what),
            commands: Vec::new(),
            invalid: None,
        }
    }

    fn push(
        &mut self,
        name: &'static str,
        key: &impl ToRedisArgs,
        args: Vec<Vec<u8>>,
    ) -> &mut Self {
        let key = key_bytes(key).and_then(|key| {
            if args.len() > MAX_ARGS {
                Err(format!(
                    "{} arguments, more than the {MAX_ARGS} one command of a guarded write \
                     may carry; split it into several commands",
                    args.len()
                ))
            } else {
                Ok(key)
            }
        });
        match key {
            Ok(key) => self.commands.push(Command { name, key, args }),
            Err(why) => {
                self.invalid.get_or_insert_with(|| {
                    format!("{name} (command {}): {why}", self.commands.len())
                });
            }
        }
        self
    }

    commands! {
        /// `SET key value`.
        set => "SET"(value: V);
        /// `GET key` (its reply is among the results).
        get => "GET"();
        /// `GETDEL key`.
        get_del => "GETDEL"();
        /// `INCRBY key delta`.
        incr => "INCRBY"(delta: D);
        /// `INCRBYFLOAT key delta`.
        incr_float => "INCRBYFLOAT"(delta: D);
        /// `APPEND key value`.
        append => "APPEND"(value: V);
        /// `HSET key field value`.
        hset => "HSET"(field: F, value: V);
        /// `HSET key field value [field value …]`, from pairs.
        hset_multiple => "HSET"(pairs: P);
        /// `HSETNX key field value`.
        hset_nx => "HSETNX"(field: F, value: V);
        /// `HDEL key field`.
        hdel => "HDEL"(field: F);
        /// `HINCRBY key field delta`.
        hincr => "HINCRBY"(field: F, delta: D);
        /// `HGET key field`.
        hget => "HGET"(field: F);
        /// `RPUSH key value…`.
        rpush => "RPUSH"(values: V);
        /// `LPUSH key value…`.
        lpush => "LPUSH"(values: V);
        /// `LTRIM key start stop`.
        ltrim => "LTRIM"(start: S, stop: E);
        /// `SADD key member…`.
        sadd => "SADD"(members: M);
        /// `SREM key member…`.
        srem => "SREM"(members: M);
        /// `ZADD key score member`.
        zadd => "ZADD"(score: S, member: M);
        /// `ZREM key member…`.
        zrem => "ZREM"(members: M);
        /// `DEL key`.
        del => "DEL"();
        /// `EXPIRE key seconds`.
        expire => "EXPIRE"(seconds: S);
        /// `PEXPIRE key milliseconds`.
        pexpire => "PEXPIRE"(millis: S);
    }

    /// Any other supported command on one key: `name key args…`. Supported are the string
    /// commands `SET GET GETDEL INCR INCRBY INCRBYFLOAT DECR DECRBY APPEND SETRANGE`, the hash
    /// commands `HSET HSETNX HDEL HINCRBY HINCRBYFLOAT HGET`, the list commands `RPUSH LPUSH
    /// LTRIM LREM LSET LPOP RPOP`, `SADD SREM`, `ZADD ZREM ZINCRBY`, and `DEL UNLINK EXPIRE
    /// PEXPIRE PERSIST EXISTS`: each works on the one key after its name. Another name makes
    /// `exec` fail with [`ErrorKind::InvalidInput`] (nothing is sent).
    pub fn cmd<K: ToRedisArgs, A: ToRedisArgs>(
        &mut self,
        name: &str,
        key: K,
        args: A,
    ) -> &mut Self {
        let upper = name.to_ascii_uppercase();
        match COMMANDS.iter().find(|(command, _)| *command == upper) {
            Some((command, _)) => self.push(command, &key, args.to_redis_args()),
            None => {
                self.invalid.get_or_insert_with(|| {
                    format!(
                        "`{name}` (command {}) is not a command a guarded write runs; see \
                         GuardedWrite::cmd for the list",
                        self.commands.len()
                    )
                });
                self
            }
        }
    }

    /// Sends the batch: the hold is checked and the commands run in one script, in one round
    /// trip.
    ///
    /// # Errors
    /// * [`ErrorKind::InvalidInput`], nothing sent: no command; a command not supported; on a
    ///   Cluster, a key in another slot than the lock (the message names the keys); a key
    ///   under the client's key prefix; a `MultiGuard`'s or `QuorumGuard`'s batch.
    /// * [`ErrorKind::Redis`], nothing written: a target key holds a type its command cannot
    ///   work on (the message names the key, its type and the command).
    /// * [`ErrorKind::WrongType`]: the lock key holds data dlock did not write.
    /// * Connection errors and [`ErrorKind::Timeout`]: the batch may have taken effect.
    ///
    /// A refused batch is not an error: it is [`Guarded::Refused`].
    ///
    /// # Cancel safety
    /// Dropping the future after the request was sent leaves it to run or not, as a dropped
    /// pipeline does; the script is atomic either way.
    pub async fn exec(&self) -> Result<Guarded> {
        let lease = match &self.owner {
            Owner::Hold(lease) => lease.clone(),
            Owner::Cannot(what) => {
                return Err(Error::invalid(format!(
                    "a {what} cannot guard a write: its holds live in several cluster slots or \
                     on several servers, and no one Redis script reaches them all. Guard the \
                     write with one member's guard, or check the fencing token where the data \
                     is (Client::fenced_set)"
                )));
            }
        };
        let name = lease.keys.name();
        if let Some(why) = &self.invalid {
            return Err(Error::invalid(format!(
                "guarded write under `{name}`: {why}"
            )));
        }
        if self.commands.is_empty() {
            return Err(Error::invalid(format!(
                "guarded write under `{name}`: no command to run"
            )));
        }
        let call = self.call(&lease)?;
        let reply = lease.transport.run(&call, "guarded write", name).await?;
        self.decode(&lease, reply)
    }

    /// The script call; refuses keys that no script of the lock's slot may touch.
    fn call(&self, lease: &LeaseCore) -> Result<Call> {
        let lock: &str = &lease.keys.lock;
        let name = lease.keys.name();
        let ours = self.keys_where(|key| lease.keys.is_dlocks(key));
        if !ours.is_empty() {
            return Err(Error::invalid(format!(
                "guarded write under `{name}`: {} where dlock keeps its own state (the key \
                 prefix `{}`); a guarded write never changes dlock's keys. Name your data \
                 outside it",
                quoted(&ours),
                lease.keys.prefix()
            )));
        }
        if lease.transport.slot().is_cluster() {
            let slot = lease.keys.slot();
            let elsewhere = self.keys_where(|key| key_slot(key) != slot);
            if !elsewhere.is_empty() {
                return Err(Error::invalid(format!(
                    "guarded write under `{name}`: {} not in the lock's cluster slot; one script \
                     reaches one slot. Give each key the lock name as hash tag, e.g. \
                     `balance:{{{name}}}`",
                    quoted(&elsewhere)
                )));
            }
        }
        // KEYS: the lock, K:exp for a shared lock, then each target key once.
        let shared = lease.keys.kind().is_shared();
        let mut targets: Vec<&[u8]> = Vec::new();
        for command in &self.commands {
            if !targets.contains(&command.key.as_slice()) {
                targets.push(&command.key);
            }
        }
        let first = if shared { 3 } else { 2 };
        let mut call = Call::new(&scripts::GUARDED, first - 1 + targets.len());
        call.arg(lock);
        if shared {
            call.arg(format!("{lock}:exp"));
        }
        for key in &targets {
            call.arg(*key);
        }
        call.arg(ExtendOwner {
            token: lease.token,
            kind: lease.keys.kind(),
        })
        .arg(self.commands.len());
        for command in &self.commands {
            let index = targets
                .iter()
                .position(|k| *k == command.key.as_slice())
                .unwrap_or_default()
                + first;
            call.arg(command.name).arg(index).arg(command.args.len());
            for arg in &command.args {
                call.arg(arg.as_slice());
            }
        }
        Ok(call)
    }

    /// The target keys for which `hit` holds, each once, in batch order, as text.
    fn keys_where(&self, hit: impl Fn(&[u8]) -> bool) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for command in self.commands.iter().filter(|c| hit(&c.key)) {
            let key = String::from_utf8_lossy(&command.key).into_owned();
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }

    fn decode(&self, lease: &LeaseCore, reply: Value) -> Result<Guarded> {
        let Value::Array(mut items) = reply else {
            return Err(unexpected("guarded write", &reply));
        };
        match (items.first(), items.get(1)) {
            (Some(Value::Int(1)), _) if items.len() == self.commands.len() + 1 => {
                let replies: Option<Vec<_>> = items
                    .drain(1..)
                    .map(|item| match item {
                        Value::Array(pair) => match <[Value; 2]>::try_from(pair) {
                            Ok([Value::Int(1), reply]) => Some(Ok(reply)),
                            Ok([Value::Int(0), error]) => Some(Err(scripts::text(&error)?)),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect();
                match replies {
                    Some(replies) => Ok(Guarded::Applied(replies)),
                    None => Err(Error::protocol(
                        "guarded write: a command's reply is not in the script's format",
                    )),
                }
            }
            (Some(Value::Int(0)), Some(why)) => {
                let refused = match scripts::text(why).as_deref() {
                    Some("taken") => Refused::TakenOver,
                    Some("gone") => Refused::Lost,
                    _ => return Err(unexpected("guarded write", &Value::Array(items))),
                };
                lease.fire_lost(match refused {
                    Refused::TakenOver => LostReason::TakenOver,
                    Refused::Lost => LostReason::Expired,
                });
                Ok(Guarded::Refused(refused))
            }
            (Some(Value::Int(-1)), Some(key)) => {
                let text = |i: usize| items.get(i).and_then(scripts::text).unwrap_or_default();
                let (key, kind, command) =
                    (scripts::text(key).unwrap_or_default(), text(2), text(3));
                Err(Error::new(
                    ErrorKind::Redis,
                    format!(
                        "guarded write under `{}`: the key `{key}` holds a {kind}, which {command} \
                         cannot work on; nothing was written",
                        lease.keys.name()
                    ),
                ))
            }
            _ => Err(unexpected("guarded write", &Value::Array(items))),
        }
    }
}

/// `keys` as "the key `a`" or "the keys `a`, `b`".
fn quoted(keys: &[String]) -> String {
    let list: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
    if list.len() == 1 {
        format!("the key {} is", list[0])
    } else {
        format!("the keys {} are", list.join(", "))
    }
}

impl fmt::Debug for GuardedWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.commands.iter().map(|c| c.name).collect();
        f.debug_struct("GuardedWrite")
            .field("commands", &names)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client's table and the script's name the same commands with the same types.
    #[test]
    fn the_client_and_the_script_support_the_same_commands() {
        let lua = include_str!("../scripts/guarded.lua");
        let start = lua.find("local WRITES = ").expect("the list");
        let end = start + lua[start..].find("\n\n").expect("its end");
        let mut in_script: Vec<(String, String)> = lua[start..end]
            .split(|c: char| c.is_whitespace() || c == '\'')
            .filter_map(|entry| {
                let (name, kind) = entry.split_once('=')?;
                (!name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase()))
                    .then(|| (name.to_owned(), kind.to_owned()))
            })
            .collect();
        let mut in_client: Vec<(String, String)> = COMMANDS
            .iter()
            .map(|(n, k)| ((*n).to_owned(), (*k).to_owned()))
            .collect();
        in_script.sort();
        in_client.sort();
        assert_eq!(in_script, in_client);
    }
}
