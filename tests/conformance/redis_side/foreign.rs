//! Another program's data, written where dlock keeps its keys (`foreign.rs`, `ask.rs`): what
//! kind of data ([`Kind`]) at which key ([`At`]: a key of the model, or one the model does not
//! name — a shared lock's `:limit`, a guarded write's target, fenced.lua's keys). The model
//! knows only that a key holds data dlock could not have written; the kinds are the real
//! variants of that, each refused by its own branch of a script.

use dlock_core::__private::conformance::lock_value;
use dlock_model::{Key, LockRef};
use redis::Value;

use super::{HOLDER, Real, io, token_hex};

/// Where the data goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum At {
    /// A key of the model.
    Key(Key),
    /// A shared lock's `K:limit` (set by `set_limit`).
    Limit(u8),
    /// A lock's guarded-write target (`<lock>:written`).
    Written(LockRef),
    /// fenced.lua's data key number `n`.
    FencedData(u8),
    /// fenced.lua's fence key of data key `n`.
    FencedFence(u8),
}

/// What is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A string no dlock writes: `"not written by dlock"`.
    Text,
    /// A hash `{a: b}` (at a mutex key, a list, a string: another type).
    Hash,
    /// A list `[x]`.
    List,
    /// A mutex value of a newer format version (3), with a lease.
    NewerLock,
    /// A mutex value of dlock's format without an expiry (someone's `PERSIST`).
    Unexpiring,
    /// A shared lock's hash of a newer format version (`v` = 2).
    NewerHash,
    /// A hash whose `v` is no version (`v` = `x`).
    OtherHash,
    /// A sorted set `{token: now + a lease}` without an expiry (a shared lock's `K:exp` that
    /// lost it).
    UnexpiringZset,
    /// A leader record of dlock's format with a fence larger than any the server issues.
    LargerRecord,
}

/// A token no request of a case has (its value is dlock's format, not its holder).
const STRANGER: u32 = 0xdead;

impl Real {
    /// The Redis key of `at`.
    pub(crate) fn name_of(&self, at: At) -> Result<String, String> {
        let shared = |n| self.key(LockRef::Shared(n)).to_owned();
        Ok(match at {
            At::Key(Key::Lock(n)) => self.key(LockRef::Mutex(n)).to_owned(),
            At::Key(Key::Queue(n)) => format!("{}:queue", self.key(LockRef::Mutex(n))),
            At::Key(Key::Shared(n)) => shared(n),
            At::Key(Key::SharedExp(n)) => format!("{}:exp", shared(n)),
            At::Key(Key::SharedQueue(n)) => format!("{}:queue", shared(n)),
            At::Key(Key::Counter) => self.counter(self.key(LockRef::Mutex(0))).to_owned(),
            At::Key(Key::Leader(n)) => format!("{}:leader", self.key(LockRef::Mutex(n))),
            At::Key(Key::Ask(lock)) => self.ask_key(lock),
            At::Limit(n) => format!("{}:limit", shared(n)),
            At::Written(lock) => self.written_key(lock),
            At::FencedData(n) => Real::fenced_keys(n)?.0,
            At::FencedFence(n) => Real::fenced_keys(n)?.1,
        })
    }

    /// Writes `kind` at `at`, replacing whatever was there; the key's name.
    pub(crate) fn write_foreign(&mut self, at: At, kind: Kind) -> Result<String, String> {
        let key = self.name_of(at)?;
        let mut pipe = redis::pipe();
        pipe.atomic().cmd("DEL").arg(&key).ignore();
        let stranger = token_hex(STRANGER);
        match kind {
            Kind::Text => pipe.cmd("SET").arg(&key).arg("not written by dlock"),
            Kind::Hash => pipe.cmd("HSET").arg(&key).arg("a").arg("b"),
            Kind::List => pipe.cmd("RPUSH").arg(&key).arg("x"),
            Kind::NewerLock => pipe
                .cmd("SET")
                .arg(&key)
                .arg(format!("{stranger}-3 {HOLDER}\x1f"))
                .arg("PX")
                .arg(super::UNIT),
            Kind::Unexpiring => {
                let value = lock_value(&stranger, HOLDER, "").ok_or("token")?;
                pipe.cmd("SET").arg(&key).arg(value)
            }
            Kind::NewerHash => pipe.cmd("HSET").arg(&key).arg("v").arg("2"),
            Kind::OtherHash => pipe.cmd("HSET").arg(&key).arg("v").arg("x"),
            Kind::UnexpiringZset => {
                let now: (u64, u64) = redis::cmd("TIME")
                    .query(&mut self.con)
                    .map_err(io("TIME"))?;
                pipe.cmd("ZADD")
                    .arg(&key)
                    .arg(now.0 * 1000 + super::UNIT)
                    .arg(&stranger)
            }
            // Sixteen nines: above every fence the server's microsecond clock issues.
            Kind::LargerRecord => pipe.cmd("SET").arg(&key).arg("1 9999999999999999 9"),
        }
        .ignore();
        pipe.exec(&mut self.con).map_err(io("foreign data"))?;
        Ok(key)
    }

    /// `DUMP <key>`: its serialized content, to check that nothing changed it.
    pub(crate) fn dump(&mut self, key: &str) -> Result<Value, String> {
        self.raw(redis::cmd("DUMP").arg(key))
    }
}

impl Real {
    /// `source` run with `keys` and `args` as given (the calls the model has no step for).
    pub(crate) fn script(
        &mut self,
        source: dlock_core::__private::conformance::Source,
        keys: &[&str],
        args: &[String],
    ) -> Result<super::Answer, String> {
        self.call(source, keys, args)
    }
}
