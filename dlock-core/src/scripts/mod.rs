//! The Lua scripts, one file each with its KEYS/ARGV/returns contract on top, hashed once, and
//! how a call is built and sent.
//!
//! A call is an `EVALSHA` command written straight into one [`Cmd`] buffer (keys and arguments
//! included, no intermediate copies); if the server does not know the script (first use, or a
//! Redis restart) it is loaded with `SCRIPT LOAD` and the call is sent once more. On a cluster the
//! load goes to every primary.

use std::sync::LazyLock;

use redis::{Cmd, Script, ToRedisArgs, Value};

/// Takes a free mutex, or reports its remaining lease and queues the caller.
pub(crate) static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("acquire.lua")));

/// Owner-checked release that hands the lock to the oldest live waiter.
pub(crate) static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("release.lua")));

/// Owner-checked lease extension of one or many locks (the watchdog's batches).
pub(crate) static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("extend.lua")));

/// Reads the holder, fence and queue length of a lock.
pub(crate) static INSPECT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("inspect.lua")));

/// One script call: `EVALSHA <sha> <numkeys> <keys…> <args…>`.
pub(crate) struct Call {
    pub(crate) script: &'static Script,
    pub(crate) cmd: Cmd,
}

impl Call {
    /// Starts a call of `script` with `keys` keys; add exactly that many keys first, then the
    /// arguments, with [`Call::arg`].
    pub(crate) fn new(script: &'static LazyLock<Script>, keys: usize) -> Self {
        let script: &'static Script = script;
        let mut cmd = Cmd::with_capacity(12, 256);
        cmd.arg("EVALSHA").arg(script.get_hash()).arg(keys);
        Self { script, cmd }
    }

    /// Appends a key or an argument.
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        self.cmd.arg(arg);
        self
    }
}

/// Whether `err` says the server does not know the script.
pub(crate) fn is_noscript(err: &redis::RedisError) -> bool {
    err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// The integers of an array reply of exactly `N` integers.
pub(crate) fn ints<const N: usize>(reply: &Value) -> Option<[i64; N]> {
    let Value::Array(items) = reply else {
        return None;
    };
    let mut out = [0; N];
    if items.len() != N {
        return None;
    }
    for (slot, item) in out.iter_mut().zip(items) {
        *slot = int(item)?;
    }
    Some(out)
}

/// An integer reply (or an integer sent as a string).
pub(crate) fn int(reply: &Value) -> Option<i64> {
    match reply {
        Value::Int(n) => Some(*n),
        Value::BulkString(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_evalsha_with_the_scripts_hash() {
        let mut call = Call::new(&EXTEND, 1);
        call.arg("k").arg("tok").arg(5000u64);
        let packed = String::from_utf8(call.cmd.get_packed_command()).unwrap();
        assert!(packed.starts_with("*6\r\n$7\r\nEVALSHA\r\n$40\r\n"));
        assert!(packed.contains(EXTEND.get_hash()));
        assert!(packed.ends_with("$1\r\n1\r\n$1\r\nk\r\n$3\r\ntok\r\n$4\r\n5000\r\n"));
    }

    #[test]
    fn replies_parse_without_surprises() {
        let reply = Value::Array(vec![Value::Int(1), Value::Int(7), Value::Int(900)]);
        assert_eq!(ints::<3>(&reply), Some([1, 7, 900]));
        assert_eq!(ints::<2>(&reply), None);
        assert_eq!(int(&Value::BulkString(b"42".to_vec())), Some(42));
        assert_eq!(int(&Value::Nil), None);
    }
}
